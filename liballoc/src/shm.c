/* shm.c — builds, publishes and removes the segment. The file lives in the run directory
 * ($LIBALLOC_RUN_DIR, else /dev/shm/liballoc-<uid>, which must be ours and mode 0700),
 * is created 0600 under a temporary name and renamed into place, and stays flock(LOCK_SH)ed
 * through an O_CLOEXEC descriptor for the life of the image (readers detect staleness by
 * taking LOCK_EX). Nothing here allocates. */
#include "shm.h"

#include <errno.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <grp.h>
#include <link.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <linux/magic.h>
#include <unistd.h>

#include "liballoc_parse.h"
#include "lock.h"
#include "os.h"
#include "sizeclass.h"
#include "tunables.h"

/* Fixed layout (offsets in the header are what readers use; shm.h). The header, the
 * tunables, the class entries (their sizes: the statistics are kept per arena), the process
 * block, the first arena's block and class statistics and the second arena's block share
 * the first page, and the mailbox has a page of its own at the end: a process with one arena
 * keeps two pages of its segment resident, one with two arenas three (the second arena's
 * class statistics; the process-wide class entries with their statistics, which every
 * refill and flush updated with locked adds, took the room before). The classes stay there
 * and not in the mailbox's page, which the process does not touch before its control
 * thread waits there (a fork's child copies the first pages only). */
#define SEG_ALIGN(x, a) (((x) + (a)-1) & ~(size_t)((a)-1))
#define OFF_TUNABLES    SHM_OFF_TUNABLES
#define OFF_CLASSES     SHM_OFF_CLASSES
#define OFF_PROCESS     SHM_OFF_PROCESS
#define OFF_ARENAS      SHM_OFF_ARENAS
#define ARENA_STRIDE    SHM_ARENA_STRIDE
/* the end of the first n arenas' blocks and class statistics */
#define ARENAS_END(n)   (OFF_ARENAS + (size_t)(n)*ARENA_STRIDE)
#define OFF_MAILBOX     SEG_ALIGN(ARENAS_END(LA_ARENAS_MAX), LA_SHM_PAGE)
#define OFF_HOLDS       (OFF_MAILBOX + SEG_ALIGN(sizeof(struct la_mailbox), 64))
#define SEG_SIZE        (OFF_MAILBOX + LA_SHM_PAGE)
/* what a file's start holds before it is mapped (shm_prepare_file): the first page */
#define START_USED      (ARENAS_END(1) + sizeof(struct la_shm_arena))

_Static_assert(LA_NCLASSES == LA_SHM_CLASSES_MAX, "the size classes readers expect");
_Static_assert(SEG_SIZE <= LA_SHM_SIZE_MAX, "segment within the readers' limit");
_Static_assert(ARENA_STRIDE <= LA_SHM_ARENA_STRIDE_MAX, "arena stride within the readers' limit");
_Static_assert(OFF_HOLDS + LA_NTUNABLES * sizeof(struct la_shm_hold) <= SEG_SIZE,
               "the holds share the mailbox's page");
_Static_assert(START_USED <= LA_SHM_PAGE, "header, tunables, class sizes, process block, the "
                                          "first arena whole and the second arena's block "
                                          "share a page");

static char *seg; /* the segment (anonymous, then the file mapped over it) */
static int seg_fd = -1;
static pid_t seg_pid;
static char seg_path[256];
static uint32_t seg_meta_pages;  /* pages of the segment in use (metadata) */
static bool seg_on_file;         /* seg is a shared mapping of seg_fd's file (atomic) */
static uint32_t seg_arena_count; /* the header's arena_count, kept for a move */
static uint32_t seg_moving;      /* a truncated file's segment is being moved */
uint32_t shm_decay_armed;
uint32_t shm_kicks;
/* The mailbox's page (the mailbox and the holds) was written in the segment's memory since
 * it was mapped: until then it holds zeros nothing wrote, and publishing need not read it
 * (reading untouched memory faults its zero page in: a fault per process for nothing). */
static bool mailbox_written;

/* counters written before shm_boot (never: shm_boot runs first in la_init) go here */
static struct la_shm_arena fallback_block;

struct la_shm_header *shm_header(void)
{
	return (struct la_shm_header *)seg;
}
struct la_mailbox *shm_mailbox(void)
{
	return (struct la_mailbox *)(seg + OFF_MAILBOX);
}
struct la_shm_arena *shm_process_block(void)
{
	return seg ? (struct la_shm_arena *)(seg + OFF_PROCESS) : &fallback_block;
}
struct la_shm_arena *shm_arena_block(uint32_t i)
{
	return (struct la_shm_arena *)(seg + OFF_ARENAS + (size_t)i * ARENA_STRIDE);
}

void shm_class_totals(unsigned cls, struct la_class_stats *out)
{
	*out = (struct la_class_stats){0};
	uint32_t n = __atomic_load_n(&shm_header()->arena_count, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < n; i++)
		la_class_stats_add(out, &shm_arena_classes(i)[cls]);
}

/* The header's description of the layout, and the class sizes. */
static void write_layout(void)
{
	struct la_shm_header *h = shm_header();
	h->magic = LA_SHM_MAGIC;
	h->abi_version = LA_SHM_ABI_VERSION;
	h->header_size = sizeof(*h);
	h->total_size = SEG_SIZE;
	h->generation = 1;
	h->counter_count = LA_NCOUNTERS;
	h->tunable_count = LA_NTUNABLES;
	h->class_count = LA_NCLASSES;
	h->arena_slots = LA_ARENAS_MAX;
	h->off_process = OFF_PROCESS;
	h->off_arenas = OFF_ARENAS;
	h->arena_stride = ARENA_STRIDE;
	h->off_tunables = OFF_TUNABLES;
	h->off_classes = OFF_CLASSES;
	h->class_stride = SHM_CLASS_STRIDE;
	h->off_arena_classes = OFF_ARENAS + sizeof(struct la_shm_arena);
	h->arena_class_stride = ARENA_STRIDE;
	h->class_stats_size = sizeof(struct la_class_stats);
	h->off_mailbox = OFF_MAILBOX;
	h->off_holds = OFF_HOLDS;
	la_strlcpy(h->version, LA_VERSION, sizeof(h->version));
	for (unsigned c = 0; c < LA_NCLASSES; c++)
		((uint64_t *)(seg + OFF_CLASSES))[c] = sc_size[c];
}

/* The segment's first home: zero-filled memory of the library itself, so that shm_boot
 * makes no system call and nothing can fail there, before main or under a tight RLIMIT_AS
 * (untouched pages cost nothing); the file is mapped over it. */
LA_START_BSS(4) char shm_seg_area[SEG_SIZE] __attribute__((aligned(4096)));
#define seg_area shm_seg_area

void shm_boot(void)
{
	seg = seg_area;
	write_layout();
	shm_header()->control_state = LA_CONTROL_OFF;
	la_counters_add(&shm_process_block()->c, &fallback_block.c);
	shm_process_block()->c.address_space_bytes += SEG_SIZE;
	shm_publish_tunables();
}

void shm_set_arena_count(uint32_t n)
{
	__atomic_store_n(&seg_arena_count, n, __ATOMIC_RELAXED);
	__atomic_store_n(&shm_header()->arena_count, n, __ATOMIC_RELEASE);
	/* the pages in use: header .. the last arena's class statistics, and the mailbox's */
	uint32_t pages = (uint32_t)((ARENAS_END(n) + LA_SHM_PAGE - 1) / LA_SHM_PAGE) + 1;
	if (pages != seg_meta_pages) {
		STAT_ADD(&shm_process_block()->c, metadata_bytes,
		         (uint64_t)((int64_t)pages - seg_meta_pages) * LA_SHM_PAGE);
		seg_meta_pages = pages;
	}
	/* a file not named yet has its first page (and the mailbox's): the second arena's
	 * class statistics are past it, written into a hole, which a full tmpfs answers with
	 * SIGBUS, and the handler comes with the name. (Under the arenas' lock: no dlsym) */
	if (n > 1 && __atomic_load_n(&seg_on_file, __ATOMIC_ACQUIRE) &&
	    !__atomic_load_n(&seg_path[0], __ATOMIC_RELAXED))
		sigbus_install_handler();
}

void shm_thread_count(int delta)
{
	if (seg)
		__atomic_fetch_add(&shm_header()->allocator_threads, (uint64_t)(int64_t)delta,
		                   __ATOMIC_RELAXED);
}

void shm_publish_tunables(void)
{
	if (!seg)
		return;
	struct la_shm_header *h = shm_header();
	struct la_shm_tunable *t = (struct la_shm_tunable *)(seg + OFF_TUNABLES);
	/* the caller holds the tunables' lock (tunables.c), so there is one writer at a time;
	 * the seqlock makes a copy taken during the write visible to readers, who retry */
	__atomic_fetch_add(&h->tunables_seq, 1, __ATOMIC_ACQ_REL);
	for (int i = 0; i < LA_NTUNABLES; i++) {
		t[i].value = __atomic_load_n(&tun_values[i], __ATOMIC_RELAXED);
		t[i].source = __atomic_load_n(&tun_source[i], __ATOMIC_RELAXED);
	}
	/* the holds share the mailbox's page: while none was ever set they are zeros there
	 * already, and the page stays untouched */
	bool holds = mailbox_written;
	for (int i = 0; i < LA_NTUNABLES && !holds; i++)
		holds = __atomic_load_n(&tun_holds[i].expires_ns, __ATOMIC_RELAXED) != 0;
	struct la_shm_hold *hd = (struct la_shm_hold *)(seg + OFF_HOLDS);
	for (int i = 0; i < LA_NTUNABLES && holds; i++) {
		hd[i].expires_ns = __atomic_load_n(&tun_holds[i].expires_ns, __ATOMIC_RELAXED);
		hd[i].revert_value = tun_holds[i].revert_value;
		hd[i].revert_source = tun_holds[i].revert_source;
	}
	mailbox_written = holds;
	__atomic_fetch_add(&h->tunables_seq, 1, __ATOMIC_RELEASE);
}

