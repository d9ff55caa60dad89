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
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

/* The kernel's operations (enum req_op, include/linux/blk_types.h). */
#define REQ_OP_MASK 0xff
#define REQ_OP_WRITE 1
#define REQ_OP_FLUSH 2
#define REQ_OP_DISCARD 3
#define REQ_OP_SECURE_ERASE 5
#define REQ_OP_DRV_IN 34

/* Counters are per CPU, and each program adds to its own fields: a
 * program that interrupts another on the same CPU never adds to the same
 * word, so plain additions lose nothing (the in-flight count, shared by
 * CPUs, is atomic). */

/* Slow requests sent per second per CPU at most (0: no cap). */
const volatile __u32 cap_per_cpu = 0;
/* Runqueue waits sent from this long (ns). */
const volatile __u64 wait_min_ns = 5000000;
/* CPUs whose counters the stamps accounting sums for a depth, and which
 * issues it does it for (those whose sector and allocation stamp hash to
 * 0 under depth_mask): a sum reads every CPU's counters, lines the other
 * CPUs write, so only a sample of the issues pays for one. By hash, not
 * every Nth issue: a batch of requests submitted together would be
 * sampled at the same places in every batch, its depths biased; the
 * stamp in it, so that a block written again and again is not always
 * (or never) in the sample. */
const volatile __u32 nr_cpus = 1;
const volatile __u32 depth_mask = 0;

struct rq_state {
	/* The request this entry holds (0: free). */
	__u64 rq;
	__u64 issue_ns;
	/* The issuing task: its name and cgroup are read only when the
	 * request turns out slow (two helper calls fewer per request). */
	__u64 task;
	__u32 pid;
	__u32 tid;
	__u32 issue_cpu;
	__u32 depth;
};

struct rate {
	__u64 window;
	__u64 used;
};

/* Device -> slot, direct-mapped by a hash of the dev_t (light.h's
 * DEV_HASH_*, which src/capture/light/disks.rs uses too): each entry is
 * (slot << 32) | dev, written by user space. An array lookup is inlined;
 * a hash map's is a call. */
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

/* Per device slot: requests the programs count in flight that are not.
 * The kernel now and then traces a completion without running the
 * programs (and counts no miss): its request would stay in their count,
 * and every later depth read one more. User space re-anchors this when it
 * sees the device idle (src/capture/light/inflight.rs); every depth is
 * read less it. Written only by user space. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NSLOT);
	__type(key, __u32);
	__type(value, __s64);
} inflight_bias SEC(".maps");

static __always_inline __s64 bias_of(__u32 slot)
{
	__s64 *b = bpf_map_lookup_elem(&inflight_bias, &slot);
	return b ? *b : 0;
}

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

/* Per (cgroup, device, operation), allocated as cgroups do I/O: a machine
 * with few cgroups pays for few entries, on every CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, NCGROUP);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct cg_key);
	__type(value, struct cg_stats);
} cgroups SEC(".maps");

/* Each CPU's direct-mapped table of the same figures, tried first: an
 * array lookup is inlined, where a hash map's costs a hashed key and a
 * helper call on every completion. A key whose entry another key holds
 * goes to the hash map; user space adds the two. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NCGCACHE);
	__type(key, __u32);
	__type(value, struct cg_stats);
} cg_cache SEC(".maps");

/* A zeroed value to insert from: a cg_stats is too large for the stack
 * beside the programs' own. Never written. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cg_stats);
} cg_zero SEC(".maps");

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
	__u32 idx = (dev * (__u32)DEV_HASH_MUL) >> DEV_HASH_SHIFT;
	__u64 *e = bpf_map_lookup_elem(&dev_slot, &idx);
	if (!e || (__u32)*e != dev)
		return 0;
	__u32 slot = *e >> 32;
	return slot < NSLOT ? slot : 0;
}

/* The operation's group as diskstats counts it (op_stat_group): discards
 * and secure erases are discards, the flush machinery's flushes are
 * flushes, every other operation a read or a write by its lowest bit
 * (op_is_write: write zeroes and zone appends are writes). src/model/light.rs
 * op_group mirrors it. */
static __always_inline __u32 op_of(__u32 cmd_flags)
{
	__u32 op = cmd_flags & REQ_OP_MASK;
	if (op == REQ_OP_FLUSH)
		return OP_FLUSH;
	if (op == REQ_OP_DISCARD || op == REQ_OP_SECURE_ERASE)
		return OP_DISCARD;
	return op & 1;
}

/* Passthrough commands (REQ_OP_DRV_*) are not I/O diskstats counts. */
static __always_inline int is_passthrough(struct request___iosl *rq)
{
	return (rq->cmd_flags & REQ_OP_MASK) >= REQ_OP_DRV_IN;
}

/* RQF_FLUSH_SEQ, the flush machinery's mark on a request in a flush
 * sequence: a bit of enum rqf_flags where the kernel has that enum, bit 4
 * where it is a #define. */
static __always_inline __u32 rqf_flush_seq(void)
{
	if (bpf_core_enum_value_exists(enum rqf_flags___iosl, __RQF_FLUSH_SEQ___iosl))
		return 1U << bpf_core_enum_value(enum rqf_flags___iosl, __RQF_FLUSH_SEQ___iosl);
	return 1U << 4;
}

static __always_inline struct counters *counters_of(__u32 slot)
{
	return bpf_map_lookup_elem(&counters, &slot);
}

