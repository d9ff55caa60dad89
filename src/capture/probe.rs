//! Built-in probes: small workloads that time each operation, print
//! percentiles and a log2 histogram, and mark every operation in the trace
//! (the recording instance's `trace_marker`, passed by `iosleuth record`
//! in `IOSLEUTH_TRACE_MARKER`) so that reports can line an operation up with
//! the kernel events under it.

use crate::analyze::histogram::{LatencyDist, Log2Hist};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Instant;

/// The environment variable through which `record` tells its workload where
/// to write operation marks.
pub const MARKER_ENV: &str = "IOSLEUTH_TRACE_MARKER";

/// Writes `iosleuth: OP N begin` / `end LAT_NS` marks, if tracing.
pub struct Marker {
    file: Option<File>,
}

impl Marker {
    pub fn from_env() -> Marker {
        let file =
            std::env::var_os(MARKER_ENV).and_then(|p| OpenOptions::new().write(true).open(p).ok());
        Marker { file }
    }
    /// One write per mark: each write to trace_marker is one event, so the
    /// text is formatted first (`write!` on a file writes piece by piece).
    fn mark(&mut self, text: String) {
        if let Some(f) = &mut self.file {
            let _ = f.write_all(text.as_bytes());
        }
    }
    pub fn begin(&mut self, op: &str, n: u64) {
        if self.file.is_some() {
            self.mark(format!("iosleuth: {op} {n} begin"));
        }
    }
    pub fn end(&mut self, op: &str, n: u64, ns: u64) {
        if self.file.is_some() {
            self.mark(format!("iosleuth: {op} {n} end {ns}"));
        }
    }
}

/// What a probe measured.
pub struct ProbeResult {
    pub op: &'static str,
    pub latencies: LatencyDist,
    pub hist_us: Log2Hist,
    /// The operation that crossed `--stop-above`, if any: (index, ns).
    pub stopped_at: Option<(u64, u64)>,
}

impl ProbeResult {
    pub fn new(op: &'static str) -> ProbeResult {
        ProbeResult {
            op,
            latencies: LatencyDist::default(),
            hist_us: Log2Hist::default(),
            stopped_at: None,
        }
    }

    /// One operation's latency, into the percentiles and the histogram.
    pub fn add(&mut self, ns: u64) {
        self.latencies.add(ns);
        self.hist_us.add(ns / 1000);
    }

    pub fn merge(&mut self, o: &ProbeResult) {
        self.latencies.merge(&o.latencies);
        self.hist_us.merge(&o.hist_us);
    }

    pub fn render(&self) -> String {
        let s = self.latencies.summary();
        let us = |ns: u64| ns as f64 / 1000.0;
        let mut out = format!(
            "{}: {} operations, latency µs: avg {:.1}, p50 {:.1}, p90 {:.1}, p99 {:.1}, p99.9 {:.1}, max {:.1}\n",
            self.op,
            s.count,
            s.avg / 1000.0,
            us(s.p50),
            us(s.p90),
            us(s.p99),
            us(s.p999),
            us(s.max)
        );
        out.push_str(&self.hist_us.render("usecs"));
        if let Some((i, ns)) = self.stopped_at {
            out.push_str(&format!(
                "stopped: operation {i} took {:.1} ms\n",
                ns as f64 / 1e6
            ));
        }
        out
    }
}

/// The test program of the measured eMMC stall: write SIZE bytes at offset 0 and fsync, COUNT
/// times (or until one takes longer than `stop_above_ms`).
pub fn fsync_loop(
    path: &Path,
    size: usize,
    count: u64,
    stop_above_ms: Option<f64>,
    append: bool,
) -> std::io::Result<ProbeResult> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)?;
    let mut buf = vec![0u8; size];
    let mut marker = Marker::from_env();
    let mut res = ProbeResult::new("write+fsync");
    for i in 0..count {
        // Different data each time, as the original program did.
        buf.iter_mut()
            .for_each(|b| *b = (i as u8).wrapping_mul(31).wrapping_add(7));
        marker.begin("fsync", i);
        let t = Instant::now();
        // Appending grows the file: every fsync then commits the journal.
        let at = if append { i * size as u64 } else { 0 };
        f.write_all_at(&buf, at)?;
        f.sync_all()?;
        let ns = t.elapsed().as_nanos() as u64;
        marker.end("fsync", i, ns);
        res.add(ns);
        if let Some(limit) = stop_above_ms {
            if i > 10 && ns as f64 / 1e6 > limit {
                res.stopped_at = Some((i, ns));
                break;
            }
        }
    }
    Ok(res)
}

