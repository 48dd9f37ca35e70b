/*
 * config.h — the one table of the TRAINPROF_* environment variables the libraries read.
 *
 * Every variable the runtime libraries (libtrainprof.so, libtrainprof_mpi.so) read is one
 * row of TPROF__OPTIONS: its name, type, default, range and a one-line description. The
 * libraries read a variable only through tprof__env() (or core/config.c's parsers over it),
 * so `grep getenv(\"TRAINPROF` finds nothing else in src/; the same rows print the list of
 * `trainprof run --help` (tprof__config_print_env) and the table of docs/cli.md
 * (tprof__config_print_markdown; tests/test_config.c fails when the page differs).
 *
 * Header-only, so that the command line and libtrainprof_mpi.so (which links no internals of
 * libtrainprof.so) share it. Variables are read when used, not cached: `trainprof run` and
 * Python programs set them before the session starts, and a forked child reads them afresh.
 * Not for signal handlers (getenv is not async-signal-safe).
 */
#ifndef TPROF_CONFIG_H
#define TPROF_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Types: TEXT a string, read as given; UINT a non-negative decimal integer whose range is
 * min-max (max 0: no upper bound): core/config.c's reader clamps a value above max, a
 * session raises one below min to min, and the readers of their own (the metrics port, the
 * MPI communicator count) ignore a value outside the range; LEVEL error|warn|info|debug (or
 * 0-3); SET any value, even empty, turns it on.
 *
 * X(id, name, type, default (text, "" when none), min, max, description) */
