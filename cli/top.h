/* top.h — `allocctl top`: a live view of every process, refreshed each interval and sorted
 * by reclaimable memory; keys: q quits, r/u/o/s/p sort by reclaimable, in use, other
 * (non-allocator) RSS, RSS, pid.
 * On a terminal it uses the alternate screen, ANSI escapes and termios non-canonical mode
 * (restored on every exit path); elsewhere it needs a snapshot count and prints plain
 * frames. */
#ifndef ALLOCCTL_TOP_H
#define ALLOCCTL_TOP_H

#include <stddef.h>

#include "client.h"
#include "render.h"
#include "ctl.pb-c.h"

enum top_sort { TOP_SORT_RECLAIMABLE, TOP_SORT_IN_USE, TOP_SORT_OTHER, TOP_SORT_RSS, TOP_SORT_PID };

/* Sort procs in place for the view (largest first; pid ascending for TOP_SORT_PID). */
void top_sort(Ctl__ProcessInfo **procs, size_t n, enum top_sort by);
/* The sort a key selects, or -1 if the key is not a sort key. */
int top_sort_key(int key);

/* Runs the view; interval_ms > 0; iterations 0 = until q. Returns an exit status. */
int top_run(struct client *c, const struct render_opts *o, int interval_ms, long iterations);

#endif
