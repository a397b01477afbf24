/*
 * Range index: random insertions and removals against std::map.
 */
#include <ucs/datastruct/range_index.h>
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

namespace {

class range_index : public ::testing::Test {
protected:
    ucs_range_index_t m_index;

    void SetUp() override { ucs_range_index_init(&m_index); }
    void TearDown() override { ucs_range_index_cleanup(&m_index); }

    void reserve(size_t need)
    {
        ucs_range_index_spare_t spare = {nullptr};
        if (need <= m_index.capacity) {
            return;
        }
        ASSERT_EQ(UCS_OK, ucs_range_index_grow_alloc(need * 2, &spare));
        ucs_range_index_grow_install(&m_index, &spare);
        ucs_range_index_spare_free(&spare);
    }

    void check(const std::map<ucs_pgt_addr_t, ucs_pgt_region_t*> &ref)
    {
        ASSERT_EQ(ref.size(), m_index.count);
        size_t i = 0;
        for (auto &kv : ref) {
            ASSERT_EQ(kv.second, m_index.regions[i]) << i;
            ASSERT_EQ(kv.second->end, m_index.ends[i]) << i;
            ++i;
        }
    }
};

} // namespace

TEST_F(range_index, random_against_map)
{
    std::mt19937 rng(7);
    std::vector<ucs_pgt_region_t> slots(4096);
    std::map<ucs_pgt_addr_t, ucs_pgt_region_t*> ref;

    for (size_t i = 0; i < slots.size(); ++i) {
        slots[i].start = 0x10000 + i * 0x100;
        slots[i].end   = slots[i].start + 0x80;
    }
    for (int op = 0; op < 100000; ++op) {
        ucs_pgt_region_t *r = &slots[rng() % slots.size()];
        bool present        = ref.count(r->start) != 0;
        if (!present && (rng() % 3 != 0)) {
            reserve(m_index.count + 1);
            ucs_range_index_insert(&m_index, r);
            ref[r->start] = r;
        } else if (present) {
            ASSERT_EQ(1, ucs_range_index_remove(&m_index, r));
            ref.erase(r->start);
        }
        /* lookups: inside, at the edges and in the gaps */
        ucs_pgt_addr_t addr = 0x10000 + rng() % (slots.size() * 0x100);
        auto it             = ref.upper_bound(addr);
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
        if (op % 5000 == 0) {
            check(ref);
        }
    }
    check(ref);
}
