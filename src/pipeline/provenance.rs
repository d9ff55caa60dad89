//! What the inputs are, beyond their format: two recordings of one run
//! (the same block events in two formats, which would count every request
//! twice), different recordings merged into one trace, or the same run on
//! both sides of a comparison.
//!
//! Each event, as it streams by, leaves marks on the record of the input
//! (the path on the command line) its source belongs to: a count, the
//! first and last timestamp, and, where something compares the inputs (two
//! or more read as one trace, or runs compared), a bottom-k sample of the
//! block events — a hash per block event and, for the few that make the
//! sample, a map update. Constant work per event and [`SAMPLE`] entries
//! per input, whatever the trace's length.

use crate::analyze::Analysis;
use crate::error::{Error, Result};
use crate::ingest::{self, Source};
use crate::model::snapshot::Snapshot;
use crate::model::{BlockEvent, Event};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::PathBuf;

/// Block events kept per input: the ones whose keys hash lowest (a
/// bottom-k sketch). Two inputs are compared on the keys both could have
/// kept, so an input read in per-CPU pieces, or one that holds a part of
/// the other, compares like a whole.
const SAMPLE: usize = 1024;

/// Fewer sampled keys than this on the smaller side: too few to judge.
const MIN_SAMPLED: usize = 8;

/// Two inputs are one run recorded twice when at least this share of the
/// smaller one's sampled block events (device, action, sector, size and
/// process alike) is in the other at one clock offset. Measured on every
/// pair of committed fixtures: the recorders of one run (blk tracer,
/// ftrace text with and without irq flags, trace-cmd, perf script with
/// its own clock 5.6 ms away, blkparse text with times from 0) give 0.998
/// or more, all offsets within 100 µs of the median; two different runs
/// at most 0.31 (wbt-default and wbt-target10us: one workload, recorded
/// by one process whose threads kept their pids), the others 0.11 or less.
const SAME_RUN_SHARE: f64 = 0.8;

/// How far one event's two timestamps may stray from the two recordings'
/// clock offset: recorders stamp the same event a few µs apart.
const TOLERANCE_NS: i128 = 1_000_000;

/// The marks one input's events left.
#[derive(Debug, Default)]
struct Marks {
    /// Whether block events go into `sample` (not when nothing compares
    /// this input with another: a hash per event saved).
    sampling: bool,
    events: u64,
    first_ns: Option<u64>,
    last_ns: Option<u64>,
    sample: Sample,
}

impl Marks {
    fn see(&mut self, e: &Event) {
        self.events += 1;
        if let Some(ts) = e.ts() {
            self.first_ns = Some(self.first_ns.map_or(ts, |f| f.min(ts)));
            self.last_ns = Some(self.last_ns.map_or(ts, |l| l.max(ts)));
        }
        if let (Event::Block(b), true) = (e, self.sampling) {
            self.sample.see(key(b), b.ts);
        }
    }
}

/// splitmix64's finaliser: every bit of the input moves every bit of the
/// output, so that the lowest hashes are a fair sample.
fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// What every recorder of one run sees alike in a block event (not its
/// time, whose clock differs): device, action, sector, size and the
/// process it ran in. Another run of the same workload has other pids.
fn key(b: &BlockEvent) -> u64 {
    let dev_pid = ((b.dev.0 as u64) << 32) | b.pid as u64;
    let what = ((b.bytes as u64) << 8) | b.action as u8 as u64;
    mix(mix(mix(dev_pid) ^ b.sector) ^ what)
}

/// The [`SAMPLE`] lowest keys seen, each with the first time it was seen.
#[derive(Debug, Default, Clone)]
struct Sample {
    keys: BTreeMap<u64, u64>,
    /// The largest key kept, once full: kept here because looking it up in
    /// the map for every event was a tenth of reading a trace.
    largest: u64,
}

impl Sample {
    /// Keys above this cannot be in the sample (all fit while not full).
    fn limit(&self) -> u64 {
        if self.keys.len() < SAMPLE {
            u64::MAX
        } else {
            self.largest
        }
    }

    fn see(&mut self, key: u64, ts: u64) {
        if key > self.limit() {
            return;
        }
        let t = self.keys.entry(key).or_insert(ts);
        *t = (*t).min(ts);
        if self.keys.len() > SAMPLE {
            self.keys.pop_last();
        }
        if self.keys.len() >= SAMPLE {
            self.largest = *self.keys.keys().next_back().expect("full");
        }
    }
}

/// Two inputs' block events compared on the keys both samples cover.
#[derive(Debug, PartialEq)]
struct Coincidence {
    /// Sampled keys of the smaller side.
    sampled: usize,
    /// Of those, found in the other at the common clock offset.
    matched: usize,
    /// The other's clock minus this one's, ns (the median over matches).
    offset_ns: i128,
}

