/* frag.c — long-lived fragmentation: OPS allocations of many sizes (70% 16..256 B, 25%
 * 256 B..4 KiB, 5% 4..64 KiB), each with a random lifetime (most short, some up to the
 * whole run); 1 block in 256 is a survivor that lives to the end. Expired blocks are freed
 * through a timing wheel. At the end every non-survivor is freed and the resident size is
 * read: a fragmenting allocator keeps pages pinned by the scattered survivors.
 * usage: frag OPS [MAXLIFE]
 * prints: ops_per_sec=... elapsed=... peak_rss_kb=... final_rss_kb=... survivors_kb=... */
#include "benchlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define USAGE "OPS [MAXLIFE]"

/* Every block starts with this header: the wheel's list link. */
struct frag_block {
	struct frag_block *next;
	size_t size;
};

static size_t frag_size(struct bench_rng *rng)
{
	uint64_t r = bench_rng_next(rng) % 100;
	if (r < 70)
		return bench_rng_range(rng, 16, 256);
	if (r < 95)
		return bench_rng_range(rng, 257, 4096);
	return bench_rng_range(rng, 4097, 65536);
}

static size_t frag_life(struct bench_rng *rng, size_t maxlife)
{
	uint64_t r = bench_rng_next(rng) % 100;
	if (r < 80)
		return bench_rng_range(rng, 1, 100);
	if (r < 97)
		return bench_rng_range(rng, 100, maxlife / 10);
	return bench_rng_range(rng, maxlife / 10, maxlife - 1);
}

int main(int argc, char **argv)
{
	long ops = bench_arg(argc, argv, 1, 2000000, USAGE);
	long maxlife = bench_arg_range(argc, argv, 2, 200000, 1000, BENCH_ARG_MAX, USAGE);
	struct bench_rng rng;
	bench_rng_seed(&rng, 11);
	struct frag_block **wheel = calloc((size_t)maxlife, sizeof(*wheel));
	if (!wheel)
		bench_die("calloc");
	struct frag_block *survivors = NULL;
	size_t survivor_bytes = 0;
	double t0 = bench_now();
	for (long i = 0; i < ops; i++) {
		size_t slot = (size_t)(i % maxlife);
		struct frag_block *b = wheel[slot];
		wheel[slot] = NULL;
		while (b) {
			struct frag_block *next = b->next;
			free(b);
			b = next;
		}
		size_t size = frag_size(&rng);
		b = malloc(size);
		if (!b)
			bench_die("malloc");
		memset(b, (int)(i & 0xff), size);
		b->size = size;
		if (bench_rng_next(&rng) % 256 == 0) {
			b->next = survivors;
			survivors = b;
			survivor_bytes += size;
		} else {
			size_t at = (slot + frag_life(&rng, (size_t)maxlife)) % (size_t)maxlife;
			b->next = wheel[at];
			wheel[at] = b;
		}
	}
	double elapsed = bench_now() - t0;
	for (long s = 0; s < maxlife; s++) {
		struct frag_block *b = wheel[s];
		while (b) {
			struct frag_block *next = b->next;
			free(b);
			b = next;
		}
	}
	free(wheel);
	long peak = bench_status_kb("VmHWM");
	long final = bench_status_kb("VmRSS");
	printf("ops_per_sec=%.0f elapsed=%.6f peak_rss_kb=%ld final_rss_kb=%ld survivors_kb=%zu\n",
	       (double)ops / elapsed, elapsed, peak, final, survivor_bytes / 1024);
	/* the survivors are deliberately still live when the RSS is read */
	while (survivors) {
		struct frag_block *next = survivors->next;
		free(survivors);
		survivors = next;
	}
	return 0;
}
