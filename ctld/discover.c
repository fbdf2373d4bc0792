/* discover.c — finds segments: inotify on every run directory (and on the shm root for new
 * per-user directories) plus a periodic rescan that also checks liveness. A refused file is
 * logged once and remembered until it changes; a stale one is removed when we may. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctld.h"
#include "log.h"

#define DIR_EVENTS                                                                               \
	(IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE | IN_DELETE | IN_MOVED_FROM | IN_DELETE_SELF | \
	 IN_MOVE_SELF | IN_ONLYDIR)

void proc_ref(struct proc *p)
{
	p->refs++;
}

void proc_unref(struct proc *p)
{
	if (--p->refs > 0)
		return;
	seg_close(&p->seg);
	free(p);
}

static void forget(struct ctld *d, struct proc *p, const char *why)
{
	log_info("forgetting pid %d (%s): %s", p->seg.hdr.pid, proc_name(p), why);
	timeline_proc_gone(d, p, why);
	TAILQ_REMOVE(&d->procs, p, link);
	d->nprocs--;
	p->gone = true;
	proc_unref(p);
}

struct proc *discover_find(struct ctld *d, pid_t pid)
{
	struct proc *p;
	TAILQ_FOREACH(p, &d->procs, link)
	if (p->seg.hdr.pid == pid)
		return p;
	return NULL;
}

static struct proc *find_path(struct ctld *d, const char *path)
{
	struct proc *p;
	TAILQ_FOREACH(p, &d->procs, link)
	if (strcmp(p->path, path) == 0)
		return p;
	return NULL;
}

/* "liballoc.<digits><suffix>" -> pid, else -1. */
static long name_pid(const char *name, const char *suffix)
{
	size_t pl = strlen(LA_SHM_PREFIX), sl = strlen(suffix), n = strlen(name);
	if (n <= pl + sl || strncmp(name, LA_SHM_PREFIX, pl) || strcmp(name + n - sl, suffix))
		return -1;
	long pid = 0;
	for (size_t i = pl; i < n - sl; i++) {
		if (name[i] < '0' || name[i] > '9' || pid > 100000000)
			return -1;
		pid = pid * 10 + (name[i] - '0');
	}
	return pid > 0 ? pid : -1;
}

static int64_t mtime_ns(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
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

static bool rejected_unchanged(struct ctld *d, const char *path, const struct stat *st)
{
	struct rejected *r = find_rejected(d, path);
	if (!r)
		return false;
	r->seen = true;
	return r->dev == st->st_dev && r->ino == st->st_ino && r->size == st->st_size &&
	       r->mtime_ns == mtime_ns(st);
}

static void drop_rejected(struct ctld *d, const char *path)
{
	struct rejected *r = find_rejected(d, path);
	if (r) {
		TAILQ_REMOVE(&d->rejected, r, link);
		free(r);
	}
}

/* Unlink path only if it is still the file we examined. */
static bool remove_stale(struct ctld *d, const char *path, dev_t dev, ino_t ino)
{
	if (!d->cfg.remove_stale)
		return false;
	struct stat st;
	if (lstat(path, &st) < 0 || st.st_dev != dev || st.st_ino != ino)
		return false;
	if (unlink(path) < 0) {
		log_debug("cannot remove stale %s: %s", path, strerror(errno));
		return false;
	}
	d->st.segments_stale_removed++;
	return true;
}

static void scan_file(struct ctld *d, struct rundir *dir, const char *name)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof(path), "%s/%s", dir->path, name) >= (int)sizeof(path))
		return;
	struct stat st;
	struct proc *old = find_path(d, path);
	if (lstat(path, &st) < 0) {
		if (old)
			forget(d, old, "segment removed");
		drop_rejected(d, path);
		return;
	}
	if (old && old->seg.dev == st.st_dev && old->seg.ino == st.st_ino) {
		old->seen = true;
		return;
	}
	if (old)
		forget(d, old, "segment replaced");
	if (rejected_unchanged(d, path, &st))
		return;
	struct proc *p = calloc(1, sizeof(*p));
	if (!p)
		return;
	int err = seg_open(&p->seg, path, dir->uid);
	if (err) {
		if (note_rejected(d, path, &st)) {
			d->st.segments_rejected++;
			log_warn("skipping segment %s: %s (%s)", path, seg_strerror(err),
			         p->seg.why);
		}
		free(p);
		return;
	}
	err = seg_liveness(&p->seg, true);
	if (err) {
		bool removed = err == SEG_E_STALE && remove_stale(d, path, p->seg.dev, p->seg.ino);
		if (removed)
			log_info("removed stale segment %s (%s)", path, p->seg.why);
		else if (note_rejected(d, path, &st))
			log_warn("skipping segment %s: %s (%s)", path, seg_strerror(err),
			         p->seg.why);
		if (removed)
			drop_rejected(d, path);
		seg_close(&p->seg);
		free(p);
		return;
	}
	drop_rejected(d, path);
	snprintf(p->path, sizeof(p->path), "%s", path);
	proc_identity(p, true);
	p->refs = 1;
	p->seen = true;
	TAILQ_INSERT_TAIL(&d->procs, p, link);
	d->nprocs++;
	log_info("discovered pid %d (%s) uid %u in %s", p->seg.hdr.pid, proc_name(p), p->seg.uid,
	         dir->path);
}

