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
 * must run the same code as the command: feed() hands each scrape to top.c's ingest(), what
 * top's scrape() calls after the socket read.
 */
#include "../../cli/top.c"

#include <stdint.h>

static void feed(endpoint *e, const uint8_t *data, size_t len, double t) {
    /* http_get hands over a NUL-terminated malloc'd copy of what it received */
    char *buf = malloc(len + 1);
    if (!buf) return;
    memcpy(buf, data, len);
    buf[len] = 0;
    ingest(e, buf, len, t, !(len >= 7 && !memcmp(buf, "HTTP/1.", 7)));
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
