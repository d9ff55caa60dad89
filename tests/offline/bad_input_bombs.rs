//! Decompression and fan-out bombs: small inputs that decompress or fan
//! out to gigabytes (gzip and zstd files, trace.dat's compressed pages and
//! CPUs that share their data, perf.data's compressed records) are read
//! in bounded memory and time, and what stops them is said naming the file.

use crate::common;

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
    // What was read is analyzed, with a warning.
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

/// A gigabyte of blank lines is a scan, not a billion lines: read whole
/// in 0.34 s on this VM (it was 37 s at 29 MB/s, a line at a time). The
/// bound is generous for a loaded machine and still fails at 10x.
#[test]
fn a_gigabyte_of_blank_lines_is_read_in_seconds() {
    let d = tempdir();
    let member = gzip(&vec![b'\n'; 64 << 20]);
    let mut packed = gzip(first_lines(10).as_bytes());
    for _ in 0..16 {
        packed.extend(&member);
    }
    // And a tail of CRLF blank lines and the rest of the trace's lines:
    // read as if the blank lines were not there.
    packed.extend(gzip(&b"\r\n".repeat(1 << 20)));
    packed.extend(gzip(
        first_lines(40)
            .lines()
            .skip(10)
            .map(|l| format!("{l}\n"))
            .collect::<String>()
            .as_bytes(),
    ));
    let bomb = d.path().join("blank.gz");
    std::fs::write(&bomb, packed).unwrap();
    let head = d.path().join("head.txt");
    std::fs::write(&head, first_lines(40)).unwrap();
    let (plain, want) = report(&[head.to_str().unwrap()]);
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    let started = std::time::Instant::now();
    let (o, got) = report(&[bomb.to_str().unwrap()]);
    let took = started.elapsed();
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(took.as_secs_f64() < 3.0, "{took:?}");
    let want = events(&want.unwrap());
    assert!(want > 10);
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

// --- trace.dat: CPUs that share their data, compressed chunks ------------

const V6: &str = "tests/fixtures/tracedat-oncpu.v6.dat";
const V7: &str = "tests/fixtures/tracedat-oncpu.v7.dat";
const V7_ZSTD: &str = "tests/fixtures/tracedat-oncpu.v7-zstd.dat";

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}
/// Where the NUL after byte `at` is, plus one.
fn past_string(b: &[u8], at: usize) -> usize {
    at + b[at..].iter().position(|&c| c == 0).unwrap() + 1
}

/// A v6 trace.dat with its CPUs' (offset, size) replaced.
fn v6_with_cpus(cpus: &[(u64, u64)]) -> Vec<u8> {
    let mut b = std::fs::read(V6).unwrap();
    let fly = b.windows(10).position(|w| w == b"flyrecord\0").unwrap() + 10;
    for (i, (off, size)) in cpus.iter().enumerate() {
        let at = fly + 16 * i;
        b[at..at + 8].copy_from_slice(&off.to_le_bytes());
        b[at + 8..at + 16].copy_from_slice(&size.to_le_bytes());
    }
    b
}

/// A v7 trace.dat cut where its last options section (the one with the
/// BUFFER option, trace-cmd writes it last) starts, the start of that
/// option's data (the flyrecord offset, names and page size), and its
/// CPUs (cpu, offset, size).
struct V7 {
    before: Vec<u8>,
    head: Vec<u8>,
    cpus: Vec<(u32, u64, u64)>,
}

fn v7(path: &str) -> V7 {
    let b = std::fs::read(path).unwrap();
    let mut at = past_string(&b, 10) + 6;
    at = past_string(&b, past_string(&b, at));
    let mut next = u64_at(&b, at) as usize;
    loop {
        let size = u64_at(&b, next + 8) as usize;
        let data = &b[next + 16..next + 16 + size];
        let mut o = 0;
        loop {
            let (id, n) = (
                u16::from_le_bytes([data[o], data[o + 1]]),
                u32_at(data, o + 2) as usize,
            );
            let d = &data[o + 6..o + 6 + n];
            if id == 3 {
                let head = past_string(d, past_string(d, 8)) + 4;
                let cpus = (0..u32_at(d, head) as usize)
                    .map(|i| {
                        let c = head + 4 + 20 * i;
                        (u32_at(d, c), u64_at(d, c + 4), u64_at(d, c + 12))
                    })
                    .collect();
                return V7 {
                    before: b[..next].to_vec(),
                    head: d[..head].to_vec(),
                    cpus,
                };
            }
            if id == 0 {
                next = u64_at(d, 0) as usize;
                break;
            }
            o += 6 + n;
        }
    }
}

