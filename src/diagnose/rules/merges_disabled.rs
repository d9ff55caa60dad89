//! Sequential I/O that the block layer did not merge.
//!
//! Adjacent bios queued together normally merge (back or front merge, `M`
//! in blktrace) into one large request. With `queue/nomerges` 2 (or 1 for
//! all but the simplest merges), or a submitter that plugs each bio
//! alone, every bio becomes its own small request: btt's bios per request
//! (#Q / #D) stays at 1. The rule needs the queued bios (Q) to judge, and
//! stays silent for a synchronous reader whose bios come one at a time
//! (nothing to merge: see readahead_small), and for bios the kernel's
//! readahead made small: a readahead window is read as one bio (flagged
//! `RA`), and the next window only when the reader reaches it, so small
//! windows give small sequential bios that no merging could join (the
//! window is readahead_small's to judge).
//!
//! A light capture (`record --light`) has no bios, only the kernel's
//! counters: requests, merges, requests that began where the previous one
//! ended (sequential) and the queue depth at issue. There bios per request
//! is (requests + merges) / requests, and "queued together" is a median
//! depth at issue of two or more.

use super::helpers::{device_name, not_any, queue_dir, queue_remedy, queue_setting};
use crate::analyze::block::btt::MergeInfo;
use crate::analyze::block::DeviceSummary;
use crate::analyze::light::{LightDeviceSummary, LightSummary};
use crate::analyze::Analysis;
use crate::diagnose::{Finding, Rule, Severity, Verdict};
use serde_json::json;

pub const RULE: Rule = Rule {
    id: "merges_disabled",
    looks_for: "sequential bios issued one by one as small requests (no merging)",
    fires_when: "≥ 64 bios, ≥ 50 % of them sequential, ≤ 1.1 bios per request, requests < 64 KiB on average (critical with `nomerges` 1/2 in the snapshot, or without a snapshot on strong evidence; a warning when `nomerges` is 0: the setting is not the cause)",
    stays_silent: "the same reads with merging on (64 bios per request); random I/O; a `dd` writer's 1 MiB writeback bios (dd-seqwrite.cap); sequential bios that come one at a time, each after the previous completed (a synchronous reader has nothing to merge: see `readahead_small`); readahead bios (`RA`) as large as the kernel's windows (each window is read as one bio, the next only when the reader reaches it)",
    needs: &["block"],
    light_lacks: None,
    light_lacks_when: None,
    remedy: Some("the device's `queue/nomerges` to 0, unless the snapshot shows it at 0 already; live"),
    check,
};

/// Bios needed to judge merging: the measured unmerged-reads excerpts
/// (1–2 bios) are too few to tell sequential from random, the lab's
/// 512-bio reads enough.
const MIN_BIOS: u64 = 64;
/// Chosen so that random I/O stays out: committed random captures 0–27 %.
const MIN_SEQUENTIAL: f64 = 0.5;
/// Chosen so that a synchronous reader stays out (readahead-0.cap: 0 %).
const MIN_QUEUED_TOGETHER: f64 = 0.25;
/// Lab reads: 64.0 bios per request with merging on, 1.0 with nomerges 2.
const MAX_BIOS_PER_REQUEST: f64 = 1.1;
/// Critical without nomerges in the snapshot: chosen (no measurement named).
const CRITICAL_SEQUENTIAL: f64 = 0.8;
/// With it: chosen, nearly no merge at all (nomerges 2 in the lab gives 1.0).
const CRITICAL_BIOS_PER_REQUEST: f64 = 1.05;
/// Measured (nomerges=2 on an NVMe): 32 bios of 8 sectors merged into one request of 256 sectors.
const CASE1_MERGED_SECTORS: f64 = 256.0;
/// Requests of at least this size (64 KiB, in sectors) are not "small":
/// their per-command cost is amortized and merging could not cut the
/// command count much. The measured unmerged requests were 8 sectors; a healthy
/// `dd` writer's writeback bios (dd-seqwrite.cap, the VM disk under the
/// loop device's file) were 2167 sectors each, already as large as the
/// queue takes, and read as "merging is off" before this bound.
const SMALL_REQUEST_SECTORS: u64 = 128;

/// Readahead bios (`RA`) from this share of the queued bios on, their
/// size may be the readahead window's: chosen, most of them.
const MIN_READAHEAD_SHARE: f64 = 0.5;
/// A readahead bio this close to the window (within a quarter) carries the
/// whole window: the window decided its size. Chosen; a reader held at
/// 16 KiB sends 16 KiB bios but for the first window of each file.
const WINDOW_SIZE_TOLERANCE: f64 = 0.25;

