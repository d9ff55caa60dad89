//! Compressed inputs: a gzip or zstd stream is recognised by its magic
//! bytes (never by the file's name) and decompressed while it is read, so
//! memory stays flat as for any other input.

use std::io::{self, Read};

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

/// The compression the stream starts with, if any.
pub fn detect(head: &[u8]) -> Option<Codec> {
    if head.starts_with(&GZIP_MAGIC) {
        Some(Codec::Gzip)
    } else if head.starts_with(&ZSTD_MAGIC) {
        Some(Codec::Zstd)
    } else {
        None
    }
}

/// The decompressed stream. Several gzip members or zstd frames one after
/// the other (what `cat a.gz b.gz` or `pzstd` make) are read as one stream,
/// as `zcat` and `zstdcat` do.
pub fn decoder(codec: Codec, input: Box<dyn Read>) -> io::Result<Box<dyn Read>> {
    Ok(match codec {
        Codec::Gzip => Box::new(flate2::read::MultiGzDecoder::new(input)),
        Codec::Zstd => Box::new(ZstdFrames::new(input)?),
    })
}

type ZstdFrame = ruzstd::decoding::StreamingDecoder<Box<dyn Read>, ruzstd::decoding::FrameDecoder>;

/// zstd frames read one after the other until the input ends.
struct ZstdFrames {
    frame: Option<ZstdFrame>,
}

impl ZstdFrames {
    fn new(input: Box<dyn Read>) -> io::Result<ZstdFrames> {
        Ok(ZstdFrames {
            frame: Some(start_frame(input)?),
        })
    }
}

fn start_frame(input: Box<dyn Read>) -> io::Result<ZstdFrame> {
    ruzstd::decoding::StreamingDecoder::new(input)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("zstd: {e}")))
}

impl Read for ZstdFrames {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let Some(frame) = self.frame.as_mut() else {
                return Ok(0);
            };
            let n = frame
                .read(buf)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("zstd: {e}")))?;
            if n > 0 || buf.is_empty() {
                return Ok(n);
            }
            // This frame is done: another one may follow.
            let mut rest = self.frame.take().expect("checked").into_inner();
            let mut first = [0u8; 1];
            let got = loop {
                match rest.read(&mut first) {
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    other => break other?,
                }
            };
            if got == 0 {
                return Ok(0);
            }
            let rest: Box<dyn Read> = Box::new(io::Cursor::new(first).chain(rest));
            self.frame = Some(start_frame(rest)?);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(codec: Codec, data: Vec<u8>) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        decoder(codec, Box::new(io::Cursor::new(data)))?.read_to_end(&mut out)?;
        Ok(out)
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
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

    #[test]
    fn plain_text_is_not_compressed() {
        assert_eq!(detect(b"# tracer: nop\n"), None);
    }
}
