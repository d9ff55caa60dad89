//! The rules, one function each.

use super::{device_settings, Finding, Rule, Severity, Verdict};
use crate::analyze::Analysis;
use serde_json::json;

pub static CATALOG: &[Rule] = &[
    Rule {
        id: "merges_disabled",
        looks_for: "sequential bios issued one by one as small requests (no merging)",
        check: merges_disabled,
    },
    Rule {
        id: "request_splitting",
        looks_for: "bios split into several requests (larger than the device's max_sectors_kb)",
        check: request_splitting,
    },
    Rule {
        id: "journal_space_stall",
        looks_for: "writers checkpointing the journal themselves: waiting for journal space",
        check: journal_space_stall,
    },
    Rule {
        id: "dirty_throttling",
        looks_for: "writers paused by balance_dirty_pages (the dirty page limit)",
        check: dirty_throttling,
    },
    Rule {
        id: "device_latency_spike",
        looks_for: "an operation far slower than its median, nearly all of it device time",
        check: device_latency_spike,
    },
    Rule {
        id: "rt_starvation",
        looks_for: "threads runnable for long while a real-time task held their CPU",
        check: rt_starvation,
    },
    Rule {
        id: "wbt_throttling",
        looks_for:
            "writeback throttling (wbt) holding writes to a small depth because reads look slow",
        check: wbt_throttling,
    },
    Rule {
        id: "cgroup_io_throttle",
        looks_for: "bios held by a cgroup I/O limit (blk-throttle) before they reach the device",
        check: cgroup_io_throttle,
    },
    Rule {
        id: "queue_saturation",
        looks_for: "a busy device whose requests mostly wait behind others",
        check: queue_saturation,
    },
    Rule {
        id: "scheduler_overhead",
        looks_for: "requests held inside the I/O scheduler between insert and dispatch",
        check: scheduler_overhead,
    },
    Rule {
        id: "readahead_small",
        looks_for:
            "sequential buffered reads missing the page cache page by page (readahead too small)",
        check: readahead_small,
    },
    Rule {
        id: "sync_write_amplification",
        looks_for:
            "small synced writes costing the device several times their size in journal and flushes",
        check: sync_write_amplification,
    },
];

/// A device's queue settings directory: by name when the snapshot knows
/// it, else /sys/dev/block/MAJ:MIN (the device's sysfs directory).
fn queue_dir(name: Option<&str>, dev: &str) -> String {
    match name {
        Some(n) => format!("/sys/block/{n}/queue"),
        None => format!("/sys/dev/block/{}/queue", dev.replace(',', ":")),
    }
}

fn not(why: impl Into<String>) -> Verdict {
    Verdict::NotFired(why.into())
}

/// Why no device or journal qualified, or `nothing` when there was none
/// to judge.
fn not_any(why: Vec<String>, nothing: impl Into<String>) -> Verdict {
    if why.is_empty() {
        not(nothing)
    } else {
        not(why.join("; "))
    }
}

fn ms(ns: u64) -> f64 {
    (ns as f64 / 1e4).round() / 100.0
}

/// Case 1: sequential I/O that the block layer did not merge.
fn merges_disabled(a: &Analysis) -> Verdict {
    const MIN_BIOS: u64 = 64;
    let mut why = Vec::new();
    for d in &a.block.devices {
        let q = d.actions.queued;
        let Some(m) = &d.btt_merge else {
            why.push(format!(
                "{}: the trace holds no queued bios (Q), only {} completions: merging cannot be judged (record block_bio_queue and block_rq_issue)",
                d.device,
                d.actions.completed
            ));
            continue;
        };
        if q < MIN_BIOS {
            why.push(format!(
                "{}: only {q} {} queued (at least {MIN_BIOS} are needed to judge merging)",
                d.device,
                if q == 1 { "bio" } else { "bios" }
            ));
            continue;
        }
        let seq = d.sequential_bios as f64 / q as f64;
        if seq < 0.5 {
            why.push(format!(
                "{}: {:.0}% of bios are sequential: little to merge",
                d.device,
                seq * 100.0
            ));
            continue;
        }
        let together = d.back_to_back_sequential_bios as f64 / q as f64;
        if together < 0.25 {
            why.push(format!(
                "{}: {:.0}% of bios are sequential but only {:.0}% were queued before the previous one completed: one bio at a time, nothing to merge (a synchronous reader: see readahead_small)",
                d.device,
                seq * 100.0,
                together * 100.0
            ));
            continue;
        }
        if m.ratio > 1.1 {
            why.push(format!(
                "{}: sequential bios do merge ({:.1} bios per request)",
                d.device, m.ratio
            ));
            continue;
        }
        let nomerges = queue_setting(a, &d.device, "nomerges");
        let name = device_name(a, &d.device);
        let confirmed = matches!(nomerges.as_deref(), Some("1") | Some("2"));
        let severity = if confirmed || (seq > 0.8 && m.ratio < 1.05) {
            Severity::Critical
        } else {
            Severity::Warning
        };
        let queue = queue_dir(name.as_deref(), &d.device);
        return Verdict::Fired(Finding {
            id: "merges_disabled",
            severity,
            title: format!(
                "{}: {:.0}% of bios are sequential but each became its own {}-sector request",
                name.as_deref().unwrap_or(&d.device),
                seq * 100.0,
                m.blk_avg
            ),
            evidence: json!({
                "device": d.device,
                "bios_queued": q,
                "sequential_bios": d.sequential_bios,
                "requests_issued": m.issued,
                "bios_per_request": m.ratio,
                "avg_request_sectors": m.blk_avg,
                "nomerges": nomerges,
            }),
            explanation: format!(
                "Adjacent bios normally merge into large requests (case 1: 32 bios of 8 sectors became one of 256). Here {q} bios became {} requests of {} sectors on average, so the device gets {:.0}x more commands than it would with merging{}.",
                m.issued,
                m.blk_avg,
                256.0 / m.blk_avg.max(1) as f64,
                match nomerges.as_deref() {
                    Some("2") => "; the device's nomerges is 2 (all merging off)",
                    Some("1") => "; the device's nomerges is 1 (only simple merges)",
                    Some(_) => "; nomerges is 0, so look at the submitter (each bio in its own plug, or a stacked device that does not merge)",
                    None => "",
                }
            ),
            workaround: format!("echo 0 > {queue}/nomerges"),
        });
    }
    not_any(why, "no block requests in the trace")
}

