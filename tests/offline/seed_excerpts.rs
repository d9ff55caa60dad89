//! The trace text quoted from the four measured slow-downs parses into the right events.

use iosleuth::testing::open_file;
use iosleuth::testing::{Action, BlockEvent, Dev, Event, Extra, Rwbs};
use std::path::Path;

fn events(name: &str) -> (Vec<Event>, u64) {
    let path = Path::new("tests/fixtures/seeds").join(name);
    let mut src = open_file(&path).unwrap_or_else(|e| panic!("{e}"));
    let mut v = Vec::new();
    while let Some(e) = src.next_event() {
        v.push(e);
    }
    let skipped = src.stats().skipped;
    (v, skipped)
}

fn blocks(v: &[Event]) -> Vec<BlockEvent> {
    v.iter()
        .filter_map(|e| match e {
            Event::Block(b) => Some(*b),
            _ => None,
        })
        .collect()
}

#[test]
fn case1_perf_script() {
    let (v, skipped) = events("case1-perf-script.txt");
    assert_eq!(skipped, 0);
    let b = blocks(&v);
    assert_eq!(b.len(), 6);
    let c = &b[0];
    assert_eq!(c.action, Action::Complete);
    assert_eq!(
        (c.dev, c.sector, c.bytes, c.error),
        (Dev::new(259, 1), 340080, 4096, 0)
    );
    assert_eq!((c.pid, c.cpu, c.ts), (0, 1, 5_502_478_884_000));
    assert_eq!(c.rwbs, Rwbs(Rwbs::READ | Rwbs::SYNC));
    let i = &b[3];
    assert_eq!(i.action, Action::Insert);
    assert_eq!(
        (i.sector, i.bytes, i.pid, i.comm.as_str()),
        (340328, 4096, 1942, "cat")
    );
    assert_eq!(i.ts, 5_502_479_591_000);
    assert_eq!(b.iter().filter(|e| e.action == Action::Insert).count(), 3);
}

#[test]
fn case1_btrace_standard_read() {
    let (v, skipped) = events("case1-btrace-standard.txt");
    assert_eq!(skipped, 0);
    let b = blocks(&v);
    let acts: Vec<Action> = b.iter().map(|e| e.action).collect();
    use Action::*;
    assert_eq!(
        acts,
        vec![Remap, Queue, GetRq, UnplugIo, Insert, Issue, Complete]
    );
    assert_eq!(
        b[0].extra,
        Extra::Remap {
            from_dev: Dev::new(252, 0),
            from_sector: 278528
        }
    );
    assert_eq!(
        (b[1].sector, b[1].sectors(), b[1].pid, b[1].ts),
        (280576, 512, 1579, 2_545_701)
    );
    assert_eq!(b[3].extra, Extra::Unplug { depth: 1 });
    assert_eq!((b[6].ts, b[6].pid, b[6].error), (4_099_666, 0, 0));
}

#[test]
fn case1_btrace_snapshot_has_no_merges_and_8_sector_requests() {
    let (v, skipped) = events("case1-btrace-snapshot.txt");
    // The article elides lines with "...": two lines that are not events.
    assert_eq!(skipped, 2);
    let b = blocks(&v);
    assert_eq!(b.len(), 13);
    assert!(b
        .iter()
        .all(|e| e.action != Action::BackMerge && e.action != Action::FrontMerge));
    assert!(b
        .iter()
        .filter(|e| e.action != Action::UnplugIo)
        .all(|e| e.sectors() == 8));
    let d: Vec<&BlockEvent> = b.iter().filter(|e| e.action == Action::Issue).collect();
    assert_eq!(d.len(), 3);
    assert_eq!((d[0].pid, d[0].comm.as_str()), (377, "kworker/1:1H"));
}

#[test]
fn case1_btrace_fixed_kernel_merges() {
    let (v, _) = events("case1-btrace-fixed-kernel.txt");
    let b = blocks(&v);
    assert_eq!(
        b.iter().filter(|e| e.action == Action::BackMerge).count(),
        2
    );
    let ut = b
        .iter()
        .find(|e| e.action == Action::UnplugTimer)
        .expect("UT");
    assert_eq!(ut.extra, Extra::Unplug { depth: 1 });
    let d = b.iter().find(|e| e.action == Action::Issue).unwrap();
    assert_eq!((d.sector, d.sectors()), (7358464, 512));
}

#[test]
fn case4_ftrace_journal_write() {
    let (v, skipped) = events("case4-ftrace-block-mmc.txt");
    // mmc events are wrapped over several lines in the article.
    assert_eq!(skipped, 8);
    let b = blocks(&v);
    assert_eq!(b.len(), 1);
    let d = &b[0];
    assert_eq!(d.action, Action::Issue);
    assert_eq!(
        (d.dev, d.sector, d.bytes),
        (Dev::new(179, 0), 4717976, 4096)
    );
    assert!(d.rwbs.is_write() && d.rwbs.has(Rwbs::FUA) && d.rwbs.has(Rwbs::SYNC));
    assert_eq!(
        (d.pid, d.cpu, d.ts, d.comm.as_str()),
        (89, 0, 474_223_046_000, "mmcqd/0")
    );
    let others: Vec<(&str, u64)> = v
        .iter()
        .filter_map(|e| match e {
            Event::Trace(o) => Some((&*o.name, o.ts)),
            _ => None,
        })
        .collect();
    assert_eq!(
        others,
        vec![
            ("mmc_request_start", 474_223_072_000),
            ("mmc_request_done", 474_492_701_000)
        ]
    );
}

#[test]
fn case4_ftrace_sched_excerpt() {
    let (v, skipped) = events("case4-ftrace-sched.txt");
    assert_eq!(skipped, 0, "every event line of the excerpt parses");
    assert_eq!(v.len(), 22);
    let first = match &v[0] {
        Event::Trace(o) => o,
        e => panic!("{e:?}"),
    };
    // The `(#1)` annotation of the article is not part of the task name.
    assert_eq!(
        (&*first.name, first.pid, first.ts),
        ("mmc_request_start", 89, 1_384_282_406_000)
    );
    let switches = v
        .iter()
        .filter(|e| matches!(e, Event::Trace(o) if &*o.name == "sched_switch"))
        .count();
    assert_eq!(switches, 6);
}

/// Case 4's proof: the journal write's 269 ms were between
/// mmc_request_start and mmc_request_done. The excerpt with the article's
/// line wrapping undone (each event on one line, as ftrace writes it):
/// the MMC command (cmd_arg 0x47fd98 = sector 4717976) is the request the
/// block layer issued 26 µs earlier, and its D2C splits at the device.
#[test]
fn case4_mmc_command_splits_the_journal_write_at_the_device() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_iosleuth"))
        .args(["report", "--format", "json"])
        .arg(Path::new("tests/fixtures/seeds").join("case4-ftrace-block-mmc-joined.txt"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let rep: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let d = &rep["driver"];
    assert_eq!(d["devices"][0]["device"], "179,0");
    assert_eq!(d["devices"][0]["driver"], "mmc");
    assert_eq!(d["devices"][0]["commands"], 1);
    let c = &d["slowest"][0];
    assert_eq!(
        (&c["sector"], &c["bytes"], &c["command"]),
        (&4717976.into(), &4096.into(), &"cmd_opcode=25".into())
    );
    assert_eq!(c["device_ns"], 474_492_701_000u64 - 474_223_072_000);
    assert_eq!(c["before_device_ns"], 26_000);
    assert_eq!(d["unmatched_commands"], 0);
    // No longer "not analyzed".
    assert!(rep["unknown_events"].as_object().unwrap().is_empty());
}
