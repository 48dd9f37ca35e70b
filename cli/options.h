/*
 * options.h — the trainprof command's usage errors, number parsing and option tables: each
 * command declares its options once (long and short name, flag or value, usage text), and
 * cli_next parses its arguments from the table while cli_usage prints its usage from it.
 * Depends on nothing but the C library, so that a command's file (top.c, and the fuzz target
 * that includes it) needs only options.c. Single-threaded use; every `die_*` path prints
 * one message on stderr and exits with EXIT_USAGE (2).
 */
#ifndef TPROF_CLI_OPTIONS_H
#define TPROF_CLI_OPTIONS_H

#include <stddef.h>
#include <stdio.h>

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
    CLI_VALUE, /* "--name VALUE", "--name=VALUE", "-n VALUE" or "-nVALUE"; never empty */
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
    int col;               /* the column the options' texts start in; 0: 24 */
} cli_cmd;

/* Option codes shared by several commands; each command numbers its own from OPT_OWN. */
enum {
    CLI_OPERAND = -1, /* cli_next: argv[*i] is not an option */
    CLI_END = -2,     /* cli_next: argv[*i] is "--": every argument after it is an operand */
    OPT_HELP = 0,
    OPT_TOKENS,  /* the throughput and MFU inputs: report_opt_set */
    OPT_SAMPLES,
    OPT_FLOPS,
    OPT_MODEL,
    OPT_DTYPE,
    OPT_GPU_RECORDS, /* the bound on a rank section's GPU records: report_opt_set */
    OPT_OWN = 16,
};

#define CLI_HELP_OPT {OPT_HELP, "--help", "-h", CLI_FLAG, NULL, "this text"}
/* The option at argv[*i], parsed as getopt_long(3) does without permutation or
 * abbreviation: its id, with *val set for a CLI_VALUE one (and *i moved past the value when
 * it was the next argument); CLI_END when argv[*i] is "--" (the caller then takes every
 * later argument as an operand, even one starting with '-'); CLI_OPERAND when argv[*i] is
 * not an option ("-" unless dash_is_option, or a word not starting with '-'). An unknown
 * option, a missing or empty value, a value given to a flag: a usage error (exit 2) with
 * the messages "unknown option '%s'", "option %s needs a value", "option %s needs a
 * non-empty value", "option %s takes no value". */
int cli_next(const cli_cmd *c, int argc, char **argv, int *i, const char **val);

/* The usage text of c (head, options, tail) on f. */
void cli_usage(const cli_cmd *c, FILE *f);

#endif /* TPROF_CLI_OPTIONS_H */
