/* soak.c — a multi-threaded, allocation-heavy workload that verifies every block: each
 * block carries a pattern derived from (thread, slot, generation) over its whole length,
 * checked in full before it is freed or reallocated (and calloc'd memory is checked to be
 * zero). Threads keep SLOTS live blocks each, of sizes from 16 B to 1 MiB (mostly small,
 * some above any mmap threshold), replace them at random, realloc them (grow and shrink,
 * prefix checked), and hand every 16th block to the next thread, which verifies and frees
 * it (remote frees). Meant to run preloaded while a controller changes tunables, trims and
 * flushes underneath (tests/reliability/soak.bats).
 *
 * usage: soak THREADS SECONDS [SLOTS]   (defaults 4, 10, 512; SECONDS 0: until SIGTERM or
 * SIGINT, after which it finishes as at the end of its time)
 * Prints progress lines "ops=N live=B peak_live=B" every 100 ms and a final line
 * "soak: ops=N corrupt=0 failed=0 peak_live=B"; exit 0 only when no block was corrupted and
 * no allocation failed. Deterministic per thread (xorshift seeded by the thread index). */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct block {
	unsigned char *p;
	size_t size;
	uint64_t tag; /* pattern seed */
	int zero;     /* calloc'd and never written: must read as zero */
};

struct handoff { /* one block passed to the next thread */
	_Atomic(struct block *) box;
};

static int nthreads, nslots;
static double seconds;
static atomic_ullong ops, corrupt, failed;
static atomic_llong live, peak_live;
static atomic_int stop;
static volatile sig_atomic_t asked_to_stop;
static struct handoff *hand;

static uint64_t rnd(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static size_t pick_size(uint64_t *s)
{
	uint64_t r = rnd(s) % 1000;
	if (r < 700)
		return 16 + rnd(s) % 497; /* small: thread cache */
	if (r < 950)
		return 512 + rnd(s) % (32768 - 512); /* medium: arena */
	if (r < 995)
		return 65536 + rnd(s) % (512 * 1024); /* around the thresholds */
	return 1024 * 1024;                           /* direct mappings */
}

static unsigned char pat(uint64_t tag, size_t i)
{
	return (unsigned char)((tag >> ((i & 7) * 8)) ^ (i >> 3) ^ 0xa5);
}

static void fill(struct block *b, size_t from)
{
	for (size_t i = from; i < b->size; i++)
		b->p[i] = pat(b->tag, i);
	b->zero = 0;
}

static void verify(const struct block *b, size_t upto, const char *when)
{
	size_t n = upto < b->size ? upto : b->size;
	for (size_t i = 0; i < n; i++) {
		unsigned char want = b->zero ? 0 : pat(b->tag, i);
		if (b->p[i] != want) {
			atomic_fetch_add(&corrupt, 1);
			fprintf(stderr,
			        "soak: CORRUPT block %p size %zu at offset %zu (%s): 0x%02x, "
			        "expected 0x%02x\n",
			        (void *)b->p, b->size, i, when, b->p[i], want);
			return;
		}
	}
}

static void account(long long delta)
{
	long long v = atomic_fetch_add(&live, delta) + delta;
	long long pk = atomic_load(&peak_live);
	while (v > pk && !atomic_compare_exchange_weak(&peak_live, &pk, v))
		;
}

static int make(struct block *b, uint64_t *s, int tid, int slot)
{
	size_t size = pick_size(s);
	b->tag = rnd(s) ^ ((uint64_t)tid << 48) ^ (uint64_t)slot;
	b->size = size;
	uint64_t how = rnd(s) % 10;
	if (how == 0) {
		b->p = calloc(1, size);
		b->zero = 1;
	} else if (how == 1) {
		size_t align = (size_t)64 << (rnd(s) % 7); /* 64 .. 4096 */
		void *p = NULL;
		if (posix_memalign(&p, align, size) != 0)
			p = NULL;
		if (p && ((uintptr_t)p & (align - 1)))
			atomic_fetch_add(&corrupt, 1); /* misaligned */
		b->p = p;
		b->zero = 0;
	} else {
		b->p = malloc(size);
		b->zero = 0;
	}
	if (!b->p) {
		atomic_fetch_add(&failed, 1);
		fprintf(stderr, "soak: allocation of %zu bytes failed: %s\n", size,
		        strerror(errno));
		b->size = 0;
		return -1;
	}
	if (b->zero)
		verify(b, size, "calloc");
	if (!b->zero || rnd(s) % 2)
		fill(b, 0);
	account((long long)size);
	return 0;
}

static void drop(struct block *b, const char *when)
{
	if (!b->p)
		return;
	verify(b, b->size, when);
	free(b->p);
	account(-(long long)b->size);
	b->p = NULL;
	b->size = 0;
}

static void *worker(void *arg)
{
	int tid = (int)(intptr_t)arg;
	uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(tid + 1);
	struct block *slots = calloc((size_t)nslots, sizeof(*slots));
	if (!slots) {
		atomic_fetch_add(&failed, 1);
		return NULL;
	}
	unsigned long long n = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		int k = (int)(rnd(&s) % (uint64_t)nslots);
		struct block *b = &slots[k];
		uint64_t op = rnd(&s) % 16;
		if (b->p && op < 3) { /* realloc: prefix kept, the rest refilled */
			size_t ns = pick_size(&s);
			verify(b, b->size, "before realloc");
			unsigned char *np = realloc(b->p, ns);
			if (!np) {
				atomic_fetch_add(&failed, 1);
				continue;
			}
			size_t old = b->size;
			b->p = np;
			b->size = ns;
			verify(b, old, "after realloc");
			if (b->zero)
				fill(b, 0);
			else
				fill(b, old < ns ? old : ns);
			account((long long)ns - (long long)old);
		} else if (b->p && op == 3) { /* hand to the next thread, which frees it */
			struct block *h = malloc(sizeof(*h));
			if (!h) {
				atomic_fetch_add(&failed, 1);
				continue;
			}
			*h = *b;
			b->p = NULL;
			b->size = 0;
			struct handoff *to = &hand[(tid + 1) % nthreads];
			struct block *prev = atomic_exchange(&to->box, h);
			if (prev) { /* the box was full: we free the previous one (also remote) */
				drop(prev, "handoff (sender)");
				free(prev);
			}
		} else {
			drop(b, "before free");
			make(b, &s, tid, k);
		}
		struct block *in = atomic_exchange(&hand[tid].box, NULL);
		if (in) {
			drop(in, "handoff (receiver)");
			free(in);
		}
		if ((++n & 1023) == 0)
			atomic_fetch_add(&ops, 1024);
	}
	for (int k = 0; k < nslots; k++)
		drop(&slots[k], "at exit");
	free(slots);
	return NULL;
}

