#!/bin/sh
# run_first_stage_test.sh TRAINPROF CHAR_LM — `trainprof run`'s first stage of the report on
# the job's nodes (--summarize-with): with CMD srun inside a Slurm allocation (a stand-in srun
# that records its arguments and runs the command as one task), `trainprof run` runs `srun
# --nodes=N --ntasks=N --ntasks-per-node=1 trainprof summarize` with the report's own options
# after the job, the summaries it writes are valid for the report that follows (which is the
# report without them), and nothing runs outside an allocation, with `off`, without rank
# files, or in an allocation of one node that wrote every file here. With CMD Open MPI's
# mpirun (a stand-in), `auto` runs `mpirun <the job's node options> --map-by ppr:1:node
# trainprof summarize ...` when a rank file comes from another host (a job made of two hosts
# by `twohost`, which copies its command's rank file under another host's name), none when
# all come from this one. With CMD Hydra's mpiexec (MPICH's, Intel MPI's; stand-ins told by
# their answer to --version or their links' target), `mpiexec <the job's node and launch
# options> -ppn 1 -n H`, H the hosts the rank files name; and with MPICH's own
# mpiexec.hydra where it is installed, a job and its stage run by it. A launcher that fails or hangs (stopped at
# TRAINPROF_SUMMARIZE_LIMIT_S) leaves the same report and the job's exit status; Ctrl-Z stops
# the launcher's group with trainprof run, and the time stopped is not counted against the
# limit. Then, with the real mpirun, given as the launcher and as `auto`, tasks share the
# files; skipped (exit 77, after the rest has passed) without mpirun.
set -u
TP=$(cd "$(dirname "$1")" && pwd -P)/$(basename "$1") LM=$2
tmp=$(mktemp -d "${TPROF_TEST_TMP:-/tmp}/first-stage-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mkdir "$tmp/bin"
cat >"$tmp/bin/srun" <<'EOF'
#!/bin/sh
echo "$*" >>"$SRUN_LOG"
while [ $# -gt 0 ]; do case $1 in --*) shift ;; *) break ;; esac; done
SLURM_PROCID=0 SLURM_NTASKS=1 exec "$@"
EOF
cat >"$tmp/bin/hang" <<'EOF'
#!/bin/sh
echo "$$" >"$HANG_PID"
sleep 30
EOF
cat >"$tmp/bin/twohost" <<'EOF'
#!/bin/sh
# runs its command, then copies the rank file the command wrote under another host's name
# (or under each of the names TWOHOST_AS says, HOST and PID replaced)
"$@" &
p=$!
wait $p
rc=$?
for as in ${TWOHOST_AS:-other-node-PID}; do
    as=$(echo "$as" | sed "s/HOST/$(hostname)/; s/PID/$p/")
    for f in "$TRAINPROF_DIR"/*-$p.tprof; do
        [ -f "$f" ] && cp "$f" "$TRAINPROF_DIR/$as.tprof"
    done
done
exit $rc
EOF
chmod +x "$tmp/bin/srun" "$tmp/bin/hang" "$tmp/bin/twohost"
export SRUN_LOG="$tmp/srun.log" HANG_PID="$tmp/hang.pid" PATH="$tmp/bin:$PATH"
unset TRAINPROF_SUMMARIZE_WITH TRAINPROF_SUMMARIZE_LIMIT_S TRAINPROF_NO_REPORT || true
# the same report figures: report.json with the paths left out
figures() { grep -v '"dir"\|"file"' "$1"; }
same_as_without() { # DIR [OPTIONS]: its report.json is the report of its rank files alone
    d=$1
    shift
    mkdir "$tmp/copy" && cp "$d"/*.tprof "$tmp/copy/" || fail "copy of $d"
    "$TP" report "$tmp/copy" "$@" --format json -o "$tmp/copy.json" 2>/dev/null ||
        fail "report of the copy"
    figures "$d/report.json" >"$tmp/a" && figures "$tmp/copy.json" >"$tmp/b"
    cmp -s "$tmp/a" "$tmp/b" || fail "$d: the report differs from the one without summaries: $(diff "$tmp/a" "$tmp/b" | head -5)"
    rm -rf "$tmp/copy" "$tmp/copy.json"
}

# 1. srun in an allocation of 2 nodes: the stage, with the report's options
SLURM_JOB_ID=7 SLURM_JOB_NUM_NODES=2 "$TP" run -q -o "$tmp/r1" --warmup 3 -- srun "$LM" \
    --steps 30 >/dev/null 2>"$tmp/r1.err" || fail "run under srun: $(cat "$tmp/r1.err")"
want="--nodes=2 --ntasks=2 --ntasks-per-node=1 $TP summarize --warmup 3 --top 15 -- $tmp/r1"
[ "$(sed -n 2p "$SRUN_LOG")" = "$want" ] || fail "stage arguments: $(sed -n 2p "$SRUN_LOG")"
grep -q "rank summaries written through srun in .* s (each task's line in $tmp/r1/summarize.log)" \
    "$tmp/r1.err" || fail "no stage line: $(cat "$tmp/r1.err")"
grep -q "task 0 of 1 (Slurm): 1 of 1 files summarised (1 written" "$tmp/r1/summarize.log" ||
    fail "summarize.log: $(cat "$tmp/r1/summarize.log")"
[ "$(ls "$tmp/r1" | grep -c '\.tprof\.sum$')" -eq 1 ] || fail "no summary: $(ls "$tmp/r1")"
grep -q "out of date" "$tmp/r1/report.txt" && fail "the run's report found its summaries stale"
# the summaries are the report's (warm-up 3): another warm-up finds them stale
"$TP" report "$tmp/r1" --warmup 3 | grep -q "out of date" && fail "summaries stale at warm-up 3"
"$TP" report "$tmp/r1" | grep -q "out of date" || fail "summaries not keyed on the warm-up"
same_as_without "$tmp/r1" --warmup 3
# a configured TRAINPROF_COMM_KEEP goes to the stage as --comm-keep (the summaries' key holds
# it, and a launcher may not pass the environment on); the default is no option at all
: >"$SRUN_LOG"
TRAINPROF_COMM_KEEP=1024 SLURM_JOB_ID=7 SLURM_JOB_NUM_NODES=2 "$TP" run -q -o "$tmp/r1k" -- \
    srun "$LM" --steps 10 >/dev/null 2>"$tmp/r1k.err" || fail "run r1k: $(cat "$tmp/r1k.err")"
sed -n 2p "$SRUN_LOG" | grep -q " summarize .*--comm-keep 1024 -- $tmp/r1k\$" ||
    fail "no --comm-keep for the stage: $(sed -n 2p "$SRUN_LOG")"
grep -q "out of date" "$tmp/r1k/report.txt" && fail "r1k's report found its summaries stale"

# 2. no stage: srun outside an allocation, --summarize-with off, a job that wrote no file
: >"$SRUN_LOG"
"$TP" run -q -o "$tmp/r2" -- srun "$LM" --steps 10 >/dev/null 2>&1 || fail "run r2"
SLURM_JOB_ID=7 SLURM_JOB_NUM_NODES=2 "$TP" run -q -o "$tmp/r3" --summarize-with off -- srun \
    "$LM" --steps 10 >/dev/null 2>&1 || fail "run r3"
SLURM_JOB_ID=7 SLURM_JOB_NUM_NODES=2 "$TP" run -q -o "$tmp/r4" -- srun true >/dev/null 2>&1
# an allocation of one node whose files are all this host's: the report's cores already
SLURM_JOB_ID=7 SLURM_JOB_NUM_NODES=1 "$TP" run -q -o "$tmp/r4one" -- srun "$LM" --steps 10 \
    >/dev/null 2>&1 || fail "run r4one"
[ "$(wc -l <"$SRUN_LOG")" -eq 4 ] || fail "a stage ran: $(cat "$SRUN_LOG")"
ls "$tmp"/r2 "$tmp"/r3 "$tmp"/r4 "$tmp"/r4one | grep -q '\.sum' && fail "summaries without a stage"

# 3. a launcher that fails, one that hangs: the same report, the job's status
TRAINPROF_SUMMARIZE_WITH=false "$TP" run -q -o "$tmp/r5" -- "$LM" --steps 20 >/dev/null \
    2>"$tmp/r5.err" || fail "run r5"
grep -q "the first stage through false failed (exit status 1, " "$tmp/r5.err" ||
    fail "no failure line: $(cat "$tmp/r5.err")"
same_as_without "$tmp/r5"
start=$(date +%s)
TRAINPROF_SUMMARIZE_LIMIT_S=1 "$TP" run -q -o "$tmp/r6" --summarize-with hang -- sh -c \
    "\"$LM\" --steps 20; exit 3" >/dev/null 2>"$tmp/r6.err"
rc=$?
[ "$rc" -eq 3 ] || fail "exit status $rc with a hung stage, expected the job's 3"
[ $(($(date +%s) - start)) -lt 20 ] || fail "the hung stage was not stopped at its limit"
grep -q "the first stage through hang failed (stopped after 1 s" "$tmp/r6.err" ||
    fail "no limit line: $(cat "$tmp/r6.err")"
kill -0 "$(cat "$HANG_PID")" 2>/dev/null && fail "the hung launcher survived its limit"
same_as_without "$tmp/r6"
# values that cannot be used are usage errors before the job; a launcher not on PATH, a line
# before it; " auto " is auto (the allocation's srun: one node, but files of two hosts)
long=$(printf '%05000d' 0)
many=$(seq 60 | tr '\n' ' ')
for bad in " " "$long" "$many"; do
    "$TP" run -o "$tmp/bad" --summarize-with "$bad" -- touch "$tmp/ran" 2>"$tmp/bad.err"
    rc=$?
    [ $rc -eq 2 ] && [ ! -e "$tmp/ran" ] ||
        fail "--summarize-with '$(echo "$bad" | cut -c1-20)': status $rc: $(cat "$tmp/bad.err")"
done
grep -q "more than 48 words" "$tmp/bad.err" || fail "too many words: $(cat "$tmp/bad.err")"
"$TP" run -q -o "$tmp/r11" --summarize-with "no-such-launcher -n 2" -- sh -c \
    "\"$LM\" --steps 5; exit 3" >/dev/null 2>"$tmp/r11.err"
rc=$?
[ $rc -eq 3 ] || fail "a launcher not on PATH: status $rc"
[ "$(head -1 "$tmp/r11.err")" = "trainprof run: --summarize-with: no-such-launcher is not a \
program found on PATH: the report's first stage will fail (auto, off, or a launcher command)" ] ||
    fail "no line before the job: $(cat "$tmp/r11.err")"
# a directory is no launcher, though it has X_OK
"$TP" run -q -o "$tmp/r11d" --summarize-with "$tmp" -- true 2>"$tmp/r11d.err" ||
    fail "a directory as launcher: status $?"
grep -q "is not a program found on PATH" "$tmp/r11d.err" ||
    fail "a directory as launcher: no line: $(cat "$tmp/r11d.err")"
: >"$SRUN_LOG"
SLURM_JOB_ID=7 SLURM_JOB_NUM_NODES=1 "$TP" run -q -o "$tmp/r12" --summarize-with " auto " -- \
    srun twohost "$LM" --steps 5 >/dev/null 2>&1 || fail "run r12"
[ "$(sed -n 2p "$SRUN_LOG" | cut -d' ' -f1-3)" = "--nodes=1 --ntasks=1 --ntasks-per-node=1" ] ||
    fail "' auto ' is not auto: $(cat "$SRUN_LOG")"

# 4. whatever has the log's name is replaced, never opened: a FIFO (whose open would wait for
# a reader forever), a symbolic link (its target is left as it was)
echo kept >"$tmp/target"
for kind in fifo link; do
    mk="mkfifo $tmp/r8$kind/summarize.log"
    [ $kind = link ] && mk="ln -s $tmp/target $tmp/r8$kind/summarize.log"
    SLURM_JOB_ID=7 SLURM_JOB_NUM_NODES=2 timeout 60 "$TP" run -q -o "$tmp/r8$kind" -- srun \
        sh -c "\"$LM\" --steps 10 && $mk; exit 4" >/dev/null 2>"$tmp/r8.err"
    rc=$?
    [ $rc -eq 4 ] || fail "$kind as summarize.log: exit status $rc: $(cat "$tmp/r8.err")"
    [ -f "$tmp/r8$kind/summarize.log" ] && [ ! -L "$tmp/r8$kind/summarize.log" ] ||
        fail "$kind as summarize.log: not replaced by a file"
    grep -q "task 0 of 1 (Slurm): 1 of 1 files summarised" "$tmp/r8$kind/summarize.log" ||
        fail "$kind as summarize.log: $(cat "$tmp/r8.err")"
done
[ "$(cat "$tmp/target")" = kept ] || fail "the log's symbolic link target was written"

# 5. the stage's group ends with it: a launcher that does not exec its command, and
# trainprof run stopped by SIGTERM while it waits (the command must not go on alone); a
# launcher that leaves a process behind that ignores SIGTERM. SIGPIPE is not left ignored.
cat >"$tmp/bin/slow" <<'EOF2'
#!/bin/sh
grep SigIgn /proc/self/status >"$STAGE_DIR/sigign"
sh -c 'echo $$ >"$STAGE_DIR/child.pid"; sleep 30; exec "$@"' slow "$@"
EOF2
cat >"$tmp/bin/pyenv" <<'EOF2'
#!/bin/sh
echo "${PYTHONPATH-unset}" >"$STAGE_DIR/pythonpath"
echo "${LD_PRELOAD-unset}|${CUDA_INJECTION64_PATH-unset}|${NVTX_INJECTION64_PATH-unset}|\
${NCCL_PROFILER_PLUGIN-unset}" >"$STAGE_DIR/injection"
exec "$@"
EOF2
cat >"$tmp/bin/leave" <<'EOF2'
#!/bin/sh
sh -c 'trap "" TERM; echo $$ >"$STAGE_DIR/left.pid"; exec sleep 60' &
while [ ! -s "$STAGE_DIR/left.pid" ]; do sleep 0.1; done
exec "$@"
EOF2
chmod +x "$tmp/bin/slow" "$tmp/bin/leave" "$tmp/bin/pyenv"
gone() { # PID: no such process (or only its zombie, for an init that reaps late)
    st=$(ps -o stat= -p "$1" 2>/dev/null) || return 0
    case $st in Z*) return 0 ;; esac
    return 1
}
# term_ends RUN_PID CHILD_PID_FILE WHAT ERR S: SIGTERM to trainprof run (RUN_PID) while WHAT
# runs ends it by that signal (status 143), and, S seconds later, the process whose pid
# CHILD_PID_FILE holds is gone too
term_ends() {
    kill -TERM "$1"
    wait "$1"
    rc=$?
    [ $rc -eq 143 ] || fail "SIGTERM during $3: exit status $rc: $(cat "$4")"
    sleep "$5"
    gone "$(cat "$2")" || {
        kill "$(cat "$2")"
        fail "$3's child outlived trainprof run"
    }
}
export STAGE_DIR="$tmp"
"$TP" run -q -o "$tmp/r9" --summarize-with slow -- sh -c "\"$LM\" --steps 10; exit 3" \
    >/dev/null 2>"$tmp/r9.err" &
tp=$!
for i in $(seq 100); do [ -s "$tmp/child.pid" ] && break; sleep 0.1; done
[ -s "$tmp/child.pid" ] || fail "the slow launcher did not start: $(cat "$tmp/r9.err")"
term_ends $tp "$tmp/child.pid" "the stage" "$tmp/r9.err" 0.5
grep -q "signal 15: the first stage through slow stopped after .* s, and no report" \
    "$tmp/r9.err" || fail "no signal line: $(cat "$tmp/r9.err")"
# SIGKILL, which trainprof run cannot act on: its supervisor ends the stage's group
rm -f "$tmp/child.pid"
"$TP" run -q -o "$tmp/r9k" --summarize-with slow -- "$LM" --steps 10 >/dev/null 2>&1 &
tp=$!
for i in $(seq 100); do [ -s "$tmp/child.pid" ] && break; sleep 0.1; done
[ -s "$tmp/child.pid" ] || fail "the slow launcher did not start (r9k)"
kill -KILL $tp
wait $tp
for i in $(seq 30); do gone "$(cat "$tmp/child.pid")" && break; sleep 0.1; done
gone "$(cat "$tmp/child.pid")" || {
    kill "$(cat "$tmp/child.pid")"
    fail "the launcher's command outlived trainprof run killed by SIGKILL"
}
ign=$(sed 's/.*:[[:space:]]*//' "$tmp/sigign")
[ $((0x$ign & 0x1000)) -eq 0 ] || fail "SIGPIPE ignored in the stage (SigIgn $ign)"
"$TP" run -q -o "$tmp/r10" --summarize-with leave -- "$LM" --steps 10 >/dev/null \
    2>"$tmp/r10.err" || fail "run r10: $(cat "$tmp/r10.err")"
gone "$(cat "$tmp/left.pid")" || {
    kill -9 "$(cat "$tmp/left.pid")"
    fail "a process the launcher left outlived the stage"
}
grep -q "rank summaries written through leave" "$tmp/r10.err" || fail "r10: $(cat "$tmp/r10.err")"
# --python's sitecustomize is not on the stage's PYTHONPATH: the user's path is
k=0
for pp in /the/users:/path unset; do
    k=$((k + 1))
    (if [ $pp = unset ]; then unset PYTHONPATH; else export PYTHONPATH=$pp; fi
        exec "$TP" run -q -o "$tmp/r13-$k" --python --summarize-with pyenv -- "$LM" --steps 5) \
        >/dev/null 2>&1 || fail "run r13 ($pp)"
    [ "$(cat "$tmp/pythonpath")" = $pp ] || fail "the stage's PYTHONPATH: $(cat "$tmp/pythonpath")"
done
[ "$(cat "$tmp/injection")" = "unset|unset|unset|unset" ] ||
    fail "trainprof's injection reached the stage: $(cat "$tmp/injection")"
# the user's own preload and CUDA tool are the stage's too (trainprof's are not)
# (zlib, which trainprof links: a library that changes nothing when preloaded; not libc, whose
# preload before a sanitizer build's runtime hides the environment from it)
libz=$(ldd "$TP" | awk '$1 ~ /^libz\.so/ {print $3}')
tool=/opt/tool/libToolsInjection64.so
# (a sanitizer build's runtime must come first in the library list, which the user's preload
# changes: its check is turned off for this run)
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 LD_PRELOAD=$libz \
    CUDA_INJECTION64_PATH=$tool "$TP" run -q -o "$tmp/r16" --summarize-with pyenv -- "$LM" \
    --steps 5 >/dev/null 2>&1 || fail "run r16"
[ "$(cat "$tmp/injection")" = "$libz|$tool|unset|unset" ] ||
    fail "the user's injection variables in the stage: $(cat "$tmp/injection")"

# Ctrl-Z: SIGTSTP to trainprof run's group stops the launcher's group (a group of its own,
# which the terminal does not reach) with it, SIGCONT resumes it, and the time stopped does
# not count against the limit: 2 s of ticks stopped for 5 s passes a 7 s limit. setsid gives
# trainprof run a group of its own (an orphaned one, where SIGTSTP's default action is
# discarded: the supervisor, which takes it, stops the launcher's group all the same).
cat >"$tmp/bin/ticks" <<'EOF2'
#!/bin/sh
echo $$ >"$STAGE_DIR/ticks.pid"
sh -c 'for i in $(seq 20); do echo $i >>"$STAGE_DIR/ticks"; sleep 0.1; done'
exec "$@"
EOF2
chmod +x "$tmp/bin/ticks"
TRAINPROF_SUMMARIZE_LIMIT_S=7 setsid "$TP" run -q -o "$tmp/r15" --summarize-with ticks -- \
    sh -c "\"$LM\" --steps 5; exit 3" >/dev/null 2>"$tmp/r15.err" &
tp=$!
for i in $(seq 200); do [ -s "$tmp/ticks" ] && break; sleep 0.05; done
[ -s "$tmp/ticks" ] || fail "the ticking launcher did not start: $(cat "$tmp/r15.err")"
/bin/kill -s TSTP -- -$tp
sleep 0.5
n1=$(wc -l <"$tmp/ticks")
sleep 4.5
n2=$(wc -l <"$tmp/ticks")
/bin/kill -s CONT -- -$tp
wait $tp
rc=$?
[ "$n1" -eq "$n2" ] || fail "the launcher's group went on while stopped ($n1, then $n2 ticks)"
[ $rc -eq 3 ] || fail "after Ctrl-Z: exit status $rc: $(cat "$tmp/r15.err")"
[ "$(wc -l <"$tmp/ticks")" -eq 20 ] || fail "the launcher's group was not resumed"
grep -q "rank summaries written through ticks" "$tmp/r15.err" ||
    fail "the time stopped counted against the limit: $(cat "$tmp/r15.err")"
# trainprof run killed by SIGKILL while stopped: the stopped stage is ended all the same (its
# supervisor, which waits for the SIGCONT, takes the death signal), never left stopped for good
rm -f "$tmp/ticks" "$tmp/ticks.pid"
setsid "$TP" run -q -o "$tmp/r17" --summarize-with ticks -- "$LM" --steps 5 >/dev/null 2>&1 &
tp=$!
for i in $(seq 200); do [ -s "$tmp/ticks" ] && break; sleep 0.05; done
[ -s "$tmp/ticks" ] && [ -s "$tmp/ticks.pid" ] || fail "the ticking launcher did not start (r17)"
/bin/kill -s TSTP -- -$tp
sleep 0.5
kill -KILL $tp
wait $tp
for i in $(seq 50); do gone "$(cat "$tmp/ticks.pid")" && break; sleep 0.1; done
gone "$(cat "$tmp/ticks.pid")" || {
    /bin/kill -s KILL -- -"$(cat "$tmp/ticks.pid")"
    fail "the stopped stage outlived trainprof run killed by SIGKILL"
}

# 6. a file-size limit (ulimit -f) that takes the rank file but not its summary nor the
# reports: failed writes (no temporary file left), not SIGXFSZ; the job's exit status
(ulimit -f 16 && SLURM_JOB_ID=7 SLURM_JOB_NUM_NODES=2 exec "$TP" run -q -o "$tmp/r14" -- \
    srun sh -c "\"$LM\" --steps 10; exit 5") >/dev/null 2>"$tmp/r14.err"
rc=$?
[ $rc -eq 5 ] || fail "under ulimit -f: exit status $rc: $(cat "$tmp/r14.err")"
grep -q "no summary written: File too large" "$tmp/r14/summarize.log" ||
    fail "under ulimit -f: $(cat "$tmp/r14/summarize.log")"
ls -a "$tmp/r14" | grep -q tmp && fail "temporary files left: $(ls -a "$tmp/r14")"

# 7. auto with CMD Open MPI's mpirun (a stand-in, in a directory of its own, that records its
# arguments and runs the program as task 0 of 1): the job's node options before its program
# (one-dash and NAME=VALUE forms, --allow-run-as-root) are copied, not its other options, nor
# the program's own arguments; the scan ends at an option it does not know; no stage when
# every file is this host's (HOST-PID.1.tprof, the name of a process's second file, included)
mkdir "$tmp/ompi"
cat >"$tmp/ompi/mpirun" <<'EOF'
#!/bin/sh
[ "$1" = --version ] && echo "mpirun (Open MPI) 4.1.4" && exit 0
echo "$*" >>"$MPIRUN_LOG"
while [ $# -gt 0 ]; do
    case $1 in
    --mca) shift 3 ;;
    -np | --hostfile | -hostfile | --bind-to | --map-by) shift 2 ;;
    -*) shift ;;
    *) break ;;
    esac
