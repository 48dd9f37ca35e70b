/*
 * trainprof.h — the public C API of libtrainprof.
 *
 * trainprof records what a training process does (ranges, marks, counters, steps,
 * metadata) into one bounded per-thread ring per thread; a background flusher thread moves
 * the rings into one rank file per process (`<dir>/<host>-<pid>.tprof`, see docs/format.md).
 * The `trainprof` command line turns the rank files of a run into a report or a trace.
 *
 * Conventions that hold for every function below unless its comment says otherwise:
 *
 *  - Times are uint64_t nanoseconds on CLOCK_MONOTONIC (tprof_now_ns()).
 *  - Setup, flush and metadata calls return TPROF_OK (0) or a negative tprof_err code;
 *    tprof_strerror() names it. Hot-path calls (ranges, marks, counters, steps) return void
 *    and never fail loudly: when the session is disabled they cost one predictable branch,
 *    when a ring is full the event is dropped and counted (the drop count is written to the
 *    rank file and shown by the report).
 *  - Strings passed in are copied (interned) before the call returns; the caller keeps
 *    ownership of its memory. Names longer than 4000 bytes are cut to 4000 bytes.
 *  - Every function is thread safe. Ranges pushed with tprof_range_push() belong to the
 *    calling thread's stack; ranges opened with tprof_range_start() may end on any thread.
 *  - The session starts lazily on the first recording call, from TRAINPROF_* environment
 *    variables (the same ones `trainprof run` sets), unless tprof_init() was called first.
 *    Without TRAINPROF_DIR (and without tprof_init) the session stays disabled and every
 *    call is a no-op, so an instrumented program runs unchanged outside `trainprof run`.
 *  - Defining TPROF_DISABLE before including this header compiles every hot-path call out.
 */
#ifndef TRAINPROF_H
#define TRAINPROF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TPROF_VERSION_MAJOR 0
#define TPROF_VERSION_MINOR 1
#define TPROF_VERSION_PATCH 0
#define TPROF_VERSION_STRING "0.1.0"

#if defined(__GNUC__)
#define TPROF_API __attribute__((visibility("default")))
#else
#define TPROF_API
#endif

/* ------------------------------------------------------------------------------------ */
/* Errors. Codes are append-only; TPROF_ERROR_TABLE generates tprof_strerror().         */
/* ------------------------------------------------------------------------------------ */

#define TPROF_ERROR_TABLE(X)                                                             \
    X(TPROF_OK, 0, "success")                                                            \
    X(TPROF_ERR_INVALID_ARG, -1, "invalid argument")                                     \
    X(TPROF_ERR_NO_MEMORY, -2, "out of memory")                                          \
    X(TPROF_ERR_IO, -3, "input/output error (see errno)")                                \
    X(TPROF_ERR_FORMAT, -4, "not a valid trainprof rank file")                           \
    X(TPROF_ERR_VERSION, -5, "unsupported format version")                               \
    X(TPROF_ERR_CORRUPT, -6, "corrupt data (checksum or length mismatch)")               \
    X(TPROF_ERR_TRUNCATED, -7, "truncated data")                                         \
    X(TPROF_ERR_DISABLED, -8, "profiling is disabled in this process")                   \
    X(TPROF_ERR_ALREADY, -9, "already initialised")                                      \
    X(TPROF_ERR_NOT_FOUND, -10, "not found")                                             \
    X(TPROF_ERR_UNAVAILABLE, -11, "capability unavailable in this process")              \
    X(TPROF_ERR_LIMIT, -12, "a configured limit was reached")

typedef enum tprof_err {
#define TPROF__ERR_ENUM(name, value, text) name = value,
    TPROF_ERROR_TABLE(TPROF__ERR_ENUM)
#undef TPROF__ERR_ENUM
} tprof_err;

/* A static, never-NULL English description of an error code ("unknown error" for a code
 * outside the table). Thread safe. */
TPROF_API const char *tprof_strerror(int err);

/* ------------------------------------------------------------------------------------ */
/* Version and build information.                                                        */
/* ------------------------------------------------------------------------------------ */

/* "MAJOR.MINOR.PATCH" of the loaded library (may differ from TPROF_VERSION_STRING of the
 * header a program was compiled against). Static string. */
TPROF_API const char *tprof_version(void);

/* One line: version, compiler, build type, and which optional parts were compiled in.
 * Static string. */
TPROF_API const char *tprof_build_info(void);

/* ------------------------------------------------------------------------------------ */
/* Session set-up.                                                                       */
/* ------------------------------------------------------------------------------------ */

/* Log levels of the library's messages on stderr (prefix "trainprof: "). */
typedef enum tprof_log_level {
    TPROF_LOG_ERROR = 0,
    TPROF_LOG_WARN = 1,
    TPROF_LOG_INFO = 2,
    TPROF_LOG_DEBUG = 3
} tprof_log_level;

