/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Pages of a shared file removed through any mapping or descriptor: libucm's
 * table of file mappings (src/ucm/mmap/ucm_filemap.h) must name every
 * mapping of the removed offsets, however the file was mapped (libc, raw
 * system call, the loader, before the hooks) and however the mappings
 * changed since (partial munmap, mremap, MAP_FIXED over them, shmdt).
 * Oracle: the page frames of the watched mappings; every page whose frame
 * changed must have been reported while it was still the old one, and the
 * events over each mapping must be exactly the removed pages' addresses.
 */
#include "common/ucm_test.h"
#include "file_fixture.h"
#include "rawsys.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>

namespace
{

using namespace ucmt;

class Filemap : public ucmt::file_test
{
  protected:
    /* a memfd of len bytes, closed at the end */
    int memfd(size_t len)
    {
        return file_test::memfd(len, "ucmt-filemap");
    }

    /* a new open file description of the same file */
    int reopen(int fd)
    {
        char path[64];

        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        return keep_fd(open(path, O_RDWR | O_CLOEXEC));
    }

    /* 'count' free places of 'len' bytes, apart from each other */
    std::vector<char *> places(size_t count, size_t len)
    {
        char *r = (char *)free_range(2 * count * len);
        std::vector<char *> v;

        for (size_t i = 0; (r != NULL) && (i < count); ++i) {
            v.push_back(r + 2 * i * len);
        }
        return v;
    }

    /* exactly 'changed' pages; each range twice unless told otherwise */
    void check(const std::vector<range_t> &watched,
               const std::function<int()> &op, size_t changed,
               const std::vector<range_t> &expected, bool twice = true)
    {
        check_removal(watched, op, changed, expected, true, twice, false);
    }

    /* a truncation of another mapped memfd: the table is in use from now */
    void warm_up()
    {
        int fd = memfd(2 * page_size());
        char *p;

        ASSERT_GE(fd, 0);
        p = map(fd, 2 * page_size());
        ASSERT_TRUE(p != NULL);
        ASSERT_EQ(0, ftruncate(fd, (off_t)page_size()));
    }

    int shm_create(size_t size)
    {
        int id = shmget(IPC_PRIVATE, size, IPC_CREAT | 0600);

        if (id >= 0) {
            m_ids.push_back(id);
        }
        return id;
    }

    char *shm_attach(int id)
    {
        void *p = shmat(id, NULL, 0);

        if (p == (void *)-1) {
            return NULL;
        }
        m_shm.push_back(p);
        return (char *)p;
    }

