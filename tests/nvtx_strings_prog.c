/*
 * nvtx_strings_prog.c — many NVTX registered strings, from a program that knows only the
 * NVTX3 headers (as nvtx_prog.c). `nvtx_strings_prog N` registers "reg_0" ... "reg_<N-1>" in
 * the domain "strings", registers "reg_0" once more (a tool deduplicates: the same handle,
 * else exit 1), then pushes and pops one range named by each handle, in order, on the main
 * thread, and `EXTRA` (4) more ranges named by the handle of reg_<N-1>. So a report holds
 * reg_0 ... reg_<N-2> once each and reg_<N-1> EXTRA + 1 times, and an attached tool sees
 * N + 1 registrations.
 */
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <stdlib.h>

#define EXTRA 4

static void push_registered(nvtxDomainHandle_t d, nvtxStringHandle_t h) {
    nvtxEventAttributes_t a = {0};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = h;
    nvtxDomainRangePushEx(d, &a);
    nvtxDomainRangePop(d);
}

int main(int argc, char **argv) {
    long n = argc == 2 ? atol(argv[1]) : 0;
    if (n < 1) {
        fprintf(stderr, "usage: nvtx_strings_prog N (N >= 1)\n");
        return 2;
    }
    nvtxDomainHandle_t d = nvtxDomainCreateA("strings");
    nvtxStringHandle_t *h = malloc((size_t)n * sizeof *h);
    if (!h) return 2;
    char name[32];
    for (long i = 0; i < n; i++) {
        snprintf(name, sizeof name, "reg_%ld", i);
        h[i] = nvtxDomainRegisterStringA(d, name);
    }
    snprintf(name, sizeof name, "reg_%d", 0);
    if (nvtxDomainRegisterStringA(d, name) != h[0]) {
        fprintf(stderr, "nvtx_strings_prog: reg_0 registered twice got two handles\n");
        return 1;
    }
    for (long i = 0; i < n; i++) push_registered(d, h[i]);
    for (int k = 0; k < EXTRA; k++) push_registered(d, h[n - 1]);
    free(h);
    return 0;
}
