#!/usr/bin/env bats
# ctld_history.bats — the daemon's history over HTTP and the control socket, against fake
# segments (tests/helpers/fakeseg: known counters) and allocctl: samples on whole sample
# periods with the split of the segment's counters, events for start, commands (from the
# audit trail: who, what, how much) and exit, an exited process's history kept, every bad parameter refused with its
# name, history turned off, and the history settings checked.

bats_require_minimum_version 1.5.0

setup() {
	source "${ROOT:-$BATS_TEST_DIRNAME/../..}/ctld/tools/e2e.bash"
	ctld_setup
}

teardown() {
	ctld_teardown
}

api() {
	curl -sS --fail-with-body "http://$HTTP$1"
}

# json EXPR < document: EXPR over the parsed `d` is true (the document is shown if not).
json() {
	python3 -c '
import json, sys
d = json.load(sys.stdin)
ok = eval("(" + sys.argv[1] + "\n)")
if not ok:
    print("check failed:", sys.argv[1], file=sys.stderr)
    print(json.dumps(d)[:3000], file=sys.stderr)
sys.exit(0 if ok else 1)' "$1"
}

# wait_json URL EXPR [seconds]: poll until EXPR holds for the document at URL.
wait_json() {
	local i
	for i in $(seq $((${3:-10} * 10))); do
		api "$1" 2>/dev/null | json "$2" 2>/dev/null && return 0
		sleep 0.1
	done
	api "$1" | json "$2"
}

@test "/api/history: each process sampled every period, the split from its counters" {
	start_daemon
	start_fake --exe /usr/bin/svc-a --arenas 1 --interval-ms 0
	A=$FPID
	wait_json "/api/history?pid=$A" "len(d['processes'][0]['series']['rss']) >= 3"
	api "/api/history?pid=$A" | json "
	  d['daemon']['sample_ms'] == 1000 and d['daemon']['host'] and
	  d['figures'] == ['in_use','cached','fragmented','free_resident','metadata','reclaimable','rss','non_alloc'] and
	  len(d['processes']) == 1 and d['processes'][0]['pid'] == $A and
	  d['processes'][0]['exe'] == 'svc-a' and d['processes'][0]['live'] and
	  d['processes'][0]['res_ms'] == 1000 and d['processes'][0]['t0'] % 1000 == 0 and
	  all(v == 3 * 2**20 for v in d['processes'][0]['series']['in_use']) and
	  all(v == 128 * 1024 for v in d['processes'][0]['series']['free_resident']) and
	  all(v == 128 * 1024 for v in d['processes'][0]['series']['reclaimable']) and
	  all(v > 0 for v in d['processes'][0]['series']['rss'])"
	# points averages down; since skips what came before; res picks the tier
	api "/api/history?pid=$A&points=1" | json "len(d['processes'][0]['series']['in_use']) == 1"
	now=$(($(date +%s) * 1000))
	api "/api/history?pid=$A&since=$((now + 60000))" | json "d['processes'][0]['series']['rss'] == [] and d['processes'][0]['t0'] is None"
	api "/api/history?pid=$A&res=coarse" | json "d['processes'][0]['res_ms'] == 60000"
	api "/api/history?since=-2000" | json "all(len(p['series']['rss']) <= 3 for p in d['processes'])"
}

@test "/api/events: start, a trim with who and how much, a set, an exit; the history stays" {
	start_daemon
	start_fake --exe /usr/bin/svc-b --trim-bytes 4194304
	B=$FPID
	wait_json "/api/events" "any(e['kind'] == 'start' and e['pid'] == $B for e in d['events'])"
	ctl trim "$B" >/dev/null
	ctl set "$B" decay_ms=2000 >/dev/null
	api "/api/events?pid=$B" | json "
	  [e['kind'] for e in d['events']] == ['start', 'trim', 'set'] and
	  d['events'][1]['bytes'] == 4194304 and d['events'][1]['ok'] and
	  d['events'][1]['who'].startswith('uid $(id -u) pid ') and
	  d['events'][1]['trigger'] == 'operator' and
	  d['events'][1]['what'] == 'released 4.0 MiB' and
	  d['events'][2]['what'].startswith('decay_ms ') and d['events'][2]['what'].endswith(' -> 2s') and
	  d['events'][2]['exe'] == 'svc-b'"
	seq=$(api "/api/events" | python3 -c 'import json,sys; print(json.load(sys.stdin)["last_seq"])')
	api "/api/events?after=$seq" | json "d['events'] == []"
	wait_json "/api/history?pid=$B" "len(d['processes'][0]['series']['rss']) >= 2"
	kill "$FPID"
	wait_json "/api/events?after=$seq" "[e['kind'] for e in d['events']] == ['exit']"
	api "/api/history?pid=$B" | json "
	  not d['processes'][0]['live'] and d['processes'][0]['exited_ms'] and
	  d['processes'][0]['exit_reason'] and len(d['processes'][0]['series']['rss']) >= 2"
	# the daemon's own start is an event not about a process
	api "/api/events" | json "d['events'][0]['kind'] == 'daemon' and d['events'][0]['pid'] is None"
}

