/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * madvise (advice that discards pages must be reported, other advice must
 * not) and brk/sbrk shrinking the heap.
 */
#include "common/ucm_test.h"

#include <errno.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <unistd.h>

#ifndef MADV_FREE
#define MADV_FREE 8
#endif
#ifndef MADV_COLD
#define MADV_COLD 20
#endif
#ifndef MADV_DONTNEED_LOCKED
#define MADV_DONTNEED_LOCKED 24
#endif

namespace
{

using namespace ucmt;

class Madvise : public ucmt::test
{
};
class Brk : public ucmt::test
{
};

TEST_F(Madvise, DontNeedReported)
{
    const size_t ps = page_size(), len = 6 * ps;
    char *p = (char *)map_anon(len);

    ASSERT_TRUE(p != NULL);
    ASSERT_EQ(6u, oracle::watch(p, len));
    oracle::arm();
    ASSERT_EQ(0, madvise(p + ps, 3 * ps, MADV_DONTNEED));
    oracle_stats s = oracle::check();
    record(s);
    EXPECT_EQ(3u, s.changed);
    UCMT_EXPECT_COVERED(s);
    munmap(p, len);
}

TEST_F(Madvise, FreeReported)
{
    const size_t ps = page_size(), len = 4 * ps;
    char *p = (char *)map_anon(len);

    ASSERT_TRUE(p != NULL);
    ASSERT_EQ(4u, oracle::watch(p, len));
    oracle::arm();
    ASSERT_EQ(0, madvise(p, len, MADV_FREE));
    oracle_stats s = oracle::check();
    record(s);
    UCMT_EXPECT_COVERED(s);
    /* the kernel may drop the pages at any later time, unannounced: the
     * whole range must be reported now even if no frame changed yet */
    EXPECT_EQ(4u, s.reported) << s.str();
    munmap(p, len);
}

TEST_F(Madvise, RemoveOnSharedMemfdReported)
{
    const size_t ps = page_size(), len = 4 * ps;
    int fd = memfd_create("ucmt-madv-remove", MFD_CLOEXEC);
    char *p;

    if (fd < 0) {
        GTEST_SKIP() << "memfd_create failed: " << strerror(errno);
    }
    ASSERT_EQ(0, ftruncate(fd, (off_t)len));
    p = (char *)mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    ASSERT_NE(MAP_FAILED, (void *)p);
    touch(p, len);
    ASSERT_EQ(4u, oracle::watch(p, len));
    oracle::arm();
    ASSERT_EQ(0, madvise(p, len, MADV_REMOVE));
    oracle_stats s = oracle::check();
    record(s);
    EXPECT_EQ(4u, s.changed);
    UCMT_EXPECT_COVERED(s);
    munmap(p, len);
}

TEST_F(Madvise, RemoveOnSysvShmReported)
{
    const size_t ps = page_size(), len = 4 * ps;
    int id = shmget(IPC_PRIVATE, len, IPC_CREAT | 0600);
    char *p;

    if (id < 0) {
        GTEST_SKIP() << "shmget failed: " << strerror(errno);
    }
    p = (char *)shmat(id, NULL, 0);
    shmctl(id, IPC_RMID, NULL);
    ASSERT_NE((void *)-1, (void *)p);
    touch(p, len);
    ASSERT_EQ(4u, oracle::watch(p, len));
    oracle::arm();
    ASSERT_EQ(0, madvise(p, len, MADV_REMOVE));
    oracle_stats s = oracle::check();
    record(s);
    EXPECT_EQ(4u, s.changed);
    UCMT_EXPECT_COVERED(s);
    shmdt(p);
}

TEST_F(Madvise, DontNeedLockedReported)
{
    const size_t ps = page_size(), len = 4 * ps;
    char *p = (char *)map_anon(len);

    ASSERT_TRUE(p != NULL);
    if (mlock(p, len) != 0) {
        munmap(p, len);
        GTEST_SKIP() << "mlock failed: " << strerror(errno);
    }
    ASSERT_EQ(4u, oracle::watch(p, len));
    oracle::arm();
    int ret        = madvise(p, len, MADV_DONTNEED_LOCKED);
    int err        = errno;
    oracle_stats s = oracle::check();
    record(s);
    munlock(p, len);
    munmap(p, len);
    if ((ret != 0) && (err == EINVAL)) {
        GTEST_SKIP() << "kernel without MADV_DONTNEED_LOCKED (< 5.18)";
    }
    ASSERT_EQ(0, ret);
    EXPECT_EQ(4u, s.changed);
    UCMT_EXPECT_COVERED(s);
}

TEST_F(Madvise, NonDiscardingAdviceNotReported)
{
    static const struct {
        int advice;
        const char *name;
    } advices[] = {
        {MADV_NORMAL, "MADV_NORMAL"},         {MADV_RANDOM, "MADV_RANDOM"},
        {MADV_SEQUENTIAL, "MADV_SEQUENTIAL"}, {MADV_WILLNEED, "MADV_WILLNEED"},
        {MADV_DONTFORK, "MADV_DONTFORK"},     {MADV_DOFORK, "MADV_DOFORK"},
        {MADV_NOHUGEPAGE, "MADV_NOHUGEPAGE"}, {MADV_COLD, "MADV_COLD"},
    };
    const size_t ps = page_size(), len = 4 * ps;
    char *p = (char *)map_anon(len);
    size_t i;

    ASSERT_TRUE(p != NULL);
    ASSERT_EQ(4u, oracle::watch(p, len));
    for (i = 0; i < sizeof(advices) / sizeof(advices[0]); ++i) {
        SCOPED_TRACE(advices[i].name);
        oracle::arm();
        int ret        = madvise(p, len, advices[i].advice);
        int err        = errno;
        oracle_stats s = oracle::check();
        if ((ret != 0) && (err == EINVAL)) {
            continue; /* advice unknown to this kernel */
        }
        EXPECT_EQ(0, ret);
        EXPECT_EQ(0u, s.changed);
        EXPECT_EQ(0u, s.reported) << "advice that keeps the pages reported "
                                     "VM_UNMAPPED: "
                                  << s.str();
    }
    munmap(p, len);
}

/*
 * brk/sbrk: the test grows the heap by its own increment, touches the new
 * pages, and gives exactly that increment back.  No malloc may run between
 * the two calls (the oracle uses static tables only).
 */
TEST_F(Brk, SbrkShrinkReported)
{
    const size_t ps    = page_size();
    const intptr_t inc = 16 * ps;
    char *cur          = (char *)sbrk(0);

    ASSERT_NE((void *)-1, (void *)cur);
    ASSERT_EQ((void *)cur, sbrk(inc));
    uintptr_t first = align_up((uintptr_t)cur, ps);
    uintptr_t last  = align_down((uintptr_t)cur + inc, ps);
    touch((void *)first, last - first);
    size_t n = oracle::watch((void *)first, last - first);
    oracle::arm();
    void *ret      = sbrk(-inc);
    oracle_stats s = oracle::check();
    record(s);
    ASSERT_EQ((void *)(cur + inc), ret);
    ASSERT_EQ((void *)cur, sbrk(0));
    EXPECT_EQ((last - first) / ps, n);
    if (!on_valgrind()) {
        EXPECT_EQ(n, s.changed) << "released heap pages still present?";
    }
    UCMT_EXPECT_COVERED(s);
}

TEST_F(Brk, BrkShrinkReported)
{
    const size_t ps  = page_size();
    const size_t inc = 16 * ps;
    char *cur        = (char *)sbrk(0);

    ASSERT_NE((void *)-1, (void *)cur);
    ASSERT_EQ(0, brk(cur + inc));
    uintptr_t first = align_up((uintptr_t)cur, ps);
    uintptr_t last  = align_down((uintptr_t)cur + inc, ps);
    touch((void *)first, last - first);
    size_t n = oracle::watch((void *)first, last - first);
    oracle::arm();
    int ret        = brk(cur);
    oracle_stats s = oracle::check();
    record(s);
    ASSERT_EQ(0, ret);
    ASSERT_EQ((void *)cur, sbrk(0));
    EXPECT_EQ((last - first) / ps, n);
    if (!on_valgrind()) {
        EXPECT_EQ(n, s.changed);
    }
    UCMT_EXPECT_COVERED(s);
}

} // namespace
