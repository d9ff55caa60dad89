use super::*;
use crate::ingest::source::SourceStats;
use crate::model::{Comm, TraceEvent};

/// Events given as (cpu, ts); `None` is a process name.
struct Fake {
    events: std::vec::IntoIter<Option<(u32, u64)>>,
    n: u64,
    stats: SourceStats,
}

impl Source for Fake {
    fn next_event(&mut self) -> Option<Event> {
        let e = self.events.next()?;
        self.n += 1;
        Some(match e {
            Some((cpu, ts)) => Event::Trace(TraceEvent::new(
                ts,
                cpu,
                self.n as u32,
                "x".into(),
                Comm::default(),
                Default::default(),
            )),
            None => Event::ProcessName {
                pid: self.n as u32,
                comm: Comm::new(b"name"),
            },
        })
    }
    fn path(&self) -> &Path {
        Path::new("fake")
    }
    fn format(&self) -> &'static str {
        "fake"
    }
    fn stats(&self) -> &SourceStats {
        &self.stats
    }
    fn position(&self) -> Position {
        Position::Event(self.n)
    }
}

const S: u64 = 1_000_000_000;

/// What comes out (cpu, ts, or None for a name), and the guard.
fn run(events: Vec<Option<(u32, u64)>>) -> (Vec<Option<(u32, u64)>>, TimeGuard) {
    let mut src = Fake {
        events: events.into_iter(),
        n: 0,
        stats: SourceStats::default(),
    };
    let mut g = TimeGuard::new();
    let mut out = Vec::new();
    while let Some(ev) = g.next(&mut src) {
        out.push(ev.ts().map(|t| (ev.cpu().unwrap(), t)));
    }
    (out, g)
}

fn timed(ts: &[u64]) -> Vec<Option<(u32, u64)>> {
    ts.iter().map(|&t| Some((0, t))).collect()
}

#[test]
fn in_order_passes_unchanged() {
    let mut v = timed(&[10 * S, 10 * S, 10 * S + 5, 11 * S]);
    v.insert(2, None);
    let (out, g) = run(v.clone());
    assert_eq!(out, v);
    assert_eq!((g.backwards.count, g.far.count), (0, 0));
}

#[test]
fn one_event_a_second_early_is_skipped() {
    // Among the first events (judged with the events after them).
    let (out, g) = run(timed(&[10 * S, 10 * S + 1, 9 * S, 10 * S + 2]));
    assert_eq!(out, timed(&[10 * S, 10 * S + 1, 10 * S + 2]));
    assert_eq!(g.backwards.count, 1);
    assert_eq!(
        g.backwards.first.as_deref(),
        Some("event 3 at 9.000000 s, 1.000000 s before the event before it")
    );
    // Later on.
    let start = [Some((0, 10 * S)), Some((1, 10 * S)), Some((0, 10 * S + 1))];
    let with = |rest: &[Option<(u32, u64)>]| {
        let mut v = start.to_vec();
        v.extend_from_slice(rest);
        v
    };
    let (out, g) = run(with(&[Some((0, 9 * S)), Some((0, 10 * S + 4))]));
    assert_eq!(out, with(&[Some((0, 10 * S + 4))]));
    assert_eq!(
        g.backwards.first.as_deref(),
        Some("event 4 at 9.000000 s, 1.000000 s before an earlier event of CPU 0")
    );
    // Within the tolerance, or on another CPU a little behind: kept,
    // and in time order from the one behind its CPU on.
    let (out, g) = run(with(&[
        Some((0, 10 * S + 1 - 500_000)),
        Some((2, 10 * S - 100_000_000)),
    ]));
    let v = with(&[
        Some((2, 10 * S - 100_000_000)),
        Some((0, 10 * S + 1 - 500_000)),
    ]);
    assert_eq!((out, g.backwards.count), (v, 0));
    // Another CPU far behind the rest of the file: skipped.
    let (out, g) = run(with(&[Some((3, 8 * S)), Some((0, 10 * S + 2))]));
    assert_eq!(out, with(&[Some((0, 10 * S + 2))]));
    assert_eq!(
        g.backwards.first.as_deref(),
        Some("event 4 at 8.000000 s, 2.000000 s before an earlier event")
    );
}

#[test]
fn one_event_far_ahead_is_skipped() {
    let far = 4_600_000_000 * S;
    let (out, g) = run(timed(&[10 * S, 10 * S + 1, far, 10 * S + 2, 10 * S + 3]));
    assert_eq!(out, timed(&[10 * S, 10 * S + 1, 10 * S + 2, 10 * S + 3]));
    assert_eq!((g.backwards.count, g.far.count), (0, 1));
    assert_eq!(
        g.far.first.as_deref(),
        Some("event 3 at 4600000000.000000 s, 4599999989.999999 s after the event before it")
    );
    // A few seconds ahead, the same.
    let (out, g) = run(timed(&[10 * S, 15 * S, 10 * S + 2, 10 * S + 3]));
    assert_eq!(out, timed(&[10 * S, 10 * S + 2, 10 * S + 3]));
    assert_eq!(g.far.count, 1);
    // Far ahead as the last event: skipped; a few seconds: a real pause.
    let (out, g) = run(timed(&[10 * S, 10 * S + 1, far]));
    assert_eq!((out.len(), g.far.count), (2, 1));
    let (out, g) = run(timed(&[10 * S, 10 * S + 1, 15 * S]));
    assert_eq!((out.len(), g.far.count), (3, 0));
}

