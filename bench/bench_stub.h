/*
 * bench_stub.h — an empty function in libtprof_bench_stub.so (see bench_stub.c).
 */
#ifndef TPROF_BENCH_STUB_H
#define TPROF_BENCH_STUB_H

__attribute__((visibility("default"))) void tprof_bench_stub_call(const char *name);

#endif /* TPROF_BENCH_STUB_H */
