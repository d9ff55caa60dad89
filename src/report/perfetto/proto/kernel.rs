//! Perfetto's generic kernel task events (thread states and renames).

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
