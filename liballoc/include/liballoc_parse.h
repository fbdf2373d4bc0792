/* liballoc_parse.h — the one parser of sizes, durations, booleans and integers, shared by
 * the library (LIBALLOC_* environment variables, liballoc_set), the daemon (its
 * configuration and profiles) and the CLI (allocctl set, options), so that the same text
 * means the same value everywhere.
 *
 * Grammar (blanks around the value and between a number and its unit are ignored):
 *   size      NUMBER [K|M|G|T|P|E][i][B]  binary units, case-insensitive: 64K, 1.5M, 2 GiB, 512B
 *   duration  NUMBER [ms|s|m|min|h]       a bare number is milliseconds: 250, 10s, 1.5m, 1h
 *   boolean   1/0, true/false, yes/no, on/off (case-insensitive)
 *   integer   [-]DIGITS
 * NUMBER is DIGITS[.DIGITS] or .DIGITS; a fraction is exact (integer arithmetic, up to 18
 * digits) and the result is rounded to the nearest byte or millisecond. Values above
 * INT64_MAX are a range error, never wrapped or clamped.
 *
 * Pure and allocation-free (no libc calls, no floating point): the allocator calls it while
 * it initialises, before malloc works. */
#ifndef LIBALLOC_PARSE_H
#define LIBALLOC_PARSE_H

#include <stdbool.h>
#include <stdint.h>

#include "liballoc_shm.h" /* LA_T_SIZE, LA_T_BOOL, LA_T_INT, LA_T_MS */

enum la_parse_status { LA_PARSE_OK = 0, LA_PARSE_SYNTAX = 1, LA_PARSE_RANGE = 2 };

/* What a value of type looks like, for messages: "a size such as 4096, 64K, 1.5M, 2G". */
static inline const char *la_parse_expect(int type)
{
	switch (type) {
	case LA_T_SIZE:
		return "a size such as 4096, 64K, 1.5M, 2 GiB (binary units K M G T P E)";
	case LA_T_BOOL:
		return "a boolean: 1/0, true/false, yes/no, on/off";
	case LA_T_MS:
		return "a duration such as 250 (ms), 250ms, 10s, 1.5m, 1h";
	default:
		return "an integer";
	}
}

