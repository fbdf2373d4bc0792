/* refill.c — a thread-cache refill takes freed blocks in batches, and the number parser
 * the /proc readers use instead of strtol. Linked with liballoc.a; every test runs in its
 * own process. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "api/api.h"
#include "common.h"
#include "liballoc.h"

Test(refill, freed_blocks_come_back_in_batches)
{
	/* once blocks were freed to their span, a refill takes many at once: the cache of
	 * a thread that reuses them holds more than one page's worth */
	void *p[2000];
	for (int i = 0; i < 2000; i++)
		p[i] = A(malloc)(512);
	for (int i = 0; i < 2000; i++)
		A(free)(p[i]);
	struct la_counters c0, c1;
	liballoc_stats(&c0);
	for (int i = 0; i < 2000; i++)
		p[i] = A(malloc)(512);
	liballoc_stats(&c1);
	cr_assert_gt(c1.cache_refills, c0.cache_refills, "the blocks came through refills");
	cr_assert_lt(c1.cache_refills - c0.cache_refills, 2000 / 8, "%llu refills for 2000 blocks",
	             (unsigned long long)(c1.cache_refills - c0.cache_refills));
	for (int i = 0; i < 2000; i++)
		A(free)(p[i]);
}

Test(parse_long, reads_the_number_after_blanks)
{
	cr_assert_eq(la_parse_long("42"), 42);
	cr_assert_eq(la_parse_long(" \t 7\n"), 7);
	cr_assert_eq(la_parse_long("123.seg"), 123);
	cr_assert_eq(la_parse_long("0"), 0);
	cr_assert_eq(la_parse_long("9223372036854775807"), 9223372036854775807L);
}

Test(parse_long, rejects_what_is_not_a_number)
{
	cr_assert_eq(la_parse_long(""), -1);
	cr_assert_eq(la_parse_long("abc"), -1);
	cr_assert_eq(la_parse_long("-5"), -1);
	cr_assert_eq(la_parse_long("\n5"), -1);
	cr_assert_eq(la_parse_long("9223372036854775808"), -1, "overflow");
	cr_assert_eq(la_parse_long("99999999999999999999999"), -1, "overflow");
}
