//! The layers above the block layer: syscalls, the slowest operations
//! with where their time went, the file system and its journal.

use super::*;

pub(super) fn call_table(
    out: &mut String,
    title: &str,
    rows: &std::collections::BTreeMap<String, crate::analyze::syscalls::CallStats>,
    all: bool,
) {
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(out, "==================== {title} ====================\n");
    let _ = writeln!(
        out,
        "{:<24} {:>9} {:>11} {:>10} {:>10} {:>10} {:>10}",
        "NAME", "count", "total ms", "p50 µs", "p99 µs", "p99.9 µs", "max µs"
    );
    let timed: Vec<(&String, &crate::analyze::syscalls::CallStats, &Percentiles)> = rows
        .iter()
        .filter_map(|(n, s)| s.latency.as_ref().map(|l| (n, s, l)))
        .collect();
    // Many rows (a thread each, for 64 writers): the slowest few, and the
    // range the others span.
    let shown: Vec<_> = if all || timed.len() <= ROWS_BEFORE_COLLAPSE {
        timed.clone()
    } else {
        let mut by_p99 = timed.clone();
        by_p99.sort_by_key(|(_, _, l)| std::cmp::Reverse(l.p99));
        by_p99.truncate(ROWS_WHEN_COLLAPSED);
        timed
            .iter()
            .filter(|(n, _, _)| by_p99.iter().any(|(m, _, _)| m == n))
            .cloned()
            .collect()
    };
    for (name, s, l) in &shown {
        let _ = writeln!(
            out,
            "{:<24} {:>9} {:>11.3} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
            Esc(name),
            s.count,
            ms(s.total_ns),
            l.p50 as f64 / 1e3,
            l.p99 as f64 / 1e3,
            l.p999 as f64 / 1e3,
            l.max as f64 / 1e3
        );
    }
    let rest: Vec<&Percentiles> = timed
        .iter()
        .filter(|(n, _, _)| !shown.iter().any(|(m, _, _)| m == n))
        .map(|(_, _, l)| *l)
        .collect();
    if !rest.is_empty() {
        let range = |f: fn(&Percentiles) -> u64| {
            let lo = rest.iter().map(|l| f(l)).min().unwrap_or(0);
            let hi = rest.iter().map(|l| f(l)).max().unwrap_or(0);
            format!("{:.1}-{:.1}", lo as f64 / 1e3, hi as f64 / 1e3)
        };
        let _ = writeln!(
            out,
            "… and {} more with p50 {} µs and p99 {} µs (the {ROWS_WHEN_COLLAPSED} with the highest p99 are above; --all prints every one)",
            rest.len(),
            range(|l| l.p50),
            range(|l| l.p99)
        );
    }
    out.push('\n');
    for (name, s, _) in &shown {
        let _ = writeln!(out, "{}:", Esc(name));
        out.push_str(&s.hist_us.render("usecs"));
        out.push('\n');
    }
}

/// A table of more rows than this shows only the slowest few…
const ROWS_BEFORE_COLLAPSE: usize = 8;
/// …this many, unless `--all`.
const ROWS_WHEN_COLLAPSED: usize = 5;

pub(super) fn syscalls(out: &mut String, s: &crate::analyze::syscalls::SyscallSummary, st: &Style) {
    call_table(
        out,
        "Probe operations (from their trace marks)",
        &s.operations,
        st.all,
    );
    let title = if s.recorded_command_only {
        "Syscalls of the recorded command (its processes and threads)"
    } else {
        "Syscalls"
    };
    call_table(out, title, &s.by_name, st.all);
    if !s.slowest.is_empty() {
        let _ = writeln!(out, "slowest calls:");
        for c in &s.slowest {
            let _ = writeln!(
                out,
                "  {:>12.3} ms  {:<16} {:>8} {:<16} at {}{}",
                ms(c.latency_ns),
                Esc(&c.name),
                c.pid,
                Esc(&c.comm),
                st.at(c.start_ns),
                c.ret.map(|r| format!(" = {r}")).unwrap_or_default()
            );
        }
        out.push('\n');
    }
}

/// io_uring's requests, when the trace recorded its events: each opcode's
/// latency from submission to completion, and how they were issued.
pub(super) fn io_uring(out: &mut String, u: &crate::analyze::outliers::UringSummary, st: &Style) {
    if !u.recorded {
        return;
    }
    call_table(
        out,
        "io_uring requests (submission to completion)",
        &u.by_op,
        st.all,
    );
    let _ = writeln!(
        out,
        "io_uring: {} submitted, {} completed ({} submitted before the trace); {} by an SQPOLL thread, {} punted to io-wq, {} armed for poll, {} failed, {} completions overflowed the CQ",
        u.submitted,
        u.completed,
        u.completed_unseen_submit,
        u.sq_thread,
        u.punted,
        u.polled,
        u.failed,
        u.cq_overflows
    );
    if u.ambiguous_ties > 0 {
        let _ = writeln!(
            out,
            "  {} bios of io-wq workers were tied to the oldest of several punted requests (a worker does not say which it runs)",
            u.ambiguous_ties
        );
    }
    out.push('\n');
}