done
OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=1 exec "$@"
EOF
chmod +x "$tmp/ompi/mpirun"
export MPIRUN_LOG="$tmp/mpirun.log"
echo "$(hostname) slots=2" >"$tmp/hosts"
mpirun_auto() { # DIR MPIRUN-WORDS...: trainprof run --warmup 3 -- mpirun WORDS with the stand-in
    d=$1
    shift
    PATH="$tmp/ompi:$PATH" "$TP" run -q -o "$d" --warmup 3 -- mpirun "$@" >/dev/null \
        2>"$d.err" || fail "run $d: $(cat "$d.err")"
}
mpirun_auto "$tmp/m1" -np 2 --mca btl self --allow-run-as-root -hostfile "$tmp/hosts" \
    --host=other-node --bind-to none sh -c 'exec twohost "$0" --steps 20' "$LM" --host evil \
    -machinefile evil
want="--allow-run-as-root -hostfile $tmp/hosts --host=other-node --map-by ppr:1:node $TP \
summarize --warmup 3 --top 15 -- $tmp/m1"
[ "$(sed -n 2p "$MPIRUN_LOG")" = "$want" ] || fail "mpirun stage: $(sed -n 2p "$MPIRUN_LOG")"
grep -q "rank summaries written through mpirun in " "$tmp/m1.err" || fail "m1: $(cat "$tmp/m1.err")"
grep -q "task 0 of 1 (Open MPI): 2 of 2 files summarised (2 written" "$tmp/m1/summarize.log" ||
    fail "m1 summarize.log: $(cat "$tmp/m1/summarize.log")"