__thread uint8_t shm_is_control __attribute__((tls_model("initial-exec")));
uint32_t shm_own_kicks;

uint64_t shm_control_wake_ns, shm_control_tick_ns;

void shm_kick_control(uint64_t due_ns)
{
	/* seq_cst both ways: either the thread's wait (which compares shm_kicks after it
	 * wrote its deadlines) sees this kick, or this kicker sees that wait's deadlines */
	__atomic_fetch_add(&shm_kicks, 1, __ATOMIC_SEQ_CST);
	/* the control thread kicking itself (its decay pass re-arms decay as the cold caches
	 * it flushes retain pages; a command sets decay_ms) is awake: it reads shm_kicks again
	 * before it sleeps, and a wake would find no one waiting (a futex call in every decay
	 * child of the fork loop) */
	if (shm_is_control) {
		shm_own_kicks++;
		return;
	}
	uint64_t wake = __atomic_load_n(&shm_control_wake_ns, __ATOMIC_SEQ_CST);
	if (!due_ns)
		due_ns = __atomic_load_n(&shm_control_tick_ns, __ATOMIC_SEQ_CST);
	if (wake && wake <= due_ns)
		return;
	la_futex(&shm_kicks, FUTEX_WAKE_PRIVATE, 1, NULL);
}

void shm_wake_control(void)
{
	shm_kick_control(1); /* due at once: before any sleep's end */
}

uint8_t shm_decay_flushing;

void shm_note_retained_slow(void)
{
	if (shm_is_control && shm_decay_flushing)
		return; /* the decay pass's own flush: that pass looks at what it retained */
	if (!__atomic_load_n(&shm_decay_armed, __ATOMIC_RELAXED) && seg) {
		int saved = errno; /* free's large slot hit calls it with errno unsaved */
		__atomic_store_n(&shm_decay_armed, 1, __ATOMIC_RELAXED);
		shm_kick_control(0); /* the armed pass runs at the thread's next tick */
		errno = saved;
	}
}

/* ---- the file ----------------------------------------------------------------------- */

/* Write seg[off, end) to the same offsets of fd. */
/* Read the first `end` bytes of fd's file into dst, up to the file's end (read, not
 * memcpy from the mapping: a page past the end of the file faults, pread stops there);
 * the bytes read. Async-signal-safe. */