/// A light capture's io_uring requests: each group's latency from
/// submission to completion, and what the programs counted of them.
pub(super) fn light_io_uring(
    out: &mut String,
    u: &crate::analyze::light::LightUringSummary,
    st: &Style,
) {
    if u.groups.is_empty() {
        return;
    }
    call_table(
        out,
        "io_uring requests (light capture: submission to completion)",
        &u.by_op,
        st.all,
    );
    let _ = writeln!(
        out,
        "io_uring: {} completed ({} not timed: submitted before the capture, or no room for their state), {} punted to io-wq, {} failed, {} completions of multishot requests before their last; which were submitted by an SQPOLL thread or armed for poll is not counted by a light capture",
        u.total(|g| g.counts.requests),
        u.total(|g| g.counts.untimed),
        u.total(|g| g.counts.punted),
        u.total(|g| g.counts.errors),
        u.total(|g| g.counts.more)
    );
    out.push('\n');
}

/// The user page faults, when the trace recorded them: file faults' and
/// the others' latency, and how many read their page from the device.
pub(super) fn faults(out: &mut String, f: &crate::analyze::outliers::FaultSummary, st: &Style) {
    if !f.recorded {
        return;
    }
    call_table(
        out,
        "page faults (start to the last event in the fault)",
        &f.by_kind,
        st.all,
    );
    let _ = writeln!(
        out,
        "faults: {} of the threads followed, {} on a file's page, {} of them major (read from the device); {}; {} untimed (no event after their start: not timed, not 0); {} cut short by the trace's end",
        f.faults,
        f.file,
        f.major,
        match f.in_kernel {
            Some(n) => format!("{n} taken by the kernel in a call"),
            None => "those the kernel took in a call not recorded (counts may be short)".into(),
        },
        f.untimed,
        f.cut_short
    );
    out.push('\n');
}

/// The page cache per device, when the trace recorded its events, with
/// the kernel's own counters over the recording where the snapshot has
/// them.
pub(super) fn page_cache(out: &mut String, c: &crate::analyze::cache::CacheSummary) {
    if !c.recorded {
        return;
    }
    let _ = writeln!(
        out,
        "==================== Page cache (by the files' device) ====================
"
    );
    let _ = writeln!(
        out,
        "{:<10} {:>10} {:>10} {:>10} {:>8} {:>10} {:>10} {:>10}",
        "DEV", "lookups", "hits", "misses", "hit %", "evicted", "refaults", "written"
    );
    for (dev, d) in &c.devices {
        let _ = writeln!(
            out,
            "{:<10} {:>10} {:>10} {:>10} {:>8} {:>10} {:>10} {:>10}",
            Esc(dev),
            d.lookups,
            d.hits,
            d.misses,
            d.hit_ratio
                .map(|r| format!("{:.1}", r * 100.0))
                .unwrap_or_else(|| "—".into()),
            d.evicted,
            d.refaults,
            d.added_by_writes
        );
    }
    let _ = writeln!(
        out,
        "(pages; hits are lookups that did not miss, as cachestat counts them; refaults: pages added again after reclaim evicted them in the trace)"
    );
    if !c.evicted_by.is_empty() {
        let by: Vec<String> = c
            .evicted_by
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        let who: Vec<String> = c
            .reclaimers
            .iter()
            .map(|(w, n)| format!("{} {n}", Esc(w)))
            .collect();
        let _ = writeln!(
            out,
            "evicted by: {}; reclaim run by: {}",
            by.join(", "),
            who.join(", ")
        );
    }
    let r = &c.operations_refaulting;
    if r.count > 0 {
        let _ = writeln!(
            out,
            "{} operations re-read {} evicted pages: {:.3} ms in all, {:.3} ms of it at the device",
            r.count,
            r.pages,
            ms(r.latency_ns),
            ms(r.device_ns)
        );
    }
    if c.evictions_forgotten > 0 {
        let _ = writeln!(
            out,
            "{} evicted pages were not remembered: their refaults are not counted",
            c.evictions_forgotten
        );
    }
    if let Some(k) = &c.kernel {
        let line: Vec<String> = k.iter().map(|(n, v)| format!("{n} {v}")).collect();
        let _ = writeln!(
            out,
            "the kernel over the recording (/proc/vmstat, the whole machine): {}",
            line.join(", ")
        );
    }
    out.push('\n');
}

