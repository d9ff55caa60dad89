//! The subset of Perfetto's trace protos that iosleuth writes, as
//! hand-written `prost` messages (no protoc, no build script).
//!
//! Field numbers, types and labels follow the `.proto` files of
//! github.com/google/perfetto (checked against the tree of 2026-08-22,
//! after v58.2); each message names its file. Messages keep only the fields
//! we may write: a decoder skips what a message here leaves out, and the
//! fields kept are wire-identical to Perfetto's.
//!
//! Wire details that matter:
//! - The files are proto2 and declare no `[packed = true]`, so every
//!   repeated number here is `packed = "false"`. prost packs repeated
//!   numbers by default (the proto3 rule), and Perfetto's own decoder
//!   (protozero) reads these fields one element per tag, so a packed
//!   encoding would be misread by trace processor.
//! - proto2 `optional` scalars are `Option<T>` so that presence is encoded:
//!   trace processor tests presence (`has_trusted_packet_sequence_id()`,
//!   `has_timestamp()`), not just non-zero values.
//! - A one-field `oneof` (`optional_trusted_packet_sequence_id`) is written
//!   as a plain optional field; on the wire the two are the same.
//! - Enum fields are `i32` on the wire (`enumeration = ...`); prost derives
//!   typed getters and setters (`r#type()`, `set_type(..)`).
//!
//! One file per part of the format: `packet` (the file, packets, clocks),
//! `track` (track descriptors), `event` (track events, arguments,
//! interning), `kernel` (generic kernel task events).

mod event;
mod kernel;
mod packet;
mod track;

