/* pressure.c — the in-process fallback of allocctld's pressure policies: a process with no
 * daemon watching it can still give memory back when memory runs short.
 *
 * What is watched (decided once, at start; nothing when neither variable asks for it):
 *   - systemd's memory pressure protocol, when $MEMORY_PRESSURE_WATCH is set (a unit with
 *     MemoryPressureWatch=): a regular file is a PSI file, the base64 text of
 *     $MEMORY_PRESSURE_WRITE is written to it and POLLPRI is the event; a FIFO or an AF_UNIX
 *     socket gets that text too and POLLIN is the event (what arrives is read and dropped);
 *     "/dev/null" means off;
 *   - LIBALLOC_PRESSURE=on: the process's own memory cgroup — v1: its usage reaching 85%
 *     of its limit and the kernel's pressure level "medium" (reclaim under way), both
 *     through cgroup.event_control, v2: a PSI trigger on its memory.pressure — else
 *     the host's /proc/pressure/memory; LIBALLOC_PRESSURE_TRIGGER sets the PSI trigger
 *     ("some 150000 2000000": microseconds of stall in a window; windows that are not whole
 *     2 s need CAP_SYS_RESOURCE).
 * A thread of its own ("liballoc-psi", started with the control thread, signals blocked)
 * sleeps in poll() on that descriptor: no wake-up without an event. On one it flushes the
 * thread caches, releases idle heaps and trims itself (op_pressure), at once — at most once
 * a second; an event within that second is acted on when it ends — and publishes the count
 * and the bytes in the segment's header. Nothing here allocates. */
#include "pressure.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "control.h"
#include "liballoc_parse.h"
#include "os.h"
#include "shm.h"
#include "tunables.h"

#define DEFAULT_TRIGGER "some 150000 2000000" /* 150 ms of stall in 2 s */

static int watch_fd = -1;
static short watch_events; /* POLLPRI (PSI) or POLLIN (FIFO, socket, eventfd) */
static bool watch_drain;   /* POLLIN: read and drop what arrives */
static pid_t watch_tid;
static int stop_fd = -1; /* an eventfd: the control thread ends the watch through it */
LA_BIG_BSS static char watch_what[160];
/* v1 cgroup watch: its usage file and limit, so that a release knows when enough is back */
LA_BIG_BSS static char v1_usage[700];
static uint64_t v1_limit;

/* RFC 4648 base64, no allocation; -1 on a bad character. */
static ssize_t b64_decode(const char *in, char *out, size_t cap)
{
	size_t n = 0;
	uint32_t acc = 0;
	int bits = 0;
	for (const char *p = in; *p && *p != '='; p++) {
		int v;
		if (*p >= 'A' && *p <= 'Z')
			v = *p - 'A';
		else if (*p >= 'a' && *p <= 'z')
			v = *p - 'a' + 26;
		else if (*p >= '0' && *p <= '9')
			v = *p - '0' + 52;
		else if (*p == '+')
			v = 62;
		else if (*p == '/')
			v = 63;
		else if (*p == '\n' || *p == ' ')
			continue;
		else
			return -1;
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (n + 1 >= cap)
				return -1;
			out[n++] = (char)(acc >> bits & 0xff);
		}
	}
	out[n] = 0;
	return (ssize_t)n;
}

static bool write_all(int fd, const char *s, size_t n)
{
	while (n) {
		ssize_t w = write(fd, s, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		s += w;
		n -= (size_t)w;
	}
	return true;
}

/* systemd's protocol: path and the (decoded) bytes to write. */
static bool watch_systemd(const char *path, const char *text, size_t len)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return false;
	int fd = -1;
	if (S_ISSOCK(st.st_mode)) {
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		if (strlen(path) >= sizeof(sa.sun_path))
			return false;
		la_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
			goto fail;
		if (len && !write_all(fd, text, len))
			goto fail;
		/* non-blocking from here: the watch drains what arrives without waiting */
		if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0)
			goto fail;
		watch_events = POLLIN;
		watch_drain = true;
	} else if (S_ISFIFO(st.st_mode)) {
		/* read-write: no end of file when a writer goes away */
		fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0 || (len && !write_all(fd, text, len)))
			goto fail;
		/* what we wrote is for the other end: it is not an event of ours */
		char buf[256];
		while (read(fd, buf, sizeof(buf)) > 0)
			;
		watch_events = POLLIN;
		watch_drain = true;
	} else {
		/* a PSI file: the kernel takes the text up to its last byte, a NUL */
		const char *trigger = text[0] ? text : DEFAULT_TRIGGER;
		fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0 || !write_all(fd, trigger, strlen(trigger) + 1))
			goto fail;
		watch_events = POLLPRI;
	}
	watch_fd = fd;
	return true;
