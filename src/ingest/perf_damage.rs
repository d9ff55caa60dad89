//! A perf.data whose records are damaged near the end: the perf.data
//! crate sorts each round of records before it hands any out, and stops
//! at a record it cannot frame, so one bad record dropped every sample of
//! its round (134 good samples, then "no usable events"). The records are
//! framed here first (`cut`), and the file read again through a view in
//! which the damaged stretch is round ends (`Overlay`): the crate then
//! hands out every record before the damage.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};

/// PERF_RECORD_FINISHED_ROUND: a header alone, which the crate reads as
/// the end of a round and skips.
const FINISHED_ROUND: u32 = 68;

/// Where the records of the data section stop being framed: the offset
/// of the first whose header is cut off, claims fewer than 8 bytes, or
/// runs past the end of the file, and what is wrong with it. `None` when
/// every record is framed (the damage is inside one, which the crate
/// says).
pub fn cut(file: &File) -> Option<(u64, u64, String)> {
    let len = file.metadata().ok()?.len();
    let mut r = BufReader::with_capacity(64 << 10, file);
    let mut h = [0u8; 104];
    r.read_exact(&mut h).ok()?;
    let u64_at = |at: usize| u64::from_le_bytes(h[at..at + 8].try_into().expect("8 bytes"));
    let (start, end) = (u64_at(40), u64_at(40).checked_add(u64_at(48))?);
    r.seek(SeekFrom::Start(start)).ok()?;
    let mut at = start;
    while at < end {
        let mut header = [0u8; 8];
        if at + 8 > len || r.read_exact(&mut header).is_err() {
            return Some((at, end, "a record header cut off".into()));
        }
        let size = u16::from_le_bytes([header[6], header[7]]) as u64;
        if size < 8 {
            return Some((at, end, format!("a record that claims {size} bytes")));
        }
        if at + size > len {
            return Some((
                at,
                end,
                format!("a {size}-byte record past the end of the file"),
            ));
        }
        r.seek_relative(size as i64 - 8).ok()?;
        at += size;
    }
    None
}

/// The file as the crate should read it: the bytes from `from` to `to`
/// (the damaged end of the data section) read as round ends, 8 bytes
/// each (the first longer by what does not divide by 8).
pub struct Overlay {
    file: File,
    pos: u64,
    damaged: Option<(u64, u64)>,
}

impl Overlay {
    pub fn new(file: File, damaged: Option<(u64, u64)>) -> Overlay {
        Overlay {
            file,
            pos: 0,
            damaged,
        }
    }

    /// The byte at `p` inside the damaged stretch.
    fn filler(from: u64, to: u64, p: u64) -> u8 {
        let k = (p - from) % 8;
        let size = if p - from < 8 { 8 + (to - from) % 8 } else { 8 };
        let mut header = [0u8; 8];
        header[..4].copy_from_slice(&FINISHED_ROUND.to_le_bytes());
        header[6..].copy_from_slice(&(size as u16).to_le_bytes());
        header[k as usize]
    }
}

impl Read for Overlay {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.file.read(buf)?;
        if let Some((from, to)) = self.damaged {
            for p in from.max(self.pos)..to.min(self.pos + n as u64) {
                buf[(p - self.pos) as usize] = Overlay::filler(from, to, p);
            }
        }
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for Overlay {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        self.pos = self.file.seek(to)?;
        Ok(self.pos)
    }
}
