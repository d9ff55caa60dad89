//! Outputs never destroy what iosleuth did not write: a file, a symlink,
//! a device node or a FIFO named as the output is refused before any
//! analysis or left as it was on a failure, an input is never its own
//! output, and `export --blktrace` writes no file per missing CPU.

use crate::common;

use common::{iosleuth, names_in, outcome_bounded, tempdir, Outcome};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

const TRACE: &str = "tests/fixtures/loop-seqread-nomerges0.tracepoints.txt";

fn run(args: &[&std::ffi::OsStr]) -> Outcome {
    outcome_bounded(iosleuth().args(args), None)
}

fn perfetto(out: &Path, input: &Path) -> Outcome {
    run(&[
        "export".as_ref(),
        "--perfetto".as_ref(),
        out.as_os_str(),
        input.as_os_str(),
    ])
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn c_path(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

/// An input that cannot be opened: the output named before it is left
/// byte for byte as it was (it was truncated, then removed).
#[test]
fn perfetto_onto_a_file_with_an_input_that_cannot_be_opened_leaves_the_file() {
    let d = tempdir();
    let out = d.path().join("keep.pftrace");
    let old: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
    std::fs::write(&out, &old).unwrap();
    let o = perfetto(&out, &d.path().join("missing.txt"));
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("missing.txt: cannot open: No such file or directory"),
        "{}",
        o.stderr
    );
    assert_eq!(std::fs::read(&out).unwrap(), old);
    assert_eq!(names_in(d.path()), ["keep.pftrace"]);
}

/// A symlink named as the output: on a failure the link and the file it
/// names stay as they were; on success the file it names is replaced and
/// the link stays.
#[test]
fn perfetto_onto_a_symlink_leaves_the_link_and_its_target() {
    let d = tempdir();
    let target = d.path().join("target.pftrace");
    std::fs::write(&target, b"the user's own bytes").unwrap();
    let link = d.path().join("link.pftrace");
    std::os::unix::fs::symlink("target.pftrace", &link).unwrap();
    let o = perfetto(&link, &d.path().join("missing.txt"));
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert_eq!(
        std::fs::read_link(&link).unwrap(),
        Path::new("target.pftrace")
    );
    assert_eq!(std::fs::read(&target).unwrap(), b"the user's own bytes");
    assert_eq!(names_in(d.path()), ["link.pftrace", "target.pftrace"]);

    let fresh = d.path().join("fresh.pftrace");
    assert_eq!(perfetto(&fresh, Path::new(TRACE)).code, 0);
    let o = perfetto(&link, Path::new(TRACE));
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        std::fs::read(&target).unwrap(),
        std::fs::read(&fresh).unwrap()
    );
    assert_eq!(
        names_in(d.path()),
        ["fresh.pftrace", "link.pftrace", "target.pftrace"]
    );
}

/// A character device like /dev/full (1,7), made with mknod: refused with
/// exit 2 before the input is read (the input is missing, yet the message
/// is about the output), and the node stays (it was removed).
#[test]
#[ignore = "needs root (mknod): scripts/test runs it"]
fn perfetto_onto_a_device_node_is_refused_before_analysis_and_the_node_stays() {
    assert!(is_root(), "test cannot run: mknod needs root");
    let d = tempdir();
    let node = d.path().join("full");
    // SAFETY: a valid C string; makedev of constants.
    let made = unsafe {
        libc::mknod(
            c_path(&node).as_ptr(),
            libc::S_IFCHR | 0o666,
            libc::makedev(1, 7),
        )
    };
    assert_eq!(made, 0, "mknod: {}", std::io::Error::last_os_error());
    let o = perfetto(&node, &d.path().join("missing.txt"));
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert_eq!(
        o.stderr.trim_end(),
        format!(
            "iosleuth: {}: is a character device, not a regular file: an output is written to a new file or replaces a regular one",
            node.display()
        )
    );
    let m = std::fs::symlink_metadata(&node).unwrap();
    assert!(m.file_type().is_char_device());
    assert_eq!(m.rdev(), libc::makedev(1, 7));
    assert_eq!(names_in(d.path()), ["full"]);
}

/// A FIFO: refused with exit 2 at once (opening it for writing blocked
/// until a reader came), and it stays.
#[test]
fn perfetto_onto_a_fifo_is_refused_before_analysis_and_the_fifo_stays() {
    let d = tempdir();
    let fifo = d.path().join("pipe");
    // SAFETY: a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c_path(&fifo).as_ptr(), 0o644) }, 0);
    let o = perfetto(&fifo, Path::new(TRACE));
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert_eq!(
        o.stderr.trim_end(),
        format!(
            "iosleuth: {}: is a FIFO (named pipe), not a regular file: an output is written to a new file or replaces a regular one",
            fifo.display()
        )
    );
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
    assert_eq!(names_in(d.path()), ["pipe"]);
}

