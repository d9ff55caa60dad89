//! Every family the scrape serves, declared once: its name, type and help.

use super::exposition::{Family, Kind};

pub const BPF_PROGRAM_MISSED_TOTAL: Family = Family {
    name: "iosleuth_bpf_program_missed_total",
    kind: Kind::Counter,
    help: "Events a BPF program was not run for: it was already running on that CPU when an interrupt raised its event again (the kernel's recursion_misses). A block program's misses are requests missing from the latency and cgroup figures (the request counts are the kernel's).",
};

pub const BPF_PROGRAM_RUNS_TOTAL: Family = Family {
    name: "iosleuth_bpf_program_runs_total",
    kind: Kind::Counter,
    help: "Runs of a BPF program, while the kernel counts them (kernel.bpf_stats_enabled).",
};

pub const BPF_PROGRAM_RUN_SECONDS_TOTAL: Family = Family {
    name: "iosleuth_bpf_program_run_seconds_total",
    kind: Kind::Counter,
    help: "Time a BPF program ran, while the kernel counts it (kernel.bpf_stats_enabled).",
};

pub const IO_URING_REQUEST_SECONDS: Family = Family {
    name: "iosleuth_io_uring_request_seconds",
    kind: Kind::Histogram,
    help: "Time from an io_uring request's submission to its completion queue entry, of requests completed whose submission was seen.",
};

pub const IO_URING_REQUESTS_TOTAL: Family = Family {
    name: "iosleuth_io_uring_requests_total",
    kind: Kind::Counter,
    help: "io_uring requests completed (their last completion queue entry), timed or not.",
};

pub const IO_URING_UNTIMED_REQUESTS_TOTAL: Family = Family {
    name: "iosleuth_io_uring_untimed_requests_total",
    kind: Kind::Counter,
    help: "io_uring requests completed whose submission was not seen (submitted before the programs were attached, or no room for their state): not in the histogram.",
};

pub const IO_URING_PUNTED_TOTAL: Family = Family {
    name: "iosleuth_io_uring_punted_total",
    kind: Kind::Counter,
    help: "io_uring requests handed to an io-wq worker thread: they could not be issued without blocking.",
};

pub const IO_URING_ERRORS_TOTAL: Family = Family {
    name: "iosleuth_io_uring_errors_total",
    kind: Kind::Counter,
    help: "io_uring completion queue entries with a negative result.",
};

pub const BLOCK_QUEUED_SECONDS: Family = Family {
    name: "iosleuth_block_queued_seconds",
    kind: Kind::Histogram,
    help: "Time from a request's allocation to its issue to the driver (blktrace's G to D), of requests completed.",
};

pub const BLOCK_DEVICE_SECONDS: Family = Family {
    name: "iosleuth_block_device_seconds",
    kind: Kind::Histogram,
    help: "Time from a request's issue to its completion (D2C), of requests completed.",
};

pub const BLOCK_REQUEST_SECONDS: Family = Family {
    name: "iosleuth_block_request_seconds",
    kind: Kind::Histogram,
    help: "Time from a request's allocation to its completion, of requests completed.",
};

pub const BLOCK_REQUESTS_TOTAL: Family = Family {
    name: "iosleuth_block_requests_total",
    kind: Kind::Counter,
    help: "Requests completed, as the kernel counts them (its diskstats, since the daemon started; a request completed in parts counts once).",
};

pub const BLOCK_BYTES_TOTAL: Family = Family {
    name: "iosleuth_block_bytes_total",
    kind: Kind::Counter,
    help: "Bytes completed, as the kernel counts them (its diskstats).",
};

pub const BLOCK_UNSEEN_REQUESTS: Family = Family {
    name: "iosleuth_block_unseen_requests",
    kind: Kind::Gauge,
    help: "Requests the kernel counted (its diskstats, as iosleuth_block_requests_total) since the daemon started that the BPF programs did not see: in no histogram and no cgroup's figures. The kernel now and then traces a completion without running the BPF program on block_rq_complete (about one in 65,000 alone), more often while another tracer (a second watch, record --light, bpftrace, perf or ftrace) is on it.",
};

