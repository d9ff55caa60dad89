//! Loop devices over files that iosleuth creates and removes itself. It
//! never touches a device it did not create. The files sit in a tmpfs of
//! their own (RAM), so that other work's disk traffic cannot show up as a
//! device stall in a scenario that is not about the machine's disk.

use crate::capture::tracefs::{CaptureError, Knob};
use std::path::{Path, PathBuf};

/// The block layer's default cap on a request (`BLK_DEF_MAX_SECTORS_CAP`,
/// 2560 sectors) in KiB.
const DEFAULT_MAX_SECTORS_KB: u64 = 1280;

/// The devices this process attached, in order, as `MAJ,MIN`, and whether
/// each sits on a file in RAM: the lab judges a scenario by the findings
/// about its own devices (the machine's disk may be busy with other work).
static ATTACHED: std::sync::Mutex<Vec<(String, bool)>> = std::sync::Mutex::new(Vec::new());

/// How many devices this process attached so far.
pub fn attached_count() -> usize {
    ATTACHED.lock().map(|a| a.len()).unwrap_or(0)
}

/// The devices attached since `attached_count` said `n`.
pub fn attached_since(n: usize) -> Vec<(String, bool)> {
    ATTACHED
        .lock()
        .map(|a| a.get(n..).unwrap_or_default().to_vec())
        .unwrap_or_default()
}

pub struct LoopDevice {
    /// `/dev/loopN`
    pub path: PathBuf,
    /// `loopN`
    pub name: String,
    /// Settings changed on the device, restored before it is detached.
    knobs: Vec<Knob>,
    backing: PathBuf,
    dir: PathBuf,
    /// The stalling FUSE file system the device sits on, if any.
    slow: Option<super::slowdisk::SlowDisk>,
    /// The tmpfs mounted on `dir`, unless IOSLEUTH_LAB_DIR put the file on
    /// a file system of the user's choosing.
    ram: Option<RamDir>,
}

/// A tmpfs that iosleuth mounted, unmounted (lazily if still busy) on drop.
struct RamDir(PathBuf);

impl RamDir {
    /// Mounts a tmpfs of `size_mb` (the image is sparse: only what is
    /// written takes memory) plus room for the ext4 mount point and FUSE.
    fn mount(dir: &Path, size_mb: u64) -> Result<RamDir, CaptureError> {
        use std::os::unix::ffi::OsStrExt;
        let c = |s: &[u8]| std::ffi::CString::new(s).expect("no NUL");
        let target = c(dir.as_os_str().as_bytes());
        let data = c(format!("size={}m,mode=0700", size_mb + 16).as_bytes());
        // SAFETY: every pointer is a NUL-terminated string that outlives the call.
        let rc = unsafe {
            libc::mount(
                c(b"iosleuth-lab").as_ptr(),
                target.as_ptr(),
                c(b"tmpfs").as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                data.as_ptr().cast(),
            )
        };
        if rc != 0 {
            return Err(CaptureError::Unusable(format!(
                "cannot mount a tmpfs on {} for the lab's disk: {}",
                dir.display(),
                std::io::Error::last_os_error()
            )));
        }
        Ok(RamDir(dir.to_path_buf()))
    }
}

impl Drop for RamDir {
    fn drop(&mut self) {
        use std::os::unix::ffi::OsStrExt;
        let Ok(target) = std::ffi::CString::new(self.0.as_os_str().as_bytes()) else {
            return;
        };
        // SAFETY: a NUL-terminated path.
        unsafe {
            if libc::umount2(target.as_ptr(), 0) != 0 {
                libc::umount2(target.as_ptr(), libc::MNT_DETACH);
            }
        }
    }
}

impl LoopDevice {
    /// Creates a sparse file of `size_mb` in a fresh directory (named
    /// `iosleuth-…` so leftovers are recognisable) and attaches it.
    pub fn create(size_mb: u64, direct_io: bool) -> Result<LoopDevice, CaptureError> {
        let chosen = std::env::var_os("IOSLEUTH_LAB_DIR").map(PathBuf::from);
        Self::create_with(size_mb, direct_io, None, chosen)
    }

