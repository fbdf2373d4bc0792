/* mechanisms.c — the four memory-return mechanisms, each on its scenario of issue 4,
 * asserted on the allocator's own counters (system calls, heaps, remote frees) and on
 * /proc, never on timing. Linked with liballoc.a; every test runs in its own process. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "arena.h"
#include "control.h"
#include "direct.h"
#include "heap.h"
#include "liballoc.h"
#include "os.h"
#include "grown.h"
#include "mincount.h"
#include "procstatus.h"
#include "shm.h"
#include "tcache.h"
#include "thpdir.h"

static struct la_counters stats(void)
{
	struct la_counters c;
	liballoc_stats(&c);
	return c;
}

static void set(const char *name, int64_t v)
{
	char reason[160];
	cr_assert_eq(liballoc_set(name, v, reason, sizeof(reason)), 0, "%s: %s", name, reason);
}

static void run_thread(void *(*fn)(void *), void *arg)
{
	pthread_t t;
	pthread_create(&t, NULL, fn, arg);
	pthread_join(t, NULL);
}

/* ---- 1. madvise throttling ------------------------------------------------------------ */

/* The madvise calls that are not populates: the purges and the advice that goes with them,
 * the throttle's calls. A large block placed on fresh pages may have its pages (populate-
 * ahead) or its first page (a block that may go on the grid) populated (heap.c), one more
 * madvise_calls each, which the throttle has no part in (os_populate_calls counts them). */
static uint64_t returning_calls(void)
{
	uint64_t populates, calls;
	do {
		populates = __atomic_load_n(&os_populate_calls, __ATOMIC_RELAXED);
		calls = stats().madvise_calls;
	} while (populates != __atomic_load_n(&os_populate_calls, __ATOMIC_RELAXED));
	return calls - populates;
}

/* malloc, touch, free 1024 times: 48 pages each time, or (arg not NULL) 36 and 38 pages in
 * turn, so that the freed block is not the one the arena keeps for the next allocation of
 * its size and every free reaches the heap and its throttle (both below the 40 pages from
 * which a request of another size takes the parked block in place, arena.c) */
static void *grow_shrink_48_pages(void *arg)
{
	for (int i = 0; i < 1024; i++) {
		size_t n = (arg ? (i & 1 ? 38 : 36) : 48) * 4096;
		char *p = A(malloc)(n);
		memset(p, i, n);
		A(free)(p);
	}
	return arg;
}

static int two_sizes = 1;

Test(throttle, alternating_grow_and_shrink_makes_at_most_two_madvise_calls)
{
	set("mmap_threshold", 1 << 20); /* pinned: nothing dynamic rescues it */
	set("trim_threshold", 128 * 1024);
	set("tcache_max_bytes", 0); /* the thread cache's large slot would hold both sizes */
	struct la_counters before = stats();
	uint64_t r0 = returning_calls();
	run_thread(grow_shrink_48_pages, &two_sizes);
	uint64_t madv = returning_calls() - r0;
	struct la_counters after = stats();
	cr_assert_leq(madv, 2, "madvise calls (populates aside): %llu", (unsigned long long)madv);
	cr_assert_geq(after.madvise_deferred - before.madvise_deferred, 1000,
	              "the throttle deferred the returns: %llu",
	              (unsigned long long)(after.madvise_deferred - before.madvise_deferred));
}

/* (The trim first: a block the process parked before, or free pages it left resident,
 * would go back or be deferred at the thread's first free, whatever the slot does: by the
 * test runner's own blocks, a layout of the heap.) */
Test(throttle, one_size_is_served_by_the_parked_block_without_madvise)
{
	set("mmap_threshold", 1 << 20);
	set("trim_threshold", 128 * 1024);
	liballoc_trim(0);
	struct la_counters before = stats();
	uint64_t r0 = returning_calls();
	run_thread(grow_shrink_48_pages, NULL);
	uint64_t madv = returning_calls() - r0;
	struct la_counters after = stats();
	cr_assert_eq(madv, 0, "madvise calls (populates aside): %llu", (unsigned long long)madv);
	cr_assert_eq(after.madvise_deferred, before.madvise_deferred,
	             "no free reached the heap: each took the parked span back");
}

Test(throttle, turned_off_it_returns_pages_on_every_shrink)
{
	set("mmap_threshold", 1 << 20);
	set("trim_threshold", 128 * 1024);
	set("madvise_throttle", 0);
	uint64_t r0 = returning_calls();
	run_thread(grow_shrink_48_pages, NULL); /* nothing is parked with the throttle off */
	uint64_t madv = returning_calls() - r0;
	cr_assert_geq(madv, 1000, "madvise calls (populates aside): %llu",
	              (unsigned long long)madv);
}

/* Without a decay pass (decay_ms 0, or LIBALLOC_CONTROL=0) the throttle returns pages on
 * frees, by the heap's trend; with one, free pages go back by age (tests/unit/aging.c). */
Test(throttle, without_the_decay_pass_a_shrinking_heap_returns_pages_in_batches)
{
	set("decay_ms", 0);
	set("mmap_threshold", 1 << 20);
	enum { N = 2000 };
	static char *blocks[N];
	for (int i = 0; i < N; i++)
		memset(blocks[i] = A(malloc)(64 * 1024), 1, 64 * 1024);
	struct la_counters before = stats();
	for (int i = 0; i < N - 1; i++)
		A(free)(blocks[i]);
	struct la_counters after = stats();
	uint64_t madv = after.madvise_calls - before.madvise_calls;
	uint64_t bytes = after.madvise_bytes - before.madvise_bytes;
	cr_assert_gt(madv, 0, "a shrinking heap gives pages back without a trim");
	cr_assert_geq(bytes / madv, 1 << 20,
	              "batches of at least the mmap threshold: %llu calls, %llu bytes",
	              (unsigned long long)madv, (unsigned long long)bytes);
	A(free)(blocks[N - 1]);
}

/* With the decay pass, frees return pages only from a heap left nearly empty (a load that
 * dropped); once that heap grows back into such pages it waits for the decay pass. With
 * no other arena in use (criterion's thread allocates through ASan's malloc under ASan) the
 * purge waits for the control thread: the first round waits for it. */
Test(throttle, a_heap_left_nearly_empty_returns_pages_until_it_grows_back_into_them)
{
	set("mmap_threshold", 1 << 20);
	enum { N = 800 }; /* 50 MiB: one heap, 16 x what the test program holds besides */
	static char *blocks[N];
	uint64_t madv[2];
	uint8_t due = 0;
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < N - 1; i++)
			memset(blocks[i] = A(malloc)(64 * 1024), 1, 64 * 1024);
		if (round == 0)
			memset(blocks[N - 1] = A(malloc)(64 * 1024), 1, 64 * 1024);
		struct la_counters before = stats();
		for (int i = 0; i < N - 1; i++)
			A(free)(blocks[i]);
		if (round == 1)
			due = __atomic_load_n(&heap_of(blocks[N - 1])->purge_due, __ATOMIC_RELAXED);
		for (int i = 0;
		     round == 0 && i < 2000 && stats().madvise_calls == before.madvise_calls; i++)
			usleep(5000);
		struct la_counters after = stats();
		madv[round] = after.madvise_calls - before.madvise_calls;
		if (round == 0)
			cr_assert_geq((after.madvise_bytes - before.madvise_bytes) / (madv[0] | 1),
			              1 << 20, "batches of at least the mmap threshold");
	}
	cr_assert_gt(madv[0], 0, "the heap left with one block gave its pages back at once");
	cr_assert_eq(madv[1], 0,
	             "after growing back into them, it left them to the decay pass: %llu calls",
	             (unsigned long long)madv[1]);
	cr_assert_eq(due, 0, "after growing back into them, a purge waited for the control thread");
	A(free)(blocks[N - 1]);
}

/* A heap that breathes (fell to a fifth of its peak and grew back) reaches a bottom that is
 * a trough, not a load that dropped: with no other arena in use, the free that leaves it
 * nearly empty keeps its pages (only its next growth could take them, and it would fault
 * them in again), and the decay pass returns what stays free. One that fell to a fifth
 * and stays there (a trickle, a load that dropped in steps) is not breathing: its last
 * free still returns the pages at once; so does a breathing one while other arenas are in
 * use (their growth takes what goes back). Returns the madvise calls of the frees that
 * leave the heap nearly empty; *kept: the free resident bytes after them; before_drop (if
 * not NULL) runs before those frees. */
static uint64_t grow_drop_bottom(bool regrow, uint64_t *kept, void (*before_drop)(void))
{
	enum { N = 800 }; /* 50 MiB: one heap, 16 x what the test program holds besides */
	static char *blocks[N];
	for (int i = 0; i < N; i++)
		memset(blocks[i] = A(malloc)(64 * 1024), 1, 64 * 1024);
	for (int i = 1; i < N; i++) /* down to a fifth (4 x more free than used: not */
		if (i % 5)          /* nearly empty, nothing returned) */
			A(free)(blocks[i]);
	if (regrow)
		for (int i = 1; i < N; i++)
			if (i % 5)
				memset(blocks[i] = A(malloc)(64 * 1024), 2, 64 * 1024);
	if (before_drop)
		before_drop();
	struct la_counters before = stats();
	for (int i = 1; i < N; i++)
		if (regrow || i % 5 == 0)
			A(free)(blocks[i]);
	struct la_counters after = stats();
	*kept = after.free_resident_bytes;
	return after.madvise_calls - before.madvise_calls;
}

struct bottom {
	uint64_t madv;    /* madvise calls of the frees that left the heap nearly empty */
	uint64_t kept;    /* free resident bytes after them */
	uint64_t decayed; /* bytes returned afterwards, waiting for the decay pass */
	uint64_t waited;  /* madvise calls by the control thread's look (wait_purge) */
};

/* grow_drop_bottom in a child process, where this thread's arena is the only one in use
 * (criterion's worker runs a second thread, and fork keeps only the forking thread's).
 * wait_decay: then wait for the decay pass to return what stays free; wait_purge: for the
 * purge the frees left to the control thread (EMPTY_WAIT_NS). */
static struct bottom bottom_in_child(bool regrow, bool wait_decay, bool wait_purge)
{
	set("mmap_threshold", 1 << 20);
	int fd[2];
	cr_assert_eq(pipe(fd), 0);
	pid_t pid = fork();
	cr_assert_neq(pid, -1);
	if (pid == 0) {
		struct bottom b = {0, 0, 0, 0};
		b.madv = grow_drop_bottom(regrow, &b.kept, NULL);
		uint64_t dropped = stats().madvise_calls;
		for (int i = 0; wait_purge && !b.madv && i < 2000 && !b.waited; i++) {
			usleep(5000);
			b.waited = stats().madvise_calls - dropped;
		}
		if (wait_decay) { /* what stays free goes back by time: ~50 MiB */
			uint64_t from = stats().madvise_bytes;
			liballoc_set("decay_ms", 100, NULL, 0);
			for (int i = 0; i < 6000 && stats().madvise_bytes - from < (40u << 20); i++)
				usleep(5000);
			b.decayed = stats().madvise_bytes - from;
		}
		_exit(write(fd[1], &b, sizeof(b)) == (ssize_t)sizeof(b) ? 0 : 1);
	}
	close(fd[1]);
	struct bottom b;
	ssize_t got = read(fd[0], &b, sizeof(b));
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	close(fd[0]);
	cr_assert(got == (ssize_t)sizeof(b) && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	          "the child did not report (status %d)", status);
	return b;
}

Test(throttle, a_breathing_heap_keeps_its_pages_at_its_bottom)
{
	struct bottom b = bottom_in_child(true, true, false);
	cr_assert_geq(b.kept, 40u << 20,
	              "the breathing heap's bottom kept %llu bytes of the ~50 MiB freed (%llu "
	              "madvise calls)",
	              (unsigned long long)b.kept, (unsigned long long)b.madv);
	cr_assert_geq(b.decayed, 40u << 20, "the decay pass returned %llu bytes of the ~50 MiB",
	              (unsigned long long)b.decayed);
}

Test(throttle, a_heap_that_fell_and_stays_low_is_still_purged_when_left_nearly_empty)
{
	struct bottom b = bottom_in_child(false, false, true);
	cr_assert_gt(b.madv + b.waited, 0, "the heap left nearly empty in steps kept its pages");
}

/* Blocks of 9 to LARGE_HEAP_MAX_PAGES pages come from heaps of large blocks from here on:
 * as if the arena had served LARGE_HEAP_AFTER of them from its other heaps already. */
static void large_heaps_on(void)
{
	A(free)(A(malloc)(16)); /* (the thread's arena) */
	struct arena *a = tcache_arena(&la_tcache);
	arena_lock(a);
	a->large_heap_wait = LARGE_HEAP_AFTER;
	arena_unlock(a);
}

/* Is p in a heap of large blocks of this thread's arena (its owner-table entry carries the
 * arena's tag with HEAP_TAG_LARGE: free tells it on that load)? */
static bool in_large_heap(const void *p)
{
	return heap_owner_tag(p) == (heap_tag(tcache_arena(&la_tcache)->index) | HEAP_TAG_LARGE) &&
	       heap_of(p)->large;
}

/* One attempt of the test below, in a child (one arena in use): 50 MiB of blocks in one heap
 * (of large blocks), all freed but the first (nearly empty), an eighth of them taken again (no longer nearly
 * empty), then the rest, all freed again. Its madvise calls leave populates aside
 * (returning_calls). */
struct wait_try {
	uint64_t madv_drop;   /* madvise calls of the first frees */
	uint8_t due;          /* the heap's purge was waiting after them */
	uint8_t cancelled;    /* the growth back turned it off, as a refault */
	uint64_t madv_regrow; /* madvise calls from the first frees to the second */
	uint64_t madv_again;  /* madvise calls of the second frees */
	uint64_t took_ns;     /* from the first frees to the growth out of nearly empty */
};

static struct wait_try waiting_purge_try(void)
{
	enum { N = 800 };
	static char *blocks[N];
	struct wait_try w = {0, 0, 0, 0, 0, 0};
	large_heaps_on(); /* all of them in one heap, the first too */
	for (int i = 0; i < N; i++)
		memset(blocks[i] = A(malloc)(64 * 1024), 1, 64 * 1024);
	struct heap *h = heap_of(blocks[0]);
	uint64_t m0 = returning_calls();
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 1; i < N; i++)
		A(free)(blocks[i]);
	uint64_t m1 = returning_calls();
	w.due = __atomic_load_n(&h->purge_due, __ATOMIC_RELAXED);
	for (int i = 1; i < N / 8; i++)
		memset(blocks[i] = A(malloc)(64 * 1024), 2, 64 * 1024);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	w.cancelled = !__atomic_load_n(&h->purge_due, __ATOMIC_RELAXED) && h->refaulted;
	for (int i = N / 8; i < N; i++)
		memset(blocks[i] = A(malloc)(64 * 1024), 2, 64 * 1024);
	uint64_t m2 = returning_calls();
	for (int i = 1; i < N; i++)
		A(free)(blocks[i]);
	w.madv_drop = m1 - m0;
	w.madv_regrow = m2 - m1;
	w.madv_again = returning_calls() - m2;
	w.took_ns = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000u + (uint64_t)t1.tv_nsec -
	            (uint64_t)t0.tv_nsec;
	A(free)(blocks[0]);
	return w;
}

static void *waiting_purge_worker(void *arg)
{
	*(struct wait_try *)arg = waiting_purge_try();
	return NULL;
}

/* waiting_purge_try in a forked child, on its main thread or (in_worker) on a worker the
 * main thread, its arena attached and used first, only waits for in pthread_join; made
 * again while a busy machine stretched it past EMPTY_WAIT_NS (the control thread may then
 * purge, as it should). */
static struct wait_try wait_try_in_child(bool in_worker)
{
	struct wait_try w;
	int tries = 0;
	do {
		int fd[2];
		cr_assert_eq(pipe(fd), 0);
		pid_t pid = fork();
		cr_assert_neq(pid, -1);
		if (pid == 0) {
			if (!in_worker) {
				w = waiting_purge_try();
			} else {
				A(free)
				(A(malloc)(64)); /* this thread's arena is attached and used */
				pthread_t t;
				if (pthread_create(&t, NULL, waiting_purge_worker, &w) != 0 ||
				    pthread_join(t, NULL) != 0)
					_exit(2);
			}
			_exit(write(fd[1], &w, sizeof(w)) == (ssize_t)sizeof(w) ? 0 : 1);
		}
		close(fd[1]);
		ssize_t got = read(fd[0], &w, sizeof(w));
		int status;
		cr_assert_eq(waitpid(pid, &status, 0), pid);
		close(fd[0]);
		cr_assert(got == (ssize_t)sizeof(w) && WIFEXITED(status) &&
		                  WEXITSTATUS(status) == 0,
		          "the child did not report (status %d)", status);
	} while (w.took_ns >= EMPTY_WAIT_NS && ++tries < 50);
	cr_assert_lt(w.took_ns, EMPTY_WAIT_NS, "no attempt in %d ran in time", tries);
	return w;
}

/* With one arena in use, the purge of a heap a free left nearly empty waits EMPTY_WAIT_NS
 * for the control thread; a heap that grows back out of nearly empty meanwhile keeps its
 * pages (no madvise, none to fault back in) and remembers it as a refault: its next drop
 * leaves the pages to the decay pass. An attempt that a busy machine stretched past
 * EMPTY_WAIT_NS (the control thread may then purge, as it should) is made again. */
Test(throttle, a_heap_left_nearly_empty_keeps_its_pages_when_it_grows_back_at_once)
{
	set("mmap_threshold", 1 << 20);
	struct wait_try w = wait_try_in_child(false);
	cr_assert_eq(w.madv_drop, 0,
	             "the frees that left the heap nearly empty purged it: %llu calls",
	             (unsigned long long)w.madv_drop);
	cr_assert(w.due, "the heap's purge was not waiting for the control thread");
	cr_assert(w.cancelled, "growing back out of nearly empty did not turn the purge off");
	cr_assert_eq(w.madv_regrow, 0, "%llu madvise calls while it grew back",
	             (unsigned long long)w.madv_regrow);
	cr_assert_eq(w.madv_again, 0, "the next drop purged (%llu calls): no refault remembered",
	             (unsigned long long)w.madv_again);
}

static int other_arena_go[2];

/* The same with the heap in a worker's arena while the thread of the other arena in use
 * only waits for it in pthread_join (a program's main thread): that arena takes nothing
 * that a purge would give back, so it does not count as in use, and the worker's heap
 * keeps its pages when it grows back at once (before: purged at the drop, 6,744 faults
 * against 3,745 in sizemix 1 1200). */
Test(throttle, a_workers_heap_keeps_its_pages_while_the_main_thread_only_waits)
{
	set("mmap_threshold", 1 << 20);
	set("arena_max", 16); /* the worker has an arena of its own, whatever the CPUs */
	struct wait_try w = wait_try_in_child(true);
	cr_assert_eq(w.madv_drop, 0,
	             "the frees that left the worker's heap nearly empty purged it: %llu calls",
	             (unsigned long long)w.madv_drop);
	cr_assert(w.due, "the heap's purge was not waiting for the control thread");
	cr_assert(w.cancelled, "growing back out of nearly empty did not turn the purge off");
	cr_assert_eq(w.madv_regrow, 0, "%llu madvise calls while it grew back",
	             (unsigned long long)w.madv_regrow);
}

/* Another arena whose thread takes blocks while this one's heap is left nearly empty is in
 * use: its growth takes what the purge gives back, which goes at once. */
static volatile int taker_stop;

/* The work (refills, flushes, large blocks) of every arena */
static uint32_t all_work(void)
{
	uint32_t sum = 0, n = __atomic_load_n(&arena_count, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < n; i++)
		sum += __atomic_load_n(&arenas[i].work, __ATOMIC_RELAXED);
	return sum;
}

/* Waits (bounded) until another thread worked in its arena: after any look this thread's
 * arena took before (this thread does nothing meanwhile). */
static void wait_for_other_work(void)
{
	uint32_t from = all_work();
	for (int i = 0; i < 10000 && all_work() == from; i++)
		usleep(1000);
	cr_assert_neq(all_work(), from, "the other thread did no work in 10 s");
}

static void *take_blocks(void *arg)
{
	(void)arg;
	static void *b[4096];
	A(free)(A(malloc)(64));
	cr_assert_eq(write(other_arena_go[1], "a", 1), 1);
	while (!__atomic_load_n(&taker_stop, __ATOMIC_RELAXED)) {
		/* more blocks than a cache bin holds: each round refills from the arena */
		for (int i = 0; i < 4096; i++)
			b[i] = A(malloc)(256);
		for (int i = 0; i < 4096; i++)
			A(free)(b[i]);
	}
	return NULL;
}

Test(throttle, a_heap_left_nearly_empty_is_purged_at_once_while_another_arena_takes_blocks)
{
	set("mmap_threshold", 1 << 20);
	set("arena_max", 16); /* the other thread has an arena of its own, whatever the CPUs */
	cr_assert_eq(pipe(other_arena_go), 0);
	enum { N = 800 }; /* 50 MiB: one heap, 16 x what the test program holds besides */
	static char *blocks[N];
	for (int i = 0; i < N; i++)
		memset(blocks[i] = A(malloc)(64 * 1024), 1, 64 * 1024);
	pthread_t t;
	char c;
	cr_assert_eq(pthread_create(&t, NULL, take_blocks, NULL), 0);
	cr_assert_eq(read(other_arena_go[0], &c, 1), 1); /* it is attached */
	wait_for_other_work();
	struct la_counters before = stats();
	for (int i = 1; i < N; i++)
		A(free)(blocks[i]);
	struct la_counters after = stats();
	__atomic_store_n(&taker_stop, 1, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
	cr_assert_gt(after.madvise_calls - before.madvise_calls, 0,
	             "the heap left nearly empty kept its pages while another arena took blocks");
	A(free)(blocks[0]);
}

Test(throttle, a_breathing_heap_is_purged_at_its_bottom_while_other_arenas_are_in_use)
{
	set("mmap_threshold", 1 << 20);
	/* the other thread must have an arena of its own, whatever the CPUs */
	set("arena_max", 16);
	char c;
	cr_assert_eq(pipe(other_arena_go), 0);
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, take_blocks, NULL), 0);
	cr_assert_eq(read(other_arena_go[0], &c, 1), 1); /* it is attached */
	uint64_t kept, madv = grow_drop_bottom(true, &kept, wait_for_other_work);
	__atomic_store_n(&taker_stop, 1, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
	cr_assert_gt(madv, 0, "the breathing heap kept its pages while another arena was used");
}

Test(throttle, an_explicit_trim_bypasses_it)
{
	set("mmap_threshold", 1 << 20);
	run_thread(grow_shrink_48_pages, NULL);
	struct la_counters before = stats();
	cr_assert_eq(A(malloc_trim)(0), 1);
	struct la_counters after = stats();
	cr_assert_gt(after.madvise_calls + after.munmap_calls,
	             before.madvise_calls + before.munmap_calls);
	cr_assert_lt(after.free_resident_bytes, before.free_resident_bytes);
}

/* ---- a freed large block is parked for the next allocation of its size ------------------ */

/* The thread cache's large slot holds the block a free would have parked (tcache.h): give
 * it to the arena, which parks it, as its free did before the slot. */
static void park(void)
{
	tcache_flush_large_all();
	cr_assert_eq(tcache_large_bytes(), 0, "the large slot is empty (set-up)");
}

Test(parked, the_next_block_of_its_size_takes_it_back)
{
	set("mmap_threshold", 1 << 20);
	char *keep = A(malloc)(100000); /* the heap stays in use throughout */
	char *p = A(malloc)(48 * 4096);
	memset(p, 1, 48 * 4096);
	struct la_counters before = stats();
	A(free)(p);
	park();
	struct la_counters freed = stats();
	cr_assert_eq(freed.allocated_bytes, before.allocated_bytes - 48 * 4096);
	cr_assert_eq(freed.free_resident_bytes, before.free_resident_bytes + 48 * 4096,
	             "a parked block is free memory kept resident");
	char *q = A(malloc)(48 * 4096 - 100);
	cr_assert_eq(q, p, "the same span comes back");
	cr_assert_eq(q[0], 1, "untouched: not returned to the system meanwhile");
	struct la_counters again = stats();
	cr_assert_eq(again.allocated_bytes, before.allocated_bytes);
	cr_assert_eq(again.free_resident_bytes, before.free_resident_bytes);
	A(free)(q);
	A(free)(keep);
}

/* A longer request with no free resident pages right after the parked block to grow it
 * into (the heap's top: never used), and a shorter one below 40 pages (which takes a free
 * span's resident pages), leave it for the next block of its size. */
Test(parked, a_block_of_another_size_that_cannot_take_it_in_place_leaves_it_parked)
{
	A(malloc_trim)(0); /* (free pages the test runner's blocks left: direct_free) */
	set("mmap_threshold", 1 << 20);
	char *p = A(malloc)(48 * 4096);
	A(free)(p);
	char *q = A(malloc)(50 * 4096);
	cr_assert(q + 50 * 4096 <= p || q >= p + 48 * 4096, "not carved from the parked span");
	char *s = A(malloc)(39 * 4096);
	cr_assert(s + 39 * 4096 <= p || s >= p + 48 * 4096, "not carved from the parked span");
	char *r = A(malloc)(48 * 4096);
	cr_assert_eq(r, p);
	A(free)(q);
	A(free)(s);
	A(free)(r);
}

static size_t resident_pages(const void *p, size_t len);

/* A request of 40 pages or more that the parked block does not fit exactly takes it in
 * place when it is longer: its first pages, the rest back to the heap. The freed block's
 * first page is the one the program surely wrote (here the only one: a buffer written at
 * its start), so the new block starts on a resident page; placed anywhere else it would
 * fault in a page while that one stayed resident and free (`large_random`'s heap blocks:
 * 59% of them started on a page not resident). */
/* Asks for `pages` pages and checks they come as the parked block at p, taken in place from
 * pages counted free and resident (the rest of the block, or of the pages after it, stays
 * free resident in the heap). */
static char *take_in_place(char *p, size_t pages)
{
	struct la_counters before = stats();
	char *q = A(malloc)(pages * 4096);
	cr_assert_eq(q, p, "%zu pages taken at %p, the parked block is at %p", pages, (void *)q,
	             (void *)p);
	struct la_counters after = stats();
	cr_assert_eq(after.allocated_bytes, before.allocated_bytes + pages * 4096);
	cr_assert_eq(after.free_resident_bytes, before.free_resident_bytes - pages * 4096,
	             "taken from free resident pages; the rest stays free resident, in the heap");
	return q;
}

Test(parked, a_shorter_request_of_40_pages_or_more_takes_its_first_pages)
{
	set("mmap_threshold", 1 << 20);
	char *keep = A(malloc)(100000); /* the heap stays in use throughout */
	char *p = A(malloc)(64 * 4096);
	p[0] = 1;
	A(free)(p);
	park();
	char *q = take_in_place(p, 48);
	cr_assert_eq(resident_pages(q, 4096), 1, "its first page is the one written");
	cr_assert_eq(q[0], 1, "not returned to the system meanwhile");
	A(free)(q);
	A(free)(keep);
}

/* A longer one grows it into the free pages right after it when they are all counted
 * resident (here a block freed before it, written whole): the new block takes no fresh
 * page while those stay resident and free. */
Test(parked, a_longer_request_of_40_pages_or_more_grows_it_into_resident_free_pages)
{
	set("mmap_threshold", 1 << 20);
	arena_large_grid = 0; /* r right after p, not on the grid of 16 pages */
	char *p = A(malloc)(48 * 4096);
	char *r = A(malloc)(16 * 4096);
	char *guard = A(malloc)(8 * 4096);
	cr_assert_eq(r, p + 48 * 4096, "side by side");
	memset(p, 1, 48 * 4096);
	memset(r, 1, 16 * 4096);
	A(free)(r); /* parked (in the large slot) */
	A(free)(p); /* parked; r's pages go back to the heap, resident */
	park();
	char *q = take_in_place(p, 60);
	cr_assert_eq(resident_pages(q, 60 * 4096), 60, "no page of it is fresh");
	A(free)(q);
	A(free)(guard);
}

/* ---- the grid of large blocks up to 16 pages (arena.c, heap.c fit_on_grid) ---------- */

/* The page of its heap a block starts on, counted from the heap's start. */
static uint32_t heap_page(const void *p)
{
	return (uint32_t)(((uintptr_t)p & LA_HEAP_MASK) >> LA_PAGE_SHIFT);
}

/* Blocks of 9-16 pages start on a multiple of 16 pages from their heap's start, from fresh
 * pages and from the free runs others left (the sizes mixed, the blocks freed in another
 * order than they came): a program that writes only the start of its blocks touches the
 * same pages again (bench medsizes). (Larger blocks and aligned ones go anywhere.) */
Test(large_grid, blocks_of_up_to_16_pages_start_on_the_grid)
{
	set("mmap_threshold", 1 << 20);
	enum { N = 64 };
	char *b[N];
	for (int round = 0; round < 4; round++) {
		/* pages the heap populated ahead of a fast growth (heap.c) are resident
		 * though the test wrote only their blocks' first bytes, and the frees' samples
		 * may read them as blocks written whole (blocks_written_whole_turn_it_off):
		 * the placement is what this test checks */
		char *one = A(malloc)(1);
		cr_assert_not_null(one);
		struct arena *ar = heap_of(one)->arena;
		arena_lock(ar);
		ar->large_dense = 0;
		arena_unlock(ar);
		A(free)(one);
		for (int i = 0; i < N; i++) {
			size_t pages = 9 + (size_t)((i * 7 + round * 3) % 8);
			b[i] = A(malloc)((pages << LA_PAGE_SHIFT) - (size_t)(i % 3) * 100);
			cr_assert_not_null(b[i]);
			b[i][0] = 1; /* the start only */
			cr_assert_eq(heap_page(b[i]) % 16, 0,
			             "round %d: a block of %zu pages at page %u of its heap (%u "
			             "sampled written whole)",
			             round, pages, heap_page(b[i]),
			             heap_of(b[i])->arena->large_dense);
		}
		for (int i = 0; i < N; i += 2) /* every other, then the rest */
			A(free)(b[i]);
		for (int i = 1; i < N; i += 2)
			A(free)(b[i]);
	}
}

/* Probes sample what the program wrote of its blocks: a block an allocation took with
 * pages after its first not resident yet (one in LARGE_PROBE_EVERY, later one in
 * LARGE_SAMPLE_EVERY) is read (mincore) at its free or at the next probe. Blocks written
 * whole turn the grid off for the arena, so that they fill the heap's holes as before
 * (bench frag); blocks written only at their start keep it on. A block whose pages were
 * resident before it was allocated (pages earlier blocks wrote) is not read: it would say
 * nothing of what the program writes. */
Test(large_grid, blocks_written_whole_turn_it_off)
{
	set("mmap_threshold", 1 << 20);
	set("tcache_max_bytes", 0); /* no large slot: every free reaches the arena */
	set("madvise_throttle", 0); /* nothing populated ahead: only the writes below make
	                             * the blocks' pages resident */
	enum { N = 16 * LARGE_SAMPLE_EVERY };
	size_t len = (size_t)12 << LA_PAGE_SHIFT;
	static char *b[N];
	for (int whole = 0; whole < 2; whole++) {
		for (unsigned i = 0; i < N; i++) {
			b[i] = A(malloc)(len); /* all live: the heap's fresh pages too */
			cr_assert_not_null(b[i]);
			if (whole)
				memset(b[i], 1, len);
			else
				b[i][0] = 1;
		}
		struct arena *a = heap_of(b[0])->arena;
		arena_lock(a);
		uint32_t dense = a->large_dense;
		arena_unlock(a);
		for (unsigned i = 0; i < N; i++)
			A(free)(b[i]);
		if (whole)
			cr_assert_geq(dense, LARGE_DENSE_AT, "blocks written whole: %u", dense);
		else
			cr_assert_lt(dense, LARGE_DENSE_AT,
			             "blocks written at their start only: %u", dense);
	}
}

/* the mincore calls of one thread: mincount.h, included above */

/* 12-page blocks allocated and freed in turn n times, written at their start only: the
 * mincore calls made meanwhile */
static int probe_reads_over(int n)
{
	size_t len = (size_t)12 << LA_PAGE_SHIFT;
	mincount_start();
	for (int i = 0; i < n; i++) {
		char *b = A(malloc)(len);
		cr_assert_not_null(b);
		b[0] = 1;
		A(free)(b);
	}
	return mincount_stop();
}

/* While the samples agree with the placement in use (here blocks written at their start
 * only, the grid on), the probes become up to 2^LARGE_PROBE_BACKOFF times rarer than one
 * in LARGE_SAMPLE_EVERY (each is two mincore calls under the arena lock); the first
 * sample that does not agree (a block written whole) brings the rate back. */
Test(large_grid, probes_back_off_while_their_samples_agree)
{
	set("mmap_threshold", 1 << 20);
	set("tcache_max_bytes", 0); /* no large slot: every free reaches the arena */
	set("madvise_throttle", 0); /* nothing parked or populated: only the writes below
	                             * make the blocks' pages resident */
	char *one = A(malloc)(1);
	cr_assert_not_null(one);
	struct arena *a = heap_of(one)->arena;
	A(free)(one);
	(void)probe_reads_over(2 * LARGE_SAMPLE_EVERY); /* past the first probes */
	arena_lock(a);
	a->large_dense = 0;
	a->probe_backoff = 0;
	arena_unlock(a);
	enum { N = 64 * LARGE_SAMPLE_EVERY };
	int reads = probe_reads_over(N);
	/* one probe in LARGE_SAMPLE_EVERY: 2 * 64 calls (its read at its allocation and at
	 * its free); backed off, 2 * 64 / 2^LARGE_PROBE_BACKOFF and the first few */
	cr_assert_leq(reads, 64, "%d mincore calls", reads);
	arena_lock(a);
	uint32_t k = a->probe_backoff, dense = a->large_dense;
	arena_unlock(a);
	cr_assert_eq(k, LARGE_PROBE_BACKOFF);
	cr_assert_eq(dense, 0);
	/* blocks written whole (all live: their pages not resident before, as a probe's
	 * must be): the first sample of one brings the rate back */
	enum { M = LARGE_SAMPLE_EVERY << LARGE_PROBE_BACKOFF };
	static char *b[M];
	for (int i = 0; i < M; i++) {
		b[i] = A(malloc)((size_t)12 << LA_PAGE_SHIFT);
		cr_assert_not_null(b[i]);
		memset(b[i], 1, (size_t)12 << LA_PAGE_SHIFT);
	}
	for (int i = 0; i < M; i++)
		A(free)(b[i]);
	arena_lock(a);
	k = a->probe_backoff;
	dense = a->large_dense;
	arena_unlock(a);
	cr_assert_eq(dense, 32, "one sample, of a block written whole: %u", dense);
	cr_assert_eq(k, 0, "%u", k);
}

Test(parked, a_small_span_takes_its_pages_before_new_ones)
{
	/* no heap holds other resident free pages: the next small span is carved from the
	 * parked block's pages, which would otherwise stay resident and free beside new
	 * ones faulted in */
	set("mmap_threshold", 1 << 20);
	char *keep = A(malloc)(100000);
	char *p = A(malloc)(48 * 4096);
	memset(p, 1, 48 * 4096);
	A(free)(p); /* parked */
	/* twice the parked pages in 1024-byte blocks */
	enum { N = 2 * 48 * 4 };
	char *b[N];
	int inside = -1;
	for (int i = 0; i < N; i++) {
		b[i] = A(malloc)(1024);
		if (inside < 0 && b[i] >= p && b[i] < p + 48 * 4096)
			inside = i;
	}
	cr_assert_geq(inside, 0, "no small block was carved from the parked pages");
	for (int i = 0; i < N; i++)
		A(free)(b[i]);
	A(free)(keep);
}

