#!/usr/bin/env bats
# ctld_real.bats — allocctld against real processes running under LD_PRELOAD=$LIBALLOC_SO:
# discovery, /metrics, set/get/trim/release/flush round trips, exit and SIGKILL cleanup.
# san: skip

setup() {
	source "${ROOT:-$BATS_TEST_DIRNAME/../..}/ctld/tools/e2e.bash"
	ctld_setup
	if [ ! -f "${LIBALLOC_SO:-}" ]; then
		skip "no $LIBALLOC_SO yet"
	fi
}

teardown() {
	ctld_teardown
}

# start_real CMD...: run CMD preloaded with segments in $T/segs; sets RPID.
start_real() {
	LIBALLOC_RUN_DIR="$T/segs" LD_PRELOAD="$LIBALLOC_SO" "$@" >/dev/null 2>&1 3>&- &
	RPID=$!
	echo "$RPID" >>"$T/pids"
	wait_file "$T/segs/liballoc.$RPID.seg"
}

@test "a preloaded process is listed with its executable" {
	start_real sleep 600
	start_daemon
	wait_listed "$RPID"
	run ctl list
	[[ "$output" == *"process pid=$RPID name=sleep exe=/usr/bin/sleep uid=0"* ]]
	[[ "$output" == *"control=running"* ]]
}

@test "its metrics pass the exposition format check and promtool's linter" {
	start_daemon
	start_real sleep 600
	wait_listed "$RPID"
	metrics >"$T/m"
	run "$PROMCHECK" "$T/m"
	echo "$output"
	[ "$status" -eq 0 ]
	run promtool check metrics <"$T/m"
	echo "$output"
	[ "$status" -eq 0 ] && [ -z "$output" ]
	grep -q "^liballoc_address_space_bytes{pid=\"$RPID\",uid=\"0\",exe=\"/usr/bin/sleep\"} [1-9]" "$T/m"
	grep -q "^liballoc_in_use_bytes{pid=\"$RPID\",uid=\"0\",exe=\"/usr/bin/sleep\"} [1-9]" "$T/m"
	grep -q "^liballoc_metadata_bytes{pid=\"$RPID\",uid=\"0\",exe=\"/usr/bin/sleep\"} [1-9]" "$T/m"
	grep -q "^liballoc_process_rss_bytes{pid=\"$RPID\",uid=\"0\",exe=\"/usr/bin/sleep\"} [1-9]" "$T/m"
	grep -q "^liballoc_tunable_mmap_threshold_bytes{pid=\"$RPID\",uid=\"0\",exe=\"/usr/bin/sleep\"} " "$T/m"
}

@test "set and get round-trip through the process's control thread" {
	start_daemon
	start_real sleep 600
	wait_listed "$RPID"
	run ctl set "$RPID" mmap_threshold=64K
	echo "$output"
	[[ "$output" == *"result pid=$RPID exe=sleep code=OK"* ]]
	[[ "$output" == *"value pid=$RPID name=mmap_threshold value=65536"* ]]
	run ctl get "$RPID" mmap_threshold
	[[ "$output" == *"value pid=$RPID name=mmap_threshold value=65536"* ]]
	[[ "$output" == *"source=command"* ]]
	metrics | grep -q "^liballoc_tunable_mmap_threshold_bytes{pid=\"$RPID\",uid=\"0\",exe=\"/usr/bin/sleep\"} 65536$"
}

@test "trim, release and flush run and report" {
	start_daemon
	start_real sleep 600
	wait_listed "$RPID"
	for cmd in trim release flush; do
		run ctl "$cmd" "$RPID"
		echo "$output"
		[[ "$output" == *"result pid=$RPID exe=sleep code=OK"* ]]
	done
	run ctl stats "$RPID"
	[[ "$output" =~ total\ commands_executed=([3-9]|[1-9][0-9]) ]]
}

@test "a process that exits disappears" {
	start_daemon
	start_real "$TESTS_BIN/workload" -t 1 -s 1M -d 0 # until SIGTERM, then exit(0)
	wait_listed "$RPID"
	kill -TERM "$RPID"
	wait "$RPID"
	wait_listed "$RPID" absent
	[ ! -e "$T/segs/liballoc.$RPID.seg" ]
}

@test "a SIGKILLed process is cleaned up" {
	start_daemon --rescan-ms 200
	start_real sleep 600
	wait_listed "$RPID"
	kill -9 "$RPID"
	wait_listed "$RPID" absent
	wait_until test ! -e "$T/segs/liballoc.$RPID.seg"
}
