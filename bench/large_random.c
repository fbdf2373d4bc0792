/* large_random.c — repeated allocation of random large blocks: SLOTS blocks live at a
 * time; each of ITER steps frees a random slot and allocates a block of a random size
 * between MINMB and MAXMB MiB (any page count in between, a little less than whole pages)
 * in its place. TOUCH says how much of a new block the program writes: 1 its first and
 * last bytes (a buffer sized for the worst case and mostly unused), 2 one byte in every
 * 64 KiB, 3 every page.
 * Reports time, minor page faults and peak RSS.
 * usage: large_random SLOTS ITER [MINMB MAXMB TOUCH]
 * prints: ops_per_sec=... elapsed=... minflt=... peak_rss_kb=... */
#include "benchlib.h"

#include <stdio.h>
#include <stdlib.h>

#define USAGE "SLOTS ITER [MINMB MAXMB TOUCH]"

static void lr_touch(unsigned char *p, size_t size, long touch, unsigned char v)
{
	size_t step = touch >= 3 ? 4096 : touch == 2 ? 65536 : size;
	for (size_t off = 0; off < size; off += step)
		p[off] = v;
	p[size - 1] = v;
}

int main(int argc, char **argv)
{
	long slots = bench_arg(argc, argv, 1, 8, USAGE);
	long iter = bench_arg(argc, argv, 2, 2000, USAGE);
	long minmb = bench_arg(argc, argv, 3, 2, USAGE);
	long maxmb = bench_arg(argc, argv, 4, 32, USAGE);
	long touch = bench_arg_range(argc, argv, 5, 1, 1, 3, USAGE);
	bench_arg_order(argv, USAGE, "MINMB", minmb, "MAXMB", maxmb);
	struct bench_rng rng;
	bench_rng_seed(&rng, 5);
	unsigned char **slot = calloc((size_t)slots, sizeof(*slot));
	size_t *size = calloc((size_t)slots, sizeof(*size));
	if (!slot || !size)
		bench_die("calloc");
	size_t lo = (size_t)minmb << 20, hi = (size_t)maxmb << 20;
	long flt0 = bench_minflt();
	double t0 = bench_now();
	for (long i = 0; i < iter; i++) {
		size_t k = (size_t)(bench_rng_next(&rng) % (uint64_t)slots);
		if (slot[k] && slot[k][size[k] - 1] != (unsigned char)(k + 1))
			bench_die("block contents");
		free(slot[k]);
		size[k] = bench_rng_range(&rng, lo / 4096, hi / 4096) * 4096 -
		          (size_t)(bench_rng_next(&rng) % 64) * 16;
		slot[k] = malloc(size[k]);
		if (!slot[k])
			bench_die("malloc");
		lr_touch(slot[k], size[k], touch, (unsigned char)(k + 1));
	}
	double elapsed = bench_now() - t0;
	long flt = bench_minflt() - flt0;
	for (long k = 0; k < slots; k++)
		free(slot[k]);
	free(slot);
	free(size);
	printf("ops_per_sec=%.0f elapsed=%.6f minflt=%ld peak_rss_kb=%ld\n", (double)iter / elapsed,
	       elapsed, flt, bench_status_kb("VmHWM"));
	return 0;
}
