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

// ---------------------------------------------------------------------------
// protos/perfetto/trace/trace.proto
// ---------------------------------------------------------------------------

/// A whole trace file: a `.pftrace` is exactly this message, so a writer may
/// also stream `packet` records (tag 1, length-delimited) one at a time.
/// Source: protos/perfetto/trace/trace.proto
#[derive(Clone, PartialEq, prost::Message)]
pub struct Trace {
    #[prost(message, repeated, tag = "1")]
    pub packet: Vec<TracePacket>,
}

// ---------------------------------------------------------------------------
// protos/perfetto/trace/trace_packet.proto
// ---------------------------------------------------------------------------

/// One record of a trace. Source: protos/perfetto/trace/trace_packet.proto
#[derive(Clone, PartialEq, prost::Message)]
pub struct TracePacket {
    /// Nanoseconds in the clock named by `timestamp_clock_id` (default:
    /// BOOTTIME, or the sequence's `TracePacketDefaults`).
    #[prost(uint64, optional, tag = "8")]
    pub timestamp: Option<u64>,
    /// A [`BuiltinClock`] value (1..=63) or a sequence-scoped clock (64..=127).
    #[prost(uint32, optional, tag = "58")]
    pub timestamp_clock_id: Option<u32>,
    /// `oneof data` (only the members we write).
    #[prost(oneof = "trace_packet::Data", tags = "11, 60, 6, 117, 120")]
    pub data: Option<trace_packet::Data>,
    /// In `oneof optional_trusted_packet_sequence_id` upstream (wire-identical).
    /// Trace processor drops a `track_event` packet without it.
    #[prost(uint32, optional, tag = "10")]
    pub trusted_packet_sequence_id: Option<u32>,
    /// Interned strings valid on this packet's sequence.
    #[prost(message, optional, tag = "12")]
    pub interned_data: Option<InternedData>,
    /// Bit set of [`trace_packet::SequenceFlags`].
    #[prost(uint32, optional, tag = "13")]
    pub sequence_flags: Option<u32>,
    /// Defaults for later packets of the same sequence.
    #[prost(message, optional, tag = "59")]
    pub trace_packet_defaults: Option<TracePacketDefaults>,
    /// Set by a producer on the first packet of its sequence.
    #[prost(bool, optional, tag = "87")]
    pub first_packet_on_sequence: Option<bool>,
}

/// Nested types of [`TracePacket`].
pub mod trace_packet {
    /// `TracePacket.data` (subset).
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Data {
        #[prost(message, tag = "11")]
        TrackEvent(super::TrackEvent),
        #[prost(message, tag = "60")]
        TrackDescriptor(super::TrackDescriptor),
        #[prost(message, tag = "6")]
        ClockSnapshot(super::ClockSnapshot),
        #[prost(message, tag = "117")]
        GenericKernelTaskStateEvent(super::GenericKernelTaskStateEvent),
        #[prost(message, tag = "120")]
        GenericKernelTaskRenameEvent(super::GenericKernelTaskRenameEvent),
    }

    /// `TracePacket.SequenceFlags`: OR-ed into `sequence_flags`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
    #[repr(i32)]
    pub enum SequenceFlags {
        SeqUnspecified = 0,
        /// The writer re-emits incremental state (interned data, defaults)
        /// before referring to it again; set on a sequence's first packet.
        SeqIncrementalStateCleared = 1,
        /// This packet uses interned data / defaults of its sequence.
        SeqNeedsIncrementalState = 2,
    }
}

// ---------------------------------------------------------------------------
// protos/perfetto/trace/trace_packet_defaults.proto
// ---------------------------------------------------------------------------

/// Per-sequence defaults (subset). Using it requires
/// `SEQ_NEEDS_INCREMENTAL_STATE` on the later packets.
/// Source: protos/perfetto/trace/trace_packet_defaults.proto
#[derive(Clone, PartialEq, prost::Message)]
pub struct TracePacketDefaults {
    #[prost(uint32, optional, tag = "58")]
    pub timestamp_clock_id: Option<u32>,
    #[prost(message, optional, tag = "11")]
    pub track_event_defaults: Option<TrackEventDefaults>,
}

