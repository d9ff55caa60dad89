//! Copies a tracefs `trace_pipe` to a file on a thread until told to stop,
//! then drains what is still buffered.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

pub struct PipeReader {
    stop: Arc<AtomicBool>,
    copied: Arc<AtomicU64>,
    thread: Option<JoinHandle<std::io::Result<u64>>>,
}

impl PipeReader {
    /// Opens `pipe` without blocking (so the thread can notice `stop`) and
    /// starts copying it into `out`.
    pub fn spawn(pipe: &Path, out: File) -> std::io::Result<PipeReader> {
        let poll = Duration::from_millis(5);
        Self::spawn_with(pipe, out, move |pipe, mut out, stop, copied| {
            copy_until_drained(pipe, &mut out, stop, copied, poll, 0)
        })
    }

    /// For `trace_pipe_raw`: while tracing, moves whole ring-buffer pages
    /// into `out` with splice (no copy through user space, up to a pipe's
    /// worth of pages per call; the kernel hands out only full pages, so an
    /// idle CPU does not produce a stream of nearly empty ones). After
    /// `finish`, the partly filled pages left are read with read(2).
    pub fn spawn_raw(pipe: &Path, out: File, poll: Duration) -> std::io::Result<PipeReader> {
        Self::spawn_with(pipe, out, move |raw, mut out, stop, copied| {
            let total = splice_pages(&raw, &out, stop, copied, poll)?;
            copy_until_drained(raw, &mut out, stop, copied, poll, total)
        })
    }

    /// Opens `pipe` without blocking (so the thread can notice `stop`) and
    /// runs `copy(pipe, out, stop, copied)` on a thread; it returns the
    /// bytes copied.
    fn spawn_with(
        pipe: &Path,
        out: File,
        copy: impl FnOnce(File, File, &AtomicBool, &AtomicU64) -> std::io::Result<u64> + Send + 'static,
    ) -> std::io::Result<PipeReader> {
        let pipe = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(pipe)?;
        let stop = Arc::new(AtomicBool::new(false));
        let copied = Arc::new(AtomicU64::new(0));
        let (stop_r, copied_r) = (stop.clone(), copied.clone());
        let thread = std::thread::spawn(move || copy(pipe, out, &stop_r, &copied_r));
        Ok(PipeReader {
            stop,
            copied,
            thread: Some(thread),
        })
    }

    /// Asks the thread to finish once the pipe is empty; returns the bytes
    /// copied. Call after tracing was turned off.
    pub fn finish(&mut self) -> std::io::Result<u64> {
        self.stop.store(true, Ordering::Release);
        match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| std::io::Error::other("the trace reader thread panicked"))?,
            None => Ok(0),
        }
    }

    /// Bytes copied so far (for progress lines).
    pub fn copied(&self) -> u64 {
        self.copied.load(Ordering::Relaxed)
    }

    pub fn is_running(&self) -> bool {
        self.thread.is_some()
    }
}

/// Copies `pipe` into `out` with read/write until `stop` is set and the pipe
/// was then found empty twice. Returns the running total (starting at
/// `total`).
fn copy_until_drained(
    mut pipe: File,
    out: &mut File,
    stop: &AtomicBool,
    copied: &AtomicU64,
    poll: Duration,
    mut total: u64,
) -> std::io::Result<u64> {
    let mut buf = vec![0u8; 1 << 20];
    let mut idle_after_stop = 0;
    loop {
        match pipe.read(&mut buf) {
            Ok(n) if n > 0 => {
                out.write_all(&buf[..n])?;
                total += n as u64;
                copied.store(total, Ordering::Relaxed);
                idle_after_stop = 0;
                continue;
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        if stop.load(Ordering::Acquire) {
            idle_after_stop += 1;
            // Empty twice after tracing stopped: drained.
            if idle_after_stop >= 2 {
                break;
            }
        }
        std::thread::sleep(poll);
    }
    out.flush()?;
    Ok(total)
}

/// Moves full pages from `raw` to `out` through a pipe until `stop` is set.
/// Returns the bytes moved. Falls back to nothing (the caller's read loop
/// takes over) where splice is refused.
fn splice_pages(
    raw: &File,
    out: &File,
    stop: &AtomicBool,
    copied: &AtomicU64,
    poll: Duration,
) -> std::io::Result<u64> {
    let mut fds = [0; 2];
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Ok(0);
    }
    // SAFETY: pipe2 just returned these two descriptors; OwnedFd closes them.
    let (pipe_r, pipe_w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // A bigger pipe moves more pages per call; the default (16 pages) works too.
    let size = unsafe { libc::fcntl(pipe_w.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20) };
    let chunk = if size > 0 { size as usize } else { 16 * 4096 };
    let mut total = 0u64;
    while !stop.load(Ordering::Acquire) {
        let n = unsafe {
            libc::splice(
                raw.as_raw_fd(),
                std::ptr::null_mut(),
                pipe_w.as_raw_fd(),
                std::ptr::null_mut(),
                chunk,
                libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
            )
        };
        if n > 0 {
            let mut left = n as usize;
            while left > 0 {
                let m = unsafe {
                    libc::splice(
                        pipe_r.as_raw_fd(),
                        std::ptr::null_mut(),
                        out.as_raw_fd(),
                        std::ptr::null_mut(),
                        left,
                        libc::SPLICE_F_MOVE,
                    )
                };
                if m < 0 {
                    let e = std::io::Error::last_os_error();
                    if e.kind() == std::io::ErrorKind::Interrupted {
                        continue;
                    }
                    return Err(e);
                }
                left -= m as usize;
            }
            total += n as u64;
            copied.store(total, Ordering::Relaxed);
            continue;
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EINTR) => std::thread::sleep(poll),
            _ if n == 0 => std::thread::sleep(poll),
            // EINVAL/ENOSYS: no splice here; read(2) does the whole job.
            _ => return Ok(total),
        }
    }
    Ok(total)
}

impl Drop for PipeReader {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}
