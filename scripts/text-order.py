#!/usr/bin/env python3
"""text-order.py — write liballoc/text-order.ld: the order of liballoc.so's functions in
its text, from callgrind profiles of preloaded runs (bench/README.md, issue 23, proc30).

usage: scripts/text-order.py --start CG... [--fork CG...] --small CG... --work CG... \
    > liballoc/text-order.ld

--start: profiles of processes that only start, allocate a little and exit, with the
control thread (a malloc-once program, `sleep 1.5`): every function they run goes first,
next to .init and the PLT, so that such a process faults in one window of liballoc's text.
--fork: profiles of forked children (callgrind's output per process, --callgrind-out-file
with %p: a child that execs at once, a child that mallocs, frees and _exits): the
functions they run beyond the start's come next, so that such a child (a shell's,
python's subprocess) runs nothing past the first window either.
--small: profiles of short real programs (ls, python3 -c pass, sqlite3): the functions they
run next (their large blocks, signal handlers, the first decay), the most common first, so
that such a program's text stays in the first two windows.
--work: profiles of allocation workloads (threads, fork, large blocks, realloc): the
functions they run follow, the ones most workloads run first. The rest (error reports,
mailbox commands, rare paths) stays in .text after them. A function missing from the list
(renamed, new) lands in .text: the layout is a matter of pages, never of behaviour.
Needs liballoc built with -ffunction-sections (liballoc/module.mk).

The profiles of the committed list (proc30, session 30), each `LD_PRELOAD=build/liballoc.so
valgrind --tool=callgrind --callgrind-out-file=F CMD`:
  --start: a program that does malloc(32), free and exits; /bin/sleep 1.5
  --fork (fork35, session 35; listed by hand from its faults, `perf record -e page-faults
    -d`, not from profiles): the fork handlers a child of build/tests/forkfree 20 4 plain
    and of a fork+exec launcher (/work/notes/probes/runru /bin/true) ran
  (functions added since proc30, put in by hand in session 35: la_popcount_boot,
    bin_batch_grows and remove_if_stale with the start's; realloc_move_block,
    best_window, _exit, _Exit, dlopen, la_dlopen_prepare, shm_wake_control and
    large_probe first among
    the short programs': /bin/ls, sh -c, perl -e 1, sort, gzip, python3 -c pass)
  --small: /bin/ls /, python3 -c pass (with and without PYTHONMALLOC=malloc),
    sqlite3 :memory: 'select 1'
  --work (LIBALLOC_CONTROL=0): bench programs fastpath 220000 32, larson 1 1000 100000 4,
    logicmin 60, large_random 8 300 2 32 1, nbody_tree 3000 2, realloc_growth 64 300000,
    CPython's test_dict (bench/run.py's cpython-dict row); with the control thread:
    mech_remote 2 20000 2 16 256, xthreads 2 400, medsizes 1000 100000 65536, sizes 2,
    build/tests/forkfree 5 2 plain.
The output's last statement takes every other text input section in the default script's
order, so the library keeps a single .text (valgrind names no function in a second one)."""
import re
import subprocess
import sys

NAME = re.compile(r'^[A-Za-z_][A-Za-z0-9_.]*$')
LIB = re.compile(r'\[[^\]]*(liballoc|lib-[A-Za-z0-9]+)\.so\]')


def functions(profile):
    """The functions of liballoc.so that the callgrind profile ran."""
    out = subprocess.run(["callgrind_annotate", "--threshold=100", profile], check=True,
                         capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        m = LIB.search(line)
        if not m or not line[:m.start()].split():
            continue
        # "IR (PCT)  FILE:FUNCTION [OBJECT]"; a recursion's "'2" suffix dropped
        fn = line[:m.start()].split()[-1].split(':', 1)[-1].split("'", 1)[0]
        if NAME.match(fn):
            names.add(fn)
    return names


def patterns(fn):
    """The input sections (-ffunction-sections) that hold fn: a function declared cold is
    in .text.unlikely.NAME, as is the cold part (NAME.cold) gcc splits off another."""
    if fn.endswith('.cold'):
        return ['.text.unlikely.' + fn[:-5]]
    return ['.text.' + fn, '.text.unlikely.' + fn, '.text.startup.' + fn, '.text.exit.' + fn]


def by_count(profiles, skip):
    """The functions the profiles ran, not in skip, those most of them ran first."""
    seen = {}
    for p in profiles:
        for fn in functions(p) - skip:
            seen[fn] = seen.get(fn, 0) + 1
    return sorted(seen, key=lambda f: (-seen[f], f))


def main(argv):
    groups, cur = {'--start': [], '--fork': [], '--small': [], '--work': []}, None
    for a in argv:
        if a in groups:
            cur = a
        elif cur:
            groups[cur].append(a)
        else:
            sys.exit(__doc__)
    start = set()
    for p in groups['--start']:
        start |= functions(p)
    fork = by_count(groups['--fork'], start)
    small = by_count(groups['--small'], start | set(fork))
    work = by_count(groups['--work'], start | set(fork) | set(small))
    print("/* text-order.ld — generated by scripts/text-order.py (see there): liballoc.so's")
    print(" * functions that every process runs at start first, next to .init and the PLT, then")
    print(" * the ones allocation workloads run; everything else stays in .text after them. */")
    print("SECTIONS\n{\n  .text : {")
    print("    /* start: crtbeginS (frame_dummy, its .fini_array entry), libgcc and")
    print("     * libc_nonshared pieces linked in (__popcountdi2, pthread_atfork) */")
    print("    *crtbeginS.o(.text .text.*)\n    *libgcc.a:*(.text .text.*)")
    print("    *libc_nonshared.a:*(.text .text.*)")
    for fn in sorted(start):
        print("    *(%s)" % " ".join(patterns(fn)))
    if fork:
        print("    /* a forked child's (its fork handlers and what they call), so that a child that execs")
        print("     * or only allocates runs no code past the first window */")
        for fn in fork:
            print("    *(%s)" % " ".join(patterns(fn)))
    print("    /* short real programs, the most common first */")
    for fn in small:
        print("    *(%s)" % " ".join(patterns(fn)))
    print("    /* allocation workloads, the most common first */")
    for fn in work:
        print("    *(%s)" % " ".join(patterns(fn)))
    # then the rest as the default script orders it: this statement takes every input
    # section, so the default's .text is left empty and dropped (one .text, which
    # valgrind and perf need to name the functions)
    print("    /* the rest, in the default script's order */")
    print("    *(.text.unlikely .text.*_unlikely .text.unlikely.*)")
    print("    *(.text.exit .text.exit.*)\n    *(.text.startup .text.startup.*)")
    print("    *(.text.hot .text.hot.*)\n    *(SORT(.text.sorted.*))")
    print("    *(.text .stub .text.* .gnu.linkonce.t.*)\n    *(.gnu.warning)")
    print("  }\n}\nINSERT BEFORE .text;")


if __name__ == "__main__":
    main(sys.argv[1:])
