/* execchain.c — a preloaded process that execs itself N times (same pid, a new image each
 * time, each publishing its segment under the same name) and checks after every exec that
 * its segment "$LIBALLOC_RUN_DIR/liballoc.<pid>.seg" exists while it runs. Other processes
 * publishing in the same directory at the same time must never remove it.
 * usage: execchain N [MISSES]    prints "missing at N" per check that failed, then
 *                                "done misses=K"; exit 0 when K is 0, 1 otherwise */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: execchain N [MISSES]\n");
		return 2;
	}
	long n = strtol(argv[1], NULL, 10);
	long misses = argc > 2 ? strtol(argv[2], NULL, 10) : 0;
	const char *dir = getenv("LIBALLOC_RUN_DIR");
	if (!dir) {
		fprintf(stderr, "execchain: LIBALLOC_RUN_DIR is not set\n");
		return 2;
	}
	/* the allocator is surely initialised and published once it has served a block */
	A(free)(A(malloc)(64));
	char path[512];
	snprintf(path, sizeof(path), "%s/liballoc.%d.seg", dir, (int)getpid());
	/* look twice, 1 ms apart: the file must stay, not merely appear */
	struct timespec ms = {0, 1000000};
	for (int i = 0; i < 2; i++) {
		if (access(path, F_OK) != 0) {
			printf("missing at %ld: %s: %s\n", n, path, strerror(errno));
			fflush(stdout);
			misses++;
			break;
		}
		nanosleep(&ms, NULL);
	}
	if (n > 0) {
		char nb[24], mb[24];
		snprintf(nb, sizeof(nb), "%ld", n - 1);
		snprintf(mb, sizeof(mb), "%ld", misses);
		execl(argv[0], argv[0], nb, mb, (char *)NULL);
		fprintf(stderr, "execchain: exec %s: %s\n", argv[0], strerror(errno));
		return 2;
	}
	printf("done misses=%ld\n", misses);
	return misses ? 1 : 0;
}
