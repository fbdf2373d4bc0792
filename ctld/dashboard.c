/* dashboard.c — the history over HTTP: the page (ctld/page/, embedded into the binary at
 * build time, served with a strict Content-Security-Policy: nothing but the daemon itself is
 * ever loaded), /api/history and /api/events as JSON written with jansson. Read-only: the
 * page offers no actions, and HTTP takes GET and HEAD only (metrics.c). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>

#include "ctld.h"
#include "http.h"
#include "jsontext.h"
#include "log.h"
#include "timeline.h"

#ifndef CTLD_PAGE_DIR
#error "CTLD_PAGE_DIR (the directory of the page's files) must be defined"
#endif

/* name[] .. name_end[]: the bytes of a file of the page, NUL-terminated. */
#define PAGE_ASSET(name, file)                                                            \
	__asm__(".pushsection .rodata\n.balign 16\n.globl " #name "\n" #name              \
	        ":\n.incbin \"" CTLD_PAGE_DIR "/" file "\"\n.globl " #name "_end\n" #name \
	        "_end:\n"                                                                 \
	        ".byte 0\n.popsection\n");                                                \
	extern const char name[], name##_end[]
PAGE_ASSET(ctld_page_html, "index.html");
PAGE_ASSET(ctld_page_js, "dashboard.js");
PAGE_ASSET(ctld_page_css, "dashboard.css");

static const struct asset {
	const char *path, *type;
	const char *start, *end;
} assets[] = {
        {"/", "text/html; charset=utf-8", ctld_page_html, ctld_page_html_end},
        {"/dashboard.js", "text/javascript; charset=utf-8", ctld_page_js, ctld_page_js_end},
        {"/dashboard.css", "text/css; charset=utf-8", ctld_page_css, ctld_page_css_end},
};

/* ---- JSON out --------------------------------------------------------------------------- */

static int to_evbuffer(const char *buf, size_t size, void *data)
{
	return evbuffer_add(data, buf, size);
}

/* Write v (stolen) to b: compact, keys in insertion order. */
static void put_json(struct evbuffer *b, json_t *v)
{
	if (v)
		json_dump_callback(v, to_evbuffer, b, JSON_COMPACT);
	json_decref(v);
}

static void send_json(struct http_req *req, struct evbuffer *b, int code, const char *why)
{
	http_reply(req, code, why, "application/json", b, NULL);
}