// ---------------------------------------------------------------------------
// protos/perfetto/common/builtin_clock.proto
// protos/perfetto/trace/clock_snapshot.proto
// ---------------------------------------------------------------------------

/// Built-in clock ids. Source: protos/perfetto/common/builtin_clock.proto
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum BuiltinClock {
    Unknown = 0,
    Realtime = 1,
    RealtimeCoarse = 2,
    /// CLOCK_MONOTONIC.
    Monotonic = 3,
    MonotonicCoarse = 4,
    MonotonicRaw = 5,
    /// CLOCK_BOOTTIME: the default of `TracePacket.timestamp`.
    Boottime = 6,
    Tsc = 9,
    Perf = 10,
    TraceFile = 11,
    MaxId = 63,
}

/// Readings of several clocks at one instant, and the trace's primary clock.
/// Source: protos/perfetto/trace/clock_snapshot.proto
#[derive(Clone, PartialEq, prost::Message)]
pub struct ClockSnapshot {
    #[prost(message, repeated, tag = "1")]
    pub clocks: Vec<clock_snapshot::Clock>,
    #[prost(enumeration = "BuiltinClock", optional, tag = "2")]
    pub primary_trace_clock: Option<i32>,
}

/// Nested types of [`ClockSnapshot`].
pub mod clock_snapshot {
    /// One clock reading. Source: protos/perfetto/trace/clock_snapshot.proto
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Clock {
        #[prost(uint32, optional, tag = "1")]
        pub clock_id: Option<u32>,
        #[prost(uint64, optional, tag = "2")]
        pub timestamp: Option<u64>,
        #[prost(bool, optional, tag = "3")]
        pub is_incremental: Option<bool>,
        #[prost(uint64, optional, tag = "4")]
        pub unit_multiplier_ns: Option<u64>,
    }
}

// ---------------------------------------------------------------------------
// protos/perfetto/trace/track_event/track_descriptor.proto
// ---------------------------------------------------------------------------

/// Defines a track (a timeline row) for TrackEvents.
/// Source: protos/perfetto/trace/track_event/track_descriptor.proto
#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackDescriptor {
    /// Trace-global id; 0 is the implicit global track.
    #[prost(uint64, optional, tag = "1")]
    pub uuid: Option<u64>,
    /// Nests this track under another. Ignored when `process`/`thread` is set;
    /// a parent that is a process/thread track makes this a sibling in that
    /// process/thread's group instead of a nested child.
    #[prost(uint64, optional, tag = "5")]
    pub parent_uuid: Option<u64>,
    /// `oneof static_or_dynamic_name`.
    #[prost(oneof = "track_descriptor::StaticOrDynamicName", tags = "2, 10, 13")]
    pub static_or_dynamic_name: Option<track_descriptor::StaticOrDynamicName>,
    /// Shown by the UI's help button on the track.
    #[prost(string, optional, tag = "14")]
    pub description: Option<String>,
    #[prost(message, optional, tag = "3")]
    pub process: Option<ProcessDescriptor>,
    #[prost(message, optional, tag = "4")]
    pub thread: Option<ThreadDescriptor>,
    /// Makes this a counter track (TYPE_COUNTER events only).
    #[prost(message, optional, tag = "8")]
    pub counter: Option<CounterDescriptor>,
    /// Makes this a state track (TYPE_STATE events only; Perfetto v57+).
    #[prost(message, optional, tag = "18")]
    pub state: Option<StateDescriptor>,
    #[prost(bool, optional, tag = "9")]
    pub disallow_merging_with_system_tracks: Option<bool>,
    #[prost(
        enumeration = "track_descriptor::ChildTracksOrdering",
        optional,
        tag = "11"
    )]
    pub child_ordering: Option<i32>,
    #[prost(int32, optional, tag = "12")]
    pub sibling_order_rank: Option<i32>,
    #[prost(
        enumeration = "track_descriptor::SiblingMergeBehavior",
        optional,
        tag = "15"
    )]
    pub sibling_merge_behavior: Option<i32>,
    /// `oneof sibling_merge_key_field`.
    #[prost(oneof = "track_descriptor::SiblingMergeKeyField", tags = "16, 17")]
    pub sibling_merge_key_field: Option<track_descriptor::SiblingMergeKeyField>,
    /// Only on the root descriptor (uuid 0).
    #[prost(
        enumeration = "track_descriptor::ProcessOrdering",
        optional,
        tag = "19"
    )]
    pub process_ordering: Option<i32>,
    /// Only on the root descriptor (uuid 0).
    #[prost(enumeration = "track_descriptor::ThreadOrdering", optional, tag = "20")]
    pub thread_ordering: Option<i32>,
}

