"""bench/policy_bench.py — issue 20's figures, side by side with glibc, jemalloc, tcmalloc and
mimalloc (run by bench/run.py; `python3 bench/run.py --only policy` runs these alone).

OOM avoided: a memory cgroup made here (v1 memory controller, or v2 where the host has
one; no swap in it) with a limit L. Service A (tests/helpers/pressure_svc hold) allocates
0.75 L in blocks of 1..64 KiB, frees all but every 32nd block and goes quiet; service B
(pressure_svc grab, as fast as it can) then allocates 0.5 L. Both run under the allocator
of the column. OOM kills (the cgroup's oom_kill count) over RUNS runs per configuration:
every allocator with its defaults (liballoc too), and liballoc tuned to keep its free memory
(LIBALLOC_IDLE_HEAP_RELEASE=0, LIBALLOC_TRIM_THRESHOLD=1G: where a policy has to act) alone,
with allocctld's cgroup policy (high 75 %, low 60 %: flush, release, trim) and with its
in-process watch (LIBALLOC_PRESSURE=on, no daemon). Time from the pressure event to the memory back: the
daemon's policy response (event -> enough back: usage under the policy's low,
`allocctl --json policies` last_response_ns) and the library's own (wake-up -> usage under 75 % of L, `allocctl --json
stats` pressure_response_ns), p50 and p99 over the runs.

Bursty service: pressure_svc burst (bursts to 1 GiB every 30 s, frees it, idles) for 5
minutes (quick: 256 MiB every 10 s for 1 minute); every configuration at once, started a
period/N apart so that their bursts do not overlap; RSS sampled every 100 ms (VmRSS),
integrated (GiB*s); median burst throughput alongside, and the minor faults of the first
burst and the median burst (the service's own thread). liballoc also with a time policy
(allocctld `on = free`: more than 32 MiB reclaimable for 1 s -> release, trim).

Daemon CPU at idle: allocctld with the example configuration's policies and 20 preloaded
idle processes, wake-ups (context switches of all its threads) and CPU over 10 s, against
the same daemon with no policy.

Environment: BENCH_POLICY_RUNS (runs per configuration of the OOM scenario: 20, quick 5),
BENCH_POLICY_ONLY (a comma-separated subset of oom,bursty,idle), BENCH_POLICY_CONFIGS (OOM
scenario: only the configurations whose name contains one of these comma-separated words,
e.g. "policy,watch").
"""

import json
import os
import select
import signal
import statistics
import subprocess
import time

PARTS = ("oom", "bursty", "idle")  # what BENCH_POLICY_ONLY may name


def check_environment():
    """What is wrong with the BENCH_POLICY_* variables, or None (bench/run.py refuses to
    start on it: an unknown part ran nothing, a bad count failed the whole section)."""
    only = os.environ.get("BENCH_POLICY_ONLY")
    if only is not None:
        for p in only.split(","):
            if p not in PARTS:
                return "BENCH_POLICY_ONLY: unknown part '%s' (%s)" % (p, ", ".join(PARTS))
    runs = os.environ.get("BENCH_POLICY_RUNS")
    if runs is not None and not (runs.isdigit() and int(runs) > 0):
        return "BENCH_POLICY_RUNS: '%s' is not a count of runs, 1 or more" % runs
    return None


def _pct(values, q):
    if not values:
        return None
    v = sorted(values)
    k = min(len(v) - 1, max(0, int(round(q * (len(v) - 1)))))
    return v[k]


def _ms(ns):
    return "-" if ns is None else "%.1f" % (ns / 1e6)


