# common.bash — shared setup of the reliability suites (tests/reliability/*.bats): a private
# directory under $BUILD/run/reliability.XXXXXX per test (segments, socket, logs), reachable
# by the second uid (nobody) where a test needs it; background processes are recorded in
# $T/pids and killed by pid in rel_teardown. Reuses ctld/tools/e2e.bash for the daemon
# (start_daemon, wait_listed, ctl, start_fake).
source "${ROOT:-$BATS_TEST_DIRNAME/../..}/ctld/tools/e2e.bash"
ALLOCCTL="$BUILD/allocctl"
REL_BIN="$TESTS_BIN/reliability"

rel_setup() {
	[ -f "$LIBALLOC_SO" ] || skip "no $LIBALLOC_SO"
	[ -x "$REL_BIN/soak" ] && [ -x "$REL_BIN/enomem" ] ||
		skip "$REL_BIN/{soak,enomem} not built (the root Makefile must include tests/reliability/module.mk)"
	mkdir -p "$BUILD/run"
	T=$(mktemp -d "$BUILD/run/reliability.XXXXXX")
	chmod 755 "$T"
	mkdir -m 700 "$T/segs" "$T/sock"
	: >"$T/pids"
	NFAKE=0
}

rel_teardown() {
	ctld_teardown
}

# bg_record PID: kill it at teardown
bg_record() {
	echo "$1" >>"$T/pids"
}

# preload [VAR=VALUE...] CMD...: run CMD in the background under LD_PRELOAD with segments
# in $T/segs (stdout $T/svc.out, stderr $T/svc.err); sets SPID and waits for its segment.
# CMD must be the program itself, not a wrapper such as env that execs it: the wrapper would
# publish a segment of its own under the same pid first, and the wait would end on that.
preload() {
	env LIBALLOC_RUN_DIR="$T/segs" LD_PRELOAD="$LIBALLOC_SO" "$@" >"$T/svc.out" 2>"$T/svc.err" 3>&- &
	SPID=$!
	bg_record "$SPID"
	wait_file "$T/segs/liballoc.$SPID.seg" 5
}

# as_nobody CMD...: run CMD as uid nobody (setpriv execs, so $! is the command itself)
as_nobody() {
	setpriv --reuid=nobody --regid=nogroup --clear-groups -- "$@"
}

# vmrss_kb PID
vmrss_kb() {
	awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0
}

# retry SECONDS CMD...: run CMD until it succeeds, at most SECONDS
retry() {
	local end=$((SECONDS + $1))
	shift
	until "$@"; do
		[ $SECONDS -lt $end ] || return 1
		sleep 0.1
	done
}
