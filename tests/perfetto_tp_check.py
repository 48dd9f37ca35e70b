"""perfetto_tp_check.py TRACE SLICES INSTANTS COUNTERS: the `perfetto` Python package's trace
processor opens a trainprof Perfetto trace and finds SLICES slices of non-zero duration,
INSTANTS of none, and COUNTERS counter values. Exit 77 (skipped) when the package is not
importable or its trace processor cannot start here; it is not a dependency of trainprof."""
import sys

try:
    from perfetto.trace_processor import TraceProcessor
except ImportError:
    print("the perfetto Python package is not importable: skipped")
    sys.exit(77)


def main():
    path, slices, instants, counters = sys.argv[1], *map(int, sys.argv[2:5])
    try:
        tp = TraceProcessor(trace=path)
    except Exception as e:  # the package fetches its trace_processor binary when it lacks one
        print("the perfetto trace processor cannot start here (%s): skipped" % str(e).splitlines()[0])
        sys.exit(77)
    got = {
        "slices": next(iter(tp.query("select count(*) as n from slice where dur > 0"))).n,
        "instants": next(iter(tp.query("select count(*) as n from slice where dur = 0"))).n,
        "counters": next(iter(tp.query("select count(*) as n from counter"))).n,
    }
    tp.close()
    want = {"slices": slices, "instants": instants, "counters": counters}
    if got != want:
        print("FAIL: trace processor counts %s, want %s" % (got, want))
        sys.exit(1)
    print("ok: %s" % got)


main()
