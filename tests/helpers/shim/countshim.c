/* countshim.c — libcountshim.so, a library preloaded ahead of the allocator as leak checkers
 * and tracers are (LD_PRELOAD="libcountshim.so liballoc.so"): it interposes malloc, free,
 * calloc, realloc, posix_memalign, aligned_alloc and memalign, counts the calls of each
 * thread and forwards them to the next definition (dlsym(RTLD_NEXT)). countshim_get copies
 * the calling thread's counts (the program finds it by dlsym). For tests/e2e/interpose.bats:
 * the shim must count exactly the program's calls, none of the allocator's own. */
#include <dlfcn.h>
#include <malloc.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "countshim.h"

static __thread struct countshim_counts counts;
static __thread int resolving;

static void *(*next_malloc)(size_t);
static void (*next_free)(void *);
static void *(*next_calloc)(size_t, size_t);
static void *(*next_realloc)(void *, size_t);
static int (*next_posix_memalign)(void **, size_t, size_t);
static void *(*next_aligned_alloc)(size_t, size_t);
static void *(*next_memalign)(size_t, size_t);

/* what dlsym allocates while the shim resolves its next definitions (never freed) */
static _Alignas(64) char boot[8192];
static size_t boot_used;

static void *boot_alloc(size_t n)
{
	n = (n + 63) & ~(size_t)63;
	if (n > sizeof(boot) - boot_used)
		return NULL;
	void *p = boot + boot_used;
	boot_used += n;
	return p; /* zero-filled: never reused */
}

static int in_boot(const void *p)
{
	return (const char *)p >= boot && (const char *)p < boot + sizeof(boot);
}

static void resolve(void)
{
	if (resolving || next_malloc)
		return;
	resolving = 1;
	next_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
	next_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
	next_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
	next_posix_memalign = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
	next_aligned_alloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "aligned_alloc");
	next_memalign = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "memalign");
	next_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
	resolving = 0;
}

__attribute__((visibility("default"))) void countshim_get(struct countshim_counts *out)
{
	*out = counts;
}

__attribute__((visibility("default"))) void *malloc(size_t n)
{
	resolve();
	if (!next_malloc)
		return boot_alloc(n);
	counts.malloc++;
	return next_malloc(n);
}

__attribute__((visibility("default"))) void free(void *p)
{
	if (in_boot(p))
		return;
	resolve();
	counts.free++;
	next_free(p);
}

__attribute__((visibility("default"))) void *calloc(size_t nmemb, size_t size)
{
	resolve();
	if (!next_malloc)
		return nmemb && size > SIZE_MAX / nmemb ? NULL : boot_alloc(nmemb * size);
	counts.calloc++;
	return next_calloc(nmemb, size);
}

__attribute__((visibility("default"))) void *realloc(void *p, size_t n)
{
	resolve();
	if (in_boot(p) || !next_malloc) {
		void *q = next_malloc ? next_malloc(n) : boot_alloc(n);
		if (q && p) {
			size_t left = (size_t)(boot + sizeof(boot) - (char *)p);
			memcpy(q, p, n < left ? n : left);
		}
		return q;
	}
	counts.realloc++;
	return next_realloc(p, n);
}

__attribute__((visibility("default"))) int posix_memalign(void **out, size_t align, size_t size)
{
	resolve();
	counts.posix_memalign++;
	return next_posix_memalign(out, align, size);
}

__attribute__((visibility("default"))) void *aligned_alloc(size_t align, size_t size)
{
	resolve();
	counts.aligned_alloc++;
	return next_aligned_alloc(align, size);
}

__attribute__((visibility("default"))) void *memalign(size_t align, size_t size)
{
	resolve();
	counts.memalign++;
	return next_memalign(align, size);
}
