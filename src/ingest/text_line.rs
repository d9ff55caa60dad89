//! The part of a trace line before the event: who, where, when.
//!
//! ftrace (`trace`, `trace_pipe`) and `trace-cmd report` print
//! `comm-pid [cpu] flags timestamp: event: payload`, with or without the
//! irq-flags column and an optional `(tgid)`; `perf script` prints
//! `comm pid [cpu] timestamp: sys:event: payload`. One parser reads both.

/// What precedes the event name on a line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LineHeader<'a> {
    pub comm: &'a [u8],
    pub pid: u32,
    pub cpu: u32,
    pub ts: u64,
    /// True when the task and pid were joined by `-` (ftrace style).
    pub dashed: bool,
    /// The task's process where the line prints it: ftrace's `(tgid)`
    /// column (`record-tgid`), perf's `pid/tid`. `None` where it does not
    /// (or prints `(-------)`, ftrace's unknown), and for 0, the idle
    /// task, which is no process.
    pub tgid: Option<u32>,
}

impl<'a> LineHeader<'a> {
    pub fn context(&self) -> super::block_text::Context<'a> {
        super::block_text::Context {
            ts: self.ts,
            pid: self.pid,
            cpu: self.cpu,
            comm: self.comm,
        }
    }
}

pub fn is_digits(b: &[u8]) -> bool {
    !b.is_empty() && b.iter().all(u8::is_ascii_digit)
}

#[inline]
pub fn parse_u64(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 20 {
        return None;
    }
    // Nineteen digits cannot overflow: the common case goes unchecked.
    if b.len() < 20 {
        let (v, n) = leading_digits(b);
        return (n == b.len()).then_some(v);
    }
    let mut v: u64 = 0;
    for &c in b {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(d as u64)?;
    }
    Some(v)
}

/// The value of the ASCII digits `b` starts with, at most nineteen (which
/// cannot overflow), and how many were read: the one digit reader of the
/// one-pass readers.
#[inline]
pub fn leading_digits(b: &[u8]) -> (u64, usize) {
    // Eight bytes at once where the line has them (it nearly always
    // does: a number is followed by more of the line); the byte loop
    // goes on past eight digits.
    let (mut v, mut n) = match b.get(..8) {
        Some(chunk) => {
            let w = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
            let k = digit_run(w);
            if k < 8 {
                return (digits_of_word(w, k), k);
            }
            (digits_of_word(w, 8), 8)
        }
        None => (0, 0),
    };
    for &c in &b[n..b.len().min(19)] {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        v = v * 10 + u64::from(d);
        n += 1;
    }
    (v, n)
}

#[inline]
pub fn parse_u32(b: &[u8]) -> Option<u32> {
    parse_u64(b).and_then(|v| u32::try_from(v).ok())
}

pub fn parse_i32(b: &[u8]) -> Option<i32> {
    match b.first() {
        Some(b'-') => parse_u64(&b[1..]).and_then(|v| i32::try_from(-(v as i64)).ok()),
        _ => parse_u64(b).and_then(|v| i32::try_from(v).ok()),
    }
}

/// How many of the eight bytes of `w` (little-endian: its first byte the
/// lowest) are ASCII digits before the first that is not one. A byte is
/// flagged when below `0` (the subtraction's top bit, not a byte's own)
/// or above `9` (`+ 0x46` reaches the top bit, or it was set): a borrow
/// or carry only ever flags bytes above a flagged one, so the lowest flag
/// is exact.
#[inline]
fn digit_run(w: u64) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let below = w.wrapping_sub(ONES * b'0' as u64) & !w;
    let above = w.wrapping_add(ONES * 0x46) | w;
    ((below | above) & HIGH).trailing_zeros() as usize / 8
}

/// The value of the first `k` (0 to 8) bytes of `w`, which are ASCII
/// digits: moved to the top of the word (the bytes below read as leading
/// zeros), then pairs, fours and eights summed in three multiplications.
#[inline]
fn digits_of_word(w: u64, k: usize) -> u64 {
    if k == 0 {
        return 0;
    }
    let d = (w & 0x0f0f_0f0f_0f0f_0f0f) << (8 * (8 - k));
    let d = (d * 10 + (d >> 8)) & 0x00ff_00ff_00ff_00ff;
    let d = (d * 100 + (d >> 16)) & 0x0000_ffff_0000_ffff;
    (d * 10_000 + (d >> 32)) & 0xffff_ffff
}

