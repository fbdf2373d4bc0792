/* aging.c — free pages go back by time: a page free for decay_ms is returned whatever else
 * the heap does (a steady trickle of allocations, batch sizes inflated by earlier bursts,
 * spans allocated in the same heap meanwhile), while pages a heap soon reuses are not
 * returned (counted in minor faults). Asserted on /proc (RSS, faults) and the allocator's
 * counters; every wait is for a condition, with a deadline far above the time it takes.
 * Linked with liballoc.a; every test runs in its own process. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "procstatus.h"
#include "liballoc.h"

static void set(const char *name, int64_t v)
{
	char reason[160];
	cr_assert_eq(liballoc_set(name, v, reason, sizeof(reason)), 0, "%s: %s", name, reason);
}

static long minflt(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_minflt;
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static uint64_t rng = 12345;
static size_t rnd(size_t lo, size_t hi)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return lo + (size_t)(rng % (hi - lo + 1));
}

struct blk {
	char *p;
	size_t n;
};

static struct blk make(size_t lo, size_t hi)
{
	size_t n = rnd(lo, hi);
	char *p = A(malloc)(n);
	cr_assert_not_null(p);
	memset(p, 1, n);
	return (struct blk){p, n};
}

#define KIB 1024
#define MIB (1024 * 1024)

/* What the trickle test bounds: the process's RSS. Under AddressSanitizer the runtime's
 * own memory (its allocator for the test framework, shadow, quarantine) comes and goes
 * with no relation to liballoc (this scenario: 14-28 MB above the plain build's RSS): there
 * the bound applies to what liballoc itself holds resident (its heaps' resident data
 * pages, free or not, its metadata and its mappings' counted pages), from its counters. */
static long held_kib(void)
{
#if defined(__SANITIZE_ADDRESS__)
#define HELD "liballoc's resident memory"
	struct la_counters c;
	liballoc_stats(&c);
	return (long)((c.data_resident_bytes + c.metadata_bytes) / KIB);
#else
#define HELD "RSS"
	return status_kib("VmRSS:");
#endif
}

/* The scenario: after bursts (40 x 40 MiB allocated and freed) and 60 MiB
 * allocated then freed down to 5 MiB live, a steady trickle frees one block and allocates
 * one of 92-108 KiB every 5 ms. The previous policy returned nothing for as long as the
 * trickle lasted (RSS stayed at 62 MB with 5 MB live): the trend never turned "shrinking",
 * the batch size had grown with the bursts, and the decay pass skipped every heap that
 * allocated a span during its period. Now RSS must come within 2 x live + 8 MiB within
 * 2 x decay_ms, and stay there. */
Test(aging, a_steady_trickle_does_not_keep_freed_memory_resident)
{
	const long decay_ms = 250;
	static struct blk b[1024];
	for (int burst = 0; burst < 40; burst++) {
		size_t n = 0;
		for (size_t bytes = 0; bytes < 40 * MIB; bytes += b[n++].n)
			b[n] = make(92 * KIB, 108 * KIB);
		while (n)
			A(free)(b[--n].p);
	}
	size_t n = 0, live = 0;
	while (live < 60 * MIB) {
		b[n] = make(92 * KIB, 108 * KIB);
		live += b[n++].n;
	}
	while (live > 5 * MIB) {
		size_t i = rnd(0, n - 1);
		live -= b[i].n;
		A(free)(b[i].p);
		b[i] = b[--n];
	}
	set("decay_ms", decay_ms); /* the default (10 s) until now, as in the run */
	long start_kib = held_kib(), bound_kib = (long)(2 * live + 8 * MIB) / KIB;
	double t0 = now_s(), reached = -1, deadline = t0 + 2.0 * decay_ms / 1000 + 10;
	long worst_after = 0;
	for (int k = 0;; k++) {
		double t = now_s();
		long rss = held_kib();
		if (reached < 0 && rss <= bound_kib)
			reached = t - t0;
		else if (reached >= 0 && rss > worst_after)
			worst_after = rss;
		/* once reached, the trickle goes on for four more periods */
		if (reached >= 0 ? t - t0 > reached + 4.0 * decay_ms / 1000 : t > deadline)
			break;
		size_t i = rnd(0, n - 1);
		live -= b[i].n;
		A(free)(b[i].p);
		b[i] = make(92 * KIB, 108 * KIB);
		live += b[i].n;
		usleep(5000);
	}
	cr_log_info(HELD " %ld KiB when the trickle started, bound %ld KiB reached after %.3f s "
	                 "(decay_ms %ld), at most %ld KiB after",
	            start_kib, bound_kib, reached, decay_ms, worst_after);
	cr_assert_geq(reached, 0,
	              HELD
	              " stayed above 2 x live + 8 MiB (%ld KiB) for %.0f s of trickle: %ld KiB "
	              "(%zu KiB live)",
	              bound_kib, deadline - t0, held_kib(), live / KIB);
	cr_assert_leq(reached, 2.0 * decay_ms / 1000,
	              "2 x live + 8 MiB reached after %.3f s, more than 2 x decay_ms", reached);
	cr_assert_leq(worst_after, bound_kib, HELD " went back up to %ld KiB (bound %ld KiB)",
	              worst_after, bound_kib);
	while (n)
		A(free)(b[--n].p);
}

/* A heap that grows and shrinks in cycles shorter than decay_ms reuses the pages each
 * shrink freed: after the first cycles (which lay the heap out), a growth faults in only a
 * small fraction of what it allocates. The previous throttle returned pages at every
 * shrink and the next growth faulted them back in. */
Test(aging, pages_a_heap_soon_reuses_are_not_returned)
{
	set("decay_ms", 10000);
	static struct blk b[8192];
	size_t n = 0, live = 0;
	long faults_from = 0, allocated_pages = 0;
	for (int cycle = 0; cycle < 12; cycle++) {
		if (cycle == 4)
			faults_from = minflt();
		while (live < 48 * MIB) {
			b[n] = make(16 * KIB, 128 * KIB);
			live += b[n].n;
			if (cycle >= 4)
				allocated_pages += (long)(b[n].n / 4096);
			n++;
		}
		while (live > 12 * MIB) {
			size_t i = rnd(0, n - 1);
			live -= b[i].n;
			A(free)(b[i].p);
			b[i] = b[--n];
		}
	}
	long faults = minflt() - faults_from;
	cr_log_info("%ld faults in 8 cycles that wrote %ld pages", faults, allocated_pages);
	cr_assert_leq(faults, allocated_pages / 20,
	              "%ld minor faults in 8 cycles of growth that wrote %ld pages: freed pages "
	              "were returned and faulted back in",
	              faults, allocated_pages);
	while (n)
		A(free)(b[--n].p);
}
