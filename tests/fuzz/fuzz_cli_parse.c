/* fuzz_cli_parse.c — libFuzzer target for allocctl's value parsers (cli/fmt.c,
 * cli/tunable.c): the input, as a NUL-terminated string, goes through every parser and the
 * tunable parser of every tunable. Invariants checked besides the sanitizers: a failure
 * sets errno to EINVAL or ERANGE and leaves a one-line message; an accepted value is in
 * its range (pids 1..INT32_MAX, bools 0/1, tunables [min, max]) and survives a round trip
 * through its raw formatting; every formatter NUL-terminates within its buffer. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "liballoc_shm.h"
#include "tunable.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_failure(int r)
{
	if (r != -1 || (errno != EINVAL && errno != ERANGE))
		abort();
}

static void check_string(const char *buf, size_t n)
{
	if (strnlen(buf, n) >= n)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 256)
		return 0;
	char s[257];
	memcpy(s, data, size);
	s[size] = 0;
	char buf[FMT_BUF], again[FMT_BUF];

	uint64_t u;
	errno = 0;
	if (fmt_parse_size(s, &u) == 0) {
		uint64_t v;
		if (fmt_parse_size(fmt_size(buf, sizeof(buf), u, true), &v) != 0 || v != u)
			abort();
		check_string(fmt_size(buf, sizeof(buf), u, false), sizeof(buf));
	} else {
		check_failure(-1);
	}
	int64_t i;
	errno = 0;
	if (fmt_parse_ms(s, &i) == 0) {
		check_string(fmt_ms(buf, sizeof(buf), i), sizeof(buf));
		if (i >= 0)
			check_string(fmt_duration_ns(buf, sizeof(buf), (uint64_t)i * 1000000u),
			             sizeof(buf));
	} else {
		check_failure(-1);
	}
	errno = 0;
	if (fmt_parse_bool(s, &i) == 0) {
		if (i != 0 && i != 1)
			abort();
	} else {
		check_failure(-1);
	}
	errno = 0;
	if (fmt_parse_int(s, &i) == 0) {
		int64_t v;
		snprintf(buf, sizeof(buf), "%" PRId64, i);
		if (fmt_parse_int(buf, &v) != 0 || v != i)
			abort();
		if (i >= 0)
			check_string(fmt_uptime(buf, sizeof(buf), (uint64_t)i), sizeof(buf));
	} else {
		check_failure(-1);
	}
	int32_t pid;
	errno = 0;
	if (fmt_parse_pid(s, &pid) == 0) {
		if (pid < 1)
			abort();
	} else {
		check_failure(-1);
	}

	const struct tunable_info *named = tunable_find(s);
	if (named && strcmp(named->name, s) != 0)
		abort();
	for (size_t k = 0; k < tunable_count; k++) {
		const struct tunable_info *t = &tunable_table[k];
		char err[256];
		err[0] = 0;
		if (tunable_parse(t, s, &i, err, sizeof(err)) == 0) {
			if (i < t->min || i > t->max)
				abort();
			int64_t v;
			tunable_format(buf, sizeof(buf), t->type, i, true);
			if (tunable_parse(t, buf, &v, err, sizeof(err)) != 0 || v != i)
				abort();
			check_string(tunable_format(again, sizeof(again), t->type, i, false),
			             sizeof(again));
		} else if (err[0] == 0 || (strchr(err, '\n') && !strchr(s, '\n'))) {
			abort(); /* a refusal names the value and the valid range, on one line */
		}
	}
	return 0;
}