/// A directory named as an output file is refused and left alone.
#[test]
fn a_directory_as_an_output_file_is_refused() {
    let d = tempdir();
    let dir = d.path().join("out");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("inside"), "x").unwrap();
    let o = run(&[
        "report".as_ref(),
        TRACE.as_ref(),
        "-o".as_ref(),
        dir.as_os_str(),
    ]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("out: is a directory, not a regular file: an output is written"),
        "{}",
        o.stderr
    );
    assert_eq!(names_in(&dir), ["inside"]);
}

/// A copy of the text trace, to be named as an output.
fn trace_copy(dir: &Path, name: &str) -> (PathBuf, Vec<u8>) {
    let p = dir.join(name);
    let bytes = std::fs::read(TRACE).unwrap();
    std::fs::write(&p, &bytes).unwrap();
    (p, bytes)
}

/// `report T -o T` replaced its own input with the report; every command
/// that takes an output and inputs refuses that (exit 2, T unchanged),
/// also through a hard link, and for `--kallsyms`.
#[test]
fn an_input_is_never_its_own_output() {
    let d = tempdir();
    let (t, bytes) = trace_copy(d.path(), "t.txt");
    let (u, _) = trace_copy(d.path(), "u.txt");
    let hard = d.path().join("hard.txt");
    std::fs::hard_link(&t, &hard).unwrap();
    let msg = |out: &Path| {
        format!(
            "iosleuth: {}: is the input {}: iosleuth does not write over what it reads; name another output",
            out.display(),
            t.display()
        )
    };
    let (t_, u_, hard_) = (t.as_os_str(), u.as_os_str(), hard.as_os_str());
    let cases: Vec<(Vec<&std::ffi::OsStr>, &Path)> = vec![
        (vec!["report".as_ref(), t_, "-o".as_ref(), t_], &t),
        (
            vec![
                "report".as_ref(),
                t_,
                "--format".as_ref(),
                "html".as_ref(),
                "-o".as_ref(),
                hard_,
            ],
            &hard,
        ),
        (vec!["flamegraph".as_ref(), t_, "-o".as_ref(), t_], &t),
        (vec!["diff".as_ref(), u_, t_, "-o".as_ref(), t_], &t),
        (
            vec!["diff".as_ref(), u_, t_, "--flamegraph".as_ref(), t_],
            &t,
        ),
        (vec!["export".as_ref(), "--perfetto".as_ref(), t_, t_], &t),
    ];
    for (args, out) in cases {
        let o = run(&args);
        assert_eq!(o.code, 2, "{args:?}: {}", o.stderr);
        assert_eq!(o.stderr.trim_end(), msg(out), "{args:?}");
        assert_eq!(std::fs::read(&t).unwrap(), bytes, "{args:?}");
    }
    // The kallsyms file read for perf.data is an input too.
    let o = run(&[
        "report".as_ref(),
        u_,
        "--kallsyms".as_ref(),
        t_,
        "-o".as_ref(),
        t_,
    ]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert_eq!(std::fs::read(&t).unwrap(), bytes);
    assert_eq!(names_in(d.path()), ["hard.txt", "t.txt", "u.txt"]);
}

/// A file inside an input directory (here one of its blktrace files) is
/// not replaced: `report DIR -o DIR/NAME.blktrace.0` is refused.
#[test]
fn a_file_inside_an_input_directory_is_not_an_output() {
    let d = tempdir();
    let dir = d.path().join("bt");
    let o = run(&[
        "export".as_ref(),
        "--blktrace".as_ref(),
        dir.as_os_str(),
        TRACE.as_ref(),
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let names = names_in(&dir);
    let first = dir.join(&names[0]);
    let bytes = std::fs::read(&first).unwrap();
    let o = run(&[
        "report".as_ref(),
        dir.as_os_str(),
        "-o".as_ref(),
        first.as_os_str(),
    ]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert_eq!(
        o.stderr.trim_end(),
        format!(
            "iosleuth: {}: is inside the input directory {}: iosleuth does not replace files in what it reads; name an output elsewhere",
            first.display(),
            dir.display()
        )
    );
    assert_eq!(std::fs::read(&first).unwrap(), bytes);
    // `export --blktrace DIR --force DIR` would replace the files it reads.
    let o = run(&[
        "export".as_ref(),
        "--blktrace".as_ref(),
        dir.as_os_str(),
        "--force".as_ref(),
        dir.as_os_str(),
    ]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert_eq!(
        o.stderr.trim_end(),
        format!(
            "iosleuth: {}: holds the input {}: an export replaces files in its directory, and iosleuth does not write over what it reads; name another directory",
            dir.display(),
            dir.display()
        )
    );
    assert_eq!(names_in(&dir), names);
    assert_eq!(std::fs::read(&first).unwrap(), bytes);
}

/// `export --parquet DIR` replaces a capture's partition directories: an
/// input inside one (DIR/requests/host=unknown/capture=t.txt/t.txt) was
/// removed with them.
#[test]
fn parquet_does_not_replace_a_partition_that_holds_an_input() {
    let d = tempdir();
    let part = d.path().join("pq/requests/host=unknown/capture=t.txt");
    std::fs::create_dir_all(&part).unwrap();
    let (t, bytes) = trace_copy(&part, "t.txt");
    let pq = d.path().join("pq");
    let o = run(&[
        "export".as_ref(),
        "--parquet".as_ref(),
        pq.as_os_str(),
        t.as_os_str(),
    ]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert_eq!(
        o.stderr.trim_end(),
        format!(
            "iosleuth: {}: holds the input {}: an export replaces files in its directory, and iosleuth does not write over what it reads; name another directory",
            pq.join("requests").display(),
            t.display()
        )
    );
    assert_eq!(std::fs::read(&t).unwrap(), bytes);
    assert_eq!(names_in(&pq), ["requests"]);
}

/// Success still writes the output: `report -o` onto an existing file
/// writes what standard output gets, keeps the file's mode, and leaves no
/// temporary file; so do `flamegraph -o` and `diff -o`.
#[test]
fn success_replaces_an_existing_output_with_the_whole_output() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempdir();
    let out = d.path().join("report.json");
    std::fs::write(&out, "an older report, longer than nothing").unwrap();
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o600)).unwrap();
    let args = ["report", "--format", "json", TRACE];
    let stdout = run(&args.map(|a| a.as_ref())).stdout;
    let o = outcome_bounded(iosleuth().args(args).arg("-o").arg(&out), None);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        o.stderr.trim_end().lines().last().unwrap(),
        format!("iosleuth: wrote {}", out.display())
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), stdout);
    assert_eq!(std::fs::metadata(&out).unwrap().mode() & 0o777, 0o600);

    let diff_out = d.path().join("diff.txt");
    let other = "tests/fixtures/loop-seqread-nomerges2.tracepoints.txt";
    let stdout = run(&["diff".as_ref(), TRACE.as_ref(), other.as_ref()]).stdout;
    let o = run(&[
        "diff".as_ref(),
        TRACE.as_ref(),
        other.as_ref(),
        "-o".as_ref(),
        diff_out.as_os_str(),
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(std::fs::read_to_string(&diff_out).unwrap(), stdout);

    let svg = d.path().join("cpu.svg");
    std::fs::write(&svg, "old").unwrap();
    let cap = "tests/fixtures/oncpu-urandom.cap";
    let o = run(&[
        "flamegraph".as_ref(),
        cap.as_ref(),
        "-o".as_ref(),
        svg.as_os_str(),
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let drawn = std::fs::read_to_string(&svg).unwrap();
    assert!(
        drawn.starts_with("<?xml") && drawn.trim_end().ends_with("</svg>"),
        "{drawn:.200}"
    );
    assert_eq!(names_in(d.path()), ["cpu.svg", "diff.txt", "report.json"]);
}

/// Nine block events on CPU 8191 of three devices made 3 × 8192 files,
/// all but three empty (blkparse reads NAME.blktrace.0, .1, … until one
/// is missing, so it needs no gaps): now each device's one file is
/// NAME.blktrace.0, with a warning, and the records keep CPU 8191.
#[test]
fn blktrace_export_of_cpu_8191_writes_one_file_per_device() {
    let d = tempdir();
    let mut text = String::new();
    for (i, minor) in [0, 1, 2].into_iter().enumerate() {
        let t = 100 + i;
        text.push_str(&format!(
            "   fio-7889 [8191] ..... {t}.000001: block_bio_queue: 242,{minor} R 0 + 8 [fio]\n\
             \x20  fio-7889 [8191] ..... {t}.000002: block_rq_issue: 242,{minor} R 4096 () 0 + 8 be,0,4 [fio]\n\
             \x20  fio-7889 [8191] ..s1. {t}.000003: block_rq_complete: 242,{minor} R () 0 + 8 be,0,4 [0]\n"
        ));
    }
    let input = d.path().join("cpu8191.txt");
    std::fs::write(&input, text).unwrap();
    let dir = d.path().join("bt");
    let o = run(&[
        "export".as_ref(),
        "--blktrace".as_ref(),
        dir.as_os_str(),
        input.as_os_str(),
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let names = names_in(&dir);
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(
        names.iter().all(|n| n.ends_with(".blktrace.0")),
        "{names:?}"
    );
    assert!(
        o.stderr
            .contains(&format!("wrote 9 records to 3 files in {}", dir.display())),
        "{}",
        o.stderr
    );
    for n in &names {
        let dev = n.strip_suffix(".blktrace.0").unwrap();
        let w = format!(
            "iosleuth: warning: {dev}: its block events come from 1 CPU up to CPU 8191: written as {dev}.blktrace.0 in CPU order, not by CPU number (blkparse reads NAME.blktrace.0, .1, ... until one is missing, and by CPU number would take 8191 empty files); each record keeps its CPU number, blkparse's per-CPU totals go by file"
        );
        assert!(o.stderr.contains(&w), "{w}\n{}", o.stderr);
    }
    // Read back: the nine events, each on CPU 8191.
    let o = run(&[
        "dump".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
        dir.as_os_str(),
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let cpus: Vec<u64> = o
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["event"].as_str().is_some_and(|n| n.starts_with("block:")))
        .map(|e| e["cpu"].as_u64().unwrap())
        .collect();
    assert_eq!(cpus, [8191; 9], "{}", o.stdout);
}
