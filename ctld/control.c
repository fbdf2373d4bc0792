/* control.c — the control socket: a Unix stream socket in an owner-only directory, bound
 * under a temporary name and renamed into place. Every connection records its peer's
 * credentials (SO_PEERCRED); frames are length-checked before anything is allocated, a
 * started frame must complete within read_timeout_ms, and undecodable input gets an error
 * reply after which that connection (never the daemon) goes away. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>

#include "ctl.pb-c.h"
#include "ctld.h"
#include "guard.h"
#include "log.h"
#include "wire.h"

struct conn {
	TAILQ_ENTRY(conn) link;
	struct ctld *d;
	struct bufferevent *bev;
	struct event *frame_timer; /* armed while a frame is incomplete */
	struct event *resume_ev;   /* process buffered requests after a command finished */
	uid_t uid;
	gid_t gid;
	pid_t pid;
	bool in_job;  /* a command owns the next reply: reading is paused */
	bool closing; /* flush the output, then free */
	bool full;    /* replies the client has not read reached OUT_CAP: reading is paused */
};

/* Back-pressure: a client that does not read its replies gets no more requests handled
 * once OUT_CAP bytes wait for it (reading resumes below half of it), and is closed when
 * nothing of it is written for read_timeout_ms. */
#define OUT_CAP           (2u * (4u + CTL_MAX_FRAME))
/* Connections only root may use: other uids share max_connections less these. */
#define ROOT_RESERVE(max) ((max) / 8 > 4 ? (max) / 8 : ((max) > 4 ? 4 : 0))

static ino_t socket_ino;
static struct accept_guard guard;
static struct ratelog refusals;

bool conn_output_full(const struct conn *c)
{
	return evbuffer_get_length(bufferevent_get_output(c->bev)) >= OUT_CAP;
}

size_t conn_output_len(const struct conn *c)
{
	return evbuffer_get_length(bufferevent_get_output(c->bev));
}

uid_t conn_uid(const struct conn *c)
{
	return c->uid;
}

pid_t conn_pid(const struct conn *c)
{
	return c->pid;
}

static void conn_free(struct conn *c)
{
	struct ctld *d = c->d;
	commands_conn_closed(d, c);
	requests_conn_closed(d, c);
	TAILQ_REMOVE(&d->conns, c, link);
	d->nconns--;
	event_free(c->frame_timer);
	event_free(c->resume_ev);
	guard_free_bev(c->bev);
	log_debug("connection of pid %d uid %u closed", (int)c->pid, c->uid);
	free(c);
}

void conn_send_reply(struct conn *c, const struct Ctl__Reply *r)
{
	size_t len = protobuf_c_message_get_packed_size(&r->base);
	Ctl__Reply small;
	if (len > CTL_MAX_FRAME) {
		ctl__reply__init(&small);
		small.protocol_version = CTL_PROTOCOL_VERSION;
		small.has_id = r->has_id;
		small.id = r->id;
		small.code = CTL__ERROR_CODE__ERR_INTERNAL;
		small.message = "reply exceeds the frame size cap";
		r = &small;
		len = protobuf_c_message_get_packed_size(&r->base);
	}
	uint8_t hdr[4];
	wire_frame_header(hdr, (uint32_t)len);
	struct evbuffer *out = bufferevent_get_output(c->bev);
	struct evbuffer_iovec v;
	if (evbuffer_add(out, hdr, 4) < 0 || evbuffer_reserve_space(out, len, &v, 1) != 1) {
		c->closing = true;
		return;
	}
	protobuf_c_message_pack(&r->base, v.iov_base);
	v.iov_len = len;
	evbuffer_commit_space(out, &v, 1);
}

/* Reply with an error; close afterwards when fatal (the stream can no longer be framed). */
static void conn_error(struct conn *c, uint64_t id, Ctl__ErrorCode code, const char *msg,
                       bool fatal)
{
	Ctl__Reply r = CTL__REPLY__INIT;
	r.protocol_version = CTL_PROTOCOL_VERSION;
	r.has_id = id != 0;
	r.id = id;
	r.code = code;
	r.message = (char *)msg;
	conn_send_reply(c, &r);
	if (fatal) {
		c->closing = true;
		bufferevent_disable(c->bev, EV_READ);
		evbuffer_drain(bufferevent_get_input(c->bev), (size_t)-1);
	}
}

