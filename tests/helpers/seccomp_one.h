/* seccomp_one.h — install on the calling thread (and what it forks and executes) a seccomp
 * filter that answers one system call with the given action (SECCOMP_RET_TRAP,
 * SECCOMP_RET_ERRNO | e, ...) and lets every other call through, on this architecture's
 * calls only. Used by tests that make one call fail or stop (nowaitv.c: futex_waitv with
 * ENOSYS; tests/unit/fork.c: a trapped sched_yield).
 * Returns 0, or -1 with errno set (ENOSYS where the architecture is not known here). */
#ifndef SECCOMP_ONE_H
#define SECCOMP_ONE_H

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/prctl.h>

#if defined(__x86_64__)
#define SECCOMP_ONE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define SECCOMP_ONE_ARCH AUDIT_ARCH_AARCH64
#endif

static inline int seccomp_one(long nr, uint32_t action)
{
#ifdef SECCOMP_ONE_ARCH
	struct sock_filter f[] = {
	        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
	        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SECCOMP_ONE_ARCH, 1, 0),
	        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 1),
	        BPF_STMT(BPF_RET | BPF_K, action),
	        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0)
		return -1;
	return 0;
#else
	(void)nr, (void)action;
	errno = ENOSYS;
	return -1;
#endif
}

#endif
