//! Decompression and fan-out bombs: small inputs that decompress or fan
//! out to gigabytes (gzip and zstd files) are read in bounded memory and
//! time, and what stops them is said naming the file.

mod common;

use common::*;
use std::io::Write;
use std::path::Path;

const TEXT: &str = "tests/fixtures/loop-seqread-nomerges0.trace-cmd.txt";

/// `iosleuth report --format json ARGS` under `outcome_bounded`.
fn report(args: &[&str]) -> (Outcome, Option<serde_json::Value>) {
    let o = outcome_bounded(
        iosleuth().args(["report", "--format", "json"]).args(args),
        None,
    );
    let json = serde_json::from_str(&o.stdout).ok();
    (o, json)
}

/// The JSON report of `path`, its name replaced so that reports of the
/// same trace under other names compare equal.
fn report_as(path: &Path) -> String {
    let (o, json) = report(&[path.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    json.unwrap()
        .to_string()
        .replace(&*path.to_string_lossy(), "INPUT")
}

fn events(json: &serde_json::Value) -> u64 {
    json["inputs"][0]["events"].as_u64().unwrap()
}

// --- zstd frames, written by hand (RFC 8878) -----------------------------

const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// A frame of `data` (at most 255 bytes) in one raw block.
fn raw_frame(data: &[u8]) -> Vec<u8> {
    assert!(data.len() < 256);
    let block = 1 | (data.len() as u32) << 3;
    let mut f = ZSTD_MAGIC.to_vec();
    f.extend([0x20, data.len() as u8]);
    f.extend(&block.to_le_bytes()[..3]);
    f.extend(data);
    f
}

/// A frame of `blocks` × 128 KiB of `byte`: 4 bytes a block (RLE blocks
/// in a 128 KiB window), 32768 times smaller than what it holds.
fn rle_frame(byte: u8, blocks: usize) -> Vec<u8> {
    let mut f = ZSTD_MAGIC.to_vec();
    f.extend([0x00, 7 << 3]);
    for i in 0..blocks {
        let last = (i + 1 == blocks) as u32;
        let header = last | 1 << 1 | (128 << 10) << 3;
        f.extend(&header.to_le_bytes()[..3]);
        f.push(byte);
    }
    f
}

/// A skippable frame, as `pzstd` writes one first.
fn skippable_frame(data: &[u8]) -> Vec<u8> {
    let mut f = 0x184D_2A50u32.to_le_bytes().to_vec();
    f.extend((data.len() as u32).to_le_bytes());
    f.extend(data);
    f
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// The first `n` lines of the text fixture.
fn first_lines(n: usize) -> String {
    let text = std::fs::read_to_string(TEXT).unwrap();
    text.lines().take(n).map(|l| format!("{l}\n")).collect()
}

#[test]
fn a_zstd_stream_of_200k_tiny_frames_is_read_in_linear_time() {
    // Every byte of the trace its own frame, each followed by an empty
    // one: 239,046 frames (2.2 MB). Each frame used to be chained onto
    // the reader of the last: quadratic, minutes.
    let text = std::fs::read(TEXT).unwrap();
    let mut packed = Vec::new();
    for b in &text {
        packed.extend(raw_frame(std::slice::from_ref(b)));
        packed.extend(raw_frame(b""));
    }
    let d = tempdir();
    let p = d.path().join("frames.zst");
    std::fs::write(&p, packed).unwrap();
    let started = std::time::Instant::now();
    let got = report_as(&p);
    assert!(started.elapsed().as_secs() < 15, "{:?}", started.elapsed());
    let want = report_as(Path::new(TEXT));
    assert_eq!(got, want);
    let json: serde_json::Value = serde_json::from_str(&got).unwrap();
    assert_eq!(events(&json), 1064);
}

#[test]
fn a_skippable_zstd_frame_first_is_skipped_as_pzstd_readers_do() {
    let text = std::fs::read(TEXT).unwrap();
    let mut packed = skippable_frame(&[0x5a; 12]);
    packed.extend(ruzstd::encoding::compress_to_vec(
        &text[..],
        ruzstd::encoding::CompressionLevel::Fastest,
    ));
    packed.extend(skippable_frame(b""));
    let d = tempdir();
    let p = d.path().join("pzstd.zst");
    std::fs::write(&p, packed).unwrap();
    assert_eq!(report_as(&p), report_as(Path::new(TEXT)));
}

/// Ten lines of trace, then 4 GiB of newlines in 64 gzip members of
/// 64 MiB (19 MB in all).
fn gzip_newline_bomb(dir: &Path) -> std::path::PathBuf {
    let member = gzip(&vec![b'\n'; 64 << 20]);
    let mut packed = gzip(first_lines(10).as_bytes());
    for _ in 0..64 {
        packed.extend(&member);
    }
    let p = dir.join("bomb.gz");
    std::fs::write(&p, packed).unwrap();
    p
}

#[test]
fn max_input_stops_a_gzip_bomb_and_says_so() {
    let d = tempdir();
    let bomb = gzip_newline_bomb(d.path());
    let head = d.path().join("head.txt");
    std::fs::write(&head, first_lines(10)).unwrap();
    let (plain, want) = report(&[head.to_str().unwrap()]);
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    let (o, got) = report(&["--max-input", "10M", bomb.to_str().unwrap()]);
    // What was read is analysed, with a warning.
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!(
            "{}: stopped at --max-input (10 MiB): its gzip data decompresses to more (",
            bomb.display()
        )) && o.stderr.contains("a decompression bomb?"),
        "{}",
        o.stderr
    );
    let want = events(&want.unwrap());
    assert!(want > 0);
    assert_eq!(events(&got.unwrap()), want);
}

#[test]
fn max_input_takes_sizes_with_units_only() {
    for bad in ["10X", "0", "1.5G", "12 parsecs"] {
        let o = outcome_bounded(iosleuth().args(["report", "--max-input", bad, TEXT]), None);
        assert_eq!(o.code, 2, "{bad}: {}", o.stderr);
        assert!(
            o.stderr.contains("invalid value") && o.stderr.contains("--max-input"),
            "{bad}: {}",
            o.stderr
        );
    }
}

#[test]
fn a_zstd_bomb_is_warned_about_with_its_ratio() {
    // Three lines of trace (two events), then 96 MiB of lines of spaces
    // from 15 KB.
    let head = first_lines(3);
    let mut packed: Vec<u8> = head.as_bytes().chunks(200).flat_map(raw_frame).collect();
    for _ in 0..768 {
        packed.extend(rle_frame(b' ', 1));
        packed.extend(raw_frame(b"\n"));
    }
    let inflated = head.len() + 768 * ((128 << 10) + 1);
    let d = tempdir();
    let p = d.path().join("bomb.zst");
    std::fs::write(&p, &packed).unwrap();
    let (o, json) = report(&[p.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(events(&json.unwrap()), 2);
    let says = format!(
        "{}: its zstd data decompresses {}x (15 KiB -> 96 MiB): a decompression bomb? --max-input limits what is read",
        p.display(),
        inflated / packed.len()
    );
    assert!(o.stderr.contains(&says), "{says}\n{}", o.stderr);
}
