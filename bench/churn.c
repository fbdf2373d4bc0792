/* churn.c — single-threaded small-object churn: a working set of SLOTS blocks (16..256
 * bytes, skewed small) where each step either replaces a random block or, one step in 16,
 * allocates a burst of 32 short-lived blocks and frees them in reverse order (the LIFO
 * pattern of parsers and request handlers).
 * usage: churn SLOTS OPS
 * prints: ops_per_sec=... elapsed=... ops=..., and peak_rss_kb=... at exit */
#include "benchlib.h"

#include <stdio.h>
#include <stdlib.h>

#define USAGE "SLOTS OPS"
#define BURST 32

static size_t churn_size(struct bench_rng *rng)
{
	uint64_t r = bench_rng_next(rng);
	/* 3 of 4 blocks are 16..64 bytes, the rest up to 256 */
	return (r & 3) ? 16 + (size_t)((r >> 8) % 49) : 16 + (size_t)((r >> 8) % 241);
}

int main(int argc, char **argv)
{
	bench_report_peak_at_exit();
	long nslots = bench_arg(argc, argv, 1, 10000, USAGE);
	long ops = bench_arg(argc, argv, 2, 10000000, USAGE);
	struct bench_rng rng;
	bench_rng_seed(&rng, 42);
	void **slots = calloc((size_t)nslots, sizeof(void *));
	if (!slots)
		bench_die("calloc");
	for (long k = 0; k < nslots; k++)
		if (!(slots[k] = malloc(churn_size(&rng))))
			bench_die("malloc");
	double t0 = bench_now();
	long done = 0;
	while (done < ops) {
		uint64_t r = bench_rng_next(&rng);
		if ((r & 15) == 0) {
			void *burst[BURST];
			for (int i = 0; i < BURST; i++) {
				unsigned char *p = malloc(churn_size(&rng));
				if (!p)
					bench_die("malloc");
				p[0] = (unsigned char)i;
				burst[i] = p;
			}
			for (int i = BURST - 1; i >= 0; i--)
				free(burst[i]);
			done += 2 * BURST;
		} else {
			size_t k = (size_t)((r >> 4) % (uint64_t)nslots);
			size_t size = churn_size(&rng);
			free(slots[k]);
			unsigned char *p = malloc(size);
			if (!p)
				bench_die("malloc");
			p[size - 1] = (unsigned char)r;
			slots[k] = p;
			done += 2;
		}
	}
	double elapsed = bench_now() - t0;
	for (long k = 0; k < nslots; k++)
		free(slots[k]);
	free(slots);
	printf("ops_per_sec=%.0f elapsed=%.6f ops=%ld\n", (double)done / elapsed, elapsed, done);
	return 0;
}
