#!/usr/bin/python3
"""readme_check.py — README.md against what the programs say (tests/e2e/readme.bats).

  readme_check.py section README HEADING     the text of one section (to the next heading
                                             of its level or above)
  readme_check.py names FILE                 the metric names FILE's `code` spans give
                                             (braces expanded)
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

  readme_check.py man MAN SOURCE HELP CMDHELP TUNABLES
                                             MAN: allocctl.1 as man renders it, SOURCE
                                             the page (its .TP tags); CMDHELP:
                                             each `allocctl CMD --help`, concatenated;
                                             every command is an entry of COMMANDS with
                                             its usage, every global option one of OPTIONS,
                                             every tunable in TUNABLES, every variable in
                                             ENVIRONMENT, and nothing else
  readme_check.py limits README CTLD_README ROOT
                                             the figures README's Limits section and
                                             ctld/README.md state that liballoc's #defines
                                             give (the LIMITS table) are theirs; a
                                             name defined more than once is taken from
                                             the file LIMITS names (FILE:NAME) and
                                             refused by its bare name
  readme_check.py completion COMPLETION HELP CMDHELP
                                             COMPLETION: allocctl.bash-completion, run in
                                             bash (allocctl on PATH); it offers every
                                             command and each command's options, and an
                                             option's value does not count as an argument

  readme_check.py parser SOURCE HELP CMDHELP ALLOCCTL
                                             SOURCE: cli/allocctl.c; every option its
                                             main() and its commands compare is in
                                             allocctl --help or a usage, every choice of
                                             an option (--res a|b) is what the parser
                                             accepts and what its refusal lists, and
                                             --help's --json line names the commands
                                             without --json

Each problem is one line on stdout; the status is 1 when there was one. Python's standard
library only.
"""
import glob
import re
import shlex
import subprocess
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


# --- allocctl's interface, for the man page and the completion -------------------------

# an option in a usage and its argument: `--pad BYTES`, `--res fine|coarse`, `--all`
# (NAME=VALUE after --all is the command's argument, not the option's)
USAGE_OPTION = r"(--[a-z-]+)(?: ([A-Z]+|[a-z]+(?:\|[a-z]+)+)(?![=\w]))?"


def interface(helpfile, cmdhelpfile):
    """allocctl's commands, global options, usages and options, as the programs say."""
    helptext = open(helpfile).read()
    commands = re.findall(r"^  ([a-z]+) ", helptext.split("Commands:")[1].split("\n\n")[0],
                          re.M)
    # "  --socket PATH        daemon socket ..." -> {"--socket": "--socket PATH"}
    globals_ = {}
    for line in helptext.split("Global options")[1].split("\n\n")[0].splitlines()[1:]:
        tag = re.split(r"  +", line.strip())[0]
        for o in re.findall(r"--?[a-z-]+", tag):
            globals_[o] = tag
    usages, options, cmd_globals, alternatives = {}, {}, {}, {}
    for part in re.split(r"^(?=usage: allocctl )", open(cmdhelpfile).read(), flags=re.M):
        m = re.match(r"usage: allocctl \[GLOBAL OPTIONS\] ([a-z]+)(.*)", part)
        if not m:
            continue
        c = m[1]
        usages[c] = (m[1] + m[2]).strip()
        options[c] = dict(re.findall(USAGE_OPTION, usages[c]))
        g = re.search(r"^Global options: (.*?)\. ", part, re.M)
        cmd_globals[c] = dict(re.findall(USAGE_OPTION, g[1])) if g else {}
        # PID|--exe NAME|--all: the options that stand for the PID
        alt = re.search(r"PID((?:\|--[a-z-]+(?: [A-Z]+)?)+)", usages[c])
        alternatives[c] = set(re.findall(r"--[a-z-]+", alt[1])) if alt else set()
    return commands, globals_, usages, options, cmd_globals, alternatives


