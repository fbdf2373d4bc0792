/* requests.c — one handler per ctl.proto request type. Visibility is by uid: a client sees
 * and acts on the processes whose segment its uid owns (root: all); naming another's
 * process gets ERR_PERMISSION and a log line. Reads answer at once from the segments;
 * commands become jobs (commands.c) whose reply comes later. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.pb-c.h"
#include "ctld.h"
#include "log.h"
#include "pool.h"
#include "units.h"
#include "wire.h"

bool may_see(uid_t client, const struct proc *p)
{
	return client == 0 || client == p->seg.uid;
}

static void reply_init(Ctl__Reply *r, const Ctl__Envelope *env)
{
	ctl__reply__init(r);
	r->protocol_version = CTL_PROTOCOL_VERSION;
	r->has_id = env->has_id;
	r->id = env->id;
	r->code = CTL__ERROR_CODE__OK;
}

static void reply_error(struct conn *c, const Ctl__Envelope *env, Ctl__ErrorCode code,
                        const char *msg)
{
	Ctl__Reply r;
	reply_init(&r, env);
	r.code = code;
	r.message = (char *)msg;
	conn_send_reply(c, &r);
}

/* A refused command (not a read) goes to the audit trail: who tried what on which. */
static void audit_denied(struct ctld *d, struct conn *c, const char *what, const struct proc *p,
                         const char *msg)
{
	static const struct {
		const char *what;
		enum audit_action action;
	} cmds[] = {{"set", AUDIT_A_set},
	            {"trim", AUDIT_A_trim},
	            {"release_idle_heaps", AUDIT_A_release},
	            {"flush_caches", AUDIT_A_flush}};
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		if (strcmp(what, cmds[i].what) != 0)
			continue;
		struct audit_event ev;
		memset(&ev, 0, sizeof(ev));
		audit_set_operator(&ev, conn_uid(c), conn_pid(c));
		ev.action = cmds[i].action;
		ev.result = AUDIT_R_denied;
		if (p) {
			ev.pid = p->seg.hdr.pid;
			ev.target_uid = p->seg.uid;
			snprintf(ev.exe, sizeof(ev.exe), "%.*s", (int)sizeof(ev.exe) - 1,
			         proc_name(p));
		}
		snprintf(ev.message, sizeof(ev.message), "%s", msg);
		audit_record(&d->audit, &ev);
		return;
	}
}

static void deny(struct ctld *d, struct conn *c, const Ctl__Envelope *env, const char *what,
                 const struct proc *p)
{
	int pid = p->seg.hdr.pid;
	char msg[128];
	snprintf(msg, sizeof(msg), "permission denied: pid %d belongs to another user", pid);
	log_warn("denied %s on pid %d to client pid %d uid %u", what, pid, (int)conn_pid(c),
	         conn_uid(c));
	d->st.requests_denied++;
	audit_denied(d, c, what, p, msg);
	reply_error(c, env, CTL__ERROR_CODE__ERR_PERMISSION, msg);
}

static Ctl__Counter **counters_msg(struct pool *pl, const struct la_counters *v, size_t *n)
{
	Ctl__Counter **arr = pool_alloc(pl, sizeof(*arr) * LA_NCOUNTERS);
	if (!arr)
		return NULL;
	size_t i = 0;
#define REQ_X_COUNTER(cname, kind, unit, scope, help)          \
	if ((arr[i] = pool_alloc(pl, sizeof(Ctl__Counter)))) { \
		ctl__counter__init(arr[i]);                    \
		arr[i]->name = #cname;                         \
		arr[i]->value = v->cname;                      \
		i++;                                           \
	}
	LA_COUNTERS(REQ_X_COUNTER)
#undef REQ_X_COUNTER
	*n = i;
	return arr;
}

