//! Filesystem and journal: fsync spans (`ext4_sync_file_enter`/`exit`), jbd2
//! transactions with their commit phases (start → locking → flushing →
//! logging → end), handles by type, the block requests each commit wrote,
//! checkpoints and who ran them (a writer that checkpoints is waiting for
//! journal space). Memory: one open fsync per thread, the open commits of
//! each journal, fixed-size tables.

use super::histogram::{LatencyDist, Percentiles};
use super::names::ThreadNames;
use super::syscalls::CallStats;
use super::top::{keep_largest, qualifies};
use crate::model::tracepoint::Field;
use crate::model::{Action, BlockEvent, Dev, Rwbs, TraceEvent, Tracepoint};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::BTreeMap;

const SLOWEST_KEPT: usize = 10;

/// ext4's handle types (`EXT4_HT_*` of fs/ext4/ext4_jbd2.h).
fn ext4_handle_type(t: i64) -> String {
    const NAMES: [&str; 13] = [
        "misc",
        "inode",
        "write_page",
        "map_blocks",
        "dir",
        "truncate",
        "quota",
        "resize",
        "migrate",
        "move_extents",
        "xattr",
        "ext_convert",
        "fs_trim",
    ];
    usize::try_from(t)
        .ok()
        .and_then(|i| NAMES.get(i))
        .map(|s| s.to_string())
        .unwrap_or_else(|| format!("type {t}"))
}

#[derive(Debug, Serialize, Clone, PartialEq)]
pub struct Fsync {
    pub pid: u32,
    pub comm: String,
    pub dev: String,
    pub ino: u64,
    pub datasync: bool,
    pub start_ns: u64,
    pub latency_ns: u64,
}

#[derive(Debug, Serialize, Clone, Default, PartialEq)]
pub struct Commit {
    pub transaction: u64,
    pub sync: bool,
    pub start_ns: u64,
    /// start_commit → end_commit.
    pub total_ns: u64,
    pub locking_ns: u64,
    pub flushing_ns: u64,
    pub logging_ns: u64,
    /// Block requests (bios) the journal thread queued during the commit.
    pub journal_writes: u64,
    pub journal_bytes: u64,
    /// Cache flushes and FUA writes on the device during the commit.
    pub flushes: u64,
}

#[derive(Debug, Serialize, Default)]
pub struct PhaseStats {
    pub total: Option<Percentiles>,
    pub locking: Option<Percentiles>,
    pub flushing: Option<Percentiles>,
    pub logging: Option<Percentiles>,
}

#[derive(Debug, Serialize, Default)]
pub struct CheckpointStats {
    /// `jbd2_checkpoint` events: checkpoint passes.
    pub passes: u64,
    /// Who ran them: `comm (pid)` → passes. A task other than the journal
    /// thread checkpointing is a writer waiting for journal space.
    pub by_process: BTreeMap<String, u64>,
    /// From `jbd2_checkpoint_stats`: transactions checkpointed and their
    /// buffers.
    pub transactions: u64,
    pub written: u64,
    pub dropped: u64,
    pub forced_to_close: u64,
}

#[derive(Debug, Serialize, Default)]
pub struct JournalSummary {
    pub commits: u64,
    pub sync_commits: u64,
    /// Commits per second between the first and the last commit.
    pub commits_per_s: f64,
    pub phases: PhaseStats,
    /// From `jbd2_run_stats`.
    pub handles_per_commit: f64,
    pub max_handles_per_commit: u64,
    pub blocks_per_commit: f64,
    pub blocks_logged_per_commit: f64,
    pub journal_writes_per_commit: f64,
    pub flushes_per_commit: f64,
    /// `jbd2_handle_start` by ext4 handle type.
    pub handle_starts: BTreeMap<String, u64>,
    pub checkpoints: CheckpointStats,
    pub log_tail_updates: u64,
    pub lock_buffer_stalls: u64,
    /// The slowest commits, slowest first.
    pub slowest_commits: Vec<Commit>,
}

/// Writers paused by `balance_dirty_pages` (the dirty page limit).
#[derive(Debug, Serialize, Default)]
pub struct DirtyThrottle {
    pub events: u64,
    /// Sum and maximum of the pauses (ms, as the tracepoint reports them).
    pub pause_ms_total: u64,
    pub max_pause_ms: u64,
    /// `comm (pid)` → ms paused.
    pub by_process: BTreeMap<String, u64>,
    /// The global dirty limit and the most dirty pages seen (pages).
    pub limit_pages: u64,
    pub max_dirty_pages: u64,
}

/// What a device was asked to write: file data, the journal (jbd2's own
/// writes), and cache flushes (flush requests, preflushes and FUA writes).
#[derive(Debug, Serialize, Default, Clone)]
pub struct WriteMix {
    pub data_writes: u64,
    pub data_bytes: u64,
    pub journal_writes: u64,
    pub journal_bytes: u64,
    pub flushes: u64,
}

