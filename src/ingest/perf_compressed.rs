//! perf.data's compressed records (`perf record -z`: PERF_RECORD_COMPRESSED
//! and COMPRESSED2, zstd), measured before the perf.data crate reads them.
//! The crate decompresses each record whole into memory and keeps every
//! record it holds until the round ends, with no bound: one 48 KB record
//! of zstd inflates to 1.5 GiB. So the file's records are walked first, the
//! compressed ones decompressed (as the crate does, one stream across
//! records) into a small buffer that is only counted, and a file whose
//! records inflate past what perf writes is refused with what is wrong.
//! Past `--max-input`, the records from the one that crossed it on are left
//! out (read as round ends, perf_damage.rs), as other inputs stop there.

use super::compressed::Meter;
use std::io::{BufReader, Read, Seek, SeekFrom};

const PERF_RECORD_AUXTRACE: u32 = 71;
const PERF_RECORD_FINISHED_ROUND: u32 = 68;
const PERF_RECORD_COMPRESSED: u32 = 81;
const PERF_RECORD_COMPRESSED2: u32 = 83;

/// The most one compressed record may inflate to. perf writes at most 64
/// KiB of zstd a record, of one ring buffer's data (512 KiB by default):
/// it decompresses each into a buffer of that size and no more.
pub const MAX_RECORD: u64 = 32 << 20;

/// The most the crate may hold at once of inflated records: a round's
/// (records up to a FINISHED_ROUND are sorted before any is given).
pub const MAX_ROUND: u64 = 1 << 30;

/// What the crate holds of a record besides its bytes (its sort key, its
/// type, the vector and the allocation).
const HELD_PER_RECORD: u64 = 96;

/// What the compressed records decompress to (`None` when the file has
/// none), and where `--max-input` stops the reading: the stretch of the
/// data section left out. Or why the file is refused.
pub type Measured = (Option<Meter>, Option<(u64, u64)>);

pub fn measure(f: &mut std::fs::File) -> Result<Measured, String> {
    let mut h = [0u8; 104];
    f.seek(SeekFrom::Start(0))
        .and_then(|_| f.read_exact(&mut h))
        .map_err(|e| format!("cannot read: {e}"))?;
    let u64_at = |at: usize| u64::from_le_bytes(h[at..at + 8].try_into().unwrap());
    let (start, size) = (u64_at(40), u64_at(48));
    f.seek(SeekFrom::Start(start))
        .map_err(|e| format!("cannot read: {e}"))?;
    let mut walk = Walk {
        r: BufReader::with_capacity(1 << 20, f),
        at: start,
        end: start.saturating_add(size),
        inflater: None,
        round: Round::default(),
        records: Records::default(),
        limit_at: None,
    };
    walk.records_until_damage()?;
    let cut = walk.limit_at.map(|at| (at, walk.end));
    Ok((walk.inflater.map(|i| i.meter), cut))
}

struct Walk<'a> {
    r: BufReader<&'a mut std::fs::File>,
    /// The file offset of the next record.
    at: u64,
    end: u64,
    inflater: Option<Inflater>,
    round: Round,
    records: Records,
    /// The record that crossed `--max-input`.
    limit_at: Option<u64>,
}

/// The inflated records of the round being read.
#[derive(Default)]
struct Round {
    /// Where its first compressed record is.
    from: Option<u64>,
    held: u64,
    records: u64,
}

/// zstd's decoder and what it decompressed.
struct Inflater {
    dctx: zstd_safe::DCtx<'static>,
    buf: Vec<u8>,
    meter: Meter,
}

