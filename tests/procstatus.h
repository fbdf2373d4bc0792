/* procstatus.h — numbers from a /proc status file, for the test programs (header only). */
#ifndef LA_TESTS_PROCSTATUS_H
#define LA_TESTS_PROCSTATUS_H

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* Minor faults of this process's other threads (the control thread's, ASan's), summed from
 * /proc/self/task/TID/stat (field 10). A test that reads RssAnon around a trim calls it
 * before and after: RssAnon is the whole process's, and the control thread's first sweep
 * of stale segments (a second after start) faults in a page of its stack, which a busy
 * machine can put inside the window (heap's huge-range trim failed 5 of 15 runs at load 12,
 * always by one page; none with LIBALLOC_CONTROL=0). */
static inline long others_minflt(void)
{
	DIR *d = opendir("/proc/self/task");
	long sum = 0;
	struct dirent *e;
	pid_t self = gettid();
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.' || atol(e->d_name) == self)
			continue;
		char path[300], line[512];
		snprintf(path, sizeof(path), "/proc/self/task/%s/stat", e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue; /* the thread exited */
		char *rp = fgets(line, sizeof(line), f) ? strrchr(line, ')') : NULL;
		long minflt = 0;
		/* after the name: state ppid pgrp session tty tpgid flags minflt */
		if (rp && sscanf(rp + 1, " %*c %*d %*d %*d %*d %*d %*u %ld", &minflt) == 1)
			sum += minflt;
		fclose(f);
	}
	if (d)
		closedir(d);
	return sum;
}

/* The status file's path of this process's control thread (the thread named liballoc-ctl)
 * into path (cap bytes). The thread names itself once it runs, which on a loaded machine
 * may take a while after the library started it: looked for every 10 ms, `tries` times.
 * false if it was not found. */
static inline bool control_task_status(char *path, size_t cap, int tries)
{
	for (int t = 0; t < tries; t++) {
		if (t)
			usleep(10000);
		DIR *d = opendir("/proc/self/task");
		bool found = false;
		for (struct dirent *e; d && !found && (e = readdir(d));) {
			char comm[64] = "";
			snprintf(path, cap, "/proc/self/task/%s/comm", e->d_name);
			FILE *f = fopen(path, "r");
			if (f && fgets(comm, sizeof(comm), f) &&
			    strncmp(comm, "liballoc-ctl", 12) == 0) {
				snprintf(path, cap, "/proc/self/task/%s/status", e->d_name);
				found = true;
			}
			if (f)
				fclose(f);
		}
		if (d)
			closedir(d);
		if (found)
			return true;
	}
	path[0] = 0;
	return false;
}

#endif
