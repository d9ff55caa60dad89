//! The bytes of a trace.dat: where they are (the file, read where asked,
//! or memory), a cursor that reads them forward without passing the end,
//! the compressed blocks of v7 (zlib, zstd), and the fixed header every
//! version starts with. Every length read from the file is checked
//! against what is left of it (or of the decompressed section) before it
//! is used.

use std::borrow::Cow;
use std::cell::Cell;
use std::io::Read;

pub const MAGIC: &[u8] = b"\x17\x08\x44tracing";

/// The largest metadata section or compressed block iosleuth reads (the
/// kallsyms of a large kernel are ~15 MiB; a chunk of ring-buffer pages
/// is a few pages).
pub const MAX_BLOCK: u64 = 256 << 20;

/// A string of the metadata (a version, a system or instance name).
const MAX_STRING: u64 = 4096;

/// How the file's bytes are reached: the file itself (read where asked,
/// so that memory does not grow with the trace), or bytes in memory.
pub enum Backing {
    File(std::fs::File, u64),
    Memory(Vec<u8>),
    /// The first bytes of a stream while its metadata is read: reading
    /// past them is noted (more must be read), not yet damage.
    Prefix(Vec<u8>, Cell<bool>),
}

impl Backing {
    pub fn len(&self) -> u64 {
        match self {
            Backing::File(_, n) => *n,
            Backing::Memory(v) | Backing::Prefix(v, _) => v.len() as u64,
        }
    }

    /// Something was looked for past the end of the bytes.
    pub fn ran_out(&self) {
        if let Backing::Prefix(_, short) = self {
            short.set(true);
        }
    }

    /// A prefix whose reader looked past its end: the rest of the stream
    /// may hold what it looked for.
    pub fn too_short(&self) -> bool {
        matches!(self, Backing::Prefix(_, short) if short.get())
    }

    /// `n` bytes at `at`, never past the end of the file.
    pub fn read(&self, at: u64, n: u64) -> Result<Cow<'_, [u8]>, String> {
        let end = at
            .checked_add(n)
            .filter(|e| *e <= self.len())
            .ok_or_else(|| {
                self.ran_out();
                past_end("the file", at, n, self.len())
            })?;
        match self {
            Backing::Memory(v) | Backing::Prefix(v, _) => {
                Ok(Cow::Borrowed(&v[at as usize..end as usize]))
            }
            Backing::File(f, _) => {
                use std::os::unix::fs::FileExt;
                let mut buf = vec![0u8; usize::try_from(n).map_err(|_| "a size beyond memory")?];
                f.read_exact_at(&mut buf, at)
                    .map_err(|e| format!("cannot read {n} bytes at byte {at}: {e}"))?;
                Ok(Cow::Owned(buf))
            }
        }
    }
}

fn past_end(what: &str, at: u64, n: u64, len: u64) -> String {
    format!("cut short: {n} bytes at byte {at} run past the end of {what} ({len} bytes)")
}

/// The compressions trace-cmd writes (its zlib and zstd plugins).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    Zlib,
    Zstd,
}

impl Codec {
    pub fn name(self) -> &'static str {
        match self {
            Codec::Zlib => "zlib",
            Codec::Zstd => "zstd",
        }
    }
}

/// Decompresses one block that says it holds `size` bytes (trace-cmd's
/// `uncompress_block`: zlib's `compress2` stream, or one zstd frame).
pub fn decompress(codec: Codec, data: &[u8], size: u64) -> Result<Vec<u8>, String> {
    if size > MAX_BLOCK {
        return Err(format!(
            "a {} block says it holds {size} bytes, more than the {MAX_BLOCK} iosleuth reads at once",
            codec.name()
        ));
    }
    let mut out = Vec::with_capacity((size as usize).min(1 << 20));
    let read = match codec {
        Codec::Zlib => flate2::read::ZlibDecoder::new(data)
            .take(size + 1)
            .read_to_end(&mut out),
        Codec::Zstd => ruzstd::decoding::StreamingDecoder::new(data)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))
            .and_then(|d| d.take(size + 1).read_to_end(&mut out)),
    };
    read.map_err(|e| format!("{} data that does not decompress: {e}", codec.name()))?;
    if out.len() as u64 > size {
        return Err(format!(
            "{} data that decompresses to more than the {size} bytes its header says",
            codec.name()
        ));
    }
    // Held while its pages are read: no room to spare.
    out.shrink_to_fit();
    Ok(out)
}

/// Reads forward through the whole file or through one section's bytes.
pub struct Cursor<'a> {
    src: Src<'a>,
    pub at: u64,
}

enum Src<'a> {
    File(&'a Backing),
    /// A section's (decompressed) data, and its name for messages.
    Part(&'a [u8], &'a str),
}

impl<'a> Cursor<'a> {
    pub fn file(b: &'a Backing, at: u64) -> Cursor<'a> {
        Cursor {
            src: Src::File(b),
            at,
        }
    }

    pub fn part(data: &'a [u8], name: &'a str) -> Cursor<'a> {
        Cursor {
            src: Src::Part(data, name),
            at: 0,
        }
    }

    fn what(&self) -> String {
        match &self.src {
            Src::File(_) => "the file".into(),
            Src::Part(_, name) => format!("its {name}"),
        }
    }

    fn len(&self) -> u64 {
        match &self.src {
            Src::File(b) => b.len(),
            Src::Part(d, _) => d.len() as u64,
        }
    }

