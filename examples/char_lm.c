/*
 * char_lm.c - trainprof's bundled demo: a small program that really trains.
 *
 * It fits a character-level language model to a text file (by default the
 * Shakespeare sonnets in examples/data/). The model is a Bengio-style MLP:
 * the embeddings of the previous CONTEXT characters are concatenated, passed
 * through one tanh hidden layer, and a softmax over the vocabulary predicts
 * the next character. Forward pass, backward pass and the Adam optimizer are
 * written out by hand so the program needs nothing beyond libc, libm and
 * pthreads, and so every phase of a training step is plain CPU work that a
 * profiler can attribute.
 *
 * The point of the file is to give trainprof a realistic workload shape: a
 * loader thread builds batches (random windows of text, encoded to ids) and
 * hands them over through a small bounded queue, while the main thread runs
 * the step loop. Each step is wrapped in an NVTX-style range "step" with the
 * nested phases "data", "forward", "backward" and "optimizer"; the loader's
 * work on each batch is the range "load_batch" on the thread named "loader".
 * --data-delay-us makes the loader artificially slow, so the "data" phase
 * (the main thread waiting for input) grows and dominates - the classic
 * input-bound profile the toolkit should be able to point out.
 *
 * Build (with NVTX from the CUDA toolkit instead of trainprof):
 *   gcc -std=c11 -O2 -D_GNU_SOURCE -DCHAR_LM_USE_NVTX -I/usr/local/cuda/include \
 *       examples/char_lm.c -o char_lm -lm -lpthread -ldl
 * Without -DCHAR_LM_USE_NVTX it includes trainprof.h and links against
 * trainprof. -DCHAR_LM_DATA_DIR='"/abs/path/examples/data"' tells the binary
 * where the bundled text is; otherwise it looks relative to its own location.
 *
 * A run is deterministic for a given --seed: the loader draws its windows
 * from its own seeded generator and batches are consumed in order.
 *
 * Data-parallel mode (built with -DTPROF_EXAMPLE_MPI and linked with MPI: the
 * char_lm_mpi executable; `mpirun -np 2 char_lm_mpi --steps N`). Every rank
 * holds the whole model and reads its own shard of the text (rank r draws its
 * windows from the r-th of world-size equal slices); rank 0's initial
 * parameters are broadcast (MPI_Bcast) so that all replicas start equal; after
 * each backward pass the gradients are summed with one MPI_Allreduce and
 * divided by the world size (the "allreduce" range and Megatron's
 * "all-grads-sync" timer), so every rank applies the same Adam step. Logged
 * losses are means over all ranks (one 8-byte MPI_Allreduce per log line, one
 * 16-byte one for the final figures); rank 0 prints them, and the timers are
 * logged by the last rank as in Megatron, aggregated across ranks through
 * trainprof's collectives hook (installed by libtrainprof_mpi.so, which
 * `trainprof run` preloads; without it each rank's timers are its own).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* syscall(), readlink(), nanosleep() */
#endif

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Timers always come from trainprof (Megatron-LM's Timers API and log format); the
 * ranges come from NVTX when the toolkit's headers are there, else from trainprof too. */
#include "trainprof.h"

#ifdef TPROF_EXAMPLE_MPI
#include <mpi.h>
#endif

#if defined(CHAR_LM_USE_NVTX)
#include <nvtx3/nvToolsExt.h>
#define RANGE_PUSH(name) nvtxRangePushA(name)
#define RANGE_POP() nvtxRangePop()
#define NAME_THREAD(name) nvtxNameOsThreadA((uint32_t)syscall(SYS_gettid), name)
#else
#define RANGE_PUSH(name) tprof_range_push(name)
#define RANGE_POP() tprof_range_pop()
#define NAME_THREAD(name) tprof_name_thread(name)
#endif

/* Fixed architecture constants. Only the sizes worth experimenting with from
 * the command line (batch, hidden) are flags. */
enum {
    CONTEXT = 6,       /* characters of history the model sees */
    EMBED = 16,        /* embedding width per character */
    QUEUE_SLOTS = 4,   /* batches the loader may run ahead of the trainer */
    FINAL_WINDOW = 20, /* steps averaged for the reported final loss */
};

#define DATA_FILE_NAME "sonnets.txt"

#define DEFAULT_STEPS 1000
#define DEFAULT_BATCH 64
#define DEFAULT_HIDDEN 96
#define DEFAULT_SEED 1
#define DEFAULT_LOG_EVERY 20
#define DEFAULT_LR 0.003

/* This process's place in the data-parallel job (rank 0 of 1 without MPI). */
static int g_rank = 0, g_world = 1;

/* ------------------------------------------------------------------------ */
/* Random numbers: splitmix64, small and identical on every platform, which is
 * what makes runs reproducible (rand() differs between libcs). */

static uint64_t rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1) with 24 bits, exactly representable as a float. */
static float rng_unit(uint64_t *state)
{
    return (float)(rng_next(state) >> 40) * (1.0f / 16777216.0f);
}

