/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Span table of the userfaultfd monitor: a treap keyed by span start.
 * Spans are disjoint, so "the span containing addr" is the one with the
 * largest start <= addr.  Nodes come from mmap()ed chunks kept for the life
 * of the process (a forked child reuses them).  Callers hold ucm_uffd_lock.
 */
#include "ucm_uffd.h"

#include <ucm/util/ucm_sys.h>

#include <stddef.h>
#include <sys/mman.h>

#define UCM_UFFD_CHUNK_SIZE (64 * 1024)

static ucm_uffd_span_t *ucm_uffd_root;
static ucm_uffd_span_t *ucm_uffd_free_nodes;
static unsigned long ucm_uffd_nfree;
static unsigned long ucm_uffd_nspans;
unsigned long ucm_uffd_table_gen;
ucm_uffd_watch_t *ucm_uffd_watch;
static unsigned ucm_uffd_seed = 2463534242u;

/* Count a span in the hooks' summary (delta +1) or take it out (-1). */
static void ucm_uffd_watch_update(uintptr_t start, uintptr_t end, int delta)
{
    ucm_uffd_watch_t *w = ucm_uffd_watch;
    uintptr_t b, e;
    uint32_t *bucket;

    if (w == NULL) {
        return;
    }
    b = start >> UCM_UFFD_WATCH_SHIFT;
    e = (end - 1) >> UCM_UFFD_WATCH_SHIFT;
    if (e - b >= UCM_UFFD_WATCH_BUCKETS) {
        if ((delta > 0) || (w->wide > 0)) {
            __atomic_store_n(&w->wide, w->wide + delta, __ATOMIC_RELAXED);
        }
        return;
    }
    for (; b <= e; ++b) {
        /* never below 0: a child forked without atfork handlers finds the
         * summary wiped under a table it still holds */
        bucket = (uint32_t *)&w->buckets[b % UCM_UFFD_WATCH_BUCKETS];
        if ((delta > 0) || (*bucket > 0)) {
            __atomic_store_n(bucket, *bucket + delta, __ATOMIC_RELAXED);
        }
    }
}

/* The hooks look at the summary only while a span exists. */
static void ucm_uffd_watch_publish(void)
{
    __atomic_store_n(&ucm_hot.uffd_watch,
                     (ucm_uffd_nspans > 0) ? (void *)ucm_uffd_watch : NULL,
                     __ATOMIC_RELEASE);
}

static unsigned ucm_uffd_random(void)
{
    ucm_uffd_seed ^= ucm_uffd_seed << 13;
    ucm_uffd_seed ^= ucm_uffd_seed >> 17;
    ucm_uffd_seed ^= ucm_uffd_seed << 5;
    return ucm_uffd_seed;
}

static void ucm_uffd_node_put(ucm_uffd_span_t *node)
{
    node->left          = ucm_uffd_free_nodes;
    ucm_uffd_free_nodes = node;
    ++ucm_uffd_nfree;
}

