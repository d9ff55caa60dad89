//! Inputs that the coverage-guided fuzz targets (fuzz/, `scripts/fuzz`)
//! found to crash, hang or blow up, minimized with `cargo fuzz tmin` and
//! kept under tests/fixtures/fuzz/ (named after the target that found them).
//! Each test asserts what should happen: no panic, exit 0 or 2 (with a
//! warning or error naming the file), bounded time and files.

use crate::common;

use common::{copy_dir, iosleuth, tempdir, BAD_INPUT_AS_BYTES, BAD_INPUT_SECONDS};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn fuzz_input(name: &str) -> Vec<u8> {
    std::fs::read(Path::new("tests/fixtures/fuzz").join(name)).unwrap()
}

/// The capture directory the `capture_dir` target builds from an input.
fn capture_from(data: &[u8], dir: &Path) -> PathBuf {
    iosleuth::fuzz_input::write_capture(data, dir, Path::new("tests/fixtures/fsync-4k.cap"))
        .unwrap()
}

struct Outcome {
    /// None: killed (a limit below was hit).
    code: Option<i32>,
    stderr: String,
    /// Why it was killed.
    killed: Option<String>,
}

/// Runs iosleuth with `args`, its address space limited to 8 GiB (an input
/// that makes it allocate more fails it, rather than the machine); kills
/// it after `limit`, or as soon as `watch` (polled every 50 ms) says so,
/// and tells why.
fn run_bounded(
    args: &[&std::ffi::OsStr],
    limit: Duration,
    watch: impl Fn() -> Option<String>,
) -> Outcome {
    use std::os::unix::process::CommandExt;
    let mut cmd: Command = iosleuth();
    // SAFETY: setrlimit is async-signal-safe; the closure touches nothing else.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: BAD_INPUT_AS_BYTES,
                rlim_max: BAD_INPUT_AS_BYTES,
            };
            libc::setrlimit(libc::RLIMIT_AS, &lim);
            Ok(())
        });
    }
    let mut child = cmd
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    let start = Instant::now();
    let mut killed = None;
    let code = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st.code();
        }
        let why = match watch() {
            Some(w) => Some(w),
            None if start.elapsed() > limit => Some(format!("still running after {limit:?}")),
            None => None,
        };
        if let Some(w) = why {
            let _ = child.kill();
            let _ = child.wait();
            killed = Some(w);
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Outcome {
        code,
        stderr: reader.join().unwrap(),
        killed,
    }
}

/// `iosleuth report PATH`: a clear outcome (0, or 2 with a message naming
/// the input) in bounded time, never a panic.
fn assert_report_copes(path: &Path, named: &str) {
    let o = run_bounded(
        &[std::ffi::OsStr::new("report"), path.as_os_str()],
        Duration::from_secs(BAD_INPUT_SECONDS),
        || None,
    );
    assert!(o.killed.is_none(), "{:?}\n{}", o.killed, o.stderr);
    assert!(
        !o.stderr.contains("panicked"),
        "report panicked:\n{}",
        o.stderr
    );
    match o.code {
        Some(0) => {}
        Some(2) => assert!(o.stderr.contains(named), "{}", o.stderr),
        c => panic!("exit {c:?}:\n{}", o.stderr),
    }
}

fn count_files(dir: &Path) -> usize {
    std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0)
}

/// `iosleuth export --blktrace OUT INPUT` of the committed fuzz input
/// `name` (tests/fixtures/fuzz/): no panic, exit 0 or 2, and no more files
/// than `max_files` (watched while it runs: killed past it, or after 60 s).
fn assert_export_bounded(name: &str, max_files: usize) {
    let d = tempdir();
    let input = &d.path().join("in.blktrace");
    std::fs::write(input, fuzz_input(name)).unwrap();
    let out = d.path().join("out");
    let o = run_bounded(
        &[
            std::ffi::OsStr::new("export"),
            std::ffi::OsStr::new("--blktrace"),
            out.as_os_str(),
            input.as_os_str(),
        ],
        Duration::from_secs(60),
        || {
            let n = count_files(&out);
            (n > max_files).then(|| format!("it had created {n} files"))
        },
    );
    let n = count_files(&out);
    assert!(
        o.killed.is_none() && n <= max_files,
        "export of a {}-byte input: {} ({n} files in the output directory)\n{}",
        std::fs::metadata(input).unwrap().len(),
        o.killed.as_deref().unwrap_or("finished"),
        o.stderr
    );
    assert!(!o.stderr.contains("panicked"), "{}", o.stderr);
    assert!(
        matches!(o.code, Some(0 | 2)),
        "exit {:?}: {}",
        o.code,
        o.stderr
    );
}

// --- findings -------------------------------------------------------------

