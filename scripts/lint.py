#!/usr/bin/env python3
"""lint.py — the conventions of docs/design.md §6 and the layers of §2.3, checked.

Run by ctest as the test `lint` (tests/lint.cmake), so `make check` fails on a violation;
alone: `python3 scripts/lint.py [--root DIR] [CHECK ...]`, CHECK among columns, tracker,
prefix, layers, sources, env, results, private, size, minus-one (default: all). Prints one line per violation, `path:line: [check] what`,
and exits 1 if there is any, 0 otherwise. Reads files only; needs Python 3.8 and nothing
else, and takes well under a second on the tree.

The checks:
  columns  a C or CUDA source line longer than 100 columns, in every file except the ones
           in LONG_LINES_ALLOWED (a listed file with no long line left must leave the list)
  tracker  a reference to a tracker (an issue, ticket, bug or PR number, or a ticket at all)
           in the text or the name of a file under TRACKER_DIRS or TRACKER_FILES
  prefix   a function named tprof_<x> (one underscore) defined or declared in src/, cli/ or
           python/src/ that include/trainprof.h does not declare: the public prefix belongs to
           the public API, internal helpers are tprof__<x>
  layers   an #include that crosses the layers of docs/design.md §2.3, other than the
           crossings listed in LAYER_CROSSINGS (a listed crossing that is gone must leave the
           list, so the list only shrinks)
  sources  a call from src/core/*.c to a function that src/capture/*.c defines: core reaches
           the capture sources only through their table (src/core/source.h, the one entry
           point tprof__sources), other than the calls listed in CORE_CAPTURE_CALLS (which,
           like LAYER_CROSSINGS, only shrinks)
  env      a getenv("TRAINPROF_...") in src/: the libraries read their variables through the
           one table of src/core/config.h (tprof__env), which also writes --help and the docs
  results  a read of the report's cJSON tree (cJSON_Get*, cJSON_ArrayForEach, the tp_j*
           helpers of analysis/jsonget.h, or including jsonget.h) in a file of RESULTS_ONLY:
           the analyses and rules there read the typed results of src/analysis/results.h,
           so a key renamed in the document cannot switch a rule off
  private  a file of src/analysis, src/export, cli or python/src that reaches a header of
           NEVER_INCLUDED (src/core/internal.h), directly or through the headers it includes
  size     a C source file over MAX_FILE_LINES (1000) lines or a function over
           MAX_FUNCTION_LINES (150), other than those in SIZE_ALLOWED (each with its reason)
  minus-one a function of src/ named tprof_, tprof__ or tp_, not static, returning int, that
           returns both a success code (0, TPROF_OK, TPROF_ERR_*) and a bare -1: the failure
           has a code in include/trainprof.h (other than MINUS_ONE_ALLOWED)
"""
import argparse
import os
import re
import sys

MAX_COLUMNS = 100
C_SUFFIXES = (".c", ".h", ".cu")
SKIP_DIRS = {"__pycache__", "node_modules"}  # and hidden directories and build* ones

# Files allowed lines over MAX_COLUMNS: report sections, diff, the Chrome and HTML exporters
# and their tests, the live metrics feed and the report benchmark, which together hold most of
# the tree's long lines (in the tests, mostly one assertion a line on an expected JSON value
# or metric line). Everything else is held to the limit.
LONG_LINES_ALLOWED = {
    "src/analysis/breakdown.c",
    "src/analysis/clocks.c",
    "src/analysis/comm.c",
    "src/analysis/diff.c",
    "src/analysis/gpu.c",
    "src/analysis/mfu.c",
    "src/export/chrome.c",
    "src/export/chrome_comm.c",
    "src/export/html.c",
    "src/core/metrics_feed.c",
    "bench/bench_report_scale.c",
    "tests/test_comm_groups.c",
    "tests/test_comm_times.c",
    "tests/test_diagnose.c",
    "tests/test_diff.c",
    "tests/test_gpu_report.c",
    "tests/test_html.c",
    "tests/test_metrics_endpoint.c",
    "tests/test_report.c",
    "tests/test_truth.c",
}

