/* stress.c — deterministic multi-thread stress: THREADS threads x SCALE blocks x ROUNDS.
 * Each round creates the threads anew; every thread allocates blocks of random sizes
 * (mostly small, some large, some aligned), fills each with a pattern derived from its
 * id, hands half of them to the next thread through a mailbox, and verifies and frees the
 * blocks it receives; it verifies and frees its own blocks at the end. Any corrupted
 * byte is reported and the program exits 1. Usage: stress [THREADS [SCALE [ROUNDS]]] */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"

struct block {
	uint64_t id;
	size_t size;
	unsigned char *p;
};

struct mailbox {
	pthread_mutex_t lock;
	struct block *items;
	size_t n, cap;
};

static int nthreads, scale;
static struct mailbox *boxes;
static volatile int failed;

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void fill(struct block *b)
{
	for (size_t i = 0; i < b->size; i++)
		b->p[i] = (unsigned char)(b->id * 31 + i);
}

static void check(const struct block *b)
{
	for (size_t i = 0; i < b->size; i++)
		if (b->p[i] != (unsigned char)(b->id * 31 + i)) {
			fprintf(stderr, "stress: block %llu (%zu bytes) corrupted at %zu\n",
			        (unsigned long long)b->id, b->size, i);
			failed = 1;
			return;
		}
}

static size_t pick_size(uint64_t *s)
{
	uint64_t r = rnd(s) % 1000;
	if (r < 700)
		return rnd(s) % 256;
	if (r < 950)
		return rnd(s) % 8192;
	if (r < 995)
		return rnd(s) % (512 * 1024);
	return rnd(s) % (6 << 20);
}

static void give(int to, struct block b)
{
	struct mailbox *m = &boxes[to];
	pthread_mutex_lock(&m->lock);
	if (m->n == m->cap) {
		m->cap = m->cap ? m->cap * 2 : 64;
		m->items = A(realloc)(m->items, m->cap * sizeof(*m->items));
	}
	m->items[m->n++] = b;
	pthread_mutex_unlock(&m->lock);
}

static void drain(int me)
{
	struct mailbox *m = &boxes[me];
	pthread_mutex_lock(&m->lock);
	for (size_t i = 0; i < m->n; i++) {
		check(&m->items[i]);
		A(free)(m->items[i].p);
	}
	m->n = 0;
	pthread_mutex_unlock(&m->lock);
}

static void *worker(void *arg)
{
	int me = (int)(intptr_t)arg;
	uint64_t seed = 0x9e3779b97f4a7c15ULL * (uint64_t)(me + 1);
	struct block *mine = A(calloc)((size_t)scale, sizeof(*mine));
	for (int i = 0; i < scale; i++) {
		struct block b = {.id = ((uint64_t)me << 32) | (uint64_t)i,
		                  .size = pick_size(&seed)};
		if (rnd(&seed) % 10 == 0) {
			void *q = NULL;
			size_t align = (size_t)16 << (rnd(&seed) % 9);
			if (A(posix_memalign)(&q, align, b.size) != 0 ||
			    ((uintptr_t)q & (align - 1))) {
				fprintf(stderr, "stress: posix_memalign(%zu, %zu) failed\n", align,
				        b.size);
				failed = 1;
			}
			b.p = q;
		} else {
			b.p = A(malloc)(b.size);
		}
		if (!b.p && b.size) {
			failed = 1;
			break;
		}
		fill(&b);
		if (i % 2)
			give((me + 1) % nthreads, b);
		else
			mine[i] = b;
		if (i % 64 == 0)
			drain(me);
		if (i % 3 == 0 && mine[i / 2].p) { /* free some of our own early */
			check(&mine[i / 2]);
			A(free)(mine[i / 2].p);
			mine[i / 2].p = NULL;
		}
	}
	for (int i = 0; i < scale; i++)
		if (mine[i].p) {
			check(&mine[i]);
			A(free)(mine[i].p);
		}
	A(free)(mine);
	return NULL;
}

int main(int argc, char **argv)
{
	nthreads = argc > 1 ? atoi(argv[1]) : 8;
	scale = argc > 2 ? atoi(argv[2]) : 10000;
	int rounds = argc > 3 ? atoi(argv[3]) : 10;
	if (nthreads < 1 || scale < 1 || rounds < 1) {
		fprintf(stderr, "usage: stress [THREADS [SCALE [ROUNDS]]]\n");
		return 2;
	}
	boxes = A(calloc)((size_t)nthreads, sizeof(*boxes));
	for (int i = 0; i < nthreads; i++)
		pthread_mutex_init(&boxes[i].lock, NULL);
	pthread_t *t = A(malloc)(sizeof(*t) * (size_t)nthreads);
	for (int r = 0; r < rounds && !failed; r++) {
		for (int i = 0; i < nthreads; i++)
			pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
		for (int i = 0; i < nthreads; i++)
			pthread_join(t[i], NULL);
		for (int i = 0; i < nthreads; i++)
			drain(i);
	}
	for (int i = 0; i < nthreads; i++)
		A(free)(boxes[i].items);
	A(free)(boxes);
	A(free)(t);
	printf("stress: %d threads x %d blocks x %d rounds: %s\n", nthreads, scale, rounds,
	       failed ? "FAILED" : "ok");
	return failed ? 1 : 0;
}