/// Bios cut into several requests: each piece is a command of its own.
fn request_splitting(a: &Analysis) -> Verdict {
    let mut why = Vec::new();
    for d in &a.block.devices {
        let (q, x) = (d.actions.queued, d.actions.split);
        if x < 16 || (x as f64) < 0.1 * q as f64 {
            why.push(format!("{}: {x} splits of {q} queued bios", d.device));
            continue;
        }
        let num = |k: &str| queue_setting(a, &d.device, k).and_then(|v| v.parse::<u64>().ok());
        let (max_kb, hw_kb) = (num("max_sectors_kb"), num("max_hw_sectors_kb"));
        let lowered = matches!((max_kb, hw_kb), (Some(m), Some(h)) if m < h);
        let pieces = (q + x) as f64 / q.max(1) as f64;
        let name = device_name(a, &d.device);
        let queue = queue_dir(name.as_deref(), &d.device);
        return Verdict::Fired(Finding {
            id: "request_splitting",
            severity: if lowered && pieces >= 4.0 {
                Severity::Critical
            } else {
                Severity::Warning
            },
            title: format!(
                "{}: {q} bios were split {x} times ({pieces:.1} requests per bio){}",
                name.as_deref().unwrap_or(&d.device),
                max_kb
                    .map(|m| format!(", max_sectors_kb is {m}"))
                    .unwrap_or_default()
            ),
            evidence: json!({
                "device": d.device,
                "bios_queued": q,
                "splits": x,
                "requests_per_bio": pieces,
                "avg_request_sectors": d.btt_merge.as_ref().map(|m| m.blk_avg),
                "max_sectors_kb": max_kb,
                "max_hw_sectors_kb": hw_kb,
            }),
            explanation: format!(
                "A bio larger than the queue's limit is cut into pieces that travel as separate requests: the device gets {pieces:.1} commands per I/O instead of one, each with its own overhead{}.",
                if lowered {
                    " — and the limit here is below what the hardware takes"
                } else {
                    ""
                }
            ),
            workaround: match hw_kb {
                Some(h) if lowered => format!("echo {h} > {queue}/max_sectors_kb"),
                _ => format!(
                    "issue smaller I/O, or raise {queue}/max_sectors_kb up to max_hw_sectors_kb"
                ),
            },
        });
    }
    not_any(why, "no block requests in the trace")
}

/// Case 2: writers wait for journal space while they checkpoint it.
fn journal_space_stall(a: &Analysis) -> Verdict {
    let mut why = Vec::new();
    for (dev, j) in &a.fs.journals {
        let c = &j.checkpoints;
        let by_writers: u64 = c
            .by_process
            .iter()
            .filter(|(who, _)| !who.starts_with("jbd2/"))
            .map(|(_, n)| n)
            .sum();
        if by_writers == 0 {
            why.push(format!(
                "journal {dev}: {} commits, no checkpoint by a writer thread",
                j.commits
            ));
            continue;
        }
        // How much of the writers' syscall time it cost, when the capture
        // can tell (scheduler and block events present).
        let share = [
            "syscall fsync",
            "syscall pwrite64",
            "syscall write",
            "syscall fdatasync",
        ]
        .iter()
        .filter_map(|k| a.outliers.totals.get(*k))
        .map(|t| (t.breakdown.journal_space_ns, t.latency_ns))
        .fold((0u64, 0u64), |x, y| (x.0 + y.0, x.1 + y.1));
        let pct = (share.1 > 0).then(|| share.0 as f64 * 100.0 / share.1 as f64);
        let severity = if by_writers >= 10 || pct.is_some_and(|p| p >= 2.0) {
            Severity::Critical
        } else {
            Severity::Warning
        };
        let journal = a.snapshot.as_ref().and_then(|s| {
            let prefix = format!("{}-", device_name(a, dev)?);
            s.before
                .jbd2
                .iter()
                .find(|(k, _)| k.starts_with(&prefix))
                .map(|(_, v)| v.lines().next().unwrap_or("").to_string())
        });
        return Verdict::Fired(Finding {
            id: "journal_space_stall",
            severity,
            title: format!(
                "journal {dev} ran out of space: writer threads checkpointed it {by_writers} times{}",
                pct.map(|p| format!(", {p:.1}% of their write and fsync time"))
                    .unwrap_or_default()
            ),
            evidence: json!({
                "journal": dev,
                "commits": j.commits,
                "commits_per_s": j.commits_per_s,
                "checkpoint_passes_by_writers": by_writers,
                "checkpointed_transactions": c.transactions,
                "checkpoint_by_process": c.by_process,
                "journal_space_percent_of_write_and_fsync_time": pct,
                "jbd2_info": journal,
            }),
            explanation: "When the journal has no room for a new transaction, the task that needs it must first write back (checkpoint) older transactions' blocks, and every other writer waits (case 2: 93% of the time under add_transaction_credits, D-state in __jbd2_log_wait_for_space). A small journal, or more and smaller transactions (dioread_nolock), make it happen often.".into(),
            workaround: format!(
                "give the file system a larger journal (unmounted: tune2fs -O ^has_journal DEV && tune2fs -J size=1024 DEV), or mount with -o dioread_lock (case 2's fix); journal {dev} now: {}",
                journal.unwrap_or_else(|| "size unknown (no snapshot)".into())
            ),
        });
    }
    not_any(
        why,
        "no jbd2 events in the trace (record the `fs` event set)",
    )
}

