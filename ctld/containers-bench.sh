#!/bin/bash
# containers-bench.sh [N] [SERVICES] [RUNS] — report-only figures of issue 22 (no pass/fail):
#  - /metrics with N preloaded processes (`sleep` copies under SERVICES binary names) in
#    metrics_mode pid and service: series, bytes, scrape time (median and max of RUNS);
#  - discovery delay of a process in a new pid namespace (unshare) against one in the
#    daemon's own: from its segment file's rename into the run directory (ctime) to the
#    daemon's "discovered" log line, median and max of 10 each.
# Needs root (unshare), build/allocctld, build/liballoc.so, build/tests/ctlclient, curl.
set -euo pipefail
N=${1:-500}
SVC=${2:-5}
RUNS=${3:-5}
source "$(dirname "$0")/tools/bench-common.sh"
bench_init containers
mkdir -m 700 "$T/bin"
median_max() { sort -n | awk '{v[NR] = $1} END {printf "%s %s\n", v[int((NR + 1) / 2)], v[NR]}'; }

for ((k = 0; k < SVC; k++)); do cp "$(command -v sleep)" "$T/bin/svc$k"; done
for ((i = 0; i < N; i++)); do
	LIBALLOC_RUN_DIR="$T/segs" LD_PRELOAD="$BUILD/liballoc.so" "$T/bin/svc$((i % SVC))" 600 &
	PIDS+=($!)
done
for mode in pid service; do
	start_daemon --metrics-mode "$mode"
	wait_listed "$N" 60 || true # the figures say how many were listed
	times=()
	for ((r = 0; r < RUNS; r++)); do
		t=$(curl -sf -o "$T/m" -w '%{time_total}' "http://$HTTP/metrics")
		times+=("$(awk -v t="$t" 'BEGIN {printf "%.1f", t * 1000}')")
	done
	read -r p50 max < <(printf '%s\n' "${times[@]}" | median_max)
	echo "mode=$mode processes=$(listed) services=$SVC series=$(grep -vc '^#' "$T/m")" \
		"bytes=$(stat -c %s "$T/m") scrape_ms_p50=$p50 scrape_ms_max=$max"
	stop_daemon
done
for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
PIDS=()

# discovery delay: own namespace, then a new pid namespace. From the segment's rename into
# the directory (its ctime) to the daemon's "discovered" log line (ms timestamps): neither
# the polling below nor a client's start is in the figure.
: >"$T/log"
start_daemon --log-level info
for where in host namespace; do
	delays=()
	for i in $(seq 10); do
		before=$(grep -c 'discovered pid' "$T/log" || true)
		if [ "$where" = host ]; then
			LIBALLOC_RUN_DIR="$T/segs" LD_PRELOAD="$BUILD/liballoc.so" sleep 60 &
		else
			unshare --pid --fork --kill-child --mount-proc \
				env LIBALLOC_RUN_DIR="$T/segs" LD_PRELOAD="$BUILD/liballoc.so" sleep 60 &
		fi
		PIDS+=($!)
		until [ "$(grep -c 'discovered pid' "$T/log" || true)" -gt "$before" ]; do sleep 0.01; done
		line=$(grep 'discovered pid' "$T/log" | tail -n 1)
		delays+=("$(python3 -c '
import datetime, os, re, sys
line = sys.argv[1]
ts = datetime.datetime.strptime(line[:23], "%Y-%m-%dT%H:%M:%S.%f").replace(
    tzinfo=datetime.timezone.utc).timestamp()
m = re.search(r"pid (\d+) of pid namespace (\d+)", line)
name = ("liballoc.%s.ns%s.seg" % m.groups() if m else
        "liballoc.%s.seg" % re.search(r"discovered pid (\d+)", line).group(1))
print("%.1f" % max(0.0, (ts - os.stat(os.path.join(sys.argv[2], name)).st_ctime) * 1000))
' "$line" "$T/segs")")
	done
	read -r p50 max < <(printf '%s\n' "${delays[@]}" | median_max)
	echo "discovery=$where delay_ms_p50=$p50 delay_ms_max=$max"
done