#[test]
fn a_pause_is_kept() {
    let mut ts: Vec<u64> = (0..10).map(|i| 10 * S + i).collect();
    ts.extend((0..2000).map(|i| 300 * S + i));
    let (out, g) = run(timed(&ts));
    assert_eq!(out, timed(&ts));
    assert_eq!((g.backwards.count, g.far.count), (0, 0));
    // A short burst after the pause, then the end; and names in between.
    let mut v = timed(&[10 * S, 10 * S + 1, 300 * S, 300 * S + 1]);
    v.insert(3, None);
    let (out, g) = run(v.clone());
    assert_eq!((out, g.far.count), (v, 0));
}

#[test]
fn one_early_event_after_a_pause_is_skipped_not_the_pause() {
    let (out, g) = run(timed(&[
        10 * S,
        300 * S,
        300 * S + 1,
        10 * S + 1,
        300 * S + 2,
    ]));
    assert_eq!(out, timed(&[10 * S, 300 * S, 300 * S + 1, 300 * S + 2]));
    assert_eq!((g.backwards.count, g.far.count), (1, 0));
}

#[test]
fn a_damaged_first_event_is_skipped() {
    let far = 4_600_000_000 * S;
    let (out, g) = run(timed(&[far, 10 * S, 10 * S + 1, 10 * S + 2]));
    assert_eq!(out, timed(&[10 * S, 10 * S + 1, 10 * S + 2]));
    assert_eq!(g.far.count, 1);
    let (out, g) = run(timed(&[5, 3 * 86_400 * S, 3 * 86_400 * S + 1]));
    assert_eq!(out, timed(&[3 * 86_400 * S, 3 * 86_400 * S + 1]));
    assert_eq!(g.far.count, 1);
    assert_eq!(
        g.far.first.as_deref(),
        Some("event 1 at 0.000000 s, 259199.999999 s before the events after it")
    );
}

#[test]
fn names_keep_their_place_around_skipped_events() {
    let far = 4_600_000_000 * S;
    let v = vec![
        Some((0, 10 * S)),
        Some((0, far)),
        None,
        Some((0, 10 * S + 1)),
        Some((0, 10 * S + 2)),
    ];
    let (out, _) = run(v);
    assert_eq!(
        out,
        vec![
            Some((0, 10 * S)),
            None,
            Some((0, 10 * S + 1)),
            Some((0, 10 * S + 2))
        ]
    );
}

#[test]
fn a_cpu_going_back_within_the_tolerance_is_resorted_from_there() {
    // Event 3 goes back on CPU 0: from it on, time order (event 2 was
    // passed on before); equal times keep the order read; the name
    // stays after the event read before it.
    let v = vec![
        Some((0, 10 * S)),
        Some((0, 10 * S + 500)),
        Some((0, 10 * S + 300)),
        Some((1, 10 * S + 400)),
        None,
        Some((0, 10 * S + 200)),
        Some((1, 10 * S + 200)),
        Some((0, 10 * S + 2_000_000)),
    ];
    let (out, g) = run(v);
    assert_eq!(
        out,
        vec![
            Some((0, 10 * S)),
            Some((0, 10 * S + 500)),
            Some((0, 10 * S + 200)),
            Some((1, 10 * S + 200)),
            Some((0, 10 * S + 300)),
            Some((1, 10 * S + 400)),
            None,
            Some((0, 10 * S + 2_000_000)),
        ]
    );
    assert_eq!((g.behind.count, g.unsorted, g.backwards.count), (3, 0, 0));
}

#[test]
fn the_resorting_window_is_bounded() {
    // More events within the tolerance than the window holds, each
    // 1 ns before the one before it, after one that opens the window.
    let n = WINDOW_EVENTS as u64 + 10;
    let mut ts = vec![10 * S + n + 1, 10 * S + n];
    ts.extend((0..n).map(|i| 10 * S + n - 1 - i));
    let (out, g) = run(timed(&ts));
    assert_eq!(out.len(), ts.len());
    // Full, the window passes on its earliest: the 11 read after that,
    // each earlier still, came out of order, and are counted.
    assert_eq!(g.unsorted, 11);
    let w = g.warnings(Path::new("f"));
    assert!(
        w[0].contains("; 11 could not be, more than 65536 events coming within it"),
        "{w:?}"
    );
}
