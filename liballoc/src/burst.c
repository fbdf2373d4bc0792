/* burst.c — learning a periodic burst (see burst.h): the pattern functions, pure, and an
 * arena's watch of its pages in use, updated by heap.c under the arena lock. */
#include "burst.h"

#include "os.h"
#include "shm.h"
#include "tunables.h"

void burst_learn(struct burst_pattern *p, uint64_t start_ns, uint32_t pages)
{
	if (p->n == BURST_HIST) {
		for (uint32_t i = 1; i < BURST_HIST; i++) {
			p->start[i - 1] = p->start[i];
			p->pages[i - 1] = p->pages[i];
		}
		p->n--;
	}
	p->start[p->n] = start_ns;
	p->pages[p->n] = pages;
	p->n++;
}

void burst_forget(struct burst_pattern *p)
{
	p->n = 0;
}

/* Do the last `count` bursts of p agree (intervals within 1/tol of their mean, at least
 * BURST_MIN_PERIOD; rises within 1/BURST_SIZE_TOL of the largest)? Then *g is the next. */
static bool fits(const struct burst_pattern *p, uint32_t count, uint64_t tol, struct burst_guess *g)
{
	if (p->n < count)
		return false;
	uint32_t k = p->n - count;
	uint64_t sum = 0;
	for (uint32_t i = k + 1; i < p->n; i++) {
		if (p->start[i] <= p->start[i - 1])
			return false;
		sum += p->start[i] - p->start[i - 1];
	}
	uint64_t period = sum / (count - 1), jitter = 0;
	if (period < BURST_MIN_PERIOD)
		return false;
	for (uint32_t i = k + 1; i < p->n; i++) {
		uint64_t d = p->start[i] - p->start[i - 1];
		uint64_t off = d > period ? d - period : period - d;
		if (off * tol > period)
			return false;
		if (off > jitter)
			jitter = off;
	}
	uint32_t lo = UINT32_MAX, hi = 0;
	for (uint32_t i = k; i < p->n; i++) {
		lo = LA_MIN(lo, p->pages[i]);
		hi = LA_MAX(hi, p->pages[i]);
	}
	if (lo < BURST_MIN_PAGES || (uint64_t)(hi - lo) * BURST_SIZE_TOL > hi)
		return false;
	g->period_ns = period;
	g->jitter_ns = jitter;
	g->next_ns = p->start[p->n - 1] + period;
	g->pages = lo;
	return true;
}

bool burst_predict(const struct burst_pattern *p, struct burst_guess *g)
{
	return fits(p, BURST_LEARN, BURST_TOL, g) || fits(p, BURST_LEARN - 1, BURST_TOL_EARLY, g);
}

uint64_t burst_lead_ns(const struct burst_guess *g, uint32_t cost_ns)
{
	uint64_t cost = cost_ns ? cost_ns : BURST_COST_NS;
	/* the populate at the rate measured, a quarter more (the machine may be busier),
	 * and the burst may come early by the jitter it was learnt with */
	uint64_t fill = (uint64_t)g->pages * cost;
	return fill + fill / 4 + 2 * g->jitter_ns + BURST_MARGIN_NS;
}

uint64_t burst_window_ns(const struct burst_guess *g)
{
	return 2 * g->jitter_ns + g->period_ns / 32 + BURST_MARGIN_NS;
}

/* ---- the watch (arena lock) --------------------------------------------------------- */

void burst_unprepare(struct burst_watch *w)
{
	if (w->prepared && w->c)
		STAT_SUB_LOCKED(w->c, burst_prepared_bytes, (uint64_t)w->prepared << LA_PAGE_SHIFT);
	w->prepared = 0;
}

void burst_grew(struct burst_watch *w, uint32_t n, uint32_t dirty)
{
	w->used += n;
	if (w->prepared && dirty) {
		uint32_t took = LA_MIN(dirty, w->prepared);
		w->prepared -= took;
		if (w->c)
			STAT_SUB_LOCKED(w->c, burst_prepared_bytes,
			                (uint64_t)took << LA_PAGE_SHIFT);
	}
	if (w->active) {
		if (w->used > w->peak)
			w->peak = w->used;
		return;
	}
	if (w->used < w->base + BURST_START_PAGES)
		return;
	w->active = 1;
	w->peak = w->used;
	w->start_ns = os_now_ns();
	if (w->predicted_ns && w->want && w->start_ns <= w->deadline_ns && !w->hit) {
		w->hit = 1;
		if (w->c)
			STAT_ADD_LOCKED(w->c, burst_hits, 1);
		/* its frees leave the returns to the control thread (arena.c
		 * after_free_pages): they would be system time inside the burst */
		w->defer = 1;
		w->defer_base = w->base;
		w->defer_ns = 0;
	}
	if (w->holding)
		shm_wake_control(); /* pages still to come: it populates beside the burst */
}

void burst_shrank(struct burst_watch *w, uint32_t n)
{
	w->used -= n;
	if (!w->active) {
		if (w->used < w->base)
			w->base = w->used;
		if (w->defer && w->defer_ns && w->used <= w->defer_pages &&
		    w->used + n > w->defer_pages)
			shm_wake_control(); /* back near its old level: the give-backs are due */
		return;
	}
	uint32_t rise = w->peak - w->base;
	if (w->used > w->base + rise / 4)
		return;
	/* the burst is over */
	w->active = 0;
	if (rise >= BURST_MIN_PAGES) {
		burst_learn(&w->pat, w->start_ns, rise);
		/* the time a page took in it, faults and the program's own work: the lead of
		 * the first preparation, before one was measured */
		uint64_t ns = (os_now_ns() - w->start_ns) / rise;
		w->seen_cost_ns = (uint32_t)LA_MIN(ns, 1000000u);
	}
	w->base = w->used;
	if (w->defer) {
		/* the last quarter's frees still defer, until the arena is back near its level
		 * before the burst and its frees settled (a give-back begun earlier would
		 * hold the lock against the frees still to come), or for one decay period at
		 * most */
		w->defer_pages = w->defer_base + rise / 16;
		w->defer_look_ns = 0;
		w->defer_ns = os_now_ns() + (uint64_t)TUN(decay_ms) * 1000000u;
		if (!w->defer_ns)
			w->defer_ns = 1;
	}
	/* the control thread is woken when it has something to do: prepare for the next
	 * burst, which the pattern predicts now, or give back what is left (a preparation's
	 * pages, the returns a hit burst deferred). A burst that predicts nothing (a load
	 * that swings by more than BURST_START_PAGES many times a second: large_random's
	 * heap, 68 wakes in 3,000 steps) would cost a futex call on the program's thread
	 * and a run of the control thread beside it, for nothing */
	struct burst_guess g;
	bool kick = w->holding || w->defer || w->stamp ||
	            (rise >= BURST_MIN_PAGES && burst_predict(&w->pat, &g));
	if (w->predicted_ns) {
		/* what the burst did not take is free memory like any other from now on (the
		 * control thread gives back pages still stamped for it) */
		w->predicted_ns = 0;
		w->want = w->done = 0;
		w->hit = 0;
		w->holding = 0;
		burst_unprepare(w);
	}
	if (kick)
		shm_wake_control(); /* to predict the next, or give back what is left */
}