/// A light capture's median queue depth at issue from which its requests
/// count as queued together (a synchronous reader issues at depth 1).
const MIN_LIGHT_DEPTH: u64 = 2;
/// Depths read at issue below which their median says nothing.
const MIN_DEPTH_SAMPLE: u64 = 16;
/// A light capture whose requests are this share of split pieces is
/// request_splitting's (the lab's: 960 splits of 1024 requests).
const MIN_SPLIT_SHARE: f64 = 0.1;

fn check(a: &Analysis) -> Verdict {
    if let Some(light) = &a.light {
        return check_light(a, light);
    }
    let mut why = Vec::new();
    for d in &a.block.devices {
        match unmerged(a, d) {
            Ok((m, seq)) => return Verdict::Fired(finding(a, d, m, seq)),
            Err(reason) => why.push(reason),
        }
    }
    not_any(why, "no block requests in the trace")
}

/// The device's merge figures and its share of sequential bios when small
/// sequential bios, queued together, were not merged; else why not.
fn unmerged<'a>(a: &Analysis, d: &'a DeviceSummary) -> Result<(&'a MergeInfo, f64), String> {
    let q = d.actions.queued;
    let Some(m) = &d.btt_merge else {
        return Err(format!(
            "{}: the trace holds no queued bios (Q), only {} completions: merging cannot be judged (record block_bio_queue and block_rq_issue)",
            d.device,
            d.actions.completed
        ));
    };
    if q < MIN_BIOS {
        return Err(format!(
            "{}: only {q} {} queued (at least {MIN_BIOS} are needed to judge merging)",
            d.device,
            if q == 1 { "bio" } else { "bios" }
        ));
    }
    let seq = d.sequential_bios as f64 / q as f64;
    if seq < MIN_SEQUENTIAL {
        return Err(format!(
            "{}: {:.0}% of bios are sequential: little to merge",
            d.device,
            seq * 100.0
        ));
    }
    // Before "one at a time": a reader held at a small window also reads
    // one window at a time, and the window is what to name.
    sized_by_readahead(a, d)?;
    let together = d.back_to_back_sequential_bios as f64 / q as f64;
    if together < MIN_QUEUED_TOGETHER {
        return Err(format!(
            "{}: {:.0}% of bios are sequential but only {:.0}% were queued before the previous one completed: one bio at a time, nothing to merge (a synchronous reader: see readahead_small)",
            d.device,
            seq * 100.0,
            together * 100.0
        ));
    }
    merged_or_large(&d.device, m.ratio, m.blk_avg)?;
    Ok((m, seq))
}

/// Why small sequential bios are no merging problem when the kernel's
/// readahead made them: most are readahead bios (`RA`) as large as the
/// readahead windows the events show (a window of 0 reads the one page
/// that missed), or the events show the reader held at a small window;
/// without readahead events, no larger than the device's read_ahead_kb.
fn sized_by_readahead(a: &Analysis, d: &DeviceSummary) -> Result<(), String> {
    let (q, ra) = (d.actions.queued, d.readahead_bios);
    if ra == 0 || (ra as f64) < MIN_READAHEAD_SHARE * q as f64 {
        return Ok(());
    }
    let bio_kib = d.readahead_bio_bytes as f64 / ra as f64 / 1024.0;
    let dev = &d.device;
    let bios =
        format!("{ra} of {q} bios are the kernel's readahead (RA), {bio_kib:.0} KiB on average");
    let setting = queue_setting(a, dev, "read_ahead_kb");
    let see = "readahead made them small, not missing merges (see readahead_small)";
    let Some(r) = a.readahead.devices.get(dev) else {
        let Some(kb) = setting.and_then(|k| k.parse::<u64>().ok()) else {
            return Ok(());
        };
        if bio_kib <= kb.max(4) as f64 {
            return Err(format!(
                "{dev}: {bios}, no larger than read_ahead_kb {kb} allows: {see}; record the `readahead` set to see the windows"
            ));
        }
        return Ok(());
    };
    let setting = setting
        .map(|k| format!(", read_ahead_kb {k}"))
        .unwrap_or_default();
    let total: u64 = r.windows.values().sum();
    if let Some((&pages, &n)) = r.windows.iter().max_by_key(|(p, n)| (**n, **p)) {
        // A window of 0 pages: the one page that missed.
        let window_kib = (pages.max(1) * 4) as f64;
        if (bio_kib - window_kib).abs() <= WINDOW_SIZE_TOLERANCE * window_kib {
            return Err(if pages == 0 {
                format!(
                    "{dev}: {bios}: with the readahead window at 0 KiB ({n} of {total} windows{setting}) each reads the one page that missed: {see}"
                )
            } else {
                format!(
                    "{dev}: {bios}, the size of the readahead windows ({} KiB: {n} of {total} windows{setting}): each window is read as one bio, the next when the reader reaches it: {see}",
                    pages * 4
                )
            });
        }
    }
    if let Some(kib) = super::readahead_small::held_window_kib(r) {
        return Err(format!(
            "{dev}: {bios}, and the readahead events show the reader held at a {kib} KiB window{setting}: {see}"
        ));
    }
    Ok(())
}