static Ctl__ProcessInfo *process_info(struct pool *pl, const struct proc_snap *s)
{
	Ctl__ProcessInfo *pi = pool_alloc(pl, sizeof(*pi));
	if (!pi)
		return NULL;
	const struct la_shm_header *h = &s->p->seg.hdr;
	ctl__process_info__init(pi);
	pi->pid = h->pid;
	pi->exe = pool_strdup(pl, proc_exe(s->p));
	pi->name = pool_strdup(pl, proc_name(s->p));
	pi->cmdline = pool_strdup(pl, s->p->id.cmdline);
	if (!pi->exe || !pi->name || !pi->cmdline)
		return NULL;
	pi->uid = proc_uid(s->p);
	pi->has_owner_uid = true;
	pi->owner_uid = s->p->seg.uid;
	pi->start_time_ns = h->created_ns;
	pi->arenas = h->arena_count;
	pi->threads = s->threads;
	pi->has_allocator_threads = true;
	pi->allocator_threads = h->allocator_threads;
	pi->has_unreadable = true;
	pi->unreadable = s->unreadable;
	pi->has_unreadable_reads = true;
	pi->unreadable_reads = s->p->unreadable_reads;
	pi->has_rss_bytes = true;
	pi->rss_bytes = s->rss_bytes;
	pi->control = (char *)seg_control_name(h->control_state);
	pi->version = pool_strdup(pl, h->version);
	Ctl__Memory *m = pool_alloc(pl, sizeof(*m));
	if (!m || !pi->version)
		return NULL;
	ctl__memory__init(m);
#define REQ_X_MEM(name, help)         \
	m->has_##name##_bytes = true; \
	m->name##_bytes = s->mem.name;
	LA_MEMORY(REQ_X_MEM)
#undef REQ_X_MEM
	m->has_address_space_bytes = m->has_rss_bytes = m->has_non_allocator_rss_bytes = true;
	m->address_space_bytes = s->total.address_space_bytes;
	m->rss_bytes = s->rss_bytes;
	m->non_allocator_rss_bytes = s->non_allocator_rss_bytes;
	pi->memory = m;
	uint32_t nforeign = (uint32_t)__builtin_popcount(h->foreign_allocators);
	if (nforeign) {
		pi->foreign_allocators = pool_alloc(pl, sizeof(char *) * nforeign);
		if (!pi->foreign_allocators)
			return NULL;
		for (uint32_t bit = 1; bit; bit <<= 1)
			if ((h->foreign_allocators & bit) && la_foreign_name(bit))
				pi->foreign_allocators[pi->n_foreign_allocators++] =
				        (char *)la_foreign_name(bit);
	}
	if (h->pressure_watching || h->pressure_events) {
		pi->has_pressure_watch = pi->has_pressure_events = true;
		pi->has_pressure_released_bytes = true;
		pi->pressure_watch = h->pressure_watching != 0;
		pi->pressure_events = h->pressure_events;
		pi->pressure_released_bytes = h->pressure_released_bytes;
		pi->has_pressure_response_ns =
		        h->pressure_response_ns != 0; /* 0: none needed one */
		pi->pressure_response_ns = h->pressure_response_ns;
	}
	const char *profile = policy_proc_profile(s->p);
	if (profile && !(pi->profile = pool_strdup(pl, profile)))
		return NULL;
	pi->has_ns_pid = pi->has_pid_namespace = true;
	pi->ns_pid = s->p->seg.nspid;
	pi->pid_namespace = h->pidns_ino;
	if (s->p->cgroup[0] && !(pi->cgroup = pool_strdup(pl, s->p->cgroup)))
		return NULL;
	return pi;
}

static void handle_version(struct conn *c, const Ctl__Envelope *env)
{
	Ctl__Reply r;
	Ctl__VersionReply v = CTL__VERSION_REPLY__INIT;
	reply_init(&r, env);
	v.daemon_version = CTLD_VERSION;
	v.protocol_version = CTL_PROTOCOL_VERSION;
	v.segment_abi_version = LA_SHM_ABI_VERSION;
	r.version = &v;
	conn_send_reply(c, &r);
}

/* A page of the list: pid order from after_pid, at most max (LIST_MAX) processes, ended
 * early when it has taken LIST_BUDGET_NS of loop time (the client asks for the rest with
 * next_pid), so a list of thousands never holds the loop or exceeds a frame. */
#define LIST_MAX       512
#define LIST_MIN       64
#define LIST_BUDGET_NS 3000000ull

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
	return (x > y) - (x < y);
}

/* The pids this client may see after the cursor, in order (malloc'd; NULL: out of
 * memory). */
