//! Live: `iosleuth lab run all` — every scenario's bad run has its case's
//! root cause as top finding, its good run no critical finding, the diff
//! names the difference — and the machine is left as it was.

mod common;

use common::*;

fn state() -> (String, String, usize) {
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
    (loops, ours.join("\n"), leftovers)
}

#[test]
fn lab_run_all_names_each_cause_and_cleans_up() {
    if !live() {
        return;
    }
    let before = state();
    let out = iosleuth().args(["lab", "run", "all"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
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
    // The diff names the setting of case 1.
    assert!(text.contains("/queue/nomerges is 2 against 0"), "{text}");
    assert_eq!(state(), before, "the lab left something behind");
}
