#!/usr/bin/env bats
# san: skip
# The audit trail (issue 20): every command an operator sends (set, trim, release, flush,
# refused or not) is recorded once, with the peer's uid and pid from SO_PEERCRED: one log
# line and one `allocctl log` entry each; another uid sees only what concerns it; under
# systemd's journal the entries carry ALLOCCTLD_* fields; the counters on /metrics.
load common

setup() { pol_setup; }
teardown() { pol_teardown; }

# events as "seq action pid peer_uid result" lines
log_lines() {
	"$@" --json log | python3 -c '
import json, sys
for e in json.load(sys.stdin)["events"]:
    print(e["seq"], e["action"], e.get("pid", 0), e.get("peer_uid", "-"), e["result"], e.get("tunable", "-"), e.get("old_value", "-"), e.get("new_value", "-"))'
}

@test "audit: each operator command appears once, with its uid, in the log and in allocctl log" {
	start_daemon
	start_sleeper LIBALLOC_DECAY_MS=10s
	run -0 "$ALLOCCTL" set "$SP" decay_ms=2s tcache_max_bytes=64K
	run -0 "$ALLOCCTL" trim "$SP"
	run -0 "$ALLOCCTL" release "$SP"
	run -0 "$ALLOCCTL" flush "$SP"
	run -0 "$ALLOCCTL" get "$SP" # a read: not recorded
	run -0 log_lines "$ALLOCCTL"
	echo "$output"
	[ "${#lines[@]}" -eq 5 ]
	[ "${lines[0]}" = "1 set $SP 0 ok decay_ms 10000 2000" ]
	[ "${lines[1]}" = "2 set $SP 0 ok tcache_max_bytes 262144 65536" ]
	[ "${lines[2]}" = "3 trim $SP 0 ok - - -" ]
	[ "${lines[3]}" = "4 release $SP 0 ok - - -" ]
	[ "${lines[4]}" = "5 flush $SP 0 ok - - -" ]
	# the same five in the daemon's log, once each
	for s in 1 2 3 4 5; do
		[ "$(grep -c "audit: seq=$s trigger=operator actor=\"uid 0 pid [0-9]*\" peer_uid=0 " "$P/ctld.log")" -eq 1 ]
	done
	[ "$(grep -c 'audit: ' "$P/ctld.log")" -eq 5 ]
	grep -q "audit: seq=1 .* action=set pid=$SP uid=0 exe=sleep tunable=decay_ms old=10000 new=2000 result=ok" "$P/ctld.log"
	# the human form names the change and the result
	run -0 "$ALLOCCTL" log
	[ "${#lines[@]}" -eq 6 ]
	[[ "${lines[1]}" == *" operator uid 0 pid "*" set "*" $SP  sleep "*" ok "*"decay_ms 10 s -> 2 s" ]]
	[[ "${lines[3]}" == *" trim "*" $SP  sleep "*" ok "*"released "*" in "* ]]
	run -0 "$ALLOCCTL" log --last 2
	[ "${#lines[@]}" -eq 3 ]
	[[ "${lines[2]}" == *" flush "* ]]
	run -0 "$ALLOCCTL" --json log --since 4
	echo "$output" | json_check "[e['seq'] for e in d['events']] == [5]"
	# the counters
	metrics | grep -qx 'liballoc_ctld_actions_total{trigger="operator",action="set",result="ok"} 2'
	metrics | grep -qx 'liballoc_ctld_actions_total{trigger="operator",action="trim",result="ok"} 1'
}

