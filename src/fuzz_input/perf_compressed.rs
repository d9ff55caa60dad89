//! The `perf_compressed` target's perf.data: the input's parts as the
//! payloads of `PERF_RECORD_COMPRESSED` records (zstd), as `perf record -z`
//! writes them, inside the header, attributes and feature sections of a
//! committed perf.data, so that the fuzzer starts past the header checks,
//! in the decompression and the records it yields.

use super::split;

/// At most this many compressed rounds in one input.
pub const MAX_ROUNDS: usize = 8;
/// The first bytes of a zstd frame and of a skippable one (its low
/// nibble varies): a part that starts so is a payload as it is.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
const SKIPPABLE_MAGIC: [u8; 3] = [0x2a, 0x4d, 0x18];

const HEADER_LEN: usize = 104;
const RECORD_HEADER: usize = 8;
const PERF_RECORD_FINISHED_ROUND: u32 = 68;
const PERF_RECORD_COMPRESSED: u32 = 81;
/// perf's `HEADER_COMPRESSED` feature bit.
const FEATURE_COMPRESSED: usize = 27;
/// A record's size is a u16.
const MAX_PAYLOAD: usize = u16::MAX as usize - RECORD_HEADER;
/// The mmap buffer perf records with by default (129 pages), which the
/// COMPRESSED feature states.
const MMAP_LEN: u32 = 129 * 4096;

/// Whether a part is a zstd payload already, rather than records to
/// compress.
fn is_zstd(part: &[u8]) -> bool {
    part.starts_with(&ZSTD_MAGIC) || part.get(1..4) == Some(&SKIPPABLE_MAGIC[..])
}

/// The perf.data of `data` over the perf.data `fixture`: the data section
/// is one round per part (up to [`MAX_ROUNDS`]; empty parts at the end
/// make none), each its part's payload in `PERF_RECORD_COMPRESSED`
/// records of at most 64 KiB, then a `FINISHED_ROUND` record, as perf
/// writes them. A part that starts with a zstd or skippable frame's magic
/// is the payload; any other is records, compressed here. The fixture's
/// feature sections follow, with `HEADER_COMPRESSED` added (zstd, perf's
/// default mmap size). None when the fixture is not a perf.data whose data
/// section is last before its features.
pub fn build(data: &[u8], fixture: &[u8]) -> Option<Vec<u8>> {
    let mut parts = split(data, MAX_ROUNDS);
    while parts.len() > 1 && parts.last().is_some_and(|p| p.is_empty()) {
        parts.pop();
    }
    let u64_at = |at: usize| -> Option<u64> {
        Some(u64::from_le_bytes(
            fixture.get(at..at + 8)?.try_into().ok()?,
        ))
    };
    if !fixture.starts_with(b"PERFILE2") || u64_at(8)? != HEADER_LEN as u64 {
        return None;
    }
    let data_at = usize::try_from(u64_at(40)?).ok()?;
    let data_end = data_at.checked_add(usize::try_from(u64_at(48)?).ok()?)?;
    // The attributes (and event types) must come before the data.
    for at in [24, 56] {
        if u64_at(at)?.checked_add(u64_at(at + 8)?)? > data_at as u64 {
            return None;
        }
    }
    let mut flags = [u64_at(72)?, u64_at(80)?, u64_at(88)?, u64_at(96)?];
    // The feature sections: (bit, bytes), in bit order.
    let mut features: Vec<(usize, &[u8])> = Vec::new();
    for bit in (0..256).filter(|b| flags[b / 64] >> (b % 64) & 1 == 1) {
        let entry = data_end + 16 * features.len();
        let (at, size) = (u64_at(entry)? as usize, u64_at(entry + 8)? as usize);
        features.push((bit, fixture.get(at..at.checked_add(size)?)?));
    }
    let compressed_info = compression_info();
    if flags[FEATURE_COMPRESSED / 64] >> (FEATURE_COMPRESSED % 64) & 1 == 0 {
        flags[FEATURE_COMPRESSED / 64] |= 1 << (FEATURE_COMPRESSED % 64);
        let at = features.partition_point(|(b, _)| *b < FEATURE_COMPRESSED);
        features.insert(at, (FEATURE_COMPRESSED, &compressed_info));
    }

    let mut out = fixture.get(..data_at)?.to_vec();
    for part in &parts {
        let compressed;
        let payload = match is_zstd(part) {
            true => *part,
            false => {
                compressed = ruzstd::encoding::compress_to_vec(
                    *part,
                    ruzstd::encoding::CompressionLevel::Fastest,
                );
                &compressed[..]
            }
        };
        for chunk in payload.chunks(MAX_PAYLOAD) {
            record_header(
                &mut out,
                PERF_RECORD_COMPRESSED,
                RECORD_HEADER + chunk.len(),
            );
            out.extend_from_slice(chunk);
        }
        record_header(&mut out, PERF_RECORD_FINISHED_ROUND, RECORD_HEADER);
    }
    let new_end = out.len();
    let mut at = (new_end + 16 * features.len()) as u64;
    for (_, bytes) in &features {
        out.extend_from_slice(&at.to_le_bytes());
        out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        at += bytes.len() as u64;
    }
    for (_, bytes) in &features {
        out.extend_from_slice(bytes);
    }
    out[48..56].copy_from_slice(&((new_end - data_at) as u64).to_le_bytes());
    for (i, f) in flags.iter().enumerate() {
        out[72 + 8 * i..80 + 8 * i].copy_from_slice(&f.to_le_bytes());
    }
    Some(out)
}

fn record_header(out: &mut Vec<u8>, kind: u32, size: usize) {
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&(size as u16).to_le_bytes());
}

/// `HEADER_COMPRESSED`: version, type (1: zstd), level, ratio, mmap size.
fn compression_info() -> Vec<u8> {
    [1u32, 1, 1, 1, MMAP_LEN]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Event;
    use std::path::Path;

    fn events(file: &[u8]) -> Vec<Event> {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("perf.data");
        std::fs::write(&path, file).unwrap();
        let mut src = crate::ingest::open_file(&path).unwrap();
        std::iter::from_fn(|| src.next_event()).collect()
    }

    /// The fixture's data section cut anywhere into parts (what
    /// `scripts/fuzz` seeds), compressed here or by zstd beforehand, reads
    /// as the fixture does: every sample comes out of the decompression.
    #[test]
    fn the_fixtures_records_compressed_read_as_the_fixture() {
        let fx = std::fs::read(Path::new("tests/fixtures/perf-urandom.data")).unwrap();
        let u64_at = |at: usize| u64::from_le_bytes(fx[at..at + 8].try_into().unwrap()) as usize;
        let records = &fx[u64_at(40)..u64_at(40) + u64_at(48)];
        let want = events(&fx);
        let stacks = want.iter().filter(|e| matches!(e, Event::Stack(_))).count();
        assert!(stacks > 100, "{stacks} stacks");

        let (a, b) = records.split_at(5000);
        let (b, c) = b.split_at(7001);
        let sep = super::super::SEPARATOR;
        let plain = [a, b, c].join(sep);
        let file = build(&plain, &fx).unwrap();
        assert!(file.len() < fx.len(), "compressed: {} bytes", file.len());
        assert_eq!(events(&file), want);

        let zstd = |p: &[u8]| {
            ruzstd::encoding::compress_to_vec(p, ruzstd::encoding::CompressionLevel::Fastest)
        };
        let frames = [zstd(a), zstd(b), zstd(c)].join(sep);
        assert_eq!(events(&build(&frames, &fx).unwrap()), want);
    }
}
