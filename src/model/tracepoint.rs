//! The tracepoints iosleuth analyses, named once. An event's kind is
//! decided when it is decoded (`TraceEvent::new`), so analyses match on
//! `Tracepoint` rather than on name strings: a misspelt kind is a compile
//! error, and dispatching an event costs an integer comparison per
//! analysis instead of a string comparison.
//!
//! Names are the kernel's (`include/trace/events/*.h`), without their
//! system: the same tracepoint arrives as `sched:sched_switch` from perf
//! and `sched_switch` from ftrace.

macro_rules! tracepoints {
    ($($(#[$doc:meta])* $variant:ident = $name:literal,)*) => {
        /// A tracepoint iosleuth reads; `Other` for every other event
        /// (counted, kept for `dump`, otherwise unused).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Tracepoint {
            $($(#[$doc])* $variant,)*
            /// `syscalls:sys_enter_NAME`: the name is the event's own.
            SysEnter,
            /// `syscalls:sys_exit_NAME`.
            SysExit,
            Other,
        }

        impl Tracepoint {
            /// Every tracepoint known by its full name.
            pub const NAMED: &'static [Tracepoint] = &[$(Tracepoint::$variant,)*];

            /// The kind of an event whose name, without its system, is
            /// `short`.
            pub fn of(short: &str) -> Tracepoint {
                match short {
                    $($name => Tracepoint::$variant,)*
                    _ if short.starts_with(SYS_ENTER) => Tracepoint::SysEnter,
                    _ if short.starts_with(SYS_EXIT) => Tracepoint::SysExit,
                    _ => Tracepoint::Other,
                }
            }

            /// The kernel's name; the prefix for the system-call events and
            /// "" for `Other`.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Tracepoint::$variant => $name,)*
                    Tracepoint::SysEnter => SYS_ENTER,
                    Tracepoint::SysExit => SYS_EXIT,
                    Tracepoint::Other => "",
                }
            }
        }
    };
}

const SYS_ENTER: &str = "sys_enter_";
const SYS_EXIT: &str = "sys_exit_";

tracepoints! {
    // sched
    SchedSwitch = "sched_switch",
    SchedWaking = "sched_waking",
    SchedWakeup = "sched_wakeup",
    SchedWakeupNew = "sched_wakeup_new",
    SchedMigrateTask = "sched_migrate_task",
    SchedProcessFork = "sched_process_fork",
    SchedProcessExit = "sched_process_exit",
    // ext4, jbd2 and writeback
    Ext4SyncFileEnter = "ext4_sync_file_enter",
    Ext4SyncFileExit = "ext4_sync_file_exit",
    Jbd2StartCommit = "jbd2_start_commit",
    Jbd2CommitLocking = "jbd2_commit_locking",
    Jbd2CommitFlushing = "jbd2_commit_flushing",
    Jbd2CommitLogging = "jbd2_commit_logging",
    Jbd2EndCommit = "jbd2_end_commit",
    Jbd2RunStats = "jbd2_run_stats",
    Jbd2HandleStart = "jbd2_handle_start",
    Jbd2Checkpoint = "jbd2_checkpoint",
    Jbd2CheckpointStats = "jbd2_checkpoint_stats",
    Jbd2UpdateLogTail = "jbd2_update_log_tail",
    Jbd2LockBufferStall = "jbd2_lock_buffer_stall",
    BalanceDirtyPages = "balance_dirty_pages",
    /// Writeback throttling (`block/blk-wbt.c`).
    WbtStat = "wbt_stat",
    WbtLat = "wbt_lat",
    WbtStep = "wbt_step",
    WbtTimer = "wbt_timer",
    // readahead
    PageCacheSyncRa = "page_cache_sync_ra",
    PageCacheAsyncRa = "page_cache_async_ra",
    // interrupts and work
    IrqHandlerEntry = "irq_handler_entry",
    IrqHandlerExit = "irq_handler_exit",
    SoftirqEntry = "softirq_entry",
    SoftirqExit = "softirq_exit",
    SoftirqRaise = "softirq_raise",
    WorkqueueQueueWork = "workqueue_queue_work",
    WorkqueueActivateWork = "workqueue_activate_work",
    WorkqueueExecuteStart = "workqueue_execute_start",
    WorkqueueExecuteEnd = "workqueue_execute_end",
    // drivers
    MmcRequestStart = "mmc_request_start",
    MmcRequestDone = "mmc_request_done",
    NvmeSetupCmd = "nvme_setup_cmd",
    NvmeCompleteRq = "nvme_complete_rq",
    ScsiDispatchCmdStart = "scsi_dispatch_cmd_start",
    ScsiDispatchCmdDone = "scsi_dispatch_cmd_done",
    ScsiDispatchCmdTimeout = "scsi_dispatch_cmd_timeout",
    ScsiDispatchCmdError = "scsi_dispatch_cmd_error",
    // io_uring (`include/trace/events/io_uring.h`)
    IoUringCreate = "io_uring_create",
    IoUringSubmitReq = "io_uring_submit_req",
    IoUringFileGet = "io_uring_file_get",
    IoUringQueueAsyncWork = "io_uring_queue_async_work",
    IoUringPollArm = "io_uring_poll_arm",
    IoUringComplete = "io_uring_complete",
    IoUringReqFailed = "io_uring_req_failed",
    IoUringCqeOverflow = "io_uring_cqe_overflow",
    IoUringCqringWait = "io_uring_cqring_wait",
    // faults and the page cache (`include/trace/events/exceptions.h`,
    // `filemap.h`, `vmscan.h`)
    /// A user-space page fault begins (x86: no event says when it ends).
    PageFaultUser = "page_fault_user",
    /// A fault the kernel takes (x86): on a user address, a call touching
    /// the caller's memory (`copy_from_user`), counted as the thread's.
    PageFaultKernel = "page_fault_kernel",
    /// `filemap_fault`: the fault is on a file's page.
    MmFilemapFault = "mm_filemap_fault",
    /// A page enters the page cache: a miss being filled.
    MmFilemapAddToPageCache = "mm_filemap_add_to_page_cache",
    /// A page leaves the page cache (reclaim, truncate, invalidate).
    MmFilemapDeleteFromPageCache = "mm_filemap_delete_from_page_cache",
    /// The read path looks up pages (`filemap_get_pages`): pages asked for.
    MmFilemapGetPages = "mm_filemap_get_pages",
    /// Fault-around maps pages already cached (`filemap_map_pages`).
    MmFilemapMapPages = "mm_filemap_map_pages",
    MmVmscanDirectReclaimBegin = "mm_vmscan_direct_reclaim_begin",
    MmVmscanDirectReclaimEnd = "mm_vmscan_direct_reclaim_end",
    MmVmscanMemcgReclaimBegin = "mm_vmscan_memcg_reclaim_begin",
    MmVmscanMemcgReclaimEnd = "mm_vmscan_memcg_reclaim_end",
    MmVmscanKswapdWake = "mm_vmscan_kswapd_wake",
    MmVmscanKswapdSleep = "mm_vmscan_kswapd_sleep",
    /// `trace_marker` writes (ftrace's `print`): the probes' begin/end marks.
    Print = "print",
}

macro_rules! fields {
    ($($variant:ident = $name:literal,)*) => {
        /// A field of a tracepoint that an analysis reads, by the kernel's
        /// name (the `format` file's, which the text of ftrace, trace-cmd
        /// and perf prints as `name=value`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Field {
            $($variant,)*
        }

        impl Field {
            #[cfg(test)]
            pub const ALL: &'static [Field] = &[$(Field::$variant,)*];

            pub const fn name(self) -> &'static str {
                match self {
                    $(Field::$variant => $name,)*
                }
            }

            /// The field an analysis reads by this name, if any: decided
            /// once per distinct name (a format's field, a text's key),
            /// so that reading a field compares no text.
            pub fn of(name: &str) -> Option<Field> {
                match name {
                    $($name => Some(Field::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

fields! {
    Address = "address",
    Bg = "bg",
    BlkAddr = "blk_addr",
    Blocks = "blocks",
    BlocksLogged = "blocks_logged",
    Buf = "buf",
    Channel = "channel",
    ChildComm = "child_comm",
    ChildPid = "child_pid",
    Cid = "cid",
    Cmd = "cmd",
    CmdArg = "cmd_arg",
    CmdOpcode = "cmd_opcode",
    Cmdid = "cmdid",
    Cmnd = "cmnd",
    Comm = "comm",
    Ctx = "ctx",
    CtrlId = "ctrl_id",
    Datasync = "datasync",
    DestCpu = "dest_cpu",
    Dev = "dev",
    Dirty = "dirty",
    Disk = "disk",
    Fd = "fd",
    DriverTag = "driver_tag",
    Dropped = "dropped",
    ErrorCode = "error_code",
    ForcedToClose = "forced_to_close",
    Function = "function",
    HandleCount = "handle_count",
    HostNo = "host_no",
    IIno = "i_ino",
    Id = "id",
    Index = "index",
    Ino = "ino",
    Irq = "irq",
    LastIndex = "last_index",
    Lat = "lat",
    Lba = "lba",
    Limit = "limit",
    Lun = "lun",
    Max = "max",
    Name = "name",
    NextComm = "next_comm",
    NextPid = "next_pid",
    NextPrio = "next_prio",
    OpStr = "op_str",
    Ofs = "ofs",
    Opcode = "opcode",
    Order = "order",
    ParentPid = "parent_pid",
    Pause = "pause",
    Pid = "pid",
    PrevComm = "prev_comm",
    PrevPid = "prev_pid",
    PrevPrio = "prev_prio",
    PrevState = "prev_state",
    Qid = "qid",
    RaPages = "ra_pages",
    Req = "req",
    ReqCount = "req_count",
    Res = "res",
    Ret = "ret",
    SDev = "s_dev",
    Size = "size",
    Slba = "slba",
    SqThread = "sq_thread",
    Step = "step",
    Struct = "struct",
    SyncCommit = "sync_commit",
    Tag = "tag",
    TargetCpu = "target_cpu",
    Transaction = "transaction",
    Type = "type",
    UserData = "user_data",
    Vec = "vec",
    Work = "work",
    Written = "written",
}

impl Tracepoint {
    /// Writeback throttling's events, counted together.
    pub fn is_wbt(self) -> bool {
        matches!(
            self,
            Tracepoint::WbtStat | Tracepoint::WbtLat | Tracepoint::WbtStep | Tracepoint::WbtTimer
        )
    }

    /// Interrupts' events: hard irq handlers, softirqs raised and run.
    pub fn is_irq(self) -> bool {
        matches!(
            self,
            Tracepoint::SoftirqEntry
                | Tracepoint::SoftirqExit
                | Tracepoint::SoftirqRaise
                | Tracepoint::IrqHandlerEntry
                | Tracepoint::IrqHandlerExit
        )
    }

    /// Workqueues' events: work queued, activated, run.
    pub fn is_workqueue(self) -> bool {
        matches!(
            self,
            Tracepoint::WorkqueueQueueWork
                | Tracepoint::WorkqueueExecuteStart
                | Tracepoint::WorkqueueExecuteEnd
                | Tracepoint::WorkqueueActivateWork
        )
    }

    /// A driver's command starting or ending (MMC, NVMe, SCSI).
    pub fn is_driver_command(self) -> bool {
        matches!(
            self,
            Tracepoint::MmcRequestStart
                | Tracepoint::NvmeSetupCmd
                | Tracepoint::ScsiDispatchCmdStart
                | Tracepoint::MmcRequestDone
                | Tracepoint::NvmeCompleteRq
                | Tracepoint::ScsiDispatchCmdDone
                | Tracepoint::ScsiDispatchCmdTimeout
                | Tracepoint::ScsiDispatchCmdError
        )
    }

    /// A waking of a thread: `sched_waking`, `sched_wakeup`,
    /// `sched_wakeup_new`.
    pub fn is_wakeup(self) -> bool {
        matches!(
            self,
            Tracepoint::SchedWaking | Tracepoint::SchedWakeup | Tracepoint::SchedWakeupNew
        )
    }
}

/// The system call a `sys_enter_NAME`/`sys_exit_NAME` event's short name
/// names.
pub fn syscall_of(short: &str) -> Option<&str> {
    short
        .strip_prefix(SYS_ENTER)
        .or_else(|| short.strip_prefix(SYS_EXIT))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::path::Path;

    #[test]
    fn every_name_maps_back_to_its_tracepoint() {
        for &t in Tracepoint::NAMED {
            assert_eq!(Tracepoint::of(t.name()), t, "{t:?}");
        }
        assert_eq!(Tracepoint::of("sys_enter_fsync"), Tracepoint::SysEnter);
        assert_eq!(Tracepoint::of("sys_exit_pwrite64"), Tracepoint::SysExit);
        assert_eq!(syscall_of("sys_exit_pwrite64"), Some("pwrite64"));
        assert_eq!(Tracepoint::of("sched_stat_runtime"), Tracepoint::Other);
        assert_eq!(Tracepoint::of(""), Tracepoint::Other);
    }

    /// The events and the fields of the tracefs formats in the captures
    /// committed with the fixtures (recorded on this machine's kernel).
    fn committed_formats() -> (HashSet<String>, HashSet<String>) {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let (mut events, mut fields) = (HashSet::new(), HashSet::new());
        for cap in std::fs::read_dir(&fixtures).unwrap().flatten() {
            let Ok(systems) = std::fs::read_dir(cap.path().join("formats/events")) else {
                continue;
            };
            for system in systems.flatten() {
                for event in std::fs::read_dir(system.path()).unwrap().flatten() {
                    let Ok(text) = std::fs::read_to_string(event.path().join("format")) else {
                        continue;
                    };
                    events.insert(event.file_name().to_string_lossy().into_owned());
                    // `field:unsigned int prev_pid;` / `field:char comm[16];`
                    for decl in text.split("field:").skip(1) {
                        let decl = decl.split(';').next().unwrap_or("");
                        let name = decl.rsplit([' ', '*']).next().unwrap_or("");
                        fields.insert(name.split('[').next().unwrap_or("").to_string());
                    }
                }
            }
        }
        assert!(events.len() > 50 && fields.len() > 50, "{events:?}");
        (events, fields)
    }

    /// The drivers' events: the lab has no such hardware; their fields
    /// are those of the kernel's `include/trace/events/{mmc,scsi}.h` and
    /// `drivers/nvme/host/trace.h`, as the text in
    /// tests/fixtures/driver-events.synthetic.txt prints them.
    fn of_a_driver(name: &str) -> bool {
        ["mmc_", "nvme_", "scsi_"]
            .iter()
            .any(|p| name.starts_with(p))
    }
    const DRIVER_FIELDS: &[&str] = &[
        "blk_addr",
        "channel",
        "cid",
        "cmd",
        "cmd_arg",
        "cmd_opcode",
        "cmdid",
        "cmnd",
        "ctrl_id",
        "disk",
        "driver_tag",
        "host_no",
        "id",
        "lba",
        "lun",
        "opcode",
        "qid",
        "slba",
        "tag",
    ];

    /// Every field an analysis reads is a field of a committed format, a
    /// driver's, or one only text prints: `struct` (workqueue's text prints
    /// `work struct 0x…`), `ofs` (filemap's text prints the page's `index`
    /// as bytes, `ofs=4096`).
    #[test]
    fn the_fields_are_the_kernels() {
        let (_, fields) = committed_formats();
        for &f in Field::ALL {
            let n = f.name();
            assert!(
                fields.contains(n) || DRIVER_FIELDS.contains(&n) || ["struct", "ofs"].contains(&n),
                "{n}: a field of no committed capture's formats"
            );
        }
    }

    /// Every named tracepoint is one of the kernel's: its format is in a
    /// capture committed with the fixtures (recorded on this machine's
    /// kernel), except the drivers', whose hardware the lab has not.
    #[test]
    fn the_names_are_the_kernels() {
        let (events, _) = committed_formats();
        for &t in Tracepoint::NAMED {
            let n = t.name();
            assert!(
                events.contains(n) || of_a_driver(n),
                "{n}: in no committed capture's formats"
            );
        }
    }
}
