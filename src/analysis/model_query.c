/*
 * model_query.c — questions asked of a loaded run (model.h): metadata, the rank behind a
 * host and pid, the GPUs of a rank in CUDA and NVML order, GPU counters, domain and category
 * names, labels, JSON strings.
 */
#define _GNU_SOURCE
#include "analysis/model.h"
#include "analysis/counter_pack.h"
#include "analysis/gpu.h"
#include "analysis/text.h"

#include <dirent.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "format/format.h"
#include "format/reader.h"
#include "trainprof.h"

const char *tp_meta(const tp_process *p, const char *key) {
    const char *v = NULL;
    for (size_t i = 0; i < p->nmeta; i++)
        if (!strcmp(p->meta[i].key, key)) v = p->meta[i].value;
    return v;
}

const char *tp_meta_page(const tp_process *p, const char *key, unsigned k) {
    if (k == 1) return tp_meta(p, key);
    if (!k || k > TPROF_META_PAGES) return NULL;
    char pk[256];
    int w = tprof__meta_page_key(pk, sizeof pk, key, k);
    return w > 0 && (size_t)w < sizeof pk ? tp_meta(p, pk) : NULL;
}

int tp_meta_int(const tp_process *p, const char *key) {
    const char *v = tp_meta(p, key);
    if (!v) return -1;
    char *end = NULL;
    errno = 0;
    long x = strtol(v, &end, 10); /* as atoi: leading space and sign, trailing text left */
    if (errno == ERANGE || x > INT_MAX || x < INT_MIN) return -1;
    return (int)x;
}

_Static_assert(TPROF_COMM_OP_COUNT <= 256 && TPROF_COMM_F_ENQUEUE <= 0xffff,
               "tp_comm_key's narrow fields must hold every op and flag");

tp_comm_key tp_comm_key_of(const tp_comm_op *o) {
    return (tp_comm_key){o->comm_hash, o->seq, (uint16_t)(o->flags & 0xffff),
                         (uint8_t)(o->op <= 255 ? o->op : TPROF_COMM_UNKNOWN),
                         (uint8_t)(o->source <= 255 ? o->source : 0)};
}

tp_comm_key tp_comm_key_at(const tp_process *p, size_t i) {
    return p->comm_keys ? p->comm_keys[i] : tp_comm_key_of(&p->comm[i]);
}

const tp_comm_op *tp_comm_last(const tp_process *p) {
    if (p->comm_keys) return p->comm_last;
    const tp_comm_op *best = NULL;
    for (size_t i = 0; i < p->ncomm; i++)
        if (!best || p->comm[i].start >= best->start) best = &p->comm[i];
    return best;
}

const tp_process *tp_rank_process(const tp_run *run, const char *host, double pid) {
    for (size_t i = 0; run && host && i < run->nprocs; i++) {
        const tp_process *p = &run->procs[i];
        if (p->role == TP_ROLE_RANK && (double)p->hdr.pid == pid && !strcmp(p->hdr.host, host))
            return p;
    }
    return NULL;
}

/* NVML indices in CUDA order, from a sampler's nvml.devices; returns how many (at most max) */
static size_t nvml_order(const tp_process *sampler, unsigned *order, size_t max) {
    size_t no = 0;
    for (const char *c = tp_meta(sampler, "nvml.devices"); c && *c && no < max;) {
        char *end;
        unsigned long v = strtoul(c, &end, 10);
        if (end == c) break;
        order[no++] = (unsigned)v;
        c = *end == ',' ? end + 1 : end;
    }
    return no;
}

/* Whether p named any CUDA device by UUID. */
static int names_devices(const tp_process *p) {
    for (size_t i = 0; i < p->nmeta; i++) {
        const char *k = p->meta[i].key;
        size_t n = strlen(k);
        if (!strncmp(k, "cuda.", 5) && n > 10 && !strcmp(k + n - 5, ".uuid")) return 1;
    }
    return 0;
}

/* Whether `uuid` is one of the comma-separated UUIDs of `list`. */
static int in_list(const char *list, const char *uuid) {
    size_t ul = strlen(uuid);
    for (const char *c = list; c && *c;) {
        const char *e = strchr(c, ',');
        size_t n = e ? (size_t)(e - c) : strlen(c);
        if (n == ul && !strncasecmp(c, uuid, n)) return 1;
        c = e ? e + 1 : c + n;
    }
    return 0;
}

