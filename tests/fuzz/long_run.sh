#!/bin/sh
# long_run.sh BIN CORPUS_DIR SECONDS WORKERS [CPU_LIST] — the long fuzzing run of one target
# (tests/fuzz/README.md, "A long run"): WORKERS libFuzzer processes share CORPUS_DIR (new
# inputs are added to it) for SECONDS each, pinned to CPU_LIST (taskset syntax) when given.
# Prints each worker's executions and the total, the coverage of the last report, and every
# crash, leak, timeout or out-of-memory input left beside the logs; exits 1 when there is one.
# Scratch files of the rank-file target go to a directory of the run's own on /dev/shm.
set -u
bin=$1 corpus=$2 secs=$3 n=$4 cpus=${5:-}
[ -x "$bin" ] && [ -d "$corpus" ] || { echo "usage: $0 BIN CORPUS_DIR SECONDS WORKERS [CPUS]"; exit 2; }
logs=$(mktemp -d "${TMPDIR:-/tmp}/fuzz-long.XXXXXX")
shm=/dev/shm; [ -d $shm ] && [ -w $shm ] || shm=$logs
scratch=$(mktemp -d "$shm/tprof-fuzz-long.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
pin=""; [ -n "$cpus" ] && pin="taskset -c $cpus"
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
corpus=$(cd "$corpus" && pwd)
# -jobs=N -workers=N: N processes at once, each writing fuzz-<i>.log in the current directory
(cd "$logs" && ASAN_OPTIONS=${ASAN_OPTIONS:-malloc_context_size=0} TPROF_FUZZ_TMP=$scratch \
    $pin "$bin" -jobs="$n" -workers="$n" -max_total_time="$secs" -timeout=10 \
    -malloc_limit_mb=128 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$logs/" \
    "$corpus" > "$logs/main.log" 2>&1)
total=0
for f in "$logs"/fuzz-*.log; do
    e=$(awk '/stat::number_of_executed_units/ {print $2}' "$f")
    echo "$(basename "$f"): ${e:-no final statistics} executions; $(grep -E '(pulse|DONE) ' "$f" | tail -1 | awk '{print $3, $4, $5, $6}')"
    total=$((total + ${e:-0}))
done
echo "total: $total executions of $(basename "$bin") by $n workers in $secs s; logs in $logs"
bad=$(ls "$logs" | grep -E '^(crash|leak|timeout|oom|slow-unit)-' || true)
if [ -n "$bad" ]; then echo "FAILING INPUTS: $bad"; exit 1; fi
echo "no crash, leak, timeout or out-of-memory input"
