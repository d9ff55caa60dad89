//! The `trace_dat_options` target's trace.dat: the input as the options
//! of a committed trace.dat v7 (the sections they point at, the CPUs'
//! data and its compression, the instances' buffers), so that the fuzzer
//! starts past the header, in the options and where they map the data.

use std::path::{Path, PathBuf};

const MAGIC: &[u8] = b"\x17\x08\x44tracing";
/// Options of a section are compressed (trace-cmd's TRACECMD_SEC_FL_COMPRESS).
const SECTION_COMPRESSED: u16 = 1;
/// The control byte's bit that asks for the options compressed.
const COMPRESS: u8 = 0x80;

/// The trace.dat v7 fixtures of `dir` (tests/fixtures/tracedat-*.v7*.dat),
/// in byte order of their names, as `scripts/fuzz` numbers its seeds.
pub fn fixtures(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            name.starts_with("tracedat-") && name.contains(".v7") && name.ends_with(".dat")
        })
        .collect();
    out.sort();
    out
}

/// Where the offset of the first options section is in a trace.dat v7
/// header, and the file's compression ("none", "zlib", "zstd").
fn header(file: &[u8]) -> Option<(usize, &str)> {
    let rest = file.strip_prefix(MAGIC)?;
    let cstr = |b: &[u8]| -> Option<usize> { b.iter().position(|&c| c == 0) };
    let version = cstr(rest)?;
    if &rest[..version] != b"7" {
        return None;
    }
    // Endianness, size of a long, page size.
    let mut at = MAGIC.len() + version + 1 + 2 + 4;
    let name_len = cstr(file.get(at..)?)?;
    let codec = std::str::from_utf8(&file[at..at + name_len]).ok()?;
    at += name_len + 1;
    at += cstr(file.get(at..)?)? + 1;
    file.get(at..at + 8)?;
    Some((at, codec))
}

/// The trace.dat of `data` over one of `fixtures` (trace.dat v7 files):
/// the first byte picks the fixture (its low 7 bits, modulo their number)
/// and, with its high bit, has the options section compressed with the
/// file's compression (zlib or zstd; none: stored); the rest is the
/// options (id u16, size u32, data; a DONE option ends them), written as
/// one options section after the fixture's bytes, which the header's
/// first-options offset then points at. The fixture's own sections stay
/// where their offsets say. None when there is no fixture or it is not a
/// trace.dat v7.
pub fn build(data: &[u8], fixtures: &[Vec<u8>]) -> Option<Vec<u8>> {
    let (control, options) = data.split_first().unwrap_or((&0, &[]));
    let fixture = fixtures.get(usize::from(control & !COMPRESS) % fixtures.len().max(1))?;
    let (first_options, codec) = header(fixture)?;
    let (flags, body) = match (control & COMPRESS != 0, codec) {
        (true, "zlib") => (SECTION_COMPRESSED, compressed(options, zlib(options))),
        (true, "zstd") => {
            let z = ruzstd::encoding::compress_to_vec(
                options,
                ruzstd::encoding::CompressionLevel::Fastest,
            );
            (SECTION_COMPRESSED, compressed(options, z))
        }
        _ => (0, options.to_vec()),
    };
    let mut out = fixture.clone();
    let at = out.len() as u64;
    out.extend_from_slice(&0u16.to_le_bytes()); // the options section's id
    out.extend_from_slice(&flags.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes()); // its description (a string id)
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(&body);
    out[first_options..first_options + 8].copy_from_slice(&at.to_le_bytes());
    Some(out)
}

/// A compressed section's data: compressed size, size, compressed bytes.
fn compressed(plain: &[u8], z: Vec<u8>) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + z.len());
    out.extend_from_slice(&(z.len() as u32).to_le_bytes());
    out.extend_from_slice(&(plain.len() as u32).to_le_bytes());
    out.extend_from_slice(&z);
    out
}

fn zlib(plain: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(plain).expect("writing to memory");
    e.finish().expect("writing to memory")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Event;

    fn events(file: &[u8]) -> Vec<Event> {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("trace.dat");
        std::fs::write(&path, file).unwrap();
        let mut src = crate::ingest::open_file(&path).unwrap();
        std::iter::from_fn(|| src.next_event()).collect()
    }

    /// A trace.dat v7's chain of (uncompressed) options sections as one
    /// list, the DONE options linking them left out but the last.
    fn options_of(file: &[u8]) -> Vec<u8> {
        let u64_at = |at: usize| u64::from_le_bytes(file[at..at + 8].try_into().unwrap());
        let mut next = u64_at(header(file).unwrap().0) as usize;
        let mut out = Vec::new();
        while next != 0 {
            assert_eq!(
                &file[next..next + 4],
                &[0, 0, 0, 0],
                "an uncompressed options section"
            );
            let size = u64_at(next + 8) as usize;
            let body = &file[next + 16..next + 16 + size];
            next = 0;
            let mut at = 0;
            while at < body.len() {
                let id = u16::from_le_bytes(body[at..at + 2].try_into().unwrap());
                let len = u32::from_le_bytes(body[at + 2..at + 6].try_into().unwrap()) as usize;
                if id == 0 {
                    next = u64::from_le_bytes(body[at + 6..at + 14].try_into().unwrap()) as usize;
                    break;
                }
                out.extend_from_slice(&body[at..at + 6 + len]);
                at += 6 + len;
            }
        }
        out.extend_from_slice(&[0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        out
    }

    /// Each fixture's options as the input (what `scripts/fuzz` seeds),
    /// stored or compressed, read as the fixture does: the fuzzer starts
    /// with every section and CPU found.
    #[test]
    fn the_fixtures_options_read_as_the_fixture() {
        let files: Vec<Vec<u8>> = fixtures(Path::new("tests/fixtures"))
            .iter()
            .map(|f| std::fs::read(f).unwrap())
            .collect();
        assert_eq!(files.len(), 5);
        for (i, fx) in files.iter().enumerate() {
            let want = events(fx);
            assert!(want.len() > 100, "fixture {i}: {} events", want.len());
            for control in [i as u8, i as u8 | COMPRESS] {
                let mut data = vec![control];
                data.extend(options_of(fx));
                let file = build(&data, &files).unwrap();
                assert_eq!(events(&file), want, "fixture {i}, control {control:#x}");
            }
        }
    }
}
