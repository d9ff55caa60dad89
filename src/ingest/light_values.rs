//! The figures of a light capture's `light.json` checked before they are
//! believed: a histogram bucket outside the 1184 the BPF programs have is
//! skipped (its range would be a latency of years), and a device, CPU or
//! program whose counts no capture could reach is left out, each with a
//! warning that names the file and the key. What is left out is unknown,
//! not zero: the warning says so.

use crate::model::light::{LightDoc, StageHist, CGROUPS_KEPT, LE_NS, NBUCKET, URING_OPS};
use serde_json::Value;
use std::path::Path;

/// Counts above this are damage: 2^48 requests is 325 days at 10 M/s.
const MAX_COUNT: u64 = 1 << 48;
/// Times (ns) and bytes above this are damage: 2^56 ns is 2.3 years,
/// 2^56 bytes 64 PiB.
const MAX_AMOUNT: u64 = 1 << 56;
/// `size_log2` has one entry per power of two of a u64.
const SIZE_CLASSES: usize = 64;

/// `doc` with what cannot be true left out, and a warning for each part.
pub fn checked(mut doc: LightDoc, file: &Path) -> (LightDoc, Vec<String>) {
    let mut warnings = Vec::new();
    let file = file.display();
    for (d, dev) in doc.devices.iter_mut().enumerate() {
        for (op, o) in dev.ops.iter_mut() {
            for (stage, h) in [
                ("queued", &mut o.queued),
                ("device", &mut o.device),
                ("total", &mut o.total),
            ] {
                if let Some((n, first)) = drop_outside(h) {
                    warnings.push(format!(
                        "{file}: devices[{d}].ops.{op}.{stage}.buckets: {n} buckets outside 0..{} were skipped (the first: {first}); that stage's latencies miss their requests",
                        NBUCKET - 1
                    ));
                }
            }
            if o.size_log2.len() > SIZE_CLASSES {
                warnings.push(format!(
                    "{file}: devices[{d}].ops.{op}.size_log2: {} size classes, where a u64 has {SIZE_CLASSES}; the rest were skipped",
                    o.size_log2.len()
                ));
                o.size_log2.truncate(SIZE_CLASSES);
            }
        }
    }
    if let Some(groups) = doc.io_uring.as_mut() {
        let mut seen = std::collections::BTreeSet::new();
        let before = groups.len();
        groups.retain(|g| URING_OPS.contains(&g.op.as_str()) && seen.insert(g.op.clone()));
        if groups.len() < before {
            warnings.push(format!(
                "{file}: io_uring: {} entries named no group of {} or repeated one; they were left out, their figures unknown",
                before - groups.len(),
                URING_OPS.join(", ")
            ));
        }
        for g in groups.iter_mut() {
            if let Some((n, first)) = drop_outside(&mut g.latency) {
                warnings.push(format!(
                    "{file}: io_uring.{}.latency.buckets: {n} buckets outside 0..{} were skipped (the first: {first}); its latencies miss their requests",
                    g.op,
                    NBUCKET - 1
                ));
            }
        }
    }
    let file = file.to_string();
    let mut leave_out = |what: String, (key, value): (String, u64), part: &str| {
        warnings.push(format!(
            "{file}: {key} is {value}, more than any capture counts: {what} was left out, its {part} unknown"
        ));
    };
    keep_plausible(
        &mut doc.devices,
        "devices",
        |dev| format!("device {}", dev.dev),
        "figures",
        &mut leave_out,
    );
    keep_plausible(
        &mut doc.cpus,
        "cpus",
        |cpu| format!("CPU {}", cpu.cpu),
        "scheduler and interrupt figures",
        &mut leave_out,
    );
    keep_plausible(
        &mut doc.cgroups.top,
        "cgroups.top",
        |c| format!("cgroup entry {} on {} ({})", c.id, c.dev, c.op),
        "figures",
        &mut leave_out,
    );
    if let Some(groups) = doc.io_uring.as_mut() {
        keep_plausible(
            groups,
            "io_uring",
            |g| format!("io_uring group {}", g.op),
            "figures",
            &mut leave_out,
        );
    }
    keep_plausible(
        &mut doc.programs,
        "programs",
        |prog| format!("program {}", prog.name),
        "run time",
        &mut leave_out,
    );
    let top = &mut doc.cgroups.top;
    if top.len() > CGROUPS_KEPT {
        warnings.push(format!(
            "{file}: cgroups.top: {} entries, where a capture keeps {CGROUPS_KEPT}; the rest were left out, their figures unknown",
            top.len()
        ));
        top.truncate(CGROUPS_KEPT);
    }
    for (i, c) in top.iter_mut().enumerate() {
        if c.le.len() > LE_NS.len() + 1 {
            warnings.push(format!(
                "{file}: cgroups.top[{i}].le: {} buckets, where there are {}; the rest were skipped",
                c.le.len(),
                LE_NS.len() + 1
            ));
            c.le.truncate(LE_NS.len() + 1);
        }
    }
    (doc, warnings)
}

