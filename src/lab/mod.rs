//! The lab: disks that iosleuth creates (and removes) itself — loop
//! devices (`loopdev`), ext4 on them (`ext4`), a disk that stalls on purpose
//! (`slowdisk`) — the known pathologies built on them (`scenarios`,
//! `catalog`, `waits`), each recorded through a `recording::Lab`, healthy
//! shapes (`shapes`), and
//! `lab run` (`run`): record each scenario's good and bad run, diagnose,
//! compare, and judge whether it went as expected (`watched`: how `watch`
//! did beside the bad run).

pub mod catalog;
pub mod ext4;
pub mod loopdev;
pub mod noise;
pub mod recording;
pub mod run;
pub mod scenarios;
pub mod shapes;
pub mod slowdisk;
pub mod tried;
pub mod waits;
pub mod watched;

/// A helper program (losetup, mkfs, mount, …) in its own process group: a
/// Ctrl-C at the terminal reaches iosleuth alone, which then undoes what the
/// helpers did. A helper killed halfway (a loop device attached, a file
/// system mounted, but never reported back) would leave that behind.
pub(crate) fn helper(program: &str) -> std::process::Command {
    use std::os::unix::process::CommandExt;
    let mut c = std::process::Command::new(program);
    c.process_group(0);
    c
}

/// The lab's working directory, removed on drop unless kept: also when a
/// panic unwinds (stdout closed under `lab run all | head`, say), as the
/// disks' own guards are.
pub struct WorkDir {
    pub path: std::path::PathBuf,
    pub keep: bool,
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}