/// Nested types of [`TrackDescriptor`].
pub mod track_descriptor {
    /// `oneof static_or_dynamic_name`.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum StaticOrDynamicName {
        #[prost(string, tag = "2")]
        Name(String),
        #[prost(string, tag = "10")]
        StaticName(String),
        #[prost(string, tag = "13")]
        AtraceName(String),
    }

    /// `oneof sibling_merge_key_field`.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum SiblingMergeKeyField {
        #[prost(string, tag = "16")]
        SiblingMergeKey(String),
        #[prost(uint64, tag = "17")]
        SiblingMergeKeyInt(u64),
    }

    /// `TrackDescriptor.ChildTracksOrdering`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
    #[repr(i32)]
    pub enum ChildTracksOrdering {
        Unknown = 0,
        Lexicographic = 1,
        Chronological = 2,
        /// By the children's `sibling_order_rank`.
        Explicit = 3,
    }

    /// `TrackDescriptor.SiblingMergeBehavior`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
    #[repr(i32)]
    pub enum SiblingMergeBehavior {
        /// Same as `ByTrackName`.
        Unspecified = 0,
        ByTrackName = 1,
        None = 2,
        BySiblingMergeKey = 3,
    }

    /// `TrackDescriptor.ProcessOrdering`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
    #[repr(i32)]
    pub enum ProcessOrdering {
        Unspecified = 0,
        Explicit = 1,
    }

    /// `TrackDescriptor.ThreadOrdering`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
    #[repr(i32)]
    pub enum ThreadOrdering {
        Unspecified = 0,
        Explicit = 1,
    }
}

// ---------------------------------------------------------------------------
// protos/perfetto/trace/track_event/{process,thread,counter,state}_descriptor.proto
// ---------------------------------------------------------------------------

/// A process (subset: no Chrome fields).
/// Source: protos/perfetto/trace/track_event/process_descriptor.proto
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProcessDescriptor {
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    #[prost(string, repeated, tag = "2")]
    pub cmdline: Vec<String>,
    #[prost(string, optional, tag = "6")]
    pub process_name: Option<String>,
    #[prost(int32, optional, tag = "5")]
    pub process_priority: Option<i32>,
    /// In the trace clock (other clock ids are not supported here).
    #[prost(int64, optional, tag = "7")]
    pub start_timestamp_ns: Option<i64>,
    #[prost(string, repeated, tag = "8")]
    pub process_labels: Vec<String>,
}

/// A thread (subset: no Chrome or deprecated fields). `tid` is int64.
/// Source: protos/perfetto/trace/track_event/thread_descriptor.proto
#[derive(Clone, PartialEq, prost::Message)]
pub struct ThreadDescriptor {
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    #[prost(int64, optional, tag = "2")]
    pub tid: Option<i64>,
    #[prost(string, optional, tag = "5")]
    pub thread_name: Option<String>,
}

/// Marks a counter track. Source:
/// protos/perfetto/trace/track_event/counter_descriptor.proto
#[derive(Clone, PartialEq, prost::Message)]
pub struct CounterDescriptor {
    #[prost(
        enumeration = "counter_descriptor::BuiltinCounterType",
        optional,
        tag = "1"
    )]
    pub r#type: Option<i32>,
    #[prost(string, repeated, tag = "2")]
    pub categories: Vec<String>,
    #[prost(enumeration = "counter_descriptor::Unit", optional, tag = "3")]
    pub unit: Option<i32>,
    /// Free-form unit when [`counter_descriptor::Unit`] has none that fits.
    #[prost(string, optional, tag = "6")]
    pub unit_name: Option<String>,
    #[prost(int64, optional, tag = "4")]
    pub unit_multiplier: Option<i64>,
    /// Values are deltas on this sequence (reset when state is cleared).
    #[prost(bool, optional, tag = "5")]
    pub is_incremental: Option<bool>,
    /// Counter tracks with the same key and parent share a y-axis range.
    #[prost(string, optional, tag = "7")]
    pub y_axis_share_key: Option<String>,
}

