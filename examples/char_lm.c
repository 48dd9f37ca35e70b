/*
 * char_lm.c - trainprof's bundled demo: a small program that really trains.
 *
 * It fits a character-level language model to a text file (by default the Shakespeare sonnets in
 * examples/data/). The model is a Bengio-style MLP: the embeddings of the previous CONTEXT
 * characters are concatenated, passed through one tanh hidden layer, and a softmax over the
 * vocabulary predicts the next character. Forward pass, backward pass and the Adam optimizer are
 * written out by hand so the program needs nothing beyond libc, libm and pthreads, and so every
 * phase of a training step is plain CPU work that a profiler can attribute.
 *
 * The point of the file is to give trainprof a realistic workload shape: a loader thread builds
 * batches (random windows of text, encoded to ids) and hands them over through a small bounded
 * queue, while the main thread runs the step loop. Each step is wrapped in an NVTX-style range
 * "step" with the nested phases "data", "forward", "backward" and "optimizer"; the loader's work
 * on each batch is the range "load_batch" on the thread named "loader". --data-delay-us makes the
 * loader artificially slow, so the "data" phase (the main thread waiting for input) grows and
 * dominates - the classic input-bound profile the toolkit should be able to point out.
 *
 * Build (the ranges from NVTX of the CUDA toolkit, the timers from trainprof), in the repository:
 *   gcc -std=c11 -O2 -D_GNU_SOURCE -DCHAR_LM_USE_NVTX -I/usr/local/cuda/include -Iinclude \
 *       examples/char_lm.c -o char_lm -Lbuild -ltrainprof -lm -lpthread -ldl
 * Without -DCHAR_LM_USE_NVTX the ranges come from trainprof too. -DCHAR_LM_DATA_DIR=
 * '"/abs/path/examples/data"' tells the binary where the bundled text is; otherwise it looks
 * relative to its own location.
 *
 * A run is deterministic for a given --seed: the loader draws its windows from its own seeded
 * generator and batches are consumed in order.
 *
 * Data-parallel mode (built with -DTPROF_EXAMPLE_MPI and linked with MPI: the char_lm_mpi
 * executable; `mpirun -np 2 char_lm_mpi --steps N`). Every rank holds the whole model and reads
 * its own shard of the text (rank r draws its windows from the r-th of world-size equal slices);
 * rank 0's initial parameters are broadcast (MPI_Bcast) so that all replicas start equal; after
 * each backward pass the gradients are summed with one MPI_Allreduce and divided by the world size
 * (the "allreduce" range and Megatron's "all-grads-sync" timer), so every rank applies the same
 * Adam step. Logged losses are means over all ranks (one 8-byte MPI_Allreduce per log line, one
 * 16-byte one for the final figures); rank 0 prints them, and the timers are logged by the last
 * rank as in Megatron, aggregated across ranks through trainprof's collectives hook (installed by
 * libtrainprof_mpi.so, which `trainprof run` preloads; without it each rank's timers are its own).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* syscall(), readlink(), nanosleep() */
#endif

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Timers always come from trainprof (Megatron-LM's Timers API and log format); the ranges come
 * from NVTX when the toolkit's headers are there, else from trainprof too. */
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

/* Fixed architecture constants. Only the sizes worth experimenting with from the command line
 * (batch, hidden) are flags. */
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

/* Prints "char_lm: <message>" on stderr, in one write so that ranks' lines do not interleave;
 * returns false, for `return fail(...)`. */
static bool fail(const char *fmt, ...)
{
    char msg[4096 + 256]; /* a path and the words around it */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "char_lm: %s\n", msg);
    return false;
}

/* ---- Random numbers: splitmix64, small and identical on every platform, which is what makes
 * runs reproducible (rand() differs between libcs). */

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

