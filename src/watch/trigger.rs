//! When `watch` keeps a capture: a device's p99 over the last window far
//! above its own trailing baseline, a request over an absolute bound, or
//! a thread that waited runnable too long. Judged once a second on the
//! histograms' difference between two readings, so no request is missed
//! for not being sent.

use crate::model::light::{comm_string, LightDevice, WaitRecord, OPS};

#[derive(Clone, Debug)]
pub struct TriggerOptions {
    /// Fire when a device's window p99 is this many times its baseline's.
    pub p99_factor: Option<f64>,
    /// ... and at least this long (ns): a p99 going from 20 to 90 µs is a
    /// factor, not a problem.
    pub p99_floor_ns: u64,
    /// Fire on any request at least this long (ns).
    pub slow_ns: Option<u64>,
    /// Fire on a runnable wait at least this long (ns).
    pub runqueue_ns: Option<u64>,
    /// ... of a thread of one of these names (its comm); empty: any.
    pub runqueue_comms: Vec<String>,
    /// A window's (and a baseline's) p99 is judged from this many requests.
    pub min_requests: u64,
}

impl Default for TriggerOptions {
    fn default() -> TriggerOptions {
        TriggerOptions {
            p99_factor: Some(4.0),
            p99_floor_ns: 5_000_000,
            slow_ns: Some(100_000_000),
            runqueue_ns: Some(100_000_000),
            runqueue_comms: Vec::new(),
            min_requests: 50,
        }
    }
}

/// Why a trigger fired, with the figures that made it.
#[derive(Clone, Debug, PartialEq)]
pub enum Reason {
    P99 {
        device: String,
        op: &'static str,
        p99_ns: u64,
        baseline_ns: u64,
        requests: u64,
    },
    SlowRequest {
        device: String,
        op: &'static str,
        count: u64,
        bound_ns: u64,
    },
    RunqueueStall {
        cpu: u32,
        tid: u32,
        comm: String,
        wait_ns: u64,
        holder: String,
    },
}

impl Reason {
    /// The `reason` label of iosleuth_triggers_total.
    pub fn name(&self) -> &'static str {
        match self {
            Reason::P99 { .. } => "p99",
            Reason::SlowRequest { .. } => "slow_request",
            Reason::RunqueueStall { .. } => "runqueue_stall",
        }
    }

    /// What the capture's directory is named after: the device, or the CPU.
    pub fn subject(&self) -> String {
        match self {
            Reason::P99 { device, .. } | Reason::SlowRequest { device, .. } => device.clone(),
            Reason::RunqueueStall { cpu, .. } => format!("cpu{cpu}"),
        }
    }

    pub fn describe(&self) -> String {
        let ms = |ns: u64| format!("{:.1} ms", ns as f64 / 1e6);
        match self {
            Reason::P99 {
                device,
                op,
                p99_ns,
                baseline_ns,
                requests,
            } => format!(
                "{device} {op} p99 {} over the last window ({requests} requests), {:.1}x its baseline {}",
                ms(*p99_ns),
                *p99_ns as f64 / (*baseline_ns).max(1) as f64,
                ms(*baseline_ns)
            ),
            Reason::SlowRequest {
                device,
                op,
                count,
                bound_ns,
            } => format!(
                "{device}: {count} {op} request(s) of at least {}",
                ms(*bound_ns)
            ),
            Reason::RunqueueStall {
                cpu,
                tid,
                comm,
                wait_ns,
                holder,
            } => format!(
                "{comm} (tid {tid}) waited {} runnable on CPU {cpu}, behind {holder}",
                ms(*wait_ns)
            ),
        }
    }
}

/// What one judgement looks at: the devices' counts over the last window
/// (for the p99), over the last second (for requests over the bound: each
/// seen once) and over the baseline before the window; the disks' names
/// (`maj,min` → name); the runnable waits that ended in the last second.
pub struct Seen<'a> {
    pub window: &'a [LightDevice],
    pub last: &'a [LightDevice],
    pub baseline: &'a [LightDevice],
    pub names: &'a [(String, String)],
    pub waits: &'a [WaitRecord],
}

