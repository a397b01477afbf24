/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Index of non-overlapping address ranges (ucs_pgt_region_t*): a B+tree
 * keyed by range end, nodes of eight cache lines (31 entries), held in
 * chunks addressed by 32-bit node numbers.
 *
 * Contract:
 *  - entries never overlap; the caller guarantees it (insert does not check);
 *  - writers (insert, remove) are serialized by the caller and never
 *    allocate: insert takes nodes reserved beforehand with
 *    ucs_range_index_grow_alloc() (no lock held, may allocate) and
 *    ucs_range_index_grow_install() (under the caller's lock), so every
 *    function except those two and cleanup is safe under a spinlock and in
 *    hook context;
 *  - lock-free readers may call ucs_range_index_find_racy() at any time:
 *    node memory is kept until ucs_range_index_cleanup(), every read stays
 *    inside it, and a sequence count (odd while a writer works) rejects a
 *    view that changed during the search.  The region returned was in the
 *    index at some recent moment: the caller validates it (it may have been
 *    removed since, so region memory must stay readable, e.g. type-stable).
 */
#ifndef UCS_RANGE_INDEX_H_
#define UCS_RANGE_INDEX_H_

#include <ucs/datastruct/pgtable.h>
#include <ucs/type/status.h>
#include <stddef.h>

BEGIN_C_DECLS

#define UCS_RANGE_INDEX_FANOUT      31 /* entries per node */
#define UCS_RANGE_INDEX_CHUNK_SHIFT 9  /* nodes per chunk: 512 (256 KiB) */
#define UCS_RANGE_INDEX_CHUNK_NODES (1u << UCS_RANGE_INDEX_CHUNK_SHIFT)
#define UCS_RANGE_INDEX_MAX_CHUNKS  8192 /* 4M nodes, > 60M entries */
#define UCS_RANGE_INDEX_MAX_HEIGHT  16

/* keys[i]: leaf: end of entry i; inner: largest end under child i.
 * Unused keys hold ~0, so a fixed 32-key search needs no count.
 * vals[i]: leaf: ucs_pgt_region_t*; inner: child node number.
 * The keys come first: four whole cache lines, one per block of eight. */
typedef struct ucs_range_index_node {
    ucs_pgt_addr_t keys[UCS_RANGE_INDEX_FANOUT + 1];
    uintptr_t vals[UCS_RANGE_INDEX_FANOUT];
    uint16_t count;
    uint16_t level; /* 0: leaf */
    uint32_t next;  /* free list */
} __attribute__((aligned(64))) ucs_range_index_node_t;

typedef struct ucs_range_index {
    unsigned long seq;  /* odd while a writer changes the tree */
    uint32_t root;      /* node number, 0: empty */
    uint32_t height;    /* levels, 0: empty */
    size_t count;       /* entries */
    uint32_t free_head; /* freed nodes */
    uint32_t free_count;
    uint32_t bump; /* first never-used node number */
    uint32_t nchunks;
    ucs_range_index_node_t *chunks[UCS_RANGE_INDEX_MAX_CHUNKS];
} ucs_range_index_t;

/* Position of an entry, for walking in address order. */
typedef struct ucs_range_index_iter {
    uint32_t node;
    uint32_t slot;
    ucs_pgt_addr_t key;
} ucs_range_index_iter_t;

/* Chunk allocated outside the lock for a later install. */
typedef struct ucs_range_index_spare {
    ucs_range_index_node_t *chunk;
} ucs_range_index_spare_t;

void ucs_range_index_init(ucs_range_index_t *index);

/* Free the nodes (entries are not touched).  Not under a spinlock. */
void ucs_range_index_cleanup(ucs_range_index_t *index);

/* Node number idx; inside node memory for any idx (racy readers). */
static inline const ucs_range_index_node_t *
ucs_range_index_node_racy(const ucs_range_index_t *index, uint32_t idx)
{
    const ucs_range_index_node_t *chunk;

    chunk =
        __atomic_load_n(&index->chunks[(idx >> UCS_RANGE_INDEX_CHUNK_SHIFT) %
                                       UCS_RANGE_INDEX_MAX_CHUNKS],
                        __ATOMIC_ACQUIRE);
    if (chunk == NULL) {
        return NULL;
    }
    return &chunk[idx & (UCS_RANGE_INDEX_CHUNK_NODES - 1)];
}

/* Slot of the first key above addr among keys 0..30 of node (0..31): the
 * last keys of the first three lines choose the line, then seven
 * independent compares inside it (keys[31] is always ~0). */
static inline unsigned
ucs_range_index_node_upper(const ucs_range_index_node_t *node,
                           ucs_pgt_addr_t addr)
{
    const volatile ucs_pgt_addr_t *keys = node->keys;
    unsigned pos;

    pos = 8 * ((keys[7] <= addr) + (keys[15] <= addr) + (keys[23] <= addr));
    keys += pos;
    pos += (keys[0] <= addr) + (keys[1] <= addr) + (keys[2] <= addr) +
           (keys[3] <= addr) + (keys[4] <= addr) + (keys[5] <= addr) +
           (keys[6] <= addr);
    return pos;
}

/* Lock-free lookup racing with writers: the entry whose end is the first
 * above addr at some recent moment, or NULL (also when the tree changed
 * during the search).  Entries ending at ~0 are not found.  The caller
 * checks start <= addr and validates. */
static inline ucs_pgt_region_t *
ucs_range_index_find_racy(const ucs_range_index_t *index, ucs_pgt_addr_t addr)
{
    const ucs_range_index_node_t *node;
    unsigned long seq;
    unsigned level, slot;
    uintptr_t val;

    seq = __atomic_load_n(&index->seq, __ATOMIC_ACQUIRE);
    if (seq & 1) {
        return NULL;
    }
    level = __atomic_load_n(&index->height, __ATOMIC_RELAXED);
    val   = __atomic_load_n(&index->root, __ATOMIC_RELAXED);
    if ((level == 0) || (level > UCS_RANGE_INDEX_MAX_HEIGHT)) {
        return NULL;
    }
    /* past the root's last end: nothing (ascending registrations) */
    node = ucs_range_index_node_racy(index, (uint32_t)val);
    if (node == NULL) {
        return NULL;
    }
    slot = *(const volatile uint16_t *)&node->count;
    if ((slot - 1u >= UCS_RANGE_INDEX_FANOUT) ||
        (*(const volatile ucs_pgt_addr_t *)&node->keys[slot - 1] <= addr)) {
        return NULL;
    }
    for (;;) {
        node = ucs_range_index_node_racy(index, (uint32_t)val);
        if (node == NULL) {
            return NULL;
        }
        /* all lines at once: a node out of the caches costs one miss */
        __builtin_prefetch(&node->keys[8]);
        __builtin_prefetch(&node->keys[16]);
        __builtin_prefetch(&node->keys[24]);
        __builtin_prefetch(&node->vals[0]);
        __builtin_prefetch(&node->vals[8]);
        __builtin_prefetch(&node->vals[16]);
        __builtin_prefetch(&node->vals[24]);
        slot = ucs_range_index_node_upper(node, addr);
        /* no key above addr: past the node's last entry (an unused key) */
        if ((slot >= UCS_RANGE_INDEX_FANOUT) ||
            (*(const volatile ucs_pgt_addr_t *)&node->keys[slot] ==
             ~(ucs_pgt_addr_t)0)) {
            return NULL;
        }
        val = *(const volatile uintptr_t *)&node->vals[slot];
        if (--level == 0) {
            break;
        }
    }
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&index->seq, __ATOMIC_RELAXED) != seq) {
        return NULL;
    }
    return (ucs_pgt_region_t *)val;
}

