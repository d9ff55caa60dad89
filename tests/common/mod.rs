//! Helpers for both test binaries (tests/offline, tests/live). A test that
//! needs more than cargo (root, a program or engine `scripts/test` installs)
//! is `#[ignore]`d with the reason and fails, naming what is missing, when
//! run without it: never a pass that did not run.
#![allow(dead_code)]

pub mod browser;
pub mod instance;
pub mod python;

use std::path::Path;
use std::process::Command;

pub fn iosleuth() -> Command {
    Command::new(env!("CARGO_BIN_EXE_iosleuth"))
}

/// Fails the test, naming the first of `tools` that is not on PATH.
pub fn need_programs(tools: &[&str]) {
    for tool in tools {
        assert!(
            on_path(tool),
            "test cannot run: missing the `{tool}` program (scripts/test installs it)"
        );
    }
}

fn on_path(tool: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .is_ok_and(|o| o.status.success())
}

/// What live tests need and this machine lacks, if anything.
fn missing_capability() -> Option<String> {
    if unsafe { libc::geteuid() } != 0 {
        return Some("root".into());
    }
    for tool in ["losetup", "fio", "blkparse", "btt", "iostat", "perf"] {
        if !on_path(tool) {
            return Some(format!(
                "the `{tool}` program (run scripts/test, which installs it)"
            ));
        }
    }
    if let Err(e) = iosleuth::testing::Tracefs::open() {
        return Some(format!("tracefs ({e})"));
    }
    if !Path::new("/dev/loop-control").exists() {
        return Some("loop devices (/dev/loop-control)".into());
    }
    None
}

/// Every live test begins with `let _live = live();`. Live tests are
/// `#[ignore]`d, so they run only when asked for (`scripts/test` as root):
/// a missing capability is then a failure that names it, never a pass.
/// The guard is one lock that all live tests share: each records the whole
/// machine's kernel and asserts a contrast between two runs, so none may
/// run beside another.
pub fn live() -> std::sync::MutexGuard<'static, ()> {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    // A live test that failed still released the machine: go on.
    let guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(what) = missing_capability() {
        panic!("live test cannot run: missing {what} (scripts/test, as root, runs the live tests)");
    }
    guard
}

pub fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `iosleuth ARGS | head -1`: reads one line, closes the pipe, and asserts
/// that iosleuth then ended quietly with 0 (no panic message).
pub fn read_one_line_then_go_away(args: &[&str]) {
    use std::io::BufRead;
    let mut child = iosleuth()
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(!first.is_empty(), "{args:?} printed nothing");
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
}

/// Sequential 4 KiB direct reads submitted 64 at a time, the pattern that
/// lets the block layer merge (case 1).
pub fn fio_batched_reads(dev: &Path, size_mb: u64) -> Command {
    let mut c = Command::new("fio");
    c.args([
        "--name=seq",
        "--rw=read",
        "--bs=4k",
        "--direct=1",
        "--ioengine=libaio",
        "--iodepth=64",
        "--iodepth_batch_submit=64",
        "--iodepth_batch_complete_min=64",
        "--output=/dev/null",
    ])
    .arg(format!("--filename={}", dev.display()))
    .arg(format!("--size={size_mb}M"));
    c
}

pub fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("iosleuth-test-")
        .tempdir_in("/var/tmp")
        .unwrap()
}

/// One row of btt's tables: MIN, AVG, MAX as printed, and N.
#[derive(Debug, Clone, PartialEq)]
pub struct BttRow {
    pub min: String,
    pub avg: String,
    pub max: String,
    pub n: u64,
}

