#!/bin/sh
# cli_nomem.sh — the commands that make reports, short of memory: each allocation of
# `trainprof report` (text, JSON, HTML), `trainprof export` and `trainprof diff` refused in
# turn (a stride through them), run by ctest as
#     sh cli_nomem.sh TRAINPROF REL_VICTIM LIBALLOC_FAIL
# through the LD_PRELOAD library alloc_fail.c. Every outcome must be one the user can tell:
# exit 0 with the output of enough memory, or a report that says memory ran out ("memory ran
# out" in a note, "incomplete:" in the headline); or a non-zero exit with a line on stderr,
# the output file that was there before left as it was; never a signal.
set -u
TP=${1:?usage: cli_nomem.sh TRAINPROF REL_VICTIM LIBALLOC_FAIL}
VICTIM=${2:?}
LIB=${3:?}
ROOT=${TPROF_TEST_TMP:-/tmp}
mkdir -p "$ROOT"
T=$(mktemp -d "$ROOT/cli-nomem-XXXXXX") || exit 1
for v in $(env | sed -n 's/^\(TRAINPROF_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
unset LD_PRELOAD NVTX_INJECTION64_PATH RANK WORLD_SIZE LOCAL_RANK || true
fails=0
fail() {
    echo "FAIL $*" >&2
    fails=$((fails + 1))
}
"$TP" run -o "$T/a" --quiet -- "$VICTIM" gen 3 >"$T/run.out" 2>&1 || fail "run a: $(cat "$T/run.out")"
"$TP" run -o "$T/b" --quiet -- "$VICTIM" gen 4 >"$T/run.out" 2>&1 || fail "run b: $(cat "$T/run.out")"
# sweep NAME OUT REF CMD...: CMD writes OUT (-o), REF its output with enough memory
sweep() {
    name=$1 out=$2 ref=$3
    shift 3
    k=1 seen=0
    while [ $k -le ${NOMEM_LAST:-6000} ]; do
        printf 'previous\n' >"$out"
        ALLOC_FAIL_AT=$k ALLOC_FAIL_EXE=trainprof LD_PRELOAD="$LIB" "$@" >"$T/so" 2>"$T/se"
        st=$?
        if [ $st -ge 128 ]; then
            fail "$name: allocation $k: killed by signal $((st - 128))"
        elif [ $st -ne 0 ]; then
            [ -s "$T/se" ] || fail "$name: allocation $k: exit $st without a word"
            [ "$(cat "$out")" = previous ] || fail "$name: allocation $k: exit $st, output replaced"
        elif ! cmp -s "$out" "$ref" && ! grep -q "memory ran out\|incomplete:" "$out"; then
            fail "$name: allocation $k: output differs without a word"
            diff "$ref" "$out" | head -5 >&2
        fi
        seen=$((seen + 1))
        k=$((k + ${NOMEM_STRIDE:-97}))
    done
    echo "$name: $seen refusals" >&2
}
for fmt in text json html; do
    "$TP" report "$T/a" --format $fmt -o "$T/ref.$fmt" 2>/dev/null || fail "report $fmt"
    sweep "report --format $fmt" "$T/out.$fmt" "$T/ref.$fmt" \
        "$TP" report "$T/a" --format $fmt -o "$T/out.$fmt"
done
"$TP" export "$T/a" -o "$T/ref.trace" 2>/dev/null || fail "export"
sweep "export" "$T/out.trace" "$T/ref.trace" "$TP" export "$T/a" -o "$T/out.trace"
"$TP" diff "$T/a" "$T/b" -o "$T/ref.diff" 2>/dev/null || fail "diff"
sweep "diff" "$T/out.diff" "$T/ref.diff" "$TP" diff "$T/a" "$T/b" -o "$T/out.diff"
rm -rf "$T"
[ $fails -eq 0 ] && echo "PASS: every refusal gave the whole output, a noted one, or an error" &&
    exit 0
echo "$fails failure(s)" >&2
exit 1
