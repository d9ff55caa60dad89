//! Memory that must not grow with a count read from the input (files,
//! mappings, records, devices), and values read from it that must be
//! checked before they are believed.

use crate::common;

use common::*;
use std::path::{Path, PathBuf};

const TEXT: &str = "tests/fixtures/loop-seqread-nomerges0.tracepoints.txt";

fn report_json(inputs: &[&Path]) -> (Outcome, serde_json::Value) {
    let o = outcome_bounded(
        iosleuth().args(["report", "--format", "json"]).args(inputs),
        None,
    );
    let json = serde_json::from_str(&o.stdout).unwrap_or_default();
    (o, json)
}

/// The blktrace records (each with its payload) of every per-CPU file
/// exported from the text fixture, in the order of their times.
fn blktrace_records(dir: &Path) -> Vec<Vec<u8>> {
    let bt = dir.join("exported");
    let o = iosleuth()
        .args(["export", "--blktrace"])
        .arg(&bt)
        .arg(TEXT)
        .output()
        .unwrap();
    assert!(o.status.success());
    let mut recs = Vec::new();
    for cpu in 0..2 {
        let b = std::fs::read(bt.join(format!("loop0.blktrace.{cpu}"))).unwrap();
        let mut pos = 0;
        while pos < b.len() {
            let pdu = u16::from_le_bytes([b[pos + 46], b[pos + 47]]) as usize;
            recs.push(b[pos..pos + 48 + pdu].to_vec());
            pos += 48 + pdu;
        }
    }
    recs.sort_by_key(|r| u64::from_le_bytes(r[8..16].try_into().unwrap()));
    recs
}

/// 600 per-CPU files of a few records each: each used to get a 4 MiB
/// read window (2.4 GiB in all); now a window sized to its file.
#[test]
fn six_hundred_small_blktrace_files_are_read_in_bounded_memory() {
    let dir = tempdir();
    let recs = blktrace_records(dir.path());
    assert_eq!(recs.len(), 1050);
    let split = dir.path().join("split");
    std::fs::create_dir(&split).unwrap();
    const FILES: usize = 600;
    for n in 0..FILES {
        let bytes: Vec<u8> = recs
            .iter()
            .skip(n)
            .step_by(FILES)
            .flatten()
            .copied()
            .collect();
        std::fs::write(split.join(format!("dev.blktrace.{n}")), bytes).unwrap();
    }
    let (o, json) = report_json(&[&split]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(json["inputs"].as_array().map(Vec::len), Some(FILES));
    let dev = &json["devices"][0];
    assert_eq!(dev["actions"]["queued"], 512);
    assert_eq!(dev["actions"]["completed"], 8);
    assert_eq!(dev["btt"]["d2c"]["n"], 512);
    assert_eq!(dev["btt"]["d2c"]["total_ns"], 320256000);
}

/// `report --format folded` of `input`, run bounded.
fn folded(input: &Path) -> Outcome {
    outcome_bounded(
        iosleuth().args(["report", "--format", "folded"]).arg(input),
        None,
    )
}

/// A perf record: header (type, misc, size), then `body`.
fn perf_record(kind: u32, misc: u16, body: &[u8]) -> Vec<u8> {
    let mut r = kind.to_ne_bytes().to_vec();
    r.extend(misc.to_ne_bytes());
    r.extend(((8 + body.len()) as u16).to_ne_bytes());
    r.extend(body);
    r
}

const MISC_USER: u16 = 2;
const CONTEXT_USER: u64 = -512i64 as u64;
const MAPPINGS: u64 = 8000;
const FORKS: u32 = 8000;
const PARENT: u32 = 50_000;
/// The mapping the forked child's sample lands in.
const HIT: u64 = 4321;

fn mapped_at(k: u64) -> u64 {
    0x1000_0000 + k * 0x10000
}

/// The records of a parent that maps 8,000 binaries then forks 8,000
/// times, and a sample of its last child in one of the binaries, from
/// `time` on; `sample_id` is each non-sample record's tail at a time.
fn maps_then_forks(
    time: u64,
    sample_id: &dyn Fn(u32, u64) -> Vec<u8>,
    sample: &dyn Fn(u32, u64, u64) -> Vec<u8>,
) -> Vec<u8> {
    let mut out = Vec::new();
    let mut t = time;
    for k in 0..MAPPINGS {
        t += 1;
        let mut b = Vec::new();
        for v in [PARENT, PARENT] {
            b.extend(v.to_ne_bytes());
        }
        for v in [mapped_at(k), 0x1000, 0] {
            b.extend(v.to_ne_bytes());
        }
        let mut name = format!("/nonexistent/lib-{k}").into_bytes();
        name.resize((name.len() + 1).next_multiple_of(8), 0);
        b.extend(name);
        b.extend(sample_id(PARENT, t));
        out.extend(perf_record(1, MISC_USER, &b));
    }
    for i in 0..FORKS {
        t += 1;
        let child = PARENT + 1 + i;
        let mut b = Vec::new();
        for v in [child, PARENT, child, PARENT] {
            b.extend(v.to_ne_bytes());
        }
        b.extend(t.to_ne_bytes());
        b.extend(sample_id(child, t));
        out.extend(perf_record(7, 0, &b));
    }
    out.extend(sample(PARENT + FORKS, mapped_at(HIT) + 0x10, t + 1));
    out
}

/// perf.data's data section (offset, size) and its records' (offset, type).
fn perf_data_records(b: &[u8]) -> (usize, usize, Vec<(usize, u32)>) {
    let u64_at = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap()) as usize;
    let (off, size) = (u64_at(40), u64_at(48));
    let mut recs = Vec::new();
    let mut pos = off;
    while pos < off + size {
        let kind = u32::from_le_bytes(b[pos..pos + 4].try_into().unwrap());
        recs.push((pos, kind));
        pos += u16::from_le_bytes([b[pos + 6], b[pos + 7]]) as usize;
    }
    (off, size, recs)
}

