/*
 * metrics_http.c — the metrics endpoint: libmicrohttpd, dlopen'ed when the endpoint is
 * turned on (so a process without metrics never loads it, nor the TLS library it links),
 * serving on its own internal thread:
 *
 *   GET  /metrics            Prometheus text 0.0.4, or OpenMetrics 1.0 when the Accept
 *                            header asks for application/openmetrics-text
 *   GET  /healthz            "ok" (no token needed: it tells nothing)
 *   POST /capture?detail=on|off   detailed (CUPTI kernel) capture on or off from the next
 *                            step: 202 Accepted
 *
 * Limits, so that no client can hurt the job: 16 KiB of memory per connection (larger
 * request headers get 431), a request body of at most 1 KiB (413), 5 s of inactivity per
 * connection, GET/HEAD/POST only, one thread serving every connection (epoll) on a small
 * stack (threads.h). The token, when set, is compared in constant time. A scrape renders
 * into a fresh buffer from the registry's atomics: it takes no lock that a training thread
 * takes.
 *
 * Slow and hostile clients (slowloris: connections that never finish a request, each byte
 * just inside the inactivity timeout). A plain connection limit does not hold them off: at
 * the limit libmicrohttpd stops accepting (epoll mode takes the listening socket out of its
 * set), so every later scraper waits in the kernel's backlog until a slot frees, and 128
 * slow clients kept every scrape out. Nor does a per-address limit
 * (MHD_OPTION_PER_IP_CONNECTION_LIMIT): it refuses at accept, before any policy runs, so a
 * scraper that shares its address with the slow clients (loopback, a NAT) is shut out with
 * them. So the endpoint keeps MAX_CONNECTIONS of its own and, when one more arrives with
 * every slot taken, evicts one to make room: a connection of the address that holds the
 * most, the one whose last request ended longest ago (or, with none, that came first), never
 * one whose request is being answered (for ANSWER_GRACE_MS). The newcomer always gets in; a
 * scraper's request, sent at once, is answered before the slow clients that arrive after it
 * can make it the oldest. libmicrohttpd's own limit sits EVICT_RESERVE above, for evicted
 * connections not closed yet. Everything here runs on the server thread (the accept policy,
 * the connection notifications and the handler are all called there), so the table needs no
 * lock, and an evicted connection's descriptor is still libmicrohttpd's (it closes a socket
 * only after the CLOSED notification, on this thread) when shutdown() ends it.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "metrics.h"
#include "interpose.h"
#include "threads.h"
#include "writer.h"

#ifdef TPROF_HAVE_MHD
#include <microhttpd.h>

#if MHD_VERSION < 0x00097002
typedef int tprof__mhd_result;
#else
typedef enum MHD_Result tprof__mhd_result;
#endif

#ifndef MHD_HTTP_CONTENT_TOO_LARGE
#define MHD_HTTP_CONTENT_TOO_LARGE 413
#endif

#define MAX_CONNECTIONS 128u /* kept; one more evicts one (the file's comment) */
#define EVICT_RESERVE 32u    /* libmicrohttpd's limit above: evicted, not closed yet */
#define ANSWER_GRACE_MS 1000u /* a request being answered is not evicted for this long */
#define CONN_MEMORY (16u * 1024u)
#define CONN_TIMEOUT_S 5u
#define MAX_BODY 1024u

static struct {
    void *lib;
    __typeof__(MHD_start_daemon) *start_daemon;
    __typeof__(MHD_stop_daemon) *stop_daemon;
    __typeof__(MHD_create_response_from_buffer) *create_response;
    __typeof__(MHD_destroy_response) *destroy_response;
    __typeof__(MHD_queue_response) *queue_response;
    __typeof__(MHD_add_response_header) *add_header;
    __typeof__(MHD_lookup_connection_value) *lookup;
    __typeof__(MHD_get_daemon_info) *daemon_info;
    __typeof__(MHD_get_connection_info) *conn_info;
    __typeof__(MHD_set_panic_func) *set_panic;
} M;

