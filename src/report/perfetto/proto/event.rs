//! Events on tracks: `TrackEvent`, its debug annotations (arguments) and
//! interned data.

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
