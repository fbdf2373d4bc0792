#!/usr/bin/env python3
"""run.py — the runner behind `make bench` (issue 8). Python 3 standard library only.

Runs every scenario under every allocator, preloaded the same way (LD_PRELOAD; glibc is
the process without a preload), in interleaved rounds, each starting one allocator later (A B C D E, B C D E A, ...), and
reports medians with min-max, ratios against glibc and against the best competitor.
Timing runs and strace runs are separate (strace distorts timing). Fast-path instruction
counts come from callgrind. A crashed or hung run (timeout per run) becomes a failure in
its cell; the suite always goes on. Output: a table on stdout, results.csv and
results.json plus one PNG chart per scenario group in BUILD/bench, and with --results-md
the Markdown report (bench/RESULTS.md).

usage: run.py --root DIR --build DIR [--quick] [--rounds N] [--only NAME,...]
              [--allocators NAME,...] [--results-md FILE] [--reuse]
"""

import argparse
import csv
import datetime
import hashlib
import json
import math
import os
import platform
import random
import re
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import policy_bench  # issue 20: OOM avoided, bursty service, daemon at idle

LIBDIR = "/usr/lib/x86_64-linux-gnu"
COMPETITORS = [
    ("glibc", None, "libc6"),
    ("jemalloc", LIBDIR + "/libjemalloc.so.2", "libjemalloc2"),
    ("tcmalloc", LIBDIR + "/libtcmalloc_minimal.so.4", "libtcmalloc-minimal4"),
    ("mimalloc", LIBDIR + "/libmimalloc.so.2", "libmimalloc2.0"),
]
# Environment variables that would change an allocator's behaviour behind our back.
SCRUB_PREFIXES = ("LD_PRELOAD", "GLIBC_TUNABLES", "MALLOC_", "LIBALLOC_", "MIMALLOC_",
                  "TCMALLOC_", "JE_MALLOC_CONF", "MALLOC_CONF")


# ---------------------------------------------------------------------------------------
# Running one process
# ---------------------------------------------------------------------------------------

class RunResult:
    """Outcome of one process: exit status, wall time, rusage, output."""

    def __init__(self):
        self.ok = False
        self.failure = None  # short reason when not ok
        self.wall = 0.0
        self.maxrss_kb = 0
        self.minflt = 0
        # user + system CPU seconds: wait4's rusage of GNU time includes the program it
        # waited for (to the microsecond; time's own share is the same for every allocator)
        self.cpu = 0.0
        self.stdout = ""
        self.stderr = ""
        self.values = {}  # key=value pairs parsed from stdout

    def value(self, key):
        v = self.values.get(key)
        if v is None:
            return None
        try:
            return float(v)
        except ValueError:
            return None


def parse_kv(text):
    values = {}
    for line in text.splitlines():
        for tok in line.split():
            if "=" in tok:
                k, _, v = tok.partition("=")
                values[k] = v
    return values


TIME_BIN = "/usr/bin/time"


def run_process(argv, env, timeout, cwd=None, stdin_path=None):
    """Run argv in its own process group; kill the group after timeout seconds.
    Peak RSS and minor faults come from GNU time, which runs unpreloaded and starts the
    program through env(1) with LD_PRELOAD: Linux carries the RSS high-water mark of a
    forked parent across exec, so wait4's ru_maxrss of a child forked from this Python
    process would never be below Python's own size."""
    res = RunResult()
    time_out = None
    if os.access(TIME_BIN, os.X_OK):
        fd, time_out = tempfile.mkstemp(prefix="time.")
        os.close(fd)
        inner = ["env"] + (["LD_PRELOAD=" + env["LD_PRELOAD"]] if "LD_PRELOAD" in env else [])
        env = {k: v for k, v in env.items() if k != "LD_PRELOAD"}
        argv = [TIME_BIN, "-f", "rusage %M %R", "-o", time_out, "--"] + inner + list(argv)
    try:
        return run_process_raw(res, argv, env, timeout, cwd, stdin_path, time_out)
    finally:
        if time_out:
            os.unlink(time_out)


def run_process_raw(res, argv, env, timeout, cwd, stdin_path, time_out):
    out = tempfile.TemporaryFile(mode="w+b")
    err = tempfile.TemporaryFile(mode="w+b")
    stdin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL
    timed_out = threading.Event()
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=stdin, stdout=out, stderr=err,
                                start_new_session=True)
    except OSError as e:
        res.failure = "cannot start: %s" % e.strerror
        return res
    finally:
        if stdin_path:
            stdin.close()

    def kill_group():
        timed_out.set()
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    timer = threading.Timer(timeout, kill_group)
    timer.start()
    try:
        while True:
            try:
                _, status, ru = os.wait4(proc.pid, 0)
                break
            except InterruptedError:
                continue
    finally:
        timer.cancel()
    res.wall = time.monotonic() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    # anything the workload left behind in its group goes too
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    res.maxrss_kb = ru.ru_maxrss
    res.minflt = ru.ru_minflt
    res.cpu = ru.ru_utime + ru.ru_stime
    out.seek(0)
    err.seek(0)
    res.stdout = out.read().decode(errors="replace")
    res.stderr = err.read().decode(errors="replace")
    out.close()
    err.close()
    res.values = parse_kv(res.stdout)
    if time_out:
        # GNU time reports the command's own status; its exit code is 128+signal or the
        # command's exit code.
        with open(time_out, errors="replace") as f:
            text = f.read()
        m = re.search(r"^rusage (\d+) (\d+)", text, re.M)
        if m:
            res.maxrss_kb, res.minflt = int(m.group(1)), int(m.group(2))
        m = re.search(r"terminated by signal (\d+)", text)
        if m and not timed_out.is_set():
            sig = int(m.group(1))
            res.ok = False
            res.failure = (signal.Signals(sig).name
                           if sig in signal.Signals._value2member_map_ else "signal %d" % sig)
            if "is not" in res.stderr and "aligned" in res.stderr:
                res.failure = "misaligned block"
            return res
    if timed_out.is_set():
        res.failure = "timeout %ds" % timeout
    elif os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        res.failure = name
        if "is not" in res.stderr and "aligned" in res.stderr:
            res.failure = "misaligned block"
    elif os.WEXITSTATUS(status) != 0:
        res.failure = "exit %d" % os.WEXITSTATUS(status)
    else:
        res.ok = True
    return res


# ---------------------------------------------------------------------------------------
# Allocators and environments
# ---------------------------------------------------------------------------------------

class Allocator:
    def __init__(self, name, lib, package):
        self.name = name
        self.lib = lib  # path to preload, None for glibc
        self.package = package


def exports_malloc(path):
    """True if the shared object defines malloc (an empty or broken build does not)."""
    try:
        out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True,
                             text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return re.search(r" [TtWi] malloc$", out, re.M) is not None


def find_allocators(build, wanted):
    allocs = []
    for name, lib, pkg in COMPETITORS:
        if lib and not os.path.exists(lib):
            print("bench: %s not found (%s): column left out" % (name, lib), file=sys.stderr)
            continue
        allocs.append(Allocator(name, lib, pkg))
    la = os.path.join(build, "liballoc.so")
    if os.path.exists(la) and exports_malloc(la):
        allocs.append(Allocator("liballoc", la, None))
    else:
        print("bench: %s missing or not exporting malloc: liballoc column left out" % la,
              file=sys.stderr)
    if wanted:
        allocs = [a for a in allocs if a.name in wanted]
    return allocs


def bench_run_dir(tmp):
    """The private run directory (0700) where the preloaded programs publish their segments:
    in /dev/shm (tmpfs), where liballoc publishes by default (/dev/shm/liballoc-<uid>),
    when it is there to write in; else in the scratch directory. The scratch directory is wherever TMPDIR says
    (here /tmp on ext4), and a process's publication costs what the run directory's file
    system charges for a file created and removed: on ext4 a fork loop's children each
    spent ~4 % of their CPU in the inode allocator's scan past the inodes its earlier
    children freed (recently_deleted), which a default setup never meets (bench/README.md,
    the fork loop)."""
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK):
        try:
            if os.statvfs(shm).f_bavail > 0:
                return tempfile.mkdtemp(prefix="liballoc-bench-segments.", dir=shm)
        except OSError:
            pass
    path = os.path.join(tmp, "segments")
    os.makedirs(path, mode=0o700)
    return path


class Context:
    """Everything a scenario needs: paths, mode, the scratch directory."""

    def __init__(self, args):
        self.root = os.path.abspath(args.root)
        self.build = os.path.abspath(args.build)
        self.bin = os.path.join(self.build, "bench")
        self.out = os.path.join(self.build, "bench")
        self.quick = args.quick
        self.rounds = args.rounds or (1 if args.quick else 5)
        self.timeout = 60 if args.quick else 240
        self.tmp = tempfile.mkdtemp(prefix="liballoc-bench.")
        self.run_dir = bench_run_dir(self.tmp)
        base = {k: v for k, v in os.environ.items() if not k.startswith(SCRUB_PREFIXES)}
        base["LIBALLOC_RUN_DIR"] = self.run_dir
        self.base_env = base

    def empty_dir(self):
        """A new empty directory to run a counted program in: what a program finds in its
        working directory is work it does (CPython's test runner lists it: ~+1.2M
        instructions with ~100 files), so no run may see the output files of the runs
        before it."""
        return tempfile.mkdtemp(prefix="cwd.", dir=self.tmp)

    def env(self, alloc, extra=None, preload=None, base=None):
        env = dict(self.base_env if base is None else base)
        lib = preload if preload is not None else (alloc.lib if alloc else None)
        if lib:
            env["LD_PRELOAD"] = lib
        if extra:
            env.update(extra)
        return env

    def prog(self, name):
        return os.path.join(self.bin, name)

    def cleanup(self):
        shutil.rmtree(self.tmp, ignore_errors=True)
        shutil.rmtree(self.run_dir, ignore_errors=True)


# ---------------------------------------------------------------------------------------
# Scenarios
# ---------------------------------------------------------------------------------------

class Metric:
    """One row of the table: a number taken from a run, and which direction is better."""

    def __init__(self, key, label, unit, higher_better, scale=1.0, source="stdout"):
        self.key = key  # stdout key, or rusage field for source="rusage"/"wall"
        self.label = label
        self.unit = unit
        self.higher_better = higher_better
        self.scale = scale
        self.source = source

    def extract(self, res):
        if self.source == "rusage":
            v = float(getattr(res, self.key))
        elif self.source == "wall":
            v = res.wall
        elif self.source == "cpu":
            v = res.cpu
        else:
            v = res.value(self.key)
        return None if v is None else v * self.scale


KB_TO_MIB = 1.0 / 1024.0
PEAK_RSS = Metric("maxrss_kb", "peak RSS", "MiB", False, KB_TO_MIB, "rusage")
# larson and churn print their VmHWM at exit (an atexit handler). /proc/PID/status sums the
# kernel's per-CPU RSS counters; ru_maxrss reads them unsummed, and for these programs of a
# few MiB it was off by up to 330 KiB, by different amounts per allocator (the threads run
# on different CPUs). Their ru_maxrss stays as a second row.
EXACT_PEAK_RSS = Metric("peak_rss_kb", "peak RSS", "MiB", False, KB_TO_MIB)
RUSAGE_PEAK_RSS = Metric("maxrss_kb", "peak RSS (ru_maxrss)", "MiB", False, KB_TO_MIB, "rusage")


class Scenario:
    """A workload program run under every allocator.
    argv(ctx) -> list; env(ctx, alloc) -> extra env; metrics: rows it produces.
    strace: None or (trace expression, [syscalls to report]) for a separate strace run."""

    def __init__(self, name, group, what, argv, metrics, env=None, strace=None,
                 check=None, note=None, rounds=None, min_rounds=None):
        self.rounds = rounds  # at most this many rounds (long runs), else the suite's
        # at least this many, also in a quick run (short rows whose figures vary several
        # times over from run to run for every allocator: one round would decide a median)
        self.min_rounds = min_rounds
        self.name = name
        self.group = group
        self.what = what
        self.argv = argv
        # every workload's CPU time: the time geomean is taken over these rows
        self.metrics = metrics + ([CPU] if CPU not in metrics else [])
        self.env = env
        self.strace = strace
        self.check = check
        self.note = note


# Mechanism 1 pinning: the issue's glibc setting, the same for liballoc, defaults elsewhere.
PIN_NOTE = ("thresholds pinned: glibc GLIBC_TUNABLES=glibc.malloc.mmap_threshold=1048576; "
            "liballoc LIBALLOC_MMAP_THRESHOLD=1048576 LIBALLOC_TRIM_THRESHOLD=131072; "
            "jemalloc, tcmalloc and mimalloc have no mmap/trim threshold equivalent: defaults")


MIMALLOC_ALIGN_NOTE = (
    "sizes-aligned: Debian's mimalloc 2.0.9 returns blocks that are not aligned as asked "
    "(e.g. aligned_alloc(256, 256) gives an address = 0x80 mod 256), a known upstream "
    "regression (microsoft/mimalloc#700, fixed after 2.0.9); its cell is a failure, not "
    "a number")


def pinned_env(ctx, alloc):
    if alloc.name == "glibc":
        return {"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=1048576"}
    if alloc.name.startswith("liballoc"):
        return {"LIBALLOC_MMAP_THRESHOLD": "1048576", "LIBALLOC_TRIM_THRESHOLD": "131072"}
    return {}


# The idle-after-sweep scenario waits 4 s: the time-based returns are set to 1 s where an
# allocator has them (liballoc's decay pass, jemalloc's dirty and muzzy decay), so that
# the run sees them; glibc trims on free, tcmalloc and mimalloc keep their defaults.
DECAY_NOTE = ("idle-after-sweep, steady-trickle: liballoc LIBALLOC_DECAY_MS=1000 (default "
              "10 s), jemalloc MALLOC_CONF=dirty_decay_ms:1000,muzzy_decay_ms:1000 (default "
              "10 s); glibc, tcmalloc and mimalloc: defaults")


