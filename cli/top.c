/* top.c — `trainprof top`: scrapes the ranks' (or the node sampler's) /metrics endpoints with
 * a tiny HTTP/1.1 client of its own (plain socket, timeouts, bounded response), parses the
 * Prometheus text (top_parse.c) into the figures of one row per rank or GPU, computes window
 * figures from two successive scrapes, and shows them with ncurses, or once as plain text. */
#define _POSIX_C_SOURCE 200809L
#include "top.h"
#include "options.h"
#include "top_parse.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#ifdef TPROF_HAVE_NCURSES
#include <curses.h> /* types, attributes and key codes only: the library is dlopen'ed */
#include <dlfcn.h>
#endif

#define TOP_MAX_ENDPOINTS 1024
#define TOP_MAX_GPUS 64
#define TOP_MAX_RESPONSE (8u << 20) /* 8 MiB: far above 1000 series (~100 kB) */
#define TOP_CONNECT_S 1.0
#define TOP_TOTAL_S 2.0

enum { OPT_ENDPOINTS = OPT_OWN, OPT_PORT_RANGE, OPT_INTERVAL, OPT_ONCE };

static const cli_opt top_opts[] = {
    {OPT_ENDPOINTS, "--endpoints", NULL, CLI_VALUE, "LIST",
     "comma-separated HOST:PORT ([V6ADDR]:PORT for IPv6)"},
    {OPT_PORT_RANGE, "--port-range", NULL, CLI_VALUE, "[HOST:]BASE:N",
     "the N ports BASE..BASE+N-1 on HOST (127.0.0.1)"},
    {OPT_INTERVAL, "--interval", NULL, CLI_VALUE, "S",
     "seconds between scrapes (default 2; 0.1 to 3600)"},
    {OPT_ONCE, "--once", NULL, CLI_FLAG, NULL,
     "print one plain-text table to stdout and exit: 0 when at\n"
     "least one endpoint answered, 1 otherwise (two scrapes\n"
     "min(S, 1) s apart, for the window figures)"},
    {OPT_HELP, "--help", "-h", CLI_FLAG, NULL, NULL},
};

static void top_tail(FILE *f) {
    fputs("\n"
          "TRAINPROF_METRICS_TOKEN, when set, is sent as the bearer token.\n"
#ifndef TPROF_HAVE_NCURSES
          "\nThis build has no ncurses: only --once is available.\n"
#endif
          ,
          f);
}

static const cli_cmd top_cmd = {
    "top",
    "usage: trainprof top [--endpoints HOST:PORT,...] [--port-range [HOST:]BASE:N]\n"
    "                     [--interval S] [--once]\n"
    "\n"
    "A live view of a running job's ranks (or of a node's GPUs) from their metrics\n"
    "endpoints (trainprof run --metrics-port PORT: rank r serves PORT + local rank, the\n"
    "node's GPU sampler PORT + 1000): per rank the step, the last and the mean step time\n"
    "over the interval, tokens/s, GPU utilisation, power and memory, or why the endpoint\n"
    "does not answer; a header with totals. Keys: q quits, arrows / PgUp / PgDn scroll.\n"
    "\n"
    "options:\n",
    top_opts,
    sizeof top_opts / sizeof *top_opts,
    top_tail,
    1,
    26,
};

typedef struct gpu_fig {
    char id[16];
    double util, power, mem_used, mem_total;
} gpu_fig;

typedef struct snap {
    int valid;
    double t; /* CLOCK_MONOTONIC seconds of the scrape */
    double steps_total, step_number, last_dur, dur_sum, dur_count;
    double tokens_total, tokens_ps, samples_total, samples_ps, flops_total, flops_ps;
    char rank[16], local_rank[16];
    int ngpu;
    gpu_fig gpu[TOP_MAX_GPUS];
    size_t nsamples, bad;
} snap;

typedef struct endpoint {
    char spec[300];
    char host[256];
    char port[8];
    int index;
    int up;
    char status[192];
    snap cur, prev;
} endpoint;

static volatile sig_atomic_t g_stop;
static void on_signal(int sig) {
    (void)sig;
    g_stop = 1;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_s(double s) {
    if (s <= 0) return;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !g_stop) {
    }
}

/* ------------------------------------------------------------------ HTTP client */

static int wait_fd(int fd, short ev, double deadline) {
    for (;;) {
        double left = deadline - now_s();
        if (left <= 0) return 0;
        struct pollfd p = {fd, ev, 0};
        int r = poll(&p, 1, (int)(left * 1000) + 1);
        if (r > 0) return 1;
        if (r < 0 && errno != EINTR) return -1;
    }
}

