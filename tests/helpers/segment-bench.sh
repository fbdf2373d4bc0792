#!/bin/bash
# segment-bench.sh — report-only figures of issue 5 (not a test, nothing is asserted):
#   1. `set` round trip against an idle preloaded process, N times (default 1000):
#      through the mailbox directly (ctld reader API: the library's seg_command, and a
#      yielding poll loop), through allocctld on one connection (ctlclient latency), and
#      through the CLI (one `allocctl set` process per command, as an operator runs it);
#   2. `trim` of 1 GiB of free, resident memory: time and bytes released, by the mailbox
#      and by allocctl.
# usage: tests/helpers/segment-bench.sh [N]    (after `make` and `make build/tests/segtool
#        build/tests/segwork build/tests/ctlclient`; BUILD defaults to ./build)
set -euo pipefail
ROOT=${ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
N=${1:-1000}
SO="$BUILD/liballoc.so"
SEGTOOL="$BUILD/tests/segtool"
SEGWORK="$BUILD/tests/segwork"
mkdir -p "$BUILD/run"
T=$(mktemp -d "$BUILD/run/segbench.XXXXXX")
mkdir -m 700 "$T/segs"
PIDS=()
cleanup() {
	exec 7>&- 8>&- 2>/dev/null || true
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$T"
}
trap cleanup EXIT

wait_for() { for _ in $(seq 250); do grep -qE "$1" "$2" 2>/dev/null && return 0; sleep 0.02; done; return 1; }

# percentiles of a file of nanosecond figures, one a line
pct() {
	sort -n "$1" | awk '{v[NR] = $1} END {
		printf "n=%d p50_us=%.1f p99_us=%.1f max_us=%.1f\n", NR, v[int(NR * 0.50) + 1] / 1e3,
		       v[int(NR * 0.99) + 1] / 1e3, v[NR] / 1e3 }'
}

echo "== machine: $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"

# 1. an idle preloaded process
mkfifo "$T/idle.in"
(LIBALLOC_RUN_DIR="$T/segs" LD_PRELOAD="$SO" exec "$SEGWORK") <"$T/idle.in" >"$T/idle.out" 2>&1 &
IDLE=$!
PIDS+=("$IDLE")
exec 7>"$T/idle.in"
wait_for "^$IDLE ready" "$T/idle.out"
SEG="$T/segs/liballoc.$IDLE.seg"
echo "== set round trip, $N times, idle process $IDLE"
echo "mailbox: $("$SEGTOOL" bench "$SEG" "$N" | tr '\n' ' ')"

"$BUILD/allocctld" --socket "$T/ctl.sock" --listen off --run-dir "$T/segs" --no-default-dirs \
	--ready-file "$T/ready" >"$T/ctld.log" 2>&1 &
PIDS+=("$!")
for _ in $(seq 250); do [ -e "$T/ready" ] && break; sleep 0.02; done
for _ in $(seq 250); do
	"$BUILD/tests/ctlclient" --socket "$T/ctl.sock" list 2>/dev/null | grep -q "pid=$IDLE " && break
	sleep 0.02
done
echo "allocctld, one connection (ctlclient latency): $("$BUILD/tests/ctlclient" --socket "$T/ctl.sock" latency "$IDLE" "$N" | tr '\n' ' ')"
: >"$T/cli.ns"
for i in $(seq "$N"); do
	v=$((i % 2 ? 131072 : 262144))
	t0=$(date +%s%N)
	"$BUILD/allocctl" --socket "$T/ctl.sock" set "$IDLE" "mmap_threshold=$v" >/dev/null
	echo $(($(date +%s%N) - t0)) >>"$T/cli.ns"
done
echo "allocctl set (a new process each time, incl. exec): $(pct "$T/cli.ns")"

# 2. 1 GiB of free memory kept resident (trim threshold above it, no decay, idle heaps kept),
#    then trim
echo "== trim of 1 GiB of free memory"
for how in mailbox allocctl; do
	mkfifo "$T/big.$how"
	(LIBALLOC_RUN_DIR="$T/segs" LD_PRELOAD="$SO" LIBALLOC_TRIM_THRESHOLD=4G LIBALLOC_DECAY_MS=0 LIBALLOC_IDLE_HEAP_RELEASE=0 \
		exec "$SEGWORK") <"$T/big.$how" >"$T/big.$how.out" 2>&1 &
	BIG=$!
	PIDS+=("$BIG")
	exec 8>"$T/big.$how"
	wait_for "^$BIG ready" "$T/big.$how.out"
	echo "reserve 16384" >&8
	echo "alloc 64K 16384" >&8
	echo "free" >&8
	wait_for "^$BIG ok 3 free" "$T/big.$how.out"
	rss=$(awk '/VmRSS/ {print $2}' "/proc/$BIG/status")
	retained=$("$SEGTOOL" info "$T/segs/liballoc.$BIG.seg" | sed -n 's/^free_resident_bytes=//p')
	if [ "$how" = mailbox ]; then
		res=$("$SEGTOOL" cmd "$T/segs/liballoc.$BIG.seg" -t 30000 trim 0 |
			grep -E '^(bytes_released|duration_ns|madvise|munmap)=' | tr '\n' ' ')
		t_end=""
	else
		for _ in $(seq 250); do
			"$BUILD/tests/ctlclient" --socket "$T/ctl.sock" list | grep -q "pid=$BIG " && break
			sleep 0.02
		done
		t0=$(date +%s%N)
		res=$("$BUILD/allocctl" --socket "$T/ctl.sock" --bytes trim "$BIG")
		t_end=" wall_ms=$((($(date +%s%N) - t0) / 1000000))"
	fi
	rss2=$(awk '/VmRSS/ {print $2}' "/proc/$BIG/status")
	echo "$how: retained_before=$retained rss_before_kib=$rss rss_after_kib=$rss2 $res$t_end"
	echo exit >&8
	exec 8>&-
	wait "$BIG" || true
done