def man_sections(text):
    """{HEADING: text} of a page as man renders it (headings at column 0)."""
    out, name = {}, None
    for line in text.splitlines():
        if re.fullmatch(r"[A-Z][A-Z ]*[A-Z]", line):
            name = line
            out[name] = []
        elif name:
            out[name].append(line)
    return {k: "\n".join(v) for k, v in out.items()}


def roff_text(line):
    """The text a roff line shows: a font macro's arguments (.B, .BI, .BR...: the
    alternating ones join theirs without spaces), font escapes dropped, \\- as -."""
    m = re.match(r"\.([BIR]{1,2})(?:\s+(.*))?$", line)
    if m:
        args = [a[1] if a[1] is not None else a[2]
                for a in re.finditer(r'"((?:[^"]|"")*)"|(\S+)', m[2] or "")]
        line = (" " if len(m[1]) == 1 else "").join(args)
    line = re.sub(r"\\f(?:\(..|\[[^]]*\]|.)", "", line)
    return line.replace("\\-", "-").replace("\\ ", " ").strip()


def man_source_sections(src):
    """{HEADING: [tag, ...]} of a roff man page: the line after each .TP, as it shows."""
    out, name, lines = {}, None, src.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r'\.SH\s+"?([^"]*)"?$', line)
        if m:
            name = m[1].strip()
            out[name] = []
        elif name and line.strip() == ".TP" and i + 1 < len(lines):
            out[name].append(roff_text(lines[i + 1]))
    return out


