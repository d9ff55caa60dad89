//! `iosleuth try`: proves a remedy on the user's own workload. The
//! workload runs in interleaved rounds, baseline and candidate (A B B A
//! …), each recorded and diagnosed; the candidate's settings are applied
//! just before its round and put back just after (through the journal
//! `record` uses, so a SIGKILL is undone by `record --cleanup`). The
//! verdict is the change of the medians with a bootstrap interval, how many
//! paired rounds agree, and whether the finding left.

mod applied;
pub mod html;
pub mod knob;
pub mod report;
pub mod verdict;

use crate::capture::journal::Journal;
use crate::capture::workload::{install_signal_handlers, interrupted};
use crate::error::{Error, ExitStatus, Result};
use crate::pipeline::{self, Options};
use applied::{Applied, Restored};
use knob::Knob;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;
use verdict::{Change, Outcome};

/// A figure read from the workload's own output: `stdout:TEXT`.
pub const STDOUT_METRIC: &str = "stdout:";

/// Where a round's workload writes its standard output: beside its
/// capture, `ROUND.out`.
pub fn output_of(round: &Path) -> PathBuf {
    round.with_extension("out")
}

/// The number right after the last `text` in `out` (`tps = 1234.5` for
/// `tps = `); `None` when there is none.
pub fn number_after(out: &str, text: &str) -> Option<f64> {
    let (_, rest) = out.rsplit_once(text)?;
    let rest = rest.trim_start();
    let end = rest
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || c == '.' || (i == 0 && (c == '-' || c == '+'))))
        .map_or(rest.len(), |(i, _)| i);
    rest[..end].parse().ok().filter(|v: &f64| v.is_finite())
}

/// The id of the workload's own time among the figures compared.
pub const WORKLOAD_SECONDS: &str = "workload.seconds";

/// One knob of the plan: its value now, the value tried, and the value
/// that puts it back after each candidate round.
#[derive(Debug, Clone, Serialize)]
pub struct Planned {
    /// The knob resolved to its file (what is read, written, put back).
    #[serde(skip)]
    resolved: Knob,
    pub knob: String,
    pub file: PathBuf,
    /// The name of the thread a thread's setting belongs to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread: Option<String>,
    pub now: String,
    pub tried: String,
    pub restore: String,
}

/// A change the workload makes itself for its candidate rounds
/// (`--workload-applies`): try only says it.
#[derive(Debug, Clone, Serialize)]
pub struct ByWorkload {
    pub knob: String,
    /// As the capture's snapshot had it; `None` when it did not.
    pub now: Option<String>,
    pub tried: String,
}

/// What each round's workload is told about its side, so that it can set
/// up the candidate's remedy itself: `baseline` or `candidate`.
pub const SIDE_ENV: &str = "IOSLEUTH_TRY_SIDE";

#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    /// Where the settings come from: a finding's remedy in a capture or
    /// report, or `--set`.
    pub from: String,
    /// The finding whose remedy this is.
    pub finding: Option<String>,
    /// The figure the finding is about (a metric id).
    pub metric: Option<String>,
    pub changes: Vec<Planned>,
    /// `Some` when the workload sets up each side itself (from
    /// IOSLEUTH_TRY_SIDE): the changes it makes for the candidate, as the
    /// remedy names them (none for the user's own A/B).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by_workload: Option<Vec<ByWorkload>>,
}

impl Plan {
    /// Resolves and reads each knob; a name that is no setting, or that
    /// cannot be read, is bad input (nothing is changed).
    pub fn new(
        from: String,
        finding: Option<String>,
        metric: Option<String>,
        settings: &[(String, String)],
    ) -> Result<Plan> {
        if settings.is_empty() {
            return Err(Error::bad_input("nothing to try: no setting given"));
        }
        let mut changes = Vec::new();
        for (name, value) in settings {
            let k = Knob::resolve(name, value).map_err(Error::bad_input)?;
            let now = k.read().map_err(Error::bad_input)?;
            changes.push(Planned {
                knob: name.clone(),
                file: k.file.clone(),
                thread: k.thread().map(crate::capture::task_setting::comm),
                restore: k.restore_value(&now),
                now,
                tried: value.clone(),
                resolved: k,
            });
        }
        Ok(Plan {
            from,
            finding,
            metric,
            changes,
            by_workload: None,
        })
    }

