/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Registration cache internals shared by the rcache_*.c files: struct
 * ucs_rcache, the region's private fields and what has no header of its
 * own.  Each part of the cache's state has a header with its struct, the
 * lock that guards each field, who writes it, and its functions:
 *  - the hot line (hot, below; offsets fixed, internals-stock-abi.md);
 *  - index and hints: range_index.h, rcache_hints.h (lookups);
 *  - leases and slots: rcache_slot.h;
 *  - region memory (free and spare lists, slabs): rcache_pool.h;
 *  - registration path: rcache_regpath.h; the registration in flight:
 *    rcache_inflight.h;
 *  - limits, LRU and tombstones: rcache_limits.h;
 *  - unmaps seen by the lock owner's own signal handlers (deferred
 *    ranges): rcache_deferred.h;
 *  - the mappings snapshot and the unmap count: rcache_prot.h;
 *  - userfaultfd span: rcache_uffd.h;
 *  - fork: rcache_fork.h;
 *  - the cleanup thread: rcache_cleanup.h;
 *  - statistics: rcache_stats.h.
 * Inline helpers that need the whole cache are at the end of this file.
 *
 * Locking (see rcache.h for the public contract):
 *  - lock (spinlock with an owner): index, limits (LRU, tombstones),
 *    counters, in-flight registration, mappings snapshot.  Held only for
 *    short sections that never allocate, free, log or call user ops.
 *    The unmap handler (hook context) takes it, except when it runs in a
 *    signal handler of the thread that holds it: it then records the
 *    range (deferred) and the owner applies it before unlocking; lock-free
 *    hits see deferred ranges and take the locked path meanwhile.
 *  - the registration path (regpath, rcache_regpath.h): one thread at a
 *    time runs a miss; user ops may run while it is owned, waiters sleep;
 *    neither lookups nor the unmap handler take it.  A flag under the
 *    spinlock: a miss takes it in its first locked section and usually
 *    gives it back in its last one.
 *  - refcount: atomic; the index holds one reference.
 *  - leases (rcache_slot.h): a thread's own gets and puts of a region it
 *    leased count in its slot instead of the shared refcount.
 *  - hits take no lock: the thread's lease, else a candidate (the page's
 *    hint, else a racy index lookup), then a reference taken only from a
 *    non-zero count, then validation of the region (in the index, not
 *    invalidated, covering the request).  Region memory is type-stable
 *    (recycled through a pool, freed at destroy) and index arrays and hint
 *    tables are retired, never freed, while the cache lives, so racing
 *    reads are safe.
 */
#ifndef UCS_RCACHE_INT_H_
#define UCS_RCACHE_INT_H_

#include <ucs/debug/ucs_log.h>
#include <ucs/memory/rcache.h>
#include <ucs/datastruct/range_index.h>
#include "rcache_cleanup.h"
#include "rcache_deferred.h"
#include "rcache_fork.h"
#include "rcache_hints.h"
#include "rcache_inflight.h"
#include "rcache_limits.h"
#include "rcache_pool.h"
#include "rcache_prot.h"
#include "rcache_regpath.h"
#include "rcache_slot.h"
#include "rcache_stats.h"
#include "rcache_uffd.h"
#include <pthread.h>

/* Private region flags (next to UCS_RCACHE_REGION_FLAG_*), written under
 * the lock or before the region is in the index. */
#define UCS_RCACHE_REGION_FLAG_INVALID UCS_BIT(5) /* tombstone, in pending */
#define UCS_RCACHE_REGION_FLAG_DONTFORK                                        \
    UCS_BIT(6) /* pages counted MADV_DONTFORK */
#define UCS_RCACHE_REGION_FLAG_IN_LRU UCS_BIT(7) /* on limits.lru */

/* UCX_RCACHE_DONTFORK values */
enum {
    UCS_RCACHE_DONTFORK_NO,
    UCS_RCACHE_DONTFORK_YES,
    UCS_RCACHE_DONTFORK_AUTO
};

/* The cache's own fields of a region live in its internal fields (UCX
 * 1.13.1's layout: comp_list, lru_flags, priv; see rcache.h), so a region
 * takes region_struct_size bytes (rounded up to 8) and nothing more:
 *  - comp_list's 16 bytes: ucs_rcache_region_priv_t below;
 *  - lru_flags: nonzero if hit since the last LRU pass (second chance),
 *    stored by hits without the lock, cleared under it;
 *  - priv / pfn: the page frames recorded by CHECK_PFN (NULL: none), a
 *    malloc'd array whose first element is their count.
 * A hit reads super.start/end, refcount, prot, flags and lru_flags. */