class Cgroup:
    """A memory cgroup of the bench's own with a limit; None where none can be made."""

    def __init__(self, tag, limit):
        self.dir = None
        rel = v1 = None
        with open("/proc/self/cgroup") as f:
            for line in f:
                parts = line.rstrip("\n").split(":", 2)
                if len(parts) == 3 and "memory" in parts[1].split(","):
                    rel = parts[2]
        with open("/proc/self/mountinfo") as f:
            mounts = [ln.split() for ln in f]
        for m in mounts:
            sep = m.index("-")
            if m[sep + 1] == "cgroup" and "memory" in m[-1].split(","):
                v1 = m[4]
                break
        if rel is not None and v1:
            self.ver = 1
            self.dir = os.path.join(v1 + rel.rstrip("/"), tag)
        else:
            v2 = next((m[4] for m in mounts if m[m.index("-") + 1] == "cgroup2"), None)
            with open("/proc/self/cgroup") as f:
                rel = next((ln.split(":", 2)[2].strip() for ln in f if ln.startswith("0::")),
                           None)
            if not v2 or rel is None:
                raise RuntimeError("no memory cgroup hierarchy on this host")
            self.ver = 2
            parent = v2 + rel.rstrip("/")
            with open(os.path.join(parent, "cgroup.subtree_control")) as f:
                if "memory" not in f.read().split():
                    raise RuntimeError("memory controller not enabled under " + parent)
            self.dir = os.path.join(parent, tag)
        os.mkdir(self.dir)
        if self.ver == 1:
            self._write("memory.limit_in_bytes", str(limit))
            self._write("memory.swappiness", "0", optional=True)
        else:
            self._write("memory.max", str(limit))
            self._write("memory.swap.max", "0", optional=True)

    def _write(self, name, text, optional=False):
        try:
            with open(os.path.join(self.dir, name), "w") as f:
                f.write(text)
        except OSError:
            if not optional:
                raise

    def oom_kills(self):
        name = "memory.oom_control" if self.ver == 1 else "memory.events"
        with open(os.path.join(self.dir, name)) as f:
            for line in f:
                k, _, v = line.partition(" ")
                if k == "oom_kill":
                    return int(v)
        return 0

    def argv(self, argv):
        """argv run inside the cgroup (it moves itself in, then execs)."""
        return ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', self.dir] + argv

    def remove(self):
        if not self.dir:
            return
        for _ in range(100):
            try:
                os.rmdir(self.dir)
                return
            except OSError:
                time.sleep(0.05)


