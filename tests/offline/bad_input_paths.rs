//! Files that an input names (the binaries a perf.data file or a capture
//! mapped, a JIT's /tmp/perf-PID.map, a capture's build-ids.json and
//! vdso.so, the --kallsyms file) may be anything: a device that never
//! ends, a FIFO that blocks, a sparse file of gigabytes, another user's
//! file. Each is read only when it is a bounded regular file, and one
//! that is not is a warning naming it and why; never a hang or a blow-up.

use crate::common;

use common::*;
use std::path::{Path, PathBuf};

const PERF_DATA: &str = "tests/fixtures/perf-record-g.data";
const PYTHON_CAP: &str = "tests/fixtures/stacks-user-python.cap";
/// The binary whose mappings the crafted copies point elsewhere: both
/// recordings sampled in it.
const LIBC: &str = "/usr/lib/x86_64-linux-gnu/libc.so.6";
/// The periods of all of perf-record-g.data's samples (tests/offline/stacks.rs).
const PERF_DATA_PERIODS: u64 = 387_959_796;

fn mkfifo(p: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// A sparse file of `bytes`, which costs no disk.
fn sparse(p: &Path, bytes: u64) {
    std::fs::File::create(p).unwrap().set_len(bytes).unwrap();
}

/// `bytes` with every `from` replaced by `to`, padded with NULs to the
/// same length (paths in perf records end at their first NUL); the
/// offsets of the replacements.
fn replace_path(bytes: &mut [u8], from: &str, to: &str) -> Vec<usize> {
    assert!(to.len() <= from.len(), "{to} is longer than {from}");
    let mut new = to.as_bytes().to_vec();
    new.resize(from.len(), 0);
    let mut at = Vec::new();
    let mut i = 0;
    while let Some(k) = bytes[i..]
        .windows(from.len())
        .position(|w| w == from.as_bytes())
    {
        bytes[i + k..i + k + from.len()].copy_from_slice(&new);
        at.push(i + k);
        i += k + from.len();
    }
    assert!(!at.is_empty(), "no {from} in the file");
    at
}

/// A copy of perf-record-g.data whose libc mappings name `to` instead.
fn perf_data_mapping(dir: &Path, to: &str) -> PathBuf {
    let mut b = std::fs::read(PERF_DATA).unwrap();
    replace_path(&mut b, LIBC, to);
    let p = dir.join("mapped.data");
    std::fs::write(&p, b).unwrap();
    p
}

/// A copy of stacks-user-python.cap whose libc mappings name `to`.
fn capture_mapping(dir: &Path, to: &str) -> PathBuf {
    let cap = dir.join("cap");
    copy_dir(Path::new(PYTHON_CAP), &cap);
    for f in [
        "samples-start-maps.perf",
        "samples-cpu0.perf",
        "samples-cpu1.perf",
    ] {
        let p = cap.join(f);
        let mut b = std::fs::read(&p).unwrap();
        if b.windows(LIBC.len()).any(|w| w == LIBC.as_bytes()) {
            replace_path(&mut b, LIBC, to);
        }
        std::fs::write(&p, b).unwrap();
    }
    cap
}

/// `iosleuth ARGS`, bounded, with an empty home (no build-id cache of
/// this machine's to find the real binary in).
fn run_bounded(home: &Path, args: &[&std::ffi::OsStr]) -> Outcome {
    outcome_bounded(iosleuth().env("HOME", home).args(args), None)
}

/// The folded stacks of `input` and how it ended.
fn folded(home: &Path, input: &Path) -> (Vec<(String, u64)>, Outcome) {
    let o = run_bounded(
        home,
        &[
            "report".as_ref(),
            "--format".as_ref(),
            "folded".as_ref(),
            input.as_os_str(),
        ],
    );
    let lines = o
        .stdout
        .lines()
        .map(|l| {
            let (s, n) = l.rsplit_once(' ').unwrap();
            (s.to_string(), n.parse().unwrap())
        })
        .collect();
    (lines, o)
}

fn total(lines: &[(String, u64)]) -> u64 {
    lines.iter().map(|(_, n)| n).sum()
}

fn with_frame(lines: &[(String, u64)], frame: &str) -> u64 {
    lines
        .iter()
        .filter(|(s, _)| s.split(';').any(|f| f == frame))
        .map(|(_, n)| n)
        .sum()
}

/// A mapping of /dev/urandom, of a FIFO and of a 3 GiB sparse file, in a
/// perf.data file and in a capture: each is refused with a warning
/// naming it and why, and every sample is still there, its frames in the
/// file named after it.
#[test]
fn mapped_files_that_are_not_bounded_regular_files_are_not_read() {
    let d = tempdir();
    let home = d.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let fifo = d.path().join("fifo");
    mkfifo(&fifo);
    let big = d.path().join("big");
    sparse(&big, 3 << 30);
    let cases: [(&str, &str, &str); 3] = [
        (
            "/dev/urandom",
            "is a character device, not a regular file",
            "[urandom]",
        ),
        (
            fifo.to_str().unwrap(),
            "is a FIFO (named pipe), not a regular file",
            "[fifo]",
        ),
        (
            big.to_str().unwrap(),
            "is 3 GiB, more than the 1 GiB iosleuth reads symbols from",
            "[big]",
        ),
    ];
    for (path, why, module) in cases {
        let input = perf_data_mapping(d.path(), path);
        let (lines, o) = folded(&home, &input);
        assert_eq!(o.code, 0, "{path}: {}", o.stderr);
        let warning = format!("{}: {path}: {why}: not read for symbols", input.display());
        assert!(o.stderr.contains(&warning), "{warning}\n{}", o.stderr);
        assert_eq!(total(&lines), PERF_DATA_PERIODS, "{path}");
        assert!(with_frame(&lines, module) > 0, "{path}: {lines:?}");

        let cap = capture_mapping(d.path(), path);
        let (lines, o) = folded(&home, &cap);
        assert_eq!(o.code, 0, "{path}: {}", o.stderr);
        let warning = format!("{path}: {why}: not read for symbols");
        assert!(o.stderr.contains(&warning), "{warning}\n{}", o.stderr);
        let python: Vec<_> = lines
            .into_iter()
            .filter(|(s, _)| s.starts_with("python3;"))
            .collect();
        // The 102 samples of the python loop, 26 of them in libc.
        assert_eq!(total(&python), 102, "{path}: {python:?}");
        assert_eq!(with_frame(&python, module), 26, "{path}: {python:?}");
        std::fs::remove_dir_all(&cap).unwrap();
    }
}

/// The pids whose libc mapping records (MMAP2: the pid 64 bytes before
/// the path) `at` points into.
fn mmap2_pids(bytes: &[u8], at: &[usize]) -> Vec<u32> {
    let mut pids: Vec<u32> = at
        .iter()
        .filter(|&&i| i >= 64)
        .map(|&i| u32::from_le_bytes(bytes[i - 64..i - 60].try_into().unwrap()))
        .filter(|&p| p > 0 && p < 1 << 22)
        .collect();
    pids.sort();
    pids.dedup();
    pids
}

/// Anonymous executable memory (JIT code) is named from the map its JIT
/// writes for perf, /tmp/perf-PID.map, which any local user can put there
/// first: as perf, iosleuth reads it only when root or the user it runs
/// as owns it, and a FIFO there neither blocks nor is read.
#[test]
fn a_jit_map_in_tmp_is_read_only_from_its_owner() {
    let d = tempdir();
    let home = d.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let mut b = std::fs::read(PERF_DATA).unwrap();
    let at = replace_path(&mut b, LIBC, "//anon");
    let input = d.path().join("jit.data");
    std::fs::write(&input, &b).unwrap();
    let pids = mmap2_pids(&b, &at);
    assert!(!pids.is_empty());
    let maps: Vec<PathBuf> = pids
        .iter()
        .map(|p| PathBuf::from(format!("/tmp/perf-{p}.map")))
        .collect();
    struct Remove(Vec<PathBuf>);
    impl Drop for Remove {
        fn drop(&mut self) {
            for m in &self.0 {
                let _ = std::fs::remove_file(m);
            }
        }
    }
    let _remove = Remove(maps.clone());
    // A warning naming the input and the map of a process that was sampled
    // in it (not every process that mapped libc was).
    let said = |o: &Outcome, why: &str| {
        assert!(
            maps.iter().any(|m| o.stderr.contains(&format!(
                "{}: {}: {why}",
                input.display(),
                m.display()
            ))),
            "{why}\n{}",
            o.stderr
        );
    };
    let put = |make: &dyn Fn(&Path)| {
        for m in &maps {
            let _ = std::fs::remove_file(m);
            make(m);
        }
    };
    // One function over all of user space.
    let jit_map = |m: &Path| std::fs::write(m, "0 7fffffffffff jitted_function\n").unwrap();

    // The user iosleuth runs as owns it: read, as perf reads it.
    put(&jit_map);
    let (lines, o) = folded(&home, &input);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(with_frame(&lines, "jitted_function") > 0, "{lines:?}");
    assert_eq!(total(&lines), PERF_DATA_PERIODS);

    // Another user's (nobody's): ignored, with a warning.
    let nobody = 65534;
    put(&|m| {
        jit_map(m);
        std::os::unix::fs::chown(m, Some(nobody), Some(nobody)).unwrap();
    });
    let (lines, o) = folded(&home, &input);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let me = unsafe { libc::geteuid() };
    if me != nobody {
        assert_eq!(with_frame(&lines, "jitted_function"), 0, "{lines:?}");
        said(
            &o,
            &format!(
                "is owned by uid 65534, neither root nor the user iosleuth runs as (uid {me}): ignored, as perf ignores it: not read for symbols"
            ),
        );
        assert_eq!(total(&lines), PERF_DATA_PERIODS);
    }

    // A FIFO: not opened, said.
    put(&|m| mkfifo(m));
    let (lines, o) = folded(&home, &input);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(total(&lines), PERF_DATA_PERIODS);
    said(
        &o,
        "is a FIFO (named pipe), not a regular file: not read for symbols",
    );

    // A link to a file the user owns: perf does not follow it, nor do we.
    let target = d.path().join("target.map");
    jit_map(&target);
    put(&|m| std::os::unix::fs::symlink(&target, m).unwrap());
    let (lines, o) = folded(&home, &input);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(with_frame(&lines, "jitted_function"), 0, "{lines:?}");
    said(
        &o,
        "is a symbolic link, which iosleuth does not follow there: not read for symbols",
    );
}

/// A capture's build-ids.json and vdso.so as a FIFO, a 3 GiB sparse file
/// and a link to /dev/zero: not read, each a warning naming it, and the
/// samples all there.
#[test]
fn a_captures_build_ids_and_vdso_image_are_bounded_regular_files() {
    let d = tempdir();
    let home = d.path().join("home");
    std::fs::create_dir(&home).unwrap();
    type Make<'a> = &'a dyn Fn(&Path);
    let kinds: [(&str, Make, &str); 3] = [
        (
            "FIFO",
            &|p| mkfifo(p),
            "is a FIFO (named pipe), not a regular file",
        ),
        ("sparse", &|p| sparse(p, 3 << 30), "is 3 GiB, more than the"),
        (
            "link to /dev/zero",
            &|p| std::os::unix::fs::symlink("/dev/zero", p).unwrap(),
            "is a character device, not a regular file",
        ),
    ];
    for (kind, make, why) in kinds {
        for file in ["build-ids.json", "vdso.so"] {
            let cap = d.path().join("cap");
            copy_dir(Path::new(PYTHON_CAP), &cap);
            std::fs::remove_file(cap.join(file)).unwrap();
            make(&cap.join(file));
            let (lines, o) = folded(&home, &cap);
            assert_eq!(o.code, 0, "{file} as {kind}: {}", o.stderr);
            let warning = format!("{}: {why}", cap.join(file).display());
            assert!(
                o.stderr.contains(&warning),
                "{file} as {kind}: {warning}\n{}",
                o.stderr
            );
            let python: Vec<_> = lines
                .into_iter()
                .filter(|(s, _)| s.starts_with("python3;"))
                .collect();
            assert_eq!(total(&python), 102, "{file} as {kind}: {python:?}");
            if file == "vdso.so" {
                assert_eq!(with_frame(&python, "[[vdso]]"), 25, "{python:?}");
            }
            std::fs::remove_dir_all(&cap).unwrap();
        }
    }
}

/// `--kallsyms` of a device or a FIFO: refused before any reading, exit 2
/// naming the file and what it is.
#[test]
fn kallsyms_of_a_device_or_a_fifo_is_refused() {
    let d = tempdir();
    let fifo = d.path().join("kallsyms");
    mkfifo(&fifo);
    for (file, what) in [
        (
            PathBuf::from("/dev/zero"),
            "is a character device, not a regular file",
        ),
        (fifo.clone(), "is a FIFO (named pipe), not a regular file"),
    ] {
        let o = outcome_bounded(
            iosleuth()
                .args(["report", "--kallsyms"])
                .arg(&file)
                .arg(PERF_DATA),
            None,
        );
        assert_eq!(o.code, 2, "{}: {}", file.display(), o.stderr);
        let message = format!("{}: {what}", file.display());
        assert!(o.stderr.contains(&message), "{message}\n{}", o.stderr);
    }
}

/// Raw control characters an SVG (or any text) must not hold: C0 but
/// tab, newline and carriage return (XML allows no other), DEL and C1.
fn raw_controls(text: &str) -> Vec<char> {
    text.chars()
        .filter(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r'))
        .collect()
}

/// Whether python3's XML parser reads `xml` as a well-formed document
/// (`None` without a python3 here: the raw-control check still runs).
fn well_formed_xml(xml: &[u8]) -> Option<Result<(), String>> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new("python3")
        .args([
            "-c",
            "import sys, xml.dom.minidom; xml.dom.minidom.parseString(sys.stdin.buffer.read())",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    child.stdin.take().unwrap().write_all(xml).unwrap();
    let out = child.wait_with_output().unwrap();
    Some(if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    })
}

fn assert_svg_is_xml_without_controls(what: &str, svg: &[u8]) {
    let text = String::from_utf8_lossy(svg);
    assert!(text.contains("<svg"), "{what}: {text}");
    assert_eq!(raw_controls(&text), Vec::<char>::new(), "{what}");
    match well_formed_xml(svg) {
        Some(r) => r.unwrap_or_else(|e| panic!("{what} is not well-formed XML: {e}")),
        None => eprintln!("no python3 here: {what} checked for raw controls only"),
    }
}

/// Standard base64, as the HTML report embeds its SVGs.
fn base64_decode(s: &str) -> Vec<u8> {
    let value = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => (c - b'A') as u32,
            b'a'..=b'z' => (c - b'a') as u32 + 26,
            b'0'..=b'9' => (c - b'0') as u32 + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {c}"),
        }
    };
    let mut out = Vec::new();
    for chunk in s.trim_end_matches('=').as_bytes().chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= value(c) << (18 - 6 * i);
        }
        out.extend(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}