same_as_without "$tmp/m1" --warmup 3
: >"$MPIRUN_LOG"
export TWOHOST_AS=HOST-PID.1
mpirun_auto "$tmp/m2" -np 2 --hostfile "$tmp/hosts" twohost "$LM" --steps 10
unset TWOHOST_AS
[ "$(ls "$tmp/m2" | grep -c '\.1\.tprof$')" -eq 1 ] || fail "no second file: $(ls "$tmp/m2")"
[ "$(wc -l <"$MPIRUN_LOG")" -eq 1 ] || fail "a stage for files of this host: $(cat "$MPIRUN_LOG")"
ls "$tmp/m2" | grep -q '\.sum' && fail "summaries without a stage: $(ls "$tmp/m2")"
mpirun_auto "$tmp/m3" --display-devel-map --hostfile "$tmp/hosts" twohost "$LM" --steps 10
[ "$(sed -n 3p "$MPIRUN_LOG")" = "--map-by ppr:1:node $TP summarize --warmup 3 --top 15 -- \
$tmp/m3" ] || fail "the scan went past an unknown option: $(sed -n 3p "$MPIRUN_LOG")"

# 7b. auto with CMD the Hydra process manager's mpiexec (MPICH's, Intel MPI's): told from Open
# MPI's by the name of the program its links lead to (mpiexec.hydra), else by what it says to
# --version (stand-ins that record their arguments and run the program as PMI task 0 of 1).
# The stage is `mpiexec <the job's node and launch options> -ppn 1 -n H`, H the hosts the rank
# files name (three: this one, node-b and node-c, whose files are node-c-PID.tprof and
# node-c-PID.1.tprof); the ranks' environment and placement options are not copied (-genv
# NAME VALUE and -genv NAME=VALUE, -n, -ppn, -l, -wdir), nor the program's own arguments.
mkdir "$tmp/hydra" "$tmp/mpich" "$tmp/slowv"
cat >"$tmp/hydra/mpiexec" <<'EOF'
#!/bin/sh
if [ "$1" = --version ]; then
    [ -n "${HYDRA_SILENT:-}" ] && exit 1
    printf 'HYDRA build details:\n    Version:                                 4.1.2\n'
    exit 0
