//! What the analysis reports: the breakdown of an operation's time, the
//! outliers with their explanation, the per-kind totals; and the
//! arithmetic on breakdowns (adding them up, percentages).

use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Serialize, Clone, Default, PartialEq)]
pub struct Breakdown {
    /// Running, as the scheduler events show.
    pub on_cpu_ns: u64,
    /// Time whose thread state the input did not record (no scheduler
    /// events for the thread): not "on CPU", not a wait: unknown.
    pub not_recorded_ns: u64,
    pub runnable_ns: u64,
    /// Blocked while the device held a request, by the request's class.
    pub device_ns: BTreeMap<&'static str, u64>,
    /// Blocked while requests waited to be issued.
    pub queued_ns: u64,
    /// Blocked while a thread checkpointed the journal (waiting for
    /// journal space); includes the checkpoint's own device time.
    pub journal_space_ns: u64,
    /// The part of `device_ns` outside checkpoints.
    pub device_only_ns: u64,
    /// Blocked while a journal commit ran with no request at the device.
    pub journal_ns: u64,
    /// Blocked in the kernel (uninterruptible, `D`) on anything else: a
    /// lock, a throttle, a page under writeback.
    pub other_wait_ns: u64,
    /// Asleep by choice (interruptible, `S`/`I`): a pipe, a futex, poll,
    /// a timer, or completions it polls for (io_getevents). Not the
    /// kernel holding it back: not a wait a finding can name.
    pub asleep_ns: u64,
    /// Off CPU while its CPU sat idle.
    pub cpu_idle_ns: u64,
}

#[derive(Debug, Serialize, Clone, Copy, PartialEq, Eq)]
pub struct PagesMissed {
    pub missed: u64,
    pub refaulted: u64,
}

#[derive(Debug, Serialize, Clone, PartialEq)]
pub struct Request {
    pub dev: String,
    pub sector: u64,
    pub bytes: u32,
    pub class: &'static str,
    /// Who queued it.
    pub comm: String,
    /// Issue → complete; absent when not seen.
    pub d2c_ns: Option<u64>,
    /// How long the operation waited while it was at the device.
    pub overlap_ns: u64,
}

#[derive(Debug, Serialize, Clone, PartialEq)]
pub struct Holder {
    pub pid: u32,
    pub comm: String,
    pub prio: i64,
    pub ns: u64,
}

#[derive(Debug, Serialize, Clone, PartialEq)]
pub struct Outlier {
    pub kind: String,
    pub pid: u32,
    pub comm: String,
    pub start_ns: u64,
    pub latency_ns: u64,
    pub breakdown: Breakdown,
    /// The same in percent of the latency (on_cpu, runnable, device,
    /// queued, journal, other_wait; add up to 100).
    pub percent: BTreeMap<&'static str, f64>,
    /// Percent of the off-CPU time during which the CPU was idle.
    pub cpu_idle_percent: f64,
    /// Who held the CPU while it was runnable, longest first.
    pub held_by: Vec<Holder>,
    /// The request it waited for longest.
    pub main_request: Option<Request>,
    /// The kernel stack it spent most blocked time in (`record --stacks`).
    pub blocked_in: Option<crate::analyze::stacks::BlockedIn>,
    /// A fault's file and offset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<super::FilePage>,
    /// Pages it added to the page cache (missed), and of them pages
    /// reclaim had evicted (refaulted): with the `cache` events only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache: Option<PagesMissed>,
    /// One line for a person.
    pub summary: String,
}

#[derive(Debug, Serialize, Default)]
pub struct OutliersSummary {
    pub top: usize,
    /// Per kind (`probe fsync`, `syscall fsync`, `ext4_sync_file`, …): the
    /// slowest, slowest first.
    pub by_kind: BTreeMap<String, Vec<Outlier>>,
    /// Per kind, every operation's time added up, with its breakdown.
    pub totals: BTreeMap<String, KindTotal>,
    /// The recorded command's processes and threads (sorted), when the
    /// trace followed its forks; `None`: not known.
    #[serde(skip)]
    pub workload: Option<Vec<u32>>,
    /// The io_uring requests (their slowest and totals are in `by_kind`
    /// and `totals` as `io_uring OP`).
    #[serde(serialize_with = "known_or_null")]
    pub io_uring: super::UringSummary,
    /// The user page faults (their slowest and totals are in `by_kind` and
    /// `totals` as `fault file` and `fault anon`).
    #[serde(serialize_with = "known_or_null")]
    pub faults: super::FaultSummary,
    /// The operations that re-read pages reclaim had evicted (in JSON as
    /// `cache.operations_refaulting`).
    #[serde(skip)]
    pub refaulting: crate::analyze::cache::Refaulting,
}

