// A reaper that lags: O_DIRECT 4 KiB reads of FILE at random, INFLIGHT
// deep on a ring whose completion queue holds CQ entries, reaped only
// once every INFLIGHT submissions are in (after LAG_US µs). With INFLIGHT
// above CQ the completions overflow the queue: the kernel keeps them on
// its overflow list and traces them as io_uring_cqe_overflow instead of
// io_uring_complete. Prints the requests it submitted and reaped, and its
// own submission-to-reap latency.
//
//   cq_overflow FILE CQ INFLIGHT LAG_US TOTAL
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static unsigned long long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000ULL + t.tv_nsec;
}

static int by_value(const void *a, const void *b)
{
	unsigned long long x = *(const unsigned long long *)a;
	unsigned long long y = *(const unsigned long long *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: cq_overflow FILE CQ INFLIGHT LAG_US TOTAL\n");
		return 2;
	}
	unsigned cq = atoi(argv[2]), inflight = atoi(argv[3]);
	unsigned lag = atoi(argv[4]), total = atoi(argv[5]);
	int fd = open(argv[1], O_RDONLY | O_DIRECT);
	if (fd < 0 || !inflight || !total) {
		perror(argv[1]);
		return 2;
	}
	off_t pages = lseek(fd, 0, SEEK_END) / 4096;
	struct io_uring ring;
	struct io_uring_params p;
	memset(&p, 0, sizeof p);
	p.flags = IORING_SETUP_CQSIZE;
	p.cq_entries = cq;
	int r = io_uring_queue_init_params(4, &ring, &p);
	if (r) {
		fprintf(stderr, "io_uring_setup: %s\n", strerror(-r));
		return 2;
	}
	void *buf;
	if (posix_memalign(&buf, 4096, 4096 * (size_t)inflight))
		return 2;
	unsigned long long *sent_at = calloc(total, 8), *lat = calloc(total, 8);
	unsigned sent = 0, reaped = 0, out = 0;
	srand(7);
	while (reaped < total) {
		while (out < inflight && sent < total) {
			struct io_uring_sqe *s = io_uring_get_sqe(&ring);
			if (!s) {
				io_uring_submit(&ring);
				continue;
			}
			off_t page = rand() % pages;
			io_uring_prep_read(s, fd, (char *)buf + 4096 * (sent % inflight), 4096,
					   page * 4096);
			s->user_data = sent;
			sent_at[sent] = now_ns();
			sent++;
			out++;
		}
		r = io_uring_submit(&ring);
		if (r < 0) {
			fprintf(stderr, "io_uring_enter: %s\n", strerror(-r));
			return 2;
		}
		if (lag)
			usleep(lag);
		/* Flushes the overflowed completions into the queue as room
		 * is made. */
		io_uring_get_events(&ring);
		struct io_uring_cqe *c;
		while (io_uring_peek_cqe(&ring, &c) == 0) {
			if (c->res != 4096) {
				fprintf(stderr, "read: %d\n", c->res);
				return 2;
			}
			lat[c->user_data] = now_ns() - sent_at[c->user_data];
			io_uring_cqe_seen(&ring, c);
			reaped++;
			out--;
			io_uring_get_events(&ring);
		}
	}
	qsort(lat, total, 8, by_value);
	printf("submitted %u reaped %u cq %u p50_us %.1f p99_us %.1f\n", sent, reaped,
	       p.cq_entries, lat[total / 2] / 1e3, lat[total * 99 / 100] / 1e3);
	return 0;
}