/* Uniform in [0, n). The modulo bias is negligible for text-sized n. */
static size_t rng_below(uint64_t *state, size_t n)
{
    return (size_t)(rng_next(state) % (uint64_t)n);
}

/* ------------------------------------------------------------------------ */
/* Corpus: the raw text, re-encoded as dense ids 0..vocab-1. */

typedef struct {
    unsigned char *ids; /* text, one id per character */
    size_t len;
    int vocab;
    unsigned char id_to_char[256];
} Corpus;

static bool corpus_load(Corpus *c, const char *path)
{
    memset(c, 0, sizeof *c);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "char_lm: cannot open %s: %s\n", path, strerror(errno));
        return false;
    }
    size_t cap = 1 << 16, len = 0;
    unsigned char *buf = malloc(cap);
    while (buf) {
        len += fread(buf + len, 1, cap - len, f);
        if (len < cap)
            break;
        unsigned char *bigger = realloc(buf, cap * 2);
        if (!bigger) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = bigger;
        cap *= 2;
    }
    bool read_error = ferror(f);
    fclose(f);
    if (!buf || read_error) {
        fprintf(stderr, "char_lm: cannot read %s\n", path);
        free(buf);
        return false;
    }
    if (len < (size_t)CONTEXT + 2) {
        fprintf(stderr, "char_lm: %s is too short to train on (%zu bytes)\n", path, len);
        free(buf);
        return false;
    }

    /* Ids follow byte order, so the same text always gives the same ids. */
    bool seen[256] = {false};
    for (size_t i = 0; i < len; i++)
        seen[buf[i]] = true;
    unsigned char char_to_id[256] = {0};
    for (int ch = 0; ch < 256; ch++) {
        if (seen[ch]) {
            char_to_id[ch] = (unsigned char)c->vocab;
            c->id_to_char[c->vocab++] = (unsigned char)ch;
        }
    }
    for (size_t i = 0; i < len; i++)
        buf[i] = char_to_id[buf[i]];
    c->ids = buf;
    c->len = len;
    return true;
}

static void corpus_free(Corpus *c)
{
    free(c->ids);
    c->ids = NULL;
}

/* ------------------------------------------------------------------------ */
/* Batches and the bounded queue between loader and trainer. */

typedef struct {
    int *ctx; /* batch x CONTEXT input ids */
    int *tgt; /* batch target ids */
} Batch;

static bool batch_alloc(Batch *b, int batch)
{
    b->ctx = malloc(sizeof(int) * (size_t)batch * CONTEXT);
    b->tgt = malloc(sizeof(int) * (size_t)batch);
    return b->ctx && b->tgt;
}

static void batch_free(Batch *b)
{
    free(b->ctx);
    free(b->tgt);
    b->ctx = b->tgt = NULL;
}

/*
 * Ring of QUEUE_SLOTS preallocated batches. Slots [head, head+count) are full
 * and belong to the consumer; slot head+count is the one the producer fills
 * next. The producer fills it *outside* the lock - the expensive part must not
 * block the consumer - which is safe because a pop advances head and shrinks
 * count together, so that index never changes under the producer. The
 * consumer takes a batch by swapping buffer pointers with the slot, so no
 * batch data is copied and nothing is allocated while training.
 */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t not_empty;
    pthread_cond_t not_full;
    Batch slots[QUEUE_SLOTS];
    int head;
    int count;
    bool stop;          /* consumer gave up; producer should exit */
    bool producer_done; /* producer exited; no more batches will come */
} BatchQueue;

typedef struct {
    BatchQueue *queue;
    const Corpus *corpus;
    size_t lo, hi; /* this rank's shard of the text: windows start in [lo, hi - CONTEXT) */
    long batches; /* total batches to produce: one per training step */
    int batch;
    uint64_t seed;
    long delay_us; /* simulated slowness of the input pipeline */
} LoaderArgs;

