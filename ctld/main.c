/* main.c — allocctld: options and config, the one event loop, signals (SIGTERM/SIGINT stop
 * cleanly and unlink the socket, SIGHUP reloads the config). The daemon keeps no state of
 * its own worth saving: the segments are the state, so a restart loses nothing. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include "ctld.h"
#include "http.h"
#include "log.h"
#include "wire.h"

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: allocctld [options]\n"
	        "Sidecar daemon of liballoc: discovers the segments of preloaded processes,\n"
	        "serves the control socket (allocctl) and HTTP /metrics.\n\n"
	        "  --config FILE           read settings from FILE (key = value; flags win)\n"
	        "  --socket PATH           control socket (default %s)\n"
	        "  --socket-mode MODE      mode of the socket file (default 0600)\n"
	        "  --listen HOST:PORT|unix:PATH|off  HTTP address (default %s; port 0 picks one)\n"
	        "  --run-dir DIR           also watch DIR for segments (repeatable)\n"
	        "  --no-default-dirs       do not watch /dev/shm/liballoc-<uid>/\n"
	        "  --rescan-ms T           rescan and liveness period (default 2000)\n"
	        "  --command-timeout-ms T  per-process command timeout (default 2000)\n"
	        "  --read-timeout-ms T     a started frame must complete within T (5000)\n"
	        "  --idle-timeout-ms T     close idle connections after T (300000)\n"
	        "  --max-connections N     concurrent clients (default 64)\n"
	        "  --log-level LEVEL       error, warn, info (default), debug\n"
	        "  --metrics-mode MODE     /metrics series per pid (default) or per service\n"
	        "  --ready-file FILE       write pid, socket and http address once serving\n"
	        "  --audit-journal MODE    audit trail to journald: auto (default), on, off\n"
	        "  --daemon                detach (default: stay in the foreground)\n"
	        "  --check-config          validate the settings and exit\n"
	        "A duration T is milliseconds (2000) or has a unit (250ms, 2s, 1.5m, 1h).\n"
	        "  --help, --version\n"
	        "Signals: TERM/INT stop, HUP reloads the config file.\n",
	        CTL_DEFAULT_SOCKET, CFG_DEFAULT_LISTEN);
}

static struct ctld daemon_state;
static struct config_override overrides[CFG_MAX_OVERRIDES];
static int noverrides;

static void add_override(const char *key, const char *value)
{
	if (noverrides == CFG_MAX_OVERRIDES) {
		fprintf(stderr, "allocctld: too many options\n");
		exit(2);
	}
	overrides[noverrides].key = key;
	overrides[noverrides].value = value;
	noverrides++;
}

static void on_stop(evutil_socket_t sig, short what, void *arg)
{
	struct ctld *d = arg;
	log_info("signal %d: shutting down", (int)sig);
	event_base_loopbreak(d->base);
}

/* The reload in the audit trail: who cannot be known (a signal), what can. */
static void audit_reload(struct ctld *d, bool ok, const char *msg)
{
	struct audit_event ev;
	memset(&ev, 0, sizeof(ev));
	ev.trigger = AUDIT_T_config;
	ev.peer_uid = -1;
	snprintf(ev.actor, sizeof(ev.actor), "SIGHUP");
	ev.action = AUDIT_A_reload;
	ev.result = ok ? AUDIT_R_ok : AUDIT_R_failed;
	snprintf(ev.message, sizeof(ev.message), "%s", msg);
	audit_record(&d->audit, &ev);
}

static void on_reload(evutil_socket_t sig, short what, void *arg)
{
	struct ctld *d = arg;
	static struct config c;
	char err[512];
	struct policy_conf *pc = NULL;
	if (config_build_all(&c, &pc, d->config_file, d->overrides, d->noverrides, err,
	                     sizeof(err))) {
		log_error("reload failed, keeping the current settings: %s", err);
		audit_reload(d, false, err);
		return;
	}
	if (strcmp(c.socket, d->cfg.socket) || strcmp(c.listen, d->cfg.listen) ||
	    c.socket_mode != d->cfg.socket_mode)
		log_warn("reload: socket and listen changes take effect at restart");
	snprintf(c.socket, sizeof(c.socket), "%s", d->cfg.socket);
	snprintf(c.listen, sizeof(c.listen), "%s", d->cfg.listen);
	c.socket_mode = d->cfg.socket_mode;
	d->cfg = c;
	log_level = c.log_level;
	audit_configure(&d->audit, (size_t)c.audit_ring, c.audit_journal);
	char msg[160];
	snprintf(msg, sizeof(msg), "%s: %d profiles, %d policies",
	         d->config_file ? d->config_file : "(no file)", pc->nprofiles, pc->npolicies);
	audit_reload(d, true, msg);
	int nprofiles = pc->nprofiles, npolicies = pc->npolicies;
	discover_reconfigure(d);
	timeline_reconfigure(d);
	policy_reconfigure(d, pc);
	log_info("configuration reloaded (%d run directories configured, %d processes, %d "
	         "profiles, %d policies)",
	         c.nrun_dirs, d->nprocs, nprofiles, npolicies);
}