/// `data` with `records` added at the end of its data section, the
/// feature sections after it moved along.
fn perf_data_with(data: &[u8], records: &[u8]) -> Vec<u8> {
    let (off, size, _) = perf_data_records(data);
    let end = off + size;
    let features = (0..256)
        .filter(|b| data[72 + b / 8] & (1 << (b % 8)) != 0)
        .count();
    let mut out = data[..end].to_vec();
    out.extend(records);
    out.extend(&data[end..]);
    let n = records.len() as u64;
    out[48..56].copy_from_slice(&(size as u64 + n).to_le_bytes());
    for f in 0..features {
        let at = end + records.len() + f * 16;
        let was = u64::from_le_bytes(out[at..at + 8].try_into().unwrap());
        assert!(was as usize >= end);
        out[at..at + 8].copy_from_slice(&(was + n).to_le_bytes());
    }
    out
}

/// Each forked process used to get a copy of its parent's 8,000
/// mappings (2.4 GiB); now it shares them, and still names its frames.
#[test]
fn forks_of_a_process_with_thousands_of_mappings_share_them() {
    let data = std::fs::read("tests/fixtures/perf-urandom.data").unwrap();
    let (_, _, recs) = perf_data_records(&data);
    // perf-urandom.data: IP, TID, TIME, CALLCHAIN, PERIOD; sample_id_all.
    let last = recs
        .iter()
        .filter(|(_, k)| *k == 9)
        .map(|(at, _)| u64::from_le_bytes(data[at + 24..at + 32].try_into().unwrap()))
        .max()
        .unwrap();
    let sample_id = |pid: u32, t: u64| {
        let mut b = pid.to_ne_bytes().to_vec();
        b.extend(pid.to_ne_bytes());
        b.extend(t.to_ne_bytes());
        b
    };
    let sample = |pid: u32, ip: u64, t: u64| {
        let mut b = ip.to_ne_bytes().to_vec();
        b.extend(pid.to_ne_bytes());
        b.extend(pid.to_ne_bytes());
        for v in [t, 1_000_000, 2, CONTEXT_USER, ip] {
            b.extend(v.to_ne_bytes());
        }
        perf_record(9, MISC_USER, &b)
    };
    let dir = tempdir();
    let p = dir.path().join("forks.data");
    let records = maps_then_forks(last, &sample_id, &sample);
    std::fs::write(&p, perf_data_with(&data, &records)).unwrap();
    let o = folded(&p);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let child: Vec<&str> = o
        .stdout
        .lines()
        .filter(|l| l.contains(&format!("lib-{HIT}")))
        .collect();
    assert_eq!(child.len(), 1, "{}", o.stdout);
    assert!(
        child[0].starts_with(&format!(":{}", PARENT + FORKS)),
        "{child:?}"
    );
}

