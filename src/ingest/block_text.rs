//! Decodes the text of block events: tracepoint payloads (as ftrace,
//! trace-cmd and perf print them) and the blktrace-style detail that the
//! `blk` tracer and blkparse print after the action letter.
//!
//! Tracepoint layouts changed over the years (`bytes` added to rq events,
//! the `(cmd)` group, the `ioprio` triple of recent kernels), so the payload
//! is read by the shape of its tokens rather than by position.

use super::text_line::{
    first_word, is_digits, leading_digits, parse_i32, parse_u32, parse_u64, trim, word_end,
};
use crate::model::{Action, BlockEvent, Comm, Dev, Extra, Rwbs};

/// The pieces common to both text forms, before they become an event.
#[derive(Debug, Default, PartialEq)]
struct Detail<'a> {
    sector: Option<u64>,
    nr_sectors: Option<u32>,
    bytes: Option<u32>,
    new_sector: Option<u64>,
    remap: Option<(Dev, u64)>,
    /// Content of the trailing `[...]`: a task name, or an error number.
    bracket: Option<&'a [u8]>,
    /// The number after the bracket (unplug depth).
    after_bracket: Option<u32>,
    has_cmd: bool,
}

/// Splits off a trailing `[...]` (whose content may hold spaces) and what
/// follows it.
fn split_bracket(s: &[u8]) -> (&[u8], Option<&[u8]>, &[u8]) {
    let s = trim(s);
    // Unplug puts a number after the bracket: `[comm] 3`.
    let (body, tail) = match s.last() {
        Some(b']') => (s, &s[..0]),
        _ => match s.iter().rposition(|&c| c == b']') {
            Some(c) if is_digits(trim(&s[c + 1..])) => (&s[..=c], trim(&s[c + 1..])),
            _ => return (s, None, &s[..0]),
        },
    };
    // The name itself may contain `[` (rare); take the last ` [` or a leading `[`.
    let open = body.windows(2).rposition(|w| w == b" [").map(|p| p + 1).or(
        if body.first() == Some(&b'[') {
            Some(0)
        } else {
            None
        },
    );
    match open {
        Some(o) => (&body[..o], Some(&body[o + 1..body.len() - 1]), tail),
        None => (s, None, &s[..0]),
    }
}

/// Whitespace-separated words, by hand: `split` + `filter` + `peekable`
/// made decoding the detail a third of reading a block event line.
struct Words<'a> {
    rest: &'a [u8],
}

impl<'a> Words<'a> {
    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        let r = self.rest;
        let mut i = 0;
        while i < r.len() && r[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == r.len() {
            self.rest = &r[i..];
            return None;
        }
        let start = i;
        while i < r.len() && !r[i].is_ascii_whitespace() {
            i += 1;
        }
        self.rest = &r[i..];
        Some(&r[start..i])
    }
}

/// The ioprio triple of recent kernels: `none,0,0`, `be,4,0`, or `0x2,0,4`
/// where the printer cannot resolve the class (perf).
fn is_ioprio(t: &[u8]) -> bool {
    // One pass: two (a count, then a check) were 1.5 % of reading a
    // block event's line.
    let mut commas = 0;
    for &c in t {
        if c == b',' {
            commas += 1;
        } else if !c.is_ascii_alphanumeric() {
            return false;
        }
    }
    commas == 2
}