/* One connection libmicrohttpd holds; server thread only. */
typedef struct conn_slot {
    struct MHD_Connection *c; /* NULL: free */
    int fd;
    unsigned char addr[16];   /* the peer's address (IPv4-mapped IPv6 as IPv4) */
    unsigned char alen;       /* 4, 16, or 0 when not an IP address */
    int evicted;              /* shut down, its CLOSED notification still to come */
    uint64_t progress_ms;     /* accepted, or its last request answered */
    uint64_t answering_ms;    /* its request's headers came in (being answered); 0 none */
} conn_slot;
static conn_slot g_conn[MAX_CONNECTIONS + EVICT_RESERVE];
static int g_evicted_series = -1; /* trainprof_http_connections_evicted_total */

static struct MHD_Daemon *g_daemon;
static int g_port;
static _Atomic int g_given_up; /* libmicrohttpd panicked: the daemon is left alone */
/* Our call into libmicrohttpd in progress (start, stop: one thread at a time, the flusher's
 * or shutdown's) and its thread, for on_panic. Not thread-local: the library's TLS is static
 * (internal.h) and the static TLS left for a dlopen'ed library is small. */
static jmp_buf *_Atomic g_panic_jmp;
static pthread_t g_panic_thread;
static char *g_auth; /* "Bearer <token>", or NULL */
static int (*g_on_detail)(int on);

/* ------------------------------------------------- the endpoint's descriptors, kept high
 *
 * Every descriptor of the endpoint lives above the job's: its listening socket, epoll
 * instance, wake-up eventfd and accepted connections. A job that closes every descriptor and
 * opens its own files on the freed numbers (daemons do) would otherwise hand libmicrohttpd's
 * numbers to its files: libmicrohttpd then aborts the process (epoll_ctl fails), blocks
 * forever at exit (its thread waits on an epoll set it no longer owns), or writes HTTP into
 * the job's files. libmicrohttpd creates these descriptors itself, so libtrainprof defines
 * socket, accept, accept4, eventfd, pipe, pipe2, epoll_create and epoll_create1: a call whose
 * return address lies in libmicrohttpd's image (loaded by load()) gets its descriptor moved
 * into the band below the library's reserved range (writer.h), close-on-exec; every other
 * caller gets libc's result untouched, at the cost of one comparison. A descriptor that cannot
 * be moved (the band and everything above it taken) is closed and the call fails with EMFILE,
 * so no descriptor of the endpoint is ever a low one. When accept fails for want of
 * descriptors (the job uses them all, up to RLIMIT_NOFILE), the call sleeps ACCEPT_BACKOFF_MS
 * before it returns: libmicrohttpd, with no connection open, polls the listening socket again
 * at once, and would spin a core on the pending connection.
 * Not in a ThreadSanitizer build (its runtime interposes these calls itself, and calls them
 * while it initialises); nor where libtrainprof is not in the global scope before libc (a
 * Python module loaded without preloading): there libmicrohttpd gets libc's calls. Under
 * AddressSanitizer, whose runtime intercepts accept4 and pipe ahead of us, the caller seen is
 * the runtime, so accepted connections keep low numbers there.
 */
#if defined(__SANITIZE_THREAD__)
#define TPROF__FD_INTERPOSE 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TPROF__FD_INTERPOSE 0
#endif
#endif
#ifndef TPROF__FD_INTERPOSE
#define TPROF__FD_INTERPOSE 1
#endif

#define ENDPOINT_FDS 192       /* the band: MAX_CONNECTIONS + EVICT_RESERVE + 3, rounded up */
#define ACCEPT_BACKOFF_MS 100u /* at most ten failed accepts a second */

static uintptr_t g_mhd_lo, g_mhd_hi; /* libmicrohttpd's image; 0, 0 when not loaded */

#if TPROF__FD_INTERPOSE
static int from_mhd(const void *ra) {
    uintptr_t a = (uintptr_t)ra;
    uintptr_t lo = __atomic_load_n(&g_mhd_lo, __ATOMIC_ACQUIRE);
    return lo && a >= lo && a < __atomic_load_n(&g_mhd_hi, __ATOMIC_RELAXED);
}

