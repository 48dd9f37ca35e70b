/*
 * mpi_stub.c — a stand-in for the MPI stub libraries of serial builds: MPI_* functions that
 * succeed and do nothing, and no PMPI_* ones. Built twice: as the library libmpi_stub_test.so,
 * and with -DSTUB_MAIN as mpi_stub_user, a program linked against it. test_mpi_stub runs the
 * program with libtrainprof_mpi.so preloaded (as `trainprof run` does): each call must still
 * reach the stub and return its MPI_SUCCESS (0). Exit 0 when it does.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#define STUB __attribute__((visibility("default")))
STUB int MPI_Init(int *argc, char ***argv);
STUB int MPI_Barrier(void *comm);
STUB int MPI_Finalize(void);

#ifndef STUB_MAIN
STUB int MPI_Init(int *argc, char ***argv) { (void)argc; (void)argv; return 0; }
STUB int MPI_Barrier(void *comm) { (void)comm; return 0; }
STUB int MPI_Finalize(void) { return 0; }
#else
int main(void) {
    /* the wrappers must be in front of the stub, or this test proves nothing */
    Dl_info info;
    void *f = dlsym(RTLD_DEFAULT, "MPI_Barrier");
    if (!f || !dladdr(f, &info) || !strstr(info.dli_fname, "libtrainprof_mpi")) {
        fprintf(stderr, "mpi_stub_user: MPI_Barrier is not libtrainprof_mpi's (%s)\n",
                f && dladdr(f, &info) ? info.dli_fname : "?");
        return 1;
    }
    int a = MPI_Init(NULL, NULL), b = MPI_Barrier(NULL), c = MPI_Finalize();
    printf("mpi_stub_user: MPI_Init %d, MPI_Barrier %d, MPI_Finalize %d\n", a, b, c);
    return a || b || c;
}
#endif
