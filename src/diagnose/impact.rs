//! How much of the workload's time a finding explains, and what no finding
//! explains.
//!
//! The workload's time is the time of the operations the trace follows
//! from begin to end: the probe's marked operations when there are any,
//! else every syscall (`outliers.totals`), each split by the outlier
//! analysis into on CPU, runnable, at the device, queued, journal space,
//! journal commit and other waits. A cause acts on one or more of these
//! parts (an RT task makes threads runnable, a small journal makes them
//! wait for journal space, a cgroup limit holds bios before the device,
//! which the workload sees as waiting with nothing at the device); its
//! share is those parts' time over the workload's time. The breakdown
//! needs scheduler events: without them there is no share.

use super::{Finding, Severity};
use crate::analyze::outliers::{self, Breakdown};
use crate::analyze::Analysis;
use serde_json::json;

/// Parts of an operation's time, as the breakdown names them.
#[derive(Clone, Copy)]
enum Part {
    Device,
    Queued,
    JournalSpace,
    Journal,
    Runnable,
    OtherWait,
}

impl Part {
    /// As the breakdown names it (`Breakdown::parts`).
    fn name(self) -> &'static str {
        match self {
            Part::Device => "device",
            Part::Queued => "queued",
            Part::JournalSpace => "journal_space",
            Part::Journal => "journal",
            Part::Runnable => "runnable",
            Part::OtherWait => "other_wait",
        }
    }

    fn ns(self, b: &Breakdown) -> u64 {
        match self {
            Part::Device => b.device_only_ns,
            Part::Queued => b.queued_ns,
            Part::JournalSpace => b.journal_space_ns,
            Part::Journal => b.journal_ns,
            Part::Runnable => b.runnable_ns,
            Part::OtherWait => b.other_wait_ns,
        }
    }
}

