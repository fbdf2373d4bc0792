/* fake_ctld.c — a scripted stand-in for allocctld, for the CLI's end-to-end suites.
 * Serves ctl.proto on a Unix socket, one connection at a time, with three fictitious
 * processes whose state (tunables, retained bytes) changes as commands arrive:
 *   4242 /usr/bin/fake-service  (the caller's uid)   4343 /usr/sbin/other-service (caller)
 *   1    /sbin/init             (uid 12345: every request on it gets ERR_PERMISSION)
 * Any other pid gets ERR_NO_PROCESS. Flags make it misbehave on purpose:
 *   --mismatch   answer every request with ERR_VERSION     --garbage   reply undecodable bytes
 *   --hang       accept, never reply                        --empty     list no processes
 * Usage: fake-ctld SOCKET [FLAG]; runs until SIGTERM. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "liballoc_shm.h"
#include "tunable.h"
#include "wire.h"

struct fake_proc {
	int32_t pid;
	const char *exe;
	uint32_t uid;
	uint64_t in_use, cached, mapped, retained;
	int64_t tun[LA_NTUNABLES];
	bool set[LA_NTUNABLES];
};

static struct fake_proc procs[3];
static uint64_t started_ns;
static bool opt_mismatch, opt_garbage, opt_hang, opt_empty;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void procs_init(void)
{
	const struct {
		int32_t pid;
		const char *exe;
		uint32_t uid;
		uint64_t in_use;
	} init[] = {{4242, "/usr/bin/fake-service", getuid(), 300ULL << 20},
	            {4343, "/usr/sbin/other-service", getuid(), 20ULL << 20},
	            {1, "/sbin/init", 12345, 1ULL << 20}};
	for (int i = 0; i < 3; i++) {
		struct fake_proc *p = &procs[i];
		p->pid = init[i].pid;
		p->exe = init[i].exe;
		p->uid = init[i].uid;
		p->in_use = init[i].in_use;
		p->cached = 1ULL << 20;
		p->retained = 812ULL << 20;
		p->mapped = p->in_use + p->cached + p->retained;
		for (size_t t = 0; t < tunable_count; t++)
			p->tun[t] = tunable_table[t].def < 0 ? 16 : tunable_table[t].def;
	}
}

static struct fake_proc *proc_find(int32_t pid)
{
	for (int i = 0; i < 3; i++)
		if (procs[i].pid == pid)
			return &procs[i];
	return NULL;
}

/* OK, ERR_NO_PROCESS or ERR_PERMISSION for acting on pid. */
static int proc_access(int32_t pid, struct fake_proc **out)
{
	struct fake_proc *p = proc_find(pid);
	if (!p)
		return CTL__ERROR_CODE__ERR_NO_PROCESS;
	if (p->uid != getuid()) /* scripted: refused even to root, to test the message */
		return CTL__ERROR_CODE__ERR_PERMISSION;
	*out = p;
	return CTL__ERROR_CODE__OK;
}

static Ctl__ProcessInfo *proc_info(const struct fake_proc *p)
{
	Ctl__ProcessInfo *i = calloc(1, sizeof(*i));
	ctl__process_info__init(i);
	i->pid = p->pid;
	i->exe = (char *)p->exe;
	i->uid = p->uid;
	i->start_time_ns = started_ns - 62ULL * 1000000000ULL;
	i->arenas = 2;
	i->threads = 5;
	i->has_allocator_threads = 1;
	i->allocator_threads = 3;
	i->has_rss_bytes = 1;
	i->rss_bytes = p->in_use + p->retained + p->cached;
	i->control = "running";
	i->version = LA_VERSION;
	Ctl__Memory *m = calloc(1, sizeof(*m));
	ctl__memory__init(m);
	m->has_in_use_bytes = m->has_cached_bytes = m->has_fragmented_bytes = 1;
	m->has_free_resident_bytes = m->has_free_reserved_bytes = m->has_metadata_bytes = 1;
	m->has_reclaimable_bytes = m->has_resident_bytes = m->has_address_space_bytes = 1;
	m->has_rss_bytes = m->has_non_allocator_rss_bytes = 1;
	m->in_use_bytes = p->in_use;
	m->cached_bytes = p->cached;
	m->free_resident_bytes = m->reclaimable_bytes = p->retained;
	m->resident_bytes = p->in_use + p->cached + p->retained;
	m->free_reserved_bytes = p->mapped - m->resident_bytes;
	m->address_space_bytes = p->mapped;
	m->rss_bytes = i->rss_bytes;
	i->memory = m;
	return i;
}

