#!/usr/bin/env bats
# clients.bats — issue 18: hostile clients of the control socket, as uid nobody against a
# root daemon whose socket they may reach (mode 0666 in a 0755 directory):
#  - a client that pipelines 100k stats requests and never reads: the daemon stops taking
#    its requests once 2 MiB of replies wait (closing it when it reads nothing for
#    read_timeout_ms), its peak RSS stays bounded, and root is served meanwhile;
#  - one uid holding many idle connections: refused past its own cap (and past the total
#    less root's reserve), with ERR_BUSY that allocctl reports in words; root gets in; the
#    refusals are logged once per 10 s, not once each.

bats_require_minimum_version 1.5.0

setup() {
	source "$BATS_TEST_DIRNAME/common.bash"
	sec_setup
	share "$ALLOCCTL"
	mkdir -m 755 "$T/pub"
}

teardown() {
	sec_teardown
}

open_daemon() {
	SOCK_PATH="$T/pub/ctl.sock" start_daemon --socket-mode 0666 "$@"
}

@test "a client that never reads: bounded daemon memory, root still served" {
	printf 'read_timeout_ms = 1500\n' >"$T/conf"
	open_daemon --config "$T/conf"
	start_fake --arenas 16
	wait_listed "$FPID"
	local before
	before=$(peak_rss_kb "$DPID")
	# it keeps its connection, reading nothing, until the daemon closes it (a minute at
	# most: on a loaded machine filling 2 MiB of replies takes a while)
	"$AS_USER" nobody "$CTLCLIENT" --socket "$SOCK" flood "$FPID" 100000 60 >"$T/flood" 2>&1 3>&- &
	local fl=$!
	echo "$fl" >>"$T/pids"
	# root's requests are answered while the flood runs
	for _ in $(seq 20); do
		run ctl list
		[[ "$output" == *"code=OK"* ]]
		[[ "$output" == *"process pid=$FPID "* ]]
		sleep 0.2
	done
	wait "$fl" || true
	cat "$T/flood"
	grep -q "closed_by_daemon=1" "$T/flood"
	local after
	after=$(peak_rss_kb "$DPID")
	echo "daemon VmHWM before $before kB, after $after kB"
	# bounded: the output cap (2 frames) and the input cap (1 frame) per connection, not
	# 100k replies (which grew it to 804 MB before)
	[ "$((after - before))" -lt $((64 * 1024)) ]
	grep -q "does not read its replies; closing" "$T/log"
	still_ok=$(ctl stats "$FPID" | grep -c '^code=OK')
	[ "$still_ok" -eq 1 ]
}

@test "one uid's connections do not lock out root; allocctl reports ERR_BUSY in words" {
	open_daemon
	start_fake
	wait_listed "$FPID"
	"$AS_USER" nobody "$CTLCLIENT" --socket "$SOCK" hold 70 8 >"$T/hold" 2>&1 3>&- &
	echo "$!" >>"$T/pids"
	wait_file "$T/hold"
	wait_until grep -q "refusing connection of pid [0-9]* uid 65534: too many connections from uid 65534" "$T/log"
	run -0 "$ALLOCCTL" --socket "$SOCK" ps
	[[ "$output" == *" $FPID "* ]]
	run -1 --separate-stderr as_nobody "$SEC_SHARE/allocctl" --socket "$SOCK" ps
	[ "$stderr" = "allocctl: daemon busy: too many connections from uid 65534; try again" ]
	# 54 and more refusals, one log line
	[ "$(grep -c 'refusing connection' "$T/log")" -eq 1 ]
}

@test "many uids together cannot take root's reserve of connections" {
	printf 'max_connections = 16\nmax_connections_per_uid = 100\n' >"$T/conf"
	open_daemon --config "$T/conf"
	"$AS_USER" nobody "$CTLCLIENT" --socket "$SOCK" hold 40 8 >"$T/hold" 2>&1 3>&- &
	echo "$!" >>"$T/pids"
	wait_file "$T/hold"
	wait_until grep -q "uid 65534: too many connections (12 open)" "$T/log"
	# root still has its 4 reserved connections
	run -0 "$ALLOCCTL" --socket "$SOCK" ps
	run -0 ctl version
}
