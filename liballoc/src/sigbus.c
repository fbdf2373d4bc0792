/* sigbus.c — the process survives its segment file being truncated, and its own SIGBUS
 * handling is unchanged.
 *
 * The statistics are written through a shared mapping of the segment file; any process of
 * the same uid may truncate that file, and the next write past the new end faults with
 * SIGBUS. Once the file is published, liballoc's handler is the kernel's SIGBUS
 * disposition: a fault inside the segment moves the segment to private memory
 * (shm_fault) and the faulting write is retried; every other SIGBUS is the application's
 * and goes where the application said, as if liballoc were not there. For that, sigaction
 * and the signal() family are interposed for SIGBUS only: what the application sets is
 * recorded (the disposition found when the handler was installed counts as set before),
 * what it asks for is what it set, and liballoc's handler then calls that handler with the
 * application's flags (SA_SIGINFO or not, SA_RESETHAND, SA_NODEFER, SA_ONSTACK,
 * SA_RESTART) and mask, or does what SIG_DFL or SIG_IGN would have done: a fault kills the
 * process with SIGBUS (an ignored fault too, as the kernel does), a SIGBUS sent by kill is
 * fatal or ignored. Limits: a handler installed by a raw rt_sigaction system call bypasses
 * this, and a thread that blocks SIGBUS is killed by a fault in the segment as by any
 * other (the kernel does not deliver a blocked synchronous signal).
 *
 * Sanitizer builds (LA_PREFIX) keep the sanitizer's own SIGBUS handling: nothing here. */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "shm.h"

#ifdef LA_PREFIX
void sigbus_install(void)
{
}
void sigbus_install_handler(void)
{
}
#else

/* glibc's own sigaction, under its other exported name: sigaction itself is ours */
extern int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);

enum { F_SIGNAL, F_BSD_SIGNAL, F_SSIGNAL, F_SYSV_SIGNAL, F___SYSV_SIGNAL, F_SIGSET, F_N };

static bool installed;       /* liballoc's handler is the kernel's disposition */
static struct sigaction app; /* the application's disposition, as it sees it */
static uint32_t app_lock;    /* guards app and installed */

/* The lock is taken with SIGBUS blocked, so a handler never waits for its own thread. */
static void lock(sigset_t *old)
{
	sigset_t bus;
	sigemptyset(&bus);
	sigaddset(&bus, SIGBUS);
	pthread_sigmask(SIG_BLOCK, &bus, old);
	while (__atomic_exchange_n(&app_lock, 1, __ATOMIC_ACQUIRE))
		syscall(SYS_sched_yield);
}

static void unlock(const sigset_t *old)
{
	__atomic_store_n(&app_lock, 0, __ATOMIC_RELEASE);
	pthread_sigmask(SIG_SETMASK, old, NULL);
}

static void on_sigbus(int sig, siginfo_t *si, void *uc);

/* Our handler, with the application's SA_ONSTACK and SA_RESTART (they act before any
 * code runs: on which stack, whether an interrupted system call restarts). */
static int install_ours(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO | (app.sa_flags & (SA_ONSTACK | SA_RESTART));
	sigemptyset(&sa.sa_mask);
	return __sigaction(SIGBUS, &sa, NULL);
}

typedef void (*handler_t)(int);
static handler_t (*real_fn(int f))(int, handler_t);

void sigbus_install_handler(void)
{
	/* once in place it stays (a forked child inherits it): no lock, no signal mask */
	if (__atomic_load_n(&installed, __ATOMIC_ACQUIRE))
		return;
	sigset_t old;
	lock(&old);
	if (!installed && __sigaction(SIGBUS, NULL, &app) == 0 && install_ours() == 0)
		__atomic_store_n(&installed, true, __ATOMIC_RELEASE);
	unlock(&old);
}

void sigbus_install(void)
{
	sigbus_install_handler();
	for (int f = 0; f < F_N; f++) /* (found once: a load each after that) */
		real_fn(f);
}