/* Configuration of a session. Initialise with tprof_config_init(), then set fields.
 * `struct_size` lets later versions add fields at the end without breaking callers.
 * Environment twins (read by tprof_config_from_env() and by the lazy start):
 *   output_dir        TRAINPROF_DIR            directory for the rank file (must exist or be
 *                                              creatable); NULL/unset = disabled, unless
 *                                              TRAINPROF_NO_FILE=1: a session that only feeds
 *                                              the live metrics (docs/metrics.md) and writes
 *                                              no file, with or without a directory
 *   run_id            TRAINPROF_RUN_ID         free text tying the files of one run together
 *   ring_bytes        TRAINPROF_RING_KB        per-thread ring size (KiB in the variable,
 *                                              bytes here); default 4 MiB, min 64 KiB
 *   max_threads       TRAINPROF_MAX_THREADS    threads that get a ring; later threads'
 *                                              events are dropped and counted; default 1024
 *   flush_interval_ms TRAINPROF_FLUSH_MS       flusher period; default 50 ms
 *   max_strings       TRAINPROF_MAX_STRINGS    interned names per thread; past it names are
 *                                              stored inline in each record; default 8192
 *   log_level         TRAINPROF_LOG            error|warn|info|debug (or 0..3); default warn
 *   enabled           TRAINPROF_ENABLE         0 turns recording off even when a dir is set
 *   sample_hz         TRAINPROF_SAMPLE_HZ      process sampler rate (CPU %, RSS, threads,
 *                                              context switches from /proc/self, recorded as
 *                                              counters "process.*"); default 10, 0 = off,
 *                                              larger values are clamped to 1000
 *   nvml_hz           TRAINPROF_NVML_HZ        GPU sampler rate (NVML: power, energy,
 *                                              utilisation, memory, SM clock, temperature,
 *                                              power limit, clock-event reasons, recorded as
 *                                              counters "gpu<i>.*", i = NVML index; see
 *                                              docs/energy.md); default 10, 0 = off, at most
 *                                              100, and in effect at most one sample per
 *                                              flush_interval_ms. Sampled only where
 *                                              libnvidia-ml loads (a missing one is reported
 *                                              as a capability, never an error), and by local
 *                                              rank 0 only unless TRAINPROF_NVML_ALL_RANKS=1.
 *                                              TRAINPROF_NVML_LIB names the library to load
 *                                              instead of libnvidia-ml.so.1 (tests use a fake).
 */
typedef struct tprof_config {
    size_t struct_size;
    const char *output_dir;
    const char *run_id;
    size_t ring_bytes;
    uint32_t max_threads;
    uint32_t flush_interval_ms;
    uint32_t max_strings;
    int log_level;
    int enabled;
    uint32_t sample_hz;
    uint32_t nvml_hz;
} tprof_config;

/* Fill `cfg` with defaults (output_dir NULL, enabled 1). Returns TPROF_ERR_INVALID_ARG for
 * NULL. */
TPROF_API int tprof_config_init(tprof_config *cfg);

/* Overlay the TRAINPROF_* environment variables onto `cfg`. String fields point into the
 * environment (valid until it changes). Malformed numbers are ignored with a warning. */
TPROF_API int tprof_config_from_env(tprof_config *cfg);

/* Start the session explicitly (instead of lazily from the environment). The strings in
 * `cfg` are copied. Errors: TPROF_ERR_INVALID_ARG (NULL, bad struct_size, ring_bytes below
 * the minimum), TPROF_ERR_ALREADY (a session is running: one per process),
 * TPROF_ERR_IO (the directory cannot be created or written), TPROF_ERR_NO_MEMORY.
 * With output_dir NULL or enabled 0 the session is initialised but disabled and
 * TPROF_ERR_DISABLED is returned. Not async-signal-safe; call before recording threads
 * start if you want their first events captured. */
TPROF_API int tprof_init(const tprof_config *cfg);

/* Nonzero when events are being recorded in this process (starts the lazy session). */
TPROF_API int tprof_enabled(void);

/* Move every thread's ring into the rank file now. Blocks until done (at most a few flush
 * intervals). The data is then in the file (the kernel's page cache): it survives the process
 * being killed, not a machine crash; the file is fsync'ed at shutdown. Returns
 * TPROF_ERR_DISABLED when not recording, TPROF_ERR_IO when a write failed (ENOSPC, EFBIG,
 * EIO, ...: what could not be written is dropped, counted in the file's metadata
 * write_errors.*, and writing resumes when it can; this call retries at once) or when the
 * rank file's storage did not answer for 2 s (one write call that long: the call stops
 * waiting). Not to
 * be called from a signal handler. */
TPROF_API int tprof_flush(void);

/* Flush, close the rank file (with its end record) and stop the flusher thread. Later
 * recording calls are no-ops. Called automatically at exit. Idempotent. Waits for the
 * flusher as long as storage answers; when one write call has lasted 2 s it returns
 * TPROF_ERR_IO without the end written (the flusher finishes on its own if storage
 * answers later), so that a program's exit never hangs on its rank file. */