def decay_env(ctx, alloc):
    if alloc.name.startswith("liballoc"):
        return {"LIBALLOC_DECAY_MS": "1000"}
    if alloc.name == "jemalloc":
        return {"MALLOC_CONF": "dirty_decay_ms:1000,muzzy_decay_ms:1000"}
    return {}


def ops(label="throughput"):
    return Metric("ops_per_sec", label, "ops/s", True)


def elapsed(label="time"):
    return Metric("elapsed", label, "s", False)


# user + system CPU of the whole process (wall time is noisy on a shared machine); the
# time geomean is taken over these rows.
CPU = Metric("cpu", "CPU time (user+sys)", "s", False, source="cpu")
MINFLT = Metric("minflt", "minor page faults", "faults", False, source="rusage")


def scenarios(ctx):
    q = ctx.quick
    p = ctx.prog
    return [
        Scenario("larson-2t", "core", "larson-like server churn: 2 threads x 1000 slots "
                 "16-512 B, slots handed to fresh threads every generation",
                 lambda: [p("larson"), "2", "1000", "200000" if q else "2000000",
                          "5" if q else "8"],
                 [ops(), EXACT_PEAK_RSS, RUSAGE_PEAK_RSS]),
        Scenario("larson-1t", "core", "the same larson churn with one thread",
                 lambda: [p("larson"), "1", "1000", "200000" if q else "2000000",
                          "5" if q else "8"],
                 [ops(), EXACT_PEAK_RSS, RUSAGE_PEAK_RSS]),
        Scenario("churn-1t", "core", "single-threaded small-object churn (16-256 B, working "
                 "set of 10000 plus LIFO bursts of 32)",
                 lambda: [p("churn"), "10000", "5000000" if q else "60000000"],
                 [ops(), EXACT_PEAK_RSS, RUSAGE_PEAK_RSS]),
        # The same churns with ten times the working set (no target): the heap, not the
        # allocator's fixed per-process cost (its code, segment and control thread, about
        # 0.1 MiB), decides their peak.
        Scenario("larson-2t-10k", "core", "larson-2t with 10000 slots per thread",
                 lambda: [p("larson"), "2", "10000", "200000" if q else "2000000",
                          "5" if q else "8"],
                 [ops(), EXACT_PEAK_RSS]),
        Scenario("larson-1t-10k", "core", "larson-1t with 10000 slots",
                 lambda: [p("larson"), "1", "10000", "200000" if q else "2000000",
                          "5" if q else "8"],
                 [ops(), EXACT_PEAK_RSS]),
        Scenario("churn-1t-100k", "core", "churn-1t with a working set of 100000",
                 lambda: [p("churn"), "100000", "5000000" if q else "60000000"],
                 [ops(), EXACT_PEAK_RSS]),
        Scenario("cache-scratch", "core", "passive false sharing: 2 threads each free an "
                 "8-byte object allocated next to the other's, then malloc/write/free 8 B",
                 lambda: [p("cache_scratch"), "2", "50000" if q else "300000", "50"],
                 [ops()]),
        Scenario("xmalloc", "core", "producer/consumer: 1 producer allocates 16-512 B in "
                 "batches of 64, its consumer frees them (bounded ring)",
                 lambda: [p("xmalloc"), "1", "1000000" if q else "5000000"],
                 [ops(), PEAK_RSS]),
        Scenario("sizes-sweep", "core", "size-class sweep 8 B-32 KiB, batches of 256",
                 lambda: [p("sizes"), "sweep", "10" if q else "60"],
                 [ops(), PEAK_RSS]),
        Scenario("sizes-aligned", "core", "posix_memalign/aligned_alloc, alignments "
                 "16-4096 B, every address checked (a misaligned block fails the run)",
                 lambda: [p("sizes"), "aligned", "10" if q else "60"],
                 [ops(), PEAK_RSS]),
        Scenario("realloc-growth", "core", "64 buffers grown by 1-64 B per realloc up to "
                 "256 KiB",
                 lambda: [p("realloc_growth"), "64", "1000000" if q else "6000000"],
                 [ops(), PEAK_RSS]),
        Scenario("strbuild", "core", "1000 strings built at once by appending 1-16 B per "
                 "realloc (a random string each step) to random lengths of 8 B-2 KiB, each "
                 "freed at its length and started again",
                 lambda: [p("strbuild"), "1000", "2000000" if q else "12000000", "2000"],
                 [ops(), EXACT_PEAK_RSS]),
        Scenario("fragmentation", "memory", "long-lived fragmentation: many sizes (16 B-64 "
                 "KiB), random lifetimes, 1 in 256 blocks survives; final RSS after freeing "
                 "all but the survivors",
                 lambda: [p("frag"), "1000000" if q else "4000000", "200000"],
                 [ops(), Metric("peak_rss_kb", "peak RSS", "MiB", False, KB_TO_MIB),
                  Metric("final_rss_kb", "final RSS", "MiB", False, KB_TO_MIB)]),
        Scenario("idle-after-sweep", "memory", "memory kept after a load drops: 4 threads "
                 "sweep 16 B-16 KiB in batches of 256 (10 rounds), then stay alive idle for "
                 "4 s; RSS at the end of the sweep and after the idle time",
                 lambda: [p("idle_sweep"), "4", "10", "4000"],
                 [Metric("peak_rss_kb", "peak RSS", "MiB", False, KB_TO_MIB),
                  Metric("idle_rss_kb", "RSS after 4 s idle", "MiB", False, KB_TO_MIB)],
                 env=decay_env, note=DECAY_NOTE),
        Scenario("m1-madvise-pinned", "mech1", "issue 4 mech 1: a second thread "
                 "malloc(48*4096)/touch/free x1024, " + PIN_NOTE.split(";")[0] + " (see notes)",
                 lambda: [p("mech_madvise"), "1024", "48"],
                 [elapsed(), Metric("minflt", "page faults", "faults", False)],
                 env=pinned_env, strace=("trace=madvise", ["madvise"]), note=PIN_NOTE),
        Scenario("m1-ebizzy-pinned", "mech1", "ebizzy-shaped: 2 threads copy a random 192 "
                 "KiB record into a fresh buffer, scan, free; thresholds pinned",
                 lambda: [p("mech_ebizzy"), "2", "3000" if q else "20000"],
                 [Metric("ops_per_sec", "records/s", "rec/s", True), PEAK_RSS],
                 env=pinned_env, strace=("trace=madvise,mmap,munmap", ["madvise", "mmap",
                                                                         "munmap"]),
                 note=PIN_NOTE),
        Scenario("m1-ebizzy-default", "mech1", "the same ebizzy-shaped load with defaults",
                 lambda: [p("mech_ebizzy"), "2", "3000" if q else "20000"],
                 [Metric("ops_per_sec", "records/s", "rec/s", True), PEAK_RSS]),
        Scenario("m2-4mib", "mech2", "issue 4 mech 2: 2 threads x N x (malloc 4 MiB, touch "
                 "every page, free)",
                 lambda: [p("mech_bigblock"), "2", "4", "2000" if q else "10000"],
                 [elapsed(), Metric("faults_per_iter", "faults/iter after warm-up",
                                    "faults", False), PEAK_RSS],
                 strace=("trace=mmap,munmap,madvise", ["mmap", "munmap", "madvise"])),
        Scenario("m2-40mib", "mech2", "the same with 40 MiB blocks (above glibc's 32 MiB "
                 "threshold max)",
                 lambda: [p("mech_bigblock"), "2", "40", "20" if q else "100"],
                 [elapsed(), Metric("faults_per_iter", "faults/iter after warm-up",
                                    "faults", False), PEAK_RSS],
                 strace=("trace=mmap,munmap,madvise", ["mmap", "munmap", "madvise"])),
        Scenario("m3-idle-heaps", "mech3", "issue 4 mech 3: 2 threads each allocate 256 MiB "
                 "in 4000 B blocks and free all but the last (threads stay alive); RSS/VSZ "
                 "after the frees and after malloc_trim(0) (n/a: allocator has none)"
                 + (" [QUICK: 64 MiB per thread]" if q else ""),
                 lambda: [p("mech_idle_heaps"), "2", "64" if q else "256", "4000"],
                 [Metric("peak_rss_kb", "peak RSS", "MiB", False, KB_TO_MIB),
                  Metric("freed_rss_kb", "RSS after frees", "MiB", False, KB_TO_MIB),
                  Metric("freed_vsz_kb", "VSZ after frees", "MiB", False, KB_TO_MIB),
                  Metric("trim_rss_kb", "RSS after malloc_trim", "MiB", False, KB_TO_MIB),
                  Metric("trim_vsz_kb", "VSZ after malloc_trim", "MiB", False, KB_TO_MIB)]),
        Scenario("m4-remote", "mech4", "issue 4 mech 4: 2 producers x %s blocks (16-512 B) "
                 "in batches of 256 to one consumer that frees them, unbounded in flight"
                 % ("1M" if q else "16M"),
                 lambda: [p("mech_remote"), "2", "1000000" if q else "16777216"],
                 [elapsed(), Metric("peak_rss_kb", "peak RSS", "MiB", False, KB_TO_MIB)],
                 strace=("trace=%memory", ["mmap", "munmap", "madvise", "mprotect", "brk"])),
    ] + issue19_scenarios(ctx) + issue23_scenarios(ctx)


# the calls that return memory (or take it back) in issue 19's heap scenarios
DECAY_STRACE = ("trace=madvise,munmap,mmap,brk", ["madvise", "munmap", "mmap", "brk"])


def issue19_scenarios(ctx):
    """Issue 19: memory that comes back by time under a steady trickle, pages a breathing
    heap soon reuses (faults), and a fork loop with remote frees in flight."""
    q = ctx.quick
    p = ctx.prog
    kib = lambda key, label: Metric(key, label, "MiB", False, KB_TO_MIB)
    faults = Metric("faults_per_cycle", "minor faults per cycle", "faults", False)
    return [
        Scenario("steady-trickle", "decay", "issue 19: %d bursts of 40 MiB (92-108 KiB "
                 "blocks, allocated and freed), 60 MiB allocated and freed down to 5 MiB "
                 "live, then every 5 ms one block freed and one allocated, for 6 s: RSS at "
                 "the trickle's start, after 1, 2 and 5 s and at its end (5 MiB live "
                 "throughout), and the trickle's minor faults" % (10 if q else 40),
                 lambda: [p("trickle"), "10" if q else "40", "40", "60", "5", "6"],
                 [kib("rss_start_kb", "RSS at trickle start"),
                  kib("rss_1s_kb", "RSS after 1 s"), kib("rss_2s_kb", "RSS after 2 s"),
                  kib("rss_5s_kb", "RSS after 5 s"), kib("rss_end_kb", "RSS after 6 s"),
                  Metric("trickle_faults", "minor faults (trickle)", "faults", False)],
                 env=decay_env, note=DECAY_NOTE, rounds=3, strace=DECAY_STRACE),
        Scenario("grow-shrink", "decay", "issue 19: a heap breathing: %d cycles of 64 B-64 "
                 "KiB blocks (log-uniform, every byte written) allocated up to 64 MiB live "
                 "and freed at random down to 16 MiB; faults of the cycles after the first "
                 "(the pages a shrink freed, faulted back in by the next growth); RSS at the "
                 "last top (16 MiB of it the program's own table)" % (8 if q else 20),
                 lambda: [p("growshrink"), "8" if q else "20", "16", "64"],
                 [elapsed(), faults, kib("rss_top_kb", "RSS at the top")],
                 strace=DECAY_STRACE),
        Scenario("grow-shrink-deep", "decay", "the same down to 1 MiB live each cycle",
                 lambda: [p("growshrink"), "8" if q else "20", "1", "64"],
                 [elapsed(), faults, kib("rss_top_kb", "RSS at the top"),
                  kib("rss_bottom_kb", "RSS at the bottom")],
                 strace=DECAY_STRACE),
        Scenario("fork-loop", "decay", "issue 19: %d children forked while 4 threads free "
                 "each other's blocks (16 B-1 KiB and 16-66 KiB); each child trims or waits "
                 "5 ms, allocates, frees blocks of every thread and exits" % (50 if q else 200),
                 lambda: [os.path.join(ctx.build, "tests", "forkfree"),
                          "50" if q else "200", "4", "plain"],
                 [Metric("children_per_sec", "children/s", "1/s", True),
                  Metric("faults_per_child", "minor faults per child", "faults", False)],
                 rounds=3),
    ]


# Producer/consumer parameter sets with more threads than the machine has cores and no
# bound on the blocks in flight: (name, producers, blocks per producer, consumers, min
# size, max size).
REMOTE_SETS = [
    ("remote-4p4c", 4, 250000, 4, 16, 512),
    ("remote-6p2c-4k", 6, 60000, 2, 16, 4096),
    ("remote-2p6c", 2, 500000, 6, 64, 1024),
    ("remote-8p1c", 8, 120000, 1, 16, 256),
]


