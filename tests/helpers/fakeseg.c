/* fakeseg.c — a stand-in for a preloaded process: creates a segment exactly per
 * liballoc_shm.h (or deliberately broken, see --mode), keeps its stats moving under the
 * seqlocks and answers its mailbox like the control thread would (get/set with range
 * checks against the LA_TUNABLES table, trim/release/flush returning fixed counts).
 * Lets allocctld be tested without the allocator, and against hostile input forever.
 *
 * usage: fakeseg [--dir D] [--mode M] [--exe NAME] [--arenas N] [--trim-bytes N]
 *                [--delay-ms N] [--no-answer] [--control off|failed] [--interval-ms N]
 *                [--ready FILE] [--claim-pid PID] [--setuid-on-usr1 UID]
 * modes: valid bad-magic bad-version bad-header truncated oversized wrong-mode symlink
 *        offsets-oob counts wrong-owner uid-mismatch name-mismatch fifo rewrite
 *        foreign-pid (a well-formed segment, named for and claiming --claim-pid, e.g. a
 *        process of another user, with that process's start time)
 * --setuid-on-usr1 UID: on SIGUSR1 the process (every thread) switches to UID, as a worker
 * forked as root drops to its user after start; the segment keeps its owner. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "liballoc_shm.h"

static const struct {
	const char *name;
	int64_t def, min, max;
} tunables[] = {
#define FS_X(name, type, def, min, max, live, mallopt, help) {#name, def, min, max},
        LA_TUNABLES(FS_X)
#undef FS_X
};

#define NCLASSES 8
#define NSLOTS   16

static struct {
	const char *dir, *mode, *exe, *ready, *control;
	int arenas, delay_ms, interval_ms, claim_pid, setuid_uid;
	uint64_t trim_bytes;
	bool no_answer;
} opt = {.mode = "valid", .arenas = 2, .interval_ms = 20, .trim_bytes = 1 << 20, .setuid_uid = -1};

static char path[PATH_MAX], target[PATH_MAX];
static uint8_t *seg;
static size_t seg_size;
static struct la_shm_header *hdr;
static int seg_fd = -1;
static volatile sig_atomic_t stop, drop_uid;

static uint64_t now_ns(int clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t start_time_of(int pid)
{
	char buf[1024], p0[64];
	snprintf(p0, sizeof(p0), "/proc/%d/stat", pid);
	int fd = open(p0, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	for (int field = 2; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	return p ? strtoull(p + 1, NULL, 10) : 0;
}

static struct la_shm_arena *block(int i) /* -1: process block */
{
	return (struct la_shm_arena *)(seg +
	                               (i < 0 ? hdr->off_process
	                                      : hdr->off_arenas + hdr->arena_stride * (uint64_t)i));
}

static struct la_shm_tunable *tunable(int i)
{
	return (struct la_shm_tunable *)(seg + hdr->off_tunables) + i;
}

static void seq_begin(uint64_t *seq)
{
	__atomic_fetch_add(seq, 1, __ATOMIC_ACQ_REL); /* odd: the block is being written */
}

static void seq_end(uint64_t *seq)
{
	__atomic_fetch_add(seq, 1, __ATOMIC_RELEASE); /* even: consistent again */
}

static void layout(void)
{
	size_t off = LA_SHM_PAGE;
	hdr->off_process = off;
	off += sizeof(struct la_shm_arena);
	hdr->off_arenas = off;
	hdr->arena_stride = sizeof(struct la_shm_arena);
	off += sizeof(struct la_shm_arena) * NSLOTS;
	hdr->off_tunables = off;
	off += sizeof(struct la_shm_tunable) * LA_NTUNABLES; /* seqlock: hdr->tunables_seq */
	hdr->off_classes = off;
	hdr->class_stride = sizeof(struct la_shm_class);
	off += sizeof(struct la_shm_class) * NCLASSES; /* fields atomic, no seqlock */
	off = (off + LA_SHM_PAGE - 1) / LA_SHM_PAGE * LA_SHM_PAGE;
	hdr->off_mailbox = off;
	hdr->total_size = off + LA_SHM_PAGE;
}