/* GET /metrics from host:port into a malloc'd buffer (whole response); 0 or -1 with err. */
static int http_get(const char *host, const char *port, const char *token, char **out,
                    size_t *outlen, char *err, size_t errlen) {
    *out = NULL;
    *outlen = 0;
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    int gr = getaddrinfo(host, port, &hints, &ai);
    if (gr != 0) {
        snprintf(err, errlen, "no answer: cannot resolve host (%s)", gai_strerror(gr));
        return -1;
    }
    double t0 = now_s();
    int fd = -1;
    snprintf(err, errlen, "no answer");
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        int r = connect(fd, a->ai_addr, a->ai_addrlen);
        if (r != 0 && errno == EINPROGRESS) {
            int w = wait_fd(fd, POLLOUT, t0 + TOP_CONNECT_S);
            if (w <= 0) {
                snprintf(err, errlen, "no answer: connect timed out");
                close(fd);
                fd = -1;
                continue;
            }
            int soerr = 0;
            socklen_t sl = sizeof soerr;
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
            r = soerr ? -1 : 0;
            errno = soerr;
        }
        if (r != 0) {
            snprintf(err, errlen, "no answer: %s", strerror(errno));
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    if (fd < 0) return -1;

    char req[1024];
    int rl;
    if (token && *token && strlen(token) < 512 && !strpbrk(token, "\r\n"))
        rl = snprintf(req, sizeof req,
                      "GET /metrics HTTP/1.1\r\nHost: %s:%s\r\nAccept: text/plain;version=0.0.4\r\n"
                      "Authorization: Bearer %s\r\nConnection: close\r\n\r\n",
                      host, port, token);
    else
        rl = snprintf(req, sizeof req,
                      "GET /metrics HTTP/1.1\r\nHost: %s:%s\r\nAccept: text/plain;version=0.0.4\r\n"
                      "Connection: close\r\n\r\n",
                      host, port);
    if (rl < 0 || (size_t)rl >= sizeof req) rl = (int)strlen(req);
    double deadline = t0 + TOP_TOTAL_S;
    size_t sent = 0;
    while (sent < (size_t)rl) {
        ssize_t w = send(fd, req + sent, (size_t)rl - sent, MSG_NOSIGNAL);
        if (w > 0) {
            sent += (size_t)w;
            continue;
        }
        if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (wait_fd(fd, POLLOUT, deadline) > 0) continue;
            snprintf(err, errlen, "no answer: request timed out");
        } else {
            snprintf(err, errlen, "no answer: send: %s", w < 0 ? strerror(errno) : "closed");
        }
        close(fd);
        return -1;
    }
    size_t cap = 64 * 1024, len = 0;
    char *buf = malloc(cap + 1);
    if (!buf) {
        close(fd);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (;;) {
        if (len == cap) {
            if (cap >= TOP_MAX_RESPONSE) {
                snprintf(err, errlen, "bad response: larger than %u MiB", TOP_MAX_RESPONSE >> 20);
                free(buf);
                close(fd);
                return -1;
            }
            size_t nc = cap * 2 > TOP_MAX_RESPONSE ? TOP_MAX_RESPONSE : cap * 2;
            char *nb = realloc(buf, nc + 1);
            if (!nb) {
                free(buf);
                close(fd);
                snprintf(err, errlen, "out of memory");
                return -1;
            }
            buf = nb;
            cap = nc;
        }
        ssize_t r = recv(fd, buf + len, cap - len, 0);
        if (r > 0) {
            len += (size_t)r;
            continue;
        }
        if (r == 0) break;
        if (errno == EAGAIN || errno == EINTR) {
            int w = wait_fd(fd, POLLIN, deadline);
            if (w > 0) continue;
            snprintf(err, errlen, "no answer: response timed out after %.0f s", TOP_TOTAL_S);
        } else {
            snprintf(err, errlen, "no answer: recv: %s", strerror(errno));
        }
        free(buf);
        close(fd);
        return -1;
    }
    close(fd);
    if (len == 0) {
        free(buf);
        snprintf(err, errlen, "no answer: connection closed without a response");
        return -1;
    }
    buf[len] = 0;
    *out = buf;
    *outlen = len;
    return 0;
}

/* ------------------------------------------------------------------ figures */

static void copy_label(char *dst, size_t n, const char *src) {
    size_t k = 0;
    for (; src[k] && k + 1 < n; k++) {
        unsigned char c = (unsigned char)src[k];
        dst[k] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    dst[k] = 0;
}

static void set_once(double *f, double v) {
    if (isnan(*f)) *f = v;
}

static gpu_fig *gpu_of(snap *s, const char *id) {
    char clean[16];
    copy_label(clean, sizeof clean, id);
    for (int k = 0; k < s->ngpu; k++)
        if (!strcmp(s->gpu[k].id, clean)) return &s->gpu[k];
    if (s->ngpu >= TOP_MAX_GPUS) return NULL;
    gpu_fig *g = &s->gpu[s->ngpu++];
    memcpy(g->id, clean, sizeof clean);
    g->util = g->power = g->mem_used = g->mem_total = NAN;
    return g;
}

static void on_sample(const tp_prom_sample *smp, void *arg) {
    snap *s = arg;
    const char *n = smp->name;
    double v = smp->value;
    if (strncmp(n, "trainprof_", 10) != 0) return;
    n += 10;
    if (!strncmp(n, "gpu_", 4)) {
        const char *id = tp_prom_get_label(smp, "gpu");
        gpu_fig *g = gpu_of(s, id ? id : "?");
        if (!g) return;
        n += 4;
        if (!strcmp(n, "utilization_ratio")) set_once(&g->util, v);
        else if (!strcmp(n, "power_watts")) set_once(&g->power, v);
        else if (!strcmp(n, "memory_used_bytes")) set_once(&g->mem_used, v);
        else if (!strcmp(n, "memory_total_bytes")) set_once(&g->mem_total, v);
        return;
    }
    double *f = NULL;
    if (!strcmp(n, "steps_total")) f = &s->steps_total;
    else if (!strcmp(n, "step_number")) f = &s->step_number;
    else if (!strcmp(n, "step_last_duration_seconds")) f = &s->last_dur;
    else if (!strcmp(n, "step_duration_seconds_sum")) f = &s->dur_sum;
    else if (!strcmp(n, "step_duration_seconds_count")) f = &s->dur_count;
    else if (!strcmp(n, "tokens_total")) f = &s->tokens_total;
    else if (!strcmp(n, "tokens_per_second")) f = &s->tokens_ps;
    else if (!strcmp(n, "samples_total")) f = &s->samples_total;
    else if (!strcmp(n, "samples_per_second")) f = &s->samples_ps;
    else if (!strcmp(n, "model_flops_total")) f = &s->flops_total;
    else if (!strcmp(n, "model_flops_per_second")) f = &s->flops_ps;
    if (f) {
        set_once(f, v);
        const char *r = tp_prom_get_label(smp, "rank");
        if (r && !s->rank[0]) copy_label(s->rank, sizeof s->rank, r);
        r = tp_prom_get_label(smp, "local_rank");
        if (r && !s->local_rank[0]) copy_label(s->local_rank, sizeof s->local_rank, r);
    }
}

static void snap_init(snap *s) {
    memset(s, 0, sizeof *s);
    s->steps_total = s->step_number = s->last_dur = s->dur_sum = s->dur_count = NAN;
    s->tokens_total = s->tokens_ps = s->samples_total = s->samples_ps = NAN;
    s->flops_total = s->flops_ps = NAN;
}

/* What a scrape does with the endpoint's answer: `buf` (len bytes, NUL-terminated,
 * malloc'ed; freed here), received at time t (s), parsed as an HTTP/1.x response or, with
 * `body_only`, taken as the body of a 200 response. Sets the endpoint's status line and
 * makes the parsed samples its current snapshot (the current one becoming the previous). The
 * fuzz target (tests/fuzz/fuzz_metrics.c) feeds its input through here. */
static void ingest(endpoint *e, char *buf, size_t len, double t, int body_only) {
    snap s;
    snap_init(&s);
    s.t = t;
    tp_http_resp r;
    char err[160];
    if (body_only) {
        r.status = 200;
        r.body = buf;
        r.body_len = len;
    } else if (tp_http_parse(buf, len, &r, err, sizeof err) != 0) {
        e->up = 0;
        snprintf(e->status, sizeof e->status, "bad response: %s", err);
        free(buf);
        return;
    }
    if (r.status != 200) {
        e->up = 0;
        snprintf(e->status, sizeof e->status, "HTTP %d%s", r.status,
                 r.status == 401 ? " (TRAINPROF_METRICS_TOKEN?)" : "");
        free(buf);
        return;
    }
    tp_prom_stats st;
    tp_prom_parse(r.body, r.body_len, on_sample, &s, &st);
    free(buf);
    s.valid = 1;
    s.nsamples = st.samples;
    s.bad = st.bad;
    e->up = 1;
    if (st.bad)
        snprintf(e->status, sizeof e->status, "ok, %zu malformed line%s skipped", st.bad,
                 st.bad == 1 ? "" : "s");
    else if (!st.samples)
        snprintf(e->status, sizeof e->status, "ok, no samples");
    else
        snprintf(e->status, sizeof e->status, "ok");
    if (e->cur.valid) e->prev = e->cur;
    e->cur = s;
}

static void scrape(endpoint *e, const char *token) {
    char *buf = NULL;
    size_t len = 0;
    char err[160];
    double t = now_s();
    if (http_get(e->host, e->port, token, &buf, &len, err, sizeof err) != 0) {
        e->up = 0;
        snprintf(e->status, sizeof e->status, "%s", err);
        return;
    }
    ingest(e, buf, len, t, 0);
}

static void scrape_all(endpoint *eps, int n, const char *token) {
    for (int k = 0; k < n && !g_stop; k++) scrape(&eps[k], token);
}

/* ------------------------------------------------------------------ rows */

typedef struct row {
    const endpoint *e;
    char rank[24];
    double step, last_ms, mean_ms, tps, tflops, steps_ps, util, power, mem_used, mem_total;
} row;

static double rate(double cur, double prev, double dt) {
    if (isnan(cur) || isnan(prev) || !(dt > 0) || cur < prev) return NAN;
    return (cur - prev) / dt;
}

static int has_steps(const snap *s) {
    return !isnan(s->steps_total) || !isnan(s->step_number) || !isnan(s->dur_count) ||
           !isnan(s->tokens_total) || s->rank[0];
}

static void fill_gpu(row *r, const gpu_fig *g) {
    r->util = g->util;
    r->power = g->power;
    r->mem_used = g->mem_used;
    r->mem_total = g->mem_total;
}

static row blank_row(const endpoint *e) {
    row r;
    memset(&r, 0, sizeof r);
    r.e = e;
    r.step = r.last_ms = r.mean_ms = r.tps = r.tflops = r.steps_ps = NAN;
    r.util = r.power = r.mem_used = r.mem_total = NAN;
    snprintf(r.rank, sizeof r.rank, "-");
    return r;
}

/* Rows of one endpoint into out (at most max); returns the count. */
static int endpoint_rows(const endpoint *e, row *out, int max) {
    if (max <= 0) return 0;
    if (!e->up || !e->cur.valid) {
        out[0] = blank_row(e);
        return 1;
    }
    const snap *c = &e->cur, *p = e->prev.valid ? &e->prev : NULL;
    int n = 0;
    int gpu_used = -1;
    if (has_steps(c)) {
        row r = blank_row(e);
        if (c->rank[0]) snprintf(r.rank, sizeof r.rank, "%s", c->rank);
        else if (c->local_rank[0]) snprintf(r.rank, sizeof r.rank, "%s", c->local_rank);
        else snprintf(r.rank, sizeof r.rank, "%d", e->index);
        r.step = c->step_number;
        r.last_ms = c->last_dur * 1e3;
        double dt = p ? c->t - p->t : 0;
        if (p && c->dur_count > p->dur_count && c->dur_sum >= p->dur_sum)
            r.mean_ms = (c->dur_sum - p->dur_sum) / (c->dur_count - p->dur_count) * 1e3;
        else if (c->dur_count > 0)
            r.mean_ms = c->dur_sum / c->dur_count * 1e3;
        r.tps = p ? rate(c->tokens_total, p->tokens_total, dt) : NAN;
        if (isnan(r.tps)) r.tps = c->tokens_ps;
        r.tflops = (p ? rate(c->flops_total, p->flops_total, dt) : NAN) * 1e-12;
        if (isnan(r.tflops)) r.tflops = c->flops_ps * 1e-12;
        r.steps_ps = p ? rate(c->steps_total, p->steps_total, dt) : NAN;
        if (c->ngpu == 1) gpu_used = 0;
        for (int k = 0; k < c->ngpu && gpu_used < 0; k++)
            if (c->local_rank[0] && !strcmp(c->gpu[k].id, c->local_rank)) gpu_used = k;
        if (gpu_used >= 0) fill_gpu(&r, &c->gpu[gpu_used]);
        out[n++] = r;
    }
    for (int k = 0; k < c->ngpu && n < max; k++) {
        if (k == gpu_used) continue;
        row r = blank_row(e);
        snprintf(r.rank, sizeof r.rank, "gpu%s", c->gpu[k].id);
        fill_gpu(&r, &c->gpu[k]);
        out[n++] = r;
    }
    if (n == 0) out[n++] = blank_row(e);
    return n;
}

/* a number in a column: "-" when unknown or not finite */
static const char *num(char *b, size_t n, double v, int decimals) {
    if (!isfinite(v)) snprintf(b, n, "-");
    else if (fabs(v) >= 1e12) snprintf(b, n, "%.3g", v);
    else snprintf(b, n, "%.*f", decimals, v);
    return b;
}

static const char *mem(char *b, size_t n, double used, double total) {
    const double gib = 1024.0 * 1024 * 1024;
    char u[32], t[32];
    if (!isfinite(used) && !isfinite(total)) snprintf(b, n, "-");
    else
        snprintf(b, n, "%s/%s GiB", num(u, sizeof u, used / gib, 1),
                 num(t, sizeof t, total / gib, 1));
    return b;
}

#define HEAD_FMT "%-21s %-6s %9s %9s %9s %11s %7s %5s %8s %-16s %s"

static void format_row(char *b, size_t n, const row *r) {
    char s1[32], s2[32], s3[32], s4[32], s5[32], s6[32], s7[80], s8[32];
    char ep[22];
    copy_label(ep, sizeof ep, r->e->spec);
    snprintf(b, n, HEAD_FMT, ep, r->rank, num(s1, sizeof s1, r->step, 0),
             num(s2, sizeof s2, r->last_ms, 3), num(s3, sizeof s3, r->mean_ms, 3),
             num(s4, sizeof s4, r->tps, 0), num(s8, sizeof s8, r->tflops, 1),
             num(s5, sizeof s5, r->util * 100, 0),
             num(s6, sizeof s6, r->power, 1), mem(s7, sizeof s7, r->mem_used, r->mem_total),
             r->e->status);
}

static void format_header_cols(char *b, size_t n) {
    snprintf(b, n, HEAD_FMT, "ENDPOINT", "RANK", "STEP", "LAST_MS", "MEAN_MS", "TOKENS/S",
             "TFLOP/S", "GPU%", "POWER_W", "MEMORY", "STATUS");
}

/* totals over the rows */
static void format_summary(char *b, size_t n, const endpoint *eps, int neps, const row *rows,
                           int nrows) {
    int up = 0;
    for (int k = 0; k < neps; k++) up += eps[k].up;
    double tps = 0, tfl = 0, power = 0, used = 0, total = 0, util = 0, slow = NAN, smin = NAN,
           smax = NAN;
    int ntps = 0, ntfl = 0, npow = 0, nmem = 0, nutil = 0;
    for (int k = 0; k < nrows; k++) {
        const row *r = &rows[k];
        if (isfinite(r->tps)) tps += r->tps, ntps++;
        if (isfinite(r->tflops)) tfl += r->tflops, ntfl++;
        if (isfinite(r->power)) power += r->power, npow++;
        if (isfinite(r->mem_used) && isfinite(r->mem_total))
            used += r->mem_used, total += r->mem_total, nmem++;
        if (isfinite(r->util)) util += r->util, nutil++;
        if (isfinite(r->mean_ms) && (isnan(slow) || r->mean_ms > slow)) slow = r->mean_ms;
        if (isfinite(r->step)) {
            if (isnan(smin) || r->step < smin) smin = r->step;
            if (isnan(smax) || r->step > smax) smax = r->step;
        }
    }
    char a[32], c[32], d[32], e[32], f[32], h[32], g[80], t[32]; /* one buffer per argument */
    snprintf(b, n,
             "endpoints %d/%d up | steps %s..%s | slowest mean step %s ms | %s tokens/s | "
             "%s TFLOP/s per GPU | GPU %s%% | power %s W | memory %s",
             up, neps, num(a, sizeof a, smin, 0), num(c, sizeof c, smax, 0),
             num(d, sizeof d, slow, 3), ntps ? num(e, sizeof e, tps, 0) : "-",
             ntfl ? num(t, sizeof t, tfl / ntfl, 1) : "-",
             nutil ? num(f, sizeof f, util / nutil * 100, 0) : "-",
             npow ? num(h, sizeof h, power, 1) : "-",
             nmem ? mem(g, sizeof g, used, total) : "-");
}

static int build_rows(const endpoint *eps, int neps, row **rows) {
    int cap = 0;
    for (int k = 0; k < neps; k++) cap += 1 + (eps[k].up ? eps[k].cur.ngpu : 0);
    row *r = calloc((size_t)cap + 1, sizeof *r);
    if (!r) return 0;
    int n = 0;
    for (int k = 0; k < neps; k++) n += endpoint_rows(&eps[k], r + n, cap - n);
    *rows = r;
    return n;
}

/* ------------------------------------------------------------------ output */

static void print_once(const endpoint *eps, int neps) {
    row *rows = NULL;
    int n = build_rows(eps, neps, &rows);
    char line[1024];
    format_summary(line, sizeof line, eps, neps, rows, n);
    printf("trainprof top: %s\n", line);
    format_header_cols(line, sizeof line);
    printf("%s\n", line);
    for (int k = 0; k < n; k++) {
        format_row(line, sizeof line, &rows[k]);
        printf("%s\n", line);
    }
    free(rows);
}

#ifdef TPROF_HAVE_NCURSES
/* ncurses, opened at run time: `trainprof run` and every other command must work on a GPU
 * node without libncurses (GPU nodes often have none), so the binary does
 * not link it; only the live view needs it and says so when it cannot be loaded. Member
 * names carry a prefix because curses.h may define the plain names as macros. */
static struct {
    WINDOW *(*f_initscr)(void);
    int (*f_endwin)(void), (*f_cbreak)(void), (*f_noecho)(void), (*f_curs_set)(int);
    int (*f_keypad)(WINDOW *, bool), (*f_clearok)(WINDOW *, bool);
    void (*f_wtimeout)(WINDOW *, int);
    int (*f_wgetch)(WINDOW *), (*f_werase)(WINDOW *), (*f_wrefresh)(WINDOW *);
    int (*f_wmove)(WINDOW *, int, int), (*f_waddnstr)(WINDOW *, const char *, int);
    int (*f_wattron)(WINDOW *, int), (*f_wattroff)(WINDOW *, int);
    WINDOW **p_stdscr;
    int *p_lines, *p_cols;
} K;

static int load_curses(char *why, size_t n) {
    static const char *const libs[] = {"libncursesw.so.6", "libncurses.so.6", "libncursesw.so.5",
                                       "libncurses.so.5"};
    void *h = NULL;
    for (size_t i = 0; i < sizeof libs / sizeof *libs && !h; i++) h = dlopen(libs[i], RTLD_NOW);
    if (!h) {
        snprintf(why, n, "no ncurses library (%s)", dlerror());
        return -1;
    }
    static const char *const names[] = {"initscr", "endwin",  "cbreak",  "noecho",  "curs_set",
                                        "keypad",  "clearok", "wtimeout", "wgetch", "werase",
                                        "wrefresh", "wmove",  "waddnstr", "wattron", "wattroff",
                                        "stdscr",  "LINES",   "COLS"};
    void *sym[sizeof names / sizeof *names];
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!(sym[i] = dlsym(h, names[i]))) {
            snprintf(why, n, "the ncurses library lacks %s", names[i]);
            return -1;
        }
    int k = 0;
    *(void **)&K.f_initscr = sym[k++];
    *(void **)&K.f_endwin = sym[k++];
    *(void **)&K.f_cbreak = sym[k++];
    *(void **)&K.f_noecho = sym[k++];
    *(void **)&K.f_curs_set = sym[k++];
    *(void **)&K.f_keypad = sym[k++];
    *(void **)&K.f_clearok = sym[k++];
    *(void **)&K.f_wtimeout = sym[k++];
    *(void **)&K.f_wgetch = sym[k++];
    *(void **)&K.f_werase = sym[k++];
    *(void **)&K.f_wrefresh = sym[k++];
    *(void **)&K.f_wmove = sym[k++];
    *(void **)&K.f_waddnstr = sym[k++];
    *(void **)&K.f_wattron = sym[k++];
    *(void **)&K.f_wattroff = sym[k++];
    K.p_stdscr = sym[k++];
    K.p_lines = sym[k++];
    K.p_cols = sym[k++];
    return 0;
}

static void put_line(int y, const char *line, int w, int attr) {
    WINDOW *win = *K.p_stdscr;
    if (attr) K.f_wattron(win, attr);
    if (K.f_wmove(win, y, 0) != ERR) K.f_waddnstr(win, line, w);
    if (attr) K.f_wattroff(win, attr);
}

static void draw(const endpoint *eps, int neps, int *scroll, double interval) {
    row *rows = NULL;
    int n = build_rows(eps, neps, &rows);
    char line[1024];
    WINDOW *win = *K.p_stdscr;
    K.f_werase(win);
    int H = *K.p_lines, W = *K.p_cols;
    if (H < 1 || W < 1) {
        free(rows);
        K.f_wrefresh(win);
        return;
    }
    time_t t = time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    char ts[16];
    strftime(ts, sizeof ts, "%H:%M:%S", &tm);
    snprintf(line, sizeof line, "trainprof top  %s  every %.1f s  (q quits)", ts, interval);
    put_line(0, line, W, (int)A_BOLD);
    if (H > 1) {
        format_summary(line, sizeof line, eps, neps, rows, n);
        put_line(1, line, W, 0);
    }
    int body = H - 4; /* title, summary, blank, column header */
    if (*scroll > n - (body > 0 ? body : 0)) *scroll = n - (body > 0 ? body : 0);
    if (*scroll < 0) *scroll = 0;
    if (H > 3) {
        format_header_cols(line, sizeof line);
        put_line(3, line, W, (int)A_REVERSE);
    }
    for (int y = 0; y < body && *scroll + y < n; y++) {
        const row *r = &rows[*scroll + y];
        format_row(line, sizeof line, r);
        put_line(4 + y, line, W, r->e->up ? 0 : (int)A_BOLD);
    }
    K.f_wrefresh(win);
    free(rows);
}

static int run_curses(endpoint *eps, int neps, const char *token, double interval) {
    char why[300];
    if (load_curses(why, sizeof why) != 0) {
        fprintf(stderr, "trainprof top: the live view needs ncurses: %s; --once works without it\n",
                why);
        return 1;
    }
    if (!K.f_initscr()) {
        fprintf(stderr, "trainprof top: cannot initialise the terminal\n");
        return 1;
    }
    WINDOW *win = *K.p_stdscr;
    K.f_cbreak();
    K.f_noecho();
    K.f_keypad(win, TRUE);
    K.f_curs_set(0);
    K.f_wtimeout(win, 100);
    int scroll = 0, any = 0;
    while (!g_stop) {
        scrape_all(eps, neps, token);
        for (int k = 0; k < neps; k++) any |= eps[k].up;
        draw(eps, neps, &scroll, interval);
        double next = now_s() + interval;
        while (!g_stop && now_s() < next) {
            int ch = K.f_wgetch(win);
            int page = *K.p_lines > 5 ? *K.p_lines - 5 : 1;
            if (ch == 'q' || ch == 'Q') g_stop = 1;
            else if (ch == KEY_DOWN) scroll++;
            else if (ch == KEY_UP) scroll--;
            else if (ch == KEY_NPAGE) scroll += page;
            else if (ch == KEY_PPAGE) scroll -= page;
            else if (ch == KEY_RESIZE || ch == 12 /* ^L */) {
                if (ch == 12) K.f_clearok(win, TRUE);
            } else continue;
            if (!g_stop) draw(eps, neps, &scroll, interval);
        }
    }
    K.f_endwin();
    return any ? 0 : 1;
}
#endif

/* ------------------------------------------------------------------ options */

static int add_endpoint(endpoint *eps, int *n, const char *spec, size_t len, char *err,
                        size_t errlen) {
    if (*n >= TOP_MAX_ENDPOINTS) {
        snprintf(err, errlen, "at most %d endpoints", TOP_MAX_ENDPOINTS);
        return -1;
    }
    if (len == 0 || len >= sizeof eps[0].spec) {
        snprintf(err, errlen, "empty or too long endpoint");
        return -1;
    }
    endpoint *e = &eps[*n];
    memset(e, 0, sizeof *e);
    memcpy(e->spec, spec, len);
    e->spec[len] = 0;
    char *colon = strrchr(e->spec, ':');
    if (!colon || colon == e->spec) {
        snprintf(err, errlen, "endpoint '%.200s' is not HOST:PORT", e->spec);
        return -1;
    }
    const char *h = e->spec;
    size_t hl = (size_t)(colon - e->spec);
    if (h[0] == '[') {
        if (hl < 3 || h[hl - 1] != ']') {
            snprintf(err, errlen, "endpoint '%.200s': IPv6 needs [ADDR]:PORT", e->spec);
            return -1;
        }
        h++;
        hl -= 2;
    }
    memcpy(e->host, h, hl);
    e->host[hl] = 0;
    char *end = NULL;
    errno = 0;
    long p = strtol(colon + 1, &end, 10);
    if (errno || !end || *end || end == colon + 1 || p < 1 || p > 65535) {
        snprintf(err, errlen, "endpoint '%.200s': port must be 1..65535", e->spec);
        return -1;
    }
    snprintf(e->port, sizeof e->port, "%ld", p);
    e->index = *n;
    snprintf(e->status, sizeof e->status, "not scraped yet");
    (*n)++;
    return 0;
}

static int usage(const char *fmt, const char *arg) {
    fprintf(stderr, "trainprof top: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'trainprof top --help'.\n");
    return 2;
}

int cmd_top(int argc, char **argv) {
    const char *endpoints = NULL, *range = NULL;
    double interval = 2.0;
    int once = 0;
    for (int i = 0; i < argc; i++) {
        const char *val;
        switch (cli_next(&top_cmd, argc, argv, &i, &val)) {
        case CLI_END: /* top takes no operand: none may follow "--" */
            if (i + 1 < argc) return usage("unexpected argument '%s'", argv[i + 1]);
            break;
        case OPT_HELP: cli_usage(&top_cmd, stdout); return 0;
        case OPT_ENDPOINTS: endpoints = val; break;
        case OPT_PORT_RANGE: range = val; break;
        case OPT_INTERVAL: {
            char *end = NULL;
            interval = strtod(val, &end);
            if (!end || *end || end == val || !(interval >= 0.1 && interval <= 3600))
                return usage("--interval needs seconds from 0.1 to 3600, got '%s'", val);
            break;
        }
        case OPT_ONCE: once = 1; break;
        default: return usage("unexpected argument '%s'", argv[i]);
        }
    }
    if (!endpoints && !range)
        return usage("%s", "needs --endpoints HOST:PORT,... or --port-range [HOST:]BASE:N");
#ifndef TPROF_HAVE_NCURSES
    if (!once)
        return usage("%s", "this build has no ncurses (apt-get install libncurses-dev and "
                           "rebuild): only --once is available");
#endif
    if (!once && (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)))
        return usage("%s", "the live view needs a terminal; use --once for plain text");

    endpoint *eps = calloc(TOP_MAX_ENDPOINTS, sizeof *eps);
    if (!eps) {
        fprintf(stderr, "trainprof top: out of memory\n");
        return 1;
    }
    int n = 0, rc;
    char err[300];
    if (endpoints) {
        const char *p = endpoints;
        for (;;) {
            const char *c = strchr(p, ',');
            size_t l = c ? (size_t)(c - p) : strlen(p);
            if (add_endpoint(eps, &n, p, l, err, sizeof err) != 0) {
                rc = usage("--endpoints: %s", err);
                goto out;
            }
            if (!c) break;
            p = c + 1;
        }
    }
    if (range) {
        /* [HOST:]BASE:N; HOST may be [V6ADDR] */
        char host[260] = "127.0.0.1";
        const char *last = strrchr(range, ':');
        const char *rest = range;
        if (!last) {
            rc = usage("--port-range needs [HOST:]BASE:N, got '%s'", range);
            goto out;
        }
        const char *mid = NULL; /* the ':' before BASE when a host is given */
        for (const char *q = last - 1; q >= range; q--)
            if (*q == ':') {
                mid = q;
                break;
            }
        if (mid && range[0] == '[' && memchr(range, ']', (size_t)(mid - range)) == NULL) mid = NULL;
        if (mid) {
            size_t hl = (size_t)(mid - range);
            if (hl == 0 || hl >= sizeof host) {
                rc = usage("--port-range: bad host in '%s'", range);
                goto out;
            }
            memcpy(host, range, hl);
            host[hl] = 0;
            rest = mid + 1;
        }
        char *end = NULL;
        errno = 0;
        long base = strtol(rest, &end, 10);
        long cnt = 0;
        if (!errno && end == last) cnt = strtol(last + 1, &end, 10);
        if (errno || !end || *end || base < 1 || base > 65535 || cnt < 1 ||
            cnt > TOP_MAX_ENDPOINTS || base + cnt - 1 > 65535) {
            rc = usage("--port-range needs [HOST:]BASE:N with ports in 1..65535, got '%s'", range);
            goto out;
        }
        for (long k = 0; k < cnt; k++) {
            char spec[300];
            int l = snprintf(spec, sizeof spec, "%s:%ld", host, base + k);
            if (add_endpoint(eps, &n, spec, (size_t)l, err, sizeof err) != 0) {
                rc = usage("--port-range: %s", err);
                goto out;
            }
            eps[n - 1].index = (int)k;
        }
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    const char *token = getenv("TRAINPROF_METRICS_TOKEN");

    if (once) {
        scrape_all(eps, n, token);
        int any = 0;
        for (int k = 0; k < n; k++) any |= eps[k].up;
        if (any && !g_stop) {
            sleep_s(interval < 1.0 ? interval : 1.0);
            for (int k = 0; k < n && !g_stop; k++)
                if (eps[k].up) scrape(&eps[k], token);
        }
        print_once(eps, n);
        any = 0;
        for (int k = 0; k < n; k++) any |= eps[k].up;
        if (!any) fprintf(stderr, "trainprof top: no endpoint answered\n");
        rc = any ? 0 : 1;
    } else {
#ifdef TPROF_HAVE_NCURSES
        rc = run_curses(eps, n, token, interval);
#else
        rc = 2;
#endif
    }
out:
    free(eps);
    return rc;
}
