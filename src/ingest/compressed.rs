//! Compressed inputs: a gzip or zstd stream is recognised by its magic
//! bytes (never by the file's name) and decompressed while it is read, so
//! memory stays flat as for any other input. What one input decompresses
//! to is measured ([`Meter`]): it stops at `--max-input`, and a ratio
//! past [`BOMB_RATIO`] is said, as decompression bombs have.

use super::source::{Position, Source, SourceStats};
use super::zstd_frames::ZstdFrames;
use crate::model::Event;
use std::io::{self, Read};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// The compressions iosleuth reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    Gzip,
    Zstd,
}

impl Codec {
    pub fn name(self) -> &'static str {
        match self {
            Codec::Gzip => "gzip",
            Codec::Zstd => "zstd",
        }
    }
}

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// zstd's skippable frames (`pzstd` writes one first): any user data,
/// its length after the magic.
pub(super) fn is_skippable(magic: [u8; 4]) -> bool {
    (0x184D_2A50..=0x184D_2A5F).contains(&u32::from_le_bytes(magic))
}

/// The compression the stream starts with, if any.
pub fn detect(head: &[u8]) -> Option<Codec> {
    if head.starts_with(&GZIP_MAGIC) {
        Some(Codec::Gzip)
    } else if head.starts_with(&ZSTD_MAGIC)
        || head
            .get(..4)
            .is_some_and(|m| is_skippable(m.try_into().unwrap()))
    {
        Some(Codec::Zstd)
    } else {
        None
    }
}

/// `--max-input`'s default: more than any trace iosleuth was run on,
/// less than what a bomb would have it read for hours.
pub const DEFAULT_MAX_INPUT: u64 = 64 << 30;

static MAX_INPUT: AtomicU64 = AtomicU64::new(DEFAULT_MAX_INPUT);

/// Sets `--max-input` for the whole run.
pub fn set_max_input(bytes: u64) {
    MAX_INPUT.store(bytes, Relaxed);
}

/// The most bytes iosleuth decompresses from any one input.
pub fn max_input() -> u64 {
    MAX_INPUT.load(Relaxed)
}

/// Data that decompresses to this many times its size is said: traces
/// compress 5 to 20 times, zstd at its best 32768 times (a bomb).
pub const BOMB_RATIO: u64 = 100;
/// ... once it is this large: a small file of repeated lines is no bomb.
const BOMB_WORTH_SAYING: u64 = 64 << 20;

/// What one input's compressed data decompressed to so far, against
/// `--max-input`. Shared by the decompressor and the source that says it.
#[derive(Debug)]
pub struct Meter {
    /// What is compressed, for messages: "gzip data", "compressed records".
    what: String,
    limit: u64,
    compressed: AtomicU64,
    inflated: AtomicU64,
    /// The limit stopped the reading.
    stopped: AtomicBool,
}

