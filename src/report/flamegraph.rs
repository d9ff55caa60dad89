//! Flame graphs as interactive SVG (search, zoom, a title per frame, like
//! flamegraph.pl), drawn by the inferno crate from the folded stacks.
//! Frame names, comms and file names are anyone's text: their control
//! characters are escaped (`\x1b`) before inferno draws them, since XML
//! allows no C0 control and a browser refuses an SVG that holds one.

use super::folded::{off_cpu_lines, on_cpu_lines};
use crate::analyze::stacks::SCHEDULER_FRAMES;
use crate::analyze::Analysis;
use crate::report::escape;
use inferno::flamegraph::{self, color::BasicPalette, Options, Palette};

/// Draws folded lines (`stack COUNT`, or `stack BEFORE AFTER` for a
/// differential graph).
fn draw<'a>(
    title: &str,
    subtitle: &str,
    count_name: &str,
    palette: Option<Palette>,
    lines: impl IntoIterator<Item = &'a str>,
) -> std::io::Result<Vec<u8>> {
    let mut opts = Options::default();
    opts.title = title.into();
    opts.subtitle = Some(escape(subtitle).into());
    opts.count_name = count_name.into();
    if let Some(p) = palette {
        opts.colors = p;
    }
    let mut svg = Vec::new();
    flamegraph::from_lines(&mut opts, lines, &mut svg).map_err(std::io::Error::other)?;
    Ok(svg)
}

/// The on-CPU flame graph, in the "hot" palette of flamegraph.pl. Frame
/// widths are the folded counts: samples, or each sample's period where
/// the source gives one (perf record), as inferno-collapse-perf adds them
/// up; the hover text and the subtitle name the same unit. `inputs`
/// opens the subtitle (may be empty).
pub fn on_cpu_svg(a: &Analysis, inputs: &str) -> std::io::Result<Vec<u8>> {
    let lines: Vec<String> = on_cpu_lines(a)
        .map(|(s, n)| format!("{} {n}", escape(s)))
        .collect();
    let unit = on_cpu_unit(a);
    let mut subtitle = String::new();
    if let Some(note) = unresolved_kernel_note(a) {
        subtitle.push_str(&note);
        subtitle.push_str(" · ");
    }
    if !inputs.is_empty() {
        subtitle.push_str(inputs);
        subtitle.push_str(": ");
    }
    subtitle.push_str(&unit.words);
    draw(
        "Flame Graph",
        &subtitle,
        &unit.count_name,
        None,
        lines.iter().map(String::as_str),
    )
}

/// What an on-CPU graph's widths count, and the words for its subtitle.
pub struct OnCpuUnit {
    /// inferno's --countname: `samples`, `ns` (a clock event's period),
    /// or the event's name (`cycles`).
    pub count_name: String,
    pub words: String,
}

/// Samples when every one weighs 1; else their periods, in ns for perf's
/// clock events (cpu-clock, task-clock) and in the event's own count for
/// the others, named from the perf.data file's event attributes.
pub fn on_cpu_unit(a: &Analysis) -> OnCpuUnit {
    let samples = a.stacks.samples;
    let total: u64 = on_cpu_lines(a).map(|(_, n)| n).sum();
    let plural =
        |n: u64, one: &str| format!("{} {one}{}", thousands(n), if n == 1 { "" } else { "s" });
    if total == samples {
        return OnCpuUnit {
            count_name: "samples".into(),
            words: plural(samples, "sample"),
        };
    }
    match sampled_event(a) {
        Some(Event::Clock(name)) => OnCpuUnit {
            count_name: "ns".into(),
            words: format!(
                "{}, {} ns of {name} (each sample's period)",
                plural(samples, "sample"),
                thousands(total)
            ),
        },
        Some(Event::Other(name)) => OnCpuUnit {
            words: format!(
                "{}, {} {name} (each sample's period)",
                plural(samples, "sample"),
                thousands(total)
            ),
            count_name: name,
        },
        None => OnCpuUnit {
            count_name: "period".into(),
            words: format!(
                "{}, weighted by their period ({} in all, the sampling event's unit)",
                plural(samples, "sample"),
                thousands(total)
            ),
        },
    }
}

/// The event perf.data inputs sampled, when they all agree.
enum Event {
    Clock(String),
    Other(String),
}