fn parse_detail(s: &[u8]) -> Option<Detail<'_>> {
    let (body, bracket, tail) = split_bracket(s);
    let mut d = Detail {
        bracket,
        after_bracket: if tail.is_empty() {
            None
        } else {
            parse_u32(tail)
        },
        ..Detail::default()
    };
    let mut toks = Words { rest: body };
    while let Some(t) = toks.next() {
        if t[0] == b'(' {
            // `(cmd)`: may span several tokens, or be `(maj,min)` of a remap.
            d.has_cmd = true;
            let mut last = t;
            while last.last() != Some(&b')') {
                last = toks.next()?;
            }
            continue;
        }
        if t == b"<-" {
            let devtok = toks.next()?;
            let inner = devtok.strip_prefix(b"(")?.strip_suffix(b")")?;
            let dev = Dev::parse_bytes(inner)?;
            let from = parse_u64(toks.next()?)?;
            d.remap = Some((dev, from));
            // rq_remap adds nr_bios; nothing uses it.
            let _ = toks.next();
            continue;
        }
        if t[0].is_ascii_digit() && is_digits(t) {
            let n = parse_u64(t)?;
            let before = toks.rest;
            match toks.next() {
                Some(b"+") => {
                    d.sector = Some(n);
                    d.nr_sectors = Some(parse_u32(toks.next()?)?);
                }
                Some(b"/") => {
                    d.sector = Some(n);
                    d.new_sector = Some(parse_u64(toks.next()?)?);
                }
                _ => {
                    toks.rest = before;
                    if d.sector.is_some() {
                        return None;
                    }
                    d.bytes = Some(u32::try_from(n).ok()?);
                }
            }
            continue;
        }
        if is_ioprio(t) {
            continue;
        }
        return None;
    }
    Some(d)
}

/// Who and when, from the line header (or the blkparse columns).
#[derive(Clone, Copy, Debug)]
pub struct Context<'a> {
    pub ts: u64,
    pub pid: u32,
    pub cpu: u32,
    /// Name of the running task, used when the payload names none.
    pub comm: &'a [u8],
}

fn build(action: Action, dev: Dev, rwbs: Rwbs, d: &Detail<'_>, cx: Context<'_>) -> BlockEvent {
    let Context {
        ts,
        pid,
        cpu,
        comm: task_comm,
    } = cx;
    let error_in_bracket = matches!(
        action,
        Action::Complete | Action::Requeue | Action::BioComplete | Action::RqError
    );
    let (comm, error) = match d.bracket {
        Some(b) if error_in_bracket => (Comm::new(task_comm), parse_i32(b).unwrap_or(0)),
        Some(b) => (Comm::new(b), 0),
        None => (Comm::new(task_comm), 0),
    };
    let nr = d.nr_sectors.unwrap_or(0);
    // blktrace records the byte count; tracepoints give sectors, and `bytes`
    // only for passthrough requests (older kernels print 0 for fs requests).
    let bytes = if nr > 0 {
        nr.saturating_mul(512)
    } else {
        d.bytes.unwrap_or(0)
    };
    let extra = if let Some((from_dev, from_sector)) = d.remap {
        Extra::Remap {
            from_dev,
            from_sector,
        }
    } else if let Some(new_sector) = d.new_sector {
        Extra::Split { new_sector }
    } else if let Some(depth) = d.after_bracket {
        Extra::Unplug { depth }
    } else {
        Extra::None
    };
    BlockEvent {
        ts,
        dev,
        action,
        rwbs,
        sector: crate::model::block::trace_sector(d.sector.unwrap_or(0)),
        bytes,
        pid,
        cpu,
        error,
        comm,
        passthrough: nr == 0 && d.bytes.unwrap_or(0) > 0,
        extra,
    }
}

/// Decodes a block tracepoint payload, e.g.
/// `259,1 RS 0 () 340328 + 8 [cat]` or `[kworker/0:1] 3` (unplug).
pub fn parse_tracepoint(action: Action, payload: &[u8], cx: Context<'_>) -> Option<BlockEvent> {
    let payload = trim(payload);
    if matches!(action, Action::Plug | Action::UnplugIo) {
        // `[comm]` and `[comm] nr_rq`: no device.
        let d = parse_detail(payload)?;
        d.bracket?;
        return Some(build(action, Dev(0), Rwbs(Rwbs::NONE), &d, cx));
    }
    by_position(action, payload, cx).or_else(|| by_tokens(action, payload, cx))
}