impl V7 {
    /// The file with these CPUs, then `after` (at `self.data_at(n)` for
    /// `n` CPUs).
    fn with_cpus(&self, cpus: &[(u32, u64, u64)], after: &[u8]) -> Vec<u8> {
        let mut b = self.before.clone();
        b.extend(buffer_options(&self.head, cpus));
        b.extend(after);
        b
    }

    /// Where what follows the options of `n` CPUs starts.
    fn data_at(&self, n: usize) -> u64 {
        (self.before.len() + buffer_options(&self.head, &vec![(0, 0, 0); n]).len()) as u64
    }
}

/// An options section with one BUFFER option (`head`, then the CPUs
/// (cpu, offset, size)) and the DONE option that ends the chain.
fn buffer_options(head: &[u8], cpus: &[(u32, u64, u64)]) -> Vec<u8> {
    let mut buffer = head.to_vec();
    buffer.extend((cpus.len() as u32).to_le_bytes());
    for (cpu, off, size) in cpus {
        buffer.extend(cpu.to_le_bytes());
        buffer.extend(off.to_le_bytes());
        buffer.extend(size.to_le_bytes());
    }
    let mut options = 3u16.to_le_bytes().to_vec();
    options.extend((buffer.len() as u32).to_le_bytes());
    options.extend(buffer);
    options.extend(0u16.to_le_bytes());
    options.extend(8u32.to_le_bytes());
    options.extend(0u64.to_le_bytes());
    let mut section = 0u16.to_le_bytes().to_vec();
    section.extend(0u16.to_le_bytes());
    section.extend(0u32.to_le_bytes());
    section.extend((options.len() as u64).to_le_bytes());
    section.extend(options);
    section
}

/// `bytes` written as `name` in `dir`, reported (JSON) with `extra`.
fn report_bytes(dir: &Path, name: &str, bytes: &[u8], extra: &[&str]) -> (Outcome, String) {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    let mut args = extra.to_vec();
    args.push(p.to_str().unwrap());
    let (o, _) = report(&args);
    (o, p.display().to_string())
}

#[test]
fn trace_dat_cpus_on_the_same_bytes_are_refused() {
    let d = tempdir();
    // v6: CPU 1 reads CPU 0's pages (every event of CPU 0 came twice).
    let shared = v6_with_cpus(&[(8192, 12288), (8192, 12288)]);
    let (o, p) = report_bytes(d.path(), "v6.dat", &shared, &[]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!("{p}: CPU 0's data (bytes 8192..20480) and CPU 1's (bytes 8192..20480) overlap: every event there would be read twice")),
        "{}",
        o.stderr
    );
    // v7: CPU 1's data starts inside CPU 0's.
    let b = v7(V7).with_cpus(&[(0, 8192, 12288), (1, 12288, 12288)], b"");
    let (o, p) = report_bytes(d.path(), "v7.dat", &b, &[]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!(
            "{p}: CPU 0's data (bytes 8192..20480) and CPU 1's (bytes 12288..24576) overlap"
        )),
        "{}",
        o.stderr
    );
}