/* What the application's disposition would have done with this SIGBUS. */
static void chain(int sig, siginfo_t *si, void *uc)
{
	sigset_t old;
	lock(&old);
	struct sigaction a = app;
	bool fn = a.sa_handler != SIG_DFL && a.sa_handler != SIG_IGN;
	if (fn && (a.sa_flags & SA_RESETHAND)) {
		app.sa_handler = SIG_DFL;
		app.sa_flags &= ~(SA_SIGINFO | SA_RESETHAND);
	}
	unlock(&old);
	bool sent = si->si_code <= 0; /* kill, sigqueue, tgkill: not a fault */
	if (!fn) {
		if (a.sa_handler == SIG_IGN && sent)
			return;
		/* the default action (for a fault even when ignored, as the kernel does): the
		 * fault happens again on return, or the signal is raised again, and kills */
		struct sigaction dfl;
		memset(&dfl, 0, sizeof(dfl));
		dfl.sa_handler = SIG_DFL;
		__sigaction(SIGBUS, &dfl, NULL);
		if (sent) {
			sigset_t bus;
			sigemptyset(&bus);
			sigaddset(&bus, SIGBUS);
			syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), SIGBUS);
			pthread_sigmask(SIG_UNBLOCK, &bus, NULL);
		}
		return;
	}
	/* the mask the kernel would have set for the application's handler */
	sigset_t mask;
	sigorset(&mask, &((ucontext_t *)uc)->uc_sigmask, &a.sa_mask);
	if (a.sa_flags & SA_NODEFER)
		sigdelset(&mask, SIGBUS);
	else
		sigaddset(&mask, SIGBUS);
	pthread_sigmask(SIG_SETMASK, &mask, NULL);
	if (a.sa_flags & SA_SIGINFO)
		a.sa_sigaction(sig, si, uc);
	else
		a.sa_handler(sig);
}

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	int saved = errno;
	/* a write past the end of the truncated segment file (only the kernel or the process
	 * itself can send a positive si_code) */
	if (si->si_code == BUS_ADRERR && shm_fault(si->si_addr)) {
		errno = saved;
		return;
	}
	errno = saved;
	chain(sig, si, uc);
}

/* sigaction(SIGBUS, ...) once liballoc's handler is in place: the application's view. */
static int bus_sigaction(const struct sigaction *act, struct sigaction *old)
{
	sigset_t saved;
	lock(&saved);
	if (old)
		*old = app;
	int rc = 0;
	if (act) {
		int was = app.sa_flags;
		app = *act;
		if ((was ^ act->sa_flags) & (SA_ONSTACK | SA_RESTART))
			rc = install_ours();
	}
	unlock(&saved);
	return rc;
}

static bool ours(int sig)
{
	return sig == SIGBUS && __atomic_load_n(&installed, __ATOMIC_ACQUIRE);
}

/* SIGBUS's disposition before liballoc's handler is in place: set under the lock, so that
 * an install in another thread (the control thread names the file and installs then:
 * sigbus_install_handler) reads the application's disposition and installs its own
 * either before this call or after it, not around it (the application's handler would
 * replace liballoc's unrecorded, and its call return liballoc's). False: the handler
 * is in place now (the caller goes the installed way). */
static bool before_install(int (*call)(void *ctx), void *ctx, int *rc)
{
	sigset_t saved;
	lock(&saved);
	bool before = !__atomic_load_n(&installed, __ATOMIC_RELAXED);
	if (before)
		*rc = call(ctx);
	int err = errno;
	unlock(&saved);
	errno = err;
	return before;
}

struct sigaction_args {
	const struct sigaction *act;
	struct sigaction *old;
};

static int sigaction_real(void *ctx)
{
	const struct sigaction_args *a = ctx;
	return __sigaction(SIGBUS, a->act, a->old);
}

LA_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	if (sig != SIGBUS)
		return __sigaction(sig, act, old);
	int rc;
	if (!ours(sig) && before_install(sigaction_real, &(struct sigaction_args){act, old}, &rc))
		return rc;
	return bus_sigaction(act, old);
}

/* The signal() family, for SIGBUS, with glibc's semantics for each; other signals go to
 * glibc's own function. */

static handler_t set_handler(handler_t h, int flags, bool mask_self)
{
	if (h == SIG_ERR) {
		errno = EINVAL;
		return SIG_ERR;
	}
	struct sigaction act, old;
	memset(&act, 0, sizeof(act));
	act.sa_handler = h;
	act.sa_flags = flags;
	sigemptyset(&act.sa_mask);
	if (mask_self)
		sigaddset(&act.sa_mask, SIGBUS);
	bus_sigaction(&act, &old);
	return old.sa_handler;
}

