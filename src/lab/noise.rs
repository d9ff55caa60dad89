//! The machine's own noise, measured with nothing of the lab's running: how
//! late a 1 ms sleep wakes up (CPUs taken by other work) and how long a
//! 4 KiB direct write and read take on a lab disk (the device path the
//! scenarios use). A scenario that did not go as expected on a machine this
//! noisy is inconclusive, not failed: its findings may be the machine's.

use super::loopdev::LoopDevice;
use crate::capture::tracefs::CaptureError;
use std::time::{Duration, Instant};

/// Noise at or past this could be what a finding fired on: the rules that
/// judge device spikes and runqueue waits fire at tens of milliseconds,
/// while an idle VM measures well under a millisecond of both.
pub const TOO_NOISY: Duration = Duration::from_millis(10);

/// How long each measurement runs.
pub const WINDOW: Duration = Duration::from_millis(300);

#[derive(Debug, Clone, Copy, Default)]
pub struct Noise {
    /// The latest wake-up of a 1 ms sleep, past its 1 ms.
    pub wakeup_late: Duration,
    /// The slowest 4 KiB direct write or read.
    pub device: Duration,
}

impl Noise {
    /// The worse of two measurements, field by field.
    pub fn max(self, other: Noise) -> Noise {
        Noise {
            wakeup_late: self.wakeup_late.max(other.wakeup_late),
            device: self.device.max(other.device),
        }
    }

    pub fn too_noisy(&self) -> bool {
        self.wakeup_late >= TOO_NOISY || self.device >= TOO_NOISY
    }

    /// "device 0.4 ms, wake-up 0.1 ms late"
    pub fn figures(&self) -> String {
        format!(
            "device {:.1} ms, wake-up {:.1} ms late",
            ms(self.device),
            ms(self.wakeup_late)
        )
    }

    /// Why a run on this machine cannot be judged, in the user's words.
    pub fn why_inconclusive(&self) -> String {
        if self.device >= self.wakeup_late {
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
    })
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
