/* os.c — the allocator's only door to the kernel's memory calls; each call is counted
 * (calls and bytes) into the counter block the caller names. Never allocates. */
#include "os.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#ifndef MAP_NORESERVE
#define MAP_NORESERVE 0
#endif
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000 /* Linux 4.17 */
#endif

void *os_map(size_t size, struct la_counters *c)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	STAT_ADD(c, mmap_calls, 1);
	if (p == MAP_FAILED) {
		errno = ENOMEM;
		return NULL;
	}
	STAT_ADD(c, mmap_bytes, size);
	return p;
}

__thread uint64_t *os_measure __attribute__((tls_model("initial-exec")));
__thread uint64_t os_goal __attribute__((tls_model("initial-exec")));

int os_unmap(void *p, size_t size, struct la_counters *c)
{
	if (unlikely(os_measure != NULL))
		*os_measure += os_resident(p, size);
	STAT_ADD(c, munmap_calls, 1);
	STAT_ADD(c, munmap_bytes, size);
	return munmap(p, size) == 0 ? 0 : errno;
}

/* Address hint: heaps are placed next to each other, so that aligned reservations mostly
 * succeed in one mmap without over-reserving. */
static uintptr_t aligned_hint;

/* The first reservation's hint, before any heap gives one: the second whole alignment
 * window below the C library's code. The kernel maps top-down, the loader mapped libc
 * before the libraries that need it (which went below it, into the window right under
 * libc's), so that window is free in nearly every process, and the first heap is one mmap
 * instead of an over-reservation and two munmaps (~10 us of every process's start). Where
 * it is not free the kernel maps elsewhere, the result is not aligned, and the
 * over-reservation follows. 0: no hint (libc too low to have two windows below it). */
static uintptr_t first_aligned_hint(size_t size, size_t align)
{
	uintptr_t lib = (uintptr_t)&mmap & ~(uintptr_t)(align - 1);
	size_t below = align + ((size + align - 1) & ~(align - 1));
	return lib > 2 * below ? lib - below : 0;
}

