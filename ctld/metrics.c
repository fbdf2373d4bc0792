/* metrics.c — HTTP on the daemon's loop (evhttp), loopback by default, GET/HEAD only:
 * /metrics (Prometheus text format 0.0.4; families, names and HELP generated from the
 * segment's X-macro lists; HELP and TYPE once per family), /healthz, /api/processes
 * (JSON) and, through dashboard.c, / (the page), /api/history and /api/events. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/http.h>

#include "ctld.h"
#include "log.h"
#include "units.h"

#define FAMILY(buf, name, type, help) \
	evbuffer_add_printf(buf, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type)

/* exe is printable ASCII already (segment.c); escape what the format requires. */
static void label_value(char *dst, size_t cap, const char *src)
{
	size_t o = 0;
	for (; *src && o + 3 < cap; src++) {
		if (*src == '\\' || *src == '"') {
			dst[o++] = '\\';
			dst[o++] = *src;
		} else {
			dst[o++] = *src;
		}
	}
	dst[o] = 0;
}

struct scrape {
	struct proc_snap *snaps;
	char (*exe)[2 * LA_EXE_MAX];
	struct la_shm_class **cls; /* per snapshot, when classes are exported */
	uint32_t *ncls;
	int n;
};

static void scrape_collect(struct ctld *d, struct scrape *s, bool arenas, bool classes)
{
	s->n = 0;
	s->snaps = calloc((size_t)d->nprocs + 1, sizeof(*s->snaps));
	s->exe = calloc((size_t)d->nprocs + 1, sizeof(*s->exe));
	s->cls = classes ? calloc((size_t)d->nprocs + 1, sizeof(*s->cls)) : NULL;
	s->ncls = classes ? calloc((size_t)d->nprocs + 1, sizeof(*s->ncls)) : NULL;
	if (!s->snaps || !s->exe)
		return;
	struct proc *p;
	TAILQ_FOREACH(p, &d->procs, link)
	{
		if (s->n >= d->nprocs)
			break;
		if (!proc_snapshot(d, p, &s->snaps[s->n], arenas))
			continue;
		label_value(s->exe[s->n], sizeof(s->exe[0]), proc_exe(p));
		uint32_t nc = p->seg.hdr.class_count;
		if (s->cls && s->ncls && nc && (s->cls[s->n] = calloc(nc, sizeof(**s->cls))) &&
		    seg_read_classes(&p->seg, s->cls[s->n], nc, &s->ncls[s->n]))
			s->ncls[s->n] = 0;
		s->n++;
	}
}

static void scrape_free(struct scrape *s)
{
	for (int i = 0; s->snaps && i < s->n; i++) {
		proc_snap_free(&s->snaps[i]);
		if (s->cls)
			free(s->cls[i]);
	}
	free(s->snaps);
	free(s->exe);
	free(s->cls);
	free(s->ncls);
}

