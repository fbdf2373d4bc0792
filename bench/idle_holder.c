/* idle_holder.c — a preloaded process for the control-path figures: allocates MB MiB in
 * BLOCK-byte blocks, each followed by a 64-byte block that stays live, then frees the big
 * blocks. The free memory sits between live blocks (no heap is idle, no free tail), so the
 * allocator keeps it until a trim returns it. Prints "ready pid=... rss_kb=..." and sleeps
 * until killed.
 * usage: idle_holder [MB] [BLOCK] */
#include "benchlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define USAGE "[MB] [BLOCK]"

int main(int argc, char **argv)
{
	size_t bytes = (size_t)bench_arg(argc, argv, 1, 1, USAGE) << 20;
	size_t block = (size_t)bench_arg(argc, argv, 2, 65536, USAGE);
	size_t n = bytes / block;
	void **blocks = n ? mmap(NULL, 2 * n * sizeof(void *), PROT_READ | PROT_WRITE,
	                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
	                  : NULL;
	if (blocks == MAP_FAILED)
		bench_die("mmap");
	void **keep = blocks + n;
	for (size_t i = 0; i < n; i++) {
		blocks[i] = malloc(block);
		keep[i] = malloc(64);
		if (!blocks[i] || !keep[i])
			bench_die("malloc");
		bench_touch(blocks[i], block, 1);
	}
	for (size_t i = 0; i < n; i++)
		free(blocks[i]);
	printf("ready pid=%ld rss_kb=%ld\n", (long)getpid(), bench_status_kb("VmRSS"));
	fflush(stdout);
	for (;;)
		pause();
}
