/* growshrink.c — a heap that grows and shrinks in cycles, the way a service's working set
 * follows its load: each cycle allocates blocks of random sizes (MIN_B..MAX_B bytes,
 * log-uniform), writing every byte, until LOW_MIB + (HIGH_MIB - LOW_MIB) is live, then
 * frees blocks at random until LOW_MIB is live. Pages freed in a shrink are needed again
 * by the next growth: an allocator that returns them to the kernel at each shrink makes
 * the process fault them back in (minor faults, zeroing) every cycle. Prints the time, the
 * minor faults of the cycles after the first (the first growth faults everything in for
 * every allocator), the RSS at the top and bottom of the last cycle, and the peak.
 * usage: growshrink CYCLES LOW_MIB HIGH_MIB [MIN_B MAX_B]
 * prints: elapsed=... faults=... faults_per_cycle=... rss_top_kb=... rss_bottom_kb=...
 *         peak_rss_kb=... */
#include "benchlib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define USAGE "CYCLES LOW_MIB HIGH_MIB [MIN_B MAX_B]"

struct block {
	void *p;
	size_t size;
};

static size_t log_uniform(struct bench_rng *rng, size_t lo, size_t hi)
{
	double u = (double)(bench_rng_next(rng) >> 11) / 9007199254740992.0;
	return (size_t)exp(log((double)lo) + u * (log((double)hi) - log((double)lo)));
}

int main(int argc, char **argv)
{
	long cycles = bench_arg(argc, argv, 1, 20, USAGE);
	long low = bench_arg(argc, argv, 2, 16, USAGE) << 20;
	long high = bench_arg(argc, argv, 3, 64, USAGE) << 20;
	size_t min_b = (size_t)bench_arg(argc, argv, 4, 64, USAGE);
	size_t max_b = (size_t)bench_arg(argc, argv, 5, 65536, USAGE);
	if (high <= low || max_b < min_b) {
		fprintf(stderr, "usage: growshrink %s (HIGH > LOW, MAX >= MIN)\n", USAGE);
		return 2;
	}
	bench_report_peak_at_exit();
	size_t cap = (size_t)high / min_b + 16, n = 0;
	struct block *live = malloc(cap * sizeof(*live));
	if (!live)
		bench_die("malloc(table)");
	memset(live, 0, cap * sizeof(*live)); /* resident from the start, for every allocator */
	struct bench_rng rng;
	bench_rng_seed(&rng, 42);
	long bytes = 0, faults0 = 0, rss_top = 0, rss_bottom = 0;
	double t0 = bench_now();
	for (long c = 0; c < cycles; c++) {
		if (c == 1)
			faults0 = bench_minflt();
		while (bytes < high && n < cap) {
			size_t size = log_uniform(&rng, min_b, max_b);
			void *p = malloc(size);
			if (!p)
				bench_die("malloc");
			memset(p, (int)c, size);
			live[n].p = p;
			live[n].size = size;
			n++;
			bytes += (long)size;
		}
		rss_top = bench_status_kb("VmRSS");
		while (bytes > low) {
			size_t i = (size_t)(bench_rng_next(&rng) % n);
			free(live[i].p);
			bytes -= (long)live[i].size;
			live[i] = live[--n];
		}
		rss_bottom = bench_status_kb("VmRSS");
	}
	double elapsed = bench_now() - t0;
	long faults = cycles > 1 ? bench_minflt() - faults0 : 0;
	printf("elapsed=%.3f faults=%ld faults_per_cycle=%.0f rss_top_kb=%ld rss_bottom_kb=%ld\n",
	       elapsed, faults, cycles > 1 ? (double)faults / (double)(cycles - 1) : 0.0, rss_top,
	       rss_bottom);
	for (size_t i = 0; i < n; i++)
		free(live[i].p);
	free(live);
	return 0;
}