/* ---- Corpus: the raw text, re-encoded as dense ids 0..vocab-1. */

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
    if (!f)
        return fail("cannot open %s: %s", path, strerror(errno));
    /* Read in doubling chunks, which works for a pipe as well as for a file. */
    size_t cap = 1 << 15, len = 0;
    unsigned char *buf = NULL, *bigger;
    do {
        cap *= 2;
        if (!(bigger = realloc(buf, cap)))
            break;
        buf = bigger;
        len += fread(buf + len, 1, cap - len, f);
    } while (len == cap);
    bool read_ok = bigger && !ferror(f);
    fclose(f);
    if (!read_ok || len < (size_t)CONTEXT + 2) {
        free(buf);
        return read_ok ? fail("%s is too short to train on (%zu bytes)", path, len)
                       : fail("cannot read %s", path);
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

/* ---- Batches and the bounded queue between loader and trainer. */

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
 * Ring of QUEUE_SLOTS preallocated batches. Slots [head, head+count) are full and belong to the
 * consumer; slot head+count is the one the producer fills next. The producer fills it *outside*
 * the lock - the expensive part must not block the consumer - which is safe because a pop
 * advances head and shrinks count together, so that index never changes under the producer. The
 * consumer takes a batch by swapping buffer pointers with the slot, so no batch data is copied
 * and nothing is allocated while training.
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

/* Fill one batch with random windows of the text slice [lo, hi): CONTEXT ids as input, the id
 * after them as target. */
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

/* Take the next batch, blocking until the loader has one. The caller's buffers go back into the
 * ring for reuse. Returns false only if the loader finished early, which would be a bug. */
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

/* ---- Model. All parameters live in one flat array (and likewise gradients and Adam moments)
 * so the optimizer is a single loop over everything. */

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

/* The model's buffers, in the order of model_init's sizes. */
#define MODEL_BUFFERS(m)                                                                     \
    {&(m)->params, &(m)->grads, &(m)->adam_m, &(m)->adam_v, &(m)->x, &(m)->h, &(m)->probs, \
     &(m)->dpre, &(m)->dx}

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
    float **bufs[] = MODEL_BUFFERS(m);
    const size_t counts[] = {m->n_params, m->n_params, m->n_params, m->n_params,
                             (size_t)batch * in, (size_t)batch * hidden,
                             (size_t)batch * vocab, (size_t)batch * hidden, (size_t)batch * in};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (!(*bufs[i] = calloc(counts[i], sizeof(float))))
            return false;
    m->p = carve(m->params, vocab, hidden);
    m->g = carve(m->grads, vocab, hidden);

    /* Scales: unit-ish embeddings; Xavier-like W1 keeps tanh out of saturation; a small W2
     * makes the initial prediction nearly uniform, so the first loss is close to ln(vocab).
     * Biases start at zero. */
    uint64_t rng = seed;
    fill_uniform(m->p.emb, (size_t)vocab * EMBED, 1.0f, &rng);
    fill_uniform(m->p.w1, in * hidden, sqrtf(3.0f / (float)in), &rng);
    fill_uniform(m->p.w2, (size_t)hidden * vocab, 0.1f / sqrtf((float)hidden), &rng);
    return true;
}

static void model_free(Model *m)
{
    float **bufs[] = MODEL_BUFFERS(m);
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(*bufs[i]);
    memset(m, 0, sizeof *m);
}

/* Dot product with four independent partial sums. A single running sum is a chain of dependent
 * adds that runs at the FP-add latency; four chains keep the adder busy and make the backward
 * pass much faster at -O2 (the compiler may not reorder float adds by itself, as that changes
 * rounding). */
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

/* out[k] += scale * in[k]. The matrix products are built from these row updates so that every
 * inner loop walks memory contiguously. */
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
        /* Softmax with the max subtracted so expf cannot overflow; the loss comes from the
         * log-sum-exp rather than log(prob) so it stays finite even when a probability
         * underflows. */
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
    const ParamView *p = &m->p, *g = &m->g;

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

/* ---- Command line. */

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
    if (errno || end == s || *end || v < min || v > max)
        return fail("%s expects an integer in [%ld, %ld], got '%s'", flag, min, max, s);
    *out = v;
    return true;
}

