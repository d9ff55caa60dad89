//! Block-layer events, in the vocabulary of blktrace.
//!
//! Every importer (blktrace binary, blk tracer, tracepoint text, blkparse
//! text) produces these, so the analyses never care where an event came from.

use std::fmt;

/// A device number in the kernel's internal encoding (`major << 20 | minor`),
/// the one both `blk_io_trace.device` and tracepoint `dev` fields use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Dev(pub u32);

/// A request's sector as trace tools show it. `block_rq_complete` reports
/// a data-less request (a flush) at sector -1 (`blk_rq_pos`), while the
/// issue reports it at 0 (`blk_rq_trace_sector`): both become 0, so that
/// the completion finds its request.
pub fn trace_sector(sector: u64) -> u64 {
    if sector == u64::MAX {
        0
    } else {
        sector
    }
}

impl Dev {
    pub const MINOR_BITS: u32 = 20;

    pub fn new(major: u32, minor: u32) -> Dev {
        Dev((major << Self::MINOR_BITS) | (minor & ((1 << Self::MINOR_BITS) - 1)))
    }
    pub fn major(self) -> u32 {
        self.0 >> Self::MINOR_BITS
    }
    pub fn minor(self) -> u32 {
        self.0 & ((1 << Self::MINOR_BITS) - 1)
    }
    /// Devices btt treats as remappers (md and device-mapper): their Q2C and
    /// Q2Q go to the `*dm` rows.
    pub fn is_remapper(self) -> bool {
        matches!(self.major(), 9 | 253 | 254)
    }
    /// Parses `MAJ,MIN` from bytes (the hot path of text parsing).
    pub fn parse_bytes(b: &[u8]) -> Option<Dev> {
        let comma = b.iter().position(|&c| c == b',')?;
        let num = |d: &[u8]| -> Option<u32> {
            if d.is_empty() || d.len() > 7 {
                return None;
            }
            d.iter().try_fold(0u32, |v, &c| {
                c.is_ascii_digit().then(|| v * 10 + (c - b'0') as u32)
            })
        };
        let (major, minor) = (num(&b[..comma])?, num(&b[comma + 1..])?);
        (major < (1 << 12) && minor < (1 << Self::MINOR_BITS)).then(|| Dev::new(major, minor))
    }

    /// Parses `"MAJ,MIN"`.
    pub fn parse(s: &str) -> Option<Dev> {
        let (a, b) = s.split_once(',')?;
        Some(Dev::new(a.trim().parse().ok()?, b.trim().parse().ok()?))
    }
}

impl fmt::Display for Dev {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{},{}", self.major(), self.minor())
    }
}

/// What happened to the I/O. The discriminants of the first 17 are blktrace's
/// `__BLK_TA_*` numbers; the rest exist only as tracepoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Action {
    Queue = 1,
    BackMerge = 2,
    FrontMerge = 3,
    GetRq = 4,
    SleepRq = 5,
    Requeue = 6,
    Issue = 7,
    Complete = 8,
    Plug = 9,
    UnplugIo = 10,
    UnplugTimer = 11,
    Insert = 12,
    Split = 13,
    Bounce = 14,
    Remap = 15,
    Abort = 16,
    DrvData = 17,
    /// `block_rq_merge`: two requests merged in the I/O scheduler.
    RqMerge = 32,
    /// `block_bio_complete` (blktrace logs these as C too).
    BioComplete = 33,
    /// `block_rq_error`.
    RqError = 34,
    /// `block_io_start` / `block_io_done`: accounting start and end.
    IoStart = 35,
    IoDone = 36,
}

impl Action {
    /// Every action.
    pub const ALL: [Action; 22] = {
        use Action::*;
        [
            Queue,
            BackMerge,
            FrontMerge,
            GetRq,
            SleepRq,
            Requeue,
            Issue,
            Complete,
            Plug,
            UnplugIo,
            UnplugTimer,
            Insert,
            Split,
            Bounce,
            Remap,
            Abort,
            DrvData,
            RqMerge,
            BioComplete,
            RqError,
            IoStart,
            IoDone,
        ]
    };

    pub fn from_blktrace(ta: u32) -> Option<Action> {
        use Action::*;
        Some(match ta {
            1 => Queue,
            2 => BackMerge,
            3 => FrontMerge,
            4 => GetRq,
            5 => SleepRq,
            6 => Requeue,
            7 => Issue,
            8 => Complete,
            9 => Plug,
            10 => UnplugIo,
            11 => UnplugTimer,
            12 => Insert,
            13 => Split,
            14 => Bounce,
            15 => Remap,
            16 => Abort,
            17 => DrvData,
            _ => return None,
        })
    }

