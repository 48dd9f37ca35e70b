/*
 * common.h — what the trainprof command's subcommands share (docs/design.md §7): the option
 * tables (options.h), output files replaced only by complete ones, loading a run, the report
 * options of `report`, `diff` and `run`, and the checks `run` and `serve` share.
 *
 * The command is single-threaded apart from the library session `run` and `serve` start in
 * their own process; nothing here is called from a signal handler.
 */
#ifndef TPROF_CLI_COMMON_H
#define TPROF_CLI_COMMON_H

#include <limits.h>
#include <stdio.h>
#include <time.h>

#include "analysis/report.h"
#include "format/reader.h"
#include "trainprof.h"

#include "options.h"

/* ------------------------------------------------------------------ output files */

/* Writes through a temporary file renamed into place, so a failure leaves nothing behind
 * and an existing file is replaced only by a complete one. A symlink is written through (the
 * temporary file goes beside its target, which the rename replaces, so the link stays); a
 * path that exists and is not a regular file (/dev/null, a FIFO, a terminal) is written
 * directly, never replaced. NULL or "-": standard output. A name ending in ".gz" or ".zst"
 * is written gzip- or zstd-compressed (export/compress.h): f is then the compressing stream
 * over raw, and out_close ends the compressed stream before the file is renamed into place. */
typedef struct outfile {
    FILE *f;
    FILE *raw; /* the file under f's compressor, or NULL */
    char tmp[PATH_MAX];
    char target[PATH_MAX]; /* what the rename replaces: path, or a symlink's target */
    const char *path;
} outfile;

/* 0, or -1 with a line on stderr (also for ".zst" in a build without libzstd). */
int out_open(outfile *o, const char *path);
/* Finishes o: `ok` 0 (the writer failed) discards the temporary file, -1 likewise without
 * the line (the caller gives its own). 0, or -1 with a line on stderr. */
int out_close(outfile *o, int ok);

/* tp_run_load with its errors on stderr: 0, or -1 (run freed). */
int load_run(const char *dir, tp_run *run);
/* The same over several operands (tp_run_load_list: directories, files, glob patterns;
 * torch.profiler traces among them). */
int load_runs(const char *const *ops, size_t n, tp_run *run);
/* The same for a report alone, in bounded memory (tp_run_load_slim: each rank file is read
 * again for its section). */
int load_runs_slim(const char *const *ops, size_t n, tp_run *run);

/* ------------------------------------------------------------------ report options */

typedef struct report_args {
    const char *step_name;
    int warmup;
    char *data_names; /* "a,b,c", split in place by report_opts (once) */
    int top;
    /* throughput and MFU inputs (0 / NULL: from the rank files' metadata) */
    double tokens_per_step, samples_per_step, flops_per_step;
    const char *model, *dtype;
    size_t gpu_records; /* tp_report_opts.gpu_records (0: its default) */
    size_t comm_ops;    /* tp_report_opts.comm_ops, TRAINPROF_SECTION_COMM_OPS (0: default) */
} report_args;

/* The defaults and the environment twins (TRAINPROF_STEP_NAME, TRAINPROF_WARMUP and
 * TRAINPROF_GPU_RECORDS, checked as their options are) of report, diff, run and summarize,
 * and TRAINPROF_SECTION_COMM_OPS: a bad value is a usage error of cmd (status 2), before
 * `run` starts its job. */
void report_args_init(report_args *a, const char *cmd);

/* --tokens-per-step, --samples-per-step, --flops-per-step, --model, --dtype (report, run) */
#define CLI_THROUGHPUT_OPTS                                                                  \
    {OPT_TOKENS, "--tokens-per-step", NULL, CLI_VALUE, "N",                                  \
     "tokens one rank processes per step (the global batch / world\n"                        \
     "size); --samples-per-step N likewise in samples: throughput"},                         \
    {OPT_SAMPLES, "--samples-per-step", NULL, CLI_VALUE, "N", NULL},                         \
    {OPT_FLOPS, "--flops-per-step", NULL, CLI_VALUE, "N",                                    \
     "model FLOPs per step per rank, for TFLOP/s and MFU; or"},                              \
    {OPT_MODEL, "--model", NULL, CLI_VALUE, "SPEC",                                          \
     "a transformer: layers=,hidden=,heads=,seq=,vocab= [,ffn=,groups=,\n"                   \
     "experts=,topk=,moe_ffn=,kv_channels=,gated=1,dtype=] (Megatron-LM's\n"                 \
     "FLOPs formula, with --tokens-per-step)"},                                              \
    {OPT_DTYPE, "--dtype", NULL, CLI_VALUE, "T",                                             \
     "peak rate for MFU: bf16 (default), fp16, fp8, tf32, fp32"}

/* --gpu-records (report, run, summarize) */
#define CLI_GPU_RECORDS_OPT                                                                  \
    {OPT_GPU_RECORDS, "--gpu-records", NULL, CLI_VALUE, "N|all",                             \
     "GPU records (kernels, copies, API calls) a rank's analysis holds,\n"                   \
     "default 4194304 (about 300 MB); a rank with more has its GPU\n"                        \
     "figures over a span at the middle of its records (its steps there),\n"                \
     "said in its section [TRAINPROF_GPU_RECORDS]"}

