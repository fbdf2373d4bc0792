#!/usr/bin/env bats
# interpose.bats — a library preloaded ahead of liballoc that interposes malloc (a leak
# checker, a tracer: LD_PRELOAD="shim.so liballoc.so") sees the program's calls and none of
# liballoc's own: liballoc calls its malloc and free by hidden aliases, not through the PLT
# (exports.h). Before, one realloc that moved a block was seen as a realloc, a malloc and a
# free, and a replay of such a trace leaked (session 21). tests/helpers/shim/countshim.c
# counts each thread's calls and forwards them (dlsym(RTLD_NEXT)); tests/helpers/
# interpose_seq makes a known sequence and prints the counts beside its own. Under glibc
# alone the shim counts the same (the sequence is right); reallocarray is seen as the
# realloc it is under both.
# san: skip

setup() {
	[ -f "${LIBALLOC_SO:-}" ] || skip "no $LIBALLOC_SO"
	SHIM="$TESTS_BIN/libcountshim.so"
	SEQ="$TESTS_BIN/interpose_seq"
}

@test "a shim ahead of glibc counts the sequence as the program made it" {
	run env LD_PRELOAD="$SHIM" "$SEQ"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "liballoc no" ]
}

@test "a shim ahead of liballoc counts the program's calls, none of liballoc's own" {
	run env LD_PRELOAD="$SHIM $LIBALLOC_SO" "$SEQ"
	echo "$output"
	[ "${lines[0]}" = "liballoc yes" ]
	[ "$status" -eq 0 ]
	glibc=$(env LD_PRELOAD="$SHIM" "$SEQ" | grep '^counted')
	[ "${lines[1]}" = "$glibc" ]
}

@test "a shim ahead of liballoc sees no malloc or free of its pthread_create" {
	run env LD_PRELOAD="$SHIM" "$SEQ" thread
	echo "glibc: $output"
	[ "$status" -eq 0 ]
	glibc=("${lines[@]}")
	run env LD_PRELOAD="$SHIM $LIBALLOC_SO" "$SEQ" thread
	echo "liballoc: $output"
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "liballoc yes" ]
	# the creating thread's mallocs (glibc's frees there follow its TLS modules: liballoc
	# adds one), and the new thread's calls before the program's function runs
	[ "$(echo "${lines[1]}" | awk '{ print $3 }')" = "$(echo "${glibc[1]}" | awk '{ print $3 }')" ]
	[ "${lines[2]}" = "${glibc[2]}" ]
}
