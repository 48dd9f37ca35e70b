#!/bin/bash
# Device identity and Timers on a GPU (one call): A the rank file names its GPUs without CUPTI
# (TRAINPROF_CUPTI=0: the driver the program initialised is asked, capture/cuda_devices.c), and
# with CUPTI once (no duplicate keys); B CUDA-event Timers on torch's current stream
# (timer_stream.py); C the report's CUPTI and driver overhead lines; then, unless LIMIT=0, the
# overhead benchmark (gpu_overhead_two_gpus.sh, MODES) on each GPU. PARTS picks A and B (default AB).
. "$(dirname "$0")/common.sh"
python_module
PARTS=${PARTS:-AB}
[[ $PARTS == *A* ]] && for cupti in 0 1; do
    say "A: TRAINPROF_CUPTI=$cupti trainprof run -- train_gpt.py --steps 20"
    TRAINPROF_CUPTI=$cupti timeout 120 $TP run -o $W/a$cupti -- python3 examples/pytorch/train_gpt.py \
        --steps 20 > $W/a$cupti.out 2>&1; lap $?
    grep -a -h -o 'cuda\.[0-9]*\.[a-z_]*.\{0,2\}[A-Za-z0-9 .-]*' $W/a$cupti/*.tprof | sort | uniq -c | head -14 >> $S
    grep -E "cupti |GPU [0-9] \(|memory peak|overhead|driver time|NVML GPU|GPU is not known" \
        $W/a$cupti/report.txt | head -10 >> $S
    cp $W/a$cupti/report.txt $OUT/report_cupti$cupti.txt
done
if [[ $PARTS == *B* ]]; then
    say "B: timer_stream.py"
    PYTHONPATH=$PYD timeout 120 python3 tests/gpu/timer_stream.py >> $S 2>&1; lap $?
fi
bash "$(dirname "$0")/gpu_overhead_two_gpus.sh"
