/* childerr.h — run a function in a forked child with its stderr captured, for the tests that
 * check how the process stops (header only). */
#ifndef LA_TESTS_CHILDERR_H
#define LA_TESTS_CHILDERR_H

#include <stddef.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* Fork; the child writes stderr into a pipe, runs fn(arg) and exits with what it returns.
 * out (cap bytes, cap > 0) receives what the child wrote there, NUL-terminated. Returns the
 * child's wait status, -1 if the pipe, the fork or the wait failed. */
static inline int run_child_stderr(int (*fn)(void *), void *arg, char *out, size_t cap)
{
	int fds[2];
	out[0] = '\0';
	if (pipe(fds) != 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	if (pid == 0) {
		close(fds[0]);
		dup2(fds[1], 2);
		_exit(fn(arg));
	}
	close(fds[1]);
	size_t got = 0;
	ssize_t r;
	while (got < cap - 1 && (r = read(fds[0], out + got, cap - 1 - got)) > 0)
		got += (size_t)r;
	out[got] = '\0';
	close(fds[0]);
	int st;
	return waitpid(pid, &st, 0) == pid ? st : -1;
}

#endif