typedef struct ucs_rcache_region_priv {
    struct ucs_rcache_comp *comps; /* (lock) invalidation callbacks, the
                                      newest first */
    uint32_t fork_gen;             /* cache fork generation at
                                      registration */
    uint32_t leaf;                 /* index leaf at insertion (removal
                                      hint) */
} ucs_rcache_region_priv_t;

_Static_assert(sizeof(ucs_rcache_region_priv_t) == sizeof(ucs_list_link_t),
               "the cache's region fields must fit in comp_list");

static inline ucs_rcache_region_priv_t *
ucs_rcache_region_priv(ucs_rcache_region_t *region)
{
    return (ucs_rcache_region_priv_t *)&region->comp_list;
}

/* Most page frames recorded per region. */
#define UCS_RCACHE_PFN_MAX UINT16_MAX

typedef struct ucs_rcache_comp {
    struct ucs_rcache_comp *next;
    ucs_rcache_invalidate_comp_func_t cb;
    void *arg;
} ucs_rcache_comp_t;

/* UCX_RCACHE_* values. */
typedef struct ucs_rcache_config {
    unsigned long max_regions;
    size_t max_size;
    size_t max_unreleased;
    unsigned mem_prio;
    int purge_on_fork;
    unsigned check_pfn; /* pages to check on hits, 0: off */
    int dontfork;       /* UCS_RCACHE_DONTFORK_* */
} ucs_rcache_config_t;

struct ucs_rcache {
    /* read by every hit, written at create and (pending_count) when an
     * unmap or an invalidation leaves a tombstone: a cache line of its own
     * (the offsets of pending_count and self matter: internals-stock-abi.md) */
    struct {
        size_t align_mask;           /* params.alignment - 1 */
        unsigned long pending_count; /* pending + orphans, read without
                                        lock (atomic); every put reads
                                        it (rcache.c: at this offset
                                        UCX's cache object is never 0) */
        size_t stride;               /* bytes of a region in a block:
                                        region_struct_size rounded up
                                        to 8 */
        ucs_rcache_hints_t *hints;   /* atomic: grown, see above */
        struct ucs_rcache *self;     /* the cache's own address while it
                                        lives: another library's cache
                                        object (rcache_stock.c) does not
                                        hold its own address here */
        unsigned check_pfn;          /* pages to check on hits, 0: off */
    } __attribute__((aligned(64))) hot;
    uintptr_t lock __attribute__((aligned(64))); /* owner
                              (ucs_rcache_self()), 0: free */
    ucs_rcache_deferred_t deferred;              /* rcache_deferred.h */
    ucs_rcache_regpath_t regpath;                /* rcache_regpath.h */
    ucs_range_index_t index;        /* valid regions and tombstones */
    ucs_rcache_limits_t limits;     /* rcache_limits.h */
    ucs_rcache_cleanup_t cleanup;   /* rcache_cleanup.h */
    ucs_rcache_inflight_t inflight; /* rcache_inflight.h */
    ucs_rcache_maps_t maps;         /* rcache_prot.h */
    ucs_rcache_fork_t fork;         /* rcache_fork.h */
    ucs_rcache_params_t params;
    int dontfork;                /* mark registered pages MADV_DONTFORK */
    int events;                  /* registered ucm events */
    ucs_rcache_uffd_t uffd;      /* rcache_uffd.h */
    ucs_rcache_counters_t stats; /* rcache_stats.h */
    ucs_rcache_pool_t pool;      /* rcache_pool.h */
    ucs_rcache_slot_t slots[UCS_RCACHE_SLOTS];
    char name[64];
};

/* Everything below is internal to libucs. */
#pragma GCC visibility push(hidden)

/* one line "[ucs rcache] <level>: ..." to stderr, no malloc (ucs_log) */
#define ucs_rcache_error(_fmt, ...) ucs_log_error("rcache", _fmt, ##__VA_ARGS__)
#define ucs_rcache_warn(_fmt, ...)  ucs_log_warn("rcache", _fmt, ##__VA_ARGS__)

