/* fuzz_frame.c — libFuzzer target for the daemon's request path: the bytes a client writes
 * on the control socket go through control.c's process_input() (frame length check, frame
 * reassembly, ctl.Envelope decoding) and requests.c's handlers for every request type, and
 * commands.c's mailbox jobs, exactly as allocctld runs them.
 *
 * control.c is compiled into this file (its input path is static), the rest of the daemon
 * is linked as is. Two configurations (run.sh names the second fuzz_frame_live):
 *  - default: no process is visible; every request is decoded and handled up to the
 *    lookup of its targets (tens of thousands of inputs per second);
 *  - FUZZ_FRAME_LIVE=1: one process is visible, a fakeseg helper (tests/helpers)
 *    publishing a well-formed segment that claims pid 1, so requests naming pid 1, "init"
 *    or --all run real commands through a real mailbox (a few hundred inputs per second).
 * The connection's peer uid is taken from the input (root, or a uid that may see nothing).
 *
 * Input: byte 0 = flags (bit 0: peer is uid 65534; bits 1-7: split point for delivering
 * the stream in two reads), then the raw byte stream of the connection. */
#include "../../ctld/control.c"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct ctld daemon_state;
static pid_t fake_pid;
static char fake_dir[PATH_MAX];

static void stop_fake(void)
{
	if (fake_pid > 0) {
		kill(fake_pid, SIGKILL);
		waitpid(fake_pid, NULL, 0);
		fake_pid = 0;
	}
	if (fake_dir[0]) {
		char cmd[128];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fake_dir);
		if (system(cmd) != 0)
			fprintf(stderr, "fuzz_frame: cannot remove %s\n", fake_dir);
	}
}

/* Start build/tests/fakeseg (next to build/fuzz/) with a segment claiming pid 1. */
static void start_fake(const char *argv0)
{
	char fakeseg[PATH_MAX], ready[96];
	const char *env = getenv("FUZZ_FAKESEG");
	if (env) {
		snprintf(fakeseg, sizeof(fakeseg), "%s", env);
	} else {
		char self[PATH_MAX];
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (n <= 0)
			return;
		self[n] = 0;
		char *slash = strrchr(self, '/');
		if (slash)
			*slash = 0;
		snprintf(fakeseg, sizeof(fakeseg), "%s/../tests/fakeseg", self);
	}
	if (access(fakeseg, X_OK) != 0) {
		fprintf(stderr, "fuzz_frame: %s missing: no process will be visible\n", fakeseg);
		return;
	}
	const char *base = getenv("FUZZ_TMP") ? getenv("FUZZ_TMP") : "/tmp";
	if (snprintf(fake_dir, sizeof(fake_dir), "%s/fuzz_frame.XXXXXX", base) >=
	    (int)sizeof(fake_dir))
		return;
	if (!mkdtemp(fake_dir)) {
		fake_dir[0] = 0;
		return;
	}
	snprintf(ready, sizeof(ready), "%.*s/ready", (int)(sizeof(ready) - 8), fake_dir);
	pid_t parent = getpid();
	fake_pid = fork();
	if (fake_pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		int null = open("/dev/null", O_WRONLY);
		if (null >= 0)
			dup2(null, 2);
		execl(fakeseg, "fakeseg", "--dir", fake_dir, "--mode", "foreign-pid", "--claim-pid",
		      "1", "--exe", "init", "--arenas", "2", "--ready", ready, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 500 && access(ready, F_OK) != 0; i++)
		usleep(10000);
	atexit(stop_fake);
	snprintf(daemon_state.cfg.run_dirs[0], sizeof(daemon_state.cfg.run_dirs[0]), "%s",
	         fake_dir);
	daemon_state.cfg.nrun_dirs = 1;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct ctld *d = &daemon_state;
	config_defaults(&d->cfg);
	d->cfg.default_dirs = false;
	d->cfg.command_timeout_ms = 200;
	d->cfg.read_timeout_ms = 1000;
	d->cfg.log_level = LOGL_ERROR;
	d->cfg.remove_stale = false;
	snprintf(d->cfg.listen, sizeof(d->cfg.listen), "off");
	log_level = getenv("FUZZ_VERBOSE") ? LOGL_DEBUG : -1;
	signal(SIGPIPE, SIG_IGN);
	seg_install_sigbus_guard();
	d->token = (uint32_t)getpid();
	d->next_seq = seg_now_ns(CLOCK_REALTIME);
	if (audit_init(&d->audit, 64, 0) != 0) /* a small ring: it wraps while fuzzing */
		abort();
	TAILQ_INIT(&d->jobs);
	TAILQ_INIT(&d->conns);
	d->inotify_fd = -1;
	/* the daemon's own base (loop.c): precise timers, its priorities, one slice a turn */
	d->base = loop_base_new();
	if (!d->base)
		abort();
	if (getenv("FUZZ_FRAME_LIVE") && strcmp(getenv("FUZZ_FRAME_LIVE"), "0") != 0)
		start_fake((*argv)[0]);
	if (discover_init(d) != 0)
		abort();
	/* the history too: HistoryRequest answered from rings the loop fills (live mode) and
	 * the events the audit trail puts on them */
	if (timeline_init(d) != 0)
		abort();
	if (fake_pid > 0 && d->nprocs != 1)
		fprintf(stderr, "fuzz_frame: the fake process was not discovered (%d)\n",
		        d->nprocs);
	return 0;
}

/* A connection as on_accept() makes it, on one end of a socketpair whose other end is
 * closed: replies stay in the output buffer (the loop never writes them). */
static struct conn *conn_new(struct ctld *d, uid_t uid)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
		abort();
	close(sv[1]);
	struct conn *c = calloc(1, sizeof(*c));
	if (!c)
		abort();
	c->d = d;
	c->uid = uid;
	c->gid = uid;
	c->pid = 4242;
	c->bev = bufferevent_socket_new(d->base, sv[0], BEV_OPT_CLOSE_ON_FREE);
	c->frame_timer = evtimer_new(d->base, on_frame_timeout, c);
	c->resume_ev = event_new(d->base, -1, 0, on_resume, c);
	if (!c->bev || !c->frame_timer || !c->resume_ev)
		abort();
	TAILQ_INSERT_TAIL(&d->conns, c, link);
	d->nconns++;
	bufferevent_setwatermark(c->bev, EV_READ, 0, 4 + CTL_MAX_FRAME);
	bufferevent_setcb(c->bev, NULL, NULL, NULL, c);
	/* not enabled: the fuzzer feeds the input buffer and calls process_input itself */
	bufferevent_disable(c->bev, EV_READ | EV_WRITE);
	/* one byte in the output keeps process_input from freeing the connection: the
	 * fuzzer frees it (and checks every path left it consistent) */
	evbuffer_add(bufferevent_get_output(c->bev), "", 1);
	return c;
}