/// Parses btt's "All Devices" section and the merge rows of its `.avg` output.
pub fn parse_btt(avg: &str) -> (std::collections::HashMap<String, BttRow>, Vec<Vec<String>>) {
    let mut rows = std::collections::HashMap::new();
    let mut merges = Vec::new();
    let mut section = "";
    for l in avg.lines() {
        if l.starts_with("====") {
            section = if l.contains("All Devices") {
                "all"
            } else if l.contains("Device Merge Information") {
                "merge"
            } else {
                ""
            };
            continue;
        }
        let f: Vec<&str> = l.split_whitespace().collect();
        match section {
            "all" if f.len() == 5 && f[1].contains('.') => {
                rows.insert(
                    f[0].to_string(),
                    BttRow {
                        min: f[1].into(),
                        avg: f[2].into(),
                        max: f[3].into(),
                        n: f[4].parse().unwrap(),
                    },
                );
            }
            "merge" if l.contains('|') && !l.contains("#Q") && !l.starts_with("---") => {
                let nums: Vec<String> = l
                    .split('|')
                    .skip(1)
                    .flat_map(|p| p.split_whitespace())
                    .map(String::from)
                    .collect();
                merges.push(nums);
            }
            _ => {}
        }
    }
    (rows, merges)
}

pub fn secs(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

pub fn json_report<P: AsRef<Path>>(paths: &[P], extra: &[&str]) -> serde_json::Value {
    let mut c = iosleuth();
    c.arg("report").arg("--format").arg("json").args(extra);
    for p in paths {
        c.arg(p.as_ref());
    }
    serde_json::from_str(&run(&mut c)).expect("report JSON")
}

pub fn btt_of(exported: &Path, name: &str) -> String {
    let dump = exported.join("dump.bin");
    run(Command::new("blkparse")
        .arg("-D")
        .arg(exported)
        .arg("-i")
        .arg(name)
        .arg("-d")
        .arg(&dump)
        .arg("-O"));
    let out = exported.join("btt");
    // btt writes its plot data (*_iops_fp.dat, *_mbps_fp.dat) into the
    // current directory: keep it with the export, not in the checkout.
    run(Command::new("btt")
        .current_dir(exported)
        .arg("-i")
        .arg(&dump)
        .arg("-o")
        .arg(&out));
    std::fs::read_to_string(out.with_extension("avg")).unwrap()
}

/// Runs blkparse + btt on exported blktrace files and asserts that iosleuth's
/// report of the same files gives btt's numbers to the nanosecond.
pub fn assert_btt_agrees(exported: &Path, name: &str, dev_id: &str) {
    let (btt, merges) = parse_btt(&btt_of(exported, name));
    let rep = json_report(&[exported], &[]);
    let dev = &rep["devices"][0];
    assert_eq!(dev["device"], dev_id);
    let mut compared = 0;
    for (name, key) in [
        ("Q2Q", "q2q"),
        ("Q2G", "q2g"),
        ("G2I", "g2i"),
        ("Q2M", "q2m"),
        ("I2D", "i2d"),
        ("M2D", "m2d"),
        ("D2C", "d2c"),
        ("Q2C", "q2c"),
    ] {
        let ours = &rep["all_devices"]["btt"][key];
        let n = ours["n"].as_u64().unwrap();
        match btt.get(name) {
            None => assert_eq!(n, 0, "{name}: btt printed no row but iosleuth counted {n}"),
            Some(row) => {
                let total = ours["total_ns"].as_u64().unwrap();
                let avg = ((total / 1_000_000_000) as f64 + (total % 1_000_000_000) as f64 / 1e9)
                    / n as f64;
                assert_eq!(n, row.n, "{name} N");
                assert_eq!(
                    secs(ours["min_ns"].as_u64().unwrap()),
                    row.min,
                    "{name} MIN"
                );
                assert_eq!(format!("{avg:.9}"), row.avg, "{name} AVG");
                assert_eq!(
                    secs(ours["max_ns"].as_u64().unwrap()),
                    row.max,
                    "{name} MAX"
                );
                compared += 1;
            }
        }
    }
    assert!(
        compared >= 6,
        "btt printed only {compared} of the intervals"
    );
    for must in ["Q2C", "D2C", "I2D", "Q2G", "G2I"] {
        assert!(btt.contains_key(must), "btt has no {must} row");
    }
    // Merge table: #Q #D Ratio BLKmin BLKavg BLKmax Total
    assert_eq!(
        merges.len(),
        1,
        "one device in btt's merge table: {merges:?}"
    );
    let m = &dev["btt_merge"];
    let ours = [
        m["queued"].to_string(),
        m["issued"].to_string(),
        format!("{:.1}", m["ratio"].as_f64().unwrap()),
        m["blk_min"].to_string(),
        m["blk_avg"].to_string(),
        m["blk_max"].to_string(),
        m["blk_total"].to_string(),
    ];
    assert_eq!(merges[0], ours, "merge table");
}

/// The tracepoints of `iosleuth record --events block` (as `block/NAME`),
/// without the buffer-head events that heavy writers flood a buffer with.
pub fn block_events() -> &'static [&'static str] {
    iosleuth::testing::EVENT_SETS
        .iter()
        .find(|(n, _)| *n == "block")
        .map(|(_, e)| *e)
        .unwrap()
}

