#!/bin/sh
# report_pin.sh TRAINPROF SRCDIR — report.json byte for byte on a few rank files of the fuzz
# corpus (tests/fuzz/corpus/rankfile: a GPU run with a gpu_busy finding, a run with exposed
# communication, a run whose GPU records stop, a two-rank MPI run), against the documents
# kept in tests/report_pin/. The report is computed from typed results and written by the
# section writers: this pins the whole document (keys, order, numbers), so a change in either
# shows here. The source directory in paths and the version are replaced by placeholders.
# Regenerate after an intended change: REPORT_PIN_UPDATE=1 sh report_pin.sh TRAINPROF SRCDIR
set -u
TP=$1 SRC=$2
tmp=$(mktemp -d "${TPROF_TEST_TMP:-/tmp}/reportpin-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
rc=0
for name in synth_html.tprof synth_comm-exposed.tprof synth_report-gpu-stop.tprof \
            char_lm_mpi_2ranks.tprof; do
    in="$SRC/tests/fuzz/corpus/rankfile/$name"
    want="$SRC/tests/report_pin/$name.json"
    "$TP" report "$in" --format json >"$tmp/raw.json" || { echo "FAIL: report $name"; rc=1; continue; }
    sed -e "s|\"$SRC/tests/fuzz/corpus/rankfile/|\"@CORPUS@/|g" \
        -e 's|^\(\t"trainprof_version":\t\)".*"|\1"@VERSION@"|' "$tmp/raw.json" >"$tmp/got.json"
    if [ "${REPORT_PIN_UPDATE:-0}" = 1 ]; then
        cp "$tmp/got.json" "$want"
        continue
    fi
    if ! cmp -s "$want" "$tmp/got.json"; then
        echo "FAIL: report.json of $name differs from tests/report_pin/$name.json:"
        diff -u "$want" "$tmp/got.json" | head -40
        rc=1
    fi
done
[ $rc = 0 ] && echo "report_pin: 4 documents identical"
exit $rc
