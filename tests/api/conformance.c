/* conformance.c — the malloc API's behaviour, one test per behaviour, through the public
 * entry points only. Built twice: linked with liballoc.a, and plain under LD_PRELOAD. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <pthread.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"

/* These tests pass impossible sizes and use blocks after failed reallocs on purpose. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#pragma GCC diagnostic ignored "-Walloc-size-larger-than="
#pragma GCC diagnostic ignored "-Wuse-after-free"

static int aligned_to(void *p, size_t a)
{
	return ((uintptr_t)p & (a - 1)) == 0;
}

Test(malloc, every_block_is_16_byte_aligned_and_usable)
{
	for (size_t n = 0; n < 70000; n = n < 64 ? n + 1 : n * 5 / 4) {
		char *p = A(malloc)(n);
		cr_assert_not_null(p, "malloc(%zu)", n);
		cr_assert(aligned_to(p, 16), "malloc(%zu) = %p", n, (void *)p);
		cr_assert_geq(A(malloc_usable_size)(p), n);
		memset(p, 0xa5, n);
		A(free)(p);
	}
}

Test(malloc, large_blocks_are_usable)
{
	size_t sizes[] = {100000, 1 << 20, 5 << 20, 40 << 20, 100 << 20};
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char *p = A(malloc)(sizes[i]);
		cr_assert_not_null(p);
		p[0] = 1;
		p[sizes[i] - 1] = 2;
		cr_assert_geq(A(malloc_usable_size)(p), sizes[i]);
		A(free)(p);
	}
}

Test(malloc, sizes_near_size_max_fail_with_enomem)
{
	size_t bad[] = {SIZE_MAX,
	                SIZE_MAX - 4096,
	                SIZE_MAX / 2 + 1,
	                (size_t)PTRDIFF_MAX,
	                (size_t)PTRDIFF_MAX - 16,
	                (size_t)PTRDIFF_MAX + 1};
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		errno = 0;
		cr_assert_null(A(malloc)(bad[i]), "malloc(%zu)", bad[i]);
		cr_assert_eq(errno, ENOMEM);
	}
}

Test(calloc, overflowing_product_fails_with_enomem)
{
	errno = 0;
	cr_assert_null(A(calloc)(SIZE_MAX / 2, 3));
	cr_assert_eq(errno, ENOMEM);
	errno = 0;
	cr_assert_null(A(calloc)((size_t)1 << 33, (size_t)1 << 33));
	cr_assert_eq(errno, ENOMEM);
}

Test(calloc, memory_is_zeroed_even_when_reused)
{
	for (size_t n = 16; n < (1 << 22); n *= 3) {
		char *p = A(malloc)(n);
		memset(p, 0xff, n);
		A(free)(p);
		char *q = A(calloc)(1, n);
		cr_assert_not_null(q);
		for (size_t i = 0; i < n; i += 7)
			cr_assert_eq(q[i], 0, "calloc(%zu)[%zu]", n, i);
		A(free)(q);
	}
}

/* calloc pops from the thread's cache itself, and goes to the slow path when the bin is
 * empty: blocks written and freed (most of them flushed out of the cache) come back zeroed
 * both ways */
Test(calloc, memory_is_zeroed_when_the_cache_refills)
{
	enum { N = 2000 };
	static char *p[N];
	for (size_t n = 48; n <= 3000; n *= 4) {
		for (int i = 0; i < N; i++) {
			p[i] = A(malloc)(n);
			memset(p[i], 0xff, n);
		}
		for (int i = 0; i < N; i++)
			A(free)(p[i]);
		for (int i = 0; i < N; i++) {
			p[i] = A(calloc)(n, 1);
			cr_assert_not_null(p[i]);
			for (size_t k = 0; k < n; k += 5)
				cr_assert_eq(p[i][k], 0, "calloc(%zu, 1) #%d [%zu]", n, i, k);
		}
		for (int i = 0; i < N; i++)
			A(free)(p[i]);
	}
}

Test(realloc, null_pointer_behaves_like_malloc)
{
	char *p = A(realloc)(NULL, 100);
	cr_assert_not_null(p);
	A(free)(p);
}

Test(realloc, zero_size_frees_and_returns_null)
{
	char *p = A(malloc)(100);
	cr_assert_null(A(realloc)(p, 0));
}