impl Meter {
    pub fn new(what: impl Into<String>) -> Meter {
        Meter {
            what: what.into(),
            limit: max_input(),
            compressed: AtomicU64::new(0),
            inflated: AtomicU64::new(0),
            stopped: AtomicBool::new(false),
        }
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    pub fn inflated(&self) -> u64 {
        self.inflated.load(Relaxed)
    }

    pub fn compressed(&self) -> u64 {
        self.compressed.load(Relaxed)
    }

    /// `n` more compressed bytes read.
    pub fn read_compressed(&self, n: u64) {
        self.compressed.fetch_add(n, Relaxed);
    }

    /// `n` more bytes decompressed from them.
    pub fn inflate(&self, n: u64) {
        self.inflated.fetch_add(n, Relaxed);
    }

    /// How many more bytes may be decompressed.
    pub fn room(&self) -> u64 {
        self.limit.saturating_sub(self.inflated())
    }

    /// The limit is reached and more was there: reading stops.
    pub fn stop(&self) {
        self.stopped.store(true, Relaxed);
    }

    pub fn stopped(&self) -> bool {
        self.stopped.load(Relaxed)
    }

    /// How many times its compressed size the data grew.
    fn ratio(&self) -> u64 {
        self.inflated() / self.compressed().max(1)
    }

    /// The ratio when it is worth a word: large, and past [`BOMB_RATIO`].
    pub fn bomb_ratio(&self) -> Option<u64> {
        (self.inflated() >= BOMB_WORTH_SAYING && self.ratio() >= BOMB_RATIO).then(|| self.ratio())
    }

    /// What the user should know: the limit that stopped the reading,
    /// a ratio that looks like a bomb.
    pub fn notes(&self, path: &Path) -> Vec<String> {
        let path = path.display();
        let (c, d) = (size(self.compressed()), size(self.inflated()));
        let mut out = Vec::new();
        if self.stopped() {
            let so_far = match self.inflated() {
                0 => String::new(),
                _ => format!(" ({c} -> {d} so far, {}x)", self.ratio()),
            };
            out.push(format!(
                "{path}: stopped at --max-input ({}): its {} decompresses to more{so_far}; the rest is not in this report (a decompression bomb? a larger --max-input reads on)",
                size(self.limit),
                self.what,
            ));
        } else if let Some(r) = self.bomb_ratio() {
            out.push(format!(
                "{path}: its {} decompresses {r}x ({c} -> {d}): a decompression bomb? --max-input limits what is read",
                self.what,
            ));
        }
        out
    }
}

/// A byte count as people read it: `262 KiB`, `8.0 GiB`.
pub fn size(n: u64) -> String {
    const UNITS: [&str; 5] = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    match u {
        0 => format!("{n} bytes"),
        _ if v < 10.0 => format!("{v:.1} {}", UNITS[u]),
        _ => format!("{v:.0} {}", UNITS[u]),
    }
}

/// `--max-input`'s SIZE: bytes, or with a K, M, G or T suffix (powers of
/// 1024; `KiB`, `MB` and the like are read the same).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let shift = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        "T" | "TB" | "TIB" => 40,
        _ => return Err(format!("expected a size such as 512M or 64G, got {s:?}")),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("expected a size such as 512M or 64G, got {s:?}"))?;
    n.checked_mul(1 << shift)
        .filter(|b| *b > 0)
        .ok_or_else(|| format!("expected a size from 1 byte to 16 EiB, got {s:?}"))
}

/// The decompressed stream, measured by `meter`. Several gzip members or
/// zstd frames one after the other (what `cat a.gz b.gz` or `pzstd` make)
/// are read as one stream, as `zcat` and `zstdcat` do; zstd's skippable
/// frames are skipped. It ends at the meter's limit.
pub fn decoder(codec: Codec, input: Box<dyn Read>, meter: Arc<Meter>) -> io::Result<Box<dyn Read>> {
    let input = Counted {
        inner: input,
        meter: meter.clone(),
    };
    let inner: Box<dyn Read> = match codec {
        Codec::Gzip => Box::new(flate2::read::MultiGzDecoder::new(input)),
        Codec::Zstd => Box::new(ZstdFrames::new(Box::new(input))?),
    };
    Ok(Box::new(Limited { inner, meter }))
}

/// The compressed bytes, counted as they are read.
struct Counted {
    inner: Box<dyn Read>,
    meter: Arc<Meter>,
}

impl Read for Counted {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.meter.read_compressed(n as u64);
        Ok(n)
    }
}

/// The decompressed bytes, counted and ended at the limit.
struct Limited {
    inner: Box<dyn Read>,
    meter: Arc<Meter>,
}

impl Read for Limited {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let room = self.meter.room();
        if room == 0 {
            // At the limit: stopped only if there was more.
            if !self.meter.stopped() && !buf.is_empty() {
                let mut one = [0u8; 1];
                if self.inner.read(&mut one)? > 0 {
                    self.meter.stop();
                }
            }
            return Ok(0);
        }
        let want = buf.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..want])?;
        self.meter.inflate(n as u64);
        Ok(n)
    }
}

/// A source read from decompressed data: the source, and what the
/// decompression has to say (the limit, the ratio) among its warnings.
pub struct Decompressed {
    pub inner: Box<dyn Source>,
    pub meter: Arc<Meter>,
}

impl Source for Decompressed {
    fn next_event(&mut self) -> Option<Event> {
        self.inner.next_event()
    }
    fn next_into(&mut self, slot: &mut Option<Event>) {
        self.inner.next_into(slot)
    }
    fn block_only(&self) -> bool {
        self.inner.block_only()
    }
    fn path(&self) -> &Path {
        self.inner.path()
    }
    fn format(&self) -> &'static str {
        self.inner.format()
    }
    fn stats(&self) -> &SourceStats {
        self.inner.stats()
    }
    fn position(&self) -> Position {
        self.inner.position()
    }
    fn input_notes(&self) -> Vec<String> {
        let mut out = self.inner.input_notes();
        out.extend(self.meter.notes(self.inner.path()));
        out
    }
}