static void write_metrics(struct ctld *d, struct evbuffer *b)
{
	struct scrape s;
	scrape_collect(d, &s, d->cfg.metrics_arenas, d->cfg.metrics_classes);
	char name[128];
#define MET_X_TOTAL(cname, kind, unit, help)                                                       \
	snprintf(name, sizeof(name), "liballoc_%s%s", #cname, kind == LA_COUNTER ? "_total" : ""); \
	FAMILY(b, name, kind == LA_COUNTER ? "counter" : "gauge", help " (process total)");        \
	for (int i = 0; i < s.n; i++)                                                              \
		evbuffer_add_printf(b, "%s{pid=\"%d\",exe=\"%s\"} %llu\n", name,                   \
		                    s.snaps[i].p->seg.hdr.pid, s.exe[i],                           \
		                    (unsigned long long)s.snaps[i].total.cname);
	LA_COUNTERS(MET_X_TOTAL)
#undef MET_X_TOTAL
	if (d->cfg.metrics_arenas) {
#define MET_X_ARENA(cname, kind, unit, help)                                                    \
	snprintf(name, sizeof(name), "liballoc_arena_%s%s", #cname,                             \
	         kind == LA_COUNTER ? "_total" : "");                                           \
	FAMILY(b, name, kind == LA_COUNTER ? "counter" : "gauge", help " (per arena)");         \
	for (int i = 0; i < s.n; i++)                                                           \
		for (uint32_t a = 0; a < s.snaps[i].narenas; a++)                               \
			evbuffer_add_printf(b, "%s{pid=\"%d\",exe=\"%s\",arena=\"%u\"} %llu\n", \
			                    name, s.snaps[i].p->seg.hdr.pid, s.exe[i],          \
			                    s.snaps[i].arenas[a].index,                         \
			                    (unsigned long long)s.snaps[i].arenas[a].c.cname);
		LA_COUNTERS(MET_X_ARENA)
#undef MET_X_ARENA
	}
	if (s.cls && s.ncls) {
#define MET_X_CLASS(cname, kind, unit, help)                                                     \
	snprintf(name, sizeof(name), "liballoc_class_%s%s", #cname,                              \
	         kind == LA_COUNTER ? "_total" : "");                                            \
	FAMILY(b, name, kind == LA_COUNTER ? "counter" : "gauge", help " (per size class)");     \
	for (int i = 0; i < s.n; i++)                                                            \
		for (uint32_t k = 0; s.cls[i] && k < s.ncls[i]; k++)                             \
			evbuffer_add_printf(b, "%s{pid=\"%d\",exe=\"%s\",size=\"%llu\"} %llu\n", \
			                    name, s.snaps[i].p->seg.hdr.pid, s.exe[i],           \
			                    (unsigned long long)s.cls[i][k].size,                \
			                    (unsigned long long)s.cls[i][k].s.cname);
		LA_CLASS_STATS(MET_X_CLASS)
#undef MET_X_CLASS
	}
	FAMILY(b, "liballoc_tunable", "gauge", "Effective value of a tunable");
	for (int i = 0; i < s.n; i++)
		for (uint32_t t = 0; t < s.snaps[i].ntun; t++)
			evbuffer_add_printf(
			        b, "liballoc_tunable{pid=\"%d\",exe=\"%s\",name=\"%s\"} %lld\n",
			        s.snaps[i].p->seg.hdr.pid, s.exe[i], tunable_table[t].name,
			        (long long)s.snaps[i].tun[t].value);
	FAMILY(b, "liballoc_process_rss_bytes", "gauge", "Resident set size of the process");
	for (int i = 0; i < s.n; i++)
		evbuffer_add_printf(b, "liballoc_process_rss_bytes{pid=\"%d\",exe=\"%s\"} %llu\n",
		                    s.snaps[i].p->seg.hdr.pid, s.exe[i],
		                    (unsigned long long)s.snaps[i].rss_bytes);
	FAMILY(b, "liballoc_process_threads", "gauge", "Threads using the allocator");
	for (int i = 0; i < s.n; i++)
		evbuffer_add_printf(b, "liballoc_process_threads{pid=\"%d\",exe=\"%s\"} %llu\n",
		                    s.snaps[i].p->seg.hdr.pid, s.exe[i],
		                    (unsigned long long)s.snaps[i].p->seg.hdr.threads);
	FAMILY(b, "liballoc_process_arenas", "gauge", "Arenas in use");
	for (int i = 0; i < s.n; i++)
		evbuffer_add_printf(b, "liballoc_process_arenas{pid=\"%d\",exe=\"%s\"} %u\n",
		                    s.snaps[i].p->seg.hdr.pid, s.exe[i],
		                    s.snaps[i].p->seg.hdr.arena_count);
	FAMILY(b, "liballoc_process_control_running", "gauge",
	       "1 if the process's control thread runs (commands are answered)");
	for (int i = 0; i < s.n; i++)
		evbuffer_add_printf(b,
		                    "liballoc_process_control_running{pid=\"%d\",exe=\"%s\"} %d\n",
		                    s.snaps[i].p->seg.hdr.pid, s.exe[i],
		                    s.snaps[i].p->seg.hdr.control_state == LA_CONTROL_RUNNING);
	/* the daemon itself */
	FAMILY(b, "liballoc_ctld_processes", "gauge", "Processes with a valid segment");
	evbuffer_add_printf(b, "liballoc_ctld_processes %d\n", d->nprocs);
	const struct {
		const char *name, *help;
		uint64_t v;
	} own[] = {
	        {"liballoc_ctld_segments_rejected_total", "Segment files refused as invalid",
	         d->st.segments_rejected},
	        {"liballoc_ctld_segments_stale_removed_total", "Stale segment files removed",
	         d->st.segments_stale_removed},
	        {"liballoc_ctld_requests_total", "Control requests received", d->st.requests},
	        {"liballoc_ctld_requests_denied_total", "Control requests refused for permission",
	         d->st.requests_denied},
	        {"liballoc_ctld_requests_malformed_total", "Malformed control requests",
	         d->st.requests_malformed},
	        {"liballoc_ctld_commands_total", "Mailbox commands sent", d->st.commands},
	        {"liballoc_ctld_command_timeouts_total", "Mailbox commands that timed out",
	         d->st.command_timeouts},
	        {"liballoc_ctld_scrapes_total", "Scrapes of /metrics", d->st.scrapes},
	};
	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++) {
		FAMILY(b, own[i].name, "counter", own[i].help);
		evbuffer_add_printf(b, "%s %llu\n", own[i].name, (unsigned long long)own[i].v);
	}
	audit_write_metrics(&d->audit, b);
	timeline_write_metrics(d, b);
	scrape_free(&s);
}

static void json_string(struct evbuffer *b, const char *s)
{
	evbuffer_add(b, "\"", 1);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			evbuffer_add_printf(b, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			evbuffer_add_printf(b, "\\u%04x", *s);
		else
			evbuffer_add(b, s, 1);
	}
	evbuffer_add(b, "\"", 1);
}

