/* child.h — run a function in a forked child with stderr captured, for tests that expect
 * the allocator to abort with an exact message. */
#ifndef TESTS_CHILD_H
#define TESTS_CHILD_H

#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct child_result {
	int status;    /* waitpid status */
	char err[512]; /* what the child wrote to stderr */
};

static inline struct child_result run_child(void (*fn)(void))
{
	struct child_result r = {0};
	int fds[2];
	if (pipe(fds) != 0)
		return r;
	pid_t pid = fork();
	if (pid == 0) {
		close(fds[0]);
		dup2(fds[1], 2);
		fn();
		_exit(0);
	}
	close(fds[1]);
	size_t n = 0;
	ssize_t k;
	while (n < sizeof(r.err) - 1 && (k = read(fds[0], r.err + n, sizeof(r.err) - 1 - n)) > 0)
		n += (size_t)k;
	r.err[n] = 0;
	close(fds[0]);
	waitpid(pid, &r.status, 0);
	return r;
}

/* Criterion's asserts (include it first) that child r stopped with SIGABRT after writing msg
 * to stderr: the tests of an allocator's abort */
#define assert_child_aborted_with(r, msg)                                                        \
	do {                                                                                     \
		cr_assert(WIFSIGNALED((r).status) && WTERMSIG((r).status) == SIGABRT,            \
		          "expected SIGABRT, status %#x, stderr: %s", (r).status, (r).err);      \
		cr_assert_not_null(strstr((r).err, (msg)), "expected \"%s\", got \"%s\"", (msg), \
		                   (r).err);                                                     \
	} while (0)

#endif