static inline bool la_parse_blank_(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static inline char la_parse_lower_(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* [p, end) equals word, ignoring case. */
static inline bool la_parse_word_(const char *p, const char *end, const char *word)
{
	while (p < end && *word)
		if (la_parse_lower_(*p++) != *word++)
			return false;
	return p == end && !*word;
}

/* A NUMBER at *pp (DIGITS[.DIGITS] or .DIGITS): its integer part, fraction digits and
 * their scale (10^digits); *overflow when the integer part exceeds 64 bits. *pp is moved
 * past the number. LA_PARSE_SYNTAX if there is none. */
static inline int la_parse_number_(const char **pp, const char *end, uint64_t *ip, uint64_t *frac,
                                   uint64_t *scale, bool *overflow)
{
	const char *p = *pp;
	uint64_t i = 0, f = 0, sc = 1;
	int digits = 0;
	*overflow = false;
	while (p < end && *p >= '0' && *p <= '9') {
		uint64_t d = (uint64_t)(*p++ - '0');
		if (i > (UINT64_MAX - d) / 10)
			*overflow = true;
		else
			i = i * 10 + d;
		digits++;
	}
	if (p < end && *p == '.') {
		p++;
		int fdigits = 0;
		while (p < end && *p >= '0' && *p <= '9') {
			if (sc < 1000000000000000000ULL) { /* more digits than 18 are ignored */
				f = f * 10 + (uint64_t)(*p - '0');
				sc *= 10;
			}
			p++;
			fdigits++;
		}
		if (!fdigits)
			return LA_PARSE_SYNTAX; /* "5." */
		digits += fdigits;
	}
	if (!digits)
		return LA_PARSE_SYNTAX;
	*pp = p;
	*ip = i;
	*frac = f;
	*scale = sc;
	return LA_PARSE_OK;
}

/* (i + frac/scale) * mult rounded to the nearest whole unit; RANGE above INT64_MAX. */
static inline int la_parse_scale_(uint64_t i, uint64_t frac, uint64_t scale, uint64_t mult,
                                  int64_t *out)
{
	unsigned __int128 v = (unsigned __int128)i * mult;
	v += ((unsigned __int128)frac * mult + scale / 2) / scale;
	if (v > (unsigned __int128)INT64_MAX)
		return LA_PARSE_RANGE;
	*out = (int64_t)v;
	return LA_PARSE_OK;
}

/* Parse text as a value of type (LA_T_SIZE, LA_T_BOOL, LA_T_INT, LA_T_MS). *out is written
 * only on LA_PARSE_OK. */
static inline int la_parse(int type, const char *text, int64_t *out)
{
	if (!text)
		return LA_PARSE_SYNTAX;
	const char *p = text, *end = text;
	while (*end)
		end++;
	while (p < end && la_parse_blank_(*p))
		p++;
	while (end > p && la_parse_blank_(end[-1]))
		end--;
	if (p == end)
		return LA_PARSE_SYNTAX;

	if (type == LA_T_BOOL) {
		static const char *const yes[] = {"1", "true", "yes", "on"};
		static const char *const no[] = {"0", "false", "no", "off"};
		for (int k = 0; k < 4; k++) {
			if (la_parse_word_(p, end, yes[k])) {
				*out = 1;
				return LA_PARSE_OK;
			}
			if (la_parse_word_(p, end, no[k])) {
				*out = 0;
				return LA_PARSE_OK;
			}
		}
		return LA_PARSE_SYNTAX;
	}

	if (type != LA_T_SIZE && type != LA_T_MS) { /* integer */
		bool neg = *p == '-';
		if (neg)
			p++;
		if (p == end)
			return LA_PARSE_SYNTAX;
		uint64_t v = 0;
		for (; p < end; p++) {
			if (*p < '0' || *p > '9')
				return LA_PARSE_SYNTAX;
			uint64_t d = (uint64_t)(*p - '0');
			if (v > (UINT64_MAX - d) / 10)
				return LA_PARSE_RANGE;
			v = v * 10 + d;
		}
		if (v > (uint64_t)INT64_MAX + (neg ? 1u : 0u))
			return LA_PARSE_RANGE;
		*out = neg ? (int64_t)(0 - v) : (int64_t)v;
		return LA_PARSE_OK;
	}

	uint64_t i, frac, scale;
	bool overflow;
	if (la_parse_number_(&p, end, &i, &frac, &scale, &overflow) != LA_PARSE_OK)
		return LA_PARSE_SYNTAX;
	while (p < end && la_parse_blank_(*p))
		p++;
	uint64_t mult = 1;
	if (type == LA_T_SIZE) {
		static const char units[] = "kmgtpe";
		if (p < end) {
			char c = la_parse_lower_(*p);
			int u = -1;
			for (int k = 0; units[k]; k++)
				if (units[k] == c)
					u = k;
			if (u >= 0) {
				mult = 1ULL << (10 * (u + 1));
				p++;
				if (p < end && la_parse_lower_(*p) == 'i')
					p++;
			}
			if (p < end && la_parse_lower_(*p) == 'b')
				p++;
			if (p != end)
				return LA_PARSE_SYNTAX;
		}
	} else if (p == end || la_parse_word_(p, end, "ms")) {
		mult = 1;
	} else if (la_parse_word_(p, end, "s")) {
		mult = 1000;
	} else if (la_parse_word_(p, end, "m") || la_parse_word_(p, end, "min")) {
		mult = 60000;
	} else if (la_parse_word_(p, end, "h")) {
		mult = 3600000;
	} else {
		return LA_PARSE_SYNTAX;
	}
	if (overflow)
		return LA_PARSE_RANGE;
	return la_parse_scale_(i, frac, scale, mult, out);
}

#endif
