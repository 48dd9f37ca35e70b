#!/bin/sh
# summarize_test.sh TRAINPROF BENCH_REPORT_SCALE — `trainprof summarize` end to end on a
# synthetic run of 16 ranks (bench_report_scale --keep): each launcher's variables split the
# files among tasks (file i to task i % size, in name order); `mpirun -np 4 trainprof
# summarize DIR` summarises every file once, one line per task; then `trainprof report DIR`
# is the report without summaries, byte for byte, in text, JSON and HTML, and its load
# decodes no rank file (every slim process from its summary). The same with MPICH's
# `mpiexec.hydra -n 4` where it is installed. The mpirun part is skipped (exit 77, after the
# rest has passed) when mpirun is missing.
#
# mpirun flags: as root Open MPI refuses to start without --allow-run-as-root; CI has 2
# cores, so --oversubscribe. Timeouts are generous: the machine may be loaded.
set -u
TP=$1 BENCH=$2
tmp=$(mktemp -d "${TPROF_TEST_TMP:-/tmp}/summarize-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# no launcher variable of the test's own environment may decide the split
clean() {
    env -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE -u PMI_RANK -u PMI_SIZE \
        -u SLURM_PROCID -u SLURM_NTASKS -u RANK -u WORLD_SIZE "$@"
}

TMPDIR=$tmp "$BENCH" --ranks 16 --steps 40 --kernels 20 --keep >"$tmp/bench.out" 2>&1 ||
    fail "bench_report_scale: $(cat "$tmp/bench.out")"
dir=$(sed -n 's/^  kept //p' "$tmp/bench.out")
[ -d "$dir" ] || fail "no run kept: $(cat "$tmp/bench.out")"
[ "$(ls "$dir"/*.tprof | wc -l)" -eq 16 ] || fail "expected 16 rank files in $dir"

report() { # report NAME: the run's report in text, JSON and HTML, into $tmp/NAME.*
    clean "$TP" report "$dir" >"$tmp/$1.txt" || fail "report $1 (text)"
    clean "$TP" report "$dir" --format json -o "$tmp/$1.json" 2>/dev/null || fail "report $1 (json)"
    clean "$TP" report "$dir" --format html -o "$tmp/$1.html" 2>/dev/null || fail "report $1 (html)"
}
report plain
[ "$(ls "$dir" | grep -c '\.sum$')" -eq 0 ] || fail "a report wrote summaries"
# a file-size limit (ulimit -f) the text fits under but the rank sections' temporary file does
# not: the sections stay in memory and the report is the same (SIGXFSZ ended it)
# (twice the text in 512-byte blocks: dash's unit; bash's 1024 would make it four texts)
lim=$((($(wc -c <"$tmp/plain.txt") + 511) / 512 * 2))
(ulimit -f $lim && clean "$TP" report "$dir") >"$tmp/limited.txt" 2>"$tmp/limited.err" ||
    fail "report under ulimit -f $lim: $(cat "$tmp/limited.err")"
cmp -s "$tmp/plain.txt" "$tmp/limited.txt" || fail "the report differs under ulimit -f $lim"
# standard output closed: the report fails as a write to a closed descriptor (EBADF), the same
# in every format; the sections' temporary file, opened after, must not take descriptor 1 (the
# text then went into it, status 0; the JSON and HTML overwrote the sections they read back)
for f in text json html; do
    clean "$TP" report "$dir" --format $f >&- 2>"$tmp/closed.err" &&
        fail "report --format $f to a closed standard output succeeded"
    grep -q "standard output failed: Bad file descriptor" "$tmp/closed.err" ||
        fail "report --format $f to a closed standard output: $(cat "$tmp/closed.err")"
done

# split(LAUNCHER_VARS..., EXPECTED_FILES): one task's share under a launcher's variables
split() {
    want=$1
    shift
    clean "$@" "$TP" summarize "$dir" 2>"$tmp/split.err" || fail "summarize under $*: $(cat "$tmp/split.err")"
    got=$(cd "$dir" && ls *.sum 2>/dev/null | tr '\n' ' ')
    [ "$got" = "$want" ] || fail "under $*: summaries $got, expected $want"
    rm -f "$dir"/*.sum
}
split "bench-1001.tprof.sum bench-1005.tprof.sum bench-1009.tprof.sum bench-1013.tprof.sum " \
    RANK=1 WORLD_SIZE=4
grep -q "task 1 of 4 (torchrun): 4 of 4 files summarised (4 written" "$tmp/split.err" ||
    fail "torchrun task line: $(cat "$tmp/split.err")"
split "bench-1003.tprof.sum bench-1007.tprof.sum bench-1011.tprof.sum bench-1015.tprof.sum " \
    SLURM_PROCID=3 SLURM_NTASKS=4
grep -q "task 3 of 4 (Slurm)" "$tmp/split.err" || fail "Slurm task line: $(cat "$tmp/split.err")"
# Open MPI's pair before Slurm's (mpirun inside a Slurm allocation), PMI's before Slurm's
split "bench-1000.tprof.sum bench-1008.tprof.sum " \
    SLURM_PROCID=3 SLURM_NTASKS=4 OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=8
split "bench-1006.tprof.sum bench-1013.tprof.sum " \
    SLURM_PROCID=3 SLURM_NTASKS=4 PMI_RANK=6 PMI_SIZE=7
# a rank past its size is no pair: the next one decides
split "bench-1002.tprof.sum bench-1007.tprof.sum bench-1012.tprof.sum " \
    PMI_RANK=9 PMI_SIZE=7 RANK=2 WORLD_SIZE=5
# nothing to do for a task beyond the files is no error
split "" RANK=20 WORLD_SIZE=24
# the tasks share the slim reads: each writes its own files' slim processes first, then takes
# the other tasks' from their summaries; run one after another, task k finds 4(k+1) there
# (task 0 waits for the others, then decodes their files as a task alone did)
for k in 0 1 2 3; do
    clean RANK=$k WORLD_SIZE=4 "$TP" summarize "$dir" 2>"$tmp/share.err" ||
        fail "summarize, task $k: $(cat "$tmp/share.err")"
    grep -q "task $k of 4 (torchrun): 4 of 4 files summarised (4 written, 0 already up to date, \
0 failed) in .* s; $((4 * k + 4)) of the run's 16 files read from their summaries, after" \
        "$tmp/share.err" || fail "task $k's share: $(cat "$tmp/share.err")"
done
report shared
for f in txt json html; do
    cmp "$tmp/plain.$f" "$tmp/shared.$f" || fail "the $f report differs with shared summaries"
done
rm -f "$dir"/*.sum
# a task ended by SIGTERM while it writes a summary (the launcher's, when trainprof run's first
# stage reaches its limit) leaves no temporary file beside the rank files, and dies of the
# signal: strace slows every write, so that the signal lands in one (skipped without strace)
if command -v strace >/dev/null; then
    clean RANK=1 WORLD_SIZE=2 strace -f -o /dev/null -e trace=write \
        -e inject=write:delay_enter=200000 sh -c 'echo $$ >"$1"; exec "$2" summarize "$3"' sh \
        "$tmp/term.pid" "$TP" "$dir" 2>/dev/null &
    tracer=$!
    for i in $(seq 300); do ls "$dir" | grep -q '\.tmp\.' && break; sleep 0.05; done
    ls "$dir" | grep -q '\.tmp\.' || fail "no summary being written under strace"
    kill -TERM "$(cat "$tmp/term.pid")"
    wait $tracer
    rc=$?
    [ $rc -eq 143 ] || fail "SIGTERM during a write: exit status $rc"
    [ "$(ls "$dir" | grep -c '\.tmp\.')" -eq 0 ] || fail "temporary files left: $(ls "$dir")"
    rm -f "$dir"/*.sum
fi
# the sections' temporary file never outlives the report, even when its name cannot be removed
# (strace makes unlink fail; a signal between the file's creation and its unlink leaves it the
# same way): it held the run's range and host names in $TMPDIR for good (skipped without strace;
# LeakSanitizer cannot run under ptrace, so an ASan build checks no leaks there)
if command -v strace >/dev/null; then
    mkdir "$tmp/spilldir"
    TMPDIR=$tmp/spilldir ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 clean strace -f -o /dev/null -e trace=unlink -e inject=unlink:error=EACCES \
        "$TP" report "$dir" --format json >"$tmp/unlink.json" 2>"$tmp/unlink.err" ||
        fail "report with unlink failing: $(cat "$tmp/unlink.err")"
    cmp -s "$tmp/plain.json" "$tmp/unlink.json" || fail "the report differs with unlink failing"
    [ -z "$(ls "$tmp/spilldir")" ] || fail "temporary file left: $(ls -l "$tmp/spilldir")"
fi
# a rank file's name that links to a FIFO is an unreadable file, never a wait for a writer:
# not in the share's slim pass, its wait, the sections, nor the report
mkdir "$tmp/fifo" && mkfifo "$tmp/fifo.pipe" && cp "$dir/bench-1000.tprof" "$dir/bench-1001.tprof" \
    "$tmp/fifo/" && ln -s "$tmp/fifo.pipe" "$tmp/fifo/bench-1000a.tprof" || fail "fifo run"
for k in 0 1; do
    clean RANK=$k WORLD_SIZE=2 timeout 60 "$TP" summarize "$tmp/fifo" 2>"$tmp/fifo$k.err" &
done
wait
grep -q "unreadable: $tmp/fifo/bench-1000a.tprof" "$tmp/fifo0.err" ||
    fail "a link to a FIFO as a rank file: $(cat "$tmp/fifo0.err" "$tmp/fifo1.err")"
[ "$(ls "$tmp/fifo" | grep -c '\.sum$')" -eq 2 ] || fail "fifo run's summaries: $(ls "$tmp/fifo")"
clean timeout 60 "$TP" report "$tmp/fifo" >/dev/null 2>&1
[ $? -eq 124 ] && fail "the report waited on a link to a FIFO"
# another task's file that no task can summarise is not waited for (the quiet spell, 2 s at
# least, then the load fails it again): in name order 1000, 1000a, 1000a0, 1000a1, 1001, 1002,
# 1003, task 1 of 2 has 1000a, no rank file, 1000a1, a rank file cut inside its header (the
# magic is there, the rest of the header is not), and 1002, whose summary's name is a
# directory; task 0, run alone, has nothing to wait for
mkdir "$tmp/never" && cp "$dir/bench-1000.tprof" "$dir/bench-1001.tprof" "$dir/bench-1002.tprof" \
    "$dir/bench-1003.tprof" "$tmp/never/" && echo "no rank file" >"$tmp/never/bench-1000a.tprof" &&
    head -c 100 "$dir/bench-1000.tprof" >"$tmp/never/bench-1000a0.tprof" &&
    head -c 100 "$dir/bench-1000.tprof" >"$tmp/never/bench-1000a1.tprof" &&
    mkdir "$tmp/never/bench-1002.tprof.sum" || fail "never run"
clean RANK=0 WORLD_SIZE=2 "$TP" summarize "$tmp/never" 2>"$tmp/never0.err"
w=$(sed -n 's/.*after \([0-9.]*\) s waiting.*/\1/p' "$tmp/never0.err")
[ -n "$w" ] || fail "no wait in task 0's line: $(cat "$tmp/never0.err")"
awk -v w="$w" 'BEGIN { exit !(w < 1.5) }' ||
    fail "task 0 waited $w s for files no task can summarise: $(cat "$tmp/never0.err")"
# nothing could be done: an error
clean "$TP" summarize "$tmp/none" 2>/dev/null && fail "summarize of a missing directory succeeded"

# MPICH's launcher, Hydra (mpiexec.hydra: PMI_RANK and PMI_SIZE), where installed: the same
# split, every file summarised once, and the same report byte for byte; then the summaries
# are removed for Open MPI's run below
HYDRA=$(command -v mpiexec.hydra || true)
if [ -n "$HYDRA" ]; then
    clean timeout 300 "$HYDRA" -n 4 "$TP" summarize "$dir" >"$tmp/hydra.out" 2>&1 ||
        fail "mpiexec.hydra -n 4 trainprof summarize: $(cat "$tmp/hydra.out")"
    for k in 0 1 2 3; do
        grep -q "task $k of 4 (PMI): 4 of 4 files summarised (4 written, 0 already up to date, 0 failed)" \
            "$tmp/hydra.out" || fail "no line of Hydra's task $k: $(cat "$tmp/hydra.out")"
    done
    [ "$(ls "$dir" | grep -c '\.sum$')" -eq 16 ] || fail "Hydra: expected 16 summaries: $(ls "$dir")"
    report hydra
    for f in txt json html; do
        cmp "$tmp/plain.$f" "$tmp/hydra.$f" || fail "the $f report differs with Hydra's summaries"
    done
    rm -f "$dir"/*.sum
    echo "PASS: mpiexec.hydra -n 4 trainprof summarize, then the same report byte for byte"
else
    echo "not run: mpiexec.hydra not found (MPICH's launcher: apt-get install mpich)"
fi

MPIRUN=$(command -v mpirun || true)
if [ -z "$MPIRUN" ]; then
    echo "SKIP: mpirun not found (apt-get install openmpi-bin); the rest passed"
    exit 77
fi
set -- --oversubscribe
[ "$(id -u)" = 0 ] && set -- "$@" --allow-run-as-root
clean timeout 300 "$MPIRUN" "$@" -np 4 "$TP" summarize "$dir" >"$tmp/mpi.out" 2>&1 ||
    fail "mpirun -np 4 trainprof summarize: $(cat "$tmp/mpi.out")"
cat "$tmp/mpi.out"
for k in 0 1 2 3; do
    grep -q "task $k of 4 (Open MPI): 4 of 4 files summarised (4 written, 0 already up to date, 0 failed)" \
        "$tmp/mpi.out" || fail "no line of task $k"
    # its own 4 at least (how many of the others' depends on how the tasks ran side by side)
    n=$(sed -n "s/.*task $k of 4 .*; \([0-9]*\) of the run's 16 files read from.*/\1/p" \
        "$tmp/mpi.out")
    [ "${n:-0}" -ge 4 ] || fail "task $k read its own files' slim processes again: $n"
done
[ "$(ls "$dir" | grep -c '\.sum$')" -eq 16 ] || fail "expected 16 summaries: $(ls "$dir")"
[ "$(ls "$dir" | grep -c '\.tmp\.')" -eq 0 ] || fail "temporary files left: $(ls "$dir")"
report summarised
grep -q "out of date" "$tmp/summarised.txt" && fail "summaries found out of date"
for f in txt json html; do
    cmp "$tmp/plain.$f" "$tmp/summarised.$f" || fail "the $f report differs with summaries"
done
# the load took every file's slim process from its summary, decoding none, and every section
# was read from one (the bench's count of the same load and report)
"$BENCH" --ranks 16 --steps 40 --kernels 20 --dir "$dir" >"$tmp/bench2.out" 2>&1 || fail "bench_report_scale --dir: $(cat "$tmp/bench2.out")"
grep -q "from summaries    16 of 16 files, 16 of 16 sections" "$tmp/bench2.out" ||
    fail "rank files decoded: $(cat "$tmp/bench2.out")"
rm -f "$dir/report.json" "$dir/report.html"
# the report read them: an option a section reads makes them all stale, and says so
clean "$TP" report "$dir" --warmup 2 | grep -q "16 summaries out of date, recomputed" ||
    fail "no stale line with another warm-up"
echo "PASS: mpirun -np 4 trainprof summarize, then the same report byte for byte"
