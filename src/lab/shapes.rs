//! Healthy runs of common shapes, each recorded twice on one setup: a
//! buffered sequential writer, a reader of a file not in the page cache,
//! random direct reads, many small files. None may give a critical
//! finding, and the two runs may differ in no setting.

use super::catalog::{data_file, uncache};
use super::ext4::Ext4;
use super::recording::Lab;
use crate::capture::tracefs::CaptureError;

const EVENTS: &str = "all";

fn twice(lab: &Lab, script: &str) -> Result<(), CaptureError> {
    lab.record(&lab.good(), EVENTS, script)?;
    lab.record(&lab.bad(), EVENTS, script)
}

/// `dd bs=1M count=128 conv=fsync` through the page cache.
pub fn seq_write(lab: &Lab) -> Result<(), CaptureError> {
    let fs = Ext4::create(512, 16, true)?;
    twice(
        lab,
        &format!(
            "rm -f {0}/f; dd if=/dev/zero of={0}/f bs=1M count=128 conv=fsync status=none",
            fs.mnt.display()
        ),
    )
}

/// `cat` of a 32 MiB file that is not in the page cache.
pub fn seq_read(lab: &Lab) -> Result<(), CaptureError> {
    let fs = Ext4::create(256, 8, true)?;
    let file = fs.mnt.join("data");
    data_file(&file, 32)?;
    twice(
        lab,
        &format!("{} && cat {} > /dev/null", uncache(&file), file.display()),
    )
}

/// Random 4 KiB direct reads at depth 8 (fio).
pub fn random_read(lab: &Lab) -> Result<(), CaptureError> {
    fio_random_read(lab, "libaio", 8)
}

/// Random reads through fio's io_uring engine, one at a time (deeper, the
/// loop device's one worker queues them: a true queue_saturation):
/// io_uring requests with nothing wrong.
pub fn uring_random_read(lab: &Lab) -> Result<(), CaptureError> {
    fio_random_read(lab, "io_uring", 1)
}

/// Random 4 KiB reads of a mapped file not in the page cache (fio's mmap
/// engine): one page fault per read, nothing wrong.
pub fn mmap_random_read(lab: &Lab) -> Result<(), CaptureError> {
    let fs = Ext4::create(256, 8, true)?;
    let file = fs.mnt.join("data.mdb");
    data_file(&file, 32)?;
    twice(
        lab,
        &format!(
            "{} && {}",
            uncache(&file),
            fio_mmap_read(&file, "--size=32M --io_size=4M")
        ),
    )
}

/// fio's mmap engine reading `file` at random, 4 KiB at a time: fio
/// advises the kernel the access is random, so each read is one fault of
/// one page.
pub(super) fn fio_mmap_read(file: &std::path::Path, how_much: &str) -> String {
    format!(
        "fio --output=/dev/null --name=m --filename={} --ioengine=mmap --rw=randread --bs=4k {how_much}",
        file.display()
    )
}

/// A second of fio's random 4 KiB direct reads of a file on ext4, through
/// `engine` at `depth`, twice.
fn fio_random_read(lab: &Lab, engine: &str, depth: u32) -> Result<(), CaptureError> {
    let fs = Ext4::create(256, 8, true)?;
    let file = fs.mnt.join("data");
    data_file(&file, 64)?;
    twice(
        lab,
        &format!(
            "fio --output=/dev/null --name=r --filename={} --rw=randread --bs=4k --direct=1 --ioengine={engine} --iodepth={depth} --runtime=1 --time_based",
            file.display()
        ),
    )
}

/// 2000 small files written by a shell loop, then `sync`.
pub fn small_files(lab: &Lab) -> Result<(), CaptureError> {
    let fs = Ext4::create(256, 16, true)?;
    twice(
        lab,
        &format!(
            "d={}/tree; rm -rf $d; mkdir $d && cd $d && i=0; while [ $i -lt 2000 ]; do echo \"file $i\" > f$i; i=$((i+1)); done; sync",
            fs.mnt.display()
        ),
    )
}
