//! blktrace's binary record, `struct blk_io_trace` version 7 (48 bytes and a
//! payload), in either byte order.
//!
//! Two containers hold it:
//! - blktrace files: the per-CPU `DEV.blktrace.N` that `blktrace` writes and
//!   the single file of `blkparse -d`: records back to back;
//! - the kernel's `blk` tracer read from tracefs with `options/bin` set: each
//!   record is preceded by a 16-byte header (pid, cpu, timestamp), and the
//!   kernel overwrites `magic`/`sequence`/`time` of the record it copies.

use super::source::{InputError, Source, SourceStats};
use crate::model::{block::tc, Action, BlockEvent, Comm, Dev, Event, Extra, Rwbs};
use std::path::{Path, PathBuf};

pub const MAGIC: u32 = 0x6561_7400;
pub const VERSION: u32 = 0x07;
pub const RECORD_LEN: usize = 48;
/// The pid/cpu/timestamp header the `blk` tracer puts before each record.
pub const TRACER_HEADER_LEN: usize = 16;

/// `__BLK_TA_CGROUP`: the payload starts with an 8-byte cgroup id.
const TA_CGROUP: u32 = 1 << 8;
/// Notify actions (`BLK_TN_*`), category NOTIFY.
const TN_PROCESS: u32 = 0;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Container {
    /// Plain records, as blktrace and `blkparse -d` write them.
    Blktrace,
    /// The `blk` tracer's binary output: 16-byte header before each record.
    BlkTracer,
}

/// Whether the bytes start like a blktrace record, and in which byte order.
pub fn magic_order(b: &[u8]) -> Option<bool> {
    if b.len() < 4 {
        return None;
    }
    let le = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    let be = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    if le & 0xffff_ff00 == MAGIC {
        Some(true)
    } else if be & 0xffff_ff00 == MAGIC {
        Some(false)
    } else {
        None
    }
}

/// Length of a leading `# tracer: blk` text header, as the `trace` file
/// prints it before the binary records.
pub fn text_header_len(b: &[u8]) -> usize {
    let mut at = 0;
    while at < b.len() && b[at] == b'#' {
        match memchr::memchr(b'\n', &b[at..]) {
            Some(n) => at += n + 1,
            None => return b.len(),
        }
    }
    at
}

/// Detects which container the bytes are, if any.
pub fn detect(b: &[u8]) -> Option<Container> {
    if magic_order(b).is_some() {
        return Some(Container::Blktrace);
    }
    let h = text_header_len(b);
    let rest = &b[h..];
    if rest.len() >= TRACER_HEADER_LEN + 4 && magic_order(&rest[TRACER_HEADER_LEN..]).is_some() {
        return Some(Container::BlkTracer);
    }
    None
}

pub struct BlktraceSource {
    path: PathBuf,
    data: super::Bytes,
    pos: usize,
    little: bool,
    container: Container,
    stats: SourceStats,
    done: bool,
    last_ts: Option<u64>,
}

impl BlktraceSource {
    pub fn open(path: &Path, data: super::Bytes, container: Container) -> Result<Self, InputError> {
        let start = match container {
            Container::Blktrace => 0,
            Container::BlkTracer => text_header_len(&data),
        };
        let magic_at = start
            + match container {
                Container::Blktrace => 0,
                Container::BlkTracer => TRACER_HEADER_LEN,
            };
        let little = match magic_order(&data[magic_at.min(data.len())..]) {
            Some(l) => l,
            None => {
                let b = &data[magic_at.min(data.len())..];
                let shown: Vec<String> = b.iter().take(4).map(|x| format!("{x:02x}")).collect();
                return Err(InputError::new(
                    path,
                    format!(
                        "not a blktrace file: bad magic {} at byte {} (expected 0x656174NN, either byte order)",
                        shown.join(" "),
                        magic_at
                    ),
                ));
            }
        };
        let version = if little {
            data[magic_at]
        } else {
            data[magic_at + 3]
        } as u32;
        if version != VERSION {
            return Err(InputError::new(
                path,
                format!("blktrace version {version} is not supported (iosleuth reads version {VERSION})"),
            ));
        }
        Ok(BlktraceSource {
            path: path.to_path_buf(),
            data,
            pos: start,
            little,
            container,
            stats: SourceStats::default(),
            done: false,
            last_ts: None,
        })
    }

    fn u16_at(&self, at: usize) -> u16 {
        let b = [self.data[at], self.data[at + 1]];
        if self.little {
            u16::from_le_bytes(b)
        } else {
            u16::from_be_bytes(b)
        }
    }
    fn u32_at(&self, at: usize) -> u32 {
        let b: [u8; 4] = self.data[at..at + 4].try_into().unwrap();
        if self.little {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        }
    }
    fn u64_at(&self, at: usize) -> u64 {
        let b: [u8; 8] = self.data[at..at + 8].try_into().unwrap();
        if self.little {
            u64::from_le_bytes(b)
        } else {
            u64::from_be_bytes(b)
        }
    }

    fn stop(&mut self, why: String) -> Option<Event> {
        self.stats.cut_short = Some(why);
        self.done = true;
        None
    }
}

fn be_u64(b: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(b.get(..8)?.try_into().ok()?))
}
fn be_u32(b: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(..4)?.try_into().ok()?))
}

