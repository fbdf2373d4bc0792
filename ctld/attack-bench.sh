#!/bin/bash
# attack-bench.sh — report-only figures of allocctld under issue 18's attacks (no pass/fail;
# the pass/fail tests are tests/security/). Beside N ordinary processes (default 500, as the
# daemon scale figures), for each attack run by uid nobody (or root where it makes no
# difference) on a fresh daemon: root's `allocctl ps` latency over R runs (p50, p99, max;
# the process start of allocctl included), the daemon's side of it (whole lists on one
# connection: list_p50/p99/max) and its CPU per ps, and the daemon's peak RSS (VmHWM); and /metrics
# time and size with 5,000 processes, and the daemon's RSS with 5,000 processes once their
# history has reached its bound (history_sample_ms = 100 so the rings fill in about a minute
# instead of 15). Prints "attack=NAME key=value ..." lines.
# Needs root, build/allocctld, build/allocctl, build/tests/{massseg,ctlclient}, python3.
#   ctld/attack-bench.sh [N] [R]          (R: ps runs per attack, default 100)
#   ATTACKS="5000-segments 5000-history-full" ctld/attack-bench.sh 500 20   (some rows only:
#   none hostile-segments never-reading-client connection-flood slowloris 5000-segments
#   5000-history-full)
set -euo pipefail
N=${1:-500}
R=${2:-100}
source "$(dirname "$0")/tools/bench-common.sh"
# under /tmp, traversable by every uid: nobody reaches the socket and its copy of the test
# client wherever the checkout is (a 0700 home too)
bench_init attack --other-uid
mkdir -m 755 "$T/pub"
SOCK="$T/pub/ctl.sock"
NOBODY_CTLCLIENT="$BUILD/tests/ctlclient"
xuid_share "$T" NOBODY_CTLCLIENT

attack_daemon() { # [config lines]
	printf '%s\n' "socket_mode = 0666" "$@" >"$T/conf"
	start_daemon --config "$T/conf"
}
want() { [ -z "${ATTACKS:-}" ] || [[ " $ATTACKS " == *" $1 "* ]]; }
status_kib() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$DPID/status"; }

# ps_latency: R runs of root's allocctl ps; prints p50 p99 max in ms
ps_latency() {
	local i t0 t1
	for ((i = 0; i < R; i++)); do
		t0=$(date +%s%N)
		"$BUILD/allocctl" --socket "$SOCK" --timeout 30s ps >/dev/null
		t1=$(date +%s%N)
		echo $(((t1 - t0) / 1000))
	done | sort -n | awk '{v[NR] = $1} END {
		p50 = v[int(NR * 0.50 + 0.5)]; p99 = v[int(NR * 0.99 + 0.5)]; if (!p99) p99 = v[NR];
		printf "ps_p50_ms=%.1f ps_p99_ms=%.1f ps_max_ms=%.1f", p50 / 1000, p99 / 1000, v[NR] / 1000 }'
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$DPID/stat"; }
report() { # name extra...
	local name=$1 c0 c1 ps lat
	shift
	c0=$(cpu_ticks)
	ps=$(ps_latency)
	c1=$(cpu_ticks)
	# the daemon's side alone: whole lists (all pages) on one connection, no process start
	lat=$(ctl --timeout 30000 list-latency "$R")
	echo "attack=$name $ps $lat daemon_cpu_ms_per_ps=$(awk -v d=$((c1 - c0)) -v hz="$(getconf CLK_TCK)" -v r="$R" 'BEGIN {printf "%.2f", d * 1000 / hz / r}') daemon_peak_rss_mib=$(awk '/^VmHWM/ {printf "%.1f", $2 / 1024}' "/proc/$DPID/status") $*"
}

echo "allocctld under attack: $N ordinary processes, $R runs of ps per attack ($(nproc) cores)"
mass --count "$N"

# none
if want none; then
attack_daemon
wait_listed "$N"
report none
stop_daemon
fi

# hostile segments: three of the largest legal size (1024 arenas) and one whose seqlock
# stays odd
if want hostile-segments; then
attack_daemon
for _ in 1 2 3; do mass --arenas 1024; done
mass --torn
wait_listed $((N + 4))
report hostile-segments
stop_daemon
fi

