/* procfs.c — reads /proc/<pid> through one directory descriptor (procfs.h). */
#include "procfs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static uint64_t page_size(void)
{
	static uint64_t ps;
	if (!ps) {
		long v = sysconf(_SC_PAGESIZE);
		ps = v > 0 ? (uint64_t)v : 4096;
	}
	return ps;
}

const char *procfs_basename(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

/* Replace what a terminal or a label should not carry. */
static void printable(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
			*s = '?';
}

/* Read a whole small file relative to dfd; returns its length or -1. */
static ssize_t read_at(int dfd, const char *name, char *buf, size_t cap)
{
	int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	size_t n = 0;
	while (n < cap - 1) {
		ssize_t r = read(fd, buf + n, cap - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			close(fd);
			errno = e;
			return -1;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	buf[n] = 0;
	return (ssize_t)n;
}

int procfs_parse_stat(const char *buf, struct procfs_info *out)
{
	/* comm may hold spaces and parentheses: the fields restart after the last ')' */
	const char *p = strrchr(buf, ')');
	const char *open = strchr(buf, '(');
	if (!p || !open || open > p)
		return -1;
	size_t nc = (size_t)(p - open - 1);
	if (nc >= sizeof(out->stat_comm))
		nc = sizeof(out->stat_comm) - 1;
	memcpy(out->stat_comm, open + 1, nc);
	out->stat_comm[nc] = 0;
	printable(out->stat_comm);
	p++;
	uint64_t f[25] = {0};
	/* field 3 (state) is a letter; fields 4..24 are numbers (some negative) */
	int field = 2;
	while (*p && field < 24) {
		while (*p == ' ')
			p++;
		if (!*p)
			break;
		field++;
		const char *start = p;
		while (*p && *p != ' ')
			p++;
		if (field >= 4) {
			char *end;
			long long v = strtoll(start, &end, 10);
			if (end != p)
				return -1;
			f[field] = (uint64_t)v;
		}
	}
	if (field < 24)
		return -1;
	out->threads = (uint32_t)f[20];
	out->start_time = f[22];
	out->vm_rss = f[24] * page_size();
	return 0;
}

static uint64_t kb_value(const char *v)
{
	return strtoull(v, NULL, 10) * 1024;
}

int procfs_parse_status(const char *buf, struct procfs_info *out)
{
	int found = 0;
	for (const char *line = buf; line && *line;) {
		const char *nl = strchr(line, '\n');
		const char *colon = memchr(line, ':', nl ? (size_t)(nl - line) : strlen(line));
		if (colon) {
			size_t klen = (size_t)(colon - line);
			const char *v = colon + 1;
#define KEY(k) (klen == sizeof(k) - 1 && !memcmp(line, k, klen))
			if (KEY("Uid")) {
				unsigned u[4];
				if (sscanf(v, "%u %u %u %u", &u[0], &u[1], &u[2], &u[3]) == 4) {
					for (int i = 0; i < 4; i++)
						out->uid[i] = u[i];
					found |= 1;
				}
			} else if (KEY("Gid")) {
				unsigned g[4];
				if (sscanf(v, "%u %u %u %u", &g[0], &g[1], &g[2], &g[3]) == 4)
					for (int i = 0; i < 4; i++)
						out->gid[i] = g[i];
			} else if (KEY("Threads")) {
				out->threads = (uint32_t)strtoul(v, NULL, 10);
				found |= 2;
			} else if (KEY("VmRSS")) {
				out->vm_rss = kb_value(v);
			} else if (KEY("RssAnon")) {
				out->rss_anon = kb_value(v);
			} else if (KEY("RssFile")) {
				out->rss_file = kb_value(v);
			} else if (KEY("RssShmem")) {
				out->rss_shmem = kb_value(v);
			} else if (KEY("NSpid")) {
				const char *s = v;
				out->n_nspid = 0;
				while (out->n_nspid < PROCFS_NSPID_MAX) {
					char *end;
					long x = strtol(s, &end, 10);
					if (end == s || x <= 0)
						break;
					out->nspid[out->n_nspid++] = (int)x;
					s = end;
				}
			}
#undef KEY
		}
		line = nl ? nl + 1 : NULL;
	}
	return found == 3 ? 0 : -1;
}

void procfs_parse_cmdline(const char *buf, size_t len, struct procfs_info *out)
{
	size_t o = 0;
	/* arguments are NUL-separated (a process title may also be one string with spaces) */
	while (len && buf[len - 1] == 0)
		len--;
	for (size_t i = 0; i < len && o + 1 < sizeof(out->cmdline); i++)
		out->cmdline[o++] = buf[i] ? buf[i] : ' ';
	if (o + 1 == sizeof(out->cmdline) && len > o)
		memcpy(out->cmdline + o - 3, "...", 3);
	out->cmdline[o] = 0;
	printable(out->cmdline);
}

/* The name it was run as, from comm and the command line (args: NUL-separated, len bytes):
 * - argv[0]'s basename when it continues comm (a symlink's name, which comm holds cut at
 *   15 bytes) or has nothing to do with it (`exec -a NAME prog`, a program that names
 *   itself): what the process was told it is; a login shell's leading '-' is dropped;
 * - a script's name when argv[1] is (a `#!` interpreter's argv[0] is the interpreter; comm
 *   is the script's name, cut at 15 bytes, completed from argv[1]);
 * - comm when argv[0] is a process title (it holds a space: "postgres: checkpointer"),
 *   completed by the title's first word if comm was cut. */
static void derive_name(const char *args, size_t len, struct procfs_info *out)
{
	snprintf(out->name, sizeof(out->name), "%s", out->comm);
	if (!args || !len || !args[0])
		return;
	size_t cl = strlen(out->comm);
	char a0[PROCFS_CMDLINE_MAX], a1[PROCFS_CMDLINE_MAX] = "";
	size_t k = strnlen(args, len);
	snprintf(a0, sizeof(a0), "%.*s", (int)k, args);
	if (k + 1 < len)
		snprintf(a1, sizeof(a1), "%.*s", (int)strnlen(args + k + 1, len - k - 1),
		         args + k + 1);
	bool title = strchr(a0, ' ') != NULL;
	a0[strcspn(a0, " ")] = 0;
	const char *base = procfs_basename(a0), *pick = NULL;
	if (!title && base[0] == '-')
		base++;
	bool continues = cl && !strncmp(base, out->comm, cl);
	if (title) {
		if (cl >= 15 && continues)
			pick = base;
	} else if (continues) {
		pick = base;
	} else if (a1[0] && cl && !strncmp(procfs_basename(a1), out->comm, cl)) {
		pick = procfs_basename(a1); /* a script */
	} else if (base[0]) {
		pick = base; /* exec -a NAME */
	}
	if (pick && strlen(pick) < sizeof(out->name))
		snprintf(out->name, sizeof(out->name), "%s", pick);
	printable(out->name);
}

bool procfs_name_matches(const struct procfs_info *pi, const char *name)
{
	return procfs_names_match(pi->have, pi->name, pi->comm, pi->exe, name);
}

bool procfs_names_match(unsigned have, const char *run_name, const char *comm, const char *binary,
                        const char *name)
{
	if (!name || !*name)
		return false;
	if ((have & PROCFS_COMM) && (!strcmp(name, run_name) || !strcmp(name, comm)))
		return true;
	if (have & PROCFS_EXE) {
		char exe[PROCFS_EXE_MAX];
		snprintf(exe, sizeof(exe), "%s", binary);
		/* a binary replaced since the process started still answers to its name */
		size_t n = strlen(exe);
		const char *del = " (deleted)";
		if (n > strlen(del) && !strcmp(exe + n - strlen(del), del))
			exe[n - strlen(del)] = 0;
		if (!strcmp(name, exe) || !strcmp(name, procfs_basename(exe)))
			return true;
	}
	return false;
}

static const char *proc_root = "/proc";

void procfs_set_root(const char *root)
{
	proc_root = root ? root : "/proc";
}

int procfs_parse_uid_map(const char *buf, struct procfs_info *out)
{
	out->n_uid_map = 0;
	for (const char *line = buf; *line && out->n_uid_map < PROCFS_IDMAP_MAX;) {
		unsigned long long in, o, n;
		if (sscanf(line, "%llu %llu %llu", &in, &o, &n) != 3 || !n || in > UINT32_MAX ||
		    o > UINT32_MAX || n > UINT32_MAX)
			return -1;
		out->uid_map[out->n_uid_map++] =
		        (struct procfs_idmap){(uint32_t)in, (uint32_t)o, (uint32_t)n};
		const char *nl = strchr(line, '\n');
		if (!nl)
			break;
		line = nl + 1;
	}
	return out->n_uid_map ? 0 : -1;
}

bool procfs_uid_outside(const struct procfs_info *pi, uint32_t inside, uid_t *outside)
{
	if (!(pi->have & PROCFS_UIDMAP))
		return false;
	for (int i = 0; i < pi->n_uid_map; i++) {
		const struct procfs_idmap *m = &pi->uid_map[i];
		if (inside >= m->inside && inside - m->inside < m->count) {
			*outside = (uid_t)(m->outside + (inside - m->inside));
			return true;
		}
	}
	return false;
}

static uint64_t ns_of(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

uint64_t procfs_self_pidns(void)
{
	static uint64_t ino;
	if (!ino)
		ino = ns_of("/proc/self/ns/pid");
	return ino;
}

uint64_t procfs_self_userns(void)
{
	static uint64_t ino;
	if (!ino)
		ino = ns_of("/proc/self/ns/user");
	return ino;
}

/* The pid namespace /proc shows (its processes have one NSpid), or 0 when that is not the
 * reader's own (a /proc mounted for a parent namespace): then nothing can be skipped. */
static uint64_t proc_mount_pidns(void)
{
	static int known;
	static uint64_t ino;
	if (!known) {
		struct procfs_info self;
		if (procfs_read(getpid(), PROCFS_STATUS, 0, &self) == 0 && self.n_nspid == 1)
			ino = procfs_self_pidns();
		known = 1;
	}
	return ino;
}

/* The processes of other pid namespaces than /proc's own, from one walk of /proc: their
 * namespace and pid here. Their pid there (last NSpid) is read when a lookup needs it. */
static struct {
	struct nsent {
		uint64_t ns;
		pid_t pid;
		pid_t nspid; /* 0 until read, -1 unreadable */
	} * v;
	size_t n, cap;
	uint64_t built_ms;    /* CLOCK_MONOTONIC of the walk, 0: never */
	uint64_t built_ticks; /* the same on the start-time clock (boot time, clock ticks) */
} nsidx;

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void nsidx_build(void)
{
	struct timespec bt;
	clock_gettime(CLOCK_BOOTTIME, &bt);
	long hz = sysconf(_SC_CLK_TCK);
	if (hz <= 0)
		hz = 100;
	nsidx.built_ticks = (uint64_t)bt.tv_sec * (uint64_t)hz +
	                    (uint64_t)bt.tv_nsec / (1000000000ull / (uint64_t)hz);
	nsidx.built_ms = mono_ms();
	nsidx.n = 0;
	int pfd = open(proc_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dh = pfd >= 0 ? fdopendir(pfd) : NULL;
	if (!dh) {
		if (pfd >= 0)
			close(pfd);
		return;
	}
	uint64_t mine = proc_mount_pidns();
	struct dirent *e;
	while ((e = readdir(dh))) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		char path[sizeof(e->d_name) + 8];
		snprintf(path, sizeof(path), "%s/ns/pid", e->d_name);
		struct stat st;
		if (fstatat(pfd, path, &st, 0) < 0 || (mine && (uint64_t)st.st_ino == mine))
			continue;
		if (nsidx.n == nsidx.cap) {
			size_t cap = nsidx.cap ? 2 * nsidx.cap : 64;
			struct nsent *v = realloc(nsidx.v, cap * sizeof(*v));
			if (!v)
				break;
			nsidx.v = v;
			nsidx.cap = cap;
		}
		nsidx.v[nsidx.n++] =
		        (struct nsent){(uint64_t)st.st_ino, (pid_t)strtol(e->d_name, NULL, 10), 0};
	}
	closedir(dh);
}

/* Is pid (here) the process nspid of namespace pidns that started at start_time? */
static bool is_it(pid_t pid, uint64_t pidns, pid_t nspid, uint64_t start_time)
{
	struct procfs_info pi;
	if (procfs_read(pid, PROCFS_STATUS | PROCFS_NS, start_time, &pi) < 0)
		return false;
	return pi.pidns == pidns && pi.n_nspid > 0 && pi.nspid[pi.n_nspid - 1] == nspid;
}

static bool nsidx_lookup(uint64_t pidns, pid_t nspid, uint64_t start_time, pid_t *pid)
{
	for (size_t i = 0; i < nsidx.n; i++) {
		struct nsent *e = &nsidx.v[i];
		if (e->ns != pidns)
			continue;
		if (!e->nspid) {
			struct procfs_info pi;
			e->nspid = procfs_read(e->pid, PROCFS_STATUS, 0, &pi) == 0 && pi.n_nspid > 0
			                   ? pi.nspid[pi.n_nspid - 1]
			                   : -1;
		}
		if (e->nspid == nspid && is_it(e->pid, pidns, nspid, start_time)) {
			*pid = e->pid;
			return true;
		}
	}
	return false;
}

int procfs_find_locker(uint64_t ino, uint64_t pidns, pid_t nspid, uint64_t start_time, pid_t *pid)
{
	char path[64];
	snprintf(path, sizeof(path), "%s/locks", proc_root);
	FILE *f = fopen(path, "re");
	if (!f)
		return PROCFS_NS_HIDDEN;
	char line[256];
	int found = PROCFS_NS_HIDDEN;
	while (found != PROCFS_NS_FOUND && fgets(line, sizeof(line), f)) {
		/* "1: FLOCK  ADVISORY  READ 4242 fe:00:5358308 0 EOF"; "1: -> ..." waits */
		char kind[16], type[16];
		long who;
		unsigned maj, min;
		unsigned long long node;
		if (strstr(line, "->") ||
		    sscanf(line, "%*d: %15s %*s %15s %ld %x:%x:%llu", kind, type, &who, &maj, &min,
		           &node) != 6 ||
		    strcmp(kind, "FLOCK") != 0 || node != ino || who <= 0)
			continue;
		if (is_it((pid_t)who, pidns, nspid, start_time)) {
			*pid = (pid_t)who;
			found = PROCFS_NS_FOUND;
		}
	}
	fclose(f);
	return found;
}

int procfs_find_nspid(uint64_t pidns, pid_t nspid, uint64_t start_time, pid_t *pid)
{
	if (nspid <= 0)
		return PROCFS_NS_HIDDEN;
	if (!pidns) {
		/* the writer could not tell: its pid is taken as one of ours (checked by start
		 * time, as before namespaces were known) */
		struct procfs_info pi;
		if (procfs_read(nspid, 0, start_time, &pi) < 0)
			return PROCFS_NS_HIDDEN;
		*pid = nspid;
		return PROCFS_NS_FOUND;
	}
	/* the same pid here first: the reader's own namespace, the common case */
	if (is_it(nspid, pidns, nspid, start_time)) {
		*pid = nspid;
		return PROCFS_NS_FOUND;
	}
	if (nsidx.built_ms && nsidx_lookup(pidns, nspid, start_time, pid))
		return PROCFS_NS_FOUND;
	if (!nsidx.built_ms || mono_ms() - nsidx.built_ms >= PROCFS_NS_RESCAN_MS) {
		nsidx_build();
		return nsidx_lookup(pidns, nspid, start_time, pid) ? PROCFS_NS_FOUND
		                                                   : PROCFS_NS_HIDDEN;
	}
	/* listed moments ago: a process that started since then is not in the list yet */
	return start_time + 1 >= nsidx.built_ticks ? PROCFS_NS_LATER : PROCFS_NS_HIDDEN;
}

static int read_once(pid_t pid, unsigned what, uint64_t expected_start, struct procfs_info *out)
{
	memset(out, 0, sizeof(*out));
	out->pid = pid;
	if (pid <= 0) {
		errno = ESRCH;
		return -1;
	}
	char path[64];
	char buf[4096];
	if (!(what & ~PROCFS_STAT)) {
		/* one file describes one process by itself (its start time is in it): read by
		 * path, in one read (the kernel makes the whole line at once; it is far shorter
		 * than buf) */
		snprintf(path, sizeof(path), "%s/%d/stat", proc_root, (int)pid);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
		int e = errno;
		if (fd >= 0)
			close(fd);
		int fail = 0;
		if (n < 0) {
			fail = e == ENOENT ? ESRCH : e;
		} else if (n == 0) {
			fail = ESRCH; /* exited meanwhile */
		} else {
			buf[n] = 0;
			if (procfs_parse_stat(buf, out) < 0)
				fail = EIO;
			else if (expected_start && out->start_time != expected_start)
				fail = ESRCH; /* the pid was reused */
		}
		if (fail) {
			out->have = 0;
			errno = fail;
			return -1;
		}
		out->have = PROCFS_STAT;
		return 0;
	}
	snprintf(path, sizeof(path), "%s/%d", proc_root, (int)pid);
	int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		if (errno == ENOENT)
			errno = ESRCH;
		return -1;
	}
	int err = 0;
	/* the start time is always read first: it proves which process the rest describes */
	if (read_at(dfd, "stat", buf, sizeof(buf)) > 0 && procfs_parse_stat(buf, out) == 0) {
		out->have |= PROCFS_STAT;
		if (expected_start && out->start_time != expected_start) {
			out->have = 0;
			close(dfd);
			errno = ESRCH;
			return -1;
		}
	} else {
		err = errno ? errno : EIO;
	}
	if ((what & PROCFS_STATUS) && read_at(dfd, "status", buf, sizeof(buf)) > 0 &&
	    procfs_parse_status(buf, out) == 0)
		out->have |= PROCFS_STATUS;
	if (what & PROCFS_EXE) {
		ssize_t n = readlinkat(dfd, "exe", out->exe, sizeof(out->exe) - 1);
		if (n > 0) {
			out->exe[n] = 0;
			if ((size_t)n == sizeof(out->exe) - 1)
				memcpy(out->exe + n - 3, "...", 3);
			printable(out->exe);
			out->have |= PROCFS_EXE;
		}
	}
	char args[2 * PROCFS_CMDLINE_MAX]; /* argv[0] and argv[1], for the run name */
	size_t args_len = 0;
	if (what & (PROCFS_CMDLINE | PROCFS_COMM)) {
		ssize_t n = read_at(dfd, "cmdline", buf, sizeof(buf));
		if (n >= 0) {
			args_len = (size_t)n < sizeof(args) ? (size_t)n : sizeof(args);
			memcpy(args, buf, args_len);
			if (what & PROCFS_CMDLINE) {
				procfs_parse_cmdline(buf, (size_t)n, out);
				out->have |= PROCFS_CMDLINE;
			}
		}
	}
	if (what & PROCFS_NS) {
		struct stat ps, us;
		if (fstatat(dfd, "ns/pid", &ps, 0) == 0 && fstatat(dfd, "ns/user", &us, 0) == 0) {
			out->pidns = (uint64_t)ps.st_ino;
			out->userns = (uint64_t)us.st_ino;
			out->have |= PROCFS_NS;
		}
	}
	if ((what & PROCFS_UIDMAP) && read_at(dfd, "uid_map", buf, sizeof(buf)) >= 0 &&
	    procfs_parse_uid_map(buf, out) == 0)
		out->have |= PROCFS_UIDMAP;
	if (what & PROCFS_COMM) {
		ssize_t n = read_at(dfd, "comm", out->comm, sizeof(out->comm));
		if (n > 0) {
			while (n && out->comm[n - 1] == '\n')
				out->comm[--n] = 0;
			printable(out->comm);
			derive_name(args, args_len, out);
			out->have |= PROCFS_COMM;
		}
	}
	close(dfd);
	/* a process that exited meanwhile reads as empty files: judge by the start time */
	if (err || (what & ~out->have)) {
		errno = err ? err : ESRCH;
		/* still there? then the missing part is unreadable (kernel thread, perms) */
		if (!err && access(path, F_OK) == 0)
			errno = EACCES;
		return -1;
	}
	return 0;
}

int procfs_read(pid_t pid, unsigned what, uint64_t expected_start, struct procfs_info *out)
{
	/* An exec between the first file read (stat) and the last (comm) would mix two images:
	 * the exe and command line of the old with the comm of the new. An exec sets exe and
	 * the command line before comm, so a comm other than stat's says one happened: read
	 * again (execs are rare; at most three reads). */
	for (int tries = 1;; tries++) {
		int r = read_once(pid, what, expected_start, out);
		if (r < 0 || tries == 3 ||
		    (out->have & (PROCFS_STAT | PROCFS_COMM)) != (PROCFS_STAT | PROCFS_COMM) ||
		    !strcmp(out->stat_comm, out->comm))
			return r;
	}
}
