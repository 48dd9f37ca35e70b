/*
 * version.c — the functions of include/trainprof.h that need no session: error names,
 * version and build line. Compiled into the runtime (libtrainprof) and into the offline
 * analysis (tprof_analysis), whose reports carry the version, so that the analysis does not
 * link the runtime library (docs/design.md §2.3). Pure functions of constants: thread safe,
 * async-signal-safe, no allocation; the strings are static and owned by the library.
 */
#include "trainprof.h"

const char *tprof_strerror(int err) {
    switch (err) {
#define TPROF__ERR_CASE(name, value, text) \
    case value:                            \
        return text;
        TPROF_ERROR_TABLE(TPROF__ERR_CASE)
#undef TPROF__ERR_CASE
    }
    return "unknown error";
}

const char *tprof_version(void) { return TPROF_VERSION_STRING; }

#ifndef TPROF_BUILD_TYPE
#define TPROF_BUILD_TYPE "unknown"
#endif
#ifndef TPROF_CUDA_HEADERS
#define TPROF_CUDA_HEADERS "no"
#endif

const char *tprof_build_info(void) {
    return "trainprof " TPROF_VERSION_STRING " (" TPROF_BUILD_TYPE ", "
#if defined(__clang__)
           "clang " __clang_version__
#elif defined(__GNUC__)
           "gcc " __VERSION__
#else
           "cc"
#endif
           ", CUDA headers at build: " TPROF_CUDA_HEADERS ")";
}
