//! The metadata of a trace-cmd `trace.dat` file, versions 6 and 7
//! (trace-cmd.dat.v6(5), trace-cmd.dat.v7(5); read as trace-cmd's
//! lib/trace-cmd/trace-input.c reads them):
//!
//! ```text
//! "\x17\x08\x44tracing" VERSION "\0", u8 endian, u8 long size, u32 page size
//! v6: header_page/header_event, ftrace formats, event formats, kallsyms
//!     (u32 size), printk formats (u32 size), cmdlines (u64 size), u32 CPUs,
//!     ["options  \0" options ending with id 0], "flyrecord\0",
//!     CPUs × (u64 offset, u64 size) of each CPU's ring-buffer pages
//! v7: compression name "\0" version "\0", u64 offset of the first options
//!     section; then sections, each after a 16-byte header (u16 id, u16
//!     flags, u32 description, u64 size), where the options say; a
//!     compressed section is u32 compressed size, u32 size, data
//! ```
//!
//! Reading the bytes themselves, bounded by the file: file.rs.

use super::file::{decompress, Backing, Codec, Cursor, Header};
use crate::ingest::tracefs_format::{parse_format, parse_header_page, EventFormat, PageHeader};
use std::borrow::Cow;
use std::collections::HashSet;

/// The option ids of trace-cmd's `enum tracecmd_option`.
mod opt {
    pub const DONE: u16 = 0;
    pub const DATE: u16 = 1;
    pub const BUFFER: u16 = 3;
    pub const TRACECLOCK: u16 = 4;
    pub const OFFSET: u16 = 7;
    pub const CPUCOUNT: u16 = 8;
    pub const TIME_SHIFT: u16 = 12;
    pub const TSC2NSEC: u16 = 14;
    pub const HEADER_INFO: u16 = 16;
    pub const FTRACE_EVENTS: u16 = 17;
    pub const EVENT_FORMATS: u16 = 18;
    pub const KALLSYMS: u16 = 19;
    pub const CMDLINES: u16 = 21;
    pub const BUFFER_TEXT: u16 = 22;
}

/// A section's flag: its data is compressed.
const SECTION_COMPRESSED: u16 = 1;

/// Options sections chained one after the other: more is a loop.
const MAX_OPTION_SECTIONS: usize = 4096;

/// The CPUs one buffer may describe.
const MAX_CPUS: u64 = 1 << 16;

/// One CPU's ring-buffer pages: where in the file, how many bytes (as
/// stored: compressed chunks for a compressed buffer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuData {
    pub cpu: u32,
    pub offset: u64,
    pub size: u64,
}

/// A trace instance's data (the top instance is named "").
#[derive(Debug, Clone)]
pub struct Buffer {
    pub name: String,
    pub page_size: usize,
    pub compressed: bool,
    pub cpus: Vec<CpuData>,
}

/// How a ring-buffer timestamp becomes the time trace-cmd report prints
/// (trace-input.c's `timestamp_calc`): scaled when the TSC2NSEC option
/// says so, then shifted by the DATE and OFFSET options.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Clock {
    pub mult: u32,
    pub shift: u32,
    pub offset: i64,
}

impl Clock {
    pub fn apply(&self, ts: u64) -> u64 {
        let ts = if self.mult != 0 {
            ((u128::from(ts) * u128::from(self.mult)) >> self.shift.min(127)) as u64
        } else {
            ts
        };
        ts.wrapping_add(self.offset as u64)
    }
}

/// Everything the file says besides the events.
#[derive(Debug, Default)]
pub struct Meta {
    pub page: PageHeader,
    pub formats: Vec<EventFormat>,
    pub kallsyms: String,
    pub cmdlines: String,
    pub buffers: Vec<Buffer>,
    pub clock: Clock,
    /// Problems that leave the rest readable, each a sentence.
    pub notes: Vec<String>,
}

/// Reads the header and all the metadata, or says what is wrong.
pub fn read_meta(b: &Backing) -> Result<(Header, Meta), String> {
    let h = super::file::parse_header(b)?;
    let mut m = Meta::default();
    if h.version >= 7 {
        read_v7(b, &h, &mut m)?;
    } else {
        read_v6(b, &h, &mut m)?;
    }
    Ok((h, m))
}