/// Writers paused because dirty pages reached the limit.
fn dirty_throttling(a: &Analysis) -> Verdict {
    let d = &a.fs.dirty_throttle;
    let recorded = d.events > 0
        || a.wbt.events > 0
        || a.unknown_events
            .keys()
            .any(|k| k.starts_with("writeback:") || k.starts_with("wbt:"));
    if !recorded {
        return not("no writeback events in the trace (record the `writeback` event set)");
    }
    let span_ms = span_ns(a) as f64 / 1e6;
    let share = if span_ms > 0.0 {
        d.pause_ms_total as f64 * 100.0 / span_ms
    } else {
        0.0
    };
    if d.pause_ms_total < 20 || share < 5.0 {
        return not(format!(
            "writers were paused {} ms in all ({share:.1}% of the trace's {span_ms:.0} ms)",
            d.pause_ms_total
        ));
    }
    let setting = |k: &str| {
        let vm = &a.snapshot.as_ref()?.before.vm;
        vm.get(k)?.as_deref().map(|x| x.trim().to_string())
    };
    let (bytes, ratio) = (setting("dirty_bytes"), setting("dirty_ratio"));
    let (who, ms_most) = d
        .by_process
        .iter()
        .max_by_key(|(_, ms)| **ms)
        .map(|(w, ms)| (w.clone(), *ms))
        .unwrap_or_default();
    let limit = match (&bytes, &ratio) {
        (Some(b), _) if b != "0" => format!("vm.dirty_bytes = {b}"),
        (_, Some(r)) => format!("vm.dirty_ratio = {r}"),
        _ => "the dirty limit".into(),
    };
    Verdict::Fired(Finding {
        id: "dirty_throttling",
        severity: if share >= 20.0 {
            Severity::Critical
        } else {
            Severity::Warning
        },
        title: format!(
            "writers were paused {} ms by the dirty page limit ({share:.0}% of the trace), most of it {who} ({ms_most} ms)",
            d.pause_ms_total
        ),
        evidence: json!({
            "pauses": d.events,
            "pause_ms_total": d.pause_ms_total,
            "max_pause_ms": d.max_pause_ms,
            "percent_of_trace": share,
            "by_process": d.by_process,
            "limit_pages": d.limit_pages,
            "max_dirty_pages": d.max_dirty_pages,
            "vm_dirty_bytes": bytes,
            "vm_dirty_ratio": ratio,
        }),
        explanation: format!(
            "A task that dirties page cache faster than writeback cleans it is put to sleep in balance_dirty_pages once dirty pages near the limit ({} pages here, {limit}): buffered writes then go at the device's writeback speed, in pauses.",
            d.limit_pages
        ),
        workaround: format!(
            "if the limit is low on purpose, expect device speed; otherwise raise it: sysctl -w vm.dirty_bytes=0 vm.dirty_ratio=20 (now {limit})"
        ),
    })
}

/// The snapshot's name of a block device (`MAJ,MIN`).
fn device_name(a: &Analysis, dev: &str) -> Option<String> {
    device_settings(a, dev).map(|(n, _)| n.to_string())
}

