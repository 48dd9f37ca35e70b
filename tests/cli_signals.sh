#!/bin/sh
# cli_signals.sh — a job gets the same signals, as many times, under `trainprof run` as bare
# (tests/cli_signals.py says which cases), run by ctest as
#     sh cli_signals.sh /path/to/trainprof /path/to/sigcount_prog
set -u
TP=${1:?usage: cli_signals.sh TRAINPROF SIGCOUNT_PROG}
PROG=${2:?usage: cli_signals.sh TRAINPROF SIGCOUNT_PROG}
ROOT=${TPROF_TEST_TMP:-/tmp}
mkdir -p "$ROOT"
T=$(mktemp -d "$ROOT/cli-signals-XXXXXX") || exit 1
for v in $(env | sed -n 's/^\(TRAINPROF_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
unset LD_PRELOAD NVTX_INJECTION64_PATH || true
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3
"$PY" "$(dirname "$0")/cli_signals.py" "$TP" "$PROG" "$T"
st=$?
[ "$st" -eq 0 ] && rm -rf "$T"
exit "$st"