    pub fn take(&mut self, n: u64) -> Result<Cow<'a, [u8]>, String> {
        let at = self.at;
        let out = match &self.src {
            Src::File(b) => b.read(at, n)?,
            Src::Part(d, _) => {
                let end = at
                    .checked_add(n)
                    .filter(|e| *e <= d.len() as u64)
                    .ok_or_else(|| past_end(&self.what(), at, n, d.len() as u64))?;
                Cow::Borrowed(&d[at as usize..end as usize])
            }
        };
        self.at += n;
        Ok(out)
    }

    /// Metadata of `n` bytes: refused past `MAX_BLOCK` before anything is
    /// allocated.
    pub fn block(&mut self, n: u64, what: &str) -> Result<Cow<'a, [u8]>, String> {
        if n > MAX_BLOCK {
            return Err(format!(
                "its {what} says it is {n} bytes long, more than the {MAX_BLOCK} iosleuth reads"
            ));
        }
        self.take(n)
    }

    pub fn u16(&mut self) -> Result<u16, String> {
        Ok(u16::from_le_bytes(self.take(2)?[..].try_into().unwrap()))
    }

    pub fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.take(4)?[..].try_into().unwrap()))
    }

    pub fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.take(8)?[..].try_into().unwrap()))
    }

    /// A NUL-terminated string (at most `MAX_STRING` bytes).
    pub fn string(&mut self) -> Result<String, String> {
        let at = self.at;
        let window = (self.len().saturating_sub(at)).min(MAX_STRING);
        let bytes = self.take(window)?;
        let Some(n) = memchr::memchr(0, &bytes) else {
            return Err(if at + window >= self.len() {
                if let Src::File(b) = &self.src {
                    b.ran_out();
                }
                format!(
                    "cut short: the string at byte {at} runs past the end of {}",
                    self.what()
                )
            } else {
                format!("a string at byte {at} without its end")
            });
        };
        let s = String::from_utf8_lossy(&bytes[..n]).into_owned();
        self.at = at + n as u64 + 1;
        Ok(s)
    }

    pub fn text(&mut self, n: u64, what: &str) -> Result<String, String> {
        Ok(String::from_utf8_lossy(&self.block(n, what)?).into_owned())
    }
}

/// The fixed start of the file.
#[derive(Debug, Clone)]
pub struct Header {
    pub version: u32,
    pub page_size: usize,
    pub codec: Option<Codec>,
    /// Where what follows the header starts.
    pub rest: u64,
}

pub fn parse_header(b: &Backing) -> Result<Header, String> {
    let mut c = Cursor::file(b, 0);
    if c.take(MAGIC.len() as u64)? != MAGIC {
        return Err("not a trace-cmd trace.dat (no \\x17\\x08\\x44tracing magic)".into());
    }
    let v = c.string()?;
    let version = match v.trim().parse::<u32>() {
        Ok(n @ (6 | 7)) => n,
        _ => {
            return Err(format!(
                "trace.dat version {v:?} is not supported: iosleuth reads versions 6 and 7 (what trace-cmd 2.x and 3.x write)"
            ))
        }
    };
    match c.take(1)?[0] {
        0 => {}
        1 => {
            return Err(
                "is a big-endian trace.dat (recorded on a big-endian machine): iosleuth reads little-endian ones only"
                    .into(),
            )
        }
        e => return Err(format!("its endianness byte is {e}, neither 0 nor 1")),
    }
    let long = c.take(1)?[0];
    if long != 4 && long != 8 {
        return Err(format!("its size of a long is {long}, neither 4 nor 8"));
    }
    let page_size = u64::from(c.u32()?);
    let sizes = crate::model::capture_layout::PAGE_SIZES;
    if !page_size.is_power_of_two() || !sizes.contains(&page_size) {
        return Err(format!(
            "its page size {page_size} is not a ring-buffer page size (a power of two from {} to {})",
            sizes.start(),
            sizes.end()
        ));
    }
    let mut codec = None;
    if version >= 7 {
        let name = c.string()?;
        let zver = c.string()?;
        codec = match name.as_str() {
            "none" => None,
            "zlib" => Some(Codec::Zlib),
            "zstd" => Some(Codec::Zstd),
            other => {
                return Err(format!(
                    "is compressed with {other:?} (version {zver:?}), which iosleuth cannot decompress (it reads zlib and zstd)"
                ))
            }
        };
    }
    Ok(Header {
        version,
        page_size: page_size as usize,
        codec,
        rest: c.at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_bounded_by_what_they_declare() {
        use std::io::Write;
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(&[7u8; 5000]).unwrap();
        let z = e.finish().unwrap();
        assert_eq!(decompress(Codec::Zlib, &z, 5000).unwrap().len(), 5000);
        assert!(decompress(Codec::Zlib, &z, 4999)
            .unwrap_err()
            .contains("more than"));
        assert!(decompress(Codec::Zlib, &z[..z.len() / 2], 5000).is_err());
        let zs = ruzstd::encoding::compress_to_vec(
            &[1u8; 3000][..],
            ruzstd::encoding::CompressionLevel::Fastest,
        );
        assert_eq!(decompress(Codec::Zstd, &zs, 3000).unwrap(), vec![1u8; 3000]);
        assert!(decompress(Codec::Zstd, b"garbage", 10).is_err());
        assert!(decompress(Codec::Zstd, &zs, MAX_BLOCK + 1).is_err());
    }

    #[test]
    fn header_versions_and_compressions() {
        let mut v = MAGIC.to_vec();
        v.extend(b"9\0\0\x08");
        v.extend(4096u32.to_le_bytes());
        let e = parse_header(&Backing::Memory(v.clone())).unwrap_err();
        assert!(e.contains("version \"9\""), "{e}");
        v[MAGIC.len()] = b'7';
        v.extend(b"lz4\x001.9\0");
        let e = parse_header(&Backing::Memory(v)).unwrap_err();
        assert!(e.contains("\"lz4\""), "{e}");
    }
}
