//! The headline figures' ids: one word without spaces, so that a shell
//! needs no quotes (`check --metric probe.fsync.p99_ms`), made of a scope,
//! what it is about and the figure with its unit:
//!
//! | id | figure |
//! |---|---|
//! | `workload.ms_per_op` | the workload's time per operation (its probe marks, else its system calls) |
//! | `probe.OP.p50_ms`, `.p99_ms`, `.max_ms`, `.count` | a probe operation's latency and count |
//! | `dev.MAJ,MIN.requests`, `.avg_request_kib`, `.bios_per_request`, `.d2c.p99_ms`, `.q2c.p99_ms`, `.q2c.avg_ms` | a device's requests |
//! | `journal.MAJ,MIN.commits`, `.checkpoint_passes` | an ext4 journal |
//! | `sched.longest_runqueue_wait_ms` | the longest runqueue wait |
//! | `function.NAME.calls`, `.avg_ms`, `.max_ms` | a function timed by its calls |
//! | `function.NAME.blocks`, `.blocked_avg_ms`, `.blocked_total_ms` | a function timed by blocked time under it |
//!
//! Each also has the label `diff` showed before (`probe fsync p99 ms`,
//! JSON's `name`), still accepted by `check --metric` with a warning, and a
//! title that `diff`'s table shows beside the id for people, the unit in
//! parentheses and a device by its name where the snapshot gives it
//! (`fsync p99 (ms)`, `loop0 D2C p99 (ms)`).

use serde::Serialize;

/// What a figure counts, which says how to print it and what change matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// Milliseconds (printed with decimals).
    Ms,
    /// A number of things (printed as an integer).
    Count,
    /// KiB, or a ratio such as bios per request.
    Size,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    Workload,
    Probe,
    Dev,
    Journal,
    Sched,
    Function,
}

impl Scope {
    fn id(self) -> &'static str {
        match self {
            Scope::Workload => "workload",
            Scope::Probe => "probe",
            Scope::Dev => "dev",
            Scope::Journal => "journal",
            Scope::Sched => "sched",
            Scope::Function => "function",
        }
    }
}

/// One kind of figure: its scope, the end of its id, of its label and of
/// its title.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kind {
    scope: Scope,
    id: &'static str,
    label: &'static str,
    title: &'static str,
    pub unit: Unit,
    /// One event's value (a maximum): two identical runs' differ by
    /// whatever the machine did for a moment.
    pub maximum: bool,
    pub higher_is_worse: bool,
}

