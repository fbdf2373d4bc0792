/* cache_scratch.c — passive false sharing (after Hoard's cache-scratch): the main thread
 * allocates THREADS small objects back to back and hands one to each worker; each worker
 * frees it, then ITER times allocates an object of SIZE bytes, writes it WRITES times and
 * frees it. An allocator that gives a worker memory from a cache line another worker also
 * writes makes the lines bounce between cores.
 * usage: cache_scratch THREADS ITER WRITES [SIZE]
 * prints: ops_per_sec=... elapsed=... ops=... */
#include "benchlib.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define USAGE "THREADS ITER WRITES [SIZE]"

struct scratch_worker {
	pthread_t tid;
	char *initial; /* allocated by the main thread, freed by the worker */
	long iter;
	long writes;
	size_t size;
};

static void *scratch_run(void *arg)
{
	struct scratch_worker *w = arg;
	free(w->initial);
	for (long i = 0; i < w->iter; i++) {
		volatile char *p = malloc(w->size);
		if (!p)
			bench_die("malloc");
		for (long j = 0; j < w->writes; j++)
			for (size_t k = 0; k < w->size; k++)
				p[k] = (char)(p[k] + (char)j);
		free((void *)p);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	long threads = bench_arg(argc, argv, 1, 2, USAGE);
	long iter = bench_arg(argc, argv, 2, 10000, USAGE);
	long writes = bench_arg(argc, argv, 3, 100, USAGE);
	long size = bench_arg(argc, argv, 4, 8, USAGE);
	struct scratch_worker *w = calloc((size_t)threads, sizeof(*w));
	if (!w)
		bench_die("calloc");
	for (long t = 0; t < threads; t++) {
		w[t].initial = malloc((size_t)size);
		if (!w[t].initial)
			bench_die("malloc");
		w[t].iter = iter;
		w[t].writes = writes;
		w[t].size = (size_t)size;
	}
	double t0 = bench_now();
	for (long t = 0; t < threads; t++)
		if (pthread_create(&w[t].tid, NULL, scratch_run, &w[t]) != 0)
			bench_die("pthread_create");
	for (long t = 0; t < threads; t++)
		pthread_join(w[t].tid, NULL);
	double elapsed = bench_now() - t0;
	free(w);
	double total = (double)threads * (double)iter;
	printf("ops_per_sec=%.0f elapsed=%.6f ops=%.0f\n", total / elapsed, elapsed, total);
	return 0;
}
