/*
 * bench_stub.c — an empty function in a shared library of its own, so that bench_ranges
 * can print what any out-of-line call into a shared library (PLT jump, call, return)
 * costs on this machine, next to the disabled API that pays the same.
 */
#include "bench_stub.h"

void tprof_bench_stub_call(const char *name) { (void)name; }
