#!/usr/bin/env bats
# ctld_badinput.bats — hostile clients of the control socket: truncated frames, oversize and
# zero lengths, garbage, unknown request types, a wrong protocol version, a slow client and
# too many connections. Each gets its error reply or a closed connection, and the daemon
# keeps serving the other clients meanwhile.

setup() {
	source "${ROOT:-$BATS_TEST_DIRNAME/../..}/ctld/tools/e2e.bash"
	ctld_setup
	# debug: the log says when a connection was accepted
	start_daemon --read-timeout-ms 400 --max-connections 4 --log-level debug
	start_fake
	wait_listed "$FPID"
}

# restart_daemon [options...]: the same daemon with other options
restart_daemon() {
	kill -TERM "$DPID"
	wait "$DPID" || true
	start_daemon --log-level debug "$@"
}

# stalled_client PID-VAR: a client that sends 10 bytes of a 100-byte frame and waits (up to
# 10 minutes) for an answer; returns once the daemon has accepted its connection. Its
# output goes to $T/stalled.<pid>.
stalled_client() {
	# the subshell names the file by its own pid, which exec keeps: no rename racing the
	# background open (a shared .tmp name was moved before a slow start had created it)
	(exec "$CTLCLIENT" --socket "$SOCK" raw-partial 600000 >"$T/stalled.$BASHPID" 2>&1 3>&-) &
	local _sp=$!
	echo "$_sp" >>"$T/pids"
	printf -v "$1" '%s' "$_sp"
	wait_until grep -q "connection of pid $_sp uid" "$T/log"
}

teardown() {
	ctld_teardown
}

still_serving() {
	run ctl list
	[[ "$output" == *"code=OK"* ]] && [[ "$output" == *"process pid=$FPID "* ]]
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

@test "a stalled frame does not hold up other clients" {
	# a read timeout longer than the test: the stalled client is there all along
	restart_daemon --read-timeout-ms 600000
	local slow
	stalled_client slow
	still_serving
	still_serving
	kill -0 "$slow" # still waiting: the others were served meanwhile
	[ ! -s "$T/stalled.$slow" ]
}

@test "a truncated frame is dropped at the read timeout" {
	local slow
	stalled_client slow
	wait "$slow" || true
	cat "$T/stalled.$slow"
	grep -q "code=ERR_MALFORMED" "$T/stalled.$slow"
	grep -q "message=frame incomplete at the read timeout" "$T/stalled.$slow"
	grep -q "closed" "$T/stalled.$slow"
	grep -q "did not finish a frame within 400 ms" "$T/log"
	still_serving
}

@test "connections over the cap get ERR_BUSY; freed slots are usable again" {
	# a read timeout longer than the test: the stalled clients hold their slots until
	# they go
	restart_daemon --read-timeout-ms 600000 --max-connections 4
	local pids=() p
	for _ in 1 2 3 4; do
		stalled_client p
		pids+=("$p")
	done
	run ctl list
	echo "$output"
	[[ "$output" == *"code=ERR_BUSY"* ]]
	[[ "$output" == *"message=too many connections (4 open)"* ]]
	grep -q "refusing connection" "$T/log"
	for p in "${pids[@]}"; do
		kill "$p"
		wait "$p" || true
	done
	wait_until still_serving
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