@test "audit: a second uid's commands carry its uid; refusals are recorded; it sees only its own" {
	nobody_setup
	start_daemon --run-dir "$P/seg-nobody"
	start_sleeper
	start_nobody_sleeper
	run -0 as_nobody "$NB_ALLOCCTL" trim "$NSP"
	run -1 as_nobody "$NB_ALLOCCTL" trim "$SP"
	run -1 as_nobody "$NB_ALLOCCTL" set "$SP" decay_ms=1s
	run -0 "$ALLOCCTL" release "$SP"
	run -0 log_lines "$ALLOCCTL"
	echo "$output"
	[ "${#lines[@]}" -eq 4 ]
	[ "${lines[0]}" = "1 trim $NSP $NOBODY_UID ok - - -" ]
	[ "${lines[1]}" = "2 trim $SP $NOBODY_UID denied - - -" ]
	[ "${lines[2]}" = "3 set $SP $NOBODY_UID denied - - -" ]
	[ "${lines[3]}" = "4 release $SP 0 ok - - -" ]
	grep -q "audit: seq=2 trigger=operator actor=\"uid $NOBODY_UID pid [0-9]*\" peer_uid=$NOBODY_UID peer_pid=[0-9]* action=trim pid=$SP uid=0 exe=sleep result=denied" "$P/ctld.log"
	# nobody sees its own command and its refusals, not root's release of root's process
	run -0 log_lines as_nobody "$NB_ALLOCCTL"
	echo "$output"
	[ "${#lines[@]}" -eq 3 ]
	[ "${lines[2]}" = "3 set $SP $NOBODY_UID denied - - -" ]
	metrics | grep -qx 'liballoc_ctld_actions_total{trigger="operator",action="trim",result="denied"} 1'
}

@test "audit: under systemd's journal each event is one entry with ALLOCCTLD_* fields" {
	[ "$(id -u)" = 0 ] || skip "needs root for a private mount namespace"
	command -v unshare >/dev/null || skip "unshare is missing"
	# A stand-in journal: a datagram socket, bound where sd_journal_send looks for it inside
	# a private mount namespace of the daemon (tmpfs over /run there only).
	mkdir -m 700 "$P/journal"
	python3 -c '
import socket, sys, os
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1] + "/socket")
open(sys.argv[1] + "/bound", "w").close()
with open(sys.argv[1] + "/entries", "a") as out:
    while True:
        data = s.recv(1 << 20)
        out.write(data.decode("utf-8", "replace") + "\n--\n")
        out.flush()' "$P/journal" 3>&- &
	POL_PIDS+=($!)
	wait_for test -e "$P/journal/bound"
	rm -f "$P/ready"
	unshare -m --propagation private sh -c '
		mount -t tmpfs tmpfs /run && mkdir -p /run/systemd/journal &&
		mount --bind "$1/journal" /run/systemd/journal && shift && exec "$@"' sh "$P" \
		"$CTLD" --socket "$P/ctl.sock" --socket-mode 0666 --listen 127.0.0.1:0 \
		--run-dir "$P/seg" --no-default-dirs --ready-file "$P/ready" --rescan-ms 200 \
		--audit-journal on >>"$P/ctld.log" 2>&1 3>&- &
	DPID=$!
	wait_for test -s "$P/ready" || { cat "$P/ctld.log" >&2; false; }
	start_sleeper
	run -0 "$ALLOCCTL" set "$SP" decay_ms=3s
	run -0 "$ALLOCCTL" trim "$SP"
	wait_for grep -q '^ALLOCCTLD_ACTION=trim$' "$P/journal/entries"
	cat "$P/journal/entries"
	[ "$(grep -c '^ALLOCCTLD_AUDIT_SEQ=' "$P/journal/entries")" -eq 2 ]
	grep -qx "MESSAGE=audit: seq=1 trigger=operator .* action=set pid=$SP .*tunable=decay_ms old=10000 new=3000 result=ok.*" "$P/journal/entries"
	for f in SYSLOG_IDENTIFIER=allocctld ALLOCCTLD_TRIGGER=operator ALLOCCTLD_PEER_UID=0 \
		"ALLOCCTLD_TARGET_PID=$SP" ALLOCCTLD_TARGET_EXE=sleep ALLOCCTLD_TUNABLE=decay_ms \
		ALLOCCTLD_OLD_VALUE=10000 ALLOCCTLD_NEW_VALUE=3000 ALLOCCTLD_RESULT=ok; do
		grep -qx "$f" "$P/journal/entries" || { echo "missing $f"; false; }
	done
	# not also on stderr: once, in the journal
	run ! grep -q 'audit: seq=' "$P/ctld.log"
}
