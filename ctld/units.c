/* units.c — human units for tunable values and the tunable table built from LA_TUNABLES.
 * Parsing is strict: the whole string must be consumed, overflow is an error, and a value
 * outside the tunable's range is refused with the range in the message (never clamped). */
#include "units.h"

#include <ctype.h>
#include <stdbool.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

static int syntax(char *err, size_t len, const char *text, const char *expect)
{
	if (err && len)
		snprintf(err, len, "bad value '%.64s': expected %s", text, expect);
	return UNITS_E_SYNTAX;
}

/* A non-negative decimal number with an optional fraction, scaled by mult, into *out. */
static int scaled(const char *num, size_t numlen, int64_t mult, int64_t *out)
{
	char buf[64];
	if (numlen == 0 || numlen >= sizeof(buf))
		return -1;
	memcpy(buf, num, numlen);
	buf[numlen] = 0;
	int dots = 0;
	for (size_t i = 0; i < numlen; i++) {
		if (buf[i] == '.')
			dots++;
		else if (!isdigit((unsigned char)buf[i]))
			return -1;
	}
	if (dots > 1 || buf[0] == '.' || buf[numlen - 1] == '.')
		return -1;
	if (dots == 0) {
		errno = 0;
		unsigned long long v = strtoull(buf, NULL, 10);
		int64_t r;
		if (errno || v > INT64_MAX || __builtin_mul_overflow((int64_t)v, mult, &r))
			return -1;
		*out = r;
		return 0;
	}
	/* fractions: exact enough for "1.5G"; the result must be a whole number of units */
	long double v = strtold(buf, NULL) * (long double)mult;
	if (!(v >= 0) || v > (long double)INT64_MAX)
		return -1;
	int64_t r = (int64_t)(v + 0.5L); /* no libm: callers link units.o alone */
	long double diff = v - (long double)r;
	if (diff < 0)
		diff = -diff;
	if (diff > 1e-6L * (v > 1 ? v : 1))
		return -1;
	*out = r;
	return 0;
}

static int parse_size(const char *text, int64_t *out, char *err, size_t len)
{
	const char *expect = "a size such as 4096, 64K, 1.5M, 2G (K/M/G/T/P, binary)";
	size_t n = strlen(text);
	while (n && isspace((unsigned char)text[n - 1]))
		n--;
	size_t numlen = 0;
	while (numlen < n && (isdigit((unsigned char)text[numlen]) || text[numlen] == '.'))
		numlen++;
	const char *suf = text + numlen;
	size_t suflen = n - numlen;
	while (suflen && isspace((unsigned char)*suf))
		suf++, suflen--;
	int64_t mult = 1;
	if (suflen) {
		static const char units[] = "KMGTP";
		const char *u = strchr(units, toupper((unsigned char)suf[0]));
		if (!u || !suf[0])
			return syntax(err, len, text, expect);
		mult = 1;
		for (const char *k = units; k <= u; k++)
			mult *= 1024;
		const char *rest = suf + 1;
		size_t restlen = suflen - 1;
		if (!(restlen == 0 || (restlen == 1 && toupper((unsigned char)rest[0]) == 'B') ||
		      (restlen == 2 && rest[0] == 'i' && toupper((unsigned char)rest[1]) == 'B')))
			return syntax(err, len, text, expect);
	}
	if (scaled(text, numlen, mult, out) < 0)
		return syntax(err, len, text, expect);
	return UNITS_OK;
}

static int parse_ms(const char *text, int64_t *out, char *err, size_t len)
{
	const char *expect = "a duration such as 250, 250ms, 10s, 5m, 1h";
	size_t n = strlen(text);
	size_t numlen = 0;
	while (numlen < n && (isdigit((unsigned char)text[numlen]) || text[numlen] == '.'))
		numlen++;
	const char *suf = text + numlen;
	int64_t mult;
	if (!*suf || strcmp(suf, "ms") == 0)
		mult = 1;
	else if (strcmp(suf, "s") == 0)
		mult = 1000;
	else if (strcmp(suf, "m") == 0 || strcmp(suf, "min") == 0)
		mult = 60000;
	else if (strcmp(suf, "h") == 0)
		mult = 3600000;
	else
		return syntax(err, len, text, expect);
	if (scaled(text, numlen, mult, out) < 0)
		return syntax(err, len, text, expect);
	return UNITS_OK;
}

static int parse_int(const char *text, int64_t *out, char *err, size_t len)
{
	char *end;
	errno = 0;
	long long v = strtoll(text, &end, 10);
	if (errno || end == text || *end || isspace((unsigned char)text[0]))
		return syntax(err, len, text, "an integer");
	*out = v;
	return UNITS_OK;
}

static int parse_bool(const char *text, int64_t *out, char *err, size_t len)
{
	static const char *const yes[] = {"1", "true", "yes", "on"};
	static const char *const no[] = {"0", "false", "no", "off"};
	for (size_t i = 0; i < 4; i++) {
		if (strcasecmp(text, yes[i]) == 0) {
			*out = 1;
			return UNITS_OK;
		}
		if (strcasecmp(text, no[i]) == 0) {
			*out = 0;
			return UNITS_OK;
		}
	}
	return syntax(err, len, text, "0/1, true/false, yes/no or on/off");
}

int units_parse(int type, const char *text, int64_t *out, char *err, size_t errlen)
{
	if (!text || !*text)
		return syntax(err, errlen, text ? text : "", "a value");
	switch (type) {
	case LA_T_SIZE:
		return parse_size(text, out, err, errlen);
	case LA_T_MS:
		return parse_ms(text, out, err, errlen);
	case LA_T_BOOL:
		return parse_bool(text, out, err, errlen);
	default:
		return parse_int(text, out, err, errlen);
	}
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
