/* top.c — `allocctl top` (top.h). One ListRequest per refresh over a kept connection
 * (reconnecting after a failure, which is shown in the status line rather than ending the
 * view). Terminal state is saved once and restored by top_restore on every exit path,
 * including SIGINT/SIGTERM/SIGHUP, which only set a flag the loop checks. */
#include "top.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "fmt.h"
#include "history.h"

static volatile sig_atomic_t top_stop, top_resized, top_continued;
static struct termios top_saved;
static bool top_raw;

/* ^Z: give the terminal back as it was, stop; SIGCONT (below) takes it again. Only
 * async-signal-safe calls (write, tcsetattr, signal, sigprocmask, raise). */
static void top_on_tstp(int sig)
{
	static const char leave[] = "\033[?25h\033[?1049l";
	int saved = errno;
	if (write(STDOUT_FILENO, leave, sizeof(leave) - 1) < 0) {
		/* nothing to do: the terminal is restored below in any case */
	}
	tcsetattr(STDIN_FILENO, TCSANOW, &top_saved);
	signal(SIGTSTP, SIG_DFL);
	sigset_t tstp;
	sigemptyset(&tstp);
	sigaddset(&tstp, SIGTSTP);
	sigprocmask(SIG_UNBLOCK, &tstp, NULL); /* blocked while this handler runs */
	raise(SIGTSTP);
	/* continued */
	signal(SIGTSTP, top_on_tstp);
	top_continued = 1;
	errno = saved;
	(void)sig;
}

static void top_on_signal(int sig)
{
	if (sig == SIGWINCH)
		top_resized = 1;
	else if (sig == SIGCONT)
		top_continued = 1; /* back from ^Z: the shell has reset the terminal */
	else
		top_stop = 1;
}

static uint64_t sort_value(const Ctl__ProcessInfo *p, enum top_sort by)
{
	const Ctl__Memory *m = p->memory;
	switch (by) {
	case TOP_SORT_IN_USE:
		return m ? m->in_use_bytes : 0;
	case TOP_SORT_OTHER:
		return m ? m->non_allocator_rss_bytes : 0;
	case TOP_SORT_RSS:
		return p->has_rss_bytes ? p->rss_bytes : 0;
	case TOP_SORT_PID:
		return (uint64_t)(uint32_t)p->pid;
	default:
		return m ? m->reclaimable_bytes : 0;
	}
}

static enum top_sort sort_by;

static int cmp_view(const void *a, const void *b)
{
	const Ctl__ProcessInfo *x = *(Ctl__ProcessInfo *const *)a,
	                       *y = *(Ctl__ProcessInfo *const *)b;
	uint64_t vx = sort_value(x, sort_by), vy = sort_value(y, sort_by);
	if (vx != vy)
		return sort_by == TOP_SORT_PID ? (vx > vy) - (vx < vy) : (vx < vy) - (vx > vy);
	return (x->pid > y->pid) - (x->pid < y->pid);
}

void top_sort(Ctl__ProcessInfo **procs, size_t n, enum top_sort by)
{
	sort_by = by;
	if (n > 1)
		qsort(procs, n, sizeof(*procs), cmp_view);
}

int top_sort_key(int key)
{
	switch (key) {
	case 'r':
		return TOP_SORT_RECLAIMABLE;
	case 'u':
		return TOP_SORT_IN_USE;
	case 'o':
		return TOP_SORT_OTHER;
	case 's':
		return TOP_SORT_RSS;
	case 'p':
		return TOP_SORT_PID;
	default:
		return -1;
	}
}

static const char *const sort_names[] = {"reclaimable", "in use", "other RSS", "RSS", "pid"};

static void top_restore(void)
{
	if (!top_raw)
		return;
	/* Leave the alternate screen, show the cursor, restore the line discipline. */
	fputs("\033[?25h\033[?1049l", stdout);
	fflush(stdout);
	tcsetattr(STDIN_FILENO, TCSAFLUSH, &top_saved);
	top_raw = false;
}

/* Non-canonical, no echo, reads return at once; signals (^C, ^Z) still work. */
static int top_apply_raw(void)
{
	struct termios t = top_saved;
	t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
	t.c_cc[VMIN] = 0;
	t.c_cc[VTIME] = 0;
	if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &t) < 0)
		return -1;
	fputs("\033[?1049h\033[?25l", stdout);
	return 0;
}

