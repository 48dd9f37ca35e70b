#!/bin/sh
# NVTX emission: with another NVTX tool attached (a fake Nsight) and no trainprof session,
# the API's ranges, domain range, start/end, mark and timer arrive at that tool, in order;
# with a trainprof session recording, nothing goes to the tool.
set -eu
PROG=$1 TOOL=$2 DIR=$3
rm -rf "$DIR"; mkdir -p "$DIR"
LOG=$DIR/tool.log
env -u TRAINPROF_DIR NVTX_INJECTION64_PATH="$TOOL" FAKE_NVTX_LOG="$LOG" "$PROG" >/dev/null
cat > "$DIR/expected" <<'EXP'
init
push api_push
pop
dcreate mydom
dpush mydom dom_push 3
dpop mydom
start api_start 1000
end 1000
mark api_mark
dcreate trainprof
dcategory trainprof 1 timers
dstart trainprof fwd 1 1001
dend trainprof 1001
EXP
diff -u "$DIR/expected" "$LOG"
# recording: the variable names another tool only for this check; trainprof records and
# the tool is never loaded
rm -f "$LOG"
TRAINPROF_DIR="$DIR/rec" NVTX_INJECTION64_PATH="$TOOL" FAKE_NVTX_LOG="$LOG" "$PROG" >/dev/null
test ! -e "$LOG"
ls "$DIR"/rec/*.tprof >/dev/null
echo "nvtx emission ok"