/// `header_page\0` u64 size, text; `header_event\0` u64 size, text.
fn header_info(c: &mut Cursor<'_>) -> Result<PageHeader, String> {
    let mut page = None;
    for name in ["header_page", "header_event"] {
        let at = c.at;
        let tag = c.take(name.len() as u64 + 1)?;
        if &tag[..name.len()] != name.as_bytes() || tag[name.len()] != 0 {
            return Err(format!("no {name} at byte {at} where the header info is"));
        }
        let size = c.u64()?;
        let text = c.text(size, name)?;
        if name == "header_page" {
            page = Some(
                parse_header_page(&text)
                    .ok_or("its header_page cannot be parsed (no commit or data field)")?,
            );
        }
    }
    Ok(page.expect("read above"))
}

/// u32 count, count × (u64 size, format text) of the `ftrace` system.
fn ftrace_formats(c: &mut Cursor<'_>, out: &mut Vec<EventFormat>) -> Result<(), String> {
    let n = c.u32()?;
    for _ in 0..n {
        let size = c.u64()?;
        if let Some(f) = parse_format("ftrace", &c.text(size, "ftrace event format")?) {
            out.push(f);
        }
    }
    Ok(())
}

/// u32 systems; each: name, u32 count, count × (u64 size, format text).
fn event_formats(c: &mut Cursor<'_>, out: &mut Vec<EventFormat>) -> Result<(), String> {
    let systems = c.u32()?;
    for _ in 0..systems {
        let system = c.string()?;
        let n = c.u32()?;
        for _ in 0..n {
            let size = c.u64()?;
            if let Some(f) = parse_format(&system, &c.text(size, "event format")?) {
                out.push(f);
            }
        }
    }
    Ok(())
}

/// The options both versions share, as trace-input.c's `handle_options`
/// reads them. `HEADER_INFO` and the other section options are v7's.
#[derive(Default)]
struct Options {
    date_us: i64,
    offset: i64,
    tsc: Option<(u32, u32, u64)>,
    cpucount: Option<u32>,
    time_shift: bool,
    trace_clock: Option<String>,
    /// v6: (offset, name); v7: the whole buffer.
    buffers_v6: Vec<(u64, String)>,
    buffers: Vec<(u64, Buffer)>,
    latency: bool,
    /// v7: where each metadata section is.
    sections: Vec<(u16, u64)>,
}

/// strtoll(s, NULL, 0): decimal, 0x hex or 0 octal, sign allowed.
fn parse_c_int(s: &str) -> Option<i64> {
    let s = s.trim_matches(|c: char| c == '\0' || c.is_whitespace());
    let (neg, s) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let v = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        i64::from_str_radix(h, 16).ok()?
    } else if s.len() > 1 && s.starts_with('0') {
        i64::from_str_radix(&s[1..], 8).ok()?
    } else {
        s.parse().ok()?
    };
    Some(if neg { v.wrapping_neg() } else { v })
}

/// The current clock of a `trace_clock` file: `local global [mono] ...`.
fn current_clock(text: &str) -> Option<String> {
    text.split_whitespace()
        .find_map(|w| w.strip_prefix('[')?.split(']').next())
        .map(str::to_string)
}

