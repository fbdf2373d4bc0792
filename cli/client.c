/* client.c — connection to allocctld (client.h). */
#include "client.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wire.h"

void client_init(struct client *c, const char *socket_opt, int timeout_ms)
{
	c->socket = wire_socket_path(socket_opt);
	c->fd = -1;
	c->timeout_ms = timeout_ms;
	c->error[0] = 0;
}

int client_connect(struct client *c)
{
	if (c->fd >= 0)
		return 0;
	c->fd = wire_connect(c->socket);
	if (c->fd >= 0)
		return 0;
	int e = errno;
	switch (e) {
	case ENOENT:
	case ECONNREFUSED:
	case ENOTDIR:
		snprintf(c->error, sizeof(c->error),
		         "no daemon at %s (%s); start one with `allocctld --socket %s`, or point "
		         "--socket or $%s at a running one",
		         c->socket, strerror(e), c->socket, CTL_SOCKET_ENV);
		break;
	case EACCES:
	case EPERM:
		snprintf(c->error, sizeof(c->error),
		         "permission denied opening the daemon socket %s (it is owner-only: run as "
		         "the "
		         "daemon's user or root, or use a daemon of your own with --socket)",
		         c->socket);
		break;
	case ENAMETOOLONG:
		snprintf(c->error, sizeof(c->error),
		         "socket path too long (%zu bytes; a Unix socket path has at most 107): %s",
		         strlen(c->socket), c->socket);
		break;
	default:
		snprintf(c->error, sizeof(c->error), "cannot connect to the daemon at %s: %s",
		         c->socket, strerror(e));
		break;
	}
	return -1;
}

