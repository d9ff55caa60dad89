//! Rows for exports: one per completed request, per finished operation
//! and per thread-state stretch, sent while the analyses run so that an
//! exporter (Parquet tables, Perfetto tracks) writes them as they come and
//! memory stays flat. Nothing is sent unless an exporter asked.

pub use super::block::requests::RequestRow;
use super::outliers::Breakdown;
use crate::model::Comm;
use std::sync::mpsc::SyncSender;

/// An operation (a syscall or a probe operation) that ended, with its
/// breakdown (the same as an outlier's).
#[derive(Clone, Debug, PartialEq)]
pub struct OperationRow {
    pub kind: String,
    pub pid: u32,
    /// The thread's name when the operation ended.
    pub comm: String,
    pub start_ns: u64,
    pub latency_ns: u64,
    /// The device it waited on, if any.
    pub dev: Option<crate::model::Dev>,
    pub breakdown: Breakdown,
}

/// What a thread did for a stretch of time, as the scheduler events tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadState {
    Running,
    /// On a runqueue, waiting for a CPU.
    Runnable,
    /// Off CPU in this task state (`S`, `D`, `I`, ...).
    Off(char),
}

impl ThreadState {
    pub fn name(self) -> &'static str {
        match self {
            ThreadState::Running => "running",
            ThreadState::Runnable => "runnable",
            ThreadState::Off('D') => "blocked",
            ThreadState::Off('S') => "sleeping",
            ThreadState::Off('I') => "idle",
            ThreadState::Off(_) => "off-cpu",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadStateRow {
    pub pid: u32,
    pub comm: Comm,
    pub state: ThreadState,
    pub start_ns: u64,
    pub end_ns: u64,
    /// The CPU it ran or waited on, when known.
    pub cpu: Option<u32>,
}

/// Kernel work with a start and an end, as the analyses pair them.
#[derive(Clone, Debug, PartialEq)]
pub enum SpanRow {
    /// A jbd2 commit, start to end of one transaction.
    Commit {
        dev: crate::model::Dev,
        transaction: u64,
        start_ns: u64,
        end_ns: u64,
    },
    /// A hard irq handler, entry to exit.
    Irq {
        cpu: u32,
        name: String,
        start_ns: u64,
        end_ns: u64,
    },
    /// A softirq vector's handler, entry to exit.
    Softirq {
        cpu: u32,
        vector: &'static str,
        start_ns: u64,
        end_ns: u64,
    },
}

/// Where each kind of row goes; `None` sends nothing.
#[derive(Clone, Debug, Default)]
pub struct RowSinks {
    pub requests: Option<SyncSender<RequestRow>>,
    pub operations: Option<SyncSender<OperationRow>>,
    pub thread_states: Option<SyncSender<ThreadStateRow>>,
    pub spans: Option<SyncSender<SpanRow>>,
}

/// Sends `row`; a receiver that went away (an export that stopped on an
/// error) makes the sink `None`, and the analysis goes on.
pub fn send<T>(sink: &mut Option<SyncSender<T>>, row: impl FnOnce() -> T) {
    if let Some(s) = sink {
        if s.send(row()).is_err() {
            *sink = None;
        }
    }
}