impl Options {
    fn take(&mut self, id: u16, data: &[u8], v7: bool) -> Result<(), String> {
        let text =
            || String::from_utf8_lossy(data.split(|&b| b == 0).next().unwrap_or(&[])).into_owned();
        let u64_at = |at: usize| -> Option<u64> {
            Some(u64::from_le_bytes(data.get(at..at + 8)?.try_into().ok()?))
        };
        match id {
            opt::DATE => {
                if let Some(v) = parse_c_int(&text()) {
                    self.date_us = self.date_us.wrapping_add(v);
                }
            }
            opt::OFFSET => {
                if let Some(v) = parse_c_int(&text()) {
                    self.offset = self.offset.wrapping_add(v);
                }
            }
            opt::TSC2NSEC if data.len() >= 16 => {
                let mult = u32::from_le_bytes(data[0..4].try_into().unwrap());
                let shift = u32::from_le_bytes(data[4..8].try_into().unwrap());
                self.tsc = Some((mult, shift, u64_at(8).unwrap_or(0)));
            }
            opt::CPUCOUNT if data.len() >= 4 => {
                self.cpucount = Some(u32::from_le_bytes(data[0..4].try_into().unwrap()));
            }
            opt::TIME_SHIFT if data.len() >= 16 => self.time_shift = true,
            opt::TRACECLOCK => self.trace_clock = current_clock(&text()),
            opt::BUFFER | opt::BUFFER_TEXT => {
                let mut c = Cursor::part(data, "buffer option");
                let offset = c.u64()?;
                let name = c.string()?;
                if !v7 {
                    self.buffers_v6.push((offset, name));
                    return Ok(());
                }
                let _clock = c.string()?;
                if id == opt::BUFFER_TEXT {
                    self.latency = true;
                    return Ok(());
                }
                let page_size = c.u32()? as usize;
                let n = u64::from(c.u32()?);
                if n > MAX_CPUS {
                    return Err(format!("its buffer {name:?} says it has {n} CPUs"));
                }
                let mut cpus = Vec::new();
                for _ in 0..n {
                    let cpu = c.u32()?;
                    let offset = c.u64()?;
                    let size = c.u64()?;
                    cpus.push(CpuData { cpu, offset, size });
                }
                self.buffers.push((
                    offset,
                    Buffer {
                        name,
                        page_size,
                        compressed: false,
                        cpus,
                    },
                ));
            }
            opt::HEADER_INFO..=opt::CMDLINES if v7 => {
                if let Some(at) = u64_at(0) {
                    self.sections.push((id, at));
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn clock(&self) -> Clock {
        let (mult, shift, tsc_offset) = self.tsc.unwrap_or((0, 0, 0));
        // trace-input.c reads the TSC2NSEC offset but adds only the DATE
        // (microseconds) and OFFSET options to the timestamps.
        let _ = tsc_offset;
        Clock {
            mult,
            shift,
            offset: self.date_us.wrapping_mul(1000).wrapping_add(self.offset),
        }
    }
}

fn finish_options(o: &Options, m: &mut Meta) {
    m.clock = o.clock();
    if o.time_shift {
        m.notes.push(
            "holds a guest's trace with host time-sync data (TIME_SHIFT), which iosleuth does not apply: its times are the guest's own".into(),
        );
    }
    if let Some(c) = &o.trace_clock {
        let ns = [
            "local", "global", "uptime", "perf", "boot", "tai", "tsc2nsec",
        ]
        .contains(&c.as_str())
            || c.starts_with("mono")
            || o.tsc.is_some();
        if !ns {
            m.notes.push(format!(
                "was recorded with the {c:?} trace clock, which does not count nanoseconds: times and latencies are in that clock's units"
            ));
        }
    }
}

// --- version 6 ----------------------------------------------------------

/// The 10-byte tag before the options and the data: "options  \0",
/// "latency  \0" or "flyrecord\0".
fn tag(c: &mut Cursor<'_>) -> Result<[u8; 10], String> {
    Ok(c.take(10)?[..].try_into().unwrap())
}

fn options_v6(c: &mut Cursor<'_>, o: &mut Options) -> Result<(), String> {
    loop {
        let id = c.u16()?;
        if id == opt::DONE {
            return Ok(());
        }
        let size = c.u32()?;
        let data = c.block(u64::from(size), "option")?;
        o.take(id, &data, false)?;
    }
}

/// The options (if any) and then the data's tag; true for flyrecord.
fn options_then_data(c: &mut Cursor<'_>, o: &mut Options) -> Result<bool, String> {
    let at = c.at;
    let mut t = tag(c)?;
    if t.starts_with(b"options") {
        options_v6(c, o)?;
        t = tag(c)?;
    }
    if t.starts_with(b"flyrecord") {
        Ok(true)
    } else if t.starts_with(b"latency") {
        Ok(false)
    } else {
        Err(format!(
            "no \"flyrecord\" or \"latency\" tag where the data should start (after byte {at}): {:?}",
            String::from_utf8_lossy(&t)
        ))
    }
}

fn cpu_pairs(c: &mut Cursor<'_>, n: u32) -> Result<Vec<CpuData>, String> {
    let mut cpus = Vec::new();
    for cpu in 0..n {
        let offset = c.u64()?;
        let size = c.u64()?;
        cpus.push(CpuData { cpu, offset, size });
    }
    Ok(cpus)
}

fn read_v6(b: &Backing, h: &Header, m: &mut Meta) -> Result<(), String> {
    let mut c = Cursor::file(b, h.rest);
    let ctx = |what: &'static str| move |e: String| format!("its {what}: {e}");
    m.page = header_info(&mut c).map_err(ctx("header info"))?;
    ftrace_formats(&mut c, &mut m.formats).map_err(ctx("ftrace event formats"))?;
    event_formats(&mut c, &mut m.formats).map_err(ctx("event formats"))?;
    let n = c.u32().map_err(ctx("kallsyms"))?;
    m.kallsyms = c.text(u64::from(n), "kallsyms").map_err(ctx("kallsyms"))?;
    let n = c.u32().map_err(ctx("printk formats"))?;
    c.block(u64::from(n), "printk formats")
        .map_err(ctx("printk formats"))?;
    let n = c.u64().map_err(ctx("saved cmdlines"))?;
    m.cmdlines = c.text(n, "saved cmdlines").map_err(ctx("saved cmdlines"))?;
    let cpus = c.u32().map_err(ctx("CPU count"))?;
    let mut o = Options::default();
    let fly = options_then_data(&mut c, &mut o).map_err(ctx("options"))?;
    finish_options(&o, m);
    let cpus = o.cpucount.unwrap_or(cpus);
    if u64::from(cpus) > MAX_CPUS {
        return Err(format!("it says it has {cpus} CPUs"));
    }
    if !fly {
        return Err(latency_only());
    }
    m.buffers.push(Buffer {
        name: String::new(),
        page_size: h.page_size,
        compressed: false,
        cpus: cpu_pairs(&mut c, cpus).map_err(ctx("flyrecord CPU offsets"))?,
    });
    for (offset, name) in &o.buffers_v6 {
        let mut c = Cursor::file(b, *offset);
        let mut inner = Options::default();
        match options_then_data(&mut c, &mut inner) {
            Ok(true) => {}
            Ok(false) => {
                m.notes.push(format!(
                    "its instance {name:?} holds a latency tracer's text, which iosleuth does not read: its events are not in this report"
                ));
                continue;
            }
            Err(e) => return Err(format!("its instance {name:?} at byte {offset}: {e}")),
        }
        m.buffers.push(Buffer {
            name: name.clone(),
            page_size: h.page_size,
            compressed: false,
            cpus: cpu_pairs(&mut c, cpus)
                .map_err(|e| format!("its instance {name:?} at byte {offset}: {e}"))?,
        });
    }
    Ok(())
}

fn latency_only() -> String {
    "holds a latency tracer's text (`trace-cmd record -p` of a latency tracer), not ring-buffer pages: iosleuth does not read it (`trace-cmd report` prints it)".into()
}

// --- version 7 ----------------------------------------------------------

/// A section's 16-byte header.
struct SectionHeader {
    id: u16,
    flags: u16,
    size: u64,
}

fn section_header(c: &mut Cursor<'_>) -> Result<SectionHeader, String> {
    let id = c.u16()?;
    let flags = c.u16()?;
    let _description = c.u32()?;
    let size = c.u64()?;
    Ok(SectionHeader { id, flags, size })
}

fn section_name(id: u16) -> &'static str {
    match id {
        opt::DONE => "options",
        opt::BUFFER => "flyrecord",
        opt::HEADER_INFO => "header info",
        opt::FTRACE_EVENTS => "ftrace event formats",
        opt::EVENT_FORMATS => "event formats",
        opt::KALLSYMS => "kallsyms",
        opt::CMDLINES => "saved cmdlines",
        _ => "metadata",
    }
}

/// The data of the section at `at`, which must be section `id`:
/// decompressed when its flags say so.
fn section_data<'a>(
    b: &'a Backing,
    at: u64,
    id: u16,
    codec: Option<Codec>,
) -> Result<Cow<'a, [u8]>, String> {
    let name = section_name(id);
    let mut c = Cursor::file(b, at);
    let s = section_header(&mut c).map_err(|e| format!("its {name} section at byte {at}: {e}"))?;
    if s.id != id {
        return Err(format!(
            "its {name} section at byte {at} has a damaged header: section id {} where {id} was expected",
            s.id
        ));
    }
    if s.flags & SECTION_COMPRESSED == 0 {
        return c
            .block(s.size, &format!("{name} section"))
            .map_err(|e| format!("its {name} section at byte {at}: {e}"));
    }
    let Some(codec) = codec else {
        return Err(format!(
            "its {name} section at byte {at} says it is compressed, but the file names no compression"
        ));
    };
    let block = |c: &mut Cursor<'a>| -> Result<Vec<u8>, String> {
        let zsize = c.u32()?;
        let size = c.u32()?;
        let data = c.block(u64::from(zsize), "compressed data")?;
        decompress(codec, &data, u64::from(size))
    };
    block(&mut c)
        .map(Cow::Owned)
        .map_err(|e| format!("its {name} section at byte {at}: {e}"))
}