/* A left-over "liballoc.<pid>.tmp" of a process that died while creating its segment. */
static void scan_tmp(struct ctld *d, struct rundir *dir, const char *name, long pid)
{
	char path[PATH_MAX], proc[64];
	if (snprintf(path, sizeof(path), "%s/%s", dir->path, name) >= (int)sizeof(path))
		return;
	snprintf(proc, sizeof(proc), "/proc/%ld", pid);
	struct stat st;
	if (access(proc, F_OK) == 0 || lstat(path, &st) < 0 || !S_ISREG(st.st_mode))
		return;
	if (remove_stale(d, path, st.st_dev, st.st_ino))
		log_info("removed stale %s (pid %ld is gone)", path, pid);
}

static void scan_dir(struct ctld *d, struct rundir *dir)
{
	DIR *dh = opendir(dir->path);
	if (!dh)
		return;
	struct dirent *e;
	while ((e = readdir(dh))) {
		long pid;
		if ((pid = name_pid(e->d_name, LA_SHM_SUFFIX)) > 0)
			scan_file(d, dir, e->d_name);
		else if ((pid = name_pid(e->d_name, ".tmp")) > 0)
			scan_tmp(d, dir, e->d_name, pid);
	}
	closedir(dh);
}

static bool under_dir(const struct proc *p, const struct rundir *dir)
{
	size_t n = strlen(dir->path);
	return strncmp(p->path, dir->path, n) == 0 && p->path[n] == '/' &&
	       !strchr(p->path + n + 1, '/');
}

static void forget_dir_procs(struct ctld *d, struct rundir *dir, const char *why)
{
	struct proc *p, *tmp;
	TAILQ_FOREACH_SAFE(p, &d->procs, link, tmp)
	if (under_dir(p, dir))
		forget(d, p, why);
}

static void unwatch(struct ctld *d, struct rundir *dir)
{
	if (dir->wd >= 0)
		inotify_rm_watch(d->inotify_fd, dir->wd);
	dir->wd = -1;
}

