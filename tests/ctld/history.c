/* history.c — unit tests of ctld/history.c with a clock the test controls: samples land on
 * their ticks with gaps where ticks were missed, the fine ring keeps 15 minutes and the
 * coarse ring the means of a day, 1,000 processes sampled for the whole retention stay
 * within the documented bound (accounted and as measured by malloc), the total bound drops
 * exited histories first and then stops rings from growing, one uid's many processes leave
 * another uid its share of the bound, and the event ring. */
#include <criterion/criterion.h>
#include <malloc.h>
#include <string.h>

#include "history.h"
#include "timeline.h"

#define T0 1699999980000LL /* ms: a whole minute, so coarse periods start on it */

struct collected {
	int n, gaps;
	int64_t t[4096];
	uint32_t in_use[4096];
};

static void collect(void *arg, int64_t t_ms, const uint32_t *kib)
{
	struct collected *c = arg;
	if (c->n < 4096) {
		c->t[c->n] = t_ms;
		c->in_use[c->n] = kib ? kib[HIST_F_in_use] : HIST_GAP;
	}
	c->n++;
	if (!kib)
		c->gaps++;
}

static void sample(struct history *h, struct hist_proc *p, uint64_t in_use_bytes, int64_t t)
{
	uint64_t v[HIST_NFIG] = {0};
	v[HIST_F_in_use] = in_use_bytes;
	v[HIST_F_rss] = in_use_bytes * 2;
	history_sample(h, p, v, t);
}

Test(history, samples_land_on_their_ticks_and_missed_ticks_are_gaps)
{
	struct history h;
	cr_assert_eq(history_init(&h, 1000, 64 << 20, 16), 0);
	struct hist_proc *p = history_open(&h, 42, 7, 0, "svc", T0);
	cr_assert_not_null(p);
	sample(&h, p, 10 << 10, T0 + 10);
	sample(&h, p, 99 << 10, T0 + 900); /* same tick: ignored */
	sample(&h, p, 20 << 10, T0 + 1001);
	sample(&h, p, 50 << 10, T0 + 4500); /* ticks 2 and 3 missed */
	struct collected c = {0};
	history_walk(&h, p, false, 0, collect, &c);
	cr_assert_eq(c.n, 5);
	cr_assert_eq(c.gaps, 2);
	int64_t want_t[] = {T0, T0 + 1000, T0 + 2000, T0 + 3000, T0 + 4000};
	uint32_t want_v[] = {10, 20, HIST_GAP, HIST_GAP, 50};
	for (int i = 0; i < 5; i++) {
		cr_assert_eq(c.t[i], want_t[i], "sample %d at %lld", i, (long long)c.t[i]);
		cr_assert_eq(c.in_use[i], want_v[i], "sample %d is %u KiB", i, c.in_use[i]);
	}
	/* since: from the first tick at or after it */
	memset(&c, 0, sizeof(c));
	history_walk(&h, p, false, T0 + 1500, collect, &c);
	cr_assert_eq(c.n, 3);
	cr_assert_eq(c.t[0], T0 + 2000);
	memset(&c, 0, sizeof(c));
	history_walk(&h, p, false, T0 + 4001, collect, &c);
	cr_assert_eq(c.n, 0);
	cr_assert_eq(history_first_ms(&h, p, false), T0);
	cr_assert_eq(h.st.samples, 3);
	cr_assert_eq(h.st.gaps, 2);
	history_free(&h);
}