    /// The `__BLK_TA_*` number to write into a blktrace file, if blktrace has one.
    pub fn blktrace_code(self) -> Option<u32> {
        let c = self as u32;
        if c <= 17 {
            Some(c)
        } else if self == Action::BioComplete {
            Some(Action::Complete as u32)
        } else {
            None
        }
    }

    /// blkparse's one- or two-letter action code.
    pub fn letter(self) -> &'static str {
        use Action::*;
        match self {
            Queue => "Q",
            BackMerge => "M",
            FrontMerge => "F",
            GetRq => "G",
            SleepRq => "S",
            Requeue => "R",
            Issue => "D",
            Complete | BioComplete => "C",
            Plug => "P",
            UnplugIo => "U",
            UnplugTimer => "UT",
            Insert => "I",
            Split => "X",
            Bounce => "B",
            Remap => "A",
            Abort => "K",
            DrvData => "d",
            RqMerge => "rqM",
            RqError => "E",
            IoStart => "io_start",
            IoDone => "io_done",
        }
    }

    pub fn from_letter(s: &str) -> Option<Action> {
        use Action::*;
        Some(match s {
            "Q" => Queue,
            "M" => BackMerge,
            "F" => FrontMerge,
            "G" => GetRq,
            "S" => SleepRq,
            "R" => Requeue,
            "D" => Issue,
            "C" => Complete,
            "P" => Plug,
            "U" => UnplugIo,
            "UT" => UnplugTimer,
            "I" => Insert,
            "X" => Split,
            "B" => Bounce,
            "A" => Remap,
            "K" => Abort,
            _ => return None,
        })
    }

    /// Maps a block tracepoint name (without `block:`) to its action.
    pub fn from_tracepoint(name: &str) -> Option<Action> {
        Action::from_tracepoint_bytes(name.as_bytes())
    }

    /// Like `from_tracepoint`, on the bytes of a trace line (no UTF-8
    /// check: this runs on every text event).
    pub fn from_tracepoint_bytes(name: &[u8]) -> Option<Action> {
        use Action::*;
        let rest = name.strip_prefix(b"block_")?;
        Some(match rest {
            b"bio_queue" => Queue,
            b"bio_backmerge" => BackMerge,
            b"bio_frontmerge" => FrontMerge,
            b"getrq" => GetRq,
            b"sleeprq" => SleepRq,
            b"rq_requeue" => Requeue,
            b"rq_issue" => Issue,
            b"rq_complete" => Complete,
            b"plug" => Plug,
            b"unplug" => UnplugIo,
            b"rq_insert" => Insert,
            b"split" => Split,
            b"bio_bounce" => Bounce,
            b"bio_remap" | b"rq_remap" => Remap,
            b"rq_merge" => RqMerge,
            b"bio_complete" => BioComplete,
            b"rq_error" => RqError,
            b"io_start" => IoStart,
            b"io_done" => IoDone,
            _ => return None,
        })
    }

    /// The tracepoint that logs this action (the first, for Remap), for
    /// tests that write trace text; checked against `from_tracepoint`.
    #[cfg(test)]
    pub fn tracepoint(self) -> Option<&'static str> {
        use Action::*;
        Some(match self {
            Queue => "block_bio_queue",
            BackMerge => "block_bio_backmerge",
            FrontMerge => "block_bio_frontmerge",
            GetRq => "block_getrq",
            SleepRq => "block_sleeprq",
            Requeue => "block_rq_requeue",
            Issue => "block_rq_issue",
            Complete => "block_rq_complete",
            Plug => "block_plug",
            UnplugIo => "block_unplug",
            Insert => "block_rq_insert",
            Split => "block_split",
            Bounce => "block_bio_bounce",
            Remap => "block_bio_remap",
            RqMerge => "block_rq_merge",
            BioComplete => "block_bio_complete",
            RqError => "block_rq_error",
            IoStart => "block_io_start",
            IoDone => "block_io_done",
            UnplugTimer | Abort | DrvData => return None,
        })
    }

    /// Request-level events (as opposed to bio-level ones) carry the whole
    /// request's range.
    pub fn is_request_level(self) -> bool {
        use Action::*;
        matches!(
            self,
            Insert | Issue | Complete | Requeue | RqMerge | RqError | IoStart | IoDone
        )
    }
}

/// The operation and its flags, as the kernel's `rwbs` string encodes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Rwbs(pub u16);