/// A summary of events a trace may not hold.
pub trait MaybeRecorded: Serialize {
    fn recorded(&self) -> bool;
}

/// A summary as it is, or, when its events were not recorded, with every
/// figure null but `recorded`: unknown, not 0.
fn known_or_null<T: MaybeRecorded, S: serde::Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    let mut json = serde_json::to_value(v).map_err(serde::ser::Error::custom)?;
    if !v.recorded() {
        if let Some(m) = json.as_object_mut() {
            for (k, x) in m.iter_mut() {
                if k != "recorded" {
                    *x = serde_json::Value::Null;
                }
            }
        }
    }
    json.serialize(s)
}

impl OutliersSummary {
    /// Whether thread `pid` belongs to the recorded command (`None`: the
    /// trace cannot tell).
    pub fn of_recorded_command(&self, pid: u32) -> Option<bool> {
        self.workload
            .as_ref()
            .map(|w| w.binary_search(&pid).is_ok())
    }
}

#[derive(Debug, Serialize, Clone, Default)]
pub struct KindTotal {
    pub count: u64,
    pub latency_ns: u64,
    pub breakdown: Breakdown,
    /// Of all the time these operations took, in percent.
    pub percent: BTreeMap<&'static str, f64>,
}

impl Breakdown {
    /// The parts that add up to an operation's time, by the names reports
    /// use: on_cpu, not_recorded, runnable, device (outside checkpoints),
    /// journal_space, queued, journal, other_wait, asleep.
    pub fn parts(&self) -> [(&'static str, u64); 9] {
        [
            ("on_cpu", self.on_cpu_ns),
            ("not_recorded", self.not_recorded_ns),
            ("runnable", self.runnable_ns),
            ("device", self.device_only_ns),
            ("journal_space", self.journal_space_ns),
            ("queued", self.queued_ns),
            ("journal", self.journal_ns),
            ("other_wait", self.other_wait_ns),
            ("asleep", self.asleep_ns),
        ]
    }
}

/// Where a part of the breakdown says the time went, for a sentence.
pub fn describe_part(name: &str) -> &'static str {
    match name {
        "device" => "at the device",
        "queued" => "queued for the device",
        "journal_space" => "waiting for journal space",
        "journal" => "waiting for a journal commit",
        "runnable" => "runnable, waiting for a CPU",
        "on_cpu" => "running on a CPU",
        "not_recorded" => "in a thread state not recorded (no scheduler events)",
        "asleep" => "asleep in an interruptible wait (a pipe, futex, poll, timer, or a user-space server's reply)",
        _ => "blocked in the kernel with no request at the device (a lock, a throttle)",
    }
}

/// Adds one operation's breakdown to its kind's totals.
pub fn add_breakdown(to: &mut Breakdown, b: &Breakdown) {
    to.on_cpu_ns += b.on_cpu_ns;
    to.not_recorded_ns += b.not_recorded_ns;
    to.runnable_ns += b.runnable_ns;
    for (k, v) in &b.device_ns {
        *to.device_ns.entry(k).or_default() += v;
    }
    to.queued_ns += b.queued_ns;
    to.journal_space_ns += b.journal_space_ns;
    to.device_only_ns += b.device_only_ns;
    to.journal_ns += b.journal_ns;
    to.other_wait_ns += b.other_wait_ns;
    to.asleep_ns += b.asleep_ns;
    to.cpu_idle_ns += b.cpu_idle_ns;
}

/// The parts of `latency` in percent, adding up to 100: on_cpu, runnable,
/// device (outside checkpoints), journal_space, queued, journal,
/// other_wait, asleep.
pub(super) fn percentages(b: &Breakdown, latency: u64) -> BTreeMap<&'static str, f64> {
    let pct = |x: u64| {
        if latency == 0 {
            0.0
        } else {
            (x as f64 * 1000.0 / latency as f64).round() / 10.0
        }
    };
    b.parts().into_iter().map(|(n, ns)| (n, pct(ns))).collect()
}
