//! trace-cmd's binary trace.dat, file versions 6 and 7 (v7 uncompressed,
//! zlib and zstd), made by scripts/make-fixtures-tracedat from two
//! captures: iosleuth reads each the way it reads `trace-cmd report -t`'s
//! text of the same file (tracedat-NAME.trace-cmd.txt.gz, one text for all
//! versions: trace-cmd reports them alike). Damaged files get a message
//! naming the file and what is wrong, or a warning; never a panic or a hang.

use crate::common;

use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn fx(name: &str) -> PathBuf {
    Path::new("tests/fixtures").join(name)
}

fn bytes(name: &str) -> Vec<u8> {
    std::fs::read(fx(name)).unwrap()
}

/// The report without what names the input, and with event names as
/// text gives them: a trace.dat names events `system:event` (as a capture
/// does), trace-cmd's text `event`.
fn normalized(mut v: Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::String(s) => {
                if let Some((sys, ev)) = s.split_once(':') {
                    let word = |w: &str| {
                        !w.is_empty() && w.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                    };
                    if word(sys) && word(ev) {
                        *s = ev.to_string();
                    }
                }
            }
            Value::Array(a) => a.iter_mut().for_each(walk),
            Value::Object(o) => o.values_mut().for_each(walk),
            _ => {}
        }
    }
    v.as_object_mut().unwrap().remove("inputs");
    walk(&mut v);
    v
}

#[test]
fn each_version_reports_what_its_trace_cmd_text_reports() {
    let text = json_report(&[fx("tracedat-readahead.trace-cmd.txt.gz")], &[]);
    assert_eq!(text["events"], 2598);
    for v in ["v6", "v7-zlib", "v7-zstd"] {
        let dat = json_report(&[fx(&format!("tracedat-readahead.{v}.dat"))], &[]);
        assert_eq!(dat["inputs"][0]["format"], "trace-cmd trace.dat", "{v}");
        assert_eq!(dat["events"], text["events"], "{v}");
        assert_eq!(dat["devices"].as_array().map(Vec::len), Some(2), "{v}");
        for (d, t) in dat["devices"]
            .as_array()
            .unwrap()
            .iter()
            .zip(text["devices"].as_array().unwrap())
        {
            assert_eq!(d["device"], t["device"], "{v}");
            assert_eq!(d["completed"]["read"], 22, "{v}");
            for k in [
                "actions",
                "completed",
                "bytes_completed",
                "btt",
                "d2c",
                "q2c",
            ] {
                assert_eq!(d[k], t[k], "{v} {} {k}", d["device"]);
            }
        }
        for k in ["processes", "syscalls", "readahead", "span"] {
            assert_eq!(dat[k], text[k], "{v} {k}");
        }
        // And everything else.
        assert_eq!(normalized(dat), normalized(text.clone()), "{v}");
    }
}

/// `iosleuth dump`'s columns (report/dump.rs): time, CPU and pid, then
/// the task's name (16 wide).
#[test]
fn scheduler_analysis_of_each_version_equals_its_trace_cmd_texts() {
    // trace-cmd report prints sched_switch and sched_wakeup through
    // libtraceevent's plugin (`prev:pid [prio] S ==> next:pid [prio]`).
    let text = json_report(&[fx("tracedat-oncpu.trace-cmd.txt.gz")], &[]);
    assert!(
        text["sched"]["switches"].as_u64().unwrap() > 100,
        "{}",
        text["sched"]
    );
    assert!(text["sched"]["runqlat"]["count"].as_u64().unwrap() > 50);
    for v in ["v6", "v7", "v7-zlib", "v7-zstd"] {
        let dat = json_report(&[fx(&format!("tracedat-oncpu.{v}.dat"))], &[]);
        for k in ["switches", "wakeups", "runqlat", "threads"] {
            assert_eq!(dat["sched"][k], text["sched"][k], "{v}: sched.{k}");
        }
    }
}

fn head(line: &str) -> (&str, &str) {
    let (head, rest) = line.split_at(line.len().min(47));
    (head, rest.trim())
}

/// Each event's columns, and for a stack its functions (the text names
/// them without offset).
fn dump_lines(path: &Path) -> Vec<(String, String)> {
    let out = run(iosleuth().arg("dump").arg(path));
    out.lines()
        .map(|l| {
            let (head, rest) = head(l);
            let frames = match rest.strip_prefix("ftrace:kernel_stack") {
                Some(f) => f
                    .split(" => ")
                    .map(|f| f.split("+0x").next().unwrap())
                    .collect::<Vec<_>>()
                    .join(" => "),
                None => String::new(),
            };
            (head.to_string(), frames)
        })
        .collect()
}

