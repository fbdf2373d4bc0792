/* xmalloc.c — xmalloc-like producer/consumer traffic: PAIRS producer threads allocate
 * blocks (16..MAXSIZE bytes) in batches of 64 and pass each batch through a bounded
 * single-producer single-consumer ring to their consumer thread, which checks and frees
 * every block: every free is a cross-thread (remote) free.
 * usage: xmalloc PAIRS BLOCKS [MAXSIZE]   (BLOCKS per producer)
 * prints: ops_per_sec=... elapsed=... ops=... */
#include "benchlib.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#define USAGE      "PAIRS BLOCKS [MAXSIZE]"
#define BATCH      64
#define RING_SLOTS 64 /* batches in flight per pair (a power of two) */

struct xm_batch {
	unsigned char *blocks[BATCH];
	size_t count;
};

/* One producer/consumer pair. head is written only by the producer, tail only by the
 * consumer; release/acquire on them publishes the batch contents. */
struct xm_pair {
	pthread_t producer, consumer;
	_Alignas(64) atomic_size_t head;
	_Alignas(64) atomic_size_t tail;
	_Alignas(64) struct xm_batch ring[RING_SLOTS];
	long blocks;
	size_t maxsize;
	uint64_t seed;
};

static void *xm_produce(void *arg)
{
	struct xm_pair *pair = arg;
	struct bench_rng rng;
	bench_rng_seed(&rng, pair->seed);
	long left = pair->blocks;
	while (left > 0) {
		size_t head = atomic_load_explicit(&pair->head, memory_order_relaxed);
		while (head - atomic_load_explicit(&pair->tail, memory_order_acquire) == RING_SLOTS)
			sched_yield();
		struct xm_batch *b = &pair->ring[head % RING_SLOTS];
		b->count = left < BATCH ? (size_t)left : BATCH;
		for (size_t i = 0; i < b->count; i++) {
			size_t size = bench_rng_range(&rng, 16, pair->maxsize);
			unsigned char *p = malloc(size);
			if (!p)
				bench_die("malloc");
			p[0] = (unsigned char)size;
			b->blocks[i] = p;
		}
		left -= (long)b->count;
		atomic_store_explicit(&pair->head, head + 1, memory_order_release);
	}
	return NULL;
}

static void *xm_consume(void *arg)
{
	struct xm_pair *pair = arg;
	long left = pair->blocks;
	while (left > 0) {
		size_t tail = atomic_load_explicit(&pair->tail, memory_order_relaxed);
		while (atomic_load_explicit(&pair->head, memory_order_acquire) == tail)
			sched_yield();
		struct xm_batch *b = &pair->ring[tail % RING_SLOTS];
		for (size_t i = 0; i < b->count; i++)
			free(b->blocks[i]);
		left -= (long)b->count;
		atomic_store_explicit(&pair->tail, tail + 1, memory_order_release);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	long pairs = bench_arg(argc, argv, 1, 1, USAGE);
	long blocks = bench_arg(argc, argv, 2, 1000000, USAGE);
	long maxsize = bench_arg_range(argc, argv, 3, 512, 16, BENCH_ARG_MAX, USAGE);
	struct xm_pair *p = aligned_alloc(64, sizeof(*p) * (size_t)pairs);
	if (!p)
		bench_die("aligned_alloc");
	for (long i = 0; i < pairs; i++) {
		atomic_init(&p[i].head, 0);
		atomic_init(&p[i].tail, 0);
		p[i].blocks = blocks;
		p[i].maxsize = (size_t)maxsize;
		p[i].seed = (uint64_t)i + 7;
	}
	double t0 = bench_now();
	for (long i = 0; i < pairs; i++)
		if (pthread_create(&p[i].producer, NULL, xm_produce, &p[i]) != 0 ||
		    pthread_create(&p[i].consumer, NULL, xm_consume, &p[i]) != 0)
			bench_die("pthread_create");
	for (long i = 0; i < pairs; i++) {
		pthread_join(p[i].producer, NULL);
		pthread_join(p[i].consumer, NULL);
	}
	double elapsed = bench_now() - t0;
	free(p);
	double total = (double)pairs * (double)blocks;
	printf("ops_per_sec=%.0f elapsed=%.6f ops=%.0f\n", total / elapsed, elapsed, total);
	return 0;
}
