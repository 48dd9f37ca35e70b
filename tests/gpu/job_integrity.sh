#!/bin/bash
# That trainprof leaves a real GPU job as it was, and says true things about it, on a GPU
# machine, from the repository root, with the build carried in $C (tests/gpu/make_carry.sh)
# and Megatron-LM's public code (megatron/, pretrain_gpt.py, gpt_builders.py,
# model_provider.py from NVIDIA/Megatron-LM) in $MEG:
#   A  Megatron-LM pretrain_gpt.py, mock data, bare and under `trainprof run` (full capture),
#      ROUNDS rotated rounds (default 1): same exit status, bit-identical losses, the
#      iteration time of each (median of the rounds, spread, ratio), and the report's
#      honesty lines (dropped, clipped GPU records, write errors, energy method).
#   B  the stack depth of trainprof's threads in a CUDA job with CUPTI and NVML
#      (tests/metrics_stack_depth.c preloaded): the size src/core/threads.c gives them must
#      hold at least twice what they use.
#   C  fatal signals in a GPU job (SIGSEGV, SIGABRT, SIGUSR1 sent mid-training): the exit
#      status is the one the bare job gets, and the report names the rank that ended and
#      its last range.
#   D  Ctrl-C semantics: a CUDA job blocked in a read gets KeyboardInterrupt on SIGINT under
#      trainprof as it does bare.
# PARTS picks the parts (default ABCD). Everything lands in $OUT (summary.txt first).
. "$(dirname "$0")/common.sh"
PARTS=${PARTS:-ABCD}
MEG=${MEG:-.megatron}
ITERS=${ITERS:-30}
ROUNDS=${ROUNDS:-1}
{ nvidia-smi -L; python3 -c "import sys, torch; print(sys.version.split()[0], 'torch', torch.__version__)"; } >> $S 2>&1
python_module

meg_args="--mock-data --tokenizer-type NullTokenizer --vocab-size 32000
  --transformer-impl local --bf16 --num-layers 4 --hidden-size 1024 --num-attention-heads 16
  --seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 4 --global-batch-size 16
  --train-iters $ITERS --lr 1e-4 --min-lr 1e-5 --lr-decay-style cosine --log-interval 1
  --eval-iters 0 --eval-interval 100000 --no-gradient-accumulation-fusion
  --no-masked-softmax-fusion --no-bias-dropout-fusion --no-bias-gelu-fusion
  --no-persist-layer-norm --distributed-backend nccl --seed 1234 --log-throughput"
meg() { # meg LOG [trainprof run options --]: one Megatron run, 1 GPU
    local log=$1; shift
    (cd $MEG && PYTHONPATH=$PWD:${PYTHONPATH:-} timeout 400 "$@" torchrun --nproc_per_node=1 \
        --master_port=$((29500 + RANDOM % 1000)) pretrain_gpt.py $meg_args) > $log 2>&1
}
losses() { grep -o "lm loss: [0-9.E+-]*" "$1"; }
iter_ms() { # median "elapsed time per iteration (ms)" over iterations 11..
    grep -o "elapsed time per iteration (ms): [0-9.]*" "$1" | awk -F': ' 'NR>10{print $2}' |
        sort -n | awk '{a[NR]=$1} END{if(NR) print a[int((NR+1)/2)], "ms median of", NR}'
}

