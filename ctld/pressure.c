/* pressure.c — memory-pressure watchers (see pressure.h): PSI triggers, cgroup v1 usage
 * thresholds through cgroup.event_control, cgroup v2 memory.events through inotify. Every
 * descriptor is watched by the libevent loop; a watcher costs nothing until the kernel
 * signals it. */
#include "pressure.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

enum watch_kind { W_PSI, W_CG1, W_CG2 };

struct pressure_watch {
	enum watch_kind kind;
	char path[PATH_MAX]; /* the PSI file or the cgroup directory */
	pressure_cb cb;
	void *arg;
	uint64_t events;
	/* PSI: the pressure file in its own epoll set (EPOLLPRI), that set on the loop */
	int psi_fd, psi_ep;
	struct event *psi_ev;
	char psi_desc[64];
	/* v1: one eventfd registered at every threshold */
	int efd, usage_fd;
	struct event *efd_ev;
	/* v2: inotify on memory.events */
	int ino_fd;
	struct event *ino_ev;
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- reading files -------------------------------------------------------------------- */

static int read_text(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, len - 1);
	int e = errno;
	close(fd);
	if (n < 0) {
		errno = e;
		return -1;
	}
	buf[n] = 0;
	return 0;
}

/* A file holding one number ("max" and v1's huge "no limit" values read as UINT64_MAX). */
static int read_u64(const char *dir, const char *name, uint64_t *out)
{
	char path[PATH_MAX + 64], buf[64];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (read_text(path, buf, sizeof(buf)) < 0)
		return -1;
	if (strncmp(buf, "max", 3) == 0) {
		*out = UINT64_MAX;
		return 0;
	}
	char *end;
	errno = 0;
	unsigned long long v = strtoull(buf, &end, 10);
	if (errno || end == buf) {
		errno = EINVAL;
		return -1;
	}
	/* v1 reports "no limit" as LONG_MAX rounded down to a page */
	*out = v >= (1ULL << 62) ? UINT64_MAX : (uint64_t)v;
	return 0;
}

/* "key value" lines (memory.events, memory.oom_control) */
static uint64_t keyed(const char *text, const char *key)
{
	size_t kl = strlen(key);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, key, kl) == 0 && p[kl] == ' ')
			return strtoull(p + kl + 1, NULL, 10);
	return 0;
}

int cgroup_memory_read(const char *dir, struct cg_memory *m)
{
	memset(m, 0, sizeof(*m));
	char path[PATH_MAX + 64], buf[1024];
	if (read_u64(dir, "memory.usage_in_bytes", &m->usage) == 0) {
		m->version = 1;
		if (read_u64(dir, "memory.limit_in_bytes", &m->limit) < 0)
			return -1;
		m->high = m->limit;
		snprintf(path, sizeof(path), "%s/memory.oom_control", dir);
		if (read_text(path, buf, sizeof(buf)) == 0)
			m->ev_oom_kill = keyed(buf, "oom_kill");
		return 0;
	}
	if (read_u64(dir, "memory.current", &m->usage) < 0) {
		if (errno == ENOENT)
			errno = ENOENT;
		return -1;
	}
	m->version = 2;
	if (read_u64(dir, "memory.max", &m->limit) < 0)
		m->limit = UINT64_MAX;
	if (read_u64(dir, "memory.high", &m->high) < 0)
		m->high = UINT64_MAX;
	snprintf(path, sizeof(path), "%s/memory.events", dir);
	if (read_text(path, buf, sizeof(buf)) == 0) {
		m->ev_high = keyed(buf, "high");
		m->ev_max = keyed(buf, "max");
		m->ev_oom = keyed(buf, "oom");
		m->ev_oom_kill = keyed(buf, "oom_kill");
	}
	return 0;
}

uint64_t mem_available(void)
{
	char buf[4096];
	if (read_text("/proc/meminfo", buf, sizeof(buf)) < 0)
		return UINT64_MAX;
	const char *p = strstr(buf, "\nMemAvailable:");
	if (!p)
		return UINT64_MAX;
	return strtoull(p + 14, NULL, 10) * 1024;
}