/// [`parse_tracepoint`] of a payload with a device, token by token.
fn by_tokens(action: Action, payload: &[u8], cx: Context<'_>) -> Option<BlockEvent> {
    let (dev, rest) = first_word(payload);
    let dev = Dev::parse_bytes(dev)?;
    let (rwbs, rest) = first_word(rest);
    let rwbs = Rwbs::parse(rwbs)?;
    let d = parse_detail(rest)?;
    if d.sector.is_none() && d.bytes.is_none() && !d.has_cmd {
        return None;
    }
    Some(build(action, dev, rwbs, &d, cx))
}

/// [`parse_tracepoint`] of the layouts today's kernels print
/// (include/trace/events/block.h: `block_bio` `DEV RWBS SECTOR + NR
/// [COMM]`, `block_rq` `DEV RWBS BYTES () SECTOR + NR IOPRIO [COMM]`,
/// `block_rq_completion` `DEV RWBS () SECTOR + NR IOPRIO [ERROR]`, with
/// or without the ioprio triple), read left to right with one space
/// between fields. `None` for anything else, which the token reader then
/// reads; where this reads a payload, that reader reads it the same (a
/// test holds it to that on every fixture line). Reading by the shape of
/// each token was most of the cost of a block event line.
fn by_position(action: Action, payload: &[u8], cx: Context<'_>) -> Option<BlockEvent> {
    let mut c = Cursor { rest: payload };
    let dev = Dev::parse_bytes(c.word())?;
    c.eat(b" ")?;
    let rwbs = Rwbs::parse(c.word())?;
    c.eat(b" ")?;
    let mut d = Detail {
        has_cmd: true,
        ..Detail::default()
    };
    let sector = if c.eat(b"() ").is_some() {
        c.number()?
    } else {
        let n = c.number()?;
        if c.eat(b" () ").is_some() {
            d.bytes = Some(u32::try_from(n).ok()?);
            c.number()?
        } else {
            d.has_cmd = false;
            n
        }
    };
    c.eat(b" + ")?;
    d.sector = Some(sector);
    d.nr_sectors = Some(u32::try_from(c.number()?).ok()?);
    // The ioprio triple (`none,0,0`, perf's `0x2,0,4`) is passed over.
    if c.rest.len() > 1 && c.rest[0] == b' ' && c.rest[1] != b'[' {
        c.eat(b" ")?;
        if !is_ioprio(c.word()) {
            return None;
        }
    }
    if !c.rest.is_empty() {
        let inner = c.rest.strip_prefix(b" [")?.strip_suffix(b"]")?;
        // A name holding `[` is left to the token reader, which takes the
        // last ` [` as the bracket's start.
        if inner.contains(&b'[') {
            return None;
        }
        d.bracket = Some(inner);
    }
    Some(build(action, dev, rwbs, &d, cx))
}

/// What is left of a payload read by position.
struct Cursor<'a> {
    rest: &'a [u8],
}

impl<'a> Cursor<'a> {
    /// Up to the next whitespace byte (or the end).
    #[inline]
    fn word(&mut self) -> &'a [u8] {
        let end = word_end(self.rest);
        let (w, rest) = self.rest.split_at(end);
        self.rest = rest;
        w
    }
    /// `s`, if the rest starts with it.
    #[inline]
    fn eat(&mut self, s: &[u8]) -> Option<()> {
        self.rest = self.rest.strip_prefix(s)?;
        Some(())
    }
    /// A run of one to nineteen ASCII digits (which cannot overflow), in
    /// one pass; `None` for longer ones, left to the token reader.
    #[inline]
    fn number(&mut self) -> Option<u64> {
        let (v, n) = leading_digits(self.rest);
        if n == 0 || self.rest.get(n).is_some_and(u8::is_ascii_digit) {
            return None;
        }
        self.rest = &self.rest[n..];
        Some(v)
    }
}