static __always_inline void hist_add(struct hist *h, __u64 v)
{
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

static __always_inline void add_latency(__u32 slot, __u32 op, __u32 stage, __u64 v)
{
	__u32 key = (slot * NOP + op) * NSTAGE + stage;
	hist_add(bpf_map_lookup_elem(&latency, &key), v);
}

/* One more request issued at `depth` on the slot's device. */
static __always_inline void add_depth(__u32 slot, __u64 depth)
{
	struct depth_hist *d = bpf_map_lookup_elem(&depths, &slot);
	if (d)
		d->b[depth < NDEPTH ? depth : NDEPTH - 1]++;
}

/* Counts a request that starts where the previous one issued on this CPU
 * to its device ended. */
static __always_inline void count_sequential(struct counters *c, struct request___iosl *rq)
{
	__u64 sector = rq->__sector;
	if (sector == c->last_end)
		c->seq_requests += 1;
	c->last_end = sector + (rq->__data_len >> 9);
}

/* The per-request state of a request issued now by the current task. */
static __always_inline void track(struct rq_state *st, __u64 addr, __u64 now, __u32 depth)
{
	__u64 id = bpf_get_current_pid_tgid();
	st->rq = addr;
	st->issue_ns = now;
	st->task = bpf_get_current_task();
	st->pid = id >> 32;
	st->tid = (__u32)id;
	st->issue_cpu = bpf_get_smp_processor_id();
	st->depth = depth;
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
	__s64 depth = 1;
	if (inf)
		depth = __sync_fetch_and_add(inf, 1) + 1 - bias_of(slot);
	if (depth < 1)
		depth = 1;
	add_depth(slot, depth);
	struct counters *c = counters_of(slot);
	if (c)
		count_sequential(c, rq);
	track(st, addr, bpf_ktime_get_ns(), depth);
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

/* The cgroup id of a blkcg (0: none): four dependent loads from
 * structures the I/O path does not touch, so often cache misses. */
static __always_inline __u64 blkcg_id(struct blkcg___iosl *blkcg)
{
	if (!blkcg)
		return 0;
	struct cgroup___iosl *cg = blkcg->css.cgroup;
	if (!cg)
		return 0;
	struct kernfs_node___iosl *kn = cg->kn;
	return kn ? kn->id : 0;
}

/* Each CPU's last cgroup ids by blkg (a cgroup's association with a
 * queue, which every bio carries), a few entries searched in turn: a
 * machine has few cgroups doing I/O at once. An entry holds while the
 * blkg still names the same blkcg: a blkg freed and its memory given to
 * another cgroup's does not match. */
#define NBLKG 4
struct blkg_memo {
	struct blkcg_gq___iosl *blkg[NBLKG];
	struct blkcg___iosl *blkcg[NBLKG];
	__u64 id[NBLKG];
	__u32 next;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct blkg_memo);
} blkg_ids SEC(".maps");

/* The cgroup id the request's first bio is charged to (0: none). */
static __always_inline __u64 bio_cgroup(struct request___iosl *rq)
{
	struct bio___iosl *bio = rq->bio;
	if (!bio)
		return 0;
	struct blkcg_gq___iosl *blkg = bio->bi_blkg;
	if (!blkg)
		return 0;
	struct blkcg___iosl *blkcg = blkg->blkcg;
	__u32 zero = 0;
	struct blkg_memo *m = bpf_map_lookup_elem(&blkg_ids, &zero);
	if (!m)
		return blkcg_id(blkcg);
	for (__u32 k = 0; k < NBLKG; k++)
		if (m->blkg[k] == blkg && m->blkcg[k] == blkcg)
			return m->id[k];
	__u64 id = blkcg_id(blkcg);
	__u32 k = m->next & (NBLKG - 1);
	m->blkg[k] = blkg;
	m->blkcg[k] = blkcg;
	m->id[k] = id;
	m->next = k + 1;
	return id;
}

/* The `le` bucket of a total time of `ns`: how many of Prometheus'
 * bounds (src/report/prometheus.rs LE_SECONDS, in ns) it exceeds. */
static __always_inline __u32 le_bucket(__u64 ns)
{
	__u32 b = 0;
	b += ns > 10000ULL;
	b += ns > 25000ULL;
	b += ns > 50000ULL;
	b += ns > 100000ULL;
	b += ns > 250000ULL;
	b += ns > 500000ULL;
	b += ns > 1000000ULL;
	b += ns > 2500000ULL;
	b += ns > 5000000ULL;
	b += ns > 10000000ULL;
	b += ns > 25000000ULL;
	b += ns > 50000000ULL;
	b += ns > 100000000ULL;
	b += ns > 250000000ULL;
	b += ns > 500000000ULL;
	b += ns > 1000000000ULL;
	b += ns > 2500000000ULL;
	b += ns > 5000000000ULL;
	b += ns > 10000000000ULL;
	return b;
}

/* The figures of the request's cgroup on its device for its operation,
 * made on its first request (NULL: no room left, counted in cgroup_full). */
static __always_inline struct cg_stats *cgroup_stats(struct request___iosl *rq,
						     struct counters *c, __u32 slot, __u32 op)
{
	struct cg_key k = { .id = bio_cgroup(rq), .slot = slot, .op = op };
	__u32 idx = (__u32)((k.id * 0x9E3779B97F4A7C15ULL + slot * NOP + op) >> 40) & (NCGCACHE - 1);
	struct cg_stats *s = bpf_map_lookup_elem(&cg_cache, &idx);
	if (s) {
		if (s->op_used == op + 1 && s->id == k.id && s->slot == slot)
			return s;
		if (!s->op_used) {
			s->id = k.id;
			s->slot = slot;
			s->op_used = op + 1;
			return s;
		}
	}
	s = bpf_map_lookup_elem(&cgroups, &k);
	if (s)
		return s;
	__u32 zero = 0;
	struct cg_stats *z = bpf_map_lookup_elem(&cg_zero, &zero);
	if (z)
		bpf_map_update_elem(&cgroups, &k, z, BPF_NOEXIST);
	s = bpf_map_lookup_elem(&cgroups, &k);
	if (!s && c)
		c->cgroup_full += 1;
	return s;
}

/* `st->task` 0: the issuer is not known (stamps accounting keeps no
 * per-request state); its pid, tid and name are sent as 0 and empty. */
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
	/* The cgroup the request is charged to, as the per-cgroup figures. */
	r->cgroup_id = bio_cgroup(rq);
	/* The issuer may have exited since: then its name reads empty. */
	struct task_struct___iosl *t = (void *)st->task;
	r->bytes = rq->__data_len;
	r->cmd_flags = rq->cmd_flags;
	r->pid = st->pid;
	r->tid = st->tid;
	r->issue_cpu = st->issue_cpu;
	r->complete_cpu = bpf_get_smp_processor_id();
	r->depth = st->depth;
	r->error = error;
	r->comm[0] = 0;
	if (t && bpf_probe_read_kernel_str(r->comm, sizeof(r->comm), t->comm) < 0)
		r->comm[0] = 0;
	bpf_ringbuf_submit(r, 0);
	if (c)
		c->slow_sent += 1;
}

