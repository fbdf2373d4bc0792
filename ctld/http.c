/* http.c — the daemon's HTTP server, small on purpose: GET and HEAD of a few paths, one
 * request per connection (Connection: close), no request body. What it must withstand on a
 * shared host (issue 18):
 *  - a cap on connections (http_max_connections): at the cap the oldest connection still
 *    sending its request is dropped for the new one, its socket read first (a request
 *    that came whole but was not read yet is answered instead); only when every
 *    connection is being answered does the new one get a short 503;
 *  - a whole-request deadline (http_request_timeout_ms for the request line and every
 *    header, not a per-byte timeout: slowloris gets nowhere), and at most 8 KiB of them;
 *  - descriptor exhaustion handled by the accept guard (reserve fd, pause, one log line);
 *  - a Host header limited to the listen address and localhost names (plus
 *    http_allowed_hosts), so a web page in a browser cannot read the endpoints through DNS
 *    rebinding: another Host gets 403; a method other than GET or HEAD gets 405;
 *  - responses written as the client reads them (output capped per connection; a client
 *    that reads nothing for the deadline is closed).
 * `listen = unix:PATH` serves the same on a Unix socket (mode 0600) for hosts where the
 * sizes and names of every process should not be open to every local user over TCP. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>

#include "ctld.h"
#include "guard.h"
#include "http.h"
#include "log.h"

#define HEAD_MAX 8192 /* request line and headers */

struct hconn {
	TAILQ_ENTRY(hconn) link;
	struct ctld *d;
	struct bufferevent *bev;
	struct event *deadline;
	char peer[64];
	bool answered;         /* a response is being written: close once it is out */
	struct scrape *scrape; /* the body still being produced (metrics.c) */
};
TAILQ_HEAD(hconn_list, hconn);

static struct {
	struct evconnlistener *l;
	struct accept_guard guard;
	struct hconn_list conns;
	int n;
	char unix_path[108];
	ino_t unix_ino;
	char hosts[16][160]; /* allowed Host values (without port) */
	int nhosts;
	struct ratelog refused_log;
} h;

static void hconn_free(struct hconn *c)
{
	if (c->scrape)
		metrics_cancel(c->scrape);
	TAILQ_REMOVE(&h.conns, c, link);
	h.n--;
	event_free(c->deadline);
	guard_free_bev(c->bev);
	free(c);
}

static void arm_deadline(struct hconn *c);

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct hconn *c = arg;
	/* a response still being produced is our time, not the client's: close only a client
	 * that lets its output pile up (it reads nothing) */
	if (c->scrape && evbuffer_get_length(bufferevent_get_output(c->bev)) < (1u << 20)) {
		arm_deadline(c);
		return;
	}
	c->d->st.http_timeouts++;
	hconn_free(c);
}

static void arm_deadline(struct hconn *c)
{
	int ms = c->d->cfg.http_request_timeout_ms;
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
	evtimer_add(c->deadline, &tv);
}

/* Start a response: status line and headers; the body follows in the output buffer. */
static void respond_head(struct hconn *c, int code, const char *reason, const char *ctype,
                         long length, const char *extra)
{
	struct evbuffer *out = bufferevent_get_output(c->bev);
	bool own = extra && strstr(extra, "Cache-Control:");
	evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n%sConnection: close\r\n%s",
	                    code, reason, ctype,
	                    own ? ""
	                        : "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n",
	                    extra ? extra : "");
	if (length >= 0)
		evbuffer_add_printf(out, "Content-Length: %ld\r\n", length);
	evbuffer_add(out, "\r\n", 2);
	c->answered = true;
	bufferevent_disable(c->bev, EV_READ);
	/* the response must be read within the deadline too */
	arm_deadline(c);
}

static void respond_text(struct hconn *c, int code, const char *reason, const char *body,
                         const char *extra)
{
	respond_head(c, code, reason, "text/plain; charset=utf-8", (long)strlen(body), extra);
	evbuffer_add(bufferevent_get_output(c->bev), body, strlen(body));
}