/* The ready file, written through a descriptor of its directory: a new file under a random
 * name (O_EXCL|O_NOFOLLOW: nothing planted there is followed or reused), renamed into
 * place. */
static int write_ready_file(struct ctld *d)
{
	char dir[PATH_MAX], body[512];
	snprintf(dir, sizeof(dir), "%s", d->cfg.ready_file);
	char *slash = strrchr(dir, '/');
	const char *base = slash ? slash + 1 : dir;
	if (!slash || !*base) {
		errno = EINVAL;
		return -1;
	}
	*slash = 0;
	int dfd = open(slash == dir ? "/" : dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -1;
	int len = snprintf(body, sizeof(body), "pid=%d\nsocket=%s\nhttp=%s\n", (int)getpid(),
	                   d->socket_path, d->http_addr[0] ? d->http_addr : "off");
	char tmp[64];
	int fd = -1;
	for (int i = 0; i < 16 && fd < 0; i++) {
		snprintf(tmp, sizeof(tmp), ".allocctld-ready.%d.%08lx", (int)getpid(),
		         (unsigned long)random());
		fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd < 0 && errno != EEXIST)
			break;
	}
	int rc = -1;
	if (fd >= 0) {
		rc = write(fd, body, (size_t)len) == len && fsync(fd) == 0 ? 0 : -1;
		close(fd);
		if (rc == 0)
			rc = renameat(dfd, tmp, dfd, base);
		if (rc < 0) {
			int e = errno;
			unlinkat(dfd, tmp, 0);
			errno = e;
		}
	}
	int e = errno;
	close(dfd);
	errno = e;
	return rc;
}

static void daemonize(void)
{
	pid_t pid = fork();
	if (pid < 0) {
		perror("allocctld: fork");
		exit(1);
	}
	if (pid > 0)
		_exit(0);
	setsid();
	pid = fork();
	if (pid < 0)
		exit(1);
	if (pid > 0)
		_exit(0);
	if (chdir("/") < 0)
		exit(1);
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		dup2(fd, STDIN_FILENO);
		dup2(fd, STDOUT_FILENO); /* stderr stays: it carries the log */
		if (fd > STDERR_FILENO)
			close(fd);
	}
}

