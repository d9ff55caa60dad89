//! `export --perfetto`: the trace decodes (protobuf, Perfetto's messages),
//! follows the format's rules (every slice ends, every counter value is on
//! a track declared a counter track, every thread's process has a process
//! track, every flow id is at both of its ends), and the tracks hold what
//! `report` counts: requests per device, operations per kind, runnable
//! time per thread, journal commits, irqs and softirqs.

use crate::common;

use common::*;
use iosleuth::testing::proto::{trace_packet::Data, track_descriptor, track_event, Trace};
use prost::Message;
use std::collections::HashMap;
use std::path::Path;

/// A slice's integer arguments, by name.
pub(crate) type Args = HashMap<String, i64>;
/// (track, start, end, name, arguments)
pub(crate) type Slice = (u64, u64, u64, String, Args);

pub(crate) struct Decoded {
    /// uuid → (name, parent uuid, thread id)
    pub tracks: HashMap<u64, (String, Option<u64>, Option<i64>)>,
    /// (track, start, end, name, int arguments)
    pub slices: Vec<Slice>,
    pub counters: usize,
    /// flow id → the tracks of the events that carry it.
    pub flows: HashMap<u64, Vec<u64>>,
    /// thread id → its process id, as the thread tracks say.
    pub thread_pids: HashMap<i64, i32>,
    /// The earliest timestamp in the file: the UI's zero.
    pub first_ts: Option<u64>,
}

