/* refill.c — a thread-cache refill takes freed blocks in batches and carves new ones in
 * batches of bounded bytes; the decay pass returns only bins left unused; and the number
 * parser the /proc readers use instead of strtol. Linked with liballoc.a; every test runs
 * in its own process. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "api/child.h"
#include "arena.h"
#include "common.h"
#include "liballoc.h"
#include "os.h"
#include "shm.h"
#include "sizeclass.h"
#include "tcache.h"
#include "../helpers/seccomp_one.h"

Test(refill, freed_blocks_come_back_in_batches)
{
	/* once blocks were freed to their span, a refill takes many at once (up to half the
	 * cache's limit + 1; 3/4 of it for blocks up to 48 bytes): recycling them touches no
	 * new memory */
	void *p[2000];
	for (int i = 0; i < 2000; i++)
		p[i] = A(malloc)(512);
	for (int i = 0; i < 2000; i++)
		A(free)(p[i]);
	struct la_counters c0, c1;
	liballoc_stats(&c0);
	for (int i = 0; i < 2000; i++)
		p[i] = A(malloc)(512);
	liballoc_stats(&c1);
	cr_assert_gt(c1.cache_refills, c0.cache_refills, "the blocks came through refills");
	cr_assert_lt(c1.cache_refills - c0.cache_refills, 2000 / 8, "%llu refills for 2000 blocks",
	             (unsigned long long)(c1.cache_refills - c0.cache_refills));
	for (int i = 0; i < 2000; i++)
		A(free)(p[i]);
}

/* The largest refill of freed blocks of size bytes among N mallocs after N frees (each
 * malloc that refilled leaves its bin holding the refill's blocks but one), and the bin's
 * limit then; every refill at most most_of(limit) blocks. */
struct refill_seen {
	uint32_t most, limit;
};

static struct refill_seen largest_refill(size_t size, uint32_t (*most_of)(uint32_t))
{
	char reason[128];
	cr_assert_eq(liballoc_set("decay_ms", 0, reason, sizeof(reason)), 0, "%s", reason);
	enum { N = 4000 };
	static void *p[N];
	unsigned cls = sc_class_of(size);
	for (int i = 0; i < N; i++)
		p[i] = A(malloc)(size);
	for (int i = 0; i < N; i++)
		A(free)(p[i]);
	struct refill_seen r = {0, 0};
	for (int i = 0; i < N; i++) {
		uint32_t before = tcache_count(cls);
		p[i] = A(malloc)(size);
		cr_assert_not_null(p[i]);
		uint32_t after = tcache_count(cls), lim = la_tcache.bins[cls].limit;
		if (before == 0 && after + 1 > r.most) { /* a refill of after + 1 blocks */
			r.most = after + 1;
			r.limit = lim;
		}
		cr_assert_leq(after + 1, most_of(lim),
		              "%zu bytes: a refill of %u blocks at a limit of %u", size, after + 1,
		              lim);
	}
	for (int i = 0; i < N; i++)
		A(free)(p[i]);
	return r;
}

static uint32_t three_quarters(uint32_t limit)
{
	return limit - limit / 4;
}

static uint32_t half_and_one(uint32_t limit)
{
	return limit / 2 + 1;
}

/* A refill of freed blocks up to 48 bytes takes up to three quarters of the bin's limit
 * (its fixed cost over more blocks), not half + 1: a structure freed whole, then built
 * again (nbody_tree's tree, logicmin's cubes), refills a quarter less often. */
Test(refill, a_refill_of_freed_blocks_up_to_48_bytes_takes_three_quarters_of_the_limit)
{
	struct refill_seen r = largest_refill(48, three_quarters);
	cr_assert_gt(r.most, half_and_one(r.limit),
	             "the largest refill took %u blocks at a limit of %u", r.most, r.limit);
}

/* Above 48 bytes a refill of freed blocks takes at most half the bin's limit + 1: the
 * deeper refills up to 128 bytes raised the cpython row's faults 8,730 -> 8,851 (e853a0d) */
Test(refill, a_refill_of_freed_blocks_of_64_bytes_takes_at_most_half_the_limit_and_one)
{
	struct refill_seen r = largest_refill(64, half_and_one);
	cr_assert_gt(r.most, 1, "refills of freed blocks seen (the largest %u blocks)", r.most);
}

/* Blocks a refill left in this thread's cache, never handed out: taking them first makes
 * the bin empty, so what follows starts from a refill. */
struct leftovers {
	void *p[TC_MAX_BLOCKS];
	unsigned n;
};

static void take_leftovers(size_t size, struct leftovers *l)
{
	unsigned cls = sc_class_of(size);
	l->n = 0;
	while (tcache_count(cls) && l->n < TC_MAX_BLOCKS)
		l->p[l->n++] = A(malloc)(size);
}

static void free_leftovers(struct leftovers *l)
{
	for (unsigned i = 0; i < l->n; i++)
		A(free)(l->p[i]);
}

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
	return x < y ? -1 : x > y;
}

Test(refill, freed_blocks_are_reused_before_new_ones_are_carved)
{
	/* every other one of 600 blocks of 448 bytes freed (so no span empties and goes back
	 * to its heap): the next 300 allocations of that size are exactly those blocks, so
	 * the class touches no new memory while freed blocks remain */
	enum { N = 300 };
	void *all[2 * N], *freed[N], *again[N];
	for (int i = 0; i < 2 * N; i++)
		all[i] = A(malloc)(440);
	struct leftovers left;
	take_leftovers(440, &left);
	for (int i = 0; i < N; i++) {
		freed[i] = all[2 * i];
		A(free)(freed[i]);
	}
	for (int i = 0; i < N; i++)
		again[i] = A(malloc)(440);
	qsort(freed, N, sizeof(void *), cmp_ptr);
	qsort(again, N, sizeof(void *), cmp_ptr);
	for (int i = 0; i < N; i++)
		cr_assert_eq(again[i], freed[i], "allocation %d is a block that was not freed", i);
	for (int i = 0; i < N; i++) {
		A(free)(again[i]);
		A(free)(all[2 * i + 1]);
	}
	free_leftovers(&left);
}

/* The blocks this thread's cache holds of a class (exact: only this thread touches it). */
static uint64_t cached_bytes(size_t size)
{
	unsigned cls = sc_class_of(size);
	return (uint64_t)tcache_count(cls) * sc_size[cls];
}

/* What the thread cache holds after each of n allocations of size bytes never exceeds
 * one refill of SC_BATCH_BYTES (or of 4 blocks, for the larger classes): the cache adds at
 * most that to the blocks a class hands out beyond its live ones. Returns the most it
 * held. */
static uint64_t most_cached(size_t size, int n)
{
	void **p = A(malloc)(sizeof(void *) * (size_t)n);
	cr_assert_not_null(p);
	unsigned cls = sc_class_of(size);
	uint64_t bound = LA_MAX((uint64_t)SC_BATCH_BYTES, 4u * (uint64_t)sc_size[cls]);
	/* (a mapping the test runner freed may have left a heap its pages, resident: a span
	 * made of them would be carved without the bound) */
	A(malloc_trim)(0);
	struct leftovers left;
	take_leftovers(size, &left);
	uint64_t most = 0;
	for (int i = 0; i < n; i++) {
		p[i] = A(malloc)(size);
		cr_assert_not_null(p[i]);
		uint64_t held = cached_bytes(size);
		cr_assert_lt(held, bound, "%zu-byte blocks: %llu bytes cached after %d", size,
		             (unsigned long long)held, i + 1);
		most = held > most ? held : most;
	}
	for (int i = 0; i < n; i++)
		A(free)(p[i]);
	free_leftovers(&left);
	A(free)(p);
	return most;
}

/* Each in a process of its own: pages no span used before (a span made of pages another
 * span gave back is carved without this bound: they are resident already). */
Test(refill, a_refill_carves_four_blocks_of_512_bytes)
{
	cr_assert_eq(most_cached(512, 300), 3 * 512);
}

Test(refill, a_refill_carves_its_batch_of_48_byte_blocks)
{
	/* SC_BATCH_BYTES of them, or a refill's batch (at most 3/4 of the bin's limit) */
	uint32_t batch = LA_MIN(SC_BATCH_BYTES / 48, TC_MAX_BLOCKS - TC_MAX_BLOCKS / 4);
	cr_assert_eq(most_cached(48, 2000), (batch - 1) * 48);
}

Test(refill, a_refill_carves_at_most_its_bytes_of_16_byte_blocks)
{
	cr_assert_leq(most_cached(16, 2000), SC_BATCH_BYTES);
}

Test(refill, the_first_refill_of_a_large_class_takes_one_block)
{
	/* a program that allocates one 14 KB buffer does not touch four (a class nothing
	 * else in this process uses: its cache state is the initial one) */
	struct la_counters c0, c1;
	liballoc_stats(&c0);
	void *volatile p = A(malloc)(14000);
	cr_assert_not_null(p);
	liballoc_stats(&c1);
	cr_assert_geq(c1.cache_refills - c0.cache_refills, 1, "the block came through a refill");
	cr_assert_eq(cached_bytes(14000), 0, "nothing was left in the cache");
	/* the next refills double: two blocks, then four */
	void *volatile q = A(malloc)(14000);
	cr_assert_eq(cached_bytes(14000), sc_size[sc_class_of(14000)],
	             "the second refill took two blocks");
	A(free)(q);
	A(free)(p);
}

Test(refill, a_stream_of_32_kib_blocks_refills_and_flushes_several_at_a_time)
{
	/* a batch of 256 blocks of the largest class allocated, then freed (a sweep's batch):
	 * its bin holds 6 of them (three quarters of tcache_max_bytes), so refills take up to 4
	 * and flushes send 3; with 2 (a quarter), every refill took 2 and every flush 1 */
	enum { N = 256 };
	static void *p[N];
	unsigned cls = sc_class_of(32768);
	cr_assert_eq(sc_size[cls], 32768);
	struct la_counters c0, c1, c2;
	liballoc_stats(&c0);
	for (int i = 0; i < N; i++) {
		p[i] = A(malloc)(32768);
		cr_assert_not_null(p[i]);
	}
	liballoc_stats(&c1);
	for (int i = 0; i < N; i++)
		A(free)(p[i]);
	liballoc_stats(&c2);
	uint64_t refills = c1.cache_refills - c0.cache_refills;
	uint64_t flushes = c2.cache_flushes - c1.cache_flushes;
	cr_assert_lt(refills, N / 3, "%llu refills for %d blocks", (unsigned long long)refills, N);
	cr_assert_lt(flushes, N / 2, "%llu flushes for %d blocks", (unsigned long long)flushes, N);
	cr_assert_leq(tcache_count(cls), 6, "%u blocks held", tcache_count(cls));
}

Test(parse_long, reads_the_number_after_blanks)
{
	cr_assert_eq(la_parse_long("42"), 42);
	cr_assert_eq(la_parse_long(" \t 7\n"), 7);
	cr_assert_eq(la_parse_long("123.seg"), 123);
	cr_assert_eq(la_parse_long("0"), 0);
	cr_assert_eq(la_parse_long("9223372036854775807"), 9223372036854775807L);
}

Test(parse_long, rejects_what_is_not_a_number)
{
	cr_assert_eq(la_parse_long(""), -1);
	cr_assert_eq(la_parse_long("abc"), -1);
	cr_assert_eq(la_parse_long("-5"), -1);
	cr_assert_eq(la_parse_long("\n5"), -1);
	cr_assert_eq(la_parse_long("9223372036854775808"), -1, "overflow");
	cr_assert_eq(la_parse_long("99999999999999999999999"), -1, "overflow");
}

/* The bin of 1000-byte blocks, refilled and flushed just now and holding blocks. */
static struct tbin *refilled_bin(void)
{
	struct tbin *b = &la_tcache.bins[sc_class_of(1000)];
	void *p[64];
	for (int i = 0; i < 64; i++)
		p[i] = A(malloc)(1000);
	for (int i = 0; i < 64; i++)
		A(free)(p[i]);
	cr_assert_gt(tbin_count(b), 0);
	return b;
}

/* The decay pass returns a bin only when it saw no refill and no flush for a whole pass:
 * blocks of a size the thread stopped using go back to their spans, a bin in use stays. */
Test(decay, only_bins_unused_for_a_whole_pass_are_returned)
{
	struct tbin *b = refilled_bin();
	uint32_t held = tbin_count(b);
	tcache_flush_cold();
	cr_assert_eq(tbin_count(b), held, "refilled and flushed since the last pass: kept");
	void *q = A(malloc)(1000); /* from the cache: no refill */
	A(free)(q);
	tcache_flush_cold();
	cr_assert_eq(tbin_count(b), 0, "no refill or flush for a whole pass: returned");
	q = A(malloc)(1000); /* a refill */
	A(free)(q);
	held = tbin_count(b);
	cr_assert_gt(held, 0);
	tcache_flush_cold();
	cr_assert_eq(tbin_count(b), held, "refilled since the last pass: kept");
}

/* Another thread's flush of this thread's cache (allocctl flush, the decay pass) points
 * its fast paths at the idle bins for the time it holds the cache (tcache.h): once it
 * gives the cache back, both fast paths use the cache's own bins again, and a free goes
 * into the bin with no slow path. */
struct flushed_thread {
	pthread_barrier_t filled, flushed;
	uint32_t held;
};

static void *fill_then_check_after_flush(void *arg)
{
	struct flushed_thread *ft = arg;
	unsigned cls = sc_class_of(1000);
	void *p[64];
	for (int i = 0; i < 64; i++)
		p[i] = A(malloc)(1000);
	for (int i = 0; i < 64; i++)
		A(free)(p[i]);
	ft->held = tcache_count(cls);
	pthread_barrier_wait(&ft->filled);
	pthread_barrier_wait(&ft->flushed);
	cr_assert_eq(tcache_count(cls), 0, "the flush emptied the bin (%u blocks before)",
	             ft->held);
	cr_assert(la_tcache.bins_at == la_tcache.bins,
	          "free's and malloc's fast paths have their bins back");
	struct la_counters c0, c1;
	void *q = A(malloc)(1000); /* a refill */
	uint32_t left = tcache_count(cls);
	liballoc_stats(&c0);
	A(free)(q);
	q = A(malloc)(1000);
	A(free)(q);
	liballoc_stats(&c1);
	cr_assert_eq(tcache_count(cls), left + 1, "the block went back into the bin");
	cr_assert_eq(c1.cache_refills + c1.cache_flushes, c0.cache_refills + c0.cache_flushes,
	             "from and into the cache");
	return NULL;
}

Test(tcache, a_cache_another_thread_flushed_gets_its_fast_paths_back)
{
	struct flushed_thread ft;
	pthread_barrier_init(&ft.filled, NULL, 2);
	pthread_barrier_init(&ft.flushed, NULL, 2);
	pthread_t t;
	pthread_create(&t, NULL, fill_then_check_after_flush, &ft);
	pthread_barrier_wait(&ft.filled);
	cr_assert_gt(ft.held, 0, "the thread's bin holds blocks");
	uint32_t skipped = 1;
	uint64_t n = 0;
	/* the thread waits at the barrier (outside the allocator): a flush takes its cache
	 * at the first try unless the kernel refuses membarrier; retried for a busy machine */
	for (int i = 0; i < 100 && skipped; i++)
		n += tcache_flush_all(&skipped);
	cr_assert_eq(skipped, 0, "the idle thread's cache was taken");
	cr_assert_geq(n, ft.held, "%llu blocks flushed", (unsigned long long)n);
	pthread_barrier_wait(&ft.flushed);
	pthread_join(t, NULL);
}

/* A flusher's take (tcache.c, take_cache) stores every class's divert bit, then the idle
 * bins, then looks at `busy`. An owner operation that found its own bins before the second
 * store and its empty bin's bit set (the first) goes to its list (tcache_alloc_list), whose
 * list_take, finding no list to take, stores the owner's list-mode mask in divert
 * (lists_mode): when that store lands after the flusher's and the owner leaves before the
 * look at `busy`, the take holds the cache with no class diverted. malloc's fast path then
 * found the idle bins, read the mask, and refilled the owner's own bin while the flusher was
 * emptying it (tcache_alloc_refill): the bin's top moved under the flush, and blocks were
 * handed out twice (forkfree 200 4 commands with LIBALLOC_DECAY_MS=1 and liballoc_flush_caches
 * from its commander thread: a parent's SIGSEGV in 1 of 30-70 runs). Here the cache is put
 * in that state by hand (held: `steal`, the idle bins; the mask the owner stored) and a
 * malloc of a class whose bin is empty must leave the bin alone. */