static Ctl__Tunable *tunable_msg(const struct fake_proc *p, size_t t)
{
	Ctl__Tunable *m = calloc(1, sizeof(*m));
	ctl__tunable__init(m);
	m->name = (char *)tunable_table[t].name;
	m->value = p->tun[t];
	m->has_explicitly_set = 1;
	m->explicitly_set = p->set[t];
	m->source = p->set[t] ? "command" : "default";
	m->has_min = m->has_max = m->has_live = 1;
	m->min = tunable_table[t].min;
	m->max = tunable_table[t].max;
	m->live = tunable_table[t].live;
	m->type = (char *)tunable_type_name(tunable_table[t].type);
	m->help = (char *)tunable_table[t].help;
	return m;
}

static Ctl__Counter **counters(const struct fake_proc *p, size_t *n, unsigned share)
{
	static const char *const names[] = {
#define X_NAME(name, ...) #name,
	        LA_COUNTERS(X_NAME)
#undef X_NAME
	};
	Ctl__Counter **c = calloc(LA_NCOUNTERS, sizeof(*c));
	for (size_t i = 0; i < LA_NCOUNTERS; i++) {
		c[i] = calloc(1, sizeof(**c));
		ctl__counter__init(c[i]);
		c[i]->name = (char *)names[i];
		c[i]->value = (i + 1) * 10 / share;
		if (!strcmp(names[i], "allocated_bytes"))
			c[i]->value = (p->in_use + p->cached) / share;
		else if (!strcmp(names[i], "address_space_bytes"))
			c[i]->value = p->mapped / share;
		else if (!strcmp(names[i], "free_resident_bytes"))
			c[i]->value = p->retained / share;
		else if (!strcmp(names[i], "data_resident_bytes"))
			c[i]->value = (p->in_use + p->cached + p->retained) / share;
		else if (!strcmp(names[i], "cached_bytes"))
			c[i]->value = p->cached / share;
		else if (!strcmp(names[i], "metadata_bytes") ||
		         !strcmp(names[i], "idle_metadata_bytes"))
			c[i]->value = 0;
	}
	*n = LA_NCOUNTERS;
	return c;
}

static Ctl__CommandResult *result_new(int32_t pid, int code, const char *msg)
{
	Ctl__CommandResult *r = calloc(1, sizeof(*r));
	ctl__command_result__init(r);
	r->pid = pid;
	r->code = code;
	if (msg)
		r->message = strdup(msg);
	struct fake_proc *p = proc_find(pid);
	r->exe = p ? (char *)p->exe : "";
	return r;
}

static void add_result(Ctl__Reply *rep, Ctl__CommandResult *r)
{
	rep->results = realloc(rep->results, (rep->n_results + 1) * sizeof(*rep->results));
	rep->results[rep->n_results++] = r;
}

static int tunable_index(const char *name)
{
	for (size_t t = 0; t < tunable_count; t++)
		if (!strcmp(tunable_table[t].name, name))
			return (int)t;
	return -1;
}