/// `f()`, and the share of the machine's CPU time that was idle meanwhile
/// (idle and iowait over all, from /proc/stat): a test whose workload
/// leaves the CPUs idle can tell whether other work took them.
pub fn with_machine_idle<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let sample = || -> (u64, u64) {
        let stat = std::fs::read_to_string("/proc/stat").unwrap();
        let v: Vec<u64> = stat
            .lines()
            .next()
            .unwrap()
            .split_whitespace()
            .skip(1)
            .filter_map(|x| x.parse().ok())
            .collect();
        (v[3] + v[4], v.iter().sum())
    };
    let (idle0, all0) = sample();
    let out = f();
    let (idle1, all1) = sample();
    let idle = (idle1 - idle0) as f64 / (all1 - all0).max(1) as f64;
    (out, idle)
}

/// The eMMC-like stall in a report: the fsyncs slower than 100 ms are
/// device time of a journal write (more than 90 % each), with the CPU
/// idle meanwhile: more than `min_idle_pct` of the wait for each fsync
/// when `Idle::Each` (a committed capture), for the most idle one when
/// `Idle::Best` (live: a 150 ms window of one CPU can be taken by the
/// recorder or a kworker even on a quiet machine). Returns how many such
/// fsyncs there were.
pub fn assert_slow_fsyncs_are_journal_device_time(
    rep: &serde_json::Value,
    min_idle_pct: f64,
    idle: Idle,
) -> usize {
    let mut slow = 0;
    for kind in ["probe fsync", "syscall fsync", "ext4_sync_file"] {
        let list = rep["outliers"]["by_kind"][kind]
            .as_array()
            .unwrap_or_else(|| panic!("no outliers of kind {kind}: {:#}", rep["outliers"]));
        let over: Vec<&serde_json::Value> = list
            .iter()
            .filter(|o| o["latency_ns"].as_u64().unwrap() > 100_000_000)
            .collect();
        for o in &over {
            let lat = o["latency_ns"].as_u64().unwrap() as f64;
            let journal = o["breakdown"]["device_ns"]["journal write"]
                .as_u64()
                .unwrap_or(0) as f64;
            // Beside other work the thread also waits runnable after the
            // write completes (seen: 17.7 ms of a 196 ms fsync behind a
            // CPU hog): that part is the scheduler's, said as such.
            let runnable = o["breakdown"]["runnable_ns"].as_u64().unwrap_or(0) as f64;
            assert!(journal > 0.9 * (lat - runnable), "{kind}: {:#}", o);
            let percent = |k: &str| o["percent"][k].as_f64().unwrap_or(0.0);
            assert!(
                percent("device") > 80.0 && percent("device") + percent("runnable") > 95.0,
                "{o:#}"
            );
            let r = &o["main_request"];
            assert_eq!(r["class"], "journal write", "{o:#}");
            assert!(r["comm"].as_str().unwrap().starts_with("jbd2/"), "{o:#}");
            assert!(r["d2c_ns"].as_u64().unwrap() > 140_000_000, "{o:#}");
            let idle_pct = o["cpu_idle_percent"].as_f64().unwrap();
            assert!(idle == Idle::Best || idle_pct > min_idle_pct, "{o:#}");
            let s = o["summary"].as_str().unwrap();
            assert!(
                s.contains("device (journal write") && s.contains("CPU idle"),
                "{s}"
            );
        }
        let best = over
            .iter()
            .map(|o| o["cpu_idle_percent"].as_f64().unwrap())
            .fold(f64::MIN, f64::max);
        if !over.is_empty() {
            eprintln!("margin: {kind}: the most idle slow fsync's CPU idle {best:.0} % (needs > {min_idle_pct})");
            assert!(best > min_idle_pct, "{kind}: CPU idle at most {best:.0} %");
        }
        slow = slow.max(over.len());
    }
    slow
}

