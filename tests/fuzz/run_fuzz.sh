#!/bin/sh
# run_fuzz.sh BIN CORPUS [WHY-NOT] — the bounded libFuzzer run of one fuzz target in
# `make check` (tests/fuzz.cmake, tests/fuzz/README.md): every input of the kept corpus once,
# then fuzzing for TPROF_FUZZ_SECONDS (default 15) seconds. A crash, a sanitizer report, a
# leak, an input slower than 10 s, one allocation above 128 MiB (inputs are a few KiB: only
# a reader that believes a size or an id it read asks for that much) or 2 GiB in all fails
# the test; the input that did it is kept as <build>/testtmp/fuzz_<target>-crash-* (add it to
# the corpus with its fix).
# New inputs found go to a scratch directory, never into the repository's corpus.
# Exit 77 (skipped) when WHY-NOT says why there is no libFuzzer build, or BIN was not built.
bin=$1 corpus=$2 why=$3
if [ -n "$why" ]; then echo "SKIP: $why"; exit 77; fi
if [ ! -x "$bin" ]; then
    echo "SKIP: $bin not built (cmake --build <build> --target fuzzers; make check builds it)"
    exit 77
fi
[ -d "$corpus" ] || { echo "no corpus at $corpus"; exit 1; }
tmp=${TPROF_TEST_TMP:-${TMPDIR:-/tmp}}
mkdir -p "$tmp"
work=$(mktemp -d "$tmp/fuzz-run.XXXXXX") || exit 1
# the rank-file target writes each input as files: in memory where there is a tmpfs
shm=/dev/shm
[ -d "$shm" ] && [ -w "$shm" ] || shm=$work
scratch=$(mktemp -d "$shm/tprof-fuzz-run.XXXXXX") || exit 1
trap 'rm -rf "$work" "$scratch"' EXIT
name=$(basename "$bin")
mkdir "$work/new"
# libFuzzer's progress lines (INITED/NEW/REDUCE/pulse, the recommended dictionary) go to a log
# alone; every other line is shown as it comes, so that a failure's report comes within the
# first lines of the test's output (CI shows a failing test's head and the run's tail) and a
# run ctest kills still shows what it printed. Then the failing input itself, which a CI
# machine does not keep. -error_exitcode=1: libFuzzer's own default, 77, is ctest's "skipped"
# here (SKIP_RETURN_CODE), which would hide a leak or an abort it found.
log=$work/fuzz.log
touch "$work/stamp"
{
    TPROF_FUZZ_TMP=$scratch "$bin" -max_total_time="${TPROF_FUZZ_SECONDS:-15}" -timeout=10 \
        -malloc_limit_mb=128 -rss_limit_mb=2048 -error_exitcode=1 -print_final_stats=1 \
        -artifact_prefix="$tmp/$name-" "$work/new" "$corpus" 2>&1
    echo $? > "$work/rc"
} | tee "$log" |
    grep --line-buffered -Ev '^#[0-9]+[[:space:]]+(INITED|NEW|REDUCE|pulse|RELOAD)|^[[:space:]]*NEW_FUNC|^"'
rc=$(cat "$work/rc" 2>/dev/null || echo 1)
[ "$rc" -eq 0 ] && exit 0
echo "$name: exit $rc; its last progress line: $(grep -E '^#[0-9]+' "$log" | tail -n 1)"
# this run's inputs: written (or written again, for an input that failed before) since the stamp
find "$tmp" -maxdepth 1 -type f -name "$name-*" -newer "$work/stamp" | while read -r f; do
    echo "failing input $f ($(wc -c < "$f") bytes), base64 (decode: base64 -d > crash.bin;"
    echo "replay: build/fuzz/tests/$name crash.bin):"
    if [ "$(wc -c < "$f")" -le 65536 ]; then base64 "$f"; else echo "(over 64 KiB, not printed)"; fi
done
exit "$rc"
