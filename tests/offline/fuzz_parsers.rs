//! No input makes a parser or the analysis panic: arbitrary bytes, and real
//! captures with random damage (truncation, flipped bytes, spliced lines).

use iosleuth::testing::{analyze, BlockConfig, Filter};
use iosleuth::testing::{open_bytes, Merger};
use proptest::prelude::*;
use std::path::Path;

fn drain(name: &str, data: Vec<u8>) {
    // Detection may refuse the input; that is fine. Anything accepted must
    // be read to the end and analyzed without a panic.
    if let Ok(src) = open_bytes(Path::new(name), data) {
        let a = analyze(
            Merger::new(vec![src]),
            &Filter::default(),
            BlockConfig::default(),
        );
        let found = iosleuth::testing::diagnose(&a);
        let _ = iosleuth::testing::render_text(&a, &found);
        let _ = iosleuth::testing::render_json(&a, &found);
    }
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(Path::new("tests/fixtures").join(name)).unwrap()
}

fn damage(mut v: Vec<u8>, cut: usize, flips: &[(usize, u8)]) -> Vec<u8> {
    for &(at, x) in flips {
        if !v.is_empty() {
            let i = at % v.len();
            v[i] ^= x;
        }
    }
    let keep = if v.is_empty() { 0 } else { cut % (v.len() + 1) };
    v.truncate(keep);
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes(data in proptest::collection::vec(any::<u8>(), 0..4096)) {
        drain("random", data);
    }

    #[test]
    fn arbitrary_bytes_with_blktrace_magic(mut data in proptest::collection::vec(any::<u8>(), 48..2048), le in any::<bool>()) {
        let m: [u8; 4] = if le { 0x6561_7407u32.to_le_bytes() } else { 0x6561_7407u32.to_be_bytes() };
        data[..4].copy_from_slice(&m);
        drain("magic.blktrace.0", data);
    }

    #[test]
    fn damaged_gzip_and_zstd_traces(cut in any::<usize>(), flips in proptest::collection::vec((any::<usize>(), 1u8..=255), 0..8), zstd in any::<bool>()) {
        let text = fixture("loop-seqread-nomerges0.trace-cmd.txt");
        let packed = if zstd {
            ruzstd::encoding::compress_to_vec(&text[..], ruzstd::encoding::CompressionLevel::Fastest)
        } else {
            use std::io::Write;
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(&text).unwrap();
            e.finish().unwrap()
        };
        drain("damaged.gz", damage(packed, cut, &flips));
    }

    #[test]
    fn damaged_trace_dat(which in 0..4usize, cut in any::<usize>(), flips in proptest::collection::vec((any::<usize>(), 1u8..=255), 0..24)) {
        let name = ["v6", "v7", "v7-zlib", "v7-zstd"][which];
        let raw = fixture(&format!("tracedat-oncpu.{name}.dat"));
        // At least the 16 bytes of magic and version: the trace.dat reader,
        // not detection, is what this damages.
        let keep = (cut % (raw.len() + 1)).max(16);
        drain("damaged.dat", damage(raw, keep, &flips));
    }

    #[test]
    fn damaged_blk_tracer_capture(cut in any::<usize>(), flips in proptest::collection::vec((any::<usize>(), 1u8..=255), 0..40)) {
        drain("damaged.blk", damage(fixture("loop-seqread-nomerges0.blk"), cut, &flips));
    }

    #[test]
    fn damaged_tracepoint_text(cut in any::<usize>(), flips in proptest::collection::vec((any::<usize>(), 1u8..=255), 0..40)) {
        drain("damaged.txt", damage(fixture("loop-seqread-nomerges0.tracepoints.txt"), cut, &flips));
    }

    #[test]
    fn damaged_blkparse_and_perf_text(cut in any::<usize>(), flips in proptest::collection::vec((any::<usize>(), 1u8..=255), 0..20), which in 0..4usize) {
        let name = ["case1-perf-script.txt", "case1-btrace-standard.txt", "case1-btrace-snapshot.txt", "case4-ftrace-sched.txt"][which];
        drain(name, damage(fixture(&format!("seeds/{name}")), cut, &flips));
    }

    #[test]
    fn random_lines_in_trace_shapes(lines in proptest::collection::vec(
        (any::<u16>(), 0u32..4, "[a-z_/:]{0,12}", "[ -~]{0,60}", 0u8..4), 1..60)) {
        let mut text = String::new();
        for (pid, cpu, name, payload, shape) in lines {
            match shape {
                0 => text.push_str(&format!("  task-{pid} [{cpu:03}] ..... 1.{pid:06}: {name}: {payload}\n")),
                1 => text.push_str(&format!("task {pid} [{cpu:03}] 1.{pid:06}: block:{name}: {payload}\n")),
                2 => text.push_str(&format!("  8,0 {cpu} {pid} 0.{pid:09} {pid} {name} {payload}\n")),
                _ => text.push_str(&format!("  t-{pid} [{cpu:03}] d..1. 2.000001:   7,0 {payload}\n")),
            }
        }
        drain("lines.txt", text.into_bytes());
    }
}