/* Returns 0 to run, 1 when --help was handled, 2 on a usage error. */
static int parse_args(int argc, char **argv, Options *o)
{
    *o = (Options){.steps = DEFAULT_STEPS, .batch = DEFAULT_BATCH, .hidden = DEFAULT_HIDDEN,
                   .log_every = DEFAULT_LOG_EVERY, .timing_level = 2,
                   .timing_option = TPROF_TIMERS_MINMAX, .seed = DEFAULT_SEED, .lr = DEFAULT_LR};
    /* The flags; the integer ones with their range and field, the others (no field) below. */
    const struct {
        const char *name;
        long min, max;
        long *out;
    } flags[] = {
        {"--steps", 1, 100000000, &o->steps}, {"--batch", 1, 1 << 20, &o->batch},
        {"--hidden", 1, 1 << 16, &o->hidden}, {"--log-every", 0, LONG_MAX, &o->log_every},
        {"--data-delay-us", 0, 60L * 1000000, &o->delay_us},
        {"--timing-log-level", 0, 2, &o->timing_level}, {"--lr", 0, 0, NULL},
        {"--seed", 0, 0, NULL}, {"--data", 0, 0, NULL}, {"--timing-log-option", 0, 0, NULL},
    };
    static const char *const timing_options[] = {"max", "minmax", "all"}; /* enum order */
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
        size_t f = 0;
        while (f < sizeof flags / sizeof flags[0] &&
               !(strlen(flags[f].name) == name_len && strncmp(arg, flags[f].name, name_len) == 0))
            f++;
        if (f == sizeof flags / sizeof flags[0]) {
            fprintf(stderr, "char_lm: unknown option '%s' (see --help)\n", arg);
            return 2;
        }
        const char *flag = flags[f].name;
        const char *value = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (!value) {
            fprintf(stderr, "char_lm: %s needs a value (see --help)\n", flag);
            return 2;
        }
        bool ok = false;
        char *end;
        errno = 0;
        if (flags[f].out) {
            ok = parse_long(flag, value, flags[f].min, flags[f].max, flags[f].out);
        } else if (strcmp(flag, "--timing-log-option") == 0) {
            for (int k = 0; k < 3 && !ok; k++)
                if (strcmp(value, timing_options[k]) == 0) {
                    o->timing_option = (tprof_timers_option)k;
                    ok = true;
                }
            ok = ok || fail("--timing-log-option expects max, minmax or all, got '%s'", value);
        } else if (strcmp(flag, "--seed") == 0) {
            o->seed = strtoull(value, &end, 10);
            ok = (!errno && end != value && !*end && value[0] != '-') ||
                 fail("--seed expects a non-negative integer, got '%s'", value);
        } else if (strcmp(flag, "--lr") == 0) {
            o->lr = strtod(value, &end);
            ok = (!errno && end != value && !*end && o->lr > 0.0 && o->lr < 10.0) ||
                 fail("--lr expects a number in (0, 10), got '%s'", value);
        } else { /* --data */
            ok = value[0] != '\0' || fail("--data expects a path");
            o->data = value;
        }
        if (!ok)
            return 2;
    }
    return 0;
}

/* ---- Locating the bundled text when --data is not given. */

/* Directory of the running executable, from /proc or failing that argv[0]. */
static bool exe_dir(const char *argv0, char *dir, size_t size)
{
    ssize_t n = readlink("/proc/self/exe", dir, size - 1);
    if (n > 0)
        dir[n] = '\0';
    else if (!argv0 || !strchr(argv0, '/') || strlen(argv0) >= size)
        return false;
    else
        strcpy(dir, argv0);
    char *slash = strrchr(dir, '/');
    if (!slash)
        return false;
    slash[slash == dir] = '\0'; /* an executable in "/" keeps the "/" */
    return true;
}

/* Writes the first existing candidate into out. The build's compile-time directory wins; the
 * executable-relative guesses cover a binary that sits next to data/ (examples/), in the
 * repository root, or in a build directory one level below it. */
