#!/bin/sh
# `cmake --install` as a user runs it, then the installation used the three ways the
# ecosystem expects, each checked on the report of what it recorded:
#  (a) a C program built with `pkg-config --cflags --libs trainprof` records 5 steps;
#  then the installed tree is moved (everything but the pkg-config files must follow), and
#  (b) the same program built by a CMake project with find_package(trainprof) and
#      trainprof::trainprof records 4 steps;
#  (c) the installed `trainprof run --python` runs a script doing 3 trainprof.step()s with
#      the installed package and library; the installed module also imports on its own;
#  (d) the installed command finds its library through the dynamic linker when it is not in
#      ../lib (an installation whose libdir is lib/<multiarch>).
# Usage: install_test.sh CMAKE BUILD SRC DIR CC LIBDIR PYTHON|- MPI(ON|OFF)
set -eu
CMAKE=$1 BUILD=$2 SRC=$3 DIR=$4 CC=$5 LIBDIR=$6 PY=$7 MPI=$8
unset TRAINPROF_DIR TRAINPROF_LIB TRAINPROF_PYTHON_DIR TRAINPROF_PYTHON PYTHONPATH || true
export PYTHONDONTWRITEBYTECODE=1
rm -rf "$DIR" && mkdir -p "$DIR"
A=$DIR/prefix-a B=$DIR/prefix-b
fail() { echo "FAIL: $*" >&2; exit 1; }

"$CMAKE" --install "$BUILD" --prefix "$A" > "$DIR/install.log"
for f in bin/trainprof include/trainprof.h "$LIBDIR/libtrainprof.so.0" \
         "$LIBDIR/pkgconfig/trainprof.pc" "$LIBDIR/cmake/trainprof/trainprofConfig.cmake" \
         "$LIBDIR/cmake/trainprof/trainprofConfigVersion.cmake" \
         "$LIBDIR/cmake/trainprof/trainprofTargets.cmake"; do
    [ -e "$A/$f" ] || fail "not installed: $f"
done
if [ "$MPI" = ON ]; then
    for f in "$LIBDIR/libtrainprof_mpi.so.0" "$LIBDIR/pkgconfig/trainprof-mpi.pc"; do
        [ -e "$A/$f" ] || fail "not installed: $f"
    done
fi
# the CMake package holds no absolute path: it is found from wherever the tree lies
if grep -rnF -e "$SRC" -e "$BUILD" -e "$A" "$A/$LIBDIR/cmake/trainprof"; then
    fail "absolute paths in the CMake package"
fi

# report.json (by the installed command, TP) of a run directory: one rank, STEPS steps from
# tprof_step_begin/end, and the range "install-work" once in each measured step
TP=$A/bin/trainprof
check_run() { # DIR STEPS
    "$TP" report "$1" --format json > "$1.json"
    python3 - "$1.json" "$2" <<'PY'
import json, sys
rep = json.load(open(sys.argv[1])); n = int(sys.argv[2])
ranks = [r for r in rep["ranks"]]
assert len(ranks) == 1, [r["label"] for r in ranks]
st = ranks[0]["steps"]
assert st["source"] == "tprof_step_begin/end calls", st
assert (st["count"], st["warmup"], st["measured"]) == (n, 1, n - 1), st
rows = {r["name"]: r for r in ranks[0]["ranges"]["top_inclusive"]}
w = rows.get("install-work")
assert w and w["count"] == n - 1 and w["count_per_unit"] == 1, rows
print("run %s: %d steps, install-work %d times" % (sys.argv[1], st["count"], w["count"]))
PY
}

# (a) pkg-config
export PKG_CONFIG_PATH="$A/$LIBDIR/pkgconfig"
[ "$(pkg-config --variable=prefix trainprof)" = "$A" ] || fail "prefix: $(pkg-config --variable=prefix trainprof)"
cflags=$(pkg-config --cflags trainprof) libs=$(pkg-config --libs trainprof)
[ "$(echo $cflags)" = "-I$A/include" ] || fail "cflags: $cflags"
[ "$(echo $libs)" = "-L$A/$LIBDIR -ltrainprof" ] || fail "libs (private ones leak?): $libs"
static=" $(echo $(pkg-config --static --libs trainprof)) "
for l in -lcjson -lz; do
    case "$static" in *" $l "*) ;; *) fail "static libs without $l: $static" ;; esac
done
if [ "$MPI" = ON ]; then
    l=$(pkg-config --libs trainprof-mpi)
    [ "$(echo $l)" = "-L$A/$LIBDIR -ltrainprof_mpi -ltrainprof" ] || fail "trainprof-mpi libs: $l"
fi
"$CC" -std=c11 -Wall -Wextra -Werror -o "$DIR/prog-pc" "$SRC/tests/install_prog.c" \
    $cflags $libs -Wl,-rpath,"$A/$LIBDIR"
ldd "$DIR/prog-pc" | grep -q "libtrainprof.so.0 => $A/$LIBDIR/libtrainprof.so.0" ||
    fail "prog-pc does not load the installed library: $(ldd "$DIR/prog-pc")"
