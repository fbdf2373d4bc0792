/* mech_remote.c — mechanism 4 (remote frees), issue 4: PRODUCERS threads each allocate
 * BLOCKS random MINSIZE..MAXSIZE-byte blocks (16..512 by default) in batches of 256 and
 * hand every batch to CONSUMERS threads (1 by default) that free all of it. Batches in
 * flight are unbounded (a mutex-protected list): a slow consumer lets memory pile up, as in
 * the scenario. A consumer takes its share of what is queued (all of it when there
 * is one consumer), so with more threads than cores producers and consumers preempt each
 * other mid-batch.
 * usage: mech_remote PRODUCERS BLOCKS [CONSUMERS MINSIZE MAXSIZE]
 * prints: ops_per_sec=... elapsed=... peak_rss_kb=... max_in_flight=... */
#include "benchlib.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define USAGE "PRODUCERS BLOCKS [CONSUMERS MINSIZE MAXSIZE]"
#define BATCH 256

struct remote_batch {
	struct remote_batch *next;
	size_t count;
	void *blocks[BATCH];
};

struct remote_queue {
	pthread_mutex_t lock;
	pthread_cond_t nonempty;
	struct remote_batch *head, *tail; /* under lock */
	long producers_left;              /* under lock */
	long consumers;
	long in_flight, max_in_flight; /* batches, under lock */
};

struct remote_producer {
	pthread_t tid;
	struct remote_queue *q;
	long blocks;
	size_t minsize, maxsize;
	uint64_t seed;
};

static void *remote_produce(void *arg)
{
	struct remote_producer *p = arg;
	struct remote_queue *q = p->q;
	struct bench_rng rng;
	bench_rng_seed(&rng, p->seed);
	for (long left = p->blocks; left > 0;) {
		struct remote_batch *b = malloc(sizeof(*b));
		if (!b)
			bench_die("malloc");
		b->next = NULL;
		b->count = left < BATCH ? (size_t)left : BATCH;
		for (size_t i = 0; i < b->count; i++) {
			size_t size = bench_rng_range(&rng, p->minsize, p->maxsize);
			unsigned char *blk = malloc(size);
			if (!blk)
				bench_die("malloc");
			blk[0] = (unsigned char)size;
			b->blocks[i] = blk;
		}
		left -= (long)b->count;
		pthread_mutex_lock(&q->lock);
		if (q->tail)
			q->tail->next = b;
		else
			q->head = b;
		q->tail = b;
		if (++q->in_flight > q->max_in_flight)
			q->max_in_flight = q->in_flight;
		pthread_cond_signal(&q->nonempty);
		pthread_mutex_unlock(&q->lock);
	}
	pthread_mutex_lock(&q->lock);
	q->producers_left--;
	pthread_cond_signal(&q->nonempty);
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

static void *remote_consume(void *arg)
{
	struct remote_queue *q = arg;
	for (;;) {
		pthread_mutex_lock(&q->lock);
		while (!q->head && q->producers_left > 0)
			pthread_cond_wait(&q->nonempty, &q->lock);
		/* this consumer's share of the batches queued so far (all with one consumer) */
		long share = (q->in_flight + q->consumers - 1) / q->consumers, taken = 0;
		struct remote_batch *b = q->head, *last = NULL;
		for (struct remote_batch *x = b; x && taken < share; x = x->next) {
			last = x;
			taken++;
		}
		if (last) {
			q->head = last->next;
			if (!q->head)
				q->tail = NULL;
			last->next = NULL;
		}
		q->in_flight -= taken;
		int finished = !b && q->producers_left == 0;
		if (finished)
			pthread_cond_broadcast(&q->nonempty); /* the other consumers finish too */
		pthread_mutex_unlock(&q->lock);
		if (finished)
			return NULL;
		while (b) {
			struct remote_batch *next = b->next;
			for (size_t i = 0; i < b->count; i++)
				free(b->blocks[i]);
			free(b);
			b = next;
		}
	}
}

int main(int argc, char **argv)
{
	long producers = bench_arg(argc, argv, 1, 2, USAGE);
	long blocks = bench_arg(argc, argv, 2, 16 << 20, USAGE);
	long consumers = bench_arg(argc, argv, 3, 1, USAGE);
	long minsize = bench_arg(argc, argv, 4, 16, USAGE);
	long maxsize = bench_arg(argc, argv, 5, 512, USAGE);
	bench_arg_order(argv, USAGE, "MINSIZE", minsize, "MAXSIZE", maxsize);
	struct remote_queue q = {.lock = PTHREAD_MUTEX_INITIALIZER,
	                         .nonempty = PTHREAD_COND_INITIALIZER,
	                         .producers_left = producers,
	                         .consumers = consumers};
	struct remote_producer *p = calloc((size_t)producers, sizeof(*p));
	if (!p)
		bench_die("calloc");
	pthread_t *consumer = calloc((size_t)consumers, sizeof(*consumer));
	if (!consumer)
		bench_die("calloc");
	double t0 = bench_now();
	for (long i = 0; i < consumers; i++)
		if (pthread_create(&consumer[i], NULL, remote_consume, &q) != 0)
			bench_die("pthread_create");
	for (long i = 0; i < producers; i++) {
		p[i].q = &q;
		p[i].blocks = blocks;
		p[i].minsize = (size_t)minsize;
		p[i].maxsize = (size_t)maxsize;
		p[i].seed = (uint64_t)i + 21;
		if (pthread_create(&p[i].tid, NULL, remote_produce, &p[i]) != 0)
			bench_die("pthread_create");
	}
	for (long i = 0; i < producers; i++)
		pthread_join(p[i].tid, NULL);
	for (long i = 0; i < consumers; i++)
		pthread_join(consumer[i], NULL);
	double elapsed = bench_now() - t0;
	double total = (double)producers * (double)blocks;
	printf("ops_per_sec=%.0f elapsed=%.6f peak_rss_kb=%ld max_in_flight=%ld\n", total / elapsed,
	       elapsed, bench_status_kb("VmHWM"), q.max_in_flight);
	free(p);
	free(consumer);
	return 0;
}
