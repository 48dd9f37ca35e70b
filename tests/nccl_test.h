/*
 * nccl_test.h — helpers the two NCCL plugin tests share (test_nccl.c, test_nccl_compat.c):
 * a sleep, and the loaded process's COMM_OP records by name (and communicator).
 * Include after <time.h>, <errno.h>, <string.h> and "analysis/model.h".
 */
#ifndef TPROF_TEST_NCCL_H
#define TPROF_TEST_NCCL_H

static inline void sleep_ms(int ms) {
    struct timespec ts = {0, ms * 1000000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

/* how many ops of p are named `name` */
static inline size_t count_ops(const tp_process *p, const char *name) {
    size_t n = 0;
    for (size_t i = 0; i < p->ncomm; i++)
        if (!strcmp(p->comm[i].name, name)) n++;
    return n;
}

/* the first op of p named `name` on communicator `hash`, or NULL */
static inline const tp_comm_op *find_op(const tp_process *p, const char *name, uint64_t hash) {
    for (size_t i = 0; i < p->ncomm; i++)
        if (!strcmp(p->comm[i].name, name) && p->comm[i].comm_hash == hash) return &p->comm[i];
    return NULL;
}

#endif /* TPROF_TEST_NCCL_H */
