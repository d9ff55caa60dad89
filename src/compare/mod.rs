//! Comparing a good run with a bad one: the headline figures side by side
//! with their change, the settings that differ between the two snapshots,
//! and the findings present in one and not the other.

mod functions;
pub mod metrics;
mod time_shift;

pub use functions::FunctionShift;
pub use time_shift::TimeShift;

use crate::analyze::Analysis;
use crate::diagnose::Finding;
use crate::model::snapshot::Snapshot;
use metrics::{Metric, Unit};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Serialize, Clone)]
pub struct Figure {
    /// The metric's id (`probe.fsync.p99_ms`, compare::metrics), what
    /// `check --metric` takes.
    pub id: String,
    /// Its label with spaces, as `diff` named it before ids: `probe fsync
    /// p99 ms` (`check --metric` still takes it).
    pub name: String,
    /// For people, beside the id in the text table: `fsync p99 (ms)`,
    /// `loop0 D2C p99 (ms)` (not in the JSON, which has `name` and `unit`).
    #[serde(skip)]
    pub title: String,
    pub unit: Unit,
    /// Means over each side's runs.
    pub baseline: f64,
    pub candidate: f64,
    /// (candidate - baseline) / baseline, percent; None when baseline is 0.
    pub change_pct: Option<f64>,
    /// Each side's range over its runs (equal to the mean with one run).
    pub baseline_range: (f64, f64),
    pub candidate_range: (f64, f64),
    /// With several runs a side: the two ranges do not overlap (the
    /// kernel test robot's rule); with one, the change is at least 10 %
    /// and 1 ms (or 10 counts).
    pub significant: bool,
}

#[derive(Debug, Serialize, Clone)]
pub struct Setting {
    pub name: String,
    pub baseline: String,
    pub candidate: String,
}

/// A finding the other side could not judge, and what it lacked.
#[derive(Debug, Serialize, Clone)]
pub struct NotJudgedThere {
    pub id: String,
    pub lacks: String,
}

#[derive(Debug, Serialize)]
pub struct Diff {
    pub figures: Vec<Figure>,
    pub settings: Vec<Setting>,
    pub only_in_baseline: Vec<String>,
    pub only_in_candidate: Vec<String>,
    /// Findings of one side that the other side's inputs could not judge
    /// (they lacked the rule's events): unknown there, not absent.
    pub not_judged_in_baseline: Vec<NotJudgedThere>,
    pub not_judged_in_candidate: Vec<NotJudgedThere>,
    /// The workload's time per operation on each side and where it grew.
    pub time_shift: Option<TimeShift>,
    /// Kernel functions whose share of the blocked time, and of the on-CPU
    /// samples, changed most (captures recorded with --stacks).
    pub off_cpu_functions: Option<Vec<FunctionShift>>,
    pub on_cpu_functions: Option<Vec<FunctionShift>>,
    /// The difference that explains the change, in one line.
    pub verdict: String,
    /// What `check` concludes of these sides at its defaults (the same
    /// rule, [`judge`]): `regressed`, `good` or `cannot_tell`, and why.
    pub check: CheckVerdict,
    /// Each run's headline figures, and the candidate's critical finding
    /// the baseline has not: what [`judge`] reads.
    #[serde(skip)]
    headlines: (Vec<Vec<Metric>>, Vec<Vec<Metric>>),
    #[serde(skip)]
    new_critical: Option<Finding>,
}

/// `check`'s threshold unless told: how much worse, in percent, is a
/// regression.
pub const DEFAULT_THRESHOLD_PCT: f64 = 10.0;

#[derive(Debug, Serialize, Clone, PartialEq)]
pub struct CheckVerdict {
    pub verdict: &'static str,
    pub why: String,
}

impl From<&Check> for CheckVerdict {
    fn from(c: &Check) -> CheckVerdict {
        let (verdict, why) = match c {
            Check::Good(l) => ("good", l),
            Check::Regressed(l) => ("regressed", l),
            Check::CannotTell(l) => ("cannot_tell", l),
        };
        CheckVerdict {
            verdict,
            why: why.clone(),
        }
    }
}

impl Diff {
    /// What `check --metric M --threshold T` concludes of these sides.
    pub fn judged(&self, metric: Option<&str>, threshold_pct: f64) -> Check {
        let (ha, hb) = &self.headlines;
        judge(ha, hb, self.new_critical.as_ref(), metric, threshold_pct)
    }
}