#[derive(Debug, Serialize, Default)]
pub struct FsSummary {
    pub dirty_throttle: DirtyThrottle,
    /// Writes queued per device `MAJ,MIN`, data against journal.
    pub device_writes: BTreeMap<String, WriteMix>,
    /// ext4_sync_file spans (fsync and fdatasync inside the filesystem).
    pub fsync: CallStats,
    /// The same by process: `comm (pid)` → stats.
    pub fsync_by_process: BTreeMap<String, CallStats>,
    pub slowest_fsyncs: Vec<Fsync>,
    /// Per journal device (`MAJ,MIN`).
    pub journals: BTreeMap<String, JournalSummary>,
    /// Exits without an entry (the trace began inside the call).
    pub unmatched_fsync_exits: u64,
}

#[derive(Default)]
struct OpenCommit {
    commit: Commit,
    locking_at: Option<u64>,
    flushing_at: Option<u64>,
    logging_at: Option<u64>,
}

#[derive(Default)]
struct Journal {
    out: JournalSummary,
    open: FxHashMap<u64, OpenCommit>,
    first_commit: Option<u64>,
    last_commit: u64,
    total: LatencyDist,
    locking: LatencyDist,
    flushing: LatencyDist,
    logging: LatencyDist,
    run_stats: u64,
    handles: u64,
    blocks: u64,
    blocks_logged: u64,
    writes: u64,
    flushes: u64,
}

#[derive(Default)]
pub struct FsAnalysis {
    /// Per thread: the fsync in progress (dev, ino, datasync, start).
    open_fsync: FxHashMap<u32, (Dev, u64, bool, u64)>,
    journals: BTreeMap<Dev, Journal>,
    rows: Option<std::sync::mpsc::SyncSender<super::rows::SpanRow>>,
    /// Named at the end, when every name is known.
    fsync_by_pid: FxHashMap<u32, CallStats>,
    checkpoints_by_pid: FxHashMap<(Dev, u32), u64>,
    paused_by_pid: FxHashMap<u32, u64>,
    /// Keyed by Dev while events flow (no string per write); named at the end.
    device_writes: FxHashMap<Dev, WriteMix>,
    out: FsSummary,
}

impl FsAnalysis {
    pub fn new() -> FsAnalysis {
        FsAnalysis::default()
    }

    /// Sends each journal commit, start to end, to `sink` (exports).
    pub fn with_rows(
        mut self,
        sink: Option<std::sync::mpsc::SyncSender<super::rows::SpanRow>>,
    ) -> Self {
        self.rows = sink;
        self
    }

    /// Feeds one event; returns false for events this analysis ignores.
    pub fn add(&mut self, e: &TraceEvent, names: &ThreadNames) -> bool {
        let f = &e.fields;
        let dev = || Dev(f.int(Field::Dev).unwrap_or(0) as u32);
        match e.kind {
            Tracepoint::Ext4SyncFileEnter => {
                let ino = f.int(Field::Ino).unwrap_or(0) as u64;
                let datasync = f.int(Field::Datasync).unwrap_or(0) != 0;
                self.open_fsync.insert(e.pid, (dev(), ino, datasync, e.ts));
            }
            Tracepoint::Ext4SyncFileExit => self.fsync_exit(e, names),
            Tracepoint::Jbd2StartCommit => self.commit_start(e, dev()),
            phase @ (Tracepoint::Jbd2CommitLocking
            | Tracepoint::Jbd2CommitFlushing
            | Tracepoint::Jbd2CommitLogging) => self.commit_phase(e, dev(), phase),
            Tracepoint::Jbd2EndCommit => self.commit_end(e, dev()),
            Tracepoint::Jbd2RunStats => self.run_stats(e, dev()),
            Tracepoint::Jbd2HandleStart => {
                let j = self.journals.entry(dev()).or_default();
                let t = ext4_handle_type(f.int(Field::Type).unwrap_or(-1));
                *j.out.handle_starts.entry(t).or_default() += 1;
            }
            Tracepoint::Jbd2Checkpoint => {
                let j = self.journals.entry(dev()).or_default();
                j.out.checkpoints.passes += 1;
                *self.checkpoints_by_pid.entry((dev(), e.pid)).or_default() += 1;
            }
            Tracepoint::Jbd2CheckpointStats => {
                let c = &mut self.journals.entry(dev()).or_default().out.checkpoints;
                c.transactions += 1;
                c.written += f.int(Field::Written).unwrap_or(0) as u64;
                c.dropped += f.int(Field::Dropped).unwrap_or(0) as u64;
                c.forced_to_close += f.int(Field::ForcedToClose).unwrap_or(0) as u64;
            }
            Tracepoint::Jbd2UpdateLogTail => {
                self.journals.entry(dev()).or_default().out.log_tail_updates += 1;
            }
            Tracepoint::BalanceDirtyPages => self.dirty_pause(e),
            Tracepoint::Jbd2LockBufferStall => {
                self.journals
                    .entry(dev())
                    .or_default()
                    .out
                    .lock_buffer_stalls += 1;
            }
            _ => return false,
        }
        true
    }

