#!/bin/bash
# scale-bench.sh [N] — report-only scale figures of allocctld (no pass/fail): with N
# processes (default 500; fake segments from tests/helpers/fakeseg, or MODE=real for
# `sleep` preloaded with liballoc.so) it reports the time to discover all of them at
# start and while running, one /metrics scrape, the daemon's RSS and idle CPU, and the
# time of one `set` to all N. Needs `make build/allocctld build/tests/fakeseg
# build/tests/ctlclient` (and build/liballoc.so for MODE=real).
set -euo pipefail
N=${1:-500}
MODE=${MODE:-fake}
source "$(dirname "$0")/tools/bench-common.sh"
bench_init scale

spawn() { # spawn K processes
	local k
	for ((k = 0; k < $1; k++)); do
		if [ "$MODE" = real ]; then
			LIBALLOC_RUN_DIR="$T/segs" LD_PRELOAD="$BUILD/liballoc.so" sleep 600 &
		else
			"$BUILD/tests/fakeseg" --dir "$T/segs" --interval-ms 0 --exe /usr/bin/scalesvc &
		fi
		PIDS+=($!)
	done
}
segments() { find "$T/segs" -name 'liballoc.*.seg' | wc -l; }
wait_segments() {
	while [ "$(segments)" -lt "$1" ]; do sleep 0.05; done
}

echo "allocctld scale figures: N=$N mode=$MODE ($(nproc) cores)"
# 1. discovery at start: N segments exist, then the daemon starts
spawn "$N"
wait_segments "$N"
t0=$(now_ms)
start_daemon --command-timeout-ms 5000
t1=$(now_ms)
n=$(listed)
echo "discover at start:    $((t1 - t0)) ms until serving with $n of $N processes listed"

# 2. /metrics
curl -sf "http://$HTTP/metrics" >"$T/m"
best=999999; total=0
for i in $(seq 10); do
	s=$(curl -sf -o /dev/null -w '%{time_total}' "http://$HTTP/metrics")
	ms=$(awk -v s="$s" 'BEGIN{printf "%d", s*1000}')
	total=$((total + ms)); [ "$ms" -lt "$best" ] && best=$ms
done
echo "/metrics scrape:      $((total / 10)) ms mean, $best ms best of 10; $(wc -c <"$T/m") bytes, $(grep -vc '^#' "$T/m") samples"
"$ROOT/ctld/tools/promcheck.py" "$T/m" | sed 's/^/                      promcheck: /'

# 3. set to all N
t0=$(now_ms)
ctl --timeout 20000 set all top_pad=1M >"$T/set"
t1=$(now_ms)
echo "set top_pad to all:   $((t1 - t0)) ms (client included), $(grep -c '^result .*code=OK' "$T/set") OK of $N"
t0=$(now_ms)
ctl --timeout 20000 trim all >"$T/trim"
t1=$(now_ms)
echo "trim all:             $((t1 - t0)) ms, $(grep -c '^result .*code=OK' "$T/trim") OK"
one=${PIDS[0]}
echo "set to one process:   $(ctl latency "$one" 1000)"

# 4. idle cost
sleep 1
rss=$(awk '/^VmRSS/{print $2}' "/proc/$DPID/status")
ticks() { awk '{print $14 + $15}' "/proc/$DPID/stat"; }
c0=$(ticks); sleep 10; c1=$(ticks)
hz=$(getconf CLK_TCK)
echo "daemon RSS:           ${rss} KiB with $N processes"
echo "daemon idle CPU:      $(awk -v d=$((c1 - c0)) -v hz="$hz" 'BEGIN{printf "%.2f", 100*d/hz/10}')% of one core over 10 s (rescan every 2 s)"

# 5. discovery while running: N more processes appear
t0=$(now_ms)
spawn "$N"
while [ "$(listed)" -lt $((2 * N)) ]; do sleep 0.05; done
t1=$(now_ms)
echo "discover $N new:      $((t1 - t0)) ms from first spawn until all listed (spawning included)"
wait_segments $((2 * N))
t2=$(now_ms)
echo "                      (segments of all $N existed after $((t2 - t0)) ms)"