/// Case 4: an operation far slower than usual, nearly all of it spent
/// waiting for the device.
fn device_latency_spike(a: &Analysis) -> Verdict {
    const MIN_NS: u64 = 50_000_000;
    let mut best: Option<(&str, &crate::analyze::outliers::Outlier, u64)> = None;
    let mut why = Vec::new();
    for (kind, list) in &a.outliers.by_kind {
        let Some(o) = list.first() else { continue };
        let median = median_of(a, kind).unwrap_or(0);
        if o.latency_ns < MIN_NS {
            continue;
        }
        // Blocked with a request at the device, inside a checkpoint or not.
        let device: u64 = o.breakdown.device_ns.values().sum();
        let share = device as f64 / o.latency_ns.max(1) as f64;
        if share < 0.8 {
            why.push(format!(
                "slowest {kind} ({} ms) was {:.0}% device time",
                ms(o.latency_ns),
                share * 100.0
            ));
            continue;
        }
        // One request must have held it: device time spread over many
        // short requests is a busy device (queue_saturation), not a spike.
        let longest = o.main_request.as_ref().map(|r| r.overlap_ns).unwrap_or(0);
        if (longest as f64) < 0.5 * o.latency_ns as f64 {
            why.push(format!(
                "slowest {kind} ({} ms) was {:.0}% device time, but no one request held it: the longest it waited for covers {} ms ({:.0}%), a busy device rather than a slow request (see queue_saturation)",
                ms(o.latency_ns),
                share * 100.0,
                ms(longest),
                longest as f64 * 100.0 / o.latency_ns.max(1) as f64
            ));
            continue;
        }
        if median > 0 && o.latency_ns < 10 * median {
            why.push(format!(
                "slowest {kind} ({} ms) is under 10x its median ({} ms)",
                ms(o.latency_ns),
                ms(median)
            ));
            continue;
        }
        // Time "at the device" while the thread that would complete the
        // request could not run: the CPU was the bottleneck, not the device.
        let (from, to) = (o.start_ns, o.start_ns + o.latency_ns);
        if let Some(w) = rt_held_waits(a).find(|w| w.start_ns < to && w.start_ns + w.wait_ns > from)
        {
            let h = &w.held_by[0];
            why.push(format!(
                "slowest {kind} ({} ms) overlaps {} ({})'s {} ms wait for CPU {} held by real-time {} ({}): completion work was starved (rt_starvation), not the device",
                ms(o.latency_ns),
                w.comm,
                w.pid,
                ms(w.wait_ns),
                w.cpu,
                h.comm,
                h.pid
            ));
            continue;
        }
        if best.is_none_or(|b| o.latency_ns > b.1.latency_ns) {
            best = Some((kind, o, median));
        }
    }
    let Some((kind, o, median)) = best else {
        return if why.is_empty() {
            not(format!(
                "no operation took {} ms or more",
                MIN_NS / 1_000_000
            ))
        } else {
            not(why.join("; "))
        };
    };
    let spikes = a.outliers.by_kind[kind]
        .iter()
        .filter(|x| {
            x.latency_ns >= MIN_NS && x.percent.get("device").copied().unwrap_or(0.0) >= 80.0
        })
        .count();
    let r = o.main_request.as_ref();
    Verdict::Fired(Finding {
        id: "device_latency_spike",
        severity: Severity::Critical,
        title: format!(
            "{kind}: {} ms instead of {} ms, {:.0}% of it waiting for the device{}",
            ms(o.latency_ns),
            ms(median),
            o.percent.get("device").copied().unwrap_or(0.0),
            r.map(|r| format!(" ({} {})", r.class, r.dev)).unwrap_or_default()
        ),
        evidence: json!({
            "operation": kind,
            "latency_ns": o.latency_ns,
            "median_ns": median,
            "spikes_in_top": spikes,
            "device_percent": o.percent.get("device"),
            "cpu_idle_percent": o.cpu_idle_percent,
            "request": r,
            "summary": o.summary,
        }),
        explanation: format!(
            "The operation was blocked while one request sat at the device{}, and its CPU was idle {:.0}% of that time: neither the CPU nor the scheduler held it up, the device did (case 4: an eMMC took 270 ms for one journal write).",
            r.and_then(|r| r.d2c_ns).map(|d| format!(" for {} ms", ms(d))).unwrap_or_default(),
            o.cpu_idle_percent
        ),
        workaround: "take the synchronous write off the latency-critical path (a separate I/O thread, or an asynchronous commit such as PostgreSQL's synchronous_commit=off), or replace the device; confirm with iosleuth probe fsync --path FILE --stop-above 50".into(),
    })
}

/// The median latency of a kind of operation, from the syscall tables.
fn median_of(a: &Analysis, kind: &str) -> Option<u64> {
    let s = &a.syscalls;
    let stats = if let Some(n) = kind.strip_prefix("syscall ") {
        s.by_name.get(n)
    } else if let Some(n) = kind.strip_prefix("probe ") {
        s.operations.get(n)
    } else if kind == "ext4_sync_file" {
        Some(&a.fs.fsync)
    } else {
        None
    };
    stats.and_then(|c| c.latency.as_ref()).map(|p| p.p50)
}

/// Runqueue waits of at least 10 ms, mostly held by a real-time task.
fn rt_held_waits(a: &Analysis) -> impl Iterator<Item = &crate::analyze::sched::LongWait> {
    a.sched.long_waits.iter().filter(|w| {
        w.wait_ns >= 10_000_000
            && w.held_by
                .first()
                .is_some_and(|h| h.policy == "RT" && h.ns as f64 >= 0.8 * w.wait_ns as f64)
    })
}

