//! Sequential buffered reads that missed the page cache page by page.
//!
//! A sequential reader normally misses the page cache once; readahead then
//! reads ahead of it asynchronously (`page_cache_async_ra`). With the
//! readahead window (`ra_pages`, from `queue/read_ahead_kb`) at zero or a
//! page, every read is a synchronous miss (`page_cache_sync_ra`) waiting
//! for its own small request. The readahead analysis counts the misses
//! per device and which of them continued where the file's previous read
//! ended. Not one of the four measured slow-downs of DESIGN.md; recorded in the lab as readahead-0.cap
//! against readahead-128.cap and readahead-0-random.cap.

use super::helpers::{block_device, device_name, not_any, queue_dir, queue_setting};
use crate::analyze::Analysis;
use crate::diagnose::{Finding, Rule, Severity, Verdict};
use serde_json::json;

pub const RULE: Rule = Rule {
    id: "readahead_small",
    looks_for:
        "sequential buffered reads missing the page cache page by page (readahead too small)",
    fires_when: "≥ 64 synchronous page-cache misses (`readahead` set), ≥ 50 % of them sequential, window ≤ 16 KiB (critical with `read_ahead_kb` ≤ 16)",
    needs: &["readahead"],
    light_lacks: Some("the readahead and page cache events"),
    check,
};

/// Misses needed to judge: a reader held back page by page misses on
/// every page (readahead-0.cap: 512), a working readahead almost never
/// (readahead-128.cap: 1); 64 sits far from both.
const MIN_SYNC_MISSES: u64 = 64;
/// Chosen so that random reads stay out (readahead-0-random.cap: 0 %,
/// readahead-0.cap: 511 of 512).
const MIN_SEQUENTIAL_PERCENT: f64 = 50.0;
/// A page of the readahead window (`ra_pages`) in KiB: 4 KiB pages.
const PAGE_KB: u64 = 4;
/// Chosen: up to four pages ahead counts as too small (no source named).
const MAX_WINDOW_KB: u64 = 16;
/// Critical when the snapshot shows read_ahead_kb this small; the same 16 KiB.
const CRITICAL_READ_AHEAD_KB: u64 = 16;

fn check(a: &Analysis) -> Verdict {
    let mut why = Vec::new();
    for (dev, r) in &a.readahead.devices {
        if r.sync_misses < MIN_SYNC_MISSES {
            why.push(format!(
                "{dev}: {} synchronous page-cache misses ({} readaheads ran ahead of the reader)",
                r.sync_misses, r.async_readaheads
            ));
            continue;
        }
        let seq = r.sequential_sync_misses as f64 * 100.0 / r.sync_misses as f64;
        if seq < MIN_SEQUENTIAL_PERCENT {
            why.push(format!(
                "{dev}: only {seq:.0}% of {} misses were sequential: readahead would not help random reads",
                r.sync_misses
            ));
            continue;
        }
        let window_kb = r.ra_pages_max * PAGE_KB;
        if window_kb > MAX_WINDOW_KB {
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
            .is_some_and(|v| v <= CRITICAL_READ_AHEAD_KB);
        return Verdict::Fired(Finding {
            id: RULE.id,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::rules::testkit::{
        analysis, block_devices, fired, line, silent, with_snapshot,
    };
    use serde_json::json;

    /// 64 synchronous page-cache misses by dd (pid 600) on one file of
    /// 7,0, one page each at `index(i)`, with a readahead window of
    /// `ra_pages` pages.
    fn misses(ra_pages: u64, index: impl Fn(u64) -> u64) -> String {
        let mut text = String::new();
        for i in 0..64 {
            let ra = format!("dev=7:0 ino=c index={} req_count=1 order=0 size=0 async_size=0 ra_pages={ra_pages} mmap_miss=0 prev_pos=-1", index(i));
            text += &line(1_000_000 + i * 100, "dd-600", 0, "page_cache_sync_ra", &ra);
        }
        text
    }

    #[test]
    fn fires_for_sequential_misses_with_readahead_off() {
        let a = with_snapshot(
            analysis(&misses(0, |i| i)),
            json!({ "block_devices": block_devices("loop0", "7,0", &[("read_ahead_kb", "0")]) }),
        );
        let f = fired(check(&a));
        assert_eq!(f.id, "readahead_small");
        assert_eq!(f.severity, Severity::Critical);
        assert_eq!(
            f.title,
            "loop0: 63 of 64 page-cache misses were sequential, read 0 KiB ahead (read_ahead_kb 0)"
        );
        assert_eq!(f.evidence["sync_misses"], 64);
        assert_eq!(f.evidence["read_ahead_kb"], "0");
        assert!(f.workaround.starts_with(
            "echo 128 > /sys/block/loop0/queue/read_ahead_kb (or blockdev --setra 256 /dev/loop0)"
        ));
    }

    #[test]
    fn warns_for_a_one_page_window_without_a_snapshot() {
        let f = fired(check(&analysis(&misses(1, |i| i))));
        assert_eq!(f.severity, Severity::Warning);
        assert_eq!(
            f.title,
            "7,0: 63 of 64 page-cache misses were sequential, read 4 KiB ahead"
        );
    }

    #[test]
    fn silent_for_random_reads() {
        assert_eq!(
            silent(check(&analysis(&misses(0, |i| i * 7)))),
            "7,0: only 0% of 64 misses were sequential: readahead would not help random reads"
        );
    }

    #[test]
    fn silent_with_a_large_window() {
        assert_eq!(
            silent(check(&analysis(&misses(32, |i| i)))),
            "7,0: the readahead window is 128 KiB"
        );
    }
}
