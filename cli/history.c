/* history.c — rendering of the daemon's history (history.h). */
#include "history.h"

#include <inttypes.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "jsontext.h"
#include "render.h"

#include "fmt.h"

static const char *const blocks[] = {"\u2581", "\u2582", "\u2583", "\u2584",
                                     "\u2585", "\u2586", "\u2587", "\u2588"};

char *history_sparkline(char *buf, size_t len, const uint64_t *v, size_t n)
{
	uint64_t lo = UINT64_MAX, hi = 0;
	for (size_t i = 0; i < n; i++) {
		if (v[i] == HISTORY_GAP)
			continue;
		lo = v[i] < lo ? v[i] : lo;
		hi = v[i] > hi ? v[i] : hi;
	}
	size_t o = 0;
	if (len)
		buf[0] = 0;
	for (size_t i = 0; i < n && o + 4 <= len; i++) {
		if (v[i] == HISTORY_GAP) {
			buf[o++] = ' ';
		} else {
			size_t k = hi > lo ? (size_t)((v[i] - lo) * 7 / (hi - lo)) : 0;
			memcpy(buf + o, blocks[k], 3);
			o += 3;
		}
		buf[o] = 0;
	}
	return buf;
}

const Ctl__FigureSeries *history_series(const Ctl__ProcessHistory *ph, const char *name)
{
	for (size_t i = 0; ph && i < ph->n_series; i++)
		if (!strcmp(ph->series[i]->name, name))
			return ph->series[i];
	return NULL;
}

const Ctl__ProcessHistory *history_of(const Ctl__HistoryReply *r, int32_t pid)
{
	for (size_t i = 0; r && i < r->n_processes; i++)
		if (r->processes[i]->pid == pid)
			return r->processes[i];
	return NULL;
}

static bool first_last(const Ctl__FigureSeries *s, uint64_t *first, uint64_t *last)
{
	bool any = false;
	for (size_t i = 0; s && i < s->n_kib; i++) {
		if (s->kib[i] == HISTORY_GAP)
			continue;
		if (!any)
			*first = s->kib[i];
		*last = s->kib[i];
		any = true;
	}
	return any;
}

char *history_trend(char *buf, size_t len, const Ctl__ProcessHistory *ph, bool raw)
{
	const Ctl__FigureSeries *s = history_series(ph, "rss");
	uint64_t first = 0, last = 0;
	if (!first_last(s, &first, &last)) {
		snprintf(buf, len, "-");
		return buf;
	}
	char spark[128], d[FMT_BUF];
	size_t n = s->n_kib > 16 ? 16 : s->n_kib;
	history_sparkline(spark, sizeof(spark), s->kib + (s->n_kib - n), n);
	uint64_t delta = last > first ? last - first : first - last;
	snprintf(buf, len, "%s %c%s", spark, last >= first ? '+' : '-',
	         fmt_size(d, sizeof(d), delta * 1024, raw));
	return buf;
}

static void clock_text(char *buf, size_t len, int64_t ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	localtime_r(&t, &tm);
	strftime(buf, len, "%H:%M:%S", &tm);
}

/* ---- JSON -------------------------------------------------------------------------------- */

static json_t *process_json(const Ctl__ProcessHistory *ph)
{
	json_t *series = json_object();
	for (size_t i = 0; i < ph->n_series; i++) {
		json_t *a = json_array();
		for (size_t k = 0; k < ph->series[i]->n_kib; k++) {
			uint64_t v = ph->series[i]->kib[k];
			json_array_append_new(a, v == HISTORY_GAP
			                                 ? json_null()
			                                 : json_integer((json_int_t)(v * 1024)));
		}
		json_object_set_new(series, ph->series[i]->name, a);
	}
	return json_pack("{s:i,s:o,s:o,s:i,s:I,s:o,s:o,s:I,s:o,s:b,s:o}", "pid", ph->pid, "exe",
	                 json_text(ph->exe), "profile",
	                 ph->profile ? json_text(ph->profile) : json_null(), "uid", (int)ph->uid,
	                 "started_ms", (json_int_t)(ph->has_started_ms ? ph->started_ms : 0),
	                 "exited_ms", ph->has_exited_ms ? json_integer(ph->exited_ms) : json_null(),
	                 "exit_reason", json_text(ph->exit_reason), "resolution_ms",
	                 (json_int_t)ph->resolution_ms, "first_ms",
	                 ph->has_first_ms ? json_integer(ph->first_ms) : json_null(), "truncated",
	                 ph->has_truncated && ph->truncated, "series", series);
}

static json_t *event_json(const Ctl__HistoryEvent *e)
{
	return json_pack("{s:I,s:I,s:o,s:o,s:o,s:o,s:o,s:o,s:I,s:b}", "seq", (json_int_t)e->seq,
	                 "t", (json_int_t)e->t_ms, "pid",
	                 e->has_pid ? json_integer(e->pid) : json_null(), "exe", json_text(e->exe),
	                 "kind", json_text(e->kind), "trigger", json_text(e->trigger), "who",
	                 json_text(e->who), "what", json_text(e->what), "bytes",
	                 (json_int_t)(e->has_bytes ? e->bytes : 0), "ok", !e->has_ok || e->ok);
}

