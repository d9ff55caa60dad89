//! blktrace's binary record, `struct blk_io_trace` version 7 (48 bytes and a
//! payload), in either byte order.
//!
//! Two containers hold it:
//! - blktrace files: the per-CPU `DEV.blktrace.N` that `blktrace` writes and
//!   the single file of `blkparse -d`: records back to back;
//! - the kernel's `blk` tracer read from tracefs with `options/bin` set: each
//!   record is preceded by a 16-byte header (pid, cpu, timestamp), and the
//!   kernel overwrites `magic`/`sequence`/`time` of the record it copies.

use super::reader::Chunked;
use super::source::{InputError, Position, Source, SourceStats};
use crate::model::{block::tc, Action, BlockEvent, Comm, Dev, Event, Extra, Rwbs};
use std::path::{Path, PathBuf};

pub use crate::model::blktrace_record::{MAGIC, RECORD_LEN, TRACER_HEADER_LEN, VERSION};

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

impl Container {
    /// Bytes before each record.
    fn header_len(self) -> usize {
        match self {
            Container::Blktrace => 0,
            Container::BlkTracer => TRACER_HEADER_LEN,
        }
    }
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

/// Where the first binary record starts after the text the tracer may put
/// before it: the `# tracer: blk` header of the `trace` file, and lost-event
/// lines (`CPU:0 [LOST 9 EVENTS]`). A record's first bytes are a pid and may
/// look like text (pid 0x1223 starts with `#`), so each candidate start is
/// confirmed by the magic of a record at it.
pub fn text_header_len(b: &[u8]) -> usize {
    let mut at = 0;
    for _ in 0..16 {
        if b.len() >= at + TRACER_HEADER_LEN + 4
            && magic_order(&b[at + TRACER_HEADER_LEN..]).is_some()
        {
            return at;
        }
        let rest = &b[at..];
        if !(rest.starts_with(b"#") || rest.starts_with(b"CPU:")) {
            return at;
        }
        match memchr::memchr(b'\n', rest) {
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
    input: Chunked,
    little: bool,
    container: Container,
    stats: SourceStats,
    done: bool,
    last_ts: Option<u64>,
    /// Offset of the record returned last.
    last_at: u64,
}

// Readers of the fixed part of a record: the byte order and the
// container's header are constants of the caller's copy (`read_into`),
// so that each field is one load without a check or a branch (a third
// fewer instructions than reading with the order as a value).
#[inline(always)]
fn u16_of<const LITTLE: bool, const N: usize>(b: &[u8; N], at: usize) -> u16 {
    let v = [b[at], b[at + 1]];
    if LITTLE {
        u16::from_le_bytes(v)
    } else {
        u16::from_be_bytes(v)
    }
}
#[inline(always)]
fn u32_of<const LITTLE: bool, const N: usize>(b: &[u8; N], at: usize) -> u32 {
    let v: [u8; 4] = b[at..at + 4].try_into().expect("4 bytes");
    if LITTLE {
        u32::from_le_bytes(v)
    } else {
        u32::from_be_bytes(v)
    }
}
#[inline(always)]
fn u64_of<const LITTLE: bool, const N: usize>(b: &[u8; N], at: usize) -> u64 {
    let v: [u8; 8] = b[at..at + 8].try_into().expect("8 bytes");
    if LITTLE {
        u64::from_le_bytes(v)
    } else {
        u64::from_be_bytes(v)
    }
}

/// The record that starts `HDR` bytes into `b` (its fixed part), once `b`
/// is known to hold it.
#[inline(always)]
fn record<const HDR: usize>(b: &[u8]) -> &[u8; RECORD_LEN] {
    b[HDR..HDR + RECORD_LEN]
        .try_into()
        .expect("a framed record")
}

impl BlktraceSource {
    pub fn open(path: &Path, mut input: Chunked, container: Container) -> Result<Self, InputError> {
        input.ensure(64 * 1024);
        let mut stats = SourceStats::default();
        if container == Container::BlkTracer {
            let h = text_header_len(input.avail());
            for line in input.avail()[..h].split(|&c| c == b'\n') {
                if let Some(n) = lost_in(line) {
                    stats.lost_events = stats.lost_events.saturating_add(n);
                    stats.lost_reports.push((None, n));
                }
            }
            input.consume(h);
        }
        let magic_at = container.header_len();
        input.ensure(magic_at + RECORD_LEN);
        let head = input.avail();
        let b = &head[magic_at.min(head.len())..];
        let little = match magic_order(b) {
            Some(l) => l,
            None => {
                let shown: Vec<String> = b.iter().take(4).map(|x| format!("{x:02x}")).collect();
                return Err(InputError::new(
                    path,
                    format!(
                        "not a blktrace file: bad magic {} at byte {} (expected 0x656174NN, either byte order)",
                        shown.join(" "),
                        input.offset() as usize + magic_at
                    ),
                ));
            }
        };
        let version = if little { b[0] } else { b[3] } as u32;
        if version != VERSION {
            return Err(InputError::new(
                path,
                format!("blktrace version {version} is not supported (iosleuth reads version {VERSION})"),
            ));
        }
        Ok(BlktraceSource {
            path: path.to_path_buf(),
            input,
            little,
            container,
            stats,
            done: false,
            last_ts: None,
            last_at: 0,
        })
    }

    fn stop(&mut self, why: String) {
        self.stats.cut_short = Some(why);
        self.done = true;
    }

    /// `CPU:1 [LOST 1234 EVENTS]`: the tracer reports ring-buffer overruns
    /// in text, even in binary mode. Returns whether one was consumed.
    fn lost_marker(&mut self) -> bool {
        if self.container != Container::BlkTracer || !self.input.avail().starts_with(b"CPU:") {
            return false;
        }
        let rest = self.input.avail();
        let end = memchr::memchr(b'\n', rest)
            .map(|n| n + 1)
            .unwrap_or(rest.len());
        match lost_in(&rest[..end]) {
            Some(n) => {
                self.stats.lost_events = self.stats.lost_events.saturating_add(n);
                self.stats.lost_reports.push((self.last_ts, n));
                self.input.consume(end);
                true
            }
            None => false,
        }
    }
}

/// The count of a `CPU:N [LOST M EVENTS]` line.
fn lost_in(line: &[u8]) -> Option<u64> {
    let at = memchr::memmem::find(line, b"[LOST ")?;
    let digits = &line[at + 6..];
    let end = digits
        .iter()
        .position(|c| !c.is_ascii_digit())
        .unwrap_or(digits.len());
    std::str::from_utf8(&digits[..end]).ok()?.parse().ok()
}

fn be_u64(b: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(b.get(..8)?.try_into().ok()?))
}
fn be_u32(b: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(..4)?.try_into().ok()?))
}