# a client that pipelines 100k stats requests and never reads
if want never-reading-client; then
attack_daemon
wait_listed "$N"
ONE=$(ctl --timeout 30000 list | sed -n 's/^process pid=\([0-9]*\) .*/\1/p' | head -n 1)
# (the daemon closes it once its replies wait unread for read_timeout_ms: it comes back, as
# an attacker would, until the row is done; stopping the daemon ends the last one)
while :; do
	"$AS_USER" nobody "$NOBODY_CTLCLIENT" --socket "$SOCK" flood "$ONE" 100000 30 >/dev/null 2>&1
done &
FL=$!
PIDS+=("$FL")
sleep 1
report never-reading-client
kill "$FL" 2>/dev/null || true
stop_daemon
fi

# one uid holding 70 idle connections
if want connection-flood; then
attack_daemon
"$AS_USER" nobody "$NOBODY_CTLCLIENT" --socket "$SOCK" hold 70 60 >/dev/null 2>&1 &
HO=$!
PIDS+=("$HO")
sleep 1
report connection-flood
kill "$HO" 2>/dev/null || true
stop_daemon
fi

# slowloris: 2,000 HTTP connections sending a header byte now and then
if want slowloris; then
attack_daemon
python3 - "${HTTP##*:}" 2000 600 >/dev/null 2>&1 <<'PY' &
import socket, sys, time
port, n, secs = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
socks, end = [], time.time() + secs
while time.time() < end:
    while len(socks) < n:
        s = socket.socket(); s.setblocking(False)
        try: s.connect(("127.0.0.1", port))
        except BlockingIOError: pass
        except OSError: break
        socks.append(s)
    for s in list(socks):
        try: s.send(b"G")
        except OSError: socks.remove(s); s.close()
    time.sleep(0.3)
PY
SL=$!
PIDS+=("$SL")
sleep 2
h0=$(date +%s%N)
curl -sf --max-time 10 "http://$HTTP/healthz" >/dev/null && hz=ok || hz=fail
h1=$(date +%s%N)
report slowloris "healthz=$hz healthz_ms=$(((h1 - h0) / 1000000))"
kill "$SL" 2>/dev/null || true
stop_daemon
fi

# 5,000 segments (one uid; its cap raised to hold them): ps, and /metrics time and size
if want 5000-segments || want 5000-history-full; then
	mass --count $((5000 - N))
fi
if want 5000-segments; then
attack_daemon "max_segments_per_uid = 6000"
wait_listed 5000 1800
RSS_LISTED=$(awk -v k="$(status_kib VmRSS)" 'BEGIN {printf "%.1f", k / 1024}')
m=$(curl -sf -o /dev/null -w '%{time_total} %{size_download}' "http://$HTTP/metrics")
report 5000-segments "metrics_ms=$(awk -v t="${m% *}" 'BEGIN {printf "%.0f", t * 1000}')" \
	"metrics_mib=$(awk -v s="${m#* }" 'BEGIN {printf "%.1f", s / 1048576}')" \
	"rss_listed_mib=$RSS_LISTED"
stop_daemon
fi

# 5,000 segments with their history at its bound (history_max_bytes, default 32M): sampled
# every 100 ms so the rings reach it in about a minute; the daemon's peak RSS then
if want 5000-history-full; then
attack_daemon "max_segments_per_uid = 6000" "history_sample_ms = 100"
wait_listed 5000 1800
hist() { curl -sf "http://$HTTP/metrics" | awk -v n="$1" '$1 == n {print $2}'; }
end=$((SECONDS + 300))
# (a scrape of 5,000 processes is not free: every 10 s)
until [ "$(hist liballoc_ctld_history_truncated_total)" != 0 ] || [ $SECONDS -ge $end ]; do
	sleep 10
done
sleep 5
report 5000-history-full "history_mib=$(awk -v b="$(hist liballoc_ctld_history_bytes)" \
	'BEGIN {printf "%.1f", b / 1048576}')" \
	"history_truncated=$(hist liballoc_ctld_history_truncated_total)"
stop_daemon
fi