const fn kind(
    scope: Scope,
    id: &'static str,
    [label, title]: [&'static str; 2],
    unit: Unit,
    higher_is_worse: bool,
) -> Kind {
    Kind {
        scope,
        id,
        label,
        title,
        unit,
        maximum: false,
        higher_is_worse,
    }
}

const fn maximum(k: Kind) -> Kind {
    Kind { maximum: true, ..k }
}

pub const WORKLOAD_MS_PER_OP: Kind = kind(
    Scope::Workload,
    "ms_per_op",
    ["workload ms per operation", "time per operation (ms)"],
    Unit::Ms,
    true,
);
pub const PROBE_P50: Kind = kind(
    Scope::Probe,
    "p50_ms",
    ["p50 ms", "p50 (ms)"],
    Unit::Ms,
    true,
);
pub const PROBE_P99: Kind = kind(
    Scope::Probe,
    "p99_ms",
    ["p99 ms", "p99 (ms)"],
    Unit::Ms,
    true,
);
pub const PROBE_MAX: Kind = maximum(kind(
    Scope::Probe,
    "max_ms",
    ["max ms", "max (ms)"],
    Unit::Ms,
    true,
));
pub const PROBE_COUNT: Kind = kind(
    Scope::Probe,
    "count",
    ["count", "count"],
    Unit::Count,
    false,
);
pub const DEV_REQUESTS: Kind = kind(
    Scope::Dev,
    "requests",
    ["requests", "requests"],
    Unit::Count,
    true,
);
pub const DEV_AVG_KIB: Kind = kind(
    Scope::Dev,
    "avg_request_kib",
    ["avg request KiB", "avg request (KiB)"],
    Unit::Size,
    false,
);
pub const DEV_BIOS_PER_REQUEST: Kind = kind(
    Scope::Dev,
    "bios_per_request",
    ["bios per request", "bios per request"],
    Unit::Size,
    false,
);
pub const DEV_D2C_P99: Kind = kind(
    Scope::Dev,
    "d2c.p99_ms",
    ["D2C p99 ms", "D2C p99 (ms)"],
    Unit::Ms,
    true,
);
/// Queue to completion: what the workload waits for at the device.
pub const DEV_Q2C_P99: Kind = kind(
    Scope::Dev,
    "q2c.p99_ms",
    ["Q2C p99 ms", "Q2C p99 (ms)"],
    Unit::Ms,
    true,
);
/// The same on average: what the I/O scheduler or writeback throttling
/// holds back moves it, where the p99 of a few hundred requests swings
/// with one slow one.
pub const DEV_Q2C_AVG: Kind = kind(
    Scope::Dev,
    "q2c.avg_ms",
    ["Q2C avg ms", "Q2C avg (ms)"],
    Unit::Ms,
    true,
);
pub const JOURNAL_COMMITS: Kind = kind(
    Scope::Journal,
    "commits",
    ["commits", "journal commits"],
    Unit::Count,
    true,
);
pub const JOURNAL_CHECKPOINTS: Kind = kind(
    Scope::Journal,
    "checkpoint_passes",
    ["checkpoint passes", "journal checkpoint passes"],
    Unit::Count,
    true,
);
pub const LONGEST_RUNQUEUE_WAIT: Kind = maximum(kind(
    Scope::Sched,
    "longest_runqueue_wait_ms",
    ["longest runqueue wait ms", "longest runqueue wait (ms)"],
    Unit::Ms,
    true,
));
pub const FUNCTION_CALLS: Kind = kind(
    Scope::Function,
    "calls",
    ["calls count", "calls"],
    Unit::Count,
    false,
);
pub const FUNCTION_AVG: Kind = kind(
    Scope::Function,
    "avg_ms",
    ["avg ms", "avg (ms)"],
    Unit::Ms,
    true,
);
pub const FUNCTION_MAX: Kind = maximum(kind(
    Scope::Function,
    "max_ms",
    ["max ms", "max (ms)"],
    Unit::Ms,
    true,
));
pub const FUNCTION_BLOCKS: Kind = kind(
    Scope::Function,
    "blocks",
    ["blocks count", "blocks"],
    Unit::Count,
    false,
);
pub const FUNCTION_BLOCKED_AVG: Kind = kind(
    Scope::Function,
    "blocked_avg_ms",
    ["blocked avg ms", "blocked avg (ms)"],
    Unit::Ms,
    true,
);
pub const FUNCTION_BLOCKED_TOTAL: Kind = kind(
    Scope::Function,
    "blocked_total_ms",
    ["blocked total ms", "blocked total (ms)"],
    Unit::Ms,
    true,
);

/// Every kind, in the order `diff` shows them.
pub const KINDS: [Kind; 20] = [
    WORKLOAD_MS_PER_OP,
    PROBE_P50,
    PROBE_P99,
    PROBE_MAX,
    PROBE_COUNT,
    DEV_REQUESTS,
    DEV_AVG_KIB,
    DEV_BIOS_PER_REQUEST,
    DEV_D2C_P99,
    DEV_Q2C_P99,
    DEV_Q2C_AVG,
    JOURNAL_COMMITS,
    JOURNAL_CHECKPOINTS,
    LONGEST_RUNQUEUE_WAIT,
    FUNCTION_CALLS,
    FUNCTION_AVG,
    FUNCTION_MAX,
    FUNCTION_BLOCKS,
    FUNCTION_BLOCKED_AVG,
    FUNCTION_BLOCKED_TOTAL,
];

/// One headline figure of a run.
#[derive(Debug, Clone)]
pub struct Metric {
    pub id: String,
    /// Its label with spaces, as `diff` named it before ids (`probe fsync
    /// p99 ms`, JSON's `name`; `check --metric` still takes it).
    pub label: String,
    /// For people, beside the id in `diff`'s table: `fsync p99 (ms)`,
    /// `loop0 D2C p99 (ms)`.
    pub title: String,
    pub value: f64,
    pub kind: Kind,
}

impl Kind {
    /// This kind's figure about `of` (a probe operation, a device, a
    /// journal, a function; nothing for `sched`).
    pub fn metric(self, of: &str, value: f64) -> Metric {
        let label = match self.scope {
            Scope::Sched | Scope::Workload => self.label.to_string(),
            Scope::Dev => format!("{of} {}", self.label),
            s => format!("{} {of} {}", s.id(), self.label),
        };
        Metric {
            id: self.id(of),
            label,
            title: self.title_of(of),
            value,
            kind: self,
        }
    }

    /// The id of this kind's figure about `of` (`sched.longest_runqueue_wait_ms`,
    /// `dev.7,0.requests`, `probe.fsync.p99_ms`).
    pub fn id(self, of: &str) -> String {
        match self.scope {
            Scope::Sched | Scope::Workload => format!("{}.{}", self.scope.id(), self.id),
            Scope::Dev => format!("dev.{of}.{}", self.id),
            s => format!("{}.{of}.{}", s.id(), self.id),
        }
    }

    /// The title of this kind's figure about `of` (for a device or a
    /// journal, its name where known, else its `MAJ,MIN`).
    fn title_of(self, of: &str) -> String {
        match self.scope {
            Scope::Sched => self.title.to_string(),
            Scope::Workload => format!("workload {}", self.title),
            _ => format!("{of} {}", self.title),
        }
    }

    /// Whether `of` can be what a figure of this kind is about.
    fn fits(self, of: &str) -> bool {
        match self.scope {
            Scope::Dev | Scope::Journal => crate::model::Dev::parse(of).is_some(),
            _ => !of.is_empty() && !of.contains(char::is_whitespace),
        }
    }

    /// The pattern of this kind's ids, for help and messages.
    fn pattern(self) -> String {
        let of = match self.scope {
            Scope::Probe => "OP",
            Scope::Dev | Scope::Journal => "MAJ,MIN",
            Scope::Function => "FUNCTION",
            Scope::Sched | Scope::Workload => return format!("{}.{}", self.scope.id(), self.id),
        };
        format!("{}.{of}.{}", self.scope.id(), self.id)
    }
}

impl Metric {
    /// The figure of a device or a journal titled by the device's name
    /// (`loop0 D2C p99 (ms)`) rather than its `MAJ,MIN`.
    pub fn of_device_named(mut self, name: &str) -> Metric {
        self.title = self.kind.title_of(name);
        self
    }
}

/// The kind of an id, if it has the form of one.
pub fn kind_of(id: &str) -> Option<Kind> {
    KINDS.into_iter().find(|k| {
        if matches!(k.scope, Scope::Sched | Scope::Workload) {
            return id == format!("{}.{}", k.scope.id(), k.id);
        }
        id.strip_prefix(k.scope.id())
            .and_then(|r| r.strip_prefix('.'))
            .and_then(|r| r.strip_suffix(k.id))
            .and_then(|r| r.strip_suffix('.'))
            .is_some_and(|of| k.fits(of))
    })
}

/// The id of an old label (`probe fsync p99 ms`, `7,0 requests`), if it
/// is one.
pub fn id_of_label(label: &str) -> Option<String> {
    KINDS.into_iter().find_map(|k| {
        if matches!(k.scope, Scope::Sched | Scope::Workload) {
            return (label == k.label).then(|| k.id(""));
        }
        let rest = match k.scope {
            Scope::Dev => label,
            s => label.strip_prefix(s.id())?.strip_prefix(' ')?,
        };
        let of = rest.strip_suffix(k.label)?.strip_suffix(' ')?;
        k.fits(of).then(|| k.id(of))
    })
}

/// `--metric`: an id, or an old label (said with a warning by the
/// caller: `Ok((id, true))`); anything else is refused, listing the ids.
pub fn parse(s: &str) -> Result<(String, bool), String> {
    if kind_of(s).is_some() {
        return Ok((s.to_string(), false));
    }
    if let Some(id) = id_of_label(s) {
        return Ok((id, true));
    }
    Err(format!("no metric {s:?}; the metrics are: {}", patterns()))
}

/// Every kind's id pattern, comma-separated.
pub fn patterns() -> String {
    KINDS
        .iter()
        .map(|k| k.pattern())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A value as its unit is read: counts whole (`512`, a mean over runs
/// with one decimal), times and sizes with three decimals.
pub fn shown(unit: Unit, v: f64) -> String {
    match unit {
        Unit::Count if v.fract() == 0.0 => format!("{v:.0}"),
        Unit::Count => format!("{v:.1}"),
        _ => format!("{v:.3}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_reads_back_by_id_and_by_label() {
        for k in KINDS {
            for of in ["fsync", "7,0", "ext4_sync_file.isra.0"] {
                let by_number = matches!(k.scope, Scope::Dev | Scope::Journal);
                if by_number != (of == "7,0") {
                    continue;
                }
                let m = k.metric(of, 1.0);
                assert!(!m.id.contains(' '), "{}", m.id);
                assert_eq!(parse(&m.id), Ok((m.id.clone(), false)));
                assert_eq!(parse(&m.label), Ok((m.id.clone(), true)), "{}", m.label);
            }
        }
        assert_eq!(
            parse("probe fsync p99 ms"),
            Ok(("probe.fsync.p99_ms".into(), true))
        );
        assert_eq!(
            parse("7,0 D2C p99 ms"),
            Ok(("dev.7,0.d2c.p99_ms".into(), true))
        );
        assert_eq!(
            parse("function f blocked avg ms"),
            Ok(("function.f.blocked_avg_ms".into(), true))
        );
        assert_eq!(
            parse("sched.longest_runqueue_wait_ms"),
            Ok(("sched.longest_runqueue_wait_ms".into(), false))
        );
    }

    #[test]
    fn anything_else_is_refused_with_the_list() {
        for bad in ["", "no such figure", "probe..p99_ms", "dev.7,0.p99", "p99"] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains("probe.OP.p99_ms, "), "{e}");
            assert!(e.contains("dev.MAJ,MIN.d2c.p99_ms"), "{e}");
        }
    }

    #[test]
    fn counts_print_whole() {
        assert_eq!(shown(Unit::Count, 512.0), "512");
        assert_eq!(shown(Unit::Count, 8.5), "8.5");
        assert_eq!(shown(Unit::Ms, 0.117), "0.117");
    }
}
