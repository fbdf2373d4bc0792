/* fmt.c — human units in and out (see fmt.h). Text is read by la_parse
 * (liballoc_parse.h), the grammar the library and the daemon use too. */
#include "fmt.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "liballoc_parse.h"

/* la_parse's status as the -1/errno convention of fmt.h. */
static int parsed(int type, const char *s, int64_t *out)
{
	switch (la_parse(type, s, out)) {
	case LA_PARSE_OK:
		return 0;
	case LA_PARSE_RANGE:
		errno = ERANGE;
		return -1;
	default:
		errno = EINVAL;
		return -1;
	}
}

int fmt_parse_size(const char *s, uint64_t *out)
{
	int64_t v;
	if (parsed(LA_T_SIZE, s, &v) < 0)
		return -1;
	*out = (uint64_t)v;
	return 0;
}

int fmt_parse_ms(const char *s, int64_t *out)
{
	return parsed(LA_T_MS, s, out);
}

int fmt_parse_bool(const char *s, int64_t *out)
{
	return parsed(LA_T_BOOL, s, out);
}

int fmt_parse_int(const char *s, int64_t *out)
{
	return parsed(LA_T_INT, s, out);
}

int fmt_parse_pid(const char *s, int32_t *out)
{
	int64_t v;
	if (fmt_parse_int(s, &v) < 0)
		return -1;
	if (v < 1 || v > INT32_MAX) {
		errno = ERANGE;
		return -1;
	}
	*out = (int32_t)v;
	return 0;
}

/* v in decimal at p (room for 20 digits); returns the end (not terminated). */
static char *put_u64(char *p, uint64_t v)
{
	char t[20];
	int k = 0;
	do
		t[k++] = (char)('0' + v % 10);
	while ((v /= 10));
	while (k)
		*p++ = t[--k];
	return p;
}

char *fmt_size(char *buf, size_t n, uint64_t bytes, bool raw)
{
	static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	if (n >= 24 && (raw || bytes < 1024)) { /* (a table of thousands: no printf) */
		char *e = put_u64(buf, bytes);
		if (!raw)
			memcpy(e, " B", 3);
		else
			*e = 0;
		return buf;
	}
	if (raw || bytes < 1024) {
		snprintf(buf, n, raw ? "%" PRIu64 : "%" PRIu64 " B", bytes);
		return buf;
	}
	if (n >= 24 && bytes < (1ull << 40)) {
		/* what "%.1f" prints of bytes / 1024^(u+1), in integers: the quotient in tenths,
		 * rounded half to even as printf rounds an exact tie; the unit moves up when it
		 * would print 1024.0 (v >= 1023.95: no value of this range lies within the
		 * double's error of that bound) */
		int u = 0;
		uint64_t d = 1024;
		while (u < 3 && bytes * 20 >= 20479 * d) {
			d <<= 10;
			u++;
		}
		uint64_t q = bytes * 10 / d, r = bytes * 10 % d;
		if (2 * r > d || (2 * r == d && (q & 1)))
			q++;
		char *e = put_u64(buf, q / 10);
		*e++ = '.';
		*e++ = (char)('0' + q % 10);
		*e++ = ' ';
		memcpy(e, units[u], 4);
		return buf;
	}
	int u = 0;
	double v = (double)bytes / 1024.0;
	/* Move up a unit when one decimal would round to 1024.0. */
	while (u < 5 && v >= 1023.95) {
		v /= 1024.0;
		u++;
	}
	snprintf(buf, n, "%.1f %s", v, units[u]);
	return buf;
}

char *fmt_duration_ns(char *buf, size_t n, uint64_t ns)
{
	if (ns < 1000)
		snprintf(buf, n, "%" PRIu64 " ns", ns);
	else if (ns < 1000000)
		snprintf(buf, n, "%.1f us", (double)ns / 1e3);
	else if (ns < 1000000000)
		snprintf(buf, n, "%.1f ms", (double)ns / 1e6);
	else
		snprintf(buf, n, "%.2f s", (double)ns / 1e9);
	return buf;
}

char *fmt_uptime(char *buf, size_t n, uint64_t s)
{
	if (s < 60)
		snprintf(buf, n, "%" PRIu64 "s", s);
	else if (s < 3600)
		snprintf(buf, n, "%" PRIu64 "m%02" PRIu64 "s", s / 60, s % 60);
	else if (s < 86400)
		snprintf(buf, n, "%" PRIu64 "h%02" PRIu64 "m", s / 3600, s % 3600 / 60);
	else
		snprintf(buf, n, "%" PRIu64 "d%02" PRIu64 "h", s / 86400, s % 86400 / 3600);
	return buf;
}

char *fmt_ms(char *buf, size_t n, int64_t ms)
{
	if (ms < 1000 && ms > -1000)
		snprintf(buf, n, "%" PRId64 " ms", ms);
	else if (ms % 1000 == 0)
		snprintf(buf, n, "%" PRId64 " s", ms / 1000);
	else
		snprintf(buf, n, "%.3g s", (double)ms / 1000.0);
	return buf;
}

char *fmt_u64(char *buf, size_t n, uint64_t v)
{
	snprintf(buf, n, "%" PRIu64, v);
	return buf;
}
