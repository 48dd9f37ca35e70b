/*
 * fuzz_metrics.c — fuzz target: what `trainprof top` does with an endpoint's answer
 * (tests/fuzz/README.md): the HTTP/1.x response parser (tp_http_parse: status line,
 * headers, chunked transfer coding, Content-Length), the Prometheus text parser
 * (tp_prom_parse) and top's own use of the samples (cli/top.c: the figures of a scrape, the
 * rows with their window rates and the text of each row and of the summary line).
 *
 * The input is one or two scrapes separated by a NUL byte (the first is the earlier one, so
 * rates between the two are computed; one scrape is used as both). A scrape that starts with
 * "HTTP/1." is a whole response, as top receives it from the socket; anything else is taken
 * as the body of a 200 response (most of the fuzzing then goes to the text format).
 *
 * top.c is included rather than linked: its figures are static functions, and this target
 * must run the same code as the command. The part of top.c's scrape() that follows the
 * socket read is repeated in feed() below, line for line.
 */
#include "../../cli/top.c"

#include <stdint.h>

static void feed(endpoint *e, const uint8_t *data, size_t len, double t) {
    snap s;
    snap_init(&s);
    s.t = t;
    /* http_get hands over a NUL-terminated malloc'd copy of what it received */
    char *buf = malloc(len + 1);
    if (!buf) return;
    memcpy(buf, data, len);
    buf[len] = 0;
    tp_http_resp r;
    char err[160];
    if (len >= 7 && !memcmp(buf, "HTTP/1.", 7)) {
        if (tp_http_parse(buf, len, &r, err, sizeof err) != 0) {
            e->up = 0;
            snprintf(e->status, sizeof e->status, "bad response: %s", err);
            free(buf);
            return;
        }
    } else {
        r.status = 200;
        r.body = buf;
        r.body_len = len;
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static endpoint *eps;
    if (!eps && !(eps = calloc(1, sizeof *eps))) return 0;
    char err[300];
    int n = 0;
    memset(eps, 0, sizeof *eps);
    if (add_endpoint(eps, &n, "127.0.0.1:9464", 14, err, sizeof err) != 0) abort();
    const uint8_t *nul = memchr(data, 0, size);
    size_t first = nul ? (size_t)(nul - data) : size;
    feed(&eps[0], data, first, 100.0);
    if (nul) feed(&eps[0], nul + 1, size - first - 1, 102.0);
    else feed(&eps[0], data, size, 102.0);
    row *rows = NULL;
    int nr = build_rows(eps, n, &rows);
    char line[1024];
    format_summary(line, sizeof line, eps, n, rows, nr);
    format_header_cols(line, sizeof line);
    for (int k = 0; k < nr; k++) format_row(line, sizeof line, &rows[k]);
    free(rows);
    return 0;
}