Test(history, fine_ring_keeps_fifteen_minutes_and_coarse_keeps_the_means)
{
	struct history h;
	cr_assert_eq(history_init(&h, 1000, 64 << 20, 16), 0);
	struct hist_proc *p = history_open(&h, 42, 7, 0, "svc", T0);
	/* 20 minutes; in use = the minute number in MiB */
	for (int s = 0; s < 20 * 60; s++)
		sample(&h, p, (uint64_t)(s / 60) << 20, T0 + s * 1000LL);
	struct collected c = {0};
	history_walk(&h, p, false, 0, collect, &c);
	cr_assert_eq(c.n, (int)HIST_FINE_SLOTS);
	cr_assert_eq(c.t[0], T0 + (20 * 60 - 900) * 1000LL, "oldest fine sample 15 min back");
	cr_assert_eq(c.t[c.n - 1], T0 + (20 * 60 - 1) * 1000LL);
	cr_assert_eq(p->fine.alloc, HIST_FINE_SLOTS, "the ring stopped growing at its cap");
	memset(&c, 0, sizeof(c));
	history_walk(&h, p, true, 0, collect, &c);
	cr_assert_eq(c.n, 19, "minutes 0..18 closed, the 20th in progress");
	for (int m = 0; m < 19; m++) {
		cr_assert_eq(c.t[m], T0 + m * 60000LL);
		cr_assert_eq(c.in_use[m], (uint32_t)m << 10, "minute %d: mean %u KiB", m,
		             c.in_use[m]);
	}
	/* an exit closes the minute in progress and shrinks the rings to what they hold */
	size_t before = h.bytes;
	history_close(&h, p, T0 + 20 * 60000LL, "exited");
	memset(&c, 0, sizeof(c));
	history_walk(&h, p, true, 0, collect, &c);
	cr_assert_eq(c.n, 20);
	cr_assert_eq(c.in_use[19], 19u << 10);
	cr_assert_eq(p->coarse.alloc, 20u);
	cr_assert_lt(h.bytes, before);
	cr_assert_eq(h.nlive, 0u);
	sample(&h, p, 1, T0 + 21 * 60000LL);
	cr_assert_eq(p->fine.len, HIST_FINE_SLOTS, "no samples after the exit");
	history_free(&h);
}

Test(history, a_reused_pid_is_another_history_and_find_prefers_the_live_one)
{
	struct history h;
	cr_assert_eq(history_init(&h, 1000, 64 << 20, 16), 0);
	struct hist_proc *a = history_open(&h, 42, 7, 0, "old", T0);
	cr_assert_eq(history_open(&h, 42, 7, 0, "old", T0), a, "same process: same history");
	history_close(&h, a, T0 + 5000, "exited");
	struct hist_proc *b = history_open(&h, 42, 9, 0, "new", T0 + 6000);
	cr_assert_neq(a, b);
	cr_assert_eq(history_find(&h, 42), b);
	history_close(&h, b, T0 + 7000, "exited");
	cr_assert_eq(history_find(&h, 42), b, "the most recently exited");
	cr_assert_null(history_find(&h, 43));
	history_free(&h);
}

/* The documented bound: 1,000 processes, each sampled every tick for the whole retention
 * (24 h of coarse samples and the 15 min fine window), stay within 1,000 x
 * HIST_PROC_MAX_BYTES, as accounted and as malloc sees it. */