fail:
	la_warn("memory pressure watch ", path, " not set up: ", strerror(errno), (char *)NULL);
	if (fd >= 0)
		close(fd);
	return false;
}

static bool psi_file(const char *path, const char *trigger)
{
	int fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return false;
	if (!write_all(fd, trigger, strlen(trigger) + 1)) {
		close(fd);
		return false;
	}
	watch_fd = fd;
	watch_events = POLLPRI;
	return true;
}

/* The process's memory cgroup path in hierarchy v1 (memory controller) or v2 ("0::"). */
static bool own_cgroup(bool v1, char *out, size_t cap)
{
	char buf[2048];
	if (os_read_small("/proc/self/cgroup", buf, sizeof(buf)) < 0)
		return false;
	for (char *line = buf; line && *line;) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = 0;
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (c2) {
			*c2 = 0;
			bool mem = false;
			for (char *t = c1 + 1; *t;) {
				size_t l = strcspn(t, ",");
				if (l == 6 && !strncmp(t, "memory", 6))
					mem = true;
				t += l + (t[l] == ',');
			}
			if ((v1 && mem) || (!v1 && line[0] == '0' && c1 == line + 1 && !c1[1])) {
				la_strlcpy(out, c2 + 1, cap);
				return true;
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	return false;
}

/* Register "EFD FD ARG" with cgroup.event_control (cfd) for the file name in dir. */
static bool v1_register(int cfd, int efd, const char *dir, const char *name, const char *arg)
{
	char path[700], line[64], num[24];
	size_t n = la_strlcpy(path, dir, sizeof(path));
	la_strlcpy(path + n, name, sizeof(path) - n);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	size_t k = la_fmt_u64(line, (uint64_t)efd);
	line[k++] = ' ';
	la_fmt_u64(num, (uint64_t)fd);
	k += la_strlcpy(line + k, num, sizeof(line) - k);
	line[k++] = ' ';
	k += la_strlcpy(line + k, arg, sizeof(line) - k);
	bool ok = write_all(cfd, line, k);
	close(fd); /* the registration holds its own reference */
	return ok;
}

/* v1: the process's memory cgroup — its usage reaching V1_USAGE_SHARE % of its limit (a
 * threshold, while there is room left to give back into), and the kernel's pressure
 * level "medium" (reclaim under way: at the limit, or without one, the host's). */
#define V1_USAGE_SHARE 85
#define V1_BACK_SHARE  75 /* enough back: usage under this share of the limit */
static bool watch_v1_level(void)
{
	char rel[512], dir[640], path[700];
	if (!own_cgroup(true, rel, sizeof(rel)))
		return false;
	size_t n = la_strlcpy(dir, "/sys/fs/cgroup/memory", sizeof(dir));
	if (strcmp(rel, "/"))
		la_strlcpy(dir + n, rel, sizeof(dir) - n);
	n = la_strlcpy(path, dir, sizeof(path));
	la_strlcpy(path + n, "/cgroup.event_control", sizeof(path) - n);
	int cfd = open(path, O_WRONLY | O_CLOEXEC);
	int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	bool ok = cfd >= 0 && efd >= 0 &&
	          v1_register(cfd, efd, dir, "/memory.pressure_level", "medium");
	if (ok) {
		/* one eventfd for both: either wakes the watch */
		char buf[32], num[24];
		la_strlcpy(path + n, "/memory.limit_in_bytes", sizeof(path) - n);
		int64_t limit = 0;
		if (os_read_small(path, buf, sizeof(buf)) > 0 &&
		    la_parse(LA_T_INT, buf, &limit) == LA_PARSE_OK && limit > 0 &&
		    limit < (1ll << 60)) /* "no limit" reads as ~2^63 */ {
			la_fmt_u64(num, (uint64_t)limit / 100 * V1_USAGE_SHARE);
			if (v1_register(cfd, efd, dir, "/memory.usage_in_bytes", num)) {
				v1_limit = (uint64_t)limit;
				la_strlcpy(v1_usage, path, sizeof(v1_usage));
				la_strlcpy(v1_usage + n, "/memory.usage_in_bytes",
				           sizeof(v1_usage) - n);
			}
		}
	}
	if (cfd >= 0)
		close(cfd);
	if (!ok) {
		if (efd >= 0)
			close(efd);
		return false;
	}
	watch_fd = efd;
	watch_events = POLLIN;
	watch_drain = true;
	la_strlcpy(watch_what, dir, sizeof(watch_what));
	return true;
}

/* Out of line, as is watch_service: their buffers (~1.5 KiB) stayed in
 * pressure_configure's frame, which every control thread's start runs (a process without
 * a watch too): its deepest frame, which put the thread's stack across one page more than
 * the rest of it needs (control.c, CONTROL_STACK; tests/e2e/startup.bats). */
static LA_NOINLINE bool watch_own(void)
{
	const char *trigger = tun_getenv("LIBALLOC_PRESSURE_TRIGGER");
	if (!trigger || !*trigger)
		trigger = DEFAULT_TRIGGER;
	if (watch_v1_level())
		return true;
	char rel[512], path[700];
	static const char *const roots[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
	if (own_cgroup(false, rel, sizeof(rel)) && strcmp(rel, "/")) {
		for (int i = 0; i < 2; i++) {
			size_t n = la_strlcpy(path, roots[i], sizeof(path));
			n += la_strlcpy(path + n, rel, sizeof(path) - n);
			la_strlcpy(path + n, "/memory.pressure", sizeof(path) - n);
			if (psi_file(path, trigger)) {
				la_strlcpy(watch_what, path, sizeof(watch_what));
				return true;
			}
		}
	}
	if (psi_file("/proc/pressure/memory", trigger)) {
		la_strlcpy(watch_what, "/proc/pressure/memory", sizeof(watch_what));
		return true;
	}
	la_warn("LIBALLOC_PRESSURE=on: no memory pressure source could be watched (", trigger, ")",
	        (char *)NULL);
	return false;
}

void pressure_fork_child(void)
{
	/* the parent's watch is the parent's (one PSI trigger wakes one poller): our own */
	if (watch_fd >= 0)
		close(watch_fd);
	if (stop_fd >= 0)
		close(stop_fd);
	watch_fd = stop_fd = -1;
	watch_tid = 0;
	v1_limit = 0;
}

/* The watch the service manager asks for (MEMORY_PRESSURE_WATCH) */
static LA_NOINLINE bool watch_service(const char *watch)
{
	if (!strcmp(watch, "/dev/null"))
		return false; /* the service manager says: do not watch */
	char text[256] = "";
	ssize_t len = 0;
	const char *w = tun_getenv("MEMORY_PRESSURE_WRITE");
	if (w && *w && (len = b64_decode(w, text, sizeof(text))) < 0) {
		la_warn("MEMORY_PRESSURE_WRITE is not base64; the watch uses its default",
		        (char *)NULL);
		text[0] = 0;
		len = 0;
	}
	if (watch_systemd(watch, text, (size_t)len)) {
		la_strlcpy(watch_what, watch, sizeof(watch_what));
		return true;
	}
	return false;
}

bool pressure_configure(void)
{
	if (watch_fd >= 0)
		return true;
	/* a boolean like every other (1/0, true/false, yes/no, on/off): unset is off */
	const char *mode = tun_getenv("LIBALLOC_PRESSURE");
	int64_t on = 0;
	if (mode && la_parse(LA_T_BOOL, mode, &on) != LA_PARSE_OK) {
		la_warn("LIBALLOC_PRESSURE=", mode,
		        ": not a boolean (1/0, true/false, yes/no, on/off); no pressure watch",
		        (char *)NULL);
		return false;
	}
	bool off = mode && !on;
	const char *watch = tun_getenv("MEMORY_PRESSURE_WATCH");
	if (!off && watch && *watch)
		return watch_service(watch);
	if (on)
		return watch_own();
	return false;
}

/* Act on the kept event (*kept: when it came) in this thread, the moment it is signalled:
 * handing it to the control thread cost a second wake-up, which on a loaded machine came
 * too late for a fast climb to the limit. The control thread's operations take the same
 * locks as malloc_trim from any thread, so both may run at once. Returns poll's timeout:
 * the ms until the event may be acted on (within a second of the last action), -1 when
 * it was. */
static int act(uint64_t *kept)
{
	uint64_t wait = op_pressure(*kept);
	if (!wait) {
		*kept = 0;
		return -1;
	}
	return (int)((wait + 999999u) / 1000000u);
}

static void *watch_main(void *arg)
{
	(void)arg;
	syscall(SYS_prctl, PR_SET_NAME, "liballoc-psi", 0, 0, 0); /* (no prctl wrapper: sysraw.c) */
	__atomic_store_n(&watch_tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
	__atomic_store_n(&shm_header()->pressure_watching, 1, __ATOMIC_RELAXED);
	uint64_t kept = 0; /* CLOCK_MONOTONIC ns of an event not acted on yet (0: none) */
	int timeout = -1;  /* ms until a kept event may be acted on (-1: none kept) */
	for (;;) {
		struct pollfd pf[2] = {{.fd = watch_fd, .events = watch_events},
		                       {.fd = stop_fd, .events = POLLIN}};
		int n = poll(pf, 2, timeout);
		if (n < 0 && errno == EINTR)
			continue;
		struct pollfd p = pf[0];
		if (pf[1].revents) { /* the control thread ends: so do we */
			__atomic_store_n(&watch_tid, 0, __ATOMIC_RELEASE);
			return NULL;
		}
		if (n == 0) { /* a kept event's second is over */
			timeout = act(&kept);
			continue;
		}
		if (n < 0 || (p.revents & (POLLNVAL | POLLERR)) ||
		    ((p.revents & POLLHUP) && !(p.revents & watch_events))) {
			/* the file or the other end went away: nothing more will come */
			close(watch_fd);
			watch_fd = -1;
			__atomic_store_n(&shm_header()->pressure_watching, 0, __ATOMIC_RELAXED);
			__atomic_store_n(&watch_tid, 0, __ATOMIC_RELEASE);
			return NULL;
		}
		if (!(p.revents & watch_events))
			continue;
		if (watch_drain) {
			char buf[256];
			ssize_t r, got = 0;
			while ((r = read(watch_fd, buf, sizeof(buf))) > 0)
				got += r;
			if (r == 0 && !got) {
				/* the other end closed (a socket): nothing more will come */
				close(watch_fd);
				watch_fd = -1;
				__atomic_store_n(&shm_header()->pressure_watching, 0,
				                 __ATOMIC_RELAXED);
				__atomic_store_n(&watch_tid, 0, __ATOMIC_RELEASE);
				return NULL;
			}
		}
		if (!kept)
			kept = os_now_ns();
		timeout = act(&kept);
	}
}

void pressure_start(void)
{
	if (watch_fd < 0)
		return;
	if (stop_fd < 0)
		stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	int err = stop_fd < 0 ? errno : os_thread_start(watch_main, NULL, 64 * 1024, NULL);
	if (err) {
		la_warn("memory pressure watch not started: ", strerror(err), (char *)NULL);
		close(watch_fd);
		watch_fd = -1;
	}
}

void pressure_stop(void)
{
	uint64_t one = 1;
	if (stop_fd >= 0 && write(stop_fd, &one, sizeof(one)) < 0)
		return;
}

bool pressure_need(uint64_t *need)
{
	char buf[32];
	int64_t usage = 0;
	if (!v1_limit || os_read_small(v1_usage, buf, sizeof(buf)) <= 0 ||
	    la_parse(LA_T_INT, buf, &usage) != LA_PARSE_OK || usage < 0)
		return false;
	uint64_t target = v1_limit / 100 * V1_BACK_SHARE;
	*need = (uint64_t)usage > target ? (uint64_t)usage - target : 0;
	return true;
}

/* The number in file dir + name (a "max" or a huge v1 "no limit": none) into *v. */
static bool cg_read(const char *dir, const char *name, int64_t *v)
{
	char path[700], buf[32];
	size_t n = la_strlcpy(path, dir, sizeof(path));
	la_strlcpy(path + n, name, sizeof(path) - n);
	return os_read_small(path, buf, sizeof(buf)) > 0 &&
	       la_parse(LA_T_INT, buf, v) == LA_PARSE_OK && *v >= 0 && *v < (1ll << 60);
}

bool pressure_room(uint64_t *room)
{
	char rel[512], dir[700];
	int64_t limit = -1, used = -1, v;
	if (own_cgroup(true, rel, sizeof(rel))) {
		size_t n = la_strlcpy(dir, "/sys/fs/cgroup/memory", sizeof(dir));
		if (strcmp(rel, "/"))
			la_strlcpy(dir + n, rel, sizeof(dir) - n);
		if (cg_read(dir, "/memory.limit_in_bytes", &v))
			limit = v;
		if (cg_read(dir, "/memory.usage_in_bytes", &v))
			used = v;
	} else if (own_cgroup(false, rel, sizeof(rel)) && strcmp(rel, "/")) {
		size_t n = la_strlcpy(dir, "/sys/fs/cgroup", sizeof(dir));
		la_strlcpy(dir + n, rel, sizeof(dir) - n);
		if (cg_read(dir, "/memory.max", &v))
			limit = v;
		if (cg_read(dir, "/memory.high", &v) && (limit < 0 || v < limit))
			limit = v;
		if (cg_read(dir, "/memory.current", &v))
			used = v;
	}
	if (limit < 0 || used < 0)
		return false;
	uint64_t cap = (uint64_t)limit / 100 * PRESSURE_ROOM_SHARE;
	*room = cap > (uint64_t)used ? cap - (uint64_t)used : 0;
	return true;
}

pid_t pressure_tid(void)
{
	return __atomic_load_n(&watch_tid, __ATOMIC_ACQUIRE);
}

const char *pressure_watching(void)
{
	return watch_fd >= 0 ? watch_what : NULL;
}