fn finding(a: &Analysis, d: &DeviceSummary, m: &MergeInfo, seq: f64) -> Finding {
    let q = d.actions.queued;
    let nomerges = queue_setting(a, &d.device, "nomerges");
    let name = device_name(a, &d.device);
    // nomerges 1 and 2 are the kernel's "merging (partly) off": the
    // cause. With 0 the setting is not it, and iosleuth cannot tell
    // what stopped the merges: a warning. Without a snapshot, strong
    // evidence alone is critical (the measured btrace of unmerged reads).
    let strong = seq > CRITICAL_SEQUENTIAL && m.ratio < CRITICAL_BIOS_PER_REQUEST;
    let severity = match nomerges.as_deref() {
        Some("1") | Some("2") => Severity::Critical,
        None if strong => Severity::Critical,
        _ => Severity::Warning,
    };
    let queue = queue_dir(name.as_deref(), &d.device);
    Finding {
        id: RULE.id,
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
            "Adjacent bios normally merge into large requests (measured: 32 bios of 8 sectors became one request of 256). Here {q} bios became {} requests of {} sectors on average, so the device gets {:.0}x more commands than it would with merging{}.",
            m.issued,
            m.blk_avg,
            CASE1_MERGED_SECTORS / m.blk_avg.max(1) as f64,
            nomerges_note(
                nomerges.as_deref(),
                match nomerges {
                    Some(_) => "; nomerges is 0, so look at the submitter (each bio in its own plug, or a stacked device that does not merge)",
                    None => "",
                }
            )
        ),
        workaround: format!("echo 0 > {queue}/nomerges"),
        remedy: queue_remedy(&queue, "nomerges", nomerges.clone(), "0")
            .map(|r| r.judged_by(requests_metric(&d.device))),
    }
}

/// What a light capture's counters say of one device's merging.
struct LightMerges {
    requests: u64,
    sequential: f64,
    bios_per_request: f64,
    avg_sectors: u64,
}

fn check_light(a: &Analysis, light: &LightSummary) -> Verdict {
    let mut why = Vec::new();
    for d in &light.devices {
        match unmerged_light(d) {
            Ok(m) => return Verdict::Fired(light_finding(a, d, &m)),
            Err(reason) => why.push(reason),
        }
    }
    not_any(why, "no block requests in the light capture")
}

/// The device's merge figures when small sequential requests, queued
/// together, were not merged; else why not.
fn unmerged_light(d: &LightDeviceSummary) -> Result<LightMerges, String> {
    let (requests, bytes) = d.data_requests();
    if requests < MIN_BIOS {
        return Err(format!(
            "{}: only {requests} read or write requests (at least {MIN_BIOS} are needed to judge merging)",
            d.device
        ));
    }
    let c = &d.counters;
    let merges = d.merges();
    let m = LightMerges {
        requests,
        sequential: c.seq_requests as f64 / requests as f64,
        bios_per_request: (requests + merges) as f64 / requests as f64,
        avg_sectors: bytes / requests / 512,
    };
    if m.sequential < MIN_SEQUENTIAL {
        return Err(format!(
            "{}: {:.0}% of requests began where the previous one ended: little to merge",
            d.device,
            m.sequential * 100.0
        ));
    }
    // Pieces of split bios are sequential and unmerged by nature.
    if c.splits as f64 >= MIN_SPLIT_SHARE * requests as f64 {
        return Err(format!(
            "{}: {} of {requests} requests are pieces of split bios: see request_splitting",
            d.device, c.splits
        ));
    }
    // The depth is read for a sample of the requests: too few read, and
    // whether they were issued one at a time is not known.
    if d.depth.count < MIN_DEPTH_SAMPLE {
        return Err(format!(
            "{}: the queue depth at issue was read for {} requests (one in {}): too few to tell whether they were issued one at a time",
            d.device, d.depth.count, d.depth_sampled
        ));
    }
    if d.depth.p50 < MIN_LIGHT_DEPTH {
        return Err(format!(
            "{}: {:.0}% of requests are sequential but issued one at a time (median depth {}): nothing to merge (a synchronous reader: see readahead_small)",
            d.device,
            m.sequential * 100.0,
            d.depth.p50
        ));
    }
    merged_or_large(&d.device, m.bios_per_request, m.avg_sectors)?;
    Ok(m)
}