/// The parts of the workload's time each rule's cause produces, and
/// whether their time measures the cause (only it puts time there, in the
/// run where it fired) or only bounds it (the device's and the queue's
/// time: the work is needed anyway; the cause makes it larger).
fn parts_of(id: &str) -> (&'static [Part], Measure) {
    match id {
        "journal_space_stall" => (&[Part::JournalSpace], Measure::Measured),
        // A thread can wait runnable outside any operation the trace
        // follows (before its first syscall, in user code): the share
        // counts only what happened inside them.
        "rt_starvation" => (&[Part::Runnable], Measure::AtLeast),
        "cpu_contention" => (&[Part::Runnable], Measure::Measured),
        // Held before the device: waiting with no request there.
        "cgroup_io_throttle" | "dirty_throttling" => (&[Part::OtherWait], Measure::Measured),
        // io-wq's wait is the io_uring requests' other_wait, and only theirs.
        "io_uring_punted" => (&[Part::OtherWait], Measure::Bound),
        "device_latency_spike" => (&[Part::Device], Measure::Bound),
        "wbt_throttling" => (&[Part::OtherWait, Part::Queued], Measure::Bound),
        "queue_saturation" | "scheduler_overhead" => (&[Part::Queued], Measure::Bound),
        // Journal writes and flushes per sync: commits and the device.
        "sync_write_amplification" => {
            (&[Part::Device, Part::Queued, Part::Journal], Measure::Bound)
        }
        // Causes that make the device do more or smaller work: the time at
        // the device and queued for it (an upper bound of what they cost).
        _ => (&[Part::Device, Part::Queued], Measure::Bound),
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Measure {
    /// Only this cause puts time in these parts.
    Measured,
    /// The parts hold the cause's time and other time: at most this much.
    Bound,
    /// The cause also costs time the parts do not see: at least this much.
    AtLeast,
}

/// A cause that explains less than this share of the workload's time is
/// not critical, whatever its own numbers say: even the upper bound of
/// what it cost is small (DESIGN.md, Diagnose: severity follows the lost time).
const CRITICAL_MIN_SHARE_PERCENT: f64 = 5.0;
/// Below this share a finding is context, not a problem to fix: `info`.
const WARNING_MIN_SHARE_PERCENT: f64 = 1.0;
/// A measured share this large is critical: a fifth of the workload's
/// time spent waiting on one cause (the lab's journal and RT runs show
/// 11–31 %, a 70x cgroup limit 99 %).
const CRITICAL_MEASURED_SHARE_PERCENT: f64 = 20.0;

/// Severity follows the share of the workload's time the cause explains,
/// when the capture can tell it: a critical explaining little becomes a
/// warning, a warning explaining almost nothing an info; a measured share
/// of a fifth or more makes a warning critical. A share that only counts
/// part of what the cause cost (`AtLeast`) never lowers a severity. The
/// evidence says why the severity moved. Findings marked as another's
/// consequence stay.
/// Evidence key of a finding whose share, however large, is the
/// workload's own shape rather than a cause to fix: its reason. A share
/// never makes such a finding critical.
pub(in crate::diagnose) const AT_MOST_WARNING: &str = "at_most_warning_because";

pub fn calibrate_severity(findings: &mut [Finding], shares: &[Option<f64>]) {
    for (f, share) in findings.iter_mut().zip(shares) {
        let Some(share) = *share else { continue };
        let (_, measure) = parts_of(f.id);
        let to = match f.severity {
            Severity::Critical
                if measure != Measure::AtLeast && share < CRITICAL_MIN_SHARE_PERCENT =>
            {
                Severity::Warning
            }
            Severity::Warning
                if measure != Measure::AtLeast && share < WARNING_MIN_SHARE_PERCENT =>
            {
                Severity::Info
            }
            Severity::Warning
                if measure != Measure::Bound
                    && share >= CRITICAL_MEASURED_SHARE_PERCENT
                    && f.evidence.get(AT_MOST_WARNING).is_none() =>
            {
                Severity::Critical
            }
            _ => continue,
        };
        if let Some(e) = f.evidence.as_object_mut() {
            e.insert(
                "severity_from_share".into(),
                json!(format!(
                    "{} by the rule's own numbers, {} because it explains {share}% of the workload's time",
                    f.severity.name(),
                    to.name()
                )),
            );
        }
        f.severity = to;
    }
}

/// The workload's time and its breakdown, when the capture can tell.
pub(in crate::diagnose) fn workload_time(a: &Analysis) -> Option<(u64, Breakdown)> {
    if a.sched.switches == 0 {
        return None;
    }
    let w = outliers::workload_time(&a.outliers, None);
    (w.latency_ns > 0).then_some((w.latency_ns, w.breakdown))
}

/// The parts of the workload's time the findings' causes account for
/// (`Breakdown::parts` names).
pub(super) fn claimed(findings: &[Finding]) -> Vec<&'static str> {
    let mut parts: Vec<&'static str> = Vec::new();
    for f in findings {
        for p in parts_of(f.id).0 {
            if !parts.contains(&p.name()) {
                parts.push(p.name());
            }
        }
    }
    parts
}

/// The share of the workload's time, in percent, that the finding's
/// cause explains; also written into its evidence.
pub fn attach_shares(a: &Analysis, findings: &mut [Finding]) -> Vec<Option<f64>> {
    let Some((total, b)) = workload_time(a) else {
        return vec![None; findings.len()];
    };
    findings
        .iter_mut()
        .map(|f| {
            let ns: u64 = parts_of(f.id).0.iter().map(|p| p.ns(&b)).sum();
            let share = crate::model::units::percent_1dp(ns, total);
            if let Some(e) = f.evidence.as_object_mut() {
                e.insert("share_of_workload_time_percent".into(), json!(share));
            }
            Some(share)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(id: &'static str, severity: Severity) -> Finding {
        Finding {
            remedy: None,
            id,
            severity,
            title: String::new(),
            evidence: json!({}),
            explanation: String::new(),
            workaround: String::new(),
        }
    }

    fn calibrated(id: &'static str, severity: Severity, share: Option<f64>) -> Finding {
        let mut v = vec![finding(id, severity)];
        calibrate_severity(&mut v, &[share]);
        v.pop().unwrap()
    }

    #[test]
    fn a_critical_that_explains_little_is_a_warning() {
        let f = calibrated("merges_disabled", Severity::Critical, Some(3.2));
        assert_eq!(f.severity, Severity::Warning);
        assert_eq!(
            f.evidence["severity_from_share"],
            "critical by the rule's own numbers, warning because it explains 3.2% of the workload's time"
        );
        assert_eq!(
            calibrated("journal_space_stall", Severity::Critical, Some(5.0)).severity,
            Severity::Critical
        );
    }

    #[test]
    fn a_share_that_misses_part_of_the_cost_never_lowers_severity() {
        // The lab's victim waited 85 ms before its first syscall: 0.5 %
        // of its syscalls' time, yet most of its run.
        assert_eq!(
            calibrated("rt_starvation", Severity::Critical, Some(0.5)).severity,
            Severity::Critical
        );
    }

    #[test]
    fn a_warning_that_explains_almost_nothing_is_info() {
        let f = calibrated("queue_saturation", Severity::Warning, Some(0.4));
        assert_eq!(f.severity, Severity::Info);
        assert_eq!(
            calibrated("queue_saturation", Severity::Warning, Some(1.0)).severity,
            Severity::Warning
        );
    }

    #[test]
    fn only_a_measured_share_makes_a_warning_critical() {
        // Time at the device bounds what smaller requests cost; a pause
        // for dirty pages is the cause's own time.
        assert_eq!(
            calibrated("request_splitting", Severity::Warning, Some(90.0)).severity,
            Severity::Warning
        );
        assert_eq!(
            calibrated("dirty_throttling", Severity::Warning, Some(20.0)).severity,
            Severity::Critical
        );
        assert_eq!(
            calibrated("dirty_throttling", Severity::Warning, Some(19.9)).severity,
            Severity::Warning
        );
    }

    #[test]
    fn a_finding_about_the_workloads_shape_stays_a_warning() {
        let mut f = finding("cpu_contention", Severity::Warning);
        f.evidence[AT_MOST_WARNING] = json!("its own threads");
        let mut fs = [f];
        calibrate_severity(&mut fs, &[Some(51.0)]);
        assert_eq!(fs[0].severity, Severity::Warning);
        assert!(fs[0].evidence.get("severity_from_share").is_none());
        let mut fs = [finding("cpu_contention", Severity::Warning)];
        calibrate_severity(&mut fs, &[Some(51.0)]);
        assert_eq!(fs[0].severity, Severity::Critical);
    }

    #[test]
    fn no_share_no_change_and_consequences_stay_info() {
        let f = calibrated("merges_disabled", Severity::Critical, None);
        assert_eq!(f.severity, Severity::Critical);
        assert!(f.evidence.get("severity_from_share").is_none());
        assert_eq!(
            calibrated("cgroup_io_throttle", Severity::Info, Some(99.0)).severity,
            Severity::Info
        );
    }
}
