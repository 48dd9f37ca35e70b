#!/bin/bash
# repro.sh BUILD_DIR CASE BOUND GEN-ARGS...: writes the case with gens.c, reports it bounded
# and checks the span figures against a whole load (truth.c, check.py).
set -e
B=$(realpath "$1"); C=$2; N=$3; shift 3
H=$(dirname "$(realpath "$0")"); SRC=$H/../..; W=${TMPDIR:-/tmp}/span_truth; mkdir -p "$W"
for g in gens truth; do
    [ "$W/$g" -nt "$H/$g.c" ] && [ "$W/$g" -nt "$B/libtprof_analysis.a" ] && continue
    gcc -O2 -I"$SRC/src" -I"$SRC/include" -I"$SRC/tests" -o "$W/$g" "$H/$g.c" \
        "$SRC/tests/synth.c" "$B/libtprof_analysis.a" -lz -lzstd -lcjson -lm -lstdc++ -lpthread
done
rm -rf "$W/$C"; mkdir -p "$W/$C"; "$W/gens" --dir "$W/$C" "$@"
"$W/truth" "$W/$C" "$N" > "$W/$C.truth.json"
"$B/trainprof" report "$W/$C" --gpu-records "$N" --format json -o "$W/$C.json"
python3 "$H/check.py" "$W/$C.truth.json" "$W/$C.json"
