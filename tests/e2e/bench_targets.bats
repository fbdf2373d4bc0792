#!/usr/bin/env bats
# bench/run.py: the issue targets (the figures a reader of `make bench` takes as met or missed)
# and the order of its interleaved rounds.

setup() {
	ROOT="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"
}

# check SCENARIO METRIC LIBALLOC GLIBC: prints the target's text and verdict for a fake run
# where every allocator but liballoc reads GLIBC.
check() {
	python3 - "$ROOT/bench" "$@" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import run
sc, metric, la, other = sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5])
tgt = run.ISSUE_TARGETS.get((sc, metric))
if tgt is None:
    print("none")
    sys.exit(0)
ok = tgt[1](lambda s, m, a: la if a == "liballoc" else other)
print("%s: %s" % (tgt[0], ok))
PY
}

# expect SCENARIO METRIC LIBALLOC GLIBC VERDICT: check's output is VERDICT.
expect() {
	run check "$1" "$2" "$3" "$4"
	[ "$status" -eq 0 ]
	[ "$output" = "$5" ]
}

@test "targets: peak RSS is judged at ten times the working set, at most glibc's (#23)" {
	for sc in larson-2t-10k larson-1t-10k churn-1t-100k; do
		expect "$sc" "peak RSS" 10.0 11.0 "<= glibc (#23): True"
		expect "$sc" "peak RSS" 12.0 11.0 "<= glibc (#23): False"
	done
}

@test "targets: the 2-3 MiB rows' peak RSS target is retired; their throughput target stays" {
	for sc in larson-2t larson-1t churn-1t; do
		expect "$sc" "peak RSS" 3.0 2.0 "none"
		expect "$sc" "throughput" 2.0 1.0 ">= glibc, >= 0.8x best of je/tc/mi (#3): True"
	done
}

@test "rounds: each starts one allocator later, so every allocator runs once in each position" {
	run python3 - "$ROOT/bench" <<'PY'
import sys, types
sys.path.insert(0, sys.argv[1])
import run
seen = []

def fake(argv, env, timeout, cwd=None, stdin_path=None):
    seen.append(env.get("LD_PRELOAD"))
    res = run.RunResult()
    res.failure = "fake"
    return res

run.run_process = fake
args = types.SimpleNamespace(root=".", build=".", quick=True, rounds=4)
ctx = run.Context(args)
try:
    allocs = [run.Allocator(n, "/fake/%s.so" % n, None) for n in "ABC"]
    suite = run.Suite(ctx, allocs, ["larson-1t-10k"])
    suite.progress = lambda text: None
    suite.run_workloads()
finally:
    ctx.cleanup()
print(" ".join(p[6] for p in seen))
PY
	[ "$status" -eq 0 ]
	[ "$output" = "A B C B C A C A B A B C" ]
}

# cpython_rows_env ONLY RUN ROUNDS: runs the bench's suite for ONLY (its method RUN), with
# run_process faked, twice (the caller's environment with and without a 150-byte variable)
# and 20 files left in the scratch directory as earlier rows leave them; each python3 run
# must have an empty working directory of its own and, LD_PRELOAD aside, the timed cpython
# row's fixed environment (cpython_env). Prints "same N" (N runs seen) or "skip".
cpython_rows_env() {
	run python3 - "$ROOT/bench" "$@" <<'PY'
import os, sys, types
sys.path.insert(0, sys.argv[1])
import run
only, method, rounds = sys.argv[2], sys.argv[3], int(sys.argv[4])
if not os.access(run.PYTHON, os.X_OK) or not os.path.exists("/usr/lib/python3.11/test/test_dict.py"):
    print("skip")
    sys.exit(0)
seen = []

def fake(argv, env, timeout, cwd=None, stdin_path=None):
    if run.PYTHON in argv:
        seen.append((dict(env), sorted(os.listdir(cwd)), cwd, argv[argv.index(run.PYTHON):]))
    res = run.RunResult()
    res.failure = "fake"
    return res

run.run_process = fake
run.shutil.which = lambda name: "/usr/bin/" + name  # the callgrind rows run only where valgrind is
args = types.SimpleNamespace(root=".", build=".", quick=True, rounds=rounds)
envs = []
for pad in ("", "x" * 150):
    os.environ["BENCH_TEST_PADDING"] = pad
    ctx = run.Context(args)
    try:
        for i in range(20):  # what earlier rows leave in the scratch directory
            open(os.path.join(ctx.tmp, "callgrind.row.%d" % i), "w").close()
        allocs = [run.Allocator("glibc", None, None), run.Allocator("B", "/fake/B.so", None)]
        suite = run.Suite(ctx, allocs, [only])
        suite.progress = lambda text: None
        suite.record_failure = lambda *a: None
        getattr(suite, method)()
        timed = run.cpython_env(ctx, allocs[0])
    finally:
        ctx.cleanup()
    for env, listing, cwd, argv in seen:
        assert argv[:len(run.CPYTHON_TEST)] == run.CPYTHON_TEST, argv
        assert listing == [], listing
        assert cwd != ctx.tmp
        assert "BENCH_TEST_PADDING" not in env
        # LD_PRELOAD aside (the allocator's, or valgrind's client's), the timed row's
        assert {k: v for k, v in env.items() if k != "LD_PRELOAD"} == timed, (env, timed)
        env.pop("LD_PRELOAD", None)
        env["LIBALLOC_RUN_DIR"] = len(env["LIBALLOC_RUN_DIR"])
        envs.append(sorted(env.items()))
    seen.clear()
assert all(e == envs[0] for e in envs), envs
print("same", len(envs))
PY
}

@test "cpython row: the same environment and an empty working directory, whatever ran before" {
	cpython_rows_env cpython run_cpython 2
	[ "$status" -eq 0 ]
	[ "$output" = "same 8" ] || [ "$output" = "skip" ]
}

@test "cpython-dict instructions row: the timed row's fixed environment and an empty working directory" {
	cpython_rows_env instructions run_callgrind_programs 1
	[ "$status" -eq 0 ]
	[ "$output" = "same 4" ] || [ "$output" = "skip" ]
}