fn sampled_event(a: &Analysis) -> Option<Event> {
    use linux_perf_data::linux_perf_event_reader::{PerfEventType, SoftwareCounterType};
    let mut found: Option<(bool, String)> = None;
    for i in &a.inputs {
        if i.format != "perf.data" {
            return None;
        }
        let f = std::fs::File::open(&i.path).ok()?;
        let r = linux_perf_data::PerfFileReader::parse_file(std::io::BufReader::new(f)).ok()?;
        for e in r.perf_file.event_attributes() {
            let clock = matches!(
                e.attr.type_,
                PerfEventType::Software(
                    SoftwareCounterType::CpuClock | SoftwareCounterType::TaskClock
                )
            );
            let name = e
                .name()
                .map(|n| n.split(':').next().unwrap_or(n).to_string())
                .unwrap_or_else(|| {
                    if clock {
                        "cpu-clock".into()
                    } else {
                        "events".into()
                    }
                });
            match &found {
                Some(f) if *f != (clock, name.clone()) => return None,
                _ => found = Some((clock, name)),
            }
        }
    }
    let (clock, name) = found?;
    Some(if clock {
        Event::Clock(name)
    } else {
        Event::Other(name)
    })
}

/// `12,345,678`, as inferno writes counts.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// When the samples' kernel frames went unnamed (a perf.data file from
/// another kernel, without --kallsyms): what is missing, for the first
/// line a reader sees.
pub fn unresolved_kernel_note(a: &Analysis) -> Option<String> {
    let (mut all, mut unnamed) = (0u64, 0u64);
    for (stack, n) in on_cpu_lines(a) {
        all += n;
        if stack.split(';').any(|f| f == "[[kernel.kallsyms]]") {
            unnamed += n;
        }
    }
    (unnamed > 0).then(|| {
        format!(
            "kernel frames unresolved ({:.0}% of the samples): pass --kallsyms FILE from the recording machine",
            unnamed as f64 * 100.0 / all.max(1) as f64
        )
    })
}

/// The off-CPU flame graph: frame widths are blocked time in µs (as bcc's
/// offcputime -f folds it; inferno's count name `us`, as flamegraph.pl
/// --countname=us), in the blue "io" palette flamegraph.pl uses for
/// off-CPU graphs. `inputs` opens the subtitle (may be empty).
pub fn off_cpu_svg(a: &Analysis, inputs: &str) -> std::io::Result<Vec<u8>> {
    let lines: Vec<String> = off_cpu_lines(a)
        .map(|(s, us)| format!("{} {us}", escape(s)))
        .collect();
    let us: u64 = off_cpu_lines(a).map(|(_, us)| us).sum();
    let words = format!(
        "{} us ({} ms) blocked with a known stack",
        thousands(us),
        crate::report::html::svg::short(us as f64 / 1e3)
    );
    let subtitle = if inputs.is_empty() {
        words
    } else {
        format!("{inputs}: {words}")
    };
    draw(
        "Off-CPU Time Flame Graph",
        &subtitle,
        "us",
        Some(Palette::Basic(BasicPalette::Io)),
        lines.iter().map(String::as_str),
    )
}

/// A folded stack without the scheduler frames at its inner end. A
/// differential flame graph colours only the frame a stack ends in
/// (difffolded.pl and inferno alike): with every stack ending in
/// `__schedule`, nothing else would show its change. Cut there, the frame
/// that waited (add_transaction_credits, jbd2_log_wait_commit) ends it.
fn without_scheduler_leaf(stack: &str) -> String {
    let mut frames: Vec<&str> = stack.split(';').collect();
    while frames.len() > 2 && frames.last().is_some_and(|f| SCHEDULER_FRAMES.contains(f)) {
        frames.pop();
    }
    frames.join(";")
}

/// The differential off-CPU flame graph, as difffolded.pl + flamegraph.pl
/// draw it: the candidate's stacks, red where a frame's blocked time grew
/// against the baseline, blue where it shrank. The baseline is scaled to
/// the candidate's total first (difffolded -n), so that colours show the
/// change of shape, not of length. Several runs a side add up. The
/// scheduler's frames are cut from the inner end (see
/// [`without_scheduler_leaf`]).
pub fn differential_off_cpu_svg(
    base: &[&Analysis],
    cand: &[&Analysis],
    subtitle: &str,
) -> std::io::Result<Vec<u8>> {
    let folded = |side: &[&Analysis]| -> Vec<u8> {
        let mut text = String::new();
        for a in side {
            for (stack, us) in off_cpu_lines(a) {
                let stack = without_scheduler_leaf(stack);
                text.push_str(&format!("{} {us}\n", escape(&stack)));
            }
        }
        text.into_bytes()
    };
    let mut lines = Vec::new();
    let opts = inferno::differential::Options {
        normalize: true,
        strip_hex: false,
    };
    inferno::differential::from_readers(opts, &folded(base)[..], &folded(cand)[..], &mut lines)?;
    let text = String::from_utf8_lossy(&lines);
    draw(
        "Differential Off-CPU Flame Graph",
        subtitle,
        "us",
        None,
        text.lines(),
    )
}