Test(parked, turning_the_throttle_off_returns_it_at_the_next_large_free)
{
	set("mmap_threshold", 1 << 20);
	set("trim_threshold", 128 * 1024);
	char *keep = A(malloc)(100000);
	uint64_t base = stats().free_resident_bytes;
	char *p = A(malloc)(48 * 4096);
	memset(p, 1, 48 * 4096);
	A(free)(p); /* parked */
	set("madvise_throttle", 0);
	char *q = A(malloc)(50 * 4096);
	memset(q, 1, 50 * 4096);
	A(free)(q);
	uint64_t retained = stats().free_resident_bytes;
	cr_assert_leq(
	        retained, base + 128 * 1024,
	        "both blocks went back, the heap keeps at most top_pad: %llu bytes free resident, "
	        "%llu before",
	        (unsigned long long)retained, (unsigned long long)base);
	A(free)(keep);
}

Test(parked, a_trim_returns_it)
{
	set("mmap_threshold", 1 << 20);
	char *keep = A(malloc)(100000);
	char *p = A(malloc)(200 * 4096);
	memset(p, 1, 200 * 4096);
	A(free)(p);
	park();
	struct la_counters before = stats();
	cr_assert_geq(before.free_resident_bytes, 200 * 4096);
	cr_assert_eq(A(malloc_trim)(0), 1);
	struct la_counters after = stats();
	cr_assert_gt(after.madvise_calls, before.madvise_calls);
	cr_assert_geq(after.madvise_bytes - before.madvise_bytes, 200 * 4096,
	              "the parked pages went back: %llu bytes",
	              (unsigned long long)(after.madvise_bytes - before.madvise_bytes));
	cr_assert_geq(before.free_resident_bytes - after.free_resident_bytes, 200 * 4096,
	              "free resident: %llu bytes before the trim, %llu after",
	              (unsigned long long)before.free_resident_bytes,
	              (unsigned long long)after.free_resident_bytes);
	A(free)(keep);
}

Test(parked, the_decay_pass_returns_it_when_no_allocation_takes_it)
{
	set("mmap_threshold", 1 << 20);
	set("trim_threshold", 64 << 20); /* only the decay pass gives pages back */
	char *keep = A(malloc)(100000);
	char *p = A(malloc)(200 * 4096);
	memset(p, 1, 200 * 4096);
	struct la_counters before = stats();
	A(free)(p); /* the control thread now waits out the default period (10 s) */
	usleep(20000);
	set("decay_ms", 50); /* a live change wakes it to wait by the new period */
	/* the parked block goes back to its heap at the next full pass, and its pages once
	 * they stayed free for a period */
	struct la_counters after = stats();
	for (int i = 0; i < 2400 && /* a minute: a busy machine */
	                (after.madvise_bytes - before.madvise_bytes < 200 * 4096 ||
	                 after.free_resident_bytes > before.free_resident_bytes);
	     i++) {
		usleep(25000);
		after = stats();
	}
	uint64_t purged = after.madvise_bytes - before.madvise_bytes;
	cr_assert_geq(purged, 200 * 4096, "returned by the decay pass: %llu bytes",
	              (unsigned long long)purged);
	cr_assert_geq(before.free_resident_bytes + 200 * 4096 - after.free_resident_bytes,
	              200 * 4096,
	              "free resident: %llu bytes before the free, %llu after the decay pass",
	              (unsigned long long)before.free_resident_bytes,
	              (unsigned long long)after.free_resident_bytes);
	A(free)(keep);
}

/* ---- the thread cache's large slot (tcache.h) ------------------------------------------ */

static struct arena *my_arena(void)
{
	return tcache_arena(&la_tcache);
}

/* The counters with every cache flushed (the large slot parked): cached holds nothing of
 * the bins or the transfer cache, so that what a test moves there is the slot's block. */
static struct la_counters flushed_stats(void)
{
	liballoc_flush_caches();
	return stats();
}

/* Whether the arena's parked block is block p's span (a block above LA_COLOUR_FROM starts
 * LA_COLOUR bytes into its span's first page). */
static bool arena_parks(struct arena *a, const void *p)
{
	arena_lock(a);
	struct span *s = a->parked;
	bool yes = s && span_base(heap_of(s), s) == (void *)((uintptr_t)p & ~(LA_PAGE - 1));
	arena_unlock(a);
	return yes;
}

static bool arena_parks_any(struct arena *a)
{
	arena_lock(a);
	bool yes = a->parked != NULL;
	arena_unlock(a);
	return yes;
}

/* A free+malloc of one size above the classes takes the freed block back with no lock and
 * no locked instruction: here with the arena's lock held by this very thread, which a
 * lock on either path would wait for forever (the alarm ends the process). */
static void slot_pairs_under_the_lock(void)
{
	alarm(10);
	struct arena *a = my_arena();
	char *p = A(malloc)(64 << 10);
	p[0] = 1;
	A(free)(p); /* into the slot: nothing parked, the slot empty */
	if (tcache_large_bytes() != 64 << 10)
		_exit(2);
	arena_lock(a);
	for (int i = 0; i < 8; i++) {
		la_tcache.gc_large = 0; /* no cold-bin sweep (it may flush bins to the arena) */
		char *q = A(malloc)(64 << 10);
		if (q != p || q[0] != 1)
			_exit(3);
		A(free)(q);
	}
	arena_unlock(a);
	_exit(0);
}

Test(large_slot, the_next_block_of_its_page_count_takes_it_back_without_the_lock)
{
	set("mmap_threshold", 1 << 20);
	pid_t pid = fork();
	if (pid == 0)
		slot_pairs_under_the_lock();
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	          "status %#x (a signal: it waited for the lock; 2: not in the slot; 3: another "
	          "block came back)",
	          status);
}

/* The block in the slot is freed memory the thread cache holds: counted cached (still
 * allocated: in use + cached is the same sum), not free resident, nothing parked; a malloc
 * of its page count takes it back whole, written as it was left. */
Test(large_slot, a_freed_block_counts_cached_and_comes_back_whole)
{
	set("mmap_threshold", 1 << 20);
	char *keep = A(malloc)(100000); /* the heap stays in use throughout */
	char *p = A(malloc)(48 * 4096);
	memset(p, 1, 48 * 4096);
	struct la_counters before = flushed_stats();
	A(free)(p);
	struct la_counters freed = stats();
	cr_assert_eq(tcache_large_bytes(), 48 * 4096);
	cr_assert(!arena_parks_any(my_arena()), "nothing parked in the arena");
	cr_assert_eq(freed.allocated_bytes, before.allocated_bytes, "still allocated");
	cr_assert_eq(freed.cached_bytes, before.cached_bytes + 48 * 4096, "counted cached");
	cr_assert_eq(freed.free_resident_bytes, before.free_resident_bytes);
	char *q = A(malloc)(48 * 4096 - 100);
	cr_assert_eq(q, p, "the same block comes back");
	cr_assert_eq(q[47 * 4096], 1, "untouched: not returned to the system meanwhile");
	cr_assert_eq(tcache_large_bytes(), 0);
	/* the figure moves back to in use at the slot's next slow path (here a flush) */
	struct la_counters again = flushed_stats();
	cr_assert_eq(again.allocated_bytes, before.allocated_bytes);
	cr_assert_eq(again.cached_bytes, before.cached_bytes, "in use again once published");
	A(free)(q);
	A(free)(keep);
}

/* Until a malloc takes a block back from the slot (since the cold-bin sweep before the
 * last), it holds one block, as the arena parks one: a thread that frees each size once (a
 * buffer grown by realloc) keeps no more. */
Test(large_slot, one_block_until_a_malloc_takes_one_back)
{
	set("mmap_threshold", 1 << 20);
	char *keep = A(malloc)(100000);
	char *p = A(malloc)(10 * 4096), *q = A(malloc)(12 * 4096);
	A(free)(p);
	A(free)(q);
	cr_assert_eq(tcache_large_bytes(), 12 * 4096, "one block: p went back");
	char *r = A(malloc)(12 * 4096);
	cr_assert_eq(r, q);
	p = A(malloc)(10 * 4096);
	A(free)(p);
	A(free)(r);
	cr_assert_eq(tcache_large_bytes(), 22 * 4096, "both kept once one came back");
	A(free)(keep);
}

/* A malloc that takes a block back: the slot holds TC_LARGE_SLOTS blocks from then on. */
static void slot_in_use(void)
{
	char *w = A(malloc)(9 * 4096);
	A(free)(w);
	cr_assert_eq(A(malloc)(9 * 4096), w, "(set-up)");
	A(free)(w);
	tcache_flush_large_all();
}

/* The slot in use with a threshold of 1 MiB, then nx blocks of px pages and ny of py taken
 * in that order and freed the other way round (the y's first): all in the slot. Returns a
 * block the test frees last (the heap stays). */
static char *slot_filled(char **x, unsigned nx, unsigned px, char **y, unsigned ny, unsigned py)
{
	set("mmap_threshold", 1 << 20);
	char *keep = A(malloc)(100000);
	slot_in_use();
	for (unsigned i = 0; i < nx; i++)
		x[i] = A(malloc)(px * 4096);
	for (unsigned i = 0; i < ny; i++)
		y[i] = A(malloc)(py * 4096);
	for (unsigned i = 0; i < ny; i++)
		A(free)(y[i]);
	for (unsigned i = 0; i < nx; i++)
		A(free)(x[i]);
	cr_assert_eq(tcache_large_bytes(), (uint64_t)(nx * px + ny * py) * 4096, "(set-up)");
	return keep;
}

/* A refill whose arena's heaps hold free resident pages for a span of its class leaves the
 * slot alone (the span takes those); the slot's blocks went back to the heap at every
 * refill, where the program's next large mallocs took them under the lock again. */
Test(large_slot, a_refill_leaves_it_while_the_heaps_hold_free_resident_pages)
{
	set("mmap_threshold", 1 << 20);
	char *keep = A(malloc)(100000);
	char *l = A(malloc)(40 * 4096), *x = A(malloc)(12 * 4096);
	memset(l, 1, 40 * 4096);
	A(free)(l);
	A(free)(x); /* one block kept: l goes back to its heap, free and resident */
	cr_assert_eq(tcache_large_bytes(), 12 * 4096, "(set-up)");
	cr_assert(arena_dirty_hint(my_arena(), 40), "(set-up: l's pages free and resident)");
	char *p = A(malloc)(3000); /* a class this thread never used: a refill */
	cr_assert_eq(tcache_large_bytes(), 12 * 4096, "the slot keeps its block");
	cr_assert_eq(A(malloc)(12 * 4096), x);
	A(free)(p);
	A(free)(x);
	A(free)(keep);
}

/* ... and one whose arena's heaps hold no free resident page gives the slot back (its newest
 * block parked, where the refill may take its pages) before it carves new ones. */
Test(large_slot, a_refill_with_no_free_resident_pages_gives_it_back)
{
	set("mmap_threshold", 1 << 20);
	char *keep = A(malloc)(100000);
	char *x = A(malloc)(12 * 4096);
	memset(x, 1, 12 * 4096);
	A(malloc_trim)(0); /* no free resident page left in the heaps */
	A(free)(x);
	cr_assert_eq(tcache_large_bytes(), 12 * 4096, "(set-up)");
	cr_assert(!arena_dirty_hint(my_arena(), 1), "(set-up: no free resident page)");
	char *p = A(malloc)(3000); /* a class this thread never used: a refill */
	cr_assert_eq(tcache_large_bytes(), 0, "the refill gave the slot back");
	cr_assert(arena_parks(my_arena(), x) || !arena_parks_any(my_arena()),
	          "its block parked (or taken by the refill)");
	A(free)(p);
	A(free)(keep);
}

/* The bound sends back the oldest block of the page count the slot holds most of: the one
 * it can spare best (a program whose sizes vary keeps some of each). */
Test(large_slot, the_bound_sends_back_the_page_count_it_holds_most_of)
{
	char *a[10], *b[3];
	char *keep = slot_filled(a, 10, 20, b, 3, 12); /* 236 pages in all */
	char *c = A(malloc)(30 * 4096);
	A(free)(c); /* 266 pages: a[0] goes (the oldest of ten), b stay */
	cr_assert_eq(tcache_large_bytes(), 246 * 4096);
	for (int i = 2; i >= 0; i--)
		cr_assert_eq(A(malloc)(12 * 4096), b[i], "the newest of a page count first");
	for (unsigned i = 9; i >= 1; i--)
		cr_assert_eq(A(malloc)(20 * 4096), a[i]);
	cr_assert_eq(tcache_large_bytes(), 30 * 4096, "c left; a[0] went back");
	A(free)(keep);
}

/* The page count it holds most of is counted as the slot is now: blocks malloc took back
 * are no longer counted (a bin's count, tcache.h large_n, not its list, decides). */
Test(large_slot, the_bound_counts_the_blocks_the_slot_holds_now)
{
	set("mmap_threshold", 1 << 20);
	char *keep = A(malloc)(100000);
	slot_in_use();
	char *c = A(malloc)(200 * 4096), *a[6], *b[4];
	for (unsigned i = 0; i < 6; i++)
		a[i] = A(malloc)(20 * 4096);
	for (unsigned i = 0; i < 4; i++)
		b[i] = A(malloc)(12 * 4096);
	for (unsigned i = 0; i < 4; i++)
		A(free)(b[i]);
	for (unsigned i = 0; i < 6; i++)
		A(free)(a[i]); /* 168 pages: six of 20, four of 12 */
	for (unsigned i = 5; i >= 1; i--)
		cr_assert_eq(A(malloc)(20 * 4096), a[i], "(set-up)");
	cr_assert_eq(tcache_large_bytes(), 68 * 4096, "a[0] and the four of 12 pages");
	A(free)(c); /* 268 pages: the oldest of the four of 12 goes, a[0] stays */
	cr_assert_eq(tcache_large_bytes(), 256 * 4096);
	cr_assert_eq(A(malloc)(20 * 4096), a[0], "the page count held once kept its block");
	for (int i = 3; i >= 1; i--)
		cr_assert_eq(A(malloc)(12 * 4096), b[i]);
	cr_assert_eq(tcache_large_bytes(), 200 * 4096, "b[0] went back");
	for (unsigned i = 0; i < 6; i++)
		A(free)(a[i]);
	for (unsigned i = 1; i < 4; i++)
		A(free)(b[i]);
	A(free)(keep);
}

/* The slot holds the last TC_LARGE_SLOTS blocks freed: a free that finds it full sends the
 * oldest back to its heap's free pages (resident), as a free that parks a block gives back
 * the one parked before; a block the arena had parked goes back at the first free. (The
 * bound in bytes raised so that the count decides: TC_LARGE_SLOTS blocks of 9 pages are
 * more than 1 MiB.) */
Test(large_slot, a_free_into_a_full_slot_sends_the_oldest_block_back_to_its_heap)
{
	set("mmap_threshold", 4 << 20);
	set("tcache_max_bytes", 512 << 10); /* the slot's bound: 2 MiB */
	char *keep = A(malloc)(100000);
	slot_in_use();
	char *old = A(malloc)(20 * 4096), *b[TC_LARGE_SLOTS + 1];
	memset(old, 1, 20 * 4096);
	for (unsigned i = 0; i <= TC_LARGE_SLOTS; i++) {
		b[i] = A(malloc)(9 * 4096);
		memset(b[i], 1, 9 * 4096);
	}
	A(free)(old);
	struct la_counters before = flushed_stats(); /* old parked in the arena */
	cr_assert(arena_parks(my_arena(), old));
	A(free)(b[0]); /* slot: b[0]; old back to its heap */
	cr_assert(!arena_parks_any(my_arena()), "the parked block went back to its heap");
	cr_assert_eq(tcache_large_bytes(), 9 * 4096);
	for (unsigned i = 1; i < TC_LARGE_SLOTS; i++)
		A(free)(b[i]);
	cr_assert_eq(tcache_large_bytes(), TC_LARGE_SLOTS * 9 * 4096, "all held");
	A(free)(b[TC_LARGE_SLOTS]); /* full: b[0] back to its heap */
	cr_assert_eq(tcache_large_bytes(), TC_LARGE_SLOTS * 9 * 4096);
	cr_assert(!arena_parks_any(my_arena()));
	struct la_counters after = stats();
	cr_assert_eq(after.allocated_bytes, before.allocated_bytes - 9 * 4096);
	cr_assert_eq(after.cached_bytes, before.cached_bytes + TC_LARGE_SLOTS * 9 * 4096);
	cr_assert_eq(after.free_resident_bytes, before.free_resident_bytes + 9 * 4096,
	             "b[0]'s pages are free and resident in the heap (old's counted already)");
	char *q = A(malloc)(9 * 4096);
	cr_assert_eq(q, b[TC_LARGE_SLOTS], "the newest of a page count comes back first");
	A(free)(q);
	A(free)(keep);
}

/* Bounded by bytes too: a free that would take the slot past large_max sends the oldest
 * blocks back until it fits. */
Test(large_slot, a_free_past_its_bytes_sends_the_oldest_blocks_back)
{
	set("mmap_threshold", 1 << 20);
	char *keep = A(malloc)(100000);
	slot_in_use();
	char *p = A(malloc)(100 * 4096), *q = A(malloc)(100 * 4096), *r = A(malloc)(200 * 4096);
	A(free)(p);
	A(free)(q);
	cr_assert_eq(tcache_large_bytes(), 200 * 4096);
	A(free)(r); /* 400 pages above the bound of 256: p and q go */
	cr_assert_eq(tcache_large_bytes(), 200 * 4096);
	char *t = A(malloc)(200 * 4096);
	cr_assert_eq(t, r);
	A(free)(t);
	A(free)(keep);
}

/* The raised-bound tests' set-up (mmap_threshold 4 MiB; tcache_max_bytes 128 KiB: the
 * slot's base bound 512 KiB, 128 pages): keep; big, 12 MiB more in use in the heap (a
 * twelfth is 1 MiB); b, sixteen blocks of 16 pages (misses: the slot is empty); w, freed
 * and taken back 30 times (a cold-bin sweep, the 32nd large malloc, at the 8th: 22 blocks
 * taken back since, no miss). */
static void slot_serving(char **keep, char *big[6], char *b[16], char **w)
{
	set("mmap_threshold", 4 << 20);
	set("tcache_max_bytes", 128 << 10);
	*keep = A(malloc)(100000);
	for (unsigned i = 0; i < 6; i++)
		big[i] = A(malloc)(2 << 20);
	for (unsigned i = 0; i < 16; i++)
		b[i] = A(malloc)(16 * 4096);
	*w = A(malloc)(9 * 4096);
	for (unsigned i = 0; i < 30; i++) {
		A(free)(*w);
		cr_assert_eq(A(malloc)(9 * 4096), *w, "(set-up: the slot serves)");
	}
}

/* The end of a test that began with slot_serving: frees big[from..6), w and keep. */
static void slot_serving_end(char *keep, char *big[6], unsigned from, char *w)
{
	for (unsigned i = from; i < 6; i++)
		A(free)(big[i]);
	A(free)(w);
	A(free)(keep);
}

/* A slot that mallocs take blocks back from (at least 4 a miss since the last cold-bin
 * sweep) and that a free finds full holds more while its heap has many pages in use: up
 * to 4 times its base bound, within a twelfth of those pages (sizes above the classes that
 * come and go met the arena's lock and a page-run search at 1 malloc in 17, medsizes). The
 * cold-bin sweep brings the bound back down with the heap's pages in use. */
Test(large_slot, a_slot_in_use_holds_more_in_a_heap_of_many_pages_in_use)
{
	char *keep, *big[6], *b[16], *w;
	slot_serving(&keep, big, b, &w);
	for (unsigned i = 0; i < 16; i++)
		A(free)(b[i]);
	cr_assert_eq(tcache_large_bytes(), 16 * 16 * 4096, "all sixteen kept: 256 pages");
	for (int i = 15; i >= 0; i--)
		cr_assert_eq(A(malloc)(16 * 4096), b[i]);
	for (unsigned i = 0; i < 6; i++)
		A(free)(big[i]); /* above the base: declined (parked, or back to the heap) */
	A(malloc_trim)(0);       /* (the one parked back to its heap) */
	for (unsigned i = 0; i < 40; i++) /* a cold-bin sweep meanwhile (32 large mallocs) */
		A(free)(A(malloc)(16 * 4096));
	cr_assert_eq(tcache_large_bytes(), 16 * 4096, "(set-up)");
	for (unsigned i = 0; i < 16; i++)
		A(free)(b[i]);
	cr_assert_eq(tcache_large_bytes(), 128 * 4096,
	             "the heap's pages in use fell: the base bound again (8 blocks)");
	A(free)(w);
	A(free)(keep);
}

/* ... but not while those pages fell by less than half: the figure moves with every block
 * the slot sends back, and each small fall sent blocks back that the next full free raised
 * the bound for again. */
Test(large_slot, a_raised_bound_stays_while_the_pages_in_use_fall_by_less_than_half)
{
	char *keep, *big[6], *b[16], *w;
	slot_serving(&keep, big, b, &w);
	for (unsigned i = 0; i < 16; i++)
		A(free)(b[i]);
	cr_assert_eq(tcache_large_bytes(), 16 * 16 * 4096, "(set-up: the bound rose)");
	for (int i = 15; i >= 0; i--)
		cr_assert_eq(A(malloc)(16 * 4096), b[i]);
	A(free)(big[0]); /* 4 MiB fewer in use: a twelfth falls from ~1.25 to ~0.9 MiB */
	A(free)(big[1]);
	A(malloc_trim)(0);
	for (unsigned i = 0; i < 16; i++)
		A(free)(b[i]);
	cr_assert_eq(tcache_large_bytes(), 16 * 16 * 4096, "(set-up)");
	for (unsigned i = 0; i < 40; i++) /* a cold-bin sweep meanwhile (32 large mallocs) */
		A(free)(A(malloc)(16 * 4096));
	cr_assert_eq(tcache_large_bytes(), 16 * 16 * 4096, "the bound stays: all sixteen kept");
	slot_serving_end(keep, big, 2, w);
}

/* ---- heaps of large blocks (arena.h, LARGE_HEAP_MAX_PAGES) ---------------------------- */

/* The slot's bound counts the pages in use of all the arena's heaps: its blocks' heap of
 * large blocks holds no small span nor block above LARGE_HEAP_MAX_PAGES pages, and by its
 * own pages in use (here ~280) the slot in use kept the base bound (8 blocks of 16 pages),
 * its misses 1.75 times as many in medsizes. The set-up of the test above with the 12 MiB
 * in use in the arena's other heap. */
Test(large_slot, its_bound_counts_the_pages_in_use_of_all_its_arenas_heaps)
{
	char *keep, *big[6], *b[16], *w;
	large_heaps_on();
	slot_serving(&keep, big, b, &w);
	cr_assert(in_large_heap(b[0]) && !in_large_heap(big[0]),
	          "(set-up: the slot's blocks in a heap of large blocks, big's not)");
	for (unsigned i = 0; i < 16; i++)
		A(free)(b[i]);
	cr_assert_eq(tcache_large_bytes(), 16 * 16 * 4096,
	             "the bound did not count the arena's 12 MiB in use: %zu bytes kept",
	             (size_t)tcache_large_bytes());
	for (int i = 15; i >= 0; i--)
		cr_assert_eq(A(malloc)(16 * 4096), b[i]);
	for (unsigned i = 0; i < 16; i++)
		A(free)(b[i]);
	slot_serving_end(keep, big, 0, w);
}

/* A block of a heap of large blocks freed by its thread goes to the large slot whether it
 * starts on the grid (free_in_large_heap: its descriptor from its address, p's low 16 bits
 * 0) or on another page (the page's index): blocks of 9 to 40 pages, half of them on the
 * grid and half placed with no grid (arena_large_grid 0), each freed alone into the slot
 * and taken back by the next malloc of its size. */
Test(large_heap, a_freed_block_on_the_grid_or_off_it_goes_to_the_slot)
{
	set("mmap_threshold", 1 << 20);
	large_heaps_on();
	char *keep = A(malloc)(1000);
	static const unsigned pages[] = {9, 12, 16, 17, 20, 23, 33, 40, 9, 17, 31, 12};
	enum { N = sizeof(pages) / sizeof(pages[0]) };
	char *b[N];
	unsigned on = 0, off = 0;
	for (unsigned i = 0; i < N; i++) {
		if (i == N / 2)
			arena_large_grid = 0; /* the rest side by side: most off the grid */
		b[i] = A(malloc)(pages[i] * 4096);
		cr_assert(b[i] && in_large_heap(b[i]), "(set-up: %u pages in a large heap)",
		          pages[i]);
		if (heap_page(b[i]) % HEAP_GRID_PAGES)
			off++;
		else
			on++;
	}
	arena_large_grid = LARGE_GRID_PAGES;
	cr_assert(on && off, "(set-up: %u blocks on the grid, %u off it)", on, off);
	tcache_flush_large_all();
	for (unsigned i = 0; i < N; i++) {
		cr_assert_eq(tcache_large_bytes(), 0, "(set-up)");
		A(free)(b[i]);
		cr_assert_eq(tcache_large_bytes(), (uint64_t)pages[i] * 4096,
		             "block %u (%u pages, heap page %u) not in the slot", i, pages[i],
		             heap_page(b[i]));
		la_tcache.gc_large = 0; /* no cold-bin sweep meanwhile */
		cr_assert_eq(A(malloc)(pages[i] * 4096), b[i], "block %u did not come back", i);
	}
	for (unsigned i = 0; i < N; i++)
		A(free)(b[i]);
	A(free)(keep);
}

/* An arena's first LARGE_HEAP_AFTER blocks of 9 to LARGE_HEAP_MAX_PAGES pages come from its
 * heaps as before (a program with a handful maps no heap for them); the next ones from a
 * heap of large blocks, tagged so in the owner table; a larger block, a small one and an
 * aligned one never. */
Test(large_heap, blocks_of_9_to_64_pages_come_from_one_after_the_arenas_first_64)
{
	set("mmap_threshold", 1 << 20);
	char *small = A(malloc)(1000);
	struct arena *a = my_arena();
	arena_lock(a);
	unsigned first = a->large_heap_wait; /* (the test runner's own, if any) */
	arena_unlock(a);
	cr_assert_lt(first, LARGE_HEAP_AFTER / 2, "(set-up: %u served before)", first);
	static char *b[LARGE_HEAP_AFTER];
	for (unsigned i = first; i < LARGE_HEAP_AFTER; i++) {
		b[i] = A(malloc)(9 * 4096);
		cr_assert(!in_large_heap(b[i]),
		          "block %u of the first %u in a heap of large blocks", i,
		          LARGE_HEAP_AFTER);
	}
	char *p9 = A(malloc)(9 * 4096), *p64 = A(malloc)(LARGE_HEAP_MAX_PAGES * 4096);
	char *p65 = A(malloc)((LARGE_HEAP_MAX_PAGES + 1) * 4096);
	char *al = A(aligned_alloc)(64 << 10, 16 * 4096);
	cr_assert(p9 && p64 && p65 && al);
	cr_assert(in_large_heap(p9), "9 pages, past the first %u: not in one", LARGE_HEAP_AFTER);
	cr_assert(in_large_heap(p64), "%u pages: not in one", LARGE_HEAP_MAX_PAGES);
	cr_assert(!in_large_heap(p65), "%u pages: in one", LARGE_HEAP_MAX_PAGES + 1);
	cr_assert(!in_large_heap(small), "a small block in one");
	cr_assert(!in_large_heap(al), "an aligned block in one");
	cr_assert_neq(heap_of(p9), heap_of(p65));
	A(free)(al);
	A(free)(p65);
	A(free)(p64);
	A(free)(p9);
	for (unsigned i = first; i < LARGE_HEAP_AFTER; i++)
		A(free)(b[i]);
	A(free)(small);
}

/* Where no heap of large blocks can be mapped (an address-space limit: ulimit -v, a
 * container's cap), blocks of 9 to LARGE_HEAP_MAX_PAGES pages come from the other heaps'
 * room as before, errno kept, and the mapping is not tried again at every malloc (it was:
 * three refused mmaps, then a mapping of the block's own, errno ENOMEM on a success). */
Test(large_heap, refused_ones_leave_the_blocks_to_the_other_heaps)
{
	set("mmap_threshold", 1 << 20);
	large_heaps_on();
	char *keep = A(malloc)(1000); /* (a small heap) */
	cr_assert(!in_large_heap(keep) && heap_registered(keep), "(set-up)");
	/* no mapping the process freed before kept for the heaps: the heap's growth below
	 * would take its pages in (direct.c, lend_to: an mremap each, counted with mmap calls;
	 * three here or none, by what the test runner freed before) */
	liballoc_trim(0);
	long vm_kib = status_kib("VmSize:");
	cr_assert(vm_kib > 0 &&
	                  setrlimit(RLIMIT_AS, &(struct rlimit){(rlim_t)(vm_kib + 32768) * 1024,
	                                                        RLIM_INFINITY}) == 0,
	          "(set-up: RLIMIT_AS: %s)", strerror(errno));
	struct la_counters before = stats();
	static char *b[40];
	for (unsigned i = 0; i < 40; i++) {
		errno = 0;
		b[i] = A(malloc)(10 * 4096);
		cr_assert(b[i], "malloc %u failed: %s", i, strerror(errno));
		cr_assert_eq(errno, 0, "malloc %u succeeded with errno %d (%s)", i, errno,
		             strerror(errno));
		cr_assert(heap_registered(b[i]) && !in_large_heap(b[i]),
		          "block %u not from the other heaps", i);
	}
	uint64_t maps = stats().mmap_calls - before.mmap_calls;
	cr_assert_leq(maps, 4, "%llu mmap calls for 40 blocks", (unsigned long long)maps);
	for (unsigned i = 0; i < 40; i++)
		A(free)(b[i]);
	A(free)(keep);
}

/* A hole that a large block left in a heap of large blocks, resident and free (not the
 * parked block): a new small span takes it while that heap grows (the pages its growth
 * passes by) and not while it is steady (the hole is where its blocks come back to),
 * with the small heaps holding no resident free pages either way. grow: the trend. */
static bool small_span_takes_the_hole(bool grow)
{
	set("mmap_threshold", 1 << 20);
	set("decay_ms", 0);
	large_heaps_on();
	A(malloc_trim)(0); /* no resident free pages in the small heaps */
	char *b[8];
	for (unsigned i = 0; i < 8; i++) {
		b[i] = A(malloc)(9 * 4096);
		cr_assert(in_large_heap(b[i]), "(set-up: block %u)", i);
		memset(b[i], 1, 9 * 4096);
	}
	A(free)(b[3]);
	A(free)(b[5]);
	tcache_flush_large_all();          /* b[5] parked, b[3] the heap's free pages */
	char *again = A(malloc)(9 * 4096); /* takes the parked one: no parked block left */
	struct heap *lh = heap_of(b[0]);
	struct arena *a = my_arena();
	arena_lock(a);
	bool parked = a->parked != NULL;
	lh->grow_rate = grow ? 1u << 20 : 0;
	lh->shrink_rate = 0;
	arena_unlock(a);
	cr_assert(!parked, "(set-up: a block still parked)");
	char *s = A(malloc)(5000); /* a class of its own: a new span */
	cr_assert(s && heap_registered(s));
	bool there = heap_of(s) == lh;
	A(free)(s);
	A(free)(again);
	for (unsigned i = 0; i < 8; i++)
		if (i != 3 && i != 5)
			A(free)(b[i]);
	return there;
}

Test(large_heap, a_small_span_leaves_a_steady_ones_holes_alone)
{
	cr_assert(!small_span_takes_the_hole(false),
	          "a small span took a hole of a steady heap of large blocks");
}

Test(large_heap, a_small_span_takes_a_growing_ones_resident_pages)
{
	cr_assert(small_span_takes_the_hole(true),
	          "a small span faulted pages in while a growing heap of large blocks held "
	          "resident free ones");
}

/* Its block freed by its thread goes to the large slot, as one of another heap does (free
 * sends it there from the owner-table entry: large_mine_take), and the next malloc of its
 * page count takes it back. */
/* A block of 12 pages in a heap of large blocks of this thread's arena (*keep: a block that
 * keeps the heap, for the caller to free) */
static char *twelve_page_block(char **keep)
{
	set("mmap_threshold", 1 << 20);
	large_heaps_on();
	*keep = A(malloc)(100000);
	char *p = A(malloc)(12 * 4096);
	cr_assert(in_large_heap(p), "(set-up)");
	return p;
}

Test(large_heap, a_block_freed_by_its_thread_goes_to_the_large_slot)
{
	char *keep;
	char *p = twelve_page_block(&keep);
	memset(p, 1, 12 * 4096);
	A(free)(p);
	cr_assert_eq(tcache_large_bytes(), 12 * 4096, "not in the slot");
	cr_assert_eq(A(malloc)(12 * 4096), p, "the slot did not give it back");
	A(free)(p);
	A(free)(keep);
}

/* ... but not while the cache is not live (a thread's exit tore it down: TC_DEAD): free's
 * way to the slot tests the state itself (malloc.c, large_mine_take_span: live, not only
 * set up), and a free that does not pass goes to its heap by free_slow. Here the state
 * alone is set dead, the cache's tag and arena kept, so that the free takes that way. */
Test(large_heap, a_block_freed_while_its_cache_is_not_live_goes_to_its_heap)
{
	char *keep;
	char *p = twelve_page_block(&keep);
	cr_assert_eq(tcache_large_bytes(), 0, "(set-up: the slot empty)");
	la_tcache.state = TC_DEAD;
	A(free)(p);
	la_tcache.state = TC_LIVE;
	cr_assert_eq(tcache_large_bytes(), 0, "the slot of a cache not live took it");
	A(free)(keep);
}

/* A block of another arena's heap of large blocks freed by this thread does not go to its
 * large slot: free's way to the slot (malloc.c, large_tagged_take_span) compares no arenas,
 * the owner-table entry's tag told free the heap is this thread's arena's. */
static void *other_arena_block(void *arg)
{
	(void)arg;
	large_heaps_on();
	char *p = A(malloc)(12 * 4096);
	return in_large_heap(p) ? p : NULL;
}

Test(large_heap, a_block_of_another_arenas_freed_here_stays_out_of_the_slot)
{
	set("mmap_threshold", 1 << 20);
	set("arena_max", 16);   /* the worker has an arena of its own, whatever the CPUs */
	A(free)(A(malloc)(16)); /* (this thread's arena, first) */
	pthread_t t;
	void *p = NULL;
	cr_assert_eq(pthread_create(&t, NULL, other_arena_block, NULL), 0);
	cr_assert_eq(pthread_join(t, &p), 0);
	cr_assert_not_null(p, "(set-up: not in a heap of large blocks of the worker's arena)");
	cr_assert_neq(heap_of(p)->arena, tcache_arena(&la_tcache), "(set-up: one arena)");
	cr_assert_eq(tcache_large_bytes(), 0, "(set-up: the slot empty)");
	A(free)(p);
	cr_assert_eq(tcache_large_bytes(), 0, "this thread's slot took another arena's block");
}

/* The invariant free's way into the large slot takes for granted (malloc.c,
 * large_tagged_take_span, which compares no arenas): a heap's owner-table entry carries
 * heap_tag of its arena's index (with HEAP_TAG_LARGE for a heap of large blocks) and its
 * own address, and a thread's cache's tag is heap_tag of its cache's arena's index. Each
 * of three workers (an arena each) and this thread make heaps of small and of large
 * blocks; every arena's heaps are then looked up in the table, every live slot of the
 * table is looked up in its heap (all arenas locked: no heap goes meanwhile), and each
 * thread checks its own cache. */
enum { TAG_WORKERS = 3 };
struct tag_worker {
	pthread_barrier_t *made, *checked;
	struct arena *arena;
	int cache_ok; /* the cache's tag is its arena's */
	int large_ok; /* its 12-page block is in a heap of large blocks of its arena */
	void *blocks[2];
};

/* The cache's tag is heap_tag of its arena's index, and that arena the one of that index */
static int cache_tag_ok(void)
{
	struct tcache *tc = &la_tcache;
	return tc->state == TC_LIVE && tc->arena == &arenas[tc->arena->index] &&
	       tc->tag == heap_tag(tc->arena->index);
}

/* p is in a heap of large blocks of this thread's arena (by the heap itself, not its tag) */
static int in_own_large_heap(const void *p)
{
	struct heap *h = heap_of(p);
	return h && h->large && h->arena == tcache_arena(&la_tcache);
}

