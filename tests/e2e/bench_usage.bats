#!/usr/bin/env bats
# The benchmark's programs (bench/*.c, built into $BUILD/bench by make test as by make bench)
# and its runner (bench/run.py) refuse bad input before measuring anything: exit 2, a line
# naming the argument and what was wrong, and the usage line. Nothing is preloaded.
# san: skip
bats_require_minimum_version 1.5.0

: "${BUILD:?run through make test (BUILD unset)}"
ROOT="${ROOT:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}"
BENCH="$BUILD/bench"

# The workload programs: every bench/*.c but the library, the preload shim and ctl_client.
programs() {
	local f n
	for f in "$ROOT"/bench/*.c; do
		n=$(basename "$f" .c)
		case $n in benchlib | glibc_shim | ctl_client) continue ;; esac
		echo "$n"
	done
}

# stderr_of PROGRAM ARGS...: PROGRAM's stderr in $err, its exit status in $rc (stdout
# dropped). Not bats' `run`: the suite runs ~250 programs, and `run --separate-stderr`
# cost twice a plain command substitution each (session 41: 300 against 158 ms a call at
# load 13; the suite 17 s on a quiet machine).
stderr_of() {
	rc=0
	err=$("$@" 2>&1 >/dev/null) || rc=$?
}

# run PROGRAM ARGS... and check that it refused them: exit 2, the usage line last, and
# a first line "<program>: <what>" containing $want.
refused() {
	local want=$1 prog=$2 err rc
	shift 2
	stderr_of timeout 20 "$BENCH/$prog" "$@"
	[ "$rc" = 2 ] || { echo "$prog $*: exit status $rc, not 2: $err"; return 1; }
	[[ "${err%%$'\n'*}" == "$BENCH/$prog: "*"$want"* ]] ||
		{ echo "$prog $*: '${err%%$'\n'*}' does not say '$want'"; return 1; }
	[[ "${err##*$'\n'}" == "usage: $BENCH/$prog "* ]] ||
		{ echo "$prog $*: no usage line: $err"; return 1; }
}

first_arg() { [ "$1" = sizes ] && echo sweep; }

@test "every bench program is built (make test builds them)" {
	local n
	for n in $(programs); do
		[ -x "$BENCH/$n" ] || { echo "missing $BENCH/$n"; false; }
	done
}

@test "every bench program refuses a non-number, zero, a sign, naming the argument" {
	local n
	for n in $(programs); do
		refused "bad " "$n" $(first_arg "$n") x
		refused "bad " "$n" $(first_arg "$n") 12q
		refused "bad " "$n" $(first_arg "$n") -3
		refused "out of range: 1 to" "$n" $(first_arg "$n") 0
	done
	refused "bad SLOTS 'x': a whole number" churn x
	refused "bad OPS '1.5': a whole number" churn 10 1.5
	refused "bad ROUNDS 'x'" sizes aligned x
}

@test "every bench program refuses a number too large, suffix or not (it wrapped before)" {
	local n
	for n in $(programs); do
		refused "out of range" "$n" $(first_arg "$n") 99999999999999999999
		refused "out of range" "$n" $(first_arg "$n") 9999999999g
		refused "out of range" "$n" $(first_arg "$n") 1100g
	done
	refused "SLOTS '99999999999g' out of range: 1 to 1099511627776" churn 99999999999g
}

@test "every bench program refuses more arguments than its usage line has" {
	local n words args err rc
	for n in $(programs); do
		stderr_of "$BENCH/$n" $(first_arg "$n") x
		[ "$rc" = 2 ] || { echo "$n x: exit status $rc, not 2: $err"; false; }
		words=$(sed 's/^usage: [^ ]* //; s/[][]/ /g' <<<"${err##*$'\n'}" | wc -w)
		args=()
		for ((i = 0; i <= words; i++)); do args+=(1); done
		[ "$n" = sizes ] && args[0]=sweep
		refused "too many arguments ($((words + 1)); at most $words)" "$n" "${args[@]}"
	done
}

@test "the programs' own limits are refused, not silently changed" {
	refused "BATCH '2' out of range: 0 to 1" medsizes 10 100 64 1 2
	refused "MAXMB 2 is below MINMB 4" large_random 1 1 4 2
	refused "TOUCH '4' out of range: 1 to 3" large_random 1 1 2 4 4
	refused "MAXSIZE 32 is below MINSIZE 64" mech_remote 1 1 1 64 32
	refused "MAXSIZE '8' out of range: 16 to" larson 1 1 1 1 8
	refused "MAXSIZE '8' out of range: 16 to" xmalloc 1 1 8
	refused "MAXSIZE '8' out of range: 16 to" xthreads 1 1 8
	refused "MAXVARS '7' out of range: 8 to 65536" logicmin 1 7
	refused "MAXLIFE '999' out of range: 1000 to" frag 1 999
	refused "MAXLEN is at least 8" strbuild 1 1 7
	run -2 --separate-stderr "$BENCH/sizes" bogus 1
	[ "$stderr" = "usage: $BENCH/sizes sweep|aligned ROUNDS" ]
}

@test "medsizes takes BATCH 0, as its usage says (it refused a 0 before)" {
	run -0 timeout 20 "$BENCH/medsizes" 10 100 64 1 0
	[[ "$output" == *"ops_per_sec="* ]]
}

@test "ctl_client: usage without a socket and command, and a socket it cannot reach" {
	run -2 --separate-stderr "$BENCH/ctl_client"
	[[ "$stderr" == "usage: $BENCH/ctl_client SOCKET set|trim|list|setall ..." ]]
	run -1 --separate-stderr "$BENCH/ctl_client" "$BATS_TEST_TMPDIR/none.sock" list
	[[ "$stderr" == "ctl_client: cannot connect to $BATS_TEST_TMPDIR/none.sock: "* ]]
}

# bench/run.py's options: a refused one exits 2 before anything runs, and the last run's
# results are left as they were.
runpy_refused() {
	local want=$1
	shift
	mkdir -p "$BATS_TEST_TMPDIR/build/bench"
	echo '{"last": "run"}' >"$BATS_TEST_TMPDIR/build/bench/results.json"
	run -2 --separate-stderr timeout 60 python3 "$ROOT/bench/run.py" --root "$ROOT" \
		--build "$BATS_TEST_TMPDIR/build" "$@"
	[[ "$stderr" == *"run.py: error: $want"* ]] || { echo "$*: $stderr"; return 1; }
	[[ "$stderr" != *"bench: "* ]] || { echo "$* ran: $stderr"; return 1; }
	[ "$(cat "$BATS_TEST_TMPDIR/build/bench/results.json")" = '{"last": "run"}' ]
}

@test "run.py refuses an --only that names no row (it ran nothing and wrote an empty results.json)" {
	runpy_refused "--only: 'nosuchrow' names no row (a prefix of: larson-2t," --only nosuchrow
	runpy_refused "--only: 'zzz' names no row" --quick --only larson,zzz
}

@test "run.py refuses an unknown allocator (it was left out without a word)" {
	runpy_refused "--allocators: unknown allocator 'foo' (known: glibc, jemalloc, tcmalloc, mimalloc, liballoc)" \
		--allocators glibc,foo
}

@test "run.py refuses a bad --rounds, an unknown option, and --reuse without a last run" {
	runpy_refused "--rounds -1: a count of rounds" --rounds -1
	runpy_refused "argument --rounds: invalid int value: 'x'" --rounds x
	runpy_refused "unrecognized arguments: --bogus" --bogus
	rm -rf "$BATS_TEST_TMPDIR/none"
	run -2 --separate-stderr python3 "$ROOT/bench/run.py" --root "$ROOT" \
		--build "$BATS_TEST_TMPDIR/none" --reuse
	[[ "$stderr" == *"run.py: error: --reuse: cannot read the last run's $BATS_TEST_TMPDIR/none/bench/results.json: "* ]]
}

@test "run.py refuses BENCH_POLICY_ONLY naming no part and a BENCH_POLICY_RUNS that is no count" {
	# an unknown part ran none of the policy scenarios; a bad count failed the whole section
	BENCH_POLICY_ONLY=oom,bursy runpy_refused "BENCH_POLICY_ONLY: unknown part 'bursy' (oom, bursty, idle)" \
		--only policy
	BENCH_POLICY_RUNS=x runpy_refused "BENCH_POLICY_RUNS: 'x' is not a count of runs, 1 or more" \
		--only policy
	BENCH_POLICY_RUNS=0 runpy_refused "BENCH_POLICY_RUNS: '0' is not a count of runs" --only policy
}