Test(tcache, a_malloc_that_finds_the_idle_bins_leaves_its_own_bins_alone)
{
	struct tcache *tc = &la_tcache;
	unsigned cls = sc_class_of(64);
	void *p[128];
	for (int r = 0; r < 4; r++) { /* the bin's refills grow to their full batch */
		for (int i = 0; i < 128; i++)
			p[i] = A(malloc)(64);
		for (int i = 0; i < 128; i++)
			A(free)(p[i]);
	}
	uint32_t skipped = 0;
	tcache_flush_all(&skipped); /* the caller's own cache too */
	cr_assert_eq(tcache_count(cls), 0, "the bin is empty");
	cr_assert_eq(tc->lists_out, 0, "no class in list mode");
	/* held by a flusher whose take the owner's lists_mode store outran */
	__atomic_store_n(&tc->steal, 1, __ATOMIC_SEQ_CST);
	__atomic_store_n(&tc->bins_at, TC_IDLE_BINS, __ATOMIC_SEQ_CST);
	__atomic_store_n(&tc->divert, tc->lists_out, __ATOMIC_SEQ_CST);
	void *q = A(malloc)(64);
	void **top = tc->bins[cls].top, **slot = tc->bins[cls].slot;
	/* given back */
	__atomic_store_n(&tc->bins_at, tc->bins, __ATOMIC_SEQ_CST);
	__atomic_store_n(&tc->divert, tc->lists_out, __ATOMIC_SEQ_CST);
	__atomic_store_n(&tc->steal, 0, __ATOMIC_SEQ_CST);
	cr_assert_not_null(q);
	cr_assert(top == slot, "the held bin was refilled: %td blocks in it", top - slot);
	A(free)(q);
}

/* A full bin's flush (tcache_free_full) keeps errno through the pointer the thread's cache
 * took at its set-up: the thread's own errno, in every thread, and in a forked child (the
 * forking thread's, at the same address). Frees of 48-byte blocks past the bin's limit,
 * errno set before each, read after each. */
static const char *flushes_keep_errno(void)
{
	void *p[300];
	for (int i = 0; i < 300; i++)
		p[i] = A(malloc)(48);
	if (la_tcache.errp != &errno)
		return "the cache's errno pointer is not this thread's errno";
	struct la_counters c0, c1;
	liballoc_stats(&c0);
	for (int i = 0; i < 300; i++) {
		errno = 4242 + i;
		A(free)(p[i]);
		if (errno != 4242 + i)
			return "a free changed errno";
	}
	liballoc_stats(&c1);
	/* (a flush that found the arena's lock taken, with another thread on the arena, may go
	 * to the arena's ring: counted deferred) */
	if (c1.cache_flushes + c1.cache_flushes_deferred <=
	    c0.cache_flushes + c0.cache_flushes_deferred)
		return "no full bin flushed";
	return NULL;
}

static void *flushes_keep_errno_thread(void *arg)
{
	(void)arg;
	return (void *)flushes_keep_errno();
}

Test(tcache, a_full_bin_s_flush_keeps_the_thread_s_errno)
{
	const char *why = flushes_keep_errno();
	cr_assert_null(why, "main thread: %s", why);
	pthread_t t;
	void *r;
	pthread_create(&t, NULL, flushes_keep_errno_thread, NULL);
	pthread_join(t, &r);
	cr_assert_null(r, "second thread: %s", (const char *)r);
	pid_t pid = fork();
	if (pid == 0)
		_exit(flushes_keep_errno() ? 1 : 0);
	int st = 0;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "forked child: status %d", st);
}

/* A full bin's flush that waits for its arena's lock keeps errno: the lock's wait can set it
 * (la_lock_slow: FUTEX_LOCK_PI's error, here ENOSYS from a seccomp filter on the flushing
 * thread alone, after which it polls the lock with la_trylock). In a forked child: a second
 * thread, never attached to the arena (it only takes the lock), holds the arena's lock
 * while the first frees 300 blocks of 48 bytes past their bin's limit, and lets it go after
 * a while. The result goes out through the exit status. */
static struct arena *errno_lock_arena;
static int errno_lock_held;

static void *hold_arena_lock(void *arg)
{
	(void)arg;
	arena_lock(errno_lock_arena);
	__atomic_store_n(&errno_lock_held, 1, __ATOMIC_RELEASE);
	struct timespec ts = {0, 300 * 1000 * 1000}; /* the flusher reaches the futex first */
	nanosleep(&ts, NULL);
	arena_unlock(errno_lock_arena);
	return NULL;
}

static int flush_waits_and_keeps_errno(void)
{
	void *p[300];
	for (int i = 0; i < 300; i++)
		p[i] = A(malloc)(48);
	errno_lock_arena = la_tcache.arena;
	pthread_t t;
	if (pthread_create(&t, NULL, hold_arena_lock, NULL) != 0)
		return 10;
	while (!__atomic_load_n(&errno_lock_held, __ATOMIC_ACQUIRE))
		sched_yield();
	if (__atomic_load_n(&errno_lock_arena->threads, __ATOMIC_RELAXED) != 1)
		return 11; /* (the holder attached: a flush would hand its blocks to the ring) */
	struct la_counters c0, c1;
	liballoc_stats(&c0);
	if (seccomp_one(SYS_futex, SECCOMP_RET_ERRNO | ENOSYS) != 0)
		return 12;
	int changed = 0;
	for (int i = 0; i < 300; i++) {
		errno = 4242 + i;
		A(free)(p[i]);
		changed += errno != 4242 + i;
	}
	liballoc_stats(&c1);
	if (c1.lock_contended <= c0.lock_contended)
		return 13; /* no flush waited for the lock */
	return changed ? 1 : 0;
}

Test(tcache, a_full_bin_s_flush_that_waits_for_the_lock_keeps_errno)
{
#ifndef SECCOMP_ONE_ARCH
	cr_skip_test("no seccomp filter for this architecture");
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	/* (the runtime's own locks in the filtered thread would find no futex either) */
	cr_skip_test("a sanitizer's runtime");
#endif
	pid_t pid = fork();
	if (pid == 0)
		_exit(flush_waits_and_keeps_errno());
	int st = 0;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st), "child: status %d", st);
	cr_assert_neq(WEXITSTATUS(st), 1, "a free whose flush waited for the lock changed errno");
	cr_assert_eq(WEXITSTATUS(st), 0, "child: set-up failed (%d)", WEXITSTATUS(st));
}

/* free's fast path finds a block's class and its span's start in one page-map word (the
 * class field is the bin's offset, heap.h): every class's blocks, on every page of their
 * spans, go to their own bin, which the next malloc of the size pops again. */
Test(tcache, every_class_frees_into_its_own_bin_from_every_page_of_a_span)
{
	static void *p[3 * 4096 / 16 + 2];
	for (unsigned c = 0; c < LA_NCLASSES; c++) {
		size_t size = sc_size[c];
		unsigned n = (unsigned)(3 * 4096 / size + 2);
		for (unsigned i = 0; i < n; i++)
			p[i] = A(malloc)(size);
		for (unsigned i = 0; i < n; i++) {
			A(free)(p[i]);
			void *q = A(malloc)(size);
			cr_assert_eq(q, p[i],
			             "class %u (%zu bytes), block %u: %p freed, %p came back", c,
			             size, i, p[i], q);
		}
		for (unsigned i = 0; i < n; i++)
			A(free)(p[i]);
	}
}

/* malloc's fast path finds the bin of a request of up to 1 KiB at 8 times sc_small4[n]
 * bytes from the first: every size from 0 to 1,024 pops the block of its own class that a
 * free of that class just pushed, and leaves the other bins alone (a table one class off,
 * or not scaled to the bins, hands out another bin's block or none). */
Test(tcache, every_size_up_to_1k_pops_from_its_own_bin)
{
	for (size_t n = 0; n <= SC_UPPER_FROM; n++) {
		unsigned c = sc_class_of(n);
		void *p = A(malloc)(n);
		cr_assert_not_null(p);
		cr_assert_eq(A(malloc_usable_size)(p), sc_size[c], "%zu bytes", n);
		A(free)(p); /* into bin c (free finds it by the page map) */
		uint32_t held = tcache_count(c);
		void *q = A(malloc)(n);
		cr_assert_eq(q, p, "%zu bytes (class %u): %p freed, %p came back", n, c, p, q);
		cr_assert_eq(tcache_count(c), held - 1, "%zu bytes: popped from bin %u", n, c);
		A(free)(q);
	}
}

/* A block whose second word merely holds the free-block key (LA_KEY, a constant) takes
 * free's slow path, which finds it nowhere free and frees it: no false double free, and the
 * block is in its bin as any other. */
Test(tcache, a_block_holding_the_key_as_data_is_freed_not_reported)
{
	for (size_t size = 16; size <= 1024; size *= 4) {
		uint64_t *p = A(malloc)(size);
		p[1] = LA_KEY;
		A(free)(p);
		cr_assert_eq(A(malloc)(size), p, "%zu bytes: the block went to its bin", size);
		A(free)(p);
	}
}

/* A block of an arena no thread uses (its thread exited) is kept in this thread's bin like
 * one of its own, its bin marked as holding another arena's blocks (foreign_bins), so that
 * the bin's flushes send it back to its arena. A full bin of limit 1 flushes all it holds
 * before it takes the block; the put marked the bin first and that flush, which keeps
 * nothing, cleared the mark: the next flush pushed the block into this thread's arena, its
 * span onto this arena's partial list and its descriptor edited under this arena's lock
 * (forkfree's children, whose arenas other than the main thread's have no threads, hung
 * in a free-span list linked to itself; tcache_max_bytes of 32 KiB gives the 20 KiB class
 * a limit of 1). */
static void *allocate_two_and_leave(void *arg)
{
	void **p = arg;
	p[0] = A(malloc)(20480);
	p[1] = A(malloc)(20480);
	p[2] = la_tcache.arena;
	return NULL;
}

Test(tcache, a_block_of_an_arena_without_threads_keeps_its_mark_in_a_bin_of_one_block)
{
	char reason[160];
	cr_assert_eq(liballoc_set("decay_ms", 0, reason, sizeof(reason)), 0, "%s", reason);
	cr_assert_eq(liballoc_set("arena_max", 4, reason, sizeof(reason)), 0, "%s", reason);
	cr_assert_eq(liballoc_set("tcache_max_bytes", 32768, reason, sizeof(reason)), 0, "%s",
	             reason);
	unsigned cls = sc_class_of(20480);
	void *mine[2] = {A(malloc)(20480), A(malloc)(20480)};
	struct arena *own = la_tcache.arena;
	void *p[3];
	pthread_t t;
	pthread_create(&t, NULL, allocate_two_and_leave, p);
	pthread_join(t, NULL);
	struct arena *other = p[2];
	cr_assert_neq(other, own, "the thread had an arena of its own");
	cr_assert_eq(__atomic_load_n(&other->threads, __ATOMIC_RELAXED), 0,
	             "no thread uses its arena now");
	A(free)(mine[0]); /* the bin holds one block of this arena */
	cr_assert_eq(la_tcache.bins[cls].limit, 1, "the bin holds one block at most");
	cr_assert_eq(tcache_count(cls), 1, "the block is in the bin");
	A(free)(p[0]); /* the bin is full: it flushes, then takes the other arena's block */
	cr_assert_eq(tcache_count(cls), 1, "the other arena's block is in the bin");
	cr_assert(la_tcache.foreign_bins >> cls & 1,
	          "the bin is marked as holding a block of another arena");
	A(free)(mine[1]); /* the bin flushes the other arena's block */
	arena_lock(own);
	unsigned wrong = 0;
	for (struct span *s = own->partial[cls]; s; s = s->next)
		wrong += heap_of(s)->arena != own;
	arena_unlock(own);
	cr_assert_eq(wrong, 0, "%u spans of the other arena on this arena's partial list", wrong);
	arena_lock(other);
	unsigned found = 0;
	for (struct span *s = other->partial[cls]; s; s = s->next)
		found += s == span_lookup(heap_of(p[0]), p[0]);
	arena_unlock(other);
	cr_assert_eq(found, 1, "the block went back to its own arena's span");
	A(free)(p[1]);
}

/* The control thread runs the decay pass only while it is armed: a pass that leaves blocks
 * in a cache (in a bin refilled since the pass before) must ask for another, or the blocks
 * of a thread that then goes idle would stay cached for good. Once every bin is returned
 * the caches ask for no further pass. */
Test(decay, a_pass_asks_for_another_while_caches_hold_blocks)
{
	struct tbin *b = refilled_bin();
	uint32_t held = tbin_count(b);
	cr_assert(tcache_flush_cold(), "a refilled bin holds %u blocks: another pass is due", held);
	cr_assert_eq(tbin_count(b), held);
	bool again = tcache_flush_cold();
	cr_assert_eq(tbin_count(b), 0, "unused for a whole pass: returned");
	cr_assert(!again, "every bin returned: no further pass asked for");
}

/* The decay pass's flush of a bin it found unused for a whole pass is a cold flush
 * (FLUSH_COLD): its blocks go to their spans, not into the transfer cache, which the same
 * full pass empties right after (arena_decay): that was a copy of each pointer into the
 * slots and out again, and in a forked child a copy-on-write fault on each slot page its
 * parent had written (the fork loop's decay children: 2-3 a child). */
Test(decay, a_bin_unused_for_a_pass_goes_to_its_spans_not_the_transfer_cache)
{
	unsigned cls = sc_class_of(1000);
	struct tbin *b = refilled_bin();
	/* (after the refills: in a sanitizer build nothing before gave this thread its arena,
	 * the test program's own allocations are the sanitizer's) */
	struct arena *a = la_tcache.arena;
	cr_assert(tcache_flush_cold(), "refilled and flushed since the last pass: kept");
	uint32_t held = tbin_count(b);
	cr_assert_gt(held, 0);
	A(malloc_trim)(0); /* the transfer cache emptied; the thread's bins kept */
	cr_assert_eq(tbin_count(b), held, "a trim leaves the small bins");
	arena_lock(a);
	uint32_t before = a->xfer_n[cls];
	arena_unlock(a);
	cr_assert_eq(before, 0, "the trim emptied the transfer cache");
	tcache_flush_cold();
	cr_assert_eq(tbin_count(b), 0, "unused for a whole pass: returned");
	arena_lock(a);
	uint32_t after = a->xfer_n[cls];
	arena_unlock(a);
	cr_assert_eq(after, 0, "%u of the bin's %u blocks went into the transfer cache", after,
	             held);
}

/* The transfer cache (arena.h): blocks of flushes that fit wait there for the next refill
 * of their class; a flush that does not fit sends the class's kept blocks back to their
 * spans with it when the arena is short of resident free pages, so that a teardown's
 * emptied spans are not pinned by blocks kept; the decay pass sends them back. */
static uint64_t class_spans(unsigned cls)
{
	struct la_class_stats t;
	shm_class_totals(cls, &t);
	return t.spans;
}

/* The k blocks allocated again are the k freed (in any order); then every block goes back
 * (again, and the kept ones: every keep-th of p's n), the run's leftovers too, and the
 * class holds at most one span more than the spans0 it had before. */
static void same_blocks_then_release(void **freed, void **again, int k, void **p, int n, int keep,
                                     struct leftovers *left, unsigned cls, uint64_t spans0)
{
	qsort(freed, (size_t)k, sizeof(void *), cmp_ptr);
	qsort(again, (size_t)k, sizeof(void *), cmp_ptr);
	for (int i = 0; i < k; i++)
		cr_assert_eq(again[i], freed[i], "allocation %d is a block that was not freed", i);
	for (int i = 0; i < k; i++)
		A(free)(again[i]);
	for (int i = 0; i < n; i += keep)
		A(free)(p[i]);
	free_leftovers(left);
	liballoc_flush_caches();
	uint64_t spans = class_spans(cls) - spans0;
	cr_assert_leq(spans, 1, "%llu spans of the class left", (unsigned long long)spans);
}

/* The calling thread's transfer cache as one that earned its whole depth (XF_EARN): what
 * a long-running program's has, and what the tests of its other rules assume. */
static struct arena *with_whole_depth(void)
{
	struct arena *a = tcache_arena(&la_tcache);
	arena_lock(a);
	a->xfer_earned = XF_SLOTS / XF_CHUNK - 1;
	arena_unlock(a);
	return a;
}

Test(transfer_cache, a_flush_that_fits_waits_there_for_the_next_refill)
{
	/* one flush of 32 (the bin's limit is 63): a burst of frees past the first chunk's 64
	 * slots sends its later flushes to the spans (arena.h, xfer_past) */
	enum { N = 90 };
	void *p[N];
	unsigned cls = sc_class_of(64);
	for (int i = 0; i < N; i++)
		p[i] = A(malloc)(64);
	for (int i = 0; i < N; i++)
		A(free)(p[i]);
	struct arena *a = la_tcache.arena;
	uint32_t held = a->xfer_n[cls];
	cr_assert_gt(held, 0, "the flushed blocks are kept");
	for (int i = 0; i < N; i++)
		p[i] = A(malloc)(64);
	cr_assert_lt(a->xfer_n[cls], held, "refills took them back");
	for (int i = 0; i < N; i++)
		A(free)(p[i]);
}

/* A flush that does not fit marks its class (arena.h, xfer_past): the class's next flushes
 * go to the spans directly, none copied into slots, until a refill of the class clears the
 * mark and flushes are kept again. */
