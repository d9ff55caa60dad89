//! The lab: disks that iosleuth creates (and removes) itself.

pub mod ext4;
pub mod loopdev;
pub mod scenarios;
pub mod slowdisk;

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
