#!/usr/bin/env bats
# lastthread.bats — a preloaded process ends when its last thread exits (glibc then calls
# exit(0)), even when threads leave at the same moment or the process was forked from a
# thread: liballoc's control thread must never keep such a process alive (issue 3:
# unmodified programs behave as without the preload), also when that thread never called
# the allocator, and a SIGTERM sent meanwhile ends it (issue 19). tests/helpers/lastthread
# forks the children and reaps each within 10 s. tests/helpers/nowaitv runs them where futex_waitv
# fails (a seccomp filter), so the control thread's fallback wait is the one at work.
# san: skip

bats_require_minimum_version 1.5.0

setup() {
	[ -f "${LIBALLOC_SO:-}" ] || skip "no $LIBALLOC_SO"
	HELPER="$TESTS_BIN/lastthread"
	NOWAITV="$TESTS_BIN/nowaitv"
}

@test "main and its threads leaving together through pthread_exit end the process" {
	run -0 env LD_PRELOAD="$LIBALLOC_SO" "$HELPER" main-exit 40
	[ -z "$output" ]
}

@test "main leaving through pthread_exit ends the process when a thread that never allocated ends" {
	# the thread sleeps 2.5 s, longer than the control thread once looked after main left
	run -0 env LD_PRELOAD="$LIBALLOC_SO" "$HELPER" idle-thread 2
	[ -z "$output" ]
}

@test "SIGTERM ends such a process meanwhile, also when only the control thread could take it" {
	run -0 env LD_PRELOAD="$LIBALLOC_SO" "$HELPER" idle-term 3
	[ -z "$output" ]
	# the sleeping thread blocks SIGTERM: once it is gone, the signal must not stay pending
	# in a process kept alive by the control thread (which blocks every signal)
	run -0 env LD_PRELOAD="$LIBALLOC_SO" "$HELPER" idle-blocked 2
	[ -z "$output" ]
}

@test "a child forked from a thread ends when its threads leave together" {
	run -0 env LD_PRELOAD="$LIBALLOC_SO" "$HELPER" fork-thread 40
	[ -z "$output" ]
}

@test "without futex_waitv (Linux < 5.16, seccomp) the control thread still lets them end" {
	# the fallback wakes at least once a second: each child ends within about that
	run -0 "$NOWAITV" -p "$LIBALLOC_SO" "$HELPER" main-exit 3
	[ -z "$output" ]
	run -0 "$NOWAITV" -p "$LIBALLOC_SO" "$HELPER" fork-thread 3
	[ -z "$output" ]
	run -0 "$NOWAITV" -p "$LIBALLOC_SO" "$HELPER" idle-thread 1
	[ -z "$output" ]
}

@test "nowaitv rejects bad arguments and reports a command it cannot run" {
	run -2 "$NOWAITV"
	[ "$output" = "usage: nowaitv [-p PRELOAD] CMD [ARG...]" ]
	run -2 "$NOWAITV" -p "$LIBALLOC_SO"
	[ "$output" = "usage: nowaitv [-p PRELOAD] CMD [ARG...]" ]
	run -127 "$NOWAITV" "$BATS_TEST_TMPDIR/no-such-program"
	[ "$output" = "nowaitv: $BATS_TEST_TMPDIR/no-such-program: No such file or directory" ]
}

@test "the same children end without the preload (the helper's own check)" {
	run -0 "$HELPER" main-exit 5
	run -0 "$HELPER" fork-thread 5
	run -0 "$HELPER" idle-thread 1
	run -0 "$HELPER" idle-term 1
	run -0 "$HELPER" idle-blocked 1
}

@test "the helper rejects bad arguments with its usage line" {
	run -2 "$HELPER" sideways 3
	[ "$output" = "usage: lastthread main-exit|fork-thread|idle-thread|idle-term|idle-blocked ROUNDS" ]
	run -2 "$HELPER" main-exit 0
	[ "$output" = "usage: lastthread main-exit|fork-thread|idle-thread|idle-term|idle-blocked ROUNDS" ]
}
