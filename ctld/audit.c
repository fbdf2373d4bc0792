/* audit.c — the audit trail (see audit.h): a ring of fixed-size events indexed by sequence
 * number, one logfmt line per event on stderr, or one journald entry with ALLOCCTLD_*
 * fields when stderr is the journal ($JOURNAL_STREAM names our stderr), and the counters
 * behind liballoc_ctld_actions_total / liballoc_ctld_released_bytes_total. */
#include "audit.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <systemd/sd-journal.h>

#include "log.h"

static const char *const trigger_names[] = {
#define AUDIT_X_NAME(n, help) #n,
        AUDIT_TRIGGERS(AUDIT_X_NAME)};
static const char *const action_names[] = {AUDIT_ACTIONS(AUDIT_X_NAME)};
static const char *const result_names[] = {AUDIT_RESULTS(AUDIT_X_NAME)};
#undef AUDIT_X_NAME

const char *audit_trigger_name(enum audit_trigger t)
{
	return (unsigned)t < AUDIT_NTRIGGERS ? trigger_names[t] : "unknown";
}
const char *audit_action_name(enum audit_action x)
{
	return (unsigned)x < AUDIT_NACTIONS ? action_names[x] : "unknown";
}
const char *audit_result_name(enum audit_result r)
{
	return (unsigned)r < AUDIT_NRESULTS ? result_names[r] : "unknown";
}

/* Is stderr the journal? systemd sets JOURNAL_STREAM=<dev>:<ino> of the stream it connects
 * to stdout/stderr; a child that redirected stderr elsewhere no longer matches. */
static bool stderr_is_journal(void)
{
	const char *e = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2 || fstat(STDERR_FILENO, &st) < 0)
		return false;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

static void apply_journal(struct audit *a, int journal)
{
	a->journal = journal;
	a->journal_active = journal == 1 || (journal < 0 && stderr_is_journal());
}

int audit_init(struct audit *a, size_t cap, int journal)
{
	memset(a, 0, sizeof(*a));
	a->next_seq = a->oldest = 1;
	if (cap < 1)
		cap = 1;
	a->ring = calloc(cap, sizeof(*a->ring));
	if (!a->ring)
		return -1;
	a->cap = cap;
	apply_journal(a, journal);
	return 0;
}

int audit_configure(struct audit *a, size_t cap, int journal)
{
	apply_journal(a, journal);
	if (cap < 1)
		cap = 1;
	if (cap == a->cap)
		return 0;
	struct audit_event *ring = calloc(cap, sizeof(*ring));
	if (!ring)
		return -1;
	/* keep the newest min(cap, held) events, each at its seq's slot in the new ring */
	if (a->next_seq - a->oldest > cap)
		a->oldest = a->next_seq - cap;
	for (uint64_t s = a->oldest; s < a->next_seq; s++)
		ring[s % cap] = a->ring[s % a->cap];
	free(a->ring);
	a->ring = ring;
	a->cap = cap;
	return 0;
}

void audit_free(struct audit *a)
{
	free(a->ring);
	a->ring = NULL;
	a->cap = 0;
}

uint64_t audit_first_seq(const struct audit *a)
{
	return a->oldest;
}

const struct audit_event *audit_next(const struct audit *a, uint64_t after)
{
	uint64_t s = after + 1, first = audit_first_seq(a);
	if (s < first)
		s = first;
	if (s >= a->next_seq || !a->cap)
		return NULL;
	return &a->ring[s % a->cap];
}

bool audit_visible(const struct audit_event *ev, uid_t uid)
{
	return uid == 0 || (ev->target_uid >= 0 && (uid_t)ev->target_uid == uid) ||
	       (ev->peer_uid >= 0 && (uid_t)ev->peer_uid == uid);
}

int audit_listen(struct audit *a, audit_listener fn, void *arg)
{
	if (a->nlisteners == AUDIT_MAX_LISTENERS)
		return -1;
	a->listeners[a->nlisteners].fn = fn;
	a->listeners[a->nlisteners].arg = arg;
	a->nlisteners++;
	return 0;
}

void audit_unlisten(struct audit *a, audit_listener fn, void *arg)
{
	for (int i = 0; i < a->nlisteners; i++)
		if (a->listeners[i].fn == fn && a->listeners[i].arg == arg) {
			memmove(&a->listeners[i], &a->listeners[i + 1],
			        sizeof(a->listeners[0]) * (size_t)(a->nlisteners - i - 1));
			a->nlisteners--;
			return;
		}
}

