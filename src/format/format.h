/*
 * format.h — the on-disk layout of .tprof rank files (docs/format.md is the prose version).
 *
 * Shared by the writer in the library (whose per-thread rings hold records already in this
 * layout, so flushing is a copy) and by the reader used by the command line. Everything is
 * little-endian, 8-byte aligned, and versioned by TPROF_FORMAT_VERSION; record kinds are
 * append-only and readers skip kinds they do not know by their size field.
 */
#ifndef TPROF_FORMAT_H
#define TPROF_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TPROF_FILE_MAGIC "TPROFRK\n"
/* Version 2 adds zstd-compressed chunks (TPROF_CHUNK_F_ZSTD); a file holding none is written
 * as version 1, so that readers of version 1 still read it. Readers take every version from
 * TPROF_FORMAT_VERSION_MIN up to TPROF_FORMAT_VERSION. */
#define TPROF_FORMAT_VERSION 2u
#define TPROF_FORMAT_VERSION_MIN 1u
#define TPROF_CHUNK_MAGIC 0x48435054u /* "TPCH" little-endian */

/* File header: what is known when the file opens. Fixed size; header_bytes lets a later
 * version grow it. header_crc covers the bytes before it. */
typedef struct tprof_file_header {
    char magic[8];
    uint32_t version;
    uint32_t header_bytes;
    uint64_t start_realtime_ns; /* CLOCK_REALTIME and CLOCK_MONOTONIC read back to back */
    uint64_t start_mono_ns;
    int32_t pid;
    int32_t ppid;
    char host[64];
    char run_id[64];
    char build[64];
    uint32_t header_crc;
    uint32_t reserved;
} tprof_file_header;

/* Chunk header, followed by payload_bytes of records from one thread (serial 0 is the
 * process stream: metadata, domains, categories, the end record). crc32 (zlib polynomial)
 * covers the payload as stored (for a compressed chunk: its prefix, the zstd frame and the
 * padding). dropped is the thread's cumulative count of events lost to a full ring at the
 * time of the flush. flags: TPROF_CHUNK_F_ZSTD, other bits 0 (readers ignore them). */
typedef struct tprof_chunk_header {
    uint32_t magic;
    uint32_t payload_bytes;
    uint32_t crc32;
    uint32_t thread_serial;
    uint32_t os_tid;
    uint32_t flags;
    uint64_t dropped;
} tprof_chunk_header;

/* flags bit 0: the payload is a tprof_zchunk prefix, then one zstd frame (RFC 8878) holding
 * the chunk's records, then zero bytes up to a multiple of 8. Each frame stands alone (no
 * dictionary, no state shared with other chunks), so any whole chunk decompresses by itself.
 * payload_bytes = sizeof(tprof_zchunk) + align8(zstd_bytes). */
#define TPROF_CHUNK_F_ZSTD 1u

/* The records of one chunk, uncompressed, never exceed this: the writer's chunks are at most
 * 4 MiB (one ring lap or the process stream's bound), and a reader refuses to decompress a
 * chunk that claims more, so that a hostile header cannot make it allocate without bound. */
#define TPROF_CHUNK_RAW_MAX (16u << 20)

typedef struct tprof_zchunk {
    uint32_t raw_bytes;  /* the records' length once decompressed: a multiple of 8, at most
                          * TPROF_CHUNK_RAW_MAX; the frame's content size must equal it */
    uint32_t zstd_bytes; /* the frame's length; the padding after it is not part of it */
} tprof_zchunk;

/* Common record header. size is the whole record in bytes (header included, multiple of 8,
 * at least 8 for PAD). `arg` is kind-specific: for named records the string id, or
 * TPROF_INLINE_NAME when the name follows the fixed payload as a NUL-terminated string. */
typedef struct tprof_rec {
    uint16_t kind;
    uint16_t size;
    uint32_t arg;
    uint64_t ts_ns;
} tprof_rec;

/* No clock reading reaches 2^62 ns (146 years of CLOCK_MONOTONIC uptime; CLOCK_REALTIME in
 * the year 2116): a time at or above it is damage. Readers skip records holding one, so
 * that a difference of two times always fits an int64_t with room for a third term. */
#define TPROF_TIME_MAX ((uint64_t)1 << 62)