Test(history, a_thousand_processes_for_the_whole_retention_stay_within_the_bound, .timeout = 120)
{
	enum { N = 1000 };
	struct mallinfo2 m0 = mallinfo2();
	struct history h;
	size_t bound = N * HIST_PROC_MAX_BYTES;
	cr_assert_eq(history_init(&h, 1000, bound, 16), 0);
	static struct hist_proc *p[N];
	for (int i = 0; i < N; i++)
		cr_assert_not_null(p[i] = history_open(&h, 1000 + i, (uint64_t)i, 0, "svc", T0));
	int64_t ticks = (int64_t)HIST_COARSE_SLOTS * HIST_COARSE_TICKS + HIST_FINE_SLOTS;
	uint64_t v[HIST_NFIG] = {1 << 20, 2 << 20, 3 << 20, 4 << 20, 5 << 20, 15 << 20};
	size_t peak = 0;
	for (int64_t t = 0; t < ticks; t++) {
		for (int i = 0; i < N; i++)
			history_sample(&h, p[i], v, T0 + t * 1000);
		if (h.bytes > peak)
			peak = h.bytes;
	}
	struct mallinfo2 m1 = mallinfo2();
	cr_log_info("%d processes x %lld ticks: %zu bytes accounted (%.1f KiB per process), "
	            "malloc in use grew by %zu bytes; documented bound %zu per process",
	            N, (long long)ticks, h.bytes, h.bytes / 1024.0 / N, m1.uordblks - m0.uordblks,
	            HIST_PROC_MAX_BYTES);
	cr_assert_leq(peak, bound);
	cr_assert_eq(h.bytes, bound, "every ring full: exactly the bound");
	cr_assert_leq(m1.uordblks - m0.uordblks,
	              bound + N * 64 + h.ev_cap * sizeof(struct hist_event),
	              "malloc's view (with its per-block headers) matches the accounting");
	cr_assert_eq(h.st.truncated, 0);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(p[i]->fine.len, HIST_FINE_SLOTS);
		cr_assert_eq(p[i]->coarse.len, HIST_COARSE_SLOTS);
	}
	struct collected c = {0};
	history_walk(&h, p[N - 1], true, 0, collect, &c);
	cr_assert_eq(c.n, (int)HIST_COARSE_SLOTS);
	cr_assert_eq(c.gaps, 0);
	cr_assert_eq(c.in_use[0], 1024u);
	cr_assert_eq(c.t[c.n - 1] - c.t[0], (int64_t)(HIST_COARSE_SLOTS - 1) * 60000,
	             "24 h of coarse samples");
	history_free(&h);
	cr_assert_eq(h.bytes, 0u);
}

Test(history, the_total_bound_drops_exited_histories_first_then_stops_rings_growing)
{
	struct history h;
	size_t max = 3 * HIST_PROC_MAX_BYTES / 2;
	cr_assert_eq(history_init(&h, 1000, max, 16), 0);
	struct hist_proc *gone = history_open(&h, 1, 1, 0, "gone", T0);
	for (int s = 0; s < 2000; s++)
		sample(&h, gone, 1 << 20, T0 + s * 1000LL);
	history_close(&h, gone, T0 + 2000 * 1000LL, "exited");
	struct hist_proc *live[4];
	for (int i = 0; i < 4; i++)
		cr_assert_not_null(live[i] = history_open(&h, 10 + i, 1, 0, "live", T0));
	size_t peak = 0;
	for (int s = 0; s < 3 * 3600; s++) {
		for (int i = 0; i < 4; i++)
			sample(&h, live[i], 1 << 20, T0 + 3000000 + s * 1000LL);
		if (h.bytes > peak)
			peak = h.bytes;
	}
	cr_assert_leq(peak, max, "never above the total bound");
	cr_assert_null(history_find(&h, 1), "the exited history went first");
	cr_assert_eq(h.st.evicted, 1);
	cr_assert_geq(h.st.truncated, 1);
	for (int i = 0; i < 4; i++) {
		cr_assert_gt(live[i]->fine.len, 0, "every live process keeps some history");
		struct collected c = {0};
		history_walk(&h, live[i], false, 0, collect, &c);
		cr_assert_eq(c.t[c.n - 1], T0 + 3000000 + (3 * 3600 - 1) * 1000LL,
		             "and its newest sample");
	}
	/* a smaller bound at reload cuts the live rings down to it */
	cr_assert_eq(history_reconfigure(&h, 1000, HIST_PROC_MAX_BYTES, 16), 0);
	cr_assert_leq(h.bytes, HIST_PROC_MAX_BYTES);
	history_free(&h);
}