#[test]
fn tasks_and_stacks_named_as_trace_cmd_report_names_them() {
    for name in ["oncpu", "readahead"] {
        let text = dump_lines(&fx(&format!("tracedat-{name}.trace-cmd.txt.gz")));
        for v in ["v6", "v7", "v7-zlib", "v7-zstd"] {
            let p = fx(&format!("tracedat-{name}.{v}.dat"));
            if !p.exists() {
                continue;
            }
            let dat = dump_lines(&p);
            assert_eq!(dat.len(), text.len(), "{name} {v}");
            for (i, (d, t)) in dat.iter().zip(&text).enumerate() {
                assert_eq!(d.0, t.0, "{name} {v}: event {i}");
                assert_eq!(d.1, t.1, "{name} {v}: the stack of event {i}");
            }
        }
    }
    let oncpu = run(iosleuth().arg("dump").arg(fx("tracedat-oncpu.v7-zstd.dat")));
    // In the cmdlines under another name than its sched_switch events give:
    // the cmdline's; not in them: `<...>` until a sched_switch names it
    // (libtraceevent's sched_switch plugin); pid 0 `<idle>`.
    let named = |pid: &str| -> Vec<String> {
        oncpu
            .lines()
            .filter(|l| l.split_whitespace().nth(2) == Some(pid))
            .map(|l| head(l).0[31..].trim().to_string())
            .filter(|c| !c.is_empty())
            .collect()
    };
    assert!(
        named("10734").iter().all(|c| c == "oldname"),
        "{:?}",
        named("10734")
    );
    assert_eq!(named("10791").first().map(String::as_str), Some("iosleuth"));
    assert!(named("0").iter().all(|c| c == "<idle>"));
    let ra = run(iosleuth().arg("dump").arg(fx("tracedat-readahead.v6.dat")));
    assert!(
        ra.lines().any(|l| l.contains("      22 <...> ")),
        "ksoftirqd/1 is in no cmdline"
    );
    assert!(ra.lines().any(|l| l.contains("   29696 dd ")));
}

#[test]
fn standard_input() {
    let o = outcome_bounded(
        iosleuth().args(["report", "--format", "json", "-"]),
        Some(bytes("tracedat-readahead.v7-zlib.dat")),
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let j: Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(j["events"], 2598);
}

/// `report --format json` of `data` written as `name`.
fn report_of(name: &str, data: &[u8]) -> Outcome {
    let d = tempdir();
    let p = d.path().join(name);
    std::fs::write(&p, data).unwrap();
    let o = outcome_bounded(
        iosleuth().args(["report", "--format", "json"]).arg(&p),
        None,
    );
    assert!(!o.stderr.contains("panicked"), "{name}: {}", o.stderr);
    o
}

fn events(o: &Outcome) -> u64 {
    let j: Value = serde_json::from_str(&o.stdout).unwrap();
    j["events"].as_u64().unwrap()
}

#[test]
fn truncated_anywhere_refused_or_read_up_to_the_cut() {
    for v in ["v6", "v7-zlib", "v7-zstd"] {
        let full = bytes(&format!("tracedat-readahead.{v}.dat"));
        let n = full.len();
        for cut in [
            5,
            12,
            20,
            100,
            1000,
            5000,
            n / 4,
            n / 2,
            3 * n / 4,
            n - 100,
            n - 1,
        ] {
            let name = format!("cut-{v}-{cut}.dat");
            let o = report_of(&name, &full[..cut]);
            match o.code {
                2 => assert!(o.stderr.contains(&format!("{name}: ")), "{}", o.stderr),
                // Events lost: said. (A cut in the last page's padding, or
                // in v7's section names at the end, loses none.)
                0 => {
                    let e = events(&o);
                    assert!(e <= 2598, "{name}");
                    assert!(
                        e == 2598
                            || o.stderr.contains(&format!("{name}: "))
                                && o.stderr.contains("truncated"),
                        "{name}: {}",
                        o.stderr
                    );
                }
                c => panic!("{name}: exit code {c}: {}", o.stderr),
            }
        }
    }
    // Inside CPU 1's pages of the v6 file: CPU 0's events and CPU 1's
    // before the cut.
    let full = bytes("tracedat-readahead.v6.dat");
    let o = report_of("mid.dat", &full[..full.len() - 40_000]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("mid.dat: truncated: CPU 1's data should end at byte"),
        "{}",
        o.stderr
    );
    let e = events(&o);
    assert!(e > 100 && e < 2598, "{e}");
}

#[test]
fn unknown_version_and_compression_are_named() {
    let mut b = bytes("tracedat-oncpu.v6.dat");
    assert_eq!(&b[10..12], b"6\0");
    b[10] = b'9';
    let o = report_of("v9.dat", &b);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr
            .contains("v9.dat: trace.dat version \"9\" is not supported"),
        "{}",
        o.stderr
    );
    let mut b = bytes("tracedat-oncpu.v7-zstd.dat");
    assert_eq!(&b[18..23], b"zstd\0");
    b[21] = b'x';
    let o = report_of("zstx.dat", &b);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr.contains("zstx.dat: is compressed with \"zstx\"")
            && o.stderr.contains("it reads zlib and zstd"),
        "{}",
        o.stderr
    );
    let mut b = bytes("tracedat-oncpu.v6.dat");
    b[12] = 1;
    let o = report_of("be.dat", &b);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr.contains("be.dat: is a big-endian trace.dat"),
        "{}",
        o.stderr
    );
}