/* First entry whose end is above addr (NULL if none); sets iter for
 * ucs_range_index_next().  Writers' view (caller's lock held). */
ucs_pgt_region_t *ucs_range_index_lower(const ucs_range_index_t *index,
                                        ucs_pgt_addr_t addr,
                                        ucs_range_index_iter_t *iter);

/* Entry after the one iter is at, or NULL.  The index must not have
 * changed since iter was set. */
ucs_pgt_region_t *ucs_range_index_next(const ucs_range_index_t *index,
                                       ucs_range_index_iter_t *iter);

/* Entry containing addr, or NULL (caller's lock held). */
static inline ucs_pgt_region_t *
ucs_range_index_find(const ucs_range_index_t *index, ucs_pgt_addr_t addr)
{
    ucs_range_index_iter_t iter;
    ucs_pgt_region_t *region = ucs_range_index_lower(index, addr, &iter);

    return ((region != NULL) && (region->start <= addr)) ? region : NULL;
}

/* Number of free nodes an insertion may need; grow before inserting when
 * ucs_range_index_free_nodes() is below it. */
static inline unsigned
ucs_range_index_insert_needs(const ucs_range_index_t *index)
{
    return index->height + 2;
}

static inline unsigned
ucs_range_index_free_nodes(const ucs_range_index_t *index)
{
    uint32_t total = index->nchunks * UCS_RANGE_INDEX_CHUNK_NODES;

    return index->free_count +
           ((total > index->bump) ? total - index->bump : 0);
}

/* Insert region; at least ucs_range_index_insert_needs() nodes must be
 * free.  Never allocates.  Returns the leaf it went into: a hint for
 * ucs_range_index_remove_hinted() (entries move on later splits and
 * merges; a stale hint only costs the walk from the root). */
uint32_t ucs_range_index_insert(ucs_range_index_t *index,
                                ucs_pgt_region_t *region);

/* Remove region if present; returns 1 if it was found.  Never allocates. */
int ucs_range_index_remove(ucs_range_index_t *index, ucs_pgt_region_t *region);

/* Same, trying leaf (any value) first: when region is there and is not
 * the leaf's last entry, the parents are unchanged and no walk is needed.
 * The leaf's first live entry (the oldest for ascending registrations) is
 * only marked removed (key 0, passed over by searches; the slot is reused
 * by an insertion in front and dropped before the leaf splits or merges);
 * another one moves the entries after it while at least three stay (the
 * leaf may stay below the merge threshold until a removal from the root
 * passes there). */
int ucs_range_index_remove_hinted(ucs_range_index_t *index,
                                  ucs_pgt_region_t *region, uint32_t leaf);

/* Allocate a chunk of nodes (no lock held).  UCS_ERR_NO_MEMORY (also when
 * the index is at its largest size); spare is written only on success. */
ucs_status_t ucs_range_index_grow_alloc(const ucs_range_index_t *index,
                                        ucs_range_index_spare_t *spare);

/* Under the caller's lock: add spare's nodes if they are still needed (the
 * spare is then emptied); otherwise spare is left to be freed. */
void ucs_range_index_grow_install(ucs_range_index_t *index,
                                  ucs_range_index_spare_t *spare);

/* Free a spare chunk that was not installed (no lock held). */
void ucs_range_index_spare_free(ucs_range_index_spare_t *spare);

END_C_DECLS

#endif
