#!/usr/bin/python3
"""readme_check.py — README.md against what the programs say (tests/e2e/readme.bats).

  readme_check.py section README HEADING     the text of one section (to the next heading
                                             of its level or above)
  readme_check.py tunables README HELP       HELP: `allocctl help tunables`; every tunable is
                                             a row of README's table with its default and
                                             range, and every row a tunable
  readme_check.py cli README HELP USAGES     HELP: `allocctl --help`; USAGES: each command's
                                             `allocctl CMD --help`, concatenated; every
                                             command is a line of the CLI block with its
                                             usage, every option is named, and nothing else
  readme_check.py metrics README FAMILIES TUNABLES
                                             FAMILIES: the names of `# TYPE` lines of live
                                             scrapes; every family is listed in the Metrics
                                             section and every name listed there exported

Each problem is one line on stdout; the status is 1 when there was one. Python's standard
library only.
"""
import re
import sys

problems = []


def problem(*what):
    problems.append(" ".join(str(w) for w in what))


def section(text, heading):
    """The lines of the section whose heading line is HEADING ('### Metrics')."""
    lines = text.split("\n")
    level = len(heading) - len(heading.lstrip("#"))
    out, inside, fence = [], False, False
    for line in lines:
        if inside and line.startswith("```"):
            fence = not fence
        if not fence and re.match(r"#{1,%d} " % level, line):
            if inside:
                break
            inside = line.strip() == heading
            continue
        if inside:
            out.append(line)
    if not inside:
        problem("README has no section", repr(heading))
    return "\n".join(out)


# --- tunables -------------------------------------------------------------------------

UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50,
         "E": 1 << 60}
HUMAN = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
         "PiB": 1 << 50, "EiB": 1 << 60, "ms": 1, "s": 1000, "min": 60000, "h": 3600000}


def readme_number(s):
    """README's spelling of a value (128K, 2^31-1, 10000): its number, or None."""
    s = s.strip().strip("`")
    m = re.fullmatch(r"(\d+)\^(\d+)(?:-(\d+))?", s)
    if m:
        return int(m[1]) ** int(m[2]) - int(m[3] or 0)
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGTPE]?)", s)
    if m:
        return float(m[1]) * UNITS[m[2]]
    return None


def human_number(s):
    """allocctl's spelling (128.0 KiB, 10 s, on, 65536): (number, precision) or None."""
    s = s.strip()
    if s in ("on", "off"):
        return (1.0 if s == "on" else 0.0, 0)
    m = re.fullmatch(r"(-?\d+(?:\.(\d+))?)(?: ([A-Za-z]+))?", s)
    if not m or (m[3] and m[3] not in HUMAN):
        return None
    unit = HUMAN[m[3]] if m[3] else 1
    # a figure shown with one decimal is within half its last digit
    return (float(m[1]) * unit, 0.5 * unit / 10 ** len(m[2]) if m[2] else 0)


def same(readme, human, name, what):
    want = human_number(human)
    got = readme_number(readme)
    if want is None:
        problem(f"tunable {name}: allocctl's {what} {human!r} is not a value this test reads")
    elif got is None or abs(got - want[0]) > want[1] + 1e-9:
        problem(f"tunable {name}: README's {what} is {readme!r}, allocctl says {human!r}")


def check_tunables(readme, helpfile):
    code = {}
    for line in open(helpfile).read().splitlines()[1:]:
        m = re.match(r"(\S+)\s+(size|bool|int|ms)\s+(.+?)  +(.+?)  +(yes|no)  ", line)
        if not m:
            problem("allocctl help tunables: a line this test cannot read:", repr(line))
            continue
        code[m[1]] = (m[2], m[3].strip(), m[4].strip())
    rows = {}
    for line in section(readme, "## Tunables").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        m = re.fullmatch(r"`([a-z_]+)`", cells[0]) if len(cells) == 5 else None
        if m:
            rows[m[1]] = cells
    for name, (kind, default, rng) in code.items():
        if name not in rows:
            problem(f"tunable {name} (allocctl help tunables) is not in README's table")
            continue
        r_default, r_range = rows[name][1], rows[name][2]
        if default == "auto":
            if readme_number(r_default) is not None:
                problem(f"tunable {name}: README's default is {r_default!r}, "
                        "allocctl says auto")
        else:
            same(r_default, default, name, "default")
        if kind == "bool":
            if r_range != "0/1" or rng != "0 or 1 (off/on)":
                problem(f"tunable {name}: README's range is {r_range!r}, "
                        f"allocctl says {rng!r}")
            continue
        lo, _, hi = rng.partition(" .. ")
        r_lo, _, r_hi = r_range.partition("..")
        same(r_lo, lo, name, "minimum")
        same(r_hi, hi, name, "maximum")
    for name in rows:
        if name not in code:
            problem(f"README's tunable table has {name}, which allocctl does not know")


# --- the CLI --------------------------------------------------------------------------

