/* history.h — `allocctl history PID` and the trend column of `allocctl top`: the daemon's
 * samples of a process (HistoryReply) as one line per figure (min, max, last and a
 * sparkline) followed by the events, or as JSON (jansson). */
#ifndef ALLOCCTL_HISTORY_H
#define ALLOCCTL_HISTORY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ctl.pb-c.h"
#include "render.h"

#define HISTORY_GAP UINT64_MAX /* a period without a sample (FigureSeries.kib) */

/* Sparkline of v[0..n) (KiB, HISTORY_GAP for none) in UTF-8 block characters, scaled
 * from the smallest to the largest value; a gap is a space. buf holds 3 bytes per value. */
char *history_sparkline(char *buf, size_t len, const uint64_t *v, size_t n);
/* The series of figure name in ph, or NULL. */
const Ctl__FigureSeries *history_series(const Ctl__ProcessHistory *ph, const char *name);
/* The history of pid in r, or NULL. */
const Ctl__ProcessHistory *history_of(const Ctl__HistoryReply *r, int32_t pid);
/* "▁▂▃▅▇ +1.2 MiB": RSS over the reply's window and its change, for top. */
char *history_trend(char *buf, size_t len, const Ctl__ProcessHistory *ph, bool raw);

/* history PID: a table per figure and the events (or JSON). */
void render_history(FILE *f, const Ctl__HistoryReply *r, const struct render_opts *o);

#endif