#define TPROF__OPTIONS(X)                                                                    \
    X(DIR, "TRAINPROF_DIR", TEXT, "", 0, 0,                                                  \
      "output directory; without it (or TRAINPROF_NO_FILE=1) nothing is recorded")           \
    X(RUN_ID, "TRAINPROF_RUN_ID", TEXT, "", 0, 0, "run id in every rank file's header")      \
    X(ENABLE, "TRAINPROF_ENABLE", UINT, "1", 0, 1, "0: record nothing")                      \
    X(LOG, "TRAINPROF_LOG", LEVEL, "warn", 0, 3, "log level: error, warn, info or debug")    \
    X(RING_KB, "TRAINPROF_RING_KB", UINT, "4096", 64, 0, "per-thread event ring, KiB")       \
    X(MAX_THREADS, "TRAINPROF_MAX_THREADS", UINT, "1024", 1, 0,                              \
      "threads with a ring; later threads' events are counted as dropped")                   \
    X(FLUSH_MS, "TRAINPROF_FLUSH_MS", UINT, "50", 0, 0,                                      \
      "flush period, ms (SIGKILL loses at most this much)")                                  \
    X(COMPRESS, "TRAINPROF_COMPRESS", UINT, "1", 0, 19,                                      \
      "zstd level of the rank file's chunks (libzstd.so.1, loaded when found); 0 = plain")     \
    X(MAX_STRINGS, "TRAINPROF_MAX_STRINGS", UINT, "8192", 0, 16777216,                       \
      "interned names per thread")                                                           \
    X(NVTX_STRINGS_KB, "TRAINPROF_NVTX_STRINGS_KB", UINT, "262144", 0, 16777216,             \
      "memory for NVTX registered strings, KiB; those past it are counted and named "        \
      "\"(registered string past the limit)\"")                                              \
    X(SAMPLE_HZ, "TRAINPROF_SAMPLE_HZ", UINT, "10", 0, 1000,                                 \
      "process sampler (CPU, RSS, threads, context switches) per second; 0 = off")           \
    X(NVML_HZ, "TRAINPROF_NVML_HZ", UINT, "10", 0, 100,                                      \
      "GPU sampling rate (NVML); 0 = off. At most one sample a flush (20 Hz at the default "   \
      "TRAINPROF_FLUSH_MS): the nvml capability line says so when more is asked")             \
    X(NO_FILE, "TRAINPROF_NO_FILE", TEXT, "", 0, 0,                                          \
      "1: live metrics only, no rank file and no TRAINPROF_DIR needed")                      \
    X(NO_SIGNALS, "TRAINPROF_NO_SIGNALS", SET, "", 0, 0,                                     \
      "no signal handler: a signal's default action loses what the last flush did not write") \
    X(NO_NVTX_EMIT, "TRAINPROF_NO_NVTX_EMIT", SET, "", 0, 0,                                 \
      "no emission to another NVTX tool while not recording")                                \
    X(STEP_NAME, "TRAINPROF_STEP_NAME", TEXT, "", 0, 0,                                      \
      "the range that marks a step (exact name, or a glob with * or ?)")                     \
    X(GPU_CAPTURE, "TRAINPROF_GPU_CAPTURE", TEXT, "auto", 0, 0,                              \
      "GPU activity capture plan: auto (the start through step 4, then 5 steps every 1000), " \
      "all, off, steps A-B[,C-D...] or A-B/N (every N steps)")                                \
    X(KERNEL_STEPS, "TRAINPROF_KERNEL_STEPS", TEXT, "", 0, 0,                                \
      "older spelling of TRAINPROF_GPU_CAPTURE=A-B (one window: A-B, A or A-)")              \
    X(TOKENS_PER_STEP, "TRAINPROF_TOKENS_PER_STEP", TEXT, "", 0, 0,                          \
      "tokens one rank processes per step (a number > 0, at most 1e12)")                     \
    X(SAMPLES_PER_STEP, "TRAINPROF_SAMPLES_PER_STEP", TEXT, "", 0, 0,                        \
      "samples one rank processes per step (a number > 0, at most 1e12)")                    \
    X(FLOPS_PER_STEP, "TRAINPROF_FLOPS_PER_STEP", TEXT, "", 0, 0,                            \
      "model FLOPs per step per rank (a number > 0, at most 1e21)")                          \
    X(MODEL, "TRAINPROF_MODEL", TEXT, "", 0, 0, "transformer shape of trainprof run --model") \
    X(DTYPE, "TRAINPROF_DTYPE", TEXT, "", 0, 0, "data type of the peak rate for MFU")        \
    X(MODEL_FLOPS_PER_STEP, "TRAINPROF_MODEL_FLOPS_PER_STEP", TEXT, "", 0, 0,                \
      "the --model formula's FLOPs per step, for the live counters only")                    \
    X(METRICS_PORT, "TRAINPROF_METRICS_PORT", UINT, "", 0, 65535,                            \
      "live Prometheus metrics on PORT + the local rank; 0 = an ephemeral port")             \
    X(METRICS_ADDR, "TRAINPROF_METRICS_ADDR", TEXT, "127.0.0.1", 0, 0,                       \
      "numeric address the metrics endpoint binds")                                          \
    X(METRICS_TOKEN, "TRAINPROF_METRICS_TOKEN", TEXT, "", 0, 0,                              \
      "bearer token the metrics endpoint requires")                                          \
    X(METRICS_RANK_OFFSET, "TRAINPROF_METRICS_RANK_OFFSET", TEXT, "", 0, 0,                  \
      "0: serve on PORT itself, not PORT + the local rank")                                  \
    X(CUPTI, "TRAINPROF_CUPTI", TEXT, "", 0, 0, "0: no GPU activity capture")                \
    X(CUPTI_KINDS, "TRAINPROF_CUPTI_KINDS", TEXT,                                            \
      "kernel,memcpy,memset,memory,sync,runtime,overhead,driver", 0, 0,                      \
      "GPU activity kinds to capture (driver: driver-API launches, as cuBLASLt makes)")      \
    X(CUPTI_DETACH, "TRAINPROF_CUPTI_DETACH", TEXT, "", 0, 0,                                \
      "0: CUPTI stays attached between capture windows")                                     \
    X(CUPTI_DRIVER, "TRAINPROF_CUPTI_DRIVER", TEXT, "", 0, 0,                                \
      "activity: driver-API launches from CUPTI's DRIVER kind, not launch callbacks")       \
    X(CUPTI_CALLS, "TRAINPROF_CUPTI_CALLS", TEXT, "", 0, 0,                                  \
      "all: every CUDA runtime call, not only those that launch, copy, set, sync, allocate") \
    X(CUPTI_POOL, "TRAINPROF_CUPTI_POOL", TEXT, "", 0, 0,                                    \
      "0: a fresh CUPTI buffer per request instead of the pool of 64 x 4 MiB")               \
    X(CUPTI_LIB, "TRAINPROF_CUPTI_LIB", TEXT, "", 0, 0,                                      \
      "the libcupti to load when the process has none")                                      \
    X(CUPTI_YIELDED, "TRAINPROF_CUPTI_YIELDED", TEXT, "", 0, 0,                              \
      "set by trainprof run: the CUDA tool that kept CUDA_INJECTION64_PATH")                 \
    X(NVML_LIB, "TRAINPROF_NVML_LIB", TEXT, "libnvidia-ml.so.1", 0, 0, "the NVML to load")   \
    X(NVML_SAMPLER, "TRAINPROF_NVML_SAMPLER", TEXT, "", 0, 0,                                \
      "set by trainprof run: the pid that samples the node's GPUs")                          \
    X(NVML_ALL_RANKS, "TRAINPROF_NVML_ALL_RANKS", TEXT, "", 0, 0,                            \
      "1: sample NVML in every local rank, not only local rank 0")                           \
    X(NVML_WITH_CUPTI, "TRAINPROF_NVML_WITH_CUPTI", TEXT, "", 0, 0,                          \
      "1: sample NVML in-process even where CUPTI records")                                  \
    X(MEMORY, "TRAINPROF_MEMORY", UINT, "1", 0, 1,                                           \
      "0: no PyTorch allocator samples and no OOM post-mortem (docs/python.md)")              \
    X(MEMORY_HISTORY, "TRAINPROF_MEMORY_HISTORY", UINT, "0", 0, 10000000,                    \
      "N > 0: PyTorch records its last N allocations with Python stacks (for the OOM "       \
      "snapshot; about 1 us per allocation)")                                                \
    X(NCCL, "TRAINPROF_NCCL", TEXT, "", 0, 0, "0: the NCCL plugin asks NCCL for nothing")    \
    X(NCCL_KERNEL, "TRAINPROF_NCCL_KERNEL", TEXT, "", 0, 0,                                  \
      "0: no NCCL kernel-channel events (host enqueue times only)")                          \
    X(MPI, "TRAINPROF_MPI", TEXT, "", 0, 0, "0: MPI calls forwarded untouched")              \
    X(MPI_HOOK, "TRAINPROF_MPI_HOOK", TEXT, "", 0, 0,                                        \
      "0: no MPI collectives hook (the same on every rank)")                                 \
    X(MPI_MAX_COMMS, "TRAINPROF_MPI_MAX_COMMS", UINT, "3072", 2, 3072,                       \
      "live MPI communicators with an id of their own")

