/* What light.bpf.c shares with user space (src/capture/light/maps.rs
 * mirrors it; a test checks the sizes): map keys, values and the slow
 * request record. Little-endian, natural alignment, no padding. */
#ifndef IOSL_LIGHT_H
#define IOSL_LIGHT_H

#include <linux/types.h>

/* Devices traced: slot 0 holds every device user space did not name. */
#define NSLOT 16
/* Operations, grouped as diskstats groups them (op_stat_group): reads,
 * writes (write zeroes and zone appends too), flushes, discards (secure
 * erases too). */
#define NOP 4
/* The device -> slot table (light.bpf.c's dev_slot): a dev_t's entry is
 * (dev * DEV_HASH_MUL) >> DEV_HASH_SHIFT, NDEVIDX entries. */
#define DEV_HASH_MUL 2654435761
#define DEV_HASH_SHIFT 20
#define NDEVIDX 4096
/* The CPUs whose counts add up to the queue depth sampled at issue (the
 * verifier bounds the loop): past them the depth is not sampled. */
#define MAX_DEPTH_CPUS 256
#define OP_READ 0
#define OP_WRITE 1
#define OP_FLUSH 2
#define OP_DISCARD 3
/* Stages: allocation -> issue (queued, A2D), issue -> complete (device,
 * D2C), allocation -> complete (A2C). */
#define NSTAGE 3
/* Log-linear buckets, 32 per octave: values below 64 ns exact, larger ones
 * within 1/32 of their size; capped at 2^41 ns (36 minutes). */
#define SUB_BITS 5
#define NBUCKET 1184
/* Queue depth at issue, exact up to 63. */
#define NDEPTH 64
/* Request sizes: log2 of bytes. */
#define NSIZE 32

struct hist {
	__u64 n;
	__u64 sum;
	__u32 b[NBUCKET];
};

struct depth_hist {
	__u32 b[NDEPTH];
};

struct size_hist {
	__u32 b[NSIZE];
};

struct counters {
	__u64 ios[NOP];
	__u64 bytes[NOP];
	__u64 back_merges;
	__u64 front_merges;
	__u64 rq_merges;
	__u64 splits;
	__u64 requeues;
	__u64 errors;
	__u64 partial;
	/* Completions of requests issued before the programs were attached. */
	__u64 no_state;
	/* Issues whose state did not fit the request map. */
	__u64 state_full;
	__u64 slow_sent;
	/* Slow requests over the per-second cap: counted, not sent. */
	__u64 slow_capped;
	/* Slow requests the ring buffer had no room for. */
	__u64 ring_full;
	/* Requests that start where the previous one issued on this CPU to
	 * this device ended: how sequential the device's I/O is, without a
	 * hook on every bio. */
	__u64 seq_requests;
	/* Completions whose stages came from the request's own timestamps
	 * (start_time_ns, io_start_time_ns: the queue keeps block stats),
	 * with no per-request state. */
	__u64 by_stamps;
	/* Completions whose (cgroup, device, operation) found no room in the
	 * cgroups map: counted by device, not by cgroup. */
	__u64 cgroup_full;
	/* Bios held back by a cgroup's I/O limit (blk-throttle), counted when
	 * its dispatch work submits them again, and their bytes. */
	__u64 throttled;
	__u64 throttled_bytes;
	/* Stamps accounting: requests issued and ended (completed or
	 * requeued) on this CPU, each counted only when allocated after the
	 * device's first issue seen (the same test at both ends, on the
	 * request's own allocation stamp); the sum over CPUs of their
	 * difference is the device's depth. */
	__u64 issued;
	__u64 retired;
	/* Scratch, not a counter: the end sector of that previous request. */
	__u64 last_end;
};

/* Per-cgroup accounting, keyed by (cgroup, device slot, operation): the
 * cgroup is the one the request's first bio is charged to (its blkcg: a
 * writeback bio is charged to the cgroup that dirtied the pages where the
 * kernel has cgroup writeback). At most NCGROUP keys; each request's
 * total time counted under Prometheus' `le` bounds (NLE - 1 of them, the
 * same as src/report/prometheus.rs, then +Inf). */
