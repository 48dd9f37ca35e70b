#!/bin/sh
# A launcher that exits before its ranks (as mpirun does on SIGTERM): `trainprof run` waits for
# the processes still writing rank files before it reports, so the report holds the whole run
# of the orphaned rank (400 steps, file complete), not a file cut short. Timing-bound (the
# rank must outlive the launcher and finish within the wait): not run under ASan.
set -eu
TP=$1 LM=$2 DIR=$3
rm -rf "$DIR"
export TRAINPROF_NVML_HZ=0 # no node sampler file: the only .tprof is the rank's
# the launcher leaves once its rank has opened its file (at most 20 s), the rank runs on
"$TP" run --quiet -o "$DIR" -- sh -c "\"$LM\" --steps 400 --log-every 1000 >/dev/null &
    i=0; while [ \$i -lt 200 ] && ! ls \"$DIR\"/*.tprof >/dev/null 2>&1; do sleep 0.1; i=\$((i+1)); done" \
    > "$DIR.log" 2>&1
grep -q "waiting for 1 process still writing rank files" "$DIR.log"
python3 - "$DIR" <<'PY'
import json, sys
rep = json.load(open(sys.argv[1] + "/report.json"))
ranks = [p for p in rep["processes"] if p["role"] == "rank"]
assert len(ranks) == 1 and ranks[0]["complete"], rep["processes"]
assert rep["ranks"][0]["steps"]["count"] == 400, rep["ranks"][0]["steps"]
PY