enum tprof__opt_type { TPROF__OPT_TEXT, TPROF__OPT_UINT, TPROF__OPT_LEVEL, TPROF__OPT_SET };

typedef enum tprof__opt {
#define TPROF__OPT_ID(id, name, type, def, min, max, doc) TPROF__OPT_##id,
    TPROF__OPTIONS(TPROF__OPT_ID)
#undef TPROF__OPT_ID
    TPROF__OPT_COUNT
} tprof__opt;

typedef struct tprof__option {
    const char *name; /* the variable */
    enum tprof__opt_type type;
    const char *def;  /* the default as the docs give it; "" when there is none */
    uint64_t min, max;
    const char *doc;  /* one line */
} tprof__option;

/* The row of `id` (static storage). */
static inline const tprof__option *tprof__option_row(tprof__opt id) {
    static const tprof__option rows[TPROF__OPT_COUNT] = {
#define TPROF__OPT_ROW(id, name, type, def, min, max, doc) \
    {name, TPROF__OPT_##type, def, min, max, doc},
        TPROF__OPTIONS(TPROF__OPT_ROW)
#undef TPROF__OPT_ROW
    };
    return &rows[id];
}

/* The row of per-step figure k of core/per_step.h (0 tokens, 1 samples, 2 FLOPs). */
_Static_assert(TPROF__OPT_SAMPLES_PER_STEP == TPROF__OPT_TOKENS_PER_STEP + 1 &&
                   TPROF__OPT_FLOPS_PER_STEP == TPROF__OPT_TOKENS_PER_STEP + 2,
               "the per-step rows follow per_step.h's order");
static inline tprof__opt tprof__per_step_opt(int k) {
    return (tprof__opt)(TPROF__OPT_TOKENS_PER_STEP + k);
}

/* The variable's value as the environment holds it: NULL when unset, possibly "". */
static inline const char *tprof__env(tprof__opt id) { return getenv(tprof__option_row(id)->name); }

/* Its value when set and not empty, else NULL. */
static inline const char *tprof__env_nonempty(tprof__opt id) {
    const char *v = tprof__env(id);
    return v && *v ? v : NULL;
}

static inline const char *tprof__opt_type_name(enum tprof__opt_type t) {
    return t == TPROF__OPT_UINT ? "integer" : t == TPROF__OPT_LEVEL ? "level"
           : t == TPROF__OPT_SET ? "set" : "text";
}

/* The range of a UINT row as text ("64-", "0-1000"), "" for the other types. */
static inline void tprof__opt_range(const tprof__option *o, char *buf, size_t n) {
    buf[0] = 0;
    if (o->type != TPROF__OPT_UINT) return;
    if (o->max)
        snprintf(buf, n, "%llu-%llu", (unsigned long long)o->min, (unsigned long long)o->max);
    else
        snprintf(buf, n, "%llu-", (unsigned long long)o->min);
}

/* libtrainprof.so's readers (core/config.c). tprof__env_uint: 1 and *out (clamped to the
 * row's max, when it has one) when a UINT variable is set to a non-negative decimal integer;
 * 0 when unset or empty, and 0 with a warning when it is something else.
 * tprof__parse_log_level: a LEVEL value as TPROF_LOG_*, -1 when it is none (or NULL). */
int tprof__env_uint(tprof__opt id, uint64_t *out);
int tprof__parse_log_level(const char *v);

/* The list `trainprof run --help` prints: one entry per variable, its description (and
 * default) wrapped at 79 columns under a 34-column indent. */
static inline void tprof__config_print_env(FILE *f) {
    fputs("Variables read by the library (docs/cli.md):\n", f);
    for (int i = 0; i < TPROF__OPT_COUNT; i++) {
        const tprof__option *o = tprof__option_row((tprof__opt)i);
        char text[320];
        snprintf(text, sizeof text, "%s%s%s%s", o->doc, *o->def ? " (default " : "", o->def,
                 *o->def ? ")" : "");
        int col = fprintf(f, "  %-31s ", o->name);
        for (const char *p = text; *p;) {
            size_t w = strcspn(p, " ");
            if (p != text && col + 1 + (int)w > 79) {
                col = fprintf(f, "\n%34s", "") - 1;
            } else if (p != text) {
                fputc(' ', f);
                col++;
            }
            col += (int)fwrite(p, 1, w, f);
            p += w;
            while (*p == ' ') p++;
        }
        fputc('\n', f);
    }
}

/* The table of docs/cli.md, as markdown rows under a header. */
static inline void tprof__config_print_markdown(FILE *f) {
    fputs("| variable | type | default | range | meaning |\n|---|---|---|---|---|\n", f);
    for (int i = 0; i < TPROF__OPT_COUNT; i++) {
        const tprof__option *o = tprof__option_row((tprof__opt)i);
        char range[48];
        tprof__opt_range(o, range, sizeof range);
        fprintf(f, "| `%s` | %s | %s%s%s | %s | %s |\n", o->name, tprof__opt_type_name(o->type),
                *o->def ? "`" : "", o->def, *o->def ? "`" : "", range, o->doc);
    }
}

#endif /* TPROF_CONFIG_H */
