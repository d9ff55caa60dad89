//! The recorded command's processes and threads, followed from its root
//! through the forks the trace holds: only their calls and requests are
//! the workload's (not the shell that started it, a compiler beside it, a
//! FUSE server). io_uring's kernel threads (`iou-sqp-PID`, `iou-wrk-PID`)
//! are made without a fork event and named after the task they work for.

use crate::model::tracepoint::Field;
use crate::model::TraceEvent;
use rustc_hash::FxHashSet;

/// `None` inside: the command is not known, and every thread counts.
#[derive(Default)]
pub struct RecordedCommand(Option<FxHashSet<u32>>);

impl RecordedCommand {
    pub fn rooted_at(root: Option<u32>) -> Self {
        RecordedCommand(root.map(|r| std::iter::once(r).collect()))
    }

    pub fn known(&self) -> bool {
        self.0.is_some()
    }

    /// A `sched_process_fork`: the child of one of its threads is its own.
    pub fn fork(&mut self, e: &TraceEvent) {
        let Some(w) = &mut self.0 else { return };
        let parent = e.fields.int(Field::ParentPid).unwrap_or(-1);
        if u32::try_from(parent).is_ok_and(|p| w.contains(&p)) {
            if let Some(child) = e.fields.int(Field::ChildPid) {
                w.insert(child as u32);
            }
        }
    }

    /// Whether thread `pid` is the command's (always, when not known).
    pub fn holds(&self, pid: u32) -> bool {
        self.0.as_ref().is_none_or(|w| w.contains(&pid))
    }

    /// [`Self::holds`], also for an io_uring kernel thread that works for
    /// one of its threads (its name, `comm`, asked only then).
    pub fn holds_io_thread(&self, pid: u32, comm: impl FnOnce() -> String) -> bool {
        self.holds(pid) || io_thread_of(&comm()).is_some_and(|p| self.holds(p))
    }

    /// Its threads, sorted; `None`: not known.
    pub fn threads(self) -> Option<Vec<u32>> {
        self.0.map(|w| {
            let mut v: Vec<u32> = w.into_iter().collect();
            v.sort_unstable();
            v
        })
    }
}

/// The task an io_uring kernel thread works for: `iou-sqp-6689` (SQPOLL)
/// and `iou-wrk-6689` (io-wq).
fn io_thread_of(comm: &str) -> Option<u32> {
    comm.strip_prefix("iou-sqp-")
        .or_else(|| comm.strip_prefix("iou-wrk-"))?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::io_thread_of;

    #[test]
    fn io_threads_name_the_task_they_work_for() {
        assert_eq!(io_thread_of("iou-sqp-6689"), Some(6689));
        assert_eq!(io_thread_of("iou-wrk-12"), Some(12));
        assert_eq!(io_thread_of("fio"), None);
        assert_eq!(io_thread_of("iou-sqp-x"), None);
    }
}