Test(history, one_uids_many_processes_leave_another_uid_its_share)
{
	/* uid 1000's 200 processes fill a bound that holds 20 whole histories; then uid 2000's
	 * one process comes: it gets its whole fine ring and a growing coarse one (within its
	 * half of the bound), uid 1000's largest histories are cut to make the room, and every
	 * process of uid 1000 keeps its newest samples */
	enum { N = 200 };
	struct history h;
	size_t max = 20 * HIST_PROC_MAX_BYTES;
	cr_assert_eq(history_init(&h, 1000, max, 16), 0);
	static struct hist_proc *a[N];
	for (int i = 0; i < N; i++)
		cr_assert_not_null(a[i] = history_open(&h, 1000 + i, 1, 1000, "many", T0));
	cr_assert_eq(history_uid_share(&h, 1000), max, "alone, a uid may hold the whole bound");
	int64_t t = 0;
	for (; t < 2000; t++)
		for (int i = 0; i < N; i++)
			sample(&h, a[i], 1 << 20, T0 + t * 1000);
	cr_assert_leq(h.bytes, max);
	cr_assert_gt(h.bytes, max - N * 2 * 16 * sizeof(struct hist_sample),
	             "uid 1000 filled the bound");
	cr_assert_geq(h.st.truncated, 1);
	struct hist_proc *b = history_open(&h, 5000, 1, 2000, "other", T0 + t * 1000);
	cr_assert_not_null(b, "a new uid gets a history though the bound is full");
	cr_assert_eq(history_uid_share(&h, 2000), max / 2);
	cr_assert_eq(history_uid_share(&h, 1000), max / 2);
	size_t peak = 0;
	int64_t t1 = t + HIST_FINE_SLOTS + 64 * HIST_COARSE_TICKS;
	for (; t < t1; t++) {
		for (int i = 0; i < N; i++)
			sample(&h, a[i], 1 << 20, T0 + t * 1000);
		sample(&h, b, 2 << 20, T0 + t * 1000);
		if (h.bytes > peak)
			peak = h.bytes;
	}
	cr_log_info("uid 1000: %zu bytes for %d processes, uid 2000: %zu bytes for one; bound %zu, "
	            "%llu cut",
	            history_uid_bytes(&h, 1000), N, history_uid_bytes(&h, 2000), max,
	            (unsigned long long)h.st.cut);
	cr_assert_leq(peak, max, "never above the total bound");
	cr_assert_not(b->truncated, "uid 2000's rings grew as they would alone");
	cr_assert_eq(b->fine.len, HIST_FINE_SLOTS);
	cr_assert_geq(b->coarse.len, 64);
	cr_assert_geq(h.st.cut, 1, "uid 1000's histories were cut for it");
	cr_assert_leq(history_uid_bytes(&h, 2000), history_uid_share(&h, 2000));
	cr_assert_eq(history_uid_bytes(&h, 1000) + history_uid_bytes(&h, 2000), h.bytes);
	for (int i = 0; i < N; i++) {
		struct collected c = {0};
		history_walk(&h, a[i], false, 0, collect, &c);
		cr_assert_gt(c.n, 0, "every process of uid 1000 keeps some history");
		cr_assert_eq(c.t[c.n - 1], T0 + (t1 - 1) * 1000, "and its newest sample");
	}
	/* uid 2000's process exits: uid 1000 alone again may use the whole bound, and the
	 * exited history of a uid without a live process is the first to go */
	history_close(&h, b, T0 + t * 1000, "exited");
	cr_assert_eq(history_uid_share(&h, 1000), max);
	struct hist_proc *c1 = history_open(&h, 9000, 1, 1000, "new", T0 + t * 1000);
	cr_assert_not_null(c1);
	for (int64_t k = 0; k < HIST_FINE_SLOTS; k++, t++)
		sample(&h, c1, 1 << 20, T0 + t * 1000);
	cr_assert_null(history_find(&h, 5000), "uid 2000's exited history made the room");
	cr_assert_eq(history_uid_bytes(&h, 2000), 0u);
	cr_assert_eq(c1->fine.len, HIST_FINE_SLOTS);
	cr_assert_leq(h.bytes, max);
	history_free(&h);
	cr_assert_eq(h.bytes, 0u);
}

