//! The lab's scenarios: each builds its disks, records a good and a bad run
//! of a built-in probe with `iosleuth record` (through `recording::Lab`),
//! and hands both captures back for diagnosis and comparison. Everything it makes is removed when the
//! scenario's values drop (also after Ctrl-C: the recorder stops, the
//! scenario returns an error, the guards unwind).

use super::recording::{Lab, Standing};

use super::tried::Sides;
use super::{catalog, ext4::Ext4, loopdev::LoopDevice, shapes, slowdisk::Stall, waits};
use crate::capture::tracefs::CaptureError;
use crate::compare::Diff;
use crate::diagnose::{Finding, Severity};
use std::path::Path;
use std::time::Duration;

pub struct Scenario {
    pub name: &'static str,
    pub case: &'static str,
    pub about: &'static str,
    /// The bad run's expected top finding (none for `healthy`).
    pub expect: Option<&'static str>,
    /// Findings that would name a rival cause of the bad run's symptom:
    /// the bad run must have none of them.
    pub rivals: &'static [&'static str],
    pub good: &'static str,
    pub bad: &'static str,
    run: fn(&Lab) -> Result<(), CaptureError>,
    /// What this machine lacks for the scenario (a tool, a controller),
    /// said instead of running it.
    pub missing: fn() -> Option<String>,
}

fn nothing_missing() -> Option<String> {
    None
}

