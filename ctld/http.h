/* http.h — the daemon's HTTP server (http.c) and the content it serves (metrics.c). */
#ifndef CTLD_HTTP_H
#define CTLD_HTTP_H

#include <stdbool.h>

#include <event2/buffer.h>

struct ctld;

/* Listen on cfg.listen ("host:port", "unix:PATH" or "off"). 0, or -1 logged. */
int http_init(struct ctld *d);
void http_shutdown(struct ctld *d);
int http_connections(void);

/* /metrics (json false) or /api/processes (json true), written into out as a job in
 * slices (see metrics.c); done is called once all is in out. NULL when MAX_SCRAPES run. */
struct scrape;
struct scrape *metrics_start(struct ctld *d, bool json, struct evbuffer *out,
                             void (*done)(void *arg, bool ok), void *arg);
void metrics_resume(struct scrape *s); /* the client read some: go on */
void metrics_cancel(struct scrape *s); /* the client went away */
/* A process is forgotten: in metrics_mode = service its counters are carried into its
 * service's (they stay monotonic). */
struct proc;
void metrics_proc_gone(struct ctld *d, struct proc *p);
/* A process is (re)discovered: one the daemon forgot while it lived (its segment damaged,
 * then examined again) had its counters carried; they are taken back, so the service
 * counts them once (by host pid, start time and the segment file). */
void metrics_proc_found(struct ctld *d, struct proc *p);

/* A request as the content handlers see it (dashboard.c). */
struct hconn;
struct http_req {
	struct hconn *c;
	const char *query; /* after '?', NULL if none */
	bool head;         /* HEAD: the body is not sent */
};
/* Answer it: status, type, body (may be NULL) and extra header lines ("Name: v\r\n"...;
 * without a Cache-Control line, "no-store" is added). */
void http_reply(struct http_req *r, int code, const char *reason, const char *ctype,
                struct evbuffer *body, const char *extra);

/* The body of GET path into out, with its content type: 200, or 404 (unknown path). */
int metrics_serve(struct ctld *d, const char *path, struct evbuffer *out, const char **ctype);

#endif
