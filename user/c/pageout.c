/*
 * The reclaim loop in C, written for Linux: the same work and the same
 * summary line as the Rust program user/src/bin/pageout.rs (its module
 * documentation says why each step is there), so that one static file
 * runs on this kernel and on Linux.
 *
 *   pageout <loops> <sleep|busy> [pages]
 *
 * Maps `pages` (default 256: 1 MiB) of shared anonymous memory, fills it
 * with 0x88 and keeps the process on CPUs 0-3 with helper threads: `sleep`
 * has four helpers pinned to CPUs 0-3 that sleep until the end, `busy`
 * three that spin on CPUs 1-3; the main thread runs on CPU 0. Then it loops: read one
 * byte of every page (a swap-in each, checked against 0x88) and
 * madvise(MADV_PAGEOUT) the whole region. One loop runs before measuring
 * (the first fill of swap); `loops` more are timed.
 *
 * The summary line has the TLB counters per loop: this kernel's own (the
 * `tlb_stats` call, shootdown.h), or on Linux the TLB shootdown interrupts
 * the CPUs handled (the TLB row of /proc/interrupts) and the pages written
 * to swap (pswpout of /proc/vmstat), with `counters=proc`. On Linux
 * MADV_PAGEOUT of shared memory does nothing without swap, so a run whose
 * pages did not go out fails instead of timing nothing.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "proc_interrupts.h"
#include "shootdown.h"

#define PAGE 4096ul
#define DEFAULT_PAGES 256ul
#define FILL 0x88
#define CPUS 4

/* The helpers' shared state: how many are pinned and running, how many
 * could not pin, and when to stop. Sleeping helpers wait for `stop` on a
 * condition variable (a futex underneath), so they stay asleep for the
 * whole measurement: none wakes between loops to catch a flush. */
static atomic_int pinned, unpinned, stop;
static pthread_mutex_t stop_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stop_signal = PTHREAD_COND_INITIALIZER;

/* After every helper reached its CPU, how long the main thread waits for
 * the sleeping ones to be asleep (as the Rust helpers' SETTLE_NS). */
#define SETTLE_NS 20000000l

struct helper {
	pthread_t thread;
	int cpu;
	int busy;
};

static void *helper(void *argument)
{
	struct helper *self = argument;
	if (pin(self->cpu) != 0) {
		atomic_fetch_add(&unpinned, 1);
		return NULL;
	}
	atomic_fetch_add(&pinned, 1);
	if (self->busy) {
		while (!atomic_load(&stop))
			;
		return NULL;
	}
	pthread_mutex_lock(&stop_lock);
	while (!atomic_load(&stop))
		pthread_cond_wait(&stop_signal, &stop_lock);
	pthread_mutex_unlock(&stop_lock);
	return NULL;
}

/* Tells every helper to stop, waking the sleeping ones. */
static void stop_helpers(void)
{
	pthread_mutex_lock(&stop_lock);
	atomic_store(&stop, 1);
	pthread_cond_broadcast(&stop_signal);
	pthread_mutex_unlock(&stop_lock);
}

/* Reads one byte of every page; -1 if one came back changed. */
static int touch(volatile unsigned char *region, unsigned long pages)
{
	for (unsigned long page = 0; page < pages; page++) {
		if (region[page * PAGE] != FILL)
			return -1;
	}
	return 0;
}

/* Linux's count of pages written to swap since boot, or -1. */
static long long pages_swapped_out(void)
{
	FILE *file = fopen("/proc/vmstat", "r");
	if (!file)
		return -1;
	char name[64];
	long long value, found = -1;
	while (fscanf(file, "%63s %lld", name, &value) == 2) {
		if (strcmp(name, "pswpout") == 0) {
			found = value;
			break;
		}
	}
	fclose(file);
	return found;
}

/* The counters a loop is measured against: this kernel's, or Linux's. */
struct counters {
	int own;
	uint64_t values[SHOOTDOWN_COUNTERS];
	long long tlb_interrupts, swapped_out;
};

static void read_counters(struct counters *counters)
{
	counters->own = shootdown_tlb_stats(counters->values) == 0;
	counters->tlb_interrupts = counters->own ? -1 : proc_interrupts("TLB:");
	counters->swapped_out = counters->own ? -1 : pages_swapped_out();
}

static int usage(void)
{
	printf("pageout: usage: pageout <loops> <sleep|busy> [pages] (needs 4 CPUs)\n");
	return 1;
}

