/* refill.c — what a thread-cache refill takes from a span: free blocks first, and fresh
 * blocks only as far as the page the first of them starts in (a block waiting in a cache
 * must not make a page resident); and the number parser the /proc readers use instead of
 * strtol. Linked with liballoc.a; every test runs in its own process. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>

#include "common.h"
#include "liballoc.h"

static void *fresh_thread(void *arg)
{
	size_t size = (size_t)(uintptr_t)arg;
	static void *keep[400];
	uint64_t most = 0;
	struct la_counters c0; /* other threads' caches (the test runner's) stay as they are */
	liballoc_stats(&c0);
	for (int i = 0; i < 400; i++) {
		keep[i] = malloc(size);
		cr_assert_not_null(keep[i]);
		struct la_counters c;
		liballoc_stats(&c);
		if (c.bytes_cached - c0.bytes_cached > most)
			most = c.bytes_cached - c0.bytes_cached;
	}
	for (int i = 0; i < 400; i++)
		free(keep[i]);
	return (void *)(uintptr_t)most;
}

static uint64_t most_cached_while_growing(size_t size)
{
	pthread_t t;
	void *most;
	cr_assert_eq(pthread_create(&t, NULL, fresh_thread, (void *)(uintptr_t)size), 0);
	cr_assert_eq(pthread_join(t, &most), 0);
	return (uint64_t)(uintptr_t)most;
}

Test(refill, fresh_blocks_are_carved_up_to_the_end_of_one_page)
{
	/* 2048-byte blocks: two per page, so a refill leaves at most one in the cache */
	uint64_t most = most_cached_while_growing(2048);
	cr_assert_leq(most, 2048, "a growing thread cached %llu bytes of 2048-byte blocks",
	              (unsigned long long)most);
	/* 512-byte blocks: eight per page */
	most = most_cached_while_growing(512);
	cr_assert_leq(most, 7 * 512, "a growing thread cached %llu bytes of 512-byte blocks",
	              (unsigned long long)most);
}

Test(refill, freed_blocks_come_back_in_batches)
{
	/* once blocks were freed to their span, a refill takes many at once: the cache of
	 * a thread that reuses them holds more than one page's worth */
	void *p[2000];
	for (int i = 0; i < 2000; i++)
		p[i] = malloc(512);
	for (int i = 0; i < 2000; i++)
		free(p[i]);
	struct la_counters c0, c1;
	liballoc_stats(&c0);
	for (int i = 0; i < 2000; i++)
		p[i] = malloc(512);
	liballoc_stats(&c1);
	cr_assert_lt(c1.cache_refills - c0.cache_refills, 2000 / 8, "%llu refills for 2000 blocks",
	             (unsigned long long)(c1.cache_refills - c0.cache_refills));
	for (int i = 0; i < 2000; i++)
		free(p[i]);
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
