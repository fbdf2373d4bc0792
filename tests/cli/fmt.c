/* tests/cli/fmt.c — allocctl's human units: sizes and durations in, sizes, durations and
 * uptimes out, tunable values parsed by type with their range, and the JSON writer. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "json.h"
#include "liballoc_shm.h"
#include "tunable.h"

#include "../parse_cases.h"

/* allocctl reads every text of the shared table as la_parse does (tests/parse_cases.h),
 * refusals as EINVAL (not that kind of value) or ERANGE (too large). */
Test(parse, the_shared_grammar)
{
	for (size_t i = 0; i < PARSE_NCASES; i++) {
		const struct parse_case *c = &parse_cases[i];
		int64_t v = -12345;
		uint64_t u = 12345;
		int r;
		errno = 0;
		switch (c->type) {
		case LA_T_SIZE:
			r = fmt_parse_size(c->text, &u);
			if (r == 0)
				v = (int64_t)u;
			break;
		case LA_T_MS:
			r = fmt_parse_ms(c->text, &v);
			break;
		case LA_T_BOOL:
			r = fmt_parse_bool(c->text, &v);
			break;
		default:
			r = fmt_parse_int(c->text, &v);
			break;
		}
		if (c->status == LA_PARSE_OK) {
			cr_assert_eq(r, 0, "'%s' should parse", c->text);
			cr_assert_eq(v, c->value, "'%s': %lld", c->text, (long long)v);
			continue;
		}
		cr_assert_eq(r, -1, "'%s' should be refused", c->text);
		cr_assert_eq(errno, c->status == LA_PARSE_RANGE ? ERANGE : EINVAL, "'%s': errno %d",
		             c->text, errno);
		cr_assert(v == -12345 && u == 12345,
		          "'%s': a refused value leaves the output alone", c->text);
	}
}

Test(pid_parse, positive_int32_only)
{
	int32_t pid;
	cr_assert_eq(fmt_parse_pid("4242", &pid), 0);
	cr_assert_eq(pid, 4242);
	cr_assert_eq(fmt_parse_pid("2147483647", &pid), 0);
	cr_assert_eq(fmt_parse_pid("0", &pid), -1);
	cr_assert_eq(fmt_parse_pid("-3", &pid), -1);
	cr_assert_eq(fmt_parse_pid("+3", &pid), -1);
	cr_assert_eq(fmt_parse_pid("2147483648", &pid), -1);
	cr_assert_eq(fmt_parse_pid("12ab", &pid), -1);
	cr_assert_eq(fmt_parse_pid("", &pid), -1);
	cr_assert_eq(fmt_parse_pid(" 1 ", &pid), 0, "blanks around a number, as everywhere");
	cr_assert_eq(pid, 1);
}

Test(size_format, human_units_with_one_decimal)
{
	char b[FMT_BUF];
	cr_assert_str_eq(fmt_size(b, sizeof(b), 0, false), "0 B");
	cr_assert_str_eq(fmt_size(b, sizeof(b), 1023, false), "1023 B");
	cr_assert_str_eq(fmt_size(b, sizeof(b), 1024, false), "1.0 KiB");
	cr_assert_str_eq(fmt_size(b, sizeof(b), 812ULL << 20, false), "812.0 MiB");
	cr_assert_str_eq(fmt_size(b, sizeof(b), 1610612736ULL, false), "1.5 GiB");
	cr_assert_str_eq(fmt_size(b, sizeof(b), (1ULL << 20) - 1, false), "1.0 MiB");
	cr_assert_str_eq(fmt_size(b, sizeof(b), UINT64_MAX, false), "16.0 EiB");
}

Test(size_format, raw_prints_the_plain_number)
{
	char b[FMT_BUF];
	cr_assert_str_eq(fmt_size(b, sizeof(b), 851443712ULL, true), "851443712");
	cr_assert_str_eq(fmt_size(b, sizeof(b), 0, true), "0");
}

