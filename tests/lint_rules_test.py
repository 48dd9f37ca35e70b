#!/usr/bin/env python3
"""lint_rules_test.py — scripts/lint.py's checks on planted trees (size, minus-one, layers,
sources, results, tracker): each fails on a violation placed in a scratch tree, with the exact
line it prints, and passes on the same tree within the rules. Usage: lint_rules_test.py
LINT_PY SCRATCH_DIR."""
import os
import shutil
import subprocess
import sys


ISSUE, TRK = "iss" + "ue 23", "tick" + "et"


def plant(root, files):
    shutil.rmtree(root, ignore_errors=True)
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)


def lint(lint_py, root, check, planted):
    """The lines `check` prints about the planted files (the allow-lists of the real tree
    name files a scratch tree lacks: those lines, and so the exit status, are not the
    test's)."""
    r = subprocess.run([sys.executable, lint_py, "--root", root, check],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    if r.returncode not in (0, 1):
        sys.exit("FAIL lint.py %s: exit %d: %s" % (check, r.returncode, r.stderr.strip()))
    return [l for l in r.stdout.splitlines() if l.split(":")[0] in planted]


def function(name, body_lines, ret="int"):
    """A function whose definition spans exactly 2 + body_lines lines."""
    return "%s %s(int x) {\n%s}\n" % (ret, name, "    x++;\n" * body_lines)


def expect(got, want, what):
    if got != want:
        sys.exit("FAIL %s:\n  got  %r\n  want %r" % (what, got, want))
    print("ok   %s" % what)


def main():
    lint_py, scratch = sys.argv[1], sys.argv[2]
    root = os.path.join(scratch, "lint-rules")

    # size: a function of 151 lines (name on line 3), and a file of 1001 lines
    big = "/* a */\n\n" + function("tprof__long", 149) + "\n" + function("fits", 148)
    plant(root, {"src/core/big.c": big,
                 "src/core/long.h": "/* x */\n" * 1001})
    lines = lint(lint_py, root, "size", ("src/core/big.c", "src/core/long.h"))
    expect(lines, ["src/core/big.c:3: [size] tprof__long is 151 lines, more than 150: split it "
                   "into steps",
                   "src/core/long.h:1001: [size] 1001 lines, more than 1000: split it along "
                   "its seams"], "size: the function and the file named with their lengths")
    plant(root, {"src/core/big.c": function("tprof__long", 148),
                 "src/core/long.h": "/* x */\n" * 1000})
    lines = lint(lint_py, root, "size", ("src/core/big.c", "src/core/long.h"))
    expect(lines, [], "size: 150 lines and 1000 lines pass")

    # minus-one: 0 and a bare -1 in one function; -1 alone as a "none" value; static; libc's
    mixed = ("#include \"trainprof.h\"\n"
             "int tprof__open_it(int x) {\n"
             "    if (x > 1) return TPROF_ERR_IO;\n"
             "    if (x < 0)\n"
             "        return -1;\n"
             "    return 0;\n"
             "}\n"
             "int tp_index_of(int x) {\n"
             "    if (x < 0) return -1;\n"
             "    return x;\n"
             "}\n"
             "static int helper(int x) {\n"
             "    if (x) return -1;\n"
             "    return 0;\n"
             "}\n"
             "int siginterrupt(int sig, int flag) {\n"
             "    if (sig < 0) return -1;\n"
             "    return flag;\n"
             "}\n")
    plant(root, {"src/core/codes.c": mixed})
    lines = lint(lint_py, root, "minus-one", ("src/core/codes.c",))
    expect(lines, ["src/core/codes.c:5: [minus-one] tprof__open_it returns a bare -1 beside the "
                   "error codes: return the code of include/trainprof.h that names the failure"],
           "minus-one: only the function mixing a code with -1, at the line of the -1")
    plant(root, {"src/core/codes.c": mixed.replace("        return -1;",
                                                   "        return TPROF_ERR_INVALID_ARG;")})
    lines = lint(lint_py, root, "minus-one", ("src/core/codes.c",))
    expect(lines, [], "minus-one: the code instead of -1 passes")

    # layers: core includes the analysis; sources: core calls a capture source by name;
    # results: an analysis reads the report document back; tracker: a tracker's item named in a
    # comment (the planted words are joined at run time, so that this file passes the check)
    bad = {"src/analysis/report.h": "/* r */\n",
           "src/core/up.c": "#include \"analysis/report.h\"\nint tprof__up(void) { return 0; }\n",
           "src/capture/cupti.c": "void tprof__cupti_tick(void) {}\n",
           "src/capture/cupti.h": "void tprof__cupti_tick(void);\n",
           "src/core/calls.c": "#include \"capture/cupti.h\"\n"
                               "void tprof__g(void) { tprof__cupti_tick(); }\n",
           "src/analysis/report.c": "#include <cjson/cJSON.h>\nstatic double f(const cJSON *o) "
                                    "{ return cJSON_GetObjectItemCaseSensitive(o, \"x\")"
                                    "->valuedouble; }\n",
           "src/core/why.c": "/* as " + ISSUE + " asked */\nint tprof__why(void) { return 0; }\n"}
    plant(root, bad)
    expect(lint(lint_py, root, "layers", ("src/core/up.c",)),
           ["src/core/up.c:1: [layers] src/core/up.c (src/core) includes src/analysis/report.h "
            "(src/analysis): not below it in docs/design.md §2.3"], "layers: core above analysis")
    expect(lint(lint_py, root, "sources", ("src/core/calls.c",)),
           ["src/core/calls.c:2: [sources] core calls the capture source's tprof__cupti_tick by "
            "name: give the source a member of tprof__source (src/core/source.h) and loop over "
            "the table"], "sources: a capture source called by name from core")
    expect(lint(lint_py, root, "results", ("src/analysis/report.c",)),
           ["src/analysis/report.c:2: [results] \"cJSON_GetObjectItemCaseSensitive(\" reads the "
            "report document: read the typed results (src/analysis/results.h)"],
           "results: an analysis reading the document")
    expect(lint(lint_py, root, "tracker", ("src/core/why.c",)),
           ["src/core/why.c:1: [tracker] \"%s\": state the rule and its reason, not the %s"
            % (ISSUE, TRK)], "tracker: a tracker's item named in a comment")
    plant(root, {"src/analysis/report.h": "/* r */\n",
                 "src/analysis/report.c": "#include \"analysis/report.h\"\nint tp_r(void) "
                                          "{ return 0; }\n",
                 "src/core/why.c": "/* the rule, with its reason */\nint tprof__why(void) "
                                   "{ return 0; }\n"})
    for check, files in (("layers", ("src/analysis/report.c",)),
                         ("results", ("src/analysis/report.c",)),
                         ("tracker", ("src/core/why.c",))):
        expect(lint(lint_py, root, check, files), [], "%s: the tree within the rule passes" % check)
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