Test(realloc, contents_survive_growth_and_shrinking)
{
	size_t n = 1;
	unsigned char *p = A(malloc)(n);
	p[0] = 0;
	for (; n < (64u << 20); n = n * 3 + 1) {
		size_t m = n * 3 + 1;
		p = A(realloc)(p, m);
		cr_assert_not_null(p);
		for (size_t i = 0; i < n; i += 1 + n / 4096)
			cr_assert_eq(p[i], (unsigned char)(i * 7), "at %zu after growing to %zu", i,
			             m);
		for (size_t i = 0; i < m; i++)
			p[i] = (unsigned char)(i * 7);
	}
	for (; n > 1; n /= 5) {
		p = A(realloc)(p, n);
		for (size_t i = 0; i < n; i += 1 + n / 4096)
			cr_assert_eq(p[i], (unsigned char)(i * 7));
	}
	A(free)(p);
}

Test(realloc, growth_within_the_usable_size_keeps_the_block)
{
	/* whole pages: a large block of a heap, a mapping of its own */
	static const size_t sizes[] = {40000, 100000, 200u << 20};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char *p = A(malloc)(sizes[i]);
		cr_assert_not_null(p);
		size_t u = A(malloc_usable_size)(p);
		p[0] = 7;
		for (size_t n = sizes[i]; n <= u; n += 1 + (u - sizes[i]) / 8) {
			cr_assert_eq(A(realloc)(p, n), p, "realloc(%zu) of a %zu-byte block", n,
			             sizes[i]);
			p[n - 1] = 7;
		}
		cr_assert_eq(A(realloc)(p, u), p);
		cr_assert_eq(p[0], 7);
		A(free)(p);
	}
}

Test(realloc, impossible_size_fails_and_keeps_the_block)
{
	char *p = A(malloc)(64);
	strcpy(p, "still here");
	errno = 0;
	cr_assert_null(A(realloc)(p, SIZE_MAX - 8));
	cr_assert_eq(errno, ENOMEM);
	cr_assert_str_eq(p, "still here");
	A(free)(p);
}

Test(reallocarray, overflow_fails_with_enomem)
{
	char *p = A(malloc)(16);
	errno = 0;
	cr_assert_null(A(reallocarray)(p, SIZE_MAX / 4, 8));
	cr_assert_eq(errno, ENOMEM);
	p = A(reallocarray)(p, 10, 10);
	cr_assert_not_null(p);
	A(free)(p);
}

Test(posix_memalign, every_power_of_two_alignment)
{
	for (size_t a = sizeof(void *); a <= (4u << 20); a *= 2) {
		for (size_t n = 1; n < (1u << 21); n = n * 7 + 3) {
			void *p = NULL;
			cr_assert_eq(A(posix_memalign)(&p, a, n), 0, "align %zu size %zu", a, n);
			cr_assert(aligned_to(p, a), "align %zu size %zu: %p", a, n, p);
			cr_assert_geq(A(malloc_usable_size)(p), n);
			memset(p, 1, n);
			A(free)(p);
		}
	}
}

Test(posix_memalign, bad_alignment_is_einval_and_leaves_the_pointer)
{
	void *p = (void *)0x1234;
	size_t bad[] = {0, 1, 2, 4, 24, 48, 100, SIZE_MAX};
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(A(posix_memalign)(&p, bad[i], 16), EINVAL, "alignment %zu", bad[i]);
		cr_assert_eq(p, (void *)0x1234);
	}
}

/* ENOMEM is the result: the pointer and errno stay as they were (alignments of 64 bytes,
 * 8 KiB: above a page, and 1 GiB: above a heap's size) */
Test(posix_memalign, impossible_size_is_enomem)
{
	size_t aligns[] = {64, 8192, (size_t)1 << 30};
	for (unsigned i = 0; i < sizeof(aligns) / sizeof(aligns[0]); i++) {
		void *p = (void *)0x1234;
		errno = 4242;
		cr_assert_eq(A(posix_memalign)(&p, aligns[i], SIZE_MAX - 100), ENOMEM, "align %zu",
		             aligns[i]);
		cr_assert_eq(p, (void *)0x1234);
		cr_assert_eq(errno, 4242, "align %zu: errno %d after ENOMEM", aligns[i], errno);
	}
}

