//! Bios cut into several requests (`block_split`, `X` in blktrace): a bio
//! larger than the queue's `max_sectors_kb` travels as pieces, each a
//! command of its own. Confirmed when the snapshot shows the limit lowered
//! below what the hardware takes (`max_hw_sectors_kb`); not one of the
//! four measured slow-downs of DESIGN.md, recorded in the lab as
//! split-maxsectors16.cap.
//!
//! A light capture counts splits but not bios: each split adds a request
//! and each merge takes a bio into one, so its bios are requests − splits +
//! merges. Where splits outnumber that (the bios were cut while the
//! programs ran, their requests completed after), the device's bios are
//! not known and it is not judged.
//!
//! Every device is judged and the worst is named (critical first, then the
//! most requests per bio): a machine's other disk busy with large writes
//! must not hide the device whose limit was lowered.
//!
//! Where `max_sectors_kb` already equals `max_hw_sectors_kb`, nothing can
//! be raised: bios cut there (writeback's large bios in pieces of the
//! hardware's limit, 1.1 requests per bio) are how large I/O travels, not
//! a cause, and no setting makes them larger. The reason it gives quotes
//! the pieces' wait from queueing to issue (Q→D) against the others': a
//! healthy `dd` of 128 MiB showed 1.18 ms against 0.02 ms, which is its
//! large writeback queued at depth, not a cost of the cut.

use super::helpers::{device_name, ms_2dp, not_any, queue_dir, queue_number, queue_remedy};
use crate::analyze::block::DeviceSummary;
use crate::analyze::Analysis;
use crate::diagnose::{Finding, Rule, Severity, Verdict};
use serde_json::json;

pub const RULE: Rule = Rule {
    id: "request_splitting",
    looks_for: "bios split into several requests (larger than the device's max_sectors_kb)",
    fires_when: "≥ 16 splits and ≥ 10 % of queued bios (critical with ≥ 4 requests per bio and `max_sectors_kb` below `max_hw_sectors_kb`); never where the two are equal (cut at the hardware's limit: how large I/O travels)",
    stays_silent: "4 KiB reads that never exceed the limit; large bios cut into ≥ 512 KiB pieces, or at the hardware's own limit",
    needs: &["block"],
    light_lacks: None,
    light_lacks_when: None,
    remedy: Some("the device's `queue/max_sectors_kb` to its `max_hw_sectors_kb` when the snapshot shows it lowered; live"),
    check,
};

/// Between fsync-bulk.cap's 12 stray splits (a healthy run) and
/// split-maxsectors16.cap's 240.
const MIN_SPLITS: u64 = 16;
/// Chosen: one split per ten queued bios (split-maxsectors16.cap: 15 per bio).
const MIN_SPLITS_PER_BIO: f64 = 0.1;
/// Chosen; split-maxsectors16.cap (256 KiB bios, 16 KiB limit) gives 16.
const CRITICAL_REQUESTS_PER_BIO: f64 = 4.0;
/// Pieces of at least this size (512 KiB, in sectors) are what a large bio
/// must become: writeback of a healthy `dd` (dd-seqwrite.cap: 1 MiB+ bios
/// on a loop device, cut into requests of 1130 KiB on average at
/// max_sectors_kb = max_hw_sectors_kb = 1280), or a virtio disk's 4 MiB
/// writes at its 4096 KiB limit. The cost per command is amortized, at
/// the hardware's limit or below it.
const LARGE_PIECE_SECTORS: u64 = 1024;
/// What cutting cost where the limit is the hardware's: the split
/// requests' average wait before issue (Q→D) against the unsplit ones',
/// ns; `Err` says why it cannot be told.
fn added_wait(a: &Analysis, d: &DeviceSummary) -> Result<(u64, u64), &'static str> {
    if a.light.is_some() {
        return Err("a light capture does not follow the pieces to their issue");
    }
    let c = &d.split_costs;
    match (c.split.avg_wait_ns(), c.unsplit.avg_wait_ns()) {
        (Some(s), Some(u)) => Ok((s, u)),
        (None, _) => Err("no piece of a split bio was followed from queue to issue"),
        (_, None) => Err("no unsplit request to set the pieces' wait against"),
    }
}

