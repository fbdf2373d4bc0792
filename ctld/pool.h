/* pool.h — a bump allocator for building one reply: every protobuf message, string and
 * array of a reply comes from one pool and is freed at once when the reply is sent.
 * Allocation failure aborts the daemon's reply (callers check for NULL). */
#ifndef CTLD_POOL_H
#define CTLD_POOL_H

#include <stddef.h>

struct pool_chunk;
struct pool {
	struct pool_chunk *head;
	size_t used, cap;
};

void pool_init(struct pool *p);
void *pool_alloc(struct pool *p, size_t n); /* zeroed, 16-aligned; NULL when out of memory */
char *pool_strdup(struct pool *p, const char *s);
void pool_free(struct pool *p);

#endif
