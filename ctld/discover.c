/* discover.c — finds segments: inotify on every run directory (on the shm root for new
 * per-user directories, and on the parent of a configured directory that does not exist
 * yet) plus a periodic rescan. Every file operation in a run directory goes through the
 * directory's descriptor, opened with O_NOFOLLOW and checked (owner, mode) on the
 * descriptor: a path is resolved once per rescan, never again for a file inside, so
 * swapping a directory for a symlink cannot redirect a removal elsewhere.
 *
 * The work is bounded per loop turn: names found by readdir or inotify wait in a queue and
 * are examined, like the liveness sweep over the known processes, in slices of at most
 * SLICE_NS on a low-priority event, so the control socket and HTTP are served in between
 * however many segments there are. A process's death shows at once as IN_CLOSE_WRITE (its
 * writable descriptor and mapping of the segment go away); the sweep is the safety net.
 * Each uid may have at most max_segments_per_uid segments tracked (one log line a minute
 * while some are left out). A refused file is logged once and remembered until it changes. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctld.h"
#include "http.h"
#include "log.h"
#include "pressure.h"

#define DIR_EVENTS                                                                               \
	(IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE | IN_DELETE | IN_MOVED_FROM | IN_DELETE_SELF | \
	 IN_MOVE_SELF | IN_ONLYDIR)
/* on the parent of a configured directory (and the shm root): the directory held open gets
 * no IN_DELETE_SELF while we hold it, so its removal is seen from its parent */
#define PARENT_EVENTS (IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM | IN_ONLYDIR)
#define SLICE_NS      2000000ull /* loop time one slice of discovery work may take */
#define HASH_BUCKETS  4096
#define CAP_LOG_NS    60000000000ull /* one "cap reached" line per uid per minute */
#define BACKOFF_MIN   100            /* ms before an unreadable process is read again */
#define BACKOFF_MAX   30000

/* A name to examine in a run directory (from readdir or inotify). */
struct pending {
	TAILQ_ENTRY(pending) link;
	struct rundir *dir;
	struct proc *recheck; /* instead: check this known process again (referenced) */
	char name[48];
};
TAILQ_HEAD(pending_list, pending);

/* Segments tracked per uid, for the cap. */
struct uid_count {
	uid_t uid;
	int n;
	uint64_t over;      /* segments left out since the last log line */
	uint64_t logged_ns; /* CLOCK_MONOTONIC of that line */
};

static struct {
	struct proc *hash[HASH_BUCKETS];  /* by pid (here) */
	struct proc *names[HASH_BUCKETS]; /* by run directory and file name */
	struct pending_list later;        /* looked at again shortly (a process of another
	                                     namespace that started moments ago) */
	struct event *later_ev;
	struct pending_list queue;
	int nqueue;
	struct uid_count *uids;
	int nuids, cap_uids;
	int effective_cap;  /* max_segments_per_uid, lowered to fit the descriptor limit */
	uint64_t pass;      /* rescan pass number: procs not seen in a pass are gone */
	bool pass_open;     /* a rescan's names are still queued */
	struct proc *sweep; /* next process of the liveness sweep (referenced), or NULL */
	bool sweep_pending; /* start a sweep once the queue drains */
	struct event *work; /* low-priority: run a slice */
	int root_fd;        /* uid_dirs, -1 if none */
	int root_wd;        /* its inotify watch */
	dev_t root_dev;
	ino_t root_ino;
} g = {.root_fd = -1, .root_wd = -1};

static void kick(struct ctld *d);
static void scan_dir(struct ctld *d, struct rundir *dir);
static void provide_uid_dir(struct ctld *d, struct rundir *dir);
static void provide_configured(struct ctld *d);

void proc_ref(struct proc *p)
{
	p->refs++;
}

void proc_unref(struct proc *p)
{
	if (--p->refs > 0)
		return;
	seg_close(&p->seg);
	free(p->id.buf);
	free(p);
}

static unsigned bucket(pid_t pid)
{
	return (unsigned)pid * 2654435761u % HASH_BUCKETS;
}

/* Processes are found by their pid here (hash) and by their file (names: a process of
 * another pid namespace has another pid here than in its file's name). */
static unsigned name_bucket(const struct rundir *dir, const char *name)
{
	uint32_t h = 2166136261u ^ (uint32_t)(uintptr_t)dir;
	for (; *name; name++)
		h = (h ^ (uint8_t)*name) * 16777619u;
	return h % HASH_BUCKETS;
}

static struct uid_count *uid_slot(uid_t uid, bool create)
{
	for (int i = 0; i < g.nuids; i++)
		if (g.uids[i].uid == uid)
			return &g.uids[i];
	if (!create)
		return NULL;
	if (g.nuids == g.cap_uids) {
		int cap = g.cap_uids ? 2 * g.cap_uids : 16;
		struct uid_count *u = realloc(g.uids, sizeof(*u) * (size_t)cap);
		if (!u)
			return NULL;
		g.uids = u;
		g.cap_uids = cap;
	}
	struct uid_count *u = &g.uids[g.nuids++];
	memset(u, 0, sizeof(*u));
	u->uid = uid;
	return u;
}

static void forget(struct ctld *d, struct proc *p, const char *why)
{
	log_info("forgetting pid %d (%s): %s", p->seg.hdr.pid, proc_name(p), why);
	timeline_proc_gone(d, p, why);
	metrics_proc_gone(d, p); /* before the policy forgets its profile */
	policy_proc_removed(d, p);
	TAILQ_REMOVE(&d->procs, p, link);
	struct proc **pp = &g.hash[bucket(p->seg.hdr.pid)];
	while (*pp && *pp != p)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = p->hnext;
	pp = &g.names[name_bucket(p->dir, p->name)];
	while (*pp && *pp != p)
		pp = &(*pp)->nnext;
	if (*pp)
		*pp = p->nnext;
	struct uid_count *u = uid_slot(p->seg.uid, false);
	if (u)
		u->n--;
	d->nprocs--;
	p->gone = true;
	if (g.sweep == p) {
		/* the sweep moves on; the list still holds p, so this is not the last ref */
		g.sweep = TAILQ_NEXT(p, link);
		if (g.sweep)
			proc_ref(g.sweep);
		p->refs--;
	}
	proc_unref(p);
}

struct proc *discover_find(struct ctld *d, pid_t pid)
{
	for (struct proc *p = g.hash[bucket(pid)]; p; p = p->hnext)
		if (p->seg.hdr.pid == pid)
			return p;
	return NULL;
}

static struct proc *find_name(struct rundir *dir, const char *name)
{
	for (struct proc *p = g.names[name_bucket(dir, name)]; p; p = p->nnext)
		if (p->dir == dir && !strcmp(p->name, name))
			return p;
	return NULL;
}

/* "liballoc.<digits>[.ns<digits>]<suffix>" -> pid (and the pid namespace's inode in *ns,
 * 0 when the name has none), else -1. */
