/* The few kernel types light.bpf.c reads, as CO-RE "flavours": field
 * offsets are relocated against the running kernel's BTF at load time, so
 * the object does not depend on the kernel it was built on (no vmlinux.h). */
#ifndef IOSL_TYPES_H
#define IOSL_TYPES_H

#include <linux/types.h>

struct gendisk___iosl {
	int major;
	int first_minor;
} __attribute__((preserve_access_index));

struct request_queue___iosl {
	struct gendisk___iosl *disk;
} __attribute__((preserve_access_index));

struct block_device___iosl {
	__u32 bd_dev;
} __attribute__((preserve_access_index));

struct kernfs_node___iosl {
	__u64 id;
} __attribute__((preserve_access_index));

struct cgroup___iosl {
	struct kernfs_node___iosl *kn;
} __attribute__((preserve_access_index));

struct cgroup_subsys_state___iosl {
	struct cgroup___iosl *cgroup;
} __attribute__((preserve_access_index));

/* The cgroup a bio is charged to (its blkcg): the one that dirtied the
 * pages for writeback, not the flusher that sends them. */
struct blkcg___iosl {
	struct cgroup_subsys_state___iosl css;
} __attribute__((preserve_access_index));

struct blkcg_gq___iosl {
	struct blkcg___iosl *blkcg;
} __attribute__((preserve_access_index));

struct bvec_iter___iosl {
	__u32 bi_size;
} __attribute__((preserve_access_index));

struct bio___iosl {
	struct block_device___iosl *bi_bdev;
	__u32 bi_opf;
	struct bvec_iter___iosl bi_iter;
	struct blkcg_gq___iosl *bi_blkg;
} __attribute__((preserve_access_index));

/* A work item: the function it runs (blk-throttle's dispatch). */
struct work_struct___iosl {
	void *func;
} __attribute__((preserve_access_index));

/* A request's state (enum mq_rq_state): idle until the driver starts it. */
enum mq_rq_state___iosl {
	MQ_RQ_IDLE___iosl = 0,
};

/* The request flags' bit numbers (enum rqf_flags, where the kernel has
 * one): relocated by name, so only the one read here is named. */
enum rqf_flags___iosl {
	__RQF_FLUSH_SEQ___iosl = 1,
};

struct request___iosl {
	struct request_queue___iosl *q;
	struct bio___iosl *bio;
	__u32 cmd_flags;
	__u32 __data_len;
	__u64 __sector;
	__u64 start_time_ns;
	/* Set at issue only when the queue keeps block stats (RQF_STATS);
	 * 0 otherwise. */
	__u64 io_start_time_ns;
	enum mq_rq_state___iosl state;
	__u32 rq_flags;
} __attribute__((preserve_access_index));

/* task_cpu(): x86 keeps the task's CPU in its thread_info. */
struct thread_info___iosl {
	__u32 cpu;
} __attribute__((preserve_access_index));

struct css_set___iosl {
	struct cgroup___iosl *dfl_cgrp;
} __attribute__((preserve_access_index));

/* The scheduler's own stamps of a thread (CONFIG_SCHED_INFO), in its
 * runqueue's clock: when it was last queued to run (0: not queued), and
 * when it last began to run. */
struct sched_info___iosl {
	unsigned long long last_arrival;
	unsigned long long last_queued;
} __attribute__((preserve_access_index));

/* A CPU's runqueue: its clock, updated by __schedule before it switches. */
struct rq___iosl {
	__u64 clock;
} __attribute__((preserve_access_index));

/* The runqueue a CFS runqueue belongs to (CONFIG_FAIR_GROUP_SCHED). */
struct cfs_rq___iosl {
	struct rq___iosl *rq;
} __attribute__((preserve_access_index));

struct sched_entity___iosl {
	struct cfs_rq___iosl *cfs_rq;
} __attribute__((preserve_access_index));

struct task_struct___iosl {
	struct thread_info___iosl thread_info;
	struct sched_info___iosl sched_info;
	struct sched_entity___iosl se;
	int pid;
	int tgid;
	int prio;
	char comm[16];
	struct css_set___iosl *cgroups;
} __attribute__((preserve_access_index));

/* An io_uring request: its opcode (enum io_uring_op). */
struct io_cqe___iosl {
	__u64 user_data;
} __attribute__((preserve_access_index));

struct io_kiocb___iosl {
	__u8 opcode;
	void *ctx;
	struct io_cqe___iosl cqe;
} __attribute__((preserve_access_index));

/* A completion queue entry (uapi, include/uapi/linux/io_uring.h). */
struct io_uring_cqe___iosl {
	__u64 user_data;
	__s32 res;
	__u32 flags;
} __attribute__((preserve_access_index));

#endif