Test(history, exited_histories_expire_after_the_coarse_retention)
{
	struct history h;
	cr_assert_eq(history_init(&h, 1000, 64 << 20, 16), 0);
	struct hist_proc *p = history_open(&h, 5, 1, 0, "x", T0);
	sample(&h, p, 1, T0);
	history_close(&h, p, T0 + 1000, "exited");
	history_expire(&h, T0 + 1000 + 24 * 3600 * 1000LL);
	cr_assert_eq(history_find(&h, 5), p, "kept for 24 h");
	history_expire(&h, T0 + 2000 + 24 * 3600 * 1000LL);
	cr_assert_null(history_find(&h, 5));
	cr_assert_eq(h.st.expired, 1);
	cr_assert_eq(h.bytes, 0u);
	history_free(&h);
}

static bool count_events(void *arg, const struct hist_event *e)
{
	int *n = arg;
	(*n)++;
	return true;
}

Test(history, events_ring_keeps_the_newest_in_order)
{
	struct history h;
	cr_assert_eq(history_init(&h, 1000, 64 << 20, 4), 0);
	for (int i = 0; i < 6; i++) {
		struct hist_event e = {.pid = 100 + i, .kind = HIST_EV_trim, .bytes = (uint64_t)i};
		const struct hist_event *r = history_event(&h, &e, T0 + i);
		cr_assert_eq(r->seq, (uint64_t)i + 1);
		cr_assert_eq(r->t_ms, T0 + i);
	}
	int n = 0;
	history_events(&h, 0, 0, count_events, &n);
	cr_assert_eq(n, 4);
	cr_assert_eq(h.st.events_dropped, 2);
	n = 0;
	history_events(&h, 4, 0, count_events, &n);
	cr_assert_eq(n, 2, "after seq 4: 5 and 6");
	n = 0;
	history_events(&h, 0, T0 + 5, count_events, &n);
	cr_assert_eq(n, 1, "since the time of the last");
	/* a larger ring keeps what there is, a smaller one the newest */
	cr_assert_eq(history_reconfigure(&h, 1000, 64 << 20, 2), 0);
	n = 0;
	history_events(&h, 0, 0, count_events, &n);
	cr_assert_eq(n, 2);
	cr_assert_eq(h.ev[h.ev_head].seq, 5u);
	history_free(&h);
}

/* A sample charts the memory split of liballoc_shm.h (la_memory_of: in use, cached,
 * fragmented, free resident, metadata) plus the RSS the allocator does not hold, so the
 * stack sums to RSS (reclaimable and RSS are drawn over it); RSS below the allocator's resident bytes (a gauge read a moment
 * apart) gives non-allocator 0, never a wrapped number. */
Test(history, a_sample_is_the_memory_split_and_stacks_to_rss)
{
	struct la_counters c;
	memset(&c, 0, sizeof(c));
	c.allocated_bytes = 10 << 20;
	c.cached_bytes = 1 << 20;
	c.free_resident_bytes = 3 << 20;
	c.data_resident_bytes = (10 << 20) + (3 << 20) + (512 << 10); /* 512K fragmented */
	c.metadata_bytes = 256 << 10;
	c.idle_metadata_bytes = 64 << 10;
	c.address_space_bytes = 1 << 30;
	struct la_memory m;
	la_memory_of(&c, &m);
	uint64_t rss = m.resident + (5 << 20), fig[HIST_NFIG];
	timeline_figures(&c, rss, fig);
	cr_assert_eq(fig[HIST_F_in_use], 9 << 20);
	cr_assert_eq(fig[HIST_F_cached], 1 << 20);
	cr_assert_eq(fig[HIST_F_fragmented], 512 << 10);
	cr_assert_eq(fig[HIST_F_free_resident], 3 << 20);
	cr_assert_eq(fig[HIST_F_metadata], 256 << 10);
	cr_assert_eq(fig[HIST_F_non_alloc], 5 << 20);
	cr_assert_eq(fig[HIST_F_rss], rss);
	cr_assert_eq(fig[HIST_F_reclaimable], (3 << 20) + (64 << 10),
	             "free resident + idle metadata");
	uint64_t stack = 0;
	for (int f = 0; f < HIST_NFIG; f++)
		if (f != HIST_F_rss &&
		    f != HIST_F_reclaimable) /* a line and a hatch, not stacked */
			stack += fig[f];
	cr_assert_eq(stack, rss, "the stack sums to RSS");
	timeline_figures(&c, m.resident - 4096, fig);
	cr_assert_eq(fig[HIST_F_non_alloc], 0);
}