/* glibc's own functions of the signal() family (found once: sigbus_install runs them
 * early, before any handler of the application might call one) */
static const char *const fn_names[F_N] = {"signal",      "bsd_signal",    "ssignal",
                                          "sysv_signal", "__sysv_signal", "sigset"};
static handler_t (*fn_real[F_N])(int, handler_t);

static handler_t (*real_fn(int f))(int, handler_t)
{
	handler_t (*r)(int, handler_t) = __atomic_load_n(&fn_real[f], __ATOMIC_ACQUIRE);
	if (!r) {
		r = (handler_t(*)(int, handler_t))dlsym(RTLD_NEXT, fn_names[f]);
		__atomic_store_n(&fn_real[f], r, __ATOMIC_RELEASE);
	}
	return r;
}

static handler_t call_real(int f, int sig, handler_t h)
{
	handler_t (*r)(int, handler_t) = real_fn(f);
	if (!r) {
		errno = ENOSYS;
		return SIG_ERR;
	}
	return r(sig, h);
}

struct signal_args {
	handler_t (*real)(int, handler_t);
	handler_t h, prev;
};

static int signal_real(void *ctx)
{
	struct signal_args *a = ctx;
	if (!a->real) {
		errno = ENOSYS;
		a->prev = SIG_ERR;
	} else {
		a->prev = a->real(SIGBUS, a->h);
	}
	return 0;
}

/* The real function f for SIGBUS while liballoc's handler is not in place (before_install;
 * the function found first: dlsym may allocate). False: it is in place now. */
static bool signal_before_install(int f, handler_t h, handler_t *prev)
{
	struct signal_args a = {real_fn(f), h, SIG_ERR};
	int rc;
	if (!before_install(signal_real, &a, &rc))
		return false;
	*prev = a.prev;
	return true;
}

#define LA_SIGNAL_FN(name, f, flags, mask_self)                       \
	LA_EXPORT handler_t name(int sig, handler_t h)                \
	{                                                             \
		handler_t prev;                                       \
		if (sig != SIGBUS)                                    \
			return call_real(f, sig, h);                  \
		if (!ours(sig) && signal_before_install(f, h, &prev)) \
			return prev;                                  \
		return set_handler(h, flags, mask_self);              \
	}

handler_t bsd_signal(int sig, handler_t h); /* no longer declared by <signal.h> */

/* BSD semantics (glibc's signal): restart, the signal blocked in its handler */
LA_SIGNAL_FN(signal, F_SIGNAL, SA_RESTART, true)
LA_SIGNAL_FN(bsd_signal, F_BSD_SIGNAL, SA_RESTART, true)
LA_SIGNAL_FN(ssignal, F_SSIGNAL, SA_RESTART, true)
/* System V semantics: one shot, not blocked in its handler */
LA_SIGNAL_FN(sysv_signal, F_SYSV_SIGNAL, SA_RESETHAND | SA_NODEFER, false)
LA_SIGNAL_FN(__sysv_signal, F___SYSV_SIGNAL, SA_RESETHAND | SA_NODEFER, false)

/* sigset(SIGBUS, SIG_HOLD) blocks it and returns the disposition; any other disposition
 * is set (no flags, an empty mask) and SIGBUS unblocked; the previous disposition is
 * returned, or SIG_HOLD if SIGBUS was blocked. */
LA_EXPORT handler_t sigset(int sig, handler_t h)
{
	/* (before liballoc's handler is in place, not serialised with its install as the
	 * others are: glibc's sigset changes the signal mask, which the lock's restores) */
	if (!ours(sig))
		return call_real(F_SIGSET, sig, h);
	sigset_t bus, before;
	sigemptyset(&bus);
	sigaddset(&bus, SIGBUS);
	if (h == SIG_HOLD) {
		struct sigaction cur;
		bus_sigaction(NULL, &cur);
		if (pthread_sigmask(SIG_BLOCK, &bus, &before) != 0)
			return SIG_ERR;
		return sigismember(&before, SIGBUS) ? SIG_HOLD : cur.sa_handler;
	}
	handler_t prev = set_handler(h, 0, false);
	if (prev == SIG_ERR || pthread_sigmask(SIG_UNBLOCK, &bus, &before) != 0)
		return SIG_ERR;
	return sigismember(&before, SIGBUS) ? SIG_HOLD : prev;
}
#endif
