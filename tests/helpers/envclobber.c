/* envclobber — a program that rewrites its environment as setproctitle does (redis-server,
 * nginx, PostgreSQL): every variable copied to new memory, the old strings written over,
 * and LIBALLOC_RUN_DIR then unset. It forks; the child writes its pid to argv[1] and waits
 * to be killed. liballoc reads its variables as they were at start (tests/e2e/envparse.bats:
 * the child's segment is in the run directory given at start). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: envclobber PIDFILE\n");
		return 2;
	}
	size_t n = 0;
	while (environ[n])
		n++;
	char **copy = calloc(n + 1, sizeof(*copy));
	if (!copy)
		return 1;
	for (size_t i = 0; i < n; i++)
		if (!(copy[i] = strdup(environ[i])))
			return 1;
	char **old = environ;
	environ = copy;
	for (size_t i = 0; i < n; i++)
		memset(old[i], 'x', strlen(old[i]));
	unsetenv("LIBALLOC_RUN_DIR");
	pid_t c = fork();
	if (c < 0) {
		perror("fork");
		return 1;
	}
	if (c == 0) {
		char tmp[4096];
		snprintf(tmp, sizeof(tmp), "%s.tmp", argv[1]);
		FILE *f = fopen(tmp, "w");
		if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0 ||
		    rename(tmp, argv[1]))
			_exit(1);
		pause();
		_exit(0);
	}
	int st;
	while (waitpid(c, &st, 0) < 0)
		;
	return 0;
}