static void bad_request(struct http_req *req, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
static void bad_request(struct http_req *req, const char *fmt, ...)
{
	struct evbuffer *b = evbuffer_new();
	if (!b) {
		http_reply(req, 500, "Internal Server Error", "text/plain", NULL, NULL);
		return;
	}
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	put_json(b, json_pack("{s:o}", "error", json_text(msg))); /* it quotes the request */
	evbuffer_add(b, "\n", 1);
	send_json(req, b, HTTP_BADREQUEST, "Bad Request");
	evbuffer_free(b);
}

static json_t *daemon_json(struct ctld *d)
{
	struct timeline *tl = d->tl;
	return json_pack("{s:o,s:s,s:i,s:I,s:I,s:i,s:I,s:i,s:i,s:I,s:I,s:i,s:i,s:I,s:I}", "host",
	                 json_text(tl->host), "version", CTLD_VERSION, "pid", (int)getpid(),
	                 "started_ms", (json_int_t)tl->started_ms, "now_ms",
	                 (json_int_t)timeline_now_ms(), "sample_ms", (int)tl->h.sample_ms,
	                 "coarse_ms", (json_int_t)history_period_ms(&tl->h, true), "fine_slots",
	                 (int)HIST_FINE_SLOTS, "coarse_slots", (int)HIST_COARSE_SLOTS,
	                 "history_bytes", (json_int_t)tl->h.bytes, "history_max_bytes",
	                 (json_int_t)tl->h.max_bytes, "processes", d->nprocs, "events_kept",
	                 (int)tl->h.ev_len, "samples_taken", (json_int_t)tl->sampled, "sample_ns",
	                 (json_int_t)tl->sample_ns);
}

/* ---- query parameters -------------------------------------------------------------------- */

struct hq {
	int32_t pids[64];
	int npids;
	int64_t since_ms, after_seq;
	const char *res; /* NULL (auto), "fine", "coarse" */
	uint32_t points;
	bool samples;
};

static bool parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

/* false after answering 400 */
static bool parse_query(struct http_req *req, struct hq *q)
{
	memset(q, 0, sizeof(*q));
	q->samples = true;
	const char *qs = req->query;
	struct evkeyvalq kv;
	TAILQ_INIT(&kv);
	if (qs && evhttp_parse_query_str(qs, &kv) < 0) {
		bad_request(req, "malformed query string");
		return false;
	}
	bool ok = true;
	struct evkeyval *e;
	TAILQ_FOREACH(e, &kv, next)
	{
		int64_t v;
		if (!strcmp(e->key, "pid")) {
			char buf[512];
			snprintf(buf, sizeof(buf), "%s", e->value);
			for (char *save, *tok = strtok_r(buf, ",", &save); tok && ok;
			     tok = strtok_r(NULL, ",", &save)) {
				if (q->npids == 64 || !parse_i64(tok, 1, INT32_MAX, &v)) {
					bad_request(req,
					            "pid: '%.64s' is not a list of at most 64 "
					            "process ids",
					            e->value);
					ok = false;
				} else {
					q->pids[q->npids++] = (int32_t)v;
				}
			}
		} else if (!strcmp(e->key, "since")) {
			if (!parse_i64(e->value, INT64_MIN / 2, INT64_MAX / 2, &q->since_ms)) {
				bad_request(
				        req,
				        "since: '%.64s' is not a time in ms since the epoch (or "
				        "negative: ms before now)",
				        e->value);
				ok = false;
			} else if (q->since_ms < 0) {
				q->since_ms += timeline_now_ms();
			}
		} else if (!strcmp(e->key, "after")) {
			if (!parse_i64(e->value, 0, INT64_MAX, &q->after_seq)) {
				bad_request(req, "after: '%.64s' is not an event sequence number",
				            e->value);
				ok = false;
			}
		} else if (!strcmp(e->key, "res")) {
			if (!strcmp(e->value, "fine") || !strcmp(e->value, "coarse"))
				q->res = !strcmp(e->value, "fine") ? "fine" : "coarse";
			else if (strcmp(e->value, "auto")) {
				bad_request(req, "res: '%.32s' is not fine, coarse or auto",
				            e->value);
				ok = false;
			}
		} else if (!strcmp(e->key, "points")) {
			if (!parse_i64(e->value, 1, 100000, &v)) {
				bad_request(req, "points: '%.32s' is not a count from 1 to 100000",
				            e->value);
				ok = false;
			}
			q->points = (uint32_t)v;
		} else if (!strcmp(e->key, "samples")) {
			q->samples = strcmp(e->value, "0") != 0;
		} else {
			bad_request(req,
			            "unknown parameter '%.32s' (pid, since, after, res, points, "
			            "samples)",
			            e->key);
			ok = false;
		}
		if (!ok)
			break;
	}
	evhttp_clear_headers(&kv);
	return ok;
}

static bool pid_wanted(const struct hq *q, int32_t pid)
{
	if (!q->npids)
		return true;
	for (int i = 0; i < q->npids; i++)
		if (q->pids[i] == pid)
			return true;
	return false;
}

/* ---- /api/history ------------------------------------------------------------------------- */

struct series_json {
	json_t *arr[HIST_NFIG];
	uint32_t group;
	uint64_t sum[HIST_NFIG];
	uint32_t in_sum, seen;
	int64_t first_ms, last_ms;
};

static void series_emit(struct series_json *s)
{
	for (int f = 0; f < HIST_NFIG; f++)
		json_array_append_new(
		        s->arr[f], s->in_sum
		                           ? json_integer((json_int_t)((s->sum[f] + s->in_sum / 2) /
		                                                       s->in_sum * 1024))
		                           : json_null());
	memset(s->sum, 0, sizeof(s->sum));
	s->in_sum = s->seen = 0;
}

static void series_sample(void *arg, int64_t t_ms, const uint32_t *kib)
{
	struct series_json *s = arg;
	if (s->first_ms < 0)
		s->first_ms = t_ms;
	s->last_ms = t_ms;
	if (kib) {
		for (int f = 0; f < HIST_NFIG; f++)
			s->sum[f] += kib[f];
		s->in_sum++;
	}
	if (++s->seen == s->group)
		series_emit(s);
}

static void count_sample(void *arg, int64_t t_ms, const uint32_t *kib)
{
	(*(size_t *)arg)++;
}

static json_t *process_json(struct ctld *d, const struct hist_proc *p, const struct hq *q)
{
	const struct history *h = &d->tl->h;
	bool coarse = timeline_pick_coarse(h, p, q->res, q->since_ms);
	struct series_json s = {.group = 1, .first_ms = -1};
	size_t n = 0;
	if (q->samples)
		history_walk(h, p, coarse, q->since_ms, count_sample, &n);
	if (q->points && n > q->points)
		s.group = (uint32_t)((n + q->points - 1) / q->points);
	json_t *series = json_object();
	for (int f = 0; f < HIST_NFIG; f++) {
		s.arr[f] = json_array();
		json_object_set_new(series, hist_figure_name[f], s.arr[f]);
	}
	if (n)
		history_walk(h, p, coarse, q->since_ms, series_sample, &s);
	if (s.seen)
		series_emit(&s);
	json_t *o = json_pack(
	        "{s:i,s:o,s:o,s:i,s:I,s:o,s:o,s:b,s:b,s:I,s:o,s:I,s:I,s:o}", "pid", p->pid, "exe",
	        json_text(p->exe), "profile", p->profile[0] ? json_text(p->profile) : json_null(),
	        "uid", (int)p->uid, "started_ms", (json_int_t)p->started_ms, "exited_ms",
	        p->exited_ms ? json_integer(p->exited_ms) : json_null(), "exit_reason",
	        json_text(p->exit_reason), "live", !p->exited_ms, "truncated", p->truncated,
	        "res_ms", (json_int_t)(history_period_ms(h, coarse) * s.group), "t0",
	        s.first_ms >= 0 ? json_integer(s.first_ms) : json_null(), "fine_first_ms",
	        (json_int_t)history_first_ms(h, p, false), "coarse_first_ms",
	        (json_int_t)history_first_ms(h, p, true), "series", series);
	return o;
}

/* {"daemon":{...},"figures":[...],"labels":{...},"processes":[...]}: each process is
 * dumped on its own, so a large answer never exists as one tree. */
static void write_history(struct ctld *d, struct evbuffer *b, const struct hq *q)
{
	json_t *head = json_object(), *names = json_array(), *labels = json_object();
	for (int f = 0; f < HIST_NFIG; f++) {
		json_array_append_new(names, json_string(hist_figure_name[f]));
		json_object_set_new(labels, hist_figure_name[f], json_string(hist_figure_label[f]));
	}
	json_object_set_new(head, "daemon", daemon_json(d));
	json_object_set_new(head, "figures", names);
	json_object_set_new(head, "labels", labels);
	char *s = json_dumps(head, JSON_COMPACT);
	json_decref(head);
	if (!s)
		return;
	evbuffer_add(b, s, strlen(s) - 1); /* without the closing brace */
	free(s);
	evbuffer_add_printf(b, ",\"processes\":[");
	bool first = true;
	for (const struct hist_proc *p = d->tl->h.head; p; p = p->next) {
		if (!pid_wanted(q, p->pid))
			continue;
		if (q->npids && history_find(&d->tl->h, p->pid) != p)
			continue; /* a reused pid: the newest */
		if (!q->npids && q->since_ms > 0 && p->exited_ms && p->exited_ms < q->since_ms)
			continue; /* nothing new: it exited before the window */
		json_t *o = process_json(d, p, q);
		if (!o)
			continue;
		if (!first)
			evbuffer_add(b, ",", 1);
		first = false;
		put_json(b, o);
	}
	evbuffer_add_printf(b, "]}\n");
}

/* ---- /api/events -------------------------------------------------------------------------- */

struct events_out {
	const struct hq *q;
	json_t *arr;
};

static bool event_json(void *arg, const struct hist_event *e)
{
	struct events_out *o = arg;
	if (e->pid ? !pid_wanted(o->q, e->pid) : o->q->npids > 0)
		return true;
	json_array_append_new(
	        o->arr,
	        json_pack("{s:I,s:I,s:o,s:o,s:s,s:o,s:o,s:o,s:I,s:b}", "seq", (json_int_t)e->seq,
	                  "t", (json_int_t)e->t_ms, "pid",
	                  e->pid ? json_integer(e->pid) : json_null(), "exe", json_text(e->exe),
	                  "kind", hist_event_kind_name[e->kind < HIST_NEV ? e->kind : 0], "trigger",
	                  json_text(e->trigger), "who", json_text(e->who), "what",
	                  json_text(e->what), "bytes", (json_int_t)e->bytes, "ok", e->ok));
	return true;
}

static void write_events(struct ctld *d, struct evbuffer *b, const struct hq *q)
{
	struct events_out o = {.q = q, .arr = json_array()};
	history_events(&d->tl->h, (uint64_t)q->after_seq, q->since_ms, event_json, &o);
	json_t *v = json_object();
	json_object_set_new(v, "daemon", daemon_json(d));
	json_object_set_new(v, "last_seq", json_integer((json_int_t)d->tl->h.ev_seq));
	json_object_set_new(v, "events", o.arr);
	put_json(b, v);
	evbuffer_add(b, "\n", 1);
}

/* ---- routing ------------------------------------------------------------------------------ */

bool dashboard_http(struct ctld *d, struct http_req *req, const char *path)
{
	for (size_t i = 0; i < sizeof(assets) / sizeof(assets[0]); i++) {
		if (strcmp(path, assets[i].path))
			continue;
		struct evbuffer *b = evbuffer_new();
		if (!b) {
			http_reply(req, 500, "Internal Server Error", "text/plain", NULL, NULL);
			return true;
		}
		evbuffer_add_reference(b, assets[i].start,
		                       (size_t)(assets[i].end - assets[i].start), NULL, NULL);
		http_reply(req, 200, "OK", assets[i].type, b,
		           "Cache-Control: no-cache\r\nX-Content-Type-Options: nosniff\r\n"
		           "Referrer-Policy: no-referrer\r\nContent-Security-Policy: "
		           "default-src 'none'; script-src 'self'; style-src 'self'; "
		           "connect-src 'self'; img-src 'self' data:; base-uri 'none'; "
		           "form-action 'none'; frame-ancestors 'none'\r\n");
		evbuffer_free(b);
		return true;
	}
	bool hist = !strcmp(path, "/api/history"), events = !strcmp(path, "/api/events");
	if (!hist && !events)
		return false;
	if (!d->tl) {
		struct evbuffer *b = evbuffer_new();
		if (b) {
			put_json(
			        b,
			        json_pack("{s:s}", "error",
			                  "history is off in this daemon (history_sample_ms = 0)"));
			evbuffer_add(b, "\n", 1);
			send_json(req, b, 404, "Not Found");
			evbuffer_free(b);
		} else {
			http_reply(req, 500, "Internal Server Error", "text/plain", NULL, NULL);
		}
		return true;
	}
	struct hq q;
	if (!parse_query(req, &q))
		return true;
	struct evbuffer *b = evbuffer_new();
	if (!b) {
		http_reply(req, 500, "Internal Server Error", "text/plain", NULL, NULL);
		return true;
	}
	if (hist)
		write_history(d, b, &q);
	else
		write_events(d, b, &q);
	send_json(req, b, 200, "OK");
	evbuffer_free(b);
	return true;
}