/* Is the directory safe to trust? Sets dir->uid. Logs once per refusal. */
static bool check_dir(struct ctld *d, struct rundir *dir)
{
	struct stat st;
	const char *why = NULL;
	char buf[128];
	if (lstat(dir->path, &st) < 0) {
		snprintf(buf, sizeof(buf), "%s", strerror(errno));
		why = buf;
	} else if (!S_ISDIR(st.st_mode)) {
		why = "not a directory (symbolic links are refused)";
	} else if (st.st_mode & 022) {
		snprintf(buf, sizeof(buf), "writable by others (mode %04o)", st.st_mode & 07777);
		why = buf;
	} else if (dir->is_default) {
		const char *dash = strrchr(dir->path, '-');
		if (!dash || strtoul(dash + 1, NULL, 10) != st.st_uid)
			why = "owner does not match the uid in its name";
	}
	if (why) {
		if (!dir->refused)
			log_warn("not watching run directory %s: %s", dir->path, why);
		dir->refused = true;
		unwatch(d, dir);
		return false;
	}
	if (dir->refused)
		log_info("watching run directory %s", dir->path);
	dir->refused = false;
	dir->uid = st.st_uid;
	if (dir->wd < 0) {
		dir->wd = inotify_add_watch(d->inotify_fd, dir->path, DIR_EVENTS);
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
	dir->wd = -1;
	dir->is_default = is_default;
	dir->seen = true;
	TAILQ_INSERT_TAIL(&d->dirs, dir, link);
	log_debug("run directory %s", path);
	return dir;
}

static void collect_dirs(struct ctld *d)
{
	struct rundir *dir;
	TAILQ_FOREACH(dir, &d->dirs, link)
	dir->seen = false;
	for (int i = 0; i < d->cfg.nrun_dirs; i++)
		want_dir(d, d->cfg.run_dirs[i], false);
	if (d->cfg.default_dirs) {
		DIR *dh = opendir(d->cfg.shm_root);
		struct dirent *e;
		const char *base = strrchr(LA_SHM_DEFAULT_RUN_DIR, '/') + 1; /* "liballoc" */
		size_t bl = strlen(base);
		while (dh && (e = readdir(dh))) {
			const char *n = e->d_name;
			if (strncmp(n, base, bl) || n[bl] != '-' || !n[bl + 1] ||
			    strspn(n + bl + 1, "0123456789") != strlen(n + bl + 1))
				continue;
			char path[PATH_MAX];
			if (snprintf(path, sizeof(path), "%s/%s", d->cfg.shm_root, n) <
			    (int)sizeof(path))
				want_dir(d, path, true);
		}
		if (dh)
			closedir(dh);
	}
}

void discover_rescan(struct ctld *d)
{
	collect_dirs(d);
	struct rejected *r, *rtmp;
	TAILQ_FOREACH(r, &d->rejected, link)
	r->seen = false;
	struct proc *p, *tmp;
	TAILQ_FOREACH(p, &d->procs, link)
	p->seen = false;
	struct rundir *dir, *dtmp;
	TAILQ_FOREACH_SAFE(dir, &d->dirs, link, dtmp)
	{
		if (!dir->seen) {
			unwatch(d, dir);
			forget_dir_procs(d, dir, "run directory no longer configured");
			TAILQ_REMOVE(&d->dirs, dir, link);
			free(dir);
			continue;
		}
		if (check_dir(d, dir))
			scan_dir(d, dir);
	}
	TAILQ_FOREACH_SAFE(p, &d->procs, link, tmp)
	{
		if (!p->seen) {
			forget(d, p, "segment gone");
			continue;
		}
		int err = seg_refresh(&p->seg);
		if (err) {
			/* relaid out or damaged: drop it and examine the file afresh right away */
			char name[PATH_MAX];
			const char *slash = strrchr(p->path, '/');
			snprintf(name, sizeof(name), "%s", slash ? slash + 1 : p->path);
			struct rundir *pd = NULL;
			TAILQ_FOREACH(dir, &d->dirs, link)
			if (under_dir(p, dir))
				pd = dir;
			forget(d, p, p->seg.why);
			if (pd && !pd->refused)
				scan_file(d, pd, name);
			continue;
		}
		err = seg_liveness(&p->seg, false);
		if (err == SEG_E_STALE) {
			if (remove_stale(d, p->path, p->seg.dev, p->seg.ino))
				log_info("removed stale segment %s (%s)", p->path, p->seg.why);
			forget(d, p, p->seg.why);
		} else if (err) {
			forget(d, p, p->seg.why);
		}
	}
	TAILQ_FOREACH_SAFE(r, &d->rejected, link, rtmp)
	if (!r->seen) {
		TAILQ_REMOVE(&d->rejected, r, link);
		free(r);
	}
}

static struct rundir *dir_by_wd(struct ctld *d, int wd)
{
	struct rundir *dir;
	TAILQ_FOREACH(dir, &d->dirs, link)
	if (dir->wd == wd)
		return dir;
	return NULL;
}

static void on_inotify(evutil_socket_t fd, short what, void *arg)
{
	struct ctld *d = arg;
	_Alignas(struct inotify_event) char buf[16384];
	bool rescan = false;
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n <= 0)
			break;
		for (char *p = buf; p < buf + n;) {
			struct inotify_event *ev = (struct inotify_event *)p;
			p += sizeof(*ev) + ev->len;
			if (ev->mask & IN_Q_OVERFLOW) {
				rescan = true;
				continue;
			}
			if (ev->wd == d->shm_root_wd) {
				rescan = true; /* a per-user directory appeared */
				continue;
			}
			struct rundir *dir = dir_by_wd(d, ev->wd);
			if (!dir)
				continue;
			if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) {
				if (ev->mask & IN_IGNORED)
					dir->wd = -1;
				forget_dir_procs(d, dir, "run directory removed");
				rescan = true;
				continue;
			}
			if (!ev->len)
				continue;
			if (name_pid(ev->name, LA_SHM_SUFFIX) > 0)
				scan_file(d, dir, ev->name);
		}
	}
	if (rescan)
		discover_rescan(d);
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
	if (d->cfg.default_dirs)
		d->shm_root_wd = inotify_add_watch(d->inotify_fd, d->cfg.shm_root,
		                                   IN_CREATE | IN_MOVED_TO | IN_ONLYDIR);
}

