"""perfetto_python_check.py TRACE SLICES COUNTERS INSTANTS: the `perfetto` Python package on a
trainprof Perfetto trace. Its copy of Perfetto's full trace proto (perfetto_trace_pb2) must
parse the file with no field it does not know, and find SLICES TYPE_SLICE_BEGIN events (as
many TYPE_SLICE_END), COUNTERS TYPE_COUNTER and INSTANTS TYPE_INSTANT; then, when its trace
processor can start here (it fetches a binary it lacks), the trace processor must find SLICES
slices of non-zero duration, INSTANTS of none and COUNTERS counter values. Exit 77 (skipped)
when the package is not importable; it is not a dependency of trainprof."""
import collections
import sys

try:
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace
    from perfetto.trace_processor import TraceProcessor
except ImportError:
    print("the perfetto Python package is not importable: skipped")
    sys.exit(77)


def unknown_fields(m):
    """Fields of m and its submessages that the schema does not name."""
    try:
        from google.protobuf import unknown_fields as uf
        n = len(uf.UnknownFieldSet(m))
    except ImportError:
        n = len(m.UnknownFields())
    for fd, v in m.ListFields():
        if fd.message_type is None:
            continue
        rep = getattr(fd, "is_repeated", None)
        if rep is None:
            rep = fd.label == fd.LABEL_REPEATED
        for x in (v if rep else [v]):
            n += unknown_fields(x)
    return n


def main():
    path = sys.argv[1]
    slices, counters, instants = map(int, sys.argv[2:5])
    trace = Trace()
    with open(path, "rb") as f:
        trace.ParseFromString(f.read())
    types = collections.Counter()
    unknown = 0
    for p in trace.packet:
        unknown += unknown_fields(p)
        if p.HasField("track_event"):
            types[p.track_event.Type.Name(p.track_event.type)] += 1
    got = (types["TYPE_SLICE_BEGIN"], types["TYPE_SLICE_END"], types["TYPE_COUNTER"],
           types["TYPE_INSTANT"], unknown)
    want = (slices, slices, counters, instants, 0)
    if got != want:
        print("FAIL: full proto: begin, end, counter, instant, unknown %s, want %s" % (got, want))
        sys.exit(1)
    print("ok: %d packets parse with Perfetto's full trace proto: %s" % (len(trace.packet), got))
    try:
        tp = TraceProcessor(trace=path)
    except Exception as e:  # no trace_processor binary and no way to fetch one
        print("the trace processor cannot start here (%s): not checked" %
              str(e).splitlines()[0][:120])
        return
    q = lambda sql: next(iter(tp.query(sql))).n
    got = (q("select count(*) as n from slice where dur > 0"),
           q("select count(*) as n from counter"),
           q("select count(*) as n from slice where dur = 0"))
    tp.close()
    if got != (slices, counters, instants):
        print("FAIL: trace processor: slices, counters, instants %s, want %s" %
              (got, (slices, counters, instants)))
        sys.exit(1)
    print("ok: trace processor %s" % (got,))


main()