static pid_t *list_pids(struct ctld *d, struct conn *c, int32_t after, size_t *n)
{
	pid_t *v = malloc(sizeof(*v) * ((size_t)d->nprocs + 1));
	size_t nv = 0;
	struct proc *p;
	TAILQ_FOREACH(p, &d->procs, link)
	if (v && p->seg.hdr.pid > after && may_see(conn_uid(c), p))
		v[nv++] = p->seg.hdr.pid;
	if (v)
		qsort(v, nv, sizeof(*v), cmp_pid);
	*n = nv;
	return v;
}

/* Send the page of pids[*pos..] (the reply's id: has_id, id; streamed:
 * ListReply.streamed); a pid gone meanwhile is left out. Returns whether more follow
 * (*pos advanced; next_pid is the last pid the page covered). */
static bool list_page(struct ctld *d, struct conn *c, bool has_id, uint64_t id, const pid_t *pids,
                      size_t n, size_t *pos, uint32_t max, bool streamed)
{
	struct pool pl;
	pool_init(&pl);
	Ctl__Reply r;
	Ctl__ListReply lr = CTL__LIST_REPLY__INIT;
	ctl__reply__init(&r);
	r.protocol_version = CTL_PROTOCOL_VERSION;
	r.has_id = has_id;
	r.id = id;
	r.code = CTL__ERROR_CODE__OK;
	r.list = &lr;
	lr.has_streamed = streamed;
	lr.streamed = streamed;
	lr.processes = pool_alloc(&pl, sizeof(*lr.processes) * (max + 1));
	uint64_t deadline = seg_now_ns(CLOCK_MONOTONIC) + LIST_BUDGET_NS;
	size_t i = *pos;
	for (; pids && lr.processes && i < n && lr.n_processes < max; i++) {
		/* the budget ends a page only after LIST_MIN processes: on a loaded machine a
		 * page of one would make a list of thousands thousands of round trips */
		if (lr.n_processes >= LIST_MIN && seg_now_ns(CLOCK_MONOTONIC) > deadline)
			break;
		struct proc *p = discover_find(d, pids[i]);
		if (!p || !may_see(conn_uid(c), p))
			continue;
		proc_ref(p);
		struct proc_snap s;
		bool ok = proc_snapshot(d, p, &s, 0, PROC_RECENT_NS) || s.unreadable;
		Ctl__ProcessInfo *pi = ok && !p->gone ? process_info(&pl, &s) : NULL;
		if (pi)
			lr.processes[lr.n_processes++] = pi;
		proc_snap_free(&s);
		proc_unref(p);
	}
	bool more = false;
	if (!pids || !lr.processes) {
		r.code = CTL__ERROR_CODE__ERR_INTERNAL;
		r.message = "out of memory";
		r.list = NULL;
	} else if (i < n) {
		/* (i > *pos: a page covers at least one pid) */
		more = true;
		lr.has_next_pid = true;
		lr.next_pid = pids[i - 1];
	}
	*pos = i;
	conn_send_reply(c, &r);
	pool_free(&pl);
	return more;
}

/* A streamed list (ListRequest.stream): the first page at once, then one page per loop
 * turn from an event at the priority of I/O, so other clients' requests and the sampler's
 * slices take turns with it, and only while the client's unread output is within one
 * frame (else when it has drained: requests_conn_drained). The connection's further
 * requests wait until the last page (the list is its job: conn_job_done). */
struct list_stream {
	TAILQ_ENTRY(list_stream) link;
	struct ctld *d;
	struct conn *c;
	struct event *ev;
	bool has_id, waiting;
	uint64_t id;
	pid_t *pids; /* sorted once, when asked: the list is of the processes seen then */
	size_t n, pos;
	uint32_t max;
};
static TAILQ_HEAD(, list_stream) streams = TAILQ_HEAD_INITIALIZER(streams);

static void stream_free(struct list_stream *s)
{
	TAILQ_REMOVE(&streams, s, link);
	event_free(s->ev);
	free(s->pids);
	free(s);
}

static void stream_next(struct list_stream *s)
{
	s->waiting = conn_output_len(s->c) > CTL_MAX_FRAME;
	if (!s->waiting)
		slice_again(s->d, s->ev);
}

static void on_stream(evutil_socket_t fd, short what, void *arg)
{
	struct list_stream *s = arg;
	if (list_page(s->d, s->c, s->has_id, s->id, s->pids, s->n, &s->pos, s->max, true)) {
		stream_next(s);
		return;
	}
	struct conn *c = s->c;
	stream_free(s);
	conn_job_done(c);
}

