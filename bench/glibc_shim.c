/* glibc_shim.c — LD_PRELOAD shim that routes the malloc family to glibc's own allocator
 * (__libc_malloc and friends). Used only for programs that are linked against another
 * allocator (Debian's redis-server links libjemalloc), so that their "glibc" column really
 * measures glibc: the shim comes first in symbol lookup, like any preloaded allocator. */
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define SHIM_EXPORT __attribute__((visibility("default")))

void *__libc_malloc(size_t size);
void __libc_free(void *p);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t size);
void *__libc_memalign(size_t align, size_t size);
void *__libc_valloc(size_t size);
void *__libc_pvalloc(size_t size);

SHIM_EXPORT void *malloc(size_t size);
SHIM_EXPORT void free(void *p);
SHIM_EXPORT void *calloc(size_t n, size_t size);
SHIM_EXPORT void *realloc(void *p, size_t size);
SHIM_EXPORT void *memalign(size_t align, size_t size);
SHIM_EXPORT void *aligned_alloc(size_t align, size_t size);
SHIM_EXPORT int posix_memalign(void **out, size_t align, size_t size);
SHIM_EXPORT void *valloc(size_t size);
SHIM_EXPORT void *pvalloc(size_t size);
SHIM_EXPORT size_t malloc_usable_size(void *p);

/* glibc's malloc_usable_size, looked up in libc itself (the global scope would find the
 * linked allocator's). Resolved once at load time. */
static size_t (*shim_usable)(void *);

__attribute__((constructor)) static void shim_init(void)
{
	void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	if (libc) {
		void *sym = dlsym(libc, "malloc_usable_size");
		memcpy(&shim_usable, &sym, sizeof(sym));
		dlclose(libc);
	}
}

void *malloc(size_t size)
{
	return __libc_malloc(size);
}

void free(void *p)
{
	__libc_free(p);
}

void *calloc(size_t n, size_t size)
{
	return __libc_calloc(n, size);
}

void *realloc(void *p, size_t size)
{
	return __libc_realloc(p, size);
}

void *memalign(size_t align, size_t size)
{
	return __libc_memalign(align, size);
}

void *aligned_alloc(size_t align, size_t size)
{
	return __libc_memalign(align, size);
}

int posix_memalign(void **out, size_t align, size_t size)
{
	if (align < sizeof(void *) || (align & (align - 1)) != 0)
		return EINVAL;
	void *p = __libc_memalign(align, size);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

void *valloc(size_t size)
{
	return __libc_valloc(size);
}

void *pvalloc(size_t size)
{
	return __libc_pvalloc(size);
}

size_t malloc_usable_size(void *p)
{
	return shim_usable && p ? shim_usable(p) : 0;
}
