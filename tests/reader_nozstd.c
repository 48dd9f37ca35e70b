/*
 * reader_nozstd.c — the rank-file reader as a build without libzstd compiles it, for
 * test_zchunks_nozstd (tests/zchunks.cmake): that test's target defines TPROF_HAVE_ZSTD=1
 * for the packer it writes compressed chunks with, so the reader's own switch is set here.
 */
#undef TPROF_HAVE_ZSTD
#define TPROF_HAVE_ZSTD 0
#include "format/reader.c"
