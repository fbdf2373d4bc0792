#!/bin/bash
# demo.sh — `make demo`, the main job end to end: start allocctld on a private socket,
# start a service (tests/helpers/workload) under LD_PRELOAD=liballoc.so, wait until it has
# churned memory and gone quiet, then walk through allocctl ps, stats, a live set, release
# and trim, showing memory before and after (RSS from /proc and the allocator's own
# numbers). Everything started here is stopped on exit. Builds nothing: make built it.
# A part that is not built is named and its steps are skipped (exit 1 at the end).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$(realpath -m "${BUILD:-$ROOT/build}")
RUN="$BUILD/run/demo"
ALLOCCTL="$BUILD/allocctl"
CTLD="$BUILD/allocctld"
SO="$BUILD/liballoc.so"
WORKLOAD="$BUILD/tests/workload"
# The service: 4 threads fill 512 MiB (however long that takes), churn it for 3 s, then free
# all but 16 MiB (DEMO_* override, e.g. for a quick run).
WL_ARGS=(-t "${DEMO_THREADS:-4}" -s "${DEMO_SIZE:-512M}" -d "${DEMO_SECONDS:-3}" -k 16M -b 512K -n 8)

if [ -t 1 ]; then B=$'\e[1m' D=$'\e[2m' N=$'\e[0m'; else B='' D='' N=''; fi
step() { printf '\n%s==> %s%s\n' "$B" "$*" "$N"; }
note() { printf '%s%s%s\n' "$D" "$*" "$N"; }
echo_cmd() { printf '%s$ %s%s\n' "$B" "$*" "$N"; }
show() { echo_cmd "$@"; "$@"; }

skipped=()
missing() { skipped+=("$1"); printf '%sdemo: %s is not built (%s): %s%s\n' "$B" "$1" "$2" "$3" "$N"; }

pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	[ ${#pids[@]} -gt 0 ] && note "stopped everything the demo started (pids ${pids[*]})"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

wait_for() { # wait_for SECONDS COMMAND...
	local n=$(($1 * 20))
	shift
	while ! "$@" 2>/dev/null; do
		n=$((n - 1))
		[ "$n" -gt 0 ] || return 1
		sleep 0.05
	done
}

have_cli=1 have_ctld=1 have_so=1 have_wl=1
[ -x "$ALLOCCTL" ] || { have_cli=0; missing allocctl "$ALLOCCTL" "no allocctl step can run"; }
[ -x "$CTLD" ] || { have_ctld=0; missing allocctld "$CTLD" "the daemon and every allocctl step are skipped"; }
[ -e "$SO" ] || { have_so=0; missing liballoc "$SO" "the service cannot run under it: its steps are skipped"; }
[ -x "$WORKLOAD" ] || { have_wl=0; missing "the workload" "$WORKLOAD" "no service to run (make $WORKLOAD)"; }

rm -rf "$RUN"
mkdir -p "$RUN/segments"
chmod 700 "$RUN" "$RUN/segments"
export ALLOCCTL_SOCKET="$RUN/ctl.sock"
export LIBALLOC_RUN_DIR="$RUN/segments"

if [ $have_ctld = 1 ]; then
	step "start the sidecar daemon on a private socket"
	ctld=("$CTLD" --socket "$ALLOCCTL_SOCKET" --run-dir "$LIBALLOC_RUN_DIR" --no-default-dirs
		--listen 127.0.0.1:0 --rescan-ms 500 --ready-file "$RUN/ready"
		--command-timeout-ms 30000)
	echo_cmd "${ctld[@]}"
	"${ctld[@]}" >"$RUN/allocctld.log" 2>&1 &
	pids+=($!)
	if ! wait_for 10 test -s "$RUN/ready"; then
		echo "demo: allocctld did not start; its log:" && cat "$RUN/allocctld.log"
		exit 1
	fi
	note "ready: $(tr '\n' ' ' <"$RUN/ready")(log: $RUN/allocctld.log)"
fi

WL=
if [ $have_wl = 1 ] && [ $have_so = 1 ]; then
	step "start a service under the preload"
	note "It fills memory in several threads, churns it, frees most of it and goes quiet. It runs with"
	note "decay_ms=0 and idle_heap_release=0: freed memory stays resident until an operator"
	note "asks for it back, which is what release and trim below do."
	wl=(env LD_PRELOAD="$SO" LIBALLOC_DECAY_MS=0 LIBALLOC_IDLE_HEAP_RELEASE=0
		LIBALLOC_TRIM_THRESHOLD=1G "$WORKLOAD" "${WL_ARGS[@]}")
	echo_cmd "${wl[@]}"
	# exec: $! is the service itself (env execs the workload), so signals reach it.
	exec_bg() { exec "$@"; }
	exec_bg "${wl[@]}" >"$RUN/workload.out" 2>&1 &
	WL=$!
	pids+=("$WL")
	if ! wait_for 600 grep -q '^quiet' "$RUN/workload.out"; then
		echo "demo: the workload did not go quiet; its output:" && cat "$RUN/workload.out"
		exit 1
	fi
	note "pid $WL: $(grep '^quiet' "$RUN/workload.out")"
fi

ready=0
if [ $have_cli = 1 ] && [ $have_ctld = 1 ] && [ $have_so = 1 ] && [ -n "$WL" ]; then
	listed() { "$ALLOCCTL" ps --json | grep -q "\"pid\":$WL,"; }
	if wait_for 10 listed; then ready=1; else echo "demo: allocctld does not list pid $WL"; fi
fi

memory() { # memory LABEL: RSS from /proc and the allocator's own numbers
	# (stats reads the segment when asked; ps shows figures up to 1 s old, which beside a
	# fresh RSS read right after a release or trim showed the memory before it)
	"$ALLOCCTL" --json stats "$WL" | python3 -c "
import json, sys
p = json.load(sys.stdin)['process']
rss = [int(l.split()[1]) * 1024 for l in open('/proc/$WL/status') if l.startswith('VmRSS:')][0]
mib = lambda b: '%.1f MiB' % (b / 1048576)
m = p['memory']
print('%s%-7s RSS %s (/proc/$WL/status); allocator: in use %s, cached %s, free resident %s, '
      'reclaimable %s; not the allocator: %s%s' % (
    '$B', sys.argv[1], mib(rss), mib(m['in_use_bytes']), mib(m['cached_bytes']),
    mib(m['free_resident_bytes']), mib(m['reclaimable_bytes']),
    mib(m['non_allocator_rss_bytes']), '$N'))" "$1"
}
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$WL/status"; }
released_nothing=0
total() { "$ALLOCCTL" --json stats "$WL" | python3 -c "import json,sys; print(json.load(sys.stdin)['totals']['$1'])"; }

if [ $ready = 1 ]; then
	step "what runs under liballoc"
	show "$ALLOCCTL" ps
	show "$ALLOCCTL" top --iterations 1

	step "everything about the service"
	show "$ALLOCCTL" stats "$WL"

	step "a live set: lower the mmap threshold, and the next large blocks get their own mappings"
	show "$ALLOCCTL" get "$WL" mmap_threshold mmap_dynamic
	before=$(total direct_mappings)
	show "$ALLOCCTL" set "$WL" mmap_threshold=256K
	note "the service now allocates 8 blocks of 512 KiB (SIGUSR1):"
	kill -USR1 "$WL"
	wait_for 10 grep -q '^burst 8' "$RUN/workload.out"
	after=$(total direct_mappings)
	note "direct mappings: $before before, $after after ($((after - before)) new)"

	step "flush the thread caches, then release the heaps that hold no live block"
	memory before
	rss0=$(rss_kb)
	show "$ALLOCCTL" flush "$WL"
	show "$ALLOCCTL" release "$WL"
	memory after
	rss1=$(rss_kb)
	if [ "$rss1" -lt "$rss0" ]; then
		note "RSS fell by $(((rss0 - rss1) / 1024)) MiB: the memory went back to the system"
	else
		echo "demo: release returned nothing (RSS $((rss0 / 1024)) MiB before, $((rss1 / 1024)) MiB after)"
		released_nothing=1
	fi

	step "trim: return the free pages the heaps still keep resident"
	memory before
	show "$ALLOCCTL" trim "$WL"
	memory after

	step "the same numbers, for scripts"
	show "$ALLOCCTL" --json ps
fi

if [ "$released_nothing" = 1 ]; then
	echo "demo: failed: the release step returned no memory (see $RUN/workload.out)"
	exit 1
fi
if [ ${#skipped[@]} -eq 0 ] && [ $ready = 0 ]; then
	echo "demo: failed (see $RUN/allocctld.log and $RUN/workload.out)"
	exit 1
fi
if [ ${#skipped[@]} -gt 0 ]; then
	printf '\n%sdemo incomplete: not built: %s%s\n' "$B" "${skipped[*]}" "$N"
	exit 1
fi
step "done: the daemon and the service are stopped on exit"
