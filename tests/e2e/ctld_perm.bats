#!/usr/bin/env bats
# ctld_perm.bats — uid-scoped access. The default socket is unreachable for another uid;
# for these tests the socket is made reachable (a 0755 directory, --socket-mode 0666) so
# that nobody can connect and be refused by the daemon itself: it sees only its own
# processes, and every request naming root's process gets "permission denied" (logged).

setup() {
	source "${ROOT:-$BATS_TEST_DIRNAME/../..}/ctld/tools/e2e.bash"
	ctld_setup --other-uid
	mkdir -m 700 "$T/nob" && chown nobody "$T/nob"
}

teardown() {
	ctld_teardown
}

nobody_ctl() {
	as_nobody "$CTLCLIENT" --socket "$SOCK" "$@"
}

open_daemon() {
	mkdir -m 755 "$T/pub"
	SOCK_PATH="$T/pub/ctl.sock" start_daemon --socket-mode 0666 --run-dir "$T/nob"
	start_fake --exe /usr/bin/rootsvc
	ROOTP=$FPID
	# "$AS_USER" execs (runuser would fork and linger 2 s when signalled): $! is the fake
	"$AS_USER" nobody "$(fake_bin nobodysvc)" --dir "$T/nob" \
		--exe /usr/bin/nobodysvc --ready "$T/nob/ready" >/dev/null 2>&1 3>&- &
	NOBP=$!
	echo "$NOBP" >>"$T/pids"
	wait_file "$T/nob/ready"
	wait_listed "$ROOTP"
	wait_listed "$NOBP"
}

@test "by default another uid cannot even connect" {
	start_daemon
	run nobody_ctl list
	[ "$status" -ne 0 ]
	[[ "$output" == *"ctlclient: cannot connect to $SOCK: Permission denied"* ]]
}

@test "nobody lists only its own process; root lists both" {
	open_daemon
	run nobody_ctl list
	[[ "$output" == *"process pid=$NOBP name=nobodysvc exe=$FAKESEG_EXE uid=65534"* ]]
	[[ "$output" != *"pid=$ROOTP "* ]]
	run ctl list
	[[ "$output" == *"pid=$ROOTP "* ]]
	[[ "$output" == *"pid=$NOBP "* ]]
}

@test "nobody cannot read root's stats or tunables" {
	open_daemon
	run nobody_ctl stats "$ROOTP"
	[[ "$output" == *"code=ERR_PERMISSION"* ]]
	[[ "$output" == *"message=permission denied: pid $ROOTP belongs to another user"* ]]
	run nobody_ctl get "$ROOTP" mmap_threshold
	[[ "$output" == *"code=ERR_PERMISSION"* ]]
	grep -q "denied stats on pid $ROOTP to client pid [0-9]* uid 65534" "$T/log"
}

@test "nobody cannot act on root's process by pid, exe or all" {
	open_daemon
	run nobody_ctl set "$ROOTP" top_pad=1M
	[[ "$output" == *"code=ERR_PERMISSION"* ]]
	run nobody_ctl trim "$ROOTP"
	[[ "$output" == *"code=ERR_PERMISSION"* ]]
	run nobody_ctl release exe=rootsvc
	[[ "$output" == *"code=ERR_PERMISSION"* ]]
	run nobody_ctl flush all
	[[ "$output" == *"result pid=$NOBP exe=nobodysvc code=OK"* ]]
	[[ "$output" != *"pid=$ROOTP "* ]]
	run ctl stats "$ROOTP"
	[[ "$output" == *"name=top_pad value=131072 "* ]]
	[[ "$output" == *"total commands_executed=0"* ]]
}

@test "nobody acts on its own process; root acts on both" {
	open_daemon
	run nobody_ctl set "$NOBP" top_pad=1M
	[[ "$output" == *"result pid=$NOBP exe=nobodysvc code=OK"* ]]
	run ctl set all top_pad=2M
	[ "$(grep -c '^result .*code=OK' <<<"$output")" -eq 2 ]
}

@test "nobody's metrics view over HTTP is the operator's: loopback only" {
	open_daemon
	[[ "$HTTP" == 127.0.0.1:* ]]
}