/* rcache_config.c: read UCX_RCACHE_*; one error line per malformed value,
 * then UCS_ERR_INVALID_PARAM.  explicit_* tell whether a variable was set. */
ucs_status_t ucs_rcache_config_read(ucs_rcache_config_t *config,
                                    int *explicit_prio, int *explicit_purge);

/* The system page size, set by the first ucs_rcache_create() (before any
 * handler of a cache is installed, so hook context reads it set). */
extern size_t ucs_rcache_page_size;

/* rcache_pfn.c: page frames of npages pages from addr (0 if not present).
 * UCS_ERR_IO_ERROR if /proc/self/pagemap cannot be read. */
ucs_status_t ucs_rcache_pfn_read(ucs_pgt_addr_t addr, unsigned npages,
                                 unsigned long *pfns);
/* Record / verify region's frames (rcache->hot.check_pfn pages); no lock held.
 */
void ucs_rcache_pfn_record(ucs_rcache_t *rcache, ucs_rcache_region_t *region);
void ucs_rcache_pfn_verify(ucs_rcache_t *rcache, ucs_rcache_region_t *region);
/* Free what ucs_rcache_pfn_record() kept (see ucs_rcache_pfn_release). */
void ucs_rcache_pfn_free(ucs_rcache_t *rcache, ucs_rcache_region_t *region);

/* rcache_region.c (all "_locked" functions need rcache->lock) */
void ucs_rcache_region_tombstone_locked(ucs_rcache_t *rcache,
                                        ucs_rcache_region_t *region);
/* Tombstone every region of the index. */
void ucs_rcache_tombstone_all_locked(ucs_rcache_t *rcache);
/* Remove tombstones from the index; regions that lost their last reference
 * go to dead (tmp_list).  ucs_rcache_purge_locked() (below) skips the call
 * when there are none. */
void ucs_rcache_purge_pending_locked(ucs_rcache_t *rcache,
                                     ucs_list_link_t *dead);
/* Remove a valid region from the index (merge or eviction). */
void ucs_rcache_region_drop_locked(ucs_rcache_t *rcache,
                                   ucs_rcache_region_t *region,
                                   ucs_list_link_t *dead);
/* Evict unused regions (LRU first) until within limits; all if force. */
void ucs_rcache_evict_locked(ucs_rcache_t *rcache, int force,
                             ucs_list_link_t *dead);
/* Same, until one more region of size bytes fits (a miss, before its
 * registration). */
void ucs_rcache_evict_room_locked(ucs_rcache_t *rcache, size_t size,
                                  ucs_list_link_t *dead);
/* Deregister and free every region of dead, not empty (no lock held);
 * ucs_rcache_regions_release() (below) takes any. */
void ucs_rcache_regions_release_all(ucs_rcache_t *rcache,
                                    ucs_list_link_t *dead);
/* Same from the registration path (owned, not the lock): the
 * regions go to spare, without the lock; those with invalidation callbacks
 * stay in dead, for ucs_rcache_regions_release() once the path is given
 * back.  dead not empty; ucs_rcache_regions_recycle() (below) takes any. */
void ucs_rcache_regions_recycle_all(ucs_rcache_t *rcache,
                                    ucs_list_link_t *dead);
/* Deregister (if registered in this process) and free one region. */
void ucs_rcache_region_release(ucs_rcache_t *rcache,
                               ucs_rcache_region_t *region);
/* Purge under the lock, then release (no lock held). */
void ucs_rcache_purge(ucs_rcache_t *rcache);

/* rcache_get.c */
ucs_status_t ucs_rcache_get_slow(ucs_rcache_t *rcache, ucs_pgt_addr_t start,
                                 ucs_pgt_addr_t end, int prot, void *arg,
                                 ucs_rcache_region_t **region_p);

/* rcache_event.c: the ucm handler (hook context) */
void ucs_rcache_unmap_range(ucs_rcache_t *rcache, ucs_pgt_addr_t start,
                            ucs_pgt_addr_t end);
void ucs_rcache_event_cb(int event_type, void *event, void *arg);
/* Native events that unmap, seen after the system call. */
#define UCS_RCACHE_NATIVE_EVENTS                                               \
    (UCM_EVENT_MUNMAP | UCM_EVENT_MMAP | UCM_EVENT_MREMAP |                    \
     UCM_EVENT_MADVISE | UCM_EVENT_SBRK | UCM_EVENT_SHMDT | UCM_EVENT_BRK)