    /// A plan whose candidate side the workload sets up itself (a remedy
    /// that cannot be applied to a running system, such as a file system
    /// remade with a larger journal on a second device): try changes
    /// nothing and tells each round its side.
    pub fn by_workload(
        from: String,
        finding: Option<String>,
        metric: Option<String>,
        described: Vec<ByWorkload>,
    ) -> Plan {
        Plan {
            from,
            finding,
            metric,
            changes: Vec::new(),
            by_workload: Some(described),
        }
    }

    /// The knobs outside what the workload touched: a device's knob for a
    /// device it did no I/O to, a file that belongs to no device, a sysctl
    /// outside the page cache's and the scheduler's (`vm.*`,
    /// `kernel.sched_*`), a thread not seen holding a CPU the workload
    /// waited for, a workqueue's file whose work was not seen running.
    fn outside(&self, touched: &Touched) -> Vec<String> {
        self.changes
            .iter()
            .map(|c| &c.resolved)
            .filter(|k| {
                if let Some(tid) = k.thread() {
                    return !touched.holders.contains(&tid);
                }
                if let Some(cg) = k.memory_cgroup() {
                    return !touched.memory_cgroups.iter().any(|t| Path::new(t) == cg);
                }
                if let Some(wq) = workqueue_of(&k.file) {
                    return !touched.workqueues.iter().any(|w| w == wq);
                }
                if k.is_sysctl() {
                    let rel = k.file.strip_prefix("/proc/sys").unwrap_or(&k.file);
                    return !(rel.starts_with("vm")
                        || rel.to_string_lossy().starts_with("kernel/sched_"));
                }
                match k.device().and_then(|d| maj_min(&d)) {
                    Some(d) => !touched.devices.contains(&d),
                    None => true,
                }
            })
            .map(|k| k.name.clone())
            .collect()
    }
}

/// The workqueue whose file this is (`/sys/devices/virtual/workqueue/
/// writeback/cpumask` → `writeback`); not the mask of all unbound ones.
fn workqueue_of(file: &Path) -> Option<&str> {
    let rest = file.strip_prefix("/sys/devices/virtual/workqueue").ok()?;
    let mut parts = rest.iter();
    let wq = parts.next()?.to_str()?;
    // A file in the workqueue's directory, not the directory's own files.
    parts.next()?;
    Some(wq)
}

/// The workqueues with a sysfs directory whose work runs for a block
/// workload, by the function its work runs (fs/fs-writeback.c,
/// block/blk-cgroup.c).
const WORKQUEUE_FUNCTIONS: [(&str, &str); 2] = [
    ("wb_workfn", "writeback"),
    ("blkg_async_bio_workfn", "blkcg_punt_bio"),
];

/// A device as `MAJ:MIN`, from its name (`/sys/block/NAME/dev`) or as is.
fn maj_min(dev: &str) -> Option<String> {
    if dev.contains(':') {
        return Some(dev.to_string());
    }
    let text = std::fs::read_to_string(format!("/sys/class/block/{dev}/dev")).ok()?;
    Some(text.trim().to_string())
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    Baseline,
    Candidate,
}

impl Side {
    pub fn name(self) -> &'static str {
        match self {
            Side::Baseline => "baseline",
            Side::Candidate => "candidate",
        }
    }
}

/// One recorded run of the workload.
#[derive(Debug, Clone, Serialize)]
pub struct Round {
    pub side: Side,
    /// 1-based, per side.
    pub index: usize,
    pub seconds: f64,
    pub findings: Vec<String>,
    /// The capture's headline figures by id (`diff`'s and `check`'s).
    pub metrics: BTreeMap<String, f64>,
    pub capture: PathBuf,
    /// The knobs put back after a candidate round.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub restored: Vec<Restored>,
}