static void xfer_state(struct arena *a, unsigned cls, uint32_t *n, bool *past)
{
	arena_lock(a);
	*n = a->xfer_n[cls];
	*past = a->xfer_past >> cls & 1;
	arena_unlock(a);
}

Test(transfer_cache, a_flush_that_does_not_fit_sends_the_next_ones_to_the_spans_until_a_refill)
{
	enum { N = 600 };
	static void *p[N];
	unsigned cls = sc_class_of(64);
	struct arena *a = la_tcache.arena;
	for (int i = 0; i < N; i++)
		p[i] = A(malloc)(64);
	a = la_tcache.arena;
	uint32_t n, marked_at = 0, grew = 0;
	bool past, was = false;
	xfer_state(a, cls, &n, &past);
	for (int i = 0; i < N; i++) {
		A(free)(p[i]);
		uint32_t before = n;
		xfer_state(a, cls, &n, &past);
		if (past && !was)
			marked_at = n;
		else if (past && n > before)
			grew++;
		cr_assert(!was || past, "the mark stays while only frees come");
		was = past;
	}
	cr_assert(past, "600 frees of 64 B overflow the first chunk's 64 slots: marked");
	cr_assert_eq(grew, 0, "no flush copied into slots once marked (%u blocks then)", marked_at);
	/* a refill of the class clears the mark: the next flush that fits is kept */
	for (int i = 0; i < 200; i++)
		p[i] = A(malloc)(64);
	xfer_state(a, cls, &n, &past);
	cr_assert(!past, "a refill cleared the mark");
	/* frees up to the bin's first flush */
	uint32_t held = n, in_bin = tbin_count(&la_tcache.bins[cls]);
	int i = 0;
	for (; i < 200; i++) {
		A(free)(p[i]);
		uint32_t now = tbin_count(&la_tcache.bins[cls]);
		if (now < in_bin)
			break;
		in_bin = now;
	}
	xfer_state(a, cls, &n, &past);
	cr_assert_lt(i, 200, "(set-up: a flush)");
	cr_assert_gt(n, held, "the flush kept again (%u blocks held before, %u after)", held, n);
	for (i++; i < 200; i++)
		A(free)(p[i]);
}

Test(transfer_cache, keeps_no_block_of_the_classes_above_16_kib)
{
	/* their thread-cache bins hold more instead: kept here too, they pinned the spans a
	 * batch of them emptied (arena.h, xfer_class); 16 KiB blocks are still kept */
	/* 16 blocks: the flushes of 16 KiB blocks (2 at a time) fit the class's 256 KiB;
	 * one that does not would send the later ones to the spans (arena.h, xfer_past) */
	enum { N = 16 };
	static void *p[N];
	static const size_t size[] = {16384, 20480, 32768};
	struct arena *a = with_whole_depth();
	uint32_t held[3];
	for (int k = 0; k < 3; k++) {
		for (int i = 0; i < N; i++)
			p[i] = A(malloc)(size[k]);
		for (int i = 0; i < N; i++)
			A(free)(p[i]);
		/* read at once (a later sweep sends a class it left back) under the lock,
		 * asserted after it (a message allocates) */
		arena_lock(a);
		held[k] = a->xfer_n[sc_class_of(size[k])];
		arena_unlock(a);
	}
	cr_assert_gt(held[0], 0, "16 KiB blocks are kept");
	cr_assert_eq(held[1], 0, "%u blocks of 20 KiB kept", held[1]);
	cr_assert_eq(held[2], 0, "%u blocks of 32 KiB kept", held[2]);
}

Test(transfer_cache, a_teardown_writes_only_the_first_chunk_of_slots)
{
	/* blocks of four classes allocated and all freed, never allocated again (a program's
	 * teardown before it exits): the flushes fill the first chunk of slots of each class
	 * and send the rest to their spans; no slot page past the first chunk's is written */
	static const size_t size[] = {48, 64, 96, 128};
	enum { N = 1000, K = sizeof size / sizeof size[0] };
	static void *p[K][N];
	for (int k = 0; k < K; k++)
		for (int i = 0; i < N; i++)
			p[k][i] = A(malloc)(size[k]);
	for (int k = 0; k < K; k++)
		for (int i = 0; i < N; i++)
			A(free)(p[k][i]);
	struct arena *a = la_tcache.arena;
	arena_lock(a); /* read under the lock, asserted after it (a message allocates) */
	uint32_t earned = a->xfer_earned, chunks = a->xfer_chunks;
	arena_unlock(a);
	cr_assert_eq(earned, 0, "no refill came back for more");
	cr_assert_eq(chunks, 1, "%u chunks of slots written", chunks);
}

Test(transfer_cache, refills_that_find_it_short_earn_it_depth)
{
	/* the same blocks freed and allocated again, round after round: refills that find
	 * the transfer cache empty after flushes it had no room for earn it chunks, until it
	 * keeps a whole round's flushes */
	enum { N = 400, ROUNDS = 12 };
	static void *p[N];
	struct arena *a = tcache_arena(&la_tcache);
	unsigned cls = sc_class_of(64);
	for (int r = 0; r < ROUNDS; r++) {
		for (int i = 0; i < N; i++)
			p[i] = A(malloc)(64);
		for (int i = 0; i < N; i++)
			A(free)(p[i]);
	}
	arena_lock(a);
	uint32_t earned = a->xfer_earned, held = a->xfer_n[cls];
	arena_unlock(a);
	cr_assert_geq(earned, 4, "%u chunks earned", earned);
	cr_assert_gt(held, 4 * XF_CHUNK, "%u blocks kept", held);
}

Test(transfer_cache, a_teardown_returns_the_spans_it_empties)
{
	/* 20 spans of 64-byte blocks; every 40th block freed first (one transfer cache's
	 * worth, a few in every span), then all the others: the flushes that no longer fit
	 * send the scattered blocks back, and the emptied spans go back to their heap */
	enum { N = 20480, STRIDE = 40 };
	with_whole_depth();
	void **p = A(malloc)(N * sizeof(void *));
	cr_assert_not_null(p);
	unsigned cls = sc_class_of(64);
	uint64_t spans0 = class_spans(cls);
	for (int i = 0; i < N; i++)
		p[i] = A(malloc)(64);
	uint64_t grown = class_spans(cls) - spans0;
	cr_assert_geq(grown, 19, "%llu spans for %d blocks", (unsigned long long)grown, N);
	for (int i = 0; i < N; i += STRIDE)
		A(free)(p[i]);
	cr_assert_gt(la_tcache.arena->xfer_n[cls], 0, "the scattered blocks are kept");
	for (int i = 0; i < N; i++)
		if (i % STRIDE)
			A(free)(p[i]);
	uint64_t left = class_spans(cls) - spans0;
	cr_assert_leq(left, 2, "%llu of %llu spans left after the teardown",
	              (unsigned long long)left, (unsigned long long)grown);
	A(free)(p);
}

Test(spans, blocks_pushed_back_in_any_order_come_back_once_and_empty_their_spans)
{
	/* 4096 blocks of 64 bytes (several spans of several pages) freed in runs of four
	 * neighbours (one page, or a span's next page) in a shuffled order of runs, some runs
	 * backwards (so the spans alternate), all but every 8th block; the caches flushed and
	 * the transfer cache emptied, every freed block is on its span's list (push_blocks):
	 * the next allocations of the class are exactly those blocks, each once and none
	 * carved (each span pushed to is on the partial list, with its count of blocks out
	 * right). Then everything freed and pushed back: every span the class grew empties
	 * and goes back to its heap (one kept empty at most). */
	enum { N = 4096, RUN = 4, RUNS = N / RUN, KEEP = 8, K = N - N / KEEP };
	void **p = A(malloc)(N * sizeof(void *));
	void **freed = A(malloc)(K * sizeof(void *));
	void **again = A(malloc)(K * sizeof(void *));
	int *run = A(malloc)(RUNS * sizeof(int));
	cr_assert(p && freed && again && run);
	unsigned cls = sc_class_of(64);
	uint64_t spans0 = class_spans(cls);
	for (int i = 0; i < N; i++)
		p[i] = A(malloc)(64);
	struct leftovers left;
	take_leftovers(64, &left);
	cr_assert_geq(class_spans(cls) - spans0, 3, "spans for %d blocks", N);
	uint64_t x = 88172645463325252ull; /* a fixed shuffle (xorshift) */
	for (int r = 0; r < RUNS; r++)
		run[r] = r;
	for (int r = RUNS - 1; r > 0; r--) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		int j = (int)(x % (uint64_t)(r + 1)), t = run[r];
		run[r] = run[j];
		run[j] = t;
	}
	int k = 0;
	for (int r = 0; r < RUNS; r++)
		for (int j = 0; j < RUN; j++) {
			int i = run[r] * RUN + (r & 1 ? RUN - 1 - j : j);
			if (i % KEEP) {
				freed[k++] = p[i];
				A(free)(p[i]);
			}
		}
	cr_assert_eq(k, K);
	liballoc_flush_caches();
	struct arena *a = la_tcache.arena;
	arena_lock(a);
	uint32_t kept = a->xfer_n[cls];
	arena_unlock(a);
	cr_assert_eq(tcache_count(cls), 0, "the thread's bin was flushed");
	cr_assert_eq(kept, 0, "the transfer cache was emptied into the spans");
	for (int i = 0; i < K; i++)
		again[i] = A(malloc)(64);
	same_blocks_then_release(freed, again, K, p, N, KEEP, &left, cls, spans0);
	A(free)(run);
	A(free)(again);
	A(free)(freed);
	A(free)(p);
}

Test(transfer_cache, with_resident_free_pages_to_spare_a_teardown_keeps_its_blocks)
{
	/* 8 MiB of 256-byte blocks allocated and freed first: their pages stay resident and
	 * free (the decay pass is far off), more than XF_SPARE_PAGES. The same teardown as
	 * above then keeps what the transfer cache holds for the class's next burst. 2 MiB of
	 * 128-byte blocks stay live throughout: without them the heap would be nearly empty
	 * once the 256-byte class went cold (tcache_gc sends its cached blocks back) and the
	 * teardown ended, and the throttle would return the free pages then (arena.c,
	 * after_free_pages): the arena would have none to spare. */
	enum { M = 32768, N = 20480, STRIDE = 40, L = 16384 };
	void **q = A(malloc)(M * sizeof(void *));
	void **p = A(malloc)(N * sizeof(void *));
	void **live = A(malloc)(L * sizeof(void *));
	cr_assert(q && p && live);
	for (int i = 0; i < L; i++)
		live[i] = A(malloc)(128);
	for (int i = 0; i < M; i++)
		q[i] = A(malloc)(256);
	for (int i = 0; i < M; i++)
		A(free)(q[i]);
	struct arena *a = la_tcache.arena;
	uint64_t dirty = 0;
	for (struct heap *h = a->heaps; h; h = h->next)
		dirty += h->dirty_pages;
	cr_assert_geq(dirty, XF_SPARE_PAGES, "%llu free resident pages", (unsigned long long)dirty);
	unsigned cls = sc_class_of(64);
	for (int i = 0; i < N; i++)
		p[i] = A(malloc)(64);
	for (int i = 0; i < N; i += STRIDE)
		A(free)(p[i]);
	uint32_t held = a->xfer_n[cls];
	cr_assert_gt(held, 0);
	for (int i = 0; i < N; i++)
		if (i % STRIDE)
			A(free)(p[i]);
	cr_assert_geq(a->xfer_n[cls], held, "kept: %u of %u", a->xfer_n[cls], held);
	for (int i = 0; i < L; i++)
		A(free)(live[i]);
	A(free)(live);
	A(free)(p);
	A(free)(q);
}

Test(transfer_cache, the_decay_pass_returns_what_it_keeps_and_the_spans_that_empty)
{
	/* a few scattered blocks kept: the full pass sends them back and the spans that held
	 * nothing else go back to their heap */
	enum { N = 4096, STRIDE = 32 };
	with_whole_depth();
	void **p = A(malloc)(N * sizeof(void *));
	cr_assert_not_null(p);
	unsigned cls = sc_class_of(64);
	for (int i = 0; i < N; i++)
		p[i] = A(malloc)(64);
	for (int i = 0; i < N; i++)
		if (i % STRIDE)
			A(free)(p[i]);
	/* that teardown overflowed the transfer cache: its later flushes went to the spans,
	 * and so would the next ones until a refill of the class (arena.h, xfer_past), which
	 * is what clears the mark here: the scattered blocks' flushes are kept */
	struct arena *a = la_tcache.arena;
	arena_lock(a);
	a->xfer_past &= ~((uint64_t)1 << cls);
	arena_unlock(a);
	for (int i = 0; i < N; i += STRIDE)
		A(free)(p[i]);
	/* the bin's blocks into the transfer cache: a plain flush (allocctl flush's; the
	 * decay pass's own flush of a bin unused for a pass sends them to their spans) */
	tcache_flush_all(NULL);
	cr_assert_gt(a->xfer_n[cls], 0, "scattered blocks kept");
	uint64_t before = class_spans(cls);
	/* a full pass (a tick that is a multiple of HEAP_PERIOD) at or before the clock */
	uint32_t due, tick = __atomic_load_n(&heap_epoch, __ATOMIC_RELAXED) & ~(HEAP_PERIOD - 1);
	arena_decay(a, tick, tick, &due);
	cr_assert_eq(a->xfer_n[cls], 0, "the decay pass returned them");
	cr_assert_lt(class_spans(cls), before, "spans emptied and went back");
	A(free)(p);
}

/* The cold-bin sweep (tcache.h, TC_GC_EVENTS): a bin that neither refilled nor flushed for
 * a whole sweep goes back to its spans with what the transfer cache and the class's kept
 * empty span hold of its class, so that the pages of a class the thread stopped using
 * serve the next one. */

/* The load of bench/idle_sweep.c: every size from 16 B to 16 KiB (steps of an eighth
 * above 128), 256 blocks of it allocated, their first and last bytes written, then freed. */
static void sweep_sizes(void)
{
	void *p[256];
	for (size_t size = 16; size <= 16384; size += size < 128 ? 16 : size / 8) {
		for (int i = 0; i < 256; i++) {
			unsigned char *q = A(malloc)(size);
			cr_assert_not_null(q);
			q[0] = 1;
			q[size - 1] = 2;
			p[i] = q;
		}
		for (int i = 0; i < 256; i++)
			A(free)(p[i]);
	}
}

/* Data pages of arena a's heaps that are resident (mincore). */
static uint64_t arena_resident_pages(struct arena *a)
{
	static unsigned char vec[LA_HEAP_PAGES];
	uint64_t n = 0;
	for (struct heap *h = a->heaps; h; h = h->next) {
		uint32_t pages = h->hwm - h->first_page;
		char *base = (char *)h + ((size_t)h->first_page << LA_PAGE_SHIFT);
		cr_assert_eq(mincore(base, (size_t)pages << LA_PAGE_SHIFT, vec), 0);
		for (uint32_t i = 0; i < pages; i++)
			n += vec[i] & 1;
	}
	return n;
}

Test(cold_bins, a_sweep_through_sizes_leaves_nothing_of_the_classes_it_left)
{
	/* three rounds of the sweep: every class the sweep left long before its end (all up
	 * to 4 KiB) holds no block in the thread cache or the transfer cache and no span
	 * (before: 32-63 blocks cached and 1-4 spans kept in each of them, 2.2 MiB cached in
	 * all); the heaps' resident data pages (mincore) stay under twice the largest batch
	 * (256 x 16 KiB), where blocks pinned in every class's spans kept 11.0 MiB */
	enum { BATCH_BYTES = 256 * 16384 };
	uint64_t spans0[LA_NCLASSES];
	for (unsigned c = 0; c < LA_NCLASSES; c++)
		spans0[c] = class_spans(c);
	struct arena *a = tcache_arena(&la_tcache);
	for (int round = 0; round < 3; round++)
		sweep_sizes();
	for (unsigned c = 0; c < LA_NCLASSES && sc_size[c] <= 4096; c++) {
		cr_assert_eq(tbin_count(&la_tcache.bins[c]), 0, "class %u B: %u blocks cached",
		             sc_size[c], tbin_count(&la_tcache.bins[c]));
		cr_assert_eq(a->xfer ? a->xfer_n[c] : 0, 0,
		             "class %u B: %u blocks in the transfer cache", sc_size[c],
		             a->xfer_n[c]);
		cr_assert_leq(class_spans(c), spans0[c], "class %u B: %llu spans kept", sc_size[c],
		              (unsigned long long)(class_spans(c) - spans0[c]));
	}
	struct la_counters c;
	liballoc_stats(&c);
	struct la_memory m;
	la_memory_of(&c, &m);
	cr_assert_leq(m.cached, 256 << 10, "%llu KiB cached", (unsigned long long)m.cached >> 10);
	uint64_t pages = arena_resident_pages(a);
	cr_assert_leq(pages << LA_PAGE_SHIFT, 2 * (uint64_t)BATCH_BYTES, "%llu KiB resident",
	              (unsigned long long)pages << (LA_PAGE_SHIFT - 10));
}