pub static SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "merges",
        case: "merges_disabled",
        about: "sequential 4 KiB direct reads in batches of 32 on a loop device",
        expect: Some("merges_disabled"),
        rivals: &[],
        good: "nomerges=0",
        bad: "nomerges=2",
        run: merges,
        missing: nothing_missing,
    },
    Scenario {
        name: "journal",
        case: "journal_space_stall",
        about: "128 threads of random buffered 16 KiB writes + fsync on ext4",
        expect: Some("journal_space_stall"),
        rivals: &[],
        good: "1 GiB journal",
        bad: "4 MiB journal",
        run: journal,
        missing: nothing_missing,
    },
    Scenario {
        name: "rt-starvation",
        case: "rt_starvation",
        about: "write+fsync loop pinned to CPU 1 on ext4",
        expect: Some("rt_starvation"),
        rivals: &[],
        good: "alone",
        bad: "sharing CPU 1 with a SCHED_FIFO task (150 ms on, 250 ms off)",
        run: rt_starvation,
        missing: nothing_missing,
    },
    Scenario {
        name: "slow-device",
        case: "device_latency_spike",
        about: "write+fsync loop on ext4 over a loop device on iosleuth's FUSE disk",
        expect: Some("device_latency_spike"),
        rivals: &[],
        good: "no stalls",
        bad: "every 200th journal write held 150 ms",
        run: slow_device,
        missing: nothing_missing,
    },
    Scenario {
        name: "uring-slow-device",
        case: "device_latency_spike",
        about: "fio's io_uring engine: random O_DIRECT reads at depth 4 of a loop device on iosleuth's FUSE disk",
        expect: Some("device_latency_spike"),
        rivals: &[],
        good: "no stalls",
        bad: "every 150th read held 150 ms",
        run: uring_slow_device,
        missing: crate::lab::catalog::missing_fio,
    },
    Scenario {
        name: "mmap-slow-device",
        case: "device_latency_spike",
        about: "fio's mmap engine: random 4 KiB reads through page faults of a file on ext4 on iosleuth's FUSE disk",
        expect: Some("device_latency_spike"),
        rivals: &[],
        good: "no stalls",
        bad: "every 100th read held 150 ms",
        run: mmap_slow_device,
        missing: crate::lab::catalog::missing_fio,
    },
    Scenario {
        name: "uring-punted",
        case: "io_uring_punted",
        about: "fio's io_uring engine: buffered random 4 KiB writes at depth 16 to one file",
        expect: Some("io_uring_punted"),
        rivals: &[],
        good: "on XFS",
        bad: "on ext4",
        run: catalog::uring_punted,
        missing: catalog::missing_xfs,
    },
    Scenario {
        name: "cache-refault",
        case: "page_cache_thrashing",
        about: "fio reads a 16 MiB file on ext4 six times over at random through the page cache, in a memory cgroup",
        expect: Some("page_cache_thrashing"),
        rivals: &[],
        good: "no memory limit",
        bad: "memory.limit_in_bytes 12 MiB",
        run: catalog::cache_refault,
        missing: catalog::missing_memcg,
    },
    Scenario {
        name: "healthy",
        case: "no case",
        about: "write+fsync loop and sequential reads, nothing wrong",
        expect: None,
        rivals: &[],
        good: "first run",
        bad: "second run",
        run: healthy,
        missing: nothing_missing,
    },
    Scenario {
        name: "splitting",
        case: "request_splitting",
        about: "256 KiB direct reads with dd on a loop device",
        expect: Some("request_splitting"),
        rivals: &[],
        good: "max_sectors_kb default",
        bad: "max_sectors_kb=16",
        run: catalog::splitting,
        missing: nothing_missing,
    },
    Scenario {
        name: "readahead",
        case: "readahead_small",
        about: "cat of an 8 MiB file not in the page cache, on ext4",
        expect: Some("readahead_small"),
        rivals: &["merges_disabled"],
        good: "read_ahead_kb default",
        bad: "read_ahead_kb=0",
        run: catalog::readahead,
        missing: nothing_missing,
    },
    Scenario {
        name: "readahead-small",
        case: "readahead_small",
        about: "dd bs=4k of an 8 MiB file not in the page cache, on ext4",
        expect: Some("readahead_small"),
        rivals: &["merges_disabled"],
        good: "read_ahead_kb default",
        bad: "read_ahead_kb=16",
        run: catalog::readahead_window,
        missing: nothing_missing,
    },
    Scenario {
        name: "sync-writes",
        case: "sync_write_amplification",
        about: "synced writes on ext4",
        expect: Some("sync_write_amplification"),
        rivals: &[],
        good: "16 MiB with dd conv=fsync",
        bad: "200 appends of 4 KiB, each followed by fsync",
        run: catalog::sync_writes,
        missing: nothing_missing,
    },
    Scenario {
        name: "dirty",
        case: "dirty_throttling",
        about: "160 MiB of buffered writes with dd on ext4",
        expect: Some("dirty_throttling"),
        rivals: &[],
        good: "the machine's dirty limit",
        bad: "vm.dirty_bytes=4 MiB (restored)",
        run: catalog::dirty,
        missing: nothing_missing,
    },
    Scenario {
        name: "wbt",
        case: "wbt_throttling",
        about: "fio: random 4 KiB writes fsynced every 32, beside a direct dd reader, on ext4",
        expect: Some("wbt_throttling"),
        rivals: &[],
        good: "wbt_lat_usec default",
        bad: "wbt_lat_usec=1",
        run: catalog::wbt,
        missing: catalog::missing_fio,
    },
    Scenario {
        name: "cgroup",
        case: "cgroup_io_throttle",
        about: "600 direct 4 KiB reads with dd in a cgroup",
        expect: Some("cgroup_io_throttle"),
        rivals: &[],
        good: "no limit",
        bad: "blkio.throttle.read_iops_device 200",
        run: catalog::cgroup,
        missing: catalog::missing_blkio,
    },
    Scenario {
        name: "queue",
        case: "queue_saturation",
        about: "fio: random 64 KiB direct reads on a queue of nr_requests=4",
        expect: Some("queue_saturation"),
        rivals: &[],
        good: "one read at a time",
        bad: "32 reads in flight",
        run: catalog::queue,
        missing: catalog::missing_fio,
    },
    Scenario {
        name: "io-scheduler",
        case: "scheduler_overhead",
        about: "fio: two random readers of unequal I/O priority",
        expect: Some("scheduler_overhead"),
        rivals: &[],
        good: "mq-deadline",
        bad: "bfq",
        run: catalog::io_scheduler,
        missing: catalog::missing_fio,
    },
    Scenario {
        name: "cpu-contention",
        case: "cpu_contention",
        about: "write+fsync loop pinned to CPU 1 on ext4",
        expect: Some("cpu_contention"),
        good: "alone",
        bad: "sharing CPU 1 with two busy shell loops at nice -10",
        run: waits::cpu_contention,
        missing: nothing_missing,
        rivals: &[],
    },
    Scenario {
        name: "fuse-wait",
        case: "a wait in a kernel function no rule knows",
        about:
            "dd of 4 KiB writes straight to a file on a FUSE file system, recorded with --stacks",
        expect: Some(crate::diagnose::UNEXPLAINED),
        good: "the server answers at once",
        bad: "every 100th write answered after 30 ms",
        run: waits::fuse_wait,
        missing: nothing_missing,
        rivals: &[],
    },
    Scenario {
        name: "healthy-write",
        case: "no case",
        about: "dd of 128 MiB through the page cache, conv=fsync",
        expect: None,
        rivals: &[],
        good: "first run",
        bad: "second run",
        run: shapes::seq_write,
        missing: nothing_missing,
    },
    Scenario {
        name: "healthy-read",
        case: "no case",
        about: "cat of a 32 MiB file not in the page cache",
        expect: None,
        rivals: &[],
        good: "first run",
        bad: "second run",
        run: shapes::seq_read,
        missing: nothing_missing,
    },
    Scenario {
        name: "healthy-random",
        case: "no case",
        about: "fio: random 4 KiB direct reads at depth 8",
        expect: None,
        rivals: &[],
        good: "first run",
        bad: "second run",
        run: shapes::random_read,
        missing: catalog::missing_fio,
    },
    Scenario {
        name: "healthy-uring",
        case: "no case",
        about: "fio's io_uring engine: random 4 KiB direct reads, one at a time",
        expect: None,
        rivals: &[],
        good: "first run",
        bad: "second run",
        run: shapes::uring_random_read,
        missing: catalog::missing_fio,
    },
    Scenario {
        name: "healthy-mmap",
        case: "no case",
        about: "fio's mmap engine: random 4 KiB reads through page faults of a file on ext4",
        expect: None,
        rivals: &[],
        good: "first run",
        bad: "second run",
        run: shapes::mmap_random_read,
        missing: catalog::missing_fio,
    },
    Scenario {
        name: "healthy-files",
        case: "no case",
        about: "2000 small files written by a shell loop, then sync",
        expect: None,
        rivals: &[],
        good: "first run",
        bad: "second run",
        run: shapes::small_files,
        missing: nothing_missing,
    },
];