/// The figures worth comparing (ids and kinds: compare::metrics).
pub fn headline(a: &Analysis) -> Vec<Metric> {
    use metrics::*;
    let ms = |ns: u64| ns as f64 / 1e6;
    let mut v = Vec::new();
    for (op, s) in &a.syscalls.operations {
        if let Some(l) = &s.latency {
            v.push(PROBE_P50.metric(op, ms(l.p50)));
            v.push(PROBE_P99.metric(op, ms(l.p99)));
            v.push(PROBE_MAX.metric(op, ms(l.max)));
        }
        v.push(PROBE_COUNT.metric(op, s.count as f64));
    }
    // A device's figures are titled by its name where the snapshot has it.
    let named = |m: Metric, dev: &str| match device_name(a, dev) {
        Some(name) => m.of_device_named(name),
        None => m,
    };
    for d in &a.block.devices {
        let c = &d.completed;
        let dev = d.device.to_string();
        let requests = (c.read + c.write + c.discard + c.flush) as f64;
        v.push(named(DEV_REQUESTS.metric(&dev, requests), &dev));
        if let Some(m) = &d.btt_merge {
            v.push(named(
                DEV_AVG_KIB.metric(&dev, m.blk_avg as f64 / 2.0),
                &dev,
            ));
            v.push(named(DEV_BIOS_PER_REQUEST.metric(&dev, m.ratio), &dev));
        }
        v.push(named(DEV_D2C_P99.metric(&dev, ms(d.d2c.p99)), &dev));
        if d.q2c.count > 0 {
            v.push(named(DEV_Q2C_P99.metric(&dev, ms(d.q2c.p99)), &dev));
            v.push(named(DEV_Q2C_AVG.metric(&dev, d.q2c.avg / 1e6), &dev));
        }
    }
    for (dev, j) in &a.fs.journals {
        v.push(named(JOURNAL_COMMITS.metric(dev, j.commits as f64), dev));
        v.push(named(
            JOURNAL_CHECKPOINTS.metric(dev, j.checkpoints.passes as f64),
            dev,
        ));
    }
    if let Some(w) = a.sched.long_waits.first() {
        v.push(LONGEST_RUNQUEUE_WAIT.metric("", ms(w.wait_ns)));
    }
    for f in &a.functions {
        let t = &f.all;
        let name = &f.name;
        let [count, per, last] = match f.method {
            "calls" => [FUNCTION_CALLS, FUNCTION_AVG, FUNCTION_MAX],
            _ => [
                FUNCTION_BLOCKS,
                FUNCTION_BLOCKED_AVG,
                FUNCTION_BLOCKED_TOTAL,
            ],
        };
        let last_value = match f.method {
            "calls" => ms(t.max_ns),
            _ => ms(t.total_ns),
        };
        v.push(count.metric(name, t.count as f64));
        v.push(per.metric(name, ms(t.avg_ns())));
        v.push(last.metric(name, last_value));
    }
    v
}

/// The name the snapshot gives device `dev` (`MAJ,MIN`; older snapshots
/// write `MAJ:MIN`).
fn device_name<'a>(a: &'a Analysis, dev: &str) -> Option<&'a str> {
    let s = a.snapshot.as_ref()?;
    s.name_of(dev).or_else(|| s.name_of(&dev.replace(',', ":")))
}

/// Settings of the snapshots' `before` that differ: block device queues
/// and ext4 journals present in both, scheduler and vm settings.
/// The settings that differ, of the devices the traces involve
/// (`involved`: `MAJ,MIN` of a device either side saw requests on, or a
/// journal of): another disk's knobs explain nothing here.
pub fn settings(
    a: Option<&Snapshot>,
    b: Option<&Snapshot>,
    involved: &std::collections::BTreeSet<String>,
) -> Vec<Setting> {
    let (Some(a), Some(b)) = (a, b) else {
        return Vec::new();
    };
    let (ba, bb) = (&a.before, &b.before);
    let mut out = Vec::new();
    for (name, da) in &ba.block_devices {
        if !da.dev.as_ref().is_some_and(|d| involved.contains(d)) {
            continue;
        }
        if let Some(db) = bb.block_devices.get(name) {
            differing(
                &mut out,
                &format!("/sys/block/{name}/queue/"),
                &da.queue,
                &db.queue,
            );
        }
    }
    for (name, ja) in &ba.ext4_journals {
        if let Some(jb) = bb.ext4_journals.get(name) {
            differing(&mut out, &format!("ext4 {name} "), ja, jb);
        }
    }
    differing(&mut out, "kernel.", &ba.sched, &bb.sched);
    differing(&mut out, "vm.", &ba.vm, &bb.vm);
    out
}