/// How often the finding showed on each side.
#[derive(Debug, Clone, Serialize)]
pub struct FindingRounds {
    pub id: String,
    pub baseline: usize,
    pub candidate: usize,
    pub rounds: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct Trial {
    pub plan: Plan,
    pub rounds: Vec<Round>,
    /// Each figure compared: the workload's time, the finding's figure,
    /// the user's `--metric`.
    pub changes: Vec<Change>,
    pub finding: Option<FindingRounds>,
    /// The figure the verdict is judged by.
    pub judged_by: String,
    pub verdict: Outcome,
    /// Why fewer rounds ran than asked (the time budget).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// What could not be compared, said (a figure missing from the rounds).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unknown: Vec<String>,
}

impl Trial {
    /// 0 better, 1 not better (worse, or no change), 125 inconclusive.
    pub fn exit_status(&self) -> ExitStatus {
        match self.verdict {
            Outcome::Better => ExitStatus::SUCCESS,
            Outcome::Worse | Outcome::NoChange => ExitStatus(1),
            Outcome::Inconclusive => ExitStatus::CANNOT_TELL,
        }
    }
}

pub struct TrialOptions {
    /// Rounds per side.
    pub rounds: usize,
    /// No round starts after this many seconds.
    pub max_seconds: Option<f64>,
    /// Knobs outside what the workload touched are allowed.
    pub force: bool,
    /// The user's figure: a metric id, or `stdout:TEXT` (the number after
    /// the last TEXT in the workload's output).
    pub metric: Option<String>,
    /// The user's `stdout:` figure is better higher (throughput).
    pub higher_is_better: bool,
    /// Where the rounds' captures go.
    pub dir: PathBuf,
}

/// Records one round of a side into a directory: the workload's exit
/// status and its wall time (s).
pub type Recorder<'a> = dyn FnMut(&Path, Side) -> Result<(i32, f64)> + 'a;

/// Runs the plan. Before any round the candidate's settings are applied
/// once and put back (a value the kernel refuses is bad input, exit 2);
/// the first baseline round says which devices the workload touched.
pub fn run(plan: Plan, o: &TrialOptions, record: &mut Recorder) -> Result<Trial> {
    install_signal_handlers();
    let mut journal = Journal::new();
    let changes = &plan.changes;
    // The kernel's answer before anything is measured.
    Applied::apply(&mut journal, changes)
        .and_then(|a| a.restore())
        .map_err(|e| Error::bad_input(format!("{e}: nothing was run")))?;
    let started = Instant::now();
    let mut rounds: Vec<Round> = Vec::new();
    let mut stopped = None;
    let mut workload_kinds: Option<Vec<String>> = None;
    'rounds: for r in 0..o.rounds {
        // A B, B A, A B, …: a machine that speeds up or slows down during
        // the run favours neither side of the pairs.
        let order = if r % 2 == 0 {
            [Side::Baseline, Side::Candidate]
        } else {
            [Side::Candidate, Side::Baseline]
        };
        for (i, side) in order.into_iter().enumerate() {
            if interrupted() {
                return Err(stopped_by_signal());
            }
            if let Some(max) = o.max_seconds {
                let spent = started.elapsed().as_secs_f64();
                if spent >= max && i == 0 {
                    stopped = Some(format!(
                        "--max-seconds {max}: stopped after {r} round(s) a side ({spent:.0} s)"
                    ));
                    break 'rounds;
                }
            }
            let dir = o.dir.join(format!("{}-{}", side.name(), r + 1));
            let (status, seconds, restored) = match side {
                Side::Baseline => {
                    let (s, t) = record(&dir, side)?;
                    (s, t, Vec::new())
                }
                Side::Candidate => {
                    let applied = Applied::apply(&mut journal, changes).map_err(Error::failed)?;
                    let outcome = record(&dir, side);
                    let restored = applied.restore().map_err(Error::failed)?;
                    let (s, t) = outcome?;
                    (s, t, restored)
                }
            };
            if status == 130 || interrupted() {
                return Err(stopped_by_signal());
            }
            if status != 0 {
                return Err(Error::bad_input(format!(
                    "the workload failed in {} round {} (exit {status}): nothing was judged; every setting is back",
                    side.name(),
                    r + 1
                )));
            }
            let run = pipeline::diagnosed(&dir, &Options::default())?;
            if r == 0 && side == Side::Baseline && !o.force {
                let touched = Touched::of(&run.analysis);
                let outside = plan.outside(&touched);
                if !outside.is_empty() {
                    let list = |v: Vec<String>| {
                        if v.is_empty() {
                            "none".to_string()
                        } else {
                            v.join(", ")
                        }
                    };
                    return Err(Error::bad_input(format!(
                        "{} outside what the workload touched (its devices: {}; threads that held a CPU it waited for: {}; memory cgroups limiting it: {}; workqueues whose work ran: {}); --force to try anyway",
                        outside.join(", "),
                        list(touched.devices.clone()),
                        list(touched.holders.iter().map(|t| t.to_string()).collect()),
                        list(touched.memory_cgroups.clone()),
                        list(touched.workqueues.clone()),
                    )));
                }
            }
            // The workload's time per operation over the first baseline
            // round's kinds: a workload that runs for a fixed time is
            // judged by how long each operation took.
            let kinds =
                workload_kinds.get_or_insert_with(|| crate::compare::workload_kinds(&run.analysis));
            let mut metrics: BTreeMap<String, f64> = crate::compare::headline(&run.analysis)
                .into_iter()
                .chain(crate::compare::ms_per_op(&run.analysis, kinds))
                .map(|m| (m.id, m.value))
                .collect();
            if let Some(text) = o
                .metric
                .as_deref()
                .and_then(|m| m.strip_prefix(STDOUT_METRIC))
            {
                let out = std::fs::read(output_of(&dir)).unwrap_or_default();
                if let Some(v) = number_after(&String::from_utf8_lossy(&out), text) {
                    metrics.insert(format!("{STDOUT_METRIC}{text}"), v);
                }
            }
            rounds.push(Round {
                side,
                index: r + 1,
                seconds,
                findings: run.findings.iter().map(|f| f.id.to_string()).collect(),
                metrics,
                capture: dir,
                restored,
            });
        }
    }
    judge(
        plan,
        rounds,
        o.metric.as_deref(),
        o.higher_is_better,
        stopped,
    )
}