TPROF_API int tprof_shutdown(void);

/* Path of this process's rank file, or NULL before the first flush / when disabled.
 * The string lives until tprof_shutdown(). */
TPROF_API const char *tprof_output_path(void);

/* The TCP port of this process's live metrics endpoint (docs/metrics.md), which the session
 * starts when TRAINPROF_METRICS_PORT is set (`trainprof run --metrics-port`): useful when the
 * variable is 0 (an ephemeral port). Returns the port (> 0), TPROF_ERR_DISABLED when no
 * endpoint runs in this process (not asked for, not started yet, the port was taken: the log
 * says why), or TPROF_ERR_UNAVAILABLE when the library was built without libmicrohttpd.
 * Thread-safe; no cost to recording. */
TPROF_API int tprof_metrics_port(void);

/* ------------------------------------------------------------------------------------ */
/* Clock.                                                                                */
/* ------------------------------------------------------------------------------------ */

/* CLOCK_MONOTONIC in nanoseconds (vDSO, no syscall on Linux x86-64/arm64). ~20 ns. */
TPROF_API uint64_t tprof_now_ns(void);

/* ------------------------------------------------------------------------------------ */
/* Recording (hot path). Each call: one clock read plus one append to the calling thread's */
/* ring; no lock, no syscall, no allocation after the thread's first event (and after a   */
/* name's first use on that thread).                                                       */
/* ------------------------------------------------------------------------------------ */

/* Open a range on the calling thread's stack. `name` NULL records "(null)". */
TPROF_API void tprof_range_push(const char *name);

/* Same with a domain (NULL = default domain, "" likewise) and a numeric category
 * (0 = none), as NVTX's domain push with an event attribute. */
TPROF_API void tprof_range_push_ex(const char *domain, const char *name, uint32_t category);

/* Close the innermost open range of the calling thread, whatever its domain. A pop with
 * nothing open is recorded and ignored by the report (NVTX programs do this). */
TPROF_API void tprof_range_pop(void);

/* Open a range that may end on another thread; returns its id (never 0 while recording,
 * 0 when disabled — tprof_range_end(0) is a no-op). */
TPROF_API uint64_t tprof_range_start(const char *name);

/* Close a range opened by tprof_range_start() on any thread. An unknown id is recorded and
 * ignored by the report. */
TPROF_API void tprof_range_end(uint64_t id);

/* An instant event on the calling thread. */
TPROF_API void tprof_mark(const char *name);

/* A sample of a named counter (any unit; put it in the name, e.g. "loss", "tokens/s"). */
TPROF_API void tprof_counter(const char *name, double value);

/* Training-step boundaries with the application's step number. Steps from this API take
 * precedence over steps inferred from range names in the report (docs/design.md §4). */
TPROF_API void tprof_step_begin(uint64_t step);
TPROF_API void tprof_step_end(uint64_t step);

/* ------------------------------------------------------------------------------------ */
/* Metadata (not hot path: takes a lock, may allocate).                                  */
/* ------------------------------------------------------------------------------------ */

/* Rank and world size of this process when the launcher's variables (RANK, WORLD_SIZE,
 * OMPI_COMM_WORLD_*, PMI_*, SLURM_*) do not tell, or to override them. rank >= 0,
 * world_size > rank. Errors: TPROF_ERR_INVALID_ARG, TPROF_ERR_DISABLED. */
TPROF_API int tprof_set_rank(int rank, int world_size);

/* Free-form key/value pair stored in the rank file (the last value for a key wins).
 * Key at most 255 bytes, value at most 4000; errors TPROF_ERR_INVALID_ARG,
 * TPROF_ERR_DISABLED. The keys tokens_per_step, samples_per_step and flops_per_step feed
 * the report's throughput and the live metrics: their value must be a number > 0, at most
 * 1e12 (tokens, samples) or 1e21 (FLOPs), else TPROF_ERR_INVALID_ARG and nothing is stored. */
TPROF_API int tprof_set_metadata(const char *key, const char *value);

/* Name the calling thread in traces and reports. */
TPROF_API int tprof_name_thread(const char *name);

/* Pause GPU activity capture (CUPTI) for another CUPTI client, e.g. torch.profiler, which
 * cannot share CUPTI's activity API with trainprof; resume after it stopped. Pause turns the
 * activity kinds off and flushes what CUPTI holds, forced, so that every buffer of ours comes
 * back before the other client registers (records up to the pause are kept; work still
 * running then has no end yet and is counted as untimed, cupti.untimed_records), and hands
 * CUPTI's clock back (the clock the other client registered last, else CUPTI's default);
 * resume registers trainprof's buffer and timestamp callbacks again (the other client
 * replaced them) and turns the kinds back on, unless the GPU capture plan
 * (TRAINPROF_GPU_CAPTURE, TRAINPROF_KERNEL_STEPS) is between windows then. Every
 * pause/resume interval goes into the rank file's metadata (`gpu_capture.pauses` =
 * "start-end,..." in CLOCK_MONOTONIC ns) and the report says GPU activity was paused then,
 * with the pause's reason: the value last given to tprof_set_metadata for the key
 * "gpu_capture.pause_reason" before the pause (gpu_capture.pause_reasons, one per pause).
 * Any thread; takes a lock and calls CUPTI (milliseconds: not for a hot path). Errors:
 * TPROF_ERR_DISABLED (not recording),
 * TPROF_ERR_UNAVAILABLE (no CUPTI capture in this process: built without CUPTI headers, no
 * CUDA, or CUPTI unavailable; or, from resume, CUPTI refused the callbacks: still paused),
 * TPROF_ERR_ALREADY (pause while paused), TPROF_ERR_INVALID_ARG (resume while not paused). */