/// The fio job of the measured small-journal stall: `threads` threads, each with its own file of
/// `file_size` in `dir`, writing `bs` at random aligned offsets (buffered),
/// each write followed by fsync when `fsync`, for `duration_s`.
pub fn randwrite(
    dir: &Path,
    threads: usize,
    bs: usize,
    file_size: u64,
    fsync: bool,
    duration_s: f64,
) -> std::io::Result<ProbeResult> {
    std::fs::create_dir_all(dir)?;
    let deadline = Instant::now() + std::time::Duration::from_secs_f64(duration_s);
    let blocks = (file_size / bs as u64).max(1);
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let path = dir.join(format!("iosleuth-randwrite.{t}"));
            std::thread::spawn(move || -> std::io::Result<ProbeResult> {
                let f = OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .open(&path)?;
                f.set_len(blocks * bs as u64)?;
                let buf = vec![0x5au8; bs];
                let mut marker = Marker::from_env();
                let mut mine = ProbeResult::new("");
                // xorshift: cheap, seeded per thread, reproducible.
                let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ (t as u64 + 1);
                let mut i = 0u64;
                while Instant::now() < deadline {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let off = (x % blocks) * bs as u64;
                    marker.begin("randwrite", i);
                    let t0 = Instant::now();
                    f.write_all_at(&buf, off)?;
                    if fsync {
                        f.sync_all()?;
                    }
                    let ns = t0.elapsed().as_nanos() as u64;
                    marker.end("randwrite", i, ns);
                    mine.add(ns);
                    i += 1;
                }
                let _ = std::fs::remove_file(&path);
                Ok(mine)
            })
        })
        .collect();
    let mut res = ProbeResult::new(if fsync {
        "random write+fsync"
    } else {
        "random write"
    });
    for h in handles {
        let thread_result = h
            .join()
            .map_err(|_| std::io::Error::other("a probe thread panicked"))??;
        res.merge(&thread_result);
    }
    Ok(res)
}

/// A buffer aligned for O_DIRECT.
pub(crate) struct Aligned {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

impl Aligned {
    pub(crate) fn new(len: usize) -> Aligned {
        let layout = std::alloc::Layout::from_size_align(len.max(4096), 4096).expect("layout");
        // SAFETY: non-zero size; freed in Drop with the same layout.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!ptr.is_null(), "out of memory");
        Aligned { ptr, layout }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `layout.size()` bytes allocated in `new`, owned by self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) }
    }
}

/// The pattern of the measured unmerged reads: sequential direct reads of `bs`, submitted `depth` at a
/// time through io_uring so that the block layer can merge them.
pub fn seqread(
    path: &Path,
    bs: usize,
    depth: u32,
    size: Option<u64>,
) -> std::io::Result<ProbeResult> {
    use io_uring::{opcode, types, IoUring};
    use std::io::{Seek, SeekFrom};
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::AsRawFd;
    let mut f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)?;
    let total = match size {
        Some(s) => s,
        None => f.seek(SeekFrom::End(0))?,
    };
    let ops = total / bs as u64;
    let depth = depth.max(1);
    let mut ring = IoUring::new(depth)?;
    let bufs: Vec<Aligned> = (0..depth).map(|_| Aligned::new(bs)).collect();
    let mut marker = Marker::from_env();
    let mut res = ProbeResult::new("sequential direct read");
    let mut next = 0u64;
    while next < ops {
        let batch = (ops - next).min(depth as u64) as u32;
        let started = Instant::now();
        for k in 0..batch {
            let op = next + k as u64;
            let read = opcode::Read::new(types::Fd(f.as_raw_fd()), bufs[k as usize].ptr, bs as u32)
                .offset(op * bs as u64)
                .build()
                .user_data(op);
            marker.begin("seqread", op);
            // SAFETY: the buffer outlives the operation (we wait for all).
            unsafe { ring.submission().push(&read) }
                .map_err(|_| std::io::Error::other("io_uring queue full"))?;
        }
        // One io_uring_enter for the whole batch: the reads share a plug.
        ring.submit_and_wait(batch as usize)?;
        let cqes: Vec<(u64, i32)> = ring
            .completion()
            .map(|c| (c.user_data(), c.result()))
            .collect();
        for (op, r) in cqes {
            if r < 0 {
                return Err(std::io::Error::from_raw_os_error(-r));
            }
            let ns = started.elapsed().as_nanos() as u64;
            marker.end("seqread", op, ns);
            res.add(ns);
        }
        next += batch as u64;
    }
    Ok(res)
}

