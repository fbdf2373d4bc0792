/* sizes.c — size-class sweep. Mode "sweep": for every size from 8 bytes to 32 KiB (steps
 * of 1/8 of each power of two) allocate a batch of 256 blocks, write each, free them in
 * allocation order; ROUNDS times. Mode "aligned": the same with posix_memalign and
 * aligned_alloc (alternating) for every alignment from 16 to 4096 bytes, checking every
 * returned address (a misaligned block aborts the run).
 * usage: sizes sweep|aligned ROUNDS
 * prints: ops_per_sec=... elapsed=... ops=... */
#include "benchlib.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define USAGE "sweep|aligned ROUNDS"
#define BATCH 256

static size_t sizes_next(size_t size)
{
	size_t pow = 8;
	while (pow * 2 <= size)
		pow *= 2;
	return size + (pow >= 64 ? pow / 8 : 8);
}

static long sizes_sweep(long rounds)
{
	void *batch[BATCH];
	long ops = 0;
	for (long r = 0; r < rounds; r++) {
		for (size_t size = 8; size <= 32768; size = sizes_next(size)) {
			bench_batch(batch, BATCH, size, (unsigned char)r);
			ops += BATCH;
		}
	}
	return ops;
}

static long sizes_aligned(long rounds)
{
	void *batch[BATCH];
	long ops = 0;
	for (long r = 0; r < rounds; r++) {
		for (size_t align = 16; align <= 4096; align *= 2) {
			for (size_t size = 8; size <= 8192; size = sizes_next(size) * 2) {
				for (int i = 0; i < BATCH; i++) {
					void *p = NULL;
					if (i & 1) {
						/* aligned_alloc wants a multiple of the alignment */
						size_t rounded = (size + align - 1) & ~(align - 1);
						p = aligned_alloc(align, rounded);
					} else if (posix_memalign(&p, align, size) != 0) {
						p = NULL;
					}
					if (!p)
						bench_die("aligned allocation");
					if ((uintptr_t)p & (align - 1)) {
						fprintf(stderr, "sizes: %p is not %zu-aligned\n", p,
						        align);
						abort();
					}
					((unsigned char *)p)[size - 1] = (unsigned char)i;
					batch[i] = p;
				}
				for (int i = 0; i < BATCH; i++)
					free(batch[i]);
				ops += BATCH;
			}
		}
	}
	return ops;
}

int main(int argc, char **argv)
{
	if (argc < 2 || (strcmp(argv[1], "sweep") != 0 && strcmp(argv[1], "aligned") != 0)) {
		fprintf(stderr, "usage: %s %s\n", argv[0], USAGE);
		return 2;
	}
	long rounds = bench_arg(argc, argv, 2, 100, USAGE);
	double t0 = bench_now();
	long ops = strcmp(argv[1], "sweep") == 0 ? sizes_sweep(rounds) : sizes_aligned(rounds);
	double elapsed = bench_now() - t0;
	printf("ops_per_sec=%.0f elapsed=%.6f ops=%ld\n", (double)ops / elapsed, elapsed, ops);
	return 0;
}