/* fd moved into the endpoint's band, close-on-exec; -1 with EMFILE when it cannot be. */
static int endpoint_fd(int fd) {
    if (fd < 0) return fd;
    int base = tprof__fd_reserved_base();
    int lo = base - ENDPOINT_FDS;
    if (lo < base / 2) lo = base / 2;
    if (lo < 3) lo = 3;
    if (fd >= lo) {
        int fl = fcntl(fd, F_GETFD);
        if (fl >= 0 && !(fl & FD_CLOEXEC)) fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
        return fd;
    }
    int hi = fcntl(fd, F_DUPFD_CLOEXEC, lo);
    close(fd);
    if (hi < 0) errno = EMFILE;
    return hi;
}

/* libc's definitions, resolved by the constructor so that these calls, async-signal-safe in
 * libc, stay so here (dlsym is not); a call before it resolves its own. */
enum { N_SOCKET, N_ACCEPT, N_ACCEPT4, N_EVENTFD, N_EPOLL_CREATE, N_EPOLL_CREATE1, N_PIPE,
       N_PIPE2, N_COUNT };
static const char *const k_next_names[N_COUNT] = {
    "socket", "accept", "accept4", "eventfd", "epoll_create", "epoll_create1", "pipe", "pipe2"};
static void *g_next[N_COUNT];

static void *next_of(int which) {
    return tprof__next_symbol_cached(&g_next[which], k_next_names[which]);
}

__attribute__((constructor)) static void resolve_next(void) {
    for (int i = 0; i < N_COUNT; i++) next_of(i);
}

#define NEXT(name, which)                                                       \
    __typeof__(name) *fn_;                                                      \
    *(void **)&fn_ = next_of(which);                                            \
    if (!fn_) {                                                                 \
        errno = ENOSYS;                                                         \
        return -1;                                                              \
    }

static void backoff(void) {
    struct timespec ts = {0, (long)ACCEPT_BACKOFF_MS * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static int accepted(int fd) {
    if (fd >= 0) fd = endpoint_fd(fd);
    if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
        int e = errno;
        backoff();
        errno = e;
    }
    return fd;
}

TPROF_API int socket(int domain, int type, int protocol) {
    NEXT(socket, N_SOCKET)
    int fd = fn_(domain, type, protocol);
    return from_mhd(__builtin_return_address(0)) ? endpoint_fd(fd) : fd;
}
TPROF_API int accept(int s, struct sockaddr *addr, socklen_t *len) {
    NEXT(accept, N_ACCEPT)
    int fd = fn_(s, addr, len);
    return from_mhd(__builtin_return_address(0)) ? accepted(fd) : fd;
}
TPROF_API int accept4(int s, struct sockaddr *addr, socklen_t *len, int flags) {
    NEXT(accept4, N_ACCEPT4)
    int fd = fn_(s, addr, len, flags);
    return from_mhd(__builtin_return_address(0)) ? accepted(fd) : fd;
}
TPROF_API int eventfd(unsigned int initval, int flags) {
    NEXT(eventfd, N_EVENTFD)
    int fd = fn_(initval, flags);
    return from_mhd(__builtin_return_address(0)) ? endpoint_fd(fd) : fd;
}
TPROF_API int epoll_create(int size) {
    NEXT(epoll_create, N_EPOLL_CREATE)
    int fd = fn_(size);
    return from_mhd(__builtin_return_address(0)) ? endpoint_fd(fd) : fd;
}
TPROF_API int epoll_create1(int flags) {
    NEXT(epoll_create1, N_EPOLL_CREATE1)
    int fd = fn_(flags);
    return from_mhd(__builtin_return_address(0)) ? endpoint_fd(fd) : fd;
}
static int pipe_ends(int r, int fds[2]) {
    if (r != 0) return r;
    int a = endpoint_fd(fds[0]);
    int b = endpoint_fd(fds[1]);
    if (a >= 0 && b >= 0) {
        fds[0] = a;
        fds[1] = b;
        return 0;
    }
    if (a >= 0) close(a);
    if (b >= 0) close(b);
    errno = EMFILE;
    return -1;
}
TPROF_API int pipe(int fds[2]) {
    NEXT(pipe, N_PIPE)
    int r = fn_(fds);
    return from_mhd(__builtin_return_address(0)) ? pipe_ends(r, fds) : r;
}
TPROF_API int pipe2(int fds[2], int flags) {
    NEXT(pipe2, N_PIPE2)
    int r = fn_(fds, flags);
    return from_mhd(__builtin_return_address(0)) ? pipe_ends(r, fds) : r;
}
#undef NEXT
#endif /* TPROF__FD_INTERPOSE */

/* dl_iterate_phdr: the address range of the object loaded at `bias`. */
static int find_image(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    uintptr_t *r = arg; /* in: bias; out: lo, hi */
    if (info->dlpi_addr != r[0]) return 0;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uintptr_t a = info->dlpi_addr + ph->p_vaddr;
        if (a < lo) lo = a;
        if (a + ph->p_memsz > hi) hi = a + ph->p_memsz;
    }
    if (hi <= lo) return 0;
    r[1] = lo;
    r[2] = hi;
    return 1;
}