/// The plain values of `x` that `y` has too, with another value.
fn differing<V: Serialize + PartialEq>(
    out: &mut Vec<Setting>,
    prefix: &str,
    x: &BTreeMap<String, V>,
    y: &BTreeMap<String, V>,
) {
    // As JSON shows them, quotes aside (a missing value is `null`).
    let shown = |v: &V| {
        let v = serde_json::to_value(v).unwrap_or_default();
        (!v.is_object() && !v.is_array()).then(|| v.to_string().trim_matches('"').to_string())
    };
    for (k, xv) in x {
        let Some(yv) = y.get(k) else { continue };
        if xv == yv {
            continue;
        }
        if let (Some(baseline), Some(candidate)) = (shown(xv), shown(yv)) {
            out.push(Setting {
                name: format!("{prefix}{k}"),
                baseline,
                candidate,
            });
        }
    }
}

/// A change worth naming with one run a side: at least 10 %, and at least
/// 1 ms for times or 10 for counts (single runs on a shared machine move by
/// less). A maximum (`….max_ms`, `sched.longest_…`) is one event: two
/// identical runs' maxima differ by a few ms whenever the machine was busy
/// for a moment, so it needs 10 ms.
fn matters(kind: metrics::Kind, x: f64, y: f64) -> bool {
    let floor = if kind.maximum {
        10.0
    } else if kind.unit == Unit::Ms {
        1.0
    } else {
        10.0
    };
    x != 0.0 && ((y - x) / x).abs() >= 0.1 && (y - x).abs() >= floor
}

/// Mean and range of a figure over runs that all have it.
fn stats(runs: &[Vec<Metric>], id: &str) -> Option<(f64, f64, f64)> {
    let v: Vec<f64> = runs
        .iter()
        .map(|h| h.iter().find(|m| m.id == id).map(|m| m.value))
        .collect::<Option<Vec<f64>>>()?;
    Some(mean_and_range(&v))
}

/// Mean, lowest and highest of values over runs (at least one).
pub(super) fn mean_and_range(v: &[f64]) -> (f64, f64, f64) {
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (mean, lo, hi)
}

/// The kernel test robot's rule for several runs a side: a change counts
/// only when the two sides' ranges do not overlap.
pub(super) fn ranges_apart((xl, xh): (f64, f64), (yl, yh): (f64, f64)) -> bool {
    xh < yl || yh < xl
}

/// The kinds of operations that make up a run's workload.
pub fn workload_kinds(a: &Analysis) -> Vec<String> {
    time_shift::common_kinds(&[a], &[a])
}

/// `workload.ms_per_op` of one run over `kinds` (those of a reference
/// run: each round of `try` is judged on its first baseline round's).
/// `None` without scheduler events or such operations.
pub fn ms_per_op(a: &Analysis, kinds: &[String]) -> Option<Metric> {
    let kinds: Vec<&str> = kinds.iter().map(String::as_str).collect();
    if a.sched.switches == 0 || kinds.is_empty() {
        return None;
    }
    time_shift::ms_per_op(a, &kinds).map(|ms| metrics::WORKLOAD_MS_PER_OP.metric("", ms))
}

/// One run a side.
pub fn diff(a: &Analysis, fa: &[Finding], b: &Analysis, fb: &[Finding]) -> Diff {
    diff_runs(&[(a, fa)], &[(b, fb)])
}

