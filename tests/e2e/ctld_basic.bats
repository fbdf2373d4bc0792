#!/usr/bin/env bats
# ctld_basic.bats — allocctld against fake segments (tests/helpers/fakeseg.c): discovery,
# every request type, /metrics format, per-process results of commands, exit and SIGKILL
# cleanup, timeouts of stopped or silent processes, reload and restart.
bats_require_minimum_version 1.5.0

setup() {
	source "${ROOT:-$BATS_TEST_DIRNAME/../..}/ctld/tools/e2e.bash"
	ctld_setup
}

teardown() {
	ctld_teardown
}

@test "daemon starts owner-only: socket 0600 in a 0700 directory, answers version" {
	start_daemon
	[ "$(stat -c %a "$SOCK")" = 600 ]
	[ "$(stat -c %a "$(dirname "$SOCK")")" = 700 ]
	run ctl version
	[ "$status" -eq 0 ]
	[[ "$output" == *"code=OK"* ]]
	[[ "$output" == *"protocol_version=2 abi=6"* ]]
}

@test "a fake process is discovered and listed with its identity from /proc and its counters" {
	start_daemon
	start_fake --exe /usr/bin/fakesvc --arenas 3
	wait_listed "$FPID"
	run ctl list
	# name and exe as the kernel knows them (the segment's exe, /usr/bin/fakesvc, is not
	# believed); threads are the process's own (main and control thread, plus the runtime's
	# background thread in a TSan build: the kernel's count), not the header's 3
	local threads
	threads=$(awk '/^Threads:/ {print $2}' "/proc/$FPID/status")
	[ "$threads" -eq 2 ] || [ "${SAN:-}" = tsan ]
	[[ "$output" == *"process pid=$FPID name=fakesvc exe=$FAKESEG_EXE uid=0 owner=0 arenas=3 threads=$threads alloc_threads=3 "* ]]
	[[ "$output" == *"control=running"* ]]
}

@test "a process that drops from root to another uid after start is listed with its uid within seconds" {
	start_daemon
	start_fake --exe /usr/bin/workersvc --setuid-on-usr1 65534
	wait_listed "$FPID"
	[[ "$(ctl list)" == *"process pid=$FPID name=workersvc exe=$FAKESEG_EXE uid=0 owner=0 "* ]]
	kill -USR1 "$FPID"
	wait_until eval '[ "$(awk "/^Uid:/ {print \$2}" /proc/$FPID/status)" = 65534 ]'
	# a young process's identity is read again after a quarter of its age (at least 1 s):
	# well before the 30 s that bound older processes (the old rule for every process)
	wait_until -t 12 eval 'ctl list | grep -q "^process pid=$FPID name=workersvc exe=$FAKESEG_EXE uid=65534 owner=0 "'
}

@test "segments present before the daemon starts are found at once" {
	start_fake
	start_daemon
	run ctl list
	[[ "$output" == *"process pid=$FPID "* ]]
}

@test "stats returns totals, every arena, classes and tunables" {
	start_daemon
	start_fake --arenas 2
	wait_listed "$FPID"
	run ctl stats "$FPID"
	[[ "$output" == *"code=OK"* ]]
	# address space: process block 4M*1 + arena 0 4M*2 + arena 1 4M*3
	[[ "$output" == *"total address_space_bytes=25165824"* ]]
	[[ "$output" == *"arena 1 address_space_bytes=12582912"* ]]
	[[ "$output" == *"class 16 blocks_in_use=100"* ]]
	[[ "$output" == *"tunable pid=$FPID name=mmap_threshold value=131072 min=0 max=33554432 explicit=0 source=default"* ]]
	# one line per counter of the X-macro list
	n=$(grep -c '^total ' <<<"$output")
	want=$(sed -n '/^#define LA_COUNTERS(X)/,/^$/p' "$ROOT/liballoc/include/liballoc_shm.h" | grep -c 'X(')
	[ "$n" -eq "$want" ]
}

