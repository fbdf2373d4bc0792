# tests/policy/common.bash — shared by tests/policy/*.bats (issue 20: audit trail, profiles,
# pressure policies, expiring changes, the sectioned config file). Each test gets a private
# directory under /tmp (Unix socket paths are short), mode 0711 so that a second uid can
# reach the copies made for it; processes it starts are recorded and killed by pid.
# wait_for and json_check come from the CLI suites' helpers.
load ../cli/helpers
CTLD="$BUILD/allocctld"
LIBALLOC_SO="${LIBALLOC_SO:-$BUILD/liballoc.so}"
POL_PIDS=()

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
	"$CTLD" --socket "$P/ctl.sock" --socket-mode 0666 --listen 127.0.0.1:0 \
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

# A second uid (nobody) with its own copies of what it runs, reachable through $P (0711).
nobody_setup() {
	[ "$(id -u)" = 0 ] || skip "needs root to act as a second uid"
	command -v runuser >/dev/null || skip "runuser is missing"
	NOBODY_UID=$(id -u nobody)
	mkdir -m 755 "$P/bin"
	cp "$ALLOCCTL" "$LIBALLOC_SO" "$P/bin/"
	chmod 755 "$P/bin/"*
	mkdir -m 700 "$P/seg-nobody"
	chown nobody "$P/seg-nobody"
	NB_ALLOCCTL="$P/bin/allocctl"
	NB_SO="$P/bin/$(basename "$LIBALLOC_SO")"
}

as_nobody() { runuser -u nobody -- "$@"; }

# start_nobody_sleeper: a preloaded `sleep 300` of uid nobody in $P/seg-nobody; sets NSP.
start_nobody_sleeper() {
	runuser -u nobody -- env LIBALLOC_RUN_DIR="$P/seg-nobody" LD_PRELOAD="$NB_SO" sleep 300 3>&- &
	local r=$!
	POL_PIDS+=("$r")
	wait_for pgrep -P "$r" -x sleep >/dev/null || wait_for test -e "/proc/$r"
	NSP=$(pgrep -P "$r" -x sleep || echo "$r")
	POL_PIDS+=("$NSP")
	wait_for test -e "$P/seg-nobody/liballoc.$NSP.seg"
	if [ -n "${DPID:-}" ]; then wait_for listed "$NSP"; fi
}

metrics() { curl -sf "http://$HTTP/metrics"; }
