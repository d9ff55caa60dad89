//! Live: `record --light` counts every request in the kernel (the same
//! numbers as /proc/diskstats), sends the slow ones with every stage, and
//! leaves no BPF program behind, also when killed with SIGKILL.

use crate::common;

use common::*;
use iosleuth::testing::LoopDevice;
use iosleuth::testing::Stall;
use iosleuth::testing::{LightDoc, SlowRequest, SLOW_HEADER, SLOW_RECORD};
use std::path::Path;
use std::time::{Duration, Instant};

/// Live and with the kernel's BTF, which --light needs.
fn light_live() -> std::sync::MutexGuard<'static, ()> {
    let live = live();
    assert!(
        Path::new("/sys/kernel/btf/vmlinux").exists(),
        "live test cannot run: missing kernel BTF (/sys/kernel/btf/vmlinux)"
    );
    live
}

/// Reads and writes completed on a device so far (/sys/block/X/stat).
fn diskstats(disk: &LoopDevice) -> (u64, u64) {
    let name = disk.name.clone();
    let stat = std::fs::read_to_string(format!("/sys/block/{name}/stat")).unwrap();
    let f: Vec<u64> = stat
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    (f[0], f[4])
}

fn doc(cap: &Path) -> LightDoc {
    serde_json::from_str(&std::fs::read_to_string(cap.join("light.json")).unwrap()).unwrap()
}

/// The inode (the kernel's cgroup id) of this process's cgroup in the
/// hierarchy that holds the I/O controller (v1's blkio, else cgroup v2):
/// the cgroup its bios are charged to.
fn own_cgroup_inode() -> u64 {
    let h = iosleuth::testing::io_hierarchy().expect("a cgroup hierarchy");
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let path = own
        .lines()
        .find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, c, p) = (f.next()?, f.next()?, f.next()?);
            let hit = if h.v2 {
                c.is_empty()
            } else {
                c.split(',').any(|x| x == "blkio")
            };
            hit.then(|| p.to_string())
        })
        .unwrap();
    let dir = h.root.join(path.trim_start_matches('/'));
    std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&dir).unwrap())
}

/// How many of `counted` requests had their depth at issue read: all of
/// them in the state accounting; in the stamps accounting (which reads
/// every CPU's counters for a depth) one in `depth_sampled` by a hash of
/// sector and allocation stamp, so about `counted / depth_sampled` (on
/// this VM's 2 CPUs one in 4: 925 ± 26 of 3699, 75 ± 7.5 of 299; the
/// bounds below are many deviations wide).
fn depth_read(
    d: &LightDoc,
    light: &iosleuth::testing::LightDevice,
    accounting: &str,
    counted: u64,
) -> u64 {
    let read: u64 = light.depth.iter().sum();
    match accounting {
        "stamps" => {
            let every = u64::from(d.depth_sampled);
            let cpus = d.cpus.len() as u64;
            let expected = if cpus > 1 { 2 * cpus } else { 1 };
            assert_eq!(every, expected.next_power_of_two(), "{cpus} CPUs");
            let mean = counted / every;
            assert!(read <= counted, "{read} of {counted}");
            if mean >= 20 {
                assert!(
                    read >= mean / 3 && read <= mean * 3,
                    "{read} of {counted}, one in {every}"
                );
            }
        }
        _ => {
            assert_eq!(d.depth_sampled, 1);
            assert_eq!(read, counted);
        }
    }
    read
}

/// dd issues one request at a time: `counted` requests with their depth
/// read, each at depth 1. A completion the programs did not see leaves its
/// request in their in-flight count until the device is next seen idle:
/// until then the depth reads one more.
fn assert_depth_one(
    light: &iosleuth::testing::LightDevice,
    counted: u64,
    unseen: u64,
    accounting: &str,
) {
    assert_eq!(
        light.depth.iter().sum::<u64>(),
        counted,
        "{accounting}: {:?}",
        light.depth
    );
    if unseen == 0 {
        assert_eq!(
            light.depth.get(1).copied(),
            Some(counted),
            "{accounting}: {:?}",
            light.depth
        );
    } else {
        let deepest = light.depth.iter().rposition(|n| *n > 0).unwrap_or(0);
        assert!(
            deepest <= 1 + unseen as usize,
            "{accounting}: {:?}",
            light.depth
        );
    }
}

