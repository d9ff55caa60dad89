//! Block analysis on committed real captures (recorded by
//! scripts/make-fixtures on a loop device: 512 sequential 4 KiB direct reads
//! submitted 64 at a time, blk tracer and tracepoints at once).

use crate::common;

use common::*;
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from("tests/fixtures").join(name)
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
#[ignore = "needs btt and blkparse: scripts/test installs them and runs it"]
fn exported_fixture_gives_btts_numbers() {
    need_programs(&["btt", "blkparse"]);
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
        let name = exported_name(&out);
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

/// The device name blktrace files in `dir` were written under.
fn exported_name(dir: &std::path::Path) -> String {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .find_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.split(".blktrace.").next().map(String::from))
        })
        .unwrap()
}

fn run_ok(c: &mut std::process::Command, args: &[&str]) {
    run(c.args(args));
}

#[test]
fn every_format_of_the_same_run_agrees() {
    let reference = json_report(&[fixture("loop-seqread-nomerges0.blk")], &[]);
    let r = &reference["devices"][0];
    for (file, format) in [
        ("tracepoints.txt", "ftrace or trace-cmd text"),
        ("noirq.txt", "ftrace or trace-cmd text"),
        ("trace-cmd.txt", "ftrace or trace-cmd text"),
        ("perf-script.txt", "perf script text"),
        ("blkparse.txt", "blkparse text"),
    ] {
        let rep = json_report(&[fixture(&format!("loop-seqread-nomerges0.{file}"))], &[]);
        assert_eq!(rep["inputs"][0]["format"], format, "{file}");
        assert_eq!(rep["inputs"][0]["skipped"], 0, "{file}: every line decodes");
        let d = &rep["devices"][0];
        assert_eq!(d["device"], "7,0", "{file}");
        for k in [
            "queued",
            "back_merged",
            "get_request",
            "inserted",
            "issued",
            "completed",
        ] {
            assert_eq!(d["actions"][k], r["actions"][k], "{file} {k}");
        }
        assert_eq!(d["btt_merge"], r["btt_merge"], "{file}");
        let (a, b) = (
            d["d2c"]["avg"].as_f64().unwrap(),
            r["d2c"]["avg"].as_f64().unwrap(),
        );
        // Text timestamps have µs resolution; perf uses its own clock.
        assert!((a - b).abs() / b < 0.005, "{file}: D2C {a} vs {b}");
    }
    // blkparse text keeps the nanoseconds: btt's numbers are identical.
    let bp = json_report(&[fixture("loop-seqread-nomerges0.blkparse.txt")], &[]);
    assert_eq!(bp["all_devices"]["btt"], reference["all_devices"]["btt"]);
}

/// Byte-swaps every field of v7 records, turning a little-endian blktrace
/// file into the big-endian one a big-endian machine would write.
fn to_big_endian(le: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(le.len());
    let mut at = 0;
    while at + 48 <= le.len() {
        let r = &le[at..at + 48];
        let pdu = u16::from_le_bytes([r[46], r[47]]) as usize;
        for (off, len) in [
            (0, 4),
            (4, 4),
            (8, 8),
            (16, 8),
            (24, 4),
            (28, 4),
            (32, 4),
            (36, 4),
            (40, 4),
            (44, 2),
            (46, 2),
        ] {
            out.extend(r[off..off + len].iter().rev());
        }
        out.extend_from_slice(&le[at + 48..at + 48 + pdu]);
        at += 48 + pdu;
    }
    out
}

#[test]
fn blktrace_files_in_either_byte_order_and_blkparse_dump() {
    let dir = tempdir();
    let out = dir.path().join("bt");
    let blk = fixture("loop-seqread-nomerges0.blk");
    run(iosleuth()
        .args(["export", "--blktrace"])
        .arg(&out)
        .arg(&blk));
    let le = json_report(&[&out], &[]);
    // Big-endian copies of the same per-CPU files.
    let be_dir = dir.path().join("be");
    std::fs::create_dir(&be_dir).unwrap();
    for e in std::fs::read_dir(&out).unwrap() {
        let p = e.unwrap().path();
        let be = to_big_endian(&std::fs::read(&p).unwrap());
        std::fs::write(be_dir.join(p.file_name().unwrap()), be).unwrap();
    }
    let be = json_report(&[&be_dir], &[]);
    assert_eq!(be["devices"], le["devices"]);
    assert_eq!(be["events"], le["events"]);
}

/// blkparse's single dump file (`blkparse -d`) of an export reads as the
/// export does.
#[test]
#[ignore = "needs blkparse: scripts/test installs it and runs it"]
fn blkparse_dump_of_an_export_reads_the_same() {
    need_programs(&["blkparse"]);
    let dir = tempdir();
    let out = dir.path().join("bt");
    run(iosleuth()
        .args(["export", "--blktrace"])
        .arg(&out)
        .arg(fixture("loop-seqread-nomerges0.blk")));
    let le = json_report(&[&out], &[]);
    let name = exported_name(&out);
    let dump = dir.path().join("dump.bin");
    run(std::process::Command::new("blkparse")
        .arg("-D")
        .arg(&out)
        .arg("-i")
        .arg(&name)
        .arg("-d")
        .arg(&dump)
        .arg("-O"));
    let d = json_report(&[&dump], &[]);
    assert_eq!(d["devices"][0]["btt"], le["devices"][0]["btt"]);
    assert_eq!(d["devices"][0]["btt_merge"], le["devices"][0]["btt_merge"]);
}

