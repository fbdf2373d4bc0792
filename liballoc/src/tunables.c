/* tunables.c — defaults, validation and parsing of the tunables table; environment
 * reading that needs no allocation (safe before main and inside the first malloc). */
#include "tunables.h"

#include <string.h>
#include <strings.h>
#include <unistd.h>

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

const char *tun_getenv(const char *name)
{
	size_t n = strlen(name);
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
	if (d->type == LA_T_BOOL) {
		static const char *const yes[] = {"1", "true", "yes", "on"};
		static const char *const no[] = {"0", "false", "no", "off"};
		for (int i = 0; i < 4; i++) {
			if (strcasecmp(s, yes[i]) == 0) {
				*out = 1;
				return LA_ST_OK;
			}
			if (strcasecmp(s, no[i]) == 0) {
				*out = 0;
				return LA_ST_OK;
			}
		}
		range_reason(id, "not a boolean", reason, len);
		return LA_ST_ERANGE;
	}
	const char *p = s;
	bool neg = false;
	if (*p == '-') {
		neg = true;
		p++;
	}
	if (*p < '0' || *p > '9') {
		range_reason(id, "not a number", reason, len);
		return LA_ST_ERANGE;
	}
	uint64_t v = 0;
	while (*p >= '0' && *p <= '9') {
		uint64_t d10 = (uint64_t)(*p - '0');
		if (v > (UINT64_MAX - d10) / 10)
			goto toobig;
		v = v * 10 + d10;
		p++;
	}
	int shift = 0;
	if (*p && d->type == LA_T_SIZE) {
		switch (*p | 0x20) {
		case 'k':
			shift = 10;
			break;
		case 'm':
			shift = 20;
			break;
		case 'g':
			shift = 30;
			break;
		case 't':
			shift = 40;
			break;
		case 'b':
			shift = 0;
			break;
		default:
			range_reason(id, "bad unit", reason, len);
			return LA_ST_ERANGE;
		}
		p++;
		if ((*p | 0x20) == 'i')
			p++;
		if ((*p | 0x20) == 'b')
			p++;
	} else if (*p && d->type == LA_T_MS && strcmp(p, "ms") == 0) {
		p += 2;
	} else if (*p && d->type == LA_T_MS && strcmp(p, "s") == 0) {
		if (v > UINT64_MAX / 1000)
			goto toobig;
		v *= 1000;
		p++;
	}
	if (*p) {
		range_reason(id, "trailing characters", reason, len);
		return LA_ST_ERANGE;
	}
	if (shift && v > (UINT64_MAX >> shift))
		goto toobig;
	v <<= shift;
	if (v > (uint64_t)INT64_MAX)
		goto toobig;
	*out = neg ? -(int64_t)v : (int64_t)v;
	return LA_ST_OK;
toobig:
	range_reason(id, "too large", reason, len);
	return LA_ST_ERANGE;
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

bool tun_raise_threshold(int64_t size)
{
	if (!la_trylock(&tun_lock))
		return false; /* a writer is at work: a free does not wait, a later one raises */
	int64_t max = TUN(mmap_threshold_max);
	/* checked under the lock: an explicit mmap_threshold set since the caller looked has
	 * turned mmap_dynamic off, and is not overwritten */
	bool raise = TUN(mmap_dynamic) && size >= TUN(mmap_threshold) && size < max;
	if (raise) {
		int64_t t = LA_MIN(size + (int64_t)LA_PAGE, max);
		__atomic_store_n(&tun_values[LA_TUNABLE_mmap_threshold], t, __ATOMIC_RELAXED);
		__atomic_store_n(&tun_values[LA_TUNABLE_trim_threshold],
		                 LA_MIN(2 * t, tun_defs[LA_TUNABLE_trim_threshold].max),
		                 __ATOMIC_RELAXED);
		__atomic_store_n(&tun_source[LA_TUNABLE_mmap_threshold], LA_SRC_dynamic,
		                 __ATOMIC_RELAXED);
		__atomic_store_n(&tun_source[LA_TUNABLE_trim_threshold], LA_SRC_dynamic,
		                 __ATOMIC_RELAXED);
		shm_publish_tunables(); /* both at once */
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

void tun_init_from_env(void)
{
	int ncpu = os_ncpus();
	if (tun_values[LA_TUNABLE_arena_max] == LA_DEFAULT_AUTO)
		tun_values[LA_TUNABLE_arena_max] = LA_MIN(8 * ncpu, LA_ARENAS_MAX);
	bool dynamic_given = false;
	for (int i = 0; i < LA_NTUNABLES; i++) {
		char var[96] = "LIBALLOC_";
		size_t n = 9;
		for (const char *c = tun_defs[i].name; *c && n < sizeof(var) - 1; c++)
			var[n++] = (*c >= 'a' && *c <= 'z') ? (char)(*c - 32) : *c;
		var[n] = 0;
		const char *val = tun_getenv(var);
		if (!val)
			continue;
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
		const char *val = tun_getenv("LIBALLOC_MMAP_DYNAMIC");
		int64_t v;
		if (val && tun_parse(LA_TUNABLE_mmap_dynamic, val, &v, NULL, 0) == LA_ST_OK) {
			tun_values[LA_TUNABLE_mmap_dynamic] = v;
			tun_source[LA_TUNABLE_mmap_dynamic] = LA_SRC_environment;
		}
	}
}
