//! A light capture's devices: their requests and bytes (the kernel's own
//! where the capture read diskstats), latencies, sizes, depths, merges,
//! iostat's columns, and what the programs lost or did not see.

use super::*;

/// Each device's counts, bytes, merges and latencies from the histograms.
pub(super) fn apply_devices(a: &mut Analysis, doc: &LightDoc, summary: &mut LightSummary) {
    for d in &doc.devices {
        let idx = match a.block.devices.iter().position(|s| s.device == d.dev) {
            Some(i) => i,
            None => {
                a.block.devices.push(DeviceSummary {
                    device: d.dev.clone(),
                    ..Default::default()
                });
                a.block.devices.len() - 1
            }
        };
        let s = &mut a.block.devices[idx];
        let (mut device, mut total) = (LatencyDist::default(), LatencyDist::default());
        let mut ops = Vec::new();
        s.completed = OpCounts::default();
        s.bytes_completed = OpCounts::default();
        s.request_size_hist_kib = Log2Hist::default();
        let (counts, unseen) = device_counts(d);
        let empty = LightOp::default();
        for OpFigures {
            op: name,
            ios,
            bytes,
            timed,
        } in counts
        {
            let o = timed.unwrap_or(&empty);
            add_op(&mut s.completed, name, ios);
            add_op(&mut s.bytes_completed, name, bytes);
            let (q, dv, t) = (dist(&o.queued), dist(&o.device), dist(&o.total));
            device.merge(&dv);
            total.merge(&t);
            for (k, &n) in o.size_log2.iter().enumerate() {
                s.request_size_hist_kib.add_n((1u64 << k) >> 10, n);
            }
            ops.push(LightOpSummary {
                op: name.to_string(),
                ios,
                bytes,
                queued: q.summary(),
                device: dv.summary(),
                total: t.summary(),
            });
        }
        s.d2c = device.summary();
        s.q2c = total.summary();
        s.d2c_hist_us = log2_us(d.ops.values().map(|o| &o.device));
        s.q2c_hist_us = log2_us(d.ops.values().map(|o| &o.total));
        let c = &d.counters;
        let ios = s.completed.total();
        s.actions.issued = ios;
        s.actions.completed = ios;
        s.actions.back_merged = c.back_merges;
        s.actions.front_merged = c.front_merges;
        s.actions.rq_merged = c.rq_merges;
        s.actions.split = c.splits;
        s.actions.requeued = c.requeues;
        s.actions.queued = 0;
        s.errors = c.errors;
        s.completions_without_start = c.no_state;
        // Only a full trace has these; the slow requests alone would
        // misstate them.
        s.btt = Default::default();
        s.btt_merge = None;
        s.btt_overhead = None;
        s.write_waits = Default::default();
        s.iostat = Vec::new();
        // iostat's columns over the capture from the kernel's diskstats,
        // when the capture read them at its two ends (every request of the
        // device, as iostat counts them); else unknown.
        s.iostat_total = d.diskstats.as_ref().map(iostat_row).unwrap_or_default();
        s.iostat_active = s.iostat_total;
        s.in_flight_at_end = 0;
        let depth = LatencyDist::from_ranges(
            d.depth
                .iter()
                .enumerate()
                .map(|(k, &n)| (k as u64, k as u64, n)),
            d.depth
                .iter()
                .enumerate()
                .map(|(k, &n)| k as u128 * n as u128)
                .sum(),
        );
        summary.devices.push(LightDeviceSummary {
            device: d.dev.clone(),
            ops,
            depth: depth.summary(),
            depth_sampled: doc.depth_sampled,
            counters: *c,
            throttled: doc.throttle.then_some((c.throttled, c.throttled_bytes)),
            unseen,
        });
        warn_losses(a, &d.dev, c);
        a.warnings.extend(unseen_warning(&d.dev, unseen));
    }
    a.block.all_devices = Default::default();
    a.block.processes.clear();
    if doc.cpus.len() > crate::model::light::MAX_DEPTH_CPUS {
        a.warnings.push(format!(
            "light capture: the queue depth at issue adds up the requests in flight of the first {} of {} CPUs: it undercounts those issued on the others",
            crate::model::light::MAX_DEPTH_CPUS,
            doc.cpus.len()
        ));
    }
    a.warnings.push(if doc.devices.iter().any(|d| d.diskstats.is_some()) {
        "light capture: request counts and latencies come from the kernel's histograms (each value within 1/32), iostat's columns from its diskstats over the whole capture; btt's intervals and per-process figures need the full recorder (`iosleuth record` without --light)".into()
    } else {
        "light capture: request counts and latencies come from the kernel's histograms (each value within 1/32); btt's intervals, iostat's columns and per-process figures need the full recorder (`iosleuth record` without --light)".into()
    });
}