def issue23_scenarios(ctx):
    """Issue 23: whole programs of the kinds where speed was lost (each program's header
    comment says what it does); CPU time beside wall time, faults and peak RSS."""
    q = ctx.quick
    p = ctx.prog
    out = [
        Scenario("logicmin", "whole", "logic-minimizer-like (espresso-like), 1 thread: "
                 "covers of cubes of 8-96 variables complemented by recursive Shannon "
                 "expansion, reduced and merged through hash tables; blocks of 4 B-KiBs, "
                 "covers grown by realloc",
                 lambda: [p("logicmin"), "60" if q else "400"],
                 [elapsed(), CPU, MINFLT, PEAK_RSS]),
        Scenario("nbody-tree", "whole", "tree-building (Barnes-Hut-like), 1 thread: an octree "
                 "over 10000 bodies built, walked and freed every step (cells, leaf records, "
                 "encounter lists)",
                 lambda: [p("nbody_tree"), "10000", "2" if q else "6"],
                 [elapsed(), CPU, MINFLT, PEAK_RSS]),
        Scenario("growth", "whole", "growth with bulk frees, 1 thread: 32-96 B blocks "
                 "appended (first 128 B written), every 100000 a random 90 % of those alive "
                 "freed (~6 MiB gone cold since written), then allocated again",
                 lambda: [p("growth"), "1000000" if q else "3000000", "100000", "96", "32"],
                 [elapsed(), CPU, MINFLT,
                  Metric("peak_rss_kb", "peak RSS", "MiB", False, KB_TO_MIB)],
                 # ~0.1 s a run, whose CPU moves by +-50 % from run to run on a loaded
                 # machine for every allocator: one quick round would decide a median
                 min_rounds=9),
        Scenario("medsizes", "whole", "sizes across the classes' end, at random (alloc-test "
                 "/ bench-malloc-thread with large sizes): 1000 slots, each operation replaces "
                 "a random slot's block by one of 1 B-64 KiB (uniform, first 64 B written)",
                 lambda: [p("medsizes"), "1000", "1000000" if q else "3000000", "65536"],
                 [elapsed(), CPU, MINFLT, PEAK_RSS],
                 # ~0.05-0.5 s a run under load: one quick round would decide a median
                 min_rounds=7),
        Scenario("batchfree", "whole", "the same sizes in rounds (rptest-like): 2000 "
                 "blocks of 1 B-64 KiB allocated, then all freed in a random order",
                 lambda: [p("medsizes"), "2000", "1000000" if q else "2000000", "65536", "1",
                          "1"],
                 [elapsed(), CPU, MINFLT, PEAK_RSS]),
        Scenario("sizemix-4t", "whole", "many sizes, 4 threads (shbench-like): rounds of "
                 "100-2000 blocks in a power-of-two band of 8 B-8 KiB, every other one "
                 "replaced by the next band, then all freed in reverse",
                 lambda: [p("sizemix"), "4", "300" if q else "2000"],
                 [elapsed(), CPU, PEAK_RSS]),
        Scenario("xthreads-4t", "whole", "xmalloc-like, 4 threads: each allocates batches of "
                 "32 blocks of 16-512 B and posts them to a random other thread's inbox, then "
                 "frees what waits in its own (every free remote)",
                 lambda: [p("xthreads"), "4", "4000" if q else "40000"],
                 [elapsed(), CPU, PEAK_RSS]),
        Scenario("large-random", "whole", "random large blocks: 8 live, each step frees one "
                 "and allocates 2-32 MiB (any page count) in its place, writing its first and "
                 "last bytes",
                 lambda: [p("large_random"), "8", "400" if q else "3000", "2", "32", "1"],
                 [elapsed(), CPU, MINFLT, PEAK_RSS]),
        Scenario("large-random-touch", "whole", "the same, writing one byte in every 64 KiB "
                 "of each new block",
                 lambda: [p("large_random"), "8", "200" if q else "1000", "2", "32", "2"],
                 [elapsed(), CPU, MINFLT, PEAK_RSS]),
    ]
    for name, prod, blocks, cons, lo, hi in REMOTE_SETS:
        n = blocks // 8 if q else blocks
        out.append(Scenario(
            name, "whole", "oversubscribed producer/consumer: %d producers x %d blocks of "
            "%d-%d B in batches of 256 to %d consumer%s that free them, unbounded in flight "
            "(%d threads on this machine's cores)" % (prod, n, lo, hi, cons,
                                                       "s" if cons > 1 else "", prod + cons),
            lambda prod=prod, n=n, cons=cons, lo=lo, hi=hi: [
                p("mech_remote"), str(prod), str(n), str(cons), str(lo), str(hi)],
            [elapsed(), CPU, Metric("peak_rss_kb", "peak RSS", "MiB", False, KB_TO_MIB)],
            # a run takes ~0.05 s, and its peak RSS moves 3-7x between runs for every
            # allocator (threads on more than the cores: who runs first decides how many
            # blocks are in flight): one quick round moved the RSS geomean by 0.07, and
            # medians of 5 rounds of one build read 9.7 and 17.9 MiB (remote-2p6c)
            min_rounds=15))
    return out


# Whole programs counted by callgrind (instructions of the whole run, every library
# included): the single-threaded workloads, smaller than their timed runs. (name, argv).
def callgrind_programs(ctx):
    p = ctx.prog
    return [
        ("churn-1t", [p("churn"), "10000", "1000000"]),
        ("churn-1t-100k", [p("churn"), "100000", "1000000"]),
        ("larson-1t", [p("larson"), "1", "1000", "100000", "4"]),
        ("logicmin", [p("logicmin"), "60"]),
        ("nbody-tree", [p("nbody_tree"), "3000", "2"]),
        ("realloc-growth", [p("realloc_growth"), "64", "300000"]),
        ("strbuild", [p("strbuild"), "1000", "500000", "2000"]),
        ("fragmentation", [p("frag"), "300000", "100000"]),
        ("large-random", [p("large_random"), "8", "300", "2", "32", "1"]),
        ("cpython-dict", CPYTHON_TEST + CPYTHON_CALLGRIND_TESTS),
    ]


# CPython's own tests as a real program: Debian's python3 and libpython3.11-testsuite,
# every object allocated through malloc (PYTHONMALLOC=malloc: no pymalloc arenas), the
# hash seed and the test runner's random seed fixed so that every allocator runs the same
# program (regrtest seeds `random` anew each run otherwise: test_dict's instructions moved
# by 8% from run to run under one allocator; with --randseed 1, by 174 of 871M).
PYTHON = "/usr/bin/python3"
CPYTHON_TEST = [PYTHON, "-m", "test", "-q", "--randseed", "1"]
CPYTHON_TESTS = ["test_dict", "test_re", "test_json", "test_heapq", "test_difflib"]
CPYTHON_QUICK_TESTS = ["test_dict", "test_heapq"]
CPYTHON_CALLGRIND_TESTS = ["test_dict"]
CPYTHON_ENV = {"PYTHONMALLOC": "malloc", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}


def cpython_env(ctx, alloc):
    """The cpython row's whole environment, the same in every bench: what CPython reads at
    start (os.environ, the strings of sys.path) is heap it builds, and liballoc's minor faults
    on the quick slice moved 8,606-8,924 with a variable of 1-150 bytes added to the caller's
    environment (glibc's 8,856-8,969; bench/README.md, session 38): a run of `make` (MAKEFLAGS,
    MAKELEVEL) or another shell read another figure than an isolated `run.py --only cpython`."""
    return ctx.env(alloc, CPYTHON_ENV,
                   base={"PATH": "/usr/bin:/bin", "LIBALLOC_RUN_DIR": ctx.run_dir})


# ---------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------

class Cell:
    """All samples of one metric for one allocator."""

    def __init__(self):
        self.values = []
        self.failures = []
        self.na = False  # the allocator does not have the feature measured

    def summary(self):
        if not self.values:
            return None
        return (statistics.median(self.values), min(self.values), max(self.values))


class Row:
    def __init__(self, scenario, group, metric_label, unit, higher_better, what=""):
        self.scenario = scenario
        self.group = group
        self.metric = metric_label
        self.unit = unit
        self.higher_better = higher_better
        self.what = what
        self.cells = {}  # allocator name -> Cell

    def cell(self, alloc):
        return self.cells.setdefault(alloc, Cell())

    def median(self, alloc):
        c = self.cells.get(alloc)
        s = c.summary() if c else None
        return s[0] if s else None

    def best(self, names):
        """(name, median) of the best allocator among names that has a value."""
        cands = [(n, self.median(n)) for n in names if self.median(n) is not None]
        if not cands:
            return None, None
        pick = max if self.higher_better else min
        return pick(cands, key=lambda x: x[1])

    def ratio(self, a, b):
        """How many times better a is than b (>1: a better), or None."""
        va, vb = self.median(a), self.median(b)
        if va is None or vb is None:
            return None
        if self.higher_better:
            return va / vb if vb > 0 else None
        if va == 0:
            return math.inf if vb > 0 else 1.0
        return vb / va


# Targets the issues set for liballoc: (scenario, metric) -> (text, check). check gets
# med(scenario, metric, allocator) -> median or None and returns True/False/None (unknown).
def _best3(med, sc, m, higher=True):
    vals = [med(sc, m, a) for a in ("jemalloc", "tcmalloc", "mimalloc")]
    vals = [v for v in vals if v is not None]
    return (max(vals) if higher else min(vals)) if vals else None


def _cmp(a, b, fn):
    return None if a is None or b is None else fn(a, b)


def issue_targets():
    t = {("fastpath", "instructions per malloc(32)+free pair"):
         ("<= mimalloc (#3)", lambda med: _cmp(med("fastpath", "instructions per malloc(32)+"
                                                    "free pair", "liballoc"),
                                                med("fastpath", "instructions per malloc(32)+"
                                                    "free pair", "mimalloc"),
                                                lambda a, b: a <= b))}
    for sc in ("larson-2t", "larson-1t", "churn-1t"):
        t[(sc, "throughput")] = (
            ">= glibc, >= 0.8x best of je/tc/mi (#3)",
            lambda med, sc=sc: _cmp(med(sc, "throughput", "liballoc"),
                                    (med(sc, "throughput", "glibc"),
                                     _best3(med, sc, "throughput")),
                                    lambda a, b: None if None in b else
                                    a >= b[0] and a >= 0.8 * b[1]))
    t[("m1-madvise-pinned", "madvise calls (strace)")] = ("<= 2 (#4)", lambda med: _cmp(
        med("m1-madvise-pinned", "madvise calls (strace)", "liballoc"), 2,
        lambda a, b: a <= b))
    t[("m1-ebizzy-pinned", "records/s")] = (">= 5x glibc (#4)", lambda med: _cmp(
        med("m1-ebizzy-pinned", "records/s", "liballoc"),
        med("m1-ebizzy-pinned", "records/s", "glibc"), lambda a, b: a >= 5 * b))
    t[("m1-ebizzy-default", "records/s")] = (">= glibc (#4)", lambda med: _cmp(
        med("m1-ebizzy-default", "records/s", "liballoc"),
        med("m1-ebizzy-default", "records/s", "glibc"), lambda a, b: a >= 0.98 * b))
    t[("m2-4mib", "faults/iter after warm-up")] = ("< 1 fault/iter (#4)", lambda med: _cmp(
        med("m2-4mib", "faults/iter after warm-up", "liballoc"), 1, lambda a, b: a < b))
    t[("m2-4mib", "time")] = ("<= glibc (#4)", lambda med: _cmp(
        med("m2-4mib", "time", "liballoc"), med("m2-4mib", "time", "glibc"),
        lambda a, b: a <= b))
    t[("m2-40mib", "time")] = (">= 5x faster than glibc (#4)", lambda med: _cmp(
        med("m2-40mib", "time", "liballoc"), med("m2-40mib", "time", "glibc"),
        lambda a, b: a * 5 <= b))
    t[("m3-idle-heaps", "RSS after frees")] = ("<= 25% of peak (#4)", lambda med: _cmp(
        med("m3-idle-heaps", "RSS after frees", "liballoc"),
        med("m3-idle-heaps", "peak RSS", "liballoc"), lambda a, b: a <= 0.25 * b))
    t[("m3-idle-heaps", "RSS after malloc_trim")] = ("<= 5% of peak (#4)", lambda med: _cmp(
        med("m3-idle-heaps", "RSS after malloc_trim", "liballoc"),
        med("m3-idle-heaps", "peak RSS", "liballoc"), lambda a, b: a <= 0.05 * b))
    t[("m4-remote", "time")] = ("<= 0.5x glibc (#4)", lambda med: _cmp(
        med("m4-remote", "time", "liballoc"), med("m4-remote", "time", "glibc"),
        lambda a, b: a <= 0.5 * b))
    t[("m4-remote", "peak RSS")] = ("<= 1/3 of glibc (#4)", lambda med: _cmp(
        med("m4-remote", "peak RSS", "liballoc"), med("m4-remote", "peak RSS", "glibc"),
        lambda a, b: a <= b / 3))
    # issue 23
    # #3's peak RSS <= glibc on the 2-3 MiB rows above is retired (issue 23): there each
    # allocator's fixed per-process cost decides; peaks are judged at ten times the working set.
    for sc in ("larson-2t-10k", "larson-1t-10k", "churn-1t-100k"):
        t[(sc, "peak RSS")] = ("<= glibc (#23)", lambda med, sc=sc: _cmp(
            med(sc, "peak RSS", "liballoc"), med(sc, "peak RSS", "glibc"),
            lambda a, b: a <= b))
    for sc in ("large-random", "large-random-touch"):
        t[(sc, "time")] = ("<= glibc, <= 1.5x tcmalloc (#23)", lambda med, sc=sc: _cmp(
            med(sc, "time", "liballoc"), (med(sc, "time", "glibc"), med(sc, "time", "tcmalloc")),
            lambda a, b: None if None in b else a <= b[0] and a <= 1.5 * b[1]))
    for sc, *_ in REMOTE_SETS:
        t[(sc, "time")] = ("<= glibc (#23)", lambda med, sc=sc: _cmp(
            med(sc, "time", "liballoc"), med(sc, "time", "glibc"), lambda a, b: a <= b))
        t[(sc, "peak RSS")] = ("< glibc (#23)", lambda med, sc=sc: _cmp(
            med(sc, "peak RSS", "liballoc"), med(sc, "peak RSS", "glibc"), lambda a, b: a < b))
    for sc, metric in (("cpython", MINFLT.label), ("sqlite", MINFLT.label),
                       ("redis", "server minor page faults")):
        t[(sc, metric)] = ("<= glibc (#23)", lambda med, sc=sc, m=metric: _cmp(
            med(sc, m, "liballoc"), med(sc, m, "glibc"), lambda a, b: a <= b))
    return t


ISSUE_TARGETS = issue_targets()