static void sleep_us(long us)
{
    struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

/* Fill one batch with random windows of the text slice [lo, hi): CONTEXT ids as
 * input, the id after them as target. */
static void fill_batch(Batch *b, int batch, const Corpus *c, size_t lo, size_t hi,
                       uint64_t *rng)
{
    size_t windows = hi - lo - CONTEXT; /* starts with a following target */
    for (int i = 0; i < batch; i++) {
        size_t start = lo + rng_below(rng, windows);
        for (int k = 0; k < CONTEXT; k++)
            b->ctx[i * CONTEXT + k] = c->ids[start + (size_t)k];
        b->tgt[i] = c->ids[start + CONTEXT];
    }
}

static void *loader_main(void *arg)
{
    LoaderArgs *a = arg;
    BatchQueue *q = a->queue;
    NAME_THREAD("loader");
    uint64_t rng = a->seed ^ 0x5851F42D4C957F2Dull; /* own stream, apart from init */

    for (long n = 0; n < a->batches; n++) {
        pthread_mutex_lock(&q->mu);
        while (q->count == QUEUE_SLOTS && !q->stop)
            pthread_cond_wait(&q->not_full, &q->mu);
        bool stop = q->stop;
        int slot = (q->head + q->count) % QUEUE_SLOTS;
        pthread_mutex_unlock(&q->mu);
        if (stop)
            break;

        RANGE_PUSH("load_batch");
        fill_batch(&q->slots[slot], a->batch, a->corpus, a->lo, a->hi, &rng);
        if (a->delay_us > 0)
            sleep_us(a->delay_us);
        RANGE_POP();

        pthread_mutex_lock(&q->mu);
        q->count++;
        pthread_cond_signal(&q->not_empty);
        pthread_mutex_unlock(&q->mu);
    }

    pthread_mutex_lock(&q->mu);
    q->producer_done = true;
    pthread_cond_broadcast(&q->not_empty);
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

/* Take the next batch, blocking until the loader has one. The caller's
 * buffers go back into the ring for reuse. Returns false only if the loader
 * finished early, which would be a bug. */
static bool queue_pop(BatchQueue *q, Batch *out)
{
    pthread_mutex_lock(&q->mu);
    while (q->count == 0 && !q->producer_done)
        pthread_cond_wait(&q->not_empty, &q->mu);
    bool ok = q->count > 0;
    if (ok) {
        Batch tmp = q->slots[q->head];
        q->slots[q->head] = *out;
        *out = tmp;
        q->head = (q->head + 1) % QUEUE_SLOTS;
        q->count--;
        pthread_cond_signal(&q->not_full);
    }
    pthread_mutex_unlock(&q->mu);
    return ok;
}

/* ------------------------------------------------------------------------ */
/* Model. All parameters live in one flat array (and likewise gradients and
 * Adam moments) so the optimizer is a single loop over everything. */

typedef struct {
    float *emb; /* vocab x EMBED */
    float *w1;  /* (CONTEXT*EMBED) x hidden, row-major: inner loops run over hidden */
    float *b1;  /* hidden */
    float *w2;  /* hidden x vocab, row-major: inner loops run over vocab */
    float *b2;  /* vocab */
} ParamView;

typedef struct {
    int vocab, hidden, batch;
    size_t n_params;
    float *params, *grads, *adam_m, *adam_v;
    ParamView p, g;
    /* Activations for one batch, kept from forward for backward. */
    float *x;      /* batch x (CONTEXT*EMBED): concatenated embeddings */
    float *h;      /* batch x hidden: tanh activations */
    float *probs;  /* batch x vocab: softmax, turned into dlogits in backward */
    float *dpre;   /* batch x hidden: gradient w.r.t. pre-activation */
    float *dx;     /* batch x (CONTEXT*EMBED) */
    long adam_t;
} Model;

static ParamView carve(float *base, int vocab, int hidden)
{
    ParamView v;
    v.emb = base;
    v.w1 = v.emb + (size_t)vocab * EMBED;
    v.b1 = v.w1 + (size_t)CONTEXT * EMBED * hidden;
    v.w2 = v.b1 + hidden;
    v.b2 = v.w2 + (size_t)hidden * vocab;
    return v;
}

static void fill_uniform(float *w, size_t n, float scale, uint64_t *rng)
{
    for (size_t i = 0; i < n; i++)
        w[i] = (2.0f * rng_unit(rng) - 1.0f) * scale;
}

static bool model_init(Model *m, int vocab, int hidden, int batch, uint64_t seed)
{
    memset(m, 0, sizeof *m);
    m->vocab = vocab;
    m->hidden = hidden;
    m->batch = batch;
    const size_t in = (size_t)CONTEXT * EMBED;
    m->n_params = (size_t)vocab * EMBED + in * hidden + hidden + (size_t)hidden * vocab + vocab;

    /* calloc: gradients and Adam moments must start at zero anyway. */
    m->params = calloc(m->n_params, sizeof(float));
    m->grads = calloc(m->n_params, sizeof(float));
    m->adam_m = calloc(m->n_params, sizeof(float));
    m->adam_v = calloc(m->n_params, sizeof(float));
    m->x = calloc((size_t)batch * in, sizeof(float));
    m->h = calloc((size_t)batch * hidden, sizeof(float));
    m->probs = calloc((size_t)batch * vocab, sizeof(float));
    m->dpre = calloc((size_t)batch * hidden, sizeof(float));
    m->dx = calloc((size_t)batch * in, sizeof(float));
    if (!m->params || !m->grads || !m->adam_m || !m->adam_v || !m->x || !m->h ||
        !m->probs || !m->dpre || !m->dx)
        return false;
    m->p = carve(m->params, vocab, hidden);
    m->g = carve(m->grads, vocab, hidden);

    /* Scales: unit-ish embeddings; Xavier-like W1 keeps tanh out of
     * saturation; a small W2 makes the initial prediction nearly uniform, so
     * the first loss is close to ln(vocab). Biases start at zero. */
    uint64_t rng = seed;
    fill_uniform(m->p.emb, (size_t)vocab * EMBED, 1.0f, &rng);
    fill_uniform(m->p.w1, in * hidden, sqrtf(3.0f / (float)in), &rng);
    fill_uniform(m->p.w2, (size_t)hidden * vocab, 0.1f / sqrtf((float)hidden), &rng);
    return true;
}

static void model_free(Model *m)
{
    free(m->params);
    free(m->grads);
    free(m->adam_m);
    free(m->adam_v);
    free(m->x);
    free(m->h);
    free(m->probs);
    free(m->dpre);
    free(m->dx);
    memset(m, 0, sizeof *m);
}

/* Dot product with four independent partial sums. A single running sum is a
 * chain of dependent adds that runs at the FP-add latency; four chains keep
 * the adder busy and make the backward pass much faster at -O2 (the compiler
 * may not reorder float adds by itself, as that changes rounding). */
static float dot(const float *a, const float *b, int n)
{
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += a[i] * b[i];
        s1 += a[i + 1] * b[i + 1];
        s2 += a[i + 2] * b[i + 2];
        s3 += a[i + 3] * b[i + 3];
    }
    for (; i < n; i++)
        s0 += a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

/* out[k] += scale * in[k]. The matrix products are built from these row
 * updates so that every inner loop walks memory contiguously. */
static void axpy(float *out, float scale, const float *in, int n)
{
    for (int k = 0; k < n; k++)
        out[k] += scale * in[k];
}

/* Forward pass; returns the mean cross-entropy (nats) of the batch. */
static double model_forward(Model *m, const Batch *b)
{
    const int B = m->batch, H = m->hidden, V = m->vocab, IN = CONTEXT * EMBED;
    const ParamView *p = &m->p;

    for (int i = 0; i < B; i++)
        for (int k = 0; k < CONTEXT; k++)
            memcpy(m->x + (size_t)i * IN + k * EMBED,
                   p->emb + (size_t)b->ctx[i * CONTEXT + k] * EMBED, sizeof(float) * EMBED);

    for (int i = 0; i < B; i++) {
        const float *x = m->x + (size_t)i * IN;
        float *h = m->h + (size_t)i * H;
        memcpy(h, p->b1, sizeof(float) * H);
        for (int r = 0; r < IN; r++)
            axpy(h, x[r], p->w1 + (size_t)r * H, H);
        for (int j = 0; j < H; j++)
            h[j] = tanhf(h[j]);
    }

    double loss = 0.0;
    for (int i = 0; i < B; i++) {
        const float *h = m->h + (size_t)i * H;
        float *z = m->probs + (size_t)i * V;
        memcpy(z, p->b2, sizeof(float) * V);
        for (int j = 0; j < H; j++)
            axpy(z, h[j], p->w2 + (size_t)j * V, V);
        /* Softmax with the max subtracted so expf cannot overflow; the loss
         * comes from the log-sum-exp rather than log(prob) so it stays finite
         * even when a probability underflows. */
        float zmax = z[0];
        for (int v = 1; v < V; v++)
            zmax = z[v] > zmax ? z[v] : zmax;
        const float target_logit = z[b->tgt[i]];
        float sum = 0.0f;
        for (int v = 0; v < V; v++) {
            z[v] = expf(z[v] - zmax);
            sum += z[v];
        }
        loss += (double)logf(sum) - (double)(target_logit - zmax);
        const float inv = 1.0f / sum;
        for (int v = 0; v < V; v++)
            z[v] *= inv;
    }
    return loss / B;
}

/* Backward pass: fills m->grads for the batch last passed to forward. */
static void model_backward(Model *m, const Batch *b)
{
    const int B = m->batch, H = m->hidden, V = m->vocab, IN = CONTEXT * EMBED;
    const ParamView *p = &m->p;
    const ParamView *g = &m->g;

    memset(m->grads, 0, sizeof(float) * m->n_params);

    /* d(mean CE)/dlogits = (softmax - onehot) / B, computed in place. */
    const float inv_b = 1.0f / (float)B;
    for (int i = 0; i < B; i++) {
        float *d = m->probs + (size_t)i * V;
        d[b->tgt[i]] -= 1.0f;
        for (int v = 0; v < V; v++)
            d[v] *= inv_b;
    }

    for (int i = 0; i < B; i++) {
        const float *d = m->probs + (size_t)i * V;
        const float *h = m->h + (size_t)i * H;
        float *dpre = m->dpre + (size_t)i * H;
        for (int v = 0; v < V; v++)
            g->b2[v] += d[v];
        for (int j = 0; j < H; j++) {
            axpy(g->w2 + (size_t)j * V, h[j], d, V);
            const float dh = dot(d, p->w2 + (size_t)j * V, V);
            dpre[j] = dh * (1.0f - h[j] * h[j]); /* tanh' = 1 - tanh^2 */
        }
    }

    for (int i = 0; i < B; i++) {
        const float *x = m->x + (size_t)i * IN;
        const float *dpre = m->dpre + (size_t)i * H;
        float *dx = m->dx + (size_t)i * IN;
        for (int j = 0; j < H; j++)
            g->b1[j] += dpre[j];
        for (int r = 0; r < IN; r++) {
            axpy(g->w1 + (size_t)r * H, x[r], dpre, H);
            dx[r] = dot(dpre, p->w1 + (size_t)r * H, H);
        }
        /* A character used twice in the window gets both contributions. */
        for (int k = 0; k < CONTEXT; k++) {
            float *ge = g->emb + (size_t)b->ctx[i * CONTEXT + k] * EMBED;
            for (int e = 0; e < EMBED; e++)
                ge[e] += dx[k * EMBED + e];
        }
    }
}

/* One Adam step (Kingma & Ba) with bias correction. */
static void model_adam(Model *m, float lr)
{
    const float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
    m->adam_t++;
    const float c1 = 1.0f - powf(beta1, (float)m->adam_t);
    const float c2 = 1.0f - powf(beta2, (float)m->adam_t);
    const float step = lr * sqrtf(c2) / c1; /* folds both corrections into lr */
    for (size_t i = 0; i < m->n_params; i++) {
        const float gi = m->grads[i];
        m->adam_m[i] = beta1 * m->adam_m[i] + (1.0f - beta1) * gi;
        m->adam_v[i] = beta2 * m->adam_v[i] + (1.0f - beta2) * gi * gi;
        m->params[i] -= step * m->adam_m[i] / (sqrtf(m->adam_v[i]) + eps);
    }
}

/* ------------------------------------------------------------------------ */
/* Command line. */

typedef struct {
    long steps, batch, hidden, log_every, delay_us, timing_level;
    tprof_timers_option timing_option;
    unsigned long long seed;
    double lr;
    const char *data;
} Options;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: char_lm [options]\n"
            "Train a character-level MLP language model on a text file.\n"
            "\n"
            "  --steps N          training steps (default %d)\n"
            "  --batch N          windows per batch (default %d)\n"
            "  --hidden N         hidden units (default %d)\n"
            "  --lr X             Adam learning rate (default %g)\n"
            "  --seed N           random seed; equal seeds give equal runs (default %d)\n"
            "  --data PATH        training text (default: the bundled %s)\n"
            "  --log-every N      print the mean loss every N steps, 0 = never (default %d)\n"
            "  --data-delay-us N  make the loader sleep N us per batch, to simulate\n"
            "                     a slow input pipeline (default 0)\n"
            "  --timing-log-level N       Megatron-style timers logged with each loss\n"
            "                             line: 0, 1 or 2 (default 2)\n"
            "  --timing-log-option OPT    max, minmax or all (default minmax)\n"
            "  --help             show this help\n",
            DEFAULT_STEPS, DEFAULT_BATCH, DEFAULT_HIDDEN, DEFAULT_LR, DEFAULT_SEED,
            DATA_FILE_NAME, DEFAULT_LOG_EVERY);
}

