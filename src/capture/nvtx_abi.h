/*
 * nvtx_abi.h — the NVTX v3 tool-injection ABI, declared here from the NVTX3 documentation (our
 * own minimal declarations, docs/design.md §6.6; ids and layouts from the NVTX3 headers
 * nvtx3/nvtxDetail/nvtxInit.h and nvtxTypes.h, checked against those of CUDA 13.0). Used by the
 * capture side (we are the tool: nvtx_inject.c) and the emission side (we are the application:
 * core/nvtx_emit.c).
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

/* Extension modules (nvtxExtTypes.h, nvtxExtInit.h): on its first call into an extension
 * (payload, counters, memory, ...), an NVTX-instrumented library looks up
 * InitializeInjectionNvtxExtension in the injection library and passes one module's
 * description: a segment of function slots indexed by callback id, to be filled with the
 * tool's handlers (slots left alone become no-ops). */
typedef struct tnvtx_ext_segment {
    size_t segment_id;
    size_t slot_count;
    intptr_t *slots;
} tnvtx_ext_segment;

typedef struct tnvtx_ext_module {
    uint16_t nvtx_version;
    uint16_t struct_size;
    uint16_t module_id;
    uint16_t compat_id; /* 0x01xx for the payload extension's first slot layout */
    size_t segments_count;
    tnvtx_ext_segment *segments;
    intptr_t (*get_export_function)(uint32_t id);
    const void *ext_info;
} tnvtx_ext_module;

enum { TNVTX_EXT_MODULE_PAYLOAD = 2 };

/* the payload extension's callback ids (nvToolsExtPayload.h, NVTX3EXT_CBID_*) */
enum {
    TNVTX_PL_SchemaRegister = 0, TNVTX_PL_EnumRegister = 1, TNVTX_PL_MarkPayload = 2,
    TNVTX_PL_RangePushPayload = 3, TNVTX_PL_RangePopPayload = 4,
    TNVTX_PL_RangeStartPayload = 5, TNVTX_PL_RangeEndPayload = 6,
    TNVTX_PL_DomainIsEnabled = 7
};

typedef struct tnvtx_payload_data { /* nvtxPayloadData_t */
    uint64_t schema_id;
    size_t size;
    const void *payload;
} tnvtx_payload_data;

typedef struct tnvtx_schema_attr { /* nvtxPayloadSchemaAttr_t (v1) */
    uint64_t field_mask;
    const char *name;
    uint64_t type;
    uint64_t flags;
    const void *entries;
    size_t num_entries;
    size_t static_size;
    size_t pack_align;
    uint64_t schema_id;
    void *extension;
} tnvtx_schema_attr;

typedef struct tnvtx_enum_attr { /* nvtxPayloadEnumAttr_t (v1) */
    uint64_t field_mask;
    const char *name;
    const void *entries;
    size_t num_entries;
    size_t size_of_enum;
    uint64_t schema_id;
    void *extension;
} tnvtx_enum_attr;

#define TNVTX_SCHEMA_FIELD_NAME (1u << 1)
#define TNVTX_SCHEMA_FIELD_SCHEMA_ID (1u << 8)
#define TNVTX_ENUM_FIELD_NAME (1u << 1)
#define TNVTX_ENUM_FIELD_SCHEMA_ID (1u << 5)
#define TNVTX_SCHEMA_ID_DYNAMIC_START (1ull << 32) /* ids the tool hands out start here */

_Static_assert(offsetof(tnvtx_ext_module, module_id) == 4 &&
                   offsetof(tnvtx_ext_module, segments_count) == 8 &&
                   offsetof(tnvtx_ext_module, segments) == 16 &&
                   offsetof(tnvtx_ext_module, get_export_function) == 24 &&
                   sizeof(tnvtx_ext_module) == 40,
               "nvtxExtModuleInfo_t layout");
_Static_assert(offsetof(tnvtx_ext_segment, slots) == 16, "nvtxExtModuleSegment_t layout");
_Static_assert(sizeof(tnvtx_payload_data) == 24, "nvtxPayloadData_t layout");
_Static_assert(offsetof(tnvtx_schema_attr, name) == 8 &&
                   offsetof(tnvtx_schema_attr, schema_id) == 64 &&
                   sizeof(tnvtx_schema_attr) == 80,
               "nvtxPayloadSchemaAttr_t layout");
_Static_assert(offsetof(tnvtx_enum_attr, schema_id) == 40 && sizeof(tnvtx_enum_attr) == 56,
               "nvtxPayloadEnumAttr_t layout");

#define TNVTX_VERSION 3
#define TNVTX_ATTR_SIZE ((uint16_t)sizeof(tnvtx_attr))

#endif /* TPROF_NVTX_ABI_H */