fi
echo "$*" >>"$HYDRA_LOG"
while [ $# -gt 0 ]; do
    case $1 in
    -genv | -env) case $2 in *=*) shift 2 ;; *) shift 3 ;; esac ;;
    -f | -hosts | -launcher | -bootstrap-exec | -IFACE | -ppn | -n | -wdir) shift 2 ;;
    -*) shift ;;
    *) break ;;
    esac
done
PMI_RANK=0 PMI_SIZE=1 exec "$@"
EOF
chmod +x "$tmp/hydra/mpiexec"
# MPICH's install: mpiexec a link to mpiexec.hydra, which --version does not need to answer
cp "$tmp/hydra/mpiexec" "$tmp/mpich/mpiexec.hydra"
ln -s mpiexec.hydra "$tmp/mpich/mpiexec"
# Open MPI's, named mpiexec; and an mpirun that never answers --version (taken for Open MPI's)
cp "$tmp/ompi/mpirun" "$tmp/ompi/mpiexec"
cat >"$tmp/slowv/mpirun" <<'EOF'
#!/bin/sh
[ "$1" = --version ] && echo $$ >"$STAGE_DIR/slowv.pid" && exec sleep 30
exec "$(dirname "$0")/../ompi/mpirun" "$@"
EOF
chmod +x "$tmp/slowv/mpirun"
export HYDRA_LOG="$tmp/hydra.log"
: >"$HYDRA_LOG"
: >"$MPIRUN_LOG"
mpiexec_auto() { # DIR BINDIR MPIEXEC-WORDS...: trainprof run --warmup 3 -- mpiexec WORDS
    d=$1 bin=$2
    shift 2
    PATH="$bin:$PATH" "$TP" run -q -o "$d" --warmup 3 -- "$@" >/dev/null 2>"$d.err" ||
        fail "run $d: $(cat "$d.err")"
}
stage() { # DIR: the summarize command of the stage for DIR, as the launcher is given it
    echo "$TP summarize --warmup 3 --top 15 -- $1"
}
export TWOHOST_AS="node-b-PID node-c-PID.1 node-c-PID"
mpiexec_auto "$tmp/h1" "$tmp/hydra" mpiexec -f "$tmp/hosts" -genv OMP_NUM_THREADS 1 -n 2 \
    -launcher ssh -l sh -c 'exec twohost "$0" --steps 20' "$LM" -hosts evil -f evil