static bool parse_long(const char *flag, const char *s, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max) {
        fprintf(stderr, "char_lm: %s expects an integer in [%ld, %ld], got '%s'\n",
                flag, min, max, s);
        return false;
    }
    *out = v;
    return true;
}

/* Returns 0 to run, 1 when --help was handled, 2 on a usage error. */
static int parse_args(int argc, char **argv, Options *o)
{
    *o = (Options){
        .steps = DEFAULT_STEPS,
        .batch = DEFAULT_BATCH,
        .hidden = DEFAULT_HIDDEN,
        .log_every = DEFAULT_LOG_EVERY,
        .delay_us = 0,
        .timing_level = 2,
        .timing_option = TPROF_TIMERS_MINMAX,
        .seed = DEFAULT_SEED,
        .lr = DEFAULT_LR,
        .data = NULL,
    };
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            if (g_rank == 0)
                usage(stdout);
            return 1;
        }
        /* Accept both "--flag value" and "--flag=value". */
        const char *eq = strchr(arg, '=');
        size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
        const char *value = NULL;
        static const char *const known[] = {"--steps", "--batch", "--hidden", "--lr",
                                            "--seed", "--data", "--log-every",
                                            "--data-delay-us", "--timing-log-level",
                                            "--timing-log-option"};
        const char *flag = NULL;
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
            if (strlen(known[k]) == name_len && strncmp(arg, known[k], name_len) == 0)
                flag = known[k];
        if (!flag) {
            fprintf(stderr, "char_lm: unknown option '%s' (see --help)\n", arg);
            return 2;
        }
        if (eq) {
            value = eq + 1;
        } else if (i + 1 < argc) {
            value = argv[++i];
        } else {
            fprintf(stderr, "char_lm: %s needs a value (see --help)\n", flag);
            return 2;
        }

        bool ok = true;
        if (strcmp(flag, "--steps") == 0) {
            ok = parse_long(flag, value, 1, 100000000, &o->steps);
        } else if (strcmp(flag, "--batch") == 0) {
            ok = parse_long(flag, value, 1, 1 << 20, &o->batch);
        } else if (strcmp(flag, "--hidden") == 0) {
            ok = parse_long(flag, value, 1, 1 << 16, &o->hidden);
        } else if (strcmp(flag, "--log-every") == 0) {
            ok = parse_long(flag, value, 0, LONG_MAX, &o->log_every);
        } else if (strcmp(flag, "--data-delay-us") == 0) {
            ok = parse_long(flag, value, 0, 60L * 1000000, &o->delay_us);
        } else if (strcmp(flag, "--timing-log-level") == 0) {
            ok = parse_long(flag, value, 0, 2, &o->timing_level);
        } else if (strcmp(flag, "--timing-log-option") == 0) {
            ok = true;
            if (strcmp(value, "max") == 0)
                o->timing_option = TPROF_TIMERS_MAX;
            else if (strcmp(value, "minmax") == 0)
                o->timing_option = TPROF_TIMERS_MINMAX;
            else if (strcmp(value, "all") == 0)
                o->timing_option = TPROF_TIMERS_ALL;
            else {
                fprintf(stderr, "char_lm: --timing-log-option expects max, minmax or all, "
                                "got '%s'\n", value);
                ok = false;
            }
        } else if (strcmp(flag, "--seed") == 0) {
            char *end;
            errno = 0;
            o->seed = strtoull(value, &end, 10);
            ok = !errno && end != value && !*end && value[0] != '-';
            if (!ok)
                fprintf(stderr, "char_lm: --seed expects a non-negative integer, got '%s'\n",
                        value);
        } else if (strcmp(flag, "--lr") == 0) {
            char *end;
            errno = 0;
            o->lr = strtod(value, &end);
            ok = !errno && end != value && !*end && o->lr > 0.0 && o->lr < 10.0;
            if (!ok)
                fprintf(stderr, "char_lm: --lr expects a number in (0, 10), got '%s'\n", value);
        } else { /* --data */
            ok = value[0] != '\0';
            if (!ok)
                fprintf(stderr, "char_lm: --data expects a path\n");
            o->data = value;
        }
        if (!ok)
            return 2;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Locating the bundled text when --data is not given. */