/// Parses `SECONDS.FRACTION` (any number of fraction digits up to 9) into
/// nanoseconds.
#[inline]
pub fn parse_timestamp(b: &[u8]) -> Option<u64> {
    short_timestamp(b).or_else(|| any_timestamp(b))
}

/// Nanoseconds per unit of a fraction of `i` digits.
const SCALE: [u64; 10] = [
    1_000_000_000,
    100_000_000,
    10_000_000,
    1_000_000,
    100_000,
    10_000,
    1_000,
    100,
    10,
    1,
];

/// [`parse_timestamp`] of up to ten digits of seconds (317 years: every
/// trace clock), in one pass without overflow checks; `None` for anything
/// else, which the general reader then reads (or refuses).
#[inline]
fn short_timestamp(b: &[u8]) -> Option<u64> {
    let (ns, n) = short_stamp_prefix(b)?;
    (n == b.len()).then_some(ns)
}

/// The timestamp `b` starts with, `SECONDS[.FRACTION]` of up to ten
/// digits then one to nine, and how many bytes it takes; `None` for a
/// longer number or a `.` with no digit after it.
#[inline]
fn short_stamp_prefix(b: &[u8]) -> Option<(u64, usize)> {
    let (secs, i) = leading_digits(b);
    if i == 0 || i > 10 {
        return None;
    }
    if b.get(i) != Some(&b'.') {
        return Some((secs * 1_000_000_000, i));
    }
    let (f, k) = leading_digits(&b[i + 1..]);
    (1..=9)
        .contains(&k)
        .then(|| (secs * 1_000_000_000 + f * SCALE[k], i + 1 + k))
}

fn any_timestamp(b: &[u8]) -> Option<u64> {
    // A loop, not memchr: on a dozen bytes its call costs more than it saves.
    let dot = b.iter().position(|&c| c == b'.');
    let (secs, frac) = match dot {
        Some(d) => (&b[..d], &b[d + 1..]),
        None => (b, &b[..0]),
    };
    let s = parse_u64(secs)?;
    if frac.len() > 9 || (dot.is_some() && frac.is_empty()) {
        return None;
    }
    let f = if frac.is_empty() { 0 } else { parse_u64(frac)? };
    s.checked_mul(1_000_000_000)?
        .checked_add(f * SCALE[frac.len()])
}

#[inline]
pub fn trim(b: &[u8]) -> &[u8] {
    let b = trim_start(b);
    let end = b
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(0, |i| i + 1);
    &b[..end]
}

#[inline]
pub fn trim_start(b: &[u8]) -> &[u8] {
    // ftrace pads task names to 16 columns: skip spaces eight at a time.
    let mut b = b;
    while b.len() >= 8 && b[..8] == [b' '; 8] {
        b = &b[8..];
    }
    let start = b
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(b.len());
    &b[start..]
}

/// Splits off the first whitespace-separated word: `(word, rest)`.
#[inline]
pub fn first_word(b: &[u8]) -> (&[u8], &[u8]) {
    let b = trim_start(b);
    let end = word_end(b);
    (&b[..end], &b[end..])
}

/// Where the first ASCII whitespace byte of `b` is (`b.len()` if none),
/// eight bytes at a time: every whitespace byte is below `!`, so a word
/// of eight bytes with none below it is skipped at once. Scanning the
/// words of a line byte by byte was the largest part of classifying an
/// ftrace line (a third of its samples).
#[inline]
pub fn word_end(b: &[u8]) -> usize {
    const LOW: u64 = 0x2121_2121_2121_2121;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut i = 0;
    while let Some(chunk) = b.get(i..i + 8) {
        let w = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        // The lowest flagged byte is the first one below `!` (a flag
        // above it may be a borrow's): from there, each byte is checked.
        let below = w.wrapping_sub(LOW) & !w & HIGH;
        if below != 0 {
            let first = i + (below.trailing_zeros() / 8) as usize;
            if let Some(k) = b[first..i + 8].iter().position(u8::is_ascii_whitespace) {
                return first + k;
            }
        }
        i += 8;
    }
    b[i..]
        .iter()
        .position(u8::is_ascii_whitespace)
        .map_or(b.len(), |k| i + k)
}

