//! The open operations, filed by what makes a scheduler event touch them:
//! their thread, and the CPU they wait for when runnable. A switch or a
//! wakeup then finds the few operations it concerns without looking at
//! every open one (with dozens of threads in a syscall, that scan was a
//! tenth of the analysis' instructions).
//!
//! An operation's thread, state and CPU change only through `push`,
//! `refresh`, `swap_remove` and `retain` here, which refile it; the rest
//! of an operation may be changed through `get_mut`.

use super::op::{IdleClocks, OpenOp, ThreadNow};
use super::touch::{touched, Touch};
use crate::analyze::sched::ThreadView;
use crate::model::Dev;
use rustc_hash::FxHashMap;

#[derive(Default)]
pub(super) struct OpenOps {
    /// Boxed: an operation is about 500 bytes, moved in and out of here
    /// and into the spares at every begin and end.
    #[allow(clippy::vec_box)]
    ops: Vec<Box<OpenOp>>,
    /// Indices into `ops` by thread, and of the runnable ones by the CPU
    /// they wait for.
    by_pid: FxHashMap<u32, Vec<u32>>,
    runnable_on: FxHashMap<u32, Vec<u32>>,
    /// How many are blocked in `D` on each device (`None`: not known
    /// yet): a device's or a commit's events concern only those.
    blocked_on: Vec<(Option<Dev>, usize)>,
    /// Indices of those blocked in `D`: what a device's events look at,
    /// instead of every open operation.
    in_d: Vec<u32>,
}

/// The CPU a runnable operation waits for: where `touched` looks for it.
fn runnable_cpu(op: &OpenOp) -> Option<u32> {
    (op.view == ThreadView::Runnable)
        .then_some(op.cpu)
        .flatten()
}

fn in_d(op: &OpenOp) -> bool {
    op.view == ThreadView::Off('D')
}

fn file_in(map: &mut FxHashMap<u32, Vec<u32>>, key: u32, i: u32) {
    map.entry(key).or_default().push(i);
}

/// Emptied lists stay for the next operation of their thread or CPU (an
/// allocation per syscall otherwise), until this many have piled up.
const EMPTY_KEPT: usize = 4096;

fn unfile_in(map: &mut FxHashMap<u32, Vec<u32>>, key: u32, i: u32, open: usize) {
    if let Some(v) = map.get_mut(&key) {
        if let Some(at) = v.iter().position(|&x| x == i) {
            v.swap_remove(at);
        }
    }
    // At most `open` lists hold an operation: the rest are empty.
    if map.len() > EMPTY_KEPT + open {
        map.retain(|_, v| !v.is_empty());
    }
}

impl OpenOps {
    fn file(&mut self, i: usize) {
        let op = &self.ops[i];
        let (pid, cpu, d) = (op.pid, runnable_cpu(op), in_d(op));
        file_in(&mut self.by_pid, pid, i as u32);
        if let Some(c) = cpu {
            file_in(&mut self.runnable_on, c, i as u32);
        }
        if d {
            self.count_blocked(op.dev, 1);
            self.in_d.push(i as u32);
        }
    }

    fn unfile(&mut self, i: usize) {
        let op = &self.ops[i];
        let (pid, cpu, d) = (op.pid, runnable_cpu(op), in_d(op));
        let open = self.ops.len();
        unfile_in(&mut self.by_pid, pid, i as u32, open);
        if let Some(c) = cpu {
            unfile_in(&mut self.runnable_on, c, i as u32, open);
        }
        if d {
            self.count_blocked(op.dev, -1);
            self.unfile_d(i);
        }
    }

    fn unfile_d(&mut self, i: usize) {
        if let Some(at) = self.in_d.iter().position(|&x| x == i as u32) {
            self.in_d.swap_remove(at);
        }
    }

    fn count_blocked(&mut self, dev: Option<Dev>, by: isize) {
        match self.blocked_on.iter_mut().find(|(d, _)| *d == dev) {
            Some((_, n)) => *n = n.wrapping_add_signed(by),
            None => self.blocked_on.push((dev, by as usize)),
        }
    }