pub use event::*;
pub use kernel::*;
pub use packet::*;
pub use track::*;

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    fn packet(ts: u64, data: trace_packet::Data) -> TracePacket {
        TracePacket {
            timestamp: Some(ts),
            timestamp_clock_id: Some(BuiltinClock::Monotonic as u32),
            data: Some(data),
            trusted_packet_sequence_id: Some(1),
            ..Default::default()
        }
    }

    fn event(ty: track_event::Type, track: u64, name: Option<&str>) -> trace_packet::Data {
        let mut e = TrackEvent {
            track_uuid: Some(track),
            name_field: name.map(|n| track_event::NameField::Name(n.to_string())),
            ..Default::default()
        };
        e.set_type(ty);
        trace_packet::Data::TrackEvent(e)
    }

    /// The first packet: the clock snapshot that starts the sequence.
    fn first_packet() -> TracePacket {
        let mut first = TracePacket {
            timestamp: Some(1_000),
            data: Some(trace_packet::Data::ClockSnapshot(ClockSnapshot {
                clocks: vec![clock_snapshot::Clock {
                    clock_id: Some(BuiltinClock::Monotonic as u32),
                    timestamp: Some(1_000),
                    ..Default::default()
                }],
                primary_trace_clock: Some(BuiltinClock::Monotonic as i32),
            })),
            trusted_packet_sequence_id: Some(1),
            sequence_flags: Some(trace_packet::SequenceFlags::SeqIncrementalStateCleared as u32),
            first_packet_on_sequence: Some(true),
            ..Default::default()
        };
        first.timestamp_clock_id = Some(BuiltinClock::Monotonic as u32);
        first
    }

    /// A device with a request lane and a queue-depth counter, a process
    /// and its thread.
    fn descriptors() -> [TrackDescriptor; 5] {
        let device = TrackDescriptor {
            uuid: Some(10),
            static_or_dynamic_name: Some(track_descriptor::StaticOrDynamicName::Name("sda".into())),
            child_ordering: Some(track_descriptor::ChildTracksOrdering::Explicit as i32),
            ..Default::default()
        };
        let lane = TrackDescriptor {
            uuid: Some(11),
            parent_uuid: Some(10),
            static_or_dynamic_name: Some(track_descriptor::StaticOrDynamicName::Name(
                "requests".into(),
            )),
            sibling_order_rank: Some(1),
            ..Default::default()
        };
        let depth = TrackDescriptor {
            uuid: Some(12),
            parent_uuid: Some(10),
            static_or_dynamic_name: Some(track_descriptor::StaticOrDynamicName::Name(
                "queue depth".into(),
            )),
            counter: Some(CounterDescriptor {
                unit: Some(counter_descriptor::Unit::UnitCount as i32),
                ..Default::default()
            }),
            ..Default::default()
        };
        let thread = TrackDescriptor {
            uuid: Some(20),
            thread: Some(ThreadDescriptor {
                pid: Some(100),
                tid: Some(101),
                thread_name: Some("fio".into()),
            }),
            ..Default::default()
        };
        let process = TrackDescriptor {
            uuid: Some(19),
            process: Some(ProcessDescriptor {
                pid: Some(100),
                process_name: Some("fio".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        [device, lane, depth, process, thread]
    }

    /// A request's slice beginning, with an annotation of each kind.
    fn annotated_begin() -> trace_packet::Data {
        let mut begin = event(track_event::Type::SliceBegin, 11, Some("W 2048+8"));
        if let trace_packet::Data::TrackEvent(e) = &mut begin {
            e.categories.push("block".into());
            e.debug_annotations = vec![
                DebugAnnotation {
                    name_field: Some(debug_annotation::NameField::Name("sector".into())),
                    value: Some(debug_annotation::Value::UintValue(2048)),
                    ..Default::default()
                },
                DebugAnnotation {
                    name_field: Some(debug_annotation::NameField::Name("offset".into())),
                    value: Some(debug_annotation::Value::IntValue(-4)),
                    ..Default::default()
                },
                DebugAnnotation {
                    name_field: Some(debug_annotation::NameField::Name("op".into())),
                    value: Some(debug_annotation::Value::StringValue("write".into())),
                    ..Default::default()
                },
                DebugAnnotation {
                    name_field: Some(debug_annotation::NameField::Name("ms".into())),
                    value: Some(debug_annotation::Value::DoubleValue(0.25)),
                    ..Default::default()
                },
            ];
        }
        begin
    }

    fn sample() -> Trace {
        let mut count = TrackEvent {
            track_uuid: Some(12),
            counter_value_field: Some(track_event::CounterValueField::CounterValue(3)),
            extra_counter_track_uuids: vec![12, 13],
            extra_counter_values: vec![3, 4],
            ..Default::default()
        };
        count.set_type(track_event::Type::Counter);
        let state = GenericKernelTaskStateEvent {
            cpu: Some(0),
            comm: Some("fio".into()),
            tid: Some(101),
            state: Some(generic_kernel_task_state_event::TaskStateEnum::TaskStateRunning as i32),
            prio: Some(120),
        };
        let mut packets = vec![first_packet()];
        for d in descriptors() {
            packets.push(packet(1_000, trace_packet::Data::TrackDescriptor(d)));
        }
        packets.extend([
            packet(
                1_100,
                trace_packet::Data::GenericKernelTaskStateEvent(state),
            ),
            packet(1_200, annotated_begin()),
            packet(1_200, trace_packet::Data::TrackEvent(count)),
            packet(
                1_300,
                event(track_event::Type::Instant, 20, Some("pwrite64")),
            ),
            packet(1_500, event(track_event::Type::SliceEnd, 11, None)),
        ]);
        Trace { packet: packets }
    }

    #[test]
    fn trace_round_trips() {
        let trace = sample();
        let bytes = trace.encode_to_vec();
        let back = Trace::decode(bytes.as_slice()).expect("decodes");
        assert_eq!(back, trace);
        assert_eq!(back.packet.len(), 11);
        let Some(trace_packet::Data::TrackEvent(e)) = &back.packet[7].data else {
            panic!("packet 7 is a track event");
        };
        assert_eq!(e.r#type(), track_event::Type::SliceBegin);
        assert_eq!(e.debug_annotations.len(), 4);
    }

    /// Hand-checked bytes for the fields whose encoding trace processor
    /// depends on: tag numbers, presence of zero values, unpacked repeats.
    #[test]
    fn wire_layout_matches_perfetto() {
        // TracePacket{timestamp=1 (8), trusted_packet_sequence_id=0 (10)}:
        // presence is kept even for zero.
        let p = TracePacket {
            timestamp: Some(1),
            trusted_packet_sequence_id: Some(0),
            ..Default::default()
        };
        assert_eq!(p.encode_to_vec(), [0x40, 0x01, 0x50, 0x00]);

        // timestamp_clock_id = 3 is field 58: key (58 << 3 | 0) = 464.
        let p = TracePacket {
            timestamp_clock_id: Some(3),
            ..Default::default()
        };
        assert_eq!(p.encode_to_vec(), [0xd0, 0x03, 0x03]);

        // track_descriptor is field 60 (key 482 = 0xe2 0x03), uuid field 1.
        let p = TracePacket {
            data: Some(trace_packet::Data::TrackDescriptor(TrackDescriptor {
                uuid: Some(5),
                ..Default::default()
            })),
            ..Default::default()
        };
        assert_eq!(p.encode_to_vec(), [0xe2, 0x03, 0x02, 0x08, 0x05]);

        // Repeated numbers are one tag per element (proto2, not packed):
        // extra_counter_values is field 12, flow_ids field 47 (fixed64).
        let e = TrackEvent {
            extra_counter_values: vec![1, 2],
            flow_ids: vec![7],
            ..Default::default()
        };
        assert_eq!(
            e.encode_to_vec(),
            [0x60, 0x01, 0x60, 0x02, 0xf9, 0x02, 7, 0, 0, 0, 0, 0, 0, 0]
        );

        // TrackEvent type (9), name (23, string), track_uuid (11). prost
        // writes a oneof at the place of its smallest tag (name_iid = 10);
        // field order does not matter to a decoder.
        let mut e = TrackEvent {
            track_uuid: Some(2),
            name_field: Some(track_event::NameField::Name("a".into())),
            ..Default::default()
        };
        e.set_type(track_event::Type::SliceBegin);
        assert_eq!(
            e.encode_to_vec(),
            [0x48, 0x01, 0xba, 0x01, 0x01, b'a', 0x58, 0x02]
        );
    }
}
