//! Live: `iosleuth record` interrupted at random moments by SIGINT, SIGTERM
//! or SIGKILL leaves the machine as it found it (for SIGKILL, after
//! `iosleuth record --cleanup`).

use crate::common;

use common::*;
use iosleuth::testing::LoopDevice;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

const T: &str = "/sys/kernel/tracing";

/// Everything a recording may touch.
fn state(dev: &str) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for f in [
        "current_tracer",
        "tracing_on",
        "trace_clock",
        "buffer_size_kb",
        "options/bin",
        "options/context-info",
        "set_event",
    ] {
        m.insert(
            f.to_string(),
            std::fs::read_to_string(Path::new(T).join(f)).unwrap_or_default(),
        );
    }
    let en = format!("/sys/block/{dev}/trace/enable");
    m.insert(en.clone(), std::fs::read_to_string(&en).unwrap_or_default());
    let mut inst: Vec<String> = std::fs::read_dir(Path::new(T).join("instances"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    inst.sort();
    m.insert("instances".into(), inst.join(","));
    m
}

/// A small deterministic generator: the seed is printed, so a failure can
/// be replayed.
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

#[test]
#[ignore = "live: needs root, tracefs and loop devices; scripts/test runs it"]
fn interrupted_recordings_leave_nothing_behind() {
    let _live = live();
    // Keep tracefs mounted for the whole test, so that the settings compared
    // are readable even on a machine where it starts unmounted.
    let _tracefs = iosleuth::testing::Tracefs::open().expect("tracefs");
    let disk = LoopDevice::create(64, true).expect("loop device");
    let before = state(&disk.name);
    assert!(!before["current_tracer"].is_empty(), "tracefs is readable");
    let seed = std::env::var("IOSLEUTH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    println!("seed {seed}");
    let mut rng = Lcg(seed);
    let dir = tempdir();
    for trial in 0..24 {
        let sig = [libc::SIGINT, libc::SIGTERM, libc::SIGKILL][trial % 3];
        let blk = rng.next(2) == 0;
        let delay = 20 + rng.next(600);
        let out = dir.path().join(format!("t{trial}"));
        let mut cmd = iosleuth();
        cmd.arg("record").arg("-o").arg(&out);
        if blk {
            cmd.args(["--blk", &disk.name]);
        } else {
            cmd.args(["--events", "block,sched,irq"]);
        }
        cmd.args([
            "--",
            "dd",
            &format!("if={}", disk.path.display()),
            "of=/dev/null",
            "bs=4k",
            "count=20000",
            "iflag=direct",
            "status=none",
        ]);
        cmd.stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let mut child = cmd.spawn().unwrap();
        std::thread::sleep(Duration::from_millis(delay));
        unsafe { libc::kill(child.id() as i32, sig) };
        let status = child.wait().unwrap();
        let what = format!(
            "trial {trial}: signal {sig} after {delay} ms, {} mode, {status:?}",
            if blk { "blk" } else { "capture" }
        );
        if sig == libc::SIGKILL {
            // The workload has its own process group: let it finish.
            std::thread::sleep(Duration::from_millis(300));
            run(iosleuth().args(["record", "--cleanup"]));
        } else {
            // A clean stop: nothing may be left even before any cleanup.
        }
        assert_eq!(state(&disk.name), before, "{what} (seed {seed})");
        // No journal of a dead session remains either.
        if let Ok(d) = std::fs::read_dir("/run/iosleuth") {
            let left: Vec<_> = d
                .flatten()
                .map(|e| e.file_name())
                .filter(|n| n.to_string_lossy().ends_with(".json"))
                .collect();
            assert!(left.is_empty(), "{what}: journals left {left:?}");
        }
    }
}