/// Parses sizes like `8k`, `4K`, `16m`, `4096`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mult) = match s.chars().last() {
        Some('k' | 'K') => (&s[..s.len() - 1], 1024),
        Some('m' | 'M') => (&s[..s.len() - 1], 1024 * 1024),
        Some('g' | 'G') => (&s[..s.len() - 1], 1024 * 1024 * 1024),
        _ => (s, 1),
    };
    num.parse::<u64>()
        .map(|n| n * mult)
        .map_err(|_| format!("not a size: {s:?} (examples: 4096, 8k, 16m)"))
}

/// Pins the calling thread to `cpu`.
pub fn pin_to_cpu(cpu: usize) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET stays in bounds
    // for cpu < CPU_SETSIZE, checked first.
    unsafe {
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(std::io::Error::other(format!("no CPU {cpu}")));
        }
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A CPU burner for the scheduler workloads (an RT task starving I/O completion): busy for `on_ms`, asleep
/// for `off_ms`, for `duration_s`; optionally SCHED_FIFO at `fifo_prio`
/// and pinned to `cpu`. Each burst is one operation.
pub fn burn(
    cpu: Option<usize>,
    fifo_prio: Option<i32>,
    on_ms: f64,
    off_ms: f64,
    duration_s: f64,
) -> std::io::Result<ProbeResult> {
    if let Some(c) = cpu {
        pin_to_cpu(c)?;
    }
    if let Some(p) = fifo_prio {
        let param = libc::sched_param { sched_priority: p };
        // SAFETY: plain syscall on this thread with a valid parameter block.
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    let mut marker = Marker::from_env();
    let mut res = ProbeResult::new("burst");
    let end = Instant::now() + std::time::Duration::from_secs_f64(duration_s);
    let mut i = 0;
    while Instant::now() < end {
        marker.begin("burst", i);
        let t = Instant::now();
        let stop = t + std::time::Duration::from_secs_f64(on_ms / 1e3);
        while Instant::now() < stop {
            std::hint::spin_loop();
        }
        let ns = t.elapsed().as_nanos() as u64;
        marker.end("burst", i, ns);
        res.add(ns);
        i += 1;
        std::thread::sleep(std::time::Duration::from_secs_f64(off_ms / 1e3));
    }
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn randwrite_probe_runs_every_thread() {
        let dir = tempfile::tempdir().unwrap();
        let r = randwrite(dir.path(), 3, 4096, 1 << 20, true, 0.3).unwrap();
        assert!(r.latencies.count() >= 3, "{}", r.latencies.count());
        assert_eq!(r.hist_us.total(), r.latencies.count());
        assert!(
            std::fs::read_dir(dir.path()).unwrap().next().is_none(),
            "files removed"
        );
    }

    #[test]
    fn seqread_probe_reads_everything() {
        let dir = tempfile::Builder::new().tempdir_in("/var/tmp").unwrap();
        let p = dir.path().join("data");
        std::fs::write(&p, vec![1u8; 1 << 20]).unwrap();
        match seqread(&p, 4096, 32, None) {
            Ok(r) => assert_eq!(r.latencies.count(), 256),
            // Without io_uring (old kernel, seccomp) or O_DIRECT (tmpfs) the
            // probe cannot run; say so rather than pass silently.
            Err(e) => eprintln!("SKIPPED: seqread probe: {e}"),
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("8k"), Ok(8192));
        assert_eq!(parse_size("16M"), Ok(16 << 20));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("x").is_err());
    }

    #[test]
    fn fsync_probe_measures_each_operation() {
        let dir = tempfile::tempdir().unwrap();
        let r = fsync_loop(&dir.path().join("f"), 8192, 20, None, false).unwrap();
        assert_eq!(r.latencies.count(), 20);
        assert_eq!(r.hist_us.total(), 20);
        assert_eq!(std::fs::metadata(dir.path().join("f")).unwrap().len(), 8192);
        assert!(r.render().contains("write+fsync: 20 operations"));
        // Appending grows the file by one write each time.
        let r = fsync_loop(&dir.path().join("g"), 4096, 5, None, true).unwrap();
        assert_eq!(r.latencies.count(), 5);
        assert_eq!(
            std::fs::metadata(dir.path().join("g")).unwrap().len(),
            5 * 4096
        );
    }
}
