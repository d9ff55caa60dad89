//! The thread that drains the programs' ring buffer into the capture's
//! files (or a ring in memory) and keeps each device and operation's slow
//! threshold at its running p99.

use super::maps::{self, Hist, NOP, NSLOT};
use super::read::sum_hist;
use super::ring::RecordRing;
use super::{err, CaptureError};
use crate::model::light::{REC_EVENT, REC_SLOW, REC_WAIT, SLOW_RECORD};
use aya::maps::{Array, MapData, PerCpuArray, RingBuf};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Before a device and operation has this many requests, its slow
/// threshold is `INITIAL_SLOW_NS`; after, its running p99.
const MIN_FOR_P99: u64 = 100;
/// The adaptive threshold never goes below 1 ms: the p99 of a fast device
/// would send thousands of requests a second that explain nothing.
const MIN_SLOW_NS: u64 = 1_000_000;
/// How often the ring buffer is drained.
const POLL: Duration = Duration::from_millis(100);

/// Drains the ring buffer into slow.bin and context.bin (or a ring in
/// memory), and keeps each device and operation's threshold at its
/// running p99.
pub(super) struct Poller {
    pub(super) records: RingBuf<MapData>,
    pub(super) latency: PerCpuArray<MapData, Hist>,
    pub(super) threshold: Array<MapData, u64>,
    pub(super) out: Out,
    pub(super) adaptive: bool,
    /// Keeps the programs' in-flight counts true (None: the floor's empty
    /// programs count nothing).
    pub(super) anchor: Option<super::inflight::InflightAnchor>,
}

/// Where the records go.
pub(super) enum Out {
    Files {
        slow: std::io::BufWriter<std::fs::File>,
        context: std::io::BufWriter<std::fs::File>,
    },
    Ring(Arc<Mutex<RecordRing>>),
}

impl Poller {
    pub(super) fn run(mut self, stop: &AtomicBool) -> Result<Poller, CaptureError> {
        let mut ticks = 0u32;
        loop {
            let last = stop.load(Ordering::SeqCst);
            self.drain()?;
            if last {
                if let Out::Files { slow, context } = &mut self.out {
                    slow.flush()
                        .and_then(|_| context.flush())
                        .map_err(|e| err("cannot write the capture")(e.to_string()))?;
                }
                return Ok(self);
            }
            ticks += 1;
            if self.adaptive && ticks.is_multiple_of(10) {
                self.update_thresholds();
            }
            if let Some(a) = &mut self.anchor {
                if ticks.is_multiple_of(super::inflight::CHECK_EVERY) {
                    a.reanchor();
                }
            }
            std::thread::sleep(POLL);
        }
    }

    fn drain(&mut self) -> Result<(), CaptureError> {
        while let Some(item) = self.records.next() {
            if item.len() < 4 {
                continue;
            }
            let kind = u16::from_le_bytes([item[0], item[1]]);
            let known = matches!(kind, REC_EVENT | REC_WAIT)
                || (kind == REC_SLOW && item.len() == SLOW_RECORD);
            if !known {
                continue;
            }
            match &mut self.out {
                Out::Files { slow, context } => {
                    let out = if kind == REC_SLOW { slow } else { context };
                    out.write_all(&item)
                        .map_err(|e| err("cannot write the capture")(e.to_string()))?;
                }
                Out::Ring(ring) => ring.lock().unwrap_or_else(|p| p.into_inner()).push(&item),
            }
        }
        Ok(())
    }

    fn update_thresholds(&mut self) {
        for slot in 0..NSLOT {
            for op in 0..NOP {
                let key = maps::latency_key(slot, op, maps::STAGE_TOTAL);
                let Ok(per_cpu) = self.latency.get(&key, 0) else {
                    continue;
                };
                let h = sum_hist(&per_cpu);
                if h.n < MIN_FOR_P99 {
                    continue;
                }
                let th = h.quantile_high(0.99).unwrap_or(0).max(MIN_SLOW_NS);
                let _ = self.threshold.set(slot * NOP + op, th, 0);
            }
        }
    }
}
