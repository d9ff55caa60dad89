//! On-CPU sampling of every CPU, as `perf record -F 99 -a -g` does it but
//! without the perf binary: one `perf_event_open` CPU-clock event per CPU,
//! sampling at a frequency, with the kernel call chain; its mmap ring
//! buffer is drained by a thread into `samples-cpuN.perf` in the capture:
//! the kernel's records as they are (the layout of perf.data's records),
//! decoded by `ingest::perf_samples`. Time stamps are CLOCK_MONOTONIC, the
//! trace's clock, so samples and events line up.
//!
//! Call chains hold user-space frames too. To name them later, the
//! events also report each new executable mapping and each new process
//! (PERF_RECORD_MMAP and _FORK, time-stamped by `sample_id_all`), and the
//! mappings of the processes already running are written at the start
//! (`write_start_maps`), as `perf record` synthesizes them from /proc.

use super::tracefs::CaptureError;
use std::fs::File;
use std::io::Write;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::model::perf_record::{self, SAMPLE_TYPE};

/// Data pages of each CPU's ring buffer (a power of two): 256 KiB holds
/// over a second of 99 Hz samples with deep stacks; the reader drains it
/// every 50 ms.
const DATA_PAGES: usize = 64;

/// `perf_event_attr` as the kernel reads it (PERF_ATTR_SIZE_VER5, 112
/// bytes), written field by field at the offsets of
/// include/uapi/linux/perf_event.h.
fn attr(freq: u64) -> [u8; 112] {
    let mut a = [0u8; 112];
    let put32 =
        |a: &mut [u8; 112], at: usize, v: u32| a[at..at + 4].copy_from_slice(&v.to_ne_bytes());
    let put64 =
        |a: &mut [u8; 112], at: usize, v: u64| a[at..at + 8].copy_from_slice(&v.to_ne_bytes());
    put32(&mut a, 0, 1); // type: PERF_TYPE_SOFTWARE
    put32(&mut a, 4, 112); // size
    put64(&mut a, 8, 0); // config: PERF_COUNT_SW_CPU_CLOCK
    put64(&mut a, 16, freq); // sample_freq
    put64(&mut a, 24, SAMPLE_TYPE);
    // flags: disabled (0), mmap (8), comm (9), freq (10), task (13),
    // sample_id_all (18), comm_exec (24), use_clockid (25).
    let flags = [0, 8, 9, 10, 13, 18, 24, 25];
    put64(&mut a, 40, flags.iter().map(|b| 1u64 << b).sum());
    put32(&mut a, 92, libc::CLOCK_MONOTONIC as u32); // clockid
    a
}

/// Writes to `out` a PERF_RECORD_MMAP for each executable file mapping
/// of each process now running (from /proc/PID/maps); processes that
/// exit meanwhile are passed over. Returns how many. Call it once the
/// events are enabled, so that no mapping falls between the two; the
/// records are stamped time 0, the state every later MMAP record
/// changes.
pub fn write_start_maps(out: &mut impl Write) -> std::io::Result<usize> {
    let mut n = 0;
    for entry in std::fs::read_dir("/proc")?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(maps) = std::fs::read_to_string(entry.path().join("maps")) else {
            continue;
        };
        for (start, len, pgoff, path) in maps.lines().filter_map(executable_mapping) {
            out.write_all(&perf_record::mmap_record(
                pid,
                start,
                len,
                pgoff,
                path.as_bytes(),
                0,
            ))?;
            n += 1;
        }
    }
    Ok(n)
}

/// Writes this machine's vDSO image (the kernel's code mapped as
/// `[vdso]` into every process, the same for all) to `out`, so that user
/// frames in it (clock_gettime and the like) are named from the capture,
/// as perf keeps it in its build-id cache. Returns its size, 0 when there
/// is none.
pub fn write_vdso(out: &mut impl Write) -> std::io::Result<usize> {
    let maps = std::fs::read_to_string("/proc/self/maps")?;
    let Some((start, len)) = maps
        .lines()
        .filter(|l| l.ends_with(" [vdso]"))
        .find_map(|l| {
            let (range, _) = l.split_once(' ')?;
            let (a, b) = range.split_once('-')?;
            let a = u64::from_str_radix(a, 16).ok()?;
            Some((a, u64::from_str_radix(b, 16).ok()?.checked_sub(a)?))
        })
    else {
        return Ok(0);
    };
    // SAFETY: the kernel maps [vdso] readable in every process for its
    // whole life; these are this process's own pages.
    let image = unsafe { std::slice::from_raw_parts(start as *const u8, len as usize) };
    out.write_all(image)?;
    Ok(image.len())
}