if [[ $PARTS == *A* ]]; then
    say "A: Megatron-LM bare and under trainprof run, $ROUNDS rotated round(s)"
    order="bare tp"
    for r in $(seq $ROUNDS); do
        for mode in $order; do
            if [ $mode = bare ]; then meg $W/meg_bare_$r.log
            else rm -rf $W/meg_run; meg $W/meg_tp_$r.log $TP run -o $W/meg_run --; fi
            rc=$?; lap $rc
            echo "round $r $mode: exit status $rc, $(iter_ms $W/meg_${mode}_$r.log)" >> $S
            iter_ms $W/meg_${mode}_$r.log | awk '{print $1}' >> $W/ms_$mode
        done
        [ "$order" = "bare tp" ] && order="tp bare" || order="bare tp"
    done
    for mode in bare tp; do # median of the rounds' medians, with their spread
        sort -n $W/ms_$mode | awk -v m=$mode '{a[NR]=$1} END{if(NR) printf "%s: %s ms/iter median of %d rounds (%s-%s)\n", m, a[int((NR+1)/2)], NR, a[1], a[NR]}' >> $S
    done
    paste $W/ms_bare $W/ms_tp | awk '$1>0{print $2/$1}' | sort -n | awk '{r[NR]=$1} END{if(NR) printf "ratio trainprof/bare per round: median %.3f (%.3f-%.3f)\n", r[int((NR+1)/2)], r[1], r[NR]}' >> $S
    nb=$(losses $W/meg_bare_1.log | wc -l)
    for r in $(seq $ROUNDS); do for mode in bare tp; do
        if [ "$nb" -gt 0 ] && cmp -s <(losses $W/meg_bare_1.log) <(losses $W/meg_${mode}_$r.log); then
            echo "losses round $r $mode: $nb iterations, bit-identical to round 1 bare" >> $S
        else
            echo "losses round $r $mode: DIFFER or missing (bare $nb lines)" >> $S
            tail -30 $W/meg_${mode}_$r.log >> $S
        fi
    done; done
    tail -5 $W/meg_tp_$ROUNDS.log >> $S
    if [ -f $W/meg_run/report.txt ]; then
        cp $W/meg_run/report.txt $OUT/megatron_report.txt
        cp $W/meg_run/report.json $OUT/megatron_report.json
        grep -i -E "dropped|clipped|write error|energy|ended|early|flag|invalid|MFU|busy" \
            $W/meg_run/report.txt | head -40 >> $S
    fi
fi

if [[ $PARTS == *B* ]]; then
    say "B: stack depth of trainprof's threads in a CUDA job (CUPTI + NVML)"
    rm -f $W/depth.txt
    STACK_DEPTH_OUT=$W/depth.txt \
        timeout 300 $TP run -o $W/depth_run --metrics-port 19464 -- env LD_PRELOAD=$PWD/$C/libmetrics_stack_depth.so:$PWD/$C/libtrainprof.so \
        python3 examples/pytorch/train_gpt.py --steps 30 > $W/depth.log 2>&1; lap $?
    cat $W/depth.txt >> $S 2>/dev/null || { echo "no depth lines"; tail -20 $W/depth.log; } >> $S
fi

if [[ $PARTS == *C* ]]; then
    say "C: fatal signals mid-training, bare and under trainprof run"
    for sig in ${SIGS:-SEGV ABRT USR1}; do
        for mode in bare tp; do
            job="python3 examples/pytorch/train_gpt.py --steps 100000"
            if [ $mode = bare ]; then
                $job > $W/sig_${sig}_$mode.log 2>&1 &
            else
                $TP run -o $W/sig_$sig --quiet -- $job > $W/sig_${sig}_$mode.log 2>&1 &
            fi
            p=$!
            sleep ${SLEEP:-25}
            pkill -$sig -f "^$job" # the job itself, never the trainprof command around it
            wait $p; echo "SIG$sig $mode: exit status $?" >> $S
        done
        $TP report $W/sig_$sig > $W/sig_$sig.txt 2>&1
        grep -i -E -A3 "ended early" $W/sig_$sig.txt | head -8 >> $S
    done
fi

if [[ $PARTS == *D* ]]; then
    say "D: SIGINT to a CUDA job blocked in a read"
    cat > $W/block.py <<'PY'
import os, signal, sys, time, torch
# a background job of a non-interactive shell starts with SIGINT ignored; a job in a
# terminal has Python's own handler, which this restores
signal.signal(signal.SIGINT, signal.default_int_handler)
x = torch.ones(1024, device="cuda"); torch.cuda.synchronize()
r, w = os.pipe()
print("ready", flush=True)
try:
    os.read(r, 1)
    print("read returned", flush=True); sys.exit(3)
except KeyboardInterrupt:
    print("KeyboardInterrupt", flush=True); sys.exit(4)
PY
    for mode in bare tp; do
        if [ $mode = bare ]; then python3 $W/block.py > $W/block_$mode.log 2>&1 &
        else $TP run -o $W/block_run --quiet -- python3 $W/block.py > $W/block_$mode.log 2>&1 & fi
        p=$!
        for i in $(seq 100); do grep -q ready $W/block_$mode.log 2>/dev/null && break; sleep 0.2; done
        t=$(date +%s%N)
        pkill -INT -f "^python3 $W/block.py"
        ( sleep 10; kill -9 $p 2>/dev/null ) & k=$!
        wait $p; rc=$?; kill $k 2>/dev/null
        echo "$mode: exit $rc after $(( ($(date +%s%N) - t) / 1000000 )) ms: $(tail -1 $W/block_$mode.log)" >> $S
    done
fi
say "done"
