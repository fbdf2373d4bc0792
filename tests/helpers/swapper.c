/* swapper.c — the symlink-swap race of issue 18 (finding 1): exchanges two paths with
 * renameat2(RENAME_EXCHANGE) in a loop for SECONDS, so that a watched run directory and a
 * symlink to a victim's directory trade places as often as the kernel allows. Prints how
 * many exchanges it made. With TEMPLATE and NAME it also keeps planting TEMPLATE (hard
 * links: the same stale segment each time) as NAME in whichever of the two is the real
 * directory at that moment, and pauses up to 5 ms every 64 exchanges (the run directory
 * in place). usage: swapper PATH1 PATH2 SECONDS [TEMPLATE NAME] */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

int main(int argc, char **argv)
{
	if (argc != 4 && argc != 6) {
		fprintf(stderr, "usage: swapper PATH1 PATH2 SECONDS [TEMPLATE NAME]\n");
		return 2;
	}
	char plant[2][4096];
	if (argc == 6)
		for (int i = 0; i < 2; i++)
			snprintf(plant[i], sizeof(plant[i]), "%s/%s", argv[1 + i], argv[5]);
	long planted = 0;
	double secs = atof(argv[3]);
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	long n = 0;
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 >= secs)
			break;
		if (argc == 6 && (n & 63) == 0) {
			for (int i = 0; i < 2; i++)
				planted += link(argv[4], plant[i]) == 0;
			/* a pause of 0-5 ms now and then: exchanging without a break, a quiet
			 * machine's swapper never left the daemon a scan of the directory, so
			 * the race of a scan against an exchange never happened */
			struct timespec d = {0, (long)(random() % 5000) * 1000};
			nanosleep(&d, NULL);
		}
		if (syscall(SYS_renameat2, AT_FDCWD, argv[1], AT_FDCWD, argv[2], RENAME_EXCHANGE) ==
		    0)
			n++;
		else if (errno != EINTR) {
			fprintf(stderr, "swapper: %s\n", strerror(errno));
			return 1;
		}
	}
	printf("exchanges=%ld planted=%ld\n", n, planted);
	return 0;
}
