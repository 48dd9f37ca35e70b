/*
 * exit_prog.c — leaves in the ways atexit handlers do not see, after recording 20 ranges:
 *   exit_prog _exit       _exit(0)
 *   exit_prog exec        execl("/bin/true")
 *   exit_prog vfork       a vfork()ed child execs /bin/true; the parent records 20 more
 *                         ranges and exits normally (the child must not end its session)
 * Run with TRAINPROF_DIR set (and TRAINPROF_SAMPLE_HZ=0).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "trainprof.h"

static void work(const char *name, int n) {
    for (int i = 0; i < n; i++) {
        tprof_range_push(name);
        tprof_range_pop();
    }
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    work("before", 20);
    if (!strcmp(argv[1], "_exit")) _exit(0);
    if (!strcmp(argv[1], "exec")) {
        execl("/bin/true", "true", (char *)NULL);
        return 3;
    }
    if (!strcmp(argv[1], "vfork")) {
        pid_t pid = vfork();
        if (pid == 0) {
            execl("/bin/true", "true", (char *)NULL);
            _exit(127);
        }
        int st;
        waitpid(pid, &st, 0);
        work("after", 20);
        return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 4;
    }
    return 2;
}
