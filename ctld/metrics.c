/* metrics.c — what HTTP serves (http.c is the server): /metrics (Prometheus text format
 * 0.0.4; families, names and HELP generated from the segment's X-macro lists; HELP and TYPE
 * once per family), /healthz and /api/processes (JSON written with jansson, one process at
 * a time); the page and the history are dashboard.c's.
 *
 * A scrape never holds the loop for long: it is a resumable job on a low-priority event.
 * It first takes a snapshot of every process (SLICE_NS of loop time at a time), then writes
 * the families one line after another into the connection's output, again SLICE_NS at a
 * time and only while less than OUT_HIGH bytes wait for the client (it resumes as the
 * client reads). So 5,000 processes or a 1024-arena process cost other clients at most a
 * slice's wait, and the daemon's memory per scrape is the snapshots plus OUT_HIGH.
 * The labels pid, uid and exe come from /proc (never from the segment).
 *
 * metrics_mode = service aggregates instead: one series set per service (exe and profile)
 * rather than per process, so short-lived processes do not make new series. Levels are
 * sums over the live processes; counters are those sums plus what the service's exited
 * processes had counted (their last figures, carried when the daemon forgets them), so
 * they never go down. Per-arena, per-class, tunable and identity families are per-process
 * only and left out in that mode. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <jansson.h>

#include "audit.h"
#include "ctld.h"
#include "http.h"
#include "jsontext.h"
#include "log.h"
#include "units.h"
#include "wire.h"

#define SLICE_NS    2000000ull
#define OUT_HIGH    (1u << 20)
#define MAX_SCRAPES 4

/* Escape what a label value or a JSON string may not hold (exe is printable already). */
static void label_value(char *dst, size_t cap, const char *src)
{
	size_t o = 0;
	for (; *src && o + 3 < cap; src++) {
		if (*src == '\\' || *src == '"')
			dst[o++] = '\\';
		dst[o++] = *src;
	}
	dst[o] = 0;
}

/* ---- the families -----------------------------------------------------------------------
 * One family per memory figure, counter and tunable; names carry their unit (base units:
 * bytes, seconds), counters end in _total, and no family mixes units. Names, kinds, scopes
 * and help come from LA_MEMORY, LA_COUNTERS (the memory figures' inputs, LA_INPUT, only
 * through the figures; process-wide counters, LA_PROCESS, have no per-arena series) and
 * LA_TUNABLES (units_metric_name). */

