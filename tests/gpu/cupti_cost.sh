#!/bin/bash
# Builds tests/gpu/cupti_cost.cu on the GPU machine and runs its modes interleaved, 3 rounds,
# plus the same launch loop under libtrainprof's injection (floor kinds as bench/gpu_overhead).
. "$(dirname "$0")/common.sh"
SITE=$(python3 -c "import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))" 2>/dev/null)
CUPTI_LIB=$(find $SITE /usr/local/cuda* /usr/local/lib/python3* /usr/lib/python3* -name 'libcupti.so.13*' 2>/dev/null | head -1)
CUPTI_DIR=$(dirname "$CUPTI_LIB")
echo "cupti dir: $CUPTI_DIR" >> $S
export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64:$CUPTI_DIR
nvcc -O2 -o $W/cc tests/gpu/cupti_cost.cu -I/usr/local/cuda/include -L/usr/local/cuda/lib64 \
    -Xlinker $CUPTI_LIB >> $S 2>&1 || { echo "build failed" >> $S; exit 1; }
inj() { CUDA_INJECTION64_PATH=$PWD/$C/libtrainprof.so TRAINPROF_DIR=$W/inj_$1 TRAINPROF_SAMPLE_HZ=0 \
        TRAINPROF_CUPTI_KINDS=$2 $W/cc none ${PER:-500} | sed "s/^none        /inj:$1/"; }
for r in 1 2 3; do
    for m in none act_kernel act_runtime act_both cb_empty cb_record cb_kernel; do
        timeout 60 $W/cc $m ${PER:-500} >> $S 2>&1
    done
    inj kernel kernel >> $S 2>&1
    inj kernel+runtime kernel,runtime >> $S 2>&1
    inj all "" >> $S 2>&1
done
