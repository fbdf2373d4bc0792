/* procstatus.h — numbers from a /proc status file, for the test programs (header only). */
#ifndef LA_TESTS_PROCSTATUS_H
#define LA_TESTS_PROCSTATUS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The number after key (e.g. "VmRSS:") in a /proc status file; -1 if absent. */
static inline long status_value(const char *path, const char *key)
{
	FILE *f = fopen(path, "r");
	char line[256];
	long v = -1;
	size_t n = strlen(key);
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, key, n) == 0)
			v = atol(line + n);
	if (f)
		fclose(f);
	return v;
}

/* The same from this process's own status (kB for the Vm* keys). */
static inline long status_kib(const char *key)
{
	return status_value("/proc/self/status", key);
}

#endif
