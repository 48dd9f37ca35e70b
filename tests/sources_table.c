/* src/capture/sources.c's table under another name, so that test_sources can hold it beside
 * the fake table it gives core's loops. Built without TPROF_HAVE_CUPTI. */
#define tprof__sources tprof__capture_sources
#include "../src/capture/sources.c"
