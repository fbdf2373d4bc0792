/* rtflush.c — priority inversion on the allocation path: a SCHED_FIFO thread allocates
 * and frees every millisecond while a normal-priority thread on the same CPU flushes every
 * thread cache in a loop (liballoc_flush_caches: the same handshake as `allocctl flush`
 * and the decay pass). The real-time thread must never wait for the flusher to run: its
 * worst section (wake-up to the end of its allocations) is printed and must stay within
 * LIMIT_MS.
 *
 * usage: rtflush SECONDS [LIMIT_MS]
 * Prints "rtflush: N sections, worst W ms, K over 1 ms, flushes F"; exit 0 when W <= LIMIT_MS (default
 * 10), 1 otherwise, 77 (with the reason) when the kernel refuses SCHED_FIFO. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "liballoc.h"

#pragma weak liballoc_flush_caches

static uint32_t stop;
static uint64_t flushes;
static int cpu = -1;

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static int pin(void)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static void *flusher(void *arg)
{
	(void)arg;
	pin();
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		liballoc_flush_caches();
		__atomic_fetch_add(&flushes, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

struct rt {
	double seconds;
	uint64_t worst_ns, sections, over_1ms;
	int err; /* pthread_setschedparam's error */
};

static void *rt_thread(void *arg)
{
	struct rt *r = arg;
	pin();
	struct sched_param sp = {.sched_priority = 10};
	r->err = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
	if (r->err)
		return NULL;
	void *blocks[32];
	uint64_t rng = 1, next = now_ns(), end = next + (uint64_t)(r->seconds * 1e9);
	while (next < end) {
		next += 1000000;
		struct timespec ts = {(time_t)(next / 1000000000u), (long)(next % 1000000000u)};
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
		uint64_t t0 = now_ns();
		for (int i = 0; i < 32; i++) {
			rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
			blocks[i] = A(malloc)(16 + (rng >> 33) % 2000);
			if (!blocks[i])
				abort();
			memset(blocks[i], i, 16);
		}
		for (int i = 0; i < 32; i++)
			A(free)(blocks[i]);
		uint64_t t = now_ns() - t0;
		if (t > r->worst_ns)
			r->worst_ns = t;
		r->over_1ms += t > 1000000;
		r->sections++;
		if (now_ns() > next)
			next = now_ns(); /* a stall: do not run late sections back to back */
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 2 || atof(argv[1]) <= 0) {
		fprintf(stderr, "usage: rtflush SECONDS [LIMIT_MS]\n");
		return 2;
	}
	if (!liballoc_flush_caches) {
		fprintf(stderr, "rtflush: liballoc is not loaded (no liballoc_flush_caches)\n");
		return 2;
	}
	double limit_ms = argc > 2 ? atof(argv[2]) : 10;
	cpu_set_t set;
	sched_getaffinity(0, sizeof(set), &set);
	for (int i = 0; i < CPU_SETSIZE && cpu < 0; i++)
		if (CPU_ISSET(i, &set))
			cpu = i;
	struct rt r = {.seconds = atof(argv[1])};
	pthread_t f, t;
	pthread_create(&f, NULL, flusher, NULL);
	pthread_create(&t, NULL, rt_thread, &r);
	pthread_join(t, NULL);
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	pthread_join(f, NULL);
	if (r.err) {
		printf("rtflush: SCHED_FIFO refused: %s\n", strerror(r.err));
		return 77;
	}
	double worst = (double)r.worst_ns / 1e6;
	printf("rtflush: %llu sections, worst %.3f ms, %llu over 1 ms, flushes %llu (CPU %d)\n",
	       (unsigned long long)r.sections, worst, (unsigned long long)r.over_1ms,
	       (unsigned long long)flushes, cpu);
	return worst <= limit_ms ? 0 : 1;
}