/// Case 3: runnable threads kept off their CPU by a real-time task.
fn rt_starvation(a: &Analysis) -> Verdict {
    let waits: Vec<_> = rt_held_waits(a).collect();
    if waits.is_empty() {
        if a.sched.switches == 0 {
            return not("no scheduler events in the trace (record the `sched` event set)");
        }
        return not(match a.sched.long_waits.first() {
            Some(w) => format!(
                "the longest runqueue wait, {} ms of {} ({}), was held by {}",
                ms(w.wait_ns),
                w.comm,
                w.pid,
                w.held_by
                    .first()
                    .map(|h| format!("{} {} ({}, prio {})", h.comm, h.pid, h.policy, h.prio))
                    .unwrap_or_else(|| "nobody seen".into())
            ),
            None => "no runqueue wait long enough to matter".into(),
        });
    }
    let w = waits[0];
    let h = &w.held_by[0];
    let rt = a
        .snapshot
        .as_ref()
        .and_then(|s| s.before.sched.get("sched_rt_runtime_us").cloned().flatten());
    Verdict::Fired(Finding {
        id: "rt_starvation",
        severity: Severity::Critical,
        title: format!(
            "{} ({}) waited {} ms for CPU {} while real-time {} ({}, prio {}) ran: {} such waits",
            w.comm,
            w.pid,
            ms(w.wait_ns),
            w.cpu,
            h.comm,
            h.pid,
            h.prio,
            waits.len()
        ),
        evidence: json!({
            "victim": {"pid": w.pid, "comm": w.comm, "cpu": w.cpu},
            "longest_wait_ns": w.wait_ns,
            "waits_over_10ms": waits.len(),
            "held_by": w.held_by,
            "sched_rt_runtime_us": rt,
        }),
        explanation: "A real-time (SCHED_FIFO/RR) task runs until it blocks; a normal thread that shares its CPU waits, runnable, however urgent its I/O (case 3: kernel threads that complete I/O starved by an RT task after a kernel upgrade changed where they run).".into(),
        workaround: format!(
            "keep the RT task off that CPU or lower it: taskset -pc OTHER_CPUS {} / chrt -o -p 0 {}; keep RT throttling on (sysctl kernel.sched_rt_runtime_us=950000)",
            h.pid, h.pid
        ),
    })
}

/// A queue setting of a device from the snapshot, as text ("[bfq]" → "bfq").
fn queue_setting(a: &Analysis, dev: &str, key: &str) -> Option<String> {
    device_settings(a, dev)?.1.setting(key)
}

/// The block analysis of a device (`MAJ,MIN`).
fn block_device<'a>(
    a: &'a Analysis,
    dev: &str,
) -> Option<&'a crate::analyze::block::DeviceSummary> {
    a.block.devices.iter().find(|d| d.device == dev)
}

fn span_ns(a: &Analysis) -> u64 {
    a.span.last_ns.saturating_sub(a.span.first_ns)
}

/// Writeback throttling cut the writes a device may have in flight.
fn wbt_throttling(a: &Analysis) -> Verdict {
    let mut why = Vec::new();
    let span = span_ns(a).max(1);
    for (dev, w) in &a.wbt.devices {
        if w.steps == 0 {
            continue;
        }
        let share = w.stepped_down_ns as f64 * 100.0 / span as f64;
        if w.max_step <= 0 || w.stepped_down_ns < 100_000_000 || share < 10.0 {
            why.push(format!(
                "{dev}: wbt stepped down {} ms ({share:.0}% of the trace; highest step {}, smallest write depth {})",
                ms(w.stepped_down_ns),
                w.max_step,
                w.min_max_depth.unwrap_or(0)
            ));
            continue;
        }
        let depth = w.min_max_depth.unwrap_or(0);
        let writes = block_device(a, dev)
            .map(|d| d.write_waits)
            .unwrap_or_default();
        let target = queue_setting(a, dev, "wbt_lat_usec");
        let name = device_name(a, dev);
        let queue = queue_dir(name.as_deref(), dev);
        return Verdict::Fired(Finding {
            id: "wbt_throttling",
            severity: if depth <= 2 && share >= 25.0 {
                Severity::Critical
            } else {
                Severity::Warning
            },
            title: format!(
                "{}: writeback throttling cut writes in flight to {depth} for {} ms ({share:.0}% of the trace){}",
                name.as_deref().unwrap_or(dev),
                ms(w.stepped_down_ns),
                match &target {
                    Some(t) => format!(
                        ": reads took {} µs against its {t} µs target",
                        w.max_read_latency_us
                    ),
                    None => String::new(),
                }
            ),
            evidence: json!({
                "device": dev,
                "highest_step": w.max_step,
                "smallest_write_depth": depth,
                "smallest_background_depth": w.min_background_depth,
                "stepped_down_ms": ms(w.stepped_down_ns),
                "percent_of_trace": share,
                "windows_over_target": w.latency_exceeded,
                "max_read_latency_us": w.max_read_latency_us,
                "wbt_lat_usec": target,
                "write_bios": writes.bios,
                "writes_waiting_1ms_or_more": writes.over_1ms,
                "write_wait_ms": ms(writes.q2g.total_ns),
                "write_wait_max_ms": ms(writes.q2g.max_ns),
            }),
            explanation: format!(
                "blk-wbt watches read latency in windows; when the fastest read of a window is slower than wbt_lat_usec it halves the writes allowed in flight, step by step down to 1, and writers (sync writes and background writeback) sleep before they get a request. Here {} windows were over the target and writes were held to a depth of {depth}: write throughput falls to what one request at a time gives.",
                w.latency_exceeded
            ),
            workaround: format!(
                "if the reads' latency is normal for this device, the target is too low: echo 0 > {queue}/wbt_lat_usec (wbt off) or set a realistic target, e.g. echo 75000 > {queue}/wbt_lat_usec"
            ),
        });
    }
    not_any(why, "no wbt_step events: wbt never changed its limits (or the `writeback` event set was not recorded)")
}

