/* earlyalloc.c — a program that allocates before any library's constructor runs (from its
 * .preinit_array, as a library constructor that allocates does: libgpg-error's under redis),
 * so that liballoc's constructor finds the allocator started and the segment written in
 * memory: tests/e2e/startup.bats. Exits 0 when both allocations succeed. */
#include <stdlib.h>
#include <string.h>

static void *early;

static void allocate_early(void)
{
	early = malloc(40);
	if (early)
		memset(early, 1, 40);
}

__attribute__((section(".preinit_array"),
               used)) static void (*const preinit)(void) = allocate_early;

int main(void)
{
	void *p = malloc(100);
	int ok = early && p;
	free(p);
	free(early);
	return ok ? 0 : 1;
}