def check_cli(readme, helpfile, usagesfile):
    helptext = open(helpfile).read()
    commands = re.findall(r"^  ([a-z]+) ", helptext.split("Commands:")[1].split("\n\n")[0],
                          re.M)
    options = set(re.findall(r"^  (--?[a-z-]+)(?:, (--[a-z-]+))?",
                             helptext.split("Global options")[1], re.M))
    options = {o for pair in options for o in pair if o}
    usages = {}
    for m in re.finditer(r"^usage: allocctl \[GLOBAL OPTIONS\] ([a-z]+)(.*)$",
                         open(usagesfile).read(), re.M):
        usages[m[1]] = (m[1] + m[2]).strip()
    sec = section(readme, "## The CLI: allocctl")
    block = re.search(r"^```\n(.*?)^```", sec, re.M | re.S)
    lines = [ln for ln in (block[1] if block else "").splitlines()
             if ln.startswith("allocctl ")]
    shown = {ln.split()[1]: re.split(r"  +", ln[len("allocctl "):])[0].strip()
             for ln in lines}
    for c in commands:
        if c not in usages:
            problem(f"allocctl {c}: no usage line from `allocctl {c} --help`")
        elif c not in shown:
            problem(f"allocctl {c} (allocctl --help) is not in README's CLI block")
        elif shown[c] != usages[c]:
            problem(f"allocctl {c}: README says {shown[c]!r}, its usage is {usages[c]!r}")
    for c in shown:
        if c not in commands:
            problem(f"README's CLI block has `allocctl {c}`, which allocctl does not have")
    for o in options:
        if not re.search(r"`" + re.escape(o) + r"[`/ ]", sec):
            problem(f"allocctl's global option {o} is not in README's CLI section")
    known = options | set(re.findall(r"--[a-z-]+", " ".join(usages.values())))
    for o in sorted(set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", sec))):
        if o not in known:
            problem(f"README's CLI section names {o}, which no allocctl usage has")


# --- metrics --------------------------------------------------------------------------

def expand(s):
    """bash's brace expansion of one word: a{b,c}d -> abd, acd (nested groups too)."""
    depth, start = 0, None
    for i, ch in enumerate(s):
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                inner, parts, d, last = s[start + 1:i], [], 0, 0
                for j, c in enumerate(inner):
                    d += c == "{"
                    d -= c == "}"
                    if c == "," and d == 0:
                        parts.append(inner[last:j])
                        last = j + 1
                parts.append(inner[last:])
                if len(parts) < 2:
                    continue
                return [x for p in parts for x in expand(s[:start] + p + s[i + 1:])]
    return [s]


def listed_names(sec):
    """Every name the section's `code` spans give, braces expanded, labels left out."""
    names = set()
    for span in re.findall(r"`([^`]+)`", sec, re.S):
        word = span.split()[0] if span.split() else ""
        word = re.sub(r"\{[^{}]*\}$", "", word)  # a trailing {labels}
        if not re.fullmatch(r"[a-z_{},<>]+", word):
            continue
        names.update(expand(word))
    return names


def check_metrics(readme, familiesfile, tunablesfile):
    families = set(open(familiesfile).read().split())
    tunables = {}
    for line in open(tunablesfile).read().splitlines()[1:]:
        f = line.split()
        if len(f) > 1:
            tunables[f[0]] = f[1]
    sec = "\n".join(ln for ln in section(readme, "### Metrics").splitlines()
                    if not ln.lstrip().startswith("|"))  # the table of renamed names
    names = listed_names(sec)
    documented = {n for n in names if n.startswith("liballoc_")}
    # "Counters: `heaps`, ..." names families without the prefix
    documented |= {"liballoc_" + n for n in names if not n.startswith("liballoc_")}
    # the tunables' families follow README's rule: liballoc_tunable_<name> in base units
    expected = set()
    for name, kind in tunables.items():
        if kind == "size":
            expected.add(name if name.endswith("_bytes") else name + "_bytes")
        elif kind == "ms":
            expected.add(re.sub(r"_ms$", "", name) + "_seconds")
        else:
            expected.add(name)
    expected = {"liballoc_tunable_" + n for n in expected}
    exported = {f for f in families if f.startswith("liballoc_tunable_")}
    if "liballoc_tunable_<name>" not in sec:
        problem("README's Metrics section does not give the rule liballoc_tunable_<name>")
    for f in sorted(exported - expected):
        problem(f"{f} is exported, but README's rule gives no tunable that name")
    for f in sorted(expected - exported):
        problem(f"{f}: README's rule gives this family for a tunable; it is not exported")
    arena_rule = "liballoc_arena_<" in sec
    for f in sorted(families - exported):
        if f in documented:
            continue
        if arena_rule and f.startswith("liballoc_arena_") and \
                "liballoc_" + f[len("liballoc_arena_"):] in documented:
            continue  # "liballoc_arena_<counter> for the counters an arena keeps"
        problem(f"{f} is exported but not listed in README's Metrics section")
    for n in sorted(names):
        if n.startswith("liballoc_") and "<" not in n and n not in families:
            problem(f"README's Metrics section lists {n}, which is not exported")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    readme = open(args[0]).read()
    if cmd == "section":
        print(section(readme, args[1]))
    elif cmd == "tunables":
        check_tunables(readme, args[1])
    elif cmd == "cli":
        check_cli(readme, args[1], args[2])
    elif cmd == "metrics":
        check_metrics(readme, args[1], args[2])
    else:
        sys.exit(f"readme_check.py: unknown command {cmd!r}")
    for p in problems:
        print(p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