@test "/metrics passes the exposition format check and carries the process" {
	start_daemon
	start_fake --exe /opt/svc/fake-exe --arenas 2
	wait_listed "$FPID"
	metrics >"$T/m"
	run "$PROMCHECK" "$T/m"
	echo "$output"
	[ "$status" -eq 0 ]
	# the exe label is /proc/<pid>/exe, never what the segment claims (/opt/svc/fake-exe)
	! grep -q 'fake-exe' "$T/m"
	# Prometheus's own linter: names, units, counters, help
	run promtool check metrics <"$T/m"
	echo "$output"
	[ "$status" -eq 0 ] && [ -z "$output" ]
	# the memory figures (allocated 1M*(1+2+3), free resident 64K per block)
	grep -q "^liballoc_in_use_bytes{pid=\"$FPID\",uid=\"0\",exe=\"$FAKESEG_EXE\"} 6[0-9]*$" "$T/m"
	grep -q "^liballoc_free_resident_bytes{pid=\"$FPID\",uid=\"0\",exe=\"$FAKESEG_EXE\"} 196608$" "$T/m"
	grep -q "^liballoc_reclaimable_bytes{pid=\"$FPID\",uid=\"0\",exe=\"$FAKESEG_EXE\"} 196608$" "$T/m"
	grep -q "^liballoc_process_non_allocator_rss_bytes{pid=\"$FPID\",uid=\"0\",exe=\"$FAKESEG_EXE\"} " "$T/m"
	grep -q "^liballoc_mmap_calls_total{pid=\"$FPID\",uid=\"0\",exe=\"$FAKESEG_EXE\"} 30$" "$T/m"
	grep -q "^liballoc_arena_address_space_bytes{pid=\"$FPID\",uid=\"0\",exe=\"$FAKESEG_EXE\",arena=\"1\"} 12582912$" "$T/m"
	# one family per tunable, in base units
	grep -q "^liballoc_tunable_decay_seconds{pid=\"$FPID\",uid=\"0\",exe=\"$FAKESEG_EXE\"} 10$" "$T/m"
	grep -q "^liballoc_tunable_mmap_threshold_bytes{pid=\"$FPID\",uid=\"0\",exe=\"$FAKESEG_EXE\"} 131072$" "$T/m"
	grep -q "^liballoc_tunable_tcache_max_bytes{pid=\"$FPID\",uid=\"0\",exe=\"$FAKESEG_EXE\"} 262144$" "$T/m"
	! grep -q '^liballoc_tunable{' "$T/m"
	grep -q '^# TYPE liballoc_commands_executed_total counter$' "$T/m"
	grep -q "^liballoc_build_info{pid=\"$FPID\",uid=\"0\",exe=\"$FAKESEG_EXE\",version=\"[0-9.]*\",segment_abi=\"6\"} 1$" "$T/m"
	grep -q '^liballoc_ctld_build_info{version="[0-9.]*",protocol="2",segment_abi="6"} 1$' "$T/m"
	# no per-arena series of what only the process block counts
	for c in $(sed -n '/^#define LA_COUNTERS(X)/,/^$/p' "$ROOT/liballoc/include/liballoc_shm.h" |
		grep -o 'X([a-z_]*, LA_[A-Z]*, "[a-z]*", LA_PROCESS' | cut -d'(' -f2 | cut -d, -f1); do
		! grep -q "^liballoc_arena_$c" "$T/m"
	done
	! grep -q '^liballoc_arena_direct_' "$T/m"
	! grep -q '^liballoc_arena_commands_executed' "$T/m"
	! grep -q '^liballoc_arena_threshold_raises' "$T/m"
}

@test "promtool's linter catches what the naming rules forbid (the check can fail)" {
	printf '# HELP x_milliseconds a duration\n# TYPE x_milliseconds gauge\nx_milliseconds 1\n' >"$T/bad"
	run promtool check metrics <"$T/bad"
	[ "$status" -ne 0 ]
	printf '# HELP y a count\n# TYPE y counter\ny 1\n' >"$T/bad"
	run promtool check metrics <"$T/bad"
	[ "$status" -ne 0 ]
}

@test "per-size-class series are exported when metrics_classes is set" {
	printf 'metrics_classes = true\nmetrics_arenas = false\n' >"$T/conf"
	start_daemon --config "$T/conf"
	start_fake
	wait_listed "$FPID"
	metrics >"$T/m"
	"$PROMCHECK" "$T/m"
	grep -q "^liballoc_class_blocks_in_use{pid=\"$FPID\",uid=\"0\",exe=\"$FAKESEG_EXE\",size=\"64\"} 300$" "$T/m"
	grep -q '^# TYPE liballoc_class_refills_total counter$' "$T/m"
	! grep -q '^liballoc_arena_' "$T/m"
}

