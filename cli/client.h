/* client.h — allocctl's connection to allocctld: connect, one request/reply round trip,
 * and the one-line explanations of transport failures (no daemon, permission, timeout).
 * Single-threaded; one connection per struct client. */
#ifndef ALLOCCTL_CLIENT_H
#define ALLOCCTL_CLIENT_H

#include <stddef.h>

#include "ctl.pb-c.h"

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

struct client {
	const char *socket; /* resolved path: --socket, $ALLOCCTL_SOCKET or the default */
	int fd;             /* -1 while not connected */
	int timeout_ms;     /* per round trip */
	char error[512];    /* the last failure, one line */
};

void client_init(struct client *c, const char *socket_opt, int timeout_ms);
/* 0, or -1 with c->error explaining (no daemon at the path and how to start one, ...). */
int client_connect(struct client *c);
/* Connects if needed, sends env and returns the reply (free with ctl__reply__free_unpacked),
 * or NULL with c->error set and the connection closed. */
Ctl__Reply *client_call(struct client *c, Ctl__Envelope *env);
void client_close(struct client *c);
/* The whole process list, page after page, merged into one reply (NULL with c->error, or a
 * reply with its error code). */
Ctl__Reply *client_list(struct client *c);
/* stats of pid with every arena, page after page. */
Ctl__Reply *client_stats(struct client *c, int32_t pid);

#endif
