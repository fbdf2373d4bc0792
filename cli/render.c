/* render.c — human and JSON renderings of daemon replies (render.h). Counter names and
 * units come from the LA_COUNTERS list, so a counter the daemon adds later still shows
 * (raw, under "other") without a change here. */
#include "render.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fmt.h"
#include "json.h"
#include "liballoc_shm.h"
#include "tunable.h"
#include "wire.h"

#ifndef ALLOCCTL_VERSION
#define ALLOCCTL_VERSION LA_VERSION
#endif

static const struct counter_unit {
	const char *name;
	bool bytes;
} counter_units[] = {
#define X_UNIT(name, kind, unit, scope, help) {#name, sizeof(unit) > 1},
        LA_COUNTERS(X_UNIT)
#undef X_UNIT
};

/* A counter block from a reply's counter list (names the daemon and we share). */
static void counters_of(Ctl__Counter *const *c, size_t n, struct la_counters *out)
{
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < n; i++) {
#define X_SET(cname, kind, unit, scope, help) \
	if (strcmp(c[i]->name, #cname) == 0)  \
		out->cname = c[i]->value;
		LA_COUNTERS(X_SET)
#undef X_SET
	}
}

static bool counter_is_bytes(const char *name)
{
	for (size_t i = 0; i < sizeof(counter_units) / sizeof(counter_units[0]); i++)
		if (strcmp(counter_units[i].name, name) == 0)
			return counter_units[i].bytes;
	size_t l = strlen(name);
	return l > 6 && strcmp(name + l - 6, "_bytes") == 0;
}

static const Ctl__Counter *counter_find(Ctl__Counter *const *c, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(c[i]->name, name) == 0)
			return c[i];
	return NULL;
}

static uint64_t counter_value(Ctl__Counter *const *c, size_t n, const char *name)
{
	const Ctl__Counter *k = counter_find(c, n, name);
	return k ? k->value : 0;
}

const char *render_exe_name(const char *exe)
{
	if (!exe || !*exe)
		return "?";
	const char *s = strrchr(exe, '/');
	return s && s[1] ? s + 1 : exe;
}

const char *render_proc_name(const Ctl__ProcessInfo *p)
{
	return p->name && *p->name ? p->name : render_exe_name(p->exe);
}

char *render_uid(char *buf, size_t n, const Ctl__ProcessInfo *p)
{
	if (p->has_owner_uid && p->owner_uid != p->uid)
		snprintf(buf, n, "%" PRIu32 "/%" PRIu32, p->uid, p->owner_uid);
	else
		snprintf(buf, n, "%" PRIu32, p->uid);
	return buf;
}

const char *render_code_name(int code)
{
	const ProtobufCEnumValue *v =
	        protobuf_c_enum_descriptor_get_value(&ctl__error_code__descriptor, code);
	return v ? v->name : "UNKNOWN";
}

static uint64_t uptime_s(const Ctl__ProcessInfo *p, const struct render_opts *o)
{
	return o->now_ns > p->start_time_ns ? (o->now_ns - p->start_time_ns) / 1000000000ULL : 0;
}

/* ---- ps ----------------------------------------------------------------------------- */

static int cmp_pid(const void *a, const void *b)
{
	const Ctl__ProcessInfo *x = *(Ctl__ProcessInfo *const *)a,
	                       *y = *(Ctl__ProcessInfo *const *)b;
	return (x->pid > y->pid) - (x->pid < y->pid);
}

#define MEM(p, field) ((p)->memory ? (p)->memory->field : 0)