/* host[:port] (or [v6]:port) against the allowed names; the port is not compared. */
static bool host_allowed(const char *v)
{
	char host[160];
	size_t n = strlen(v);
	if (n == 0 || n >= sizeof(host))
		return false;
	memcpy(host, v, n + 1);
	if (host[0] == '[') {
		char *e = strchr(host, ']');
		if (!e)
			return false;
		*e = 0;
		memmove(host, host + 1, strlen(host + 1) + 1);
	} else {
		char *colon = strchr(host, ':');
		if (colon)
			*colon = 0;
	}
	for (char *p = host; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	if (host[strlen(host) - 1] == '.') /* "localhost." */
		host[strlen(host) - 1] = 0;
	for (int i = 0; i < h.nhosts; i++)
		if (!strcmp(host, h.hosts[i]))
			return true;
	return false;
}

void http_reply(struct http_req *r, int code, const char *reason, const char *ctype,
                struct evbuffer *body, const char *extra)
{
	respond_head(r->c, code, reason, ctype, body ? (long)evbuffer_get_length(body) : 0, extra);
	if (body && !r->head)
		evbuffer_add_buffer(bufferevent_get_output(r->c->bev), body);
}

static void on_scrape_done(void *arg, bool ok)
{
	struct hconn *c = arg;
	c->scrape = NULL;
	bufferevent_setwatermark(c->bev, EV_WRITE, 0, 0);
	if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
		hconn_free(c);
}

static void handle(struct hconn *c, char *head)
{
	struct ctld *d = c->d;
	/* request line */
	char *eol = strstr(head, "\r\n");
	*eol = 0;
	char *method = head, *sp1 = strchr(method, ' '), *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
	if (!sp1 || !sp2 || strncmp(sp2 + 1, "HTTP/1.", 7)) {
		respond_text(c, 400, "Bad Request", "bad request line\n", NULL);
		return;
	}
	*sp1 = *sp2 = 0;
	char *target = sp1 + 1;
	bool http10 = !strcmp(sp2 + 1, "HTTP/1.0");
	/* headers: Host, and whether a body was announced */
	const char *hostv = NULL;
	bool body = false;
	for (char *line = eol + 2; *line;) {
		char *e = strstr(line, "\r\n");
		if (!e)
			break;
		*e = 0;
		char *colon = strchr(line, ':');
		if (colon) {
			*colon = 0;
			char *v = colon + 1;
			while (*v == ' ' || *v == '\t')
				v++;
			size_t vl = strlen(v);
			while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
				v[--vl] = 0;
			if (!strcasecmp(line, "Host")) {
				if (hostv) {
					respond_text(c, 400, "Bad Request", "two Host headers\n",
					             NULL);
					return;
				}
				hostv = v;
			} else if ((!strcasecmp(line, "Content-Length") && strcmp(v, "0")) ||
			           !strcasecmp(line, "Transfer-Encoding")) {
				body = true;
			}
		}
		line = e + 2;
	}
	if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
		d->st.http_refused++;
		respond_text(c, 405, "Method Not Allowed", "only GET and HEAD\n",
		             "Allow: GET, HEAD\r\n");
		return;
	}
	if (body) {
		respond_text(c, 400, "Bad Request", "no request body is accepted\n", NULL);
		return;
	}
	if (!h.unix_path[0] && ((!hostv && !http10) || (hostv && !host_allowed(hostv)))) {
		d->st.http_refused++;
		uint64_t held;
		if (ratelog_allow(&h.refused_log, 10000000000ull, &held))
			log_warn("http: refusing a request from %s for Host '%.100s' (not the "
			         "listen "
			         "address or a localhost name; %llu more since the last such line)",
			         c->peer, hostv ? hostv : "(none)", (unsigned long long)held);
		respond_text(c, 403, "Forbidden",
		             "host not allowed (a request must name the daemon's listen address "
		             "or localhost; see http_allowed_hosts)\n",
		             NULL);
		return;
	}
	char *q = strchr(target, '?');
	if (q)
		*q++ = 0;
	bool head_only = !strcmp(method, "HEAD");
	/* the dashboard: the page, its assets, /api/history and /api/events */
	struct http_req req = {.c = c, .query = q, .head = head_only};
	if (dashboard_http(d, &req, target))
		return;
	bool json = !strcmp(target, "/api/processes");
	if (json || !strcmp(target, "/metrics")) {
		const char *ct =
		        json ? "application/json" : "text/plain; version=0.0.4; charset=utf-8";
		if (head_only) {
			respond_head(c, 200, "OK", ct, -1, NULL);
			return;
		}
		/* produced in slices as the client reads (no length known ahead: it ends at close) */
		c->scrape =
		        metrics_start(d, json, bufferevent_get_output(c->bev), on_scrape_done, c);
		if (!c->scrape) {
			respond_text(c, 503, "Service Unavailable", "too many scrapes at once\n",
			             "Retry-After: 1\r\n");
			return;
		}
		respond_head(c, 200, "OK", ct, -1, NULL);
		bufferevent_setwatermark(c->bev, EV_WRITE, 256u << 10, 0);
		return;
	}
	struct evbuffer *body_buf = evbuffer_new();
	const char *ctype = NULL;
	int code = body_buf ? metrics_serve(d, target, body_buf, &ctype) : 500;
	if (code == 200) {
		respond_head(c, 200, "OK", ctype, (long)evbuffer_get_length(body_buf), NULL);
		if (!head_only)
			evbuffer_add_buffer(bufferevent_get_output(c->bev), body_buf);
	} else if (code == 404) {
		respond_text(c, 404, "Not Found", "not found\n", NULL);
	} else {
		respond_text(c, 500, "Internal Server Error", "out of memory\n", NULL);
	}
	if (body_buf)
		evbuffer_free(body_buf);
}

