//! Copies a tracefs `trace_pipe` to a file on a thread until told to stop,
//! then drains what is still buffered.

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

pub struct PipeReader {
    stop: Arc<AtomicBool>,
    copied: Arc<std::sync::atomic::AtomicU64>,
    thread: Option<JoinHandle<std::io::Result<u64>>>,
}

impl PipeReader {
    /// Opens `pipe` without blocking (so the thread can notice `stop`) and
    /// starts copying it into `out`.
    pub fn spawn(pipe: &Path, out: File) -> std::io::Result<PipeReader> {
        Self::spawn_every(pipe, out, Duration::from_millis(5))
    }

    /// Like `spawn`, polling an empty pipe every `poll`. For raw ring-buffer
    /// pages a longer period means fuller pages (each read takes the page
    /// being filled); the buffer must hold `poll` worth of events.
    pub fn spawn_every(pipe: &Path, out: File, poll: Duration) -> std::io::Result<PipeReader> {
        Self::spawn_inner(pipe, out, poll, false)
    }

    /// For `trace_pipe_raw`: after a page less than half full, wait `poll`
    /// before the next read. Reading at once would hand out a page holding
    /// little more than the events our own read and write just caused, over
    /// and over: a loop writing nearly empty pages at full speed.
    pub fn spawn_raw(pipe: &Path, out: File, poll: Duration) -> std::io::Result<PipeReader> {
        Self::spawn_inner(pipe, out, poll, true)
    }

    fn spawn_inner(
        pipe: &Path,
        mut out: File,
        poll: Duration,
        raw_pages: bool,
    ) -> std::io::Result<PipeReader> {
        let mut pipe = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(pipe)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop_r = stop.clone();
        let copied = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let copied_r = copied.clone();
        let thread = std::thread::spawn(move || -> std::io::Result<u64> {
            let mut buf = vec![0u8; 1 << 20];
            let mut total = 0u64;
            let mut idle_after_stop = 0;
            loop {
                match pipe.read(&mut buf) {
                    Ok(n) if n > 0 => {
                        out.write_all(&buf[..n])?;
                        total += n as u64;
                        copied_r.store(total, Ordering::Relaxed);
                        idle_after_stop = 0;
                        // Page header: 8-byte timestamp, then the commit word
                        // whose low bits are the data length.
                        if raw_pages && n >= 16 && !stop_r.load(Ordering::Acquire) {
                            let commit =
                                u32::from_le_bytes(buf[8..12].try_into().unwrap()) & 0x3fff_ffff;
                            if (commit as usize) < n / 2 {
                                std::thread::sleep(poll);
                            }
                        }
                        continue;
                    }
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
                if stop_r.load(Ordering::Acquire) {
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
        });
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

impl Drop for PipeReader {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}
