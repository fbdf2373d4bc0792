/* jemalloc_user.c — a program linked against jemalloc (as Debian's redis-server is), for
 * tests/e2e/envparse.bats: under LD_PRELOAD=liballoc.so its malloc is liballoc's, and
 * liballoc says so. It asks jemalloc for its version (so the library is really used and
 * stays needed), prints "jemalloc VERSION", then forks a child that prints "child" (the
 * child must not repeat the warning) and sleeps until killed or stdin closes.
 * Built with -l:libjemalloc.so.2 (Debian's libjemalloc2, in the test group of deps.sh). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);

int main(void)
{
	const char *version = NULL;
	size_t len = sizeof(version);
	if (mallctl("version", &version, &len, NULL, 0) != 0 || !version) {
		fprintf(stderr, "jemalloc_user: mallctl(version) failed\n");
		return 1;
	}
	char *p = malloc(100); /* served by whichever malloc won the symbol */
	strcpy(p, version);
	printf("jemalloc %s\n", p);
	free(p);
	fflush(stdout);
	pid_t child = fork();
	if (child == 0) {
		printf("child %d\n", (int)getpid());
		fflush(stdout);
		char c;
		while (read(0, &c, 1) > 0)
			;
		_exit(0);
	}
	char c;
	while (read(0, &c, 1) > 0)
		;
	if (child > 0)
		waitpid(child, NULL, 0);
	return 0;
}