pub fn find(name: &str) -> Option<&'static Scenario> {
    SCENARIOS.iter().find(|s| s.name == name)
}

impl Scenario {
    /// Records the good run into `lab.good()` and the bad one into
    /// `lab.bad()`.
    pub fn record(&self, lab: &Lab) -> Result<(), CaptureError> {
        (self.run)(lab)
    }

    /// The good run has no critical finding; the bad run's top finding is
    /// the expected one, it has none of the rivals, and the good run does
    /// not have the expected one. Two healthy runs of one setup have no
    /// finding above info, and no setting differs.
    pub fn as_expected(&self, good: &[Finding], bad: &[Finding], diff: &Diff) -> bool {
        let at_most = |f: &[Finding], s: Severity| f.iter().all(|x| x.severity >= s);
        match self.expect {
            Some(id) => {
                at_most(good, Severity::Warning)
                    && bad.first().is_some_and(|f| f.id == id)
                    && bad.iter().all(|f| !self.rivals.contains(&f.id))
                    && good.iter().all(|f| f.id != id)
            }
            None => {
                diff.settings.is_empty()
                    && at_most(good, Severity::Info)
                    && at_most(bad, Severity::Info)
            }
        }
    }
}

fn seqread_script(dev: &Path) -> String {
    format!(
        "\"$IOSLEUTH\" probe seqread --path {} --bs 4k --depth 32 --size 16m",
        dev.display()
    )
}