@test "/healthz answers and / is a self-contained page" {
	start_daemon
	run curl -sf "http://$HTTP/healthz"
	[[ "$output" == "ok 0 processes" ]]
	curl -sf -D "$T/headers" "http://$HTTP/" >"$T/page"
	grep -q 'src="/dashboard.js"' "$T/page"
	grep -qi "^content-security-policy: default-src 'none'; script-src 'self'" "$T/headers"
	curl -sf "http://$HTTP/dashboard.js" | grep -q "fetch(url"
	curl -sf "http://$HTTP/dashboard.css" | grep -q "canvas"
	# nothing but the daemon itself: no absolute URL anywhere in the page's files
	! curl -sf "http://$HTTP/" "http://$HTTP/dashboard.js" "http://$HTTP/dashboard.css" |
		grep -Eq '(src|href|url)[=(]"?https?:|//cdn'
	start_fake --exe '/bin/we"ird'
	wait_listed "$FPID"
	run curl -sf "http://$HTTP/api/processes"
	[[ "$output" == *"\"pid\":$FPID"* ]]
	[[ "$output" == *'"name":"we\"ird"'* ]]
	[[ "$output" == *"\"exe\":\"$FAKESEG_EXE\""* ]]
	run curl -s -o /dev/null -w '%{http_code}' "http://$HTTP/nope"
	[ "$output" = 404 ]
}

@test "set round-trips: human units in, the effective value back, visible in stats" {
	start_daemon
	start_fake
	wait_listed "$FPID"
	run ctl set "$FPID" mmap_threshold=64K decay_ms=2s madvise_throttle=false
	echo "$output"
	[[ "$output" == *"result pid=$FPID exe=fakeseg code=OK"* ]]
	[[ "$output" == *"value pid=$FPID name=mmap_threshold value=65536"* ]]
	[[ "$output" == *"value pid=$FPID name=decay_ms value=2000"* ]]
	[[ "$output" == *"value pid=$FPID name=madvise_throttle value=0"* ]]
	run ctl stats "$FPID"
	[[ "$output" == *"name=mmap_threshold value=65536 min=0 max=33554432 explicit=1 source=command"* ]]
	run ctl get "$FPID" mmap_threshold
	[[ "$output" == *"value pid=$FPID name=mmap_threshold value=65536"* ]]
}

@test "set refuses bad values with the valid range, unknown names, and no target" {
	start_daemon
	start_fake
	wait_listed "$FPID"
	run ctl set "$FPID" mmap_threshold=64G
	[[ "$output" == *"code=ERR_RANGE"* ]]
	[[ "$output" == *"message=mmap_threshold = 64G is out of range [0, 32M]"* ]]
	run ctl set "$FPID" mmap_threshold=lots
	[[ "$output" == *"code=ERR_RANGE"* ]]
	[[ "$output" == *"bad value 'lots'"* ]]
	run ctl set "$FPID" no_such_knob=1
	[[ "$output" == *"code=ERR_UNKNOWN_TUNABLE"* ]]
	run ctl get "$FPID" no_such_knob
	[[ "$output" == *"code=ERR_UNKNOWN_TUNABLE"* ]]
	run ctl set 999999 mmap_threshold=1M
	[[ "$output" == *"code=ERR_NO_PROCESS"* ]]
	run ctl stats 999999
	[[ "$output" == *"code=ERR_NO_PROCESS"* ]]
}

@test "trim, release and flush pass the process's counts through" {
	start_daemon
	start_fake --trim-bytes 123456
	wait_listed "$FPID"
	run ctl trim "$FPID" 4096
	[[ "$output" == *"result pid=$FPID exe=fakeseg code=OK released=123456 mmap=0 munmap=0 madvise=3"* ]]
	run ctl release "$FPID"
	[[ "$output" == *"result pid=$FPID exe=fakeseg code=OK released=123456 mmap=0 munmap=1 madvise=3"* ]]
	run ctl flush "$FPID"
	[[ "$output" == *"code=OK released=123456"* ]]
	run ctl stats "$FPID"
	[[ "$output" == *"total commands_executed=3"* ]]
}

@test "targets: exe= reaches only that executable, all reaches every process" {
	start_daemon
	start_fake --exe /usr/bin/alpha; A=$FPID
	start_fake --exe /usr/bin/alpha; A2=$FPID
	start_fake --exe /usr/sbin/beta; B=$FPID
	wait_listed "$B"; wait_listed "$A"; wait_listed "$A2"
	run ctl set exe=alpha top_pad=1M
	[ "$(grep -c '^result .*code=OK' <<<"$output")" -eq 2 ]
	[[ "$output" == *"result pid=$A exe=alpha code=OK"* ]]
	[[ "$output" == *"result pid=$A2 exe=alpha code=OK"* ]]
	[[ "$output" != *"pid=$B "* ]]
	run ctl trim all
	[ "$(grep -c '^result .*code=OK released=1048576' <<<"$output")" -eq 3 ]
	run ctl set exe=gamma top_pad=1M
	[[ "$output" == *"code=ERR_NO_PROCESS"* ]]
}

