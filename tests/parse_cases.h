/* tests/parse_cases.h — one table of texts and what they mean, checked against every front
 * end of liballoc_parse.h: the library's tun_parse (environment), the daemon's units_parse
 * (configuration, profiles) and the CLI's fmt_parse_* (allocctl set and options), so that
 * the same text means the same value everywhere (tests/unit/tunables.c,
 * tests/ctld/units.c, tests/cli/fmt.c). */
#ifndef TESTS_PARSE_CASES_H
#define TESTS_PARSE_CASES_H

#include <stdint.h>

#include "liballoc_parse.h"

struct parse_case {
	int type;
	const char *text;
	int status; /* LA_PARSE_OK, LA_PARSE_SYNTAX or LA_PARSE_RANGE */
	int64_t value;
};

static const struct parse_case parse_cases[] = {
        /* sizes: binary units in every spelling, blanks, exact fractions rounded to a byte */
        {LA_T_SIZE, "0", LA_PARSE_OK, 0},
        {LA_T_SIZE, "4096", LA_PARSE_OK, 4096},
        {LA_T_SIZE, "512B", LA_PARSE_OK, 512},
        {LA_T_SIZE, "512 b", LA_PARSE_OK, 512},
        {LA_T_SIZE, "64K", LA_PARSE_OK, 65536},
        {LA_T_SIZE, "64k", LA_PARSE_OK, 65536},
        {LA_T_SIZE, "64KB", LA_PARSE_OK, 65536},
        {LA_T_SIZE, "64KiB", LA_PARSE_OK, 65536},
        {LA_T_SIZE, "64 KiB", LA_PARSE_OK, 65536},
        {LA_T_SIZE, " 64K ", LA_PARSE_OK, 65536},
        {LA_T_SIZE, "5 ", LA_PARSE_OK, 5},
        {LA_T_SIZE, "1.5M", LA_PARSE_OK, 1572864},
        {LA_T_SIZE, "1.5G", LA_PARSE_OK, 1610612736},
        {LA_T_SIZE, ".25M", LA_PARSE_OK, 262144},
        {LA_T_SIZE, "0.1K", LA_PARSE_OK, 102}, /* 102.4 */
        {LA_T_SIZE, "0.0005K", LA_PARSE_OK, 1},
        {LA_T_SIZE, "2G", LA_PARSE_OK, 2147483648LL},
        {LA_T_SIZE, "1T", LA_PARSE_OK, 1LL << 40},
        {LA_T_SIZE, "1P", LA_PARSE_OK, 1LL << 50},
        {LA_T_SIZE, "7E", LA_PARSE_OK, 7LL << 60},
        {LA_T_SIZE, "9223372036854775807", LA_PARSE_OK, INT64_MAX},
        {LA_T_SIZE, "8E", LA_PARSE_RANGE, 0},
        {LA_T_SIZE, "9223372036854775808", LA_PARSE_RANGE, 0},
        {LA_T_SIZE, "99999999999999999999999", LA_PARSE_RANGE, 0},
        {LA_T_SIZE, "9000P", LA_PARSE_RANGE, 0},
        {LA_T_SIZE, "", LA_PARSE_SYNTAX, 0},
        {LA_T_SIZE, "  ", LA_PARSE_SYNTAX, 0},
        {LA_T_SIZE, "K", LA_PARSE_SYNTAX, 0},
        {LA_T_SIZE, "-1", LA_PARSE_SYNTAX, 0},
        {LA_T_SIZE, "+1", LA_PARSE_SYNTAX, 0},
        {LA_T_SIZE, "1X", LA_PARSE_SYNTAX, 0},
        {LA_T_SIZE, "1KK", LA_PARSE_SYNTAX, 0},
        {LA_T_SIZE, "1Kb2", LA_PARSE_SYNTAX, 0},
        {LA_T_SIZE, "1KiBs", LA_PARSE_SYNTAX, 0},
        {LA_T_SIZE, "1 iB", LA_PARSE_SYNTAX, 0},
        {LA_T_SIZE, "1.5.5M", LA_PARSE_SYNTAX, 0},
        {LA_T_SIZE, "5.K", LA_PARSE_SYNTAX, 0},
        {LA_T_SIZE, ".", LA_PARSE_SYNTAX, 0},
        {LA_T_SIZE, "0x10", LA_PARSE_SYNTAX, 0},
        {LA_T_SIZE, "1e3", LA_PARSE_SYNTAX, 0},
        {LA_T_SIZE, "1 2", LA_PARSE_SYNTAX, 0},
        {LA_T_SIZE, "10s", LA_PARSE_SYNTAX, 0},
        /* durations: a bare number is milliseconds */
        {LA_T_MS, "250", LA_PARSE_OK, 250},
        {LA_T_MS, "250ms", LA_PARSE_OK, 250},
        {LA_T_MS, "250 MS", LA_PARSE_OK, 250},
        {LA_T_MS, "5 ", LA_PARSE_OK, 5},
        {LA_T_MS, "10s", LA_PARSE_OK, 10000},
        {LA_T_MS, "10 s", LA_PARSE_OK, 10000},
        {LA_T_MS, "1.5s", LA_PARSE_OK, 1500},
        {LA_T_MS, "5m", LA_PARSE_OK, 300000},
        {LA_T_MS, "1.5min", LA_PARSE_OK, 90000},
        {LA_T_MS, "1h", LA_PARSE_OK, 3600000},
        {LA_T_MS, "0.0004s", LA_PARSE_OK, 0}, /* 0.4 ms */
        {LA_T_MS, "10d", LA_PARSE_SYNTAX, 0},
        {LA_T_MS, "-5", LA_PARSE_SYNTAX, 0},
        {LA_T_MS, "s", LA_PARSE_SYNTAX, 0},
        {LA_T_MS, "10K", LA_PARSE_SYNTAX, 0},
        {LA_T_MS, "1hour", LA_PARSE_SYNTAX, 0},
        {LA_T_MS, "99999999999999999999h", LA_PARSE_RANGE, 0},
        /* booleans */
        {LA_T_BOOL, "1", LA_PARSE_OK, 1},
        {LA_T_BOOL, "true", LA_PARSE_OK, 1},
        {LA_T_BOOL, "TRUE", LA_PARSE_OK, 1},
        {LA_T_BOOL, "Yes", LA_PARSE_OK, 1},
        {LA_T_BOOL, " on ", LA_PARSE_OK, 1},
        {LA_T_BOOL, "0", LA_PARSE_OK, 0},
        {LA_T_BOOL, "false", LA_PARSE_OK, 0},
        {LA_T_BOOL, "no", LA_PARSE_OK, 0},
        {LA_T_BOOL, "Off", LA_PARSE_OK, 0},
        {LA_T_BOOL, "2", LA_PARSE_SYNTAX, 0},
        {LA_T_BOOL, "onn", LA_PARSE_SYNTAX, 0},
        {LA_T_BOOL, "truthy", LA_PARSE_SYNTAX, 0},
        {LA_T_BOOL, "", LA_PARSE_SYNTAX, 0},
        /* integers */
        {LA_T_INT, "42", LA_PARSE_OK, 42},
        {LA_T_INT, " 42 ", LA_PARSE_OK, 42},
        {LA_T_INT, "-5", LA_PARSE_OK, -5},
        {LA_T_INT, "9223372036854775807", LA_PARSE_OK, INT64_MAX},
        {LA_T_INT, "-9223372036854775808", LA_PARSE_OK, INT64_MIN},
        {LA_T_INT, "9223372036854775808", LA_PARSE_RANGE, 0},
        {LA_T_INT, "4K", LA_PARSE_SYNTAX, 0},
        {LA_T_INT, "12x", LA_PARSE_SYNTAX, 0},
        {LA_T_INT, "1.5", LA_PARSE_SYNTAX, 0},
        {LA_T_INT, "-", LA_PARSE_SYNTAX, 0},
        {LA_T_INT, "+3", LA_PARSE_SYNTAX, 0},
};
#define PARSE_NCASES (sizeof(parse_cases) / sizeof(parse_cases[0]))

#endif