/// Finds the `[NNN]` CPU column: the first bracket holding only digits.
fn find_cpu(line: &[u8]) -> Option<(usize, usize, u32)> {
    let mut from = 0;
    while let Some(o) = memchr::memchr(b'[', &line[from..]) {
        let open = from + o;
        let close = open + 1 + memchr::memchr(b']', &line[open + 1..])?;
        let inner = &line[open + 1..close];
        if is_digits(inner) && inner.len() <= 5 {
            return Some((open, close, parse_u32(inner)?));
        }
        from = open + 1;
    }
    None
}

/// What a line's task column says: name, thread id, whether they were
/// joined by `-`, and the process where it is printed.
type Task<'a> = (&'a [u8], u32, bool, Option<u32>);

/// Splits `comm-pid`, `comm pid`, `comm pid/tid` and `comm-pid (tgid)`.
fn split_task(task: &[u8]) -> Option<Task<'_>> {
    let mut t = trim(task);
    let mut tgid = None;
    // `(  tgid)` column of `record-tgid` (`(-------)`: not known)
    if t.last() == Some(&b')') {
        let open = memchr::memrchr(b'(', t)?;
        tgid = parse_u32(trim(&t[open + 1..t.len() - 1]));
        t = trim(&t[..open]);
    }
    let mut end = t.len();
    while end > 0 && (t[end - 1].is_ascii_digit() || t[end - 1] == b'/') {
        end -= 1;
    }
    let num = &t[end..];
    // perf prints `pid/tid`: the thread id is the one the events belong
    // to, the pid its process.
    let pid_txt = match num.iter().position(|&c| c == b'/') {
        Some(s) => {
            tgid = tgid.or_else(|| parse_u32(&num[..s]));
            &num[s + 1..]
        }
        None => num,
    };
    let pid = parse_u32(pid_txt)?;
    let tgid = tgid.filter(|&g| g != 0);
    if end == 0 {
        return Some((&t[..0], pid, false, tgid));
    }
    let sep = t[end - 1];
    let dashed = sep == b'-';
    if !dashed && !sep.is_ascii_whitespace() {
        return None;
    }
    let mut comm = trim(&t[..end - 1]);
    // ftrace right-aligns the name in a 16-wide column: a wide gap means what
    // stands before it is not part of the name (an annotation such as `(#1)`
    // in pasted excerpts).
    if comm.contains(&b' ') {
        if let Some(gap) = comm.windows(3).rposition(|w| w == b"   ") {
            comm = trim(&comm[gap..]);
        }
    }
    Some((comm, pid, dashed, tgid))
}

/// Parses the header; returns it and the rest of the line after `ts:`.
pub fn parse_header(line: &[u8]) -> Option<(LineHeader<'_>, &[u8])> {
    let (open, close, cpu) = find_cpu(line)?;
    let (comm, pid, dashed, tgid) = split_task(&line[..open])?;
    let mut rest = &line[close + 1..];
    // One or two tokens follow: optional irq flags, then `timestamp:`.
    for _ in 0..2 {
        let (tok, after) = first_word(rest);
        if tok.last() == Some(&b':') {
            let ts = parse_timestamp(&tok[..tok.len() - 1])?;
            return Some((
                LineHeader {
                    comm,
                    pid,
                    cpu,
                    ts,
                    dashed,
                    tgid,
                },
                after,
            ));
        }
        rest = after;
    }
    None
}

/// After the header: `event: payload` (ftrace, trace-cmd) or
/// `sys:event: payload` (perf). Returns the full name and the payload.
pub fn split_event(rest: &[u8]) -> Option<(&[u8], &[u8])> {
    let (tok, after) = first_word(rest);
    split_event_word(tok, after)
}

