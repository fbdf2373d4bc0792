/* client.c — connection to allocctld (client.h). */
#include "client.h"

#include <errno.h>
#include <stdio.h>
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