/// The cgroup limits of a device (`MAJ:MIN`) in the snapshot, by cgroup.
fn cgroup_limits(a: &Analysis, dev: &str) -> Vec<(String, String, String)> {
    let colon = dev.replace(',', ":");
    let Some(all) = a.snapshot.as_ref().map(|s| &s.before.cgroup_io_limits) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (cg, files) in all {
        for (file, text) in files {
            for line in text.lines() {
                if line.split_whitespace().next() == Some(colon.as_str()) {
                    out.push((cg.clone(), file.clone(), line.to_string()));
                }
            }
        }
    }
    out
}

/// Bios held back by a cgroup's I/O limit (blk-throttle).
fn cgroup_io_throttle(a: &Analysis) -> Verdict {
    let t = &a.cgroup_throttle;
    if t.dispatch_runs == 0 {
        return not(if a.workqueue.functions.is_empty() {
            "no workqueue events in the trace (record the `workqueue` event set): bios held by blk-throttle cannot be told apart".to_string()
        } else {
            "blk-throttle's dispatch work never ran: no bio was held by a cgroup limit".to_string()
        });
    }
    let Some((dev, d)) = t.devices.iter().max_by_key(|(_, d)| d.bios) else {
        return not(format!(
            "blk-throttle's dispatch work ran {} times but queued no bio",
            t.dispatch_runs
        ));
    };
    // Every bio the device queued, held or not.
    let all_bios = block_device(a, dev).map_or(d.bios, |x| x.actions.queued);
    let share = d.bios as f64 * 100.0 / all_bios.max(1) as f64;
    let secs = d.last_ns.saturating_sub(d.first_ns) as f64 / 1e9;
    let rate = (secs > 0.0).then(|| d.bytes as f64 / secs / 1024.0 / 1024.0);
    let limits = cgroup_limits(a, dev);
    let name = device_name(a, dev);
    let workaround = match limits.first() {
        Some((cg, file, line)) if file == "io.max" => format!(
            "raise or lift the limit ({line} in {cg}/io.max): echo \"{} rbps=max wbps=max riops=max wiops=max\" > {cg}/io.max",
            dev.replace(',', ":")
        ),
        Some((cg, file, line)) => format!(
            "raise or lift the limit ({line} in {cg}/{file}): echo \"{} 0\" > {cg}/{file}",
            dev.replace(',', ":")
        ),
        None => format!(
            "find the cgroup limit on {} (io.max in cgroup v2, blkio.throttle.* in v1) and raise it",
            dev.replace(',', ":")
        ),
    };
    Verdict::Fired(Finding {
        id: "cgroup_io_throttle",
        severity: if share >= 50.0 {
            Severity::Critical
        } else {
            Severity::Warning
        },
        title: format!(
            "{}: {} of {} bios ({share:.0}%) were held by a cgroup I/O limit{}",
            name.as_deref().unwrap_or(dev),
            d.bios,
            all_bios,
            rate.map(|r| format!(", released at {r:.1} MiB/s"))
                .unwrap_or_default()
        ),
        evidence: json!({
            "device": dev,
            "throttled_bios": d.bios,
            "all_bios": all_bios,
            "throttled_bytes": d.bytes,
            "throttled_reads": d.reads,
            "throttled_writes": d.writes,
            "released_mib_per_s": rate,
            "dispatch_runs": t.dispatch_runs,
            "limits": limits.iter().map(|(c, f, l)| json!({"cgroup": c, "file": f, "line": l})).collect::<Vec<_>>(),
        }),
        explanation: "A bio over its cgroup's bytes or IOs per second budget is not queued: blk-throttle holds it and the kthrotld workqueue submits it when the budget allows, so the submitter waits with no request at the device (the Q event comes from a kworker running blk_throtl_dispatch_work_fn). The device is idle while the application is slow.".into(),
        workaround,
    })
}