static bool readable(const char *path)
{
    return access(path, R_OK) == 0;
}

/* Directory of the running executable, from /proc or failing that argv[0]. */
static bool exe_dir(const char *argv0, char *dir, size_t size)
{
    ssize_t n = readlink("/proc/self/exe", dir, size - 1);
    if (n > 0) {
        dir[n] = '\0';
    } else {
        if (!argv0 || !strchr(argv0, '/') || strlen(argv0) >= size)
            return false;
        strcpy(dir, argv0);
    }
    char *slash = strrchr(dir, '/');
    if (!slash)
        return false;
    if (slash == dir)
        slash[1] = '\0'; /* executable in "/" */
    else
        *slash = '\0';
    return true;
}

/* Writes the first existing candidate into out. The build's compile-time
 * directory wins; the executable-relative guesses cover a binary that sits
 * next to data/ (examples/), in the repository root, or in a build directory
 * one level below it. */
static bool find_default_data(const char *argv0, char *out, size_t size)
{
#ifdef CHAR_LM_DATA_DIR
    snprintf(out, size, "%s/%s", CHAR_LM_DATA_DIR, DATA_FILE_NAME);
    if (readable(out))
        return true;
#endif
    char dir[4096];
    if (!exe_dir(argv0, dir, sizeof dir))
        return false;
    static const char *const rel[] = {"data", "examples/data", "../examples/data"};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        int n = snprintf(out, size, "%s/%s/%s", dir, rel[i], DATA_FILE_NAME);
        if (n > 0 && (size_t)n < size && readable(out))
            return true;
    }
    return false;
}