    fn refile_all(&mut self) {
        self.by_pid.clear();
        self.runnable_on.clear();
        self.blocked_on.clear();
        self.in_d.clear();
        for i in 0..self.ops.len() {
            self.file(i);
        }
    }

    pub(super) fn len(&self) -> usize {
        self.ops.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    pub(super) fn iter(&self) -> impl DoubleEndedIterator<Item = &OpenOp> + '_ {
        self.ops.iter().map(|o| &**o)
    }

    pub(super) fn get(&self, i: usize) -> &OpenOp {
        &self.ops[i]
    }

    /// Changes nothing `touched` reads (thread, state, CPU): `refresh` does.
    pub(super) fn get_mut(&mut self, i: usize) -> &mut OpenOp {
        &mut self.ops[i]
    }

    /// Changes nothing `touched` reads (thread, state, CPU): `refresh` does.
    pub(super) fn last_mut(&mut self) -> Option<&mut OpenOp> {
        self.ops.last_mut().map(|o| &mut **o)
    }

    pub(super) fn push(&mut self, op: Box<OpenOp>) {
        self.ops.push(op);
        self.file(self.ops.len() - 1);
    }

    /// Removes operation `i`; the last one takes its place.
    pub(super) fn swap_remove(&mut self, i: usize) -> Box<OpenOp> {
        let last = self.ops.len() - 1;
        self.unfile(i);
        if i != last {
            self.unfile(last);
        }
        let op = self.ops.swap_remove(i);
        if i != last {
            self.file(i);
        }
        op
    }

    /// The last operation (in [`OpenOps::iter`]'s order) of thread `pid`
    /// that `pick` accepts: found among the thread's own, not by a scan
    /// of every open one (a syscall's end looked at all of them).
    pub(super) fn last_of(&self, pid: u32, pick: impl Fn(&OpenOp) -> bool) -> Option<usize> {
        let found = self
            .by_pid
            .get(&pid)?
            .iter()
            .map(|&i| i as usize)
            .filter(|&i| pick(&self.ops[i]))
            .max();
        debug_assert_eq!(
            found,
            self.ops.iter().rposition(|o| o.pid == pid && pick(o)),
            "thread {pid}'s operations as filed"
        );
        found
    }

