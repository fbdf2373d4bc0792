#!/usr/bin/env python3
"""deploycheck.py — checks deploy/ against the real daemon (tests/containers/deploy.bats).

  deploycheck.py manifests DEPLOY HELP CONF_OUT
      Parse every manifest; every allocctld flag they pass must be in HELP (allocctld
      --help); write the ConfigMap's allocctld.conf to CONF_OUT (checked by the daemon);
      the paths must agree: the daemon mounts the host directory its uid_dirs names, each
      preloading pod mounts the library where LD_PRELOAD points (installed there by an init
      container) and its run directory where LIBALLOC_RUN_DIR points: the host's
      <uid_dirs>/<its uid> (a uid the daemon provides) or a volume a sidecar watches.
  deploycheck.py names DEPLOY LIVE_NAMES
      Every metric name in the rules, their tests and the dashboard is one allocctld
      exported (LIVE_NAMES: one per line, from live scrapes), or a recording rule of the
      rules file, or Prometheus's own "up".
  deploycheck.py dashboard-rules DEPLOY OUT
      The dashboard's queries as recording rules (variables replaced) for promtool.
Errors: one line each on stderr, exit 1.
"""
import json
import os
import re
import sys

import yaml

errors = []


def err(msg):
    errors.append(msg)


def load_all(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def pod_specs(docs):
    for d in docs:
        kind = d.get("kind")
        if kind in ("Deployment", "DaemonSet", "StatefulSet", "Job"):
            yield d["metadata"]["name"], d["spec"]["template"]["spec"]
        elif kind == "Pod":
            yield d["metadata"]["name"], d["spec"]


def conf_value(conf, key):
    for line in conf.splitlines():
        m = re.match(r"\s*([a-z_]+)\s*=\s*(.*?)\s*$", line)
        if m and m.group(1) == key:
            return m.group(2)
    return None


def flags_of(container):
    args = list(container.get("command", [])[1:]) + list(container.get("args", []))
    return [a.split("=")[0] for a in args if a.startswith("--")], args


def arg_value(args, flag):
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            return args[i + 1]
    return None


def mount_of(spec, container, path):
    """The volume mounted at the deepest mountPath containing path, and that mountPath."""
    best = None
    for m in container.get("volumeMounts", []):
        mp = m["mountPath"].rstrip("/")
        if path == mp or path.startswith(mp + "/"):
            if not best or len(mp) > len(best[1]):
                best = (m["name"], mp)
    if not best:
        return None, None
    for v in spec.get("volumes", []):
        if v["name"] == best[0]:
            return v, best[1]
    err(f"volume {best[0]} is mounted but not defined")
    return None, None


def env_of(container):
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def manifests(deploy, helpfile, conf_out):
    help_text = open(helpfile).read()
    kdir = os.path.join(deploy, "kubernetes")
    docs = []
    for f in sorted(os.listdir(kdir)):
        if f.endswith((".yaml", ".yml")):
            try:
                for d in load_all(os.path.join(kdir, f)):
                    d["_file"] = f
                    docs.append(d)
            except yaml.YAMLError as e:
                err(f"{f}: does not parse: {e}")
    for f in ("prometheus/podmonitor.yaml", "prometheus/scrape-allocctld.yml",
              "grafana/provisioning/dashboards.yaml"):
        try:
            load_all(os.path.join(deploy, f))
        except yaml.YAMLError as e:
            err(f"{f}: does not parse: {e}")
    confs = [d["data"]["allocctld.conf"] for d in docs
             if d.get("kind") == "ConfigMap" and "allocctld.conf" in d.get("data", {})]
    if len(confs) != 1:
        err(f"expected one ConfigMap with allocctld.conf, found {len(confs)}")
        return
    conf = confs[0]
    with open(conf_out, "w") as f:
        f.write(conf)
    uid_dirs = conf_value(conf, "uid_dirs")
    provided = [int(u) for u in re.split(r"[,\s]+", conf_value(conf, "provide_uid_dirs") or "") if u]
    lib_hostpaths = set()
    daemons = 0
    for name, spec in pod_specs(docs):
        for c in spec.get("initContainers", []):
            for m in c.get("volumeMounts", []):
                v, _ = mount_of(spec, c, m["mountPath"])
                if v and "hostPath" in v and "liballoc.so" in " ".join(c.get("command", [])):
                    lib_hostpaths.add(v["hostPath"]["path"])
    for name, spec in pod_specs(docs):
        ctlds = [c for c in spec["containers"] if c.get("command", [""])[0].endswith("/allocctld")]
        for c in ctlds:
            daemons += 1
            flags, args = flags_of(c)
            for fl in flags:
                if not re.search(r"(^|\s)" + re.escape(fl) + r"(\s|$)", help_text):
                    err(f"{name}: allocctld flag {fl} is not in allocctld --help")
            sock = conf_value(conf, "socket") if "--config" in flags else arg_value(args, "--socket")
            if env_of(c).get("ALLOCCTL_SOCKET") != sock:
                err(f"{name}: ALLOCCTL_SOCKET is not the daemon's socket {sock}")
            if sock and not mount_of(spec, c, sock)[0]:
                err(f"{name}: the socket {sock} is on no volume (read-only root)")
            if "--config" in flags:
                if not spec.get("hostPID"):
                    err(f"{name}: a per-node daemon needs hostPID")
                v, mp = mount_of(spec, c, uid_dirs)
                if not v or mp != uid_dirs or v.get("hostPath", {}).get("path") != uid_dirs:
                    err(f"{name}: uid_dirs {uid_dirs} is not the host's directory mounted there")
        for c in spec["containers"]:
            env = env_of(c)
            pre = env.get("LD_PRELOAD")
            if not pre:
                continue
            v, _ = mount_of(spec, c, os.path.dirname(pre))
            if not v:
                err(f"{name}/{c['name']}: LD_PRELOAD {pre} is on no volume")
            elif "hostPath" in v:
                if v["hostPath"]["path"] not in lib_hostpaths:
                    err(f"{name}/{c['name']}: {v['hostPath']['path']} is not where a DaemonSet installs liballoc.so")
            elif not any(pre in " ".join(i.get("command", [])) for i in spec.get("initContainers", [])):
                err(f"{name}/{c['name']}: no init container copies liballoc.so to {pre}")
            rd = env.get("LIBALLOC_RUN_DIR")
            v, mp = mount_of(spec, c, rd or "")
            if not rd or not v:
                err(f"{name}/{c['name']}: LIBALLOC_RUN_DIR {rd} is on no volume")
                continue
            uid = (c.get("securityContext") or {}).get("runAsUser",
                                                       (spec.get("securityContext") or {}).get("runAsUser"))
            if "hostPath" in v:
                host = v["hostPath"]["path"] + rd[len(mp):]
                if host != f"{uid_dirs}/{uid}":
                    err(f"{name}/{c['name']}: its run directory is {host} on the host, not {uid_dirs}/{uid}")
                if uid not in provided:
                    err(f"{name}/{c['name']}: uid {uid} is not in provide_uid_dirs {provided}")
                if v["hostPath"].get("type") != "Directory":
                    err(f"{name}/{c['name']}: hostPath {host} must be type Directory (the daemon makes it)")
            else:
                side = [s for s in ctlds if arg_value(flags_of(s)[1], "--run-dir") == rd]
                if not side:
                    err(f"{name}/{c['name']}: no allocctld sidecar watches {rd}")
                elif mount_of(spec, side[0], rd)[0] is not v:
                    err(f"{name}/{c['name']}: the sidecar does not mount the same volume at {mp}")
                if not spec.get("shareProcessNamespace"):
                    err(f"{name}: a sidecar needs shareProcessNamespace")
    if daemons < 2:
        err(f"expected the DaemonSet and the sidecar example, found {daemons} allocctld containers")


def exprs(deploy):
    """(where, expr) of every PromQL expression in the rules, their tests and the dashboard."""
    out = []
    rules = yaml.safe_load(open(os.path.join(deploy, "prometheus/liballoc-rules.yml")))
    for g in rules["groups"]:
        for r in g["rules"]:
            out.append((r.get("record") or r.get("alert"), r["expr"]))
    tests = yaml.safe_load(open(os.path.join(deploy, "prometheus/liballoc-rules.test.yml")))
    for t in tests["tests"]:
        for s in t.get("input_series", []):
            out.append(("test input", s["series"]))
    dash = json.load(open(os.path.join(deploy, "grafana/liballoc-dashboard.json")))
    for p in dash["panels"]:
        for t in p.get("targets", []):
            out.append((f"panel {p['title']}", t["expr"]))
    for v in dash["templating"]["list"]:
        if v["type"] == "query":
            out.append((f"variable {v['name']}", v["definition"]))
    return out, [r["record"] for g in rules["groups"] for r in g["rules"] if "record" in r]


def names(deploy, live_file):
    live = set(open(live_file).read().split())
    found, records = exprs(deploy)
    n = 0
    for where, e in found:
        e = re.sub(r'"[^"]*"', '""', e)  # label values are not names
        for tok in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", e):
            if tok.startswith("liballoc_"):
                n += 1
                if tok not in live:
                    err(f"{where}: {tok} is not a metric allocctld exports")
            elif ":" in tok and tok not in records:
                err(f"{where}: {tok} is not a recording rule of liballoc-rules.yml")
    if n < 20:
        err(f"only {n} metric names found: the expressions were not read")
    print(f"{n} metric references checked")


def dashboard_rules(deploy, out):
    dash = json.load(open(os.path.join(deploy, "grafana/liballoc-dashboard.json")))
    rules = []
    for p in dash["panels"]:
        if p["type"] != "row" and not p.get("targets"):
            err(f"panel {p['title']} has no query")
        if p["type"] != "row" and p.get("datasource", {}).get("uid") != "${datasource}":
            err(f"panel {p['title']} does not use the datasource variable")
        for t in p.get("targets", []):
            e = t["expr"].replace("$__rate_interval", "5m").replace("$instance", ".*").replace("$exe", ".*")
            rules.append({"record": f"dashboard:panel{p['id']}{t['refId']}", "expr": e})
    if not dash.get("uid") or "id" in dash and dash["id"] is not None:
        err("a provisioned dashboard has a uid and no id")
    yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, open(out, "w"))


def main():
    cmd = sys.argv[1]
    if cmd == "manifests":
        manifests(*sys.argv[2:5])
    elif cmd == "names":
        names(*sys.argv[2:4])
    elif cmd == "dashboard-rules":
        dashboard_rules(*sys.argv[2:4])
    else:
        sys.exit(f"unknown command {cmd}")
    for e in errors:
        print(f"deploycheck: {e}", file=sys.stderr)
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
