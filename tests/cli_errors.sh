#!/bin/sh
# cli_errors.sh — the trainprof command's error paths, run by ctest as
#     sh cli_errors.sh /path/to/trainprof /path/to/rel_victim
# Every wrong use (bad flag, missing DIR, missing or unknown command, unwritable output,
# empty run directory, bad export format) must give a clear message on stderr (and
# nothing on stdout), a non-zero status (2 for usage errors, 127 for a command that
# cannot be run, 1 otherwise), and touch nothing: no directory created for a run that
# cannot start, no existing report or trace clobbered by a failing report/export. Also
# checks that `trainprof run` passes the command's exit status through, including death
# by a signal. Tests run as root in CI, so unwritable paths are under /proc or below a
# regular file, which root cannot write either.
set -u

TP=${1:?usage: cli_errors.sh TRAINPROF REL_VICTIM}
VICTIM=${2:?usage: cli_errors.sh TRAINPROF REL_VICTIM}
ROOT=${TPROF_TEST_TMP:-/tmp}
mkdir -p "$ROOT"
T=$(mktemp -d "$ROOT/cli-errors-XXXXXX") || exit 1

# a clean environment: no run directory or preload from outside
for v in $(env | sed -n 's/^\(TRAINPROF_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
unset LD_PRELOAD NVTX_INJECTION64_PATH RANK WORLD_SIZE LOCAL_RANK || true

fails=0
n=0
fail() {
    echo "FAIL [$n] $*" >&2
    fails=$((fails + 1))
}

# expect NAME STATUS PATTERN CMD... — CMD must end with STATUS ("nz" = any non-zero),
# print PATTERN (fixed string) on stderr and nothing on stdout.
expect() {
    name=$1 want=$2 pat=$3
    shift 3
    n=$((n + 1))
    "$@" >"$T/out" 2>"$T/err" </dev/null
    st=$?
    if [ "$want" = nz ]; then
        [ "$st" -ne 0 ] || fail "$name: status 0, expected non-zero"
    else
        [ "$st" -eq "$want" ] || fail "$name: status $st, expected $want"
    fi
    grep -qF -- "$pat" "$T/err" || fail "$name: stderr lacks '$pat': $(cat "$T/err")"
    [ ! -s "$T/out" ] || fail "$name: unexpected stdout: $(head -c 300 "$T/out")"
}

absent() { [ ! -e "$1" ] || fail "$2: $1 was created"; }
same() { cmp -s "$1" "$2" || fail "$3: $1 was modified"; }

NOPE=/proc/trainprof-no-such # root cannot create anything under /proc either
CWD="$T/cwd"
mkdir "$CWD"
cd "$CWD" || exit 1
EMPTY="$T/empty"
mkdir "$EMPTY"
printf 'not a directory\n' >"$T/afile"
cp "$T/afile" "$T/afile.orig"
printf 'KEEP\n' >"$T/keep"
printf 'text\n' >"$T/notexec.txt"
chmod 644 "$T/notexec.txt"

# ------------------------------------------------------------------ usage errors (2)
expect "no arguments" 2 "usage: trainprof" "$TP"
expect "unknown command" 2 "unknown command 'frobnicate'" "$TP" frobnicate
expect "run: unknown flag" 2 "unknown option '--bogus'" "$TP" run --bogus -o "$T/r1" -- true
absent "$T/r1" "run: unknown flag"
expect "run: missing command" 2 "missing the command" "$TP" run -o "$T/r2"
absent "$T/r2" "run: missing command"
expect "run: missing command after --" 2 "missing the command" "$TP" run -o "$T/r2" --
absent "$T/r2" "run: missing command after --"
expect "run: -o without value" 2 "option -o needs a value" "$TP" run -o
expect "run: bad ring size" 2 "--ring-kb needs an integer" "$TP" run --ring-kb 5 -o "$T/r3" -- true
absent "$T/r3" "run: bad ring size"
expect "report: missing DIR" 2 "missing DIR" "$TP" report
expect "report: unknown flag" 2 "unknown option '--frob'" "$TP" report "$EMPTY" --frob
expect "report: bad format" 2 "unknown format 'xml'" "$TP" report "$EMPTY" --format xml -o "$T/keep"
expect "report: bad --top" 2 "--top needs an integer" "$TP" report "$EMPTY" --top 0
expect "report: two dirs, no rank files" 1 "no .tprof rank files found" "$TP" report "$EMPTY" "$EMPTY"
# throughput figures a real job cannot have, and model descriptions that describe no model
M=layers=2,hidden=64,heads=2,seq=32,vocab=100
expect "run: --flops-per-step 1e300" 2 "--flops-per-step needs a number > 0 and at most 1e+21" \
    "$TP" run --flops-per-step 1e300 -o "$T/r8" -- true
absent "$T/r8" "run: --flops-per-step 1e300"
expect "report: --tokens-per-step 1e13" 2 "at most 1e+12" "$TP" report "$EMPTY" --tokens-per-step 1e13
expect "report: --model layers=2.5" 2 "layers needs a whole number from 0 to 1e9, got '2.5'" \
    "$TP" report "$EMPTY" --model layers=2.5,hidden=64,heads=2,seq=32,vocab=100
expect "report: --model key twice" 2 "'layers' is given twice" "$TP" report "$EMPTY" --model "$M,layers=3"
expect "report: --model dtype=int4" 2 "unknown dtype 'int4'" "$TP" report "$EMPTY" --model "$M,dtype=int4"
expect "report: --model hidden % heads" 2 "hidden (65) is not a multiple of heads (2)" \
    "$TP" report "$EMPTY" --model layers=2,hidden=65,heads=2,seq=32,vocab=100
expect "report: --model heads % groups" 2 "heads (2) is not a multiple of groups (3)" \
    "$TP" report "$EMPTY" --model "$M,groups=3"
expect "export: missing DIR" 2 "missing DIR" "$TP" export
expect "export: no --format (chrome is the default)" 1 "no .tprof rank files found" \
    "$TP" export "$EMPTY"
expect "top: a value given to a flag" 2 "option --once takes no value" \
    "$TP" top --endpoints 127.0.0.1:1 --once=1
expect "serve: an operand after --" 2 "unexpected argument 'x'" "$TP" serve -- x
expect "report: --output= empty" 2 "option --output needs a non-empty value" \
    "$TP" report "$EMPTY" --output=
expect "export: bad format" 2 "unknown format 'bogus'" \
    "$TP" export "$EMPTY" --format bogus -o "$T/keep"
expect "export: -o with --per-rank" 2 "exclude each other" \
    "$TP" export "$EMPTY" --format chrome -o "$T/x.json" --per-rank "$T/pr"
absent "$T/x.json" "export: -o with --per-rank"
absent "$T/pr" "export: -o with --per-rank"
[ "$(cat "$T/keep")" = KEEP ] || fail "a failing report/export clobbered $T/keep"
# a torch.profiler trace that is cut short: one line naming it, exit 1
printf '{"traceEvents": [{"ph": "X", "ts": 1, "dur": 2},' > "$T/cut.pt.trace.json"
expect "report: truncated trace" 1 \
    "trainprof: $T/cut.pt.trace.json: the text ends inside \"traceEvents\": truncated?" \
    "$TP" report "$T/cut.pt.trace.json"
[ "$(wc -l < "$T/err")" -eq 1 ] || fail "report: truncated trace: more than one line: $(cat "$T/err")"

# ------------------------------------------------------------------ commands that cannot run (127)
expect "run: no such path" 127 "/no/such/cmd: command not found" \
    "$TP" run -o "$T/r4" -- /no/such/cmd
absent "$T/r4" "run: no such path"
expect "run: not in PATH" 127 "no-such-command-xyz: command not found" \
    "$TP" run -o "$T/r5" -- no-such-command-xyz
absent "$T/r5" "run: not in PATH"
expect "run: not executable" 126 "notexec.txt: not executable" \
    "$TP" run -o "$T/r6" -- "$T/notexec.txt"
absent "$T/r6" "run: not executable"
expect "run: a directory as command" 126 "not executable" \
    "$TP" run -o "$T/r7" -- "$EMPTY"
absent "$T/r7" "run: a directory as command"
# an empty PATH entry is the current directory, as for execvp and the shell
mkdir -p "$T/cwdprog" && printf '#!/bin/sh\nexit 7\n' >"$T/cwdprog/cwdprog" &&
    chmod +x "$T/cwdprog/cwdprog"
n=$((n + 1))
(cd "$T/cwdprog" && PATH="/usr/bin:/bin:" "$TP" run -q -o "$T/r8" -- cwdprog) >/dev/null 2>&1
st=$?
[ "$st" -eq 7 ] || fail "run: a program found through PATH's empty entry: status $st"
expect "run: default dir, no command" 127 "command not found" "$TP" run -- /no/such/cmd

# ------------------------------------------------------------------ unwritable outputs (1)
expect "run: -o under /proc" 1 "cannot create $NOPE/out" \
    "$TP" run -o "$NOPE"/out -- true
expect "run: -o below a file" 1 "cannot create $T/afile/sub" "$TP" run -o "$T/afile/sub" -- true
expect "run: -o is a file" 1 "exists and is not a directory" "$TP" run -o "$T/afile" -- true
same "$T/afile" "$T/afile.orig" "run: -o is a file"

# ------------------------------------------------------------------ report/export on nothing (1)
expect "report: no such dir" 1 "$T/nodir: No such file or directory" "$TP" report "$T/nodir"
expect "report: no rank files" 1 "no .tprof rank files found" "$TP" report "$EMPTY"
expect "report: no rank files, -o kept" 1 "no .tprof rank files found" \
    "$TP" report "$EMPTY" -o "$T/keep"
expect "export: no rank files, -o kept" 1 "no .tprof rank files found" \
    "$TP" export "$EMPTY" --format chrome -o "$T/keep"
[ "$(cat "$T/keep")" = KEEP ] || fail "a failing report/export clobbered $T/keep"
absent "$EMPTY/trace.json" "export: no rank files"
[ -z "$(ls -A "$EMPTY")" ] || fail "the empty run directory gained files: $(ls -A "$EMPTY")"

# ------------------------------------------------------------------ a real run, then bad outputs
GOOD="$T/good"
n=$((n + 1))
"$TP" run -o "$GOOD" --quiet -- "$VICTIM" gen 3 >"$T/out" 2>"$T/err"
st=$?
[ "$st" -eq 0 ] || fail "run of rel_victim: status $st: $(cat "$T/err")"
ls "$GOOD"/*.tprof >/dev/null 2>&1 || fail "run of rel_victim left no rank file"
[ -s "$GOOD/report.json" ] || fail "run of rel_victim left no report.json"
cp "$GOOD/report.json" "$T/report.json.orig"
printf 'OLD TRACE\n' >"$GOOD/trace.json"
cp "$GOOD/trace.json" "$T/trace.orig"
ls -A "$GOOD" >"$T/good.list"

expect "run: dir already used" 1 "already holds rank files" "$TP" run -o "$GOOD" -- true
expect "export: bad --ranks" 2 "not a list of ranks" "$TP" export "$GOOD" --ranks 3-1 -o "$T/sel.json"
expect "export: bad --steps" 2 "not A-B or A" "$TP" export "$GOOD" --steps x -o "$T/sel.json"
expect "export: bad --time" 2 "not S:E seconds" "$TP" export "$GOOD" --time 5:1 -o "$T/sel.json"
expect "export: steps no rank has" 1 "no selected rank has steps 900-901" \
    "$TP" export "$GOOD" --steps 900-901 -o "$T/sel.json"
[ "$(wc -l <"$T/err")" -eq 1 ] || fail "export: steps no rank has: not one line: $(cat "$T/err")"
expect "export: seconds no process ran in" 1 "no selected process ran in seconds 9999 to 10000" \
    "$TP" export "$GOOD" --time 9999:10000 -o "$T/sel.json"
absent "$T/sel.json" "export: seconds no process ran in"
# numbers are digits alone: a sign would wrap a step number past 2^63
expect "export: negative step" 2 "not A-B or A" "$TP" export "$GOOD" --steps -5 -o "$T/sel.json"
expect "export: step range of a negative" 2 "not A-B or A" \
    "$TP" export "$GOOD" --steps 3--1 -o "$T/sel.json"
expect "export: rank list ending in a comma" 2 "not a list of ranks" \
    "$TP" export "$GOOD" --ranks 1, -o "$T/sel.json"
expect "export: infinite seconds" 2 "not S:E seconds" "$TP" export "$GOOD" --time 0:inf -o "$T/sel.json"
expect "export: seconds after a blank" 2 "not S:E seconds" "$TP" export "$GOOD" --time " 0:1" -o "$T/sel.json"
expect "export: cut exponent" 2 "not S:E seconds" "$TP" export "$GOOD" --time 0:1e -o "$T/sel.json"
expect "export: hexadecimal seconds" 2 "not S:E seconds" "$TP" export "$GOOD" --time 0x0:1 -o "$T/sel.json"
expect "export: steps outside the seconds" 1 "no selected rank has steps 1-1 within seconds" \
    "$TP" export "$GOOD" --steps 1 --time 9999:10000 -o "$T/sel.json"
expect "export: --per-rank of ranks the run lacks" 1 "no process of the selected ranks" \
    "$TP" export "$GOOD" --per-rank "$T/norank" --ranks 99
# seconds past 2^63 ns are the trace's end (the conversion to ns overflowed: nothing ran)
"$TP" export "$GOOD" --time 0:1e10 -o "$T/t_huge.json" 2>"$T/err" || fail "export --time 0:1e10: $(cat "$T/err")"
"$TP" export "$GOOD" --time 0:1e6 -o "$T/t_big.json" 2>"$T/err" || fail "export --time 0:1e6: $(cat "$T/err")"
cmp -s "$T/t_huge.json" "$T/t_big.json" || fail "export --time 0:1e10 differs from 0:1e6"
# past a double's range (1e309): the largest, the trace's end as well
"$TP" export "$GOOD" --time 0:1e309 -o "$T/t_huge.json" 2>"$T/err" || fail "export --time 0:1e309: $(cat "$T/err")"
cmp -s "$T/t_huge.json" "$T/t_big.json" || fail "export --time 0:1e309 differs from 0:1e6"
rm -f "$T/t_huge.json" "$T/t_big.json"
# a bad analysis variable is refused before the job runs, as the other variables are
expect "run: bad TRAINPROF_SECTION_COMM_OPS" 2 "trainprof run: TRAINPROF_SECTION_COMM_OPS" \
    env TRAINPROF_SECTION_COMM_OPS=0 "$TP" run -q -o "$T/badops" -- touch "$T/badops_ran"
absent "$T/badops_ran" "run: bad TRAINPROF_SECTION_COMM_OPS"
expect "report: -o under /proc" 1 "cannot write $NOPE/r.json" \
    "$TP" report "$GOOD" --format json -o "$NOPE"/r.json
expect "report: -o below a file" 1 "cannot write $T/afile/r.txt" \
    "$TP" report "$GOOD" -o "$T/afile/r.txt"
expect "export: -o under /proc" 1 "cannot write $NOPE/t.json" \
    "$TP" export "$GOOD" --format chrome -o "$NOPE"/t.json
expect "export: --per-rank under /proc" 1 "cannot create $NOPE" \
    "$TP" export "$GOOD" --format chrome --per-rank "$NOPE"/pr
expect "export: bad format on a good run" 2 "unknown format 'json' (chrome, perfetto)" \
    "$TP" export "$GOOD" --format json
same "$GOOD/report.json" "$T/report.json.orig" "failing commands on a good run"
same "$GOOD/trace.json" "$T/trace.orig" "failing commands on a good run"
ls -A "$GOOD" | cmp -s - "$T/good.list" || fail "files appeared in $GOOD: $(ls -A "$GOOD")"

# ------------------------------------------------------------------ -o through links and devices
# A symlink is written through (the link stays, its target gets the report); a path that is
# not a regular file (a FIFO here; /dev/null as root) is written into, never replaced.
n=$((n + 1))
printf 'OLD\n' >"$T/target.txt"
ln -s "$T/target.txt" "$T/link.txt"
"$TP" report "$GOOD" -o "$T/link.txt" >"$T/out" 2>"$T/err" || fail "report -o LINK: $(cat "$T/err")"
[ -L "$T/link.txt" ] || fail "report -o LINK replaced the symlink"
grep -q "trainprof report" "$T/target.txt" || fail "report -o LINK did not write the link's target"
n=$((n + 1))
mkfifo "$T/fifo"
cat "$T/fifo" >"$T/fifo.out" &
"$TP" export "$GOOD" --format chrome -o "$T/fifo" >"$T/out" 2>"$T/err" || fail "export -o FIFO: $(cat "$T/err")"
wait
[ -p "$T/fifo" ] || fail "export -o FIFO replaced the FIFO"
grep -q traceEvents "$T/fifo.out" || fail "export -o FIFO: nothing came through the FIFO"
expect "report: stdout is full" 1 "writing to standard output failed" \
    sh -c '"$1" report "$2" >/dev/full' sh "$TP" "$GOOD"

# ------------------------------------------------------------------ exit status pass-through
# expect_status NAME STATUS DIR CMD... — `trainprof run -o DIR -- CMD` ends with STATUS.
expect_status() {
    name=$1 want=$2 dir=$3
    shift 3
    n=$((n + 1))
    "$TP" run -o "$dir" --quiet -- "$@" >"$T/out" 2>"$T/err" </dev/null
    st=$?
    [ "$st" -eq "$want" ] || fail "$name: status $st, expected $want: $(cat "$T/err")"
}
expect_status "run -- true" 0 "$T/s1" true
grep -qF "no process recorded anything" "$T/err" ||
    fail "run -- true: no note that nothing was recorded: $(cat "$T/err")"
[ -z "$(ls -A "$T/s1")" ] || fail "run -- true left files: $(ls -A "$T/s1")"
expect_status "run -- false" 1 "$T/s2" false
expect_status "run -- sh -c 'exit 7'" 7 "$T/s3" sh -c 'exit 7'
# death by a signal: trainprof re-raises it, so the shell sees 128 + SIGTERM
expect_status "run -- sh killed by SIGTERM" 143 "$T/s4" sh -c 'kill -TERM $$'
# an executable that the kernel cannot run: 127, and the run directory stays empty
printf '\177ELF garbage\n' >"$T/badexe"
chmod 755 "$T/badexe"
expect_status "run: exec format error" 126 "$T/s5" "$T/badexe"
grep -qF "cannot execute $T/badexe" "$T/err" ||
    fail "run: exec format error: no message: $(cat "$T/err")"
[ -z "$(ls -A "$T/s5")" ] || fail "run: exec format error left files: $(ls -A "$T/s5")"

# ------------------------------------------------------------------ --kernel-steps and its twin
expect "run: --kernel-steps B < A" 2 "--kernel-steps needs A-B" \
    "$TP" run -o "$T/k1" --kernel-steps 3-2 -- true
expect "run: --kernel-steps overflow" 2 "--kernel-steps needs A-B" \
    "$TP" run -o "$T/k2" --kernel-steps 99999999999999999999 -- true
expect "run: TRAINPROF_KERNEL_STEPS garbage" 2 "TRAINPROF_KERNEL_STEPS needs A-B" \
    env TRAINPROF_KERNEL_STEPS=abc "$TP" run -o "$T/k3" -- true

# ------------------------------------------------------------------ --gpu-capture and its twin
# a malformed plan: status 2, one line naming what is wrong, the job never started (it would
# create $T/ran) and no output directory made
plan_error() {
    name=$1 pat=$2
    shift 2
    expect "$name" 2 "$pat" "$@" touch "$T/ran"
    [ "$(wc -l <"$T/err")" -eq 1 ] || fail "$name: not one line: $(cat "$T/err")"
    absent "$T/ran" "$name"
    absent "$T/g" "$name"
}
plan_error "run: --gpu-capture N too small" "trainprof run: --gpu-capture: A-B/N needs N > B-A+1" \
    "$TP" run -o "$T/g" --gpu-capture 2-3/2 --
plan_error "run: --gpu-capture overlapping" "--gpu-capture: windows must be ascending" \
    "$TP" run -o "$T/g" --gpu-capture=1-4,3-5 --
plan_error "run: --gpu-capture garbage" "--gpu-capture: a window is A-B, A or A-" \
    "$TP" run -o "$T/g" --gpu-capture sometimes --
plan_error "run: TRAINPROF_GPU_CAPTURE garbage" "TRAINPROF_GPU_CAPTURE: /N repeats one window only" \
    env TRAINPROF_GPU_CAPTURE=1,5/9 "$TP" run -o "$T/g" --
plan_error "run: both spellings" "--gpu-capture and --kernel-steps both given" \
    "$TP" run -o "$T/g" --gpu-capture 1-2 --kernel-steps 1-2 --
plan_error "run: both variables" "TRAINPROF_GPU_CAPTURE and TRAINPROF_KERNEL_STEPS both set" \
    env TRAINPROF_GPU_CAPTURE=1-2 TRAINPROF_KERNEL_STEPS=1-2 "$TP" run -o "$T/g" --
plan_error "run: --kernel-steps a list" "--kernel-steps needs A-B, A or A-" \
    "$TP" run -o "$T/g" --kernel-steps 1-2,5-6 --
# an option wins over the other spelling's variable, and a good plan runs the job
n=$((n + 1))
TRAINPROF_KERNEL_STEPS=abc "$TP" run -o "$T/g2" --quiet --gpu-capture 0-1/4 -- true \
    >"$T/out" 2>"$T/err" </dev/null || fail "run --gpu-capture 0-1/4: status $?: $(cat "$T/err")"

# ------------------------------------------------------------------ one run per directory
mkdir -p "$T/locked"
# a run in progress holds flock(2) on the file (here, this shell through descriptor 9)
echo 424242 >"$T/locked/.trainprof-run.lock"
exec 9<"$T/locked/.trainprof-run.lock"
flock -x 9
expect "run: directory in use" 1 "in use by another trainprof run (pid 424242" \
    "$TP" run -o "$T/locked" -- true
[ "$(cat "$T/locked/.trainprof-run.lock")" = 424242 ] || fail "run: the other run's lock was touched"
exec 9<&-
mkdir -p "$T/stale"
echo 2147483646 >"$T/stale/.trainprof-run.lock"  # no such pid: a killed run's lock
n=$((n + 1))
"$TP" run --quiet -o "$T/stale" -- true >/dev/null 2>"$T/err" || fail "run: stale lock refused: $(cat "$T/err")"
[ ! -e "$T/stale/.trainprof-run.lock" ] || fail "run: the lock was left behind"
# another CUDA tool attached first (Nsight Systems around `trainprof run`) keeps
# CUDA_INJECTION64_PATH: GPU activity capture backs off with one line, and the report says why;
# a trainprof library of another build left in the environment is replaced
n=$((n + 1))
OTHER=/opt/nvidia/nsight-systems/libToolsInjection64.so
CUDA_INJECTION64_PATH=$OTHER "$TP" run -o "$T/nsys" --quiet -- \
    sh -c 'echo "cuda=$CUDA_INJECTION64_PATH"; exec "$0" gen 1' "$VICTIM" >"$T/out" 2>"$T/err" ||
    fail "run under another CUDA tool: $(cat "$T/err")"
grep -q "CUDA_INJECTION64_PATH=$OTHER belongs to another CUDA tool" "$T/err" ||
    fail "run under another CUDA tool: no line: $(cat "$T/err")"
grep -qx "cuda=$OTHER" "$T/out" || fail "run under another CUDA tool: not kept: $(cat "$T/out")"
"$TP" report "$T/nsys" --format json -o "$T/nsys.json" 2>/dev/null
python3 - "$T/nsys.json" "$OTHER" <<'PY' || fail "run under another CUDA tool: capability not reported"
import json, sys
rep = json.load(open(sys.argv[1]))
st = rep["capabilities"]["cupti"]["status"]
assert st == "off: another CUDA tool holds CUDA_INJECTION64_PATH (%s)" % sys.argv[2], st
PY
n=$((n + 1))
CUDA_INJECTION64_PATH=/old/build/libtrainprof.so.0 "$TP" run -o "$T/oldtp" --quiet -- \
    sh -c 'echo "cuda=$CUDA_INJECTION64_PATH"' >"$T/out" 2>"$T/err" || fail "run with an old trainprof: $(cat "$T/err")"
case "$(cat "$T/out")" in
cuda=/old/*) fail "run with an old trainprof library: not replaced" ;;
cuda=*libtrainprof*) ;;
*) fail "run with an old trainprof library: $(cat "$T/out")" ;;
esac
grep -q "belongs to another CUDA tool" "$T/err" && fail "run with an old trainprof library: backed off"

# --version and --help whose output cannot be written: status 1 and one line, not 0
n=$((n + 1))
st=0; "$TP" --version >/dev/full 2>"$T/err" || st=$?
[ "$st" = 1 ] && [ "$(wc -l <"$T/err")" = 1 ] && grep -q "cannot write to standard output" "$T/err" ||
    fail "--version to a full device: status $st, $(cat "$T/err")"
n=$((n + 1))
st=0; "$TP" --help >&- 2>"$T/err" || st=$?
[ "$st" = 1 ] || fail "--help to a closed standard output: status $st"

expect "run: empty --step-name" 2 "needs a non-empty value" "$TP" run --step-name "" -- true
expect "run: -o followed by --" 2 "needs a value" "$TP" run -o -- true

# ------------------------------------------------------------------ capture
expect "capture: empty operand" 2 "empty RUN_DIR or PID" "$TP" capture "" --steps 2
# the pid of `trainprof run` itself, the one its user knows: its job has TRAINPROF_DIR, it
# does not, and the command takes the job's
"$TP" run --quiet --no-report -o "$T/cap" -- "$VICTIM" loop 1 >/dev/null 2>&1 </dev/null &
runpid=$!
i=0
until ls "$T/cap" 2>/dev/null | grep -q '[.]step$' || [ $i -ge 100 ]; do
    sleep 0.1
    i=$((i + 1))
done
n=$((n + 1))
"$TP" capture "$runpid" --steps 2 >"$T/out" 2>"$T/err" </dev/null ||
    fail "capture: trainprof run's pid: status $?: $(cat "$T/err")"
grep -qF "asked 1 process in $T/cap to capture GPU activity in steps" "$T/out" ||
    fail "capture: trainprof run's pid: $(cat "$T/out" "$T/err")"
kill -TERM "$runpid"
wait "$runpid"

# ------------------------------------------------------------------ the working directory
[ -z "$(ls -A "$CWD")" ] || fail "commands left files in the working directory: $(ls -A "$CWD")"

cd / || true
if [ "$fails" -eq 0 ]; then
    rm -rf "$T"
    echo "cli_errors: all $n checks passed"
    exit 0
fi
echo "cli_errors: $fails of $n checks failed (scratch kept in $T)" >&2
exit 1