static void note_image(void *h) {
    struct link_map *lm = NULL;
    if (dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || !lm) return;
    uintptr_t r[3] = {(uintptr_t)lm->l_addr, 0, 0};
    if (dl_iterate_phdr(find_image, r) != 1) return;
    __atomic_store_n(&g_mhd_hi, r[2], __ATOMIC_RELAXED);
    __atomic_store_n(&g_mhd_lo, r[1], __ATOMIC_RELEASE);
}

/* libmicrohttpd's fatal errors (a descriptor it lost to the job, say) call this instead of
 * abort(): the endpoint is given up, one line says so, and the job goes on. It must not
 * return to libmicrohttpd. On a call we made (start, stop) it returns to our caller; on the
 * server thread it ends that thread. The daemon is never touched again: its descriptors are
 * left as they are (they may be the job's by now). */
static void on_panic(void *cls, const char *file, unsigned int line, const char *reason) {
    (void)cls;
    int first = !atomic_exchange(&g_given_up, 1);
    if (first) {
        const char *r = reason && *reason ? reason : "no reason given";
        int len = (int)strcspn(r, "\r\n"); /* its messages end with a newline */
        tprof__log(TPROF_LOG_WARN, "metrics endpoint given up: libmicrohttpd failed (%.*s, %s:%u)",
                   len, r, file ? file : "?", line);
    }
    jmp_buf *jb = atomic_load(&g_panic_jmp);
    if (jb && pthread_equal(pthread_self(), g_panic_thread)) longjmp(*jb, 1);
    /* the server thread: it ends, so that a MHD_stop_daemon in progress (which may be what
     * made it fail) can join it. Its unwinding needs libgcc_s, loaded with libmicrohttpd. */
    pthread_exit(NULL);
}

static int load(char *why, size_t n) {
    if (M.lib) return 0;
    const char *names[] = {"libmicrohttpd.so.12", "libmicrohttpd.so"};
    void *h = NULL;
    for (size_t i = 0; i < 2 && !h; i++) h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(why, n, "libmicrohttpd not found (%s)", dlerror());
        return -1;
    }
#define SYM(field, name)                                                    \
    if (!(*(void **)&M.field = dlsym(h, name))) {                           \
        snprintf(why, n, "libmicrohttpd lacks %s", name);                   \
        dlclose(h);                                                         \
        return -1;                                                          \
    }
    SYM(start_daemon, "MHD_start_daemon")
    SYM(stop_daemon, "MHD_stop_daemon")
    SYM(create_response, "MHD_create_response_from_buffer")
    SYM(destroy_response, "MHD_destroy_response")
    SYM(queue_response, "MHD_queue_response")
    SYM(add_header, "MHD_add_response_header")
    SYM(lookup, "MHD_lookup_connection_value")
    SYM(daemon_info, "MHD_get_daemon_info")
    SYM(conn_info, "MHD_get_connection_info")
    SYM(set_panic, "MHD_set_panic_func")
