/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * munmap, mmap(MAP_FIXED) and mremap: every page whose frame changes must be
 * reported by VM_UNMAPPED before the change.
 */
#include "common/ucm_test.h"
#include "rawsys.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif
#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif

namespace
{

using namespace ucmt;

class Oracle : public ucmt::test
{
};
class Munmap : public ucmt::test
{
};
class MmapFixed : public ucmt::test
{
};
class Mremap : public ucmt::test
{
};

const int RW         = PROT_READ | PROT_WRITE;
const int ANON_FLAGS = MAP_PRIVATE | MAP_ANONYMOUS;

/* The oracle itself: a change nobody reported, and a report that comes
 * after the change, must both count as uncovered. */
TEST_F(Oracle, DetectsUnreportedUnmap)
{
    const size_t ps = page_size(), len = 4 * ps;
    char *p = (char *)map_anon(len);

    ASSERT_TRUE(p != NULL);
    ASSERT_EQ(4u, oracle::watch(p, len));
    oracle::arm();
    ASSERT_EQ(0, ucmt_rawsys(SYS_munmap, p, len)); /* invisible to any hook */
    oracle_stats s = oracle::check();
    EXPECT_EQ(4u, s.changed);
    EXPECT_EQ(4u, s.uncovered);
    EXPECT_EQ(0u, s.late);
}

TEST_F(Oracle, DetectsLateReport)
{
    const size_t ps = page_size(), len = 4 * ps;
    char *p = (char *)map_anon(len);

    ASSERT_TRUE(p != NULL);
    ASSERT_EQ(4u, oracle::watch(p, len));
    oracle::arm();
    ASSERT_EQ(0, ucm_orig_munmap(p, len));
    ucm_vm_munmap(p, len); /* too late: the pages are gone */
    oracle_stats s = oracle::check();
    EXPECT_EQ(4u, s.changed);
    EXPECT_EQ(4u, s.uncovered);
    EXPECT_EQ(4u, s.late);
}

TEST_F(Oracle, CountsOverReporting)
{
    const size_t ps = page_size(), len = 4 * ps;
    char *p = (char *)map_anon(len);

    ASSERT_TRUE(p != NULL);
    ASSERT_EQ(4u, oracle::watch(p, len));
    oracle::arm();
    ucm_vm_munmap(p, len); /* reported, but nothing changes */
    oracle_stats s = oracle::check();
    EXPECT_EQ(0u, s.changed);
    EXPECT_EQ(4u, s.over_reported);
    munmap(p, len);
}

TEST_F(Munmap, FullRangeReported)
{
    const size_t ps = page_size(), len = 8 * ps;
    char *p = (char *)map_anon(len);

    ASSERT_TRUE(p != NULL);
    ASSERT_EQ(8u, oracle::watch(p, len));
    oracle::arm();
    ASSERT_EQ(0, munmap(p, len));
    oracle_stats s = oracle::check();
    record(s);
    EXPECT_EQ(8u, s.changed);
    UCMT_EXPECT_COVERED(s);
    EXPECT_FALSE(readable(p));
    EXPECT_FALSE(readable(p + len - 1));
}

TEST_F(Munmap, PartialReportsOnlyUnmappedPages)
{
    const size_t ps = page_size(), len = 8 * ps;
    char *p = (char *)map_anon(len);

    ASSERT_TRUE(p != NULL);
    ASSERT_EQ(8u, oracle::watch(p, len));
    oracle::arm();
    ASSERT_EQ(0, munmap(p + 2 * ps, 4 * ps));
    oracle_stats s = oracle::check();
    record(s);
    EXPECT_EQ(4u, s.changed);
    UCMT_EXPECT_COVERED(s);
    EXPECT_EQ(0u, s.over_reported) << "pages that stay mapped were reported";
    EXPECT_TRUE(readable(p + ps));
    EXPECT_FALSE(readable(p + 2 * ps));
    EXPECT_FALSE(readable(p + 5 * ps));
    EXPECT_TRUE(readable(p + 6 * ps));
    munmap(p, 2 * ps);
    munmap(p + 6 * ps, 2 * ps);
}

TEST_F(Munmap, UnalignedLengthCoversWholeLastPage)
{
    const size_t ps = page_size(), len = 6 * ps;
    char *p = (char *)map_anon(len);

    ASSERT_TRUE(p != NULL);
    ASSERT_EQ(6u, oracle::watch(p, len));
    oracle::arm();
    /* the kernel unmaps pages 1 and 2 */
    ASSERT_EQ(0, munmap(p + ps, ps + 1));
    oracle_stats s = oracle::check();
    record(s);
    EXPECT_EQ(2u, s.changed);
    UCMT_EXPECT_COVERED(s);
    EXPECT_EQ(0u, s.over_reported);
    munmap(p, len);
}

TEST_F(MmapFixed, OverExistingMappingReported)
{
    const size_t ps = page_size(), len = 8 * ps;
    char *p = (char *)map_anon(len);

    ASSERT_TRUE(p != NULL);
    ASSERT_EQ(8u, oracle::watch(p, len));
    oracle::arm();
    ASSERT_EQ((void *)(p + 2 * ps),
              mmap(p + 2 * ps, 3 * ps, RW, ANON_FLAGS | MAP_FIXED, -1, 0));
    /* not touched: a new frame could happen to be the old one, recycled */
    oracle_stats s = oracle::check();
    record(s);
    EXPECT_EQ(3u, s.changed);
    UCMT_EXPECT_COVERED(s);
    munmap(p, len);
}

TEST_F(MmapFixed, NoReplaceOverMappingChangesNothing)
{
    const size_t ps = page_size(), len = 4 * ps;
    char *p = (char *)map_anon(len);
    void *q;

    ASSERT_TRUE(p != NULL);
    ASSERT_EQ(4u, oracle::watch(p, len));
    oracle::arm();
    q       = mmap(p + ps, ps, RW, ANON_FLAGS | MAP_FIXED_NOREPLACE, -1, 0);
    int err = errno;
    oracle_stats s = oracle::check();
    record(s);
    if ((q != MAP_FAILED) && (q != (void *)(p + ps))) {
        munmap(q, ps);
        munmap(p, len);
        GTEST_SKIP()
            << (on_valgrind()
                    ? "valgrind treats MAP_FIXED_NOREPLACE as a hint"
                    : "kernel treats MAP_FIXED_NOREPLACE as a hint (< 4.17)");
    }
    EXPECT_EQ(MAP_FAILED, q);
    EXPECT_EQ(EEXIST, err);
    EXPECT_EQ(0u, s.changed);
    UCMT_EXPECT_COVERED(s);
    /* no unmap happens, so no event is needed (it would be over-reporting) */
    EXPECT_EQ(0u, oracle::events(UCM_EVENT_VM_UNMAPPED, p, len, tid()).size())
        << "MAP_FIXED_NOREPLACE reported an unmap that cannot happen";
    munmap(p, len);
}

TEST_F(MmapFixed, NoReplaceOnFreeRangeReportsMapped)
{
    const size_t ps = page_size(), len = 4 * ps;
    char *r = (char *)free_range(len);

    ASSERT_TRUE(r != NULL);
    oracle::arm();
    void *q = mmap(r, len, RW, ANON_FLAGS | MAP_FIXED_NOREPLACE, -1, 0);
    oracle::disarm();
    ASSERT_EQ((void *)r, q);
    EXPECT_EQ(0u, oracle::events(UCM_EVENT_VM_UNMAPPED, r, len, tid()).size());
    std::vector<event_record> m =
        oracle::events(UCM_EVENT_VM_MAPPED, r, len, tid());
    ASSERT_EQ(1u, m.size());
    EXPECT_EQ((uintptr_t)r, m[0].addr);
    EXPECT_EQ(len, m[0].len);
    munmap(r, len);
}

TEST_F(Mremap, ShrinkReportsTail)
{
    const size_t ps = page_size(), len = 8 * ps;
    char *p = (char *)map_anon(len);

    ASSERT_TRUE(p != NULL);
    ASSERT_EQ(8u, oracle::watch(p, len));
    oracle::arm();
    ASSERT_EQ((void *)p, mremap(p, len, 3 * ps, 0));
    oracle_stats s = oracle::check();
    record(s);
    EXPECT_EQ(5u, s.changed);
    UCMT_EXPECT_COVERED(s);
    EXPECT_TRUE(readable(p + 2 * ps));
    EXPECT_FALSE(readable(p + 3 * ps));
    munmap(p, 3 * ps);
}

TEST_F(Mremap, GrowInPlaceKeepsPages)
{
    const size_t ps = page_size();
    char *r         = (char *)free_range(8 * ps);
    void *q;

    ASSERT_TRUE(r != NULL);
    ASSERT_EQ((void *)r,
              mmap(r, 4 * ps, RW, ANON_FLAGS | MAP_FIXED_NOREPLACE, -1, 0));
    touch(r, 4 * ps);
    ASSERT_EQ(4u, oracle::watch(r, 4 * ps));
    oracle::arm();
    q              = mremap(r, 4 * ps, 8 * ps, 0);
    oracle_stats s = oracle::check();
    record(s);
    if (q == MAP_FAILED) {
        munmap(r, 4 * ps);
        GTEST_SKIP() << "the range after the mapping was taken meanwhile";
    }
    EXPECT_EQ((void *)r, q);
    EXPECT_EQ(0u, s.changed);
    UCMT_EXPECT_COVERED(s);
    EXPECT_TRUE(readable(r + 7 * ps));
    munmap(r, 8 * ps);
}

TEST_F(Mremap, ForcedMoveReportsOldRange)
{
    const size_t ps = page_size(), len = 8 * ps;
    char *p = (char *)map_anon(len);
    char *q;

    ASSERT_TRUE(p != NULL);
    memset(p, 0x5a, 4 * ps);
    ASSERT_EQ(8u, oracle::watch(p, len));
    oracle::arm();
    /* pages 4..7 are in the way: growing pages 0..3 must move them */
    q              = (char *)mremap(p, 4 * ps, 8 * ps, MREMAP_MAYMOVE);
    oracle_stats s = oracle::check();
    record(s);
    ASSERT_NE(MAP_FAILED, (void *)q);
    ASSERT_NE(p, q);
    EXPECT_EQ(4u, s.changed);
    UCMT_EXPECT_COVERED(s);
    EXPECT_EQ(0x5a, q[4 * ps - 1]);
    EXPECT_FALSE(readable(p));
    munmap(q, 8 * ps);
    munmap(p + 4 * ps, 4 * ps);
}

TEST_F(Mremap, FixedReportsOldAndTargetRanges)
{
    const size_t ps = page_size();
    char *src       = (char *)map_anon(4 * ps);
    char *dst       = (char *)map_anon(6 * ps);

    ASSERT_TRUE((src != NULL) && (dst != NULL));
    src[0] = 0x33;
    ASSERT_EQ(4u, oracle::watch(src, 4 * ps));
    ASSERT_EQ(6u, oracle::watch(dst, 6 * ps));
    oracle::arm();
    /* grows while moving: all 6 target pages are replaced */
    ASSERT_EQ((void *)dst,
              mremap(src, 4 * ps, 6 * ps, MREMAP_MAYMOVE | MREMAP_FIXED, dst));
    oracle_stats s = oracle::check();
    record(s);
    EXPECT_EQ(10u, s.changed);
    UCMT_EXPECT_COVERED(s);
    EXPECT_EQ(0x33, dst[0]);
    EXPECT_FALSE(readable(src));
    munmap(dst, 6 * ps);
}

TEST_F(Mremap, FixedShrinkReportsOldAndTargetRanges)
{
    const size_t ps = page_size();
    char *src       = (char *)map_anon(6 * ps);
    char *dst       = (char *)map_anon(6 * ps);

    ASSERT_TRUE((src != NULL) && (dst != NULL));
    ASSERT_EQ(6u, oracle::watch(src, 6 * ps));
    ASSERT_EQ(6u, oracle::watch(dst, 6 * ps));
    oracle::arm();
    ASSERT_EQ((void *)dst,
              mremap(src, 6 * ps, 2 * ps, MREMAP_MAYMOVE | MREMAP_FIXED, dst));
    oracle_stats s = oracle::check();
    record(s);
    /* src: 6 pages gone; dst: 2 pages replaced, 4 untouched */
    EXPECT_EQ(8u, s.changed);
    UCMT_EXPECT_COVERED(s);
    EXPECT_TRUE(readable(dst + 5 * ps));
    munmap(dst, 6 * ps);
}

TEST_F(Mremap, DontUnmapReportsOldRange)
{
    const size_t ps = page_size(), len = 4 * ps;
    char *p = (char *)map_anon(len);
    char *q;

    ASSERT_TRUE(p != NULL);
    memset(p, 0x77, len);
    ASSERT_EQ(4u, oracle::watch(p, len));
    oracle::arm();
    q = (char *)mremap(p, len, len, MREMAP_MAYMOVE | MREMAP_DONTUNMAP, NULL);
    int err        = errno;
    oracle_stats s = oracle::check();
    record(s);
    if ((q == MAP_FAILED) && (err == EINVAL)) {
        munmap(p, len);
        GTEST_SKIP() << (on_valgrind()
                             ? "valgrind rejects MREMAP_DONTUNMAP (EINVAL)"
                             : "kernel without MREMAP_DONTUNMAP (< 5.7)");
    }
    ASSERT_NE(MAP_FAILED, (void *)q);
    /* the old range stays mapped, but its pages moved away */
    EXPECT_EQ(4u, s.changed);
    UCMT_EXPECT_COVERED(s);
    EXPECT_TRUE(readable(p));
    EXPECT_EQ(0x77, q[len - 1]);
    munmap(q, len);
    munmap(p, len);
}

} // namespace
