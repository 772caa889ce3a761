#!/usr/bin/env python3
"""check-layers.py [--only CHECK] OBJDIR - the layering rules of src/, checked on the build.

OBJDIR is a build directory holding the object of every src/<layer>/<file>.c as
OBJDIR/<layer>/<file>.o (build/, build-asan/, ...: the Makefile makes them). Four checks, each
one TAP line ("ok N - ..." / "not ok N - ...", details on "# " lines), each with its list of
known exceptions below, one line per exception:
  cycles    no call cycle between src/ files: the file-to-file graph of nm's defined and
            undefined symbols has no strongly connected component of two files or more
  getenv    only src/cli/main.c reads the environment (getenv, secure_getenv)
  lines     no src/ file over MAX_FILE_LINES lines
  functions no function of src/ over MAX_FUNCTION_LINES lines (universal-ctags' start and end)
A violation not in its list fails the check, and so does a listed exception that no longer
occurs: strike it from the list when its file is fixed. Needs python3, binutils' nm and
universal-ctags; cu/ and test/ are not checked.
"""
import os
import subprocess
import sys

MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 120

# Cycles (the files of one strongly connected component).
KNOWN_CYCLES = [
]

# Files besides src/cli/main.c that call getenv.
KNOWN_GETENV = [
]

# Files over MAX_FILE_LINES lines.
KNOWN_LONG_FILES = [
]

# Functions over MAX_FUNCTION_LINES lines, as file:function.
KNOWN_LONG_FUNCTIONS = [
]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV_READERS = {"getenv", "secure_getenv"}
ALLOWED_ENV = "src/cli/main.c"


def sources():
    """src/<layer>/<file>.c, sorted, relative to ROOT."""
    out = []
    for layer in sorted(os.listdir(os.path.join(ROOT, "src"))):
        d = os.path.join(ROOT, "src", layer)
        if os.path.isdir(d):
            out += ["src/%s/%s" % (layer, f) for f in sorted(os.listdir(d)) if f.endswith(".c")]
    return out