/// An operation's requests and bytes, with what the programs timed of it.
struct OpFigures<'a> {
    op: &'a str,
    ios: u64,
    bytes: u64,
    timed: Option<&'a LightOp>,
}

/// Each operation's requests and bytes, the kernel's own where the capture
/// read its diskstats (the programs may not have seen them all), the
/// programs' otherwise; and how many requests the kernel counted that the
/// programs did not see (None without diskstats: unknown).
fn device_counts(d: &LightDevice) -> (Vec<OpFigures<'_>>, Option<u64>) {
    let kernel = d.diskstats.as_ref().map(|k| (k.completed(), k.bytes()));
    let mut by_op: std::collections::BTreeMap<&str, Option<&LightOp>> =
        d.ops.iter().map(|(n, o)| (n.as_str(), Some(o))).collect();
    if let Some((ios, _)) = &kernel {
        for (i, op) in OPS.iter().enumerate() {
            if ios[i] > 0 {
                by_op.entry(op).or_insert(None);
            }
        }
    }
    let figures = by_op
        .into_iter()
        .map(|(op, timed)| {
            let i = OPS.iter().position(|o| *o == op);
            let (ios, bytes) = match (&kernel, i) {
                (Some((k_ios, k_bytes)), Some(i)) => (k_ios[i], k_bytes[i]),
                _ => timed.map_or((0, 0), |o| (o.ios, o.bytes)),
            };
            OpFigures {
                op,
                ios,
                bytes,
                timed,
            }
        })
        .collect();
    (figures, d.unseen())
}

/// Requests the kernel counted that the programs did not see, said with
/// where they can come from.
fn unseen_warning(dev: &str, unseen: Option<u64>) -> Option<String> {
    let n = unseen.filter(|n| *n > 0)?;
    Some(format!(
        "light capture: {dev}: the kernel counted {n} request(s) the BPF programs did not see (completed as the capture began or ended, or traced by the kernel without running the programs: it does so now and then, more often while another tracer is on block_rq_complete); the counts are the kernel's, the latencies and cgroups leave them out"
    ))
}

/// iostat's row from two readings of the disk's `stat` file.
fn iostat_row(d: &crate::model::light::DiskstatsDelta) -> crate::analyze::block::iostat::IostatRow {
    let f = |i: usize| d.fields.get(i).copied().unwrap_or(0);
    let ms = |i: usize| f(i).saturating_mul(1_000_000);
    let raw = crate::analyze::block::iostat::RawCounters {
        ios: [f(0), f(4), f(11), f(15)],
        merges: [f(1), f(5), f(12), 0],
        sectors: [f(2), f(6), f(13), 0],
        nsecs: [ms(3), ms(7), ms(14), ms(16)],
        busy_ns: ms(9),
    };
    crate::analyze::block::iostat::IostatRow::from_counters(&raw, 0.0, d.seconds)
}

fn warn_losses(a: &mut Analysis, dev: &str, c: &LightCounters) {
    if c.slow_capped > 0 {
        a.warnings.push(format!(
            "device {dev}: {} slow requests over the per-second cap were counted but not recorded (record --light --slow-cap)",
            c.slow_capped
        ));
    }
    if c.ring_full > 0 {
        a.warnings.push(format!(
            "device {dev}: {} slow requests were lost: the ring buffer was full",
            c.ring_full
        ));
    }
    if c.state_full > 0 {
        a.warnings.push(format!(
            "device {dev}: {} requests are missing from the latencies: the kernel's request map was full",
            c.state_full
        ));
    }
}