# The files whose analyses read only typed results (results.h), never the document: the
# diagnosis rules, stragglers and throughput, and the sections that fill the results.
RESULTS_ONLY = (
    "src/analysis/breakdown.c",
    "src/analysis/clocks.c",
    "src/analysis/comm_rank.c",
    "src/analysis/comm_rank_text.c",
    "src/analysis/comm_run.c",
    "src/analysis/comm_text.c",
    "src/analysis/diagnose.c",
    "src/analysis/diagnose_text.c",
    "src/analysis/ended.c",
    "src/analysis/energy.c",
    "src/analysis/figures.c",
    "src/analysis/findings.c",
    "src/analysis/gpu.c",
    "src/analysis/megatron.c",
    "src/analysis/memory_rules.c",
    "src/analysis/mfu.c",
    "src/analysis/processes.c",
    "src/analysis/report.c",
    "src/analysis/report_text.c",
    "src/analysis/results.c",
    "src/analysis/stragglers.c",
)
JSON_READ_RE = re.compile(r"\b(cJSON_Get\w*|cJSON_ArrayForEach|tp_j(obj|num|str|has))\s*\(|"
                          r'#\s*include\s*"analysis/jsonget\.h"')

# Where a tracker reference may not appear: directories (recursively) and single files.
TRACKER_DIRS = ("src", "cli", "python", "tests", "bench", "include", "scripts", "examples",
                "docs", ".ci")
TRACKER_FILES = ("README.md", "CMakeLists.txt", "Makefile")
TRACKER_TEXT_SUFFIXES = (".c", ".h", ".cu", ".py", ".pyi", ".sh", ".cmake", ".md", ".txt",
                         ".toml", ".supp", ".json", "")
# "issue 7", "issue #4", "issues 5-8", "issue-7", "ticket", "bug 12", "PR #3"; an issue in its
# other sense ("in issue order") has no number after it.
TRACKER_RE = re.compile(
    r"\b(?:issues?|bugs?|PRs?)[ \t]*[-#]?[ \t]*#?\d+"
    r"|\btickets?\b"
    r"|\bissue\d+",
    re.IGNORECASE)

PREFIX_DIRS = ("src", "cli", "python/src")
PUBLIC_HEADER = "include/trainprof.h"

# The layers, bottom up (docs/design.md §2.3): a file may include headers of its own
# directory, of the public header (include/) and of the directories listed for its
# directory. Files outside every listed directory (tests/, bench/) may include anything.
LAYERS = {
    "include": (),
    "src/format": ("include",),
    "src/core": ("include", "src/format", "src/common"),
    "src/capture": ("include", "src/format", "src/core", "src/common"),
    "src/timers": ("include", "src/format", "src/core", "src/common"),
    "src/analysis": ("include", "src/format", "src/common"),
    "src/export": ("include", "src/format", "src/analysis", "src/common"),
    "cli": ("include", "src/format", "src/analysis", "src/export", "src/common"),
    "python/src": ("include",),
    "src/common": ("include",),
    "examples": ("include",),
}
# The crossings that exist today (docs/design.md §2.3 says why each, and §8 where they go).
# Each is one shared definition that two layers must agree on, a copy in each layer being the
# duplicate to avoid: a header-only one (between the runtime and the offline side, or for
# nvtx_abi.h between parts of the runtime), the Timers text format that both sides compile
# in, or the declarations of the bridge libtrainprof.so exports (comm_ext.h).
LAYER_CROSSINGS = {
    ("src/core/nvtx_emit.c", "src/capture/nvtx_abi.h"),
    ("src/analysis/steps.c", "src/core/step_names.h"),
    ("src/analysis/mfu.c", "src/core/per_step.h"),
    ("src/analysis/report_timers.c", "src/timers/timers_format.h"),
    ("cli/cmd_run.c", "src/core/config.h"),
    ("cli/cmd_run.c", "src/core/kwindow.h"),
    ("cli/cmd_capture.c", "src/core/capture_ctl.h"),
    ("cli/run_finish.c", "src/core/capture_ctl.h"),
    ("cli/cmd_run.c", "src/core/per_step.h"),
    ("cli/common.c", "src/core/per_step.h"),
    ("cli/common.c", "src/core/config.h"),
    ("python/src/session.c", "src/capture/comm_ext.h"),
}
# Calls from src/core to functions src/capture defines that are not capture sources' hooks
# (docs/design.md §1.1, §8): (core file, function).
CORE_CAPTURE_CALLS = {
    # the table of capture sources itself: core's one way in (src/capture/sources.c)
    ("src/core/sources_run.c", "tprof__sources"),
}
# A function defined (not declared, not static) at file scope, named tprof__<x>.
CAPTURE_DEF_RE = re.compile(r"^(?!static\b)[A-Za-z_][\w \t\*]*?[\s\*](tprof__\w+)\s*\([^;{]*\)\s*\{",
                            re.MULTILINE)
