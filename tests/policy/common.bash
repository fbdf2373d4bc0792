# tests/policy/common.bash — shared by tests/policy/*.bats (issue 20: audit trail, profiles,
# pressure policies, expiring changes, the sectioned config file). Each test gets a private
# directory under /tmp (Unix socket paths are short), mode 0711 so that a second uid can
# reach the copies made for it (nobody_setup); processes it starts are recorded and killed
# by pid.
# wait_for and json_check come from the CLI suites' helpers.
load ../cli/helpers
CTLD="$BUILD/allocctld"
LIBALLOC_SO="${LIBALLOC_SO:-$BUILD/liballoc.so}"
POL_PIDS=()
CTLD_NS=() # what the daemon is started under (standin_v2: a mount namespace of its own)

pol_setup() {
	[ -x "$CTLD" ] || skip "allocctld is not built ($CTLD)"
	[ -e "$LIBALLOC_SO" ] || skip "liballoc.so is not built ($LIBALLOC_SO)"
	P=$(mktemp -d /tmp/allocctl-policy.XXXXXX)
	chmod 711 "$P"
	mkdir -m 700 "$P/seg"
	export LIBALLOC_RUN_DIR="$P/seg"
	export ALLOCCTL_SOCKET="$P/ctl.sock"
	DPID=
}

pol_teardown() {
	local p
	for p in "${POL_PIDS[@]}"; do kill -CONT "$p" 2>/dev/null; kill "$p" 2>/dev/null || true; done
	for p in "${POL_PIDS[@]}"; do
		for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.02; done
		kill -9 "$p" 2>/dev/null || true
	done
	POL_PIDS=()
	stop_daemon
	remove_cgroups
	local bad=0
	if [ -n "${P:-}" ] && [ -f "$P/ctld.log" ] && grep -q 'Sanitizer' "$P/ctld.log"; then
		cat "$P/ctld.log" >&2
		bad=1
	fi
	[ -n "${P:-}" ] && rm -rf "$P"
	return $bad
}

# start_daemon [allocctld options...]: the daemon on $P/ctl.sock (mode 0666: each client
# still acts only on its own uid's processes), watching $P/seg and every --run-dir given.
start_daemon() {
	rm -f "$P/ready"
	"${CTLD_NS[@]}" "$CTLD" --socket "$P/ctl.sock" --socket-mode 0666 --listen 127.0.0.1:0 \
		--run-dir "$P/seg" --no-default-dirs --ready-file "$P/ready" --rescan-ms 200 "$@" \
		>>"$P/ctld.log" 2>&1 3>&- &
	DPID=$!
	wait_for test -s "$P/ready" || { cat "$P/ctld.log" >&2; return 1; }
	HTTP=$(sed -n 's/^http=//p' "$P/ready")
}

stop_daemon() {
	[ -n "${DPID:-}" ] || return 0
	kill -TERM "$DPID" 2>/dev/null || true
	for _ in $(seq 250); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.02; done
	kill -9 "$DPID" 2>/dev/null || true
	wait "$DPID" 2>/dev/null || true
	DPID=
}

listed() { "$ALLOCCTL" ps --json | grep -q "\"pid\":$1,"; }

# start_sleeper [ENV=VALUE...]: a preloaded `sleep 300` in $P/seg; sets SP, waits until the
# daemon (if running) lists it.
start_sleeper() {
	env "$@" LD_PRELOAD="$LIBALLOC_SO" sleep 300 3>&- &
	SP=$!
	POL_PIDS+=("$SP")
	wait_for test -e "$LIBALLOC_RUN_DIR/liballoc.$SP.seg"
	if [ -n "${DPID:-}" ]; then wait_for listed "$SP"; fi
}

# A second uid (nobody) with its own copies of what it runs, reachable through $P (0711;
# tests/helpers/crossuid.bash, sourced by the CLI helpers: as_nobody, "$AS_USER").
nobody_setup() {
	[ "$(id -u)" = 0 ] || skip "needs root to act as a second uid"
	NOBODY_UID=$(id -u nobody)
	NB_ALLOCCTL=$ALLOCCTL
	NB_SO=$LIBALLOC_SO
	xuid_share "$P" NB_ALLOCCTL NB_SO
	mkdir -m 700 "$P/seg-nobody"
	chown nobody "$P/seg-nobody"
}

# start_nobody_sleeper: a preloaded `sleep 300` of uid nobody in $P/seg-nobody; sets NSP.
start_nobody_sleeper() {
	"$AS_USER" nobody env LIBALLOC_RUN_DIR="$P/seg-nobody" LD_PRELOAD="$NB_SO" sleep 300 3>&- &
	NSP=$!
	POL_PIDS+=("$NSP")
	wait_for test -e "$P/seg-nobody/liballoc.$NSP.seg"
	if [ -n "${DPID:-}" ]; then wait_for listed "$NSP"; fi
}

metrics() { curl -sf "http://$HTTP/metrics"; }

# value PID NAME: a tunable's value in the process (no python: it runs in loops);
# value_is PID NAME VALUE for wait_for (which must evaluate it each time).
value() { "$ALLOCCTL" --json get "$1" "$2" | sed -n "s/.*\"$2\":{\"value\":\(-\{0,1\}[0-9]*\).*/\1/p"; }
value_is() { [ "$(value "$1" "$2")" = "$3" ]; }