void requests_conn_drained(struct ctld *d, struct conn *c)
{
	struct list_stream *s;
	TAILQ_FOREACH(s, &streams, link)
	if (s->c == c && s->waiting)
		stream_next(s);
}

void requests_conn_closed(struct ctld *d, struct conn *c)
{
	struct list_stream *s, *t;
	TAILQ_FOREACH_SAFE(s, &streams, link, t)
	if (s->c == c)
		stream_free(s);
}

/* Returns true while a stream owns the connection's next replies. */
static bool handle_list(struct ctld *d, struct conn *c, const Ctl__Envelope *env)
{
	const Ctl__ListRequest *req = env->list;
	int32_t after = req && req->has_after_pid ? req->after_pid : 0;
	uint32_t max = req && req->has_max && req->max && req->max < LIST_MAX ? req->max : LIST_MAX;
	size_t n, pos = 0;
	pid_t *pids = list_pids(d, c, after, &n);
	struct list_stream *s = NULL;
	if (req && req->has_stream && req->stream && pids && (s = calloc(1, sizeof(*s))) &&
	    !(s->ev = event_new(d->base, -1, 0, on_stream, s))) {
		free(s);
		s = NULL; /* pages as before: the client asks for each (streamed unset) */
	}
	if (s) /* a page per loop turn, like other long work */
		event_priority_set(s->ev, CTLD_PRIO_SLICE);
	if (!list_page(d, c, env->has_id, env->id, pids, n, &pos, max, s != NULL) || !s) {
		if (s) {
			event_free(s->ev);
			free(s);
		}
		free(pids);
		return false;
	}
	*s = (struct list_stream){.d = d,
	                          .c = c,
	                          .ev = s->ev,
	                          .has_id = env->has_id,
	                          .id = env->id,
	                          .pids = pids,
	                          .n = n,
	                          .pos = pos,
	                          .max = max};
	TAILQ_INSERT_TAIL(&streams, s, link);
	stream_next(s);
	return true;
}

#define ARENA_PAGE_MAX 256

/* Find the process pid for this client: NULL after replying with the reason. */
static struct proc *lookup(struct ctld *d, struct conn *c, const Ctl__Envelope *env, int pid,
                           const char *what)
{
	struct proc *p = discover_find(d, pid);
	if (!p) {
		char msg[96];
		snprintf(msg, sizeof(msg), "no such process: pid %d has no liballoc segment", pid);
		reply_error(c, env, CTL__ERROR_CODE__ERR_NO_PROCESS, msg);
		return NULL;
	}
	if (!may_see(conn_uid(c), p)) {
		deny(d, c, env, what, p);
		return NULL;
	}
	return p;
}

