/*
 * What several of the C programs need: pinning to one CPU, the monotonic
 * clock in nanoseconds, and a per-iteration ratio printed the way the Rust
 * programs print theirs (user::ratio), so that the summary lines of a Rust
 * program and its C twin read alike.
 */
#ifndef COMMON_H
#define COMMON_H

#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

/* Pins the calling thread to `cpu`; 0 on success. */
static inline int pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set);
}

static inline uint64_t now_ns(void)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

/* " NAME=1.234": `numerator` per `denominator`, three decimals, rounded;
 * " NAME=none" when there is nothing to divide by. */
static inline void print_ratio(const char *name, uint64_t numerator, uint64_t denominator)
{
	if (denominator == 0) {
		printf(" %s=none", name);
		return;
	}
	unsigned __int128 thousandths =
		((unsigned __int128)numerator * 1000 + denominator / 2) / denominator;
	printf(" %s=%llu.%03llu", name, (unsigned long long)(thousandths / 1000),
	       (unsigned long long)(thousandths % 1000));
}

#endif
