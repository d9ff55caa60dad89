//! Writes packets one by one (a trace is a sequence of `packet` fields, so
//! no whole `Trace` is held in memory): track descriptors the first time a
//! track is used, then its slices as BEGIN/END pairs.

use super::proto::{
    counter_descriptor, debug_annotation, trace_packet, track_descriptor, track_event,
    CounterDescriptor, DebugAnnotation, ProcessDescriptor, ThreadDescriptor, TracePacket,
    TrackDescriptor, TrackEvent,
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
    /// Thread → process (thread group) where the snapshot knows it.
    processes: HashMap<u32, u32>,
    /// Each request written: its lane track and when it was issued (or
    /// queued), where a flow from an operation that waited for it lands.
    requests: HashMap<u64, (u64, u64)>,
    /// Flows from operations to requests not written yet, by request.
    pending_flows: HashMap<u64, Vec<u64>>,
    next_flow: u64,
}

/// A debug annotation (a slice's argument).
pub enum Arg {
    Int(&'static str, i64),
    Text(&'static str, String),
}

impl<W: Write> Writer<W> {
    pub fn new(
        out: W,
        device_names: Vec<(String, String)>,
        processes: HashMap<u32, u32>,
    ) -> Writer<W> {
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
            processes,
            requests: HashMap::new(),
            pending_flows: HashMap::new(),
            next_flow: 1,
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

    /// A thread's track, in its process (the thread group where the trace
    /// (`traced`) or else the snapshot knows it, else a process of its own
    /// id, as the trace processor does for threads whose process is
    /// unknown); the process track is described first, so that every
    /// thread's pid has one.
    fn thread(&mut self, tid: u32, traced: Option<u32>, comm: &str) -> std::io::Result<u64> {
        if let Some(&u) = self.tracks.get(&format!("thread {tid}")) {
            return Ok(u);
        }
        let pid = self.process_of(tid, traced).unwrap_or(tid);
        let name = (pid == tid && !comm.is_empty()).then(|| comm.to_string());
        self.track(&format!("process {pid}"), |_| {
            Ok(TrackDescriptor {
                process: Some(ProcessDescriptor {
                    pid: Some(pid as i32),
                    process_name: name,
                    ..Default::default()
                }),
                ..Default::default()
            })
        })?;
        let comm = comm.to_string();
        self.track(&format!("thread {tid}"), |_| {
            Ok(TrackDescriptor {
                thread: Some(ThreadDescriptor {
                    pid: Some(pid as i32),
                    tid: Some(tid as i64),
                    thread_name: (!comm.is_empty()).then_some(comm),
                }),
                ..Default::default()
            })
        })
    }

    /// The process of thread `tid`: as the trace told it (`traced`), else
    /// as the snapshot lists it.
    fn process_of(&self, tid: u32, traced: Option<u32>) -> Option<u32> {
        traced.or_else(|| self.processes.get(&tid).copied())
    }

    fn event(
        &mut self,
        track: u64,
        ts: u64,
        kind: track_event::Type,
        name: Option<String>,
        args: Vec<Arg>,
    ) -> std::io::Result<()> {
        self.event_with_flows(track, ts, kind, name, args, Vec::new())
    }

    fn event_with_flows(
        &mut self,
        track: u64,
        ts: u64,
        kind: track_event::Type,
        name: Option<String>,
        args: Vec<Arg>,
        flow_ids: Vec<u64>,
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
            flow_ids,
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
        self.slice_with_flows(track, name, start, end, args, Vec::new())
    }

    fn slice_with_flows(
        &mut self,
        track: u64,
        name: String,
        start: u64,
        end: u64,
        args: Vec<Arg>,
        flow_ids: Vec<u64>,
    ) -> std::io::Result<()> {
        self.event_with_flows(
            track,
            start,
            track_event::Type::SliceBegin,
            Some(name),
            args,
            flow_ids,
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
        args.push(Arg::Int("request_id", r.id as i64));
        let name = format!("{} {} KiB", r.rwbs, r.sectors / 2);
        self.slice(track, name, r.queued_ns, r.completed_ns, args)?;
        let at = r.issued_ns.unwrap_or(r.queued_ns);
        self.requests.insert(r.id, (track, at));
        for flow in self.pending_flows.remove(&r.id).unwrap_or_default() {
            self.flow_end(track, at, flow)?;
        }
        Ok(())
    }

    /// Where a flow from an operation lands on a request: an instant on
    /// the request's lane when it was issued (the request's slice is
    /// written when it completes, the operation's when it ends: whichever
    /// comes second cannot add the flow to the other's slice).
    fn flow_end(&mut self, track: u64, ts: u64, flow: u64) -> std::io::Result<()> {
        self.event_with_flows(
            track,
            ts,
            track_event::Type::Instant,
            Some("waited for".to_string()),
            Vec::new(),
            vec![flow],
        )
    }

    /// A flow per request `o` waited for: its id on the operation's slice,
    /// and on an instant at the request (now, or when it is written).
    fn flows_of(&mut self, o: &OperationRow) -> std::io::Result<Vec<u64>> {
        let mut ids = Vec::with_capacity(o.waited_for.len());
        for &(request, _) in &o.waited_for {
            let flow = self.next_flow;
            self.next_flow += 1;
            ids.push(flow);
            match self.requests.get(&request).copied() {
                Some((track, at)) => self.flow_end(track, at, flow)?,
                None => self.pending_flows.entry(request).or_default().push(flow),
            }
        }
        Ok(ids)
    }

    /// Each device's queue depth (requests issued, not completed), from
    /// the issues and completions of the requests written.
    pub fn queue_depths(&mut self) -> std::io::Result<()> {
        let mut devs: Vec<_> = std::mem::take(&mut self.depth).into_iter().collect();
        devs.sort();
        for (dev, mut changes) in devs {
            let dev_track = self.tracks[&format!("dev {dev}")];
            // A counter track is declared so (its `counter` field): the
            // trace processor drops counter values on any other track.
            let track = self.track(&format!("dev {dev} depth"), |_| {
                Ok(TrackDescriptor {
                    parent_uuid: Some(dev_track),
                    static_or_dynamic_name: Some(track_descriptor::StaticOrDynamicName::Name(
                        "queue depth".into(),
                    )),
                    counter: Some(CounterDescriptor {
                        unit: Some(counter_descriptor::Unit::UnitCount as i32),
                        ..Default::default()
                    }),
                    ..Default::default()
                })
            })?;
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
        let thread = self.thread(o.pid, o.process, &o.comm)?;
        let (track, name) = match o.kind.strip_prefix("syscall ") {
            Some(call) => (thread, call.to_string()),
            // Asynchronous requests overlap on their thread: each on the
            // first lane of its kind free by its start (rows come as they
            // complete, as the requests' do).
            None if o.kind.starts_with("io_uring ") => {
                let key = format!("thread {} {}", o.pid, o.kind);
                let ends = self.lanes.entry(key.clone()).or_default();
                let lane = match ends.iter().position(|&e| e <= o.start_ns) {
                    Some(i) => i,
                    None => {
                        ends.push(0);
                        ends.len() - 1
                    }
                };
                ends[lane] = o.start_ns + o.latency_ns;
                let key = format!("{key} lane {lane}");
                (self.named(&key, &o.kind, Some(thread))?, o.kind.clone())
            }
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
        args.push(Arg::Int("op_id", o.id as i64));
        if let Some(p) = o.parent {
            args.push(Arg::Int("parent_op_id", p as i64));
        }
        let flows = self.flows_of(o)?;
        let end = o.start_ns + o.latency_ns;
        self.slice_with_flows(track, name, o.start_ns, end, args, flows)
    }

    /// A stretch of a thread's state, on a "state" child track of it; a
    /// running stretch also on its CPU's track under "CPUs" (which thread
    /// ran on each CPU, from the switches).
    pub fn thread_state(&mut self, s: &ThreadStateRow) -> std::io::Result<()> {
        if let (ThreadState::Running, Some(cpu)) = (s.state, s.cpu) {
            let root = self.named("cpus", "CPUs", None)?;
            let track = self.named(&format!("cpu {cpu}"), &format!("CPU {cpu}"), Some(root))?;
            let name = match s.comm.as_str() {
                "" => format!("thread {}", s.pid),
                c => format!("{c} {}", s.pid),
            };
            let mut args = vec![Arg::Int("tid", s.pid as i64)];
            if let Some(pid) = self.process_of(s.pid, s.process) {
                args.push(Arg::Int("pid", pid as i64));
            }
            self.slice(track, name, s.start_ns, s.end_ns, args)?;
        }
        let thread = self.thread(s.pid, s.process, s.comm.as_str())?;
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
    /// The whole trace as one slice: the UI starts its clock at the first
    /// timestamp in the file, which this makes the report's origin.
    pub fn trace_span(&mut self, span: super::TraceSpan) -> std::io::Result<()> {
        let track = self.named("trace", "Trace", None)?;
        self.slice(
            track,
            "trace (time zero of iosleuth's reports)".to_string(),
            span.origin_ns,
            span.last_ns,
            vec![Arg::Int("origin_ns", span.origin_ns as i64)],
        )
    }

    pub fn span_counts(&self) -> (u64, u64, u64) {
        self.spans
    }

    /// Flushes; returns (tracks, bytes).
    pub fn finish(mut self) -> std::io::Result<(u64, u64)> {
        self.out.flush()?;
        Ok((self.tracks.len() as u64, self.bytes))
    }
}
