# e2e.bash — shared setup of the allocctld end-to-end suites (tests/e2e/ctld_*.bats).
# Every test gets a private directory under $BUILD/run (segments, socket, logs) and an
# ephemeral HTTP port, so suites run in parallel with anything else. Background processes
# are recorded and killed by pid in ctld_teardown.
ROOT=${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
TESTS_BIN=${TESTS_BIN:-$BUILD/tests}
LIBALLOC_SO=${LIBALLOC_SO:-$BUILD/liballoc.so}
CTLD="$BUILD/allocctld"
FAKESEG="$TESTS_BIN/fakeseg"
FAKESEG_EXE=$(realpath "$FAKESEG" 2>/dev/null || echo "$FAKESEG") # as /proc/<pid>/exe shows it
CTLCLIENT="$TESTS_BIN/ctlclient"
PROMCHECK="$ROOT/ctld/tools/promcheck.py"

ctld_setup() {
	mkdir -p "$BUILD/run"
	T=$(mktemp -d "$BUILD/run/ctld.XXXXXX")
	mkdir -m 700 "$T/segs" "$T/sock"
	: >"$T/pids"
	NFAKE=0
}

ctld_teardown() {
	if [ -n "${T:-}" ] && [ -f "$T/pids" ]; then
		while read -r p; do kill -CONT "$p" 2>/dev/null; kill -TERM "$p" 2>/dev/null || true; done <"$T/pids"
		while read -r p; do
			for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.02; done
			kill -9 "$p" 2>/dev/null || true
		done <"$T/pids"
	fi
	if [ -n "${DPID:-}" ]; then
		kill -TERM "$DPID" 2>/dev/null || true
		for _ in $(seq 100); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.02; done
		kill -9 "$DPID" 2>/dev/null || true
	fi
	# a sanitizer report from the daemon (errors, leaks at exit) fails the test
	local bad=0
	if [ -n "${T:-}" ] && [ -f "$T/log" ] && grep -q 'Sanitizer' "$T/log"; then
		cat "$T/log" >&2
		bad=1
	fi
	[ -n "${T:-}" ] && rm -rf "$T"
	return $bad
}

# Wait until a file exists (at most $2 seconds, default 5).
wait_file() {
	local i
	for i in $(seq $((${2:-5} * 50))); do
		[ -e "$1" ] && return 0
		sleep 0.02
	done
	echo "timed out waiting for $1" >&2
	return 1
}

# start_daemon [allocctld options...]: sets DPID, SOCK, HTTP; log in $T/log.
start_daemon() {
	rm -f "$T/ready"
	# CTLD_DEFAULT_DIRS=1: also watch the default directories (/dev/shm/liballoc-<uid>)
	local dd=--no-default-dirs
	[ -n "${CTLD_DEFAULT_DIRS:-}" ] && dd=
	"$CTLD" --socket "${SOCK_PATH:-$T/sock/ctl.sock}" --listen "${CTLD_LISTEN:-127.0.0.1:0}" \
		--run-dir "$T/segs" $dd --ready-file "$T/ready" "$@" \
		>>"$T/log" 2>&1 3>&- &
	DPID=$!
	wait_file "$T/ready" 5 || { cat "$T/log" >&2; return 1; }
	SOCK=$(sed -n 's/^socket=//p' "$T/ready")
	HTTP=$(sed -n 's/^http=//p' "$T/ready")
}

# fake_bin NAME: a symlink $T/bin/NAME to fakeseg, so a fake runs under that name (its comm
# and argv[0]; /proc/<pid>/exe stays fakeseg's path). Prints the symlink's path.
fake_bin() {
	mkdir -p -m 755 "$T/bin"
	ln -sf "$FAKESEG" "$T/bin/$1"
	echo "$T/bin/$1"
}

# start_fake [fakeseg options...]: prints nothing, sets FPID (and appends to $T/pids).
# --exe PATH also runs it under PATH's basename (fake_bin); the daemon never believes the
# exe written in the segment, so that is how a test gives a fake process a name.
start_fake() {
	NFAKE=$((NFAKE + 1))
	local ready="$T/fake.$NFAKE.ready" prog="$FAKESEG" prev=
	for a in "$@"; do
		[ "$prev" = --exe ] && prog=$(fake_bin "$(basename "$a")")
		prev=$a
	done
	"$prog" --dir "${FAKE_DIR:-$T/segs}" --ready "$ready" "$@" >>"$T/fake.log" 2>&1 3>&- &
	FPID=$!
	echo "$FPID" >>"$T/pids"
	wait_file "$ready" 5
}

ctl() {
	"$CTLCLIENT" --socket "$SOCK" "$@"
}

# wait_listed PID [present|absent] [seconds, default 30: a bound for a machine loaded far
# beyond the usual, not a wait: it returns as soon as the condition holds]
wait_listed() {
	local want=${2:-present} i
	for i in $(seq $((${3:-30} * 20))); do
		if ctl list | grep -q "^process pid=$1 "; then
			[ "$want" = present ] && return 0
		else
			[ "$want" = absent ] && return 0
		fi
		sleep 0.05
	done
	echo "pid $1 not $want after ${3:-30}s" >&2
	return 1
}

metrics() {
	curl -sf "http://$HTTP/metrics"
}