/* A request's total time into its cgroup's figures. */
static __always_inline void charge_time(struct cg_stats *cg, __u64 a2c)
{
	if (!cg)
		return;
	__u32 b = le_bucket(a2c);
	cg->time_ns += a2c;
	if (b < NLE)
		cg->le[b]++;
}

/* Counts a completion as diskstats does: the bytes of every part, the
 * request once, when it ends. Returns whether its stages are timed here:
 * a driver started it, and this is not the second end of its flush
 * sequence. One never started has only a total time, the one diskstats
 * keeps for it. */
static __always_inline int count_completion(struct request___iosl *rq, struct counters *c,
					    struct cg_stats *cg, __u32 slot, __u32 op,
					    unsigned int nr_bytes, int error, __u64 now)
{
	if (c)
		c->bytes[op] += nr_bytes;
	if (cg)
		cg->bytes += nr_bytes;
	/* A request completed in parts: only its last part ends it. */
	if (nr_bytes < rq->__data_len) {
		if (c)
			c->partial += 1;
		return 0;
	}
	/* Counted as diskstats counts it: once, when it ends, and not while
	 * it is in a flush sequence (blk_account_io_done skips RQF_FLUSH_SEQ).
	 * A write sent with PREFLUSH or FUA to a device with a volatile cache
	 * goes through the flush machinery (block/blk-flush.c), which ends it
	 * twice: when its data is written (mq_flush_data_end_io; the flag
	 * set: not counted here) and, with no bytes left, when its sequence
	 * ends (blk_flush_complete_seq at REQ_FSEQ_DONE, after
	 * blk_flush_restore_request cleared the flag: counted here). The
	 * machinery's own flush request carries the flag too, and is counted
	 * when it ends (flush_end_io, blk_account_io_flush). */
	if (op == OP_FLUSH || !(rq->rq_flags & rqf_flush_seq())) {
		if (cg)
			cg->ios += 1;
		if (c) {
			c->ios[op] += 1;
			if (error)
				c->errors += 1;
		}
	}
	if (rq->state != MQ_RQ_IDLE___iosl)
		/* Its device time ends at the data's completion, where btt and
		 * the full recorder time it: the sequence's end, a started
		 * write with no bytes left, is counted but not timed again. */
		return !((rq->cmd_flags & REQ_OP_MASK) == REQ_OP_WRITE && rq->__data_len == 0);
	/* Never started, as an fsync's empty write: the flush machinery ends
	 * it when its own flush request (REQ_OP_FLUSH) completes. */
	__u64 alloc = rq->start_time_ns;
	if (alloc && alloc <= now) {
		charge_time(cg, now - alloc);
		add_latency(slot, op, 2, now - alloc);
	}
	return 0;
}

/* A completed request's stages (issued at `issue`) into the histograms,
 * its size, and to user space when slow. */