static int top_enter_raw(void)
{
	if (tcgetattr(STDIN_FILENO, &top_saved) < 0 || top_apply_raw() < 0)
		return -1;
	top_raw = true;
	atexit(top_restore);
	return 0;
}

/* The process table with a column of each process's RSS trend over the last minute (from
 * the daemon's history; "-" where it has none yet). */
static void table_with_trend(FILE *f, Ctl__ProcessInfo *const *procs, size_t n, size_t max_rows,
                             const struct render_opts *o, const Ctl__HistoryReply *h)
{
	size_t rows = max_rows && max_rows < n ? max_rows : n;
	char(*trend)[160] = calloc(rows ? rows : 1, sizeof(*trend));
	const char **col = calloc(rows ? rows : 1, sizeof(*col));
	struct render_opts to = *o;
	if (trend && col) {
		for (size_t i = 0; i < rows; i++)
			col[i] = history_trend(trend[i], sizeof(trend[i]),
			                       history_of(h, procs[i]->pid), o->raw);
		to.extra_title = "RSS, LAST MINUTE";
		to.extra = col;
	}
	render_process_table(f, procs, n, max_rows, &to);
	free(col);
	free(trend);
}

/* The last minute of every process, for the trend column (NULL if the daemon has none). */
static Ctl__Reply *top_history(struct client *c, const struct render_opts *o)
{
	Ctl__HistoryRequest req = CTL__HISTORY_REQUEST__INIT;
	req.has_since_ms = true;
	req.since_ms = (int64_t)(o->now_ns / 1000000ULL) - 60000;
	req.resolution = "fine";
	req.has_max_points = true;
	req.max_points = 16;
	Ctl__Envelope env = CTL__ENVELOPE__INIT;
	env.payload_case = CTL__ENVELOPE__PAYLOAD_HISTORY;
	env.history = &req;
	Ctl__Reply *r = client_call(c, &env);
	if (r && (r->code != CTL__ERROR_CODE__OK || !r->history)) {
		ctl__reply__free_unpacked(r, NULL);
		r = NULL;
	}
	return r;
}

/* One frame into buf; returns its length. */
static char *top_frame(struct client *c, const struct render_opts *o, Ctl__ListReply *l,
                       const Ctl__HistoryReply *h, const char *error, int rows, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);
	if (!f)
		return NULL;
	uint64_t in_use = 0, rss = 0, reclaimable = 0;
	size_t n = l ? l->n_processes : 0;
	for (size_t i = 0; i < n; i++) {
		const Ctl__ProcessInfo *p = l->processes[i];
		in_use += p->memory ? p->memory->in_use_bytes : 0;
		reclaimable += p->memory ? p->memory->reclaimable_bytes : 0;
		rss += p->has_rss_bytes ? p->rss_bytes : 0;
	}
	char a[FMT_BUF], b[FMT_BUF], d[FMT_BUF], ts[16];
	time_t now = (time_t)(o->now_ns / 1000000000ULL);
	struct tm tm;
	localtime_r(&now, &tm);
	strftime(ts, sizeof(ts), "%H:%M:%S", &tm);
	fprintf(f, "allocctl top  %s  %zu process%s  rss %s  in use %s  reclaimable %s\n", ts, n,
	        n == 1 ? "" : "es", fmt_size(a, sizeof(a), rss, o->raw),
	        fmt_size(b, sizeof(b), in_use, o->raw),
	        fmt_size(d, sizeof(d), reclaimable, o->raw));
	if (error)
		fprintf(f, "%s\n", error);
	else
		fprintf(f, "sorted by %s; keys: q quit, r u o s p sort; daemon %s\n",
		        sort_names[sort_by], c->socket);
	if (l) {
		top_sort(l->processes, n, sort_by);
		table_with_trend(f, l->processes, n,
		                 rows > 3 ? (size_t)(rows - 3)
		                 : rows   ? 1
		                          : 0,
		                 o, h);
	}
	fclose(f);
	return buf;
}

