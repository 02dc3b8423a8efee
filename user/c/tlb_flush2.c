/*
 * tlb_flush2 in C, written for Linux: the same work and the same summary
 * line as the Rust program user/src/bin/tlb_flush2.rs (read its module
 * documentation for the why of each step), so that one static file runs on
 * this kernel and on Linux and their speeds can be compared.
 *
 *   tlb_flush2 <threads|processes> <tasks> <warm-up-ms> <measure-ms>
 *
 * Each task is pinned to CPU task % cpus and loops: map 1 MiB of private
 * anonymous memory; for each of its 256 pages write a byte, madvise it
 * MADV_DONTNEED (one single-page flush), read the byte back and check it is
 * zero, and count one iteration; unmap; again. `threads` runs the tasks as
 * threads of one process, `processes` as forked children. Tasks start,
 * sleep until a common go time, warm up, then count iterations between a
 * start and an end time read from CLOCK_MONOTONIC.
 *
 * The summary line also has TLB counters per iteration over the measured
 * window: on this kernel its own (the `tlb_stats` call, shootdown.h); on
 * Linux, where that call fails with ENOSYS, the TLB shootdown interrupts
 * the CPUs handled (the TLB row of /proc/interrupts), as
 * `ipis_received_per_iter`, and `counters=proc`. With neither, the line
 * ends with `counters=none`.
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
#include "proc_interrupts.h"
#include "shootdown.h"

#define PAGE 4096ul
#define PAGES 256ul
#define MAX_TASKS 64
#define CLOCK_INTERVAL_NS 1000000ull
#define START_ALLOWANCE_NS 250000000ull
#define TABLE_SPAN (2ul << 20)

struct schedule {
	uint64_t go_ns, start_ns, end_ns;
};

/* The counters at one edge of the measured window, read by the first task
 * to reach it (the counters are machine-wide totals). */
struct edge {
	atomic_int claimed;
	/* This kernel's counters, if it answered. */
	int valid;
	uint64_t values[SHOOTDOWN_COUNTERS];
	/* Linux's TLB shootdown interrupts, or -1. */
	long long tlb_interrupts;
};

/* Shared by every task: in threads mode a global, in processes mode a
 * MAP_SHARED page mapped before the forks. */
struct shared {
	struct edge opened, closed;
	/* Each task's report: iterations + 1, or 0 if it failed. */
	_Atomic uint64_t reports[MAX_TASKS];
};

static struct shared *shared;
static struct schedule schedule;
static int cpus;

static void reach(struct edge *edge)
{
	if (atomic_exchange(&edge->claimed, 1))
		return;
	edge->valid = shootdown_tlb_stats(edge->values) == 0;
	edge->tlb_interrupts = edge->valid ? -1 : proc_interrupts("TLB:");
}

/* Unmapping a region with a page table of its own reaches every CPU the
 * address space was left on; twice makes such CPUs let go of it, so the
 * measured loop does not pay for them (see the Rust program). */
static int release_lazy_cpus(void)
{
	for (int round = 0; round < 2; round++) {
		char *region = mmap(NULL, 2 * TABLE_SPAN, PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (region == MAP_FAILED)
			return -1;
		uintptr_t aligned = ((uintptr_t)region + TABLE_SPAN - 1) & ~(TABLE_SPAN - 1);
		*(volatile char *)aligned = 1;
		if (munmap(region, 2 * TABLE_SPAN) != 0)
			return -1;
	}
	return 0;
}

/* The loop; returns the iterations counted in the window, or -1 after
 * printing why it failed. */
static int64_t count_iterations(int index)
{
	int cpu = index % cpus;
	const char *why = NULL;
	if (pin(cpu) != 0) {
		why = "cannot pin to its CPU";
		goto failed;
	}
	if (release_lazy_cpus() != 0) {
		why = "mmap or munmap failed";
		goto failed;
	}
	struct timespec go = {
		.tv_sec = (time_t)(schedule.go_ns / 1000000000ull),
		.tv_nsec = (long)(schedule.go_ns % 1000000000ull),
	};
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &go, NULL) != 0)
		;
	uint64_t done = 0, last_done = 0, next_reading = 1, counted_from = 0;
	int counting = 0;
	uint64_t last_reading = now_ns();
	for (;;) {
		char *region = mmap(NULL, PAGES * PAGE, PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (region == MAP_FAILED) {
			why = "mmap failed";
			goto failed;
		}
		for (uint64_t page = 0; page < PAGES; page++) {
			volatile char *byte = region + page * PAGE;
			*byte = 1;
			if (madvise((void *)byte, PAGE, MADV_DONTNEED) != 0) {
				why = "madvise(MADV_DONTNEED) failed";
				goto failed;
			}
			if (*byte != 0) {
				why = "read a nonzero byte back after madvise(MADV_DONTNEED)";
				goto failed;
			}
			done++;
			if (done < next_reading)
				continue;
			uint64_t now = now_ns();
			if (!counting && now >= schedule.start_ns) {
				counting = 1;
				counted_from = done;
				reach(&shared->opened);
			}
			if (now >= schedule.end_ns) {
				reach(&shared->closed);
				munmap(region, PAGES * PAGE);
				return (int64_t)(done - (counting ? counted_from : done));
			}
			uint64_t step = done - last_done;
			uint64_t elapsed = now > last_reading ? now - last_reading : 1;
			uint64_t per_interval = step * CLOCK_INTERVAL_NS / elapsed;
			if (per_interval < 1)
				per_interval = 1;
			if (per_interval > 2 * step)
				per_interval = 2 * step;
			next_reading = done + per_interval;
			last_reading = now;
			last_done = done;
		}
		if (munmap(region, PAGES * PAGE) != 0) {
			why = "munmap failed";
			goto failed;
		}
	}
failed:
	printf("tlb_flush2: task %d on CPU %d: %s\n", index, cpu, why);
	return -1;
}

