//! The workload's time: the operations the trace follows from begin to end
//! (the probe's marked operations when there are any, else every syscall,
//! io_uring request and fault on a file's page),
//! their count, their total time and its breakdown. Diagnosis takes a
//! cause's share of it; `diff` compares it between two runs.

use super::summary::{add_breakdown, Breakdown, OutliersSummary};

#[derive(Debug, Clone, Default)]
pub struct WorkloadTime {
    /// The operation kinds it sums, e.g. `probe read` or `syscall fsync`.
    pub kinds: Vec<String>,
    pub count: u64,
    pub latency_ns: u64,
    pub breakdown: Breakdown,
}

/// Major file faults from which a workload reads through mapped files:
/// a shell or fio paging in its code and data makes under 30
/// (healthy-files, the lab's fio runs), the lab's mmap readers 512 and
/// more.
pub const MAPPED_READER_MAJOR_FAULTS: u64 = 64;

/// The kinds of operations that make up the workload's time.
pub fn workload_kinds(o: &OutliersSummary) -> Vec<&str> {
    let of = |prefix: &str| -> Vec<&str> {
        o.totals
            .keys()
            .map(String::as_str)
            .filter(|k| k.starts_with(prefix))
            .collect()
    };
    let probes = of("probe ");
    if !probes.is_empty() {
        return probes;
    }
    // io_uring's requests are the operations; `io_uring_enter` only
    // carries them (its wait would count their time twice).
    let uring = of("io_uring ");
    let mut kinds = of("syscall ");
    if !uring.is_empty() {
        kinds.retain(|k| *k != "syscall io_uring_enter");
        kinds.extend(uring);
    }
    // Reads through a mapped file are faults on its pages; a program's
    // own page-ins as it starts (tens of major faults) are not its work.
    if o.faults.major >= MAPPED_READER_MAJOR_FAULTS {
        kinds.extend(of("fault file"));
    }
    kinds
}

/// The workload's time over `kinds` (all of them: `None`).
pub fn workload_time(o: &OutliersSummary, kinds: Option<&[&str]>) -> WorkloadTime {
    let all = workload_kinds(o);
    let mut w = WorkloadTime::default();
    for k in kinds.unwrap_or(&all) {
        let Some(t) = o.totals.get(*k) else { continue };
        w.kinds.push(k.to_string());
        w.count += t.count;
        w.latency_ns += t.latency_ns;
        add_breakdown(&mut w.breakdown, &t.breakdown);
    }
    w
}