/// Where the first options section of a v7 file is.
fn first_options(b: &[u8]) -> usize {
    // magic (10), "7\0", endian, long size, page size (4), then the
    // compression's name and version.
    let mut at = 18;
    for _ in 0..2 {
        at += b[at..].iter().position(|&c| c == 0).unwrap() + 1;
    }
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap()) as usize
}

#[test]
fn damaged_section_header_is_named() {
    let mut b = bytes("tracedat-oncpu.v7.dat");
    let at = b.windows(12).position(|w| w == b"header_page\0").unwrap() - 16;
    assert_eq!(
        &b[at..at + 2],
        &16u16.to_le_bytes(),
        "the header info section's id"
    );
    b[at] = 99;
    let o = report_of("sec.dat", &b);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr.contains(&format!(
            "sec.dat: its header info section at byte {at} has a damaged header: section id 99 where 16 was expected"
        )),
        "{}",
        o.stderr
    );
    // The options section itself.
    let mut b = bytes("tracedat-oncpu.v7.dat");
    let opts = first_options(&b);
    b[opts] = 5;
    let o = report_of("opts.dat", &b);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr.contains("opts.dat: its options section at byte"),
        "{}",
        o.stderr
    );
}

#[test]
fn options_sections_that_loop_end() {
    let mut b = bytes("tracedat-oncpu.v7.dat");
    let start = first_options(&b);
    // The uncompressed section: 16-byte header, then options (u16 id, u32
    // size, data) up to DONE (id 0), whose data is the next section's
    // offset: make it this one.
    assert_eq!(&b[start..start + 4], &[0, 0, 0, 0]);
    let mut at = start + 16;
    loop {
        let id = u16::from_le_bytes([b[at], b[at + 1]]);
        let size = u32::from_le_bytes(b[at + 2..at + 6].try_into().unwrap()) as usize;
        if id == 0 {
            b[at + 6..at + 14].copy_from_slice(&(start as u64).to_le_bytes());
            break;
        }
        at += 6 + size;
    }
    let o = report_of("loop.dat", &b);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr.contains("loop.dat: its options sections loop"),
        "{}",
        o.stderr
    );
}

#[test]
fn damaged_compressed_pages_are_a_warning() {
    for v in ["v7-zlib", "v7-zstd"] {
        let mut b = bytes(&format!("tracedat-readahead.{v}.dat"));
        // CPU 0's chunks (trace-cmd put them at 0x2000): a count, then
        // each chunk's compressed and uncompressed sizes and its data.
        let at = 0x2000;
        let count = u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
        let usize_ = u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap());
        assert!(
            (1..=64).contains(&count) && usize_ % 4096 == 0,
            "{v}: {count} {usize_}"
        );
        for x in &mut b[at + 40..at + 200] {
            *x ^= 0x5a;
        }
        let name = format!("bad-{v}.dat");
        let o = report_of(&name, &b);
        assert_eq!(o.code, 0, "{}", o.stderr);
        assert!(
            o.stderr.contains(&format!(
                "{name}: CPU 0: the compressed chunk at byte {}",
                at + 4
            )),
            "{}",
            o.stderr
        );
        let e = events(&o);
        assert!(e > 1000 && e < 2598, "{v}: {e}");
    }
}