static void handle_stats(struct ctld *d, struct conn *c, const Ctl__Envelope *env)
{
	struct proc *p = lookup(d, c, env, env->stats->pid, "stats");
	if (!p)
		return;
	struct proc_snap s;
	if (!proc_snapshot(d, p, &s, SNAP_ARENAS | SNAP_TUNABLES, 0)) {
		reply_error(c, env, CTL__ERROR_CODE__ERR_FAILED,
		            s.unreadable ? "its statistics are unreadable: a lock in its segment "
		                           "stays held (a stopped or misbehaving process); read "
		                           "again with back-off"
		                         : "the segment could not be read consistently (see the "
		                           "daemon log)");
		return;
	}
	struct pool pl;
	pool_init(&pl);
	Ctl__Reply r;
	Ctl__StatsReply sr = CTL__STATS_REPLY__INIT;
	reply_init(&r, env);
	r.stats = &sr;
	bool ok = (sr.process = process_info(&pl, &s)) &&
	          (sr.totals = counters_msg(&pl, &s.total, &sr.n_totals));
	/* arenas in pages (first_arena, at most max_arenas): every page fits a frame */
	uint32_t first = env->stats->has_first_arena ? env->stats->first_arena : 0;
	uint32_t amax = env->stats->has_max_arenas && env->stats->max_arenas &&
	                                env->stats->max_arenas < ARENA_PAGE_MAX
	                        ? env->stats->max_arenas
	                        : ARENA_PAGE_MAX;
	uint32_t end = first < s.narenas ? first + amax : first;
	if (end > s.narenas)
		end = s.narenas;
	sr.has_arena_count = true;
	sr.arena_count = s.narenas;
	if (end < s.narenas) {
		sr.has_next_arena = true;
		sr.next_arena = end;
	}
	sr.arenas = pool_alloc(&pl, sizeof(*sr.arenas) * (end - (first < end ? first : end) + 1));
	ok = ok && sr.arenas;
	for (uint32_t i = first; ok && i < end; i++) {
		Ctl__ArenaStats *a = pool_alloc(&pl, sizeof(*a));
		if (!(ok = a != NULL))
			break;
		ctl__arena_stats__init(a);
		a->index = s.arenas[i].index;
		a->threads = s.arenas[i].threads;
		ok = (a->counters = counters_msg(&pl, &s.arenas[i].c, &a->n_counters)) != NULL;
		sr.arenas[sr.n_arenas++] = a;
	}
	uint32_t ncls = 0;
	struct la_shm_class *cls = NULL;
	if (ok && p->seg.hdr.class_count) {
		cls = calloc(p->seg.hdr.class_count, sizeof(*cls));
		if (!cls || seg_read_classes(&p->seg, cls, p->seg.hdr.class_count, &ncls))
			ncls = 0;
	}
	sr.classes = pool_alloc(&pl, sizeof(*sr.classes) * (ncls + 1));
	ok = ok && sr.classes;
	for (uint32_t i = 0; ok && i < ncls; i++) {
		Ctl__ClassStats *cs = pool_alloc(&pl, sizeof(*cs));
		Ctl__Counter **arr = pool_alloc(&pl, sizeof(*arr) * 8);
		if (!(ok = cs && arr))
			break;
		ctl__class_stats__init(cs);
		cs->size = cls[i].size;
		cs->counters = arr;
#define REQ_X_CLASS(cname, kind, unit, help)                                 \
	if ((arr[cs->n_counters] = pool_alloc(&pl, sizeof(Ctl__Counter)))) { \
		ctl__counter__init(arr[cs->n_counters]);                     \
		arr[cs->n_counters]->name = #cname;                          \
		arr[cs->n_counters]->value = cls[i].s.cname;                 \
		cs->n_counters++;                                            \
	}
		LA_CLASS_STATS(REQ_X_CLASS)
#undef REQ_X_CLASS
		sr.classes[sr.n_classes++] = cs;
	}
	free(cls);
	sr.tunables = pool_alloc(&pl, sizeof(*sr.tunables) * (s.ntun + 1));
	ok = ok && sr.tunables;
	struct la_shm_hold holds[LA_NTUNABLES];
	uint32_t nholds = 0;
	if (seg_read_holds(&p->seg, holds, &nholds) != SEG_E_OK)
		nholds = 0;
	uint64_t now = seg_now_ns(CLOCK_MONOTONIC);
	for (uint32_t i = 0; ok && i < s.ntun; i++) {
		const struct tunable_info *ti = &tunable_table[i];
		Ctl__Tunable *tu = pool_alloc(&pl, sizeof(*tu));
		if (!(ok = tu != NULL))
			break;
		ctl__tunable__init(tu);
		tu->name = (char *)ti->name;
		tu->value = s.tun[i].value;
		tu->has_explicitly_set = tu->has_min = tu->has_max = tu->has_live = true;
		tu->explicitly_set = s.tun[i].source != LA_SRC_default;
		tu->source = (char *)la_source_name(s.tun[i].source);
		tu->min = ti->min;
		tu->max = ti->max;
		tu->live = ti->live;
		tu->type = (char *)units_type_name(ti->type);
		tu->help = (char *)ti->help;
		if (i < nholds)
			tunable_add_hold(tu, &holds[i], now);
		sr.tunables[sr.n_tunables++] = tu;
	}
	if (!ok) {
		reply_init(&r, env);
		r.code = CTL__ERROR_CODE__ERR_INTERNAL;
		r.message = "out of memory";
	}
	conn_send_reply(c, &r);
	pool_free(&pl);
	proc_snap_free(&s);
}

/* Resolve a Target to the processes this client may act on. Returns the count (targets
 * malloc'd into *out), or -1 after replying with the reason. */