/// [`split_event`] of a line whose first word is already split off.
pub fn split_event_word<'a>(tok: &'a [u8], after: &'a [u8]) -> Option<(&'a [u8], &'a [u8])> {
    if tok.len() < 2 || tok.last() != Some(&b':') {
        return None;
    }
    let name = &tok[..tok.len() - 1];
    if !name.iter().all(|&c| event_name_byte(c)) {
        return None;
    }
    Some((name, trim(after)))
}

/// Whether `c` may be part of an event's name (`sys:event` included).
#[inline]
pub fn event_name_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b':' || c == b'-' || c == b'.'
}

/// [`parse_header`] of the common ftrace line, `comm-pid [cpu] flags
/// timestamp: …`, in one forward pass. `None` for anything else — a name
/// with spaces, a `(tgid)` column, perf's `comm pid/tid` — which
/// `parse_header` then reads; where this reads a line, `parse_header`
/// reads it the same (a test holds it to that on every fixture).
#[inline]
pub fn parse_ftrace_header(line: &[u8]) -> Option<(LineHeader<'_>, &[u8])> {
    let line = trim_start(line);
    let open = memchr::memchr(b'[', line)?;
    // The task: `comm-pid`, then spaces.
    let mut end = open;
    while end > 0 && line[end - 1] == b' ' {
        end -= 1;
    }
    let mut dash = end;
    while dash > 0 && line[dash - 1].is_ascii_digit() {
        dash -= 1;
    }
    if dash == end || dash == 0 || line[dash - 1] != b'-' || end - dash > 10 {
        return None;
    }
    let pid = u32::try_from(digits_value(&line[dash..end])).ok()?;
    let comm = &line[..dash - 1];
    if word_end(comm) < comm.len() {
        return None;
    }
    // `[cpu]`: up to five digits.
    let mut i = open + 1;
    let cpu_start = i;
    while i < line.len() && line[i].is_ascii_digit() {
        i += 1;
    }
    if i == cpu_start || i - cpu_start > 5 || line.get(i) != Some(&b']') {
        return None;
    }
    let cpu = digits_value(&line[cpu_start..i]) as u32;
    let (ts, rest) = flags_and_stamp(&line[i + 1..])?;
    let header = LineHeader {
        comm,
        pid,
        cpu,
        ts,
        dashed: true,
        tgid: None,
    };
    Some((header, rest))
}

/// One or two words after the CPU column, optional irq flags then
/// `timestamp:`: the timestamp and what follows it. A word that starts
/// as [`short_timestamp`] reads and ends in `:` is read as it is
/// scanned; any other as [`first_word`] and [`parse_timestamp`] read it
/// (the word found, then read again, was 2 % of reading a block event's
/// line).
#[inline]
fn flags_and_stamp(mut rest: &[u8]) -> Option<(u64, &[u8])> {
    for _ in 0..2 {
        let b = trim_start(rest);
        if let Some((ns, colon)) = short_stamp_prefix(b) {
            if b.get(colon) == Some(&b':') && b.get(colon + 1).is_none_or(u8::is_ascii_whitespace) {
                return Some((ns, &b[colon + 1..]));
            }
        }
        let end = word_end(b);
        if let Some(t) = b[..end].strip_suffix(b":") {
            return Some((parse_timestamp(t)?, &b[end..]));
        }
        rest = &b[end..];
    }
    None
}

/// The value of up to nineteen ASCII digits (checked by the caller).
#[inline]
fn digits_value(d: &[u8]) -> u64 {
    d.iter().fold(0, |v, &c| v * 10 + (c - b'0') as u64)
}