/// Which slow fsyncs must show their CPU idle.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Idle {
    Each,
    Best,
}

/// Case 3 in a report: the pinned victim (`iosleuth probe burn`, comm
/// iosleuth, CPU 1) waits about the burner's 150 ms on-time, at least
/// twice, and the CPU is held by the SCHED_FIFO 50 burner (kernel prio 49).
pub fn assert_rt_burner_starves_the_victim(rep: &serde_json::Value) {
    let s = &rep["sched"];
    let ops = &rep["syscalls"]["operations"]["burst"];
    assert!(ops["count"].as_u64().unwrap() > 100, "{ops}");
    // The victim's longest waits are the burner's bursts, and the burner
    // is named as RT with kernel priority 49 (SCHED_FIFO 50).
    let waits = s["long_waits"].as_array().unwrap();
    let victim_waits: Vec<&serde_json::Value> = waits
        .iter()
        .filter(|w| {
            w["comm"] == "iosleuth" && w["cpu"] == 1 && w["wait_ns"].as_u64().unwrap() > 50_000_000
        })
        .collect();
    assert!(victim_waits.len() >= 2, "{waits:#?}");
    for w in &victim_waits {
        let wait = w["wait_ns"].as_u64().unwrap();
        assert!(wait < 160_000_000, "about the burner's 150 ms on-time: {w}");
        let top = &w["held_by"][0];
        assert_eq!(top["policy"], "RT", "{w}");
        assert_eq!(top["prio"], 49, "{w}");
        assert!(
            top["ns"].as_u64().unwrap() as f64 > 0.95 * wait as f64,
            "{w}"
        );
    }
}

/// With IOSLEUTH_FIXTURE_DIR set (scripts/make-fixtures), copies a live
/// test's capture there as `name`.
pub fn save_fixture(cap: &Path, name: &str) {
    if let Some(d) = std::env::var_os("IOSLEUTH_FIXTURE_DIR") {
        let to = Path::new(&d).join(name);
        let _ = std::fs::remove_dir_all(&to);
        run(Command::new("cp").arg("-r").arg(cap).arg(&to));
    }
}

/// `report --format json`'s findings of one input.
pub fn findings(path: &str) -> Vec<serde_json::Value> {
    json_report(&[path], &[])["findings"]
        .as_array()
        .unwrap()
        .clone()
}

/// `report --explain ID` of one input.
pub fn explain(path: &str, id: &str) -> String {
    run(iosleuth().arg("report").arg(path).args(["--explain", id]))
}

/// Asserts that `report PATH --explain ID` says `expected`.
pub fn assert_explains(path: &str, id: &str, expected: &str) {
    let why = explain(path, id);
    assert!(why.contains(expected), "{why}");
}

/// Copies a directory tree (a capture) file by file.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let t = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &t);
        } else {
            std::fs::copy(e.path(), &t).unwrap();
        }
    }
}

