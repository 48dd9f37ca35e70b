/*
 * exit_hooks.c — no events lost when a process leaves without exit(): `_exit` (Python's
 * os._exit, multiprocessing and DataLoader workers), `_Exit`, and the exec family replace
 * the process image without running atexit handlers. libtrainprof defines these symbols;
 * preloaded (trainprof run) or linked ahead of libc, the program's calls reach them. Each
 * finishes the session's file (flush and end record), then calls libc's own function.
 *
 * A vfork()ed child shares its parent's memory, and Python's subprocess uses vfork: its
 * exec must not touch the parent's session. The session remembers the pid that started it,
 * and the hooks do nothing in any other process. A failed exec leaves the session ended:
 * the rest of that process is not recorded.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

static void before_leaving(void) {
    if (atomic_load(&tprof__g_state) != TPROF__ON) return;
    if ((pid_t)syscall(SYS_getpid) != tprof__session_pid()) return; /* a vfork child */
    tprof_shutdown();
}

static void *next(const char *name) { return dlsym(RTLD_NEXT, name); }

TPROF_API void _exit(int status) {
    before_leaving();
    void (*real)(int) = (void (*)(int))next("_exit");
    if (real) real(status);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}

TPROF_API void _Exit(int status) {
    before_leaving();
    void (*real)(int) = (void (*)(int))next("_Exit");
    if (real) real(status);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execv_fn)(const char *, char *const[]);

TPROF_API int execve(const char *path, char *const argv[], char *const envp[]) {
    before_leaving();
    execve_fn real = (execve_fn)next("execve");
    return real ? real(path, argv, envp) : (int)syscall(SYS_execve, path, argv, envp);
}

TPROF_API int execv(const char *path, char *const argv[]) {
    before_leaving();
    execv_fn real = (execv_fn)next("execv");
    return real ? real(path, argv) : -1;
}

TPROF_API int execvp(const char *file, char *const argv[]) {
    before_leaving();
    execv_fn real = (execv_fn)next("execvp");
    return real ? real(file, argv) : -1;
}

TPROF_API int execvpe(const char *file, char *const argv[], char *const envp[]) {
    before_leaving();
    execve_fn real = (execve_fn)next("execvpe");
    return real ? real(file, argv, envp) : -1;
}

/* execl, execlp, execle: the variadic arguments as an array on the stack (never malloc: a
 * vfork()ed child shares its parent's heap), then the array forms above. */
static size_t count_args(va_list *ap) {
    va_list c;
    va_copy(c, *ap);
    size_t n = 1;
    while (va_arg(c, const char *)) n++;
    va_end(c);
    return n; /* arg0 and the others; the array needs one more slot for NULL */
}

/* Through a pointer, so the caller's list has advanced past the NULL (execle's envp). */
static void fill_args(char **argv, size_t n, const char *arg0, va_list *ap) {
    argv[0] = (char *)arg0;
    for (size_t i = 1; i <= n; i++) argv[i] = va_arg(*ap, char *); /* the last is the NULL */
}

TPROF_API int execl(const char *path, const char *arg, ...) {
    va_list ap;
    va_start(ap, arg);
    size_t n = count_args(&ap);
    char *argv[n + 1];
    fill_args(argv, n, arg, &ap);
    va_end(ap);
    return execv(path, argv);
}

TPROF_API int execlp(const char *file, const char *arg, ...) {
    va_list ap;
    va_start(ap, arg);
    size_t n = count_args(&ap);
    char *argv[n + 1];
    fill_args(argv, n, arg, &ap);
    va_end(ap);
    return execvp(file, argv);
}

TPROF_API int execle(const char *path, const char *arg, ...) {
    va_list ap;
    va_start(ap, arg);
    size_t n = count_args(&ap);
    char *argv[n + 1];
    fill_args(argv, n, arg, &ap);
    char *const *envp = va_arg(ap, char *const *);
    va_end(ap);
    return execve(path, argv, envp);
}