/// Log2 histograms in µs, as bcc's biolatency prints, from the
/// stages' finer buckets (each counted at its middle).
pub(super) fn log2_us<'a>(stages: impl Iterator<Item = &'a StageHist>) -> Log2Hist {
    let mut h = Log2Hist::default();
    for s in stages {
        for (lo, hi, n) in s.rows() {
            h.add_n((lo + (hi - lo) / 2) / 1000, n);
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::light::DiskstatsDelta;

    /// Two readings of a disk's stat file 2 s apart, as iostat -x would
    /// put them: 600 reads of 4 KiB, 1500 ms busy, 3000 ms of requests.
    #[test]
    fn diskstats_at_the_captures_ends_give_iostats_columns() {
        let before = [10, 0, 80, 5, 20, 1, 160, 9, 0, 100, 14, 0, 0, 0, 0, 3, 1];
        let after = [
            610, 2, 4880, 2805, 21, 1, 168, 209, 1, 1600, 3014, 0, 0, 0, 0, 3, 1,
        ];
        let d = DiskstatsDelta::between(&before, &after, 2.0).unwrap();
        assert_eq!(d.fields[8], 1, "in flight is the later reading's");
        let row = iostat_row(&d);
        assert_eq!(row.r_s, 300.0);
        assert_eq!(row.w_s, 0.5);
        assert_eq!(row.rkb_s, 4800.0 / 2.0 / 2.0);
        assert_eq!(row.r_await, 2800.0 / 600.0);
        assert_eq!(row.util, 75.0);
        assert_eq!(row.aqu_sz, 1.5);
        assert_eq!(row.seconds, 2.0);
        // Kernels before 5.5 (no flush fields) and a zero span: unknown.
        assert!(DiskstatsDelta::between(&before[..15], &after[..15], 2.0).is_none());
        assert!(DiskstatsDelta::between(&before, &after, 0.0).is_none());
    }

    /// A capture whose programs missed a flush and a write the kernel
    /// counted (diskstats at its two ends): the counts are the kernel's,
    /// per operation, discards the programs never saw included; the
    /// latencies stay the programs'; the difference is said.
    #[test]
    fn a_devices_counts_are_the_kernels_and_what_the_programs_missed_is_said() {
        let mut d = LightDevice {
            dev: "7,0".into(),
            ..Default::default()
        };
        let op = |ios, bytes| LightOp {
            ios,
            bytes,
            ..Default::default()
        };
        d.ops.insert("write".into(), op(999, 999 * 8192));
        d.ops.insert("flush".into(), op(999, 0));
        let (figures, unseen) = device_counts(&d);
        let rows: Vec<_> = figures.iter().map(|f| (f.op, f.ios, f.bytes)).collect();
        assert_eq!(rows, [("flush", 999, 0), ("write", 999, 999 * 8192)]);
        assert_eq!(unseen, None, "no diskstats: unknown");
        // The kernel's: 1000 writes of 16 sectors, 1000 flushes, 2
        // discards of 8 sectors.
        let mut before = vec![0u64; 17];
        before[4] = 50;
        let mut after = before.clone();
        after[4] += 1000;
        after[6] += 16_000;
        after[15] += 1000;
        after[11] += 2;
        after[13] += 16;
        d.diskstats = DiskstatsDelta::between(&before, &after, 1.0);
        let k = d.diskstats.as_ref().unwrap();
        assert_eq!(k.completed(), [0, 1000, 1000, 2]);
        assert_eq!(k.bytes(), [0, 16_000 * 512, 0, 16 * 512]);
        let (figures, unseen) = device_counts(&d);
        let rows: Vec<_> = figures
            .iter()
            .map(|f| (f.op, f.ios, f.bytes, f.timed.is_some()))
            .collect();
        assert_eq!(
            rows,
            [
                ("discard", 2, 8192, false),
                ("flush", 1000, 0, true),
                ("write", 1000, 16_000 * 512, true)
            ]
        );
        assert_eq!(unseen, Some(4), "2 discards, a write and a flush");
        let said = unseen_warning("7,0", unseen).unwrap();
        assert!(
            said.contains("7,0: the kernel counted 4 request(s)"),
            "{said}"
        );
        assert_eq!(unseen_warning("7,0", Some(0)), None);
        assert_eq!(unseen_warning("7,0", None), None);
        // A later delta from the same first reading, less an earlier one.
        let mut later = after.clone();
        later[4] += 7;
        later[8] = 3;
        let l = DiskstatsDelta::between(&before, &later, 3.0).unwrap();
        let w = l.since(k).unwrap();
        assert_eq!(
            (w.completed(), w.fields[8], w.seconds),
            ([0, 7, 0, 0], 3, 2.0)
        );
    }
}
