/*
 * trainprof.c — the command line (docs/design.md §7): the table of commands and main.
 *
 * A client of the library and of the analysis code only, as curl's tool is of libcurl: each
 * command is a file of its own (cmd_run.c, cmd_report.c, cmd_summarize.c, cmd_export.c,
 * cmd_diff.c, top.c, cmd_serve.c, cmd_capture.c), parsing its options from a table that also
 * prints its usage (common.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "analysis/alloc.h"
#include "analysis/report.h"
#include "common.h"
#include "format/format.h"
#include "top.h"
#include "trainprof.h"

static const struct command {
    const char *name;
    const char *synopsis; /* as in the usage's list of commands */
    const char *summary;
    int (*fn)(int argc, char **argv);
    int reads_runs; /* reads rank files: takes TRAINPROF_COMM_KEEP */
} commands[] = {
    {"run", "run [options] -- CMD [ARGS...]",
     "run CMD (any launcher) under the profiler, then report", cmd_run, 1},
    {"report", "report DIR [options]", "report on the rank files of a run", cmd_report, 1},
    {"summarize", "summarize DIR [options]",
     "a summary beside each rank file, for faster reports (mpirun, srun)", cmd_summarize, 1},
    {"export", "export DIR [-o FILE] ...",
     "write a Chrome/Perfetto trace (PyTorch profiler shape)", cmd_export, 1},
    {"diff", "diff RUN_A RUN_B [options]", "what changed between two runs, beyond noise",
     cmd_diff, 1},
    {"capture", "capture RUN_DIR|PID --steps N",
     "record GPU activity in N more steps of a running job", cmd_capture},
    {"top", "top --endpoints HOST:PORT,...",
     "live view of a running job's ranks (metrics endpoints)", cmd_top},
    {"serve", "serve [--listen ADDR:PORT]",
     "export this node's GPU and host metrics (Prometheus)", cmd_serve},
};
enum { N_COMMANDS = sizeof commands / sizeof *commands };

static void main_usage(FILE *f) {
    fputs("usage: trainprof <command> [options]\n"
          "\n"
          "Profile a distributed training job and report why its steps take as long as they "
          "do.\n"
          "\n"
          "commands:\n",
          f);
    for (int k = 0; k < N_COMMANDS; k++)
        fprintf(f, "  %-31s  %s\n", commands[k].synopsis, commands[k].summary);
    fputs("\n"
          "  trainprof --version             version and build information\n"
          "  trainprof COMMAND --help        the options of a command\n",
          f);
}

/* 0 when what was printed reached standard output, else 1 with one line (a closed or full
 * standard output is an error a script must see, as for the reports) */
static int stdout_written(const char *what) {
    if (fflush(stdout) == 0 && !ferror(stdout)) return 0;
    fprintf(stderr, "trainprof %s: cannot write to standard output: %s\n", what, strerror(errno));
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        main_usage(stderr);
        return EXIT_USAGE;
    }
    /* the command owns its cJSON use: the report's nodes are counted as the analyses'
     * allocations are, so that a document short of memory says so (analysis/alloc.h) */
    tp_alloc_json_hooks();
    const char *c = argv[1];
    if (!strcmp(c, "--help") || !strcmp(c, "-h") || !strcmp(c, "help")) {
        main_usage(stdout);
        return stdout_written("--help");
    }
    if (!strcmp(c, "--version") || !strcmp(c, "version")) {
        /* the build line starts with "trainprof <version>" */
        printf("%s\nrank file format %u, report schema %d\n", tprof_build_info(),
               TPROF_FORMAT_VERSION, TP_REPORT_SCHEMA_VERSION);
        return stdout_written("--version");
    }
    for (int k = 0; k < N_COMMANDS; k++) {
        if (strcmp(c, commands[k].name)) continue;
        /* the analyses' one setting from the environment, for the commands that read runs
         * (report, summarize, export, diff, and run's end-of-run report), before a job starts */
        int help = 0;
        for (int i = 2; i < argc && strcmp(argv[i], "--"); i++)
            help |= !strcmp(argv[i], "--help") || !strcmp(argv[i], "-h");
        if (commands[k].reads_runs && !help && cli_comm_keep(NULL, NULL) != 0)
            return EXIT_USAGE;
        return commands[k].fn(argc - 2, argv + 2);
    }
    die_usage(NULL, "unknown command '%s'", c);
}
