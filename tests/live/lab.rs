//! Live: `iosleuth lab run all` — every scenario's bad run has its case's
//! root cause as top finding, its good run no critical finding, the diff
//! names the difference — and the machine is left as it was, also after
//! Ctrl-C.

use crate::common;

use common::*;

/// Loop devices, our mounts, lab directories, and recording journals of
/// sessions that did not end cleanly.
fn state() -> (String, String, usize, usize) {
    let loops = run(std::process::Command::new("losetup").arg("-a"));
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
    let ours: Vec<&str> = mounts
        .lines()
        .filter(|l| l.contains("iosleuth") || l.contains("tracefs") || l.contains("fuse"))
        .collect();
    let leftovers = std::fs::read_dir("/var/tmp")
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("iosleuth-lab-run-")
        })
        .count();
    let journals = std::fs::read_dir("/run/iosleuth")
        .map(|d| {
            d.flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
                .count()
        })
        .unwrap_or(0);
    (loops, ours.join("\n"), leftovers, journals)
}

/// Runs `lab run NAME` in its own process group and sends SIGINT to the
/// whole group `after` its first line (printed once its handlers are in
/// place, so a slow start cannot turn this into a plain kill), as a
/// terminal's Ctrl-C does (the recorder and the helper programs get it too).
fn interrupt_lab(name: &str, after: std::time::Duration) {
    use std::io::{BufRead, Read};
    use std::os::unix::process::CommandExt;
    let before = state();
    let mut child = iosleuth()
        .args(["lab", "run", name])
        .process_group(0)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    assert!(first.contains(&format!("lab {name} (")), "{first}");
    std::thread::sleep(after);
    unsafe {
        libc::kill(-(child.id() as i32), libc::SIGINT);
    }
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(130),
        "{name} after {after:?}: {err}"
    );
    assert!(
        err.contains("interrupted; everything the lab made is removed"),
        "{err}"
    );
    assert_eq!(
        state(),
        before,
        "lab {name} interrupted after {after:?} left something behind"
    );
}

/// The lab's output with each scenario that came out inconclusive (the
/// machine's own noise could explain what it saw) run again, up to twice:
/// a scenario still inconclusive after that stays so and fails the test.
fn settled(all: &str, options: &[&str]) -> String {
    let header = "==================== lab ";
    let mut out = String::new();
    for section in all.split(header).skip(1) {
        let name = section.split(' ').next().unwrap_or_default();
        let mut section = format!("{header}{section}");
        for _ in 0..2 {
            if !section.contains(&format!("lab {name}: inconclusive")) {
                break;
            }
            eprintln!("lab {name} was inconclusive, running it again:\n{section}");
            // What follows its verdict (a skipped scenario's line) stays.
            let verdict = format!("lab {name}: inconclusive");
            let at = section.find(&verdict).unwrap();
            let tail = section[at..]
                .split_once('\n')
                .map_or("", |x| x.1)
                .to_string();
            let o = iosleuth()
                .args(["lab", "run", name])
                .args(options)
                .output()
                .unwrap();
            section = String::from_utf8_lossy(&o.stdout).into_owned() + &tail;
        }
        out.push_str(&section);
    }
    out
}

