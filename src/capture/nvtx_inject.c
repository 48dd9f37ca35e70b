/*
 * nvtx_inject.c — NVTX capture by tool injection (NVTX3 nvtx3/nvtxDetail/nvtxInit.h).
 *
 * Every shared object built with the NVTX3 headers carries its own NVTX state; on its first
 * NVTX call it dlopens $NVTX_INJECTION64_PATH (our library) and calls
 * InitializeInjectionNvtx2 with its export-table getter. We fill that object's CORE and
 * CORE2 slots with our handlers. This runs once per such library (torch, NCCL, ...), so
 * set-up is idempotent and domains with the same name merge (tprof__domain_id).
 *
 * The ABI below is declared here from the NVTX3 documentation (our own minimal
 * declarations, as docs/design.md §6.6 asks for vendor interfaces), so this file needs no CUDA
 * toolkit. Layouts and ids: nvtx_abi.h; checked against the CUDA 13.0 headers.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <wchar.h>

#include "../core/config.h"
#include "../core/internal.h"
#include "../core/source.h"

#include "nvtx_abi.h"
#include "nvtx_strings.h"

/* Our handles: a domain handle points at one of these, and a registered-string handle
 * at a tprof_regstr (nvtx_strings.h). Both live for the life of the process (the library is
 * nodelete). */
typedef struct tprof_domain { uint32_t id; } tprof_domain;

/* ---------------------------------------------------------------- strings */

/* wchar_t (UCS-4 on Linux) to UTF-8 in a thread buffer; names are short. */
static const char *wide_to_utf8(const wchar_t *w) {
    static __thread char buf[1024];
    if (!w) return "(null)";
    size_t n = 0;
    for (; *w && n + 4 < sizeof buf; w++) {
        uint32_t c = (uint32_t)*w;
        if (c < 0x80) buf[n++] = (char)c;
        else if (c < 0x800) {
            buf[n++] = (char)(0xC0 | (c >> 6));
            buf[n++] = (char)(0x80 | (c & 0x3F));
        } else if (c < 0x10000) {
            buf[n++] = (char)(0xE0 | (c >> 12));
            buf[n++] = (char)(0x80 | ((c >> 6) & 0x3F));
            buf[n++] = (char)(0x80 | (c & 0x3F));
        } else if (c < 0x110000) {
            buf[n++] = (char)(0xF0 | (c >> 18));
            buf[n++] = (char)(0x80 | ((c >> 12) & 0x3F));
            buf[n++] = (char)(0x80 | ((c >> 6) & 0x3F));
            buf[n++] = (char)(0x80 | (c & 0x3F));
        } else {
            buf[n++] = '?';
        }
    }
    buf[n] = 0;
    return buf;
}

static const char *attr_name(const tnvtx_attr *a) {
    if (!a || a->size < offsetof(tnvtx_attr, message) + sizeof(void *)) return "(unnamed)";
    switch (a->message_type) {
    case TNVTX_MSG_ASCII:
        return a->message ? (const char *)a->message : "(null)";
    case TNVTX_MSG_UNICODE:
        return wide_to_utf8((const wchar_t *)a->message);
    case TNVTX_MSG_REGISTERED: /* a handle we gave out: its holder, read without a lock */
        return a->message ? ((const tprof_regstr *)a->message)->str : "(null)";
    default:
        return "(unnamed)";
    }
}

static uint32_t attr_category(const tnvtx_attr *a) {
    return (a && a->size >= offsetof(tnvtx_attr, color_type)) ? a->category : 0;
}

static uint32_t domain_of(const void *h) { return h ? ((const tprof_domain *)h)->id : 0; }

/* The level NVTX's push returns (of the range it opens) and pop returns (of the range it
 * closes; negative when none is open): per thread and per domain, as NVTX counts them. */
static int *level_of(tprof__thread *t, uint32_t domain) {
    return &t->nvtx_level[domain < TPROF__NVTX_LEVELS ? domain : TPROF__NVTX_LEVELS];
}
static int push_level(tprof__thread *t, uint32_t domain) { return (*level_of(t, domain))++; }
static int pop_level(tprof__thread *t, uint32_t domain) {
    int *l = level_of(t, domain);
    return *l > 0 ? --*l : -1;
}

/* ---------------------------------------------------------------- handlers */

#define WITH_THREAD(...)                             \
    tprof__thread *t = tprof__thread_get();          \
    if (TPROF_UNLIKELY(t == NULL)) return __VA_ARGS__;

