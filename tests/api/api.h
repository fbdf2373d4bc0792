/* api.h — how tests reach the allocator's entry points: A(malloc) is malloc in normal
 * builds (linked or preloaded liballoc) and la_malloc in sanitizer builds, where the
 * sanitizer keeps the process's malloc and liballoc is linked with the la_ prefix. */
#ifndef TESTS_API_H
#define TESTS_API_H

#include <malloc.h>
#include <stdlib.h>

#ifdef LA_PREFIX
#include "exports.h"
#define A(fn) la_##fn
#else
#define A(fn) fn
/* not in glibc 2.36's headers or libc: weak, so a preloaded liballoc provides them */
void cfree(void *p) __attribute__((weak));
void free_sized(void *p, size_t size) __attribute__((weak));
void free_aligned_sized(void *p, size_t align, size_t size) __attribute__((weak));
#endif

#endif