/// Several runs a side: figures by mean and range, settings of each side's
/// first run, findings of any run.
pub fn diff_runs(base: &[(&Analysis, &[Finding])], cand: &[(&Analysis, &[Finding])]) -> Diff {
    let mut ha: Vec<_> = base.iter().map(|(a, _)| headline(a)).collect();
    let mut hb: Vec<_> = cand.iter().map(|(a, _)| headline(a)).collect();
    // The workload's time per operation, over the kinds both sides have.
    {
        let rb: Vec<&Analysis> = base.iter().map(|(a, _)| *a).collect();
        let rc: Vec<&Analysis> = cand.iter().map(|(a, _)| *a).collect();
        let common = time_shift::common_kinds(&rb, &rc);
        let kinds: Vec<&str> = common.iter().map(String::as_str).collect();
        if !kinds.is_empty() {
            for (h, a) in ha.iter_mut().zip(&rb).chain(hb.iter_mut().zip(&rc)) {
                if let Some(ms) = time_shift::ms_per_op(a, &kinds) {
                    h.insert(0, metrics::WORKLOAD_MS_PER_OP.metric("", ms));
                }
            }
        }
    }
    let several = base.len() > 1 && cand.len() > 1;
    let mut figures = Vec::new();
    for m in ha.first().into_iter().flatten() {
        let (Some((x, xl, xh)), Some((y, yl, yh))) = (stats(&ha, &m.id), stats(&hb, &m.id)) else {
            continue;
        };
        let significant = if several {
            ranges_apart((xl, xh), (yl, yh))
        } else {
            matters(m.kind, x, y)
        };
        figures.push(Figure {
            id: m.id.clone(),
            name: m.label.clone(),
            title: m.title.clone(),
            unit: m.kind.unit,
            baseline: x,
            candidate: y,
            change_pct: (x != 0.0).then(|| (y - x) * 100.0 / x),
            baseline_range: (xl, xh),
            candidate_range: (yl, yh),
            significant,
        });
    }
    let (a, b) = (base[0].0, cand[0].0);
    let all = |side: &[(&Analysis, &[Finding])]| -> Vec<Finding> {
        let mut v: Vec<Finding> = Vec::new();
        for (_, f) in side {
            for x in f.iter() {
                if !v.iter().any(|y| y.id == x.id) {
                    v.push(x.clone());
                }
            }
        }
        v
    };
    let (fa, fb) = (all(base), all(cand));
    let (fa, fb) = (fa.as_slice(), fb.as_slice());
    let involved: std::collections::BTreeSet<String> = base
        .iter()
        .chain(cand)
        .flat_map(|(r, _)| {
            r.block
                .devices
                .iter()
                .map(|d| d.device.clone())
                .chain(r.fs.journals.keys().map(|j| j.to_string()))
        })
        .collect();
    let settings = settings(a.snapshot.as_ref(), b.snapshot.as_ref(), &involved);
    let ids = |f: &[Finding]| -> Vec<String> { f.iter().map(|x| x.id.to_string()).collect() };
    let (ia, ib) = (ids(fa), ids(fb));
    // A rule no run of a side could judge is unknown there: a finding of
    // the other side is then not "only" on that side.
    let unjudged = |side: &[(&Analysis, &[Finding])]| -> Vec<NotJudgedThere> {
        let per_run: Vec<_> = side
            .iter()
            .map(|(a, f)| crate::diagnose::coverage(a, f).not_judged)
            .collect();
        let mut out: Vec<NotJudgedThere> = Vec::new();
        for n in per_run.first().into_iter().flatten() {
            if per_run.iter().all(|r| r.iter().any(|x| x.id == n.id)) {
                out.push(NotJudgedThere {
                    id: n.id.to_string(),
                    lacks: n.lacks.clone(),
                });
            }
        }
        out
    };
    let (ua, ub) = (unjudged(base), unjudged(cand));
    let unknown = |u: &[NotJudgedThere], id: &str| u.iter().any(|n| n.id == id);
    let only_in_baseline: Vec<String> = ia
        .iter()
        .filter(|i| !ib.contains(i) && !unknown(&ub, i))
        .cloned()
        .collect();
    let only_in_candidate: Vec<String> = ib
        .iter()
        .filter(|i| !ia.contains(i) && !unknown(&ua, i))
        .cloned()
        .collect();
    let not_judged_in_baseline: Vec<NotJudgedThere> =
        ua.into_iter().filter(|n| ib.contains(&n.id)).collect();
    let not_judged_in_candidate: Vec<NotJudgedThere> =
        ub.into_iter().filter(|n| ia.contains(&n.id)).collect();
    let base_runs: Vec<&Analysis> = base.iter().map(|(a, _)| *a).collect();
    let cand_runs: Vec<&Analysis> = cand.iter().map(|(a, _)| *a).collect();
    let time_shift = time_shift::time_shift(&base_runs, &cand_runs);
    let off_cpu_functions = functions::off_cpu_functions(&base_runs, &cand_runs);
    let on_cpu_functions = functions::on_cpu_functions(&base_runs, &cand_runs);
    // `unexplained` names no cause: it does not explain a change.
    let new_finding = fb
        .iter()
        .filter(|f| f.id != crate::diagnose::UNEXPLAINED)
        .find(|f| only_in_candidate.contains(&f.id.to_string()));
    let verdict = verdict(
        &figures,
        new_finding,
        settings.first(),
        time_shift.as_ref(),
        several,
    );
    let new_critical = fb
        .iter()
        .find(|f| {
            f.severity == crate::diagnose::Severity::Critical
                && only_in_candidate.contains(&f.id.to_string())
        })
        .cloned();
    let check = CheckVerdict::from(&judge(
        &ha,
        &hb,
        new_critical.as_ref(),
        None,
        DEFAULT_THRESHOLD_PCT,
    ));
    Diff {
        figures,
        settings,
        only_in_baseline,
        only_in_candidate,
        not_judged_in_baseline,
        not_judged_in_candidate,
        time_shift,
        off_cpu_functions,
        on_cpu_functions,
        verdict,
        check,
        headlines: (ha, hb),
        new_critical,
    }
}