    /// The operations of thread `pid`, in no order.
    pub(super) fn of_thread(&self, pid: u32) -> impl Iterator<Item = &OpenOp> + '_ {
        let filed = self.by_pid.get(&pid).map(|v| v.as_slice()).unwrap_or(&[]);
        filed.iter().map(|&i| &*self.ops[i as usize])
    }

    /// Keeps the operations `keep` holds to, in their order.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(&OpenOp) -> bool) {
        let before = self.ops.len();
        self.ops.retain(|o| keep(o));
        if self.ops.len() != before {
            self.refile_all();
        }
    }

    /// Operation `i` learns its thread's state, CPU and who runs there;
    /// it is refiled only if it became or stopped being runnable on a
    /// CPU, or blocked (its thread never changes).
    pub(super) fn refresh(&mut self, i: usize, now: ThreadNow, idle: &IdleClocks) {
        let op = &mut self.ops[i];
        let (cpu, d) = (runnable_cpu(op), in_d(op));
        op.refresh(now, idle);
        let (now_cpu, now_d) = (runnable_cpu(op), in_d(op));
        if cpu != now_cpu {
            let open = self.ops.len();
            if let Some(c) = cpu {
                unfile_in(&mut self.runnable_on, c, i as u32, open);
            }
            if let Some(c) = now_cpu {
                file_in(&mut self.runnable_on, c, i as u32);
            }
        }
        if d != now_d {
            let dev = self.ops[i].dev;
            self.count_blocked(dev, if now_d { 1 } else { -1 });
            if now_d {
                self.in_d.push(i as u32);
            } else {
                self.unfile_d(i);
            }
        }
    }

    /// The operations of thread `pid` learn the device they wait on, if
    /// they did not know it.
    pub(super) fn learn_dev(&mut self, pid: u32, dev: Dev) {
        let Some(v) = self.by_pid.get(&pid) else {
            return;
        };
        for k in 0..v.len() {
            let i = self.by_pid[&pid][k] as usize;
            if self.ops[i].dev.is_none() {
                let d = in_d(&self.ops[i]);
                if d {
                    self.count_blocked(None, -1);
                    self.count_blocked(Some(dev), 1);
                }
                self.ops[i].dev = Some(dev);
            }
        }
    }

    /// The `k`th of the operations blocked in `D` (in no order), while
    /// `k` is below their number: changing what `touched` reads of one
    /// goes through `refresh`, which refiles it.
    pub(super) fn blocked_at(&self, k: usize) -> Option<usize> {
        self.in_d.get(k).map(|&i| i as usize)
    }

    /// The devices blocked operations wait on that an event on `dev`
    /// concerns (theirs, or not known), each once.
    pub(super) fn blocked_devs(&self, dev: Dev) -> impl Iterator<Item = Option<Dev>> + '_ {
        self.blocked_on
            .iter()
            .filter(move |(d, n)| *n > 0 && d.is_none_or(|x| x == dev))
            .map(|(d, _)| *d)
    }

    /// The operations `t` may concern, each once, into `out` (in no
    /// particular order: what an event does to one operation does not
    /// depend on the others).
    pub(super) fn touched_by(&self, t: &Touch, out: &mut Vec<u32>) {
        out.clear();
        match *t {
            Touch::Threads { a, b, cpu } => {
                if let Some(v) = self.by_pid.get(&a) {
                    out.extend_from_slice(v);
                }
                if b != a {
                    if let Some(v) = self.by_pid.get(&b) {
                        out.extend_from_slice(v);
                    }
                }
                if let Some(v) = cpu.and_then(|c| self.runnable_on.get(&c)) {
                    // Those of `a` and `b` are in already.
                    out.extend(v.iter().copied().filter(|&i| {
                        let pid = self.ops[i as usize].pid;
                        pid != a && pid != b
                    }));
                }
            }
            // Only those in `D` are touched (`touched`): none blocked,
            // nothing to look at.
            _ => out.extend(
                self.in_d
                    .iter()
                    .copied()
                    .filter(|&i| touched(&self.ops[i as usize], t)),
            ),
        }
        debug_assert!(out.iter().all(|&i| touched(&self.ops[i as usize], t)));
        debug_assert_eq!(out.len(), self.ops.iter().filter(|o| touched(o, t)).count());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The filing agrees with a scan of every operation, whatever was
    /// pushed, removed and refreshed.
    #[test]
    fn the_filed_operations_are_those_a_scan_finds() {
        let mut ops = OpenOps::default();
        let mk = |pid: u32, view: ThreadView, cpu: Option<u32>| {
            let mut o = Box::new(OpenOp::new(0, Default::default(), pid, 0, None));
            o.view = view;
            o.cpu = cpu;
            o
        };
        let views = [
            ThreadView::Runnable,
            ThreadView::Running,
            ThreadView::Off('D'),
            ThreadView::Runnable,
        ];
        for k in 0..40u32 {
            ops.push(mk(k % 7, views[(k % 4) as usize], Some(k % 3)));
        }
        let check = |ops: &OpenOps| {
            let mut out = Vec::new();
            for t in [Touch::Blocked, Touch::Device(crate::model::Dev(7 << 20))] {
                ops.touched_by(&t, &mut out);
                let scan = (0..ops.len()).filter(|&i| touched(ops.get(i), &t)).count();
                assert_eq!(out.len(), scan, "{t:?}");
            }
            for a in 0..8 {
                for c in 0..4 {
                    let t = Touch::Threads {
                        a,
                        b: (a + 3) % 8,
                        cpu: (c < 3).then_some(c),
                    };
                    ops.touched_by(&t, &mut out);
                    out.sort_unstable();
                    let scan: Vec<u32> = (0..ops.len() as u32)
                        .filter(|&i| touched(ops.get(i as usize), &t))
                        .collect();
                    assert_eq!(out, scan, "{t:?}");
                }
            }
        };
        check(&ops);
        for i in [0, 5, 17, 3] {
            ops.swap_remove(i);
            check(&ops);
        }
        let last = ops.len() - 1;
        ops.swap_remove(last);
        check(&ops);
        ops.retain(|o| o.pid != 2);
        check(&ops);
        assert!(ops.iter().all(|o| o.pid != 2));
    }
}