/// What the device's nomerges says of the missing merges, or `otherwise`
/// when it is not 1 or 2.
fn nomerges_note<'a>(nomerges: Option<&str>, otherwise: &'a str) -> &'a str {
    match nomerges {
        Some("2") => "; the device's nomerges is 2 (all merging off)",
        Some("1") => "; the device's nomerges is 1 (only simple merges)",
        _ => otherwise,
    }
}

/// Why sequential I/O queued together is no merging problem: its bios do
/// merge, or its requests are already large.
fn merged_or_large(device: &str, bios_per_request: f64, avg_sectors: u64) -> Result<(), String> {
    if bios_per_request > MAX_BIOS_PER_REQUEST {
        return Err(format!(
            "{device}: sequential bios do merge ({bios_per_request:.1} bios per request)"
        ));
    }
    if avg_sectors >= SMALL_REQUEST_SECTORS {
        return Err(format!(
            "{device}: bios were not merged, but requests average {} KiB: already large, nothing for merging to gain (large bios cut to the queue's limit are request_splitting's to judge)",
            avg_sectors / 2
        ));
    }
    Ok(())
}

fn light_finding(a: &Analysis, d: &LightDeviceSummary, m: &LightMerges) -> Finding {
    let nomerges = queue_setting(a, &d.device, "nomerges");
    let name = device_name(a, &d.device);
    // Without bios the capture cannot rule out a submitter that never
    // queued them together: only the setting makes it critical.
    let severity = match nomerges.as_deref() {
        Some("1") | Some("2") => Severity::Critical,
        _ => Severity::Warning,
    };
    let queue = queue_dir(name.as_deref(), &d.device);
    Finding {
        id: RULE.id,
        severity,
        title: format!(
            "{}: {:.0}% of requests are sequential but none was merged: {}-sector requests, {:.2} bios each",
            name.as_deref().unwrap_or(&d.device),
            m.sequential * 100.0,
            m.avg_sectors,
            m.bios_per_request
        ),
        evidence: json!({
            "device": d.device,
            "requests": m.requests,
            "sequential_requests": d.counters.seq_requests,
            "merges": d.merges(),
            "bios_per_request": m.bios_per_request,
            "avg_request_sectors": m.avg_sectors,
            "median_depth_at_issue": d.depth.p50,
            "nomerges": nomerges,
        }),
        explanation: format!(
            "Adjacent bios normally merge into large requests (measured: 32 bios of 8 sectors became one request of 256). Here {} sequential requests of {} sectors were issued with several in flight and not one merge, so the device gets about {:.0}x more commands than it would with merging{}.",
            m.requests,
            m.avg_sectors,
            CASE1_MERGED_SECTORS / m.avg_sectors.max(1) as f64,
            nomerges_note(
                nomerges.as_deref(),
                "; nomerges does not explain it: record without --light to see the bios"
            )
        ),
        workaround: format!("echo 0 > {queue}/nomerges"),
        remedy: queue_remedy(&queue, "nomerges", nomerges.clone(), "0")
            .map(|r| r.judged_by(requests_metric(&d.device))),
    }
}

