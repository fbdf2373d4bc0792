/* idle_sweep.c — memory held after a load drops: THREADS threads each sweep the small sizes
 * (16 B to 16 KiB, steps of 1/8 of each power of two) ROUNDS times, a batch of 256 blocks
 * of a size allocated, written and freed before the next size; then every thread stays
 * alive, idle, for IDLE_MS while the main thread waits. What the allocator still holds
 * then (thread caches, size classes' pages, retained free memory) is what a service keeps
 * resident after a burst of work. Reads VmHWM after the sweep and VmRSS after the idle
 * period.
 * usage: idle_sweep THREADS ROUNDS IDLE_MS
 * prints: elapsed=... peak_rss_kb=... idle_rss_kb=... */
#include "benchlib.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define USAGE "THREADS ROUNDS IDLE_MS"
#define BATCH 256

struct sweep_shared {
	long rounds;
	pthread_barrier_t swept; /* every thread finished its sweep */
	pthread_barrier_t done;  /* the main thread measured the idle RSS */
};

static void *sweep_run(void *arg)
{
	struct sweep_shared *s = arg;
	void *batch[BATCH];
	for (long r = 0; r < s->rounds; r++) {
		for (size_t size = 16; size <= 16384; size += size < 128 ? 16 : size / 8)
			bench_batch(batch, BATCH, size, (unsigned char)r);
	}
	pthread_barrier_wait(&s->swept);
	pthread_barrier_wait(&s->done);
	return NULL;
}

int main(int argc, char **argv)
{
	long threads = bench_arg(argc, argv, 1, 4, USAGE);
	long rounds = bench_arg(argc, argv, 2, 10, USAGE);
	long idle_ms = bench_arg(argc, argv, 3, 3000, USAGE);
	struct sweep_shared s = {.rounds = rounds};
	if (pthread_barrier_init(&s.swept, NULL, (unsigned)threads + 1) != 0 ||
	    pthread_barrier_init(&s.done, NULL, (unsigned)threads + 1) != 0)
		bench_die("pthread_barrier_init");
	pthread_t *tids = calloc((size_t)threads, sizeof(*tids));
	if (!tids)
		bench_die("calloc");
	double t0 = bench_now();
	for (long t = 0; t < threads; t++)
		if (pthread_create(&tids[t], NULL, sweep_run, &s) != 0)
			bench_die("pthread_create");
	pthread_barrier_wait(&s.swept);
	double elapsed = bench_now() - t0;
	long peak = bench_status_kb("VmHWM");
	struct timespec ts = {idle_ms / 1000, (idle_ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0)
		;
	long idle = bench_status_kb("VmRSS");
	pthread_barrier_wait(&s.done);
	for (long t = 0; t < threads; t++)
		pthread_join(tids[t], NULL);
	free(tids);
	printf("elapsed=%.6f peak_rss_kb=%ld idle_rss_kb=%ld\n", elapsed, peak, idle);
	return 0;
}