static void do_get(Ctl__Reply *rep, const Ctl__GetRequest *g)
{
	struct fake_proc *p = NULL;
	int code = proc_access(g->pid, &p);
	if (code != CTL__ERROR_CODE__OK) {
		add_result(rep, result_new(g->pid, code, NULL));
		return;
	}
	Ctl__CommandResult *r = result_new(p->pid, CTL__ERROR_CODE__OK, NULL);
	for (size_t t = 0; t < tunable_count; t++) {
		bool want = g->n_names == 0;
		for (size_t k = 0; k < g->n_names; k++)
			want |= !strcmp(g->names[k], tunable_table[t].name);
		if (!want)
			continue;
		r->tunables = realloc(r->tunables, (r->n_tunables + 1) * sizeof(*r->tunables));
		r->tunables[r->n_tunables++] = tunable_msg(p, t);
	}
	for (size_t k = 0; k < g->n_names; k++)
		if (tunable_index(g->names[k]) < 0) {
			r->code = CTL__ERROR_CODE__ERR_UNKNOWN_TUNABLE;
			r->message = strdup(g->names[k]);
		}
	add_result(rep, r);
}

/* The processes a target names (those the caller may not act on included). */
static size_t target_procs(const Ctl__Target *t, struct fake_proc **out)
{
	size_t n = 0;
	for (int i = 0; i < 3; i++) {
		const char *base = strrchr(procs[i].exe, '/') + 1;
		if ((t->has_pid && t->pid == procs[i].pid) || (t->exe && !strcmp(t->exe, base)) ||
		    (t->has_all && t->all && procs[i].uid == getuid()))
			out[n++] = &procs[i];
	}
	return n;
}

static void do_set(Ctl__Reply *rep, const Ctl__SetRequest *s)
{
	struct fake_proc *ps[3];
	size_t n = target_procs(s->target, ps);
	if (n == 0 && s->target->has_pid) {
		add_result(rep, result_new(s->target->pid, CTL__ERROR_CODE__ERR_NO_PROCESS, NULL));
		return;
	}
	for (size_t i = 0; i < n; i++) {
		struct fake_proc *p = NULL;
		int code = proc_access(ps[i]->pid, &p);
		if (code != CTL__ERROR_CODE__OK) {
			add_result(rep, result_new(ps[i]->pid, code, NULL));
			continue;
		}
		Ctl__CommandResult *r = result_new(p->pid, CTL__ERROR_CODE__OK, NULL);
		r->has_duration_ns = 1;
		r->duration_ns = 180000;
		for (size_t k = 0; k < s->n_assignments && r->code == CTL__ERROR_CODE__OK; k++) {
			int t = tunable_index(s->assignments[k]->name);
			char msg[256];
			char *end;
			long long v = strtoll(s->assignments[k]->value, &end, 10);
			if (t < 0) {
				r->code = CTL__ERROR_CODE__ERR_UNKNOWN_TUNABLE;
				r->message = strdup(s->assignments[k]->name);
			} else if (*end || v < tunable_table[t].min || v > tunable_table[t].max) {
				snprintf(msg, sizeof(msg),
				         "%s=%s: valid range %" PRId64 "..%" PRId64,
				         tunable_table[t].name, s->assignments[k]->value,
				         tunable_table[t].min, tunable_table[t].max);
				r->code = CTL__ERROR_CODE__ERR_RANGE;
				r->message = strdup(msg);
			} else {
				p->tun[t] = v;
				p->set[t] = true;
				r->tunables = realloc(r->tunables,
				                      (r->n_tunables + 1) * sizeof(*r->tunables));
				r->tunables[r->n_tunables++] = tunable_msg(p, (size_t)t);
			}
		}
		add_result(rep, r);
	}
}

/* trim (kind 0), release (1), flush (2). */
static void do_action(Ctl__Reply *rep, const Ctl__Target *target, int kind, uint64_t pad)
{
	struct fake_proc *ps[3];
	size_t n = target_procs(target, ps);
	if (n == 0 && target->has_pid) {
		add_result(rep, result_new(target->pid, CTL__ERROR_CODE__ERR_NO_PROCESS, NULL));
		return;
	}
	for (size_t i = 0; i < n; i++) {
		struct fake_proc *p = NULL;
		int code = proc_access(ps[i]->pid, &p);
		if (code != CTL__ERROR_CODE__OK) {
			add_result(rep, result_new(ps[i]->pid, code, NULL));
			continue;
		}
		Ctl__CommandResult *r = result_new(p->pid, CTL__ERROR_CODE__OK, NULL);
		uint64_t released = 0;
		if (kind == 0) {
			released = p->retained > pad ? p->retained - pad : 0;
			r->has_madvise_calls = r->has_munmap_calls = 1;
			r->madvise_calls = released ? 1 : 0;
			r->munmap_calls = released ? 3 : 0;
			r->duration_ns = 3100000;
		} else if (kind == 1) {
			released = p->retained / 2;
			r->has_munmap_calls = 1;
			r->munmap_calls = released ? 2 : 0;
			r->duration_ns = 1200000;
		} else {
			p->retained += p->cached;
			p->cached = 0;
			r->duration_ns = 400000;
		}
		p->retained -= released;
		p->mapped -= released;
		r->has_bytes_released = r->has_duration_ns = 1;
		r->bytes_released = released;
		add_result(rep, r);
	}
}