/// The compressed input between frames: the bytes read to tell what comes
/// next, put back in front of the rest (a frame continues from where the
/// last one ended, without a reader wrapped around the last one's: that
/// nesting made each read cross every frame before it).
#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(codec: Codec, data: Vec<u8>) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        let meter = Arc::new(Meter::new(codec.name()));
        decoder(codec, Box::new(io::Cursor::new(data)), meter)?.read_to_end(&mut out)?;
        Ok(out)
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    /// What reads before the error, and the error.
    fn read_until_error(codec: Codec, data: Vec<u8>) -> (Vec<u8>, Option<io::Error>) {
        let meter = Arc::new(Meter::new(codec.name()));
        let mut d = match decoder(codec, Box::new(io::Cursor::new(data)), meter) {
            Ok(d) => d,
            Err(e) => return (Vec::new(), Some(e)),
        };
        let (mut out, mut buf) = (Vec::new(), [0u8; 8192]);
        loop {
            match d.read(&mut buf) {
                Ok(0) => return (out, None),
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(e) => return (out, Some(e)),
            }
        }
    }

    #[test]
    fn a_zstd_frame_cut_short_gives_its_whole_blocks_then_an_error() {
        use ruzstd::encoding::{compress_to_vec, CompressionLevel};
        // Several 128 KiB blocks of text that does not repeat exactly.
        let text: String = (0..40_000)
            .map(|i| format!("line {i} {}\n", i * 7919 % 10007))
            .collect();
        let packed = compress_to_vec(text.as_bytes(), CompressionLevel::Fastest);
        let whole = read_until_error(Codec::Zstd, packed.clone());
        assert_eq!(whole.0, text.as_bytes());
        assert!(whole.1.is_none());
        let mut longest = 0;
        for cut in [
            packed.len() / 3,
            packed.len() / 2,
            packed.len() - 5,
            packed.len() - 1,
        ] {
            let (got, e) = read_until_error(Codec::Zstd, packed[..cut].to_vec());
            let e = e.unwrap_or_else(|| panic!("cut at {cut}: no error"));
            assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "{e}");
            assert!(e.to_string().contains("(a file cut short?)"), "{e}");
            assert!(text.as_bytes().starts_with(&got), "cut at {cut}");
            assert!(got.len() >= longest, "cut at {cut}");
            longest = got.len();
        }
        // Cut well after the first block: its data is there.
        assert!(longest > 128 << 10, "{longest}");
        // Cut inside the first block: nothing whole, only the error.
        let (got, e) = read_until_error(Codec::Zstd, packed[..100].to_vec());
        assert!(got.is_empty() && e.is_some());
    }

    #[test]
    fn concatenated_gzip_members_are_one_stream() {
        let mut data = gzip(b"first line\n");
        data.extend(gzip(b"second line\n"));
        assert_eq!(detect(&data), Some(Codec::Gzip));
        assert_eq!(
            read_all(Codec::Gzip, data).unwrap(),
            b"first line\nsecond line\n"
        );
    }

    #[test]
    fn truncated_gzip_is_an_error_not_a_short_stream() {
        let data = gzip(&b"0123456789".repeat(1000));
        let cut = data[..data.len() / 2].to_vec();
        assert!(read_all(Codec::Gzip, cut).is_err());
    }

    #[test]
    fn zstd_frames_one_after_the_other_are_one_stream() {
        use ruzstd::encoding::{compress_to_vec, CompressionLevel};
        let mut data = compress_to_vec(&b"first\n"[..], CompressionLevel::Fastest);
        data.extend(compress_to_vec(&b"second\n"[..], CompressionLevel::Fastest));
        assert_eq!(detect(&data), Some(Codec::Zstd));
        assert_eq!(read_all(Codec::Zstd, data).unwrap(), b"first\nsecond\n");
    }

    #[test]
    fn garbage_after_zstd_magic_is_an_error() {
        let mut data = ZSTD_MAGIC.to_vec();
        data.extend([0xff; 32]);
        assert_eq!(detect(&data), Some(Codec::Zstd));
        assert!(read_all(Codec::Zstd, data).is_err());
    }

    /// A zstd frame of `data` in one raw block (RFC 8878: a single
    /// segment, its size in one byte).
    fn raw_frame(data: &[u8]) -> Vec<u8> {
        let block = 1 | (data.len() as u32) << 3;
        let mut f = ZSTD_MAGIC.to_vec();
        f.extend([0x20, data.len() as u8]);
        f.extend(&block.to_le_bytes()[..3]);
        f.extend(data);
        f
    }

    fn skippable(magic_low: u8, data: &[u8]) -> Vec<u8> {
        let mut f = vec![0x50 | magic_low, 0x2a, 0x4d, 0x18];
        f.extend((data.len() as u32).to_le_bytes());
        f.extend(data);
        f
    }

    #[test]
    fn skippable_frames_are_skipped_wherever_they_are() {
        let mut data = skippable(0, b"pzstd's index");
        data.extend(raw_frame(b"first\n"));
        data.extend(skippable(0xf, b""));
        data.extend(raw_frame(b"second\n"));
        data.extend(skippable(3, &[0u8; 300]));
        assert_eq!(detect(&data), Some(Codec::Zstd));
        assert_eq!(read_all(Codec::Zstd, data).unwrap(), b"first\nsecond\n");
        let mut cut = skippable(1, &[7u8; 100]);
        cut.truncate(50);
        let e = read_all(Codec::Zstd, cut).unwrap_err().to_string();
        assert!(e.contains("skippable frame cut short"), "{e}");
    }

    #[test]
    fn many_frames_take_linear_time() {
        let text: Vec<u8> = (0..200_000u32).map(|i| b'a' + (i % 26) as u8).collect();
        let data: Vec<u8> = text.iter().flat_map(|b| raw_frame(&[*b])).collect();
        let t = std::time::Instant::now();
        assert_eq!(read_all(Codec::Zstd, data).unwrap(), text);
        // Quadratic, 200,000 frames took minutes.
        assert!(t.elapsed().as_secs() < 10, "{:?}", t.elapsed());
    }

    #[test]
    fn stray_bytes_after_the_last_frame_are_an_error() {
        let mut data = raw_frame(b"x");
        data.extend([0x28, 0xb5]);
        let e = read_all(Codec::Zstd, data).unwrap_err().to_string();
        assert!(e.contains("2 stray bytes"), "{e}");
    }

    #[test]
    fn the_limit_ends_the_stream_and_is_said() {
        let data = gzip(&vec![b'\n'; 1 << 20]);
        let meter = Arc::new(Meter {
            limit: 1000,
            ..Meter::new("gzip data")
        });
        let mut out = Vec::new();
        decoder(Codec::Gzip, Box::new(io::Cursor::new(data)), meter.clone())
            .unwrap()
            .read_to_end(&mut out)
            .unwrap();
        assert_eq!(out.len(), 1000);
        assert!(meter.stopped());
        let notes = meter.notes(Path::new("x.gz"));
        assert!(
            notes[0].starts_with(
                "x.gz: stopped at --max-input (1000 bytes): its gzip data decompresses to more"
            ),
            "{notes:?}"
        );
        // Exactly at the limit is not past it.
        let meter = Arc::new(Meter {
            limit: 5,
            ..Meter::new("gzip data")
        });
        let data = gzip(b"12345");
        let mut d = decoder(Codec::Gzip, Box::new(io::Cursor::new(data)), meter.clone()).unwrap();
        d.read_to_end(&mut out).unwrap();
        assert!(!meter.stopped());
        assert!(meter.notes(Path::new("x.gz")).is_empty());
    }

    #[test]
    fn a_bomb_like_ratio_is_said() {
        let meter = Meter::new("zstd data");
        meter.read_compressed(256 << 10);
        meter.inflate(8 << 30);
        assert_eq!(
            meter.notes(Path::new("x.zst")),
            ["x.zst: its zstd data decompresses 32768x (256 KiB -> 8.0 GiB): a decompression bomb? --max-input limits what is read"]
        );
        let meter = Meter::new("zstd data");
        meter.read_compressed(1 << 20);
        meter.inflate(90 << 20);
        assert!(meter.notes(Path::new("x.zst")).is_empty());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("10M"), Ok(10 << 20));
        assert_eq!(parse_size("64G"), Ok(64 << 30));
        assert_eq!(parse_size("1T"), Ok(1 << 40));
        assert_eq!(parse_size("512KiB"), Ok(512 << 10));
        assert_eq!(parse_size("4096"), Ok(4096));
        for bad in ["", "M", "0", "1.5G", "-1", "10X", "99999999999T"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert_eq!(size(999), "999 bytes");
        assert_eq!(size(262 << 10), "262 KiB");
        assert_eq!(size(8 << 30), "8.0 GiB");
    }

    #[test]
    fn plain_text_is_not_compressed() {
        assert_eq!(detect(b"# tracer: nop\n"), None);
    }
}
