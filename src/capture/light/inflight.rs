//! Keeps the programs' count of requests in flight true to the kernel's.
//!
//! The programs count a request in flight from its issue to its
//! completion. Now and then the kernel traces a completion without running
//! the programs (and counts no recursion miss): that request would stay in
//! their count for good, and every later depth at issue would read one
//! more. When a device is idle (the kernel has nothing of it in flight at
//! two readings `CHECK_EVERY` polls apart, and the programs saw no issue
//! or completion from the first to the last), all the programs still
//! count in flight is such a leftover: it goes into `inflight_bias`, which
//! the programs take from every depth. (The programs see a completion
//! after the kernel has stopped counting its request in flight, by a
//! softirq's delay: one idle reading could take such a request for a
//! leftover; two readings apart cannot.) Each idle spell sets the bias
//! anew. A device never idle that long keeps what it had.

use super::maps::Counters;
use super::{err, CaptureError};
use aya::maps::{Array, MapData, PerCpuArray};
use std::sync::{Arc, Mutex};

/// The disks whose slots are re-anchored: (slot, kernel name).
pub(super) type Disks = Arc<Mutex<Vec<(u32, String)>>>;

/// What the programs count of one slot: the requests in flight by their
/// counts, and the counts that, with it, move when they see an issue or a
/// completion (equal readings: nothing seen in between).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Seen {
    pub in_flight: i64,
    pub moves: (u64, u64),
}

/// Polls (of the poller's 100 ms) between two readings of a device.
pub(super) const CHECK_EVERY: u32 = 2;

/// What one reading of a device shows: the programs' counts when the
/// kernel had nothing in flight and they did not move while its count was
/// read (`first`, `kernel`, `second`); None otherwise.
pub(super) fn idle_reading(first: Seen, kernel: u64, second: Seen) -> Option<Seen> {
    (kernel == 0 && first == second).then_some(first)
}

/// The bias from two consecutive readings: the leftover in flight when
/// both found the device idle and nothing seen in between.
pub(super) fn idle_bias(before: Option<Seen>, now: Option<Seen>) -> Option<i64> {
    match (before, now) {
        (Some(a), Some(b)) if a == b => Some(b.in_flight),
        _ => None,
    }
}

pub(super) struct InflightAnchor {
    counters: PerCpuArray<MapData, Counters>,
    /// The per-request state accounting's shared count (None: the stamps
    /// accounting, which sums the per-CPU counters).
    shared: Option<Array<MapData, i64>>,
    bias: Array<MapData, i64>,
    disks: Disks,
    /// The CPUs whose counters the programs sum for a depth.
    depth_cpus: usize,
    /// Each slot's last reading, if it found the device idle.
    idle: std::collections::HashMap<u32, Seen>,
}

impl InflightAnchor {
    pub(super) fn new(
        counters: aya::maps::Map,
        shared: Option<aya::maps::Map>,
        bias: aya::maps::Map,
        disks: Disks,
        depth_cpus: usize,
    ) -> Result<InflightAnchor, CaptureError> {
        Ok(InflightAnchor {
            counters: PerCpuArray::try_from(counters)
                .map_err(|e| err("counters map")(e.to_string()))?,
            shared: shared
                .map(Array::try_from)
                .transpose()
                .map_err(|e| err("inflight map")(e.to_string()))?,
            bias: Array::try_from(bias).map_err(|e| err("inflight_bias map")(e.to_string()))?,
            disks,
            depth_cpus,
            idle: Default::default(),
        })
    }

    /// Reads every disk once; re-anchors the bias of those idle since the
    /// last reading.
    pub(super) fn reanchor(&mut self) {
        let disks = self.disks.lock().map(|d| d.clone()).unwrap_or_default();
        for (slot, name) in disks {
            let now = self.idle_now(slot, &name);
            let before = match now {
                Some(n) => self.idle.insert(slot, n),
                None => self.idle.remove(&slot),
            };
            if let Some(bias) = idle_bias(before, now) {
                if self.bias.get(&slot, 0).ok() != Some(bias) {
                    let _ = self.bias.set(slot, bias, 0);
                }
            }
        }
    }

    /// The programs' counts of a disk the kernel has nothing in flight of
    /// (and keeps the count of: without I/O statistics it counts nothing).
    fn idle_now(&self, slot: u32, name: &str) -> Option<Seen> {
        let first = self.seen(slot)?;
        let kernel = kernel_in_flight(name)?;
        if kernel != 0 || !kernel_counts_in_flight(name) {
            return None;
        }
        idle_reading(first, kernel, self.seen(slot)?)
    }