TPROF_API int tprof_gpu_capture_pause(void);
TPROF_API int tprof_gpu_capture_resume(void);

/* Record GPU activity (CUPTI) in `count` steps from step `first` (TPROF_NEXT_STEP: from the
 * next step that begins), in addition to the capture plan (TRAINPROF_GPU_CAPTURE): a window
 * asked for while the job runs, as `trainprof capture` asks one from outside. Steps are
 * numbered as the report numbers them (tprof_step_begin's numbers, else from 0 in the order
 * step ranges begin). Ranks that call it at the same point of the same step ask for the same
 * step numbers. The next step that begins takes the request; a window that touches one open
 * now extends it; a newer request replaces one not yet begun; steps already past are not
 * captured (a warning is logged). The window's steps are listed in the rank file's metadata
 * (gpu_capture.requests = "id:first-last,...", id 0 from this call) and in
 * gpu_capture.windows when capture went on and off. Any thread; lock-free (a short mutex of
 * its own); the window opens on the thread that begins the step. Errors: TPROF_ERR_DISABLED
 * (not recording), TPROF_ERR_UNAVAILABLE (the plan is "off": CUPTI was never loaded),
 * TPROF_ERR_ALREADY (the plan is "all": every step is captured already),
 * TPROF_ERR_INVALID_ARG (count 0, or first + count past 2^64). */
#define TPROF_NEXT_STEP UINT64_MAX
TPROF_API int tprof_gpu_capture_steps(uint64_t first, uint64_t count);

/* Whether the step running now is one the GPU capture plan (TRAINPROF_GPU_CAPTURE) or an
 * on-demand window chose for detail: 1 or 0; 0 when not recording or when the plan is "off".
 * The plan is followed whether CUPTI is there or not, so a program can add its own detail to
 * the same steps (trainprof.torch samples the allocator at module boundaries in them). The
 * answer changes when a step begins. Any thread; one atomic load, no lock, no error. */
TPROF_API int tprof_gpu_capture_on(void);

/* ------------------------------------------------------------------------------------ */
/* Cross-rank collectives hook. The Timers (and the EnergyMonitor) aggregate across ranks  */
/* through these callbacks, so trainprof never opens a communicator of its own: the       */
/* program registers what it already has (MPI, torch.distributed, NCCL). With none         */
/* registered the process works alone (rank 0 of 1).                                       */
/* ------------------------------------------------------------------------------------ */

typedef enum tprof_reduce_op {
    TPROF_REDUCE_SUM = 0,
    TPROF_REDUCE_MIN = 1,
    TPROF_REDUCE_MAX = 2
} tprof_reduce_op;

/* Every callback is collective: all ranks call it in the same order with the same sizes, as
 * with MPI. Each returns 0 on success, nonzero on failure (the caller then reports
 * TPROF_ERR_UNAVAILABLE and uses its own values only). Callbacks may be NULL: all_gather is
 * needed by the Timers; all_reduce and barrier are optional (barrier NULL = no barrier). */
typedef struct tprof_collectives {
    size_t struct_size; /* sizeof(tprof_collectives) */
    void *ctx;          /* passed back to every callback */
    int rank;           /* this process's rank, 0 <= rank < world_size */
    int world_size;
    /* send: `bytes` bytes; recv: world_size * bytes, rank r's block at r * bytes */
    int (*all_gather)(void *ctx, const void *send, size_t bytes, void *recv);
    /* in place over `count` doubles */
    int (*all_reduce)(void *ctx, double *values, size_t count, tprof_reduce_op op);
    int (*barrier)(void *ctx);
} tprof_collectives;

/* Registers the hook (copied; NULL removes it). Not hot path; call before the timers are
 * logged, from one thread. Errors: TPROF_ERR_INVALID_ARG (bad struct_size, rank or world
 * size). Works whether or not a session is recording. */
TPROF_API int tprof_set_collectives(const tprof_collectives *c);

/* The hook in force, or the single-process one (rank 0, world 1, local callbacks). */
TPROF_API void tprof_get_collectives(tprof_collectives *out);

