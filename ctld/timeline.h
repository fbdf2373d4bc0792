/* timeline.h — the daemon's history on its loop (timeline.c) and over HTTP (dashboard.c):
 * state shared by the two, and the hooks discovery and commands call. */
#ifndef CTLD_TIMELINE_H
#define CTLD_TIMELINE_H

#include <stdbool.h>
#include <stdint.h>

#include "ctld.h"
#include "history.h"

struct timeline {
	struct history h;
	struct event *timer;   /* the next tick, aligned on the sample period */
	struct event *slice;   /* the rest of a sweep, after the loop's other work */
	uint64_t tick;         /* tick of the sweep in progress */
	int64_t tick_ms;       /* its time */
	uint64_t tick_mono_ns; /* CLOCK_MONOTONIC when it began */
	int64_t started_ms;    /* the daemon's start: the page sees a restart as a new value */
	char host[256];
	bool refused_logged;
	/* the cost of sampling, for /metrics and the bench */
	uint64_t sweeps, sampled, sample_ns;
};

int64_t timeline_now_ms(void);
/* Figures of one sample from a process's counter totals and RSS. */
void timeline_figures(const struct la_counters *c, uint64_t rss, uint64_t out[HIST_NFIG]);
/* Which tier answers a request: res "fine"/"coarse" or NULL/"auto" (fine when since_ms
 * lies within the fine window, or when the coarse tier reaches back no further). */
bool timeline_pick_coarse(const struct history *h, const struct hist_proc *p, const char *res,
                          int64_t since_ms);

#endif