static void fill(void)
{
	hdr->magic = LA_SHM_MAGIC;
	hdr->abi_version = LA_SHM_ABI_VERSION;
	hdr->header_size = sizeof(*hdr);
	hdr->generation = 1;
	hdr->pid = opt.claim_pid ? opt.claim_pid : getpid();
	hdr->uid = getuid();
	hdr->start_time = start_time_of(hdr->pid);
	hdr->created_ns = now_ns(CLOCK_REALTIME);
	if (opt.exe)
		snprintf(hdr->exe, sizeof(hdr->exe), "%s", opt.exe);
	else if (readlink("/proc/self/exe", hdr->exe, sizeof(hdr->exe) - 1) < 0)
		strcpy(hdr->exe, "fakeseg");
	hdr->counter_count = LA_NCOUNTERS;
	hdr->tunable_count = LA_NTUNABLES;
	hdr->class_count = NCLASSES;
	hdr->arena_slots = NSLOTS;
	hdr->arena_count = (uint32_t)opt.arenas;
	hdr->control_state = !opt.control                  ? LA_CONTROL_RUNNING
	                     : !strcmp(opt.control, "off") ? LA_CONTROL_OFF
	                                                   : LA_CONTROL_FAILED;
	hdr->allocator_threads = 3;
	snprintf(hdr->version, sizeof(hdr->version), "%s", LA_VERSION);
	for (int i = -1; i < opt.arenas; i++) {
		struct la_shm_arena *a = block(i);
		a->index = i < 0 ? 0 : (uint32_t)i;
		a->threads = 1;
		a->c.allocated_bytes = 1048576ull * (uint64_t)(i + 2);
		a->c.data_resident_bytes = a->c.allocated_bytes + 65536;
		a->c.free_resident_bytes = 65536;
		a->c.address_space_bytes = 4194304ull * (uint64_t)(i + 2);
		a->c.heaps = 1;
		a->c.mmap_calls = 10;
		a->c.mmap_bytes = 4194304ull * (uint64_t)(i + 2);
	}
	for (int i = 0; i < LA_NTUNABLES; i++)
		tunable(i)->value = tunables[i].def < 0 ? 16 : tunables[i].def;
	struct la_shm_class *cls = (struct la_shm_class *)(seg + hdr->off_classes);
	for (int i = 0; i < NCLASSES; i++) {
		cls[i].size = 16u << i;
		cls[i].s.blocks_in_use = 100u * (unsigned)(i + 1);
		cls[i].s.spans = 1;
	}
}

/* ---- the control thread ------------------------------------------------------------------- */
static int find_tunable(const char *name)
{
	for (int i = 0; i < LA_NTUNABLES; i++)
		if (!strcmp(tunables[i].name, name))
			return i;
	return -1;
}

