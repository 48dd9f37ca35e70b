#!/bin/sh
# cases.sh GENS TRUTH TRAINPROF WORKDIR — the bounded report's span figures against a whole
# load's, one generated run per case (gens.c), each figure compared by check.py: several
# streams and devices with copies, memsets, syncs, overhead records, zero-length, long and
# reversed records; a capture pause inside the span; CUDA graphs whose nodes run past the
# span's end; a rank with steps beside a stepless one. Fails on the first figure that differs.
set -eu
G=$1 T=$2 TP=$3 W=$4
H=$(dirname "$0")
PY=${PYTHON:-python3}
mkdir -p "$W"
run() { # CASE BOUND GEN-ARGS...
    c=$1 n=$2
    shift 2
    rm -rf "${W:?}/$c"
    mkdir -p "$W/$c"
    "$G" --dir "$W/$c" "$@"
    "$T" "$W/$c" "$n" > "$W/$c.truth.json"
    "$TP" report "$W/$c" --gpu-records "$n" --format json -o "$W/$c.json" 2> /dev/null
    echo "== $c (bound $n): $*"
    "$PY" "$H/check.py" "$W/$c.truth.json" "$W/$c.json" > "$W/$c.check" || true
    tail -1 "$W/$c.check"
    grep -q "^all ok" "$W/$c.check" || { cat "$W/$c.check"; exit 1; }
}
run multi 2000 --iters 400 --kernels 6 --streams 2 --devices 2 --memcpy 2 --memset --sync \
    --overhead --zero --reverse --long
run pause 1000 --iters 400 --kernels 4 --pause 1500-2500
run graphs 1000 --iters 700 --graph --long-all --tail --nccl 2
run mixed 1000 --iters 400 --kernels 4 --ranks 2 --steps-rank 1
run shrink 1000 --iters 600 --kernels 20 --long --reverse
