/*
 * Linux's count of the interrupts of one kind: the sum over all CPUs of a
 * row of /proc/interrupts ("TLB:" for TLB shootdowns, "CAL:" for other
 * function calls). This kernel has no /proc; its programs ask it directly
 * (shootdown.h).
 */
#ifndef PROC_INTERRUPTS_H
#define PROC_INTERRUPTS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The row's total, or -1 if /proc/interrupts or the row is missing. */
static inline long long proc_interrupts(const char *row)
{
	FILE *file = fopen("/proc/interrupts", "r");
	if (!file)
		return -1;
	char line[4096];
	long long total = -1;
	size_t row_len = strlen(row);
	while (fgets(line, sizeof(line), file)) {
		char *at = line;
		while (*at == ' ')
			at++;
		if (strncmp(at, row, row_len) != 0)
			continue;
		at += row_len;
		total = 0;
		for (;;) {
			char *end;
			long long count = strtoll(at, &end, 10);
			if (end == at)
				break;
			total += count;
			at = end;
		}
		break;
	}
	fclose(file);
	return total;
}

#endif
