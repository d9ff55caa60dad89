// SPDX-License-Identifier: GPL-2.0
/* iosleuth record --light: per-request state in the kernel, histograms of
 * each stage by device and operation, and only the slow requests sent to
 * user space. Attached as BTF-typed raw tracepoints (tp_btf), the cheapest
 * hook this kernel offers: fields are read with plain loads.
 *
 * Build (bpf/build.sh): clang-14 -target bpf -O2 -g, then strip DWARF and
 * keep BTF. The object is committed; the test command rebuilds and
 * compares it. */
#include <linux/bpf.h>
#include "iosl_types.h"
#include "light.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

/* Counters are per CPU, and each program adds to its own fields: a
 * program that interrupts another on the same CPU never adds to the same
 * word, so plain additions lose nothing (the in-flight count, shared by
 * CPUs, is atomic). */

/* Slow requests sent per second per CPU at most (0: no cap). */
const volatile __u32 cap_per_cpu = 0;

struct rq_state {
	/* The request this entry holds (0: free). */
	__u64 rq;
	__u64 issue_ns;
	__u64 cgroup_id;
	__u32 pid;
	__u32 tid;
	__u32 issue_cpu;
	__u32 depth;
	char comm[16];
};

struct rate {
	__u64 window;
	__u64 used;
};

/* Device -> slot, direct-mapped by a hash of the dev_t (DEV_INDEX, which
 * src/capture/light mirrors): each entry is (slot << 32) | dev, written
 * by user space. An array lookup is inlined; a hash map's is a call. */
#define NDEVIDX 4096
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NDEVIDX);
	__type(key, __u32);
	__type(value, __u64);
} dev_slot SEC(".maps");

/* Requests in flight, direct-mapped by a hash of the request's address:
 * an array lookup is inlined by the verifier, with no helper call and no
 * lock, where a hash map's update and delete cost ~100 ns each. Two
 * requests on one entry is a collision: the second is counted in
 * state_full and left out of the latencies. */
#define NRQ 16384
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NRQ);
	__type(key, __u32);
	__type(value, struct rq_state);
} rqs SEC(".maps");

/* The request's address as a number: the verifier refuses arithmetic on
 * a typed pointer, so it is read from the program's context as plain bytes. */
static __always_inline __u64 rq_addr(unsigned long long *ctx)
{
	__u64 a = 0;
	bpf_probe_read_kernel(&a, sizeof(a), ctx);
	return a;
}

static __always_inline __u32 rq_index(__u64 rq)
{
	/* Requests are cache-line aligned slab objects: mix the high bits. */
	__u64 h = rq * 0x9E3779B97F4A7C15ULL;
	return (__u32)(h >> 50) & (NRQ - 1);
}

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NSLOT * NOP * NSTAGE);
	__type(key, __u32);
	__type(value, struct hist);
} latency SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NSLOT * NOP);
	__type(key, __u32);
	__type(value, struct size_hist);
} sizes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NSLOT);
	__type(key, __u32);
	__type(value, struct depth_hist);
} depths SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NSLOT);
	__type(key, __u32);
	__type(value, struct counters);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NSLOT);
	__type(key, __u32);
	__type(value, __s64);
} inflight SEC(".maps");

/* Per device and operation, the latency (ns) from which a request is
 * slow; written by user space (a fixed --slow, or the running p99). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NSLOT * NOP);
	__type(key, __u32);
	__type(value, __u64);
} threshold SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rate);
} rate SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} records SEC(".maps");

static __always_inline __u32 log2_u64(__u64 v)
{
	__u32 r, s;
	r = (v > 0xFFFFFFFFULL) << 5; v >>= r;
	s = (v > 0xFFFF) << 4; v >>= s; r |= s;
	s = (v > 0xFF) << 3; v >>= s; r |= s;
	s = (v > 0xF) << 2; v >>= s; r |= s;
	s = (v > 0x3) << 1; v >>= s; r |= s;
	return r | (__u32)(v >> 1);
}

/* The bucket of `v` ns; src/analyze/histogram.rs reads them back. */
static __always_inline __u32 bucket(__u64 v)
{
	if (v < (2 << SUB_BITS))
		return v;
	if (v >= (1ULL << 41))
		v = (1ULL << 41) - 1;
	__u32 e = log2_u64(v) - SUB_BITS;
	return e * (1 << SUB_BITS) + (__u32)(v >> e);
}