/// Decodes the blktrace-style text after the device: `Q  RS 0 + 8 [dd]`,
/// `A   R 280576 + 512 <- (252,0) 278528`, `U   N [cat] 1`. Returns `None`
/// for lines it cannot read and for notes/messages (`m`).
pub fn parse_blk_action(dev: Dev, rest: &[u8], cx: Context<'_>) -> Option<BlockEvent> {
    let (letter, rest) = first_word(rest);
    let action = Action::from_letter(std::str::from_utf8(letter).ok()?)?;
    let (rwbs, rest) = first_word(rest);
    let rwbs = Rwbs::parse(rwbs)?;
    let d = parse_detail(rest)?;
    let mut ev = build(action, dev, rwbs, &d, cx);
    if matches!(
        action,
        Action::Plug | Action::UnplugIo | Action::UnplugTimer
    ) {
        ev.rwbs = Rwbs(Rwbs::NONE);
    }
    Some(ev)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cx(comm: &[u8]) -> Context<'_> {
        Context {
            ts: 1,
            pid: 2,
            cpu: 3,
            comm,
        }
    }

    fn tp(a: Action, p: &str) -> BlockEvent {
        parse_tracepoint(a, p.as_bytes(), cx(b"task")).unwrap()
    }

    #[test]
    fn layouts_old_and_new() {
        let old = tp(Action::Insert, "259,1 RS 0 () 340328 + 8 [cat]");
        assert_eq!(
            (old.dev, old.sector, old.bytes),
            (Dev::new(259, 1), 340328, 4096)
        );
        assert_eq!(old.comm.as_str(), "cat");
        let perf = tp(Action::Issue, "7,0 RS 4096 () 0 + 8 0x2,0,4 [dd]");
        assert_eq!((perf.sector, perf.bytes), (0, 4096));
        let new = tp(Action::Issue, "7,0 RS 4096 () 0 + 8 none,0,0 [dd]");
        assert_eq!((new.sector, new.bytes, new.comm.as_str()), (0, 4096, "dd"));
        let c = tp(Action::Complete, "259,1 RS () 340080 + 8 [0]");
        assert_eq!((c.sector, c.bytes, c.error), (340080, 4096, 0));
        let c = tp(Action::Complete, "7,0 W () 16 + 8 be,4,0 [-5]");
        assert_eq!((c.sector, c.error, c.comm.as_str()), (16, -5, "task"));
        let q = tp(Action::Queue, "8,0 WS 2048 + 16 [kworker/u4:1]");
        assert_eq!(
            (q.sector, q.bytes, q.comm.as_str()),
            (2048, 8192, "kworker/u4:1")
        );
    }

    #[test]
    fn flush_remap_split_unplug() {
        let f = tp(Action::Issue, "179,0 FWS 0 () 0 + 0 [jbd2/mmcblk0p2]");
        assert!(f.rwbs.is_flush() && f.rwbs.is_write());
        assert_eq!(f.bytes, 0);
        let r = tp(Action::Remap, "259,0 R 280576 + 512 <- (252,0) 278528");
        assert_eq!(
            r.extra,
            Extra::Remap {
                from_dev: Dev::new(252, 0),
                from_sector: 278528
            }
        );
        let rq = tp(Action::Remap, "8,0 W 100 + 8 <- (8,1) 36 1");
        assert_eq!(rq.sector, 100);
        let x = tp(Action::Split, "8,0 R 0 / 2560 [dd]");
        assert_eq!(x.extra, Extra::Split { new_sector: 2560 });
        let u = tp(Action::UnplugIo, "[fio] 12");
        assert_eq!(
            (u.extra, u.comm.as_str()),
            (Extra::Unplug { depth: 12 }, "fio")
        );
        let p = tp(Action::Plug, "[fio]");
        assert_eq!(p.comm.as_str(), "fio");
    }

    #[test]
    fn blk_tracer_and_blkparse_details() {
        let q = parse_blk_action(Dev::new(7, 0), b"Q  RS 0 + 8 [dd]", cx(b"")).unwrap();
        assert_eq!((q.action, q.sector, q.bytes), (Action::Queue, 0, 4096));
        let a = parse_blk_action(
            Dev::new(259, 0),
            b"A   R 280576 + 512 <- (252,0) 278528",
            cx(b""),
        )
        .unwrap();
        assert_eq!(a.action, Action::Remap);
        let u = parse_blk_action(Dev::new(7, 0), b"UT   N [cat] 1", cx(b"")).unwrap();
        assert_eq!(
            (u.action, u.extra),
            (Action::UnplugTimer, Extra::Unplug { depth: 1 })
        );
        let c = parse_blk_action(Dev::new(7, 0), b"C  RS 0 + 8 [0]", cx(b"ksoftirqd/0")).unwrap();
        assert_eq!((c.error, c.comm.as_str()), (0, "ksoftirqd/0"));
        assert!(
            parse_blk_action(Dev::new(7, 0), b"m   N cfq schedule dispatch", cx(b"")).is_none()
        );
    }

    /// Where the positional reader reads a payload, the token reader
    /// reads it the same: on every block event line of every text fixture
    /// (ftrace, trace-cmd, perf script, the seed excerpts) and on
    /// variations of each layout; and it reads most fixture lines.
    #[test]
    fn by_position_agrees_with_by_tokens() {
        use crate::ingest::text_line::{parse_header, split_event, text_fixtures};
        let mut payloads: Vec<(Action, Vec<u8>)> = Vec::new();
        for (_, data) in text_fixtures() {
            for line in data.split(|&b| b == b'\n') {
                let Some((_, rest)) = parse_header(trim(line)) else {
                    continue;
                };
                let Some((name, payload)) = split_event(rest) else {
                    continue;
                };
                let short = name.rsplit(|&b| b == b':').next().unwrap_or(name);
                if let Some(a) = Action::from_tracepoint_bytes(short) {
                    payloads.push((a, payload.to_vec()));
                }
            }
        }
        let from_fixtures = payloads.len();
        for p in [
            "7,0 R 63240 + 8 [fio]",
            "7,0 R 4096 () 63240 + 8 be,0,4 [fio]",
            "7,0 R () 63240 + 8 be,0,4 [0]",
            "7,0 W () 16 + 8 be,4,0 [-5]",
            "259,1 RS 0 () 340328 + 8 [cat]",
            "7,0 RS 4096 () 0 + 8 0x2,0,4 [dd]",
            "7,0 W () 16 + 8 none,0,0",
            "7,0 R 1 + 8 [a [b]]",
            "7,0 R 1 + 8 [a b]",
            "7,0 R 1 + 8 [] 3",
            "7,0 R 1 + 8  [x]",
            "7,0  R 1 + 8 [x]",
            "7,0 R 1 +  8 [x]",
            "7,0 R 1 + 8 be,0 [x]",
            "7,0 R 1 + 8 be,0,0,0 [x]",
            "7,0 R 1 + 8 5 [x]",
            "7,0 R 99999999999999999999 + 8 [x]",
            "7,0 R 999999999999999999999 + 8 [x]",
            "7,0 R 1 + 4294967296 [x]",
            "7,0 R 4294967296 () 1 + 8 [x]",
            "7,0 R 1 / 9 [x]",
            "7,0 R 1 + 8 <- (7,1) 5",
            "7,0 R (12 34) 1 + 8 [x]",
            "7,0 R 1 + 8 [x",
            "7,0 R 1 + 8 [\u{e9}]",
            "7,0 R\t1 + 8 [x]",
            "7,0 R 1 + 8",
            "7,0 R 1 +",
            "7,0 X 1 + 8 [x]",
        ] {
            for a in [Action::Queue, Action::Issue, Action::Complete] {
                payloads.push((a, p.as_bytes().to_vec()));
            }
        }
        let mut read = 0;
        for (i, (a, p)) in payloads.iter().enumerate() {
            let p = trim(p);
            if let Some(got) = by_position(*a, p, cx(b"task")) {
                read += usize::from(i < from_fixtures);
                assert_eq!(
                    Some(got),
                    by_tokens(*a, p, cx(b"task")),
                    "{a:?} {:?}",
                    String::from_utf8_lossy(p)
                );
            }
        }
        assert!(from_fixtures > 1000, "{from_fixtures} block payloads");
        assert!(
            read * 10 > from_fixtures * 8,
            "{read} of {from_fixtures} read by position"
        );
    }

    /// The same on payloads laid out as the kernel's, each field drawn
    /// from right and wrong values, with any spacing.
    #[test]
    fn by_position_agrees_with_by_tokens_on_drawn_layouts() {
        use proptest::prelude::*;
        let pick = |v: Vec<&'static str>| prop::sample::select(v);
        // Right values first and more often: a drawn payload is whole about
        // one time in six.
        let fields = (
            pick(vec!["7,0", "259,1", "7,0", "259,1", "7,", "x"]),
            pick(vec!["R", "WS", "FWFS", "N", "R", "WS", "Q", ""]),
            pick(vec![
                "",
                "4096 () ",
                "() ",
                "",
                "4096 () ",
                "() ",
                "4294967296 () ",
                "(1 2) ",
            ]),
            pick(vec![
                "0",
                "63240",
                "0",
                "63240",
                "99999999999999999999",
                "-1",
                "",
            ]),
            pick(vec![" + ", " + ", " + ", " + ", " / ", " +", "  + "]),
            pick(vec!["8", "0", "8", "0", "8", "4294967296", "x"]),
            pick(vec![
                "",
                " be,0,4",
                " none,0,0",
                " 0x2,0,4",
                "",
                " be,0,4",
                " be,0",
                " 5",
                " <- (7,1) 5",
            ]),
            pick(vec![
                "", " [fio]", " [0]", " [-5]", "", " [fio]", " [a [b]]", " [a b]", " [x] 3", " [x",
            ]),
            pick(vec![" ", " ", " ", " ", "  ", "\t"]),
        );
        let action = pick_action();
        let read = std::cell::Cell::new(0u32);
        let cases = ProptestConfig::with_cases(2048);
        proptest!(cases, |((dev, rwbs, cmd, sector, plus, nr, prio, bracket, gap) in fields, a in action)| {
            let p = format!("{dev}{gap}{rwbs} {cmd}{sector}{plus}{nr}{prio}{bracket}");
            let p = trim(p.as_bytes());
            if let Some(got) = by_position(a, p, cx(b"task")) {
                read.set(read.get() + 1);
                prop_assert_eq!(Some(got), by_tokens(a, p, cx(b"task")), "{:?}", String::from_utf8_lossy(p));
            }
        });
        assert!(
            read.get() >= 5,
            "{} drawn payloads read by position",
            read.get()
        );
    }

    fn pick_action() -> impl proptest::strategy::Strategy<Value = Action> {
        proptest::sample::select(vec![Action::Queue, Action::Issue, Action::Complete])
    }

    #[test]
    fn garbage_is_rejected() {
        assert!(parse_tracepoint(Action::Queue, b"", cx(b"")).is_none());
        assert!(parse_tracepoint(Action::Queue, b"7,0 RS zz + 8 [dd]", cx(b"")).is_none());
        assert!(parse_tracepoint(Action::Queue, b"7,0 XYZ 1 + 8 [dd]", cx(b"")).is_none());
        assert!(parse_tracepoint(Action::Queue, b"7,0 R 1 + [dd]", cx(b"")).is_none());
    }
}