CALL_RE = re.compile(r"\b(tprof__\w+)\s*\(")

# Headers that a layer may not reach at all, directly or through the headers it includes, and
# that no crossing can allow: the runtime's private header (the session's state and hooks)
# is no business of the offline analysis, the exporters, the command or the Python module,
# which use the public API and the shared headers above.
NEVER_INCLUDED = {
    "src/analysis": ("src/core/internal.h",),
    "src/export": ("src/core/internal.h",),
    "cli": ("src/core/internal.h",),
    "python/src": ("src/core/internal.h",),
}
# Where #include "x" is looked for, after the including file's own directory: the include
# directories the build gives (src/ and include/; tests/ for tests and bench only).
INCLUDE_ROOTS = ("src", "include")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def walk(root, top):
    """Repository-relative paths of the files under top (a directory or a file)."""
    base = os.path.join(root, top)
    if os.path.isfile(base):
        yield top
        return
    for d, dirs, files in os.walk(base):
        dirs[:] = sorted(x for x in dirs
                         if x not in SKIP_DIRS and not x.startswith((".", "build")))
        for f in sorted(files):
            yield os.path.relpath(os.path.join(d, f), root)


def read_text(root, rel):
    try:
        with open(os.path.join(root, rel), "rb") as f:
            data = f.read()
    except OSError:
        return None
    if b"\0" in data:
        return None
    return data.decode("utf-8", errors="replace")


def c_sources(root):
    for rel in walk(root, "."):
        rel = os.path.normpath(rel)
        if rel.endswith(C_SUFFIXES):
            yield rel


def check_columns(root, out):
    long_files = set()
    for rel in c_sources(root):
        text = read_text(root, rel)
        if text is None:
            continue
        for n, line in enumerate(text.split("\n"), 1):
            if len(line) > MAX_COLUMNS:
                long_files.add(rel)
                if rel not in LONG_LINES_ALLOWED:
                    out.append("%s:%d: [columns] %d columns, more than %d"
                               % (rel, n, len(line), MAX_COLUMNS))
    for rel in sorted(LONG_LINES_ALLOWED - long_files):
        out.append("scripts/lint.py: [columns] %s has no line over %d columns: remove it from "
                   "LONG_LINES_ALLOWED" % (rel, MAX_COLUMNS))


def check_tracker(root, out):
    me = os.path.relpath(os.path.abspath(__file__), root)
    seen = set()
    for top in TRACKER_DIRS + TRACKER_FILES:
        if not os.path.exists(os.path.join(root, top)):
            continue
        for rel in walk(root, top):
            rel = os.path.normpath(rel)
            if rel in seen or rel == me:
                continue
            seen.add(rel)
            if TRACKER_RE.search(os.path.basename(rel)):
                out.append("%s:0: [tracker] the file is named after a tracker entry: name it by "
                           "what it does" % rel)
            name = os.path.basename(rel)
            if not (name.endswith(TRACKER_TEXT_SUFFIXES) or "." not in name):
                continue
            text = read_text(root, rel)
            if text is None:
                continue
            for n, line in enumerate(text.split("\n"), 1):
                m = TRACKER_RE.search(line)
                if m:
                    out.append("%s:%d: [tracker] \"%s\": state the rule and its reason, not the "
                               "ticket" % (rel, n, m.group(0)))


def strip_c(text):
    """text with comments, string and character literals blanked (newlines kept)."""
    res, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            res.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            res.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            res.append(c + re.sub(r"[^\n]", " ", text[i + 1:j - 1]) + c)
            i = j
        else:
            res.append(c)
            i += 1
    return "".join(res)


# A function defined or declared at file scope: a line that starts in column 0 with a type
# (one or more words, maybe pointers) followed by the name and "(".
FUNC_RE = re.compile(r"^(?!return\b|else\b|case\b|goto\b)[A-Za-z_][\w \t\*]*?[\s\*]"
                     r"(tprof_[a-z0-9]\w*)\s*\(", re.MULTILINE)


