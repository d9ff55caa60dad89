//! `perf script` samples with call chains, as `perf record -g` prints
//! them: an event line (`comm pid/tid [cpu] time: period event:`) and one
//! line per frame (`pc function+off (module)`), innermost first, ending
//! with an empty line. Read the way FlameGraph's stackcollapse-perf.pl
//! and inferno-collapse-perf read them, so that folding agrees: offsets
//! stripped, `[unknown]` named after its module, a sample weighs its
//! period when perf printed one.

use crate::ingest::text_line::parse_timestamp;

/// The event line of a sample: comm, thread id, its process when printed
/// (`pid/tid`; not 0, the idle task's), CPU when printed, time (ns),
/// period when printed, event name.
pub struct SampleHeader<'a> {
    pub comm: &'a str,
    pub tid: u32,
    pub pid: Option<u32>,
    pub cpu: Option<u32>,
    pub ts: u64,
    pub period: Option<u64>,
    pub event: &'a str,
}

/// Parses `comm [pid/]tid [[cpu]] secs.frac: [period] event:[...]`; the
/// comm may hold spaces (it ends before the first all-digit word).
pub fn parse_sample_header(line: &str) -> Option<SampleHeader<'_>> {
    let words: Vec<(usize, &str)> = line
        .split(' ')
        .scan(0usize, |at, w| {
            let start = *at;
            *at += w.len() + 1;
            Some((start, w))
        })
        .filter(|(_, w)| !w.is_empty())
        .collect();
    let id = words.iter().position(|(_, w)| {
        w.bytes().all(|c| c.is_ascii_digit() || c == b'/') && w.bytes().any(|c| c.is_ascii_digit())
    })?;
    if id == 0 {
        return None;
    }
    let comm = line[..words[id].0].trim();
    let tid: u32 = words[id].1.rsplit('/').next()?.parse().ok()?;
    let pid = match words[id].1.split_once('/') {
        Some((pid, _)) => pid.parse().ok().filter(|&p: &u32| p != 0),
        None => None,
    };
    let mut i = id + 1;
    let mut cpu = None;
    if let Some(c) = words
        .get(i)
        .and_then(|(_, w)| w.strip_prefix('[')?.strip_suffix(']'))
    {
        cpu = Some(c.parse().ok()?);
        i += 1;
    }
    let ts = parse_timestamp(words.get(i)?.1.strip_suffix(':')?.as_bytes())?;
    i += 1;
    let mut period = None;
    if let Some(p) = words.get(i).and_then(|(_, w)| w.parse::<u64>().ok()) {
        period = Some(p);
        i += 1;
    }
    let event = words.get(i)?.1.strip_suffix(':')?;
    Some(SampleHeader {
        comm,
        tid,
        pid,
        cpu,
        ts,
        period,
        event,
    })
}

/// Whether an event name as perf script prints it (`cpu-clock:ppp`,
/// `cycles`, `block:block_rq_issue`) is a sampling event rather than a
/// tracepoint: a tracepoint is `system:name`; a sampling event has no
/// system, only modifiers after its colon (u, k, h, p, …).
pub fn is_sampling_event(event: &str) -> bool {
    match event.split_once(':') {
        None => true,
        Some((_, mods)) => mods.bytes().all(|c| b"ukhHGpPSDIWe".contains(&c)),
    }
}

/// A frame line's function, as the collapsers name it: without its
/// `+0x…` offset, `[unknown]` replaced by `[module]` (its file name) when
/// perf knew the module; `None` for a line that is not a frame or a frame
/// the collapsers skip (a function starting with `(`).
pub fn parse_frame(line: &str) -> Option<String> {
    let t = line.trim_start();
    let (pc, rest) = t.split_once(' ')?;
    if pc.is_empty() || !pc.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let (func, module) = rest.rsplit_once(' ')?;
    let module = module.strip_prefix('(')?.strip_suffix(')')?;
    let mut func = match func.trim() {
        "" => " ",
        f => f,
    };
    if let Some(at) = func.rfind("+0x") {
        if func[at + 3..].bytes().all(|c| c.is_ascii_hexdigit()) {
            func = &func[..at];
        }
    }
    if func.starts_with('(') {
        return None;
    }
    if func == "[unknown]" && module != "[unknown]" {
        let base = &module[module.rfind('/').map_or(0, |i| i + 1)..];
        return Some(format!("[{base}]"));
    }
    Some(without_parameters(&func.replace(';', ":")).to_string())
}

