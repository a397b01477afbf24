/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Range index: random insertions and removals against std::map.
 */
#include <ucs/datastruct/range_index.h>
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

namespace
{

class range_index : public ::testing::Test
{
  protected:
    ucs_range_index_t m_index;

    void SetUp() override
    {
        ucs_range_index_init(&m_index);
    }

    /* n ranges of a page, a page apart */
    static std::vector<ucs_pgt_region_t> spaced_slots(size_t n)
    {
        std::vector<ucs_pgt_region_t> slots(n);
        for (size_t i = 0; i < n; ++i) {
            slots[i].start = 0x1000 + i * 0x2000;
            slots[i].end   = slots[i].start + 0x1000;
        }
        return slots;
    }
    void TearDown() override
    {
        ucs_range_index_cleanup(&m_index);
    }

    /* hints: 0 plain removal, 1 the leaf insert returned (and the index
     * drained by hints at the end), 2 any number */
    void random_ops(size_t nslots, int nops, unsigned seed, int hints = 0);

    /* remove what is left, by the leaf each entry is found in now */
    void check_all_removed_hinted()
    {
        ucs_range_index_iter_t iter;
        ucs_pgt_region_t *r;
        while ((r = ucs_range_index_lower(&m_index, 0, &iter)) != nullptr) {
            ASSERT_EQ(1, ucs_range_index_remove_hinted(&m_index, r, iter.node));
        }
        EXPECT_EQ(0u, m_index.count);
        EXPECT_EQ(0u, m_index.height);
    }

    void reserve()
    {
        ucs_range_index_spare_t spare = {nullptr};
        if (ucs_range_index_free_nodes(&m_index) >=
            ucs_range_index_insert_needs(&m_index)) {
            return;
        }
        ASSERT_EQ(UCS_OK, ucs_range_index_grow_alloc(&m_index, &spare));
        ucs_range_index_grow_install(&m_index, &spare);
        ucs_range_index_spare_free(&spare);
    }

    const ucs_range_index_node_t *node(uint32_t idx) const
    {
        return &m_index.chunks[idx / UCS_RANGE_INDEX_CHUNK_NODES]
                              [idx % UCS_RANGE_INDEX_CHUNK_NODES];
    }

    /* The tree's invariants below node idx at level; returns the live
     * entries under it and sets last to its largest end.  Leaves may start
     * with removed entries (key 0), never end with one. */
    size_t check_node(uint32_t idx, unsigned level, ucs_pgt_addr_t &last) const
    {
        const ucs_range_index_node_t *n = node(idx);
        size_t live = 0, i = 0;
        ucs_pgt_addr_t prev = 0, child_last;

        EXPECT_EQ(level, n->level);
        EXPECT_GE(n->count, 1u);
        EXPECT_LE(n->count, (unsigned)UCS_RANGE_INDEX_FANOUT);
        if (level == 0) {
            while ((i < n->count) && (n->keys[i] == 0)) {
                ++i;
            }
            EXPECT_LT(i, n->count) << "a leaf of removed entries only";
        }
        for (; i < n->count; ++i) {
            EXPECT_GT(n->keys[i], prev) << "node " << idx << " slot " << i;
            prev = n->keys[i];
            if (level == 0) {
                EXPECT_EQ(n->keys[i], ((ucs_pgt_region_t *)n->vals[i])->end);
                ++live;
            } else {
                live += check_node(n->vals[i], level - 1, child_last);
                EXPECT_EQ(n->keys[i], child_last) << "node " << idx;
            }
        }
        for (i = n->count; i <= UCS_RANGE_INDEX_FANOUT; ++i) {
            EXPECT_EQ(~(ucs_pgt_addr_t)0, n->keys[i]);
        }
        last = prev;
        return live;
    }

    void check_structure() const
    {
        ucs_pgt_addr_t last;
        if (m_index.height == 0) {
            EXPECT_EQ(0u, m_index.count);
            return;
        }
        EXPECT_EQ(m_index.count,
                  check_node(m_index.root, m_index.height - 1, last));
    }