static __always_inline void account(struct request___iosl *rq, struct rq_state *st,
				    struct counters *c, struct cg_stats *cg, __u32 dev,
				    __u32 slot, __u32 op, __u64 issue, __u64 now, int error)
{
	__u64 alloc = rq->start_time_ns;
	__u64 d2c = now > issue ? now - issue : 0;
	__u64 a2c = alloc && alloc <= issue ? now - alloc : d2c;
	charge_time(cg, a2c);
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
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(iosl_complete, struct request___iosl *rq, int error, unsigned int nr_bytes)
{
	__u64 addr = rq_addr(ctx);
	__u32 idx = rq_index(addr);
	__u64 now = bpf_ktime_get_ns();
	__u32 dev = rq_dev(rq);
	__u32 slot = slot_of(dev);
	if (is_passthrough(rq))
		return 0;
	__u32 op = op_of(rq->cmd_flags);
	struct counters *c = counters_of(slot);
	struct cg_stats *cg = cgroup_stats(rq, c, slot, op);
	if (!count_completion(rq, c, cg, slot, op, nr_bytes, error, now))
		return 0;
	struct rq_state *st = bpf_map_lookup_elem(&rqs, &idx);
	if (!st || st->rq != addr) {
		if (c)
			c->no_state += 1;
		return 0;
	}
	__s64 *inf = bpf_map_lookup_elem(&inflight, &slot);
	if (inf)
		__sync_fetch_and_add(inf, -1);
	account(rq, st, c, cg, dev, slot, op, st->issue_ns, now, error);
	st->rq = 0;
	return 0;
}

/* The stamps accounting (the default): where the queue stamps its
 * requests (start_time_ns at allocation, io_start_time_ns at issue: it
 * keeps block stats, RQF_STATS), their stages are read from the request
 * at completion. No per-request state, no shared counter and no clock
 * read at issue: the issue program keeps per-CPU counts only. A device
 * whose requests come without stamps (its completions say so) gets the
 * per-request state above instead, request by request. Queue depth is
 * sampled by user space (the kernel's own in-flight count). */

/* Per device slot: 1 while its completions come with stamps. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NSLOT);
	__type(key, __u32);
	__type(value, __u32);
} stamped SEC(".maps");

/* A state entry older than this belongs to a request issued before its
 * device turned out to stamp (then its completion did not free it). */
#define STALE_NS 30000000000ULL

/* Per device slot: when the programs first saw one of its requests. A
 * request counts toward the depth when its allocation stamp is from then
 * on: it was issued after, so the issue program counted it. The same test
 * on the same stamp at its end: the two ends agree, whatever was in
 * flight before the programs were attached. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NSLOT);
	__type(key, __u32);
	__type(value, __u64);
} armed SEC(".maps");

/* Requests in flight on the slot's device: the sum over CPUs of the
 * requests counted at issue minus those counted at their end. */
static __always_inline __u64 in_flight(__u32 slot)
{
	__s64 sum = 0;
	__u32 n = nr_cpus < MAX_DEPTH_CPUS ? nr_cpus : MAX_DEPTH_CPUS;
	for (__u32 cpu = 0; cpu < n; cpu++) {
		struct counters *o = bpf_map_lookup_percpu_elem(&counters, &slot, cpu);
		if (o)
			sum += (__s64)(o->issued - o->retired);
	}
	sum -= bias_of(slot);
	return sum < 1 ? 1 : sum;
}

/* Whether the depth of a request at `sector` allocated at `alloc` (0:
 * not stamped) is read. */
static __always_inline int depth_sampled(__u64 sector, __u64 alloc)
{
	__u32 hash = (__u32)(((sector ^ alloc) * 0x9E3779B97F4A7C15ULL) >> 40);
	return !(hash & depth_mask);
}

/* Whether a request allocated at `alloc` (0: the queue does not stamp,
 * then `tracked`: it has per-request state) counts toward the depth. */
static __always_inline int counted(__u32 slot, __u64 alloc, int tracked)
{
	__u64 *since = bpf_map_lookup_elem(&armed, &slot);
	if (!since || !alloc)
		return tracked;
	if (!*since)
		__sync_val_compare_and_swap(since, 0, bpf_ktime_get_ns());
	return alloc >= *since;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(iosl_issue_st, struct request___iosl *rq)
{
	__u32 slot = slot_of(rq_dev(rq));
	struct counters *c = counters_of(slot);
	if (!c)
		return 0;
	count_sequential(c, rq);
	__u64 alloc = rq->start_time_ns;
	__u32 depth = 0;
	if (alloc && counted(slot, alloc, 0)) {
		c->issued += 1;
		if (depth_sampled(rq->__sector, alloc)) {
			depth = in_flight(slot);
			add_depth(slot, depth);
		}
	}
	__u32 *stamps = bpf_map_lookup_elem(&stamped, &slot);
	if (stamps && *stamps)
		return 0;
	__u64 addr = rq_addr(ctx);
	__u32 idx = rq_index(addr);
	struct rq_state *st = bpf_map_lookup_elem(&rqs, &idx);
	if (!st)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	if (st->rq && st->rq != addr && now - st->issue_ns < STALE_NS) {
		c->state_full += 1;
		return 0;
	}
	/* No allocation stamp: tracked requests count toward the depth,
	 * sampled as the others (a request not sampled has depth 0: not
	 * known). */
	if (!alloc) {
		c->issued += 1;
		if (depth_sampled(rq->__sector, 0)) {
			depth = in_flight(slot);
			add_depth(slot, depth);
		}
	}
	track(st, addr, now, depth);
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(iosl_complete_st, struct request___iosl *rq, int error, unsigned int nr_bytes)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 dev = rq_dev(rq);
	__u32 slot = slot_of(dev);
	if (is_passthrough(rq))
		return 0;
	__u32 op = op_of(rq->cmd_flags);
	struct counters *c = counters_of(slot);
	if (!c)
		return 0;
	struct cg_stats *cg = cgroup_stats(rq, c, slot, op);
	if (!count_completion(rq, c, cg, slot, op, nr_bytes, error, now))
		return 0;
	__u64 issue = rq->io_start_time_ns;
	__u32 *stamps = bpf_map_lookup_elem(&stamped, &slot);
	struct rq_state *st = 0;
	struct rq_state who = {};
	if (issue) {
		if (stamps && !*stamps)
			*stamps = 1;
		c->by_stamps += 1;
		who.issue_ns = issue;
		who.issue_cpu = bpf_get_smp_processor_id();
		st = &who;
	} else {
		if (stamps && *stamps)
			*stamps = 0;
		__u64 addr = rq_addr(ctx);
		__u32 idx = rq_index(addr);
		st = bpf_map_lookup_elem(&rqs, &idx);
		if (!st || st->rq != addr) {
			c->no_state += 1;
			return 0;
		}
		issue = st->issue_ns;
	}
	if (counted(slot, rq->start_time_ns, st != &who))
		c->retired += 1;
	account(rq, st, c, cg, dev, slot, op, issue, now, error);
	if (st != &who)
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
	if (!c)
		return 0;
	c->requeues += 1;
	struct rq_state *st = bpf_map_lookup_elem(&rqs, &idx);
	int tracked = st && st->rq == addr;
	if (tracked) {
		st->rq = 0;
		__s64 *inf = bpf_map_lookup_elem(&inflight, &slot);
		if (inf)
			__sync_fetch_and_add(inf, -1);
	}
	/* Issued again later: it ends here for the stamps' depth. */
	if (counted(slot, rq->start_time_ns, tracked))
		c->retired += 1;
	return 0;
}

/* Bios held back by blk-throttle are submitted again, later, by its
 * dispatch work (blk_throtl_dispatch_work_fn on the kthrotld workqueue):
 * a bio queued by the worker thread running that work is one the limit
 * held. The function's address comes from /proc/kallsyms (0: none here,
 * and the three programs are not attached). Per CPU, the thread running
 * the dispatch work there (0: none); a worker preempted by another thread
 * keeps its mark, since the mark names it. */
const volatile __u64 throtl_dispatch_fn = 0;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} dispatching SEC(".maps");

SEC("tp_btf/workqueue_execute_start")
int BPF_PROG(iosl_wq_start, struct work_struct___iosl *work)
{
	void *fn = 0;
	bpf_probe_read_kernel(&fn, sizeof(fn), &work->func);
	if ((__u64)fn != throtl_dispatch_fn)
		return 0;
	__u32 zero = 0;
	__u32 *tid = bpf_map_lookup_elem(&dispatching, &zero);
	if (tid)
		*tid = (__u32)bpf_get_current_pid_tgid();
	return 0;
}

/* The work may be freed by its end: only the thread is compared. */
SEC("tp_btf/workqueue_execute_end")
int BPF_PROG(iosl_wq_end)
{
	__u32 zero = 0;
	__u32 *tid = bpf_map_lookup_elem(&dispatching, &zero);
	if (tid && *tid && *tid == (__u32)bpf_get_current_pid_tgid())
		*tid = 0;
	return 0;
}

static __always_inline __u32 bio_slot(struct bio___iosl *bio);

SEC("tp_btf/block_bio_queue")
int BPF_PROG(iosl_bio_queue, struct bio___iosl *bio)
{
	__u32 zero = 0;
	__u32 *tid = bpf_map_lookup_elem(&dispatching, &zero);
	if (!tid || !*tid || *tid != (__u32)bpf_get_current_pid_tgid())
		return 0;
	struct counters *c = counters_of(bio_slot(bio));
	if (c) {
		c->throttled += 1;
		c->throttled_bytes += bio->bi_iter.bi_size;
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

/* io_uring requests: each one's submission (io_uring_submit_req, in the
 * submitting task or the SQPOLL thread) to its completion queue entry
 * (io_uring_complete), by what it asks; the requests handed to io-wq
 * workers counted. Requests are keyed by their address, as the kernel's
 * own tracepoints key them, in a direct-mapped table like the block
 * requests'. */
struct uring_state {
	__u64 req;
	__u64 submit_ns;
	__u32 group;
	__u32 pad;
	/* Its ring and user_data: all an overflowed completion names. */
	__u64 ring;
	__u64 user_data;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NRQ);
	__type(key, __u32);
	__type(value, struct uring_state);
} uring_reqs SEC(".maps");

/* A completion that finds the completion queue full is traced as
 * io_uring_cqe_overflow, with only the ring and the user_data: the
 * requests in uring_reqs (their index + 1; 0: none) by ring and user_data,
 * in buckets of URING_WAYS so that requests in flight seldom push each
 * other out. A completion takes its request out of its bucket. */
#define URING_WAYS 4
#define URING_BUCKETS (NRQ / URING_WAYS)

struct uring_bucket {
	__u32 idx[URING_WAYS];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, URING_BUCKETS);
	__type(key, __u32);
	__type(value, struct uring_bucket);
} uring_by_data SEC(".maps");

static __always_inline struct uring_bucket *uring_bucket_of(__u64 ring, __u64 user_data)
{
	__u64 h = (ring ^ (user_data * 0x9E3779B97F4A7C15ULL)) * 0x9E3779B97F4A7C15ULL;
	__u32 j = (__u32)(h >> 50) & (URING_BUCKETS - 1);
	return bpf_map_lookup_elem(&uring_by_data, &j);
}

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NUOP);
	__type(key, __u32);
	__type(value, struct uring_stats);
} uring SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NUOP);
	__type(key, __u32);
	__type(value, struct hist);
} uring_latency SEC(".maps");

