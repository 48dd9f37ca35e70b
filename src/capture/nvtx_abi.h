/*
 * nvtx_abi.h — the NVTX v3 tool-injection ABI, declared here from the NVTX3 documentation
 * (our own minimal declarations, DESIGN §6.6; ids and layouts in reference/gpu-capture.md
 * §1, checked against the CUDA 13.0 headers). Used by the capture side (we are the tool:
 * nvtx_inject.c) and the emission side (we are the application: nvtx_emit.c).
 */
#ifndef TPROF_NVTX_ABI_H
#define TPROF_NVTX_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef void (*tnvtx_fn)(void);
typedef tnvtx_fn **tnvtx_table; /* array of pointers to the library's function slots */
typedef const void *(*tnvtx_get_export_table)(uint32_t id);

enum { TNVTX_ETID_CALLBACKS = 1, TNVTX_ETID_VERSIONINFO = 3 };
enum { TNVTX_MODULE_CORE = 1, TNVTX_MODULE_CORE2 = 5 };
enum { TNVTX_MSG_ASCII = 1, TNVTX_MSG_UNICODE = 2, TNVTX_MSG_REGISTERED = 3 };

typedef struct tnvtx_callbacks {
    size_t struct_size;
    int (*get_module_function_table)(int module, tnvtx_table *out_table, unsigned *out_size);
} tnvtx_callbacks;

typedef struct tnvtx_version_info {
    size_t struct_size;
    uint32_t version;
    uint32_t reserved0;
    void (*set_injection_version)(uint32_t version);
} tnvtx_version_info;

typedef struct tnvtx_attr { /* nvtxEventAttributes_v2 */
    uint16_t version;
    uint16_t size;
    uint32_t category;
    int32_t color_type;
    uint32_t color;
    int32_t payload_type;
    int32_t reserved0;
    uint64_t payload;
    int32_t message_type;
    const void *message; /* ascii, wchar_t*, or registered-string handle */
} tnvtx_attr;

/* Callback ids used by both sides (CORE and CORE2 modules). */
enum {
    TNVTX_CORE_MarkEx = 1, TNVTX_CORE_MarkA = 2, TNVTX_CORE_RangeStartEx = 4,
    TNVTX_CORE_RangeStartA = 5, TNVTX_CORE_RangeEnd = 7, TNVTX_CORE_RangePushEx = 8,
    TNVTX_CORE_RangePushA = 9, TNVTX_CORE_RangePop = 11, TNVTX_CORE_SIZE = 16,
    TNVTX_CORE2_DomainMarkEx = 1, TNVTX_CORE2_DomainRangeStartEx = 2,
    TNVTX_CORE2_DomainRangeEnd = 3, TNVTX_CORE2_DomainRangePushEx = 4,
    TNVTX_CORE2_DomainRangePop = 5, TNVTX_CORE2_DomainNameCategoryA = 8,
    TNVTX_CORE2_DomainCreateA = 12, TNVTX_CORE2_SIZE = 16
};

#define TNVTX_VERSION 3
#define TNVTX_ATTR_SIZE ((uint16_t)sizeof(tnvtx_attr))

#endif /* TPROF_NVTX_ABI_H */
