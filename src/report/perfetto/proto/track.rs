//! Tracks: `TrackDescriptor` and the process, thread, counter and state
//! descriptors it carries.

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
