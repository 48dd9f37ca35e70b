/*
 * mpi_inert_prog.c — libtrainprof_mpi.so in a process with no MPI library at all, as in
 * every non-MPI process `trainprof run` preloads it into: loading it must change nothing,
 * and an MPI_* entry point called anyway (a library probing for MPI with dlsym) must return
 * an MPI error code, not crash. Links no MPI. usage: mpi_inert_prog LIBTRAINPROF_MPI.
 * Exit 0 when all holds. (The stub-MPI case is tests/mpi_stub.c, run with the library
 * preloaded as `trainprof run` does.)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    if (dlopen("libmpi.so.40", RTLD_LAZY | RTLD_NOLOAD)) {
        fprintf(stderr, "mpi_inert_prog: libmpi is loaded; this test needs a process without\n");
        return 1;
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        fprintf(stderr, "mpi_inert_prog: %s\n", dlerror());
        return 1;
    }
    int (*init)(int *, char ***) = (int (*)(int *, char ***))dlsym(h, "MPI_Init");
    int (*barrier)(void *) = (int (*)(void *))dlsym(h, "MPI_Barrier");
    int (*finalize)(void) = (int (*)(void))dlsym(h, "MPI_Finalize");
    if (!init || !barrier || !finalize) {
        fprintf(stderr, "mpi_inert_prog: wrappers not exported\n");
        return 1;
    }
    /* Open MPI's MPI_ERR_OTHER is 16 */
    int a = init(NULL, NULL), b = barrier(NULL), c = finalize();
    printf("mpi_inert_prog: no MPI: MPI_Init %d, MPI_Barrier %d, MPI_Finalize %d\n", a, b, c);
    return a == 16 && b == 16 && c == 16 ? 0 : 1;
}