fn merges(lab: &Lab) -> Result<(), CaptureError> {
    let mut disk = LoopDevice::create(64, true)?;
    disk.set_queue("nomerges", "0")?;
    lab.record(&lab.good(), "block", &seqread_script(&disk.path))?;
    disk.set_queue("nomerges", "2")?;
    lab.record(&lab.bad(), "block", &seqread_script(&disk.path))
}

fn journal(lab: &Lab) -> Result<(), CaptureError> {
    let script = |fs: &Ext4| {
        format!(
            "\"$IOSLEUTH\" probe randwrite --threads 128 --bs 16k --file-size 4m --fsync --duration 2 --dir {}",
            fs.mnt.display()
        )
    };
    let events = "block,fs,sched,syscalls";
    // With the writers' kernel stacks: their time under
    // add_transaction_credits, and in __jbd2_log_wait_for_space, the
    // checkpoint only a full journal forces (what separates the runs).
    let stacks = [
        "--stacks",
        "--func",
        "add_transaction_credits,__jbd2_log_wait_for_space,ext4_sync_file",
    ];
    {
        let fs = Ext4::create(2560, 1024, true)?;
        lab.record_with(&lab.good(), events, &stacks, &script(&fs))?;
    }
    let fs = Ext4::create(2560, 4, true)?;
    if !lab.try_remedy {
        return lab.record_with(&lab.bad(), events, &stacks, &script(&fs));
    }
    // --try: the remedy's journal on a second device, made as the first;
    // the candidate rounds write there.
    let remade = Ext4::create(
        2560,
        crate::diagnose::tried_journal_kib(4 * 1024) / 1024,
        true,
    )?;
    let sides = format!(
        "if [ \"${}\" = candidate ]; then {}; else {}; fi",
        crate::trial::SIDE_ENV,
        script(&remade),
        script(&fs)
    );
    // Judged by the writers' p99: the stalls are their tail (128 writers
    // on this VM's 2 CPUs make their mean time the CPUs').
    let sides = Sides {
        script: &sides,
        metric: Some("probe.randwrite.p99_ms"),
    };
    lab.record_with_sides(&lab.bad(), events, &stacks, &script(&fs), &sides)
}

pub(super) fn fsync_script(fs: &Ext4, count: u32, pin: Option<usize>) -> String {
    format!(
        "{}\"$IOSLEUTH\" probe fsync --append --size 4k --count {count} --path {}/probe.dat",
        pin.map(|c| format!("taskset -c {c} ")).unwrap_or_default(),
        fs.mnt.display()
    )
}

fn rt_starvation(lab: &Lab) -> Result<(), CaptureError> {
    let fs = Ext4::create(256, 8, true)?;
    let events = "block,fs,sched,syscalls";
    lab.record(&lab.good(), events, &fsync_script(&fs, 2000, Some(1)))?;
    // A real-time task that runs beside the workload, not in it, as a
    // real one does: `--try` lowers it between its rounds.
    let _burner = Standing::start(
        lab,
        &[
            "probe",
            "burn",
            "--cpu",
            "1",
            "--fifo",
            "50",
            "--on-ms",
            "150",
            "--off-ms",
            "250",
            "--duration",
            "3600",
        ],
    )?;
    std::thread::sleep(Duration::from_millis(50));
    lab.record(&lab.bad(), events, &fsync_script(&fs, 2000, Some(1)))
}

