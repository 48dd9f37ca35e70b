/*
 * nccl_loop — an isolated all-reduce loop on NCCL directly, timed by the program itself with
 * CUDA events recorded on the stream the collective runs on (the cross-check of the report's NCCL
 * durations; compared with trainprof's records by tests/gpu/allreduce_compare.py).
 *
 * Why not torch: torch.distributed runs NCCL on its own internal stream, so events recorded
 * by the program sit on another stream and each timed pair includes two cross-stream waits
 * (measured: 4-12 us more than CUPTI's record of the same kernel). Here the events, the
 * collective and a spin kernel that keeps the host ahead of the GPU share one stream, as in
 * nccl-tests, so the events time the GPU's work and nothing else.
 *
 * One process per rank, one GPU each (LOCAL_RANK), RANK and WORLD_SIZE as torchrun sets them;
 * rank 0 writes the NCCL unique id to ID_FILE, the others wait for it:
 *
 *   RANK=0 LOCAL_RANK=0 WORLD_SIZE=2 nccl_loop ID_FILE OUT.json &
 *   RANK=1 LOCAL_RANK=1 WORLD_SIZE=2 nccl_loop ID_FILE OUT.json
 *
 * libnccl.so.2 is opened at run time (NCCL_LIB, else the loader's search path) through our
 * own declarations of the six functions used, so the build needs no NCCL headers. Sizes
 * (MiB) from NCCL_LOOP_SIZES (default 1,4,16,64,256); 5 warm-up and 20 timed ops per size.
 * Rank 0 writes {"world", "sizes": [{"bytes", "warmup", "ms": [per op], "batch_ms": from the
 * first op's start event to the last op's end event, per op, "b2b_ms": the same ops again
 * back to back inside one event pair, per op}], "empty_kernel_ms": [per pair]}: the last is
 * the event pair's own cost, the same pattern around an empty kernel.
 */
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct { char internal[128]; } nccl_id;
typedef void *nccl_comm;
enum { NCCL_FLOAT32 = 7, NCCL_SUM = 0 };

static struct {
    int (*get_id)(nccl_id *);
    int (*init_rank)(nccl_comm *, int, nccl_id, int);
    int (*all_reduce)(const void *, void *, size_t, int, int, nccl_comm, cudaStream_t);
    int (*destroy)(nccl_comm);
    const char *(*error_string)(int);
} N;