/* ------------------------------------------------------------------------ */
/* Data parallelism (MPI builds; without MPI these are the one-process cases). */

/* Sum v[0..n-1] over the ranks, in place. */
static void sum_over_ranks(double *v, int n)
{
#ifdef TPROF_EXAMPLE_MPI
    MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
#else
    (void)v;
    (void)n;
#endif
}

#ifdef TPROF_EXAMPLE_MPI
/* Bytes of gradients each rank all-reduces per step. */
static size_t grad_bytes(const Model *m)
{
    return m->n_params * sizeof(float);
}

/* Mean of the gradients over the ranks: one MPI_Allreduce (sum) per step, then
 * the division by the world size, as DistributedDataParallel averages. */
static bool allreduce_grads(Model *m)
{
    if (MPI_Allreduce(MPI_IN_PLACE, m->grads, (int)m->n_params, MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD) != MPI_SUCCESS)
        return false;
    const float inv = 1.0f / (float)g_world;
    for (size_t i = 0; i < m->n_params; i++)
        m->grads[i] *= inv;
    return true;
}
#endif

static int train(int argc, char **argv)
{
    Options opt;
    int rc = parse_args(argc, argv, &opt);
    if (rc == 1)
        return 0;
    if (rc != 0)
        return 2;

    char data_path[4096];
    if (opt.data) {
        snprintf(data_path, sizeof data_path, "%s", opt.data);
    } else if (!find_default_data(argc > 0 ? argv[0] : NULL, data_path, sizeof data_path)) {
        fprintf(stderr,
                "char_lm: cannot find the bundled %s (looked in the build's data directory "
                "and next to the executable); pass --data PATH\n",
                DATA_FILE_NAME);
        return 1;
    }

    NAME_THREAD("main");

    Corpus corpus;
    if (!corpus_load(&corpus, data_path))
        return 1;
    /* this rank's shard: the r-th of g_world equal slices (the last takes the rest) */
    size_t shard_lo = corpus.len / (size_t)g_world * (size_t)g_rank;
    size_t shard_hi = g_rank == g_world - 1 ? corpus.len
                                             : shard_lo + corpus.len / (size_t)g_world;
    if (shard_hi - shard_lo < (size_t)CONTEXT + 2) {
        fprintf(stderr, "char_lm: %s is too short to give %d ranks a shard each\n", data_path,
                g_world);
        corpus_free(&corpus);
        return 1;
    }

    const int batch = (int)opt.batch;
    Model model;
    tprof_timers *timers = NULL; /* before any goto out */
    BatchQueue queue;
    memset(&queue, 0, sizeof queue);
    Batch cur = {NULL, NULL};
    bool queue_ready = false, loader_started = false;
    pthread_t loader;
    LoaderArgs largs;
    int exit_code = 1;

    if (!model_init(&model, corpus.vocab, (int)opt.hidden, batch, opt.seed)) {
        fprintf(stderr, "char_lm: out of memory\n");
        goto out;
    }
#ifdef TPROF_EXAMPLE_MPI
    /* every replica starts from rank 0's parameters */
    if (model.n_params > INT_MAX ||
        MPI_Bcast(model.params, (int)model.n_params, MPI_FLOAT, 0, MPI_COMM_WORLD) !=
            MPI_SUCCESS) {
        fprintf(stderr, "char_lm: cannot broadcast the initial parameters\n");
        goto out;
    }
#endif
    bool batches_ok = batch_alloc(&cur, batch);
    for (int s = 0; s < QUEUE_SLOTS; s++)
        batches_ok = batch_alloc(&queue.slots[s], batch) && batches_ok;
    if (!batches_ok) {
        fprintf(stderr, "char_lm: out of memory\n");
        goto out;
    }
    if (pthread_mutex_init(&queue.mu, NULL) != 0 ||
        pthread_cond_init(&queue.not_empty, NULL) != 0 ||
        pthread_cond_init(&queue.not_full, NULL) != 0) {
        fprintf(stderr, "char_lm: cannot initialise the batch queue\n");
        goto out;
    }
    queue_ready = true;

    largs = (LoaderArgs){.queue = &queue, .corpus = &corpus, .lo = shard_lo, .hi = shard_hi,
                         .batches = opt.steps,
                         .batch = batch, .seed = opt.seed, .delay_us = opt.delay_us};
    if (pthread_create(&loader, NULL, loader_main, &largs) != 0) {
        fprintf(stderr, "char_lm: cannot start the loader thread\n");
        goto out;
    }
    loader_started = true;

    if (g_rank == 0) {
        printf("char_lm: %s, %zu chars, vocab %d, context %d, embed %d, hidden %ld, "
               "batch %ld, steps %ld, lr %g, seed %llu, %zu params\n",
               data_path, corpus.len, corpus.vocab, CONTEXT, EMBED, opt.hidden, opt.batch,
               opt.steps, opt.lr, opt.seed, model.n_params);
#ifdef TPROF_EXAMPLE_MPI
        printf("char_lm: data-parallel over %d rank%s (MPI): batch %ld per rank, %ld in all; "
               "all-reduce of %zu gradient bytes per step\n",
               g_world, g_world == 1 ? "" : "s", opt.batch, opt.batch * g_world,
               grad_bytes(&model));
        /* without a registered hook the library answers "rank 0 of 1" with no context */
        tprof_collectives hook;
        tprof_get_collectives(&hook);
        if (hook.ctx && hook.world_size == g_world)
            printf("char_lm: timers aggregate across %d ranks through the collectives hook\n",
                   hook.world_size);
        else if (g_world > 1)
            printf("char_lm: no cross-rank timers hook (run under `trainprof run`, or preload "
                   "libtrainprof_mpi.so): each rank's timers are its own\n");
#endif
        printf("uniform-guess loss ln(%d) = %.4f\n", corpus.vocab, log((double)corpus.vocab));
        fflush(stdout);
    }

    /* Single-batch losses are noisy, so logged losses are means over the
     * steps since the previous log line, and the final figure is the mean of
     * the last FINAL_WINDOW steps (with the default --log-every it equals the
     * last log line). The initial figure is the first batch's loss. */
    /* Megatron-LM's timer names and levels for these phases (megatron/training/training.py,
     * megatron/core/pipeline_parallel/schedules.py) */
    if (tprof_timers_create((int)opt.timing_level, opt.timing_option, &timers) != TPROF_OK) {
        fprintf(stderr, "char_lm: cannot create the timers\n");
        goto out;
    }
    tprof_timer *t_interval = tprof_timer_get(timers, "interval-time", 0);
    tprof_timer *t_batch = tprof_timer_get(timers, "batch-generator", 2);
    tprof_timer *t_fwd = tprof_timer_get(timers, "forward-compute", 2);
    tprof_timer *t_bwd = tprof_timer_get(timers, "backward-compute", 2);
    tprof_timer *t_opt = tprof_timer_get(timers, "optimizer", 1);
#ifdef TPROF_EXAMPLE_MPI
    tprof_timer *t_sync = tprof_timer_get(timers, "all-grads-sync", 1);
#endif
    tprof_timer_start(t_interval, 0);

    double recent[FINAL_WINDOW];
    double initial_loss = 0.0, log_sum = 0.0;
    long log_count = 0;
    bool train_ok = true;

    for (long step = 1; step <= opt.steps; step++) {
        RANGE_PUSH("step");

        RANGE_PUSH("data");
        tprof_timer_start(t_batch, 0);
        bool got = queue_pop(&queue, &cur);
        tprof_timer_stop(t_batch, 0);
        RANGE_POP();
        if (!got) {
            RANGE_POP();
            fprintf(stderr, "char_lm: loader stopped early\n");
            train_ok = false;
            break;
        }

        RANGE_PUSH("forward");
        tprof_timer_start(t_fwd, 0);
        double loss = model_forward(&model, &cur);
        tprof_timer_stop(t_fwd, 0);
        RANGE_POP();

        RANGE_PUSH("backward");
        tprof_timer_start(t_bwd, 0);
        model_backward(&model, &cur);
        tprof_timer_stop(t_bwd, 0);
        RANGE_POP();

#ifdef TPROF_EXAMPLE_MPI
        RANGE_PUSH("allreduce");
        tprof_timer_start(t_sync, 0);
        bool synced = allreduce_grads(&model);
        tprof_timer_stop(t_sync, 0);
        RANGE_POP();
        if (!synced) {
            RANGE_POP(); /* step */
            fprintf(stderr, "char_lm: gradient all-reduce failed at step %ld\n", step);
            train_ok = false;
            break;
        }
#endif

        RANGE_PUSH("optimizer");
        tprof_timer_start(t_opt, 0);
        model_adam(&model, (float)opt.lr);
        tprof_timer_stop(t_opt, 0);
        RANGE_POP();

        RANGE_POP(); /* step */

        if (!isfinite(loss)) {
            fprintf(stderr, "char_lm: loss diverged at step %ld (try a smaller --lr)\n", step);
            train_ok = false;
            break;
        }
        if (step == 1)
            initial_loss = loss;
        recent[(step - 1) % FINAL_WINDOW] = loss;
        log_sum += loss;
        log_count++;
        if (opt.log_every > 0 && (step % opt.log_every == 0 || step == opt.steps)) {
            double mean = log_sum; /* then summed over the ranks */
            sum_over_ranks(&mean, 1);
            if (g_rank == 0) {
                printf("step %ld loss %.4f\n", step, mean / (double)(log_count * g_world));
                fflush(stdout);
            }
            /* as Megatron's training_log: average ms per iteration since the last line */
            tprof_timers_log(timers, NULL, 0, (double)log_count, 1, 0, -1, stdout);
            log_sum = 0.0;
            log_count = 0;
        }
    }

    if (train_ok) {
        long n = opt.steps < FINAL_WINDOW ? opt.steps : FINAL_WINDOW;
        double final_sum = 0.0;
        for (long i = 0; i < n; i++)
            final_sum += recent[i];
        double fin[2] = {final_sum / (double)n, initial_loss}; /* summed over the ranks */
        sum_over_ranks(fin, 2);
        if (g_rank == 0)
            printf("final loss %.4f (initial %.4f)\n", fin[0] / g_world, fin[1] / g_world);
        exit_code = 0;
    }

out:
    tprof_timers_destroy(timers);
    if (loader_started) {
        /* After a normal run the loader has already produced its last batch;
         * on an early exit this wakes it so the join cannot hang. */
        pthread_mutex_lock(&queue.mu);
        queue.stop = true;
        pthread_cond_broadcast(&queue.not_full);
        pthread_mutex_unlock(&queue.mu);
        pthread_join(loader, NULL);
    }
    if (queue_ready) {
        pthread_cond_destroy(&queue.not_full);
        pthread_cond_destroy(&queue.not_empty);
        pthread_mutex_destroy(&queue.mu);
    }
    for (int s = 0; s < QUEUE_SLOTS; s++)
        batch_free(&queue.slots[s]);
    batch_free(&cur);
    model_free(&model);
    corpus_free(&corpus);
    return exit_code;
}

int main(int argc, char **argv)
{
#ifdef TPROF_EXAMPLE_MPI
    int provided = 0;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "char_lm: MPI_Init_thread failed\n");
        return 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_world);
#endif
    int rc = train(argc, argv);
#ifdef TPROF_EXAMPLE_MPI
    /* a rank that failed mid-run leaves the others blocked in a collective: end them all
     * (usage errors and --help happen alike on every rank, so they finalize normally) */
    if (rc == 1 && g_world > 1)
        MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Finalize();
#endif
    return rc;
}
