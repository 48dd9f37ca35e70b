/*
 * nvtx_prog.c — an independent program that knows nothing of trainprof: it uses only the
 * NVTX3 headers (header-only, from the CUDA toolkit), as PyTorch or NCCL do. The NVTX
 * integration test runs it under `trainprof run` and checks the exported trace.
 *
 * What it records (the test asserts each): thread names; "outer" containing three 10 ms
 * "sleep_10ms" and a wide-string range; a range in the named domain "mydomain" with a
 * registered string and a named category, on a second thread named "worker"; a
 * start/end range begun on the main thread and ended on the worker; a mark; a pop with
 * nothing pushed; and "left_open", never closed.
 *
 * Through the payload extension, in the domain "payloads" (as NCCL does it: a range pushed
 * through the core API and popped with nvtxRangePopPayload): "core_push_payload_pop"
 * around a 2 ms sleep; a payload-only range and a payload-only mark, which a tool can only
 * name after their schema, "StaticSchema" (a static id) and "DynamicSchema" (an id the
 * tool hands out, at least 1 << 32); and a start/end pair with payloads. A schema registered
 * 5000 times, then "LateSchema", used by a mark: named so. Push and pop return levels per
 * domain (levels(): "level_default" in the default domain, "level_x0" and "level_x1" in
 * the domain "levels").
 */
#define _GNU_SOURCE
#include <errno.h>
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtPayload.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static nvtxRangeId_t g_cross;
static nvtxDomainHandle_t g_domain;

static void sleep_ms(int ms) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += (long)ms * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

static void *worker(void *arg) {
    (void)arg;
    nvtxNameOsThreadA((uint32_t)syscall(SYS_gettid), "worker");
    nvtxStringHandle_t reg = nvtxDomainRegisterStringA(g_domain, "registered_work");
    nvtxEventAttributes_t a = {0};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.category = 5;
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = reg;
    nvtxDomainRangePushEx(g_domain, &a);
    sleep_ms(3);
    nvtxDomainRangePop(g_domain);
    nvtxRangeEnd(g_cross);
    return NULL;
}

/* The payload extension's calls. Exits 1 if a tool that is attached gets the schema ids
 * wrong; without a tool every call is a no-op returning 0. */
static void payloads(void) {
    nvtxDomainHandle_t d = nvtxDomainCreateA("payloads");
    static const nvtxPayloadSchemaEntry_t entries[] = {
        {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "commhash", NULL, 0, 0, NULL, NULL},
        {0, NVTX_PAYLOAD_ENTRY_TYPE_INT, "nranks", NULL, 0, 0, NULL, NULL},
    };
    struct pl { uint64_t commhash; int nranks; } value = {0x1234, 8};
    const uint64_t static_id = NVTX_PAYLOAD_SCHEMA_ID_STATIC_START + 7;
    nvtxPayloadSchemaAttr_t sa = {0};
    sa.fieldMask = NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NAME | NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_TYPE |
                   NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_ENTRIES |
                   NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NUM_ENTRIES |
                   NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_STATIC_SIZE |
                   NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_SCHEMA_ID;
    sa.name = "StaticSchema";
    sa.type = NVTX_PAYLOAD_SCHEMA_TYPE_STATIC;
    sa.entries = entries;
    sa.numEntries = 2;
    sa.payloadStaticSize = sizeof value;
    sa.schemaId = static_id;
    uint64_t got = nvtxPayloadSchemaRegister(d, &sa);
    sa.fieldMask &= ~(uint64_t)NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_SCHEMA_ID;
    sa.name = "DynamicSchema";
    uint64_t dyn = nvtxPayloadSchemaRegister(d, &sa);
    int tool = nvtxDomainIsEnabled(d) && got != 0;
    if (tool && (got != static_id || dyn < NVTX_PAYLOAD_SCHEMA_ID_DYNAMIC_START)) {
        fprintf(stderr, "nvtx_prog: schema ids %llu (want %llu) and %llu\n",
                (unsigned long long)got, (unsigned long long)static_id,
                (unsigned long long)dyn);
        exit(1);
    }
    /* the same schema registered 5000 times (as a library might per call) takes one entry
     * of the tool's table, so a schema registered after it still gets its name; a static
     * id in the dynamic range is never handed out again as a dynamic one */
    sa.fieldMask |= NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_SCHEMA_ID;
    sa.name = "Repeated";
    sa.schemaId = NVTX_PAYLOAD_SCHEMA_ID_STATIC_START + 8;
    for (int i = 0; i < 5000; i++) nvtxPayloadSchemaRegister(d, &sa);
    sa.name = "LateSchema";
    sa.schemaId = NVTX_PAYLOAD_SCHEMA_ID_STATIC_START + 9;
    nvtxPayloadSchemaRegister(d, &sa);
    sa.name = "StaticHigh";
    sa.schemaId = dyn + 1;
    uint64_t high = nvtxPayloadSchemaRegister(d, &sa);
    sa.fieldMask &= ~(uint64_t)NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_SCHEMA_ID;
    sa.name = "DynamicAfter";
    uint64_t after = nvtxPayloadSchemaRegister(d, &sa);
    if (tool && (high != dyn + 1 || after == high || after == dyn)) {
        fprintf(stderr, "nvtx_prog: dynamic id %llu repeats a taken one\n",
                (unsigned long long)after);
        exit(1);
    }
    nvtxPayloadData_t late = {NVTX_PAYLOAD_SCHEMA_ID_STATIC_START + 9, sizeof value, &value};
    nvtxMarkPayload(d, &late, 1);
    nvtxPayloadData_t data = {static_id, sizeof value, &value};
    /* NCCL's pattern */
    nvtxEventAttributes_t a = {0};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = "core_push_payload_pop";
    nvtxDomainRangePushEx(d, &a);
    sleep_ms(2);
    nvtxRangePopPayload(d, &data, 1);
    /* payload-only events */
    nvtxRangePushPayload(d, &data, 1);
    nvtxPayloadData_t dyn_data = {dyn, sizeof value, &value};
    nvtxMarkPayload(d, &dyn_data, 1);
    nvtxDomainRangePop(d);
    nvtxRangeId_t id = nvtxRangeStartPayload(d, &dyn_data, 1);
    sleep_ms(1);
    nvtxRangeEndPayload(d, id, &data, 1);
}

