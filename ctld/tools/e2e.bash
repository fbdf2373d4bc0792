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
source "$ROOT/tests/helpers/crossuid.bash"
source "$ROOT/tests/helpers/wait.bash"

# ctld_setup [--other-uid]: with --other-uid, $T is where every uid can reach it and the
# daemon, the clients, fakeseg and liballoc.so are run from copies in $T/bin
# (tests/helpers/crossuid.bash): a test that runs any of them as nobody works from a
# checkout in a 0700 home directory.
ctld_setup() {
	if [ "${1:-}" = --other-uid ]; then
		T=$(xuid_mkdir ctld) || return 1
		xuid_share "$T" CTLD CTLCLIENT FAKESEG LIBALLOC_SO || return 1
		FAKESEG_EXE=$FAKESEG
	else
		mkdir -p "$BUILD/run"
		T=$(mktemp -d "$BUILD/run/ctld.XXXXXX")
	fi
	mkdir -m 700 "$T/segs" "$T/sock"
	: >"$T/pids"
	NFAKE=0
}

ctld_teardown() {
	if [ -n "${T:-}" ] && [ -f "$T/pids" ]; then
		while read -r p; do kill -CONT "$p" 2>/dev/null; kill -TERM "$p" 2>/dev/null || true; done <"$T/pids"
		while read -r p; do
			wait_until -t 10 ended "$p" 2>/dev/null || true
			kill -9 "$p" 2>/dev/null || true
		done <"$T/pids"
	fi
	if [ -n "${DPID:-}" ]; then
		kill -TERM "$DPID" 2>/dev/null || true
		# a sanitizer build writes its report at exit: give it the time it takes
		wait_until -t 30 ended "$DPID" 2>/dev/null || true
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

# wait_file PATH [SECONDS]: until PATH exists (for up to SECONDS, default $TEST_DEADLINE)
wait_file() {
	wait_until -t "${2:-$TEST_DEADLINE}" test -e "$1"
}

# start_daemon [allocctld options...]: sets DPID, SOCK, HTTP; log in $T/log. Commands
# wait up to 30 s for a process (a busy machine is slow) unless the options say otherwise.
start_daemon() {
	rm -f "$T/ready"
	# CTLD_DEFAULT_DIRS=1: also watch the default directories (/dev/shm/liballoc-<uid>)
	local dd=--no-default-dirs
	[ -n "${CTLD_DEFAULT_DIRS:-}" ] && dd=
	"$CTLD" --socket "${SOCK_PATH:-$T/sock/ctl.sock}" --listen "${CTLD_LISTEN:-127.0.0.1:0}" \
		--run-dir "$T/segs" $dd --ready-file "$T/ready" \
		--command-timeout-ms 30000 "$@" \
		>>"$T/log" 2>&1 3>&- &
	DPID=$!
	wait_file "$T/ready" || { cat "$T/log" >&2; return 1; }
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
	wait_file "$ready"
}

# ctl ARGS...: a request through the test client (a minute to answer unless ARGS give
# their own --timeout: a busy machine is slow)
ctl() {
	"$CTLCLIENT" --socket "$SOCK" --timeout 60000 "$@"
}

listed() {
	ctl list | grep -q "^process pid=$1 "
}

# wait_listed PID [present|absent]: until the daemon lists PID (or no longer does); on
# failure the daemon's log says why
wait_listed() {
	local rc=0
	if [ "${2:-present}" = present ]; then
		wait_until listed "$1" || rc=1
	else
		wait_until eval "! listed $1" || rc=1
	fi
	if [ $rc != 0 ]; then
		echo "the daemon's log (last 20 lines):" >&2
		tail -n 20 "$T/log" >&2
	fi
	return $rc
}

# metric NAME: the value of one of the daemon's own series (no labels)
metric() {
	metrics | sed -n "s/^$1 \([0-9]*\)\$/\1/p"
}

# rescans: how many times the daemon has scanned its run directories
rescans() {
	metric liballoc_ctld_rescans_total
}

# wait_rescans N: until the daemon has scanned its run directories N more times (what a
# test must see before it can say something did not happen, e.g. a refusal not logged again)
wait_rescans() {
	local want=$(($(rescans) + $1))
	wait_until eval '[ "$(rescans)" -ge '"$want"' ]'
}

metrics() {
	curl -sf "http://$HTTP/metrics"
}
