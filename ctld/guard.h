/* guard.h — what every listener of the daemon shares: running out of descriptors (EMFILE)
 * is met with a reserve descriptor (closed to accept and drop the waiting connection, so
 * the kernel's queue drains instead of the loop spinning on it), a pause of the listener,
 * and one log line per 10 s with the count dropped meanwhile; and refusals are logged the
 * same rate-limited way (ratelog). */
#ifndef CTLD_GUARD_H
#define CTLD_GUARD_H

#include <stdbool.h>
#include <stdint.h>

#include <event2/event.h>
#include <event2/listener.h>

struct accept_guard {
	struct evconnlistener *l;
	struct event *resume; /* re-enables the listener after a pause */
	const char *what;     /* "control socket", "http" */
	uint64_t logged_ns, dropped;
};

/* Attach to a listener (sets its error callback). 0, or -1 out of memory. */
int guard_init(struct accept_guard *g, struct event_base *base, struct evconnlistener *l,
               const char *what);
void guard_free(struct accept_guard *g);

/* One rate-limited log line: returns true when the caller may log now (at most one line per
 * period_ns for this slot); *suppressed gets how many were held back since the last one. */
struct ratelog {
	uint64_t last_ns, held;
};
bool ratelog_allow(struct ratelog *r, uint64_t period_ns, uint64_t *suppressed);

#endif