#define TPROF_INLINE_NAME 0xFFFFFFFFu
#define TPROF_POP_ANY 0xFFFFFFFFu /* tprof_range_pop(): close the thread's innermost range */
#define TPROF_MAX_RECORD 65528u  /* largest size field value (multiple of 8) */
#define TPROF_MAX_INLINE 4000u   /* longer names are truncated */
/* A metadata list longer than one value (the capture windows, the capture pauses) goes on
 * in pages: KEY, then KEY.2, KEY.3, ... up to this many, each page whole entries; readers
 * join the pages in order and read no more than this many (docs/format.md). */
#define TPROF_META_PAGES 64u
/* Page `page` (from 1) of list `key`'s metadata key into buf (n bytes): KEY, or KEY.page.
 * snprintf's count: the key was cut when it is n or more. */
static inline int tprof__meta_page_key(char *buf, size_t n, const char *key, unsigned page) {
    return page == 1 ? snprintf(buf, n, "%s", key) : snprintf(buf, n, "%s.%u", key, page);
}

/* The registry of kinds (docs/format.md). Payload after the 16-byte header: */
enum tprof_rec_kind {
    TPROF_REC_PAD = 0,         /* filler to the end of a ring lap; may be 8 bytes long */
    TPROF_REC_STRING = 1,      /* arg=id (per thread, from 1); chars NUL-terminated */
    TPROF_REC_PUSH = 2,        /* arg=name; u32 domain, u32 category; [inline name] */
    TPROF_REC_POP = 3,         /* arg=domain, or TPROF_POP_ANY: innermost of any domain */
    TPROF_REC_START = 4,       /* arg=name; u64 id, u32 domain, u32 category; [inline] */
    TPROF_REC_END = 5,         /* u64 id */
    TPROF_REC_MARK = 6,        /* arg=name; u32 domain, u32 category; [inline] */
    TPROF_REC_COUNTER = 7,     /* arg=name; f64 value; [inline] */
    TPROF_REC_STEP_BEGIN = 8,  /* u64 step */
    TPROF_REC_STEP_END = 9,    /* u64 step */
    TPROF_REC_META = 10,       /* key NUL value NUL */
    TPROF_REC_THREAD_NAME = 11,/* u64 os_tid; name NUL */
    TPROF_REC_DOMAIN = 12,     /* arg=domain id (process-wide, 0 = default); name NUL */
    TPROF_REC_CATEGORY = 13,   /* arg=category; u32 domain, u32 pad; name NUL */
    TPROF_REC_CLOCK = 14,      /* u64 realtime_ns, u64 mono_ns */
    TPROF_REC_END_OF_FILE = 15,/* u64 realtime_ns, u64 mono_ns, u64 dropped_total */
    /* GPU activity from CUPTI (capture/cupti.c); ts_ns = start on CLOCK_MONOTONIC */
    TPROF_REC_GPU_KERNEL = 16, /* arg=name; tprof_pl_gpu */
    TPROF_REC_GPU_MEMCPY = 17, /* tprof_pl_gpu (bytes, copy kind in `kind`) */
    TPROF_REC_GPU_MEMSET = 18, /* tprof_pl_gpu (bytes) */
    TPROF_REC_GPU_MEMORY = 19, /* tprof_pl_gpu_mem: device allocation or release */
    TPROF_REC_GPU_SYNC = 20,   /* tprof_pl_gpu (sync type in `kind`) */
    TPROF_REC_GPU_API = 21,    /* arg=API function name; tprof_pl_gpu (cbid in `kind`,
                                * calling thread in `os_tid`; device/stream unused) */
    TPROF_REC_GPU_DROPS = 22,  /* u64: CUPTI records CUPTI itself dropped, cumulative */
    /* communication (capture/nccl_plugin.c); ts_ns = start on CLOCK_MONOTONIC */
    TPROF_REC_COMM_OP = 23,    /* arg=op name; tprof_pl_comm */
    TPROF_REC_GPU_OVERHEAD = 24, /* arg=what CUPTI did ("CUPTI buffer flush", ...);
                                  * tprof_pl_gpu (CUPTI's overhead kind in `kind`, the thread
                                  * in `os_tid` or the device in `device` when CUPTI names one,
                                  * else 0 and TPROF_DEVICE_UNKNOWN) */
    TPROF_REC_KIND_COUNT
};

