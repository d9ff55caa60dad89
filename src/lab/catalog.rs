//! Lab scenarios for the rules beyond the four measured slow-downs: each records a
//! good run without the cause and a bad run with it, on the lab's own
//! disks, with ordinary tools (dd, cat, sh) as the workload where they
//! suffice and fio where a pattern needs it (random reads at a depth).
//! Every setting changed is a guard restored on drop.

use super::ext4::Ext4;
use super::loopdev::LoopDevice;
use super::recording::Lab;
use crate::capture::tracefs::{CaptureError, Knob};
use std::path::Path;
use std::time::Duration;

/// A file of `mb` MiB of random data, written through the page cache and
/// synced.
pub(super) fn data_file(path: &Path, mb: u64) -> Result<(), CaptureError> {
    let ok = super::helper("dd")
        .arg("if=/dev/urandom")
        .arg(format!("of={}", path.display()))
        .args(["bs=1M", &format!("count={mb}"), "conv=fsync", "status=none"])
        .status()
        .map_err(|e| CaptureError::Unusable(format!("cannot run dd: {e}")))?
        .success();
    if ok {
        Ok(())
    } else {
        Err(CaptureError::Unusable(format!(
            "dd could not write {}",
            path.display()
        )))
    }
}

/// Drops a file's pages from the page cache, so that reading it misses.
pub(super) fn uncache(path: &Path) -> String {
    format!("dd if={} iflag=nocache count=0 status=none", path.display())
}

/// `request_splitting`: 256 KiB direct reads of the device, under its
/// default max_sectors_kb, then under 16.
pub fn splitting(lab: &Lab) -> Result<(), CaptureError> {
    let mut disk = LoopDevice::create(64, true)?;
    let script = format!(
        "dd if={} of=/dev/null bs=256k count=64 iflag=direct status=none",
        disk.path.display()
    );
    lab.record(&lab.good(), "block", &script)?;
    disk.set_queue("max_sectors_kb", "16")?;
    lab.record(&lab.bad(), "block", &script)
}

/// `readahead_small`: `cat` of an 8 MiB file not in the page cache, with
/// the device's default read_ahead_kb, then with 0.
pub fn readahead(lab: &Lab) -> Result<(), CaptureError> {
    let mut fs = Ext4::create(128, 4, true)?;
    let file = fs.mnt.join("data");
    data_file(&file, 8)?;
    let script = format!("{} && cat {} > /dev/null", uncache(&file), file.display());
    let events = "block,readahead,syscalls";
    lab.record(&lab.good(), events, &script)?;
    fs.disk.set_queue("read_ahead_kb", "0")?;
    lab.record(&lab.bad(), events, &script)
}

/// `readahead_small` with a small window, not 0: `dd bs=4k` (a reader of
/// 4 KiB at a time, as programs reading records or lines are) of an 8 MiB
/// file not in the page cache, with the device's default read_ahead_kb
/// (128), then with 16: the kernel grows the window to 16 KiB and no
/// further, and the reader waits for one 16 KiB request per window. Not
/// `cat`: it asks for 128 KiB at a time, and the kernel reads ahead as much
/// as the reader asks whatever read_ahead_kb says (mm/readahead.c,
/// ractl_max_pages: up to the device's largest I/O).
pub fn readahead_window(lab: &Lab) -> Result<(), CaptureError> {
    let mut fs = Ext4::create(128, 4, true)?;
    let file = fs.mnt.join("data");
    data_file(&file, 8)?;
    let script = format!(
        "{} && dd if={} of=/dev/null bs=4k status=none",
        uncache(&file),
        file.display()
    );
    let events = "block,readahead,syscalls";
    lab.record(&lab.good(), events, &script)?;
    fs.disk.set_queue("read_ahead_kb", "16")?;
    lab.record(&lab.bad(), events, &script)
}

/// `sync_write_amplification`: 16 MiB written and synced once, then 4 KiB
/// appends each followed by fsync.
pub fn sync_writes(lab: &Lab) -> Result<(), CaptureError> {
    // 1 GiB (sparse): mkfs.ext4 then picks 4 KiB blocks, as on real disks
    // (below 512 MiB it takes 1 KiB blocks, and each commit is smaller).
    let mut fs = Ext4::create(1024, 8, true)?;
    // A volatile write cache, as most disks have: each fsync then also
    // sends a cache flush (the lab's other ext4 disks say write through).
    fs.disk.set_queue("write_cache", "write back")?;
    let events = "block,fs,syscalls";
    let bulk = format!(
        "dd if=/dev/zero of={}/bulk bs=1M count=16 conv=fsync status=none",
        fs.mnt.display()
    );
    lab.record(&lab.good(), events, &bulk)?;
    let small = format!(
        "\"$IOSLEUTH\" probe fsync --append --size 4k --count 200 --path {}/small",
        fs.mnt.display()
    );
    lab.record(&lab.bad(), events, &small)
}