fn slow_requests(cap: &Path) -> Vec<SlowRequest> {
    let b = std::fs::read(cap.join("slow.bin")).unwrap();
    b[SLOW_HEADER..]
        .chunks(SLOW_RECORD)
        .map(|r| SlowRequest::parse(r).expect("a slow request"))
        .collect()
}

#[test]
#[ignore = "live: needs root, BTF and loop devices; scripts/test runs it"]
fn light_counts_what_diskstats_counts_and_sends_every_slow_request() {
    let _live = light_live();
    for accounting in ["stamps", "state"] {
        counts_and_sends_every_slow_request(accounting);
    }
}

/// The same requests diskstats counted and every one of them sent, by
/// either accounting: from the requests' own timestamps (`stamps`: the
/// loop device's queue keeps block stats, so no request needs state) or
/// from per-request state (`state`: the issuer and the depth at issue of
/// every slow request).
fn counts_and_sends_every_slow_request(accounting: &str) {
    let disk = LoopDevice::create(64, true).expect("loop device");
    let dev = disk.dev().unwrap().to_string();
    let dir = tempdir();
    let cap = dir.path().join("cap");
    let (r0, w0) = diskstats(&disk);
    let script = format!(
        "dd if={0} of=/dev/null bs=4k count=3000 iflag=direct status=none && \
         dd if=/dev/zero of={0} bs=8k count=700 oflag=direct status=none",
        disk.path.display()
    );
    run(iosleuth()
        .args([
            "record",
            "--light",
            "--accounting",
            accounting,
            "--slow",
            "0",
            "--slow-cap",
            "1000000",
            "-o",
        ])
        .arg(&cap)
        .args(["--", "sh", "-c", &script]));
    let (r1, w1) = diskstats(&disk);
    assert!(our_programs().is_empty(), "left: {:?}", our_programs());

    let d = doc(&cap);
    assert_eq!(d.accounting, accounting);
    let light = d.devices.iter().find(|x| x.dev == dev).expect("the device");
    let (reads, writes) = (&light.ops["read"], &light.ops["write"]);
    // The kernel's counts as the capture read them (its diskstats when the
    // programs were attached and when they were detached): the figures
    // every output gives.
    let kernel = light.diskstats.as_ref().expect("the device's diskstats");
    assert_eq!(kernel.completed()[..2], [r1 - r0, w1 - w0], "{accounting}");
    assert_eq!((r1 - r0, w1 - w0), (3000, 700));
    // The programs' own counts: never more than the kernel's, short only
    // by the completions the capture says they did not see, and by a few
    // at most (the kernel now and then does not run the program for a
    // completion it traces, and counts no miss: see unseen_allowed).
    let missed: Vec<_> = d
        .programs
        .iter()
        .filter(|p| p.missed.unwrap_or(0) > 0)
        .collect();
    let (seen_r, seen_w) = (reads.ios, writes.ios);
    assert!(
        seen_r <= 3000 && seen_w <= 700,
        "{accounting}: the programs counted {seen_r} reads and {seen_w} writes"
    );
    let unseen = 3700 - seen_r - seen_w;
    assert_eq!(light.unseen(), Some(unseen), "{accounting}");
    assert!(
        unseen <= unseen_allowed(3700),
        "{accounting}: {unseen} of 3700 not seen: {:?} skipped: {missed:?}",
        light.counters
    );
    if unseen > 0 {
        eprintln!("{accounting}: the programs did not see {unseen} of 3700 completions");
    }
    // Every program's skipped runs are known.
    assert!(
        d.programs.iter().all(|p| p.missed.is_some()),
        "{:?}",
        d.programs
    );
    assert_eq!(reads.bytes, seen_r * 4096);
    assert_eq!(writes.bytes, seen_w * 8192);
    assert_eq!(reads.device.n, seen_r);
    assert_eq!(light.counters.no_state + light.counters.state_full, 0);
    // dd issues one request at a time: depth 1 at every issue. The stamps
    // accounting counts the requests allocated after the first one it saw
    // (which marks the moment; what was in flight before is not counted
    // at either end), so all but that first one (the read at sector 0).
    let first = match accounting {
        "stamps" => 1,
        _ => 0,
    };
    let counted = depth_read(&d, light, accounting, 3700 - first);
    assert_depth_one(light, counted, unseen, accounting);
    match accounting {
        "stamps" => assert_eq!(light.counters.by_stamps, seen_r + seen_w),
        _ => assert_eq!(light.counters.by_stamps, 0),
    }
    // By cgroup: dd's requests, all in its own cgroup, with its path.
    let own = own_cgroup_inode();
    let cg = |op: &str| {
        d.cgroups
            .top
            .iter()
            .find(|c| c.dev == dev && c.op == op && c.id == own)
            .unwrap_or_else(|| panic!("{accounting}: no {op} entry of ours in {:?}", d.cgroups))
    };
    assert!(d.cgroups.counted);
    assert_eq!(light.counters.cgroup_full, 0);
    assert_eq!((cg("read").ios, cg("read").bytes), (seen_r, seen_r * 4096));
    assert_eq!(
        (cg("write").ios, cg("write").bytes),
        (seen_w, seen_w * 8192)
    );
    assert_eq!(cg("read").timed, seen_r, "{accounting}");
    assert_eq!(cg("read").le.iter().sum::<u64>(), seen_r);
    assert_eq!(cg("read").time_ns, reads.total.sum_ns, "{accounting}");
    assert!(cg("read")
        .path
        .as_deref()
        .is_some_and(|p| p.starts_with('/')));
    assert!(
        d.cgroups
            .top
            .iter()
            .filter(|c| c.dev == dev && c.id != own)
            .all(|c| c.ios == 0),
        "{accounting}: another cgroup on our disk: {:?}",
        d.cgroups.top
    );

    // --slow 0: every request sent, with stages that agree with the
    // histograms they were counted in.
    let slow: Vec<SlowRequest> = slow_requests(&cap)
        .into_iter()
        .filter(|r| r.dev.to_string() == dev)
        .collect();
    assert_eq!(slow.len() as u64, reads.ios + writes.ios);
    assert_eq!(light.counters.slow_sent, slow.len() as u64);
    let read_device_sum: u64 = slow
        .iter()
        .filter(|r| r.cmd_flags & 0xff == 0)
        .map(|r| r.device_ns())
        .sum();
    assert_eq!(read_device_sum, reads.device.sum_ns);
    let longest = slow.iter().map(|r| r.total_ns()).max().unwrap();
    let (lo, hi, _) = d.devices.iter().find(|x| x.dev == dev).unwrap().ops["read"]
        .total
        .rows()
        .chain(writes.total.rows())
        .max_by_key(|r| r.1)
        .unwrap();
    assert!(
        lo <= longest && longest <= hi,
        "{longest} not in {lo}..{hi}"
    );
    assert!(slow.iter().all(|r| r.issue_ns <= r.complete_ns));
    // dd's own cgroup: the one its bios were charged to.
    let own_cgroup = own_cgroup_inode();
    assert!(
        slow.iter().all(|r| r.cgroup_id == own_cgroup),
        "{accounting}: cgroups {:?}, ours {own_cgroup}",
        slow.iter()
            .map(|r| r.cgroup_id)
            .collect::<std::collections::BTreeSet<_>>()
    );
    match accounting {
        // No per-request state: who issued it and the depth are not known.
        "stamps" => assert!(slow
            .iter()
            .all(|r| r.depth == 0 && r.tid == 0 && r.comm[0] == 0)),
        _ => {
            assert!(slow.iter().all(|r| r.depth == 1));
            assert!(slow.iter().all(|r| &r.comm[..2] == b"dd"), "issued by dd");
        }
    }

    // report: the histograms' counts, the slow requests as events.
    let rep = json_report(&[&cap], &[]);
    let device = rep["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["device"] == dev.as_str())
        .unwrap();
    // The kernel's counts; the latencies of what the programs saw.
    assert_eq!(device["completed"]["read"], 3000);
    assert_eq!(device["completed"]["write"], 700);
    assert_eq!(device["d2c"]["count"], seen_r + seen_w);
    assert_eq!(rep["light"]["attach"], "tp_btf");
    assert_eq!(rep["light"]["accounting"], accounting);
    assert!(rep["events"].as_u64().unwrap() >= 3 * (seen_r + seen_w));
}

#[test]
#[ignore = "live: needs root, BTF and loop devices; scripts/test runs it"]
fn light_keeps_the_stalls_of_a_slow_device_under_the_adaptive_threshold() {
    let _live = light_live();
    let stall = Stall::writes(200, Duration::from_millis(80));
    let disk = LoopDevice::create_slow(64, stall).expect("slow loop device");
    let dev = disk.dev().unwrap().to_string();
    let dir = tempdir();
    let cap = dir.path().join("cap");
    run(iosleuth()
        .args(["record", "--light", "-o"])
        .arg(&cap)
        .args(["--", "dd", "if=/dev/zero"])
        .arg(format!("of={}", disk.path.display()))
        .args(["bs=4k", "count=2000", "oflag=direct", "status=none"]));
    let d = doc(&cap);
    let writes = &d.devices.iter().find(|x| x.dev == dev).expect("device").ops["write"];
    // Requests of 50 ms or more by the histogram, and those sent: the same.
    let long_in_hist: u64 = writes
        .total
        .rows()
        .filter(|r| r.0 >= 50_000_000)
        .map(|r| r.2)
        .sum();
    let long_sent = slow_requests(&cap)
        .iter()
        .filter(|r| r.dev.to_string() == dev && r.total_ns() >= 50_000_000)
        .count() as u64;
    eprintln!("margin: {long_in_hist} of 10 stalls in the histogram (the test needs >= 8)");
    assert!(long_in_hist >= 8, "{long_in_hist} stalls of 10 expected");
    assert_eq!(long_sent, long_in_hist);
    // Not every request: the threshold is the running p99, at least 1 ms.
    let sent = slow_requests(&cap).len() as u64;
    assert!(sent < writes.ios / 10, "{sent} of {} sent", writes.ios);
}

/// One of the running light programs' maps, by name (the maps of the
/// issue program: no other BPF user's map of the same name).
fn light_map(name: &str) -> Option<aya::maps::MapData> {
    let issue = aya::programs::loaded_programs()
        .flatten()
        .find(|p| p.name_as_str().is_some_and(|n| n.starts_with("iosl_issue")))?;
    issue.map_ids().ok()??.into_iter().find_map(|id| {
        let info = aya::maps::MapInfo::from_id(id).ok()?;
        (info.name_as_str() == Some(name))
            .then(|| aya::maps::MapData::from_id(id).ok())
            .flatten()
    })
}

fn wait_for(what: &str, seconds: u64, mut done: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(seconds);
    while !done() {
        assert!(Instant::now() < until, "{what}: not within {seconds} s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
#[ignore = "live: needs root, BTF and loop devices; scripts/test runs it"]
fn light_depth_leaves_out_what_a_missed_completion_left_in_flight() {
    let _live = light_live();
    for accounting in ["stamps", "state"] {
        depth_mends_after_an_idle_spell(accounting);
    }
}

/// The kernel now and then traces a completion without running the
/// programs: its request stays in their in-flight count. Three such
/// requests are put there as that would (into the map the programs count
/// them in) while the device is idle; once it has been idle a moment, the
/// programs take them from every depth: dd's requests, one at a time,
/// read depth 1, not 4.
fn depth_mends_after_an_idle_spell(accounting: &str) {
    use aya::maps::{Array, Map, PerCpuArray};
    let disk = LoopDevice::create(64, true).expect("loop device");
    let dev = disk.dev().unwrap().to_string();
    let dev_t = {
        let (maj, min) = dev.split_once(',').unwrap();
        (maj.parse::<u64>().unwrap() << 20) | min.parse::<u64>().unwrap()
    };
    let dir = tempdir();
    let cap = dir.path().join("cap");
    let (go, read, end) = (
        dir.path().join("go"),
        dir.path().join("read"),
        dir.path().join("end"),
    );
    let script = format!(
        "while [ ! -e {go} ]; do sleep 0.02; done; \
         dd if={dev} of=/dev/null bs=4k count=300 iflag=direct status=none; : > {read}; \
         while [ ! -e {end} ]; do sleep 0.02; done",
        go = go.display(),
        read = read.display(),
        end = end.display(),
        dev = disk.path.display()
    );
    let mut child = iosleuth()
        .args(["record", "--light", "--accounting", accounting, "-o"])
        .arg(&cap)
        .args(["--", "sh", "-c", &script])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the programs' maps", 30, || {
        light_map("inflight_bias").is_some()
    });
    let slot = {
        let slots: Array<_, u64> =
            Array::try_from(Map::Array(light_map("dev_slot").unwrap())).unwrap();
        let found = slots
            .iter()
            .flatten()
            .find(|e| e & 0xffff_ffff == dev_t)
            .map(|e| (e >> 32) as u32);
        found.expect("the device's slot")
    };
    // Three requests left in flight, as three unseen completions leave them.
    match accounting {
        "stamps" => {
            let mut counters: PerCpuArray<_, iosleuth::testing::LightMapCounters> =
                PerCpuArray::try_from(Map::PerCpuArray(light_map("counters").unwrap())).unwrap();
            let mut per_cpu: Vec<_> = counters.get(&slot, 0).unwrap().iter().copied().collect();
            per_cpu[0].issued += 3;
            counters
                .set(slot, aya::maps::PerCpuValues::try_from(per_cpu).unwrap(), 0)
                .unwrap();
        }
        _ => {
            let mut inflight: Array<_, i64> =
                Array::try_from(Map::Array(light_map("inflight").unwrap())).unwrap();
            let n = inflight.get(&slot, 0).unwrap();
            inflight.set(slot, n + 3, 0).unwrap();
        }
    }
    let bias: Array<_, i64> =
        Array::try_from(Map::Array(light_map("inflight_bias").unwrap())).unwrap();
    // Two idle readings apart, then the leftover is the bias.
    wait_for("the bias", 10, || bias.get(&slot, 0).ok() == Some(3));
    std::fs::write(&go, "").unwrap();
    wait_for("dd", 60, || read.exists());
    std::fs::write(&end, "").unwrap();
    assert!(child.wait().unwrap().success());

    let d = doc(&cap);
    let light = d.devices.iter().find(|x| x.dev == dev).expect("the device");
    // The stamps accounting counts from the second request it saw.
    let first = match accounting {
        "stamps" => 1,
        _ => 0,
    };
    let counted = depth_read(&d, light, accounting, 300 - first);
    let unseen = light.unseen().expect("the kernel's counts");
    assert!(
        unseen <= unseen_allowed(300),
        "{accounting}: {unseen} unseen"
    );
    assert_depth_one(light, counted, unseen, accounting);
}

#[test]
#[ignore = "live: needs root, BTF and loop devices; scripts/test runs it"]
fn light_programs_go_away_with_a_killed_recorder() {
    let _live = light_live();
    let dir = tempdir();
    let mut child = iosleuth()
        .args(["record", "--light", "-o"])
        .arg(dir.path().join("cap"))
        // Ends by itself once orphaned by the kill.
        .args(["--", "sleep", "5"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(20);
    while our_programs().len() < 7 {
        assert!(Instant::now() < until, "programs never loaded");
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap(); // SIGKILL: no handler runs
    child.wait().unwrap();
    // The kernel frees programs after an RCU grace period.
    let until = Instant::now() + Duration::from_secs(5);
    while !our_programs().is_empty() {
        assert!(
            Instant::now() < until,
            "left after SIGKILL: {:?}",
            our_programs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The flight recorder counts a real-time task's time also when it became
/// real-time while running (`sched_setscheduler` switches nothing). Two
/// sleepers woken onto its CPU wait for the rest of its burst; the second
/// to run gets the CPU from the first, so only the real-time time counted
/// on that CPU can name the burner for it (before the fix: none).
#[test]
#[ignore = "live: needs root and BTF; scripts/test runs it"]
fn light_counts_a_task_made_real_time_while_running() {
    let _live = light_live();
    let dir = tempdir();
    let cap = dir.path().join("cap");
    let exe = env!("CARGO_BIN_EXE_iosleuth");
    // The sleepers sleep on CPU 1; 50 ms later the burner takes CPU 1 for
    // 400 ms as SCHED_FIFO, so their wakeups at 200 ms queue behind it
    // for about 250 ms.
    let script = format!(
        "taskset -c 1 sleep 0.2 & taskset -c 1 sleep 0.2 & sleep 0.05; \
         '{exe}' probe burn --cpu 1 --fifo 50 --on-ms 400 --off-ms 1 --duration 0.01 >/dev/null; wait"
    );
    run(iosleuth()
        .args(["record", "--light", "-o"])
        .arg(&cap)
        .args(["--", "sh", "-c", &script]));
    let report = json_report(&[&cap], &[]);
    let waits = report["sched"]["long_waits"].as_array().unwrap();
    let sleepers: Vec<_> = waits
        .iter()
        .filter(|w| w["comm"] == "sleep" && w["cpu"] == 1)
        .filter(|w| w["wait_ns"].as_u64().unwrap() >= 100_000_000)
        .collect();
    assert_eq!(sleepers.len(), 2, "two sleepers' waits: {waits:#?}");
    for w in sleepers {
        let wait = w["wait_ns"].as_u64().unwrap();
        let holder = &w["held_by"][0];
        let rt = holder["ns"].as_u64().unwrap_or(0);
        eprintln!(
            "margin: sleep waited {:.1} ms, {:.0} % of it held by {} ({}) (the test needs RT and >= 80 %)",
            wait as f64 / 1e6,
            100.0 * rt as f64 / wait as f64,
            holder["comm"],
            holder["policy"]
        );
        assert_eq!(holder["policy"], "RT", "{w:#}");
        assert!(rt as f64 >= 0.8 * wait as f64, "{w:#}");
    }
    assert_eq!(
        report["findings"][0]["id"], "rt_starvation",
        "{:#}",
        report["findings"]
    );
}

/// Bios held back by a cgroup's I/O limit are counted on their device, as
/// many as perf sees blk-throttle's workers queue: blk-throttle lets a
/// slice's worth through at once and holds the next until the following
/// slice, so 300 direct reads at 100 a second hold about one in ten. The
/// same reads with no limit hold none.
#[test]
#[ignore = "live: needs root, BTF, loop devices, cgroups and perf; scripts/test runs it"]
fn light_counts_the_bios_a_cgroup_limit_held() {
    let _live = light_live();
    need_programs(&["perf"]);
    // perf mounts tracefs where it is not mounted, and leaves it: mounted
    // here (and unmounted after) it finds it.
    let _tracefs = iosleuth::testing::Tracefs::open().expect("tracefs");
    let h = crate::cgroup::io_hierarchy();
    let disk = LoopDevice::create(64, true).expect("loop device");
    let dev = disk.dev().unwrap().to_string();
    let majmin = dev.replace(',', ":");
    let dir = tempdir();
    for limited in [true, false] {
        let cg = crate::cgroup::TestCgroup::new(&h, if limited { "limited" } else { "free" });
        if limited {
            let (file, line) = if h.v2 {
                ("io.max", format!("{majmin} riops=100"))
            } else {
                ("blkio.throttle.read_iops_device", format!("{majmin} 100"))
            };
            std::fs::write(cg.dir.join(file), line).unwrap();
        }
        let cap = dir.path().join(format!("cap-{limited}"));
        let perf_data = dir.path().join(format!("perf-{limited}.data"));
        let script = format!(
            "echo $$ > {}/cgroup.procs && exec dd if={} of=/dev/null bs=4k count=300 iflag=direct status=none",
            cg.dir.display(),
            disk.path.display()
        );
        run(perf()
            .args(["record", "-q", "-e", "block:block_bio_queue", "-a", "-o"])
            .arg(&perf_data)
            .arg("--")
            .arg(env!("CARGO_BIN_EXE_iosleuth"))
            .args(["record", "--light", "-o"])
            .arg(&cap)
            .args(["--", "sh", "-c", &script]));
        // perf's count: bios queued on the disk by blk-throttle's workers.
        let perf_script = run(perf()
            .args(["script", "-F", "comm,trace", "-i"])
            .arg(&perf_data));
        let by_workers = perf_script
            .lines()
            .filter(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.len() > 2 && f[0].starts_with("kworker") && f[1] == dev && f[2].starts_with('R')
            })
            .count() as u64;
        let d = doc(&cap);
        assert!(d.throttle, "throttled bios not counted on this kernel");
        let c = &d.devices.iter().find(|x| x.dev == dev).unwrap().counters;
        assert_eq!(
            c.throttled, by_workers,
            "perf saw {by_workers} queued by workers"
        );
        assert_eq!(c.throttled_bytes, c.throttled * 4096);
        if limited {
            assert!(
                (15..=60).contains(&c.throttled),
                "{} of 300 reads held at 100 a second",
                c.throttled
            );
        } else {
            assert_eq!(c.throttled, 0);
        }
        let text = run(iosleuth().arg("report").arg(&cap));
        let said = format!(
            "held by cgroup I/O limits {} ({:.1} MiB)",
            c.throttled,
            c.throttled_bytes as f64 / 1048576.0
        );
        assert!(text.contains(&said), "{said} not in:\n{text}");
    }
}

#[test]
#[ignore = "live: needs root, BTF and loop devices; scripts/test runs it"]
fn light_records_interrupt_time_only_when_asked() {
    let _live = light_live();
    let disk = LoopDevice::create(64, true).expect("loop device");
    let script = format!(
        "dd if={} of=/dev/null bs=4k count=2000 iflag=direct status=none; sleep 0.3",
        disk.path.display()
    );
    let record = |irq: &str| {
        let dir = tempdir();
        let cap = dir.path().join("cap");
        run(iosleuth()
            .args(["record", "--light", "--bpf-stats", "--irq", irq, "-o"])
            .arg(&cap)
            .args(["--", "sh", "-c", &script]));
        let d = doc(&cap);
        let rep = json_report(&[&cap], &[]);
        let text = run(iosleuth().arg("report").arg(&cap));
        (dir, d, rep, text)
    };
    let attached = |d: &LightDoc, name: &str| d.programs.iter().any(|p| p.name == name);

    // Off (the default): the hooks are not attached, and every output
    // says the figures are unknown rather than zero.
    let (_dir, d, rep, text) = record("off");
    assert!(!d.irq);
    assert!(!attached(&d, "iosl_softirq_entry") && !attached(&d, "iosl_irq_entry"));
    assert!(attached(&d, "iosl_complete_st"), "{:?}", d.programs);
    assert!(rep["light"]["hardirqs"].is_null(), "{}", rep["light"]);
    assert!(rep["light"]["hardirq_ns"].is_null());
    assert!(rep["irq"]["softirq"].is_null(), "{}", rep["irq"]);
    assert_eq!(rep["irq"]["not_recorded"], serde_json::json!(["irq"]));
    assert_says(&text, "interrupt time not recorded (--irq off)");

    // On: each CPU's softirqs counted and timed (a timer ticks on every
    // CPU several times over the capture; the reads complete in softirqs).
    let (_dir, d, rep, text) = record("on");
    assert!(d.irq);
    assert!(attached(&d, "iosl_softirq_entry") && attached(&d, "iosl_softirq_exit"));
    let runs: u64 = d.cpus.iter().flat_map(|c| c.softirqs.iter()).sum();
    let ns: u64 = d.cpus.iter().flat_map(|c| c.softirq_ns.iter()).sum();
    assert!(runs > 0 && ns > 0, "{runs} softirqs, {ns} ns");
    assert!(rep["light"]["hardirqs"].is_u64(), "{}", rep["light"]);
    let total: u64 = rep["irq"]["softirq_total"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v["count"].as_u64().unwrap())
        .sum();
    assert_eq!(total, runs);
    assert!(!text.contains("interrupt time not recorded"));
}