static void set_idle_timeout(struct conn *c)
{
	int ms = c->d->cfg.idle_timeout_ms, wms = c->d->cfg.read_timeout_ms;
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
	struct timeval wtv = {wms / 1000, (wms % 1000) * 1000};
	bufferevent_set_timeouts(c->bev, &tv, &wtv);
}

static void process_input(struct conn *c)
{
	struct ctld *d = c->d;
	struct evbuffer *in = bufferevent_get_input(c->bev);
	while (!c->closing && !c->in_job) {
		if (conn_output_full(c)) {
			/* the client is not reading: stop taking requests until it does */
			c->full = true;
			bufferevent_disable(c->bev, EV_READ);
			break;
		}
		size_t have = evbuffer_get_length(in);
		if (have == 0) {
			event_del(c->frame_timer);
			break;
		}
		uint8_t hdr[4];
		uint32_t len = 0;
		if (have >= 4) {
			evbuffer_copyout(in, hdr, 4);
			if (wire_frame_length(hdr, &len) < 0) {
				uint32_t bad = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 |
				               (uint32_t)hdr[2] << 8 | hdr[3];
				char msg[96];
				snprintf(msg, sizeof(msg), "frame length %u outside 1..%u", bad,
				         CTL_MAX_FRAME);
				log_warn("client pid %d uid %u: %s; closing", (int)c->pid, c->uid,
				         msg);
				d->st.requests_malformed++;
				conn_error(c, 0, CTL__ERROR_CODE__ERR_MALFORMED, msg, true);
				break;
			}
		}
		if (have < 4 || have < 4 + (size_t)len) {
			/* incomplete: the rest must arrive before the frame deadline */
			if (!evtimer_pending(c->frame_timer, NULL)) {
				int ms = d->cfg.read_timeout_ms;
				struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
				evtimer_add(c->frame_timer, &tv);
			}
			break;
		}
		event_del(c->frame_timer);
		uint8_t *body = evbuffer_pullup(in, 4 + (ssize_t)len);
		Ctl__Envelope *env = body ? ctl__envelope__unpack(NULL, len, body + 4) : NULL;
		evbuffer_drain(in, 4 + (size_t)len);
		d->st.requests++;
		if (!env) {
			log_warn("client pid %d uid %u: request of %u bytes does not decode; "
			         "closing",
			         (int)c->pid, c->uid, len);
			d->st.requests_malformed++;
			conn_error(c, 0, CTL__ERROR_CODE__ERR_MALFORMED,
			           "request does not decode as a ctl.Envelope", true);
			break;
		}
		if (env->protocol_version != CTL_PROTOCOL_VERSION) {
			char msg[96];
			snprintf(msg, sizeof(msg), "protocol version %u, this daemon speaks %u",
			         env->protocol_version, CTL_PROTOCOL_VERSION);
			log_info("client pid %d uid %u: %s", (int)c->pid, c->uid, msg);
			conn_error(c, env->id, CTL__ERROR_CODE__ERR_VERSION, msg, false);
		} else {
			/* a command owns the next reply; it may also finish at once, from inside
			 * requests_handle (conn_job_done then already cleared in_job) */
			c->in_job = true;
			if (!requests_handle(d, c, env))
				c->in_job = false; /* answered synchronously */
			else if (c->in_job)
				bufferevent_disable(c->bev, EV_READ);
		}
		ctl__envelope__free_unpacked(env, NULL);
	}
	if (c->closing && evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
		conn_free(c);
}

void conn_job_done(struct conn *c)
{
	c->in_job = false;
	if (c->closing || c->full)
		return;
	bufferevent_enable(c->bev, EV_READ);
	/* requests the client pipelined meanwhile are processed from the loop, not from
	 * inside the command poller that called us */
	event_active(c->resume_ev, EV_TIMEOUT, 0);
}

static void on_read(struct bufferevent *bev, void *arg)
{
	process_input(arg);
}

static void on_write(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;
	if (c->closing && !c->in_job) {
		if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
			conn_free(c);
		return;
	}
	/* called when the output drained to the low watermark: a streamed list goes on,
	 * requests are taken again */
	if (c->in_job)
		requests_conn_drained(c->d, c);
	if (c->full && evbuffer_get_length(bufferevent_get_output(bev)) <= OUT_CAP / 2) {
		c->full = false;
		if (!c->in_job) {
			bufferevent_enable(c->bev, EV_READ);
			event_active(c->resume_ev, EV_TIMEOUT, 0);
		}
	}
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;
	if ((what & BEV_EVENT_TIMEOUT) && (what & BEV_EVENT_WRITING))
		log_info("client pid %d uid %u does not read its replies; closing", (int)c->pid,
		         c->uid);
	else if (what & BEV_EVENT_TIMEOUT)
		log_info("client pid %d uid %u idle too long; closing", (int)c->pid, c->uid);
	conn_free(c);
}

static void on_frame_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	log_warn("client pid %d uid %u did not finish a frame within %d ms; closing", (int)c->pid,
	         c->uid, c->d->cfg.read_timeout_ms);
	c->d->st.requests_malformed++;
	conn_error(c, 0, CTL__ERROR_CODE__ERR_MALFORMED, "frame incomplete at the read timeout",
	           true);
	if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
		conn_free(c);
}

