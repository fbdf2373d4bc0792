/* sysraw.c — liballoc's own definitions of the libc system-call wrappers it calls, each one
 * system call made through syscall(2) (errno and the -1 return as libc's wrapper sets them).
 * Why: liballoc.so is linked -z now, so ld.so looks every imported symbol up at every
 * process start, ~790 instructions each here (bench/README.md, issue 23, session 41,
 * start41); these definitions are hidden (-fvisibility=hidden), so the calls bind inside the
 * library and the names are not imported. A program's own calls still reach libc's: hidden
 * names are not exported from liballoc.so (liballoc.a's, linked into the unit tests, serve
 * the test program's calls too: the same system calls).
 *
 * Not here: the wrappers a test interposes (mmap and munmap, tests/unit/fork.c; mincore,
 * tests/mincount.h; sched_yield, tests/unit/mechanisms.c; nanosleep,
 * tests/fuzz/fuzz_segment.c; linkat, tests/helpers/shim/truncshim.c), the ones libc does
 * more than one system call's work in (sigaction, pthread_sigmask; the signal sets: ownsig.c)
 * and the sanitizer builds (LA_PREFIX), whose interceptors see the wrappers' calls. prctl's
 * two calls (the threads' names) call syscall(2) themselves: a variadic wrapper here took 85
 * bytes of the text's room below .rodata's page. */
#ifndef LA_PREFIX
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

int close(int fd)
{
	return (int)syscall(SYS_close, fd);
}

ssize_t read(int fd, void *buf, size_t n)
{
	return syscall(SYS_read, fd, buf, n);
}

ssize_t write(int fd, const void *buf, size_t n)
{
	return syscall(SYS_write, fd, buf, n);
}

ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
	return syscall(SYS_pread64, fd, buf, n, off);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
	return syscall(SYS_pwrite64, fd, buf, n, off);
}

/* the mode is there when the flags create a file (as libc's open reads it) */
static mode_t open_mode(int flags, va_list ap)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

int open(const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = open_mode(flags, ap);
	va_end(ap);
	return (int)syscall(SYS_openat, AT_FDCWD, path, flags, mode);
}

int openat(int dfd, const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = open_mode(flags, ap);
	va_end(ap);
	return (int)syscall(SYS_openat, dfd, path, flags, mode);
}

int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	long arg = va_arg(ap, long);
	va_end(ap);
	return (int)syscall(SYS_fcntl, fd, cmd, arg);
}

int flock(int fd, int op)
{
	return (int)syscall(SYS_flock, fd, op);
}

/* x86-64's struct stat and struct statfs are the kernel's. Each wrapper makes the system
 * call libc's makes (glibc 2.36), so that a trace (strace in the tests) sees the same calls. */
int fstat(int fd, struct stat *st)
{
	return (int)syscall(SYS_newfstatat, fd, "", st, AT_EMPTY_PATH);
}

int stat(const char *restrict path, struct stat *restrict st)
{
	return (int)syscall(SYS_newfstatat, AT_FDCWD, path, st, 0);
}

int fstatat(int dfd, const char *restrict path, struct stat *restrict st, int flags)
{
	return (int)syscall(SYS_newfstatat, dfd, path, st, flags);
}

int fstatfs(int fd, struct statfs *st)
{
	return (int)syscall(SYS_fstatfs, fd, st);
}

int fallocate(int fd, int mode, off_t off, off_t len)
{
	return (int)syscall(SYS_fallocate, fd, mode, off, len);
}

ssize_t copy_file_range(int in, off_t *in_off, int out, off_t *out_off, size_t n, unsigned flags)
{
	return syscall(SYS_copy_file_range, in, in_off, out, out_off, n, flags);
}

int mkdir(const char *path, mode_t mode)
{
	return (int)syscall(SYS_mkdir, path, mode);
}

int unlinkat(int dfd, const char *path, int flags)
{
	return (int)syscall(SYS_unlinkat, dfd, path, flags);
}

ssize_t readlink(const char *restrict path, char *restrict buf, size_t n)
{
	return syscall(SYS_readlink, path, buf, n);
}

pid_t getpid(void)
{
	return (pid_t)syscall(SYS_getpid);
}

int kill(pid_t pid, int sig)
{
	return (int)syscall(SYS_kill, pid, sig);
}

int getrlimit(__rlimit_resource_t res, struct rlimit *rl)
{
	return (int)syscall(SYS_prlimit64, 0, res, NULL, rl);
}

int madvise(void *p, size_t len, int advice)
{
	return (int)syscall(SYS_madvise, p, len, advice);
}

int msync(void *p, size_t len, int flags)
{
	return (int)syscall(SYS_msync, p, len, flags);
}

/* (weak: tests/unit/fork.c defines its own, which stops a realloc's growth, and the unit
 * tests link liballoc.a) */
__attribute__((weak)) void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
	void *to = NULL;
	if (flags & MREMAP_FIXED) {
		va_list ap;
		va_start(ap, flags);
		to = va_arg(ap, void *);
		va_end(ap);
	}
	return (void *)syscall(SYS_mremap, old, old_len, new_len, flags, to);
}

int usleep(useconds_t us)
{
	struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
	return (int)syscall(SYS_clock_nanosleep, CLOCK_REALTIME, 0, &ts, NULL);
}

/* the kernel's signal set is 8 bytes (glibc's sigset_t, 128, holds it first) */
int sigpending(sigset_t *set)
{
	return (int)syscall(SYS_rt_sigpending, set, 8);
}

int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	return (int)syscall(SYS_poll, fds, n, timeout);
}

int eventfd(unsigned int count, int flags)
{
	return (int)syscall(SYS_eventfd2, count, flags);
}

int socket(int domain, int type, int proto)
{
	return (int)syscall(SYS_socket, domain, type, proto);
}

int connect(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len)
{
	return (int)syscall(SYS_connect, fd, addr.__sockaddr__, len);
}
#endif
