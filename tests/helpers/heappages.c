/* heappages.c — how many pages of its first heap a process that mallocs once has touched,
 * for tests/e2e/startup.bats: it mallocs 32 bytes, writes and frees them, then prints the
 * count of present pages (/proc/self/pagemap) in the mapping that held the block (the heap
 * liballoc made for it) and the mapping's size in pages: "PRESENT PAGES". No stdio: a FILE
 * and its buffer would be blocks of two classes more, each a page of the heap. With the
 * argument `masks` it prints instead the blocked-signal masks (SigBlk, hex) of this thread
 * and of liballoc's control thread, "MAIN CONTROL", once that thread has its name
 * (liballoc-ctl; "MAIN -" if the process has no other thread, or none of that name shows
 * within 30 s). */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include "pagemap.h"

static char maps[1 << 20];

/* What went wrong, on stderr (no stdio, as above), and the exit status 1 */
static int fail(const char *what)
{
	char msg[200];
	int len = snprintf(msg, sizeof(msg), "heappages: %s: %s\n", what, strerror(errno));
	if (write(2, msg, (size_t)len) < 0)
		return 1;
	return 1;
}

/* The whole of a small /proc file into buf (NUL-terminated); its length, or -1. */
static ssize_t slurp(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, size - 1);
	close(fd);
	if (n >= 0)
		buf[n] = 0;
	return n;
}

/* SigBlk of /proc/self/task/TID/status into out (16 hex digits), or "-" */
static void sigblk(const char *tid, char *out, size_t size)
{
	char path[300], st[4096];
	snprintf(path, sizeof(path), "/proc/self/task/%s/status", tid);
	const char *at = slurp(path, st, sizeof(st)) > 0 ? strstr(st, "\nSigBlk:\t") : NULL;
	snprintf(out, size, "%.16s", at ? at + 9 : "-");
}

static int masks(void)
{
	char mine[32], ctl[32] = "-", tid[32];
	snprintf(tid, sizeof(tid), "%d", gettid());
	sigblk(tid, mine, sizeof(mine));
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		DIR *d = opendir("/proc/self/task");
		if (!d)
			return fail("opendir /proc/self/task");
		unsigned others = 0;
		for (struct dirent *e; (e = readdir(d)) && ctl[0] == '-';) {
			char path[300], comm[64];
			if (e->d_name[0] == '.' || strcmp(e->d_name, tid) == 0)
				continue;
			others++;
			snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
			if (slurp(path, comm, sizeof(comm)) > 0 &&
			    strcmp(comm, "liballoc-ctl\n") == 0)
				sigblk(e->d_name, ctl, sizeof(ctl));
		}
		closedir(d);
		if (ctl[0] != '-' || !others) /* found, or no thread to wait for */
			break;
		sched_yield();
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (now.tv_sec - t0.tv_sec < 30);
	char out[80];
	int len = snprintf(out, sizeof(out), "%s %s\n", mine, ctl);
	return write(1, out, (size_t)len) == len ? 0 : 1;
}
int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "masks") == 0)
		return masks();
	char *volatile p = malloc(32);
	if (!p)
		return fail("malloc(32)");
	memset(p, 1, 32);
	uintptr_t at = (uintptr_t)p;
	free(p);
	int fd = open("/proc/self/maps", O_RDONLY);
	if (fd < 0)
		return fail("open /proc/self/maps");
	size_t n = 0;
	ssize_t r;
	while (n < sizeof(maps) - 1 && (r = read(fd, maps + n, sizeof(maps) - 1 - n)) > 0)
		n += (size_t)r;
	close(fd);
	maps[n] = 0;
	unsigned long lo = 0, hi = 0;
	for (char *line = maps; line && *line;) {
		unsigned long a, b;
		if (sscanf(line, "%lx-%lx", &a, &b) == 2 && a <= at && at < b) {
			lo = a;
			hi = b;
			break;
		}
		line = strchr(line, '\n');
		line = line ? line + 1 : NULL;
	}
	if (!hi) {
		errno = ENOENT;
		return fail("no mapping in /proc/self/maps holds the block");
	}
	long page = sysconf(_SC_PAGESIZE);
	int pm = open("/proc/self/pagemap", O_RDONLY);
	if (pm < 0)
		return fail("open /proc/self/pagemap");
	long present = pagemap_present(pm, lo, hi);
	if (present < 0)
		return fail("read /proc/self/pagemap");
	close(pm);
	char out[64];
	int len = snprintf(out, sizeof(out), "%ld %lu\n", present, (hi - lo) / (unsigned long)page);
	return write(1, out, (size_t)len) == len ? 0 : 1;
}