/* Frees and allocates blocks of 64 bytes until the cache's next cold-bin sweep has run. */
static void until_a_sweep(void)
{
	uint8_t n = la_tcache.gc_sweeps;
	void *p[256];
	while (la_tcache.gc_sweeps == n) {
		for (int i = 0; i < 256; i++)
			p[i] = A(malloc)(64);
		for (int i = 0; i < 256; i++)
			A(free)(p[i]);
	}
}

Test(cold_bins, a_bin_emptied_too_early_is_skipped_by_the_next_sweeps)
{
	/* the 1000-byte class holds blocks and sees no refill or flush for a whole sweep: the
	 * next sweep empties it. It refills right after (within TC_GC_WINDOW sweeps): the
	 * sweep was wrong, so the next one leaves it alone; the one after that empties it
	 * again, and this time it stays cold, so a refill later is no reason to skip it. */
	unsigned cls = sc_class_of(1000);
	/* whatever the test runner's own allocations left in the cache before it forked */
	la_tcache.gc_level[cls] = la_tcache.gc_skip[cls] = 0;
	struct tbin *b = refilled_bin();
	until_a_sweep();
	until_a_sweep();
	cr_assert_eq(tbin_count(b), 0, "cold for a whole sweep: emptied");
	void *q = A(malloc)(1000); /* a refill: the sweep took the bin too early */
	A(free)(q);
	cr_assert_gt(tbin_count(b), 0);
	cr_assert_eq(la_tcache.gc_level[cls], 1);
	until_a_sweep();
	until_a_sweep();
	cr_assert_gt(tbin_count(b), 0, "skipped once");
	until_a_sweep();
	cr_assert_eq(tbin_count(b), 0, "then emptied again");
	for (unsigned i = 0; i < TC_GC_WINDOW; i++)
		until_a_sweep();
	cr_assert_eq(la_tcache.gc_level[cls], 0, "cold for the window after: rightly emptied");
	q = A(malloc)(1000);
	A(free)(q);
	until_a_sweep();
	until_a_sweep();
	cr_assert_eq(tbin_count(b), 0, "refilled long after: emptied at the first cold sweep");
}

/* A cold flush (the sweep's, tcache_gc) of a bin whose oldest blocks are the untaken tail
 * of its last carving (each a size below the span's bump, down to the lowest block not
 * handed out) gives them back to the span's unused space when a page lies wholly above
 * the blocks handed out: linking them on the span's free list would write (and fault)
 * pages no malloc took (redis, CPython: ~100-150 faults a run, bench/README faults31). */

/* Allocates blocks of size until one is the lowest of a carving from a span that was not
 * warm whose untaken rest, past the next `after` blocks, holds a block starting on a page
 * beyond their last byte (where a free-list link would be written) and a page of blocks
 * (a cold flush of less does not un-carve): the block; *s its span. The blocks allocated
 * before it stay allocated. */
static char *lowest_of_a_carving(size_t size, uint32_t after, struct span **s)
{
	unsigned cls = sc_class_of(size);
	for (int i = 0; i < 64; i++) {
		char *p = A(malloc)(size);
		cr_assert_not_null(p);
		struct heap *h = heap_of(p);
		struct span *t = span_lookup(h, p);
		uint32_t idx = (uint32_t)((size_t)(p - (char *)span_base(h, t)) / sc_size[cls]);
		uint32_t held = tcache_count(cls);
		uintptr_t top = (uintptr_t)span_base(h, t) + (size_t)(t->bump - 1) * sc_size[cls];
		uintptr_t clean =
		        ((uintptr_t)p + (after + 1) * sc_size[cls] - 1 + LA_PAGE) & ~(LA_PAGE - 1);
		if (!t->warm && held > after && t->bump == idx + 1 + held &&
		    (size_t)held * sc_size[cls] >= LA_PAGE && top >= clean) {
			*s = t;
			return p;
		}
	}
	cr_assert_fail("no carving of %zu-byte blocks reaching a page beyond its first block",
	               size);
	return NULL;
}

/* Pages of [lo, hi) resident (mincore). */
static uint32_t resident_pages(uintptr_t lo, uintptr_t hi)
{
	unsigned char vec[64];
	size_t n = (hi - lo) >> LA_PAGE_SHIFT;
	cr_assert_leq(n, sizeof(vec));
	cr_assert_eq(mincore((void *)lo, n << LA_PAGE_SHIFT, vec), 0);
	uint32_t r = 0;
	for (size_t i = 0; i < n; i++)
		r += vec[i] & 1;
	return r;
}

/* The set-up of the two tests below: the class of 1536-byte blocks (*size, its blocks'
 * size), its sweep state fresh, the heaps trimmed, its bin emptied (the leftovers into
 * *left), so that what follows starts from a refill. Returns the class. */
static unsigned cold_flush_class(size_t *size, struct leftovers *left)
{
	unsigned cls = sc_class_of(1536);
	*size = sc_size[cls];
	la_tcache.gc_level[cls] = la_tcache.gc_skip[cls] = 0;
	A(malloc_trim)(0);
	take_leftovers(*size, left);
	return cls;
}

Test(cold_bins, a_cold_flush_gives_never_taken_blocks_back_to_their_span)
{
	size_t size;
	struct leftovers left;
	unsigned cls = cold_flush_class(&size, &left);
	struct span *s;
	char *p = lowest_of_a_carving(size, 0, &s);
	memset(p, 0xa5, size);
	struct heap *h = heap_of(p);
	uint32_t bump = s->bump, used = s->used, idx = bump - 1 - tcache_count(cls);
	uintptr_t clean = ((uintptr_t)p + size - 1 + LA_PAGE) & ~(LA_PAGE - 1);
	uintptr_t end =
	        ((uintptr_t)span_base(h, s) + (size_t)bump * size + LA_PAGE - 1) & ~(LA_PAGE - 1);
	uint32_t pages = (uint32_t)((end - clean) >> LA_PAGE_SHIFT);
	cr_assert_gt(pages, 0);
	/* (THP "always": the kernel may fault in pages nothing wrote) */
	bool pages_tell = !os_thp_always();
	if (pages_tell)
		cr_assert_eq(resident_pages(clean, end), 0, "the carving's pages above it are new");
	until_a_sweep();
	until_a_sweep();
	cr_assert_eq(tcache_count(cls), 0, "cold for a whole sweep: emptied");
	cr_assert_eq(s->bump, idx + 1, "the untaken blocks are back under the bump (was %u)", bump);
	cr_assert_eq(s->used, used - (bump - 1 - idx));
	uint32_t written = pages_tell ? resident_pages(clean, end) : 0;
	cr_assert_eq(written, 0, "%u of the %u pages wholly above the taken block were written",
	             written, pages);
	for (size_t i = 0; i < size; i++)
		cr_assert_eq((unsigned char)p[i], 0xa5);
	/* the class carves them again, in their place, the next above the taken block first */
	char *q = A(malloc)(size);
	cr_assert_eq(q, p + size);
	A(free)(q);
	A(free)(p);
	free_leftovers(&left);
}

Test(cold_bins, a_cold_flush_gives_back_no_block_below_one_in_use)
{
	/* the carving's lowest two blocks taken and the lowest freed again: the flush's run
	 * (the untaken blocks from the bump down, then the freed one) stops at the block in
	 * use; only the blocks above it go back, it stays allocated, its bytes untouched */
	size_t size;
	struct leftovers left;
	unsigned cls = cold_flush_class(&size, &left);
	struct span *s;
	char *p = lowest_of_a_carving(size, 1, &s);
	char *kept = A(malloc)(size);
	cr_assert_eq(kept, p + size, "the next block of the carving");
	uint32_t bump = s->bump;
	memset(kept, 0x5a, size);
	uint32_t idx = (uint32_t)((size_t)(kept - (char *)span_base(heap_of(p), s)) / size);
	cr_assert_lt(idx + 1, s->bump, "untaken blocks above it");
	A(free)(p);
	until_a_sweep();
	until_a_sweep();
	cr_assert_eq(tcache_count(cls), 0, "cold for a whole sweep: emptied");
	cr_assert_eq(s->bump, idx + 1, "the blocks above the one in use went back, not it (was %u)",
	             bump);
	enum { N = 64 };
	void *again[N];
	for (int i = 0; i < N; i++) {
		again[i] = A(malloc)(size);
		cr_assert_neq(again[i], kept, "a block in use was handed out again");
	}
	for (size_t i = 0; i < size; i++)
		cr_assert_eq((unsigned char)kept[i], 0x5a, "byte %zu of the block in use", i);
	for (int i = 0; i < N; i++)
		A(free)(again[i]);
	A(free)(kept);
	free_leftovers(&left);
}
/* A thread that moved on from small blocks to large ones (a buffer realloc grows past the
 * classes: bench realloc_growth) makes no refill or flush any more; its large allocations
 * are events of the sweep too, so the classes it left go back to their spans and their
 * pages serve the large blocks (without: the 1000-byte class kept its 64 blocks). Three
 * rounds of TC_GC_EVENTS, not two: the class's refills came after an earlier sweep had
 * emptied its bin and the large slot serves every allocation here, so the trigger's first
 * sweep skips the next one (tcache_large_sweep's backoff); the one after that sweeps. */
Test(cold_bins, large_allocations_send_back_the_classes_a_thread_left)
{
	unsigned cls = sc_class_of(1000);
	la_tcache.gc_level[cls] = la_tcache.gc_skip[cls] = 0;
	uint64_t spans0 = class_spans(cls);
	struct tbin *b = refilled_bin();
	cr_assert_gt(class_spans(cls), spans0, "the class took a span");
	uint8_t sweeps = la_tcache.gc_sweeps;
	for (unsigned i = 0; i < 3 * TC_GC_EVENTS; i++) {
		void *q = A(malloc)(64 << 10);
		cr_assert_not_null(q);
		A(free)(q);
	}
	cr_assert_geq((uint8_t)(la_tcache.gc_sweeps - sweeps), 2, "two sweeps ran");
	cr_assert_eq(tbin_count(b), 0, "%u blocks of the class left cached", tbin_count(b));
	cr_assert_eq(class_spans(cls), spans0, "%llu spans of the class kept",
	             (unsigned long long)(class_spans(cls) - spans0));
}

/* Large allocations count toward a sweep only in a row: a thread that still refills or
 * flushes between them (grow-shrink: 64 B-64 KiB blocks mixed) sweeps on those as before
 * (counting every large allocation there swept bins still in use: 126-142 -> 141-162
 * faults a cycle). */
static void large_allocations(unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		void *q = A(malloc)(64 << 10);
		cr_assert_not_null(q);
		A(free)(q);
	}
}

Test(cold_bins, a_refill_between_large_allocations_starts_their_count_again)
{
	struct leftovers l;
	void *q = A(malloc)(1000); /* the thread's cache set up */
	A(free)(q);
	la_tcache.gc_events = 0;
	la_tcache.gc_large = 0;
	uint8_t sweeps = la_tcache.gc_sweeps;
	large_allocations(TC_GC_EVENTS - 1);
	take_leftovers(1000, &l);
	q = A(malloc)(1000); /* a refill */
	large_allocations(TC_GC_EVENTS - 1);
	cr_assert_eq(la_tcache.gc_sweeps, sweeps, "%u sweeps",
	             (uint8_t)(la_tcache.gc_sweeps - sweeps));
	large_allocations(1);
	cr_assert_eq(la_tcache.gc_sweeps, (uint8_t)(sweeps + 1), "the 32nd in a row sweeps");
	A(free)(q);
	free_leftovers(&l);
}

/* A thread that mixes sizes (bench medsizes: half its mallocs above the classes, its large
 * slot serving them) meets the large trigger every TC_GC_EVENTS large allocations, before
 * most classes it keeps using refill or flush: the sweeps emptied bins in use, which
 * refilled soon after. While the slot serves the large mallocs (TC_LARGE_HITS a miss) and a
 * bin a sweep emptied refilled since the trigger's last sweep, the trigger skips 2^k - 1 of
 * its sweeps (k one more each time, at most TC_GC_BACKOFF); else (a slot that misses: a
 * buffer grown by realloc frees each size once) it sweeps at each TC_GC_EVENTS again.
 * Without: 16 sweeps in these 16 rounds. */
Test(cold_bins, large_sweeps_space_out_while_the_slot_serves_and_swept_bins_refill)
{
	unsigned cls = sc_class_of(1000);
	void *q = A(malloc)(1000); /* the thread's cache set up */
	A(free)(q);
	large_allocations(1); /* the slot holds a block of the page count */
	la_tcache.gc_events = 0;
	uint8_t sweeps = la_tcache.gc_sweeps;
	for (unsigned r = 0; r < 16; r++) {
		la_tcache.gc_skip[cls] = 0; /* the bin's own backoff aside: a sweep empties it */
		q = A(malloc)(1000);        /* a refill when the last sweep emptied the bin */
		A(free)(q);
		large_allocations(TC_GC_EVENTS);
	}
	unsigned n = (uint8_t)(la_tcache.gc_sweeps - sweeps);
	cr_assert_leq(n, 12, "%u sweeps in 16 rounds of %u large allocations", n, TC_GC_EVENTS);
	cr_assert_geq(n, 2, "%u sweeps", n);
}

/* ... and a slot that misses takes the trigger back to every TC_GC_EVENTS at once. */
Test(cold_bins, a_large_sweep_after_slot_misses_takes_the_cadence_back)
{
	void *q = A(malloc)(1000); /* the thread's cache set up */
	A(free)(q);
	la_tcache.gc_large_level = TC_GC_BACKOFF;
	la_tcache.gc_large_skip = 0;
	la_tcache.gc_large_missed = 1;
	la_tcache.gc_large = 0;
	void *held[TC_GC_EVENTS];
	for (unsigned i = 0; i < TC_GC_EVENTS; i++) { /* none the slot holds: misses */
		held[i] = A(malloc)((size_t)(9 + i) << 12);
		cr_assert_not_null(held[i]);
	}
	cr_assert_eq(la_tcache.gc_large_level, 0, "backoff %u", la_tcache.gc_large_level);
	cr_assert_eq(la_tcache.gc_large_skip, 0, "%u sweeps to skip", la_tcache.gc_large_skip);
	for (unsigned i = 0; i < TC_GC_EVENTS; i++)
		A(free)(held[i]);
}

/* Each large allocation counts once, whether the large slot serves it or not (malloc.c,
 * malloc_large: the count is taken before the slot's look; a miss goes on to the arena
 * without counting again): 31 in a row of page counts the slot does not hold (none is
 * freed) do not sweep, the 32nd does. */
Test(cold_bins, a_large_allocation_the_slot_misses_counts_once)
{
	void *q = A(malloc)(1000); /* the thread's cache set up */
	A(free)(q);
	void *held[TC_GC_EVENTS];
	la_tcache.gc_large = 0;
	uint8_t sweeps = la_tcache.gc_sweeps;
	uint32_t uses = la_tcache.large_uses;
	for (unsigned i = 0; i < TC_GC_EVENTS - 1; i++) {
		held[i] = A(malloc)((size_t)(9 + i) << 12);
		cr_assert_not_null(held[i]);
	}
	cr_assert_eq(la_tcache.large_uses, uses, "the slot served none");
	cr_assert_eq(la_tcache.gc_sweeps, sweeps, "%u sweeps after %u misses",
	             (uint8_t)(la_tcache.gc_sweeps - sweeps), TC_GC_EVENTS - 1);
	held[TC_GC_EVENTS - 1] = A(malloc)((size_t)(9 + TC_GC_EVENTS) << 12);
	cr_assert_not_null(held[TC_GC_EVENTS - 1]);
	cr_assert_eq(la_tcache.gc_sweeps, (uint8_t)(sweeps + 1), "the 32nd in a row sweeps");
	for (unsigned i = 0; i < TC_GC_EVENTS; i++)
		A(free)(held[i]);
}

/* A thread that leaves an arena other threads still use (here the main thread, idle)
 * leaves nothing in its transfer cache: what its cache held goes back to the spans, so
 * that the spans it emptied serve the next span of any class. */
struct leaver {
	struct arena *arena;
	unsigned cls;
	uint32_t held; /* the class's blocks in the transfer cache before the thread left */
};

static void *fill_free_and_leave(void *arg)
{
	struct leaver *l = arg;
	enum { N = 90 }; /* one flush, kept (a_flush_that_fits_waits_there_for_the_next_refill) */
	void *p[N];
	for (int i = 0; i < N; i++)
		p[i] = A(malloc)(64);
	for (int i = 0; i < N; i++)
		A(free)(p[i]);
	l->arena = la_tcache.arena;
	arena_lock(l->arena);
	l->held = l->arena->xfer_n[l->cls];
	arena_unlock(l->arena);
	return NULL;
}

