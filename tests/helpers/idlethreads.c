/* idlethreads.c — what threads that never call the allocator cost liballoc (tests/e2e/
 * lastthread.bats). Usage: idlethreads idle|alloc N. Starts N threads at once; each tells
 * main it runs (a byte down a pipe) and then, in mode alloc, allocates and frees a block;
 * they all wait on a second pipe until main read the process's metadata_bytes
 * (liballoc_stats) and let them go. Prints "metadata +BYTES" (the growth over the count
 * before the first thread started). Exit status 0, 1 on a failure (says which), 2 on bad
 * arguments or without liballoc preloaded. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "liballoc_shm.h"

static int started[2], release[2];
static int alloc_mode;

static void *worker(void *arg)
{
	(void)arg;
	char c = 1;
	if (alloc_mode) {
		void *volatile p = malloc(48);
		free(p);
	}
	if (write(started[1], &c, 1) != 1)
		return (void *)1;
	if (read(release[0], &c, 1) != 0) /* 0: main closed its end */
		return (void *)1;
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc == 3 ? atoi(argv[2]) : 0;
	if (n < 1 || n > 1000 || (strcmp(argv[1], "idle") && strcmp(argv[1], "alloc"))) {
		fprintf(stderr, "usage: idlethreads idle|alloc N (1..1000)\n");
		return 2;
	}
	alloc_mode = !strcmp(argv[1], "alloc");
	int (*stats)(struct la_counters *) =
	        (int (*)(struct la_counters *))dlsym(RTLD_DEFAULT, "liballoc_stats");
	if (!stats) {
		fprintf(stderr, "idlethreads: liballoc is not preloaded\n");
		return 2;
	}
	pthread_t *t = malloc(sizeof(*t) * (size_t)n);
	if (!t || pipe(started) || pipe(release)) {
		perror("idlethreads");
		return 1;
	}
	struct la_counters before, after;
	if (stats(&before)) {
		fprintf(stderr, "idlethreads: liballoc_stats failed\n");
		return 1;
	}
	for (int i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, worker, NULL)) {
			fprintf(stderr, "idlethreads: pthread_create %d failed\n", i);
			return 1;
		}
	for (int i = 0; i < n; i++) {
		char c;
		if (read(started[0], &c, 1) != 1) {
			fprintf(stderr, "idlethreads: a thread did not start\n");
			return 1;
		}
	}
	if (stats(&after)) {
		fprintf(stderr, "idlethreads: liballoc_stats failed\n");
		return 1;
	}
	close(release[1]);
	for (int i = 0; i < n; i++) {
		void *r;
		if (pthread_join(t[i], &r) || r) {
			fprintf(stderr, "idlethreads: thread %d failed\n", i);
			return 1;
		}
	}
	free(t);
	printf("metadata +%lld\n", (long long)(after.metadata_bytes - before.metadata_bytes));
	return 0;
}
