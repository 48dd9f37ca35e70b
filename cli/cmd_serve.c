/*
 * cmd_serve.c — `trainprof serve`: a per-node exporter of the node's GPU metrics (NVML) and
 * this process's own, on /metrics, with no training process (docs/cli.md, docs/metrics.md).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "trainprof.h"

enum { OPT_LISTEN = OPT_OWN, OPT_NVML_HZ, OPT_SAMPLE_HZ };

/* The default port: not 9400, dcgm-exporter's default (NVIDIA DCGM-Exporter documentation),
 * since both run on the same GPU nodes. Prometheus's port list for exporters
 * (github.com/prometheus/prometheus/wiki/Default-port-allocations) hands out 9100-9999, a
 * range now fully allocated, so any port there is some other exporter's. 10464 lies above
 * it, below Linux's ephemeral range (32768-60999, net.ipv4.ip_local_port_range), and is the
 * port `trainprof run --metrics-port 9464` (docs/metrics.md's example) gives its node sampler
 * (PORT + 1000), which serves the same series: one scrape target per node for the GPU
 * series whichever of the two runs there. */
#define SERVE_DEFAULT_LISTEN "127.0.0.1:10464"

static const cli_opt serve_opts[] = {
    {OPT_LISTEN, "--listen", NULL, CLI_VALUE, "ADDR:PORT",
     "numeric address and port [TRAINPROF_SERVE_LISTEN]; default\n"
     "127.0.0.1:10464; PORT alone = on 127.0.0.1, [V6]:PORT for IPv6,\n"
     "port 0 = an ephemeral one (printed on stderr); a bearer token\n"
     "from TRAINPROF_METRICS_TOKEN"},
    {OPT_NVML_HZ, "--nvml-hz", NULL, CLI_VALUE, "N",
     "GPU sampling rate [TRAINPROF_NVML_HZ]; default 10, 0 = no GPU\n"
     "metrics, at most 100"},
    {OPT_SAMPLE_HZ, "--sample-hz", NULL, CLI_VALUE, "N",
     "process sampler rate [TRAINPROF_SAMPLE_HZ]; default 1, 0 = off"},
    {OPT_HELP, "--help", "-h", CLI_FLAG, NULL, NULL},
};

static const cli_cmd serve_cmd = {
    "serve",
    "usage: trainprof serve [--listen ADDR:PORT] [--nvml-hz N] [--sample-hz N]\n"
    "\n"
    "A per-node exporter, like dcgm-exporter, without any training process: serves the\n"
    "node's GPU metrics (NVML) and this process's own metrics on /metrics (Prometheus text\n"
    "0.0.4, OpenMetrics when asked), /healthz, until SIGTERM or SIGINT; then exits 0.\n"
    "Writes no file. Without NVML it serves the host metrics and says so in one line.\n"
    "\n"
    "options:\n",
    serve_opts,
    sizeof serve_opts / sizeof *serve_opts,
    NULL,
    1,
};