/// Ctrl-C first, while the disks are being made and during a recording;
/// then the whole lab, which must not notice.
#[test]
#[ignore = "live: needs root, tracefs and loop devices; scripts/test runs it"]
fn lab_run_all_names_each_cause_and_cleans_up_also_after_ctrl_c() {
    let _live = live();
    interrupt_lab("slow-device", std::time::Duration::from_millis(100));
    interrupt_lab("journal", std::time::Duration::from_millis(2500));
    // `lab run merges | head -1`: the reader goes away; the lab still
    // removes what it made.
    let before = state();
    read_one_line_then_go_away(&["lab", "run", "merges"]);
    assert_eq!(state(), before, "lab run merges | head left something");
    let before = state();
    let out = iosleuth()
        .args(["lab", "run", "all", "--keep"])
        .output()
        .unwrap();
    let all = String::from_utf8_lossy(&out.stdout).into_owned();
    let kept = all
        .lines()
        .find_map(|l| l.strip_prefix("captures kept in "))
        .map(|d| RemoveOnDrop(std::path::PathBuf::from(d)));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{all}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let kept = kept.unwrap_or_else(|| panic!("no kept captures: {all}"));
    // `check` and `diff` give one verdict on every pair the lab recorded,
    // in both orders; each known pathology reads as a regression.
    let mut pairs = 0;
    for scenario in std::fs::read_dir(&kept.0).unwrap() {
        let dir = scenario.unwrap().path();
        let (good, bad) = (dir.join("good.cap"), dir.join("bad.cap"));
        if !(good.exists() && bad.exists()) {
            continue;
        }
        let (good, bad) = (good.to_str().unwrap(), bad.to_str().unwrap());
        let (word, line) = check_agrees_with_diff(good, bad);
        let name = dir.file_name().unwrap().to_str().unwrap().to_string();
        if ["merges", "journal", "rt-starvation", "slow-device"].contains(&name.as_str()) {
            assert_eq!(word, "regressed", "{name}: {line}");
        }
        check_agrees_with_diff(bad, good);
        pairs += 1;
    }
    assert!(pairs >= 15, "{pairs} pairs of captures kept");
    drop(kept);
    let text = settled(&all, &[]);
    for (name, top) in [
        ("merges", "CRITICAL merges_disabled"),
        ("journal", "CRITICAL journal_space_stall"),
        ("rt-starvation", "CRITICAL rt_starvation"),
        ("slow-device", "CRITICAL device_latency_spike"),
    ] {
        assert!(text.contains(&format!("lab {name}: as expected")), "{text}");
        let section = text.split(&format!("lab {name} (")).nth(1).unwrap();
        let bad = section.split("bad (").nth(1).unwrap();
        assert!(
            bad.trim_start()
                .lines()
                .nth(1)
                .unwrap()
                .trim()
                .starts_with(top),
            "{bad}"
        );
    }
    assert!(text.contains("lab healthy: as expected"), "{text}");
    // Every other rule of the catalog, each with its bad run's top finding
    // (critical, or a warning where the load decides: sync_write_amplification
    // describes the application; the queue scenario's waiting share (75 %
    // makes it critical) was 74-77 % in runs by hand; the share of request time spent inside bfq, which
    // sets scheduler_overhead's severity at 25 %, was 19 % in one CI run),
    // and the healthy shapes. None may be skipped: the test command installs
    // fio, and the machine mounts the blkio controller.
    for (name, top) in [
        ("splitting", "CRITICAL request_splitting"),
        ("readahead", "CRITICAL readahead_small"),
        ("sync-writes", "sync_write_amplification"),
        // The paused share of the trace sets the severity (50 % makes it
        // critical): beside other work dd's own time stretches, and one
        // run under a load of 12 on 2 CPUs paused 41 % of it.
        ("dirty", "dirty_throttling"),
        ("wbt", "CRITICAL wbt_throttling"),
        ("cgroup", "CRITICAL cgroup_io_throttle"),
        ("queue", "queue_saturation"),
        ("io-scheduler", "scheduler_overhead"),
        ("cache-refault", "CRITICAL page_cache_thrashing"),
        ("uring-punted", "CRITICAL io_uring_punted"),
    ] {
        assert!(
            text.contains(&format!("lab {name}: as expected")),
            "{name}: {text}"
        );
        let section = text.split(&format!("lab {name} (")).nth(1).unwrap();
        let bad = judged(section.split("bad (").nth(1).unwrap());
        let first = bad.first().copied().unwrap_or("no findings");
        let found = if top.contains(' ') {
            first.starts_with(top)
        } else {
            (first.starts_with("CRITICAL ") || first.starts_with("WARNING "))
                && first.contains(&format!(" {top}: "))
        };
        assert!(found, "{name}: {first}");
    }
    for name in [
        "healthy-write",
        "healthy-read",
        "healthy-random",
        "healthy-files",
        "healthy-uring",
        "uring-slow-device",
        "healthy-mmap",
        "mmap-slow-device",
    ] {
        assert!(
            text.contains(&format!("lab {name}: as expected")),
            "{name}: {text}"
        );
    }
    // The diff names the setting of case 1 and the journal of case 2.
    assert!(text.contains("/queue/nomerges is 2 against 0"), "{text}");
    assert!(
        text.contains("journal_kib is 4096 against 1048576"),
        "{text}"
    );
    // Cases 3 and 4: the component, the real-time task and the device.
    let verdict = |name: &str| -> String {
        let section = text.split(&format!("lab {name} (")).nth(1).unwrap();
        section
            .lines()
            .find(|l| l.starts_with("verdict: "))
            .unwrap_or_default()
            .to_string()
    };
    let rt = verdict("rt-starvation");
    assert!(
        rt.contains("the candidate has rt_starvation") && rt.contains("while real-time"),
        "{rt}"
    );
    let slow = verdict("slow-device");
    assert!(
        slow.contains("the candidate has device_latency_spike")
            && slow.contains("waiting for the device (journal write"),
        "{slow}"
    );
    assert_eq!(state(), before, "the lab left something behind");
}