/// The same in a capture's side-band records: each fork copied the
/// parent's timeline of mappings.
#[test]
fn capture_forks_of_a_process_with_thousands_of_mappings_share_them() {
    let dir = tempdir();
    let cap = dir.path().join("cap");
    copy_dir(Path::new("tests/fixtures/stacks-user-python.cap"), &cap);
    let samples = cap.join("samples-cpu0.perf");
    let mut b = std::fs::read(&samples).unwrap();
    // The capture's layout: IP, TID, TIME, CALLCHAIN, CPU; sample_id_all.
    let mut last = 0;
    let mut pos = 0;
    while pos < b.len() {
        if u32::from_ne_bytes(b[pos..pos + 4].try_into().unwrap()) == 9 {
            last = last.max(u64::from_ne_bytes(
                b[pos + 24..pos + 32].try_into().unwrap(),
            ));
        }
        pos += u16::from_ne_bytes([b[pos + 6], b[pos + 7]]) as usize;
    }
    let sample_id = |pid: u32, t: u64| {
        let mut b = pid.to_ne_bytes().to_vec();
        b.extend(pid.to_ne_bytes());
        b.extend(t.to_ne_bytes());
        b.extend([0u8; 8]);
        b
    };
    let sample = |pid: u32, ip: u64, t: u64| {
        let mut b = ip.to_ne_bytes().to_vec();
        b.extend(pid.to_ne_bytes());
        b.extend(pid.to_ne_bytes());
        b.extend(t.to_ne_bytes());
        b.extend([0u8; 8]);
        for v in [2, CONTEXT_USER, ip] {
            b.extend(v.to_ne_bytes());
        }
        perf_record(9, MISC_USER, &b)
    };
    b.extend(maps_then_forks(last, &sample_id, &sample));
    std::fs::write(&samples, b).unwrap();
    let o = folded(&cap);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let child: Vec<&str> = o
        .stdout
        .lines()
        .filter(|l| l.contains(&format!("lib-{HIT}")))
        .collect();
    assert_eq!(child.len(), 1, "{}", o.stdout);
}

const LIGHT: &str = "tests/fixtures/light-dd.cap";

/// A copy of the light capture fixture, to damage.
fn light_copy(dir: &Path) -> PathBuf {
    let cap = dir.join("light.cap");
    copy_dir(Path::new(LIGHT), &cap);
    cap
}

fn report_text(input: &Path) -> Outcome {
    outcome_bounded(iosleuth().arg("report").arg(input), None)
}

/// slow.bin was read whole into a buffer of its length: a sparse 1 GiB
/// one took 1 GiB; it is read record by record now.
#[test]
fn a_sparse_slow_bin_is_read_record_by_record() {
    let dir = tempdir();
    let cap = light_copy(dir.path());
    let slow = cap.join("slow.bin");
    let len = std::fs::metadata(&slow).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&slow)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let o = report_text(&cap);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout
            .contains("requests completed: 600 (read 500, write 100"),
        "{}",
        o.stdout
    );
    // The zeroes are no records: skipped, by name.
    let zero_records = ((1u64 << 30) - len) / 96;
    assert_says(
        &o.stderr,
        &format!("{}: skipped {zero_records} entries", slow.display()),
    );
}

/// context.bin's records were each a Vec (56 bytes for a 4-byte record):
/// 100 MB of them took 1.4 GiB; they are read one at a time now.
#[test]
fn a_flight_recorder_of_tiny_records_is_read_in_bounded_memory() {
    let dir = tempdir();
    let cap = light_copy(dir.path());
    const RECORDS: usize = 25 << 20;
    let mut b = b"IOSLCTX1".to_vec();
    b.resize(16, 0);
    b.extend([99u8, 0, 4, 0].repeat(RECORDS));
    let context = cap.join("context.bin");
    std::fs::write(&context, b).unwrap();
    let o = report_text(&cap);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout
            .contains("requests completed: 600 (read 500, write 100"),
        "{}",
        o.stdout
    );
    assert_says(
        &o.stderr,
        &format!(
            "{}: {RECORDS} records could not be decoded (the first: record 0)",
            context.display()
        ),
    );
}