/// The first reason to fire.
pub fn check(opts: &TriggerOptions, seen: &Seen) -> Option<Reason> {
    let Seen {
        window,
        last,
        baseline,
        names,
        waits,
    } = *seen;
    let name = |dev: &str| {
        names
            .iter()
            .find(|(d, _)| d == dev)
            .map_or_else(|| dev.to_string(), |(_, n)| n.clone())
    };
    if let Some(bound) = opts.slow_ns {
        for d in last {
            for op in OPS {
                let count = d.ops.get(op).map_or(0, |o| o.total.at_least(bound));
                if count > 0 {
                    return Some(Reason::SlowRequest {
                        device: name(&d.dev),
                        op,
                        count,
                        bound_ns: bound,
                    });
                }
            }
        }
    }
    for d in window {
        for op in OPS {
            let Some(w) = d.ops.get(op) else { continue };
            let Some(factor) = opts.p99_factor else {
                continue;
            };
            let requests: u64 = w.total.buckets.iter().map(|b| b.1).sum();
            let base = baseline
                .iter()
                .find(|b| b.dev == d.dev)
                .and_then(|b| b.ops.get(op));
            let (Some(base), true) = (base, requests >= opts.min_requests) else {
                continue;
            };
            let base_requests: u64 = base.total.buckets.iter().map(|b| b.1).sum();
            if base_requests < opts.min_requests {
                continue;
            }
            let (Some(p99), Some(base_p99)) =
                (w.total.quantile_high(0.99), base.total.quantile_high(0.99))
            else {
                continue;
            };
            if p99 >= opts.p99_floor_ns && p99 as f64 > factor * base_p99 as f64 {
                return Some(Reason::P99 {
                    device: name(&d.dev),
                    op,
                    p99_ns: p99,
                    baseline_ns: base_p99,
                    requests,
                });
            }
        }
    }
    let bound = opts.runqueue_ns?;
    waits
        .iter()
        .filter(|w| w.wait_ns >= bound)
        // Behind the idle task and no real-time one: nothing held the CPU
        // (a late wake-up: a virtual CPU the host did not run, a deep
        // C-state), not a runqueue stall.
        .filter(|w| w.holder_tid != 0 || w.rt_ns > 0)
        .filter(|w| {
            opts.runqueue_comms.is_empty() || opts.runqueue_comms.contains(&comm_string(&w.comm))
        })
        .max_by_key(|w| w.wait_ns)
        .map(|w| Reason::RunqueueStall {
            cpu: w.cpu,
            tid: w.tid,
            comm: comm_string(&w.comm),
            wait_ns: w.wait_ns,
            // A real-time task that held the CPU for most of the wait is
            // the holder, whoever ran just before the thread.
            holder: if w.rt_ns.saturating_mul(2) > w.wait_ns {
                format!(
                    "{} (real-time, prio {})",
                    comm_string(&w.rt_comm),
                    w.rt_prio
                )
            } else {
                comm_string(&w.holder_comm)
            },
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::light::{LightOp, StageHist};

    /// A device whose reads took these many requests of each latency (ns).
    fn device(reads: &[(u64, u64)]) -> LightDevice {
        let mut buckets: Vec<(u32, u64)> = reads
            .iter()
            .map(|&(ns, n)| (crate::model::log_linear::bucket_of::<5>(ns) as u32, n))
            .collect();
        buckets.sort();
        let n = reads.iter().map(|r| r.1).sum();
        let mut ops = std::collections::BTreeMap::new();
        let total = StageHist {
            n,
            sum_ns: reads.iter().map(|r| r.0 * r.1).sum(),
            buckets,
        };
        ops.insert(
            "read".to_string(),
            LightOp {
                ios: n,
                total,
                ..Default::default()
            },
        );
        LightDevice {
            dev: "7,0".into(),
            ops,
            ..Default::default()
        }
    }

    #[test]
    fn p99_fires_only_far_above_its_baseline_and_its_floor() {
        let opts = TriggerOptions::default();
        let names = [("7,0".to_string(), "loop0".to_string())];
        let baseline = [device(&[(200_000, 1000), (1_000_000, 5)])];
        // 30 ms p99 against a 1 ms baseline: fires.
        let bad = [device(&[(200_000, 90), (30_000_000, 10)])];
        let seen = |window, last, baseline| Seen {
            window,
            last,
            baseline,
            names: &names,
            waits: &[],
        };
        let r = check(&opts, &seen(&bad, &[], &baseline)).expect("fires");
        let Reason::P99 {
            device: fired_on,
            p99_ns,
            requests,
            ..
        } = &r
        else {
            panic!("{r:?}")
        };
        assert_eq!(fired_on, "loop0");
        assert_eq!(*requests, 100);
        assert!((30_000_000..31_000_000).contains(p99_ns), "{p99_ns}");
        assert!(
            r.describe().contains("loop0 read p99 30."),
            "{}",
            r.describe()
        );
        // The same window with too few requests, or a p99 under the floor:
        // nothing.
        let few = [device(&[(200_000, 9), (30_000_000, 1)])];
        assert_eq!(check(&opts, &seen(&few, &[], &baseline)), None);
        let fast = [device(&[(200_000, 90), (4_000_000, 10)])];
        assert_eq!(check(&opts, &seen(&fast, &[], &baseline)), None);
        // No baseline yet: only the absolute bound can fire, on the last
        // second's requests.
        assert_eq!(check(&opts, &seen(&bad, &[], &[])), None);
        let stalled = [device(&[(200_000, 90), (150_000_000, 1)])];
        assert_eq!(check(&opts, &seen(&stalled, &[], &[])), None);
        assert!(matches!(
            check(&opts, &seen(&stalled, &stalled, &[])),
            Some(Reason::SlowRequest { count: 1, .. })
        ));
    }

    #[test]
    fn a_long_runnable_wait_fires_with_who_held_the_cpu() {
        let mut comm = [0u8; 16];
        comm[..3].copy_from_slice(b"fio");
        let mut holder = [0u8; 16];
        holder[..3].copy_from_slice(b"hog");
        let wait = |ns| WaitRecord {
            cpu: 1,
            start_ns: 0,
            wait_ns: ns,
            held_ns: ns,
            rt_ns: 0,
            tid: 42,
            prio: 120,
            holder_tid: 7,
            holder_prio: 49,
            rt_tid: 0,
            rt_prio: 0,
            comm,
            holder_comm: holder,
            rt_comm: [0; 16],
        };
        let opts = TriggerOptions::default();
        let seen = |waits| Seen {
            window: &[],
            last: &[],
            baseline: &[],
            names: &[],
            waits,
        };
        let short = [wait(20_000_000)];
        assert_eq!(check(&opts, &seen(&short)), None);
        let long = [wait(20_000_000), wait(300_000_000)];
        let r = check(&opts, &seen(&long)).unwrap();
        assert_eq!(r.subject(), "cpu1");
        assert_eq!(
            r.describe(),
            "fio (tid 42) waited 300.0 ms runnable on CPU 1, behind hog"
        );
        // Only the threads asked for.
        let only = |names: &[&str]| TriggerOptions {
            runqueue_comms: names.iter().map(|n| n.to_string()).collect(),
            ..TriggerOptions::default()
        };
        assert_eq!(check(&only(&["postgres"]), &seen(&long)), None);
        assert!(check(&only(&["postgres", "fio"]), &seen(&long)).is_some());
        // Behind the idle task: a late wake-up, not a stall.
        let mut idle = wait(300_000_000);
        idle.holder_tid = 0;
        let idle = [idle];
        assert_eq!(check(&opts, &seen(&idle)), None);
        // Most of it held by a real-time task: that one is named.
        let mut rt = wait(300_000_000);
        rt.rt_ns = 200_000_000;
        rt.rt_prio = 49;
        rt.rt_comm[..4].copy_from_slice(b"burn");
        let rt = [rt];
        let r = check(&opts, &seen(&rt)).unwrap();
        assert!(
            r.describe().ends_with("behind burn (real-time, prio 49)"),
            "{}",
            r.describe()
        );
    }
}