static int resolve(struct ctld *d, struct conn *c, const Ctl__Envelope *env, const Ctl__Target *t,
                   const char *what, struct proc ***out)
{
	*out = calloc((size_t)d->nprocs + 1, sizeof(**out));
	if (!*out) {
		reply_error(c, env, CTL__ERROR_CODE__ERR_INTERNAL, "out of memory");
		return -1;
	}
	int n = 0;
	if (!t || (!t->has_pid && !t->exe && !(t->has_all && t->all))) {
		reply_error(c, env, CTL__ERROR_CODE__ERR_UNKNOWN_REQUEST,
		            "the target names no process (give pid, exe or all)");
		goto fail;
	}
	if (t->has_pid) {
		struct proc *p = lookup(d, c, env, t->pid, what);
		if (!p)
			goto fail;
		(*out)[n++] = p;
		return n;
	}
	int hidden = 0;
	struct proc *p;
	TAILQ_FOREACH(p, &d->procs, link)
	{
		if (t->exe && !(proc_identity(p, false) && proc_name_matches(p, t->exe)))
			continue;
		if (!may_see(conn_uid(c), p)) {
			hidden++;
			continue;
		}
		(*out)[n++] = p;
	}
	if (t->exe && n == 0) {
		char msg[LA_EXE_MAX + 64];
		if (hidden) {
			snprintf(msg, sizeof(msg),
			         "permission denied: every process of %.200s "
			         "belongs to another user",
			         t->exe);
			log_warn("denied %s on exe %.200s to client pid %d uid %u", what, t->exe,
			         (int)conn_pid(c), conn_uid(c));
			d->st.requests_denied++;
			audit_denied(d, c, what, NULL, msg);
			reply_error(c, env, CTL__ERROR_CODE__ERR_PERMISSION, msg);
		} else {
			snprintf(msg, sizeof(msg), "no process named %.200s runs under liballoc",
			         t->exe);
			reply_error(c, env, CTL__ERROR_CODE__ERR_NO_PROCESS, msg);
		}
		goto fail;
	}
	return n;
fail:
	free(*out);
	*out = NULL;
	return -1;
}

static bool start(struct ctld *d, struct conn *c, const Ctl__Envelope *env, enum job_kind kind,
                  const Ctl__Target *target, const char *what, const struct job_step *steps,
                  int nsteps)
{
	struct proc **targets;
	int n = resolve(d, c, env, target, what, &targets);
	if (n < 0)
		return false;
	log_debug("%s on %d process(es) for client pid %d uid %u", what, n, (int)conn_pid(c),
	          conn_uid(c));
	commands_start(d, c, env->has_id ? env->id : 0, kind, targets, n, steps, nsteps);
	free(targets);
	return true;
}

static bool handle_get(struct ctld *d, struct conn *c, const Ctl__Envelope *env)
{
	struct job_step steps[LA_NTUNABLES];
	int n = 0;
	const Ctl__GetRequest *g = env->get;
	if (g->n_names > LA_NTUNABLES) {
		reply_error(c, env, CTL__ERROR_CODE__ERR_UNKNOWN_TUNABLE, "too many names");
		return false;
	}
	for (size_t i = 0; i < (g->n_names ? g->n_names : LA_NTUNABLES); i++) {
		const struct tunable_info *ti =
		        g->n_names ? tunable_find(g->names[i]) : &tunable_table[i];
		if (!ti) {
			char msg[128];
			snprintf(msg, sizeof(msg), "unknown tunable '%.64s'", g->names[i]);
			reply_error(c, env, CTL__ERROR_CODE__ERR_UNKNOWN_TUNABLE, msg);
			return false;
		}
		memset(&steps[n], 0, sizeof(steps[n]));
		steps[n].cmd.command = LA_CMD_get;
		snprintf(steps[n].cmd.name, sizeof(steps[n].cmd.name), "%s", ti->name);
		steps[n].tunable = (int)(ti - tunable_table);
		n++;
	}
	Ctl__Target t = CTL__TARGET__INIT;
	t.has_pid = true;
	t.pid = g->pid;
	return start(d, c, env, JOB_GET, &t, "get", steps, n);
}

/* The longest hold of a set (allocctl set --for): 30 days. */
#define SET_HOLD_MAX_MS (30ull * 24 * 3600 * 1000)