/* ------------------------------------------------------------------------------------ */
/* EnergyMonitor: GPU energy with Megatron-LM's method set                                */
/* (reference: megatron/core/energy_monitor.py; docs/energy.md).                          */
/*                                                                                          */
/* A monitor reads NVML's total-energy counter (nvmlDeviceGetTotalEnergyConsumption:        */
/* millijoules since the driver was loaded; Volta and newer) of its GPUs and keeps, per GPU */
/* and in joules, the energy of the lap in progress, of the last lap and of all laps. Only */
/* time while resumed counts:                                                               */
/*   setup -> resume -> ... [pause ... resume] ... -> lap -> ... -> lap -> get_total         */
/*   -> shutdown                                                                            */
/* Formulas (Megatron's, in J instead of mJ): on each read while resumed, the lap in        */
/* progress gains counter - last (or counter itself when the counter went backwards: a     */
/* driver reload restarts it at 0); pause reads once more and stops counting; lap = what   */
/* the lap in progress counted (reading once more when resumed), added to the total, and  */
/* a new lap starts; get_total = the sum of completed laps (call lap first to include the  */
/* current one, as Megatron's training loop does).                                         */
/* Differences from Megatron: values stay per GPU (tprof_energy_gpu_info); GPUs are found */
/* by UUID; without NVML every call returns TPROF_ERR_UNAVAILABLE and zeros instead of     */
/* failing; resume on a running monitor and lap while paused count nothing twice.          */
/*                                                                                          */
/* Across ranks: lap and get_total give this rank's joules (summed over its GPUs) and the  */
/* sum over ranks through the collectives hook's all_reduce(SUM) (its all_gather when it  */
/* has no all_reduce), as Megatron all-reduces over the world group. With a hook of more  */
/* than one rank they are collective: every rank calls them in the same order, or the job */
/* hangs, as in Megatron. A rank without NVML (or a NULL monitor) still takes part, with 0.*/
/*                                                                                          */
/* Cost and threads: setup, resume, pause and lap read NVML on the calling thread, one     */
/* energy read per GPU, and a read can take milliseconds: call them at log intervals (as  */
/* Megatron does), never on the hot path. A monitor does not need a recording session and */
/* shares the process's one libnvidia-ml with the GPU sampler. Calls on one monitor are    */
/* serialised by its lock (thread safe); separate monitors are independent.                 */
/* ------------------------------------------------------------------------------------ */

typedef struct tprof_energy tprof_energy;

/* Creates a monitor (paused: call tprof_energy_resume to start counting). `devices` names
 * GPUs, each as "GPU-<uuid>" or a unique prefix of it, a UUID without "GPU-" (as torch's
 * get_device_properties(i).uuid prints it), or a decimal NVML index; duplicates are
 * ignored; at most 64. devices NULL (ndevices 0) chooses this process's GPU(s): those
 * visible to it (CUDA_VISIBLE_DEVICES as CUDA reads it, matched by UUID when it holds UUIDs,
 * indices read in NVML's PCI order), and when more than one is visible and the launcher gave
 * a local rank L (LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, PMIX_LOCAL_RANK,
 * SLURM_LOCALID) below their count, only the L-th (torchrun's convention: rank uses
 * cuda:LOCAL_RANK; counting all of them in every rank would count each GPU once per rank).
 * Returns TPROF_OK; TPROF_ERR_UNAVAILABLE (no libnvidia-ml, no driver, nvmlInit failed, or no
 * GPU visible: *out is a monitor with no GPU whose calls return zeros); TPROF_ERR_NOT_FOUND
 * (a named device does not exist: *out counts the others); TPROF_ERR_INVALID_ARG (out NULL,
 * or devices NULL with ndevices > 0) and TPROF_ERR_NO_MEMORY, with *out NULL. Free *out
 * with tprof_energy_shutdown in every case. Slow: nvmlInit can take up to a second on a
 * GPU without persistence mode. */
TPROF_API int tprof_energy_setup(const char *const *devices, size_t ndevices, tprof_energy **out);

/* Start (or continue) counting: reads each GPU's counter. On a running monitor it does
 * nothing. Errors: TPROF_ERR_UNAVAILABLE (no GPU, NULL monitor, or a read failed: that GPU
 * counts from its next successful read). */
TPROF_API int tprof_energy_resume(tprof_energy *m);

/* Stop counting: adds each GPU's energy since the last read to the lap in progress. On a
 * paused monitor it does nothing. Errors: TPROF_ERR_UNAVAILABLE (as resume; a failed read
 * adds nothing, as Megatron's). */
TPROF_API int tprof_energy_pause(tprof_energy *m);

/* Ends the lap in progress: *rank_joules gets this rank's energy since the previous lap (or
 * setup), pauses excluded, summed over its GPUs; *world_joules the sum over ranks (equal to
 * *rank_joules without a hook). Either pointer may be NULL. A running monitor keeps running.
 * Collective with a hook (see above). Errors: TPROF_ERR_UNAVAILABLE (no GPU or NULL monitor:
 * this rank counts 0; a read failed; or the hook's collective failed: *world_joules is then
 * this rank's value). */