/* Answer the request if all of it is in the input buffer. -1 when c was freed. */
static int take_request(struct hconn *c)
{
	if (c->answered)
		return 0;
	struct evbuffer *in = bufferevent_get_input(c->bev);
	struct evbuffer_ptr end = evbuffer_search(in, "\r\n\r\n", 4, NULL);
	if (end.pos < 0) {
		if (evbuffer_get_length(in) >= HEAD_MAX)
			respond_text(c, 431, "Request Header Fields Too Large",
			             "request headers too large\n", NULL);
		return 0; /* the deadline keeps running: the whole request must come in time */
	}
	size_t n = (size_t)end.pos + 4;
	if (n > HEAD_MAX) {
		respond_text(c, 431, "Request Header Fields Too Large",
		             "request headers too large\n", NULL);
		return 0;
	}
	char *head = malloc(n + 1);
	if (!head) {
		hconn_free(c);
		return -1;
	}
	evbuffer_remove(in, head, n);
	head[n] = 0;
	for (size_t i = 0; i < n; i++)
		if (head[i] == 0) {
			free(head);
			respond_text(c, 400, "Bad Request", "NUL in the request\n", NULL);
			return 0;
		}
	c->d->st.http_requests++;
	handle(c, head);
	free(head);
	return 0;
}

static void on_read(struct bufferevent *bev, void *arg)
{
	take_request(arg);
}

/* Before a connection is dropped as slow: read what its socket holds (non-blocking), so a
 * request that came in whole but was not read yet (the loop was still accepting others) is
 * answered instead. True when c was answered or freed. */