/// Nested types of [`CounterDescriptor`].
pub mod counter_descriptor {
    /// `CounterDescriptor.BuiltinCounterType`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
    #[repr(i32)]
    pub enum BuiltinCounterType {
        CounterUnspecified = 0,
        CounterThreadTimeNs = 1,
        CounterThreadInstructionCount = 2,
    }

    /// `CounterDescriptor.Unit`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
    #[repr(i32)]
    pub enum Unit {
        UnitUnspecified = 0,
        UnitTimeNs = 1,
        UnitCount = 2,
        UnitSizeBytes = 3,
    }
}

/// Marks a state track (empty message). Perfetto v57+ (2026-06).
/// Source: protos/perfetto/trace/track_event/state_descriptor.proto
#[derive(Clone, PartialEq, prost::Message)]
pub struct StateDescriptor {}

// ---------------------------------------------------------------------------
// protos/perfetto/trace/track_event/track_event.proto
// ---------------------------------------------------------------------------

/// An event on a track (subset: the stable public fields).
/// Source: protos/perfetto/trace/track_event/track_event.proto
#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackEvent {
    /// Interned [`EventCategory`] ids.
    #[prost(uint64, repeated, packed = "false", tag = "3")]
    pub category_iids: Vec<u64>,
    #[prost(string, repeated, tag = "22")]
    pub categories: Vec<String>,
    /// `oneof name_field`.
    #[prost(oneof = "track_event::NameField", tags = "10, 23")]
    pub name_field: Option<track_event::NameField>,
    #[prost(enumeration = "track_event::Type", optional, tag = "9")]
    pub r#type: Option<i32>,
    #[prost(uint64, optional, tag = "11")]
    pub track_uuid: Option<u64>,
    /// `oneof counter_value_field`.
    #[prost(oneof = "track_event::CounterValueField", tags = "30, 44")]
    pub counter_value_field: Option<track_event::CounterValueField>,
    #[prost(uint64, repeated, packed = "false", tag = "31")]
    pub extra_counter_track_uuids: Vec<u64>,
    #[prost(int64, repeated, packed = "false", tag = "12")]
    pub extra_counter_values: Vec<i64>,
    #[prost(uint64, repeated, packed = "false", tag = "45")]
    pub extra_double_counter_track_uuids: Vec<u64>,
    #[prost(double, repeated, packed = "false", tag = "46")]
    pub extra_double_counter_values: Vec<f64>,
    /// Flow arrows through this event (ids global to the trace).
    #[prost(fixed64, repeated, packed = "false", tag = "47")]
    pub flow_ids: Vec<u64>,
    #[prost(fixed64, repeated, packed = "false", tag = "48")]
    pub terminating_flow_ids: Vec<u64>,
    /// `oneof correlation_id_field`.
    #[prost(oneof = "track_event::CorrelationIdField", tags = "52, 53, 54")]
    pub correlation_id_field: Option<track_event::CorrelationIdField>,
    #[prost(message, repeated, tag = "4")]
    pub debug_annotations: Vec<DebugAnnotation>,
}

/// Nested types of [`TrackEvent`].
pub mod track_event {
    /// `TrackEvent.Type`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
    #[repr(i32)]
    pub enum Type {
        Unspecified = 0,
        /// Opens a slice; slices on one track must nest strictly.
        SliceBegin = 1,
        /// Closes the most recently opened slice on the track.
        SliceEnd = 2,
        Instant = 3,
        /// A value for a counter track (`counter_value_field`).
        Counter = 4,
        /// A state for a state track, carried in `name` (empty: no state).
        /// Perfetto v57+ (2026-06).
        State = 5,
    }