def symbols(objdir, srcs):
    """{src: (defined globals, undefined symbols)} from nm -P; raises on a missing object."""
    objs = {}
    for s in srcs:
        o = os.path.join(objdir, s[len("src/"):-2] + ".o")
        if not os.path.isfile(o):
            raise RuntimeError("%s: no object for %s (build first)" % (o, s))
        objs[o] = s
    res = subprocess.run(["nm", "-P", "-A"] + list(objs), capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError("nm failed: " + res.stderr.strip())
    table = {s: (set(), set()) for s in srcs}
    for line in res.stdout.splitlines():
        head, sep, rest = line.partition(": ")
        f = rest.split()
        if not sep or len(f) < 2 or head not in objs:
            continue
        name, kind = f[0], f[1]
        defined, undefined = table[objs[head]]
        if kind in ("U", "w"):
            undefined.add(name)
        elif (kind.isupper() and kind != "U") or kind in ("i", "u", "v"):
            defined.add(name)
    return table


def call_graph(table):
    """{a: {b: symbols a takes from b}} for files a != b."""
    owner = {}
    for s, (defined, _) in table.items():
        for name in defined:
            owner.setdefault(name, set()).add(s)
    graph = {s: {} for s in table}
    for s, (_, undefined) in table.items():
        for name in undefined:
            for o in owner.get(name, ()):
                if o != s:
                    graph[s].setdefault(o, set()).add(name)
    return graph


def components(graph):
    """Strongly connected components (Tarjan), as sets of nodes."""
    index, low, on, stack, out = {}, {}, set(), [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            out.append(comp)

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


STRIKE = "known exception no longer occurs, strike it from scripts/check-layers.py: "


def compare(found, known, what):
    """found: {item: detail}. A line for each item found but not known and each known item not
    found (none: the check passes)."""
    msgs = ["%s: %s%s" % (what, x, found[x]) for x in sorted(found) if x not in known]
    return msgs + [STRIKE + x for x in sorted(known) if x not in found]


def check_cycles(objdir, srcs):
    graph = call_graph(symbols(objdir, srcs))
    known = [frozenset(c) for c in KNOWN_CYCLES]
    msgs = []
    found = [frozenset(c) for c in components(graph) if len(c) > 1]
    for comp in sorted(found, key=sorted):
        if comp in known:
            continue
        msgs.append("call cycle between %s:" % " ".join(sorted(comp)))
        for a in sorted(comp):
            for b in sorted(set(graph[a]) & comp):
                msgs.append("  %s calls %s: %s" % (a, b, ", ".join(sorted(graph[a][b]))))
    msgs += [STRIKE + "cycle " + " ".join(sorted(c)) for c in known if c not in found]
    return "no call cycle between src/ files (%d known)" % len(known), msgs


def check_getenv(objdir, srcs):
    table = symbols(objdir, srcs)
    found = {s: "" for s, (_, undefined) in table.items() if undefined & ENV_READERS and s != ALLOWED_ENV}
    return ("the environment is read only in %s (%d known others)" % (ALLOWED_ENV, len(KNOWN_GETENV)),
            compare(found, set(KNOWN_GETENV), "calls getenv"))


def all_src_files():
    out = []
    for d, _, files in os.walk(os.path.join(ROOT, "src")):
        out += [os.path.relpath(os.path.join(d, f), ROOT) for f in files]
    return sorted(out)


def check_lines(objdir, srcs):
    found = {}
    for f in all_src_files():
        with open(os.path.join(ROOT, f), "rb") as fh:
            n = fh.read().count(b"\n")
        if n > MAX_FILE_LINES:
            found[f] = " (%d lines)" % n
    msgs = compare(found, set(KNOWN_LONG_FILES), "over %d lines" % MAX_FILE_LINES)
    return ("no src/ file over %d lines (%d known)" % (MAX_FILE_LINES, len(KNOWN_LONG_FILES)), msgs)


def check_functions(objdir, srcs):
    try:
        ver = subprocess.run(["ctags", "--version"], capture_output=True, text=True).stdout
    except OSError:
        ver = ""
    if "Universal Ctags" not in ver:
        raise RuntimeError("universal-ctags is not installed (scripts/install-deps.sh installs it)")
    res = subprocess.run(["ctags", "-f", "-", "--languages=C", "--kinds-C=f", "--fields=+ne"] + srcs,
                         capture_output=True, text=True, cwd=ROOT)
    if res.returncode != 0:
        raise RuntimeError("ctags failed: " + res.stderr.strip())
    found = {}
    for line in res.stdout.splitlines():
        f = line.split("\t")
        fields = dict(x.split(":", 1) for x in f[3:] if ":" in x)
        if len(f) < 4 or "line" not in fields:
            continue
        if "end" not in fields:
            raise RuntimeError("ctags gave no end line for %s in %s" % (f[0], f[1]))
        n = int(fields["end"]) - int(fields["line"]) + 1
        if n > MAX_FUNCTION_LINES:
            found["%s:%s" % (f[1], f[0])] = " (%d lines)" % n
    msgs = compare(found, set(KNOWN_LONG_FUNCTIONS), "over %d lines" % MAX_FUNCTION_LINES)
    return ("no src/ function over %d lines (%d known)" % (MAX_FUNCTION_LINES, len(KNOWN_LONG_FUNCTIONS)),
            msgs)


CHECKS = [("cycles", check_cycles), ("getenv", check_getenv), ("lines", check_lines),
          ("functions", check_functions)]


def main(argv):
    only = None
    if len(argv) >= 2 and argv[0] == "--only":
        only, argv = argv[1], argv[2:]
    if len(argv) != 1 or (only and only not in dict(CHECKS)):
        sys.stderr.write("usage: check-layers.py [--only %s] OBJDIR\n" % "|".join(n for n, _ in CHECKS))
        return 2
    objdir = argv[0]
    srcs = sources()
    todo = [(n, fn) for n, fn in CHECKS if not only or n == only]
    print("1..%d" % len(todo))
    failed = 0
    for i, (name, fn) in enumerate(todo, 1):
        try:
            title, msgs = fn(objdir, srcs)
        except RuntimeError as err:
            title, msgs = name, [str(err)]
        print("%s %d - layers: %s" % ("not ok" if msgs else "ok", i, title))
        for m in msgs:
            print("# " + m)
        failed += bool(msgs)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
