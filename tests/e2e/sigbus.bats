#!/usr/bin/env bats
# sigbus.bats — a preloaded process survives its segment file being truncated (someone
# with its uid can do that; its statistics are written through a shared mapping of the
# file, and a write past the new end faults with SIGBUS): liballoc moves the segment to
# private memory, unpublishes it and says so in one line. And the process's own SIGBUS
# handling is unchanged by liballoc's handler: its handlers (installed after liballoc's,
# through sigaction or signal), SA_RESETHAND, SA_NODEFER, masks, SIG_DFL, SIG_IGN (also
# inherited through exec), a fault or a kill. The program: tests/helpers/sigbus.
# san: skip

bats_require_minimum_version 1.5.0

setup() {
	[ -f "${LIBALLOC_SO:-}" ] || skip "no $LIBALLOC_SO"
	mkdir -p "$BUILD/run"
	T=$(mktemp -d "$BUILD/run/sigbus.XXXXXX")
	mkdir -m 700 "$T/segs"
	ulimit -c 0 # the deaths below are expected: no core files
}

teardown() {
	[ -n "${T:-}" ] && rm -rf "$T"
}

# sigbus MODE [VAR=VALUE...]: run the program preloaded; stdout in $output, stderr in
# $stderr
sigbus() {
	local mode=$1
	shift
	run --separate-stderr env "$@" LIBALLOC_RUN_DIR="$T/segs" LD_PRELOAD="$LIBALLOC_SO" \
		"$TESTS_BIN/sigbus" "$mode"
	echo "status $status"
	echo "$output"
	echo "stderr: $stderr"
}

# moved_once: liballoc said once, and only that, that the segment moved
moved_once() {
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == "liballoc: statistics no longer published: $T/segs/liballoc."*".seg was truncated to 0 bytes by another process; they are kept in private memory" ]]
	[ -z "$(ls -A "$T/segs")" ]
}

# killed_by_sigbus LAST_LINE: the program died of SIGBUS after saying LAST_LINE, with no
# check of its own failed, and its segment moved once before
killed_by_sigbus() {
	[ "$status" -eq 135 ]
	[[ "$output" != *FAIL* ]]
	[ "${lines[-1]}" = "$1" ]
	moved_once
}

# truncated DISPOSITION [VAR=VALUE...]: the program's "named" mode preloaded with
# libtruncshim.so (tests/helpers/shim/truncshim.c), SIGBUS ignored since exec or at its
# default; it must pass (status 0, PASSED last)
truncated() {
	local disposition=$1 trap_bus=
	shift
	rm -f "$T/done"
	[ "$disposition" = ignored ] && trap_bus='trap "" BUS;'
	run --separate-stderr bash -c "$trap_bus"' exec env "${@:6}" LIBALLOC_RUN_DIR="$1" \
		TRUNCSHIM_DONE="$2" LD_PRELOAD="$3 $4" "$5" named' - "$T/segs" "$T/done" \
		"$LIBALLOC_SO" "$TESTS_BIN/libtruncshim.so" "$TESTS_BIN/sigbus" "$@"
	echo "$disposition: status $status"
	echo "$output"
	echo "stderr: $stderr"
	[ "$status" -eq 0 ]
	[ "${lines[-1]}" = PASSED ]
}

@test "its own handler, installed after liballoc's, gets its faults with address, code and mask" {
	sigbus handler
	[ "$status" -eq 0 ]
	[[ "$output" != *FAIL* ]]
	[ "${lines[-1]}" = PASSED ]
	moved_once
}

@test "a handler set with signal() gets its faults; signal() returns what was set" {
	sigbus signal
	[ "$status" -eq 0 ]
	[ "${lines[-1]}" = PASSED ]
	moved_once
}

@test "signal() racing the control thread's install of liballoc's handler: neither is lost" {
	# the program sets SIGBUS's disposition over and over while the control thread names
	# the file and installs liballoc's handler (LIBALLOC_PUBLISH_DELAY after the start):
	# every signal() returns what the one before set, and liballoc's handler ends up in
	# place. Unserialised, an install between the call's read and its write lost either
	# (about 1 run in 2 at 10 ms; here 10 runs)
	for i in 1 2 3 4 5 6 7 8 9 10; do
		run env LIBALLOC_RUN_DIR="$T/segs" LIBALLOC_PUBLISH_DELAY=10ms \
			LD_PRELOAD="$LIBALLOC_SO" "$TESTS_BIN/sigbus_race"
		echo "run $i: status $status: $output"
		[ "$status" -eq 0 ]
	done
}

