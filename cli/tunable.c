/* tunable.c — the tunable table from LA_TUNABLES, value parsing and formatting (tunable.h). */
#include "tunable.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "fmt.h"
#include "liballoc_shm.h"

const char *tunable_type_name(int type)
{
	return units_type_name(type);
}

int tunable_type_from_name(const char *name)
{
	static const int types[] = {LA_T_SIZE, LA_T_BOOL, LA_T_INT, LA_T_MS};
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (name && strcmp(name, units_type_name(types[i])) == 0)
			return types[i];
	return -1;
}

char *tunable_names(char *buf, size_t n)
{
	size_t off = 0;
	buf[0] = 0;
	for (size_t i = 0; i < tunable_count && off < n; i++) {
		int w = snprintf(buf + off, n - off, "%s%s", i ? ", " : "", tunable_table[i].name);
		if (w < 0)
			break;
		off += (size_t)w;
	}
	return buf;
}

static const char *type_syntax(int type)
{
	switch (type) {
	case LA_T_SIZE:
		return "a size in bytes, e.g. 4096, 64K, 1.5M, 2G";
	case LA_T_BOOL:
		return "a boolean: 1/0, on/off, true/false, yes/no";
	case LA_T_MS:
		return "a duration, e.g. 250 (ms), 250ms, 10s, 2m";
	default:
		return "an integer";
	}
}

int tunable_parse(const struct tunable_info *t, const char *text, int64_t *out, char *err,
                  size_t errlen)
{
	int64_t v = 0;
	int r;
	switch (t->type) {
	case LA_T_SIZE: {
		uint64_t u;
		r = fmt_parse_size(text, &u);
		if (r == 0 && u > INT64_MAX) {
			errno = ERANGE;
			r = -1;
		}
		v = (int64_t)u;
		break;
	}
	case LA_T_BOOL:
		r = fmt_parse_bool(text, &v);
		break;
	case LA_T_MS:
		r = fmt_parse_ms(text, &v);
		break;
	default:
		r = fmt_parse_int(text, &v);
		break;
	}
	char range[2 * FMT_BUF + 16];
	tunable_format_range(range, sizeof(range), t->type, t->min, t->max, false);
	if (r < 0 && errno == EINVAL) {
		snprintf(err, errlen, "invalid value '%s' for %s: expected %s, in %s", text,
		         t->name, type_syntax(t->type), range);
		return -1;
	}
	if (r < 0 || v < t->min || v > t->max) {
		snprintf(err, errlen, "value '%s' out of range for %s: valid range is %s", text,
		         t->name, range);
		return -1;
	}
	*out = v;
	return 0;
}

char *tunable_format(char *buf, size_t n, int type, int64_t value, bool raw)
{
	if (raw || type == LA_T_INT || value < 0) {
		snprintf(buf, n, "%" PRId64, value);
		return buf;
	}
	switch (type) {
	case LA_T_SIZE:
		return fmt_size(buf, n, (uint64_t)value, false);
	case LA_T_BOOL:
		snprintf(buf, n, "%s", value ? "on" : "off");
		return buf;
	case LA_T_MS:
		return fmt_ms(buf, n, value);
	default:
		snprintf(buf, n, "%" PRId64, value);
		return buf;
	}
}

char *tunable_format_range(char *buf, size_t n, int type, int64_t min, int64_t max, bool raw)
{
	if (type == LA_T_BOOL) {
		snprintf(buf, n, "0 or 1 (off/on)");
		return buf;
	}
	char a[FMT_BUF], b[FMT_BUF];
	snprintf(buf, n, "%s .. %s", tunable_format(a, sizeof(a), type, min, raw),
	         tunable_format(b, sizeof(b), type, max, raw));
	return buf;
}
