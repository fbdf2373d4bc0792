/* medsizes.c — sizes on both sides of the classes' end, at random (the shape of
 * mimalloc-bench's alloc-test and glibc's bench-malloc-thread with large sizes, and of
 * programs whose buffers are sized by their input: a decoder's frames, a parser's
 * documents, a server's replies): SLOTS slots, each operation frees a random slot's block
 * and puts a new one of MIN_B..MAX_B bytes (uniform) there, writing its first 64 bytes.
 * With 1 B-64 KiB half the blocks are above the 32 KiB classes, spread over 8 page counts:
 * an allocator that keeps freed blocks of those sizes per thread (tcmalloc's classes up to
 * 256 KiB, mimalloc's thread-local pages) pairs them without a lock; one that keeps one or
 * none goes to its page heap for most of them (bench/README.md, "Shapes outside the
 * bench"). A checksum of the first bytes is printed so that runs under different
 * allocators can be compared.
 * BATCH 1 (rptest-like, bench/README.md "Other parameters and suite-like programs"): rounds
 * that fill all SLOTS, then free them in a random order, instead of one slot at a time.
 * usage: medsizes SLOTS OPS MAX_B [MIN_B [BATCH]]
 * prints: ops_per_sec=... elapsed=... ops=... sum=..., and peak_rss_kb=... at exit */
#include "benchlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define USAGE "SLOTS OPS MAX_B [MIN_B [BATCH]]"
#define WRITE 64 /* bytes of each block written at most */

int main(int argc, char **argv)
{
	bench_report_peak_at_exit();
	long slots = bench_arg(argc, argv, 1, 1000, USAGE);
	long ops = bench_arg(argc, argv, 2, 3000000, USAGE);
	size_t max_b = (size_t)bench_arg(argc, argv, 3, 65536, USAGE);
	size_t min_b = (size_t)bench_arg(argc, argv, 4, 1, USAGE);
	long batch = bench_arg_range(argc, argv, 5, 0, 0, 1, USAGE);
	if (slots < 1 || max_b < min_b || min_b < 1 || batch < 0 || batch > 1) {
		fprintf(stderr, "usage: medsizes %s (SLOTS >= 1, MAX_B >= MIN_B >= 1, BATCH 0|1)\n",
		        USAGE);
		return 2;
	}
	struct bench_rng rng;
	bench_rng_seed(&rng, 23);
	unsigned char **slot = calloc((size_t)slots, sizeof(*slot));
	if (!slot)
		bench_die("calloc");
	double t0 = bench_now();
	for (long i = 0; i < ops; i++) {
		if (batch && i % slots == 0 && i > 0) {
			/* a round's end: every slot freed, in a random order (Fisher-Yates) */
			for (long j = slots - 1; j > 0; j--) {
				long r = (long)(bench_rng_next(&rng) % (uint64_t)(j + 1));
				unsigned char *t = slot[j];
				slot[j] = slot[r];
				slot[r] = t;
			}
			for (long j = 0; j < slots; j++) {
				free(slot[j]);
				slot[j] = NULL;
			}
		}
		size_t k = batch ? (size_t)(i % slots)
		                 : (size_t)(bench_rng_next(&rng) % (uint64_t)slots);
		size_t size = bench_rng_range(&rng, min_b, max_b);
		free(slot[k]);
		unsigned char *p = malloc(size);
		if (!p)
			bench_die("malloc");
		memset(p, (int)(i & 0xff), size < WRITE ? size : WRITE);
		slot[k] = p;
	}
	double elapsed = bench_now() - t0;
	unsigned long sum = 0;
	for (long k = 0; k < slots; k++) {
		if (slot[k])
			sum += slot[k][0];
		free(slot[k]);
	}
	free(slot);
	printf("ops_per_sec=%.0f elapsed=%.6f ops=%ld sum=%lu\n", (double)ops / elapsed, elapsed,
	       ops, sum);
	return 0;
}