static long name_pid_ns(const char *name, const char *suffix, uint64_t *ns)
{
	size_t pl = strlen(LA_SHM_PREFIX), sl = strlen(suffix), n = strlen(name);
	*ns = 0;
	if (n <= pl + sl || strncmp(name, LA_SHM_PREFIX, pl) || strcmp(name + n - sl, suffix))
		return -1;
	long pid = 0;
	size_t i = pl;
	for (; i < n - sl && name[i] >= '0' && name[i] <= '9'; i++) {
		if (pid > 100000000)
			return -1;
		pid = pid * 10 + (name[i] - '0');
	}
	size_t tl = strlen(LA_SHM_NS_TAG);
	if (i < n - sl) {
		if (strncmp(name + i, LA_SHM_NS_TAG, tl) || i + tl >= n - sl)
			return -1;
		for (i += tl; i < n - sl; i++) {
			if (name[i] < '0' || name[i] > '9' || *ns > UINT64_MAX / 10 - 10)
				return -1;
			*ns = *ns * 10 + (uint64_t)(name[i] - '0');
		}
		if (!*ns)
			return -1;
	}
	return pid > 0 ? pid : -1;
}

static long name_pid(const char *name, const char *suffix)
{
	uint64_t ns;
	return name_pid_ns(name, suffix, &ns);
}