int main(int argc, char **argv)
{
	enum {
		O_SOCKET = 256,
		O_SOCKET_MODE,
		O_LISTEN,
		O_RUN_DIR,
		O_NO_DEFAULT,
		O_RESCAN,
		O_CMD_TIMEOUT,
		O_READ_TIMEOUT,
		O_IDLE_TIMEOUT,
		O_MAX_CONN,
		O_LOG_LEVEL,
		O_READY,
		O_DAEMON,
		O_CONFIG,
		O_HELP,
		O_VERSION,
		O_CHECK,
		O_AUDIT_JOURNAL,
		O_METRICS_MODE,
	};
	static const struct option opts[] = {
	        {"socket", required_argument, NULL, O_SOCKET},
	        {"socket-mode", required_argument, NULL, O_SOCKET_MODE},
	        {"listen", required_argument, NULL, O_LISTEN},
	        {"run-dir", required_argument, NULL, O_RUN_DIR},
	        {"no-default-dirs", no_argument, NULL, O_NO_DEFAULT},
	        {"rescan-ms", required_argument, NULL, O_RESCAN},
	        {"command-timeout-ms", required_argument, NULL, O_CMD_TIMEOUT},
	        {"read-timeout-ms", required_argument, NULL, O_READ_TIMEOUT},
	        {"idle-timeout-ms", required_argument, NULL, O_IDLE_TIMEOUT},
	        {"max-connections", required_argument, NULL, O_MAX_CONN},
	        {"log-level", required_argument, NULL, O_LOG_LEVEL},
	        {"ready-file", required_argument, NULL, O_READY},
	        {"daemon", no_argument, NULL, O_DAEMON},
	        {"config", required_argument, NULL, O_CONFIG},
	        {"help", no_argument, NULL, O_HELP},
	        {"check-config", no_argument, NULL, O_CHECK},
	        {"version", no_argument, NULL, O_VERSION},
	        {"audit-journal", required_argument, NULL, O_AUDIT_JOURNAL},
	        {"metrics-mode", required_argument, NULL, O_METRICS_MODE},
	        {NULL, 0, NULL, 0},
	};
	const char *config_file = NULL;
	bool detach = false, check = false;
	int o;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case O_SOCKET:
			add_override("socket", optarg);
			break;
		case O_SOCKET_MODE:
			add_override("socket_mode", optarg);
			break;
		case O_LISTEN:
			add_override("listen", optarg);
			break;
		case O_RUN_DIR:
			add_override("run_dir", optarg);
			break;
		case O_NO_DEFAULT:
			add_override("default_dirs", "false");
			break;
		case O_RESCAN:
			add_override("rescan_ms", optarg);
			break;
		case O_CMD_TIMEOUT:
			add_override("command_timeout_ms", optarg);
			break;
		case O_READ_TIMEOUT:
			add_override("read_timeout_ms", optarg);
			break;
		case O_IDLE_TIMEOUT:
			add_override("idle_timeout_ms", optarg);
			break;
		case O_MAX_CONN:
			add_override("max_connections", optarg);
			break;
		case O_LOG_LEVEL:
			add_override("log_level", optarg);
			break;
		case O_READY:
			add_override("ready_file", optarg);
			break;
		case O_AUDIT_JOURNAL:
			add_override("audit_journal", optarg);
			break;
		case O_METRICS_MODE:
			add_override("metrics_mode", optarg);
			break;
		case O_DAEMON:
			detach = true;
			break;
		case O_CONFIG:
			config_file = optarg;
			break;
		case O_CHECK:
			check = true;
			break;
		case O_HELP:
			usage(stdout);
			return 0;
		case O_VERSION:
			printf("allocctld %s (protocol %u, segment ABI %u)\n", CTLD_VERSION,
			       CTL_PROTOCOL_VERSION, LA_SHM_ABI_VERSION);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "allocctld: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	struct ctld *d = &daemon_state;
	char err[512];
	struct policy_conf *pc = NULL;
	if (config_build_all(&d->cfg, &pc, config_file, overrides, noverrides, err, sizeof(err))) {
		fprintf(stderr, "allocctld: %s\n", err);
		return 2;
	}
	if (check) {
		printf("configuration ok: socket %s, listen %s, %d run directories%s, %d "
		       "profiles, %d policies%s\n",
		       d->cfg.socket, d->cfg.listen, d->cfg.nrun_dirs,
		       d->cfg.default_dirs ? " + /dev/shm/liballoc-<uid>" : "", pc->nprofiles,
		       pc->npolicies, d->cfg.policy_dry_run ? " (dry run)" : "");
		policy_conf_free(pc);
		return 0;
	}
	d->config_file = config_file;
	d->overrides = overrides;
	d->noverrides = noverrides;
	log_level = d->cfg.log_level;
	if (detach)
		daemonize();
	signal(SIGPIPE, SIG_IGN);
	seg_install_sigbus_guard();
	/* one descriptor per segment: raise the soft limit to the hard one */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (audit_init(&d->audit, (size_t)d->cfg.audit_ring, d->cfg.audit_journal)) {
		log_error("out of memory for the audit ring");
		return 1;
	}
	srandom((unsigned)getpid() ^ (unsigned)seg_now_ns(CLOCK_MONOTONIC));
	d->token = (uint32_t)getpid();
	d->next_seq = seg_now_ns(CLOCK_REALTIME); /* never reuses a predecessor's numbers */
	TAILQ_INIT(&d->jobs);
	d->inotify_fd = -1;
	d->base = loop_base_new();
	if (!d->base || loop_probe_init(d)) {
		log_error("event_base_new failed");
		return 1;
	}
	struct event *sigs[3] = {
	        evsignal_new(d->base, SIGTERM, on_stop, d),
	        evsignal_new(d->base, SIGINT, on_stop, d),
	        evsignal_new(d->base, SIGHUP, on_reload, d),
	};
	for (int i = 0; i < 3; i++)
		if (!sigs[i] || event_add(sigs[i], NULL)) {
			log_error("cannot install signal handlers");
			return 1;
		}
	int rc = 1;
	/* before discovery: processes found at start get their profiles */
	if (policy_init(d, pc)) {
		log_error("out of memory for the policies");
		goto out;
	}
	if ((d->cfg.history_sample_ms && timeline_init(d)) || discover_init(d) || control_init(d) ||
	    http_init(d))
		goto out;
	if (d->cfg.ready_file[0] && write_ready_file(d))
		log_warn("cannot write %s: %s", d->cfg.ready_file, strerror(errno));
	log_info("allocctld %s serving (%d processes)", CTLD_VERSION, d->nprocs);
	loop_probe_reset(d); /* discovery at start ran to its end before serving */
	event_base_dispatch(d->base);
	rc = 0;
out:
	commands_shutdown(d);
	policy_shutdown(d);
	http_shutdown(d);
	control_shutdown(d);
	timeline_shutdown(d);
	discover_shutdown(d);
	if (d->cfg.ready_file[0])
		unlink(d->cfg.ready_file);
	for (int i = 0; i < 3; i++)
		event_free(sigs[i]);
	loop_probe_free(d);
	event_base_free(d->base);
	audit_free(&d->audit);
	log_info("stopped");
	return rc;
}