    void shm_detach(void *p)
    {
        for (size_t i = 0; i < m_shm.size(); ++i) {
            if (m_shm[i] == p) {
                m_shm.erase(m_shm.begin() + i);
                break;
            }
        }
        ASSERT_EQ(0, shmdt(p));
    }
};

/* ---- through another descriptor ---- */

/* The same memfd at two addresses, truncated through a dup()ed descriptor:
 * both mappings' removed pages are reported. */
TEST_F(Filemap, TruncateThroughDupReportsBothMappings)
{
    const size_t ps = page_size(), len = 8 * ps;
    std::vector<char *> at = places(2, len);
    int fd                 = memfd(len);
    char *a, *b;
    int fd2;

    ASSERT_GE(fd, 0) << strerror(errno);
    ASSERT_EQ(2u, at.size());
    a   = map(fd, len, MAP_SHARED, 0, at[0]);
    b   = map(fd, len, MAP_SHARED, 0, at[1]);
    fd2 = keep_fd(dup(fd));
    ASSERT_TRUE((a != NULL) && (b != NULL) && (fd2 >= 0)) << strerror(errno);
    check({range_t((uintptr_t)a, len), range_t((uintptr_t)b, len)},
          [&]() { return ftruncate(fd2, (off_t)(3 * ps)); }, 10,
          {range_t((uintptr_t)a + 3 * ps, 5 * ps),
           range_t((uintptr_t)b + 3 * ps, 5 * ps)});
}

/* The descriptor is a new open file description (/proc/self/fd reopen) and
 * one mapping maps other offsets. */
TEST_F(Filemap, TruncateThroughReopenedDescriptor)
{
    const size_t ps = page_size(), len = 8 * ps;
    std::vector<char *> at = places(2, len);
    int fd                 = memfd(len);
    char *a, *b;
    int fd2;

    ASSERT_GE(fd, 0) << strerror(errno);
    ASSERT_EQ(2u, at.size());
    a   = map(fd, len, MAP_SHARED, 0, at[0]);
    b   = map(fd, 4 * ps, MAP_SHARED, 4 * ps, at[1]); /* pages 4..7 */
    fd2 = reopen(fd);
    ASSERT_TRUE((a != NULL) && (b != NULL) && (fd2 >= 0)) << strerror(errno);
    check({range_t((uintptr_t)a, len), range_t((uintptr_t)b, 4 * ps)},
          [&]() { return ftruncate(fd2, (off_t)(6 * ps)); }, 4,
          {range_t((uintptr_t)a + 6 * ps, 2 * ps),
           range_t((uintptr_t)b + 2 * ps, 2 * ps)});
}

TEST_F(Filemap, PunchHoleThroughOtherDescriptor)
{
    const size_t ps = page_size(), len = 8 * ps;
    std::vector<char *> at = places(2, len);
    int fd                 = memfd(len);
    char *a, *b;
    int fd2;

    ASSERT_GE(fd, 0) << strerror(errno);
    ASSERT_EQ(2u, at.size());
    a   = map(fd, len, MAP_SHARED, 0, at[0]);
    b   = map(fd, len, MAP_SHARED, 0, at[1]);
    fd2 = reopen(fd);
    ASSERT_TRUE((a != NULL) && (b != NULL) && (fd2 >= 0)) << strerror(errno);
    check({range_t((uintptr_t)a, len), range_t((uintptr_t)b, len)},
          [&]() {
              return fallocate(fd2, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                               (off_t)(2 * ps), (off_t)(3 * ps));
          },
          6,
          {range_t((uintptr_t)a + 2 * ps, 3 * ps),
           range_t((uintptr_t)b + 2 * ps, 3 * ps)});
}

/* A file in /dev/shm (tmpfs) opened twice, one mapping per open, truncated
 * by path. */
TEST_F(Filemap, TruncatePathOfFileOpenedTwice)
{
    const size_t ps = page_size(), len = 4 * ps;
    char path[] = "/dev/shm/ucmt-filemap-XXXXXX";
    int fd      = keep_fd(mkstemp(path));
    char *a, *b;
    int fd2;

    if (fd < 0) {
        GTEST_SKIP() << "no file in /dev/shm: " << strerror(errno);
    }
    m_paths.push_back(path);
    fd2 = keep_fd(open(path, O_RDWR | O_CLOEXEC));
    ASSERT_GE(fd2, 0) << strerror(errno);
    ASSERT_EQ(0, ftruncate(fd, (off_t)len));
    a = map(fd, len);
    b = map(fd2, len);
    ASSERT_TRUE((a != NULL) && (b != NULL)) << strerror(errno);
    check({range_t((uintptr_t)a, len), range_t((uintptr_t)b, len)},
          [&]() { return truncate(path, (off_t)ps); }, 6,
          {range_t((uintptr_t)a + ps, 3 * ps),
           range_t((uintptr_t)b + ps, 3 * ps)});
}

/* ---- through another mapping ---- */

/* madvise(MADV_REMOVE) through mapping A punches a hole in the file: the
 * same offsets in mapping B lose their pages, and are reported. */
TEST_F(Filemap, MadviseRemoveReportsOtherMapping)
{
    const size_t ps = page_size(), len = 8 * ps;
    std::vector<char *> at = places(3, len);
    int fd                 = memfd(len);
    char *a, *b, *c;

    ASSERT_GE(fd, 0) << strerror(errno);
    ASSERT_EQ(3u, at.size());
    a = map(fd, len, MAP_SHARED, 0, at[0]);
    b = map(fd, len, MAP_SHARED, 0, at[1]);
    c = map(fd, 2 * ps, MAP_SHARED, 6 * ps, at[2]); /* pages 6, 7 */
    ASSERT_TRUE((a != NULL) && (b != NULL) && (c != NULL)) << strerror(errno);
    check({range_t((uintptr_t)b, len), range_t((uintptr_t)c, 2 * ps)},
          [&]() { return madvise(a + 2 * ps, 5 * ps, MADV_REMOVE); }, 6,
          {range_t((uintptr_t)b + 2 * ps, 5 * ps), range_t((uintptr_t)c, ps)});
}

/* Shared anonymous memory duplicated by mremap(old_size = 0): one object,
 * two mappings; a hole punched through the copy reaches the original. */
TEST_F(Filemap, MadviseRemoveThroughMremapDuplicate)
{
    const size_t ps = page_size(), len = 4 * ps;
    char *a = (char *)mmap(NULL, len, PROT_READ | PROT_WRITE,
                           MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    char *b;

    ASSERT_NE(MAP_FAILED, (void *)a) << strerror(errno);
    m_maps.push_back(std::make_pair(a, len));
    warm_up();
    b = (char *)mremap(a, 0, len, MREMAP_MAYMOVE);
    if ((b == MAP_FAILED) && (errno == EINVAL) && on_valgrind()) {
        GTEST_SKIP() << "valgrind does not emulate mremap(old_size = 0)";
    }
    ASSERT_NE(MAP_FAILED, (void *)b) << strerror(errno);
    m_maps.push_back(std::make_pair(b, len));
    check({range_t((uintptr_t)a, len)},
          [&]() { return madvise(b + ps, 2 * ps, MADV_REMOVE); }, 2,
          {range_t((uintptr_t)a + ps, 2 * ps)});
}

/* SysV shared memory attached twice: MADV_REMOVE through one attachment
 * removes the pages of the other. */
TEST_F(Filemap, SysvSameSegmentTwiceMadviseRemove)
{
    const size_t ps = page_size(), len = 4 * ps;
    int id = shm_create(len);
    char *a, *b;

    ASSERT_GE(id, 0) << strerror(errno);
    a = shm_attach(id);
    b = shm_attach(id);
    ASSERT_TRUE((a != NULL) && (b != NULL)) << strerror(errno);
    check({range_t((uintptr_t)b, len)},
          [&]() { return madvise(a, 3 * ps, MADV_REMOVE); }, 3,
          {range_t((uintptr_t)b, 3 * ps)});
}

/* After IPC_RMID the attachments still share the pages; after shmdt the
 * detached range is no longer named. */
TEST_F(Filemap, SysvRemovedIdThenDetach)
{
    const size_t ps = page_size(), len = 4 * ps;
    int id = shm_create(len);
    char *a, *b;

    ASSERT_GE(id, 0) << strerror(errno);
    a = shm_attach(id);
    b = shm_attach(id);
    ASSERT_TRUE((a != NULL) && (b != NULL)) << strerror(errno);
    ASSERT_EQ(0, shmctl(id, IPC_RMID, NULL));
    check({range_t((uintptr_t)b, len)},
          [&]() { return madvise(a + ps, ps, MADV_REMOVE); }, 1,
          {range_t((uintptr_t)b + ps, ps)});
    shm_detach(a);
    oracle::reset();
    oracle::arm();
    ASSERT_EQ(0, madvise(b, len, MADV_REMOVE)) << strerror(errno);
    oracle::check();
    EXPECT_EQ(0u, oracle::events(UCM_EVENT_VM_UNMAPPED, a, len).size())
        << "the detached attachment is still in the table";
    EXPECT_FALSE(oracle::events(UCM_EVENT_VM_UNMAPPED, b, len).empty());
}

/* ---- mappings libucm did not see being made ---- */

/* (An inline syscall instruction, ucmt_rawsys(): syscall() is hooked.) */

/* Mapped with the raw system call, after the table is in use: a lookup of a
 * file it knows no mapping of reads /proc/self/maps. */
TEST_F(Filemap, RawSyscallMappingFound)
{
    const size_t ps = page_size(), len = 4 * ps;
    int fd = memfd(len);
    char *p;

    ASSERT_GE(fd, 0) << strerror(errno);
    warm_up();
    p = (char *)ucmt_rawsys(SYS_mmap, NULL, len, PROT_READ | PROT_WRITE,
                            MAP_SHARED, fd, 0);
    ASSERT_NE(MAP_FAILED, (void *)p) << strerror(errno);
    m_maps.push_back(std::make_pair(p, len));
    check({range_t((uintptr_t)p, len)},
          [&]() { return ftruncate(fd, (off_t)ps); }, 3,
          {range_t((uintptr_t)p + ps, 3 * ps)});
    /* the rebuild that found it keeps it in the table */
    ASSERT_EQ(0, ftruncate(fd, (off_t)len));
    check({range_t((uintptr_t)p, len)}, [&]() { return ftruncate(fd, 0); }, 4,
          {range_t((uintptr_t)p, len)});
}

/* A file the table knows, mapped once more by the raw system call: a lookup
 * trusts the table until it is rebuilt, which a page-removing call on a
 * file it knows nothing of does (docs/internals-filemap.md). */
TEST_F(Filemap, RawSyscallMappingOfKnownFileAfterRebuild)
{
    const size_t ps = page_size(), len = 4 * ps;
    int fd = memfd(len), other = memfd(len);
    char *a, *r;

    ASSERT_TRUE((fd >= 0) && (other >= 0)) << strerror(errno);
    warm_up();
    a = map(fd, len);
    ASSERT_TRUE(a != NULL) << strerror(errno);
    r = (char *)ucmt_rawsys(SYS_mmap, NULL, len, PROT_READ | PROT_WRITE,
                            MAP_SHARED, fd, 0);
    ASSERT_NE(MAP_FAILED, (void *)r) << strerror(errno);
    m_maps.push_back(std::make_pair(r, len));
    ASSERT_EQ(0, ftruncate(other, 0)); /* not mapped: rebuilds the table */
    check({range_t((uintptr_t)a, len), range_t((uintptr_t)r, len)},
          [&]() { return ftruncate(fd, (off_t)(2 * ps)); }, 4,
          {range_t((uintptr_t)a + 2 * ps, 2 * ps),
           range_t((uintptr_t)r + 2 * ps, 2 * ps)});
}

/* ---- the table follows changes of the mappings ---- */

/* The middle of a mapping unmapped: the two pieces are reported, the hole
 * is not. */
TEST_F(Filemap, PartialMunmapThenTruncate)
{
    const size_t ps = page_size(), len = 8 * ps;
    int fd = memfd(len);
    char *p;

    ASSERT_GE(fd, 0) << strerror(errno);
    warm_up();
    p = map(fd, len);
    ASSERT_TRUE(p != NULL) << strerror(errno);
    ASSERT_EQ(0, munmap(p + 3 * ps, 2 * ps));
    check(
        {range_t((uintptr_t)p, 3 * ps), range_t((uintptr_t)p + 5 * ps, 3 * ps)},
        [&]() { return ftruncate(fd, (off_t)(2 * ps)); }, 4,
        {range_t((uintptr_t)p + 2 * ps, ps),
         range_t((uintptr_t)p + 5 * ps, 3 * ps)});
    oracle::disarm();
    EXPECT_EQ(
        0u,
        oracle::events(UCM_EVENT_VM_UNMAPPED, p + 3 * ps, 2 * ps, tid()).size())
        << "the unmapped hole is still in the table";
}

/* Moved and grown by mremap: the new place is reported, the old is not. */
TEST_F(Filemap, MremapMoveThenTruncate)
{
    const size_t ps = page_size(), len = 4 * ps;
    std::vector<char *> at = places(2, 2 * len);
    int fd                 = memfd(2 * len);
    char *p, *q;

    if (on_valgrind()) {
        GTEST_SKIP() << "valgrind does not mark the pages an mremap adds to a "
                        "moved file mapping as accessible (touching them is "
                        "reported as invalid)";
    }
    ASSERT_GE(fd, 0) << strerror(errno);
    ASSERT_EQ(2u, at.size());
    warm_up();
    p = (char *)mmap(at[0], len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                     fd, ps); /* pages 1..4 */
    ASSERT_NE(MAP_FAILED, (void *)p) << strerror(errno);
    q = (char *)mremap(p, len, 6 * ps, MREMAP_MAYMOVE | MREMAP_FIXED, at[1]);
    ASSERT_EQ(at[1], q) << strerror(errno);
    m_maps.push_back(std::make_pair(q, 6 * ps));
    /* q maps file pages 1..6; truncating to 3 pages removes 3..6 */
    check({range_t((uintptr_t)q, 6 * ps)},
          [&]() { return ftruncate(fd, (off_t)(3 * ps)); }, 4,
          {range_t((uintptr_t)q + 2 * ps, 4 * ps)});
    EXPECT_EQ(0u, oracle::events(UCM_EVENT_VM_UNMAPPED, p, len, tid()).size())
        << "the old place of the moved mapping is still in the table";
}

/* Shrunk, then grown again in place. */
TEST_F(Filemap, MremapInPlaceThenTruncate)
{
    const size_t ps = page_size(), len = 8 * ps;
    std::vector<char *> at = places(1, len);
    int fd                 = memfd(len);
    char *p;

    ASSERT_GE(fd, 0) << strerror(errno);
    ASSERT_EQ(1u, at.size());
    warm_up();
    p = map(fd, len, MAP_SHARED, 0, at[0]);
    ASSERT_TRUE(p != NULL) << strerror(errno);
    ASSERT_EQ(p, mremap(p, len, 2 * ps, 0)) << strerror(errno);
    ASSERT_EQ(p, mremap(p, 2 * ps, 6 * ps, 0)) << strerror(errno);
    check({range_t((uintptr_t)p, 6 * ps)},
          [&]() { return ftruncate(fd, (off_t)ps); }, 5,
          {range_t((uintptr_t)p + ps, 5 * ps)});
    EXPECT_EQ(
        0u,
        oracle::events(UCM_EVENT_VM_UNMAPPED, p + 6 * ps, 2 * ps, tid()).size())
        << "the released tail is still in the table";
}

/* Anonymous memory mapped over part of a file mapping (MAP_FIXED). */
TEST_F(Filemap, MapFixedOverFileMapping)
{
    const size_t ps = page_size(), len = 8 * ps;
    int fd = memfd(len);
    char *p;

    ASSERT_GE(fd, 0) << strerror(errno);
    warm_up();
    p = map(fd, len);
    ASSERT_TRUE(p != NULL) << strerror(errno);
    ASSERT_EQ((void *)(p + 2 * ps),
              mmap(p + 2 * ps, 2 * ps, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0));
    check(
        {range_t((uintptr_t)p, 2 * ps), range_t((uintptr_t)p + 4 * ps, 4 * ps)},
        [&]() { return ftruncate(fd, 0); }, 6,
        {range_t((uintptr_t)p, 2 * ps),
         range_t((uintptr_t)p + 4 * ps, 4 * ps)});
    EXPECT_EQ(
        0u,
        oracle::events(UCM_EVENT_VM_UNMAPPED, p + 2 * ps, 2 * ps, tid()).size())
        << "the replaced range is still in the table";
}

/* More mappings than the table holds: lookups read /proc/self/maps, and
 * still find all. */
TEST_F(Filemap, MoreMappingsThanTableSlots)
{
    const size_t ps = page_size(), n = scaled(4400, 600);
    int fd = memfd(2 * ps);
    std::vector<range_t> watched, expected;

    ASSERT_GE(fd, 0) << strerror(errno);
    warm_up();
    for (size_t i = 0; i < n; ++i) {
        char *p = map(fd, 2 * ps);
        ASSERT_TRUE(p != NULL) << i << ": " << strerror(errno);
        watched.push_back(range_t((uintptr_t)p + ps, ps));
        expected.push_back(range_t((uintptr_t)p + ps, ps));
    }
    check(
        watched, [&]() { return ftruncate(fd, (off_t)ps); }, n, expected,
        false);
}

/* Other threads map and unmap files while mappings of one file lose pages:
 * every lost page is reported. */
TEST_F(Filemap, ConcurrentMappingChanges)
{
    const size_t ps = page_size(), len = 8 * ps;
    const unsigned rounds  = scaled(200, 20);
    std::vector<char *> at = places(2, len);
    std::atomic<bool> stop(false);
    int fd = memfd(len), other = memfd(4 * ps);
    std::vector<std::thread> threads;
    char *a, *b;

    ASSERT_TRUE((fd >= 0) && (other >= 0)) << strerror(errno);
    ASSERT_EQ(2u, at.size());
    a = map(fd, len, MAP_SHARED, 0, at[0]);
    b = map(fd, len, MAP_SHARED, 0, at[1]);
    ASSERT_TRUE((a != NULL) && (b != NULL)) << strerror(errno);
    for (int t = 0; t < 2; ++t) {
        threads.push_back(std::thread([&]() {
            while (!stop.load()) {
                void *q = mmap(NULL, 4 * ps, PROT_READ | PROT_WRITE, MAP_SHARED,
                               other, 0);
                if (q != MAP_FAILED) {
                    munmap((char *)q + ps, ps);
                    munmap(q, 4 * ps);
                }
            }
        }));
    }
    for (unsigned r = 0; (r < rounds) && !HasFailure(); ++r) {
        ASSERT_EQ(0, ftruncate(fd, (off_t)len));
        oracle::reset();
        touch(a, len);
        touch(b, len);
        ASSERT_EQ(16u, oracle::watch(a, len) + oracle::watch(b, len));
        oracle::arm();
        ASSERT_EQ(0, ftruncate(fd, (off_t)(2 * ps)));
        oracle_stats s = oracle::check();
        EXPECT_EQ(12u, s.changed) << s.str();
        UCMT_EXPECT_COVERED(s);
    }
    stop.store(true);
    for (size_t t = 0; t < threads.size(); ++t) {
        threads[t].join();
    }
}

/* ---- fresh processes ---- */

/* Mapped before any handler exists (no hooks yet, so no table): the first
 * lookup seeds the table from /proc/self/maps. */
UCMT_CHILD_SCENARIO(filemap_mapped_before_hooks)
{
    const size_t ps = page_size(), len = 8 * ps;
    int fd = memfd_create("ucmt-fresh", MFD_CLOEXEC);
    char *a, *b;
    int fd2;

    if ((fd < 0) || (ftruncate(fd, (off_t)len) != 0)) {
        return 3;
    }
    a = (char *)mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    b = (char *)mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if ((a == MAP_FAILED) || (b == MAP_FAILED)) {
        return 3;
    }
    if (ucm_hooks_installed_mode() != UCM_MMAP_HOOK_NONE) {
        printf("hooks already installed: the scenario is not fresh\n");
        return 4;
    }
    if (ucm_set_event_handler(UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED, 0,
                              oracle::callback, NULL) != UCS_OK) {
        return 5;
    }
    oracle::reset();
    touch(a, len);
    touch(b, len);
    if (oracle::watch(a, len) + oracle::watch(b, len) != 16) {
        return 6;
    }
    oracle::arm();
    fd2 = dup(fd);
    if (ftruncate(fd2, (off_t)(5 * ps)) != 0) {
        return 7;
    }
    oracle_stats s = oracle::check();
    printf("%s\n", s.str().c_str());
    if ((s.changed != 6) || (s.uncovered != 0)) {
        return 8;
    }
    if (oracle::events(UCM_EVENT_VM_UNMAPPED, a + 5 * ps, 3 * ps).empty() ||
        oracle::events(UCM_EVENT_VM_UNMAPPED, b + 5 * ps, 3 * ps).empty()) {
        return 9;
    }
    return 0;
}

TEST(FilemapFresh, MappedBeforeHooks)
{
    std::string reason;

    if (!hooks_available(&reason)) {
        GTEST_SKIP() << reason;
    }
    if (!pfn_available()) {
        GTEST_SKIP() << "no page frame numbers (needs root)";
    }
    child_result r = run_self("filemap_mapped_before_hooks", {});
    EXPECT_TRUE(r.exited_ok())
        << "3: setup, 4: not fresh, 5: handler, 6: watch, 7: ftruncate, "
           "8: pages not covered, 9: a mapping not reported\n"
        << r.str();
}

/* The loader maps a library behind libucm's back (dlopen); the table knew
 * the file already from a mapping of the program's, so only the loader's
 * adds/subs counters tell that it must be rebuilt.  Truncating the library
 * file must report the loader's mapping. */
struct dl_find_ctx {
    const char *path;
    uintptr_t start, end; /* first loadable segment */
};

static int dl_find_cb(struct dl_phdr_info *info, size_t, void *arg)
{
    dl_find_ctx *ctx = (dl_find_ctx *)arg;

    if ((info->dlpi_name == NULL) || strcmp(info->dlpi_name, ctx->path)) {
        return 0;
    }
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        if (info->dlpi_phdr[i].p_type == PT_LOAD) {
            ctx->start = align_down(
                info->dlpi_addr + info->dlpi_phdr[i].p_vaddr, page_size());
            ctx->end = align_up(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr +
                                    info->dlpi_phdr[i].p_filesz,
                                page_size());
            return 1;
        }
    }
    return 0;
}

static bool copy_file(const char *from, const char *to)
{
    char buf[65536];
    int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT, 0700);
    ssize_t n;
    bool ok = (in >= 0) && (out >= 0);