    /* walk in address order against the reference */
    void check(const std::map<ucs_pgt_addr_t, ucs_pgt_region_t *> &ref)
    {
        ucs_range_index_iter_t iter;
        check_structure();
        ASSERT_EQ(ref.size(), m_index.count);
        ucs_pgt_region_t *r = ucs_range_index_lower(&m_index, 0, &iter);
        for (auto &kv : ref) {
            ASSERT_EQ(kv.second, r);
            r = ucs_range_index_next(&m_index, &iter);
        }
        ASSERT_EQ(nullptr, r);
    }
};

} // namespace

TEST_F(range_index, random_against_map)
{
    random_ops(4096, 100000, 7);
}

/* many entries: several levels, splits and merges at every level */
TEST_F(range_index, deep_random_against_map)
{
    random_ops(60000, 300000, 11);
    EXPECT_GE(m_index.height, 3u);
}

/* fill, then empty in address order and in reverse: the tree shrinks back */
TEST_F(range_index, fill_and_drain)
{
    std::vector<ucs_pgt_region_t> slots(20000);
    std::map<ucs_pgt_addr_t, ucs_pgt_region_t *> ref;
    for (int pass = 0; pass < 2; ++pass) {
        for (size_t i = 0; i < slots.size(); ++i) {
            slots[i].start = 0x1000 + i * 0x40;
            slots[i].end   = slots[i].start + 0x40; /* adjacent ranges */
            reserve();
            ucs_range_index_insert(&m_index, &slots[i]);
            ref[slots[i].start] = &slots[i];
        }
        check(ref);
        for (size_t k = 0; k < slots.size(); ++k) {
            size_t i           = pass ? slots.size() - 1 - k : k;
            ucs_pgt_addr_t mid = slots[i].start + 0x20;
            ASSERT_EQ(&slots[i], ucs_range_index_find(&m_index, mid));
            ASSERT_EQ(&slots[i], ucs_range_index_find_racy(&m_index, mid));
            ASSERT_EQ(1, ucs_range_index_remove(&m_index, &slots[i]));
            ASSERT_EQ(0, ucs_range_index_remove(&m_index, &slots[i]));
            ref.erase(slots[i].start);
            if (k % 997 == 0) {
                check(ref);
            }
        }
        EXPECT_EQ(0u, m_index.count);
        EXPECT_EQ(0u, m_index.height);
        EXPECT_EQ(nullptr, ucs_range_index_find_racy(&m_index, 0x1000));
    }
}

/* removal with the leaf insert returned (often stale after splits and
 * merges) and with arbitrary numbers: the same tree as plain removal */
TEST_F(range_index, hinted_removal_against_map)
{
    random_ops(60000, 300000, 13, 1); /* then drains with hints */
}

TEST_F(range_index, arbitrary_hints_against_map)
{
    random_ops(4096, 100000, 17, 2);
}

/* the cache's eviction pattern: ascending insertions, oldest removed */
TEST_F(range_index, sliding_window_hinted)
{
    std::vector<ucs_pgt_region_t> slots = spaced_slots(20000);
    std::vector<uint32_t> leaf(slots.size());
    std::map<ucs_pgt_addr_t, ucs_pgt_region_t *> ref;
    const size_t window = 1000;
    for (size_t i = 0; i < slots.size(); ++i) {
        reserve();
        leaf[i]             = ucs_range_index_insert(&m_index, &slots[i]);
        ref[slots[i].start] = &slots[i];
        /* the last entry's edges (searches past the last end stop early) */
        ucs_pgt_addr_t last = slots[i].end;
        ASSERT_EQ(&slots[i], ucs_range_index_find(&m_index, last - 1));
        ASSERT_EQ(&slots[i], ucs_range_index_find_racy(&m_index, last - 1));
        ASSERT_EQ(nullptr, ucs_range_index_find(&m_index, last));
        ASSERT_EQ(nullptr, ucs_range_index_find_racy(&m_index, last));
        if (i >= window) {
            size_t old = i - window;
            ASSERT_EQ(1, ucs_range_index_remove_hinted(&m_index, &slots[old],
                                                       leaf[old]));
            ref.erase(slots[old].start);
        }
        if (i % 1999 == 0) {
            check(ref);
        }
    }
    check(ref);
}