/// vm.dirty_* set for a run and put back as found: writing dirty_bytes
/// zeroes dirty_ratio in the kernel (and the other way round), so the
/// guard writes back whichever of the pair was in use.
struct DirtyLimit {
    saved: Vec<(&'static str, String)>,
}

impl DirtyLimit {
    fn set(bytes: u64, background_bytes: u64) -> Result<DirtyLimit, CaptureError> {
        let vm = |k: &str| format!("/proc/sys/vm/{k}");
        let read = |k: &str| {
            std::fs::read_to_string(vm(k))
                .map(|s| s.trim().to_string())
                .map_err(|e| CaptureError::Unusable(format!("cannot read {}: {e}", vm(k))))
        };
        let mut saved = Vec::new();
        for (bytes_key, ratio_key) in [
            ("dirty_bytes", "dirty_ratio"),
            ("dirty_background_bytes", "dirty_background_ratio"),
        ] {
            let b = read(bytes_key)?;
            if b != "0" {
                saved.push((bytes_key, b));
            } else {
                saved.push((ratio_key, read(ratio_key)?));
            }
        }
        let guard = DirtyLimit { saved };
        for (k, v) in [
            ("dirty_bytes", bytes),
            ("dirty_background_bytes", background_bytes),
        ] {
            std::fs::write(vm(k), v.to_string())
                .map_err(|e| CaptureError::Unusable(format!("cannot write {}: {e}", vm(k))))?;
        }
        Ok(guard)
    }
}

impl Drop for DirtyLimit {
    fn drop(&mut self) {
        for (k, v) in &self.saved {
            let _ = std::fs::write(format!("/proc/sys/vm/{k}"), v);
        }
    }
}

/// `dirty_throttling`: 160 MiB of buffered writes under the machine's
/// dirty limit, then under a 4 MiB one. With 48 MiB, writeback on this
/// VM kept up often enough that the writer was paused under 20 ms in 2
/// runs of 5.
pub fn dirty(lab: &Lab) -> Result<(), CaptureError> {
    let fs = Ext4::create(512, 8, true)?;
    let script = format!(
        "rm -f {0}/f; dd if=/dev/zero of={0}/f bs=1M count=160 status=none",
        fs.mnt.display()
    );
    let events = "block,writeback,syscalls,sched";
    lab.record(&lab.good(), events, &script)?;
    let _limit = DirtyLimit::set(4 << 20, 1 << 20)?;
    lab.record(&lab.bad(), events, &script)
}

/// `wbt_throttling`: a writer of random 4 KiB pages, fsynced every 32,
/// and a direct reader, on a device that serves 32 requests at once, each
/// in 0.5 ms; with the device's default wbt target, then with a 1 µs
/// target that every read misses, so that wbt lets one write in flight.
pub fn wbt(lab: &Lab) -> Result<(), CaptureError> {
    let disk = LoopDevice::create_parallel(256, Duration::from_micros(500), 32)?;
    let mut fs = Ext4::on(disk, 8)?;
    let (file, w) = (fs.mnt.join("r"), fs.mnt.join("w"));
    data_file(&file, 16)?;
    // Written once first: the random pages then have their blocks, each
    // its own request at writeback.
    data_file(&w, 16)?;
    // The reader goes on while the writer runs: wbt judges read latency
    // over 100 ms windows. The workload's time is the writer's.
    let script = format!(
        "fio --output=/dev/null --name=w --filename={} --rw=randwrite --bs=4k --size=16m --fsync=32 --ioengine=psync & a=$!; \
         while kill -0 $a 2>/dev/null; do dd if={} of=/dev/null bs=4k count=64 iflag=direct status=none; done; wait",
        w.display(),
        file.display()
    );
    let events = "block,writeback";
    lab.record(&lab.good(), events, &script)?;
    fs.disk.set_queue("wbt_lat_usec", "1")?;
    lab.record(&lab.bad(), events, &script)
}

/// A cgroup (v1 blkio) made for one scenario, removed on drop.
struct Cgroup {
    dir: std::path::PathBuf,
    _limit: Option<Knob>,
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        if let Some(k) = self._limit.take() {
            let _ = k.restore();
        }
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

const BLKIO: &str = "/sys/fs/cgroup/blkio";

/// What the cgroup scenario needs that a machine may lack.
pub fn missing_blkio() -> Option<String> {
    (!Path::new(BLKIO)
        .join("blkio.throttle.read_iops_device")
        .exists())
    .then(|| {
        format!("needs the cgroup v1 blkio controller mounted at {BLKIO} (this machine has none)")
    })
}

/// What the fio scenarios need.
pub fn missing_fio() -> Option<String> {
    let found = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("fio").is_file()));
    (!found).then(|| "needs fio (apt-get install fio)".to_string())
}