/// `lab run --light`: the four measured slow-downs' bad runs and those of
/// every rule a light capture judges, recorded with `record --light` (BPF histograms, slow
/// requests, the flight recorder), have the same top finding as with the
/// full recorder; healthy runs have no critical finding; nothing is left
/// behind.
#[test]
#[ignore = "live: needs root, tracefs and loop devices; scripts/test runs it"]
fn lab_run_light_names_the_measured_causes_from_light_captures() {
    let _live = live();
    assert!(
        std::path::Path::new("/sys/kernel/btf/vmlinux").exists(),
        "lab run --light cannot run: missing kernel BTF (/sys/kernel/btf/vmlinux)"
    );
    let before = state();
    for (name, top) in [
        ("merges", "CRITICAL merges_disabled"),
        ("journal", "CRITICAL journal_space_stall"),
        ("rt-starvation", "CRITICAL rt_starvation"),
        ("slow-device", "CRITICAL device_latency_spike"),
        ("splitting", "CRITICAL request_splitting"),
        ("cgroup", "CRITICAL cgroup_io_throttle"),
        ("queue", "WARNING queue_saturation"),
        // The paused share of the capture sets the severity, as with the
        // full recorder: any severity.
        ("dirty", "dirty_throttling"),
        ("wbt", "CRITICAL wbt_throttling"),
        ("healthy", ""),
        ("healthy-random", ""),
    ] {
        let out = iosleuth()
            .args(["lab", "run", name, "--light"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = settled(&text, &["--light"]);
        assert!(text.contains(&format!("lab {name}: as expected")), "{text}");
        // Each run says which rules its light capture judged, the expected
        // finding's among them.
        let said = text
            .lines()
            .filter(|l| l.trim_start().starts_with("judged by this light capture: "))
            .count();
        assert_eq!(said, 2, "{text}");
        if let Some(id) = top.split_whitespace().nth(1) {
            assert!(
                text.lines()
                    .any(|l| l.contains("judged by this light capture: ")
                        && l.split("; not judged").next().unwrap_or("").contains(id)),
                "{id} not judged: {text}"
            );
        }
        let bad = judged(text.split("bad (").nth(1).unwrap());
        let first = bad.first().copied().unwrap_or("no findings");
        if top.is_empty() {
            let good = judged(text.split("good (").nth(1).unwrap());
            assert!(
                !good.iter().chain(&bad).any(|f| f.starts_with("CRITICAL")),
                "{text}"
            );
        } else if top.contains(' ') {
            assert!(first.starts_with(top), "{name}: {first}\n{text}");
        } else {
            assert!(
                (first.starts_with("CRITICAL ") || first.starts_with("WARNING "))
                    && first.contains(&format!(" {top}: ")),
                "{name}: {first}\n{text}"
            );
        }
    }
    assert_eq!(state(), before, "lab run --light left something behind");
    let programs: Vec<String> = aya::programs::loaded_programs()
        .flatten()
        .filter_map(|p| p.name_as_str().map(str::to_string))
        .filter(|n| n.starts_with("iosl_"))
        .collect();
    assert!(programs.is_empty(), "BPF programs left: {programs:?}");
}

/// Case 2's proof in the lab: the journal scenario records the writers'
/// kernel stacks; the diff's function table puts the journal-space wait
/// first among what grew, and `--keep` leaves off-CPU flame graphs (each
/// run's and the differential one) where it grows red.
#[test]
#[ignore = "live: needs root, tracefs and loop devices; scripts/test runs it"]
fn lab_journal_shows_the_journal_space_wait_in_stacks_and_flame_graphs() {
    let _live = live();
    let (out, kept) = run_kept("journal");
    let table = out
        .split("blocked (off-CPU) time by kernel function")
        .nth(1)
        .unwrap_or_else(|| panic!("no function table: {out}"));
    // Among the two largest growths (the functions of one call chain
    // share a figure): add_transaction_credits or a frame of its path, or
    // the checkpoint wait below it. Not always the first: the fsync's
    // writeback path above it can grow more (a lab run on this VM:
    // __filemap_fdatawrite_range +26.74 points, add_transaction_credits
    // +19.63).
    let mut grown: Vec<(&str, &str)> = Vec::new();
    for l in table.lines().skip(2).take_while(|l| !l.trim().is_empty()) {
        let mut w = l.split_whitespace();
        if let (Some(_), Some(delta), Some(f)) = (w.next(), w.next(), w.next()) {
            if delta.starts_with('+') {
                grown.push((delta, f));
            }
        }
    }
    let mut figures: Vec<&str> = grown.iter().map(|(d, _)| *d).collect();
    figures.dedup();
    let top: Vec<&str> = grown
        .iter()
        .filter(|(d, _)| figures.iter().take(2).any(|t| t == d))
        .map(|(_, f)| *f)
        .collect();
    let journal_path = [
        "add_transaction_credits",
        "jbd2__journal_start",
        "start_this_handle",
        "__jbd2_log_wait_for_space",
    ];
    assert!(
        journal_path.iter().any(|f| top.contains(f)),
        "{top:?}\n{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.contains("add_transaction_credits") && l.ends_with('*')),
        "{table}"
    );
    // The finding cites the stacks: the writers' blocked time there.
    let title = out
        .lines()
        .find(|l| l.trim_start().starts_with("CRITICAL journal_space_stall"))
        .unwrap_or_else(|| panic!("{out}"));
    let pct: f64 = title
        .split("; ")
        .find_map(|p| p.strip_suffix("% of their blocked time was under add_transaction_credits or __jbd2_log_wait_for_space"))
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{title}"));
    eprintln!(
        "margin: {pct}% of the writers' blocked time under the journal (the test needs > 20 %)"
    );
    assert!(pct > 20.0, "{title}");
    // --func: the writers' blocked time inside add_transaction_credits
    // grew (the funclatency that first showed it), and what separates the
    // runs: the time in __jbd2_log_wait_for_space, the checkpoint a full
    // journal forces (none with 1 GiB of journal). add_transaction_credits
    // also waits for the committing transaction, which 128 fsyncers force
    // in both runs: it grew only 2.1-3.7x over 6 runs on this VM, where the
    // checkpoint went from 0 to 154-158 s.
    let total = |function: &str| -> Vec<f64> {
        let row = out
            .lines()
            .find(|l| l.starts_with(&format!("function.{function}.blocked_total_ms ")))
            .unwrap_or_else(|| panic!("{function}\n{out}"));
        row.split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect()
    };
    let v = total("add_transaction_credits");
    assert!(v.len() >= 2 && v[1] > v[0], "{v:?}");
    eprintln!(
        "margin: add_transaction_credits blocked total grew {:.2}x (the test needs more than 1x)",
        v[1] / v[0]
    );
    let c = total("__jbd2_log_wait_for_space");
    assert!(c.len() >= 2, "{c:?}");
    eprintln!(
        "margin: __jbd2_log_wait_for_space blocked total {:.0} ms -> {:.0} ms (the test needs the bad run's above 10 s and 20 times the good run's)",
        c[0], c[1]
    );
    assert!(c[1] > 10_000.0 && c[1] > 20.0 * c[0], "{c:?}");
    let dir = kept.0.join("journal");
    let rep = json_report(&[dir.join("bad.cap")], &[]);
    let f = rep["functions"].as_array().unwrap();
    assert_eq!(f[0]["name"], "add_transaction_credits");
    assert_eq!(f[1]["name"], "__jbd2_log_wait_for_space");
    assert_eq!(
        (&f[2]["name"], &f[2]["method"]),
        (&"ext4_sync_file".into(), &"calls".into())
    );
    assert!(f[2]["count"].as_u64().unwrap() > 100, "{}", f[2]);
    let bad = std::fs::read_to_string(dir.join("bad-off-cpu.svg")).unwrap();
    assert!(bad.contains("<title>add_transaction_credits ("));
    let diff = std::fs::read_to_string(dir.join("diff-off-cpu.svg")).unwrap();
    // Where it ends a stack (it waited there itself), it grew.
    assert!(
        diff.split("<title>")
            .filter(|t| t.starts_with("add_transaction_credits ("))
            .any(|t| t.split("</title>").next().unwrap_or("").contains("; +")),
        "no add_transaction_credits frame that grew"
    );
}

/// The first lines of the findings the lab judged in one run's part of
/// its output (from the run's label on): those it marks as about a device
/// it did not attach (the machine's disk, busy with other work) left out.
fn judged(run: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut current: Option<(&str, bool)> = None;
    for l in run.lines().skip(1).take_while(|l| !l.trim().is_empty()) {
        let t = l.trim();
        if t.starts_with("CRITICAL ") || t.starts_with("WARNING ") || t.starts_with("INFO ") {
            out.extend(current.take().filter(|(_, ours)| *ours).map(|(f, _)| f));
            current = Some((t, true));
        } else if t.ends_with(": not judged)") {
            if let Some(c) = current.as_mut() {
                c.1 = false;
            }
        }
    }
    out.extend(current.filter(|(_, ours)| *ours).map(|(f, _)| f));
    out
}

#[test]
fn judged_findings_leave_out_other_devices() {
    let run = "bad (x):\n  WARNING request_splitting: vda: 73 bios\n    evidence: device=254,0\n    (device 254,0 is not one of the lab's: not judged)\n  WARNING queue_saturation: loop0\n    why: …\n\ndiff";
    assert_eq!(judged(run), ["WARNING queue_saturation: loop0"]);
    assert!(judged("good (x):\n  no findings\n\n").is_empty());
    let run = "bad (x):\n  CRITICAL cpu_contention: rustc\n    (the CPUs were held by other work on this machine, not the scenario's: not judged)\n  CRITICAL cgroup_io_throttle: loop0\n\n";
    assert_eq!(judged(run), ["CRITICAL cgroup_io_throttle: loop0"]);
}

/// `lab run SCENARIO --keep`: its output, and the directory of the kept
/// captures, removed when the test ends.
fn run_kept(scenario: &str) -> (String, RemoveOnDrop) {
    let out = run(iosleuth().args(["lab", "run", scenario, "--keep"]));
    let kept = out
        .lines()
        .find_map(|l| l.strip_prefix("captures kept in "))
        .unwrap_or_else(|| panic!("{out}"))
        .to_string();
    (out, RemoveOnDrop(std::path::PathBuf::from(kept)))
}

/// Removes a directory the test was told about, also when it fails.
struct RemoveOnDrop(std::path::PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The HTML pages of the lab's own captures in headless Chromium: the
/// merges scenario's bad run and its diff against the good one load with
/// no console message, draw every request, and name the cause and the
/// setting.
#[test]
#[ignore = "live: needs root, tracefs and loop devices; scripts/test runs it"]
fn lab_captures_make_html_pages_that_load_and_draw() {
    let _live = live();
    let browser = common::browser::chromium();
    let (_, kept) = run_kept("merges");
    let dir = kept.0.join("merges");
    let (good, bad) = (dir.join("good.cap"), dir.join("bad.cap"));
    let page = dir.join("bad.html");
    run(iosleuth()
        .arg("report")
        .arg(&bad)
        .args(["--format", "html", "-o"])
        .arg(&page));
    let l = common::browser::load(browser, &page, &dir.join("bad.png"));
    assert!(l.console.is_empty(), "{:?}", l.console);
    assert!(l.dom.contains("merges_disabled"));
    // 4096 unmerged 4 KiB reads: a heatmap, the slowest drawn over it.
    assert!(l.dom.contains("class=\"cell\""));
    let page = dir.join("diff.html");
    run(iosleuth()
        .arg("diff")
        .arg(&good)
        .arg(&bad)
        .args(["--format", "html", "-o"])
        .arg(&page));
    let l = common::browser::load(browser, &page, &dir.join("diff.png"));
    assert!(l.console.is_empty(), "{:?}", l.console);
    assert!(l.dom.contains("/queue/nomerges</td><td>0</td><td>2</td>"));
    assert!(l.dom.contains("the candidate has merges_disabled"));
}

/// `lab run --try`: the lab proves its own advice on its own workloads. The
/// merges scenario's remedy (nomerges 2 -> 0) cuts the requests the kernel
/// counted in every candidate round and the finding leaves them; the cgroup
/// limit lifted makes the workload faster (measured: -98 %); a healthy
/// scenario has no remedy. The machine is left as it was.
/// `lab run NAME --try`'s output and its `lab NAME --try: ` line.
fn tried(name: &str) -> (String, String) {
    let out = run(iosleuth().args(["lab", "run", name, "--try"]));
    let line = out
        .lines()
        .find(|l| l.starts_with(&format!("lab {name} --try: ")))
        .unwrap_or_else(|| panic!("{out}"))
        .to_string();
    (out, line)
}

/// The number in `line` after `after` and before the next `before`.
fn number_between<T: std::str::FromStr>(line: &str, after: &str, before: &str) -> T {
    line.split(after)
        .nth(1)
        .and_then(|r| r.split(before).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number after {after:?} in {line}"))
}

#[test]
#[ignore = "live: needs root, tracefs and loop devices; scripts/test runs it"]
fn lab_try_measures_each_remedy_on_the_scenarios_own_workload() {
    let _l = live();
    let before = state();
    let (_, line) = tried("merges");
    assert!(
        line.starts_with("lab merges --try: better: /sys/block/loop")
            && line.contains("/queue/nomerges 2 -> 0; dev.7,")
            && line.contains(".requests -9")
            && line.contains("5 of 5 rounds); finding in 5/5 baseline, 0/5 candidate"),
        "{line}"
    );
    let (_, line) = tried("cgroup");
    assert!(
        line.starts_with("lab cgroup --try: better: /sys/fs/cgroup/"),
        "{line}"
    );
    assert!(
        line.contains("finding in 5/5 baseline, 0/5 candidate"),
        "{line}"
    );
    let pct: f64 = number_between(&line, "workload.seconds ", " %");
    assert!(pct < -50.0, "{line}");
    // A memory cgroup's limit, read by the capture while the workload ran
    // in it, lifted (measured here: -51 %, 95 % CI -57..-47 %; -35 %, CI
    // -40..-27 %, beside a CPU hog).
    let (_, line) = tried("cache-refault");
    assert!(
        line.starts_with("lab cache-refault --try: better: /sys/fs/cgroup/")
            && line.contains("/memory.limit_in_bytes 12582912 -> -1; workload.seconds -")
            && line.contains("finding in 5/5 baseline, 0/5 candidate"),
        "{line}"
    );
    // A remedy that cannot be applied live: the lab makes the remedy's
    // journal on a second device of its own, where the candidate rounds
    // write (measured here: writers' p99 -57 % and -92 %). The 128 writers
    // can still fill a 256 MiB journal now and then (CI once saw the
    // finding in 1 of 5 candidate rounds): the claim is the cause gone
    // from most rounds, not from every one.
    let (_, line) = tried("journal");
    assert!(
        line.starts_with("lab journal --try: better: ext4 journal of loop")
            && line.contains(" 4096 KiB -> 262144 KiB; probe.randwrite.p99_ms -")
            && line.contains("finding in 5/5 baseline, "),
        "{line}"
    );
    let in_candidate: u32 = number_between(&line, "5/5 baseline, ", "/");
    assert!(in_candidate <= 1, "{line}");
    // A thread's policy: the real-time burner beside the workload made an
    // ordinary thread, judged by the longest runqueue wait (measured here:
    // -95.7 %, 95 % CI -97.1..-91.8 %; -91.3 %, CI -93.5..-89.4 %, beside
    // a two-CPU hog). The workload's time moved with other work on the
    // machine: CI saw +18 %, CI -74..+161 %, beside a build. Beside three
    // builds CI saw -86.7 % with the finding in 4 of 5 baseline rounds
    // (one round's longest wait under the rule's bar): the claim is the
    // cause in most baseline rounds and in no candidate one.
    let (_, line) = tried("rt-starvation");
    assert!(
        line.starts_with("lab rt-starvation --try: better: task/")
            && line.contains("/policy fifo 50 -> other; sched.longest_runqueue_wait_ms -")
            && line.contains("/5 baseline, 0/5 candidate"),
        "{line}"
    );
    let in_baseline: u32 = number_between(&line, "finding in ", "/5 baseline");
    assert!(in_baseline >= 3, "{line}");
    let pct: f64 = number_between(&line, "sched.longest_runqueue_wait_ms ", " %");
    assert!(pct < -50.0, "{line}");
    // Busy loops at nice -10 beside the workload, reniced to 10
    // (measured here: -87 %, 95 % CI -89..-85 %).
    let (out, line) = tried("cpu-contention");
    assert!(
        line.starts_with("lab cpu-contention --try: better: task/")
            && line.contains("/nice -10 -> 10; task/")
            && line.contains("5 of 5 rounds)"),
        "{line}"
    );
    assert!(out.contains("lab cpu-contention: as expected"), "{out}");
    // Devices with lanes (32 requests served at once): more tags, and
    // wbt off, let more requests be served at once (measured here: -49 to
    // -60 %, and -68 %).
    for (name, knob) in [
        ("queue", "/queue/nr_requests 4 -> 64; workload.seconds -"),
        ("wbt", "/queue/wbt_lat_usec 1 -> 0; workload.seconds -"),
    ] {
        let (_, line) = tried(name);
        assert!(
            line.starts_with(&format!("lab {name} --try: better: /sys/block/loop"))
                && line.contains(knob)
                && line.contains("5 of 5 rounds)"),
            "{line}"
        );
    }
    // The healthy runs' own verdict is the healthy lab tests' to judge: a
    // host stall can give its good run an `unexplained` warning (a 13 ms
    // fsync once, in CI), and that is not what --try is tested for here.
    let o = outcome_of(iosleuth().args(["lab", "run", "healthy", "--try"]));
    let out = format!("{}{}", o.stdout, o.stderr);
    assert!(
        // No finding, or, beside other work on the machine, only findings
        // about that work (not the scenario's), none with a setting.
        out.contains("lab healthy --try: no remedy: no finding\n")
            || out.contains("lab healthy --try: no remedy: no setting to try"),
        "{out}"
    );
    assert_eq!(state(), before, "the lab left something behind");
}
