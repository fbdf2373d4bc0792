/* growth.c — growth with bulk frees, single-threaded (the shape of programs that work in
 * phases: a collector's sweep, a compiler's per-function pools, a server's request
 * teardown): small blocks of MIN_B..MAX_B bytes are appended to a list, each written (its
 * first 128 bytes at most), and every PERIOD allocations a random nine in ten of the blocks
 * alive are freed, in the list's order, the rest kept in it. With PERIOD 100000 and 32-96 B
 * blocks, each bulk free returns ~6 MiB that went cold since it was written (beyond the
 * caches), and the allocations after it take those blocks again: an allocator that reads
 * the freed blocks to find them (a free list walked block by block) waits for memory once
 * a block, one that finds them from metadata (bitmaps, arrays of pointers) or that reads
 * each one only as it hands it out does not (bench/README.md, "growth"). A checksum of
 * the kept blocks' first bytes is printed so that runs under different allocators can be
 * compared.
 * usage: growth BLOCKS PERIOD [MAX_B MIN_B]
 * prints: ops_per_sec=... elapsed=... allocs=... frees=... live=... sum=..., and
 *         peak_rss_kb=... at exit */
#include "benchlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define USAGE "BLOCKS PERIOD [MAX_B MIN_B]"
#define WRITE 128 /* bytes of each block written at most */

int main(int argc, char **argv)
{
	bench_report_peak_at_exit();
	long blocks = bench_arg(argc, argv, 1, 3000000, USAGE);
	long period = bench_arg(argc, argv, 2, 100000, USAGE);
	size_t max_b = (size_t)bench_arg(argc, argv, 3, 96, USAGE);
	size_t min_b = (size_t)bench_arg(argc, argv, 4, 32, USAGE);
	if (max_b < min_b) {
		fprintf(stderr, "usage: growth %s (MAX_B >= MIN_B)\n", USAGE);
		return 2;
	}
	struct bench_rng rng;
	bench_rng_seed(&rng, 31);
	/* the list holds a period's blocks and about a ninth of a period kept (a bulk free
	 * comes early when it fills all the same) */
	size_t cap = 2 * (size_t)(blocks < period ? blocks : period) + 16;
	unsigned char **list = malloc(cap * sizeof(*list));
	if (!list)
		bench_die("malloc");
	size_t n = 0;
	long frees = 0;
	double t0 = bench_now();
	for (long i = 0; i < blocks; i++) {
		size_t size = bench_rng_range(&rng, min_b, max_b);
		unsigned char *p = malloc(size);
		if (!p)
			bench_die("malloc");
		memset(p, (int)(i & 0xff), size < WRITE ? size : WRITE);
		list[n++] = p;
		if ((i + 1) % period == 0 || n == cap) {
			size_t kept = 0;
			for (size_t j = 0; j < n; j++) {
				if (bench_rng_next(&rng) % 10) {
					free(list[j]);
					frees++;
				} else {
					list[kept++] = list[j];
				}
			}
			n = kept;
		}
	}
	double elapsed = bench_now() - t0;
	unsigned long sum = 0;
	for (size_t j = 0; j < n; j++) {
		sum += list[j][0];
		free(list[j]);
	}
	free(list);
	printf("ops_per_sec=%.0f elapsed=%.6f allocs=%ld frees=%ld live=%zu sum=%lu\n",
	       (double)(blocks + frees) / elapsed, elapsed, blocks, frees, n, sum);
	return 0;
}