want="-f $tmp/hosts -launcher ssh -ppn 1 -n 3 $(stage "$tmp/h1")"
[ "$(sed -n 2p "$HYDRA_LOG")" = "$want" ] || fail "Hydra stage: $(sed -n 2p "$HYDRA_LOG")"
grep -q "rank summaries written through mpiexec in " "$tmp/h1.err" || fail "h1: $(cat "$tmp/h1.err")"
grep -q "task 0 of 1 (PMI): 4 of 4 files summarised (4 written" "$tmp/h1/summarize.log" ||
    fail "h1 summarize.log: $(cat "$tmp/h1/summarize.log")"
same_as_without "$tmp/h1" --warmup 3
export TWOHOST_AS="node-b-PID"
mpiexec_auto "$tmp/h2" "$tmp/hydra" mpiexec --hosts=a,b -genv X=1 -bootstrap-exec /usr/bin/ssh \
    -IFACE lo -ppn 4 -wdir "$tmp" -skip-launch-node twohost "$LM" --steps 10
want="--hosts=a,b -bootstrap-exec /usr/bin/ssh -IFACE lo -skip-launch-node -ppn 1 -n 2 \
$(stage "$tmp/h2")"
[ "$(sed -n 4p "$HYDRA_LOG")" = "$want" ] || fail "Hydra stage (h2): $(sed -n 4p "$HYDRA_LOG")"
# every file of this host: no stage
export TWOHOST_AS=HOST-PID.1
mpiexec_auto "$tmp/h3" "$tmp/hydra" mpiexec -f "$tmp/hosts" -n 2 twohost "$LM" --steps 10
[ "$(wc -l <"$HYDRA_LOG")" -eq 5 ] || fail "a Hydra stage for files of this host: $(cat "$HYDRA_LOG")"
ls "$tmp/h3" | grep -q '\.sum' && fail "summaries without a stage: $(ls "$tmp/h3")"
# the link's target's name tells, without asking (HYDRA_SILENT: no answer to --version)
export TWOHOST_AS="node-b-PID"
HYDRA_SILENT=1 mpiexec_auto "$tmp/h4" "$tmp/mpich" mpiexec -n 1 twohost "$LM" --steps 10
[ "$(sed -n 7p "$HYDRA_LOG")" = "-ppn 1 -n 2 $(stage "$tmp/h4")" ] ||
    fail "mpiexec linked to mpiexec.hydra: $(sed -n 7p "$HYDRA_LOG")"
