//! Which open operations an event concerns: `touch_of`/`touch_of_block`
//! classify an event, `touched` tests an operation against it.

use super::op::OpenOp;
use crate::analyze::sched::ThreadView;
use crate::model::tracepoint::Field;
use crate::model::{Action, Dev, TraceEvent, Tracepoint};

/// Which open operations an event may change the situation of; between
/// such events each operation's situation is constant, so only these are
/// brought up to date (the rest integrate later, lazily).
#[derive(Clone, Copy, Debug)]
pub enum Touch {
    /// These threads' states, and whoever waits for this CPU.
    Threads { a: u32, b: u32, cpu: Option<u32> },
    /// Commits or checkpoints: every blocked thread.
    Blocked,
    /// A request on this device: threads blocked on it (or on any device),
    /// only if the event changes what their device looks like.
    Device(Dev),
}

pub fn touch_of(e: &TraceEvent) -> Option<Touch> {
    let f = &e.fields;
    let pid = |k: Field| f.int(k).map(|p| p as u32).unwrap_or(u32::MAX);
    Some(match e.kind {
        Tracepoint::SchedSwitch => Touch::Threads {
            a: pid(Field::PrevPid),
            b: pid(Field::NextPid),
            cpu: Some(e.cpu),
        },
        k if k.is_wakeup() || k == Tracepoint::SchedMigrateTask => Touch::Threads {
            a: pid(Field::Pid),
            b: u32::MAX,
            cpu: None,
        },
        Tracepoint::Jbd2StartCommit | Tracepoint::Jbd2EndCommit | Tracepoint::Jbd2Checkpoint => {
            Touch::Blocked
        }
        _ => return None,
    })
}

pub fn touch_of_block(a: Action, dev: Dev) -> Option<Touch> {
    matches!(
        a,
        Action::Queue
            | Action::Issue
            | Action::Complete
            | Action::BackMerge
            | Action::FrontMerge
            | Action::Requeue
    )
    .then_some(Touch::Device(dev))
}

/// Whether `t` may change what operation `op` is waiting on or for (asked
/// of every open operation at every event that touches any).
pub(super) fn touched(op: &OpenOp, t: &Touch) -> bool {
    match *t {
        // Runnable: who holds the CPU it waits for. (Asleep, how long its
        // CPU idles comes from the CPU's idle clock.)
        Touch::Threads { a, b, cpu } => {
            op.pid == a
                || op.pid == b
                || (cpu.is_some() && op.cpu == cpu && op.view == ThreadView::Runnable)
        }
        Touch::Blocked => op.view == ThreadView::Off('D'),
        Touch::Device(d) => op.view == ThreadView::Off('D') && op.dev.is_none_or(|x| x == d),
    }
}
