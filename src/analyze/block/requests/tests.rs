//! The per-device request lifecycle, fed events one by one: duplicate
//! sectors, scheduler and back merges, flush sequences, rwbs.

use super::*;

fn ev(ts: u64, action: Action, sector: u64, sectors: u32) -> BlockEvent {
    BlockEvent::for_test(ts, action, sector, sectors, Rwbs::WRITE)
}

/// A device's requests after `events`, in order.
fn fed(events: &[BlockEvent]) -> DeviceRequests {
    let mut d = DeviceRequests::new(0, 1_000_000_000);
    for e in events {
        d.add(e, None);
    }
    d
}

/// Two requests for one sector in flight at once (random reads of a
/// small file, many deep): each is issued and completed in its turn;
/// the second does not take the first's place.
#[test]
fn two_requests_at_one_sector_complete_each_in_turn() {
    let d = fed(&[
        ev(10, Action::Queue, 64, 8),
        ev(11, Action::GetRq, 64, 8),
        ev(20, Action::Queue, 64, 8),
        ev(21, Action::GetRq, 64, 8),
        ev(30, Action::Issue, 64, 8),
        ev(31, Action::Issue, 64, 8),
        ev(100, Action::Complete, 64, 8),
        ev(200, Action::Complete, 64, 8),
    ]);
    assert_eq!(d.completed.write, 2);
    assert_eq!(d.completions_without_start, 0);
    assert_eq!(d.in_flight(), 0);
    assert!(d.older.is_empty());
    // Both timed, D to C.
    assert_eq!(d.d2c_log2_us.total(), 2);
}

#[test]
fn scheduler_merge_ends_the_absorbed_request() {
    let d = fed(&[
        ev(10, Action::Queue, 0, 8),
        ev(11, Action::GetRq, 0, 8),
        ev(12, Action::Insert, 0, 8),
        ev(20, Action::Queue, 8, 8),
        ev(21, Action::GetRq, 8, 8),
        ev(22, Action::Insert, 8, 8),
        // The second request is merged into the first in the scheduler.
        ev(30, Action::RqMerge, 8, 8),
        ev(40, Action::Issue, 0, 16),
        ev(100, Action::Complete, 0, 16),
    ]);
    assert_eq!(d.in_flight(), 0, "nothing left in flight");
    assert_eq!(d.completed.write, 1);
    assert_eq!(d.merges.write, 1);
    let t = d.iostat.total(1_000_000_000);
    // Busy from the first request's start to its completion.
    assert!((t.util - 100.0 * 89.0 / 1e9).abs() < 1e-9, "{}", t.util);
}

/// A CI run of the live iostat test once saw %util 100 against iostat's 84: its
/// time window began inside another request's bios, whose back merges
/// grew the request below them; that one's completion left the rest in
/// flight to the end.
#[test]
fn back_merge_into_a_request_the_trace_never_saw_grows_no_other() {
    let d = fed(&[
        ev(10, Action::Queue, 0, 8),
        ev(11, Action::GetRq, 0, 8),
        ev(12, Action::Insert, 0, 8),
        ev(40, Action::Issue, 0, 8),
        // While it is out: a bio joins a request ending at 1000,
        // allocated before the trace.
        ev(50, Action::BackMerge, 1000, 8),
        ev(100, Action::Complete, 0, 8),
        // A bio that does join the request below it.
        ev(200, Action::Queue, 2000, 8),
        ev(201, Action::GetRq, 2000, 8),
        ev(210, Action::BackMerge, 2008, 8),
        ev(220, Action::Issue, 2000, 16),
        ev(300, Action::Complete, 2000, 16),
    ]);
    assert_eq!(d.in_flight(), 0, "nothing left in flight");
    assert_eq!(d.completed.write, 2);
    assert_eq!(d.bytes_completed.write, (8 + 16) * 512);
    let t = d.iostat.total(1_000_000_000);
    assert!(
        (t.util - 100.0 * (89.0 + 99.0) / 1e9).abs() < 1e-9,
        "{}",
        t.util
    );
}

/// An fsync on ext4 as the kernel traces it (a live capture's events):
/// the data write; then the empty PREFLUSH write (Q, G, never issued),
/// the flush machinery's own flush request (D, C: no G), and the empty
/// write's end (C, 0 bytes). diskstats counts two writes and a flush.
#[test]
fn an_fsyncs_flush_counts_a_write_and_a_flush_as_the_kernel_does() {
    let w = Rwbs::WRITE | Rwbs::SYNC;
    let pre = Rwbs::PREFLUSH | Rwbs::WRITE | Rwbs::SYNC;
    let flush = Rwbs::PREFLUSH | Rwbs::FLUSH;
    let e = |ts, a, sector, sectors, rwbs| BlockEvent::for_test(ts, a, sector, sectors, rwbs);
    let d = fed(&[
        e(10, Action::Queue, 800, 16, w),
        e(11, Action::GetRq, 800, 16, w),
        e(12, Action::Issue, 800, 16, w),
        e(40, Action::Complete, 800, 16, w),
        e(50, Action::Queue, 0, 0, pre),
        e(51, Action::GetRq, 0, 0, pre),
        e(60, Action::Issue, 0, 0, flush),
        e(80, Action::Complete, 0, 0, flush),
        e(81, Action::Complete, 0, 0, w),
    ]);
    assert_eq!(d.in_flight(), 0, "nothing left in flight");
    assert_eq!((d.completed.write, d.completed.flush), (2, 1));
    // Device time: the data write's and the flush's; the empty write
    // never reached the driver.
    assert_eq!(d.d2c.count(), 2);
    assert_eq!(d.d2c.sum(), 28 + 20);
}

/// A write the flush machinery sequenced completes twice: with its
/// data, and with no bytes when its flush sequence ends; it counts once.
#[test]
fn a_sequenced_write_counts_once() {
    let fua = Rwbs::WRITE | Rwbs::SYNC;
    let flush = Rwbs::PREFLUSH | Rwbs::FLUSH;
    let e = |ts, a, sector, sectors, rwbs| BlockEvent::for_test(ts, a, sector, sectors, rwbs);
    let d = fed(&[
        e(10, Action::Queue, 64, 8, Rwbs::PREFLUSH | Rwbs::FUA | fua),
        e(11, Action::GetRq, 64, 8, Rwbs::PREFLUSH | Rwbs::FUA | fua),
        e(12, Action::Issue, 0, 0, flush),
        e(20, Action::Complete, 0, 0, flush),
        e(21, Action::Issue, 64, 8, fua),
        e(30, Action::Complete, 64, 8, fua),
        e(31, Action::Issue, 0, 0, flush),
        e(40, Action::Complete, 0, 0, flush),
        e(41, Action::Complete, 64, 0, fua),
    ]);
    assert_eq!(d.in_flight(), 0);
    assert_eq!((d.completed.write, d.completed.flush), (1, 2));
    assert_eq!(d.bytes_completed.write, 8 * 512);
    assert_eq!(d.d2c.sum(), 8 + 9 + 9);
}

/// `N` with data (write zeroes, zone append) is a write, as diskstats
/// counts it; an empty `N` stays a flush.
#[test]
fn rwbs_n_with_data_is_a_write() {
    assert_eq!(op_of(Rwbs(Rwbs::NONE), 4096), OpKind::Write);
    assert_eq!(op_of(Rwbs(Rwbs::NONE), 0), OpKind::Flush);
}