static int64_t mtime_ns(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

static void full_path(char *buf, size_t len, const struct rundir *dir, const char *name)
{
	snprintf(buf, len, "%s/%s", dir->path, name);
}

static struct rejected *find_rejected(struct ctld *d, const char *path)
{
	struct rejected *r;
	TAILQ_FOREACH(r, &d->rejected, link)
	if (strcmp(r->path, path) == 0)
		return r;
	return NULL;
}

/* Remember a refused file; true if it is new or another file (log it). A file whose mtime
 * moved is examined again (rejected_unchanged) but not logged again. */
static bool note_rejected(struct ctld *d, const char *path, const struct stat *st)
{
	struct rejected *r = find_rejected(d, path);
	if (!r) {
		r = calloc(1, sizeof(*r));
		if (!r)
			return true;
		snprintf(r->path, sizeof(r->path), "%s", path);
		TAILQ_INSERT_TAIL(&d->rejected, r, link);
	}
	r->seen = true;
	/* log again only for another file or size: mtime also moves when a writer touches
	 * its mapping, which would make one refusal log on every rescan */
	bool changed = r->dev != st->st_dev || r->ino != st->st_ino || r->size != st->st_size ||
	               r->mtime_ns == 0;
	r->dev = st->st_dev;
	r->ino = st->st_ino;
	r->size = st->st_size;
	r->mtime_ns = mtime_ns(st);
	return changed;
}

/* The refusal of this very file, if it was refused before and has not changed since (a
 * hidden one's writer moves its mtime: it counts as unchanged while it is the same file). */
static struct rejected *rejected_unchanged(struct ctld *d, const char *path, const struct stat *st)
{
	struct rejected *r = find_rejected(d, path);
	if (!r)
		return NULL;
	r->seen = true;
	bool same = r->dev == st->st_dev && r->ino == st->st_ino && r->size == st->st_size &&
	            (r->hidden || r->mtime_ns == mtime_ns(st));
	return same ? r : NULL;
}

static void drop_rejected(struct ctld *d, const char *path)
{
	struct rejected *r = find_rejected(d, path);
	if (r) {
		TAILQ_REMOVE(&d->rejected, r, link);
		free(r);
	}
}

/* Unlink name in dir only if it is still the file we examined: both the check and the
 * removal go through the directory's descriptor. */
static bool remove_stale(struct ctld *d, struct rundir *dir, const char *name, dev_t dev, ino_t ino)
{
	if (!d->cfg.remove_stale || dir->fd < 0)
		return false;
	struct stat st;
	if (fstatat(dir->fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_dev != dev ||
	    st.st_ino != ino)
		return false;
	if (unlinkat(dir->fd, name, 0) < 0) {
		log_debug("cannot remove stale %s/%s: %s", dir->path, name, strerror(errno));
		return false;
	}
	d->st.segments_stale_removed++;
	return true;
}

/* One line a minute per uid while its segments are left out. */
static void note_over_cap(struct ctld *d, struct uid_count *u, const struct rundir *dir)
{
	u->over++;
	d->st.segments_over_cap++;
	uint64_t now = seg_now_ns(CLOCK_MONOTONIC);
	if (u->logged_ns && now - u->logged_ns < CAP_LOG_NS)
		return;
	log_warn("uid %u has %d segments tracked (max_segments_per_uid); %llu more in %s and "
	         "elsewhere are left out until some go",
	         u->uid, u->n, (unsigned long long)u->over, dir->path);
	u->logged_ns = now;
	u->over = 0;
}

/* A hidden segment (its lock held, its process not found from here) is removed only once
 * its lock is free: probe the lock of the very file that was refused. */
static void probe_hidden(struct ctld *d, struct rundir *dir, const char *name, const char *path,
                         struct rejected *r)
{
	int fd = openat(dir->fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return;
	struct stat st;
	bool free_lock = fstat(fd, &st) == 0 && st.st_dev == r->dev && st.st_ino == r->ino &&
	                 flock(fd, LOCK_EX | LOCK_NB) == 0;
	close(fd);
	if (free_lock && remove_stale(d, dir, name, r->dev, r->ino)) {
		log_info("removed stale segment %s (no process holds its lock)", path);
		drop_rejected(d, path);
	}
}

/* A queue entry for name in dir (NULL when out of memory: the rescan finds it later). */
static struct pending *new_pending(struct rundir *dir, const char *name)
{
	struct pending *q = malloc(sizeof(*q));
	if (!q)
		return NULL;
	q->recheck = NULL;
	q->dir = dir;
	snprintf(q->name, sizeof(q->name), "%s", name);
	return q;
}

/* Look at name again in a few tens of milliseconds. */
static void look_later(struct ctld *d, struct rundir *dir, const char *name)
{
	struct pending *q = new_pending(dir, name);
	if (!q)
		return;
	TAILQ_INSERT_TAIL(&g.later, q, link);
	if (!event_pending(g.later_ev, EV_TIMEOUT, NULL)) {
		struct timeval tv = {0, 2 * PROCFS_NS_RESCAN_MS * 1000};
		event_add(g.later_ev, &tv);
	}
}

static void scan_file(struct ctld *d, struct rundir *dir, const char *name, long pid)
{
	char path[PATH_MAX + 64];
	full_path(path, sizeof(path), dir, name);
	struct stat st;
	struct proc *old = find_name(dir, name);
	if (dir->fd < 0 || fstatat(dir->fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (old)
			forget(d, old, "segment removed");
		drop_rejected(d, path);
		return;
	}
	if (old && old->seg.dev == st.st_dev && old->seg.ino == st.st_ino) {
		old->seen_pass = g.pass;
		return;
	}
	if (old)
		forget(d, old, "segment replaced");
	struct rejected *r = rejected_unchanged(d, path, &st);
	if (r) {
		if (r->hidden)
			probe_hidden(d, dir, name, path, r);
		return;
	}
	struct uid_count *u = uid_slot(dir->uid, true);
	if (u && u->n >= g.effective_cap) {
		note_over_cap(d, u, dir);
		return;
	}
	struct proc *p = calloc(1, sizeof(*p));
	if (!p)
		return;
	p->id.exe = p->id.comm = p->id.name = p->id.cmdline = "";
	int err = seg_openat(&p->seg, dir->fd, name, dir->uid);
	if (!err && p->seg.hdr.pid != pid)
		err = SEG_E_NAME;
	if (err) {
		if (note_rejected(d, path, &st)) {
			d->st.segments_rejected++;
			log_warn("skipping segment %s: %s (%s)", path, seg_strerror(err),
			         p->seg.why);
		}
		seg_close(&p->seg);
		free(p);
		return;
	}
	err = seg_liveness(&p->seg, true);
	if (err == SEG_E_HIDDEN && p->seg.look_again) {
		look_later(d, dir, name);
	} else if (err == SEG_E_EXECED) {
		/* left as it is, looked at again on each rescan: a preloaded new image renames
		 * its own over it; once the process is gone it is stale */
		log_debug("leaving segment %s: %s", path, p->seg.why);
	} else if (err) {
		bool removed =
		        err == SEG_E_STALE && remove_stale(d, dir, name, p->seg.dev, p->seg.ino);
		if (removed)
			log_info("removed stale segment %s (%s)", path, p->seg.why);
		else if (note_rejected(d, path, &st))
			log_warn("skipping segment %s: %s (%s)", path, seg_strerror(err),
			         p->seg.why);
		if (removed)
			drop_rejected(d, path);
		else if ((r = find_rejected(d, path)))
			r->hidden = err == SEG_E_HIDDEN;
	}
	if (err) {
		seg_close(&p->seg);
		free(p);
		return;
	}
	drop_rejected(d, path);
	p->dir = dir;
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->refs = 1;
	p->seen_pass = g.pass;
	if (!proc_identity(p, true)) {
		seg_close(&p->seg);
		free(p->id.buf);
		free(p);
		return;
	}
	TAILQ_INSERT_TAIL(&d->procs, p, link);
	unsigned b = bucket(p->seg.hdr.pid);
	p->hnext = g.hash[b];
	g.hash[b] = p;
	b = name_bucket(dir, name);
	p->nnext = g.names[b];
	g.names[b] = p;
	if (u)
		u->n++;
	d->nprocs++;
	if (p->seg.pidns)
		log_info("discovered pid %d (%s) uid %u in %s: pid %d of pid namespace %llu",
		         p->seg.hdr.pid, proc_name(p), proc_uid(p), dir->path, p->seg.nspid,
		         (unsigned long long)p->seg.pidns);
	else
		log_info("discovered pid %d (%s) uid %u in %s", p->seg.hdr.pid, proc_name(p),
		         proc_uid(p), dir->path);
	policy_proc_added(d, p);  /* its profile, as early as possible */
	metrics_proc_found(d, p); /* after the profile: the service's labels */
}

/* A left-over "liballoc.<pid>.tmp" of a process that died while creating its segment (only
 * of our own pid namespace: another's pid means nothing here, and such a file holds no
 * lock to tell; it stays). */
static void scan_tmp(struct ctld *d, struct rundir *dir, const char *name, long pid)
{
	struct stat st;
	uint64_t ns;
	name_pid_ns(name, ".tmp", &ns);
	if ((ns && ns != procfs_self_pidns()) || kill((pid_t)pid, 0) == 0 || errno != ESRCH ||
	    dir->fd < 0 || fstatat(dir->fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISREG(st.st_mode) || st.st_uid != dir->uid)
		return;
	if (remove_stale(d, dir, name, st.st_dev, st.st_ino))
		log_info("removed stale %s/%s (pid %ld is gone)", dir->path, name, pid);
}

static void examine(struct ctld *d, struct rundir *dir, const char *name)
{
	long pid;
	if ((pid = name_pid(name, LA_SHM_SUFFIX)) > 0)
		scan_file(d, dir, name, pid);
	else if ((pid = name_pid(name, ".tmp")) > 0)
		scan_tmp(d, dir, name, pid);
}

static void enqueue(struct ctld *d, struct rundir *dir, const char *name)
{
	if (strlen(name) >= sizeof(((struct pending *)0)->name) ||
	    (name_pid(name, LA_SHM_SUFFIX) < 0 && name_pid(name, ".tmp") < 0))
		return;
	struct pending *q = new_pending(dir, name);
	if (!q)
		return;
	TAILQ_INSERT_TAIL(&g.queue, q, link);
	g.nqueue++;
	kick(d);
}

/* Check p again from the loop, not from inside a reader that is walking the list. */
static void recheck_later(struct ctld *d, struct proc *p)
{
	struct pending *q = malloc(sizeof(*q));
	if (!q)
		return;
	proc_ref(p);
	q->recheck = p;
	q->dir = p->dir;
	q->name[0] = 0;
	TAILQ_INSERT_HEAD(&g.queue, q, link);
	g.nqueue++;
	kick(d);
}

static void free_pending(struct pending *q)
{
	if (q->recheck)
		proc_unref(q->recheck);
	free(q);
}

static void drop_queued(struct rundir *dir)
{
	struct pending *q, *tmp;
	TAILQ_FOREACH_SAFE(q, &g.queue, link, tmp)
	if (q->dir == dir) {
		TAILQ_REMOVE(&g.queue, q, link);
		g.nqueue--;
		free_pending(q);
	}
	TAILQ_FOREACH_SAFE(q, &g.later, link, tmp)
	if (q->dir == dir) {
		TAILQ_REMOVE(&g.later, q, link);
		free_pending(q);
	}
}

static void forget_dir_procs(struct ctld *d, struct rundir *dir, const char *why)
{
	struct proc *p, *tmp;
	TAILQ_FOREACH_SAFE(p, &d->procs, link, tmp)
	if (p->dir == dir)
		forget(d, p, why);
}

static void unwatch(struct ctld *d, struct rundir *dir)
{
	if (dir->wd >= 0)
		inotify_rm_watch(d->inotify_fd, dir->wd);
	dir->wd = -1;
	if (dir->parent_wd >= 0)
		inotify_rm_watch(d->inotify_fd, dir->parent_wd);
	dir->parent_wd = -1;
}

static void close_dir(struct ctld *d, struct rundir *dir, const char *why)
{
	drop_queued(dir);
	forget_dir_procs(d, dir, why);
	if (dir->wd >= 0)
		inotify_rm_watch(d->inotify_fd, dir->wd);
	dir->wd = -1;
	if (dir->fd >= 0)
		close(dir->fd);
	dir->fd = -1;
}

/* A configured directory: watch its nearest existing ancestor (its parent once it exists)
 * for it, or a directory on the way, to appear, go or be replaced; each event re-checks the
 * directory, which moves the watch down as the path gets created. */
static void watch_parent(struct ctld *d, struct rundir *dir)
{
	if (dir->is_default)
		return;
	char parent[PATH_MAX];
	snprintf(parent, sizeof(parent), "%s", dir->path);
	int wd = -1;
	for (;;) {
		char *slash = strrchr(parent, '/');
		if (!slash)
			break;
		if (slash == parent)
			slash[1] = 0;
		else
			*slash = 0;
		wd = inotify_add_watch(d->inotify_fd, parent, PARENT_EVENTS);
		if (wd >= 0 || slash == parent)
			break;
	}
	if (dir->parent_wd >= 0 && dir->parent_wd != wd)
		inotify_rm_watch(d->inotify_fd, dir->parent_wd);
	dir->parent_wd = wd;
}

/* Open the directory (last component not a symlink), check it on the descriptor, and keep
 * that descriptor for every file operation inside until the path names another directory.
 * Sets dir->uid. Logs once per refusal. */
static bool check_dir(struct ctld *d, struct rundir *dir)
{
	const char *why = NULL;
	char buf[160];
	struct stat st;
	int fd = open(dir->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		int e = errno;
		if (e == ELOOP || e == ENOTDIR)
			why = "not a directory (symbolic links are refused)";
		else {
			snprintf(buf, sizeof(buf), "%s", strerror(e));
			why = buf;
		}
		if (e == ENOENT || dir->parent_wd < 0)
			watch_parent(d, dir);
	} else if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode)) {
		why = "not a directory";
	} else if (st.st_mode & 022) {
		snprintf(buf, sizeof(buf), "writable by others (mode %04o)", st.st_mode & 07777);
		why = buf;
	} else if (dir->is_default) {
		const char *base = strrchr(dir->path, '/') + 1,
		           *num = base + strcspn(base, "0123456789");
		if (!*num || strtoul(num, NULL, 10) != st.st_uid) {
			snprintf(buf, sizeof(buf), "owned by uid %u, not the uid in its name",
			         st.st_uid);
			why = buf;
		}
	}
	if (why) {
		if (fd >= 0)
			close(fd);
		if (!dir->refused || strcmp(dir->why, why))
			log_warn("not watching run directory %s: %s", dir->path, why);
		snprintf(dir->why, sizeof(dir->why), "%s", why);
		if (dir->fd >= 0)
			close_dir(d, dir, "run directory no longer usable");
		if (dir->wd >= 0)
			inotify_rm_watch(d->inotify_fd, dir->wd);
		dir->wd = -1;
		dir->refused = true;
		dir->squatted = dir->is_default && fd >= 0;
		return false;
	}
	dir->squatted = false;
	if (dir->fd >= 0 && (dir->dev != st.st_dev || dir->ino != st.st_ino))
		close_dir(d, dir, "run directory replaced");
	if (dir->fd < 0) {
		dir->fd = fd;
		dir->dev = st.st_dev;
		dir->ino = st.st_ino;
		dir->uid = st.st_uid;
	} else {
		close(fd);
	}
	if (dir->refused)
		log_info("watching run directory %s", dir->path);
	dir->refused = false;
	watch_parent(d, dir);
	if (dir->wd < 0) {
		/* watch the directory we hold, whatever its path names by now */
		char self[64];
		snprintf(self, sizeof(self), "/proc/self/fd/%d", dir->fd);
		dir->wd = inotify_add_watch(d->inotify_fd, self, DIR_EVENTS);
		if (dir->wd < 0 && !dir->unwatched)
			log_warn("inotify on %s: %s (relying on rescans)", dir->path,
			         strerror(errno));
		dir->unwatched = dir->wd < 0;
	}
	return true;
}

static struct rundir *want_dir(struct ctld *d, const char *path, bool is_default)
{
	struct rundir *dir;
	TAILQ_FOREACH(dir, &d->dirs, link)
	if (strcmp(dir->path, path) == 0) {
		dir->seen = true;
		dir->is_default = dir->is_default && is_default;
		return dir;
	}
	dir = calloc(1, sizeof(*dir));
	if (!dir)
		return NULL;
	snprintf(dir->path, sizeof(dir->path), "%s", path);
	dir->wd = dir->parent_wd = dir->fd = -1;
	dir->is_default = is_default;
	dir->seen = true;
	TAILQ_INSERT_TAIL(&d->dirs, dir, link);
	log_debug("run directory %s", path);
	return dir;
}

/* Every entry of root named PREFIX<digits> (the uid) becomes a default run directory. */
static void collect_numbered(struct ctld *d, const char *root, const char *prefix)
{
	DIR *dh = opendir(root);
	struct dirent *e;
	size_t pl = strlen(prefix);
	while (dh && (e = readdir(dh))) {
		const char *n = e->d_name;
		if (strncmp(n, prefix, pl) || !n[pl] ||
		    strspn(n + pl, "0123456789") != strlen(n + pl))
			continue;
		char path[PATH_MAX];
		if (snprintf(path, sizeof(path), "%s/%s", root, n) < (int)sizeof(path))
			want_dir(d, path, true);
	}
	if (dh)
		closedir(dh);
}

static void collect_dirs(struct ctld *d)
{
	struct rundir *dir;
	TAILQ_FOREACH(dir, &d->dirs, link)
	dir->seen = false;
	for (int i = 0; i < d->cfg.nrun_dirs; i++)
		want_dir(d, d->cfg.run_dirs[i], false);
	if (d->cfg.default_dirs) {
		/* "liballoc-" */
		char prefix[64];
		snprintf(prefix, sizeof(prefix), "%s-", strrchr(LA_SHM_DEFAULT_RUN_DIR, '/') + 1);
		collect_numbered(d, d->cfg.shm_root, prefix);
		if (g.root_fd >= 0)
			collect_numbered(d, d->cfg.uid_dirs, "");
	}
}

/* uid_dirs: the root-owned parent of the per-uid directories a process falls back to when
 * its default directory was squatted (created by another user first). */
static void open_uid_root(struct ctld *d)
{
	if (g.root_fd >= 0)
		close(g.root_fd);
	g.root_fd = -1;
	if (!d->cfg.default_dirs || !d->cfg.uid_dirs[0] || geteuid() != 0)
		return;
	if (mkdir(d->cfg.uid_dirs, 0755) < 0 && errno != EEXIST) {
		log_warn("cannot create %s: %s (squatted run directories cannot fall back)",
		         d->cfg.uid_dirs, strerror(errno));
		return;
	}
	int fd = open(d->cfg.uid_dirs, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || st.st_uid != 0 || (st.st_mode & 022)) {
		log_warn("refusing %s: must be a root-owned directory not writable by others",
		         d->cfg.uid_dirs);
		if (fd >= 0)
			close(fd);
		return;
	}
	g.root_fd = fd;
	g.root_dev = st.st_dev;
	g.root_ino = st.st_ino;
}

/* Make <uid_dirs>/<uid> (owned by uid and gid, 0700) unless something has that name;
 * true when made. */
static bool make_uid_dir(struct ctld *d, unsigned long uid, gid_t gid)
{
	char name[16];
	snprintf(name, sizeof(name), "%lu", uid);
	struct stat st;
	if (g.root_fd < 0 || fstatat(g.root_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		return false;
	if (mkdirat(g.root_fd, name, 0700) < 0 ||
	    fchownat(g.root_fd, name, (uid_t)uid, gid, AT_SYMLINK_NOFOLLOW) < 0) {
		log_warn("cannot provide %s/%s: %s", d->cfg.uid_dirs, name, strerror(errno));
		unlinkat(g.root_fd, name, AT_REMOVEDIR);
		return false;
	}
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/%s", d->cfg.uid_dirs, name);
	want_dir(d, path, true);
	return true;
}

/* The default directory of uid is squatted: give that uid its directory under uid_dirs
 * (owned by it, 0700), where its processes publish instead. Only for uids that exist. */
static void provide_uid_dir(struct ctld *d, struct rundir *dir)
{
	const char *base = strrchr(dir->path, '/') + 1, *num = base + strcspn(base, "0123456789");
	if (g.root_fd < 0 || !*num)
		return;
	char *end;
	unsigned long uid = strtoul(num, &end, 10);
	if (*end || uid > 0x7fffffff)
		return;
	struct passwd pw, *res = NULL;
	char buf[1024];
	if (getpwuid_r((uid_t)uid, &pw, buf, sizeof(buf), &res) != 0 || !res)
		return;
	if (make_uid_dir(d, uid, pw.pw_gid))
		log_warn("%s is not uid %lu's own (squatted): its processes publish in %s/%lu",
		         dir->path, uid, d->cfg.uid_dirs, uid);
}

/* provide_uid_dirs: the directories of the uids configured (containers whose processes
 * publish in <uid_dirs>/<uid> mounted from the host: their uids need not exist here, the
 * group is the uid's number then). */
static void provide_configured(struct ctld *d)
{
	for (int i = 0; i < d->cfg.nprovide_uids; i++) {
		unsigned long uid = d->cfg.provide_uids[i];
		struct passwd pw, *res = NULL;
		char buf[1024];
		gid_t gid = getpwuid_r((uid_t)uid, &pw, buf, sizeof(buf), &res) == 0 && res
		                    ? pw.pw_gid
		                    : (gid_t)uid;
		if (make_uid_dir(d, uid, gid))
			log_info("provided %s/%lu for uid %lu", d->cfg.uid_dirs, uid, uid);
	}
}

/* Read a directory's names into the queue (names only: examining them is sliced). */
static void scan_dir(struct ctld *d, struct rundir *dir)
{
	int fd = openat(dir->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dh = fd >= 0 ? fdopendir(fd) : NULL;
	if (!dh) {
		if (fd >= 0)
			close(fd);
		return;
	}
	struct dirent *e;
	while ((e = readdir(dh)))
		enqueue(d, dir, e->d_name);
	closedir(dh);
}

static void sweep_start(struct ctld *d);

void discover_rescan(struct ctld *d)
{
	/* one pass at a time: a machine too busy to finish a pass before the next rescan
	 * must not pile the same names up in the queue again and again */
	if (g.pass_open)
		return;
	loop_lag_probe(d);     /* the directories' names are read in one go */
	provide_configured(d); /* one removed unseen (no watch) */
	collect_dirs(d);
	g.pass++;
	struct rejected *r;
	TAILQ_FOREACH(r, &d->rejected, link)
	r->seen = false;
	struct rundir *dir, *dtmp;
	TAILQ_FOREACH_SAFE(dir, &d->dirs, link, dtmp)
	{
		if (!dir->seen) {
			unwatch(d, dir);
			close_dir(d, dir, "run directory no longer configured");
			TAILQ_REMOVE(&d->dirs, dir, link);
			free(dir);
			continue;
		}
		if (check_dir(d, dir))
			scan_dir(d, dir);
		else if (dir->squatted)
			provide_uid_dir(d, dir);
	}
	/* new directories provide_uid_dir added are scanned now too */
	TAILQ_FOREACH(dir, &d->dirs, link)
	if (dir->fd < 0 && !dir->refused && check_dir(d, dir))
		scan_dir(d, dir);
	g.pass_open = true;
	g.sweep_pending = true;
	kick(d);
}

/* The pass is complete: processes whose file was not seen are gone; the rest get their
 * liveness checked by the sweep. */
static void sweep_start(struct ctld *d)
{
	struct rejected *r, *rtmp;
	TAILQ_FOREACH_SAFE(r, &d->rejected, link, rtmp)
	if (!r->seen) {
		TAILQ_REMOVE(&d->rejected, r, link);
		free(r);
	}
	struct proc *p, *tmp;
	TAILQ_FOREACH_SAFE(p, &d->procs, link, tmp)
	if (p->seen_pass != g.pass && p->dir && p->dir->fd >= 0)
		forget(d, p, "segment gone");
	if (g.sweep)
		proc_unref(g.sweep);
	g.sweep = TAILQ_FIRST(&d->procs);
	if (g.sweep)
		proc_ref(g.sweep);
}

/* Is p still what it was? Drops it (removing a stale file) when not. */
static void check_live(struct ctld *d, struct proc *p)
{
	/* read moments ago (the history sampler, a list): the header was checked and the pid
	 * found alive with its start time then; what is left to prove is that it still holds
	 * its segment's lock */
	uint64_t now = seg_now_ns(CLOCK_MONOTONIC);
	bool recent = p->fig_ns && now - p->fig_ns < PROC_RECENT_NS && p->alive_ns &&
	              now - p->alive_ns < PROC_RECENT_NS && p->seg.mapped;
	int err = recent ? SEG_E_OK : seg_refresh(&p->seg);
	if (err) {
		/* relaid out or damaged: drop it and examine the file afresh right away */
		struct rundir *dir = p->dir;
		char name[sizeof(p->name)];
		snprintf(name, sizeof(name), "%s", p->name);
		forget(d, p, p->seg.why);
		if (dir && dir->fd >= 0)
			enqueue(d, dir, name);
		return;
	}
	err = recent ? seg_lock_held(&p->seg) : seg_liveness(&p->seg, false);
	if (err == SEG_E_STALE) {
		char path[PATH_MAX + 64];
		full_path(path, sizeof(path), p->dir, p->name);
		if (p->dir && remove_stale(d, p->dir, p->name, p->seg.dev, p->seg.ino))
			log_info("removed stale segment %s (%s)", path, p->seg.why);
		forget(d, p, p->seg.why);
	} else if (err) {
		forget(d, p, p->seg.why);
	}
}

/* One slice: queued names first, then the sweep; at most SLICE_NS of loop time. */
static void on_work(evutil_socket_t fd, short what, void *arg)
{
	struct ctld *d = arg;
	uint64_t deadline = seg_now_ns(CLOCK_MONOTONIC) + SLICE_NS;
	int n = 0;
	struct pending *q;
	while ((q = TAILQ_FIRST(&g.queue))) {
		if ((++n & 7) == 0 && seg_now_ns(CLOCK_MONOTONIC) > deadline)
			goto more;
		TAILQ_REMOVE(&g.queue, q, link);
		g.nqueue--;
		if (!q->recheck)
			examine(d, q->dir, q->name);
		else if (!q->recheck->gone)
			check_live(d, q->recheck);
		free_pending(q);
	}
	if (g.pass_open) {
		g.pass_open = false;
		d->st.rescans++; /* every name of the pass examined */
		if (g.sweep_pending) {
			g.sweep_pending = false;
			sweep_start(d);
		}
	}
	while (g.sweep) {
		if ((++n & 7) == 0 && seg_now_ns(CLOCK_MONOTONIC) > deadline)
			goto more;
		struct proc *p = g.sweep;
		g.sweep = TAILQ_NEXT(p, link);
		if (g.sweep)
			proc_ref(g.sweep);
		if (!p->gone)
			check_live(d, p);
		proc_unref(p);
	}
	return;
more:
	kick(d);
}

static void kick(struct ctld *d)
{
	if (g.work && !event_pending(g.work, EV_TIMEOUT, NULL))
		slice_again(d, g.work);
}

bool discover_busy(struct ctld *d)
{
	return g.nqueue > 0 || g.pass_open;
}

static struct rundir *dir_by_wd(struct ctld *d, int wd, bool *parent)
{
	struct rundir *dir;
	TAILQ_FOREACH(dir, &d->dirs, link)
	{
		if (dir->wd == wd) {
			*parent = false;
			return dir;
		}
		if (dir->parent_wd == wd) {
			*parent = true;
			return dir;
		}
	}
	return NULL;
}

/* root/name changed (a default directory): check that directory again, adding it when
 * it is new. False when name is not one of ours. */
static bool recheck_named(struct ctld *d, const char *root, const char *name)
{
	char prefix[64];
	snprintf(prefix, sizeof(prefix), "%s-", strrchr(LA_SHM_DEFAULT_RUN_DIR, '/') + 1);
	const char *num = name;
	if (root == d->cfg.shm_root)
		num = strncmp(name, prefix, strlen(prefix)) ? "" : name + strlen(prefix);
	if (!*num || strspn(num, "0123456789") != strlen(num))
		return false;
	char path[PATH_MAX + 64];
	snprintf(path, sizeof(path), "%s/%s", root, name);
	if (strlen(path) >= PATH_MAX)
		return false;
	struct rundir *dir = want_dir(d, path, true);
	if (!dir)
		return false;
	dir->recheck = true;
	return true;
}

/* One read of events a call. The descriptor stays readable while events are left: the rest
 * comes on the next loop turn, after the other events ready then. A directory an event
 * names (itself, or its parent) is checked and read once after the read, however many of
 * its events came in it. So a user who floods a directory of its own with events (renames
 * in a loop: each makes several, and each took a check and a read of the directory) cannot
 * hold the loop in this callback, and the slices that examine what it planted there still
 * run: the event runs at their priority, taking turns with them. */
static void on_inotify(evutil_socket_t fd, short what, void *arg)
{
	struct ctld *d = arg;
	_Alignas(struct inotify_event) char buf[16384];
	bool rescan = false;
	ssize_t n = read(fd, buf, sizeof(buf));
	if (n > 0) {
		for (char *p = buf; p < buf + n;) {
			struct inotify_event *ev = (struct inotify_event *)p;
			p += sizeof(*ev) + ev->len;
			if (ev->mask & IN_Q_OVERFLOW) {
				rescan = true;
				continue;
			}
			if (ev->wd == d->shm_root_wd || ev->wd == g.root_wd) {
				/* a per-user directory appeared, went or was replaced; a provided
				 * one removed is made again */
				if (ev->wd == g.root_wd && (ev->mask & (IN_DELETE | IN_MOVED_FROM)))
					provide_configured(d);
				if (!ev->len)
					rescan = true;
				else
					recheck_named(d,
					              ev->wd == d->shm_root_wd ? d->cfg.shm_root
					                                       : d->cfg.uid_dirs,
					              ev->name);
				continue;
			}
			bool parent;
			struct rundir *dir = dir_by_wd(d, ev->wd, &parent);
			if (!dir)
				continue;
			if (parent) {
				/* the directory we wait for, or one on its way, changed */
				struct rundir *x;
				TAILQ_FOREACH(x, &d->dirs, link)
				if (x->parent_wd == ev->wd)
					x->recheck = true;
				continue;
			}
			if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) {
				if (ev->mask & IN_IGNORED)
					dir->wd = -1;
				close_dir(d, dir, "run directory removed");
				rescan = true;
				continue;
			}
			if (!ev->len)
				continue;
			long pid = name_pid(ev->name, LA_SHM_SUFFIX);
			if (pid <= 0)
				continue;
			if (ev->mask & IN_CLOSE_WRITE) {
				/* the owner closed it: exited, or died (no unlink then) */
				struct proc *pr = find_name(dir, ev->name);
				if (pr)
					check_live(d, pr);
				continue;
			}
			enqueue(d, dir, ev->name);
		}
	}
	struct rundir *dir;
	TAILQ_FOREACH(dir, &d->dirs, link)
	{
		if (!dir->recheck)
			continue;
		dir->recheck = false;
		if (check_dir(d, dir))
			scan_dir(d, dir);
		else if (dir->squatted)
			provide_uid_dir(d, dir);
	}
	if (rescan)
		discover_rescan(d);
}

/* The names to look at again: into the queue. */
static void on_later(evutil_socket_t fd, short what, void *arg)
{
	struct ctld *d = arg;
	struct pending *q;
	while ((q = TAILQ_FIRST(&g.later))) {
		TAILQ_REMOVE(&g.later, q, link);
		TAILQ_INSERT_TAIL(&g.queue, q, link);
		g.nqueue++;
	}
	kick(d);
}

static void on_rescan(evutil_socket_t fd, short what, void *arg)
{
	discover_rescan(arg);
}

static void arm_rescan(struct ctld *d)
{
	struct timeval tv = {d->cfg.rescan_ms / 1000, (d->cfg.rescan_ms % 1000) * 1000};
	event_add(d->rescan_ev, &tv);
}

static void watch_shm_root(struct ctld *d)
{
	if (d->shm_root_wd >= 0)
		inotify_rm_watch(d->inotify_fd, d->shm_root_wd);
	d->shm_root_wd = -1;
	if (g.root_wd >= 0)
		inotify_rm_watch(d->inotify_fd, g.root_wd);
	g.root_wd = -1;
	if (d->cfg.default_dirs)
		d->shm_root_wd = inotify_add_watch(d->inotify_fd, d->cfg.shm_root, PARENT_EVENTS);
	if (g.root_fd >= 0) {
		/* a per-uid directory under uid_dirs: same handling as the shm root */
		char self[64];
		snprintf(self, sizeof(self), "/proc/self/fd/%d", g.root_fd);
		g.root_wd = inotify_add_watch(d->inotify_fd, self, PARENT_EVENTS);
	}
}

/* The cap on segments per uid, lowered so that segments (one descriptor each) can never
 * take the descriptors that connections and the daemon itself need. */
static void compute_cap(struct ctld *d)
{
	struct rlimit rl;
	long budget = 1L << 30;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		budget = (long)rl.rlim_cur - d->cfg.max_connections - d->cfg.http_max_connections -
		         64;
	long cap = d->cfg.max_segments_per_uid;
	if (budget / 2 < cap) {
		cap = budget / 2 > 1 ? budget / 2 : 1;
		log_warn("max_segments_per_uid lowered to %ld: the descriptor limit (%llu) must "
		         "also hold %d control and %d HTTP connections",
		         cap, (unsigned long long)rl.rlim_cur, d->cfg.max_connections,
		         d->cfg.http_max_connections);
	}
	g.effective_cap = (int)cap;
}

int discover_init(struct ctld *d)
{
	TAILQ_INIT(&d->procs);
	TAILQ_INIT(&d->dirs);
	TAILQ_INIT(&d->rejected);
	TAILQ_INIT(&g.queue);
	TAILQ_INIT(&g.later);
	d->shm_root_wd = -1;
	d->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (d->inotify_fd < 0) {
		log_error("inotify_init1: %s", strerror(errno));
		return -1;
	}
	d->inotify_ev = event_new(d->base, d->inotify_fd, EV_READ | EV_PERSIST, on_inotify, d);
	d->rescan_ev = event_new(d->base, -1, EV_PERSIST, on_rescan, d);
	g.work = event_new(d->base, -1, 0, on_work, d);
	g.later_ev = evtimer_new(d->base, on_later, d);
	/* the events feed the slices' queue: they run at the slices' priority (on_inotify) */
	if (!d->inotify_ev || !d->rescan_ev || !g.work || !g.later_ev ||
	    event_priority_set(d->inotify_ev, CTLD_PRIO_SLICE) || event_add(d->inotify_ev, NULL))
		return -1;
	event_priority_set(g.work, CTLD_PRIO_SLICE);
	compute_cap(d);
	open_uid_root(d);
	provide_configured(d);
	watch_shm_root(d);
	arm_rescan(d);
	discover_rescan(d);
	/* at start, finish discovery before serving: nothing else waits yet */
	while (discover_busy(d) || g.sweep)
		on_work(-1, 0, d);
	return 0;
}

void discover_reconfigure(struct ctld *d)
{
	compute_cap(d);
	open_uid_root(d);
	provide_configured(d);
	watch_shm_root(d);
	arm_rescan(d);
	discover_rescan(d);
}

int discover_segment_cap(void)
{
	return g.effective_cap;
}

void discover_shutdown(struct ctld *d)
{
	if (g.sweep)
		proc_unref(g.sweep);
	g.sweep = NULL;
	struct pending *q;
	while ((q = TAILQ_FIRST(&g.queue))) {
		TAILQ_REMOVE(&g.queue, q, link);
		free_pending(q);
	}
	g.nqueue = 0;
	struct proc *p;
	while ((p = TAILQ_FIRST(&d->procs))) {
		TAILQ_REMOVE(&d->procs, p, link);
		p->gone = true;
		proc_unref(p);
	}
	memset(g.hash, 0, sizeof(g.hash));
	memset(g.names, 0, sizeof(g.names));
	d->nprocs = 0;
	struct rundir *dir;
	while ((dir = TAILQ_FIRST(&d->dirs))) {
		TAILQ_REMOVE(&d->dirs, dir, link);
		if (dir->fd >= 0)
			close(dir->fd);
		free(dir);
	}
	struct rejected *r;
	while ((r = TAILQ_FIRST(&d->rejected))) {
		TAILQ_REMOVE(&d->rejected, r, link);
		free(r);
	}
	free(g.uids);
	g.uids = NULL;
	g.nuids = g.cap_uids = 0;
	if (g.root_fd >= 0)
		close(g.root_fd);
	g.root_fd = -1;
	if (g.work)
		event_free(g.work);
	g.work = NULL;
	while ((q = TAILQ_FIRST(&g.later))) {
		TAILQ_REMOVE(&g.later, q, link);
		free_pending(q);
	}
	if (g.later_ev)
		event_free(g.later_ev);
	g.later_ev = NULL;
	if (d->inotify_ev)
		event_free(d->inotify_ev);
	if (d->rescan_ev)
		event_free(d->rescan_ev);
	if (d->inotify_fd >= 0)
		close(d->inotify_fd);
	d->inotify_ev = d->rescan_ev = NULL;
	d->inotify_fd = -1;
}

/* ---- identity and snapshots ---------------------------------------------------------------- */

/* Process titles and uids change without a sign in /proc/<pid>/stat: the identity is read
 * again when older than id_max_age_ns (by the history sampler's sweep, else by the next
 * list or scrape), and at once when stat shows another comm (exec, prctl(PR_SET_NAME)).
 * A young process is the one that changes them: a worker forked as root drops to its user,
 * a service sets its title, in its first seconds. So the bound is a quarter of the
 * process's age, at least 1 s and at most 30 s: a worker that switched uid 2 s after its
 * start is shown with its own uid about a second later, and a process older than two
 * minutes costs one read per 30 s as before. */
#define ID_MIN_AGE_NS   1000000000ull
#define ID_MAX_AGE_NS   30000000000ull
/* A read that missed a part (exe, comm, command line, uids) is tried again on the next scan
 * after ID_RETRY_MIN_MS, the wait doubling up to the age bound above: the misses seen are
 * transient (a process mid-exec or exiting, whose mm the kernel is swapping or tearing
 * down; a fresh child not yet fully set up), and what stays unreadable (another user's exe
 * for a non-root daemon, hidepid) costs a few reads and then one per bound as before. */
#define ID_RETRY_MIN_MS 10u
#define ID_RETRY_MAX_MS 30000u

static uint64_t id_max_age_ns(const struct proc *p)
{
	long hz = sysconf(_SC_CLK_TCK);
	if (hz <= 0)
		return ID_MAX_AGE_NS;
	uint64_t started = p->seg.hdr.start_time * (1000000000ull / (uint64_t)hz),
	         up = seg_now_ns(CLOCK_BOOTTIME);
	uint64_t quarter = up > started ? (up - started) / 4 : 0;
	return quarter < ID_MIN_AGE_NS   ? ID_MIN_AGE_NS
	       : quarter > ID_MAX_AGE_NS ? ID_MAX_AGE_NS
	                                 : quarter;
}

/* Keep what a read found; the strings are copied again only when one changed (a process
 * title), and the old ones stay when there is no memory for the new. */
static void id_keep(struct proc_id *id, const struct procfs_info *pi)
{
	id->have = pi->have;
	id->uid = pi->uid[0];
	if (id->buf && !strcmp(id->exe, pi->exe) && !strcmp(id->comm, pi->comm) &&
	    !strcmp(id->name, pi->name) && !strcmp(id->cmdline, pi->cmdline))
		return;
	size_t ne = strlen(pi->exe) + 1, nc = strlen(pi->comm) + 1, nn = strlen(pi->name) + 1,
	       nl = strlen(pi->cmdline) + 1;
	char *b = malloc(ne + nc + nn + nl);
	if (!b)
		return;
	free(id->buf);
	id->buf = b;
	id->exe = memcpy(b, pi->exe, ne);
	id->comm = memcpy(b + ne, pi->comm, nc);
	id->name = memcpy(b + ne + nc, pi->name, nn);
	id->cmdline = memcpy(b + ne + nc + nn, pi->cmdline, nl);
}

bool proc_identity(struct proc *p, bool force)
{
	uint64_t now = seg_now_ns(CLOCK_MONOTONIC);
	if (!force && p->id_ns) {
		uint64_t due = id_max_age_ns(p);
		if (p->id_retry_ms && (uint64_t)p->id_retry_ms * 1000000ull < due)
			due = (uint64_t)p->id_retry_ms * 1000000ull;
		if (now - p->id_ns < due)
			return true;
	}
	struct procfs_info pi;
	int r = procfs_read(p->seg.hdr.pid, PROCFS_IDENTITY, p->seg.hdr.start_time, &pi);
	if (r < 0 && errno == ESRCH)
		return false;
	/* what could be read; a part missed is read again soon (ID_RETRY_MIN_MS), not only
	 * when the identity is old */
	id_keep(&p->id, &pi);
	p->id_ns = now;
	if ((pi.have & PROCFS_IDENTITY) != PROCFS_IDENTITY)
		p->id_retry_ms = !p->id_retry_ms                         ? ID_RETRY_MIN_MS
		                 : p->id_retry_ms >= ID_RETRY_MAX_MS / 2 ? ID_RETRY_MAX_MS
		                                                         : p->id_retry_ms * 2;
	else
		p->id_retry_ms = 0;
	char dir[PATH_MAX], rel[PATH_MAX];
	if (cgroup_of_pid(p->seg.hdr.pid, dir, sizeof(dir), rel, sizeof(rel)) == 0)
		snprintf(p->cgroup, sizeof(p->cgroup), "%.*s", (int)sizeof(p->cgroup) - 1, rel);
	return true;
}

const char *proc_name(const struct proc *p)
{
	return p->id.name[0] ? p->id.name : "?";
}

uid_t proc_uid(const struct proc *p)
{
	return (p->id.have & PROCFS_STATUS) ? p->id.uid : p->seg.uid;
}

bool proc_name_matches(const struct proc *p, const char *name)
{
	return procfs_names_match(p->id.have, p->id.name, p->id.comm, p->id.exe, name);
}

const char *proc_exe(const struct proc *p)
{
	return p->id.exe[0] ? p->id.exe : "?";
}

/* A torn read: the process holds a seqlock odd (hostile, or stopped mid-update). It stays
 * listed as unreadable, with its last good figures, and is read again after a back-off
 * that doubles up to 30 s; one log line when it becomes unreadable. */
static void mark_unreadable(struct ctld *d, struct proc *p)
{
	p->unreadable_reads++;
	d->st.unreadable_reads++;
	p->backoff_ms = p->backoff_ms ? p->backoff_ms * 2 : BACKOFF_MIN;
	if (p->backoff_ms > BACKOFF_MAX)
		p->backoff_ms = BACKOFF_MAX;
	p->retry_ns = seg_now_ns(CLOCK_MONOTONIC) + (uint64_t)p->backoff_ms * 1000000ull;
	if (!p->unreadable)
		log_warn("pid %d (%s): %s; shown as unreadable, read again with back-off",
		         p->seg.hdr.pid, proc_name(p), p->seg.why);
	p->unreadable = true;
}

/* The memory figures of a snapshot's totals, and RSS beyond them. */
static void snap_memory(struct proc_snap *s)
{
	la_memory_of(&s->total, &s->mem);
	s->non_allocator_rss_bytes = la_sub0(s->rss_bytes, s->mem.resident);
}

/* RSS and threads from /proc/<pid>/stat (one open, one read), and the identity when it is
 * old or stat shows another comm. */
static void read_stat(struct proc *p, uint64_t now)
{
	struct procfs_info pi;
	if (procfs_read(p->seg.hdr.pid, PROCFS_STAT, p->seg.hdr.start_time, &pi) == 0) {
		p->alive_ns = now;
		p->rss_bytes = pi.vm_rss;
		p->threads = pi.threads;
		bool renamed = (p->id.have & PROCFS_COMM) && strcmp(pi.stat_comm, p->id.comm);
		proc_identity(p, renamed);
	} else {
		p->rss_bytes = 0;
		p->threads = 0;
		proc_identity(p, false);
	}
}

bool proc_snapshot(struct ctld *d, struct proc *p, struct proc_snap *s, unsigned what,
                   uint64_t max_age_ns)
{
	memset(s, 0, sizeof(*s));
	s->p = p;
	uint64_t now = seg_now_ns(CLOCK_MONOTONIC);
	bool recent = !(what & SNAP_ARENAS) && p->fig_ns && now - p->fig_ns < max_age_ns;
	if (!recent)
		read_stat(p, now);
	else if (p->id_retry_ms)
		proc_identity(p, false); /* a part missed: figures may be recent, not that */
	s->rss_bytes = p->rss_bytes;
	s->threads = p->threads;
	if (p->unreadable && (recent || now < p->retry_ns)) {
		s->unreadable = true;
		s->total = p->last_total;
		snap_memory(s);
		return false;
	}
	int err = SEG_E_OK;
	if (recent) {
		s->total = p->last_total;
	} else {
		p->fig_ns = 0; /* until this read succeeds */
		err = seg_refresh(&p->seg);
	}
	uint32_t na = p->seg.hdr.arena_count;
	if (!err && !recent && !(what & SNAP_ARENAS)) {
		err = seg_read_totals(&p->seg, &s->total);
	} else if (!err && !recent) {
		struct seg_block pb;
		s->arenas = calloc(na + 1, sizeof(*s->arenas));
		err = s->arenas ? seg_read_blocks(&p->seg, 0, na, &pb, s->arenas) : SEG_E_IO;
		if (!err) {
			s->total = pb.c;
			for (uint32_t i = 0; i < na; i++)
				la_counters_add(&s->total, &s->arenas[i].c);
			s->narenas = na;
		}
	}
	if (!err && (what & SNAP_TUNABLES))
		err = seg_read_tunables(&p->seg, s->tun, &s->ntun);
	if (err == SEG_E_TORN) {
		mark_unreadable(d, p);
		p->fig_ns = now;
		proc_snap_free(s);
		s->unreadable = true;
		s->total = p->last_total;
		snap_memory(s);
		return false;
	}
	if (err) {
		log_warn("reading pid %d (%s/%s): %s (%s)", p->seg.hdr.pid,
		         p->dir ? p->dir->path : "?", p->name, seg_strerror(err), p->seg.why);
		p->fig_ns = 0;
		proc_snap_free(s);
		/* a changed or damaged segment is re-examined from scratch right away */
		if (!p->gone)
			recheck_later(d, p);
		return false;
	}
	if (!recent) {
		if (p->unreadable)
			log_info("pid %d (%s) is readable again", p->seg.hdr.pid, proc_name(p));
		p->unreadable = false;
		p->backoff_ms = 0;
		p->last_total = s->total;
		p->fig_ns = now;
	}
	snap_memory(s);
	s->ok = true;
	return true;
}

void proc_snap_free(struct proc_snap *s)
{
	free(s->arenas);
	s->arenas = NULL;
	s->narenas = 0;
}
