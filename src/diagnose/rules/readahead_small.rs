//! Sequential buffered reads held back by a small readahead window.
//!
//! A sequential reader normally misses the page cache once; readahead then
//! reads ahead of it asynchronously (`page_cache_async_ra`), in windows the
//! kernel grows (4x while small, then 2x; mm/readahead.c) up to the file's
//! limit, `ra_pages`, taken from the device's `queue/read_ahead_kb` when the
//! file was opened: 128 KiB by default (`VM_READAHEAD_PAGES`). A reader
//! asking for more at once gets windows up to its request instead, bounded
//! by the device's largest I/O. With the limit at zero every read is a
//! synchronous miss (`page_cache_sync_ra`) of the one page that missed;
//! with a small limit (16 KiB) the windows stop growing there, and the
//! reader waits for one small device request per window. The readahead
//! analysis counts the readaheads per device, which continued where the
//! file's previous read ended, and the windows the events show. Not one of
//! the four measured slow-downs of DESIGN.md; recorded in the lab as
//! readahead-0.cap against readahead-128.cap and readahead-0-random.cap,
//! and with read_ahead_kb 16 (scripts/make-fixtures-readahead) as
//! readahead-16.cap against readahead-16-bs1m.cap.

use super::helpers::{block_device, device_name, not_any, queue_dir, queue_remedy, queue_setting};
use crate::analyze::readahead::ReadaheadDevice;
use crate::analyze::Analysis;
use crate::diagnose::{Finding, Rule, Severity, Verdict};
use serde_json::json;

pub const RULE: Rule = Rule {
    id: "readahead_small",
    looks_for:
        "sequential buffered reads held back by a small readahead window (page by page at 0)",
    fires_when: "≥ 64 readaheads (`readahead` set), ≥ 50 % of them sequential, ≥ 50 % of their windows held at a limit below the kernel's default 128 KiB (0 KiB with readahead off: one page per miss); critical with `read_ahead_kb` ≤ 32",
    stays_silent: "random reads with `read_ahead_kb` 0; sequential reads whose windows grow to 128 KiB; files too short for their window to reach its limit; a reader asking for more than `read_ahead_kb` (the kernel then reads ahead as much as it asks)",
    needs: &["readahead"],
    light_lacks: Some("the readahead and page cache events (one per page added to or removed from the cache: millions a second under streaming I/O)"),
    light_lacks_when: None,
    remedy: Some("the device's `queue/read_ahead_kb` to 128 (or twice its value at or above that); live, and seen by files opened after it"),
    check,
};

/// Readaheads needed to judge: a reader held back misses on every page
/// (readahead-0.cap: 512) or waits for every small window (8 MiB in 16 KiB
/// windows: 512); a working readahead needs few (readahead-128.cap: 22
/// for 2 MiB); 64 sits far from both.
const MIN_READAHEADS: u64 = 64;
/// Chosen so that random reads stay out (readahead-0-random.cap: 0 %,
/// readahead-0.cap: 511 of 512). Readahead that ran ahead of the reader
/// counts as sequential: the kernel starts it only when the reader reaches
/// the page it marked in the window before.
const MIN_SEQUENTIAL_PERCENT: f64 = 50.0;
/// The kernel's default limit (`VM_READAHEAD_PAGES`, 128 KiB) in 4 KiB
/// pages: the window it grows a sequential stream to when nothing lowers
/// it (readahead-128.cap: 16, 32, 64 KiB, then 128 KiB from the 8th window on).
const DEFAULT_WINDOW_PAGES: u64 = 32;
/// A stream held at its limit spends all windows there but the first
/// few: from one page the kernel reaches 128 KiB in four windows
/// (readahead-128.cap: seven, with the window aligned to its folios).
/// Half of them leaves out files too short to reach their limit.
const MIN_HELD_PERCENT: f64 = 50.0;
/// A page of the readahead window (`ra_pages`) in KiB: 4 KiB pages.
const PAGE_KB: u64 = 4;
/// Critical when the snapshot's read_ahead_kb is at most a quarter of the
/// default: the reader waits for four device requests or more where the
/// default would have one.
const CRITICAL_READ_AHEAD_KB: u64 = 32;

/// What the readahead events say of a reader held back on one device.
struct Held {
    readaheads: u64,
    sequential: u64,
    /// Windows the events show, and those held at their limit below the
    /// default.
    windows: u64,
    held: u64,
    /// The window the stream was held at most often, pages.
    window_pages: u64,
}