void ucs_rcache_native_after_cb(int event_type, void *event, void *arg);

/* rcache_dontfork.c: process-wide page counts (own mutex; never from the
 * hook; no cache lock held).  add: UCS_ERR_IO_ERROR if madvise fails,
 * UCS_ERR_NO_MEMORY; nothing stays marked on error. */
void ucs_rcache_dontfork_init(void);
int ucs_rcache_dontfork_needed(void);
ucs_status_t ucs_rcache_dontfork_add(ucs_pgt_addr_t start, ucs_pgt_addr_t end);
void ucs_rcache_dontfork_remove(ucs_pgt_addr_t start, ucs_pgt_addr_t end);
unsigned long ucs_rcache_dontfork_pages(void);

/* rcache_huge.c: a block of head + size bytes whose byte head is aligned
 * to UCS_RCACHE_HUGE_PAGE, mapped by the system (zeroed, no page touched
 * yet), the size bytes from there advised onto transparent huge pages (the
 * head stays on small pages: head 0 or a multiple of the page size); NULL
 * on no memory.  Freed with ucs_rcache_huge_free() and the same head and
 * size.  Not under the spinlock (the cache's own unmap handler sees the
 * system calls). */
#define UCS_RCACHE_HUGE_PAGE (2ul << 20)
void *ucs_rcache_huge_alloc(size_t head, size_t size);
void ucs_rcache_huge_free(void *block, size_t head, size_t size);

/* rcache_lock.c */
void ucs_rcache_lock(ucs_rcache_t *rcache);
/* --enable-debug: abort, with one log line naming func, unless the calling
 * thread holds rcache->lock.  Compiled away otherwise. */
void ucs_rcache_assert_owner(ucs_rcache_t *rcache, const char *func);
#ifdef UCS_ENABLE_ASSERT
#define ucs_rcache_assert_locked(_rcache)                                      \
    ucs_rcache_assert_owner(_rcache, __func__)
#else
#define ucs_rcache_assert_locked(_rcache) ((void)(_rcache))
#endif
void ucs_rcache_unlock(ucs_rcache_t *rcache);
/* Hook context: take the lock, or (owner interrupted) defer the range.
 * Returns 1 if the lock is now held. */
int ucs_rcache_lock_or_defer(ucs_rcache_t *rcache, ucs_pgt_addr_t start,
                             ucs_pgt_addr_t end);
/* rcache_event.c: tombstone what intersects [start, end) (lock held) */
void ucs_rcache_unmap_range_locked(ucs_rcache_t *rcache, ucs_pgt_addr_t start,
                                   ucs_pgt_addr_t end);

/* rcache_stock.c, in the preloadable stock-ABI library only
 * (UCS_RCACHE_STOCK_ABI): an entry point called with a cache that is not
 * ours (Debian's libucs calls its own entry points through its PLT, so its
 * caches reach ours) hands the call on to the next definition, that
 * library's.  Elsewhere UCS_RCACHE_FOREIGN() is 0 and compiles away. */
#ifdef UCS_RCACHE_STOCK_ABI
#define UCS_RCACHE_STOCK 1
#define UCS_RCACHE_FOREIGN(_rcache)                                            \
    ucs_unlikely((_rcache)->hot.self != (_rcache)) /* not NULL */
ucs_status_t ucs_rcache_stock_next_get(ucs_rcache_t *rcache, void *address,
                                       size_t length, int prot, void *arg,
                                       ucs_rcache_region_t **region_p);
void ucs_rcache_stock_next_put(ucs_rcache_t *rcache,
                               ucs_rcache_region_t *region);
void ucs_rcache_stock_next_hold(ucs_rcache_t *rcache,
                                ucs_rcache_region_t *region);
void ucs_rcache_stock_next_invalidate(ucs_rcache_t *rcache,
                                      ucs_rcache_region_t *region,
                                      ucs_rcache_invalidate_comp_func_t cb,
                                      void *arg);
