/* sigbus_race — signal(SIGBUS, ...) called over and over while liballoc's control thread
 * names the segment's file and installs its SIGBUS handler (LIBALLOC_PUBLISH_DELAY after
 * the start): each call must return what the one before set, and liballoc's handler must
 * end up in place (the kernel's disposition, read by the raw system call, is neither of the
 * program's). Exit 0, or 1 with what went wrong. Run preloaded (sigbus.bats). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static void on_bus(int sig)
{
	(void)sig;
}

/* the kernel's struct sigaction (rt_sigaction): its handler first */
struct ksigaction {
	void *handler;
	unsigned long flags;
	void *restorer;
	unsigned long mask;
};

static void *kernel_handler(void)
{
	struct ksigaction k;
	if (syscall(SYS_rt_sigaction, SIGBUS, NULL, &k, 8) != 0)
		return NULL;
	return k.handler;
}

int main(void)
{
	const char *dir = getenv("LIBALLOC_RUN_DIR");
	char seg[512];
	snprintf(seg, sizeof(seg), "%s/liballoc.%d.seg", dir ? dir : ".", (int)getpid());
	free(malloc(100));
	void (*last)(int) = SIG_DFL;
	long wrong = 0, named = -1, installed = -1, i;
	/* up to 3M calls (seconds): the handler is in place within the delay and a little */
	for (i = 0; i < 3000000; i++) {
		void (*want)(int) = (i & 1) ? SIG_DFL : on_bus;
		if (signal(SIGBUS, want) != last)
			wrong++;
		last = want;
		if ((i & 255) == 0 && named < 0 && access(seg, F_OK) == 0)
			named = i;
		if ((i & 255) == 0 && named >= 0 && installed < 0) {
			void *k = kernel_handler();
			if (k != (void *)on_bus && k != (void *)SIG_DFL)
				installed = i;
		}
		if (installed >= 0 && i > installed + 20000)
			break;
	}
	printf("calls %ld named at %ld installed at %ld wrong returns %ld\n", i, named, installed,
	       wrong);
	return named < 0 || installed < 0 || wrong ? 1 : 0;
}
