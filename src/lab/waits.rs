//! Lab scenarios for waits that are not the storage stack's: the
//! workload's threads waiting for a CPU that ordinary processes hold
//! (`cpu_contention`), and writes waiting in a kernel function on a
//! user-space file system that answers late, which no rule knows (the
//! `unexplained` finding names the function from the kernel stacks).

use super::ext4::Ext4;
use super::loopdev::LoopDevice;
use super::recording::{Lab, Standing};
use super::scenarios::fsync_script;
use super::slowdisk::Stall;
use crate::capture::tracefs::CaptureError;
use std::time::Duration;

/// `cpu_contention`: the fsync loop pinned to CPU 1, alone, then beside
/// two busy shell loops at nice -10 on the same CPU (loops that make no
/// system call, so that the trace holds the workload's). Ordinary tasks
/// (SCHED_OTHER): a larger weight, not a real-time class, keeps the fsync
/// thread waiting each time its I/O completes.
pub fn cpu_contention(lab: &Lab) -> Result<(), CaptureError> {
    let fs = Ext4::create(256, 8, true)?;
    let events = "block,fs,sched,syscalls";
    let fsync = fsync_script(&fs, 600, Some(1));
    lab.record(&lab.good(), events, &fsync)?;
    // Two busy loops beside the workload, not in it, as other work on a
    // machine is: `--try` renices them between its rounds.
    let hog = || {
        Standing::program(
            lab,
            "taskset",
            &[
                "-c",
                "1",
                "nice",
                "-n",
                "-10",
                "sh",
                "-c",
                "while :; do :; done",
            ],
        )
    };
    let _hogs = (hog()?, hog()?);
    std::thread::sleep(Duration::from_millis(50));
    lab.record(&lab.bad(), events, &fsync)
}

/// A wait no rule knows: `dd` writes 4 KiB blocks straight to a file on
/// the lab's FUSE file system (each write a request its server answers),
/// recorded with kernel stacks; the server answers at once, then holds
/// every 100th write 30 ms. The writers sleep in the FUSE request's wait,
/// with nothing at any block device.
pub fn fuse_wait(lab: &Lab) -> Result<(), CaptureError> {
    let events = "block,fs,sched,syscalls";
    for (out, every) in [(lab.good(), 0), (lab.bad(), 100)] {
        let disk = LoopDevice::create_slow(64, Stall::writes(every, Duration::from_millis(30)))?;
        let image = disk
            .fuse_image()
            .ok_or_else(|| CaptureError::Unusable("the slow disk has no FUSE image".into()))?;
        let script = format!(
            "dd if=/dev/zero of={} bs=4k count=2000 conv=notrunc status=none",
            image.display()
        );
        lab.record_with(&out, events, &["--stacks"], &script)?;
    }
    Ok(())
}
