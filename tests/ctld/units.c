/* units.c — unit tests of ctld/units.c: human units parse as la_parse reads them (the
 * shared table of tests/parse_cases.h), everything else is refused with a message,
 * tunable ranges are enforced with the range named, and formatting reads back. */
#include <criterion/criterion.h>
#include <string.h>

#include "units.h"

#include "../parse_cases.h"

static int64_t parse_ok(int type, const char *s)
{
	int64_t v = -12345;
	char err[160] = "";
	cr_assert_eq(units_parse(type, s, &v, err, sizeof(err)), UNITS_OK, "'%s': %s", s, err);
	return v;
}

/* The daemon reads every text of the shared table as la_parse does (tests/parse_cases.h):
 * the same value, or a refusal with a message. */
Test(units, the_shared_grammar)
{
	for (size_t i = 0; i < PARSE_NCASES; i++) {
		const struct parse_case *c = &parse_cases[i];
		int64_t v = -12345;
		char err[200] = "";
		int r = units_parse(c->type, c->text, &v, err, sizeof(err));
		if (c->status == LA_PARSE_OK) {
			cr_assert_eq(r, UNITS_OK, "%s '%s': %s", units_type_name(c->type), c->text,
			             err);
			cr_assert_eq(v, c->value, "%s '%s': %lld", units_type_name(c->type),
			             c->text, (long long)v);
			continue;
		}
		cr_assert_eq(r, c->status == LA_PARSE_RANGE ? UNITS_E_RANGE : UNITS_E_SYNTAX,
		             "%s '%s' gave %d", units_type_name(c->type), c->text, r);
		cr_assert_eq(v, -12345, "'%s': output untouched on error", c->text);
		cr_assert(strstr(err, "bad value") && strstr(err, la_parse_expect(c->type)),
		          "'%s': message '%s'", c->text, err);
	}
}

Test(units, messages_say_what_was_expected)
{
	int64_t v;
	char err[200];
	cr_assert_eq(units_parse(LA_T_MS, "10d", &v, err, sizeof(err)), UNITS_E_SYNTAX);
	cr_assert_str_eq(err, "bad value '10d': expected a duration such as 250 (ms), 250ms, 10s, "
	                      "1.5m, 1h");
	cr_assert_eq(units_parse(LA_T_SIZE, "9000P", &v, err, sizeof(err)), UNITS_E_RANGE);
	cr_assert_str_eq(err, "bad value '9000P': too large for a size such as 4096, 64K, 1.5M, "
	                      "2 GiB (binary units K M G T P E)");
	cr_assert_eq(units_parse(LA_T_BOOL, NULL, &v, err, sizeof(err)), UNITS_E_SYNTAX);
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