/// Every text fixture (ftrace, trace-cmd, perf script and blkparse
/// output, the seed excerpts; `.gz` undone) with its path: what the fast
/// readers' tests hold them to the general readers on.
#[cfg(test)]
pub(crate) fn text_fixtures() -> Vec<(std::path::PathBuf, Vec<u8>)> {
    use std::io::Read;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut dirs = vec![root];
    let mut out = Vec::new();
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let mut data = std::fs::read(&path).unwrap();
            if path.extension().is_some_and(|e| e == "gz") {
                let mut plain = Vec::new();
                flate2::read::GzDecoder::new(&data[..])
                    .read_to_end(&mut plain)
                    .unwrap();
                data = plain;
            }
            if !data.iter().take(4096).any(|&b| b == 0) {
                out.push((path, data));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_end_finds_the_first_whitespace_like_a_byte_scan() {
        use proptest::prelude::*;
        let naive = |b: &[u8]| {
            b.iter()
                .position(u8::is_ascii_whitespace)
                .unwrap_or(b.len())
        };
        // Control bytes below `!` that are not whitespace (NUL, VT), bytes
        // above 0x7f, and every whitespace byte, at every offset.
        let alphabet = prop::sample::select(vec![
            b'a', b'0', b':', 0, 0x0b, 0x1f, 0x21, 0x80, 0xff, b' ', b'\t', b'\n', b'\r', 0x0c,
        ]);
        proptest!(|(b in prop::collection::vec(alphabet, 0..40))| {
            prop_assert_eq!(word_end(&b), naive(&b));
        });
        for (line, end) in [
            (&b"block_rq_issue: 7,0"[..], 15),
            (b"3705.751375:", 12),
            (b"", 0),
            (b"\x0b\x00abcdefgh\tx", 10),
        ] {
            assert_eq!(word_end(line), end, "{line:?}");
        }
    }

    #[test]
    fn ftrace_with_flags() {
        let l = b"              dd-4105    [001] d..1.   106.653390:   7,0    Q  RS 0 + 8 [dd]";
        let (h, rest) = parse_header(l).unwrap();
        assert_eq!(h.comm, b"dd");
        assert_eq!((h.pid, h.cpu, h.ts), (4105, 1, 106_653_390_000));
        assert!(h.dashed);
        assert_eq!(trim(rest), b"7,0    Q  RS 0 + 8 [dd]");
    }

    #[test]
    fn ftrace_without_flags_and_with_tgid() {
        let l = b"  kworker/u4:2-77    (     77) [000]  5.000000001: block_rq_issue: 8,0 W 4096 () 8 + 8 [x]";
        let (h, rest) = parse_header(l).unwrap();
        assert_eq!(h.comm, b"kworker/u4:2");
        assert_eq!((h.pid, h.cpu, h.ts), (77, 0, 5_000_000_001));
        assert_eq!(h.tgid, Some(77));
        let (name, payload) = split_event(rest).unwrap();
        assert_eq!(name, b"block_rq_issue");
        assert_eq!(payload, b"8,0 W 4096 () 8 + 8 [x]");
    }

    #[test]
    fn perf_script() {
        let l =
            b"cat  1942 [001]  5502.479591: block:block_rq_insert: 259,1 RS 0 () 340328 + 8 [cat]";
        let (h, rest) = parse_header(l).unwrap();
        assert_eq!(
            (h.comm, h.pid, h.cpu, h.ts),
            (&b"cat"[..], 1942, 1, 5_502_479_591_000)
        );
        assert!(!h.dashed);
        assert_eq!(split_event(rest).unwrap().0, b"block:block_rq_insert");
    }

    /// The process where the line prints it: ftrace's `(tgid)`, perf's
    /// `pid/tid`; ftrace's `(-------)`, perf's bare thread id and the idle
    /// task's 0 say none.
    #[test]
    fn the_process_is_read_where_the_line_prints_it() {
        let tgid = |l: &[u8]| parse_header(l).map(|(h, _)| (h.pid, h.tgid));
        assert_eq!(
            tgid(b"  fio-7890    (   7889) [000] .....  1.5: block_bio_queue: 7,0 R 0 + 8 [fio]"),
            Some((7890, Some(7889)))
        );
        assert_eq!(
            tgid(b"  <idle>-0       (-------) [001] dNh1.  1.5: sched_wakeup: x"),
            Some((0, None))
        );
        assert_eq!(
            tgid(b"  <...>-31       (-------) [001] .....  1.5: x: y"),
            Some((31, None))
        );
        assert_eq!(
            tgid(b"fio  7889/7890 [000]  4780.291732: block:block_bio_queue: 7,0 R 0 + 8 [fio]"),
            Some((7890, Some(7889)))
        );
        assert_eq!(
            tgid(b"swapper     0/0     [001]  5502.478884: block:block_rq_complete: x"),
            Some((0, None))
        );
        assert_eq!(
            tgid(b"fio  7890 [000]  4780.291732: block:block_bio_queue: 7,0 R 0 + 8 [fio]"),
            Some((7890, None))
        );
    }

    #[test]
    fn names_with_spaces_and_dashes() {
        let (h, _) = parse_header(b"Web Content-3312  [003] .... 10.5: x: y").unwrap();
        assert_eq!((h.comm, h.pid), (&b"Web Content"[..], 3312));
        let (h, _) = parse_header(b"kworker/0:1H-ev-12 [000] 1.000001: x: y").unwrap();
        assert_eq!((h.comm, h.pid), (&b"kworker/0:1H-ev"[..], 12));
    }

    #[test]
    fn annotated_excerpt() {
        let l = b"(#1)     mmcqd/0-89   [000] ...1 1384.282406: mmc_request_start: mmc0: start";
        let (h, _) = parse_header(l).unwrap();
        assert_eq!(
            (h.comm, h.pid, h.ts),
            (&b"mmcqd/0"[..], 89, 1_384_282_406_000)
        );
    }

    /// The one-pass reader agrees with the general one on every line of
    /// every text fixture (real ftrace, trace-cmd, perf script and
    /// blkparse output, the seed excerpts) and reads most of them.
    #[test]
    fn one_pass_header_agrees_on_every_fixture_line() {
        let (mut general, mut fast) = (0u64, 0u64);
        for (path, data) in text_fixtures() {
            for line in data.split(|&b| b == b'\n') {
                let t = trim(line);
                general += u64::from(parse_header(t).is_some());
                if let Some(got) = parse_ftrace_header(t) {
                    fast += 1;
                    assert_eq!(
                        Some(got),
                        parse_header(t),
                        "{}: {:?}",
                        path.display(),
                        String::from_utf8_lossy(line)
                    );
                }
            }
        }
        // Most header lines of the fixtures are plain ftrace ones (not
        // perf script's, nor trace-cmd's with an instance column).
        assert!(
            fast * 10 > general * 6,
            "{fast} of {general} header lines read in one pass"
        );
    }

    #[test]
    fn one_pass_header_declines_what_it_does_not_know() {
        for l in [
            &b"Web Content-3312  [003] .... 10.5: x: y"[..],
            b"  kworker/u4:2-77    (     77) [000]  5.000000001: x: y",
            b"cat  1942 [001]  5502.479591: block:block_rq_insert: 259,1",
            b"perf 12/34 [001] 1.0: x: y",
            b"x-1 [123456] 1.0: x: y",
            b"x-1 [000] ..... 1.: x: y",
        ] {
            assert_eq!(
                parse_ftrace_header(l),
                None,
                "{}",
                String::from_utf8_lossy(l)
            );
        }
        let (h, rest) = parse_ftrace_header(b"a-b-7 [002] d..1. 3.000000004: ev: p").unwrap();
        assert_eq!(
            (h.comm, h.pid, h.cpu, h.ts),
            (&b"a-b"[..], 7, 2, 3_000_000_004)
        );
        assert_eq!(trim(rest), b"ev: p");
    }

    /// Eight bytes at a time reads what a byte at a time reads, on
    /// every run of digits beside every byte that may follow one.
    #[test]
    fn leading_digits_agree_with_a_byte_loop() {
        use proptest::prelude::*;
        fn by_bytes(b: &[u8]) -> (u64, usize) {
            let n = b.iter().take(19).take_while(|c| c.is_ascii_digit()).count();
            let v = b[..n].iter().fold(0, |v, &c| v * 10 + u64::from(c - b'0'));
            (v, n)
        }
        for end in 0..=255u8 {
            for n in 0..21 {
                let mut b: Vec<u8> = (0..n).map(|i| b"9071853246"[i % 10]).collect();
                b.push(end);
                b.extend_from_slice(b"0123456789");
                assert_eq!(leading_digits(&b), by_bytes(&b), "{b:?}");
            }
        }
        let bytes = prop::sample::select(vec![
            b'0', b'5', b'9', b'/', b':', b' ', 0x80, 0xff, 0xb9, 0xba,
        ]);
        proptest!(|(b in prop::collection::vec(bytes, 0..24))| {
            prop_assert_eq!(leading_digits(&b), by_bytes(&b));
        });
    }

    #[test]
    fn leading_digits_stop_at_the_first_other_byte_or_the_nineteenth() {
        assert_eq!(leading_digits(b""), (0, 0));
        assert_eq!(leading_digits(b"x1"), (0, 0));
        assert_eq!(leading_digits(b"0042 + 8"), (42, 4));
        assert_eq!(
            leading_digits(b"99999999999999999999"),
            (9_999_999_999_999_999_999, 19)
        );
    }

    #[test]
    fn timestamps() {
        assert_eq!(parse_timestamp(b"0.002545516"), Some(2_545_516));
        assert_eq!(parse_timestamp(b"12"), Some(12_000_000_000));
        assert_eq!(parse_timestamp(b"1.5"), Some(1_500_000_000));
        assert_eq!(parse_timestamp(b"1."), None);
        assert_eq!(parse_timestamp(b"1.0000000001"), None);
        assert_eq!(parse_timestamp(b"99999999999999999999.0"), None);
        assert_eq!(
            parse_timestamp(b"18446744073.709551615"),
            Some(u64::MAX),
            "eleven digits of seconds, read by the general reader"
        );
        assert_eq!(parse_timestamp(b"18446744073.709551616"), None);
        assert_eq!(
            parse_timestamp(b"9999999999.999999999"),
            Some(9_999_999_999_999_999_999)
        );
        for bad in [
            &b""[..],
            b".5",
            b"1.5x",
            b"1x.5",
            b"-1.5",
            b"1..5",
            b"1.5.",
            b" 1.5",
        ] {
            assert_eq!(
                parse_timestamp(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    /// The header's flags and timestamp read in one pass as the words
    /// read one by one read them.
    #[test]
    fn flags_and_stamp_agree_with_the_word_reader() {
        use proptest::prelude::*;
        fn by_words(mut rest: &[u8]) -> Option<(u64, &[u8])> {
            for _ in 0..2 {
                let (tok, after) = first_word(rest);
                rest = after;
                if let Some(t) = tok.strip_suffix(b":") {
                    return Some((parse_timestamp(t)?, rest));
                }
            }
            None
        }
        let alphabet = prop::sample::select(vec![b'0', b'1', b'9', b'.', b':', b'd', b' ', b'\t']);
        proptest!(|(b in prop::collection::vec(alphabet, 0..28))| {
            prop_assert_eq!(flags_and_stamp(&b), by_words(&b));
        });
        for l in [
            &b" ..... 33681.020586: block_bio_queue: x"[..],
            b" 12: x",
            b" 1.: x",
            b" d..1. 12345678901.5: x",
            b" 1.0123456789: x",
            b" 9999999999.999999999:",
        ] {
            assert_eq!(
                flags_and_stamp(l),
                by_words(l),
                "{}",
                String::from_utf8_lossy(l)
            );
        }
    }

    /// The one-pass reader agrees with the general one wherever it reads.
    #[test]
    fn short_timestamps_agree_with_the_general_reader() {
        use proptest::prelude::*;
        let alphabet = prop::sample::select(vec![b'0', b'1', b'9', b'.', b'x', b' ']);
        proptest!(|(b in prop::collection::vec(alphabet, 0..24))| {
            if let Some(ns) = short_timestamp(&b) {
                prop_assert_eq!(Some(ns), any_timestamp(&b));
            } else if b.iter().take_while(|c| c.is_ascii_digit()).count() <= 10 {
                prop_assert_eq!(None, any_timestamp(&b));
            }
        });
    }
}
