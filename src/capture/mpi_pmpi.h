/*
 * mpi_pmpi.h — what libtrainprof_mpi.so (capture/mpi_pmpi.c, the PMPI wrappers) exports
 * besides the MPI_* entry points themselves: the communicator-id function, so that a test
 * or an analysis tool can compute the id a communicator of known members gets (docs/mpi.md).
 * It is internal (prefix tprof__, not in trainprof.h, header not installed): its signature
 * may change with the library, like the bridge in capture/comm_ext.h.
 *
 * Nothing here needs mpi.h: the library is built against Open MPI, but this header is plain C.
 */
#ifndef TPROF_MPI_PMPI_H
#define TPROF_MPI_PMPI_H

#include <stdint.h>

#define TPROF_MPI_API __attribute__((visibility("default")))

/* Ordinal of a communicator first seen in an operation rather than at its creation (made by a
 * call the library does not wrap, e.g. MPI_Comm_idup or MPI_Graph_create). */
#define TPROF_MPI_ORDINAL_LAZY 0xFFFFFFFFu
/* Ordinal when the table of member lists is full (ids of equal member lists may then merge). */
#define TPROF_MPI_ORDINAL_FULL 0xFFFFFFFEu

/* The id (the COMM_OP records' comm_hash) of a communicator whose members, in the order of
 * their ranks in it, have the MPI_COMM_WORLD ranks world_ranks[0..n-1]; for an
 * inter-communicator also the remote group's, remote_ranks[0..rn-1] (NULL, 0 for an
 * intra-communicator; the two groups may be given either way round: both sides get the same
 * id). `ordinal` is k when this is the (k+1)-th communicator with this member list (the same
 * local and remote lists) that the process created, counting MPI_COMM_WORLD (ordinal 0, made
 * at MPI_Init) and then MPI_COMM_SELF; TPROF_MPI_ORDINAL_LAZY for one first seen in use.
 * Every member computes the same value, so ids match across ranks. Never 0. Pure function:
 * thread safe, no allocation; cost O(n + rn). */
TPROF_MPI_API uint64_t tprof__mpi_comm_id(const int *world_ranks, int n, const int *remote_ranks,
                                          int rn, uint32_t ordinal);

#endif /* TPROF_MPI_PMPI_H */
