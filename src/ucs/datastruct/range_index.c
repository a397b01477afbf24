/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Range index B+tree: insertion (splitting full nodes on the way down),
 * removal (merging small neighbours on the way up), walking, and node
 * chunks allocated in two phases.
 */
#include "range_index.h"

#include <stdlib.h>
#include <string.h>

#define UCS_RANGE_INDEX_HALF ((UCS_RANGE_INDEX_FANOUT + 1) / 2)
#define UCS_RANGE_INDEX_MIN  (UCS_RANGE_INDEX_FANOUT / 4)
/* A hinted removal leaves at least this many entries (leaves below
 * UCS_RANGE_INDEX_MIN are merged by the next removal from the root). */
#define UCS_RANGE_INDEX_HINT_MIN 3
#define UCS_RANGE_INDEX_NONE     (~(ucs_pgt_addr_t)0)
/* Key of an entry removed from the front of a leaf (no range ends at 0):
 * below every address, so searches pass over it; the entries after it
 * keep their slots.  Only leaves hold these, only before their first live
 * entry, and a leaf always keeps a live last entry (its parent's key). */
#define UCS_RANGE_INDEX_GONE ((ucs_pgt_addr_t)0)

static inline ucs_range_index_node_t *
ucs_range_index_node(ucs_range_index_t *index, uint32_t idx)
{
    return &index->chunks[idx >> UCS_RANGE_INDEX_CHUNK_SHIFT]
                         [idx & (UCS_RANGE_INDEX_CHUNK_NODES - 1)];
}

static inline const ucs_range_index_node_t *
ucs_range_index_cnode(const ucs_range_index_t *index, uint32_t idx)
{
    return &index->chunks[idx >> UCS_RANGE_INDEX_CHUNK_SHIFT]
                         [idx & (UCS_RANGE_INDEX_CHUNK_NODES - 1)];
}