#undef SYM
    /* pthread_exit in on_panic loads libgcc_s unless it is there: it may be called when the
     * job has taken every descriptor */
    if (!dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_NODELETE)) (void)dlerror();
    M.set_panic(on_panic, NULL);
    note_image(h);
    M.lib = h;
    return 0;
}

/* Same time whatever the input: every byte of the longer string is looked at. */
static int ct_equal(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b), n = la > lb ? la : lb;
    unsigned char d = (unsigned char)(la != lb);
    for (size_t i = 0; i < n; i++) {
        unsigned char x = i < la ? (unsigned char)a[i] : 0;
        unsigned char y = i < lb ? (unsigned char)b[i] : 0;
        d |= (unsigned char)(x ^ y);
    }
    return d == 0;
}

static tprof__mhd_result reply(struct MHD_Connection *c, unsigned status, const char *ctype,
                               char *body, size_t len, int owned) {
    struct MHD_Response *r = M.create_response(
        len, body, owned ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        if (owned) free(body);
        return MHD_NO;
    }
    M.add_header(r, "Content-Type", ctype);
    M.add_header(r, "Cache-Control", "no-store");
    if (status == MHD_HTTP_UNAUTHORIZED)
        M.add_header(r, "WWW-Authenticate", "Bearer realm=\"trainprof\"");
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED) M.add_header(r, "Allow", "GET, HEAD, POST");
    tprof__mhd_result ret = M.queue_response(c, status, r);
    M.destroy_response(r);
    return ret;
}

static tprof__mhd_result text(struct MHD_Connection *c, unsigned status, const char *msg) {
    return reply(c, status, "text/plain; charset=utf-8", (char *)msg, strlen(msg), 0);
}

static uint64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The address part of a peer, IPv4-mapped IPv6 folded to IPv4 (a dual-stack listener sees
 * IPv4 clients that way); alen 0 when it is no IP address. */
static void peer_key(const struct sockaddr *sa, unsigned char addr[16], unsigned char *alen) {
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    *alen = 0;
    if (!sa) return;
    if (sa->sa_family == AF_INET) {
        memcpy(addr, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        *alen = 4;
    } else if (sa->sa_family == AF_INET6) {
        const unsigned char *a6 = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
        if (!memcmp(a6, mapped, 12)) {
            memcpy(addr, a6 + 12, 4);
            *alen = 4;
        } else {
            memcpy(addr, a6, 16);
            *alen = 16;
        }
    }
}

static conn_slot *slot_of(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = M.conn_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

/* MHD_OPTION_NOTIFY_CONNECTION: the table follows libmicrohttpd's connections. */
static void notify_conn(void *cls, struct MHD_Connection *c, void **socket_context,
                        enum MHD_ConnectionNotificationCode code) {
    (void)cls;
    if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        conn_slot *s = *socket_context;
        if (s) memset(s, 0, sizeof *s);
        *socket_context = NULL;
        return;
    }
    *socket_context = NULL;
    const union MHD_ConnectionInfo *fd = M.conn_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!fd) return; /* not evictable: it still times out */
    for (size_t i = 0; i < sizeof g_conn / sizeof *g_conn; i++) {
        conn_slot *s = &g_conn[i];
        if (s->c) continue;
        memset(s, 0, sizeof *s);
        s->c = c;
        s->fd = fd->connect_fd;
        const union MHD_ConnectionInfo *a = M.conn_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        peer_key(a ? a->client_addr : NULL, s->addr, &s->alen);
        s->progress_ms = mono_ms();
        *socket_context = s;
        return;
    }
}