/// A comm, a function and a binary named with ESC, BEL and NEL (a C1
/// control), and `<&>`: perf script text of two samples.
const HOSTILE_SAMPLES: &str = "e\x1bv\u{85}il\x07 100 [000] 1.000000:    1000 cpu-clock:ppp: \n\t            1000 f\x1b[31mn\x07\u{85}<&>+0x1 (/bin/x\x1by)\n\t            2000 main+0x23 (/bin/x)\n\ne\x1bv\u{85}il\x07 100 [000] 1.001000:    1000 cpu-clock:ppp: \n\t            1000 f\x1b[31mn\x07\u{85}<&>+0x1 (/bin/x\x1by)\n\t            2000 main+0x23 (/bin/x)\n\n";

/// Frame names, comms and file names are anyone's: in a flame graph, and
/// in the HTML report that embeds one, their control characters are
/// escaped text, so that the SVG is well-formed XML a browser draws.
#[test]
fn flame_graphs_escape_control_characters() {
    let d = tempdir();
    let input = d.path().join("evil\x1b.perf-script.txt");
    std::fs::write(&input, HOSTILE_SAMPLES).unwrap();
    let svg = d.path().join("f.svg");
    let o = outcome_bounded(
        iosleuth().args(["flamegraph", "-o"]).arg(&svg).arg(&input),
        None,
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let bytes = std::fs::read(&svg).unwrap();
    assert_svg_is_xml_without_controls("flamegraph's SVG", &bytes);
    let text = String::from_utf8(bytes).unwrap();
    // The names are there, escaped (and `<&>` as XML writes it).
    assert!(text.contains("e\\x1bv\\x85il\\x07"), "{text}");
    assert!(
        text.contains("f\\x1b[31mn\\x07\\x85&lt;&amp;&gt;"),
        "{text}"
    );
    assert!(
        text.contains("evil\\x1b.perf-script.txt: 2 samples"),
        "{text}"
    );

    let page = d.path().join("r.html");
    let o = outcome_bounded(
        iosleuth()
            .args(["report", "--format", "html", "-o"])
            .arg(&page)
            .arg(&input),
        None,
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let html = std::fs::read_to_string(&page).unwrap();
    let svgs: Vec<Vec<u8>> = html
        .split("src=\"data:image/svg+xml;base64,")
        .skip(1)
        .map(|s| base64_decode(&s[..s.find('"').unwrap()]))
        .collect();
    assert_eq!(svgs.len(), 1, "the on-CPU flame graph");
    assert_svg_is_xml_without_controls("the HTML report's SVG", &svgs[0]);
    assert!(String::from_utf8_lossy(&svgs[0]).contains("e\\x1bv\\x85il\\x07"));
}

/// A light capture's own JSON (light.json) is anyone's text too: its
/// strings (how the programs attached, a device, an operation, a
/// program's name, events not recorded) come out of the text report
/// escaped.
#[test]
fn light_json_strings_are_escaped_in_the_text_report() {
    let d = tempdir();
    let cap = d.path().join("light.cap");
    copy_dir(Path::new("tests/fixtures/light-rt.cap"), &cap);
    let p = cap.join("light.json");
    let mut l: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    l["attach"] = "tp\x1b[2Jbtf".into();
    l["missing_events"] = serde_json::json!(["sched\x07wakeup\u{85}"]);
    l["programs"] =
        serde_json::json!([{"name": "io\x1bdone", "run_count": 10, "run_time_ns": 1000}]);
    l["devices"][1]["dev"] = "254,0\x1b]0;x\x07".into();
    let ops = l["devices"][0]["ops"].as_object_mut().unwrap();
    let read = ops.remove("read").unwrap();
    ops.insert("re\x1bad".into(), read);
    std::fs::write(&p, serde_json::to_string(&l).unwrap()).unwrap();
    let o = outcome_bounded(iosleuth().arg("report").arg(&cap), None);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(raw_controls(&o.stdout), Vec::<char>::new(), "{}", o.stdout);
    for escaped in [
        "programs attached as tp\\x1b[2Jbtf for",
        "not recorded: sched\\x07wakeup\\x85",
        "io\\x1bdone",
        "Device 254,0\\x1b]0;x\\x07 ====",
        "re\\x1bad device (D2C)",
    ] {
        assert!(o.stdout.contains(escaped), "{escaped}\n{}", o.stdout);
    }
}

/// The snapshot's hostname and kernel release name the Parquet export's
/// partition, and are printed in its summary line: escaped there.
#[test]
fn parquet_summary_escapes_the_snapshots_host_and_kernel() {
    let d = tempdir();
    let cap = d.path().join("fsync.cap");
    copy_dir(Path::new("tests/fixtures/fsync-4k.cap"), &cap);
    let p = cap.join("snapshot.json");
    let mut s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    s["before"]["hostname"] = "web\x1b[31m-1\x07\u{85}".into();
    s["before"]["kernel"]["release"] = "6.1\x1b]0;pwn\x07".into();
    std::fs::write(&p, serde_json::to_string(&s).unwrap()).unwrap();
    let out = d.path().join("pq");
    let o = outcome_bounded(
        iosleuth().args(["export", "--parquet"]).arg(&out).arg(&cap),
        None,
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(raw_controls(&o.stderr), Vec::<char>::new(), "{}", o.stderr);
    assert!(
        o.stderr.contains(
            "host=web\\x1b[31m-1\\x07\\x85 capture=fsync.cap kernel 6.1\\x1b]0;pwn\\x07: "
        ),
        "{}",
        o.stderr
    );
}

/// `iosleuth report sda.blktrace.0` in the file's own directory: a bare
/// name's parent is "", the current directory; every CPU's file of the
/// device is read, named as bare as the one given.
#[test]
fn a_bare_blktrace_file_name_is_read_in_the_current_directory() {
    let d = tempdir();
    let o = bounded(&[
        "export",
        "--blktrace",
        d.path().to_str().unwrap(),
        "tests/fixtures/fsync-4k.cap",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let by_full_path = json_report(&[d.path().join("loop0.blktrace.0")], &[]);
    let in_dir = |args: &[&str]| outcome_bounded(iosleuth().current_dir(d.path()).args(args), None);
    let o = in_dir(&["report", "--format", "json", "loop0.blktrace.0"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let rep: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    let inputs: Vec<&str> = rep["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["path"].as_str().unwrap())
        .collect();
    assert_eq!(inputs, ["loop0.blktrace.0", "loop0.blktrace.1"]);
    assert_eq!(rep["events"], by_full_path["events"]);
    assert_eq!(rep["events"], 2577);
    let o = in_dir(&["diff", "loop0.blktrace.1", "loop0.blktrace.0"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
}