/// Keeps the items of `list` (named `key` in the file) with no count too
/// large to be true; each left out goes to `say` with its name, the key
/// and value that give it away, and `part`: what of it is then unknown.
fn keep_plausible<T: serde::Serialize>(
    list: &mut Vec<T>,
    key: &str,
    name: impl Fn(&T) -> String,
    part: &str,
    say: &mut impl FnMut(String, (String, u64), &str),
) {
    let mut i = 0;
    list.retain(|item| {
        let bad = too_large(&to_value(item), &format!("{key}[{i}]"), "");
        i += 1;
        match bad {
            Some(found) => {
                say(name(item), found, part);
                false
            }
            None => true,
        }
    });
}

fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or_default()
}

/// Removes the buckets outside the histogram: how many, and the first.
fn drop_outside(h: &mut StageHist) -> Option<(usize, u32)> {
    let first = h.buckets.iter().find(|(i, _)| *i as usize >= NBUCKET)?.0;
    let before = h.buckets.len();
    h.buckets.retain(|(i, _)| (*i as usize) < NBUCKET);
    Some((before - h.buckets.len(), first))
}

/// The first number under `v` larger than its kind of figure can be, with
/// its key (`at`); `name` is the key of the object field it is in.
fn too_large(v: &Value, at: &str, name: &str) -> Option<(String, u64)> {
    match v {
        Value::Object(m) => m
            .iter()
            .find_map(|(k, x)| too_large(x, &format!("{at}.{k}"), k)),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .find_map(|(i, x)| too_large(x, &format!("{at}[{i}]"), name)),
        Value::Number(n) => {
            let n = n.as_u64()?;
            let limit = if name.ends_with("_ns") || name.contains("bytes") {
                MAX_AMOUNT
            } else {
                MAX_COUNT
            };
            (n > limit).then(|| (at.to_string(), n))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::light::{LightDevice, LightOp};

    #[test]
    fn buckets_outside_and_counts_past_any_capture_are_left_out_by_key() {
        let mut doc = LightDoc::default();
        let mut op = LightOp {
            ios: 3,
            ..Default::default()
        };
        op.device.buckets = vec![(10, 2), (5000, 1)];
        let mut good = LightDevice {
            dev: "7,0".into(),
            ..Default::default()
        };
        good.ops.insert("read".into(), op.clone());
        let mut bad = good.clone();
        bad.dev = "8,0".into();
        bad.ops.get_mut("read").unwrap().ios = 18446744073709551613;
        doc.devices = vec![good, bad];
        let (doc, w) = checked(doc, Path::new("cap/light.json"));
        assert_eq!(doc.devices.len(), 1);
        assert_eq!(doc.devices[0].ops["read"].device.buckets, vec![(10, 2)]);
        assert_eq!(w.len(), 3, "{w:?}");
        assert!(
            w[0].contains(
                "cap/light.json: devices[0].ops.read.device.buckets: 1 buckets outside 0..1183"
            ),
            "{w:?}"
        );
        assert!(
            w[2].contains("devices[1].ops.read.ios is 18446744073709551613")
                && w[2].contains("device 8,0 was left out"),
            "{w:?}"
        );
    }

    #[test]
    fn io_uring_groups_that_no_capture_writes_are_left_out_by_name() {
        use crate::model::light::LightUring;
        let group = |op: &str, requests: u64| LightUring {
            op: op.into(),
            counts: crate::model::light::UringCounters {
                requests,
                ..Default::default()
            },
            ..Default::default()
        };
        let mut read = group("read", 5);
        read.latency.buckets = vec![(300, 5), (99_999, 1)];
        let doc = LightDoc {
            io_uring: Some(vec![
                read,
                group("read", 1),
                group("\u{1b}[2J", 1),
                group("write", u64::MAX),
            ]),
            ..Default::default()
        };
        let (doc, w) = checked(doc, Path::new("cap/light.json"));
        let groups = doc.io_uring.unwrap();
        assert_eq!(groups.len(), 1);
        assert_eq!(
            (groups[0].op.as_str(), groups[0].counts.requests),
            ("read", 5)
        );
        assert_eq!(groups[0].latency.buckets, vec![(300, 5)]);
        assert_eq!(w.len(), 3, "{w:?}");
        assert!(w[0].contains("io_uring: 2 entries named no group"), "{w:?}");
        assert!(
            w[1].contains("io_uring.read.latency.buckets: 1 buckets outside"),
            "{w:?}"
        );
        assert!(
            w[2].contains("io_uring[1].requests is 18446744073709551615"),
            "{w:?}"
        );
    }
}