static int same_peer(const conn_slot *a, const conn_slot *b) {
    return a->alen == b->alen && !memcmp(a->addr, b->addr, a->alen);
}

/* The accept policy: below MAX_CONNECTIONS, yes; at it, evict one (the file's comment) and
 * let the newcomer in, or refuse it when every connection is being answered. Linear in the
 * table (addresses counted in a small open-addressing table), as a flood calls it for every
 * connection it opens. */
#define PEER_BUCKETS 512u /* a power of two, over twice the table */
static tprof__mhd_result accept_policy(void *cls, const struct sockaddr *sa, socklen_t len) {
    (void)cls;
    (void)sa;
    (void)len;
    const size_t n = sizeof g_conn / sizeof *g_conn;
    unsigned live = 0;
    for (size_t i = 0; i < n; i++) live += g_conn[i].c && !g_conn[i].evicted;
    if (live < MAX_CONNECTIONS) return MHD_YES;
    /* live connections per address: bucket -> the first slot of that address, its count */
    static short first[PEER_BUCKETS];
    static unsigned short count[PEER_BUCKETS];
    static unsigned short bucket_of[sizeof g_conn / sizeof *g_conn];
    memset(first, -1, sizeof first);
    for (size_t i = 0; i < n; i++) {
        const conn_slot *s = &g_conn[i];
        if (!s->c || s->evicted) continue;
        uint32_t h = 2166136261u; /* FNV-1a */
        for (unsigned k = 0; k < s->alen; k++) h = (h ^ s->addr[k]) * 16777619u;
        unsigned b = h & (PEER_BUCKETS - 1);
        while (first[b] >= 0 && !same_peer(&g_conn[first[b]], s)) b = (b + 1) & (PEER_BUCKETS - 1);
        if (first[b] < 0) {
            first[b] = (short)i;
            count[b] = 0;
        }
        count[b]++;
        bucket_of[i] = (unsigned short)b;
    }
    uint64_t now = mono_ms();
    conn_slot *victim = NULL;
    unsigned victim_peers = 0;
    for (size_t i = 0; i < n; i++) {
        conn_slot *s = &g_conn[i];
        if (!s->c || s->evicted) continue;
        if (s->answering_ms && (now < s->answering_ms || now - s->answering_ms < ANSWER_GRACE_MS))
            continue;
        unsigned peers = count[bucket_of[i]]; /* live connections of its address */
        if (!victim || peers > victim_peers ||
            (peers == victim_peers && s->progress_ms < victim->progress_ms)) {
            victim = s;
            victim_peers = peers;
        }
    }
    if (!victim) return MHD_NO;
    /* libmicrohttpd reads end-of-stream and closes it on its next pass */
    shutdown(victim->fd, SHUT_RDWR);
    victim->evicted = 1;
    tprof__m_add(g_evicted_series, 1); /* a no-op without the series */
    return MHD_YES;
}

/* Per-request state: MHD calls the handler again for each piece of a body. */
typedef struct req {
    size_t body;
} req;
static req g_marker; /* requests that carry no state of their own */