static void *tag_worker_main(void *arg)
{
	struct tag_worker *w = arg;
	large_heaps_on();
	w->blocks[0] = A(malloc)(64);
	w->blocks[1] = A(malloc)(12 * 4096);
	w->arena = tcache_arena(&la_tcache);
	w->cache_ok = cache_tag_ok();
	w->large_ok = in_own_large_heap(w->blocks[1]);
	pthread_barrier_wait(w->made);
	pthread_barrier_wait(w->checked); /* (the blocks and the cache live until then) */
	A(free)(w->blocks[0]);
	A(free)(w->blocks[1]);
	return NULL;
}

/* The first breach of the invariant the walk below found ("": none). Written with every
 * arena locked, where a failed assertion (criterion's malloc) would wait for their locks:
 * asserted after. */
static char tag_breach[200];
#define TAG_BREACH(...)                                                        \
	do {                                                                   \
		if (!tag_breach[0])                                            \
			snprintf(tag_breach, sizeof(tag_breach), __VA_ARGS__); \
	} while (0)

/* h's slot in the owner table names h, with its arena's tag (HEAP_TAG_LARGE: its kind);
 * h's arena is the one of its index */
static void check_heap_tag(const struct heap *h, uint64_t e, const char *from)
{
	uint16_t tag = (uint16_t)(e & HEAP_OWNER_TAG_MASK);
	if (h->magic != HEAP_MAGIC) {
		TAG_BREACH("%s %p: no heap there", from, (const void *)h);
		return;
	}
	uint32_t i = h->arena->index;
	if ((e & HEAP_OWNER_ADDR_MASK) != heap_owner_base(h))
		TAG_BREACH("%s %p: its slot names another heap", from, (const void *)h);
	else if (i >= LA_ARENAS_MAX || h->arena != &arenas[i])
		TAG_BREACH("%s %p: its arena is not the one of its index", from, (const void *)h);
	else if ((tag & ~HEAP_TAG_LARGE) != heap_tag(i))
		TAG_BREACH("%s %p: tag %#x, its arena %u's %#x", from, (const void *)h, tag, i,
		           heap_tag(i));
	else if (((tag & HEAP_TAG_LARGE) != 0) != (h->large != 0))
		TAG_BREACH("%s %p: HEAP_TAG_LARGE is not its kind", from, (const void *)h);
}

/* The heap an owner-table entry names: its base rounded up to the heap size (heap.h,
 * heap_owner_base) */
static const struct heap *entry_heap(uint64_t e)
{
	uintptr_t base = (uintptr_t)(e & HEAP_OWNER_ADDR_MASK);
	return (const struct heap *)((base + LA_HEAP_MASK) & ~(uintptr_t)LA_HEAP_MASK);
}

Test(large_heap, each_heaps_owner_tag_and_each_caches_tag_are_their_arenas)
{
	set("mmap_threshold", 1 << 20);
	set("arena_max", 16); /* an arena a thread, whatever the CPUs */
	set("decay_ms", 0);   /* (no heap given back by the control thread meanwhile) */
	large_heaps_on();
	char *keep = A(malloc)(100000);
	char *mine = A(malloc)(12 * 4096);
	cr_assert(in_own_large_heap(mine), "(set-up: not in a heap of large blocks)");
	cr_assert(cache_tag_ok(), "this thread's cache's tag is not its arena's");
	pthread_barrier_t made, checked;
	pthread_barrier_init(&made, NULL, TAG_WORKERS + 1);
	pthread_barrier_init(&checked, NULL, TAG_WORKERS + 1);
	struct tag_worker w[TAG_WORKERS];
	pthread_t t[TAG_WORKERS];
	for (int i = 0; i < TAG_WORKERS; i++) {
		w[i] = (struct tag_worker){.made = &made, .checked = &checked};
		cr_assert_eq(pthread_create(&t[i], NULL, tag_worker_main, &w[i]), 0);
	}
	pthread_barrier_wait(&made);
	/* (the workers wait at the second barrier whatever fails below: released first) */
	int bad_cache = -1, bad_setup = -1;
	for (int i = 0; i < TAG_WORKERS; i++) {
		if (!w[i].cache_ok && bad_cache < 0)
			bad_cache = i;
		if (!w[i].large_ok || w[i].arena == tcache_arena(&la_tcache))
			bad_setup = i;
		for (int j = 0; j < i; j++)
			if (w[i].arena == w[j].arena)
				bad_setup = i;
	}
	uint32_t n = __atomic_load_n(&arena_count, __ATOMIC_ACQUIRE);
	tag_breach[0] = 0;
	for (uint32_t i = 0; i < n; i++)
		arena_lock(&arenas[i]);
	/* every arena's heaps: their slots name them with their arena's tag */
	unsigned heaps = 0, large = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (arenas[i].index != i)
			TAG_BREACH("arena %u's index is %u", i, arenas[i].index);
		for (const struct heap *h = arenas[i].heaps; h; h = h->next, heaps++) {
			if (h->arena != &arenas[i])
				TAG_BREACH("arena %u's heap %p: another arena's", i,
				           (const void *)h);
			check_heap_tag(h, heap_owner[heap_owner_index((uintptr_t)h)],
			               "an arena's heap");
			large += h->large;
		}
	}
	/* every live slot of the table: the heap it names is there, its own, with its arena's
	 * tag (a page of the table whose first slot is 0 never held a heap: heap_create) */
	unsigned live = 0;
	const size_t per_page = LA_PAGE / sizeof(heap_owner[0]);
	for (uintptr_t slot = 1; slot < LA_HEAP_SLOTS; slot++) {
		if (heap_owner_page_first(slot) == slot && !heap_owner[slot]) {
			slot += per_page - 1; /* (the loop's ++: the next page's first) */
			continue;
		}
		uint64_t e = heap_owner[slot];
		if (!(e & HEAP_OWNER_TAG_MASK))
			continue;
		live++;
		const struct heap *h = entry_heap(e);
		if (heap_owner_index((uintptr_t)h) != slot)
			TAG_BREACH("slot %#lx names a heap elsewhere, %p", (unsigned long)slot,
			           (const void *)h);
		else
			check_heap_tag(h, e, "a slot's heap");
	}
	for (uint32_t i = n; i-- > 0;)
		arena_unlock(&arenas[i]);
	pthread_barrier_wait(&checked);
	for (int i = 0; i < TAG_WORKERS; i++)
		pthread_join(t[i], NULL);
	cr_assert_eq(bad_setup, -1,
	             "(set-up: worker %d's block is not in its heap of large blocks, or its "
	             "arena is not its own)",
	             bad_setup);
	cr_assert_eq(bad_cache, -1, "worker %d's cache's tag is not its arena's", bad_cache);
	cr_assert_eq(tag_breach[0], 0, "%s", tag_breach);
	cr_assert_geq(large, TAG_WORKERS + 1, "(set-up: %u heaps of large blocks)", large);
	cr_assert_eq(live, heaps, "%u live slots for the arenas' %u heaps", live, heaps);
	cr_log_info("%u arenas, %u heaps (%u of large blocks)", n, heaps, large);
	cr_assert(cache_tag_ok(), "this thread's cache's tag is not its arena's");
	A(free)(mine);
	A(free)(keep);
}

/* A small block of a span placed there (a small span takes the pages of the large block
 * parked in it: parked, a_small_span_takes_its_pages_before_new_ones) written into *q;
 * the other blocks of the search in b[] (n of them), to free. */
enum { SMALL_IN_LARGE_N = 2 * 48 * 4 };
static char *keep_small_in_large;
static void small_in_large(char **q, char *b[SMALL_IN_LARGE_N])
{
	set("mmap_threshold", 1 << 20);
	large_heaps_on();
	keep_small_in_large = A(malloc)(100000);
	char *p = A(malloc)(48 * 4096);
	cr_assert(in_large_heap(p), "(set-up)");
	memset(p, 1, 48 * 4096);
	A(free)(p);
	*q = NULL;
	for (int i = 0; i < SMALL_IN_LARGE_N; i++) {
		b[i] = A(malloc)(1024);
		if (!*q && b[i] >= p && b[i] < p + 48 * 4096) {
			*q = b[i];
			b[i] = NULL;
		}
	}
	cr_assert_not_null(*q, "(set-up: no small block was carved from the parked pages)");
	cr_assert(in_large_heap(*q), "(set-up: its span not in a heap of large blocks)");
}

/* ... which its free pushes to its bin, as free's fast path does for a block of the other
 * heaps: the next malloc of its class takes it back. */
Test(large_heap, a_small_block_placed_there_goes_to_its_bin)
{
	char *q, *b[SMALL_IN_LARGE_N];
	small_in_large(&q, b);
	A(free)(q);
	cr_assert_eq(A(malloc)(1024), q, "the next malloc of its class did not take it back");
	A(free)(q);
	for (int i = 0; i < SMALL_IN_LARGE_N; i++)
		A(free)(b[i]);
	A(free)(keep_small_in_large);
}

static uint32_t arena_heaps(struct arena *a)
{
	arena_lock(a);
	uint32_t n = a->nheaps;
	arena_unlock(a);
	return n;
}

/* A heap of large blocks a free empties waits EMPTY_WAIT_NS for the control thread, which
 * unmaps it if it is still idle then (a second one, the arena's first stays): unmapped at
 * the free, growshrink 8 1 64's second heap of large blocks was mapped and faulted in again
 * at the top of every cycle. */
Test(large_heap, an_emptied_second_one_waits_for_the_control_thread)
{
	set("mmap_threshold", 1 << 20);
	set("tcache_max_bytes", 0); /* no large slot: every free reaches the arena */
	large_heaps_on();
	enum { N = 300 }; /* 300 blocks of 64 pages: more than a heap holds (unwritten) */
	static char *b[N];
	for (int i = 0; i < N; i++)
		cr_assert_not_null(b[i] = A(malloc)((size_t)LARGE_HEAP_MAX_PAGES * 4096));
	struct heap *h1 = heap_of(b[0]), *h2 = heap_of(b[N - 1]);
	cr_assert(in_large_heap(b[0]) && in_large_heap(b[N - 1]) && h1 != h2,
	          "(set-up: two heaps of large blocks)");
	struct arena *a = h1->arena;
	uint32_t before = arena_heaps(a);
	for (int i = 0; i < N; i++)
		if (heap_of(b[i]) == h2)
			A(free)(b[i]);
	A(free)(b[0]); /* parked: the block parked before (h2's last) goes back to h2 */
	cr_assert_eq(arena_heaps(a), before, "the emptied heap was unmapped at the free");
	bool gone = false;
	for (int t = 0; t < 200 && !gone; t++) {
		usleep(10000);
		gone = arena_heaps(a) == before - 1;
	}
	cr_assert(gone, "the control thread did not unmap the idle heap (%u heaps, %u before)",
	          arena_heaps(a), before);
	for (int i = 1; i < N; i++)
		if (heap_of(b[i]) == h1)
			A(free)(b[i]);
}

/* Without a decay pass (decay_ms 0) a heap of large blocks a free empties is unmapped at
 * once, but once the arena maps one again after that it stays: blocks that come and go in
 * rounds of more than a heap (medsizes 4000 1000000 65536 1 1 with LIBALLOC_CONTROL=0)
 * had a second heap unmapped at each round's end and mapped and faulted in again at the
 * next one's start (121,470 -> 38,868 faults at 200,000 operations). */
static char *round_blocks[300];

static struct heap *large_round(void)
{
	enum { N = 300 }; /* 300 blocks of 64 pages: more than a heap holds */
	int other = 0;
	struct heap *h2 = NULL;
	for (int i = 0; i < N; i++) {
		cr_assert_not_null(round_blocks[i] =
		                           A(malloc)((size_t)LARGE_HEAP_MAX_PAGES * 4096));
		cr_assert(in_large_heap(round_blocks[i]), "(set-up: in a heap of large blocks)");
		if (heap_of(round_blocks[i]) != heap_of(round_blocks[0])) {
			other++;
			h2 = heap_of(round_blocks[i]);
		}
	}
	cr_assert_gt(other, 0, "(set-up: two heaps of large blocks)");
	struct heap *h1 = heap_of(round_blocks[0]);
	for (int i = 0; i < N; i++)
		if (heap_of(round_blocks[i]) != h1)
			A(free)(round_blocks[i]);
	A(free)(round_blocks[0]); /* parked: the block parked before goes back to its heap */
	for (int i = 1; i < N; i++)
		if (heap_of(round_blocks[i]) == h1)
			A(free)(round_blocks[i]);
	return h2;
}

/* A heap of large blocks kept mapped without a decay pass still returns its free pages
 * through the no-decay throttle (batches of the mmap threshold << purge_shift, top_pad
 * kept): at most that, and a block freed since the last batch, stays resident. */
static void kept_heap_throttled(struct heap *h)
{
	uint64_t batch = LA_MAX((uint64_t)TUN(trim_threshold), (uint64_t)TUN(mmap_threshold))
	                 << h->purge_shift;
	uint64_t bound = (batch + (uint64_t)TUN(top_pad)) / 4096 + LARGE_HEAP_MAX_PAGES;
	cr_assert_leq(h->dirty_pages, bound,
	              "the kept heap holds %u free resident pages (bound %llu, purge_shift %u): "
	              "its pages are not left to the throttle",
	              h->dirty_pages, (unsigned long long)bound, h->purge_shift);
}

Test(large_heap, without_the_decay_pass_one_mapped_again_after_its_release_stays)
{
	set("decay_ms", 0);
	set("mmap_threshold", 1 << 20);
	set("tcache_max_bytes", 0); /* no large slot: every free reaches the arena */
	large_heaps_on();
	struct arena *a = tcache_arena(&la_tcache);
	uint64_t r0 = stats().heaps_released;
	large_round();
	uint32_t before = arena_heaps(a);
	cr_assert_eq(stats().heaps_released, r0 + 1, "the first round's emptied heap stayed");
	struct heap *h2 = large_round(); /* maps a second heap of large blocks again */
	cr_assert_eq(stats().heaps_released, r0 + 1,
	             "the heap mapped again was unmapped again at the round's end (%u heaps, "
	             "%u before)",
	             arena_heaps(a), before);
	cr_assert_eq(arena_heaps(a), before + 1);
	kept_heap_throttled(h2);
	cr_assert_eq(large_round(), h2); /* and reuses it */
	cr_assert_eq(arena_heaps(a), before + 1);
	kept_heap_throttled(h2);
	A(malloc_trim)(0);
	cr_assert_eq(arena_heaps(a), before, "a trim still unmaps it");
}

/* ... and so does one that starts a page (free reads the descriptor of the span starting
 * at a page-aligned pointer first: a small span's is no large block). */
Test(large_heap, a_page_aligned_small_block_placed_there_goes_to_its_bin)
{
	char *q, *b[SMALL_IN_LARGE_N];
	small_in_large(&q, b);
	int k = -1;
	for (int i = 0; i < SMALL_IN_LARGE_N && k < 0; i++)
		if (b[i] && in_large_heap(b[i]) && !((uintptr_t)b[i] & 4095))
			k = i;
	cr_assert_geq(k, 0, "(set-up: no page-aligned small block in the heap of large blocks)");
	char *r = b[k];
	b[k] = NULL;
	A(free)(r);
	cr_assert_eq(A(malloc)(1024), r, "the next malloc of its class did not take it back");
	A(free)(r);
	A(free)(q);
	for (int i = 0; i < SMALL_IN_LARGE_N; i++)
		A(free)(b[i]);
	A(free)(keep_small_in_large);
}

/* A pointer to a page inside one of its large blocks (a page that starts no span) is
 * invalid: free aborts (README: checks), the block stays the program's. */
Test(large_heap, a_page_inside_its_block_freed_aborts_in_free, .signal = SIGABRT)
{
	set("mmap_threshold", 1 << 20);
	large_heaps_on();
	char *p = A(malloc)(12 * 4096);
	cr_assert(in_large_heap(p), "(set-up)");
	A(free)(p + 4096);
	cr_assert_fail("free of a page inside a block returned");
}

/* Double frees abort inside the second free (README: checks), for both kinds of block. */
Test(large_heap, a_small_block_placed_there_freed_twice_aborts_in_free, .signal = SIGABRT)
{
	char *q, *b[SMALL_IN_LARGE_N];
	small_in_large(&q, b);
	A(free)(q);
	A(free)(q);
	cr_assert_fail("the second free returned");
}

Test(large_heap, its_block_freed_twice_aborts_in_free, .signal = SIGABRT)
{
	set("mmap_threshold", 1 << 20);
	large_heaps_on();
	char *p = A(malloc)(12 * 4096);
	cr_assert(in_large_heap(p), "(set-up)");
	A(free)(p); /* (in the large slot) */
	A(free)(p);
	cr_assert_fail("the second free returned");
}

Test(large_heap, its_block_freed_twice_with_no_slot_aborts_in_free, .signal = SIGABRT)
{
	set("mmap_threshold", 1 << 20);
	set("tcache_max_bytes", 0); /* no large slot: the block goes back to the arena */
	large_heaps_on();
	char *keep = A(malloc)(20 * 4096), *p = A(malloc)(12 * 4096);
	cr_assert(in_large_heap(p) && in_large_heap(keep), "(set-up)");
	A(free)(p);    /* (parked) */
	A(free)(keep); /* (parked in p's place: p's pages back in the heap) */
	A(free)(p);
	cr_assert_fail("the second free returned");
}

/* ... nor while its mallocs miss more than once in 4 takes since the last cold-bin sweep
 * (TC_LARGE_HITS): a slot that serves few of them (realloc_growth's, 1 malloc in 16) raised
 * there put that row's peak +3 %. Same heap and blocks as above, with 6 misses after the
 * sweep against 22 takes: the base bound holds (8 blocks of 16 pages). */
Test(large_slot, a_slot_that_misses_often_keeps_its_base_bound)
{
	char *keep, *big[6], *b[16], *w;
	slot_serving(&keep, big, b, &w);
	char *m[6];
	for (unsigned i = 0; i < 6; i++) /* the slot is empty: 6 misses (28 < 32: no sweep) */
		m[i] = A(malloc)(20 * 4096);
	for (unsigned i = 0; i < 16; i++)
		A(free)(b[i]);
	cr_assert_eq(tcache_large_bytes(), 128 * 4096,
	             "22 takes against 6 misses: the base bound (8 blocks), not a raised one");
	for (unsigned i = 0; i < 6; i++)
		A(free)(m[i]);
	slot_serving_end(keep, big, 0, w);
}

/* A run of frees the slot could not keep (one block: no malloc took one back), followed by
 * mallocs of the same sizes, which those blocks would have served: the slot learns the run
 * (tcache.c, large_run) and keeps it whole the next time, past TC_LARGE_SLOTS_MAX blocks
 * (batchfree's rounds: every large malloc and free went to the heap), and a flush sends it
 * all back. A thread whose freed sizes never come back (a buffer grown by realloc) keeps
 * one block (one_block_until_a_malloc_takes_one_back). */
#define RUN_BLOCKS 100u
static void run_round(char **p)
{
	for (unsigned i = 0; i < RUN_BLOCKS; i++) {
		la_tcache.gc_large = 0; /* no cold-bin sweep from the large trigger */
		p[i] = A(malloc)((9 + i % 8) * 4096);
		cr_assert_not_null(p[i]);
	}
	for (unsigned i = 0; i < RUN_BLOCKS; i++)
		A(free)(p[(i * 37) % RUN_BLOCKS]); /* in another order */
}

Test(large_slot, a_run_freed_then_allocated_again_is_kept_the_next_time)
{
	set("mmap_threshold", 1 << 20);
	set("decay_ms", 0); /* no decay pass flushes the slot meanwhile */
	char *keep = A(malloc)(100000);
	char *p[RUN_BLOCKS];
	uint64_t run = 0;
	for (unsigned i = 0; i < RUN_BLOCKS; i++)
		run += (9 + i % 8) * 4096;
	run_round(p);
	cr_assert_eq(tcache_large_bytes(), (9 + (37 * (RUN_BLOCKS - 1)) % RUN_BLOCKS % 8) * 4096,
	             "the first time: one block");
	run_round(p);
	run_round(p);
	/* (a block up to a quarter longer may serve a malloc: the bytes may differ) */
	cr_assert_eq(la_tcache.nlarge, RUN_BLOCKS, "the run kept whole: %u blocks, not %u",
	             RUN_BLOCKS, la_tcache.nlarge);
	cr_assert_geq(tcache_large_bytes(), run);
	tcache_flush_large_all();
	cr_assert_eq(tcache_large_bytes(), 0, "a flush sends it all back");
	A(free)(keep);
}

/* ... and forgets it once the sizes move on: two sweeps in a row whose large mallocs met
 * neither a block of the slot nor a count while it held blocks start the counts and the run
 * over (tcache.c, large_run_sweep), the bound back to its base. */
static void large_misses(char **q, size_t pages)
{
	for (int i = 0; i < 2; i++) {
		la_tcache.gc_large = 0; /* (no sweep from the large trigger) */
		cr_assert_not_null(q[i] = A(malloc)(pages * 4096));
	}
}

static void swept(void)
{
	la_tcache.gc_large_skip = 0;
	tcache_large_sweep(&la_tcache);
}

Test(large_slot, a_learned_run_is_forgotten_when_the_sizes_move_on)
{
	set("mmap_threshold", 1 << 20);
	set("decay_ms", 0);
	char *keep = A(malloc)(100000);
	char *p[RUN_BLOCKS], *q[2], *r[2];
	run_round(p);
	run_round(p);
	run_round(p);
	cr_assert_eq(la_tcache.nlarge, RUN_BLOCKS, "(set-up: a run learned)");
	cr_assert_neq(la_tcache.slots->large_run, 0, "(set-up: a run learned)");
	swept();             /* (the round's takes: a sweep that found the slot used) */
	large_misses(q, 40); /* sizes none of the slot's blocks (9-16 pages) nor counts serve */
	swept();
	cr_assert_neq(la_tcache.slots->large_run, 0, "one cold sweep keeps the run");
	large_misses(r, 48); /* larger again, before the frees below */
	A(free)(q[0]);
	A(free)(q[1]); /* the slot holds blocks again, of sizes no malloc asked for since */
	cr_assert_gt(la_tcache.nlarge, 0, "(set-up: the slot holds the 40-page blocks)");
	swept();
	cr_assert_eq(la_tcache.slots->large_run, 0, "the run kept after two cold sweeps: %u blocks",
	             la_tcache.slots->large_run);
	cr_assert_leq(la_tcache.large_slots, TC_LARGE_SLOTS_MAX,
	              "the bound stays raised: %u blocks", la_tcache.large_slots);
	A(free)(r[0]);
	A(free)(r[1]);
	A(free)(keep);
}

/* ... and a process with the decay pass (the default) gets a learned run's blocks back once
 * its large mallocs stop: the run keeps the slot past its bound and the cold-bin sweep
 * leaves it while no large malloc comes (large_run_sweep), but every full decay pass takes
 * the slot of a thread that is not inside a cache operation (cold_bins: the large slot
 * goes back at every full pass). Rounds of large batches, then small mallocs only, then
 * the wait for the pass: the slot empties, its bytes leave the cached figure, and the
 * heap's pages go (data_resident_bytes falls by them). */
Test(large_slot, a_learned_run_goes_back_at_the_decay_pass_once_large_mallocs_stop)
{
	set("mmap_threshold", 1 << 20);
	set("decay_ms", 0); /* (the run learned first: no pass flushes the slot mid-round) */
	char *keep = A(malloc)(100000);
	char *p[RUN_BLOCKS];
	run_round(p);
	run_round(p);
	run_round(p);
	cr_assert_eq(la_tcache.nlarge, RUN_BLOCKS, "(set-up: a run learned)");
	cr_assert_neq(la_tcache.slots->large_run, 0, "(set-up: a run learned)");
	uint64_t held = tcache_large_bytes();
	static void *q[300];
	for (int r = 0; r < 50; r++) { /* small mallocs only: refills, flushes, sweeps */
		for (int i = 0; i < 300; i++)
			cr_assert_not_null(q[i] = A(malloc)(64 + (unsigned)r % 4 * 200));
		for (int i = 0; i < 300; i++)
			A(free)(q[i]);
	}
	cr_assert_eq(la_tcache.nlarge, RUN_BLOCKS,
	             "the sweeps keep the run while no large malloc comes: %u blocks",
	             la_tcache.nlarge);
	struct la_counters before = stats();
	cr_assert_geq(before.cached_bytes, held, "the slot's %llu bytes are counted cached",
	              (unsigned long long)held);
	set("decay_ms", 20);
	uint32_t left = RUN_BLOCKS;
	for (int i = 0; i < 3000 && left; i++) { /* 30 s at most on a loaded machine */
		usleep(10000);
		left = __atomic_load_n(&la_tcache.nlarge, __ATOMIC_RELAXED);
	}
	cr_assert_eq(left, 0, "the decay pass left %u blocks in the slot", left);
	struct la_counters after = stats();
	for (int i = 0; i < 3000 && after.data_resident_bytes + held > before.data_resident_bytes;
	     i++) {
		usleep(10000);
		after = stats();
	}
	cr_assert_leq(after.data_resident_bytes + held, before.data_resident_bytes,
	              "resident %llu -> %llu with the slot's %llu bytes given back",
	              (unsigned long long)before.data_resident_bytes,
	              (unsigned long long)after.data_resident_bytes, (unsigned long long)held);
	cr_assert_leq(after.cached_bytes + held, before.cached_bytes,
	              "cached %llu -> %llu with the slot's %llu bytes given back",
	              (unsigned long long)before.cached_bytes,
	              (unsigned long long)after.cached_bytes, (unsigned long long)held);
	A(free)(keep);
}

/* ... but not from a realloc's moves (the slot's way with room: malloc.c), which free each
 * size once as a buffer grows: realloc_growth's buffers grew into the sizes others had
 * freed, and a run learned from them kept its peak +12 %. */
Test(large_slot, a_reallocs_moves_teach_it_no_run)
{
	set("mmap_threshold", 1 << 20);
	char *keep = A(malloc)(100000);
	char *p[RUN_BLOCKS];
	run_round(p);                             /* the bound sent RUN_BLOCKS - 1 blocks back */
	for (unsigned i = 0; i < RUN_BLOCKS; i++) /* the same sizes, as a realloc moves */
		p[i] = tcache_alloc_large_slow(&la_tcache, (9 + i % 8) * 4096, LA_ALIGN, true);
	cr_assert_eq(la_tcache.large_slots, TC_LARGE_SLOTS, "no run learned: %u blocks",
	             la_tcache.large_slots);
	for (unsigned i = 0; i < RUN_BLOCKS; i++)
		A(free)(p[i]);
	A(free)(keep);
}

/* A malloc of another page count leaves the slot's blocks for theirs, but takes one up to
 * a quarter longer; one of 40 pages or more (PARKED_SPLIT_PAGES) parks the shortest block
 * that holds it first (else the newest; under the lock the allocation takes), so the
 * arena's rules for the parked block apply as before the slot: it may take it in place. */
Test(large_slot, a_malloc_of_another_size_leaves_it_but_one_of_40_pages_parks_it)
{
	set("mmap_threshold", 1 << 20);
	char *keep = A(malloc)(100000);
	slot_in_use();
	char *p = A(malloc)(30 * 4096), *r = A(malloc)(64 * 4096);
	A(free)(p);
	cr_assert_eq(tcache_large_bytes(), 30 * 4096);
	char *q = A(malloc)(20 * 4096); /* below 40 pages: the slot keeps p */
	cr_assert_eq(tcache_large_bytes(), 30 * 4096);
	cr_assert(!arena_parks_any(my_arena()));
	cr_assert(q + 20 * 4096 <= p || q >= p + 30 * 4096);
	A(free)(r);
	cr_assert_eq(tcache_large_bytes(), 94 * 4096);
	char *t = A(malloc)(48 * 4096); /* 40 pages or more: the shortest that holds it */
	cr_assert_eq(t, r, "taken in place from the parked block");
	cr_assert_eq(tcache_large_bytes(), 30 * 4096);
	char *u = A(malloc)(27 * 4096); /* 30 pages: no more than a quarter longer */
	cr_assert_eq(u, p, "a block up to a quarter longer comes back");
	cr_assert_eq(tcache_large_bytes(), 0);
	A(free)(q);
	A(free)(t);
	A(free)(u);
	A(free)(keep);
}

/* A malloc takes a block up to a quarter longer than it asks for (an eighth took 25 pages
 * for 23 or more only), not longer. */
Test(large_slot, a_malloc_takes_a_block_up_to_a_quarter_longer)
{
	set("mmap_threshold", 1 << 20);
	char *keep = A(malloc)(100000);
	slot_in_use();
	char *p = A(malloc)(25 * 4096);
	A(free)(p);
	cr_assert_eq(tcache_large_bytes(), 25 * 4096);
	char *q = A(malloc)(19 * 4096); /* 19 + 19 / 4 = 23 pages: not p */
	cr_assert_neq(q, p);
	cr_assert_eq(tcache_large_bytes(), 25 * 4096, "the slot keeps p");
	char *r = A(malloc)(20 * 4096 - 100); /* 20 pages: 20 + 20 / 4 = 25 */
	cr_assert_eq(r, p, "a block a quarter longer comes back");
	cr_assert_eq(tcache_large_bytes(), 0);
	cr_assert_geq(A(malloc_usable_size)(r), 25 * 4096, "all of it usable");
	A(free)(q);
	A(free)(r);
	A(free)(keep);
}

/* ... at every page count: a malloc of w pages takes the shortest block of w to w + w / 4
 * pages, not one a page shorter nor one a page longer than that, across the exact bins
 * (malloc's look through tc_large_fit up to TC_LARGE_FIT_MAX pages, tcache.h) and past them
 * (from 52 pages a quarter more reaches the long bin: large_fit). */
Test(large_slot, a_malloc_of_each_page_count_takes_the_closest_block_up_to_a_quarter_longer)
{
	set("mmap_threshold", 1 << 20);
	char *keep = A(malloc)(100000);
	slot_in_use();
	for (unsigned w = 10; w <= 60; w++) { /* (9 pages: s would be a small block) */
		unsigned q = w + w / 4;
		la_tcache.gc_large = 0; /* no cold-bin sweep: the slot stays in use */
		char *s = A(malloc)((w - 1) * 4096), *b = A(malloc)(q * 4096);
		char *c = A(malloc)((q + 1) * 4096);
		A(free)(b);
		A(free)(c);
		A(free)(s);
		cr_assert_eq(tcache_large_bytes(), (uint64_t)(w - 1 + q + q + 1) * 4096,
		             "(set-up: %u pages, all three in the slot)", w);
		char *r = A(malloc)(w * 4096);
		cr_assert_eq(r, b, "%u pages: the block of %u pages", w, q);
		cr_assert_eq(tcache_large_bytes(), (uint64_t)(w - 1 + q + 1) * 4096);
		/* (from PARKED_SPLIT_PAGES on, the miss parks c and the arena may split it: t
		 * is then c's start, its w pages alone usable) */
		char *t = A(malloc)(w * 4096);
		cr_assert(t != s && A(malloc_usable_size)(t) < (q + 1) * 4096,
		          "%u pages: neither the block of %u nor that of %u pages", w, q + 1,
		          w - 1);
		A(free)(t);
		A(free)(r);
		tcache_flush_large_all();
	}
	A(free)(keep);
}

/* The bound's victim counts the long bin's blocks as it counts an exact bin's (tcache.h,
 * large_push: each bin's count, the long bin's last in large_n): three blocks of 70 pages
 * against two of 20, the oldest of 70 goes. */
Test(large_slot, the_bound_counts_the_long_bins_blocks_too)
{
	char *l[3], *e[2];
	char *keep = slot_filled(l, 3, 70, e, 2, 20); /* 250 pages */
	char *x = A(malloc)(10 * 4096);
	A(free)(x); /* 260 pages above the bound of 256: l[0] goes (three of 70, two of 20) */
	cr_assert_eq(tcache_large_bytes(), 190 * 4096, "the oldest of the long bin went");
	for (int i = 1; i >= 0; i--)
		cr_assert_eq(A(malloc)(20 * 4096), e[i], "the blocks of 20 pages stayed");
	for (int i = 2; i >= 1; i--)
		cr_assert_eq(A(malloc)(70 * 4096), l[i]);
	cr_assert_eq(tcache_large_bytes(), 10 * 4096, "x left; l[0] went back");
	for (unsigned i = 0; i < 2; i++)
		A(free)(e[i]);
	for (unsigned i = 1; i < 3; i++)
		A(free)(l[i]);
	A(free)(keep);
}

/* An emptied slot has no mask bit set and no long block: malloc's take looks no further
 * than those (tcache.h, tcache_large_take_live: no test of the slot's count first), so a
 * slot emptied by mallocs, exact bins and the long bin alike, sends the next ones of those
 * page counts, and a realloc's move, to the arena: new blocks, none handed out twice. */
Test(large_slot, an_emptied_slot_sends_the_next_mallocs_to_the_arena)
{
	char *l[2], *e[2];
	char *keep = slot_filled(l, 2, 70, e, 2, 20); /* 180 pages */
	la_tcache.gc_large = 0;                       /* no cold-bin sweep meanwhile */
	for (int i = 1; i >= 0; i--)
		cr_assert_eq(A(malloc)(20 * 4096), e[i], "(set-up)");
	for (int i = 1; i >= 0; i--)
		cr_assert_eq(A(malloc)(70 * 4096), l[i], "(set-up)");
	cr_assert_eq(la_tcache.nlarge, 0, "the slot emptied");
	cr_assert_eq(la_tcache.large_mask, 0, "no exact bin holds a block");
	cr_assert_null(la_tcache.large_long, "the long bin holds none");
	char *n20 = A(malloc)(20 * 4096), *n70 = A(malloc)(70 * 4096);
	char *n60 = A(malloc)(60 * 4096);
	cr_assert(n20 && n70 && n60);
	char *held[] = {e[0], e[1], l[0], l[1], n20, n70, n60};
	for (unsigned i = 0; i < 7; i++)
		for (unsigned j = i + 1; j < 7; j++)
			cr_assert_neq(held[i], held[j], "blocks %u and %u are one", i, j);
	memset(n20, 2, 20 * 4096);
	char *m = A(realloc)(n20, 40 * 4096); /* a move: the slot is empty */
	cr_assert_not_null(m);
	for (unsigned i = 0; i < 7; i++)
		cr_assert(m == n20 || m != held[i], "the move took block %u", i);
	cr_assert_eq(m[20 * 4096 - 1], 2, "moved whole");
	A(free)(m);
	A(free)(n70);
	A(free)(n60);
	for (unsigned i = 0; i < 2; i++) {
		A(free)(e[i]);
		A(free)(l[i]);
	}
	A(free)(keep);
}

/* ... and a thread's first large mallocs, its slot never used (no slot rows yet) */
static void *first_large_mallocs(void *arg)
{
	(void)arg;
	cr_assert_eq(la_tcache.nlarge, 0);
	size_t pages[] = {10, 51, 60, 70};
	for (unsigned i = 0; i < 4; i++) {
		char *p = A(malloc)(pages[i] * 4096);
		cr_assert_not_null(p);
		p[pages[i] * 4096 - 1] = 1;
		char *q = A(realloc)(p, pages[i] * 2 * 4096);
		cr_assert_not_null(q);
		cr_assert_eq(q[pages[i] * 4096 - 1], 1);
		A(free)(q);
	}
	return NULL;
}

Test(large_slot, a_new_threads_first_large_mallocs_find_its_slot_empty)
{
	set("mmap_threshold", 1 << 20);
	run_thread(first_large_mallocs, NULL);
}

/* A realloc's move asks for a quarter more than n already (its slack): it takes a block up
 * to an eighth longer than that, not a quarter (a quarter there too raised realloc-growth's
 * peak: the slot's longer blocks went to buffers that grow on). */