int discover_init(struct ctld *d)
{
	TAILQ_INIT(&d->procs);
	TAILQ_INIT(&d->dirs);
	TAILQ_INIT(&d->rejected);
	d->shm_root_wd = -1;
	d->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (d->inotify_fd < 0) {
		log_error("inotify_init1: %s", strerror(errno));
		return -1;
	}
	d->inotify_ev = event_new(d->base, d->inotify_fd, EV_READ | EV_PERSIST, on_inotify, d);
	d->rescan_ev = event_new(d->base, -1, EV_PERSIST, on_rescan, d);
	if (!d->inotify_ev || !d->rescan_ev || event_add(d->inotify_ev, NULL))
		return -1;
	watch_shm_root(d);
	arm_rescan(d);
	discover_rescan(d);
	return 0;
}

void discover_reconfigure(struct ctld *d)
{
	watch_shm_root(d);
	arm_rescan(d);
	discover_rescan(d);
}

void discover_shutdown(struct ctld *d)
{
	struct proc *p;
	while ((p = TAILQ_FIRST(&d->procs))) {
		TAILQ_REMOVE(&d->procs, p, link);
		p->gone = true;
		proc_unref(p);
	}
	d->nprocs = 0;
	struct rundir *dir;
	while ((dir = TAILQ_FIRST(&d->dirs))) {
		TAILQ_REMOVE(&d->dirs, dir, link);
		free(dir);
	}
	struct rejected *r;
	while ((r = TAILQ_FIRST(&d->rejected))) {
		TAILQ_REMOVE(&d->rejected, r, link);
		free(r);
	}
	if (d->inotify_ev)
		event_free(d->inotify_ev);
	if (d->rescan_ev)
		event_free(d->rescan_ev);
	if (d->inotify_fd >= 0)
		close(d->inotify_fd);
	d->inotify_ev = d->rescan_ev = NULL;
	d->inotify_fd = -1;
}

/* ---- snapshots ---------------------------------------------------------------------------- */

#define ID_MAX_AGE_NS 2000000000ull /* process titles change: re-read every 2 s at most */

bool proc_identity(struct proc *p, bool force)
{
	uint64_t now = seg_now_ns(CLOCK_MONOTONIC);
	if (!force && p->id_ns && now - p->id_ns < ID_MAX_AGE_NS)
		return true;
	struct procfs_info pi;
	int r = procfs_read(p->seg.hdr.pid, PROCFS_IDENTITY, p->seg.hdr.start_time, &pi);
	if (r < 0 && errno == ESRCH)
		return false;
	p->id = pi; /* what could be read (a non-root daemon may not read another's exe) */
	p->id_ns = now;
	return true;
}

const char *proc_name(const struct proc *p)
{
	return p->id.name[0] ? p->id.name : "?";
}

uid_t proc_uid(const struct proc *p)
{
	return (p->id.have & PROCFS_STATUS) ? p->id.uid[0] : p->seg.uid;
}

const char *proc_exe(const struct proc *p)
{
	return p->id.exe[0] ? p->id.exe : "?";
}

bool proc_snapshot(struct ctld *d, struct proc *p, struct proc_snap *s, bool with_arenas)
{
	memset(s, 0, sizeof(*s));
	s->p = p;
	int err = seg_refresh(&p->seg);
	if (!err)
		err = seg_read_totals(&p->seg, &s->total);
	if (!err)
		err = seg_read_tunables(&p->seg, s->tun, &s->ntun);
	if (!err && with_arenas && p->seg.hdr.arena_count) {
		s->arenas = calloc(p->seg.hdr.arena_count, sizeof(*s->arenas));
		if (!s->arenas)
			return false;
		for (uint32_t i = 0; i < p->seg.hdr.arena_count && !err; i++)
			err = seg_read_block(&p->seg, (int)i, &s->arenas[i]);
		s->narenas = err ? 0 : p->seg.hdr.arena_count;
	}
	if (err) {
		log_warn("reading pid %d (%s): %s (%s)", p->seg.hdr.pid, p->path, seg_strerror(err),
		         p->seg.why);
		proc_snap_free(s);
		/* a changed or damaged segment is re-examined from scratch by the next rescan */
		event_active(d->rescan_ev, EV_TIMEOUT, 0);
		return false;
	}
	struct procfs_info pi;
	if (procfs_read(p->seg.hdr.pid, PROCFS_STAT, p->seg.hdr.start_time, &pi) == 0) {
		s->rss_bytes = pi.vm_rss;
		s->threads = pi.threads;
	}
	proc_identity(p, false);
	s->ok = true;
	return true;
}

void proc_snap_free(struct proc_snap *s)
{
	free(s->arenas);
	s->arenas = NULL;
	s->narenas = 0;
}
