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

#endif