fn read_v7(b: &Backing, h: &Header, m: &mut Meta) -> Result<(), String> {
    let o = v7_options(b, h)?;
    finish_options(&o, m);
    v7_sections(b, h, &o, m)?;
    if o.buffers.is_empty() {
        return Err(if o.latency {
            latency_only()
        } else {
            "holds no trace data: no flyrecord buffer (a partial file of `trace-cmd restore -c`?)"
                .into()
        });
    }
    v7_buffers(b, h, o.buffers, m)
}

/// The chain of options sections, from the header's first to the one
/// whose DONE option points nowhere.
fn v7_options(b: &Backing, h: &Header) -> Result<Options, String> {
    let mut c = Cursor::file(b, h.rest);
    let mut next = c.u64()?;
    let mut o = Options::default();
    let mut seen = HashSet::new();
    while next != 0 {
        if !seen.insert(next) || seen.len() > MAX_OPTION_SECTIONS {
            return Err(format!(
                "its options sections loop (the one at byte {next} again)"
            ));
        }
        let at = next;
        if at >= b.len() {
            b.ran_out();
            return Err(format!(
                "its options section at byte {at} lies past the end of the file ({} bytes): the file is cut short",
                b.len()
            ));
        }
        let data = section_data(b, at, opt::DONE, h.codec)?;
        let mut c = Cursor::part(&data, "options section");
        next = 0;
        loop {
            let id = c.u16().map_err(|_| {
                format!("its options section at byte {at} ends without its DONE option")
            })?;
            let size = c
                .u32()
                .map_err(|e| format!("its options section at byte {at}: {e}"))?;
            let d = c
                .take(u64::from(size))
                .map_err(|e| format!("its options section at byte {at}: {e}"))?;
            if id == opt::DONE {
                if d.len() >= 8 {
                    next = u64::from_le_bytes(d[..8].try_into().unwrap());
                }
                break;
            }
            o.take(id, &d, true)
                .map_err(|e| format!("its options section at byte {at}: {e}"))?;
        }
    }
    Ok(o)
}