#define NCGROUP 4096
#define NLE 20
/* Entries of each CPU's direct-mapped table, tried before the hash map. */
#define NCGCACHE 256

struct cg_key {
	__u64 id;
	__u32 slot;
	__u32 op;
};

struct cg_stats {
	/* The key, in the per-CPU table only (op_used: its op + 1; 0: the
	 * entry is free). */
	__u64 id;
	__u32 slot;
	__u32 op_used;
	/* Requests completed and their bytes (every part of a request). */
	__u64 ios;
	__u64 bytes;
	/* The requests timed (issued after the programs were attached): the
	 * sum of their total times, and their number under each bound. */
	__u64 time_ns;
	__u32 le[NLE];
};

/* Softirq vectors (NR_SOFTIRQS). */
/* io_uring requests by what they ask (src/model/light.rs URING_OPS names
 * the groups; light.bpf.c uring_group folds the kernel's opcodes). */
#define NUOP 8

struct uring_stats {
	/* Requests completed: their last CQE (without IORING_CQE_F_MORE). */
	__u64 requests;
	/* CQEs of a multishot request before its last. */
	__u64 more;
	/* Requests handed to an io-wq worker (io_uring_queue_async_work):
	 * they could not be issued without blocking. */
	__u64 punted;
	/* Completions whose submission the programs did not see (submitted
	 * before they were attached, or their state did not fit). */
	__u64 untimed;
	/* Completions with a negative result. */
	__u64 errors;
	/* Submissions whose state did not fit the request map. */
	__u64 state_full;
};

#define NSOFTIRQ 10

/* The flight recorder's per-CPU figures: the scheduler and interrupts. */
struct cpu_stats {
	__u64 switches;
	__u64 wakeups;
	/* Runqueue waits of at least wait_min_ns: sent, or lost to a full ring. */
	__u64 long_waits;
	__u64 waits_lost;
	/* Tracepoint events of the context (jbd2): sent, or lost. */
	__u64 events;
	__u64 events_lost;
	__u64 hardirqs;
	__u64 hardirq_ns;
	__u64 softirqs[NSOFTIRQ];
	__u64 softirq_ns[NSOFTIRQ];
};

#define REC_SLOW 1
#define REC_EVENT 2
#define REC_WAIT 3

struct slow_rec {
	__u16 kind;
	__u16 len;
	__u32 dev;
	__u64 alloc_ns;
	__u64 issue_ns;
	__u64 complete_ns;
	__u64 sector;
	__u64 cgroup_id;
	__u32 bytes;
	__u32 cmd_flags;
	__u32 pid;
	__u32 tid;
	__u32 issue_cpu;
	__u32 complete_cpu;
	__u32 depth;
	__s32 error;
	char comm[16];
};

/* A tracepoint's raw record (the bytes its tracefs `format` describes),
 * copied whole up to EVENT_DATA bytes: user space decodes it by the
 * format files the capture keeps. The kernel overwrites the record's first
 * 8 bytes (its common fields) with a pointer before a BPF program sees
 * it, so the event (an index into the context events' list), the thread
 * and its name come beside it. */
#define EVENT_DATA 160
struct event_rec {
	__u16 kind;
	__u16 len;
	__u32 cpu;
	__u64 ts_ns;
	__u32 tid;
	__u16 event;
	__u16 pad;
	char comm[16];
	__u8 data[EVENT_DATA];
};

/* A thread runnable for at least wait_min_ns on `cpu` (the CPU it was
 * queued on and ran on: the scheduler's own stamp); the task that ran
 * there just before it and for how much of the wait (held_ns), and the
 * real-time tasks' time on that CPU during the wait (rt_ns; the last
 * real-time task that ran there before it is rt_*). */
struct wait_rec {
	__u16 kind;
	__u16 len;
	__u32 cpu;
	__u64 start_ns;
	__u64 wait_ns;
	__u64 held_ns;
	__u64 rt_ns;
	__u32 tid;
	__s32 prio;
	__u32 holder_tid;
	__s32 holder_prio;
	__u32 rt_tid;
	__s32 rt_prio;
	char comm[16];
	char holder_comm[16];
	char rt_comm[16];
};

#endif