Test(transfer_cache, a_thread_leaving_a_shared_arena_takes_its_blocks_back_to_the_spans)
{
	char reason[160];
	cr_assert_eq(liballoc_set("arena_max", 1, reason, sizeof(reason)), 0, "%s", reason);
	cr_assert_eq(liballoc_set("decay_ms", 0, reason, sizeof(reason)), 0, "%s", reason);
	A(free)(A(malloc)(64)); /* this thread has an arena: the one the other thread shares */
	struct leaver l = {.cls = sc_class_of(64)};
	pthread_t t;
	pthread_create(&t, NULL, fill_free_and_leave, &l);
	pthread_join(t, NULL);
	cr_assert_gt(__atomic_load_n(&l.arena->threads, __ATOMIC_RELAXED), 0,
	             "another thread still uses the arena the thread left");
	cr_assert_gt(l.held, 0, "the thread's flushes kept blocks in the transfer cache");
	arena_lock(l.arena);
	uint32_t left = l.arena->xfer_n[l.cls];
	uint64_t bytes = l.arena->xfer_bytes;
	arena_unlock(l.arena);
	cr_assert_eq(left, 0, "%u blocks of the class stayed after the thread left", left);
	cr_assert_eq(bytes, 0, "%llu bytes stayed in the transfer cache",
	             (unsigned long long)bytes);
}

/* Arenas default to one per CPU the process may run on: more threads than that share
 * them (their free pages are not held apart, arena by arena). */
struct sharer {
	pthread_barrier_t *all_in;
	struct arena *arena;
};

static void *take_an_arena(void *arg)
{
	struct sharer *s = arg;
	A(free)(A(malloc)(64));
	s->arena = la_tcache.arena;
	pthread_barrier_wait(s->all_in); /* every thread alive at once */
	return NULL;
}

Test(arenas, threads_beyond_the_cpus_share_them)
{
	cpu_set_t set;
	cr_assert_eq(sched_getaffinity(0, sizeof(set), &set), 0);
	int cpus = CPU_COUNT(&set);
	int64_t max = 0;
	cr_assert_eq(liballoc_get("arena_max", &max), 0);
	cr_assert_eq(max, cpus, "arena_max %lld by default, %d CPUs", (long long)max, cpus);
	enum { MORE = 3 };
	int n = cpus + MORE;
	pthread_t *t = calloc((size_t)n, sizeof(*t));
	struct sharer *s = calloc((size_t)n, sizeof(*s));
	cr_assert(t && s);
	pthread_barrier_t all_in;
	pthread_barrier_init(&all_in, NULL, (unsigned)n + 1);
	for (int i = 0; i < n; i++) {
		s[i].all_in = &all_in;
		pthread_create(&t[i], NULL, take_an_arena, &s[i]);
	}
	pthread_barrier_wait(&all_in);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	int distinct = 0;
	for (int i = 0; i < n; i++) {
		int seen = 0;
		for (int j = 0; j < i; j++)
			seen |= s[j].arena == s[i].arena;
		distinct += !seen;
	}
	cr_assert_leq(distinct, cpus, "%d threads used %d arenas on %d CPUs", n, distinct, cpus);
	cr_assert_leq(__atomic_load_n(&arena_count, __ATOMIC_ACQUIRE), (uint32_t)cpus,
	              "arenas made: at most one per CPU");
	free(t);
	free(s);
}

/* A refill in an arena that other threads share takes its spans' free lists whole under
 * the lock, walks them after the unlock and gives back what it did not take (arena.c,
 * refill_walk): a thread that only waits keeps the test thread's arena shared. */
struct companion {
	pthread_mutex_t m;
	pthread_cond_t c;
	int attached;
	int leave;
};

static void *keep_company(void *arg)
{
	struct companion *k = arg;
	/* attached to the one arena (arena_max 1), with a class the tests leave alone */
	A(free)(A(malloc)(1000));
	pthread_mutex_lock(&k->m);
	k->attached = 1;
	pthread_cond_broadcast(&k->c);
	while (!k->leave)
		pthread_cond_wait(&k->c, &k->m);
	pthread_mutex_unlock(&k->m);
	return NULL;
}

static void share_the_arena(struct companion *k, pthread_t *t)
{
	char reason[160];
	cr_assert_eq(liballoc_set("arena_max", 1, reason, sizeof(reason)), 0, "%s", reason);
	A(free)(A(malloc)(64));
	pthread_mutex_init(&k->m, NULL);
	pthread_cond_init(&k->c, NULL);
	k->attached = k->leave = 0;
	cr_assert_eq(pthread_create(t, NULL, keep_company, k), 0);
	pthread_mutex_lock(&k->m);
	while (!k->attached)
		pthread_cond_wait(&k->c, &k->m);
	pthread_mutex_unlock(&k->m);
	uint32_t threads = __atomic_load_n(&la_tcache.arena->threads, __ATOMIC_RELAXED);
	cr_assert_geq(threads, 2, "the arena is shared: %u threads", threads);
}

static void end_company(struct companion *k, pthread_t t)
{
	pthread_mutex_lock(&k->m);
	k->leave = 1;
	pthread_cond_broadcast(&k->c);
	pthread_mutex_unlock(&k->m);
	pthread_join(t, NULL);
}

/* The first span of class cls whose free list does not hold exactly the blocks its count
 * says are not out (bump - used), or NULL. Asserted by the caller, after the unlock. */
static struct span *span_miscounted(struct arena *a, unsigned cls, uint32_t *listed)
{
	struct span *bad = NULL;
	arena_lock(a);
	for (struct span *s = a->partial[cls]; s && !bad; s = s->next) {
		uint32_t n = 0;
		for (void *q = s->free; q && n <= sc_blocks[cls]; q = link_decode(*(void **)q, q))
			n++;
		if (n != (uint32_t)(s->bump - s->used)) {
			bad = s;
			*listed = n;
		}
	}
	arena_unlock(a);
	return bad;
}

Test(spans, in_a_shared_arena_refills_take_freed_blocks_once_and_leave_the_rest_listed)
{
	/* 4096 blocks of 64 bytes, all but every 8th freed and pushed to their spans (several
	 * spans, lists of hundreds): refills of a few dozen at a time take part of a list and
	 * give the rest back. After half the freed blocks came back, every span's list holds
	 * what its count says (no block lost, no pin left); then the other half: exactly the
	 * freed blocks, each once, none carved; then everything freed: every span the class
	 * grew empties and goes back (one kept empty at most). */
	enum { N = 4096, KEEP = 8, K = N - N / KEEP };
	struct companion k;
	pthread_t t;
	share_the_arena(&k, &t);
	void **p = A(malloc)(N * sizeof(void *));
	void **freed = A(malloc)(K * sizeof(void *));
	void **again = A(malloc)(K * sizeof(void *));
	cr_assert(p && freed && again);
	unsigned cls = sc_class_of(64);
	uint64_t spans0 = class_spans(cls);
	for (int i = 0; i < N; i++)
		p[i] = A(malloc)(64);
	struct leftovers left;
	take_leftovers(64, &left);
	int n = 0;
	for (int i = 0; i < N; i++)
		if (i % KEEP) {
			freed[n++] = p[i];
			A(free)(p[i]);
		}
	liballoc_flush_caches();
	struct arena *a = la_tcache.arena;
	for (int i = 0; i < K / 2; i++)
		again[i] = A(malloc)(64);
	uint32_t listed = 0;
	struct span *bad = span_miscounted(a, cls, &listed);
	cr_assert_null(bad, "a span lists %u blocks, its count says %u", listed,
	               bad ? (uint32_t)(bad->bump - bad->used) : 0);
	for (int i = K / 2; i < K; i++)
		again[i] = A(malloc)(64);
	same_blocks_then_release(freed, again, K, p, N, KEEP, &left, cls, spans0);
	end_company(&k, t);
	A(free)(again);
	A(free)(freed);
	A(free)(p);
}

static void *volatile sink;

Test(spans, in_a_shared_arena_a_refill_walking_a_corrupted_link_stops_the_process,
     .signal = SIGABRT)
{
	/* a use after free overwrites the link of a block on its span's list; the refill that
	 * walks the list after the unlock checks each link as the one under the lock does */
	enum { N = 300 };
	struct companion k;
	pthread_t t;
	share_the_arena(&k, &t);
	char *p[N];
	for (int i = 0; i < N; i++)
		p[i] = A(malloc)(48);
	for (int i = 0; i + 1 < N; i++) /* the last one keeps the span in use */
		A(free)(p[i]);
	liballoc_flush_caches();
	memset(p[0], 0x41, 8);
	for (int i = 0; i < 2 * N; i++)
		sink = A(malloc)(48);
	end_company(&k, t); /* not reached */
}

/* ---- a refill after a bulk free walks four spans side by side (arena.c, pop_ways) ------ */

/* Six spans' worth of 64-byte blocks, all but every 8th freed and the caches flushed: every
 * freed block is on its span's list (lists of ~900), the class's partial list holds the six
 * spans (and the one carving went on to, if any). p receives the N blocks. */
enum { BULK_N = 6 * 1024, BULK_KEEP = 8 };
/* (n blocks: the lists' tests below take 20 spans, past LISTS_SPANS) */
static struct arena *bulk_freed_n(void **p, int n, struct leftovers *left)
{
	for (int i = 0; i < n; i++)
		cr_assert_not_null(p[i] = A(malloc)(64));
	take_leftovers(64, left);
	for (int i = 0; i < n; i++)
		if (i % BULK_KEEP)
			A(free)(p[i]);
	liballoc_flush_caches();
	struct arena *a = la_tcache.arena;
	cr_assert_eq(__atomic_load_n(&a->threads, __ATOMIC_RELAXED), 1, "an arena of its own");
	return a;
}

static struct arena *bulk_freed(void **p, struct leftovers *left)
{
	return bulk_freed_n(p, BULK_N, left);
}

/* The span of each of the n blocks: out[i]'s in sp[i]; every block a block start of the
 * class in a span of the arena, and no two the same. Returns how many spans they came from. */
static unsigned spans_of(void **out, uint32_t n, unsigned cls, struct span **sp)
{
	unsigned distinct = 0;
	for (uint32_t i = 0; i < n; i++) {
		cr_assert_not_null(out[i], "block %u", i);
		sp[i] = span_lookup(heap_of(out[i]), out[i]);
		cr_assert(sp[i] && sp[i]->kind == SPAN_SMALL && sp[i]->cls == cls,
		          "block %u (%p) is a block of the class", i, out[i]);
		bool seen = false;
		for (uint32_t j = 0; j < i; j++) {
			cr_assert_neq(out[j], out[i], "blocks %u and %u are the same", j, i);
			seen |= sp[j] == sp[i];
		}
		distinct += !seen;
	}
	return distinct;
}

Test(spans, after_a_bulk_free_a_refill_takes_blocks_of_four_spans_at_once)
{
	/* a refill of 32 blocks where six spans hold hundreds of freed blocks each: 8 blocks
	 * of each of the first four (their lists walked side by side: the misses of four
	 * chains overlap), each span's blocks side by side in the batch (one run per span,
	 * which a flush finds by span again), each block once; then every block goes back
	 * and every span the class grew empties (counts right) */
	void **p = A(malloc)(BULK_N * sizeof(void *));
	cr_assert_not_null(p);
	unsigned cls = sc_class_of(64);
	uint64_t spans0 = class_spans(cls);
	struct leftovers left;
	struct arena *a = bulk_freed(p, &left);
	void *out[32];
	struct span *sp[32];
	cr_assert_eq(arena_refill(a, cls, out, 32, 32, NULL), 32);
	cr_assert_eq(spans_of(out, 32, cls, sp), 4, "the 32 blocks came from four spans");
	for (uint32_t i = 0; i < 32; i++)
		cr_assert_eq(sp[i], sp[i / 8 * 8], "block %u lies in the run of its span", i);
	uint32_t listed = 0;
	struct span *bad = span_miscounted(a, cls, &listed);
	cr_assert_null(bad, "a span lists %u blocks, its count says %u", listed,
	               bad ? (uint32_t)(bad->bump - bad->used) : 0);
	arena_free_blocks(a, out, 32, cls, FLUSH_PLAIN);
	for (int i = 0; i < BULK_N; i += BULK_KEEP)
		A(free)(p[i]);
	free_leftovers(&left);
	liballoc_flush_caches();
	cr_assert_leq(class_spans(cls) - spans0, 1, "the spans of the class went back");
	A(free)(p);
}

Test(spans, a_list_shorter_than_its_span_counts_ends_the_side_by_side_walk_early)
{
	/* a span whose count says more than its list holds (another thread's refill has the
	 * rest out: refill_take_chain's pin, a lender's, or a fork's): its list ends (NULL)
	 * where the walk expected more. The walk stops there for the four spans, moves each
	 * span's run up to what it took, and the rest of the refill comes from the spans one
	 * after the other: 32 blocks, each once, the short span's 2 among them */
	void **p = A(malloc)(BULK_N * sizeof(void *));
	cr_assert_not_null(p);
	unsigned cls = sc_class_of(64);
	struct leftovers left;
	struct arena *a = bulk_freed(p, &left);
	arena_lock(a);
	struct span *s = a->partial[cls];
	while (s && !s->free)
		s = s->next;
	cr_assert_not_null(s);
	for (s = s->next; s && !s->free; s = s->next)
		;
	cr_assert_not_null(s, "a second span with freed blocks");
	void *b1 = s->free, *b2 = link_decode(*(void **)b1, b1);
	cr_assert_not_null(b2);
	*(void **)b2 = link_encode(NULL, b2); /* the rest of its list is out */
	struct span *shortened = s;
	arena_unlock(a);
	void *out[32];
	struct span *sp[32];
	cr_assert_eq(arena_refill(a, cls, out, 32, 32, NULL), 32);
	spans_of(out, 32, cls, sp);
	uint32_t from_short = 0;
	for (uint32_t i = 0; i < 32; i++)
		from_short += sp[i] == shortened;
	cr_assert_eq(from_short, 2, "the short list gave its 2 blocks");
	cr_assert_null(shortened->free, "the short list was taken whole");
	cr_assert_eq(sp[0], sp[1], "the runs moved up: the first span's 2 first");
	cr_assert_eq(sp[2], shortened, "the runs moved up: the short span's 2 next");
	/* the blocks cut off the list stay counted out (a test's leak) */
	arena_free_blocks(a, out, 32, cls, FLUSH_PLAIN);
	A(free)(p);
}

static void corrupt_a_link_of_the_third_span(void)
{
	static void *p[BULK_N];
	struct leftovers left;
	struct arena *a = bulk_freed(p, &left);
	unsigned cls = sc_class_of(64);
	arena_lock(a);
	struct span *s = a->partial[cls];
	for (int k = 0; k < 3; s = s->next)
		if (s->free && ++k == 3)
			break;
	void *b = s->free;
	for (int i = 0; i < 3; i++)
		b = link_decode(*(void **)b, b);
	arena_unlock(a);
	memset(b, 0x41, 8); /* a use after free overwrites the list link */
	void *out[32];
	arena_refill(a, cls, out, 32, 32, NULL);
}

Test(spans, a_refill_walking_four_spans_side_by_side_stops_at_a_corrupted_link)
{
	struct child_result r = run_child(corrupt_a_link_of_the_third_span);
	assert_child_aborted_with(r, "liballoc: malloc(): corrupted free list detected");
}

enum { LIST_N = 20 * 1024 };

/* Twenty spans' worth of 64-byte blocks (LIST_N), all but every 8th freed (bulk_freed_n),
 * then mallocs of 64 bytes until one takes a span's whole list (the first
 * refill after the bulk free puts the class in list mode, the next takes a list: returned,
 * the blocks taken until then in *first) */
struct before_list {
	void *p[TC_MAX_BLOCKS];
	unsigned n;
};
static struct tlist *list_taken(void **p, struct leftovers *left, struct before_list *first)
{
	bulk_freed_n(p, LIST_N, left);
	unsigned cls = sc_class_of(64);
	struct tlist *l = &la_tcache.lists[cls];
	first->n = 0;
	while (!l->base && first->n < TC_MAX_BLOCKS)
		cr_assert_not_null(first->p[first->n++] = A(malloc)(64));
	if (!((la_tcache.lists_out >> cls & 1) && l->base && l->left > 100)) {
		/* (no cr_assert: in a forked child its report waits for ever) */
		fprintf(stderr, "no list out after %u mallocs\n", first->n);
		_exit(9);
	}
	return l;
}

static void free_before_list(struct before_list *first)
{
	for (unsigned i = 0; i < first->n; i++)
		A(free)(first->p[i]);
}

/* Every span of the 64-byte class lists what its count says */
static void spans_counted(void)
{
	uint32_t n = 0;
	struct span *bad = span_miscounted(la_tcache.arena, sc_class_of(64), &n);
	cr_assert_null(bad, "a span lists %u blocks, its count says %u", n,
	               bad ? (uint32_t)(bad->bump - bad->used) : 0);
}

/* list_taken's blocks all freed */
static void list_test_done(void **p, struct leftovers *left, struct before_list *first)
{
	free_before_list(first);
	for (int i = 0; i < LIST_N; i += BULK_KEEP)
		A(free)(p[i]);
	free_leftovers(left);
}