Test(size_format, round_trips_through_the_parser)
{
	char b[FMT_BUF];
	uint64_t v;
	const uint64_t cases[] = {1024, 64 << 10, 1536 << 10, 812ULL << 20, 3ULL << 30};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		fmt_size(b, sizeof(b), cases[i], false);
		cr_assert_eq(fmt_parse_size(b, &v), 0, "'%s' parses back", b);
		cr_assert_eq(v, cases[i], "'%s' is %llu", b, (unsigned long long)cases[i]);
	}
}

Test(duration_format, picks_the_unit)
{
	char b[FMT_BUF];
	cr_assert_str_eq(fmt_duration_ns(b, sizeof(b), 850), "850 ns");
	cr_assert_str_eq(fmt_duration_ns(b, sizeof(b), 12400), "12.4 us");
	cr_assert_str_eq(fmt_duration_ns(b, sizeof(b), 3100000), "3.1 ms");
	cr_assert_str_eq(fmt_duration_ns(b, sizeof(b), 2500000000ULL), "2.50 s");
}

Test(uptime_format, compact_two_units)
{
	char b[FMT_BUF];
	cr_assert_str_eq(fmt_uptime(b, sizeof(b), 45), "45s");
	cr_assert_str_eq(fmt_uptime(b, sizeof(b), 62), "1m02s");
	cr_assert_str_eq(fmt_uptime(b, sizeof(b), 3 * 3600 + 7 * 60 + 5), "3h07m");
	cr_assert_str_eq(fmt_uptime(b, sizeof(b), 2 * 86400 + 4 * 3600), "2d04h");
}

Test(tunable_table, matches_the_segment_abi_list)
{
	cr_assert_eq(tunable_count, LA_NTUNABLES);
	const struct tunable_info *t = tunable_find("mmap_threshold");
	cr_assert_not_null(t);
	cr_assert_eq(t->type, LA_T_SIZE);
	cr_assert_eq(t->max, 32 * LA_MIB);
	cr_assert_null(tunable_find("mmap_thresh"));
	cr_assert_null(tunable_find(""));
	char names[1024];
	tunable_names(names, sizeof(names));
	cr_assert(strncmp(names, "mmap_threshold, mmap_threshold_max, ", 36) == 0, "%s", names);
	cr_assert(strstr(names, "decay_ms") != NULL);
}

Test(tunable_parse, by_type)
{
	char err[256];
	int64_t v;
	cr_assert_eq(tunable_parse(tunable_find("mmap_threshold"), "1.5M", &v, err, sizeof(err)),
	             0);
	cr_assert_eq(v, 1572864);
	cr_assert_eq(tunable_parse(tunable_find("mmap_dynamic"), "off", &v, err, sizeof(err)), 0);
	cr_assert_eq(v, 0);
	cr_assert_eq(tunable_parse(tunable_find("decay_ms"), "2s", &v, err, sizeof(err)), 0);
	cr_assert_eq(v, 2000);
	cr_assert_eq(tunable_parse(tunable_find("arena_max"), "4", &v, err, sizeof(err)), 0);
	cr_assert_eq(v, 4);
}

Test(tunable_parse, out_of_range_names_the_range)
{
	char err[256];
	int64_t v = 7;
	cr_assert_eq(tunable_parse(tunable_find("mmap_threshold"), "64M", &v, err, sizeof(err)),
	             -1);
	cr_assert_eq(v, 7);
	cr_assert_str_eq(
	        err, "value '64M' out of range for mmap_threshold: valid range is 0 B .. 32.0 MiB");
	cr_assert_eq(tunable_parse(tunable_find("arena_max"), "0", &v, err, sizeof(err)), -1);
	cr_assert(strstr(err, "valid range is 1 .. 1024") != NULL, "%s", err);
	cr_assert_eq(tunable_parse(tunable_find("decay_ms"), "2h", &v, err, sizeof(err)), -1);
	cr_assert(strstr(err, "0 ms .. 3600 s") != NULL, "%s", err);
}

