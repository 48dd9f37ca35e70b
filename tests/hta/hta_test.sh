#!/bin/sh
# hta_test.sh TRAINPROF SYNTH_PROG WORKDIR [RUN_DIR...]
# Makes a venv under WORKDIR with tests/hta/requirements.txt (skips, 77, when PyPI cannot be
# reached), writes tests/hta_run.h's synthetic run, exports it with --per-rank and runs
# hta_check.py on it (--synthetic: its exact figures too); then the same on each RUN_DIR
# given (trainprof rank files, e.g. recorded GPU runs) and on tests/data/hta when present.
set -eu
tp=$1; synth=$2; work=$3; shift 3
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
venv="$work/venv"
if [ ! -x "$venv/bin/python" ] || ! cmp -s "$here/requirements.txt" "$venv/requirements.txt"; then
    rm -rf "$venv"
    python3 -m venv "$venv" || { echo "hta_export: skipped: python3 -m venv failed"; exit 77; }
    if ! "$venv/bin/pip" install -q --disable-pip-version-check -r "$here/requirements.txt" \
        >"$work/pip.log" 2>&1; then
        if grep -qiE "connection|resolve|network|No matching distribution" "$work/pip.log"; then
            echo "hta_export: skipped: PyPI unreachable ($(tail -n 1 "$work/pip.log"))"
            rm -rf "$venv"
            exit 77
        fi
        cat "$work/pip.log"
        exit 1
    fi
    cp "$here/requirements.txt" "$venv/requirements.txt"
fi
rm -rf "$work/run" "$work/out"
mkdir -p "$work/run"
"$synth" "$work/run"
"$tp" export "$work/run" --format chrome --per-rank "$work/out"
"$venv/bin/python" "$here/hta_check.py" "$work/out" --synthetic
data="$here/../data/hta"
n=0
for d in "$@" $( [ -d "$data" ] && echo "$data" ); do
    n=$((n + 1))
    rm -rf "$work/out$n"
    "$tp" export "$d" --format chrome --per-rank "$work/out$n"
    "$venv/bin/python" "$here/hta_check.py" "$work/out$n"
done