/// Decodes the record framed at the start of `b` (after the container's
/// header) into `out`: a block event, a process name, or nothing (the
/// other notifications, and actions this reader does not know: counted in
/// `stats` as skipped, with the record's offset `at`).
#[inline(always)]
fn decode<const HDR: usize, const LITTLE: bool>(
    b: &[u8],
    pdu_len: usize,
    at: u64,
    stats: &mut SourceStats,
    out: &mut Option<Event>,
) {
    let f = record::<HDR>(b);
    let (ts, cpu) = if HDR == 0 {
        (
            u64_of::<LITTLE, RECORD_LEN>(f, 8),
            u32_of::<LITTLE, RECORD_LEN>(f, 40),
        )
    } else {
        // The kernel's own timestamp and CPU of the entry are in the header.
        let h: &[u8; TRACER_HEADER_LEN] = b[..TRACER_HEADER_LEN].try_into().expect("a header");
        (
            u64_of::<LITTLE, TRACER_HEADER_LEN>(h, 8),
            u32_of::<LITTLE, TRACER_HEADER_LEN>(h, 4),
        )
    };
    let sector = u64_of::<LITTLE, RECORD_LEN>(f, 16);
    let bytes = u32_of::<LITTLE, RECORD_LEN>(f, 24);
    let action = u32_of::<LITTLE, RECORD_LEN>(f, 28);
    let pid = u32_of::<LITTLE, RECORD_LEN>(f, 32);
    let dev = Dev(u32_of::<LITTLE, RECORD_LEN>(f, 36));
    let error = u16_of::<LITTLE, RECORD_LEN>(f, 44) as i16 as i32;
    let mut pdu = &b[HDR + RECORD_LEN..HDR + RECORD_LEN + pdu_len];

    let category = action >> 16;
    let ta = action & 0xffff;
    if ta & TA_CGROUP != 0 && pdu.len() >= 8 {
        pdu = &pdu[8..];
    }
    let ta = ta & !TA_CGROUP;
    if category & tc::NOTIFY != 0 {
        // Timestamps and messages carry nothing the analyses use.
        if ta == TN_PROCESS {
            let end = memchr::memchr(0, pdu).unwrap_or(pdu.len());
            *out = Some(Event::ProcessName {
                pid,
                comm: Comm::new(&pdu[..end]),
            });
        }
    } else if let Some(act) = Action::from_blktrace(ta) {
        // Kept here rather than in a function of its own: so the optimiser
        // merges this match with `from_blktrace`'s (apart, it cost next_event
        // some 7% more instructions).
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
        *out = Some(Event::Block(BlockEvent {
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
    } else {
        stats.skip(|| format!("record at byte {at} with unknown action {ta}"));
    }
}

impl BlktraceSource {
    /// Frames the next record (all of it buffered, its magic checked; a read
    /// error, a record cut off or a bad magic ends the input) and decodes it
    /// into `slot`.
    #[inline(always)]
    fn read_into<const HDR: usize, const LITTLE: bool>(&mut self, slot: &mut Option<Event>) {
        *slot = None;
        loop {
            if self.done {
                return;
            }
            let left = self.input.ensure(HDR + RECORD_LEN);
            if left == 0 {
                if let Some(e) = self.input.take_error() {
                    self.stop(format!(
                        "read error after byte {}: {e}",
                        self.input.offset()
                    ));
                }
                return;
            }
            if self.lost_marker() {
                continue;
            }
            let at = self.input.offset();
            if left < HDR + RECORD_LEN {
                self.stop(format!(
                    "truncated: the last record at byte {at} is cut off ({left} of {} bytes); it was skipped",
                    HDR + RECORD_LEN
                ));
                return;
            }
            let rec = record::<HDR>(self.input.avail());
            let magic = u32_of::<LITTLE, RECORD_LEN>(rec, 0);
            if magic & 0xffff_ff00 != MAGIC || magic & 0xff != VERSION {
                self.stop(format!(
                    "bad magic or version 0x{magic:08x} at byte {}: the rest of the file was skipped",
                    at + HDR as u64
                ));
                return;
            }
            let pdu_len = u16_of::<LITTLE, RECORD_LEN>(rec, 46) as usize;
            let total = HDR + RECORD_LEN + pdu_len;
            let left = self.input.ensure(total);
            if left < total {
                self.stop(format!(
                    "truncated: the last record at byte {at} is cut off ({left} of {total} bytes); it was skipped"
                ));
                return;
            }
            decode::<HDR, LITTLE>(self.input.avail(), pdu_len, at, &mut self.stats, slot);
            self.input.consume(total);
            if let Some(ev) = slot {
                self.stats.events += 1;
                self.last_at = at;
                if let Event::Block(b) = ev {
                    self.last_ts = Some(b.ts);
                }
                return;
            }
        }
    }
}

impl Source for BlktraceSource {
    fn next_event(&mut self) -> Option<Event> {
        let mut slot = None;
        self.next_into(&mut slot);
        slot
    }

    fn next_into(&mut self, slot: &mut Option<Event>) {
        match (self.container, self.little) {
            (Container::Blktrace, true) => self.read_into::<0, true>(slot),
            (Container::Blktrace, false) => self.read_into::<0, false>(slot),
            (Container::BlkTracer, true) => self.read_into::<TRACER_HEADER_LEN, true>(slot),
            (Container::BlkTracer, false) => self.read_into::<TRACER_HEADER_LEN, false>(slot),
        }
    }
    fn block_only(&self) -> bool {
        true
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
    fn position(&self) -> Position {
        Position::Record(self.last_at)
    }
}