/// The figure merging changes: the device's request count.
fn requests_metric(dev: &str) -> String {
    format!("dev.{dev}.requests")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::histogram::Percentiles;
    use crate::analyze::light::LightOpSummary;
    use crate::diagnose::rules::testkit::{
        analysis, block_devices, fired, line, silent, with_snapshot, Trace,
    };
    use serde_json::json;

    /// `n` sequential 4 KiB reads of fio (pid 200) on 7,0, each its own
    /// request: all queued first, then completed (`together`), or each
    /// completed before the next is queued.
    fn reads(n: u64, together: bool) -> String {
        bios(n, 8, "R", together).text()
    }

    /// [`reads`] of `sectors` each, with these flags (`RA`: readahead).
    fn bios(n: u64, sectors: u64, rwbs: &str, together: bool) -> Trace {
        let mut tr = Trace::default();
        for i in 0..n {
            let (t, s) = (1_000 + i * 10, i * sectors);
            let bio = format!("7,0 {rwbs} {s} + {sectors} [fio]");
            tr.add(t, "fio-200", 0, "block_bio_queue", &bio);
            tr.add(t + 1, "fio-200", 0, "block_getrq", &bio);
            let bytes = sectors * 512;
            let issue = format!("7,0 {rwbs} {bytes} () {s} + {sectors} be,0,4 [fio]");
            tr.add(t + 2, "fio-200", 0, "block_rq_issue", &issue);
            let done = format!("7,0 {rwbs} () {s} + {sectors} be,0,4 [0]");
            let at = if together { 5_000 + i * 10 } else { t + 5 };
            tr.add(at, "<idle>-0", 0, "block_rq_complete", &done);
        }
        tr
    }

    /// `n` readahead bios of `sectors` each (as [`bios`], queued together)
    /// and, before each, the readahead event that read it: the window the
    /// reader had entered, `window` pages, under a limit of `ra_pages`.
    fn readahead(n: u64, sectors: u64, window: u64, ra_pages: u64) -> String {
        readahead_queued(n, sectors, window, ra_pages, true)
    }

    /// [`readahead`], the bios queued together or each after the one
    /// before completed.
    fn readahead_queued(
        n: u64,
        sectors: u64,
        window: u64,
        ra_pages: u64,
        together: bool,
    ) -> String {
        let mut tr = bios(n, sectors, "RA", together);
        for i in 0..n {
            let ra = format!("dev=7:0 ino=c index={} req_count=1 order=0 size={window} async_size={window} ra_pages={ra_pages} mmap_miss=0 prev_pos=-1", (i + 1) * window);
            tr.add(1_000 + i * 10, "fio-200", 0, "page_cache_async_ra", &ra);
        }
        tr.text()
    }

    fn nomerges_2(a: Analysis, read_ahead_kb: &str) -> Analysis {
        let queue = [("nomerges", "2"), ("read_ahead_kb", read_ahead_kb)];
        with_snapshot(
            a,
            json!({ "block_devices": block_devices("loop0", "7,0", &queue) }),
        )
    }

    /// A reader held at a 16 KiB readahead window: each window one 16 KiB
    /// bio. Even with merging off, merges are not what is missing.
    #[test]
    fn silent_for_bios_as_large_as_the_readahead_window() {
        let a = nomerges_2(analysis(&readahead(64, 32, 4, 4)), "16");
        assert_eq!(
            silent(check(&a)),
            "7,0: 64 of 64 bios are the kernel's readahead (RA), 16 KiB on average, the size of the readahead windows (16 KiB: 63 of 63 windows, read_ahead_kb 16): each window is read as one bio, the next when the reader reaches it: readahead made them small, not missing merges (see readahead_small)"
        );
    }

    /// A reader held at a small window reads one window at a time: the
    /// reason names the window, not only the one-at-a-time reads.
    #[test]
    fn names_the_window_of_a_reader_that_reads_one_window_at_a_time() {
        let a = analysis(&readahead_queued(64, 32, 4, 4, false));
        assert!(silent(check(&a)).starts_with(
            "7,0: 64 of 64 bios are the kernel's readahead (RA), 16 KiB on average, the size of the readahead windows (16 KiB: 63 of 63 windows)"
        ));
    }

    /// Without readahead events, read_ahead_kb bounds a readahead bio.
    #[test]
    fn silent_for_readahead_bios_no_larger_than_read_ahead_kb() {
        let a = nomerges_2(analysis(&bios(64, 32, "RA", true).text()), "16");
        assert_eq!(
            silent(check(&a)),
            "7,0: 64 of 64 bios are the kernel's readahead (RA), 16 KiB on average, no larger than read_ahead_kb 16 allows: readahead made them small, not missing merges (see readahead_small); record the `readahead` set to see the windows"
        );
    }

    /// 128 KiB windows read as 4 KiB bios (a file system that sends a bio
    /// per page): merging is what would join them, and nomerges 2 stops it.
    #[test]
    fn fires_for_readahead_bios_smaller_than_their_window() {
        let a = nomerges_2(analysis(&readahead(64, 8, 32, 32)), "128");
        let f = fired(check(&a));
        assert_eq!(f.severity, Severity::Critical);
        assert_eq!(
            f.title,
            "loop0: 98% of bios are sequential but each became its own 8-sector request"
        );
    }

    #[test]
    fn fires_for_sequential_bios_that_each_became_a_request() {
        let a = analysis(&reads(64, true));
        let a = with_snapshot(
            a,
            json!({ "block_devices": block_devices("loop0", "7,0", &[("nomerges", "2")]) }),
        );
        let f = fired(check(&a));
        assert_eq!(f.id, "merges_disabled");
        assert_eq!(f.severity, Severity::Critical);
        assert_eq!(
            f.title,
            "loop0: 98% of bios are sequential but each became its own 8-sector request"
        );
        assert_eq!(f.evidence["bios_queued"], 64);
        assert_eq!(f.evidence["sequential_bios"], 63);
        assert_eq!(f.evidence["requests_issued"], 64);
        assert_eq!(f.evidence["bios_per_request"], 1.0);
        assert_eq!(f.evidence["nomerges"], "2");
        assert!(f
            .explanation
            .contains("the device gets 32x more commands than it would with merging; the device's nomerges is 2"));
        assert_eq!(f.workaround, "echo 0 > /sys/block/loop0/queue/nomerges");
    }

    #[test]
    fn silent_for_a_synchronous_reader() {
        let a = analysis(&reads(64, false));
        assert_eq!(
            silent(check(&a)),
            "7,0: 98% of bios are sequential but only 0% were queued before the previous one completed: one bio at a time, nothing to merge (a synchronous reader: see readahead_small)"
        );
    }

    #[test]
    fn silent_with_too_few_bios_to_judge() {
        let a = analysis(&reads(1, true));
        assert_eq!(
            silent(check(&a)),
            "7,0: only 1 bio queued (at least 64 are needed to judge merging)"
        );
    }

    /// A light capture of 7,0: 512 sequential 4 KiB reads issued at a
    /// median depth of 16, with `merges` merges.
    fn light(merges: u64, depth: u64) -> Analysis {
        let wakeup = "comm=probe pid=100 prio=120 target_cpu=000";
        let mut a = analysis(&line(1_000, "x-1", 0, "sched_wakeup", wakeup));
        let mut d = LightDeviceSummary {
            device: "7,0".into(),
            ops: vec![LightOpSummary {
                op: "read".into(),
                ios: 512,
                bytes: 512 * 4096,
                ..Default::default()
            }],
            // The depth of one request in 4 read.
            depth: Percentiles {
                count: 128,
                p50: depth,
                ..Default::default()
            },
            depth_sampled: 4,
            ..Default::default()
        };
        d.counters.seq_requests = 511;
        d.counters.back_merges = merges;
        a.light = Some(LightSummary {
            devices: vec![d],
            ..Default::default()
        });
        with_snapshot(
            a,
            json!({ "block_devices": block_devices("loop0", "7,0", &[("nomerges", "2")]) }),
        )
    }

    #[test]
    fn fires_for_a_light_captures_unmerged_sequential_requests() {
        let f = fired(check(&light(0, 16)));
        assert_eq!(f.severity, Severity::Critical);
        assert_eq!(
            f.title,
            "loop0: 100% of requests are sequential but none was merged: 8-sector requests, 1.00 bios each"
        );
        assert_eq!(f.evidence["sequential_requests"], 511);
        assert_eq!(f.workaround, "echo 0 > /sys/block/loop0/queue/nomerges");
    }

    #[test]
    fn silent_for_a_light_capture_that_merges_or_reads_one_at_a_time() {
        assert_eq!(
            silent(check(&light(512 * 31, 16))),
            "7,0: sequential bios do merge (32.0 bios per request)"
        );
        let mut split = light(0, 16);
        split.light.as_mut().unwrap().devices[0].counters.splits = 480;
        assert_eq!(
            silent(check(&split)),
            "7,0: 480 of 512 requests are pieces of split bios: see request_splitting"
        );
        assert_eq!(
            silent(check(&light(0, 1))),
            "7,0: 100% of requests are sequential but issued one at a time (median depth 1): nothing to merge (a synchronous reader: see readahead_small)"
        );
    }

    /// The depth is read for a sample of the requests: with too few read
    /// the rule says it cannot tell, rather than take a median of nothing
    /// (0) for requests issued one at a time.
    #[test]
    fn silent_when_too_few_depths_were_read() {
        let mut thin = light(0, 0);
        thin.light.as_mut().unwrap().devices[0].depth.count = 3;
        assert_eq!(
            silent(check(&thin)),
            "7,0: the queue depth at issue was read for 3 requests (one in 4): too few to tell whether they were issued one at a time"
        );
    }
}