static void h_mark_ex(const tnvtx_attr *a) {
    WITH_THREAD()
    tprof__mark(t, 0, attr_name(a), attr_category(a));
}
static void h_mark_a(const char *m) {
    WITH_THREAD()
    tprof__mark(t, 0, m, 0);
}
static void h_mark_w(const wchar_t *m) {
    WITH_THREAD()
    tprof__mark(t, 0, wide_to_utf8(m), 0);
}
static uint64_t h_start_ex(const tnvtx_attr *a) {
    WITH_THREAD(0)
    return tprof__range_start(t, 0, attr_name(a), attr_category(a));
}
static uint64_t h_start_a(const char *m) {
    WITH_THREAD(0)
    return tprof__range_start(t, 0, m, 0);
}
static uint64_t h_start_w(const wchar_t *m) {
    WITH_THREAD(0)
    return tprof__range_start(t, 0, wide_to_utf8(m), 0);
}
static void h_end(uint64_t id) {
    WITH_THREAD()
    tprof__range_end(t, id);
}
static int h_push_ex(const tnvtx_attr *a) {
    WITH_THREAD(-1)
    tprof__push(t, 0, attr_name(a), attr_category(a));
    return push_level(t, 0);
}
static int h_push_a(const char *m) {
    WITH_THREAD(-1)
    tprof__push(t, 0, m, 0);
    return push_level(t, 0);
}
static int h_push_w(const wchar_t *m) {
    WITH_THREAD(-1)
    tprof__push(t, 0, wide_to_utf8(m), 0);
    return push_level(t, 0);
}
static int h_pop(void) {
    WITH_THREAD(-1)
    tprof__pop(t, 0);
    return pop_level(t, 0);
}
static void h_name_category_a(uint32_t c, const char *n) { tprof__name_category(0, c, n); }
static void h_name_category_w(uint32_t c, const wchar_t *n) {
    tprof__name_category(0, c, wide_to_utf8(n));
}
static void h_name_thread_a(uint32_t tid, const char *n) {
    WITH_THREAD()
    if (n) tprof__thread_name(t, tid, n);
}
static void h_name_thread_w(uint32_t tid, const wchar_t *n) {
    WITH_THREAD()
    if (n) tprof__thread_name(t, tid, wide_to_utf8(n));
}

static void h_dmark_ex(const void *d, const tnvtx_attr *a) {
    WITH_THREAD()
    tprof__mark(t, domain_of(d), attr_name(a), attr_category(a));
}
static uint64_t h_dstart_ex(const void *d, const tnvtx_attr *a) {
    WITH_THREAD(0)
    return tprof__range_start(t, domain_of(d), attr_name(a), attr_category(a));
}
static void h_dend(const void *d, uint64_t id) {
    (void)d;
    h_end(id);
}
static int h_dpush_ex(const void *d, const tnvtx_attr *a) {
    WITH_THREAD(-1)
    tprof__push(t, domain_of(d), attr_name(a), attr_category(a));
    return push_level(t, domain_of(d));
}
static int h_dpop(const void *d) {
    WITH_THREAD(-1)
    tprof__pop(t, domain_of(d));
    return pop_level(t, domain_of(d));
}
static void h_dname_category_a(const void *d, uint32_t c, const char *n) {
    tprof__name_category(domain_of(d), c, n);
}
static void h_dname_category_w(const void *d, uint32_t c, const wchar_t *n) {
    tprof__name_category(domain_of(d), c, wide_to_utf8(n));
}

static pthread_mutex_t g_reg_lock = PTHREAD_MUTEX_INITIALIZER;
static tprof_domain *g_domains[4096];
static uint32_t g_ndomains;

/* Registered strings, deduplicated by content (a library that registers the same name in a
 * loop does not grow memory), within TRAINPROF_NVTX_STRINGS_KB (set at the first
 * registration). */
static tprof_strtab g_strings = TPROF_STRTAB_INIT(0);
static pthread_once_t g_strings_once = PTHREAD_ONCE_INIT;

static void strings_limit(void) {
    const tprof__option *o = tprof__option_row(TPROF__OPT_NVTX_STRINGS_KB);
    uint64_t kb = strtoull(o->def, NULL, 10);
    tprof__env_uint(TPROF__OPT_NVTX_STRINGS_KB, &kb); /* clamped to the row's max */
    tprof__strtab_set_limit(&g_strings, (size_t)kb << 10);
}

/* A fork() while another thread registers must not leave the child a lock nobody will
 * release (its next registration would hang the job) nor a table caught half-grown: the
 * registration locks are taken around fork and released on both sides. Installed at the
 * first registration or domain, before any of these locks is used. */