@test "a failed command is an event too, marked not ok" {
	# the fake never answers: any timeout fails the command, so a short one (not the
	# suites' 30 s, which only a command that does get answered needs on a busy machine)
	start_daemon --command-timeout-ms 500
	start_fake --exe /usr/bin/svc-c --no-answer
	C=$FPID
	wait_listed "$C"
	ctl trim "$C" >/dev/null || true
	wait_json "/api/events?pid=$C" "any(e['kind'] == 'trim' and not e['ok'] and e['what'].startswith('failed: ') for e in d['events'])"
}

@test "bad parameters are refused with their name" {
	start_daemon
	for q in "pid=abc" "pid=0" "pid=1,,x" "since=yesterday" "res=daily" "points=0" \
		"points=x" "after=-1" "colour=red"; do
		run curl -sS -o "$T/body" -w '%{http_code}' "http://$HTTP/api/history?$q"
		[ "$output" = 400 ] || { echo "$q: HTTP $output"; false; }
		python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["error"].split(":")[0].split(" ")[0] in sys.argv[2] or "unknown parameter" in d["error"] else 1)' \
			"$T/body" "$q" || { cat "$T/body"; false; }
	done
	run curl -sS -o /dev/null -w '%{http_code}' "http://$HTTP/api/events?after=x"
	[ "$output" = 400 ]
	run curl -sS -o /dev/null -w '%{http_code}' -X POST "http://$HTTP/api/history"
	[ "$output" != 200 ]
}

@test "history over the control socket: allocctl history and top's trend" {
	start_daemon
	start_fake --exe /usr/bin/svc-d --arenas 1 --interval-ms 0
	D=$FPID
	wait_json "/api/history?pid=$D" "len(d['processes'][0]['series']['rss']) >= 2"
	run -0 --separate-stderr "$BUILD/allocctl" --socket "$SOCK" history "$D"
	[[ "${lines[0]}" == "$D (svc-d): "*" samples every 1 s"* ]]
	run -0 --separate-stderr "$BUILD/allocctl" --socket "$SOCK" history "$D" --points 1
	[[ "${lines[0]}" == "$D (svc-d): 1 sample every "* ]]
	[[ "$output" == *"in use                 3.0 MiB     3.0 MiB     3.0 MiB"* ]]
	[[ "$output" == *"events"*"start"* ]]
	run -0 --separate-stderr "$BUILD/allocctl" --socket "$SOCK" --json history "$D" --res coarse
	echo "$output" | json "d['processes'][0]['resolution_ms'] == 60000"
	run -1 --separate-stderr "$BUILD/allocctl" --socket "$SOCK" history 999999
	[[ "$stderr" == *"no such process: 999999"* ]]
	run -0 "$BUILD/allocctl" --socket "$SOCK" top --iterations 1
	[[ "$output" == *"RSS, LAST MINUTE"* ]]
	[[ "$(grep -E "^ +$D " <<<"$output")" == *" +"* ]]
}

@test "history of a process listed moments ago, before the sweep reached it: its start, not 'no such process'" {
	printf 'history_sample_ms = 60s\n' >"$T/conf"
	start_daemon --config "$T/conf"
	start_fake --exe /usr/bin/svc-n --arenas 1 --interval-ms 0
	D=$FPID
	wait_listed "$D"
	run -0 --separate-stderr "$BUILD/allocctl" --socket "$SOCK" history "$D"
	# before the first minute's tick there is no sample yet, and it says so; after, one
	# (the request came after a minute's turn: a CI run under TSan at load 16 met one)
	[[ "${lines[0]}" == "$D (svc-n): no samples in this window" ||
		"${lines[0]}" == "$D (svc-n): 1 sample every 60 s, "* ]]
	[[ "$output" == *"events"*"start"* ]]
	run -0 --separate-stderr "$BUILD/allocctl" --socket "$SOCK" --json history "$D"
	echo "$output" | json "d['processes'][0]['pid'] == $D"
	echo "$output" >"$T/h.json"
	run -0 python3 "$ROOT/tests/helpers/jsonschema_check.py" "$ROOT/cli/schema/allocctl-json-1.schema.json" history "$T/h.json"
	run -1 --separate-stderr "$BUILD/allocctl" --socket "$SOCK" history 999999
	[[ "$stderr" == *"no such process: 999999"* ]]
}