impl Rwbs {
    pub const READ: u16 = 1 << 0;
    pub const WRITE: u16 = 1 << 1;
    pub const DISCARD: u16 = 1 << 2;
    /// A flush operation (`REQ_OP_FLUSH`), the lone `F`.
    pub const FLUSH: u16 = 1 << 3;
    /// `REQ_PREFLUSH`: a leading `F` before the operation letter.
    pub const PREFLUSH: u16 = 1 << 4;
    pub const FUA: u16 = 1 << 5;
    pub const AHEAD: u16 = 1 << 6;
    pub const SYNC: u16 = 1 << 7;
    pub const META: u16 = 1 << 8;
    pub const SECURE: u16 = 1 << 9;
    /// `N`: no data direction (e.g. a plug or an empty flush in blkparse).
    pub const NONE: u16 = 1 << 10;

    pub fn has(self, flag: u16) -> bool {
        self.0 & flag != 0
    }
    pub fn is_read(self) -> bool {
        self.has(Self::READ)
    }
    pub fn is_write(self) -> bool {
        self.has(Self::WRITE)
    }
    pub fn is_discard(self) -> bool {
        self.has(Self::DISCARD)
    }
    pub fn is_flush(self) -> bool {
        self.has(Self::FLUSH) || self.has(Self::PREFLUSH)
    }

    /// Parses the kernel's rwbs text (`blk_fill_rwbs`), e.g. `RS`, `WFS`,
    /// `FWS`, `F`, `DE`, `N`, `RA`, `WM`.
    pub fn parse(s: &[u8]) -> Option<Rwbs> {
        if s.is_empty() || s.len() > 9 {
            return None;
        }
        let mut f = 0u16;
        let mut i = 0;
        // A leading F followed by an operation letter is REQ_PREFLUSH.
        if s[0] == b'F' && s.len() > 1 && matches!(s[1], b'W' | b'R' | b'D' | b'N' | b'F') {
            f |= Self::PREFLUSH;
            i = 1;
        }
        match s[i] {
            b'R' => f |= Self::READ,
            b'W' => f |= Self::WRITE,
            b'D' => {
                f |= Self::DISCARD;
                if s.get(i + 1) == Some(&b'E') {
                    f |= Self::SECURE;
                    i += 1;
                }
            }
            b'F' => f |= Self::FLUSH,
            b'N' => f |= Self::NONE,
            _ => return None,
        }
        for &c in &s[i + 1..] {
            match c {
                b'F' => f |= Self::FUA,
                b'A' => f |= Self::AHEAD,
                b'S' => f |= Self::SYNC,
                b'M' => f |= Self::META,
                b'E' => f |= Self::SECURE,
                b'W' => f |= Self::WRITE,
                b'R' => f |= Self::READ,
                _ => return None,
            }
        }
        Some(Rwbs(f))
    }

    /// Decodes the category bits of a blktrace `action` the way blkparse's
    /// `fill_rwbs` does.
    pub fn from_blktrace(action: u32, bytes: u32) -> Rwbs {
        let cat = action >> 16;
        let mut f = 0;
        if cat & tc::FLUSH != 0 {
            f |= Self::PREFLUSH;
        }
        if cat & tc::DISCARD != 0 {
            f |= Self::DISCARD;
        } else if cat & tc::WRITE != 0 {
            f |= Self::WRITE;
        } else if bytes != 0 {
            f |= Self::READ;
        } else if f & Self::PREFLUSH != 0 {
            // blkparse prints a bare `F` for an empty flush.
            f = Self::FLUSH;
        } else {
            f |= Self::NONE;
        }
        if cat & tc::FUA != 0 {
            f |= Self::FUA;
        }
        if cat & tc::AHEAD != 0 {
            f |= Self::AHEAD;
        }
        if cat & tc::SYNC != 0 {
            f |= Self::SYNC;
        }
        if cat & tc::META != 0 {
            f |= Self::META;
        }
        Rwbs(f)
    }

    /// The category bits (`BLK_TC_*`) that the kernel would set for this
    /// operation.
    pub fn blktrace_categories(self) -> u32 {
        let mut c = 0;
        if self.has(Self::WRITE) || self.has(Self::DISCARD) {
            c |= tc::WRITE;
        } else {
            c |= tc::READ;
        }
        if self.has(Self::DISCARD) {
            c |= tc::DISCARD;
        }
        if self.has(Self::PREFLUSH) || self.has(Self::FLUSH) {
            c |= tc::FLUSH;
        }
        if self.has(Self::FUA) {
            c |= tc::FUA;
        }
        if self.has(Self::SYNC) {
            c |= tc::SYNC;
        }
        if self.has(Self::AHEAD) {
            c |= tc::AHEAD;
        }
        if self.has(Self::META) {
            c |= tc::META;
        }
        c
    }
}

