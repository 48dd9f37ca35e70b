/*
 * options.c — usage errors, number parsing, and the option-table parser and usage printer
 * (options.h).
 */
#define _GNU_SOURCE
#include "options.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void die_usage(const char *cmd, const char *fmt, const char *arg) {
    fprintf(stderr, "trainprof%s%s: ", cmd ? " " : "", cmd ? cmd : "");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'trainprof %s%s--help'.\n", cmd ? cmd : "", cmd ? " " : "");
    exit(EXIT_USAGE);
}

int parse_int(const char *cmd, const char *opt, const char *v, int lo, int hi) {
    char *end;
    errno = 0;
    long x = strtol(v ? v : "", &end, 10);
    if (!v || !*v || *end || errno || x < lo || x > hi) {
        fprintf(stderr, "trainprof %s: %s needs an integer from %d to %d, got '%s'\n", cmd, opt,
                lo, hi, v ? v : "");
        exit(EXIT_USAGE);
    }
    return (int)x;
}

double parse_num(const char *cmd, const char *opt, const char *v, double lo, double hi) {
    char *end;
    errno = 0;
    double x = strtod(v ? v : "", &end);
    if (!v || !*v || *end || errno || !(x >= lo && x <= hi)) {
        fprintf(stderr, "trainprof %s: %s needs a number from %g to %g, got '%s'\n", cmd, opt,
                lo, hi, v ? v : "");
        exit(EXIT_USAGE);
    }
    return x;
}

const char *env_or(const char *name, const char *def) {
    const char *v = getenv(name);
    return v && *v ? v : def;
}

/* ------------------------------------------------------------------ option tables */

/* The value of a CLI_VALUE option o at argv[*i], in the spellings getopt_long(3) accepts:
 * "--name VALUE", "--name=VALUE", "-n VALUE" and "-nVALUE" (the value attached to the short
 * name). 1 with *val set (and *i moved past a separate value), 0 when argv[*i] is not o. */
static int value_opt(const cli_cmd *c, const cli_opt *o, int argc, char **argv, int *i,
                     const char **val) {
    const char *a = argv[*i];
    size_t n = strlen(o->lng);
    if (!strcmp(a, o->lng) || (o->shrt && !strcmp(a, o->shrt))) {
        if (*i + 1 >= argc || !strcmp(argv[*i + 1], "--"))
            die_usage(c->name, "option %s needs a value", a);
        *val = argv[++*i];
    } else if (!strncmp(a, o->lng, n) && a[n] == '=') {
        *val = a + n + 1;
    } else if (o->shrt && !strncmp(a, o->shrt, strlen(o->shrt))) {
        *val = a + strlen(o->shrt);
    } else {
        return 0;
    }
    if (!**val) die_usage(c->name, "option %s needs a non-empty value", o->lng);
    return 1;
}

int cli_next(const cli_cmd *c, int argc, char **argv, int *i, const char **val) {
    const char *a = argv[*i];
    *val = NULL;
    if (!strcmp(a, "--")) return CLI_END;
    for (size_t k = 0; k < c->nopts; k++) {
        const cli_opt *o = &c->opts[k];
        if (o->kind == CLI_FLAG) {
            if (!strcmp(a, o->lng) || (o->shrt && !strcmp(a, o->shrt))) return o->id;
            size_t n = strlen(o->lng);
            if (!strncmp(a, o->lng, n) && a[n] == '=')
                die_usage(c->name, "option %s takes no value", o->lng);
        } else if (value_opt(c, o, argc, argv, i, val)) {
            return o->id;
        }
    }
    if (a[0] == '-' && (a[1] || c->dash_is_option)) die_usage(c->name, "unknown option '%s'", a);
    return CLI_OPERAND;
}

void cli_usage(const cli_cmd *c, FILE *f) {
    fputs(c->head, f);
    for (size_t k = 0; k < c->nopts; k++) {
        const cli_opt *o = &c->opts[k];
        if (!o->help) continue;
        char names[64];
        snprintf(names, sizeof names, "%s%s%s%s%s", o->shrt ? o->shrt : "", o->shrt ? ", " : "",
                 o->lng, o->arg ? " " : "", o->arg ? o->arg : "");
        int col = c->col ? c->col : 24;
        fprintf(f, "  %-*s  ", col - 4, names);
        for (const char *h = o->help; *h;) { /* a second line and more under the first */
            size_t len = strcspn(h, "\n");
            fprintf(f, "%.*s\n", (int)len, h);
            h += len;
            if (*h == '\n' && *++h) fprintf(f, "%*s", col, "");
        }
    }
    if (c->tail) c->tail(f);
}
