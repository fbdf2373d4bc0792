/* burst.h — anticipatory pre-population for a periodic burst. Each arena watches the pages
 * its heaps have in use (struct burst_watch, guarded by the arena lock): a rise of
 * BURST_START_PAGES above the level the arena idles at starts a burst, a fall back to a
 * quarter of the rise ends it, and a burst that rose at least BURST_MIN_PAGES is learnt
 * (struct burst_pattern: its start time and its rise). Once the last BURST_LEARN bursts
 * came at intervals agreeing within 1/BURST_TOL of their mean (or the last BURST_LEARN - 1
 * within 1/BURST_TOL_EARLY: a timer's bursts agree that closely) and rose alike (within
 * 1/BURST_SIZE_TOL), the next start is predicted (burst_predict), and the control thread
 * (arena.c, arena_burst_tick) populates, a lead before it, the free pages the burst will
 * take first: resident free pages, counted as such (free_resident, and
 * burst_prepared_bytes). If the burst does not come within burst_window_ns of the
 * prediction, the pages go back at once and the pattern is forgotten: a miss costs the
 * burst's size for lead + window, and the next prediction waits for the pattern to be
 * learnt again.
 * The pattern functions are pure (times are arguments): the unit tests drive them. */
#ifndef LA_BURST_H
#define LA_BURST_H

#include "common.h"

#define BURST_HIST         4u           /* bursts remembered */
#define BURST_LEARN        4u           /* bursts (three intervals) before a prediction */
#define BURST_TOL          8u           /* intervals agree within 1/8 (12.5 %) of their mean */
#define BURST_TOL_EARLY    64u          /* or the last BURST_LEARN - 1 within 1/64 (1.6 %) */
#define BURST_SIZE_TOL     4u           /* rises agree within 1/4 of the largest */
#define BURST_START_PAGES  1024u        /* 4 MiB above the idle level: a burst begins */
#define BURST_MIN_PAGES    4096u        /* 16 MiB: smaller rises are not worth predicting */
#define BURST_MIN_PERIOD   200000000ull /* 200 ms: faster "bursts" are a steady load */
#define BURST_MARGIN_NS    50000000ull  /* 50 ms: slack on either side of a prediction */
#define BURST_CHUNK_PAGES  256u         /* pages populated per hold of the arena lock (1 MiB) */
#define BURST_COST_NS      2000u        /* ns per page assumed before a populate was measured */
#define BURST_SETTLE_PAGES 256u         /* a deferring burst's frees are done: the level fell */
#define BURST_SETTLE_NS    20000000ull  /* less than 1 MiB within 20 ms */
#define BURST_BUSY_NS      1000000ull   /* an arena the program holds is looked at again */

struct burst_pattern {
	uint64_t start[BURST_HIST]; /* CLOCK_MONOTONIC ns, oldest first */
	uint32_t pages[BURST_HIST]; /* its rise above the idle level */
	uint32_t n;                 /* bursts held */
};

/* A prediction: the next start, the period and the jitter it was learnt with, the pages
 * the burst is expected to take. */
struct burst_guess {
	uint64_t next_ns;
	uint64_t period_ns;
	uint64_t jitter_ns; /* the largest distance of a learnt interval from the period */
	uint32_t pages;     /* the smallest rise of the learnt bursts */
};

void burst_learn(struct burst_pattern *p, uint64_t start_ns, uint32_t pages);
void burst_forget(struct burst_pattern *p);
/* True when the last BURST_LEARN bursts form a pattern: then *g is the next burst. */
bool burst_predict(const struct burst_pattern *p, struct burst_guess *g);
/* How long before g's start the pages must be populated, at cost_ns a page (0: not
 * known, BURST_COST_NS), and how long after it a burst still counts as the predicted
 * one. */
uint64_t burst_lead_ns(const struct burst_guess *g, uint32_t cost_ns);
uint64_t burst_window_ns(const struct burst_guess *g);

/* An arena's watch (arena lock). */
struct burst_watch {
	uint32_t used;         /* pages of the arena's heaps in use (heap.c keeps it) */
	uint32_t base;         /* the level the arena idles at */
	uint32_t peak;         /* the current burst's highest level */
	uint8_t active;        /* a burst is under way */
	uint8_t holding;       /* pages are prepared or being prepared: the throttle and the
	                    * decay pass keep them (heap stamps in the future) */
	uint8_t hit;           /* the predicted burst came */
	uint8_t defer;         /* it came: the give-backs of its frees wait (defer_base below) */
	uint32_t want;         /* pages to prepare for the prediction */
	uint32_t done;         /* pages populated for it so far */
	uint32_t prepared;     /* of those, not taken yet (published: burst_prepared_bytes) */
	uint32_t stamp;        /* heap_epoch stamp of the prepared spans (give-back finds them) */
	uint32_t cost_ns;      /* ns per page of the last preparation (0: none yet) */
	uint32_t seen_cost_ns; /* ns per page of the last burst (its faults and work) */
	uint64_t start_ns;     /* when the current (or last) burst began */
	uint64_t predicted_ns; /* the predicted start acted on (0: none) */
	uint64_t deadline_ns;  /* no burst by then: a miss */
	uint64_t prep_ns;      /* when the preparation began */
	/* A hit burst's frees leave the nearly-empty purge and the idle heap release to
	 * the control thread (arena.c after_free_pages) until the arena is back within a
	 * sixteenth of the rise of its level before it (defer_pages) and its frees settled
	 * (fell less than BURST_SETTLE_PAGES in BURST_SETTLE_NS), or defer_ns went by. */
	uint32_t defer_base;    /* the level before the deferring burst began */
	uint32_t defer_pages;   /* deferring ends at this level */
	uint64_t defer_ns;      /* ... or at this time (0: the burst is still under way) */
	uint32_t defer_seen;    /* the level at the last look (defer_look_ns) */
	uint64_t defer_look_ns; /* when it was seen (0: not looked yet) */
	struct burst_guess guess;
	struct burst_pattern pat;
	struct la_counters *c; /* the arena's published counters */
	/* atomic (written under the lock, read without it): when the last look
	 * (arena_burst_tick) wanted the next (0: none) */
	uint64_t next_look_ns;
};

/* heap.c, lock held: n pages went into use (dirty of them resident: prepared pages are
 * taken), n pages came back. */
void burst_grew(struct burst_watch *w, uint32_t n, uint32_t dirty);
void burst_shrank(struct burst_watch *w, uint32_t n);
/* The prepared pages left are no longer waited for (lock held). */
void burst_unprepare(struct burst_watch *w);

#endif
