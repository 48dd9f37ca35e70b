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
 *    ownership of its memory.
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
 *                                              creatable); NULL/unset = disabled
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
 * being killed, not a machine crash; the file is fsync'ed at shutdown. Returns TPROF_ERR_DISABLED when not recording, TPROF_ERR_IO on a
 * write error. Not to be called from a signal handler. */
TPROF_API int tprof_flush(void);

/* Flush, close the rank file (with its end record) and stop the flusher thread. Later
 * recording calls are no-ops. Called automatically at exit. Idempotent. */
TPROF_API int tprof_shutdown(void);

/* Path of this process's rank file, or NULL before the first flush / when disabled.
 * The string lives until tprof_shutdown(). */
TPROF_API const char *tprof_output_path(void);

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
 * precedence over steps inferred from range names in the report (DESIGN §4). */
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
 * TPROF_ERR_DISABLED. */
TPROF_API int tprof_set_metadata(const char *key, const char *value);

/* Name the calling thread in traces and reports. */
TPROF_API int tprof_name_thread(const char *name);

/* Run-time switch read inline by the macros below, so that a disabled session costs one
 * load and one predictable branch at the call site (no call into the library). Nonzero
 * until the library knows it is not recording. Internal: read it only through the macros. */
TPROF_API extern int tprof__maybe_on;

#if !defined(TPROF_DISABLE) && !defined(TPROF_NO_INLINE_CHECK)
/* A function-like macro does not expand inside its own expansion, so each of these calls
 * the real function when the switch is on. Defining TPROF_NO_INLINE_CHECK gives plain
 * calls (for taking the functions' addresses). */
#define tprof_range_push(name) (tprof__maybe_on ? tprof_range_push(name) : (void)0)
#define tprof_range_push_ex(domain, name, category) \
    (tprof__maybe_on ? tprof_range_push_ex(domain, name, category) : (void)0)
#define tprof_range_pop() (tprof__maybe_on ? tprof_range_pop() : (void)0)
#define tprof_range_start(name) (tprof__maybe_on ? tprof_range_start(name) : (uint64_t)0)
#define tprof_range_end(id) (tprof__maybe_on ? tprof_range_end(id) : (void)0)
#define tprof_mark(name) (tprof__maybe_on ? tprof_mark(name) : (void)0)
#define tprof_counter(name, value) (tprof__maybe_on ? tprof_counter(name, value) : (void)0)
#define tprof_step_begin(step) (tprof__maybe_on ? tprof_step_begin(step) : (void)0)
#define tprof_step_end(step) (tprof__maybe_on ? tprof_step_end(step) : (void)0)
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