/// A device's queued bios, splits and average request size (sectors):
/// from the trace, or from a light capture's counters; `Err` says why a
/// light capture's bios are not known.
fn figures(a: &Analysis, d: &DeviceSummary) -> Result<(u64, u64, Option<u64>), String> {
    let light = a
        .light
        .as_ref()
        .and_then(|l| l.devices.iter().find(|x| x.device == d.device));
    let Some(l) = light else {
        let avg = d.btt_merge.as_ref().map(|m| m.blk_avg);
        return Ok((d.actions.queued, d.actions.split, avg));
    };
    let (requests, bytes) = l.data_requests();
    let splits = l.counters.splits;
    let with_merges = requests.saturating_add(l.merges());
    if splits >= with_merges {
        return Err(format!(
            "{}: {splits} splits against {requests} requests completed while recording: its bios are not known, not judged",
            d.device
        ));
    }
    Ok((
        with_merges - splits,
        splits,
        (requests > 0).then(|| bytes / requests / 512),
    ))
}

fn check(a: &Analysis) -> Verdict {
    let mut why = Vec::new();
    let mut worst: Option<Finding> = None;
    for d in &a.block.devices {
        let (q, x, avg_sectors) = match figures(a, d) {
            Ok(f) => f,
            Err(e) => {
                why.push(e);
                continue;
            }
        };
        if x < MIN_SPLITS || (x as f64) < MIN_SPLITS_PER_BIO * q as f64 {
            why.push(format!("{}: {x} splits of {q} queued bios", d.device));
            continue;
        }
        let max_kb = queue_number(a, &d.device, "max_sectors_kb");
        let hw_kb = queue_number(a, &d.device, "max_hw_sectors_kb");
        let lowered = matches!((max_kb, hw_kb), (Some(m), Some(h)) if m < h);
        let at_hw_limit = matches!((max_kb, hw_kb), (Some(m), Some(h)) if m >= h);
        let pieces = (q + x) as f64 / q.max(1) as f64;
        let name = device_name(a, &d.device);
        let queue = queue_dir(name.as_deref(), &d.device);
        let pieces_kb = d.split_costs.largest_piece_sectors / 2;
        let cut_at = if pieces_kb > 0 {
            format!(" (pieces of up to {pieces_kb} KiB)")
        } else {
            String::new()
        };
        // Nothing to raise: cut at the hardware's limit is how large I/O
        // travels.
        if at_hw_limit {
            let limit = format!(
                "{}: {q} bios were split {x} times at the hardware's limit{cut_at}, max_sectors_kb = max_hw_sectors_kb = {}: how large I/O travels, not a cause",
                d.device,
                hw_kb.unwrap_or(0)
            );
            // No larger request is possible: the pieces' wait before issue
            // is the device's queue (large writeback queued at depth), not
            // the cut's cost.
            why.push(match added_wait(a, d) {
                Err(e) => format!("{limit} ({e})"),
                Ok((split, unsplit)) => format!(
                    "{limit}: the split requests waited {} ms on average from queue to issue, the others {} ms (the device's queue: no larger request is possible)",
                    ms_2dp(split),
                    ms_2dp(unsplit)
                ),
            });
            continue;
        }
        // Measured waits outrank the size heuristic.
        if avg_sectors.is_some_and(|s| s >= LARGE_PIECE_SECTORS) {
            why.push(format!(
                "{}: {q} bios were split {x} times into requests of {} KiB on average: large I/O, the cost per command amortized",
                d.device,
                avg_sectors.unwrap_or(0) / 2
            ));
            continue;
        }
        let f = Finding {
            remedy: hw_kb.filter(|_| lowered).and_then(|h| {
                queue_remedy(&queue, "max_sectors_kb", max_kb.map(|m| m.to_string()), &h.to_string())
                    .map(|r| r.judged_by(format!("dev.{}.requests", d.device)))
            }),
            id: RULE.id,
            severity: if lowered && pieces >= CRITICAL_REQUESTS_PER_BIO {
                Severity::Critical
            } else {
                Severity::Warning
            },
            title: format!(
                "{}: {q} bios were split {x} times ({pieces:.1} requests per bio){}",
                name.as_deref().unwrap_or(&d.device),
                max_kb
                    .map(|m| format!(", max_sectors_kb is {m}"))
                    .unwrap_or_default(),
            ),
            evidence: json!({
                "device": d.device,
                "bios_queued": q,
                "splits": x,
                "requests_per_bio": pieces,
                "avg_request_sectors": avg_sectors,
                "max_sectors_kb": max_kb,
                "max_hw_sectors_kb": hw_kb,
                "largest_piece_kb": (pieces_kb > 0).then_some(pieces_kb),
            }),
            explanation: format!(
                "A bio larger than the queue's limit is cut into pieces that travel as separate requests: the device gets {pieces:.1} commands per I/O instead of one, each with its own overhead{}.",
                if lowered {
                    " — and the limit here is below what the hardware takes"
                } else {
                    ""
                }
            ),
            workaround: match hw_kb {
                Some(h) if lowered => format!("echo {h} > {queue}/max_sectors_kb"),
                _ => format!(
                    "issue smaller I/O; if {queue}/max_sectors_kb is below max_hw_sectors_kb, raise it to that"
                ),
            },
        };
        let rank = |f: &Finding| {
            (
                std::cmp::Reverse(f.severity),
                f.evidence["requests_per_bio"].as_f64(),
            )
        };
        if worst.as_ref().is_none_or(|w| rank(&f) > rank(w)) {
            worst = Some(f);
        }
    }
    match worst {
        Some(f) => Verdict::Fired(f),
        None => not_any(why, "no block requests in the trace"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::rules::testkit::{
        analysis, block_devices, fired, line, silent, with_snapshot,
    };
    use serde_json::json;

    /// Direct reads of 256 KiB by dd (pid 300) on 7,0, the i-th split
    /// `splits[i]` times (pieces of 16 KiB, as under max_sectors_kb 16).
    fn split_reads(splits: &[u64]) -> String {
        let mut text = String::new();
        for (i, &splits) in (0..).zip(splits) {
            let (t, s) = (1_000 + i * 100, i * 512);
            text += &line(
                t,
                "dd-300",
                0,
                "block_bio_queue",
                &format!("7,0 R {s} + 512 [dd]"),
            );
            for k in 0..splits {
                let cut = format!("7,0 R {} / {} [dd]", s + k * 32, s + (k + 1) * 32);
                text += &line(t + 1 + k, "dd-300", 0, "block_split", &cut);
            }
        }
        text
    }

    #[test]
    fn fires_for_bios_split_under_a_lowered_limit() {
        let a = with_snapshot(
            analysis(&split_reads(&[15; 16])),
            json!({ "block_devices": block_devices(
                "loop0",
                "7,0",
                &[("max_sectors_kb", "16"), ("max_hw_sectors_kb", "1280")],
            ) }),
        );
        let f = fired(check(&a));
        assert_eq!(f.id, "request_splitting");
        assert_eq!(f.severity, Severity::Critical);
        assert_eq!(
            f.title,
            "loop0: 16 bios were split 240 times (16.0 requests per bio), max_sectors_kb is 16"
        );
        assert_eq!(f.evidence["splits"], 240);
        assert_eq!(f.evidence["requests_per_bio"], 16.0);
        assert_eq!(f.evidence["max_hw_sectors_kb"], 1280);
        assert!(f.explanation.contains("below what the hardware takes"));
        assert_eq!(
            f.workaround,
            "echo 1280 > /sys/block/loop0/queue/max_sectors_kb"
        );
    }

    #[test]
    fn warns_without_the_limits_in_a_snapshot() {
        let f = fired(check(&analysis(&split_reads(&[15; 16]))));
        assert_eq!(f.severity, Severity::Warning);
        assert_eq!(
            f.title,
            "7,0: 16 bios were split 240 times (16.0 requests per bio)"
        );
        assert_eq!(
            f.workaround,
            "issue smaller I/O; if /sys/dev/block/7:0/queue/max_sectors_kb is below max_hw_sectors_kb, raise it to that"
        );
    }

    /// Writeback at the hardware's limit: 20 bios of 2816 KiB by a
    /// kworker, each cut at 1280 KiB into three pieces (the last 256 KiB),
    /// among 200 unsplit 4 KiB writes (1.2 requests per bio, 439 sectors
    /// on average). Each request is issued `wait` µs after its bio was
    /// queued (`piece_wait` for the pieces), done 50 µs later.
    fn writeback_at_the_limit(wait: u64, piece_wait: u64) -> String {
        use crate::diagnose::rules::testkit::Trace;
        let mut t = Trace::default();
        let request = |t: &mut Trace, at: u64, issue: u64, task: &str, s: u64, n: u64| {
            let bio = format!("7,0 W {s} + {n} [{task}]");
            let rq = format!("7,0 W {} () {s} + {n} be,0,4 [{task}]", n * 512);
            t.add(at, task, 0, "block_getrq", &bio);
            t.add(issue, task, 0, "block_rq_issue", &rq);
            let done = format!("7,0 W () {s} + {n} be,0,4 [0]");
            t.add(issue + 50, "<idle>-0", 0, "block_rq_complete", &done);
        };
        for i in 0..20u64 {
            let (at, s) = (1_000 + i * 10_000, 1_000_000 + i * 8192);
            let wb = "kworker/u8:2-80";
            t.add(
                at,
                wb,
                0,
                "block_bio_queue",
                &format!("7,0 W {s} + 5632 [kworker/u8:2]"),
            );
            for (k, piece) in [2560u64, 2560, 512].into_iter().enumerate() {
                let k = k as u64;
                let from = s + k * 2560;
                if k < 2 {
                    let cut = format!("7,0 W {from} / {} [kworker/u8:2]", from + 2560);
                    t.add(at + 1 + k, wb, 0, "block_split", &cut);
                }
                request(&mut t, at + 3, at + piece_wait + k, wb, from, piece);
            }
        }
        for i in 0..200u64 {
            let (at, s) = (2_000 + i * 1_000, i * 8);
            t.add(
                at,
                "fio-200",
                1,
                "block_bio_queue",
                &format!("7,0 W {s} + 8 [fio]"),
            );
            request(&mut t, at, at + wait, "fio-200", s, 8);
        }
        t.text()
    }

    fn at_the_limit(text: &str) -> Analysis {
        with_snapshot(
            analysis(text),
            json!({ "block_devices": block_devices(
                "vda",
                "7,0",
                &[("max_sectors_kb", "1280"), ("max_hw_sectors_kb", "1280")],
            ) }),
        )
    }

    /// Large bios cut at the hardware's limit: how large I/O travels, no
    /// finding, and never advice to raise a limit that is already the
    /// hardware's, whether the pieces were issued as fast as the other
    /// requests or waited longer in the device's queue.
    #[test]
    fn silent_for_bios_cut_at_the_hardwares_limit() {
        let why = silent(check(&at_the_limit(&writeback_at_the_limit(20, 30))));
        assert_eq!(
            why,
            "7,0: 220 bios were split 40 times at the hardware's limit (pieces of up to 1280 KiB), max_sectors_kb = max_hw_sectors_kb = 1280: how large I/O travels, not a cause: the split requests waited 0.03 ms on average from queue to issue, the others 0.02 ms (the device's queue: no larger request is possible)"
        );
        let why = silent(check(&at_the_limit(&writeback_at_the_limit(20, 3_000))));
        assert!(
            why.contains(
                "the split requests waited 3 ms on average from queue to issue, the others 0.02 ms"
            ),
            "{why}"
        );
        // Without the snapshot's limits the same trace is judged as before.
        assert_eq!(
            fired(check(&analysis(&writeback_at_the_limit(20, 30)))).severity,
            Severity::Warning
        );
    }

    #[test]
    fn silent_for_a_few_stray_splits() {
        // fsync-bulk.cap's shape: 12 splits of 10 bios.
        let text = split_reads(&[3, 3, 3, 3, 0, 0, 0, 0, 0, 0]);
        let why = silent(check(&analysis(&text)));
        assert_eq!(why, "7,0: 12 splits of 10 queued bios");
    }

    /// A light capture of 7,0: 256 requests of 16 KiB from 16 reads of
    /// 256 KiB split `splits` times, under max_sectors_kb 16.
    fn light(splits: u64) -> Analysis {
        use crate::analyze::light::{LightDeviceSummary, LightOpSummary, LightSummary};
        let wakeup = "comm=probe pid=100 prio=120 target_cpu=000";
        let mut a = analysis(&line(1_000, "x-1", 0, "sched_wakeup", wakeup));
        a.block.devices.push(DeviceSummary {
            device: "7,0".into(),
            ..Default::default()
        });
        let mut d = LightDeviceSummary {
            device: "7,0".into(),
            ops: vec![LightOpSummary {
                op: "read".into(),
                ios: 256,
                bytes: 256 * 16384,
                ..Default::default()
            }],
            ..Default::default()
        };
        d.counters.splits = splits;
        a.light = Some(LightSummary {
            devices: vec![d],
            ..Default::default()
        });
        with_snapshot(
            a,
            json!({ "block_devices": block_devices(
                "loop0",
                "7,0",
                &[("max_sectors_kb", "16"), ("max_hw_sectors_kb", "1280")],
            ) }),
        )
    }

    #[test]
    fn judges_a_light_capture_from_its_split_counter() {
        let f = fired(check(&light(240)));
        assert_eq!(f.severity, Severity::Critical);
        assert_eq!(
            f.title,
            "loop0: 16 bios were split 240 times (16.0 requests per bio), max_sectors_kb is 16"
        );
        assert_eq!(f.evidence["avg_request_sectors"], 32);
        assert_eq!(silent(check(&light(3))), "7,0: 3 splits of 253 queued bios");
    }

    /// A second disk (254,0, listed first) in the same light capture.
    fn with_other_disk(mut a: Analysis, requests: u64, bytes: u64, splits: u64) -> Analysis {
        use crate::analyze::light::{LightDeviceSummary, LightOpSummary};
        a.block.devices.insert(
            0,
            DeviceSummary {
                device: "254,0".into(),
                ..Default::default()
            },
        );
        let mut d = LightDeviceSummary {
            device: "254,0".into(),
            ops: vec![LightOpSummary {
                op: "write".into(),
                ios: requests,
                bytes,
                ..Default::default()
            }],
            ..Default::default()
        };
        d.counters.splits = splits;
        a.light.as_mut().unwrap().devices.insert(0, d);
        a
    }

    /// Seen beside the lab under `scripts/test --under-load`: the machine's
    /// virtio disk, written by stress-ng, had 32 splits and 9 requests of
    /// 4 MiB completed while the programs ran. Its bios are not known; the
    /// loop device's lowered limit is the finding.
    #[test]
    fn a_disk_whose_splits_outnumber_its_requests_is_not_judged() {
        let a = with_other_disk(light(240), 9, 9 << 22, 32);
        let f = fired(check(&a));
        assert_eq!(f.evidence["device"], "7,0");
        let only = with_other_disk(light(3), 9, 9 << 22, 32);
        assert_eq!(
            silent(check(&only)),
            "254,0: 32 splits against 9 requests completed while recording: its bios are not known, not judged; 7,0: 3 splits of 253 queued bios"
        );
    }

    /// Large writes cut at a 4 MiB limit, listed first, do not hide a
    /// device whose limit was lowered; alone, they are not a finding.
    #[test]
    fn the_worst_device_is_named_and_large_pieces_are_not_a_cause() {
        let a = with_other_disk(light(240), 64, 64 << 22, 32);
        let f = fired(check(&a));
        assert_eq!(f.evidence["device"], "7,0");
        assert_eq!(f.severity, Severity::Critical);
        let only = with_other_disk(light(3), 64, 64 << 22, 32);
        assert!(
            silent(check(&only)).starts_with(
                "254,0: 32 bios were split 32 times into requests of 4096 KiB on average: large I/O"
            ),
            "{}",
            silent(check(&only))
        );
    }
}
