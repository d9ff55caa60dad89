//! The catalog: one module per rule, in DESIGN.md's order. Each rule module
//! holds its `RULE` (id, what it looks for, its check), its thresholds as
//! named constants and its unit tests; `helpers` holds what they share,
//! including every read of the system snapshot, and `testkit` what their
//! tests share.

mod helpers;
#[cfg(test)]
pub(crate) mod testkit;

mod cgroup_io_throttle;
mod cpu_contention;
mod device_latency_spike;
mod dirty_throttling;
mod io_uring_punted;
mod journal_space_stall;
pub(crate) use journal_space_stall::tried_journal_kib;
mod merges_disabled;
mod page_cache_thrashing;
mod queue_saturation;
mod readahead_small;
mod request_splitting;
mod rt_starvation;
mod scheduler_overhead;
mod sync_write_amplification;
mod wbt_throttling;

use super::Rule;

pub(super) use helpers::{
    cpu_holders, holders_text, slow_operations, workload_ops, worth_naming, Slow,
};

pub static CATALOG: &[Rule] = &[
    merges_disabled::RULE,
    request_splitting::RULE,
    journal_space_stall::RULE,
    dirty_throttling::RULE,
    device_latency_spike::RULE,
    rt_starvation::RULE,
    cpu_contention::RULE,
    wbt_throttling::RULE,
    cgroup_io_throttle::RULE,
    queue_saturation::RULE,
    scheduler_overhead::RULE,
    readahead_small::RULE,
    sync_write_amplification::RULE,
    page_cache_thrashing::RULE,
    io_uring_punted::RULE,
];

#[cfg(test)]
mod tests {
    #[test]
    fn the_catalog_lists_designs_ids_in_its_order() {
        let ids: Vec<&str> = super::CATALOG.iter().map(|r| r.id).collect();
        assert_eq!(
            ids,
            [
                "merges_disabled",
                "request_splitting",
                "journal_space_stall",
                "dirty_throttling",
                "device_latency_spike",
                "rt_starvation",
                "cpu_contention",
                "wbt_throttling",
                "cgroup_io_throttle",
                "queue_saturation",
                "scheduler_overhead",
                "readahead_small",
                "sync_write_amplification",
                "page_cache_thrashing",
                "io_uring_punted",
            ]
        );
    }
}
