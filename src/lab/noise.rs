//! The machine's own noise, measured with nothing of the lab's running: how
//! late a 1 ms sleep wakes up (CPUs taken by other work), how much of the
//! CPUs a busy thread on each gets (other work at the same priority wakes
//! no sleeper late, yet halves what a scenario's threads and loop workers
//! get done), and how long a 4 KiB direct write and read take on a lab disk
//! (the device path the scenarios use). A scenario that did not go as expected on a machine this
//! noisy is inconclusive, not failed: its findings may be the machine's.

use super::loopdev::LoopDevice;
use crate::capture::tracefs::CaptureError;
use std::time::{Duration, Instant};

/// Noise at or past this could be what a finding fired on: the rules that
/// judge device spikes and runqueue waits fire at tens of milliseconds,
/// while an idle VM measures well under a millisecond of both.
pub const TOO_NOISY: Duration = Duration::from_millis(10);

/// A scenario's threads getting less than this share of the CPUs could be
/// what it measured: the queue scenario's device is busy only while its
/// submitter runs (seen: %util 67 instead of 97 beside a compiler on both
/// CPUs), while an idle VM gives a busy thread over 95 %.
pub const CPU_SHARE_MIN: f64 = 0.8;
/// How long each measurement runs.
pub const WINDOW: Duration = Duration::from_millis(300);

#[derive(Debug, Clone, Copy, Default)]
pub struct Noise {
    /// The latest wake-up of a 1 ms sleep, past its 1 ms.
    pub wakeup_late: Duration,
    /// The slowest 4 KiB direct write or read.
    pub device: Duration,
    /// The share of its time on CPU a busy thread on each CPU got (the
    /// least of them); 1 when not measured.
    pub cpu_share: f64,
}

impl Noise {
    /// The worse of two measurements, field by field.
    pub fn max(self, other: Noise) -> Noise {
        Noise {
            wakeup_late: self.wakeup_late.max(other.wakeup_late),
            device: self.device.max(other.device),
            cpu_share: self.cpu_share.min(other.cpu_share),
        }
    }

    pub fn too_noisy(&self) -> bool {
        self.wakeup_late >= TOO_NOISY || self.device >= TOO_NOISY || self.cpu_share < CPU_SHARE_MIN
    }

    /// "device 0.4 ms, wake-up 0.1 ms late, CPUs 99 % ours"
    pub fn figures(&self) -> String {
        format!(
            "device {:.1} ms, wake-up {:.1} ms late, CPUs {:.0} % ours",
            ms(self.device),
            ms(self.wakeup_late),
            self.cpu_share * 100.0
        )
    }

    /// Why a run on this machine cannot be judged, in the user's words.
    pub fn why_inconclusive(&self) -> String {
        if self.cpu_share < CPU_SHARE_MIN && self.device < TOO_NOISY && self.wakeup_late < TOO_NOISY
        {
            format!(
                "a busy thread got {:.0} % of a CPU with nothing of ours running (other work held the CPUs)",
                self.cpu_share * 100.0
            )
        } else if self.device >= self.wakeup_late {
            format!(
                "this machine's lab disk stalled {:.1} ms with nothing of ours running",
                ms(self.device)
            )
        } else {
            format!(
                "a 1 ms sleep woke {:.1} ms late with nothing of ours running (other work held the CPUs)",
                ms(self.wakeup_late)
            )
        }
    }
}

fn ms(d: Duration) -> f64 {
    crate::model::units::ms(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Measures both for `window`, on a fresh 8 MiB lab disk (removed after).
pub fn measure(window: Duration) -> Result<Noise, CaptureError> {
    let disk = LoopDevice::create(8, true)?;
    let sleeper = std::thread::spawn(move || {
        let end = Instant::now() + window;
        let mut late = Duration::ZERO;
        while Instant::now() < end {
            let t = Instant::now();
            std::thread::sleep(Duration::from_millis(1));
            late = late.max(t.elapsed().saturating_sub(Duration::from_millis(1)));
        }
        late
    });
    let device = device_latency(&disk.path, window);
    let wakeup_late = sleeper.join().unwrap_or_default();
    Ok(Noise {
        wakeup_late,
        device: device?,
        cpu_share: cpu_share(window),
    })
}

/// The least share of the wall time a busy thread got on CPU, one thread a
/// CPU, for `window` (after the other measurements: they would compete).
fn cpu_share(window: Duration) -> f64 {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let spinners: Vec<_> = (0..cpus)
        .map(|_| {
            std::thread::spawn(move || {
                let start = Instant::now();
                let cpu0 = thread_cpu();
                while start.elapsed() < window {
                    std::hint::spin_loop();
                }
                let wall = start.elapsed().as_secs_f64();
                (thread_cpu() - cpu0) / wall.max(1e-9)
            })
        })
        .collect();
    spinners
        .into_iter()
        .map(|t| t.join().unwrap_or(1.0))
        .fold(1.0f64, f64::min)
        .clamp(0.0, 1.0)
}

/// This thread's CPU time (s).
fn thread_cpu() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write into.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// The slowest of 4 KiB direct writes and reads walking the disk, for
/// `window`.
fn device_latency(dev: &std::path::Path, window: Duration) -> Result<Duration, CaptureError> {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT | libc::O_DSYNC)
        .open(dev)?;
    let mut buf = crate::capture::probe::Aligned::new(4096);
    let blocks = (8u64 << 20) / 4096;
    let end = Instant::now() + window;
    let mut worst = Duration::ZERO;
    let mut i = 0u64;
    while Instant::now() < end {
        let at = (i * 7 % blocks) * 4096;
        let t = Instant::now();
        f.write_all_at(&buf.as_mut_slice()[..4096], at)?;
        f.read_exact_at(&mut buf.as_mut_slice()[..4096], at)?;
        worst = worst.max(t.elapsed());
        i += 1;
    }
    Ok(worst)
}