/* ---- where the hierarchies are -------------------------------------------------------- */

static char v1_root[PATH_MAX], v2_root[PATH_MAX];
static bool roots_known, v2_memory;

/* mountinfo: "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [TAGS...] - FSTYPE SOURCE SUPEROPTS" */
static void find_roots(void)
{
	if (roots_known)
		return;
	roots_known = true;
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[4096];
	while (f && fgets(line, sizeof(line), f)) {
		char mnt[PATH_MAX], fstype[64], super[1024];
		const char *dash = strstr(line, " - ");
		if (!dash || sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1 ||
		    sscanf(dash + 3, "%63s %*s %1023s", fstype, super) != 2)
			continue;
		if (!strcmp(fstype, "cgroup") && !v1_root[0]) {
			for (char *tok = strtok(super, ","); tok; tok = strtok(NULL, ","))
				if (!strcmp(tok, "memory"))
					snprintf(v1_root, sizeof(v1_root), "%s", mnt);
		} else if (!strcmp(fstype, "cgroup2") && !v2_root[0]) {
			snprintf(v2_root, sizeof(v2_root), "%s", mnt);
		}
	}
	if (f)
		fclose(f);
	if (v2_root[0]) {
		char path[PATH_MAX + 32], buf[512];
		snprintf(path, sizeof(path), "%s/cgroup.controllers", v2_root);
		if (read_text(path, buf, sizeof(buf)) == 0)
			for (char *tok = strtok(buf, " \n"); tok; tok = strtok(NULL, " \n"))
				if (!strcmp(tok, "memory"))
					v2_memory = true;
	}
}

int cgroup_parse(const char *text, const char *v1, const char *v2, bool v2_has_memory, char *dir,
                 size_t dirlen, char *rel, size_t rellen)
{
	const char *found = NULL, *root = NULL;
	size_t flen = 0;
	for (const char *p = text; p && *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		const char *c1 = memchr(p, ':', len);
		const char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - p)) : NULL;
		if (c2) {
			const char *ctl = c1 + 1, *path = c2 + 1;
			size_t ctl_len = (size_t)(c2 - ctl), plen = len - (size_t)(path - p);
			bool memory = false;
			for (const char *t = ctl; t < ctl + ctl_len;) {
				const char *comma = memchr(t, ',', (size_t)(ctl + ctl_len - t));
				size_t tl =
				        comma ? (size_t)(comma - t) : (size_t)(ctl + ctl_len - t);
				if (tl == 6 && !strncmp(t, "memory", 6))
					memory = true;
				t += tl + 1;
			}
			if (memory && v1 && v1[0]) {
				found = path;
				flen = plen;
				root = v1;
				break;
			}
			if (ctl_len == 0 && p[0] == '0' && v2_has_memory && v2 && v2[0] && !found) {
				found = path;
				flen = plen;
				root = v2;
			}
		}
		p = nl ? nl + 1 : NULL;
	}
	if (!found || flen == 0 || found[0] != '/') {
		errno = ENOENT;
		return -1;
	}
	if (rel && snprintf(rel, rellen, "%.*s", (int)flen, found) >= (int)rellen)
		goto toolong;
	if (snprintf(dir, dirlen, "%s%.*s", root, (int)(flen == 1 ? 0 : flen), found) >=
	    (int)dirlen)
		goto toolong;
	return 0;
toolong:
	errno = ENAMETOOLONG;
	return -1;
}

int cgroup_of_pid(int pid, char *dir, size_t dirlen, char *rel, size_t rellen)
{
	find_roots();
	char path[64], buf[4096];
	snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
	if (read_text(path, buf, sizeof(buf)) < 0)
		return -1;
	return cgroup_parse(buf, v1_root, v2_root, v2_memory, dir, dirlen, rel, rellen);
}