static void fork_prepare(void) {
    pthread_mutex_lock(&g_reg_lock);
    pthread_mutex_lock(&g_strings.lock);
}
static void fork_release(void) {
    pthread_mutex_unlock(&g_strings.lock);
    pthread_mutex_unlock(&g_reg_lock);
}
static pthread_once_t g_fork_once = PTHREAD_ONCE_INIT;
static void fork_install(void) { pthread_atfork(fork_prepare, fork_release, fork_release); }

/* Never NULL: past the limit, the holder that says so (counted, nvtx.strings_over_limit). */
static const tprof_regstr *register_string(const char *s) {
    pthread_once(&g_fork_once, fork_install);
    pthread_once(&g_strings_once, strings_limit);
    return tprof__strtab_register(&g_strings, s ? s : "(null)");
}

/* The source's part (core/source.h): the count of registrations past the limit reaches the
 * rank file as metadata nvtx.strings_over_limit, written on each flusher pass where it grew
 * and before the last flush of a shutdown or of a signal, so the file holds the total. */
static tprof__meta_max g_over_meta = TPROF__META_MAX_INIT;

static void over_limit_write(void) {
    uint64_t n = tprof__strtab_refused(&g_strings);
    if (n) tprof__set_meta_max(&g_over_meta, "nvtx.strings_over_limit", n);
}
static void over_limit_start(const tprof_config *cfg) { /* a new file says it again */
    (void)cfg;
    pthread_mutex_lock(&g_over_meta.lock);
    g_over_meta.written = 0;
    pthread_mutex_unlock(&g_over_meta.lock);
}
static uint64_t over_limit_tick(int final) {
    (void)final;
    over_limit_write();
    return 0;
}
/* In the child only this thread runs: a lock another thread of the parent held would stay
 * held, so the counter's state starts afresh (the count itself is the process's). */
static void over_limit_after_fork(void) { g_over_meta = (tprof__meta_max)TPROF__META_MAX_INIT; }

const tprof__source tprof__source_nvtx = {
    .name = "nvtx",
    .start = over_limit_start,
    .tick = over_limit_tick,
    .flush = over_limit_write,
    .after_fork = over_limit_after_fork,
};

static const void *h_dregister_a(const void *d, const char *s) {
    (void)d;
    return register_string(s);
}
static const void *h_dregister_w(const void *d, const wchar_t *s) {
    (void)d;
    return register_string(wide_to_utf8(s));
}

static const void *create_domain(const char *name) {
    uint32_t id = tprof__domain_id(name ? name : "(null)");
    pthread_once(&g_fork_once, fork_install);
    pthread_mutex_lock(&g_reg_lock);
    tprof_domain *d = NULL;
    for (uint32_t i = 0; i < g_ndomains; i++)
        if (g_domains[i]->id == id) d = g_domains[i];
    if (!d && g_ndomains < sizeof g_domains / sizeof g_domains[0]) {
        d = malloc(sizeof *d);
        if (d) {
            d->id = id;
            g_domains[g_ndomains++] = d;
        }
    }
    pthread_mutex_unlock(&g_reg_lock);
    return d;
}
static const void *h_dcreate_a(const char *name) { return create_domain(name); }
static const void *h_dcreate_w(const wchar_t *name) { return create_domain(wide_to_utf8(name)); }
static void h_ddestroy(const void *d) { (void)d; /* handles stay valid: ranges may be open */ }
static void h_initialize(const void *reserved) { (void)reserved; }

/* ---------------------------------------------------------------- payload extension */

/* The payload extension (nvToolsExtPayload.h) matters even to a tool that decodes no
 * payloads: NCCL pushes some ranges through the core API and pops them through
 * nvtxRangePopPayload, to attach what it learned inside the call (ncclCommInitRank's new
 * communicator). Without these handlers such a pop is lost and the range never closes.
 *
 * Payload-only events (nvtxRangePushPayload, nvtxMarkPayload, ...) carry no message; they
 * are named after the schema of their first payload, as registered, else "(payload)".
 * Schema names live in an append-only table keyed by (domain, schema id): written under
 * g_reg_lock, read without a lock (an entry is complete before the count that covers it
 * is published); at most MAX_SCHEMAS, later ones unnamed. The lookup is a scan from the
 * newest entry; instrumented libraries register tens of schemas. */