/// What the io_uring punt scenario needs that a machine may lack.
pub fn missing_xfs() -> Option<String> {
    let on_path = |tool: &str| {
        std::env::var_os("PATH")
            .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
    };
    (!on_path("mkfs.xfs"))
        .then(|| "needs mkfs.xfs (apt-get install xfsprogs)".to_string())
        .or_else(missing_fio)
}

/// `io_uring_punted`: fio's io_uring engine writes 16 MiB at random, 4 KiB
/// buffered writes at depth 16, to one file on XFS (issued inline: XFS
/// writes into the page cache without blocking), then on ext4, whose
/// buffered writes io_uring punts to io-wq, where writes to one file run
/// one at a time (hashed by inode).
pub fn uring_punted(lab: &Lab) -> Result<(), CaptureError> {
    let events = "block,sched,syscalls,io_uring";
    for (out, fs) in [
        (lab.good(), Ext4::xfs(512)?),
        (lab.bad(), Ext4::create(256, 16, true)?),
    ] {
        let script = format!(
            "fio --output=/dev/null --name=w --filename={}/f --ioengine=io_uring --rw=randwrite --bs=4k --direct=0 --iodepth=16 --size=64M --io_size=16M",
            fs.mnt.display()
        );
        lab.record(&out, events, &script)?;
        drop(fs);
    }
    Ok(())
}

const MEMCG: &str = "/sys/fs/cgroup/memory";

/// What the page-cache scenario needs that a machine may lack.
pub fn missing_memcg() -> Option<String> {
    (!Path::new(MEMCG).join("memory.limit_in_bytes").exists())
        .then(|| {
            format!(
                "needs the cgroup v1 memory controller mounted at {MEMCG} (this machine has none)"
            )
        })
        .or_else(missing_fio)
}

/// `page_cache_thrashing`: fio reads a 16 MiB file twice at random, 16 KiB
/// at a time through the page cache, in a memory cgroup without a limit,
/// then with a 12 MiB one: the second pass re-reads pages reclaim evicted.
pub fn cache_refault(lab: &Lab) -> Result<(), CaptureError> {
    let fs = Ext4::create(128, 4, true)?;
    let file = fs.mnt.join("data");
    data_file(&file, 16)?;
    let events = "block,sched,syscalls,cache";
    for (out, limit) in [(lab.good(), None), (lab.bad(), Some("12M"))] {
        let dir = Path::new(MEMCG).join(format!("iosleuth-lab-{}", crate::capture::unique_name()));
        std::fs::create_dir(&dir)
            .map_err(|e| CaptureError::Unusable(format!("cannot create {}: {e}", dir.display())))?;
        let mut cg = Cgroup {
            dir: dir.clone(),
            _limit: None,
        };
        if let Some(bytes) = limit {
            cg._limit = Some(Knob::set(dir.join("memory.limit_in_bytes"), bytes)?);
        }
        // fio drops the file's pages before each pass unless told not to:
        // the second pass must find what the first left in the cache.
        let script = format!(
            "{}; echo $$ > {}/cgroup.procs; exec fio --output=/dev/null --name=c --filename={} --rw=randread --bs=16k --ioengine=psync --size=16M --io_size=96M --invalidate=0",
            uncache(&file),
            dir.display(),
            file.display()
        );
        lab.record(&out, events, &script)?;
        drop(cg);
    }
    Ok(())
}

