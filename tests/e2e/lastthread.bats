#!/usr/bin/env bats
# lastthread.bats — a preloaded process ends when its last thread exits (glibc then calls
# exit(0)), even when threads leave at the same moment or the process was forked from a
# thread: liballoc's control thread must never keep such a process alive (issue 3:
# unmodified programs behave as without the preload). tests/helpers/lastthread forks the
# children and reaps each within 10 s.
# san: skip

bats_require_minimum_version 1.5.0

setup() {
	[ -f "${LIBALLOC_SO:-}" ] || skip "no $LIBALLOC_SO"
	HELPER="$TESTS_BIN/lastthread"
}

@test "main and its threads leaving together through pthread_exit end the process" {
	run -0 env LD_PRELOAD="$LIBALLOC_SO" "$HELPER" main-exit 40
	[ -z "$output" ]
}

@test "a child forked from a thread ends when its threads leave together" {
	run -0 env LD_PRELOAD="$LIBALLOC_SO" "$HELPER" fork-thread 40
	[ -z "$output" ]
}

@test "the same children end without the preload (the helper's own check)" {
	run -0 "$HELPER" main-exit 5
	run -0 "$HELPER" fork-thread 5
}

@test "the helper rejects bad arguments with its usage line" {
	run -2 "$HELPER" sideways 3
	[ "$output" = "usage: lastthread main-exit|fork-thread ROUNDS" ]
	run -2 "$HELPER" main-exit 0
	[ "$output" = "usage: lastthread main-exit|fork-thread ROUNDS" ]
}
