/* exports.h — prototypes of every symbol liballoc exports in place of libc's allocator
 * (named la_<fn> in sanitizer builds, see common.h). */
#ifndef LA_EXPORTS_H
#define LA_EXPORTS_H

#include <malloc.h>
#include <stdio.h>

#include "common.h"

LA_EXPORT void *LA_API(malloc)(size_t n);
LA_EXPORT void LA_API(free)(void *p);
LA_EXPORT void LA_API(cfree)(void *p);
LA_EXPORT void LA_API(free_sized)(void *p, size_t size);
LA_EXPORT void LA_API(free_aligned_sized)(void *p, size_t align, size_t size);
LA_EXPORT void *LA_API(calloc)(size_t nmemb, size_t size);
LA_EXPORT void *LA_API(realloc)(void *p, size_t n);
LA_EXPORT void *LA_API(reallocarray)(void *p, size_t nmemb, size_t size);
LA_EXPORT void *LA_API(memalign)(size_t align, size_t size);
LA_EXPORT int LA_API(posix_memalign)(void **out, size_t align, size_t size);
LA_EXPORT void *LA_API(aligned_alloc)(size_t align, size_t size);
LA_EXPORT void *LA_API(valloc)(size_t size);
LA_EXPORT void *LA_API(pvalloc)(size_t size);
LA_EXPORT size_t LA_API(malloc_usable_size)(void *p);
LA_EXPORT int LA_API(malloc_trim)(size_t pad);
LA_EXPORT int LA_API(mallopt)(int param, int value);
LA_EXPORT struct mallinfo LA_API(mallinfo)(void);
LA_EXPORT struct mallinfo2 LA_API(mallinfo2)(void);
LA_EXPORT int LA_API(malloc_info)(int options, FILE *fp);
LA_EXPORT void LA_API(malloc_stats)(void);

/* The entry points liballoc calls itself as steps of another call (realloc's malloc and
 * free, aligned allocation's malloc, mallinfo's mallinfo2, the pthread_create wrapper's
 * record) are called by these hidden aliases of the exported symbols (defined in malloc.c):
 * a call of the exported name goes through the PLT, to whatever the process binds it to,
 * so a library preloaded ahead of liballoc that interposes malloc (a leak checker, a
 * tracer) saw one realloc as a realloc, a malloc and a free, and each such call paid an
 * indirect jump. (cfree, free_sized, free_aligned_sized and reallocarray still call the
 * exported free and realloc: see cfree.) tests/e2e/interpose.bats counts what such a
 * library sees. */
#define LA_OWN_DECL(name) LA_HIDDEN __attribute__((copy(LA_API(name))))
LA_OWN_DECL(malloc) void *la_own_malloc(size_t n);
LA_OWN_DECL(free) void la_own_free(void *p);
LA_OWN_DECL(mallinfo2) struct mallinfo2 la_own_mallinfo2(void);

#endif