/// The sections the options name: formats (needed), then the names of
/// addresses and processes (a note when damaged).
fn v7_sections(b: &Backing, h: &Header, o: &Options, m: &mut Meta) -> Result<(), String> {
    let find = |id: u16| {
        o.sections
            .iter()
            .rev()
            .find(|(i, _)| *i == id)
            .map(|(_, at)| *at)
    };
    let need = |id: u16| {
        find(id).ok_or_else(|| {
            format!(
                "has no {} section (a partial file of `trace-cmd restore -c`?)",
                section_name(id)
            )
        })
    };
    let read = |id: u16, at: u64| section_data(b, at, id, h.codec);
    let ctx = |id: u16, at: u64| {
        move |e: String| format!("its {} section at byte {at}: {e}", section_name(id))
    };

    let at = need(opt::HEADER_INFO)?;
    let d = read(opt::HEADER_INFO, at)?;
    m.page = header_info(&mut Cursor::part(&d, "header info section"))
        .map_err(ctx(opt::HEADER_INFO, at))?;
    if let Some(at) = find(opt::FTRACE_EVENTS) {
        let d = read(opt::FTRACE_EVENTS, at)?;
        ftrace_formats(
            &mut Cursor::part(&d, "ftrace formats section"),
            &mut m.formats,
        )
        .map_err(ctx(opt::FTRACE_EVENTS, at))?;
    }
    let at = need(opt::EVENT_FORMATS)?;
    let d = read(opt::EVENT_FORMATS, at)?;
    event_formats(
        &mut Cursor::part(&d, "event formats section"),
        &mut m.formats,
    )
    .map_err(ctx(opt::EVENT_FORMATS, at))?;
    // Names of addresses and processes: without them the events still
    // decode, so a damaged one is a note.
    if let Some(at) = find(opt::KALLSYMS) {
        match read(opt::KALLSYMS, at).and_then(|d| {
            let mut c = Cursor::part(&d, "kallsyms section");
            let n = c.u32()?;
            c.text(u64::from(n), "kallsyms")
        }) {
            Ok(t) => m.kallsyms = t,
            Err(e) => m.notes.push(format!("{e}; kernel addresses stay unnamed")),
        }
    }
    if let Some(at) = find(opt::CMDLINES) {
        match read(opt::CMDLINES, at).and_then(|d| {
            let mut c = Cursor::part(&d, "saved cmdlines section");
            let n = c.u64()?;
            c.text(n, "saved cmdlines")
        }) {
            Ok(t) => m.cmdlines = t,
            Err(e) => m.notes.push(format!("{e}; processes are named as `<...>`")),
        }
    }
    Ok(())
}