/* NVTX's push and pop return levels per domain: a push in one domain does not deepen
 * another. Exits 1 if an attached tool (one that returns a level at all) counts them
 * together; without a tool every call returns a negative value. */
static void levels(void) {
    nvtxDomainHandle_t x = nvtxDomainCreateA("levels");
    nvtxEventAttributes_t a = {0};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    int got[6];
    got[0] = nvtxRangePushA("level_default");
    a.message.ascii = "level_x0";
    got[1] = nvtxDomainRangePushEx(x, &a);
    a.message.ascii = "level_x1";
    got[2] = nvtxDomainRangePushEx(x, &a);
    got[3] = nvtxDomainRangePop(x);
    got[4] = nvtxRangePop();
    got[5] = nvtxDomainRangePop(x);
    static const int want[6] = {0, 0, 1, 1, 0, 0};
    for (int i = 0; got[0] >= 0 && i < 6; i++)
        if (got[i] != want[i]) {
            fprintf(stderr, "nvtx_prog: NVTX level %d: got %d, want %d\n", i, got[i], want[i]);
            exit(1);
        }
}

int main(void) {
    nvtxRangePop(); /* nothing pushed: must be tolerated */
    nvtxNameOsThreadA((uint32_t)syscall(SYS_gettid), "main");
    g_domain = nvtxDomainCreateA("mydomain");
    nvtxDomainNameCategoryA(g_domain, 5, "io");
    nvtxRangePushA("outer");
    /* the program's own clock around each push..pop goes to $NVTX_PROG_TRUTH, so the test
     * can check the captured durations against it (within 1 ms) on a loaded machine too */
    const char *truth_path = getenv("NVTX_PROG_TRUTH");
    FILE *truth = truth_path ? fopen(truth_path, "w") : NULL;
    for (int i = 0; i < 3; i++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        nvtxRangePushA("sleep_10ms");
        sleep_ms(10);
        nvtxRangePop();
        clock_gettime(CLOCK_MONOTONIC, &b);
        if (truth)
            fprintf(truth, "%.3f\n", (double)(b.tv_sec - a.tv_sec) * 1e6 +
                                         (double)(b.tv_nsec - a.tv_nsec) / 1e3);
    }
    if (truth) fclose(truth);
    nvtxRangePushW(L"wide_\u00fc");
    nvtxMarkA("checkpoint");
    nvtxRangePop();
    g_cross = nvtxRangeStartA("cross_thread");
    pthread_t th;
    pthread_create(&th, NULL, worker, NULL);
    pthread_join(th, NULL);
    nvtxRangePop(); /* outer */
    levels();
    payloads();
    nvtxRangePushA("left_open");
    printf("nvtx_prog done\n");
    return 0;
}