static void report(int index, int64_t iterations)
{
	atomic_store(&shared->reports[index], iterations < 0 ? 0 : (uint64_t)iterations + 1);
}

static void *task_thread(void *argument)
{
	int index = (int)(intptr_t)argument;
	report(index, count_iterations(index));
	return NULL;
}

static int online_cpus(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return 1;
	return CPU_COUNT(&set);
}

static int usage(void)
{
	printf("usage: tlb_flush2 <threads|processes> <tasks 1-64> <warm-up-ms> <measure-ms>\n");
	return 1;
}

int main(int argc, char **argv)
{
	if (argc != 5)
		return usage();
	int processes = strcmp(argv[1], "processes") == 0;
	char *end;
	long tasks = strtol(argv[2], &end, 10);
	if ((!processes && strcmp(argv[1], "threads") != 0) || *end || tasks < 1 ||
	    tasks > MAX_TASKS)
		return usage();
	unsigned long long warm_up_ms = strtoull(argv[3], &end, 10);
	if (*end)
		return usage();
	unsigned long long measure_ms = strtoull(argv[4], &end, 10);
	if (*end || measure_ms == 0)
		return usage();

	cpus = online_cpus();
	shared = mmap(NULL, sizeof(struct shared), PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared == MAP_FAILED) {
		printf("tlb_flush2: cannot map the shared page\n");
		return 1;
	}
	uint64_t at_start[SHOOTDOWN_COUNTERS];
	int have_counters = shootdown_tlb_stats(at_start) == 0;
	schedule.go_ns = now_ns() + START_ALLOWANCE_NS * (uint64_t)tasks;
	schedule.start_ns = schedule.go_ns + warm_up_ms * 1000000ull;
	schedule.end_ns = schedule.start_ns + measure_ms * 1000000ull;

	pthread_t threads[MAX_TASKS];
	pid_t pids[MAX_TASKS];
	int started = 1, failed_tasks = 0;
	for (; started < tasks; started++) {
		if (processes) {
			pid_t pid = fork();
			if (pid == 0) {
				report(started, count_iterations(started));
				_exit(0);
			}
			if (pid < 0)
				break;
			pids[started] = pid;
		} else if (pthread_create(&threads[started], NULL, task_thread,
					  (void *)(intptr_t)started) != 0) {
			break;
		}
	}
	if (started < tasks) {
		printf("tlb_flush2: could start only %d of %ld tasks\n", started, tasks);
		failed_tasks += (int)tasks - started;
	}
	int started_late = now_ns() > schedule.start_ns;
	report(0, count_iterations(0));
	for (int index = 1; index < started; index++) {
		if (processes) {
			int status;
			if (waitpid(pids[index], &status, 0) != pids[index] || status != 0)
				atomic_store(&shared->reports[index], 0);
		} else {
			pthread_join(threads[index], NULL);
		}
	}
	uint64_t iterations = 0;
	for (int index = 0; index < started; index++) {
		uint64_t value = atomic_load(&shared->reports[index]);
		if (value == 0)
			failed_tasks++;
		else
			iterations += value - 1;
	}

	printf("tlb_flush2: kind=%s tasks=%ld cpus=%d measured_ms=%llu iterations=%llu "
	       "iterations_per_s=%llu failed_tasks=%d",
	       processes ? "processes" : "threads", tasks, cpus, measure_ms,
	       (unsigned long long)iterations,
	       (unsigned long long)((unsigned __int128)iterations * 1000 / measure_ms),
	       failed_tasks);
	struct edge *opened = &shared->opened, *closed = &shared->closed;
	if (have_counters && opened->valid && closed->valid) {
		uint64_t delta[SHOOTDOWN_COUNTERS];
		for (int i = 0; i < SHOOTDOWN_COUNTERS; i++)
			delta[i] = closed->values[i] - opened->values[i];
		printf(" promotions=%llu",
		       (unsigned long long)(closed->values[SHOOTDOWN_COUNTER_PROMOTIONS] -
					    at_start[SHOOTDOWN_COUNTER_PROMOTIONS]));
		print_ratio("ipis_sent_per_iter", delta[SHOOTDOWN_COUNTER_IPIS_SENT], iterations);
		print_ratio("ipis_received_per_iter", delta[SHOOTDOWN_COUNTER_IPIS_RECEIVED], iterations);
		print_ratio("flush_handler_runs_per_iter",
			    delta[SHOOTDOWN_COUNTER_FLUSH_HANDLER_RUNS], iterations);
		print_ratio("local_full_flushes_per_iter",
			    delta[SHOOTDOWN_COUNTER_LOCAL_FULL_FLUSHES], iterations);
		print_ratio("local_partial_flushes_per_iter",
			    delta[SHOOTDOWN_COUNTER_LOCAL_PARTIAL_FLUSHES], iterations);
		print_ratio("broadcast_ops_per_iter", delta[SHOOTDOWN_COUNTER_BROADCAST_OPS],
			    iterations);
		printf("\n");
	} else if (opened->tlb_interrupts >= 0 && closed->tlb_interrupts >= 0) {
		print_ratio("ipis_received_per_iter",
			    (uint64_t)(closed->tlb_interrupts - opened->tlb_interrupts), iterations);
		printf(" counters=proc\n");
	} else {
		printf(" counters=none\n");
	}
	if (failed_tasks > 0) {
		printf("tlb_flush2: a task failed\n");
		return 1;
	}
	if (started_late) {
		printf("tlb_flush2: starting the tasks took longer than the warm-up; give a longer warm-up\n");
		return 1;
	}
	return 0;
}
