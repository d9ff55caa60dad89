//! gzip and zstd traces are read as if they were uncompressed, whatever
//! their names; a compressed stream cut short is analyzed up to the cut
//! with a warning; what cannot be read gives exit 2 naming the file.

use crate::common;

use common::*;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

const TEXT: &str = "tests/fixtures/loop-seqread-nomerges0.trace-cmd.txt";
const BLKTRACE: &str = "tests/fixtures/loop-seqread-nomerges0.blk";

/// The JSON report of `path`, with its name replaced so that reports of
/// the same trace under other names compare equal.
fn report_as(path: &Path) -> String {
    let json = json_report(&[path], &[]).to_string();
    json.replace(&*path.to_string_lossy(), "INPUT")
}

/// Compresses `from` into `dir` with the command-line tool, under a name
/// that does not say it is compressed.
fn compress_with(tool: &str, from: &str, dir: &Path) -> PathBuf {
    let to = dir.join(format!("trace-{tool}.dat"));
    let out = Command::new(tool)
        .arg("-c")
        .arg(from)
        .output()
        .unwrap_or_else(|e| {
            panic!("{tool} is needed for this test (scripts/test installs it): {e}")
        });
    assert!(
        out.status.success(),
        "{tool}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&to, out.stdout).unwrap();
    to
}

#[test]
fn gzip_and_zstd_files_give_the_report_of_the_plain_file() {
    let d = tempdir();
    for plain in [TEXT, BLKTRACE] {
        let want = report_as(Path::new(plain));
        for tool in ["gzip", "zstd"] {
            let packed = compress_with(tool, plain, d.path());
            assert_eq!(report_as(&packed), want, "{tool} of {plain}");
        }
    }
}

#[test]
fn a_gzipped_trace_dat_gives_the_report_of_the_plain_file() {
    let d = tempdir();
    for plain in [
        "tests/fixtures/tracedat-readahead.v6.dat",
        "tests/fixtures/tracedat-oncpu.v7-zstd.dat",
    ] {
        let want = report_as(Path::new(plain));
        for tool in ["gzip", "zstd"] {
            assert_eq!(
                report_as(&compress_with(tool, plain, d.path())),
                want,
                "{tool} of {plain}"
            );
        }
    }
}

#[test]
fn concatenated_gzip_members_read_as_one_trace() {
    let text = std::fs::read_to_string(TEXT).unwrap();
    let half = text[..text.len() / 2].rfind('\n').unwrap() + 1;
    let d = tempdir();
    let mut packed = Vec::new();
    for part in [&text[..half], &text[half..]] {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(part.as_bytes()).unwrap();
        packed.extend(e.finish().unwrap());
    }
    let p = d.path().join("two-members");
    std::fs::write(&p, packed).unwrap();
    assert_eq!(report_as(&p), report_as(Path::new(TEXT)));
}

/// zstd decodes a block at a time: a file cut short is read up to its
/// last whole block (128 KiB of data at most), with a warning.
#[test]
fn a_cut_zstd_file_is_read_up_to_its_last_whole_block_with_a_warning() {
    // Three blocks' worth of text.
    let plain = "tests/fixtures/loop-seqread-nomerges2.tracepoints.txt";
    let d = tempdir();
    let packed = std::fs::read(compress_with("zstd", plain, d.path())).unwrap();
    let cut = d.path().join("cut.zst");
    std::fs::write(&cut, &packed[..packed.len() * 9 / 10]).unwrap();
    let o = outcome(&["report", "--format", "json", cut.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr.contains("cut.zst: read error after line")
            && o.stderr
                .contains("zstd: the data ends inside block 3 of a frame (a file cut short?)"),
        "{}",
        o.stderr
    );
    assert!(!o.stderr.contains("Error {"), "{}", o.stderr);
    let whole = json_report(&[plain], &[]);
    let part: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    let events = |v: &serde_json::Value| v["inputs"][0]["events"].as_u64().unwrap();
    assert!(
        events(&part) > 0 && events(&part) < events(&whole),
        "{} vs {}",
        events(&part),
        events(&whole)
    );
    // Cut inside its first block, nothing is whole: exit 2, said plainly.
    std::fs::write(&cut, &packed[..200]).unwrap();
    let o = outcome(&["report", cut.to_str().unwrap()]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains("cut.zst: cannot read zstd data: zstd: the data ends inside block 1 of a frame (a file cut short?)"),
        "{}",
        o.stderr
    );
}

#[test]
fn a_cut_gzip_file_is_read_up_to_the_cut_with_a_warning() {
    let d = tempdir();
    let packed = std::fs::read(compress_with("gzip", TEXT, d.path())).unwrap();
    let cut = d.path().join("cut.gz");
    std::fs::write(&cut, &packed[..packed.len() / 2]).unwrap();
    let o = outcome(&["report", "--format", "json", cut.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr.contains("cut.gz: read error after line") && o.stderr.contains("deflate"),
        "{}",
        o.stderr
    );
    let whole: serde_json::Value = serde_json::from_str(&report_as(Path::new(TEXT))).unwrap();
    let part: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    let events = |v: &serde_json::Value| v["inputs"][0]["events"].as_u64().unwrap();
    assert!(
        events(&part) > 0 && events(&part) < events(&whole),
        "{} vs {}",
        events(&part),
        events(&whole)
    );
}

#[test]
fn unreadable_compressed_inputs_exit_2_naming_the_file() {
    let d = tempdir();
    let garbage = d.path().join("garbage.gz");
    std::fs::write(&garbage, b"\x1f\x8bnot really gzip at all").unwrap();
    let twice = d.path().join("twice.gz");
    let once = compress_with("gzip", TEXT, d.path());
    let out = Command::new("gzip").arg("-c").arg(&once).output().unwrap();
    std::fs::write(&twice, out.stdout).unwrap();
    let perf = d.path().join("perf.data.zst");
    let out = Command::new("zstd")
        .args(["-q", "-c", "tests/fixtures/perf-record-g.data"])
        .output()
        .unwrap();
    std::fs::write(&perf, out.stdout).unwrap();
    let empty = d.path().join("empty.zst");
    // What `printf '' | zstd -c` writes: one frame of nothing.
    let empty_frame = [
        0x28, 0xb5, 0x2f, 0xfd, 0x24, 0x00, 0x01, 0x00, 0x00, 0x99, 0xe9, 0xd8, 0x51,
    ];
    std::fs::write(&empty, empty_frame).unwrap();
    for (p, says) in [
        (&garbage, "garbage.gz: cannot read gzip data: invalid gzip header"),
        (&twice, "twice.gz: is gzip data compressed a second time"),
        (&perf, "perf.data.zst: is perf.data (perf record) compressed with zstd: iosleuth reads that format only uncompressed (decompress it first)"),
        (&empty, "empty.zst: the file is zstd data that decompresses to nothing"),
    ] {
        let o = outcome_bounded(iosleuth().arg("report").arg(p), None);
        assert_eq!(o.code, 2, "{}", o.stderr);
        assert!(o.stderr.contains(says), "{says}\n{}", o.stderr);
        assert!(!o.stderr.contains("panicked"), "{}", o.stderr);
    }
}