/* Sets one of OPT_TOKENS .. OPT_GPU_RECORDS from its value, checked: 1 when id was one of
 * them, 0 otherwise; a bad value is a usage error. */
int report_opt_set(report_args *a, int id, const char *v, const char *cmd);

/* The report options of the command line; the HTML writer needs them too (its per-step
 * plots use the same step rule). The strings stay a's. */
void report_opts(const report_args *a, tp_report_opts *o);

/* The report of a run into *out (the document and its typed results; tp_report_free).
 * Returns TPROF_OK, or TPROF_ERR_NO_MEMORY after one line on stderr. */
int make_report(const tp_run *run, const report_args *a, tp_report *out);
/* 0 when no allocation was refused to the process since tp_nomem_process() gave nomem
 * (analysis/alloc.h), else 1 with one line saying that `what` (a file name, "the report")
 * may be incomplete: a rendering that ran short of memory leaves parts out. Called before
 * out_close, which then keeps the file that was there (out_close(&of, ok && !short)). */
int written_short(const char *what, unsigned long nomem);

/* ------------------------------------------------------------------ run and serve */

/* One line on stderr when an endpoint will listen on a non-loopback address without a
 * token (TRAINPROF_METRICS_TOKEN). */
void warn_exposed(const char *cmd, const char *addr);

/* Whether NVML loads and initialises here, with the runtime's own loader (common/nvml_shared.h,
 * loading TRAINPROF_NVML_LIB as the libraries do), and how many GPUs it sees: the count, or -1
 * with `why` filled. For `run`'s node sampler and for `serve`. NVML stays loaded (as in the
 * runtime). */
int probe_nvml(char *why, size_t n);
/* The bound on the communication ops a rank file keeps for the merge (analysis/comm.h,
 * tp_comm_keep) from TRAINPROF_COMM_KEEP, when set, or from `v` (summarize's --comm-keep,
 * named `what`) when not NULL: 0, or -1 with one line on stderr when it is not a number in the
 * variable's range (core/config.h). */
int cli_comm_keep(const char *what, const char *v);

/* ------------------------------------------------------------------ programs and time */

/* The file execvp(3) would run for `name`: `name` itself when it holds a '/', else the first
 * of $PATH's directories holding it, an empty entry meaning the current directory (POSIX,
 * XBD 8.3 "PATH"); `default_path` stands for PATH when it is unset or empty (execvp's own is
 * "/bin:/usr/bin"). Only a regular file this process may execute (access X_OK) counts: a
 * directory never does. Writes its path into out (n bytes). Returns 0, or -1 when none is
 * found (or the path does not fit in n). */
int cli_find_program(const char *name, const char *default_path, char *out, size_t n);

/* The host in the rank file name `s` (n bytes, ending in ".tprof"; core/writer.c names a
 * file <host>-<pid>.tprof or <host>-<pid>.<k>.tprof, the host as tprof__file_host spells it):
 * its length, the part before "-<pid>" or "-<pid>.<k>" (digits each) at the end; 0 for a name
 * of neither form. Read from the end, so that a host with '-' or '.' in it (node-1, a.b) is
 * taken whole. */
size_t cli_rank_file_host(const char *s, size_t n);

/* Whether `path` (a rank file's path or name) is a rank file written on `host` (named as
 * cli_rank_file_host reads it). 1 or 0. */
int cli_rank_file_of(const char *path, const char *host);

/* The launchers' variable pairs that tell a task its place: {rank, number of tasks, the
 * launcher's name}, in the order `trainprof summarize` reads them (the first pair set and
 * sensible wins): Open MPI's first (mpirun inside a Slurm allocation leaves Slurm's too), then
 * PMI (MPICH, Intel MPI, srun --mpi=pmi2), Slurm's own, then torchrun's. CLI_TASK_VARS pairs;
 * read-only. */
enum { CLI_TASK_VARS = 4 };
extern const char *const cli_task_vars[CLI_TASK_VARS][3];

/* The rank files of the operands (tp_run_rank_files: the same list, in its order) written on
 * `host` (cli_rank_file_of): *n owned paths in *paths (free each, then the array; NULL when
 * none). 0, or tp_run_rank_files's error, with err. */
int cli_host_rank_files(const char *const *ops, size_t nops, const char *host, char ***paths,
                        size_t *n, char *err, size_t errlen);

/* Seconds from *t0, read from CLOCK_MONOTONIC, to now. */
double cli_elapsed_s(const struct timespec *t0);

/* ------------------------------------------------------------------ the commands */

/* Each takes the arguments after its name and returns the process's exit status. */
int cmd_run(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_summarize(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_capture(int argc, char **argv);

/* After a command's output: one line on stderr, naming cmd, when reads of NVML samples kept
 * on disk (a node sampler's packed samples, in $TMPDIR or read in place from a summary:
 * counter_pack.h, tp_counters_read_failures), or of the MPI and gloo calls' spans a section
 * keeps on disk (span_store.h, tp_span_store_read_failures), failed in this process, since
 * the readers then leave them out of the figures they compute. 1 when some failed (the
 * command's output lacks them), else 0. */
int cli_samples_lost(const char *cmd);

#endif /* TPROF_CLI_COMMON_H */
