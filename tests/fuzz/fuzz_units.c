/* fuzz_units.c — libFuzzer target for the daemon's unit parser (ctld/units.c) and the
 * allocator's own tunable parser (liballoc/src/tunables.c: tun_parse, and
 * tun_init_from_env reading LIBALLOC_<NAME> from an environment made of the input).
 * Input: byte 0 picks the tunable whose variable is set, the rest is the value text.
 * Invariants checked besides the sanitizers: accepted values are in range (units) or
 * accepted by tun_set only when in range; units_format output parses back to the same
 * value; every tunable still holds an in-range value after the environment was read, and
 * a value refused there leaves the default in place. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tunables.h"
#include "units.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

extern char **environ;
static int64_t defaults[LA_NTUNABLES];
static int devnull = -1;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	memcpy(defaults, tun_values, sizeof(defaults));
	devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	return 0;
}

static void check_units(const char *s)
{
	char err[200], buf[64];
	for (int type = LA_T_SIZE; type <= LA_T_MS; type++) {
		int64_t v, back;
		err[0] = 0;
		if (units_parse(type, s, &v, err, sizeof(err)) == UNITS_OK) {
			units_format(type, v, buf, sizeof(buf));
			if (strnlen(buf, sizeof(buf)) >= sizeof(buf))
				abort();
			if (units_parse(type, buf, &back, err, sizeof(err)) != UNITS_OK ||
			    back != v)
				abort();
		} else if (!err[0]) {
			abort();
		}
	}
	for (int k = 0; k < LA_NTUNABLES; k++) {
		const struct tunable_info *t = &tunable_table[k];
		int64_t v;
		err[0] = 0;
		int r = units_parse_tunable(t, s, &v, err, sizeof(err));
		if (r == UNITS_OK && (v < t->min || v > t->max))
			abort();
		if (r != UNITS_OK && (!err[0] || strncmp(err, t->name, strlen(t->name)) != 0))
			abort(); /* the message names the tunable */
	}
	const struct tunable_info *f = tunable_find(s);
	if (f && strcmp(f->name, s) != 0)
		abort();
}

static void check_tun_parse(const char *s)
{
	char reason[LA_REASON_MAX];
	for (int id = 0; id < LA_NTUNABLES; id++) {
		int64_t v;
		reason[0] = 0;
		if (tun_parse(id, s, &v, reason, sizeof(reason)) != LA_ST_OK) {
			if (!reason[0] || strnlen(reason, sizeof(reason)) >= sizeof(reason))
				abort();
			continue;
		}
		int64_t before = tun_values[id], dyn = tun_values[LA_TUNABLE_mmap_dynamic];
		int st = tun_set(id, v, LA_SRC_api, reason, sizeof(reason));
		const struct tun_def *d = &tun_defs[id];
		bool in_range = v >= d->min && v <= d->max;
		if ((st == LA_ST_OK) != in_range)
			abort();
		if (st != LA_ST_OK && tun_values[id] != before)
			abort(); /* refused, never clamped */
		tun_values[id] = before;
		tun_values[LA_TUNABLE_mmap_dynamic] = dyn; /* a pinned threshold turned it off */
		memset(tun_source, 0, sizeof(tun_source));
	}
	if (tun_find(s) >= 0 && strcmp(tun_defs[tun_find(s)].name, s) != 0)
		abort();
}

static void check_env(int id, const char *s)
{
	char var[128 + 300];
	size_t n = (size_t)snprintf(var, sizeof(var), "LIBALLOC_");
	for (const char *c = tun_defs[id].name; *c; c++)
		var[n++] = (*c >= 'a' && *c <= 'z') ? (char)(*c - 32) : *c;
	snprintf(var + n, sizeof(var) - n, "=%s", s);
	char *env[] = {var, NULL};
	char **saved = environ;
	environ = env;
	int err = dup(2);
	if (devnull >= 0)
		dup2(devnull, 2); /* an invalid value prints one line: keep the fuzzer quiet */
	tun_init_from_env();
	if (err >= 0) {
		dup2(err, 2);
		close(err);
	}
	environ = saved;
	for (int k = 0; k < LA_NTUNABLES; k++) {
		const struct tun_def *d = &tun_defs[k];
		if (tun_values[k] != defaults[k] &&
		    (tun_values[k] < d->min || tun_values[k] > d->max))
			abort();
		if (k != id && k != LA_TUNABLE_mmap_dynamic && k != LA_TUNABLE_arena_max &&
		    tun_values[k] != defaults[k])
			abort(); /* only the named tunable (and what it implies) may change */
	}
	memcpy(tun_values, defaults, sizeof(defaults));
	memset(tun_source, 0, sizeof(tun_source));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 257)
		return 0;
	char s[257];
	memcpy(s, data + 1, size - 1);
	s[size - 1] = 0;
	check_units(s);
	check_tun_parse(s);
	check_env(data[0] % LA_NTUNABLES, s);
	return 0;
}