def generic_target(row):
    """Issue 23's targets that hold for every row of a kind: (text, check) or None."""
    others = ("glibc", "jemalloc", "tcmalloc", "mimalloc")

    def best(med):
        vals = [med(row.scenario, row.metric, a) for a in others]
        vals = [v for v in vals if v is not None]
        return min(vals) if vals else None

    if row.group == "instructions":
        return ("<= mimalloc (#23)", lambda med: _cmp(
            med(row.scenario, row.metric, "liballoc"), med(row.scenario, row.metric,
                                                            "mimalloc"), lambda a, b: a <= b))
    if row.group == "summary" and row.metric.startswith("CPU"):
        return ("<= best other (#23)", lambda med: _cmp(
            med(row.scenario, row.metric, "liballoc"), best(med), lambda a, b: a <= b))
    if row.group == "summary":
        def rss_ok(med):
            la = med(row.scenario, row.metric, "liballoc")
            vals = [med(row.scenario, row.metric, a) for a in others]
            if la is None or None in vals:
                return None
            return la <= vals[0] and all(la < v for v in vals[1:])
        return ("<= glibc, < je/tc/mi (#23)", rss_ok)
    if row.metric.endswith(CPU.label) and row.group not in ("overhead",):
        return ("<= 1.1x best other (#23)", lambda med: _cmp(
            med(row.scenario, row.metric, "liballoc"), best(med), lambda a, b: a <= 1.1 * b))
    return None


def target_text(rows, row, has_la):
    """The issue's target for this row and, when liballoc ran, whether it is met."""
    tgt = ISSUE_TARGETS.get((row.scenario, row.metric)) or generic_target(row)
    if not tgt:
        return ""
    if not has_la:
        return tgt[0]
    index = {(r.scenario, r.metric): r for r in rows}

    def med(sc, m, a):
        r = index.get((sc, m))
        return r.median(a) if r else None

    ok = tgt[1](med)
    return "%s: %s" % (tgt[0], {True: "met", False: "MISSED", None: "?"}[ok])


def fmt_num(v, unit=""):
    if v is None:
        return "-"
    if v == 0:
        return "0"
    a = abs(v)
    if unit in ("MiB",):
        return "%.1f" % v if a < 100 else "%.0f" % v
    if unit == "s":
        return "%.3f" % v if a < 10 else "%.1f" % v
    if unit == "ms":
        return "%.3f" % v if a < 10 else "%.1f" % v
    for div, suf in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= div:
            return "%.2f%s" % (v / div, suf) if a / div < 100 else "%.0f%s" % (v / div, suf)
    return "%.1f" % v if a < 100 and v != int(v) else "%d" % round(v)


def fmt_ratio(r):
    if r is None:
        return "-"
    if math.isinf(r):
        return "inf"
    return "%.2fx" % r if r < 100 else "%.0fx" % r


def cell_text(row, name, with_ratio=True):
    c = row.cells.get(name)
    if c is None:
        return "-"
    if c.na:
        return "n/a"
    s = c.summary()
    if s is None:
        return "FAIL(%s)" % (c.failures[0] if c.failures else "no value")
    text = fmt_num(s[0], row.unit)
    if with_ratio and name != "glibc":
        r = row.ratio(name, "glibc")
        if r is not None:
            text += " (%s)" % fmt_ratio(r)
    if c.failures:
        text += " !%d" % len(c.failures)
    return text


def minmax_text(row, name):
    c = row.cells.get(name)
    if c is None or c.na:
        return "-" if c is None else "n/a"
    s = c.summary()
    if s is None:
        return "FAIL"
    return "%s-%s" % (fmt_num(s[1], row.unit), fmt_num(s[2], row.unit))


def competitors_of(name, names):
    return [n for n in names if n != name and not n.startswith("liballoc")]


def print_table(rows, names, out=sys.stdout):
    """Medians with ratio vs glibc (>1: better than glibc), the best competitor and the
    ratio of liballoc to it."""
    has_la = "liballoc" in names
    head = ["scenario", "metric", "unit"] + names + ["best other", "liballoc vs best"
                                                     if has_la else "best/glibc", "target"]
    table = []
    for r in rows:
        line = [r.scenario, r.metric + (" ^" if r.higher_better else " v"), r.unit]
        line += [cell_text(r, n) for n in names]
        others = competitors_of("liballoc", names)
        bname, _ = r.best(others)
        line.append(bname or "-")
        if has_la:
            line.append(fmt_ratio(r.ratio("liballoc", bname)) if bname else "-")
        else:
            line.append(fmt_ratio(r.ratio(bname, "glibc")) if bname else "-")
        line.append(target_text(rows, r, has_la))
        table.append(line)
    widths = [max(len(str(x[i])) for x in table + [head]) for i in range(len(head))]
    sep = "  "
    print(sep.join(h.ljust(w) for h, w in zip(head, widths)), file=out)
    print(sep.join("-" * w for w in widths), file=out)
    group = None
    for r, line in zip(rows, table):
        if group is not None and r.group != group:
            print("", file=out)
        group = r.group
        print(sep.join(str(x).ljust(w) for x, w in zip(line, widths)), file=out)


def write_csv(rows, names, path):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["group", "scenario", "metric", "unit", "higher_is_better", "allocator",
                    "median", "min", "max", "samples", "failures", "ratio_vs_glibc",
                    "values"])
        for r in rows:
            for n in names:
                c = r.cells.get(n)
                if c is None:
                    continue
                s = c.summary()
                w.writerow([r.group, r.scenario, r.metric, r.unit, int(r.higher_better), n,
                            "" if not s else "%.6g" % s[0], "" if not s else "%.6g" % s[1],
                            "" if not s else "%.6g" % s[2], len(c.values),
                            "n/a" if c.na else ";".join(c.failures),
                            "" if r.ratio(n, "glibc") is None else "%.4f" % r.ratio(n, "glibc"),
                            " ".join("%.6g" % v for v in c.values)])


def rows_to_json(rows):
    return [{"group": r.group, "scenario": r.scenario, "metric": r.metric, "unit": r.unit,
             "higher_is_better": r.higher_better, "what": r.what,
             "cells": {n: {"values": c.values, "failures": c.failures, "na": c.na}
                       for n, c in r.cells.items()}} for r in rows]


def rows_from_json(data):
    rows = []
    for d in data:
        r = Row(d["scenario"], d["group"], d["metric"], d["unit"], d["higher_is_better"],
                d.get("what", ""))
        for n, c in d["cells"].items():
            cell = r.cell(n)
            cell.values = c["values"]
            cell.failures = c["failures"]
            cell.na = c["na"]
        rows.append(r)
    return rows


GROUP_TITLES = {
    "core": "Core workloads",
    "memory": "Fragmentation",
    "mech1": "Mechanism 1: madvise throttling",
    "mech2": "Mechanism 2: dynamic mmap threshold and large-block reuse",
    "mech3": "Mechanism 3: release of idle heaps",
    "mech4": "Mechanism 4: remote frees",
    "syscalls": "System calls (separate strace -f -c runs)",
    "fastpath": "Fast path (callgrind)",
    "programs": "Real programs under the preload",
    "whole": "Whole-program workloads (issue 23)",
    "instructions": "Whole-program instructions (callgrind)",
    "summary": "Geometric means",
    "overhead": "liballoc statistics and control thread overhead",
    "control": "Control path through allocctld",
}


def write_charts(rows, names, outdir):
    """One PNG per group: a panel per metric, bars = medians, error bars = min-max."""
    gnuplot = shutil.which("gnuplot")
    if not gnuplot:
        print("bench: gnuplot not found: no charts", file=sys.stderr)
        return []
    made = []
    groups = []
    for r in rows:
        if r.group not in groups:
            groups.append(r.group)
    for g in groups:
        grows = [r for r in rows if r.group == g and any(
            r.cells.get(n) and r.cells[n].summary() for n in r.cells)]
        if not grows:
            continue
        cols = names if g != "overhead" else [n for n in grows[0].cells]
        datafile = os.path.join(outdir, "chart-%s.dat" % g)
        with open(datafile, "w") as f:
            for i, r in enumerate(grows):
                for n in cols:
                    c = r.cells.get(n)
                    s = c.summary() if c else None
                    if s:
                        f.write('"%s" %g %g %g\n' % (n, s[0], s[1], s[2]))
                    else:
                        f.write('"%s" 0 0 0\n' % n)
                f.write("\n\n")
        ncols = min(3, len(grows))
        nrows = (len(grows) + ncols - 1) // ncols
        png = os.path.join(outdir, "chart-%s.png" % g)
        script = ["set terminal pngcairo size %d,%d font 'sans,9'" % (420 * ncols,
                                                                       300 * nrows + 40),
                  "set output '%s'" % png,
                  "set multiplot layout %d,%d title '%s (median, min-max)'" % (
                      nrows, ncols, GROUP_TITLES.get(g, g).replace("'", "")),
                  "set style fill solid 0.6 border -1", "set boxwidth 0.7",
                  "set xtics rotate by 30 right nomirror", "set grid ytics", "set key off",
                  "set format y '%.1s%c'",
                  "set yrange [0:*]", "set offsets 0.5, 0.5, 0, 0"]
        for i, r in enumerate(grows):
            title = "%s: %s [%s]%s" % (r.scenario, r.metric, r.unit,
                                       " (higher better)" if r.higher_better
                                       else " (lower better)")
            script.append("set title \"%s\"" % title.replace('"', "'"))
            script.append("plot '%s' index %d using 0:2:($0+1):xtic(1) with boxes lc variable,"
                          " '' index %d using 0:2:3:4 with yerrorbars lc rgb 'black' pt 0"
                          % (datafile, i, i))
        script.append("unset multiplot")
        try:
            res = subprocess.run([gnuplot], input="\n".join(script) + "\n", text=True,
                                 capture_output=True, timeout=60)
            if res.returncode == 0 and os.path.exists(png):
                made.append(png)
            else:
                print("bench: gnuplot failed for %s: %s" % (g, res.stderr.strip()[:300]),
                      file=sys.stderr)
        except (OSError, subprocess.TimeoutExpired) as e:
            print("bench: gnuplot failed for %s: %s" % (g, e), file=sys.stderr)
    return made


# ---------------------------------------------------------------------------------------
# The suite
# ---------------------------------------------------------------------------------------

def round_order(allocs, rnd):
    """The allocators in round rnd's order: each round starts one later (A B C, B C A, C A B,
    ...), so that over as many rounds as allocators each runs once in every position and none
    always follows the same one (a fixed order put glibc first and liballoc last in every
    round: whatever the previous run leaves, page cache, a busy core, fell on one column)."""
    k = rnd % len(allocs) if allocs else 0
    return allocs[k:] + allocs[:k]


