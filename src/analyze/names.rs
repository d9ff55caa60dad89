//! Thread names as the trace tells them: from text lines' task column and
//! from `sched_switch`'s comms (captures carry no names in their headers).

use crate::model::{Comm, OtherEvent};
use rustc_hash::FxHashMap;

#[derive(Default)]
pub struct ThreadNames {
    comms: FxHashMap<u32, Comm>,
}

impl ThreadNames {
    pub fn learn(&mut self, e: &OtherEvent) {
        if !e.comm.is_empty() {
            self.comms.insert(e.pid, e.comm);
        }
        if e.short_name() == "sched_switch" {
            if let (Some(pid), Some(c)) = (e.fields.int("next_pid"), e.fields.str("next_comm")) {
                self.comms.insert(pid as u32, Comm::new(c.as_bytes()));
            }
        }
    }

    pub fn learn_block(&mut self, pid: u32, comm: Comm) {
        if !comm.is_empty() {
            self.comms.insert(pid, comm);
        }
    }

    pub fn get(&self, pid: u32) -> String {
        self.comms
            .get(&pid)
            .map(|c| c.as_str().to_string())
            .unwrap_or_default()
    }

    /// `comm (pid)`, the key of per-process tables.
    pub fn process(&self, pid: u32) -> String {
        format!("{} ({pid})", self.get(pid))
    }
}