impl fmt::Display for Rwbs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::with_capacity(6);
        if self.has(Self::PREFLUSH) {
            s.push('F');
        }
        if self.has(Self::DISCARD) {
            s.push('D');
            if self.has(Self::SECURE) {
                s.push('E');
            }
        } else if self.has(Self::WRITE) {
            s.push('W');
        } else if self.has(Self::READ) {
            s.push('R');
        } else if self.has(Self::FLUSH) {
            s.push('F');
        } else {
            s.push('N');
        }
        if self.has(Self::FUA) {
            s.push('F');
        }
        if self.has(Self::AHEAD) {
            s.push('A');
        }
        if self.has(Self::SYNC) {
            s.push('S');
        }
        if self.has(Self::META) {
            s.push('M');
        }
        f.write_str(&s)
    }
}

/// blktrace category bits (`BLK_TC_*`), already shifted down by 16.
pub mod tc {
    pub const READ: u32 = 1 << 0;
    pub const WRITE: u32 = 1 << 1;
    pub const FLUSH: u32 = 1 << 2;
    pub const SYNC: u32 = 1 << 3;
    pub const QUEUE: u32 = 1 << 4;
    pub const REQUEUE: u32 = 1 << 5;
    pub const ISSUE: u32 = 1 << 6;
    pub const COMPLETE: u32 = 1 << 7;
    pub const FS: u32 = 1 << 8;
    pub const PC: u32 = 1 << 9;
    pub const NOTIFY: u32 = 1 << 10;
    pub const AHEAD: u32 = 1 << 11;
    pub const META: u32 = 1 << 12;
    pub const DISCARD: u32 = 1 << 13;
    pub const FUA: u32 = 1 << 15;
}

/// A task name, as the kernel keeps it (at most 15 bytes + NUL), stored
/// inline so that events need no allocation.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Comm {
    len: u8,
    bytes: [u8; 23],
}

impl Comm {
    pub fn new(s: &[u8]) -> Comm {
        let mut c = Comm::default();
        let n = s.len().min(c.bytes.len());
        c.bytes[..n].copy_from_slice(&s[..n]);
        c.len = n as u8;
        c
    }
    pub fn as_str(&self) -> &str {
        let b = &self.bytes[..self.len as usize];
        match std::str::from_utf8(b) {
            Ok(s) => s,
            // A name cut inside a multi-byte character: keep the valid prefix.
            Err(e) => std::str::from_utf8(&b[..e.valid_up_to()]).unwrap_or(""),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl fmt::Debug for Comm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

impl fmt::Display for Comm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Payload that only some actions carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Extra {
    #[default]
    None,
    /// A (remap): where the I/O came from.
    Remap { from_dev: Dev, from_sector: u64 },
    /// X (split): the sector where the second part starts.
    Split { new_sector: u64 },
    /// U/UT (unplug): how many requests the unplug released.
    Unplug { depth: u32 },
}

/// One block-layer event.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockEvent {
    /// Nanoseconds in the trace's clock.
    pub ts: u64,
    pub dev: Dev,
    pub action: Action,
    pub rwbs: Rwbs,
    pub sector: u64,
    /// Payload size in bytes as the source recorded it; sectors are `bytes >> 9`.
    pub bytes: u32,
    /// Task that was running when the event fired.
    pub pid: u32,
    pub cpu: u32,
    /// Completion status (C only), 0 when fine.
    pub error: i32,
    /// Name of the task (from the event or the trace's pid→name notes).
    pub comm: Comm,
    /// A passthrough (SCSI/NVMe command) request rather than a filesystem one.
    pub passthrough: bool,
    pub extra: Extra,
}

impl BlockEvent {
    pub fn sectors(&self) -> u64 {
        (self.bytes >> 9) as u64
    }
}

impl BlockEvent {
    /// A plain event on 8,0 from pid 1, for unit tests of the analyses.
    #[cfg(test)]
    pub fn for_test(ts: u64, action: Action, sector: u64, sectors: u32, rwbs: u16) -> BlockEvent {
        BlockEvent {
            ts,
            dev: Dev::new(8, 0),
            action,
            rwbs: Rwbs(rwbs),
            sector,
            bytes: sectors * 512,
            pid: 1,
            cpu: 0,
            error: 0,
            comm: Comm::default(),
            passthrough: false,
            extra: Extra::None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Action;

    #[test]
    fn each_actions_tracepoint_decodes_to_it() {
        for ta in 1..=40 {
            let Some(a) = Action::from_blktrace(ta) else {
                continue;
            };
            if let Some(name) = a.tracepoint() {
                assert_eq!(Action::from_tracepoint(name), Some(a), "{name}");
            }
        }
        assert_eq!(Action::Issue.tracepoint(), Some("block_rq_issue"));
    }
}