/// capture_dir: a bio queued (block_bio_queue) or completed
/// (block_rq_complete) at a sector near 2^64, as a damaged page gives,
/// ends past u64::MAX: btt's `e.sector + sectors` overflows, in `queue`
/// (src/analyze/block/btt.rs:256) and in `complete` (btt.rs:385). A panic
/// in a debug build, a wrapped range in a release build.
#[test]
fn capture_bio_at_the_last_sectors() {
    for name in [
        "capture_dir-bio-at-last-sector.bin",
        "capture_dir-bio-complete-at-last-sector.bin",
    ] {
        let d = tempdir();
        let cap = capture_from(&fuzz_input(name), d.path());
        assert_report_copes(&cap, "run.cap");
    }
    // The same from a 48-byte blktrace file: one Q at sector 2^64 - 1.
    let d = tempdir();
    let p = d.path().join("q.blktrace");
    std::fs::write(&p, fuzz_input("pipeline-queue-at-last-sector.blktrace")).unwrap();
    assert_report_copes(&p, "q.blktrace");
}

/// capture_dir: a page whose base timestamp is near 2^64 and whose record
/// adds a delta: `self.ts += delta` in `PageRecords::next`
/// (src/ingest/ring_buffer.rs:135) overflows.
#[test]
fn capture_page_timestamp_near_the_end_of_time() {
    let d = tempdir();
    let cap = capture_from(
        &fuzz_input("capture_dir-page-timestamp-overflow.bin"),
        d.path(),
    );
    assert_report_copes(&cap, "run.cap");
}

/// Latencies between timestamps far apart overflow their sum,
/// `self.total_ns += t` in btt's `Stats::add` (src/analyze/block/btt.rs:39):
/// from a capture (pages on two CPUs, one near 0 and one near 2^64), and
/// from four records of the blk tracer's binary output with two damaged
/// timestamp bytes (found first by tests/offline/fuzz_parsers.rs's
/// damaged_blk_tracer_capture, which fails now and then on it in a debug
/// build; minimized by record).
#[test]
fn latencies_summing_past_u64() {
    let d = tempdir();
    let cap = capture_from(&fuzz_input("capture_dir-btt-total-overflow.bin"), d.path());
    assert_report_copes(&cap, "run.cap");
    let p = d.path().join("damaged.blk");
    std::fs::write(&p, fuzz_input("blk-tracer-latency-sum-overflow.blk")).unwrap();
    assert_report_copes(&p, "damaged.blk");
}

/// What the `tracefs_format` target runs.
fn tracefs_format_target(data: &[u8]) {
    iosleuth::fuzz_input::tracefs_format(data)
}

/// tracefs_format: a field `offset:3; size:18446744073709551615` makes
/// `read_int` compute `f.offset + f.size` (src/ingest/tracefs_format.rs:104),
/// which overflows; a format file of a capture can say so.
#[test]
fn format_field_size_near_u64_max() {
    tracefs_format_target(&fuzz_input("tracefs_format-offset-plus-size-overflow.bin"));
}

/// tracefs_format: ring-buffer timestamps overflow in `PageRecords::next`:
/// a time extension (`self.ts += v`, src/ingest/ring_buffer.rs:117) and a
/// small record's delta (`self.ts += delta`, ring_buffer.rs:146) on a page
/// whose base timestamp is near 2^64.
#[test]
fn page_timestamps_near_u64_max() {
    tracefs_format_target(&fuzz_input("tracefs_format-time-extend-overflow.bin"));
    tracefs_format_target(&fuzz_input("tracefs_format-record-delta-overflow.bin"));
}

/// export: one blktrace record on CPU 516489216 makes export fill the gaps
/// of CPUs 0..516489215 with empty files ("blkparse reads CPUs 0..N until
/// a file is missing", src/report/blktrace.rs): half a billion files from
/// 48 bytes.
#[test]
fn export_of_a_record_on_a_huge_cpu_number() {
    assert_export_bounded("export-cpu-516489216.blktrace", 64);
}

/// export, this session's run (97 inputs, all of this kind): one record
/// on CPU 15,335,424 among records on 65 real CPUs. The target's own
/// prediction of the files export makes had not learnt that export leaves
/// such CPUs out, and called it a finding; export itself writes the 66
/// files of the real CPUs and warns about the one record.
#[test]
fn export_of_a_huge_cpu_among_real_ones_writes_only_the_real_ones() {
    assert_export_bounded("export-huge-cpu-among-others.blktrace", 66);
}

/// Found reading the code while writing the capture_dir target (the fuzzer
/// did not reach it in its runs): a manifest's `page_size` is trusted, and
/// `Chunked::ensure(page_size)` (src/ingest/reader.rs) allocates and zeroes
/// a buffer of that size, so `"page_size": 1099511627776` aborts on a failed
/// 1 TiB allocation (and a few GiB would be allocated and zeroed for real).
#[test]
fn capture_manifest_with_a_huge_page_size() {
    let d = tempdir();
    let cap = d.path().join("run.cap");
    copy_dir(Path::new("tests/fixtures/fsync-4k.cap"), &cap);
    let m = cap.join("iosleuth-capture.json");
    let text = std::fs::read_to_string(&m).unwrap();
    assert!(text.contains("\"page_size\": 4096"));
    std::fs::write(
        &m,
        text.replace("\"page_size\": 4096", "\"page_size\": 1099511627776"),
    )
    .unwrap();
    assert_report_copes(&cap, "run.cap");
}

