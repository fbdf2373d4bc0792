/* stackdepth.h — how far below its caller a call writes on a thread's stack, for the tests
 * that bound a path's stack (header only). The call runs on a thread of the test's own
 * stack, painted below the caller's frame; run the call's libc functions once on the
 * thread first (a test binary binds lazily: ld.so's resolver takes ~3 KiB at a first call;
 * the preloaded library binds at load, -z now). */
#ifndef LA_TESTS_STACKDEPTH_H
#define LA_TESTS_STACKDEPTH_H

#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>

enum { OWN_STACK = 256 << 10, STACK_PAINT = 0xa5 };
static char *own_stack; /* the stack of run_on_own_stack's thread */

/* On run_on_own_stack's thread: paints the stack below this frame (but for the 512 bytes
 * just under it), runs fn(arg) and returns how many bytes below this frame were written. */
static __attribute__((noinline, unused)) size_t painted_depth(void (*fn)(void *), void *arg)
{
	char *sp = __builtin_frame_address(0);
	memset(own_stack, STACK_PAINT, (size_t)(sp - 512 - own_stack));
	fn(arg);
	char *low = own_stack;
	while (low < sp && (unsigned char)*low == STACK_PAINT)
		low++;
	return (size_t)(sp - low);
}

/* Runs thread(arg) on a new thread whose stack is an OWN_STACK mapping of the test's own,
 * and waits for it: 0, or -1 if the stack or the thread could not be made. */
static inline __attribute__((unused)) int run_on_own_stack(void *(*thread)(void *), void *arg)
{
	own_stack =
	        mmap(NULL, OWN_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (own_stack == MAP_FAILED)
		return -1;
	int ret = -1;
	pthread_attr_t a;
	pthread_t t;
	if (pthread_attr_init(&a) == 0) {
		if (pthread_attr_setstack(&a, own_stack, OWN_STACK) == 0 &&
		    pthread_create(&t, &a, thread, arg) == 0 && pthread_join(t, NULL) == 0)
			ret = 0;
		pthread_attr_destroy(&a);
	}
	munmap(own_stack, OWN_STACK);
	own_stack = NULL;
	return ret;
}

#endif
