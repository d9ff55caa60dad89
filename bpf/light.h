/* What light.bpf.c shares with user space (src/capture/light/maps.rs
 * mirrors it; a test checks the sizes): map keys, values and the slow
 * request record. Little-endian, natural alignment, no padding. */
#ifndef IOSL_LIGHT_H
#define IOSL_LIGHT_H

#include <linux/types.h>

/* Devices traced: slot 0 holds every device user space did not name. */
#define NSLOT 16
/* Operations: read, write, flush, other (discard, write zeroes, passthrough). */
#define NOP 4
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
};

#define REC_SLOW 1

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

#endif
