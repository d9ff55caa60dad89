//! The light programs' counters, each set declared once: the struct (laid
//! out as bpf/light.h's, so the capture reads it straight from the maps),
//! its window between two readings, its sum over CPUs, and its rows by
//! name for the outputs. Adding a counter is one line here and one in
//! light.h; the ABI test checks that the two agree, and the Prometheus
//! test that every row is exposed or said not to be.

use serde::{Deserialize, Serialize};

macro_rules! counters {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$field_meta:meta])* $field:ident, )*
        }
    ) => {
        $(#[$meta])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
        pub struct $name {
            $( $(#[$field_meta])* pub $field: u64, )*
        }

        impl $name {
            /// The counters' names, in light.h's order.
            pub const NAMES: &'static [&'static str] = &[$(stringify!($field)),*];

            /// What was counted since `before` (an earlier reading); a
            /// counter that went back (the reading raced an update)
            /// counted 0.
            pub fn since(&self, before: &Self) -> Self {
                Self { $( $field: self.$field.saturating_sub(before.$field), )* }
            }

            /// Adds another reading (another CPU's) to this one.
            pub fn add(&mut self, other: &Self) {
                $( self.$field = self.$field.saturating_add(other.$field); )*
            }

            /// The sum of several readings.
            pub fn sum<'a>(all: impl IntoIterator<Item = &'a Self>) -> Self {
                let mut total = Self::default();
                for one in all {
                    total.add(one);
                }
                total
            }

            /// Each counter by name, in light.h's order.
            pub fn rows(&self) -> impl Iterator<Item = (&'static str, u64)> {
                [$( (stringify!($field), self.$field), )*].into_iter()
            }

            pub fn is_zero(&self) -> bool {
                *self == Self::default()
            }
        }
    };
}

counters! {
    /// What the programs counted of a device besides its requests (light.h's
    /// `struct counters` after `ios` and `bytes`).
    pub struct LightCounters {
        back_merges,
        front_merges,
        rq_merges,
        splits,
        requeues,
        errors,
        partial,
        /// Completions of requests issued before the programs were attached.
        no_state,
        /// Issues whose state did not fit the kernel's request map.
        state_full,
        slow_sent,
        /// Slow requests over the per-second cap: counted, not sent.
        slow_capped,
        /// Slow requests the ring buffer had no room for.
        ring_full,
        /// Requests that began where the previous one (issued on the same
        /// CPU to the same device) ended.
        #[serde(default)]
        seq_requests,
        /// Completions whose stages came from the request's own timestamps
        /// (the stamps accounting), not from per-request state.
        #[serde(default)]
        by_stamps,
        /// Completions whose cgroup found no room in the kernel's map: in
        /// the device's figures, not in any cgroup's.
        #[serde(default)]
        cgroup_full,
        /// Bios held back by a cgroup's I/O limit, and their bytes (counted
        /// as blk-throttle's dispatch work submitted them again).
        #[serde(default)]
        throttled,
        #[serde(default)]
        throttled_bytes,
    }
}

counters! {
    /// What one CPU's scheduler, flight recorder and hard interrupts
    /// counted (light.h's `struct cpu_stats` before the softirq arrays).
    pub struct CpuCounters {
        switches,
        wakeups,
        /// Runqueue waits of at least `wait_min_ns`: sent, and lost to a
        /// full ring buffer.
        long_waits,
        waits_lost,
        /// Events the flight recorder kept whole: sent, and lost.
        events,
        events_lost,
        hardirqs,
        hardirq_ns,
    }
}

counters! {
    /// What the programs counted of one group of io_uring requests
    /// (light.h's `struct uring_stats`).
    pub struct UringCounters {
        /// Requests completed (their last completion queue entry).
        requests,
        /// Completion entries of multishot requests before their last.
        more,
        /// Requests handed to an io-wq worker: they could not be issued
        /// without blocking.
        punted,
        /// Completed requests whose submission was not seen (submitted
        /// before the programs were attached, or no room for their state):
        /// not timed.
        untimed,
        /// Completion entries with a negative result.
        errors,
        /// Submissions whose state found no room.
        state_full,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_a_sum_and_the_rows_cover_every_counter() {
        let before = UringCounters {
            requests: 5,
            errors: 9,
            ..Default::default()
        };
        let after = UringCounters {
            requests: 8,
            more: 2,
            errors: 7,
            ..Default::default()
        };
        let d = after.since(&before);
        assert_eq!((d.requests, d.more, d.errors), (3, 2, 0));
        let total = UringCounters::sum([&before, &after, &d]);
        assert_eq!((total.requests, total.more, total.errors), (16, 4, 16));
        let rows: Vec<_> = after.rows().collect();
        assert_eq!(rows.len(), UringCounters::NAMES.len());
        assert_eq!(rows[0], ("requests", 8));
        assert_eq!(rows[4], ("errors", 7));
        // Laid out as light.h's: one u64 per name, in order.
        assert_eq!(
            std::mem::size_of::<LightCounters>(),
            8 * LightCounters::NAMES.len()
        );
        assert_eq!(std::mem::offset_of!(CpuCounters, long_waits), 16);
        let json = serde_json::to_value(d).unwrap();
        assert_eq!(json["more"], 2);
        assert!(UringCounters::default().is_zero() && !d.is_zero());
    }
}