pub const BLOCK_MERGES_TOTAL: Family = Family {
    name: "iosleuth_block_merges_total",
    kind: Kind::Counter,
    help: "Merges: a bio into a request's back or front, or two requests.",
};

pub const BLOCK_SPLITS_TOTAL: Family = Family {
    name: "iosleuth_block_splits_total",
    kind: Kind::Counter,
    help: "Bios split to fit the device's limits.",
};

pub const BLOCK_REQUEUES_TOTAL: Family = Family {
    name: "iosleuth_block_requeues_total",
    kind: Kind::Counter,
    help: "Requests the driver gave back to be issued again.",
};

pub const BLOCK_ERRORS_TOTAL: Family = Family {
    name: "iosleuth_block_errors_total",
    kind: Kind::Counter,
    help: "Requests completed with an error.",
};

pub const BLOCK_PARTIAL_COMPLETIONS_TOTAL: Family = Family {
    name: "iosleuth_block_partial_completions_total",
    kind: Kind::Counter,
    help: "Completions of part of a request.",
};

pub const BLOCK_SEQUENTIAL_REQUESTS_TOTAL: Family = Family {
    name: "iosleuth_block_sequential_requests_total",
    kind: Kind::Counter,
    help: "Requests that began where the previous one issued on the same CPU to the same device ended.",
};

pub const CGROUP_UNCOUNTED_REQUESTS_TOTAL: Family = Family {
    name: "iosleuth_cgroup_uncounted_requests_total",
    kind: Kind::Counter,
    help: "Completions in the device's figures but in no cgroup's: the kernel's cgroup table was full.",
};

pub const BLOCK_THROTTLED_BIOS_TOTAL: Family = Family {
    name: "iosleuth_block_throttled_bios_total",
    kind: Kind::Counter,
    help: "Bios held back by a cgroup's I/O limit (blk-throttle), counted as its dispatch work submits them.",
};

pub const BLOCK_THROTTLED_BYTES_TOTAL: Family = Family {
    name: "iosleuth_block_throttled_bytes_total",
    kind: Kind::Counter,
    help: "Bytes of those bios.",
};

pub const BLOCK_UNTIMED_REQUESTS_TOTAL: Family = Family {
    name: "iosleuth_block_untimed_requests_total",
    kind: Kind::Counter,
    help: "Requests completed but not in the latency histograms: issued before the programs were attached, whose state did not fit the kernel's request table, or (never_issued) ended without reaching the driver, as an fsync's empty write is, timed in request_seconds only.",
};

pub const SLOW_REQUESTS_TOTAL: Family = Family {
    name: "iosleuth_slow_requests_total",
    kind: Kind::Counter,
    help: "Slow requests (at least the running p99 of their device and operation): kept whole, over the per-second cap, or lost to a full ring buffer.",
};

pub const SCHED_RUNQUEUE_STALLS_TOTAL: Family = Family {
    name: "iosleuth_sched_runqueue_stalls_total",
    kind: Kind::Counter,
    help: "Threads that waited runnable at least iosleuth_sched_runqueue_stall_threshold_seconds: kept, or lost to a full ring buffer.",
};

pub const SCHED_RUNQUEUE_STALL_THRESHOLD_SECONDS: Family = Family {
    name: "iosleuth_sched_runqueue_stall_threshold_seconds",
    kind: Kind::Gauge,
    help: "The runnable wait from which a thread counts as stalled.",
};

pub const KEPT_EVENTS_TOTAL: Family = Family {
    name: "iosleuth_kept_events_total",
    kind: Kind::Counter,
    help: "Events the flight recorder keeps whole (the journal's commits and checkpoints, balance_dirty_pages pauses, wbt steps): kept, or lost to a full ring buffer.",
};