def check_prefix(root, out):
    header = read_text(root, PUBLIC_HEADER) or ""
    public = set(re.findall(r"\btprof_[a-z0-9]\w*", strip_c(header)))
    for top in PREFIX_DIRS:
        for rel in walk(root, top):
            rel = os.path.normpath(rel)
            if not rel.endswith(C_SUFFIXES):
                continue
            text = strip_c(read_text(root, rel) or "")
            for m in FUNC_RE.finditer(text):
                name = m.group(1)
                if name in public:
                    continue
                line = text.count("\n", 0, m.start(1)) + 1
                out.append("%s:%d: [prefix] %s is not declared in %s: internal functions are "
                           "named tprof__%s" % (rel, line, name, PUBLIC_HEADER, name[6:]))


def layer_of(rel):
    best = None
    for d in LAYERS:
        if rel == d or rel.startswith(d + "/"):
            if best is None or len(d) > len(best):
                best = d
    return best


def resolve(root, rel, quote, target):
    here = os.path.dirname(rel)
    roots = INCLUDE_ROOTS + (("tests",) if rel.startswith(("tests/", "bench/")) else ())
    cands = ([os.path.join(here, target)] if quote == '"' else []) + \
        [os.path.join(r, target) for r in roots]
    for c in cands:
        c = os.path.normpath(c)
        if not c.startswith("..") and os.path.isfile(os.path.join(root, c)):
            return c
    return None  # a system or vendor header


def check_layers(root, out):
    used = set()
    for rel in c_sources(root):
        layer = layer_of(rel)
        if layer is None:
            continue
        allowed = (layer,) + LAYERS[layer] + ("include",)
        text = read_text(root, rel) or ""
        for n, line in enumerate(text.split("\n"), 1):
            m = INCLUDE_RE.match(line)
            if not m:
                continue
            dep = resolve(root, rel, m.group(1), m.group(2))
            if dep is None:
                continue
            dep_layer = layer_of(dep)
            if dep_layer is None or dep_layer in allowed:
                continue
            if (rel, dep) in LAYER_CROSSINGS:
                used.add((rel, dep))
                continue
            out.append("%s:%d: [layers] %s (%s) includes %s (%s): not below it in "
                       "docs/design.md §2.3" % (rel, n, rel, layer, dep, dep_layer))
    for rel, dep in sorted(LAYER_CROSSINGS - used):
        out.append("scripts/lint.py: [layers] %s no longer includes %s: remove the crossing from "
                   "LAYER_CROSSINGS (and from docs/design.md §2.3)" % (rel, dep))


def includes_of(root, rel, cache):
    """The project headers rel includes, resolved: [(line, header)]."""
    if rel not in cache:
        found = []
        for n, line in enumerate((read_text(root, rel) or "").split("\n"), 1):
            m = INCLUDE_RE.match(line)
            dep = m and resolve(root, rel, m.group(1), m.group(2))
            if dep:
                found.append((n, dep))
        cache[rel] = found
    return cache[rel]


def check_never_included(root, out):
    cache = {}
    for rel in c_sources(root):
        banned = NEVER_INCLUDED.get(layer_of(rel))
        if not banned:
            continue
        for n, first in includes_of(root, rel, cache):
            seen, todo, path = set(), [(first, [first])], None
            while todo and path is None:
                h, chain = todo.pop()
                if h in banned:
                    path = chain
                elif h not in seen:
                    seen.add(h)
                    todo += [(d, chain + [d]) for _, d in includes_of(root, h, cache)]
            if path:
                out.append("%s:%d: [private] %s (%s) reaches %s (%s): the runtime's private "
                           "header, never included above src/core (docs/design.md §2.3)"
                           % (rel, n, rel, layer_of(rel), path[-1], " -> ".join(path)))


def check_results(root, out):
    for rel in RESULTS_ONLY:
        text = read_text(root, rel)
        if text is None:
            out.append("%s:0: [results] listed in RESULTS_ONLY but missing" % rel)
            continue
        # comments and strings blanked, but the include's path kept: it is the violation
        code = "\n".join(line if line.lstrip().startswith("#") else strip_line
                         for line, strip_line in zip(text.split("\n"),
                                                     strip_c(text).split("\n")))
        for n, line in enumerate(code.split("\n"), 1):
            m = JSON_READ_RE.search(line)
            if m:
                out.append("%s:%d: [results] \"%s\" reads the report document: read the typed "
                           "results (src/analysis/results.h)" % (rel, n, m.group(0).strip()))


