/* mech_ebizzy.c — mechanism 1, ebizzy-shaped load (issue 4): THREADS threads repeatedly
 * pick a random record of a shared table (RECORDS records of 192 KiB), copy it into a
 * freshly malloc'd buffer, scan the copy for a key, and free it. Each thread handles ITER
 * records; the figure is records per second.
 * usage: mech_ebizzy THREADS ITER [RECORDS] [RECORD_KB]
 * prints: ops_per_sec=... elapsed=... minflt=... */
#include "benchlib.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define USAGE "THREADS ITER [RECORDS] [RECORD_KB]"

struct ebizzy_table {
	uint64_t **records; /* read-only after setup */
	size_t nrecords;
	size_t words; /* 64-bit words per record */
	long iter;
};

struct ebizzy_worker {
	pthread_t tid;
	struct ebizzy_table *table;
	uint64_t seed;
	uint64_t found; /* keys found, so the scan cannot be optimized away */
} BENCH_LINE_ALIGNED;

static void *ebizzy_run(void *arg)
{
	struct ebizzy_worker *w = arg;
	struct ebizzy_table *t = w->table;
	struct bench_rng rng;
	bench_rng_seed(&rng, w->seed);
	size_t bytes = t->words * sizeof(uint64_t);
	for (long i = 0; i < t->iter; i++) {
		const uint64_t *src = t->records[bench_rng_next(&rng) % t->nrecords];
		uint64_t *copy = malloc(bytes);
		if (!copy)
			bench_die("malloc");
		memcpy(copy, src, bytes);
		uint64_t key = bench_rng_next(&rng) & 0xffff;
		for (size_t j = 0; j < t->words; j++)
			if ((copy[j] & 0xffff) == key)
				w->found++;
		free(copy);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	long threads = bench_arg(argc, argv, 1, 2, USAGE);
	long iter = bench_arg(argc, argv, 2, 2000, USAGE);
	long nrecords = bench_arg(argc, argv, 3, 64, USAGE);
	long record_kb = bench_arg(argc, argv, 4, 192, USAGE);
	struct ebizzy_table t = {.nrecords = (size_t)nrecords,
	                         .words = (size_t)record_kb * 1024 / sizeof(uint64_t),
	                         .iter = iter};
	struct bench_rng rng;
	bench_rng_seed(&rng, 5);
	t.records = calloc(t.nrecords, sizeof(*t.records));
	if (!t.records)
		bench_die("calloc");
	for (size_t r = 0; r < t.nrecords; r++) {
		t.records[r] = malloc(t.words * sizeof(uint64_t));
		if (!t.records[r])
			bench_die("malloc");
		for (size_t j = 0; j < t.words; j++)
			t.records[r][j] = bench_rng_next(&rng);
	}
	struct ebizzy_worker *w = bench_workers((size_t)threads, sizeof(*w));
	long flt0 = bench_minflt();
	double t0 = bench_now();
	for (long i = 0; i < threads; i++) {
		w[i].table = &t;
		w[i].seed = (uint64_t)i + 100;
		if (pthread_create(&w[i].tid, NULL, ebizzy_run, &w[i]) != 0)
			bench_die("pthread_create");
	}
	uint64_t found = 0;
	for (long i = 0; i < threads; i++) {
		pthread_join(w[i].tid, NULL);
		found += w[i].found;
	}
	double elapsed = bench_now() - t0;
	double total = (double)threads * (double)iter;
	printf("ops_per_sec=%.0f elapsed=%.6f minflt=%ld found=%llu\n", total / elapsed, elapsed,
	       bench_minflt() - flt0, (unsigned long long)found);
	for (size_t r = 0; r < t.nrecords; r++)
		free(t.records[r]);
	free(t.records);
	free(w);
	return 0;
}
