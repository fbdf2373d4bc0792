/* nowaitv.c — run a program where futex_waitv(2) fails with ENOSYS, as on Linux < 5.16 or
 * under a seccomp policy that does not know the call: installs a seccomp filter (inherited
 * across fork and exec) that answers that one system call with ENOSYS, checks that it
 * does, then executes CMD. liballoc's control thread must fall back to its single-word
 * wait there (tests/e2e/lastthread.bats, segment.bats).
 * usage: nowaitv [-p PRELOAD] CMD [ARG...]   (-p: set LD_PRELOAD for CMD only, so this
 *        helper itself is never preloaded)
 * exit: CMD's, or 1 when the filter cannot be installed or does not work, 2 usage. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "seccomp_one.h"

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif

#ifndef SECCOMP_ONE_ARCH
#error "nowaitv: unknown architecture"
#endif

static int usage(void)
{
	fprintf(stderr, "usage: nowaitv [-p PRELOAD] CMD [ARG...]\n");
	return 2;
}

int main(int argc, char **argv)
{
	int i = 1;
	const char *preload = NULL;
	if (i + 1 < argc && strcmp(argv[i], "-p") == 0) {
		preload = argv[i + 1];
		i += 2;
	}
	if (i >= argc || argv[i][0] == '-')
		return usage();
	if (seccomp_one(SYS_futex_waitv, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)) != 0) {
		fprintf(stderr, "nowaitv: cannot install the seccomp filter: %s\n",
		        strerror(errno));
		return 1;
	}
	errno = 0;
	if (syscall(SYS_futex_waitv, NULL, 0, 0, NULL, 0) != -1 || errno != ENOSYS) {
		fprintf(stderr, "nowaitv: futex_waitv still answers (%s)\n", strerror(errno));
		return 1;
	}
	if (preload && setenv("LD_PRELOAD", preload, 1) != 0) {
		fprintf(stderr, "nowaitv: setenv: %s\n", strerror(errno));
		return 1;
	}
	execvp(argv[i], argv + i);
	fprintf(stderr, "nowaitv: %s: %s\n", argv[i], strerror(errno));
	return 127;
}
