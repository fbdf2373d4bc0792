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
	BG=()
}

# started NAME CMD...: CMD in the background, its output in $BATS_TEST_TMPDIR/NAME.out.
# The idle modes' children sleep 2.5 s by design (and the fallback wait up to a second a
# child): independent children, so they run side by side instead of one after the other.
started() {
	local name=$1
	shift
	"$@" >"$BATS_TEST_TMPDIR/$name.out" 2>&1 3>&- &
	BG+=("$name:$!")
}

# all_ended_ok: every started CMD exited 0 and printed nothing (each says why otherwise)
all_ended_ok() {
	local e name rc=0
	for e in "${BG[@]}"; do
		name=${e%%:*}
		wait "${e#*:}" || {
			echo "$name: exit status $?"
			rc=1
		}
		if [ -s "$BATS_TEST_TMPDIR/$name.out" ]; then
			echo "$name:"
			cat "$BATS_TEST_TMPDIR/$name.out"
			rc=1
		fi
	done
	BG=()
	return $rc
}

@test "main and its threads leaving together through pthread_exit end the process" {
	run -0 env LD_PRELOAD="$LIBALLOC_SO" "$HELPER" main-exit 40
	[ -z "$output" ]
}

@test "threads that come and go while main runs leave /proc alone; the last ones still end the process" {
	command -v strace >/dev/null || skip "no strace"
	# the control thread looked whether it was alone (/proc/self/status) 1, 2, 4 ... ms
	# after every thread exit, also while main ran: 20 generations read it 31 times
	run -0 env LD_PRELOAD="$LIBALLOC_SO" strace -f -qq -e trace=openat,access \
		-o "$BATS_TEST_TMPDIR/gen.st" "$HELPER" generations 1
	[ -z "$output" ]
	grep -q 'access("lastthread-generations-done"' "$BATS_TEST_TMPDIR/gen.st"
	local reads
	reads=$(sed '/lastthread-generations-done/q' "$BATS_TEST_TMPDIR/gen.st" |
		grep -c '/proc/self/status' || true)
	echo "reads of /proc/self/status while main ran: $reads"
	[ "$reads" -eq 0 ]
}

@test "main leaving through pthread_exit ends the process when a thread that never allocated ends" {
	# the thread sleeps 2.5 s, longer than the control thread once looked after main left
	started idle1 env LD_PRELOAD="$LIBALLOC_SO" "$HELPER" idle-thread 1
	started idle2 env LD_PRELOAD="$LIBALLOC_SO" "$HELPER" idle-thread 1
	all_ended_ok
}

@test "threads that never allocate take no cache, arena or heap of their own" {
	# a new thread freed its start's record itself, which gave it a cache, its slots and
	# (one arena per CPU) a second arena and heap: redis's idle background threads faulted
	# 7-8 pages in for that. Now the next pthread_create frees the records
	local n
	for n in 3 100; do
		run -0 env LD_PRELOAD="$LIBALLOC_SO" "$TESTS_BIN/idlethreads" idle $n
		echo "idle $n: $output"
		[ "$output" = "metadata +0" ]
	done
	# the count sees the caches of threads that do allocate
	run -0 env LD_PRELOAD="$LIBALLOC_SO" "$TESTS_BIN/idlethreads" alloc 3
	echo "alloc 3: $output"
	[[ "$output" =~ ^metadata\ \+[1-9][0-9]*$ ]]
}

@test "SIGTERM ends such a process meanwhile, also when only the control thread could take it" {
	started term env LD_PRELOAD="$LIBALLOC_SO" "$HELPER" idle-term 3
	# the sleeping thread blocks SIGTERM: once it is gone, the signal must not stay pending
	# in a process kept alive by the control thread (which blocks every signal)
	started blocked1 env LD_PRELOAD="$LIBALLOC_SO" "$HELPER" idle-blocked 1
	started blocked2 env LD_PRELOAD="$LIBALLOC_SO" "$HELPER" idle-blocked 1
	all_ended_ok
}

@test "a child forked from a thread ends when its threads leave together" {
	run -0 env LD_PRELOAD="$LIBALLOC_SO" "$HELPER" fork-thread 40
	[ -z "$output" ]
}

@test "without futex_waitv (Linux < 5.16, seccomp) the control thread still lets them end" {
	# the fallback wakes at least once a second: each child ends within about that
	started main "$NOWAITV" -p "$LIBALLOC_SO" "$HELPER" main-exit 3
	started fork "$NOWAITV" -p "$LIBALLOC_SO" "$HELPER" fork-thread 3
	started idle "$NOWAITV" -p "$LIBALLOC_SO" "$HELPER" idle-thread 1
	all_ended_ok
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
	started main "$HELPER" main-exit 5
	started fork "$HELPER" fork-thread 5
	started idle "$HELPER" idle-thread 1
	started term "$HELPER" idle-term 1
	started blocked "$HELPER" idle-blocked 1
	all_ended_ok
}

@test "the helper rejects bad arguments with its usage line" {
	run -2 "$HELPER" sideways 3
	[ "$output" = "usage: lastthread main-exit|fork-thread|idle-thread|idle-term|idle-blocked|generations ROUNDS" ]
	run -2 "$HELPER" main-exit 0
	[ "$output" = "usage: lastthread main-exit|fork-thread|idle-thread|idle-term|idle-blocked|generations ROUNDS" ]
}
