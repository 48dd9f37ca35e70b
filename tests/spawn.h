/*
 * spawn.h — test helper: the end that the tests' spawn functions share, run in the forked
 * child once its signals and environment are set: stdin from /dev/null, stdout and stderr to
 * files (truncated; a NULL path keeps the parent's), then execv(argv[0], argv), or _exit(127)
 * when that fails. Header-only, as fmt.h: each test file that includes it gets its own copy.
 */
#ifndef TPROF_TEST_SPAWN_H
#define TPROF_TEST_SPAWN_H

#include <fcntl.h>
#include <unistd.h>

static __attribute__((unused, noreturn)) void spawn_exec(const char *const argv[],
                                                         const char *out_path,
                                                         const char *err_path) {
    int in = open("/dev/null", O_RDONLY);
    if (in >= 0) dup2(in, 0);
    const char *const paths[3] = {NULL, out_path, err_path};
    for (int to = 1; to <= 2; to++) {
        if (!paths[to]) continue;
        int fd = open(paths[to], O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) dup2(fd, to);
    }
    execv(argv[0], (char *const *)argv);
    _exit(127);
}

#endif
