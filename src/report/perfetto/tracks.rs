//! Writes packets one by one (a trace is a sequence of `packet` fields, so
//! no whole `Trace` is held in memory): track descriptors the first time a
//! track is used, then its slices as BEGIN/END pairs.

use super::proto::{
    debug_annotation, trace_packet, track_descriptor, track_event, DebugAnnotation,
    ThreadDescriptor, TracePacket, TrackDescriptor, TrackEvent,
};
use crate::analyze::rows::{OperationRow, RequestRow, SpanRow, ThreadState, ThreadStateRow};
use prost::Message;
use std::collections::HashMap;
use std::io::Write;

/// All packets are on one sequence (one writer).
const SEQUENCE: u32 = 1;

pub struct Writer<W: Write> {
    out: W,
    bytes: u64,
    next_uuid: u64,
    /// Tracks already described, by a key of ours.
    tracks: HashMap<String, u64>,
    first: bool,
    /// Device tracks' names (`7,0` → `loop0`).
    device_names: Vec<(String, String)>,
    /// Per device, the end of each lane's last request.
    lanes: HashMap<String, Vec<u64>>,
    /// Per device, the queue depth's changes (time, +1 or -1): 32 bytes
    /// a request, drawn at the end since they come out of order.
    depth: HashMap<String, Vec<(u64, i64)>>,
    /// Journal commits, hard irqs and softirqs written.
    spans: (u64, u64, u64),
}

