/* execchain.c — a preloaded process that execs itself N times (same pid, a new image each
 * time, each publishing its segment under the same name) and checks after every exec that
 * its segment "$LIBALLOC_RUN_DIR/liballoc.<pid>.seg" is there while it runs: once the new
 * image's name is given (LIBALLOC_PUBLISH_DELAY after its start; waited for, up to 10 s),
 * it stays. Other processes publishing in the same directory at the same time must never
 * remove it.
 * usage: execchain N [MISSES]    prints "missing at N" per check that failed, then
 *                                "done misses=K"; exit 0 when K is 0, 1 otherwise */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "liballoc.h"

#pragma weak liballoc_segment_path /* resolved at run time: liballoc is preloaded */

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
	/* the allocator is surely initialised once it has served a block */
	A(free)(A(malloc)(64));
	char path[512];
	snprintf(path, sizeof(path), "%s/liballoc.%d.seg", dir, (int)getpid());
	/* its name is given by the control thread after the delay (the old image's file has
	 * this name meanwhile): wait until the file is this image's (the same executable is
	 * all a look can tell; the identity's start time is in the file) */
	struct timespec ms = {0, 1000000};
	const char *seg_path = liballoc_segment_path ? liballoc_segment_path() : "";
	for (int i = 0; i < 10000 && !*seg_path; i++) {
		nanosleep(&ms, NULL);
		seg_path = liballoc_segment_path ? liballoc_segment_path() : "x";
	}
	/* look twice, 1 ms apart: the file must stay, not merely appear */
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