fn edit_light_json(cap: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let p = cap.join("light.json");
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    edit(&mut doc);
    std::fs::write(&p, doc.to_string()).unwrap();
}

/// A bucket past the histogram's 1184 made a p50 of 36 years, and a
/// count near 2^64 was printed (or wrapped) as it was.
#[test]
fn light_json_buckets_outside_and_impossible_counts_are_left_out_by_key() {
    let dir = tempdir();
    let cap = light_copy(dir.path());
    edit_light_json(&cap, |d| {
        let read = &mut d["devices"][0]["ops"]["read"];
        read["device"]["buckets"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!([5000, 400]));
        d["devices"][1]["ops"]["read"]["ios"] = serde_json::json!(18446744073709551613u64);
    });
    let o = report_text(&cap);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let file = cap.join("light.json");
    assert_says(
        &o.stderr,
        &format!(
            "{}: devices[0].ops.read.device.buckets: 1 buckets outside 0..1183 were skipped (the first: 5000)",
            file.display()
        ),
    );
    assert_says(
        &o.stderr,
        &format!(
            "{}: devices[1].ops.read.ios is 18446744073709551613, more than any capture counts: device 254,0 was left out",
            file.display()
        ),
    );
    // Only the warning quotes it.
    assert!(
        o.stdout
            .lines()
            .filter(|l| l.contains("18446744073709551613"))
            .all(|l| l.contains("light.json: devices[1].ops.read.ios is")),
        "{}",
        o.stdout
    );
    // The good buckets still make the device's figures.
    assert!(
        o.stdout
            .contains("requests completed: 600 (read 500, write 100"),
        "{}",
        o.stdout
    );
    let (_, json) = report_json(&[&cap]);
    let ops = &json["light"]["devices"][0]["ops"][0];
    assert_eq!(ops["op"], "read");
    assert_eq!(ops["device"]["max"], 16895, "{ops}");
}

/// Without light.json the capture was reported as a plain trace of its
/// slow requests, `findings: none` and no word of what was missing.
#[test]
fn a_light_capture_without_light_json_says_its_counts_are_unknown() {
    let dir = tempdir();
    let cap = light_copy(dir.path());
    std::fs::remove_file(cap.join("light.json")).unwrap();
    let o = report_text(&cap);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_says(
        &o.stderr,
        &format!(
            "{}: missing: this light capture's request counts, latency histograms, merges and losses are unknown",
            cap.join("light.json").display()
        ),
    );
    // And nothing at all to read: exit 2, by name.
    let slow = cap.join("slow.bin");
    let b = std::fs::read(&slow).unwrap();
    std::fs::write(&slow, &b[..16]).unwrap();
    let o = report_text(&cap);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("light.json: missing"), "{}", o.stderr);
}