@test "a process that exits disappears" {
	start_daemon
	start_fake
	wait_listed "$FPID"
	kill -TERM "$FPID"
	wait_listed "$FPID" absent
	run metrics
	[[ "$output" != *"pid=\"$FPID\""* ]]
}

@test "a SIGKILLed process's segment is removed and the process forgotten" {
	start_daemon --rescan-ms 200
	start_fake
	wait_listed "$FPID"
	seg="$T/segs/liballoc.$FPID.seg"
	[ -e "$seg" ]
	kill -9 "$FPID"
	wait_listed "$FPID" absent
	wait_until test ! -e "$seg"
	grep -q "removed stale segment $seg" "$T/log"
}

@test "a silent process times out and the request is cancelled, others still answer" {
	start_daemon --command-timeout-ms 300
	start_fake --no-answer; S=$FPID
	start_fake; A=$FPID
	wait_listed "$S"; wait_listed "$A"
	# one reply: the silent one given up after its 300 ms, the other answered. A machine
	# too busy to let A answer within the 300 ms times A out as well: that reply is asked
	# again (a cancelled command does not run), never A's lateness taken for a failure
	answered() {
		output=$(ctl set all top_pad=2M)
		echo "$output"
		[[ "$output" == *"result pid=$S exe=fakeseg code=ERR_TIMEOUT"* &&
			"$output" == *"no answer within 300 ms (cancelled)"* &&
			"$output" == *"result pid=$A exe=fakeseg code=OK"* ]]
	}
	wait_until answered
	[[ "$output" == *"result pid=$S exe=fakeseg code=ERR_TIMEOUT"* ]]
	[[ "$output" == *"no answer within 300 ms (cancelled)"* ]]
	[[ "$output" == *"result pid=$A exe=fakeseg code=OK"* ]]
}

@test "a stopped process times out and does not run the command when continued" {
	start_daemon --command-timeout-ms 300
	start_fake
	wait_listed "$FPID"
	stop_process "$FPID"
	run ctl set "$FPID" top_pad=3M
	[[ "$output" == *"code=ERR_TIMEOUT"* ]]
	kill -CONT "$FPID"
	# the mailbox works again: a new command is answered, and it is the only one that
	# ran (the cancelled one, had it run, would have run before it). A machine too busy
	# to let the fake answer within 300 ms cancels this one too: asked again
	wait_until sh -c "'$CTLCLIENT' --socket '$SOCK' set $FPID top_pad=4M | grep -q 'name=top_pad value=4194304'"
	run ctl stats "$FPID"
	[[ "$output" == *"total commands_executed=1"* ]]
}

@test "a daemon killed mid-command leaves a mailbox the next daemon recovers" {
	start_daemon --command-timeout-ms 500
	start_fake --delay-ms 800
	wait_listed "$FPID"
	ctl --timeout 60000 trim "$FPID" >/dev/null 2>&1 3>&- &
	client=$!
	# the request is in the mailbox
	wait_until eval '[ "$(metric liballoc_ctld_commands_total)" -ge 1 ]'
	kill -9 "$DPID"
	wait "$client" || true
	wait "$DPID" 2>/dev/null || true
	rm -f "$SOCK"
	# the service kept running; a new daemon (another lock token) takes the mailbox over
	# once the dead one's lock expires (timeout + 1 s) and its command has finished
	start_daemon --command-timeout-ms 30000
	run ctl set "$FPID" top_pad=5M
	echo "$output"
	[[ "$output" == *"result pid=$FPID exe=fakeseg code=OK"* ]]
	[[ "$output" == *"name=top_pad value=5242880"* ]]
	kill -0 "$FPID"
}

@test "a process without its control thread is reported, not waited for" {
	start_daemon
	start_fake --control off
	wait_listed "$FPID"
	run ctl trim "$FPID"
	[[ "$output" == *"code=ERR_FAILED"* ]]
	[[ "$output" == *"LIBALLOC_CONTROL=0"* ]]
}

@test "concurrent commands from several clients are serialized per mailbox and all succeed" {
	start_daemon
	start_fake; A=$FPID
	start_fake; B=$FPID
	wait_listed "$A"; wait_listed "$B"
	pids=()
	for i in 1 2 3 4; do
		( for j in $(seq 10); do ctl set all top_pad=$((i * 4096 + j)) >>"$T/c.$i" || exit 1; done ) 3>&- &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p"; done
	[ "$(cat "$T"/c.* | grep -c '^result .*code=OK')" -eq 80 ]
}