/// A demangled C++ name without its parameter list (`ns::f(int)` ->
/// `ns::f`), as the collapsers show functions; a parenthesis inside a
/// template or lambda (`<`, `{`, `[`), a Go method's `.(`, and C++'s
/// `(anonymous namespace)` stay.
fn without_parameters(func: &str) -> &str {
    if !func.contains('(') {
        return func;
    }
    let mut depth = 0i32;
    let mut after_dot = None;
    for (i, c) in func.char_indices() {
        match c {
            '<' | '{' | '[' => depth += 1,
            '>' | '}' | ']' | ')' => depth -= 1,
            '(' => {
                let go_method = after_dot == Some(i);
                if depth == 0 && !go_method && !func[i..].starts_with("(anonymous namespace)") {
                    return &func[..i];
                }
                depth += 1;
            }
            '.' => after_dot = Some(i + 1),
            _ => {}
        }
    }
    func
}

/// Whether a line is a frame line of a call chain: indented, a hex pc,
/// ending in `(dso)`. An event line of a task whose name is all hex
/// digits (`dd`, `cc`) is indented too: what follows its name is a
/// number (the thread id, or the time stamp), never a symbol's name.
pub fn is_frame_line(line: &[u8]) -> bool {
    if !matches!(line.first(), Some(b' ' | b'\t')) || !line.trim_ascii_end().ends_with(b")") {
        return false;
    }
    let rest = line.trim_ascii_start();
    let pc = rest.iter().take_while(|c| !c.is_ascii_whitespace()).count();
    if pc == 0 || !rest[..pc].iter().all(u8::is_ascii_hexdigit) {
        return false;
    }
    let next = rest[pc..].trim_ascii_start();
    !next.first().is_some_and(u8::is_ascii_digit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_lines_of_perf_script() {
        let h = parse_sample_header("dd 17659 15667.995033:    1001001 cpu-clock:ppp: ").unwrap();
        assert_eq!(
            (h.comm, h.tid, h.cpu, h.ts, h.period, h.event),
            (
                "dd",
                17659,
                None,
                15_667_995_033_000,
                Some(1001001),
                "cpu-clock:ppp"
            )
        );
        assert!(is_sampling_event(h.event) && is_sampling_event("cycles"));
        assert!(!is_sampling_event("block:block_rq_issue"));
        let h =
            parse_sample_header("V8 WorkerThread 24636/25607 [000] 94564.109216: cycles:").unwrap();
        assert_eq!(
            (h.comm, h.tid, h.cpu, h.period, h.event),
            ("V8 WorkerThread", 25607, Some(0), None, "cycles")
        );
        assert!(
            parse_sample_header("\tffffffff81bc0859 chacha_permute+0xe9 ([kernel.kallsyms])")
                .is_none()
        );
    }

    #[test]
    fn frames_as_the_collapsers_name_them() {
        for (line, named) in [
            (
                "\tffffffff81bc0859 chacha_permute+0xe9 ([kernel.kallsyms])",
                Some("chacha_permute"),
            ),
            (
                "\t    f82ad read+0xd (/usr/lib/x86_64-linux-gnu/libc.so.6)",
                Some("read"),
            ),
            (
                "\t7f53389994d0 [unknown] (/usr/lib/libfoo.so)",
                Some("[libfoo.so]"),
            ),
            ("\t           0 [unknown] ([unknown])", Some("[unknown]")),
            ("\t4a1b operator+ (/bin/x)", Some("operator+")),
            ("\t4a1b ns::f(int, char) (/bin/x)", Some("ns::f")),
            (
                "\t4a1b net/http.(*Client).Do (/bin/x)",
                Some("net/http.(*Client).Do"),
            ),
            (
                "\t4a1b ns::(anonymous namespace)::g() (/bin/x)",
                Some("ns::(anonymous namespace)::g"),
            ),
            // A function that starts with `(` is skipped, as the collapsers do.
            ("\t4a1b (anonymous namespace)::g() (/bin/x)", None),
        ] {
            assert_eq!(parse_frame(line).as_deref(), named, "{line}");
        }
        assert!(is_frame_line(b"\t           0 [unknown] ([unknown])"));
        assert!(!is_frame_line(b"dd 17659 15667.995033: 1 cpu-clock:"));
        // A task named in hex digits, its name right-aligned.
        assert!(!is_frame_line(
            b"              dd 12633 [001] 25563.433864407:   block:block_rq_issue: 254,0 RA 4096 () 12580512 + 8 0x2,0,4 [dd]"
        ));
        assert!(!is_frame_line(
            b"              cc 7 [000] 1.000000: nvme:nvme_setup_cmd: nvme0: cmd=(nvme_cmd_read slba=1)"
        ));
    }
}