void audit_set_operator(struct audit_event *ev, uid_t uid, pid_t pid)
{
	ev->trigger = AUDIT_T_operator;
	ev->peer_uid = uid;
	ev->peer_pid = pid;
	snprintf(ev->actor, sizeof(ev->actor), "uid %u pid %d", (unsigned)uid, (int)pid);
}

/* Append "key=value" with value quoted when it holds spaces, quotes or '=' (logfmt). */
static size_t kv(char *buf, size_t len, size_t o, const char *key, const char *val)
{
	if (o >= len)
		return o;
	bool quote = !*val || strpbrk(val, " \"=\\\t") != NULL;
	int n = snprintf(buf + o, len - o, "%s%s=%s", o ? " " : "", key, quote ? "\"" : "");
	o += n > 0 ? (size_t)n : 0;
	for (const char *s = val; *s && o + 2 < len; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			buf[o++] = '\\';
		buf[o++] = ch < 0x20 ? '?' : (char)ch;
	}
	if (quote && o + 1 < len)
		buf[o++] = '"';
	if (o < len)
		buf[o] = 0;
	else if (len)
		buf[len - 1] = 0;
	return o;
}

static size_t kvu(char *buf, size_t len, size_t o, const char *key, uint64_t v)
{
	char num[24];
	snprintf(num, sizeof(num), "%" PRIu64, v);
	return kv(buf, len, o, key, num);
}

static size_t kvi(char *buf, size_t len, size_t o, const char *key, int64_t v)
{
	char num[24];
	snprintf(num, sizeof(num), "%" PRId64, v);
	return kv(buf, len, o, key, num);
}

size_t audit_format(const struct audit_event *ev, char *buf, size_t len)
{
	size_t o = 0;
	if (len)
		buf[0] = 0;
	o = kvu(buf, len, o, "seq", ev->seq);
	o = kv(buf, len, o, "trigger", audit_trigger_name(ev->trigger));
	o = kv(buf, len, o, "actor", ev->actor);
	if (ev->peer_uid >= 0) {
		o = kvi(buf, len, o, "peer_uid", ev->peer_uid);
		o = kvi(buf, len, o, "peer_pid", ev->peer_pid);
	}
	o = kv(buf, len, o, "action", audit_action_name(ev->action));
	if (ev->pid) {
		o = kvi(buf, len, o, "pid", ev->pid);
		if (ev->target_uid >= 0)
			o = kvi(buf, len, o, "uid", ev->target_uid);
		if (ev->exe[0])
			o = kv(buf, len, o, "exe", ev->exe);
	}
	if (ev->name[0])
		o = kv(buf, len, o, "tunable", ev->name);
	if (ev->has_values) {
		o = kvi(buf, len, o, "old", ev->old_value);
		o = kvi(buf, len, o, "new", ev->new_value);
	}
	if (ev->hold_ms)
		o = kvu(buf, len, o, "hold_ms", ev->hold_ms);
	if (ev->arg)
		o = kvu(buf, len, o, "arg", ev->arg);
	o = kv(buf, len, o, "result", audit_result_name(ev->result));
	if (ev->action == AUDIT_A_trim || ev->action == AUDIT_A_release ||
	    ev->action == AUDIT_A_flush || ev->bytes_released)
		o = kvu(buf, len, o, "released_bytes", ev->bytes_released);
	if (ev->duration_ns)
		o = kvu(buf, len, o, "duration_us", ev->duration_ns / 1000);
	if (ev->message[0])
		o = kv(buf, len, o, "message", ev->message);
	return o < len ? o : (len ? len - 1 : 0);
}

