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
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../proc_interrupts.h"

#define MAX_ARGS 32

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