"$DIR/prog-pc" 5 "$DIR/run-pc"
check_run "$DIR/run-pc" 5
unset PKG_CONFIG_PATH

# the installed tree moved: RUNPATHs and the CMake package are relative
mv "$A" "$B"
TP=$B/bin/trainprof
# the command loads the library of its own tree, with no LD_LIBRARY_PATH (RUNPATH)
env -u LD_LIBRARY_PATH ldd "$TP" | grep -q "libtrainprof.so.0 => $B/" ||
    fail "the moved command does not load the moved library: $(env -u LD_LIBRARY_PATH ldd "$TP")"

# (b) find_package
"$CMAKE" -S "$SRC/tests/install_consumer" -B "$DIR/consumer" -DCMAKE_PREFIX_PATH="$B" \
    -DCMAKE_C_COMPILER="$CC" -DPROG_SRC="$SRC/tests/install_prog.c" -DEXPECT_MPI="$MPI" \
    > "$DIR/consumer.log" 2>&1 || { cat "$DIR/consumer.log"; fail "find_package project"; }
grep "trainprof 0.1.0 from $B/$LIBDIR/cmake/trainprof" "$DIR/consumer.log" || fail "package found elsewhere"
"$CMAKE" --build "$DIR/consumer" > "$DIR/consumer-build.log" 2>&1 ||
    { cat "$DIR/consumer-build.log"; fail "find_package build"; }
# nothing but libtrainprof on the consumer's link line
link=$(cat "$DIR/consumer/CMakeFiles/install_prog.dir/link.txt")
case "$link" in *cjson*|*libz*|*-lz*) fail "private dependency on the link line: $link" ;; esac
case "$link" in *"$B/$LIBDIR/libtrainprof.so"*) ;; *) fail "link line: $link" ;; esac
"$DIR/consumer/install_prog" 4 "$DIR/run-cmake"
check_run "$DIR/run-cmake" 4
[ "$MPI" != ON ] || "$DIR/consumer/install_prog_mpi" 1 > /dev/null

# (c) the installed `trainprof run --python`
if [ "$PY" != - ]; then
    "$B/bin/trainprof" run --python --quiet -o "$DIR/run-py" -- "$PY" -c '
import os, sys, trainprof
pkg = os.path.join(sys.argv[1], "lib", "trainprof", "python", "trainprof")
assert os.path.dirname(trainprof.__file__) == pkg, (trainprof.__file__, pkg)
libs = {l.split()[-1] for l in open("/proc/self/maps") if "/libtrainprof.so" in l}
assert libs == {os.path.realpath(os.path.join(sys.argv[1], sys.argv[2], "libtrainprof.so.0"))}, libs
for i in range(3):
    with trainprof.step():
        with trainprof.range("install-work"):
            pass
' "$B" "$LIBDIR" || fail "trainprof run --python: exit $?"
    check_run "$DIR/run-py" 3
    # without `trainprof run`, the installed extension loads the installed library (RUNPATH)
    PYTHONPATH="$B/lib/trainprof/python" "$PY" -c '
import os, sys, trainprof
libs = {l.split()[-1] for l in open("/proc/self/maps") if "/libtrainprof.so" in l}
assert libs == {os.path.realpath(os.path.join(sys.argv[1], sys.argv[2], "libtrainprof.so.0"))}, libs
print("module", trainprof.version(), "from", trainprof.__file__)
' "$B" "$LIBDIR"
fi

# (d) the command where ../lib does not hold the library: found as the dynamic linker loaded it
mkdir -p "$DIR/other/bin" && cp "$B/bin/trainprof" "$DIR/other/bin/"
LD_LIBRARY_PATH="$B/$LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$DIR/other/bin/trainprof" \
    run --quiet -o "$DIR/run-ld" -- "$DIR/consumer/install_prog" 2 ||
    fail "trainprof run from $DIR/other/bin"
check_run "$DIR/run-ld" 2

# (e) an installation whose path holds a space: LD_PRELOAD cannot (ld.so splits it there), so
# the job is preloaded through a link in a directory of trainprof's own, gone afterwards
S="$DIR/with space"
rm -rf "$S" && cp -a "$B" "$S"
"$S/bin/trainprof" run --quiet -o "$DIR/run-space" -- \
    sh -c 'grep -c "/libtrainprof.so" /proc/$$/maps; echo "$LD_PRELOAD"' \
    >"$DIR/space.out" 2>"$DIR/space.err" || fail "trainprof run from a path with a space"
if grep -q "cannot be preloaded" "$DIR/space.err"; then cat "$DIR/space.err"; fail "ld.so refused LD_PRELOAD"; fi
[ "$(head -1 "$DIR/space.out")" -ge 1 ] || fail "the job had no libtrainprof mapped"
link=$(sed -n 2p "$DIR/space.out" | cut -d: -f1)
case $link in *" "*|"") fail "LD_PRELOAD holds a space or nothing: $link" ;; esac
[ ! -e "$link" ] || fail "the preload link $link was left behind"
echo "install ok"