def check_sources(root, out):
    defined = set()
    for rel in walk(root, "src/capture"):
        if rel.endswith(".c"):
            text = strip_c(read_text(root, rel) or "")
            defined.update(m.group(1) for m in CAPTURE_DEF_RE.finditer(text))
    used = set()
    for rel in walk(root, "src/core"):
        rel = os.path.normpath(rel)
        if not rel.endswith(".c"):
            continue
        text = strip_c(read_text(root, rel) or "")
        for m in CALL_RE.finditer(text):
            name = m.group(1)
            if name not in defined:
                continue
            if (rel, name) in CORE_CAPTURE_CALLS:
                used.add((rel, name))
                continue
            line = text.count("\n", 0, m.start(1)) + 1
            out.append("%s:%d: [sources] core calls the capture source's %s by name: give the "
                       "source a member of tprof__source (src/core/source.h) and loop over "
                       "the table" % (rel, line, name))
    for rel, name in sorted(CORE_CAPTURE_CALLS - used):
        out.append("scripts/lint.py: [sources] %s no longer calls %s: remove it from "
                   "CORE_CAPTURE_CALLS" % (rel, name))


MAX_FILE_LINES = 1000
MAX_FUNCTION_LINES = 150
# Where the size limits hold: every C source of the tree (src, cli, python, tests, bench,
# examples), each file and each function defined in it.
# The files (path, None) and functions (path, name) allowed over the limits, each with the
# reason. Like LAYER_CROSSINGS, the list only shrinks: an entry within the limits must leave.
SIZE_ALLOWED = {}
# The name of the function a file-scope "{" opens: the last identifier before the "(" of its
# parameter list, in a header that is no initializer (=) and no struct, union or enum body.
FUNC_HEAD_RE = re.compile(r"([A-Za-z_]\w*)\s*\([^()]*(?:\([^()]*\)[^()]*)*\)\s*$")
AGGREGATE_RE = re.compile(r"\b(struct|union|enum)\b|=")


def blank_preprocessor(text):
    """text (comments and strings already blanked) with preprocessor lines blanked too,
    continuation lines included, so that a macro's braces do not count as code."""
    lines = text.split("\n")
    cont = False
    for i, line in enumerate(lines):
        if cont or line.lstrip().startswith("#"):
            cont = line.rstrip().endswith("\\")
            lines[i] = ""
    return "\n".join(lines)


def functions_of(text):
    """[(name, first line, last line, header, body)] of the functions text defines at file
    scope: lines from the one of the name to the one of the closing brace; the header is the
    code before the "{" (return type, name, parameters), the body the braces and what they
    hold, comments and strings blanked."""
    code = blank_preprocessor(strip_c(text))
    found, depth, head_start, i = [], 0, 0, 0
    opened = None
    for i, c in enumerate(code):
        if c == "{":
            if depth == 0:
                head = code[head_start:i]
                m = FUNC_HEAD_RE.search(head)
                if m and not AGGREGATE_RE.search(head[:m.start()].split(";")[-1] + m.group(0)):
                    opened = (m.group(1), code.count("\n", 0, head_start + m.start(1)) + 1,
                              head.split(";")[-1].split("}")[-1].strip(), i)
                else:
                    opened = None
            depth += 1
        elif c == "}":
            depth = max(depth - 1, 0)
            if depth == 0:
                if opened:
                    found.append((opened[0], opened[1], code.count("\n", 0, i) + 1,
                                  opened[2], code[opened[3]:i + 1]))
                opened = None
                head_start = i + 1
        elif c == ";" and depth == 0:
            head_start = i + 1
    return found


def check_size(root, out):
    over = set()
    for rel in c_sources(root):
        text = read_text(root, rel)
        if text is None:
            continue
        nlines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        if nlines > MAX_FILE_LINES:
            over.add((rel, None))
            if (rel, None) not in SIZE_ALLOWED:
                out.append("%s:%d: [size] %d lines, more than %d: split it along its seams"
                           % (rel, nlines, nlines, MAX_FILE_LINES))
        for name, first, last, _, _ in functions_of(text):
            n = last - first + 1
            if n <= MAX_FUNCTION_LINES:
                continue
            over.add((rel, name))
            if (rel, name) not in SIZE_ALLOWED:
                out.append("%s:%d: [size] %s is %d lines, more than %d: split it into steps"
                           % (rel, first, name, n, MAX_FUNCTION_LINES))
    for rel, name in sorted(set(SIZE_ALLOWED) - over, key=lambda k: (k[0], k[1] or "")):
        out.append("scripts/lint.py: [size] %s%s is within the limits: remove it from "
                   "SIZE_ALLOWED" % (rel, " " + name if name else ""))


