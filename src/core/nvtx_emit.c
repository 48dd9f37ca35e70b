/*
 * nvtx_emit.c — NVTX emission: when another NVTX tool (Nsight Systems) is attached instead
 * of trainprof, the API's ranges, marks and timers are handed to that tool as NVTX events,
 * so both views agree.
 *
 * "Attached" means NVTX_INJECTION64_PATH names a library other than ours. We then play the
 * part the NVTX3 headers play inside an application: dlopen the tool, call its
 * InitializeInjectionNvtx2 with our export-table getter, and let it fill our CORE and CORE2
 * function slots, exactly as it fills those of torch or NCCL. No NVTX library is needed.
 * Only when our own session does not record (with trainprof recording, the variable names
 * us and this stays off).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../capture/nvtx_abi.h"
#include "config.h"
#include "internal.h"

int tprof__emit_on;

/* Our slots; index = callback id. A tool writes its handlers here. */
static tnvtx_fn g_core[TNVTX_CORE_SIZE + 1];
static tnvtx_fn g_core2[TNVTX_CORE2_SIZE + 1];
static tnvtx_fn *g_core_table[TNVTX_CORE_SIZE + 1];
static tnvtx_fn *g_core2_table[TNVTX_CORE2_SIZE + 1];
static tnvtx_fn *g_empty_table[1];

static int get_module_table(int module, tnvtx_table *out, unsigned *size) {
    if (!out || !size) return 0;
    if (module == TNVTX_MODULE_CORE) {
        *out = g_core_table;
        *size = TNVTX_CORE_SIZE;
    } else if (module == TNVTX_MODULE_CORE2) {
        *out = g_core2_table;
        *size = TNVTX_CORE2_SIZE;
    } else {
        /* CUDA, CUDART, OpenCL, sync: nothing of ours to name; an empty table */
        *out = g_empty_table;
        *size = 0;
    }
    return 1;
}

static void set_version(uint32_t v) { (void)v; }

static const tnvtx_callbacks g_callbacks = {sizeof(tnvtx_callbacks), get_module_table};
static const tnvtx_version_info g_version = {sizeof(tnvtx_version_info), TNVTX_VERSION, 0,
                                             set_version};

static const void *get_export_table(uint32_t id) {
    if (id == TNVTX_ETID_CALLBACKS) return &g_callbacks;
    if (id == TNVTX_ETID_VERSIONINFO) return &g_version;
    return NULL;
}

/* ------------------------------------------------------------------ set-up */

static int is_us(const char *path) {
    Dl_info info;
    char a[PATH_MAX], b[PATH_MAX];
    if (!dladdr((void *)&get_export_table, &info) || !info.dli_fname) return 0;
    if (!realpath(path, a) || !realpath(info.dli_fname, b)) return 0;
    return strcmp(a, b) == 0;
}

void tprof__nvtx_emit_setup(void) {
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static int done;
    pthread_mutex_lock(&lock);
    if (done) {
        pthread_mutex_unlock(&lock);
        return;
    }
    done = 1;
    const char *tool = getenv("NVTX_INJECTION64_PATH");
    if (!tool || !*tool || is_us(tool) || tprof__env(TPROF__OPT_NO_NVTX_EMIT)) {
        pthread_mutex_unlock(&lock);
        return;
    }
    for (int i = 0; i <= TNVTX_CORE_SIZE; i++)
        g_core_table[i] = i && i < TNVTX_CORE_SIZE ? &g_core[i] : NULL;
    for (int i = 0; i <= TNVTX_CORE2_SIZE; i++)
        g_core2_table[i] = i && i < TNVTX_CORE2_SIZE ? &g_core2[i] : NULL;
    void *h = dlopen(tool, RTLD_NOW | RTLD_LOCAL);
    int (*init)(tnvtx_get_export_table) = NULL;
    if (h) *(void **)&init = dlsym(h, "InitializeInjectionNvtx2");
    if (init && init(get_export_table)) {
        tprof__emit_on = 1;
        tprof__log(TPROF_LOG_INFO, "NVTX tool %s attached: API ranges and timers go to it", tool);
    } else {
        tprof__log(TPROF_LOG_INFO, "NVTX tool %s could not be attached (%s): no NVTX emission",
                   tool, h ? "no InitializeInjectionNvtx2, or it declined" : dlerror());
        /* a tool that declined may have left slots half-filled: use none of them */
        memset(g_core, 0, sizeof g_core);
        memset(g_core2, 0, sizeof g_core2);
    }
    pthread_mutex_unlock(&lock);
}

/* ------------------------------------------------------------------ emission */

