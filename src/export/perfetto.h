/*
 * perfetto.h — a run as a native Perfetto trace: the protobuf `Trace` of Perfetto's
 * published protos (google/perfetto, protos/perfetto/trace/trace.proto and what it
 * includes), which ui.perfetto.dev and trace_processor open. Unlike the Chrome JSON
 * (chrome.h), a protobuf trace holds each name once (interned) and each event in a few
 * bytes, for runs whose JSON is too large to open.
 */
#ifndef TPROF_PERFETTO_H
#define TPROF_PERFETTO_H

#include <stdint.h>
#include <stdio.h>

#include "analysis/model.h"
#include "export/chrome.h"

/* What one export wrote (for the command's summary, the tests and the bench). */
typedef struct tp_perfetto_counts {
    uint64_t slices;   /* TYPE_SLICE_BEGIN events (each has its TYPE_SLICE_END) */
    uint64_t counters; /* TYPE_COUNTER events */
    uint64_t instants; /* TYPE_INSTANT events */
    uint64_t tracks;   /* TrackDescriptors */
    uint64_t packets;  /* TracePackets, all of them */
    uint64_t bytes;    /* bytes written to out */
} tp_perfetto_counts;

/* Writes the merged trace of `run` to out: the same processes, events, times (the aligned
 * clock of the report, multi-host offsets applied, as absolute ns: baseTimeNanoseconds +
 * the Chrome trace's ts) and selection (opts: ranks, steps, time) as tp_export_chrome, so
 * that both hold the same number of slices, counters and instants.
 *
 * Tracks: a process track per process (pid as in the Chrome trace: the rank for ranks),
 * a thread track per thread, a track per GPU device with one child per stream (kernels,
 * copies, memsets), a track per communicator (collectives and point-to-point ops), a
 * "CUDA API" child track of each thread that made runtime calls, one track of its own per
 * async range (a range that does not nest on its thread, or a start/end range), and a
 * counter track per counter name per process. Event names and categories are interned
 * (one packet sequence, trusted_packet_sequence_id 1).
 *
 * Streamed: each TracePacket is written as it is built; beyond what the loaded model holds,
 * memory is one packet, the table of distinct names (at most about 64 MiB: past that the
 * names are interned anew), and one track's sort order (as the Chrome export). `run` may be
 * slim, as tp_export_chrome says; the trace is then the whole run's, byte for byte. counts
 * (may be NULL) receives what was written. Returns 0 or a negative tprof_err: TPROF_ERR_IO
 * when writing fails (or a slim process's file can no longer be read), TPROF_ERR_NOT_FOUND
 * when the selection matches nothing (as tp_export_chrome). Single-threaded; out is the
 * caller's. */
int tp_export_perfetto(const tp_run *run, FILE *out, const tp_export_opts *opts,
                       tp_perfetto_counts *counts);

#endif /* TPROF_PERFETTO_H */
