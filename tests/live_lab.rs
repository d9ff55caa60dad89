//! Live: `iosleuth lab run all` — every scenario's bad run has its case's
//! root cause as top finding, its good run no critical finding, the diff
//! names the difference — and the machine is left as it was.

mod common;

use common::*;

/// The two tests compare the machine's state before and after: one at a
/// time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

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
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
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

#[test]
fn lab_interrupted_like_ctrl_c_removes_everything() {
    if !live() {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    use std::os::unix::process::CommandExt;
    let before = state();
    // Its own process group, signalled as a whole, as a terminal does.
    let child = iosleuth()
        .args(["lab", "run", "journal"])
        .process_group(0)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2500));
    unsafe {
        libc::kill(-(child.id() as i32), libc::SIGINT);
    }
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(
        err.contains("interrupted; everything the lab made is removed"),
        "{err}"
    );
    assert_eq!(state(), before, "the lab left something behind");
}
