/* units.c — unit tests of ctld/units.c: human units parse exactly (binary sizes, decimals
 * that land on whole bytes, bools, durations), everything else is refused with a message,
 * tunable ranges are enforced with the range named, and formatting reads back. */
#include <criterion/criterion.h>
#include <string.h>

#include "units.h"

static int64_t parse_ok(int type, const char *s)
{
	int64_t v = -12345;
	char err[160] = "";
	cr_assert_eq(units_parse(type, s, &v, err, sizeof(err)), UNITS_OK, "'%s': %s", s, err);
	return v;
}

static void parse_bad(int type, const char *s)
{
	int64_t v = -12345;
	char err[160] = "";
	cr_assert_eq(units_parse(type, s, &v, err, sizeof(err)), UNITS_E_SYNTAX, "'%s' accepted",
	             s);
	cr_assert_eq(v, -12345, "'%s': output untouched on error", s);
	cr_assert(strstr(err, "bad value"), "'%s': message '%s'", s, err);
}

Test(units, sizes_accept_binary_suffixes_and_exact_decimals)
{
	cr_assert_eq(parse_ok(LA_T_SIZE, "0"), 0);
	cr_assert_eq(parse_ok(LA_T_SIZE, "4096"), 4096);
	cr_assert_eq(parse_ok(LA_T_SIZE, "64K"), 65536);
	cr_assert_eq(parse_ok(LA_T_SIZE, "64k"), 65536);
	cr_assert_eq(parse_ok(LA_T_SIZE, "64KB"), 65536);
	cr_assert_eq(parse_ok(LA_T_SIZE, "64KiB"), 65536);
	cr_assert_eq(parse_ok(LA_T_SIZE, "64 K"), 65536);
	cr_assert_eq(parse_ok(LA_T_SIZE, "1.5M"), 1572864);
	cr_assert_eq(parse_ok(LA_T_SIZE, "2G"), 2147483648LL);
	cr_assert_eq(parse_ok(LA_T_SIZE, "1T"), 1LL << 40);
	cr_assert_eq(parse_ok(LA_T_SIZE, "1P"), 1LL << 50);
	cr_assert_eq(parse_ok(LA_T_SIZE, "0.5K"), 512);
}

Test(units, malformed_sizes_are_refused)
{
	const char *bad[] = {
	        "",      "K",   "1.5.5M", "-1",   "1X",  "1.3K", ".5K",
	        "5.K",   "1KK", "1Kb2",   "0x10", " 1K", "1e3",  "99999999999999999999",
	        "9000P", "1 iB"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		parse_bad(LA_T_SIZE, bad[i]);
}

Test(units, bools_and_durations)
{
	const char *yes[] = {"1", "true", "TRUE", "yes", "on"}, *no[] = {"0", "false", "no", "Off"};
	for (size_t i = 0; i < 5; i++)
		cr_assert_eq(parse_ok(LA_T_BOOL, yes[i]), 1);
	for (size_t i = 0; i < 4; i++)
		cr_assert_eq(parse_ok(LA_T_BOOL, no[i]), 0);
	parse_bad(LA_T_BOOL, "2");
	parse_bad(LA_T_BOOL, "truthy");
	cr_assert_eq(parse_ok(LA_T_MS, "250"), 250);
	cr_assert_eq(parse_ok(LA_T_MS, "250ms"), 250);
	cr_assert_eq(parse_ok(LA_T_MS, "10s"), 10000);
	cr_assert_eq(parse_ok(LA_T_MS, "1.5s"), 1500);
	cr_assert_eq(parse_ok(LA_T_MS, "5m"), 300000);
	cr_assert_eq(parse_ok(LA_T_MS, "1h"), 3600000);
	parse_bad(LA_T_MS, "10 s");
	parse_bad(LA_T_MS, "10d");
	parse_bad(LA_T_MS, "1.0001ms");
	cr_assert_eq(parse_ok(LA_T_INT, "-5"), -5);
	cr_assert_eq(parse_ok(LA_T_INT, "2147483647"), 2147483647);
	parse_bad(LA_T_INT, "12x");
	parse_bad(LA_T_INT, "4K");
}

Test(units, tunable_ranges_are_enforced_and_named)
{
	const struct tunable_info *t = tunable_find("mmap_threshold");
	cr_assert(t);
	int64_t v;
	char err[200];
	cr_assert_eq(units_parse_tunable(t, "32M", &v, err, sizeof(err)), UNITS_OK);
	cr_assert_eq(v, 32 * LA_MIB);
	cr_assert_eq(units_parse_tunable(t, "64G", &v, err, sizeof(err)), UNITS_E_RANGE);
	cr_assert_str_eq(err, "mmap_threshold = 64G is out of range [0, 32M]");
	cr_assert_eq(units_parse_tunable(t, "lots", &v, err, sizeof(err)), UNITS_E_SYNTAX);
	cr_assert(strncmp(err, "mmap_threshold: bad value 'lots'", 32) == 0, "%s", err);
	t = tunable_find("decay_ms");
	cr_assert_eq(units_parse_tunable(t, "2h", &v, err, sizeof(err)), UNITS_E_RANGE);
	cr_assert_str_eq(err, "decay_ms = 2h is out of range [0, 1h]");
	t = tunable_find("arena_max");
	cr_assert_eq(units_parse_tunable(t, "0", &v, err, sizeof(err)), UNITS_E_RANGE);
	cr_assert_null(tunable_find("no_such_tunable"));
}

Test(units, the_table_follows_the_x_macro)
{
	cr_assert_eq(tunable_find("mmap_threshold") - tunable_table, LA_TUNABLE_mmap_threshold);
	cr_assert_eq(tunable_find("check_free_lists") - tunable_table, LA_TUNABLE_check_free_lists);
	for (int i = 0; i < LA_NTUNABLES; i++) {
		const struct tunable_info *t = &tunable_table[i];
		cr_assert(t->min <= t->max, "%s", t->name);
		cr_assert(t->def == LA_DEFAULT_AUTO || (t->def >= t->min && t->def <= t->max),
		          "%s default %lld outside its range", t->name, (long long)t->def);
		cr_assert(strlen(t->name) < LA_NAME_MAX);
		cr_assert(t->help && *t->help);
		cr_assert_neq(strcmp(units_type_name(t->type), "unknown"), 0);
	}
}

Test(units, formatting_reads_back)
{
	char b[32];
	units_format(LA_T_SIZE, 65536, b, sizeof(b));
	cr_assert_str_eq(b, "64K");
	units_format(LA_T_SIZE, 1572864, b, sizeof(b));
	cr_assert_str_eq(b, "1.5M");
	units_format(LA_T_SIZE, 1000, b, sizeof(b));
	cr_assert_str_eq(b, "1000");
	units_format(LA_T_SIZE, 1LL << 50, b, sizeof(b));
	cr_assert_str_eq(b, "1P");
	units_format(LA_T_SIZE, 4097, b, sizeof(b));
	cr_assert_str_eq(b, "4097");
	units_format(LA_T_BOOL, 1, b, sizeof(b));
	cr_assert_str_eq(b, "true");
	units_format(LA_T_MS, 10000, b, sizeof(b));
	cr_assert_str_eq(b, "10s");
	units_format(LA_T_MS, 1500, b, sizeof(b));
	cr_assert_str_eq(b, "1500ms");
	for (int64_t v = 0; v < (1LL << 42); v = v * 3 + 7) {
		units_format(LA_T_SIZE, v, b, sizeof(b));
		cr_assert_eq(parse_ok(LA_T_SIZE, b), v, "%lld -> %s", (long long)v, b);
	}
}
