//! The lab: disks that iosleuth creates (and removes) itself.

pub mod ext4;
pub mod loopdev;
pub mod scenarios;
pub mod slowdisk;
