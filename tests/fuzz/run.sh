#!/bin/bash
# run.sh SECONDS FUZZER... — run each libFuzzer target for SECONDS on its working corpus
# ($FUZZ_DIR/corpus/<name>, seeded from tests/fuzz/corpus/<name>), one after the other.
# Fails (exit 1) when any run finds a crash, leak, timeout or OOM, or does not start.
# Appends "<date> <fuzzer> <seconds>s <executions> execs <exec/s> exec/s <status>" lines to
# $FUZZ_DIR/results.txt and prints them. FUZZ_JOBS=N runs N fuzzers at a time (default 1);
# FUZZ_NICE=1 runs them under nice.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${FUZZ_DIR:?}"
secs=${1:?seconds}
shift
[ $# -gt 0 ] || set -- fuzz_frame fuzz_frame_live fuzz_segment fuzz_cli_parse fuzz_units
jobs=${FUZZ_JOBS:-1}
nice=()
[ "${FUZZ_NICE:-0}" = 1 ] && nice=(nice -n 10)

# fuzz_frame_live is fuzz_frame with a live process visible to the daemon (FUZZ_FRAME_LIVE).
binary() { [ "$1" = fuzz_frame_live ] && echo fuzz_frame || echo "$1"; }

run_one() {
	local f=$1 bin corpus="$FUZZ_DIR/corpus/$1" art="$FUZZ_DIR/artifacts/$1/"
	local log="$FUZZ_DIR/$1.log" live=0
	bin="$FUZZ_DIR/$(binary "$f")"
	[ "$f" = fuzz_frame_live ] && live=1
	mkdir -p "$corpus" "$art"
	cp -n "$here/corpus/$(binary "$f")"/* "$corpus/" 2>/dev/null
	local dict=()
	[ -f "$here/$f.dict" ] && dict=(-dict="$here/$f.dict")
	local t0=$SECONDS tmp
	# the targets' scratch files (segments, the fake's run directory): removed afterwards,
	# also when a run ends without running its atexit handlers (crash, SIGINT)
	tmp=$(mktemp -d /dev/shm/liballoc-fuzz.XXXXXX)
	FUZZ_TMP=$tmp FUZZ_FRAME_LIVE=$live "${nice[@]}" "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$art" "${dict[@]}" "$corpus" >"$log" 2>&1
	local rc=$? took=$((SECONDS - t0))
	rm -rf "$tmp"
	local runs rate status=ok
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
	if [ $rc -eq 72 ] && grep -q 'run interrupted' "$log"; then
		status="interrupted (SIGINT) after ${took}s, no finding"
	elif [ $rc -ne 0 ] || grep -qE '^==[0-9]+==ERROR|SUMMARY: (Address|Undefined|Leak)Sanitizer|ALARM: working on the last Unit|out-of-memory' "$log"; then
		status="FAILED rc=$rc (see $log, inputs in $art)"
	fi
	local line
	line="$(date -u +%FT%TZ) $f ${took}s ${runs:-0} execs ${rate:-0} exec/s $status"
	echo "$line" | tee -a "$FUZZ_DIR/results.txt"
	[ "$status" = ok ] || [ "${status#interrupted}" != "$status" ]
}

fail=0
pids=()
for f in "$@"; do
	if [ ! -x "$FUZZ_DIR/$(binary "$f")" ]; then
		echo "run.sh: $FUZZ_DIR/$(binary "$f") not built" >&2
		fail=1
		continue
	fi
	run_one "$f" &
	pids+=($!)
	if [ ${#pids[@]} -ge "$jobs" ]; then
		wait "${pids[0]}" || fail=1
		pids=("${pids[@]:1}")
	fi
done
for p in "${pids[@]}"; do wait "$p" || fail=1; done
exit $fail
