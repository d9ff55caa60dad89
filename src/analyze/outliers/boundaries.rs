//! Where operations begin and end: probe markers, syscalls,
//! `ext4_sync_file`; journal commits and checkpoints. An operation that
//! ends is added to its kind's totals and, if among the slowest, kept
//! with its explanation.

use super::kinds::KindId;
use super::op::OpenOp;
use super::touch::Touch;
use super::OutlierAnalysis;
use crate::analyze::names::ThreadNames;
use crate::analyze::sched::SchedAnalysis;
use crate::analyze::top::{keep_largest, qualifies};
use crate::model::tracepoint::syscall_of;
use crate::model::tracepoint::Field;
use crate::model::{Dev, TraceEvent, Tracepoint};

impl OutlierAnalysis {
    /// Operation boundaries and journal commits; whether the event is one
    /// only operations use (faults).
    pub fn add(&mut self, e: &TraceEvent, names: &ThreadNames, sched: &SchedAnalysis) -> bool {
        if matches!(
            e.kind,
            Tracepoint::IoUringSubmitReq
                | Tracepoint::IoUringQueueAsyncWork
                | Tracepoint::IoUringComplete
                | Tracepoint::IoUringReqFailed
        ) {
            // io_uring's events are never raised inside a fault: a fault the
            // thread was in (an io worker's, taken by the kernel) has ended.
            self.end_fault(e.pid, names);
        }
        if self.top > 0 && self.uring_event(e, names) && e.kind != Tracepoint::SysExit {
            return false;
        }
        let syscall = || syscall_of(e.short_name()).unwrap_or_default();
        match e.kind {
            Tracepoint::SchedProcessFork => {
                // A fork is a syscall: the parent's fault had ended.
                self.end_fault(e.pid, names);
                self.workload.fork(e)
            }
            Tracepoint::SchedProcessExit => self.end_fault(e.pid, names),
            Tracepoint::PageFaultUser => {
                self.fault_begins(e, false, names, sched);
                return true;
            }
            Tracepoint::PageFaultKernel => {
                // On the kernel's own memory (the upper half: a negative
                // address) it is no fault of the thread's.
                let user = e.fields.int(Field::Address).is_some_and(|a| a >= 0);
                if user {
                    self.fault_begins(e, true, names, sched);
                }
                return true;
            }
            Tracepoint::MmFilemapFault | Tracepoint::MmFilemapMapPages => {
                self.fault_in_file(e, e.kind == Tracepoint::MmFilemapFault);
                return true;
            }
            Tracepoint::Jbd2Checkpoint => {
                let d = Dev(e.fields.int(Field::Dev).unwrap_or(0) as u32);
                self.checkpointing.insert(e.pid, d);
            }
            Tracepoint::Jbd2StartCommit | Tracepoint::Jbd2EndCommit => {
                let d = Dev(e.fields.int(Field::Dev).unwrap_or(0) as u32);
                let n = self.commits.entry(d).or_default();
                *n = if e.kind == Tracepoint::Jbd2StartCommit {
                    *n + 1
                } else {
                    n.saturating_sub(1)
                };
            }
            Tracepoint::Ext4SyncFileEnter => {
                let d = Dev(e.fields.int(Field::Dev).unwrap_or(0) as u32);
                let kind = self.kinds.id("", "ext4_sync_file");
                self.begin(kind, e, Some(d), names, sched);
            }
            Tracepoint::Ext4SyncFileExit => {
                let kind = self.kinds.id("", "ext4_sync_file");
                self.end(kind, e, names)
            }
            Tracepoint::Print => {
                let Some(rest) = e
                    .fields
                    .str(Field::Buf)
                    .and_then(|b| b.trim_end().strip_prefix("iosleuth: "))
                else {
                    return false;
                };
                let mut w = rest.split_whitespace();
                if let (Some(name), Some(_), Some(what)) = (w.next(), w.next(), w.next()) {
                    let kind = self.kinds.id("probe ", name);
                    match what {
                        "begin" => self.begin(kind, e, None, names, sched),
                        "end" => self.end(kind, e, names),
                        _ => {}
                    }
                }
            }
            Tracepoint::SysEnter => {
                // Back in the kernel: a fault it was in has ended.
                self.end_fault(e.pid, names);
                if self.workload.holds(e.pid) {
                    let kind = self.kinds.id("syscall ", syscall());
                    self.begin(kind, e, None, names, sched)
                }
            }
            Tracepoint::SysExit => {
                // A fault the kernel took in the call ended before it returns.
                self.end_fault(e.pid, names);
                let kind = self.kinds.id("syscall ", syscall());
                self.end(kind, e, names);
                // Its checkpoint, if it ran one, is over with the call.
                if self.checkpointing.contains_key(&e.pid) {
                    self.before(e.ts, &Touch::Blocked);
                    self.checkpointing.remove(&e.pid);
                }
            }
            _ => {}
        }
        false
    }