TPROF_API int tprof_energy_lap(tprof_energy *m, double *rank_joules, double *world_joules);

/* The total over completed laps, this rank's and summed over ranks, in joules. Collective
 * with a hook. Errors as tprof_energy_lap. */
TPROF_API int tprof_energy_get_total(tprof_energy *m, double *rank_joules, double *world_joules);

/* Releases the monitor's NVML reference and frees it (Megatron's shutdown). NULL is
 * ignored. Not collective. */
TPROF_API void tprof_energy_shutdown(tprof_energy *m);

/* Number of GPUs the monitor counts (0 for NULL or without NVML). */
TPROF_API size_t tprof_energy_gpu_count(const tprof_energy *m);

/* Per-GPU values, in joules. Set struct_size before the call. */
typedef struct tprof_energy_gpu {
    size_t struct_size;    /* sizeof(tprof_energy_gpu), set by the caller */
    int nvml_index;        /* NVML (PCI-order) index */
    char uuid[96];         /* "GPU-..." */
    char name[96];         /* e.g. "NVIDIA H200"; "" when NVML does not say */
    double lap_joules;     /* the last completed lap */
    double total_joules;   /* all completed laps */
    double current_joules; /* the lap in progress, up to the last read */
} tprof_energy_gpu;

/* Fills *out for GPU i (0 <= i < tprof_energy_gpu_count). Reads no counter. Errors:
 * TPROF_ERR_INVALID_ARG (out NULL or struct_size too small), TPROF_ERR_NOT_FOUND (i out of
 * range, or NULL monitor). */
TPROF_API int tprof_energy_gpu_info(tprof_energy *m, size_t i, tprof_energy_gpu *out);

/* Helpers (pure arithmetic: no NVML, thread safe; 0 when the divisor is 0).
 *   J/step = joules / steps;  J/sample = joules / samples;  Wh = J / 3600;
 *   W = joules / (interval_ns / 1e9).
 * Megatron's log line is, for an interval of `iters` iterations lasting `ns`:
 *   energy per GPU (J/iter/GPU) = tprof_energy_joules_per_step(world_joules, iters) / world_size
 *   power per GPU (W/GPU)       = tprof_energy_avg_watts(world_joules / world_size, ns)
 * and docs/design.md §5.2's energy per sample (Wh/sample) is tprof_energy_wh_per_sample(joules,
 * samples) with the samples (sequences) the interval trained on. */
TPROF_API double tprof_energy_joules_per_step(double joules, uint64_t steps);
TPROF_API double tprof_energy_wh_per_step(double joules, uint64_t steps);
TPROF_API double tprof_energy_joules_per_sample(double joules, uint64_t samples);
TPROF_API double tprof_energy_wh_per_sample(double joules, uint64_t samples);
TPROF_API double tprof_energy_avg_watts(double joules, uint64_t interval_ns);

/* ------------------------------------------------------------------------------------ */
/* Timers with Megatron-LM's semantics (reference: megatron/core/timers.py).               */
/*                                                                                          */
/* A registry of named timers, each with a log level 0, 1 or 2 fixed at its first lookup    */
/* (default 2). A timer above the registry's level is the shared dummy timer: its calls    */
/* are free (one inline load and branch, under 2 ns). Times are host CLOCK_MONOTONIC (not   */
/* Megatron's time.time() after a device synchronize: nothing here synchronizes a GPU).    */
/* When a session is recording, every start..stop interval is also a range in the trace,  */
/* in domain "trainprof" with category "timers".                                            */
/*                                                                                          */
/* Thread safety: lookups are thread safe; one timer is used by one thread at a time (as  */
/* in Megatron). Logging is collective across ranks when a hook is registered.              */
/* ------------------------------------------------------------------------------------ */

typedef struct tprof_timers tprof_timers;
typedef struct tprof_timer tprof_timer;

typedef enum tprof_timers_option {
    TPROF_TIMERS_MAX = 0,    /* "max time across ranks (ms):" */
    TPROF_TIMERS_MINMAX = 1, /* "(min, max) time across ranks (ms):" (Megatron's default) */
    TPROF_TIMERS_ALL = 2     /* "times across ranks (ms):", one line per rank */
} tprof_timers_option;

/* A registry that logs timers of level <= log_level (0..2). Errors:
 * TPROF_ERR_INVALID_ARG, TPROF_ERR_NO_MEMORY. Free with tprof_timers_destroy. */
TPROF_API int tprof_timers_create(int log_level, tprof_timers_option option, tprof_timers **out);

/* Stops running timers (ending their trace ranges; their intervals are dropped, with no
 * device synchronize, CUDA event or stream source call), then frees the registry and its
 * timers (handles become invalid). NULL is ignored. */
TPROF_API void tprof_timers_destroy(tprof_timers *timers);