// --- seeds ----------------------------------------------------------------

/// The small seeds committed for the fuzz targets (plain blktrace in both
/// byte orders, the blk tracer's binary after its text header, the blk
/// tracer's text) are real traces: each reports cleanly.
#[test]
fn committed_fuzz_seeds_report_cleanly() {
    for dir in ["fuzz/seeds/blktrace", "fuzz/seeds/text_ftrace"] {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let o = iosleuth().arg("report").arg(e.path()).output().unwrap();
            let stderr = String::from_utf8_lossy(&o.stderr);
            let stdout = String::from_utf8_lossy(&o.stdout);
            assert_eq!(o.status.code(), Some(0), "{}: {stderr}", e.path().display());
            assert!(
                stdout.contains("Device 7,0") && !stderr.contains("skipped"),
                "{}: {stderr}",
                e.path().display()
            );
        }
    }
}

/// The capture_dir target's kernel-stack seed (scripts/fuzz): the stack
/// capture's first pages with ftrace/kernel_stack's format put into the
/// fixture's `ftrace` system decode into stacks, so the fuzzer starts
/// inside the stack decoder.
#[test]
fn the_kernel_stack_seed_reaches_the_stack_decoder() {
    let st = Path::new("tests/fixtures/stacks-journal-4m.cap");
    let mut systems: Vec<String> = std::fs::read_dir("tests/fixtures/fsync-4k.cap/formats/events")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    systems.sort();
    let pick = systems.iter().position(|s| s == "ftrace").unwrap() as u8;
    let mut format = vec![pick];
    format.extend(std::fs::read(st.join("formats/events/ftrace/kernel_stack/format")).unwrap());
    let cpu0 = &std::fs::read(st.join("cpu0.raw")).unwrap()[..12288];
    let symbols = std::fs::read(st.join("symbols.json")).unwrap();
    let sep = iosleuth::fuzz_input::SEPARATOR;
    let parts: [&[u8]; 6] = [b"", b"", b"", &format, &symbols, cpu0];
    let data = parts.join(sep);
    let d = tempdir();
    let cap = capture_from(&data, d.path());
    let out = iosleuth().arg("dump").arg(&cap).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .filter(|l| l.contains("ftrace:kernel_stack => "))
            .count()
            > 10,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The capture_dir target's samples seed: perf records beside the
/// fixture's pages reach the sample decoder (the fixture's manifest then
/// names their layout); the same records cut in the middle of one give a
/// warning naming the file, and the samples before it are kept.
#[test]
fn the_samples_seed_reaches_the_sample_decoder_and_a_cut_record_is_said() {
    let oc = Path::new("tests/fixtures/oncpu-urandom.cap");
    let fx = Path::new("tests/fixtures/fsync-4k.cap");
    let samples = std::fs::read(oc.join("samples-cpu0.perf")).unwrap();
    let symbols = std::fs::read(oc.join("symbols.json")).unwrap();
    let cpu0 = &std::fs::read(fx.join("cpu0.raw")).unwrap()[..12288];
    let sep = iosleuth::fuzz_input::SEPARATOR;
    let count = |samples: &[u8]| -> (usize, String) {
        let parts: [&[u8]; 8] = [b"", b"", b"", b"", &symbols, cpu0, b"", samples];
        let d = tempdir();
        let cap = capture_from(&parts.join(sep), d.path());
        let out = iosleuth().args(["dump"]).arg(&cap).output().unwrap();
        let n = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.contains("perf:cpu-clock => "))
            .count();
        (n, String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (whole, _) = count(&samples);
    assert!(whole > 10, "{whole}");
    let (cut, err) = count(&samples[..samples.len() - 5]);
    assert_eq!(cut, whole - 1);
    assert!(
        err.contains("samples-cpu0.perf") && err.contains("truncated record"),
        "{err}"
    );
}

/// perf.data files whose event description claims billions of events, or
/// whose events' ids lie outside the file: the perf.data crate allocated
/// what they claimed and the process aborted. Refused by name now. And a
/// sample whose call chain's length overflows when multiplied (a panic in
/// builds that check overflow, such as the fuzzer's), and an MMAP2 record
/// whose build id claims more than 20 bytes (the crate asserts): skipped
/// records.
#[test]
fn perf_data_with_impossible_counts() {
    for name in [
        "perf_data-event-desc-huge-count.data",
        "perf_data-ids-outside-the-file.data",
        "perf_data-callchain-length-overflow.data",
        "perf_data-mmap2-build-id-too-long.data",
    ] {
        let path = Path::new("tests/fixtures/fuzz").join(name);
        assert_report_copes(&path, name);
    }
}