static bool find_default_data(const char *argv0, char *out, size_t size)
{
#ifdef CHAR_LM_DATA_DIR
    snprintf(out, size, "%s/%s", CHAR_LM_DATA_DIR, DATA_FILE_NAME);
    if (access(out, R_OK) == 0)
        return true;
#endif
    char dir[4096];
    if (!exe_dir(argv0, dir, sizeof dir))
        return false;
    static const char *const rel[] = {"data", "examples/data", "../examples/data"};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        int n = snprintf(out, size, "%s/%s/%s", dir, rel[i], DATA_FILE_NAME);
        if (n > 0 && (size_t)n < size && access(out, R_OK) == 0)
            return true;
    }
    return false;
}

/* ---- Data parallelism (MPI builds; without MPI these are the one-process cases). */

/* Sum v[0..n-1] over the ranks, in place. */
static void sum_over_ranks(double *v, int n)
{
#ifdef TPROF_EXAMPLE_MPI
    MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
#else
    (void)v, (void)n;
#endif
}

#ifdef TPROF_EXAMPLE_MPI
/* Mean of the gradients over the ranks: one MPI_Allreduce (sum) per step, then the division by
 * the world size, as DistributedDataParallel averages. */
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

/* ---- The training run: its state, the setup, one step's phases, the log lines, the teardown. */

/* Zeroed before use, so that the teardown frees exactly what the setup got to. */
typedef struct {
    Options opt;
    char data_path[4096];
    Corpus corpus;
    Model model;
    BatchQueue queue;
    Batch cur;
    bool queue_ready, loader_started;
    pthread_t loader;
    LoaderArgs largs;
    tprof_timers *timers;
    tprof_timer *t_interval, *t_batch, *t_fwd, *t_bwd, *t_opt, *t_sync;
    /* Single-batch losses are noisy, so logged losses are means over the steps since the
     * previous log line, and the final figure is the mean of the last FINAL_WINDOW steps (with
     * the default --log-every it equals the last log line). The initial figure is the first
     * batch's loss. */
    double recent[FINAL_WINDOW], initial_loss, log_sum;
    long log_count;
} Run;

/* The text, this rank's shard of it and the model; false (the message printed) on failure. */
static bool setup_data_and_model(Run *r, const char *argv0)
{
    if (r->opt.data) {
        snprintf(r->data_path, sizeof r->data_path, "%s", r->opt.data);
    } else if (!find_default_data(argv0, r->data_path, sizeof r->data_path)) {
        return fail("cannot find the bundled %s (looked in the build's data directory and next "
                    "to the executable); pass --data PATH", DATA_FILE_NAME);
    }
    NAME_THREAD("main");
    if (!corpus_load(&r->corpus, r->data_path))
        return false;
    /* this rank's shard: the r-th of g_world equal slices (the last takes the rest) */
    size_t len = r->corpus.len;
    size_t lo = len / (size_t)g_world * (size_t)g_rank;
    size_t hi = g_rank == g_world - 1 ? len : lo + len / (size_t)g_world;
    if (hi - lo < (size_t)CONTEXT + 2)
        return fail("%s is too short to give %d ranks a shard each", r->data_path, g_world);
    r->largs = (LoaderArgs){.queue = &r->queue, .corpus = &r->corpus, .lo = lo, .hi = hi,
                            .batches = r->opt.steps, .batch = (int)r->opt.batch,
                            .seed = r->opt.seed, .delay_us = r->opt.delay_us};
    if (!model_init(&r->model, r->corpus.vocab, (int)r->opt.hidden, (int)r->opt.batch,
                    r->opt.seed))
        return fail("out of memory");
#ifdef TPROF_EXAMPLE_MPI
    /* every replica starts from rank 0's parameters */
    if (r->model.n_params > INT_MAX ||
        MPI_Bcast(r->model.params, (int)r->model.n_params, MPI_FLOAT, 0, MPI_COMM_WORLD) !=
            MPI_SUCCESS)
        return fail("cannot broadcast the initial parameters");
#endif
    return true;
}