struct counter_desc {
	const char *name, *help;
	int kind, scope;
	size_t off; /* in struct la_counters */
};
static const struct counter_desc counters[] = {
#define MET_X_DESC(cname, kind, unit, scope, help) \
	{#cname, help, kind, scope, offsetof(struct la_counters, cname)},
        LA_COUNTERS(MET_X_DESC)
#undef MET_X_DESC
};
static const struct counter_desc class_stats[] = {
#define MET_X_CDESC(cname, kind, unit, help) \
	{#cname, help, kind, 0, offsetof(struct la_class_stats, cname)},
        LA_CLASS_STATS(MET_X_CDESC)
#undef MET_X_CDESC
};
static const struct counter_desc figures[] = {
#define MET_X_FIG(name, help) {#name, help, LA_GAUGE, 0, offsetof(struct la_memory, name)},
        LA_MEMORY(MET_X_FIG)
#undef MET_X_FIG
};
#define NCOUNTERS    ((int)(sizeof(counters) / sizeof(counters[0])))
#define NCLASS_STATS ((int)(sizeof(class_stats) / sizeof(class_stats[0])))
#define NFIGURES     ((int)(sizeof(figures) / sizeof(figures[0])))

/* family numbers: memory figures and counters (process totals), the same per arena, per
 * class, one per tunable, then the fixed ones */
enum {
	F_RSS = 0,
	F_NON_ALLOC,
	F_THREADS,
	F_ALLOC_THREADS,
	F_ARENAS,
	F_CONTROL,
	F_UNREADABLE,
	F_INFO,
	F_PROFILE,
	F_BUILD,
	F_FOREIGN,
	F_CONTROL_FAILED,
	F_SERVICE_PROCS,
	F_FIXED
};
#define F_FIG0       0
#define F_TOTAL0     (F_FIG0 + NFIGURES)
#define F_ARENA_FIG0 (F_TOTAL0 + NCOUNTERS)
#define F_ARENA0     (F_ARENA_FIG0 + NFIGURES)
#define F_CLASS0     (F_ARENA0 + NCOUNTERS)
#define F_TUN0       (F_CLASS0 + NCLASS_STATS)
#define F_OTHER0     (F_TUN0 + LA_NTUNABLES)
#define F_END        (F_OTHER0 + F_FIXED)

/* The sums of one service (metrics_mode = service). */
struct group {
	uint32_t procs, control_running, control_failed, unreadable, arenas;
	uint64_t allocator_threads;
};

struct snapx {
	struct proc_snap s;
	struct la_shm_class *cls; /* when classes are exported */
	uint32_t ncls;
	struct group *g;                      /* a service's sums instead of one process */
	char labels[PROCFS_EXE_MAX * 2 + 96]; /* pid="..",uid="..",exe=".." (service:
	                                         exe="..",profile="..") */
};

/* ---- services ----------------------------------------------------------------------------
 * What the exited processes of each service had counted, added to its counters so they
 * stay monotonic (metrics_proc_gone). Bounded: past MAX_CARRY services, an exited process
 * of a new one is not carried (its service's counters may then go down once). */
#define MAX_CARRY 4096
struct carry {
	char labels[PROCFS_EXE_MAX * 2 + 96];
	struct la_counters c;
};
static struct carry *carries;
static int ncarries, cap_carries;

/* The last MAX_RECENT processes carried, so that one found again is not counted twice
 * (metrics_proc_found): the daemon forgets a live process whose segment it finds damaged
 * or relaid out, and examines the file again right away. */
#define MAX_RECENT 256
struct carried {
	pid_t pid; /* host pid */
	uint64_t start_time;
	dev_t dev;
	ino_t ino;
	int carry; /* index in carries */
	struct la_counters t;
	bool used;
};
static struct carried recent[MAX_RECENT];
static unsigned recent_next;

static void service_labels(const struct proc *p, char *dst, size_t cap)
{
	char exe[2 * PROCFS_EXE_MAX];
	label_value(exe, sizeof(exe), proc_exe(p));
	const char *profile = policy_proc_profile(p); /* names need no escaping */
	snprintf(dst, cap, "exe=\"%s\",profile=\"%s\"", exe, profile ? profile : "");
}

static struct carry *carry_of(const char *labels, bool create)
{
	for (int i = 0; i < ncarries; i++)
		if (!strcmp(carries[i].labels, labels))
			return &carries[i];
	if (!create || ncarries >= MAX_CARRY)
		return NULL;
	if (ncarries == cap_carries) {
		int cap = cap_carries ? cap_carries * 2 : 16;
		struct carry *c = realloc(carries, (size_t)cap * sizeof(*c));
		if (!c)
			return NULL;
		carries = c;
		cap_carries = cap;
	}
	struct carry *c = &carries[ncarries++];
	memset(c, 0, sizeof(*c));
	snprintf(c->labels, sizeof(c->labels), "%s", labels);
	return c;
}

void metrics_proc_gone(struct ctld *d, struct proc *p)
{
	if (!d->cfg.metrics_service)
		return;
	char labels[sizeof(carries->labels)];
	service_labels(p, labels, sizeof(labels));
	struct carry *c = carry_of(labels, true);
	if (!c)
		return;
	/* its last figures: read once more (the mapping outlives the process), else the last
	 * good ones */
	struct la_counters t;
	if (seg_read_totals(&p->seg, &t))
		t = p->last_total;
	la_counters_add(&c->c, &t);
	/* remembered a while: the process may still live and be found again */
	struct carried *r = &recent[recent_next++ % MAX_RECENT];
	*r = (struct carried){.pid = p->seg.hdr.pid,
	                      .start_time = p->seg.hdr.start_time,
	                      .dev = p->seg.dev,
	                      .ino = p->seg.ino,
	                      .carry = (int)(c - carries),
	                      .t = t,
	                      .used = true};
}

void metrics_proc_found(struct ctld *d, struct proc *p)
{
	if (!d->cfg.metrics_service)
		return;
	for (int i = 0; i < MAX_RECENT; i++) {
		struct carried *r = &recent[i];
		if (!r->used || r->pid != p->seg.hdr.pid ||
		    r->start_time != p->seg.hdr.start_time || r->dev != p->seg.dev ||
		    r->ino != p->seg.ino)
			continue;
		/* the same counters again: its live figures count them from now on */
		struct la_counters *c = &carries[r->carry].c;
#define MET_X_SUB(name, ...) c->name -= r->t.name;
		LA_COUNTERS(MET_X_SUB)
#undef MET_X_SUB
		r->used = false;
	}
}

struct scrape {
	TAILQ_ENTRY(scrape) link;
	struct ctld *d;
	struct evbuffer *out; /* the connection's output */
	void (*done)(void *arg, bool ok);
	void *arg;
	struct event *ev;
	bool json, arenas, classes, waiting;
	struct proc **procs; /* referenced */
	int nprocs, collected;
	struct snapx *x;
	bool service;         /* metrics_mode = service: emit groups, not processes */
	struct snapx *groups; /* service mode: one per service (built once collected) */
	struct group *sums;   /* their sums (groups[k].g) */
	int ngroups;
	int fam, i, fam_started;
	uint32_t a;
};
static TAILQ_HEAD(, scrape) scrapes = TAILQ_HEAD_INITIALIZER(scrapes);
static int nscrapes;

static bool collect_step(struct scrape *s, uint64_t deadline)
{
	while (s->collected < s->nprocs) {
		if (seg_now_ns(CLOCK_MONOTONIC) > deadline)
			return false;
		struct proc *p = s->procs[s->collected];
		struct snapx *x = &s->x[s->collected++];
		if (p->gone ||
		    (!proc_snapshot(s->d, p, &x->s, SNAP_TUNABLES | (s->arenas ? SNAP_ARENAS : 0),
		                    PROC_RECENT_NS) &&
		     !x->s.unreadable)) {
			x->s.p = NULL;
			continue;
		}
		char exe[2 * PROCFS_EXE_MAX];
		label_value(exe, sizeof(exe), proc_exe(p));
		snprintf(x->labels, sizeof(x->labels), "pid=\"%d\",uid=\"%u\",exe=\"%s\"",
		         p->seg.hdr.pid, proc_uid(p), exe);
		uint32_t nc = p->seg.hdr.class_count;
		if (s->classes && !x->s.unreadable && nc &&
		    (x->cls = calloc(nc, sizeof(*x->cls))) &&
		    seg_read_classes(&p->seg, x->cls, nc, &x->ncls))
			x->ncls = 0;
	}
	return true;
}

static void family_head(struct evbuffer *b, const char *prefix, const char *name,
                        const char *suffix, const char *type, const char *help, const char *scope)
{
	evbuffer_add_printf(b, "# HELP %s%s%s %s%s\n# TYPE %s%s%s %s\n", prefix, name, suffix, help,
	                    scope, prefix, name, suffix, type);
}

/* Write the head of family f (false: the family is not exported). */
static bool fam_head(struct scrape *s, int f)
{
	struct evbuffer *b = s->out;
	if (s->service && f >= F_ARENA_FIG0 && f < F_OTHER0)
		return false; /* arenas, classes, tunables: per process */
	if (f >= F_OTHER0) {
		int k = f - F_OTHER0;
		if (s->service ? (k == F_INFO || k == F_PROFILE || k == F_BUILD || k == F_FOREIGN)
		               : k == F_SERVICE_PROCS)
			return false;
	}
	if (f < F_TOTAL0) {
		family_head(b, "liballoc_", figures[f - F_FIG0].name, "_bytes", "gauge",
		            figures[f - F_FIG0].help, "");
	} else if (f < F_ARENA_FIG0) {
		const struct counter_desc *c = &counters[f - F_TOTAL0];
		if (c->kind == LA_INPUT)
			return false;
		family_head(b, "liballoc_", c->name, c->kind == LA_COUNTER ? "_total" : "",
		            c->kind == LA_COUNTER ? "counter" : "gauge", c->help,
		            " (process total)");
	} else if (f < F_ARENA0) {
		if (!s->arenas)
			return false;
		family_head(b, "liballoc_arena_", figures[f - F_ARENA_FIG0].name, "_bytes", "gauge",
		            figures[f - F_ARENA_FIG0].help, " (per arena)");
	} else if (f < F_CLASS0) {
		const struct counter_desc *c = &counters[f - F_ARENA0];
		if (!s->arenas || c->kind == LA_INPUT || c->scope == LA_PROCESS)
			return false;
		family_head(b, "liballoc_arena_", c->name, c->kind == LA_COUNTER ? "_total" : "",
		            c->kind == LA_COUNTER ? "counter" : "gauge", c->help, " (per arena)");
	} else if (f < F_TUN0) {
		if (!s->classes)
			return false;
		const struct counter_desc *c = &class_stats[f - F_CLASS0];
		family_head(b, "liballoc_class_", c->name, c->kind == LA_COUNTER ? "_total" : "",
		            c->kind == LA_COUNTER ? "counter" : "gauge", c->help,
		            " (per size class)");
	} else if (f < F_OTHER0) {
		const struct tunable_info *t = &tunable_table[f - F_TUN0];
		char name[128], help[256];
		units_metric_name(t, name, sizeof(name));
		snprintf(help, sizeof(help), "Effective value of the tunable %s: %s", t->name,
		         t->help);
		family_head(b, "", name, "", "gauge", help, "");
	} else {
		static const struct {
			const char *name, *help;
		} fixed[F_FIXED] = {
		        [F_RSS] = {"liballoc_process_rss_bytes",
		                   "Resident set size of the process (/proc/<pid>/stat)"},
		        [F_NON_ALLOC] =
		                {"liballoc_process_non_allocator_rss_bytes",
		                 "Resident set size minus what the allocator holds resident: "
		                 "code, stacks, other mappings (at least 0)"},
		        [F_THREADS] = {"liballoc_process_threads", "Threads of the process"},
		        [F_ALLOC_THREADS] = {"liballoc_allocator_threads",
		                             "Threads that used the allocator and have not exited"},
		        [F_ARENAS] = {"liballoc_arenas", "Arenas in use"},
		        [F_CONTROL] = {"liballoc_control_running",
		                       "1 if the process's control thread runs (commands are "
		                       "answered)"},
		        [F_BUILD] = {"liballoc_build_info",
		                     "The liballoc version a process runs and its segment ABI "
		                     "(always 1)"},
		        [F_FOREIGN] =
		                {"liballoc_foreign_allocator_info",
		                 "Another allocator's library mapped in the process (always 1): "
		                 "its own statistics no longer describe the process's memory"},
		        [F_UNREADABLE] = {"liballoc_process_unreadable",
		                          "1 while the process's statistics cannot be read "
		                          "consistently (its other series are left out then)"},
		        [F_INFO] = {"liballoc_process_info",
		                    "Identity of the process from /proc: the name it was run as, "
		                    "the segment's owner, its pid in its own pid namespace and "
		                    "that namespace (a container's), its cgroup"},
		        [F_PROFILE] = {"liballoc_process_profile_info",
		                       "The profile allocctld applied to the process (always 1; no "
		                       "series: none)"},
		        [F_CONTROL_FAILED] =
		                {"liballoc_control_failed",
		                 "1 if the process's control thread could not start "
		                 "(commands fail; LIBALLOC_CONTROL=0 is not a failure)"},
		        [F_SERVICE_PROCS] = {"liballoc_service_processes",
		                             "Processes of the service now (metrics_mode = "
		                             "service)"},
		};
		family_head(b, "", fixed[f - F_OTHER0].name, "", "gauge", fixed[f - F_OTHER0].help,
		            "");
	}
	return true;
}

static uint64_t field(const void *base, size_t off)
{
	uint64_t v;
	memcpy(&v, (const char *)base + off, sizeof(v));
	return v;
}

/* Write sample (f, process i, sub-item a); returns false when i has no more sub-items. */
static bool sample(struct scrape *s, int f, struct snapx *x, uint32_t a)
{
	struct evbuffer *b = s->out;
	const struct proc_snap *sn = &x->s;
	const struct proc *p = sn->p;
	bool readable = !sn->unreadable;
	if (f < F_TOTAL0) {
		if (readable)
			evbuffer_add_printf(
			        b, "liballoc_%s_bytes{%s} %llu\n", figures[f - F_FIG0].name,
			        x->labels,
			        (unsigned long long)field(&sn->mem, figures[f - F_FIG0].off));
		return false;
	}
	if (f < F_ARENA_FIG0) {
		const struct counter_desc *c = &counters[f - F_TOTAL0];
		if (readable)
			evbuffer_add_printf(b, "liballoc_%s%s{%s} %llu\n", c->name,
			                    c->kind == LA_COUNTER ? "_total" : "", x->labels,
			                    (unsigned long long)field(&sn->total, c->off));
		return false;
	}
	if (f < F_ARENA0) {
		if (!readable || a >= sn->narenas)
			return false;
		struct la_memory m;
		la_memory_of(&sn->arenas[a].c, &m);
		evbuffer_add_printf(b, "liballoc_arena_%s_bytes{%s,arena=\"%u\"} %llu\n",
		                    figures[f - F_ARENA_FIG0].name, x->labels, sn->arenas[a].index,
		                    (unsigned long long)field(&m, figures[f - F_ARENA_FIG0].off));
		return a + 1 < sn->narenas;
	}
	if (f < F_CLASS0) {
		const struct counter_desc *c = &counters[f - F_ARENA0];
		if (!readable || a >= sn->narenas)
			return false;
		evbuffer_add_printf(b, "liballoc_arena_%s%s{%s,arena=\"%u\"} %llu\n", c->name,
		                    c->kind == LA_COUNTER ? "_total" : "", x->labels,
		                    sn->arenas[a].index,
		                    (unsigned long long)field(&sn->arenas[a].c, c->off));
		return a + 1 < sn->narenas;
	}
	if (f < F_TUN0) {
		const struct counter_desc *c = &class_stats[f - F_CLASS0];
		if (!readable || !x->cls || a >= x->ncls)
			return false;
		evbuffer_add_printf(b, "liballoc_class_%s%s{%s,size=\"%llu\"} %llu\n", c->name,
		                    c->kind == LA_COUNTER ? "_total" : "", x->labels,
		                    (unsigned long long)x->cls[a].size,
		                    (unsigned long long)field(&x->cls[a].s, c->off));
		return a + 1 < x->ncls;
	}
	if (f < F_OTHER0) {
		const struct tunable_info *t = &tunable_table[f - F_TUN0];
		uint32_t k = (uint32_t)(f - F_TUN0);
		if (readable && k < sn->ntun) {
			char name[128], v[32];
			units_metric_name(t, name, sizeof(name));
			units_metric_value(t, sn->tun[k].value, v, sizeof(v));
			evbuffer_add_printf(b, "%s{%s} %s\n", name, x->labels, v);
		}
		return false;
	}
	const struct la_shm_header *h = &p->seg.hdr;
	const struct group *g = x->g;
	switch (f - F_OTHER0) {
	case F_RSS:
		evbuffer_add_printf(b, "liballoc_process_rss_bytes{%s} %llu\n", x->labels,
		                    (unsigned long long)sn->rss_bytes);
		break;
	case F_NON_ALLOC:
		if (readable)
			evbuffer_add_printf(
			        b, "liballoc_process_non_allocator_rss_bytes{%s} %llu\n", x->labels,
			        (unsigned long long)sn->non_allocator_rss_bytes);
		break;
	case F_THREADS:
		evbuffer_add_printf(b, "liballoc_process_threads{%s} %u\n", x->labels, sn->threads);
		break;
	case F_ALLOC_THREADS:
		evbuffer_add_printf(
		        b, "liballoc_allocator_threads{%s} %llu\n", x->labels,
		        (unsigned long long)(g ? g->allocator_threads : h->allocator_threads));
		break;
	case F_ARENAS:
		evbuffer_add_printf(b, "liballoc_arenas{%s} %u\n", x->labels,
		                    g ? g->arenas : h->arena_count);
		break;
	case F_CONTROL:
		evbuffer_add_printf(b, "liballoc_control_running{%s} %u\n", x->labels,
		                    g ? g->control_running
		                      : (unsigned)(h->control_state == LA_CONTROL_RUNNING));
		break;
	case F_CONTROL_FAILED:
		evbuffer_add_printf(b, "liballoc_control_failed{%s} %u\n", x->labels,
		                    g ? g->control_failed
		                      : (unsigned)(h->control_state == LA_CONTROL_FAILED));
		break;
	case F_SERVICE_PROCS:
		evbuffer_add_printf(b, "liballoc_service_processes{%s} %u\n", x->labels,
		                    g ? g->procs : 1);
		break;
	case F_BUILD:
		evbuffer_add_printf(
		        b, "liballoc_build_info{%s,version=\"%.15s\",segment_abi=\"%u\"} 1\n",
		        x->labels, h->version, h->abi_version);
		break;
	case F_FOREIGN: {
		uint32_t bit = 1u << a;
		if (a >= 32)
			return false;
		const char *fa = la_foreign_name(bit);
		if ((h->foreign_allocators & bit) && fa)
			evbuffer_add_printf(
			        b, "liballoc_foreign_allocator_info{%s,allocator=\"%s\"} 1\n",
			        x->labels, fa);
		return a + 1 < 32;
	}
	case F_UNREADABLE:
		evbuffer_add_printf(b, "liballoc_process_unreadable{%s} %u\n", x->labels,
		                    g ? g->unreadable : (unsigned)sn->unreadable);
		break;
	case F_INFO: {
		char name[2 * PROCFS_COMM_MAX], cg[2 * sizeof(p->cgroup)];
		label_value(name, sizeof(name), proc_name(p));
		label_value(cg, sizeof(cg), p->cgroup);
		evbuffer_add_printf(b,
		                    "liballoc_process_info{%s,name=\"%s\",owner_uid=\"%u\","
		                    "ns_pid=\"%d\",pid_namespace=\"%llu\",cgroup=\"%s\"} 1\n",
		                    x->labels, name, p->seg.uid, p->seg.nspid,
		                    (unsigned long long)h->pidns_ino, cg);
		break;
	}
	case F_PROFILE: {
		const char *profile = policy_proc_profile(p); /* names need no escaping */
		if (profile)
			evbuffer_add_printf(b,
			                    "liballoc_process_profile_info{%s,profile=\"%s\"} 1\n",
			                    x->labels, profile);
		break;
	}
	}
	return false;
}

static void write_own(struct scrape *s)
{
	struct ctld *d = s->d;
	struct evbuffer *b = s->out;
	family_head(b, "", "liballoc_ctld_build_info", "", "gauge",
	            "allocctld's version, control protocol and segment ABI (always 1)", "");
	evbuffer_add_printf(b,
	                    "liballoc_ctld_build_info{version=\"%s\",protocol=\"%u\","
	                    "segment_abi=\"%u\"} 1\n",
	                    CTLD_VERSION, CTL_PROTOCOL_VERSION, LA_SHM_ABI_VERSION);
	family_head(b, "", "liballoc_ctld_processes", "", "gauge", "Processes with a valid segment",
	            "");
	evbuffer_add_printf(b, "liballoc_ctld_processes %d\n", d->nprocs);
	const struct {
		const char *name, *help;
		uint64_t v;
	} own[] = {
	        {"liballoc_ctld_segments_rejected_total", "Segment files refused as invalid",
	         d->st.segments_rejected},
	        {"liballoc_ctld_segments_stale_removed_total", "Stale segment files removed",
	         d->st.segments_stale_removed},
	        {"liballoc_ctld_segments_over_cap_total",
	         "Segments left out because their uid had max_segments_per_uid",
	         d->st.segments_over_cap},
	        {"liballoc_ctld_unreadable_reads_total",
	         "Reads of a process whose statistics' seqlock did not settle",
	         d->st.unreadable_reads},
	        {"liballoc_ctld_requests_total", "Control requests received", d->st.requests},
	        {"liballoc_ctld_requests_denied_total", "Control requests refused for permission",
	         d->st.requests_denied},
	        {"liballoc_ctld_requests_malformed_total", "Malformed control requests",
	         d->st.requests_malformed},
	        {"liballoc_ctld_connections_refused_total",
	         "Control connections refused at a connection cap", d->st.connections_refused},
	        {"liballoc_ctld_commands_total", "Mailbox commands sent", d->st.commands},
	        {"liballoc_ctld_command_timeouts_total", "Mailbox commands that timed out",
	         d->st.command_timeouts},
	        {"liballoc_ctld_scrapes_total", "Scrapes of /metrics", d->st.scrapes},
	        {"liballoc_ctld_http_requests_total", "HTTP requests received",
	         d->st.http_requests},
	        {"liballoc_ctld_http_refused_total",
	         "HTTP connections or requests refused (caps, Host, method)", d->st.http_refused},
	        {"liballoc_ctld_http_timeouts_total",
	         "HTTP connections closed at the request deadline", d->st.http_timeouts},
	        {"liballoc_ctld_rescans_total",
	         "Scans of the run directories completed (periodic, and after directory events)",
	         d->st.rescans},
	        {"liballoc_ctld_loop_lag_probes_total",
	         "Firings of the loop-lag probe (armed while sliced work is pending)",
	         d->st.loop_lag_probes},
	};
	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++) {
		family_head(b, "", own[i].name, "", "counter", own[i].help, "");
		evbuffer_add_printf(b, "%s %llu\n", own[i].name, (unsigned long long)own[i].v);
	}
	const struct {
		const char *name, *help;
		uint64_t ns;
	} loop[] = {
	        {"liballoc_ctld_loop_lag_max_seconds",
	         "Longest lateness of the loop-lag probe: how long the event loop went without "
	         "polling its sockets while sliced work was pending",
	         d->st.loop_lag_max_ns},
	        {"liballoc_ctld_loop_busy_max_seconds",
	         "Most CPU time the event loop spent between arming the loop-lag probe and its "
	         "firing (the lateness without the time the daemon was not running)",
	         d->st.loop_busy_max_ns},
	};
	for (size_t i = 0; i < sizeof(loop) / sizeof(loop[0]); i++) {
		family_head(b, "", loop[i].name, "", "gauge", loop[i].help, "");
		evbuffer_add_printf(b, "%s %.6f\n", loop[i].name, (double)loop[i].ns / 1e9);
	}
	audit_write_metrics(&d->audit, b);
	timeline_write_metrics(d, b);
	policy_write_metrics(d, b);
}

static int json_to_evbuffer(const char *buf, size_t size, void *data)
{
	return evbuffer_add(data, buf, size);
}

/* One process of /api/processes, as its own small jansson object (the document is written
 * in slices: never one tree of every process). */
static void json_process(struct scrape *s, struct snapx *x, bool first)
{
	struct evbuffer *b = s->out;
	const struct proc_snap *sn = &x->s;
	const struct proc *p = sn->p;
	const struct la_shm_header *h = &p->seg.hdr;
	json_t *o = json_pack("{s:i,s:i,s:i,s:o,s:o,s:o,s:I,s:I,s:i,s:I,s:i,s:s,s:b,s:s}", "pid",
	                      h->pid, "uid", (int)proc_uid(p), "owner_uid", (int)p->seg.uid, "exe",
	                      json_text(proc_exe(p)), "name", json_text(proc_name(p)), "cmdline",
	                      json_text(p->id.cmdline), "rss_bytes", (json_int_t)sn->rss_bytes,
	                      "non_allocator_rss_bytes", (json_int_t)sn->non_allocator_rss_bytes,
	                      "threads", (int)sn->threads, "allocator_threads",
	                      (json_int_t)h->allocator_threads, "arenas", (int)h->arena_count,
	                      "control", seg_control_name(h->control_state), "unreadable",
	                      sn->unreadable, "version", h->version);
#define MET_X_JSON(fig, help) \
	if (o)                \
		json_object_set_new(o, #fig "_bytes", json_integer((json_int_t)sn->mem.fig));
	LA_MEMORY(MET_X_JSON)
#undef MET_X_JSON
	if (!first)
		evbuffer_add(b, ",", 1);
	if (!o) { /* out of memory: the process is still listed */
		evbuffer_add_printf(b, "{\"pid\":%d}", h->pid);
		return;
	}
	json_dump_callback(o, json_to_evbuffer, b, JSON_COMPACT);
	json_decref(o);
}

/* metrics_mode = service: sum the snapshots into one entry per service (plus what its
 * exited processes counted). Quadratic in services, linear in processes; false when out of
 * memory (the scrape then fails). */
static bool build_groups(struct scrape *s)
{
	s->groups = calloc((size_t)s->nprocs + 1, sizeof(*s->groups));
	struct group *gs = s->sums = calloc((size_t)s->nprocs + 1, sizeof(*gs));
	if (!s->groups || !gs)
		return false;
	for (int i = 0; i < s->nprocs; i++) {
		const struct snapx *x = &s->x[i];
		if (!x->s.p)
			continue;
		char labels[sizeof(x->labels)];
		service_labels(x->s.p, labels, sizeof(labels));
		int k = 0;
		while (k < s->ngroups && strcmp(s->groups[k].labels, labels))
			k++;
		struct snapx *gx = &s->groups[k];
		if (k == s->ngroups) {
			s->ngroups++;
			gx->g = &gs[k];
			gx->s.p = x->s.p;
			snprintf(gx->labels, sizeof(gx->labels), "%s", labels);
			const struct carry *c = carry_of(labels, false);
			if (c)
				gx->s.total = c->c;
		}
		struct group *g = gx->g;
		const struct la_shm_header *h = &x->s.p->seg.hdr;
		la_counters_add(&gx->s.total, &x->s.total);
#define MET_X_SUM(fig, help) gx->s.mem.fig += x->s.mem.fig;
		LA_MEMORY(MET_X_SUM)
#undef MET_X_SUM
		gx->s.rss_bytes += x->s.rss_bytes;
		gx->s.non_allocator_rss_bytes += x->s.non_allocator_rss_bytes;
		gx->s.threads += x->s.threads;
		g->procs++;
		g->control_running += h->control_state == LA_CONTROL_RUNNING;
		g->control_failed += h->control_state == LA_CONTROL_FAILED;
		g->unreadable += x->s.unreadable;
		g->arenas += h->arena_count;
		g->allocator_threads += h->allocator_threads;
	}
	return true;
}

/* Emit until the deadline or the output high mark; true when everything is written. */
static bool emit_step(struct scrape *s, uint64_t deadline)
{
	int n = 0;
	struct snapx *xs = s->service ? s->groups : s->x;
	int nx = s->service ? s->ngroups : s->nprocs;
	while (s->fam < (s->json ? 1 : F_END)) {
		if ((++n & 15) == 0 && seg_now_ns(CLOCK_MONOTONIC) > deadline)
			return false;
		if (evbuffer_get_length(s->out) >= OUT_HIGH) {
			s->waiting = true;
			return false;
		}
		if (s->fam_started != s->fam + 1) {
			s->fam_started = s->fam + 1;
			if (s->json) {
				evbuffer_add_printf(s->out, "{\"processes\":[");
			} else if (!fam_head(s, s->fam)) {
				s->fam++;
				continue;
			}
		}
		if (s->i >= nx) {
			if (s->json)
				evbuffer_add_printf(s->out, "]}\n");
			s->fam++;
			s->i = 0;
			s->a = 0;
			continue;
		}
		struct snapx *x = &xs[s->i];
		if (!x->s.p) {
			s->i++;
			continue;
		}
		if (s->json) {
			bool first = true;
			for (int k = 0; k < s->i; k++)
				if (s->x[k].s.p) {
					first = false;
					break;
				}
			json_process(s, x, first);
			s->i++;
		} else if (sample(s, s->fam, x, s->a)) {
			s->a++;
		} else {
			s->a = 0;
			s->i++;
		}
	}
	if (!s->json)
		write_own(s);
	return true;
}

static void scrape_free(struct scrape *s)
{
	TAILQ_REMOVE(&scrapes, s, link);
	nscrapes--;
	for (int i = 0; i < s->nprocs; i++) {
		if (i < s->collected) {
			proc_snap_free(&s->x[i].s);
			free(s->x[i].cls);
		}
		proc_unref(s->procs[i]);
	}
	free(s->procs);
	free(s->x);
	free(s->sums);
	free(s->groups);
	event_free(s->ev);
	free(s);
}

static void on_step(evutil_socket_t fd, short what, void *arg)
{
	struct scrape *s = arg;
	uint64_t deadline = seg_now_ns(CLOCK_MONOTONIC) + SLICE_NS;
	s->waiting = false;
	if (!collect_step(s, deadline)) {
		slice_again(s->d, s->ev);
		return;
	}
	if (s->service && !s->sums && !build_groups(s)) {
		void (*done)(void *, bool) = s->done;
		void *a = s->arg;
		scrape_free(s);
		done(a, false);
		return;
	}
	if (!emit_step(s, deadline)) {
		if (!s->waiting)
			slice_again(s->d, s->ev);
		return; /* metrics_resume() when the client has read */
	}
	void (*done)(void *, bool) = s->done;
	void *a = s->arg;
	scrape_free(s);
	done(a, true);
}

struct scrape *metrics_start(struct ctld *d, bool json, struct evbuffer *out,
                             void (*done)(void *arg, bool ok), void *arg)
{
	if (nscrapes >= MAX_SCRAPES)
		return NULL;
	struct scrape *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->d = d;
	s->out = out;
	s->done = done;
	s->arg = arg;
	s->json = json;
	s->arenas = !json && d->cfg.metrics_arenas;
	s->classes = !json && d->cfg.metrics_classes;
	s->service = !json && d->cfg.metrics_service;
	s->procs = calloc((size_t)d->nprocs + 1, sizeof(*s->procs));
	s->x = calloc((size_t)d->nprocs + 1, sizeof(*s->x));
	s->ev = event_new(d->base, -1, 0, on_step, s);
	if (!s->procs || !s->x || !s->ev) {
		free(s->procs);
		free(s->x);
		if (s->ev)
			event_free(s->ev);
		free(s);
		return NULL;
	}
	event_priority_set(s->ev, CTLD_PRIO_SLICE);
	struct proc *p;
	TAILQ_FOREACH(p, &d->procs, link)
	{
		proc_ref(p);
		s->procs[s->nprocs++] = p;
	}
	TAILQ_INSERT_TAIL(&scrapes, s, link);
	nscrapes++;
	if (!json)
		d->st.scrapes++;
	slice_again(d, s->ev);
	return s;
}

void metrics_resume(struct scrape *s)
{
	if (s->waiting && !event_pending(s->ev, EV_TIMEOUT, NULL)) {
		s->waiting = false;
		slice_again(s->d, s->ev);
	}
}

void metrics_cancel(struct scrape *s)
{
	scrape_free(s);
}

int metrics_serve(struct ctld *d, const char *path, struct evbuffer *b, const char **ctype)
{
	if (!strcmp(path, "/healthz")) {
		evbuffer_add_printf(b, "ok %d processes\n", d->nprocs);
		*ctype = "text/plain; charset=utf-8";
	} else {
		return 404;
	}
	return 200;
}