static void on_resume(evutil_socket_t fd, short what, void *arg)
{
	process_input(arg);
}

/* Refuse a connection over a cap: one best-effort ERR_BUSY frame saying which, then close;
 * one log line per 10 s however many are refused. */
static void refuse(struct ctld *d, int fd, const struct ucred *cr, const char *why)
{
	Ctl__Reply r = CTL__REPLY__INIT;
	r.protocol_version = CTL_PROTOCOL_VERSION;
	r.code = CTL__ERROR_CODE__ERR_BUSY;
	r.message = (char *)why;
	uint8_t buf[256];
	size_t len = ctl__reply__get_packed_size(&r);
	if (len + 4 <= sizeof(buf)) {
		wire_frame_header(buf, (uint32_t)len);
		ctl__reply__pack(&r, buf + 4);
		ssize_t n = send(fd, buf, len + 4, MSG_NOSIGNAL | MSG_DONTWAIT);
		(void)n;
	}
	close(fd);
	d->st.connections_refused++;
	uint64_t held;
	if (ratelog_allow(&refusals, 10000000000ull, &held))
		log_warn("refusing connection of pid %d uid %u: %s (%d connections open; %llu "
		         "more refused since the last such line)",
		         (int)cr->pid, cr->uid, why, d->nconns, (unsigned long long)held);
}

static int conns_of(struct ctld *d, uid_t uid)
{
	int n = 0;
	struct conn *c;
	TAILQ_FOREACH(c, &d->conns, link)
	n += c->uid == uid;
	return n;
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen,
                      void *arg)
{
	struct ctld *d = arg;
	guard_accepted(&guard);
	struct ucred cr;
	socklen_t crlen = sizeof(cr);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) < 0 || crlen != sizeof(cr)) {
		log_warn("SO_PEERCRED failed: %s; closing", strerror(errno));
		close(fd);
		return;
	}
	/* caps: per uid, and in total with a reserve only root may use, so one user's
	 * connections can never lock root out */
	char why[96];
	int max = d->cfg.max_connections;
	if (cr.uid != 0 && conns_of(d, cr.uid) >= d->cfg.max_connections_per_uid) {
		snprintf(why, sizeof(why), "too many connections from uid %u", cr.uid);
		refuse(d, fd, &cr, why);
		return;
	}
	if (d->nconns >= max || (cr.uid != 0 && d->nconns >= max - ROOT_RESERVE(max))) {
		snprintf(why, sizeof(why), "too many connections (%d open)", d->nconns);
		refuse(d, fd, &cr, why);
		return;
	}
	struct conn *c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return;
	}
	c->d = d;
	c->uid = cr.uid;
	c->gid = cr.gid;
	c->pid = cr.pid;
	evutil_make_socket_nonblocking(fd);
	c->bev = bufferevent_socket_new(d->base, fd, BEV_OPT_CLOSE_ON_FREE);
	c->frame_timer = evtimer_new(d->base, on_frame_timeout, c);
	c->resume_ev = event_new(d->base, -1, 0, on_resume, c);
	if (!c->bev || !c->frame_timer || !c->resume_ev) {
		if (c->bev)
			bufferevent_free(c->bev);
		else
			close(fd);
		if (c->frame_timer)
			event_free(c->frame_timer);
		if (c->resume_ev)
			event_free(c->resume_ev);
		free(c);
		return;
	}
	TAILQ_INSERT_TAIL(&d->conns, c, link);
	d->nconns++;
	/* never buffer more than one maximal frame from a client */
	bufferevent_setwatermark(c->bev, EV_READ, 0, 4 + CTL_MAX_FRAME);
	bufferevent_setwatermark(c->bev, EV_WRITE, OUT_CAP / 2, 0);
	bufferevent_setcb(c->bev, on_read, on_write, on_event, c);
	set_idle_timeout(c);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	log_debug("connection of pid %d uid %u", (int)c->pid, c->uid);
}

