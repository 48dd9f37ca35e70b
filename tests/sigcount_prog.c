/*
 * sigcount_prog.c — the job tests/cli_signals.py runs bare and under `trainprof run` to
 * count the SIGINTs, SIGTERMs and SIGUSR1s that reach it: the counts and the exit status of
 * the two must be equal, whoever sends the signal (the terminal, a kill of the process
 * group, a kill of the launcher alone).
 *
 *   sigcount_prog FILE [read]
 *
 * Writes "ready PID" to FILE (through a renamed temporary file, so the reader never sees
 * a part of it); with "read", then reads one line from standard input (the terminal in the
 * pty cases) and appends "line TEXT". Then it waits for the first SIGINT, SIGTERM or
 * SIGUSR1, waits 500 ms more, so that a second copy of the signal has arrived if one was
 * sent, appends "int N term M usr1 K" and exits with N + M + K: 1 when the signal reached it
 * once.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t n_int, n_term, n_usr1;

static void on_signal(int sig) {
    if (sig == SIGINT) n_int++;
    else if (sig == SIGUSR1) n_usr1++;
    else n_term++;
}

static void put(const char *file, const char *mode, const char *text) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", file);
    if (mode[0] == 'a') { /* append: copy, add, rename */
        FILE *in = fopen(file, "r"), *out = fopen(tmp, "w");
        if (!out) exit(90);
        char buf[4096];
        size_t k;
        while (in && (k = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, k, out);
        if (in) fclose(in);
        fputs(text, out);
        if (fclose(out) != 0) exit(91);
    } else {
        FILE *out = fopen(tmp, "w");
        if (!out) exit(90);
        fputs(text, out);
        if (fclose(out) != 0) exit(91);
    }
    if (rename(tmp, file) != 0) exit(92);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: sigcount_prog FILE [read]\n");
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGUSR1);
    sigprocmask(SIG_BLOCK, &block, &old);

    char text[512];
    snprintf(text, sizeof text, "ready %d\n", (int)getpid());
    put(argv[1], "w", text);
    if (argc > 2 && !strcmp(argv[2], "read")) {
        char line[256] = "";
        sigprocmask(SIG_SETMASK, &old, NULL); /* the read may be interrupted: not here */
        while (!fgets(line, sizeof line, stdin) && errno == EINTR && !feof(stdin)) clearerr(stdin);
        sigprocmask(SIG_BLOCK, &block, NULL);
        line[strcspn(line, "\r\n")] = 0;
        snprintf(text, sizeof text, "line %s\n", line);
        put(argv[1], "a", text);
    }
    while (n_int + n_term + n_usr1 == 0) sigsuspend(&old);
    sigprocmask(SIG_SETMASK, &old, NULL);
    struct timespec ts = {0, 500000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
    snprintf(text, sizeof text, "int %d term %d usr1 %d\n", (int)n_int, (int)n_term,
             (int)n_usr1);
    put(argv[1], "a", text);
    return n_int + n_term + n_usr1;
}