static bool handle_set(struct ctld *d, struct conn *c, const Ctl__Envelope *env)
{
	struct job_step steps[LA_NTUNABLES];
	const Ctl__SetRequest *s = env->set;
	if (s->n_assignments == 0 || s->n_assignments > LA_NTUNABLES) {
		reply_error(c, env, CTL__ERROR_CODE__ERR_UNKNOWN_TUNABLE,
		            s->n_assignments ? "too many assignments" : "no assignment given");
		return false;
	}
	if (s->has_hold_ms && s->hold_ms > SET_HOLD_MAX_MS) {
		char msg[128];
		snprintf(msg, sizeof(msg), "hold of %llu ms is out of range (at most 30 days)",
		         (unsigned long long)s->hold_ms);
		reply_error(c, env, CTL__ERROR_CODE__ERR_RANGE, msg);
		return false;
	}
	for (size_t i = 0; i < s->n_assignments; i++) {
		const Ctl__SetRequest__Assignment *a = s->assignments[i];
		const struct tunable_info *ti = tunable_find(a->name);
		char msg[256];
		if (!ti) {
			snprintf(msg, sizeof(msg), "unknown tunable '%.64s'", a->name);
			reply_error(c, env, CTL__ERROR_CODE__ERR_UNKNOWN_TUNABLE, msg);
			return false;
		}
		if (!ti->live) {
			snprintf(msg, sizeof(msg), "%s cannot change while the process runs",
			         ti->name);
			reply_error(c, env, CTL__ERROR_CODE__ERR_READONLY, msg);
			return false;
		}
		memset(&steps[i], 0, sizeof(steps[i]));
		if (units_parse_tunable(ti, a->value, &steps[i].cmd.value, msg, sizeof(msg))) {
			reply_error(c, env, CTL__ERROR_CODE__ERR_RANGE, msg);
			return false;
		}
		steps[i].cmd.command = LA_CMD_set;
		steps[i].cmd.arg = s->has_hold_ms ? s->hold_ms : 0; /* the library's hold, in ms */
		snprintf(steps[i].cmd.name, sizeof(steps[i].cmd.name), "%s", ti->name);
		steps[i].tunable = (int)(ti - tunable_table);
	}
	return start(d, c, env, JOB_SET, s->target, "set", steps, (int)s->n_assignments);
}

static bool handle_simple(struct ctld *d, struct conn *c, const Ctl__Envelope *env,
                          enum job_kind kind, uint32_t cmd, const Ctl__Target *t, uint64_t arg)
{
	struct job_step step;
	memset(&step, 0, sizeof(step));
	step.cmd.command = cmd;
	step.cmd.arg = arg;
	step.tunable = -1;
	return start(d, c, env, kind, t, seg_command_name(cmd), &step, 1);
}

/* At most this many audit events per reply (about 300 bytes each, far below the frame
 * cap); a client asks again from the last seq it got. */
#define LOG_MAX_EVENTS 1000

