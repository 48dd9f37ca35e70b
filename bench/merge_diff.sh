#!/bin/bash
# Differential check of the report's cross-rank merge: random runs (gen_merge_run) reported by
# two builds of trainprof, whose reports must be byte for byte the same. Run it when the merge
# (clocks.c, stragglers.c, the slim ranks' comm memos in report.c) is rewritten for speed or
# memory without meaning to change what it finds.
#
#   bench/merge_diff.sh OLD_TRAINPROF NEW_TRAINPROF GEN FIRST LAST [heavy]
#
# GEN: build/bench/gen_merge_run. For each seed: report --format json; every fifth seed also
# text, HTML, --warmup 0 and 3, and the path through summaries (each build summarises its own
# copy of the run directory; the directory's name is masked). Prints "DIFF <what> <seed>" for
# each difference, "ok <seed>" otherwise; exits 1 when any differed.
set -u
OLD=$1 NEW=$2 GEN=$3 FIRST=$4 LAST=$5 MODE=${6:-}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
bad=0
same() { # what seed fileA fileB
    if ! cmp -s "$3" "$4"; then echo "DIFF $1 $2"; bad=1; return 1; fi
}
for s in $(seq "$FIRST" "$LAST"); do
    d=$W/run
    rm -rf "$d" "$d.o" "$d.n"
    mkdir "$d"
    "$GEN" "$d" "$s" $MODE || { echo "GENFAIL $s"; bad=1; continue; }
    "$OLD" report "$d" --format json >"$W/o" 2>"$W/oe"; echo "rc $?" >>"$W/oe"
    "$NEW" report "$d" --format json >"$W/n" 2>"$W/ne"; echo "rc $?" >>"$W/ne"
    same json "$s" "$W/o" "$W/n" && same stderr "$s" "$W/oe" "$W/ne" || continue
    if ((s % 5 == 0)); then
        for a in "--format text" "--format html" "--format json --warmup 0" \
                 "--format json --warmup 3"; do
            "$OLD" report "$d" $a >"$W/o" 2>&1
            "$NEW" report "$d" $a >"$W/n" 2>&1
            same "${a// /}" "$s" "$W/o" "$W/n"
        done
        cp -r "$d" "$d.o"
        cp -r "$d" "$d.n"
        "$OLD" summarize "$d.o" >/dev/null 2>&1
        "$NEW" summarize "$d.n" >/dev/null 2>&1
        "$OLD" report "$d.o" --format json 2>&1 | sed "s#$d.o#DIR#g" >"$W/o"
        "$NEW" report "$d.n" --format json 2>&1 | sed "s#$d.n#DIR#g" >"$W/n"
        same summaries "$s" "$W/o" "$W/n"
    fi
    echo "ok $s"
done
exit $bad
