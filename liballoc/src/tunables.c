/* tunables.c — defaults, validation and parsing of the tunables table; environment
 * reading that needs no allocation (safe before main and inside the first malloc). */
#include "tunables.h"

#include <string.h>
#include <unistd.h>

#include "liballoc_parse.h"
#include "lock.h"
#include "os.h"
#include "shm.h"
#include "tcache.h"

const struct tun_def tun_defs[LA_NTUNABLES] = {
#define TUN_X_DEF(name, type, def, min, max, live, mallopt, help) \
	{#name, type, def, min, max, live, mallopt, help},
        LA_TUNABLES(TUN_X_DEF)
#undef TUN_X_DEF
};

int64_t tun_values[LA_NTUNABLES] = {
#define TUN_X_VAL(name, type, def, ...) def,
        LA_TUNABLES(TUN_X_VAL)
#undef TUN_X_VAL
};
uint32_t tun_source[LA_NTUNABLES];
struct tun_hold tun_holds[LA_NTUNABLES];

extern char **environ;

/* The environment as it was at start. A program may rewrite environ while it runs (setenv,
 * clearenv; redis's setproctitle moves every variable and writes its title over the old
 * strings) and the control thread reads variables after start (the pressure watch): a
 * read racing the rewrite crashed redis-server at start. So the variables liballoc reads
 * (LIBALLOC_*, MEMORY_PRESSURE_*) are copied once, at init, before any thread of ours
 * exists, and read from the copy: "NAME=value\0" strings, an empty one ends them. */
#define ENV_SNAP_BYTES 16384
LA_BIG_BSS static char env_snap[ENV_SNAP_BYTES];
/* A copy that fits in ENV_HEAD_BYTES (a run directory, a tunable or two: nearly all) goes
 * here instead, in .bss, on the page every start writes: env_snap's page is a fault of
 * its own (a process of the bench, with LIBALLOC_RUN_DIR, took it) */
#define ENV_HEAD_BYTES 384
static char env_head[ENV_HEAD_BYTES];
static char *env_copy = env_head; /* env_head or env_snap: the last copy */
static bool env_snapped;
/* bytes of the last copy before its end mark: with none (no such variable, the common
 * case) and none before, the copy is the zeros it was, and its page stays untouched (a
 * page fault of every process's start) */
static uint32_t env_snap_used;

static bool env_wanted(const char *e)
{
	/* the first letter before the calls: every variable of the environment comes here */
	return (e[0] == 'L' && strncmp(e, "LIBALLOC_", 9) == 0) ||
	       (e[0] == 'M' && strncmp(e, "MEMORY_PRESSURE_", 16) == 0);
}

/* LIBALLOC_CONTROL's answer, once read (-1: not yet): a forked child asks again, and
 * reading the name and the snapshot there faulted in three pages of the library */
static int control_enabled = -1;

static void env_snapshot(void)
{
	size_t need = 1; /* the end mark */
	for (char **e = environ; e && *e; e++)
		if (env_wanted(*e))
			need += strlen(*e) + 1;
	char *copy = need <= sizeof(env_head) ? env_head : env_snap;
	size_t cap = copy == env_head ? sizeof(env_head) : sizeof(env_snap);
	size_t used = 0;
	for (char **e = environ; e && *e; e++) {
		if (!env_wanted(*e))
			continue;
		size_t n = strlen(*e) + 1;
		if (n >= cap - used) { /* one byte stays for the end mark */
			char name[64];
			size_t k = strcspn(*e, "=");
			la_strlcpy(name, *e, k + 1 < sizeof(name) ? k + 1 : sizeof(name));
			la_warn(name,
			        ": ignored: the LIBALLOC_ and MEMORY_PRESSURE_ variables take "
			        "more than 16 KiB together",
			        (char *)NULL);
			continue;
		}
		memcpy(copy + used, *e, n);
		used += n;
	}
	if (used) /* the end mark: an empty entry (with none, tun_getenv reads nothing) */
		copy[used] = 0;
	env_copy = copy;
	env_snap_used = (uint32_t)used;
	env_snapped = true;
	__atomic_store_n(&control_enabled, -1, __ATOMIC_RELAXED); /* read from the copy */
}

/* the constructor's copy, not yet used by tun_init_from_env (which takes a new one
 * otherwise: a test's changed environment) */
static bool env_fresh;

void tun_env_snapshot(void)
{
	if (!env_snapped) {
		env_snapshot();
		env_fresh = true;
	}
}

const char *tun_getenv(const char *name)
{
	size_t n = strlen(name);
	if (env_snapped && env_wanted(name)) {
		if (!env_snap_used) /* not read: its page stays untouched */
			return NULL;
		for (const char *e = env_copy; *e; e += strlen(e) + 1)
			if (strncmp(e, name, n) == 0 && e[n] == '=')
				return e + n + 1;
		return NULL;
	}
	if (!environ)
		return NULL;
	for (char **e = environ; *e; e++)
		if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
			return *e + n + 1;
	return NULL;
}

int tun_find(const char *name)
{
	for (int i = 0; i < LA_NTUNABLES; i++)
		if (strcmp(tun_defs[i].name, name) == 0)
			return i;
	return -1;
}

/* Append a decimal (with K/M/G suffix when exact) to buf. */
static size_t fmt_value(char *buf, int type, int64_t v)
{
	static const char sfx[] = "KMGT";
	size_t n = 0;
	if (v < 0) {
		buf[n++] = '-';
		v = -v;
	}
	int s = -1;
	if (type == LA_T_SIZE)
		while (v >= 1024 && (v & 1023) == 0 && s < 3) {
			v >>= 10;
			s++;
		}
	n += la_fmt_u64(buf + n, (uint64_t)v);
	if (s >= 0)
		buf[n++] = sfx[s];
	buf[n] = 0;
	return n;
}

/* reason := "<name>: <what> (valid: <min>..<max><unit>)" */
static void range_reason(int id, const char *what, char *reason, size_t len)
{
	const struct tun_def *d = &tun_defs[id];
	char buf[160];
	size_t n = la_strlcpy(buf, d->name, sizeof(buf));
	n += la_strlcpy(buf + n, ": ", sizeof(buf) - n);
	n += la_strlcpy(buf + n, what, sizeof(buf) - n);
	n += la_strlcpy(buf + n, " (valid: ", sizeof(buf) - n);
	if (d->type == LA_T_BOOL) {
		n += la_strlcpy(buf + n, "0 or 1", sizeof(buf) - n);
	} else {
		n += fmt_value(buf + n, d->type, d->min);
		n += la_strlcpy(buf + n, "..", sizeof(buf) - n);
		n += fmt_value(buf + n, d->type, d->max);
		if (d->type == LA_T_SIZE)
			n += la_strlcpy(buf + n, " bytes", sizeof(buf) - n);
		else if (d->type == LA_T_MS)
			n += la_strlcpy(buf + n, " ms", sizeof(buf) - n);
	}
	la_strlcpy(buf + n, ")", sizeof(buf) - n);
	if (reason && len)
		la_strlcpy(reason, buf, len);
}

int tun_parse(int id, const char *s, int64_t *out, char *reason, size_t len)
{
	const struct tun_def *d = &tun_defs[id];
	switch (la_parse(d->type, s, out)) {
	case LA_PARSE_OK:
		return LA_ST_OK;
	case LA_PARSE_RANGE:
		range_reason(id, "too large", reason, len);
		return LA_ST_ERANGE;
	default: {
		char what[96] = "expected ";
		la_strlcpy(what + 9, la_parse_expect(d->type), sizeof(what) - 9);
		range_reason(id, what, reason, len);
		return LA_ST_ERANGE;
	}
	}
}

/* Every write of tun_values and tun_source, and of the segment's tunables block, holds
 * tun_lock: liballoc_set and mallopt in any thread, the control thread's commands, frees
 * raising the dynamic threshold. So the block's seqlock has one writer at a time (two
 * writers interleaving their seq increments let readers copy a torn table), and a value
 * is checked and changed in one step. */
static struct la_lock tun_lock = LA_LOCK_INIT;

void tun_publish(void)
{
	la_lock(&tun_lock);
	shm_publish_tunables();
	la_unlock(&tun_lock);
}

static void set_threshold(int64_t t)
{
	__atomic_store_n(&tun_values[LA_TUNABLE_mmap_threshold], t, __ATOMIC_RELAXED);
	__atomic_store_n(&tun_values[LA_TUNABLE_trim_threshold],
	                 LA_MIN(2 * t, tun_defs[LA_TUNABLE_trim_threshold].max), __ATOMIC_RELAXED);
	__atomic_store_n(&tun_source[LA_TUNABLE_mmap_threshold], LA_SRC_dynamic, __ATOMIC_RELAXED);
	__atomic_store_n(&tun_source[LA_TUNABLE_trim_threshold], LA_SRC_dynamic, __ATOMIC_RELAXED);
	shm_publish_tunables(); /* both at once */
}

void tun_cap_threshold(int64_t max)
{
	if (!la_trylock(&tun_lock))
		return; /* a writer is at work: the next request that maps caps it */
	if (TUN(mmap_dynamic) && TUN(mmap_threshold) > max)
		set_threshold(max);
	la_unlock(&tun_lock);
}

bool tun_raise_threshold(int64_t size, int64_t max)
{
	if (!la_trylock(&tun_lock))
		return false; /* a writer is at work: a free does not wait, a later one raises */
	/* checked under the lock: an explicit mmap_threshold set since the caller looked has
	 * turned mmap_dynamic off, and is not overwritten */
	bool raise = TUN(mmap_dynamic) && size >= TUN(mmap_threshold) && size < max;
	if (raise) {
		set_threshold(LA_MIN(size + (int64_t)LA_PAGE, max));
	}
	la_unlock(&tun_lock);
	return raise;
}

void tun_fork_prepare(void)
{
	la_lock(&tun_lock);
}

void tun_fork_parent(void)
{
	la_unlock(&tun_lock);
}

void tun_fork_child(void)
{
	la_lock_reinit(&tun_lock);
}

static bool pins_threshold(int id)
{
	return id == LA_TUNABLE_mmap_threshold || id == LA_TUNABLE_trim_threshold ||
	       id == LA_TUNABLE_top_pad || id == LA_TUNABLE_mmap_max;
}

/* Under tun_lock: hold id until expires (its value and source now are what comes back,
 * unless it is held already: then only the expiry moves). */
static void hold_locked(int id, uint64_t expires)
{
	struct tun_hold *h = &tun_holds[id];
	if (!h->expires_ns) {
		h->revert_value = __atomic_load_n(&tun_values[id], __ATOMIC_RELAXED);
		h->revert_source = __atomic_load_n(&tun_source[id], __ATOMIC_RELAXED);
	}
	__atomic_store_n(&h->expires_ns, expires, __ATOMIC_RELAXED);
}

int tun_set(int id, int64_t value, uint32_t source, char *reason, size_t len)
{
	return tun_set_held(id, value, source, 0, reason, len);
}

int tun_set_held(int id, int64_t value, uint32_t source, uint64_t hold_ns, char *reason, size_t len)
{
	if (id < 0 || id >= LA_NTUNABLES) {
		if (reason && len)
			la_strlcpy(reason, "unknown tunable", len);
		return LA_ST_EINVAL_NAME;
	}
	const struct tun_def *d = &tun_defs[id];
	if (value < d->min || value > d->max) {
		range_reason(id, "out of range", reason, len);
		return LA_ST_ERANGE;
	}
	bool cache_limit = id == LA_TUNABLE_tcache_max_bytes || id == LA_TUNABLE_check_free_lists;
	la_lock(&tun_lock);
	if (hold_ns) {
		uint64_t expires = os_now_ns() + hold_ns;
		hold_locked(id, expires);
		/* the pinning below turns mmap_dynamic off: it comes back with the rest */
		if (pins_threshold(id) && TUN(mmap_dynamic))
			hold_locked(LA_TUNABLE_mmap_dynamic, expires);
	} else {
		__atomic_store_n(&tun_holds[id].expires_ns, 0, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&tun_values[id], value, __ATOMIC_RELAXED);
	__atomic_store_n(&tun_source[id], source, __ATOMIC_RELAXED);
	/* Like glibc: pinning a threshold turns the dynamic adjustment off, until
	 * mmap_dynamic is set again; mmap_dynamic then carries the source of that setting. */
	if (pins_threshold(id) && TUN(mmap_dynamic)) {
		__atomic_store_n(&tun_values[LA_TUNABLE_mmap_dynamic], 0, __ATOMIC_RELAXED);
		__atomic_store_n(&tun_source[LA_TUNABLE_mmap_dynamic], source, __ATOMIC_RELAXED);
	}
	/* caches recompute their limits: the generation moves after the value (release), and
	 * a cache reads the generation before the values (set_limits), so one that records
	 * the new generation has read the new value */
	if (cache_limit)
		__atomic_fetch_add(&tcache_gen, 1, __ATOMIC_RELEASE);
	shm_publish_tunables();
	la_unlock(&tun_lock);
	if (cache_limit)
		tcache_check_self();
	if (id == LA_TUNABLE_decay_ms)
		shm_wake_control();
	return LA_ST_OK;
}

uint64_t tun_holds_next(void)
{
	uint64_t next = 0;
	for (int i = 0; i < LA_NTUNABLES; i++) {
		uint64_t e = __atomic_load_n(&tun_holds[i].expires_ns, __ATOMIC_RELAXED);
		if (e && (!next || e < next))
			next = e;
	}
	return next;
}

uint64_t tun_holds_expire(uint64_t now)
{
	bool any = false, cache_limit = false, decay = false;
	uint64_t next = 0;
	la_lock(&tun_lock);
	for (int i = 0; i < LA_NTUNABLES; i++) {
		struct tun_hold *h = &tun_holds[i];
		if (!h->expires_ns)
			continue;
		if (h->expires_ns > now) {
			if (!next || h->expires_ns < next)
				next = h->expires_ns;
			continue;
		}
		__atomic_store_n(&tun_values[i], h->revert_value, __ATOMIC_RELAXED);
		__atomic_store_n(&tun_source[i], h->revert_source, __ATOMIC_RELAXED);
		__atomic_store_n(&h->expires_ns, 0, __ATOMIC_RELAXED);
		any = true;
		cache_limit |= i == LA_TUNABLE_tcache_max_bytes || i == LA_TUNABLE_check_free_lists;
		decay |= i == LA_TUNABLE_decay_ms;
	}
	if (cache_limit)
		__atomic_fetch_add(&tcache_gen, 1, __ATOMIC_RELEASE);
	if (any)
		shm_publish_tunables();
	la_unlock(&tun_lock);
	if (cache_limit)
		tcache_check_self();
	if (decay)
		shm_wake_control();
	return next;
}

/* LIBALLOC_ variables that are not tunables: read elsewhere in the library (RUN_DIR,
 * CONTROL), or used by liballoc's own scripts and tests to name the library (SO). */
static const char *const env_other[] = {"RUN_DIR",  "CONTROL",          "SO",
                                        "PRESSURE", "PRESSURE_TRIGGER", "PUBLISH_DELAY"};
#define ENV_NAME_MAX 64

/* NAME of tunable i as its variable spells it ("DECAY_MS"). */
static void env_name(int i, char *buf)
{
	size_t n = 0;
	for (const char *c = tun_defs[i].name; *c && n < ENV_NAME_MAX - 1; c++)
		buf[n++] = (*c >= 'a' && *c <= 'z') ? (char)(*c - 32) : *c;
	buf[n] = 0;
}

/* name (len bytes, as a variable spells it after "LIBALLOC_") is tunable i's: compared
 * in place, without env_name's copy (every process with a LIBALLOC_ variable compares it
 * with every tunable's name) */
static bool env_is(int i, const char *name, size_t len)
{
	const char *c = tun_defs[i].name;
	size_t n = 0;
	for (; *c && n < len; c++, n++)
		if (name[n] != ((*c >= 'a' && *c <= 'z') ? (char)(*c - 32) : *c))
			return false;
	return !*c && n == len;
}

/* The value of tunable i's variable in the start's copy of the environment (NULL: none):
 * one walk of the copy, usually empty or one or two variables long, instead of a name
 * built and looked up for each tunable. */
static const char *env_value(int i)
{
	if (!env_snap_used)
		return NULL;
	for (const char *e = env_copy; *e; e += strlen(e) + 1) {
		if (strncmp(e, "LIBALLOC_", 9) != 0)
			continue;
		const char *eq = strchr(e + 9, '=');
		if (eq && env_is(i, e + 9, (size_t)(eq - (e + 9))))
			return eq + 1;
	}
	return NULL;
}

/* Edit distance between a (alen bytes) and b, without allocating; names are cut at
 * ENV_NAME_MAX - 1 bytes. */
static size_t edit_distance(const char *a, size_t alen, const char *b)
{
	size_t row[ENV_NAME_MAX], blen = strlen(b);
	alen = LA_MIN(alen, (size_t)ENV_NAME_MAX - 1);
	blen = LA_MIN(blen, (size_t)ENV_NAME_MAX - 1);
	for (size_t j = 0; j <= blen; j++)
		row[j] = j;
	for (size_t i = 1; i <= alen; i++) {
		size_t diag = row[0];
		row[0] = i;
		for (size_t j = 1; j <= blen; j++) {
			size_t up = row[j];
			size_t best = diag + (a[i - 1] != b[j - 1]);
			best = LA_MIN(best, up + 1);
			best = LA_MIN(best, row[j - 1] + 1);
			row[j] = best;
			diag = up;
		}
	}
	return row[blen];
}

/* One line for a LIBALLOC_ variable liballoc does not know (entry: "LIBALLOC_X=v"),
 * naming the known one closest to it; an unreadable LIBALLOC_CONTROL likewise. */
/* Name i of the known variables: the tunables', then env_other's. */
static void known_name(int i, char known[ENV_NAME_MAX])
{
	if (i < LA_NTUNABLES)
		env_name(i, known);
	else
		la_strlcpy(known, env_other[i - LA_NTUNABLES], ENV_NAME_MAX);
}

static void env_check_one(const char *entry)
{
	const char *name = entry + 9, *eq = strchr(name, '=');
	if (!eq)
		return;
	size_t len = (size_t)(eq - name);
	char known[ENV_NAME_MAX], best[ENV_NAME_MAX] = "";
	const int n_known = LA_NTUNABLES + (int)(sizeof(env_other) / sizeof(env_other[0]));
	/* a known name first (every process pays this for each LIBALLOC_ variable it has),
	 * the edit distances only for a name that is not */
	for (int i = 0; i < n_known; i++) {
		const char *other = i < LA_NTUNABLES ? NULL : env_other[i - LA_NTUNABLES];
		if (other ? strlen(other) != len || strncmp(other, name, len) != 0
		          : !env_is(i, name, len))
			continue;
		int64_t on;
		if (other && strcmp(other, "CONTROL") == 0 && la_parse(LA_T_BOOL, eq + 1, &on))
			la_warn(entry, ": not a boolean (1/0, true/false, yes/no, on/off); ",
			        "the control thread runs", (char *)NULL);
		return;
	}
	size_t best_d = (size_t)-1;
	for (int i = 0; i < n_known; i++) {
		known_name(i, known);
		if (i >= LA_NTUNABLES && strcmp(known, "SO") == 0)
			continue; /* never suggested: it sets nothing */
		/* a name the known one starts with ("DECAY" for DECAY_MS) is the closest */
		size_t d = len >= 3 && strncmp(known, name, len) == 0
		                   ? 0
		                   : edit_distance(name, len, known);
		if (d < best_d) {
			best_d = d;
			la_strlcpy(best, known, sizeof(best));
		}
	}
	char shown[ENV_NAME_MAX + 9];
	la_strlcpy(shown, entry, LA_MIN(sizeof(shown), (size_t)(eq - entry) + 1));
	la_warn(shown, " is not a liballoc setting and is ignored; did you mean LIBALLOC_", best,
	        "?", (char *)NULL);
}

static void env_check(void)
{
	if (!environ)
		return;
	for (char **e = environ; *e; e++)
		if (strncmp(*e, "LIBALLOC_", 9) == 0)
			env_check_one(*e);
}

bool tun_control_enabled(void)
{
	int c = __atomic_load_n(&control_enabled, __ATOMIC_RELAXED);
	if (c < 0) {
		int64_t on;
		const char *env = tun_getenv("LIBALLOC_CONTROL");
		c = !env || la_parse(LA_T_BOOL, env, &on) != LA_PARSE_OK || on;
		__atomic_store_n(&control_enabled, c, __ATOMIC_RELAXED);
	}
	return c;
}

void tun_init_from_env(void)
{
	if (!env_fresh) /* the constructor's copy is this one (its warnings said once) */
		env_snapshot();
	env_fresh = false;
	int ncpu = os_ncpus();
	if (tun_values[LA_TUNABLE_arena_max] == LA_DEFAULT_AUTO)
		tun_values[LA_TUNABLE_arena_max] = LA_MIN(ncpu, LA_ARENAS_MAX);
	env_check();
	bool dynamic_given = false;
	for (int i = 0; i < LA_NTUNABLES; i++) {
		const char *val = env_value(i);
		if (!val)
			continue;
		char var[ENV_NAME_MAX + 9] = "LIBALLOC_";
		env_name(i, var + 9);
		char reason[LA_REASON_MAX];
		int64_t v;
		int st = tun_parse(i, val, &v, reason, sizeof(reason));
		if (st == LA_ST_OK)
			st = tun_set(i, v, LA_SRC_environment, reason, sizeof(reason));
		if (st != LA_ST_OK) {
			la_warn(var, "=", val, ": ignored: ", reason, (char *)NULL);
			continue;
		}
		if (i == LA_TUNABLE_mmap_dynamic)
			dynamic_given = true;
	}
	/* An explicit LIBALLOC_MMAP_DYNAMIC wins over the pinning rule, whatever the order. */
	if (dynamic_given) {
		const char *val = env_value(LA_TUNABLE_mmap_dynamic);
		int64_t v;
		if (val && tun_parse(LA_TUNABLE_mmap_dynamic, val, &v, NULL, 0) == LA_ST_OK) {
			tun_values[LA_TUNABLE_mmap_dynamic] = v;
			tun_source[LA_TUNABLE_mmap_dynamic] = LA_SRC_environment;
		}
	}
}