# Open MPI's mpiexec says so: its stage
mpiexec_auto "$tmp/h5" "$tmp/ompi" mpiexec -np 1 --hostfile "$tmp/hosts" twohost "$LM" --steps 10
[ "$(sed -n 2p "$MPIRUN_LOG")" = "--hostfile $tmp/hosts --map-by ppr:1:node $(stage "$tmp/h5")" ] ||
    fail "Open MPI's mpiexec: $(sed -n 2p "$MPIRUN_LOG")"
# an mpirun that does not answer --version: stopped at the probe's limit, taken for Open MPI's
start=$(date +%s)
mpiexec_auto "$tmp/h6" "$tmp/slowv" mpirun -np 1 twohost "$LM" --steps 10
[ $(($(date +%s) - start)) -lt 20 ] || fail "the --version probe was not stopped"
gone "$(cat "$tmp/slowv.pid")" || {
    kill "$(cat "$tmp/slowv.pid")"
    fail "the --version probe outlived it"
}
[ "$(sed -n 4p "$MPIRUN_LOG")" = "--map-by ppr:1:node $(stage "$tmp/h6")" ] ||
    fail "an mpirun that says nothing: $(sed -n 4p "$MPIRUN_LOG")"
# SIGTERM to trainprof run while it asks --version (a script whose child does not answer):
# the probe's group is ended with it, its child included, then trainprof run by the signal,
# with its line and no report (before, trainprof run died alone and the child ran on)
mkdir "$tmp/slowv2"
cat >"$tmp/slowv2/mpirun" <<'EOF'
#!/bin/sh
[ "$1" = --version ] && { sleep 30 & echo $! >"$STAGE_DIR/slowv2.pid"; wait; exit 0; }
exec "$(dirname "$0")/../ompi/mpirun" "$@"
EOF
chmod +x "$tmp/slowv2/mpirun"
PATH="$tmp/slowv2:$PATH" "$TP" run -q -o "$tmp/h7" -- mpirun -np 1 twohost "$LM" --steps 10 \
    >/dev/null 2>"$tmp/h7.err" &
