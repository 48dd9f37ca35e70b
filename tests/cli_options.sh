#!/bin/sh
# cli_options.sh — the spellings of options every command accepts, as getopt_long(3) parses
# them, run by ctest as
#     sh cli_options.sh /path/to/trainprof /path/to/rel_victim
# A short option's value attached (-oFILE), --name=VALUE, and "--" ending the options (after
# it an argument starting with '-' is an operand) must each do exactly what the spelled-out
# form does: the same bytes written to the same file. Also: export needs no --format (chrome
# is the only one), and report, diff and export -o say on stderr what they wrote.
set -u

TP=${1:?usage: cli_options.sh TRAINPROF REL_VICTIM}
VICTIM=${2:?usage: cli_options.sh TRAINPROF REL_VICTIM}
ROOT=${TPROF_TEST_TMP:-/tmp}
mkdir -p "$ROOT"
T=$(mktemp -d "$ROOT/cli-options-XXXXXX") || exit 1

for v in $(env | sed -n 's/^\(TRAINPROF_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
unset LD_PRELOAD NVTX_INJECTION64_PATH RANK WORLD_SIZE LOCAL_RANK || true

fails=0
fail() {
    echo "FAIL $*" >&2
    fails=$((fails + 1))
}
# ok NAME CMD... — CMD must exit 0; its stdout and stderr are kept in $T/out and $T/err
ok() {
    name=$1
    shift
    "$@" >"$T/out" 2>"$T/err" </dev/null
    st=$?
    [ "$st" -eq 0 ] || fail "$name: status $st: $(head -c 400 "$T/err")"
}
# wrote NAME FILE — stderr says exactly that FILE was written, and stdout is empty
wrote() {
    grep -qxF "trainprof: wrote $2" "$T/err" || fail "$1: stderr lacks 'trainprof: wrote $2': $(cat "$T/err")"
    [ ! -s "$T/out" ] || fail "$1: unexpected stdout: $(head -c 300 "$T/out")"
}
same() { cmp -s "$1" "$2" || fail "$3: $2 differs from $1"; }

cd "$T" || exit 1
# two runs of rel_victim: -oDIR (attached) for the first, --output=DIR for the second, and
# the command after "--" in both
# --no-report: the run is not read, no report is written, one line says where the files are
"$TP" run -o "$T/nr" --no-report -- "$VICTIM" gen 3 >"$T/nr.out" 2>"$T/nr.err" ||
    fail "run --no-report: $(cat "$T/nr.err")"
ls "$T/nr"/report.* >/dev/null 2>&1 && fail "run --no-report wrote a report: $(ls "$T/nr")"
grep -q "no report: trainprof report $T/nr" "$T/nr.err" || fail "run --no-report: $(cat "$T/nr.err")"
[ -s "$T/nr.out" ] && fail "run --no-report printed: $(cat "$T/nr.out")"
"$TP" report "$T/nr" >/dev/null || fail "report after run --no-report"
ok "run -oDIR" "$TP" run -o"$T/ra" --quiet -- "$VICTIM" gen 3
ls "$T/ra"/*.tprof >/dev/null 2>&1 || fail "run -oDIR: no rank file in $T/ra"
ok "run --output=DIR" "$TP" run --output="$T/rb" --quiet -- "$VICTIM" gen 4
ls "$T/rb"/*.tprof >/dev/null 2>&1 || fail "run --output=DIR: no rank file in $T/rb"

# report: the text on stdout is the reference for every spelling of -o
ok "report to stdout" "$TP" report "$T/ra"
cp "$T/out" "$T/ref.txt"
[ -s "$T/ref.txt" ] || fail "report to stdout: empty"
ok "report -oFILE" "$TP" report "$T/ra" -o"$T/r1.txt"
wrote "report -oFILE" "$T/r1.txt"
same "$T/ref.txt" "$T/r1.txt" "report -oFILE"
ok "report --output=FILE" "$TP" report "$T/ra" --output="$T/r2.txt"
wrote "report --output=FILE" "$T/r2.txt"
same "$T/ref.txt" "$T/r2.txt" "report --output=FILE"
ok "report -o FILE" "$TP" report "$T/ra" -o "$T/r3.txt"
wrote "report -o FILE" "$T/r3.txt"
same "$T/ref.txt" "$T/r3.txt" "report -o FILE"
ok "report --format=json -oFILE" "$TP" report --format=json "$T/ra" -o"$T/r.json"
wrote "report --format=json -oFILE" "$T/r.json"
head -c 1 "$T/r.json" | grep -qF '{' || fail "report --format=json: $T/r.json is not JSON"

# "--" ends the options: a run directory whose name starts with '-' is an operand after it
cp -r "$T/ra" "$T/-odd"
ok "report -- -odd" "$TP" report -o "$T/r4.txt" -- -odd
wrote "report -- -odd" "$T/r4.txt"
grep -q . "$T/r4.txt" || fail "report -- -odd: empty"
head -n 1 "$T/r4.txt" | grep -qF -- "-odd" || fail "report -- -odd: first line does not name -odd"

# export: no --format needed; -oFILE, --output=FILE and "--" as for report
ok "export --format chrome -o" "$TP" export "$T/ra" --format chrome -o "$T/t0.json"
wrote "export --format chrome -o" "$T/t0.json"
ok "export without --format" "$TP" export "$T/ra"
wrote "export without --format" "$T/ra/trace.json"
same "$T/t0.json" "$T/ra/trace.json" "export without --format"
ok "export -oFILE" "$TP" export "$T/ra" -o"$T/t1.json"
wrote "export -oFILE" "$T/t1.json"
same "$T/t0.json" "$T/t1.json" "export -oFILE"
ok "export --output=FILE --" "$TP" export --output="$T/t2.json" -- "$T/ra"
wrote "export --output=FILE --" "$T/t2.json"
same "$T/t0.json" "$T/t2.json" "export --output=FILE --"

# diff: -oFILE and "--" before the two runs
ok "diff to stdout" "$TP" diff "$T/ra" "$T/rb"
cp "$T/out" "$T/d0.txt"
[ -s "$T/d0.txt" ] || fail "diff to stdout: empty"
ok "diff -oFILE --" "$TP" diff -o"$T/d1.txt" -- "$T/ra" "$T/rb"
wrote "diff -oFILE --" "$T/d1.txt"
same "$T/d0.txt" "$T/d1.txt" "diff -oFILE --"

# serve's default port is not dcgm-exporter's 9400
"$TP" serve --help >"$T/out" 2>&1 || fail "serve --help: status $?"
grep -qF "127.0.0.1:10464" "$T/out" || fail "serve --help: default is not 127.0.0.1:10464: $(cat "$T/out")"
if grep -qF ":9400" "$T/out"; then fail "serve --help still names port 9400"; fi

rm -rf "$T"
if [ "$fails" -ne 0 ]; then
    echo "cli_options: $fails failure(s)" >&2
    exit 1
fi
echo "cli_options: all passed"