Test(large_slot, a_reallocs_move_takes_a_block_up_to_an_eighth_longer_than_its_slack)
{
	set("mmap_threshold", 1 << 20);
	char *keep = A(malloc)(100000);
	slot_in_use();
	char *p = A(malloc)(8 * 4096), *fence = A(malloc)(8 * 4096);
	cr_assert_eq(fence, p + 8 * 4096, "(set-up: p cannot grow in place)");
	memset(p, 7, 8 * 4096);
	char *b = A(malloc)(24 * 4096);
	A(free)(b);
	cr_assert_eq(tcache_large_bytes(), 24 * 4096);
	/* 16 pages: the slack is 20, an eighth more 22 (a quarter more would be 25) */
	char *q = A(realloc)(p, 16 * 4096);
	cr_assert_not_null(q);
	cr_assert_neq(q, b, "the move took a block 4 pages past its slack's 20");
	cr_assert_eq(tcache_large_bytes(), 24 * 4096, "the slot keeps it");
	cr_assert_eq(q[8 * 4096 - 1], 7);
	char *r = A(malloc)(20 * 4096); /* a malloc of those 20 pages takes it */
	cr_assert_eq(r, b);
	A(free)(r);
	A(free)(q);
	A(free)(fence);
	A(free)(keep);
}

/* Bounded by bytes: 4 x tcache_max_bytes (1 MiB by default); a longer block is parked in
 * the arena as before; a lower bound sends a longer block in the slot back at once. */
/* ---- colour: blocks above 1 MiB start LA_COLOUR bytes into their first page ----------- */

/* A plain malloc or calloc of a heap block above LA_COLOUR_FROM starts LA_COLOUR bytes into
 * its span's first page (a program writing it a page at a time from its start then writes
 * no page's first line: malloc.c, colour_span); blocks up to 1 MiB (the large slot's at the
 * default bound), aligned requests and mappings of their own start on a page. */
Test(colour, heap_blocks_above_1_mib_start_past_their_first_pages_start)
{
	set("mmap_threshold", 16 << 20);
	set("mmap_dynamic", 0);
	size_t n = (2 << 20) + 100;
	char *p = A(malloc)(n);
	cr_assert(heap_registered(p), "a heap's block");
	cr_assert_eq((uintptr_t)p & (LA_PAGE - 1), LA_COLOUR);
	size_t usable = A(malloc_usable_size)(p);
	cr_assert_geq(usable, n);
	cr_assert_lt(usable, n + LA_PAGE);
	memset(p, 3, usable);
	char *z = A(calloc)(1, 3 << 20);
	cr_assert_eq((uintptr_t)z & (LA_PAGE - 1), LA_COLOUR, "a calloc's too");
	for (size_t i = 0; i < (3 << 20); i += 4096)
		cr_assert_eq(z[i] | z[i + 4095], 0);
	char *m = A(malloc)(LA_COLOUR_FROM - 1);
	cr_assert_eq((uintptr_t)m & (LA_PAGE - 1), 0, "1 MiB: on its page");
	char *a = A(memalign)(4096, 2 << 20);
	cr_assert_eq((uintptr_t)a & (LA_PAGE - 1), 0, "an aligned request: on its page");
	char *d = A(malloc)(LA_LARGE_MAX + 1);
	cr_assert(!heap_registered(d));
	cr_assert_eq((uintptr_t)d & (LA_PAGE - 1), 0, "a mapping of its own: on its page");
	A(free)(d);
	A(free)(a);
	A(free)(m);
	A(free)(z);
	cr_assert_eq(p[usable - 1], 3);
	A(free)(p);
}

/* realloc resizes such a block in place as it does one on its page: a shrink keeps its
 * start and its colour, counting the page the colour takes; a growth keeps the contents. */
Test(colour, a_block_past_its_pages_start_resizes_in_place)
{
	set("mmap_threshold", 16 << 20);
	set("mmap_dynamic", 0);
	char *p = A(malloc)(2 << 20);
	cr_assert_eq((uintptr_t)p & (LA_PAGE - 1), LA_COLOUR);
	memset(p, 9, 2 << 20);
	struct la_counters before = stats();
	size_t n = (1 << 20) + 8192; /* by more than a quarter: its pages beyond go back */
	char *q = A(realloc)(p, n);
	cr_assert_eq(q, p, "shrunk in place");
	cr_assert_eq(A(malloc_usable_size)(q), n + LA_PAGE - LA_COLOUR);
	cr_assert_eq(stats().allocated_bytes, before.allocated_bytes - (2 << 20) + n);
	char *r = A(realloc)(q, 3 << 20);
	cr_assert_not_null(r);
	for (size_t i = 0; i < n; i += 512)
		cr_assert_eq(r[i], 9, "byte %zu", i);
	cr_assert_geq(A(malloc_usable_size)(r), 3 << 20);
	A(free)(r);
}

Test(large_slot, it_takes_blocks_up_to_four_times_tcache_max_bytes)
{
	set("mmap_threshold", 8 << 20);
	char *keep = A(malloc)(100000);
	char *big = A(malloc)((1 << 20) + 4096), *fit = A(malloc)(1 << 20);
	A(free)(big);
	cr_assert_eq(tcache_large_bytes(), 0, "above the bound: not in the slot");
	cr_assert(arena_parks(my_arena(), big), "parked in the arena as before");
	A(free)(fit);
	cr_assert_eq(tcache_large_bytes(), 1 << 20, "at the bound: in the slot");
	set("tcache_max_bytes", 64 << 10); /* bound 256 KiB: the calling thread applies it now */
	cr_assert_eq(tcache_large_bytes(), 0, "the lower bound sent it to the arena");
	cr_assert(arena_parks(my_arena(), fit));
	char *p = A(malloc)(300 << 10);
	A(free)(p);
	cr_assert_eq(tcache_large_bytes(), 0);
	char *r = A(malloc)(200 << 10);
	A(free)(r);
	cr_assert_eq(tcache_large_bytes(), 200 << 10);
	set("tcache_max_bytes", 0); /* no thread caches: no slot */
	cr_assert_eq(tcache_large_bytes(), 0);
	char *t = A(malloc)(200 << 10);
	A(free)(t);
	cr_assert_eq(tcache_large_bytes(), 0);
	A(free)(keep);
}

Test(large_slot, none_with_the_throttle_off)
{
	set("mmap_threshold", 1 << 20);
	set("madvise_throttle", 0);
	char *p = A(malloc)(64 << 10);
	A(free)(p);
	cr_assert_eq(tcache_large_bytes(), 0, "pages go back at every shrink, as asked");
}

/* The slot stands for the block a free would have parked: a free it declines (a block above
 * its bound, which the arena parks as before) gives the slot's block back to its heap, as a
 * free that parks a block gives back the one parked before. One block kept, not two. */
Test(large_slot, a_free_above_its_bound_sends_its_block_back_to_its_heap)
{
	set("mmap_threshold", 8 << 20);
	char *keep = A(malloc)(100000);
	/* (big: a span of 2 MiB, the block LA_COLOUR bytes into its first page) */
	char *p = A(malloc)(64 << 10), *big = A(malloc)((2 << 20) - LA_COLOUR);
	memset(p, 1, 64 << 10);
	struct la_counters before = flushed_stats();
	A(free)(p);
	cr_assert_eq(tcache_large_bytes(), 64 << 10);
	A(free)(big); /* above 1 MiB: parked in the arena */
	cr_assert(arena_parks(my_arena(), big), "parked as before the slot");
	cr_assert_eq(tcache_large_bytes(), 0, "the slot's block went back to its heap");
	struct la_counters after = stats();
	cr_assert_eq(after.cached_bytes, before.cached_bytes, "no longer cached");
	cr_assert_eq(after.allocated_bytes, before.allocated_bytes - (64 << 10) - (2 << 20));
	A(free)(keep);
}

/* With the throttle turned off (liballoc_set), the next large free goes to its heap and so
 * does the slot's block: nothing is kept, as for the arena's parked block. */
Test(large_slot, a_free_with_the_throttle_turned_off_sends_its_block_back)
{
	set("mmap_threshold", 1 << 20);
	char *keep = A(malloc)(100000);
	char *q = A(malloc)(96 << 10), *p = A(malloc)(64 << 10);
	A(free)(p);
	cr_assert_eq(tcache_large_bytes(), 64 << 10);
	set("madvise_throttle", 0);
	A(free)(q);
	cr_assert(!arena_parks_any(my_arena()));
	cr_assert_eq(tcache_large_bytes(), 0, "pages go back at every shrink, as asked");
	A(free)(keep);
}

/* A lower bound set by another thread applies within the owner's next TC_GC_EVENTS large
 * allocations (its cold-bin sweep), as at a bin's next refill or flush: a thread that only
 * loops large blocks through its slot meets neither. */
struct bound_change {
	pthread_barrier_t freed, set;
	uint64_t bytes;
};

static void *slot_owner_across_a_bound_change(void *arg)
{
	struct bound_change *bc = arg;
	A(free)(A(malloc)(512 << 10));
	pthread_barrier_wait(&bc->freed);
	pthread_barrier_wait(&bc->set);              /* tcache_max_bytes 64 KiB: bound 256 KiB */
	for (unsigned i = 0; i <= TC_GC_EVENTS; i++) /* the slot's block, until the sweep */
		A(free)(A(malloc)(512 << 10));
	bc->bytes = tcache_large_bytes();
	return NULL;
}

Test(large_slot, a_bound_lowered_by_another_thread_applies_at_its_next_sweep)
{
	set("mmap_threshold", 8 << 20);
	struct bound_change bc = {.bytes = 1};
	pthread_barrier_init(&bc.freed, NULL, 2);
	pthread_barrier_init(&bc.set, NULL, 2);
	pthread_t t;
	pthread_create(&t, NULL, slot_owner_across_a_bound_change, &bc);
	pthread_barrier_wait(&bc.freed);
	set("tcache_max_bytes", 64 << 10);
	pthread_barrier_wait(&bc.set);
	pthread_join(t, NULL);
	cr_assert_eq(bc.bytes, 0, "a 512 KiB block in the slot above its 256 KiB bound");
}

/* flush (allocctl flush, liballoc_flush_caches) parks it, with the caches' blocks */
Test(large_slot, a_flush_returns_it_to_the_arena)
{
	set("mmap_threshold", 1 << 20);
	char *keep = A(malloc)(100000);
	char *p = A(malloc)(64 << 10);
	struct la_counters before = flushed_stats();
	A(free)(p);
	cr_assert_eq(stats().cached_bytes, before.cached_bytes + (64 << 10));
	struct la_counters after = flushed_stats();
	cr_assert_eq(tcache_large_bytes(), 0);
	cr_assert(arena_parks(my_arena(), p));
	cr_assert_eq(after.cached_bytes, before.cached_bytes, "no longer cached");
	cr_assert_eq(after.allocated_bytes, before.allocated_bytes - (64 << 10));
	A(free)(keep);
}

/* trim and release give it back to the system like the parked block */
Test(large_slot, a_trim_returns_it)
{
	set("mmap_threshold", 1 << 20);
	char *keep = A(malloc)(100000);
	char *p = A(malloc)(200 * 4096);
	memset(p, 1, 200 * 4096);
	struct la_counters before = flushed_stats();
	A(free)(p);
	cr_assert_eq(tcache_large_bytes(), 200 * 4096);
	cr_assert_eq(A(malloc_trim)(0), 1);
	struct la_counters after = stats();
	cr_assert_eq(tcache_large_bytes(), 0);
	cr_assert_geq(after.madvise_bytes - before.madvise_bytes, 200 * 4096,
	              "the slot's pages went back: %llu bytes",
	              (unsigned long long)(after.madvise_bytes - before.madvise_bytes));
	cr_assert_eq(after.cached_bytes, before.cached_bytes);
	A(free)(keep);
}

static void *free_into_slot_and_wait(void *arg)
{
	void **pp = arg;
	pp[0] = A(malloc)(256 << 10);
	memset(pp[0], 1, 256 << 10);
	A(free)(pp[0]);
	pp[1] = (void *)(uintptr_t)tcache_large_bytes();
	pp[2] = my_arena();
	return NULL;
}

Test(large_slot, a_release_of_idle_heaps_returns_it)
{
	set("mmap_threshold", 1 << 20);
	set("decay_ms", 0);
	char *p = A(malloc)(256 << 10);
	memset(p, 1, 256 << 10);
	struct la_counters before = flushed_stats();
	A(free)(p);
	cr_assert_eq(tcache_large_bytes(), 256 << 10);
	liballoc_release_idle_heaps();
	struct la_counters after = stats();
	cr_assert_eq(tcache_large_bytes(), 0);
	cr_assert(!arena_parks_any(my_arena()), "parked, then given back by the release");
	cr_assert_eq(after.cached_bytes, before.cached_bytes);
	cr_assert_eq(after.allocated_bytes, before.allocated_bytes - (256 << 10));
}

/* A thread that exits parks its slot's block in its arena (and no longer counts it
 * cached), as its free would have parked it. */
Test(large_slot, thread_exit_returns_it)
{
	set("mmap_threshold", 1 << 20);
	set("decay_ms", 0);
	struct la_counters before = flushed_stats();
	void *pp[3];
	run_thread(free_into_slot_and_wait, pp);
	cr_assert_eq((uintptr_t)pp[1], 256 << 10, "it was in the thread's slot");
	cr_assert(arena_parks(pp[2], pp[0]), "parked in the thread's arena at its exit");
	struct la_counters after = stats();
	/* (thread creation and exit move a few small blocks through the caches) */
	cr_assert_lt(after.cached_bytes, before.cached_bytes + 4096,
	             "cached %llu before, %llu after", (unsigned long long)before.cached_bytes,
	             (unsigned long long)after.cached_bytes);
}

/* The decay pass returns a slot whose block no malloc took (the parked block's test above,
 * parked::the_decay_pass_returns_it_when_no_allocation_takes_it, frees into the slot); and
 * it publishes the figure of a slot whose block a malloc took back. */
Test(large_slot, the_decay_pass_publishes_a_block_taken_back)
{
	set("mmap_threshold", 1 << 20);
	char *p = A(malloc)(64 << 10);
	struct la_counters before = flushed_stats();
	A(free)(p);
	char *q = A(malloc)(64 << 10);
	cr_assert_eq(q, p);
	cr_assert_eq(stats().cached_bytes, before.cached_bytes + (64 << 10),
	             "(the malloc leaves the figure)");
	set("decay_ms", 50);
	struct la_counters after = stats();
	for (int i = 0; i < 2400 && after.cached_bytes != before.cached_bytes; i++) {
		usleep(25000);
		after = stats();
	}
	cr_assert_eq(after.cached_bytes, before.cached_bytes, "in use again: %llu cached",
	             (unsigned long long)after.cached_bytes);
	cr_assert_eq(tcache_large_bytes(), 0);
	A(free)(q);
}

/* The owner's slot against the flushers: one thread mallocs, writes and frees blocks of two
 * sizes (ASan: a block handed out twice, or written after a flusher gave it back, is an
 * error; TSan: an unordered access to the slot or the span) while this one flushes
 * every cache, trims and releases, and the control thread's decay pass runs every
 * millisecond: each takes the slot through the thread cache's handshake (TSan: its lock).
 * At the end every block is accounted: nothing cached, nothing lost. */
struct slot_loop {
	int stop;
	long pairs;
	int bad;
};

static void *slot_loop_owner(void *arg)
{
	struct slot_loop *sl = arg;
	char *keep = A(malloc)(100000);
	long i = 0;
	for (; !__atomic_load_n(&sl->stop, __ATOMIC_RELAXED) || i < 2000; i++) {
		size_t n = (i & 7) == 7 ? 96 << 10 : 64 << 10;
		char *p = A(malloc)(n);
		if (!p) {
			sl->bad = 1;
			break;
		}
		p[0] = (char)i; /* written at both ends: a block the allocator also wrote */
		p[n - 1] = (char)i;
		A(free)(p);
	}
	A(free)(keep);
	sl->pairs = i;
	return NULL;
}