static tprof__mhd_result handler(void *cls, struct MHD_Connection *c, const char *url,
                                 const char *method, const char *version,
                                 const char *upload, size_t *upload_size, void **con_cls) {
    (void)cls;
    (void)version;
    (void)upload;
    int get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    int post = !strcmp(method, "POST");
    if (*con_cls == NULL) {
        /* first call: headers only. Refuse early what would need a body we do not want. */
        conn_slot *sl = slot_of(c);
        if (sl) sl->answering_ms = mono_ms() | 1; /* never 0 */
        const char *cl = M.lookup(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > MAX_BODY)
            return text(c, MHD_HTTP_CONTENT_TOO_LARGE, "request body too large\n");
        if (!get && !post) return text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
        if (post) {
            req *r = calloc(1, sizeof *r);
            if (!r) return MHD_NO;
            *con_cls = r;
        } else {
            *con_cls = &g_marker;
        }
        return MHD_YES;
    }
    if (*upload_size) {
        /* a body we do not use: counted and dropped, within the bound */
        req *r = *con_cls;
        if (r != &g_marker) r->body += *upload_size;
        *upload_size = 0;
        if (r == &g_marker || r->body > MAX_BODY)
            return text(c, MHD_HTTP_CONTENT_TOO_LARGE, "request body too large\n");
        return MHD_YES;
    }
    if (!strcmp(url, "/healthz"))
        return get ? text(c, MHD_HTTP_OK, "ok\n")
                   : text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
    int is_metrics = !strcmp(url, "/metrics"), is_capture = !strcmp(url, "/capture");
    if (!is_metrics && !is_capture)
        return text(c, MHD_HTTP_NOT_FOUND, "not found: /metrics, /healthz, POST /capture\n");
    if (g_auth) {
        const char *a = M.lookup(c, MHD_HEADER_KIND, "Authorization");
        if (!a || !ct_equal(a, g_auth)) return text(c, MHD_HTTP_UNAUTHORIZED, "unauthorized\n");
    }
    if (is_metrics) {
        if (!get) return text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
        const char *acc = M.lookup(c, MHD_HEADER_KIND, "Accept");
        int om = acc && strstr(acc, "application/openmetrics-text") != NULL;
        char *body;
        size_t len;
        if (tprof__m_render(om, &body, &len) != 0)
            return text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
        return reply(c, MHD_HTTP_OK,
                     om ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
                        : "text/plain; version=0.0.4; charset=utf-8",
                     body, len, 1);
    }
    if (!post) return text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
    const char *d = M.lookup(c, MHD_GET_ARGUMENT_KIND, "detail");
    int on = d && (!strcmp(d, "on") || !strcmp(d, "1"));
    int off = d && (!strcmp(d, "off") || !strcmp(d, "0"));
    if (!on && !off) return text(c, MHD_HTTP_BAD_REQUEST, "use /capture?detail=on or detail=off\n");
    if (!g_on_detail) return text(c, MHD_HTTP_NOT_FOUND, "no capture control in this process\n");
    if (g_on_detail(on) != 0)
        return text(c, MHD_HTTP_CONFLICT, "detailed capture cannot be changed now\n");
    return text(c, MHD_HTTP_ACCEPTED,
                on ? "detailed capture on from the next step\n"
                   : "detailed capture off from the next step\n");
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe) {
    (void)cls;
    (void)toe;
    conn_slot *sl = slot_of(c);
    if (sl) {
        sl->answering_ms = 0;
        sl->progress_ms = mono_ms();
    }
    if (*con_cls && *con_cls != &g_marker) free(*con_cls);
    *con_cls = NULL;
}

/* libmicrohttpd's own complaints (malformed requests, full tables): not ours to print in a
 * training job's stderr. */
static void quiet_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    (void)fmt;
    (void)ap;
}

