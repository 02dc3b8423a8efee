/*
 * The /init of the initramfs that `bench --against linux` boots Linux
 * with: it runs one program of the initramfs the way this kernel's exec=
 * does, and reports what the program cost Linux in TLB shootdown IPIs.
 *
 * The kernel command line names the program: `bench.exec=NAME:ARG,ARG`
 * (commas become separate arguments, as with exec= on this kernel). init
 * mounts /proc and /dev, reads the TLB and function-call rows of
 * /proc/interrupts (summed over the CPUs), runs /NAME with its arguments
 * and waits for it, reads the rows again, prints
 *
 *   linux-init: exited=STATUS tlb_shootdown_ipis=N function_call_ipis=M
 *
 * and powers the machine off. Linux has no counter of INVLPGB broadcasts:
 * they interrupt nobody.
 *
 * With `bench.swap=MEGABYTES` it first sets up swap, for a program that
 * pages memory out (MADV_PAGEOUT of shared memory does nothing without
 * it): it loads the kernel modules the initramfs holds as module-N-NAME.ko.xz
 * (zram and what it depends on, in N order), gives the zram0 device that
 * many megabytes, writes a swap signature on it and turns it on.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/swap.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../proc_interrupts.h"

#define MAX_ARGS 32
#define MAX_MODULES 16
#define PAGE 4096
/* finit_module's flag for a compressed module file, which the kernel
 * decompresses itself (CONFIG_MODULE_DECOMPRESS). */
#define MODULE_INIT_COMPRESSED_FILE 4

/* The value of `key=` on the kernel command line, copied into `value`. */
static int cmdline_value(const char *key, char *value, size_t size)
{
	char line[4096];
	FILE *file = fopen("/proc/cmdline", "r");
	if (!file || !fgets(line, sizeof(line), file)) {
		if (file)
			fclose(file);
		return -1;
	}
	fclose(file);
	size_t key_len = strlen(key);
	for (char *word = strtok(line, " \n"); word; word = strtok(NULL, " \n")) {
		if (strncmp(word, key, key_len) == 0 && word[key_len] == '=') {
			snprintf(value, size, "%s", word + key_len + 1);
			return 0;
		}
	}
	return -1;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Loads every /module-*.ko.xz, in name order; 0, or -1 after saying why. */
static int load_modules(void)
{
	char *names[MAX_MODULES];
	int count = 0;
	DIR *root = opendir("/");
	if (!root)
		return -1;
	for (struct dirent *entry; (entry = readdir(root)) && count < MAX_MODULES;) {
		if (strncmp(entry->d_name, "module-", 7) == 0)
			names[count++] = strdup(entry->d_name);
	}
	closedir(root);
	qsort(names, count, sizeof(names[0]), by_name);
	for (int i = 0; i < count; i++) {
		char path[300];
		snprintf(path, sizeof(path), "/%s", names[i]);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		long loaded = fd < 0 ? -1 : syscall(SYS_finit_module, fd, "",
						     MODULE_INIT_COMPRESSED_FILE);
		if (loaded != 0 && errno != EEXIST) {
			printf("linux-init: cannot load %s: %s\n", path, strerror(errno));
			return -1;
		}
		if (fd >= 0)
			close(fd);
	}
	return count > 0 ? 0 : -1;
}

/* Writes `text` into the sysfs file `path`; 0 or -1. */
static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY);
	if (fd < 0)
		return -1;
	ssize_t written = write(fd, text, strlen(text));
	close(fd);
	return written == (ssize_t)strlen(text) ? 0 : -1;
}

/* Writes a swap signature (version 1, no bad pages) over the first page of
 * the device `path` of `pages` pages. */
static int write_swap_signature(const char *path, uint32_t pages)
{
	unsigned char page[PAGE] = { 0 };
	/* After 1024 bytes of boot block: version, last page, bad pages. */
	uint32_t header[3] = { 1, pages - 1, 0 };
	memcpy(page + 1024, header, sizeof(header));
	memcpy(page + PAGE - 10, "SWAPSPACE2", 10);
	int fd = open(path, O_WRONLY);
	if (fd < 0)
		return -1;
	ssize_t written = write(fd, page, sizeof(page));
	fsync(fd);
	close(fd);
	return written == PAGE ? 0 : -1;
}

/* Swap on zram0, `megabytes` large; 0, or -1 after saying why. */
static int zram_swap(long megabytes)
{
	mkdir("/sys", 0555);
	if (mount("sysfs", "/sys", "sysfs", 0, NULL) != 0 || load_modules() != 0) {
		printf("linux-init: no zram: cannot mount /sys or load the modules\n");
		return -1;
	}
	char size[32];
	snprintf(size, sizeof(size), "%ldM", megabytes);
	if (write_file("/sys/block/zram0/disksize", size) != 0) {
		printf("linux-init: cannot size /dev/zram0: %s\n", strerror(errno));
		return -1;
	}
	/* devtmpfs makes the node; give it a moment. */
	for (int tries = 0; access("/dev/zram0", F_OK) != 0 && tries < 100; tries++)
		usleep(10000);
	uint32_t pages = (uint32_t)(megabytes * 1024 * 1024 / PAGE);
	if (write_swap_signature("/dev/zram0", pages) != 0 || swapon("/dev/zram0", 0) != 0) {
		printf("linux-init: cannot swap on /dev/zram0: %s\n", strerror(errno));
		return -1;
	}
	printf("linux-init: swap on /dev/zram0, %ld MiB\n", megabytes);
	return 0;
}

static void power_off(void)
{
	fflush(stdout);
	sync();
	reboot(RB_POWER_OFF);
	for (;;)
		pause();
}

int main(void)
{
	mkdir("/proc", 0555);
	mkdir("/dev", 0755);
	mount("proc", "/proc", "proc", 0, NULL);
	if (mount("devtmpfs", "/dev", "devtmpfs", 0, NULL) == 0) {
		int console = open("/dev/console", O_RDWR);
		if (console >= 0) {
			dup2(console, 0);
			dup2(console, 1);
			dup2(console, 2);
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("linux-init: started\n");

	char swap[32];
	if (cmdline_value("bench.swap", swap, sizeof(swap)) == 0 && zram_swap(atol(swap)) != 0)
		power_off();

	char exec[1024];
	if (cmdline_value("bench.exec", exec, sizeof(exec)) != 0) {
		printf("linux-init: no bench.exec=NAME:ARGS on the command line\n");
		power_off();
	}
	char path[1100];
	char *argv[MAX_ARGS + 2];
	int argc = 0;
	char *args = strchr(exec, ':');
	if (args)
		*args++ = '\0';
	snprintf(path, sizeof(path), "/%s", exec);
	argv[argc++] = exec;
	for (char *arg = args ? strtok(args, ",") : NULL; arg && argc <= MAX_ARGS;
	     arg = strtok(NULL, ","))
		argv[argc++] = arg;
	argv[argc] = NULL;

	long long tlb_before = proc_interrupts("TLB:"), call_before = proc_interrupts("CAL:");
	pid_t child = fork();
	if (child == 0) {
		execv(path, argv);
		printf("linux-init: cannot run %s\n", path);
		_exit(127);
	}
	int status = 0;
	if (child < 0 || waitpid(child, &status, 0) != child)
		status = -1;
	long long tlb_after = proc_interrupts("TLB:"), call_after = proc_interrupts("CAL:");
	printf("linux-init: exited=%d tlb_shootdown_ipis=%lld function_call_ipis=%lld\n",
	       WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
	       tlb_after - tlb_before, call_after - call_before);
	power_off();
	return 0;
}