static void write_processes_json(struct ctld *d, struct evbuffer *b)
{
	struct scrape s;
	scrape_collect(d, &s, false, false);
	evbuffer_add_printf(b, "{\"processes\":[");
	for (int i = 0; i < s.n; i++) {
		const struct proc_snap *sn = &s.snaps[i];
		const struct la_shm_header *h = &sn->p->seg.hdr;
		evbuffer_add_printf(b, "%s{\"pid\":%d,\"uid\":%u,\"exe\":", i ? "," : "", h->pid,
		                    proc_uid(sn->p));
		json_string(b, proc_exe(sn->p));
		evbuffer_add_printf(b, ",\"name\":");
		json_string(b, proc_name(sn->p));
		evbuffer_add_printf(b, ",\"cmdline\":");
		json_string(b, sn->p->id.cmdline);
		evbuffer_add_printf(b, ",\"owner_uid\":%u", sn->p->seg.uid);
		evbuffer_add_printf(b,
		                    ",\"bytes_in_use\":%llu,\"bytes_mapped\":%llu,"
		                    "\"bytes_retained\":%llu,\"rss_bytes\":%llu,\"threads\":%llu,"
		                    "\"arenas\":%u,\"control\":\"%s\"}",
		                    (unsigned long long)sn->total.bytes_in_use,
		                    (unsigned long long)sn->total.bytes_mapped,
		                    (unsigned long long)sn->total.bytes_retained,
		                    (unsigned long long)sn->rss_bytes,
		                    (unsigned long long)sn->threads, h->arena_count,
		                    seg_control_name(h->control_state));
	}
	evbuffer_add_printf(b, "]}\n");
	scrape_free(&s);
}

static void on_request(struct evhttp_request *req, void *arg)
{
	struct ctld *d = arg;
	const char *uri = evhttp_request_get_uri(req);
	struct evhttp_uri *u = evhttp_uri_parse(uri);
	const char *path = u ? evhttp_uri_get_path(u) : NULL;
	struct evbuffer *b = evbuffer_new();
	struct evkeyvalq *hdrs = evhttp_request_get_output_headers(req);
	if (!b || !path) {
		evhttp_send_error(req, HTTP_BADREQUEST, NULL);
		goto out;
	}
	if (!strcmp(path, "/metrics")) {
		d->st.scrapes++;
		write_metrics(d, b);
		evhttp_add_header(hdrs, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
	} else if (!strcmp(path, "/healthz")) {
		evbuffer_add_printf(b, "ok %d processes\n", d->nprocs);
		evhttp_add_header(hdrs, "Content-Type", "text/plain; charset=utf-8");
	} else if (!strcmp(path, "/api/processes")) {
		write_processes_json(d, b);
		evhttp_add_header(hdrs, "Content-Type", "application/json");
	} else if (dashboard_http(d, req, path)) {
		goto out; /* the page and the history (dashboard.c) */
	} else {
		evhttp_send_error(req, HTTP_NOTFOUND, NULL);
		goto out;
	}
	evhttp_add_header(hdrs, "Cache-Control", "no-store");
	evhttp_send_reply(req, HTTP_OK, "OK", b);
out:
	if (b)
		evbuffer_free(b);
	if (u)
		evhttp_uri_free(u);
}

int metrics_init(struct ctld *d)
{
	d->http_addr[0] = 0;
	if (!strcmp(d->cfg.listen, "off"))
		return 0;
	char host[128];
	snprintf(host, sizeof(host), "%s", d->cfg.listen);
	char *colon = strrchr(host, ':');
	*colon = 0;
	char *end;
	long port = strtol(colon + 1, &end, 10);
	if (*end || port < 0 || port > 65535) {
		log_error("listen: bad port in %s", d->cfg.listen);
		return -1;
	}
	/* [::1]:port */
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = 0;
	}
	d->http = evhttp_new(d->base);
	if (!d->http)
		return -1;
	evhttp_set_allowed_methods(d->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD);
	evhttp_set_timeout(d->http, 10);
	evhttp_set_max_headers_size(d->http, 8192);
	evhttp_set_max_body_size(d->http, 0);
	evhttp_set_gencb(d->http, on_request, d);
	struct evhttp_bound_socket *bs =
	        evhttp_bind_socket_with_handle(d->http, host, (uint16_t)port);
	if (!bs) {
		log_error("cannot listen on %s: %s", d->cfg.listen, strerror(errno));
		return -1;
	}
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char ip[INET6_ADDRSTRLEN] = "?";
	int bport = 0;
	if (getsockname(evhttp_bound_socket_get_fd(bs), (struct sockaddr *)&ss, &sl) == 0) {
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
	log_info("http on %s (/metrics, /healthz, /api/processes, /api/history, /api/events, /)",
	         d->http_addr);
	return 0;
}

void metrics_shutdown(struct ctld *d)
{
	if (d->http)
		evhttp_free(d->http);
	d->http = NULL;
}