Test(large_slot, flushes_trims_and_decay_passes_while_the_owner_loops)
{
	set("mmap_threshold", 1 << 20);
	set("decay_ms", 1);
	struct slot_loop sl = {0};
	pthread_t t;
	pthread_create(&t, NULL, slot_loop_owner, &sl);
	for (int r = 0; r < 200; r++) {
		liballoc_flush_caches();
		if (r % 4 == 1)
			A(malloc_trim)(0);
		if (r % 4 == 3)
			liballoc_release_idle_heaps();
		usleep(200);
	}
	__atomic_store_n(&sl.stop, 1, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
	cr_assert_eq(sl.bad, 0, "a malloc failed");
	cr_assert_geq(sl.pairs, 2000);
	struct la_counters after = flushed_stats();
	cr_assert_lt(after.cached_bytes, 4096, "the exited thread's slot is not counted cached");
}

/* ---- the decay pass returns what idle thread caches hold ------------------------------ */

struct idle_cache {
	pthread_barrier_t filled, done;
};

static void *fill_cache_and_idle(void *arg)
{
	struct idle_cache *ic = arg;
	void *p[64];
	for (int round = 0; round < 4; round++) { /* refills, then a flush: the bin is full */
		for (int i = 0; i < 64; i++)
			p[i] = A(malloc)(1000);
		for (int i = 0; i < 64; i++)
			A(free)(p[i]);
	}
	pthread_barrier_wait(&ic->filled);
	pthread_barrier_wait(&ic->done); /* idle, its cache full, until the test ends */
	return NULL;
}

Test(decay, the_caches_of_idle_threads_go_back_to_their_arenas)
{
	struct idle_cache ic;
	pthread_barrier_init(&ic.filled, NULL, 2);
	pthread_barrier_init(&ic.done, NULL, 2);
	uint64_t base = stats().cached_bytes;
	pthread_t t;
	pthread_create(&t, NULL, fill_cache_and_idle, &ic);
	pthread_barrier_wait(&ic.filled);
	uint64_t before = stats().cached_bytes;
	cr_assert_gt(before, base,
	             "the idle thread holds blocks: %llu bytes cached, %llu before it",
	             (unsigned long long)before, (unsigned long long)base);
	uint64_t held = before - base;
	set("decay_ms", 50);
	uint64_t cached = before;
	for (int i = 0; i < 2400 && before - cached < held; i++) { /* a minute at most */
		usleep(25000);
		cached = stats().cached_bytes;
	}
	cr_assert_geq(before - cached, held,
	              "the decay pass took the idle cache (%llu bytes): %llu bytes cached before, "
	              "%llu after",
	              (unsigned long long)held, (unsigned long long)before,
	              (unsigned long long)cached);
	pthread_barrier_wait(&ic.done);
	pthread_join(t, NULL);
}

/* The control thread's (liballoc-ctl) status file. */
static const char *control_status(void)
{
	static char path[300];
	/* 30 s at most for it to run on a loaded machine */
	if (!path[0])
		cr_assert(control_task_status(path, sizeof(path), 3000), "the control thread runs");
	return path;
}

/* voluntary context switches of the control thread: each is one wake-up */
static long control_wakeups(void)
{
	long v = status_value(control_status(), "voluntary_ctxt_switches:");
	cr_assert_geq(v, 0);
	return v;
}

/* The control thread's state: 'S' asleep, 'R' running or waiting for a CPU. */
static char control_state(void)
{
	FILE *f = fopen(control_status(), "r");
	cr_assert_not_null(f);
	char line[256], state = 0;
	while (!state && fgets(line, sizeof(line), f))
		if (strncmp(line, "State:", 6) == 0)
			sscanf(line + 6, " %c", &state);
	fclose(f);
	return state;
}

/* True once the control thread stays asleep for 100 ms (five periods of decay_ms=20):
 * asleep at the end of them and no voluntary switch since their start (woken and run, it
 * would have gone back to sleep with one). No switch alone is not enough: a thread whose
 * wait timed out but that waits for a CPU on a busy machine makes none either, and it is
 * runnable, not asleep. False if it is still waking after a minute (generous: a busy
 * machine is slow). */
static bool control_goes_quiet(void)
{
	for (int i = 0; i < 600; i++) {
		long a = control_wakeups();
		usleep(100000);
		if (control_state() == 'S' && control_wakeups() == a)
			return true;
	}
	return false;
}

/* Once what the decay pass can return is returned, the control thread sleeps until a free
 * gives it something again: free blocks left among live ones (which no pass can return), a
 * live large block and a live direct mapping do not keep it waking every decay_ms. */
Test(decay, an_idle_process_stops_waking_the_control_thread)
{
	void *keep[600];
	for (int i = 0; i < 600; i++)
		keep[i] = A(malloc)(16 + (size_t)(i % 40) * 24);
	for (int i = 0; i < 600; i += 2)
		A(free)(keep[i]); /* free blocks among live ones, in spans that stay */
	void *large = A(malloc)(300000);
	void *direct = A(malloc)(8 << 20);
	memset(large, 1, 300000);
	memset(direct, 1, 8 << 20);
	A(free)(A(malloc)(200000));   /* a parked block */
	A(free)(A(malloc)(40 << 20)); /* not reused yet: unmapped */
	A(free)(A(malloc)(40 << 20)); /* reused where it would have served: cached */
	set("decay_ms", 20);
	long before = control_wakeups();
	cr_assert(control_goes_quiet(),
	          "the control thread kept waking: %ld wake-ups in 60 s with nothing to decay",
	          control_wakeups() - before);
	cr_assert_eq(stats().direct_cache_bytes, 0, "the cached mapping was unmapped first");
	A(free)(large);
	A(free)(direct);
	for (int i = 1; i < 600; i += 2)
		A(free)(keep[i]);
}

static double mono_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Pages of [p, p + pages) resident (mincore). */
static unsigned resident_in(const void *p, size_t pages)
{
	unsigned char vec[256];
	cr_assert_leq(pages, sizeof(vec));
	cr_assert_eq(mincore((void *)p, pages << 12, vec), 0);
	unsigned n = 0;
	for (size_t i = 0; i < pages; i++)
		n += vec[i] & 1;
	return n;
}

enum { AGE_PAGES = 64, AGE_BLOCKS = 10 };

/* Blocks of AGE_PAGES pages in one heap (mmap_threshold well above), each between two
 * that stay (no free neighbour lends it an older stamp), written; a live 8 MiB keeps the
 * heap far from nearly empty (no purge at the free). Freeing one and then the spare
 * `park` (a freed large block is parked whole until the next one is freed) stamps its
 * pages now. */
struct aging_blocks {
	char *live, *blk[AGE_BLOCKS], *sep[AGE_BLOCKS + 1], *park[AGE_BLOCKS];
};

static void aging_setup(struct aging_blocks *b)
{
	set("mmap_threshold", 32 << 20);
	set("mmap_dynamic", 0);
	size_t n = AGE_PAGES << 12;
	b->live = A(malloc)(8 << 20);
	memset(b->live, 1, 8 << 20);
	for (int i = 0; i < AGE_BLOCKS; i++) {
		b->sep[i] = A(malloc)(n);
		b->blk[i] = A(malloc)(n);
		b->park[i] = A(malloc)(n);
		memset(b->blk[i], 1, n);
		memset(b->park[i], 1, n);
	}
	b->sep[AGE_BLOCKS] = A(malloc)(n);
	cr_assert(((uintptr_t)b->blk[0] & 4095) == 0, "a large block is page-aligned");
}

static void aging_free(struct aging_blocks *b, int i)
{
	A(free)(b->blk[i]);
	A(free)(b->park[i]); /* blk[i] goes back to its heap, stamped now */
}

static void aging_end(struct aging_blocks *b)
{
	for (int i = 0; i <= AGE_BLOCKS; i++)
		A(free)(b->sep[i]);
	A(free)(b->live);
}

/* The decay pass sleeps through ticks in which nothing can come of age (heap_skip): pages
 * freed meanwhile, after ticks went by unseen, still stay free for decay_ms before they go
 * back (the tick they carry is mended when the sleep ends), and they do go back. Freed
 * three ticks into a sleep, without the mending they went back three ticks after their
 * free (decay_ms is four). */
Test(decay, pages_freed_while_the_pass_sleeps_through_ticks_stay_for_decay_ms)
{
	const double decay_s = 0.4, tick_s = decay_s / HEAP_DECAY_TICKS;
	struct aging_blocks b;
	aging_setup(&b);
	set("decay_ms", 400);
	const int last = AGE_BLOCKS - 1;
	double freed = 0, start = 0, changed = mono_s(), t0 = changed;
	uint32_t cur = __atomic_load_n(&heap_epoch, __ATOMIC_SEQ_CST);
	int i = 0;
	while (!freed && mono_s() - t0 < 60) {
		double now = mono_s();
		uint32_t e = __atomic_load_n(&heap_epoch, __ATOMIC_SEQ_CST);
		bool asleep = __atomic_load_n(&heap_skip, __ATOMIC_SEQ_CST);
		if (e != cur) { /* a pass: an odd tick, a sleep begins */
			cur = e;
			changed = now;
			start = e & 1 && asleep ? now : 0;
		}
		if (start && now >= start + 3.3 * tick_s) {
			if (asleep && __atomic_load_n(&heap_epoch, __ATOMIC_SEQ_CST) == cur) {
				aging_free(&b, last); /* 3 ticks went by unseen */
				freed = mono_s();
			}
			start = 0; /* a shorter sleep: the next one */
		}
		/* a parked block that goes back at a full pass ages from there: after that pass
		 * the thread sleeps through the 3 ticks to the next one */
		if (!start && now - changed > 2 * decay_s && i < last) {
			A(free)(b.blk[i++]);
			changed = now;
		}
		usleep(1000);
	}
	cr_assert(freed, "the decay pass slept through no 3 ticks in 60 s (%d frees)", i);
	cr_assert_eq(resident_in(b.blk[last], AGE_PAGES), AGE_PAGES);
	double gone = 0;
	while (!gone && mono_s() - freed < 60) {
		if (resident_in(b.blk[last], AGE_PAGES) == 0)
			gone = mono_s();
		else
			usleep(2000);
	}
	cr_assert(gone, "the pages freed during the sleep were not returned in 60 s");
	cr_log_info("returned %.3f s after their free (decay_ms 400, %d frees before)",
	            gone - freed, i);
	cr_assert_geq(gone - freed, decay_s - 0.002,
	              "pages freed while the pass slept went back %.3f s after their free, "
	              "before decay_ms",
	              gone - freed);
	aging_end(&b);
}

/* The control thread's voluntary context switches, read with no allocation (open and read
 * into the stack: stdio's buffer is a block, whose free can arm the decay pass). */
static long control_wakeups_quiet(const char *path)
{
	char buf[4096];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	const char *p = strstr(buf, "\nvoluntary_ctxt_switches:");
	return p ? atol(p + strlen("\nvoluntary_ctxt_switches:")) : -1;
}

/* The full pass that flushes a thread cache gone cold, whose blocks go back among live ones
 * (nothing for a later pass to return), is the last: the control thread sleeps after it.
 * The flush's frees armed the next pass, and the thread woke a tick later and again at the
 * next full pass for nothing (2 of the 6 passes of a decay child in the fork loop). Three
 * times: every other block of 400 of 48 B freed into the cache, the cache seen emptied by
 * the pass (cached_bytes 0, polled with no allocation), the wake-ups counted from half a
 * tick after to one period and a tick after (decay_ms 200: ticks of 50 ms). 6 before, 0
 * now; one stray a window is allowed (a busy arena looked at again, a slow wake). */
Test(decay, the_flush_of_a_cold_cache_among_live_blocks_is_the_last_pass)
{
	enum { N = 400, CYCLES = 3 };
	static void *blk[N];
	for (int i = 0; i < N; i++)
		blk[i] = A(malloc)(48);
	const char *path = control_status(); /* (allocates: before the windows) */
	set("decay_ms", 200);
	usleep(1200000); /* past the start's sweep of stale segments, a second after it */
	long wakes[CYCLES];
	bool flushed[CYCLES];
	for (int c = 0; c < CYCLES; c++) {
		for (int i = 1; i < N; i += 2)
			A(free)(blk[i]);
		flushed[c] = false;
		for (int t = 0; t < 600 && !flushed[c]; t++) {
			usleep(5000);
			flushed[c] = stats().cached_bytes == 0;
		}
		usleep(25000);
		long a = control_wakeups_quiet(path);
		usleep(250000);
		long b = control_wakeups_quiet(path);
		wakes[c] = a < 0 || b < 0 ? -1 : b - a;
		for (int i = 1; i < N; i += 2)
			blk[i] = A(malloc)(48);
	}
	long total = 0;
	for (int c = 0; c < CYCLES; c++) {
		cr_log_info("cycle %d: flushed %d, %ld wake-ups after", c, flushed[c], wakes[c]);
		cr_assert(flushed[c], "cycle %d: the cold cache was flushed within 3 s", c);
		cr_assert_geq(wakes[c], 0, "cycle %d: the control thread's status read", c);
		total += wakes[c];
	}
	cr_assert_leq(total, CYCLES / 2 + 1,
	              "%ld wake-ups of the control thread after %d flushes of a cold cache "
	              "that left nothing to return",
	              total, CYCLES);
	for (int i = 0; i < N; i++)
		A(free)(blk[i]);
}

/* Pages that age in a process that keeps something for a later pass (the parked block,
 * pages given back with it): the control thread wakes for the passes that have something
 * to do (a full pass once a period, the one at which pages come of age) and sleeps
 * through the ticks between. It woke at every tick, four times a period. Counted between
 * two passes, not over a time of the clock: from the pass that returned the first pages
 * (its tick, read once they are seen gone) to the first one two periods of ticks later or
 * more (seen in heap_epoch, which each pass writes before it works). The wake-ups there:
 * the passes between (the full passes, the one at which the parked block, back in its
 * heap at the first, comes of age), two that are not the decay pass's (the sweep of stale
 * segments a second after the start, SHM_REAP_AFTER_NS, and the measurement after
 * aging_free's large free, MEASURE_SOON_NS), and the sleeps of the first and the last
 * pass when this thread reads the count before or after them: 5 or 6 seen, 7 allowed; a
 * pass at every tick makes 8 passes in the span (10 wake-ups seen with the sleep turned
 * off in control.c). A pass late on a busy machine runs the tick it planned, not more of
 * them, and the count is read with no allocation (control_wakeups_quiet: this thread
 * takes no arena's lock as a pass looks at it). Counted over 0.8 s from the first return,
 * it was 7 against 5 allowed at load 21-33 (tests/README.md, session 40). */
Test(decay, aging_pages_wake_the_control_thread_only_when_something_is_due)
{
	const char *path = control_status(); /* (allocates: before the count) */
	struct aging_blocks b;
	aging_setup(&b);
	set("decay_ms", 400);
	double t0 = mono_s(), back = 0;
	aging_free(&b, 0);
	while (!back && mono_s() - t0 < 60) {
		if (resident_in(b.blk[0], AGE_PAGES) == 0)
			back = mono_s();
		else
			usleep(2000);
	}
	cr_assert(back, "the pages went back");
	cr_assert_geq(back - t0, 0.4 - 0.002, "the pages went back before decay_ms");
	/* the tick of the pass that returned them (or of a later one, on a slow machine:
	 * the span then starts there) */
	uint32_t from = __atomic_load_n(&heap_epoch, __ATOMIC_SEQ_CST) & ~(HEAP_TICK - 1);
	long before = control_wakeups_quiet(path);
	cr_assert_geq(before, 0, "the control thread's status read");
	/* ... or to the last pass, when none comes for two periods of the clock: nothing is
	 * due (the sanitizer builds, whose heap holds the test's blocks only, have no full pass
	 * once the parked block is back: their ticks stopped at 16 of 10..26). With a pass at
	 * every tick the ticks never stop: the count reaches the second period's end. */
	uint32_t to = from + 2 * HEAP_DECAY_TICKS * HEAP_TICK, e = from;
	double moved = mono_s();
	while ((int32_t)(e - to) < 0 && mono_s() - moved < 0.8) {
		usleep(2000);
		uint32_t now = __atomic_load_n(&heap_epoch, __ATOMIC_SEQ_CST);
		if (now != e) {
			e = now;
			moved = mono_s();
		}
	}
	long after = control_wakeups_quiet(path);
	cr_assert_geq(after, 0, "the control thread's status read");
	long wakes = after - before;
	cr_log_info("%ld wake-ups from the pass at tick %u to the one at %u (of %u)", wakes, from,
	            e, to);
	cr_assert_leq(wakes, 7, "%ld wake-ups of the control thread in two periods of ticks",
	              wakes);
	aging_end(&b);
}

static void *alloc_and_exit(void *arg)
{
	(void)arg;
	void *p[8];
	for (int i = 0; i < 8; i++)
		p[i] = A(malloc)(16 + (size_t)i * 64);
	for (int i = 0; i < 8; i++)
		A(free)(p[i]);
	return NULL;
}

/* A thread that exits while another application thread stays (main here) does not wake the
 * control thread: it looks for the process's end only once no such thread is left, and the
 * last one to exit tells it (control_thread_exiting). Every exit woke it before 057de7f (a
 * futex wake, a context switch, its clock read): a program that starts a thread per task
 * paid them at each (thread churn, bench/tchurn). 200 threads made and joined one after the
 * other, each allocating and freeing (its cache made and released at its exit): the
 * control thread wakes for other reasons only (a decay pass armed by the freed caches, a
 * burst look), a few times. Sanitizer builds count no thread (os.h): skipped there. */
Test(control, thread_exits_while_main_runs_do_not_wake_the_control_thread)
{
	if (!LA_WRAP_THREADS) /* sanitizer builds: threads are not counted (os.h) */
		cr_skip_test("pthread_create is not interposed in this build");
	cr_assert(control_goes_quiet(), "the control thread goes quiet");
	long before = control_wakeups();
	for (int i = 0; i < 200; i++)
		run_thread(alloc_and_exit, NULL);
	long wakes = control_wakeups() - before;
	cr_log_info("%ld wake-ups of the control thread over 200 thread exits", wakes);
	cr_assert_lt(wakes, 40, "%ld wake-ups of the control thread over 200 thread exits", wakes);
}

/* A thread that allocates blocks for others to free, then waits without touching its
 * arena again. */
struct idle_owner {
	pthread_barrier_t filled, done;
	void *blocks[500];
};

static void *fill_and_idle(void *arg)
{
	struct idle_owner *o = arg;
	for (int i = 0; i < 500; i++)
		o->blocks[i] = A(malloc)(200);
	pthread_barrier_wait(&o->filled);
	pthread_barrier_wait(&o->done);
	return NULL;
}

/* Frees queued on an arena whose threads stay idle arm the decay pass, which drains them:
 * they do not wait for the owner's next allocation (it may never come). */
Test(decay, frees_queued_on_an_idle_arena_are_drained_by_the_decay_pass)
{
	struct idle_owner o;
	set("arena_max", 16); /* a thread of its own per arena, whatever the machine's CPUs */
	pthread_barrier_init(&o.filled, NULL, 2);
	pthread_barrier_init(&o.done, NULL, 2);
	A(free)(A(malloc)(200)); /* this thread has its own arena and cache */
	pthread_t t;
	pthread_create(&t, NULL, fill_and_idle, &o);
	pthread_barrier_wait(&o.filled);
	set("decay_ms", 20);
	cr_assert(control_goes_quiet(), "the control thread went to sleep first");
	for (int i = 0; i < 500; i++)
		A(free)(o.blocks[i]); /* blocks of the idle thread's arena: queued on it */
	struct la_counters c = stats();
	for (int i = 0; i < 600 && (c.remote_frees_queued < 500 ||
	                            c.remote_frees_drained < c.remote_frees_queued);
	     i++) {
		usleep(100000);
		c = stats();
	}
	cr_assert_geq(c.remote_frees_queued, 500,
	              "all 500 frees reached the owner's queue after 60 s: %llu did",
	              (unsigned long long)c.remote_frees_queued);
	cr_assert_eq(c.remote_frees_drained, c.remote_frees_queued,
	             "queued %llu, drained %llu after 60 s",
	             (unsigned long long)c.remote_frees_queued,
	             (unsigned long long)c.remote_frees_drained);
	pthread_barrier_wait(&o.done);
	pthread_join(t, NULL);
}

/* 512 blocks of 4 KiB that the main thread allocated, freed by a thread of another arena
 * that then ends */
static void *free_all_and_exit(void *arg)
{
	void **blocks = arg;
	for (int i = 0; i < 512; i++)
		A(free)(blocks[i]);
	return NULL;
}

/* Frees a thread queued on another arena go back to their spans when that thread ends,
 * not at the owner's next refill: the owner here (the main thread) stays idle and no
 * decay pass runs (decay_ms 0), and they counted in use until drained, so reclaimable
 * missed their pages (tests/e2e/figures.bats, a workload whose threads freed blocks they
 * had borrowed from the main thread's arena: the flush gave back 21-40 MiB more). */
Test(remote_frees, frees_queued_by_a_thread_that_ends_are_drained_at_its_exit)
{
	set("arena_max", 16); /* a thread of its own per arena, whatever the machine's CPUs */
	set("decay_ms", 0);
	static void *blocks[512];
	for (int i = 0; i < 512; i++) {
		blocks[i] = A(malloc)(4096);
		memset(blocks[i], 1, 4096);
	}
	liballoc_flush_caches();
	struct la_counters before = stats();
	run_thread(free_all_and_exit, blocks);
	struct la_counters c = stats();
	cr_assert_geq(c.remote_frees_queued - before.remote_frees_queued, 512,
	              "the 512 frees went to the main thread's arena as remote frees: %llu did",
	              (unsigned long long)(c.remote_frees_queued - before.remote_frees_queued));
	cr_assert_eq(c.remote_frees_drained, c.remote_frees_queued,
	             "queued %llu, drained %llu once the freeing thread ended",
	             (unsigned long long)c.remote_frees_queued,
	             (unsigned long long)c.remote_frees_drained);
	/* their 2 MiB are no longer allocated, nor cached in the owner's transfer cache (the
	 * drain puts small blocks there): back in their spans, free resident or returned */
	cr_assert_leq(c.cached_bytes, before.cached_bytes + 4096, "cached %llu before, %llu after",
	              (unsigned long long)before.cached_bytes, (unsigned long long)c.cached_bytes);
	cr_assert_leq(c.allocated_bytes + (2u << 20) - 4096, before.allocated_bytes,
	              "allocated %llu before the frees, %llu after",
	              (unsigned long long)before.allocated_bytes,
	              (unsigned long long)c.allocated_bytes);
}

/* ---- 2. dynamic mmap threshold and the mapping cache --------------------------------- */

struct loop {
	size_t size;
	int iterations;
	long faults_after_warmup;
};

static void *alloc_touch_free(void *arg)
{
	struct loop *l = arg;
	struct rusage r0, r1;
	for (int i = 0; i < l->iterations; i++) {
		if (i == 4)
			getrusage(RUSAGE_THREAD, &r0);
		char *p = A(malloc)(l->size);
		for (size_t o = 0; o < l->size; o += 4096)
			p[o] = (char)i;
		A(free)(p);
	}
	getrusage(RUSAGE_THREAD, &r1);
	l->faults_after_warmup = r1.ru_minflt - r0.ru_minflt;
	return NULL;
}

static void two_threads(struct loop *a, struct loop *b)
{
	pthread_t t1, t2;
	pthread_create(&t1, NULL, alloc_touch_free, a);
	pthread_create(&t2, NULL, alloc_touch_free, b);
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
}

Test(dynamic_threshold, freeing_a_4mb_mapping_raises_the_threshold_and_faults_stop)
{
	struct loop a = {4 << 20, 200, 0}, b = {4 << 20, 200, 0};
	two_threads(&a, &b);
	int64_t t = 0;
	liballoc_get("mmap_threshold", &t);
	struct la_counters c = stats();
	cr_assert_geq(c.threshold_raises, 1);
	/* The first free raises the threshold past 4 MiB; but a malloc of the other thread that
	 * read the threshold before that raise maps, where the mapping just freed would have
	 * served: mappings are being recycled, and blocks of mmap_threshold_max (4 MiB) keep
	 * mappings of their own again (note_miss caps the threshold there; README,
	 * `direct_cache_bytes`), recycled through the cache: no faults either (below). Seen in 1
	 * run of 60 under ASan beside two CPU burners, and in CI's ASan stage. */
	if (t == 4 << 20)
		cr_assert_gt(c.direct_cache_hits, 0,
		             "threshold capped at 4 MiB, no mapping reused");
	else
		cr_assert_gt(t, 4 << 20, "threshold raised past 4 MiB: %lld", (long long)t);
	long pages = 196L * (4 << 20) / 4096;
	cr_assert_lt(a.faults_after_warmup + b.faults_after_warmup, pages / 100,
	             "page faults after warm-up: %ld + %ld for %ld pages touched",
	             a.faults_after_warmup, b.faults_after_warmup, 2 * pages);
}

static long thread_faults(void)
{
	struct rusage r;
	getrusage(RUSAGE_THREAD, &r);
	return r.ru_minflt;
}

/* A mapping freed after a larger one's free raised the threshold past its size (blocks of
 * its size came from the heaps already) moves into a heap's free pages instead of being
 * unmapped, and that heap's next block of its size takes them without faults; the mapping
 * whose own free raised the threshold is unmapped. */
Test(dynamic_threshold, a_mapping_freed_below_a_risen_threshold_gives_its_pages_to_a_heap)
{
	A(free)(A(malloc)(64)); /* the thread's arena and its heap */
	size_t n = 1 << 20;
	long pages = (long)(n / 4096);
	char *p = A(malloc)(n);
	cr_assert_not_null(p);
	memset(p, 1, n);
	struct la_counters c0 = stats();
	A(free)(A(malloc)(2 * n)); /* raises the threshold past 2 MiB */
	struct la_counters c1 = stats();
	int64_t t = 0;
	liballoc_get("mmap_threshold", &t);
	cr_assert_gt(t, (int64_t)(2 * n), "threshold raised: %lld", (long long)t);
	/* (the heap holds fewer free pages than it: kept for the heap's growth, below) */
	cr_assert_eq(c1.munmap_calls - c0.munmap_calls, 0, "the raising mapping is not unmapped");
	cr_assert_eq(c1.direct_cache_bytes, 2 * n, "it is kept for the heaps' growth");
	A(free)(p);
	struct la_counters c2 = stats();
	cr_assert_eq(c2.munmap_calls - c1.munmap_calls, 0, "the 1 MiB mapping is not unmapped");
	cr_assert_geq(c2.free_resident_bytes - c1.free_resident_bytes, n,
	              "its pages are a heap's free resident pages: %llu",
	              (unsigned long long)(c2.free_resident_bytes - c1.free_resident_bytes));
	long f0 = thread_faults();
	char *q = A(malloc)(n);
	cr_assert_not_null(q);
	memset(q, 2, n);
	long faults = thread_faults() - f0;
	/* (ASan's shadow of the block is an eighth of its pages) */
	cr_assert_lt(faults, pages / 4, "faults writing a heap block of %ld pages: %ld", pages,
	             faults);
	A(free)(q);
}

/* Above 4 MiB a mapping does not move into a heap (what a wrong guess would keep until the
 * decay pass): it is kept for the heaps' growth only a while, and with nothing to take it
 * the control thread unmaps it after that wait (25 us a page, direct.c: 38 ms for 6 MiB,
 * 77 ms for the 12 MiB one), long before the decay pass (decay_ms: 10 s); without the
 * control thread's decay (decay_ms 0) it is unmapped at its free. */
static void a_6_mib_mapping_freed_below_a_risen_threshold(bool decays)
{
	if (!decays)
		set("decay_ms", 0);
	A(free)(A(malloc)(64));
	size_t n = 6 << 20;
	char *p = A(malloc)(n);
	cr_assert_not_null(p);
	memset(p, 1, n);
	A(free)(A(malloc)(2 * n)); /* raises the threshold past 12 MiB */
	struct la_counters c1 = stats();
	A(free)(p);
	struct la_counters c2 = stats();
	if (!decays) {
		cr_assert_eq(c2.munmap_calls - c1.munmap_calls, 1, "the 6 MiB mapping is unmapped");
		cr_assert_lt(c2.free_resident_bytes, c1.free_resident_bytes + n);
		return;
	}
	/* (kept: unless the wait ended already, the test descheduled that long) */
	cr_assert(c2.direct_cache_bytes == 0 || c2.direct_cache_bytes >= n,
	          "kept whole: %llu bytes", (unsigned long long)c2.direct_cache_bytes);
	for (int i = 0; i < 200 && stats().direct_cache_bytes; i++)
		usleep(10000);
	struct la_counters c3 = stats();
	cr_assert_eq(c3.direct_cache_bytes, 0, "unmapped within 2 s: %llu bytes kept",
	             (unsigned long long)c3.direct_cache_bytes);
	cr_assert_geq(c3.munmap_calls - c1.munmap_calls, 1);
	cr_assert_lt(c3.free_resident_bytes, c1.free_resident_bytes + n);
}

Test(dynamic_threshold, a_mapping_above_4_mib_is_unmapped_at_its_free_without_decay)
{
	a_6_mib_mapping_freed_below_a_risen_threshold(false);
}

Test(dynamic_threshold, a_mapping_above_4_mib_kept_for_the_heaps_goes_after_a_short_wait)
{
	a_6_mib_mapping_freed_below_a_risen_threshold(true);
}

/* Pages of n bytes written into heap blocks of 128 KiB (below the raised threshold): the
 * thread's faults doing it. The blocks stay live (the heap grows by all of them). */
static long heap_growth_faults(size_t n, void **blocks)
{
	long f0 = thread_faults();
	for (size_t i = 0; i < n / (128 << 10); i++) {
		blocks[i] = A(malloc)(128 << 10);
		cr_assert_not_null(blocks[i]);
		memset(blocks[i], 3, 128 << 10);
	}
	return thread_faults() - f0;
}

/* Block q of n bytes, taken after a mapping was kept for the heaps, sits on the mapping's
 * resident pages: writing it all faults in few (its last page, past the mapping's: the block
 * starts LA_COLOUR bytes into its first page; ASan's shadow adds an eighth). */
static void block_on_the_kept_pages(char *q, size_t n)
{
	long pages = (long)(n / 4096);
	long res = (long)resident_pages((void *)((uintptr_t)q & ~(uintptr_t)4095), n);
	cr_assert_geq(res, pages - 1, "the block's pages are the mapping's: %ld of %ld resident",
	              res, pages);
	long f0 = thread_faults();
	memset(q, 2, n);
	long faults = thread_faults() - f0;
	cr_assert_lt(faults, pages / 4, "faults writing %ld pages: %ld", pages, faults);
}

/* A mapping of n bytes, written and freed in a process whose heaps hold no free pages: its
 * free raises the threshold past n and it is kept for the heaps, not unmapped. The
 * counters after the free. */
static struct la_counters kept_for_the_heaps(size_t n)
{
	A(malloc_trim)(0);      /* (what the test runner left) */
	A(free)(A(malloc)(64)); /* the thread's arena and its heap */
	char *p = A(malloc)(n);
	cr_assert_not_null(p);
	memset(p, 1, n);
	struct la_counters c0 = stats();
	A(free)(p);
	struct la_counters c1 = stats();
	cr_assert_eq(c1.munmap_calls, c0.munmap_calls, "the mapping is not unmapped at its free");
	cr_assert_eq(c1.direct_cache_bytes, n, "it is kept for the heaps: %llu bytes cached",
	             (unsigned long long)c1.direct_cache_bytes);
	return c1;
}

/* A mapping whose own free raises the threshold, while the heaps hold fewer free pages
 * than it, is kept for their growth: a heap that grows into memory it never used takes its
 * pages a chunk at a time (LEND_CHUNK_PAGES), and its next blocks take them without faults.
 * (Without it, every page of the blocks below is a fault.) */
Test(dynamic_threshold, a_mapping_whose_free_raises_the_threshold_serves_the_heaps_growth)
{
	size_t n = 1 << 20;
	struct la_counters c0 = kept_for_the_heaps(n);
	void *blocks[16];
	long pages = (long)(2 * n / 4096);
	long faults = heap_growth_faults(2 * n, blocks);
	struct la_counters c2 = stats();
	cr_assert_eq(c2.direct_cache_bytes, 0, "the heap's growth took all of it");
	cr_assert_eq(c2.munmap_calls, c0.munmap_calls, "none of it was unmapped");
	/* half the pages came from the mapping (ASan's shadow adds an eighth) */
	cr_assert_lt(faults, pages * 3 / 4, "faults writing %ld pages of heap blocks: %ld", pages,
	             faults);
	for (int i = 0; i < 16; i++)
		A(free)(blocks[i]);
}

/* A heap growth that faults in at least half the kept mapping's pages at once (more than a
 * chunk): a block of about its size now comes from the heap, and the kept pages would
 * serve no growth before the decay pass. None of the block's pages being resident, the
 * mapping's pages move under its first pages (as many as it has; the rest would be
 * unmapped): the program writes its block on pages it wrote before, with no faults
 * (without it: the mapping unmapped, every page of the block a fault). */
Test(dynamic_threshold, a_block_of_the_kept_mappings_size_from_the_heap_takes_its_pages)
{
	size_t n = 4 << 20;
	struct la_counters c1 = kept_for_the_heaps(n);
	char *q = A(malloc)(n);
	cr_assert_not_null(q);
	cr_assert(heap_registered(q), "a block of its size comes from a heap now");
	struct la_counters c2 = stats();
	cr_assert_eq(c2.direct_cache_bytes, 0, "nothing is kept: %llu bytes",
	             (unsigned long long)c2.direct_cache_bytes);
	cr_assert_eq(c2.munmap_calls, c1.munmap_calls, "the kept mapping was not unmapped");
	block_on_the_kept_pages(q, n);
	A(free)(q);
}

/* A block of n bytes written and freed, then another of its size: false when more than
 * 50 ms passed between the two (the test descheduled: the control thread may have unmapped
 * the first after its wait, 25 us a page, 100 ms at 16 MiB). */
static bool a_block_after_the_free_of_one_is_it(size_t n)
{
	A(malloc_trim)(0);      /* (what the test runner left, and an earlier try's heap) */
	A(free)(A(malloc)(64)); /* the thread's arena and its heap */
	long pages = (long)(n / 4096);
	char *p = A(malloc)(n);
	cr_assert_not_null(p);
	memset(p, 1, n);
	struct la_counters c0 = stats();
	uint64_t t0 = os_now_ns();
	A(free)(p);
	char *q = A(malloc)(n);
	uint64_t t1 = os_now_ns();
	cr_assert_not_null(q);
	struct la_counters c1 = stats();
	if (q != p && t1 - t0 > 50000000u) {
		A(free)(q);
		return false;
	}
	cr_assert_eq(q, p, "the next block of its size is the kept mapping");
	cr_assert_eq(c1.munmap_calls, c0.munmap_calls, "nothing was unmapped");
	cr_assert_eq(c1.mmap_calls, c0.mmap_calls, "nothing was mapped nor moved");
	cr_assert_eq(c1.direct_cache_bytes, 0, "nothing is kept: %llu bytes",
	             (unsigned long long)c1.direct_cache_bytes);
	long f0 = thread_faults();
	memset(q, 2, n);
	long faults = thread_faults() - f0;
	/* (ASan's shadow adds an eighth) */
	cr_assert_lt(faults, pages / 4, "faults writing %ld pages: %ld", pages, faults);
	A(free)(q);
	return true;
}

/* Above 4 MiB, up to glibc's 32 MiB, with the control thread: a mapping whose free raised
 * the threshold past its size is kept a while (25 us a page: 0.1 s for 16 MiB, then the
 * control thread unmaps it), and the next block of about its size is that mapping, as it is:
 * each page faults once over the two blocks, not twice (without it: the mapping unmapped at
 * its free, the next block a heap's, every page of it a fault; mech_bigblock 1 16 6: 8,213
 * faults, 4,117 with it). A test descheduled past the wait tries a larger size. */
Test(dynamic_threshold, a_16_mib_block_after_the_free_of_one_faults_each_page_once)
{
	bool done = false;
	for (size_t mib = 16; mib <= 28 && !done; mib += 4)
		done = a_block_after_the_free_of_one_is_it(mib << 20);
	cr_assert(done, "50 ms passed between the free and the next block each time");
}

/* The memory bound of that keep: a shorter block after the free (20 MiB freed, 8 MiB made)
 * takes the kept mapping's start and the rest is unmapped at once, and a heap that grows
 * by small blocks meanwhile takes the kept pages a chunk at a time: neither holds the kept
 * mapping resident beside new pages until its wait ends (the peak would rise above the
 * freed block's). */
Test(dynamic_threshold, a_shorter_block_after_a_big_free_takes_its_start_the_rest_unmapped)
{
	A(malloc_trim)(0);
	A(free)(A(malloc)(64));
	size_t n = 20 << 20, m = 8 << 20;
	char *p = A(malloc)(n);
	cr_assert_not_null(p);
	memset(p, 1, n);
	uint64_t t0 = os_now_ns();
	A(free)(p);
	struct la_counters c0 = stats();
	char *q = A(malloc)(m);
	struct la_counters c1 = stats();
	if (os_now_ns() - t0 > 50000000u) { /* (descheduled past the wait: nothing to see) */
		A(free)(q);
		return;
	}
	cr_assert_eq(c0.direct_cache_bytes, n, "kept at its free");
	cr_assert_eq(q, p, "the shorter block takes the kept mapping's start");
	cr_assert_eq(c1.direct_cache_bytes, 0, "the rest is not kept: %llu bytes",
	             (unsigned long long)c1.direct_cache_bytes);
	cr_assert_eq(c1.munmap_calls - c0.munmap_calls, 1, "the rest is unmapped at once");
	A(free)(q);
}

Test(dynamic_threshold, small_blocks_after_a_big_free_take_the_kept_pages)
{
	A(malloc_trim)(0);
	A(free)(A(malloc)(64));
	size_t n = 20 << 20;
	char *p = A(malloc)(n);
	cr_assert_not_null(p);
	memset(p, 1, n);
	uint64_t t0 = os_now_ns();
	A(free)(p);
	enum { N = 8192 }; /* 2 MiB of 256-byte blocks */
	static void *blocks[N];
	long f0 = thread_faults();
	for (int i = 0; i < N; i++) {
		blocks[i] = A(malloc)(256);
		cr_assert_not_null(blocks[i]);
		memset(blocks[i], 2, 256);
	}
	long faults = thread_faults() - f0;
	struct la_counters c1 = stats();
	if (os_now_ns() - t0 <= 50000000u) {
		cr_assert_lt(c1.direct_cache_bytes, n,
		             "the heap's growth took kept pages: %llu kept",
		             (unsigned long long)c1.direct_cache_bytes);
		/* its pages are the kept ones, not new pages beside them (ASan's shadow adds an
		 * eighth; a chunk adopted for the next growth instead: about half) */
		cr_assert_lt(faults, 512 / 4, "faults writing 512 pages of small blocks: %ld",
		             faults);
	}
	for (int i = 0; i < N; i++)
		A(free)(blocks[i]);
}

/* The same when a small growth of the heap came between the free and the block (a
 * printf's buffer): it took a chunk of the kept mapping, on whose resident pages the
 * block's run then starts. The rest of the mapping moves under the block's pages that are
 * not resident (without it: unmapped, and every other page of the block a fault). */
Test(dynamic_threshold, a_block_of_the_kept_mappings_size_after_a_small_growth_takes_its_pages)
{
	size_t n = 4 << 20;
	kept_for_the_heaps(n);
	char *small = A(malloc)(4096); /* the heap grows: a chunk of the mapping goes to it */
	cr_assert_not_null(small);
	memset(small, 4, 4096);
	cr_assert_lt(stats().direct_cache_bytes, n, "the small growth took a chunk");
	char *q = A(malloc)(n);
	cr_assert_not_null(q);
	cr_assert(heap_registered(q), "a block of its size comes from a heap now");
	cr_assert_eq(stats().direct_cache_bytes, 0, "nothing is kept: %llu bytes",
	             (unsigned long long)stats().direct_cache_bytes);
	block_on_the_kept_pages(q, n);
	A(free)(q);
	A(free)(small);
}

/* The memory bound: the heaps hold as many free pages as the mapping has (their growth
 * takes those first), so it is unmapped at its free, as before. */
Test(dynamic_threshold, a_mapping_is_unmapped_when_the_heaps_hold_its_size_in_free_pages)
{
	A(malloc_trim)(0); /* (what the test runner left) */
	size_t n = 512 << 10;
	char *p = A(malloc)(n); /* a mapping (the heap holds no free pages yet) */
	cr_assert_not_null(p);
	cr_assert(!heap_registered(p));
	memset(p, 1, n);
	void *live[16], *gone[16];
	for (int i = 0; i < 16; i++) { /* 1 MiB in use, 1 MiB free and resident */
		live[i] = A(malloc)(64 << 10);
		gone[i] = A(malloc)(64 << 10);
		memset(live[i], 1, 64 << 10);
		memset(gone[i], 1, 64 << 10);
	}
	for (int i = 0; i < 16; i++)
		A(free)(gone[i]);
	struct la_counters c0 = stats();
	A(free)(p); /* raises the threshold past 512 KiB */
	struct la_counters c1 = stats();
	cr_assert_eq(c1.munmap_calls - c0.munmap_calls, 1, "the mapping is unmapped");
	cr_assert_eq(c1.direct_cache_bytes, 0, "nothing kept");
	for (int i = 0; i < 16; i++)
		A(free)(live[i]);
}

/* The decay pass unmaps what the heaps did not take of the pages kept for them; a new
 * mapping takes them (cut or grown by mremap: pages the process held before that free),
 * but a calloc only pages that cover it (the grown part would take a memset): shorter
 * ones are unmapped then. */
Test(dynamic_threshold, a_new_mapping_takes_the_pages_kept_for_the_heaps_or_they_go)
{
	A(malloc_trim)(0); /* (what the test runner left) */
	A(free)(A(malloc)(64));
	size_t n = 1 << 20;
	char *p = A(malloc)(n);
	memset(p, 1, n);
	A(free)(p);
	struct la_counters c0 = stats();
	cr_assert_eq(c0.direct_cache_bytes, n, "kept for the heaps");
	direct_decay();
	direct_decay(); /* (one or two periods) */
	struct la_counters c1 = stats();
	cr_assert_eq(c1.direct_cache_bytes, 0, "the decay pass unmapped it");
	cr_assert_eq(c1.munmap_calls - c0.munmap_calls, 1);
	p = A(malloc)(2 * n); /* above the threshold (1 MiB): a mapping */
	memset(p, 1, 2 * n);
	A(free)(p);
	struct la_counters c2 = stats();
	cr_assert_eq(c2.direct_cache_bytes, 2 * n, "kept for the heaps");
	unsigned char *z = A(calloc)(1, 4 * n);
	cr_assert_not_null(z);
	for (size_t i = 0; i < 4 * n; i += 4096)
		cr_assert_eq(z[i] | z[i + 4095], 0, "calloc'd memory reads zero at %zu", i);
	struct la_counters c3 = stats();
	cr_assert_eq(c3.direct_cache_bytes, 0, "calloc did not take the shorter one: unmapped");
	cr_assert_eq(c3.munmap_calls - c2.munmap_calls, 1);
	cr_assert_eq(c3.direct_cache_hits, c2.direct_cache_hits);
	memset(z, 5, 4 * n);
	A(free)(z); /* raises the threshold past 4 MiB: kept */
	struct la_counters c4 = stats();
	cr_assert_eq(c4.direct_cache_bytes, 4 * n, "kept for the heaps");
	char *q = A(malloc)(6 * n); /* a mapping: takes it, grown */
	cr_assert_not_null(q);
	struct la_counters c5 = stats();
	cr_assert_eq(c5.direct_cache_bytes, 0, "taken");
	cr_assert_eq(c5.direct_cache_hits - c4.direct_cache_hits, 1);
	cr_assert_eq(c5.munmap_calls, c4.munmap_calls, "nothing unmapped");
	cr_assert_eq(q[0], 5, "its pages (the old contents)");
	memset(q, 2, 6 * n);
	A(free)(q);
}

Test(dynamic_threshold, an_explicit_threshold_turns_it_off)
{
	cr_assert_eq(A(mallopt)(M_MMAP_THRESHOLD, 256 * 1024), 1);
	void *p = A(malloc)(2 << 20);
	A(free)(p);
	int64_t t = 0, dyn = 1;
	liballoc_get("mmap_threshold", &t);
	liballoc_get("mmap_dynamic", &dyn);
	cr_assert_eq(t, 256 * 1024);
	cr_assert_eq(dyn, 0);
	set("mmap_dynamic", 1);
	p = A(malloc)(2 << 20);
	A(free)(p);
	liballoc_get("mmap_threshold", &t);
	cr_assert_gt(t, 2 << 20, "re-enabled: %lld", (long long)t);
}

/* One hit of the cache of freed mappings between before and after, and no mmap, munmap,
 * mremap or madvise: the cached mapping served the request as it was. */
static void reused_without_a_call(const struct la_counters *before, const struct la_counters *after)
{
	cr_assert_eq(after->direct_cache_hits - before->direct_cache_hits, 1);
	cr_assert_eq(after->mmap_calls + after->munmap_calls + after->madvise_calls,
	             before->mmap_calls + before->munmap_calls + before->madvise_calls,
	             "no system call");
}

Test(mapping_cache, blocks_above_the_ceiling_are_recycled_without_faults)
{
	struct loop a = {40 << 20, 40, 0}, b = {40 << 20, 40, 0};
	struct la_counters before = stats();
	two_threads(&a, &b);
	struct la_counters after = stats();
	uint64_t maps = after.mmap_calls - before.mmap_calls;
	cr_assert_leq(maps, 8, "mmap calls for 80 x 40 MiB: %llu", (unsigned long long)maps);
	cr_assert_geq(after.direct_cache_hits - before.direct_cache_hits, 70);
	long pages = 36L * (40 << 20) / 4096;
	cr_assert_lt(a.faults_after_warmup + b.faults_after_warmup, pages / 100,
	             "faults after warm-up: %ld + %ld", a.faults_after_warmup,
	             b.faults_after_warmup);
	cr_assert_leq(after.direct_cache_bytes, 256u << 20, "bounded by direct_cache_bytes");
}

/* Mappings are recycled from here on: one freed (unmapped: nothing reused mappings yet),
 * then one mapped where it would have served. Returns that one, live (the caller frees it
 * last). */
static void *recycle_mappings(void)
{
	A(free)(A(malloc)(40 << 20));
	return A(malloc)(40 << 20);
}

/* A mapping below glibc's 32 MiB freed while nothing reuses mappings is unmapped at once
 * (it used to wait in the cache until the decay pass) and raises the threshold; a request
 * it would have served maps anew, and from then on freed mappings are cached, until two
 * decay periods pass without reuse or a trim. */
Test(mapping_cache, a_freed_mapping_is_cached_only_once_mappings_are_recycled)
{
	set("decay_ms", 0); /* the passes below are this test's */
	struct la_counters before = stats();
	A(free)(A(malloc)(16 << 20));
	struct la_counters mid = stats();
	cr_assert_eq(mid.direct_cache_bytes, 0, "the first freed mapping was kept");
	cr_assert_geq(mid.munmap_calls - before.munmap_calls, 1, "it was not unmapped");
	char *p = A(malloc)(20 << 20); /* above the raised threshold: a mapping */
	cr_assert(!heap_registered(p));
	A(free)(p);
	cr_assert_eq(stats().direct_cache_bytes, 20u << 20, "recycled: the next one is cached");
	char *q = A(malloc)(20 << 20);
	cr_assert_eq(q, p, "and reused");
	A(free)(q);
	direct_decay();
	direct_decay(); /* two periods without reuse: unmapped, and no longer recycling */
	cr_assert_eq(stats().direct_cache_bytes, 0);
	A(free)(A(malloc)(16 << 20));
	cr_assert_eq(stats().direct_cache_bytes, 0, "cached after two periods without reuse");
	p = A(malloc)(20 << 20); /* the one just freed would have served: recycling again */
	A(free)(p);
	cr_assert_eq(stats().direct_cache_bytes, 20u << 20);
	A(malloc_trim)(0);
	A(free)(A(malloc)(16 << 20));
	cr_assert_eq(stats().direct_cache_bytes, 0, "cached after a trim");
}

/* A mapping just below 32 MiB freed while nothing recycles is unmapped at once, as any
 * below 32 MiB (its length, not a rounded one, decides), and a live mapping counts the
 * pages asked as data, not address space it was rounded to: a block of 4 MiB and a page
 * is 4 MiB and a page in direct_bytes, allocated_bytes and data_resident_bytes. */
Test(mapping_cache, the_length_asked_decides_and_counts)
{
	set("decay_ms", 0);
	set("mmap_dynamic", 0); /* (no threshold raise: both sizes stay mappings) */
	size_t just_below[] = {(32u << 20) - 4096, (30u << 20) + 4096};
	for (unsigned i = 0; i < 2; i++) {
		A(malloc_trim)(0); /* (starts over: the other size would recycle) */
		struct la_counters before = stats();
		char *p = A(malloc)(just_below[i]);
		memset(p, 1, just_below[i]);
		A(free)(p);
		struct la_counters after = stats();
		cr_assert_eq(after.direct_cache_bytes, 0, "%zu bytes freed: kept (%llu cached)",
		             just_below[i], (unsigned long long)after.direct_cache_bytes);
		cr_assert_geq(after.munmap_calls - before.munmap_calls, 1,
		              "%zu bytes freed: not unmapped", just_below[i]);
	}
	A(malloc_trim)(0);
	struct la_counters before = stats();
	size_t n = (4u << 20) + 4096;
	char *b[4];
	for (unsigned i = 0; i < 4; i++)
		b[i] = A(malloc)(n);
	struct la_counters live = stats();
	cr_assert_eq(live.direct_bytes - before.direct_bytes, 4 * n,
	             "direct_bytes rose by %llu for 4 blocks of %zu",
	             (unsigned long long)(live.direct_bytes - before.direct_bytes), n);
	cr_assert_eq(live.data_resident_bytes - before.data_resident_bytes, 4 * n,
	             "data_resident_bytes rose by %llu for 4 blocks of %zu",
	             (unsigned long long)(live.data_resident_bytes - before.data_resident_bytes),
	             n);
	for (unsigned i = 0; i < 4; i++)
		A(free)(b[i]);
}

static long thread_faults(void);

/* From 32 MiB up (no threshold raise sends such a block to the heaps) the first freed
 * mapping is kept on trial: the next block of its size takes it back, no system call, no
 * page faulted in again. */
Test(mapping_cache, a_freed_mapping_from_32_mib_up_is_kept_on_trial_and_taken_back)
{
	set("decay_ms", 0);
	char *p = A(malloc)(40 << 20);
	memset(p, 1, 40 << 20);
	A(free)(p);
	struct la_counters mid = stats();
	cr_assert_eq(mid.direct_cache_bytes, 40u << 20, "kept on trial");
	long faults = thread_faults();
	char *q = A(malloc)(40 << 20);
	memset(q, 2, 40 << 20);
	struct la_counters after = stats();
	cr_assert_eq(q, p, "taken back");
	cr_assert_eq(after.mmap_calls, mid.mmap_calls, "no new mapping");
	cr_assert_eq(after.direct_cache_hits, mid.direct_cache_hits + 1);
	cr_assert_lt(thread_faults() - faults, 100, "its pages were still there: %ld faults",
	             thread_faults() - faults);
	A(free)(q);
	cr_assert_eq(stats().direct_cache_bytes, 40u << 20, "recycled now: cached");
}

/* A mapping on trial leaves the cache when a heap grows into memory it never used: the
 * program builds from its heaps now, and they cannot reuse the mapping's pages. Once
 * mappings are recycled, a heap's growth leaves the cache alone. */
Test(mapping_cache, a_mapping_on_trial_goes_when_a_heap_grows_into_new_memory)
{
	set("decay_ms", 0);
	enum { N = 64 }; /* 4 MiB of 64 KiB blocks: the heap grows */
	static void *blocks[2][N];
	A(free)(A(malloc)(40 << 20));
	struct la_counters mid = stats();
	cr_assert_eq(mid.direct_cache_bytes, 40u << 20, "kept on trial");
	for (int i = 0; i < N; i++)
		memset(blocks[0][i] = A(malloc)(64 << 10), 1, 64 << 10);
	struct la_counters grown = stats();
	cr_assert_eq(grown.direct_cache_bytes, 0, "still cached after the heap grew");
	cr_assert_geq(grown.munmap_calls, mid.munmap_calls + 1, "it was not unmapped");
	/* a request it would have served: mappings are recycled from now on */
	A(free)(A(malloc)(40 << 20));
	cr_assert_eq(stats().direct_cache_bytes, 40u << 20);
	for (int i = 0; i < N; i++)
		memset(blocks[1][i] = A(malloc)(64 << 10), 1, 64 << 10);
	cr_assert_eq(stats().direct_cache_bytes, 40u << 20, "a recycled mapping went with growth");
	for (int k = 0; k < 2; k++)
		for (int i = 0; i < N; i++)
			A(free)(blocks[k][i]);
}

/* A heap grows under its arena's lock, and the fork handler takes the mapping cache's lock
 * before the arenas': a growth that finds the cache's lock held must not wait for it. The
 * mapping on trial then goes at the next request or free of a mapping. */
Test(mapping_cache, a_heap_that_grows_while_the_cache_is_locked_does_not_wait_for_it)
{
	set("decay_ms", 0);
	enum { N = 64 }; /* 4 MiB of 64 KiB blocks (below the mmap threshold): the heap grows */
	static void *blocks[N];
	A(free)(A(malloc)(40 << 20));
	cr_assert_eq(stats().direct_cache_bytes, 40u << 20, "kept on trial");
	direct_fork_prepare(); /* the cache's lock, held as by the fork handler */
	for (int i = 0; i < N; i++)
		memset(blocks[i] = A(malloc)(64 << 10), 1, 64 << 10);
	direct_fork_parent();
	cr_assert_eq(stats().direct_cache_bytes, 40u << 20, "dropped without the lock");
	A(free)(A(malloc)(256 << 10)); /* a mapping's request and free */
	/* (the 256 KiB one may be kept for the heaps' growth: direct_free) */
	cr_assert_leq(stats().direct_cache_bytes, 256u << 10,
	              "still cached after the next request");
	for (int i = 0; i < N; i++)
		A(free)(blocks[i]);
}

Test(mapping_cache, trim_empties_it)
{
	void *r = recycle_mappings();
	void *p = A(malloc)(40 << 20);
	memset(p, 1, 40 << 20);
	A(free)(p);
	cr_assert_geq(stats().direct_cache_bytes, 40u << 20);
	A(malloc_trim)(0);
	cr_assert_eq(stats().direct_cache_bytes, 0);
	A(free)(r);
}

/* The ceiling of the dynamic threshold is 4 MiB: a freed block below it raises the
 * threshold (its size now comes from heaps). Until mappings are recycled, so does a freed
 * one of up to 32 MiB (glibc's ceiling); once they are, the threshold comes back to 4 MiB
 * and blocks from there up keep mappings of their own, recycled through the cache. */
Test(dynamic_threshold, blocks_from_the_4mb_ceiling_up_keep_mappings_once_they_are_recycled)
{
	int64_t max = 0, t0 = 0, t = 0;
	liballoc_get("mmap_threshold_max", &max);
	cr_assert_eq(max, 4 << 20);
	liballoc_get("mmap_threshold", &t0);
	cr_assert_lt(t0, 3 << 20);
	A(free)(A(malloc)(3 << 20));
	liballoc_get("mmap_threshold", &t);
	cr_assert_gt(t, 3 << 20, "a 3 MiB mapping raised it: %lld", (long long)t);
	A(free)(A(malloc)(16 << 20));
	liballoc_get("mmap_threshold", &t);
	cr_assert_gt(t, 16 << 20, "a 16 MiB mapping, none recycled yet: %lld", (long long)t);
	/* (kept a while for the next block of its size or shorter, or the heaps' growth:
	 * a_16_mib_block_after_the_free_..., a_shorter_block_after_a_big_free_...) */
	cr_assert_leq(stats().direct_cache_bytes, 16u << 20, "not cached for mappings");
	void *p = A(malloc)(12 << 20);
	cr_assert_not_null(p);
	A(free)(p);
	void *r = recycle_mappings(); /* 40 MiB: above 32 MiB, raises nothing */
	liballoc_get("mmap_threshold", &t);
	cr_assert_eq(t, 4 << 20, "back at the ceiling once recycled: %lld", (long long)t);
	/* 24 MiB: more than any resident free run the 12 MiB block left */
	A(free)(A(malloc)(24 << 20));
	liballoc_get("mmap_threshold", &t);
	cr_assert_eq(t, 4 << 20, "a 24 MiB mapping raised it to %lld", (long long)t);
	cr_assert_geq(stats().direct_cache_bytes, 24u << 20, "it went to the mapping cache");
	uint64_t direct = stats().direct_mappings;
	p = A(malloc)(24 << 20);
	cr_assert_eq(stats().direct_mappings, direct + 1, "the next 24 MiB block is a mapping");
	A(free)(p);
	A(free)(r);
}

/* Allocates `want` bytes (above the threshold) and writes them all: the block must come
 * from a heap, with no mapping made; *faults gets this thread's faults in doing so. */
static char *heap_take_written(size_t want, long *faults)
{
	struct la_counters before = stats();
	long f0 = thread_faults();
	char *q = A(malloc)(want);
	memset(q, 2, want);
	*faults = thread_faults() - f0;
	struct la_counters after = stats();
	cr_assert(heap_registered(q), "the block came from a heap");
	cr_assert_eq(after.mmap_calls, before.mmap_calls, "no mapping was made");
	cr_assert_eq(after.direct_mappings, before.direct_mappings);
	return q;
}

/* Pages a heap holds resident and free come before a new mapping: a request at or above
 * the mmap threshold that fits in them takes them (no system call, nothing faulted in),
 * where a mapping would fault in as many fresh pages while those stayed resident. */
Test(dynamic_threshold, a_request_above_it_takes_resident_free_heap_pages_first)
{
	set("mmap_threshold", 256 << 10); /* fixed: the frees below do not move it */
	arena_large_grid = 0; /* the blocks side by side: on the grid (up to 64 pages) their
	                       * first 8 would leave 14 pages unwritten after each, until the
	                       * probes turn it off (large_grid, blocks_written_whole_...) */
	enum { N = 8, SIZE = 200 << 10 };
	char *p[N];
	for (int i = 0; i < N; i++) {
		p[i] = A(malloc)(SIZE);
		cr_assert(heap_registered(p[i]), "a block below the threshold is a heap's");
		memset(p[i], 1, SIZE);
	}
	char *guard = A(malloc)(SIZE); /* in use after them */
	for (int i = 0; i < N; i++)
		A(free)(p[i]); /* the last one stays parked; the others make one free run */
	long faults;
	/* above the threshold, within the run of 7 x 200 KiB */
	char *q = heap_take_written(1 << 20, &faults);
	cr_assert_lt(faults, 8, "its pages were resident: %ld faults", faults);
	A(free)(q);
	A(free)(guard);
}

/* A run of free heap pages partly resident serves such a request too, when at least half
 * of its window is: the program's freed pages first, a new mapping (which would fault in
 * every page) only when the heap has no such window. CPython's 580 KiB dict tables found
 * no run all resident and mapped 145 fresh pages each. */
Test(dynamic_threshold, a_request_above_it_takes_a_heap_run_half_resident)
{
	set("mmap_threshold", 256 << 10); /* fixed: the frees below do not move it */
	enum { N = 8, SIZE = 200 << 10, PAGES = 512 };
	char *y = A(malloc)(100 << 10), *p[N];
	for (int i = 0; i < N; i++) {
		p[i] = A(malloc)(SIZE);
		cr_assert(heap_registered(p[i]), "a block below the threshold is a heap's");
		memset(p[i], 1, SIZE);
	}
	for (int i = 0; i < N; i++)
		A(free)(p[i]); /* the last one stays parked */
	/* y parked in its place: the 8 blocks' pages make one free run with the heap's
	 * untouched top */
	A(free)(y);
	struct la_counters before = stats();
	char *q = A(malloc)((size_t)PAGES << LA_PAGE_SHIFT);
	struct la_counters after = stats();
	cr_assert(heap_registered(q), "the block came from a heap");
	cr_assert_eq(after.mmap_calls, before.mmap_calls, "no mapping was made");
	cr_assert_eq(after.direct_mappings, before.direct_mappings);
	/* What the kernel holds of it before the program writes: the 8 blocks' 400 written
	 * pages at least (on the grid of 16 pages they lie 64 pages apart, 14 pages never
	 * written after each, which populate-ahead may have faulted in or not: blocks that may
	 * go on the grid are populated ahead only once its probes say they are written whole) */
	long res = (long)resident_pages((void *)((uintptr_t)q & ~(uintptr_t)(LA_PAGE - 1)),
	                                (size_t)PAGES << LA_PAGE_SHIFT);
	cr_assert_geq(res, (long)N * SIZE / LA_PAGE, "%ld of its %d pages resident", res, PAGES);
	long f0 = thread_faults();
	memset(q, 2, (size_t)PAGES << LA_PAGE_SHIFT);
	long faults = thread_faults() - f0;
	/* only the pages not resident fault (the block's last page, beyond the 512 as it
	 * starts LA_COLOUR bytes into its first, and ASan's shadow, an eighth, aside) */
#if defined(__SANITIZE_ADDRESS__)
	long shadow = PAGES / 8;
#else
	long shadow = 0;
#endif
	cr_assert_lt(faults, PAGES - res + 8 + shadow,
	             "%ld faults writing a block of which %ld of %d pages were resident", faults,
	             res, PAGES);
	A(free)(q);
}

static size_t resident_pages(const void *p, size_t len)
{
	unsigned char vec[8192];
	cr_assert_leq(len / 4096, sizeof(vec));
	cr_assert_eq(mincore((void *)p, len, vec), 0);
	size_t n = 0;
	for (size_t i = 0; i < len / 4096; i++)
		n += vec[i] & 1;
	return n;
}

/* A block of its own mapping grown by realloc 4 KiB at a time from 256 KiB to 4 MiB: */
Test(direct_realloc, a_growing_mapping_is_remapped_a_logarithmic_number_of_times)
{
	size_t from = 256 << 10, to = 4 << 20;
	/* (the test runner's own blocks may have left a heap free pages of a mapping it freed,
	 * which a request above the threshold would take: direct_free) */
	A(malloc_trim)(0);
	unsigned char *p = A(malloc)(from);
	cr_assert(!heap_registered(p), "a mapping of its own");
	p[from - 1] = 1;
	uint64_t calls = stats().mmap_calls;
	for (size_t n = from + 4096; n <= to; n += 4096) {
		p = A(realloc)(p, n);
		cr_assert_not_null(p);
		p[n - 1] = (unsigned char)(n >> 12);
	}
	uint64_t remaps = stats().mmap_calls - calls;
	/* a remap at every page: 960; with a quarter more each time, about 13 (a growth that
	 * moves with room after it takes 3 calls: the try in place, the move with its room and
	 * the room's unmapping; direct.c, grow_with_room) */
	cr_assert_leq(remaps, 24, "%llu remaps", (unsigned long long)remaps);
	for (size_t n = from + 4096; n <= to; n += 4096)
		cr_assert_eq(p[n - 1], (unsigned char)(n >> 12), "byte %zu", n - 1);
	size_t usable = A(malloc_usable_size)(p);
	cr_assert_geq(usable, to);
	/* the slack is address space: only the pages written are resident */
	cr_assert_leq(resident_pages(p, la_align_up(usable, 4096)), to / 4096);
	A(free)(p);
	/* the dynamic threshold goes past the largest size asked, not past the slack */
	int64_t t = 0;
	liballoc_get("mmap_threshold", &t);
	cr_assert_eq(t, (int64_t)to + 4096, "threshold %lld", (long long)t);
}

/* A mapping realloc makes for a block it grows past the threshold has the address space
 * after it left free (direct.c, room_after): its growths by a quarter more stay where they
 * are, up to twice its length, though other mappings were made after it (the kernel puts a
 * new mapping right below the last one: without the room the first growth moved it, its
 * pages with it: on a shadow-paged guest ~7 us each at their next touch). A growth beyond
 * the room moves it where it has room again, and the next one stays in place. */
Test(direct_realloc, a_mapping_made_for_a_growing_block_grows_in_place_into_its_room)
{
	A(malloc_trim)(0); /* no heap pages a request above the threshold would take */
	size_t n = 64 << 10;
	unsigned char *p = A(malloc)(n);
	cr_assert(heap_registered(p), "a heap block first");
	memset(p, 3, n);
	p = A(realloc)(p, 4 * n); /* past the threshold (128 KiB): a mapping, a quarter more */
	cr_assert(!heap_registered(p), "a mapping of its own");
	size_t len = A(malloc_usable_size)(p);
	memset(p + n, 4, 3 * n);
	void *other[4]; /* mappings made after it (longer than its room: below it) */
	for (int i = 0; i < 4; i++) {
		other[i] = A(malloc)(3 * len);
		cr_assert(!heap_registered(other[i]));
	}
	unsigned char *was = p;
	size_t size = 4 * n;
	uint64_t calls = stats().mmap_calls;
	unsigned grows = 0;
	while ((size + size / 4) / 4 * 5 <= 2 * len) { /* (with its quarter more) */
		size += size / 4;
		p = A(realloc)(p, size);
		cr_assert_eq(p, was, "moved at %zu bytes, its first mapping %zu bytes", size, len);
		p[size - 1] = 5;
		grows++;
	}
	cr_assert_geq(grows, 2);
	cr_assert_leq(stats().mmap_calls - calls, grows, "one mremap a growth at most");
	cr_assert_eq(p[n - 1], 3);
	cr_assert_eq(p[4 * n - 1], 4);
	/* beyond: moved once, with room again: the try in place, one mremap to its length and
	 * the room (no range of the kernel's choosing mapped first and moved into), the room's
	 * unmapping */
	size = 3 * len;
	struct la_counters before = stats();
	p = A(realloc)(p, size);
	struct la_counters after = stats();
	cr_assert_neq(p, was, "beyond its room it moves");
	cr_assert_eq(after.mmap_calls - before.mmap_calls, 2, "%llu mmap/mremap calls",
	             (unsigned long long)(after.mmap_calls - before.mmap_calls));
	cr_assert_eq(after.munmap_calls - before.munmap_calls, 1);
	was = p;
	for (int i = 0; i < 2; i++) {
		size += size / 4;
		p = A(realloc)(p, size);
		cr_assert_eq(p, was, "moved again at %zu bytes", size);
	}
	cr_assert_eq(p[n - 1], 3);
	cr_assert_eq(p[4 * n - 1], 4);
	for (int i = 0; i < 4; i++)
		A(free)(other[i]);
	A(free)(p);
}

Test(direct_realloc, a_shrink_by_less_than_a_quarter_keeps_the_mapping)
{
	size_t n = 1 << 20;
	unsigned char *p = A(malloc)(n);
	cr_assert(!heap_registered(p), "a mapping of its own");
	memset(p, 7, n);
	uint64_t calls = stats().mmap_calls;
	cr_assert_eq(A(realloc)(p, n - (200 << 10)), p);
	cr_assert_eq(stats().mmap_calls, calls, "no system call");
	cr_assert_geq(A(malloc_usable_size)(p), n);
	unsigned char *q = A(realloc)(p, n / 2);
	cr_assert_eq(stats().mmap_calls, calls + 1, "a shrink by half remaps");
	cr_assert_eq(A(malloc_usable_size)(q), n / 2);
	cr_assert_eq(q[n / 2 - 1], 7);
	A(free)(q);
}

/* A live mapping that has the room keeps its place after the threshold rose past the size
 * asked (another mapping's free): new blocks of that size come from the heaps, this one is
 * not copied into one (a string builder's buffer, growing while a larger one was freed) */
Test(direct_realloc, a_mapping_with_room_keeps_its_place_below_a_risen_threshold)
{
	size_t n = 256 << 10;
	A(malloc_trim)(0); /* no heap pages a request above the threshold would take */
	unsigned char *p = A(malloc)(n);
	cr_assert(!heap_registered(p), "a mapping of its own");
	p = A(realloc)(p, n + 4096); /* remapped with a quarter more */
	cr_assert(!heap_registered(p), "still a mapping");
	memset(p, 5, n + 4096);
	A(free)(A(malloc)(1 << 20)); /* its free raises the threshold past 1 MiB */
	int64_t t = 0;
	liballoc_get("mmap_threshold", &t);
	cr_assert_gt(t, (int64_t)(n + 8192), "threshold %lld", (long long)t);
	uint64_t calls = stats().mmap_calls;
	unsigned char *q = A(realloc)(p, n + 8192);
	cr_assert_eq(q, p, "kept its place");
	cr_assert_eq(stats().mmap_calls, calls, "no system call");
	cr_assert_eq(q[n + 4095], 5);
	/* beyond its room it goes where blocks of its size go now: a heap */
	q = A(realloc)(q, 2 * n);
	cr_assert(heap_registered(q), "moved to a heap");
	cr_assert_eq(q[n + 4095], 5);
	A(free)(q);
}

/* Three buffers grown by realloc past the threshold (mappings of their own, grown by
 * mremap) and freed: the first one's free raises the threshold past their size, the other
 * two (buffers realloc grew, freed below the risen threshold) are kept where they are for
 * the heaps, not moved into one (mremap: on a shadow-paged guest a moved page costs ~7 us
 * at its next touch, bench/README: realloc-growth). Their addresses and lengths in kept[],
 * klen[]; the counters after the frees. */
static struct la_counters two_grown_buffers_kept(unsigned char **kept, size_t *klen, size_t *bigp)
{
	unsigned char *b[3];
	size_t big = grown_past_threshold(b);
	*bigp = big;
	struct la_counters c0 = stats();
	for (int i = 0; i < 2; i++) {
		kept[i] = b[i + 1];
		klen[i] = A(malloc_usable_size)(b[i + 1]);
		A(free)(b[i + 1]);
	}
	struct la_counters c1 = stats();
	cr_assert_eq(c1.mmap_calls, c0.mmap_calls, "not moved into a heap (no mremap)");
	cr_assert_eq(c1.munmap_calls, c0.munmap_calls, "not unmapped");
	cr_assert_eq(c1.direct_cache_bytes - c0.direct_cache_bytes, klen[0] + klen[1],
	             "kept: %llu bytes cached",
	             (unsigned long long)(c1.direct_cache_bytes - c0.direct_cache_bytes));
	return c1;
}

/* A small block realloc moves to a size whose quarter more is just over half a kept
 * buffer's length: realloc_slow looks at the kept ones before a heap. */
static unsigned char *moved_to_a_kept_one(unsigned char **kept, const size_t *klen)
{
	unsigned char *c = A(malloc)(64);
	cr_assert_not_null(c);
	memset(c, 1, 64);
	size_t n = LA_MAX(klen[0], klen[1]) * 2 / 5 + 4096;
	c = A(realloc)(c, n);
	cr_assert_not_null(c);
	cr_assert(c == kept[0] || c == kept[1], "moved to %p, the kept ones at %p and %p",
	          (void *)c, (void *)kept[0], (void *)kept[1]);
	cr_assert_eq(c[63], 1);
	return c;
}

/* The next buffer realloc moves out of the heaps to about half a kept one's size takes
 * its pages where they are and grows on into them in place: no system call, its pages
 * written before. (Without it the kept pages were moved into a heap at their free, and
 * this buffer went to a heap.) */
Test(direct_realloc, a_freed_grown_buffer_is_taken_in_place_by_the_next_growing_one)
{
	size_t big;
	unsigned char *kept[2];
	size_t klen[2];
	two_grown_buffers_kept(kept, klen, &big);
	unsigned char *c = moved_to_a_kept_one(kept, klen);
	unsigned char *was = c;
	size_t from = la_align_up(LA_MAX(klen[0], klen[1]) * 2 / 5 + 4096, 4096); /* its size */
	struct la_counters c2 = stats();
	long f0 = thread_faults();
	grow_in_turns(&c, 1, from, big);
	long faults = thread_faults() - f0;
	struct la_counters c3 = stats();
	cr_assert_eq(c, was, "grew on in place");
	cr_assert_eq(c3.mmap_calls, c2.mmap_calls, "no mmap or mremap: %llu",
	             (unsigned long long)(c3.mmap_calls - c2.mmap_calls));
	cr_assert_eq(c3.munmap_calls, c2.munmap_calls);
	for (size_t o = from + 4096; o <= big; o += 4096)
		cr_assert_eq(c[o - 1], (unsigned char)(o >> 12), "byte %zu", o - 1);
	/* its pages were written before (ASan's shadow adds an eighth) */
	long pages = (long)((big - from) / 4096);
	cr_assert_lt(faults, pages / 4 + 8, "faults writing %ld pages: %ld", pages, faults);
	A(free)(c);
}

/* A buffer that takes the start of a kept one and stops growing leaves the rest kept, and
 * a heap's growth takes it (its first pages under the growth's pages that are not
 * resident, the rest as free resident pages): the blocks the program makes next are
 * written on those pages, not on new ones, and none of them is unmapped. */
Test(direct_realloc, what_a_held_buffer_left_of_a_kept_one_serves_the_heaps_growth)
{
	size_t big;
	unsigned char *kept[2];
	size_t klen[2];
	struct la_counters c1 = two_grown_buffers_kept(kept, klen, &big);
	unsigned char *c = moved_to_a_kept_one(kept, klen);
	struct la_counters c2 = stats();
	cr_assert_gt(c2.direct_cache_bytes, 0, "the rest of them is kept");
	cr_assert_lt(c2.direct_cache_bytes, c1.direct_cache_bytes);
	/* small blocks: the heap grows past every free resident page it holds and the kept
	 * ones, by 1 MiB */
	size_t want = (size_t)c2.free_resident_bytes + (1 << 20);
	void **x = A(malloc)(want / 1024 * sizeof(void *));
	cr_assert_not_null(x);
	long f0 = thread_faults();
	for (size_t i = 0; i < want / 1024; i++) {
		x[i] = A(malloc)(1024);
		cr_assert_not_null(x[i]);
		memset(x[i], 9, 1024);
	}
	long faults = thread_faults() - f0;
	struct la_counters c3 = stats();
	cr_assert_eq(c3.direct_cache_bytes, 0, "the heap's growth took it all: %llu bytes left",
	             (unsigned long long)c3.direct_cache_bytes);
	cr_assert_eq(c3.munmap_calls, c2.munmap_calls, "none of it unmapped");
	long pages = (long)(want / 4096), fresh = (long)((1 << 20) / 4096);
	/* (ASan's shadow adds an eighth) */
	cr_assert_lt(faults, fresh + pages / 8 + 32,
	             "faults writing %ld pages, %ld of them new: %ld", pages, fresh, faults);
	for (size_t i = 0; i < want / 1024; i++)
		A(free)(x[i]);
	A(free)(x);
	A(free)(c);
}

/* ---- the table of direct mappings, read without its lock ------------------------------ */

/* realloc and malloc_usable_size look a mapping up without the lock (direct_keeps,
 * direct_usable), so a table a rehash replaces may be read after it: it stays mapped,
 * purged (a lookup there finds nothing and takes the lock). Unmapped, such a lookup
 * faulted. */
static const size_t table_test_size = 132 << 10;

static void pin_mappings(void)
{
	A(malloc_trim)(0); /* no heap pages a request above the threshold would take */
	set("mmap_threshold", 128 << 10); /* pinned: no free raises it */
	set("direct_cache_bytes", 0);     /* each free unmaps: new addresses, new slots */
}

static bool mapped(const void *p)
{
	unsigned char v;
	return mincore((void *)((uintptr_t)p & ~(uintptr_t)4095), 4096, &v) == 0;
}

Test(direct_table, a_table_replaced_by_a_rehash_stays_mapped_and_reads_empty)
{
	pin_mappings();
	enum { N = 400 };
	static char *p[N];
	p[0] = A(malloc)(table_test_size);
	size_t slots0 = 0, slots1 = 0;
	const void *t0 = direct_table(&slots0), *t1 = t0;
	cr_assert_not_null(t0);
	int n = 1;
	for (; n < N && t1 == t0; n++) {
		p[n] = A(malloc)(table_test_size);
		cr_assert(!heap_registered(p[n]), "a mapping of its own");
		p[n][0] = (char)n;
		t1 = direct_table(&slots1);
	}
	cr_assert_neq(t1, t0, "%d mappings and no rehash", n);
	cr_assert_gt(slots1, slots0);
	cr_assert(mapped(t0), "the replaced table is still mapped");
	const unsigned char *b = t0;
	for (size_t i = 0; i < slots0 * 32; i++) /* (32 bytes a slot) */
		cr_assert_eq(b[i], 0, "byte %zu of the replaced table", i);
	for (int i = 0; i < n; i++) {
		cr_assert_geq(A(malloc_usable_size)(p[i]), table_test_size);
		cr_assert_eq(A(realloc)(p[i], table_test_size - 100), p[i]);
		A(free)(p[i]);
	}
}

/* The first table is a page of the library's own memory, purged when the table first
 * grows (past 48 mappings): that page is the table's alone. The freed ring beside it
 * (which tells a double free of an unmapped block from a wild pointer) and the first
 * cached mappings were purged with it: after the growth, the block freed before read as
 * never allocated. */
Test(direct_table, the_first_tables_retirement_purges_nothing_beside_it)
{
	set("mmap_threshold", 256 << 10); /* (fixed: the free below raises nothing) */
	char *p = A(malloc)(1 << 20);
	cr_assert(!heap_registered(p), "a mapping of its own");
	A(free)(p); /* unmapped: nothing recycles mappings yet */
	/* its range held, so that no mapping below takes its address */
	void *hold = mmap(p, 1 << 20, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
	                  -1, 0);
	cr_assert_eq(hold, (void *)p, "the freed range held");
	cr_assert_eq(direct_free(p), 1, "known as freed");
	size_t slots0 = 0;
	direct_table(&slots0);
	void *m[64];
	for (int i = 0; i < 64; i++) {
		m[i] = A(malloc)(512 << 10);
		cr_assert(m[i] && !heap_registered(m[i]), "mapping %d", i);
	}
	size_t slots1 = 0;
	direct_table(&slots1);
	cr_assert_eq(slots0, 64, "the first table: %zu slots", slots0);
	cr_assert_gt(slots1, slots0, "the table grew: %zu slots", slots1);
	cr_assert_eq(direct_free(p), 1, "still known as freed after the growth");
	for (int i = 0; i < 64; i++)
		A(free)(m[i]);
	munmap(hold, 1 << 20);
}

/* A rehash at the same size (the table full of tombstones) takes the table retired last:
 * two tables take turns, however many rehashes (one kept mapped for each would add up
 * without bound). */
Test(direct_table, rehashes_at_one_size_take_turns_between_two_tables)
{
	pin_mappings();
	/* fewer than a quarter of the first table's 64 slots live at once: every rehash is
	 * at its size */
	enum { N = 12 };
	char *p[N];
	const void *seen[64];
	int nseen = 0, changes = 0;
	size_t slots = 0, slots0 = 0;
	const void *last = NULL;
	uint64_t s = 1;
	for (int round = 0; round < 200; round++) {
		for (int i = 0; i < N; i++) {
			s = s * 6364136223846793005ull + 1442695040888963407ull;
			p[i] = A(malloc)(table_test_size + (size_t)(s >> 44)); /* up to +1 MiB */
			cr_assert(!heap_registered(p[i]), "a mapping of its own");
		}
		for (int i = 0; i < N; i++)
			A(free)(p[i]);
		const void *t = direct_table(&slots);
		if (!slots0)
			slots0 = slots;
		cr_assert_eq(slots, slots0, "the table stays at one size");
		if (t != last) {
			changes += last != NULL;
			bool known = false;
			for (int j = 0; j < nseen; j++)
				known |= seen[j] == t;
			if (!known && nseen < 64)
				seen[nseen++] = t;
			last = t;
		}
	}
	cr_assert_geq(changes, 4, "%d rehashes", changes);
	cr_assert_leq(nseen, 2, "%d tables for %d rehashes", nseen, changes);
	for (int j = 0; j < nseen; j++)
		cr_assert(mapped(seen[j]), "table %d mapped", j);
}

Test(mapping_cache, a_shorter_request_takes_a_cached_mapping_whole_without_a_system_call)
{
	set("decay_ms", 0);
	void *r = recycle_mappings();
	char *p = A(malloc)(20 << 20);
	memset(p, 1, 20 << 20);
	A(free)(p);
	struct la_counters before = stats();
	long f0 = thread_faults();
	char *q = A(malloc)(10 << 20);
	memset(q, 2, 10 << 20);
	long faults = thread_faults() - f0;
	struct la_counters after = stats();
	cr_assert_eq(q, p, "the cached mapping was reused");
	reused_without_a_call(&before, &after);
	cr_assert_lt(faults, 16, "its pages were resident: %ld faults", faults);
	cr_assert_geq(A(malloc_usable_size)(q), 20u << 20, "handed out whole");
	cr_assert_eq(after.direct_cache_bytes, 0);
	A(free)(q);
	A(free)(r);
}

/* The address-space limit (RLIMIT_AS) set to VmSize plus margin bytes; returns the old one. */
static struct rlimit limit_address_space(size_t margin)
{
	struct rlimit old;
	cr_assert_eq(getrlimit(RLIMIT_AS, &old), 0);
	size_t vm = (size_t)status_kib("VmSize:") << 10;
	cr_assert_gt(vm, 0);
	cr_assert_eq(setrlimit(RLIMIT_AS, &(struct rlimit){vm + margin, old.rlim_max}), 0);
	return old;
}

/* The room a cached mapping grows with is address space only: where it is refused
 * (RLIMIT_AS), it is grown to the size asked, and the malloc that succeeds leaves errno as
 * it was (the refused try set ENOMEM). A new mapping, of the size asked, keeps errno too. */
Test(mapping_cache, the_room_refused_maps_the_size_asked_and_keeps_errno)
{
	set("decay_ms", 0);
	void *r = recycle_mappings(); /* the largest request lately: 40 MiB */
	struct rlimit old = limit_address_space(12 << 20);
	errno = 4242;
	char *p = A(malloc)(10 << 20);
	int err = errno;
	cr_assert_eq(setrlimit(RLIMIT_AS, &old), 0);
	cr_assert_not_null(p);
	cr_assert_eq(err, 4242, "errno %d after a malloc that succeeded", err);
	cr_assert_eq(A(malloc_usable_size)(p), 10u << 20);
	memset(p, 1, 10 << 20);
	A(free)(p); /* cached: mappings are recycled */
	cr_assert_eq(stats().direct_cache_bytes, 10u << 20);
	old = limit_address_space(6 << 20);
	struct la_counters before = stats();
	errno = 4242;
	char *q = A(malloc)(14 << 20); /* the cached 10 MiB grown: 17.5 MiB refused, 14 */
	err = errno;
	struct la_counters after = stats();
	cr_assert_eq(setrlimit(RLIMIT_AS, &old), 0);
	cr_assert_not_null(q);
	cr_assert_eq(after.direct_cache_hits - before.direct_cache_hits, 1);
	cr_assert_eq(err, 4242, "errno %d after a malloc that succeeded", err);
	cr_assert_eq(A(malloc_usable_size)(q), 14u << 20);
	cr_assert_eq(q[(10 << 20) - 1], 1, "its pages came along");
	A(free)(q);
	A(free)(r);
}

/* The room after a growing block's mapping is address space only: where the process may
 * not map it (RLIMIT_AS), the block's move past the threshold and its next growth take
 * the size asked, as before the room, with its bytes and with errno as it was. */
Test(direct_realloc, a_growing_block_whose_room_is_refused_still_grows)
{
	A(malloc_trim)(0);
	size_t n = 64 << 10;
	unsigned char *p = A(malloc)(n);
	memset(p, 3, n);
	/* its mapping: 320 KiB (256 KiB and a quarter), with room 640 KiB: refused */
	struct rlimit old = limit_address_space(448 << 10);
	struct la_counters before = stats();
	errno = 4242;
	p = A(realloc)(p, 4 * n);
	int err = errno;
	struct la_counters after = stats();
	cr_assert_eq(setrlimit(RLIMIT_AS, &old), 0);
	cr_assert_eq(after.munmap_calls, before.munmap_calls, "no room was mapped (and unmapped)");
	cr_assert_not_null(p, "refused: %s", strerror(err));
	cr_assert_eq(err, 4242, "errno %d after a realloc that succeeded", err);
	cr_assert(!heap_registered(p), "a mapping of its own");
	cr_assert_eq(p[n - 1], 3);
	memset(p + n, 4, 3 * n);
	/* the next growth (to 384 KiB, 480 with its quarter): 160 KiB more fit, room does not */
	old = limit_address_space(256 << 10);
	before = stats();
	errno = 4242;
	unsigned char *q = A(realloc)(p, 6 * n);
	err = errno;
	after = stats();
	cr_assert_eq(setrlimit(RLIMIT_AS, &old), 0);
	cr_assert_eq(after.munmap_calls, before.munmap_calls, "no room was mapped (and unmapped)");
	cr_assert_not_null(q, "refused: %s", strerror(err));
	cr_assert_eq(err, 4242, "errno %d after a realloc that succeeded", err);
	cr_assert_eq(q[n - 1], 3);
	cr_assert_eq(q[4 * n - 1], 4);
	q[6 * n - 1] = 5;
	A(free)(q);
}

/* A growth of a block's mapping whose quarter more the process may not map (RLIMIT_AS)
 * takes the size asked, and the realloc that succeeds leaves errno as it was (the refused
 * tries set ENOMEM). */
Test(direct_realloc, a_growth_whose_quarter_more_is_refused_keeps_errno)
{
	A(malloc_trim)(0);
	unsigned char *p = A(malloc)(1 << 20);
	cr_assert(!heap_registered(p), "a mapping of its own");
	size_t old = A(malloc_usable_size)(p);
	memset(p, 3, old);
	/* 64 KiB more fit; its quarter more (over 300 KiB), or room, do not */
	struct rlimit was = limit_address_space(128 << 10);
	errno = 4242;
	unsigned char *q = A(realloc)(p, old + (64 << 10));
	int err = errno;
	cr_assert_eq(setrlimit(RLIMIT_AS, &was), 0);
	cr_assert_not_null(q, "refused: %s", strerror(err));
	cr_assert_eq(err, 4242, "errno %d after a realloc that succeeded", err);
	cr_assert(!heap_registered(q), "a mapping of its own");
	cr_assert_eq(A(malloc_usable_size)(q), old + (64 << 10), "the size asked");
	cr_assert_eq(q[old - 1], 3);
	q[old + (64 << 10) - 1] = 4;
	A(free)(q);
}

Test(mapping_cache, a_longer_request_grows_a_cached_mapping_with_its_pages)
{
	set("decay_ms", 0);
	void *r = recycle_mappings();
	char *p = A(malloc)(10 << 20);
	memset(p, 1, 10 << 20);
	A(free)(p);
	struct la_counters before = stats();
	char *q = A(malloc)(16 << 20);
	/* mincore, not page faults: a sanitizer's shadow of a mapping that moved faults anew */
	size_t came = resident_pages(q, 10 << 20);
	memset(q, 2, 16 << 20);
	struct la_counters after = stats();
	cr_assert_eq(after.direct_cache_hits - before.direct_cache_hits, 1);
	cr_assert_eq(after.mmap_calls - before.mmap_calls, 1, "one mremap");
	cr_assert_eq(after.munmap_calls, before.munmap_calls);
	cr_assert_eq(came, 2560, "the first 10 MiB came along resident: %zu pages", came);
	/* 16 MiB and a quarter more (the largest request lately, 40 MiB, is further) */
	cr_assert_eq(after.address_space_bytes - before.address_space_bytes, 10u << 20);
	cr_assert_geq(A(malloc_usable_size)(q), 20u << 20, "grown with a quarter more");
	A(free)(q);
	A(free)(r);
}

/* The address space right after mapping p taken (unless it already is), so that a growth of
 * p has to move it: the page taken, or MAP_FAILED; let_go_of gives it back. */
static void *take_the_page_after(char *p)
{
	return mmap(p + A(malloc_usable_size)(p), 4096, PROT_NONE,
	            MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
}

static void let_go_of(void *page)
{
	if (page != MAP_FAILED)
		munmap(page, 4096);
}

/* A mapping the cache may grow (from the ceiling up) starts on a page table's 2 MiB
 * boundary, with the length asked, and a growth that has to move it moves it to such a
 * boundary too (the kernel moves whole page tables then, not every page's entry). The
 * address space counted is the kernel's (VmSize) for both, and the length is the size asked
 * (and the quarter more of a growth) in whole pages: nothing is rounded to whole tables.
 * Not where THP is "always": its first 2 MiB would be one huge page. */
Test(mapping_cache, mappings_above_the_ceiling_start_on_a_page_tables_boundary_and_move_so)
{
	if (os_thp_pmd_always())
		cr_skip_test("THP always: mappings are placed where the kernel puts them");
	set("decay_ms", 0);
	void *r = recycle_mappings(); /* the largest request lately: 40 MiB */
	const size_t table = 2 << 20;
	struct la_counters before = stats();
	long vm = status_kib("VmSize:");
	char *p = A(malloc)((10 << 20) + 12345);
	long vm_p = status_kib("VmSize:");
	struct la_counters mid = stats();
	cr_assert_eq((uintptr_t)p % table, 0, "not on a table's boundary: %p", (void *)p);
	cr_assert_eq(A(malloc_usable_size)(p), (10u << 20) + 16384, "the length asked, in pages");
	cr_assert_eq(mid.address_space_bytes - before.address_space_bytes, (10u << 20) + 16384);
	cr_assert_eq((vm_p - vm) << 10, (10 << 20) + 16384, "VmSize rose by %ld KiB", vm_p - vm);
	memset(p, 1, 10 << 20);
	void *block = take_the_page_after(p);
	A(free)(p);
	before = stats();
	vm = status_kib("VmSize:");
	/* 20 MiB and 2 pages: a quarter more is not whole pages (25 MiB + 10 KiB) */
	char *q = A(malloc)((20 << 20) + 5000);
	long vm_q = status_kib("VmSize:");
	size_t came = resident_pages(q, 10 << 20);
	struct la_counters after = stats();
	let_go_of(block);
	cr_assert_eq(after.direct_cache_hits - before.direct_cache_hits, 1, "the cached one grown");
	cr_assert_neq(q, p, "it could not grow in place");
	cr_assert_eq((uintptr_t)q % table, 0, "moved off a table's boundary: %p", (void *)q);
	cr_assert_eq(A(malloc_usable_size)(q), (25u << 20) + 12288, "a quarter more, in pages");
	cr_assert_eq(came, 2560, "the first 10 MiB came along resident: %zu pages", came);
	cr_assert_eq(after.address_space_bytes - before.address_space_bytes,
	             (25u << 20) + 12288 - ((10u << 20) + 16384));
	cr_assert_eq((vm_q - vm) << 10, (25 << 20) + 12288 - ((10 << 20) + 16384),
	             "VmSize rose by %ld KiB", vm_q - vm);
	A(free)(q);
	A(free)(r);
}

/* A fake THP directory (thpdir.h) read from now on; thp_unfake goes back to was. */
static void thp_fake(char *dir, const char *enabled, const char *pmd2m, const char *m64)
{
	thp_dir_make(dir, enabled, pmd2m, m64);
	os_thp_dir = dir;
	os_huge_reread();
}

static void thp_unfake(const char *dir, const char *was)
{
	thp_dir_remove(dir);
	os_thp_dir = was;
	os_huge_reread();
}

/* Whether a mapping on a 2 MiB boundary takes a huge page for its first bytes is the 2 MiB
 * size's mode alone: `enabled`, or hugepages-2048kB/enabled where that says other than
 * "inherit". A smaller size's "always" (multi-size THP) fills its folios wherever the
 * mapping starts, so a mapping from the ceiling up still starts on a page table's boundary
 * there (it did not: every multi-size THP's mode was read, ~40 system calls at the first
 * such mapping of every process, and any "always" among them kept mappings unrounded). */
Test(mapping_cache, a_smaller_thp_sizes_always_leaves_mappings_on_a_page_tables_boundary)
{
	const char *was = os_thp_dir;
	char d1[] = "/tmp/la-thp-XXXXXX", d2[] = "/tmp/la-thp-XXXXXX", d3[] = "/tmp/la-thp-XXXXXX";
	thp_fake(d1, "always [madvise] never\n", "always [inherit] madvise never\n",
	         "[always] inherit madvise never\n");
	bool m_always = os_thp_always(), m_pmd = os_thp_pmd_always();
	thp_unfake(d1, was);
	thp_fake(d2, "always [madvise] never\n", "[always] inherit madvise never\n",
	         "always inherit madvise [never]\n");
	bool own_pmd = os_thp_pmd_always();
	thp_unfake(d2, was);
	thp_fake(d3, "[always] madvise never\n", NULL, "always inherit madvise [never]\n");
	bool top_pmd = os_thp_pmd_always();
	thp_unfake(d3, was);
	cr_assert(m_always, "a 64 KiB size in \"always\" backs unadvised ranges");
	cr_assert(!m_pmd, "but not with 2 MiB pages");
	cr_assert(own_pmd, "hugepages-2048kB/enabled \"always\" does");
	cr_assert(top_pmd, "`enabled` \"always\" does, without a file of the size's own");

	char dir[] = "/tmp/la-thp-XXXXXX";
	thp_fake(dir, "always [madvise] never\n", "always [inherit] madvise never\n",
	         "[always] inherit madvise never\n");
	set("decay_ms", 0);
	void *r = recycle_mappings(); /* the largest request lately: 40 MiB */
	char *p = A(malloc)((10 << 20) + 12345);
	bool pmd = os_thp_pmd_always();
	size_t usable = A(malloc_usable_size)(p);
	A(free)(p);
	A(free)(r);
	thp_unfake(dir, was);
	cr_assert(!pmd);
	cr_assert_eq((uintptr_t)p % (2 << 20), 0, "not on a table's boundary: %p", (void *)p);
	cr_assert_eq(usable, (10u << 20) + 16384, "the length asked, in pages");
}

/* os_thp_pmd_always takes `enabled` from os_huge_size's reading when there was one (one file
 * read, hugepages-2048kB/enabled, where it read `enabled` a second time): both answers come
 * from the same reading. The file rewritten between the two calls shows which was used. */
Test(mapping_cache, the_2mib_mode_uses_the_reading_of_enabled_already_made)
{
	const char *was = os_thp_dir;
	char dir[] = "/tmp/la-thp-XXXXXX";
	thp_fake(dir, "[always] madvise never\n", "always [inherit] madvise never\n",
	         "always [inherit] madvise never\n");
	bool always = os_thp_always();
	thp_dir_file(dir, "enabled", "always madvise [never]\n");
	bool pmd = os_thp_pmd_always();
	thp_unfake(dir, was);
	cr_assert(always, "`enabled` \"always\"");
	cr_assert(pmd, "the 2 MiB size inherits the mode os_huge_size read, not a second reading");

	char d2[] = "/tmp/la-thp-XXXXXX";
	thp_fake(d2, "[always] madvise never\n", "always [inherit] madvise never\n",
	         "always [inherit] madvise never\n");
	thp_dir_file(d2, "enabled", "always madvise [never]\n");
	bool fresh = os_thp_pmd_always();
	thp_unfake(d2, was);
	cr_assert(!fresh, "with no reading made before, it reads `enabled` itself");
}

/* Where the rounding to whole page tables is refused (RLIMIT_AS leaves room for the size
 * asked, not for the rounded length), a new mapping from the ceiling up is made, and a cached
 * one that has to move is grown, to the size asked, and the malloc that succeeds keeps errno
 * (the refused tries set ENOMEM). */
Test(mapping_cache, the_rounding_refused_maps_and_grows_the_size_asked_and_keeps_errno)
{
	if (os_thp_pmd_always())
		cr_skip_test("THP always: mappings are not rounded");
	set("decay_ms", 0);
	void *r = recycle_mappings(); /* the largest request lately: 40 MiB */
	/* 10 MiB + 16 KiB fits, its rounding to 12 MiB does not */
	struct rlimit old = limit_address_space(11 << 20);
	errno = 4242;
	char *p = A(malloc)((10 << 20) + 12345);
	int err = errno;
	cr_assert_eq(setrlimit(RLIMIT_AS, &old), 0);
	cr_assert_not_null(p, "refused: %s", strerror(err));
	cr_assert_eq(err, 4242, "errno %d after a malloc that succeeded", err);
	cr_assert_eq(A(malloc_usable_size)(p), (10u << 20) + 16384, "the length asked, in pages");
	memset(p, 1, 10 << 20);
	size_t had = A(malloc_usable_size)(p);
	void *block = take_the_page_after(p);
	A(free)(p); /* cached: mappings are recycled */
	cr_assert_eq(stats().direct_cache_bytes, had);
	/* 14 MiB + 8 KiB is 4 MiB - 8 KiB more than the cached one: it fits; a quarter more
	 * (17.5 MiB) does not, nor the 16 MiB of whole tables */
	old = limit_address_space(5 << 20);
	struct la_counters before = stats();
	errno = 4242;
	char *q = A(malloc)((14 << 20) + 5000);
	err = errno;
	struct la_counters after = stats();
	cr_assert_eq(setrlimit(RLIMIT_AS, &old), 0);
	let_go_of(block);
	cr_assert_not_null(q, "refused: %s", strerror(err));
	cr_assert_eq(after.direct_cache_hits - before.direct_cache_hits, 1, "the cached one grown");
	cr_assert_eq(err, 4242, "errno %d after a malloc that succeeded", err);
	cr_assert_eq(A(malloc_usable_size)(q), (14u << 20) + 8192, "the length asked, in pages");
	cr_assert_eq(q[0], 1, "its pages came along");
	cr_assert_eq(q[(10 << 20) - 1], 1, "its pages came along");
	cr_assert_eq(after.address_space_bytes - before.address_space_bytes,
	             (14u << 20) + 8192 - had);
	A(free)(q);
	A(free)(r);
}

/* A cached mapping grown where the address space after it is free stays where it is, with
 * one mremap: not grown to whole page tables and the rounding unmapped again (a program
 * whose largest request creeps up by a few pages grew its mappings so each time: two system
 * calls a growth). */
Test(mapping_cache, a_growth_into_free_address_space_takes_one_call_in_place)
{
	if (os_thp_pmd_always())
		cr_skip_test("THP always: mappings are placed where the kernel puts them");
	set("decay_ms", 0);
	set("mmap_dynamic", 0); /* (the threshold stays: 9 MiB blocks stay mappings) */
	A(malloc_trim)(0);      /* the largest request lately: the 9 MiB below */
	A(free)(A(malloc)(9 << 20));
	void *r = A(malloc)(9 << 20);          /* recycled now (kept live: it would serve below) */
	char *p = A(malloc)((8 << 20) + 5000); /* made as 10 MiB, the last 2 MiB - 8 KiB unmapped */
	size_t had = A(malloc_usable_size)(p);
	cr_assert_eq(had, (8u << 20) + 8192);
	A(free)(p);
	/* the address space up to p + 10 MiB must be free (the probe finds out, and leaves it so) */
	void *probe = mmap(p + had, (10 << 20) - had, PROT_NONE,
	                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (probe != MAP_FAILED)
		munmap(probe, (10 << 20) - had);
	if (probe != p + had) {
		A(free)(r);
		cr_skip_test("the address space after the mapping is taken");
	}
	struct la_counters before = stats();
	char *q = A(malloc)((8 << 20) + (100 << 10)); /* grown to 9 MiB, the largest lately */
	struct la_counters after = stats();
	cr_assert_eq(q, p, "moved");
	cr_assert_eq(after.direct_cache_hits - before.direct_cache_hits, 1);
	cr_assert_eq(A(malloc_usable_size)(q), 9u << 20);
	cr_assert_eq(after.mmap_calls - before.mmap_calls, 1, "%llu mremap calls",
	             (unsigned long long)(after.mmap_calls - before.mmap_calls));
	cr_assert_eq(after.munmap_calls, before.munmap_calls, "%llu munmap calls",
	             (unsigned long long)(after.munmap_calls - before.munmap_calls));
	A(free)(q);
	A(free)(r);
}

/* Mappings recycled by threads at once: each malloc of 4-12 MiB takes a cached mapping (or
 * grows or maps one), each free puts one back or unmaps one. */
static void *recycle_mappings_loop(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	for (int i = 0; i < 3000; i++) {
		seed = seed * 1103515245u + 12345u;
		size_t n = ((size_t)4 << 20) + (size_t)(seed >> 8) % ((size_t)8 << 20);
		char *p = A(malloc)(n);
		cr_assert_not_null(p);
		p[0] = 1;
		p[n - 1] = 1;
		A(free)(p);
	}
	return NULL;
}

/* The counters only direct.c writes in the process block (direct_mappings, direct_bytes,
 * direct_cache_bytes, direct_cache_hits, allocated, free resident and resident data bytes)
 * are written under its lock with a plain add, not a locked one: one written outside the
 * lock would lose updates when threads recycle mappings at once. After four threads'
 * 12,000 reuses and a trim that empties the cache, they read exactly what is left: the one
 * live mapping, nothing cached, the bytes as before, most mallocs hits. */
Test(mapping_cache, its_own_counters_stay_exact_when_threads_recycle_mappings)
{
	set("decay_ms", 0);
	void *r = recycle_mappings();
	struct la_counters before = stats(), pb;
	la_counters_read(&pb, &shm_process_block()->c);
	pthread_t t[4];
	for (uintptr_t i = 0; i < 4; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, recycle_mappings_loop, (void *)(i + 1)),
		             0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	struct la_counters mid = stats();
	A(malloc_trim)(0);
	struct la_counters after = stats();
	cr_assert_eq(mid.direct_mappings, before.direct_mappings, "%llu live mappings, %llu before",
	             (unsigned long long)mid.direct_mappings,
	             (unsigned long long)before.direct_mappings);
	cr_assert_eq(mid.direct_bytes, before.direct_bytes, "%llu bytes live, %llu before",
	             (unsigned long long)mid.direct_bytes, (unsigned long long)before.direct_bytes);
	cr_assert_eq(after.direct_cache_bytes, 0, "%llu bytes cached after the trim",
	             (unsigned long long)after.direct_cache_bytes);
	/* the process block's (the mappings'; the threads' own small blocks are the arenas') */
	struct la_counters pa;
	la_counters_read(&pa, &shm_process_block()->c);
	cr_assert_eq(pa.allocated_bytes, pb.allocated_bytes, "%lld bytes allocated more",
	             (long long)(pa.allocated_bytes - pb.allocated_bytes));
	cr_assert_eq(pa.data_resident_bytes, pb.data_resident_bytes,
	             "%lld bytes resident data more",
	             (long long)(pa.data_resident_bytes - pb.data_resident_bytes));
	cr_assert_eq(pa.free_resident_bytes, pb.free_resident_bytes,
	             "%lld bytes free resident more",
	             (long long)(pa.free_resident_bytes - pb.free_resident_bytes));
	uint64_t hits = mid.direct_cache_hits - before.direct_cache_hits;
	cr_assert_gt(hits, 6000, "%llu of 12000 mallocs took a cached mapping",
	             (unsigned long long)hits);
	A(free)(r);
}

/* The quarter more a cached mapping is grown with serves the next, longer request with
 * no system call (a program whose sizes vary would otherwise remap at most requests, and
 * most remaps move the mapping); no further than the largest request since the last trim. */
Test(mapping_cache, a_grown_cached_mapping_serves_the_next_longer_request_without_a_remap)
{
	set("decay_ms", 0);
	void *r = recycle_mappings();
	char *p = A(malloc)(10 << 20);
	A(free)(p);
	char *q = A(malloc)(16 << 20);
	memset(q, 1, 16 << 20);
	A(free)(q);
	struct la_counters before = stats();
	char *s = A(malloc)(19 << 20);
	memset(s, 2, 19 << 20);
	struct la_counters after = stats();
	cr_assert_eq(s, q, "the cached mapping was reused");
	reused_without_a_call(&before, &after);
	/* no further than the largest request lately (recycle_mappings' 40 MiB; the cache is
	 * empty: a new mapping) */
	p = A(malloc)(30 << 20);
	A(free)(p);
	before = stats();
	q = A(malloc)(36 << 20);
	after = stats();
	cr_assert_eq(after.direct_cache_hits - before.direct_cache_hits, 1);
	cr_assert_eq(after.address_space_bytes - before.address_space_bytes, 10u << 20,
	             "grown to the 40 MiB asked before: %llu bytes more",
	             (unsigned long long)(after.address_space_bytes - before.address_space_bytes));
	A(free)(q);
	A(free)(s);
	A(free)(r);
}

Test(mapping_cache, the_part_beyond_shorter_requests_is_purged_every_16th_reuse)
{
	set("decay_ms", 0);
	void *r = recycle_mappings();
	char *p = A(malloc)(32 << 20);
	memset(p, 1, 32 << 20);
	A(free)(p);
	uint64_t madv = stats().madvise_calls;
	for (int i = 1; i <= 16; i++) {
		char *q = A(malloc)(8 << 20);
		cr_assert_eq(q, p);
		size_t tail = resident_pages(q + (8 << 20), 24 << 20);
		if (i < 16) {
			cr_assert_eq(stats().madvise_calls, madv, "reuse %d purged", i);
			cr_assert_eq(tail, 6144, "reuse %d: the tail stays resident", i);
		} else {
			cr_assert_eq(stats().madvise_calls, madv + 1, "reuse 16 purged the tail");
			cr_assert_eq(tail, 0, "%zu pages beyond the request still resident", tail);
		}
		memset(q, 2, 8 << 20);
		A(free)(q);
	}
	A(free)(r);
}

/* The purge of what lies beyond a shorter request goes in ranges none of which covers a
 * page table's reach whole: the kernel empties the tables without freeing them (with CONFIG_PT_RECLAIM it frees
 * each table a madvise range covers whole once it is empty), so a later request that
 * writes there faults no table in. (A kernel without PT_RECLAIM keeps them either way.) */
Test(mapping_cache, the_purge_beyond_shorter_requests_keeps_the_page_tables)
{
	set("decay_ms", 0);
	void *r = recycle_mappings();
	char *p = A(malloc)(32 << 20);
	memset(p, 1, 32 << 20);
	A(free)(p);
	long pte = status_kib("VmPTE:");
	uint64_t madv = stats().madvise_calls;
	for (int i = 1; i <= 16; i++) {
		char *q = A(malloc)(8 << 20);
		cr_assert_eq(q, p);
		memset(q, 2, 8 << 20);
		A(free)(q);
	}
	cr_assert_eq(stats().madvise_calls, madv + 1, "reuse 16 purged the tail");
	cr_assert_eq(resident_pages(p + (8 << 20), 24 << 20), 0, "the tail was purged");
	long after = status_kib("VmPTE:");
	cr_assert_geq(after, pte, "page tables freed by the purge: VmPTE %ld -> %ld kB", pte,
	              after);
	A(free)(r);
}

Test(mapping_cache, a_cached_mapping_counts_whole_until_measured)
{
	set("decay_ms", 0);
	void *r = recycle_mappings();
	char *p = A(malloc)(16 << 20);
	memset(p, 1, 4 << 20);
	struct la_counters before = stats();
	A(free)(p);
	struct la_counters mid = stats();
	cr_assert_eq(mid.direct_cache_bytes - before.direct_cache_bytes, 16u << 20);
	cr_assert_eq(mid.free_resident_bytes - before.free_resident_bytes, 16u << 20,
	             "whole until measured");
	op_measure();
	struct la_counters after = stats();
	cr_assert_eq(after.free_resident_bytes - before.free_resident_bytes, 4u << 20,
	             "measured: the 4 MiB written, not %llu",
	             (unsigned long long)(after.free_resident_bytes - before.free_resident_bytes));
	cr_assert_eq(after.data_resident_bytes + (12u << 20), mid.data_resident_bytes);
	op_measure(); /* measured once */
	cr_assert_eq(stats().free_resident_bytes, after.free_resident_bytes);
	A(malloc_trim)(0);
	struct la_counters trimmed = stats();
	cr_assert_eq(trimmed.direct_cache_bytes, 0);
	cr_assert_leq(trimmed.free_resident_bytes, before.free_resident_bytes);
	A(free)(r);
}

/* ---- 3. idle heap release --------------------------------------------------------------- */

/* Both threads fill before either frees: a thread still filling would otherwise take the
 * free resident pages the other's frees left (a refill that would carve into new pages,
 * arena.c lender) and need one heap fewer of its own (5 released, not 6, in one ASan run
 * of .ci/run when the threads' phases overlapped so). */
static pthread_barrier_t filled;

static void *fill_and_free_all_but_last(void *arg)
{
	size_t n = (256u << 20) / 4000;
	char **blocks = A(malloc)(n * sizeof(*blocks));
	for (size_t i = 0; i < n; i++)
		memset(blocks[i] = A(malloc)(4000), 1, 4000);
	pthread_barrier_wait(&filled);
	for (size_t i = 0; i + 1 < n; i++)
		A(free)(blocks[i]);
	*(void **)arg = blocks[n - 1];
	A(free)(blocks);
	return NULL;
}

static void *nothing(void *arg)
{
	return arg;
}

Test(idle_heaps, emptied_heaps_anywhere_in_an_arena_are_unmapped)
{
	void *last[2];
	pthread_t t1, t2;
	set("arena_max", 16); /* a thread of its own per arena, whatever the machine's CPUs */
	/* glibc keeps the stacks of joined threads for reuse: count them in the start */
	pthread_create(&t1, NULL, nothing, NULL);
	pthread_create(&t2, NULL, nothing, NULL);
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	long vsz0 = status_kib("VmSize:");
	pthread_barrier_init(&filled, NULL, 2);
	pthread_create(&t1, NULL, fill_and_free_all_but_last, &last[0]);
	pthread_create(&t2, NULL, fill_and_free_all_but_last, &last[1]);
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	pthread_barrier_destroy(&filled);
	long peak = status_kib("VmHWM:"), rss = status_kib("VmRSS:");
	struct la_counters c = stats();
	cr_assert_geq(c.heaps_released, 6, "heaps released: %llu",
	              (unsigned long long)c.heaps_released);
	cr_assert_leq(rss * 4, peak, "after the frees, no trim: RSS %ld KiB, peak %ld KiB", rss,
	              peak);
	A(malloc_trim)(0);
#if defined(__SANITIZE_ADDRESS__)
	/* AddressSanitizer's shadow of the 600 MB the threads touched stays resident (liballoc
	 * unmaps with raw system calls the runtime does not see): bound what liballoc itself
	 * still holds resident, from its counters, against the process's peak */
	struct la_counters after = stats();
	rss = (long)((after.data_resident_bytes + after.metadata_bytes) / 1024);
#else
	rss = status_kib("VmRSS:");
#endif
	long vsz = status_kib("VmSize:");
	cr_assert_leq(rss * 20, peak, "after malloc_trim(0): RSS %ld KiB, peak %ld KiB", rss, peak);
#ifndef LA_PREFIX /* a sanitizer's own allocator maps memory of its own for the threads */
	/* a heap each for the last blocks, and each arena's ring (128 KiB, mapped at its first
	 * remote free: a thread that took the other's free pages while they were freed gives
	 * those blocks back through it, arena.c lender) */
	long ring_kib = (long)(RR_SLOTS * sizeof(void *) / 1024);
	cr_assert_leq(vsz - vsz0, 2 * 65536 + 2 * ring_kib, "VSZ %ld KiB, at start %ld KiB", vsz,
	              vsz0);
#else
	(void)vsz;
	(void)vsz0;
#endif
	A(free)(last[0]);
	A(free)(last[1]);
}

Test(idle_heaps, turned_off_they_stay_mapped)
{
	set("idle_heap_release", 0);
	void *last;
	pthread_barrier_init(&filled, NULL, 1); /* one thread: it waits for no other */
	run_thread(fill_and_free_all_but_last, &last);
	pthread_barrier_destroy(&filled);
	cr_assert_eq(stats().heaps_released, 0);
	A(free)(last);
}

/* ---- 4. remote frees --------------------------------------------------------------------- */

#define BATCH 256
struct batchq {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	void **items[4096];
	int head, tail, producers_done;
};

static struct batchq q = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {0}, 0, 0, 0};
/* producers stay alive until the consumer is done, so their arenas stay owned */
static pthread_barrier_t all_done;
static long per_producer = 200000;

static void *producer(void *arg)
{
	unsigned s = (unsigned)(size_t)arg;
	for (long done = 0; done < per_producer; done += BATCH) {
		void **b = A(malloc)(BATCH * sizeof(void *));
		for (int i = 0; i < BATCH; i++) {
			b[i] = A(malloc)(16 + rand_r(&s) % 497);
			memset(b[i], 7, 16);
		}
		pthread_mutex_lock(&q.lock);
		while ((q.tail + 1) % 4096 == q.head)
			pthread_cond_wait(&q.cond, &q.lock);
		q.items[q.tail] = b;
		q.tail = (q.tail + 1) % 4096;
		pthread_cond_broadcast(&q.cond);
		pthread_mutex_unlock(&q.lock);
	}
	pthread_mutex_lock(&q.lock);
	q.producers_done++;
	pthread_cond_broadcast(&q.cond);
	pthread_mutex_unlock(&q.lock);
	pthread_barrier_wait(&all_done);
	return NULL;
}

static void *consumer(void *arg)
{
	for (;;) {
		pthread_mutex_lock(&q.lock);
		while (q.head == q.tail && q.producers_done < 2)
			pthread_cond_wait(&q.cond, &q.lock);
		if (q.head == q.tail) {
			pthread_mutex_unlock(&q.lock);
			/* return the cache while the producers still own their arenas */
			liballoc_flush_caches();
			pthread_barrier_wait(&all_done);
			return arg;
		}
		void **b = q.items[q.head];
		q.head = (q.head + 1) % 4096;
		pthread_cond_broadcast(&q.cond);
		pthread_mutex_unlock(&q.lock);
		for (int i = 0; i < BATCH; i++)
			A(free)(b[i]);
		A(free)(b);
	}
}

Test(remote_frees, cross_thread_frees_are_queued_and_all_drained)
{
	set("arena_max", 16); /* a thread of its own per arena, whatever the machine's CPUs */
	pthread_t p1, p2, c;
	pthread_barrier_init(&all_done, NULL, 3);
	pthread_create(&c, NULL, consumer, NULL);
	pthread_create(&p1, NULL, producer, (void *)1);
	pthread_create(&p2, NULL, producer, (void *)2);
	pthread_join(p1, NULL);
	pthread_join(p2, NULL);
	pthread_join(c, NULL);
	liballoc_flush_caches(); /* drains every queue */
	struct la_counters s = stats();
	cr_assert_gt(s.remote_frees_queued, (uint64_t)per_producer, "queued: %llu",
	             (unsigned long long)s.remote_frees_queued);
	cr_assert_eq(s.remote_frees_queued, s.remote_frees_drained, "queued %llu, drained %llu",
	             (unsigned long long)s.remote_frees_queued,
	             (unsigned long long)s.remote_frees_drained);
	cr_assert_eq(s.remote_frees_locked, 0, "a foreign thread took an owned arena's lock");
	cr_assert_eq(s.mprotect_calls, 0, "heap growth costs no mprotect");
}

/* A thread that allocates blocks and then stays alive without touching the allocator, so
 * that its arena stays owned and nothing drains it but the test. */
enum { RING_BLOCKS = RR_SLOTS + 2 * 64 + 1 };
static void *ring_blocks[RING_BLOCKS];
static pthread_barrier_t ring_made, ring_done;

static void *ring_owner(void *arg)
{
	/* a flush of its own first (a bin of 64-byte blocks overflows): the arena's transfer
	 * cache is set up */
	static void *own[256];
	for (int i = 0; i < 256; i++)
		own[i] = A(malloc)(64);
	for (int i = 0; i < 256; i++)
		A(free)(own[i]);
	for (int i = 0; i < RING_BLOCKS; i++)
		memset(ring_blocks[i] = A(malloc)(32), 1, 32);
	pthread_barrier_wait(&ring_made);
	pthread_barrier_wait(&ring_done);
	return arg;
}

/* Starts thread t running fn, which allocates blocks[] in an arena of its own and then waits
 * at made (and next at go, which is set up here too); returns that arena, checked to be
 * another than that of own (a block of this thread's). */
static struct arena *start_owner(pthread_t *t, void *(*fn)(void *), pthread_barrier_t *made,
                                 pthread_barrier_t *go, void *const *blocks, const void *own)
{
	pthread_barrier_init(made, NULL, 2);
	pthread_barrier_init(go, NULL, 2);
	pthread_create(t, NULL, fn, NULL);
	pthread_barrier_wait(made);
	struct arena *owner = heap_of(blocks[0])->arena;
	cr_assert_neq(owner, heap_of(own)->arena, "the owner has an arena of its own");
	return owner;
}

static bool owner_queue_empty(struct arena *a)
{
	return cds_wfcq_empty(&a->rq_head, &a->rq_tail);
}

Test(remote_frees, batches_go_through_the_owners_ring_and_what_does_not_fit_to_its_queue)
{
	set("decay_ms", 0);        /* no decay pass: only the test drains */
	set("arena_max", 16);      /* a thread of its own per arena, whatever the machine's CPUs */
	void *own = A(malloc)(32); /* this thread's own arena and cache */
	pthread_t t;
	struct arena *owner = start_owner(&t, ring_owner, &ring_made, &ring_done, ring_blocks, own);
	struct la_counters before = stats();
	/* handed over 64 at a time: RR_SLOTS fill the ring, the next batch finds no room and
	 * goes to the queue, the last stays in this thread's cache */
	for (int i = 0; i < RING_BLOCKS - 1; i++)
		A(free)(ring_blocks[i]);
	cr_assert_eq(owner->rr_head - owner->rr_tail, RR_SLOTS, "in the ring: %llu",
	             (unsigned long long)(owner->rr_head - owner->rr_tail));
	cr_assert(!owner_queue_empty(owner), "the batch the ring had no room for is queued");
	struct la_counters mid = stats();
	cr_assert_eq(mid.remote_frees_queued - before.remote_frees_queued, RR_SLOTS + 64);
	cr_assert_eq(mid.remote_frees_drained, before.remote_frees_drained, "nothing drained yet");
	arena_lock(owner);
	arena_drain(owner);
	arena_unlock(owner);
	cr_assert_eq(owner->rr_head, owner->rr_tail, "the ring is empty after a drain");
	cr_assert(owner_queue_empty(owner));
	/* the transfer cache took what it could of them (the next refills hand them out as
	 * pointers), the spans the rest */
	cr_assert_not_null(owner->xfer);
	cr_assert_eq(owner->xfer_n[sc_class_of(32)], xfer_depth(owner),
	             "in the transfer cache: %u of the %u slots it may fill",
	             (unsigned)owner->xfer_n[sc_class_of(32)], xfer_depth(owner));
	struct la_counters after = stats();
	cr_assert_eq(after.remote_frees_drained - before.remote_frees_drained, RR_SLOTS + 64);
	/* the ring takes the next batch again: the 64 waiting here, handed over at the next
	 * foreign free */
	A(free)(ring_blocks[RING_BLOCKS - 1]);
	cr_assert_eq(owner->rr_head - owner->rr_tail, 64, "in the ring: %llu",
	             (unsigned long long)(owner->rr_head - owner->rr_tail));
	cr_assert(owner_queue_empty(owner));
	/* the owner's next refill drains them: the hand-over left it the hint */
	void *b;
	cr_assert_eq(arena_refill(owner, sc_class_of(32), &b, 1, 1, NULL), 1);
	cr_assert_eq(owner->rr_head, owner->rr_tail, "the refill did not drain the ring");
	arena_free_local(owner, b);
	pthread_barrier_wait(&ring_done);
	pthread_join(t, NULL);
	A(free)(own);
}

/* A thread that allocates a few blocks and exits once told: its arena keeps them, and no
 * thread uses it any more. */
enum { LEFT_BLOCKS = 4 };
static void *left_blocks[LEFT_BLOCKS];
static pthread_barrier_t left_made, left_go;

static void *leaving_owner(void *arg)
{
	for (int i = 0; i < LEFT_BLOCKS; i++)
		left_blocks[i] = A(malloc)(48);
	pthread_barrier_wait(&left_made);
	pthread_barrier_wait(&left_go);
	return arg;
}

Test(remote_frees, a_batch_begun_while_its_owner_had_threads_goes_under_its_lock_once_they_left)
{
	set("decay_ms", 0);        /* no decay pass: only the test flushes */
	set("arena_max", 16);      /* a thread of its own per arena, whatever the machine's CPUs */
	void *own = A(malloc)(48); /* this thread's own arena and cache */
	pthread_t t;
	struct arena *owner =
	        start_owner(&t, leaving_owner, &left_made, &left_go, left_blocks, own);
	A(free)(left_blocks[0]); /* begins this thread's hand-over batch for the owner */
	pthread_barrier_wait(&left_go);
	pthread_join(t, NULL);
	cr_assert_eq(__atomic_load_n(&owner->threads, __ATOMIC_RELAXED), 0, "the owner left");
	struct la_counters before = stats();
	/* they join the batch without a look at the owner's threads (free's path for the
	 * consumer of a producer), and the hand-over frees the whole batch under the owner's
	 * lock: no queue that no thread would drain */
	for (int i = 1; i < LEFT_BLOCKS; i++)
		A(free)(left_blocks[i]);
	cr_assert(la_tcache.rb_owner == owner && la_tcache.rb_n == LEFT_BLOCKS, "in the batch: %u",
	          la_tcache.rb_n);
	liballoc_flush_caches();
	struct la_counters after = stats();
	cr_assert_eq(after.remote_frees_locked - before.remote_frees_locked, LEFT_BLOCKS,
	             "freed under the owner's lock: %llu",
	             (unsigned long long)(after.remote_frees_locked - before.remote_frees_locked));
	cr_assert(owner->rr_head == owner->rr_tail && owner_queue_empty(owner),
	          "nothing waits in the owner's ring or queue");
	A(free)(own);
}

/* A thread of the arena that frees blocks of classes it never allocates (the consumer of a
 * producer that shares its arena) holds at most TC_FREE_ONLY_BYTES of each (at least
 * TC_FREE_ONLY_BLOCKS blocks) before its bin flushes whole, not a full bin of up to 63
 * blocks or 256 KiB (the consumers of one producer of 16-4,096-byte blocks held ~0.8 MiB
 * each that way: mech_remote 1 300000 7 16 4096); once it allocates a class, that bin
 * takes its base limit. */
static const size_t free_only_sizes[] = {16, 48, 96, 256, 512, 1024, 2048, 4096};
enum {
	FREE_ONLY_CLASSES = sizeof(free_only_sizes) / sizeof(free_only_sizes[0]),
	FREE_ONLY_EACH = 48, /* below every one of those bins' base limits: all kept before */
	FREE_ONLY_BLOCKS = FREE_ONLY_CLASSES * FREE_ONLY_EACH,
	FREE_ONLY_SIZE = 1024, /* a free-only limit below its base limit */
};
static void *free_only_blocks[FREE_ONLY_BLOCKS];
struct free_only {
	bool allocate_first; /* a malloc of the class first: the bin refilled */
	void **blocks;
	uint32_t limit, before, after; /* the bin's limit; blocks in it before and after the
	                                * free that found it full */
};

struct free_only_run {
	uint64_t most;          /* the most bytes one class's bin held after a free */
	size_t most_size;       /* of that class */
	uint32_t limit, raised; /* FREE_ONLY_SIZE's bin's limit before and after a malloc */
};

static void *free_only_consumer_of_all(void *arg)
{
	struct free_only_run *r = arg;
	/* the classes in turn, as a producer's random sizes come */
	for (int i = 0; i < FREE_ONLY_EACH; i++)
		for (int c = 0; c < FREE_ONLY_CLASSES; c++) {
			A(free)(free_only_blocks[c * FREE_ONLY_EACH + i]);
			unsigned cls = sc_class_of(free_only_sizes[c]);
			uint64_t held = (uint64_t)tcache_count(cls) * sc_size[cls];
			if (held > r->most) {
				r->most = held;
				r->most_size = sc_size[cls];
			}
		}
	cr_assert_eq(la_tcache.arena, heap_of(free_only_blocks[0])->arena,
	             "one arena for all threads");
	unsigned cls = sc_class_of(FREE_ONLY_SIZE);
	r->limit = la_tcache.bins[cls].limit;
	/* a class it allocates now: more than its bin holds, so that the bin refills */
	void *own[TC_MAX_BLOCKS + 1];
	for (uint32_t i = 0; i <= r->limit; i++)
		own[i] = A(malloc)(FREE_ONLY_SIZE);
	r->raised = la_tcache.bins[cls].limit;
	for (uint32_t i = 0; i <= r->limit; i++)
		A(free)(own[i]);
	return NULL;
}

Test(remote_frees, a_thread_holds_little_of_each_class_it_only_frees)
{
	set("decay_ms", 0);  /* no decay pass: only the test flushes */
	set("arena_max", 1); /* the producer and its consumer share one arena */
	for (int c = 0; c < FREE_ONLY_CLASSES; c++)
		for (int i = 0; i < FREE_ONLY_EACH; i++)
			memset(free_only_blocks[c * FREE_ONLY_EACH + i] =
			               A(malloc)(free_only_sizes[c]),
			       1, free_only_sizes[c]);
	struct free_only_run r = {0};
	run_thread(free_only_consumer_of_all, &r);
	cr_assert_leq(r.most,
	              LA_MAX((uint64_t)TC_FREE_ONLY_BYTES, TC_FREE_ONLY_BLOCKS * r.most_size),
	              "a bin of %zu-byte blocks the thread never allocated held %llu bytes",
	              r.most_size, (unsigned long long)r.most);
	unsigned cls = sc_class_of(FREE_ONLY_SIZE);
	cr_assert_eq(r.limit, LA_MIN(TC_FREE_ONLY_BYTES / sc_size[cls], TC_MAX_BLOCKS));
	cr_assert_eq(r.raised, TC_MAX_BLOCKS, "a class it allocates: the base limit, not %u",
	             r.raised);
}

/* A thread's bin of a class it allocates keeps half its blocks when it flushes full, for
 * the thread's next mallocs. */
static void *free_only_consumer(void *arg)
{
	struct free_only *f = arg;
	unsigned cls = sc_class_of(FREE_ONLY_SIZE);
	if (f->allocate_first)
		A(free)(A(malloc)(FREE_ONLY_SIZE));
	uint32_t i = 0;
	A(free)(f->blocks[i++]); /* the bin has its row and limit now */
	cr_assert_eq(heap_of(f->blocks[0])->arena, la_tcache.arena, "one arena for all threads");
	f->limit = la_tcache.bins[cls].limit;
	while (tcache_count(cls) < f->limit)
		A(free)(f->blocks[i++]);
	f->before = tcache_count(cls);
	A(free)(f->blocks[i++]); /* finds the bin full */
	f->after = tcache_count(cls);
	return NULL;
}

Test(remote_frees, a_full_bin_of_a_class_the_thread_allocates_keeps_half)
{
	set("decay_ms", 0);  /* no decay pass: only the test flushes */
	set("arena_max", 1); /* the producer and its consumers share one arena */
	enum { N = 2 * TC_SLOTS };
	static void *blocks[N];
	for (int i = 0; i < N; i++)
		memset(blocks[i] = A(malloc)(FREE_ONLY_SIZE), 1, FREE_ONLY_SIZE);
	struct free_only allocator = {.allocate_first = true, .blocks = blocks};
	run_thread(free_only_consumer, &allocator);
	cr_assert_gt(allocator.limit, 1);
	cr_assert_eq(allocator.before, allocator.limit);
	cr_assert_eq(allocator.after, allocator.limit / 2 + 1,
	             "a bin that refilled kept %u of its %u blocks at its flush",
	             allocator.after - 1, allocator.limit);
}

/* The owner's ring (RR_SLOTS slots, 128 KiB): its pages are touched only as far as blocks
 * are in flight at once (a drain that empties it starts the next batch at slot 0), and a
 * decay pass that finds it empty and unmoved returns them, so an idle service, or a
 * program past its threaded phase, holds none of it. */
enum { RING_PAGES = RR_SLOTS * sizeof(void *) / 4096 };

Test(remote_frees, the_ring_touches_what_is_in_flight_and_an_idle_ring_goes_back)
{
	set("decay_ms", 0);   /* no decay pass until the test asks for one */
	set("arena_max", 16); /* a thread of its own per arena, whatever the machine's CPUs */
	void *own = A(malloc)(32);
	pthread_t t;
	struct arena *owner = start_owner(&t, ring_owner, &ring_made, &ring_done, ring_blocks, own);
	struct arena *mine = heap_of(own)->arena;
	/* 300 batches of 32 handed over and drained one at a time: 9,600 slots passed over */
	int i = 0;
	for (; i < 300 * 32; i += 32) {
		arena_free_remote_array(owner, mine, ring_blocks + i, 32);
		arena_lock(owner);
		arena_drain(owner);
		arena_unlock(owner);
	}
	cr_assert_not_null(owner->rr, "the batches went through the ring");
	unsigned touched = resident_in(owner->rr, RING_PAGES);
	cr_assert_leq(touched, 1, "32 blocks in flight at a time touched %u of the ring's %u pages",
	              touched, (unsigned)RING_PAGES);
	/* then 6,400 at once, none drained: 50 KiB of slots */
	for (; i < 500 * 32; i += 32)
		arena_free_remote_array(owner, mine, ring_blocks + i, 32);
	touched = resident_in(owner->rr, RING_PAGES);
	cr_assert_geq(touched, 12, "6,400 blocks in flight touched %u pages", touched);
	set("decay_ms", 50);
	for (int k = 0; k < 2400 && touched; k++) { /* a minute: a busy machine */
		usleep(25000);
		touched = resident_in(owner->rr, RING_PAGES);
	}
	cr_assert_eq(touched, 0, "the idle ring kept %u of its %u pages", touched,
	             (unsigned)RING_PAGES);
	cr_assert_eq(owner->rr_head, owner->rr_tail, "and was drained");
	/* and takes batches again: its head moves by the batch (a decay pass still under way
	 * may drain it at once: every pass drains, which read "in the ring: 0" under load
	 * when the batch's head minus tail was asserted) */
	set("decay_ms", 0);
	uint64_t head = __atomic_load_n(&owner->rr_head, __ATOMIC_ACQUIRE);
	arena_free_remote_array(owner, mine, ring_blocks + i, 32);
	cr_assert_eq(owner->rr_head - head, 32, "through the ring: %llu slots",
	             (unsigned long long)(owner->rr_head - head));
	pthread_barrier_wait(&ring_done);
	pthread_join(t, NULL);
	A(free)(own);
}

/* A refill that finds no freed block of its class in its arena and would carve into new
 * pages takes another arena's free resident pages first (arena.c, lender): the
 * producers of one arena otherwise fault new pages in while their consumers' frees left
 * the other arena's pages free, and the peak is the sum of the two arenas' peaks
 * (remote-6p2c-4k, bench/README.md). Here a thread frees the last 7/8 of 8 MiB of 1 KiB
 * blocks in its arena (keeping the first: its heap is not left nearly empty, which would
 * return the pages) and waits; this thread's arena holds no page free, and its next 1 MiB
 * of blocks of that size come from the other arena's 7 MiB of free pages (BORROW_PAGES:
 * 4 MiB or more), and go back to it when freed. */
enum { LENT_BLOCKS = 8192, LENT_SIZE = 1024, TAKEN_BLOCKS = 1024 };
static void *lent_blocks[LENT_BLOCKS], *taken_blocks[TAKEN_BLOCKS];
static pthread_barrier_t lent_made, lent_done;
static void **owner_blocks; /* the owner's blocks, owner_n of them (set before it starts) */
static int owner_n;

/* An owner that makes owner_n blocks of LENT_SIZE in its arena, frees the last 7/8 of them
 * (keeping the first: its heap is not left nearly empty) and waits. */
static void *seven_eighths_owner(void *arg)
{
	for (int i = 0; i < owner_n; i++)
		memset(owner_blocks[i] = A(malloc)(LENT_SIZE), 1, LENT_SIZE);
	for (int i = owner_n / 8; i < owner_n; i++)
		A(free)(owner_blocks[i]);
	pthread_barrier_wait(&lent_made);
	pthread_barrier_wait(&lent_done);
	for (int i = 0; i < owner_n / 8; i++)
		A(free)(owner_blocks[i]);
	return arg;
}

/* seven_eighths_owner over n blocks in another arena (own: a block of this thread's) */
static struct arena *start_seven_eighths(pthread_t *t, void **blocks, int n, const void *own)
{
	set("decay_ms", 60000); /* the other arena's free pages stay (0 would return them) */
	owner_blocks = blocks;
	owner_n = n;
	return start_owner(t, seven_eighths_owner, &lent_made, &lent_done, blocks, own);
}

Test(remote_frees, a_refill_that_would_touch_new_pages_takes_another_arenas_free_ones)
{
	set("arena_max", 16); /* a thread of its own per arena, whatever the machine's CPUs */
	void *own = A(malloc)(32);
	pthread_t t;
	struct arena *lender = start_seven_eighths(&t, lent_blocks, LENT_BLOCKS, own);
	struct arena *mine = heap_of(own)->arena;
	int lent = 0;
	for (int i = 0; i < TAKEN_BLOCKS; i++) {
		memset(taken_blocks[i] = A(malloc)(LENT_SIZE), 2, LENT_SIZE);
		lent += heap_of(taken_blocks[i])->arena == lender;
	}
	/* (the first may come from the few free pages of this arena's heap) */
	cr_assert_geq(lent, TAKEN_BLOCKS * 15 / 16,
	              "%d of %d blocks came from the other arena's free pages", lent, TAKEN_BLOCKS);
	struct la_counters before = stats();
	for (int i = 0; i < TAKEN_BLOCKS; i++)
		A(free)(taken_blocks[i]);
	A(free)(own);
	uint32_t skipped;
	tcache_flush_all(&skipped); /* the last batch waiting for its hand-over too */
	struct la_counters after = stats();
	cr_assert_geq(after.remote_frees_queued - before.remote_frees_queued,
	              (uint64_t)TAKEN_BLOCKS,
	              "freed here, they went back to their arena as remote frees");
	cr_assert_eq(heap_of(own)->arena, mine);
	pthread_barrier_wait(&lent_done);
	pthread_join(t, NULL);
}

/* An arena whose thread freed one batch of blocks and is about to allocate the next
 * (idle_sweep: 256 blocks of a size, then the next size) is no lender: its free pages are
 * its next batch's. A thread frees the last 7/8 of 2 MiB of 1 KiB blocks in its arena and
 * waits; this thread's refills, which would carve into new pages, carve into its own arena's
 * and leave the other arena's 1.75 MiB free (below BORROW_PAGES, 4 MiB). At 256 KiB they took
 * 1,023 of 1,024 blocks from it, and its thread's next batch would have faulted new pages
 * in while this arena had its own. */
enum { BATCH_BLOCKS = 2048 };
static void *batch_blocks[BATCH_BLOCKS];

static uint64_t free_resident_pages(struct arena *a)
{
	arena_lock(a);
	uint64_t dirty = 0;
	for (struct heap *h = a->heaps; h; h = h->next)
		dirty += h->dirty_pages;
	arena_unlock(a);
	return dirty;
}

Test(remote_frees, a_refill_leaves_another_arenas_batch_of_free_pages_to_it)
{
	set("arena_max", 16); /* a thread of its own per arena, whatever the machine's CPUs */
	void *own = A(malloc)(32);
	pthread_t t;
	struct arena *other = start_seven_eighths(&t, batch_blocks, BATCH_BLOCKS, own);
	struct arena *mine = heap_of(own)->arena;
	uint64_t free_before = free_resident_pages(other);
	cr_assert_geq(free_before, 256, "the other arena holds %llu free pages (1 MiB or more)",
	              (unsigned long long)free_before);
	int lent = 0;
	for (int i = 0; i < TAKEN_BLOCKS; i++) {
		memset(taken_blocks[i] = A(malloc)(LENT_SIZE), 2, LENT_SIZE);
		lent += heap_of(taken_blocks[i])->arena != mine;
	}
	uint64_t free_after = free_resident_pages(other);
	cr_assert_eq(lent, 0, "%d of %d blocks came from the other arena's free pages", lent,
	             TAKEN_BLOCKS);
	cr_assert_eq(free_after, free_before, "the other arena's free pages: %llu, then %llu",
	             (unsigned long long)free_before, (unsigned long long)free_after);
	for (int i = 0; i < TAKEN_BLOCKS; i++)
		A(free)(taken_blocks[i]);
	A(free)(own);
	pthread_barrier_wait(&lent_done);
	pthread_join(t, NULL);
}

/* A thread that frees the blocks of an arena whose one thread waits in pthread_join, and
 * whose refills find no freed block in its own arena, takes that arena's freed blocks
 * before it carves new pages (arena.c, idle_lender): larson's new thread each generation
 * frees the slots main allocated, main in pthread_join, and faulted a copy of the working
 * set in beside them. Here another thread makes 4 MiB of 1 KiB blocks (IDLE_LEND_PAGES up)
 * and waits, counted as in pthread_join (arena_join_wait: the wrapper's count, control.c;
 * the prefixed build wraps no pthread function); this thread frees 3 of every 4 (remote
 * frees, which leave every span of the other arena some blocks: no free pages to lend,
 * lender) and then allocates a quarter as many: nearly all come from the blocks it freed.
 * tests/e2e/joinlend.bats runs the same through the real pthread_join. */
enum { IDLE_BLOCKS = 4096, IDLE_SIZE = 1024 };
static void *idle_blocks[IDLE_BLOCKS];
static void *taken_idle[IDLE_BLOCKS / 4];
static pthread_barrier_t idle_made, idle_done;

static int idle_n = IDLE_BLOCKS;     /* the blocks idle_owner makes */
static size_t idle_size = IDLE_SIZE; /* their size, and that of the blocks taken after */

/* The process's application threads (app_threads) made apps, as if it ran only this thread
 * and the owner (criterion's own threads count too: the test binary's pthread_create is
 * liballoc's); returns the others, to add back once the owner is joined. */
static uint32_t apps_only(uint32_t apps)
{
	uint32_t now = __atomic_load_n(&app_threads, __ATOMIC_RELAXED);
#if LA_WRAP_THREADS
	cr_assert_geq(now, 2, "this thread and the owner count");
#endif
	/* (in sanitizer builds pthread_create is the sanitizer's: no thread is counted, and
	 * the count is set to apps all the same; what is given back wraps to what it was) */
	__atomic_sub_fetch(&app_threads, now - apps, __ATOMIC_RELAXED);
	return now - apps;
}

static bool idle_joins = true; /* idle_owner waits counted as in pthread_join */

static void *idle_owner(void *arg)
{
	for (int i = 0; i < idle_n; i++)
		memset(idle_blocks[i] = A(malloc)(idle_size), 1, idle_size);
	struct arena *joined = idle_joins ? arena_join_wait() : NULL;
	pthread_barrier_wait(&idle_made);
	pthread_barrier_wait(&idle_done); /* idle: no refill, flush or large block */
	arena_join_done(joined);
	return arg;
}

/* The end of a lending test: this thread frees the blocks it took (taken_idle: a quarter of
 * idle_n) and own, lets idle_owner (t) end and frees the blocks it kept, and gives the
 * application threads apps_only took off back (others). */
static void idle_end(pthread_t t, void *own, uint32_t others)
{
	for (int i = 0; i < idle_n / 4; i++)
		A(free)(taken_idle[i]);
	A(free)(own);
	pthread_barrier_wait(&idle_done);
	pthread_join(t, NULL);
	for (int i = 3; i < idle_n; i += 4)
		A(free)(idle_blocks[i]);
	__atomic_add_fetch(&app_threads, others, __ATOMIC_RELAXED);
}

/* idle_owner's idle_n blocks (4 MiB) made and waiting; this thread frees 3 of every 4, allocates a quarter
 * as many blocks and frees them again: how many of those came from idle_owner's arena.
 * apps: the process's application threads meanwhile (app_threads; criterion's own
 * threads count too, the test binary's pthread_create being liballoc's) */
static int idle_lent(uint32_t apps)
{
	set("arena_max", 16);
	set("decay_ms", 60000);
	void *own = A(malloc)(32);
	pthread_t t;
	struct arena *idle = start_owner(&t, idle_owner, &idle_made, &idle_done, idle_blocks, own);
	uint32_t others = apps_only(apps);
	for (int i = 0; i < idle_n; i++)
		if (i % 4 != 3)
			A(free)(idle_blocks[i]);
	int lent = 0;
	for (int i = 0; i < idle_n / 4; i++) {
		taken_idle[i] = A(malloc)(idle_size);
		lent += heap_of(taken_idle[i])->arena == idle;
	}
	idle_end(t, own, others);
	return lent;
}

/* An arena whose one thread waits but not in pthread_join (a barrier here, a condition
 * variable or a poll in a program) may allocate at any moment: it keeps its freed blocks.
 * Its thread's work (refills, flushes) does not move while it waits, so a rule of one
 * thread and its work unchanged lent here too: in `larson 2 10000` the first worker
 * borrowed main's arena's blocks before main had started the second (session 39,
 * peak39). */
Test(remote_frees, an_arena_whose_thread_waits_outside_pthread_join_does_not_lend)
{
	idle_joins = false;
	int lent = idle_lent(2);
	cr_assert_eq(lent, 0, "%d of %d blocks came from the waiting arena", lent, IDLE_BLOCKS / 4);
}

/* A thread whose refill looked at idle_lender while more than two application threads
 * were alive (a worker beside others: larson 2's first worker once main has started the
 * second) never borrows, also once the others are gone (larson 2's first worker whose
 * sibling ended first, main then in pthread_join). */
Test(remote_frees, a_thread_that_saw_a_third_application_thread_does_not_borrow)
{
	idle_size = 2 * IDLE_SIZE; /* the second round's refills find none of these freed */
	int lent = idle_lent(3);
	cr_assert_eq(lent, 0, "%d blocks came from the waiting arena with threads about", lent);
	cr_assert(la_tcache.crowded, "a look found more than two application threads");
	/* (a few may come from the free pages the first owner's arena kept: lender) */
	idle_size = IDLE_SIZE;
	lent = idle_lent(2);
	cr_assert_lt(lent, IDLE_BLOCKS / 4 / 8,
	             "%d of %d blocks came from the waiting arena once they left", lent,
	             IDLE_BLOCKS / 4);
}

Test(remote_frees, a_thread_that_frees_an_idle_arenas_blocks_takes_them_back_before_new_pages)
{
	set("arena_max", 16);   /* a thread of its own per arena, whatever the machine's CPUs */
	set("decay_ms", 60000); /* no decay pass drains the other arena meanwhile */
	void *own = A(malloc)(32);
	pthread_t t;
	struct arena *idle = start_owner(&t, idle_owner, &idle_made, &idle_done, idle_blocks, own);
	uint32_t others = apps_only(2);
	struct arena *mine = heap_of(own)->arena;
	uint64_t dirty = free_resident_pages(idle);
	for (int i = 0; i < IDLE_BLOCKS; i++)
		if (i % 4 != 3) /* every span keeps blocks: freed blocks, no free pages */
			A(free)(idle_blocks[i]);
	int lent = 0;
	for (int i = 0; i < IDLE_BLOCKS / 4; i++) {
		memset(taken_idle[i] = A(malloc)(IDLE_SIZE), 2, IDLE_SIZE);
		lent += heap_of(taken_idle[i])->arena == idle;
	}
	/* (the first refill only looks: the other arena is idle once its work has not moved
	 * between two) */
	cr_assert_geq(lent, IDLE_BLOCKS / 4 * 7 / 8, "%d of %d blocks came from the idle arena",
	              lent, IDLE_BLOCKS / 4);
	cr_assert_eq(free_resident_pages(idle), dirty, "of its freed blocks, not its free pages");
	cr_assert_eq(heap_of(own)->arena, mine);
	idle_end(t, own, others);
}

/* Below IDLE_LEND_PAGES (2 MiB in spans) the idle arena keeps its freed blocks: the pages
 * saved would not pay for the remote frees of the blocks taken (larson 1 1000 200000 5:
 * 102M -> 149M instructions). The same with 1 MiB of blocks: none comes from it. As the
 * others, with this thread and the owner the only application threads (apps_only):
 * criterion's own threads count, and with them a look finds the thread crowded, which
 * lends nothing whatever the arena holds (with 0e797c5's test as it was, a bound of 0
 * pages passed it). */
Test(remote_frees, a_small_idle_arena_does_not_lend_its_freed_blocks)
{
	idle_n = IDLE_BLOCKS / 4;
	int lent = idle_lent(2);
	cr_assert_eq(lent, 0, "%d of %d blocks came from the idle arena", lent, idle_n / 4);
	cr_assert(!la_tcache.crowded, "(set-up) a look found more than two application threads");
}

/* A thread that grows an arena other threads share, while threads of other arenas free
 * that arena's blocks (a producer whose consumers run elsewhere), gives up its CPU once per
 * GROWTH_YIELD_PAGES pages its carvings reach first (arena.c, growth_yield): with more
 * threads than CPUs the consumers then run before it faults in more. Before any block of
 * the arena was freed elsewhere (consumers that have not run yet), once per
 * GROWTH_EARLY_PAGES and GROWTH_EARLY_YIELDS times at most; never in a thread that gives
 * blocks back to its own arena (sizemix's workers). Counted here: liballoc.a's calls of
 * sched_yield come to this one. */
static unsigned long yields;

int sched_yield(void)
{
	__atomic_fetch_add(&yields, 1, __ATOMIC_RELAXED);
	return (int)syscall(SYS_sched_yield);
}

enum { GROWN_BLOCKS = 2048 };
static void *grown[5][GROWN_BLOCKS];
static pthread_barrier_t sharer_joined, sharer_go;

/* Its first call frees a block of the test's thread: it joins that arena (one thread uses
 * it), which two threads then share, and stays until the test is done. */
static void *sharer(void *arg)
{
	A(free)(arg);
	pthread_barrier_wait(&sharer_joined);
	pthread_barrier_wait(&sharer_go);
	return NULL;
}

/* Allocates first (an arena of its own), then frees the test thread's blocks: remote. */
static void *consumer_of(void *arg)
{
	void **blocks = arg;
	A(free)(A(malloc)(32));
	for (int i = 0; i < GROWN_BLOCKS; i++)
		A(free)(blocks[i]);
	return NULL;
}

/* GROWN_BLOCKS blocks of size written into round r; the yields they took */
static unsigned long grow(int r, size_t size)
{
	unsigned long before = __atomic_load_n(&yields, __ATOMIC_RELAXED);
	for (int i = 0; i < GROWN_BLOCKS; i++)
		memset(grown[r][i] = A(malloc)(size), 1, size);
	return __atomic_load_n(&yields, __ATOMIC_RELAXED) - before;
}

Test(remote_frees, a_producer_gives_up_its_cpu_as_it_grows_while_other_threads_free_its_blocks)
{
	set("decay_ms", 60000); /* no decay pass returns or drains meanwhile */
	void *first = A(malloc)(32);
	struct arena *mine = heap_of(first)->arena;
	/* no new arena: the sharer joins this thread's, the one with the fewest threads */
	set("arena_max", __atomic_load_n(&arena_count, __ATOMIC_ACQUIRE));
	pthread_t t;
	pthread_barrier_init(&sharer_joined, NULL, 2);
	pthread_barrier_init(&sharer_go, NULL, 2);
	pthread_create(&t, NULL, sharer, first);
	pthread_barrier_wait(&sharer_joined);
	cr_assert_eq(__atomic_load_n(&mine->threads, __ATOMIC_RELAXED), 2, "the arena is shared");
	set("arena_max", 16); /* the consumer has an arena of its own, whatever the CPUs */
	cr_assert_eq(la_tcache.own_flushes, 0);
	/* 2 MiB of new pages, no block of the arena freed elsewhere yet: once per
	 * GROWTH_EARLY_PAGES (the consumers may not have had a CPU yet) */
	unsigned long n = grow(0, 1024), early = 512 / GROWTH_EARLY_PAGES;
	cr_assert(n + 1 >= early && n <= early + 1,
	          "%lu yields over 512 new pages before any "
	          "remote free",
	          n);
	/* 16 MiB more, still none: the yields stop at GROWTH_EARLY_YIELDS (a thread that only
	 * grows gives its CPU away a bounded number of times) */
	unsigned long m = grow(4, 8192);
	cr_assert_eq(n + m, GROWTH_EARLY_YIELDS,
	             "%lu + %lu yields over 4,608 new pages before "
	             "any remote free",
	             n, m);
	cr_assert_eq(mine->early_yields, GROWTH_EARLY_YIELDS);
	run_thread(consumer_of, grown[0]);
	cr_assert_not_null(mine->rr, "the consumer's frees came through the arena's ring");
	/* 4 MiB: the first 2 MiB in the pages the consumer's frees left (drained at the first
	 * refill), then at least 512 new ones */
	n = grow(1, 2048);
	unsigned long least = 512 / GROWTH_YIELD_PAGES, most = 1024 / GROWTH_YIELD_PAGES;
	cr_assert(n + 2 >= least && n <= most + 2, "%lu yields over 512-1,024 new pages", n);
	/* a thread that flushes full bins of its own arena's blocks as it grows gives blocks
	 * back to its arena (no producer of other threads' frees): the first 1 MiB of its
	 * last 4 MiB freed, then 8 MiB allocated, the rest of those 4 MiB freed three blocks
	 * in four beside them (4 MiB of them new pages), and its CPU kept */
	unsigned long before = __atomic_load_n(&yields, __ATOMIC_RELAXED);
	int f = 0;
	while (f < GROWN_BLOCKS / 4)
		A(free)(grown[1][f++]);
	for (int i = 0; i < GROWN_BLOCKS; i++) {
		memset(grown[2][i] = A(malloc)(4096), 1, 4096);
		if (i % 4 != 3 && f < GROWN_BLOCKS)
			A(free)(grown[1][f++]);
	}
	cr_assert_eq(f, GROWN_BLOCKS);
	n = __atomic_load_n(&yields, __ATOMIC_RELAXED) - before;
	cr_assert_eq(n, 0, "%lu yields of a thread that frees its own blocks", n);
	cr_assert_gt(la_tcache.own_flushes, 0);
	/* one that stopped freeing its own blocks is a producer again once TC_OWN_FLUSH_SWEEPS
	 * cold-bin sweeps (256 refills and flushes) passed without such a flush: 8 MiB of new
	 * pages, 67 yields (before own_flushes counted down, 0) */
	n = grow(3, 4096);
	cr_assert_geq(n, 512 / GROWTH_YIELD_PAGES, "%lu yields over 2,048 new pages", n);
	cr_assert_eq(la_tcache.own_flushes, 0);
	for (int r = 2; r < 5; r++)
		for (int i = 0; i < GROWN_BLOCKS; i++)
			A(free)(grown[r][i]);
	pthread_barrier_wait(&sharer_go);
	pthread_join(t, NULL);
}

/* ---- the arena a new thread takes ---------------------------------------------------- */

/* larson's generations: each worker's slots go to a new thread, which frees the blocks its
 * predecessor allocated. A successor takes the arena of the blocks it frees first when no
 * thread uses it; one whose blocks are the main thread's joins the main thread's arena
 * rather than take the arena the other worker left, whose blocks its successor frees. */
enum { HELD_BLOCKS = 2000, HELD_SIZE = 200 }; /* ~100 pages in use: ARENA_HELD_PAGES up */
static void *held_main[HELD_BLOCKS], *held_worker[HELD_BLOCKS];
static pthread_barrier_t heirs_attached;

static void *held_predecessor(void *arg)
{
	for (int i = 0; i < HELD_BLOCKS; i++)
		held_worker[i] = A(malloc)(HELD_SIZE);
	return arg;
}

struct heir {
	void **blocks;       /* its predecessor's: its first call frees blocks[0] */
	struct arena *arena; /* the arena it attached to */
};

static void *heir(void *arg)
{
	struct heir *h = arg;
	A(free)(h->blocks[0]);
	h->arena = la_tcache.arena;
	pthread_barrier_wait(&heirs_attached); /* both attached before either leaves */
	return NULL;
}

static void start_heirs(struct heir *first, struct heir *second)
{
	pthread_t t[2];
	pthread_barrier_init(&heirs_attached, NULL, 3);
	pthread_create(&t[0], NULL, heir, first);
	while (!__atomic_load_n(&first->arena, __ATOMIC_RELAXED))
		sched_yield(); /* the first attaches before the second starts */
	pthread_create(&t[1], NULL, heir, second);
	pthread_barrier_wait(&heirs_attached);
	pthread_join(t[0], NULL);
	pthread_join(t[1], NULL);
}

Test(arena_choice, a_successor_takes_the_arena_of_the_blocks_it_frees_first)
{
	for (int i = 0; i < HELD_BLOCKS; i++)
		held_main[i] = A(malloc)(HELD_SIZE);
	struct arena *main_arena = la_tcache.arena;
	/* one arena more than those in use (this thread's; the test runner's, if it allocates
	 * in a thread of its own), whatever the CPUs */
	uint32_t in_use = __atomic_load_n(&arena_count, __ATOMIC_ACQUIRE);
	set("arena_max", in_use + 1);
	run_thread(held_predecessor, NULL);
	struct arena *left = heap_of(held_worker[0])->arena;
	cr_assert_neq(left, main_arena, "the predecessor had an arena of its own");
	cr_assert_eq(__atomic_load_n(&left->threads, __ATOMIC_RELAXED), 0, "it left it");
	/* the successor of the main thread's blocks attaches first: it leaves the arena that
	 * holds the other worker's blocks to that worker's successor */
	struct heir of_main = {.blocks = held_main}, of_worker = {.blocks = held_worker + 1};
	start_heirs(&of_main, &of_worker);
	cr_assert_eq(of_main.arena, main_arena, "the main thread's blocks' heir took arena %u",
	             of_main.arena->index);
	cr_assert_eq(of_worker.arena, left, "the worker's blocks' heir took arena %u",
	             of_worker.arena->index);
	/* and in the other order (the arena is left again, its blocks with it) */
	struct heir of_worker2 = {.blocks = held_worker + 2}, of_main2 = {.blocks = held_main + 1};
	start_heirs(&of_worker2, &of_main2);
	cr_assert_eq(of_worker2.arena, left);
	cr_assert_eq(of_main2.arena, main_arena);
}

/* ---- a full bin's flush that finds its arena locked --------------------------------- */

/* Holds the lock of its arena (shared with the test's thread: arena_max 1), from a thread
 * of its own, until told to let go (20 s at most: a flush that waits for the lock fails
 * the test instead of hanging it). */
struct lock_holder {
	struct arena *a;
	pthread_t t;
	pthread_mutex_t m;
	pthread_cond_t cv;
	bool held, release, released; /* under m */
	bool done;                    /* the frees returned (atomic) */
	bool shared;                  /* hold_lock's thread uses the arena too */
	bool linger; /* under m: after letting go, the thread stays until it is cleared (its
	              * exit would drain the ring: arena_detach) */
};

static void *hold_lock(void *arg)
{
	struct lock_holder *h = arg;
	A(free)(A(malloc)(64)); /* attached to the arena: it has two threads */
	h->shared = tcache_arena(&la_tcache) == h->a;
	arena_lock(h->a);
	pthread_mutex_lock(&h->m);
	h->held = true;
	pthread_cond_broadcast(&h->cv);
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 20;
	while (!h->release && pthread_cond_timedwait(&h->cv, &h->m, &until) == 0)
		;
	h->released = true; /* before the unlock: a flush that saw it took the lock after */
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->m);
	arena_unlock(h->a);
	pthread_mutex_lock(&h->m);
	while (h->linger)
		pthread_cond_wait(&h->cv, &h->m);
	pthread_mutex_unlock(&h->m);
	return NULL;
}

static void lock_holder_start(struct lock_holder *h, struct arena *a)
{
	*h = (struct lock_holder){.a = a};
	pthread_mutex_init(&h->m, NULL);
	pthread_cond_init(&h->cv, NULL);
	pthread_create(&h->t, NULL, hold_lock, h);
	pthread_mutex_lock(&h->m);
	while (!h->held)
		pthread_cond_wait(&h->cv, &h->m);
	pthread_mutex_unlock(&h->m);
}

/* Lets go of the lock; returns whether it was still held when asked to (no time-out). */
static bool lock_holder_stop(struct lock_holder *h)
{
	pthread_mutex_lock(&h->m);
	bool still = !h->released;
	h->release = true;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->m);
	pthread_join(h->t, NULL);
	return still;
}