static void execute(struct la_mailbox *mb)
{
	char name[LA_NAME_MAX];
	memcpy(name, mb->name, sizeof(name));
	name[LA_NAME_MAX - 1] = 0;
	int t = find_tunable(name);
	uint64_t t0 = now_ns(CLOCK_MONOTONIC);
	mb->status = LA_ST_OK;
	mb->reason[0] = 0;
	mb->value_out = 0;
	mb->bytes_released = 0;
	mb->syscalls_mmap = mb->syscalls_munmap = mb->syscalls_madvise = mb->syscalls_mprotect = 0;
	switch (mb->command) {
	case LA_CMD_get:
	case LA_CMD_set:
		if (t < 0) {
			mb->status = LA_ST_EINVAL_NAME;
			snprintf(mb->reason, sizeof(mb->reason), "no tunable named '%s'", name);
			break;
		}
		if (mb->command == LA_CMD_set) {
			if (mb->value < tunables[t].min || mb->value > tunables[t].max) {
				mb->status = LA_ST_ERANGE;
				snprintf(mb->reason, sizeof(mb->reason),
				         "%s must be between %lld and %lld", name,
				         (long long)tunables[t].min, (long long)tunables[t].max);
				break;
			}
			uint64_t *seq = &hdr->tunables_seq;
			seq_begin(seq);
			tunable(t)->value = mb->value;
			tunable(t)->source = LA_SRC_command;
			seq_end(seq);
		}
		mb->value_out = tunable(t)->value;
		mb->source_out = tunable(t)->source;
		break;
	case LA_CMD_trim:
	case LA_CMD_release_idle_heaps:
	case LA_CMD_flush_caches:
		mb->bytes_released = opt.trim_bytes;
		mb->syscalls_madvise = 3;
		mb->syscalls_munmap = mb->command == LA_CMD_release_idle_heaps;
		break;
	case LA_CMD_refresh:
		break;
	default:
		mb->status = LA_ST_EBADCMD;
		snprintf(mb->reason, sizeof(mb->reason), "unknown command %u", mb->command);
	}
	struct la_shm_arena *p = block(-1);
	seq_begin(&p->seq);
	p->c.commands_executed++;
	seq_end(&p->seq);
	mb->duration_ns = now_ns(CLOCK_MONOTONIC) - t0;
}