impl Source for BlktraceSource {
    fn next_event(&mut self) -> Option<Event> {
        loop {
            if self.done || self.pos >= self.data.len() {
                return None;
            }
            // The tracer reports ring-buffer overruns in text, even in
            // binary mode: `CPU:1 [LOST 1234 EVENTS]`.
            if self.container == Container::BlkTracer && self.data[self.pos..].starts_with(b"CPU:")
            {
                let rest = &self.data[self.pos..];
                let end = memchr::memchr(b'\n', rest)
                    .map(|n| n + 1)
                    .unwrap_or(rest.len());
                let line = &rest[..end];
                let lost = memchr::memmem::find(line, b"[LOST ").and_then(|at| {
                    let digits: Vec<u8> = line[at + 6..]
                        .iter()
                        .take_while(|c| c.is_ascii_digit())
                        .copied()
                        .collect();
                    std::str::from_utf8(&digits).ok()?.parse::<u64>().ok()
                });
                if let Some(n) = lost {
                    self.stats.lost_events += n;
                    self.stats.lost_reports.push((self.last_ts, n));
                    self.pos += end;
                    continue;
                }
            }
            let left = self.data.len() - self.pos;
            let hdr = match self.container {
                Container::Blktrace => 0,
                Container::BlkTracer => TRACER_HEADER_LEN,
            };
            if left < hdr + RECORD_LEN {
                let at = self.pos;
                return self.stop(format!(
                    "truncated: the last record at byte {at} is cut off ({left} of {} bytes); it was skipped",
                    hdr + RECORD_LEN
                ));
            }
            let r = self.pos + hdr;
            let magic = self.u32_at(r);
            if magic & 0xffff_ff00 != MAGIC || magic & 0xff != VERSION {
                let at = r;
                let rest = self.data.len() - self.pos;
                return self.stop(format!(
                    "bad magic or version 0x{magic:08x} at byte {at}: the remaining {rest} bytes were skipped"
                ));
            }
            let pdu_len = self.u16_at(r + 46) as usize;
            let total = hdr + RECORD_LEN + pdu_len;
            if left < total {
                let at = self.pos;
                return self.stop(format!(
                    "truncated: the last record at byte {at} is cut off ({left} of {total} bytes); it was skipped"
                ));
            }
            let (ts, cpu) = match self.container {
                Container::Blktrace => (self.u64_at(r + 8), self.u32_at(r + 40)),
                // The kernel's own timestamp and CPU of the entry are in the header.
                Container::BlkTracer => (self.u64_at(self.pos + 8), self.u32_at(self.pos + 4)),
            };
            let sector = self.u64_at(r + 16);
            let bytes = self.u32_at(r + 24);
            let action = self.u32_at(r + 28);
            let pid = self.u32_at(r + 32);
            let dev = Dev(self.u32_at(r + 36));
            let error = self.u16_at(r + 44) as i16 as i32;
            let mut pdu = &self.data[r + RECORD_LEN..r + RECORD_LEN + pdu_len];
            let rec_at = self.pos;
            self.pos += total;

            let category = action >> 16;
            let ta = action & 0xffff;
            if ta & TA_CGROUP != 0 && pdu.len() >= 8 {
                pdu = &pdu[8..];
            }
            let ta = ta & !TA_CGROUP;
            if category & tc::NOTIFY != 0 {
                if ta == TN_PROCESS {
                    let end = memchr::memchr(0, pdu).unwrap_or(pdu.len());
                    self.stats.events += 1;
                    return Some(Event::ProcessName {
                        pid,
                        comm: Comm::new(&pdu[..end]),
                    });
                }
                // Timestamps and messages carry nothing the analyses use.
                continue;
            }
            let Some(act) = Action::from_blktrace(ta) else {
                self.stats
                    .skip(|| format!("record at byte {rec_at} with unknown action {ta}"));
                continue;
            };
            let extra = match act {
                Action::Remap => match (be_u32(pdu), be_u64(pdu.get(8..).unwrap_or(&[]))) {
                    (Some(from), Some(sec)) => Extra::Remap {
                        from_dev: Dev(from),
                        from_sector: sec,
                    },
                    _ => Extra::None,
                },
                Action::Split => be_u64(pdu)
                    .map(|s| Extra::Split { new_sector: s })
                    .unwrap_or_default(),
                Action::UnplugIo | Action::UnplugTimer => be_u64(pdu)
                    .map(|d| Extra::Unplug { depth: d as u32 })
                    .unwrap_or_default(),
                _ => Extra::None,
            };
            self.stats.events += 1;
            self.last_ts = Some(ts);
            return Some(Event::Block(BlockEvent {
                ts,
                dev,
                action: act,
                rwbs: Rwbs::from_blktrace(action, bytes),
                sector,
                bytes,
                pid,
                cpu,
                error,
                comm: Comm::default(),
                passthrough: category & tc::PC != 0,
                extra,
            }));
        }
    }
    fn path(&self) -> &Path {
        &self.path
    }
    fn format(&self) -> &'static str {
        match self.container {
            Container::Blktrace => "blktrace",
            Container::BlkTracer => "blk tracer (binary)",
        }
    }
    fn stats(&self) -> &SourceStats {
        &self.stats
    }
}
