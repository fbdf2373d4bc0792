# wait.bash — the shell suites wait for conditions, never for a stretch of time: a loaded
# 2-core machine runs ten times slower than a quiet one, so a fixed sleep is too short
# there and wasted here. wait_until polls a condition until it holds; the deadline only
# bounds how long a failing test takes to say what it waited for.
#
#   wait_until [-t SECONDS] CMD...   run CMD until it succeeds (every 20 ms at first, then
#                                    every 100 ms); after SECONDS (default $TEST_DEADLINE)
#                                    say on stderr what was awaited, and fail
#   TEST_DEADLINE                    default deadline in seconds (60)
#   ended PID                        the process has exited (gone, or a zombie not yet
#                                    reaped by its parent)
#   stop_process PID                 SIGSTOP PID, then wait until all its threads stopped
#
# Sourced by tests/cli/helpers.bash, ctld/tools/e2e.bash (and through it
# tests/reliability/common.bash) and the suites that have no shared setup.
TEST_DEADLINE=${TEST_DEADLINE:-60}

wait_until() {
	local t=$TEST_DEADLINE n=0
	if [ "${1:-}" = -t ]; then
		t=$2
		shift 2
	fi
	local end=$((SECONDS + t))
	until "$@"; do
		if [ "$SECONDS" -ge "$end" ]; then
			echo "timed out after ${t}s waiting for: $*" >&2
			return 1
		fi
		n=$((n + 1))
		if [ "$n" -lt 50 ]; then sleep 0.02; else sleep 0.1; fi
	done
}

# stop_process PID: SIGSTOP PID and wait until every thread of it has stopped. kill returns
# once the signal is queued; the threads stop only as each one next runs, so on a busy
# machine a control thread could still answer a command sent right after the kill.
stop_process() {
	kill -STOP "$1"
	wait_until all_threads_stopped "$1"
}

all_threads_stopped() {
	local f st
	for f in /proc/"$1"/task/*/stat; do
		st=$(sed -n 's/^.*) \([A-Za-z]\).*/\1/p' "$f" 2>/dev/null) || continue
		[ -z "$st" ] || [ "$st" = T ] || [ "$st" = t ] || return 1
	done
}

ended() {
	local st
	st=$(sed -n 's/^.*) \([A-Z]\).*/\1/p' "/proc/$1/stat" 2>/dev/null) || return 0
	[ -z "$st" ] || [ "$st" = Z ] || [ "$st" = X ]
}
