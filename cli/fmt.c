/* fmt.c — human units in and out (see fmt.h). Arithmetic is exact: integer and fraction
 * parts are combined in 128-bit integers, so "1.5G" is exactly 1610612736. */
#include "fmt.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A non-negative decimal "123", "1.25", ".5": integer part, up to 18 fraction digits
 * (more are ignored) and their scale. Returns the end of the number or NULL. */
static const char *parse_decimal(const char *s, uint64_t *ip, uint64_t *frac, uint64_t *scale)
{
	uint64_t i = 0, f = 0, sc = 1;
	int digits = 0;
	while (isdigit((unsigned char)*s)) {
		unsigned d = (unsigned)(*s - '0');
		if (i > (UINT64_MAX - d) / 10) {
			errno = ERANGE;
			return NULL;
		}
		i = i * 10 + d;
		s++;
		digits++;
	}
	if (*s == '.') {
		s++;
		while (isdigit((unsigned char)*s)) {
			if (sc < 1000000000000000000ULL) {
				f = f * 10 + (uint64_t)(*s - '0');
				sc *= 10;
			}
			s++;
			digits++;
		}
	}
	if (digits == 0) {
		errno = EINVAL;
		return NULL;
	}
	*ip = i;
	*frac = f;
	*scale = sc;
	return s;
}

/* value = (i + frac/scale) * mult, rounded to nearest; ERANGE above UINT64_MAX. */
static int scale_exact(uint64_t i, uint64_t frac, uint64_t scale, uint64_t mult, uint64_t *out)
{
	unsigned __int128 v = (unsigned __int128)i * mult;
	v += ((unsigned __int128)frac * mult + scale / 2) / scale;
	if (v > UINT64_MAX) {
		errno = ERANGE;
		return -1;
	}
	*out = (uint64_t)v;
	return 0;
}

int fmt_parse_size(const char *s, uint64_t *out)
{
	uint64_t i, f, sc;
	const char *p = parse_decimal(s, &i, &f, &sc);
	if (!p)
		return -1;
	if (*p == ' ' && p[1]) /* "2 M": one space, and only before a unit */
		p++;
	uint64_t mult = 1;
	static const char units[] = "kmgtpe";
	if (*p) {
		const char *u = strchr(units, tolower((unsigned char)*p));
		if (u) {
			mult = 1ULL << (10 * (u - units + 1));
			p++;
			if (*p == 'i' || *p == 'I')
				p++;
			if (*p == 'b' || *p == 'B')
				p++;
		} else if (*p == 'b' || *p == 'B') {
			p++;
		}
	}
	if (*p) {
		errno = EINVAL;
		return -1;
	}
	return scale_exact(i, f, sc, mult, out);
}

int fmt_parse_ms(const char *s, int64_t *out)
{
	uint64_t i, f, sc, v;
	const char *p = parse_decimal(s, &i, &f, &sc);
	if (!p)
		return -1;
	if (*p == ' ' && p[1])
		p++;
	uint64_t mult;
	if (*p == 0 || strcasecmp(p, "ms") == 0)
		mult = 1;
	else if (strcasecmp(p, "s") == 0)
		mult = 1000;
	else if (strcasecmp(p, "m") == 0 || strcasecmp(p, "min") == 0)
		mult = 60000;
	else if (strcasecmp(p, "h") == 0)
		mult = 3600000;
	else {
		errno = EINVAL;
		return -1;
	}
	if (scale_exact(i, f, sc, mult, &v) < 0)
		return -1;
	if (v > INT64_MAX) {
		errno = ERANGE;
		return -1;
	}
	*out = (int64_t)v;
	return 0;
}

int fmt_parse_bool(const char *s, int64_t *out)
{
	static const char *const yes[] = {"1", "on", "true", "yes"};
	static const char *const no[] = {"0", "off", "false", "no"};
	for (size_t k = 0; k < sizeof(yes) / sizeof(yes[0]); k++) {
		if (strcasecmp(s, yes[k]) == 0) {
			*out = 1;
			return 0;
		}
		if (strcasecmp(s, no[k]) == 0) {
			*out = 0;
			return 0;
		}
	}
	errno = EINVAL;
	return -1;
}

int fmt_parse_int(const char *s, int64_t *out)
{
	if (!*s || isspace((unsigned char)*s) || *s == '+') {
		errno = EINVAL;
		return -1;
	}
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno == ERANGE)
		return -1;
	if (end == s || *end) {
		errno = EINVAL;
		return -1;
	}
	*out = v;
	return 0;
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

char *fmt_size(char *buf, size_t n, uint64_t bytes, bool raw)
{
	static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	if (raw || bytes < 1024) {
		snprintf(buf, n, raw ? "%" PRIu64 : "%" PRIu64 " B", bytes);
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