/* The socket's directory: created 0700 if missing; must be ours and not writable by others. */
static int prepare_dir(const char *dir)
{
	struct stat st;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		log_error("cannot create %s: %s", dir, strerror(errno));
		return -1;
	}
	if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		log_error("%s is not a directory", dir);
		return -1;
	}
	if (st.st_uid != geteuid() || (st.st_mode & 022)) {
		log_error("refusing socket directory %s: owner %u mode %04o (must be ours and not "
		          "writable by others)",
		          dir, st.st_uid, st.st_mode & 07777);
		return -1;
	}
	return 0;
}

int control_init(struct ctld *d)
{
	TAILQ_INIT(&d->conns);
	const char *path = d->cfg.socket;
	snprintf(d->socket_path, sizeof(d->socket_path), "%s", path);
	char dir[sizeof(d->socket_path)], tmp[sizeof(d->socket_path)];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (!slash || slash == dir) {
		log_error("socket path %s must be absolute and not in /", path);
		return -1;
	}
	*slash = 0;
	if (prepare_dir(dir) < 0)
		return -1;
	if (snprintf(tmp, sizeof(tmp), "%s/.ctl.%d.tmp", dir, (int)getpid()) >= (int)sizeof(tmp)) {
		log_error("socket path %s too long", path);
		return -1;
	}
	/* another daemon already serving this path? */
	int probe = wire_connect(path);
	if (probe >= 0) {
		close(probe);
		log_error("another allocctld is serving %s", path);
		return -1;
	}
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", tmp);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		log_error("socket: %s", strerror(errno));
		return -1;
	}
	unlink(tmp);
	mode_t old = umask(077);
	int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	struct stat st;
	if (r < 0 || chmod(tmp, d->cfg.socket_mode) < 0 || listen(fd, 128) < 0 ||
	    stat(tmp, &st) < 0 || rename(tmp, path) < 0) {
		log_error("cannot set up control socket %s: %s", path, strerror(errno));
		unlink(tmp);
		close(fd);
		return -1;
	}
	socket_ino = st.st_ino;
	d->listener = evconnlistener_new(d->base, on_accept, d,
	                                 LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, fd);
	if (!d->listener || guard_init(&guard, d->base, d->listener, "control socket")) {
		close(fd);
		unlink(path);
		return -1;
	}
	log_info("control socket %s (mode %04o)", path, d->cfg.socket_mode);
	return 0;
}

void control_shutdown(struct ctld *d)
{
	struct conn *c;
	while ((c = TAILQ_FIRST(&d->conns)))
		conn_free(c);
	guard_free(&guard);
	if (d->listener) {
		evconnlistener_free(d->listener);
		d->listener = NULL;
		struct stat st;
		/* unlink only our own socket, not one a successor put there */
		if (stat(d->socket_path, &st) == 0 && st.st_ino == socket_ino)
			unlink(d->socket_path);
	}
}
