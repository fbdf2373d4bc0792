/* sizemix.c — many sizes, many threads (the pattern of shbench-like tests): THREADS
 * workers each run ROUNDS rounds. A round picks a size range (a random power-of-two band
 * between 8 B and MAXSIZE) and a count, allocates that many blocks of random sizes in the
 * band, writes them, frees every other one, allocates into the gaps with sizes of the
 * next band, then frees the whole set in reverse order of allocation. Blocks of one
 * round live for a while beside those of other bands, so every size class is in use at
 * once across the threads.
 * usage: sizemix THREADS ROUNDS [MAXSIZE]
 * prints: ops_per_sec=... elapsed=... ops=... */
#include "benchlib.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define USAGE  "THREADS ROUNDS [MAXSIZE]"
#define MAXSET 2000

struct sm_worker {
	pthread_t tid;
	long rounds;
	size_t maxsize;
	uint64_t seed;
	double ops;
} BENCH_LINE_ALIGNED;

/* A size in the band [lo, 2 lo) for lo = 8 << band, at most maxsize. */
static size_t sm_size(struct bench_rng *rng, unsigned band, size_t maxsize)
{
	size_t lo = (size_t)8 << band;
	size_t s = lo + (size_t)(bench_rng_next(rng) % lo);
	return s > maxsize ? maxsize : s;
}

static unsigned char *sm_alloc(size_t size, unsigned char tag)
{
	unsigned char *p = malloc(size);
	if (!p)
		bench_die("malloc");
	p[0] = tag;
	p[size - 1] = tag;
	if (size > 64)
		memset(p + 1, tag, 62);
	return p;
}

static void *sm_run(void *arg)
{
	struct sm_worker *w = arg;
	struct bench_rng rng;
	bench_rng_seed(&rng, w->seed);
	unsigned bands = 0;
	while (((size_t)8 << (bands + 1)) <= w->maxsize)
		bands++;
	unsigned char **set = malloc(MAXSET * sizeof(*set));
	if (!set)
		bench_die("malloc");
	double ops = 0;
	for (long r = 0; r < w->rounds; r++) {
		/* small bands are picked more often: most programs' blocks are small */
		unsigned band = (unsigned)(bench_rng_next(&rng) % (bands + 1));
		band = (unsigned)(bench_rng_next(&rng) % (band + 1));
		size_t n = 100 + (size_t)(bench_rng_next(&rng) % (MAXSET - 100));
		if (band > 8)
			n /= 8; /* fewer of the large ones */
		for (size_t i = 0; i < n; i++)
			set[i] = sm_alloc(sm_size(&rng, band, w->maxsize), (unsigned char)i);
		for (size_t i = 0; i < n; i += 2)
			free(set[i]);
		unsigned next = band < bands ? band + 1 : 0;
		for (size_t i = 0; i < n; i += 2)
			set[i] = sm_alloc(sm_size(&rng, next, w->maxsize), (unsigned char)r);
		for (size_t i = n; i-- > 0;) {
			if (set[i][0] != (unsigned char)(i & 1 ? i : (size_t)r))
				bench_die("block contents");
			free(set[i]);
		}
		ops += 2.0 * (double)n + (double)n; /* n + n/2 mallocs and as many frees */
	}
	free(set);
	w->ops = ops;
	return NULL;
}

int main(int argc, char **argv)
{
	long threads = bench_arg(argc, argv, 1, 4, USAGE);
	long rounds = bench_arg(argc, argv, 2, 2000, USAGE);
	long maxsize = bench_arg(argc, argv, 3, 8192, USAGE);
	if (maxsize < 16)
		maxsize = 16;
	struct sm_worker *w = bench_workers((size_t)threads, sizeof(*w));
	double t0 = bench_now();
	for (long t = 0; t < threads; t++) {
		w[t].rounds = rounds;
		w[t].maxsize = (size_t)maxsize;
		w[t].seed = (uint64_t)t * 7 + 3;
		if (pthread_create(&w[t].tid, NULL, sm_run, &w[t]) != 0)
			bench_die("pthread_create");
	}
	double ops = 0;
	for (long t = 0; t < threads; t++) {
		pthread_join(w[t].tid, NULL);
		ops += w[t].ops;
	}
	double elapsed = bench_now() - t0;
	free(w);
	printf("ops_per_sec=%.0f elapsed=%.6f ops=%.0f\n", ops / elapsed, elapsed, ops);
	return 0;
}