enum { DEFER_BLOCKS = 3 * TC_MAX_BLOCKS };
static void *defer_p[DEFER_BLOCKS];

/* This thread's 64-byte blocks, allocated, freed and allocated again (the arena's
 * transfer cache set up by those flushes, under the lock), then all freed while another
 * thread holds the arena's lock: returns how many blocks the bin held before. */
static uint32_t free_all_while_locked(struct lock_holder *h)
{
	set("arena_max", 1); /* the holder's thread shares this thread's arena */
	for (int i = 0; i < DEFER_BLOCKS; i++)
		defer_p[i] = A(malloc)(64);
	for (int i = 0; i < DEFER_BLOCKS; i++)
		A(free)(defer_p[i]);
	for (int i = 0; i < DEFER_BLOCKS; i++)
		defer_p[i] = A(malloc)(64);
	uint32_t had = tcache_count(sc_class_of(64));
	lock_holder_start(h, tcache_arena(&la_tcache));
	for (int i = 0; i < DEFER_BLOCKS; i++)
		A(free)(defer_p[i]);
	return had;
}

Test(cache_flush, a_full_bin_whose_arena_is_locked_hands_its_blocks_to_the_ring_unwaited)
{
	set("decay_ms", 0); /* no decay pass: only this thread's refill drains */
	unsigned cls = sc_class_of(64);
	struct la_counters before = stats();
	struct lock_holder h;
	uint32_t had = free_all_while_locked(&h);
	struct arena *a = h.a;
	uint64_t ringed = a->rr_head - a->rr_tail;
	uint32_t left = tcache_count(cls);
	cr_assert(lock_holder_stop(&h), "the frees waited for the arena's lock");
	cr_assert(h.shared, "the holder's thread took an arena of its own");
	struct la_counters mid = stats();
	cr_assert_eq(ringed, had + DEFER_BLOCKS - left, "in the ring: %llu of the %u flushed",
	             (unsigned long long)ringed, had + DEFER_BLOCKS - left);
	cr_assert_geq(mid.cache_flushes_deferred - before.cache_flushes_deferred, 2);
	cr_assert_eq(mid.remote_frees_queued, before.remote_frees_queued, "no remote free");
	/* the arena's next refill drains them, and does not count them as remote frees */
	for (int i = 0; i < DEFER_BLOCKS; i++)
		defer_p[i] = A(malloc)(64);
	cr_assert_eq(a->rr_head, a->rr_tail, "the refill drained the ring");
	struct la_counters after = stats();
	cr_assert_eq(
	        after.remote_frees_drained, before.remote_frees_drained,
	        "drained as remote frees: %llu",
	        (unsigned long long)(after.remote_frees_drained - before.remote_frees_drained));
	cr_assert_eq(after.cache_flushes_deferred, mid.cache_flushes_deferred);
	for (int i = 0; i < DEFER_BLOCKS; i++)
		A(free)(defer_p[i]);
}