    /// `oneof name_field`.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum NameField {
        /// Interned [`super::EventName`] id.
        #[prost(uint64, tag = "10")]
        NameIid(u64),
        #[prost(string, tag = "23")]
        Name(String),
    }

    /// `oneof counter_value_field`.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum CounterValueField {
        #[prost(int64, tag = "30")]
        CounterValue(i64),
        #[prost(double, tag = "44")]
        DoubleCounterValue(f64),
    }

    /// `oneof correlation_id_field`.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum CorrelationIdField {
        #[prost(uint64, tag = "52")]
        CorrelationId(u64),
        #[prost(string, tag = "53")]
        CorrelationIdStr(String),
        #[prost(uint64, tag = "54")]
        CorrelationIdStrIid(u64),
    }
}

/// Defaults for TrackEvents of a sequence (inside [`TracePacketDefaults`]).
/// Source: protos/perfetto/trace/track_event/track_event.proto
#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackEventDefaults {
    #[prost(uint64, optional, tag = "11")]
    pub track_uuid: Option<u64>,
    #[prost(uint64, repeated, packed = "false", tag = "31")]
    pub extra_counter_track_uuids: Vec<u64>,
    #[prost(uint64, repeated, packed = "false", tag = "45")]
    pub extra_double_counter_track_uuids: Vec<u64>,
}

/// Interned category. Source: protos/perfetto/trace/track_event/track_event.proto
#[derive(Clone, PartialEq, prost::Message)]
pub struct EventCategory {
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
}

/// Interned event name. Source: protos/perfetto/trace/track_event/track_event.proto
#[derive(Clone, PartialEq, prost::Message)]
pub struct EventName {
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
}

// ---------------------------------------------------------------------------
// protos/perfetto/trace/track_event/debug_annotation.proto
// ---------------------------------------------------------------------------

/// A key/value argument of an event, shown in the UI's details panel.
/// Source: protos/perfetto/trace/track_event/debug_annotation.proto
#[derive(Clone, PartialEq, prost::Message)]
pub struct DebugAnnotation {
    /// `oneof name_field` (set on top-level and dictionary entries).
    #[prost(oneof = "debug_annotation::NameField", tags = "1, 10")]
    pub name_field: Option<debug_annotation::NameField>,
    /// `oneof value` (subset: no deprecated `nested_value`).
    #[prost(oneof = "debug_annotation::Value", tags = "2, 3, 4, 5, 7, 9, 6, 17")]
    pub value: Option<debug_annotation::Value>,
    #[prost(message, repeated, tag = "11")]
    pub dict_entries: Vec<DebugAnnotation>,
    #[prost(message, repeated, tag = "12")]
    pub array_values: Vec<DebugAnnotation>,
}

/// Nested types of [`DebugAnnotation`].
pub mod debug_annotation {
    /// `oneof name_field`.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum NameField {
        /// Interned [`super::DebugAnnotationName`] id.
        #[prost(uint64, tag = "1")]
        NameIid(u64),
        #[prost(string, tag = "10")]
        Name(String),
    }

    /// `oneof value` (subset).
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Value {
        #[prost(bool, tag = "2")]
        BoolValue(bool),
        #[prost(uint64, tag = "3")]
        UintValue(u64),
        #[prost(int64, tag = "4")]
        IntValue(i64),
        #[prost(double, tag = "5")]
        DoubleValue(f64),
        /// Shown in hex.
        #[prost(uint64, tag = "7")]
        PointerValue(u64),
        #[prost(string, tag = "9")]
        LegacyJsonValue(String),
        #[prost(string, tag = "6")]
        StringValue(String),
        /// Interned `InternedData.debug_annotation_string_values` id.
        #[prost(uint64, tag = "17")]
        StringValueIid(u64),
    }
}

/// Interned annotation name.
/// Source: protos/perfetto/trace/track_event/debug_annotation.proto
#[derive(Clone, PartialEq, prost::Message)]
pub struct DebugAnnotationName {
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
}

// ---------------------------------------------------------------------------
// protos/perfetto/trace/interned_data/interned_data.proto
// protos/perfetto/trace/profiling/profile_common.proto (InternedString)
// ---------------------------------------------------------------------------