int cmd_serve(int argc, char **argv) {
    const char *listen = env_or("TRAINPROF_SERVE_LISTEN", SERVE_DEFAULT_LISTEN);
    int nvml_hz =
        parse_int("serve", "TRAINPROF_NVML_HZ", env_or("TRAINPROF_NVML_HZ", "10"), 0, 100);
    int sample_hz =
        parse_int("serve", "TRAINPROF_SAMPLE_HZ", env_or("TRAINPROF_SAMPLE_HZ", "1"), 0, 1000);
    const char *v;
    for (int i = 0; i < argc; i++) {
        switch (cli_next(&serve_cmd, argc, argv, &i, &v)) {
        case CLI_END: /* serve takes no operand: none may follow "--" */
            if (i + 1 < argc) die_usage("serve", "unexpected argument '%s'", argv[i + 1]);
            break;
        case OPT_HELP: cli_usage(&serve_cmd, stdout); return 0;
        case OPT_LISTEN: listen = v; break;
        case OPT_NVML_HZ: nvml_hz = parse_int("serve", "--nvml-hz", v, 0, 100); break;
        case OPT_SAMPLE_HZ: sample_hz = parse_int("serve", "--sample-hz", v, 0, 1000); break;
        default: die_usage("serve", "unknown option '%s'", argv[i]);
        }
    }
    /* ADDR:PORT, [V6]:PORT or PORT */
    char addr[128];
    const char *colon = strrchr(listen, ':'), *port = colon ? colon + 1 : listen;
    size_t alen = colon ? (size_t)(colon - listen) : 0;
    if (alen >= 2 && listen[0] == '[' && listen[alen - 1] == ']') {
        listen++;
        alen -= 2;
    }
    if (alen >= sizeof addr) die_usage("serve", "--listen: address too long: '%s'", listen);
    snprintf(addr, sizeof addr, "%.*s", (int)alen, listen);
    if (!addr[0]) snprintf(addr, sizeof addr, "127.0.0.1");
    parse_int("serve", "--listen's port", port, 0, 65535);

    /* The library's session in this process, as for run's node sampler, but writing no
     * file (TRAINPROF_NO_FILE): the NVML sampler and the process sampler on its flusher
     * feed the registry, and its endpoint serves it. This process is the node's sampler
     * whatever launcher variables it inherited: no rank labels, no local-rank port offset. */
    static const char *const job_vars[] = {
        "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID", "LOCAL_RANK",
        "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMIX_LOCAL_RANK", "SLURM_LOCALID",
        "TRAINPROF_DIR", NULL};
    for (int i = 0; job_vars[i]; i++) unsetenv(job_vars[i]);
    char me[24];
    snprintf(me, sizeof me, "%d", (int)getpid());
    setenv("TRAINPROF_NVML_SAMPLER", me, 1);
    setenv("TRAINPROF_METRICS_ADDR", addr, 1);
    setenv("TRAINPROF_METRICS_PORT", port, 1);
    setenv("TRAINPROF_METRICS_RANK_OFFSET", "0", 1);
    setenv("TRAINPROF_NO_FILE", "1", 1);
    setenv("TRAINPROF_NO_SIGNALS", "1", 1);

    /* signals are taken here with sigwait: blocked before any thread starts, so that none
     * of the library's threads takes them */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);

    char why[256] = "";
    int ngpu = nvml_hz ? probe_nvml(why, sizeof why) : -1;
    tprof_config c;
    tprof_config_init(&c);
    c.sample_hz = (uint32_t)sample_hz;
    c.nvml_hz = ngpu > 0 ? (uint32_t)nvml_hz : 0;
    int rc = tprof_init(&c);
    if (rc != TPROF_OK) {
        fprintf(stderr, "trainprof serve: the session did not start: %s\n", tprof_strerror(rc));
        return 1;
    }
    int bound = tprof_metrics_port();
    if (bound <= 0) {
        fprintf(stderr, "trainprof serve: cannot serve on %s:%s (%s)\n", addr, port,
                bound == TPROF_ERR_UNAVAILABLE ? "built without libmicrohttpd"
                                               : "see the warning above");
        tprof_shutdown();
        return 1;
    }
    tprof_set_metadata("trainprof.role", "node-exporter");
    tprof_flush(); /* one flusher pass: NVML open, the first samples taken */
    const char *br = strchr(addr, ':') ? "[" : "", *kt = strchr(addr, ':') ? "]" : "";
    fprintf(stderr, "trainprof serve: listening on http://%s%s%s:%d/metrics\n", br, addr, kt,
            bound);
    warn_exposed("serve", addr);
    if (ngpu > 0)
        fprintf(stderr, "trainprof serve: GPU metrics of %d GPU%s (NVML, %d Hz)\n", ngpu,
                ngpu > 1 ? "s" : "", nvml_hz);
    else if (nvml_hz == 0)
        fprintf(stderr, "trainprof serve: GPU metrics off (--nvml-hz 0); host metrics only\n");
    else
        fprintf(stderr, "trainprof serve: GPU metrics unavailable (%s); host metrics only\n", why);
    fflush(stderr);

    int sig = 0;
    while (sigwait(&stop, &sig) != 0) {
    }
    tprof_shutdown(); /* stops the endpoint and the samplers */
    fprintf(stderr, "trainprof serve: stopped (%s)\n", strsignal(sig));
    return 0;
}