/* Holds an arena's lock from a thread that uses no arena (as the control thread's
 * maintenance does) until a thread sleeps in the lock (the kernel marks the word), or the
 * frees returned without. */
static void *hold_lock_unattached(void *arg)
{
	struct lock_holder *h = arg;
	arena_lock(h->a);
	pthread_mutex_lock(&h->m);
	h->held = true;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->m);
	while (!(__atomic_load_n(&h->a->lock.word, __ATOMIC_RELAXED) & FUTEX_WAITERS) &&
	       !__atomic_load_n(&h->done, __ATOMIC_RELAXED))
		sched_yield();
	pthread_mutex_lock(&h->m);
	h->released = true;
	pthread_mutex_unlock(&h->m);
	arena_unlock(h->a);
	return NULL;
}

Test(cache_flush, the_only_thread_of_an_arena_waits_for_the_lock_and_flushes_to_the_spans)
{
	set("decay_ms", 0);
	set("arena_max", 16); /* the holder's thread, if glibc allocates in it, in another */
	struct la_counters before = stats();
	for (int i = 0; i < DEFER_BLOCKS; i++)
		defer_p[i] = A(malloc)(64);
	struct arena *a = tcache_arena(&la_tcache);
	cr_assert_eq(__atomic_load_n(&a->threads, __ATOMIC_RELAXED), 1, "the arena's only thread");
	struct lock_holder h = {.a = a};
	pthread_mutex_init(&h.m, NULL);
	pthread_cond_init(&h.cv, NULL);
	pthread_create(&h.t, NULL, hold_lock_unattached, &h);
	pthread_mutex_lock(&h.m);
	while (!h.held)
		pthread_cond_wait(&h.cv, &h.m);
	pthread_mutex_unlock(&h.m);
	for (int i = 0; i < DEFER_BLOCKS; i++)
		A(free)(defer_p[i]);
	pthread_mutex_lock(&h.m);
	bool waited = h.released;
	pthread_mutex_unlock(&h.m);
	__atomic_store_n(&h.done, true, __ATOMIC_RELAXED);
	pthread_join(h.t, NULL);
	struct la_counters after = stats();
	cr_assert(waited, "the flush did not wait for the lock");
	cr_assert_eq(after.cache_flushes_deferred, before.cache_flushes_deferred);
	cr_assert_geq(after.cache_flushes - before.cache_flushes, 2, "flushed under the lock");
}

