//! The lab: disks that iosleuth creates (and removes) itself.

pub mod loopdev;