/* A scripted history: 10 samples a second apart ending now, the daemon's figures. 4242
 * (profile web) has its in use climb from 100 to 190 MiB in steps of 10 MiB with a gap at
 * the sixth sample (RSS = in use + 50 MiB); 4343 stays at 20 MiB. Events of 4242: its
 * profile's set, a trim by an operator that released 12 MiB, a pressure policy's release. */
static Ctl__ProcessHistory *fake_history(const struct fake_proc *p)
{
	static const char *const names[] = {"in_use",        "cached",   "fragmented",
	                                    "free_resident", "metadata", "reclaimable",
	                                    "rss",           "non_alloc"};
	enum { NF = sizeof(names) / sizeof(names[0]), RSS = 6 };
	Ctl__ProcessHistory *ph = calloc(1, sizeof(*ph));
	ctl__process_history__init(ph);
	ph->pid = p->pid;
	ph->exe = (char *)p->exe;
	ph->uid = p->uid;
	ph->has_started_ms = ph->has_first_ms = 1;
	ph->started_ms = (int64_t)(started_ns / 1000000) - 62000;
	ph->first_ms = (int64_t)(now_ns() / 1000000) / 1000 * 1000 - 9000;
	ph->resolution_ms = 1000;
	if (p->pid == 4242)
		ph->profile = "web";
	ph->n_series = NF;
	ph->series = calloc(NF, sizeof(*ph->series));
	for (int f = 0; f < NF; f++) {
		Ctl__FigureSeries *s = calloc(1, sizeof(*s));
		ctl__figure_series__init(s);
		s->name = (char *)names[f];
		s->n_kib = 10;
		s->kib = calloc(10, sizeof(uint64_t));
		for (int i = 0; i < 10; i++) {
			uint64_t in_use =
			        p->pid == 4242 ? (100u + 10u * (unsigned)i) << 10 : 20u << 10;
			uint64_t v = f == 0     ? in_use
			             : f == RSS ? in_use + (50u << 10)
			                        : (uint64_t)f << 10;
			s->kib[i] = p->pid == 4242 && i == 5 ? UINT64_MAX : v;
		}
		ph->series[f] = s;
	}
	return ph;
}

