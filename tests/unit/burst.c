/* burst.c — anticipatory pre-population for a periodic burst (liballoc/src/burst.h): the
 * pattern predicts only from bursts at agreeing intervals and of agreeing sizes (times are
 * the tests' own: the functions take them as arguments); an arena driven through its
 * watch prepares the predicted burst's pages, counted as free resident and
 * burst_prepared_bytes, which the burst then takes without faulting; a burst that does
 * not come costs its pages back at the window's end, a miss, and no more predictions until
 * the pattern is learnt again. The arena tests run on the real clock (the control thread
 * ticks too, under the same lock) and wait for conditions. Linked with liballoc.a; every
 * test runs in its own process. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "api/api.h"
#include "arena.h"
#include "burst.h"
#include "heap.h"
#include "liballoc.h"
#include "os.h"
#include "shm.h"
#include "tunables.h"

#if defined(__SANITIZE_ADDRESS__)
#define LA_TEST_ASAN 1
#else
#define LA_TEST_ASAN 0
#endif

#define MS 1000000ull
#define S  1000000000ull

static void set(const char *name, int64_t v)
{
	char reason[160];
	cr_assert_eq(liballoc_set(name, v, reason, sizeof(reason)), 0, "%s: %s", name, reason);
}

static struct burst_pattern learnt(const uint64_t *start, const uint32_t *pages, int n)
{
	struct burst_pattern p;
	memset(&p, 0, sizeof(p));
	for (int i = 0; i < n; i++)
		burst_learn(&p, start[i], pages[i]);
	return p;
}

Test(pattern, four_bursts_a_period_apart_predict_the_fifth)
{
	uint64_t t[] = {100 * S, 131 * S, 160 * S - 100 * MS, 190 * S};
	uint32_t pg[] = {262144, 261000, 262500, 262000};
	struct burst_pattern p = learnt(t, pg, 3);
	struct burst_guess g;
	cr_assert_not(burst_predict(&p, &g), "two intervals 7 %% apart: no pattern yet");
	burst_learn(&p, t[3], pg[3]);
	cr_assert(burst_predict(&p, &g));
	uint64_t period = (t[3] - t[0]) / 3;
	cr_assert_eq(g.period_ns, period);
	cr_assert_eq(g.next_ns, t[3] + period);
	cr_assert_eq(g.pages, 261000, "the smallest of the bursts: %u", g.pages);
	/* intervals 31, 28.9 and 30.1 s: 1.1 s the farthest from the period */
	cr_assert_eq(g.jitter_ns, 1100 * MS, "jitter %llu", (unsigned long long)g.jitter_ns);
	/* the lead covers the populate at the rate given, and grows with it */
	uint64_t fast = burst_lead_ns(&g, 500), slow = burst_lead_ns(&g, 5000);
	cr_assert_geq(fast, (uint64_t)g.pages * 500);
	cr_assert_geq(slow, (uint64_t)g.pages * 5000);
	cr_assert_geq(burst_lead_ns(&g, 0), (uint64_t)g.pages * BURST_COST_NS,
	              "unmeasured: the assumed rate");
	/* and the window after the start is a small part of the period */
	cr_assert_lt(burst_window_ns(&g), period / 8);
}

Test(pattern, three_bursts_of_a_timer_predict_the_fourth)
{
	/* intervals within 1/64 of their mean (a timer's): three bursts are enough */
	uint64_t t[] = {5 * S, 35 * S + 100 * MS, 65 * S};
	uint32_t pg[] = {262144, 262144, 262144};
	struct burst_pattern p = learnt(t, pg, 3);
	struct burst_guess g;
	cr_assert(burst_predict(&p, &g));
	cr_assert_eq(g.period_ns, 30 * S);
	cr_assert_eq(g.next_ns, 95 * S);
	cr_assert_eq(g.jitter_ns, 100 * MS);
	/* 1/50 apart: three are not enough */
	uint64_t t2[] = {5 * S, 35 * S + 600 * MS, 65 * S};
	p = learnt(t2, pg, 3);
	cr_assert_not(burst_predict(&p, &g));
}