/// The difference that explains the change, in one line: a finding the
/// candidate has, a setting that changed, the biggest significant change;
/// when nothing explains it, where the added time went.
fn verdict(
    figures: &[Figure],
    new_finding: Option<&Finding>,
    setting: Option<&Setting>,
    shift: Option<&TimeShift>,
    several: bool,
) -> String {
    // Function latencies (`--func`) are evidence of where, not the
    // workload's change: the verdict names the latter.
    let biggest = figures
        .iter()
        .filter(|f| f.significant && !f.id.starts_with("function."))
        .filter_map(|f| f.change_pct.map(|c| (c, f)))
        .max_by(|x, y| x.0.abs().total_cmp(&y.0.abs()));
    let mut verdict = String::new();
    if let Some(f) = new_finding {
        verdict.push_str(&format!("the candidate has {}: {}", f.id, f.title));
    }
    if let Some(s) = setting {
        if !verdict.is_empty() {
            verdict.push_str("; ");
        }
        verdict.push_str(&format!(
            "{} is {} against {}",
            s.name, s.candidate, s.baseline
        ));
    }
    if let Some((c, f)) = biggest {
        let unexplained = verdict.is_empty();
        if !verdict.is_empty() {
            verdict.push_str("; ");
        }
        verdict.push_str(&format!(
            "biggest change: {} {} -> {} ({})",
            f.name,
            metrics::shown(f.unit, f.baseline),
            metrics::shown(f.unit, f.candidate),
            crate::model::units::change(c)
        ));
        if unexplained {
            verdict.push_str(", which no finding or setting explains");
            // A time of one run a side may be noise: say so.
            if !several && f.unit == Unit::Ms {
                verdict.push_str(
                    ": with one run a side a time may move by run-to-run noise alone (compare three or more runs a side: BASELINE... -- CANDIDATE...)",
                );
            }
            if let Some(where_) = shift.and_then(TimeShift::sentence) {
                verdict.push_str(&format!("; {where_}"));
            }
        }
    }
    if verdict.is_empty() && figures.is_empty() {
        verdict =
            "nothing to compare: the two sides have no figure in common (no device, probe operation or journal in both)"
                .into();
    } else if verdict.is_empty() {
        verdict =
            "no difference that matters: no new finding, no setting changed, no figure changed significantly"
                .into();
    }
    verdict
}

/// What `check` concludes.
#[derive(Debug, PartialEq)]
pub enum Check {
    Good(String),
    Regressed(String),
    CannotTell(String),
}