pub(crate) fn export(cap: &str) -> Decoded {
    let d = tempdir();
    let out = d.path().join("out.pftrace");
    let o = outcome(&["export", "--perfetto", out.to_str().unwrap(), cap]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let bytes = std::fs::read(&out).unwrap();
    let trace = Trace::decode(bytes.as_slice()).expect("a Perfetto trace");
    let mut tracks = HashMap::new();
    let mut open: HashMap<u64, Vec<(u64, String, Args)>> = HashMap::new();
    let mut slices = Vec::new();
    let mut counters = 0;
    let mut counter_tracks = std::collections::HashSet::new();
    let mut processes = std::collections::HashSet::new();
    let mut thread_pids = HashMap::new();
    let mut flows: HashMap<u64, Vec<u64>> = HashMap::new();
    let mut first_ts: Option<u64> = None;
    for p in &trace.packet {
        if let Some(ts) = p.timestamp {
            first_ts = Some(first_ts.map_or(ts, |f| f.min(ts)));
        }
        assert_eq!(
            p.trusted_packet_sequence_id,
            Some(1),
            "every packet on the sequence"
        );
        match &p.data {
            Some(Data::TrackDescriptor(t)) => {
                let name = match &t.static_or_dynamic_name {
                    Some(track_descriptor::StaticOrDynamicName::Name(n)) => n.clone(),
                    _ => t
                        .thread
                        .as_ref()
                        .and_then(|t| t.thread_name.clone())
                        .unwrap_or_default(),
                };
                if let Some(parent) = t.parent_uuid {
                    assert!(tracks.contains_key(&parent), "parent described first");
                }
                let tid = t.thread.as_ref().and_then(|t| t.tid);
                if t.counter.is_some() {
                    counter_tracks.insert(t.uuid.unwrap());
                }
                if let Some(p) = &t.process {
                    assert!(t.thread.is_none(), "a process or a thread, not both");
                    processes.insert(p.pid.expect("a process track has its pid"));
                }
                if let Some(th) = &t.thread {
                    let pid = th.pid.expect("a thread track has its process id");
                    thread_pids.insert(th.tid.expect("and its thread id"), pid);
                }
                assert!(tracks
                    .insert(t.uuid.unwrap(), (name, t.parent_uuid, tid))
                    .is_none());
            }
            Some(Data::TrackEvent(e)) => {
                let track = e.track_uuid.unwrap();
                assert!(tracks.contains_key(&track), "event on a described track");
                let ts = p.timestamp.unwrap();
                for f in &e.flow_ids {
                    flows.entry(*f).or_default().push(track);
                }
                match track_event::Type::try_from(e.r#type.unwrap()).unwrap() {
                    track_event::Type::SliceBegin => {
                        let name = match &e.name_field {
                            Some(track_event::NameField::Name(n)) => n.clone(),
                            _ => panic!("a slice has a name"),
                        };
                        let args = e
                            .debug_annotations
                            .iter()
                            .filter_map(|a| {
                                use iosleuth::testing::proto::debug_annotation::{
                                    NameField, Value,
                                };
                                match (&a.name_field, &a.value) {
                                    (Some(NameField::Name(n)), Some(Value::IntValue(v))) => {
                                        Some((n.clone(), *v))
                                    }
                                    _ => None,
                                }
                            })
                            .collect();
                        open.entry(track).or_default().push((ts, name, args));
                    }
                    track_event::Type::SliceEnd => {
                        let (start, name, args) = open
                            .get_mut(&track)
                            .and_then(|s| s.pop())
                            .expect("END after its BEGIN");
                        assert!(ts >= start);
                        slices.push((track, start, ts, name, args));
                    }
                    track_event::Type::Counter => {
                        // The trace processor drops values on a track not
                        // declared a counter track.
                        assert!(
                            counter_tracks.contains(&track),
                            "a counter on a counter track"
                        );
                        counters += 1
                    }
                    track_event::Type::Instant => assert!(!e.flow_ids.is_empty()),
                    other => panic!("unexpected event type {other:?}"),
                }
            }
            _ => {}
        }
    }
    assert!(open.values().all(|s| s.is_empty()), "every slice ended");
    for (tid, pid) in &thread_pids {
        assert!(
            processes.contains(pid),
            "thread {tid}: its process {pid} has a process track"
        );
    }
    for (id, ends) in &flows {
        assert_eq!(ends.len(), 2, "flow {id}: an operation and a request");
    }
    Decoded {
        tracks,
        slices,
        counters,
        flows,
        thread_pids,
        first_ts,
    }
}

impl Decoded {
    /// The names of a track and its ancestors, innermost first.
    pub(crate) fn path(&self, mut t: u64) -> Vec<&str> {
        let mut out = Vec::new();
        while let Some((name, parent, _)) = self.tracks.get(&t) {
            out.push(name.as_str());
            match parent {
                Some(p) => t = *p,
                None => break,
            }
        }
        out
    }

    /// Slices on tracks whose path (innermost first) starts with `names`.
    pub(crate) fn on<'a>(&'a self, names: &'a [&str]) -> impl Iterator<Item = &'a Slice> {
        self.slices
            .iter()
            .filter(move |s| self.path(s.0).starts_with(names))
    }

    /// The slices on tracks whose innermost name is `kind` (`io_uring
    /// read`, `fault file`), and the flows that leave those tracks.
    pub(crate) fn slices_and_flows(&self, kind: &str) -> (usize, usize) {
        let names = [kind];
        let slices: Vec<&Slice> = self.on(&names).collect();
        let tracks: std::collections::HashSet<u64> = slices.iter().map(|s| s.0).collect();
        let flows = self
            .flows
            .values()
            .filter(|ends| ends.iter().any(|e| tracks.contains(e)))
            .count();
        (slices.len(), flows)
    }

    /// Slices on one track never overlap unless one holds the other: what
    /// Perfetto needs to draw them (requests that overlap use lanes).
    pub(crate) fn assert_nested(&self) {
        let mut by: HashMap<u64, Vec<(u64, u64)>> = HashMap::new();
        for s in &self.slices {
            by.entry(s.0).or_default().push((s.1, s.2));
        }
        for (t, mut v) in by {
            v.sort_by_key(|&(a, b)| (a, std::cmp::Reverse(b)));
            let mut stack: Vec<u64> = Vec::new();
            for (a, b) in v {
                while stack.last().is_some_and(|&end| end <= a) {
                    stack.pop();
                }
                if let Some(&end) = stack.last() {
                    assert!(
                        b <= end,
                        "track {:?}: slice {a}..{b} crosses one ending at {end}",
                        self.path(t)
                    );
                }
                stack.push(b);
            }
        }
    }
}

fn report(cap: &str) -> serde_json::Value {
    json_report(&[cap], &["--top", "5"])
}

#[test]
fn requests_lanes_and_queue_depth_match_report() {
    for cap in [
        "tests/fixtures/healthy-run1.cap",
        "tests/fixtures/queue-saturated.cap",
        "tests/fixtures/dd-seqwrite.cap",
    ] {
        let t = export(cap);
        t.assert_nested();
        let rep = report(cap);
        for dev in rep["devices"].as_array().unwrap() {
            let id = dev["device"].as_str().unwrap();
            let completed: u64 = dev["completed"]
                .as_object()
                .unwrap()
                .values()
                .map(|v| v.as_u64().unwrap())
                .sum();
            let on_dev: Vec<_> = t
                .slices
                .iter()
                .filter(|s| {
                    let p = t.path(s.0);
                    p.len() == 3
                        && p[0] == "requests"
                        && p[1].contains(id)
                        && p[2] == "Block devices"
                })
                .collect();
            assert_eq!(
                on_dev.len() as u64,
                completed,
                "{cap} {id}: one slice per completed request"
            );
            let d2c: Vec<i64> = on_dev
                .iter()
                .filter_map(|s| s.4.get("d2c_ns").copied())
                .collect();
            assert_eq!(
                d2c.len() as u64,
                dev["d2c"]["count"].as_u64().unwrap(),
                "{cap} {id}"
            );
            if let Some(max) = d2c.iter().max() {
                assert_eq!(
                    *max as u64,
                    dev["d2c"]["max"].as_u64().unwrap(),
                    "{cap} {id}"
                );
            }
        }
        if rep["devices"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["d2c"]["count"].as_u64() > Some(0))
        {
            assert!(t.counters > 0, "{cap}: a queue depth counter");
        }
    }
    // A saturated queue has many requests at once: they need many lanes.
    let t = export("tests/fixtures/queue-saturated.cap");
    let lanes = t
        .tracks
        .values()
        .filter(|(n, _, _)| n == "requests")
        .count();
    assert!(lanes >= 8, "{lanes} lanes");
}

#[test]
fn threads_show_their_operations_and_states_as_report_counts_them() {
    for cap in [
        "tests/fixtures/cpu-contention-hogs.cap",
        "tests/fixtures/dd-seqwrite.cap",
        "tests/fixtures/journal-4m.cap",
    ] {
        let t = export(cap);
        t.assert_nested();
        let rep = report(cap);
        for (kind, total) in rep["outliers"]["totals"].as_object().unwrap() {
            let n = match kind.strip_prefix("syscall ") {
                // Syscalls on the thread track itself.
                Some(call) => t
                    .slices
                    .iter()
                    .filter(|s| s.3 == call && t.tracks[&s.0].2.is_some())
                    .count(),
                None => t.on(&[kind.as_str()]).count(),
            };
            assert_eq!(n as u64, total["count"].as_u64().unwrap(), "{cap}: {kind}");
        }
        // Runnable time per thread, as report sums it.
        let mut runnable: HashMap<i64, u64> = HashMap::new();
        for s in t.on(&["state"]).filter(|s| s.3 == "runnable") {
            let tid = t.tracks[&t.tracks[&s.0].1.unwrap()].2.unwrap();
            *runnable.entry(tid).or_default() += s.2 - s.1;
        }
        // Without scheduler events the report has no threads (null).
        for th in rep["sched"]["threads"].as_array().into_iter().flatten() {
            let pid = th["pid"].as_i64().unwrap();
            assert_eq!(
                runnable.get(&pid).copied().unwrap_or(0),
                th["runnable_ns"].as_u64().unwrap(),
                "{cap}: pid {pid}"
            );
        }
    }
}

#[test]
fn journal_commits_irqs_and_softirqs_match_report() {
    let cap = "tests/fixtures/dd-seqwrite.cap";
    let t = export(cap);
    let rep = report(cap);
    let commits: u64 = rep["fs"]["journals"]
        .as_object()
        .unwrap()
        .values()
        .map(|j| j["commits"].as_u64().unwrap())
        .sum();
    assert!(commits > 0);
    assert_eq!(
        t.slices
            .iter()
            .filter(|s| t.path(s.0).last() == Some(&"Journal commits"))
            .count() as u64,
        commits
    );
    let irqs: u64 = rep["irq"]["hardirq"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["stats"]["count"].as_u64().unwrap())
        .sum();
    let on_irq = |suffix: &str| {
        t.slices
            .iter()
            .filter(|s| {
                let p = t.path(s.0);
                p.last() == Some(&"Interrupts") && p[0].ends_with(suffix)
            })
            .count() as u64
    };
    assert!(irqs > 0);
    assert_eq!(on_irq(" irq"), irqs);
    let softirqs: u64 = rep["irq"]["softirq"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["counts"].as_object().unwrap().values())
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert!(softirqs > 0);
    assert_eq!(on_irq(" softirq"), softirqs);
    let commits_4m: u64 = report("tests/fixtures/journal-4m.cap")["fs"]["journals"]["7,0"]
        ["commits"]
        .as_u64()
        .unwrap();
    let t4 = export("tests/fixtures/journal-4m.cap");
    assert_eq!(
        t4.slices
            .iter()
            .filter(|s| t4.path(s.0).last() == Some(&"Journal commits"))
            .count() as u64,
        commits_4m
    );
}

#[test]
fn bad_input_and_several_inputs_exit_2() {
    let d = tempdir();
    let out = d.path().join("x.pftrace");
    let garbage = d.path().join("garbage.txt");
    std::fs::write(&garbage, "nothing to see\n").unwrap();
    let o = outcome(&[
        "export",
        "--perfetto",
        out.to_str().unwrap(),
        garbage.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("garbage.txt"), "{}", o.stderr);
    assert!(!Path::new(&out).exists(), "nothing written");
    let o = outcome(&[
        "export",
        "--perfetto",
        out.to_str().unwrap(),
        "tests/fixtures/dd-seqwrite.cap",
        "tests/fixtures/journal-4m.cap",
    ]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("give one input"), "{}", o.stderr);
}

/// An fsync stalled on a slow device: each operation's slice has a flow to
/// each request it waited for, as the Parquet `waited_for` table links
/// them; threads sit in their process (the snapshot's thread groups); each
/// CPU's track shows which thread ran there.
#[test]
fn operations_flow_to_their_requests_and_cpus_show_who_ran() {
    let cap = "tests/fixtures/slowdev-fsync.cap";
    let t = export(cap);
    t.assert_nested();
    assert!(
        !t.flows.is_empty(),
        "the stalled fsyncs waited for requests"
    );
    // A thread's track, or a child of one (probe operations by kind).
    let on_thread = |tr: u64| {
        t.tracks[&tr].2.is_some() || t.tracks[&tr].1.is_some_and(|p| t.tracks[&p].2.is_some())
    };
    for (id, ends) in &t.flows {
        let at_request = |tr: &u64| t.path(*tr).last() == Some(&"Block devices");
        assert_eq!(
            (
                ends.iter().filter(|tr| on_thread(**tr)).count(),
                ends.iter().filter(|tr| at_request(tr)).count()
            ),
            (1, 1),
            "flow {id}: from an operation to a request"
        );
    }
    // The workload's threads are in its process, not each its own.
    let rep = report(cap);
    let workload = rep["snapshot"]["workload"]["pid"].as_i64().unwrap();
    assert_eq!(
        t.thread_pids.get(&workload),
        Some(&(workload as i32)),
        "{:?}",
        t.thread_pids
    );
    let on_cpus: Vec<&Slice> = t
        .slices
        .iter()
        .filter(|s| t.path(s.0).last() == Some(&"CPUs"))
        .collect();
    assert!(!on_cpus.is_empty(), "the CPUs' tracks");
    assert!(
        on_cpus.iter().any(|s| s.4.get("tid") == Some(&workload)),
        "the workload ran on some CPU"
    );
}
