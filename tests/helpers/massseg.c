/* massseg.c — many segments, or one hostile one, for the daemon's scale and security tests
 * (tests/security/segments.bats, bench): forks N children that only wait, and publishes a
 * well-formed segment for each child's pid (its start time, this uid, flock held by this
 * process), with known figures: child i has allocated_bytes (in use) = 4096 * (i + 1). The segments do
 * not change and their mailboxes are never answered.
 *
 * usage: massseg --dir D [--count N] [--arenas A] [--slots S] [--torn] [--ready FILE]
 *   --slots S   arena slots in the header (default A; 65536 makes a segment beyond the
 *               library's limits, which readers must refuse)
 *   --arenas A  arena blocks in use (default 1; LA_SHM_ARENAS_MAX: the largest legal one)
 *   --torn      the process block's seqlock stays odd (a hostile or stopped writer)
 * Prints "ready N" (and writes FILE) once all are published; SIGTERM removes everything. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "liballoc_shm.h"

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	stop = 1;
}

static uint64_t start_time_of(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY);
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

int main(int argc, char **argv)
{
	const char *dir = NULL, *ready = NULL;
	long count = 1, arenas = 1, slots = 0;
	int torn = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
		if (!strcmp(a, "--torn")) {
			torn = 1;
			continue;
		}
		i++;
		if (!strcmp(a, "--dir"))
			dir = v;
		else if (!strcmp(a, "--count"))
			count = atol(v);
		else if (!strcmp(a, "--arenas"))
			arenas = atol(v);
		else if (!strcmp(a, "--slots"))
			slots = atol(v);
		else if (!strcmp(a, "--ready"))
			ready = v;
		else {
			fprintf(stderr, "massseg: unknown option %s\n", a);
			return 2;
		}
	}
	if (!dir || count < 1 || arenas < 0) {
		fprintf(stderr, "massseg: usage: see the comment in massseg.c\n");
		return 2;
	}
	if (!slots)
		slots = arenas ? arenas : 1;
	/* one descriptor per segment */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)count + 64) {
		rl.rlim_cur = rl.rlim_max > (rlim_t)count + 64 ? (rlim_t)count + 64 : rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);
	/* layout: header page, process block, arena blocks, tunables, classes, mailbox page */
	size_t stride = sizeof(struct la_shm_arena);
	size_t off_process = LA_SHM_PAGE, off_arenas = off_process + stride;
	size_t off_tun = off_arenas + stride * (size_t)slots;
	size_t off_cls = off_tun + sizeof(struct la_shm_tunable) * LA_NTUNABLES;
	size_t end = off_cls + sizeof(struct la_shm_class) * 4;
	size_t off_mb = (end + LA_SHM_PAGE - 1) / LA_SHM_PAGE * LA_SHM_PAGE;
	size_t total = off_mb + LA_SHM_PAGE;
	uint8_t *seg = calloc(1, total);
	pid_t *kids = calloc((size_t)count, sizeof(*kids));
	if (!seg || !kids)
		return 1;
	/* Every child first, while this process holds few descriptors: a child forked after
	 * the segments were opened would copy (and hold) every descriptor so far, which made
	 * 5,000 children cost minutes of the kernel's time instead of a second. */
	long nkids = 0, made = 0;
	for (long i = 0; i < count && !stop; i++) {
		pid_t k = fork();
		if (k == 0) {
			signal(SIGTERM, SIG_DFL);
			for (;;)
				pause();
		}
		if (k < 0) {
			fprintf(stderr, "massseg: fork: %s\n", strerror(errno));
			break;
		}
		kids[nkids++] = k;
	}
	for (long i = 0; i < nkids && !stop; i++) {
		pid_t k = kids[i];
		memset(seg, 0, total);
		struct la_shm_header *h = (struct la_shm_header *)seg;
		h->magic = LA_SHM_MAGIC;
		h->abi_version = LA_SHM_ABI_VERSION;
		h->header_size = sizeof(*h);
		h->total_size = total;
		h->generation = 1;
		h->pid = k;
		h->uid = getuid();
		h->start_time = start_time_of(k);
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		h->created_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
		/* what the segment claims: never believed, /proc says massseg */
		memset(h->exe, 'x', sizeof(h->exe) - 1);
		memcpy(h->exe, "/usr/sbin/", 10);
		h->counter_count = LA_NCOUNTERS;
		h->tunable_count = LA_NTUNABLES;
		h->class_count = 4;
		h->arena_slots = (uint32_t)slots;
		h->arena_count = (uint32_t)arenas;
		h->control_state = LA_CONTROL_RUNNING;
		h->off_process = off_process;
		h->off_arenas = off_arenas;
		h->arena_stride = stride;
		h->off_tunables = off_tun;
		h->off_classes = off_cls;
		h->class_stride = sizeof(struct la_shm_class);
		h->off_mailbox = off_mb;
		h->allocator_threads = 1;
		struct la_shm_arena *pb = (struct la_shm_arena *)(seg + off_process);
		pb->c.allocated_bytes = 4096ull * (uint64_t)(i + 1);
		pb->c.address_space_bytes = 65536;
		pb->seq = torn ? 1 : 0;
		for (long a = 0; a < arenas; a++) {
			struct la_shm_arena *ab =
			        (struct la_shm_arena *)(seg + off_arenas + stride * (size_t)a);
			ab->index = (uint32_t)a;
			ab->c.heaps = 1;
		}
		struct la_shm_class *cl = (struct la_shm_class *)(seg + off_cls);
		for (int c = 0; c < 4; c++)
			cl[c].size = 16u << c;
		char path[4096], tmp[4096];
		snprintf(path, sizeof(path), "%s/" LA_SHM_PREFIX "%d" LA_SHM_SUFFIX, dir, (int)k);
		snprintf(tmp, sizeof(tmp), "%s/" LA_SHM_PREFIX "%d.tmp", dir, (int)k);
		int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0 || pwrite(fd, seg, total, 0) != (ssize_t)total ||
		    flock(fd, LOCK_SH | LOCK_NB) < 0 || rename(tmp, path) < 0) {
			fprintf(stderr, "massseg: %s: %s\n", path, strerror(errno));
			break;
		}
		/* fd stays open: the lock says the process lives */
		made++;
	}
	printf("ready %ld\n", made);
	fflush(stdout);
	if (ready) {
		FILE *f = fopen(ready, "w");
		if (f) {
			fprintf(f, "%ld\n", made);
			fclose(f);
		}
	}
	while (!stop)
		pause();
	for (long i = 0; i < made + (made < nkids); i++) { /* the one that failed too */
		char path[4096];
		snprintf(path, sizeof(path), "%s/" LA_SHM_PREFIX "%d" LA_SHM_SUFFIX, dir,
		         (int)kids[i]);
		unlink(path);
		kill(kids[i], SIGKILL);
	}
	for (long i = made; i < nkids; i++)
		kill(kids[i], SIGKILL);
	for (long i = 0; i < nkids; i++)
		waitpid(kids[i], NULL, 0);
	return 0;
}