pub const CPU_HARDIRQ_SECONDS_TOTAL: Family = Family {
    name: "iosleuth_cpu_hardirq_seconds_total",
    kind: Kind::Counter,
    help: "Time in hard interrupt handlers, by CPU.",
};

pub const CPU_SOFTIRQ_SECONDS_TOTAL: Family = Family {
    name: "iosleuth_cpu_softirq_seconds_total",
    kind: Kind::Counter,
    help: "Time in soft interrupts, by CPU and vector.",
};

pub const RING_RECORDS: Family = Family {
    name: "iosleuth_ring_records",
    kind: Kind::Gauge,
    help: "Slow requests and flight-recorder records kept in memory for the next trigger.",
};

pub const RING_BYTES: Family = Family {
    name: "iosleuth_ring_bytes",
    kind: Kind::Gauge,
    help: "Bytes of the records kept in memory.",
};

pub const RING_EVICTED_TOTAL: Family = Family {
    name: "iosleuth_ring_evicted_total",
    kind: Kind::Counter,
    help: "Records pushed out of memory by its size bound before their time.",
};

pub const TRIGGERS_TOTAL: Family = Family {
    name: "iosleuth_triggers_total",
    kind: Kind::Counter,
    help: "Triggers that fired, by reason: acted on (a capture kept) or not (rate limit, a capture already running).",
};

pub const CAPTURES_KEPT: Family = Family {
    name: "iosleuth_captures_kept",
    kind: Kind::Gauge,
    help: "Captures kept on disk (each with its diagnosis).",
};

pub const CAPTURES_BYTES: Family = Family {
    name: "iosleuth_captures_bytes",
    kind: Kind::Gauge,
    help: "Bytes of the captures kept on disk.",
};

pub const FINDING: Family = Family {
    name: "iosleuth_finding",
    kind: Kind::Gauge,
    help: "A finding of the last diagnosis (1 while it holds).",
};

pub const NOT_WATCHED: Family = Family {
    name: "iosleuth_not_watched",
    kind: Kind::Gauge,
    help: "What this daemon cannot see on this machine (1 each): its figures are unknown, not zero. what: bpf_run_time, the programs' runs and run time (the kernel keeps them only while kernel.bpf_stats_enabled is 1); runqueue_off, runqueue waits not watched (--runqueue off); runqueue_auto, the scheduler hooks detached by --runqueue auto while they would cost over a point of CPU; runqueue_unsupported, runqueue waits not watched because the kernel refused the scheduler's program (it reads the scheduler's sched_info stamps and the runqueue clock: CONFIG_SCHED_INFO, CONFIG_FAIR_GROUP_SCHED); irq_off, hard and soft interrupt time per CPU not watched (--irq off, the default: their hooks read the clock twice per interrupt); throttled_bios, no blk-throttle dispatch work in /proc/kallsyms to count held bios by; queue_depth_past_cpu_limit, more than 256 CPUs: the queue depth at issue adds up the requests in flight of the first 256; event:SYSTEM:EVENT, a tracepoint this kernel lacks; kept_events, none of the flight recorder's kept events (the journal's, balance_dirty_pages, wbt) could be attached (no tracefs).",
};

pub const BUILD_INFO: Family = Family {
    name: "iosleuth_build_info",
    kind: Kind::Gauge,
    help: "The iosleuth that serves these metrics.",
};

pub const PROCESS_CPU_SECONDS_TOTAL: Family = Family {
    name: "process_cpu_seconds_total",
    kind: Kind::Counter,
    help: "Total user and system CPU time spent in seconds.",
};

pub const PROCESS_RESIDENT_MEMORY_BYTES: Family = Family {
    name: "process_resident_memory_bytes",
    kind: Kind::Gauge,
    help: "Resident memory size in bytes.",
};

pub const PROCESS_VIRTUAL_MEMORY_BYTES: Family = Family {
    name: "process_virtual_memory_bytes",
    kind: Kind::Gauge,
    help: "Virtual memory size in bytes.",
};