impl Coincidence {
    fn same_run(&self) -> bool {
        self.sampled >= MIN_SAMPLED && self.matched as f64 >= SAME_RUN_SHARE * self.sampled as f64
    }
}

fn coincidence(a: &Sample, b: &Sample) -> Option<Coincidence> {
    let limit = a.limit().min(b.limit());
    let covered = |s: &Sample| s.keys.range(..=limit).count();
    let sampled = covered(a).min(covered(b));
    if sampled == 0 {
        return None;
    }
    let mut offsets: Vec<i128> = a
        .keys
        .range(..=limit)
        .filter_map(|(k, ta)| b.keys.get(k).map(|tb| *tb as i128 - *ta as i128))
        .collect();
    if offsets.is_empty() {
        return None;
    }
    offsets.sort_unstable();
    let offset_ns = offsets[offsets.len() / 2];
    let matched = offsets
        .iter()
        .filter(|o| (**o - offset_ns).abs() <= TOLERANCE_NS)
        .count();
    Some(Coincidence {
        sampled,
        matched,
        offset_ns,
    })
}

/// The inputs being read: each source's events leave marks on the record
/// of its input ([`Tap::see`]); [`Tap::inputs`] once the stream is drained.
pub struct Tap {
    inputs: Vec<(PathBuf, Marks)>,
    /// Each source's input, by the source's index.
    input_of: Vec<usize>,
}

/// Opens every path like [`ingest::open_inputs`], each source noted with
/// the input it belongs to. A file reached twice (the same path, or
/// `./a` and `a`) is read once.
pub fn open(paths: &[PathBuf], sample: bool) -> Result<(Vec<Box<dyn Source>>, Tap)> {
    let mut sources: Vec<Box<dyn Source>> = Vec::new();
    let mut seen = HashSet::new();
    let mut tap = Tap {
        inputs: Vec::new(),
        input_of: Vec::new(),
    };
    for p in paths {
        for s in ingest::open_inputs(std::slice::from_ref(p))? {
            let id = std::fs::canonicalize(s.path()).unwrap_or_else(|_| s.path().to_path_buf());
            if seen.insert(id) {
                sources.push(s);
                tap.input_of.push(tap.inputs.len());
            }
        }
        let marks = Marks {
            sampling: sample,
            ..Marks::default()
        };
        tap.inputs.push((p.clone(), marks));
    }
    Ok((sources, tap))
}

impl Tap {
    /// Source `source`'s event `e` marks its input's record.
    #[inline]
    pub fn see(&mut self, source: usize, e: &Event) {
        if let Some(&i) = self.input_of.get(source) {
            self.inputs[i].1.see(e);
        }
    }

    /// What each input held, once its events have been read; `snapshots`
    /// are the inputs' own, in the same order.
    pub fn inputs(self, snapshots: &[Option<Snapshot>]) -> Inputs {
        Inputs(
            self.inputs
                .into_iter()
                .zip(snapshots.iter().chain(std::iter::repeat(&None)))
                .map(|((path, m), snapshot)| Input {
                    recording: Recording::of(snapshot.as_ref(), &m),
                    canonical: std::fs::canonicalize(&path).ok(),
                    path,
                    events: m.events,
                    first_ns: m.first_ns,
                    last_ns: m.last_ns,
                    sample: m.sample,
                })
                .collect(),
        )
    }
}

/// When and where an input was recorded, as far as it says.
#[derive(Debug, Clone, PartialEq)]
struct Recording {
    /// Monotonic ns: the snapshot's before and after, or the first and
    /// last event.
    from_ns: u64,
    to_ns: u64,
    from_snapshot: bool,
    /// The kernel's release and version and the CPUs, from a snapshot.
    system: Option<String>,
}

impl Recording {
    fn of(snapshot: Option<&Snapshot>, m: &Marks) -> Option<Recording> {
        // The machine as far as the snapshot tells: kernel and CPUs.
        let system = snapshot.map(|s| {
            let b = &s.before;
            let part = |v: &Option<String>| v.clone().unwrap_or_default();
            format!(
                "kernel {} {}, CPUs {} {}",
                part(&b.kernel.release),
                part(&b.kernel.version),
                part(&b.cpus.online),
                part(&b.cpus.model)
            )
            .trim()
            .to_string()
        });
        let before = snapshot.and_then(|s| s.before.taken_at_mono_ns);
        let after = snapshot.and_then(|s| s.after.taken_at_mono_ns);
        let (from_ns, to_ns, from_snapshot) = match (before, after) {
            (Some(a), Some(b)) if a <= b => (a, b, true),
            _ => (m.first_ns?, m.last_ns?, false),
        };
        Some(Recording {
            from_ns,
            to_ns,
            from_snapshot,
            system,
        })
    }

