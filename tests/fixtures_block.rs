//! Block analysis on committed real captures (recorded by
//! scripts/make-fixtures on a loop device: 512 sequential 4 KiB direct reads
//! submitted 64 at a time, blk tracer and tracepoints at once).

mod common;

use common::*;
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from("tests/fixtures").join(name)
}

fn have(tool: &str) -> bool {
    let ok = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("{tool} is missing (scripts/test installs it)");
        }
        eprintln!("SKIPPED: needs the `{tool}` program (scripts/test installs it)");
    }
    ok
}

#[test]
fn merged_reads_become_512_sector_requests() {
    let r = json_report(&[fixture("loop-seqread-nomerges0.blk")], &[]);
    let d = &r["devices"][0];
    assert_eq!(d["device"], "7,0");
    assert_eq!(d["actions"]["queued"], 512);
    assert_eq!(d["actions"]["back_merged"], 504);
    let m = &d["btt_merge"];
    assert_eq!(
        (m["queued"].as_u64(), m["issued"].as_u64()),
        (Some(512), Some(8))
    );
    assert_eq!(m["ratio"].as_f64(), Some(64.0));
    assert_eq!(
        (m["blk_min"].as_u64(), m["blk_max"].as_u64()),
        (Some(512), Some(512))
    );
    assert_eq!(d["iostat_total"]["rareq-sz"].as_f64(), Some(256.0));
    assert_eq!(d["completed"]["read"], 8);
    assert_eq!(d["bytes_completed"]["read"], 2 * 1024 * 1024);
    assert_eq!(r["findings"].as_array().map(|a| a.len()), Some(0));
}

#[test]
fn unmerged_reads_stay_8_sectors() {
    let r = json_report(&[fixture("loop-seqread-nomerges2.blk")], &[]);
    let d = &r["devices"][0];
    let m = &d["btt_merge"];
    assert_eq!(
        (m["queued"].as_u64(), m["issued"].as_u64()),
        (Some(512), Some(512))
    );
    assert_eq!(
        (m["blk_min"].as_u64(), m["blk_max"].as_u64()),
        (Some(8), Some(8))
    );
    assert_eq!(d["iostat_total"]["rareq-sz"].as_f64(), Some(4.0));
    assert_eq!(d["iostat_total"]["rrqm/s"].as_f64(), Some(0.0));
    // btt's per-bio counts: every stage seen once per bio.
    for k in ["q2g", "g2i", "i2d", "d2c", "q2c"] {
        assert_eq!(d["btt"][k]["n"], 512, "{k}");
    }
    assert_eq!(d["btt"]["q2m"]["n"], 0);
}

#[test]
fn tracepoints_and_blk_tracer_agree_on_the_same_run() {
    for run in ["nomerges0", "nomerges2"] {
        let blk = json_report(&[fixture(&format!("loop-seqread-{run}.blk"))], &[]);
        let tp = json_report(
            &[fixture(&format!("loop-seqread-{run}.tracepoints.txt"))],
            &[],
        );
        let (b, t) = (&blk["devices"][0], &tp["devices"][0]);
        for k in ["queued", "issued", "completed", "back_merged", "inserted"] {
            assert_eq!(b["actions"][k], t["actions"][k], "{run} {k}");
        }
        let (db, dt) = (
            b["d2c"]["avg"].as_f64().unwrap(),
            t["d2c"]["avg"].as_f64().unwrap(),
        );
        assert!((db - dt).abs() / db < 0.02, "{run}: D2C {db} vs {dt}");
        assert_eq!(b["btt_merge"]["ratio"], t["btt_merge"]["ratio"], "{run}");
    }
}

#[test]
fn exported_fixture_gives_btts_numbers() {
    if !have("btt") || !have("blkparse") {
        return;
    }
    for run in ["nomerges0", "nomerges2"] {
        let dir = tempdir();
        let out = dir.path().join("bt");
        let blk = fixture(&format!("loop-seqread-{run}.blk"));
        run_ok(
            &mut iosleuth(),
            &[
                "export",
                "--blktrace",
                out.to_str().unwrap(),
                blk.to_str().unwrap(),
            ],
        );
        // The fixture was recorded on loop0 of another machine: name by number.
        let name = std::fs::read_dir(&out)
            .unwrap()
            .filter_map(|e| e.ok())
            .find_map(|e| {
                e.file_name()
                    .to_str()
                    .and_then(|n| n.split(".blktrace.").next().map(String::from))
            })
            .unwrap();
        assert_btt_agrees(&out, &name, "7,0");
        // And from the tracepoint text of the same run.
        let out2 = dir.path().join("bt2");
        let tp = fixture(&format!("loop-seqread-{run}.tracepoints.txt"));
        run_ok(
            &mut iosleuth(),
            &[
                "export",
                "--blktrace",
                out2.to_str().unwrap(),
                tp.to_str().unwrap(),
            ],
        );
        assert_btt_agrees(&out2, &name, "7,0");
    }
}

fn run_ok(c: &mut std::process::Command, args: &[&str]) {
    run(c.args(args));
}