typedef int (*push_a_fn)(const char *);
typedef int (*pop_fn)(void);
typedef uint64_t (*start_a_fn)(const char *);
typedef void (*end_fn)(uint64_t);
typedef void (*mark_a_fn)(const char *);
typedef const void *(*dcreate_fn)(const char *);
typedef int (*dpush_fn)(const void *, const tnvtx_attr *);
typedef int (*dpop_fn)(const void *);
typedef uint64_t (*dstart_fn)(const void *, const tnvtx_attr *);
typedef void (*dend_fn)(const void *, uint64_t);
typedef void (*dcat_fn)(const void *, uint32_t, const char *);

/* The tool's handle for a domain of ours, created on first use (domains are few). */
static const void *tool_domain(uint32_t domain) {
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static const void *handles[256];
    static int made[256];
    if (!domain || domain >= 256 || !g_core2[TNVTX_CORE2_DomainCreateA]) return NULL;
    if (__atomic_load_n(&made[domain], __ATOMIC_ACQUIRE)) return handles[domain];
    pthread_mutex_lock(&lock);
    if (!made[domain]) {
        const char *name = tprof__domain_name(domain);
        handles[domain] = name ? ((dcreate_fn)g_core2[TNVTX_CORE2_DomainCreateA])(name) : NULL;
        if (handles[domain] && g_core2[TNVTX_CORE2_DomainNameCategoryA]) {
            /* category names we know, e.g. "timers" */
            for (uint32_t c = 1; c < 16; c++) {
                const char *cn = tprof__category_name(domain, c);
                if (cn) ((dcat_fn)g_core2[TNVTX_CORE2_DomainNameCategoryA])(handles[domain], c, cn);
            }
        }
        __atomic_store_n(&made[domain], 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&lock);
    return handles[domain];
}

static tnvtx_attr attr(const char *name, uint32_t category) {
    tnvtx_attr a;
    memset(&a, 0, sizeof a);
    a.version = TNVTX_VERSION;
    a.size = TNVTX_ATTR_SIZE;
    a.category = category;
    a.message_type = TNVTX_MSG_ASCII;
    a.message = name ? name : "(null)";
    return a;
}

/* The domains of this thread's open emitted ranges: the API's pop closes the innermost
 * range whatever its domain, and the tool must hear that domain's pop. */
static __thread uint32_t t_stack[64];
static __thread int t_depth;

void tprof__emit_push(uint32_t domain, const char *name, uint32_t category) {
    if (t_depth < 64) t_stack[t_depth] = domain;
    t_depth++;
    const void *d = tool_domain(domain);
    if (d && g_core2[TNVTX_CORE2_DomainRangePushEx]) {
        tnvtx_attr a = attr(name, category);
        ((dpush_fn)g_core2[TNVTX_CORE2_DomainRangePushEx])(d, &a);
    } else if (g_core[TNVTX_CORE_RangePushA]) {
        ((push_a_fn)g_core[TNVTX_CORE_RangePushA])(name ? name : "(null)");
    }
}

void tprof__emit_pop(uint32_t domain) {
    if (domain == TPROF_POP_ANY) domain = t_depth > 0 && t_depth <= 64 ? t_stack[t_depth - 1] : 0;
    if (t_depth > 0) t_depth--;
    const void *d = tool_domain(domain);
    if (d && g_core2[TNVTX_CORE2_DomainRangePop]) ((dpop_fn)g_core2[TNVTX_CORE2_DomainRangePop])(d);
    else if (g_core[TNVTX_CORE_RangePop]) ((pop_fn)g_core[TNVTX_CORE_RangePop])();
}

uint64_t tprof__emit_start(uint32_t domain, const char *name, uint32_t category) {
    const void *d = tool_domain(domain);
    if (d && g_core2[TNVTX_CORE2_DomainRangeStartEx]) {
        tnvtx_attr a = attr(name, category);
        return ((dstart_fn)g_core2[TNVTX_CORE2_DomainRangeStartEx])(d, &a);
    }
    if (g_core[TNVTX_CORE_RangeStartA])
        return ((start_a_fn)g_core[TNVTX_CORE_RangeStartA])(name ? name : "(null)");
    return 0;
}

void tprof__emit_end(uint32_t domain, uint64_t id) {
    const void *d = tool_domain(domain);
    if (d && g_core2[TNVTX_CORE2_DomainRangeEnd])
        ((dend_fn)g_core2[TNVTX_CORE2_DomainRangeEnd])(d, id);
    else if (g_core[TNVTX_CORE_RangeEnd]) ((end_fn)g_core[TNVTX_CORE_RangeEnd])(id);
}

void tprof__emit_mark(const char *name) {
    if (g_core[TNVTX_CORE_MarkA]) ((mark_a_fn)g_core[TNVTX_CORE_MarkA])(name ? name : "(null)");
}
