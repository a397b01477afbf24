/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Memory calls made through libc's syscall(): libucm hooks syscall() itself
 * (GOT/PLT slots in reloc mode, libc's entry in bistro mode) and routes
 * every number that maps, unmaps or removes pages to the hook of the named
 * function.  Oracle: the page frames of the watched ranges; every page
 * whose frame changed must have been reported while it was still the old
 * one, and the events must name exactly the removed pages.  The other
 * numbers are forwarded untouched (arguments, result, errno).
 */
#include "common/ucm_test.h"
#include "file_fixture.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <functional>
#include <string>

namespace
{

using namespace ucmt;

class Rawsys : public ucmt::file_test
{
  protected:
    int memfd(size_t len)
    {
        return file_test::memfd(len, "ucmt-rawsys");
    }

    /* a file of len bytes in /dev/shm; -1 (errno set) if none */
    int shm_file(size_t len, std::string *path)
    {
        char tmpl[] = "/dev/shm/ucmt-rawsys-XXXXXX";
        int fd      = keep_fd(mkstemp(tmpl));

        if (fd < 0) {
            return -1;
        }
        m_paths.push_back(tmpl);
        *path = tmpl;
        return (ftruncate(fd, (off_t)len) == 0) ? fd : -1;
    }

    /* the same file mapped twice, apart from each other */
    void map_twice(int fd, size_t len, char **a, char **b)
    {
        char *r = (char *)free_range(4 * len);

        ASSERT_TRUE(r != NULL);
        *a = map(fd, len, MAP_SHARED, 0, r);
        *b = map(fd, len, MAP_SHARED, 0, r + 2 * len);
        ASSERT_TRUE((*a != NULL) && (*b != NULL)) << strerror(errno);
    }

    /* a truncation of another mapped memfd: the table is in use from now */
    void warm_up()
    {
        int fd = memfd(2 * page_size());

        ASSERT_GE(fd, 0);
        ASSERT_TRUE(map(fd, 2 * page_size()) != NULL);
        ASSERT_EQ(0, ftruncate(fd, (off_t)page_size()));
    }

    /* removal of file pages: reported before and after the call */
    void check_file(const std::vector<range_t> &watched,
                    const std::function<long()> &op, size_t changed,
                    const std::vector<range_t> &expected)
    {
        check_removal(
            watched, [&]() { return (int)op(); }, changed, expected, true, true,
            false);
    }

    /* unmap-like removal: reported once, before */
    void check_gone(const std::vector<range_t> &watched,
                    const std::function<long()> &op, size_t changed,
                    const std::vector<range_t> &expected)
    {
        check_removal(
            watched, [&]() { return (int)op(); }, changed, expected, true,
            false, false);
    }
};

/* ---- pages of a shared file ---- */

TEST_F(Rawsys, FtruncateReportsEveryMapping)
{
    const size_t ps = page_size(), len = 8 * ps;
    int fd = memfd(len);
    char *a, *b;

    ASSERT_GE(fd, 0) << strerror(errno);
    map_twice(fd, len, &a, &b);
    check_file({range_t((uintptr_t)a, len), range_t((uintptr_t)b, len)},
               [&]() { return syscall(SYS_ftruncate, fd, (off_t)(3 * ps)); },
               10,
               {range_t((uintptr_t)a + 3 * ps, 5 * ps),
                range_t((uintptr_t)b + 3 * ps, 5 * ps)});
}

TEST_F(Rawsys, FallocatePunchHoleReportsEveryMapping)
{
    const size_t ps = page_size(), len = 8 * ps;
    int fd = memfd(len);
    char *a, *b;

    ASSERT_GE(fd, 0) << strerror(errno);
    map_twice(fd, len, &a, &b);
    check_file({range_t((uintptr_t)a, len), range_t((uintptr_t)b, len)},
               [&]() {
                   return syscall(SYS_fallocate, fd,
                                  FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                                  (off_t)(2 * ps), (off_t)(3 * ps));
               },
               6,
               {range_t((uintptr_t)a + 2 * ps, 3 * ps),
                range_t((uintptr_t)b + 2 * ps, 3 * ps)});
}

TEST_F(Rawsys, TruncatePath)
{
    const size_t ps = page_size(), len = 4 * ps;
    std::string path;
    int fd = shm_file(len, &path);
    char *a;

    if (fd < 0) {
        GTEST_SKIP() << "no file in /dev/shm: " << strerror(errno);
    }
    a = map(fd, len);
    ASSERT_TRUE(a != NULL) << strerror(errno);
    check_file({range_t((uintptr_t)a, len)},
               [&]() { return syscall(SYS_truncate, path.c_str(), (off_t)ps); },
               3, {range_t((uintptr_t)a + ps, 3 * ps)});
}

/* open(O_TRUNC) empties the file: every mapped page goes. */
TEST_F(Rawsys, OpenatTruncEmptiesFile)
{
    const size_t ps = page_size(), len = 4 * ps;
    std::string path;
    int fd = shm_file(len, &path);
    char *a;

    if (fd < 0) {
        GTEST_SKIP() << "no file in /dev/shm: " << strerror(errno);
    }
    a = map(fd, len);
    ASSERT_TRUE(a != NULL) << strerror(errno);
    check_file({range_t((uintptr_t)a, len)},
               [&]() {
                   long r = syscall(SYS_openat, AT_FDCWD, path.c_str(),
                                    O_RDWR | O_TRUNC | O_CLOEXEC);
                   return (r < 0) ? r : keep_fd((int)r) * 0L;
               },
               4, {range_t((uintptr_t)a, len)});
}

/* creat() and openat2(O_TRUNC) empty the file as well. */
TEST_F(Rawsys, CreatAndOpenat2TruncEmptyFile)
{
    const size_t ps = page_size(), len = 4 * ps;
    struct {
        uint64_t flags, mode, resolve;
    } how = {O_RDWR | O_TRUNC | O_CLOEXEC, 0, 0};
    std::string path;
    int fd = shm_file(len, &path);
    char *a;

    if (fd < 0) {
        GTEST_SKIP() << "no file in /dev/shm: " << strerror(errno);
    }
    a = map(fd, len);
    ASSERT_TRUE(a != NULL) << strerror(errno);
    check_file({range_t((uintptr_t)a, len)},
               [&]() {
                   long r = syscall(SYS_creat, path.c_str(), 0600);
                   return (r < 0) ? r : keep_fd((int)r) * 0L;
               },
               4, {range_t((uintptr_t)a, len)});
    ASSERT_EQ(0, ftruncate(fd, (off_t)len)) << strerror(errno);
    if (on_valgrind()) {
        GTEST_SKIP() << "valgrind does not emulate openat2";
    }
    check_file({range_t((uintptr_t)a, len)},
               [&]() {
                   long r = syscall(SYS_openat2, AT_FDCWD, path.c_str(), &how,
                                    sizeof(how));
                   return (r < 0) ? r : keep_fd((int)r) * 0L;
               },
               4, {range_t((uintptr_t)a, len)});
}

/* remap_file_pages() puts other pages of the file at the address. */
TEST_F(Rawsys, RemapFilePages)
{
    const size_t ps = page_size(), len = 4 * ps;
    int fd = memfd(len);
    char *a;

    if (on_valgrind()) {
        GTEST_SKIP() << "valgrind does not emulate remap_file_pages";
    }
    ASSERT_GE(fd, 0) << strerror(errno);
    a = map(fd, len);
    ASSERT_TRUE(a != NULL) << strerror(errno);
    check_gone({range_t((uintptr_t)a, len)},
               [&]() { return syscall(SYS_remap_file_pages, a, ps, 0, 2, 0); },
               1, {range_t((uintptr_t)a, ps)});
}

/* MADV_REMOVE through one mapping removes the pages of the other. */
TEST_F(Rawsys, MadviseRemoveReportsOtherMapping)
{
    const size_t ps = page_size(), len = 8 * ps;
    int fd = memfd(len);
    char *a, *b;

    ASSERT_GE(fd, 0) << strerror(errno);
    map_twice(fd, len, &a, &b);
    check_file(
        {range_t((uintptr_t)b, len)},
        [&]() { return syscall(SYS_madvise, a + 2 * ps, 3 * ps, MADV_REMOVE); },
        3, {range_t((uintptr_t)b + 2 * ps, 3 * ps)});
}

/* A file the table knows, mapped once more through syscall(SYS_mmap): the
 * hook feeds the table, so a truncation finds the new mapping without a
 * rebuild. */
TEST_F(Rawsys, MmapOfKnownFileThenTruncate)
{
    const size_t ps = page_size(), len = 4 * ps;
    int fd = memfd(len);
    char *a, *r;

    ASSERT_GE(fd, 0) << strerror(errno);
    warm_up();
    a = map(fd, len);
    ASSERT_TRUE(a != NULL) << strerror(errno);
    r = (char *)syscall(SYS_mmap, NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED,
                        fd, 0);
    ASSERT_NE(MAP_FAILED, (void *)r) << strerror(errno);
    m_maps.push_back(std::make_pair(r, len));
    check_file({range_t((uintptr_t)a, len), range_t((uintptr_t)r, len)},
               [&]() { return ftruncate(fd, (off_t)(2 * ps)); }, 4,
               {range_t((uintptr_t)a + 2 * ps, 2 * ps),
                range_t((uintptr_t)r + 2 * ps, 2 * ps)});
}

/* ---- SysV shared memory ---- */

TEST_F(Rawsys, ShmatShmdtExactSize)
{
    const size_t ps = page_size(), size = 5 * ps + 7;
    int id = shmget(IPC_PRIVATE, size, IPC_CREAT | 0600);
    char *p;

    ASSERT_GE(id, 0) << strerror(errno);
    m_ids.push_back(id);
    p = (char *)syscall(SYS_shmat, id, NULL, 0);
    ASSERT_NE((void *)-1, (void *)p) << strerror(errno);
    ASSERT_EQ(0, shmctl(id, IPC_RMID, NULL));
    check_gone({range_t((uintptr_t)p, 6 * ps)},
               [&]() { return syscall(SYS_shmdt, p); }, 6,
               {range_t((uintptr_t)p, 6 * ps)});
}

/* ---- anonymous memory ---- */

TEST_F(Rawsys, MunmapPart)
{
    const size_t ps = page_size(), len = 8 * ps;
    char *p = (char *)map_anon(len);

    ASSERT_TRUE(p != NULL);
    m_maps.push_back(std::make_pair(p, len));
    check_gone({range_t((uintptr_t)p, len)},
               [&]() { return syscall(SYS_munmap, p + 2 * ps, 3 * ps); }, 3,
               {range_t((uintptr_t)p + 2 * ps, 3 * ps)});
}

TEST_F(Rawsys, MadviseDontneed)
{
    const size_t ps = page_size(), len = 4 * ps;
    char *p = (char *)map_anon(len);

    ASSERT_TRUE(p != NULL);
    m_maps.push_back(std::make_pair(p, len));
    check_gone(
        {range_t((uintptr_t)p, len)},
        [&]() { return syscall(SYS_madvise, p + ps, 2 * ps, MADV_DONTNEED); },
        2, {range_t((uintptr_t)p + ps, 2 * ps)});
}

TEST_F(Rawsys, MmapFixedOverMapping)
{
    const size_t ps = page_size(), len = 4 * ps;
    char *p = (char *)map_anon(len);

    ASSERT_TRUE(p != NULL);
    m_maps.push_back(std::make_pair(p, len));
    check_gone({range_t((uintptr_t)p, len)},
               [&]() {
                   long r =
                       syscall(SYS_mmap, p + ps, 2 * ps, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
                   return (r == (long)(p + ps)) ? 0L : -1L;
               },
               2, {range_t((uintptr_t)p + ps, 2 * ps)});
}

TEST_F(Rawsys, MremapMove)
{
    const size_t ps = page_size(), len = 4 * ps;
    char *p  = (char *)map_anon(len);
    char *to = (char *)free_range(len);

    ASSERT_TRUE((p != NULL) && (to != NULL));
    m_maps.push_back(std::make_pair(to, len));
    check_gone({range_t((uintptr_t)p, len)},
               [&]() {
                   long r = syscall(SYS_mremap, p, len, len,
                                    MREMAP_MAYMOVE | MREMAP_FIXED, to);
                   return (r == (long)to) ? 0L : -1L;
               },
               4, {range_t((uintptr_t)p, len)});
}

TEST_F(Rawsys, ProcessMadviseSelf)
{
    const size_t ps = page_size(), len = 4 * ps;
    char *p = (char *)map_anon(len);
    struct iovec iov;
    long pidfd;

    ASSERT_TRUE(p != NULL);
    m_maps.push_back(std::make_pair(p, len));
    pidfd = syscall(SYS_pidfd_open, getpid(), 0);
    if (pidfd < 0) {
        GTEST_SKIP() << "pidfd_open: " << strerror(errno);
    }
    keep_fd((int)pidfd);
    /* an empty vector: ENOSYS where the kernel, or valgrind, lacks it */
    if ((syscall(SYS_process_madvise, pidfd, &iov, 0, MADV_PAGEOUT, 0) < 0) &&
        (errno == ENOSYS)) {
        GTEST_SKIP() << "process_madvise: " << strerror(errno)
                     << " (Debian 13's valgrind does not know it)";
    }
    iov.iov_base = p + ps;
    iov.iov_len  = 2 * ps;
    /* MADV_PAGEOUT: anonymous pages go to swap, or stay where there is none
     * (at most the two advised pages change) */
    check_removal(
        {range_t((uintptr_t)p, len)},
        [&]() {
            long r =
                syscall(SYS_process_madvise, pidfd, &iov, 1, MADV_PAGEOUT, 0);
            return ((r == (long)(2 * ps)) || ((r < 0) && (errno == EINVAL)))
                       ? 0
                       : -1;
        },
        2, {range_t((uintptr_t)p + ps, 2 * ps)}, false, false, false);
}

/* ---- the break and the numbers that are only forwarded ---- */

/* The kernel's convention: the break after the call (never -1). */
TEST_F(Rawsys, BrkKeepsKernelConvention)
{
    void *cur = sbrk(0);

    errno = 12345;
    EXPECT_EQ((long)cur, syscall(SYS_brk, 0L));
    EXPECT_EQ((long)cur, syscall(SYS_brk, 1L)) << "a failed brk returns the "
                                                  "break";
    EXPECT_EQ(12345, errno);
}

TEST_F(Rawsys, ForwardsOtherNumbers)
{
    char src[64] = "six arguments through syscall()", dst[64] = {0};
    struct iovec local = {dst, sizeof(dst)}, remote = {src, sizeof(src)};

    EXPECT_EQ((long)getpid(), syscall(SYS_getpid));
    /* six arguments, the last one read from the stack */
    EXPECT_EQ((long)sizeof(src), syscall(SYS_process_vm_readv, getpid(), &local,
                                         1UL, &remote, 1UL, 0UL));
    EXPECT_STREQ(src, dst);
    errno = 0;
    EXPECT_EQ(-1, syscall(SYS_process_vm_readv, getpid(), &local, 1UL, &remote,
                          1UL, 1UL))
        << "a non-zero sixth argument must reach the kernel";
    EXPECT_EQ(EINVAL, errno);
    errno = 0;
    EXPECT_EQ(-1, syscall(SYS_close, -1));
    EXPECT_EQ(EBADF, errno);
    errno = 0;
    EXPECT_EQ(-1, syscall(SYS_munmap, (void *)1, page_size()));
    EXPECT_EQ(EINVAL, errno) << "a routed number keeps the errno of the call";
}

TEST_F(Rawsys, HookInstalledInRequestedMode)
{
    ucm_hook_info_t hooks[64];
    unsigned i, count = ucm_hooks_query(hooks, 64);

    for (i = 0; (i < count) && (i < 64); ++i) {
        if (!strcmp(hooks[i].symbol, "syscall")) {
            EXPECT_EQ(bistro_mode() ? UCM_HOOK_STATE_BISTRO
                                    : UCM_HOOK_STATE_RELOC,
                      hooks[i].state)
                << hooks[i].detail;
            return;
        }
    }
    ADD_FAILURE() << "ucm_hooks_query() lists no syscall entry";
}

} // namespace