static void on_stop(int sig)
{
	(void)sig;
	asked_to_stop = 1;
}

int main(int argc, char **argv)
{
	nthreads = argc > 1 ? atoi(argv[1]) : 4;
	seconds = argc > 2 ? atof(argv[2]) : 10;
	nslots = argc > 3 ? atoi(argv[3]) : 512;
	if (nthreads < 1 || nthreads > 256 || seconds < 0 || nslots < 1) {
		fprintf(stderr, "usage: soak THREADS SECONDS [SLOTS]\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* the workers inherit the mask with both blocked: the main thread takes them */
	sigset_t stops;
	sigemptyset(&stops);
	sigaddset(&stops, SIGTERM);
	sigaddset(&stops, SIGINT);
	struct sigaction sa = {.sa_handler = on_stop};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	pthread_sigmask(SIG_BLOCK, &stops, NULL);
	hand = calloc((size_t)nthreads, sizeof(*hand));
	pthread_t *t = calloc((size_t)nthreads, sizeof(*t));
	if (!hand || !t)
		return 1;
	for (int i = 0; i < nthreads; i++)
		if (pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i) != 0) {
			perror("pthread_create");
			return 1;
		}
	pthread_sigmask(SIG_UNBLOCK, &stops, NULL);
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		usleep(100000);
		clock_gettime(CLOCK_MONOTONIC, &now);
		double el =
		        (double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) / 1e9;
		if ((seconds > 0 && el >= seconds) || asked_to_stop || atomic_load(&corrupt))
			break;
		printf("ops=%llu live=%lld peak_live=%lld\n", atomic_load(&ops), atomic_load(&live),
		       atomic_load(&peak_live));
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < nthreads; i++) {
		struct block *in = atomic_exchange(&hand[i].box, NULL);
		if (in) {
			drop(in, "handoff at exit");
			free(in);
		}
	}
	printf("soak: threads=%d seconds=%.0f ops=%llu corrupt=%llu failed=%llu peak_live=%lld "
	       "live_at_exit=%lld\n",
	       nthreads, seconds, atomic_load(&ops), atomic_load(&corrupt), atomic_load(&failed),
	       atomic_load(&peak_live), atomic_load(&live));
	free(t);
	free(hand);
	return atomic_load(&corrupt) || atomic_load(&failed) || atomic_load(&live) != 0 ? 1 : 0;
}