void *os_map_aligned(size_t size, size_t align, struct la_counters *c)
{
	uintptr_t hint = __atomic_load_n(&aligned_hint, __ATOMIC_RELAXED);
	if (!hint)
		hint = first_aligned_hint(size, align);
	if (hint) {
		void *p = mmap((void *)hint, size, PROT_READ | PROT_WRITE,
		               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		STAT_ADD(c, mmap_calls, 1);
		if (p != MAP_FAILED) {
			STAT_ADD(c, mmap_bytes, size);
			if (((uintptr_t)p & (align - 1)) == 0) {
				__atomic_store_n(&aligned_hint, (uintptr_t)p - size,
				                 __ATOMIC_RELAXED);
				return p;
			}
			os_unmap(p, size, c);
		}
	}
	/* over-reserve and trim both ends */
	char *p = os_map(size + align, c);
	if (!p)
		return NULL;
	uintptr_t start = ((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1);
	size_t lead = start - (uintptr_t)p, tail = align - lead;
	if (lead)
		os_unmap(p, lead, c);
	if (tail)
		os_unmap((char *)start + size, tail, c);
	STAT_SUB(c, mmap_bytes, align);
	STAT_SUB(c, munmap_bytes, align);
	__atomic_store_n(&aligned_hint, start - size, __ATOMIC_RELAXED);
	return (void *)start;
}

/* One madvise of a range, counted; 0 or the error; errno is left as it was (a refused
 * advice inside a malloc or free that succeeds is no error of the program's call). */
static int os_advise(void *p, size_t size, int advice, struct la_counters *c)
{
	STAT_ADD(c, madvise_calls, 1);
	STAT_ADD(c, madvise_bytes, size);
	int saved = errno;
	int err = madvise(p, size, advice) == 0 ? 0 : errno;
	errno = saved;
	return err;
}

int os_purge(void *p, size_t size, struct la_counters *c)
{
	if (unlikely(os_measure != NULL))
		*os_measure += os_resident(p, size);
	return os_advise(p, size, MADV_DONTNEED, c);
}

#ifndef SYS_process_madvise
#define SYS_process_madvise 440
#endif
#define PIDFD_SELF_THREAD_ (-10000) /* the calling thread (linux/pidfd.h, Linux 6.14) */

/* os_purge_many works here: 1 yes, -1 refused at its first call (never asked again), 0 not
 * known yet (atomic) */
static int purge_many_ok;

uint32_t os_purge_many(const struct iovec *iov, uint32_t n, struct la_counters *c)
{
	int ok = __atomic_load_n(&purge_many_ok, __ATOMIC_RELAXED);
	if (ok < 0 || n == 0)
		return 0;
	int saved = errno;
	STAT_ADD(c, madvise_calls, 1);
	ssize_t r =
	        syscall(SYS_process_madvise, PIDFD_SELF_THREAD_, iov, (size_t)n, MADV_DONTNEED, 0u);
	errno = saved;
	if (r < 0) {
		if (ok == 0)
			__atomic_store_n(&purge_many_ok, -1, __ATOMIC_RELAXED);
		return 0;
	}
	if (ok == 0)
		__atomic_store_n(&purge_many_ok, 1, __ATOMIC_RELAXED);
	STAT_ADD(c, madvise_bytes, (uint64_t)r);
	uint32_t done = 0;
	for (size_t left = (size_t)r; done < n && iov[done].iov_len <= left; done++)
		left -= iov[done].iov_len;
	return done;
}

#ifndef MADV_COLD
#define MADV_COLD 20
#endif

int os_cold(void *p, size_t size, struct la_counters *c)
{
	return os_advise(p, size, MADV_COLD, c);
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

uint64_t os_populate_calls, os_populate_bytes;

int os_populate(void *p, size_t size, struct la_counters *c)
{
	__atomic_fetch_add(&os_populate_calls, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&os_populate_bytes, size, __ATOMIC_RELAXED);
	return os_advise(p, size, MADV_POPULATE_WRITE, c);
}

int os_huge(void *p, size_t size, bool on, struct la_counters *c)
{
	return os_advise(p, size, on ? MADV_HUGEPAGE : MADV_NOHUGEPAGE, c);
}

#ifndef MADV_WIPEONFORK
#define MADV_WIPEONFORK 18
#define MADV_KEEPONFORK 19
#endif

int os_wipe_on_fork(void *p, size_t size, bool wipe, struct la_counters *c)
{
	return os_advise(p, size, wipe ? MADV_WIPEONFORK : MADV_KEEPONFORK, c);
}

static int thp_always = -1;  /* the kernel backs unadvised ranges too (atomic; -1: not read) */
static size_t huge_size = 1; /* os_huge_size (atomic; 1: not read yet) */
static int pmd_always = -1;  /* os_thp_pmd_always (atomic; -1: not read) */
static int top_always = -1;  /* `enabled` says (or may say) "always" (atomic; -1: not read) */
const char *os_thp_dir = "/sys/kernel/mm/transparent_hugepage";

/* Reads os_thp_dir's file [sub/]leaf into buf (os_read_small); -1 for a path too long (a
 * test's directory: nothing read, the careful answer). */
static ssize_t thp_read(const char *sub, const char *leaf, char *buf, size_t len)
{
	char path[256];
	size_t dl = strlen(os_thp_dir), sl = sub ? strlen(sub) + 1 : 0, ll = strlen(leaf);
	if (dl + sl + ll + 2 > sizeof(path))
		return -1;
	memcpy(path, os_thp_dir, dl);
	if (sub) {
		path[dl] = '/';
		memcpy(path + dl + 1, sub, sl - 1);
	}
	path[dl + sl] = '/';
	memcpy(path + dl + sl + 1, leaf, ll + 1);
	return os_read_small(path, buf, len);
}

/* A multi-size THP (Linux 6.8: hugepages-<size>kB/enabled) of mode "always": the kernel
 * faults folios of that size into any anonymous range, advised or not, whatever the
 * PMD-size mode `enabled` says (a size in "inherit" follows it). */
static bool mthp_one(void *ctx, int dfd, const char *name)
{
	if (strncmp(name, "hugepages-", 10) != 0)
		return true;
	char buf[128];
	if (thp_read(name, "enabled", buf, sizeof(buf)) > 0 && strstr(buf, "[always]")) {
		*(bool *)ctx = true;
		return false;
	}
	return true;
}

static bool mthp_always(void)
{
	int dfd = open(os_thp_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return false; /* a kernel without multi-size THP has the directory all the same */
	bool any = false;
	os_dir_each(dfd, mthp_one, &any);
	close(dfd);
	return any;
}

size_t os_huge_size(void)
{
	size_t s = __atomic_load_n(&huge_size, __ATOMIC_RELAXED);
	if (s != 1)
		return s;
	char buf[128];
	s = 0;
	/* e.g. "always [madvise] never": the bracketed word is the mode */
	bool read = thp_read(NULL, "enabled", buf, sizeof(buf)) > 0;
	/* unknown: as if it did (the careful answer); a multi-size THP of mode "always"
	 * fills unadvised ranges too (by 16 KiB-2 MiB folios: pages no allocator write
	 * touched are resident, the resident bitmap bounds nothing) */
	bool always = !read || strstr(buf, "[always]") != NULL;
	bool pmd = read && (strstr(buf, "[always]") || strstr(buf, "[madvise]"));
	__atomic_store_n(&top_always, always, __ATOMIC_RELAXED);
	if (!always)
		always = mthp_always();
	__atomic_store_n(&thp_always, always, __ATOMIC_RELAXED);
	if (pmd && thp_read(NULL, "hpage_pmd_size", buf, sizeof(buf)) > 0)
		for (const char *d = buf; *d >= '0' && *d <= '9'; d++)
			s = s * 10 + (size_t)(*d - '0');
	__atomic_store_n(&huge_size, s, __ATOMIC_RELAXED);
	return s;
}

void os_huge_reread(void)
{
	__atomic_store_n(&thp_always, -1, __ATOMIC_RELAXED);
	__atomic_store_n(&pmd_always, -1, __ATOMIC_RELAXED);
	__atomic_store_n(&top_always, -1, __ATOMIC_RELAXED);
	__atomic_store_n(&huge_size, (size_t)1, __ATOMIC_RELAXED);
}

bool os_thp_always(void)
{
	if (__atomic_load_n(&thp_always, __ATOMIC_RELAXED) < 0)
		os_huge_size();
	return __atomic_load_n(&thp_always, __ATOMIC_RELAXED) != 0;
}

bool os_thp_pmd_always(void)
{
	int v = __atomic_load_n(&pmd_always, __ATOMIC_RELAXED);
	if (v >= 0)
		return v != 0;
	if (__atomic_load_n(&thp_always, __ATOMIC_RELAXED) == 0) {
		v = 0; /* no size backs unadvised ranges: not this one either */
	} else {
		char buf[128];
		/* `enabled` as os_huge_size read it, when it has (unknown: as if it said "always",
		 * the careful answer, as os_thp_always's) */
		int t = __atomic_load_n(&top_always, __ATOMIC_RELAXED);
		bool top = t >= 0 ? t != 0
		                  : thp_read(NULL, "enabled", buf, sizeof(buf)) <= 0 ||
		                            strstr(buf, "[always]") != NULL;
		/* Linux 6.8: the 2 MiB size's own mode, unless "inherit" (or no such file) */
		v = thp_read("hugepages-2048kB", "enabled", buf, sizeof(buf)) > 0 &&
		                    !strstr(buf, "[inherit]")
		            ? strstr(buf, "[always]") != NULL
		            : top;
	}
	__atomic_store_n(&pmd_always, v, __ATOMIC_RELAXED);
	return v != 0;
}

/* A move to `to` refused. A kernel may have unmapped the target range first: older ones
 * (Debian 12's 6.1 among them) check the source only after that (a source over two
 * mappings: part of the block advised or protected apart), and a move that keeps its
 * source (MREMAP_DONTUNMAP) over the address-space limit is refused so; other refusals
 * come before the target is touched. Still mapped whole (msync tells), the range is as it
 * was; else it is mapped again, fresh (the callers move only into pages never used or
 * not resident: fresh ones are what was there), and only where nothing else is
 * (MAP_FIXED_NOREPLACE): another thread's mapping made in the hole meanwhile is not
 * replaced (one that fills it exactly is not told from the range itself). A range that
 * cannot be mapped again, whole, is a hole in a heap (or another mapping in it) where a
 * block would land later: the process stops. who: the caller, named in the message. */
static void map_target_again(const char *who, void *to, size_t size, struct la_counters *c)
{
	if (msync(to, size, MS_ASYNC) == 0)
		return;
	void *q = mmap(to, size, PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
	STAT_ADD(c, mmap_calls, 1);
	if (q == to)
		return;
	bool taken = q == MAP_FAILED && errno == EEXIST;
	if (q != MAP_FAILED) /* (a kernel before 4.17: the flag unknown, a hint) */
		munmap(q, size);
	la_fatal(who, taken ? "a move into a heap was refused, and its target range "
	                      "could not be mapped again (another mapping is in it now)"
	                    : "a move into a heap was refused, and its target range "
	                      "could not be mapped again (a hole in the heap)");
}

int os_move(void *p, size_t size, void *to, struct la_counters *c)
{
	void *q = mremap(p, size, size, MREMAP_MAYMOVE | MREMAP_FIXED, to);
	STAT_ADD(c, mmap_calls, 1);
	if (q == to)
		return 0;
	int err = errno;
	map_target_again(__func__, to, size, c);
	return err;
}

#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4 /* Linux 5.7 */
#endif

int os_move_out(void *p, size_t size, void *to, struct la_counters *c)
{
	void *q = mremap(p, size, size, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, to);
	STAT_ADD(c, mmap_calls, 1);
	if (q == to)
		return 0;
	/* (ENOMEM for the mapping count: refused before anything changed; a kernel before
	 * 5.7, a source over two mappings, or the address-space limit: perhaps after the
	 * target's unmapping) */
	int err = errno;
	map_target_again(__func__, to, size, c);
	return err;
}

bool os_address_space_limited(void)
{
	struct rlimit r;
	return getrlimit(RLIMIT_AS, &r) != 0 || r.rlim_cur != RLIM_INFINITY;
}

void *os_remap(void *p, size_t old_size, size_t new_size, struct la_counters *c)
{
	void *q = mremap(p, old_size, new_size, MREMAP_MAYMOVE);
	STAT_ADD(c, mmap_calls, 1);
	if (q == MAP_FAILED) {
		errno = ENOMEM;
		return NULL;
	}
	if (new_size > old_size)
		STAT_ADD(c, mmap_bytes, new_size - old_size);
	else
		STAT_ADD(c, munmap_bytes, old_size - new_size);
	return q;
}

void *os_remap_in_place(void *p, size_t old_size, size_t new_size, struct la_counters *c)
{
	void *q = mremap(p, old_size, new_size, 0);
	STAT_ADD(c, mmap_calls, 1);
	if (q == MAP_FAILED) {
		errno = ENOMEM;
		return NULL;
	}
	if (new_size > old_size)
		STAT_ADD(c, mmap_bytes, new_size - old_size);
	else
		STAT_ADD(c, munmap_bytes, old_size - new_size);
	return q;
}

size_t os_resident(void *p, size_t size)
{
	unsigned char vec[1024];
	size_t total = 0;
	char *at = p;
	while (size) {
		size_t chunk = LA_MIN(size, sizeof(vec) << LA_PAGE_SHIFT);
		size_t pages = chunk >> LA_PAGE_SHIFT;
		if (mincore(at, chunk, vec) == 0)
			for (size_t i = 0; i < pages; i++)
				total += (size_t)(vec[i] & 1) << LA_PAGE_SHIFT;
		at += chunk;
		size -= chunk;
	}
	return total;
}

ssize_t os_read_small(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	return n;
}

void os_dir_each(int dfd, bool (*fn)(void *ctx, int dfd, const char *name), void *ctx)
{
	char buf[1024];
	long got;
	while ((got = syscall(SYS_getdents64, dfd, buf, sizeof(buf))) > 0) {
		for (long off = 0; off < got;) {
			unsigned short
			        reclen; /* struct linux_dirent64: d_reclen at 16, d_name at 19 */
			memcpy(&reclen, buf + off + 16, sizeof(reclen));
			const char *name = buf + off + 19;
			off += reclen;
			if (!fn(ctx, dfd, name))
				return;
		}
	}
}

/* The calls below go to the kernel directly, not through libc's wrappers: those live in
 * libc pages a typical program never runs, and the first call to each would map them
 * (with the 64 KiB fault-around window each brings) into every preloaded process's RSS.
 * None of them is on a path where the vDSO's speed matters. */
static uint64_t clock_ns(clockid_t clk)
{
	struct timespec ts = {0};
	syscall(SYS_clock_gettime, clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t os_now_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

uint64_t os_wall_ns(void)
{
	return clock_ns(CLOCK_REALTIME);
}

uint64_t os_boot_ns(void)
{
	return clock_ns(CLOCK_BOOTTIME);
}

bool la_popcnt;

void la_popcount_boot(void)
{
#if defined(__x86_64__) && !defined(__POPCNT__)
	unsigned a, b, c, d;
	if (__get_cpuid(1, &a, &b, &c, &d) && (c & bit_POPCNT))
		__atomic_store_n(&la_popcnt, true, __ATOMIC_RELAXED);
#endif
}

int os_ncpus(void)
{
	/* CPUs this process may run on (what sysconf's online count means for sizing) */
	uint64_t mask[16] = {0};
	long bytes = syscall(SYS_sched_getaffinity, 0, sizeof(mask), mask);
	if (bytes < 0) { /* more than 1024 CPUs */
		long online = sysconf(_SC_NPROCESSORS_ONLN);
		return online > 0 ? (int)online : 1;
	}
	int n = 0;
	for (long i = 0; i < bytes / 8; i++)
		n += __builtin_popcountll(mask[i]);
	return n > 0 ? n : 1;
}

pid_t os_getpid(void)
{
	return (pid_t)syscall(SYS_getpid);
}

uid_t os_getuid(void)
{
	return (uid_t)syscall(SYS_getuid);
}

uid_t os_geteuid(void)
{
	return (uid_t)syscall(SYS_geteuid);
}

int os_rename(const char *from, const char *to)
{
	return syscall(SYS_rename, from, to) == 0 ? 0 : errno;
}

#if LA_WRAP_THREADS
/* The next definition of name after liballoc's (libc's), looked up once into *slot */
static void *real_next(void **slot, const char *name)
{
	void *f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
	if (!f) {
		f = dlsym(RTLD_NEXT, name);
		__atomic_store_n(slot, f, __ATOMIC_RELEASE);
	}
	return f;
}
#endif

os_create_fn os_real_pthread_create(void)
{
#if LA_WRAP_THREADS
	static void *real;
	return (os_create_fn)real_next(&real, "pthread_create");
#else
	return pthread_create;
#endif
}

os_join_fn os_real_pthread_join(void)
{
#if LA_WRAP_THREADS
	static void *real;
	return (os_join_fn)real_next(&real, "pthread_join");
#else
	return pthread_join;
#endif
}

/* Every signal but SIGBUS: a write to the segment after its file was truncated faults, and
 * the kernel kills a thread that blocks the signal its fault raises (sigbus.c). */
LA_INLINE void thread_mask(sigset_t *all)
{
	sigfillset(all);
	sigdelset(all, SIGBUS);
}

LA_INLINE int thread_attr(pthread_attr_t *attr, size_t stack, void *mem)
{
	int err = pthread_attr_init(attr);
	if (err)
		return err;
	pthread_attr_setdetachstate(attr, PTHREAD_CREATE_DETACHED);
	if (mem) /* no mapping, guard page or VMA of its own to make and tear down */
		pthread_attr_setstack(attr, mem, stack);
	else
		pthread_attr_setstacksize(attr, stack);
	return 0;
}

int os_thread_attr(pthread_attr_t *attr, size_t stack, void *mem)
{
	sigset_t all;
	thread_mask(&all);
	int err = thread_attr(attr, stack, mem);
	if (err)
		return err;
	/* the thread starts with that mask (libc blocks every signal around the clone and
	 * gives the new thread this one): kept for many starts, its allocation is made once */
	err = pthread_attr_setsigmask_np(attr, &all);
	if (err)
		pthread_attr_destroy(attr);
	return err;
}

int os_thread_start_attr(void *(*fn)(void *), void *arg, const pthread_attr_t *attr)
{
	pthread_t t;
	os_create_fn create = os_real_pthread_create();
	return create ? create(&t, attr, fn, arg) : EAGAIN;
}

int os_thread_start(void *(*fn)(void *), void *arg, size_t stack, void *mem)
{
	pthread_attr_t attr;
	int err = thread_attr(&attr, stack, mem);
	if (err)
		return err;
	/* The new thread inherits this thread's mask (libc blocks every signal around the
	 * clone and gives the new thread the mask it found): blocked here for the creation and
	 * put back after. Two system calls instead of pthread_attr_setsigmask_np's calloc (152
	 * bytes) and free: a class and a heap page (one fault) that a small process used for
	 * nothing else (bench/README.md, fixed31). */
	sigset_t all, old;
	thread_mask(&all);
	err = pthread_sigmask(SIG_SETMASK, &all, &old);
	if (!err) {
		err = os_thread_start_attr(fn, arg, &attr);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	pthread_attr_destroy(&attr);
	return err;
}