/// A debug annotation (a slice's argument).
pub enum Arg {
    Int(&'static str, i64),
    Text(&'static str, String),
}

impl<W: Write> Writer<W> {
    pub fn new(out: W, device_names: Vec<(String, String)>) -> Writer<W> {
        Writer {
            out,
            bytes: 0,
            next_uuid: 1,
            tracks: HashMap::new(),
            first: true,
            device_names,
            lanes: HashMap::new(),
            depth: HashMap::new(),
            spans: (0, 0, 0),
        }
    }

    fn packet(&mut self, mut p: TracePacket) -> std::io::Result<()> {
        p.trusted_packet_sequence_id = Some(SEQUENCE);
        if std::mem::take(&mut self.first) {
            p.sequence_flags = Some(trace_packet::SequenceFlags::SeqIncrementalStateCleared as u32);
        }
        // Field 1 of `Trace`, length-delimited.
        let body = p.encode_to_vec();
        let mut head = Vec::with_capacity(6);
        head.push(0x0a);
        prost::encoding::encode_varint(body.len() as u64, &mut head);
        self.out.write_all(&head)?;
        self.out.write_all(&body)?;
        self.bytes += (head.len() + body.len()) as u64;
        Ok(())
    }

    /// The uuid of the track `key`, described by `make` the first time.
    fn track(
        &mut self,
        key: &str,
        make: impl FnOnce(&mut Self) -> std::io::Result<TrackDescriptor>,
    ) -> std::io::Result<u64> {
        if let Some(&u) = self.tracks.get(key) {
            return Ok(u);
        }
        let mut d = make(self)?;
        let uuid = self.next_uuid;
        self.next_uuid += 1;
        d.uuid = Some(uuid);
        self.tracks.insert(key.to_string(), uuid);
        self.packet(TracePacket {
            data: Some(trace_packet::Data::TrackDescriptor(d)),
            ..Default::default()
        })?;
        Ok(uuid)
    }

    /// A named track under `parent` (none: top level).
    fn named(&mut self, key: &str, name: &str, parent: Option<u64>) -> std::io::Result<u64> {
        let name = name.to_string();
        self.track(key, |_| {
            Ok(TrackDescriptor {
                parent_uuid: parent,
                static_or_dynamic_name: Some(track_descriptor::StaticOrDynamicName::Name(name)),
                ..Default::default()
            })
        })
    }

    fn thread(&mut self, pid: u32, comm: &str) -> std::io::Result<u64> {
        let comm = comm.to_string();
        self.track(&format!("thread {pid}"), |_| {
            Ok(TrackDescriptor {
                thread: Some(ThreadDescriptor {
                    // The thread group is not in the events: each thread
                    // shows as its own process.
                    pid: Some(pid as i32),
                    tid: Some(pid as i64),
                    thread_name: (!comm.is_empty()).then_some(comm),
                }),
                ..Default::default()
            })
        })
    }

    fn event(
        &mut self,
        track: u64,
        ts: u64,
        kind: track_event::Type,
        name: Option<String>,
        args: Vec<Arg>,
    ) -> std::io::Result<()> {
        let debug_annotations = args
            .into_iter()
            .map(|a| {
                let (name, value) = match a {
                    Arg::Int(n, v) => (n, debug_annotation::Value::IntValue(v)),
                    Arg::Text(n, v) => (n, debug_annotation::Value::StringValue(v)),
                };
                DebugAnnotation {
                    name_field: Some(debug_annotation::NameField::Name(name.to_string())),
                    value: Some(value),
                    ..Default::default()
                }
            })
            .collect();
        let e = TrackEvent {
            r#type: Some(kind as i32),
            track_uuid: Some(track),
            name_field: name.map(track_event::NameField::Name),
            debug_annotations,
            ..Default::default()
        };
        self.packet(TracePacket {
            timestamp: Some(ts),
            data: Some(trace_packet::Data::TrackEvent(e)),
            ..Default::default()
        })
    }

    fn slice(
        &mut self,
        track: u64,
        name: String,
        start: u64,
        end: u64,
        args: Vec<Arg>,
    ) -> std::io::Result<()> {
        self.event(
            track,
            start,
            track_event::Type::SliceBegin,
            Some(name),
            args,
        )?;
        self.event(
            track,
            end.max(start),
            track_event::Type::SliceEnd,
            None,
            Vec::new(),
        )
    }

    fn counter(&mut self, track: u64, ts: u64, v: i64) -> std::io::Result<()> {
        let e = TrackEvent {
            r#type: Some(track_event::Type::Counter as i32),
            track_uuid: Some(track),
            counter_value_field: Some(track_event::CounterValueField::CounterValue(v)),
            ..Default::default()
        };
        self.packet(TracePacket {
            timestamp: Some(ts),
            data: Some(trace_packet::Data::TrackEvent(e)),
            ..Default::default()
        })
    }

    /// A request, as it completes, on the first lane of its device whose
    /// last request ended by the time this one was queued. Requests come
    /// in order of completion, so every earlier one on that lane ended by
    /// then too: lanes never hold two requests at once, and only each
    /// lane's last end is kept.
    pub fn request(&mut self, r: &RequestRow) -> std::io::Result<()> {
        let dev = format!("{},{}", r.dev.major(), r.dev.minor());
        let root = self.named("devices", "Block devices", None)?;
        let title = self
            .device_names
            .iter()
            .find(|(d, _)| *d == dev)
            .map_or_else(|| dev.clone(), |(_, n)| format!("{n} ({dev})"));
        let dev_track = self.named(&format!("dev {dev}"), &title, Some(root))?;
        let ends = self.lanes.entry(dev.clone()).or_default();
        let lane = match ends.iter().position(|&e| e <= r.queued_ns) {
            Some(i) => i,
            None => {
                ends.push(0);
                ends.len() - 1
            }
        };
        ends[lane] = r.completed_ns.max(r.queued_ns + 1);
        let track = self.named(
            &format!("dev {dev} lane {lane}"),
            "requests",
            Some(dev_track),
        )?;
        let mut args = vec![
            Arg::Int("sector", r.sector as i64),
            Arg::Int("bytes", (r.sectors * 512) as i64),
            Arg::Text("rwbs", r.rwbs.to_string()),
            Arg::Int("pid", r.pid as i64),
            Arg::Text("comm", r.comm.as_str().to_string()),
            Arg::Int("bios", r.bios as i64),
            Arg::Int("q2c_ns", r.completed_ns.saturating_sub(r.queued_ns) as i64),
        ];
        for (name, at) in [
            ("allocated_after_ns", r.allocated_ns),
            ("inserted_after_ns", r.inserted_ns),
            ("issued_after_ns", r.issued_ns),
        ] {
            if let Some(t) = at {
                args.push(Arg::Int(name, t.saturating_sub(r.queued_ns) as i64));
            }
        }
        if let Some(d) = r.issued_ns {
            args.push(Arg::Int("d2c_ns", r.completed_ns.saturating_sub(d) as i64));
            let changes = self.depth.entry(dev).or_default();
            changes.push((d, 1));
            changes.push((r.completed_ns, -1));
        }
        if r.error != 0 {
            args.push(Arg::Int("error", r.error as i64));
        }
        let name = format!("{} {} KiB", r.rwbs, r.sectors / 2);
        self.slice(track, name, r.queued_ns, r.completed_ns, args)
    }

    /// Each device's queue depth (requests issued, not completed), from
    /// the issues and completions of the requests written.
    pub fn queue_depths(&mut self) -> std::io::Result<()> {
        let mut devs: Vec<_> = std::mem::take(&mut self.depth).into_iter().collect();
        devs.sort();
        for (dev, mut changes) in devs {
            let dev_track = self.tracks[&format!("dev {dev}")];
            let track = self.named(&format!("dev {dev} depth"), "queue depth", Some(dev_track))?;
            // Completions first at equal times: the depth never overshoots.
            changes.sort();
            let mut d = 0;
            for (ts, delta) in changes {
                d += delta;
                self.counter(track, ts, d)?;
            }
        }
        Ok(())
    }

    /// A syscall on its thread's track; other kinds (probe operations,
    /// `ext4_sync_file`) on a child track of the thread per kind, since
    /// they overlap the syscall they run in.
    pub fn operation(&mut self, o: &OperationRow) -> std::io::Result<()> {
        let thread = self.thread(o.pid, &o.comm)?;
        let (track, name) = match o.kind.strip_prefix("syscall ") {
            Some(call) => (thread, call.to_string()),
            None => {
                let key = format!("thread {} {}", o.pid, o.kind);
                (self.named(&key, &o.kind, Some(thread))?, o.kind.clone())
            }
        };
        let b = &o.breakdown;
        // Unknown is not zero: without the thread's states, no CPU figures.
        let mut args = vec![Arg::Int("latency_ns", o.latency_ns as i64)];
        match b.not_recorded_ns {
            0 => args.extend([
                Arg::Int("on_cpu_ns", b.on_cpu_ns as i64),
                Arg::Int("runnable_ns", b.runnable_ns as i64),
            ]),
            n => args.push(Arg::Int("not_recorded_ns", n as i64)),
        }
        args.extend([
            Arg::Int("device_ns", b.device_ns.values().sum::<u64>() as i64),
            Arg::Int("queued_ns", b.queued_ns as i64),
            Arg::Int("journal_ns", b.journal_ns as i64),
            Arg::Int("journal_space_ns", b.journal_space_ns as i64),
            Arg::Int("other_wait_ns", b.other_wait_ns as i64),
            Arg::Int("asleep_ns", b.asleep_ns as i64),
        ]);
        if let Some(d) = o.dev {
            args.push(Arg::Text("device", format!("{},{}", d.major(), d.minor())));
        }
        self.slice(track, name, o.start_ns, o.start_ns + o.latency_ns, args)
    }

    /// A stretch of a thread's state, on a "state" child track of it.
    pub fn thread_state(&mut self, s: &ThreadStateRow) -> std::io::Result<()> {
        let thread = self.thread(s.pid, s.comm.as_str())?;
        let track = self.named(&format!("thread {} state", s.pid), "state", Some(thread))?;
        let mut args = Vec::new();
        if let Some(c) = s.cpu {
            args.push(Arg::Int("cpu", c as i64));
        }
        if let ThreadState::Off(c) = s.state {
            args.push(Arg::Text("task_state", c.to_string()));
        }
        self.slice(
            track,
            s.state.name().to_string(),
            s.start_ns,
            s.end_ns,
            args,
        )
    }

    /// A journal commit, a hard irq or a softirq: on a track per journal
    /// under "Journal commits", per CPU under "Interrupts".
    pub fn span(&mut self, s: &SpanRow) -> std::io::Result<()> {
        match s {
            SpanRow::Commit {
                dev,
                transaction,
                start_ns,
                end_ns,
            } => {
                let journal = format!("{},{}", dev.major(), dev.minor());
                let root = self.named("journal", "Journal commits", None)?;
                let track = self.named(
                    &format!("journal {journal}"),
                    &format!("jbd2 {journal}"),
                    Some(root),
                )?;
                self.spans.0 += 1;
                self.slice(
                    track,
                    format!("commit {transaction}"),
                    *start_ns,
                    *end_ns,
                    vec![Arg::Int("transaction", *transaction as i64)],
                )
            }
            SpanRow::Irq {
                cpu,
                name,
                start_ns,
                end_ns,
            } => {
                let track = self.interrupts(*cpu, "irq")?;
                self.spans.1 += 1;
                self.slice(track, name.clone(), *start_ns, *end_ns, Vec::new())
            }
            SpanRow::Softirq {
                cpu,
                vector,
                start_ns,
                end_ns,
            } => {
                let track = self.interrupts(*cpu, "softirq")?;
                self.spans.2 += 1;
                self.slice(track, vector.to_string(), *start_ns, *end_ns, Vec::new())
            }
        }
    }

    /// The "CPU n irq" or "CPU n softirq" track under "Interrupts".
    fn interrupts(&mut self, cpu: u32, kind: &str) -> std::io::Result<u64> {
        let root = self.named("irq", "Interrupts", None)?;
        self.named(
            &format!("{kind} {cpu}"),
            &format!("CPU {cpu} {kind}"),
            Some(root),
        )
    }

    /// Journal commits, hard irqs and softirqs written.
    pub fn span_counts(&self) -> (u64, u64, u64) {
        self.spans
    }

    /// Flushes; returns (tracks, bytes).
    pub fn finish(mut self) -> std::io::Result<(u64, u64)> {
        self.out.flush()?;
        Ok((self.tracks.len() as u64, self.bytes))
    }
}
