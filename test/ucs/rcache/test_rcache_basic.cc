/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Registration cache: hits, merging, protection, unmap, invalidation,
 * limits and LRU order, registration failures.
 */
#include "rcache_fixture.h"

#include <sys/mman.h>
#include <sys/shm.h>

using namespace rcache_test;

class rcache_basic : public rcache_fixture
{
  protected:
    void SetUp() override
    {
        ASSERT_EQ(UCS_OK, create());
    }
};

TEST_F(rcache_basic, hit_returns_same_region)
{
    char *buf       = (char *)map(4);
    test_region *r1 = get(buf + 100, 1000);
    test_region *r2 = get(buf + 200, 500);
    ASSERT_TRUE(r1 && r2);
    EXPECT_EQ(r1, r2);
    EXPECT_LE(r1->super.super.start, (uintptr_t)buf);
    EXPECT_EQ(0u, r1->super.super.start % page_size);
    EXPECT_EQ(0u, r1->super.super.end % page_size);
    EXPECT_EQ(1u, regs.load());
    ucs_rcache_stats_t s = stats();
    EXPECT_EQ(2u, s.gets);
    EXPECT_EQ(1u, s.hits_fast);
    EXPECT_EQ(1u, s.misses);
    put(r1);
    put(r2);
    munmap(buf, 4 * page_size);
    EXPECT_EQ(1u, stats().unmap_invalidations);
}

TEST_F(rcache_basic, overlapping_and_adjacent_merge)
{
    char *buf      = (char *)map(8);
    test_region *a = get(buf, page_size);
    test_region *b = get(buf + page_size, page_size); /* adjacent */
    ASSERT_TRUE(a && b);
    EXPECT_NE(a, b);
    EXPECT_EQ((uintptr_t)buf, b->super.super.start);
    EXPECT_EQ((uintptr_t)buf + 2 * page_size, b->super.super.end);
    test_region *c = get(buf + page_size, 3 * page_size); /* overlapping */
    ASSERT_TRUE(c);
    EXPECT_EQ((uintptr_t)buf, c->super.super.start);
    EXPECT_EQ((uintptr_t)buf + 4 * page_size, c->super.super.end);
    /* regions absorbed by a merge stay registered for their holders */
    EXPECT_EQ(region_magic_alive, a->magic);
    EXPECT_EQ(region_magic_alive, b->magic);
    test_region *d = get(buf, 4 * page_size);
    EXPECT_EQ(c, d);
    EXPECT_EQ(2u, stats().merges);
    put(a);
    put(b);
    EXPECT_EQ(2u, deregs.load());
    put(c);
    put(d);
    EXPECT_EQ(1u, stats().regions);
    munmap(buf, 8 * page_size);
}

TEST_F(rcache_basic, merge_keeps_protection_the_pages_have)
{
    char *buf = (char *)map(2);
    ASSERT_EQ(0, mprotect(buf + page_size, page_size, PROT_READ));
    test_region *a = get(buf, page_size, PROT_READ | PROT_WRITE);
    test_region *b = get(buf + page_size, page_size, PROT_READ);
    ASSERT_TRUE(a && b);
    /* merging would register the read-only page for writing */
    EXPECT_EQ((uintptr_t)buf + page_size, b->super.super.start);
    EXPECT_EQ(PROT_READ, b->super.prot);
    /* the first region is still cached */
    test_region *c = get(buf, page_size, PROT_WRITE);
    EXPECT_EQ(a, c);
    put(a);
    put(b);
    put(c);
    munmap(buf, 2 * page_size);
}

TEST_F(rcache_basic, stronger_protection_reregisters)
{
    char *buf      = (char *)map(2);
    test_region *a = get(buf, page_size, PROT_READ);
    test_region *b = get(buf, page_size, PROT_READ | PROT_WRITE);
    ASSERT_TRUE(a && b);
    EXPECT_NE(a, b);
    EXPECT_EQ(PROT_READ | PROT_WRITE, b->super.prot);
    test_region *c = get(buf, page_size, PROT_READ);
    EXPECT_EQ(b, c);
    put(a);
    put(b);
    put(c);
    munmap(buf, 2 * page_size);
}

TEST_F(rcache_basic, failed_merge_retries_unmerged)
{
    char *buf       = (char *)map(4);
    test_region *a  = get(buf, 2 * page_size);
    fail_above_size = 2 * page_size;
    test_region *b  = get(buf + 2 * page_size, page_size);
    ASSERT_TRUE(a && b);
    EXPECT_EQ((uintptr_t)buf + 2 * page_size, b->super.super.start);
    EXPECT_EQ((uintptr_t)buf + 3 * page_size, b->super.super.end);
    EXPECT_EQ(3u, reg_calls.load());
    put(a);
    put(b);
    munmap(buf, 4 * page_size);
}