int main(int argc, char **argv)
{
	if (argc < 3 || argc > 4)
		return usage();
	char *end;
	unsigned long loops = strtoul(argv[1], &end, 10);
	if (*end || loops == 0)
		return usage();
	int busy = strcmp(argv[2], "busy") == 0;
	if (!busy && strcmp(argv[2], "sleep") != 0)
		return usage();
	unsigned long pages = DEFAULT_PAGES;
	if (argc == 4) {
		pages = strtoul(argv[3], &end, 10);
		if (*end || pages == 0)
			return usage();
	}
	if (pin(0) != 0) {
		printf("pageout: cannot pin to CPU 0\n");
		return 1;
	}
	size_t len = pages * PAGE;
	unsigned char *region = mmap(NULL, len, PROT_READ | PROT_WRITE,
				     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (region == MAP_FAILED) {
		printf("pageout: mmap failed (too many pages?)\n");
		return 1;
	}
	memset(region, FILL, len);

	struct helper helpers[CPUS];
	int first = busy ? 1 : 0, started = 0;
	for (int cpu = first; cpu < CPUS; cpu++, started++) {
		helpers[started] = (struct helper){ .cpu = cpu, .busy = busy };
		if (pthread_create(&helpers[started].thread, NULL, helper, &helpers[started]) != 0)
			break;
	}
	while (atomic_load(&pinned) + atomic_load(&unpinned) < started)
		sched_yield();
	if (started < CPUS - first || atomic_load(&unpinned) > 0) {
		printf("pageout: cannot start a helper on each of CPUs %d-%d (this needs 4 CPUs)\n",
		       first, CPUS - 1);
		return 1;
	}
	struct timespec settle = { .tv_sec = 0, .tv_nsec = SETTLE_NS };
	nanosleep(&settle, NULL);

	/* The first loop fills swap; the measured ones find it warm. */
	if (touch(region, pages) != 0 || madvise(region, len, MADV_PAGEOUT) != 0) {
		printf("pageout: the first loop failed\n");
		return 1;
	}
	struct counters before, after;
	read_counters(&before);
	uint64_t started_ns = now_ns();
	for (unsigned long loop = 0; loop < loops; loop++) {
		if (touch(region, pages) != 0) {
			printf("pageout: a page came back from swap changed\n");
			return 1;
		}
		if (madvise(region, len, MADV_PAGEOUT) != 0) {
			printf("pageout: madvise(MADV_PAGEOUT) failed\n");
			return 1;
		}
	}
	uint64_t took = now_ns() - started_ns;
	read_counters(&after);
	stop_helpers();
	for (int index = 0; index < started; index++)
		pthread_join(helpers[index].thread, NULL);
	if (touch(region, pages) != 0) {
		printf("pageout: a page came back from swap changed\n");
		return 1;
	}

	printf("pageout: helpers=%s pages=%lu loops=%lu ns_per_loop=%llu", argv[2], pages, loops,
	       (unsigned long long)(took / loops));
	if (before.own && after.own) {
		static const struct {
			const char *name;
			int counter;
		} shown[] = {
			{ "ipis_sent_per_loop", SHOOTDOWN_COUNTER_IPIS_SENT },
			{ "ipis_received_per_loop", SHOOTDOWN_COUNTER_IPIS_RECEIVED },
			{ "flush_handler_runs_per_loop", SHOOTDOWN_COUNTER_FLUSH_HANDLER_RUNS },
			{ "batch_flushes_per_loop", SHOOTDOWN_COUNTER_BATCH_FLUSHES },
			{ "local_full_flushes_per_loop", SHOOTDOWN_COUNTER_LOCAL_FULL_FLUSHES },
			{ "local_partial_flushes_per_loop", SHOOTDOWN_COUNTER_LOCAL_PARTIAL_FLUSHES },
			{ "broadcast_ops_per_loop", SHOOTDOWN_COUNTER_BROADCAST_OPS },
		};
		for (size_t i = 0; i < sizeof(shown) / sizeof(shown[0]); i++)
			print_ratio(shown[i].name,
				    after.values[shown[i].counter] - before.values[shown[i].counter],
				    loops);
		/* This kernel's counters have no swap count: the field is there,
		 * empty, so that both kernels' lines have the same keys. */
		printf(" pages_swapped_out_per_loop=none\n");
		return 0;
	}
	if (before.tlb_interrupts < 0 || after.tlb_interrupts < 0 || before.swapped_out < 0 ||
	    after.swapped_out < 0) {
		printf(" counters=none\n");
		return 0;
	}
	uint64_t swapped = (uint64_t)(after.swapped_out - before.swapped_out);
	print_ratio("ipis_received_per_loop", (uint64_t)(after.tlb_interrupts - before.tlb_interrupts),
		    loops);
	print_ratio("pages_swapped_out_per_loop", swapped, loops);
	printf(" counters=proc\n");
	if (swapped < loops * pages / 2) {
		printf("pageout: only %llu of %lu pages went to swap: is swap on?\n",
		       (unsigned long long)swapped, loops * pages);
		return 1;
	}
	return 0;
}