    fn seen(&self, slot: u32) -> Option<Seen> {
        let per_cpu = self.counters.get(&slot, 0).ok()?;
        let (mut issued, mut retired, mut in_flight, mut ios) = (0u64, 0u64, 0i64, 0u64);
        for (cpu, c) in per_cpu.iter().enumerate() {
            issued = issued.wrapping_add(c.issued);
            retired = retired.wrapping_add(c.retired);
            ios = ios.wrapping_add(c.ios.iter().fold(0u64, |a, n| a.wrapping_add(*n)));
            if cpu < self.depth_cpus {
                in_flight = in_flight.wrapping_add(c.issued.wrapping_sub(c.retired) as i64);
            }
        }
        Some(match &self.shared {
            // The shared count itself moves at every issue and seen
            // completion; with the completions counted it cannot stay put
            // across an issue and a completion both.
            Some(shared) => Seen {
                in_flight: shared.get(&slot, 0).ok()?,
                moves: (0, ios),
            },
            None => Seen {
                in_flight,
                moves: (issued, retired),
            },
        })
    }
}

/// Whether the kernel keeps I/O statistics for the disk (`queue/iostats`):
/// without them its in-flight count stays 0.
fn kernel_counts_in_flight(name: &str) -> bool {
    std::fs::read_to_string(format!("/sys/block/{name}/queue/iostats"))
        .is_ok_and(|s| s.trim() == "1")
}

/// The disk's requests in flight as the kernel counts them
/// (`/sys/block/NAME/inflight`: reads and writes).
fn kernel_in_flight(name: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/sys/block/{name}/inflight")).ok()?;
    let mut n = 0u64;
    for f in s.split_whitespace() {
        n = n.checked_add(f.parse().ok()?)?;
    }
    Some(n)
}

/// A second handle on one of the programs' maps (the poller thread's own).
pub(super) fn map_copy(map: &aya::maps::Map, what: &str) -> Result<aya::maps::Map, CaptureError> {
    use aya::maps::Map;
    use std::os::fd::AsFd;
    let data = match map {
        Map::PerCpuArray(d) | Map::Array(d) => d,
        _ => return Err(err(what)("not an array".into())),
    };
    let fd = data
        .fd()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| err(what)(e.to_string()))?;
    let data = MapData::from_fd(fd).map_err(|e| err(what)(e.to_string()))?;
    Ok(match map {
        Map::PerCpuArray(_) => Map::PerCpuArray(data),
        _ => Map::Array(data),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(in_flight: i64, issued: u64, retired: u64) -> Seen {
        Seen {
            in_flight,
            moves: (issued, retired),
        }
    }

    #[test]
    fn two_idle_readings_set_the_bias_to_what_the_programs_still_count() {
        let idle = |s: Seen| idle_reading(s, 0, s);
        // One completion never seen: the programs count one in flight.
        let left = seen(1, 10, 9);
        assert_eq!(idle_bias(idle(left), idle(left)), Some(1));
        // Nothing left over: the bias goes back to 0 (a wrong one mends).
        let none = seen(0, 10, 10);
        assert_eq!(idle_bias(idle(none), idle(none)), Some(0));
        // A completion counted twice: negative.
        let over = seen(-1, 9, 10);
        assert_eq!(idle_bias(idle(over), idle(over)), Some(-1));
    }

    #[test]
    fn one_idle_reading_a_busy_device_or_a_moving_count_says_nothing() {
        let idle = |s: Seen| idle_reading(s, 0, s);
        // The kernel has requests in flight.
        assert_eq!(idle_reading(seen(3, 10, 7), 2, seen(3, 10, 7)), None);
        // An issue while the kernel's count was read.
        assert_eq!(idle_reading(seen(0, 10, 10), 0, seen(1, 11, 10)), None);
        // An issue and a completion: the difference is the same, the
        // counts are not.
        assert_eq!(idle_reading(seen(0, 10, 10), 0, seen(0, 11, 11)), None);
        // One idle reading alone: a completion the kernel has ended but
        // the programs not yet seen looks like a leftover.
        assert_eq!(idle_bias(None, idle(seen(1, 10, 9))), None);
        // Idle at both readings, but requests came and went in between.
        assert_eq!(
            idle_bias(idle(seen(0, 10, 10)), idle(seen(0, 12, 12))),
            None
        );
    }
}
