/*
 * common.h — what the trainprof command's subcommands share (docs/design.md §7): usage
 * errors and number parsing, the option tables every command parses its arguments with and
 * prints its usage from, output files replaced only by complete ones, loading a run, and the
 * report options of `report`, `diff` and `run`.
 *
 * The command is single-threaded apart from the library session `run` and `serve` start in
 * their own process; nothing here is called from a signal handler. Every `die_*` function
 * prints one line on stderr and exits with EXIT_USAGE (2).
 */
#ifndef TPROF_CLI_COMMON_H
#define TPROF_CLI_COMMON_H

#include <limits.h>
#include <stdio.h>

#include "analysis/report.h"
#include "format/reader.h"
#include "trainprof.h"

#define EXIT_USAGE 2

/* "trainprof CMD: <fmt with arg>" and "Try 'trainprof CMD --help'." on stderr, then exit(2).
 * cmd NULL: the command itself ("trainprof: ...", "Try 'trainprof --help'."). */
_Noreturn void die_usage(const char *cmd, const char *fmt, const char *arg);

/* v as a decimal integer in [lo, hi], else "OPT needs an integer from LO to HI" and exit(2). */
int parse_int(const char *cmd, const char *opt, const char *v, int lo, int hi);
/* v as a number in [lo, hi], else "OPT needs a number from LO to HI" and exit(2). */
double parse_num(const char *cmd, const char *opt, const char *v, double lo, double hi);
/* The variable's value when set and non-empty, else def. */
const char *env_or(const char *name, const char *def);

/* ------------------------------------------------------------------ option tables */

typedef enum cli_kind {
    CLI_FLAG,  /* "--name" alone */
    CLI_VALUE, /* "--name VALUE", "-n VALUE" or "--name=VALUE"; never empty */
} cli_kind;

/* One option of a command. */
typedef struct cli_opt {
    int id;           /* the command's code for it, which cli_next returns */
    const char *lng;  /* "--output" */
    const char *shrt; /* "-o", or NULL */
    cli_kind kind;
    const char *arg;  /* the value's name in the usage ("DIR"); NULL for a flag */
    /* the usage text; a second line and more are indented under the first. NULL: the
     * option is described on another option's line (--samples-per-step) */
    const char *help;
} cli_opt;

/* A command's options and its usage text, which is printed as
 * head, then one line (or more) per option with help, then tail(). */
typedef struct cli_cmd {
    const char *name; /* "run", as in "trainprof run: ..." */
    const char *head; /* usage line, description and the options' title */
    const cli_opt *opts;
    size_t nopts;
    void (*tail)(FILE *f); /* after the options, or NULL */
    int dash_is_option;    /* a lone "-" is an (unknown) option rather than an operand */
} cli_cmd;

/* Option codes shared by several commands; each command numbers its own from OPT_OWN. */
enum {
    CLI_OPERAND = -1, /* cli_next: argv[*i] is not an option */
    OPT_HELP = 0,
    OPT_TOKENS,  /* the throughput and MFU inputs: report_opt_set */
    OPT_SAMPLES,
    OPT_FLOPS,
    OPT_MODEL,
    OPT_DTYPE,
    OPT_OWN = 16,
};

#define CLI_HELP_OPT {OPT_HELP, "--help", "-h", CLI_FLAG, NULL, "this text"}
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

/* The option at argv[*i]: its id, with *val set for a CLI_VALUE one (and *i moved past the
 * value when it was the next argument); CLI_OPERAND when argv[*i] is not an option ("-"
 * unless dash_is_option, or a word not starting with '-'). An unknown option, a missing or
 * empty value: a usage error (exit 2) with the messages "unknown option '%s'", "option %s
 * needs a value", "option %s needs a non-empty value". */
int cli_next(const cli_cmd *c, int argc, char **argv, int *i, const char **val);

/* The usage text of c (head, options, tail) on f. */
void cli_usage(const cli_cmd *c, FILE *f);

/* ------------------------------------------------------------------ output files */

/* Writes through a temporary file renamed into place, so a failure leaves nothing behind
 * and an existing file is replaced only by a complete one. A symlink is written through (the
 * temporary file goes beside its target, which the rename replaces, so the link stays); a
 * path that exists and is not a regular file (/dev/null, a FIFO, a terminal) is written
 * directly, never replaced. NULL or "-": standard output. */
typedef struct outfile {
    FILE *f;
    char tmp[PATH_MAX];
    char target[PATH_MAX]; /* what the rename replaces: path, or a symlink's target */
    const char *path;
} outfile;

/* 0, or -1 with a line on stderr. */
int out_open(outfile *o, const char *path);
/* Finishes o: `ok` 0 (the writer failed) discards the temporary file. 0, or -1 with a line
 * on stderr. */
int out_close(outfile *o, int ok);

/* tp_run_load with its errors on stderr: 0, or -1 (run freed). */
int load_run(const char *dir, tp_run *run);

/* ------------------------------------------------------------------ report options */

typedef struct report_args {
    const char *step_name;
    int warmup;
    char *data_names; /* "a,b,c", split in place by report_opts (once) */
    int top;
    /* throughput and MFU inputs (0 / NULL: from the rank files' metadata) */
    double tokens_per_step, samples_per_step, flops_per_step;
    const char *model, *dtype;
} report_args;

/* The defaults and the environment twins (TRAINPROF_STEP_NAME, TRAINPROF_WARMUP, checked
 * as --warmup is) of report, diff and run. */
void report_args_init(report_args *a, const char *cmd);

/* Sets one of OPT_TOKENS .. OPT_DTYPE from its value, checked: 1 when id was one of them,
 * 0 otherwise; a bad value is a usage error. */
int report_opt_set(report_args *a, int id, const char *v, const char *cmd);

/* The report options of the command line; the HTML writer needs them too (its per-step
 * plots use the same step rule). The strings stay a's. */
void report_opts(const report_args *a, tp_report_opts *o);

/* The report of a run (caller owns it: cJSON_Delete), or NULL. */
cJSON *make_report(const tp_run *run, const report_args *a);

/* ------------------------------------------------------------------ run and serve */

/* One line on stderr when an endpoint will listen on a non-loopback address without a
 * token (TRAINPROF_METRICS_TOKEN). */
void warn_exposed(const char *cmd, const char *addr);

/* Whether NVML loads and initialises here, with the runtime's own loader
 * (capture/nvml_shared.h), and how many GPUs it sees: the count, or -1 with `why` filled. For
 * `run`'s node sampler and for `serve`. NVML stays loaded (as in the runtime). */
int probe_nvml(char *why, size_t n);

/* ------------------------------------------------------------------ the commands */

/* Each takes the arguments after its name and returns the process's exit status. */
int cmd_run(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_serve(int argc, char **argv);

#endif /* TPROF_CLI_COMMON_H */
