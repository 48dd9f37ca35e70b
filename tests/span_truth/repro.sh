#!/bin/bash
# repro.sh BUILD_DIR CASE BOUND GEN-ARGS...: writes one case with the build's span_truth_gens,
# reports it bounded and checks its span figures against a whole load (span_truth_truth,
# check.py), under ${TMPDIR:-/tmp}/span_truth. cases.sh runs the cases ctest checks.
set -e
B=$(realpath "$1"); C=$2; N=$3; shift 3
H=$(dirname "$(realpath "$0")"); W=${TMPDIR:-/tmp}/span_truth; mkdir -p "$W"
rm -rf "$W/$C"; mkdir -p "$W/$C"; "$B/tests/span_truth_gens" --dir "$W/$C" "$@"
"$B/tests/span_truth_truth" "$W/$C" "$N" > "$W/$C.truth.json"
"$B/trainprof" report "$W/$C" --gpu-records "$N" --format json -o "$W/$C.json"
python3 "$H/check.py" "$W/$C.truth.json" "$W/$C.json"