    /// An fsync ends: its latency, overall, per thread and among the
    /// slowest; an exit without its entry is only counted.
    #[inline]
    fn fsync_exit(&mut self, e: &TraceEvent, names: &ThreadNames) {
        match self.open_fsync.remove(&e.pid) {
            Some(_) if !names.keeps(e.pid) => {}
            Some((d, ino, datasync, start)) if e.ts >= start => {
                let ns = e.ts - start;
                self.out.fsync.add(ns);
                self.fsync_by_pid.entry(e.pid).or_default().add(ns);
                // Named (two strings) only when it is among the slowest.
                if !qualifies(&self.out.slowest_fsyncs, SLOWEST_KEPT, ns, |x| x.latency_ns) {
                    return;
                }
                let item = Fsync {
                    pid: e.pid,
                    comm: names.get(e.pid),
                    dev: d.to_string(),
                    ino,
                    datasync,
                    start_ns: start,
                    latency_ns: ns,
                };
                keep_largest(
                    &mut self.out.slowest_fsyncs,
                    item,
                    SLOWEST_KEPT,
                    |x| x.latency_ns,
                    |x| x.start_ns,
                );
            }
            _ => self.out.unmatched_fsync_exits += 1,
        }
    }

    /// A commit of `dev`'s journal opens.
    #[inline]
    fn commit_start(&mut self, e: &TraceEvent, dev: Dev) {
        let f = &e.fields;
        let j = self.journals.entry(dev).or_default();
        let tid = f.int(Field::Transaction).unwrap_or(0) as u64;
        j.open.insert(
            tid,
            OpenCommit {
                commit: Commit {
                    transaction: tid,
                    sync: f.int(Field::SyncCommit).unwrap_or(0) != 0,
                    start_ns: e.ts,
                    ..Default::default()
                },
                ..Default::default()
            },
        );
    }

    /// An open commit enters its locking, flushing or logging phase.
    #[inline]
    fn commit_phase(&mut self, e: &TraceEvent, dev: Dev, phase: Tracepoint) {
        let j = self.journals.entry(dev).or_default();
        let tid = e.fields.int(Field::Transaction).unwrap_or(0) as u64;
        if let Some(c) = j.open.get_mut(&tid) {
            let at = match phase {
                Tracepoint::Jbd2CommitLocking => &mut c.locking_at,
                Tracepoint::Jbd2CommitFlushing => &mut c.flushing_at,
                _ => &mut c.logging_at,
            };
            *at = Some(e.ts);
        }
    }

    /// A commit ends: its total and phase durations, into the journal's
    /// distributions, counts and slowest commits.
    #[inline]
    fn commit_end(&mut self, e: &TraceEvent, dev: Dev) {
        let j = self.journals.entry(dev).or_default();
        let tid = e.fields.int(Field::Transaction).unwrap_or(0) as u64;
        if let Some(mut c) = j.open.remove(&tid) {
            let start = c.commit.start_ns;
            c.commit.total_ns = e.ts.saturating_sub(start);
            super::rows::send(&mut self.rows, || super::rows::SpanRow::Commit {
                dev,
                transaction: tid,
                start_ns: start,
                end_ns: e.ts,
            });
            // Each phase lasts until the next one begins.
            let span = |a: Option<u64>, b: Option<u64>| match (a, b) {
                (Some(a), Some(b)) => b.saturating_sub(a),
                _ => 0,
            };
            c.commit.locking_ns = span(c.locking_at, c.flushing_at);
            c.commit.flushing_ns = span(c.flushing_at, c.logging_at);
            c.commit.logging_ns = span(c.logging_at, Some(e.ts));
            j.total.add(c.commit.total_ns);
            if c.locking_at.is_some() {
                j.locking.add(c.commit.locking_ns);
                j.flushing.add(c.commit.flushing_ns);
                j.logging.add(c.commit.logging_ns);
            }
            j.out.commits += 1;
            j.out.sync_commits += c.commit.sync as u64;
            j.first_commit.get_or_insert(start);
            j.last_commit = j.last_commit.max(start);
            j.writes += c.commit.journal_writes;
            j.flushes += c.commit.flushes;
            keep_largest(
                &mut j.out.slowest_commits,
                c.commit,
                SLOWEST_KEPT,
                |x| x.total_ns,
                |x| x.start_ns,
            );
        }
    }