    /// Whether the two could be one recording: their times overlap and,
    /// when both say, on one system.
    fn may_be_one(&self, o: &Recording) -> bool {
        !self.other_system(o) && self.from_ns <= o.to_ns && o.from_ns <= self.to_ns
    }

    fn other_system(&self, o: &Recording) -> bool {
        matches!((&self.system, &o.system), (Some(a), Some(b)) if a != b)
    }

    /// Its times, and its system when `systems` (they differ).
    fn describe(&self, systems: bool) -> String {
        let s = |ns: u64| {
            format!(
                "{}.{:03}",
                ns / 1_000_000_000,
                ns % 1_000_000_000 / 1_000_000
            )
        };
        let mut d = format!(
            "{}..{} s{}",
            s(self.from_ns),
            s(self.to_ns),
            if self.from_snapshot {
                " by its snapshot"
            } else {
                ""
            }
        );
        if let Some(k) = self.system.as_ref().filter(|_| systems) {
            d.push_str(&format!(", {k}"));
        }
        d
    }
}

/// One path of the command line and what its events showed.
#[derive(Debug)]
pub struct Input {
    pub path: PathBuf,
    canonical: Option<PathBuf>,
    events: u64,
    first_ns: Option<u64>,
    last_ns: Option<u64>,
    sample: Sample,
    recording: Option<Recording>,
}

impl Input {
    /// Why `self` and `o` are one run, if they are: one file, identical
    /// events, or the same block events at one clock offset.
    fn same_run_as(&self, o: &Input) -> Option<String> {
        if self.canonical.is_some() && self.canonical == o.canonical {
            return Some("the same file".into());
        }
        if self.events > 0
            && (self.events, self.first_ns, self.last_ns) == (o.events, o.first_ns, o.last_ns)
        {
            return Some(format!(
                "identical content: {} events from the same first to the same last timestamp",
                self.events
            ));
        }
        let c = coincidence(&self.sample, &o.sample)?;
        if !c.same_run() {
            return None;
        }
        let apart = c.offset_ns.unsigned_abs() as f64;
        let when = if apart <= TOLERANCE_NS as f64 {
            "at the same times".to_string()
        } else if apart < 1e9 {
            format!("with the clocks {:.3} ms apart", apart / 1e6)
        } else {
            format!("with the clocks {:.3} s apart", apart / 1e9)
        };
        Some(format!(
            "the same block events: {} of {} sampled alike in device, action, sector, size and process, {when}",
            c.matched, c.sampled
        ))
    }
}

/// The inputs of one run, in command-line order.
#[derive(Debug)]
pub struct Inputs(pub Vec<Input>);

impl Inputs {
    /// Refuses two inputs that hold one run: merged, every request of it
    /// would count twice.
    pub fn refuse_one_run_twice(&self) -> Result<()> {
        // A file reached twice is read once: the later input has no events.
        let read: Vec<&Input> = self.0.iter().filter(|i| i.events > 0).collect();
        for (i, a) in read.iter().enumerate() {
            for b in &read[i + 1..] {
                if let Some(why) = a.same_run_as(b) {
                    return Err(Error::bad_input(format!(
                        "{} and {} are one run recorded twice ({why}): merged, every request would count twice; give only one of them",
                        a.path.display(),
                        b.path.display()
                    )));
                }
            }
        }
        Ok(())
    }

    /// A warning when the inputs are different recordings (their times do
    /// not overlap, or their kernels differ) merged as one trace.
    pub fn different_recordings(&self) -> Option<String> {
        let known: Vec<(&Input, &Recording)> = self
            .0
            .iter()
            .filter_map(|i| Some((i, i.recording.as_ref()?)))
            .collect();
        // Inputs that may be one recording, grouped (by overlap, chained).
        let mut group: Vec<usize> = (0..known.len()).collect();
        for i in 0..known.len() {
            for j in 0..i {
                if known[i].1.may_be_one(known[j].1) {
                    let (gi, gj) = (group[i], group[j]);
                    for g in group.iter_mut() {
                        if *g == gi {
                            *g = gj;
                        }
                    }
                }
            }
        }
        let groups: BTreeSet<usize> = group.iter().copied().collect();
        if groups.len() < 2 {
            return None;
        }
        let systems = known
            .iter()
            .any(|(_, r)| known.iter().any(|(_, o)| r.other_system(o)));
        let described: Vec<String> = known
            .iter()
            .map(|(i, r)| format!("{} ({})", i.path.display(), r.describe(systems)))
            .collect();
        Some(format!(
            "the inputs are {} different recordings ({}), merged as one trace: {}; every figure mixes them (to compare runs: iosleuth diff)",
            groups.len(),
            if systems {
                "made on different systems"
            } else {
                "made at times that do not overlap"
            },
            described.join(", ")
        ))
    }
}