pub(super) fn outliers(
    out: &mut String,
    o: &crate::analyze::outliers::OutliersSummary,
    st: &Style,
) {
    // The kinds whose slowest operation took at least 1 ms, slowest first.
    let mut kinds: Vec<(&String, &Vec<crate::analyze::outliers::Outlier>)> = o
        .by_kind
        .iter()
        .filter(|(_, l)| l.first().is_some_and(|x| x.latency_ns >= 1_000_000))
        .collect();
    if kinds.is_empty() {
        return;
    }
    kinds.sort_by_key(|(_, l)| std::cmp::Reverse(l[0].latency_ns));
    let _ = writeln!(
        out,
        "==================== Outliers: where the time of the slowest operations went ====================\n"
    );
    for (kind, list) in kinds {
        let _ = writeln!(out, "{} (slowest {}):", Esc(kind), list.len());
        if let Some(t) = o.totals.get(kind.as_str()) {
            let mut parts: Vec<(&str, f64)> = t
                .percent
                .iter()
                .filter(|(_, p)| **p >= 0.1)
                .map(|(k, p)| (*k, *p))
                .collect();
            parts.sort_by(|a, b| b.1.total_cmp(&a.1));
            let parts: Vec<String> = parts
                .iter()
                .map(|(k, p)| format!("{p:.1}% {}", crate::analyze::outliers::describe_part(k)))
                .collect();
            let _ = writeln!(
                out,
                "  all {} of them, {:.3} s in total: {}",
                t.count,
                t.latency_ns as f64 / 1e9,
                parts.join(", ")
            );
        }
        for x in list {
            let _ = writeln!(
                out,
                "  {:>8} {:<16} at {}  {}",
                x.pid,
                Esc(&x.comm),
                st.at(x.start_ns),
                Esc(&x.summary)
            );
            if let Some(b) = &x.blocked_in {
                let _ = writeln!(out, "           {}", Esc(&blocked_in(b)));
            }
        }
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "(kinds whose slowest operation took under 1 ms are left out here; all are in --format json)\n"
    );
}

pub(super) fn filesystem(
    out: &mut String,
    f: &crate::analyze::fs::FsSummary,
    recorded: &crate::analyze::coverage::Recorded,
    writes_seen: bool,
    st: &Style,
) {
    call_table(
        out,
        "fsync in the filesystem (ext4_sync_file)",
        &f.fsync_by_process,
        st.all,
    );
    if !f.slowest_fsyncs.is_empty() {
        let _ = writeln!(out, "slowest fsyncs:");
        for c in &f.slowest_fsyncs {
            let _ = writeln!(
                out,
                "  {:>12.3} ms  {:>8} {:<16} dev {} ino {}{} at {}",
                ms(c.latency_ns),
                c.pid,
                Esc(&c.comm),
                Esc(&c.dev),
                c.ino,
                if c.datasync { " (datasync)" } else { "" },
                st.at(c.start_ns)
            );
        }
        out.push('\n');
    }
    for (dev, j) in &f.journals {
        journal(out, dev, j, recorded, writes_seen, st);
    }
}