# The functions the minus-one check holds to the error codes: the project's own (tprof_,
# tprof__, tp_), not static, returning int, in src/. A function that returns a code of the
# table (TPROF_OK, TPROF_ERR_*) or 0 for success and a bare -1 for a failure mixes the two
# conventions: the failure has a name in the table (include/trainprof.h), which says what
# went wrong. A function whose int is a value (an index, a count, a port) with -1 for "none"
# returns no success code and is not held. Functions of another name (libc's, interposed)
# keep their own contract.
MINUS_ONE_DIRS = ("src",)
PROJECT_FUNC_RE = re.compile(r"^tp(rof)?_")
RETURN_MINUS_ONE_RE = re.compile(r"\breturn\s*\(?\s*-\s*1\s*\)?\s*;")
RETURN_CODE_RE = re.compile(r"\breturn\s*\(?\s*(0|TPROF_OK|TPROF_ERR_\w+)\s*\)?\s*;")
# The functions left for now, each with the reason (the list only shrinks).
MINUS_ONE_ALLOWED = {}


def check_minus_one(root, out):
    used = set()
    for top in MINUS_ONE_DIRS:
        for rel in walk(root, top):
            rel = os.path.normpath(rel)
            if not rel.endswith(".c"):
                continue
            text = read_text(root, rel) or ""
            for name, first, _, head, body in functions_of(text):
                rtype = head[:head.rfind(name)].split()
                if (not PROJECT_FUNC_RE.match(name) or "static" in rtype or not rtype
                        or rtype[-1] != "int" or "*" in head[:head.rfind(name)]):
                    continue
                if not RETURN_CODE_RE.search(body):
                    continue
                m = RETURN_MINUS_ONE_RE.search(body)
                if not m:
                    continue
                if (rel, name) in MINUS_ONE_ALLOWED:
                    used.add((rel, name))
                    continue
                line = first + body.count("\n", 0, m.start())
                out.append("%s:%d: [minus-one] %s returns a bare -1 beside the error codes: "
                           "return the code of include/trainprof.h that names the failure"
                           % (rel, line, name))
    for rel, name in sorted(set(MINUS_ONE_ALLOWED) - used):
        out.append("scripts/lint.py: [minus-one] %s %s no longer returns a bare -1: remove it "
                   "from MINUS_ONE_ALLOWED" % (rel, name))


GETENV_RE = re.compile(r'\bgetenv\s*\(\s*"TRAINPROF_')


def check_env(root, out):
    for rel in walk(root, "src"):
        if not rel.endswith(C_SUFFIXES):
            continue
        for n, line in enumerate((read_text(root, rel) or "").split("\n"), 1):
            if GETENV_RE.search(line):
                out.append("%s:%d: [env] read TRAINPROF_* variables through src/core/config.h "
                           "(add a row to TPROF__OPTIONS, call tprof__env)" % (rel, n))


CHECKS = {"columns": check_columns, "tracker": check_tracker, "prefix": check_prefix,
          "layers": check_layers, "sources": check_sources,
          "env": check_env, "results": check_results, "private": check_never_included,
          "size": check_size, "minus-one": check_minus_one}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    help="the repository root (default: this script's parent directory)")
    ap.add_argument("checks", nargs="*", metavar="CHECK",
                    help="columns, tracker, prefix, layers, sources, env, results, private, size, "
                         "minus-one (default: all)")
    a = ap.parse_args()
    for name in a.checks:
        if name not in CHECKS:
            ap.error("unknown check %r (choose from %s)" % (name, ", ".join(sorted(CHECKS))))
    out = []
    for name in a.checks or sorted(CHECKS):
        CHECKS[name](os.path.abspath(a.root), out)
    for line in out:
        print(line)
    print("lint: %d violation%s" % (len(out), "" if len(out) == 1 else "s"))
    return 1 if out else 0


if __name__ == "__main__":
    sys.exit(main())