/* The kernel's opcodes (enum io_uring_op, include/uapi/linux/io_uring.h)
 * folded into what a storage engine asks, in the order of
 * src/model/light.rs URING_OPS: read, write, fsync, uring_cmd
 * (passthrough commands), net, wait (polls, timeouts, futexes: their time
 * is the wait for an event), file (open, close, statx, fallocate, ...),
 * other. */
static __always_inline __u32 uring_group(__u8 opcode)
{
	switch (opcode) {
	case 1: case 4: case 22: case 49: case 60:
		return 0;
	case 2: case 5: case 23: case 61:
		return 1;
	case 3: case 8:
		return 2;
	case 46:
		return 3;
	case 9: case 10: case 13: case 16: case 26: case 27: case 34: case 45:
	case 47: case 48: case 56: case 57: case 58:
		return 4;
	case 6: case 11: case 50: case 51: case 53: case 59:
		return 5;
	case 17: case 18: case 19: case 21: case 24: case 25: case 28: case 30:
	case 33: case 35: case 36: case 37: case 38: case 39: case 41: case 42:
	case 43: case 44: case 54: case 55: case 62:
		return 6;
	default:
		return 7;
	}
}

static __always_inline struct uring_stats *uring_stats_of(__u32 group)
{
	return bpf_map_lookup_elem(&uring, &group);
}

SEC("tp_btf/io_uring_submit_req")
int BPF_PROG(iosl_uring_submit, struct io_kiocb___iosl *req)
{
	__u64 addr = rq_addr(ctx);
	__u32 idx = rq_index(addr);
	__u32 group = uring_group(req->opcode);
	struct uring_state *st = bpf_map_lookup_elem(&uring_reqs, &idx);
	if (!st)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	/* An entry left by a request that posted no completion (a success
	 * skipped with IOSQE_CQE_SKIP_SUCCESS) is taken over once stale. */
	if (st->req && st->req != addr && now - st->submit_ns < STALE_NS) {
		struct uring_stats *u = uring_stats_of(group);
		if (u)
			u->state_full += 1;
		return 0;
	}
	st->req = addr;
	st->submit_ns = now;
	st->group = group;
	/* Read as numbers: a BTF pointer takes no arithmetic. */
	__u64 ring = 0;
	bpf_probe_read_kernel(&ring, sizeof(ring), &req->ctx);
	st->ring = ring;
	st->user_data = req->cqe.user_data;
	struct uring_bucket *b = uring_bucket_of(st->ring, st->user_data);
	if (b) {
		/* A free way, else the one of this index's low bits. */
		__u32 way = idx & (URING_WAYS - 1);
		for (__u32 k = 0; k < URING_WAYS; k++) {
			if (!b->idx[k]) {
				way = k;
				break;
			}
		}
		b->idx[way & (URING_WAYS - 1)] = idx + 1;
	}
	return 0;
}

SEC("tp_btf/io_uring_queue_async_work")
int BPF_PROG(iosl_uring_punt, struct io_kiocb___iosl *req, int rw)
{
	struct uring_stats *u = uring_stats_of(uring_group(req->opcode));
	if (u)
		u->punted += 1;
	return 0;
}

/* IORING_CQE_F_MORE: the request will post more CQEs (multishot). */
#define CQE_F_MORE (1U << 1)

/* A request's completion entry: counted in its group, timed from its
 * submission when its state was kept (`st`), else untimed. */
static __always_inline void uring_completed(struct uring_state *st, __u32 idx, __u32 group,
					    __s32 res, __u32 flags, __u64 now)
{
	struct uring_stats *u = uring_stats_of(group);
	if (!u)
		return;
	if (res < 0)
		u->errors += 1;
	if (flags & CQE_F_MORE) {
		u->more += 1;
		return;
	}
	u->requests += 1;
	if (!st) {
		u->untimed += 1;
		return;
	}
	__u64 submit = st->submit_ns;
	st->req = 0;
	struct uring_bucket *b = uring_bucket_of(st->ring, st->user_data);
	if (b) {
		for (__u32 k = 0; k < URING_WAYS; k++) {
			if (b->idx[k] == idx + 1)
				b->idx[k] = 0;
		}
	}
	hist_add(bpf_map_lookup_elem(&uring_latency, &group), now > submit ? now - submit : 0);
}