Test(pattern, the_last_bursts_decide_and_a_new_period_is_learnt_again)
{
	/* every 10 s, then every 2 s: the last bursts give the new period */
	uint64_t t[] = {0, 10 * S, 20 * S, 22 * S, 24 * S};
	uint32_t pg[] = {8192, 8192, 8192, 8192, 8192};
	struct burst_pattern p = learnt(t, pg, 4);
	struct burst_guess g;
	cr_assert_not(burst_predict(&p, &g), "10 s then 2 s: no period");
	burst_learn(&p, t[4], pg[4]);
	cr_assert(burst_predict(&p, &g));
	cr_assert_eq(g.period_ns, 2 * S);
	cr_assert_eq(g.next_ns, 26 * S);
}

Test(pattern, irregular_bursts_predict_nothing)
{
	struct burst_guess g;
	/* intervals 20, 30 and 25 s: 20 % from their mean */
	uint64_t t1[] = {0, 20 * S, 50 * S, 75 * S};
	uint32_t pg[] = {65536, 65536, 65536, 65536};
	struct burst_pattern p = learnt(t1, pg, 4);
	cr_assert_not(burst_predict(&p, &g));
	/* agreeing intervals, sizes 64 MiB and 256 MiB */
	uint64_t t2[] = {0, 30 * S, 60 * S, 90 * S};
	uint32_t mixed[] = {65536, 16384, 65536, 65536};
	p = learnt(t2, mixed, 4);
	cr_assert_not(burst_predict(&p, &g));
	/* agreeing, but faster than BURST_MIN_PERIOD: a steady load */
	uint64_t t3[] = {0, 100 * MS, 200 * MS, 300 * MS};
	p = learnt(t3, pg, 4);
	cr_assert_not(burst_predict(&p, &g));
	/* agreeing, but smaller than BURST_MIN_PAGES */
	uint32_t small[] = {1024, 1024, 1024, 1024};
	p = learnt(t2, small, 4);
	cr_assert_not(burst_predict(&p, &g));
	/* random intervals: heavy-tailed (1 / (u + 0.05) s: 0.95..20 s, mostly short) and
	 * uniform in 1..30 s. Three in a row within 1/8 of their mean, or two within 1/64,
	 * come by chance only: about 5 % of such bursts (each then a miss that forgets) */
	uint64_t rng = 0x9e3779b97f4a7c15ull, at = 0;
	int predicted[2] = {0, 0};
	for (int kind = 0; kind < 2; kind++) {
		burst_forget(&p);
		for (int i = 0; i < 400; i++) {
			rng ^= rng << 13;
			rng ^= rng >> 7;
			rng ^= rng << 17;
			double u = (double)(rng >> 11) / 9007199254740992.0;
			double secs = kind == 0 ? 1.0 / (u + 0.05) : 1.0 + 29.0 * u;
			at += (uint64_t)(secs * 1e9);
			burst_learn(&p, at, 65536);
			predicted[kind] += burst_predict(&p, &g);
		}
	}
	cr_assert_lt(predicted[0], 30, "%d predictions of 400 heavy-tailed intervals",
	             predicted[0]);
	cr_assert_lt(predicted[1], 30, "%d predictions of 400 uniform intervals", predicted[1]);
}

/* ---- the watch ----------------------------------------------------------------------- */

/* A burst's end wakes the control thread only when it has something to do: here, when the
 * pattern now predicts the next burst (it prepares for it). Bursts of 20 MiB microseconds
 * apart (a steady load's swings: large_random's heap) predict nothing and wake nobody;
 * each wake was a futex call on the program's thread and a run of the control thread. */
