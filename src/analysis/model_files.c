/*
 * model_files.c — the files a load reads: what each operand names (a directory's rank files or
 * torch.profiler traces, a file, a glob pattern's matches), in the order the run takes them,
 * so that every reader of a run (the load, `trainprof summarize`'s tasks) lists them alike.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "analysis/kineto.h"
#include "analysis/alloc.h"
#include "analysis/model.h"
#include "analysis/model_load.h"
#include "trainprof.h"

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}


static int add_file(tp_flist *fl, const char *path, int kineto) {
    char **nv = tp_realloc(fl->v, (fl->n + 1) * sizeof *nv);
    if (!nv) return TPROF_ERR_NO_MEMORY;
    fl->v = nv;
    unsigned char *nk = tp_realloc(fl->kineto, fl->n + 1);
    if (!nk) return TPROF_ERR_NO_MEMORY;
    fl->kineto = nk;
    if (!(fl->v[fl->n] = tp_strdup(path))) return TPROF_ERR_NO_MEMORY;
    fl->kineto[fl->n++] = (unsigned char)kineto;
    return 0;
}

/* A directory's entries that pass `want` (a rank file's name; a trace by content), sorted. */
static int dir_files(const char *dir, tp_flist *fl, int kineto) {
    DIR *d = opendir(dir);
    if (!d) return TPROF_ERR_IO;
    size_t first = fl->n;
    int rc = 0;
    struct dirent *e;
    while (!rc && (e = readdir(d)) != NULL) {
        if (e->d_type != DT_REG && e->d_type != DT_UNKNOWN && e->d_type != DT_LNK) continue;
        int name_ok = kineto ? ends_with(e->d_name, ".json") || ends_with(e->d_name, ".json.gz")
                             : ends_with(e->d_name, ".tprof");
        if (!name_ok) continue;
        size_t n = strlen(dir) + strlen(e->d_name) + 2;
        char *path = tp_malloc(n);
        if (!path) {
            rc = TPROF_ERR_NO_MEMORY;
            break;
        }
        snprintf(path, n, "%s/%s", dir, e->d_name);
        if (!kineto || tp_kineto_sniff(path)) rc = add_file(fl, path, kineto);
        free(path);
    }
    closedir(d);
    if (fl->n - first > 1) {
        /* one call adds files of one kind only: sorting the names keeps the kinds right */
        qsort(fl->v + first, fl->n - first, sizeof *fl->v, cmp_str);
    }
    return rc;
}

int tp_load_operand_files(const char *op, tp_flist *fl, char *err, size_t errlen) {
    struct stat st;
    if (stat(op, &st) != 0) {
        int e = errno;
        glob_t g;
        if (strpbrk(op, "*?[") && glob(op, 0, NULL, &g) == 0) {
            int rc = 0;
            for (size_t i = 0; !rc && i < g.gl_pathc; i++) {
                struct stat s2;
                if (stat(g.gl_pathv[i], &s2) == 0 && S_ISDIR(s2.st_mode)) continue;
                rc = tp_load_operand_files(g.gl_pathv[i], fl, err, errlen);
            }
            globfree(&g);
            return rc;
        }
        snprintf(err, errlen, "%s: %s", op, strpbrk(op, "*?[") ? "no file matches" : strerror(e));
        return strpbrk(op, "*?[") ? TPROF_ERR_NOT_FOUND : TPROF_ERR_IO;
    }
    if (S_ISDIR(st.st_mode)) {
        size_t before = fl->n;
        int rc = dir_files(op, fl, 0);
        if (!rc && fl->n == before) rc = dir_files(op, fl, 1);
        if (rc == TPROF_ERR_IO) snprintf(err, errlen, "%s: %s", op, strerror(errno));
        return rc;
    }
    char magic[8] = {0};
    FILE *f = fopen(op, "rb");
    size_t got = f ? fread(magic, 1, sizeof magic, f) : 0;
    if (f) fclose(f);
    int tprof = (got == 8 && !memcmp(magic, TPROF_FILE_MAGIC, 8)) || ends_with(op, ".tprof");
    return add_file(fl, op, !tprof);
}

void tp_flist_free(tp_flist *fl) {
    for (size_t i = 0; i < fl->n; i++) free(fl->v[i]);
    free(fl->v);
    free(fl->kineto);
    memset(fl, 0, sizeof *fl);
}

int tp_run_rank_files(const char *const *ops, size_t nops, char ***paths, size_t *n, char *err,
                      size_t errlen) {
    tp_flist fl = {0};
    int rc = TPROF_OK;
    *paths = NULL;
    *n = 0;
    if (errlen) err[0] = 0;
    for (size_t i = 0; rc == TPROF_OK && i < nops; i++)
        rc = tp_load_operand_files(ops[i] ? ops[i] : "", &fl, err, errlen);
    if (rc != TPROF_OK) {
        tp_flist_free(&fl);
        return rc;
    }
    size_t k = 0; /* the rank files, in place: the traces' paths freed */
    for (size_t i = 0; i < fl.n; i++) {
        if (fl.kineto[i]) free(fl.v[i]);
        else fl.v[k++] = fl.v[i];
    }
    free(fl.kineto);
    *paths = fl.v;
    *n = k;
    return TPROF_OK;
}
