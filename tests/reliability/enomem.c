/* enomem.c — every allocation function fails cleanly under RLIMIT_AS: run preloaded with
 * liballoc (LD_PRELOAD), it lowers its address-space limit to what it uses plus a margin
 * and then asks each function for more than fits. Each must return NULL with errno ENOMEM
 * (posix_memalign: return ENOMEM, *out untouched), realloc must leave the old block intact,
 * and afterwards ordinary allocations must still work. Then small blocks are allocated
 * until the limit is hit (the arena path, not only direct mappings), freed, and allocated
 * again. Prints one "ok NAME" line per check; exit 0 when all passed, 1 otherwise.
 * usage: enomem [MARGIN_MIB]   (default 64) */
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "vmsize.h"

static int failures;

static void check(int ok, const char *name, const char *detail)
{
	printf("%s %s%s%s\n", ok ? "ok" : "FAIL", name, detail ? ": " : "", detail ? detail : "");
	if (!ok)
		failures++;
}

/* A NULL result with errno ENOMEM (errno cleared first). */
#define EXPECT_NULL(name, expr)                                                              \
	do {                                                                                 \
		errno = 0;                                                                   \
		void *p_ = (expr);                                                           \
		check(p_ == NULL && errno == ENOMEM, name,                                   \
		      p_ ? "returned a block" : (errno == ENOMEM ? NULL : strerror(errno))); \
		free(p_);                                                                    \
	} while (0)

int main(int argc, char **argv)
{
	size_t margin = (size_t)(argc > 1 ? atoi(argv[1]) : 64) << 20;
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* warm up: arenas, thread cache, the control thread's stack exist before the limit */
	void *warm = malloc(1000);
	free(warm);
	/* volatile: the compiler may not assume a failed realloc freed it */
	static char *volatile keep;
	keep = malloc(4096);
	memset(keep, 0x5a, 4096);

	struct rlimit rl = {vm_size() + margin, vm_size() + margin};
	if (setrlimit(RLIMIT_AS, &rl) != 0) {
		perror("setrlimit");
		return 1;
	}
	size_t big = margin * 4; /* never fits */

	EXPECT_NULL("malloc", malloc(big));
	EXPECT_NULL("calloc", calloc(1, big));
	EXPECT_NULL("calloc-elements", calloc(big / 64, 64));
	EXPECT_NULL("memalign", memalign(4096, big));
	EXPECT_NULL("memalign-2m", memalign(2u << 20, big));
	EXPECT_NULL("aligned_alloc", aligned_alloc(4096, big));
	EXPECT_NULL("valloc", valloc(big));
	EXPECT_NULL("pvalloc", pvalloc(big));
	EXPECT_NULL("reallocarray-null", reallocarray(NULL, big / 1024, 1024));

	errno = 0;
	void *pm = (void *)0x1;
	int r = posix_memalign(&pm, 4096, big);
	check(r == ENOMEM && pm == (void *)0x1, "posix_memalign",
	      r == ENOMEM ? (pm == (void *)0x1 ? NULL : "wrote *memptr") : strerror(r));

	/* realloc and reallocarray of a live block: NULL, ENOMEM, the block untouched */
	errno = 0;
	char *q = realloc(keep, big);
	int intact = 1;
	for (int i = 0; i < 4096; i++)
		intact &= keep[i] == 0x5a;
	check(q == NULL && errno == ENOMEM && intact, "realloc",
	      q ? "returned a block" : (intact ? NULL : "old block changed"));
	errno = 0;
	q = reallocarray(keep, big / 1024, 1024);
	for (int i = 0; i < 4096; i++)
		intact &= keep[i] == 0x5a;
	check(q == NULL && errno == ENOMEM && intact, "reallocarray",
	      q ? "returned a block" : (intact ? NULL : "old block changed"));

	/* ordinary allocations still work */
	char *small = malloc(100), *mid = malloc(200000);
	check(small && mid, "after-failure", NULL);
	if (small && mid) {
		memset(small, 1, 100);
		memset(mid, 2, 200000);
	}
	free(small);
	free(mid);

	/* the arena path: small blocks until the limit, then free and reuse */
	enum { MAXB = 1 << 20 };
	static void *blocks[MAXB];
	size_t n = 0;
	errno = 0;
	while (n < MAXB) {
		void *b = malloc(16384);
		if (!b)
			break;
		memset(b, 0x33, 64);
		blocks[n++] = b;
	}
	check(n < MAXB && errno == ENOMEM, "small-blocks-until-limit",
	      n < MAXB ? (errno == ENOMEM ? NULL : strerror(errno)) : "never failed");
	size_t sizes[] = {24, 1000, 9000};
	errno = 0;
	void *c = NULL;
	for (int k = 0; k < 100000; k++) /* the tail of the arena: every size class fails too */
		if (!(c = malloc(sizes[k % 3])))
			break;
	check(c == NULL ? errno == ENOMEM : 1, "small-classes-at-limit", NULL);
	free(c);
	for (size_t i = 0; i < n; i++)
		free(blocks[i]);
	void *again = malloc(16384);
	void *again_big = malloc(margin / 4);
	check(again && again_big, "reuse-after-free", NULL);
	free(again);
	free(again_big);
	free(keep);
	printf("%s: %d failure(s), %zu blocks of 16 KiB fitted\n", failures ? "FAIL" : "PASS",
	       failures, n);
	return failures ? 1 : 0;
}