static void memory_json(struct json *j, const Ctl__Memory *m)
{
	json_object_begin(j, "memory");
	if (m) {
#define X_JSON(name, help)         \
	if (m->has_##name##_bytes) \
		json_u64(j, #name "_bytes", m->name##_bytes);
		LA_MEMORY(X_JSON)
#undef X_JSON
		if (m->has_address_space_bytes)
			json_u64(j, "address_space_bytes", m->address_space_bytes);
		if (m->has_rss_bytes)
			json_u64(j, "rss_bytes", m->rss_bytes);
		if (m->has_non_allocator_rss_bytes)
			json_u64(j, "non_allocator_rss_bytes", m->non_allocator_rss_bytes);
	}
	json_object_end(j);
}

static void process_json(struct json *j, const char *key, const Ctl__ProcessInfo *p,
                         const struct render_opts *o)
{
	json_object_begin(j, key);
	json_i64(j, "pid", p->pid);
	json_i64(j, "ns_pid", p->has_ns_pid ? p->ns_pid : p->pid);
	json_u64(j, "pid_namespace", p->has_pid_namespace ? p->pid_namespace : 0);
	json_string(j, "cgroup", p->cgroup); /* null: unknown */
	json_string(j, "exe", p->exe);
	json_string(j, "name", render_proc_name(p));
	json_string(j, "cmdline", p->cmdline ? p->cmdline : "");
	json_u64(j, "uid", p->uid);
	json_u64(j, "owner_uid", p->has_owner_uid ? p->owner_uid : p->uid);
	json_u64(j, "start_time_ns", p->start_time_ns);
	json_u64(j, "uptime_s", uptime_s(p, o));
	json_u64(j, "arenas", p->arenas);
	json_u64(j, "threads", p->threads);
	json_u64(j, "allocator_threads", p->has_allocator_threads ? p->allocator_threads : 0);
	json_u64(j, "rss_bytes", p->has_rss_bytes ? p->rss_bytes : 0);
	memory_json(j, p->memory);
	json_array_begin(j, "foreign_allocators");
	for (size_t i = 0; i < p->n_foreign_allocators; i++)
		json_string(j, NULL, p->foreign_allocators[i]);
	json_array_end(j);
	json_string(j, "version", p->version ? p->version : "");
	json_string(j, "control", p->control ? p->control : "unknown");
	json_bool(j, "unreadable", p->has_unreadable && p->unreadable);
	json_u64(j, "unreadable_reads", p->has_unreadable_reads ? p->unreadable_reads : 0);
	json_string(j, "profile", p->profile); /* null: none */
	if (p->has_pressure_watch) {           /* its own pressure watch: only when it has one */
		json_bool(j, "pressure_watch", p->pressure_watch);
		json_u64(j, "pressure_events", p->pressure_events);
		json_u64(j, "pressure_released_bytes", p->pressure_released_bytes);
		if (p->has_pressure_response_ns)
			json_u64(j, "pressure_response_ns", p->pressure_response_ns);
	}
	json_object_end(j);
}

/* What an operator should know about a process, in words: its pid inside its container
 * (another pid namespace), other allocators it maps, a control thread that is not
 * running. "" when nothing. */
static const char *notes(const Ctl__ProcessInfo *p, char *buf, size_t n)
{
	size_t off = 0;
	buf[0] = 0;
	if (p->has_ns_pid && p->ns_pid != p->pid) {
		int w = snprintf(buf, n, "pid %" PRId32 " in its namespace", p->ns_pid);
		if (w > 0 && (size_t)w < n)
			off = (size_t)w;
	}
	for (size_t i = 0; i < p->n_foreign_allocators && off < n; i++) {
		int w = snprintf(buf + off, n - off, "%s%s",
		                 i     ? ", "
		                 : off ? "; also maps "
		                       : "also maps ",
		                 p->foreign_allocators[i]);
		if (w < 0)
			break;
		off += (size_t)w;
	}
	if (p->control && strcmp(p->control, "running") != 0 && off < n)
		snprintf(buf + off, n - off, "%scontrol %s", off ? "; " : "", p->control);
	return buf;
}

/* Characters (not bytes) of a UTF-8 string. */
static size_t text_width(const char *s)
{
	size_t w = 0;
	for (; s && *s; s++)
		w += ((unsigned char)*s & 0xc0) != 0x80;
	return w;
}

/* s, then spaces up to width characters. */
static void put_padded(FILE *f, const char *s, size_t width)
{
	fputs(s, f);
	for (size_t w = text_width(s); w < width; w++)
		fputc(' ', f);
}

/* printf's "%*s" and "%-*.*s" (widths in bytes, as printf counts them) into a row buffer
 * with room for them; each returns the end */
static char *cell_right(char *e, const char *s, size_t w)
{
	size_t l = strlen(s);
	for (; w > l; w--)
		*e++ = ' ';
	memcpy(e, s, l);
	return e + l;
}

static char *cell_left(char *e, const char *s, size_t w)
{
	size_t l = strnlen(s, w);
	memcpy(e, s, l);
	memset(e + l, ' ', w - l);
	return e + w;
}

void render_process_table(FILE *f, Ctl__ProcessInfo *const *procs, size_t n, size_t max_rows,
                          const struct render_opts *o)
{
	size_t rows = max_rows && max_rows < n ? max_rows : n;
	size_t xw = o->extra ? text_width(o->extra_title) : 0;
	for (size_t i = 0; o->extra && i < rows; i++)
		if (text_width(o->extra[i]) > xw)
			xw = text_width(o->extra[i]);
	char nb[128];
	/* NOTES is the last column, often empty: a row pads only what it has notes after (no
	 * trailing blanks) */
	size_t profile_w = 12;
	fprintf(f, "%8s %7s  %-16s %10s %10s %10s %10s %10s %10s %7s %8s", "PID", "UID", "NAME",
	        "RSS", "IN USE", "CACHED", "FREE RES", "RECLAIM", "OTHER RSS", "THREADS", "UPTIME");
	if (o->show_profile) {
		fputs("  ", f);
		put_padded(f, "PROFILE", profile_w);
	}
	if (o->extra) {
		fputs("  ", f);
		put_padded(f, o->extra_title ? o->extra_title : "", xw);
	}
	fputs("  NOTES\n", f);
	for (size_t i = 0; i < rows; i++) {
		const Ctl__ProcessInfo *p = procs[i];
		char r[FMT_BUF], a[FMT_BUF], c[FMT_BUF], fr[FMT_BUF], rc[FMT_BUF], ot[FMT_BUF],
		        u[FMT_BUF], uid[32];
		render_uid(uid, sizeof(uid), p);
		/* the cells of "%8d %7s  %-16.16s %10s x6 %7llu %8s", without a printf each */
		char row[160 + 8 * FMT_BUF], num[24], *e = row;
		snprintf(num, sizeof(num), "%" PRId32, p->pid);
		e = cell_right(e, num, 8);
		*e++ = ' ';
		e = cell_right(e, uid, 7);
		memcpy(e, "  ", 2);
		e = cell_left(e + 2, render_proc_name(p), 16);
		const char *cells[] = {
		        p->has_rss_bytes && p->rss_bytes
		                ? fmt_size(r, sizeof(r), p->rss_bytes, o->raw)
		                : "-",
		        p->unreadable ? "unreadable"
		                      : fmt_size(a, sizeof(a), MEM(p, in_use_bytes), o->raw),
		        fmt_size(c, sizeof(c), MEM(p, cached_bytes), o->raw),
		        fmt_size(fr, sizeof(fr), MEM(p, free_resident_bytes), o->raw),
		        fmt_size(rc, sizeof(rc), MEM(p, reclaimable_bytes), o->raw),
		        p->has_rss_bytes && p->rss_bytes
		                ? fmt_size(ot, sizeof(ot), MEM(p, non_allocator_rss_bytes), o->raw)
		                : "-"};
		for (size_t k = 0; k < sizeof(cells) / sizeof(*cells); k++) {
			*e++ = ' ';
			e = cell_right(e, cells[k], 10);
		}
		*e++ = ' ';
		e = cell_right(e, fmt_u64(num, sizeof(num), p->threads), 7);
		*e++ = ' ';
		e = cell_right(e, fmt_uptime(u, sizeof(u), uptime_s(p, o)), 8);
		fwrite(row, 1, (size_t)(e - row), f);
		notes(p, nb, sizeof(nb));
		bool more = o->extra || *nb;
		if (o->show_profile) {
			fputs("  ", f);
			put_padded(f, p->profile ? p->profile : "-", more ? profile_w : 0);
		}
		if (o->extra) {
			fputs("  ", f);
			put_padded(f, o->extra[i] ? o->extra[i] : "", *nb ? xw : 0);
		}
		if (*nb)
			fprintf(f, "  %s", nb);
		fputc('\n', f);
	}
}

void render_ps(FILE *f, Ctl__ProcessInfo *const *procs, size_t n, const struct render_opts *o)
{
	Ctl__ProcessInfo **sorted = NULL;
	if (n) {
		sorted = malloc(n * sizeof(*sorted));
		if (!sorted)
			return;
		memcpy(sorted, procs, n * sizeof(*sorted));
		qsort(sorted, n, sizeof(*sorted), cmp_pid);
	}
	if (o->json) {
		struct json j;
		json_document_begin(&j, f);
		json_array_begin(&j, "processes");
		for (size_t i = 0; i < n; i++)
			process_json(&j, NULL, sorted[i], o);
		json_array_end(&j);
		json_object_end(&j);
		json_finish(&j);
	} else if (n == 0) {
		fprintf(f, "no processes: the daemon sees no liballoc process you may read\n");
	} else {
		struct render_opts po = *o;
		po.show_profile = true;
		render_process_table(f, sorted, n, 0, &po);
	}
	free(sorted);
}

/* ---- tunables ----------------------------------------------------------------------- */

/* A reply tunable completed from the local table where the daemon left fields out. */
struct tunable_view {
	const char *name;
	const char *source; /* la_source name; NULL when the daemon did not say */
	int64_t value, min, max;
	int type;
	bool live, known_range;
};

static struct tunable_view tunable_view(const Ctl__Tunable *t)
{
	const struct tunable_info *info = tunable_find(t->name);
	struct tunable_view v = {.name = t->name, .value = t->value};
	int type = tunable_type_from_name(t->type);
	v.type = type >= 0 ? type : info ? info->type : LA_T_INT;
	/* a protocol-1 daemon says only whether a value was set */
	v.source = t->source                                    ? t->source
	           : t->has_explicitly_set && t->explicitly_set ? "set"
	           : t->has_explicitly_set                      ? "default"
	                                                        : NULL;
	v.live = t->has_live ? t->live : info ? info->live : true;
	v.known_range = (t->has_min && t->has_max) || info;
	v.min = t->has_min ? t->min : info ? info->min : 0;
	v.max = t->has_max ? t->max : info ? info->max : 0;
	return v;
}

/* "15m00s", "2 s": how long a hold has left */
static char *fmt_left(char *buf, size_t n, uint64_t ms)
{
	if (ms < 60000)
		return fmt_ms(buf, n, (int64_t)ms);
	return fmt_uptime(buf, n, (ms + 999) / 1000);
}

static void tunables_json(struct json *j, Ctl__Tunable *const *t, size_t n)
{
	json_object_begin(j, "tunables");
	for (size_t i = 0; i < n; i++) {
		struct tunable_view v = tunable_view(t[i]);
		json_object_begin(j, v.name);
		json_i64(j, "value", v.value);
		json_string(j, "source", v.source);
		json_string(j, "type", tunable_type_name(v.type));
		json_i64(j, "min", v.min);
		json_i64(j, "max", v.max);
		json_bool(j, "live", v.live);
		if (t[i]->has_expires_in_ms) { /* set for a limited time */
			json_u64(j, "expires_in_ms", t[i]->expires_in_ms);
			json_i64(j, "revert_value", t[i]->revert_value);
			json_string(j, "revert_source", t[i]->revert_source);
		}
		json_object_end(j);
	}
	json_object_end(j);
}

static void tunables_table(FILE *f, const char *indent, Ctl__Tunable *const *t, size_t n,
                           const struct render_opts *o)
{
	fprintf(f, "%s%-20s %12s  %-11s  %-26s %s\n", indent, "NAME", "VALUE", "SOURCE", "RANGE",
	        "LIVE");
	for (size_t i = 0; i < n; i++) {
		struct tunable_view v = tunable_view(t[i]);
		char val[FMT_BUF], range[2 * FMT_BUF + 16];
		if (v.known_range)
			tunable_format_range(range, sizeof(range), v.type, v.min, v.max, o->raw);
		else
			snprintf(range, sizeof(range), "?");
		char held[2 * FMT_BUF + 32] = "", rv[FMT_BUF], left[FMT_BUF];
		if (t[i]->has_expires_in_ms)
			snprintf(held, sizeof(held), "   held: back to %s%s%s%s in %s",
			         tunable_format(rv, sizeof(rv), v.type, t[i]->revert_value, o->raw),
			         t[i]->revert_source ? " (" : "",
			         t[i]->revert_source ? t[i]->revert_source : "",
			         t[i]->revert_source ? ")" : "",
			         fmt_left(left, sizeof(left), t[i]->expires_in_ms));
		fprintf(f, "%s%-20s %12s  %-11s  %-26s %s%s\n", indent, v.name,
		        tunable_format(val, sizeof(val), v.type, v.value, o->raw),
		        v.source ? v.source : "-", range, v.live ? "yes" : "no", held);
	}
}

/* ---- stats -------------------------------------------------------------------------- */

static const char *const group_memory[] = {"address_space_bytes",
                                           "heaps",
                                           "heaps_released",
                                           "direct_mappings",
                                           "direct_bytes",
                                           "direct_cache_bytes",
                                           "direct_cache_hits",
                                           "threshold_raises",
                                           NULL};
static const char *const group_syscalls[] = {"mmap", "munmap", "madvise", "mprotect", NULL};
static const char *const group_remote[] = {"remote_frees_queued", "remote_frees_drained", NULL};
static const char *const group_other[] = {
        "madvise_deferred", "cache_refills",     "cache_flushes",  "cache_flushes_deferred",
        "lock_contended",   "commands_executed", "released_bytes", NULL};

static const char *const group_burst[] = {"burst_prepared_bytes", "burst_hits", "burst_misses",
                                          NULL};

/* The counters only the memory figures show (LA_INPUT). */
static bool is_input(const char *name)
{
#define X_INPUT(cname, kind, unit, scope, help)            \
	if (kind == LA_INPUT && strcmp(name, #cname) == 0) \
		return true;
	LA_COUNTERS(X_INPUT)
#undef X_INPUT
	return false;
}

static bool in_group(const char *const *g, const char *name)
{
	for (; *g; g++)
		if (strcmp(*g, name) == 0)
			return true;
	return false;
}

static bool is_syscall_counter(const char *name)
{
	for (const char *const *k = group_syscalls; *k; k++) {
		size_t l = strlen(*k);
		if (strncmp(name, *k, l) == 0 &&
		    (strcmp(name + l, "_calls") == 0 || strcmp(name + l, "_bytes") == 0))
			return true;
	}
	return false;
}

static void counter_line(FILE *f, const char *name, uint64_t v, const struct render_opts *o)
{
	char b[FMT_BUF];
	fprintf(f, "  %-22s %14s\n", name,
	        counter_is_bytes(name) ? fmt_size(b, sizeof(b), v, o->raw)
	                               : fmt_u64(b, sizeof(b), v));
}

static void counter_group(FILE *f, const char *title, const char *const *g, Ctl__Counter *const *c,
                          size_t n, const struct render_opts *o)
{
	bool any = false; /* a library older than the group shows none of it */
	for (; *g; g++) {
		const Ctl__Counter *k = counter_find(c, n, *g);
		if (!k)
			continue;
		if (!any)
			fprintf(f, "\n%s\n", title);
		any = true;
		counter_line(f, k->name, k->value, o);
	}
}

static void counters_json(struct json *j, const char *key, Ctl__Counter *const *c, size_t n)
{
	json_object_begin(j, key);
	for (size_t i = 0; i < n; i++)
		json_u64(j, c[i]->name, c[i]->value);
	json_object_end(j);
}

static void stats_json(FILE *f, const Ctl__StatsReply *s, const struct render_opts *o)
{
	struct json j;
	json_document_begin(&j, f);
	process_json(&j, "process", s->process, o);
	counters_json(&j, "totals", s->totals, s->n_totals);
	json_array_begin(&j, "arenas");
	for (size_t i = 0; i < s->n_arenas; i++) {
		json_object_begin(&j, NULL);
		json_u64(&j, "index", s->arenas[i]->index);
		json_u64(&j, "threads", s->arenas[i]->threads);
		counters_json(&j, "counters", s->arenas[i]->counters, s->arenas[i]->n_counters);
		json_object_end(&j);
	}
	json_array_end(&j);
	json_array_begin(&j, "classes");
	for (size_t i = 0; i < s->n_classes; i++) {
		json_object_begin(&j, NULL);
		json_u64(&j, "size", s->classes[i]->size);
		counters_json(&j, "counters", s->classes[i]->counters, s->classes[i]->n_counters);
		json_object_end(&j);
	}
	json_array_end(&j);
	tunables_json(&j, s->tunables, s->n_tunables);
	json_object_end(&j);
	json_finish(&j);
}

void render_stats(FILE *f, const Ctl__StatsReply *s, const struct render_opts *o)
{
	if (o->json) {
		stats_json(f, s, o);
		return;
	}
	const Ctl__ProcessInfo *p = s->process;
	char a[FMT_BUF], b[FMT_BUF], c[FMT_BUF], d[FMT_BUF], owner[48] = "";
	fprintf(f, "process %" PRId32 " %s (%s)\n", p->pid, render_proc_name(p), p->exe);
	if (p->cmdline && *p->cmdline)
		fprintf(f, "  command line: %s\n", p->cmdline);
	if (p->profile)
		fprintf(f, "  profile: %s (allocctl profiles)\n", p->profile);
	if (p->has_pressure_watch) {
		char rel[FMT_BUF], took[FMT_BUF] = "";
		if (p->has_pressure_response_ns)
			fmt_duration_ns(took, sizeof(took), p->pressure_response_ns);
		fprintf(f,
		        "  own pressure watch: %s, %" PRIu64
		        " event%s acted on, released %s%s%s%s\n",
		        p->pressure_watch ? "on" : "ended", p->pressure_events,
		        p->pressure_events == 1 ? "" : "s",
		        fmt_size(rel, sizeof(rel), p->pressure_released_bytes, o->raw),
		        took[0] ? " (the last in " : "", took, took[0] ? ")" : "");
	}
	if (p->has_ns_pid && p->ns_pid != p->pid)
		fprintf(f, "  container: pid %" PRId32 " in pid namespace %" PRIu64 "\n", p->ns_pid,
		        p->pid_namespace);
	if (p->cgroup && *p->cgroup)
		fprintf(f, "  cgroup: %s\n", p->cgroup);
	if (p->has_owner_uid && p->owner_uid != p->uid)
		snprintf(owner, sizeof(owner), " (segment owned by uid %" PRIu32 ")", p->owner_uid);
	fprintf(f,
	        "  uid %" PRIu32 "%s, up %s, %" PRIu64 " thread%s (%" PRIu64
	        " used the allocator), %" PRIu32 " arena%s, control thread %s, liballoc %s\n",
	        p->uid, owner, fmt_uptime(a, sizeof(a), uptime_s(p, o)), p->threads,
	        p->threads == 1 ? "" : "s", p->has_allocator_threads ? p->allocator_threads : 0,
	        p->arenas, p->arenas == 1 ? "" : "s", p->control ? p->control : "unknown",
	        p->version && *p->version ? p->version : "?");
	for (size_t i = 0; i < p->n_foreign_allocators; i++)
		fprintf(f,
		        "  also maps %s: liballoc serves its malloc; %s's own statistics and "
		        "controls no longer describe this process\n",
		        p->foreign_allocators[i], p->foreign_allocators[i]);

	/* the memory figures (LA_MEMORY) and the kernel's RSS */
	fprintf(f, "\nmemory\n");
	const Ctl__Memory *m = p->memory;
	if (m) {
		const struct {
			const char *label;
			bool has;
			uint64_t v;
		} rows[] = {
		        {"rss", p->has_rss_bytes && p->rss_bytes, p->rss_bytes},
		        {"in use", m->has_in_use_bytes, m->in_use_bytes},
		        {"cached", m->has_cached_bytes, m->cached_bytes},
		        {"fragmented", m->has_fragmented_bytes, m->fragmented_bytes},
		        {"free resident", m->has_free_resident_bytes, m->free_resident_bytes},
		        {"metadata", m->has_metadata_bytes, m->metadata_bytes},
		        {"non-allocator rss", p->has_rss_bytes && p->rss_bytes,
		         m->non_allocator_rss_bytes},
		        {"reclaimable", m->has_reclaimable_bytes, m->reclaimable_bytes},
		        {"free reserved", m->has_free_reserved_bytes, m->free_reserved_bytes},
		        {"address space", m->has_address_space_bytes, m->address_space_bytes},
		};
		for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
			fprintf(f, "  %-22s %14s\n", rows[i].label,
			        rows[i].has ? fmt_size(b, sizeof(b), rows[i].v, o->raw)
			                    : "unknown");
	}

	counter_group(f, "allocator", group_memory, s->totals, s->n_totals, o);

	fprintf(f, "\nsystem calls\n  %-10s %12s %14s\n", "KIND", "CALLS", "BYTES");
	for (const char *const *k = group_syscalls; *k; k++) {
		char cn[40], bn[40];
		snprintf(cn, sizeof(cn), "%s_calls", *k);
		snprintf(bn, sizeof(bn), "%s_bytes", *k);
		if (!counter_find(s->totals, s->n_totals, cn))
			continue;
		fprintf(f, "  %-10s %12" PRIu64 " %14s\n", *k,
		        counter_value(s->totals, s->n_totals, cn),
		        fmt_size(a, sizeof(a), counter_value(s->totals, s->n_totals, bn), o->raw));
	}

	counter_group(f, "remote frees", group_remote, s->totals, s->n_totals, o);
	counter_group(f, "caches, locks, commands", group_other, s->totals, s->n_totals, o);
	counter_group(f, "burst preparation", group_burst, s->totals, s->n_totals, o);
	bool other = false;
	for (size_t i = 0; i < s->n_totals; i++) {
		const char *nm = s->totals[i]->name;
		if (in_group(group_memory, nm) || in_group(group_remote, nm) ||
		    in_group(group_other, nm) || in_group(group_burst, nm) ||
		    is_syscall_counter(nm) || is_input(nm))
			continue;
		if (!other)
			fprintf(f, "\nother\n");
		other = true;
		counter_line(f, nm, s->totals[i]->value, o);
	}

	fprintf(f, "\narenas\n  %5s %7s %10s %10s %10s %10s %6s %9s %9s %9s\n", "ARENA", "THREADS",
	        "IN USE", "CACHED", "FRAG", "FREE RES", "HEAPS", "REMOTE-Q", "REMOTE-D",
	        "CONTENDED");
	for (size_t i = 0; i < s->n_arenas; i++) {
		const Ctl__ArenaStats *ar = s->arenas[i];
		Ctl__Counter *const *k = ar->counters;
		size_t kn = ar->n_counters;
		struct la_counters ac;
		struct la_memory am;
		counters_of(k, kn, &ac);
		la_memory_of(&ac, &am);
		char e[FMT_BUF];
		fprintf(f,
		        "  %5" PRIu32 " %7" PRIu32 " %10s %10s %10s %10s %6" PRIu64 " %9" PRIu64
		        " %9" PRIu64 " %9" PRIu64 "\n",
		        ar->index, ar->threads, fmt_size(a, sizeof(a), am.in_use, o->raw),
		        fmt_size(b, sizeof(b), am.cached, o->raw),
		        fmt_size(c, sizeof(c), am.fragmented, o->raw),
		        fmt_size(e, sizeof(e), am.free_resident, o->raw),
		        counter_value(k, kn, "heaps"), counter_value(k, kn, "remote_frees_queued"),
		        counter_value(k, kn, "remote_frees_drained"),
		        counter_value(k, kn, "lock_contended"));
	}

	size_t hidden = 0;
	fprintf(f, "\nsize classes\n  %11s %10s %8s %10s %10s\n", "SIZE", "BLOCKS", "SPANS",
	        "REFILLS", "FLUSHES");
	for (size_t i = 0; i < s->n_classes; i++) {
		const Ctl__ClassStats *cl = s->classes[i];
		bool any = false;
		for (size_t k = 0; k < cl->n_counters; k++)
			any |= cl->counters[k]->value != 0;
		if (!any) {
			hidden++;
			continue;
		}
		Ctl__Counter *const *k = cl->counters;
		size_t kn = cl->n_counters;
		fprintf(f, "  %11s %10" PRIu64 " %8" PRIu64 " %10" PRIu64 " %10" PRIu64 "\n",
		        fmt_size(d, sizeof(d), cl->size, o->raw),
		        counter_value(k, kn, "blocks_in_use"), counter_value(k, kn, "spans"),
		        counter_value(k, kn, "refills"), counter_value(k, kn, "flushes"));
	}
	if (hidden)
		fprintf(f, "  (%zu class%s without activity not shown; --json lists all)\n", hidden,
		        hidden == 1 ? "" : "es");

	fprintf(f, "\ntunables\n");
	tunables_table(f, "  ", s->tunables, s->n_tunables, o);
}

/* ---- per-process command results ---------------------------------------------------- */

static void result_json(struct json *j, const Ctl__CommandResult *r)
{
	json_object_begin(j, NULL);
	json_i64(j, "pid", r->pid);
	json_string(j, "exe", r->exe ? r->exe : "");
	json_bool(j, "ok", r->code == CTL__ERROR_CODE__OK);
	json_string(j, "code", render_code_name(r->code));
	json_string(j, "message", r->message ? r->message : "");
	json_u64(j, "bytes_released", r->has_bytes_released ? r->bytes_released : 0);
	json_u64(j, "duration_ns", r->has_duration_ns ? r->duration_ns : 0);
	json_object_begin(j, "syscalls");
	json_u64(j, "mmap", r->has_mmap_calls ? r->mmap_calls : 0);
	json_u64(j, "munmap", r->has_munmap_calls ? r->munmap_calls : 0);
	json_u64(j, "madvise", r->has_madvise_calls ? r->madvise_calls : 0);
	json_u64(j, "mprotect", r->has_mprotect_calls ? r->mprotect_calls : 0);
	json_object_end(j);
	tunables_json(j, r->tunables, r->n_tunables);
	json_object_end(j);
}

void render_results_json(FILE *f, const char *verb, Ctl__CommandResult *const *res, size_t n)
{
	struct json j;
	json_document_begin(&j, f);
	json_string(&j, "command", verb);
	json_array_begin(&j, "results");
	for (size_t i = 0; i < n; i++)
		result_json(&j, res[i]);
	json_array_end(&j);
	json_object_end(&j);
	json_finish(&j);
}

static void result_subject(FILE *f, const char *verb, const Ctl__CommandResult *r,
                           const struct render_opts *o)
{
	fprintf(f, "%s %" PRId32, verb, r->pid);
	if (o->show_exe)
		fprintf(f, " (%s)", render_exe_name(r->exe));
	fputs(": ", f);
}

void render_get(FILE *f, Ctl__CommandResult *const *res, size_t n, const struct render_opts *o)
{
	if (o->json) {
		render_results_json(f, "get", res, n);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const Ctl__CommandResult *r = res[i];
		if (r->code != CTL__ERROR_CODE__OK)
			continue;
		if (n > 1)
			fprintf(f, "%s%" PRId32 " (%s)\n", i ? "\n" : "", r->pid,
			        render_exe_name(r->exe));
		tunables_table(f, "", r->tunables, r->n_tunables, o);
	}
}

static const Ctl__Tunable *tunable_in(const Ctl__CommandResult *r, const char *name)
{
	if (!r)
		return NULL;
	for (size_t i = 0; i < r->n_tunables; i++)
		if (strcmp(r->tunables[i]->name, name) == 0)
			return r->tunables[i];
	return NULL;
}

void render_set(FILE *f, Ctl__CommandResult *const *res, size_t n, const Ctl__CommandResult *before,
                const struct render_opts *o)
{
	if (o->json) {
		render_results_json(f, "set", res, n);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const Ctl__CommandResult *r = res[i];
		if (r->code != CTL__ERROR_CODE__OK)
			continue;
		result_subject(f, "set", r, o);
		for (size_t k = 0; k < r->n_tunables; k++) {
			struct tunable_view v = tunable_view(r->tunables[k]);
			char now[FMT_BUF], was[FMT_BUF];
			fprintf(f, "%s%s = %s", k ? ", " : "", v.name,
			        tunable_format(now, sizeof(now), v.type, v.value, o->raw));
			const Ctl__Tunable *b =
			        before && before->pid == r->pid ? tunable_in(before, v.name) : NULL;
			if (b)
				fprintf(f, " (was %s)",
				        tunable_format(was, sizeof(was), v.type, b->value, o->raw));
			if (r->tunables[k]->has_expires_in_ms) {
				char rv[FMT_BUF], left[FMT_BUF];
				fprintf(f, " for %s, then back to %s",
				        fmt_left(left, sizeof(left), r->tunables[k]->expires_in_ms),
				        tunable_format(rv, sizeof(rv), v.type,
				                       r->tunables[k]->revert_value, o->raw));
			}
		}
		char d[FMT_BUF];
		fprintf(f, " in %s\n",
		        fmt_duration_ns(d, sizeof(d), r->has_duration_ns ? r->duration_ns : 0));
	}
}

void render_action(FILE *f, const char *verb, Ctl__CommandResult *const *res, size_t n,
                   const struct render_opts *o)
{
	if (o->json) {
		render_results_json(f, verb, res, n);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const Ctl__CommandResult *r = res[i];
		if (r->code != CTL__ERROR_CODE__OK)
			continue;
		char b[FMT_BUF], d[FMT_BUF];
		result_subject(f, verb, r, o);
		fprintf(f, "released %s in %s (",
		        fmt_size(b, sizeof(b), r->has_bytes_released ? r->bytes_released : 0,
		                 o->raw),
		        fmt_duration_ns(d, sizeof(d), r->has_duration_ns ? r->duration_ns : 0));
		const struct {
			const char *name;
			uint64_t calls;
		} k[] = {{"madvise", r->has_madvise_calls ? r->madvise_calls : 0},
		         {"munmap", r->has_munmap_calls ? r->munmap_calls : 0},
		         {"mmap", r->has_mmap_calls ? r->mmap_calls : 0},
		         {"mprotect", r->has_mprotect_calls ? r->mprotect_calls : 0}};
		int shown = 0;
		for (size_t x = 0; x < sizeof(k) / sizeof(k[0]); x++) {
			if (!k[x].calls)
				continue;
			fprintf(f, "%s%" PRIu64 " %s", shown++ ? ", " : "", k[x].calls, k[x].name);
		}
		fprintf(f, "%s)\n", shown ? "" : "no system calls");
	}
}

/* ---- profiles and policies ------------------------------------------------------------ */

void render_profiles(FILE *f, const Ctl__PolicyReply *r, const struct render_opts *o)
{
	if (o->json) {
		struct json j;
		json_document_begin(&j, f);
		json_array_begin(&j, "profiles");
		for (size_t i = 0; i < r->n_profiles; i++) {
			const Ctl__ProfileInfo *p = r->profiles[i];
			json_object_begin(&j, NULL);
			json_string(&j, "name", p->name);
			json_u64(&j, "line", p->has_line ? p->line : 0);
			json_array_begin(&j, "matches");
			for (size_t k = 0; k < p->n_matches; k++)
				json_string(&j, NULL, p->matches[k]);
			json_array_end(&j);
			json_object_begin(&j, "settings");
			for (size_t k = 0; k < p->n_settings; k++)
				json_i64(&j, p->settings[k]->name, p->settings[k]->value);
			json_object_end(&j);
			json_array_begin(&j, "pids");
			for (size_t k = 0; k < p->n_pids; k++)
				json_i64(&j, NULL, p->pids[k]);
			json_array_end(&j);
			json_object_end(&j);
		}
		json_array_end(&j);
		json_u64(&j, "applied", r->has_profiles_applied ? r->profiles_applied : 0);
		if (r->has_profile_delay_p50_ns) {
			json_u64(&j, "delay_p50_ns", r->profile_delay_p50_ns);
			json_u64(&j, "delay_max_ns", r->profile_delay_max_ns);
		}
		json_object_end(&j);
		json_finish(&j);
		return;
	}
	if (r->n_profiles == 0) {
		fprintf(f,
		        "no profiles: the daemon's configuration has no [profile NAME] section\n");
		return;
	}
	for (size_t i = 0; i < r->n_profiles; i++) {
		const Ctl__ProfileInfo *p = r->profiles[i];
		fprintf(f, "%s (line %" PRIu32 ")\n  matches:", p->name, p->has_line ? p->line : 0);
		for (size_t k = 0; k < p->n_matches; k++)
			fprintf(f, " %s", p->matches[k]);
		fprintf(f, "\n  sets:   ");
		for (size_t k = 0; k < p->n_settings; k++) {
			const Ctl__Tunable *t = p->settings[k];
			char v[FMT_BUF];
			fprintf(f, "%s%s = %s", k ? ", " : " ", t->name,
			        tunable_format(v, sizeof(v), tunable_type_from_name(t->type),
			                       t->value, o->raw));
		}
		fprintf(f, "\n  processes:");
		for (size_t k = 0; k < p->n_pids; k++)
			fprintf(f, " %" PRId32, p->pids[k]);
		fprintf(f, "%s\n", p->n_pids ? "" : " none");
	}
	if (r->has_profile_delay_p50_ns) {
		char a[FMT_BUF], b[FMT_BUF];
		fprintf(f,
		        "applied %" PRIu64
		        " times; from the process's start to in effect: median %s, "
		        "max %s (the last 256)\n",
		        r->profiles_applied, fmt_duration_ns(a, sizeof(a), r->profile_delay_p50_ns),
		        fmt_duration_ns(b, sizeof(b), r->profile_delay_max_ns));
	}
}

void render_policies(FILE *f, const Ctl__PolicyReply *r, const struct render_opts *o)
{
	if (o->json) {
		struct json j;
		json_document_begin(&j, f);
		json_bool(&j, "dry_run", r->has_dry_run && r->dry_run);
		json_array_begin(&j, "policies");
		for (size_t i = 0; i < r->n_policies; i++) {
			const Ctl__PolicyInfo *p = r->policies[i];
			json_object_begin(&j, NULL);
			json_string(&j, "name", p->name);
			json_u64(&j, "line", p->has_line ? p->line : 0);
			json_string(&j, "on", p->on);
			json_string(&j, "condition", p->condition ? p->condition : "");
			json_array_begin(&j, "actions");
			for (size_t k = 0; k < p->n_actions; k++)
				json_string(&j, NULL, p->actions[k]);
			json_array_end(&j);
			json_string(&j, "profile", p->profile);
			json_bool(&j, "dry_run", p->has_dry_run && p->dry_run);
			json_array_begin(&j, "watching");
			for (size_t k = 0; k < p->n_watching; k++)
				json_string(&j, NULL, p->watching[k]);
			json_array_end(&j);
			json_u64(&j, "events", p->events);
			json_u64(&j, "runs", p->runs);
			json_u64(&j, "released_bytes", p->released_bytes);
			json_u64(&j, "deferred", p->deferred);
			if (p->has_last_response_ns) {
				json_u64(&j, "last_response_ns", p->last_response_ns);
				json_string(&j, "last_reason",
				            p->last_reason ? p->last_reason : "");
			}
			json_object_end(&j);
		}
		json_array_end(&j);
		json_object_end(&j);
		json_finish(&j);
		return;
	}
	if (r->n_policies == 0) {
		fprintf(f,
		        "no policies: the daemon's configuration has no [policy NAME] section\n");
		return;
	}
	for (size_t i = 0; i < r->n_policies; i++) {
		const Ctl__PolicyInfo *p = r->policies[i];
		fprintf(f, "%s (line %" PRIu32 ")%s: on %s: %s\n  actions:", p->name,
		        p->has_line ? p->line : 0, p->has_dry_run && p->dry_run ? " [dry run]" : "",
		        p->on, p->condition ? p->condition : "");
		for (size_t k = 0; k < p->n_actions; k++)
			fprintf(f, "%s%s", k ? ", " : " ", p->actions[k]);
		if (p->profile)
			fprintf(f, "; only profile %s", p->profile);
		fprintf(f, "\n  watching:");
		for (size_t k = 0; k < p->n_watching; k++)
			fprintf(f, " %s", p->watching[k]);
		if (!p->n_watching)
			fprintf(f, strcmp(p->on, "free") && strcmp(p->on, "idle")
			                   ? " nothing (see the daemon's log)"
			                   : " the processes, every check_interval_ms");
		char rel[FMT_BUF], lat[FMT_BUF];
		fprintf(f,
		        "\n  events %" PRIu64 ", runs %" PRIu64 ", released %s, deferred %" PRIu64
		        "\n",
		        p->events, p->runs, fmt_size(rel, sizeof(rel), p->released_bytes, o->raw),
		        p->deferred);
		if (p->has_last_response_ns)
			fprintf(f, "  last run: %s from the event to enough memory back (%s)\n",
			        fmt_duration_ns(lat, sizeof(lat), p->last_response_ns),
			        p->last_reason ? p->last_reason : "");
	}
}

/* ---- log ---------------------------------------------------------------------------- */

static void audit_json(struct json *j, const Ctl__AuditEvent *e)
{
	json_object_begin(j, NULL);
	json_u64(j, "seq", e->seq);
	json_u64(j, "time_ns", e->time_ns);
	json_string(j, "trigger", e->trigger);
	json_string(j, "actor", e->actor);
	if (e->has_peer_uid) {
		json_i64(j, "peer_uid", e->peer_uid);
		json_i64(j, "peer_pid", e->peer_pid);
	}
	json_string(j, "action", e->action);
	if (e->has_pid) {
		json_i64(j, "pid", e->pid);
		json_u64(j, "uid", e->uid);
		json_string(j, "exe", e->exe ? e->exe : "");
	}
	if (e->tunable)
		json_string(j, "tunable", e->tunable);
	if (e->has_old_value)
		json_i64(j, "old_value", e->old_value);
	if (e->has_new_value)
		json_i64(j, "new_value", e->new_value);
	if (e->has_hold_ms)
		json_u64(j, "hold_ms", e->hold_ms);
	if (e->has_arg)
		json_u64(j, "arg", e->arg);
	json_string(j, "result", e->result);
	json_u64(j, "bytes_released", e->has_bytes_released ? e->bytes_released : 0);
	json_u64(j, "duration_ns", e->has_duration_ns ? e->duration_ns : 0);
	if (e->message)
		json_string(j, "message", e->message);
	json_object_end(j);
}

void render_log(FILE *f, Ctl__AuditEvent *const *ev, size_t n, const struct render_opts *o)
{
	if (o->json) {
		struct json j;
		json_document_begin(&j, f);
		json_array_begin(&j, "events");
		for (size_t i = 0; i < n; i++)
			audit_json(&j, ev[i]);
		json_array_end(&j);
		json_object_end(&j);
		json_finish(&j);
		return;
	}
	if (n == 0)
		return;
	fprintf(f, "%-23s %6s %-8s %-20s %-7s %8s  %-14s %-7s %s\n", "TIME (UTC)", "SEQ", "TRIGGER",
	        "BY", "ACTION", "PID", "EXE", "RESULT", "DETAIL");
	for (size_t i = 0; i < n; i++) {
		const Ctl__AuditEvent *e = ev[i];
		time_t sec = (time_t)(e->time_ns / 1000000000u);
		struct tm tm;
		char when[64], pid[16], detail[256] = "";
		gmtime_r(&sec, &tm);
		snprintf(when, sizeof(when), "%04d-%02d-%02dT%02d:%02d:%02d.%03u",
		         tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
		         tm.tm_sec, (unsigned)(e->time_ns % 1000000000u / 1000000u));
		snprintf(pid, sizeof(pid), "%" PRId32, e->has_pid ? e->pid : 0);
		size_t d = 0;
		if (e->tunable) {
			const struct tunable_info *t = tunable_find(e->tunable);
			int type = t ? t->type : LA_T_INT;
			char was[FMT_BUF], now[FMT_BUF];
			d += (size_t)snprintf(
			        detail + d, sizeof(detail) - d, "%s %s -> %s", e->tunable,
			        e->has_old_value ? tunable_format(was, sizeof(was), type,
			                                          e->old_value, o->raw)
			                         : "?",
			        e->has_new_value ? tunable_format(now, sizeof(now), type,
			                                          e->new_value, o->raw)
			                         : "?");
			if (e->has_hold_ms && e->hold_ms && d < sizeof(detail)) {
				char h[FMT_BUF];
				d += (size_t)snprintf(detail + d, sizeof(detail) - d, " for %s",
				                      fmt_ms(h, sizeof(h), (int64_t)e->hold_ms));
			}
		} else if (strcmp(e->action, "trim") == 0 || strcmp(e->action, "release") == 0 ||
		           strcmp(e->action, "flush") == 0) {
			char b[FMT_BUF], t[FMT_BUF];
			d += (size_t)snprintf(
			        detail + d, sizeof(detail) - d, "released %s in %s",
			        fmt_size(b, sizeof(b),
			                 e->has_bytes_released ? e->bytes_released : 0, o->raw),
			        fmt_duration_ns(t, sizeof(t),
			                        e->has_duration_ns ? e->duration_ns : 0));
		}
		if (d >= sizeof(detail))
			d = sizeof(detail) - 1;
		fprintf(f, "%-23s %6" PRIu64 " %-8s %-20.20s %-7s %8s  %-14.14s %-7s %s%s%s\n",
		        when, e->seq, e->trigger, e->actor, e->action, e->has_pid ? pid : "-",
		        e->has_pid && e->exe ? e->exe : "-", e->result, detail,
		        e->message && d ? "; " : "", e->message ? e->message : "");
	}
}

/* ---- version ------------------------------------------------------------------------ */

void render_version(FILE *f, const Ctl__VersionReply *d, const char *socket,
                    const struct render_opts *o)
{
	if (o->json) {
		struct json j;
		json_document_begin(&j, f);
		json_object_begin(&j, "client");
		json_string(&j, "version", ALLOCCTL_VERSION);
		json_u64(&j, "protocol_version", CTL_PROTOCOL_VERSION);
		json_u64(&j, "segment_abi_version", LA_SHM_ABI_VERSION);
		json_object_end(&j);
		if (d) {
			json_object_begin(&j, "daemon");
			json_string(&j, "version", d->daemon_version);
			json_u64(&j, "protocol_version", d->protocol_version);
			json_u64(&j, "segment_abi_version", d->segment_abi_version);
			json_string(&j, "socket", socket);
			json_object_end(&j);
		}
		json_object_end(&j);
		json_finish(&j);
		return;
	}
	fprintf(f, "allocctl %s (protocol %u, segment ABI %u)\n", ALLOCCTL_VERSION,
	        CTL_PROTOCOL_VERSION, LA_SHM_ABI_VERSION);
	if (d)
		fprintf(f, "allocctld %s (protocol %" PRIu32 ", segment ABI %" PRIu32 ") at %s\n",
		        d->daemon_version, d->protocol_version, d->segment_abi_version, socket);
}

/* ---- errors ------------------------------------------------------------------------- */

char *render_error(char *buf, size_t n, int code, const char *message, int32_t pid, unsigned uid)
{
	const char *m = message && *message ? message : NULL;
	char names[1024];
	switch (code) {
	case CTL__ERROR_CODE__ERR_NO_PROCESS:
		if (!pid) { /* a target by name: the daemon's words name it */
			snprintf(buf, n, "%s (see `allocctl ps`)",
			         m ? m : "no process matches the target");
			break;
		}
		snprintf(buf, n,
		         "no such process: %" PRId32
		         " is not running under liballoc (see `allocctl "
		         "ps` for the processes the daemon sees)",
		         pid);
		break;
	case CTL__ERROR_CODE__ERR_PERMISSION:
		if (pid)
			snprintf(buf, n,
			         "permission denied: process %" PRId32
			         " belongs to another user; uid "
			         "%u may act only on its own processes (root on all)",
			         pid, uid);
		else
			snprintf(buf, n, "permission denied: %s", m ? m : "refused by the daemon");
		break;
	case CTL__ERROR_CODE__ERR_UNKNOWN_TUNABLE:
		snprintf(buf, n, "unknown tunable%s%s; valid tunables: %s", m ? ": " : "",
		         m ? m : "", tunable_names(names, sizeof(names)));
		break;
	case CTL__ERROR_CODE__ERR_RANGE:
		snprintf(buf, n, "value out of range: %s", m ? m : "refused by the process");
		break;
	case CTL__ERROR_CODE__ERR_READONLY:
		snprintf(buf, n,
		         "cannot change live: %s (set it at start with LIBALLOC_<NAME> in the "
		         "environment)",
		         m ? m : "the tunable is read-only while the process runs");
		break;
	case CTL__ERROR_CODE__ERR_TIMEOUT:
		snprintf(buf, n,
		         "process %" PRId32
		         " did not answer in time%s%s (is its control thread off, "
		         "LIBALLOC_CONTROL=0, or is the process stopped?)",
		         pid, m ? ": " : "", m ? m : "");
		break;
	case CTL__ERROR_CODE__ERR_BUSY:
		snprintf(buf, n, "daemon busy%s%s; try again", m ? ": " : "", m ? m : "");
		break;
	case CTL__ERROR_CODE__ERR_VERSION:
		snprintf(buf, n,
		         "protocol version mismatch: allocctl speaks protocol %u%s%s; use the "
		         "allocctl "
		         "built with this daemon",
		         CTL_PROTOCOL_VERSION, m ? ", daemon says: " : "", m ? m : "");
		break;
	case CTL__ERROR_CODE__ERR_FAILED:
		snprintf(buf, n, "command failed in process %" PRId32 ": %s", pid,
		         m ? m : "no reason given");
		break;
	default:
		snprintf(buf, n, "daemon error %s: %s", render_code_name(code),
		         m ? m : "no message");
		break;
	}
	return buf;
}
