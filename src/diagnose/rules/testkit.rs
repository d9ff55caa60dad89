//! Small analyses for the rules' unit tests: a few lines of ftrace text
//! (the format of tests/fixtures/*.txt) in, an `Analysis` out, with a
//! system snapshot attached when a test needs one.

use crate::analyze::block::BlockConfig;
use crate::analyze::{Analysis, Filter};
use crate::diagnose::{Finding, Verdict};
use serde_json::{json, Value};
use std::path::Path;

/// Analyses ftrace text as `iosleuth report` does (the 5 slowest
/// operations of each kind, 1 s iostat intervals). The one place where the
/// tests call the reader and the analyses.
pub(crate) fn analysis(text: &str) -> Analysis {
    let source = crate::ingest::open_bytes(Path::new("unit-test.txt"), text.as_bytes().to_vec())
        .expect("the test's trace text is readable");
    let merger = crate::ingest::Merger::new(vec![source]);
    let filter = Filter {
        top: 5,
        ..Default::default()
    };
    crate::analyze::analyze(merger, &filter, BlockConfig::default())
}

/// One ftrace line: `task` (`comm-pid`) on `cpu` at `us` microseconds,
/// e.g. `line(1_000, "fio-200", 0, "block_bio_queue", "7,0 R 0 + 8 [fio]")`.
pub(crate) fn line(us: u64, task: &str, cpu: u32, event: &str, payload: &str) -> String {
    format!(
        "{task:>20} [{cpu:03}] ..... {}.{:06}: {event}: {payload}\n",
        us / 1_000_000,
        us % 1_000_000
    )
}

/// Trace lines kept in time order, whatever order a test adds them in.
#[derive(Default)]
pub(crate) struct Trace(Vec<(u64, String)>);

impl Trace {
    /// Adds a [`line`].
    pub(crate) fn add(&mut self, us: u64, task: &str, cpu: u32, event: &str, payload: &str) {
        self.0.push((us, line(us, task, cpu, event, payload)));
    }

    /// The lines by time (stable: lines of one time keep their order).
    pub(crate) fn text(&self) -> String {
        let mut lines: Vec<&(u64, String)> = self.0.iter().collect();
        lines.sort_by_key(|(us, _)| *us);
        lines.into_iter().map(|(_, l)| l.as_str()).collect()
    }
}

/// The analysis with a system snapshot whose `before` part is `before`,
/// shaped like tests/fixtures/*.cap/snapshot.json's (`block_devices`,
/// `vm`, `sched`, `jbd2`, `cgroup_io_limits`, …).
pub(crate) fn with_snapshot(mut a: Analysis, before: Value) -> Analysis {
    a.snapshot = crate::model::snapshot::Snapshot::from_value(json!({ "before": before }));
    assert!(
        a.snapshot.is_some(),
        "the test's snapshot has a snapshot's shape"
    );
    a
}

/// A snapshot's `block_devices`: one device `name` (`loop0`) with its
/// `MAJ,MIN` and these `queue/*` settings.
pub(crate) fn block_devices(name: &str, dev: &str, queue: &[(&str, &str)]) -> Value {
    let queue: serde_json::Map<String, Value> = queue
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    json!({ name: { "dev": dev, "holders": [], "queue": queue } })
}

/// The finding of a rule that must fire.
pub(crate) fn fired(v: Verdict) -> Finding {
    match v {
        Verdict::Fired(f) => f,
        Verdict::NotFired(why) => panic!("expected a finding, the rule said: {why}"),
    }
}

/// Why a rule that must stay silent did not fire.
pub(crate) fn silent(v: Verdict) -> String {
    match v {
        Verdict::NotFired(why) => why,
        Verdict::Fired(f) => panic!("expected no finding, got: {}", f.title),
    }
}

/// A remedy's settings as (knob, now, value), to compare whole.
pub(crate) fn knobs(r: &crate::diagnose::Remedy) -> Vec<(&str, Option<&str>, &str)> {
    r.settings
        .iter()
        .map(|s| (s.knob.as_str(), s.now.as_deref(), s.value.as_str()))
        .collect()
}