#[test]
fn trace_dat_cpus_on_one_compressed_chunk_are_refused() {
    // 65,536 CPUs on CPU 0's chunk (12 KiB of pages each: 768 MiB).
    let f = v7(V7_ZSTD);
    let (_, off, size) = f.cpus[0];
    let cpus: Vec<(u32, u64, u64)> = (0..65536).map(|c| (c, off, size)).collect();
    let d = tempdir();
    let (o, p) = report_bytes(d.path(), "fan.dat", &f.with_cpus(&cpus, b""), &[]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    // The chunk count before the chunks is not in trace-cmd's size.
    let (from, to) = (off, off + size + 4);
    assert!(
        o.stderr.contains(&format!(
            "{p}: CPU 0's data (bytes {from}..{to}) and CPU 1's (bytes {from}..{to}) overlap"
        )),
        "{}",
        o.stderr
    );
}

/// The fixture's first page of CPU 0 (decompressed).
fn first_page_of_cpu0() -> Vec<u8> {
    let b = std::fs::read(V7_ZSTD).unwrap();
    let (_, off, _) = v7(V7_ZSTD).cpus[0];
    let chunk = off as usize + 4;
    let zsize = u32_at(&b, chunk) as usize;
    let mut r = ruzstd::decoding::StreamingDecoder::new(&b[chunk + 8..chunk + 8 + zsize]).unwrap();
    let mut pages = Vec::new();
    std::io::Read::read_to_end(&mut r, &mut pages).unwrap();
    pages.truncate(4096);
    pages
}

/// A v7-zstd trace.dat of `n` CPUs, each one chunk: CPU 0's first page,
/// then `zero_blocks` × 128 KiB of zeros (4 bytes each). Returns the
/// file and each chunk's declared size.
fn chunky_trace_dat(n: u32, zero_blocks: usize) -> (Vec<u8>, u64, Vec<(u32, u64, u64)>) {
    let page = first_page_of_cpu0();
    let mut frame = ZSTD_MAGIC.to_vec();
    frame.extend([0x00, 7 << 3]);
    let last = (zero_blocks == 0) as u32;
    frame.extend(&(last | (page.len() as u32) << 3).to_le_bytes()[..3]);
    frame.extend(&page);
    if zero_blocks > 0 {
        frame.extend(&rle_frame(0, zero_blocks)[6..]);
    }
    let size = page.len() as u64 + (zero_blocks as u64) * (128 << 10);
    let f = v7(V7_ZSTD);
    let at = f.data_at(n as usize);
    let region = 4 + 8 + frame.len() as u64;
    let cpus: Vec<(u32, u64, u64)> = (0..n)
        .map(|c| (c, at + region * c as u64, region - 4))
        .collect();
    let mut data = Vec::new();
    for _ in 0..n {
        data.extend(1u32.to_le_bytes());
        data.extend((frame.len() as u32).to_le_bytes());
        data.extend((size as u32).to_le_bytes());
        data.extend(&frame);
    }
    (f.with_cpus(&cpus, &data), size, cpus)
}

#[test]
fn trace_dat_chunks_held_at_once_are_bounded() {
    let d = tempdir();
    // CPU 0's first page alone: the events one CPU gives.
    let (one, _, _) = chunky_trace_dat(1, 0);
    let p = d.path().join("one.dat");
    std::fs::write(&p, one).unwrap();
    let (o, json) = report(&[p.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let one_page = events(&json.unwrap());
    assert!(one_page > 0);
    // 16 CPUs, each a page of events then 64 MiB of zeros from a 2 KB
    // frame: each CPU holds its chunk while its events wait to be merged,
    // 1 GiB at once.
    let (b, size, cpus) = chunky_trace_dat(16, 512);
    let p = d.path().join("held.dat");
    std::fs::write(&p, b).unwrap();
    let (o, json) = report(&[p.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    // CPU 0's chunk is read; with the second it would be 128 MiB and more.
    assert!(
        o.stderr.contains(&format!("{}: CPU 1's compressed chunk at byte {} would decompress to {size} bytes while the other CPUs' chunks hold {size}, more than the 128 MiB iosleuth holds at once (and so would 14 other CPUs' chunks): their events from there on are left out", p.display(), cpus[1].1 + 4)),
        "{}",
        o.stderr
    );
    assert_eq!(events(&json.unwrap()), one_page);
    // --max-input below one chunk: nothing is decompressed.
    let (o, _) = report(&["--max-input", "32M", p.to_str().unwrap()]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!("{}: stopped at --max-input (32 MiB): its zstd data decompresses to more; the rest is not in this report", p.display())),
        "{}",
        o.stderr
    );
}

/// `head`, then `zeros` MiB of zeros, gzipped (members of 64 MiB).
fn gzip_then_zeros(head: &[u8], zeros: usize) -> Vec<u8> {
    let member = gzip(&vec![0u8; 64 << 20]);
    let mut packed = gzip(head);
    for _ in 0..zeros / 64 {
        packed.extend(&member);
    }
    packed
}

#[test]
fn a_compressed_trace_dat_is_checked_before_it_is_read_into_memory() {
    let d = tempdir();
    // A damaged header, then 640 MiB: refused after the first MiB, not
    // read into memory up to 1 GiB first.
    let mut head = std::fs::read(V6).unwrap();
    head[10] = b'9';
    let (o, p) = report_bytes(
        d.path(),
        "bad.dat.gz",
        &gzip_then_zeros(&head[..4096], 640),
        &[],
    );
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr
            .contains(&format!("{p}: trace.dat version \"9\" is not supported")),
        "{}",
        o.stderr
    );
    // Whole metadata whose CPU 1 lies 3 GiB in: refused before its data
    // is read.
    let far = v6_with_cpus(&[(8192, 12288), (3 << 30, 12288)]);
    let (o, p) = report_bytes(d.path(), "far.dat.gz", &gzip_then_zeros(&far, 640), &[]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!("{p}: its CPUs' data, to byte {}, runs past the 1024 MiB of a trace.dat iosleuth reads into memory when it is not a file it can seek in (a compressed file, standard input): save it, decompressed, to a file and give its path", (3u64 << 30) + 12288)),
        "{}",
        o.stderr
    );
    // What it says is read, no more: the fixture then 640 MiB of zeros
    // gives the report of the fixture.
    let (o, p) = report_bytes(
        d.path(),
        "padded.dat.gz",
        &gzip_then_zeros(&std::fs::read(V6).unwrap(), 640),
        &[],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let got: serde_json::Value = serde_json::from_str(&o.stdout.replace(&p, "INPUT")).unwrap();
    assert_eq!(events(&got), 234);
    let want: serde_json::Value = serde_json::from_str(&report_as(Path::new(V6))).unwrap();
    assert!(got == want, "not the report of {V6}");
}

// --- perf.data: compressed records -----------------------------------------

const PERF: &str = "tests/fixtures/perf-record-g.data";

/// The fixture with `records` added at the end of its data section (its
/// feature sections, which follow the data, moved after them).
fn perf_with_records(records: &[u8]) -> Vec<u8> {
    let b = std::fs::read(PERF).unwrap();
    let (start, size) = (u64_at(&b, 40), u64_at(&b, 48));
    let end = (start + size) as usize;
    let n = records.len() as u64;
    let mut out = b[..end].to_vec();
    out[48..56].copy_from_slice(&(size + n).to_le_bytes());
    out.extend(records);
    let mut rest = b[end..].to_vec();
    let features = (0..256).filter(|i| b[72 + i / 8] & (1 << (i % 8)) != 0);
    for (i, _) in features.enumerate() {
        let at = 16 * i;
        let moved = u64_at(&rest, at) + n;
        rest[at..at + 8].copy_from_slice(&moved.to_le_bytes());
    }
    out.extend(rest);
    out
}

/// Where the fixture's data section ends (the first record added).
fn perf_data_end() -> u64 {
    let b = std::fs::read(PERF).unwrap();
    u64_at(&b, 40) + u64_at(&b, 48)
}

fn perf_record(kind: u32, body: &[u8]) -> Vec<u8> {
    let size = u16::try_from(8 + body.len()).unwrap();
    let mut r = kind.to_le_bytes().to_vec();
    r.extend(0u16.to_le_bytes());
    r.extend(size.to_le_bytes());
    r.extend(body);
    r
}

const PERF_RECORD_COMPRESSED: u32 = 81;
const PERF_RECORD_FINISHED_ROUND: u32 = 68;

/// A zstd frame of `n` bytes of `record` (a perf record) over and over.
fn zstd_of_records(record: &[u8], n: usize) -> Vec<u8> {
    let data: Vec<u8> = record.iter().copied().cycle().take(n).collect();
    ruzstd::encoding::compress_to_vec(&data[..], ruzstd::encoding::CompressionLevel::Fastest)
}

#[test]
fn a_perf_data_compressed_record_that_inflates_to_gigabytes_is_refused() {
    // 48 KB of zstd, 1.5 GiB of zeros: the crate decompressed it whole.
    let frame = rle_frame(0, 12288);
    let b = perf_with_records(&perf_record(PERF_RECORD_COMPRESSED, &frame));
    let d = tempdir();
    let (o, p) = report_bytes(d.path(), "bomb.data", &b, &[]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    let says = format!(
        "{p}: not read: its compressed record at byte {} ({} bytes of zstd) decompresses to more than 32 MiB, which perf never writes",
        perf_data_end(),
        frame.len()
    );
    assert!(o.stderr.contains(&says), "{says}\n{}", o.stderr);
}

#[test]
fn perf_data_compressed_records_held_in_one_round_are_bounded() {
    // Three records of 31 MiB of 8-byte records each, no FINISHED_ROUND
    // between them: 12 million records the crate sorts in memory.
    let tiny = perf_record(100, b"");
    let frame = zstd_of_records(&tiny, 31 << 20);
    let record = perf_record(PERF_RECORD_COMPRESSED, &frame);
    let b = perf_with_records(&record.repeat(3));
    let d = tempdir();
    let (o, p) = report_bytes(d.path(), "round.data", &b, &[]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    let from = perf_data_end();
    let says = format!(
        "{p}: not read: its compressed records from byte {from} to byte {} decompress to {} records that the perf.data reader would hold in memory at once (no FINISHED_ROUND between them), more than 1.0 GiB",
        from + 2 * record.len() as u64,
        3 * (31 << 20) / 8
    );
    assert!(o.stderr.contains(&says), "{says}\n{}", o.stderr);
    // --max-input stops the reading at the record that crosses it, as in
    // other inputs: the records before it are read, and it is said.
    let (o, p) = report_bytes(d.path(), "round.data", &b, &["--max-input", "16M"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let says =
        format!("{p}: stopped at --max-input (16 MiB): its zstd data decompresses to more (");
    assert!(o.stderr.contains(&says), "{says}\n{}", o.stderr);
    assert!(
        o.stderr.contains("; the rest is not in this report"),
        "{}",
        o.stderr
    );
    let (_, json) = report(&["--max-input", "16M", &p]);
    let (_, plain) = report(&[PERF]);
    assert_eq!(events(&json.unwrap()), events(&plain.unwrap()));
}

/// A zstd frame of `n` perf records of `size` bytes (of type 100, the
/// rest zeros): a raw block of each header, an RLE block of its zeros.
fn zstd_of_big_records(size: u16, n: usize) -> Vec<u8> {
    let mut f = ZSTD_MAGIC.to_vec();
    f.extend([0x00, 7 << 3]);
    let header = perf_record(100, &vec![0; size as usize - 8]);
    for i in 0..n {
        f.extend(&(8u32 << 3).to_le_bytes()[..3]);
        f.extend(&header[..8]);
        let last = (i + 1 == n) as u32;
        f.extend(&(last | 1 << 1 | (u32::from(size) - 8) << 3).to_le_bytes()[..3]);
        f.push(0);
    }
    f
}

#[test]
fn perf_data_compressed_records_are_read_with_their_ratio_said() {
    // Three rounds of 500 records of 64 KiB from 7.5 KB each: read (the
    // samples before them are the fixture's), and their ratio said.
    let frame = zstd_of_big_records(65528, 500);
    let mut records = Vec::new();
    for _ in 0..3 {
        records.extend(perf_record(PERF_RECORD_COMPRESSED, &frame));
        records.extend(perf_record(PERF_RECORD_FINISHED_ROUND, b""));
    }
    let d = tempdir();
    let (o, p) = report_bytes(d.path(), "ratio.data", &perf_with_records(&records), &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let ratio = 500 * 65528 / frame.len();
    let says = format!(
        "{p}: its zstd data decompresses {ratio}x (22 KiB -> 94 MiB): a decompression bomb?"
    );
    assert!(o.stderr.contains(&says), "{says}\n{}", o.stderr);
    let (_, json) = report(&[&p]);
    let (_, plain) = report(&[PERF]);
    assert_eq!(events(&json.unwrap()), events(&plain.unwrap()));
}