/* The list's block k (0: its head) */
static void *list_block(const struct tlist *l, unsigned k)
{
	void *b = l->head;
	for (unsigned i = 0; i < k; i++)
		b = link_decode(*(void **)b, b);
	return b;
}

/* After a bulk free, malloc's refill of a class up to 128 bytes takes the first span's whole
 * list (tcache.h, struct tlist; arena_take_list): the blocks come one at a time, in list
 * order, all of that span, through one refill; a flush of the cache gives the rest back,
 * and every span's list then holds what its count says. */
Test(spans, after_a_bulk_free_malloc_takes_a_spans_whole_list_one_block_at_a_time)
{
	void **p = A(malloc)(LIST_N * sizeof(void *));
	cr_assert_not_null(p);
	unsigned cls = sc_class_of(64);
	uint64_t spans0 = class_spans(cls);
	struct leftovers left;
	struct arena *a = bulk_freed_n(p, LIST_N, &left);
	cr_assert_eq(tcache_count(cls), 0, "the bin is empty");
	/* the first refill after the bulk free fills the bin and puts the class in list mode
	 * (xfer_refill_marks, refill_from); the bin's blocks taken, the next refill takes a list */
	static struct before_list pre;
	pre.n = 0;
	cr_assert_not_null(pre.p[pre.n++] = A(malloc)(64));
	cr_assert(la_tcache.lists_out >> cls & 1, "the class is in list mode");
	cr_assert(!la_tcache.lists[cls].base, "no list yet");
	while (tcache_count(cls))
		pre.p[pre.n++] = A(malloc)(64);
	arena_lock(a);
	struct span *first = a->partial[cls];
	while (first && !first->free)
		first = first->next;
	cr_assert_not_null(first);
	uint32_t listed = (uint32_t)(first->bump - first->used);
	void *next = first->free;
	arena_unlock(a);
	cr_assert_gt(listed, 100, "the span lists hundreds of blocks");
	enum { K = 100 };
	void *q[K];
	struct la_counters c0, c1;
	liballoc_stats(&c0);
	for (int i = 0; i < K; i++) {
		q[i] = A(malloc)(64);
		cr_assert_eq(q[i], next, "block %d is the list's next", i);
		next = i + 1 < K ? link_decode(*(void **)next, next) : NULL;
		/* (the link read before malloc clears the block's second word only) */
	}
	liballoc_stats(&c1);
	cr_assert_eq(c1.cache_refills - c0.cache_refills, 1, "%llu refills for %d blocks",
	             (unsigned long long)(c1.cache_refills - c0.cache_refills), K);
	cr_assert(la_tcache.lists_out >> cls & 1, "the list is out");
	cr_assert_eq(la_tcache.lists[cls].left, listed - K, "the list counts the rest");
	cr_assert_null(first->free, "the span lists nothing while its list is out");
	cr_assert_eq(first->used, first->bump, "its blocks count out");
	liballoc_flush_caches();
	cr_assert(!la_tcache.lists[cls].base && !la_tcache.lists[cls].head,
	          "the flush gave the list back");
	uint32_t n = 0;
	struct span *bad = span_miscounted(a, cls, &n);
	cr_assert_null(bad, "a span lists %u blocks, its count says %u", n,
	               bad ? (uint32_t)(bad->bump - bad->used) : 0);
	for (int i = 0; i < K; i++)
		A(free)(q[i]);
	free_before_list(&pre);
	for (int i = 0; i < LIST_N; i += BULK_KEEP)
		A(free)(p[i]);
	free_leftovers(&left);
	liballoc_flush_caches();
	cr_assert_leq(class_spans(cls) - spans0, 1, "the spans of the class went back");
	A(free)(p);
}

/* How many spans on cls's partial list hold freed blocks (a list of their own) */
static unsigned spans_holding_freed(struct arena *a, unsigned cls)
{
	unsigned n = 0;
	arena_lock(a);
	for (struct span *s = a->partial[cls]; s; s = s->next)
		n += s->free != NULL;
	arena_unlock(a);
	return n;
}

/* After a bulk free, the class's last spans holding freed blocks give their whole lists
 * too: with fewer than four of them on its partial list (the side-by-side walk's four),
 * malloc still takes each span's list and reads each link as its block goes out, where a
 * refill would walk 32 cold links in a row into the bin (arena.c, arena_take_list;
 * bench/README.md, growth). Every span that held freed blocks after the first refill gives
 * one list, and the spans count right after it all went back. */
Test(spans, after_a_bulk_free_the_last_spans_give_their_lists_too)
{
	void **p = A(malloc)(LIST_N * sizeof(void *));
	cr_assert_not_null(p);
	unsigned cls = sc_class_of(64);
	struct leftovers left;
	struct arena *a = bulk_freed_n(p, LIST_N, &left);
	static struct before_list pre;
	pre.n = 0;
	cr_assert_not_null(pre.p[pre.n++] = A(malloc)(64));
	cr_assert(la_tcache.lists_out >> cls & 1, "the class is in list mode");
	while (tcache_count(cls))
		pre.p[pre.n++] = A(malloc)(64);
	unsigned held = spans_holding_freed(a, cls);
	cr_assert_geq(held, 16, "%u spans hold freed blocks", held);
	/* every freed block taken back: until no span holds any and the last list is used up */
	static void *q[LIST_N];
	unsigned nq = 0, lists = 0;
	uintptr_t last = 0;
	const struct tlist *l = &la_tcache.lists[cls];
	while (spans_holding_freed(a, cls) || l->head) {
		cr_assert_lt(nq, LIST_N, "more mallocs than blocks freed");
		cr_assert_not_null(q[nq++] = A(malloc)(64));
		if (l->base && l->base != last) {
			lists++;
			last = l->base;
		}
	}
	cr_assert_eq(lists, held, "%u lists taken of the %u spans that held freed blocks", lists,
	             held);
	cr_assert_eq(tcache_count(cls), 0, "no refill filled the bin");
	for (unsigned i = 0; i < nq; i++)
		A(free)(q[i]);
	liballoc_flush_caches();
	spans_counted();
	free_before_list(&pre);
	for (int i = 0; i < LIST_N; i += BULK_KEEP)
		A(free)(p[i]);
	free_leftovers(&left);
	A(free)(p);
}

/* calloc's empty bin takes malloc's way (malloc.c, calloc_slow): in list mode the list's
 * next block, cleared, with no refill of the bin, where calloc went through malloc_slow and
 * tcache_alloc_slow, whose refill filled the bin from the arena beside the list out. */
Test(spans, calloc_of_a_class_in_list_mode_takes_the_list_s_next_block)
{
	void **p = A(malloc)(LIST_N * sizeof(void *));
	cr_assert_not_null(p);
	unsigned cls = sc_class_of(64);
	struct leftovers left;
	static struct before_list first;
	struct tlist *l = list_taken(p, &left, &first);
	cr_assert_eq(tcache_count(cls), 0, "the bin is empty");
	void *next = l->head;
	uint32_t listed = l->left;
	memset((char *)next + 16, 0x5a, 48); /* (its first word links the list) */
	struct la_counters c0, c1;
	liballoc_stats(&c0);
	unsigned char *q = A(calloc)(1, 64);
	liballoc_stats(&c1);
	cr_assert_eq(q, next, "calloc took %p, the list's next block is %p", (void *)q, next);
	cr_assert_eq(c1.cache_refills - c0.cache_refills, 0, "%llu refills",
	             (unsigned long long)(c1.cache_refills - c0.cache_refills));
	cr_assert_eq(tcache_count(cls), 0, "the bin stays empty");
	cr_assert_eq(l->left, listed - 1, "the list counts one fewer");
	for (int i = 0; i < 64; i++)
		cr_assert_eq(q[i], 0, "byte %d of the block is %#x", i, q[i]);
	A(free)(q);
	list_test_done(p, &left, &first);
	liballoc_flush_caches();
	spans_counted();
	A(free)(p);
}

/* Lists up to 256 bytes (TC_LIST_CLASSES): twenty spans' worth of 256-byte blocks, all
 * but every 8th freed, put the class in list mode as the 64-byte ones do, and a refill
 * takes a span's whole list (growth 1000000 100000 256 160: 0.878 of the CPU of a build
 * whose lists stopped at 128 bytes, bench/README.md, growth34). Returns the list; p gets
 * the blocks, *pre those taken before the list. */
enum { L256_SIZE = 256, L256_N = 20 * 256 };
static const struct tlist *list_taken_256(void **p, struct leftovers *left, struct before_list *pre)
{
	unsigned cls = sc_class_of(L256_SIZE);
	cr_assert_eq(sc_size[cls], L256_SIZE);
	for (int i = 0; i < L256_N; i++)
		cr_assert_not_null(p[i] = A(malloc)(L256_SIZE));
	take_leftovers(L256_SIZE, left);
	for (int i = 0; i < L256_N; i++)
		if (i % BULK_KEEP)
			A(free)(p[i]);
	liballoc_flush_caches();
	cr_assert_eq(__atomic_load_n(&la_tcache.arena->threads, __ATOMIC_RELAXED), 1,
	             "an arena of its own");
	const struct tlist *l = &la_tcache.lists[cls];
	pre->n = 0;
	while (!l->base && pre->n < TC_MAX_BLOCKS)
		cr_assert_not_null(pre->p[pre->n++] = A(malloc)(L256_SIZE));
	return l;
}

Test(spans, after_a_bulk_free_of_256_byte_blocks_malloc_takes_a_spans_whole_list)
{
	static void *p[L256_N];
	static struct before_list pre;
	struct leftovers left;
	unsigned cls = sc_class_of(L256_SIZE);
	const struct tlist *l = list_taken_256(p, &left, &pre);
	cr_assert(la_tcache.lists_out >> cls & 1, "the 256-byte class is in list mode");
	cr_assert(l->base, "a list taken after %u mallocs", pre.n);
	cr_assert_gt(l->left, 100, "the list holds %u blocks", l->left);
	uintptr_t base = l->base, bytes = l->bytes;
	void *b = A(malloc)(L256_SIZE);
	cr_assert((uintptr_t)b - base < bytes, "the next block comes from the list's span");
	A(free)(b);
	liballoc_flush_caches();
	uint32_t n = 0;
	struct span *bad = span_miscounted(la_tcache.arena, cls, &n);
	cr_assert_null(bad, "a span lists %u blocks, its count says %u", n,
	               bad ? (uint32_t)(bad->bump - bad->used) : 0);
	free_before_list(&pre);
	for (int i = 0; i < L256_N; i += BULK_KEEP)
		A(free)(p[i]);
	free_leftovers(&left);
}

/* a block on a 256-byte list freed again (it is free): the double free is detected */
static void free_a_block_of_a_256_byte_list(void)
{
	static void *p[L256_N];
	static struct before_list pre;
	struct leftovers left;
	const struct tlist *l = list_taken_256(p, &left, &pre);
	if (!l->base || l->left < 10)
		_exit(9); /* (no cr_assert in the child: list_taken's note) */
	void *b = l->head;
	for (int i = 0; i < 5; i++)
		b = link_decode(*(void **)b, b);
	A(free)(b);
}

Test(spans, a_double_free_of_a_block_on_a_256_byte_list_out_stops_the_process)
{
	struct child_result r = run_child(free_a_block_of_a_256_byte_list);
	assert_child_aborted_with(r, "liballoc: free(): double free detected");
}

/* the list's next block freed again: it is free, in this thread's cache */
static void free_a_block_of_the_list(void)
{
	static void *p[LIST_N];
	struct leftovers left;
	static struct before_list first;
	A(free)(list_block(list_taken(p, &left, &first), 5));
}

Test(spans, a_double_free_of_a_block_on_a_list_out_stops_the_process)
{
	struct child_result r = run_child(free_a_block_of_the_list);
	assert_child_aborted_with(r, "liballoc: free(): double free detected");
}

/* a write after free into the list's next block overwrites its link */
static void corrupt_a_link_of_the_list(void)
{
	static void *p[LIST_N];
	struct leftovers left;
	static struct before_list first;
	memset(list_taken(p, &left, &first)->head, 0x41, 8);
	A(malloc)(64);
}

Test(spans, malloc_taking_a_corrupted_link_of_its_list_stops_the_process)
{
	struct child_result r = run_child(corrupt_a_link_of_the_list);
	assert_child_aborted_with(r, "liballoc: malloc(): corrupted free list detected");
}

/* malloc's pop of a list (malloc.c, malloc_list, inline in malloc; tcache_alloc_list) checks
 * the next link it keeps three ways; each test below breaks one of them only, by a write
 * after free into the head block's link: a link out of the span's carved bytes that is a
 * block start by its offset's low 32 bits (the range check, 64 bits wide), one inside the
 * span off a block start (the block-start check), and a cycle (the count) */
static void link_the_list_head_to(uintptr_t (*to)(const struct tlist *l, void *head), bool once)
{
	static void *p[LIST_N];
	struct leftovers left;
	static struct before_list first;
	struct tlist *l = list_taken(p, &left, &first);
	void *b = l->head;
	*(void **)b = link_encode((void *)to(l, b), b);
	/* the first malloc reads the link (a cycle: the count runs out at the list's end) */
	for (uint32_t i = 0, n = once ? 1 : l->left + 1; i < n; i++)
		A(malloc)(64);
	_exit(5); /* (every link taken as valid) */
}

static uintptr_t past_the_span_by_4_gib(const struct tlist *l, void *head)
{
	(void)head;
	return l->base + ((uintptr_t)1 << 32);
}

static uintptr_t inside_a_block(const struct tlist *l, void *head)
{
	(void)l;
	return (uintptr_t)link_decode(*(void **)head, head) + 16; /* (not LIST_MARK's 8) */
}

static uintptr_t to_itself(const struct tlist *l, void *head)
{
	(void)l;
	return (uintptr_t)head;
}

static void link_past_the_span(void)
{
	link_the_list_head_to(past_the_span_by_4_gib, true);
}

static void link_inside_a_block(void)
{
	link_the_list_head_to(inside_a_block, true);
}

static void link_to_itself(void)
{
	link_the_list_head_to(to_itself, false);
}

Test(spans, malloc_taking_a_list_link_4_gib_past_its_span_stops_the_process)
{
	struct child_result r = run_child(link_past_the_span);
	assert_child_aborted_with(r, "liballoc: malloc(): corrupted free list detected");
}

Test(spans, malloc_taking_a_list_link_inside_a_block_stops_the_process)
{
	struct child_result r = run_child(link_inside_a_block);
	assert_child_aborted_with(r, "liballoc: malloc(): corrupted free list detected");
}

Test(spans, malloc_taking_a_list_that_links_to_itself_stops_the_process_within_its_count)
{
	struct child_result r = run_child(link_to_itself);
	assert_child_aborted_with(r, "liballoc: malloc(): corrupted free list detected");
}

/* A thread that frees its argument, then takes a block of its size: what the free put in
 * its cache */
static void *free_and_malloc(void *b)
{
	A(free)(b);
	return A(malloc)(64);
}

/* review23 F4: another thread frees block `candidate` of this thread's list again (this
 * thread idle meanwhile, in pthread_join), then this thread takes the list's next 40
 * blocks: it was found on the list (the other thread's free took this thread's cache and
 * searched it), or the list handed it out a second time. */
static unsigned candidate;
static void free_a_block_of_the_list_from_another_thread(void)
{
	static void *p[LIST_N];
	struct leftovers left;
	static struct before_list first;
	struct tlist *l = list_taken(p, &left, &first);
	void *b = list_block(l, candidate), *got;
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, free_and_malloc, b), 0);
	pthread_join(t, &got);
	for (int i = 0; i < 40; i++)
		if (A(malloc)(64) == b)
			_exit(got == b ? 3
			               : 4); /* handed out twice (3: also to the other thread) */
	_exit(5);
}

Test(spans, a_double_free_from_another_thread_of_a_block_on_a_list_out_stops_the_process)
{
	for (candidate = 0; candidate < 20; candidate++) {
		struct child_result r = run_child(free_a_block_of_the_list_from_another_thread);
		cr_assert(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGABRT,
		          "block %u of the list: status %#x: %s", candidate, r.status, r.err);
		cr_assert_not_null(strstr(r.err, "liballoc: free(): double free detected"),
		                   "block %u: got: %s", candidate, r.err);
	}
}

/* The same with this thread inside a cache operation (its `busy` set, as malloc sets it)
 * while the other thread frees: that free does not wait for it and cannot take its cache;
 * it leaves the block on the list, its link marked, and this thread's malloc reports the
 * double free as it comes to the block (so does a flush that gives the list back). */
static struct {
	void *b;
	int go, done;
} busy_free;
static void *free_when_told(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&busy_free.go, __ATOMIC_ACQUIRE))
		sched_yield();
	A(free)(busy_free.b);
	__atomic_store_n(&busy_free.done, 1, __ATOMIC_RELEASE);
	return A(malloc)(64);
}