/// Requests spend most of their time waiting behind others.
fn queue_saturation(a: &Analysis) -> Verdict {
    let mut why = Vec::new();
    for d in &a.block.devices {
        let io = &d.iostat_total;
        let iops = io.r_s + io.w_s + io.d_s;
        let q2c = d.btt.q2c.avg_ns();
        if d.btt.q2c.n < 100 || iops <= 0.0 {
            why.push(format!("{}: {} requests completed", d.device, d.btt.q2c.n));
            continue;
        }
        // iostat's service time: busy time per request.
        let service = io.util / 100.0 / iops * 1e9;
        let waiting = (1.0 - service / q2c.max(1.0)).max(0.0) * 100.0;
        let tag_wait = d.btt.q2g.avg_ns() * 100.0 / q2c.max(1.0);
        if io.util < 80.0 || waiting < 50.0 || io.aqu_sz < 2.0 {
            why.push(format!(
                "{}: %util {:.0}, aqu-sz {:.1}, {waiting:.0}% of a request's time spent waiting",
                d.device, io.util, io.aqu_sz
            ));
            continue;
        }
        let nr = queue_setting(a, &d.device, "nr_requests");
        let name = device_name(a, &d.device);
        let queue = queue_dir(name.as_deref(), &d.device);
        return Verdict::Fired(Finding {
            id: "queue_saturation",
            // Critical only when the request pool itself ran out (bios
            // waited for a tag): many busy submitters alone are a load,
            // not a misconfiguration.
            severity: if io.util >= 90.0 && waiting >= 75.0 && tag_wait >= 10.0 {
                Severity::Critical
            } else {
                Severity::Warning
            },
            title: format!(
                "{}: busy {:.0}% with {:.1} requests queued on average: {waiting:.0}% of each request's {:.0} µs was waiting, {:.0} µs being served",
                name.as_deref().unwrap_or(&d.device),
                io.util,
                io.aqu_sz,
                q2c / 1e3,
                service / 1e3
            ),
            evidence: json!({
                "device": d.device,
                "util_percent": io.util,
                "aqu_sz": io.aqu_sz,
                "iops": iops,
                "q2c_avg_us": q2c / 1e3,
                "service_us": service / 1e3,
                "waiting_percent": waiting,
                "waiting_for_a_tag_percent": tag_wait,
                "nr_requests": nr,
            }),
            explanation: format!(
                "The device completes one request every {:.0} µs of busy time, but requests take {:.0} µs from queue to completion: the rest is waiting behind the others in flight{}. More concurrency only lengthens the queue.",
                service / 1e3,
                q2c / 1e3,
                if tag_wait >= 10.0 {
                    format!(", {tag_wait:.0}% of it for a free request (tag), which nr_requests bounds")
                } else {
                    String::new()
                }
            ),
            workaround: format!(
                "submit fewer requests at once (lower the application's queue depth) or spread the load over more devices; if nr_requests was lowered (now {}), raise it: echo 64 > {queue}/nr_requests",
                nr.as_deref().unwrap_or("unknown")
            ),
        });
    }
    not_any(why, "no block requests in the trace")
}

/// Requests held inside the I/O scheduler (inserted, not yet dispatched).
fn scheduler_overhead(a: &Analysis) -> Verdict {
    let mut why = Vec::new();
    for d in &a.block.devices {
        let b = &d.btt;
        if b.i2d.n < 100 {
            why.push(format!(
                "{}: {} requests went through an I/O scheduler (inserted)",
                d.device, b.i2d.n
            ));
            continue;
        }
        if b.q2c.n < 100 {
            why.push(format!(
                "{}: {} bios followed from queue to completion",
                d.device, b.q2c.n
            ));
            continue;
        }
        let q2c = b.q2c.avg_ns().max(1.0);
        let held = b.g2i.avg_ns() + b.i2d.avg_ns();
        let share = held * 100.0 / q2c;
        let sched = queue_setting(a, &d.device, "scheduler");
        if share < 15.0 {
            why.push(format!(
                "{}: requests spent {share:.1}% of their time in the scheduler{}",
                d.device,
                sched
                    .as_ref()
                    .map(|s| format!(" ({s})"))
                    .unwrap_or_default()
            ));
            continue;
        }
        if sched.as_deref() == Some("none") {
            why.push(format!(
                "{}: {share:.0}% between insert and issue, but there is no I/O scheduler (the driver was busy)",
                d.device
            ));
            continue;
        }
        let name = device_name(a, &d.device);
        let queue = queue_dir(name.as_deref(), &d.device);
        let bfq = sched.as_deref() == Some("bfq");
        return Verdict::Fired(Finding {
            id: "scheduler_overhead",
            severity: if share >= 25.0 && sched.is_some() {
                Severity::Critical
            } else {
                Severity::Warning
            },
            title: format!(
                "{}: requests waited {:.0} µs of {:.0} ({share:.0}%) inside the {} I/O scheduler, up to {} ms",
                name.as_deref().unwrap_or(&d.device),
                held / 1e3,
                q2c / 1e3,
                sched.as_deref().unwrap_or("(unknown)"),
                ms(b.i2d.max_ns)
            ),
            evidence: json!({
                "device": d.device,
                "scheduler": sched,
                "requests_inserted": b.i2d.n,
                "g2i_avg_us": b.g2i.avg_ns() / 1e3,
                "i2d_avg_us": b.i2d.avg_ns() / 1e3,
                "i2d_max_ms": ms(b.i2d.max_ns),
                "q2c_avg_us": q2c / 1e3,
                "percent_in_scheduler": share,
            }),
            explanation: format!(
                "Between insert (I) and dispatch to the driver (D) a request belongs to the I/O scheduler. {} On a fast device that time is pure overhead.",
                if bfq {
                    "BFQ holds requests back on purpose: it idles for the queue in service (slice_idle) and splits service by weight, so other processes' requests wait even while the device is free."
                } else {
                    "A scheduler that sorts, batches or delays requests adds that time to every one."
                }
            ),
            workaround: if bfq {
                format!("echo none > {queue}/scheduler (or mq-deadline); to keep BFQ, stop its idling: echo 0 > {queue}/iosched/slice_idle")
            } else {
                format!("echo none > {queue}/scheduler")
            },
        });
    }
    not_any(why, "no block requests in the trace")
}