Test(aligned_alloc, non_power_of_two_is_einval)
{
	errno = 0;
	cr_assert_null(A(aligned_alloc)(24, 48));
	cr_assert_eq(errno, EINVAL);
	void *p = A(aligned_alloc)(256, 512);
	cr_assert(aligned_to(p, 256));
	A(free)(p);
}

Test(memalign, non_power_of_two_alignment_is_rounded_up)
{
	void *p = A(memalign)(48, 100);
	cr_assert_not_null(p);
	cr_assert(aligned_to(p, 64));
	A(free)(p);
	errno = 0;
	cr_assert_null(A(memalign)(SIZE_MAX / 2 + 2, 16));
	cr_assert_eq(errno, EINVAL);
}

Test(valloc, blocks_are_page_aligned)
{
	long page = sysconf(_SC_PAGESIZE);
	for (size_t n = 1; n < (1 << 20); n = n * 5 + 1) {
		void *p = A(valloc)(n);
		cr_assert(aligned_to(p, (size_t)page));
		A(free)(p);
	}
}

Test(pvalloc, size_is_rounded_to_pages)
{
	char *p = A(pvalloc)(10);
	cr_assert(aligned_to(p, 4096));
	cr_assert_geq(A(malloc_usable_size)(p), 4096);
	memset(p, 1, 4096);
	A(free)(p);
}

Test(free, null_is_a_no_op)
{
	A(free)(NULL);
}

Test(free, errno_is_preserved)
{
	void *small = A(malloc)(32), *big = A(malloc)(64 << 20);
	errno = 4242;
	A(free)(small);
	A(free)(big);
	cr_assert_eq(errno, 4242);
}

/* Frees that fill their thread cache's bins flush them (half of a bin at a time, into the
 * transfer cache or back to the spans, which may empty and go back to their heaps): errno
 * stays what it was across every one of them. */
Test(free, errno_is_preserved_when_the_cache_flushes)
{
	enum { N = 6000 };
	static void *blocks[N];
	size_t sizes[] = {16, 48, 200, 1000, 3000};
	for (unsigned k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		for (unsigned i = 0; i < N; i++)
			cr_assert_not_null(blocks[i] = A(malloc)(sizes[k]));
		for (unsigned i = 0; i < N; i++) {
			errno = 4242 + (int)i;
			A(free)(blocks[i]);
			cr_assert_eq(errno, 4242 + (int)i, "free of block %u of %zu bytes", i,
			             sizes[k]);
		}
	}
}

Test(free, sized_and_aligned_variants_release_blocks)
{
	void (*volatile fs)(void *, size_t) = A(free_sized);
	void (*volatile fas)(void *, size_t, size_t) = A(free_aligned_sized);
	void (*volatile cf)(void *) = A(cfree);
	cr_assert(fs && fas && cf, "free_sized, free_aligned_sized and cfree are exported");
	void *p = A(malloc)(100);
	A(free_sized)(p, 100);
	p = A(aligned_alloc)(64, 128);
	A(free_aligned_sized)(p, 64, 128);
	p = A(malloc)(10);
	A(cfree)(p);
}

Test(malloc_usable_size, null_is_zero)
{
	cr_assert_eq(A(malloc_usable_size)(NULL), 0);
}

Test(mallopt, accepts_valid_and_refuses_out_of_range)
{
	cr_assert_eq(A(mallopt)(M_MMAP_THRESHOLD, 256 * 1024), 1);
	cr_assert_eq(A(mallopt)(M_MMAP_THRESHOLD, 64 << 20), 0);
	cr_assert_eq(A(mallopt)(M_MMAP_THRESHOLD, -1), 0);
	cr_assert_eq(A(mallopt)(M_TRIM_THRESHOLD, 1 << 20), 1);
	cr_assert_eq(A(mallopt)(M_TOP_PAD, 0), 1);
	cr_assert_eq(A(mallopt)(M_MMAP_MAX, 1000), 1);
	cr_assert_eq(A(mallopt)(M_ARENA_MAX, 4), 1);
	cr_assert_eq(A(mallopt)(M_ARENA_MAX, 0), 0);
	cr_assert_eq(A(mallopt)(M_ARENA_TEST, 2), 1);
	void *p = A(malloc)(300 * 1024);
	cr_assert_not_null(p);
	A(free)(p);
}

