/*
 * A C program written for Linux from its manual pages, built static with
 * musl and with glibc and run unmodified on this kernel: the C
 * library's own start-up (the ELF entry stack and auxiliary vector, TLS
 * set up with arch_prctl, brk or mmap for malloc), pthreads (clone with
 * CLONE_SETTLS and CLONE_CHILD_CLEARTID, futexes, the clear-tid wake that
 * pthread_join sleeps on), and two system calls made wrong on purpose.
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
