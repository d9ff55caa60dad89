//! Thread names as the trace tells them: from text lines' task column and
//! from `sched_switch`'s comms (captures carry no names in their headers).

use crate::model::tracepoint::Field;
use crate::model::{Comm, TraceEvent, Tracepoint};
use rustc_hash::FxHashMap;

#[derive(Default)]
pub struct ThreadNames {
    comms: FxHashMap<u32, Comm>,
    /// The last name put in `comms`, which `comms` holds: a thread's
    /// events come in runs, each naming it alike, so most need no write.
    last: Option<(u32, Comm)>,
    /// `--pid`/`--comm`: only these threads' results.
    only_pids: Vec<u32>,
    only_comms: Vec<String>,
}

impl ThreadNames {
    /// Restricts per-thread results to these ids and names.
    pub fn only(&mut self, pids: Vec<u32>, comms: Vec<String>) {
        self.only_pids = pids;
        self.only_comms = comms;
    }

    /// Whether this thread's results are wanted (by its name as known now).
    pub fn keeps(&self, pid: u32) -> bool {
        // Asked at every operation's start and end: no name made unless a
        // filter needs it.
        if self.only_pids.is_empty() && self.only_comms.is_empty() {
            return true;
        }
        self.keeps_named(pid, self.comms.get(&pid).map_or("", |c| c.as_str()))
    }

    pub fn keeps_named(&self, pid: u32, comm: &str) -> bool {
        (self.only_pids.is_empty() && self.only_comms.is_empty())
            || self.only_pids.contains(&pid)
            || self.only_comms.iter().any(|c| c == comm)
    }

    /// `pid` is named `comm` now.
    #[inline]
    fn put(&mut self, pid: u32, comm: Comm) {
        if self.last != Some((pid, comm)) {
            self.comms.insert(pid, comm);
            self.last = Some((pid, comm));
        }
    }

    pub fn learn(&mut self, e: &TraceEvent) {
        if !e.comm.is_empty() {
            self.put(e.pid, e.comm);
        }
        let pairs: &[(Field, Field)] = match e.kind {
            Tracepoint::SchedSwitch => &[
                (Field::NextPid, Field::NextComm),
                (Field::PrevPid, Field::PrevComm),
            ],
            k if k.is_wakeup() => &[(Field::Pid, Field::Comm)],
            Tracepoint::SchedProcessFork => &[(Field::ChildPid, Field::ChildComm)],
            _ => return,
        };
        for (p, c) in pairs {
            if let (Some(pid), Some(c)) = (e.fields.int(*p), e.fields.str(*c)) {
                if pid != 0 {
                    self.put(pid as u32, Comm::new(c.as_bytes()));
                }
            }
        }
    }

    /// A name known from elsewhere (a snapshot).
    pub fn seed(&mut self, pid: u32, comm: &str) {
        self.comms
            .entry(pid)
            .or_insert_with(|| Comm::new(comm.as_bytes()));
    }

    pub fn learn_block(&mut self, pid: u32, comm: Comm) {
        if !comm.is_empty() {
            self.put(pid, comm);
        }
    }

    pub fn get(&self, pid: u32) -> String {
        self.comms
            .get(&pid)
            .map(|c| c.as_str().to_string())
            .unwrap_or_default()
    }

    /// The thread's name as known now.
    pub fn comm(&self, pid: u32) -> Option<Comm> {
        self.comms.get(&pid).copied()
    }

    /// `comm (pid)`, the key of per-process tables.
    pub fn process(&self, pid: u32) -> String {
        format!("{} ({pid})", self.get(pid))
    }
}