run_pid=$!
for i in $(seq 300); do [ -s "$tmp/slowv2.pid" ] && break; sleep 0.05; done
[ -s "$tmp/slowv2.pid" ] || fail "no --version probe: $(cat "$tmp/h7.err")"
term_ends "$run_pid" "$tmp/slowv2.pid" "the --version probe" "$tmp/h7.err" 0.2
grep -q "signal 15: no first stage (it was asking .*/mpirun --version), and no report" \
    "$tmp/h7.err" || fail "h7: $(cat "$tmp/h7.err")"
[ -e "$tmp/h7/report.json" ] && fail "a report after SIGTERM during the probe"
unset TWOHOST_AS

# 7c. MPICH's own Hydra, where installed: the job started by `mpiexec.hydra -n 2` (each task a
# PMI rank) leaves files of "two hosts" (twohost), so `auto` runs the stage through it,
# `mpiexec.hydra -ppn 1 -n 2` (this one host then takes both tasks, two files each); the
# same report as without the stage
HYDRA=$(command -v mpiexec.hydra || true)
if [ -n "$HYDRA" ]; then
    TWOHOST_AS="node-b-PID" env -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE -u PMI_RANK \
        -u PMI_SIZE -u SLURM_PROCID -u SLURM_NTASKS -u RANK -u WORLD_SIZE timeout 300 \
        "$TP" run -q -o "$tmp/hr" --warmup 3 -- "$HYDRA" -n 2 twohost "$LM" --steps 20 \
        >/dev/null 2>"$tmp/hr.err" || fail "run under mpiexec.hydra: $(cat "$tmp/hr.err")"
    grep -q "rank summaries written through mpiexec.hydra in " "$tmp/hr.err" ||
        fail "hr: $(cat "$tmp/hr.err")"
    for k in 0 1; do
        grep -q "task $k of 2 (PMI): 2 of 2 files summarised (2 written" "$tmp/hr/summarize.log" ||
            fail "no line of Hydra's task $k: $(cat "$tmp/hr/summarize.log")"
    done
    # the job's two tasks are ranks 0 and 1 (PMI_RANK)
    for k in 0 1; do
        grep -q "^  rank $k  " "$tmp/hr/report.txt" || fail "no rank $k: $(cat "$tmp/hr/report.txt")"
    done
    grep -q "out of date" "$tmp/hr/report.txt" && fail "the Hydra stage's summaries were stale"
    same_as_without "$tmp/hr" --warmup 3