/* Writes a frame: on a terminal, each line cut to the width and cleared to its end, then
 * the rest of the screen cleared; otherwise as it is, followed by a blank line. */
static void top_draw(const char *frame, size_t len, bool tty, int cols)
{
	if (!tty) {
		fwrite(frame, 1, len, stdout);
		fputc('\n', stdout);
		fflush(stdout);
		return;
	}
	fputs("\033[H", stdout);
	const char *p = frame, *end = frame + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);
		fwrite(p, 1, cols > 0 && l > (size_t)cols ? (size_t)cols : l, stdout);
		fputs("\033[K\r\n", stdout);
		p += l + 1;
	}
	fputs("\033[J", stdout);
	fflush(stdout);
}

int top_run(struct client *c, const struct render_opts *opts, int interval_ms, long iterations)
{
	bool tty = iterations == 0 || (isatty(STDIN_FILENO) && isatty(STDOUT_FILENO));
	struct render_opts o = *opts;
	sort_by = TOP_SORT_RECLAIMABLE;

	/* Fail early and plainly when there is no daemon, before taking the terminal. */
	if (client_connect(c) < 0) {
		fprintf(stderr, "allocctl: %s\n", c->error);
		return EXIT_FAIL;
	}
	struct sigaction sa = {.sa_handler = top_on_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGWINCH, &sa, NULL);
	sigaction(SIGCONT, &sa, NULL);
	if (tty)
		signal(SIGTSTP, top_on_tstp);
	if (tty && top_enter_raw() < 0) {
		fprintf(stderr, "allocctl: top: cannot set up the terminal: %s\n", strerror(errno));
		return EXIT_FAIL;
	}

	for (long it = 0; !top_stop && (iterations == 0 || it < iterations); it++) {
		struct winsize ws = {0};
		int rows = 0, cols = 0;
		if (tty && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0) {
			rows = ws.ws_row;
			cols = ws.ws_col;
		}
		Ctl__Reply *r = client_list(c);
		char err[600];
		const char *error = NULL;
		if (!r) {
			snprintf(err, sizeof(err), "(retrying) %s", c->error);
			error = err;
		} else if (r->code != CTL__ERROR_CODE__OK) {
			snprintf(err, sizeof(err), "daemon: %s: %s", render_code_name(r->code),
			         r->message ? r->message : "");
			error = err;
		}
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		o.now_ns = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
		Ctl__Reply *h = r && !error ? top_history(c, &o) : NULL;
		size_t len = 0;
		char *frame = top_frame(c, &o, r && !error ? r->list : NULL, h ? h->history : NULL,
		                        error, rows, &len);
		if (r)
			ctl__reply__free_unpacked(r, NULL);
		if (h)
			ctl__reply__free_unpacked(h, NULL);
		if (frame)
			top_draw(frame, len, tty, cols);
		free(frame);
		if (iterations && it + 1 >= iterations)
			break;

		/* Wait for the next refresh, reacting to keys and resizes meanwhile. */
		struct timespec start;
		clock_gettime(CLOCK_MONOTONIC, &start);
		for (;;) {
			struct timespec t;
			clock_gettime(CLOCK_MONOTONIC, &t);
			long waited = (t.tv_sec - start.tv_sec) * 1000 +
			              (t.tv_nsec - start.tv_nsec) / 1000000;
			if (waited >= interval_ms || top_stop || top_resized || top_continued)
				break;
			struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
			int pr = tty ? poll(&p, 1, interval_ms - (int)waited)
			             : poll(NULL, 0, interval_ms - (int)waited);
			if (pr <= 0)
				continue;
			if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) {
				top_stop = 1; /* the terminal went away */
				break;
			}
			char key;
			if (read(STDIN_FILENO, &key, 1) != 1)
				continue;
			if (key == 'q' || key == 'Q' || key == 3 /* ^C in case ISIG is off */) {
				top_stop = 1;
				break;
			}
			int s = top_sort_key(key);
			if (s >= 0) {
				sort_by = (enum top_sort)s;
				break;
			}
		}
		top_resized = 0;
		if (top_continued && tty) {
			top_continued = 0;
			top_apply_raw();
		}
	}
	top_restore();
	return EXIT_OK;
}