@test "SIGHUP reloads the config file: a new run directory is watched" {
	mkdir -m 700 "$T/more"
	echo "log_level = debug" >"$T/conf"
	start_daemon --config "$T/conf" --rescan-ms 100
	FAKE_DIR="$T/more" start_fake
	wait_rescans 2
	run ctl list
	[[ "$output" != *"pid=$FPID "* ]]
	printf 'log_level = info\nrun_dir = %s\n' "$T/more" >"$T/conf"
	kill -HUP "$DPID"
	wait_listed "$FPID"
	grep -q "configuration reloaded" "$T/log"
	echo "bogus_key = 1" >"$T/conf"
	kill -HUP "$DPID"
	wait_until grep -q "reload failed, keeping the current settings: $T/conf:1: unknown key 'bogus_key'" "$T/log"
	run ctl list
	[[ "$output" == *"pid=$FPID "* ]]
}

@test "SIGTERM removes the socket; a restarted daemon has every process again" {
	start_daemon
	start_fake
	wait_listed "$FPID"
	kill -TERM "$DPID"
	wait_until ended "$DPID"
	[ ! -e "$SOCK" ]
	grep -q "shutting down" "$T/log"
	start_daemon
	run ctl list
	[[ "$output" == *"process pid=$FPID "* ]]
}

@test "bad command lines exit 2 with the reason and the usage, before any socket is made" {
	local sock="$T/never.sock"
	# an unknown option: getopt's line, then the usage
	run --separate-stderr "$CTLD" --socket "$sock" --frobnicate
	[ "$status" -eq 2 ] && [ -z "$output" ]
	[[ "$stderr" == *"unrecognized option '--frobnicate'"* ]]
	[[ "$stderr" == *"usage: allocctld [options]"* ]]
	# an option without its value
	run --separate-stderr "$CTLD" --socket "$sock" --rescan-ms
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"option '--rescan-ms' requires an argument"* ]]
	# a word that is no option
	run --separate-stderr "$CTLD" --socket "$sock" --listen off start
	[ "$status" -eq 2 ]
	[[ "$stderr" == "allocctld: unexpected argument 'start'"$'\n'"usage: allocctld [options]"* ]]
	# a flag's bad value names the flag, what it got and what is valid
	run --separate-stderr "$CTLD" --socket "$sock" --log-level loud
	[ "$status" -eq 2 ]
	[ "$stderr" = "allocctld: --log-level: bad value 'loud' (error, warn, info, debug)" ]
	run --separate-stderr "$CTLD" --socket "$sock" --socket-mode 0800
	[ "$status" -eq 2 ]
	[ "$stderr" = "allocctld: --socket-mode: bad value '0800' (octal, e.g. 0600)" ]
	run --separate-stderr "$CTLD" --socket "$sock" --run-dir relative/dir
	[ "$status" -eq 2 ]
	[ "$stderr" = "allocctld: --run-dir: 'relative/dir' must be an absolute path" ]
	# more settings on the command line than it holds (64)
	local many=() i
	for ((i = 0; i < 65; i++)); do many+=(--run-dir "/run/d$i"); done
	run --separate-stderr "$CTLD" --socket "$sock" "${many[@]}"
	[ "$status" -eq 2 ]
	[ "$stderr" = "allocctld: too many options" ]
	# none of them made the socket, nor started a daemon
	[ ! -e "$sock" ]
}

@test "a second daemon on the same socket refuses to start" {
	start_daemon
	run "$CTLD" --socket "$SOCK" --listen off --no-default-dirs
	[ "$status" -ne 0 ]
	[[ "$output" == *"another allocctld is serving"* ]]
	run ctl version
	[[ "$output" == *"code=OK"* ]]
}

@test "--help documents the options; bad options and config values are refused" {
	run "$CTLD" --help
	[ "$status" -eq 0 ]
	[[ "$output" == *"--run-dir DIR"* ]]
	run "$CTLD" --rescan-ms 5
	[ "$status" -eq 2 ]
	[[ "$output" == *"allocctld: --rescan-ms: bad value '5'"* ]]
	echo "listen = nowhere" >"$T/conf"
	run "$CTLD" --config "$T/conf"
	[ "$status" -eq 2 ]
	[[ "$output" == *"conf:1: listen: 'nowhere' is not host:port, unix:PATH or off"* ]]
	run "$CTLD" --config "$ROOT/ctld/allocctld.conf.example" --check-config
	[ "$status" -eq 0 ]
	[[ "$output" == "configuration ok: socket /run/allocctld/ctl.sock, listen 127.0.0.1:9467"* ]]
}