/* The batch buffers, the queue and the loader thread; false (the message printed) on failure. */
static bool start_loader(Run *r)
{
    bool batches_ok = batch_alloc(&r->cur, (int)r->opt.batch);
    for (int s = 0; s < QUEUE_SLOTS; s++)
        batches_ok = batch_alloc(&r->queue.slots[s], (int)r->opt.batch) && batches_ok;
    if (!batches_ok)
        return fail("out of memory");
    if (pthread_mutex_init(&r->queue.mu, NULL) != 0 ||
        pthread_cond_init(&r->queue.not_empty, NULL) != 0 ||
        pthread_cond_init(&r->queue.not_full, NULL) != 0)
        return fail("cannot initialise the batch queue");
    r->queue_ready = true;
    if (pthread_create(&r->loader, NULL, loader_main, &r->largs) != 0)
        return fail("cannot start the loader thread");
    r->loader_started = true;
    return true;
}

/* Rank 0's opening lines: the run's figures and the loss a uniform guess would have. */
static void print_banner(const Run *r)
{
    if (g_rank != 0)
        return;
    printf("char_lm: %s, %zu chars, vocab %d, context %d, embed %d, hidden %ld, "
           "batch %ld, steps %ld, lr %g, seed %llu, %zu params\n",
           r->data_path, r->corpus.len, r->corpus.vocab, CONTEXT, EMBED, r->opt.hidden,
           r->opt.batch, r->opt.steps, r->opt.lr, r->opt.seed, r->model.n_params);
#ifdef TPROF_EXAMPLE_MPI
    printf("char_lm: data-parallel over %d rank%s (MPI): batch %ld per rank, %ld in all; "
           "all-reduce of %zu gradient bytes per step\n",
           g_world, g_world == 1 ? "" : "s", r->opt.batch, r->opt.batch * g_world,
           r->model.n_params * sizeof(float));
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
    printf("uniform-guess loss ln(%d) = %.4f\n", r->corpus.vocab, log((double)r->corpus.vocab));
    fflush(stdout);
}

/* Megatron-LM's timer names and levels for the phases (megatron/training/training.py,
 * megatron/core/pipeline_parallel/schedules.py); the interval timer starts now. */
static bool create_timers(Run *r)
{
    if (tprof_timers_create((int)r->opt.timing_level, r->opt.timing_option, &r->timers) !=
        TPROF_OK)
        return fail("cannot create the timers");
    r->t_interval = tprof_timer_get(r->timers, "interval-time", 0);
    r->t_batch = tprof_timer_get(r->timers, "batch-generator", 2);
    r->t_fwd = tprof_timer_get(r->timers, "forward-compute", 2);
    r->t_bwd = tprof_timer_get(r->timers, "backward-compute", 2);
    r->t_opt = tprof_timer_get(r->timers, "optimizer", 1);
#ifdef TPROF_EXAMPLE_MPI
    r->t_sync = tprof_timer_get(r->timers, "all-grads-sync", 1);
#endif
    tprof_timer_start(r->t_interval, 0);
    return true;
}

/* A phase of a step: its NVTX range around its Megatron timer. */
static void phase_begin(const char *name, tprof_timer *t)
{
    RANGE_PUSH(name);
    tprof_timer_start(t, 0);
}

static void phase_end(tprof_timer *t)
{
    tprof_timer_stop(t, 0);
    RANGE_POP();
}

/* One training step in the range "step": data, forward, backward, (allreduce,) optimizer. False
 * (the message printed) when the loader stopped early or the all-reduce failed. */
static bool train_step(Run *r, long step, double *loss)
{
    RANGE_PUSH("step");
    phase_begin("data", r->t_batch);
    bool got = queue_pop(&r->queue, &r->cur);
    phase_end(r->t_batch);
    if (!got) {
        RANGE_POP(); /* step */
        return fail("loader stopped early");
    }
    phase_begin("forward", r->t_fwd);
    *loss = model_forward(&r->model, &r->cur);
    phase_end(r->t_fwd);
    phase_begin("backward", r->t_bwd);
    model_backward(&r->model, &r->cur);
    phase_end(r->t_bwd);
#ifdef TPROF_EXAMPLE_MPI
    phase_begin("allreduce", r->t_sync);
    bool synced = allreduce_grads(&r->model);
    phase_end(r->t_sync);
    if (!synced) {
        RANGE_POP(); /* step */
        return fail("gradient all-reduce failed at step %ld", step);
    }
#else
    (void)step;
#endif
    phase_begin("optimizer", r->t_opt);
    model_adam(&r->model, (float)r->opt.lr);
    phase_end(r->t_opt);
    RANGE_POP(); /* step */
    return true;
}

