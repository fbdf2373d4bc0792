# tests/cli/helpers.bash — shared by tests/e2e/cli_*.bats: paths, the stand-in daemon,
# JSON checks, and cleanup of everything a test starts (each test's teardown calls
# cli_cleanup; processes are killed by the pids recorded here, never by name).
bats_require_minimum_version 1.5.0

: "${BUILD:?run through make test (BUILD unset)}"
ROOT="${ROOT:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}"
ALLOCCTL="$BUILD/allocctl"
FAKE_CTLD="$BUILD/tests/cli/fake-ctld"
WORKLOAD="$BUILD/tests/workload"
CLI_PIDS=()
source "$ROOT/tests/helpers/crossuid.bash"
source "$ROOT/tests/helpers/wait.bash"

# A short private directory: Unix socket paths are limited to 107 bytes.
cli_tmp() {
	CLI_TMP=$(mktemp -d /tmp/allocctl-test.XXXXXX)
	chmod 700 "$CLI_TMP"
}

cli_cleanup() {
	local p
	for p in "${CLI_PIDS[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	for p in "${CLI_PIDS[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	CLI_PIDS=()
	[ -n "${CLI_TMP:-}" ] && rm -rf "$CLI_TMP"
	return 0
}

# wait_for CONDITION-COMMAND...: until it holds (tests/helpers/wait.bash)
wait_for() {
	wait_until "$@"
}

# live_daemon DIR [allocctld options...]: a real allocctld on DIR/ctl.sock watching DIR/seg
# (made 0700), logging to DIR/ctld.log; waits until it is ready (setup_file of the live
# suites). live_daemon_stop DIR stops it.
live_daemon() {
	local dir=$1
	shift
	mkdir -m 700 "$dir/seg"
	"$BUILD/allocctld" --socket "$dir/ctl.sock" --run-dir "$dir/seg" --no-default-dirs \
		--listen off --rescan-ms 200 --ready-file "$dir/ready" "$@" 2>"$dir/ctld.log" 3>&- &
	echo $! >"$dir/ctld.pid"
	wait_until test -s "$dir/ready" || true # the suite's setup() reports it
}

live_daemon_stop() {
	[ -s "$1/ctld.pid" ] && kill "$(cat "$1/ctld.pid")" 2>/dev/null
	rm -rf "$1"
}

# start_fake [FLAG]: the stand-in daemon on $CLI_TMP/ctl.sock; exports ALLOCCTL_SOCKET.
start_fake() {
	[ -n "${CLI_TMP:-}" ] || cli_tmp
	export ALLOCCTL_SOCKET="$CLI_TMP/ctl.sock"
	"$FAKE_CTLD" "$ALLOCCTL_SOCKET" "$@" 3>&- &
	CLI_PIDS+=($!)
	wait_for test -S "$ALLOCCTL_SOCKET"
}

# json_check PYTHON-EXPR < json: the expression, over the parsed document `d`, is true.
json_check() {
	python3 -c '
import json, sys
d = json.load(sys.stdin)
ok = eval("(" + sys.argv[1] + "\n)")
if not ok:
    print("json check failed:", sys.argv[1], file=sys.stderr)
    print(json.dumps(d)[:2000], file=sys.stderr)
sys.exit(0 if ok else 1)' "$1"
}

# one_line TEXT: exactly one non-empty line.
one_line() {
	[ -n "$1" ] && [ "$(printf '%s\n' "$1" | wc -l)" -eq 1 ]
}