ucs_status_t ucm_uffd_table_reserve(unsigned need)
{
    ucm_uffd_span_t *chunk;
    size_t i, n;
    long ret;

    while (ucm_uffd_nfree < need) {
        /* raw syscall: no hook, no event */
        ret = ucm_sys_mmap(NULL, UCM_UFFD_CHUNK_SIZE, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (ucm_sys_is_err(ret)) {
            return UCS_ERR_NO_MEMORY;
        }
        chunk = (ucm_uffd_span_t *)ret;
        n     = UCM_UFFD_CHUNK_SIZE / sizeof(*chunk);
        for (i = 0; i < n; ++i) {
            ucm_uffd_node_put(&chunk[i]);
        }
    }
    return UCS_OK;
}

static ucm_uffd_span_t *ucm_uffd_node_get(void)
{
    ucm_uffd_span_t *node;

    if ((ucm_uffd_nfree == 0) && (ucm_uffd_table_reserve(1) != UCS_OK)) {
        return NULL;
    }
    node                = ucm_uffd_free_nodes;
    ucm_uffd_free_nodes = node->left;
    --ucm_uffd_nfree;
    return node;
}

ucm_uffd_span_t *ucm_uffd_table_first_after(uintptr_t addr)
{
    ucm_uffd_span_t *node = ucm_uffd_root, *best = NULL, *floor = NULL;

    /* floor: largest start <= addr; best: smallest start > addr */
    while (node != NULL) {
        if (node->start <= addr) {
            floor = node;
            node  = node->right;
        } else {
            best = node;
            node = node->left;
        }
    }
    if ((floor != NULL) && (floor->end > addr)) {
        return floor;
    }
    return best;
}

ucm_uffd_span_t *ucm_uffd_table_find(uintptr_t addr)
{
    ucm_uffd_span_t *span = ucm_uffd_table_first_after(addr);

    return ((span != NULL) && (span->start <= addr)) ? span : NULL;
}

static ucm_uffd_span_t *ucm_uffd_insert(ucm_uffd_span_t *t, ucm_uffd_span_t *n)
{
    ucm_uffd_span_t *c;

    if (t == NULL) {
        return n;
    }
    if (n->start < t->start) {
        t->left = ucm_uffd_insert(t->left, n);
        if (t->left->prio > t->prio) {
            c        = t->left;
            t->left  = c->right;
            c->right = t;
            t        = c;
        }
    } else {
        t->right = ucm_uffd_insert(t->right, n);
        if (t->right->prio > t->prio) {
            c        = t->right;
            t->right = c->left;
            c->left  = t;
            t        = c;
        }
    }
    return t;
}

static ucm_uffd_span_t *ucm_uffd_join(ucm_uffd_span_t *a, ucm_uffd_span_t *b)
{
    if (a == NULL) {
        return b;
    }
    if (b == NULL) {
        return a;
    }
    if (a->prio > b->prio) {
        a->right = ucm_uffd_join(a->right, b);
        return a;
    }
    b->left = ucm_uffd_join(a, b->left);
    return b;
}

static ucm_uffd_span_t *ucm_uffd_erase(ucm_uffd_span_t *t, ucm_uffd_span_t *n)
{
    if (t == n) {
        return ucm_uffd_join(t->left, t->right);
    }
    if (n->start < t->start) {
        t->left = ucm_uffd_erase(t->left, n);
    } else {
        t->right = ucm_uffd_erase(t->right, n);
    }
    return t;
}

ucs_status_t ucm_uffd_table_add(uintptr_t start, uintptr_t end,
                                unsigned long count, uint64_t seq)
{
    ucm_uffd_span_t *node = ucm_uffd_node_get();

    if (node == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    node->start = start;
    node->end   = end;
    node->count = count;
    node->seq   = seq;
    node->prio  = ucm_uffd_random();
    node->left  = NULL;
    node->right = NULL;
    ucm_uffd_table_changed();
    ucm_uffd_root = ucm_uffd_insert(ucm_uffd_root, node);
    ucm_uffd_watch_update(start, end, 1);
    if (++ucm_uffd_nspans == 1) {
        ucm_uffd_watch_publish();
    }
    return UCS_OK;
}

void ucm_uffd_table_remove(ucm_uffd_span_t *span)
{
    ucm_uffd_table_changed();
    ucm_uffd_root = ucm_uffd_erase(ucm_uffd_root, span);
    ucm_uffd_watch_update(span->start, span->end, -1);
    if (--ucm_uffd_nspans == 0) {
        ucm_uffd_watch_publish();
    }
    ucm_uffd_node_put(span);
}

void ucm_uffd_table_cut(uintptr_t start, uintptr_t end)
{
    ucm_uffd_span_t *span;
    uintptr_t s, e;
    unsigned long count;
    uint64_t seq;

    while (((span = ucm_uffd_table_first_after(start)) != NULL) &&
           (span->start < end)) {
        s     = span->start;
        e     = span->end;
        count = span->count;
        seq   = span->seq;
        ucm_uffd_table_remove(span);
        if (s < start) {
            (void)ucm_uffd_table_add(s, start, count, seq);
        }
        if (e > end) {
            (void)ucm_uffd_table_add(end, e, count, seq);
            break;
        }
    }
}

unsigned long ucm_uffd_table_size(void)
{
    return ucm_uffd_nspans;
}

static void ucm_uffd_free_tree(ucm_uffd_span_t *t)
{
    if (t != NULL) {
        ucm_uffd_free_tree(t->left);
        ucm_uffd_free_tree(t->right);
        ucm_uffd_watch_update(t->start, t->end, -1);
        ucm_uffd_node_put(t);
    }
}

void ucm_uffd_table_reset(void)
{
    ucm_uffd_table_changed();
    ucm_uffd_free_tree(ucm_uffd_root);
    ucm_uffd_root   = NULL;
    ucm_uffd_nspans = 0;
    ucm_uffd_watch_publish();
}