fn slow_device(lab: &Lab) -> Result<(), CaptureError> {
    let events = "block,fs,sched,syscalls";
    for (out, every) in [(lab.good(), 0), (lab.bad(), 200)] {
        let disk = LoopDevice::create_slow(128, Stall::writes(every, Duration::from_millis(150)))?;
        let fs = Ext4::on(disk, 4)?;
        fs.disk.stall_only(fs.journal_bytes()?);
        lab.record(&out, events, &fsync_script(&fs, 400, None))?;
        note_stalls(lab, &fs.disk, every, "journal writes");
    }
    Ok(())
}

/// What the slow disk of a run served (`what`: journal writes, reads) and
/// held, said with the scenario's verdict.
fn note_stalls(lab: &Lab, disk: &LoopDevice, every: u64, what: &str) {
    if let Some((served, held)) = disk.stall_counts() {
        let run = if every == 0 { "good" } else { "bad" };
        lab.notes.borrow_mut().push(format!(
            "{run} run: the slow disk served {served} {what} and held {held} of them"
        ));
    }
}

/// A 64 MiB disk on the FUSE disk that holds every `every`-th read 150 ms
/// (none with 0).
fn holding_reads(every: u64) -> Result<LoopDevice, CaptureError> {
    LoopDevice::create_slow(
        64,
        Stall {
            reads: true,
            ..Stall::writes(every, Duration::from_millis(150))
        },
    )
}

/// io_uring reads on a stalling disk: the slowest request is the one the
/// device held, named as an io_uring read with its block request.
fn uring_slow_device(lab: &Lab) -> Result<(), CaptureError> {
    let events = "block,sched,syscalls,io_uring";
    for (out, every) in [(lab.good(), 0), (lab.bad(), 150)] {
        let disk = holding_reads(every)?;
        let script = format!(
            "fio --output=/dev/null --name=u --filename={} --ioengine=io_uring --rw=randread --bs=4k --direct=1 --iodepth=4 --size=60M --io_size=3M",
            disk.path.display()
        );
        lab.record(&out, events, &script)?;
        note_stalls(lab, &disk, every, "reads");
    }
    Ok(())
}

/// Reads through a mapped file on a stalling disk: the slowest page fault
/// is the one whose read the device held, named with its file and offset.
fn mmap_slow_device(lab: &Lab) -> Result<(), CaptureError> {
    let events = "block,sched,syscalls,faults";
    for (out, every) in [(lab.good(), 0), (lab.bad(), 100)] {
        let disk = holding_reads(every)?;
        let fs = Ext4::on(disk, 4)?;
        let file = fs.mnt.join("data.mdb");
        catalog::data_file(&file, 32)?;
        let script = format!(
            "{} && {}",
            catalog::uncache(&file),
            shapes::fio_mmap_read(&file, "--size=32M --io_size=2M")
        );
        lab.record(&out, events, &script)?;
        note_stalls(lab, &fs.disk, every, "reads");
    }
    Ok(())
}

fn healthy(lab: &Lab) -> Result<(), CaptureError> {
    let fs = Ext4::create(256, 8, true)?;
    let disk = LoopDevice::create(64, true)?;
    let script = format!(
        "{} && {}",
        fsync_script(&fs, 400, None),
        seqread_script(&disk.path)
    );
    let events = "block,fs,sched,syscalls";
    lab.record(&lab.good(), events, &script)?;
    lab.record(&lab.bad(), events, &script)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lab covers the whole catalog: each rule is the expected top
    /// finding of one scenario's bad run.
    #[test]
    fn every_rule_has_a_scenario() {
        for rule in crate::diagnose::catalog() {
            assert!(
                SCENARIOS.iter().any(|s| s.expect == Some(rule.id)),
                "no lab scenario for {}",
                rule.id
            );
        }
        let healthy = SCENARIOS.iter().filter(|s| s.expect.is_none()).count();
        assert!(healthy >= 5, "{healthy} healthy scenarios");
    }
}