/* The sampler's NVML index of the GPU `uuid` names: a GPU UUID, or a MIG device of a GPU
 * (gpu.<i>.mig_uuids), or through `parent` (the rank's cuda.<o>.gpu_uuid); -1 if none. */
static long sampler_gpu(const tp_process *sampler, const char *uuid, const char *parent,
                        tp_gpu_match *by) {
    int mig = !strncasecmp(uuid, "MIG-", 4);
    for (size_t i = 0; i < sampler->nmeta; i++) {
        const tp_kv *kv = &sampler->meta[i];
        char *end;
        if (strncmp(kv->key, "gpu.", 4)) continue;
        unsigned long idx = strtoul(kv->key + 4, &end, 10);
        if (end == kv->key + 4) continue;
        if (!strcmp(end, ".uuid") && !strcasecmp(kv->value, mig ? (parent ? parent : "") : uuid)) {
            *by = mig ? TP_GPU_BY_MIG_PARENT : TP_GPU_BY_UUID;
            return (long)idx;
        }
        if (mig && !strcmp(end, ".mig_uuids") && in_list(kv->value, uuid)) {
            *by = TP_GPU_BY_MIG_PARENT;
            return (long)idx;
        }
    }
    return -1;
}

size_t tp_rank_gpu_links(const tp_process *p, const tp_process *sampler, tp_gpu_link *out,
                         size_t max, size_t *unmatched) {
    unsigned order[64];
    const size_t no = nvml_order(sampler, order, 64);
    const int named = names_devices(p);
    uint64_t used = 0; /* CUDA ordinals below 64 */
    for (size_t i = 0; i < p->ngpu; i++)
        if (p->gpu[i].device < 64) used |= 1ull << p->gpu[i].device;
    if (!used) { /* no GPU records: the devices whose primary context was active */
        for (unsigned o = 0; o < 64; o++) {
            char key[32];
            snprintf(key, sizeof key, "cuda.%u.in_use", o);
            if (tp_meta(p, key)) used |= 1ull << o;
        }
        /* several, the launcher's local rank among them: a rank of a one-GPU-per-rank job
         * that also touched another device (commonly cuda:0 before set_device) */
        if ((used & (used - 1)) && p->local_rank >= 0 && p->local_rank < 64 &&
            (used >> p->local_rank & 1))
            used = 1ull << p->local_rank;
    }
    if (!used && p->local_rank >= 0 && p->local_rank < 64) used = 1ull << p->local_rank;
    size_t n = 0, nmiss = 0;
    tp_gpu_link miss[64];
    for (unsigned o = 0; o < 64 && n < max; o++) {
        if (!(used & (1ull << o))) continue;
        char key[40];
        snprintf(key, sizeof key, "cuda.%u.uuid", o);
        const char *uuid = tp_meta(p, key);
        snprintf(key, sizeof key, "cuda.%u.gpu_uuid", o);
        const char *parent = tp_meta(p, key);
        tp_gpu_link l = {0, (int)o, TP_GPU_BY_UUID, uuid};
        long idx = -1;
        if (uuid) {
            idx = sampler_gpu(sampler, uuid, parent, &l.by);
            if (idx < 0) { /* known, not sampled: never by position */
                l.by = TP_GPU_NOT_SAMPLED;
                miss[nmiss++] = l;
            }
        } else if (!named && o < no) {
            idx = order[o];
            l.by = TP_GPU_BY_POSITION;
        }
        if (idx < 0) continue;
        l.index = (unsigned)idx;
        int dup = 0;
        for (size_t k = 0; k < n; k++) dup |= out[k].index == l.index; /* MIG siblings: once */
        if (!dup) out[n++] = l;
    }
    if (unmatched) *unmatched = nmiss;
    for (size_t k = 0; k < nmiss && n + k < max; k++) out[n + k] = miss[k];
    return n;
}

size_t tp_rank_gpus(const tp_process *p, const tp_process *sampler, unsigned *out, size_t max) {
    tp_gpu_link l[64];
    size_t n = tp_rank_gpu_links(p, sampler, l, max < 64 ? max : 64, NULL);
    for (size_t i = 0; i < n; i++) out[i] = l[i].index;
    return n;
}

