# common.bash — shared setup of the reliability suites (tests/reliability/*.bats): a private
# directory per test (segments, socket, logs) under $BUILD/run/reliability.XXXXXX, or, for
# suites that run something as a second uid (rel_setup --other-uid), where every uid can
# reach it, with copies of the programs that uid runs (tests/helpers/crossuid.bash, which
# also gives as_user and as_nobody); background processes are recorded in $T/pids and
# killed by pid in rel_teardown. Reuses ctld/tools/e2e.bash for the daemon (start_daemon,
# wait_listed, ctl, start_fake).
source "${ROOT:-$BATS_TEST_DIRNAME/../..}/ctld/tools/e2e.bash"
ALLOCCTL="$BUILD/allocctl"
REL_BIN="$TESTS_BIN/reliability"

SOAK="$REL_BIN/soak"

# rel_setup [--other-uid]
rel_setup() {
	[ -f "$LIBALLOC_SO" ] || skip "no $LIBALLOC_SO"
	[ -x "$REL_BIN/soak" ] && [ -x "$REL_BIN/enomem" ] ||
		skip "$REL_BIN/{soak,enomem} not built (the root Makefile must include tests/reliability/module.mk)"
	if [ "${1:-}" = --other-uid ]; then
		T=$(xuid_mkdir reliability) || return 1
		xuid_share "$T" CTLD CTLCLIENT FAKESEG LIBALLOC_SO ALLOCCTL SOAK || return 1
	else
		mkdir -p "$BUILD/run"
		T=$(mktemp -d "$BUILD/run/reliability.XXXXXX")
	fi
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
	wait_file "$T/segs/liballoc.$SPID.seg"
}

# The soak service (preload "$SOAK" THREADS 0 SLOTS runs until SIGTERM) prints a progress
# line every 100 ms while it runs, with the count of operations its threads have done.
ops_lines() {
	grep -c '^ops=' "$T/svc.out" || true
}

ops_done() {
	local n
	n=$(sed -n 's/^ops=\([0-9]*\) .*/\1/p' "$T/svc.out" | tail -n 1)
	echo "${n:-0}"
}

# still_allocating [N]: until the service has printed N (2) more progress lines and its
# threads have done more operations than at the call (counted in steps of 1024 a thread)
still_allocating() {
	local want=$(($(ops_lines) + ${1:-2})) ops
	ops=$(ops_done)
	wait_until eval '[ "$(ops_lines)" -ge '"$want"' ] && [ "$(ops_done)" -gt '"$ops"' ]'
}

# finish_soak: stop the service; it must end well: exit 0, no corrupted block, no failed
# allocation
finish_soak() {
	kill -TERM "$SPID"
	local rc=0
	wait "$SPID" || rc=$?
	tail -n 2 "$T/svc.out"
	cat "$T/svc.err"
	[ "$rc" -eq 0 ]
	grep -q 'corrupt=0 failed=0' "$T/svc.out"
}

# vmrss_kb PID
vmrss_kb() {
	awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0
}