def check_man(man, sourcefile, helpfile, cmdhelpfile, tunablesfile):
    commands, globals_, usages, _, _, _ = interface(helpfile, cmdhelpfile)
    secs = man_sections(man)
    tagged = man_source_sections(open(sourcefile).read())
    for h in ("SYNOPSIS", "COMMANDS", "OPTIONS", "TUNABLES", "ENVIRONMENT"):
        if h not in secs:
            problem(f"allocctl.1 has no section {h}")
            secs[h] = ""
    synopsis = " ".join(secs["SYNOPSIS"].split())
    usage = open(helpfile).read().splitlines()[0].replace("usage: ", "")
    if synopsis != usage:
        problem(f"allocctl.1's SYNOPSIS is {synopsis!r}, allocctl --help says {usage!r}")
    tags = {t.split()[0]: t for t in tagged.get("COMMANDS", []) if t}
    for c in commands:
        if c not in tags:
            problem(f"allocctl {c} (allocctl --help) has no entry in allocctl.1's COMMANDS")
        elif c in usages and tags[c] != usages[c]:
            problem(f"allocctl {c}: allocctl.1 says {tags[c]!r}, its usage is {usages[c]!r}")
    for c in tags:
        if c not in commands:
            problem(f"allocctl.1's COMMANDS has {c}, which allocctl does not have")
    opt_tags = tagged.get("OPTIONS", [])
    for tag in sorted(set(globals_.values())):
        if tag not in opt_tags:
            problem(f"allocctl's global option {tag!r} is not an entry of allocctl.1's OPTIONS")
    for tag in opt_tags:
        if tag not in globals_.values():
            problem(f"allocctl.1's OPTIONS has {tag!r}, which allocctl --help does not")
    known = set(globals_) | {o for c in usages for o in re.findall(r"--[a-z-]+", usages[c])}
    for o in sorted(set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", man))):
        if o not in known:
            problem(f"allocctl.1 names {o}, which no allocctl usage or global option has")
    tunables = [ln.split()[0] for ln in open(tunablesfile).read().splitlines()[1:] if ln]
    m = re.search(r"\(LA_TUNABLES\):(.*?)\.\s", secs["TUNABLES"], re.S)
    listed = [n.strip() for n in m[1].split(",")] if m else []
    if not m:
        problem("allocctl.1's TUNABLES does not list the tunables after '(LA_TUNABLES):'")
    for t in tunables:
        if t not in listed:
            problem(f"tunable {t} (allocctl help tunables) is not in allocctl.1's TUNABLES")
    for t in listed:
        if t not in tunables:
            problem(f"allocctl.1's TUNABLES lists {t}, which allocctl does not know")
    variables = set(re.findall(r"\$([A-Z_]+)", open(helpfile).read()))
    env = set(tagged.get("ENVIRONMENT", []))
    for v in sorted(variables - env):
        problem(f"{v} (allocctl --help) is not an entry of allocctl.1's ENVIRONMENT")
    for v in sorted(env - variables):
        problem(f"allocctl.1's ENVIRONMENT has {v}, which allocctl --help does not name")


# the bash completion run on given lines: each line's COMPREPLY, _allocctl_ps answering
# pid 4242 and exe svc (the daemon's list)
COMPLETE = r'''
source "$1"
_allocctl_ps() { if [ "$1" = pid ]; then echo 4242; else echo svc; fi; }
while IFS= read -r line; do
	eval "COMP_WORDS=($line)"
	COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
	COMPREPLY=()
	_allocctl 2>/dev/null
	printf '%s\n' "${COMPREPLY[*]}"
done
'''


def check_completion(compfile, helpfile, cmdhelpfile):
    commands, globals_, usages, options, cmd_globals, alternatives = \
        interface(helpfile, cmdhelpfile)
    cases = []

    def case(*words):
        cases.append(words)
        return len(cases) - 1

    first = case("allocctl", "")
    value_first = {o: case("allocctl", o, "x", "") for o, tag in globals_.items()
                   if re.search(r"--[a-z-]+ [A-Z]", tag)}
    per = {}
    for c in commands:
        if c not in usages:
            problem(f"allocctl {c}: no usage from `allocctl {c} --help`")
            continue
        d = {"opts": case("allocctl", c, "-"), "plain": case("allocctl", c, ""),
             "pid": case("allocctl", c, "4242", ""), "values": {}, "choices": {},
             "at_value": {}}
        for o, arg in list(options[c].items()) + list(cmd_globals[c].items()):
            if arg or o in alternatives[c]:
                d["values"][o] = case("allocctl", c, o, "x", "") if arg else \
                    case("allocctl", c, o, "")
            if "|" in arg:
                d["choices"][o] = case("allocctl", c, "4242", o, "")
            elif arg:
                d["at_value"][o] = case("allocctl", c, o, "")
        per[c] = d
    # --version stands for the version command (allocctl --help): after it, what follows
    # `allocctl version`, not the commands again (`allocctl --version ps` is a usage error)
    version_first = case("allocctl", "--version", "") if "--version" in globals_ else None
    script = "".join(" ".join(shlex.quote(w) for w in ws) + "\n" for ws in cases)
    run = subprocess.run(["bash", "-c", COMPLETE, "complete", compfile], input=script,
                         capture_output=True, text=True)
    out = run.stdout.split("\n")
    if len(out) < len(cases):
        problem(f"the completion did not run: {run.stderr.strip()!r}")
        return
    got = [set(out[i].split()) for i in range(len(cases))]

    def show(i):
        return " ".join(sorted(got[i])) or "nothing"

    long_globals = {o for o in globals_ if o.startswith("--")}
    for c in commands:
        if c not in got[first]:
            problem(f"the completion does not offer the command {c} (allocctl --help)")
    for w in sorted(got[first] - set(commands) - long_globals):
        problem(f"the completion offers {w} as a command, which allocctl --help does not have")
    for o in sorted(long_globals - got[first]):
        problem(f"the completion does not offer the global option {o} before a command")
    for o, i in value_first.items():
        if got[i] != got[first]:
            problem(f"the completion counts the value of {o} as the command "
                    f"(after `{o} x` it offers {show(i)})")
    for c, d in per.items():
        want = set(options[c]) | set(cmd_globals[c]) | {"--help"}
        for o in sorted(want - got[d["opts"]]):
            problem(f"the completion does not offer {o} for `allocctl {c}` "
                    f"(`allocctl {c} --help` names it)")
        for o in sorted(got[d["opts"]] - want):
            problem(f"the completion offers {o} for `allocctl {c}`, "
                    f"which `allocctl {c} --help` does not name")
        for o, i in d["values"].items():
            ref = d["pid"] if o in alternatives[c] else d["plain"]
            if got[i] != got[ref]:
                arg = options[c].get(o) or cmd_globals[c].get(o)
                problem(f"the completion of `allocctl {c} {o}{' x' if arg else ''} ` offers "
                        f"{show(i)}, not what it offers after `allocctl {c} "
                        f"{'4242 ' if ref == d['pid'] else ''}` ({show(ref)}): "
                        + (f"{o} stands for the PID" if ref == d["pid"] else
                           f"{o}'s value is taken for an argument"))
        for o, i in d["at_value"].items():
            arg = options[c].get(o) or cmd_globals[c].get(o)
            if got[i] & (set(commands) | want) or (got[i] and got[i] == got[d["plain"]]):
                problem(f"the completion of `allocctl {c} {o} ` (its {arg}) offers {show(i)}: "
                        f"an option, a command or the PIDs, not a value")
        for o, i in d["choices"].items():
            arg = options[c].get(o) or cmd_globals[c].get(o)
            if got[i] != set(arg.split("|")):
                problem(f"the completion after `allocctl {c} ... {o}` offers {show(i)}, "
                        f"its usage says {arg}")
    if version_first is not None and "version" in per and \
            got[version_first] != got[per["version"]["plain"]]:
        problem(f"the completion of `allocctl --version ` offers {show(version_first)}, not "
                f"what it offers after `allocctl version ` "
                f"({show(per['version']['plain'])}): --version stands for the command")
    if "help" in per and "COMMAND" in usages.get("help", ""):
        want = set(commands) | set(re.findall(r"\|([a-z]+)", usages["help"]))
        if got[per["help"]["plain"]] != want:
            problem(f"the completion of `allocctl help ` offers {show(per['help']['plain'])}, "
                    f"its usage gives {' '.join(sorted(want))}")


# --- what allocctl's parser accepts, against what its help says --------------------------

def check_parser(sourcefile, helpfile, cmdhelpfile, allocctl):
    commands, globals_, usages, options, cmd_globals, _ = interface(helpfile, cmdhelpfile)
    src = open(sourcefile).read()
    main_src = src[src.index("\nint main("):]
    # main() compares each global option it takes: strcmp(a, "--json"), strncmp(a, "--x=", n)
    for o in sorted(set(re.findall(r'strn?cmp\(a, "(--?[a-z][a-z-]*)=?"', main_src))):
        if o not in globals_:
            problem(f"allocctl takes {o} before a command (cli/allocctl.c's main), "
                    "but allocctl --help's global options do not list it")
    # the commands' option tables: {"--since", true, NULL}
    named = {o for c in usages for o in re.findall(r"--[a-z][a-z-]*", usages[c])}
    for o in sorted(set(re.findall(r'\{"(--[a-z][a-z-]*)", (?:true|false), NULL\}', src))):
        if o not in named:
            problem(f"a command of allocctl takes {o} (cli/allocctl.c), which no usage names")
    for c in commands:
        for o, arg in options.get(c, {}).items():
            if "|" not in arg:
                continue
            words = ["allocctl", "--socket", "/nonexistent/allocctl.sock", c] + \
                (["1"] if usages[c].split()[1:2] == ["PID"] else []) + [o]
            run = subprocess.run([allocctl] + words[1:] + ["not-a-choice"],
                                 capture_output=True, text=True)
            m = re.search(r"expected ([a-z]+(?:, [a-z]+)*(?:,? or [a-z]+)?)", run.stderr)
            listed = set(re.split(r",? or |, ", m[1])) if m else set()
            if run.returncode != 2 or not m:
                problem(f"`allocctl {c} ... {o} not-a-choice` is not refused with what it "
                        f"expects (status {run.returncode}): {run.stderr.strip()!r}")
            elif listed != set(arg.split("|")):
                problem(f"allocctl {c}'s usage gives {o} {arg}; its refusal of another value "
                        f"expects {m[1]}")
            for v in arg.split("|"):
                run = subprocess.run([allocctl] + words[1:] + [v], capture_output=True,
                                     text=True)
                if run.returncode == 2:
                    problem(f"allocctl {c}'s usage gives {o} {v}, which it refuses: "
                            f"{run.stderr.strip()!r}")
    # "--json  machine-readable output (every command but top and help)"
    m = re.search(r"^  --json .*\(every command but ([a-z, ]+)\)", open(helpfile).read(), re.M)
    said = set(re.split(r", | and |,? and ", m[1])) if m else set()
    without = {c for c in commands if c in cmd_globals and "--json" not in cmd_globals[c]}
    if not m:
        problem("allocctl --help's --json line does not say which commands take it "
                "('(every command but ...)')")
    elif said != without:
        problem(f"allocctl --help says --json is for every command but {m[1]}; the commands' "
                f"own help leave it out of {', '.join(sorted(without))}")


# --- the figures README's Limits section and ctld/README.md take from the code ------------

class Ambiguous(Exception):
    """A #define the tree has more than once, asked for by its bare name."""


class Constants(dict):
    """constants()'s answer: asking for a name defined more than once raises Ambiguous
    (with the files), any other name not here KeyError."""

    def __init__(self, values, ambiguous):
        super().__init__(values)
        self.ambiguous = ambiguous

    def __missing__(self, key):
        if key in self.ambiguous:
            raise Ambiguous(key, self.ambiguous[key])
        raise KeyError(key)


def constants(root):
    """The integer #defines of liballoc's, the protocol's and allocctld's headers and
    sources that evaluate: NAME for a name defined once among them, and FILE:NAME (FILE
    from the root: ctld/metrics.c:SLICE_NS) for each file's own definition. A name
    defined more than once (in two files, or twice in one under #if) has no NAME: asking
    for it raises Ambiguous, so that a figure cannot come from another file's definition
    than the one it describes. A definition's references are to its file's own names
    first, then to names defined once."""
    defs = {}  # NAME -> [(file, expression)], in file order
    for pattern in ("liballoc/include/*.h", "liballoc/src/*.h", "liballoc/src/*.c",
                    "proto/*.h", "ctld/*.h", "ctld/*.c"):
        for path in sorted(glob.glob(f"{root}/{pattern}")):
            for m in re.finditer(r"^#define ([A-Z_][A-Z0-9_]*)[ \t]+([^\\\n]+?)\s*(?:/\*.*)?$",
                                 open(path).read(), re.M):
                defs.setdefault(m[1], []).append((path[len(root) + 1:], m[2]))
    exprs, alias, ambiguous = {}, {}, {}  # FILE:NAME -> expression; NAME -> FILE:NAME
    for name, ds in defs.items():
        files = [f for f, _ in ds]
        if len(ds) == 1:
            alias[name] = f"{files[0]}:{name}"
        else:
            ambiguous[name] = files
        for f, e in ds:
            if files.count(f) == 1:
                exprs[f"{f}:{name}"] = e
            else:
                ambiguous[f"{f}:{name}"] = [f] * files.count(f)
    values = {}

    def value(key, depth=0):
        if key in values or depth > 8:
            return values.get(key)
        where = key.rpartition(":")[0]
        e = re.sub(r"\((?:size_t|uint64_t|uint32_t|int64_t)\)", "", exprs[key])
        e = re.sub(r"\b(\d+)(?:[uU]?[lL]{0,2}[uU]?)\b", r"\1", e)
        for ref in set(re.findall(r"\b[A-Z_][A-Z0-9_]*\b", e)):
            own = f"{where}:{ref}"
            ref_key = own if own in exprs else alias.get(ref)
            v = value(ref_key, depth + 1) if ref_key else None
            if v is None:
                return None
            e = re.sub(r"\b%s\b" % ref, str(v), e)
        if not re.fullmatch(r"[\d\s()+\-*/<>]+", e):
            return None
        values[key] = int(eval(e.replace("/", "//")))
        return values[key]

    for key in exprs:
        value(key)
    values.update({name: values[key] for name, key in alias.items() if key in values})
    return Constants(values, ambiguous)


def size(v):
    """4096 -> '4 KiB', 1 << 20 -> '1 MiB' (README's spelling of a whole size)."""
    for unit, n in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if v % n == 0:
            return f"{v // n} {unit}"
    return f"{v} bytes"


# (where, the words as README says them with a group per figure, the figures the #defines
# give). A failure names the words: change README or, where the code moved on, both.
LIMITS = [
    ("Limits", r"the heap-owner table, (2\^\d+(?: - 1)?) eight-byte entries",
     lambda k: [f"2^{k['LA_ADDR_BITS'] - k['LA_HEAP_SHIFT']}"]),
    ("Limits", r"Heaps are (\d+ [KMG]iB) reservations", lambda k: [size(k["LA_HEAP_SIZE"])]),
    ("Limits", r"a request larger than (\d+ [KMG]iB) \(less than a heap's data area\)",
     lambda k: [size(k["LA_LARGE_MAX"])]),
    ("Limits", r"once an arena has served (\d+) large blocks of (\d+) to (\d+) pages",
     lambda k: [str(k["LARGE_HEAP_AFTER"]), str(k["LA_SMALL_MAX"] // k["LA_PAGE"] + 1),
                str(k["LARGE_HEAP_MAX_PAGES"])]),
    ("Limits", r"hold at least (\d+ [KMG]iB) of free pages that may be resident",
     lambda k: [size(k["HEAP_HOLES_PAGES"] * k["LA_PAGE"])]),
    ("Limits", r"its thread freed, up to (\d+) blocks and", lambda k: [str(k["TC_LARGE_SLOTS"])]),
    ("Limits", r"its base \(4 MiB\) and (\d+) blocks", lambda k: [str(k["TC_LARGE_SLOTS_MAX"])]),
    ("Limits", r"every (\d+) refills and\s+flushes of a thread's cache",
     lambda k: [str(k["TC_GC_EVENTS"])]),
    ("Limits", r"refills within (\d+) sweeps of being emptied", lambda k: [str(k["TC_GC_WINDOW"])]),
    ("Limits", r"sweeps \(at most (\d+)\) skip it", lambda k: [str(2 ** k["TC_GC_BACKOFF"] - 1)]),
    ("Limits", r"holds at most (\d+ [KMG]iB) of\s+blocks \(at least (\d+)\)",
     lambda k: [size(k["TC_FREE_ONLY_BYTES"]), str(k["TC_FREE_ONLY_BLOCKS"])]),
    ("Limits", r"up to (\d+) blocks or 256 KiB\s+a class", lambda k: [str(k["TC_MAX_BLOCKS"])]),
    ("Limits", r"blocks that took (\d+) refills", lambda k: [str(k["TC_GROW_EVENTS"])]),
    ("Limits", r"its limit, up to (\d+ [KMG]iB) of blocks", lambda k: [size(k["TC_GROW_BYTES"])]),
    ("Limits", r"(\d+) at a time through its ring of ([\d,]+) slots",
     lambda k: [str(k["TC_REMOTE_BATCH"]), f"{k['RR_SLOTS']:,}"]),
    ("Limits", r"a thread of more than (\d+)\s+classes takes another 32 KiB \(the rows of the "
     r"other (\d+)\) at the (\d+)th",
     lambda k: [str(k["TC_ROWS_FIRST"]), str(k["TC_ROWS_MORE"]), str(k["TC_ROWS_FIRST"] + 1)]),
    ("Limits", r"a transfer cache of blocks that thread caches flushed \(up to (\d+) and\s+"
     r"(\d+ [KMG]iB) per size class, (\d+ [KMG]iB) in all",
     lambda k: [str(k["XF_SLOTS"]), size(k["XF_CLASS_BYTES"]), size(k["XF_ARENA_BYTES"])]),
    ("Limits", r"until the (\d+)th such reuse purges them",
     lambda k: [str(k["DCACHE_PURGE_EVERY"])]),
    ("Limits", r"When such a block of at\s+least (\d+) pages cannot grow where it is",
     lambda k: [str(k["MOVE_FROM_PAGES"])]),
    ("Limits", r"a heap takes part in at most (\d+) of them, a process in at most ([\d,]+)",
     lambda k: [str(k["MOVE_MAX_PER_HEAP"]), f"{k['MOVE_MAX_PER_PROCESS']:,}"]),
    ("Limits", r"the caches of at most (\d+) threads", lambda k: [str(k["TC_WIPED_MAX"])]),
    ("Limits", r"\(up to (\d+) at a time, only for processes that are gone",
     lambda k: [str(k["REAP_MAX"])]),
    ("Limits", r"when the directory holds more than (\d+) names \(its size tells,\s+on tmpfs; on "
     r"other file systems, more than (\d+ KiB) of directory\)",
     lambda k: [str(k["REAP_BACKLOG"]), size(k["REAP_BACKLOG_BYTES"])]),
    ("Limits", r"Small blocks \(up to (\d+ [KMG]iB)\) come in (\d+) size classes",
     lambda k: [size(k["LA_SMALL_MAX"]), str(k["LA_NCLASSES"])]),
    ("Limits", r"moves to a block half as large again\s+\(at most (\d+ [KMG]iB)\)",
     lambda k: [size(k["SC_GROW_MAX"])]),
    ("Limits", r"A large block of more than (\d+ [KMG]iB) from a heap",
     lambda k: [size(k["LA_COLOUR_FROM"] - 1)]),
    ("Limits", r"starts (\d+) bytes into its first page", lambda k: [str(k["LA_COLOUR"])]),
    ("Limits", r"Large blocks of (\d+)-(\d+) pages \(above 32 KiB, up to 256 KiB\) start on a "
     r"(\d+)-page grid",
     lambda k: [str(k["LA_SMALL_MAX"] // k["LA_PAGE"] + 1), str(k["LARGE_GRID_MAX_PAGES"]),
                str(k["LARGE_GRID_PAGES"])]),
    ("Limits", r"every (\d+)th of\s+these blocks allocated \(every (\d+)nd",
     lambda k: [str(k["LARGE_PROBE_EVERY"]), str(k["LARGE_SAMPLE_EVERY"])]),
    ("ctld", r"ABI\s+version \((\d+):", lambda k: [str(k["LA_SHM_ABI_VERSION"])]),
    ("ctld", r"pid order, at most (\d+) and (\d+) ms of work each",
     lambda k: [str(k["LIST_MAX"]), str(k["LIST_BUDGET_NS"] // 1000000)]),
    ("ctld", r"sends the arenas in pages of (\d+)", lambda k: [str(k["ARENA_PAGE_MAX"])]),
    ("ctld", r"a back-off\s+doubling from (\d+) ms to (\d+) s",
     lambda k: [str(k["BACKOFF_MIN"]), str(k["BACKOFF_MAX"] // 1000)]),
    ("ctld", r"the request line and headers \((\d+ KiB) at most\)",
     lambda k: [size(k["HEAD_MAX"])]),
    ("ctld", r"response is produced in\s+(\d+) ms slices while less than (\d+ MiB) waits for "
     r"the client, at most (\d+) scrapes",
     lambda k: [str(k["ctld/metrics.c:SLICE_NS"] // 1000000), size(k["OUT_HIGH"]),
                str(k["MAX_SCRAPES"])]),
    ("ctld", r"like the liveness sweep, in slices of at most (\d+) ms",
     lambda k: [str(k["ctld/discover.c:SLICE_NS"] // 1000000)]),
    ("ctld", r"unread replies reach (\d+) MiB", lambda k: [str(round(k["OUT_CAP"] / (1 << 20)))]),
    ("ctld", r"a (\d+) ms pause of the listener", lambda k: [str(k["PAUSE_MS"])]),
    ("ctld", r"slices of at most (\d+) processes and (\d+) ms",
     lambda k: [str(k["SLICE"]), str(k["ctld/timeline.c:SLICE_NS"] // 1000000)]),
    ("ctld", r"up to (\d+) \+ ([\d,]+) samples",
     lambda k: [str(k["HIST_FINE_SLOTS"]), f"{k['HIST_COARSE_SLOTS']:,}"]),
    ("ctld", r"first after (\d+) µs, backing off to (\d+) µs",
     lambda k: [str(k["POLL_MIN_US"]), str(k["POLL_MAX_US"])]),
    ("ctld", r"`LA_SHM_\*_MAX` in `liballoc_shm.h`: (\d+)\s+arena slots, (\d+) size classes",
     lambda k: [str(k["LA_SHM_ARENAS_MAX"]), str(k["LA_SHM_CLASSES_MAX"])]),
    ("ctld", r"at most (\d+) run directories \(`run_dir` and `--run-dir`\) and (\d+) uids\s+in "
     r"`provide_uid_dirs`, and the command line at most (\d+) settings: more is refused\s+"
     r"\(`run_dir: at most (\d+) directories`",
     lambda k: [str(k["CFG_MAX_DIRS"])] * 2 + [str(k["CFG_MAX_OVERRIDES"]), str(k["CFG_MAX_DIRS"])]),
]


def check_limits(readme, ctld_readme, root):
    k = constants(root)
    texts = {"Limits": section(readme, "## Limits"), "ctld": open(ctld_readme).read()}
    where = {"Limits": "README's Limits", "ctld": "ctld/README.md"}
    for w, words, figures in LIMITS:
        m = re.search(words, texts[w])
        if not m:
            problem(f"{where[w]} no longer says /{words}/: say it again, or change "
                    "tests/helpers/readme_check.py's LIMITS with it")
            continue
        try:
            want = figures(k)
        except Ambiguous as e:
            problem(f"{e.args[0]} is defined {len(e.args[1])} times ({', '.join(e.args[1])}): "
                    f"readme_check.py's LIMITS must take /{words}/'s figure from the file it "
                    f"describes (FILE:{e.args[0].rpartition(':')[2]}), or the code define it once")
            continue
        except KeyError as e:
            problem(f"{e.args[0]} is not a #define of liballoc's headers or sources that "
                    f"evaluates (readme_check.py's LIMITS: /{words}/)")
            continue
        for got, exp in zip(m.groups(), want):
            if got != exp:
                problem(f"{where[w]} says {got!r} in {m[0]!r}; the code's #define gives {exp!r}")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    readme = open(args[0]).read()
    if cmd == "section":
        print(section(readme, args[1]))
    elif cmd == "names":
        text = re.sub(r"^```.*?^```", "", readme, flags=re.M | re.S)  # code blocks
        print("\n".join(sorted(n for n in listed_names(text)
                               if n.startswith("liballoc_") and "<" not in n)))
    elif cmd == "tunables":
        check_tunables(readme, args[1])
    elif cmd == "cli":
        check_cli(readme, args[1], args[2])
    elif cmd == "metrics":
        check_metrics(readme, args[1], args[2])
    elif cmd == "man":
        check_man(readme, args[1], args[2], args[3], args[4])
    elif cmd == "limits":
        check_limits(readme, args[1], args[2])
    elif cmd == "completion":
        check_completion(args[0], args[1], args[2])
    elif cmd == "parser":
        check_parser(args[0], args[1], args[2], args[3])
    else:
        sys.exit(f"readme_check.py: unknown command {cmd!r}")
    for p in problems:
        print(p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
