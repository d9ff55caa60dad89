//! The trace file and its packets: `Trace`, `TracePacket`, per-sequence
//! defaults, clocks.

// What packets carry, from the other parts of the format.
use super::{
    GenericKernelTaskRenameEvent, GenericKernelTaskStateEvent, InternedData, TrackDescriptor,
    TrackEvent, TrackEventDefaults,
};

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