/// An executable file mapping of a /proc/PID/maps line
/// (`start-end perms offset dev inode path`): start, length, file offset
/// and path.
fn executable_mapping(line: &str) -> Option<(u64, u64, u64, &str)> {
    let m = super::proc_files::mapping(line).filter(|m| m.executable && !m.path.is_empty())?;
    Some((m.start, m.end - m.start, m.offset, m.path))
}

const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
const PERF_EVENT_IOC_DISABLE: libc::c_ulong = 0x2401;

/// One CPU's event, its ring buffer and the thread draining it.
struct CpuSampler {
    fd: libc::c_int,
    map: *mut libc::c_void,
    map_len: usize,
}

// SAFETY: the mapping is read and its tail written only by the drain
// thread; the other holder only issues ioctls on the fd, and the mapping
// is unmapped when the last holder drops it, after the thread ended.
unsafe impl Send for CpuSampler {}
unsafe impl Sync for CpuSampler {}

pub struct Sampler {
    cpus: Vec<(u32, Arc<CpuSampler>)>,
    threads: Vec<JoinHandle<std::io::Result<u64>>>,
    stop: Arc<AtomicBool>,
    pub lost: Arc<AtomicU64>,
}

impl Sampler {
    /// Opens and maps one sampling event per CPU in `cpus`, starts their
    /// drain threads (writing `out(cpu)`) and enables them.
    pub fn start(
        cpus: &[u32],
        freq: u64,
        out: impl Fn(u32) -> std::io::Result<File>,
    ) -> Result<Sampler, CaptureError> {
        let page = super::recorder::page_size();
        let mut s = Sampler {
            cpus: Vec::new(),
            threads: Vec::new(),
            stop: Arc::new(AtomicBool::new(false)),
            lost: Arc::new(AtomicU64::new(0)),
        };
        let a = attr(freq);
        for &cpu in cpus {
            // SAFETY: perf_event_open with a valid attr buffer of its size.
            let fd = unsafe {
                libc::syscall(
                    libc::SYS_perf_event_open,
                    a.as_ptr(),
                    -1i32,
                    cpu as i32,
                    -1i32,
                    PERF_FLAG_FD_CLOEXEC,
                )
            } as libc::c_int;
            if fd < 0 {
                let e = std::io::Error::last_os_error();
                return Err(CaptureError::Unusable(format!(
                    "perf_event_open (CPU clock sampling) on CPU {cpu}: {e} (needs root, or kernel.perf_event_paranoid <= 0)"
                )));
            }
            let map_len = (1 + DATA_PAGES) * page;
            // SAFETY: mapping the event's ring buffer, as perf does.
            let map = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    map_len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    fd,
                    0,
                )
            };
            if map == libc::MAP_FAILED {
                let e = std::io::Error::last_os_error();
                unsafe { libc::close(fd) };
                return Err(CaptureError::Unusable(format!(
                    "mmap of the sampling buffer of CPU {cpu}: {e}"
                )));
            }
            let c = Arc::new(CpuSampler { fd, map, map_len });
            s.cpus.push((cpu, c.clone()));
            let file = out(cpu)
                .map_err(|e| CaptureError::Unusable(format!("samples file of CPU {cpu}: {e}")))?;
            let (stop, lost) = (s.stop.clone(), s.lost.clone());
            s.threads.push(std::thread::spawn(move || {
                drain(&c, file, &stop, &lost, page)
            }));
        }
        for (_, c) in &s.cpus {
            // SAFETY: an ioctl on our own perf event fd.
            unsafe { libc::ioctl(c.fd, PERF_EVENT_IOC_ENABLE, 0) };
        }
        Ok(s)
    }

    /// Disables the events, drains what is left and closes everything;
    /// returns the bytes written.
    pub fn stop(mut self) -> std::io::Result<u64> {
        self.finish()
    }

    fn finish(&mut self) -> std::io::Result<u64> {
        for (_, c) in &self.cpus {
            unsafe { libc::ioctl(c.fd, PERF_EVENT_IOC_DISABLE, 0) };
        }
        self.stop.store(true, Ordering::Release);
        let mut bytes = 0;
        let mut result = Ok(());
        for t in self.threads.drain(..) {
            match t.join() {
                Ok(Ok(n)) => bytes += n,
                Ok(Err(e)) => result = Err(e),
                Err(_) => result = Err(std::io::Error::other("sample reader panicked")),
            }
        }
        self.cpus.clear();
        result.map(|_| bytes)
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

impl Drop for CpuSampler {
    fn drop(&mut self) {
        // SAFETY: our own mapping and fd, no longer used by any thread.
        unsafe {
            libc::munmap(self.map, self.map_len);
            libc::close(self.fd);
        }
    }
}

/// Copies the ring buffer's records to `out` until `stop` and the buffer
/// is empty; counts PERF_RECORD_LOST.
fn drain(
    c: &CpuSampler,
    mut out: File,
    stop: &AtomicBool,
    lost: &AtomicU64,
    page: usize,
) -> std::io::Result<u64> {
    let base = c.map as *mut u8;
    // perf_event_mmap_page: data_head at 1024, data_tail at 1032.
    let head_ptr = unsafe { base.add(1024) } as *const u64;
    let tail_ptr = unsafe { base.add(1032) } as *mut u64;
    let data = unsafe { base.add(page) };
    let size = DATA_PAGES * page;
    let mut written = 0u64;
    let mut buf = Vec::with_capacity(size);
    loop {
        let stopping = stop.load(Ordering::Acquire);
        // SAFETY: the kernel writes data_head; read it once, then fence so
        // that the data it covers is seen (perf's own protocol).
        let head = unsafe { std::ptr::read_volatile(head_ptr) };
        fence(Ordering::Acquire);
        let tail = unsafe { std::ptr::read_volatile(tail_ptr) };
        if head > tail {
            let len = ((head - tail) as usize).min(size);
            let from = (tail as usize) % size;
            buf.clear();
            // SAFETY: both ranges lie inside the data pages.
            unsafe {
                let first = len.min(size - from);
                buf.extend_from_slice(std::slice::from_raw_parts(data.add(from), first));
                buf.extend_from_slice(std::slice::from_raw_parts(data, len - first));
            }
            count_lost(&buf, lost);
            out.write_all(&buf)?;
            written += buf.len() as u64;
            fence(Ordering::Release);
            unsafe { std::ptr::write_volatile(tail_ptr, tail + len as u64) };
            continue;
        }
        if stopping {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    out.flush()?;
    Ok(written)
}

/// Adds the counts of PERF_RECORD_LOST records in `buf` to `lost`.
fn count_lost(buf: &[u8], lost: &AtomicU64) {
    let mut at = 0;
    while let Some((kind, size)) = perf_record::header(&buf[at..]) {
        if size < perf_record::HEADER_LEN {
            break;
        }
        if kind == perf_record::RECORD_LOST {
            let body = buf
                .get(at + perf_record::HEADER_LEN..at + size)
                .unwrap_or(&[]);
            lost.fetch_add(perf_record::lost(body).unwrap_or(0), Ordering::Relaxed);
        }
        at += size;
        if at >= buf.len() {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_executable_file_mappings_of_proc_maps() {
        let line = "7f1c2a428000-7f1c2a5b0000 r-xp 00028000 fe:01 1053412                    /usr/lib/x86_64-linux-gnu/libc.so.6";
        assert_eq!(
            executable_mapping(line),
            Some((
                0x7f1c2a428000,
                0x188000,
                0x28000,
                "/usr/lib/x86_64-linux-gnu/libc.so.6"
            ))
        );
        let spaced = "5000-6000 r-xp 00000000 fe:01 7 /tmp/a b (deleted)";
        assert_eq!(executable_mapping(spaced).unwrap().3, "/tmp/a b (deleted)");
        assert_eq!(
            executable_mapping("5000-6000 rw-p 00000000 fe:01 7 /tmp/a"),
            None
        );
        assert_eq!(executable_mapping("5000-6000 r-xp 00000000 00:00 0 "), None);
        assert_eq!(executable_mapping("garbage"), None);
    }

    #[test]
    fn the_vdso_is_an_elf_image_naming_clock_gettime() {
        let mut out = Vec::new();
        assert!(write_vdso(&mut out).unwrap() > 0);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("vdso.so");
        std::fs::write(&p, &out).unwrap();
        let syms =
            crate::symbolize::elf_symbols::ElfSymbols::load(&p, None, &mut Vec::new()).unwrap();
        let named = (0..out.len() as u64)
            .step_by(16)
            .filter_map(|o| syms.at_file_offset(o))
            .any(|n| n.contains("clock_gettime"));
        assert!(named);
    }

    #[test]
    fn this_process_has_its_own_binary_mapped() {
        let mut out = Vec::new();
        assert!(write_start_maps(&mut out).unwrap() > 0);
        let me = std::env::current_exe().unwrap();
        let me = me.to_str().unwrap().as_bytes();
        assert!(out.windows(me.len()).any(|w| w == me));
    }
}
