#!/bin/bash
# run-tests.sh — run every test suite through prove; its summary line closes `make test`.
# Environment: ROOT (source tree), BUILD (absolute build dir), SAN (asan|tsan|empty),
# TESTS (optional: a space-separated subset of test paths to run), VERBOSE=1 (prove -v:
# every test's TAP and output as it runs; otherwise a failed test's reason is shown under
# it: see scripts/tap-exec.sh), SUITE_TIMEOUT (seconds a suite may run, default 1800),
# TEST_LONG=1 (the long forms of the soak, programs and stress suites: tests/README.md).
set -euo pipefail
: "${ROOT:?}" "${BUILD:?}"
export ROOT BUILD SAN="${SAN:-}"
export LIBALLOC_SO="$BUILD/liballoc.so"
export TESTS_BIN="$BUILD/tests"
# Debian's python3 (the test group installs it, with CPython's test suite), not whatever
# python3 comes first in PATH: a version manager's shim (pyenv) runs a few shell scripts
# per call, 8 s of wall time per call at a load of 20 on 2 cores against 0.4 s, and the
# JSON checks call python3 hundreds of times.
if [ -x /usr/bin/python3 ]; then
	mkdir -p "$BUILD/run/bin"
	ln -sfn /usr/bin/python3 "$BUILD/run/bin/python3"
	export PATH="$BUILD/run/bin:$PATH"
fi
# Segments of processes started by the tests go to a private run directory.
export LIBALLOC_RUN_DIR="${LIBALLOC_RUN_DIR:-$BUILD/run/segments}"
mkdir -p "$LIBALLOC_RUN_DIR" && chmod 700 "$LIBALLOC_RUN_DIR"

# TSan: known non-races are suppressed with their reasons (tests/tsan.supp); any report
# fails the program. Criterion cannot start its workers under TSan ("Could not initialize
# inheritable arena"), so TSan runs the shell-driven suites only (stress, daemon, CLI).
# Programs the tests run as another uid read the suppressions too: from a checkout under a
# 0700 home they cannot reach $ROOT, and TSan stops at start ("failed to read suppressions
# file"), so they read a world-readable copy that goes when the run ends.
tsan_supp=$(mktemp /tmp/liballoc-tsan-supp.XXXXXX)
trap 'rm -f "$tsan_supp"' EXIT
cp "$ROOT/tests/tsan.supp" "$tsan_supp"
chmod 644 "$tsan_supp"
export TSAN_OPTIONS="suppressions=$tsan_supp halt_on_error=1 ${TSAN_OPTIONS:-}"
export ASAN_OPTIONS="detect_leaks=1 ${ASAN_OPTIONS:-}"

list=()
if [ -n "${TESTS:-}" ]; then
	read -r -a list <<<"$TESTS"
else
	for f in "$BUILD"/tests/criterion/*; do
		[ -x "$f" ] || continue
		[ "$SAN" = tsan ] && continue
		list+=("$f")
	done
	for f in "$ROOT"/tests/*/*.bats; do
		[ -e "$f" ] || continue
		# Suites marked "# san: skip" do not run in sanitizer builds (they preload
		# liballoc.so into real programs, which a sanitized build does not produce: its
		# entry points are prefixed, la_malloc, so a preloaded copy serves none of the
		# program's allocations; tests/policy/inprocess.bats under TSan fails all 8
		# tests that way, with no race reported: README.md, limits).
		if [ -n "$SAN" ] && grep -q '^# san: skip' "$f"; then continue; fi
		list+=("$f")
	done
fi
export VERBOSE="${VERBOSE:-0}"
if [ "$VERBOSE" = 1 ]; then show=(--verbose); else show=(--failures --comments); fi
echo "running ${#list[@]} suites${SAN:+ ($SAN)}"
# not exec: the EXIT trap removes the suppressions copy; set -e keeps prove's status
prove --exec "$ROOT/scripts/tap-exec.sh" --timer "${show[@]}" "${list[@]}"
