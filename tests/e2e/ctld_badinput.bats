#!/usr/bin/env bats
# ctld_badinput.bats — hostile clients of the control socket: truncated frames, oversize and
# zero lengths, garbage, unknown request types, a wrong protocol version, a slow client and
# too many connections. Each gets its error reply or a closed connection, and the daemon
# keeps serving the other clients meanwhile.

setup() {
	source "${ROOT:-$BATS_TEST_DIRNAME/../..}/ctld/tools/e2e.bash"
	ctld_setup
	start_daemon --read-timeout-ms 400 --max-connections 4
	start_fake
	wait_listed "$FPID"
}

teardown() {
	ctld_teardown
}

still_serving() {
	run ctl list
	[[ "$output" == *"code=OK"* ]]
	[[ "$output" == *"process pid=$FPID "* ]]
}

@test "an oversize length gets ERR_MALFORMED and the connection is closed" {
	run ctl raw-len 0x7fffffff
	[[ "$output" == *"code=ERR_MALFORMED"* ]]
	[[ "$output" == *"message=frame length 2147483647 outside 1..1048576"* ]]
	[[ "$output" == *"closed"* ]]
	run ctl raw-len 1048577
	[[ "$output" == *"code=ERR_MALFORMED"* ]]
	still_serving
}

@test "a zero length gets ERR_MALFORMED and the connection is closed" {
	run ctl raw-len 0
	[[ "$output" == *"code=ERR_MALFORMED"* ]]
	[[ "$output" == *"closed"* ]]
	still_serving
}

@test "garbage bytes in a well-framed body get ERR_MALFORMED and a close" {
	run ctl raw-garbage 64
	[[ "$output" == *"code=ERR_MALFORMED"* ]]
	[[ "$output" == *"does not decode"* ]]
	[[ "$output" == *"closed"* ]]
	run ctl raw-hex "00000003ffffff"
	[[ "$output" == *"code=ERR_MALFORMED"* ]]
	still_serving
}

@test "an envelope without a payload gets ERR_UNKNOWN_REQUEST, the connection stays open" {
	run ctl raw-empty
	[[ "$output" == *"code=ERR_UNKNOWN_REQUEST"* ]]
	[[ "$output" == *"open"* ]]
	# protocol_version=2 plus an unknown field 99: a request type from the future
	run ctl raw-hex "000000050802980601"
	[[ "$output" == *"code=ERR_UNKNOWN_REQUEST"* ]]
	still_serving
}

@test "a missing required field (no protocol_version) is malformed" {
	# field 11 (list) only: 5a 00
	run ctl raw-hex "000000025a00"
	[[ "$output" == *"code=ERR_MALFORMED"* ]]
	still_serving
}

@test "a wrong protocol version gets ERR_VERSION with the daemon's version" {
	run ctl raw-version 99
	[[ "$output" == *"code=ERR_VERSION"* ]]
	[[ "$output" == *"message=protocol version 99, this daemon speaks 2"* ]]
	[[ "$output" == *"protocol=2"* ]]
	[[ "$output" == *"open"* ]]
	still_serving
}

@test "a truncated frame is dropped at the read timeout while others are served" {
	"$CTLCLIENT" --socket "$SOCK" raw-partial 3000 >"$T/slow" 2>&1 3>&- &
	slow=$!
	sleep 0.1
	start=$(date +%s%N)
	still_serving
	[ $((($(date +%s%N) - start) / 1000000)) -lt 300 ]
	wait "$slow" || true
	cat "$T/slow"
	grep -q "code=ERR_MALFORMED" "$T/slow"
	grep -q "message=frame incomplete at the read timeout" "$T/slow"
	grep -q "closed" "$T/slow"
	grep -q "did not finish a frame within 400 ms" "$T/log"
}

@test "connections over the cap get ERR_BUSY; freed slots are usable again" {
	# four idle connections fill the cap of 4 (root may use them all)
	"$CTLCLIENT" --socket "$SOCK" hold 4 3 >"$T/hold" 2>&1 3>&- &
	local h=$!
	wait_file "$T/hold"
	local busy=0
	for _ in $(seq 50); do
		run ctl list
		if [[ "$output" == *"code=ERR_BUSY"* ]]; then busy=1; break; fi
		sleep 0.05
	done
	[ "$busy" -eq 1 ]
	[[ "$output" == *"message=too many connections (4 open)"* ]]
	wait "$h" || true
	still_serving
	grep -q "refusing connection" "$T/log"
}

@test "a client that disconnects mid-command does not disturb the daemon" {
	start_fake --delay-ms 300
	slowfake=$FPID
	wait_listed "$slowfake"
	"$CTLCLIENT" --socket "$SOCK" --timeout 50 trim "$slowfake" >/dev/null 2>&1 || true
	run ctl trim "$slowfake"
	[[ "$output" == *"result pid=$slowfake exe=fakeseg code=OK"* ]]
	still_serving
}

@test "after all of it the daemon is alive and its log names each offence" {
	ctl raw-len 0x7fffffff >/dev/null || true
	ctl raw-garbage 16 >/dev/null || true
	kill -0 "$DPID"
	grep -q "outside 1..1048576; closing" "$T/log"
	grep -q "does not decode; closing" "$T/log"
	still_serving
}