#define MAX_SCHEMAS 4096
typedef struct schema_name { uint32_t domain; uint64_t id; const char *name; } schema_name;
static schema_name g_schemas[MAX_SCHEMAS];
static _Atomic uint32_t g_nschemas;
static uint64_t g_next_dynamic_id = TNVTX_SCHEMA_ID_DYNAMIC_START; /* under g_reg_lock */

/* The id the application will use: the static id it asked for, else a new dynamic one (never
 * one a static registration already took, should a library pick its static ids up there).
 * Registering the same (domain, id, name) again takes no new entry. */
static uint64_t register_schema(uint32_t domain, uint64_t wanted, const char *name) {
    const tprof_regstr *r = name ? register_string(name) : NULL;
    pthread_once(&g_fork_once, fork_install);
    pthread_mutex_lock(&g_reg_lock);
    if (wanted >= g_next_dynamic_id && wanted < UINT64_MAX) g_next_dynamic_id = wanted + 1;
    uint64_t id = wanted ? wanted : g_next_dynamic_id++;
    uint32_t n = atomic_load_explicit(&g_nschemas, memory_order_relaxed);
    for (uint32_t i = n; r && i-- > 0;)
        if (g_schemas[i].id == id && g_schemas[i].domain == domain) {
            if (g_schemas[i].name == r->str) r = NULL; /* the newest entry already says so */
            break;
        }
    if (r && n < MAX_SCHEMAS) {
        g_schemas[n] = (schema_name){domain, id, r->str};
        atomic_store_explicit(&g_nschemas, n + 1, memory_order_release);
    }
    pthread_mutex_unlock(&g_reg_lock);
    return id;
}

static const char *payload_name(uint32_t domain, const tnvtx_payload_data *p, size_t count) {
    if (!p || count == 0) return "(payload)";
    for (uint32_t i = atomic_load_explicit(&g_nschemas, memory_order_acquire); i-- > 0;)
        if (g_schemas[i].id == p[0].schema_id && g_schemas[i].domain == domain)
            return g_schemas[i].name;
    return "(payload)";
}

static uint64_t h_pl_schema_register(const void *d, const tnvtx_schema_attr *a) {
    if (!a) return 0;
    uint64_t want = (a->field_mask & TNVTX_SCHEMA_FIELD_SCHEMA_ID) ? a->schema_id : 0;
    return register_schema(domain_of(d), want,
                           (a->field_mask & TNVTX_SCHEMA_FIELD_NAME) ? a->name : NULL);
}
static uint64_t h_pl_enum_register(const void *d, const tnvtx_enum_attr *a) {
    if (!a) return 0;
    uint64_t want = (a->field_mask & TNVTX_ENUM_FIELD_SCHEMA_ID) ? a->schema_id : 0;
    return register_schema(domain_of(d), want, NULL); /* enums never name an event */
}
static void h_pl_mark(const void *d, const tnvtx_payload_data *p, size_t n) {
    WITH_THREAD()
    tprof__mark(t, domain_of(d), payload_name(domain_of(d), p, n), 0);
}
static int h_pl_push(const void *d, const tnvtx_payload_data *p, size_t n) {
    WITH_THREAD(-1)
    tprof__push(t, domain_of(d), payload_name(domain_of(d), p, n), 0);
    return push_level(t, domain_of(d));
}
static int h_pl_pop(const void *d, const tnvtx_payload_data *p, size_t n) {
    (void)p;
    (void)n;
    return h_dpop(d);
}
static uint64_t h_pl_start(const void *d, const tnvtx_payload_data *p, size_t n) {
    WITH_THREAD(0)
    return tprof__range_start(t, domain_of(d), payload_name(domain_of(d), p, n), 0);
}
static void h_pl_end(const void *d, uint64_t id, const tnvtx_payload_data *p, size_t n) {
    (void)d;
    (void)p;
    (void)n;
    h_end(id);
}
static uint8_t h_pl_domain_enabled(const void *d) {
    (void)d;
    return tprof_enabled() ? 1 : 0;
}

TPROF_API int InitializeInjectionNvtxExtension(tnvtx_ext_module *m);

/* Called once per extension module per instrumented library. Returns 1 (accepted) or 0
 * (declined: the module's calls become no-ops in that library). Modules other than the
 * payload extension are accepted with no slot filled, which also makes them no-ops. */
