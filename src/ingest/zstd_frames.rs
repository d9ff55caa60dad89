//! zstd frames read one after another with one reused decoder, passing
//! each frame's blocks on whole: a file cut inside a frame is read up to
//! its last whole block (the decoder alone holds back a frame's data until
//! the frame ends).

use super::compressed::is_skippable;
use std::io::{self, Read};

pub(super) struct Rest {
    back: [u8; 4],
    back_at: usize,
    back_len: usize,
    inner: Box<dyn Read>,
}

impl Read for Rest {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.back_at < self.back_len {
            let n = (self.back_len - self.back_at).min(buf.len());
            buf[..n].copy_from_slice(&self.back[self.back_at..self.back_at + n]);
            self.back_at += n;
            return Ok(n);
        }
        self.inner.read(buf)
    }
}

impl Rest {
    /// The next 4 bytes (a frame's magic), or how many there were before
    /// the input ended.
    fn magic(&mut self) -> io::Result<Result<[u8; 4], usize>> {
        let mut m = [0u8; 4];
        let mut got = 0;
        while got < 4 {
            match self.read(&mut m[got..]) {
                Ok(0) => return Ok(Err(got)),
                Ok(k) => got += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(Ok(m))
    }

    fn put_back(&mut self, m: [u8; 4]) {
        self.back = m;
        self.back_at = 0;
        self.back_len = 4;
    }

    /// Skips a skippable frame's data (its magic read).
    fn skip_frame(&mut self) -> io::Result<()> {
        let len = match self.magic()? {
            Ok(l) => u64::from(u32::from_le_bytes(l)),
            Err(_) => return Err(bad_zstd("a skippable frame cut short")),
        };
        let skipped = io::copy(&mut self.by_ref().take(len), &mut io::sink())?;
        if skipped < len {
            return Err(bad_zstd("a skippable frame cut short"));
        }
        Ok(())
    }
}

fn bad_zstd(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("zstd: {e}"))
}

/// One zstd frame's bytes, passed to the decoder a whole block at a
/// time. A frame cut short in a block (or between blocks) ends, for the
/// decoder, with an empty last block: ruzstd holds back the last window of
/// data until its frame ends (it may be the whole file), and a stream that
/// simply stopped would lose it all in an error. What was whole is then
/// read, and `cut` says where it stopped.
pub(super) struct Blocks {
    rest: Rest,
    /// Bytes for the decoder: the frame header, then one block.
    out: Vec<u8>,
    at: usize,
    stage: Stage,
    checksum: bool,
    cut: Option<String>,
    /// Whole blocks passed on, for the message.
    blocks: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    Header,
    Block,
    Checksum,
    Done,
}

/// A block header: last block, type, size (RFC 8878 3.1.1.2).
const LAST_EMPTY_RAW_BLOCK: [u8; 3] = [1, 0, 0];

impl Blocks {
    fn new(rest: Rest) -> Blocks {
        Blocks {
            rest,
            out: Vec::new(),
            at: 0,
            stage: Stage::Header,
            checksum: false,
            cut: None,
            blocks: 0,
        }
    }