static void do_history(Ctl__Reply *rep, const Ctl__HistoryRequest *q)
{
	struct fake_proc *p;
	for (size_t i = 0; i < q->n_pids; i++)
		if ((rep->code = proc_access(q->pids[i], &p)) != CTL__ERROR_CODE__OK)
			return;
	Ctl__HistoryReply *h = calloc(1, sizeof(*h));
	ctl__history_reply__init(h);
	h->sample_ms = 1000;
	h->now_ms = (int64_t)(now_ns() / 1000000);
	h->processes = calloc(3, sizeof(*h->processes));
	for (int i = 0; i < 3 && !opt_empty; i++) {
		if (procs[i].uid != getuid())
			continue;
		bool want = !q->n_pids;
		for (size_t k = 0; k < q->n_pids; k++)
			want |= q->pids[k] == procs[i].pid;
		if (want)
			h->processes[h->n_processes++] = fake_history(&procs[i]);
	}
	bool want_4242 = !q->n_pids || q->pids[0] == 4242;
	if (q->has_events && q->events && want_4242 && !opt_empty) {
		static const struct {
			const char *kind, *trigger, *who, *what;
			uint64_t bytes;
		} ev[] = {
		        {"set", "profile", "profile web", "decay_ms 10s -> 2s", 0},
		        {"trim", "operator", "uid 0 (pid 99)",
		         "released 12.0 MiB (3 madvise, 0 munmap)", 12ULL << 20},
		        {"release", "pressure", "policy oom-guard", "released 1.0 MiB", 1ULL << 20},
		};
		h->n_events = sizeof(ev) / sizeof(ev[0]);
		h->events = calloc(h->n_events, sizeof(*h->events));
		for (size_t i = 0; i < h->n_events; i++) {
			Ctl__HistoryEvent *e = calloc(1, sizeof(*e));
			ctl__history_event__init(e);
			e->seq = i + 1;
			e->t_ms = h->now_ms - 9000 + 3000 * (int64_t)i;
			e->has_pid = e->has_bytes = e->has_ok = 1;
			e->pid = 4242;
			e->exe = "fake-service";
			e->kind = (char *)ev[i].kind;
			e->trigger = (char *)ev[i].trigger;
			e->who = (char *)ev[i].who;
			e->what = (char *)ev[i].what;
			e->bytes = ev[i].bytes;
			e->ok = 1;
			h->events[i] = e;
		}
	}
	rep->history = h;
}

static void handle(Ctl__Envelope *env, Ctl__Reply *rep)
{
	struct fake_proc *p = NULL;
	switch (env->payload_case) {
	case CTL__ENVELOPE__PAYLOAD_VERSION:
		rep->version = calloc(1, sizeof(*rep->version));
		ctl__version_reply__init(rep->version);
		rep->version->daemon_version = "fake-0";
		rep->version->protocol_version = CTL_PROTOCOL_VERSION;
		rep->version->segment_abi_version = LA_SHM_ABI_VERSION;
		break;
	case CTL__ENVELOPE__PAYLOAD_LIST:
		rep->list = calloc(1, sizeof(*rep->list));
		ctl__list_reply__init(rep->list);
		for (int i = 0; i < 3 && !opt_empty; i++) {
			if (procs[i].uid != getuid())
				continue;
			rep->list->processes = realloc(rep->list->processes,
			                               (rep->list->n_processes + 1) *
			                                       sizeof(*rep->list->processes));
			rep->list->processes[rep->list->n_processes++] = proc_info(&procs[i]);
		}
		break;
	case CTL__ENVELOPE__PAYLOAD_STATS: {
		rep->code = proc_access(env->stats->pid, &p);
		if (rep->code != CTL__ERROR_CODE__OK)
			break;
		Ctl__StatsReply *s = calloc(1, sizeof(*s));
		ctl__stats_reply__init(s);
		s->process = proc_info(p);
		s->totals = counters(p, &s->n_totals, 1);
		s->n_arenas = 2;
		s->arenas = calloc(2, sizeof(*s->arenas));
		for (uint32_t a = 0; a < 2; a++) {
			s->arenas[a] = calloc(1, sizeof(**s->arenas));
			ctl__arena_stats__init(s->arenas[a]);
			s->arenas[a]->index = a;
			s->arenas[a]->threads = 2 + a;
			s->arenas[a]->counters = counters(p, &s->arenas[a]->n_counters, 2);
		}
		static const uint64_t sizes[] = {16, 32, 48, 64, 4096};
		s->n_classes = 5;
		s->classes = calloc(5, sizeof(*s->classes));
		for (size_t c = 0; c < 5; c++) {
			Ctl__ClassStats *cs = calloc(1, sizeof(*cs));
			ctl__class_stats__init(cs);
			cs->size = sizes[c];
			cs->n_counters = 4;
			cs->counters = calloc(4, sizeof(*cs->counters));
			static const char *const cn[] = {"blocks_in_use", "spans", "refills",
			                                 "flushes"};
			for (int k = 0; k < 4; k++) {
				cs->counters[k] = calloc(1, sizeof(**cs->counters));
				ctl__counter__init(cs->counters[k]);
				cs->counters[k]->name = (char *)cn[k];
				cs->counters[k]->value = c == 2 ? 0 : (c + 1) * (uint64_t)(k + 1);
			}
			s->classes[c] = cs;
		}
		s->n_tunables = tunable_count;
		s->tunables = calloc(tunable_count, sizeof(*s->tunables));
		for (size_t t = 0; t < tunable_count; t++)
			s->tunables[t] = tunable_msg(p, t);
		rep->stats = s;
		break;
	}
	case CTL__ENVELOPE__PAYLOAD_GET:
		do_get(rep, env->get);
		break;
	case CTL__ENVELOPE__PAYLOAD_SET:
		do_set(rep, env->set);
		break;
	case CTL__ENVELOPE__PAYLOAD_TRIM:
		do_action(rep, env->trim->target, 0, env->trim->has_pad ? env->trim->pad : 0);
		break;
	case CTL__ENVELOPE__PAYLOAD_RELEASE:
		do_action(rep, env->release->target, 1, 0);
		break;
	case CTL__ENVELOPE__PAYLOAD_FLUSH:
		do_action(rep, env->flush->target, 2, 0);
		break;
	case CTL__ENVELOPE__PAYLOAD_HISTORY:
		do_history(rep, env->history);
		break;
	default:
		rep->code = CTL__ERROR_CODE__ERR_UNKNOWN_REQUEST;
		rep->message = "unknown request";
	}
}

