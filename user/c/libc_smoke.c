/*
 * A C program written for Linux from its manual pages, built static with
 * musl and with glibc and run unmodified on this kernel: the C
 * library's own start-up (the ELF entry stack and auxiliary vector, TLS
 * set up with arch_prctl, brk or mmap for malloc), pthreads (clone with
 * CLONE_SETTLS and CLONE_CHILD_CLEARTID, futexes, the clear-tid wake that
 * pthread_join sleeps on), a condition variable's broadcast, and two
 * system calls made wrong on purpose.
 *
 * Prints one line per check, "PASS name" or "FAIL name: what", then
 * "libc_smoke: N checks, F failed", and exits with F.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define THREADS 4

static int checks, failures;

static void check(int ok, const char *name, const char *what)
{
	checks++;
	if (ok) {
		printf("PASS %s\n", name);
	} else {
		failures++;
		printf("FAIL %s: %s\n", name, what);
	}
}

/* Each thread's own copy, reached through the FS base. */
static __thread long thread_value;

static void *worker(void *argument)
{
	long index = (long)argument;
	thread_value = 100 + index;
	for (int i = 0; i < 20; i++)
		sched_yield();
	/* Still ours after the other threads ran and set theirs. */
	return (void *)(thread_value == 100 + index ? thread_value * 2 : -1);
}

/* A gate the workers wait at until the main thread opens it for all of
 * them with one broadcast. musl wakes the first waiter and has each woken
 * one hand the next to the mutex's futex (FUTEX_REQUEUE); a kernel
 * without requeue leaves all but one asleep. */
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_opened = PTHREAD_COND_INITIALIZER;
static pthread_cond_t gate_reached = PTHREAD_COND_INITIALIZER;
static int gate_open, waiting_at_gate;

static void *wait_at_gate(void *unused)
{
	(void)unused;
	pthread_mutex_lock(&gate_lock);
	waiting_at_gate++;
	pthread_cond_signal(&gate_reached);
	while (!gate_open)
		pthread_cond_wait(&gate_opened, &gate_lock);
	pthread_mutex_unlock(&gate_lock);
	return NULL;
}

/* How many of THREADS gate waiters the broadcast let through within 10 s. */
static int open_gate(void)
{
	pthread_t threads[THREADS];
	int started = 0, through = 0;
	while (started < THREADS &&
	       pthread_create(&threads[started], NULL, wait_at_gate, NULL) == 0)
		started++;
	pthread_mutex_lock(&gate_lock);
	/* Once every worker is counted and the lock is back here, each of
	 * them sleeps in pthread_cond_wait. */
	while (waiting_at_gate < started)
		pthread_cond_wait(&gate_reached, &gate_lock);
	gate_open = 1;
	pthread_cond_broadcast(&gate_opened);
	pthread_mutex_unlock(&gate_lock);
	struct timespec deadline;
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 10;
	for (int i = 0; i < started; i++)
		through += pthread_timedjoin_np(threads[i], NULL, &deadline) == 0;
	return through;
}

int main(int argc, char **argv)
{
	pthread_t threads[THREADS];
	int joined = 0;

	check(argc >= 1 && argv[argc] == NULL && strstr(argv[0], "libc_smoke"),
	      "argv", "argv is not the program's name and a null");

	thread_value = 7;
	for (long i = 0; i < THREADS; i++)
		if (pthread_create(&threads[i], NULL, worker, (void *)i) != 0)
			break;
	for (long i = 0; i < THREADS; i++) {
		void *result;
		if (pthread_join(threads[i], &result) == 0 &&
		    (long)result == (100 + i) * 2)
			joined++;
	}
	check(joined == THREADS, "pthreads",
	      "a thread did not return its own thread-local value");
	check(thread_value == 7, "tls", "the main thread's TLS changed");

	check(open_gate() == THREADS, "condvar_broadcast",
	      "a broadcast left waiters asleep for 10 s");

	size_t size = 1 << 20;
	unsigned char *memory = malloc(size);
	int zeroed = memory != NULL;
	if (memory) {
		memset(memory, 0x5a, size);
		zeroed = memory[size - 1] == 0x5a;
		free(memory);
	}
	check(zeroed, "malloc", "a megabyte could not be allocated and used");

	errno = 0;
	long written = syscall(SYS_write, 1, (void *)0xffff800000000000ul, 16);
	check(written == -1 && errno == EFAULT, "write_bad_pointer",
	      "write from a kernel address did not fail with EFAULT");

	errno = 0;
	long unknown = syscall(999);
	check(unknown == -1 && errno == ENOSYS, "unknown_call",
	      "an unknown system call did not fail with ENOSYS");

	printf("libc_smoke: %d checks, %d failed\n", checks, failures);
	return failures;
}
