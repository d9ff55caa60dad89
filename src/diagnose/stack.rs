//! Stacked devices: a finding on a device under another device that has a
//! finding of its own is that finding's consequence, not a rival cause. A
//! loop device whose max_sectors_kb is 4 sends its file's file system 4 KiB
//! writes; the disk under that file system then shows unmerged small
//! requests and a long queue, but the cause is where the I/O starts. The
//! stack comes from the snapshot (device-mapper/md members, the device
//! holding a loop device's backing file).

use super::{Finding, Severity};
use crate::analyze::Analysis;
use serde_json::json;

/// How deep a stack is followed (dm over md over loop over a disk is 4).
const MAX_DEPTH: usize = 8;

/// Every device under `dev`, with the chain that leads there.
fn below(a: &Analysis, dev: &str) -> Vec<(String, String)> {
    let Some(s) = &a.snapshot else {
        return Vec::new();
    };
    let mut out: Vec<(String, String)> = Vec::new();
    let mut frontier = vec![(dev.to_string(), String::new())];
    for _ in 0..MAX_DEPTH {
        let mut next = Vec::new();
        for (d, chain) in frontier {
            for (lower, how) in s.lower_devices(&d) {
                if lower == dev || out.iter().any(|(x, _)| *x == lower) {
                    continue;
                }
                let chain = if chain.is_empty() {
                    how
                } else {
                    format!("{chain}; {how}")
                };
                out.push((lower.clone(), chain.clone()));
                next.push((lower, chain));
            }
        }
        if next.is_empty() {
            break;
        }
        frontier = next;
    }
    out
}

fn device_of(f: &Finding) -> Option<String> {
    Some(f.evidence.get("device")?.as_str()?.to_string())
}

/// Marks the findings on lower devices as consequences of the findings on
/// the devices above them: INFO, with the chain in their title and
/// evidence (`consequence_of`).
pub fn mark_consequences(a: &Analysis, findings: &mut [Finding]) {
    let mut marks = Vec::new();
    for (i, upper) in findings.iter().enumerate() {
        let Some(up_dev) = device_of(upper) else {
            continue;
        };
        for (lower, chain) in below(a, &up_dev) {
            for (j, f) in findings.iter().enumerate() {
                if j != i && device_of(f).as_deref() == Some(lower.as_str()) {
                    marks.push((j, upper.id, up_dev.clone(), chain.clone()));
                }
            }
        }
    }
    for (j, cause, up_dev, chain) in marks {
        let f = &mut findings[j];
        if f.evidence.get("consequence_of").is_some() {
            continue;
        }
        let up_name = a
            .snapshot
            .as_ref()
            .and_then(|s| s.device(&up_dev))
            .map_or(up_dev.clone(), |(n, _)| n.to_string());
        f.severity = Severity::Info;
        f.title = format!(
            "{} — a consequence of {cause} on {up_name} above it ({chain})",
            f.title
        );
        if let Some(e) = f.evidence.as_object_mut() {
            e.insert(
                "consequence_of".into(),
                json!({"finding": cause, "device": up_dev, "chain": chain}),
            );
        }
    }
}