/* Counts a step's loss and, every --log-every steps and at the last, prints the mean loss over
 * the ranks since the previous line and then the timers, as Megatron's training_log does
 * (average ms per iteration since the last line). */
static void log_step(Run *r, long step, double loss)
{
    if (step == 1)
        r->initial_loss = loss;
    r->recent[(step - 1) % FINAL_WINDOW] = loss;
    r->log_sum += loss;
    r->log_count++;
    if (r->opt.log_every <= 0 || (step % r->opt.log_every != 0 && step != r->opt.steps))
        return;
    double mean = r->log_sum; /* then summed over the ranks */
    sum_over_ranks(&mean, 1);
    if (g_rank == 0) {
        printf("step %ld loss %.4f\n", step, mean / (double)(r->log_count * g_world));
        fflush(stdout);
    }
    tprof_timers_log(r->timers, NULL, 0, (double)r->log_count, 1, 0, -1, stdout);
    r->log_sum = 0.0;
    r->log_count = 0;
}

/* The step loop and the final figures; false when a step failed or the loss diverged. */
static bool train_loop(Run *r)
{
    for (long step = 1; step <= r->opt.steps; step++) {
        double loss = 0.0;
        if (!train_step(r, step, &loss))
            return false;
        if (!isfinite(loss))
            return fail("loss diverged at step %ld (try a smaller --lr)", step);
        log_step(r, step, loss);
    }
    long n = r->opt.steps < FINAL_WINDOW ? r->opt.steps : FINAL_WINDOW;
    double final_sum = 0.0;
    for (long i = 0; i < n; i++)
        final_sum += r->recent[i];
    double fin[2] = {final_sum / (double)n, r->initial_loss}; /* summed over the ranks */
    sum_over_ranks(fin, 2);
    if (g_rank == 0)
        printf("final loss %.4f (initial %.4f)\n", fin[0] / g_world, fin[1] / g_world);
    return true;
}

static void teardown(Run *r)
{
    tprof_timers_destroy(r->timers);
    if (r->loader_started) {
        /* After a normal run the loader has already produced its last batch; on an early exit
         * this wakes it so the join cannot hang. */
        pthread_mutex_lock(&r->queue.mu);
        r->queue.stop = true;
        pthread_cond_broadcast(&r->queue.not_full);
        pthread_mutex_unlock(&r->queue.mu);
        pthread_join(r->loader, NULL);
    }
    if (r->queue_ready) {
        pthread_cond_destroy(&r->queue.not_full);
        pthread_cond_destroy(&r->queue.not_empty);
        pthread_mutex_destroy(&r->queue.mu);
    }
    for (int s = 0; s < QUEUE_SLOTS; s++)
        batch_free(&r->queue.slots[s]);
    batch_free(&r->cur);
    model_free(&r->model);
    free(r->corpus.ids);
}

static int train(int argc, char **argv)
{
    static Run run; /* static: zeroed, and the 4 KiB path stays off the stack */
    int rc = parse_args(argc, argv, &run.opt);
    if (rc != 0)
        return rc == 1 ? 0 : 2;
    bool ok = setup_data_and_model(&run, argc > 0 ? argv[0] : NULL) && start_loader(&run);
    if (ok) {
        print_banner(&run);
        ok = create_timers(&run) && train_loop(&run);
    }
    teardown(&run);
    return ok ? 0 : 1;
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
    /* a rank that failed mid-run leaves the others blocked in a collective: end them all (usage
     * errors and --help happen alike on every rank, so they finalize normally) */
    if (rc == 1 && g_world > 1)
        MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Finalize();
#endif
    return rc;
}
