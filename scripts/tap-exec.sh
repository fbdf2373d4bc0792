#!/bin/bash
# tap-exec.sh FILE — run one suite so that it prints TAP on stdout (prove's --exec).
#   *.bats     bats --tap (each test's time shown with VERBOSE=1), with the output of a
#              failed test's last `run`
#   *.preload  a Criterion binary run under LD_PRELOAD=$LIBALLOC_SO
#   otherwise  a Criterion binary
# make test runs prove with --failures --comments: the reason of every failure is shown
# in the normal output. So that nothing else is, only what explains a failure reaches
# prove as comments (unless VERBOSE=1, where prove -v shows everything): what bats prints
# under a failed test (the failed command, where, the test's output), Criterion's failure
# block (turned into comments) and, when a Criterion suite fails, its stderr (the failed
# tests' own output, crash reports). A suite still running after SUITE_TIMEOUT seconds
# (default 1800, plus twice SOAK_SECONDS; none with TEST_LONG=1; 0: no limit) is killed,
# and says so.
set -uo pipefail
f="$1"
if [ "${TEST_LONG:-0}" = 1 ]; then
	limit=${SUITE_TIMEOUT:-0}
else
	limit=${SUITE_TIMEOUT:-$((1800 + 2 * ${SOAK_SECONDS:-0}))}
fi

run_suite() {
	local t=()
	[ "$limit" != 0 ] && t=(timeout -k 10 "$limit")
	case "$f" in
	*.bats) "${t[@]}" bats --tap --timing --print-output-on-failure "$f" ;;
	*.preload) "${t[@]}" env LD_PRELOAD="$LIBALLOC_SO" "$f" --tap=/dev/stdout --color=never ;;
	*) "${t[@]}" "$f" --tap=/dev/stdout --color=never ;;
	esac
}

# Comments pass only under a failed test; a failed Criterion test's indented YAML block
# becomes comments; everything else (test lines, plan, bail out, stray output) as it is.
only_failures() {
	awk '
		/^not ok/ { fail = 1; print; fflush(); next }
		/^ok/ { fail = 0; print; fflush(); next }
		/^# tap-exec:/ { print; fflush(); next }
		/^#/ { if (fail) { print; fflush() } next }
		/^  / { if (fail) { print "# " substr($0, 3); fflush() } next }
		{ print; fflush() }'
}

say() { printf '# tap-exec: %s\n' "$*"; }

if [ "${VERBOSE:-0}" = 1 ]; then
	run_suite
	rc=$?
elif [[ "$f" == *.bats ]]; then
	run_suite | only_failures
	rc=${PIPESTATUS[0]}
else
	err=$(mktemp)
	trap 'rm -f "$err"' EXIT
	run_suite 2>"$err" | only_failures
	rc=${PIPESTATUS[0]}
	if [ "$rc" != 0 ] && [ -s "$err" ]; then
		say "stderr of $f (last 200 lines):"
		tail -n 200 "$err" | sed 's/^/# /'
	fi
fi
if [ "$rc" = 124 ] && [ "$limit" != 0 ]; then
	say "$f did not finish in $limit s (SUITE_TIMEOUT): killed"
fi
exit "$rc"