/* The timer `name` (copied), created on first use with `log_level` (negative = default 2).
 * Above the registry's level: the dummy timer, and nothing is registered (as Megatron).
 * Errors: TPROF_ERR_INVALID_ARG (NULL/empty name, level > 2, or a level different from the
 * one the timer was created with: Megatron asserts there; we return the error and *out
 * gets the dummy), TPROF_ERR_NO_MEMORY. Takes a lock; look up once and keep the handle. */
TPROF_API int tprof_timers_lookup(tprof_timers *timers, const char *name, int log_level,
                                  tprof_timer **out);

/* tprof_timers_lookup that never fails: the dummy timer on any error (logged once). */
TPROF_API tprof_timer *tprof_timer_get(tprof_timers *timers, const char *name, int log_level);

/* How the registry's timers measure:
 *  TPROF_TIMING_HOST         host CLOCK_MONOTONIC (the default; no GPU involved).
 *  TPROF_TIMING_CUDA_EVENTS  GPU time: a CUDA event is recorded on `cuda_stream` (a
 *                            CUstream/cudaStream_t; NULL = the legacy default stream) at
 *                            start and at stop, with no device synchronize; the interval is
 *                            read when elapsed/log asks for it (that call waits for the
 *                            stop event). Needs a current CUDA context on the calling thread;
 *                            without one an interval falls back to host time. At most 32
 *                            unread intervals per timer (older ones are read first).
 *  TPROF_TIMING_CUDA_SYNC    Megatron-LM's numbers: a device synchronize (cuCtxSynchronize)
 *                            before each start and stop, then host time.
 * Errors: TPROF_ERR_INVALID_ARG; TPROF_ERR_UNAVAILABLE when no CUDA driver can be loaded
 * (the registry stays on host time). Call before timing starts. */
typedef enum tprof_timing {
    TPROF_TIMING_HOST = 0,
    TPROF_TIMING_CUDA_EVENTS = 1,
    TPROF_TIMING_CUDA_SYNC = 2
} tprof_timing;

TPROF_API int tprof_timers_set_timing(tprof_timers *timers, tprof_timing timing,
                                      void *cuda_stream);

/* The stream of TPROF_TIMING_CUDA_EVENTS, asked for at each edge instead of set_timing's
 * fixed one: with `fn` set, fn(ctx) is called at every start and stop (and when a running
 * timer is read) and the event goes on the stream it returns (a CUstream/cudaStream_t; NULL =
 * the legacy default stream). Give it the framework's current stream, as Megatron-LM's
 * timers see it (torch: at::cuda::getCurrentCUDAStream(); the Python module does this by
 * default). fn NULL goes back to set_timing's stream. fn runs on the thread that starts or
 * stops the timer, may not call the timers, and costs what it costs on each edge (the
 * Python module's: about 1 us). Set it before timing starts, as set_timing; ctx is the
 * caller's and must outlive the registry (or the next call). Errors: TPROF_ERR_INVALID_ARG
 * (NULL timers). */
typedef void *(*tprof_stream_fn)(void *ctx);
TPROF_API int tprof_timers_set_stream_source(tprof_timers *timers, tprof_stream_fn fn, void *ctx);

/* Start (optionally after a barrier through the hook). Starting a running timer is a misuse:
 * warned about once per timer and ignored (Megatron asserts). One clock read. */
TPROF_API void tprof_timer_start(tprof_timer *timer, int barrier);

/* Stop: adds the interval to elapsed and active time. Stopping a stopped timer is warned
 * about once and ignored. One clock read. */
TPROF_API void tprof_timer_stop(tprof_timer *timer, int barrier);

/* Zero elapsed time and mark stopped; active time is kept. */
TPROF_API void tprof_timer_reset(tprof_timer *timer);

/* Elapsed seconds since the last reset; with reset nonzero, resets. Safe while running: the
 * value includes the running interval, which goes on (its trace range is not split). The
 * dummy returns 0 (Megatron raises). */
TPROF_API double tprof_timer_elapsed(tprof_timer *timer, int reset, int barrier);

/* Total seconds ever measured (reset does not clear it). */
TPROF_API double tprof_timer_active_time(tprof_timer *timer);

/* Overwrite the elapsed seconds (Megatron's set_elapsed, for injected timestamps).
 * Errors: TPROF_ERR_INVALID_ARG for the dummy, NULL, or seconds < 0 or NaN. */
TPROF_API int tprof_timer_set_elapsed(tprof_timer *timer, double seconds);

/* The timer's name, or "dummy timer". */
TPROF_API const char *tprof_timer_name(const tprof_timer *timer);

/* Elapsed seconds of `names` on every rank: out is world_size x nnames, row-major, float
 * precision as Megatron's tensor; a timer missing on a rank is 0. Collective (every rank
 * calls with the same names, or it hangs, as Megatron). names NULL = every registered
 * timer in creation order (then nnames is ignored and *nout gets the count). With reset,
 * the timers are reset after reading. *out is malloc'ed (free it); *world gets the world
 * size. Errors: TPROF_ERR_INVALID_ARG, TPROF_ERR_NO_MEMORY, TPROF_ERR_UNAVAILABLE (the
 * hook's all_gather failed: only this rank's row is filled). */