fn check(a: &Analysis) -> Verdict {
    let mut why = Vec::new();
    for (dev, r) in &a.readahead.devices {
        match held_back(dev, r) {
            Ok(h) => return Verdict::Fired(finding(a, dev, r, &h)),
            Err(reason) => why.push(reason),
        }
    }
    not_any(
        why,
        "no readahead events in the trace (record the `readahead` event set)",
    )
}

/// The device's readahead when a sequential reader was held at a small
/// window; else why not.
fn held_back(dev: &str, r: &ReadaheadDevice) -> Result<Held, String> {
    let readaheads = r.sync_misses + r.async_readaheads;
    if readaheads < MIN_READAHEADS {
        return Err(format!(
            "{dev}: {readaheads} readaheads ({} synchronous page-cache {}, {} ran ahead of the reader): too few to judge (at least {MIN_READAHEADS})",
            r.sync_misses,
            if r.sync_misses == 1 { "miss" } else { "misses" },
            r.async_readaheads
        ));
    }
    let sequential = r.sequential_sync_misses + r.async_readaheads;
    let seq = sequential as f64 * 100.0 / readaheads as f64;
    if seq < MIN_SEQUENTIAL_PERCENT {
        return Err(format!(
            "{dev}: only {seq:.0}% of {readaheads} readaheads were sequential: readahead would not help random reads"
        ));
    }
    let (windows, held) = held_windows(r);
    let Some(window_kib) = held_window_kib(r) else {
        let largest = r.windows.keys().next_back().copied().unwrap_or(0);
        return Err(format!(
            "{dev}: {held} of {windows} readahead windows were held at a limit below the kernel's default 128 KiB; the windows grew to {} KiB",
            largest * PAGE_KB
        ));
    };
    let window_pages = window_kib / PAGE_KB;
    Ok(Held {
        readaheads,
        sequential,
        windows,
        held,
        window_pages,
    })
}

/// The windows the events show, and those held at their limit below the
/// default.
fn held_windows(r: &ReadaheadDevice) -> (u64, u64) {
    let windows = r.windows.values().sum();
    let held = r
        .windows_at_limit
        .range(..DEFAULT_WINDOW_PAGES)
        .map(|(_, n)| n)
        .sum();
    (windows, held)
}

/// The window a sequential reader was held at (the most common of those
/// held), KiB, when most of the windows the events show stopped at a limit
/// below the default; merges_disabled asks too: such a reader's bios are
/// small because of it.
pub(super) fn held_window_kib(r: &ReadaheadDevice) -> Option<u64> {
    let (windows, held) = held_windows(r);
    if windows == 0 || (held as f64 * 100.0 / windows as f64) < MIN_HELD_PERCENT {
        return None;
    }
    r.windows_at_limit
        .range(..DEFAULT_WINDOW_PAGES)
        .max_by_key(|(pages, n)| (**n, **pages))
        .map(|(pages, _)| pages * PAGE_KB)
}

/// `1.5 MiB`, `512 KiB`.
fn size_kib(kib: u64) -> String {
    if kib >= 1024 {
        format!("{:.1} MiB", kib as f64 / 1024.0)
    } else {
        format!("{kib} KiB")
    }
}