#define CK(x)                                                                                \
    do {                                                                                     \
        cudaError_t e_ = (x);                                                                \
        if (e_ != cudaSuccess) {                                                             \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)
#define NK(x)                                                                                \
    do {                                                                                     \
        int r_ = (x);                                                                        \
        if (r_ != 0) {                                                                       \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, N.error_string(r_));   \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

__global__ void empty_kernel(void) {}

__global__ void spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
}

static int env_int(const char *k, int d) {
    const char *v = getenv(k);
    return v && *v ? atoi(v) : d;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: nccl_loop ID_FILE OUT.json\n");
        return 2;
    }
    const char *lib = getenv("NCCL_LIB") ? getenv("NCCL_LIB") : "libnccl.so.2";
    void *h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        fprintf(stderr, "nccl_loop: %s\n", dlerror());
        return 1;
    }
    *(void **)&N.get_id = dlsym(h, "ncclGetUniqueId");
    *(void **)&N.init_rank = dlsym(h, "ncclCommInitRank");
    *(void **)&N.all_reduce = dlsym(h, "ncclAllReduce");
    *(void **)&N.destroy = dlsym(h, "ncclCommDestroy");
    *(void **)&N.error_string = dlsym(h, "ncclGetErrorString");
    if (!N.get_id || !N.init_rank || !N.all_reduce || !N.destroy || !N.error_string) {
        fprintf(stderr, "nccl_loop: %s lacks an NCCL function\n", lib);
        return 1;
    }
    int rank = env_int("RANK", 0), world = env_int("WORLD_SIZE", 1);
    CK(cudaSetDevice(env_int("LOCAL_RANK", 0)));
    nccl_id id;
    if (rank == 0) {
        NK(N.get_id(&id));
        char tmp[4200];
        snprintf(tmp, sizeof tmp, "%s.tmp", argv[1]);
        FILE *f = fopen(tmp, "wb");
        if (!f || fwrite(&id, sizeof id, 1, f) != 1 || fclose(f) != 0 || rename(tmp, argv[1])) {
            perror(argv[1]);
            return 1;
        }
    } else {
        FILE *f = NULL;
        for (int i = 0; i < 6000 && !(f = fopen(argv[1], "rb")); i++) usleep(10000);
        if (!f || fread(&id, sizeof id, 1, f) != 1) {
            fprintf(stderr, "nccl_loop: no id in %s\n", argv[1]);
            return 1;
        }
        fclose(f);
    }
    nccl_comm comm;
    NK(N.init_rank(&comm, world, id, rank));
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    int clock_khz = 0;
    CK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, env_int("LOCAL_RANK", 0)));

    const char *sizes = getenv("NCCL_LOOP_SIZES") ? getenv("NCCL_LOOP_SIZES") : "1,4,16,64,256";
    enum { WARMUP = 5, ITERS = 20 };
    FILE *out = NULL;
    if (rank == 0 && !(out = fopen(argv[2], "w"))) {
        perror(argv[2]);
        return 1;
    }
    if (out)
        fprintf(out, "{\"world\": %d, \"method\": \"events on the NCCL stream\", \"sizes\": [",
                world);
    char *list = strdup(sizes);
    int first = 1;
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        size_t bytes = (size_t)(atof(tok) * (1 << 20));
        size_t count = bytes / 4;
        float *buf;
        CK(cudaMalloc(&buf, bytes));
        CK(cudaMemset(buf, 0, bytes));
        for (int i = 0; i < WARMUP; i++)
            NK(N.all_reduce(buf, buf, count, NCCL_FLOAT32, NCCL_SUM, comm, st));
        CK(cudaStreamSynchronize(st)); /* the ranks leave together: a barrier */
        cudaEvent_t ev[2 * ITERS];
        for (int i = 0; i < 2 * ITERS; i++) CK(cudaEventCreate(&ev[i]));
        /* 20 ms of spin: every op below is enqueued before the GPU reaches it */
        spin<<<1, 1, 0, st>>>((long long)clock_khz * 20);
        for (int i = 0; i < ITERS; i++) {
            CK(cudaEventRecord(ev[2 * i], st));
            NK(N.all_reduce(buf, buf, count, NCCL_FLOAT32, NCCL_SUM, comm, st));
            CK(cudaEventRecord(ev[2 * i + 1], st));
        }
        CK(cudaStreamSynchronize(st));
        float ms[ITERS], batch, b2b;
        for (int i = 0; i < ITERS; i++) CK(cudaEventElapsedTime(&ms[i], ev[2 * i], ev[2 * i + 1]));
        CK(cudaEventElapsedTime(&batch, ev[0], ev[2 * ITERS - 1]));
        /* the same ops back to back with one event pair around them all (as nccl-tests
         * times): per op, the kernel and the GPU's gap to the next one, no event writes */
        spin<<<1, 1, 0, st>>>((long long)clock_khz * 20);
        CK(cudaEventRecord(ev[0], st));
        for (int i = 0; i < ITERS; i++)
            NK(N.all_reduce(buf, buf, count, NCCL_FLOAT32, NCCL_SUM, comm, st));
        CK(cudaEventRecord(ev[1], st));
        CK(cudaStreamSynchronize(st));
        CK(cudaEventElapsedTime(&b2b, ev[0], ev[1]));
        if (out) {
            fprintf(out,
                    "%s{\"bytes\": %zu, \"warmup\": %d, \"batch_ms\": %.6f, \"b2b_ms\": %.6f, "
                    "\"ms\": [",
                    first ? "" : ", ", bytes, WARMUP, batch / ITERS, b2b / ITERS);
            for (int i = 0; i < ITERS; i++) fprintf(out, "%s%.6f", i ? ", " : "", ms[i]);
            fprintf(out, "]}");
            float sorted[ITERS];
            memcpy(sorted, ms, sizeof ms);
            for (int a = 1; a < ITERS; a++)
                for (int b = a; b > 0 && sorted[b] < sorted[b - 1]; b--) {
                    float t = sorted[b];
                    sorted[b] = sorted[b - 1];
                    sorted[b - 1] = t;
                }
            double med = sorted[ITERS / 2], algbw = bytes / (med / 1e3) / 1e9;
            printf("allreduce %10zu bytes: median %.4f ms, algbw %.1f GB/s, busbw %.1f GB/s "
                   "(events on the NCCL stream)\n",
                   bytes, med, algbw, algbw * 2 * (world - 1) / world);
            fflush(stdout);
        }
        first = 0;
        for (int i = 0; i < 2 * ITERS; i++) CK(cudaEventDestroy(ev[i]));
        CK(cudaFree(buf));
    }
    /* what an event pair costs by itself: the same pattern around an empty kernel (the
     * pair's writes and the GPU's launch of a kernel), behind a spin as above */
    {
        cudaEvent_t ev[2 * ITERS];
        for (int i = 0; i < 2 * ITERS; i++) CK(cudaEventCreate(&ev[i]));
        spin<<<1, 1, 0, st>>>((long long)clock_khz * 5);
        for (int i = 0; i < ITERS; i++) {
            CK(cudaEventRecord(ev[2 * i], st));
            empty_kernel<<<1, 1, 0, st>>>();
            CK(cudaEventRecord(ev[2 * i + 1], st));
        }
        CK(cudaStreamSynchronize(st));
        if (out) fprintf(out, "], \"empty_kernel_ms\": [");
        for (int i = 0; i < ITERS; i++) {
            float ms;
            CK(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]));
            if (out) fprintf(out, "%s%.6f", i ? ", " : "", ms);
        }
        for (int i = 0; i < 2 * ITERS; i++) CK(cudaEventDestroy(ev[i]));
    }
    if (out) {
        fprintf(out, "]}\n");
        fclose(out);
    }
    free(list);
    NK(N.destroy(comm));
    CK(cudaStreamDestroy(st));
    return 0;
}