static void history_json(FILE *f, const Ctl__HistoryReply *r)
{
	json_t *procs = json_array(), *events = json_array();
	for (size_t i = 0; i < r->n_processes; i++)
		json_array_append_new(procs, process_json(r->processes[i]));
	for (size_t i = 0; i < r->n_events; i++)
		json_array_append_new(events, event_json(r->events[i]));
	json_t *doc =
	        json_pack("{s:i,s:i,s:I,s:o,s:o}", "schema_version", ALLOCCTL_JSON_SCHEMA_VERSION,
	                  "sample_ms", (int)r->sample_ms, "now_ms", (json_int_t)r->now_ms,
	                  "processes", procs, "events", events);
	json_dumpf(doc, f, JSON_COMPACT);
	fputc('\n', f);
	json_decref(doc);
}

/* ---- human ------------------------------------------------------------------------------- */

static const char *const figure_label[][2] = {
        {"in_use", "in use"},
        {"cached", "cached"},
        {"fragmented", "fragmented"},
        {"free_resident", "free resident"},
        {"metadata", "metadata"},
        {"reclaimable", "reclaimable"},
        {"rss", "RSS"},
        {"non_alloc", "non-allocator RSS"},
};

static const char *label_of(const char *name)
{
	for (size_t i = 0; i < sizeof(figure_label) / sizeof(figure_label[0]); i++)
		if (!strcmp(figure_label[i][0], name))
			return figure_label[i][1];
	return name;
}

void render_history(FILE *f, const Ctl__HistoryReply *r, const struct render_opts *o)
{
	if (o->json) {
		history_json(f, r);
		return;
	}
	for (size_t i = 0; i < r->n_processes; i++) {
		const Ctl__ProcessHistory *ph = r->processes[i];
		size_t n = ph->n_series ? ph->series[0]->n_kib : 0;
		char a[32], b[32], span[FMT_BUF], per[FMT_BUF];
		fprintf(f, "%s%" PRId32 " (%s)", i ? "\n" : "", ph->pid, render_exe_name(ph->exe));
		if (ph->profile)
			fprintf(f, ", profile %s", ph->profile);
		if (ph->has_exited_ms) {
			clock_text(a, sizeof(a), ph->exited_ms);
			fprintf(f, ", exited %s (%s)", a, ph->exit_reason ? ph->exit_reason : "");
		}
		if (!n || !ph->has_first_ms) {
			fprintf(f, ": no samples in this window\n");
			continue;
		}
		int64_t last_ms = ph->first_ms + (int64_t)(n - 1) * ph->resolution_ms;
		clock_text(a, sizeof(a), ph->first_ms);
		clock_text(b, sizeof(b), last_ms);
		fprintf(f, ": %zu sample%s every %s, %s .. %s (%s)%s\n", n, n == 1 ? "" : "s",
		        fmt_ms(per, sizeof(per), ph->resolution_ms), a, b,
		        fmt_uptime(span, sizeof(span),
		                   (uint64_t)(last_ms - ph->first_ms + ph->resolution_ms) / 1000),
		        ph->has_truncated && ph->truncated ? " [window cut by history_max_bytes]"
		                                           : "");
		fprintf(f, "  %-18s %11s %11s %11s  %s\n", "FIGURE", "MIN", "MAX", "LAST",
		        "TREND (oldest to newest)");
		for (size_t s = 0; s < ph->n_series; s++) {
			const Ctl__FigureSeries *fs = ph->series[s];
			uint64_t lo = UINT64_MAX, hi = 0, last = HISTORY_GAP;
			for (size_t k = 0; k < fs->n_kib; k++) {
				if (fs->kib[k] == HISTORY_GAP)
					continue;
				lo = fs->kib[k] < lo ? fs->kib[k] : lo;
				hi = fs->kib[k] > hi ? fs->kib[k] : hi;
				last = fs->kib[k];
			}
			char x[FMT_BUF], y[FMT_BUF], z[FMT_BUF], spark[3 * 256 + 4];
			bool any = last != HISTORY_GAP;
			fprintf(f, "  %-18s %11s %11s %11s  %s\n", label_of(fs->name),
			        any ? fmt_size(x, sizeof(x), lo * 1024, o->raw) : "-",
			        any ? fmt_size(y, sizeof(y), hi * 1024, o->raw) : "-",
			        any ? fmt_size(z, sizeof(z), last * 1024, o->raw) : "-",
			        history_sparkline(spark, sizeof(spark), fs->kib,
			                          fs->n_kib > 256 ? 256 : fs->n_kib));
		}
	}
	if (r->n_events) {
		fprintf(f, "\nevents\n  %-8s %7s  %-8s %-20s %s\n", "TIME", "PID", "KIND", "WHO",
		        "WHAT");
		for (size_t i = 0; i < r->n_events; i++) {
			const Ctl__HistoryEvent *e = r->events[i];
			char t[32], who[160];
			clock_text(t, sizeof(t), e->t_ms);
			/* a policy run by pressure or time says so: "policy oom-guard (pressure)" */
			const char *w = e->who && *e->who ? e->who : "-", *tr = e->trigger;
			if (tr && *tr && strcmp(tr, "operator") && strncmp(w, tr, strlen(tr)))
				snprintf(who, sizeof(who), "%s (%s)", w, tr);
			else
				snprintf(who, sizeof(who), "%s", w);
			fprintf(f, "  %-8s %7" PRId32 "  %-8s %-20s %s%s\n", t,
			        e->has_pid ? e->pid : 0, e->kind, who, e->what ? e->what : "",
			        e->has_ok && !e->ok ? " [failed]" : "");
		}
	}
}
