/* sigbus.c — run under LD_PRELOAD=liballoc.so (tests/e2e/sigbus.bats): the process survives
 * its segment file being truncated, and its own SIGBUS handling is what it would be
 * without liballoc. Its own SIGBUS is a real fault: a write to the second page of a
 * one-page shared memfd mapping (BUS_ADRERR at a known address).
 *
 * usage: sigbus MODE      (the segment: $LIBALLOC_RUN_DIR/liballoc.<pid>.seg)
 *   handler     sigaction(SA_SIGINFO, mask {SIGUSR1}) after liballoc started: its own fault
 *               reaches the handler (address, code, mask checked), before and after the
 *               segment is truncated; sigaction(SIGBUS, NULL, &old) sees that handler
 *   signal      the same through signal(): the old handler returned, BSD semantics
 *   default     no handler: survives the truncation, then dies of its own fault (SIGBUS)
 *   sent        no handler: survives the truncation, then dies of kill(self, SIGBUS)
 *   ignore      SIG_IGN: a SIGBUS sent by kill is ignored; survives the truncation; its
 *               own fault kills it all the same (as the kernel does)
 *   resethand   SA_RESETHAND: the first fault reaches the handler, which is then SIG_DFL
 *               (as sigaction reports); the second kills
 *   inherited   SIGBUS was ignored when the program started (e.g. bash's trap '' BUS
 *               before exec): liballoc reports and keeps that disposition
 *   named       (with libtruncshim.so preloaded too, which truncates the segment file and
 *               reads its mapping the moment the file is named, in the naming thread) the
 *               process survives that, whatever SIGBUS's disposition
 *   idle        the segment truncated while the main thread stays out of the allocator:
 *               the control thread's next write (a decay pass) faults, and it survives
 * Prints one line per check ("ok ..." or "FAIL ..."), exits 0 when all passed, 1 if not (3 if
 * a SIGBUS that is not its own reached its handler);
 * the modes that must die say "about to die" first. Without LD_PRELOAD the segment steps
 * are left out: the rest shows what the kernel alone does. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int failures;
static char seg[512];
static int preloaded; /* without LD_PRELOAD, the segment steps are left out */

static void check(int ok, const char *what)
{
	printf("%s %s\n", ok ? "ok" : "FAIL", what);
	fflush(stdout);
	if (!ok)
		failures++;
}

/* ---- its own SIGBUS ----------------------------------------------------------------- */
static char *own_page; /* the page past the end of a one-page memfd mapping */

static void own_setup(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	int fd = memfd_create("sigbus-own", 0);
	if (fd < 0 || ftruncate(fd, pg) != 0) {
		perror("memfd");
		exit(2);
	}
	char *m = mmap(NULL, (size_t)pg * 2, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		perror("mmap");
		exit(2);
	}
	own_page = m + pg;
}

static void own_fault(void)
{
	*(volatile char *)own_page = 1;
}

static sigjmp_buf back;
static volatile sig_atomic_t calls, addr_ok, code_ok, bus_blocked, usr1_blocked;

static void note_mask(void)
{
	sigset_t cur;
	sigprocmask(SIG_BLOCK, NULL, &cur);
	bus_blocked = sigismember(&cur, SIGBUS) == 1;
	usr1_blocked = sigismember(&cur, SIGUSR1) == 1;
}

/* a SIGBUS that is not its own fault reached its handler: say so and exit 3 */
static void foreign(void)
{
	static const char msg[] = "FAIL a SIGBUS that is not its own reached its handler\n";
	if (write(1, msg, sizeof(msg) - 1) < 0)
		_exit(3);
	_exit(3);
}

static void on_bus_info(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	if (si->si_addr != own_page)
		foreign();
	calls++;
	addr_ok = sig == SIGBUS && si->si_addr == own_page;
	code_ok = si->si_code == BUS_ADRERR;
	note_mask();
	siglongjmp(back, 1);
}

static void on_bus_plain(int sig)
{
	calls++;
	addr_ok = sig == SIGBUS;
	note_mask();
	siglongjmp(back, 1);
}

/* its own fault, caught by its handler: returns whether the handler ran */
static int fault_caught(void)
{
	int before = calls;
	if (sigsetjmp(back, 1) == 0)
		own_fault();
	return calls == before + 1;
}

/* ---- the segment ---------------------------------------------------------------------- */
static void churn(int n)
{
	for (int i = 0; i < n; i++) {
		void *p[64];
		for (int j = 0; j < 64; j++)
			p[j] = malloc((size_t)(16 << (j % 12)));
		for (int j = 0; j < 64; j++)
			free(p[j]);
	}
}

/* truncate our own segment to 0 bytes (every page of it gone) and go on allocating */
static void truncate_segment_and_allocate(void)
{
	if (!preloaded)
		return;
	check(truncate(seg, 0) == 0, "the segment truncated to 0 bytes");
	churn(200);
	check(access(seg, F_OK) != 0, "the segment moved to private memory and unpublished");
}