def _readline(proc, want, timeout):
    """Wait for a line starting with want on proc's stdout (False: exited or timed out)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if not r:
            break
        line = proc.stdout.readline()
        if not line:
            return False
        if line.decode(errors="replace").startswith(want):
            return True
    return False


def _kill(proc):
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


def _ctl_json(allocctl, sock, args, env):
    env = dict(env, ALLOCCTL_SOCKET=sock)
    r = subprocess.run([allocctl, "--json"] + args, env=env, capture_output=True, timeout=30)
    if r.returncode != 0:
        return None
    try:
        return json.loads(r.stdout)
    except ValueError:
        return None


def _listed(allocctl, sock, pid, env, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        d = _ctl_json(allocctl, sock, ["ps"], env)
        procs = d.get("processes", []) if isinstance(d, dict) else (d or [])
        if any(p.get("pid") == pid for p in procs):
            return True
        time.sleep(0.05)
    return False


RETAIN = {"LIBALLOC_IDLE_HEAP_RELEASE": "0", "LIBALLOC_TRIM_THRESHOLD": "1G"}

GUARD_CONF = """[policy guard]
on = cgroup
high = 75%
low = 60%
actions = flush, release, trim
min_interval = 200ms
"""

TIME_CONF = """[daemon]
check_interval_ms = 500
[policy time]
on = free
above = 32M
for = 1s
actions = release, trim
min_interval = 1s
"""


def run(suite, run_mod):
    ctx = suite.ctx
    sec = "policy: OOM avoided"
    svc = os.path.join(ctx.build, "tests", "pressure_svc")
    daemon, _, missing = suite.control_tools()
    allocctl = os.path.join(ctx.build, "allocctl")
    if not os.access(svc, os.X_OK):
        suite.extra(sec, "all", "n/a", "", "missing: build/tests/pressure_svc")
        return
    if os.geteuid() != 0:
        suite.extra(sec, "all", "n/a", "", "needs root to make a memory cgroup")
        return
    parts = os.environ.get("BENCH_POLICY_ONLY", ",".join(PARTS)).split(",")
    if "oom" in parts:
        oom_avoided(suite, run_mod, svc, daemon, allocctl, missing)
    if "bursty" in parts:
        bursty(suite, run_mod, svc, daemon, allocctl, missing)
    if "idle" in parts:
        idle_cpu(suite, run_mod, daemon, missing)


def oom_avoided(suite, run_mod, svc, daemon, allocctl, missing):
    ctx = suite.ctx
    sec = "policy: OOM avoided"
    runs = int(os.environ.get("BENCH_POLICY_RUNS", "5" if ctx.quick else "20"))
    limit = 256 << 20
    la = next((a for a in suite.allocs if a.name == "liballoc"), None)
    configs = [(a.name, a, {}, None) for a in suite.allocs]
    if la:
        # liballoc's defaults give most of A's free memory back as it frees; a service
        # tuned to keep it (as tests/policy/pressure.bats) is where a policy has to act
        configs.append(("liballoc, retaining", la, RETAIN, None))
    if la and not missing:
        configs.append(("liballoc, retaining + allocctld policy", la, RETAIN, GUARD_CONF))
    if la:
        configs.append(("liballoc, retaining + in-process watch", la,
                        dict(RETAIN, LIBALLOC_PRESSURE="on"), ""))
    if not la:
        suite.extra(sec, "liballoc", "n/a", "", "liballoc.so not built")
    pick = [w for w in os.environ.get("BENCH_POLICY_CONFIGS", "").split(",") if w]
    if pick:  # only the configurations whose name contains one of these
        configs = [c for c in configs if any(w in c[0] for w in pick)]
    summary = []
    for name, alloc, extra, conf in configs:
        kills = failed = seen_runs = 0
        lat = []
        d = None
        sock = None
        try:
            if conf is not None:
                conf_path = os.path.join(ctx.tmp, "policy-oom.conf")
                with open(conf_path, "w") as f:
                    f.write(conf)
                # the in-process runs use a daemon with no policy only to read the figure
                d, sock, _ = suite.start_daemon(daemon, "oom", ["--config", conf_path])
            for i in range(runs):
                cg = Cgroup("liballoc-bench-oom.%d.%d" % (os.getpid(), i), limit)
                a = None
                try:
                    env = ctx.env(alloc, dict(extra, LIBALLOC_RUN_DIR=suite.hook_run_dir()))
                    before = cg.oom_kills()
                    a = subprocess.Popen(cg.argv([svc, "hold", str(limit * 3 // 4), "32"]),
                                         env=env, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, start_new_session=True)
                    if not _readline(a, "quiet", 60):
                        failed += 1
                        continue
                    if d and not _listed(allocctl, sock, a.pid, ctx.base_env):
                        failed += 1
                        continue
                    b = subprocess.run(cg.argv([svc, "grab", str(limit // 2), "100"]),
                                       env=env, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL, timeout=120)
                    k = cg.oom_kills() - before
                    kills += 1 if k > 0 or b.returncode != 0 or a.poll() is not None else 0
                    if d and conf:
                        pol = _ctl_json(allocctl, sock, ["policies"], ctx.base_env) or {}
                        for p in pol.get("policies", []):
                            # a run of the ladder in this scenario (the count moved)
                            if p.get("runs", 0) > seen_runs and p.get("last_response_ns"):
                                lat.append(p["last_response_ns"])
                            seen_runs = max(seen_runs, p.get("runs", 0))
                    elif d and a.poll() is None:
                        st = _ctl_json(allocctl, sock, ["stats", str(a.pid)], ctx.base_env)
                        pr = (st or {}).get("process", {})
                        if pr.get("pressure_response_ns"):
                            lat.append(pr["pressure_response_ns"])
                finally:
                    if a:
                        _kill(a)
                    cg.remove()
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
            suite.extra(sec, name, "FAIL", "", str(e)[:200])
            continue
        finally:
            if d:
                run_mod.stop_group(d)
        done = runs - failed
        summary.append((name, kills, done))
        suite.extra(sec, name, "%d/%d" % (kills, done), "OOM-killed",
                    "runs; L = %d MiB, A 0.75 L then B 0.5 L unpaced%s" % (
                        limit >> 20, ", %d runs did not start" % failed if failed else ""))
        if lat:
            suite.extra(sec, name + ": pressure event to memory back",
                        "p50 %s / p99 %s" % (_ms(_pct(lat, 0.5)), _ms(_pct(lat, 0.99))), "ms",
                        "%d runs; goal p99 <= 50 ms; %s" % (
                            len(lat), "the daemon's event -> usage under its low" if conf
                            else "the library's wake-up -> usage under 75% of L"))
        suite.progress("%-28s OOM kills %d/%d" % (name, kills, done))


def _rss_kb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def bursty(suite, run_mod, svc, daemon, allocctl, missing):
    ctx = suite.ctx
    sec = "policy: bursty service"
    if ctx.quick:
        size, period, total = "256M", 10000, 60
    else:
        size, period, total = "1G", 30000, 300
    la = next((a for a in suite.allocs if a.name == "liballoc"), None)
    configs = [(a.name, a, False) for a in suite.allocs]
    if la and not missing:
        configs.append(("liballoc + time policy", la, True))
    d = None
    procs = []
    try:
        if any(t for _, _, t in configs):
            conf_path = os.path.join(ctx.tmp, "policy-time.conf")
            with open(conf_path, "w") as f:
                f.write(TIME_CONF)
            d, sock, _ = suite.start_daemon(daemon, "time", ["--config", conf_path])
        stagger = period / 1000.0 / len(configs)
        for k, (name, alloc, timed) in enumerate(configs):
            # those without the policy in a run dir no daemon watches
            run_dir = suite.hook_run_dir() if timed else ctx.run_dir
            env = ctx.env(alloc, {"LIBALLOC_RUN_DIR": run_dir})
            p = subprocess.Popen([svc, "burst", size, str(period), str(total)], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 start_new_session=True)
            procs.append((name, p, []))
            if k + 1 < len(configs):
                time.sleep(stagger)
        while any(p.poll() is None for _, p, _ in procs):
            now = time.monotonic()
            for _, p, samples in procs:
                if p.poll() is None:
                    kb = _rss_kb(p.pid)
                    if kb is not None:
                        samples.append((now, kb))
            time.sleep(0.1)
        for name, p, samples in procs:
            out = p.stdout.read().decode(errors="replace").splitlines()
            tputs = [float(ln.split()[2]) for ln in out if ln.startswith("burst ")]
            # the burst thread's own minor faults per burst (pressure_svc prints them)
            faults = [int(ln.split()[-2]) for ln in out
                      if ln.startswith("burst ") and ln.endswith(" faults")]
            if p.returncode != 0 or not samples:
                suite.extra(sec, name, "FAIL", "", "exit status %s" % p.returncode)
                continue
            gibs = 0.0
            for (t1, k1), (t2, k2) in zip(samples, samples[1:]):
                gibs += (t2 - t1) * (k1 + k2) / 2 / (1 << 20)
            suite.extra(sec, name, "%.1f" % gibs, "GiB*s",
                        "RSS integral over %d s (bursts of %s every %d s); bursts %s MiB/s "
                        "median of %d%s" % (total, size, period // 1000,
                                            "%.0f" % statistics.median(tputs) if tputs else "-",
                                            len(tputs),
                                            "; minor faults per burst: first %d, median %d"
                                            % (faults[0], statistics.median(faults))
                                            if faults else ""))
            suite.progress("%-28s bursty %.1f GiB*s" % (name, gibs))
    except (RuntimeError, OSError) as e:
        suite.extra(sec, "all", "FAIL", "", str(e)[:200])
    finally:
        for _, p, _ in procs:
            _kill(p)
        if d:
            run_mod.stop_group(d)


def _daemon_switches(pid):
    n = 0
    for t in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/status" % (pid, t)) as f:
            for line in f:
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    n += int(line.split()[1])
    return n


def idle_cpu(suite, run_mod, daemon, missing):
    ctx = suite.ctx
    sec = "policy: daemon at idle"
    if missing:
        suite.extra(sec, "all", "n/a", "", "missing: " + ", ".join(missing))
        return
    example = os.path.join(ctx.root, "ctld", "allocctld.conf.example")
    # the example without its time-sampled policies (on = free|idle): events only
    events_only = os.path.join(ctx.tmp, "policy-events.conf")
    with open(example) as f, open(events_only, "w") as out:
        section = []
        for line in f.read().splitlines(True) + ["[end]\n"]:
            if line.startswith("["):
                body = [ln.split("#")[0].replace(" ", "") for ln in section]
                if not ("on=idle\n" in body or "on=free\n" in body):
                    out.writelines(section)
                section = []
            section.append(line)
    secs = 10
    procs = []
    try:
        procs = suite.start_holders(20, 1)
        run_mod.wait_segments(suite.hook_run_dir(), 20, 10)
        for label, extra in (("no policy", []),
                             ("example's pressure policies (cgroup, psi)",
                              ["--config", events_only]),
                             ("example's policies, with its idle policy (5 s)",
                              ["--config", example])):
            # the example's [daemon] socket and listen are overridden by the flags
            d, _, _ = suite.start_daemon(daemon, "idle", extra)
            try:
                time.sleep(3)  # discovery and profile applications done
                s0, c0 = _daemon_switches(d.pid), run_mod.proc_cpu_ticks(d.pid)
                time.sleep(secs)
                s1, c1 = _daemon_switches(d.pid), run_mod.proc_cpu_ticks(d.pid)
            finally:
                run_mod.stop_group(d)
            hz = os.sysconf("SC_CLK_TCK")
            suite.extra(sec, label, "%d" % (s1 - s0), "wake-ups",
                        "context switches of all its threads over %d s with 20 idle processes "
                        "(rescan every 2 s included); CPU %.2f%%" % (
                            secs, (c1 - c0) / hz / secs * 100))
    except (RuntimeError, OSError) as e:
        suite.extra(sec, "all", "FAIL", "", str(e)[:200])
    finally:
        for p in procs:
            run_mod.stop_group(p)
