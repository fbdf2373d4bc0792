/* guard.c — descriptor exhaustion on accept and rate-limited logging (guard.h). */
#include "guard.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "segment.h"

#define PAUSE_MS         100
#define ACCEPTS_PER_TURN 8
#define LOG_NS           10000000000ull

static int reserve_fd = -1; /* one descriptor kept for the moment all others are gone */
/* the listener hands its error callback its own argument (the daemon's state), so each
 * listener's guard is found here */
static struct accept_guard *guards[4];

bool ratelog_allow(struct ratelog *r, uint64_t period_ns, uint64_t *suppressed)
{
	uint64_t now = seg_now_ns(CLOCK_MONOTONIC);
	if (r->last_ns && now - r->last_ns < period_ns) {
		r->held++;
		return false;
	}
	*suppressed = r->held;
	r->held = 0;
	r->last_ns = now;
	return true;
}

static void on_resume(evutil_socket_t fd, short what, void *arg)
{
	struct accept_guard *g = arg;
	g->accepts = 0;
	evconnlistener_enable(g->l);
}

void guard_accepted(struct accept_guard *g)
{
	if (++g->accepts < ACCEPTS_PER_TURN)
		return;
	/* libevent's accept loop stops once the listener is disabled; the resume event runs
	 * after the callbacks already ready (the reads of the connections just accepted) */
	evconnlistener_disable(g->l);
	event_active(g->resume, EV_TIMEOUT, 1);
}

static void on_error(struct evconnlistener *l, void *arg)
{
	struct accept_guard *g = NULL;
	for (int i = 0; i < 4; i++)
		if (guards[i] && guards[i]->l == l)
			g = guards[i];
	if (!g)
		return;
	int e = EVUTIL_SOCKET_ERROR();
	if (e == EMFILE || e == ENFILE) {
		/* take the waiting connection with the reserve and drop it */
		if (reserve_fd >= 0) {
			close(reserve_fd);
			reserve_fd = -1;
		}
		int fd = accept(evconnlistener_get_fd(l), NULL, NULL);
		if (fd >= 0) {
			close(fd);
			g->dropped++;
		}
		reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	}
	uint64_t now = seg_now_ns(CLOCK_MONOTONIC);
	if (!g->logged_ns || now - g->logged_ns >= LOG_NS) {
		log_warn("%s: accept: %s; pausing %d ms (%llu connections dropped since the last "
		         "such line)",
		         g->what, strerror(e), PAUSE_MS, (unsigned long long)g->dropped);
		g->logged_ns = now;
		g->dropped = 0;
	}
	/* let the loop serve what it has; listen again a moment later */
	evconnlistener_disable(l);
	struct timeval tv = {0, PAUSE_MS * 1000};
	event_add(g->resume, &tv);
}

int guard_init(struct accept_guard *g, struct event_base *base, struct evconnlistener *l,
               const char *what)
{
	memset(g, 0, sizeof(*g));
	g->l = l;
	g->what = what;
	g->resume = evtimer_new(base, on_resume, g);
	if (!g->resume)
		return -1;
	if (reserve_fd < 0)
		reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	for (int i = 0; i < 4; i++)
		if (!guards[i]) {
			guards[i] = g;
			evconnlistener_set_error_cb(l, on_error);
			return 0;
		}
	return -1;
}

void guard_free_bev(struct bufferevent *bev)
{
	evutil_socket_t fd = bufferevent_getfd(bev);
	bufferevent_setfd(bev, -1); /* its finalizer then has no socket to close */
	bufferevent_free(bev);
	if (fd >= 0)
		evutil_closesocket(fd);
}

void guard_free(struct accept_guard *g)
{
	for (int i = 0; i < 4; i++)
		if (guards[i] == g)
			guards[i] = NULL;
	if (g->resume)
		event_free(g->resume);
	g->resume = NULL;
}