TEST_F(rcache_basic, failed_registration_evicts_unused_and_retries)
{
    char *buf      = (char *)map(8);
    test_region *a = get(buf, page_size);
    test_region *b = get(buf + 2 * page_size, page_size);
    ASSERT_TRUE(a && b);
    put(a);
    put(b);
    max_registered = 2 * page_size; /* like RLIMIT_MEMLOCK */
    test_region *c = get(buf + 4 * page_size, page_size);
    ASSERT_TRUE(c);
    EXPECT_EQ(2u, deregs.load());
    EXPECT_EQ(2u, stats().evictions);
    put(c);

    /* nothing left to evict: a clear error */
    test_region *d = get(buf + 6 * page_size, page_size);
    ASSERT_TRUE(d);
    ucs_rcache_region_t *e = nullptr;
    max_registered         = page_size;
    EXPECT_NE(UCS_OK, ucs_rcache_get(m_rcache, buf + 4 * page_size,
                                     4 * page_size, PROT_READ, nullptr, &e));
    EXPECT_EQ(nullptr, e);
    put(d);
    munmap(buf, 8 * page_size);
}

TEST_F(rcache_basic, held_region_survives_unmap)
{
    char *buf      = (char *)map(4);
    test_region *a = get(buf, 4 * page_size);
    ASSERT_TRUE(a);
    munmap(buf, 4 * page_size);
    EXPECT_EQ(1u, stats().unmap_invalidations);
    EXPECT_EQ(0u, stats().regions);
    EXPECT_EQ(region_magic_alive, a->magic);
    EXPECT_EQ(0u, deregs.load());

    /* same addresses, new pages: a new registration, never the old one */
    char *buf2 = (char *)mmap(buf, 4 * page_size, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    ASSERT_EQ(buf, buf2);
    test_region *b = get(buf, 4 * page_size);
    ASSERT_TRUE(b);
    EXPECT_EQ(region_magic_alive, a->magic);
    EXPECT_EQ(2u, regs.load());
    put(a);
    EXPECT_EQ(1u, deregs.load());
    put(b);
    munmap(buf, 4 * page_size);
}

TEST_F(rcache_basic, partial_unmap_and_map_fixed_invalidate)
{
    char *buf      = (char *)map(8);
    test_region *a = get(buf, 8 * page_size);
    ASSERT_TRUE(a);
    put(a);
    ASSERT_EQ(buf + 3 * page_size,
              mmap(buf + 3 * page_size, page_size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0));
    EXPECT_EQ(1u, stats().unmap_invalidations);
    test_region *b = get(buf, 8 * page_size);
    ASSERT_TRUE(b);
    put(b);
    ASSERT_EQ(0, madvise(buf, page_size, MADV_DONTNEED));
    test_region *c = get(buf, page_size);
    ASSERT_TRUE(c);
    put(c);
    EXPECT_EQ(2u, stats().unmap_invalidations);
    munmap(buf, 8 * page_size);
}

static void comp_cb(void *arg)
{
    ++*static_cast<int *>(arg);
}

TEST_F(rcache_basic, invalidate_completes_after_last_put)
{
    char *buf      = (char *)map(2);
    int done       = 0;
    test_region *a = get(buf, page_size);
    ASSERT_TRUE(a);
    ucs_rcache_region_invalidate(m_rcache, &a->super, comp_cb, &done);
    EXPECT_EQ(0, done);
    EXPECT_EQ(0u, stats().regions);
    test_region *b = get(buf, page_size); /* a new registration */
    ASSERT_TRUE(b);
    EXPECT_NE(a, b);
    put(a);
    EXPECT_EQ(1, done);
    EXPECT_EQ(1u, deregs.load());
    /* unheld: completes at once */
    put(b);
    ucs_rcache_region_t *c = nullptr;
    ASSERT_EQ(UCS_OK,
              ucs_rcache_get(m_rcache, buf, page_size, PROT_READ, nullptr, &c));
    ucs_rcache_region_invalidate(m_rcache, c, comp_cb, &done);
    EXPECT_EQ(1, done);
    ucs_rcache_region_put(m_rcache, c);
    EXPECT_EQ(2, done);
    munmap(buf, 2 * page_size);
}

struct comp_order_arg {
    std::vector<std::pair<int, unsigned>> *runs; /* id, deregs then */
    const std::atomic<unsigned> *deregs;
    int id;
};

static void comp_order_cb(void *arg)
{
    auto *c = static_cast<comp_order_arg *>(arg);

    c->runs->emplace_back(c->id, c->deregs->load());
}

/* Callbacks given to several invalidations of one held region run once
 * each, after its deregistration (the oracle: the deregistration count
 * when each runs), in the order they were given. */
TEST_F(rcache_basic, invalidate_callbacks_run_in_order)
{
    char *buf = (char *)map(1);
    std::vector<std::pair<int, unsigned>> runs;
    std::vector<comp_order_arg> args;
    test_region *a = get(buf, page_size);

    ASSERT_TRUE(a);
    for (int i = 0; i < 4; ++i) {
        args.push_back({&runs, &deregs, i});
    }
    for (auto &arg : args) {
        ucs_rcache_region_invalidate(m_rcache, &a->super, comp_order_cb, &arg);
    }
    EXPECT_TRUE(runs.empty());
    EXPECT_EQ(0u, deregs.load());
    put(a);
    EXPECT_EQ((std::vector<std::pair<int, unsigned>>{
                  {0, 1u}, {1, 1u}, {2, 1u}, {3, 1u}}),
              runs);
    munmap(buf, page_size);
}

TEST_F(rcache_basic, hold_keeps_region)
{
    char *buf      = (char *)map(1);
    test_region *a = get(buf, 10);
    ASSERT_TRUE(a);
    ucs_rcache_region_hold(m_rcache, &a->super);
    munmap(buf, page_size);
    put(a);
    EXPECT_EQ(0u, deregs.load());
    put(a);
    EXPECT_EQ(1u, deregs.load());
}

class rcache_limits : public rcache_fixture
{
};

TEST_F(rcache_limits, lru_order_and_held_regions)
{
    ucs_rcache_params_t params = default_params();
    params.max_regions         = 3;
    ASSERT_EQ(UCS_OK, create(&params));

    char *buf = (char *)map(16);
    test_region *r[5];
    for (int i = 0; i < 3; ++i) {
        r[i] = get(buf + 2 * i * page_size, page_size);
        ASSERT_TRUE(r[i]);
        put(r[i]);
    }
    put(get(buf, page_size));                   /* r0 most recent */
    r[3] = get(buf + 6 * page_size, page_size); /* evicts r1 */
    ASSERT_TRUE(r[3]);
    ASSERT_EQ(1u, dereg_log.size());
    EXPECT_EQ((uintptr_t)buf + 2 * page_size, dereg_log[0]);
    EXPECT_EQ(3u, stats().regions);
    EXPECT_EQ(1u, stats().deregs); /* counted by the registration path */

    /* held regions are never evicted */
    r[0] = get(buf, page_size);
    r[2] = get(buf + 4 * page_size, page_size);
    r[4] = get(buf + 8 * page_size, page_size);
    ASSERT_TRUE(r[0] && r[2] && r[4]);
    EXPECT_EQ(1u, dereg_log.size());
    EXPECT_EQ(4u, stats().regions);
    put(r[0]);
    put(r[2]);
    put(r[3]);
    put(r[4]);
    EXPECT_EQ(1u, stats().evictions);
    munmap(buf, 16 * page_size);
}

TEST_F(rcache_limits, max_size)
{
    ucs_rcache_params_t params = default_params();
    params.max_size            = 4 * page_size;
    ASSERT_EQ(UCS_OK, create(&params));

    char *buf = (char *)map(16);
    for (int i = 0; i < 4; ++i) {
        put(get(buf + 4 * i * page_size, 2 * page_size));
    }
    ucs_rcache_stats_t s = stats();
    EXPECT_LE(s.total_size, 4 * page_size);
    EXPECT_EQ(2u, s.evictions);
    munmap(buf, 16 * page_size);
}

TEST_F(rcache_basic, shm_segment_attached_twice)
{
    const size_t size = 4 * page_size;
    int shmid         = shmget(IPC_PRIVATE, size, IPC_CREAT | 0600);
    ASSERT_GE(shmid, 0);
    /* two attachments with a gap, so that they are not merged */
    char *base = (char *)mmap(nullptr, 3 * size, PROT_NONE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(MAP_FAILED, base);
    char *a = (char *)shmat(shmid, base, SHM_REMAP);
    char *b = (char *)shmat(shmid, base + 2 * size, SHM_REMAP);
    shmctl(shmid, IPC_RMID, nullptr);
    ASSERT_NE((void *)-1, a);
    ASSERT_NE((void *)-1, b);
    ASSERT_NE(a, b);

    test_region *ra = get(a, size);
    test_region *rb = get(b, size);
    ASSERT_TRUE(ra && rb);
    EXPECT_NE(ra, rb);
    put(ra);
    put(rb);
    EXPECT_EQ(2u, stats().regions);

    /* shmdt drops the regions of that attachment only, whole segment */
    ASSERT_EQ(0, shmdt(a));
    EXPECT_EQ(1u, stats().unmap_invalidations);
    EXPECT_EQ(1u, stats().regions);
    test_region *rb2 = get(b + page_size, page_size);
    EXPECT_EQ(rb, rb2);
    put(rb2);
    ASSERT_EQ(0, shmdt(b));
    EXPECT_EQ(0u, stats().regions);
    munmap(base, 3 * size);
}

/* The hint table grows with the cache (at least one entry per region; the
 * first has 64k): with 70k regions lookups go through a grown table, whose
 * entries are still candidates only.  Every region is found again (no
 * registration after the first round), and a region whose page was
 * replaced is rejected (frame oracle), also when its hint is in the
 * grown table. */
TEST_F(rcache_basic, grown_lookup_hints_stay_exact)
{
    RCACHE_NEED_PFN();
    /* over 128k regions: the hint table (2^18 entries, 2 MiB) and the
     * region blocks are the huge-page kind (rcache_huge.c), the blocks
     * collapsed as they fill; under valgrind the small kinds only */
    const size_t n = on_valgrind() ? 40000 : 140000;
    char *buf      = (char *)map(2 * n);

    for (int round = 0; round < 3; ++round) { /* misses, index, hints */
        for (size_t i = 0; i < n; ++i) {
            test_region *r = get(buf + 2 * i * page_size + 8, 64);
            ASSERT_TRUE(r);
            ASSERT_EQ((uintptr_t)buf + 2 * i * page_size, r->super.super.start);
            put(r);
        }
        ASSERT_EQ(n, regs.load()) << "round " << round;
    }
    EXPECT_EQ(n, stats().regions);

    char *victim = buf + n * page_size; /* region n / 2 */
    ASSERT_EQ(victim, mmap(victim, page_size, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0));
    memset(victim, 7, page_size);
    test_region *r = get(victim + 8, 64);
    ASSERT_TRUE(r);
    EXPECT_EQ(n + 1, regs.load()) << "served from a stale hint";
    EXPECT_EQ("", check_region(r, (uintptr_t)victim, page_size));
    put(r);
    munmap(buf, 2 * n * page_size);
}

/* The lookup hints (a page -> region table filled by index hits) hold
 * candidates only: after the page is replaced, the hint's old region is
 * rejected and the new pages are registered (frame oracle). */
TEST_F(rcache_basic, stale_lookup_hint_is_rejected)
{
    RCACHE_NEED_PFN();
    char *buf = (char *)map(4);
    char *a = buf, *b = buf + 2 * page_size;

    memset(buf, 1, 4 * page_size);
    for (int round = 0; round < 2; ++round) { /* misses, then index hits */
        test_region *ra = get(a, page_size);
        test_region *rb = get(b, page_size);
        ASSERT_TRUE(ra && rb);
        ASSERT_NE(ra, rb);
        put(ra);
        put(rb);
    }
    /* a's hint now names a's first region; the thread's last hit is b's */
    test_region *old_a = get(a, page_size);
    ASSERT_TRUE(old_a);
    put(old_a);
    test_region *rb = get(b, page_size);
    ASSERT_TRUE(rb);
    put(rb);
    unsigned regs_before = regs.load();

    ASSERT_EQ(a, mmap(a, page_size, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0));
    memset(a, 2, page_size);
    test_region *new_a = get(a, page_size);
    ASSERT_TRUE(new_a);
    EXPECT_EQ(regs_before + 1, regs.load()) << "served from a stale hint";
    EXPECT_EQ("", check_region(new_a, (uintptr_t)a, page_size));
    put(new_a);
    /* and the hint learns the new region: an index hit, then a hint hit */
    for (int i = 0; i < 2; ++i) {
        rb = get(b, page_size);
        ASSERT_TRUE(rb);
        put(rb);
        test_region *again = get(a, page_size);
        ASSERT_TRUE(again);
        EXPECT_EQ(new_a, again);
        EXPECT_EQ("", check_region(again, (uintptr_t)a, page_size));
        put(again);
    }
    EXPECT_EQ(regs_before + 1, regs.load());
    munmap(buf, 4 * page_size);
}