SEC("tp_btf/io_uring_complete")
int BPF_PROG(iosl_uring_complete, void *ring, void *req, struct io_uring_cqe___iosl *cqe)
{
	__u64 addr = 0;
	/* The request is the second argument: 0 for a CQE no request posted
	 * (a ring's own messages). */
	bpf_probe_read_kernel(&addr, sizeof(addr), (void *)ctx + sizeof(__u64));
	if (!addr)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u32 flags = cqe->flags;
	__s32 res = cqe->res;
	__u32 idx = rq_index(addr);
	struct uring_state *st = bpf_map_lookup_elem(&uring_reqs, &idx);
	__u32 group;
	int timed = st && st->req == addr;
	if (timed) {
		group = st->group;
	} else {
		__u8 opcode = 0;
		bpf_probe_read_kernel(&opcode, sizeof(opcode),
				      &((struct io_kiocb___iosl *)addr)->opcode);
		group = uring_group(opcode);
	}
	uring_completed(timed ? st : 0, idx, group, res, flags, now);
	return 0;
}

/* A completion the full completion queue could not take, kept by the
 * kernel until the application makes room: the request is found by ring
 * and user_data. One whose state is not found (another request in flight
 * took its user_data's index, or its state did not fit) counts under
 * "other", untimed: its operation is not known. */
SEC("tp_btf/io_uring_cqe_overflow")
int BPF_PROG(iosl_uring_overflow, void *ring, unsigned long long user_data, int res,
	     unsigned int cflags, void *ocqe)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 ring_addr = 0;
	bpf_probe_read_kernel(&ring_addr, sizeof(ring_addr), (void *)ctx);
	struct uring_bucket *b = uring_bucket_of(ring_addr, user_data);
	if (!b)
		return 0;
	/* The oldest request in flight with this ring and user_data. */
	struct uring_state *found = 0;
	__u32 found_idx = 0;
	for (__u32 k = 0; k < URING_WAYS; k++) {
		__u32 i = b->idx[k];
		if (!i)
			continue;
		i -= 1;
		struct uring_state *st = bpf_map_lookup_elem(&uring_reqs, &i);
		if (st && st->req && st->ring == ring_addr && st->user_data == user_data &&
		    (!found || st->submit_ns < found->submit_ns)) {
			found = st;
			found_idx = i;
		}
	}
	if (found)
		uring_completed(found, found_idx, found->group, res, cflags, now);
	else
		uring_completed(0, 0, 7, res, cflags, now);
	return 0;
}

/* The flight recorder: what was around a slow request.
 *
 * Runqueue waits are the scheduler's own (sched_info, CONFIG_SCHED_INFO,
 * the stamps behind /proc/PID/schedstat's run delay): a thread's
 * last_queued is stamped with its runqueue's clock when it is queued to
 * run (woken, or preempted while running), and sched_switch fires after
 * __schedule updated that clock and before the switch consumes the stamp
 * (sched_info_arrive, in context_switch). So the switch that runs a
 * thread reads its wait with no clock read, no wakeup program and no
 * per-thread table. A thread moved to another CPU while it waited is
 * queued there afresh (sched_info_dequeue clears the stamp): its wait is
 * the one on the CPU it ran on. */

/* A CPU's real-time runs, the last NRTRUN of them: when each began and
 * ended (0: running) and the CPU's real-time time before it, so that a
 * wait can be told how much of it real-time tasks held the CPU. */
#define NRTRUN 8
struct rt_run {
	__u64 start;
	__u64 end;
	__u64 base;
};

/* Per CPU, in its runqueue's clock: the time real-time tasks ran there,
 * since when the current one runs (0: the current task is not
 * real-time), the last one that ran, and the recent runs. A real-time
 * task's name is copied only when it is switched in, which is rare. */
struct cpu_rt {
	__u64 rt_ns;
	__u64 rt_since;
	__u32 tid;
	__s32 prio;
	char comm[16];
	__u32 runs;
	/* The attachment this state belongs to (sched_gen). */
	__u32 gen;
	struct rt_run run[NRTRUN];
};

/* Bumped by user space each time it attaches the scheduler's programs:
 * a CPU's state from before a detachment (a real-time run that ended
 * unseen, when its task began to run) is dropped at its first switch. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} sched_gen SEC(".maps");

/* Threads whose queued stamp was already old when a wakeup found them
 * (NFLOOR entries, direct-mapped by thread id): the wakeup's time is a
 * floor under their wait. The kernel can leave a sleeping thread stamped
 * as queued: since 6.12 a thread that blocks stays on its runqueue until
 * its lag is spent (delayed dequeue), and moved by the load balancer then
 * it is queued on the new CPU, stamp and all, while still asleep; its
 * wakeup keeps that stamp. Rare, so written only then and read only for
 * a long wait. */
#define NFLOOR 4096
struct wait_floor {
	__u32 tid;
	__u32 pad;
	__u64 floor;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NFLOOR);
	__type(key, __u32);
	__type(value, struct wait_floor);
} wait_floor SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpu_rt);
} cpu_rt SEC(".maps");

/* Real-time time on the CPU up to `now`, the current run included. */
static __always_inline __u64 rt_clock(struct cpu_rt *rt, __u64 now)
{
	__u64 since = rt->rt_since;
	return rt->rt_ns + (since && since < now ? now - since : 0);
}

/* Real-time time on the CPU up to `t`, a moment in the recent past: from
 * the last run that began by then. Before the oldest run kept, the time
 * before that run (a wait that long is told less than its real-time
 * share, never more). */
static __always_inline __u64 rt_clock_at(struct cpu_rt *rt, __u64 t)
{
	__u64 oldest = rt->rt_ns;
	for (__u32 k = 0; k < NRTRUN; k++) {
		if (k >= rt->runs)
			break;
		struct rt_run *r = &rt->run[(rt->runs - 1 - k) & (NRTRUN - 1)];
		if (r->start <= t) {
			__u64 end = r->end && r->end < t ? r->end : t;
			return r->base + (end > r->start ? end - r->start : 0);
		}
		oldest = r->base;
	}
	return oldest;
}

/* A real-time run that began at `start` (its end set when it ends). */
static __always_inline void rt_begin(struct cpu_rt *rt, __u64 start)
{
	struct rt_run *r = &rt->run[rt->runs & (NRTRUN - 1)];
	r->start = start;
	r->end = 0;
	r->base = rt->rt_ns;
	rt->runs += 1;
	rt->rt_since = start;
}