/* the same window sliding down: entries removed from the top of leaves,
 * added at the front, where the slots the window left behind are reused;
 * then the other way round over the same slots */
TEST_F(range_index, sliding_window_both_ways)
{
    std::vector<ucs_pgt_region_t> slots = spaced_slots(6000);
    std::vector<uint32_t> leaf(slots.size());
    std::map<ucs_pgt_addr_t, ucs_pgt_region_t *> ref;
    const size_t window = 700;
    for (int pass = 0; pass < 4; ++pass) {
        bool down = (pass % 2) == 0;
        for (size_t k = 0; k < slots.size() + window; ++k) {
            if (k < slots.size()) {
                size_t i = down ? slots.size() - 1 - k : k;
                reserve();
                leaf[i] = ucs_range_index_insert(&m_index, &slots[i]);
                ref[slots[i].start] = &slots[i];
                ASSERT_EQ(&slots[i],
                          ucs_range_index_find(&m_index, slots[i].start));
            }
            if (k >= window) {
                size_t o = down ? slots.size() - 1 - (k - window) : k - window;
                ASSERT_EQ(1, ucs_range_index_remove_hinted(&m_index, &slots[o],
                                                           leaf[o]));
                ASSERT_EQ(0, ucs_range_index_remove_hinted(&m_index, &slots[o],
                                                           leaf[o]));
                ASSERT_EQ(nullptr,
                          ucs_range_index_find(&m_index, slots[o].start));
                ucs_pgt_region_t *racy =
                    ucs_range_index_find_racy(&m_index, slots[o].start);
                ASSERT_TRUE((racy == nullptr) ||
                            (racy->start > slots[o].start));
                ref.erase(slots[o].start);
            }
            if (k % 331 == 0) {
                check(ref);
            }
        }
        check(ref);
        EXPECT_EQ(0u, m_index.height);
    }
}

void range_index::random_ops(size_t nslots, int nops, unsigned seed, int hints)
{
    std::mt19937 rng(seed);
    std::vector<ucs_pgt_region_t> slots(nslots);
    std::vector<uint32_t> leaf(nslots, 0);
    std::map<ucs_pgt_addr_t, ucs_pgt_region_t *> ref;

    for (size_t i = 0; i < slots.size(); ++i) {
        slots[i].start = 0x10000 + i * 0x100;
        slots[i].end   = slots[i].start + 0x80;
    }
    for (int op = 0; op < nops; ++op) {
        ucs_pgt_region_t *r = &slots[rng() % slots.size()];
        bool present        = ref.count(r->start) != 0;
        if (!present && (rng() % 3 != 0)) {
            reserve();
            leaf[r - &slots[0]] = ucs_range_index_insert(&m_index, r);
            ref[r->start]       = r;
        } else if (present) {
            uint32_t hint =
                (hints == 1) ? leaf[r - &slots[0]] : (uint32_t)rng();
            ASSERT_EQ(1, hints
                             ? ucs_range_index_remove_hinted(&m_index, r, hint)
                             : ucs_range_index_remove(&m_index, r));
            ASSERT_EQ(0, ucs_range_index_remove_hinted(&m_index, r, hint));
            ref.erase(r->start);
        }
        /* lookups: inside, at the edges and in the gaps */
        ucs_pgt_addr_t addr      = 0x10000 + rng() % (slots.size() * 0x100);
        auto it                  = ref.upper_bound(addr);
        ucs_pgt_region_t *expect = nullptr;
        if (it != ref.begin()) {
            --it;
            if (addr < it->second->end) {
                expect = it->second;
            }
        }
        ASSERT_EQ(expect, ucs_range_index_find(&m_index, addr)) << op;
        ucs_pgt_region_t *racy = ucs_range_index_find_racy(&m_index, addr);
        if (expect != nullptr) {
            ASSERT_EQ(expect, racy) << op;
        } else if (racy != nullptr) {
            ASSERT_FALSE((racy->start <= addr) && (addr < racy->end)) << op;
        }
        if (op % 50000 == 0) {
            check(ref);
        }
    }
    check(ref);
    if (hints == 1) {
        check_all_removed_hinted(); /* while the entries still exist */
    }
}