PRESSURE_SVC="$BUILD/tests/pressure_svc"

# make_cgroup LIMIT: a memory cgroup of the test's own under this process's memory cgroup
# (v1 memory controller, or v2 where it has one); sets CG (directory), CG_REL (path inside
# the hierarchy) and CG_VER. Skips where no memory cgroup can be made (not root).
make_cgroup() {
	[ "$(id -u)" = 0 ] || skip "needs root to make a memory cgroup"
	local rel v1 v2
	rel=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print $3}' /proc/self/cgroup)
	v1=$(awk '$9 == "cgroup" && $NF ~ /(^|,)memory(,|$)/ {print $5; exit}' /proc/self/mountinfo)
	if [ -n "$rel" ] && [ -n "$v1" ]; then
		CG_VER=1
		CG_REL="${rel%/}/allocctl-policy-test.$$.$BATS_TEST_NUMBER"
		CG="$v1$CG_REL"
	else
		v2=$(awk '$9 == "cgroup2" {print $5; exit}' /proc/self/mountinfo)
		rel=$(awk -F: '$1 == "0" {print $3}' /proc/self/cgroup)
		[ -n "$v2" ] && grep -qw memory "$v2/cgroup.controllers" 2>/dev/null ||
			skip "no memory cgroup hierarchy on this host"
		CG_VER=2
		CG_REL="${rel%/}/allocctl-policy-test.$$.$BATS_TEST_NUMBER"
		CG="$v2$CG_REL"
		grep -qw memory "$(dirname "$CG")/cgroup.subtree_control" ||
			skip "the memory controller is not enabled for children of $(dirname "$CG")"
	fi
	mkdir "$CG"
	echo "$CG" >>"$P/cgroups"
	if [ "$CG_VER" = 1 ]; then echo "$1" >"$CG/memory.limit_in_bytes"; else echo "$1" >"$CG/memory.max"; fi
}

oom_kills() {
	if [ "$CG_VER" = 1 ]; then awk '$1 == "oom_kill" {print $2}' "$CG/memory.oom_control"
	else awk '$1 == "oom_kill" {print $2}' "$CG/memory.events"; fi
}

# in_cgroup CMD...: run CMD (exec) inside $CG.
in_cgroup() { sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$CG" "$@"; }

# start_in_cgroup OUT CMD...: the same in the background, output to OUT; BG_PID is CMD's
# own pid (the shell execs it) and is killed at teardown.
start_in_cgroup() {
	local out=$1
	shift
	sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$CG" "$@" >"$out" 3>&- &
	BG_PID=$!
	POL_PIDS+=("$BG_PID")
}

remove_cgroups() {
	[ -f "${P:-/nonexistent}/cgroups" ] || return 0
	local c
	while read -r c; do
		for _ in $(seq 100); do rmdir "$c" 2>/dev/null && break; [ -d "$c" ] || break; sleep 0.05; done
	done <"$P/cgroups"
}

# standin_v2 CURRENT MAX HIGH: a stand-in cgroup v2 directory $SV (memory.current, .max,
# .high and .events; this kind of host has no v2 memory controller) that the daemon
# start_daemon starts next sees at $CG, the test's real cgroup (make_cgroup first): it runs
# in a mount namespace of its own where $SV is bind-mounted over $CG. Its processes are
# the real cgroup's; what it reads of the cgroup is the stand-in's, which the test writes
# (sv_usage). No hook in the daemon: it finds the stand-in where the cgroup is.
standin_v2() {
	command -v unshare >/dev/null || skip "unshare (util-linux) is not installed"
	unshare -m --propagation private true 2>/dev/null || skip "no mount namespace can be made here"
	SV="$P/standin"
	mkdir "$SV"
	echo "$1" >"$SV/memory.current"
	echo "$2" >"$SV/memory.max"
	echo "$3" >"$SV/memory.high"
	SV_HIGH=0
	printf 'low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n' >"$SV/memory.events"
	CTLD_NS=(unshare -m --propagation private sh -c 'mount --bind "$0" "$1" && shift && exec "$@"' "$SV" "$CG")
}

# sv_usage BYTES: the stand-in's memory.current becomes BYTES (renamed into place: never
# read half-written), then a 'high' event is counted in memory.events, as the kernel does
# when it throttles a charge over memory.high (written in place: the daemon watches that
# file's inode).
sv_usage() {
	echo "$1" >"$SV/memory.current.new"
	mv "$SV/memory.current.new" "$SV/memory.current"
	SV_HIGH=$((SV_HIGH + 1))
	printf 'low 0\nhigh %d\nmax 0\noom 0\noom_kill 0\n' "$SV_HIGH" >"$SV/memory.events"
}

# policy_is NAME PYTHON-EXPR: allocctl policies' entry of NAME (p) satisfies the expression.
policy_is() {
	"$ALLOCCTL" --json policies |
		json_check "[p for p in d['policies'] if p['name'] == '$1'] and all($2 for p in d['policies'] if p['name'] == '$1')" 2>/dev/null
}

# policy_events NAME: the events policy NAME has seen (allocctl policies).
policy_events() {
	"$ALLOCCTL" --json policies |
		python3 -c "import json, sys; print(sum(p['events'] for p in json.load(sys.stdin)['policies'] if p['name'] == '$1'))"
}