static void handle_log(struct ctld *d, struct conn *c, const Ctl__Envelope *env)
{
	const Ctl__LogRequest *lq = env->log;
	uint32_t limit = lq->has_limit && lq->limit ? lq->limit : LOG_MAX_EVENTS;
	if (limit > LOG_MAX_EVENTS)
		limit = LOG_MAX_EVENTS;
	struct pool pl;
	pool_init(&pl);
	Ctl__Reply r;
	Ctl__LogReply lr = CTL__LOG_REPLY__INIT;
	reply_init(&r, env);
	r.log = &lr;
	lr.first_seq = audit_first_seq(&d->audit);
	lr.next_seq = d->audit.next_seq;
	lr.events = pool_alloc(&pl, sizeof(*lr.events) * limit);
	const struct audit_event *ev;
	uint64_t after = lq->has_after_seq ? lq->after_seq : 0;
	while (lr.events && lr.n_events < limit && (ev = audit_next(&d->audit, after))) {
		after = ev->seq;
		if (!audit_visible(ev, conn_uid(c)))
			continue;
		Ctl__AuditEvent *e = pool_alloc(&pl, sizeof(*e));
		if (!e) {
			lr.events = NULL;
			break;
		}
		ctl__audit_event__init(e);
		e->seq = ev->seq;
		e->time_ns = ev->time_ns;
		e->trigger = (char *)audit_trigger_name(ev->trigger);
		e->actor = pool_strdup(&pl, ev->actor);
		e->action = (char *)audit_action_name(ev->action);
		e->result = (char *)audit_result_name(ev->result);
		if (ev->peer_uid >= 0) {
			e->has_peer_uid = e->has_peer_pid = true;
			e->peer_uid = ev->peer_uid;
			e->peer_pid = ev->peer_pid;
		}
		if (ev->pid) {
			e->has_pid = e->has_uid = true;
			e->pid = ev->pid;
			e->uid = (uint32_t)ev->target_uid;
			e->exe = pool_strdup(&pl, ev->exe);
		}
		if (ev->name[0])
			e->tunable = pool_strdup(&pl, ev->name);
		if (ev->has_values) {
			e->has_old_value = e->has_new_value = true;
			e->old_value = ev->old_value;
			e->new_value = ev->new_value;
		}
		e->has_hold_ms = ev->hold_ms != 0;
		e->hold_ms = ev->hold_ms;
		e->has_arg = ev->arg != 0;
		e->arg = ev->arg;
		e->has_bytes_released = e->has_duration_ns = true;
		e->bytes_released = ev->bytes_released;
		e->duration_ns = ev->duration_ns;
		if (ev->message[0])
			e->message = pool_strdup(&pl, ev->message);
		if (!e->actor || (ev->pid && !e->exe)) {
			lr.events = NULL;
			break;
		}
		lr.events[lr.n_events++] = e;
	}
	if (!lr.events) {
		reply_init(&r, env);
		r.code = CTL__ERROR_CODE__ERR_INTERNAL;
		r.message = "out of memory";
	}
	conn_send_reply(c, &r);
	pool_free(&pl);
}

static void handle_policy(struct ctld *d, struct conn *c, const Ctl__Envelope *env)
{
	struct pool pl;
	pool_init(&pl);
	Ctl__Reply r;
	Ctl__PolicyReply pr = CTL__POLICY_REPLY__INIT;
	reply_init(&r, env);
	r.policy = &pr;
	if (policy_reply(d, conn_uid(c), &pl, &pr)) {
		reply_init(&r, env);
		r.code = CTL__ERROR_CODE__ERR_INTERNAL;
		r.message = "out of memory";
	}
	conn_send_reply(c, &r);
	pool_free(&pl);
}

bool requests_handle(struct ctld *d, struct conn *c, const Ctl__Envelope *env)
{
	switch (env->payload_case) {
	case CTL__ENVELOPE__PAYLOAD_VERSION:
		handle_version(c, env);
		return false;
	case CTL__ENVELOPE__PAYLOAD_LIST:
		return handle_list(d, c, env);
	case CTL__ENVELOPE__PAYLOAD_STATS:
		handle_stats(d, c, env);
		return false;
	case CTL__ENVELOPE__PAYLOAD_GET:
		return handle_get(d, c, env);
	case CTL__ENVELOPE__PAYLOAD_SET:
		return handle_set(d, c, env);
	case CTL__ENVELOPE__PAYLOAD_TRIM:
		return handle_simple(d, c, env, JOB_TRIM, LA_CMD_trim, env->trim->target,
		                     env->trim->has_pad ? env->trim->pad : 0);
	case CTL__ENVELOPE__PAYLOAD_RELEASE:
		return handle_simple(d, c, env, JOB_RELEASE, LA_CMD_release_idle_heaps,
		                     env->release->target, 0);
	case CTL__ENVELOPE__PAYLOAD_FLUSH:
		return handle_simple(d, c, env, JOB_FLUSH, LA_CMD_flush_caches, env->flush->target,
		                     0);
	case CTL__ENVELOPE__PAYLOAD_LOG:
		handle_log(d, c, env);
		return false;
	case CTL__ENVELOPE__PAYLOAD_HISTORY:
		return timeline_request(d, c, env);
	case CTL__ENVELOPE__PAYLOAD_POLICY:
		handle_policy(d, c, env);
		return false;
	default:
		reply_error(c, env, CTL__ERROR_CODE__ERR_UNKNOWN_REQUEST,
		            "unknown or missing request type");
		return false;
	}
}