else
    echo "not run: mpiexec.hydra not found (MPICH's launcher: apt-get install mpich)"
fi

MPIRUN=$(command -v mpirun || true)
if [ -z "$MPIRUN" ]; then
    echo "SKIP: mpirun not found (apt-get install openmpi-bin); the rest passed"
    exit 77
fi
# 8. Open MPI's mpirun as the launcher: two tasks, one file each
flags="--oversubscribe"
[ "$(id -u)" = 0 ] && flags="$flags --allow-run-as-root"
real_mpirun() { # DIR HOW MPIRUN-WORDS...: trainprof run --summarize-with HOW -- mpirun WORDS
    d=$1 how=$2
    shift 2
    env -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE -u PMI_RANK -u PMI_SIZE -u SLURM_PROCID \
        -u SLURM_NTASKS -u RANK -u WORLD_SIZE timeout 300 "$TP" run -q -o "$d" \
        --summarize-with "$how" -- "$MPIRUN" "$@" >/dev/null 2>"$d.err" ||
        fail "run under mpirun: $(cat "$d.err")"
}
real_mpirun "$tmp/r7" "$MPIRUN -np 2 $flags" -np 2 $flags "$LM" --steps 20
for k in 0 1; do
    grep -q "task $k of 2 (Open MPI): 1 of 1 files summarised (1 written" "$tmp/r7/summarize.log" ||
        fail "no line of task $k: $(cat "$tmp/r7/summarize.log")"
done
[ "$(ls "$tmp/r7" | grep -c '\.tprof\.sum$')" -eq 2 ] || fail "expected 2 summaries: $(ls "$tmp/r7")"
grep -q "out of date" "$tmp/r7/report.txt" && fail "the mpirun stage's summaries were stale"
same_as_without "$tmp/r7"
# 9. auto with the real mpirun: a job of "two hosts" (twohost), the stage on the one node of
# its --host (ppr:1:node: one task for the four files), the options copied as mpirun takes them
real_mpirun "$tmp/r20" auto -np 2 $flags --host "$(hostname):2" twohost "$LM" --steps 20
grep -q "rank summaries written through mpirun" "$tmp/r20.err" || fail "r20: $(cat "$tmp/r20.err")"
grep -q "task 0 of 1 (Open MPI): 4 of 4 files summarised (4 written" "$tmp/r20/summarize.log" ||
    fail "r20 summarize.log: $(cat "$tmp/r20/summarize.log")"
grep -q "out of date" "$tmp/r20/report.txt" && fail "the auto mpirun stage's summaries were stale"
same_as_without "$tmp/r20"
echo "PASS: the first stage through srun, mpirun and Hydra's mpiexec, the same reports"