impl Walk<'_> {
    /// Reads every record until the data ends or the crate would stop (a
    /// record it cannot frame): what it would not read is not measured.
    fn records_until_damage(&mut self) -> Result<(), String> {
        let mut header = [0u8; 8];
        let mut body = Vec::new();
        while self.at.saturating_add(8) <= self.end {
            if self.r.read_exact(&mut header).is_err() {
                return Ok(());
            }
            let kind = u32::from_le_bytes(header[..4].try_into().unwrap());
            let size = u64::from(u16::from_le_bytes([header[6], header[7]]));
            if size < 8 {
                return Ok(());
            }
            let at = self.at;
            self.at += size;
            let body_len = size - 8;
            match kind {
                PERF_RECORD_COMPRESSED | PERF_RECORD_COMPRESSED2 => {
                    body.resize(body_len as usize, 0);
                    if self.r.read_exact(&mut body).is_err() {
                        return Ok(());
                    }
                    let data = match kind {
                        PERF_RECORD_COMPRESSED => &body[..],
                        // u64 size, then the data and padding.
                        _ => match body
                            .get(..8)
                            .map(|s| u64::from_le_bytes(s.try_into().unwrap()))
                        {
                            Some(n) if n <= body_len - 8 => &body[8..8 + n as usize],
                            _ => return Ok(()),
                        },
                    };
                    if !self.inflate(at, data)? {
                        return Ok(());
                    }
                }
                PERF_RECORD_FINISHED_ROUND => self.round = Round::default(),
                _ => {
                    let mut skip = body_len;
                    // AUXTRACE's data follows the record, its size first
                    // in the record.
                    if kind == PERF_RECORD_AUXTRACE && body_len >= 8 {
                        let mut n = [0u8; 8];
                        if self.r.read_exact(&mut n).is_err() {
                            return Ok(());
                        }
                        let aux = u64::from_le_bytes(n);
                        self.at = self.at.saturating_add(aux);
                        skip = (body_len - 8).saturating_add(aux);
                    }
                    let Ok(skip) = i64::try_from(skip) else {
                        return Ok(());
                    };
                    if self.r.seek_relative(skip).is_err() {
                        return Ok(());
                    }
                }
            }
        }
        Ok(())
    }

    /// Decompresses one record's data, counting it; false when the crate
    /// would stop there (zstd refuses it, or what it holds is no record:
    /// the crate finds that out only once the record is decompressed whole).
    fn inflate(&mut self, at: u64, data: &[u8]) -> Result<bool, String> {
        let inf = self.inflater.get_or_insert_with(|| Inflater {
            dctx: zstd_safe::DCtx::create(),
            buf: vec![0; 1 << 20],
            meter: Meter::new("zstd data"),
        });
        inf.meter.read_compressed(data.len() as u64);
        let mut input = zstd_safe::InBuffer::around(data);
        let mut inflated = 0u64;
        let mut framed = true;
        loop {
            let mut out = zstd_safe::OutBuffer::around(&mut inf.buf[..]);
            if inf.dctx.decompress_stream(&mut out, &mut input).is_err() {
                return Ok(false);
            }
            let n = out.pos();
            inflated += n as u64;
            inf.meter.inflate(n as u64);
            if inflated > MAX_RECORD {
                return Err(format!(
                    "its compressed record at byte {at} ({} bytes of zstd) decompresses to more than {}, which perf never writes (a record holds one ring buffer's data at most): a damaged file or a decompression bomb",
                    data.len(),
                    super::compressed::size(MAX_RECORD)
                ));
            }
            if inf.meter.inflated() > inf.meter.limit() {
                inf.meter.stop();
                self.limit_at = Some(at);
                return Ok(false);
            }
            framed = framed && self.records.take(&inf.buf[..n]);
            if n < inf.buf.len() && input.pos() == data.len() {
                break;
            }
        }
        if !framed {
            return Ok(false);
        }
        let (bytes, count) = self.records.finished();
        let round = &mut self.round;
        let from = *round.from.get_or_insert(at);
        round.records += count;
        round.held += bytes + count * HELD_PER_RECORD;
        if round.held > MAX_ROUND {
            return Err(format!(
                "its compressed records from byte {from} to byte {at} decompress to {} records that the perf.data reader would hold in memory at once (no FINISHED_ROUND between them), more than {}",
                round.records,
                super::compressed::size(MAX_ROUND)
            ));
        }
        Ok(true)
    }
}

/// The records inside the inflated data, framed as the crate frames them
/// (a record may continue in the next compressed record).
#[derive(Default)]
struct Records {
    /// Bytes of the current record still to come.
    rest: u64,
    /// The next record's header, as far as it came.
    header: Vec<u8>,
    /// Records and their bytes framed since `finished`.
    count: u64,
    bytes: u64,
}

impl Records {
    /// Frames `data`; false at a record shorter than its header (the
    /// crate's InvalidPerfEventSize).
    fn take(&mut self, mut data: &[u8]) -> bool {
        while !data.is_empty() {
            if self.rest > 0 {
                let n = (self.rest as usize).min(data.len());
                self.rest -= n as u64;
                data = &data[n..];
                continue;
            }
            let n = (8 - self.header.len()).min(data.len());
            self.header.extend_from_slice(&data[..n]);
            data = &data[n..];
            if self.header.len() < 8 {
                break;
            }
            let size = u64::from(u16::from_le_bytes([self.header[6], self.header[7]]));
            self.header.clear();
            if size < 8 {
                return false;
            }
            self.count += 1;
            self.bytes += size;
            self.rest = size - 8;
        }
        true
    }

    fn finished(&mut self) -> (u64, u64) {
        (
            std::mem::take(&mut self.bytes),
            std::mem::take(&mut self.count),
        )
    }
}