@test "a profile's actions are on the timeline as the profile's, and each history says its profile" {
	cat >"$T/conf" <<EOC
[profile caches]
name = svc-p
decay_ms = 5s
EOC
	start_daemon --config "$T/conf"
	start_fake --exe /usr/bin/svc-p --arenas 1 --interval-ms 0
	P=$FPID
	start_fake --exe /usr/bin/svc-q --arenas 1 --interval-ms 0
	Q=$FPID
	wait_json "/api/events" "any(e['kind'] == 'set' and e['pid'] == $P for e in d['events'])"
	# who is the profile (not an operator), the trigger says what kind of actor it is
	api "/api/events" | json "
	  [(e['trigger'], e['who'], e['what'].endswith('-> 5s'), e['ok'])
	   for e in d['events'] if e['kind'] == 'set'] ==
	  [('profile', 'profile caches', True, True)] and
	  [e['what'] for e in d['events'] if e['kind'] == 'set'][0].startswith('decay_ms ')"
	wait_json "/api/history?pid=$P,$Q" "len(d['processes']) == 2 and
	  all(len(p['series']['rss']) >= 1 for p in d['processes'])"
	api "/api/history?pid=$P,$Q" | json "
	  sorted((p['pid'], p['profile']) for p in d['processes']) == sorted([($P, 'caches'), ($Q, None)])"
	run -0 --separate-stderr "$BUILD/allocctl" --socket "$SOCK" history "$P"
	[[ "${lines[0]}" == "$P (svc-p), profile caches: "* ]]
	[[ "$output" == *"set"*"profile caches"* ]]
	run -0 --separate-stderr "$BUILD/allocctl" --socket "$SOCK" --json history "$P"
	echo "$output" | json "
	  [p['profile'] for p in d['processes']] == ['caches'] and
	  [e['trigger'] for e in d['events'] if e['kind'] == 'set'] == ['profile']"
	run -0 --separate-stderr "$BUILD/allocctl" --socket "$SOCK" --json history "$Q"
	echo "$output" | json "[p['profile'] for p in d['processes']] == [None]"
}

@test "history_sample_ms = off: no history, said plainly; bad history settings are refused" {
	printf 'history_sample_ms = off\n' >"$T/conf"
	start_daemon --config "$T/conf"
	run curl -sS -w '%{http_code}' "http://$HTTP/api/history"
	[[ "$output" == *"history is off"*404 ]]
	run -1 --separate-stderr "$BUILD/allocctl" --socket "$SOCK" history 1
	[[ "$stderr" == *"history is off"* ]]
	for bad in "history_sample_ms = 5" "history_max_bytes = 10K" "history_max_bytes = lots" \
		"history_events = 1"; do
		printf '%s\n' "$bad" >"$T/bad.conf"
		run "$CTLD" --config "$T/bad.conf" --check-config
		[ "$status" -eq 2 ]
		[[ "$output" == *"${bad%% *}: bad value"* ]] || { echo "$bad: $output"; false; }
	done
}

@test "text that is not UTF-8 (a process name, a parameter) is kept as U+FFFD, never dropped" {
	start_daemon
	cp "$FAKESEG" "$T/svc-$(printf '\377')x"
	FAKESEG="$T/svc-$(printf '\377')x" start_fake --arenas 1 --interval-ms 0
	P=$FPID
	wait_json "/api/history?pid=$P" "len(d['processes']) == 1 and d['processes'][0]['series']['rss']"
	# the /proc reader shows such a byte as '?' already; the JSON writers would make it U+FFFD
	api "/api/history?pid=$P" | json "d['processes'][0]['exe'] in ('svc-?x', 'svc-\ufffdx')"
	api "/api/events?pid=$P" | json "any(e['kind'] == 'start' and e['exe'] in ('svc-?x', 'svc-\ufffdx') for e in d['events'])"
	run -0 --separate-stderr "$BUILD/allocctl" --socket "$SOCK" --json history "$P"
	echo "$output" | json "d['processes'][0]['exe'] in ('svc-?x', 'svc-\ufffdx')"
	run curl -sS -o "$T/body" -w '%{http_code}' "http://$HTTP/api/history?pid=%ff"
	[ "$output" = 400 ]
	json "d['error'].startswith('pid: \'\ufffd\'')" <"$T/body"
}