static void free_a_block_of_the_list_while_its_owner_is_busy(void)
{
	static void *p[LIST_N];
	struct leftovers left;
	static struct before_list first;
	void *got;
	struct tlist *l = list_taken(p, &left, &first);
	busy_free.b = list_block(l, candidate);
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, free_when_told, NULL), 0);
	la_tcache.busy = 1; /* (no call into the allocator until it is clear again) */
	__atomic_store_n(&busy_free.go, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&busy_free.done, __ATOMIC_ACQUIRE))
		sched_yield();
	la_tcache.busy = 0;
	pthread_join(t, &got);
	if (got == busy_free.b)
		_exit(3); /* the other thread's free put it in its cache */
	void *next = link_decode(*(void **)busy_free.b, busy_free.b);
	if (!list_link_marked(l->base, l->bytes, l->recip, next))
		_exit(4);
	if (candidate & 1)
		liballoc_flush_caches(); /* the list goes back */
	for (int i = 0; i < 40; i++)
		if (A(malloc)(64) == busy_free.b)
			_exit(5); /* handed out */
	_exit(6);
}

Test(spans, a_double_free_of_a_block_on_a_list_whose_owner_is_busy_is_reported_by_the_owner)
{
	for (candidate = 0; candidate < 4; candidate++) {
		struct child_result r = run_child(free_a_block_of_the_list_while_its_owner_is_busy);
		cr_assert(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGABRT,
		          "block %u of the list: status %#x: %s", candidate, r.status, r.err);
		cr_assert_not_null(strstr(r.err, "liballoc: free(): double free detected"),
		                   "block %u: got: %s", candidate, r.err);
	}
}

static void *free_only(void *b)
{
	A(free)(b);
	return NULL;
}

/* A block the list handed out, its second word set to the key by the program, freed by
 * another thread: the check finds it on no list, and the free goes on (no double free) */
Test(spans, a_live_block_of_a_list_s_span_whose_word_is_the_key_frees_from_another_thread)
{
	static void *p[LIST_N];
	struct leftovers left;
	static struct before_list first;
	struct tlist *l = list_taken(p, &left, &first);
	void *q = A(malloc)(64); /* the list's */
	uint32_t held = l->left;
	((void **)q)[1] = (void *)LA_KEY;
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, free_only, q), 0);
	pthread_join(t, NULL);
	cr_assert_eq(l->left, held, "the list is as it was");
	liballoc_flush_caches();
	spans_counted();
	list_test_done(p, &left, &first);
}

/* A list going back keeps the cache's list and the span's mark until it holds the arena's
 * lock, under which free's check of another thread looks for the list's cache (review24
 * pre-1: cleared before the lock, a check in that window found the span's list out and no
 * cache holding it, and the free went on). Another thread holds the lock while this
 * thread's malloc gives its used-up list back: what the list looks like meanwhile. */
static struct {
	struct arena *a;
	const struct tlist *l;
	struct span *s;
	int locked;
	uintptr_t base_seen;
	uint32_t out_seen;
} held_lock;
static void *hold_the_arena_lock(void *arg)
{
	(void)arg;
	arena_lock(held_lock.a);
	__atomic_store_n(&held_lock.locked, 1, __ATOMIC_RELEASE);
	usleep(200 * 1000); /* the flush is waiting for the lock by now */
	held_lock.base_seen = __atomic_load_n(&held_lock.l->base, __ATOMIC_RELAXED);
	held_lock.out_seen = held_lock.s->list_out;
	arena_unlock(held_lock.a);
	return NULL;
}

Test(spans, a_list_going_back_stays_in_its_cache_until_the_arena_s_lock_is_held)
{
	static void *p[LIST_N];
	struct leftovers left;
	static struct before_list first;
	struct tlist *l = list_taken(p, &left, &first);
	held_lock.a = la_tcache.arena;
	held_lock.l = l;
	held_lock.s = span_lookup(heap_of((void *)l->base), (void *)l->base);
	cr_assert(held_lock.s && held_lock.s->list_out, "the span's list is out");
	uintptr_t base = l->base;
	/* the list used up: the next malloc gives it back (list_take), the lock its first */
	static void *q[8192];
	unsigned n = 0;
	while (l->head && n < 8192)
		q[n++] = A(malloc)(64);
	cr_assert(!l->head && !l->left && l->base == base, "the list is used up, still held");
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, hold_the_arena_lock, NULL), 0);
	while (!__atomic_load_n(&held_lock.locked, __ATOMIC_ACQUIRE))
		sched_yield();
	q[n++] = A(malloc)(64); /* waits for the lock in the list's return */
	pthread_join(t, NULL);
	cr_assert_eq(held_lock.base_seen, base, "the cache held the list while the return waited");
	cr_assert(held_lock.out_seen, "the span's list was out while the return waited");
	cr_assert(!held_lock.s->list_out, "the list went back");
	for (unsigned i = 0; i < n; i++)
		A(free)(q[i]);
	list_test_done(p, &left, &first);
}

/* A span's list out in no listed cache (its thread exiting: off tc_list before its lists go
 * back; or gone in a fork's child): free's check cannot search it and leaves the block
 * alone, its link marked, and the list's return or pop reports it (review24 F7). Here the
 * list is hidden from the check (its base cleared for the time of the free, as a cache off
 * the list would be), then shown again and taken on. */
static void free_a_block_of_a_list_in_no_listed_cache(void)
{
	static void *p[LIST_N];
	struct leftovers left;
	static struct before_list first;
	struct tlist *l = list_taken(p, &left, &first);
	void *b = list_block(l, 5);
	uintptr_t base = l->base;
	l->base = 0;
	A(free)(b);
	l->base = base;
	for (int i = 0; i < 40; i++)
		if (A(malloc)(64) == b)
			_exit(3); /* handed out (the free put it in the bin, or the list did) */
	_exit(4);
}

Test(spans, a_double_free_of_a_block_on_a_list_in_no_listed_cache_is_reported_by_the_list)
{
	struct child_result r = run_child(free_a_block_of_a_list_in_no_listed_cache);
	assert_child_aborted_with(r, "liballoc: free(): double free detected");
}

/* List mode comes only after a teardown that leaves LISTS_SPANS (16) spans of the class or
 * more holding freed blocks: after six spans' worth the first refill leaves the class out
 * of it (the bins' pops, fewer instructions while the blocks are warm); after twenty it
 * puts the class in it (list_taken) */
Test(spans, a_teardown_on_six_spans_puts_no_class_in_list_mode)
{
	static void *p[BULK_N];
	struct leftovers left;
	bulk_freed(p, &left);
	unsigned cls = sc_class_of(64);
	void *q = A(malloc)(64);
	cr_assert_gt(tcache_count(cls), 0, "a refill");
	cr_assert(!(la_tcache.lists_out >> cls & 1), "the class is not in list mode");
	A(free)(q);
	for (int i = 0; i < BULK_N; i += BULK_KEEP)
		A(free)(p[i]);
	free_leftovers(&left);
}

/* review23 F5: a list's blocks count as the thread's cached blocks (cached_bytes) while it
 * is out, and no more once a flush gave it back */
Test(spans, a_list_out_counts_in_cached_bytes_until_it_goes_back)
{
	static void *p[LIST_N];
	struct leftovers left;
	bulk_freed_n(p, LIST_N, &left);
	unsigned cls = sc_class_of(64);
	/* the first refill's blocks (list mode) taken: the bin empty, the next malloc a list */
	static struct before_list first;
	first.n = 0;
	cr_assert_not_null(first.p[first.n++] = A(malloc)(64));
	while (tcache_count(cls))
		first.p[first.n++] = A(malloc)(64);
	struct la_counters c0, c1, c2;
	liballoc_stats(&c0);
	first.p[first.n++] = A(malloc)(64);
	liballoc_stats(&c1);
	uint32_t held = la_tcache.lists[cls].left;
	cr_assert_gt(held, 100, "a list is out");
	cr_assert_geq(c1.cached_bytes, c0.cached_bytes + (uint64_t)held * 64,
	              "cached %llu -> %llu with %u blocks of 64 bytes on the list",
	              (unsigned long long)c0.cached_bytes, (unsigned long long)c1.cached_bytes,
	              held);
	liballoc_flush_caches();
	liballoc_stats(&c2);
	cr_assert_leq(c2.cached_bytes, c0.cached_bytes, "cached %llu -> %llu after the flush",
	              (unsigned long long)c0.cached_bytes, (unsigned long long)c2.cached_bytes);
	list_test_done(p, &left, &first);
}

/* review37: a flusher whose take fails (the owner inside a cache operation) restores the
 * divert mask from lists_out as it reads it (take_cache), while the owner may be changing
 * both (lists_mode: its sweep's lists_quiet, list_take finding no list): the mask can keep
 * the bit of a class the owner just took out of list mode. That class's next empty-bin
 * malloc went to list_take, which took a span's whole list for a class out of list mode,
 * and no flush, sweep or thread exit gave that list back (they return the lists of
 * lists_out's classes): its blocks lost to their span, counted cached for good. The state
 * is set here by hand: the class out of list mode, its bit left in the mask. */
Test(spans, a_class_out_of_list_mode_that_the_mask_still_diverts_takes_no_list)
{
	static void *p[LIST_N];
	struct leftovers left;
	bulk_freed_n(p, LIST_N, &left);
	unsigned cls = sc_class_of(64);
	uint64_t bit = (uint64_t)1 << cls;
	static struct before_list first;
	first.n = 0;
	cr_assert_not_null(first.p[first.n++] = A(malloc)(64));
	cr_assert(la_tcache.lists_out & bit, "the class is in list mode");
	while (tcache_count(cls))
		first.p[first.n++] = A(malloc)(64);
	const struct tlist *l = &la_tcache.lists[cls];
	cr_assert(!l->base, "no list yet");
	/* the owner's lists_mode took the class out of list mode; the restore kept its bit */
	la_tcache.lists_out &= ~bit;
	__atomic_store_n(&la_tcache.divert, la_tcache.divert | bit, __ATOMIC_RELAXED);
	cr_assert_not_null(first.p[first.n++] = A(malloc)(64));
	uintptr_t taken = l->base;
	liballoc_flush_caches();
	struct la_counters c;
	liballoc_stats(&c);
	cr_assert(!l->base && !l->head && !l->left,
	          "a list out after the flush (%s by the class out of list mode): %u blocks",
	          taken ? "taken" : "not taken", l->left);
	cr_assert(!(la_tcache.divert & bit), "the mask follows lists_out again");
	cr_assert_eq(c.cached_bytes, 0, "cached %llu bytes after the flush",
	             (unsigned long long)c.cached_bytes);
	spans_counted();
	list_test_done(p, &left, &first);
}

/* review23 F5: the decay pass's cold-bin sweep (tcache_flush_cold, from another thread)
 * gives back the list of a thread that went idle with it (README, release of idle memory) */
static void *sweep_until_given_back(void *arg)
{
	const struct tlist *l = arg;
	for (int i = 0; i < 10 && __atomic_load_n(&l->base, __ATOMIC_RELAXED); i++)
		tcache_flush_cold();
	return NULL;
}

Test(spans, the_cold_bin_sweep_gives_back_the_list_of_an_idle_thread)
{
	static void *p[LIST_N];
	struct leftovers left;
	static struct before_list first;
	struct tlist *l = list_taken(p, &left, &first);
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, sweep_until_given_back, l), 0);
	pthread_join(t, NULL);
	cr_assert(!l->base && !l->head && !l->left, "the sweep gave the list back");
	spans_counted();
	list_test_done(p, &left, &first);
}

/* review23 F5: the cache's own sweep (tcache_gc, every TC_GC_EVENTS refills and flushes)
 * gives back the list of a class that saw none since the last sweep, and leaves list mode */
Test(spans, the_cache_s_own_sweep_gives_back_the_list_of_a_class_gone_quiet)
{
	static void *p[LIST_N];
	struct leftovers left;
	static struct before_list first;
	unsigned cls = sc_class_of(64);
	struct tlist *l = list_taken(p, &left, &first);
	static void *q[300];
	for (int r = 0; r < 50 && l->base; r++) { /* refills and flushes of 1000 bytes */
		for (int i = 0; i < 300; i++)
			q[i] = A(malloc)(1000);
		for (int i = 0; i < 300; i++)
			A(free)(q[i]);
	}
	cr_assert(!l->base && !l->head && !l->left, "the sweep gave the list back");
	cr_assert(!(la_tcache.lists_out >> cls & 1), "the class left list mode");
	spans_counted();
	list_test_done(p, &left, &first);
}

/* Empty spans of the classes above 8 KiB stay for their class while it is in use (arena.c,
 * KEEP_EMPTY_*: one per 5 spans in use, at most 8), so that its next blocks start on the
 * pages its last ones had; as its spans in use fall, each span that empties takes one kept
 * one back with it, and a trim gives back the rest. Those of 20-32 KiB keep every span
 * that empties until the next span or large block takes pages (KEEP_BATCH_FROM), which
 * sends them back down to that: pages_taken makes a span of a class not used before. */
static void pages_taken(size_t size)
{
	void *q = A(malloc)(size);
	cr_assert_not_null(q);
	A(free)(q);
}

static uint32_t kept_on_list(struct arena *a, unsigned cls)
{
	uint32_t n = 0;
	for (struct span *s = a->partial[cls]; s; s = s->next)
		if (s->used == 0)
			n++;
	return n;
}

Test(empty_spans, a_class_above_8_kib_keeps_some_while_in_use_and_gives_them_back_as_it_falls)
{
	enum { N = 480, SIZE = 24576 };
	static void *p[N];
	unsigned cls = sc_class_of(SIZE);
	struct arena *a = tcache_arena(&la_tcache);
	for (int i = 0; i < N; i++)
		cr_assert_not_null(p[i] = A(malloc)(SIZE));
	/* a quarter of them back (whole spans: a refill carves a span's blocks in a row) */
	for (int i = 0; i < N / 4; i++)
		A(free)(p[i]);
	uint32_t skipped;
	tcache_flush_all(&skipped);
	pages_taken(9000);
	arena_lock(a);
	uint32_t kept = a->nempty[cls], listed = kept_on_list(a, cls);
	uint32_t in_use = a->nspans[cls] - kept;
	arena_unlock(a);
	cr_assert_eq(kept, listed, "the count is the list's: %u, %u", kept, listed);
	cr_assert_gt(kept, 1, "%u empty spans kept, %u in use", kept, in_use);
	cr_assert_leq(kept, LA_MAX(1u, LA_MIN(8u, in_use / 5)), "%u kept, %u in use", kept, in_use);
	/* the class's next blocks come from the kept spans: no new span for as many */
	uint64_t spans = class_spans(cls);
	uint32_t again = kept * sc_blocks[cls];
	for (uint32_t i = 0; i < again; i++)
		cr_assert_not_null(p[i] = A(malloc)(SIZE));
	cr_assert_leq(class_spans(cls), spans, "%llu spans made for %u blocks",
	              (unsigned long long)(class_spans(cls) - spans), again);
	for (int i = (int)again; i < N / 4; i++)
		cr_assert_not_null(p[i] = A(malloc)(SIZE));
	/* all of them back: the class falls, and the kept spans go with it */
	for (int i = 0; i < N; i++)
		A(free)(p[i]);
	tcache_flush_all(&skipped);
	pages_taken(11000);
	arena_lock(a);
	kept = a->nempty[cls];
	listed = kept_on_list(a, cls);
	arena_unlock(a);
	cr_assert_eq(kept, listed);
	cr_assert_leq(kept, 1, "%u empty spans kept with none in use", kept);
}

/* A batch of 20-32 KiB blocks allocated, then freed: every span it emptied stays with its
 * class (arena.c, KEEP_BATCH_FROM), and the class's next batch takes its blocks from them,
 * no span made (sizes-sweep: two sizes in a row of each of these classes); the next span
 * of another class sends them back to their heap first, all but one. */
Test(empty_spans, a_batch_of_20_to_32_kib_blocks_leaves_its_spans_to_the_next_batch)
{
	enum { N = 64, SIZE = 28672 };
	static void *p[N];
	unsigned cls = sc_class_of(SIZE);
	struct arena *a = tcache_arena(&la_tcache);
	for (int i = 0; i < N; i++)
		cr_assert_not_null(p[i] = A(malloc)(SIZE));
	uint64_t spans = class_spans(cls);
	for (int i = 0; i < N; i++)
		A(free)(p[i]);
	arena_lock(a);
	uint32_t kept = a->nempty[cls], listed = kept_on_list(a, cls);
	arena_unlock(a);
	cr_assert_eq(kept, listed, "the count is the list's: %u, %u", kept, listed);
	/* the thread cache's bin holds up to 6 of the blocks: 2 spans in use at most */
	cr_assert_geq(kept, N / 4 - 2, "%u of %llu spans kept", kept, (unsigned long long)spans);
	for (int i = 0; i < N; i++)
		cr_assert_not_null(p[i] = A(malloc)(SIZE));
	cr_assert_leq(class_spans(cls), spans, "%llu spans made for the second batch",
	              (unsigned long long)(class_spans(cls) - spans));
	for (int i = 0; i < N; i++)
		A(free)(p[i]);
	pages_taken(20000);
	arena_lock(a);
	kept = a->nempty[cls];
	listed = kept_on_list(a, cls);
	arena_unlock(a);
	cr_assert_eq(kept, listed);
	cr_assert_leq(kept, 1, "%u empty spans kept after another class's span took pages", kept);
}