/* One GPU interval (kernel, copy, memset, sync, API call). */
#define TPROF_DEVICE_UNKNOWN 0xFFFFFFFFu /* `device` of a record whose source names none */

typedef struct tprof_pl_gpu {
    uint64_t end_ns;
    uint64_t bytes;       /* copies and memsets */
    uint32_t device;      /* CUDA device ordinal; synchronisations: the device of the
                           * context's kernels and copies seen so far, else
                           * TPROF_DEVICE_UNKNOWN (CUPTI gives a context, not a device: readers
                           * prefer the device of the work on the same stream, and trust this
                           * one only with the metadata cupti.sync_device=context) */
    uint32_t stream;
    uint32_t correlation; /* CUPTI correlation id: links a launch API call to its work */
    uint32_t kind;        /* copy kind (1 HtoD, 2 DtoH, 8 DtoD, 10 PtoP, ...), sync type, cbid */
    uint32_t os_tid;      /* API records: the calling thread */
    uint32_t graph;       /* kernels: CUDA graph id, 0 if none */
} tprof_pl_gpu;

typedef struct tprof_pl_gpu_mem {
    uint64_t address;
    uint64_t bytes;
    uint32_t device;
    uint32_t op;          /* 1 allocation, 2 release */
    uint32_t memory_kind; /* 3 device, 2 pinned, 5 managed, ... (CUPTI's values) */
    uint32_t stream;
} tprof_pl_gpu_mem;

/* One communication operation (docs/design.md §5.2): one op vocabulary whatever the source. */
enum tprof_comm_op {
    TPROF_COMM_UNKNOWN = 0, /* the record's name says what the source called it */
    TPROF_COMM_ALLREDUCE = 1,
    TPROF_COMM_ALLGATHER = 2,
    TPROF_COMM_REDUCESCATTER = 3,
    TPROF_COMM_BROADCAST = 4,
    TPROF_COMM_REDUCE = 5,
    TPROF_COMM_ALLTOALL = 6,
    TPROF_COMM_SEND = 7,
    TPROF_COMM_RECV = 8,
    TPROF_COMM_BARRIER = 9,
    TPROF_COMM_GATHER = 10,
    TPROF_COMM_SCATTER = 11,
    TPROF_COMM_OP_COUNT
};

/* Algorithm and protocol as NCCL names them; 0 = not known. */
enum tprof_comm_algo {
    TPROF_ALGO_UNKNOWN = 0, TPROF_ALGO_TREE, TPROF_ALGO_RING, TPROF_ALGO_COLLNET_DIRECT,
    TPROF_ALGO_COLLNET_CHAIN, TPROF_ALGO_NVLS, TPROF_ALGO_NVLS_TREE, TPROF_ALGO_PAT
};
enum tprof_comm_proto {
    TPROF_PROTO_UNKNOWN = 0, TPROF_PROTO_LL, TPROF_PROTO_LL128, TPROF_PROTO_SIMPLE
};
/* Element type of a communication op; 0 = not known (and in files older than this field). */
enum tprof_comm_dtype {
    TPROF_DTYPE_UNKNOWN = 0, TPROF_DTYPE_INT8, TPROF_DTYPE_UINT8, TPROF_DTYPE_INT32,
    TPROF_DTYPE_UINT32, TPROF_DTYPE_INT64, TPROF_DTYPE_UINT64, TPROF_DTYPE_FLOAT16,
    TPROF_DTYPE_FLOAT32, TPROF_DTYPE_FLOAT64, TPROF_DTYPE_BFLOAT16, TPROF_DTYPE_FLOAT8E4M3,
    TPROF_DTYPE_FLOAT8E5M2, TPROF_DTYPE_COUNT
};

#define TPROF_COMM_NO_PEER 0xFFFFFFFFu /* peer/root field when there is none */
#define TPROF_COMM_F_UNFINISHED 1u     /* never stopped: closed when its communicator ended */
#define TPROF_COMM_F_GPU_TIME 2u       /* gpu_start_ns/gpu_end_ns hold the GPU-side interval */
#define TPROF_COMM_F_NONBLOCKING 4u    /* MPI I* op: start to observed completion, the host was
                                        * free meanwhile (its Wait records hold the blocked time) */