TPROF_API int tprof_timers_gather(tprof_timers *timers, const char *const *names, size_t nnames,
                                  int reset, int barrier, double **out, int *world, size_t *nout);

/* Megatron's text for `names` (NULL = all, in creation order) in the registry's option, in
 * milliseconds per normalizer unit (normalizer > 0; Megatron passes the log interval).
 * Collective. *text is malloc'ed, or NULL when no timer has a nonzero value (Megatron
 * prints nothing then). Errors as tprof_timers_gather, and TPROF_ERR_INVALID_ARG for a
 * normalizer <= 0. */
TPROF_API int tprof_timers_string(tprof_timers *timers, const char *const *names, size_t nnames,
                                  double normalizer, int reset, int barrier, char **text);

/* The same data as JSON: {"option","unit":"ms","normalizer","world_size","timers":[{"name",
 * "min","max","ranks":[...]}]}, zeros left out of min/max as in the text. Collective. */
TPROF_API int tprof_timers_json(tprof_timers *timers, const char *const *names, size_t nnames,
                                double normalizer, int reset, int barrier, char **json);

/* tprof_timers_string, then written with a newline to `f` (NULL = stdout) by rank `rank`
 * only (negative = the last rank, Megatron's default). Collective. Errors as
 * tprof_timers_string, and TPROF_ERR_INVALID_ARG for rank >= world size. */
TPROF_API int tprof_timers_log(tprof_timers *timers, const char *const *names, size_t nnames,
                               double normalizer, int reset, int barrier, int rank, FILE *f);

/* Internal: the first member of every timer is nonzero for a live timer and 0 for the
 * dummy, so the macros below skip the call for a timer above the log level. */
struct tprof__timer_head {
    int live;
};

/* Run-time switch read inline by the macros below, so that a disabled session costs one
 * load and one predictable branch at the call site (no call into the library). Nonzero
 * until the library knows it is not recording. Internal: read it only through the macros. */
TPROF_API extern int tprof__maybe_on;

/* A relaxed atomic load: a plain load on every common CPU, and race-free to sanitizers. */
#if defined(__GNUC__) || defined(__clang__)
#define TPROF__ON() __atomic_load_n(&tprof__maybe_on, __ATOMIC_RELAXED)
#define TPROF__TIMER_LIVE(t) \
    __atomic_load_n(&((const struct tprof__timer_head *)(const void *)(t))->live, __ATOMIC_RELAXED)
#else
#define TPROF__ON() (tprof__maybe_on)
#define TPROF__TIMER_LIVE(t) (((const struct tprof__timer_head *)(const void *)(t))->live)
#endif

#if !defined(TPROF_DISABLE) && !defined(TPROF_NO_INLINE_CHECK)
/* A function-like macro does not expand inside its own expansion, so each of these calls
 * the real function when the switch is on. Defining TPROF_NO_INLINE_CHECK gives plain
 * calls (for taking the functions' addresses). */
#define tprof_range_push(name) (TPROF__ON() ? tprof_range_push(name) : (void)0)
#define tprof_range_push_ex(domain, name, category) \
    (TPROF__ON() ? tprof_range_push_ex(domain, name, category) : (void)0)
#define tprof_range_pop() (TPROF__ON() ? tprof_range_pop() : (void)0)
#define tprof_range_start(name) (TPROF__ON() ? tprof_range_start(name) : (uint64_t)0)
#define tprof_range_end(id) (TPROF__ON() ? tprof_range_end(id) : (void)0)
#define tprof_mark(name) (TPROF__ON() ? tprof_mark(name) : (void)0)
#define tprof_counter(name, value) (TPROF__ON() ? tprof_counter(name, value) : (void)0)
#define tprof_step_begin(step) (TPROF__ON() ? tprof_step_begin(step) : (void)0)
#define tprof_step_end(step) (TPROF__ON() ? tprof_step_end(step) : (void)0)
#define tprof_timer_start(timer, barrier)                                               \
    (TPROF__TIMER_LIVE(timer) ? tprof_timer_start(timer, barrier) : (void)0)
#define tprof_timer_stop(timer, barrier)                                                \
    (TPROF__TIMER_LIVE(timer) ? tprof_timer_stop(timer, barrier) : (void)0)
#endif

#if defined(TPROF_DISABLE)
/* Compiled out: the hot-path calls become empty statements. */
#define tprof_range_push(name) ((void)0)
#define tprof_range_push_ex(domain, name, category) ((void)0)
#define tprof_range_pop() ((void)0)
#define tprof_range_start(name) ((uint64_t)0)
#define tprof_range_end(id) ((void)0)
#define tprof_mark(name) ((void)0)
#define tprof_counter(name, value) ((void)0)
#define tprof_step_begin(step) ((void)0)
#define tprof_step_end(step) ((void)0)
#endif

#ifdef __cplusplus
}
#endif

#endif /* TRAINPROF_H */
