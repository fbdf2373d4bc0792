/* trickle.c — memory that should come back while a process allocates lightly and
 * steadily. First BURSTS bursts, each allocating BURST_MIB in blocks of MIN_KB..MAX_KB
 * (writing them) and freeing them all; then PEAK_MIB is allocated and freed down to
 * LIVE_MIB (random blocks freed). Then a steady trickle for SECONDS: every INTERVAL_MS one
 * random live block is freed and one of MIN_KB..MAX_KB allocated and written. The live
 * size stays at LIVE_MIB throughout the trickle, so everything resident beyond it (and the
 * allocator's own overhead) is memory the allocator kept: a time-based return brings RSS
 * down within its period, while a policy driven by trends, batch sizes or recent
 * allocations keeps it for as long as the trickle lasts. RSS is sampled every 250 ms of
 * the trickle and printed as a series (rss_series=t:kB,...), with the RSS at 1, 2, 5 and
 * 10 s and at the end, and the minor faults of the trickle (a policy that returns pages
 * the trickle soon reuses makes it fault them back in).
 * usage: trickle BURSTS BURST_MIB PEAK_MIB LIVE_MIB SECONDS [INTERVAL_MS MIN_KB MAX_KB]
 * prints: live_kb=... rss_start_kb=... rss_1s_kb=... rss_2s_kb=... rss_5s_kb=...
 *         rss_10s_kb=... rss_end_kb=... trickle_faults=... rss_series=... */
#include "benchlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define USAGE "BURSTS BURST_MIB PEAK_MIB LIVE_MIB SECONDS [INTERVAL_MS MIN_KB MAX_KB]"

struct block {
	void *p;
	size_t size;
};

static size_t min_b, max_b;
static struct bench_rng rng;

static struct block make(unsigned char tag)
{
	size_t size = bench_rng_range(&rng, min_b, max_b);
	void *p = malloc(size);
	if (!p)
		bench_die("malloc");
	memset(p, tag, size);
	return (struct block){p, size};
}

static void sleep_until(double t)
{
	double now = bench_now();
	if (t <= now)
		return;
	struct timespec ts = {(time_t)(t - now),
	                      (long)((t - now - (double)(time_t)(t - now)) * 1e9)};
	nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
	long bursts = bench_arg(argc, argv, 1, 40, USAGE);
	long burst = bench_arg(argc, argv, 2, 40, USAGE) << 20;
	long peak = bench_arg(argc, argv, 3, 60, USAGE) << 20;
	long live_target = bench_arg(argc, argv, 4, 5, USAGE) << 20;
	long seconds = bench_arg(argc, argv, 5, 20, USAGE);
	long interval_ms = bench_arg(argc, argv, 6, 5, USAGE);
	min_b = (size_t)bench_arg(argc, argv, 7, 92, USAGE) << 10;
	max_b = (size_t)bench_arg(argc, argv, 8, 108, USAGE) << 10;
	if (max_b < min_b || live_target > peak) {
		fprintf(stderr, "usage: trickle %s (MAX_KB >= MIN_KB, LIVE <= PEAK)\n", USAGE);
		return 2;
	}
	bench_rng_seed(&rng, 7);
	size_t cap = (size_t)((peak > burst ? peak : burst) / (long)min_b) + 16;
	struct block *b = calloc(cap, sizeof(*b));
	if (!b)
		bench_die("calloc");
	memset(b, 0, cap * sizeof(*b));
	for (long r = 0; r < bursts; r++) {
		size_t n = 0;
		for (long bytes = 0; bytes < burst && n < cap; bytes += (long)b[n++].size)
			b[n] = make((unsigned char)r);
		while (n)
			free(b[--n].p);
	}
	size_t n = 0;
	long live = 0;
	while (live < peak && n < cap) {
		b[n] = make(1);
		live += (long)b[n++].size;
	}
	while (live > live_target) {
		size_t i = (size_t)(bench_rng_next(&rng) % n);
		live -= (long)b[i].size;
		free(b[i].p);
		b[i] = b[--n];
	}
	long rss_start = bench_status_kb("VmRSS"), rss_at[4] = {0};
	static const double marks[4] = {1, 2, 5, 10};
	long faults0 = bench_minflt();
	double t0 = bench_now(), next_sample = 0;
	char series[16384];
	size_t len = 0;
	for (long k = 0;; k++) {
		double t = bench_now() - t0;
		while (t >= next_sample && len < sizeof(series) - 32) {
			long rss = bench_status_kb("VmRSS");
			len += (size_t)snprintf(series + len, sizeof(series) - len, "%s%.2f:%ld",
			                        len ? "," : "", next_sample, rss);
			for (int m = 0; m < 4; m++)
				if (next_sample == marks[m])
					rss_at[m] = rss;
			next_sample += 0.25;
		}
		if (t >= (double)seconds)
			break;
		size_t i = (size_t)(bench_rng_next(&rng) % n);
		live -= (long)b[i].size;
		free(b[i].p);
		b[i] = make((unsigned char)k);
		live += (long)b[i].size;
		sleep_until(t0 + (double)(k + 1) * (double)interval_ms / 1000.0);
	}
	long faults = bench_minflt() - faults0;
	printf("live_kb=%ld rss_start_kb=%ld rss_1s_kb=%ld rss_2s_kb=%ld rss_5s_kb=%ld "
	       "rss_10s_kb=%ld rss_end_kb=%ld trickle_faults=%ld\nrss_series=%s\n",
	       live >> 10, rss_start, rss_at[0], rss_at[1], rss_at[2], rss_at[3],
	       bench_status_kb("VmRSS"), faults, series);
	for (size_t i = 0; i < n; i++)
		free(b[i].p);
	free(b);
	return 0;
}