/* One journald entry: MESSAGE is the logfmt line, every field also on its own. */
static void journal_send(const struct audit_event *ev, const char *line)
{
	char f[20][AUDIT_MESSAGE_MAX + 64];
	struct iovec iov[20];
	int n = 0;
#define JF(...)                                                                              \
	do {                                                                                 \
		int len_ = snprintf(f[n], sizeof(f[n]), __VA_ARGS__);                        \
		iov[n].iov_base = f[n];                                                      \
		iov[n].iov_len = len_ < (int)sizeof(f[n]) ? (size_t)len_ : sizeof(f[n]) - 1; \
		n++;                                                                         \
	} while (0)
	JF("MESSAGE=audit: %s", line);
	JF("PRIORITY=%d", ev->result == AUDIT_R_ok || ev->result == AUDIT_R_dry_run ? 6 : 5);
	JF("SYSLOG_IDENTIFIER=allocctld");
	JF("ALLOCCTLD_AUDIT_SEQ=%" PRIu64, ev->seq);
	JF("ALLOCCTLD_TRIGGER=%s", audit_trigger_name(ev->trigger));
	JF("ALLOCCTLD_ACTOR=%s", ev->actor);
	JF("ALLOCCTLD_ACTION=%s", audit_action_name(ev->action));
	JF("ALLOCCTLD_RESULT=%s", audit_result_name(ev->result));
	if (ev->peer_uid >= 0) {
		JF("ALLOCCTLD_PEER_UID=%" PRId64, ev->peer_uid);
		JF("ALLOCCTLD_PEER_PID=%d", ev->peer_pid);
	}
	if (ev->pid) {
		JF("ALLOCCTLD_TARGET_PID=%d", ev->pid);
		JF("ALLOCCTLD_TARGET_UID=%" PRId64, ev->target_uid);
		JF("ALLOCCTLD_TARGET_EXE=%s", ev->exe);
	}
	if (ev->name[0])
		JF("ALLOCCTLD_TUNABLE=%s", ev->name);
	if (ev->has_values) {
		JF("ALLOCCTLD_OLD_VALUE=%" PRId64, ev->old_value);
		JF("ALLOCCTLD_NEW_VALUE=%" PRId64, ev->new_value);
	}
	if (ev->hold_ms)
		JF("ALLOCCTLD_HOLD_MS=%" PRIu64, ev->hold_ms);
	JF("ALLOCCTLD_RELEASED_BYTES=%" PRIu64, ev->bytes_released);
	JF("ALLOCCTLD_DURATION_NS=%" PRIu64, ev->duration_ns);
	if (ev->message[0])
		JF("ALLOCCTLD_DETAIL=%s", ev->message);
#undef JF
	int err = sd_journal_sendv(iov, n);
	if (err < 0)
		log_info("audit: %s (journal: %s)", line, strerror(-err));
}

uint64_t audit_record(struct audit *a, struct audit_event *ev)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ev->seq = a->next_seq++;
	ev->time_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	if (!ev->pid)
		ev->target_uid = -1;
	if (ev->actor[0] == 0)
		snprintf(ev->actor, sizeof(ev->actor), "%s", audit_trigger_name(ev->trigger));
	if (a->cap) {
		a->ring[ev->seq % a->cap] = *ev;
		if (a->next_seq - a->oldest > a->cap)
			a->oldest = a->next_seq - a->cap;
	}
	if ((unsigned)ev->trigger < AUDIT_NTRIGGERS && (unsigned)ev->action < AUDIT_NACTIONS &&
	    (unsigned)ev->result < AUDIT_NRESULTS) {
		a->actions[ev->trigger][ev->action][ev->result]++;
		a->released[ev->trigger] += ev->bytes_released;
	}
	char line[1024];
	audit_format(ev, line, sizeof(line));
	if (a->journal_active)
		journal_send(ev, line);
	else
		log_msg(LOGL_INFO, "audit: %s", line);
	for (int i = 0; i < a->nlisteners; i++)
		a->listeners[i].fn(ev, a->listeners[i].arg);
	return ev->seq;
}

void audit_write_metrics(const struct audit *a, struct evbuffer *b)
{
	evbuffer_add_printf(b, "# HELP liballoc_ctld_actions_total Actions allocctld made or "
	                       "relayed, by what caused them, what they did and how they ended\n"
	                       "# TYPE liballoc_ctld_actions_total counter\n");
	for (int t = 0; t < AUDIT_NTRIGGERS; t++)
		for (int x = 0; x < AUDIT_NACTIONS; x++)
			for (int r = 0; r < AUDIT_NRESULTS; r++)
				if (a->actions[t][x][r])
					evbuffer_add_printf(
					        b,
					        "liballoc_ctld_actions_total{trigger=\"%s\","
					        "action=\"%s\",result=\"%s\"} %" PRIu64 "\n",
					        trigger_names[t], action_names[x], result_names[r],
					        a->actions[t][x][r]);
	evbuffer_add_printf(b, "# HELP liballoc_ctld_released_bytes_total Bytes the processes "
	                       "reported released by the actions, by what caused them\n"
	                       "# TYPE liballoc_ctld_released_bytes_total counter\n");
	for (int t = 0; t < AUDIT_NTRIGGERS; t++)
		evbuffer_add_printf(
		        b, "liballoc_ctld_released_bytes_total{trigger=\"%s\"} %" PRIu64 "\n",
		        trigger_names[t], a->released[t]);
}
