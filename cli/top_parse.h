/* top_parse.h — what `trainprof top` parses: the Prometheus text format (0.0.4, and the
 * sample lines of OpenMetrics) and an HTTP/1.x response. Both work on bounded buffers that
 * need not be NUL-terminated and never trust their input: a malformed line is counted and
 * skipped, never read past. */
#ifndef TPROF_TOP_PARSE_H
#define TPROF_TOP_PARSE_H

#include <stddef.h>

#define TP_PROM_MAX_LABELS 16
#define TP_PROM_NAME_MAX 256
#define TP_PROM_LNAME_MAX 64
#define TP_PROM_LVALUE_MAX 256

typedef struct tp_prom_label {
    char name[TP_PROM_LNAME_MAX];
    char value[TP_PROM_LVALUE_MAX]; /* unescaped: \\ \" \n; may hold any byte but NUL */
} tp_prom_label;

typedef struct tp_prom_sample {
    char name[TP_PROM_NAME_MAX];
    int nlabels;
    tp_prom_label labels[TP_PROM_MAX_LABELS];
    double value; /* +Inf, -Inf and NaN as such */
    int has_timestamp;
    long long timestamp;
} tp_prom_sample;

typedef struct tp_prom_stats {
    size_t lines;   /* non-empty lines */
    size_t samples; /* sample lines parsed */
    size_t bad;     /* lines skipped as malformed (or over the limits above) */
} tp_prom_stats;

typedef void (*tp_prom_fn)(const tp_prom_sample *s, void *arg);

/* One line (without its '\n'; a trailing '\r' is ignored): 1 = a sample in *out, 0 = blank
 * or comment (# HELP, # TYPE, # EOF, ...), -1 = malformed. */
int tp_prom_parse_line(const char *p, size_t n, tp_prom_sample *out);

/* Every line of buf[0..len): fn for each sample; stats (may be NULL) counted. */
void tp_prom_parse(const char *buf, size_t len, tp_prom_fn fn, void *arg, tp_prom_stats *st);

/* The value of label `name`, or NULL. */
const char *tp_prom_get_label(const tp_prom_sample *s, const char *name);

/* An HTTP/1.x response held whole in buf[0..len) (the connection was closed, or the body is
 * complete): the status code and the body, chunked transfer coding decoded in place and
 * Content-Length honoured. 0 on success; -1 with a reason in err otherwise. */
typedef struct tp_http_resp {
    int status;
    char *body;
    size_t body_len;
} tp_http_resp;

int tp_http_parse(char *buf, size_t len, tp_http_resp *r, char *err, size_t errlen);

#endif
