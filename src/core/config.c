/*
 * config.c — a session's configuration: tprof_config's defaults, and the TRAINPROF_*
 * variables of core/config.h's table parsed into it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "internal.h"

int tprof_config_init(tprof_config *cfg) {
    if (!cfg) return TPROF_ERR_INVALID_ARG;
    memset(cfg, 0, sizeof *cfg);
    cfg->struct_size = sizeof *cfg;
    cfg->ring_bytes = 4u << 20;
    cfg->max_threads = 1024;
    cfg->flush_interval_ms = 50;
    cfg->max_strings = 8192;
    cfg->log_level = TPROF_LOG_WARN;
    cfg->enabled = 1;
    cfg->sample_hz = 10;
    cfg->nvml_hz = 10;
    return TPROF_OK;
}

int tprof__env_uint(tprof__opt id, uint64_t *out) {
    const tprof__option *o = tprof__option_row(id);
    const char *v = tprof__env(id);
    if (!v || !*v) return 0;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end || v[0] == '-') {
        tprof__log(TPROF_LOG_WARN, "ignoring %s=%s: not a non-negative integer", o->name, v);
        return 0;
    }
    *out = o->max && x > o->max ? o->max : x;
    return 1;
}

int tprof__parse_log_level(const char *v) {
    if (!v) return -1;
    if (!strcmp(v, "error") || !strcmp(v, "0")) return TPROF_LOG_ERROR;
    if (!strcmp(v, "warn") || !strcmp(v, "warning") || !strcmp(v, "1")) return TPROF_LOG_WARN;
    if (!strcmp(v, "info") || !strcmp(v, "2")) return TPROF_LOG_INFO;
    if (!strcmp(v, "debug") || !strcmp(v, "3")) return TPROF_LOG_DEBUG;
    return -1;
}

int tprof_config_from_env(tprof_config *cfg) {
    if (!cfg || cfg->struct_size < sizeof *cfg) return TPROF_ERR_INVALID_ARG;
    const char *v;
    uint64_t x;
    if ((v = tprof__env_nonempty(TPROF__OPT_LOG))) {
        int l = tprof__parse_log_level(v);
        if (l >= 0) cfg->log_level = l;
        else tprof__log(TPROF_LOG_WARN, "ignoring TRAINPROF_LOG=%s", v);
    }
    if ((v = tprof__env_nonempty(TPROF__OPT_DIR))) cfg->output_dir = v;
    if ((v = tprof__env_nonempty(TPROF__OPT_RUN_ID))) cfg->run_id = v;
    if (tprof__env_uint(TPROF__OPT_RING_KB, &x)) cfg->ring_bytes = (size_t)(x * 1024u);
    if (tprof__env_uint(TPROF__OPT_MAX_THREADS, &x)) cfg->max_threads = (uint32_t)x;
    if (tprof__env_uint(TPROF__OPT_FLUSH_MS, &x)) cfg->flush_interval_ms = (uint32_t)x;
    if (tprof__env_uint(TPROF__OPT_MAX_STRINGS, &x)) cfg->max_strings = (uint32_t)x;
    if (tprof__env_uint(TPROF__OPT_ENABLE, &x)) cfg->enabled = x != 0;
    if (tprof__env_uint(TPROF__OPT_SAMPLE_HZ, &x)) cfg->sample_hz = (uint32_t)x;
    if (tprof__env_uint(TPROF__OPT_NVML_HZ, &x)) cfg->nvml_hz = (uint32_t)x;
    return TPROF_OK;
}

/* Injected or preloaded: start from the environment as soon as we are loaded, if the
 * variables ask for it and something records. We only read the log level here; the
 * session itself stays lazy. */
__attribute__((constructor)) static void tprof__ctor(void) {
    int l = tprof__parse_log_level(tprof__env(TPROF__OPT_LOG));
    if (l >= 0) tprof__log_level = l;
}
