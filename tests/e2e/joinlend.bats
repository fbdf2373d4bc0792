#!/usr/bin/env bats
# joinlend.bats — a thread that frees the blocks of a thread waiting for it in pthread_join
# takes them back before it carves new pages: liballoc interposes pthread_join to know
# that the waiting thread allocates nothing meanwhile (control.c; arena.c, idle_lender).
# larson-1t-10k's worker each generation frees the slots main allocated while main waits
# in pthread_join: with a copy of its own carved beside them, the run's peak RSS was 7.9
# MiB against glibc's 7.4 (bench/README.md, session 40, peak40). tests/helpers/joinlend
# prints how many of the worker's new blocks are blocks it freed (modes: its header).
# san: skip

bats_require_minimum_version 1.5.0

setup() {
	[ -f "${LIBALLOC_SO:-}" ] || skip "no $LIBALLOC_SO"
	HELPER="$TESTS_BIN/joinlend"
}

# reused MODE: the helper's count of reused blocks, preloaded (an arena for each thread,
# no decay pass meanwhile)
reused() {
	run -0 env LIBALLOC_ARENA_MAX=16 LIBALLOC_DECAY_MS=60000 LD_PRELOAD="$LIBALLOC_SO" \
		"$HELPER" "$1"
	[[ $output =~ ^reused=([0-9]+)\ of\ 1024$ ]] || {
		echo "unexpected output: $output"
		return 1
	}
	REUSED=${BASH_REMATCH[1]}
}

@test "a worker takes back the blocks it frees of a thread that waits for it in pthread_join" {
	reused join
	echo "reused $REUSED of 1024"
	[ "$REUSED" -ge 896 ]
}

@test "a thread that waits elsewhere (a barrier) keeps its freed blocks" {
	reused barrier
	echo "reused $REUSED of 1024"
	[ "$REUSED" -eq 0 ]
}

@test "a thread cancelled in pthread_join no longer counts as waiting there" {
	# its arena, taken by a thread that waits in a barrier, must not lend: the count of
	# the cancelled thread goes at its exit (control.c, control_thread_exiting)
	reused cancel
	echo "reused $REUSED of 1024"
	[ "$REUSED" -eq 0 ]
}
