/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * userfaultfd monitor of subscribed ranges (internal to libucm).
 *
 * The registration cache subscribes the ranges it registers; the kernel then
 * reports every unmap (munmap, mremap, MAP_FIXED over it, madvise
 * DONTNEED/REMOVE), whoever makes it (raw syscalls, the dynamic loader,
 * static code), and the monitor turns each report into VM_UNMAPPED for
 * exactly that range.  The public entry points are in ucm_ext.h.
 *
 * The span table (ucm_uffd_table.c) holds the page-aligned, disjoint spans
 * registered with the kernel and how many subscriptions each serves.  It is
 * a treap (O(log n) find/insert/remove) whose nodes come from mmap()ed
 * chunks: no malloc, so it may be used from the dispatcher thread while a
 * hooked allocator is in any state.  Callers serialize with ucm_uffd_lock.
 */
#ifndef UCM_UFFD_H_
#define UCM_UFFD_H_

#include <ucm/api/ucm_ext.h>
#include <ucm/util/ucm_hot.h>
#include <ucs/config/ucs_config_parse.h>
#include <ucs/sys/compiler_def.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* UCX_MEM_UFFD* (kept out of ucm_global_opts, whose layout is UCX's ABI) */
typedef struct ucm_uffd_opts {
    int mode;             /* ucm_uffd_mode_t */
    int register_missing; /* 1: UFFDIO_REGISTER_MODE_MISSING, 0: WP */
    size_t grain;         /* widen registrations to this alignment */
    double vma_share;     /* of vm.max_map_count (ucm_uffd_budget.h) */
} ucm_uffd_opts_t;

extern ucm_uffd_opts_t ucm_uffd_opts;
extern const ucs_config_field_t ucm_uffd_config_table[];

/* Serializes subscriptions, the span table and the state. */
extern pthread_mutex_t ucm_uffd_lock;

typedef struct ucm_uffd_span ucm_uffd_span_t;
struct ucm_uffd_span {
    uintptr_t start, end; /* page aligned, end > start */
    unsigned long count;  /* subscriptions counted here */
    uint64_t seq;         /* lineage: set when registered, kept by
                             the remnants of a cut; subscriptions
                             hold it as their token */
    unsigned prio;        /* treap heap key */
    ucm_uffd_span_t *left, *right;
};

/* Bumped (under ucm_uffd_lock) before every change of the table: a span
 * remembered with the value it had is still in the table, unchanged, while
 * the value is the same (read without the lock by subscriptions). */
extern unsigned long ucm_uffd_table_gen;

static inline void ucm_uffd_table_changed(void)
{
    __atomic_store_n(&ucm_uffd_table_gen, ucm_uffd_table_gen + 1,
                     __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
}

/* Span containing addr, or NULL. */
ucm_uffd_span_t *ucm_uffd_table_find(uintptr_t addr);

/* First span that ends after addr (the one containing it, or the next). */
ucm_uffd_span_t *ucm_uffd_table_first_after(uintptr_t addr);

/* Make sure 'need' nodes are free.  UCS_ERR_NO_MEMORY if mmap fails. */
ucs_status_t ucm_uffd_table_reserve(unsigned need);

/* Add [start, end) with count, which must not overlap any span.  Uses a
 * reserved node; UCS_ERR_NO_MEMORY if none is left and mmap fails. */
ucs_status_t ucm_uffd_table_add(uintptr_t start, uintptr_t end,
                                unsigned long count, uint64_t seq);

/* Remove one span (from find/first_after). */
void ucm_uffd_table_remove(ucm_uffd_span_t *span);

/* Cut [start, end) out of every span: spans inside go away, spans that
 * stick out keep their remnants (with their count; a remnant that cannot
 * get a node is forgotten, which only leaves it registered unowned);
 * remnants keep the span's seq. */
void ucm_uffd_table_cut(uintptr_t start, uintptr_t end);

/* Spans in the table. */
unsigned long ucm_uffd_table_size(void);

/* Forget every span (forked child: its mappings are not registered). */
void ucm_uffd_table_reset(void);

/* Lock-free summary of the span table for the hooks: how many spans touch
 * each 2 MiB block of addresses (hashed into a fixed array), and how many
 * are too wide to count per block.  Written with the table (lock held),
 * read without the lock: a stale answer only costs a monitor round trip
 * (missed span) or a look at the table (phantom one).  It lives in its own
 * mapping marked MADV_WIPEONFORK, so a child forked by any means reads
 * owner 0 and leaves the parent's registrations alone (an ioctl on the
 * inherited descriptor would act on the parent's address space). */
#define UCM_UFFD_WATCH_SHIFT   21
#define UCM_UFFD_WATCH_BUCKETS 4096

typedef struct ucm_uffd_watch {
    volatile unsigned long owner; /* 1: spans registered by this process */
    volatile unsigned long wide;  /* spans over UCM_UFFD_WATCH_BUCKETS blocks */
    volatile uint32_t buckets[UCM_UFFD_WATCH_BUCKETS];
} ucm_uffd_watch_t;

/* The summary, NULL until the monitor has one (then also in ucm_hot). */
extern ucm_uffd_watch_t *ucm_uffd_watch;

/* Non-zero if a span may intersect [start, end) (no lock). */
static UCS_F_ALWAYS_INLINE int
ucm_uffd_watch_may_intersect(const ucm_uffd_watch_t *w, uintptr_t start,
                             uintptr_t end)
{
    uintptr_t b = start >> UCM_UFFD_WATCH_SHIFT;
    uintptr_t e = (end - 1) >> UCM_UFFD_WATCH_SHIFT;

    if ((w->wide != 0) || (e - b >= UCM_UFFD_WATCH_BUCKETS)) {
        return 1;
    }
    for (; b <= e; ++b) {
        if (w->buckets[b % UCM_UFFD_WATCH_BUCKETS] != 0) {
            return 1;
        }
    }
    return 0;
}

/* Hook context, before a hooked call that unmaps or discards [addr,
 * addr+len) and whose VM_UNMAPPED the hook dispatches after this returns:
 * takes the spans' pages in that range out of the userfaultfd registration
 * and out of the table, so the kernel has nobody to wait for (a subscription
 * made after this registers again and the call's unmap is then reported by
 * the monitor; one made before is covered by the hook's VM_UNMAPPED).
 * Never blocks: when the lock is busy the call keeps its round trip.
 * Keeps errno.  Nothing to do while no span exists (one load). */
void ucm_uffd_unwatch_range(void *addr, size_t len);

static UCS_F_ALWAYS_INLINE void ucm_uffd_unwatch(void *addr, size_t len)
{
    if (ucs_unlikely(ucm_hot.uffd_watch != NULL)) {
        ucm_uffd_unwatch_range(addr, len);
    }
}

#endif