/// Ctrl-C (or SIGTERM, SIGHUP) between or during rounds: said once every
/// setting is back.
fn stopped_by_signal() -> Error {
    Error::Interrupted("interrupted; every setting try changed is back".into())
}

/// What the workload's first baseline round touched: the devices it did
/// I/O to, as `MAJ:MIN`, and the threads that held a CPU while its
/// threads waited runnable for it.
struct Touched {
    devices: Vec<String>,
    holders: Vec<u32>,
    /// The memory cgroups it ran in and their ancestors with a limit.
    memory_cgroups: Vec<String>,
    /// The workqueues (with a sysfs directory) whose work ran while it
    /// did (the full recorder's `workqueue` set).
    workqueues: Vec<String>,
}

impl Touched {
    fn of(a: &crate::analyze::Analysis) -> Touched {
        // The longest runqueue waits' holders, and (full recorder) those
        // of the operations' runnable time.
        let mut holders: Vec<u32> = a
            .sched
            .long_waits
            .iter()
            .flat_map(|w| w.held_by.iter().map(|h| h.pid))
            .chain(
                a.outliers
                    .by_kind
                    .values()
                    .flatten()
                    .flat_map(|o| o.held_by.iter().map(|h| h.pid)),
            )
            .filter(|&p| p != 0)
            .collect();
        holders.sort_unstable();
        holders.dedup();
        Touched {
            devices: touched_devices(a),
            holders,
            memory_cgroups: {
                let mut v: Vec<String> = a
                    .snapshot
                    .iter()
                    .flat_map(|s| &s.workload.memory_limits)
                    .map(|l| l.cgroup.clone())
                    .collect();
                v.sort();
                v.dedup();
                v
            },
            workqueues: WORKQUEUE_FUNCTIONS
                .iter()
                .filter(|(f, _)| a.workqueue.functions.iter().any(|w| w.function == *f))
                .map(|(_, wq)| wq.to_string())
                .collect(),
        }
    }
}

