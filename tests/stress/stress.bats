#!/usr/bin/env bats
# stress.bats — the concurrency suite: deterministic stress with verified contents,
# 100,000 threads with bounded memory, 1,000 forks from a multi-threaded process.
# In sanitizer builds the programs are linked with the prefixed allocator instead of
# preloading liballoc.so.

setup() {
	if [ -n "$SAN" ]; then PRE=(); else PRE=(env LD_PRELOAD="$LIBALLOC_SO"); fi
}

@test "stress: 8 threads hand verified blocks to each other in rounds" {
	run "${PRE[@]}" "$TESTS_BIN/stress" 8 4000 6
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *": ok" ]]
}

@test "stress: 2 threads x large scale" {
	run "${PRE[@]}" "$TESTS_BIN/stress" 2 30000 2
	echo "$output"
	[ "$status" -eq 0 ]
}

@test "threads: 100,000 threads created and joined grow RSS by at most 1 MiB" {
	n=100000 limit=1024
	# a sanitizer's runtime keeps per-thread state of its own: fewer threads, no tight bound
	[ -n "$SAN" ] && n=5000 limit=1048576
	run "${PRE[@]}" "$TESTS_BIN/threads" "$n" "$limit"
	echo "$output"
	[ "$status" -eq 0 ]
}

@test "forks: 1,000 forks from a process with 4 allocating threads, no hang" {
	n=1000
	# sanitizers: fewer forks; no leak check in children whose parent's threads are gone
	[ -n "$SAN" ] && n=50 && export ASAN_OPTIONS="detect_leaks=0 $ASAN_OPTIONS"
	run "${PRE[@]}" "$TESTS_BIN/forks" "$n" 4
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"0 hangs, 0 failures" ]]
}