int tp_cuda_ordinal_of(const tp_process *rank, const tp_process *sampler, unsigned idx) {
    char key[40];
    if (names_devices(rank)) {
        for (unsigned o = 0; o < 64; o++) {
            snprintf(key, sizeof key, "cuda.%u.uuid", o);
            const char *u = tp_meta(rank, key);
            if (!u) continue;
            snprintf(key, sizeof key, "cuda.%u.gpu_uuid", o);
            tp_gpu_match by;
            if (sampler_gpu(sampler, u, tp_meta(rank, key), &by) == (long)idx) return (int)o;
        }
        return -1; /* the rank named its devices, and none is this GPU */
    }
    unsigned order[64];
    const size_t no = nvml_order(sampler, order, 64);
    for (size_t pos = 0; pos < no; pos++)
        if (order[pos] == idx) return (int)pos;
    return -1;
}

const tp_process *tp_gpu_samples_for(const tp_run *run, const tp_process *p) {
    if (tp_has_gpu_counters(p)) return p;
    const tp_process *other = NULL;
    for (size_t i = 0; run && i < run->nprocs; i++) {
        const tp_process *q = &run->procs[i];
        if (q == p || strcmp(q->hdr.host, p->hdr.host)) continue;
        if (q->role == TP_ROLE_SAMPLER) return q;
        if (!other && tp_has_gpu_counters(q)) other = q;
    }
    return other;
}

const char *tp_gpu_counter(const char *name, unsigned long *idx) {
    if (strncmp(name, "gpu", 3) || !isdigit((unsigned char)name[3])) return NULL;
    char *end;
    *idx = strtoul(name + 3, &end, 10);
    return *end == '.' ? end + 1 : NULL;
}

void tp_fput_printable(FILE *f, const char *s) { tp_text_put(f, s, -1, 0); }

int tp_slim_keeps_counter(const char *name) {
    unsigned long idx;
    return name && tp_gpu_counter(name, &idx) != NULL;
}

int tp_has_gpu_counters(const tp_process *p) {
    /* the names the samplers write, as a slim process keeps them: a program's own counter
     * named "gpu0_mem" or "gpu1" is no GPU sample (it made its process read as the sampler of
     * its host's GPUs, its NVML figures then empty, and a slim process would answer otherwise) */
    int has = 0;
    for (size_t ti = 0; ti < p->nthreads && !has; ti++) {
        tp_counter_it it;
        tp_counter c;
        tp_counter_it_init(&it, &p->threads[ti]);
        while (!has && tp_counter_next(&it, &c)) has = tp_slim_keeps_counter(c.name);
        tp_counter_it_done(&it);
    }
    return has;
}

const char *tp_domain_name(const tp_process *p, uint32_t domain) {
    if (domain < p->ndomains && p->domains[domain]) return p->domains[domain];
    return domain ? "(unknown domain)" : "";
}

const char *tp_category_name(const tp_process *p, uint32_t domain, uint32_t category) {
    const char *n = NULL;
    for (size_t i = 0; i < p->ncategories; i++)
        if (p->categories[i].domain == domain && p->categories[i].id == category)
            n = p->categories[i].name;
    return n;
}

void tp_process_label(const tp_process *p, char *buf, size_t n) {
    if (p->role == TP_ROLE_RANK) snprintf(buf, n, "rank %d", p->rank);
    else if (p->role == TP_ROLE_SAMPLER) snprintf(buf, n, "node GPU sampler");
    else if (p->helper_of >= 0) snprintf(buf, n, "helper of rank %d", p->helper_of);
    else if (p->launched) {
        /* torchrun (torch/distributed/run.py) is the launcher PyTorch's docs use */
        const char *cmd = tp_meta(p, "cmdline");
        const char *by = cmd && (strstr(cmd, "torchrun") || strstr(cmd, "torch.distributed.run") ||
                                 strstr(cmd, "torch/distributed/run"))
                             ? " (torchrun)"
                             : "";
        if (p->launched_lo == p->launched_hi)
            snprintf(buf, n, "launcher of rank %d%s", p->launched_lo, by);
        else
            snprintf(buf, n, "launcher of ranks %d-%d%s", p->launched_lo, p->launched_hi, by);
    } else snprintf(buf, n, "process %d", (int)p->hdr.pid);
}

void tp_json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20 || *p == 0x7f) fprintf(f, "\\u%04x", *p);
            else fputc(*p, f);
        }
    }
    fputc('"', f);
}