/* The whole disk, as the block tracepoints name it (rq->q->disk). */
static __always_inline __u32 rq_dev(struct request___iosl *rq)
{
	struct gendisk___iosl *disk = rq->q->disk;
	if (!disk)
		return 0;
	__u32 major = disk->major, minor = disk->first_minor;
	return (major << 20) | minor;
}

static __always_inline __u32 slot_of(__u32 dev)
{
	__u32 idx = (dev * 0x9E3779B1U) >> 20;
	__u64 *e = bpf_map_lookup_elem(&dev_slot, &idx);
	if (!e || (__u32)*e != dev)
		return 0;
	__u32 slot = *e >> 32;
	return slot < NSLOT ? slot : 0;
}

static __always_inline __u32 op_of(__u32 cmd_flags)
{
	__u32 op = cmd_flags & 0xff;
	return op <= 2 ? op : 3;
}

static __always_inline struct counters *counters_of(__u32 slot)
{
	return bpf_map_lookup_elem(&counters, &slot);
}

static __always_inline void add_latency(__u32 slot, __u32 op, __u32 stage, __u64 v)
{
	__u32 key = (slot * NOP + op) * NSTAGE + stage;
	struct hist *h = bpf_map_lookup_elem(&latency, &key);
	if (!h)
		return;
	__u32 b = bucket(v);
	/* Keep the bound check on the register that indexes, or the
	 * verifier sees an unbounded access. */
	asm volatile("" : "+r"(b));
	if (b >= NBUCKET)
		return;
	h->n++;
	h->sum += v;
	h->b[b]++;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(iosl_issue, struct request___iosl *rq)
{
	__u64 addr = rq_addr(ctx);
	__u32 idx = rq_index(addr);
	__u32 dev = rq_dev(rq);
	__u32 slot = slot_of(dev);
	struct rq_state *st = bpf_map_lookup_elem(&rqs, &idx);
	if (!st)
		return 0;
	if (st->rq && st->rq != addr) {
		struct counters *c = counters_of(slot);
		if (c)
			c->state_full += 1;
		return 0;
	}
	__s64 *inf = bpf_map_lookup_elem(&inflight, &slot);
	__u64 depth = 1;
	if (inf)
		depth = __sync_fetch_and_add(inf, 1) + 1;
	struct depth_hist *d = bpf_map_lookup_elem(&depths, &slot);
	if (d)
		d->b[depth < NDEPTH ? depth : NDEPTH - 1]++;
	__u64 id = bpf_get_current_pid_tgid();
	st->rq = addr;
	st->issue_ns = bpf_ktime_get_ns();
	st->cgroup_id = bpf_get_current_cgroup_id();
	st->pid = id >> 32;
	st->tid = (__u32)id;
	st->issue_cpu = bpf_get_smp_processor_id();
	st->depth = depth;
	bpf_get_current_comm(st->comm, sizeof(st->comm));
	return 0;
}

/* Whether this CPU may send one more slow request this second. */
static __always_inline int within_cap(__u64 now)
{
	if (!cap_per_cpu)
		return 1;
	__u32 zero = 0;
	struct rate *r = bpf_map_lookup_elem(&rate, &zero);
	if (!r)
		return 0;
	__u64 window = now / 1000000000ULL;
	if (r->window != window) {
		r->window = window;
		r->used = 0;
	}
	if (r->used >= cap_per_cpu)
		return 0;
	r->used++;
	return 1;
}

static __always_inline void send_slow(struct request___iosl *rq, struct rq_state *st,
				      struct counters *c, __u32 dev, __u64 alloc,
				      __u64 now, int error)
{
	if (!within_cap(now)) {
		if (c)
			c->slow_capped += 1;
		return;
	}
	struct slow_rec *r = bpf_ringbuf_reserve(&records, sizeof(*r), 0);
	if (!r) {
		if (c)
			c->ring_full += 1;
		return;
	}
	r->kind = REC_SLOW;
	r->len = sizeof(*r);
	r->dev = dev;
	r->alloc_ns = alloc;
	r->issue_ns = st->issue_ns;
	r->complete_ns = now;
	r->sector = rq->__sector;
	r->cgroup_id = st->cgroup_id;
	r->bytes = rq->__data_len;
	r->cmd_flags = rq->cmd_flags;
	r->pid = st->pid;
	r->tid = st->tid;
	r->issue_cpu = st->issue_cpu;
	r->complete_cpu = bpf_get_smp_processor_id();
	r->depth = st->depth;
	r->error = error;
	__builtin_memcpy(r->comm, st->comm, sizeof(r->comm));
	bpf_ringbuf_submit(r, 0);
	if (c)
		c->slow_sent += 1;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(iosl_complete, struct request___iosl *rq, int error, unsigned int nr_bytes)
{
	__u64 addr = rq_addr(ctx);
	__u32 idx = rq_index(addr);
	__u64 now = bpf_ktime_get_ns();
	__u32 dev = rq_dev(rq);
	__u32 slot = slot_of(dev);
	__u32 flags = rq->cmd_flags;
	__u32 op = op_of(flags);
	struct counters *c = counters_of(slot);
	if (c)
		c->bytes[op] += nr_bytes;
	/* A request completed in parts: only its last part ends it. */
	if (nr_bytes < rq->__data_len) {
		if (c)
			c->partial += 1;
		return 0;
	}
	if (c) {
		c->ios[op] += 1;
		if (error)
			c->errors += 1;
	}
	struct rq_state *st = bpf_map_lookup_elem(&rqs, &idx);
	if (!st || st->rq != addr) {
		if (c)
			c->no_state += 1;
		return 0;
	}
	__s64 *inf = bpf_map_lookup_elem(&inflight, &slot);
	if (inf)
		__sync_fetch_and_add(inf, -1);
	__u64 alloc = rq->start_time_ns;
	__u64 d2c = now - st->issue_ns;
	__u64 a2c = alloc && alloc <= st->issue_ns ? now - alloc : d2c;
	add_latency(slot, op, 1, d2c);
	add_latency(slot, op, 2, a2c);
	add_latency(slot, op, 0, a2c - d2c);
	__u32 skey = slot * NOP + op;
	struct size_hist *s = bpf_map_lookup_elem(&sizes, &skey);
	if (s) {
		__u32 b = log2_u64(rq->__data_len | 1);
		s->b[b < NSIZE ? b : NSIZE - 1]++;
	}
	__u64 *th = bpf_map_lookup_elem(&threshold, &skey);
	if (th && a2c >= *th)
		send_slow(rq, st, c, dev, alloc, now, error);
	st->rq = 0;
	return 0;
}

SEC("tp_btf/block_rq_requeue")
int BPF_PROG(iosl_requeue, struct request___iosl *rq)
{
	__u64 addr = rq_addr(ctx);
	__u32 idx = rq_index(addr);
	__u32 slot = slot_of(rq_dev(rq));
	struct counters *c = counters_of(slot);
	if (c)
		c->requeues += 1;
	struct rq_state *st = bpf_map_lookup_elem(&rqs, &idx);
	if (st && st->rq == addr) {
		st->rq = 0;
		__s64 *inf = bpf_map_lookup_elem(&inflight, &slot);
		if (inf)
			__sync_fetch_and_add(inf, -1);
	}
	return 0;
}

static __always_inline __u32 bio_slot(struct bio___iosl *bio)
{
	return slot_of(bio->bi_bdev->bd_dev);
}

SEC("tp_btf/block_bio_backmerge")
int BPF_PROG(iosl_backmerge, struct bio___iosl *bio)
{
	struct counters *c = counters_of(bio_slot(bio));
	if (c)
		c->back_merges += 1;
	return 0;
}

SEC("tp_btf/block_bio_frontmerge")
int BPF_PROG(iosl_frontmerge, struct bio___iosl *bio)
{
	struct counters *c = counters_of(bio_slot(bio));
	if (c)
		c->front_merges += 1;
	return 0;
}

SEC("tp_btf/block_rq_merge")
int BPF_PROG(iosl_rqmerge, struct request___iosl *rq)
{
	struct counters *c = counters_of(slot_of(rq_dev(rq)));
	if (c)
		c->rq_merges += 1;
	return 0;
}

SEC("tp_btf/block_split")
int BPF_PROG(iosl_split, struct bio___iosl *bio, unsigned int new_sector)
{
	struct counters *c = counters_of(bio_slot(bio));
	if (c)
		c->splits += 1;
	return 0;
}

/* The floor: the same hooks with empty programs (scripts/bench-overhead). */
SEC("tp_btf/block_rq_issue")
int BPF_PROG(iosl_nop_issue) { return 0; }
SEC("tp_btf/block_rq_complete")
int BPF_PROG(iosl_nop_compl) { return 0; }