static __always_inline void rt_end(struct cpu_rt *rt, __u64 now)
{
	if (rt->runs)
		rt->run[(rt->runs - 1) & (NRTRUN - 1)].end = now;
	if (now > rt->rt_since)
		rt->rt_ns += now - rt->rt_since;
	rt->rt_since = 0;
}

/* Per CPU: since when its current task runs (in its runqueue's clock),
 * and when the interrupt it is in began (scratch, not exported). */
struct oncpu {
	__u64 since;
	__u64 hardirq_since;
	__u64 softirq_since;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct oncpu);
} oncpu SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpu_stats);
} cpu_stats SEC(".maps");

static __always_inline struct cpu_stats *stats_here(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&cpu_stats, &zero);
}

static __always_inline struct oncpu *oncpu_here(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&oncpu, &zero);
}

static __always_inline struct cpu_rt *rt_here(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&cpu_rt, &zero);
}

/* Kernel priority below 100: SCHED_FIFO/RR (and deadline). */
static __always_inline int is_rt(int prio)
{
	return prio < 100;
}

/* This CPU's runqueue clock, as __schedule just updated it: read through
 * the running task's CFS runqueue, which every task has. */
static __always_inline __u64 rq_clock_now(struct task_struct___iosl *running)
{
	struct cfs_rq___iosl *cfs = running->se.cfs_rq;
	if (!cfs)
		return 0;
	struct rq___iosl *rq = cfs->rq;
	return rq ? rq->clock : 0;
}

/* Counts the wakeup; the wait itself is the scheduler's own stamp, but a
 * stamp already older than the wait threshold when the thread is woken
 * gets the wakeup's time as a floor (wait_floor). */
SEC("tp_btf/sched_wakeup")
int BPF_PROG(iosl_wakeup, struct task_struct___iosl *p)
{
	struct cpu_stats *s = stats_here();
	if (s)
		s->wakeups += 1;
	__u64 queued = p->sched_info.last_queued;
	if (!queued)
		return 0;
	__u64 now = rq_clock_now(p);
	if (now <= queued || now - queued < wait_min_ns)
		return 0;
	__u32 tid = p->pid;
	__u32 idx = tid & (NFLOOR - 1);
	struct wait_floor *f = bpf_map_lookup_elem(&wait_floor, &idx);
	if (f) {
		f->tid = tid;
		f->floor = now;
	}
	return 0;
}

/* When the wait of `tid`, stamped queued at `since`, began: the floor a
 * wakeup left for it, if later. */
static __always_inline __u64 wait_start(__u32 tid, __u64 since)
{
	__u32 idx = tid & (NFLOOR - 1);
	struct wait_floor *f = bpf_map_lookup_elem(&wait_floor, &idx);
	if (!f || f->tid != tid)
		return since;
	__u64 floor = f->floor;
	f->tid = 0;
	return floor > since ? floor : since;
}

/* Sends a wait of at least wait_min_ns that began at `since` and ends
 * `now`, both in this CPU's runqueue clock; sent in the monotonic clock
 * the rest is in (the two differ by an offset read here; the runqueue
 * clock was read at most a few microseconds ago). */
