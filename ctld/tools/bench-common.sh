# bench-common.sh — the setup the daemon's report-only benches share (ctld/scale-bench.sh,
# ctld/containers-bench.sh, ctld/attack-bench.sh source it after `set -euo pipefail`): a
# private directory, background processes killed and the directory removed at exit, one
# allocctld at a time, waits with a deadline (a bench that cannot get its daemon or its
# processes says so and stops, instead of polling forever).
#
#   bench_init NAME [--other-uid]   ROOT, BUILD (absolute), T (a new directory
#                       $BUILD/run/NAME.XXXXXX; with --other-uid /tmp/liballoc-NAME.XXXXXX,
#                       which every uid can traverse: tests/helpers/crossuid.bash, for a
#                       checkout in a 0700 home), $T/segs (0700, the run directory), SOCK
#                       ($T/sock/ctl.sock; set SOCK after bench_init to put it elsewhere),
#                       PIDS (append background pids: killed at exit), DPID
#   start_daemon [OPTIONS...]   allocctld on $T/segs, $SOCK, an ephemeral HTTP port, log
#                       level warn (OPTIONS come after these and override them), output to
#                       $T/log; sets DPID and HTTP once it is ready
#   stop_daemon
#   ctl ARGS...         the test client (build/tests/ctlclient) on $SOCK
#   listed              how many processes the daemon lists
#   wait_listed N [S]   until it lists at least N (fails after S seconds, default 300)
#   mass ARGS...        build/tests/massseg publishing in $T/segs, in the background, until
#                       its segments are all there
#   bench_wait S CMD... until CMD succeeds, every 5 ms (a figure may be timed around it);
#                       fails after S seconds
#   now_ms, now_us      the wall clock
ROOT=${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
BUILD=$(cd "$BUILD" && pwd)
source "$ROOT/tests/helpers/crossuid.bash"

bench_init() {
	local name=$1
	mkdir -p "$BUILD/run"
	if [ "${2:-}" = --other-uid ]; then
		T=$(xuid_mkdir "$name")
	else
		T=$(mktemp -d "$BUILD/run/$name.XXXXXX")
	fi
	mkdir -m 700 "$T/segs" "$T/sock"
	SOCK="$T/sock/ctl.sock"
	PIDS=()
	DPID=
	trap bench_cleanup EXIT
}

bench_cleanup() {
	[ -n "$DPID" ] && kill "$DPID" 2>/dev/null || true
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	[ -n "$DPID" ] && wait "$DPID" 2>/dev/null || true
	rm -rf "$T"
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }
now_us() { echo $(($(date +%s%N) / 1000)); }

bench_wait() {
	local end=$((SECONDS + $1))
	shift
	until "$@"; do
		if [ "$SECONDS" -ge "$end" ]; then
			echo "${0##*/}: timed out waiting for: $*" >&2
			return 1
		fi
		sleep 0.005
	done
}

start_daemon() {
	rm -f "$T/ready"
	"$BUILD/allocctld" --socket "$SOCK" --listen 127.0.0.1:0 --run-dir "$T/segs" \
		--no-default-dirs --ready-file "$T/ready" --log-level warn "$@" >>"$T/log" 2>&1 &
	DPID=$!
	bench_wait 60 test -e "$T/ready" || { # written whole: renamed into place
		echo "${0##*/}: allocctld did not start; its log:" >&2
		tail -n 20 "$T/log" >&2
		return 1
	}
	HTTP=$(sed -n 's/^http=//p' "$T/ready")
}

stop_daemon() {
	kill "$DPID"
	wait "$DPID" 2>/dev/null || true
	DPID=
}

ctl() { "$BUILD/tests/ctlclient" --socket "$SOCK" "$@"; }
listed() { ctl --timeout 30000 list | grep -c '^process ' || true; }
listed_at_least() { [ "$(listed)" -ge "$1" ]; }
wait_listed() {
	local end=$((SECONDS + ${2:-300}))
	until listed_at_least "$1"; do
		if [ "$SECONDS" -ge "$end" ]; then
			echo "${0##*/}: the daemon lists $(listed) processes after ${2:-300} s, not $1" >&2
			return 1
		fi
		sleep 0.1
	done
}

mass() {
	rm -f "$T/mass.ready"
	"$BUILD/tests/massseg" --dir "$T/segs" --ready "$T/mass.ready" "$@" >/dev/null 2>&1 &
	PIDS+=($!)
	bench_wait 600 test -e "$T/mass.ready"
}