/* Run the loop until the connection's command finished (answered, timed out or failed). */
static void wait_job(struct ctld *d, struct conn *c)
{
	/* a command that finished inside requests_handle() must not leave the connection
	 * waiting for it (it would never read again) */
	if (c->in_job && TAILQ_EMPTY(&d->jobs))
		abort();
	for (int i = 0; i < 100000 && c->in_job; i++)
		event_base_loop(d->base, EVLOOP_ONCE);
	if (c->in_job)
		abort(); /* a command that never finishes would hang a real client forever */
}

/* Append bytes as if they had arrived on the socket (a bufferevent's input is frozen at
 * its end for everyone but the bufferevent itself). */
static void feed(struct evbuffer *in, const uint8_t *p, size_t n)
{
	evbuffer_unfreeze(in, 0);
	if (evbuffer_add(in, p, n) != 0)
		abort();
	evbuffer_freeze(in, 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ctld *d = &daemon_state;
	if (size < 1)
		return 0;
	uint8_t flags = data[0];
	data++;
	size--;
	struct conn *c = conn_new(d, (flags & 1) ? 65534 : 0);
	struct evbuffer *in = bufferevent_get_input(c->bev);
	size_t split = size ? ((size_t)(flags >> 1) * size) / 127 : 0;
	if (split > size)
		split = size;
	feed(in, data, split);
	process_input(c);
	wait_job(d, c);
	if (!c->closing) {
		feed(in, data + split, size - split);
		process_input(c);
		wait_job(d, c);
		/* requests pipelined behind a command are resumed from the loop */
		for (int i = 0; i < 64 && !c->closing && evbuffer_get_length(in) >= 4; i++) {
			event_base_loop(d->base, EVLOOP_NONBLOCK);
			wait_job(d, c);
		}
	}
	/* Every reply the daemon queued must be a well-formed frame of a ctl.Reply. */
	struct evbuffer *out = bufferevent_get_output(c->bev);
	size_t olen = evbuffer_get_length(out);
	uint8_t *o = evbuffer_pullup(out, (ssize_t)olen);
	size_t off = 1;
	if (log_level >= LOGL_DEBUG)
		fprintf(stderr, "output %zu bytes, input left %zu, closing %d, requests %lu\n",
		        olen, evbuffer_get_length(in), (int)c->closing,
		        (unsigned long)d->st.requests);
	while (o && off < olen) {
		uint32_t len;
		if (olen - off < 4 || wire_frame_length(o + off, &len) != 0 || olen - off - 4 < len)
			abort();
		Ctl__Reply *r = ctl__reply__unpack(NULL, len, o + off + 4);
		if (!r || r->protocol_version != CTL_PROTOCOL_VERSION)
			abort();
		if (log_level >= LOGL_DEBUG)
			fprintf(stderr, "reply code %d: %s (%zu results)\n", (int)r->code,
			        r->message ? r->message : "", r->n_results);
		ctl__reply__free_unpacked(r, NULL);
		off += 4 + len;
	}
	conn_free(c);
	/* libevent finalizes a freed bufferevent (and closes its socket) from the loop */
	event_base_loop(d->base, EVLOOP_NONBLOCK);
	if (d->nconns != 0 || !TAILQ_EMPTY(&d->jobs))
		abort();
	return 0;
}
