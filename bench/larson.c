/* larson.c — larson-like server churn: THREADS workers each own SLOTS blocks of random
 * size (16..MAXSIZE bytes); each operation frees a random slot and refills it. After OPS
 * operations a worker's slots are handed to a fresh thread (a new "connection"), which
 * frees blocks the previous thread allocated. Runs GENS such generations.
 * usage: larson THREADS SLOTS OPS GENS [MAXSIZE]
 * prints: ops_per_sec=... elapsed=... ops=..., and peak_rss_kb=... at exit */
#include "benchlib.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define USAGE "THREADS SLOTS OPS GENS [MAXSIZE]"

struct larson_worker {
	pthread_t tid;        /* thread of the current generation */
	void **slots;         /* blocks owned by this worker, handed between generations */
	size_t nslots;        /* length of slots */
	long ops;             /* operations per generation */
	size_t maxsize;       /* largest block size */
	struct bench_rng rng; /* carried across generations */
} BENCH_LINE_ALIGNED;

static void *larson_run(void *arg)
{
	struct larson_worker *w = arg;
	for (long i = 0; i < w->ops; i++) {
		size_t k = (size_t)(bench_rng_next(&w->rng) % w->nslots);
		size_t size = bench_rng_range(&w->rng, 16, w->maxsize);
		free(w->slots[k]);
		unsigned char *p = malloc(size);
		if (!p)
			bench_die("malloc");
		p[0] = (unsigned char)i;
		p[size - 1] = (unsigned char)k;
		w->slots[k] = p;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	bench_report_peak_at_exit();
	long threads = bench_arg(argc, argv, 1, 2, USAGE);
	long nslots = bench_arg(argc, argv, 2, 1000, USAGE);
	long ops = bench_arg(argc, argv, 3, 100000, USAGE);
	long gens = bench_arg(argc, argv, 4, 10, USAGE);
	long maxsize = bench_arg_range(argc, argv, 5, 512, 16, BENCH_ARG_MAX, USAGE);
	struct larson_worker *w = bench_workers((size_t)threads, sizeof(*w));
	for (long t = 0; t < threads; t++) {
		w[t].nslots = (size_t)nslots;
		w[t].ops = ops;
		w[t].maxsize = (size_t)maxsize;
		bench_rng_seed(&w[t].rng, (uint64_t)t + 1);
		w[t].slots = calloc((size_t)nslots, sizeof(void *));
		if (!w[t].slots)
			bench_die("calloc");
		for (long k = 0; k < nslots; k++) {
			w[t].slots[k] = malloc(bench_rng_range(&w[t].rng, 16, (size_t)maxsize));
			if (!w[t].slots[k])
				bench_die("malloc");
		}
	}
	double t0 = bench_now();
	for (long g = 0; g < gens; g++) {
		for (long t = 0; t < threads; t++)
			if (pthread_create(&w[t].tid, NULL, larson_run, &w[t]) != 0)
				bench_die("pthread_create");
		for (long t = 0; t < threads; t++)
			pthread_join(w[t].tid, NULL);
	}
	double elapsed = bench_now() - t0;
	for (long t = 0; t < threads; t++) {
		for (long k = 0; k < nslots; k++)
			free(w[t].slots[k]);
		free(w[t].slots);
	}
	free(w);
	double total = (double)threads * (double)ops * (double)gens;
	printf("ops_per_sec=%.0f elapsed=%.6f ops=%.0f\n", total / elapsed, elapsed, total);
	return 0;
}