/* Writers bracket every change; readers compare the count. */
static void ucs_range_index_write_begin(ucs_range_index_t *index)
{
    __atomic_store_n(&index->seq, index->seq + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
}

static void ucs_range_index_write_end(ucs_range_index_t *index)
{
    __atomic_store_n(&index->seq, index->seq + 1, __ATOMIC_RELEASE);
}

void ucs_range_index_init(ucs_range_index_t *index)
{
    memset(index, 0, sizeof(*index));
    index->bump = 1; /* node number 0 means "none" */
}

void ucs_range_index_cleanup(ucs_range_index_t *index)
{
    uint32_t i;

    for (i = 0; i < index->nchunks; ++i) {
        free(index->chunks[i]);
    }
    ucs_range_index_init(index);
}

static uint32_t ucs_range_index_node_alloc(ucs_range_index_t *index,
                                           unsigned level)
{
    ucs_range_index_node_t *node;
    uint32_t idx;
    unsigned i;

    if (index->free_head != 0) {
        idx              = index->free_head;
        node             = ucs_range_index_node(index, idx);
        index->free_head = node->next;
        --index->free_count;
    } else {
        idx  = index->bump++;
        node = ucs_range_index_node(index, idx);
    }
    node->count = 0;
    node->level = level;
    node->next  = 0;
    for (i = 0; i <= UCS_RANGE_INDEX_FANOUT; ++i) {
        node->keys[i] = UCS_RANGE_INDEX_NONE;
    }
    return idx;
}

static void ucs_range_index_node_free(ucs_range_index_t *index, uint32_t idx)
{
    ucs_range_index_node_t *node = ucs_range_index_node(index, idx);

    node->count      = 0;
    node->next       = index->free_head;
    index->free_head = idx;
    ++index->free_count;
}

/* Slot of the first key >= key (count if none). */
static unsigned ucs_range_index_node_lower(const ucs_range_index_node_t *node,
                                           ucs_pgt_addr_t key)
{
    return (key == 0) ? 0 : ucs_range_index_node_upper(node, key - 1);
}

static void ucs_range_index_slot_insert(ucs_range_index_node_t *node,
                                        unsigned slot, ucs_pgt_addr_t key,
                                        uintptr_t val)
{
    unsigned n = node->count - slot;

    if (n > 0) { /* appending (ascending registrations) moves nothing */
        memmove(&node->keys[slot + 1], &node->keys[slot],
                n * sizeof(node->keys[0]));
        memmove(&node->vals[slot + 1], &node->vals[slot],
                n * sizeof(node->vals[0]));
    }
    node->keys[slot] = key;
    node->vals[slot] = val;
    ++node->count;
}

static void ucs_range_index_slot_remove(ucs_range_index_node_t *node,
                                        unsigned slot)
{
    unsigned n = node->count - slot - 1;

    if (n > 0) {
        memmove(&node->keys[slot], &node->keys[slot + 1],
                n * sizeof(node->keys[0]));
        memmove(&node->vals[slot], &node->vals[slot + 1],
                n * sizeof(node->vals[0]));
    }
    --node->count;
    node->keys[node->count] = UCS_RANGE_INDEX_NONE;
}

/* Drop the removed entries at the front of a leaf (before a split, a
 * merge or a removal that changes the structure); returns how many. */
static unsigned ucs_range_index_compact(ucs_range_index_node_t *node)
{
    unsigned gone = 0, i;

    while ((gone < node->count) && (node->keys[gone] == UCS_RANGE_INDEX_GONE)) {
        ++gone;
    }
    if (gone == 0) {
        return 0;
    }
    node->count -= gone;
    for (i = 0; i < node->count; ++i) {
        node->keys[i] = node->keys[i + gone];
        node->vals[i] = node->vals[i + gone];
    }
    for (; i < node->count + gone; ++i) {
        node->keys[i] = UCS_RANGE_INDEX_NONE;
    }
    return gone;
}

/* Whether node (a child about to be descended into) is full, after
 * dropping its removed front entries. */
static int ucs_range_index_full(ucs_range_index_node_t *node)
{
    if (node->count < UCS_RANGE_INDEX_FANOUT) {
        return 0;
    }
    return (node->level > 0) || (ucs_range_index_compact(node) == 0);
}

/* Split the full child at parent's slot into two (parent has room).  The
 * key about to be inserted beyond either end of the child (ascending or
 * descending registrations) leaves the other part full. */
static void ucs_range_index_split(ucs_range_index_t *index,
                                  ucs_range_index_node_t *parent, unsigned slot,
                                  ucs_pgt_addr_t key)
{
    ucs_range_index_node_t *left =
        ucs_range_index_node(index, parent->vals[slot]);
    uint32_t right_idx = ucs_range_index_node_alloc(index, left->level);
    ucs_range_index_node_t *right = ucs_range_index_node(index, right_idx);
    unsigned keep, moved, i;

    if (key > left->keys[left->count - 1]) {
        keep = left->count - 1;
    } else if (key < left->keys[0]) {
        keep = 1;
    } else {
        keep = UCS_RANGE_INDEX_HALF;
    }
    moved = left->count - keep;
    memcpy(right->keys, &left->keys[keep], moved * sizeof(right->keys[0]));
    memcpy(right->vals, &left->vals[keep], moved * sizeof(right->vals[0]));
    right->count = moved;
    left->count  = keep;
    for (i = keep; i < UCS_RANGE_INDEX_FANOUT; ++i) {
        left->keys[i] = UCS_RANGE_INDEX_NONE;
    }
    ucs_range_index_slot_insert(parent, slot + 1, parent->keys[slot],
                                right_idx);
    parent->keys[slot] = left->keys[keep - 1];
}

uint32_t ucs_range_index_insert(ucs_range_index_t *index,
                                ucs_pgt_region_t *region)
{
    ucs_pgt_addr_t key = region->end;
    ucs_range_index_node_t *node, *root;
    uint32_t root_idx, idx;
    unsigned slot;

    ucs_range_index_write_begin(index);
    if (index->root == 0) {
        index->root   = ucs_range_index_node_alloc(index, 0);
        index->height = 1;
    }
    idx  = index->root;
    node = ucs_range_index_node(index, idx);
    if (ucs_range_index_full(node)) {
        root_idx      = ucs_range_index_node_alloc(index, index->height);
        root          = ucs_range_index_node(index, root_idx);
        root->keys[0] = node->keys[node->count - 1];
        root->vals[0] = index->root;
        root->count   = 1;
        ucs_range_index_split(index, root, 0, key);
        index->root = root_idx;
        ++index->height;
        idx  = root_idx;
        node = root;
    }
    while (node->level > 0) {
        /* inner nodes are never empty; an end above the last one (ascending
         * registrations) needs no search */
        if (key > node->keys[node->count - 1]) {
            slot             = node->count - 1;
            node->keys[slot] = key; /* new largest end below this child */
        } else {
            slot = ucs_range_index_node_lower(node, key);
        }
        if (ucs_range_index_full(
                ucs_range_index_node(index, node->vals[slot]))) {
            ucs_range_index_split(index, node, slot, key);
            if (key > node->keys[slot]) {
                ++slot;
            }
        }
        idx  = node->vals[slot];
        node = ucs_range_index_node(index, idx);
    }
    slot = ((node->count > 0) && (key > node->keys[node->count - 1]))
               ? node->count
               : ucs_range_index_node_lower(node, key);
    if ((slot > 0) && (node->keys[slot - 1] == UCS_RANGE_INDEX_GONE)) {
        /* in front of the live entries: reuse a removed slot */
        node->keys[slot - 1] = key;
        node->vals[slot - 1] = (uintptr_t)region;
    } else {
        ucs_range_index_slot_insert(node, slot, key, (uintptr_t)region);
    }
    ++index->count;
    ucs_range_index_write_end(index);
    return idx;
}

/* Merge the children at slot and slot + 1 if both fit in one: the smaller
 * moves into the larger, which keeps its node number (fewer entries move,
 * and removal hints of the larger stay good). */
static void ucs_range_index_try_merge(ucs_range_index_t *index,
                                      ucs_range_index_node_t *parent,
                                      unsigned slot)
{
    ucs_range_index_node_t *left, *right;
    uint32_t left_idx, right_idx;
    unsigned n;

    if (slot + 1 >= parent->count) {
        return;
    }
    left_idx  = parent->vals[slot];
    right_idx = parent->vals[slot + 1];
    left      = ucs_range_index_node(index, left_idx);
    right     = ucs_range_index_node(index, right_idx);
    if (left->level == 0) {
        ucs_range_index_compact(left);
        ucs_range_index_compact(right);
    }
    if (left->count + right->count > UCS_RANGE_INDEX_FANOUT) {
        return;
    }
    if (left->count >= right->count) {
        memcpy(&left->keys[left->count], right->keys,
               right->count * sizeof(left->keys[0]));
        memcpy(&left->vals[left->count], right->vals,
               right->count * sizeof(left->vals[0]));
        left->count += right->count;
        parent->keys[slot] = parent->keys[slot + 1];
        ucs_range_index_slot_remove(parent, slot + 1);
        ucs_range_index_node_free(index, right_idx);
        return;
    }
    n = left->count;
    memmove(&right->keys[n], right->keys,
            right->count * sizeof(right->keys[0]));
    memmove(&right->vals[n], right->vals,
            right->count * sizeof(right->vals[0]));
    memcpy(right->keys, left->keys, n * sizeof(right->keys[0]));
    memcpy(right->vals, left->vals, n * sizeof(right->vals[0]));
    right->count += n;
    ucs_range_index_slot_remove(parent, slot); /* right's key moves down */
    ucs_range_index_node_free(index, left_idx);
}

int ucs_range_index_remove(ucs_range_index_t *index, ucs_pgt_region_t *region)
{
    ucs_pgt_addr_t key = region->end;
    uint32_t path[UCS_RANGE_INDEX_MAX_HEIGHT];
    unsigned slots[UCS_RANGE_INDEX_MAX_HEIGHT];
    ucs_range_index_node_t *node, *parent;
    unsigned level, slot;
    uint32_t idx;

    if (index->root == 0) {
        return 0;
    }
    idx = index->root;
    for (level = index->height; level-- > 0;) {
        node         = ucs_range_index_node(index, idx);
        slot         = ucs_range_index_node_lower(node, key);
        path[level]  = idx;
        slots[level] = slot;
        if (slot >= node->count) {
            return 0;
        }
        idx = node->vals[slot];
    }
    node = ucs_range_index_node(index, path[0]);
    if ((node->keys[slots[0]] != key) ||
        (node->vals[slots[0]] != (uintptr_t)region)) {
        return 0;
    }

    ucs_range_index_write_begin(index);
    ucs_range_index_slot_remove(node, slots[0] - ucs_range_index_compact(node));
    --index->count;
    for (level = 0; level + 1 < index->height; ++level) {
        node   = ucs_range_index_node(index, path[level]);
        parent = ucs_range_index_node(index, path[level + 1]);
        slot   = slots[level + 1];
        if (node->count == 0) {
            ucs_range_index_slot_remove(parent, slot);
            ucs_range_index_node_free(index, path[level]);
            continue;
        }
        parent->keys[slot] = node->keys[node->count - 1];
        if (node->count < UCS_RANGE_INDEX_MIN) {
            if (slot > 0) {
                ucs_range_index_try_merge(index, parent, slot - 1);
            } else {
                ucs_range_index_try_merge(index, parent, slot);
            }
        }
    }
    /* shrink from the top */
    for (;;) {
        node = ucs_range_index_node(index, index->root);
        if (node->count == 0) {
            ucs_range_index_node_free(index, index->root);
            index->root   = 0;
            index->height = 0;
            break;
        }
        if ((node->level == 0) || (node->count > 1)) {
            break;
        }
        idx         = index->root;
        index->root = node->vals[0];
        --index->height;
        ucs_range_index_node_free(index, idx);
    }
    ucs_range_index_write_end(index);
    return 1;
}

int ucs_range_index_remove_hinted(ucs_range_index_t *index,
                                  ucs_pgt_region_t *region, uint32_t leaf)
{
    ucs_range_index_node_t *node;
    unsigned slot;

    if ((leaf != 0) && (leaf < index->bump)) {
        node = ucs_range_index_node(index, leaf);
        slot = ucs_range_index_node_lower(node, region->end);
        if ((node->level == 0) && (slot + 1 < node->count) &&
            (node->vals[slot] == (uintptr_t)region) &&
            (node->keys[slot] == region->end)) {
            if ((slot == 0) || (node->keys[slot - 1] == UCS_RANGE_INDEX_GONE)) {
                /* the first live entry (the oldest, for ascending
                 * registrations): nothing moves */
                ucs_range_index_write_begin(index);
                node->keys[slot] = UCS_RANGE_INDEX_GONE;
                --index->count;
                ucs_range_index_write_end(index);
                return 1;
            }
            if (node->count > UCS_RANGE_INDEX_HINT_MIN) {
                ucs_range_index_write_begin(index);
                ucs_range_index_slot_remove(node, slot);
                --index->count;
                ucs_range_index_write_end(index);
                return 1;
            }
        }
    }
    return ucs_range_index_remove(index, region);
}

ucs_pgt_region_t *ucs_range_index_lower(const ucs_range_index_t *index,
                                        ucs_pgt_addr_t addr,
                                        ucs_range_index_iter_t *iter)
{
    const ucs_range_index_node_t *node;
    unsigned level, slot;
    uint32_t idx = index->root;

    if (idx == 0) {
        return NULL;
    }
    node = ucs_range_index_cnode(index, idx);
    if (node->keys[node->count - 1] <= addr) {
        return NULL; /* past the last end (ascending registrations) */
    }
    for (level = index->height;;) {
        node = ucs_range_index_cnode(index, idx);
        slot = ucs_range_index_node_upper(node, addr);
        if (slot >= node->count) {
            return NULL;
        }
        if (--level == 0) {
            break;
        }
        idx = node->vals[slot];
    }
    iter->node = idx;
    iter->slot = slot;
    iter->key  = node->keys[slot];
    return (ucs_pgt_region_t *)node->vals[slot];
}

ucs_pgt_region_t *ucs_range_index_next(const ucs_range_index_t *index,
                                       ucs_range_index_iter_t *iter)
{
    const ucs_range_index_node_t *node =
        ucs_range_index_cnode(index, iter->node);

    if (iter->slot + 1 < node->count) {
        ++iter->slot;
        iter->key = node->keys[iter->slot];
        return (ucs_pgt_region_t *)node->vals[iter->slot];
    }
    /* next leaf: search again from the root */
    return ucs_range_index_lower(index, iter->key, iter);
}

ucs_status_t ucs_range_index_grow_alloc(const ucs_range_index_t *index,
                                        ucs_range_index_spare_t *spare)
{
    ucs_range_index_node_t *chunk;

    if (index->nchunks >= UCS_RANGE_INDEX_MAX_CHUNKS) {
        return UCS_ERR_NO_MEMORY;
    }
    chunk = aligned_alloc(64, sizeof(*chunk) * UCS_RANGE_INDEX_CHUNK_NODES);
    if (chunk == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    spare->chunk = chunk;
    return UCS_OK;
}

void ucs_range_index_grow_install(ucs_range_index_t *index,
                                  ucs_range_index_spare_t *spare)
{
    if ((spare->chunk == NULL) ||
        (index->nchunks >= UCS_RANGE_INDEX_MAX_CHUNKS) ||
        (ucs_range_index_free_nodes(index) >=
         ucs_range_index_insert_needs(index))) {
        return;
    }
    /* nodes of the previous chunk never used go to the free list */
    while ((index->nchunks > 0) &&
           (index->bump < index->nchunks * UCS_RANGE_INDEX_CHUNK_NODES)) {
        ucs_range_index_node_free(index, index->bump++);
    }
    __atomic_store_n(&index->chunks[index->nchunks], spare->chunk,
                     __ATOMIC_RELEASE);
    ++index->nchunks;
    spare->chunk = NULL;
}

void ucs_range_index_spare_free(ucs_range_index_spare_t *spare)
{
    free(spare->chunk);
    spare->chunk = NULL;
}