static void *control_thread(void *arg)
{
	struct la_mailbox *mb = (struct la_mailbox *)(seg + hdr->off_mailbox);
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	for (;;) {
		uint32_t st = __atomic_load_n(&mb->state, __ATOMIC_ACQUIRE);
		if (st != LA_MB_REQUESTED) {
			struct timespec ts = {0, 200000000};
			syscall(SYS_futex, &mb->state, FUTEX_WAIT, st, &ts, NULL, 0);
			continue;
		}
		if (!__atomic_compare_exchange_n(&mb->state, &st, LA_MB_RUNNING, false,
		                                 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			continue; /* cancelled meanwhile */
		if (opt.delay_ms) {
			struct timespec d = {opt.delay_ms / 1000, (opt.delay_ms % 1000) * 1000000L};
			nanosleep(&d, NULL);
		}
		execute(mb);
		mb->result_seq = mb->seq;
		__atomic_store_n(&mb->state, LA_MB_DONE, __ATOMIC_RELEASE);
		syscall(SYS_futex, &mb->state, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
	}
	return NULL;
}

/* ---- creation ----------------------------------------------------------------------------- */
static void die(const char *what)
{
	fprintf(stderr, "fakeseg: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void on_signal(int sig)
{
	stop = 1;
}

static void on_usr1(int sig)
{
	drop_uid = 1;
}

/* --setuid-on-usr1: switch once SIGUSR1 came (setuid applies to every thread) */
static void maybe_drop_uid(void)
{
	if (!drop_uid || opt.setuid_uid < 0)
		return;
	drop_uid = 0;
	if (setgid((gid_t)opt.setuid_uid) < 0 || setuid((uid_t)opt.setuid_uid) < 0)
		die("setuid");
}

static void ready(void)
{
	if (!opt.ready)
		return;
	char tmp[PATH_MAX + 8];
	snprintf(tmp, sizeof(tmp), "%s.tmp", opt.ready);
	FILE *f = fopen(tmp, "w");
	if (!f || fprintf(f, "%s\n", path) < 0 || fclose(f) || rename(tmp, opt.ready))
		die("ready file");
}

static void rewrite_loop(void)
{
	/* Keep rewriting the file behind the readers' back: garbage headers, truncation to
	 * one page, restoration. Uses pwrite/ftruncate only (the mapping would fault). */
	struct la_shm_header good = *hdr, bad;
	unsigned r = (unsigned)getpid();
	while (!stop) {
		bad = good;
		r = r * 1103515245u + 12345u;
		switch (r >> 16 & 7) {
		case 0:
			bad.magic ^= r;
			break;
		case 1:
			bad.total_size = r;
			break;
		case 2:
			bad.off_arenas = good.total_size - 8;
			break;
		case 3:
			bad.arena_count = 1u << 30;
			break;
		case 4:
			bad.generation++;
			break;
		default:
			break;
		}
		if (pwrite(seg_fd, &bad, sizeof(bad), 0) < 0)
			die("pwrite");
		usleep(500);
		if ((r >> 20 & 3) == 0) {
			if (ftruncate(seg_fd, LA_SHM_PAGE) < 0)
				die("ftruncate");
			usleep(500);
			if (ftruncate(seg_fd, (off_t)seg_size) < 0)
				die("ftruncate");
		}
		if (pwrite(seg_fd, &good, sizeof(good), 0) < 0)
			die("pwrite");
		usleep(500);
	}
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--no-answer")) {
			opt.no_answer = true;
			continue;
		}
		if (!v) {
			fprintf(stderr,
			        "fakeseg: %s needs a value (see the comment in fakeseg.c)\n", a);
			return 2;
		}
		i++;
		if (!strcmp(a, "--dir"))
			opt.dir = v;
		else if (!strcmp(a, "--mode"))
			opt.mode = v;
		else if (!strcmp(a, "--exe"))
			opt.exe = v;
		else if (!strcmp(a, "--ready"))
			opt.ready = v;
		else if (!strcmp(a, "--control"))
			opt.control = v;
		else if (!strcmp(a, "--arenas"))
			opt.arenas = atoi(v);
		else if (!strcmp(a, "--delay-ms"))
			opt.delay_ms = atoi(v);
		else if (!strcmp(a, "--interval-ms"))
			opt.interval_ms = atoi(v);
		else if (!strcmp(a, "--claim-pid"))
			opt.claim_pid = atoi(v);
		else if (!strcmp(a, "--trim-bytes"))
			opt.trim_bytes = strtoull(v, NULL, 0);
		else if (!strcmp(a, "--setuid-on-usr1"))
			opt.setuid_uid = atoi(v);
		else {
			fprintf(stderr, "fakeseg: unknown option %s\n", a);
			return 2;
		}
	}
	if (opt.arenas < 0 || opt.arenas > NSLOTS)
		opt.arenas = NSLOTS;
	if (!opt.dir)
		opt.dir = getenv("LIBALLOC_RUN_DIR");
	if (!opt.dir) {
		fprintf(stderr, "fakeseg: --dir or LIBALLOC_RUN_DIR required\n");
		return 2;
	}
	const char *m = opt.mode;
	if (!strcmp(m, "foreign-pid") && opt.claim_pid <= 0) {
		fprintf(stderr, "fakeseg: foreign-pid needs --claim-pid\n");
		return 2;
	}
	if (strcmp(m, "foreign-pid"))
		opt.claim_pid = 0;
	snprintf(path, sizeof(path), "%s/" LA_SHM_PREFIX "%d" LA_SHM_SUFFIX, opt.dir,
	         opt.claim_pid ? opt.claim_pid : (int)getpid());
	char tmp[PATH_MAX + 8];
	snprintf(tmp, sizeof(tmp), "%s/" LA_SHM_PREFIX "%d.tmp", opt.dir, (int)getpid());
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	if (opt.setuid_uid >= 0)
		signal(SIGUSR1, on_usr1);

	if (!strcmp(m, "fifo")) {
		if (mkfifo(path, 0600) < 0)
			die("mkfifo");
		ready();
		while (!stop)
			pause();
		unlink(path);
		return 0;
	}
	/* The layout is computed on a scratch header first to know the size. */
	static struct la_shm_header probe;
	hdr = &probe;
	layout();
	seg_size = hdr->total_size;
	int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		die(tmp);
	if (fchmod(fd, 0600) < 0 || ftruncate(fd, (off_t)seg_size) < 0)
		die("size");
	seg = mmap(NULL, seg_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (seg == MAP_FAILED)
		die("mmap");
	hdr = (struct la_shm_header *)seg;
	layout();
	fill();
	if (flock(fd, LOCK_SH) < 0)
		die("flock");
	seg_fd = fd;

	/* breakages of the header or the file */
	if (!strcmp(m, "bad-magic"))
		hdr->magic ^= 1;
	else if (!strcmp(m, "bad-version"))
		hdr->abi_version = LA_SHM_ABI_VERSION + 1;
	else if (!strcmp(m, "bad-header"))
		hdr->header_size = 16;
	else if (!strcmp(m, "offsets-oob"))
		hdr->off_tunables = hdr->total_size - 8;
	else if (!strcmp(m, "counts"))
		hdr->arena_count = hdr->arena_slots + 1;
	else if (!strcmp(m, "uid-mismatch"))
		hdr->uid = hdr->uid + 1;
	else if (!strcmp(m, "name-mismatch"))
		hdr->pid = 1;
	else if (!strcmp(m, "wrong-mode")) {
		if (fchmod(fd, 0644) < 0)
			die("fchmod");
	} else if (!strcmp(m, "wrong-owner")) {
		if (fchown(fd, 65534, 65534) < 0)
			die("fchown");
	} else if (!strcmp(m, "oversized")) {
		/* claims (and has) 256 MiB: consistent but beyond any sane segment */
		hdr->total_size = 256ull << 20;
		if (ftruncate(fd, (off_t)hdr->total_size) < 0)
			die("ftruncate");
	} else if (strcmp(m, "valid") && strcmp(m, "truncated") && strcmp(m, "symlink") &&
	           strcmp(m, "rewrite") && strcmp(m, "foreign-pid")) {
		fprintf(stderr, "fakeseg: unknown mode %s\n", m);
		unlink(tmp);
		return 2;
	}
	if (!strcmp(m, "symlink")) {
		/* the real file stays under another name; the segment name is a link to it */
		snprintf(target, sizeof(target), "%s/target-%d", opt.dir, (int)getpid());
		if (rename(tmp, target) < 0 || symlink(target, path) < 0)
			die("symlink");
	} else if (rename(tmp, path) < 0) {
		die("rename");
	}
	if (!strcmp(m, "truncated")) {
		/* the header still claims the full size; the file lost its tail */
		if (ftruncate(fd, (off_t)(seg_size - LA_SHM_PAGE)) < 0)
			die("ftruncate");
	}
	bool answering = !opt.no_answer && !strcmp(m, "valid") && !opt.control;
	pthread_t th;
	if (answering && pthread_create(&th, NULL, control_thread, NULL) != 0)
		die("pthread_create");
	ready();
	if (!strcmp(m, "rewrite")) {
		rewrite_loop();
	} else {
		uint64_t tick = 0;
		while (!stop) {
			maybe_drop_uid();
			if (opt.interval_ms <= 0 || strcmp(m, "valid")) {
				pause();
				continue;
			}
			/* keep the counters moving under the seqlocks, like allocator threads */
			for (int i = 0; i < opt.arenas; i++) {
				struct la_shm_arena *a = block(i);
				seq_begin(&a->seq);
				a->c.allocated_bytes =
				        1048576ull * (uint64_t)(i + 2) + (tick % 16) * 4096;
				a->c.data_resident_bytes = a->c.allocated_bytes + 65536;
				a->c.cache_refills++;
				seq_end(&a->seq);
			}
			hdr->heartbeat_ns = now_ns(CLOCK_MONOTONIC);
			tick++;
			struct timespec d = {opt.interval_ms / 1000,
			                     (opt.interval_ms % 1000) * 1000000L};
			nanosleep(&d, NULL);
		}
	}
	unlink(path);
	if (target[0])
		unlink(target);
	return 0;
}