@test "with the default disposition it survives the truncation and dies of its own fault" {
	sigbus default
	killed_by_sigbus "about to die: its own fault with the default disposition"
}

@test "with the default disposition a SIGBUS sent by kill still kills it" {
	sigbus sent
	killed_by_sigbus "about to die: kill(self, SIGBUS) with the default disposition"
}

@test "SIG_IGN: a sent SIGBUS is ignored, its own fault kills it as the kernel would" {
	sigbus ignore
	[[ "$output" == *"ok a SIGBUS sent by kill is ignored"* ]]
	killed_by_sigbus "about to die: its own fault while SIGBUS is ignored"
}

@test "SA_RESETHAND: one fault reaches the handler, the next kills" {
	sigbus resethand
	killed_by_sigbus "about to die: its second fault"
}

@test "SIGBUS ignored before liballoc started (inherited through exec) stays ignored" {
	# bash (not preloaded) ignores it, then execs env, which execs the preloaded program
	run --separate-stderr bash -c 'trap "" BUS; exec env LIBALLOC_RUN_DIR="$1" \
		LD_PRELOAD="$2" "$3" inherited' - "$T/segs" "$LIBALLOC_SO" "$TESTS_BIN/sigbus"
	echo "status $status"
	echo "$output"
	echo "stderr: $stderr"
	[ "$status" -eq 0 ]
	[[ "$output" != *FAIL* ]]
	[ "${lines[-1]}" = PASSED ]
	moved_once
}

@test "the control thread's own write to the truncated segment is survived too" {
	sigbus idle LIBALLOC_DECAY_MS=50
	[ "$status" -eq 0 ]
	[[ "$output" == *"ok the control thread's write moved the segment"* ]]
	[ "${lines[-1]}" = PASSED ]
	moved_once
}

@test "without liballoc the program behaves the same (the test's own check)" {
	run "$TESTS_BIN/sigbus" default
	[ "$status" -eq 135 ]
	run env LIBALLOC_RUN_DIR="$T/segs" "$TESTS_BIN/sigbus" ignore
	[ "$status" -eq 135 ]
	[[ "$output" == *"ok a SIGBUS sent by kill is ignored"* ]]
}

@test "a file truncated the moment it is named, in the naming thread, is survived and leaves no name, SIGBUS ignored or not" {
	# libtruncshim.so (tests/helpers/shim/truncshim.c) interposes linkat: when liballoc's
	# link names the segment file, it truncates the file and reads its mapping there, in
	# the naming thread, before the link returns (another process could do it then). The
	# handler must be in place before the name (it came after it: 3 of 300 runs of the
	# inherited test died of SIGBUS at load 17)
	for disposition in ignored default; do
		truncated "$disposition"
		[[ "$stderr" == *"truncshim: read the segment after truncating it"* ]]
		[[ "$stderr" == *"liballoc: statistics no longer published: the segment was truncated to 0 bytes by another process; they are kept in private memory"* ]]
		# the name made before the move went with it: nothing stale in the run directory
		run ls -A "$T/segs"
		echo "left: $output"
		[ -z "$output" ]
	done
}

@test "a prepared segment file truncated before it is published is survived, and a new file is published" {
	# LIBALLOC_PUBLISH_DELAY=0: the start makes and maps liballoc.<pid>.tmp (shm_prepare_file)
	# and the constructor publishes it later; libtruncshim.so's dl_iterate_phdr, which the
	# constructor calls in between, truncates that file and reads its mapping. The handler
	# came only with publishing: the read killed the process (SIGBUS, status 135). It is in
	# place before the map now, and shm_fault moves a mapping not yet published to private
	# memory, from which the constructor publishes a new file
	for disposition in ignored default; do
		truncated "$disposition" LIBALLOC_PUBLISH_DELAY=0 TRUNCSHIM_PREPARED=1
		[[ "$stderr" == *"truncshim: read the prepared segment after truncating it"* ]]
		[[ "$stderr" == *"was truncated before it was published; a new file is made"* ]]
		[[ "$stderr" != *"statistics not published"* ]]
		# the truncated file went, the new one with the process: nothing left
		run ls -A "$T/segs"
		echo "left: $output"
		[ -z "$output" ]
	done
}