    /// `jbd2_run_stats`: a committed transaction's handles and blocks.
    #[inline]
    fn run_stats(&mut self, e: &TraceEvent, dev: Dev) {
        let f = &e.fields;
        let j = self.journals.entry(dev).or_default();
        let handles = f.int(Field::HandleCount).unwrap_or(0) as u64;
        j.run_stats += 1;
        j.handles += handles;
        j.out.max_handles_per_commit = j.out.max_handles_per_commit.max(handles);
        j.blocks += f.int(Field::Blocks).unwrap_or(0) as u64;
        j.blocks_logged += f.int(Field::BlocksLogged).unwrap_or(0) as u64;
    }

    /// `balance_dirty_pages`: a writer paused at the dirty page limit.
    #[inline]
    fn dirty_pause(&mut self, e: &TraceEvent) {
        let f = &e.fields;
        let d = &mut self.out.dirty_throttle;
        let pause = f.int(Field::Pause).unwrap_or(0).max(0) as u64;
        d.events += 1;
        d.pause_ms_total += pause;
        d.max_pause_ms = d.max_pause_ms.max(pause);
        d.limit_pages = f.int(Field::Limit).unwrap_or(0).max(0) as u64;
        d.max_dirty_pages = d
            .max_dirty_pages
            .max(f.int(Field::Dirty).unwrap_or(0).max(0) as u64);
        *self.paused_by_pid.entry(e.pid).or_default() += pause;
    }

    /// Block requests queued while a commit runs on their device: the
    /// journal thread's writes, and every flush or FUA.
    pub fn block(&mut self, b: &BlockEvent) {
        if b.action != Action::Queue {
            return;
        }
        let flush = b.rwbs.has(Rwbs::FLUSH) || b.rwbs.has(Rwbs::PREFLUSH) || b.rwbs.has(Rwbs::FUA);
        if b.rwbs.is_write() || flush {
            let m = self.device_writes.entry(b.dev).or_default();
            m.flushes += flush as u64;
            if b.bytes > 0 && b.comm.as_str().starts_with("jbd2/") {
                m.journal_writes += 1;
                m.journal_bytes += b.bytes as u64;
            } else if b.bytes > 0 {
                m.data_writes += 1;
                m.data_bytes += b.bytes as u64;
            }
        }
        let Some(j) = self.journals.get_mut(&b.dev) else {
            return;
        };
        let Some(c) = j.open.values_mut().max_by_key(|c| c.commit.start_ns) else {
            return;
        };
        if b.comm.as_str().starts_with("jbd2/") {
            c.commit.journal_writes += 1;
            c.commit.journal_bytes += b.bytes as u64;
        }
        if b.rwbs.has(Rwbs::FLUSH) || b.rwbs.has(Rwbs::PREFLUSH) || b.rwbs.has(Rwbs::FUA) {
            c.commit.flushes += 1;
        }
    }

    pub fn finish(mut self, names: &ThreadNames) -> FsSummary {
        self.out.fsync.summarize();
        for (pid, mut s) in self.fsync_by_pid.drain() {
            s.summarize();
            self.out.fsync_by_process.insert(names.process(pid), s);
        }
        for (dev, m) in self.device_writes.drain() {
            self.out.device_writes.insert(dev.to_string(), m);
        }
        for (pid, ms) in self.paused_by_pid.drain() {
            self.out
                .dirty_throttle
                .by_process
                .insert(names.process(pid), ms);
        }
        for ((dev, pid), n) in self.checkpoints_by_pid.drain() {
            if let Some(j) = self.journals.get_mut(&dev) {
                j.out.checkpoints.by_process.insert(names.process(pid), n);
            }
        }
        for f in &mut self.out.slowest_fsyncs {
            if f.comm.is_empty() {
                f.comm = names.get(f.pid);
            }
        }
        for (dev, mut j) in self.journals {
            let per = |x: u64, n: u64| if n > 0 { x as f64 / n as f64 } else { 0.0 };
            let o = &mut j.out;
            if let Some(first) = j.first_commit {
                if j.last_commit > first {
                    o.commits_per_s =
                        (o.commits - 1) as f64 / ((j.last_commit - first) as f64 / 1e9);
                }
            }
            let sum = |d: &LatencyDist| (d.count() > 0).then(|| d.summary());
            o.phases = PhaseStats {
                total: sum(&j.total),
                locking: sum(&j.locking),
                flushing: sum(&j.flushing),
                logging: sum(&j.logging),
            };
            o.handles_per_commit = per(j.handles, j.run_stats);
            o.blocks_per_commit = per(j.blocks, j.run_stats);
            o.blocks_logged_per_commit = per(j.blocks_logged, j.run_stats);
            o.journal_writes_per_commit = per(j.writes, o.commits);
            o.flushes_per_commit = per(j.flushes, o.commits);
            self.out.journals.insert(dev.to_string(), j.out);
        }
        self.out
    }
}