void client_close(struct client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

#define LIST_PAGE  512
#define ARENA_PAGE 256

/* Move src's n items after dst's (realloc'd), leaving src empty. */
static int merge(void ***dst, size_t *ndst, void ***src, size_t *nsrc)
{
	if (!*nsrc)
		return 0;
	void **m = realloc(*dst, (*ndst + *nsrc) * sizeof(**dst));
	if (!m)
		return -1;
	memcpy(m + *ndst, *src, *nsrc * sizeof(**src));
	*dst = m;
	*ndst += *nsrc;
	*nsrc = 0;
	return 0;
}

/* One paged request: ask (cursor 0 first), append each page's items to the first reply's,
 * until a page says there is no more. Per kind, how to ask and where the items and cursor
 * are. */
struct pager {
	void (*ask)(Ctl__Envelope *env, void *req, uint32_t cursor);
	void *(*part)(Ctl__Reply *r); /* the reply's list or stats, NULL if absent */
	void ***(*items)(void *part, size_t **n);
	bool (*next)(void *part, uint32_t *cursor); /* more after this page? */
	bool (*streamed)(void *part);               /* the next page comes unasked */
};

static Ctl__Reply *exchange(struct client *c, Ctl__Envelope *env);

static Ctl__Reply *paged(struct client *c, const struct pager *pg, void *req)
{
	Ctl__Reply *all = NULL;
	uint32_t cursor = 0;
	bool streamed = false;
	for (;;) {
		Ctl__Envelope env = CTL__ENVELOPE__INIT;
		pg->ask(&env, req, cursor);
		Ctl__Reply *r = exchange(c, streamed ? NULL : &env);
		void *part = r && r->code == CTL__ERROR_CODE__OK ? pg->part(r) : NULL;
		if (!part) {
			if (all)
				ctl__reply__free_unpacked(all, NULL);
			return r;
		}
		uint32_t next = cursor;
		bool more = pg->next(part, &next) && next > cursor;
		streamed = more && pg->streamed && pg->streamed(part);
		cursor = next;
		if (!all) {
			all = r;
		} else {
			size_t *na, *nr;
			void ***ia = pg->items(pg->part(all), &na), ***ir = pg->items(part, &nr);
			int m = merge(ia, na, ir, nr);
			ctl__reply__free_unpacked(r, NULL);
			if (m < 0) {
				ctl__reply__free_unpacked(all, NULL);
				snprintf(c->error, sizeof(c->error), "out of memory");
				return NULL;
			}
		}
		if (!more)
			return all;
	}
}

static void list_ask(Ctl__Envelope *env, void *req, uint32_t cursor)
{
	Ctl__ListRequest *l = req;
	ctl__list_request__init(l);
	l->has_after_pid = cursor > 0;
	l->after_pid = (int32_t)cursor;
	l->has_max = 1;
	l->max = LIST_PAGE;
	l->has_stream = 1;
	l->stream = 1; /* one round trip: the pages follow the first unasked */
	env->payload_case = CTL__ENVELOPE__PAYLOAD_LIST;
	env->list = l;
}
static void *list_part(Ctl__Reply *r)
{
	return r->list;
}
static void ***list_items(void *part, size_t **n)
{
	Ctl__ListReply *l = part;
	*n = &l->n_processes;
	return (void ***)&l->processes;
}
static bool list_next(void *part, uint32_t *cursor)
{
	Ctl__ListReply *l = part;
	bool more = l->has_next_pid && l->next_pid > 0;
	if (more)
		*cursor = (uint32_t)l->next_pid;
	l->has_next_pid = 0;
	return more;
}
static bool list_streamed(void *part)
{
	Ctl__ListReply *l = part;
	return l->has_streamed && l->streamed;
}

Ctl__Reply *client_list(struct client *c)
{
	static const struct pager pg = {list_ask, list_part, list_items, list_next, list_streamed};
	Ctl__ListRequest req;
	return paged(c, &pg, &req);
}

struct stats_req {
	Ctl__StatsRequest r;
	int32_t pid;
};
static void stats_ask(Ctl__Envelope *env, void *req, uint32_t cursor)
{
	struct stats_req *s = req;
	ctl__stats_request__init(&s->r);
	s->r.pid = s->pid;
	s->r.has_first_arena = cursor > 0;
	s->r.first_arena = cursor;
	s->r.has_max_arenas = 1;
	s->r.max_arenas = ARENA_PAGE;
	env->payload_case = CTL__ENVELOPE__PAYLOAD_STATS;
	env->stats = &s->r;
}
static void *stats_part(Ctl__Reply *r)
{
	return r->stats;
}
static void ***stats_items(void *part, size_t **n)
{
	Ctl__StatsReply *s = part;
	*n = &s->n_arenas;
	return (void ***)&s->arenas;
}
static bool stats_next(void *part, uint32_t *cursor)
{
	Ctl__StatsReply *s = part;
	bool more = s->has_next_arena;
	if (more)
		*cursor = s->next_arena;
	s->has_next_arena = 0;
	return more;
}

Ctl__Reply *client_stats(struct client *c, int32_t pid)
{
	static const struct pager pg = {stats_ask, stats_part, stats_items, stats_next, NULL};
	struct stats_req req = {.pid = pid};
	return paged(c, &pg, &req);
}

Ctl__Reply *client_call(struct client *c, Ctl__Envelope *env)
{
	return exchange(c, env);
}

/* Send env and read its reply; env NULL: read the next page of a streamed reply. */
static Ctl__Reply *exchange(struct client *c, Ctl__Envelope *env)
{
	if (client_connect(c) < 0)
		return NULL;
	Ctl__Reply *r =
	        env ? wire_call(c->fd, env, c->timeout_ms) : wire_reply(c->fd, c->timeout_ms);
	if (r)
		return r;
	int e = errno;
	client_close(c);
	switch (e) {
	case ETIMEDOUT:
		snprintf(c->error, sizeof(c->error),
		         "the daemon at %s did not answer within %d ms (raise --timeout, or check "
		         "that allocctld is not stopped)",
		         c->socket, c->timeout_ms);
		break;
	case ECONNRESET:
	case EPIPE:
		snprintf(c->error, sizeof(c->error),
		         "the daemon at %s closed the connection without a reply (see its log)",
		         c->socket);
		break;
	case EBADMSG:
	case EMSGSIZE:
		snprintf(c->error, sizeof(c->error),
		         "the daemon at %s sent a reply that does not decode (is it allocctld, "
		         "protocol %u?)",
		         c->socket, CTL_PROTOCOL_VERSION);
		break;
	default:
		snprintf(c->error, sizeof(c->error), "talking to the daemon at %s: %s", c->socket,
		         strerror(e));
		break;
	}
	return NULL;
}