int InitializeInjectionNvtxExtension(tnvtx_ext_module *m) {
    if (!m || !tprof_enabled()) return 0;
    if (m->module_id != TNVTX_EXT_MODULE_PAYLOAD || (m->compat_id >> 8) != 1 ||
        m->segments_count < 1 || !m->segments || !m->segments[0].slots)
        return 1;
    const struct { unsigned cbid; intptr_t fn; } pl[] = {
        {TNVTX_PL_SchemaRegister, (intptr_t)h_pl_schema_register},
        {TNVTX_PL_EnumRegister, (intptr_t)h_pl_enum_register},
        {TNVTX_PL_MarkPayload, (intptr_t)h_pl_mark},
        {TNVTX_PL_RangePushPayload, (intptr_t)h_pl_push},
        {TNVTX_PL_RangePopPayload, (intptr_t)h_pl_pop},
        {TNVTX_PL_RangeStartPayload, (intptr_t)h_pl_start},
        {TNVTX_PL_RangeEndPayload, (intptr_t)h_pl_end},
        {TNVTX_PL_DomainIsEnabled, (intptr_t)h_pl_domain_enabled},
    };
    tnvtx_ext_segment *seg = &m->segments[0];
    for (size_t i = 0; i < sizeof pl / sizeof pl[0]; i++)
        if (pl[i].cbid < seg->slot_count) seg->slots[pl[i].cbid] = pl[i].fn;
    return 1;
}

/* ---------------------------------------------------------------- injection */

typedef struct slot { unsigned cbid; tnvtx_fn fn; } slot;

#define FN(f) ((tnvtx_fn)(void (*)(void))(f))

static const slot core_slots[] = {
    {1, FN(h_mark_ex)},         {2, FN(h_mark_a)},          {3, FN(h_mark_w)},
    {4, FN(h_start_ex)},        {5, FN(h_start_a)},         {6, FN(h_start_w)},
    {7, FN(h_end)},             {8, FN(h_push_ex)},         {9, FN(h_push_a)},
    {10, FN(h_push_w)},         {11, FN(h_pop)},            {12, FN(h_name_category_a)},
    {13, FN(h_name_category_w)}, {14, FN(h_name_thread_a)}, {15, FN(h_name_thread_w)},
};

static const slot core2_slots[] = {
    {1, FN(h_dmark_ex)},          {2, FN(h_dstart_ex)},        {3, FN(h_dend)},
    {4, FN(h_dpush_ex)},          {5, FN(h_dpop)},             {8, FN(h_dname_category_a)},
    {9, FN(h_dname_category_w)},  {10, FN(h_dregister_a)},     {11, FN(h_dregister_w)},
    {12, FN(h_dcreate_a)},        {13, FN(h_dcreate_w)},       {14, FN(h_ddestroy)},
    {15, FN(h_initialize)},
};

static int fill(const tnvtx_callbacks *cb, int module, const slot *slots, size_t n) {
    tnvtx_table table = NULL;
    unsigned size = 0;
    if (!cb->get_module_function_table(module, &table, &size) || !table) return 0;
    int filled = 0;
    for (size_t i = 0; i < n; i++) {
        /* older applications have shorter tables: write only up to out_size */
        if (slots[i].cbid > size || !table[slots[i].cbid]) continue;
        *table[slots[i].cbid] = slots[i].fn;
        filled++;
    }
    return filled;
}

static _Atomic int g_injected;

TPROF_API int InitializeInjectionNvtx2(tnvtx_get_export_table get);

int InitializeInjectionNvtx2(tnvtx_get_export_table get) {
    if (!get) return 0;
    /* A disabled session (TRAINPROF_ENABLE=0, no directory) declines: NVTX then runs its
     * own no-op stubs in that library, the cheapest possible. */
    if (!tprof_enabled()) return 0;
    const tnvtx_callbacks *cb = get(TNVTX_ETID_CALLBACKS);
    if (!cb || cb->struct_size < sizeof *cb || !cb->get_module_function_table) return 0;
    const tnvtx_version_info *vi = get(TNVTX_ETID_VERSIONINFO);
    if (vi && vi->struct_size >= sizeof *vi && vi->set_injection_version)
        vi->set_injection_version(3);
    int n = fill(cb, TNVTX_MODULE_CORE, core_slots, sizeof core_slots / sizeof core_slots[0]);
    n += fill(cb, TNVTX_MODULE_CORE2, core2_slots, sizeof core2_slots / sizeof core2_slots[0]);
    if (n == 0) return 0;
    int libs = atomic_fetch_add(&g_injected, 1) + 1;
    char status[64];
    snprintf(status, sizeof status, "injected into %d librar%s", libs, libs == 1 ? "y" : "ies");
    tprof__capability("nvtx", status);
    return 1;
}