/// The devices the workload did I/O to, as `MAJ:MIN`.
fn touched_devices(a: &crate::analyze::Analysis) -> Vec<String> {
    let mut v: Vec<String> = a
        .block
        .devices
        .iter()
        .map(|d| d.device.clone())
        .chain(a.light.iter().flat_map(|l| {
            l.devices
                .iter()
                .filter(|d| d.ops.iter().any(|o| o.ios > 0))
                .map(|d| d.device.clone())
        }))
        .map(|d| d.replace(',', ":"))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// The verdict over the rounds: judged by the user's figure, else the
/// finding's, else the workload's time.
fn judge(
    plan: Plan,
    rounds: Vec<Round>,
    metric: Option<&str>,
    higher_is_better: bool,
    stopped: Option<String>,
) -> Result<Trial> {
    let side = |s: Side| rounds.iter().filter(move |r| r.side == s);
    if side(Side::Candidate).next().is_none() {
        return Err(Error::bad_input(
            "no candidate round ran (--max-seconds too short?): nothing to judge",
        ));
    }
    let mut changes = Vec::new();
    let mut unknown = Vec::new();
    let secs = |s: Side| side(s).map(|r| Some(r.seconds)).collect::<Vec<_>>();
    if let Some(c) = verdict::compare(
        WORKLOAD_SECONDS,
        &secs(Side::Baseline),
        &secs(Side::Candidate),
        true,
    ) {
        changes.push(c);
    }
    let mut judged_by = WORKLOAD_SECONDS.to_string();
    for id in [plan.metric.as_deref(), metric].into_iter().flatten() {
        if changes.iter().any(|c| c.metric == id) {
            continue;
        }
        let values = |s: Side| {
            side(s)
                .map(|r| r.metrics.get(id).copied())
                .collect::<Vec<_>>()
        };
        let (b, c) = (values(Side::Baseline), values(Side::Candidate));
        let lower = if id.starts_with(STDOUT_METRIC) {
            !higher_is_better
        } else {
            crate::compare::metrics::kind_of(id).is_none_or(|k| k.higher_is_worse)
        };
        match verdict::compare(id, &b, &c, lower) {
            Some(ch) => {
                judged_by = id.to_string();
                changes.push(ch);
            }
            None => unknown.push(format!(
                "{id}: not in the rounds' captures ({} baseline and {} candidate rounds have it)",
                b.iter().flatten().count(),
                c.iter().flatten().count()
            )),
        }
    }
    let verdict = changes
        .iter()
        .find(|c| c.metric == judged_by)
        .map(|c| c.outcome)
        .unwrap_or(Outcome::Inconclusive);
    let finding = plan.finding.clone().map(|id| FindingRounds {
        baseline: side(Side::Baseline)
            .filter(|r| r.findings.contains(&id))
            .count(),
        candidate: side(Side::Candidate)
            .filter(|r| r.findings.contains(&id))
            .count(),
        rounds: side(Side::Candidate).count(),
        id,
    });
    Ok(Trial {
        plan,
        rounds,
        changes,
        finding,
        judged_by,
        verdict,
        stopped,
        unknown,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(side: Side, index: usize, seconds: f64, findings: &[&str]) -> Round {
        Round {
            side,
            index,
            seconds,
            findings: findings.iter().map(|s| s.to_string()).collect(),
            metrics: BTreeMap::new(),
            capture: PathBuf::new(),
            restored: Vec::new(),
        }
    }

    fn plan(finding: Option<&str>, metric: Option<&str>) -> Plan {
        Plan {
            from: "test".into(),
            finding: finding.map(String::from),
            metric: metric.map(String::from),
            changes: Vec::new(),
            by_workload: None,
        }
    }

    #[test]
    fn a_workqueues_mask_is_its_own_when_its_work_ran() {
        let knob = |file: &str| Planned {
            resolved: Knob {
                name: file.into(),
                file: file.into(),
                device_line: None,
                task: None,
                mount: None,
            },
            knob: file.into(),
            file: file.into(),
            thread: None,
            now: "3".into(),
            tried: "1".into(),
            restore: "3".into(),
        };
        let wb = "/sys/devices/virtual/workqueue/writeback/cpumask";
        let all = "/sys/devices/virtual/workqueue/cpumask";
        let mut p = plan(None, None);
        p.changes = vec![knob(wb), knob(all)];
        let touched = |wqs: &[&str]| Touched {
            devices: vec!["7:0".into()],
            holders: Vec::new(),
            memory_cgroups: Vec::new(),
            workqueues: wqs.iter().map(|w| w.to_string()).collect(),
        };
        // The mask of every unbound workqueue is never the workload's own.
        assert_eq!(p.outside(&touched(&["writeback"])), [all]);
        assert_eq!(p.outside(&touched(&["blkcg_punt_bio"])), [wb, all]);
        assert_eq!(workqueue_of(Path::new(wb)), Some("writeback"));
        assert_eq!(workqueue_of(Path::new(all)), None);
    }

    #[test]
    fn judged_by_the_workload_time_and_the_finding_counted_per_side() {
        let mut rounds = Vec::new();
        for i in 1..=5 {
            rounds.push(round(
                Side::Baseline,
                i,
                2.0 + i as f64 * 0.01,
                &["merges_disabled"],
            ));
            rounds.push(round(Side::Candidate, i, 0.5 + i as f64 * 0.01, &[]));
        }
        let t = judge(
            plan(Some("merges_disabled"), None),
            rounds,
            None,
            false,
            None,
        )
        .unwrap();
        assert_eq!(t.judged_by, WORKLOAD_SECONDS);
        assert_eq!(t.verdict, Outcome::Better);
        assert_eq!(t.exit_status(), ExitStatus::SUCCESS);
        let f = t.finding.unwrap();
        assert_eq!((f.baseline, f.candidate, f.rounds), (5, 0, 5));
    }

    #[test]
    fn a_figure_no_round_has_is_said_and_the_time_judges() {
        let rounds = vec![
            round(Side::Baseline, 1, 1.0, &[]),
            round(Side::Candidate, 1, 1.0, &[]),
        ];
        let t = judge(
            plan(None, Some("dev.7,0.requests")),
            rounds,
            None,
            false,
            None,
        )
        .unwrap();
        assert_eq!(t.judged_by, WORKLOAD_SECONDS);
        assert!(
            t.unknown[0].starts_with("dev.7,0.requests: not in the rounds' captures"),
            "{:?}",
            t.unknown
        );
    }

    #[test]
    fn a_figure_from_the_workloads_output_is_read_after_its_text() {
        let out = "latency average = 3.2 ms\ntps = 1234.5 (without initial connection time)\n";
        assert_eq!(number_after(out, "tps = "), Some(1234.5));
        assert_eq!(number_after(out, "latency average ="), Some(3.2));
        assert_eq!(number_after("a=1\na=2\n", "a="), Some(2.0), "the last one");
        assert_eq!(number_after(out, "nowhere"), None);
        assert_eq!(number_after("tps = nan", "tps = "), None);
    }

    #[test]
    fn a_throughput_from_the_output_is_better_higher() {
        let mut rounds = Vec::new();
        for i in 1..=5 {
            let mut b = round(Side::Baseline, i, 1.0, &[]);
            b.metrics.insert("stdout:tps = ".into(), 100.0 + i as f64);
            let mut c = round(Side::Candidate, i, 1.0, &[]);
            c.metrics.insert("stdout:tps = ".into(), 300.0 + i as f64);
            rounds.push(b);
            rounds.push(c);
        }
        let t = judge(plan(None, None), rounds, Some("stdout:tps = "), true, None).unwrap();
        assert_eq!(t.judged_by, "stdout:tps = ");
        assert_eq!(t.verdict, Outcome::Better);
    }

    #[test]
    fn no_candidate_round_is_no_verdict() {
        let e = judge(
            plan(None, None),
            vec![round(Side::Baseline, 1, 1.0, &[])],
            None,
            false,
            None,
        )
        .unwrap_err();
        assert_eq!(e.exit_code(), 2);
    }
}
