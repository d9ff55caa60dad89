//! A trigger acted on: the seconds it spans collected, then written as a
//! light capture (the maps' difference between two readings, the ring's
//! records, the snapshot taken when it fired) and diagnosed, with the full
//! record burst beside it when one ran.

use super::keep;
use super::trigger::Reason;
use super::{burst, Reading, WatchOptions, WAIT_MIN_NS};
use crate::capture::light::ring::RecordRing;
use crate::model::light::{
    cgroups_since, cpus_since, devices_since, uring_since, LightDoc, SlowPolicy, CGROUPS_KEPT,
};
use crate::report::prometheus::ActiveFinding;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// A trigger acted on, collecting its after-seconds.
pub(super) struct Pending {
    pub(super) reason: Reason,
    pub(super) fired_ns: u64,
    pub(super) fired_unix: i64,
    pub(super) from: Reading,
    pub(super) snapshot: serde_json::Value,
    /// The full recorder running beside it (`--burst`).
    pub(super) burst: Option<burst::Burst>,
}

/// What a background diagnosis sends back.
pub(super) struct Diagnosed {
    pub(super) dir: PathBuf,
    pub(super) reason: String,
    pub(super) findings: Vec<ActiveFinding>,
    pub(super) top: String,
    /// What became of the full record burst beside it, if one ran.
    pub(super) burst: Option<String>,
}

impl Diagnosed {
    /// `DIR (reason): top finding[; the full capture's]`.
    pub(super) fn line(&self) -> String {
        let mut l = format!("{} ({}): {}", self.dir.display(), self.reason, self.top);
        if let Some(b) = &self.burst {
            l.push_str("; ");
            l.push_str(b);
        }
        l
    }
}

/// A triggered capture, from the reading at its start to the latest:
/// written and diagnosed.
pub(super) fn finish(
    opts: &WatchOptions,
    missing: &[String],
    runqueue: bool,
    depth_sampled: u32,
    mut p: Pending,
    latest: &Reading,
    ring: &Mutex<RecordRing>,
) -> std::result::Result<Diagnosed, String> {
    let now = latest.at_ns;
    let doc = LightDoc {
        attach: "tp_btf".into(),
        started_ns: p.from.at_ns,
        stopped_ns: now,
        slow: SlowPolicy {
            fixed_ns: opts.slow_ns,
            initial_ns: opts
                .slow_ns
                .unwrap_or(crate::capture::light::INITIAL_SLOW_NS),
            cap_per_s: u64::from(opts.cap_per_s),
        },
        devices: devices_since(&latest.devices, &p.from.devices),
        programs: Vec::new(),
        cpus: cpus_since(&latest.cpus, &p.from.cpus),
        wait_min_ns: WAIT_MIN_NS,
        missing_events: missing.to_vec(),
        accounting: opts.accounting.name().into(),
        runqueue,
        irq: opts.irq,
        depth_sampled,
        cgroups: crate::capture::cgroups::table(
            cgroups_since(&latest.cgroups, &p.from.cgroups),
            CGROUPS_KEPT,
        ),
        throttle: !missing.iter().any(|m| m.starts_with("throttled bios")),
        io_uring: Some(uring_since(&latest.io_uring, &p.from.io_uring)),
    };
    let records: Vec<Vec<u8>> = ring
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .between(p.from.at_ns, now)
        .map(<[u8]>::to_vec)
        .collect();
    let root = opts.dir.as_deref().ok_or("captures only with --dir")?;
    let burst = p.burst.take();
    let mut d = keep_and_diagnose(root, &p, &doc, &records)?;
    d.burst = burst.map(|b| b.finish(&d.dir));
    Ok(d)
}

fn keep_and_diagnose(
    root: &Path,
    p: &Pending,
    doc: &LightDoc,
    records: &[Vec<u8>],
) -> std::result::Result<Diagnosed, String> {
    let subject = p.reason.subject();
    let dir = keep::write_capture(&keep::Keep {
        root,
        unix_s: p.fired_unix,
        subject: &subject,
        reason: &p.reason.describe(),
        doc,
        snapshot: &p.snapshot,
        records,
    })
    .map_err(|e| format!("cannot write the capture in {}: {e}", root.display()))?;
    let found = keep::diagnose(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let top = found.first().map_or_else(
        || "no finding".to_string(),
        |f| format!("{} {}: {}", f.severity.name().to_uppercase(), f.id, f.title),
    );
    let findings = found
        .iter()
        .map(|f| ActiveFinding {
            rule: f.id.to_string(),
            severity: f.severity.name().to_string(),
            device: f
                .evidence
                .get("device")
                .and_then(|d| d.as_str())
                .unwrap_or_default()
                .to_string(),
        })
        .collect();
    Ok(Diagnosed {
        dir,
        reason: p.reason.name().to_string(),
        findings,
        top,
        burst: None,
    })
}