fn finding(a: &Analysis, dev: &str, r: &ReadaheadDevice, h: &Held) -> Finding {
    let ra_kb = queue_setting(a, dev, "read_ahead_kb");
    let ra_num = ra_kb.as_deref().and_then(|v| v.parse::<u64>().ok());
    let name = device_name(a, dev);
    let shown = name.as_deref().unwrap_or(dev);
    let queue = queue_dir(name.as_deref(), dev);
    let rareq = block_device(a, dev).map(|d| d.iostat_total.rareq_sz);
    let window_kb = h.window_pages * PAGE_KB;
    let limit_kb = r.ra_pages_max * PAGE_KB;
    let stream = r.top_stream.as_ref();
    let reader = stream.map_or_else(
        || "the reader".to_string(),
        |s| match s.comm.as_str() {
            "" => format!("pid {}", s.pid),
            c => format!("{c} ({})", s.pid),
        },
    );
    let file = stream.map_or_else(
        || format!("files on {shown}"),
        |s| {
            format!(
                "{} of inode {} on {shown}",
                size_kib((s.end_page - s.first_page) * PAGE_KB),
                s.inode
            )
        },
    );
    let windows_kib: serde_json::Map<String, serde_json::Value> = r
        .windows
        .iter()
        .map(|(p, n)| ((p * PAGE_KB).to_string(), json!(n)))
        .collect();
    let seen = r
        .windows
        .iter()
        .rev()
        .map(|(p, n)| format!("{n} of {} KiB", p * PAGE_KB))
        .collect::<Vec<_>>()
        .join(", ");
    let setting = ra_kb
        .as_ref()
        .map(|k| format!(" (read_ahead_kb {k})"))
        .unwrap_or_default();
    let title = if h.window_pages == 0 {
        format!(
            "{shown}: {} of {} page-cache misses were sequential, read 0 KiB ahead{setting}",
            r.sequential_sync_misses, r.sync_misses
        )
    } else {
        format!(
            "{shown}: {} of {} readaheads were sequential, read {window_kb} KiB ahead at a time{setting}",
            h.sequential, h.readaheads
        )
    };
    let requests = rareq
        .filter(|k| *k > 0.0)
        .map(|k| format!(" (the device's read requests averaged {k:.1} KiB)"))
        .unwrap_or_default();
    let limit_note = match ra_num {
        Some(k) if k != limit_kb => format!(
            "; the file's limit was {limit_kb} KiB, read_ahead_kb is {k} KiB: a file keeps the limit it was opened with"
        ),
        _ => String::new(),
    };
    let explanation = if h.window_pages == 0 {
        format!(
            "A sequential reader normally misses the page cache once; readahead then reads ahead of it asynchronously, in windows the kernel grows up to the file's limit (read_ahead_kb when the file was opened: 128 KiB by default). With the limit at 0 the kernel reads only the page that missed: {reader} read {file} page by page, waiting for one device request per 4 KiB{requests}{limit_note}."
        )
    } else {
        format!(
            "The kernel grows a sequential reader's readahead window (4x while small, then 2x per window) up to the file's limit, read_ahead_kb when the file was opened (128 KiB by default), or up to the reader's own request when that is larger. {reader} read {file} sequentially, but {} of the {} windows the events show stopped at the limit below 128 KiB (windows seen: {seen}): each window is one device request, which the reader waits for once it has used the one before, so it waits for a device round trip every {window_kb} KiB instead of every 128 KiB{requests}{limit_note}.",
            h.held, h.windows
        )
    };
    // A value larger than the present one: the kernel's default, or twice
    // what is already at or above it.
    let current = ra_num.unwrap_or(limit_kb);
    let target = if current < DEFAULT_WINDOW_PAGES * PAGE_KB {
        DEFAULT_WINDOW_PAGES * PAGE_KB
    } else {
        current * 2
    };
    let fadvise = if current > 0 {
        format!(", or have it call posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL), which doubles its file's limit (to {} KiB)", current * 2)
    } else {
        String::new()
    };
    let workaround = format!(
        "echo {target} > {queue}/read_ahead_kb (or blockdev --setra {} /dev/{}), then reopen the file (restart the reader: a file keeps the limit it was opened with){fadvise}; check that the application does not ask for random access (posix_fadvise POSIX_FADV_RANDOM)",
        target * 2,
        name.as_deref().unwrap_or("DEV")
    );
    Finding {
        remedy: queue_remedy(&queue, "read_ahead_kb", ra_kb.clone(), &target.to_string())
            .map(|r| r.judged_by(format!("dev.{dev}.requests"))),
        id: RULE.id,
        severity: if ra_num.is_some_and(|v| v <= CRITICAL_READ_AHEAD_KB) {
            Severity::Critical
        } else {
            Severity::Warning
        },
        title,
        evidence: json!({
            "device": dev,
            "reader": stream.map(|s| json!({"pid": s.pid, "comm": s.comm})),
            "inode": stream.map(|s| s.inode),
            "file_kib_read": stream.map(|s| (s.end_page - s.first_page) * PAGE_KB),
            "readaheads": h.readaheads,
            "sequential_readaheads": h.sequential,
            "sync_misses": r.sync_misses,
            "sequential_sync_misses": r.sequential_sync_misses,
            "async_readaheads": r.async_readaheads,
            "window_kib": window_kb,
            "windows_kib": windows_kib,
            "windows_held_below_default": h.held,
            "ra_pages_max": r.ra_pages_max,
            "pages_read_ahead": r.pages_read_ahead,
            "read_ahead_kb": ra_kb,
            "read_request_kb_avg": rareq,
        }),
        explanation,
        workaround,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::rules::testkit::{
        analysis, block_devices, fired, line, silent, with_snapshot,
    };
    use serde_json::json;

    /// One readahead event of dd (pid 600) on inode 0xc of 7,0: the file's
    /// state before the kernel moved it on (`size`: its last window).
    fn ra(us: u64, sync: bool, index: u64, req: u64, size: u64, ra_pages: u64) -> String {
        ra_of(0xc, us, sync, index, req, size, ra_pages)
    }

    /// [`ra`] on inode `ino` (printed in hexadecimal, as the kernel does).
    fn ra_of(
        ino: u64,
        us: u64,
        sync: bool,
        index: u64,
        req: u64,
        size: u64,
        ra_pages: u64,
    ) -> String {
        let event = if sync {
            "page_cache_sync_ra"
        } else {
            "page_cache_async_ra"
        };
        let payload = format!("dev=7:0 ino={ino:x} index={index} req_count={req} order=0 size={size} async_size={size} ra_pages={ra_pages} mmap_miss=0 prev_pos=-1");
        line(us, "dd-600", 0, event, &payload)
    }

    /// 64 synchronous page-cache misses, one page each at `index(i)`, with
    /// a readahead limit of `ra_pages` pages (0 or 1: every page a miss,
    /// each after the first showing the one-page window before it).
    fn misses(ra_pages: u64, index: impl Fn(u64) -> u64) -> String {
        (0..64)
            .map(|i| {
                let size = if i == 0 { 0 } else { ra_pages.min(1) };
                ra(1_000_000 + i * 100, true, index(i), 1, size, ra_pages)
            })
            .collect()
    }

    /// A reader asking for `req` pages at a time through a file of `pages`
    /// pages with a limit of `ra_pages`, as mm/readahead.c moves the
    /// window: the miss at page 0 opens it; the reader reaching the page
    /// the kernel marked (then the first page of each new window) reads the
    /// next one, grown 4x while under a sixteenth of the limit, else 2x, up
    /// to the limit (or to the reader's request when that is larger), and
    /// trimmed to end on a boundary of its folios.
    fn stream(ra_pages: u64, req: u64, pages: u64) -> String {
        stream_of(0xc, 1_000_000, ra_pages, req, pages)
    }

    /// [`stream`] of inode `ino`, beginning at `t0` µs.
    fn stream_of(ino: u64, t0: u64, ra_pages: u64, req: u64, pages: u64) -> String {
        let ra = |us, sync, index, req, size| ra_of(ino, us, sync, index, req, size, ra_pages);
        let max = ra_pages.max(req);
        let init = req.next_power_of_two();
        let mut size = if init <= max / 32 {
            init * 4
        } else if init <= max / 4 {
            init * 2
        } else {
            max
        };
        let async_size = if size > req { size - req } else { size / 2 };
        let mut text = ra(t0, true, 0, req, 0);
        let (mut start, mut marker, mut order, mut us) = (0, size - async_size, 0, t0);
        while marker < pages {
            us += 100;
            text += &ra(us, false, marker, req, size);
            start += size;
            let next = if size < max / 16 {
                size * 4
            } else {
                (size * 2).min(max)
            };
            size = size.max(next);
            order += 2;
            let align = 1 << order.min(max.trailing_zeros() as u64);
            let end = start + size;
            let aligned = end / align * align;
            if aligned > start {
                size -= end - aligned;
            }
            marker = start;
        }
        text
    }

    fn with_read_ahead_kb(a: Analysis, kb: &str) -> Analysis {
        with_snapshot(
            a,
            json!({ "block_devices": block_devices("loop0", "7,0", &[("read_ahead_kb", kb)]) }),
        )
    }

    #[test]
    fn fires_for_sequential_misses_with_readahead_off() {
        let a = with_read_ahead_kb(analysis(&misses(0, |i| i)), "0");
        let f = fired(check(&a));
        assert_eq!(f.id, "readahead_small");
        assert_eq!(f.severity, Severity::Critical);
        assert_eq!(
            f.title,
            "loop0: 63 of 64 page-cache misses were sequential, read 0 KiB ahead (read_ahead_kb 0)"
        );
        assert_eq!(f.evidence["sync_misses"], 64);
        assert_eq!(f.evidence["read_ahead_kb"], "0");
        assert_eq!(f.evidence["reader"], json!({"pid": 600, "comm": "dd"}));
        assert_eq!(f.evidence["inode"], 12);
        assert!(f
            .explanation
            .contains("dd (600) read 256 KiB of inode 12 on loop0 page by page"));
        assert!(f.workaround.starts_with(
            "echo 128 > /sys/block/loop0/queue/read_ahead_kb (or blockdev --setra 256 /dev/loop0)"
        ));
        // posix_fadvise doubles the limit: nothing from 0.
        assert!(!f.workaround.contains("POSIX_FADV_SEQUENTIAL"));
    }

    /// read_ahead_kb 16 (4 pages) and a reader of 4 KiB at a time: the
    /// windows grow 2, 4 pages and stay at 4, one 16 KiB request each.
    #[test]
    fn fires_for_a_reader_held_at_a_16_kib_window() {
        let a = with_read_ahead_kb(analysis(&stream(4, 1, 2048)), "16");
        let f = fired(check(&a));
        assert_eq!(f.severity, Severity::Critical);
        assert_eq!(
            f.title,
            "loop0: 513 of 514 readaheads were sequential, read 16 KiB ahead at a time (read_ahead_kb 16)"
        );
        assert_eq!(f.evidence["windows_kib"], json!({"8": 2, "16": 511}));
        assert_eq!(f.evidence["window_kib"], 16);
        assert_eq!(f.evidence["windows_held_below_default"], 511);
        assert_eq!(f.evidence["file_kib_read"], 8 * 1024);
        assert!(
            f.explanation.contains(
                "dd (600) read 8.0 MiB of inode 12 on loop0 sequentially, but 511 of the 513 windows the events show stopped at the limit below 128 KiB (windows seen: 511 of 16 KiB, 2 of 8 KiB)"
            ),
            "{}",
            f.explanation
        );
        assert!(f.workaround.starts_with(
            "echo 128 > /sys/block/loop0/queue/read_ahead_kb (or blockdev --setra 256 /dev/loop0), then reopen the file"
        ));
        assert!(f
            .workaround
            .contains("POSIX_FADV_SEQUENTIAL), which doubles its file's limit (to 32 KiB)"));
    }

    #[test]
    fn warns_for_a_one_page_window_without_a_snapshot() {
        let f = fired(check(&analysis(&misses(1, |i| i))));
        assert_eq!(f.severity, Severity::Warning);
        assert_eq!(
            f.title,
            "7,0: 63 of 64 readaheads were sequential, read 4 KiB ahead at a time"
        );
        // Without a snapshot, the limit the events show is the present value.
        assert!(f
            .workaround
            .starts_with("echo 128 > /sys/dev/block/7:0/queue/read_ahead_kb"));
    }

    /// A file opened while read_ahead_kb was 16 keeps that limit after it
    /// was set to 128: the finding says so, and is a warning.
    #[test]
    fn says_when_the_file_kept_an_older_limit() {
        let a = with_read_ahead_kb(analysis(&stream(4, 1, 2048)), "128");
        let f = fired(check(&a));
        assert_eq!(f.severity, Severity::Warning);
        assert!(f.explanation.contains(
            "the file's limit was 16 KiB, read_ahead_kb is 128 KiB: a file keeps the limit it was opened with"
        ));
        assert!(f.workaround.starts_with("echo 256 > "));
    }

    #[test]
    fn silent_for_random_reads() {
        assert_eq!(
            silent(check(&analysis(&misses(0, |i| i * 7)))),
            "7,0: only 0% of 64 readaheads were sequential: readahead would not help random reads"
        );
    }

    /// The default limit: windows grow to 128 KiB and stay there.
    #[test]
    fn silent_when_the_windows_grow_to_the_default() {
        assert_eq!(
            silent(check(&analysis(&stream(32, 1, 8192)))),
            "7,0: 0 of 261 readahead windows were held at a limit below the kernel's default 128 KiB; the windows grew to 128 KiB"
        );
    }

    /// read_ahead_kb 16 but 1 MiB reads: the kernel reads each request
    /// whole (up to the device's largest I/O), whatever the limit.
    #[test]
    fn silent_when_the_reader_asks_for_more_than_the_limit() {
        assert_eq!(
            silent(check(&analysis(&stream(4, 256, 32768)))),
            "7,0: 0 of 128 readahead windows were held at a limit below the kernel's default 128 KiB; the windows grew to 1024 KiB"
        );
    }

    /// Files too short for their windows to reach the default limit are no
    /// reader held back: 40 files of 64 KiB each.
    #[test]
    fn silent_for_files_shorter_than_their_window() {
        let text: String = (0..40)
            .map(|f| stream_of(0x100 + f, 1_000_000 + f * 10_000, 32, 1, 16))
            .collect();
        let a = analysis(&text);
        assert_eq!(a.readahead.devices["7,0"].sync_misses, 40);
        assert_eq!(
            silent(check(&a)),
            "7,0: 0 of 120 readahead windows were held at a limit below the kernel's default 128 KiB; the windows grew to 32 KiB"
        );
    }

    /// 2 MiB at the default limit: 22 readaheads, as readahead-128.cap
    /// recorded them.
    #[test]
    fn silent_with_too_few_readaheads_to_judge() {
        assert_eq!(
            silent(check(&analysis(&stream(32, 1, 512)))),
            "7,0: 22 readaheads (1 synchronous page-cache miss, 21 ran ahead of the reader): too few to judge (at least 64)"
        );
    }
}
