/*
 * What a C program may ask this kernel that Linux has no call for: the TLB
 * counters (the kernel's own system call `tlb_stats`, numbered above
 * Linux's table, so that on Linux it fails with ENOSYS). The numbers are
 * abi::Syscall::TlbStats and the order of abi::TLB_COUNTER_NAMES; a test
 * of the abi crate reads this file and checks them.
 */
#ifndef SHOOTDOWN_H
#define SHOOTDOWN_H

#include <errno.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SHOOTDOWN_SYS_TLB_STATS 1025
#define SHOOTDOWN_COUNTERS 16

#define SHOOTDOWN_COUNTER_IPIS_SENT 0
#define SHOOTDOWN_COUNTER_IPIS_RECEIVED 1
#define SHOOTDOWN_COUNTER_FLUSH_HANDLER_RUNS 2
#define SHOOTDOWN_COUNTER_LOCAL_FULL_FLUSHES 3
#define SHOOTDOWN_COUNTER_LOCAL_PARTIAL_FLUSHES 5
#define SHOOTDOWN_COUNTER_BROADCAST_OPS 7
#define SHOOTDOWN_COUNTER_PROMOTIONS 9
#define SHOOTDOWN_COUNTER_BATCH_FLUSHES 12

/* Reads the counters (totals over all CPUs since boot) into `values`; 0 on
 * this kernel, -1 on any other (errno ENOSYS). */
static inline int shootdown_tlb_stats(uint64_t values[SHOOTDOWN_COUNTERS])
{
	long bytes = syscall(SHOOTDOWN_SYS_TLB_STATS, values,
			     SHOOTDOWN_COUNTERS * sizeof(uint64_t));
	return bytes == (long)(SHOOTDOWN_COUNTERS * sizeof(uint64_t)) ? 0 : -1;
}

#endif