struct figures {
	int n;
	uint32_t v[HIST_NFIG];
};

static void last_figures(void *arg, int64_t t_ms, const uint32_t *kib)
{
	struct figures *f = arg;
	if (kib)
		memcpy(f->v, kib, sizeof(f->v));
	f->n++;
}

/* A sample stores the allocator's figures, reclaimable and RSS (7 x 4 bytes); non-allocator
 * RSS is what RSS holds beyond the allocator's resident bytes, derived as it is read (0 when
 * the allocator counts more than RSS: handed-out pages count whole). */
Test(history, reclaimable_is_kept_and_non_allocator_rss_is_derived)
{
	cr_assert_eq(sizeof(struct hist_sample), 28);
	cr_assert_eq(HIST_PROC_MAX_BYTES, 66096, "README.md and ctld/README.md document 66,096");
	struct history h;
	cr_assert_eq(history_init(&h, 1000, 64 << 20, 16), 0);
	struct hist_proc *p = history_open(&h, 42, 7, 0, "svc", T0);
	uint64_t v[HIST_NFIG] = {0};
	v[HIST_F_in_use] = 10 << 20;
	v[HIST_F_cached] = 1 << 20;
	v[HIST_F_fragmented] = 2 << 20;
	v[HIST_F_free_resident] = 3 << 20;
	v[HIST_F_metadata] = 1 << 20;
	v[HIST_F_reclaimable] = (3 << 20) + (256 << 10);
	v[HIST_F_rss] = 25 << 20;
	v[HIST_F_non_alloc] = 12345; /* not stored: derived */
	history_sample(&h, p, v, T0);
	v[HIST_F_rss] = 16 << 20; /* less than the allocator's 17 MiB */
	history_sample(&h, p, v, T0 + 1000);
	struct figures f = {0};
	history_walk(&h, p, false, T0, last_figures, &f);
	cr_assert_eq(f.n, 2);
	cr_assert_eq(f.v[HIST_F_reclaimable], 3 * 1024 + 256);
	cr_assert_eq(f.v[HIST_F_rss], 16 * 1024);
	cr_assert_eq(f.v[HIST_F_non_alloc], 0, "clamped: %u KiB", f.v[HIST_F_non_alloc]);
	memset(&f, 0, sizeof(f));
	history_walk(&h, p, false, T0 + 1, last_figures, &f); /* only the second tick */
	cr_assert_eq(f.n, 1);
	/* RSS above the allocator's: 25 MiB RSS - 17 MiB resident */
	struct hist_proc *q = history_open(&h, 43, 8, 0, "svc", T0);
	v[HIST_F_rss] = 25 << 20;
	history_sample(&h, q, v, T0);
	memset(&f, 0, sizeof(f));
	history_walk(&h, q, false, 0, last_figures, &f);
	cr_assert_eq(f.v[HIST_F_non_alloc], 8 * 1024, "%u KiB", f.v[HIST_F_non_alloc]);
	/* the coarse means derive it from the means */
	history_close(&h, q, T0 + 1000, "exit");
	memset(&f, 0, sizeof(f));
	history_walk(&h, q, true, 0, last_figures, &f);
	cr_assert_eq(f.n, 1);
	cr_assert_eq(f.v[HIST_F_non_alloc], 8 * 1024);
	cr_assert_eq(f.v[HIST_F_reclaimable], 3 * 1024 + 256);
	history_free(&h);
}
