/*
 * fuzz_main.c — the plain driver of the fuzz targets (tests/fuzz/README.md): a main that
 * replays files through the target's LLVMFuzzerTestOneInput, so that any compiler (gcc
 * included, where libFuzzer is not available) and any sanitizer build can run the kept
 * corpus. Arguments are files or directories (every regular file in them, in name order);
 * each input is handed over in a heap buffer of exactly its size, as libFuzzer does, so that
 * AddressSanitizer sees a read one byte past its end. Exits 0 when every input ran (a crash
 * or a sanitizer report ends the process before that), 1 on an unreadable argument or when
 * no input at all was found: an empty or missing corpus must not pass as replayed.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "fuzz replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 16, len = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (!buf) break;
        if (len == cap) {
            uint8_t *nb = realloc(buf, cap *= 2);
            if (!nb) { free(buf); buf = NULL; break; }
            buf = nb;
        }
        size_t r = fread(buf + len, 1, cap - len, f);
        if (r == 0) break;
        len += r;
    }
    int err = ferror(f);
    fclose(f);
    if (!buf || err) {
        fprintf(stderr, "fuzz replay: %s: cannot read\n", path);
        free(buf);
        return -1;
    }
    /* an exact-size copy: one byte read past the input is an ASan report */
    uint8_t *exact = malloc(len ? len : 1);
    if (!exact) { free(buf); return -1; }
    memcpy(exact, buf, len);
    free(buf);
    fprintf(stderr, "fuzz replay: %s (%zu bytes)\n", path, len);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    return 0;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_dir(const char *dir, size_t *n) {
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "fuzz replay: %s: %s\n", dir, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t nn = 0;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char **nv = realloc(names, (nn + 1) * sizeof *nv);
        if (!nv || !(nv[nn] = malloc(strlen(dir) + strlen(e->d_name) + 2))) {
            names = nv ? nv : names;
            rc = -1;
            break;
        }
        names = nv;
        sprintf(names[nn++], "%s/%s", dir, e->d_name);
    }
    closedir(d);
    if (nn) qsort(names, nn, sizeof *names, cmp_name);
    for (size_t i = 0; i < nn; i++) {
        struct stat st;
        if (rc == 0 && stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) {
            if (run_file(names[i]) != 0) rc = -1;
            else (*n)++;
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv) {
    size_t n = 0;
    int rc = 0;
    for (int i = 1; i < argc && rc == 0; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "fuzz replay: %s: %s\n", argv[i], strerror(errno));
            rc = -1;
        } else if (S_ISDIR(st.st_mode)) {
            rc = run_dir(argv[i], &n);
        } else if (run_file(argv[i]) == 0) {
            n++;
        } else {
            rc = -1;
        }
    }
    if (rc == 0 && n == 0) {
        fprintf(stderr, "fuzz replay: no input found in the arguments\n");
        rc = -1;
    }
    if (rc == 0) fprintf(stderr, "fuzz replay: %zu input(s) ran\n", n);
    return rc == 0 ? 0 : 1;
}