/// Sequential buffered reads that missed the page cache page by page.
fn readahead_small(a: &Analysis) -> Verdict {
    let mut why = Vec::new();
    for (dev, r) in &a.readahead.devices {
        if r.sync_misses < 64 {
            why.push(format!(
                "{dev}: {} synchronous page-cache misses ({} readaheads ran ahead of the reader)",
                r.sync_misses, r.async_readaheads
            ));
            continue;
        }
        let seq = r.sequential_sync_misses as f64 * 100.0 / r.sync_misses as f64;
        if seq < 50.0 {
            why.push(format!(
                "{dev}: only {seq:.0}% of {} misses were sequential: readahead would not help random reads",
                r.sync_misses
            ));
            continue;
        }
        let window_kb = r.ra_pages_max * 4;
        if window_kb > 16 {
            why.push(format!("{dev}: the readahead window is {window_kb} KiB"));
            continue;
        }
        let ra_kb = queue_setting(a, dev, "read_ahead_kb");
        let name = device_name(a, dev);
        let queue = queue_dir(name.as_deref(), dev);
        let rareq = block_device(a, dev).map(|d| d.iostat_total.rareq_sz);
        let confirmed = ra_kb
            .as_deref()
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|v| v <= 16);
        return Verdict::Fired(Finding {
            id: "readahead_small",
            severity: if confirmed {
                Severity::Critical
            } else {
                Severity::Warning
            },
            title: format!(
                "{}: {} of {} page-cache misses were sequential, read {window_kb} KiB ahead{}",
                name.as_deref().unwrap_or(dev),
                r.sequential_sync_misses,
                r.sync_misses,
                ra_kb
                    .as_ref()
                    .map(|k| format!(" (read_ahead_kb {k})"))
                    .unwrap_or_default()
            ),
            evidence: json!({
                "device": dev,
                "sync_misses": r.sync_misses,
                "sequential_sync_misses": r.sequential_sync_misses,
                "async_readaheads": r.async_readaheads,
                "ra_pages_max": r.ra_pages_max,
                "pages_read_ahead": r.pages_read_ahead,
                "read_ahead_kb": ra_kb,
                "read_request_kb_avg": rareq,
            }),
            explanation: "A sequential reader normally misses the page cache once; readahead then reads ahead of it in large requests, asynchronously. With the window at zero or a page, every read waits for its own small device request, so throughput is one request's latency per page.".into(),
            workaround: format!(
                "echo 128 > {queue}/read_ahead_kb (or blockdev --setra 256 /dev/{}); check that the application does not ask for random access (posix_fadvise POSIX_FADV_RANDOM)",
                name.as_deref().unwrap_or("DEV")
            ),
        });
    }
    not_any(
        why,
        "no readahead events in the trace (record the `readahead` event set)",
    )
}

/// Small synchronous writes that cost the device several times their size
/// in journal writes and cache flushes.
fn sync_write_amplification(a: &Analysis) -> Verdict {
    let by_name = &a.syscalls.by_name;
    let syscalls: u64 = ["fsync", "fdatasync"]
        .iter()
        .filter_map(|n| by_name.get(*n))
        .map(|c| c.count)
        .sum();
    let syncs = if syscalls > 0 {
        syscalls
    } else {
        a.fs.fsync.count
    };
    if syncs < 32 {
        return not(format!(
            "{syncs} fsync/fdatasync calls (at least 32 are needed to judge what each costs)"
        ));
    }
    let mut why = Vec::new();
    for (dev, m) in &a.fs.device_writes {
        if m.data_bytes == 0 {
            continue;
        }
        let total = m.data_bytes + m.journal_bytes;
        let amp = total as f64 / m.data_bytes as f64;
        if amp < 3.0 {
            why.push(format!(
                "{dev}: {:.1} bytes written per byte of data ({} KiB data, {} KiB journal)",
                amp,
                m.data_bytes / 1024,
                m.journal_bytes / 1024
            ));
            continue;
        }
        let per = |v: u64| v as f64 / syncs as f64;
        let name = device_name(a, dev);
        return Verdict::Fired(Finding {
            id: "sync_write_amplification",
            severity: Severity::Warning,
            title: format!(
                "{}: each of {syncs} syncs wrote {:.1} KiB of data but {:.1} KiB to the device and {:.1} cache flushes ({amp:.1}x)",
                name.as_deref().unwrap_or(dev),
                per(m.data_bytes) / 1024.0,
                per(total) / 1024.0,
                per(m.flushes)
            ),
            evidence: json!({
                "device": dev,
                "syncs": syncs,
                "data_bytes": m.data_bytes,
                "journal_bytes": m.journal_bytes,
                "flushes": m.flushes,
                "bytes_per_sync": per(total),
                "data_bytes_per_sync": per(m.data_bytes),
                "flushes_per_sync": per(m.flushes),
                "amplification": amp,
            }),
            explanation: "Every fsync that changes metadata (a file that grows, new blocks) commits a journal transaction: a descriptor, the changed metadata blocks and a commit block, plus one or two cache flushes. For small writes this costs the device several times the data and a flush each, and the flush is often the slowest part.".into(),
            workaround: "batch writes between syncs (group commit), preallocate the file (fallocate) and use fdatasync so overwrites commit no metadata, or write with O_DIRECT|O_DSYNC into preallocated space".into(),
        });
    }
    not_any(why, format!("{syncs} syncs, but no data writes in the trace (record the `block` and `fs` event sets)"))
}
