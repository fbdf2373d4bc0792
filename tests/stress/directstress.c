/* directstress.c — direct mappings looked up while their table changes: WORKERS threads
 * each keep 8 buffers in mappings of their own and grow them a few bytes a realloc (the
 * lookup without the lock: direct_keeps), ask their usable size (direct_usable), now and
 * then remap one past its room or shrink it, and free and make one again; a churner thread
 * makes and frees 32 mappings at a time, so that the table of mappings (256 slots, 8 KiB)
 * is rehashed (tombstones) again and again under the workers' lookups. A table replaced
 * while a lookup reads it must stay mapped: unmapped, the lookup faults. (Unmapped, its
 * place would be taken by the next table, which a lookup can read: the churner takes it
 * first with an inaccessible mapping of its own after each round, as a program's other
 * mappings may.) Every buffer's contents are checked on each step and when freed.
 * Usage: directstress [WORKERS [STEPS]]; prints "directstress: ok" and exits 0. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "api/api.h"

#define BUFS     8
#define CHURN    32
#define MIN_SIZE (160u << 10) /* above the threshold, which stays put (mallopt) */

static long steps;
static int failed, done; /* (atomic) */

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static unsigned char pat(uint64_t id, size_t i)
{
	return (unsigned char)(id * 31 + i);
}

struct buf {
	unsigned char *p;
	size_t len;
	uint64_t id;
};

static void fail(const char *what, const struct buf *b, size_t at)
{
	fprintf(stderr, "directstress: buffer %llu (%zu bytes): %s at %zu\n",
	        (unsigned long long)b->id, b->len, what, at);
	__atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
}

static void fill(struct buf *b, size_t from, size_t to)
{
	for (size_t i = from; i < to; i++)
		b->p[i] = pat(b->id, i);
}

/* the first and last bytes of every page, and the last byte */
static void check(const struct buf *b)
{
	for (size_t i = 0; i < b->len; i += 4096) {
		if (b->p[i] != pat(b->id, i))
			fail("corrupted", b, i);
		size_t e = i + 4095 < b->len ? i + 4095 : b->len - 1;
		if (b->p[e] != pat(b->id, e))
			fail("corrupted", b, e);
	}
}

static void make(struct buf *b, uint64_t *s, uint64_t id)
{
	b->len = MIN_SIZE + rnd(s) % (64u << 10);
	b->id = id;
	b->p = A(malloc)(b->len);
	if (!b->p) {
		fail("malloc failed", b, 0);
		exit(1);
	}
	fill(b, 0, b->len);
}

static void *worker(void *arg)
{
	uint64_t s = (uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1, id = (uintptr_t)arg << 32;
	struct buf b[BUFS];
	for (int i = 0; i < BUFS; i++)
		make(&b[i], &s, ++id);
	for (long n = 0; n < steps && !__atomic_load_n(&failed, __ATOMIC_RELAXED); n++) {
		struct buf *x = &b[rnd(&s) % BUFS];
		uint64_t r = rnd(&s) % 1024;
		size_t len = x->len;
		if (r < 4) { /* free it and make another */
			check(x);
			A(free)(x->p);
			make(x, &s, ++id);
			continue;
		}
		if (r < 6)
			len = MIN_SIZE + rnd(&s) % (1u << 20); /* remapped, or shrunk */
		else
			len += 1 + rnd(&s) % 64; /* mostly in place */
		unsigned char *q = A(realloc)(x->p, len);
		if (!q) {
			fail("realloc failed", x, len);
			break;
		}
		x->p = q;
		size_t old = x->len;
		x->len = len;
		if (len > old)
			fill(x, old, len);
		if (x->p[len - 1] != pat(x->id, len - 1) || x->p[0] != pat(x->id, 0))
			fail("contents lost", x, len - 1);
		if (A(malloc_usable_size)(x->p) < len)
			fail("usable size short", x, A(malloc_usable_size)(x->p));
	}
	for (int i = 0; i < BUFS; i++) {
		check(&b[i]);
		A(free)(b[i].p);
	}
	return NULL;
}

static void *churner(void *arg)
{
	(void)arg;
	static char *m[CHURN];
	static void *guard[64];
	unsigned long rounds = 0;
	uint64_t s = 77;
	while (!__atomic_load_n(&done, __ATOMIC_RELAXED) &&
	       !__atomic_load_n(&failed, __ATOMIC_RELAXED)) {
		for (int i = 0; i < CHURN; i++) {
			/* sizes that move the mappings' addresses about: new slots, tombstones */
			m[i] = A(malloc)(MIN_SIZE + rnd(&s) % (1u << 20));
			if (!m[i]) {
				__atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
				return NULL;
			}
			m[i][0] = (char)i;
		}
		for (int i = 0; i < CHURN; i++) {
			if (m[i][0] != (char)i)
				__atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
			A(free)(m[i]);
		}
		void **g = &guard[rounds % 64];
		if (*g)
			munmap(*g, 8192);
		*g = mmap(NULL, 8192, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (*g == MAP_FAILED)
			*g = NULL;
		rounds++;
	}
	for (int i = 0; i < 64; i++)
		if (guard[i])
			munmap(guard[i], 8192);
	printf("directstress: churner %lu rounds\n", rounds);
	return NULL;
}

int main(int argc, char **argv)
{
	int workers = argc > 1 ? atoi(argv[1]) : 3;
	steps = argc > 2 ? atol(argv[2]) : 200000;
	if (workers < 1 || workers > 64 || steps < 1) {
		fprintf(stderr, "usage: directstress [WORKERS [STEPS]]\n");
		return 2;
	}
	/* a fixed threshold: frees do not raise it, every buffer stays a mapping */
	A(mallopt)(M_MMAP_THRESHOLD, 128 << 10);
	pthread_t t[64], c;
	if (pthread_create(&c, NULL, churner, NULL))
		return 2;
	for (int i = 0; i < workers; i++)
		if (pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1)))
			return 2;
	for (int i = 0; i < workers; i++)
		pthread_join(t[i], NULL);
	__atomic_store_n(&done, 1, __ATOMIC_RELAXED);
	pthread_join(c, NULL);
	if (__atomic_load_n(&failed, __ATOMIC_RELAXED))
		return 1;
	printf("directstress: %d workers x %ld steps: ok\n", workers, steps);
	return 0;
}