int cgroup_dir_of(const char *rel, char *dir, size_t dirlen)
{
	find_roots();
	const char *root = v1_root[0] ? v1_root : v2_memory ? v2_root : NULL;
	if (!root) {
		errno = ENOENT;
		return -1;
	}
	if (snprintf(dir, dirlen, "%s%s", root, strcmp(rel, "/") ? rel : "") >= (int)dirlen) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

/* ---- watchers -------------------------------------------------------------------------- */

static struct pressure_watch *watch_new(enum watch_kind kind, const char *path, pressure_cb cb,
                                        void *arg)
{
	struct pressure_watch *w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->kind = kind;
	snprintf(w->path, sizeof(w->path), "%s", path);
	w->cb = cb;
	w->arg = arg;
	w->psi_fd = w->psi_ep = w->efd = w->usage_fd = w->ino_fd = -1;
	return w;
}

void pressure_watch_free(struct pressure_watch *w)
{
	if (!w)
		return;
	if (w->psi_ev)
		event_free(w->psi_ev);
	if (w->efd_ev)
		event_free(w->efd_ev);
	if (w->ino_ev)
		event_free(w->ino_ev);
	int fds[] = {w->psi_fd, w->psi_ep, w->efd, w->usage_fd, w->ino_fd};
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (fds[i] >= 0)
			close(fds[i]);
	free(w);
}

const char *pressure_watch_path(const struct pressure_watch *w)
{
	return w->path;
}

uint64_t pressure_watch_events(const struct pressure_watch *w)
{
	return w->events;
}

static void fmt_bytes(char *buf, size_t len, uint64_t v)
{
	if (v == UINT64_MAX)
		snprintf(buf, len, "max");
	else if (v >= (1ULL << 30))
		snprintf(buf, len, "%.1fG", (double)v / (1ULL << 30));
	else
		snprintf(buf, len, "%.1fM", (double)v / (1ULL << 20));
}

/* Fill the event's cgroup figures; false when the cgroup is gone. */
static bool event_memory(struct pressure_watch *w, struct pressure_event *ev)
{
	if (cgroup_memory_read(w->path, &ev->mem) < 0)
		return false;
	ev->have_memory = true;
	return true;
}

static void deliver(struct pressure_watch *w, struct pressure_event *ev)
{
	ev->time_ns = ev->time_ns ? ev->time_ns : now_ns();
	w->events++;
	w->cb(w, ev, w->arg); /* may free w */
}

static void gone(struct pressure_watch *w, const char *what)
{
	struct pressure_event ev = {.source = PRESSURE_GONE};
	snprintf(ev.why, sizeof(ev.why), "%.100s: %s", w->path, what);
	/* nothing more will come: stop watching before telling (the callback may free w) */
	if (w->psi_ev)
		event_del(w->psi_ev);
	if (w->efd_ev)
		event_del(w->efd_ev);
	if (w->ino_ev)
		event_del(w->ino_ev);
	deliver(w, &ev);
}

static void on_psi(evutil_socket_t fd, short what, void *arg)
{
	struct pressure_watch *w = arg;
	struct epoll_event e[2];
	uint64_t t = now_ns();
	/* The loop found the epoll set readable by polling it, and polling a PSI file claims
	 * its event (the kernel clears the trigger's flag when it reports EPOLLPRI): so the
	 * set being readable is the event, and epoll_wait here usually reports nothing. It
	 * still reports a file that went away (EPOLLERR, level-triggered). */
	int n = epoll_wait(w->psi_ep, e, 2, 0);
	if (n > 0 && (e[0].events & (EPOLLERR | EPOLLHUP))) {
		gone(w, "the pressure file went away");
		return;
	}
	struct pressure_event ev = {.source = PRESSURE_PSI, .time_ns = t};
	snprintf(ev.why, sizeof(ev.why), "psi %s on %.80s", w->psi_desc,
	         w->kind == W_PSI ? w->path : "memory.pressure");
	if (w->kind != W_PSI && !event_memory(w, &ev)) {
		gone(w, "the cgroup went away");
		return;
	}
	deliver(w, &ev);
}

static int psi_open(struct pressure_watch *w, struct event_base *base, const char *path, bool full,
                    uint64_t stall_us, uint64_t window_us, char *err, size_t errlen)
{
	if (window_us < 500000 || window_us > 10000000 || stall_us == 0 || stall_us > window_us) {
		snprintf(err, errlen,
		         "PSI trigger %" PRIu64 " us in %" PRIu64
		         " us: the window must be 500ms..10s and the stall at most the window",
		         stall_us, window_us);
		errno = EINVAL;
		return -1;
	}
	w->psi_fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (w->psi_fd < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	char trig[64];
	int n = snprintf(trig, sizeof(trig), "%s %" PRIu64 " %" PRIu64, full ? "full" : "some",
	                 stall_us, window_us);
	if (write(w->psi_fd, trig, (size_t)n + 1) < 0) {
		/* the kernel polls the triggers of a process without CAP_SYS_RESOURCE with the
		 * averages, every 2 s: it then wants windows of whole multiples of that */
		bool hint = errno == EINVAL && window_us % 2000000 != 0;
		snprintf(err, errlen, "%s: cannot set the trigger '%s': %s%s", path, trig,
		         strerror(errno),
		         hint ? " (without CAP_SYS_RESOURCE the window must be a multiple of 2 s)"
		              : "");
		return -1;
	}
	snprintf(w->psi_desc, sizeof(w->psi_desc), "%s %" PRIu64 "ms/%" PRIu64 "ms",
	         full ? "full" : "some", stall_us / 1000, window_us / 1000);
	w->psi_ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event e = {.events = EPOLLPRI, .data.fd = w->psi_fd};
	if (w->psi_ep < 0 || epoll_ctl(w->psi_ep, EPOLL_CTL_ADD, w->psi_fd, &e) < 0) {
		snprintf(err, errlen, "epoll: %s", strerror(errno));
		return -1;
	}
	w->psi_ev = event_new(base, w->psi_ep, EV_READ | EV_PERSIST, on_psi, w);
	if (!w->psi_ev || event_add(w->psi_ev, NULL)) {
		snprintf(err, errlen, "cannot watch %s", path);
		return -1;
	}
	return 0;
}

struct pressure_watch *pressure_watch_psi(struct event_base *base, const char *path, bool full,
                                          uint64_t stall_us, uint64_t window_us, pressure_cb cb,
                                          void *arg, char *err, size_t errlen)
{
	if (errlen)
		err[0] = 0;
	struct pressure_watch *w = watch_new(W_PSI, path, cb, arg);
	if (!w) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (psi_open(w, base, path, full, stall_us, window_us, err, errlen)) {
		pressure_watch_free(w);
		return NULL;
	}
	return w;
}

static void on_cg1(evutil_socket_t fd, short what, void *arg)
{
	struct pressure_watch *w = arg;
	uint64_t t = now_ns(), n;
	if (read(w->efd, &n, sizeof(n)) != sizeof(n))
		return;
	struct pressure_event ev = {.source = PRESSURE_USAGE, .time_ns = t};
	if (!event_memory(w, &ev)) {
		gone(w, "the cgroup went away");
		return;
	}
	char u[32], l[32];
	fmt_bytes(u, sizeof(u), ev.mem.usage);
	fmt_bytes(l, sizeof(l), ev.mem.limit);
	snprintf(ev.why, sizeof(ev.why), "usage %s of %s crossed a threshold", u, l);
	deliver(w, &ev);
}

static void on_cg2(evutil_socket_t fd, short what, void *arg)
{
	struct pressure_watch *w = arg;
	_Alignas(struct inotify_event) char buf[4096];
	uint64_t t = now_ns();
	bool modified = false, removed = false;
	ssize_t n;
	while ((n = read(w->ino_fd, buf, sizeof(buf))) > 0)
		for (char *p = buf; p < buf + n;) {
			struct inotify_event *ie = (struct inotify_event *)p;
			p += sizeof(*ie) + ie->len;
			if (ie->mask & (IN_IGNORED | IN_DELETE_SELF))
				removed = true;
			if (ie->mask & IN_MODIFY)
				modified = true;
		}
	struct pressure_event ev = {.source = PRESSURE_EVENTS, .time_ns = t};
	if (removed || !event_memory(w, &ev)) {
		gone(w, "the cgroup went away");
		return;
	}
	if (!modified)
		return;
	snprintf(ev.why, sizeof(ev.why),
	         "memory.events: high %" PRIu64 ", max %" PRIu64 ", oom %" PRIu64
	         ", oom_kill %" PRIu64,
	         ev.mem.ev_high, ev.mem.ev_max, ev.mem.ev_oom, ev.mem.ev_oom_kill);
	deliver(w, &ev);
}

struct pressure_watch *pressure_watch_cgroup(struct event_base *base, const char *dir,
                                             const uint64_t *thresholds, int nthresholds,
                                             bool psi_full, uint64_t psi_stall_us,
                                             uint64_t psi_window_us, pressure_cb cb, void *arg,
                                             char *err, size_t errlen)
{
	struct cg_memory m;
	if (errlen)
		err[0] = 0;
	if (cgroup_memory_read(dir, &m) < 0) {
		snprintf(err, errlen, "%s: not a memory cgroup (%s)", dir, strerror(errno));
		return NULL;
	}
	struct pressure_watch *w = watch_new(m.version == 1 ? W_CG1 : W_CG2, dir, cb, arg);
	if (!w) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	char path[PATH_MAX + 64];
	if (m.version == 1) {
		snprintf(path, sizeof(path), "%s/memory.usage_in_bytes", dir);
		w->usage_fd = open(path, O_RDONLY | O_CLOEXEC);
		w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		snprintf(path, sizeof(path), "%s/cgroup.event_control", dir);
		int ctl = open(path, O_WRONLY | O_CLOEXEC);
		if (w->usage_fd < 0 || w->efd < 0 || ctl < 0) {
			snprintf(err, errlen, "%s: %s", path, strerror(errno));
			if (ctl >= 0)
				close(ctl);
			goto fail;
		}
		for (int i = 0; i < nthresholds; i++) {
			if (!thresholds[i])
				continue;
			char line[96];
			int n = snprintf(line, sizeof(line), "%d %d %" PRIu64, w->efd, w->usage_fd,
			                 thresholds[i]);
			if (write(ctl, line, (size_t)n) < 0) {
				snprintf(err, errlen, "%s: cannot register a threshold: %s", path,
				         strerror(errno));
				close(ctl);
				goto fail;
			}
		}
		close(ctl);
		w->efd_ev = event_new(base, w->efd, EV_READ | EV_PERSIST, on_cg1, w);
		if (!w->efd_ev || event_add(w->efd_ev, NULL)) {
			snprintf(err, errlen, "cannot watch %s", dir);
			goto fail;
		}
		return w;
	}
	w->ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	snprintf(path, sizeof(path), "%s/memory.events", dir);
	if (w->ino_fd < 0 || inotify_add_watch(w->ino_fd, path, IN_MODIFY | IN_DELETE_SELF) < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		goto fail;
	}
	w->ino_ev = event_new(base, w->ino_fd, EV_READ | EV_PERSIST, on_cg2, w);
	if (!w->ino_ev || event_add(w->ino_ev, NULL)) {
		snprintf(err, errlen, "cannot watch %s", path);
		goto fail;
	}
	if (psi_stall_us) {
		snprintf(path, sizeof(path), "%s/memory.pressure", dir);
		char why[256];
		if (psi_open(w, base, path, psi_full, psi_stall_us, psi_window_us, why,
		             sizeof(why))) {
			/* memory.events alone still works: say so once, go on */
			if (w->psi_ev)
				event_free(w->psi_ev);
			if (w->psi_fd >= 0)
				close(w->psi_fd);
			if (w->psi_ep >= 0)
				close(w->psi_ep);
			w->psi_ev = NULL;
			w->psi_fd = w->psi_ep = -1;
			snprintf(err, errlen, "%s (watching memory.events only)", why);
		}
	}
	return w;
fail:
	pressure_watch_free(w);
	return NULL;
}