Test(tunable_parse, wrong_kind_of_value_names_the_syntax)
{
	char err[256];
	int64_t v;
	cr_assert_eq(tunable_parse(tunable_find("mmap_dynamic"), "maybe", &v, err, sizeof(err)),
	             -1);
	cr_assert(strstr(err, "invalid value 'maybe' for mmap_dynamic") != NULL, "%s", err);
	cr_assert(strstr(err, "on/off") != NULL, "%s", err);
	cr_assert_eq(tunable_parse(tunable_find("arena_max"), "4K", &v, err, sizeof(err)), -1);
	cr_assert(strstr(err, "an integer") != NULL, "%s", err);
}

Test(tunable_format, values_and_ranges_for_people)
{
	char b[2 * FMT_BUF + 16];
	cr_assert_str_eq(tunable_format(b, sizeof(b), LA_T_SIZE, 131072, false), "128.0 KiB");
	cr_assert_str_eq(tunable_format(b, sizeof(b), LA_T_SIZE, 131072, true), "131072");
	cr_assert_str_eq(tunable_format(b, sizeof(b), LA_T_BOOL, 1, false), "on");
	cr_assert_str_eq(tunable_format(b, sizeof(b), LA_T_BOOL, 0, false), "off");
	cr_assert_str_eq(tunable_format(b, sizeof(b), LA_T_MS, 250, false), "250 ms");
	cr_assert_str_eq(tunable_format(b, sizeof(b), LA_T_MS, 10000, false), "10 s");
	cr_assert_str_eq(tunable_format(b, sizeof(b), LA_T_MS, 1500, false), "1.5 s");
	cr_assert_str_eq(tunable_format(b, sizeof(b), LA_T_INT, 65536, false), "65536");
	cr_assert_str_eq(tunable_format_range(b, sizeof(b), LA_T_SIZE, 0, 32 * LA_MIB, false),
	                 "0 B .. 32.0 MiB");
	cr_assert_str_eq(tunable_format_range(b, sizeof(b), LA_T_BOOL, 0, 1, false),
	                 "0 or 1 (off/on)");
}

static char *json_of(void (*write)(struct json *))
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct json j;
	json_init(&j, f);
	write(&j);
	fclose(f);
	return buf;
}

static void nested_doc(struct json *j)
{
	json_object_begin(j, NULL);
	json_string(j, "s", "a\"b\\c\n\x01");
	json_u64(j, "u", UINT64_MAX);
	json_i64(j, "i", -5);
	json_bool(j, "t", true);
	json_string(j, "n", NULL);
	json_array_begin(j, "a");
	json_u64(j, NULL, 1);
	json_object_begin(j, NULL);
	json_object_end(j);
	json_array_begin(j, NULL);
	json_array_end(j);
	json_array_end(j);
	json_object_end(j);
	json_finish(j);
}

Test(json_writer, commas_nesting_and_escapes)
{
	char *s = json_of(nested_doc);
	/* jansson's integers are signed 64-bit: a larger value is written as INT64_MAX */
	cr_assert_str_eq(s, "{\"s\":\"a\\\"b\\\\c\\n\\u0001\",\"u\":9223372036854775807,\"i\":-5,"
	                    "\"t\":true,\"n\":null,\"a\":[1,{},[]]}\n");
	free(s);
}

static void not_utf8_doc(struct json *j)
{
	json_object_begin(j, NULL);
	json_string(j, "exe", "svc-\xff\xfe-x");
	json_string(j, "ok", "caf\xc3\xa9");
	json_object_end(j);
	json_finish(j);
}

Test(json_writer, text_that_is_not_utf8_is_kept_with_replacement_characters)
{
	char *s = json_of(not_utf8_doc);
	cr_assert_str_eq(s,
	                 "{\"exe\":\"svc-\xef\xbf\xbd\xef\xbf\xbd-x\",\"ok\":\"caf\xc3\xa9\"}\n");
	free(s);
}