Test(mallinfo2, in_use_bytes_follow_allocations)
{
	struct mallinfo2 before = A(mallinfo2)();
	void *p = A(malloc)(4 << 20);
	memset(p, 1, 4 << 20);
	struct mallinfo2 during = A(mallinfo2)();
	cr_assert_geq(during.uordblks + during.hblkhd, before.uordblks + before.hblkhd + (4 << 20));
	A(free)(p);
	struct mallinfo mi = A(mallinfo)();
	cr_assert_geq(mi.arena, 0);
}

Test(malloc_info, writes_xml_and_refuses_options)
{
	char buf[16384];
	FILE *f = fmemopen(buf, sizeof(buf), "w");
	cr_assert_eq(A(malloc_info)(0, f), 0);
	fclose(f);
	cr_assert(strstr(buf, "<malloc version=\"1\">") == buf, "got: %.80s", buf);
	cr_assert_not_null(strstr(buf, "</malloc>"));
	errno = 0;
	cr_assert_eq(A(malloc_info)(1, stdout), -1);
	cr_assert_eq(errno, EINVAL);
}

Test(malloc_stats, prints_totals_on_stderr)
{
	char path[] = "/tmp/la-stats-XXXXXX";
	int fd = mkstemp(path);
	int saved = dup(2);
	dup2(fd, 2);
	A(malloc_stats)();
	dup2(saved, 2);
	char buf[4096] = {0};
	cr_assert_gt(pread(fd, buf, sizeof(buf) - 1, 0), 0);
	close(fd);
	unlink(path);
	cr_assert_not_null(strstr(buf, "Total (incl. mmap):"), "got: %s", buf);
	cr_assert_not_null(strstr(buf, "in use bytes"));
}

Test(malloc_trim, returns_freed_memory)
{
	/* nothing goes back on its own: the trim has it all to return */
	cr_assert_eq(A(mallopt)(M_TRIM_THRESHOLD, 1 << 30), 1);
	void *blocks[64];
	for (int i = 0; i < 64; i++)
		memset(blocks[i] = A(malloc)(64 * 1024), 1, 64 * 1024);
	for (int i = 0; i < 64; i++)
		A(free)(blocks[i]);
	cr_assert_eq(A(malloc_trim)(0), 1);
}

/* ---- where a preloaded allocator runs ------------------------------------------------ */

static char *early_block;
__attribute__((constructor)) static void allocate_before_main(void)
{
	early_block = A(malloc)(1000);
	if (early_block)
		strcpy(early_block, "made in a constructor");
}

Test(lifecycle, blocks_made_before_main_are_valid)
{
	cr_assert_not_null(early_block);
	cr_assert_str_eq(early_block, "made in a constructor");
	cr_assert_geq(A(malloc_usable_size)(early_block), 1000);
	A(free)(early_block);
}

Test(lifecycle, dlopen_and_dlsym_allocate_through_it)
{
	void *h = dlopen("libm.so.6", RTLD_NOW);
	cr_assert_not_null(h, "%s", dlerror());
	double (*cosine)(double) = (double (*)(double))dlsym(h, "cos");
	cr_assert_not_null(cosine);
	cr_assert_null(dlsym(h, "no_such_symbol_here"));
	cr_assert_not_null(dlerror()); /* glibc formats the message with malloc */
	cr_assert_float_eq(cosine(0.0), 1.0, 1e-12);
	dlclose(h);
}

static pthread_key_t late_key;
static void *volatile from_destructor;
static void late_destructor(void *arg)
{
	/* runs after liballoc's own thread-exit handler: the cache is gone */
	void *p = A(malloc)(64);
	memset(p, 1, 64);
	A(free)(arg);
	from_destructor = p;
}

static void *thread_with_late_destructor(void *arg)
{
	pthread_setspecific(late_key, A(malloc)(200));
	return arg;
}

Test(lifecycle, thread_exit_destructors_can_allocate_and_free)
{
	pthread_key_create(&late_key, late_destructor);
	for (int i = 0; i < 20; i++) {
		pthread_t t;
		pthread_create(&t, NULL, thread_with_late_destructor, NULL);
		pthread_join(t, NULL);
		cr_assert_not_null(from_destructor);
		A(free)(from_destructor);
		from_destructor = NULL;
	}
}