/// What `check` concludes, and `diff` says beside its verdict: one rule
/// for both. With `metric`, that figure alone. Without it, what a bisect
/// needs: a critical finding the candidate has and the baseline has not
/// is a regression; else the workload's own figures, its time per
/// operation and its first probe operation's p99, each regressed when its
/// mean got worse by more than `threshold_pct` and, with two or more runs
/// on both sides, the two ranges do not overlap (the kernel test robot's
/// rule); a capture without operations on both sides falls back to its
/// first device's Q2C p99, and says so.
pub fn judge(
    ha: &[Vec<Metric>],
    hb: &[Vec<Metric>],
    new_critical: Option<&Finding>,
    metric: Option<&str>,
    threshold_pct: f64,
) -> Check {
    if ha.is_empty() || hb.is_empty() {
        return Check::CannotTell("no runs to compare".into());
    };
    // NaN compares false with every change: it would call anything good.
    if !threshold_pct.is_finite() || threshold_pct < 0.0 {
        return Check::CannotTell(format!(
            "the threshold must be a percentage of 0 or more, not {threshold_pct}"
        ));
    }
    if let Some(m) = metric {
        return check_metric(ha, hb, m, threshold_pct);
    }
    if let Some(f) = new_critical {
        return Check::Regressed(format!(
            "the candidate has {} (critical), the baseline has not: {}",
            f.id, f.title
        ));
    }
    let in_both = |id: &String| {
        hb.iter().all(|h| h.iter().any(|m| &m.id == id))
            && ha.iter().all(|h| h.iter().any(|m| &m.id == id))
    };
    let first_of = |k: metrics::Kind| {
        ha[0]
            .iter()
            .find(|m| metrics::kind_of(&m.id) == Some(k))
            .map(|m| m.id.clone())
            .filter(in_both)
    };
    let workload: Vec<String> = [
        first_of(metrics::WORKLOAD_MS_PER_OP),
        first_of(metrics::PROBE_P99),
    ]
    .into_iter()
    .flatten()
    .collect();
    if workload.is_empty() {
        // The device's queue-to-completion time is what the workload
        // waited for there (D2C leaves out the time queued: a scheduler
        // that queues longer sends fewer requests at once, each faster).
        return match first_of(metrics::DEV_Q2C_P99) {
            Some(id) => match check_metric(ha, hb, &id, threshold_pct) {
                Check::Good(l) => Check::Good(format!(
                    "no new critical finding; no operations timed on both sides, so the device: {l}"
                )),
                Check::Regressed(l) => Check::Regressed(format!(
                    "no operations timed on both sides, so the device: {l}"
                )),
                c => c,
            },
            None => Check::CannotTell(
                "no new critical finding, and no operations, probe marks or block requests on both sides to compare".into(),
            ),
        };
    }
    let mut good = Vec::new();
    for id in &workload {
        match check_metric(ha, hb, id, threshold_pct) {
            Check::Regressed(l) => return Check::Regressed(l),
            Check::Good(l) => good.push(l),
            Check::CannotTell(_) => {}
        }
    }
    if good.is_empty() {
        return Check::CannotTell(format!(
            "no new critical finding, and {} cannot be compared (0 in the baseline)",
            workload.join(", ")
        ));
    }
    Check::Good(format!("no new critical finding; {}", good.join("; ")))
}

/// One headline figure of the two sides' runs, judged.
fn check_metric(ha: &[Vec<Metric>], hb: &[Vec<Metric>], name: &str, threshold_pct: f64) -> Check {
    let name = name.to_string();
    let (Some((x, xl, xh)), Some((y, yl, yh))) = (stats(ha, &name), stats(hb, &name)) else {
        let names: Vec<String> = ha[0].iter().map(|m| m.id.clone()).collect();
        return Check::CannotTell(if names.is_empty() {
            format!("{name} is not in every run; the first baseline has no figure at all")
        } else {
            format!(
                "{name} is not in every run; the first baseline has: {}",
                names.join(", ")
            )
        });
    };
    let Some(kind) = metrics::kind_of(&name) else {
        return Check::CannotTell(format!("no metric {name:?}"));
    };
    if x == 0.0 {
        return Check::CannotTell(format!("{name} is 0 in the baseline"));
    }
    let change = (y - x) * 100.0 / x;
    let worse = if kind.higher_is_worse {
        change
    } else {
        -change
    };
    let several = ha.len() > 1 && hb.len() > 1;
    let overlap = several && !ranges_apart((xl, xh), (yl, yh));
    let v = |x: f64| metrics::shown(kind.unit, x);
    let mut line = format!(
        "{name}: {} -> {} ({change:+.1}%, threshold {threshold_pct}%)",
        v(x),
        v(y)
    );
    if several {
        line.push_str(&format!(
            "; baseline {}..{} over {} runs, candidate {}..{} over {}",
            v(xl),
            v(xh),
            ha.len(),
            v(yl),
            v(yh),
            hb.len()
        ));
        if overlap && worse > threshold_pct {
            line.push_str(": the ranges overlap, not a significant change");
        }
    }
    if worse > threshold_pct && !overlap {
        Check::Regressed(line)
    } else {
        Check::Good(line)
    }
}