/// The subjects of a run's figures: devices, probe operations, journals.
fn subjects(a: &Analysis) -> BTreeSet<String> {
    let mut s = BTreeSet::new();
    s.extend(
        a.block
            .devices
            .iter()
            .map(|d| format!("device {}", d.device)),
    );
    s.extend(a.syscalls.operations.keys().map(|o| format!("probe {o}")));
    s.extend(a.fs.journals.keys().map(|j| format!("journal {j}")));
    s
}

/// What `diff` and `check` should say about their two sides: a run that is
/// on both (the comparison can only find nothing), or two sides with no
/// device, probe operation or journal in common (nothing to compare).
pub fn comparison_warnings(
    base: &[(&Analysis, &Inputs)],
    cand: &[(&Analysis, &Inputs)],
) -> Vec<String> {
    let mut out = Vec::new();
    for (_, bi) in base {
        for (_, ci) in cand {
            let same =
                bi.0.iter()
                    .find_map(|b| ci.0.iter().find_map(|c| Some((b, c, b.same_run_as(c)?))));
            if let Some((b, c, why)) = same {
                out.push(format!(
                    "baseline {} and candidate {} are the same run ({why}): no difference between them is a change of the system",
                    b.path.display(),
                    c.path.display()
                ));
            }
        }
    }
    let every = |side: &[(&Analysis, &Inputs)]| -> BTreeSet<String> {
        let mut it = side.iter().map(|(a, _)| subjects(a));
        let first = it.next().unwrap_or_default();
        it.fold(first, |acc, s| acc.intersection(&s).cloned().collect())
    };
    let (sb, sc) = (every(base), every(cand));
    if sb.intersection(&sc).next().is_none() {
        let list = |s: &BTreeSet<String>| {
            if s.is_empty() {
                "none".to_string()
            } else {
                s.iter().cloned().collect::<Vec<_>>().join(", ")
            }
        };
        out.push(format!(
            "nothing to compare: the baseline and the candidate have no device, probe operation or journal in common (baseline: {}; candidate: {})",
            list(&sb),
            list(&sc)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(keys: impl Iterator<Item = (u64, u64)>) -> Sample {
        let mut s = Sample::default();
        for (k, t) in keys {
            s.see(mix(k), t);
        }
        s
    }

    #[test]
    fn the_sample_keeps_the_lowest_keys_and_their_first_time() {
        let s = sample((0..10_000u64).map(|i| (i % 5000, i)));
        assert_eq!(s.keys.len(), SAMPLE);
        let all: BTreeSet<u64> = (0..5000u64).map(mix).collect();
        let lowest: Vec<u64> = all.iter().take(SAMPLE).copied().collect();
        assert_eq!(s.keys.keys().copied().collect::<Vec<_>>(), lowest);
        // Each key's first time: the first pass.
        assert!(s.keys.values().all(|t| *t < 5000));
    }

    #[test]
    fn one_run_at_another_clock_coincides_another_run_does_not() {
        let run = |shift: u64, jitter: u64| {
            sample(
                (0..3000u64)
                    .map(move |i| (i, 1_000_000_000 + i * 50_000 + shift + (i * 7919) % jitter)),
            )
        };
        let a = run(0, 1);
        // The same events 5.6 ms later, a few µs apart each.
        let b = run(5_600_000, 30_000);
        let c = coincidence(&a, &b).unwrap();
        assert!(c.same_run(), "{c:?}");
        assert!((c.offset_ns - 5_600_000).abs() < 30_000, "{c:?}");
        // A part of it (its second half) is in it too.
        let half = sample((1500..3000u64).map(|i| (i, 1_000_000_000 + i * 50_000)));
        assert!(coincidence(&half, &a).unwrap().same_run());
        // The same keys at unrelated times: not one run.
        let other = sample((0..3000u64).map(|i| (i, (i * 2_654_435_761) % 10_000_000_000)));
        assert!(!coincidence(&a, &other).unwrap().same_run());
        // Other keys: nothing in common.
        let keys = sample((5000..8000u64).map(|i| (i, 1_000_000_000 + i * 50_000)));
        assert_eq!(coincidence(&a, &keys), None);
    }
}