int tprof__http_start(const tprof__http_cfg *cfg, char *why, size_t whylen) {
    why[0] = 0;
    if (g_daemon) return g_port;
    if (load(why, whylen) != 0) return -1;
    const char *addr = cfg->addr && *cfg->addr ? cfg->addr : "127.0.0.1";
    struct sockaddr_in6 s6;
    struct sockaddr_in s4;
    struct sockaddr *sa;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO;
    memset(&s4, 0, sizeof s4);
    memset(&s6, 0, sizeof s6);
    if (inet_pton(AF_INET, addr, &s4.sin_addr) == 1) {
        s4.sin_family = AF_INET;
        s4.sin_port = htons((uint16_t)cfg->port);
        sa = (struct sockaddr *)&s4;
    } else if (inet_pton(AF_INET6, addr, &s6.sin6_addr) == 1) {
        s6.sin6_family = AF_INET6;
        s6.sin6_port = htons((uint16_t)cfg->port);
        sa = (struct sockaddr *)&s6;
        flags |= MHD_USE_IPv6;
    } else {
        snprintf(why, whylen, "TRAINPROF_METRICS_ADDR=%.100s is not a numeric IPv4 or IPv6 address",
                 addr);
        return -1;
    }
    if (cfg->port < 0 || cfg->port > 65535) {
        snprintf(why, whylen, "port %d out of range", cfg->port);
        return -1;
    }
    free(g_auth);
    g_auth = NULL;
    if (cfg->token && *cfg->token) {
        size_t n = strlen(cfg->token) + 8;
        g_auth = malloc(n);
        if (!g_auth) {
            snprintf(why, whylen, "out of memory");
            return -1;
        }
        snprintf(g_auth, n, "Bearer %s", cfg->token);
    }
    g_on_detail = cfg->on_detail;
    memset(g_conn, 0, sizeof g_conn);
    /* what an operator sees of slow clients: the evictions they caused */
    int fam = tprof__m_family("trainprof_http_connections_evicted_total",
                              "connections the metrics endpoint closed to make room for a new one "
                              "(all 128 taken: slow, idle or hostile clients)",
                              TPROF_M_COUNTER, NULL, 0);
    g_evicted_series = fam >= 0 ? tprof__m_series_raw(fam, "") : -1;
    if (atomic_load(&g_given_up)) {
        snprintf(why, whylen, "libmicrohttpd failed earlier in this process");
        return -1;
    }
    errno = 0;
    jmp_buf jb;
    g_panic_thread = pthread_self();
    atomic_store(&g_panic_jmp, &jb);
    if (setjmp(jb)) {
        atomic_store(&g_panic_jmp, NULL);
        snprintf(why, whylen, "libmicrohttpd failed while starting");
        return -1;
    }
    g_daemon = M.start_daemon(flags, (uint16_t)cfg->port, accept_policy, NULL, handler, NULL,
                              MHD_OPTION_SOCK_ADDR, sa,
                              MHD_OPTION_CONNECTION_LIMIT, MAX_CONNECTIONS + EVICT_RESERVE,
                              MHD_OPTION_NOTIFY_CONNECTION, notify_conn, NULL,
                              MHD_OPTION_THREAD_STACK_SIZE, tprof__thread_stack_size(),
                              MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONN_MEMORY,
                              MHD_OPTION_CONNECTION_TIMEOUT, CONN_TIMEOUT_S,
                              MHD_OPTION_NOTIFY_COMPLETED, completed, NULL,
                              MHD_OPTION_EXTERNAL_LOGGER, quiet_log, NULL,
                              MHD_OPTION_END);
    atomic_store(&g_panic_jmp, NULL);
    if (!g_daemon) {
        int e = errno;
        snprintf(why, whylen, "cannot listen on %s port %d%s%s", addr, cfg->port,
                 e ? ": " : "", e ? strerror(e) : "");
        return -1;
    }
    const union MHD_DaemonInfo *info = M.daemon_info(g_daemon, MHD_DAEMON_INFO_BIND_PORT);
    g_port = info ? (int)info->port : cfg->port;
    return g_port;
}

void tprof__http_stop(void) {
    if (!g_daemon) return;
    /* given up: its thread and descriptors are left alone (on_panic) */
    if (!atomic_load(&g_given_up)) {
        jmp_buf jb;
        g_panic_thread = pthread_self();
        atomic_store(&g_panic_jmp, &jb);
        if (!setjmp(jb)) M.stop_daemon(g_daemon);
        atomic_store(&g_panic_jmp, NULL);
    }
    g_daemon = NULL;
    g_port = 0;
}

void tprof__http_forget(void) {
    g_daemon = NULL;
    g_port = 0;
}

int tprof__http_port(void) { return g_port; }

#else /* no libmicrohttpd at build time */

int tprof__http_start(const tprof__http_cfg *cfg, char *why, size_t whylen) {
    (void)cfg;
    snprintf(why, whylen, "built without libmicrohttpd (apt-get install libmicrohttpd-dev)");
    return -1;
}
void tprof__http_stop(void) {}
void tprof__http_forget(void) {}
int tprof__http_port(void) { return 0; }

#endif
