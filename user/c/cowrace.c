/*
 * Stephen Dolan's reproducer of Linux's two 2025 shootdown bugs
 * (CVE-2025-37964 and CVE-2025-40174), in C for Linux: the same protocol
 * and summary lines as user/src/bin/cowrace.rs, whose documentation
 * explains the race.
 *
 *   cowrace <iterations> [switch | stay]
 *
 * A writer thread on CPU 0 forks a child that exits at once, then writes
 * A (on a private page, so the write breaks copy-on-write and flushes the
 * old translation) and then B (on a MAP_SHARED page, with release). A
 * reader thread on CPU 1 reads B (acquire) and then A: seeing A < B means
 * its CPU still used A's old frame after the flush. With `switch` the
 * reader yields to a helper process on its CPU after every read.
 *
 * Unlike the Rust program, a C program has a C library with globals of its
 * own in its data pages, which every fork makes copy-on-write too. The
 * reader therefore touches nothing but its own stack and the two counters'
 * pages: what it needs it copies from its argument at the start. A reader
 * that read a global the writer's copy-on-write break moved would, under a
 * missing flush, crash instead of counting the stale reads it came for.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define PROGRESS_EVERY 1000

struct shared {
	_Atomic uint64_t b, stop, reads, violations, first_b, first_a;
};

/* What the reader needs, copied to its own stack when it starts. */
struct reader_setup {
	struct shared *shared;
	_Atomic uint64_t *a;
	int switching;
};

static void *reader(void *argument)
{
	struct reader_setup setup = *(struct reader_setup *)argument;
	struct shared *shared = setup.shared;
	_Atomic uint64_t *a = setup.a;
	pin(1);
	while (!atomic_load_explicit(&shared->stop, memory_order_acquire)) {
		uint64_t b = atomic_load_explicit(&shared->b, memory_order_acquire);
		uint64_t seen_a = atomic_load_explicit(a, memory_order_acquire);
		if (seen_a < b && atomic_fetch_add(&shared->violations, 1) == 0) {
			atomic_store(&shared->first_b, b);
			atomic_store(&shared->first_a, seen_a);
		}
		atomic_fetch_add_explicit(&shared->reads, 1, memory_order_relaxed);
		if (setup.switching)
			sched_yield();
	}
	return NULL;
}

static uint64_t now_ms(void)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
}

int main(int argc, char **argv)
{
	char *end = NULL;
	uint64_t iterations = argc >= 2 ? strtoull(argv[1], &end, 10) : 0;
	int switching = argc < 3 || strcmp(argv[2], "switch") == 0;
	if (argc < 2 || argc > 3 || *end || (argc == 3 && !switching && strcmp(argv[2], "stay"))) {
		printf("usage: cowrace <iterations> [switch | stay]\n");
		return 2;
	}
	/* Checked without running there: the reader's CPU should hold no
	 * translation of this process from before the first fork. */
	cpu_set_t online;
	if (sched_getaffinity(0, sizeof(online), &online) != 0 || !CPU_ISSET(1, &online) ||
	    pin(0) != 0) {
		printf("cowrace: CPUs 0 and 1 must be online (the race needs two CPUs)\n");
		return 2;
	}
	struct shared *shared =
		mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	_Atomic uint64_t *a =
		mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (shared == MAP_FAILED || a == MAP_FAILED) {
		printf("cowrace: mmap failed\n");
		return 2;
	}
	/* A present private page before the first fork shares it. */
	atomic_store(a, 0);

	pid_t helper = 0;
	if (switching) {
		helper = fork();
		if (helper == 0) {
			pin(1);
			while (!atomic_load_explicit(&shared->stop, memory_order_acquire))
				sched_yield();
			_exit(0);
		}
		if (helper < 0) {
			printf("cowrace: fork of the helper failed\n");
			return 2;
		}
	}
	pthread_t reader_thread;
	struct reader_setup setup = {.shared = shared, .a = a, .switching = switching};
	if (pthread_create(&reader_thread, NULL, reader, &setup) != 0) {
		printf("cowrace: starting the reader failed\n");
		atomic_store(&shared->stop, 1);
		return 2;
	}

	uint64_t started = now_ms(), failed_forks = 0;
	for (uint64_t iteration = 1; iteration <= iterations; iteration++) {
		if (iteration % PROGRESS_EVERY == 0 && iteration < iterations)
			printf("cowrace: %llu/%llu iterations, %llu violations so far\n",
			       (unsigned long long)iteration, (unsigned long long)iterations,
			       (unsigned long long)atomic_load(&shared->violations));
		pid_t child = fork();
		if (child == 0)
			_exit(0);
		if (child < 0)
			failed_forks++;
		atomic_store_explicit(a, iteration, memory_order_relaxed);
		atomic_store_explicit(&shared->b, iteration, memory_order_release);
		if (child > 0)
			waitpid(child, NULL, 0);
	}
	uint64_t elapsed_ms = now_ms() - started;
	atomic_store_explicit(&shared->stop, 1, memory_order_release);
	if (helper > 0)
		waitpid(helper, NULL, 0);
	pthread_join(reader_thread, NULL);

	uint64_t violations = atomic_load(&shared->violations);
	printf("cowrace: iterations=%llu reader=%s reads=%llu violations=%llu failed_forks=%llu "
	       "elapsed_ms=%llu\n",
	       (unsigned long long)iterations, switching ? "switch" : "stay",
	       (unsigned long long)atomic_load(&shared->reads), (unsigned long long)violations,
	       (unsigned long long)failed_forks, (unsigned long long)elapsed_ms);
	if (violations > 0)
		printf("cowrace: first violation: read B=%llu then A=%llu (A is written first: the "
		       "reader used a stale translation of A's old frame)\n",
		       (unsigned long long)atomic_load(&shared->first_b),
		       (unsigned long long)atomic_load(&shared->first_a));
	return violations > 0 || failed_forks > 0;
}