/// One jbd2 journal: commits and their phases, checkpoints, the slowest commits.
/// Unknown is not zero: the journal's writes and flushes need the block
/// events, its commit phases their own jbd2 events; without them the
/// figures say "not recorded".
fn journal(
    out: &mut String,
    dev: &str,
    j: &crate::analyze::fs::JournalSummary,
    recorded: &crate::analyze::coverage::Recorded,
    writes_seen: bool,
    st: &Style,
) {
    use crate::model::Tracepoint;
    let phases_seen = recorded.saw(Tracepoint::Jbd2CommitLocking);
    let _ = writeln!(
        out,
        "==================== Journal {} (jbd2) ====================\n",
        Esc(dev)
    );
    let _ = writeln!(
        out,
        "commits: {} ({} sync), {:.1}/s; per commit: {:.1} handles (max {}), {:.1} blocks, {:.1} logged, {}",
        j.commits,
        j.sync_commits,
        j.commits_per_s,
        j.handles_per_commit,
        j.max_handles_per_commit,
        j.blocks_per_commit,
        j.blocks_logged_per_commit,
        match writes_seen {
            true => format!(
                "{:.1} journal writes, {:.1} flushes",
                j.journal_writes_per_commit, j.flushes_per_commit
            ),
            false => "journal writes and flushes not recorded (no block events one by one)".to_string(),
        }
    );
    let phases = [
        ("commit", &j.phases.total),
        ("  locking", &j.phases.locking),
        ("  flushing", &j.phases.flushing),
        ("  logging", &j.phases.logging),
    ];
    let _ = writeln!(
        out,
        "{:<12} {:>8} {:>10} {:>10} {:>10} {:>10}",
        "PHASE", "count", "avg ms", "p50 ms", "p99 ms", "max ms"
    );
    for (name, p) in phases {
        if let Some(p) = p {
            let _ = writeln!(
                out,
                "{:<12} {:>8} {:>10.3} {:>10.3} {:>10.3} {:>10.3}",
                name,
                p.count,
                p.avg / 1e6,
                ms(p.p50),
                ms(p.p99),
                ms(p.max)
            );
        }
    }
    let c = &j.checkpoints;
    let _ = writeln!(
        out,
        "checkpoints: {} passes, {} transactions ({} buffers written, {} dropped); log tail updates {}; buffer lock stalls {}",
        c.passes, c.transactions, c.written, c.dropped, j.log_tail_updates, j.lock_buffer_stalls
    );
    for (who, n) in &c.by_process {
        let _ = writeln!(out, "  checkpointed by {}: {n}", Esc(who));
    }
    if !j.handle_starts.is_empty() {
        let list: Vec<String> = j
            .handle_starts
            .iter()
            .map(|(t, n)| format!("{} {n}", Esc(t)))
            .collect();
        let _ = writeln!(out, "handle starts by type: {}", list.join(", "));
    }
    if !j.slowest_commits.is_empty() {
        let _ = writeln!(out, "slowest commits:");
        for c in j.slowest_commits.iter().take(5) {
            let phases = match phases_seen {
                true => format!(
                    "locking {:.3}, flushing {:.3}, logging {:.3} ms",
                    ms(c.locking_ns),
                    ms(c.flushing_ns),
                    ms(c.logging_ns)
                ),
                false => "phases not recorded".to_string(),
            };
            let writes = match writes_seen {
                true => format!(
                    "{} journal writes, {} KiB, {} flushes",
                    c.journal_writes,
                    c.journal_bytes / 1024,
                    c.flushes
                ),
                false => "writes not recorded".to_string(),
            };
            let _ = writeln!(
                out,
                "  {:>10.3} ms  transaction {} at {} ({phases}; {writes})",
                ms(c.total_ns),
                c.transaction,
                st.at(c.start_ns),
            );
        }
    }
    out.push('\n');
}

/// `blocked 12.3 ms (4 times) in add_transaction_credits <-
/// start_this_handle <- …` (innermost first, the first six frames).
fn blocked_in(b: &crate::analyze::stacks::BlockedIn) -> String {
    let mut frames: Vec<&str> = b.frames.iter().take(6).map(String::as_str).collect();
    if b.frames.len() > 6 {
        frames.push("…");
    }
    format!(
        "blocked {:.2} ms ({} {}) in {}",
        b.ns as f64 / 1e6,
        b.stretches,
        if b.stretches == 1 { "time" } else { "times" },
        frames.join(" <- ")
    )
}

/// Driver commands matched to their requests: D2C split at the device.
pub(super) fn driver(out: &mut String, d: &crate::analyze::driver::DriverSummary, st: &Style) {
    if d.devices.is_empty() && d.unmatched_commands == 0 {
        return;
    }
    let _ = writeln!(
        out,
        "==================== Below the block layer (driver events) ====================\n"
    );
    let p = |x: &crate::analyze::histogram::Percentiles| {
        format!(
            "p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
            ms(x.p50),
            ms(x.p99),
            ms(x.max)
        )
    };
    for dev in &d.devices {
        let driver = dev.driver.map_or("", |d| d.name());
        let _ = writeln!(
            out,
            "{} ({driver}): {} requests with a driver command",
            Esc(&dev.device),
            dev.commands
        );
        let _ = writeln!(out, "  issue -> driver start:  {}", p(&dev.before_device));
        let _ = writeln!(out, "  in the device:          {}", p(&dev.in_device));
        if dev.after_device.count > 0 {
            let _ = writeln!(out, "  device end -> complete: {}", p(&dev.after_device));
        }
    }
    if !d.slowest.is_empty() {
        let _ = writeln!(out, "\nlongest in the device:");
        for c in &d.slowest {
            let _ = writeln!(
                out,
                "  {} sector {} + {} ({}): {:.3} ms in the device, {:.3} ms after the issue at {}",
                Esc(&c.device),
                c.sector,
                c.bytes / 512,
                Esc(&c.command),
                ms(c.device_ns),
                ms(c.before_device_ns),
                st.at(c.issue_ns)
            );
        }
    }
    if d.unmatched_commands > 0 || d.ends_without_start > 0 {
        let _ = writeln!(
            out,
            "  ({} commands without a request at their sector, {} ends without a start)",
            d.unmatched_commands, d.ends_without_start
        );
    }
    out.push('\n');
}
