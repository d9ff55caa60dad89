//! Reading the programs' maps: per-CPU values summed into what a light
//! capture keeps for each device and operation.

use super::maps::{self, CgKey, CgStats, Counters, DepthHist, Hist, SizeHist, UringStats, NOP};
use super::{err, CaptureError};
use crate::model::light::{
    LightCgroup, LightDevice, LightOp, LightUring, StageHist, UringCounters, OPS, URING_OPS,
};
use aya::maps::{MapData, PerCpuArray, PerCpuHashMap};

/// The per-CPU histograms of one key, summed.
pub(super) fn sum_hist(per_cpu: &[Hist]) -> StageHist {
    let mut counts = vec![0u64; crate::model::light::NBUCKET];
    let (mut n, mut sum) = (0u64, 0u64);
    for h in per_cpu {
        n += h.n;
        sum = sum.wrapping_add(h.sum);
        for (c, b) in counts.iter_mut().zip(h.b.iter()) {
            *c += u64::from(*b);
        }
    }
    StageHist {
        n,
        sum_ns: sum,
        buckets: counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(i, &c)| (i as u32, c))
            .collect(),
    }
}

pub(super) fn device(
    slot: u32,
    dev: String,
    latency: &PerCpuArray<MapData, Hist>,
    counters: &PerCpuArray<&MapData, Counters>,
    depths: &PerCpuArray<&MapData, DepthHist>,
    sizes: &PerCpuArray<&MapData, SizeHist>,
) -> Result<LightDevice, CaptureError> {
    let read = |e: aya::maps::MapError| err("cannot read the light maps")(e.to_string());
    let mut total = Counters::default();
    for c in counters.get(&slot, 0).map_err(read)?.iter() {
        for i in 0..4 {
            total.ios[i] += c.ios[i];
            total.bytes[i] += c.bytes[i];
        }
        total.counts.add(&c.counts);
    }
    let mut ops = std::collections::BTreeMap::new();
    for (op, name) in OPS.iter().enumerate() {
        let op32 = op as u32;
        let stage = |s: u32| -> Result<StageHist, CaptureError> {
            Ok(sum_hist(
                &latency
                    .get(&maps::latency_key(slot, op32, s), 0)
                    .map_err(read)?,
            ))
        };
        let mut size_log2 = vec![0u64; maps::NSIZE];
        for s in sizes.get(&(slot * NOP + op32), 0).map_err(read)?.iter() {
            for (t, b) in size_log2.iter_mut().zip(s.b.iter()) {
                *t += u64::from(*b);
            }
        }
        while size_log2.last() == Some(&0) {
            size_log2.pop();
        }
        let o = LightOp {
            ios: total.ios[op],
            bytes: total.bytes[op],
            queued: stage(maps::STAGE_QUEUED)?,
            device: stage(maps::STAGE_DEVICE)?,
            total: stage(maps::STAGE_TOTAL)?,
            size_log2,
        };
        if o.ios > 0 || o.total.n > 0 {
            ops.insert(name.to_string(), o);
        }
    }
    let mut depth = vec![0u64; maps::NDEPTH];
    for d in depths.get(&slot, 0).map_err(read)?.iter() {
        for (t, b) in depth.iter_mut().zip(d.b.iter()) {
            *t += u64::from(*b);
        }
    }
    while depth.last() == Some(&0) {
        depth.pop();
    }
    Ok(LightDevice {
        dev,
        ops,
        depth,
        counters: total.counts,
        diskstats: None,
    })
}

/// Every (cgroup, device, operation) the kernel counted, in the per-CPU
/// tables and the hash map, summed over CPUs; `dev_of` names a slot's
/// device. Paths are not resolved here.
pub(super) fn cgroups(
    map: &PerCpuHashMap<&MapData, CgKey, CgStats>,
    cache: &PerCpuArray<&MapData, CgStats>,
    dev_of: impl Fn(u32) -> String,
) -> Result<Vec<LightCgroup>, CaptureError> {
    let read = |e: aya::maps::MapError| err("cannot read the light maps")(e.to_string());
    let mut sums: std::collections::BTreeMap<CgKey, LightCgroup> = Default::default();
    let mut add = |k: CgKey, v: &CgStats| {
        let c = sums.entry(k).or_insert_with(|| LightCgroup {
            id: k.id,
            path: None,
            dev: dev_of(k.slot),
            op: OPS.get(k.op as usize).unwrap_or(&"other").to_string(),
            le: vec![0; maps::NLE],
            ..Default::default()
        });
        c.ios += v.ios;
        c.bytes += v.bytes;
        c.time_ns = c.time_ns.wrapping_add(v.time_ns);
        for (t, b) in c.le.iter_mut().zip(v.le.iter()) {
            *t += u64::from(*b);
        }
    };
    for i in 0..maps::NCGCACHE {
        for v in cache.get(&i, 0).map_err(read)?.iter() {
            if v.op_used > 0 {
                let k = CgKey {
                    id: v.id,
                    slot: v.slot,
                    op: v.op_used - 1,
                };
                add(k, v);
            }
        }
    }
    // The map holds at most NCGROUP keys; an entry deleted while the walk
    // runs ends it early (the kernel's iteration restarts): read again
    // next time.
    for entry in map.iter().take(maps::NCGROUP as usize) {
        let Ok((k, per_cpu)) = entry else { break };
        for v in per_cpu.iter() {
            add(k, v);
        }
    }
    Ok(sums
        .into_values()
        .map(|mut c| {
            c.timed = c.le.iter().sum();
            c
        })
        .collect())
}

/// Each group of io_uring requests with any count, summed over CPUs.
pub(super) fn uring(
    stats: &PerCpuArray<&MapData, UringStats>,
    latency: &PerCpuArray<&MapData, Hist>,
) -> Result<Vec<LightUring>, CaptureError> {
    let read = |e: aya::maps::MapError| err("cannot read the light maps")(e.to_string());
    let mut out = Vec::new();
    for (i, op) in URING_OPS.iter().enumerate() {
        let key = i as u32;
        let u = LightUring {
            op: op.to_string(),
            counts: UringCounters::sum(stats.get(&key, 0).map_err(read)?.iter()),
            latency: sum_hist(&latency.get(&key, 0).map_err(read)?),
        };
        if u.counted() {
            out.push(u);
        }
    }
    Ok(out)
}
