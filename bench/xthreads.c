/* xthreads.c — xmalloc-like cross-thread traffic: THREADS threads, each with an inbox of
 * batches. Each thread repeatedly allocates a batch of BATCH blocks (16..MAXSIZE bytes,
 * each written) and posts it to the inbox of another thread (a random one), then frees
 * every block of every batch waiting in its own inbox. So every free is of a block another
 * thread allocated, and every thread both allocates and frees. An inbox holds at most
 * INBOX batches: a thread whose target's inbox is full empties its own and waits for
 * room (at most a millisecond at a time, emptying its own again in between, so threads
 * waiting on each other's inboxes always get out). A thread that made all its batches
 * goes on emptying its inbox until every thread has.
 * usage: xthreads THREADS BATCHES [MAXSIZE]   (BATCHES per thread)
 * prints: ops_per_sec=... elapsed=... ops=... */
#include "benchlib.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define USAGE "THREADS BATCHES [MAXSIZE]"
#define BATCH 32
#define INBOX 16

static pthread_mutex_t xt_done_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned xt_done; /* threads that made all their batches (under xt_done_lock) */

struct xt_batch {
	unsigned char *block[BATCH];
	unsigned owner;
};

struct xt_worker {
	pthread_t tid;
	struct xt_worker *all;
	unsigned id, nthreads;
	long batches;
	size_t maxsize;
	pthread_mutex_t lock; /* the inbox: */
	pthread_cond_t room, posted;
	struct xt_batch *inbox[INBOX];
	unsigned count;
} BENCH_LINE_ALIGNED;

static void xt_free_batch(struct xt_batch *b)
{
	for (int i = 0; i < BATCH; i++) {
		if (b->block[i][0] != (unsigned char)(b->owner + (unsigned)i))
			bench_die("block contents");
		free(b->block[i]);
	}
	free(b);
}

/* A millisecond from now, for pthread_cond_timedwait. */
static void xt_deadline(struct timespec *ts)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_nsec += 1000000;
	if (ts->tv_nsec >= 1000000000) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000;
	}
}

/* Free every batch waiting in w's inbox. */
static void xt_drain(struct xt_worker *w)
{
	struct xt_batch *got[INBOX];
	pthread_mutex_lock(&w->lock);
	unsigned n = w->count;
	for (unsigned i = 0; i < n; i++)
		got[i] = w->inbox[i];
	w->count = 0;
	pthread_cond_broadcast(&w->room);
	pthread_mutex_unlock(&w->lock);
	for (unsigned i = 0; i < n; i++)
		xt_free_batch(got[i]);
}

static void xt_post(struct xt_worker *self, struct xt_worker *to, struct xt_batch *b)
{
	pthread_mutex_lock(&to->lock);
	while (to->count == INBOX) {
		pthread_mutex_unlock(&to->lock);
		xt_drain(self);
		pthread_mutex_lock(&to->lock);
		if (to->count < INBOX)
			break;
		struct timespec ts;
		xt_deadline(&ts);
		int err = pthread_cond_timedwait(&to->room, &to->lock, &ts);
		if (err && err != ETIMEDOUT)
			bench_die("pthread_cond_timedwait");
	}
	to->inbox[to->count++] = b;
	pthread_cond_signal(&to->posted);
	pthread_mutex_unlock(&to->lock);
}

static void *xt_run(void *arg)
{
	struct xt_worker *w = arg;
	struct bench_rng rng;
	bench_rng_seed(&rng, w->id + 11);
	for (long n = 0; n < w->batches; n++) {
		struct xt_batch *b = malloc(sizeof(*b));
		if (!b)
			bench_die("malloc");
		b->owner = w->id;
		for (int i = 0; i < BATCH; i++) {
			size_t size = bench_rng_range(&rng, 16, w->maxsize);
			unsigned char *p = malloc(size);
			if (!p)
				bench_die("malloc");
			p[0] = (unsigned char)(w->id + (unsigned)i);
			p[size - 1] = (unsigned char)size;
			b->block[i] = p;
		}
		unsigned to = (w->id + 1 + (unsigned)(bench_rng_next(&rng) % (w->nthreads - 1))) %
		              w->nthreads;
		xt_post(w, &w->all[to], b);
		xt_drain(w);
	}
	pthread_mutex_lock(&xt_done_lock);
	xt_done++;
	pthread_mutex_unlock(&xt_done_lock);
	for (;;) {
		pthread_mutex_lock(&xt_done_lock);
		unsigned done = xt_done;
		pthread_mutex_unlock(&xt_done_lock);
		if (done == w->nthreads)
			return NULL;
		xt_drain(w);
		pthread_mutex_lock(&w->lock);
		if (w->count == 0) {
			struct timespec ts;
			xt_deadline(&ts);
			pthread_cond_timedwait(&w->posted, &w->lock, &ts);
		}
		pthread_mutex_unlock(&w->lock);
	}
}

int main(int argc, char **argv)
{
	long threads = bench_arg(argc, argv, 1, 4, USAGE);
	long batches = bench_arg(argc, argv, 2, 20000, USAGE);
	long maxsize = bench_arg_range(argc, argv, 3, 512, 16, BENCH_ARG_MAX, USAGE);
	if (threads < 2)
		threads = 2;
	struct xt_worker *w = bench_workers((size_t)threads, sizeof(*w));
	for (long t = 0; t < threads; t++) {
		w[t].all = w;
		w[t].id = (unsigned)t;
		w[t].nthreads = (unsigned)threads;
		w[t].batches = batches;
		w[t].maxsize = (size_t)maxsize;
		pthread_mutex_init(&w[t].lock, NULL);
		pthread_cond_init(&w[t].room, NULL);
		pthread_cond_init(&w[t].posted, NULL);
	}
	double t0 = bench_now();
	for (long t = 0; t < threads; t++)
		if (pthread_create(&w[t].tid, NULL, xt_run, &w[t]) != 0)
			bench_die("pthread_create");
	for (long t = 0; t < threads; t++)
		pthread_join(w[t].tid, NULL);
	double elapsed = bench_now() - t0;
	for (long t = 0; t < threads; t++)
		xt_drain(&w[t]);
	free(w);
	double ops = 2.0 * (double)threads * (double)batches * BATCH;
	printf("ops_per_sec=%.0f elapsed=%.6f ops=%.0f\n", ops / elapsed, elapsed, ops);
	return 0;
}