void ucs_rcache_stock_next_destroy(ucs_rcache_t *rcache);
/* A cache of ours is created / about to be destroyed (UCM_RCACHE_STATS). */
void ucs_rcache_stock_created(ucs_rcache_t *rcache);
void ucs_rcache_stock_destroying(ucs_rcache_t *rcache);
#else
#define UCS_RCACHE_STOCK                      0
#define UCS_RCACHE_FOREIGN(_rcache)           0
#define ucs_rcache_stock_next_get(...)        UCS_ERR_UNSUPPORTED
#define ucs_rcache_stock_next_put(...)        ((void)0)
#define ucs_rcache_stock_next_hold(...)       ((void)0)
#define ucs_rcache_stock_next_invalidate(...) ((void)0)
#define ucs_rcache_stock_next_destroy(...)    ((void)0)
#define ucs_rcache_stock_created(_rcache)     ((void)(_rcache))
#define ucs_rcache_stock_destroying(_rcache)  ((void)(_rcache))
#endif

#define ucs_rcache_atomic_add(_p, _v)                                          \
    __atomic_add_fetch(_p, _v, __ATOMIC_ACQ_REL)
#define ucs_rcache_atomic_sub(_p, _v)                                          \
    __atomic_sub_fetch(_p, _v, __ATOMIC_ACQ_REL)
#define ucs_rcache_atomic_load(_p) __atomic_load_n(_p, __ATOMIC_ACQUIRE)
#define ucs_rcache_atomic_store(_p, _v)                                        \
    __atomic_store_n(_p, _v, __ATOMIC_RELEASE)

#pragma GCC visibility pop

/* Do [s1, e1) and [s2, e2) share an address? */
static inline int ucs_rcache_ranges_intersect(ucs_pgt_addr_t s1,
                                              ucs_pgt_addr_t e1,
                                              ucs_pgt_addr_t s2,
                                              ucs_pgt_addr_t e2)
{
    return (s1 < e2) && (s2 < e1);
}

static inline size_t ucs_rcache_region_size(const ucs_rcache_region_t *region)
{
    return region->super.end - region->super.start;
}

/* The registration path's inline steps (rcache_regpath.h): they need the
 * whole cache (its lock). */
static inline void ucs_rcache_regpath_take_locked(ucs_rcache_t *rcache)
{
    if (ucs_unlikely(rcache->regpath.owned)) {
        ucs_rcache_regpath_wait_locked(rcache);
    }
    rcache->regpath.owned = 1;
}

static inline void ucs_rcache_regpath_give_unlock(ucs_rcache_t *rcache)
{
    int wake = (rcache->regpath.waiters != 0);

    rcache->regpath.owned = 0;
    if (wake) {
        __atomic_store_n(&rcache->regpath.wake, rcache->regpath.wake + 1,
                         __ATOMIC_RELAXED);
    }
    ucs_rcache_unlock(rcache);
    if (ucs_unlikely(wake)) {
        ucs_rcache_regpath_wake(rcache);
    }
}

/* The calls of the miss path that usually have nothing to do, with that
 * test inline (the work stays out of line in the files named above). */
static inline void ucs_rcache_purge_locked(ucs_rcache_t *rcache,
                                           ucs_list_link_t *dead)
{
    if (rcache->hot.pending_count != 0) {
        ucs_rcache_purge_pending_locked(rcache, dead);
    }
}

static inline void ucs_rcache_regions_release(ucs_rcache_t *rcache,
                                              ucs_list_link_t *dead)
{
    if (!ucs_list_is_empty(dead)) {
        ucs_rcache_regions_release_all(rcache, dead);
    }
}

static inline void ucs_rcache_regions_recycle(ucs_rcache_t *rcache,
                                              ucs_list_link_t *dead)
{
    if (!ucs_list_is_empty(dead)) {
        ucs_rcache_regions_recycle_all(rcache, dead);
    }
}

/* Frames recorded by CHECK_PFN (region out of use). */
static inline void ucs_rcache_pfn_release(ucs_rcache_t *rcache,
                                          ucs_rcache_region_t *region)
{
    if (region->pfn != NULL) {
        ucs_rcache_pfn_free(rcache, region);
    }
}

/* The cleanup thread (rcache_cleanup.h), when MAX_UNRELEASED asks for one
 * and this process has none running yet (registration path owned). */
static inline ucs_status_t ucs_rcache_cleanup_start(ucs_rcache_t *rcache)
{
    if ((rcache->limits.max_unreleased == SIZE_MAX) ||
        (rcache->cleanup.running &&
         (rcache->cleanup.fork_gen == rcache->fork.gen))) {
        return UCS_OK;
    }
    return ucs_rcache_cleanup_launch(rcache);
}

#endif
