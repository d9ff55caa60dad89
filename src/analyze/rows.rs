//! Rows for exports: one per completed request, per finished operation
//! and per thread-state stretch, sent while the analyses run so that an
//! exporter (Parquet tables, Perfetto tracks) writes them as they come and
//! memory stays flat. Nothing is sent unless an exporter asked.

pub use super::block::requests::RequestRow;
use super::outliers::Breakdown;
use crate::model::Comm;
use rustc_hash::FxHashMap;
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, RwLock};
use std::thread::{Scope, ScopedJoinHandle};

/// An operation (a syscall or a probe operation) that ended, with its
/// breakdown (the same as an outlier's).
#[derive(Clone, Debug, PartialEq)]
pub struct OperationRow {
    /// Numbered as operations begin, in the capture.
    pub id: u64,
    /// The operation of its thread that encloses it (a syscall's probe
    /// operation, an `ext4_sync_file`'s fsync), if one was open.
    pub parent: Option<u64>,
    /// The requests (`RequestRow::id`) it was blocked on while they were
    /// at the device, with how long, ns.
    pub waited_for: Vec<(u64, u64)>,
    pub kind: String,
    /// The thread (its id, as the kernel's `pid`).
    pub pid: u32,
    /// Its process (thread group id), as the trace told it
    /// ([`Processes`]); `None` when the trace did not.
    pub process: Option<u32>,
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
    /// The thread (its id, as the kernel's `pid`).
    pub pid: u32,
    /// Its process (thread group id), as the trace told it
    /// ([`Processes`]); `None` when the trace did not.
    pub process: Option<u32>,
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

/// Each thread's process (thread group id) as the trace tells it
/// ([`crate::model::Event::ThreadGroup`]): the analysis learns it, and
/// names the process of each row it sends by it then. Shared (a clone is
/// the same map) by the analyses that send rows of threads.
#[derive(Clone, Debug, Default)]
pub struct Processes(Arc<RwLock<FxHashMap<u32, u32>>>);

impl Processes {
    /// Thread `tid` is of process `tgid` (from now on).
    pub fn learn(&self, tid: u32, tgid: u32) {
        let mut map = self.0.write().unwrap_or_else(|e| e.into_inner());
        map.insert(tid, tgid);
    }

    /// The process of thread `tid`, when the trace told it.
    pub fn of(&self, tid: u32) -> Option<u32> {
        let map = self.0.read().unwrap_or_else(|e| e.into_inner());
        map.get(&tid).copied()
    }
}

/// Where each kind of row goes; `None` sends nothing.
#[derive(Clone, Debug, Default)]
pub struct RowSinks {
    pub requests: Option<SyncSender<RequestRow>>,
    pub operations: Option<SyncSender<OperationRow>>,
    pub thread_states: Option<SyncSender<ThreadStateRow>>,
    pub spans: Option<SyncSender<SpanRow>>,
    /// The threads' processes, which rows of threads carry.
    pub processes: Processes,
}

/// Writes one kind of row, on a thread of its own, as the analysis sends
/// each.
pub type WriteRow<'a, T> = Box<dyn FnMut(T) -> std::io::Result<()> + Send + 'a>;

/// What writes each kind of row (an exporter's tables or tracks); `None`:
/// that kind is not sent.
#[derive(Default)]
pub struct RowWriters<'a> {
    pub requests: Option<WriteRow<'a, RequestRow>>,
    pub operations: Option<WriteRow<'a, OperationRow>>,
    pub thread_states: Option<WriteRow<'a, ThreadStateRow>>,
    pub spans: Option<WriteRow<'a, SpanRow>>,
}

/// Rows written, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RowCounts {
    pub requests: u64,
    pub operations: u64,
    pub thread_states: u64,
    pub spans: u64,
}

/// Runs `analyze` with sinks whose rows `writers` write, each kind on a
/// thread of its own behind a bounded queue (the analysis waits for a
/// slow writer rather than buffer: memory stays flat). The one thread
/// set-up every exporter shares. Returns what `analyze` returned and the
/// rows written, or the first write error (the rows after it are drained
/// and dropped, so the analysis still ends).
pub fn drive<R>(
    writers: RowWriters<'_>,
    analyze: impl FnOnce(RowSinks) -> R,
) -> (R, std::io::Result<RowCounts>) {
    std::thread::scope(|scope| {
        let (requests, req) = writer_thread(scope, writers.requests);
        let (operations, op) = writer_thread(scope, writers.operations);
        let (thread_states, st) = writer_thread(scope, writers.thread_states);
        let (spans, sp) = writer_thread(scope, writers.spans);
        let analyzed = analyze(RowSinks {
            requests,
            operations,
            thread_states,
            spans,
            processes: Processes::default(),
        });
        let written = (|| {
            Ok(RowCounts {
                requests: joined(req)?,
                operations: joined(op)?,
                thread_states: joined(st)?,
                spans: joined(sp)?,
            })
        })();
        (analyzed, written)
    })
}

type Written<'scope> = Option<ScopedJoinHandle<'scope, std::io::Result<u64>>>;

/// A thread that writes each row the returned sender brings; the number
/// written, or the first error.
fn writer_thread<'scope, 'env, T: Send + 'env>(
    scope: &'scope Scope<'scope, 'env>,
    write: Option<WriteRow<'env, T>>,
) -> (Option<SyncSender<T>>, Written<'scope>) {
    const QUEUE: usize = 8192;
    let Some(mut write) = write else {
        return (None, None);
    };
    let (tx, rx) = sync_channel::<T>(QUEUE);
    let handle = scope.spawn(move || {
        let (mut n, mut error) = (0, None);
        for row in rx {
            if error.is_none() {
                match write(row) {
                    Ok(()) => n += 1,
                    Err(e) => error = Some(e),
                }
            }
        }
        error.map_or(Ok(n), Err)
    });
    (Some(tx), Some(handle))
}

fn joined(h: Written<'_>) -> std::io::Result<u64> {
    h.map_or(Ok(0), |h| h.join().expect("a row writer panicked"))
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