/// How a command ended: its exit code and what it printed.
pub struct Outcome {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Outcome {
    fn of(status: std::process::ExitStatus, stdout: &[u8], stderr: &[u8]) -> Outcome {
        Outcome {
            code: status.code().expect("exited, not killed by a signal"),
            stdout: String::from_utf8_lossy(stdout).into(),
            stderr: String::from_utf8_lossy(stderr).into(),
        }
    }
}

/// `iosleuth ARGS`, whatever its exit code.
pub fn outcome(args: &[&str]) -> Outcome {
    outcome_of(iosleuth().args(args))
}

/// Runs `cmd` to its end, whatever its exit code.
pub fn outcome_of(cmd: &mut Command) -> Outcome {
    let o = cmd.output().unwrap();
    Outcome::of(o.status, &o.stdout, &o.stderr)
}

/// The address space a bad-input run may use: a crafted file that makes
/// iosleuth allocate by a count it read fails the test instead of the VM.
pub const BAD_INPUT_AS_BYTES: u64 = 512 << 20;
/// How long a bad-input run may take.
pub const BAD_INPUT_SECONDS: u64 = 30;

/// Runs `cmd` (its standard input `input` when given, else nothing) under
/// an address-space limit of 512 MiB, failing the test if it still runs
/// after 30 s or dies of a signal (an allocation refused by the limit
/// aborts): what the bad-input tests feed it used to hang or eat memory.
/// Its output is drained meanwhile, so that a large report cannot block it
/// on a full pipe.
pub fn outcome_bounded(cmd: &mut Command, input: Option<Vec<u8>>) -> Outcome {
    use std::io::{Read, Write};
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.stdin(if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    // SAFETY: setrlimit is async-signal-safe; nothing else runs between
    // fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: BAD_INPUT_AS_BYTES,
                rlim_max: BAD_INPUT_AS_BYTES,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let writer = input.map(|bytes| {
        let mut stdin = child.stdin.take().unwrap();
        std::thread::spawn(move || {
            let _ = stdin.write_all(&bytes);
        })
    });
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            r.read_to_end(&mut s).unwrap();
            s
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(BAD_INPUT_SECONDS) {
            let _ = child.kill();
            panic!("{cmd:?} still runs after {BAD_INPUT_SECONDS} s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    if let Some(w) = writer {
        w.join().unwrap();
    }
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    if let Some(sig) = status.signal() {
        panic!(
            "{cmd:?} died of signal {sig} under a {} MiB address-space limit: {}",
            BAD_INPUT_AS_BYTES >> 20,
            String::from_utf8_lossy(&err)
        );
    }
    Outcome::of(status, &out, &err)
}

/// `iosleuth ARGS` run as `outcome_bounded` runs it.
pub fn bounded(args: &[&str]) -> Outcome {
    outcome_bounded(iosleuth().args(args), None)
}

/// Fails unless `out` (a command's stdout or stderr) holds `said`,
/// showing both.
#[track_caller]
pub fn assert_says(out: &str, said: &str) {
    assert!(out.contains(said), "expected:\n{said}\nin:\n{out}");
}

/// The names of the files in `dir`, sorted.
pub fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Ends an iosleuth a failed test left running as its user would: SIGTERM
/// (its handler unloads its programs and unmounts the tracefs it
/// mounted), then SIGKILL after 10 s and `record --cleanup` after it, so a
/// failure leaves the machine as it found it.
pub fn end_iosleuth(child: &mut std::process::Child) {
    if child.try_wait().ok().flatten().is_some() {
        return;
    }
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::time::Instant::now() < until {
        if child.try_wait().ok().flatten().is_some() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = iosleuth().args(["record", "--cleanup"]).output();
}

/// The names of iosleuth's BPF programs (`iosl_*`) loaded on the machine now.
/// How many of `requests` completions the light programs may miss: the
/// kernel now and then does not run a tp_btf program for a completion it
/// traces, and counts no recursion miss (measured in docs/WATCH.md, "What
/// it does not see": alone on block_rq_complete about one in 60,000, more
/// often beside another probe). The recorder says how many (`unseen`).
pub fn unseen_allowed(requests: u64) -> u64 {
    2 + requests / 1000
}

pub fn our_programs() -> Vec<String> {
    aya::programs::loaded_programs()
        .flatten()
        .filter_map(|p| p.name_as_str().map(str::to_string))
        .filter(|n| n.starts_with("iosl_"))
        .collect()
}

/// `check BASE CAND`'s verdict word and line, after asserting that `diff
/// --format json`'s `check` says the same (`check` and `diff` judge by
/// one rule).
pub fn check_agrees_with_diff(base: &str, cand: &str) -> (&'static str, String) {
    let o = outcome(&["check", base, cand]);
    let word = match o.code {
        0 => "good",
        1 => "regressed",
        125 => "cannot_tell",
        c => panic!("check {base} {cand}: exit {c}: {}", o.stderr),
    };
    let line = o.stdout.trim().to_string();
    let d = outcome(&["diff", "--format", "json", base, cand]);
    assert_eq!(d.code, 0, "{}", d.stderr);
    let d = serde_json::from_str::<serde_json::Value>(&d.stdout).unwrap()["check"].clone();
    assert_eq!(
        d["verdict"], word,
        "{base} -> {cand}: check says {line:?}, diff {d}"
    );
    let why = d["why"].as_str().unwrap();
    assert_eq!(
        line,
        format!("{}: {why}", word.replace('_', " ")),
        "{base} -> {cand}"
    );
    (word, line)
}

/// `perf`, with its build-id cache (`~/.debug`) in the build's own
/// directory rather than the machine's home: the tests leave the machine
/// as they found it, and a cached kernel would change what other tests
/// see of perf.data files recorded on that kernel.
pub fn perf() -> Command {
    let home = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/perf-home");
    let _ = std::fs::create_dir_all(&home);
    let mut c = Command::new("perf");
    c.env("HOME", home);
    c
}

/// The nearest-rank percentile (docs/report.md's one definition): the
/// value at rank ⌈p/100 · n⌉ of the sorted values; `None` for none.
pub fn nearest_rank(v: &mut [u64], p: f64) -> Option<u64> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    Some(v[rank - 1])
}

/// Asserts that iosleuth's median and p99 (`ours`, by percentile) are
/// within 10 % of an anchor's own per-operation latencies (`theirs`, in
/// ns, nearest rank), printing both.
pub fn assert_p50_p99_within_10_percent(
    anchor: &str,
    theirs: &mut [u64],
    mut ours: impl FnMut(f64) -> f64,
) {
    for p in [50.0, 99.0] {
        let t = nearest_rank(theirs, p).unwrap() as f64;
        let o = ours(p);
        eprintln!(
            "p{p}: {anchor} {:.1} µs, iosleuth {:.1} µs",
            t / 1e3,
            o / 1e3
        );
        assert!(
            (o - t).abs() <= 0.10 * t,
            "p{p}: {anchor}'s {t} ns, iosleuth's {o} ns"
        );
    }
}

/// A certificate for 127.0.0.1 in `DIR/NAME.crt` (key `NAME.key`), signed
/// by a CA of its own made here (`NAME-ca.crt`), with openssl.
pub fn make_certificate(dir: &Path, name: &str) {
    let file = |ext: &str| dir.join(format!("{name}{ext}"));
    let ext = file(".ext");
    std::fs::write(
        &ext,
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    for step in [
        Command::new("openssl")
            .args(["req", "-x509"])
            .args(ec)
            .args([
                "-days",
                "2",
                "-subj",
                &format!("/CN=iosleuth test CA {name}"),
            ])
            .arg("-keyout")
            .arg(file("-ca.key"))
            .arg("-out")
            .arg(file("-ca.crt"))
            .output(),
        Command::new("openssl")
            .arg("req")
            .args(ec)
            .args(["-subj", "/CN=127.0.0.1"])
            .arg("-keyout")
            .arg(file(".key"))
            .arg("-out")
            .arg(file(".csr"))
            .output(),
        Command::new("openssl")
            .args(["x509", "-req", "-days", "2", "-set_serial", "1"])
            .arg("-in")
            .arg(file(".csr"))
            .arg("-CA")
            .arg(file("-ca.crt"))
            .arg("-CAkey")
            .arg(file("-ca.key"))
            .arg("-extfile")
            .arg(&ext)
            .arg("-out")
            .arg(file(".crt"))
            .output(),
    ] {
        let out = step.unwrap();
        assert!(
            out.status.success(),
            "openssl: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A port free now on localhost.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `GET path` on `addr`: (status code, body).
pub fn http_get(addr: std::net::SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(5))?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
    std::io::Write::write_all(
        &mut s,
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes(),
    )?;
    let mut raw = Vec::new();
    std::io::Read::read_to_end(&mut s, &mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let code = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((code, body))
}