#define TPROF_COMM_F_ENQUEUE 8u        /* the host interval is only the enqueue: the work runs
                                        * on a device stream (torch.distributed over NCCL) */
#define TPROF_COMM_SRC_NCCL 1u         /* source: NCCL profiler plugin (host enqueue times) */
#define TPROF_COMM_SRC_MPI 2u          /* source: PMPI wrappers (host time of the blocking call) */
#define TPROF_COMM_SRC_TORCH 3u        /* source: trainprof.torch, torch.distributed calls
                                        * (host time: call to return, wait or completion; NCCL
                                        * ones only when NCCL's profiler plugin records nothing,
                                        * flagged TPROF_COMM_F_ENQUEUE) */

typedef struct tprof_pl_comm {
    uint64_t end_ns;
    uint64_t bytes;     /* per-rank payload the caller passed: count x datatype size */
    uint64_t count;     /* elements */
    uint64_t comm_hash; /* NCCL: the commId given to init */
    uint32_t seq;       /* NCCL collective sequence number (low 32 bits), 0 for p2p */
    uint32_t nranks;
    uint32_t rank;
    uint32_t op;        /* enum tprof_comm_op */
    uint32_t algo;      /* enum tprof_comm_algo */
    uint32_t proto;     /* enum tprof_comm_proto */
    uint32_t peer;      /* p2p peer, or root of Broadcast/Reduce; TPROF_COMM_NO_PEER */
    uint32_t flags;     /* TPROF_COMM_F_* */
    uint32_t nchannels;
    uint32_t source;    /* TPROF_COMM_SRC_* */
    uint32_t dtype;     /* enum tprof_comm_dtype (was a reserved 0: old files read unknown) */
    /* GPU-side interval on CLOCK_MONOTONIC when flags has TPROF_COMM_F_GPU_TIME (NCCL: first
     * kernel-channel start to last kernel-channel stop, GPU timer mapped to host time);
     * 0 otherwise. ts_ns/end_ns stay the host interval of the call. */
    uint64_t gpu_start_ns;
    uint64_t gpu_end_ns;
} tprof_pl_comm;

static inline const char *tprof__comm_op_name(uint32_t op) {
    static const char *const names[TPROF_COMM_OP_COUNT] = {
        "Unknown", "AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce",
        "AllToAll", "Send", "Recv", "Barrier", "Gather", "Scatter"};
    return op < TPROF_COMM_OP_COUNT ? names[op] : "Unknown";
}

static inline const char *tprof__comm_dtype_name(uint32_t d) {
    static const char *const names[TPROF_DTYPE_COUNT] = {
        "unknown", "int8", "uint8", "int32", "uint32", "int64", "uint64", "float16",
        "float32", "float64", "bfloat16", "float8e4m3", "float8e5m2"};
    return d < TPROF_DTYPE_COUNT ? names[d] : "unknown";
}

typedef struct tprof_pl_push {
    uint32_t domain;
    uint32_t category;
} tprof_pl_push; /* also MARK */

typedef struct tprof_pl_start {
    uint64_t id;
    uint32_t domain;
    uint32_t category;
} tprof_pl_start;

typedef struct tprof_pl_u64 {
    uint64_t value;
} tprof_pl_u64; /* END, STEP_BEGIN, STEP_END, THREAD_NAME */

typedef struct tprof_pl_counter {
    double value;
} tprof_pl_counter;

typedef struct tprof_pl_category {
    uint32_t domain;
    uint32_t pad;
} tprof_pl_category;

typedef struct tprof_pl_clock {
    uint64_t realtime_ns;
    uint64_t mono_ns;
    uint64_t dropped_total; /* END_OF_FILE only */
} tprof_pl_clock;

static inline size_t tprof__align8(size_t n) { return (n + 7u) & ~(size_t)7u; }

/* CRC-32 (zlib) of a buffer, continuing from `crc` (0 to start). */
uint32_t tprof__crc32(uint32_t crc, const void *data, size_t len);

#endif /* TPROF_FORMAT_H */