/// Requests of 100 µs each, whose lines come in blocks of 20 written
/// backwards (each block spans less than the 1 ms tolerance). They passed
/// in the order read, unwarned: every completion before its issue, and
/// latencies of nothing. Now they are counted, said, and put back in time
/// order, which gives every request its 100 µs (but the first).
#[test]
fn time_going_back_within_the_tolerance_is_resorted_and_said() {
    let dir = tempdir();
    let p = dir.path().join("backwards.txt");
    let mut lines = Vec::new();
    for r in 0..9000u64 {
        // Each 20 µs a request; each takes 100 µs.
        let issue = 100_000_000 + r * 20;
        for (t, what) in [(issue, "issue"), (issue + 100, "complete")] {
            lines.push((t, what, r * 8));
        }
    }
    lines.sort();
    let mut text = String::new();
    for block in lines.chunks(20) {
        for &(t, what, sector) in block.iter().rev() {
            let ts = format!("{}.{:06}", t / 1_000_000, t % 1_000_000);
            text += &match what {
                "issue" => format!("             fio-7889    [000] .....  {ts}: block_rq_issue: 7,0 R 4096 () {sector} + 8 [fio]\n"),
                _ => format!("          <idle>-0       [000] ..s1.  {ts}: block_rq_complete: 7,0 R () {sector} + 8 [0]\n"),
            };
        }
    }
    std::fs::write(&p, text).unwrap();
    let (o, json) = report_json(&[&p]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let warning = format!(
        "{}: 17100 events came earlier than an event before them on the same CPU, by up to 0.000240 s (first: line 2 at 100.000220 s, 0.000020 s behind): from the first on, the file's events were put back in time order (within the 1 ms tolerance)",
        p.display()
    );
    assert!(o.stderr.contains(&warning), "{}", o.stderr);
    let dev = &json["devices"][0];
    // All but the request of the first line, passed on before the second
    // line went back.
    assert_eq!(dev["completed"]["read"], 8999, "{dev}");
    assert_eq!(dev["d2c"]["count"], 8999, "{dev}");
    assert_eq!(
        (&dev["d2c"]["min"], &dev["d2c"]["max"]),
        (&serde_json::json!(100_000), &serde_json::json!(100_000)),
        "{dev}"
    );
    assert_eq!(dev["completions_without_start"], 1, "{dev}");
}

/// One record with a broken size near the end of a perf.data: the crate
/// stopped there and dropped every sample of the round it held (all 134,
/// "no usable events"); now the samples before it are kept.
#[test]
fn a_damaged_record_near_the_end_of_a_perf_data_keeps_the_samples_before_it() {
    let data = std::fs::read("tests/fixtures/perf-urandom.data").unwrap();
    let (_, _, recs) = perf_data_records(&data);
    let samples: Vec<usize> = recs
        .iter()
        .filter(|(_, k)| *k == 9)
        .map(|(at, _)| *at)
        .collect();
    assert_eq!(samples.len(), 134);
    let last = *samples.last().unwrap();
    let mut b = data.clone();
    b[last + 6..last + 8].fill(0);
    let dir = tempdir();
    let p = dir.path().join("damaged.data");
    std::fs::write(&p, b).unwrap();
    let (o, json) = report_json(&[&p]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(json["on_cpu"]["samples"], 133);
    assert_says(
        &o.stderr,
        &format!(
            "{}: a record that claims 0 bytes at byte {last}: the 184 bytes of records from there to the end of the data were skipped",
            p.display()
        ),
    );
}

/// A text trace of 20,000 devices (device d completes 1 + d % 3 reads):
/// every device had its own section (a 301 MB HTML page, killed under
/// 512 MiB); now the 64 busiest are shown and the rest summed in a line.
#[test]
fn twenty_thousand_devices_are_summed_past_the_busiest() {
    let dir = tempdir();
    let p = dir.path().join("devices.txt");
    let mut text = String::new();
    let mut us = 100_000_000u64;
    for d in 0..20_000u32 {
        let dev = format!("{},{}", 8 + d / 256, d % 256);
        for r in 0..1 + d % 3 {
            for line in ["issue", "complete"] {
                us += 1;
                let ts = format!("{}.{:06}", us / 1_000_000, us % 1_000_000);
                let sector = r * 8;
                text += &match line {
                    "issue" => format!("             fio-7889    [000] .....  {ts}: block_rq_issue: {dev} R 4096 () {sector} + 8 [fio]\n"),
                    _ => format!("          <idle>-0       [000] ..s1.  {ts}: block_rq_complete: {dev} R () {sector} + 8 [0]\n"),
                };
            }
        }
    }
    std::fs::write(&p, text).unwrap();
    let o = report_text(&p);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(o.stdout.matches("==================== Device ").count(), 64);
    assert!(
        o.stdout.contains(
            "… and 19936 more devices (39807 requests completed), not shown: the 64 busiest are"
        ),
        "{}",
        &o.stdout[o.stdout.len().saturating_sub(3000)..]
    );
    let (o, json) = report_json(&[&p]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let devices = json["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 1024);
    assert!(devices.iter().all(|d| d["completed"]["read"] == 3));
    assert_eq!(json["all_devices"]["not_listed"]["devices"], 18976);
    assert_eq!(
        json["all_devices"]["not_listed"]["requests_completed"],
        39999 - 3 * 1024
    );
    let html = dir.path().join("devices.html");
    let o = outcome_bounded(
        iosleuth()
            .args(["report", "--format", "html", "-o"])
            .arg(&html)
            .arg(&p),
        None,
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.len() < 4 << 20, "{} bytes", page.len());
    assert!(page.contains("… and 19936 more devices (39807 requests completed)"));
}
