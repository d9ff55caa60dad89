//! Live: case 2 in the lab. 64 threads of random buffered 16 KiB writes,
//! each followed by fsync, on ext4 with a 4 MiB journal and with a 1 GiB
//! journal: the small journal fills, and writers stop to checkpoint it
//! (waiting for journal space); the large one almost never does.

use crate::common;

use common::*;
use iosleuth::testing::Ext4;

const FIXTURE_EVENTS: &str = "jbd2:jbd2_start_commit,jbd2:jbd2_end_commit,\
    jbd2:jbd2_run_stats,jbd2:jbd2_checkpoint,jbd2:jbd2_checkpoint_stats,\
    ext4:ext4_sync_file_enter,ext4:ext4_sync_file_exit";

fn run_case(journal_mb: u64) -> serde_json::Value {
    let fs = Ext4::create(2560, journal_mb, true).expect("ext4 on a loop device");
    let dir = tempdir();
    let cap = dir.path().join("cap");
    run(iosleuth()
        .arg("record")
        .arg("-o")
        .arg(&cap)
        .args(["--events", "block,fs,sched,syscalls", "--"])
        .arg(env!("CARGO_BIN_EXE_iosleuth"))
        .args(["probe", "randwrite", "--threads", "64", "--bs", "16k"])
        .args(["--file-size", "4m", "--fsync", "--duration", "2", "--dir"])
        .arg(&fs.mnt));
    // A small copy for tests/fixtures: the journal's and fsync's events
    // only, for 0.4 s (scripts/make-fixtures).
    if let Some(d) = std::env::var_os("IOSLEUTH_FIXTURE_DIR") {
        let to = std::path::Path::new(&d).join(format!("journal-{journal_mb}m.cap"));
        let _ = std::fs::remove_dir_all(&to);
        run(iosleuth()
            .arg("record")
            .arg("-o")
            .arg(&to)
            .args(["--events", FIXTURE_EVENTS, "--"])
            // Without the probe's per-operation marks: they would be most
            // of the file.
            .args(["env", "-u", "IOSLEUTH_TRACE_MARKER"])
            .arg(env!("CARGO_BIN_EXE_iosleuth"))
            .args(["probe", "randwrite", "--threads", "64", "--bs", "16k"])
            .args(["--file-size", "4m", "--fsync", "--duration", "0.4", "--dir"])
            .arg(&fs.mnt));
    }
    drop(fs);
    json_report(&[&cap], &[])
}

/// Of all the time these syscalls took, the percent spent waiting for
/// journal space.
fn journal_space_percent(r: &serde_json::Value, kind: &str) -> f64 {
    r["outliers"]["totals"][kind]["percent"]["journal_space"]
        .as_f64()
        .unwrap_or_else(|| panic!("{kind}: {:#}", r["outliers"]["totals"]))
}

fn journal(r: &serde_json::Value) -> &serde_json::Value {
    r["fs"]["journals"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap()
}

#[test]
#[ignore = "live: needs root, tracefs and loop devices; scripts/test runs it"]
fn small_journal_makes_writers_wait_for_journal_space() {
    let _live = live();
    let small = run_case(4);
    let large = run_case(1024);
    for (name, r) in [("4 MiB", &small), ("1 GiB", &large)] {
        let j = journal(r);
        eprintln!(
            "{name}: {} commits, {} checkpoint passes, fsync p50 {} ns, journal space: fsync {}%, pwrite64 {}%",
            j["commits"],
            j["checkpoints"]["passes"],
            r["fs"]["fsync"]["latency"]["p50"],
            journal_space_percent(r, "syscall fsync"),
            journal_space_percent(r, "syscall pwrite64"),
        );
    }
    // The 4 MiB journal fills: the writers themselves checkpoint it, many
    // times, and part of their write and fsync time is that wait.
    let j = journal(&small);
    let passes = j["checkpoints"]["passes"].as_u64().unwrap();
    assert!(passes >= 10, "{j:#}");
    let by_writers: u64 = j["checkpoints"]["by_process"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| k.starts_with("iosleuth ("))
        .map(|(_, v)| v.as_u64().unwrap())
        .sum();
    assert!(by_writers * 2 > passes, "{j:#}");
    assert!(
        j["checkpoints"]["transactions"].as_u64().unwrap() > 100,
        "{j:#}"
    );
    let waited = journal_space_percent(&small, "syscall fsync")
        + journal_space_percent(&small, "syscall pwrite64");
    eprintln!(
        "margin: 4 MiB journal: checkpoint passes {passes} (needs >= 10), writers' journal-space share {waited:.1} % (needs > 2 %)"
    );
    assert!(waited > 2.0, "{:#}", small["outliers"]["totals"]);
    // The 1 GiB journal never fills in two seconds.
    let j = journal(&large);
    assert!(j["checkpoints"]["passes"].as_u64().unwrap() <= 1, "{j:#}");
    assert!(journal_space_percent(&large, "syscall fsync") < 0.5);
    assert!(journal_space_percent(&large, "syscall pwrite64") < 0.5);
}