Test(empty_spans, a_side_by_side_walk_that_takes_a_kept_span_counts_it_in_use_again)
{
	/* a kept empty span of a class above 8 KiB (counted spare: its heap's spare pages and
	 * the class's empty count; flagged on the partial list) among the first four spans
	 * with freed blocks: a refill of 16 walks the four side by side (arena.c,
	 * pop_ways_first) and takes a block of each (then the kept span's others). The kept
	 * span is in use again: neither spare nor flagged (accounting.c's check_arena
	 * compares these counts with the heaps) */
	enum { SPANS = 20, SIZE = 12288 };
	unsigned cls = sc_class_of(SIZE);
	cr_assert_gt(sc_size[cls], 8192);
	uint32_t per = sc_blocks[cls], n = SPANS * per;
	struct arena *a = tcache_arena(&la_tcache);
	void **b = A(malloc)(n * sizeof(void *));
	bool *out_of_arena = A(malloc)(n * sizeof(bool));
	cr_assert(b && out_of_arena);
	for (uint32_t got = 0; got < n;) {
		uint32_t k = arena_refill(a, cls, b + got, LA_MIN(n - got, per), per, NULL);
		cr_assert_gt(k, 0);
		got += k;
	}
	for (uint32_t i = 0; i < n; i++)
		out_of_arena[i] = true;
	/* span s[0] emptied (kept), one block of each of three others freed, to their spans
	 * (not through the transfer cache) */
	struct span *s[4] = {span_lookup(heap_of(b[0]), b[0])};
	struct heap *h = heap_of(b[0]);
	for (uint32_t i = 0; i < n; i++)
		if (span_lookup(heap_of(b[i]), b[i]) == s[0]) {
			arena_free_local(a, b[i]);
			out_of_arena[i] = false;
		}
	for (uint32_t i = 0, k = 1; i < n && k < 4; i++) {
		struct span *t = span_lookup(heap_of(b[i]), b[i]);
		if (t == s[0] || t == s[1] || t == s[2] || t->used != per)
			continue;
		s[k++] = t;
		arena_free_local(a, b[i]);
		out_of_arena[i] = false;
	}
	arena_lock(a);
	uint32_t spare0 = h->spare_pages, empty0 = a->nempty[cls];
	bool kept = s[0]->used == 0 && s[0]->on_partial == 2;
	bool first_four = true; /* the first four spans with freed blocks are s[0..3] */
	unsigned seen = 0;
	for (struct span *t = a->partial[cls]; t && seen < 4; t = t->next)
		if (t->free) {
			first_four &= t == s[0] || t == s[1] || t == s[2] || t == s[3];
			seen++;
		}
	arena_unlock(a);
	cr_assert(kept, "the emptied span is kept (used %u, on_partial %u)", s[0]->used,
	          s[0]->on_partial);
	cr_assert(first_four && seen == 4, "the four spans lead the partial list");
	cr_assert_geq(spare0, s[0]->npages);
	void *got[16];
	uint32_t k = arena_refill(a, cls, got, 16, 16, NULL);
	cr_assert_geq(k, 4, "the four spans gave a block each (got %u)", k);
	bool from_kept = false;
	for (uint32_t i = 0; i < k; i++)
		from_kept |= span_lookup(heap_of(got[i]), got[i]) == s[0];
	arena_lock(a);
	uint32_t spare1 = h->spare_pages, empty1 = a->nempty[cls];
	unsigned used = s[0]->used, flag = s[0]->on_partial;
	arena_unlock(a);
	cr_assert(from_kept, "the refill took blocks of the kept span");
	cr_assert_gt(used, 0);
	cr_assert_neq(flag, 2, "the span in use again is not flagged empty");
	cr_assert_eq(empty1, empty0 - 1, "the class's empty spans %u -> %u", empty0, empty1);
	cr_assert_eq(spare1, spare0 - s[0]->npages, "the heap's spare pages %u -> %u", spare0,
	             spare1);
	for (uint32_t i = 0; i < k; i++)
		arena_free_local(a, got[i]);
	for (uint32_t i = 0; i < n; i++)
		if (out_of_arena[i])
			arena_free_local(a, b[i]);
	A(free)(out_of_arena);
	A(free)(b);
}

/* ---- bins that grow (tcache.c, bin_grow) ---------------------------------------------- */

/* rounds of n blocks of size bytes allocated, then all freed; returns the refills of the
 * last round (this thread's arena: no other thread of the test allocates through it) */
static uint64_t build_and_tear_down(size_t size, int n, int rounds)
{
	void **p = A(malloc)(sizeof(void *) * (size_t)n);
	cr_assert_not_null(p);
	uint64_t refills = 0;
	for (int r = 0; r < rounds; r++) {
		struct la_counters c0, c1;
		liballoc_stats(&c0);
		for (int i = 0; i < n; i++)
			cr_assert_not_null(p[i] = A(malloc)(size));
		liballoc_stats(&c1);
		refills = c1.cache_refills - c0.cache_refills;
		for (int i = 0; i < n; i++)
			A(free)(p[i]);
	}
	A(free)(p);
	return refills;
}

/* Every room word of bin cls's row says what its limit allows (tcache.h, struct twide):
 * the class's reciprocal below the limit, 0 from it on (bin_limit_to writes only those
 * between the old limit and the new one at a growth or a shrink). */
static void assert_room_words(unsigned cls)
{
	const struct tbin *b = &la_tcache.bins[cls];
	bool wide =
	        cls < TC_WIDE_CLASSES && la_tcache.slots && (la_tcache.slots->wide_bins >> cls & 1);
	uint32_t n = wide ? TC_WIDE_SLOTS : TC_SLOTS;
	const uint64_t *room = (const uint64_t *)(const void *)((const char *)b->slot + TC_ROOM);
	for (uint32_t k = 0; k < n; k++)
		cr_assert_eq(room[k], k < b->limit ? sc_recip[cls] : 0,
		             "class %u limit %u: room word %u reads %llu", cls, b->limit, k,
		             (unsigned long long)room[k]);
}

static void no_decay_pass(void)
{
	char reason[160];
	cr_assert_eq(liballoc_set("decay_ms", 0, reason, sizeof(reason)), 0, "%s", reason);
}

/* A class whose blocks go to the arena and come back in runs longer than its bin holds (a
 * structure of 2,000 blocks of 32 bytes built and torn down, again and again) refills and
 * flushes part of a bin at a time: with the 63 blocks of a bin's row, each refill took at
 * most 32 of them (48 since e853a0d: 3/4 of the limit up to 48 bytes), 63 refills a build.
 * Such a bin grows (up to TC_GROW_BYTES: 127 blocks of 32 bytes), and its refills take up
 * to 96: fewer still. */
Test(growth, a_bin_that_refills_and_flushes_often_grows)
{
	no_decay_pass();
	enum { N = 2000 };
	unsigned cls = sc_class_of(32);
	uint64_t refills = build_and_tear_down(32, N, 6);
	struct tbin *b = &la_tcache.bins[cls];
	cr_assert_gt(b->limit, TC_MAX_BLOCKS, "limit %u", b->limit);
	cr_assert_leq((uint64_t)b->limit * sc_size[cls], TC_GROW_BYTES, "limit %u", b->limit);
	cr_assert_leq(b->limit, TC_WIDE_SLOTS - 1);
	cr_assert_lt(refills, N / (TC_MAX_BLOCKS / 2 + 1), "%llu refills for %d blocks",
	             (unsigned long long)refills, N);
	assert_room_words(cls);
	/* the bin holds up to its limit: as many frees in a row go into it, no flush */
	void *p[2 * TC_WIDE_SLOTS];
	uint32_t n = 0;
	while (n < b->limit || tbin_count(b)) /* its limit's worth out, and the bin empty */
		cr_assert_not_null(p[n++] = A(malloc)(32));
	struct la_counters c0, c1;
	liballoc_stats(&c0);
	for (uint32_t i = 0; i < b->limit; i++)
		A(free)(p[i]);
	liballoc_stats(&c1);
	cr_assert_eq(tbin_count(b), b->limit);
	cr_assert_eq(c1.cache_flushes, c0.cache_flushes, "no flush");
	for (uint32_t i = b->limit; i < n; i++)
		A(free)(p[i]);
}

/* Classes above 48 bytes keep their rows of 63 blocks: 64 bytes and more, those fill
 * TC_GROW_BYTES already. */
Test(growth, a_bin_of_64_byte_blocks_keeps_its_limit)
{
	no_decay_pass();
	build_and_tear_down(64, 2000, 6);
	cr_assert_eq(la_tcache.bins[sc_class_of(64)].limit, TC_MAX_BLOCKS);
}

/* The grown limit stays within tcache_max_bytes per class. */
Test(growth, a_bin_grows_within_tcache_max_bytes)
{
	no_decay_pass();
	char reason[160];
	cr_assert_eq(liballoc_set("tcache_max_bytes", 2560, reason, sizeof(reason)), 0, "%s",
	             reason);
	build_and_tear_down(32, 2000, 6);
	struct tbin *b = &la_tcache.bins[sc_class_of(32)];
	cr_assert_gt(b->limit, TC_MAX_BLOCKS, "2560 bytes: 80 blocks");
	cr_assert_eq(b->limit, 2560 / 32, "limit %u", b->limit);
	assert_room_words(sc_class_of(32));
}

/* A grown bin whose class the thread stopped using goes back to its base limit at the
 * first cold-bin sweep that finds it quiet (the sweeps come with other classes' refills
 * and flushes): the bytes it may hold are TC_GROW_BYTES only while the class is in use. */
Test(growth, a_grown_bin_goes_back_to_its_limit_when_its_class_goes_quiet)
{
	no_decay_pass();
	unsigned cls = sc_class_of(32);
	struct tbin *b = &la_tcache.bins[cls];
	build_and_tear_down(32, 2000, 6);
	cr_assert_gt(b->limit, TC_MAX_BLOCKS);
	build_and_tear_down(512, 2000, 4); /* hundreds of refills and flushes of another class */
	cr_assert_eq(b->limit, TC_MAX_BLOCKS, "limit %u", b->limit);
	cr_assert_leq(tbin_count(b), TC_MAX_BLOCKS);
	assert_room_words(cls);
	/* and grows again when the class comes back */
	build_and_tear_down(32, 2000, 6);
	cr_assert_gt(b->limit, TC_MAX_BLOCKS);
	assert_room_words(cls);
}

/* A thread that loops through a few small sizes, a batch of 256 blocks each (bench sizes
 * over 16-128 bytes; probes' ph 400 8 64): each class is quiet at some of the cold-bin
 * sweeps between its batches, comes back within TC_GC_WINDOW sweeps, so the sweeps learn
 * to leave its blocks alone (gc_skip). Its growth stays with it too: before, each quiet
 * sweep started its count over (bin_shrink), the 32-byte bin never grew past its 63
 * blocks and each batch took 8 refills and 7 flushes of 32. */
Test(growth, a_bin_the_cold_sweeps_leave_alone_keeps_growing)
{
	no_decay_pass();
	static const size_t sizes[] = {16, 32, 48, 64, 96, 128};
	unsigned cls = sc_class_of(32);
	struct tbin *b = &la_tcache.bins[cls];
	void *p[256];
	uint8_t sweeps0 = la_tcache.gc_sweeps;
	uint64_t refills = 0;
	for (int round = 0; round < 40; round++) {
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			struct la_counters c0, c1;
			liballoc_stats(&c0);
			for (int i = 0; i < 256; i++)
				cr_assert_not_null(p[i] = A(malloc)(sizes[s]));
			liballoc_stats(&c1);
			if (sizes[s] == 32)
				refills = c1.cache_refills - c0.cache_refills;
			for (int i = 0; i < 256; i++)
				A(free)(p[i]);
		}
	}
	cr_assert_geq((uint8_t)(la_tcache.gc_sweeps - sweeps0), 40, "the sweeps ran");
	cr_assert_gt(la_tcache.gc_skip[cls] + la_tcache.gc_level[cls], 0,
	             "the sweeps leave the class alone");
	cr_assert_gt(b->limit, TC_MAX_BLOCKS, "limit %u", b->limit);
	cr_assert_lt(refills, 256 / (TC_MAX_BLOCKS / 2 + 1), "%llu refills for 256 blocks",
	             (unsigned long long)refills);
	assert_room_words(cls);
}

/* review38: malloc pops a class in list mode inline (afb5812, malloc_list) while another
 * thread flushes its cache (take_cache: the divert mask and the idle bins, the owner's
 * busy flag) and the control thread's decay pass runs every millisecond (decay_ms 1): a
 * worker of an arena of its own builds RACE_N blocks of 64 bytes, stamped, and frees all
 * but every 8th (a teardown: its next builds take spans' whole lists), at least
 * RACE_ROUNDS times and until the test's thread, calling liballoc_flush_caches() in a
 * loop, made RACE_FLUSHES flushes (10 s at most). No block is handed out twice within a
 * build, none changes while it is live, no check of the library stops the process; and
 * the worker was in list mode in most builds (else this tests nothing). A stress: a bug
 * in the handshake shows only when a flush meets a pop, which a loaded machine makes
 * rare (a pop before the idle-bins test was caught in 2 of 5 runs at load 14). */
enum { RACE_N = 40000, RACE_ROUNDS = 40, RACE_FLUSHES = 20000 };
static struct {
	int done, dups, stamps, list_rounds, rounds;
	long flushes;
} race;
static void *race_worker(void *arg)
{
	(void)arg;
	static uint64_t *p[RACE_N], *sorted[RACE_N], *kept[RACE_N / 8];
	unsigned cls = sc_class_of(64);
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	/* RACE_ROUNDS builds, more until the flusher made RACE_FLUSHES (a loaded machine: it
	 * may get little time), for 10 s at most */
	for (int r = 0;; r++) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (r >= RACE_ROUNDS &&
		    (__atomic_load_n(&race.flushes, __ATOMIC_RELAXED) >= RACE_FLUSHES ||
		     now.tv_sec - t0.tv_sec >= 10))
			break;
		bool list = false;
		for (int i = 0; i < RACE_N; i++) {
			p[i] = A(malloc)(64);
			if (!p[i])
				abort();
			p[i][0] = (uint64_t)r << 32 | (uint64_t)i;
			p[i][1] = ~p[i][0];
			list |= la_tcache.lists_out >> cls & 1;
		}
		memcpy(sorted, p, sizeof(p));
		qsort(sorted, RACE_N, sizeof(void *), cmp_ptr);
		for (int i = 1; i < RACE_N; i++)
			race.dups += sorted[i] == sorted[i - 1];
		for (int i = 0; i < RACE_N; i++)
			race.stamps +=
			        p[i][0] != ((uint64_t)r << 32 | (uint64_t)i) || p[i][1] != ~p[i][0];
		for (int i = 0; i < RACE_N / 8; i++)
			if (kept[i]) {
				race.stamps += kept[i][1] != ~kept[i][0];
				A(free)(kept[i]);
			}
		for (int i = 0; i < RACE_N; i++) {
			if (i % 8 == 0)
				kept[i / 8] = p[i];
			else
				A(free)(p[i]);
		}
		race.list_rounds += list;
		race.rounds++;
	}
	for (int i = 0; i < RACE_N / 8; i++)
		A(free)(kept[i]);
	__atomic_store_n(&race.done, 1, __ATOMIC_RELEASE);
	return NULL;
}

Test(spans, a_list_mode_malloc_racing_flushes_and_decay_passes_hands_no_block_out_twice,
     .timeout = 120)
{
	char reason[128];
	cr_assert_eq(liballoc_set("decay_ms", 1, reason, sizeof(reason)), 0, "%s", reason);
	/* an arena of its own (list mode is for an arena with one thread) */
	cr_assert_eq(liballoc_set("arena_max", 8, reason, sizeof(reason)), 0, "%s", reason);
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, race_worker, NULL), 0);
	while (!__atomic_load_n(&race.done, __ATOMIC_ACQUIRE)) {
		liballoc_flush_caches();
		__atomic_fetch_add(&race.flushes, 1, __ATOMIC_RELAXED);
		sched_yield();
	}
	pthread_join(t, NULL);
	cr_assert_eq(race.dups, 0, "%d blocks handed out twice", race.dups);
	cr_assert_eq(race.stamps, 0, "%d live blocks changed", race.stamps);
	cr_assert_gt(race.list_rounds, race.rounds / 2, "list mode in %d of %d builds",
	             race.list_rounds, race.rounds);
	cr_log_info("%d builds, %d in list mode, %ld flushes", race.rounds, race.list_rounds,
	            race.flushes);
}