class Suite:
    def __init__(self, ctx, allocs, only):
        self.ctx = ctx
        self.allocs = allocs
        self.names = [a.name for a in allocs]
        self.only = only
        self.rows = []
        self.index = {}
        self.extras = []  # (section, item, value, unit, note) of the liballoc-only hooks
        self.notes = []
        self.failures = []  # (scenario, allocator, reason, stderr tail)
        self.strace_args = None
        self.t0 = time.monotonic()

    def row(self, scenario, group, metric, unit, higher_better, what=""):
        key = (scenario, metric)
        if key not in self.index:
            r = Row(scenario, group, metric, unit, higher_better, what)
            self.index[key] = r
            self.rows.append(r)
        return self.index[key]

    def selected(self, name):
        return not self.only or any(name.startswith(o) for o in self.only)

    def progress(self, text):
        print("  [%4.0fs] %s" % (time.monotonic() - self.t0, text), file=sys.stderr,
              flush=True)

    def record_failure(self, scen, alloc, res):
        tail = " | ".join(res.stderr.strip().splitlines()[-2:])[:200]
        self.failures.append((scen, alloc, res.failure, tail))

    # -- workload programs ------------------------------------------------------------
    def run_workloads(self):
        ctx = self.ctx
        for sc in scenarios(ctx):
            if not self.selected(sc.name):
                continue
            rows = [self.row(sc.name, sc.group, m.label, m.unit, m.higher_better, sc.what)
                    for m in sc.metrics]
            rounds = max(min(ctx.rounds, sc.rounds or ctx.rounds), sc.min_rounds or 1)
            for rnd in range(rounds):
                for a in round_order(self.allocs, rnd):
                    extra = sc.env(ctx, a) if sc.env else None
                    res = run_process(sc.argv(), ctx.env(a, extra), ctx.timeout, cwd=ctx.tmp)
                    if res.ok:
                        for m, r in zip(sc.metrics, rows):
                            v = m.extract(res)
                            if v is not None:
                                r.cell(a.name).values.append(v)
                            elif res.values.get(m.key) == "n/a":
                                r.cell(a.name).na = True
                            else:
                                r.cell(a.name).failures.append("no value")
                    else:
                        for r in rows:
                            r.cell(a.name).failures.append(res.failure)
                        self.record_failure(sc.name, a.name, res)
                        if res.failure == "misaligned block" and a.name == "mimalloc" and \
                                MIMALLOC_ALIGN_NOTE not in self.notes:
                            self.notes.append(MIMALLOC_ALIGN_NOTE)
                self.progress("%-20s round %d/%d" % (sc.name, rnd + 1, rounds))
            if sc.note and sc.note not in self.notes:
                self.notes.append(sc.note)

    # -- system-call counts (separate runs under strace) --------------------------------
    def strace_base(self):
        """strace arguments; --seccomp-bpf keeps untraced calls cheap where allowed."""
        if self.strace_args is None:
            self.strace_args = ["strace", "-f", "-qq", "-c"]
            probe = run_process(["strace", "-f", "--seccomp-bpf", "-c", "-o", "/dev/null",
                                 "-e", "trace=madvise", "true"], self.ctx.base_env, 30)
            if probe.ok:
                self.strace_args.insert(2, "--seccomp-bpf")
        return self.strace_args

    def run_strace(self):
        ctx = self.ctx
        if not shutil.which("strace"):
            self.notes.append("strace not installed: no system-call counts")
            return
        for sc in scenarios(ctx):
            if not sc.strace or not self.selected(sc.name):
                continue
            expr, calls = sc.strace
            # liballoc advises many ranges in one process_madvise (Linux 6.14): a madvise
            # call too in these rows
            if "madvise" in calls and "process_madvise" not in expr:
                expr += ",process_madvise"
            rows = {c: self.row(sc.name, sc.group, "%s calls (strace)" % c, "calls", False,
                                sc.what) for c in calls}
            for a in self.allocs:
                extra = dict(sc.env(ctx, a) if sc.env else {})
                if a.lib:
                    extra["LD_PRELOAD"] = a.lib
                out = os.path.join(ctx.tmp, "strace.out")
                argv = self.strace_base() + ["-o", out, "-e", expr]
                for k, v in sorted(extra.items()):
                    argv += ["-E", "%s=%s" % (k, v)]
                res = run_process(argv + sc.argv(), ctx.base_env, ctx.timeout * 3, cwd=ctx.tmp)
                if not res.ok:
                    for r in rows.values():
                        r.cell(a.name).failures.append(res.failure)
                    self.record_failure(sc.name + " (strace)", a.name, res)
                    continue
                counts = parse_strace(out)
                counts["madvise"] = counts.get("madvise", 0) + counts.get("process_madvise", 0)
                for c, r in rows.items():
                    r.cell(a.name).values.append(float(counts.get(c, 0)))
            self.progress("%-20s strace" % sc.name)

    # -- callgrind: instructions per warm malloc+free pair ----------------------------------
    def run_callgrind(self):
        ctx = self.ctx
        if not self.selected("fastpath"):
            return
        if not shutil.which("valgrind"):
            self.notes.append("valgrind not installed: no instruction counts")
            return
        n1, n2 = 20000, 220000
        r = self.row("fastpath", "fastpath", "instructions per malloc(32)+free pair", "Ir",
                     False, "callgrind: (Ir(N2) - Ir(N1)) / (N2 - N1) of a loop of warm "
                     "malloc(32)+free pairs, N1=%d N2=%d (start-up cancels)" % (n1, n2))
        for a in self.allocs:
            per_pair, res = self.callgrind_per_pair(a, n1, n2)
            if per_pair is None:
                r.cell(a.name).failures.append(res.failure)
                self.record_failure("fastpath", a.name, res)
            else:
                r.cell(a.name).values.append(per_pair)
        self.progress("fastpath             callgrind")

    def callgrind_per_pair(self, alloc, n1, n2):
        """Instructions per warm malloc(32)+free pair under alloc: (value, last RunResult)."""
        ctx = self.ctx
        irs = []
        for n in (n1, n2):
            out = os.path.join(ctx.tmp, "callgrind.%s.%d" % (alloc.name, n))
            res = run_process(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out,
                               ctx.prog("fastpath"), str(n), "32"], ctx.env(alloc),
                              ctx.timeout * 2, cwd=ctx.empty_dir())
            ir = parse_callgrind(out) if res.ok else None
            if ir is None:
                res.failure = res.failure or "no callgrind total"
                return None, res
            irs.append(ir)
        return (irs[1] - irs[0]) / float(n2 - n1), res

    # -- real programs ----------------------------------------------------------------------
    def run_redis(self):
        ctx = self.ctx
        if not self.selected("redis"):
            return
        server, client = shutil.which("redis-server"), shutil.which("redis-benchmark")
        if not server or not client:
            self.notes.append("redis-server/redis-benchmark not installed: no redis rows")
            return
        n = 20000 if ctx.quick else 50000
        tests = "set,get,incr,lpush,lpop,sadd,hset,zadd,lrange_100"
        what = ("redis-server (preloaded) on 127.0.0.1:ephemeral, redis-benchmark -n %d -c 16 "
                "-r 100000 -d 256 -t %s; geometric mean of requests/s" % (n, tests))
        rps_row = self.row("redis", "programs", "requests/s (geomean)", "req/s", True, what)
        cpu_row = self.row("redis", "programs", "server " + CPU.label, "s", False, what)
        flt_row = self.row("redis", "programs", "server minor page faults", "faults", False,
                           what)
        rss_row = self.row("redis", "programs", "server peak RSS", "MiB", False, what)
        shim = ctx.prog("libglibc_shim.so")
        self.notes.append("redis: Debian's redis-server is linked with libjemalloc, so its "
                          "glibc column preloads %s, which routes malloc & co. to glibc's "
                          "__libc_malloc family" % os.path.basename(shim))
        for rnd in range(ctx.rounds):
            for a in round_order(self.allocs, rnd):
                preload = a.lib if a.lib else shim
                ok, val, ru, why = redis_once(ctx, a, preload, server, client, n, tests)
                rows = (rps_row, cpu_row, flt_row, rss_row)
                if ok:
                    vals = (val, ru.ru_utime + ru.ru_stime, float(ru.ru_minflt),
                            ru.ru_maxrss * KB_TO_MIB)
                    for r, v in zip(rows, vals):
                        r.cell(a.name).values.append(v)
                else:
                    for r in rows:
                        r.cell(a.name).failures.append(why)
                    self.failures.append(("redis", a.name, why, ""))
            self.progress("%-20s round %d/%d" % ("redis", rnd + 1, ctx.rounds))

    def run_sqlite(self):
        ctx = self.ctx
        if not self.selected("sqlite"):
            return
        sqlite = shutil.which("sqlite3")
        if not sqlite:
            self.notes.append("sqlite3 not installed: no sqlite rows")
            return
        rows_n = 20000 if ctx.quick else 150000
        script = os.path.join(ctx.tmp, "workload.sql")
        write_sqlite_workload(script, rows_n)
        what = ("sqlite3 (preloaded) runs a generated script on a file database: %d inserts, "
                "updates, deletes, index builds, aggregate and sorted selects; output "
                "checked identical across allocators" % rows_n)
        t_row = self.row("sqlite", "programs", "time", "s", False, what)
        c_row = self.row("sqlite", "programs", CPU.label, "s", False, what)
        f_row = self.row("sqlite", "programs", MINFLT.label, "faults", False, what)
        m_row = self.row("sqlite", "programs", "peak RSS", "MiB", False, what)
        reference = None
        for rnd in range(ctx.rounds):
            for a in round_order(self.allocs, rnd):
                db = os.path.join(ctx.tmp, "bench.db")
                for suffix in ("", "-journal", "-wal", "-shm"):
                    if os.path.exists(db + suffix):
                        os.unlink(db + suffix)
                res = run_process([sqlite, db], ctx.env(a), ctx.timeout, cwd=ctx.tmp,
                                  stdin_path=script)
                digest = hashlib.sha256(res.stdout.encode()).hexdigest()
                if res.ok and res.stderr.strip():
                    res.ok, res.failure = False, "sqlite error"
                if res.ok and reference is None:
                    reference = digest
                if res.ok and digest != reference:
                    res.ok, res.failure = False, "different output"
                if res.ok:
                    t_row.cell(a.name).values.append(res.wall)
                    c_row.cell(a.name).values.append(res.cpu)
                    f_row.cell(a.name).values.append(float(res.minflt))
                    m_row.cell(a.name).values.append(res.maxrss_kb * KB_TO_MIB)
                else:
                    for r in (t_row, c_row, f_row, m_row):
                        r.cell(a.name).failures.append(res.failure)
                    self.record_failure("sqlite", a.name, res)
            self.progress("%-20s round %d/%d" % ("sqlite", rnd + 1, ctx.rounds))

    def run_cpython(self):
        """CPython's own test slice under every allocator (PYTHONMALLOC=malloc)."""
        ctx = self.ctx
        if not self.selected("cpython"):
            return
        tests = CPYTHON_QUICK_TESTS if ctx.quick else CPYTHON_TESTS
        missing = [t for t in tests if not os.path.exists(
            "/usr/lib/python3.11/test/%s.py" % t) and not os.path.isdir(
            "/usr/lib/python3.11/test/%s" % t)]
        if not os.access(PYTHON, os.X_OK) or missing:
            self.notes.append("python3 or libpython3.11-testsuite not installed: no cpython rows")
            return
        what = ("CPython's own tests (%s -m test --randseed 1 %s), every object through malloc "
                "(PYTHONMALLOC=malloc, PYTHONHASHSEED=0), in a new empty directory with a fixed "
                "environment" % (PYTHON, " ".join(tests)))
        rows = [self.row("cpython", "programs", m, u, False, what) for m, u in (
            ("time", "s"), (CPU.label, "s"), (MINFLT.label, "faults"), ("peak RSS", "MiB"))]
        for rnd in range(ctx.rounds):
            for a in round_order(self.allocs, rnd):
                # a new empty working directory each run: `-m test` puts it first on
                # sys.path and lists it, and the scratch directory holds what the rows
                # before left there (sqlite's database, callgrind's and strace's outputs,
                # the redis and cwd.* directories): liballoc's faults moved 8,598-8,957
                # with 0-200 files there
                res = run_process(CPYTHON_TEST + tests, cpython_env(ctx, a), ctx.timeout,
                                  cwd=ctx.empty_dir())
                if res.ok and "Tests result: SUCCESS" not in res.stdout:
                    res.ok, res.failure = False, "tests failed"
                if res.ok:
                    for r, v in zip(rows, (res.wall, res.cpu, float(res.minflt),
                                           res.maxrss_kb * KB_TO_MIB)):
                        r.cell(a.name).values.append(v)
                else:
                    for r in rows:
                        r.cell(a.name).failures.append(res.failure)
                    self.record_failure("cpython", a.name, res)
            self.progress("%-20s round %d/%d" % ("cpython", rnd + 1, ctx.rounds))

    def run_callgrind_programs(self):
        """Instructions of whole single-threaded programs (callgrind: every library's
        instructions, the program's own included); one run each, they are deterministic."""
        ctx = self.ctx
        if not self.selected("instructions") or not shutil.which("valgrind"):
            return
        for name, argv in callgrind_programs(ctx):
            if argv[0] == PYTHON and not os.access(PYTHON, os.X_OK):
                continue
            r = self.row(name, "instructions", "instructions (whole program)", "Ir", False,
                         "callgrind of `%s`: instructions of the whole run, every library "
                         "included" % " ".join([os.path.basename(argv[0])] + argv[1:]))
            for a in self.allocs:
                out = os.path.join(ctx.tmp, "callgrind.%s.%s" % (name, a.name))
                # CPython: the timed row's fixed environment (cpython_env), not the
                # caller's: the heap CPython builds at start holds os.environ, so the
                # caller's variables were instructions of the row
                env = cpython_env(ctx, a) if argv[0] == PYTHON else ctx.env(a)
                res = run_process(["valgrind", "--tool=callgrind", "--callgrind-out-file=" +
                                   out] + argv, env, ctx.timeout * 2, cwd=ctx.empty_dir())
                ir = parse_callgrind(out) if res.ok else None
                if ir is None:
                    res.failure = res.failure or "no callgrind total"
                    r.cell(a.name).failures.append(res.failure)
                    self.record_failure(name + " (callgrind)", a.name, res)
                else:
                    r.cell(a.name).values.append(float(ir))
            self.progress("%-20s callgrind" % name)

    def add_geomeans(self):
        """Summary rows: each allocator's geometric mean, over the workloads every allocator
        ran, of its CPU time and of its peak RSS, both relative to glibc's."""
        if "glibc" not in self.names:
            return
        sets = (("CPU time vs glibc", lambda r: r.metric.endswith(CPU.label)),
                ("peak RSS vs glibc", lambda r: r.metric in ("peak RSS", "server peak RSS")))
        for label, pick in sets:
            ratios = {n: [] for n in self.names}
            used = []
            for r in self.rows:
                if r.group in ("overhead", "summary") or not pick(r):
                    continue
                meds = {n: r.median(n) for n in self.names}
                if any(v is None or v <= 0 for v in meds.values()):
                    continue
                used.append(r.scenario)
                for n in self.names:
                    ratios[n].append(meds[n] / meds["glibc"])
            if not used:
                continue
            row = self.row("geomean", "summary", "%s (%d workloads)" % (label, len(used)),
                           "x", False, "geometric mean over the workloads that every allocator "
                           "ran (%s) of each allocator's median divided by glibc's"
                           % ", ".join(used))
            for n in self.names:
                row.cell(n).values.append(math.exp(sum(math.log(x) for x in ratios[n]) /
                                                   len(ratios[n])))

    # -- liballoc-only figures (hooks) ------------------------------------------------------
    def extra(self, section, item, value, unit="", note=""):
        self.extras.append((section, item, value, unit, note))

    def hook_liballoc_stats_overhead(self):
        """Issue 5: throughput of liballoc with statistics and the control thread versus a
        build with them compiled out (make LA_NO_STATS=1 BUILD=build/nostats)."""
        ctx = self.ctx
        sec = "statistics overhead"
        nostats = os.path.join(ctx.build, "nostats", "liballoc.so")
        if "liballoc" not in self.names:
            self.extra(sec, "all", "n/a", "", "liballoc.so not built")
            return
        if not (os.path.exists(nostats) and exports_malloc(nostats)):
            self.extra(sec, "all", "n/a", "", "%s not built" % nostats)
            return
        la = Allocator("liballoc", os.path.join(ctx.build, "liballoc.so"), None)
        ns = Allocator("liballoc-nostats", nostats, None)
        if sha256_file(la.lib) == sha256_file(ns.lib):
            self.extra(sec, "all", "n/a", "", "the LA_NO_STATS=1 build is byte-identical to "
                       "the default one: nothing is compiled out yet")
            return
        if shutil.which("valgrind"):
            irs = {}
            for a in (la, ns):
                irs[a.name], res = self.callgrind_per_pair(a, 20000, 220000)
                if irs[a.name] is None:
                    self.extra(sec, "fast-path instructions", "FAIL", "", "%s: %s" % (
                        a.name, res.failure))
                    break
            else:
                self.extra(sec, "fast-path instructions per malloc+free",
                           "%+.1f" % ((irs["liballoc"] / irs["liballoc-nostats"] - 1) * 100),
                           "%", "callgrind: %.1f Ir with statistics, %.1f Ir without" % (
                               irs["liballoc"], irs["liballoc-nostats"]))
            # a whole single-threaded workload, counted the same way: stable on a busy host
            totals = {}
            for a in (la, ns):
                out = os.path.join(ctx.tmp, "callgrind.churn.%s" % a.name)
                res = run_process(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out,
                                   ctx.prog("churn"), "10000", "2000000"], ctx.env(a),
                                  ctx.timeout * 2, cwd=ctx.empty_dir())
                totals[a.name] = parse_callgrind(out) if res.ok else None
            if None in totals.values():
                self.extra(sec, "churn-1t instructions", "FAIL", "", "callgrind run failed")
            else:
                self.extra(sec, "churn-1t instructions (whole run)",
                           "%+.1f" % ((totals["liballoc"] / totals["liballoc-nostats"] - 1)
                                      * 100), "%",
                           "callgrind of churn 10000 2000000: %s Ir with statistics, %s "
                           "without" % (fmt_num(totals["liballoc"]),
                                        fmt_num(totals["liballoc-nostats"])))
        pick = [s for s in scenarios(ctx) if s.name in ("larson-2t", "larson-1t", "churn-1t",
                                                        "xmalloc")]
        rounds = max(ctx.rounds, 3 if ctx.quick else 7)
        for sc in pick:
            r = self.row(sc.name + " (stats)", "overhead", "throughput", "ops/s", True,
                         "liballoc vs liballoc built with LA_NO_STATS=1: " + sc.what)
            for rnd in range(rounds):
                for a in round_order([la, ns], rnd):
                    res = run_process(sc.argv(), ctx.env(a), ctx.timeout, cwd=ctx.tmp)
                    v = res.value("ops_per_sec") if res.ok else None
                    if v is None:
                        r.cell(a.name).failures.append(res.failure or "no value")
                    else:
                        r.cell(a.name).values.append(v)
            ratio = r.ratio("liballoc-nostats", "liballoc")
            self.extra(sec, sc.name + " throughput cost",
                       "-" if ratio is None else "%+.1f" % ((ratio - 1) * 100), "%",
                       "vs LA_NO_STATS=1 build; medians of %d interleaved runs; target <= 2%%"
                       % rounds)
            self.progress("%-20s stats overhead" % sc.name)

    def control_tools(self):
        ctx = self.ctx
        d = os.path.join(ctx.build, "allocctld")
        c = os.path.join(ctx.build, "allocctl")
        client = ctx.prog("ctl_client")
        missing = [p for p in (d, c, client) if not os.access(p, os.X_OK)]
        if "liballoc" not in self.names:
            missing.append("liballoc.so")
        return d, client, missing

    def start_daemon(self, daemon, tag, extra=()):
        """allocctld in the foreground on a private socket, run directory and HTTP port.
        Returns (Popen, socket path, port) or raises RuntimeError with the reason."""
        ctx = self.ctx
        sock = os.path.join(ctx.tmp, "ctl-%s.sock" % tag)
        port = free_port()
        log = open(os.path.join(ctx.tmp, "allocctld-%s.log" % tag), "wb")
        argv = [daemon, "--socket", sock, "--run-dir", self.hook_run_dir(), "--no-default-dirs",
                "--listen", "127.0.0.1:%d" % port] + list(extra)
        proc = subprocess.Popen(argv, env=ctx.base_env, stdout=log, stderr=log,
                                start_new_session=True)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            if os.path.exists(sock):
                return proc, sock, port
            time.sleep(0.02)
        stop_group(proc)
        log.close()
        with open(log.name, errors="replace") as f:
            tail = " | ".join(f.read().strip().splitlines()[-2:])[:200]
        raise RuntimeError("allocctld did not come up with %s (%s)" % (" ".join(argv[1:]),
                                                                     tail or "no output"))

    def hook_run_dir(self):
        """Segments of the processes the control hooks start, watched by their daemon."""
        d = os.path.join(self.ctx.tmp, "hook-segments")
        os.makedirs(d, mode=0o700, exist_ok=True)
        return d

    def run_hook(self, fn, section):
        """A hook never stops the suite: an unexpected error becomes its result."""
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - report, never abort
            self.extra(section, "all", "FAIL", "", "hook error: %s: %s" % (
                type(e).__name__, str(e)[:200]))

    def order_rows(self):
        """Rows of one scenario together (strace rows were added after the timed ones)."""
        order = {}
        for r in self.rows:
            order.setdefault(r.scenario, len(order))
        self.rows.sort(key=lambda r: order[r.scenario])

    def start_holders(self, count, mb, extra=None):
        ctx = self.ctx
        la = os.path.join(ctx.build, "liballoc.so")
        env = ctx.env(None, {"LD_PRELOAD": la, "LIBALLOC_RUN_DIR": self.hook_run_dir()})
        env.update(extra or {})
        procs = []
        for _ in range(count):
            procs.append(subprocess.Popen([ctx.prog("idle_holder"), str(mb), "65536"],
                                          env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                          start_new_session=True))
        deadline = time.monotonic() + 60
        try:
            for p in procs:
                left = deadline - time.monotonic()
                ready, _, _ = select.select([p.stdout], [], [], max(left, 0))
                line = p.stdout.readline().decode(errors="replace") if ready else ""
                if not line.startswith("ready"):
                    raise RuntimeError("idle_holder %d under liballoc did not get ready "
                                       "(exit status %s)" % (p.pid, p.poll()))
        except RuntimeError:
            for p in procs:
                stop_group(p)
            raise
        return procs

    def hook_control_latency(self):
        """Issue 5: `set` round trip against an idle process (p50/p99), and `trim` of 1 GiB
        of free memory. Runs only when allocctld, allocctl and liballoc.so exist."""
        sec = "command latency"
        daemon, client, missing = self.control_tools()
        if missing:
            self.extra(sec, "all", "n/a", "", "missing: " + ", ".join(
                os.path.relpath(m, self.ctx.root) if m.startswith("/") else m
                for m in missing))
            return
        procs, holder = [], None
        try:
            d, sock, _ = self.start_daemon(daemon, "latency")
            procs.append(d)
            # keep the freed GiB resident until the trim: no trim threshold, no decay
            holder = self.start_holders(1, 1024, {"LIBALLOC_TRIM_THRESHOLD": str(1 << 40),
                                                  "LIBALLOC_DECAY_MS": "0"})[0]
            procs.append(holder)
            wait_segments(self.hook_run_dir(), 1, 10)
            wait_listed(client, sock, 1, 10)
            # the daemon may need a rescan before it sees the process's control thread
            deadline = time.monotonic() + 10
            while True:
                res = run_process([client, sock, "set", str(holder.pid), "decay_ms", "10000",
                                   "1"], self.ctx.base_env, 30)
                if res.ok or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            count = 200 if self.ctx.quick else 1000
            res = run_process([client, sock, "set", str(holder.pid), "decay_ms", "10000",
                               str(count)], self.ctx.base_env, 120)
            if res.ok:
                for k in ("p50_ms", "p99_ms", "max_ms"):
                    self.extra(sec, "set round trip " + k[:-3], res.values.get(k, "-"), "ms",
                               "%d sequential sets on one connection%s" % (
                                   count, "; target p99 <= 2 ms" if k == "p99_ms" else ""))
            else:
                self.extra(sec, "set round trip", "FAIL", "", res.failure + ": " +
                           res.stderr.strip()[:150])
            rss0 = proc_status_kb(holder.pid, "VmRSS")
            res = run_process([client, sock, "trim", str(holder.pid)], self.ctx.base_env, 120)
            rss1 = proc_status_kb(holder.pid, "VmRSS")
            if res.ok:
                self.extra(sec, "trim of 1 GiB free: time", res.values.get("wall_ms", "-"),
                           "ms", "round trip; in-process %s ms; 1 GiB freed in 64 KiB blocks "
                           "between live 64 B blocks, LIBALLOC_TRIM_THRESHOLD=1T "
                           "LIBALLOC_DECAY_MS=0" % res.values.get("duration_ms", "-"))
                self.extra(sec, "trim of 1 GiB free: released",
                           fmt_num(float(res.values.get("bytes_released", 0)) / 2**20, "MiB"),
                           "MiB", "RSS %s -> %s MiB" % (fmt_num(rss0 / 1024, "MiB"),
                                                       fmt_num(rss1 / 1024, "MiB")))
            else:
                self.extra(sec, "trim", "FAIL", "", res.failure + ": " + res.stderr.strip()[:150])
        except RuntimeError as e:
            self.extra(sec, "all", "n/a", "", str(e))
        finally:
            for p in procs:
                stop_group(p)
            # killed processes leave stale segments behind: start the next hook clean
            shutil.rmtree(self.hook_run_dir(), ignore_errors=True)
        self.progress("control latency")

    def hook_daemon_scale(self):
        """Issue 6: with many preloaded processes: discovery time, one /metrics scrape,
        daemon RSS and CPU at idle, one `set` applied to all."""
        sec = "daemon scale"
        daemon, client, missing = self.control_tools()
        if missing:
            self.extra(sec, "all", "n/a", "", "missing: " + ", ".join(
                os.path.relpath(m, self.ctx.root) if m.startswith("/") else m
                for m in missing))
            return
        n = 100 if self.ctx.quick else 500
        procs = []
        try:
            # processes starting under a running daemon
            d0, sock0, _ = self.start_daemon(daemon, "scale0")
            procs.append(d0)
            t_launch = time.monotonic()
            procs += self.start_holders(n, 1)
            wait_segments(self.hook_run_dir(), n, 10)
            t_ready = time.monotonic()
            seen = wait_listed(client, sock0, n, 30)
            self.extra(sec, "%d processes started: all listed" % n,
                       "%.0f" % ((time.monotonic() - t_ready) * 1000), "ms",
                       "after the last one published its segment (starting all %d took %.0f "
                       "ms); target <= 1 s" % (n, (t_ready - t_launch) * 1000))
            stop_group(d0)
            # a daemon (re)started beside n existing processes
            t0 = time.monotonic()
            d, sock, port = self.start_daemon(daemon, "scale")
            procs.append(d)
            seen = wait_listed(client, sock, n, 30)
            self.extra(sec, "daemon started beside %d processes: all listed" % n,
                       "%.0f" % ((time.monotonic() - t0) * 1000), "ms",
                       "from daemon start; %d listed" % seen)
            times = []
            for _ in range(5):
                t1 = time.monotonic()
                with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port,
                                            timeout=10) as resp:
                    body = resp.read()
                times.append((time.monotonic() - t1) * 1000)
            self.extra(sec, "/metrics scrape", "%.1f" % statistics.median(times), "ms",
                       "median of 5, max %.1f ms, %d KiB; target <= 100 ms" % (
                           max(times), len(body) // 1024))
            cpu0 = proc_cpu_ticks(d.pid)
            time.sleep(3)
            cpu1 = proc_cpu_ticks(d.pid)
            hz = os.sysconf("SC_CLK_TCK")
            self.extra(sec, "daemon CPU at idle", "%.2f" % ((cpu1 - cpu0) / hz / 3 * 100), "%",
                       "over 3 s with %d processes" % n)
            self.extra(sec, "daemon RSS", fmt_num(proc_status_kb(d.pid, "VmRSS") / 1024,
                                                   "MiB"), "MiB", "")
            res = run_process([client, sock, "setall", "decay_ms", "10000"],
                              self.ctx.base_env, 60)
            if res.ok:
                self.extra(sec, "set on all", res.values.get("wall_ms", "-"), "ms",
                           "%s of %s ok; target <= 1 s for 500" % (res.values.get("ok"),
                                                                    res.values.get("results")))
            else:
                self.extra(sec, "set on all", "FAIL", "", res.failure)
        except (RuntimeError, OSError) as e:
            self.extra(sec, "all", "n/a", "", str(e)[:200])
        finally:
            for p in procs:
                stop_group(p)
            # killed processes leave stale segments behind: start the next hook clean
            shutil.rmtree(self.hook_run_dir(), ignore_errors=True)
        self.progress("daemon scale")


    def hook_history(self):
        """Issue 21: the daemon's history with 200 preloaded processes: time (and CPU) per
        sample per process, history memory per process, and the dashboard's load time in
        headless Chromium. Samples every 100 ms for 90 s (QUICK: 30 s), so each process has
        900 (300) samples in the fine ring when the page loads: the whole 15-minute window
        of the default 1 s period."""
        sec = "history"
        daemon, client, missing = self.control_tools()
        if missing:
            self.extra(sec, "all", "n/a", "", "missing: " + ", ".join(
                os.path.relpath(m, self.ctx.root) if m.startswith("/") else m
                for m in missing))
            return
        sys.path.insert(0, os.path.join(self.ctx.root, "tests", "browser"))
        import cdp  # noqa: E402 - the tests' DevTools client (python3 only)
        n, secs, period = 200, (30 if self.ctx.quick else 90), 100
        conf = os.path.join(self.ctx.tmp, "history.conf")
        procs = []
        try:
            procs += self.start_holders(n, 1)
            wait_segments(self.hook_run_dir(), n, 10)
            with open(conf, "w") as f:
                f.write("history_sample_ms = %d\n" % period)
            d, sock, port = self.start_daemon(daemon, "history", ["--config", conf])
            procs.append(d)
            url = "http://127.0.0.1:%d" % port

            def daemon_info():
                with urllib.request.urlopen(url + "/api/history?samples=0", timeout=10) as r:
                    return json.load(r)["daemon"]
            deadline = time.monotonic() + 60
            while daemon_info()["processes"] < n:
                if time.monotonic() > deadline:
                    raise RuntimeError("the daemon found %d of %d processes in 60 s" % (
                        daemon_info()["processes"], n))
                time.sleep(0.1)
            time.sleep(1)
            a, cpu0, t0 = daemon_info(), proc_cpu_ticks(d.pid), time.monotonic()
            time.sleep(secs)
            b, cpu1, t1 = daemon_info(), proc_cpu_ticks(d.pid), time.monotonic()
            taken = b["samples_taken"] - a["samples_taken"]
            hz = os.sysconf("SC_CLK_TCK")
            self.extra(sec, "time per sample per process",
                       "%.1f" % ((b["sample_ns"] - a["sample_ns"]) / max(taken, 1) / 1000), "us",
                       "%d samples of %d processes over %.0f s (every %d ms), measured inside "
                       "the sampler" % (taken, n, t1 - t0, period))
            self.extra(sec, "daemon CPU per sample per process",
                       "%.1f" % ((cpu1 - cpu0) / hz / max(taken, 1) * 1e6), "us",
                       "all of the daemon's CPU (utime+stime) over the same time, divided by the "
                       "samples: an upper bound; %.1f%% of a core at a %d ms period, %.2f%% at "
                       "the default 1 s" % ((cpu1 - cpu0) / hz / (t1 - t0) * 100, period,
                                            (cpu1 - cpu0) / hz / (t1 - t0) * 100 * period / 1000))
            self.extra(sec, "history memory per process",
                       "%.0f" % (b["history_bytes"] / n), "bytes",
                       "%d processes with %d samples each in the fine ring; bound at full "
                       "retention (24 h) 66,096 bytes (tests/ctld/history.c)" % (
                           n, min(900, taken // n)))
            # the page: load until every row and the default charts are drawn
            prof = os.path.join(self.ctx.tmp, "chromium-history")
            want = ("(() => { const S = window.allocDashboard; return S && S.connected && "
                    "document.querySelectorAll('#procs tr.proc').length >= %d && "
                    "S.charts.size >= 1 && [...S.charts.values()].every((c) => c.points > 0); "
                    "})()" % n)
            times, views = [], []
            with cdp.Browser(prof) as br:
                page = br.new_page(1400, 1000)
                for i in range(4):
                    t2 = time.monotonic()
                    if i == 0:
                        page.navigate(url + "/")
                    else:
                        page.reload()
                    page.wait_for(want, timeout=60, interval=0.01)
                    times.append((time.monotonic() - t2) * 1000)
                    # the page's own clock: navigation start to its first complete view
                    views.append(page.eval("window.allocDashboard.firstView") or 0)
                errors = [e for _, e in page.errors]
            self.extra(sec, "page load with %d processes" % n,
                       "%.0f" % statistics.median(views[1:]), "ms",
                       "median of 3 reloads (first load %.0f ms), by the page's clock: "
                       "navigation to its first complete view (all %d rows, the charts); seen "
                       "from the test %.0f ms; headless Chromium; %d samples per process in "
                       "the fine ring%s" % (views[0], n, statistics.median(times[1:]),
                                            min(900, taken // n),
                                            "; console errors: " + "; ".join(errors)[:120]
                                            if errors else ""))
        except (RuntimeError, OSError, cdp.CDPError) as e:
            self.extra(sec, "all", "n/a", "", str(e)[:200])
        finally:
            for p in procs:
                stop_group(p)
            shutil.rmtree(self.hook_run_dir(), ignore_errors=True)
        self.progress("history")
    def hook_daemon_attacks(self):
        """Issue 18: beside the daemon scale figures, root's `allocctl ps` latency (p50/p99,
        goal p99 <= 100 ms) and the daemon's peak RSS (goal <= 64 MiB) under each attack of
        a local user, and /metrics time and size with 5,000 processes
        (ctld/attack-bench.sh, which needs root: nobody runs the attacks)."""
        sec = "daemon under attack"
        ctx = self.ctx
        script = os.path.join(ctx.root, "ctld", "attack-bench.sh")
        need = [os.path.join(ctx.build, p) for p in ("allocctld", "allocctl", "tests/massseg",
                                                      "tests/ctlclient")]
        missing = [os.path.relpath(p, ctx.root) for p in need if not os.access(p, os.X_OK)]
        if os.geteuid() != 0:
            missing.append("root")
        if missing:
            self.extra(sec, "all", "n/a", "", "missing: " + ", ".join(missing))
            return
        n, runs = (100, 30) if ctx.quick else (500, 100)
        env = dict(ctx.base_env, ROOT=ctx.root, BUILD=ctx.build)
        res = run_process(["bash", script, str(n), str(runs)], env, 900)
        load = os.getloadavg()[0]
        for line in res.stdout.splitlines():
            if not line.startswith("attack="):
                continue
            kv = dict(f.split("=", 1) for f in line.split() if "=" in f)
            name = kv.pop("attack")
            self.extra(sec, name + ": allocctl ps p99", kv.get("ps_p99_ms", "-"), "ms",
                       "p50 %s, max %s ms over %d runs beside %d processes (allocctl's own "
                       "start included); load %.1f; goal <= 100 ms" % (
                           kv.get("ps_p50_ms", "-"), kv.get("ps_max_ms", "-"), runs, n, load))
            self.extra(sec, name + ": whole list, daemon side, p99", kv.get("list_p99_ms", "-"),
                       "ms", "p50 %s, max %s ms: every page of the list on one connection "
                       "(no process start); daemon CPU %s ms per ps" % (
                           kv.get("list_p50_ms", "-"), kv.get("list_max_ms", "-"),
                           kv.get("daemon_cpu_ms_per_ps", "-")))
            self.extra(sec, name + ": daemon peak RSS", kv.get("daemon_peak_rss_mib", "-"),
                       "MiB", "VmHWM of a daemon started for this attack; goal <= 64 MiB")
            if "metrics_ms" in kv:
                self.extra(sec, "/metrics with 5,000 processes", kv["metrics_ms"], "ms",
                           "%s MiB, streamed in 2 ms slices" % kv.get("metrics_mib", "-"))
            if "healthz" in kv:
                self.extra(sec, name + ": /healthz", kv["healthz"], "",
                           "answered in %s ms under 2,000 slow connections" %
                           kv.get("healthz_ms", "-"))
        if not res.ok:
            self.extra(sec, "attack-bench.sh", "FAIL", "", (res.failure or "") + ": " +
                       res.stderr.strip()[-150:])
        self.progress("daemon under attack")

    def hook_containers(self):
        """Issue 22: /metrics series, size and scrape time with N preloaded processes of 5
        services in metrics_mode pid and service, and the discovery delay of a process in
        a new pid namespace beside one in the daemon's (ctld/containers-bench.sh; root)."""
        sec = "containers and fleets"
        ctx = self.ctx
        script = os.path.join(ctx.root, "ctld", "containers-bench.sh")
        need = [os.path.join(ctx.build, p) for p in ("allocctld", "liballoc.so", "tests/ctlclient")]
        missing = [os.path.relpath(p, ctx.root) for p in need if not os.path.exists(p)]
        if os.geteuid() != 0:
            missing.append("root")
        if missing:
            self.extra(sec, "all", "n/a", "", "missing: " + ", ".join(missing))
            return
        n, runs = (100, 3) if ctx.quick else (500, 5)
        env = dict(ctx.base_env, ROOT=ctx.root, BUILD=ctx.build)
        res = run_process(["bash", script, str(n), "5", str(runs)], env, 900)
        for line in res.stdout.splitlines():
            kv = dict(f.split("=", 1) for f in line.split() if "=" in f)
            if "mode" in kv:
                self.extra(sec, "/metrics, metrics_mode %s: series" % kv["mode"],
                           kv.get("series", "-"), "",
                           "%s processes of %s services, %s bytes" % (
                               kv.get("processes", "-"), kv.get("services", "-"),
                               kv.get("bytes", "-")))
                self.extra(sec, "/metrics, metrics_mode %s: scrape" % kv["mode"],
                           kv.get("scrape_ms_p50", "-"), "ms",
                           "median of %d, max %s ms" % (runs, kv.get("scrape_ms_max", "-")))
            elif "discovery" in kv:
                self.extra(sec, "discovery delay, process in the %s pid namespace" % (
                               "daemon's" if kv["discovery"] == "host" else "a new"),
                           kv.get("delay_ms_p50", "-"), "ms",
                           "median of 10, max %s ms: segment published to daemon's log line" %
                           kv.get("delay_ms_max", "-"))
        if not res.ok:
            self.extra(sec, "containers-bench.sh", "FAIL", "", (res.failure or "") + ": " +
                       res.stderr.strip()[-150:])
        self.progress("containers and fleets")


# ---------------------------------------------------------------------------------------
# Helpers of the real-program and control scenarios
# ---------------------------------------------------------------------------------------

def parse_strace(path):
    counts = {}
    try:
        with open(path) as f:
            for line in f:
                tok = line.split()
                if len(tok) >= 5 and tok[0][0].isdigit() and tok[-1] != "total":
                    try:
                        counts[tok[-1]] = int(tok[3])
                    except ValueError:
                        pass
    except OSError:
        pass
    return counts


def parse_callgrind(path):
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("summary:") or line.startswith("totals:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_group(proc, grace=3.0):
    """SIGTERM the process group, SIGKILL after grace seconds, reap."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
    for f in (proc.stdout, proc.stderr):
        if f:
            f.close()


def proc_status_kb(pid, field):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def proc_cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def wait_segments(run_dir, n, timeout):
    """Wait until n liballoc segments exist in run_dir (the processes published them)."""
    deadline = time.monotonic() + timeout
    while True:
        count = sum(1 for f in os.listdir(run_dir) if f.endswith(".seg"))
        if count >= n:
            return count
        if time.monotonic() > deadline:
            raise RuntimeError("%d of %d preloaded processes published a segment in %s" % (
                count, n, run_dir))
        time.sleep(0.02)


def wait_listed(client, sock, n, timeout):
    """Poll the daemon until it lists at least n processes; returns the count seen."""
    deadline = time.monotonic() + timeout
    seen = 0
    while time.monotonic() < deadline:
        res = subprocess.run([client, sock, "list"], capture_output=True, text=True, timeout=10)
        m = re.search(r"processes=(\d+)", res.stdout)
        seen = int(m.group(1)) if m else 0
        if seen >= n:
            return seen
        time.sleep(0.01)
    raise RuntimeError("daemon listed %d of %d processes after %ds" % (seen, n, timeout))


def redis_cmd(port, cmd, timeout=2.0):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(cmd.encode() + b"\r\n")
        return s.recv(64)


def redis_once(ctx, alloc, preload, server, client, n, tests):
    """One redis round: start the preloaded server, benchmark it, stop it. Returns
    (ok, geomean rps, the server's rusage, failure). The server is always stopped."""
    port = free_port()
    rdir = tempfile.mkdtemp(prefix="redis.", dir=ctx.tmp)
    log = open(os.path.join(rdir, "server.log"), "wb")
    argv = [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", rdir, "--daemonize", "no", "--protected-mode", "no",
            "--unixsocket", ""]
    proc = None
    try:
        proc = subprocess.Popen(argv, env=ctx.env(alloc, preload=preload), stdout=log,
                                stderr=log, start_new_session=True)
        deadline = time.monotonic() + 10
        up = False
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if redis_cmd(port, "PING").startswith(b"+PONG"):
                    up = True
                    break
            except OSError:
                time.sleep(0.02)
        if not up:
            return False, None, None, "server did not start"
        res = run_process([client, "-h", "127.0.0.1", "-p", str(port), "-n", str(n), "-c", "16",
                           "-r", "100000", "-d", "256", "-t", tests, "--csv"], ctx.base_env,
                          ctx.timeout)
        if not res.ok:
            return False, None, None, "redis-benchmark " + res.failure
        rps = []
        for line in res.stdout.splitlines():
            cols = [c.strip('"') for c in line.split(",")]
            if len(cols) >= 2 and cols[0] != "test":
                try:
                    rps.append(float(cols[1]))
                except ValueError:
                    pass
        if not rps:
            return False, None, None, "no redis-benchmark result"
        if proc.poll() is not None:
            return False, None, None, "server died"
        try:
            redis_cmd(port, "SHUTDOWN NOSAVE")
        except OSError:
            pass
        deadline = time.monotonic() + 10
        status = None
        while time.monotonic() < deadline:
            pid, st, ru = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                status = st
                proc.returncode = os.waitstatus_to_exitcode(st)
                break
            time.sleep(0.02)
        if status is None:
            return False, None, None, "server did not shut down"
        geo = math.exp(sum(math.log(x) for x in rps) / len(rps))
        return True, geo, ru, None
    finally:
        if proc is not None:
            stop_group(proc)
        log.close()
        shutil.rmtree(rdir, ignore_errors=True)


def write_sqlite_workload(path, n):
    """A deterministic SQL script: bulk inserts, index builds, updates, deletes, selects."""
    rng = random.Random(1234)
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
             "india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa"]
    with open(path, "w") as f:
        f.write("PRAGMA cache_size=-16000;\nPRAGMA journal_mode=DELETE;\n")
        f.write("CREATE TABLE item(id INTEGER PRIMARY KEY, k INTEGER, name TEXT, "
                "payload TEXT);\n")
        f.write("CREATE TABLE tag(item INTEGER, tag TEXT);\n")
        f.write("BEGIN;\n")
        for i in range(n):
            name = " ".join(rng.choice(words) for _ in range(rng.randint(1, 6)))
            payload = "%x" % rng.getrandbits(rng.choice((64, 256, 1024, 4096)))
            f.write("INSERT INTO item VALUES(%d,%d,'%s','%s');\n" % (
                i, rng.randint(0, 9999), name, payload))
            if i % 3 == 0:
                f.write("INSERT INTO tag VALUES(%d,'%s');\n" % (i, rng.choice(words)))
        f.write("COMMIT;\n")
        f.write("CREATE INDEX item_k ON item(k);\nCREATE INDEX item_name ON item(name);\n")
        f.write("CREATE INDEX tag_tag ON tag(tag);\n")
        f.write("BEGIN;\n")
        for _ in range(n // 2):
            f.write("UPDATE item SET name = name || ' %s', payload = '%x' WHERE id = %d;\n" % (
                rng.choice(words), rng.getrandbits(rng.choice((64, 512, 2048))),
                rng.randrange(n)))
        f.write("COMMIT;\n")
        f.write("DELETE FROM item WHERE k % 7 = 3;\n")
        f.write("DELETE FROM tag WHERE item NOT IN (SELECT id FROM item);\n")
        f.write("SELECT count(*), sum(length(payload)) FROM item;\n")
        f.write("SELECT k % 100 AS b, count(*), max(length(name)) FROM item GROUP BY b "
                "ORDER BY 2 DESC, 1 LIMIT 5;\n")
        f.write("SELECT t.tag, count(*), avg(length(i.payload)) FROM tag t JOIN item i ON "
                "i.id = t.item GROUP BY t.tag ORDER BY t.tag;\n")
        f.write("SELECT id, name FROM item ORDER BY name, id LIMIT 3 OFFSET %d;\n" % (n // 4))
        f.write("SELECT group_concat(name, '|') FROM (SELECT name FROM item ORDER BY "
                "length(payload) DESC, id LIMIT 200);\n")
        f.write("VACUUM;\nSELECT count(*) FROM item;\n")


# ---------------------------------------------------------------------------------------
# Reports
# ---------------------------------------------------------------------------------------

def print_extras(extras, out=sys.stdout):
    if not extras:
        return
    print("\nliballoc-only figures (statistics overhead, control path, daemon scale)",
          file=out)
    w = max(len("%s: %s" % (s, i)) for s, i, _, _, _ in extras)
    for s, i, v, u, n in extras:
        print("  %s  %s %s%s" % (("%s: %s" % (s, i)).ljust(w), v, u,
                                  ("  (%s)" % n) if n else ""), file=out)


def behind_rows(rows, names):
    """Rows where liballoc is not ahead: behind the best competitor or behind glibc."""
    if "liballoc" not in names:
        return []
    out = []
    for r in rows:
        if r.group == "overhead":
            continue
        c = r.cells.get("liballoc")
        if c is None or c.na:
            continue
        if c.summary() is None:
            out.append((r, "failed: %s" % (c.failures[0] if c.failures else "?")))
            continue
        bname, _ = r.best(competitors_of("liballoc", names))
        rb = r.ratio("liballoc", bname) if bname else None
        rg = r.ratio("liballoc", "glibc")
        if rb is not None and rb < 0.995:
            out.append((r, "%s of %s's" % (fmt_ratio(rb), bname)))
        elif rg is not None and rg < 0.995:
            out.append((r, "%s of glibc's" % fmt_ratio(rg)))
    return out


def dpkg_version(pkg):
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True,
                             text=True, timeout=10).stdout.strip()
        return out or "not installed"
    except OSError:
        return "?"


def machine_info():
    info = {"cores": os.cpu_count(), "kernel": platform.release(), "cpu": "?", "memory": "?"}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    info["memory"] = "%.1f GiB" % (int(line.split()[1]) / 2**20)
                    break
    except OSError:
        pass
    info["packages"] = {p: dpkg_version(p) for p in (
        "libc6", "libjemalloc2", "libtcmalloc-minimal4", "libmimalloc2.0", "redis-server",
        "sqlite3", "valgrind", "strace", "gnuplot-nox")}
    return info


def md_table(rows, names):
    has_la = "liballoc" in names
    head = ["scenario", "metric"] + names + ["best other"] + (["liballoc vs best"]
                                                              if has_la else []) + ["target"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        if r.group == "overhead":
            continue
        bname, _ = r.best(competitors_of("liballoc", names))
        cells = [r.scenario, "%s [%s] %s" % (r.metric, r.unit, "↑" if r.higher_better
                                                                else "↓")]
        cells += [cell_text(r, n) for n in names] + [bname or "-"]
        if has_la:
            cells.append(fmt_ratio(r.ratio("liballoc", bname)) if bname else "-")
        cells.append(target_text(rows, r, has_la))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def md_minmax(rows, names):
    head = ["scenario", "metric"] + names
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        if r.group == "overhead":
            continue
        lines.append("| " + " | ".join([r.scenario, r.metric] + [minmax_text(r, n)
                                                                  for n in names]) + " |")
    return "\n".join(lines)


def write_markdown(path, meta, rows, names, extras, notes, failures, charts):
    m = meta["machine"]
    out = []
    out.append("# liballoc benchmark results\n")
    out.append("Generated by `%s` — do not edit by hand (bench/run.py writes this file).\n"
               % meta["command"])
    out.append("- date: %s" % meta["date"])
    out.append("- mode: %s, %d round(s) per scenario, interleaved (%s, %s, ...); suite took "
               "%.0f s" % ("QUICK" if meta["quick"] else "full", meta["rounds"],
                           " ".join(names), " ".join(names), meta["seconds"]))
    out.append("- machine: %s cores (%s), %s memory, kernel %s" % (
        m["cores"], m["cpu"], m["memory"], m["kernel"]))
    out.append("- libraries: " + ", ".join("%s %s" % kv for kv in m["packages"].items()))
    out.append("- liballoc: %s" % meta["liballoc"])
    out.append("")
    out.append("Cells: median, and in parentheses how many times better than glibc "
               "(>1.00x: better; for lower-is-better metrics glibc/value). ↑ higher is "
               "better, ↓ lower is better. `!N`: N runs of the cell failed; FAIL(reason): "
               "all failed; n/a: the allocator lacks the feature. *best other* is the best of "
               "glibc/jemalloc/tcmalloc/mimalloc; *liballoc vs best* is how many times better "
               "liballoc is than it.\n")
    out.append("## Results\n")
    out.append(md_table(rows, names))
    out.append("")
    behind = behind_rows(rows, names)
    if "liballoc" in names:
        out.append("## Where liballoc is not ahead\n")
        if behind:
            for r, why in behind:
                out.append("- %s / %s: %s" % (r.scenario, r.metric, why))
        else:
            out.append("- none: liballoc is at least as good as glibc and the best competitor "
                       "on every row.")
        out.append("")
    else:
        out.append("liballoc was not built when this ran: its column is absent.\n")
    if "liballoc" in names:
        out.append("## Issue targets\n")
        for r in rows:
            t = target_text(rows, r, True)
            if t:
                out.append("- %s / %s: %s" % (r.scenario, r.metric, t))
        out.append("")
    if extras:
        out.append("## liballoc-only figures\n")
        out.append("| figure | item | value | unit | note |\n|---|---|---|---|---|")
        for s, i, v, u, n in extras:
            out.append("| %s | %s | %s | %s | %s |" % (s, i, v, u, n.replace("|", "/")))
        out.append("")
    out.append("## Spread (min–max of the runs)\n")
    out.append(md_minmax(rows, names))
    out.append("")
    out.append("## What each scenario measures\n")
    seen = set()
    for r in rows:
        if r.scenario not in seen:
            seen.add(r.scenario)
            out.append("- **%s**: %s" % (r.scenario, r.what))
    out.append("")
    out.append("## Notes\n")
    for n in notes:
        out.append("- " + n)
    out.append("- system-call counts come from separate `strace -f -c` runs (strace distorts "
               "timing); times from the programs' own clocks (sqlite: the runner's wall clock); "
               "peak RSS from GNU time's %M (time runs unpreloaded and starts the program "
               "through env LD_PRELOAD=...) or the program's own VmHWM.")
    out.append("- charts (not committed): " + ", ".join(charts))
    if failures:
        out.append("\n## Failed runs\n")
        for scen, alloc, reason, tail in failures:
            out.append("- %s / %s: %s%s" % (scen, alloc, reason, (" — `%s`" % tail)
                                             if tail else ""))
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def on_terminate(signum, frame):
    raise KeyboardInterrupt


# What --only selects besides the scenarios' names: the programs' rows, and the hooks.
ONLY_OTHERS = ("fastpath", "redis", "sqlite", "cpython", "instructions", "liballoc", "history",
               "policy")


def check_options(ap, args):
    """Refuse a bad option before anything runs (exit 2, argparse's usage line and what was
    wrong): a run that would select nothing or measure fewer allocators than asked for
    would still rewrite results.json."""
    if args.rounds < 0:
        ap.error("--rounds %d: a count of rounds, 1 or more (0: the default, 5; 1 with "
                 "--quick)" % args.rounds)
    known = [name for name, _, _ in COMPETITORS] + ["liballoc"]
    for a in args.allocators.split(","):
        if a and a not in known:
            ap.error("--allocators: unknown allocator '%s' (known: %s)" % (a, ", ".join(known)))
    stub = argparse.Namespace(quick=args.quick, prog=lambda name: name)
    names = [sc.name for sc in scenarios(stub)] + list(ONLY_OTHERS)
    for o in args.only.split(","):
        if o and not any(n.startswith(o) for n in names):
            ap.error("--only: '%s' names no row (a prefix of: %s)" % (o, ", ".join(names)))
    bad = policy_bench.check_environment()
    if bad:
        ap.error(bad)


def main():
    signal.signal(signal.SIGTERM, on_terminate)
    signal.signal(signal.SIGHUP, on_terminate)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=0)
    ap.add_argument("--only", default="", help="comma-separated scenario name prefixes")
    ap.add_argument("--allocators", default="", help="comma-separated allocator names")
    ap.add_argument("--results-md", default="")
    ap.add_argument("--reuse", action="store_true",
                    help="render from the last results.json instead of running")
    args = ap.parse_args()
    check_options(ap, args)
    os.makedirs(os.path.join(os.path.abspath(args.build), "bench"), exist_ok=True)
    outdir = os.path.join(os.path.abspath(args.build), "bench")
    json_path = os.path.join(outdir, "results.json")

    if args.reuse:
        try:
            with open(json_path) as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            ap.error("--reuse: cannot read the last run's %s: %s" % (json_path, e))
        rows = rows_from_json(data["rows"])
        names = data["allocators"]
        extras = [tuple(e) for e in data["extras"]]
        notes, failures, meta = data["notes"], data["failures"], data["meta"]
    else:
        ctx = Context(args)
        wanted = [a for a in args.allocators.split(",") if a]
        allocs = find_allocators(ctx.build, wanted)
        if not allocs:
            ctx.cleanup()
            ap.error("none of the allocators asked for is installed or built")
        only = [o for o in args.only.split(",") if o]
        suite = Suite(ctx, allocs, only)
        print("bench: %s mode, %d round(s), allocators: %s" % (
            "QUICK" if ctx.quick else "full", ctx.rounds, " ".join(suite.names)),
            file=sys.stderr, flush=True)
        t0 = time.monotonic()
        interrupted = False
        try:
            suite.run_workloads()
            suite.run_strace()
            suite.run_callgrind()
            suite.run_redis()
            suite.run_sqlite()
            suite.run_cpython()
            suite.run_callgrind_programs()
            if not only or "liballoc" in only:
                suite.run_hook(suite.hook_liballoc_stats_overhead, "statistics overhead")
                suite.run_hook(suite.hook_control_latency, "command latency")
                suite.run_hook(suite.hook_daemon_scale, "daemon scale")
            if not only or "liballoc" in only or "history" in only:
                suite.run_hook(suite.hook_history, "history")
                suite.run_hook(suite.hook_daemon_attacks, "daemon under attack")
                suite.run_hook(suite.hook_containers, "containers and fleets")
            if not only or "liballoc" in only or "policy" in only:
                suite.run_hook(lambda: policy_bench.run(suite, sys.modules[__name__]),
                               "policy")
        except KeyboardInterrupt:
            interrupted = True
            print("bench: interrupted: reporting what ran", file=sys.stderr)
        finally:
            ctx.cleanup()
        suite.order_rows()
        suite.add_geomeans()
        rows, names, extras = suite.rows, suite.names, suite.extras
        notes, failures = suite.notes, suite.failures
        la = os.path.join(ctx.build, "liballoc.so")
        meta = {"date": datetime.datetime.now(datetime.timezone.utc).strftime(
                    "%Y-%m-%d %H:%M UTC"),
                "quick": ctx.quick, "rounds": ctx.rounds,
                "seconds": time.monotonic() - t0, "machine": machine_info(),
                "command": "make bench-results%s" % (" QUICK=1" if ctx.quick else ""),
                "interrupted": interrupted,
                "liballoc": ("%s (sha256 %s)" % (os.path.relpath(la, ctx.root),
                                                  sha256_file(la)[:12])
                             if "liballoc" in names else "not built")}
        with open(json_path, "w") as f:
            json.dump({"meta": meta, "allocators": names, "rows": rows_to_json(rows),
                       "extras": extras, "notes": notes, "failures": failures}, f, indent=1)

    write_csv(rows, names, os.path.join(outdir, "results.csv"))
    charts = write_charts(rows, names, outdir)
    print("")
    print_table([r for r in rows if r.group != "overhead"], names)
    print_extras(extras)
    if failures:
        print("\nfailed runs:")
        for scen, alloc, reason, tail in failures:
            print("  %s / %s: %s%s" % (scen, alloc, reason, ("  [%s]" % tail) if tail else ""))
    behind = behind_rows(rows, names)
    if behind:
        print("\nwhere liballoc is not ahead:")
        for r, why in behind:
            print("  %s / %s: %s" % (r.scenario, r.metric, why))
    print("\ncells: median (x better than glibc); ^ higher is better, v lower is better; "
          "min-max in %s" % os.path.join(outdir, "results.csv"))
    print("suite took %.0f s; results: %s, %s; charts: %s" % (
        meta["seconds"], os.path.join(outdir, "results.csv"), json_path,
        " ".join(os.path.basename(c) for c in charts) or "none"))
    if args.results_md:
        rel = [os.path.relpath(c, os.path.abspath(args.root)) for c in charts]
        write_markdown(args.results_md, meta, rows, names, extras, notes, failures, rel)
        print("wrote %s" % args.results_md)
    return 0


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


if __name__ == "__main__":
    sys.exit(main())