    /// A device whose file is in `dir` (on that file system, not in RAM).
    pub fn create_in(
        dir: &Path,
        size_mb: u64,
        direct_io: bool,
    ) -> Result<LoopDevice, CaptureError> {
        Self::create_with(size_mb, direct_io, None, Some(dir.to_path_buf()))
    }

    /// A device whose every Nth write stalls (see `slowdisk`): its file is
    /// served through iosleuth's own FUSE file system.
    pub fn create_slow(
        size_mb: u64,
        stall: super::slowdisk::Stall,
    ) -> Result<LoopDevice, CaptureError> {
        let chosen = std::env::var_os("IOSLEUTH_LAB_DIR").map(PathBuf::from);
        Self::create_with(size_mb, false, Some(stall), chosen)
    }

    /// A device that serves each request in `service`, `lanes` at once
    /// (see `slowdisk`): attached with direct I/O, so that the loop device
    /// hands its requests to the file without waiting for each (its
    /// buffered path serves one at a time).
    pub fn create_parallel(
        size_mb: u64,
        service: std::time::Duration,
        lanes: usize,
    ) -> Result<LoopDevice, CaptureError> {
        let chosen = std::env::var_os("IOSLEUTH_LAB_DIR").map(PathBuf::from);
        let stall = super::slowdisk::Stall::parallel(service, lanes);
        Self::create_with(size_mb, true, Some(stall), chosen)
    }

    /// `chosen`: the directory for the file; None puts it in a tmpfs.
    fn create_with(
        size_mb: u64,
        direct_io: bool,
        stall: Option<super::slowdisk::Stall>,
        chosen: Option<PathBuf>,
    ) -> Result<LoopDevice, CaptureError> {
        let base = chosen.clone().unwrap_or_else(|| PathBuf::from("/var/tmp"));
        let dir = base.join(format!("iosleuth-lab-{}", crate::capture::unique_name()));
        std::fs::create_dir_all(&dir)?;
        let gone = |e: CaptureError, ram: Option<RamDir>| {
            drop(ram);
            let _ = std::fs::remove_dir_all(&dir);
            e
        };
        let ram = match chosen {
            Some(_) => None,
            None => Some(RamDir::mount(&dir, size_mb).map_err(|e| gone(e, None))?),
        };
        let backing = dir.join("iosleuth-disk.img");
        if let Err(e) = std::fs::File::create(&backing).and_then(|f| f.set_len(size_mb << 20)) {
            return Err(gone(e.into(), ram));
        }
        let slow = match stall {
            Some(st) => match super::slowdisk::SlowDisk::mount(&backing, &dir.join("fuse"), st) {
                Ok(s) => Some(s),
                Err(e) => return Err(gone(e, ram)),
            },
            None => None,
        };
        let image = slow.as_ref().map(|s| s.image()).unwrap_or(backing.clone());
        let out = super::helper("losetup")
            .args(["--find", "--show"])
            .arg(format!(
                "--direct-io={}",
                if direct_io { "on" } else { "off" }
            ))
            .arg(&image)
            .output()
            .map_err(|e| {
                CaptureError::Unusable(format!("cannot run losetup (package util-linux): {e}"))
            })?;
        if !out.status.success() {
            drop(slow);
            return Err(gone(
                CaptureError::Unusable(format!(
                    "losetup failed: {} (loop devices need root and the loop module)",
                    String::from_utf8_lossy(&out.stderr).trim()
                )),
                ram,
            ));
        }
        let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let mut dev = LoopDevice {
            path,
            name,
            knobs: Vec::new(),
            backing,
            dir,
            slow,
            ram,
        };
        dev.reset_stale_limits()?;
        if let (Some(d), Ok(mut a)) = (dev.dev(), ATTACHED.lock()) {
            // A slow disk's file is served by FUSE: not in RAM for this.
            a.push((d.to_string(), dev.ram.is_some() && dev.slow.is_none()));
        }
        Ok(dev)
    }

