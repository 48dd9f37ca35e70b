#!/bin/sh
# The concurrency tests (ctest label tsan: rings, flusher, fork, MPI, NCCL, NVML sampler,
# metrics) run again while one spinning process per online CPU keeps every core busy. A
# test whose timing holds only on an idle machine (a sleep standing in for a handshake, a
# bound too tight for a descheduled thread) fails here instead of now and then in CI.
# Usage: suite_under_load.sh BUILD_DIR
set -u
build=$1
ncpu=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
pids=""
stop() { [ -n "$pids" ] && kill $pids 2>/dev/null; wait 2>/dev/null; }
trap stop EXIT INT TERM
i=0
while [ "$i" -lt "$ncpu" ]; do
  sh -c 'while :; do :; done' &
  pids="$pids $!"
  i=$((i + 1))
done
cd "$build" || exit 1
ctest -L tsan -E '^suite_under_load$' --output-on-failure -j 2
