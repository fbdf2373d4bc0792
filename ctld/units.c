/* units.c — human units for tunable values and the tunable table built from LA_TUNABLES.
 * Parsing is strict: the whole string must be consumed, overflow is an error, and a value
 * outside the tunable's range is refused with the range in the message (never clamped). */
#include "units.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "liballoc_parse.h"

const struct tunable_info tunable_table[LA_NTUNABLES] = {
#define UNITS_X_INFO(name, type, def, min, max, live, mallopt, help) \
	{#name, type, def, min, max, live, mallopt, help},
        LA_TUNABLES(UNITS_X_INFO)
#undef UNITS_X_INFO
};

const struct tunable_info *tunable_find(const char *name)
{
	for (int i = 0; i < LA_NTUNABLES; i++)
		if (strcmp(tunable_table[i].name, name) == 0)
			return &tunable_table[i];
	return NULL;
}

const char *units_type_name(int type)
{
	switch (type) {
	case LA_T_SIZE:
		return "size";
	case LA_T_BOOL:
		return "bool";
	case LA_T_INT:
		return "int";
	case LA_T_MS:
		return "ms";
	}
	return "unknown";
}

int units_parse(int type, const char *text, int64_t *out, char *err, size_t errlen)
{
	int r = la_parse(type, text, out);
	if (r == LA_PARSE_OK)
		return UNITS_OK;
	if (err && errlen)
		snprintf(err, errlen, "bad value '%.64s': %s%s", text ? text : "",
		         r == LA_PARSE_RANGE ? "too large for " : "expected ",
		         la_parse_expect(type));
	return r == LA_PARSE_RANGE ? UNITS_E_RANGE : UNITS_E_SYNTAX;
}

int units_parse_tunable(const struct tunable_info *t, const char *text, int64_t *out, char *err,
                        size_t errlen)
{
	int64_t v;
	char why[160];
	int r = units_parse(t->type, text, &v, why, sizeof(why));
	if (r) {
		if (err && errlen)
			snprintf(err, errlen, "%s: %s", t->name, why);
		return r;
	}
	if (v < t->min || v > t->max) {
		char lo[32], hi[32];
		units_format(t->type, t->min, lo, sizeof(lo));
		units_format(t->type, t->max, hi, sizeof(hi));
		if (err && errlen)
			snprintf(err, errlen, "%s = %.64s is out of range [%s, %s]", t->name, text,
			         lo, hi);
		return UNITS_E_RANGE;
	}
	*out = v;
	return UNITS_OK;
}

void units_format(int type, int64_t v, char *buf, size_t len)
{
	if (type == LA_T_BOOL && (v == 0 || v == 1)) {
		snprintf(buf, len, "%s", v ? "true" : "false");
		return;
	}
	if (type == LA_T_MS && v > 0) {
		if (v % 3600000 == 0)
			snprintf(buf, len, "%lldh", (long long)(v / 3600000));
		else if (v % 60000 == 0)
			snprintf(buf, len, "%lldm", (long long)(v / 60000));
		else if (v % 1000 == 0)
			snprintf(buf, len, "%llds", (long long)(v / 1000));
		else
			snprintf(buf, len, "%lldms", (long long)v);
		return;
	}
	if (type == LA_T_SIZE && v >= 1024) {
		static const char units[] = "KMGTP";
		int u = -1;
		double d = (double)v;
		while (d >= 1024 && u < 4) {
			d /= 1024;
			u++;
		}
		/* exact multiples print without a fraction; others with one decimal if exact */
		int64_t unit = 1;
		for (int i = 0; i <= u; i++)
			unit *= 1024;
		if (v % unit == 0)
			snprintf(buf, len, "%lld%c", (long long)(v / unit), units[u]);
		else if (v < INT64_MAX / 10 && (v * 10) % unit == 0)
			snprintf(buf, len, "%.1f%c", d, units[u]);
		else
			snprintf(buf, len, "%lld", (long long)v);
		return;
	}
	snprintf(buf, len, "%lld", (long long)v);
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && strcmp(s + n - k, suffix) == 0;
}

void units_metric_name(const struct tunable_info *t, char *buf, size_t len)
{
	size_t n = strlen(t->name);
	if (t->type == LA_T_MS && ends_with(t->name, "_ms"))
		snprintf(buf, len, "liballoc_tunable_%.*s_seconds", (int)(n - 3), t->name);
	else if (t->type == LA_T_MS)
		snprintf(buf, len, "liballoc_tunable_%s_seconds", t->name);
	else if (t->type == LA_T_SIZE && !ends_with(t->name, "_bytes"))
		snprintf(buf, len, "liballoc_tunable_%s_bytes", t->name);
	else
		snprintf(buf, len, "liballoc_tunable_%s", t->name);
}

void units_metric_value(const struct tunable_info *t, int64_t v, char *buf, size_t len)
{
	if (t->type == LA_T_MS && v % 1000 != 0)
		snprintf(buf, len, "%s%lld.%03lld", v < 0 ? "-" : "", (long long)(llabs(v) / 1000),
		         (long long)(llabs(v) % 1000));
	else if (t->type == LA_T_MS)
		snprintf(buf, len, "%lld", (long long)(v / 1000));
	else
		snprintf(buf, len, "%lld", (long long)v);
}