    pub(super) fn begin(
        &mut self,
        kind: KindId,
        e: &TraceEvent,
        dev: Option<Dev>,
        names: &ThreadNames,
        sched: &SchedAnalysis,
    ) {
        if self.top == 0 || !names.keeps(e.pid) {
            return;
        }
        // A thread in the same kind of operation twice: the first one's end
        // was lost.
        if self.open.last_of(e.pid, |o| o.kind == kind).is_some() {
            self.open.retain(|o| !(o.pid == e.pid && o.kind == kind));
        }
        // Operations inside inherit the device their parent learnt.
        let dev = dev.or_else(|| {
            let parent = self.open.last_of(e.pid, |_| true)?;
            self.open.get(parent).dev
        });
        let op = self.fresh_op(kind, e.pid, e.ts, dev);
        self.open.push(op);
        let last = self.open.len() - 1;
        let now = super::op::ThreadNow::of(e.pid, sched);
        self.open.refresh(last, now, &self.idle);
        // An fsync tells its enclosing operations which device they wait on.
        if let Some(d) = dev {
            self.open.learn_dev(e.pid, d);
        }
    }

    fn end(&mut self, kind: KindId, e: &TraceEvent, names: &ThreadNames) {
        let Some(i) = self.open.last_of(e.pid, |o| o.kind == kind) else {
            return;
        };
        self.advance_one(i, e.ts);
        let mut op = self.open.swap_remove(i);
        op.settle();
        let latency = e.ts.saturating_sub(op.start);
        self.close(op, latency, None, names);
    }

    /// An ended operation: in its kind's totals, a row, and kept if among
    /// the slowest of its kind.
    pub(super) fn close(
        &mut self,
        op: Box<OpenOp>,
        latency: u64,
        file: Option<super::FilePage>,
        names: &ThreadNames,
    ) {
        self.kinds.count(op.kind, latency, &op.b);
        if op.pages_refaulted > 0 {
            let r = &mut self.refaulting;
            r.count += 1;
            r.latency_ns += latency;
            r.device_ns += op.b.device_ns.values().sum::<u64>();
            r.pages += op.pages_refaulted;
        }
        let (open, done, queued) = (&self.open, &self.done, &self.queued);
        let kinds = &self.kinds;
        let processes = &self.processes;
        crate::analyze::rows::send(&mut self.rows, || crate::analyze::rows::OperationRow {
            id: op.id,
            // The innermost operation of its thread that began before it
            // and is still open: it encloses this one (a probe's
            // operation its syscall, an fsync its ext4_sync_file).
            parent: open
                .of_thread(op.pid)
                .filter(|o| o.id < op.id)
                .map(|o| o.id)
                .max(),
            // The requests it waited for at the device, as the breakdown
            // counted them (completed, or still there).
            waited_for: {
                let mut w: Vec<(u64, u64)> = op
                    .waited_on
                    .iter()
                    .filter_map(|(&(k, issued), &ns)| {
                        let id = match done.get(&(k, issued)) {
                            Some((r, _)) => r.id,
                            None => queued
                                .get(&k)
                                .filter(|r| r.issued_at == Some(issued))
                                .and_then(|r| r.id),
                        };
                        Some((id?, ns))
                    })
                    .collect();
                w.sort_unstable();
                w
            },
            kind: kinds.name(op.kind).to_string(),
            pid: op.pid,
            process: processes.of(op.pid),
            comm: names.get(op.pid),
            start_ns: op.start,
            latency_ns: latency,
            dev: op.dev,
            breakdown: op.b.clone(),
        });
        let kind = op.kind;
        if qualifies(self.kinds.kept_mut(kind), self.top, latency, |o| {
            o.latency_ns
        }) {
            let o = self.explain(*op, latency, file, names);
            let list = self.kinds.kept_mut(kind);
            keep_largest(list, o, self.top, |o| o.latency_ns, |o| o.start_ns);
        } else if self.spare.len() < SPARE_OPS && op.small() {
            self.spare.push(op);
        }
        if self.open.is_empty() {
            self.done.clear();
        }
    }
}

/// Ended operations kept for their allocations: as many as are usually
/// open at once (one per thread in a syscall) is plenty.
const SPARE_OPS: usize = 256;

impl OutlierAnalysis {
    /// An operation that begins, in the maps of one that ended unkept,
    /// when there is one: most end so, and growing their maps from nothing
    /// (the CPU holders, the requests waited for) cost a tenth of the
    /// breakdowns on a capture of 16 writers.
    fn fresh_op(&mut self, kind: KindId, pid: u32, ts: u64, dev: Option<Dev>) -> Box<OpenOp> {
        let id = self.next_op_id;
        self.next_op_id += 1;
        match self.spare.pop() {
            Some(mut op) => {
                op.reset(id, kind, pid, ts, dev);
                op
            }
            None => Box::new(OpenOp::new(id, kind, pid, ts, dev)),
        }
    }
}