Test(watch, a_burst_wakes_the_control_thread_only_when_a_next_one_is_predicted)
{
	struct burst_watch w;
	memset(&w, 0, sizeof(w));
	uint32_t before = __atomic_load_n(&shm_kicks, __ATOMIC_ACQUIRE);
	for (int i = 0; i < 8; i++) {
		burst_grew(&w, 5120, 0);
		cr_assert(w.active, "a burst began");
		burst_shrank(&w, 5120);
		cr_assert_not(w.active, "it ended");
	}
	cr_assert_eq(w.pat.n, BURST_HIST, "the bursts were learnt");
	uint32_t after = __atomic_load_n(&shm_kicks, __ATOMIC_ACQUIRE);
	cr_assert_eq(after, before, "%u wake-ups for 8 bursts that predict nothing",
	             after - before);
	/* three bursts a second apart before this one: the next is predicted */
	uint64_t now = os_now_ns();
	burst_forget(&w.pat);
	for (uint64_t i = 3; i >= 1; i--)
		burst_learn(&w.pat, now - i * S, 5120);
	burst_grew(&w, 5120, 0);
	burst_shrank(&w, 5120);
	after = __atomic_load_n(&shm_kicks, __ATOMIC_ACQUIRE);
	cr_assert_eq(after, before + 1, "woken once to prepare the next: %u wake-ups",
	             after - before);
}

/* ---- an arena ------------------------------------------------------------------------ */

static struct la_counters counters(void)
{
	struct la_counters c;
	liballoc_stats(&c);
	return c;
}

static long minflt(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_minflt;
}

static uint64_t rss_bytes(void)
{
	char buf[4096];
	FILE *f = fopen("/proc/self/status", "r");
	cr_assert_not_null(f);
	uint64_t kb = 0;
	while (fgets(buf, sizeof(buf), f))
		if (!strncmp(buf, "RssAnon:", 8))
			kb = strtoull(buf + 8, NULL, 10);
	fclose(f);
	return kb << 10;
}

/* The calling thread's arena (a 64 KiB block's, freed again). */
static struct arena *this_arena(void)
{
	void *probe = A(malloc)(64 << 10);
	cr_assert_not_null(probe);
	struct arena *a = heap_of(probe)->arena;
	A(free)(probe);
	return a;
}

/* The calling thread's arena, with a pattern of four bursts of `pages`, at intervals of
 * period + jitter, period - 2 jitter and period + jitter, the next one due in `due_ns`. */
static struct arena *arena_with_pattern(uint32_t pages, uint64_t period, uint64_t jitter,
                                        uint64_t due_ns)
{
	struct arena *a = this_arena();
	/* no resident free pages: the burst would take those first, and only the rest is
	 * prepared */
	arena_trim(a, 0);
	uint64_t last = os_now_ns() + due_ns - period;
	arena_lock(a);
	burst_forget(&a->burst.pat);
	burst_learn(&a->burst.pat, last - 3 * period, pages);
	burst_learn(&a->burst.pat, last - 2 * period + jitter, pages);
	burst_learn(&a->burst.pat, last - period - jitter, pages);
	burst_learn(&a->burst.pat, last, pages);
	arena_unlock(a);
	return a;
}

static bool prepared_all(struct arena *a, uint32_t pages)
{
	arena_burst_tick(a, os_now_ns());
	arena_lock(a);
	bool done = a->burst.holding && a->burst.done >= pages;
	arena_unlock(a);
	return done;
}

/* The arena's watch, for a failure's message. */
static const char *watch_text(struct arena *a)
{
	static char buf[320];
	uint64_t now = os_now_ns(), misses = counters().burst_misses;
	arena_lock(a);
	const struct burst_watch *w = &a->burst;
	snprintf(buf, sizeof(buf),
	         "holding %u active %u want %u done %u prepared %u pattern %u, predicted %+lld "
	         "ms and deadline %+lld ms from now, cost %u ns/page, misses %llu",
	         w->holding, w->active, w->want, w->done, w->prepared, (unsigned)w->pat.n,
	         w->predicted_ns ? (long long)(w->predicted_ns - now) / 1000000 : 0,
	         w->deadline_ns ? (long long)(w->deadline_ns - now) / 1000000 : 0, w->cost_ns,
	         (unsigned long long)misses);
	arena_unlock(a);
	return buf;
}

/* Tick the arena (the control thread may tick it too) until cond holds; 20 s at most. A
 * tick that wants the next at once (a preparation under way: one chunk per tick) is
 * followed by the next without a sleep: on a loaded machine each sleep lasts a scheduler
 * turn, and 32 of them made a preparation outlast its window. */