    /// Appends up to `n` bytes of the input to `out`; how many there were.
    fn take(&mut self, n: usize) -> io::Result<usize> {
        let start = self.out.len();
        self.out.resize(start + n, 0);
        let mut got = 0;
        while got < n {
            match self.rest.read(&mut self.out[start + got..]) {
                Ok(0) => break,
                Ok(k) => got += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.out.truncate(start + got);
        Ok(got)
    }

    /// Fills `out` with what comes next for the decoder.
    fn refill(&mut self) -> io::Result<()> {
        self.out.clear();
        self.at = 0;
        match self.stage {
            Stage::Header => {
                // Magic and frame header descriptor, then the fields it
                // says are there (RFC 8878 3.1.1.1).
                if self.take(5)? < 5 {
                    return Ok(()); // the decoder says what is missing
                }
                let fhd = self.out[4];
                let single = fhd & 0x20 != 0;
                self.checksum = fhd & 0x04 != 0;
                let window = usize::from(!single);
                let dict = [0, 1, 2, 4][usize::from(fhd & 3)];
                let fcs = match fhd >> 6 {
                    0 => usize::from(single),
                    1 => 2,
                    2 => 4,
                    _ => 8,
                };
                self.take(window + dict + fcs)?;
                self.stage = Stage::Block;
            }
            Stage::Block => {
                let got = self.take(3)?;
                if got < 3 {
                    return self.cut_short(format!(
                        "the data ends after {} whole blocks of a frame",
                        self.blocks
                    ));
                }
                let h = u32::from(self.out[0])
                    | u32::from(self.out[1]) << 8
                    | u32::from(self.out[2]) << 16;
                let (last, kind, size) = (h & 1 == 1, (h >> 1) & 3, (h >> 3) as usize);
                // RLE: one byte repeated; reserved (3): the decoder refuses it.
                let content = match kind {
                    1 => 1,
                    3 => 0,
                    _ => size,
                };
                if self.take(content)? < content {
                    return self.cut_short(format!(
                        "the data ends inside block {} of a frame",
                        self.blocks + 1
                    ));
                }
                self.blocks += 1;
                if last {
                    self.stage = match self.checksum {
                        true => Stage::Checksum,
                        false => Stage::Done,
                    };
                }
            }
            Stage::Checksum => {
                // All data is whole: only its check is missing.
                if self.take(4)? < 4 {
                    self.out.resize(4, 0);
                    self.cut = Some("the data ends inside a frame's checksum".into());
                }
                self.stage = Stage::Done;
            }
            Stage::Done => {}
        }
        Ok(())
    }

    /// Ends the frame for the decoder with an empty last block (and a
    /// checksum it does not verify).
    fn cut_short(&mut self, why: String) -> io::Result<()> {
        self.out.clear();
        self.out.extend_from_slice(&LAST_EMPTY_RAW_BLOCK);
        if self.checksum {
            self.out.extend_from_slice(&[0; 4]);
        }
        self.cut = Some(why);
        self.stage = Stage::Done;
        Ok(())
    }
}

impl Read for Blocks {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.at == self.out.len() {
            self.refill()?;
        }
        let n = (self.out.len() - self.at).min(buf.len());
        buf[..n].copy_from_slice(&self.out[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

type Frame = ruzstd::decoding::StreamingDecoder<Blocks, ruzstd::decoding::FrameDecoder>;

/// zstd frames read one after the other until the input ends, with one
/// frame decoder reused for all.
pub(super) enum ZstdFrames {
    In(Frame),
    Between(Rest, ruzstd::decoding::FrameDecoder),
    Done,
}

impl ZstdFrames {
    pub(super) fn new(input: Box<dyn Read>) -> io::Result<ZstdFrames> {
        let rest = Rest {
            back: [0; 4],
            back_at: 0,
            back_len: 0,
            inner: input,
        };
        let mut f = ZstdFrames::Between(rest, ruzstd::decoding::FrameDecoder::new());
        // The first frame is read now: data that is no zstd at all is
        // refused at once.
        f.next_frame()?;
        Ok(f)
    }

    /// Moves past the frame just finished (and any skippable frames) to
    /// the start of the next frame, or to the end.
    fn next_frame(&mut self) -> io::Result<()> {
        let ZstdFrames::Between(mut rest, decoder) = std::mem::replace(self, ZstdFrames::Done)
        else {
            return Ok(());
        };
        loop {
            match rest.magic()? {
                Err(0) => return Ok(()),
                Err(n) => return Err(bad_zstd(format!("{n} stray bytes after the last frame"))),
                Ok(m) if is_skippable(m) => rest.skip_frame()?,
                Ok(m) => {
                    rest.put_back(m);
                    let frame = ruzstd::decoding::StreamingDecoder::new_with_decoder(
                        Blocks::new(rest),
                        decoder,
                    )
                    .map_err(bad_zstd)?;
                    *self = ZstdFrames::In(frame);
                    return Ok(());
                }
            }
        }
    }
}

impl Read for ZstdFrames {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let frame = match self {
                ZstdFrames::Done => return Ok(0),
                ZstdFrames::Between(..) => {
                    self.next_frame()?;
                    continue;
                }
                ZstdFrames::In(f) => f,
            };
            let n = frame.read(buf).map_err(bad_zstd)?;
            if n > 0 || buf.is_empty() {
                return Ok(n);
            }
            // This frame is done: another one may follow, unless it was
            // cut short, which ends the data read (up to the cut).
            let ZstdFrames::In(f) = std::mem::replace(self, ZstdFrames::Done) else {
                unreachable!("matched above")
            };
            let (blocks, decoder) = f.into_parts();
            if let Some(why) = blocks.cut {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("zstd: {why} (a file cut short?)"),
                ));
            }
            *self = ZstdFrames::Between(blocks.rest, decoder);
        }
    }
}
