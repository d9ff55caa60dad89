//! The programs of a light capture by name, each with the tracepoint it
//! attaches to, and which of them a session's options attach.

use super::{Accounting, LightOptions};

/// The programs of a light capture, and the tracepoint each is attached
/// to as a BTF-typed raw tracepoint: a request's issue and completion by
/// accounting, the block counters, the scheduler's (runqueue waits, behind
/// their own switch) and the interrupts'.
pub(super) const ISSUE_COMPLETE_STAMPS: [(&str, &str); 2] = [
    ("iosl_issue_st", "block_rq_issue"),
    ("iosl_complete_st", "block_rq_complete"),
];
pub(super) const ISSUE_COMPLETE_STATE: [(&str, &str); 2] = [
    ("iosl_issue", "block_rq_issue"),
    ("iosl_complete", "block_rq_complete"),
];
pub(super) const BLOCK_COUNTERS: [(&str, &str); 5] = [
    ("iosl_requeue", "block_rq_requeue"),
    ("iosl_backmerge", "block_bio_backmerge"),
    ("iosl_frontmerge", "block_bio_frontmerge"),
    ("iosl_rqmerge", "block_rq_merge"),
    ("iosl_split", "block_split"),
];
/// Bios held back by blk-throttle, counted as its dispatch work submits
/// them again (attached where the kernel has that work).
pub(super) const THROTTLE: [(&str, &str); 3] = [
    ("iosl_wq_start", "workqueue_execute_start"),
    ("iosl_wq_end", "workqueue_execute_end"),
    ("iosl_bio_queue", "block_bio_queue"),
];
/// io_uring requests: submission to completion (its entry posted, or
/// kept by the kernel when the completion queue was full), and the punts
/// to io-wq.
pub(super) const URING: [(&str, &str); 4] = [
    ("iosl_uring_submit", "io_uring_submit_req"),
    ("iosl_uring_punt", "io_uring_queue_async_work"),
    ("iosl_uring_complete", "io_uring_complete"),
    ("iosl_uring_overflow", "io_uring_cqe_overflow"),
];
/// The switch reads runqueue waits from the scheduler's own stamps; the
/// wakeup program only counts wakeups.
pub(super) const SCHEDULER: [(&str, &str); 2] = [
    ("iosl_wakeup", "sched_wakeup"),
    ("iosl_switch", "sched_switch"),
];
pub(super) const INTERRUPTS: [(&str, &str); 4] = [
    ("iosl_irq_entry", "irq_handler_entry"),
    ("iosl_irq_exit", "irq_handler_exit"),
    ("iosl_softirq_entry", "softirq_entry"),
    ("iosl_softirq_exit", "softirq_exit"),
];

/// Every BTF-typed program of the object that a capture may attach.
#[cfg(test)]
pub(super) fn all_programs() -> impl Iterator<Item = &'static (&'static str, &'static str)> {
    ISSUE_COMPLETE_STAMPS
        .iter()
        .chain(&ISSUE_COMPLETE_STATE)
        .chain(&BLOCK_COUNTERS)
        .chain(&URING)
        .chain(&THROTTLE)
        .chain(&SCHEDULER)
        .chain(&INTERRUPTS)
}

/// The programs `opts` attaches for the whole session (the floor: their
/// empty twins); the scheduler's are attached apart (`set_runqueue`),
/// except the floor's.
pub(super) fn programs(opts: &LightOptions) -> Vec<(&'static str, &'static str)> {
    let issue_complete = match opts.accounting {
        Accounting::Stamps => &ISSUE_COMPLETE_STAMPS,
        Accounting::State => &ISSUE_COMPLETE_STATE,
    };
    let floor_scheduler = opts.floor && opts.runqueue;
    let mut chosen: Vec<(&str, &str)> = issue_complete
        .iter()
        .chain(&BLOCK_COUNTERS)
        .chain(&URING)
        .chain(if floor_scheduler { &SCHEDULER[..] } else { &[] })
        .chain(if opts.irq { &INTERRUPTS[..] } else { &[] })
        .copied()
        .collect();
    if opts.floor {
        chosen = chosen
            .iter()
            .filter_map(|(_, tp)| FLOOR_PROGRAMS.iter().find(|f| f.1 == *tp).copied())
            .collect();
    }
    if opts.fault_floor {
        chosen.extend(FAULT_FLOOR_PROGRAMS);
    }
    chosen
}

/// The classic tracepoint program of each context event
/// (`iosl_ev_<event>` in bpf/light.bpf.c).
pub(super) fn event_program(event: &str) -> String {
    format!("iosl_ev_{event}")
}

/// The floor of the overhead benchmark: the same hooks with programs that
/// return at once.
pub(super) const FLOOR_PROGRAMS: [(&str, &str); 16] = [
    ("iosl_nop_issue", "block_rq_issue"),
    ("iosl_nop_compl", "block_rq_complete"),
    ("iosl_nop_requeue", "block_rq_requeue"),
    ("iosl_nop_bmerge", "block_bio_backmerge"),
    ("iosl_nop_fmerge", "block_bio_frontmerge"),
    ("iosl_nop_rqmerge", "block_rq_merge"),
    ("iosl_nop_split", "block_split"),
    ("iosl_nop_uring_submit", "io_uring_submit_req"),
    ("iosl_nop_uring_punt", "io_uring_queue_async_work"),
    ("iosl_nop_uring_complete", "io_uring_complete"),
    ("iosl_nop_wakeup", "sched_wakeup"),
    ("iosl_nop_switch", "sched_switch"),
    ("iosl_nop_irq_in", "irq_handler_entry"),
    ("iosl_nop_irq_out", "irq_handler_exit"),
    ("iosl_nop_sirq_in", "softirq_entry"),
    ("iosl_nop_sirq_out", "softirq_exit"),
];
pub(super) const FLOOR_EVENT_PROGRAM: &str = "iosl_nop_event";
/// The floor of the hooks timing page faults would need (bench only).
pub(super) const FAULT_FLOOR_PROGRAMS: [(&str, &str); 3] = [
    ("iosl_nop_fault", "page_fault_user"),
    ("iosl_nop_filemap_fault", "mm_filemap_fault"),
    ("iosl_nop_sys_enter", "sys_enter"),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The interrupts' hooks are attached only with `--irq on`, for the
    /// programs and for their floor alike (the benchmark compares the two).
    #[test]
    fn the_interrupts_hooks_are_attached_only_when_asked() {
        let irq_hooks = |opts: &LightOptions| {
            programs(opts)
                .iter()
                .filter(|(_, tp)| INTERRUPTS.iter().any(|i| i.1 == *tp))
                .count()
        };
        for floor in [false, true] {
            let off = LightOptions {
                floor,
                ..LightOptions::default()
            };
            assert!(!off.irq, "off by default");
            assert_eq!(irq_hooks(&off), 0, "floor {floor}");
            let on = LightOptions {
                irq: true,
                ..off.clone()
            };
            assert_eq!(irq_hooks(&on), INTERRUPTS.len(), "floor {floor}");
            assert_eq!(programs(&on).len(), programs(&off).len() + INTERRUPTS.len());
        }
    }
}