    while (ok && ((n = read(in, buf, sizeof(buf))) > 0)) {
        ok = (write(out, buf, n) == n);
    }
    if (in >= 0) {
        close(in);
    }
    if (out >= 0) {
        close(out);
    }
    return ok;
}

static int filemap_dlopen_check()
{
    const size_t ps = page_size();
    char path[]     = "/tmp/ucmt-filemap-dl-XXXXXX";
    dl_find_ctx ctx = {path, 0, 0};
    struct stat st;
    int fd, mfd;
    void *p;

    fd = mkstemp(path);
    if ((fd < 0) || !copy_file(UCMT_LIBDIR "/libucmt_dl.so", path)) {
        printf("cannot copy the test library: %s\n", strerror(errno));
        return 3;
    }
    close(fd);
    if (ucm_set_event_handler(UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED, 0,
                              oracle::callback, NULL) != UCS_OK) {
        return 5;
    }
    /* the table is in use, and knows the file through a mapping of ours */
    mfd = memfd_create("ucmt-warm", MFD_CLOEXEC);
    if ((mfd < 0) || (ftruncate(mfd, 2 * ps) != 0) ||
        (mmap(NULL, 2 * ps, PROT_READ, MAP_SHARED, mfd, 0) == MAP_FAILED) ||
        (ftruncate(mfd, ps) != 0)) {
        return 3;
    }
    fd = open(path, O_RDONLY);
    if ((fd < 0) || (fstat(fd, &st) != 0) ||
        ((p = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0)) ==
         MAP_FAILED)) {
        return 3;
    }
    if (dlopen(path, RTLD_NOW | RTLD_LOCAL) == NULL) {
        printf("dlopen: %s\n", dlerror());
        return 3;
    }
    dl_iterate_phdr(dl_find_cb, &ctx);
    if (ctx.start == 0) {
        printf("the library's segments not found\n");
        return 3;
    }
    oracle::reset();
    for (uintptr_t a = ctx.start; a < ctx.end; a += ps) {
        readable((void *)a);
    }
    if (oracle::watch((void *)ctx.start, ctx.end - ctx.start) == 0) {
        return 6;
    }
    oracle::arm();
    if (truncate(path, 0) != 0) {
        return 7;
    }
    oracle_stats s = oracle::check();
    printf("%s\n", s.str().c_str());
    unlink(path);
    if (s.uncovered != 0) {
        return 8;
    }
    if (oracle::events(UCM_EVENT_VM_UNMAPPED, (void *)ctx.start,
                       ctx.end - ctx.start)
            .empty()) {
        return 9;
    }
    return 0;
}

UCMT_CHILD_SCENARIO(filemap_dlopen_after_mapping)
{
    /* the library's pages are gone: run no destructor of it */
    int code = filemap_dlopen_check();

    fflush(stdout);
    _exit(code);
}

TEST(FilemapFresh, LoaderMappingOfKnownFile)
{
    std::string reason;

    if (!hooks_available(&reason)) {
        GTEST_SKIP() << reason;
    }
    if (!pfn_available()) {
        GTEST_SKIP() << "no page frame numbers (needs root)";
    }
    child_result r = run_self("filemap_dlopen_after_mapping", {});
    EXPECT_TRUE(r.exited_ok())
        << "3: setup, 5: handler, 6: watch, 7: truncate, 8: pages not "
           "covered, 9: the loader's mapping not reported\n"
        << r.str();
}

} // namespace