static bool take_pending(struct hconn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->bev);
	size_t have = evbuffer_get_length(in);
	if (have < HEAD_MAX) {
		/* the bufferevent keeps its input's end frozen to all but its own reads */
		evbuffer_unfreeze(in, 0);
		int r = evbuffer_read(in, bufferevent_getfd(c->bev), (int)(HEAD_MAX - have));
		evbuffer_freeze(in, 0);
		if (r <= 0)
			return false; /* nothing more (or the client is gone): it is what it was */
	}
	return take_request(c) < 0 || c->answered;
}

static void on_write(struct bufferevent *bev, void *arg)
{
	struct hconn *c = arg;
	if (c->scrape) {
		/* the client reads: produce more, and give it the deadline again */
		arm_deadline(c);
		metrics_resume(c->scrape);
		return;
	}
	if (c->answered && evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		hconn_free(c);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
	hconn_free(arg);
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen,
                      void *arg)
{
	struct ctld *d = arg;
	guard_accepted(&h.guard);
	while (h.n >= d->cfg.http_max_connections) {
		/* make room by dropping the oldest connection that has not even sent its
		 * request: a real client sends it at once, a slowloris never finishes, so the
		 * slow ones go and /healthz and scrapes still get in. One whose request waits
		 * in its socket (accepted in the same batch as many slow ones, not read yet) is
		 * answered instead, and the next oldest is looked at. */
		struct hconn *old;
		TAILQ_FOREACH(old, &h.conns, link)
		if (!old->answered)
			break;
		if (!old)
			break;
		if (take_pending(old))
			continue;
		d->st.http_timeouts++;
		hconn_free(old);
	}
	if (h.n >= d->cfg.http_max_connections) {
		static const char busy[] =
		        "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n"
		        "Content-Length: 0\r\n\r\n";
		ssize_t w = send(fd, busy, sizeof(busy) - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
		(void)w;
		close(fd);
		d->st.http_refused++;
		uint64_t held;
		if (ratelog_allow(&h.refused_log, 10000000000ull, &held))
			log_warn("http: refusing a connection: %d open (http_max_connections; %llu "
			         "more since the last such line)",
			         h.n, (unsigned long long)held);
		return;
	}
	struct hconn *c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return;
	}
	c->d = d;
	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)sa)->sin_addr, c->peer, sizeof(c->peer));
	else if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)sa)->sin6_addr, c->peer,
		          sizeof(c->peer));
	else
		snprintf(c->peer, sizeof(c->peer), "unix socket");
	evutil_make_socket_nonblocking(fd);
	c->bev = bufferevent_socket_new(d->base, fd, BEV_OPT_CLOSE_ON_FREE);
	c->deadline = evtimer_new(d->base, on_deadline, c);
	if (!c->bev || !c->deadline) {
		if (c->bev)
			bufferevent_free(c->bev);
		else
			close(fd);
		if (c->deadline)
			event_free(c->deadline);
		free(c);
		return;
	}
	TAILQ_INSERT_TAIL(&h.conns, c, link);
	h.n++;
	bufferevent_setwatermark(c->bev, EV_READ, 0, HEAD_MAX);
	bufferevent_setcb(c->bev, on_read, on_write, on_event, c);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	arm_deadline(c);
}

static void allow_host(const char *name)
{
	if (h.nhosts < (int)(sizeof(h.hosts) / sizeof(h.hosts[0])) && *name &&
	    strlen(name) < sizeof(h.hosts[0])) {
		snprintf(h.hosts[h.nhosts], sizeof(h.hosts[0]), "%s", name);
		for (char *p = h.hosts[h.nhosts]; *p; p++)
			*p = (char)tolower((unsigned char)*p);
		h.nhosts++;
	}
}

