/* pool.c — chunked bump allocator (see pool.h). Chunks grow geometrically; a request larger
 * than a chunk gets a chunk of its own. Nothing is freed individually. */
#include "pool.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct pool_chunk {
	struct pool_chunk *next;
	size_t cap;
	_Alignas(16) unsigned char data[];
};

void pool_init(struct pool *p)
{
	p->head = NULL;
	p->used = p->cap = 0;
}

void *pool_alloc(struct pool *p, size_t n)
{
	n = (n + 15) & ~(size_t)15;
	if (n == 0)
		n = 16;
	if (!p->head || p->cap - p->used < n) {
		size_t cap = p->cap ? p->cap * 2 : 4096;
		if (cap > (1u << 20))
			cap = 1u << 20;
		if (cap < n)
			cap = n;
		struct pool_chunk *c = malloc(sizeof(*c) + cap);
		if (!c)
			return NULL;
		c->next = p->head;
		c->cap = cap;
		p->head = c;
		p->cap = cap;
		p->used = 0;
	}
	void *r = p->head->data + p->used;
	p->used += n;
	memset(r, 0, n);
	return r;
}

char *pool_strdup(struct pool *p, const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = pool_alloc(p, n);
	if (d)
		memcpy(d, s, n);
	return d;
}

void pool_free(struct pool *p)
{
	struct pool_chunk *c = p->head;
	while (c) {
		struct pool_chunk *next = c->next;
		free(c);
		c = next;
	}
	pool_init(p);
}