    /// The image on the stalling FUSE file system, for a workload that
    /// writes to it directly (without the loop device in between).
    pub fn fuse_image(&self) -> Option<PathBuf> {
        self.slow.as_ref().map(|s| s.image())
    }

    /// A loop device keeps the `max_sectors_kb` someone wrote to it across
    /// detach and attach (the kernel stores it as a user limit): a `4` left
    /// by an earlier experiment stops every merge on the next device with
    /// that number. Start from the kernel's default (writing 0, since
    /// Linux 6.13; older kernels take the hardware limit), restored on drop.
    fn reset_stale_limits(&mut self) -> Result<(), CaptureError> {
        // A loop device keeps `write through` across detach and attach
        // (the kernel sets the cache's presence at attach, not the user's
        // switch): a run killed before putting it back leaves every later
        // device of that number sending no flushes.
        let cache = format!("/sys/block/{}/queue/write_cache", self.name);
        if std::fs::read_to_string(&cache).is_ok_and(|s| s.trim() == "write through") {
            eprintln!(
                "note: {} had write_cache=\"write through\" left from an earlier use; \
                 using the kernel default (write back) for this run (put back on exit)",
                self.name
            );
            self.set_queue("write_cache", "write back")?;
        }
        let queue = |knob: &str| {
            std::fs::read_to_string(format!("/sys/block/{}/queue/{knob}", self.name))
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
        };
        let (Some(now), Some(hw)) = (queue("max_sectors_kb"), queue("max_hw_sectors_kb")) else {
            return Ok(());
        };
        if now >= hw.min(DEFAULT_MAX_SECTORS_KB) {
            return Ok(());
        }
        eprintln!(
            "note: {} had max_sectors_kb={now} left from an earlier use; \
             using the kernel default for this run (put back on exit)",
            self.name
        );
        self.set_queue("max_sectors_kb", "0").or_else(|_| {
            self.set_queue(
                "max_sectors_kb",
                &hw.min(DEFAULT_MAX_SECTORS_KB).to_string(),
            )
        })
    }

    pub fn backing_file(&self) -> &Path {
        &self.backing
    }

    /// Hold only writes into this byte range of the device (slow disks).
    pub fn stall_only(&self, bytes: std::ops::Range<u64>) {
        if let Some(s) = &self.slow {
            s.stall_only(bytes);
        }
    }

    /// Writes the slow disk served, and how many it held.
    pub fn stall_counts(&self) -> Option<(u64, u64)> {
        self.slow.as_ref().map(|s| s.counts())
    }

    /// `MAJ:MIN` from sysfs.
    pub fn dev(&self) -> Option<crate::model::Dev> {
        let s = std::fs::read_to_string(format!("/sys/block/{}/dev", self.name)).ok()?;
        crate::model::Dev::parse(&s.trim().replace(':', ","))
    }

    /// Sets `/sys/block/loopN/queue/KNOB`, restored before detaching.
    pub fn set_queue(&mut self, knob: &str, value: &str) -> Result<(), CaptureError> {
        let p = format!("/sys/block/{}/queue/{knob}", self.name);
        self.knobs.push(Knob::set(p, value)?);
        Ok(())
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        while let Some(k) = self.knobs.pop() {
            let _ = k.restore();
        }
        let _ = super::helper("losetup").arg("-d").arg(&self.path).status();
        // The loop device lets go of its file asynchronously: wait for it
        // before unmounting the file systems under it.
        let backing = format!("/sys/block/{}/loop/backing_file", self.name);
        for _ in 0..200 {
            if !Path::new(&backing).exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        drop(self.slow.take());
        drop(self.ram.take());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