static void die_of(const char *what)
{
	printf("about to die: %s\n", what);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: sigbus MODE\n");
		return 2;
	}
	const char *mode = argv[1], *dir = getenv("LIBALLOC_RUN_DIR");
	snprintf(seg, sizeof(seg), "%s/liballoc.%d.seg", dir ? dir : ".", (int)getpid());
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("pid %d\n", (int)getpid()); /* stdio's buffers allocated before any check */
	churn(1);
	preloaded = getenv("LD_PRELOAD") != NULL;
	if (!strcmp(mode, "named")) {
		/* libtruncshim.so truncated the file and read its mapping the moment it was named,
		 * in the thread naming it; it then made $TRUNCSHIM_DONE: waited for, up to 60 s */
		const char *done = getenv("TRUNCSHIM_DONE");
		for (int i = 0; done && i < 60000 && access(done, F_OK) != 0; i++)
			nanosleep(&(struct timespec){0, 1000000}, NULL);
		check(done && access(done, F_OK) == 0,
		      "the segment was named (and truncated then)");
		churn(10);
		printf("%s\n", failures ? "FAILED" : "PASSED");
		return failures ? 1 : 0;
	}
	/* named LIBALLOC_PUBLISH_DELAY after the start (50 ms): waited for, up to 10 s */
	for (int i = 0; preloaded && i < 10000 && access(seg, F_OK) != 0; i++)
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	if (preloaded)
		check(access(seg, F_OK) == 0, "the segment is published");
	own_setup();
	struct sigaction sa, cur;
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);

	if (!strcmp(mode, "handler")) {
		sa.sa_sigaction = on_bus_info;
		sa.sa_flags = SA_SIGINFO;
		sigaddset(&sa.sa_mask, SIGUSR1);
		check(sigaction(SIGBUS, &sa, NULL) == 0, "sigaction installs the handler");
		check(fault_caught(), "its own fault reaches its handler");
		check(addr_ok && code_ok, "with the faulting address and BUS_ADRERR");
		check(bus_blocked && usr1_blocked, "with SIGBUS and its sa_mask blocked");
		truncate_segment_and_allocate();
		check(fault_caught() && addr_ok && code_ok, "after the move too");
		memset(&cur, 0, sizeof(cur));
		check(sigaction(SIGBUS, NULL, &cur) == 0 && cur.sa_sigaction == on_bus_info &&
		              (cur.sa_flags & SA_SIGINFO) &&
		              sigismember(&cur.sa_mask, SIGUSR1) == 1,
		      "sigaction reports its own handler, flags and mask");
		sa.sa_flags = SA_SIGINFO | SA_NODEFER;
		sigaction(SIGBUS, &sa, NULL);
		check(fault_caught() && !bus_blocked && usr1_blocked,
		      "SA_NODEFER: SIGBUS not blocked in the handler");
	} else if (!strcmp(mode, "signal")) {
		check(signal(SIGBUS, on_bus_plain) == SIG_DFL, "signal returns the default");
		check(fault_caught() && addr_ok && bus_blocked,
		      "its own fault reaches its handler");
		truncate_segment_and_allocate();
		check(fault_caught(), "after the move too");
		check(signal(SIGBUS, SIG_DFL) == on_bus_plain, "signal returns its handler");
		sigaction(SIGBUS, NULL, &cur);
		check(cur.sa_handler == SIG_DFL, "sigaction reports the default again");
	} else if (!strcmp(mode, "default")) {
		truncate_segment_and_allocate();
		die_of("its own fault with the default disposition");
		own_fault();
	} else if (!strcmp(mode, "sent")) {
		truncate_segment_and_allocate();
		die_of("kill(self, SIGBUS) with the default disposition");
		kill(getpid(), SIGBUS);
		sleep(5);
	} else if (!strcmp(mode, "ignore")) {
		check(signal(SIGBUS, SIG_IGN) == SIG_DFL, "signal(SIG_IGN)");
		check(kill(getpid(), SIGBUS) == 0, "a SIGBUS sent by kill is ignored");
		truncate_segment_and_allocate();
		sigaction(SIGBUS, NULL, &cur);
		check(cur.sa_handler == SIG_IGN, "sigaction reports SIG_IGN");
		die_of("its own fault while SIGBUS is ignored");
		own_fault();
	} else if (!strcmp(mode, "resethand")) {
		sa.sa_sigaction = on_bus_info;
		sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
		sigaction(SIGBUS, &sa, NULL);
		truncate_segment_and_allocate();
		check(fault_caught() && addr_ok, "the first fault reaches its handler");
		sigaction(SIGBUS, NULL, &cur);
		check(cur.sa_handler == SIG_DFL, "which is SIG_DFL afterwards");
		die_of("its second fault");
		own_fault();
	} else if (!strcmp(mode, "inherited")) {
		sigaction(SIGBUS, NULL, &cur);
		check(cur.sa_handler == SIG_IGN, "SIGBUS ignored since exec is reported as such");
		check(kill(getpid(), SIGBUS) == 0, "and a SIGBUS sent by kill is ignored");
		truncate_segment_and_allocate();
	} else if (!strcmp(mode, "idle")) {
		check(truncate(seg, 0) == 0, "the segment truncated to 0 bytes");
		/* stay out of the allocator: only the control thread writes the segment now
		 * (its decay pass, armed by the frees above) */
		struct timespec ts = {0, 20 * 1000 * 1000};
		int waited = 0;
		while (access(seg, F_OK) == 0 && waited < 60 * 50) {
			nanosleep(&ts, NULL);
			waited++;
		}
		check(access(seg, F_OK) != 0, "the control thread's write moved the segment");
		churn(10);
	} else {
		fprintf(stderr, "sigbus: unknown mode %s\n", mode);
		return 2;
	}
	printf("%s\n", failures ? "FAILED" : "PASSED");
	return failures ? 1 : 0;
}