/// Each instance's flyrecord section, checked, the top instance first as
/// trace-cmd report merges them.
fn v7_buffers(
    b: &Backing,
    h: &Header,
    mut buffers: Vec<(u64, Buffer)>,
    m: &mut Meta,
) -> Result<(), String> {
    buffers.sort_by_key(|(_, b)| !b.name.is_empty());
    for (at, mut buf) in buffers {
        let mut c = Cursor::file(b, at);
        let s = section_header(&mut c).map_err(|e| {
            format!(
                "the flyrecord section of instance {:?} at byte {at}: {e}",
                buf.name
            )
        })?;
        if s.id != opt::BUFFER {
            return Err(format!(
                "the flyrecord section of instance {:?} at byte {at} has a damaged header: section id {} where {} was expected",
                buf.name,
                s.id,
                opt::BUFFER
            ));
        }
        buf.compressed = s.flags & SECTION_COMPRESSED != 0;
        if buf.compressed && h.codec.is_none() {
            return Err(format!(
                "the flyrecord section of instance {:?} says it is compressed, but the file names no compression",
                buf.name
            ));
        }
        let ps = buf.page_size as u64;
        if !ps.is_power_of_two() || !crate::model::capture_layout::PAGE_SIZES.contains(&ps) {
            return Err(format!(
                "its instance {:?} has a page size of {ps}, not a ring-buffer page size",
                buf.name
            ));
        }
        m.buffers.push(buf);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_integers_and_clocks() {
        assert_eq!(parse_c_int("0x10\0"), Some(16));
        assert_eq!(parse_c_int("-25"), Some(-25));
        assert_eq!(parse_c_int("010"), Some(8));
        assert_eq!(parse_c_int("zz"), None);
        assert_eq!(
            current_clock("local global counter [mono] boot\n").as_deref(),
            Some("mono")
        );
        let c = Clock {
            mult: 3,
            shift: 1,
            offset: -5,
        };
        assert_eq!(c.apply(10), 10);
    }
}