#define TICK_UNTIL(a, cond)                                                        \
	do {                                                                       \
		uint64_t until_ = os_now_ns() + 20 * S;                            \
		while (!(cond) && os_now_ns() < until_) {                          \
			uint64_t due_ = arena_burst_tick((a), os_now_ns());        \
			if (!due_ || due_ > os_now_ns())                           \
				usleep(2000);                                      \
		}                                                                  \
		cr_assert(cond, "not within 20 s: %s (%s)", #cond, watch_text(a)); \
	} while (0)

/* A pattern whose next burst is due in 1 s, two minutes apart give or take 4 s: its pages
 * are prepared at once and wait for it until ~12 s after (2 jitters, a 32nd of the
 * period), so that a loaded machine's slow preparation does not end in a miss. */
static struct arena *arena_with_slow_pattern(uint32_t pages)
{
	return arena_with_pattern(pages, 120 * S, 4 * S, 1 * S);
}

enum { PAGES = 8192 }; /* 32 MiB */

/* The predicted burst comes: its pages were populated before it and it takes them
 * without a fault; the burst counts as a hit. */
Test(arena, a_predicted_burst_takes_prepared_pages_without_faulting, .timeout = 60)
{
	set("mmap_threshold", 1 << 20);
	heap_huge_policy = -1;
	/* bursts two minutes apart (arena_with_slow_pattern): the pages are prepared at once
	 * and wait for the burst until ~12 s after it is due (a busy machine's stalls do not
	 * turn the test's burst into a miss) */
	struct arena *a = arena_with_slow_pattern(PAGES);
	TICK_UNTIL(a, prepared_all(a, PAGES));
	struct la_counters c = counters();
	cr_assert_eq(c.burst_prepared_bytes, (uint64_t)PAGES << LA_PAGE_SHIFT);
	cr_assert_geq(c.free_resident_bytes, (uint64_t)PAGES << LA_PAGE_SHIFT,
	              "prepared pages are free resident memory");
	/* the burst: 32 MiB in 32 KiB blocks, written */
	enum { N = PAGES / 8 };
	static void *b[N];
	long f0 = minflt();
	for (int i = 0; i < N; i++) {
		b[i] = A(malloc)(32 << 10);
		cr_assert_not_null(b[i]);
		memset(b[i], 1, 32 << 10);
	}
	long faults = minflt() - f0;
	c = counters();
	cr_assert_eq(c.burst_hits, 1);
	/* (under AddressSanitizer its shadow of the blocks, an eighth of their bytes, faults
	 * in pages of its own) */
	long limit = PAGES / 16 + (LA_TEST_ASAN ? PAGES / 8 : 0);
	cr_assert_lt(faults, limit, "%ld faults for a prepared burst of %d pages", faults, PAGES);
	cr_assert_lt(c.burst_prepared_bytes, (uint64_t)PAGES << LA_PAGE_SHIFT >> 4,
	             "the burst took the prepared pages: %llu left",
	             (unsigned long long)c.burst_prepared_bytes);
	for (int i = 0; i < N; i++)
		A(free)(b[i]);
	/* the burst ended: it is learnt, the next one predicted */
	arena_lock(a);
	struct burst_guess g;
	cr_assert_eq(a->burst.pat.n, BURST_HIST);
	cr_assert(burst_predict(&a->burst.pat, &g));
	cr_assert_eq(a->burst.predicted_ns, 0);
	arena_unlock(a);
}

/* The predicted burst does not come: at the window's end its pages go back (RSS drops
 * by them), it counts as a miss, and no prediction follows until three more bursts. */
Test(arena, a_burst_that_does_not_come_is_given_back_and_forgotten, .timeout = 60)
{
	set("mmap_threshold", 1 << 20);
	struct arena *a = arena_with_slow_pattern(PAGES);
	uint64_t rss0 = rss_bytes();
	TICK_UNTIL(a, prepared_all(a, PAGES));
	cr_assert_eq(counters().burst_prepared_bytes, (uint64_t)PAGES << LA_PAGE_SHIFT);
	uint64_t rss1 = rss_bytes();
	cr_assert_geq(rss1, rss0 + ((uint64_t)PAGES << LA_PAGE_SHIFT) * 9 / 10,
	              "RSS %llu -> %llu: the pages were not populated", (unsigned long long)rss0,
	              (unsigned long long)rss1);
	/* the window ends with no burst: a tick at its deadline (the control thread's clock
	 * gets there ~12 s later; the test does not wait for it) */
	arena_lock(a);
	uint64_t deadline = a->burst.deadline_ns;
	arena_unlock(a);
	cr_assert_gt(deadline, 0);
	arena_burst_tick(a, deadline);
	struct la_counters c = counters();
	cr_assert_eq(c.burst_misses, 1);
	cr_assert_eq(c.burst_hits, 0);
	cr_assert_eq(c.burst_prepared_bytes, 0, "%llu bytes still counted as prepared",
	             (unsigned long long)c.burst_prepared_bytes);
	uint64_t rss2 = rss_bytes();
	cr_assert_leq(rss2, rss0 + ((uint64_t)PAGES << LA_PAGE_SHIFT) / 10,
	              "RSS %llu after the miss (%llu before the preparation)",
	              (unsigned long long)rss2, (unsigned long long)rss0);
	arena_lock(a);
	struct burst_guess g;
	cr_assert_not(burst_predict(&a->burst.pat, &g), "a miss forgets the pattern");
	cr_assert_eq(a->burst.holding, 0);
	arena_unlock(a);
	/* ticking on prepares nothing more */
	uint64_t populated = c.madvise_calls;
	for (int i = 0; i < 10; i++)
		cr_assert_eq(arena_burst_tick(a, os_now_ns()), 0);
	cr_assert_eq(counters().madvise_calls, populated);
}

/* Switched off (burst_predict 0): nothing is prepared, and pages prepared go back. */
Test(arena, switched_off_it_prepares_nothing_and_gives_back, .timeout = 60)
{
	set("mmap_threshold", 1 << 20);
	struct arena *a = arena_with_slow_pattern(PAGES);
	TICK_UNTIL(a, prepared_all(a, PAGES));
	set("burst_predict", 0);
	arena_burst_tick(a, os_now_ns());
	struct la_counters c = counters();
	cr_assert_eq(c.burst_prepared_bytes, 0);
	cr_assert_eq(c.burst_misses, 0, "switching off is no miss");
	a = arena_with_slow_pattern(PAGES);
	for (int i = 0; i < 10; i++)
		cr_assert_eq(arena_burst_tick(a, os_now_ns()), 0);
	arena_lock(a);
	cr_assert_eq(a->burst.holding, 0);
	cr_assert_eq(a->burst.done, 0);
	arena_unlock(a);
}

/* A policy holding a tunable (allocctld's pressure ladder lowers decay_ms for a while):
 * the predicted burst is not prepared for. */
Test(arena, under_a_pressure_policy_nothing_is_prepared, .timeout = 60)
{
	set("mmap_threshold", 1 << 20);
	char reason[160];
	int id = tun_find("decay_ms");
	cr_assert_geq(id, 0);
	cr_assert_eq(tun_set_held(id, 1000, LA_SRC_policy, 60 * S, reason, sizeof(reason)),
	             LA_ST_OK, "%s", reason);
	struct arena *a = arena_with_slow_pattern(PAGES);
	/* past the predicted start: the preparation would have begun 8 s before */
	for (uint64_t until = os_now_ns() + 1200 * MS; os_now_ns() < until;) {
		arena_burst_tick(a, os_now_ns());
		usleep(5000);
	}
	arena_lock(a);
	cr_assert_eq(a->burst.done, 0);
	cr_assert_eq(a->burst.holding, 0);
	arena_unlock(a);
	cr_assert_eq(counters().burst_prepared_bytes, 0);
}

/* A trim (an operator's, a pressure policy's) returns prepared pages like any free page:
 * they no longer count as prepared, and the same prediction does not populate them again. */
Test(arena, a_trim_takes_the_prepared_pages_and_they_do_not_come_again, .timeout = 60)
{
	set("mmap_threshold", 1 << 20);
	struct arena *a = arena_with_slow_pattern(PAGES);
	TICK_UNTIL(a, prepared_all(a, PAGES));
	uint64_t rss1 = rss_bytes();
	arena_trim(a, 0);
	struct la_counters c = counters();
	cr_assert_eq(c.burst_prepared_bytes, 0);
	cr_assert_leq(rss_bytes(), rss1 - ((uint64_t)PAGES << LA_PAGE_SHIFT) * 9 / 10,
	              "the trim returned the prepared pages");
	for (int i = 0; i < 20; i++) {
		arena_burst_tick(a, os_now_ns());
		usleep(1000);
	}
	cr_assert_eq(counters().madvise_calls, c.madvise_calls, "populated again after a trim");
	cr_assert_eq(counters().burst_prepared_bytes, 0);
}

/* A predicted burst came (a hit): its frees make no madvise or munmap on the freeing
 * thread (the nearly-empty purge and the idle heap release wait), and once the arena is
 * back near its level before the burst the control thread makes them: the freed pages
 * go back without a decay pass (decay_ms is 10 minutes here). */
Test(arena, a_hit_bursts_frees_leave_the_give_back_to_the_control_thread, .timeout = 60)
{
	enum { BIG = 3 * 8192, N = BIG / 8, KEEP = 2 * BURST_START_PAGES / 8 };
	set("mmap_threshold", 1 << 20);
	set("trim_threshold", 1 << 20);
	set("decay_ms", 600000);
	heap_huge_policy = -1;
	struct arena *a = arena_with_slow_pattern(BIG);
	TICK_UNTIL(a, prepared_all(a, BIG));
	static void *b[N];
	for (int i = 0; i < N; i++) {
		b[i] = A(malloc)(32 << 10);
		cr_assert_not_null(b[i]);
		memset(b[i], 1, 32 << 10);
	}
	cr_assert_eq(counters().burst_hits, 1);
	/* all but KEEP blocks (8 MiB: the arena stays above its old level + 4 MiB) */
	struct la_counters c0 = counters();
	for (int i = KEEP; i < N; i++)
		A(free)(b[i]);
	struct la_counters c1 = counters();
	cr_assert_eq(c1.madvise_calls, c0.madvise_calls, "%llu madvise in the burst's frees",
	             (unsigned long long)(c1.madvise_calls - c0.madvise_calls));
	cr_assert_eq(c1.munmap_calls, c0.munmap_calls, "%llu munmap in the burst's frees",
	             (unsigned long long)(c1.munmap_calls - c0.munmap_calls));
	cr_assert_gt(c1.madvise_deferred, c0.madvise_deferred);
	cr_assert_geq(c1.free_resident_bytes, (uint64_t)(N - KEEP) * (32 << 10) * 9 / 10,
	              "the freed burst is still resident");
	arena_lock(a);
	cr_assert_eq(a->burst.defer, 1);
	arena_unlock(a);
	/* the rest: the arena is back at its level, the control thread gives back */
	for (int i = 0; i < KEEP; i++)
		A(free)(b[i]);
	TICK_UNTIL(a, counters().free_resident_bytes < ((uint64_t)BIG << LA_PAGE_SHIFT) / 8);
	struct la_counters c2 = counters();
	cr_assert_gt(c2.madvise_calls + c2.munmap_calls, c1.madvise_calls + c1.munmap_calls);
	cr_assert_eq(c2.burst_misses, 0);
	arena_lock(a);
	cr_assert_eq(a->burst.defer, 0);
	cr_assert_eq(a->burst.stamp, 0, "what the burst did not take went back too");
	arena_unlock(a);
}

/* A look at a deferring burst's frees (defer_look_ns) taken before a new burst began, or
 * before the arena rose above the level the deferral ends at, is no deadline: the tick's
 * due stays in the future. It was that look's time plus BURST_SETTLE_NS, in the past, and
 * the control thread, which waits until the due, went round its loop without a wait until
 * the burst ended or the level fell (under callgrind, `trickle 10 40 60 5 6`: 398k turns
 * of its loop, 124M instructions, where the program's own thread made 612M). */
Test(arena, a_deferral_looked_at_before_is_not_due_again_at_once)
{
	struct arena *a = this_arena();
	struct burst_watch *w = &a->burst;
	uint64_t now = os_now_ns();
	arena_lock(a);
	struct burst_watch saved = *w;
	burst_forget(&w->pat);
	w->predicted_ns = 0;
	w->holding = 0;
	w->stamp = 0;
	/* a hit burst's deferral, looked at 100 ms ago, ends within 10 s at the latest */
	w->defer = 1;
	w->defer_ns = now + 10 * S;
	w->defer_look_ns = now - 100 * MS;
	w->defer_seen = w->used;
	w->defer_pages = w->used;
	/* a new burst (not predicted: the deferral stays the last one's) under way */
	w->active = 1;
	w->start_ns = now;
	arena_unlock(a);
	uint64_t due = arena_burst_tick(a, now);
	cr_assert_gt(due, now, "due %lld ms from now while a burst is under way",
	             (long long)(due - now) / (long long)MS);
	/* it is over, and the arena is above the level the deferral ends at */
	arena_lock(a);
	w->active = 0;
	w->used = saved.used + 2 * BURST_SETTLE_PAGES;
	w->defer_pages = saved.used + BURST_SETTLE_PAGES;
	arena_unlock(a);
	due = arena_burst_tick(a, now);
	arena_lock(a);
	bool deferring = w->defer;
	*w = saved;
	arena_unlock(a);
	cr_assert(deferring, "the deferral ended above its level");
	cr_assert_gt(due, now, "due %lld ms from now above the deferral's level",
	             (long long)(due - now) / (long long)MS);
	cr_assert_leq(due, now + 10 * S, "the deferral's time bound is its due");
}

/* The control thread does not wait for an arena the program holds (arena_burst_look): it
 * looks at it again BURST_BUSY_NS later only where a look is wanted by then (the arena's
 * last look wanted one, or a thread kicked: until a look gets in). The look after every decay pass at an arena
 * whose watch wanted none waits for the next pass: it woke the thread again 1 ms later
 * each time it found the program there (decay::aging_pages_wake_... in mechanisms.c read
 * a sixth wake-up where five are due, about 2 runs in 60 under load). */
Test(arena, a_busy_arena_is_looked_at_again_only_when_a_look_is_wanted)
{
	struct arena *a = this_arena();
	struct burst_watch *w = &a->burst;
	uint64_t now = os_now_ns();
	cr_assert_eq(arena_burst_tick(a, now), 0, "an idle watch wants no look");
	arena_lock(a); /* the program holds the arena: the look passes it by */
	uint64_t routine = arena_burst_look(a, now, false);
	uint64_t kicked = arena_burst_look(a, now, true);
	/* and the kick's look stays wanted until it gets in */
	uint64_t again = arena_burst_look(a, now + BURST_BUSY_NS, false);
	struct burst_watch saved = *w;
	w->active = 1; /* a burst under way: the look at its time bound is wanted */
	w->start_ns = now;
	arena_unlock(a);
	uint64_t due = arena_burst_tick(a, now);
	arena_lock(a);
	uint64_t before = arena_burst_look(a, now, false);
	uint64_t at = arena_burst_look(a, due, false);
	*w = saved;
	arena_unlock(a);
	arena_burst_tick(a, now);
	cr_assert_eq(routine, 0, "an idle watch's busy arena was looked at again %lld ns later",
	             (long long)(routine - now));
	cr_assert_eq(kicked, now + BURST_BUSY_NS, "a kick's look comes back to a busy arena");
	cr_assert_eq(again, now + 2 * BURST_BUSY_NS, "and again while the arena stays busy");
	cr_assert_gt(due, now + BURST_BUSY_NS, "a burst's time bound is in the future");
	cr_assert_eq(before, due, "a busy arena keeps the time its last look wanted");
	cr_assert_eq(at, due + BURST_BUSY_NS, "a busy arena whose look is due is looked at again");
}