#[test]
fn remap_split_unplug_payloads_survive_export() {
    use iosleuth::testing::{Action, Event, Extra};
    // Real remaps and unplugs from case 1's btrace text, plus a split.
    let dir = tempdir();
    let mut text =
        std::fs::read_to_string("tests/fixtures/seeds/case1-btrace-standard.txt").unwrap();
    text.push_str("259,0    1       20     0.004100000  1579  X   R 280576 / 280832 [cat]\n");
    let src = dir.path().join("in.txt");
    std::fs::write(&src, text).unwrap();
    let out = dir.path().join("bt");
    run(iosleuth()
        .args(["export", "--blktrace"])
        .arg(&out)
        .arg(&src));
    let files: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let mut extras = Vec::new();
    for f in files {
        // CPUs without events have empty files, as blktrace writes them.
        if std::fs::metadata(&f).unwrap().len() == 0 {
            continue;
        }
        let mut s = iosleuth::testing::open_file(&f).unwrap();
        while let Some(e) = s.next_event() {
            if let Event::Block(b) = e {
                if b.extra != Extra::None {
                    extras.push((b.action, b.extra));
                }
            }
        }
    }
    use iosleuth::testing::Dev;
    assert!(extras.contains(&(
        Action::Remap,
        Extra::Remap {
            from_dev: Dev::new(252, 0),
            from_sector: 278528
        }
    )));
    assert!(extras.contains(&(Action::UnplugIo, Extra::Unplug { depth: 1 })));
    assert!(extras.contains(&(Action::Split, Extra::Split { new_sector: 280832 })));
}

#[test]
fn device_stack_from_remaps() {
    let rep = json_report(
        &[PathBuf::from(
            "tests/fixtures/seeds/case1-btrace-fixed-kernel.txt",
        )],
        &[],
    );
    assert_eq!(rep["stack"], serde_json::json!([["253,0", "259,0"]]));
    let text = run(iosleuth().args(["report", "tests/fixtures/seeds/case1-btrace-standard.txt"]));
    assert!(text.contains("252,0 -> 259,0"), "{text}");
}

#[test]
fn dump_filters_by_event_name_with_or_without_system() {
    let blk = "tests/fixtures/loop-seqread-nomerges2.blk";
    let rep = json_report(&[blk], &[]);
    let issued = rep["devices"][0]["actions"]["issued"].as_u64().unwrap();
    for name in ["block:D", "D"] {
        let out = run(iosleuth().args(["dump", "--events", name, blk]));
        assert_eq!(out.lines().count() as u64, issued, "{name}");
        assert!(
            out.lines().all(|l| l.contains(" block:D dev=7,0 rwbs=R ")),
            "{name}"
        );
    }
    let text = "tests/fixtures/seeds/case4-ftrace-sched.txt";
    let out = run(iosleuth().args(["dump", "--events", "sched_switch", text]));
    let expected = std::fs::read_to_string(text)
        .unwrap()
        .lines()
        .filter(|l| l.contains(" sched_switch: "))
        .count();
    assert!(expected > 0);
    assert_eq!(out.lines().count(), expected);
    assert!(out
        .contains("prev_comm=mmcqd/0 prev_pid=89 prev_prio=120 prev_state=S next_comm=swapper/0"));
}

/// btt's D2C counts queued bios, and a flush queues none: on healthy-run1.cap
/// (401 of 7,0's 1005 requests are flushes) btt's D2C MAX is 900.1 µs while
/// the slowest request, a flush, took 2943.8 µs. The per-request table says
/// why on the same screen, and its rows without flushes agree with btt.
#[test]
fn per_request_latencies_without_flushes_agree_with_btts_d2c() {
    let input = "tests/fixtures/healthy-run1.cap";
    let r = json_report(&[input], &[]);
    let d = r["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["device"] == "7,0")
        .unwrap();
    assert_eq!(d["completed"]["flush"], 401);
    assert_eq!(d["btt"]["d2c"]["max_ns"], 900106);
    assert!((2_943_000..2_944_000).contains(&d["d2c"]["max"].as_u64().unwrap()));
    assert_eq!(d["d2c_without_flushes"]["count"], 604);
    assert_eq!(d["d2c_without_flushes"]["max"], 900106);
    let text = run(iosleuth().arg("report").arg(input));
    assert!(text.contains("D2C               0.000040515   0.000077169   0.000900106        1213"));
    assert!(text.contains("latency per request (µs; 401 of 1005 requests are flushes, which btt's table above does not count: they queue no bio; \"no flush\" rows leave them out):"), "{text}");
    assert!(text.contains("  D2C               1005       97.0       76.0      159.2      198.1      899.1     2943.8\n  D2C no flush       604       72.6       68.4       86.3      142.8      899.1      900.1\n"), "{text}");
    // 254,0's fsyncs: each an empty write the kernel ends without issuing
    // it and the flush request sent for it, counted apart as diskstats
    // counts them (1310 data writes + 401 empty writes, 401 flushes); the
    // empty writes have a Q2C and no D2C.
    assert!(
        text.contains("requests completed: 2112 (read 0, write 1711, discard 0, flush 401)"),
        "{text}"
    );
    assert!(
        text.contains("latency per request (µs; 401 of 2112 requests are flushes"),
        "{text}"
    );
    assert!(
        text.contains("  D2C               1711       40.0"),
        "{text}"
    );
    assert!(
        text.contains("  Q2C               2112       42.4"),
        "{text}"
    );
}
