/*
 * alloc.c — counted allocations of the analyses (alloc.h).
 */
#define _GNU_SOURCE
#include "analysis/alloc.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local unsigned long refused; /* this thread's refusals */
static atomic_ulong refused_all;
/* tests: the allocation to refuse (0: none) and the allocations counted since it was set,
 * over all threads (a report's sections run on threads of their own) */
static atomic_ulong fail_at, made;

static void *refuse(void) {
    refused++;
    atomic_fetch_add_explicit(&refused_all, 1, memory_order_relaxed);
    errno = ENOMEM;
    return NULL;
}

/* A test's chosen allocation: refused before it is made, so that the caller sees exactly
 * what a refusal gives (a realloc's block left as it was). Unarmed, one relaxed load of a
 * variable no thread writes. */
static int refuse_now(void) {
    unsigned long k = atomic_load_explicit(&fail_at, memory_order_relaxed);
    return k && atomic_fetch_add_explicit(&made, 1, memory_order_relaxed) + 1 == k;
}

void *tp_malloc(size_t n) {
    if (refuse_now()) return refuse();
    void *p = malloc(n);
    return p || !n ? p : refuse();
}

void *tp_calloc(size_t n, size_t size) {
    if (refuse_now()) return refuse();
    void *p = calloc(n, size);
    return p || !n || !size ? p : refuse();
}

void *tp_realloc(void *p, size_t n) {
    if (refuse_now()) return refuse();
    void *q = realloc(p, n);
    return q || !n ? q : refuse();
}

char *tp_strdup(const char *s) {
    if (refuse_now()) return refuse();
    char *p = strdup(s);
    return p ? p : refuse();
}

unsigned long tp_nomem_thread(void) {
    return refused;
}

void tp_nomem_note(void) {
    (void)refuse();
}

void tp_nomem_thread_set(unsigned long n) {
    refused = n;
}

unsigned long tp_nomem_process(void) {
    return atomic_load_explicit(&refused_all, memory_order_relaxed);
}

/* the nodes that could not be added (tp_json_item_to_object): a node of its own, linked to
 * without an allocation */
static cJSON orphans = {.type = cJSON_Array};
static pthread_mutex_t orphans_lock = PTHREAD_MUTEX_INITIALIZER;

static int kept(cJSON *item) {
    pthread_mutex_lock(&orphans_lock);
    cJSON_AddItemToArray(&orphans, item);
    pthread_mutex_unlock(&orphans_lock);
    return 0;
}

int tp_json_item_to_object(cJSON *o, const char *key, cJSON *item) {
    if (!item) return 0;
    return o && key && cJSON_AddItemToObject(o, key, item) ? 1 : kept(item);
}

int tp_json_item_to_array(cJSON *a, cJSON *item) {
    if (!item) return 0;
    return a && cJSON_AddItemToArray(a, item) ? 1 : kept(item);
}

static void *json_malloc(size_t n) {
    return tp_malloc(n);
}

void tp_alloc_json_hooks(void) {
    cJSON_Hooks h = {json_malloc, free};
    cJSON_InitHooks(&h);
}

unsigned long tp_alloc_fail_at(unsigned long k) {
    atomic_store(&fail_at, 0);
    unsigned long so_far = atomic_exchange(&made, 0);
    atomic_store(&fail_at, k);
    return so_far;
}
