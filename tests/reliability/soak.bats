#!/usr/bin/env bats
# soak.bats — soak under live control: a preloaded workload runs while a controller
# (controller.bash, allocctl through allocctld) changes thresholds, trims, releases idle
# heaps and flushes caches every 100 ms. Asserted: no corrupted block (every block is
# verified before it is freed), no failed allocation, no failed command, RSS bounded.
#  1. tests/reliability/soak.c: 4 threads, blocks of 16 B .. 1 MiB, remote frees;
#  2. redis-server (ephemeral port on 127.0.0.1) under a bounded redis-benchmark, with
#     known keys written before and read back after.
# Each part runs until the controller has done SOAK_ROUNDS rounds (default 10: every value
# of every tunable set twice, the controller stepping through each tunable's values; redis
# also until 2 benchmark runs are done): sized by what it must do, not by seconds. The long
# form adds time: SOAK_SECONDS is the budget of the whole suite, 60% for the workload, 40%
# for redis (TEST_LONG=1 makes it an hour):
#   TEST_LONG=1 make test TESTS=tests/reliability/soak.bats
#   SOAK_SECONDS=600 SOAK_THREADS=8 make test TESTS=tests/reliability/soak.bats
# Results go to $BUILD/run/soak-results.txt.
# san: skip

setup() {
	source "$BATS_TEST_DIRNAME/common.bash"
	rel_setup
	SOAK_ROUNDS=${SOAK_ROUNDS:-10}
	if [ "${TEST_LONG:-0}" = 1 ]; then SOAK_SECONDS=${SOAK_SECONDS:-3600}; fi
	SOAK_SECONDS=${SOAK_SECONDS:-0}
	start_daemon --rescan-ms 500
}

teardown() {
	touch "$T/stop"
	[ -n "${CTRL:-}" ] && wait "$CTRL" 2>/dev/null
	rel_teardown
}

# control PID: start the controller on PID (sets CTRL)
control() {
	ALLOCCTL="$ALLOCCTL" BUILD="$BUILD" "$BATS_TEST_DIRNAME/controller.bash" "$SOCK" "$1" \
		"$T/stop" "$T/ctrl" 3>&- &
	CTRL=$!
	bg_record "$CTRL"
}

ctrl_rounds() {
	cat "$T/ctrl.rounds" 2>/dev/null || echo 0
}

# soaked SECS: the controller has done SOAK_ROUNDS rounds, and SECS seconds have passed
# since the part started (the long form)
soaked() {
	[ "$(ctrl_rounds)" -ge "$SOAK_ROUNDS" ] && [ "$SECONDS" -ge "$1" ]
}

# finish_control: stop the controller, print and check its summary (0 failures)
finish_control() {
	touch "$T/stop"
	wait "$CTRL"
	CTRL=
	cat "$T/ctrl"
	if [ -f "$T/ctrl.fail" ]; then
		cat "$T/ctrl.fail"
		grep -v ': info: \(connection\|http\|control socket\)' "$T/log" | tail -n 20
	fi
	grep -q ' failures=0 ' "$T/ctrl"
	local rounds
	rounds=$(sed -n 's/^rounds=\([0-9]*\).*/\1/p' "$T/ctrl")
	[ "$rounds" -ge "$SOAK_ROUNDS" ]
}

@test "soak: 4 threads verify every block while tunables change, trims, releases and flushes run every 100 ms" {
	local secs=$((SOAK_SECONDS * 6 / 10)) until
	until=$((SECONDS + secs))
	preload "$SOAK" "${SOAK_THREADS:-4}" 0 512
	wait_listed "$SPID"
	control "$SPID"
	wait_until -t $((SOAK_ROUNDS * 10 + secs + 60)) soaked "$until"
	still_allocating 1
	finish_control
	finish_soak
	# RSS bound: the live bytes at their peak, twice over (size-class rounding, page
	# granularity, per-thread caches, retained-but-deferred pages between trims), plus
	# 64 MiB for the program, the segment and the direct-mapping cache between flushes.
	local peak max_rss
	peak=$(sed -n 's/.*peak_live=\([0-9]*\).*/\1/p' "$T/svc.out" | tail -n 1)
	max_rss=$(sed -n 's/.*max_rss_kb=\([0-9]*\).*/\1/p' "$T/ctrl")
	local bound=$((2 * peak / 1024 + 65536))
	echo "peak live $((peak / 1024)) KiB, max RSS ${max_rss} KiB, bound ${bound} KiB"
	echo "$(date -u +%FT%TZ) soak ${secs}s rounds>=$SOAK_ROUNDS threads=${SOAK_THREADS:-4} $(tail -n 1 "$T/svc.out") $(cat "$T/ctrl") bound_kb=$bound" >>"$BUILD/run/soak-results.txt"
	[ "$max_rss" -gt 0 ]
	[ "$max_rss" -le "$bound" ]
}

@test "soak: redis-server under redis-benchmark with the same controller keeps its data" {
	command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null ||
		{ echo "redis-server or redis-benchmark missing (scripts/deps.sh test installs them)"; false; }
	local secs=$((SOAK_SECONDS * 4 / 10))
	local port
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	preload redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
		--protected-mode yes --dir "$T"
	local rc=(redis-cli -h 127.0.0.1 -p "$port")
	wait_until sh -c "$(printf '%q ' "${rc[@]}") ping | grep -q PONG"
	wait_listed "$SPID"
	# known data, checked after the run
	for i in $(seq 1 2000); do echo "SET soak:key:$i value-$i-$((i * 7919))"; done |
		"${rc[@]}" >/dev/null
	control "$SPID"
	local until=$((SECONDS + secs)) runs=0
	while [ "$runs" -lt 2 ] || ! soaked "$until"; do
		timeout 600 redis-benchmark -h 127.0.0.1 -p "$port" -q -c 20 -n 20000 -r 100000 \
			-d "$(((RANDOM % 4 + 1) * 256))" -t set,get,lpush,lpop,incr,hset,sadd,mset >"$T/bench.out" 2>&1
		runs=$((runs + 1))
		grep -q 'requests per second' "$T/bench.out"
	done
	local peak_rss
	peak_rss=$(sed -n 's/^used_memory_peak:\([0-9]*\).*/\1/p' <("${rc[@]}" info memory | tr -d '\r'))
	finish_control
	cat "$T/bench.out"
	kill -0 "$SPID"
	# every known key still holds its value
	local bad
	bad=$(for i in $(seq 1 2000); do echo "GET soak:key:$i"; done | "${rc[@]}" |
		awk '{ i++; if ($0 != "value-" i "-" i * 7919) n++ } END { print n + 0 }')
	[ "$bad" -eq 0 ]
	local max_rss bound
	max_rss=$(sed -n 's/.*max_rss_kb=\([0-9]*\).*/\1/p' "$T/ctrl")
	# redis's own accounting of its peak, twice over, plus 64 MiB (code, libraries, the
	# segment, client buffers): a leak or unbounded retention under the controller fails it
	bound=$((2 * peak_rss / 1024 + 65536))
	echo "redis: $runs benchmark runs, used_memory_peak $((peak_rss / 1024)) KiB, max RSS $max_rss KiB, bound $bound KiB"
	echo "$(date -u +%FT%TZ) redis ${secs}s rounds>=$SOAK_ROUNDS runs=$runs used_memory_peak=$peak_rss $(cat "$T/ctrl") bound_kb=$bound" >>"$BUILD/run/soak-results.txt"
	[ "$max_rss" -le "$bound" ]
	"${rc[@]}" shutdown nosave >/dev/null 2>&1 || true
}
