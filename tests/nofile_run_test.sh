#!/bin/sh
# `trainprof run` of a job that could never create its rank file (its descriptor table full
# from its first event to its end): run says which process could not, and why, instead of
# "no process recorded anything". And a report that cannot be written (report.txt is a
# directory) is named as not written, not announced as there.
set -eu
TP=$1 PROG=$2 LM=$3 DIR=$4
rm -rf "$DIR" "$DIR.2"
export TRAINPROF_NVML_HZ=0 # no node sampler file: the job's file is the only one there
"$TP" run --quiet -o "$DIR" -- sh -c "ulimit -n 64; exec \"$PROG\"" > "$DIR.log" 2>&1 || true
cat "$DIR.log"
grep -q "could not create its rank file: Too many open files (EMFILE); it recorded nothing" \
    "$DIR.log"
if grep -q "no process recorded anything" "$DIR.log"; then exit 1; fi

mkdir -p "$DIR.2/report.txt"
"$TP" run --quiet -o "$DIR.2" -- "$LM" --steps 5 --log-every 1000 > "$DIR.2.log" 2>&1
cat "$DIR.2.log"
grep -q "rank files in $DIR.2; report.json, report.html written, report.txt not written" \
    "$DIR.2.log"
if grep -q "rank files and reports in" "$DIR.2.log"; then exit 1; fi
[ -s "$DIR.2/report.json" ]
