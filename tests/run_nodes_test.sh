#!/bin/sh
# run_nodes_test.sh TRAINPROF CHAR_LM — `trainprof run` on every node of a job whose launcher
# is started once per node (torchrun --nnodes N, or --nodes N), all the nodes' runs writing
# into one directory. Nodes are made here with UTS namespaces (`unshare -u`, each its own host
# name; skipped with 77 where they cannot be made), the launcher is a stand-in torchrun whose
# one worker per node takes the node's rank as its global rank. Checks: the runs of two nodes
# share the directory (neither refused), each summarises its own rank files, the node of rank
# 0 alone writes the report after waiting for the other's summaries, and that report is the
# one without summaries; the job's exit status on each node; the wait ends at the limit when
# a node never comes; a run of one node and a second run on one host are refused while the
# nodes' runs hold the directory; torchrun's --nnodes is read in its forms (and not after the
# script; --standalone is one node).
set -u
TP=$(cd "$(dirname "$1")" && pwd -P)/$(basename "$1") LM=$2
tmp=$(mktemp -d "${TPROF_TEST_TMP:-/tmp}/run-nodes-XXXXXX")
trap "[ -n \"${KEEP:-}\" ] || rm -rf \"$tmp\"" EXIT
fail() { echo "FAIL: $*"; exit 1; }
unshare -u true 2>/dev/null || { echo "SKIP: no UTS namespaces (unshare -u) here"; exit 77; }
mkdir "$tmp/bin"
cat >"$tmp/bin/torchrun" <<'EOF'
#!/bin/sh
# stand-in torchrun: one worker on this node, its global rank the node's rank; with RDZV set,
# the nodes' workers start together, as torchrun's rendezvous starts them, and the nodes end
# together, as a job's ranks do at their last collective (each barrier at most 20 s)
nn=1 nr=0
while [ $# -gt 0 ]; do
    case $1 in
    --nnodes=*) nn=${1#*=} ;;
    --node-rank=*) nr=${1#*=} ;;
    --nnodes | --node-rank | --rdzv-endpoint | --nproc-per-node) [ "$1" = --nnodes ] && nn=$2; shift ;;
    --standalone) ;;
    -*) ;;
    *) break ;;
    esac
    shift
