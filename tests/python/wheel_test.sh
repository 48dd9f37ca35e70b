#!/bin/sh
# `pip wheel ./python` with no network (pip's isolated build; the in-tree backend needs no
# download), against the library of this build; the unpacked wheel imports, loads the
# libtrainprof.so.0 it bundles, and records. Skipped (77) when the interpreter has no pip.
set -eu
PY=$1 SRC=$2 BUILD=$3 DIR=$4
"$PY" -m pip --version >/dev/null 2>&1 || { echo "SKIP: no pip for $PY"; exit 77; }
rm -rf "$DIR" && mkdir -p "$DIR/wheel" "$DIR/site" "$DIR/run"
cd "$SRC"
TRAINPROF_BUILD_DIR="$BUILD" PIP_NO_INDEX=1 "$PY" -m pip wheel --no-deps -q -w "$DIR/wheel" ./python
WHL=$(ls "$DIR"/wheel/trainprof-*.whl)
echo "built $WHL"
"$PY" -m zipfile -e "$WHL" "$DIR/site"
cd "$DIR"
env -u PYTHONPATH PYTHONPATH="$DIR/site" TRAINPROF_DIR="$DIR/run" "$PY" - "$DIR/site" <<'PY'
import os, sys, trainprof
site = sys.argv[1]
assert trainprof.__file__.startswith(site), trainprof.__file__
libs = {l.split()[-1] for l in open("/proc/self/maps") if "libtrainprof.so" in l}
assert libs == {os.path.join(site, "trainprof", "libtrainprof.so.0")}, libs
with trainprof.range("from-wheel"):
    pass
trainprof.flush()
assert trainprof.output_path().startswith(os.path.join(os.getcwd(), "run")), trainprof.output_path()
print("wheel ok:", trainprof.version(), sorted(libs))
PY