pub const PROCESS_OPEN_FDS: Family = Family {
    name: "process_open_fds",
    kind: Kind::Gauge,
    help: "Number of open file descriptors.",
};

pub const PROCESS_START_TIME_SECONDS: Family = Family {
    name: "process_start_time_seconds",
    kind: Kind::Gauge,
    help: "Start time of the process since unix epoch in seconds.",
};

pub const CGROUP_REQUESTS_TOTAL: Family = Family {
    name: "iosleuth_cgroup_requests_total",
    kind: Kind::Counter,
    help: "Requests completed, by the cgroup they were charged to (\"other\": the cgroups without their own series).",
};

pub const CGROUP_BYTES_TOTAL: Family = Family {
    name: "iosleuth_cgroup_bytes_total",
    kind: Kind::Counter,
    help: "Bytes completed, by the cgroup they were charged to.",
};

pub const CGROUP_REQUEST_SECONDS: Family = Family {
    name: "iosleuth_cgroup_request_seconds",
    kind: Kind::Histogram,
    help: "Time from a request's allocation to its completion, by the cgroup it was charged to (counted under these bounds in the kernel: exact).",
};

#[cfg(test)]
/// Every family above (the tests check docs/WATCH.md's table against it).
pub const ALL: &[&Family] = &[
    &BPF_PROGRAM_MISSED_TOTAL,
    &BPF_PROGRAM_RUNS_TOTAL,
    &BPF_PROGRAM_RUN_SECONDS_TOTAL,
    &IO_URING_REQUEST_SECONDS,
    &IO_URING_REQUESTS_TOTAL,
    &IO_URING_UNTIMED_REQUESTS_TOTAL,
    &IO_URING_PUNTED_TOTAL,
    &IO_URING_ERRORS_TOTAL,
    &BLOCK_QUEUED_SECONDS,
    &BLOCK_DEVICE_SECONDS,
    &BLOCK_REQUEST_SECONDS,
    &BLOCK_REQUESTS_TOTAL,
    &BLOCK_BYTES_TOTAL,
    &BLOCK_UNSEEN_REQUESTS,
    &BLOCK_MERGES_TOTAL,
    &BLOCK_SPLITS_TOTAL,
    &BLOCK_REQUEUES_TOTAL,
    &BLOCK_ERRORS_TOTAL,
    &BLOCK_PARTIAL_COMPLETIONS_TOTAL,
    &BLOCK_SEQUENTIAL_REQUESTS_TOTAL,
    &CGROUP_UNCOUNTED_REQUESTS_TOTAL,
    &BLOCK_THROTTLED_BIOS_TOTAL,
    &BLOCK_THROTTLED_BYTES_TOTAL,
    &BLOCK_UNTIMED_REQUESTS_TOTAL,
    &SLOW_REQUESTS_TOTAL,
    &SCHED_RUNQUEUE_STALLS_TOTAL,
    &SCHED_RUNQUEUE_STALL_THRESHOLD_SECONDS,
    &KEPT_EVENTS_TOTAL,
    &CPU_HARDIRQ_SECONDS_TOTAL,
    &CPU_SOFTIRQ_SECONDS_TOTAL,
    &RING_RECORDS,
    &RING_BYTES,
    &RING_EVICTED_TOTAL,
    &TRIGGERS_TOTAL,
    &CAPTURES_KEPT,
    &CAPTURES_BYTES,
    &FINDING,
    &NOT_WATCHED,
    &BUILD_INFO,
    &PROCESS_CPU_SECONDS_TOTAL,
    &PROCESS_RESIDENT_MEMORY_BYTES,
    &PROCESS_VIRTUAL_MEMORY_BYTES,
    &PROCESS_OPEN_FDS,
    &PROCESS_START_TIME_SECONDS,
    &CGROUP_REQUESTS_TOTAL,
    &CGROUP_BYTES_TOTAL,
    &CGROUP_REQUEST_SECONDS,
];