static int listen_unix(struct ctld *d, const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sa.sun_path) || path[0] != '/') {
		log_error("listen: unix:%s must be an absolute path of at most %zu bytes", path,
		          sizeof(sa.sun_path) - 1);
		return -1;
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct stat st;
	if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
		unlink(path); /* a socket left by a predecessor */
	mode_t old = umask(077);
	int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r < 0 || chmod(path, 0600) < 0 || listen(fd, 128) < 0 || stat(path, &st) < 0) {
		log_error("cannot listen on unix:%s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	snprintf(h.unix_path, sizeof(h.unix_path), "%s", path);
	h.unix_ino = st.st_ino;
	snprintf(d->http_addr, sizeof(d->http_addr), "unix:%s", path);
	return fd;
}

static int listen_tcp(struct ctld *d, const char *listen_spec)
{
	char host[128];
	snprintf(host, sizeof(host), "%s", listen_spec);
	char *colon = strrchr(host, ':');
	*colon = 0;
	char *end;
	long port = strtol(colon + 1, &end, 10);
	if (*end || port < 0 || port > 65535) {
		log_error("listen: bad port in %s", listen_spec);
		return -1;
	}
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = 0;
	}
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
	                         .ai_socktype = SOCK_STREAM,
	                         .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *ai = NULL;
	char portstr[16];
	snprintf(portstr, sizeof(portstr), "%ld", port);
	int gai = getaddrinfo(host[0] ? host : NULL, portstr, &hints, &ai);
	if (gai) {
		log_error("listen: %s: %s", listen_spec, gai_strerror(gai));
		return -1;
	}
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd >= 0)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 128) < 0) {
		log_error("cannot listen on %s: %s", listen_spec, strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return -1;
	}
	freeaddrinfo(ai);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char ip[INET6_ADDRSTRLEN] = "?";
	int bport = 0;
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
		if (ss.ss_family == AF_INET) {
			struct sockaddr_in *in = (struct sockaddr_in *)&ss;
			inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
			bport = ntohs(in->sin_port);
		} else if (ss.ss_family == AF_INET6) {
			struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
			inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
			bport = ntohs(in6->sin6_port);
		}
	}
	snprintf(d->http_addr, sizeof(d->http_addr), ss.ss_family == AF_INET6 ? "[%s]:%d" : "%s:%d",
	         ip, bport);
	/* Host values that name this daemon: its address, localhost, and the configured */
	allow_host(ip);
	allow_host(host);
	allow_host("localhost");
	allow_host("127.0.0.1");
	allow_host("::1");
	return fd;
}

int http_init(struct ctld *d)
{
	TAILQ_INIT(&h.conns);
	h.nhosts = 0;
	d->http_addr[0] = 0;
	if (!strcmp(d->cfg.listen, "off"))
		return 0;
	int fd = !strncmp(d->cfg.listen, "unix:", 5) ? listen_unix(d, d->cfg.listen + 5)
	                                             : listen_tcp(d, d->cfg.listen);
	if (fd < 0)
		return -1;
	/* http_allowed_hosts: comma- or space-separated names */
	char list[sizeof(d->cfg.http_allowed_hosts)];
	snprintf(list, sizeof(list), "%s", d->cfg.http_allowed_hosts);
	for (char *save = NULL, *t = strtok_r(list, ", ", &save); t;
	     t = strtok_r(NULL, ", ", &save))
		allow_host(t);
	h.l = evconnlistener_new(d->base, on_accept, d,
	                         LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, fd);
	if (!h.l || guard_init(&h.guard, d->base, h.l, "http")) {
		if (!h.l)
			close(fd);
		return -1;
	}
	log_info("http on %s (/metrics, /healthz, /api/processes, /)", d->http_addr);
	return 0;
}

void http_shutdown(struct ctld *d)
{
	struct hconn *c;
	while ((c = TAILQ_FIRST(&h.conns)))
		hconn_free(c);
	guard_free(&h.guard);
	if (h.l)
		evconnlistener_free(h.l);
	h.l = NULL;
	struct stat st;
	if (h.unix_path[0] && stat(h.unix_path, &st) == 0 && st.st_ino == h.unix_ino)
		unlink(h.unix_path);
	h.unix_path[0] = 0;
}

int http_connections(void)
{
	return h.n;
}