/// `cgroup_io_throttle`: 600 direct 4 KiB reads in a cgroup without a
/// limit, then with blkio.throttle.read_iops_device 200.
pub fn cgroup(lab: &Lab) -> Result<(), CaptureError> {
    let fs = Ext4::create(128, 4, true)?;
    let file = fs.mnt.join("r");
    data_file(&file, 4)?;
    let dev = fs
        .disk
        .dev()
        .ok_or_else(|| CaptureError::Unusable("the lab disk has no device number".into()))?;
    let events = "block,syscalls,workqueue,sched";
    for (out, limit) in [(lab.good(), None), (lab.bad(), Some(200))] {
        let dir = Path::new(BLKIO).join(format!("iosleuth-lab-{}", crate::capture::unique_name()));
        std::fs::create_dir(&dir)
            .map_err(|e| CaptureError::Unusable(format!("cannot create {}: {e}", dir.display())))?;
        let mut cg = Cgroup {
            dir: dir.clone(),
            _limit: None,
        };
        if let Some(iops) = limit {
            cg._limit = Some(Knob::set(
                dir.join("blkio.throttle.read_iops_device"),
                &format!("{}:{} {iops}", dev.major(), dev.minor()),
            )?);
        }
        let script = format!(
            "echo $$ > {}/cgroup.procs; exec dd if={} of=/dev/null bs=4k count=600 iflag=direct status=none",
            dir.display(),
            file.display()
        );
        lab.record(&out, events, &script)?;
        drop(cg);
    }
    Ok(())
}

/// fio's random direct reads of `file` at `depth` for `secs`.
fn fio_randread(file: &Path, bs: &str, depth: u32, secs: f64, extra: &str) -> String {
    format!(
        "fio --output=/dev/null --name=q --filename={} --rw=randread --bs={bs} --direct=1 --ioengine=libaio --iodepth={depth} --runtime={secs} --time_based {extra}",
        file.display()
    )
}

/// `queue_saturation`: on a queue of 4 tags (nr_requests 4) of a device
/// that serves 32 requests at once, each in 1 ms (an SSD's channels),
/// 4,096 random 64 KiB direct reads one at a time, then 32 in flight
/// (bios wait for a tag while 28 of the device's lanes stand idle).
pub fn queue(lab: &Lab) -> Result<(), CaptureError> {
    let disk = LoopDevice::create_parallel(256, Duration::from_millis(1), 32)?;
    let mut fs = Ext4::on(disk, 4)?;
    let file = fs.mnt.join("r");
    data_file(&file, 64)?;
    fs.disk.set_queue("nr_requests", "4")?;
    // A fixed amount of reads: the workload's time is the device's
    // throughput, which `--try` judges.
    let reads = |depth| fio_randread_bytes(&file, "64k", depth, "256m", "--norandommap");
    lab.record(&lab.good(), "block", &reads(1))?;
    lab.record(&lab.bad(), "block", &reads(32))
}

/// fio: `bytes` of random direct reads of `bs`, `depth` in flight.
fn fio_randread_bytes(file: &Path, bs: &str, depth: u32, bytes: &str, extra: &str) -> String {
    format!(
        "fio --output=/dev/null --name=q --filename={} --rw=randread --bs={bs} --direct=1 --ioengine=libaio --iodepth={depth} --io_size={bytes} {extra}",
        file.display()
    )
}

/// `scheduler_overhead`: two random readers of unequal I/O priority under
/// mq-deadline, then under bfq, which holds requests back to keep the
/// service split.
pub fn io_scheduler(lab: &Lab) -> Result<(), CaptureError> {
    let mut fs = Ext4::create(256, 4, true)?;
    let (a, b) = (fs.mnt.join("a"), fs.mnt.join("b"));
    data_file(&a, 32)?;
    data_file(&b, 32)?;
    let script = format!(
        "{} --prioclass=2 --prio=0 --name=b --filename={} --rw=randread --bs=16k --direct=1 --runtime=0.5 --time_based --prioclass=2 --prio=7",
        fio_randread(&a, "16k", 1, 0.5, ""),
        b.display()
    );
    let events = "block:block_bio_queue,block:block_getrq,block:block_rq_insert,block:block_rq_issue,block:block_rq_complete";
    fs.disk.set_queue("scheduler", "mq-deadline")?;
    lab.record(&lab.good(), events, &script)?;
    fs.disk.set_queue("scheduler", "bfq")?;
    lab.record(&lab.bad(), events, &script)
}