/// Interning tables of a sequence (subset: the TrackEvent ones). Ids start
/// at 1 and are scoped to the sequence and field.
/// Source: protos/perfetto/trace/interned_data/interned_data.proto
#[derive(Clone, PartialEq, prost::Message)]
pub struct InternedData {
    #[prost(message, repeated, tag = "1")]
    pub event_categories: Vec<EventCategory>,
    #[prost(message, repeated, tag = "2")]
    pub event_names: Vec<EventName>,
    #[prost(message, repeated, tag = "3")]
    pub debug_annotation_names: Vec<DebugAnnotationName>,
    #[prost(message, repeated, tag = "29")]
    pub debug_annotation_string_values: Vec<InternedString>,
}

/// Source: protos/perfetto/trace/profiling/profile_common.proto
#[derive(Clone, PartialEq, prost::Message)]
pub struct InternedString {
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    #[prost(bytes = "vec", optional, tag = "2")]
    pub str: Option<Vec<u8>>,
}

// ---------------------------------------------------------------------------
// protos/perfetto/trace/generic_kernel/generic_task.proto
// ---------------------------------------------------------------------------

/// A thread's scheduler state change; trace processor turns these into its
/// native `thread_state` / `sched` tables (the UI's thread-state and CPU
/// tracks). Perfetto v51+ (2025-06).
/// Source: protos/perfetto/trace/generic_kernel/generic_task.proto
#[derive(Clone, PartialEq, prost::Message)]
pub struct GenericKernelTaskStateEvent {
    /// Only meaningful with `TASK_STATE_RUNNING`, where it is required.
    #[prost(int32, optional, tag = "1")]
    pub cpu: Option<i32>,
    #[prost(string, optional, tag = "2")]
    pub comm: Option<String>,
    #[prost(int64, optional, tag = "3")]
    pub tid: Option<i64>,
    #[prost(
        enumeration = "generic_kernel_task_state_event::TaskStateEnum",
        optional,
        tag = "4"
    )]
    pub state: Option<i32>,
    #[prost(int32, optional, tag = "5")]
    pub prio: Option<i32>,
}

/// Nested types of [`GenericKernelTaskStateEvent`].
pub mod generic_kernel_task_state_event {
    /// `GenericKernelTaskStateEvent.TaskStateEnum`. Trace processor shows
    /// them as Created, R, Running, S, D, T, Z, X.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
    #[repr(i32)]
    pub enum TaskStateEnum {
        TaskStateUnknown = 0,
        TaskStateCreated = 1,
        TaskStateRunnable = 2,
        TaskStateRunning = 3,
        TaskStateInterruptibleSleep = 4,
        TaskStateUninterruptibleSleep = 5,
        TaskStateStopped = 6,
        TaskStateDead = 7,
        TaskStateDestroyed = 8,
    }
}

/// A thread's new name. Source:
/// protos/perfetto/trace/generic_kernel/generic_task.proto
#[derive(Clone, PartialEq, prost::Message)]
pub struct GenericKernelTaskRenameEvent {
    #[prost(int64, optional, tag = "1")]
    pub tid: Option<i64>,
    #[prost(string, optional, tag = "2")]
    pub comm: Option<String>,
}

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

    fn sample() -> Trace {
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
        Trace {
            packet: vec![
                first,
                packet(1_000, trace_packet::Data::TrackDescriptor(device)),
                packet(1_000, trace_packet::Data::TrackDescriptor(lane)),
                packet(1_000, trace_packet::Data::TrackDescriptor(depth)),
                packet(1_000, trace_packet::Data::TrackDescriptor(process)),
                packet(1_000, trace_packet::Data::TrackDescriptor(thread)),
                packet(
                    1_100,
                    trace_packet::Data::GenericKernelTaskStateEvent(state),
                ),
                packet(1_200, begin),
                packet(1_200, trace_packet::Data::TrackEvent(count)),
                packet(
                    1_300,
                    event(track_event::Type::Instant, 20, Some("pwrite64")),
                ),
                packet(1_500, event(track_event::Type::SliceEnd, 11, None)),
            ],
        }
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