static void serve(int fd)
{
	for (;;) {
		uint8_t *buf;
		uint32_t len;
		if (wire_recv(fd, &buf, &len, 5000) < 0)
			return;
		if (opt_hang) {
			free(buf);
			pause();
			return;
		}
		if (opt_garbage) {
			free(buf);
			static const uint8_t junk[] = {0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff};
			(void)!write(fd, junk, sizeof(junk));
			return;
		}
		Ctl__Envelope *env = ctl__envelope__unpack(NULL, len, buf);
		free(buf);
		Ctl__Reply rep = CTL__REPLY__INIT;
		rep.protocol_version = CTL_PROTOCOL_VERSION;
		if (!env) {
			rep.code = CTL__ERROR_CODE__ERR_MALFORMED;
		} else if (opt_mismatch) {
			rep.code = CTL__ERROR_CODE__ERR_VERSION;
			rep.protocol_version = CTL_PROTOCOL_VERSION + 1;
			rep.message = "daemon speaks protocol 3";
		} else {
			rep.has_id = env->has_id;
			rep.id = env->id;
			handle(env, &rep);
		}
		/* The reply's allocations are a test process's garbage: it exits soon. */
		int r = wire_send(fd, &rep.base, 5000);
		if (env)
			ctl__envelope__free_unpacked(env, NULL);
		if (r < 0)
			return;
	}
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: fake-ctld SOCKET [--mismatch|--garbage|--hang|--empty]\n");
		return 2;
	}
	for (int i = 2; i < argc; i++) {
		opt_mismatch |= !strcmp(argv[i], "--mismatch");
		opt_garbage |= !strcmp(argv[i], "--garbage");
		opt_hang |= !strcmp(argv[i], "--hang");
		opt_empty |= !strcmp(argv[i], "--empty");
	}
	signal(SIGPIPE, SIG_IGN);
	started_ns = now_ns();
	procs_init();
	/* Bound under a temporary name and renamed into place once listening, as allocctld
	 * does: a client that sees the socket appear can connect at once (between bind and
	 * listen, connect fails with ECONNREFUSED). */
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char tmp[sizeof(sa.sun_path)];
	snprintf(tmp, sizeof(tmp), "%s.tmp", argv[1]);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", tmp);
	unlink(tmp);
	unlink(argv[1]);
	if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(s, 16) < 0 ||
	    rename(tmp, argv[1]) < 0) {
		perror("fake-ctld: bind");
		return 1;
	}
	for (;;) {
		int c = accept(s, NULL, NULL);
		if (c < 0) {
			if (errno == EINTR)
				continue;
			return 1;
		}
		serve(c);
		close(c);
	}
}
