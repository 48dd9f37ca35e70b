#!/bin/sh
# GPU identity, energy method and stream-order clipping on a real GPU machine (2 GPUs or
# more for part 1). Run from the repository root with the built binaries carried in $C:
#   C=.devcarry OUT=/tmp/out sh tests/gpu/gpu_identity.sh
# Writes $OUT/summary.txt; exit status 0 when every check that could run passed.
#
# 1. CUDA_VISIBLE_DEVICES=1,0: the rank's CUDA device 0 is NVML's GPU 1. The report (node
#    sampler's samples) must give the rank the GPU whose UUID nvidia-smi lists as GPU 1, as
#    CUDA device 0, and no other.
# 2. Energy: where the counter exists (Volta and newer) energy_method is "counter"; the
#    integral of the power samples over the same span is printed beside it (on an H200 it
#    read 15 % below the counter: docs/energy.md).
# 3. Clipping: on an ordinary job, the GPU records clipped to their stream's order and the
#    time removed are printed (expected: none or a negligible time).
# 4. MIG: only where a GPU is already in MIG mode (this script never changes it): with
#    CUDA_VISIBLE_DEVICES naming a MIG device, the rank file's cuda.0.uuid is that MIG
#    UUID, cuda.0.gpu_uuid its GPU's (the CUDA driver's cuDeviceGetUuid vs _v2), and the
#    report flags the GPU as shared by MIG instances.
. tests/gpu/common.sh
fail=0
check() { # check NAME CONDITION-EXIT-STATUS
    if [ "$2" -eq 0 ]; then echo "PASS $1" | tee -a $S; else echo "FAIL $1" | tee -a $S; fail=1; fi
}
nvidia-smi --query-gpu=index,uuid,name,mig.mode.current --format=csv,noheader > $W/gpus.txt 2>&1
cat $W/gpus.txt >> $S
NG=$(grep -c GPU- $W/gpus.txt)

say "1. CUDA_VISIBLE_DEVICES=1,0: the rank's GPU by UUID"
if [ "$NG" -ge 2 ]; then
    U1=$(awk -F', ' '$1 == 1 {print $2}' $W/gpus.txt)
    CUDA_VISIBLE_DEVICES=1,0 $TP run --quiet -o $W/rev -- \
        python3 examples/pytorch/train_gpt.py --steps 30 > $W/rev.txt 2>&1
    lap $?
    $TP report $W/rev --format json -o $W/rev.json
    python3 - "$W/rev.json" "$U1" >> $S 2>&1 <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))["ranks"][0]
g = r.get("nvml", {}).get("gpus", [])
print("rank 0 nvml gpus:", [(x.get("index"), x.get("uuid"), x.get("cuda_device")) for x in g])
print("gpu devices:", [(d.get("device"), d.get("uuid")) for d in r.get("gpu", {}).get("devices", [])])
ok = len(g) == 1 and g[0].get("uuid") == sys.argv[2] and g[0].get("cuda_device") == 0
sys.exit(0 if ok else 1)
EOF
    check "rank's GPU is NVML GPU 1 ($U1) as CUDA device 0" $?
else
    echo "SKIP: one GPU" | tee -a $S
fi

say "2. energy method"
$TP run --quiet -o $W/e -- python3 examples/pytorch/train_gpt.py --steps 60 > $W/e.txt 2>&1
lap $?
$TP report $W/e --format json -o $W/e.json
python3 - "$W/e.json" >> $S 2>&1 <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))["ranks"][0]
ok = True
for g in r.get("nvml", {}).get("gpus", []):
    m, e, p = g.get("energy_method"), g.get("energy_per_step_j"), g.get("energy_per_step_from_power_j")
    print("GPU", g.get("index"), "method", m, "J/step", e, "from power", p,
          "resolution ms", g.get("energy_resolution_ms"), "approximate", g.get("energy_approximate"),
          "unavailable", g.get("energy_unavailable"))
    # integrated power is an estimate (docs/energy.md): its distance from the counter is
    # printed, not judged; what must hold is that the method is named
    if m == "counter" and e and p:
        print("  integrated power / counter = %.3f" % (p / e))
    ok &= m in ("counter", "integrated_power")
sys.exit(0 if ok else 1)
EOF
check "energy named and consistent" $?

say "3. GPU records clipped to their stream's order"
python3 - "$W/e.json" >> $S 2>&1 <<'EOF'
import json, sys
g = json.load(open(sys.argv[1]))["ranks"][0].get("gpu", {})
print("records_clipped", g.get("records_clipped", 0), "records_clipped_ms", g.get("records_clipped_ms", 0),
      "kernel_ms_total", g.get("kernel_ms_total"))
EOF
grep -i "clipped" $W/e/report.txt >> $S 2>/dev/null

say "4. MIG"
MIG=$(nvidia-smi -L 2>/dev/null | sed -n 's/.*(UUID: \(MIG-[^)]*\)).*/\1/p' | head -1)
if [ -n "$MIG" ]; then
    CUDA_VISIBLE_DEVICES=$MIG $TP run --quiet -o $W/mig -- \
        python3 examples/pytorch/train_gpt.py --steps 20 > $W/mig.txt 2>&1
    lap $?
    $TP report $W/mig --format json -o $W/mig.json
    python3 - "$W/mig.json" "$MIG" $W/mig >> $S 2>&1 <<'EOF'
import glob, json, sys
r = json.load(open(sys.argv[1]))["ranks"][0]
g = r.get("nvml", {}).get("gpus", [])
print("nvml gpus:", [(x.get("index"), x.get("uuid"), x.get("shared_by_mig_instances"), x.get("mig_device")) for x in g])
print("gpu devices:", [(d.get("device"), d.get("uuid")) for d in r.get("gpu", {}).get("devices", [])])
ok = len(g) == 1 and g[0].get("shared_by_mig_instances") is True
sys.exit(0 if ok else 1)
EOF
    check "MIG device $MIG: its GPU found and flagged shared" $?
    strings $W/mig/*.tprof | grep -E "^cuda\.[0-9]+\.(uuid|gpu_uuid)|MIG-" | sort -u | head >> $S
else
    echo "SKIP: no GPU in MIG mode (MIG settings are left as they are)" | tee -a $S
fi
exit $fail
