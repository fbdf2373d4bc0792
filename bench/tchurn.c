/* tchurn.c — thread churn: ROUNDS rounds, each starting THREADS threads that each malloc
 * ALLOCS blocks of 16..512 bytes (each written at both ends), free them in allocation
 * order (each one's first byte checked) and exit; the round joins them before the next
 * starts. So every thread is short-lived and the allocator's per-thread start and exit
 * (cache set-up, flush and release, any bookkeeping it does per thread) decide the time.
 * usage: tchurn ROUNDS THREADS ALLOCS
 * prints: ops_per_sec=... elapsed=... ops=... peak_rss_kb=...  (ops: mallocs + frees) */
#include "benchlib.h"

#include <pthread.h>
#include <stdlib.h>

#define USAGE "ROUNDS THREADS ALLOCS"

struct tc_worker {
	pthread_t tid;
	unsigned char **block; /* ALLOCS slots, made by main once */
	long allocs;
	uint64_t seed;
} BENCH_LINE_ALIGNED;

static void *tc_run(void *arg)
{
	struct tc_worker *w = arg;
	struct bench_rng rng;
	bench_rng_seed(&rng, w->seed);
	for (long i = 0; i < w->allocs; i++) {
		size_t size = bench_rng_range(&rng, 16, 512);
		unsigned char *p = malloc(size);
		if (!p)
			bench_die("malloc");
		p[0] = (unsigned char)i;
		p[size - 1] = (unsigned char)size;
		w->block[i] = p;
	}
	for (long i = 0; i < w->allocs; i++) {
		if (w->block[i][0] != (unsigned char)i)
			bench_die("block contents");
		free(w->block[i]);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	long rounds = bench_arg(argc, argv, 1, 300, USAGE);
	long threads = bench_arg(argc, argv, 2, 8, USAGE);
	long allocs = bench_arg(argc, argv, 3, 500, USAGE);
	struct tc_worker *w = bench_workers((size_t)threads, sizeof(*w));
	for (long t = 0; t < threads; t++) {
		w[t].block = malloc((size_t)allocs * sizeof(*w[t].block));
		if (!w[t].block)
			bench_die("malloc");
		w[t].allocs = allocs;
	}
	double t0 = bench_now();
	for (long r = 0; r < rounds; r++) {
		for (long t = 0; t < threads; t++) {
			w[t].seed = (uint64_t)(r * threads + t + 1);
			if (pthread_create(&w[t].tid, NULL, tc_run, &w[t]) != 0)
				bench_die("pthread_create");
		}
		for (long t = 0; t < threads; t++)
			if (pthread_join(w[t].tid, NULL) != 0)
				bench_die("pthread_join");
	}
	double elapsed = bench_now() - t0;
	long peak = bench_status_kb("VmHWM");
	for (long t = 0; t < threads; t++)
		free(w[t].block);
	free(w);
	bench_report(2 * rounds * threads * allocs, elapsed, peak);
	return 0;
}
