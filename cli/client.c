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

Ctl__Reply *client_list(struct client *c)
{
	Ctl__Reply *all = NULL;
	int32_t after = 0;
	for (;;) {
		Ctl__ListRequest req = CTL__LIST_REQUEST__INIT;
		req.has_after_pid = after > 0;
		req.after_pid = after;
		req.has_max = 1;
		req.max = LIST_PAGE;
		Ctl__Envelope env = CTL__ENVELOPE__INIT;
		env.payload_case = CTL__ENVELOPE__PAYLOAD_LIST;
		env.list = &req;
		Ctl__Reply *r = client_call(c, &env);
		if (!r || r->code != CTL__ERROR_CODE__OK || !r->list) {
			if (all)
				ctl__reply__free_unpacked(all, NULL);
			return r;
		}
		bool more = r->list->has_next_pid && r->list->next_pid > after;
		after = r->list->next_pid;
		if (!all) {
			all = r;
		} else {
			int m = merge((void ***)&all->list->processes, &all->list->n_processes,
			              (void ***)&r->list->processes, &r->list->n_processes);
			ctl__reply__free_unpacked(r, NULL);
			if (m < 0) {
				ctl__reply__free_unpacked(all, NULL);
				snprintf(c->error, sizeof(c->error), "out of memory");
				return NULL;
			}
		}
		if (!more)
			break;
	}
	all->list->has_next_pid = 0;
	return all;
}

Ctl__Reply *client_stats(struct client *c, int32_t pid)
{
	Ctl__Reply *all = NULL;
	uint32_t first = 0;
	for (;;) {
		Ctl__StatsRequest req = CTL__STATS_REQUEST__INIT;
		req.pid = pid;
		req.has_first_arena = first > 0;
		req.first_arena = first;
		req.has_max_arenas = 1;
		req.max_arenas = ARENA_PAGE;
		Ctl__Envelope env = CTL__ENVELOPE__INIT;
		env.payload_case = CTL__ENVELOPE__PAYLOAD_STATS;
		env.stats = &req;
		Ctl__Reply *r = client_call(c, &env);
		if (!r || r->code != CTL__ERROR_CODE__OK || !r->stats) {
			if (all)
				ctl__reply__free_unpacked(all, NULL);
			return r;
		}
		bool more = r->stats->has_next_arena && r->stats->next_arena > first;
		first = r->stats->next_arena;
		if (!all) {
			all = r;
		} else {
			int m = merge((void ***)&all->stats->arenas, &all->stats->n_arenas,
			              (void ***)&r->stats->arenas, &r->stats->n_arenas);
			ctl__reply__free_unpacked(r, NULL);
			if (m < 0) {
				ctl__reply__free_unpacked(all, NULL);
				snprintf(c->error, sizeof(c->error), "out of memory");
				return NULL;
			}
		}
		if (!more)
			break;
	}
	all->stats->has_next_arena = 0;
	return all;
}

Ctl__Reply *client_call(struct client *c, Ctl__Envelope *env)
{
	if (client_connect(c) < 0)
		return NULL;
	Ctl__Reply *r = wire_call(c->fd, env, c->timeout_ms);
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