static __always_inline void send_wait(struct cpu_stats *s, struct task_struct___iosl *next,
				      struct task_struct___iosl *prev, __u64 prev_since,
				      struct cpu_rt *rt, __u32 cpu, __u64 since, __u64 now)
{
	struct wait_rec *r = bpf_ringbuf_reserve(&records, sizeof(*r), 0);
	if (!r) {
		s->waits_lost += 1;
		return;
	}
	s->long_waits += 1;
	__u64 wait = now - since;
	__u64 mono = bpf_ktime_get_ns();
	r->kind = REC_WAIT;
	r->len = sizeof(*r);
	r->cpu = cpu;
	r->start_ns = mono > wait ? mono - wait : 0;
	r->wait_ns = wait;
	r->held_ns = now - (prev_since > since ? prev_since : since);
	__u64 clock = rt_clock(rt, now);
	__u64 before = rt_clock_at(rt, since);
	__u64 ns = clock > before ? clock - before : 0;
	r->rt_ns = ns < wait ? ns : wait;
	r->rt_tid = rt->tid;
	r->rt_prio = rt->prio;
	bpf_probe_read_kernel(r->rt_comm, sizeof(r->rt_comm), rt->comm);
	r->tid = next->pid;
	r->prio = next->prio;
	r->holder_tid = prev->pid;
	r->holder_prio = prev->prio;
	bpf_probe_read_kernel_str(r->comm, sizeof(r->comm), next->comm);
	bpf_probe_read_kernel_str(r->holder_comm, sizeof(r->holder_comm), prev->comm);
	bpf_ringbuf_submit(r, 0);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(iosl_switch, _Bool preempt, struct task_struct___iosl *prev,
	     struct task_struct___iosl *next, unsigned int prev_state)
{
	__u64 now = rq_clock_now(prev);
	struct cpu_stats *s = stats_here();
	struct oncpu *o = oncpu_here();
	struct cpu_rt *rt = rt_here();
	__u32 zero = 0;
	__u32 *gen = bpf_map_lookup_elem(&sched_gen, &zero);
	if (!s || !o || !rt || !gen || !now)
		return 0;
	s->switches += 1;
	if (rt->gen != *gen) {
		/* Attached again: what was running then is unknown. */
		rt->gen = *gen;
		rt->rt_since = 0;
		o->since = 0;
	}
	__u64 prev_since = o->since;
	o->since = now;
	if (rt->rt_since) {
		rt_end(rt, now);
	} else if (prev->pid && is_rt(prev->prio) && prev_since && now > prev_since) {
		/* Made real-time while running (sched_setscheduler switches
		 * nothing): its whole run counts. */
		rt_begin(rt, prev_since);
		rt_end(rt, now);
		rt->tid = prev->pid;
		rt->prio = prev->prio;
		bpf_probe_read_kernel_str(rt->comm, sizeof(rt->comm), prev->comm);
	}
	__u32 tid = next->pid;
	if (!tid)
		return 0;
	/* Sent before a real-time `next` is made the CPU's last real-time
	 * task: its wait names the one it waited behind. */
	__u64 since = next->sched_info.last_queued;
	if (since && now > since && now - since >= wait_min_ns) {
		since = wait_start(tid, since);
		if (now - since >= wait_min_ns)
			send_wait(s, next, prev, prev_since, rt, bpf_get_smp_processor_id(), since,
				  now);
	}
	int prio = next->prio;
	if (is_rt(prio)) {
		rt_begin(rt, now);
		rt->tid = tid;
		rt->prio = prio;
		bpf_probe_read_kernel_str(rt->comm, sizeof(rt->comm), next->comm);
	}
	return 0;
}

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(iosl_irq_entry, int irq)
{
	struct oncpu *o = oncpu_here();
	if (o)
		o->hardirq_since = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/irq_handler_exit")
int BPF_PROG(iosl_irq_exit, int irq)
{
	struct oncpu *o = oncpu_here();
	struct cpu_stats *s = stats_here();
	if (!o || !s || !o->hardirq_since)
		return 0;
	s->hardirqs += 1;
	s->hardirq_ns += bpf_ktime_get_ns() - o->hardirq_since;
	o->hardirq_since = 0;
	return 0;
}

SEC("tp_btf/softirq_entry")
int BPF_PROG(iosl_softirq_entry, unsigned int vec)
{
	struct oncpu *o = oncpu_here();
	if (o)
		o->softirq_since = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(iosl_softirq_exit, unsigned int vec)
{
	struct oncpu *o = oncpu_here();
	struct cpu_stats *s = stats_here();
	if (!o || !s || !o->softirq_since)
		return 0;
	__u64 ns = bpf_ktime_get_ns() - o->softirq_since;
	o->softirq_since = 0;
	if (vec < NSOFTIRQ) {
		s->softirqs[vec] += 1;
		s->softirq_ns[vec] += ns;
	}
	return 0;
}

/* Low-rate events kept whole (the journal's commits and checkpoints, the
 * dirty limit's pauses, writeback throttling's steps): a classic
 * tracepoint program each, whose context is the raw record; the
 * index is the event's place in src/model/light.rs's CONTEXT_EVENTS. */
static __always_inline int send_event(void *ctx, __u16 event)
{
	struct cpu_stats *s = stats_here();
	struct event_rec *r = bpf_ringbuf_reserve(&records, sizeof(*r), 0);
	if (!r) {
		if (s)
			s->events_lost += 1;
		return 0;
	}
	if (s)
		s->events += 1;
	r->kind = REC_EVENT;
	r->len = sizeof(*r);
	r->cpu = bpf_get_smp_processor_id();
	r->ts_ns = bpf_ktime_get_ns();
	r->tid = (__u32)bpf_get_current_pid_tgid();
	r->event = event;
	r->pad = 0;
	bpf_get_current_comm(r->comm, sizeof(r->comm));
	bpf_probe_read_kernel(r->data, sizeof(r->data), ctx);
	bpf_ringbuf_submit(r, 0);
	return 0;
}

#define CONTEXT_EVENT(n, sys, tp) \
	SEC("tracepoint/" #sys "/" #tp) int iosl_ev_##tp(void *ctx) { return send_event(ctx, n); }
CONTEXT_EVENT(0, jbd2, jbd2_start_commit)
CONTEXT_EVENT(1, jbd2, jbd2_commit_locking)
CONTEXT_EVENT(2, jbd2, jbd2_commit_flushing)
CONTEXT_EVENT(3, jbd2, jbd2_commit_logging)
CONTEXT_EVENT(4, jbd2, jbd2_end_commit)
CONTEXT_EVENT(5, jbd2, jbd2_run_stats)
CONTEXT_EVENT(6, jbd2, jbd2_checkpoint)
CONTEXT_EVENT(7, jbd2, jbd2_checkpoint_stats)
CONTEXT_EVENT(8, jbd2, jbd2_update_log_tail)
CONTEXT_EVENT(9, jbd2, jbd2_lock_buffer_stall)
/* A writer's pause in balance_dirty_pages: only past the dirty limit's
 * free-run point, once per batch of pages the writer dirties. */
CONTEXT_EVENT(10, writeback, balance_dirty_pages)
/* blk-wbt's steps of its write limit and the read latency that moved it:
 * once per monitoring window at most, only while wbt acts. */
CONTEXT_EVENT(11, wbt, wbt_step)
CONTEXT_EVENT(12, wbt, wbt_lat)

/* The floor: the same hooks with empty programs (scripts/bench-overhead).
 * A tp_btf program is verified for one tracepoint: one each. */
#define NOP_TP_BTF(name, tp) \
	SEC("tp_btf/" #tp) int BPF_PROG(name) { return 0; }
NOP_TP_BTF(iosl_nop_issue, block_rq_issue)
NOP_TP_BTF(iosl_nop_compl, block_rq_complete)
NOP_TP_BTF(iosl_nop_requeue, block_rq_requeue)
NOP_TP_BTF(iosl_nop_bmerge, block_bio_backmerge)
NOP_TP_BTF(iosl_nop_fmerge, block_bio_frontmerge)
NOP_TP_BTF(iosl_nop_rqmerge, block_rq_merge)
NOP_TP_BTF(iosl_nop_split, block_split)
NOP_TP_BTF(iosl_nop_uring_submit, io_uring_submit_req)
NOP_TP_BTF(iosl_nop_uring_punt, io_uring_queue_async_work)
NOP_TP_BTF(iosl_nop_uring_complete, io_uring_complete)
/* The hooks timing page faults in the kernel would need (a fault's start;
 * the thread's next entry into the kernel, which ends it): their floor
 * alone, for the benchmark that decides whether light times faults. */
NOP_TP_BTF(iosl_nop_fault, page_fault_user)
NOP_TP_BTF(iosl_nop_filemap_fault, mm_filemap_fault)
NOP_TP_BTF(iosl_nop_sys_enter, sys_enter)
NOP_TP_BTF(iosl_nop_wakeup, sched_wakeup)
NOP_TP_BTF(iosl_nop_switch, sched_switch)
NOP_TP_BTF(iosl_nop_irq_in, irq_handler_entry)
NOP_TP_BTF(iosl_nop_irq_out, irq_handler_exit)
NOP_TP_BTF(iosl_nop_sirq_in, softirq_entry)
NOP_TP_BTF(iosl_nop_sirq_out, softirq_exit)
SEC("tracepoint/jbd2/jbd2_checkpoint")
int iosl_nop_event(void *ctx) { return 0; }