done
meet() { # the barrier named $1
    mkdir -p "$RDZV" && : >"$RDZV/$1-$(hostname)"
    i=0
    while [ "$(ls "$RDZV" | grep -c "^$1-")" -lt "${nn##*:}" ] && [ $i -lt 200 ]; do
        sleep 0.1
        i=$((i + 1))
    done
}
export RANK=$nr WORLD_SIZE=${nn##*:} LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 GROUP_RANK=$nr
[ -n "${RDZV:-}" ] || exec "$@"
meet start
"$@"
rc=$?
meet end
exit $rc
EOF
chmod +x "$tmp/bin/torchrun"
cat >"$tmp/bin/python" <<'EOF'
#!/bin/sh
# stand-in python: `python [OPTIONS] -m torch.distributed.run ARGS` is torchrun ARGS
while [ $# -gt 0 ] && [ "$1" != torch.distributed.run ]; do shift; done
shift
exec torchrun "$@"
EOF
chmod +x "$tmp/bin/python"
export PATH="$tmp/bin:$PATH"
unset TRAINPROF_SUMMARIZE_WITH TRAINPROF_SUMMARIZE_LIMIT_S TRAINPROF_NO_REPORT \
    TRAINPROF_NODES || true
# node NAME CMD...: CMD on a node named NAME
node() {
    n=$1
    shift
    unshare -u sh -c 'hostname "$0" && exec "$@"' "$n" "$@"
}
figures() { grep -v '"dir"\|"file"' "$1"; }

# 1. two nodes, the second (rank 1) started 2 s after the first: rank 0's node waits for its
#    mark (the report is written after it), then writes the report of both; the other none
d=$tmp/r1
RDZV=$tmp/rdzv1 node tpn-a "$TP" run -q -o "$d" -- torchrun --nnodes=2 --node-rank=0 "$LM" \
    --steps 40 >/dev/null 2>"$tmp/a.err" &
pa=$!
sleep 2
RDZV=$tmp/rdzv1 node tpn-b "$TP" run -q -o "$d" -- torchrun --nnodes 2 --node-rank=1 "$LM" \
    --steps 3000 >/dev/null 2>"$tmp/b.err" &
pb=$!
wait $pa || fail "node a: exit $?: $(cat "$tmp/a.err")"
wait $pb || fail "node b: exit $?: $(cat "$tmp/b.err")"
grep -q "in use\|already holds" "$tmp/a.err" "$tmp/b.err" && fail "a node was refused: $(cat "$tmp/a.err" "$tmp/b.err")"
grep -q "this node's rank summaries (tpn-a) written in .* s (its line in $d/summarize-tpn-a.log)" \
    "$tmp/a.err" || fail "node a's stage: $(cat "$tmp/a.err")"
grep -q "this node's rank summaries (tpn-b) written" "$tmp/b.err" || fail "node b's stage: $(cat "$tmp/b.err")"
grep -q "1 of 1 files summarised (1 written" "$d/summarize-tpn-b.log" ||
    fail "node b's log: $(cat "$d/summarize-tpn-b.log")"
grep -q "the report is written by the run on the node of rank 0" "$tmp/b.err" ||
    fail "node b did not leave the report to rank 0's node: $(cat "$tmp/b.err")"
[ -n "$(find "$d" -name report.json -newer "$d/.trainprof-run-tpn-b.done")" ] ||
    fail "the report was written before node b was done"
grep -q "the runs of the job.s 2 nodes are done (2 rank files), after [0-9.]* s waiting" "$tmp/a.err" ||
    fail "node a's wait: $(cat "$tmp/a.err")"
grep -q "rank files and reports in $d" "$tmp/a.err" || fail "node a's report: $(cat "$tmp/a.err")"
grep -q "reports in" "$tmp/b.err" && fail "node b wrote reports too"
[ -f "$d/report.json" ] || fail "no report.json"
[ "$(grep -c '"world_size":[[:space:]]*2' "$d/report.json")" -ge 2 ] || fail "report.json lacks a rank"
grep -q "out of date" "$d/report.txt" && fail "the report found summaries stale"
ls "$d"/tpn-a-*.tprof.sum "$d"/tpn-b-*.tprof.sum >/dev/null 2>&1 || fail "summaries: $(ls "$d")"
mkdir "$tmp/copy" && cp "$d"/*.tprof "$tmp/copy/"
"$TP" report "$tmp/copy" --format json -o "$tmp/copy.json" 2>/dev/null || fail "report of the copy"
figures "$d/report.json" >"$tmp/x" && figures "$tmp/copy.json" >"$tmp/y"
cmp -s "$tmp/x" "$tmp/y" || fail "the report differs from the one without summaries: $(diff "$tmp/x" "$tmp/y" | head -5)"

# 2. the job's exit status on each node, the report node's included
d=$tmp/r2
RDZV=$tmp/rdzv2 node tpn-a "$TP" run -q -o "$d" -- torchrun --nnodes=2 --node-rank=0 sh -c \
    'exit 3' >/dev/null 2>"$tmp/a2.err" &
pa=$!
RDZV=$tmp/rdzv2 node tpn-b "$TP" run -q -o "$d" -- torchrun --nnodes=2 --node-rank=1 sh -c \
    'exit 4' >/dev/null 2>"$tmp/b2.err" &
pb=$!
wait $pa
[ $? -eq 3 ] || fail "node a's status: $(cat "$tmp/a2.err")"
wait $pb
[ $? -eq 4 ] || fail "node b's status: $(cat "$tmp/b2.err")"

# 3. a node whose run never ends (its file is there, its mark never comes) and one that never
#    starts: the wait ends at TRAINPROF_SUMMARIZE_LIMIT_S, and says so
d=$tmp/r3
mkdir "$d" && cp "$tmp"/r1/tpn-b-*.tprof "$d/tpn-z-12345.tprof"
TRAINPROF_SUMMARIZE_LIMIT_S=2 node tpn-a "$TP" run -q -o "$d" -- torchrun --nnodes=1:3 \
    --node-rank=0 "$LM" --steps 10 >/dev/null 2>"$tmp/a3.err" || fail "run r3: $(cat "$tmp/a3.err")"
grep -q "waited [0-9.]* s for the other nodes: rank files of 2 of 3 nodes, 1 of them done" \
    "$tmp/a3.err" || fail "no wait line: $(cat "$tmp/a3.err")"
[ -f "$d/report.json" ] || fail "no report after the wait"
# ... and a signal during the wait (SIGTERM at a job's end) stops it with a line, no report
d=$tmp/w1
mkdir "$d" && cp "$tmp"/r1/tpn-b-*.tprof "$d/tpn-z-12345.tprof"
TRAINPROF_SUMMARIZE_LIMIT_S=60 node tpn-a "$TP" run -q -o "$d" -- torchrun --nnodes=2 \
    "$LM" --steps 3 >/dev/null 2>"$tmp/w1.err" &
pa=$!
i=0
until grep -q "rank summaries written" "$tmp/w1.err" 2>/dev/null || [ $i -ge 100 ]; do
    sleep 0.1
    i=$((i + 1))
done
sleep 0.3
pid=$(pgrep -f "run -q -o $d -- torchrun") || fail "no run to signal: $(cat "$tmp/w1.err")"
kill -TERM "$pid"
wait $pa
[ $? -eq 143 ] || fail "the signalled wait's status: $(cat "$tmp/w1.err")"
grep -q "signal 15: stopped waiting for the other nodes after [0-9.]* s, and no report" \
    "$tmp/w1.err" || fail "the signalled wait: $(cat "$tmp/w1.err")"
[ -f "$d/report.json" ] && fail "a report after the signal"

# 3a. the mark of an earlier job's node, beside its rank file: said as the run starts
d=$tmp/r3a
mkdir "$d" && cp "$tmp"/r1/tpn-b-*.tprof "$d/tpn-y-12345.tprof" && : >"$d/.trainprof-run-tpn-y.done"
TRAINPROF_SUMMARIZE_LIMIT_S=2 node tpn-a "$TP" run -q -o "$d" -- torchrun --nnodes=2 "$LM" \
    --steps 3 >/dev/null 2>"$tmp/a3a.err" || fail "run r3a: $(cat "$tmp/a3a.err")"
grep -q "$d holds the marks of 1 node (tpn-y) done with an earlier run on every node" \
    "$tmp/a3a.err" || fail "no line on the earlier job's mark: $(cat "$tmp/a3a.err")"

# 3c. rank 0 told on two nodes (two jobs in one directory): each node writes the report, and
#     says so
d=$tmp/r3c
RDZV=$tmp/rdzv3c node tpn-a "$TP" run -q -o "$d" -- torchrun --nnodes=2 --node-rank=0 "$LM" \
    --steps 10 >/dev/null 2>"$tmp/c3a.err" &
pa=$!
RDZV=$tmp/rdzv3c node tpn-b "$TP" run -q -o "$d" -- torchrun --nnodes=2 --node-rank=0 "$LM" \
    --steps 10 >/dev/null 2>"$tmp/c3b.err" || fail "r3c b: $(cat "$tmp/c3b.err")"
wait $pa || fail "r3c a: $(cat "$tmp/c3a.err")"
cat "$tmp/c3a.err" "$tmp/c3b.err" >"$tmp/c3.err"
[ "$(grep -c "rank 0 was told to processes on tpn-[ab] and on tpn-[ab]: two jobs in one directory" "$tmp/c3.err")" -eq 2 ] ||
    fail "two ranks 0: $(cat "$tmp/c3.err")"

# 3b. a directory each node has for itself: no wait, and each node reports its own ranks
RDZV=$tmp/rdzv3 node tpn-a "$TP" run -q -o "$tmp/own-a" -- torchrun --nnodes=2 --node-rank=0 \
    "$LM" --steps 10 >/dev/null 2>"$tmp/oa.err" &
pa=$!
RDZV=$tmp/rdzv3 node tpn-b "$TP" run -q -o "$tmp/own-b" -- torchrun --nnodes=2 --node-rank=1 \
    "$LM" --steps 10 >/dev/null 2>"$tmp/ob.err" || fail "own-b: $(cat "$tmp/ob.err")"
wait $pa || fail "own-a: $(cat "$tmp/oa.err")"
for x in a b; do
    grep -q "no other node's rank files in $tmp/own-$x (a directory the nodes do not share?): its report covers this node alone" \
        "$tmp/o$x.err" || fail "own-$x: $(cat "$tmp/o$x.err")"
    [ -f "$tmp/own-$x/report.json" ] || fail "own-$x: no report"
done

# 4. the locks: while the nodes' runs hold a directory, a run of one node is refused, and so
#    is a second run on a host that has one; a node's run where its host already wrote files
d=$tmp/r4
node tpn-a "$TP" run -q -o "$d" -- torchrun --nnodes=2 sleep 3 >/dev/null 2>&1 &
pa=$!
sleep 1
"$TP" run -q -o "$d" -- true >/dev/null 2>"$tmp/e1" && fail "a run of one node was let in"
grep -q "is in use by the trainprof runs of a job run on every node" "$tmp/e1" ||
    fail "one node: $(cat "$tmp/e1")"
node tpn-a "$TP" run -q -o "$d" -- torchrun --nnodes=2 true >/dev/null 2>"$tmp/e2" &&
    fail "a second run on one host was let in"
grep -q "in use by another trainprof run on this host" "$tmp/e2" || fail "same host: $(cat "$tmp/e2")"
wait $pa
d=$tmp/r1
node tpn-b "$TP" run -q -o "$d" -- torchrun --nnodes=2 true >/dev/null 2>"$tmp/e3" &&
    fail "a node's run over its host's files was let in"
grep -q "already holds rank files from another run on this host" "$tmp/e3" ||
    fail "old files: $(cat "$tmp/e3")"
d=$tmp/r4b
node tpn-a "$TP" run -q -o "$d" -- sh -c "\"$LM\" --steps 3; sleep 2" >/dev/null 2>&1 &
pa=$!
sleep 1
node tpn-b "$TP" run -q -o "$d" -- torchrun --nnodes=2 true >/dev/null 2>"$tmp/e4" &&
    fail "a node's run was let in beside a run of one node"
grep -q "is in use by a trainprof run of one node" "$tmp/e4" || fail "beside one: $(cat "$tmp/e4")"
# a job on every node whose node count was not seen: each node's run is a run of one node, and
# the one kept out by another host's run, or by other hosts' files, is told of --nodes
node tpn-b "$TP" run -q -o "$d" -- true >/dev/null 2>"$tmp/e5" && fail "a second run of one node"
grep -q "in use by another trainprof run (pid [0-9]* on host tpn-a holds .*give each node's run --nodes N" \
    "$tmp/e5" || fail "another host's run: $(cat "$tmp/e5")"
wait $pa
node tpn-b "$TP" run -q -o "$d" -- true >/dev/null 2>"$tmp/e6" && fail "a run over another's files"
grep -q "already holds rank files of other hosts; choose another -o DIR; or, if this is one node" \
    "$tmp/e6" || fail "other hosts' files: $(cat "$tmp/e6")"

# 5. torchrun's --nnodes in its forms: a run on every node says so by its own stage's log
k=0
for args in "--nnodes=2" "--nnodes 2" "--nnodes=2:4" "--nproc-per-node 1 --nnodes 2" \
    "--nnodes=1" "--standalone --nnodes=2" "--nnodes=1:1" "--nnodes=x" "--nn=2" \
    "--stan --nnodes=2"; do
    k=$((k + 1))
    d=$tmp/p$k
    # shellcheck disable=SC2086 # the options' words, split on purpose
    TRAINPROF_SUMMARIZE_LIMIT_S=1 node tpn-a "$TP" run -q -o "$d" -- torchrun $args "$LM" \
        --steps 3 >/dev/null 2>"$tmp/p.err" || fail "torchrun $args: $(cat "$tmp/p.err")"
    case $args in
    *=1 | *stan* | *1:1 | *=x) want=0 ;;
    *) want=1 ;;
    esac
    got=0
    [ -f "$d/summarize-tpn-a.log" ] && got=1
    [ "$got" = "$want" ] || fail "torchrun $args: a run on every node: $got, not $want"
done
# a launcher command for the stage is not used: each node's run summarises its own files
d=$tmp/l1
TRAINPROF_SUMMARIZE_LIMIT_S=1 node tpn-a "$TP" run -q --summarize-with 'srun -N 2' -o "$d" -- \
    torchrun --nnodes=2 "$LM" --steps 3 >/dev/null 2>"$tmp/l1.err" || fail "l1: $(cat "$tmp/l1.err")"
grep -q "summarize-with 'srun -N 2' not used: each node's run summarises its own rank files" \
    "$tmp/l1.err" || fail "launcher command: $(cat "$tmp/l1.err")"
[ -f "$d/summarize-tpn-a.log" ] || fail "no stage of this node beside a launcher command"
# torchrun's default from PET_NNODES (not when --nnodes says otherwise), and its module
# behind python's own options
for form in "PET_NNODES=2:torchrun" "PET_NNODES=2:torchrun --nnodes=1" \
    "PET_NNODES=2 PET_STANDALONE=1:torchrun" \
    "X=1:python -u -W ignore -m torch.distributed.run --nnodes=2"; do
    k=$((k + 1))
    d=$tmp/p$k
    # shellcheck disable=SC2086 # the words, split on purpose
    TRAINPROF_SUMMARIZE_LIMIT_S=1 node tpn-a env ${form%%:*} "$TP" run -q -o "$d" -- \
        ${form#*:} "$LM" --steps 3 >/dev/null 2>"$tmp/p.err" || fail "$form: $(cat "$tmp/p.err")"
    case $form in *nnodes=1 | *STANDALONE*) want=0 ;; *) want=1 ;; esac
    got=0
    [ -f "$d/summarize-tpn-a.log" ] && got=1
    [ "$got" = "$want" ] || fail "$form: a run on every node: $got, not $want"
done
# after the script, --nnodes is the script's; --nodes N says it for any launcher
d=$tmp/q1
TRAINPROF_SUMMARIZE_LIMIT_S=1 node tpn-a "$TP" run -q -o "$d" -- torchrun "$LM" --steps 3 \
    --nnodes=2 >/dev/null 2>&1
[ -f "$d/summarize-tpn-a.log" ] && fail "--nnodes after the script was read"
d=$tmp/q2
RANK=0 TRAINPROF_SUMMARIZE_LIMIT_S=1 node tpn-a "$TP" run -q --nodes 2 -o "$d" -- "$LM" \
    --steps 3 >/dev/null 2>"$tmp/q2.err" || fail "--nodes 2: $(cat "$tmp/q2.err")"
[ -f "$d/summarize-tpn-a.log" ] || fail "--nodes 2 did not run on every node: $(cat "$tmp/q2.err")"

# 6. rank 0's node does not wait for its own mark when it cannot make it (here its job left a
#    symbolic link loop at the mark's path; on a full disk, or out of inodes, the same); the
#    other node, whose stage cannot run (its log's name is taken by a directory), does not
#    claim summaries
d=$tmp/m1
mkdir -p "$d/summarize-tpn-b.log"
RDZV=$tmp/rdzvm1 TRAINPROF_SUMMARIZE_LIMIT_S=20 node tpn-a "$TP" run -q -o "$d" -- torchrun \
    --nnodes=2 sh -c \
    "\"$LM\" --steps 3 && ln -s .trainprof-run-tpn-a.done \"$d/.trainprof-run-tpn-a.done\"" \
    >/dev/null 2>"$tmp/m1a.err" &
pa=$!
RDZV=$tmp/rdzvm1 node tpn-b "$TP" run -q -o "$d" -- torchrun --nnodes=2 --node-rank=1 "$LM" \
    --steps 3 >/dev/null 2>"$tmp/m1b.err" || fail "m1 node b: $(cat "$tmp/m1b.err")"
wait $pa || fail "m1 node a: $(cat "$tmp/m1a.err")"
grep -q "cannot mark this node done" "$tmp/m1a.err" || fail "m1: the mark was made: $(cat "$tmp/m1a.err")"
grep -q "the runs of the job.s 2 nodes are done" "$tmp/m1a.err" ||
    fail "rank 0's node waited for itself: $(cat "$tmp/m1a.err")"
grep -q "no first stage: cannot create" "$tmp/m1b.err" || fail "m1 b's stage: $(cat "$tmp/m1b.err")"
grep -q "this node's rank files in $d; the report is written" "$tmp/m1b.err" ||
    fail "m1 b claims summaries: $(cat "$tmp/m1b.err")"

# 7. the node's own stage is no task of the launcher that started `trainprof run` (srun
#    --ntasks-per-node=1 leaves SLURM_PROCID and SLURM_NTASKS, mpirun OMPI_COMM_WORLD_*):
#    it summarises every file of its host
d=$tmp/s1
SLURM_PROCID=1 SLURM_NTASKS=2 OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 \
    node tpn-a "$TP" run -q --nodes 2 -o "$d" -- sh -c "\"$LM\" --steps 3 & \"$LM\" --steps 3; wait" \
    >/dev/null 2>"$tmp/s1.err" || fail "under srun: $(cat "$tmp/s1.err")"
grep -q "^trainprof summarize: 2 of 2 files summarised (2 written" "$d/summarize-tpn-a.log" ||
    fail "the node's stage took itself for a task: $(cat "$d/summarize-tpn-a.log")"
echo "PASS"
