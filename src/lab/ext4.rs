//! An ext4 file system on a loop device, with a journal of a chosen size,
//! mounted under the loop device's own directory. Unmounted and removed on
//! drop.

use super::helper;
use super::loopdev::LoopDevice;
use crate::capture::tracefs::CaptureError;
use std::path::PathBuf;
use std::process::Command;

pub struct Ext4 {
    /// Where it is mounted.
    pub mnt: PathBuf,
    mounted: bool,
    // Dropped after the unmount (fields drop in declaration order).
    pub disk: LoopDevice,
}

fn run(cmd: &mut Command, what: &str) -> Result<(), CaptureError> {
    let out = cmd
        .output()
        .map_err(|e| CaptureError::Unusable(format!("cannot run {what}: {e}")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(CaptureError::Unusable(format!(
            "{what} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

impl Ext4 {
    /// `size_mb` of disk, `journal_mb` of journal (ext4's minimum is 1 MiB;
    /// 4 MiB and 1024 MiB are the two sides of the measured small-journal fsync stall).
    pub fn create(size_mb: u64, journal_mb: u64, direct_io: bool) -> Result<Ext4, CaptureError> {
        Self::on(LoopDevice::create(size_mb, direct_io)?, journal_mb)
    }

    /// ext4 on a given lab disk (a slow one, say). The disk says it has no
    /// volatile write cache, so fsync sends it no cache flushes: a loop
    /// device passes each flush on as an fsync of its file, which on a VM
    /// now and then takes the host tens of ms — a real device spike, but
    /// one the scenarios are not about (their good runs must stay clean).
    pub fn on(mut disk: LoopDevice, journal_mb: u64) -> Result<Ext4, CaptureError> {
        disk.set_queue("write_cache", "write through")?;
        run(
            helper("mkfs.ext4")
                // Inode tables now, not by a background thread during a
                // recording; the journal is scratch and need not be zeroed.
                .args(["-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=1"])
                .arg("-J")
                .arg(format!("size={journal_mb}"))
                .arg(&disk.path),
            "mkfs.ext4 (package e2fsprogs)",
        )?;
        Self::mount(disk, "ext4")
    }
}

impl Ext4 {
    /// XFS instead, on a new disk of `size_mb` (at least 300: mkfs.xfs's
    /// minimum; the disk is a sparse file on tmpfs) (the lab's mounted file
    /// system, unmounted on drop as ext4 is): XFS writes into the page
    /// cache without blocking where ext4 may not, which io_uring's
    /// scenario compares.
    pub fn xfs(size_mb: u64) -> Result<Ext4, CaptureError> {
        let disk = LoopDevice::create(size_mb, true)?;
        run(
            helper("mkfs.xfs").args(["-q", "-f"]).arg(&disk.path),
            "mkfs.xfs (package xfsprogs)",
        )?;
        Self::mount(disk, "xfs")
    }

    /// `disk`'s file system (of type `fstype`) mounted under the disk's
    /// own directory.
    fn mount(disk: LoopDevice, fstype: &str) -> Result<Ext4, CaptureError> {
        let mnt = disk.backing_file().with_file_name("mnt");
        std::fs::create_dir_all(&mnt)?;
        run(
            helper("mount")
                .args(["-t", fstype])
                .arg(&disk.path)
                .arg(&mnt),
            "mount",
        )?;
        Ok(Ext4 {
            mnt,
            mounted: true,
            disk,
        })
    }

    /// The journal's place on the disk, in bytes (debugfs: the extents of
    /// inode 8; ext4 makes the journal contiguous).
    pub fn journal_bytes(&self) -> Result<std::ops::Range<u64>, CaptureError> {
        let out = |args: &[&str]| -> Result<String, CaptureError> {
            let o = helper(args[0])
                .args(&args[1..])
                .arg(&self.disk.path)
                .output()
                .map_err(|e| CaptureError::Unusable(format!("cannot run {}: {e}", args[0])))?;
            Ok(String::from_utf8_lossy(&o.stdout).into_owned())
        };
        let block: u64 = out(&["dumpe2fs", "-h"])?
            .lines()
            .find_map(|l| l.strip_prefix("Block size:"))
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| CaptureError::Unusable("dumpe2fs printed no block size".into()))?;
        let stat = out(&["debugfs", "-R", "stat <8>"])?;
        // `(0-4095):49153-53248`
        let (first, last) = stat
            .split_whitespace()
            .filter_map(|w| w.split_once("):"))
            .filter_map(|(_, r)| r.split_once('-'))
            .filter_map(|(a, b)| {
                Some((
                    a.parse::<u64>().ok()?,
                    b.trim_end_matches(',').parse::<u64>().ok()?,
                ))
            })
            .fold(None, |acc: Option<(u64, u64)>, (a, b)| match acc {
                None => Some((a, b)),
                Some((x, y)) => Some((x.min(a), y.max(b))),
            })
            .ok_or_else(|| CaptureError::Unusable("debugfs printed no journal extents".into()))?;
        Ok(first * block..(last + 1) * block)
    }
}

impl Drop for Ext4 {
    fn drop(&mut self) {
        if self.mounted {
            // A process still inside (killed workload not yet reaped): lazy.
            if run(helper("umount").arg(&self.mnt), "umount").is_err() {
                let _ = run(helper("umount").arg("-l").arg(&self.mnt), "umount -l");
            }
            self.mounted = false;
        }
    }
}