static size_t read_range(int fd, char *dst, size_t end)
{
	size_t got = 0;
	while (got < end) {
		ssize_t r = pread(fd, dst + got, end - got, (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	return got;
}

/* Write the bytes of the file's [off, end) from src (src[0] is the byte at off). */
static bool write_range(int fd, const char *src, size_t off, size_t end)
{
	for (size_t done = 0; off + done < end;) {
		ssize_t w = pwrite(fd, src + done, end - off - done, (off_t)(off + done));
		if (w <= 0)
			return false;
		done += (size_t)w;
	}
	return true;
}

/* Is fd's file on tmpfs (write_zeros's question, asked once per file)? */
static bool on_tmpfs(int fd)
{
	struct statfs fs;
	return fstatfs(fd, &fs) == 0 && fs.f_type == TMPFS_MAGIC;
}

/* The same when the bytes are zeros (nothing wrote them): on tmpfs (tmpfs: on_tmpfs) the
 * file's pages are allocated without reading them from memory; elsewhere they are written.
 * Either way a file shorter than end grows to end: the segment's files are made by writing
 * their last range (the mailbox's page, which ends the segment), not by ftruncate. */
static bool write_zeros(int fd, bool tmpfs, const char *src, size_t off, size_t end)
{
	if (tmpfs && fallocate(fd, 0, (off_t)off, (off_t)(end - off)) == 0)
		return true;
	return write_range(fd, src, off, end);
}

/* Map fd's file over the segment's memory. On a file system other than tmpfs a fault that
 * reads a page the file never had (an arena's class statistics past the pages written
 * before the mapping) reads ahead around it, and the next fault maps every cached page
 * near it (fault-around): MADV_RANDOM keeps each fault to its page (tests/unit/footprint.c
 * with two arenas in a run directory on disk: 17 of the segment's pages resident, 3 with
 * it). tmpfs reads nothing ahead. */
static bool seg_tmpfs; /* the file last mapped there is on tmpfs (a forked child's question) */

static bool map_file(int fd, bool tmpfs)
{
	if (mmap(seg_area, SEG_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) !=
	    seg_area)
		return false;
	seg_tmpfs = tmpfs;
	if (!tmpfs)
		madvise(seg_area, SEG_SIZE, MADV_RANDOM);
	return true;
}

static size_t append(char *buf, size_t n, size_t cap, const char *s)
{
	return n + la_strlcpy(buf + n, s, cap - n);
}

/* The identity of the directory open_run_dir opened last (the published file's directory,
 * checked again when the file is removed). */
static dev_t run_dir_dev;
static ino_t run_dir_ino;
static off_t run_dir_size; /* its st_size then (tmpfs: SHM_TMPFS_DIRENT a name, 2 more) */
#define SHM_TMPFS_DIRENT 20

/* Open dir as this process's run directory: the last component no symlink, a directory
 * owned by us with no access for others, all checked on the descriptor. Returns it, or -1
 * with *why (ours == false: it exists but is not ours; *missing: it does not exist). */
static int open_run_dir(const char *dir, const char **why, bool *ours, bool *missing)
{
	*ours = true;
	*missing = false;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		/* a symlink, not a directory, or another user's 0700 directory */
		*ours = e != ELOOP && e != ENOTDIR && e != EACCES && e != EPERM;
		*missing = e == ENOENT;
		*why = e == ELOOP || e == ENOTDIR ? " is not a directory" : NULL;
		if (!*why)
			*why = strerror(e);
		return -1;
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || st.st_uid != os_geteuid() || (st.st_mode & 077) != 0) {
		*ours = false;
		*why = " must be owned by this user with mode 0700";
		close(fd);
		return -1;
	}
	run_dir_dev = st.st_dev;
	run_dir_ino = st.st_ino;
	run_dir_size = st.st_size;
	return fd;
}

static void warn_dir(const char *dir, const char *why)
{
	if (why[0] == ' ')
		la_warn("statistics not published: run directory ", dir, why, (char *)NULL);
	else
		la_warn("statistics not published: run directory ", dir, ": ", why, (char *)NULL);
}

/* The run directory, opened (see open_run_dir): $LIBALLOC_RUN_DIR, else
 * LA_SHM_DEFAULT_RUN_DIR-<uid> (created 0700); when that exists but is not ours (another
 * user created it first), LA_SHM_FALLBACK_RUN_DIR/<uid>, which allocctld provides (a root
 * process creates its own). dir receives the path. -1 after one line on stderr. */
static int run_dir(char *dir, size_t cap)
{
	const char *env = tun_getenv("LIBALLOC_RUN_DIR"), *why = NULL;
	bool ours;
	if (env && *env) {
		size_t len = strlen(env);
		if (len >= cap) { /* never a cut path: that would be another directory */
			char l[24], m[24];
			la_fmt_u64(l, len);
			la_fmt_u64(m, cap - 1);
			la_warn("statistics not published: LIBALLOC_RUN_DIR is ", l,
			        " bytes long; a run directory may have at most ", m, (char *)NULL);
			return -1;
		}
		la_strlcpy(dir, env, cap);
		/* its last component is made when missing (a per-pod directory under a shared
		 * host directory); what exists is checked as it is, never replaced. Opened
		 * first: the mkdir only when missing (a fork loop's every child made the call) */
		bool missing;
		int fd = open_run_dir(dir, &why, &ours, &missing);
		if (fd < 0 && missing) {
			mkdir(dir, 0700);
			fd = open_run_dir(dir, &why, &ours, &missing);
		}
		if (fd < 0)
			warn_dir(dir, why);
		return fd;
	}
	char num[24];
	la_fmt_u64(num, os_getuid());
	size_t n = la_strlcpy(dir, LA_SHM_DEFAULT_RUN_DIR "-", cap);
	append(dir, n, cap, num);
	bool missing;
	int fd = open_run_dir(dir, &why, &ours, &missing);
	if (fd < 0 && missing) {
		if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
			warn_dir(dir, strerror(errno));
			return -1;
		}
		fd = open_run_dir(dir, &why, &ours, &missing);
	}
	if (fd >= 0 || ours) {
		if (fd < 0)
			warn_dir(dir, why);
		return fd;
	}
	/* squatted: the per-uid directory under the root-owned fallback parent */
	char squatted[200];
	la_strlcpy(squatted, dir, sizeof(squatted));
	n = la_strlcpy(dir, LA_SHM_FALLBACK_RUN_DIR "/", cap);
	append(dir, n, cap, num);
	if (os_geteuid() == 0) {
		mkdir(LA_SHM_FALLBACK_RUN_DIR, 0755);
		mkdir(dir, 0700);
	}
	fd = open_run_dir(dir, &why, &ours, &missing);
	if (fd < 0) {
		la_warn("statistics not published: ", squatted,
		        " is not this user's own, and its replacement ", dir,
		        " (provided by allocctld) is not usable", (char *)NULL);
		return -1;
	}
	la_warn("statistics published in ", dir, ": ", squatted, " is not this user's own",
	        (char *)NULL);
	return fd;
}

static uint64_t proc_start_time(void)
{
	char buf[1024];
	if (os_read_small("/proc/self/stat", buf, sizeof(buf)) < 0)
		return 0;
	char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	/* fields after ")": 3 state ... 22 starttime */
	int field = 2;
	for (p++; *p && field < 22; p++)
		if (*p == ' ')
			field++;
	uint64_t v = 0;
	while (*p >= '0' && *p <= '9')
		v = v * 10 + (uint64_t)(*p++ - '0');
	return v;
}

/* The fork's bracket of the clone: CLOCK_BOOTTIME in the parent before it
 * (shm_fork_prepare; 0: none) and in the child after it (shm_fork_child), and the length of
 * the clock tick /proc/<pid>/stat counts a start time in (0: not one that divides a
 * second). */
static uint64_t fork_boot_ns, child_boot_ns, tick_ns;

void shm_fork_prepare(void)
{
	static bool tick_read;
	if (!tick_read) {
		unsigned long hz = getauxval(AT_CLKTCK);
		tick_ns = hz && 1000000000u % hz == 0 ? 1000000000u / hz : 0;
		tick_read = true;
	}
	fork_boot_ns = os_boot_ns();
}

/* A forked child's start time as /proc/self/stat's field 22 reads it (the kernel's
 * start_boottime, taken in the clone, in clock ticks rounded down), without reading /proc
 * (open, read, close: ~3 % of the fork loop's children's CPU): the clone happened between
 * the two readings of CLOCK_BOOTTIME (the same clock), so when both fall in one tick that
 * tick is it. Else /proc: 1-3 forks in 20 in tests/unit/fork.c at load 15, where the
 * bracket is 0.4-0.7 ms, more when the fork is preempted. (A parent that unshared its time
 * namespace puts its children in another whose clocks are offset: their bracket would span
 * the offset, and only an offset below a tick could land in one.) */
static uint64_t fork_start_time(void)
{
	uint64_t before = fork_boot_ns, after = child_boot_ns;
	fork_boot_ns = child_boot_ns = 0;
	if (before && tick_ns && after >= before && after / tick_ns == before / tick_ns)
		return after / tick_ns;
	return proc_start_time();
}

/* The inode of one of this process's namespaces ("pid", "user"); 0 when /proc cannot
 * tell (not mounted). */
static uint64_t ns_inode(const char *which)
{
	char path[32];
	size_t n = la_strlcpy(path, "/proc/thread-self/ns/", sizeof(path));
	la_strlcpy(path + n, which, sizeof(path) - n);
	struct stat st;
	return stat(path, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* What follows the pid in a segment's name: "" in the initial pid namespace (or where it is
 * unknown), else LA_SHM_NS_TAG<inode>, so containers sharing a run directory never take
 * each other's names. */
static void ns_tag(char *buf, size_t cap, uint64_t pidns)
{
	buf[0] = 0;
	if (pidns && pidns != LA_SHM_INIT_PIDNS) {
		char num[24];
		la_fmt_u64(num, pidns);
		append(buf, la_strlcpy(buf, LA_SHM_NS_TAG, cap), cap, num);
	}
}

/* "liballoc.<pid><ns tag>": the stem of the segment's name and of its temporary name. */
static size_t seg_stem(char *buf, size_t cap, pid_t pid, uint64_t pidns)
{
	char num[24], tag[32];
	la_fmt_u64(num, (uint64_t)pid);
	ns_tag(tag, sizeof(tag), pidns);
	size_t n = la_strlcpy(buf, LA_SHM_PREFIX, cap);
	n = append(buf, n, cap, num);
	return append(buf, n, cap, tag);
}

/* Remove a few stale segments of this user (owner gone: their flock is free), so that
 * processes ending with _exit do not litter the run directory when no daemon runs.
 * Bounded work: at most REAP_MAX files are examined per sweep. A process sweeps once,
 * and not at its start as long as the directory holds few files: its control thread
 * sweeps SHM_REAP_AFTER_NS after the start (shm_reap_stale), so that the many short-lived
 * processes (a build, a shell script) pay nothing for it and long-lived ones pay once.
 * The start sweeps itself where there is no control thread, and where stale files may
 * have piled up: a directory that held more than REAP_BACKLOG names, as its size (in the
 * fstat made anyway) tells: tmpfs counts SHM_TMPFS_DIRENT bytes a name and 2 more;
 * elsewhere (ext4's blocks, btrfs's and xfs's name bytes) a directory of more than
 * REAP_BACKLOG_BYTES holds more than ~100 segments' names, and one of ext4 never shrinks:
 * there every start sweeps, as all did before. */
#define REAP_MAX           16
#define REAP_BACKLOG       64
#define REAP_BACKLOG_BYTES 4096
struct reap {
	char own[40]; /* our own segment's name */
	char ns[32];  /* LA_SHM_NS_TAG<our pid namespace>, "" in the initial one */
	int examined;
};

/* Remove dfd's segment `name` if it is a regular file of this user whose lock nobody holds
 * (its owner is gone). Async-signal-safe. */
static void remove_if_stale(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return;
	struct stat st, now;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == os_geteuid() &&
	    flock(fd, LOCK_EX | LOCK_NB) == 0 &&
	    fstatat(dfd, name, &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_ino == st.st_ino &&
	    now.st_dev == st.st_dev)
		unlinkat(dfd, name, 0);
	close(fd);
}

static bool reap_one(void *ctx, int dfd, const char *name)
{
	struct reap *r = ctx;
	size_t len = strlen(name), pl = strlen(LA_SHM_PREFIX), sl = strlen(LA_SHM_SUFFIX);
	if (len <= pl + sl || strncmp(name, LA_SHM_PREFIX, pl) != 0 ||
	    strcmp(name + len - sl, LA_SHM_SUFFIX) != 0 || strcmp(name, r->own) == 0)
		return true;
	/* only segments of processes that are gone: a live pid may be exec'ing and about
	 * to rename its new segment over this name (allocctld judges those). A pid is
	 * looked up only when the name is of our own pid namespace; for the others (a run
	 * directory shared by containers) the free lock below is the whole answer. */
	long pid = la_parse_long(name + pl);
	const char *rest = name + pl + strspn(name + pl, "0123456789");
	bool same_ns = strncmp(rest, r->ns, strlen(r->ns)) == 0 &&
	               strcmp(rest + strlen(r->ns), LA_SHM_SUFFIX) == 0;
	if (pid <= 0 || (same_ns && (kill((pid_t)pid, 0) == 0 || errno != ESRCH)))
		return ++r->examined < REAP_MAX;
	remove_if_stale(dfd, name);
	return ++r->examined < REAP_MAX;
}

static void reap_stale(int dfd, pid_t self, uint64_t pidns)
{
	struct reap r = {.examined = 0};
	size_t n = seg_stem(r.own, sizeof(r.own), self, pidns);
	append(r.own, n, sizeof(r.own), LA_SHM_SUFFIX);
	ns_tag(r.ns, sizeof(r.ns), pidns);
	os_dir_each(dfd, reap_one, &r);
}

/* The published file: its directory's identity and its name there, so that removing it
 * goes through a descriptor of that very directory (never the path again). */
static dev_t seg_dir_dev;
static ino_t seg_dir_ino;
static char seg_dir[200], seg_name[48];
/* The start published and left its sweep of stale segments to the control thread; the
 * run directory held a backlog when shm_prepare_file looked (the start sweeps). */
static bool reap_wanted, start_backlog;

/* A forked child whose segment still holds its published parent's identity (shm_fork_child),
 * whether the parent's control thread ran then, and the child's pid namespace (its
 * parent's unless the parent set another for its children: the child cannot see its
 * parent there, getppid() is 0). */
static bool seg_forked, seg_parent_controlled;
/* This image is a forked child (or a child's child), whatever its parent's name was: its
 * pid is new, so no earlier image of it named a file (remove_earlier_image). An exec
 * starts the new image without it. */
static bool image_forked;
/* The start found no file under its pid's name (the initial pid namespace's) in the run
 * directory it opened for its own: no earlier image of this process named one, and none
 * can be named under that name later but by this image (remove_earlier_image). */
static bool no_earlier_image;
static uint64_t fork_pidns;
/* The pid namespace shm_prepare_file read for the start's temporary name (0: none read):
 * write_identity takes it instead of a second look (a process never changes its own). */
static uint64_t start_pidns;

/* Who the segment belongs to (also written again after a move). A forked child keeps what
 * its parent found where it is the same (the two /proc/self/ns lookups and the readlink
 * were most of a child's publication): the executable; the pid namespace (fork_pidns);
 * the user namespace unless the parent could have changed its own since (only a
 * single-threaded process can: not one whose control thread runs). */
static void write_identity(pid_t pid)
{
	struct la_shm_header *h = shm_header();
	bool forked = seg_forked;
	seg_forked = false;
	h->pid = pid;
	h->pidns_ino = forked ? fork_pidns : start_pidns ? start_pidns : ns_inode("pid");
	start_pidns = 0;
	if (!forked || !seg_parent_controlled)
		h->userns_ino = ns_inode("user");
	h->uid = (uint32_t)os_getuid();
	h->start_time = forked ? fork_start_time() : proc_start_time();
	h->created_ns = os_wall_ns();
	if (forked && h->exe[0])
		return;
	ssize_t el = readlink("/proc/thread-self/exe", h->exe, sizeof(h->exe) - 1);
	h->exe[el > 0 ? el : 0] = 0;
}

#define SHM_DIR_CAP 200 /* a run directory's path */
#define SHM_TMP_CAP 48  /* a segment's temporary name */

/* The file shm_prepare_file (or a forked child's shm_fork_child) made and mapped: its run
 * directory and the file, both open, the directory's path and identity and the file's
 * temporary name there (of prep_pid); -1: none. */
static int prep_dfd = -1, prep_fd = -1;
static pid_t prep_pid; /* the pid the temporary name holds */
/* The prepared file was truncated before it was published: the segment moved to private
 * memory (shm_fault), and shm_publish_file makes a new file of it (a signal handler's
 * write, read by the publishing thread) */
static volatile bool prep_lost;
static dev_t prep_dir_dev;
static ino_t prep_dir_ino;
static char prep_dir[SHM_DIR_CAP], prep_tmp[SHM_TMP_CAP];

/* A publication that failed: one warning (the temporary file could not be created when fd
 * is -1, else it is removed), the directory closed. */
static void publish_failed(int dfd, int fd, const char *dir, const char *tmp)
{
	if (!tmp[0]) /* an unnamed file: nothing to remove */
		la_warn("statistics not published: cannot make a file in ", dir, ": ",
		        strerror(errno), (char *)NULL);
	else
		la_warn("statistics not published: ", fd < 0 ? "cannot create " : "", dir, "/", tmp,
		        ": ", strerror(errno), (char *)NULL);
	if (fd >= 0) {
		if (tmp[0])
			unlinkat(dfd, tmp, 0);
		close(fd);
	}
	close(dfd);
}

/* Create the temporary file tmp in dfd (0600, never through a symlink). One left by a
 * process that had this pid and died half-way through its publication is replaced: the
 * unlink only then (a fork loop's every child made the call). */
static int create_tmp(int dfd, const char *tmp)
{
	int flags = O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW;
	int fd = openat(dfd, tmp, flags, 0600);
	if (fd < 0 && errno == EEXIST && unlinkat(dfd, tmp, 0) == 0)
		fd = openat(dfd, tmp, flags, 0600);
	return fd;
}

/* A forked child whose file could not be made (shm_fork_child said why): no second try. */
static bool fork_unpublished;

/* ---- naming later ------------------------------------------------------------------
 * With a control thread, the start's file and a forked child's are made without a name
 * (O_TMPFILE in the run directory) and mapped as before, so the statistics and the mailbox
 * are in the file from the first allocation; the name (the identity written, the flock,
 * the link into the run directory) comes LIBALLOC_PUBLISH_DELAY later, from the control
 * thread (shm_name_now), or at once when the process is about to change its credentials,
 * root or namespaces (the interposed calls below), while it still may open the directory.
 * A process that ends sooner creates, names and removes nothing there. name_state:
 * NAME_IDLE (nothing to name: named, failed, never to be, or gone), NAME_PENDING,
 * NAME_BUSY (a thread names it: name_tid; others wait on the word). */
#define NAME_IDLE    0u
#define NAME_PENDING 1u
#define NAME_BUSY    2u
static uint32_t name_state;
static pid_t name_tid;
static int64_t name_delay_ms = -1; /* LIBALLOC_PUBLISH_DELAY, read once (-1: not yet) */
static dev_t seg_file_dev;         /* the unnamed file (checked again before the link) */
static ino_t seg_file_ino;

uint64_t shm_publish_delay_ms(void)
{
	int64_t d = __atomic_load_n(&name_delay_ms, __ATOMIC_RELAXED);
	if (d >= 0)
		return (uint64_t)d;
	d = LA_PUBLISH_DELAY_MS;
	const char *env = tun_getenv("LIBALLOC_PUBLISH_DELAY");
	int64_t v;
	if (env &&
	    (la_parse(LA_T_MS, env, &v) != LA_PARSE_OK || v < 0 || v > LA_PUBLISH_DELAY_MAX_MS))
		la_warn("LIBALLOC_PUBLISH_DELAY=", env,
		        ": ignored: not a duration from 0 to 1s (default 50ms)", (char *)NULL);
	else if (env)
		d = v;
	__atomic_store_n(&name_delay_ms, d, __ATOMIC_RELAXED);
	return (uint64_t)d;
}

/* The start's or a forked child's file is made unnamed and named later: there is a control
 * thread to name it (else nothing would) and a delay. */
static bool name_later(void)
{
	return tun_control_enabled() && shm_publish_delay_ms() > 0;
}

bool shm_name_pending(void)
{
	return __atomic_load_n(&name_state, __ATOMIC_ACQUIRE) == NAME_PENDING;
}

uint32_t *shm_name_word(void)
{
	return &name_state;
}

/* An unnamed file in dfd (never through a name: O_TMPFILE), or -1 (the file system has no
 * unnamed files: errno EOPNOTSUPP, EISDIR or EINVAL; the caller makes a named one). */
static int create_unnamed(int dfd)
{
	return openat(dfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
}

/* The temporary file of pid's segment (pid namespace pidns), created in the run directory:
 * its descriptor, the directory's in *dfd and their names in dir and tmp (SHM_DIR_CAP and
 * SHM_TMP_CAP bytes); -1 when there is none (a warning said why when the directory was
 * there). With *unnamed, an unnamed file (tmp ""), else (or where the file system has none:
 * *unnamed is then false) a file under the temporary name. */
static int open_tmp(char *dir, char *tmp, pid_t pid, uint64_t pidns, int *dfd, bool *unnamed)
{
	*dfd = run_dir(dir, SHM_DIR_CAP);
	if (*dfd < 0)
		return -1;
	tmp[0] = 0;
	if (*unnamed) {
		int fd = create_unnamed(*dfd);
		if (fd >= 0)
			return fd;
		*unnamed = false;
	}
	size_t n = seg_stem(tmp, SHM_TMP_CAP, pid, pidns);
	append(tmp, n, SHM_TMP_CAP, ".tmp");
	int fd = create_tmp(*dfd, tmp);
	if (fd < 0)
		publish_failed(*dfd, fd, dir, tmp);
	return fd;
}

/* The end of a preparation of the temporary file fd: kept for shm_publish_file when ok,
 * else removed (one warning). Returns ok. */
static bool end_prepare(bool ok, int dfd, int fd, pid_t pid, const char *dir, const char *tmp)
{
	if (!ok) {
		publish_failed(dfd, fd, dir, tmp);
		return false;
	}
	prep_pid = pid;
	prep_dfd = dfd;
	prep_fd = fd;
	prep_dir_dev = run_dir_dev;
	prep_dir_ino = run_dir_ino;
	la_strlcpy(prep_dir, dir, sizeof(prep_dir));
	la_strlcpy(prep_tmp, tmp, sizeof(prep_tmp));
	return true;
}

bool shm_prepare_file(void)
{
	char dir[SHM_DIR_CAP], tmp[SHM_TMP_CAP];
	int dfd;
	/* the name shm_publish_file gives it: write_identity reads the same namespace */
	pid_t pid = os_getpid();
	bool unnamed = name_later();
	/* (an unnamed file's name is made when it is named: write_identity reads it then) */
	start_pidns = unnamed ? 0 : ns_inode("pid");
	int fd = open_tmp(dir, tmp, pid, start_pidns, &dfd, &unnamed);
	if (fd < 0)
		return false;
	if (unnamed) {
		/* an earlier image's file, looked up here in the directory open anyway: a
		 * process that ends before its name then looks nothing up at its exit where
		 * there was none (four system calls: the directory checked, a copy of its
		 * descriptor, the lookup, the close) */
		char name[sizeof(seg_name)];
		struct stat st;
		int saved = errno;
		append(name, seg_stem(name, sizeof(name), pid, 0), sizeof(name), LA_SHM_SUFFIX);
		no_earlier_image =
		        fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT;
		errno = saved;
	}
	/* the pages the start writes (header .. the first arena blocks) and the mailbox's
	 * exist before they are mapped: a write to a page the file system cannot allocate
	 * would raise SIGBUS, and the handler comes with publishing (sigbus.c). The mailbox's
	 * page ends the file: no ftruncate */
	size_t used = START_USED;
	bool tmpfs = on_tmpfs(fd);
	start_backlog = tmpfs ? run_dir_size / SHM_TMPFS_DIRENT > REAP_BACKLOG + 2
	                      : run_dir_size > REAP_BACKLOG_BYTES;
	/* (where they are written, not allocated: both from the mailbox's page of the area,
	 * zeros: reading an untouched page maps the zero page, a fault, and the mapping
	 * below replaces it; from the first page too, that was two) */
	_Static_assert(OFF_ARENAS + 2 * sizeof(struct la_shm_arena) <= SEG_SIZE - OFF_MAILBOX,
	               "the pages in use at the start come from one page of zeros");
	bool ok = write_zeros(fd, tmpfs, seg_area + OFF_MAILBOX, 0, used) &&
	          write_zeros(fd, tmpfs, seg_area + OFF_MAILBOX, OFF_MAILBOX, SEG_SIZE);
	/* a named file (liballoc.<pid>.tmp) may be truncated from its mapping on: the handler
	 * first (shm_fault moves a prepared mapping too) */
	if (ok && !unnamed)
		sigbus_install_handler();
	ok = ok && map_file(fd, tmpfs);
	return end_prepare(ok, dfd, fd, pid, dir, tmp);
}

/* seg_name ("liballoc.<pid><ns tag>.seg", after write_identity: the tag is the header's),
 * tmp (".tmp" instead, SHM_TMP_CAP bytes) and, when path, seg_path (in dir). */
static void seg_names(const char *dir, pid_t pid, char *tmp, bool path)
{
	size_t n = seg_stem(seg_name, sizeof(seg_name), pid, shm_header()->pidns_ino);
	la_strlcpy(tmp, seg_name, SHM_TMP_CAP);
	append(seg_name, n, sizeof(seg_name), LA_SHM_SUFFIX);
	append(tmp, n, SHM_TMP_CAP, ".tmp");
	if (!path)
		return;
	n = la_strlcpy(seg_path, dir, sizeof(seg_path));
	n = append(seg_path, n, sizeof(seg_path), "/");
	append(seg_path, n, sizeof(seg_path), seg_name);
}

/* The run directory held open from the making of an unnamed file to its naming (-1: none):
 * a process that chdirs or chroots meanwhile still names it there. */
static int name_dfd = -1;

/* The segment is fd's file, made in dir (dir_dev, dir_ino), mapped. */
static void on_file(int fd, pid_t pid, const char *dir, dev_t dir_dev, ino_t dir_ino)
{
	if (seg_fd >= 0)
		close(seg_fd);
	seg_fd = fd;
	seg_pid = pid;
	seg_dir_dev = dir_dev;
	seg_dir_ino = dir_ino;
	la_strlcpy(seg_dir, dir, sizeof(seg_dir));
	seg_on_file = true; /* (the constructor or a forked child: no other thread yet) */
}

void shm_publish_file(void)
{
	char dir[SHM_DIR_CAP], tmp[SHM_TMP_CAP];
	if (!seg)
		return;
	/* made by shm_prepare_file: it is mapped already, and holds what was written; unless a
	 * truncation moved the segment off it (shm_fault): then it goes, and a new file is made
	 * of the segment as a start that allocated before the constructor does */
	if (prep_fd >= 0 && prep_lost) {
		unlinkat(prep_dfd, prep_tmp, 0);
		close(prep_fd);
		close(prep_dfd);
		prep_dfd = prep_fd = -1;
	}
	bool prepared = prep_fd >= 0;
	if (!prepared && fork_unpublished) { /* the child's file failed, and said so */
		fork_unpublished = false;
		return;
	}
	int dfd = prepared ? prep_dfd : run_dir(dir, sizeof(dir));
	if (dfd < 0)
		return;
	dev_t dir_dev = prepared ? prep_dir_dev : run_dir_dev;
	ino_t dir_ino = prepared ? prep_dir_ino : run_dir_ino;
	if (prepared)
		la_strlcpy(dir, prep_dir, sizeof(dir));
	pid_t pid = prepared ? prep_pid : os_getpid();
	struct la_shm_header *h = shm_header();
	bool forked = seg_forked;
	int fd = prep_fd;
	/* named later (prepared: made unnamed, its temporary name ""; else a start that
	 * allocated before the constructor, which copies the segment into a new file) */
	bool unnamed = prepared ? !prep_tmp[0] : name_later();
	tmp[0] = 0;
	if (prepared) {
		la_strlcpy(tmp, prep_tmp, sizeof(tmp));
		prep_dfd = prep_fd = -1;
	} else if (unnamed && (fd = create_unnamed(dfd)) < 0) {
		unnamed = false;
	}
	if (!unnamed) {
		char named[SHM_TMP_CAP];
		write_identity(pid);
		seg_names(dir, pid, named, true);
		if (!prepared) {
			la_strlcpy(tmp, named, sizeof(tmp));
			fd = create_tmp(dfd, tmp);
		}
	}
	if (fd < 0) {
		publish_failed(dfd, fd, dir, tmp);
		seg_path[0] = 0;
		return;
	}
	/* write what is in use now (header .. live arena blocks and the next arena's block, as
	 * START_USED: not that arena's class statistics, a page of zeros the start never
	 * touched, which the write read (a fault) and the file then held; the mailbox); the
	 * rest stays sparse. Both are then in the page cache, so faulting them in reads nothing
	 * around them: on a disk file system a fault that reads pulls in its neighbours
	 * (read-around), and the kernel then maps every cached page near each fault. The
	 * mailbox's page, zeros nothing wrote yet, is allocated on tmpfs (write_zeros). A
	 * prepared file is all that already, mapped. */
	size_t used = ARENAS_END(h->arena_count) + sizeof(struct la_shm_arena);
	if (used > ARENAS_END(LA_ARENAS_MAX))
		used = ARENAS_END(LA_ARENAS_MAX);
	bool tmpfs = !prepared && on_tmpfs(fd);
	bool ok = prepared ||
	          (write_range(fd, seg, 0, used) &&
	           (mailbox_written
	                    ? write_range(fd, seg + OFF_MAILBOX, OFF_MAILBOX, SEG_SIZE)
	                    : write_zeros(fd, tmpfs, seg + OFF_MAILBOX, OFF_MAILBOX, SEG_SIZE)) &&
	           map_file(fd, tmpfs));
	struct stat f;
	if (ok && unnamed) {
		ok = fstat(fd, &f) == 0;
		if (!ok) {
			publish_failed(dfd, fd, dir, tmp);
			return;
		}
		/* mapped: the name comes later (shm_name_now) */
		on_file(fd, pid, dir, dir_dev, dir_ino);
		seg_file_dev = f.st_dev;
		seg_file_ino = f.st_ino;
		/* the start's sweep as below; this one needs the name the file will have */
		if (!forked && (!prepared || start_backlog)) {
			start_pidns = ns_inode("pid");
			reap_stale(dfd, pid, start_pidns);
		} else if (!forked) {
			reap_wanted = true;
		}
		start_backlog = false;
		if (name_dfd >= 0)
			close(name_dfd);
		name_dfd = dfd;
		__atomic_store_n(&name_state, NAME_PENDING, __ATOMIC_RELEASE);
		return;
	}
	if (ok)
		ok = flock(fd, LOCK_SH | LOCK_NB) == 0;
	/* the handler before the name: from the rename on, another process may truncate the
	 * file, and a write past its end would kill this one (name_file) */
	if (ok)
		sigbus_install();
	if (ok)
		ok = syscall(SYS_renameat, dfd, tmp, dfd, seg_name) == 0;
	if (ok && prepared && prep_lost) { /* truncated meanwhile: the segment is not on it */
		la_strlcpy(tmp, seg_name, sizeof(tmp));
		ok = false;
	}
	if (!ok) {
		publish_failed(dfd, fd, dir, tmp);
		seg_path[0] = 0;
		return;
	}
	on_file(fd, pid, dir, dir_dev, dir_ino);
	/* a forked child does not: its parent did (or will). (prepared: shm_prepare_file
	 * judged the backlog; else a start that allocated before the constructor sweeps) */
	if (!forked && (!prepared || start_backlog || !tun_control_enabled()))
		reap_stale(dfd, pid, h->pidns_ino);
	else if (!forked)
		reap_wanted = true;
	start_backlog = false;
	close(dfd);
}

/* Link fd's unnamed file into dfd as name: through /proc/thread-self/fd (this thread's
 * own: /proc/self is the main thread's, whose descriptors read as missing once it left
 * by pthread_exit), else through the descriptor itself (AT_EMPTY_PATH: root, or a kernel
 * that lets the opener do it). */
static bool link_unnamed(int fd, int dfd, const char *name)
{
	char path[48];
	size_t n = la_strlcpy(path, "/proc/thread-self/fd/", sizeof(path));
	la_fmt_u64(path + n, (uint64_t)fd);
	if (linkat(AT_FDCWD, path, dfd, name, AT_SYMLINK_FOLLOW) == 0)
		return true;
	if (errno != ENOENT)
		return false;
	return linkat(fd, "", dfd, name, AT_EMPTY_PATH) == 0;
}

/* The run directory, held open after the file was named just before the process changed
 * its credentials, root or namespaces (-1: none): the removal at exit then still finds it
 * (a worker that dropped to `nobody` cannot open root's 0700 directory again). */
static int kept_dfd = -1;

/* dfd kept as kept_dfd, or closed if a directory is kept already (another thread's chroot,
 * unshare or setns kept it first). */
static void keep_or_close(int dfd)
{
	int none = -1;
	if (!__atomic_compare_exchange_n(&kept_dfd, &none, dfd, false, __ATOMIC_ACQ_REL,
	                                 __ATOMIC_ACQUIRE))
		close(dfd);
}

/* Is fd the directory the segment was published in (the same device and inode as then)? */
static bool is_seg_dir(int fd)
{
	struct stat d;
	return fstat(fd, &d) == 0 && d.st_dev == seg_dir_dev && d.st_ino == seg_dir_ino;
}

/* The very directory the segment was published in, opened (by its path, else a copy of
 * kept_dfd); -1 if it cannot be or another took its name. Async-signal-safe. */
static int open_seg_dir(void)
{
	int dfd = open(seg_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd >= 0 && !is_seg_dir(dfd)) {
		close(dfd);
		dfd = -1;
	}
	if (dfd < 0 && kept_dfd >= 0 && is_seg_dir(kept_dfd))
		dfd = fcntl(kept_dfd, F_DUPFD_CLOEXEC, 0);
	return dfd;
}

/* The segment's file opened again through its mapping (/proc/self/map_files/START-END),
 * checked to be the unnamed file; -1 if it cannot be. */
static int reopen_mapped(void)
{
	char path[64];
	size_t n = la_strlcpy(path, "/proc/self/map_files/", sizeof(path));
	n += la_fmt_base(path + n, (uint64_t)(uintptr_t)seg, 16);
	path[n++] = '-';
	la_fmt_base(path + n, (uint64_t)(uintptr_t)(seg + SEG_SIZE), 16);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	struct stat f;
	if (fd >= 0 &&
	    (fstat(fd, &f) != 0 || f.st_dev != seg_file_dev || f.st_ino != seg_file_ino)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* Is fd the segment's file? (name_file's, out of its frame: below) */
static LA_NOINLINE bool is_seg_file(int fd)
{
	struct stat f;
	return fstat(fd, &f) == 0 && f.st_dev == seg_file_dev && f.st_ino == seg_file_ino;
}

/* The segment's path in seg_path, its first byte last: the program's threads may read it
 * (name_file's last step, out of its frame: below) */
static LA_NOINLINE void publish_path(void)
{
	char path[sizeof(seg_path)];
	size_t n = la_strlcpy(path, seg_dir, sizeof(path));
	n = append(path, n, sizeof(path), "/");
	append(path, n, sizeof(path), seg_name);
	memcpy(seg_path + 1, path + 1, sizeof(seg_path) - 1);
	__atomic_store_n(&seg_path[0], path[0], __ATOMIC_RELEASE);
}

/* Name the unnamed file (name_state NAME_BUSY: this thread alone): its identity written,
 * locked, linked under its name (over an earlier image's after an exec, by a rename, as a
 * start's rename did). The directory is the one it was made in; the descriptor must still
 * be that file's, or the mapping's file must open again (a program that closed it, e.g. by
 * closefrom, and may not open map_files gets nothing named: the process runs on
 * unpublished, with one line). True when it is named: the caller installs the SIGBUS
 * handler then, out of this frame. The control thread runs it 50 ms into every process that
 * lives that long: its frame is kept small (the stat buffer and the path's are its helpers'),
 * as that path (with write_identity's read of /proc/self/stat, or the handler's dlsym
 * lookups, ~1.2 KiB of ld.so's frames, below it) was the deepest its start went, one page
 * of its stack more (control.c, CONTROL_STACK). */
static LA_NOINLINE bool name_file(bool keep)
{
	char tmp[SHM_TMP_CAP];
	int dfd = name_dfd;
	name_dfd = -1;
	if (dfd >= 0 && !is_seg_dir(dfd))
		dfd = -1; /* not ours any more (closed by the program and reused) */
	if (dfd < 0)
		dfd = open_seg_dir();
	if (dfd < 0) {
		la_warn("statistics not published: run directory ", seg_dir,
		        ": cannot be opened again", (char *)NULL);
		return false;
	}
	pid_t pid = seg_pid;
	write_identity(pid);
	seg_names(seg_dir, pid, tmp, false);
	bool on = __atomic_load_n(&seg_on_file, __ATOMIC_ACQUIRE); /* (a fault moves it) */
	bool ok = on && seg_fd >= 0 && is_seg_file(seg_fd);
	if (!ok && on) {
		/* the program closed it (closefrom: sshd does at its start): the mapping holds the
		 * file still, and /proc/self/map_files opens it again where the process may
		 * (CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE: a root daemon). The old number is the
		 * program's now: not closed */
		int fd = reopen_mapped();
		ok = fd >= 0;
		if (ok)
			seg_fd = fd;
	}
	if (!ok)
		errno = EBADF;
	if (ok)
		ok = flock(seg_fd, LOCK_SH | LOCK_NB) == 0;
	/* liballoc's SIGBUS handler before the name: once the file has it, another process may
	 * truncate it, and the next write past its end (this thread's or another's) kills the
	 * process unless the handler is in place (it was installed after the link: a process
	 * whose file was truncated as it was named died of SIGBUS, 3 of 300 runs of
	 * tests/helpers/sigbus at load 17; tests/e2e/sigbus.bats, libtruncshim.so) */
	if (ok)
		sigbus_install();
	bool renamed = false;
	if (ok && !link_unnamed(seg_fd, dfd, seg_name)) {
		/* the name is taken: an earlier image's (exec) or a dead process's */
		ok = errno == EEXIST;
		if (ok && !link_unnamed(seg_fd, dfd, tmp))
			ok = errno == EEXIST && unlinkat(dfd, tmp, 0) == 0 &&
			     link_unnamed(seg_fd, dfd, tmp);
		if (ok)
			ok = syscall(SYS_renameat, dfd, tmp, dfd, seg_name) == 0;
		renamed = true;
	}
	if (!ok) {
		la_warn("statistics not published: ", seg_dir, "/", renamed ? tmp : seg_name, ": ",
		        strerror(errno), (char *)NULL);
		if (renamed)
			unlinkat(dfd, tmp, 0);
		close(dfd);
		return false;
	}
	if (!__atomic_load_n(&seg_on_file, __ATOMIC_ACQUIRE)) {
		/* truncated the moment it was named, and this thread's write past its end moved
		 * the segment to private memory meanwhile (shm_fault; another thread's fault waits
		 * for the name, then removes it): the name goes, nothing is published */
		unlinkat(dfd, seg_name, 0);
		close(dfd);
		return false;
	}
	publish_path();
	if (keep)
		keep_or_close(dfd);
	else
		close(dfd);
	return true;
}

/* Wait while another thread names the file (NAME_BUSY); false when this thread is the one
 * (a signal handler that interrupted it). Async-signal-safe. */
static bool name_wait_busy(uint32_t *st)
{
	while (*st == NAME_BUSY) {
		if (__atomic_load_n(&name_tid, __ATOMIC_RELAXED) == (pid_t)la_self())
			return false;
		la_futex(&name_state, FUTEX_WAIT_PRIVATE, NAME_BUSY, NULL);
		*st = __atomic_load_n(&name_state, __ATOMIC_ACQUIRE);
	}
	return true;
}

void shm_name_now(bool keep)
{
	uint32_t st = __atomic_load_n(&name_state, __ATOMIC_ACQUIRE);
	for (;;) {
		if (!name_wait_busy(&st) || st == NAME_IDLE)
			return;
		if (__atomic_compare_exchange_n(&name_state, &st, NAME_BUSY, false,
		                                __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			break;
	}
	int e = errno;
	__atomic_store_n(&name_tid, (pid_t)la_self(), __ATOMIC_RELAXED); /* (cached: lock.h) */
	name_file(keep); /* (which installs the SIGBUS handler before the name) */
	__atomic_store_n(&name_tid, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&name_state, NAME_IDLE, __ATOMIC_RELEASE);
	la_futex(&name_state, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL);
	errno = e;
}

void shm_reap_stale(void)
{
	if (!reap_wanted)
		return;
	reap_wanted = false;
	/* (whether the segment is still published does not matter: the sweep never takes
	 * this pid's name) */
	int dfd = open_seg_dir();
	if (dfd < 0)
		return;
	reap_stale(dfd, seg_pid, shm_header()->pidns_ino);
	close(dfd);
}

bool shm_reap_pending(void)
{
	return reap_wanted;
}

/* ---- other allocators ------------------------------------------------------------ */

static const struct {
	uint32_t bit;
	const char *name, *lib;
	size_t len; /* strlen(lib) */
} foreign[] = {
#define SHM_X_FOREIGN(name, bit, lib) {bit, #name, lib, sizeof(lib) - 1},
        LA_FOREIGN(SHM_X_FOREIGN)
#undef SHM_X_FOREIGN
};

/* Every loaded object, at the start and 4 times after each dlopen: a name that does not
 * start "lib" is no allocator's, and the fourth byte tells the others apart before a call
 * (CPython test_dict, ~12 objects a look: 236 -> ~73 instructions an object, strrchr's 28
 * of them; libc's strlen and strncmp were called for each name of the table) */
static int foreign_one(struct dl_phdr_info *info, size_t size, void *ctx)
{
	(void)size;
	const char *path = info->dlpi_name, *base = path ? strrchr(path, '/') : NULL;
	base = base ? base + 1 : path;
	if (!base || base[0] != 'l' || base[1] != 'i' || base[2] != 'b')
		return 0;
	for (size_t i = 0; i < sizeof(foreign) / sizeof(foreign[0]); i++) {
		if (base[3] != foreign[i].lib[3] ||
		    strncmp(base, foreign[i].lib, foreign[i].len) != 0 ||
		    (*(uint32_t *)ctx & foreign[i].bit))
			continue;
		*(uint32_t *)ctx |= foreign[i].bit;
		la_warn("this process also maps ", path, ": liballoc serves its malloc, so ",
		        foreign[i].name,
		        "'s own statistics and controls (a program's allocator figures, e.g. "
		        "redis INFO memory and MEMORY PURGE) no longer describe its memory",
		        (char *)NULL);
	}
	return 0;
}

void shm_detect_foreign(void)
{
	/* what is known already is not said again (a look after a dlopen, a forked child) */
	uint32_t known = seg ? shm_header()->foreign_allocators : 0, found = known;
	dl_iterate_phdr(foreign_one, &found);
	if (seg && found != known)
		shm_header()->foreign_allocators = found;
}

uint32_t shm_dlopens;

#ifndef LA_PREFIX
/* A library dlopen'ed after start may be another allocator: dlopen counts the call and
 * wakes the control thread, which looks again once the loading is over (control.c), then
 * goes on to the program's own dlopen by a tail jump. The jump matters: the loader takes
 * the caller from the return address, and resolves a $ORIGIN in the name and searches the
 * caller's RUNPATH by it; a call from here would make liballoc the caller. */
typedef void *dlopen_fn(const char *, int);
static dlopen_fn *next_dlopen;

/* The program's dlopen, after counting the call (dlopen's first half, in C). */
__attribute__((visibility("hidden"), used)) dlopen_fn *la_dlopen_prepare(void);
dlopen_fn *la_dlopen_prepare(void)
{
	dlopen_fn *f = __atomic_load_n(&next_dlopen, __ATOMIC_ACQUIRE);
	if (!f) {
		f = (dlopen_fn *)dlsym(RTLD_NEXT, "dlopen");
		__atomic_store_n(&next_dlopen, f, __ATOMIC_RELEASE);
	}
	__atomic_fetch_add(&shm_dlopens, 1, __ATOMIC_RELEASE);
	if (seg)
		shm_wake_control();
	return f;
}

#if defined(__x86_64__)
/* the arguments kept around the call (the stack 16-byte aligned at it), then the jump */
__asm__(".pushsection .text.dlopen, \"ax\"\n"
        ".globl dlopen\n"
        ".type dlopen, @function\n"
        "dlopen:\n"
        "	.cfi_startproc\n"
        "	endbr64\n"
        "	push %rdi\n"
        "	.cfi_adjust_cfa_offset 8\n"
        "	push %rsi\n"
        "	.cfi_adjust_cfa_offset 8\n"
        "	sub $8, %rsp\n"
        "	.cfi_adjust_cfa_offset 8\n"
        "	call la_dlopen_prepare\n"
        "	add $8, %rsp\n"
        "	.cfi_adjust_cfa_offset -8\n"
        "	pop %rsi\n"
        "	.cfi_adjust_cfa_offset -8\n"
        "	pop %rdi\n"
        "	.cfi_adjust_cfa_offset -8\n"
        "	jmp *%rax\n"
        "	.cfi_endproc\n"
        ".size dlopen, .-dlopen\n"
        ".popsection\n");
#elif defined(__aarch64__)
__asm__(".pushsection .text.dlopen, \"ax\"\n"
        ".globl dlopen\n"
        ".type dlopen, %function\n"
        "dlopen:\n"
        "	.cfi_startproc\n"
        "	stp x29, x30, [sp, -32]!\n"
        "	.cfi_def_cfa_offset 32\n"
        "	.cfi_offset 29, -32\n"
        "	.cfi_offset 30, -24\n"
        "	mov x29, sp\n"
        "	stp x0, x1, [sp, 16]\n"
        "	bl la_dlopen_prepare\n"
        "	mov x16, x0\n"
        "	ldp x0, x1, [sp, 16]\n"
        "	ldp x29, x30, [sp], 32\n"
        "	.cfi_def_cfa_offset 0\n"
        "	br x16\n"
        "	.cfi_endproc\n"
        ".size dlopen, .-dlopen\n"
        ".popsection\n");
#endif /* elsewhere dlopen is not interposed: libraries loaded later are not looked at */
#endif

/* ---- the file truncated under us --------------------------------------------------------
 * Anyone with the process's uid can truncate its segment file; a write to a page past the
 * new end then faults with SIGBUS (sigbus.c). The segment moves to private anonymous
 * memory at the same address, with what the file still holds (the truncation zeroed the
 * rest, so the statistics restart from what was left), the layout and identity written
 * again; the file is unpublished and one line says why; the faulting write is retried
 * there. Async-signal-safe: system calls and memcpy only. Threads that fault meanwhile
 * wait for the first one's move. */
static bool move_to_private_memory(int fd, pid_t pid)
{
	char *copy =
	        mmap(NULL, SEG_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (copy == MAP_FAILED)
		return false;
	size_t got = read_range(fd, copy, SEG_SIZE);
	if (mmap(seg, SEG_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
	         0) != seg) {
		munmap(copy, SEG_SIZE);
		return false;
	}
	memcpy(seg, copy, got);
	munmap(copy, SEG_SIZE);
	/* (atomic: the naming and an arena's set-up read it without seg_moving) */
	__atomic_store_n(&seg_on_file, false, __ATOMIC_RELEASE);
	write_layout();
	write_identity(pid);
	shm_header()->arena_count = __atomic_load_n(&seg_arena_count, __ATOMIC_RELAXED);
	shm_publish_tunables();
	return true;
}

static void move_published(void)
{
	if (!move_to_private_memory(seg_fd, seg_pid))
		return;

	char size[24], path[sizeof(seg_path)];
	struct stat st;
	la_fmt_u64(size, fstat(seg_fd, &st) == 0 ? (uint64_t)st.st_size : 0);
	la_strlcpy(path, seg_path[0] ? seg_path : "the segment", sizeof(path));
	/* the name goes if it is still our file (a forked child faulting on its parent's file
	 * before it has its own leaves the parent's name alone) */
	shm_unpublish();
	la_warn("statistics no longer published: ", path, " was truncated to ", size,
	        " bytes by another process; they are kept in private memory", (char *)NULL);
	close(seg_fd);
	seg_fd = -1;
	__atomic_store_n(&seg_path[0], 0, __ATOMIC_RELAXED); /* (as in shm_unpublish) */
}

bool shm_fault(const void *addr)
{
	const char *p = addr;
	if (!seg || p < seg || p >= seg + SEG_SIZE)
		return false;
	while (__atomic_exchange_n(&seg_moving, 1, __ATOMIC_ACQUIRE))
		syscall(SYS_sched_yield);
	bool moved = !seg_on_file && (prep_fd < 0 || prep_lost);
	if (!moved && !seg_on_file) { /* the prepared file, not published yet */
		moved = prep_lost = move_to_private_memory(prep_fd, prep_pid);
		if (moved) /* (else the fault is the program's: nothing was made) */
			la_warn("statistics: ", prep_dir, "/", prep_tmp,
			        " was truncated before it was published; a new file is made",
			        (char *)NULL);
	} else if (!moved && seg_fd >= 0) {
		move_published();
		moved = !seg_on_file;
	}
	__atomic_store_n(&seg_moving, 0, __ATOMIC_RELEASE);
	return moved;
}

const char *shm_path(void)
{
	return seg_path;
}

/* The process ends before its file was named (it lived less than LIBALLOC_PUBLISH_DELAY),
 * and it is not a forked child (whose pid is new, whether or not its parent was named then:
 * the fork loop's children of a parent younger than the delay looked the name up at their
 * exit, five system calls each): an earlier image of this process, the
 * one that exec'd it, may have named its file under the name this image's would have
 * taken over (name_file renames over it). Its lock went with that image (close-on-exec):
 * the file is stale, and would stay until some process's sweep (a second after its start:
 * a bash that forked, lived past the delay on a busy machine and exec'd a program that
 * ended sooner left a stale segment with exe=/usr/bin/bash). Removed here if no one holds
 * its lock. The name looked at is the initial pid namespace's unless the namespace was
 * read already (reading it is a /proc lookup the short-lived process otherwise never
 * makes): a file of another namespace's process of that pid is removed only if stale
 * too, as the sweep does (reap_one). Async-signal-safe. */
static void remove_earlier_image(void)
{
	/* (the start looked under the initial namespace's name: a name of another one,
	 * read since, is looked up as before) */
	bool untagged = !start_pidns || start_pidns == LA_SHM_INIT_PIDNS;
	if (image_forked || !seg_dir[0] || (no_earlier_image && untagged))
		return;
	int dfd = name_dfd >= 0 && is_seg_dir(name_dfd) ? fcntl(name_dfd, F_DUPFD_CLOEXEC, 0)
	                                                : open_seg_dir();
	if (dfd < 0)
		return;
	char name[sizeof(seg_name)];
	size_t n = seg_stem(name, sizeof(name), seg_pid, start_pidns);
	append(name, n, sizeof(name), LA_SHM_SUFFIX);
	remove_if_stale(dfd, name);
	close(dfd);
}

void shm_unpublish(void)
{
	uint32_t st = __atomic_load_n(&name_state, __ATOMIC_ACQUIRE);
	if ((st == NAME_IDLE && !seg_path[0]) || seg_pid != os_getpid())
		return; /* nothing named, or not ours (a vfork child shares our memory) */
	/* a name not given yet is never given now; one being given is waited for (unless
	 * this thread gives it: a signal handler's _exit) */
	st = NAME_PENDING;
	if (__atomic_compare_exchange_n(&name_state, &st, NAME_IDLE, false, __ATOMIC_ACQ_REL,
	                                __ATOMIC_ACQUIRE)) {
		remove_earlier_image();
		return;
	}
	name_wait_busy(&st);
	if (!seg_path[0])
		return;
	/* (atomic: other threads read it without a lock, shm_set_arena_count, keep_seg_dir) */
	__atomic_store_n(&seg_path[0], 0, __ATOMIC_RELAXED);
	/* only our own file in the very directory we published in */
	int dfd = open_seg_dir();
	if (dfd < 0)
		return;
	struct stat f, mine;
	if (seg_fd >= 0 && fstat(seg_fd, &mine) == 0 &&
	    fstatat(dfd, seg_name, &f, AT_SYMLINK_NOFOLLOW) == 0 && f.st_dev == mine.st_dev &&
	    f.st_ino == mine.st_ino)
		unlinkat(dfd, seg_name, 0);
	close(dfd);
}

#ifndef LA_PREFIX
/* Programs that end with _exit (dash always does) skip destructors: remove the segment
 * here too. Only the process that published it does (a vfork child has another pid);
 * everything used is async-signal-safe. */
LA_EXPORT void _exit(int status)
{
	shm_unpublish();
	syscall(SYS_exit_group, status);
	__builtin_unreachable();
}

LA_EXPORT void _Exit(int status)
{
	_exit(status);
}

/* The run directory kept open (kept_dfd) for a file named before the process changes root
 * or namespaces: the control thread may have named it (after the publish delay) without
 * keeping the directory, and after a chroot the removal at exit would not find it by its
 * path: the file was left behind for the next sweep. */
static void keep_seg_dir(void)
{
	if (__atomic_load_n(&kept_dfd, __ATOMIC_ACQUIRE) >= 0 ||
	    !__atomic_load_n(&seg_path[0], __ATOMIC_ACQUIRE))
		return; /* kept already, or nothing named to remove */
	int dfd = open_seg_dir();
	if (dfd >= 0)
		keep_or_close(dfd);
}

/* A process about to change its credentials, root or namespaces names its segment's file
 * first (shm_name_now), while it may still open its run directory: a worker that drops to
 * `user nobody` after the fork could not open root's 0700 directory any more, one that
 * chroots or enters other namespaces would not find it (those keep the directory open for
 * the removal at exit: keep). Then the program's call, libc's (its set*id calls change
 * every thread). A raw system call is not seen. */
#define SHM_NAME_FIRST(fn, keep, params, args)                                           \
	LA_EXPORT int fn params                                                          \
	{                                                                                \
		static int(*next) params;                                                \
		int(*f) params = __atomic_load_n(&next, __ATOMIC_ACQUIRE);               \
		if (!f) {                                                                \
			f = (int(*) params)dlsym(RTLD_NEXT, #fn);                        \
			__atomic_store_n(&next, f, __ATOMIC_RELEASE);                    \
		}                                                                        \
		if (seg_pid == os_getpid()) { /* (not a vfork child's) */                \
			if (__atomic_load_n(&name_state, __ATOMIC_ACQUIRE) != NAME_IDLE) \
				shm_name_now(keep);                                      \
			if (keep)                                                        \
				keep_seg_dir();                                          \
		}                                                                        \
		if (!f) {                                                                \
			errno = ENOSYS;                                                  \
			return -1;                                                       \
		}                                                                        \
		return f args;                                                           \
	}
SHM_NAME_FIRST(setuid, false, (uid_t u), (u))
SHM_NAME_FIRST(seteuid, false, (uid_t u), (u))
SHM_NAME_FIRST(setreuid, false, (uid_t r, uid_t e), (r, e))
SHM_NAME_FIRST(setresuid, false, (uid_t r, uid_t e, uid_t s), (r, e, s))
SHM_NAME_FIRST(setgid, false, (gid_t g), (g))
SHM_NAME_FIRST(setegid, false, (gid_t g), (g))
SHM_NAME_FIRST(setregid, false, (gid_t r, gid_t e), (r, e))
SHM_NAME_FIRST(setresgid, false, (gid_t r, gid_t e, gid_t s), (r, e, s))
SHM_NAME_FIRST(setgroups, false, (size_t n, const gid_t *list), (n, list))
SHM_NAME_FIRST(initgroups, false, (const char *user, gid_t g), (user, g))
SHM_NAME_FIRST(chroot, true, (const char *path), (path))
SHM_NAME_FIRST(unshare, true, (int flags), (flags))
SHM_NAME_FIRST(setns, true, (int fd, int type), (fd, type))
#undef SHM_NAME_FIRST
#endif

/* Zeros to write from where a file system has no cheaper way (write_zeros): a forked
 * child's mailbox page, whose parent's mapping is not zeros. Read only there (untouched
 * memory reads as the zero page). */
LA_BIG_BSS static char zero_page[LA_SHM_PAGE] __attribute__((aligned(4096)));

/* The statistics as they were at the clone. A published segment is a shared file, which
 * the parent goes on writing after the clone (its other threads at once, its forking
 * thread once its handlers unlock the arenas), and which the child copies only in its own
 * handler (shm_fork_child): it got counters no state of its own matched, and its gauges
 * went below zero (forkfree 400 4 plain: free_resident_bytes after the child's first trim
 * or decay pass in 117-177 of 400 children, cached_bytes in 31-38 at the child's start).
 * The parent's prepare handler, with every arena locked, copies them into private memory
 * that the clone copies; the child writes that over what it read from the file. The
 * classes, the process block and the arena blocks: up to two arenas a part of one page.
 * The header and tunables before them too (fork_image: the segment's pages in use, from
 * its first byte; they end on the page the statistics alone took, 896 bytes more): the
 * child's file is written from that memory, not copied from the parent's file. */
LA_BIG_BSS static unsigned char fork_image[OFF_MAILBOX] __attribute__((aligned(LA_SHM_PAGE)));
static size_t fork_image_len; /* 0: none taken (an unpublished segment: the clone's copy) */
/* The header's fields the child reads before it moves to a file of its own, read here too:
 * the fork copies no page-table entry of the parent's shared file, so the child's read of
 * its header faulted that page in (with the pages around it) just before the child mapped
 * its own file over it: a fault in every forked child of a published process. */
static bool fork_parent_controlled, fork_named;
static uint64_t fork_parent_pidns;

/* A forked child's own file, made before anything writes the segment (still its parent's
 * file, mapped shared): created in the run directory, given the pages in use (header ..
 * the last arena block, written from the parent's copy at the fork, fork_image) and the
 * mailbox's page (zeros), and mapped over the segment;
 * shm_publish_file names it. The child used to map anonymous memory there and read the
 * pages into it, then write them to its file and map that: two mappings of the segment
 * and a read, and two pages faulted in and dropped. False: no file (a warning said why)
 * or it could not be mapped. */
static bool fork_file(size_t used, bool image)
{
	char dir[SHM_DIR_CAP], tmp[SHM_TMP_CAP];
	int dfd;
	pid_t pid = os_getpid();
	bool unnamed = name_later(); /* named by its control thread, later */
	int fd = open_tmp(dir, tmp, pid, fork_pidns, &dfd, &unnamed);
	if (fd < 0)
		return false;
	loff_t from = 0, to = 0;
	/* the pages in use from the prepare handler's copy (fork_image), one pwrite: the
	 * kernel's copy of the parent's file is a splice through a pipe, ~1.5x a pwrite's time
	 * (4 KiB into a new tmpfs file). Unless the parent's file was named between the copy
	 * and the clone: its header then holds the identity the child keeps (seg_forked), the
	 * copy's not (shm_fork_child: image). (no in-kernel copy here, an old kernel or two
	 * file systems: from the mapping; a copy cut short by a file truncated meanwhile
	 * leaves zeros) */
	/* a file in the parent's file's directory (its file system too): the parent's answer */
	bool tmpfs = run_dir_dev == seg_dir_dev ? seg_tmpfs : on_tmpfs(fd);
	bool ok = (image ? write_range(fd, (const char *)fork_image, 0, fork_image_len)
	                 : copy_file_range(seg_fd, &from, fd, &to, used, 0) >= 0 ||
	                           write_range(fd, seg, 0, used)) &&
	          write_zeros(fd, tmpfs, zero_page, OFF_MAILBOX, SEG_SIZE) && map_file(fd, tmpfs);
	/* The pages copied are in the page cache: a read fault maps the cached pages around it
	 * (16 pages: from the mapping's start, else the 64 KiB-aligned window of the address),
	 * writable on tmpfs, which tracks no dirty pages; a write fault maps its page alone.
	 * The handler writes every one of them next (shm_fork_child: each arena block's
	 * seqlock, and the statistics as they were at the clone unless they came with the
	 * copy): a fault a page (~2 KiB an arena) without the reads. A read of
	 * each page in turn faults only where the last fault's window ended (the child of a
	 * process with 61 arenas, 31 pages: 131.8 faults, 145.0 with a read of the first page
	 * only, 159.9 with none). A file elsewhere is advised MADV_RANDOM (map_file). */
	if (ok && tmpfs)
		for (size_t off = 0; off < used; off += LA_SHM_PAGE)
			(void)((volatile const char *)seg_area)[off];
	return end_prepare(ok, dfd, fd, pid, dir, tmp);
}

void shm_fork_snapshot(void)
{
	fork_image_len = 0;
	fork_named = false;
	/* (the control thread writes it at its stop; read here in private memory too, where
	 * the child's copy would hold the same) */
	fork_parent_controlled = __atomic_load_n(&shm_header()->control_state, __ATOMIC_RELAXED) ==
	                         LA_CONTROL_RUNNING;
	if (!__atomic_load_n(&seg_on_file, __ATOMIC_ACQUIRE)) /* (a fault on another thread) */
		return; /* private memory: the clone's copy is the child's own */
	/* the pid namespace is written at the naming (write_identity), before the path's first
	 * byte: a file named after this snapshot (by the control thread) is read in the child,
	 * as before */
	fork_named = __atomic_load_n(&seg_path[0], __ATOMIC_ACQUIRE) != 0;
	fork_parent_pidns = fork_named ? shm_header()->pidns_ino : 0;
	uint32_t n = __atomic_load_n(&seg_arena_count, __ATOMIC_RELAXED);
	size_t len = ARENAS_END(n);
	memcpy(fork_image, seg, len);
	fork_image_len = len;
}

void shm_fork_child(void)
{
	child_boot_ns = fork_boot_ns ? os_boot_ns() : 0; /* first: the clone's upper bound */
	/* A published segment is the parent's file: the child moves to a file of its own
	 * (fork_file) or, failing that, to private memory at the same address, before
	 * anything is written, with only the pages in use (header .. the last arena block)
	 * read from the file; the others were never written, and the mailbox stays zeros.
	 * Reading all of it faulted in 76 pages per child. Read from the file, not copied
	 * through a buffer of its own: a child without room for one (RLIMIT_AS) stayed on its
	 * parent's file and wrote its pid, its thread count and a cleared mailbox there. An
	 * unpublished segment is private memory the fork copied. */
	/* (the arena count at the clone: the header's is the parent's file's) */
	uint32_t arenas = __atomic_load_n(&seg_arena_count, __ATOMIC_RELAXED);
	size_t used = SEG_ALIGN(ARENAS_END(arenas), LA_SHM_PAGE);
	/* the copy holds the parent's identity if the parent's file was named (write_identity) */
	seg_forked = seg_on_file && seg_path[0];
	image_forked = true;
	/* the parent's name to give, if any, is the parent's */
	name_state = NAME_IDLE;
	name_tid = 0;
	if (name_dfd >= 0) {
		close(name_dfd);
		name_dfd = -1;
	}
	if (kept_dfd >= 0) {
		close(kept_dfd);
		kept_dfd = -1;
	}
	start_pidns = 0;     /* the parent's (its children may be in another pid namespace) */
	reap_wanted = false; /* the parent's sweep */
	seg_parent_controlled = fork_parent_controlled; /* the prepare handler's, not the file's */
	if (seg_forked)
		fork_pidns = syscall(SYS_getppid) == 0 ? ns_inode("pid")
		             : fork_named              ? fork_parent_pidns
		                                       : shm_header()->pidns_ino;
	fork_unpublished = false;
	bool fresh = false; /* the segment is a new file or new memory: the mailbox zeros */
	/* the child's file from the prepare handler's copy (fork_file): the statistics as they
	 * were at the clone are in it already */
	bool image = fork_image_len && fork_named == seg_forked, imaged = false;
	if (seg_on_file && seg_fd >= 0) {
		fresh = fork_file(used, image);
		fork_unpublished = !fresh;
		imaged = fresh && image;
	}
	if (seg_on_file && seg_fd >= 0 && !fresh &&
	    mmap(seg, SEG_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
	         0) == seg) {
		fresh = true;
		/* (a file truncated meanwhile: the rest stays zeros) */
		read_range(seg_fd, seg, used);
	}
	if (fresh && fork_image_len) { /* the statistics as they were at the clone */
		if (!imaged)
			memcpy(seg + OFF_CLASSES, fork_image + OFF_CLASSES,
			       fork_image_len - OFF_CLASSES);
		shm_header()->arena_count = __atomic_load_n(&seg_arena_count, __ATOMIC_RELAXED);
		arenas = shm_header()->arena_count;
	}
	fork_image_len = 0;
	if (seg_fd >= 0) {
		close(seg_fd); /* the parent's flock stays held by the parent's descriptor */
		seg_fd = -1;
	}
	seg_on_file = false;
	seg_path[0] = 0;
	/* a fresh segment's mailbox is zeros already: the page stays untouched until the
	 * child's control thread waits on it */
	if (!fresh)
		memset(shm_mailbox(), 0, sizeof(struct la_mailbox));
	mailbox_written = !fresh;
	shm_header()->allocator_threads = 1;
	/* the parent's decay pass may have disarmed itself mid-pass: the child's first pass
	 * looks at what it inherited */
	shm_decay_armed = 1;
	/* the parent's arena blocks may have been mid-update: make every seqlock even */
	for (uint32_t i = 0; i < arenas; i++)
		shm_arena_block(i)->seq &= ~1ULL;
}
