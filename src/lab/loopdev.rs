//! Loop devices over files that iosleuth creates and removes itself. It
//! never touches a device it did not create.

use crate::capture::tracefs::{CaptureError, Knob};
use std::path::{Path, PathBuf};
use std::process::Command;

pub struct LoopDevice {
    /// `/dev/loopN`
    pub path: PathBuf,
    /// `loopN`
    pub name: String,
    /// Settings changed on the device, restored before it is detached.
    knobs: Vec<Knob>,
    backing: PathBuf,
    dir: PathBuf,
}

impl LoopDevice {
    /// Creates a sparse file of `size_mb` in a fresh directory (named
    /// `iosleuth-…` so leftovers are recognisable) and attaches it.
    pub fn create(size_mb: u64, direct_io: bool) -> Result<LoopDevice, CaptureError> {
        let base = std::env::var_os("IOSLEUTH_LAB_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/var/tmp"));
        let dir = base.join(format!("iosleuth-lab-{}", crate::capture::unique_name()));
        std::fs::create_dir_all(&dir)?;
        let backing = dir.join("iosleuth-disk.img");
        let f = std::fs::File::create(&backing)?;
        f.set_len(size_mb * 1024 * 1024)?;
        drop(f);
        let out = Command::new("losetup")
            .args(["--find", "--show"])
            .arg(format!(
                "--direct-io={}",
                if direct_io { "on" } else { "off" }
            ))
            .arg(&backing)
            .output()
            .map_err(|e| CaptureError(format!("cannot run losetup (package util-linux): {e}")))?;
        if !out.status.success() {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(CaptureError(format!(
                "losetup failed: {} (loop devices need root and the loop module)",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        Ok(LoopDevice {
            path,
            name,
            knobs: Vec::new(),
            backing,
            dir,
        })
    }

    pub fn backing_file(&self) -> &Path {
        &self.backing
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
        let _ = Command::new("losetup").arg("-d").arg(&self.path).status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