/* (the test's own process: a forked child may have more arenas than threads, and its
 * holder would take one of its own) */
Test(cache_flush, a_block_freed_again_while_its_flush_waits_in_the_ring_is_a_double_free,
     .signal = SIGABRT)
{
	struct lock_holder h;
	free_all_while_locked(&h);
	/* the holder lets go of the lock but does not end: its exit would drain the ring */
	pthread_mutex_lock(&h.m);
	h.linger = true;
	h.release = true;
	pthread_cond_broadcast(&h.cv);
	while (!h.released)
		pthread_cond_wait(&h.cv, &h.m);
	pthread_mutex_unlock(&h.m);
	cr_assert_neq(h.a->rr_head, h.a->rr_tail, "the flushes wait in the ring");
	A(free)(defer_p[0]); /* the oldest: flushed first, in the ring */
}

/* ---- a trim asked for only what is needed (LA_MB_GOAL: allocctld's policies) ------------ */

static uint64_t trim_command(int64_t goal)
{
	struct la_mailbox mb;
	memset(&mb, 0, sizeof(mb));
	mb.command = LA_CMD_trim;
	if (goal) {
		mb.flags = LA_MB_GOAL;
		mb.value = goal;
	}
	control_execute(&mb);
	cr_assert_eq(mb.status, LA_ST_OK, "%s", mb.reason);
	return mb.bytes_released;
}

Test(trim_goal, it_stops_once_that_much_came_back_and_a_second_trim_takes_the_rest)
{
	set("mmap_threshold", 1 << 20);
	set("trim_threshold", 1 << 30);
	enum { N = 1024 }; /* 64 MiB of 64 KiB blocks; every 8th kept: free runs of 448 KiB */
	static char *blocks[N];
	for (int i = 0; i < N; i++)
		memset(blocks[i] = A(malloc)(64 * 1024), 1, 64 * 1024);
	for (int i = 0; i < N; i++)
		if (i % 8)
			A(free)(blocks[i]);
	uint64_t held = stats().free_resident_bytes;
	cr_assert_geq(held, 40u << 20, "free resident before: %llu", (unsigned long long)held);
	uint64_t first = trim_command(8 << 20);
	cr_assert_geq(first, 8u << 20, "released %llu", (unsigned long long)first);
	cr_assert_lt(first, 10u << 20, "went on past the goal: %llu", (unsigned long long)first);
	uint64_t rest = trim_command(0);
	cr_assert_geq(first + rest, held - (4u << 20), "first %llu, rest %llu of %llu",
	              (unsigned long long)first, (unsigned long long)rest,
	              (unsigned long long)held);
	for (int i = 0; i < N; i += 8)
		A(free)(blocks[i]);
}
