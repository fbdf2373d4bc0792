/* guard.h — what every listener of the daemon shares: running out of descriptors (EMFILE)
 * is met with a reserve descriptor (closed to accept and drop the waiting connection, so
 * the kernel's queue drains instead of the loop spinning on it), a pause of the listener,
 * and one log line per 10 s with the count dropped meanwhile; and refusals are logged the
 * same rate-limited way (ratelog). */
#ifndef CTLD_GUARD_H
#define CTLD_GUARD_H

#include <stdbool.h>
#include <stdint.h>

#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

struct accept_guard {
	struct evconnlistener *l;
	struct event *resume; /* re-enables the listener after a pause */
	const char *what;     /* "control socket", "http" */
	uint64_t logged_ns, dropped;
	unsigned accepts; /* since the listener was last (re-)enabled */
};

/* Attach to a listener (sets its error callback). 0, or -1 out of memory. */
int guard_init(struct accept_guard *g, struct event_base *base, struct evconnlistener *l,
               const char *what);
void guard_free(struct accept_guard *g);

/* Called by the listener's accept callback for each connection: after a few accepts the
 * listener waits for the rest of the loop's ready callbacks. One turn of a libevent
 * listener accepts until the kernel's queue is empty, and a listener that makes room by
 * dropping its oldest connection that has not sent a request (http.c) then dropped a
 * /healthz connection accepted in the same turn before its request was ever read: a
 * slowloris reconnecting 2,000 sockets as fast as a quiet machine allows starved
 * /healthz (2-3 of 10 failed). */
void guard_accepted(struct accept_guard *g);

/* Free a connection's bufferevent and close its socket now. bufferevent_free closes the
 * socket only when its finalizer runs, later in the loop turn, and one turn of a listener
 * accepts until the kernel's queue is empty: connections dropped to make room for new ones
 * kept their descriptors meanwhile, so 2,000 slowloris connections reached EMFILE at a
 * 1,024 limit with 64 connections allowed. */
void guard_free_bev(struct bufferevent *bev);

/* One rate-limited log line: returns true when the caller may log now (at most one line per
 * period_ns for this slot); *suppressed gets how many were held back since the last one. */
struct ratelog {
	uint64_t last_ns, held;
};
bool ratelog_allow(struct ratelog *r, uint64_t period_ns, uint64_t *suppressed);

#endif
