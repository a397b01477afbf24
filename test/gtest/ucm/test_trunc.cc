/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Page-cache truncation: ftruncate/truncate shrink and fallocate hole punch
 * take pages out of every mapping of the file without an unmap.  Each test
 * maps a file, records the page frames (oracle) and checks that every page
 * that lost its frame was reported by VM_UNMAPPED before, and that the
 * events name exactly the mapped addresses of the removed whole pages
 * (raised before the call and once more after it).
 */
#include "common/ucm_test.h"
#include "file_fixture.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

namespace
{

using namespace ucmt;

class Trunc : public ucmt::file_test
{
  protected:
    /* a memfd of len bytes, closed at the end of the test */
    int memfd(size_t len)
    {
        int fd = keep_fd(
            memfd_create("ucmt-trunc", MFD_CLOEXEC | MFD_ALLOW_SEALING));

        if ((fd >= 0) && (ftruncate(fd, (off_t)len) != 0)) {
            return -1;
        }
        return fd;
    }

    /* a file of len bytes in dir (tmpfs, ext4, ...), removed at the end;
     * its path in *path */
    int file_in(const char *dir, size_t len, std::string *path)
    {
        std::string tmpl = std::string(dir) + "/ucmt-trunc-XXXXXX";
        std::vector<char> buf(tmpl.begin(), tmpl.end());
        int fd;

        buf.push_back('\0');
        fd = mkstemp(&buf[0]);
        if (fd < 0) {
            return -1;
        }
        keep_fd(fd);
        m_paths.push_back(&buf[0]);
        *path = &buf[0];
        return (ftruncate(fd, (off_t)len) == 0) ? fd : -1;
    }

    /* file_in(dir or $TMPDIR or /tmp) that supports fallocate 'mode' (if
     * not 0); -1 with the reason in *skip if there is none */
    int file_with(const char *dir, size_t len, int mode, std::string *path,
                  std::string *skip)
    {
        int fd;

        if (dir == NULL) {
            dir = (getenv("TMPDIR") != NULL) ? getenv("TMPDIR") : "/tmp";
        }
        fd = file_in(dir, len, path);
        if (fd < 0) {
            *skip = std::string("no file in ") + dir + ": " + strerror(errno);
        } else if ((mode != 0) &&
                   (fallocate(fd, mode | FALLOC_FL_KEEP_SIZE, (off_t)len,
                              (off_t)page_size()) != 0) &&
                   (errno == EOPNOTSUPP)) {
            *skip = std::string(dir) + " does not support fallocate mode " +
                    std::to_string(mode);
            fd = -1;
        }
        return fd;
    }

    /* every change reported twice; kept pages faulted back in */
    void run_and_check(const std::vector<range_t> &watched,
                       const std::function<int()> &op, size_t changed,
                       const std::vector<range_t> &expected, bool exact = true)
    {
        check_removal(watched, op, changed, expected, exact, true, true);
    }

    /* shrink a shared mapping of fd (8 pages) to 3 pages + 100 bytes:
     * pages 4..7 go, the partial page 3 stays */
    void shrink_shared(int fd, const std::function<int(off_t)> &shrink)
    {
        const size_t ps = page_size(), len = 8 * ps;
        char *p;

        ASSERT_GE(fd, 0) << strerror(errno);
        p = map(fd, len, MAP_SHARED);
        ASSERT_TRUE(p != NULL) << strerror(errno);
        run_and_check({range_t((uintptr_t)p, len)},
                      [&]() { return shrink((off_t)(3 * ps + 100)); }, 4,
                      {range_t((uintptr_t)p + 4 * ps, 4 * ps)});
    }

    /* punch [ps + 10, 5 ps + 10) in a shared mapping of fd (8 pages): the
     * whole pages 2..4 go, the partial pages 1 and 5 are zeroed in place */
    /* exact: the file system keeps no large folio straddling the hole
     * (memfd); otherwise a page in it may be zeroed in place instead */
    void punch_shared(int fd, int (*falloc)(int, int, off_t, off_t),
                      bool exact = true)
    {
        const size_t ps = page_size(), len = 8 * ps;
        char *p;

        ASSERT_GE(fd, 0) << strerror(errno);
        p = map(fd, len, MAP_SHARED);
        ASSERT_TRUE(p != NULL) << strerror(errno);
        run_and_check(
            {range_t((uintptr_t)p, len)},
            [&]() {
                return falloc(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                              (off_t)ps + 10, (off_t)(4 * ps));
            },
            3, {range_t((uintptr_t)p + 2 * ps, 3 * ps)}, exact);
    }
};

TEST_F(Trunc, FtruncateShrinkSharedMemfd)
{
    int fd = memfd(8 * page_size());

    shrink_shared(fd, [fd](off_t n) { return ftruncate(fd, n); });
}

TEST_F(Trunc, Ftruncate64ShrinkSharedMemfd)
{
    int fd = memfd(8 * page_size());

    shrink_shared(fd, [fd](off_t n) { return ftruncate64(fd, n); });
}

TEST_F(Trunc, PunchHoleSharedMemfd)
{
    punch_shared(memfd(8 * page_size()), fallocate);
}

TEST_F(Trunc, PunchHole64SharedMemfd)
{
    punch_shared(memfd(8 * page_size()), fallocate64);
}

/* The same file mapped at two addresses (and a third mapping of other
 * offsets): every mapping of the removed offsets is reported. */
TEST_F(Trunc, SameFileMappedTwice)
{
    const size_t ps = page_size(), len = 8 * ps;
    int fd  = memfd(len);
    char *r = (char *)free_range(5 * len);
    char *a, *b, *c;

    ASSERT_GE(fd, 0) << strerror(errno);
    ASSERT_TRUE(r != NULL);
    a = map(fd, len, MAP_SHARED, 0, r);
    b = map(fd, len, MAP_SHARED, 0, r + 2 * len);
    c = map(fd, 2 * ps, MAP_SHARED, 6 * ps, r + 4 * len); /* pages 6, 7 */
    ASSERT_TRUE((a != NULL) && (b != NULL) && (c != NULL)) << strerror(errno);
    run_and_check({range_t((uintptr_t)a, len), range_t((uintptr_t)b, len),
                   range_t((uintptr_t)c, 2 * ps)},
                  [&]() { return ftruncate(fd, (off_t)(5 * ps)); }, 3 + 3 + 2,
                  {range_t((uintptr_t)a + 5 * ps, 3 * ps),
                   range_t((uintptr_t)b + 5 * ps, 3 * ps),
                   range_t((uintptr_t)c, 2 * ps)});
}

/* More mappings than libucm gathers in one batch: all are reported, also
 * after the call (from a second walk of /proc/self/maps). */
TEST_F(Trunc, ManyMappingsAllReported)
{
    const size_t ps = page_size(), n = 40;
    int fd = memfd(2 * ps);
    std::vector<range_t> watched, expected;
    size_t i;

    ASSERT_GE(fd, 0) << strerror(errno);
    for (i = 0; i < n; ++i) {
        char *p = map(fd, 2 * ps, MAP_SHARED);
        ASSERT_TRUE(p != NULL) << strerror(errno);
        watched.push_back(range_t((uintptr_t)p, 2 * ps));
        expected.push_back(range_t((uintptr_t)p + ps, ps));
    }
    run_and_check(
        watched, [&]() { return ftruncate(fd, (off_t)ps); }, n, expected);
}

/* A mapping split in two by mprotect is one range of the file: one event. */
TEST_F(Trunc, SplitMappingOneRange)
{
    const size_t ps = page_size(), len = 8 * ps;
    int fd = memfd(len);
    char *p;

    ASSERT_GE(fd, 0) << strerror(errno);
    p = map(fd, len, MAP_SHARED);
    ASSERT_TRUE(p != NULL);
    touch(p, len);
    ASSERT_EQ(0, mprotect(p + 6 * ps, 2 * ps, PROT_READ));
    run_and_check({range_t((uintptr_t)p, 6 * ps)},
                  [&]() { return ftruncate(fd, (off_t)(2 * ps)); }, 4,
                  {range_t((uintptr_t)p + 2 * ps, 6 * ps)});
}

TEST_F(Trunc, TruncatePathTmpfs)
{
    std::string path, skip;
    int fd = file_with("/dev/shm", 8 * page_size(), 0, &path, &skip);

    if (fd < 0) {
        GTEST_SKIP() << skip;
    }
    shrink_shared(fd, [&](off_t n) { return truncate(path.c_str(), n); });
}

TEST_F(Trunc, Truncate64PathDiskFile)
{
    std::string path, skip;
    int fd = file_with(NULL, 8 * page_size(), 0, &path, &skip);

    if (fd < 0) {
        GTEST_SKIP() << skip;
    }
    shrink_shared(fd, [&](off_t n) { return truncate64(path.c_str(), n); });
}

TEST_F(Trunc, PunchHoleDiskFile)
{
    std::string path, skip;
    int fd =
        file_with(NULL, 8 * page_size(), FALLOC_FL_PUNCH_HOLE, &path, &skip);

    if (fd < 0) {
        GTEST_SKIP() << skip;
    }
    punch_shared(fd, fallocate, false);
}

/* COLLAPSE_RANGE moves the data after the range down: every page from the
 * offset on is dropped (ext4, xfs; block-aligned ranges only). */
TEST_F(Trunc, CollapseRangeDiskFile)
{
    const size_t ps = page_size(), len = 16 * ps;
    std::string path, skip;
    int fd = file_with(NULL, len, 0, &path, &skip);
    char *p;

    if (fd < 0) {
        GTEST_SKIP() << skip;
    }
    p = map(fd, len, MAP_SHARED);
    ASSERT_TRUE(p != NULL);
    touch(p, len);
    if ((fallocate(fd, FALLOC_FL_COLLAPSE_RANGE, (off_t)(14 * ps), (off_t)ps) !=
         0) &&
        ((errno == EOPNOTSUPP) || (errno == EINVAL))) {
        GTEST_SKIP() << "no FALLOC_FL_COLLAPSE_RANGE here: " << strerror(errno);
    }
    /* now 15 pages: collapse pages 4..7, pages 4..14 change */
    run_and_check(
        {range_t((uintptr_t)p, 15 * ps)},
        [&]() {
            return fallocate(fd, FALLOC_FL_COLLAPSE_RANGE, (off_t)(4 * ps),
                             (off_t)(4 * ps));
        },
        11, {range_t((uintptr_t)p + 4 * ps, 11 * ps)}, false);
}

/* ZERO_RANGE drops the page cache of the whole pages it zeroes (ext4, xfs;
 * tmpfs does not support it). */
TEST_F(Trunc, ZeroRangeDiskFile)
{
    const size_t ps = page_size(), len = 8 * ps;
    std::string path, skip;
    int fd = file_with(NULL, len, FALLOC_FL_ZERO_RANGE, &path, &skip);
    char *p;

    if (fd < 0) {
        GTEST_SKIP() << skip;
    }
    p = map(fd, len, MAP_SHARED);
    ASSERT_TRUE(p != NULL);
    oracle::reset();
    touch(p, len);
    ASSERT_EQ(len / ps, oracle::watch(p, len));
    oracle::arm();
    ASSERT_EQ(0, fallocate(fd, FALLOC_FL_ZERO_RANGE, 2 * ps, 3 * ps));
    refault_kept((uintptr_t)p, len, {range_t((uintptr_t)p + 2 * ps, 3 * ps)});
    oracle_stats s = oracle::check();
    record(s);
    UCMT_EXPECT_COVERED(s);
    std::vector<event_record> ev =
        oracle::events(UCM_EVENT_VM_UNMAPPED, p, len, tid());
    ASSERT_FALSE(ev.empty());
    EXPECT_EQ((uintptr_t)p + 2 * ps, ev[0].addr);
    EXPECT_EQ(3 * ps, ev[0].len);
}

/* Truncation drops the COW'd copies of a private mapping too (even_cows);
 * a hole punch zaps its page-cache pages (COW'd copies stay: allowed
 * over-report). */
TEST_F(Trunc, PrivateMapping)
{
    const size_t ps = page_size(), len = 8 * ps;
    int fd = memfd(len);
    char *p;

    ASSERT_GE(fd, 0) << strerror(errno);
    p = map(fd, len, MAP_PRIVATE);
    ASSERT_TRUE(p != NULL);
    run_and_check({range_t((uintptr_t)p, len)},
                  [&]() { return ftruncate(fd, (off_t)(6 * ps)); }, 2,
                  {range_t((uintptr_t)p + 6 * ps, 2 * ps)});
}

TEST_F(Trunc, PrivateMappingPunchReadOnlyPages)
{
    const size_t ps = page_size(), len = 8 * ps;
    int fd            = memfd(len);
    volatile char sum = 0;
    char *shared, *priv;
    size_t i;

    ASSERT_GE(fd, 0) << strerror(errno);
    shared = map(fd, len, MAP_SHARED);
    priv   = map(fd, len, MAP_PRIVATE);
    ASSERT_TRUE((shared != NULL) && (priv != NULL));
    touch(shared, len); /* page cache pages exist */
    oracle::reset();
    for (i = 0; i < len; i += ps) {
        sum += priv[i]; /* mapped read-only: the page cache page */
    }
    ASSERT_EQ(len / ps, oracle::watch(priv, len));
    oracle::arm();
    ASSERT_EQ(0, fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                           2 * ps, 2 * ps));
    refault_kept((uintptr_t)priv, len,
                 {range_t((uintptr_t)priv + 2 * ps, 2 * ps)});
    oracle_stats s = oracle::check();
    record(s);
    EXPECT_EQ(2u, s.changed) << s.str();
    UCMT_EXPECT_COVERED(s);
    (void)sum;
}

TEST_F(Trunc, GrowAndAllocateReportNothing)
{
    const size_t ps = page_size(), len = 4 * ps;
    int fd = memfd(len);
    char *p;

    ASSERT_GE(fd, 0) << strerror(errno);
    p = map(fd, 2 * len, MAP_SHARED);
    ASSERT_TRUE(p != NULL);
    touch(p, len);
    oracle::reset();
    ASSERT_EQ(len / ps, oracle::watch(p, len));
    oracle::arm();
    ASSERT_EQ(0, ftruncate(fd, (off_t)(2 * len)));
    ASSERT_EQ(0, ftruncate(fd, (off_t)(2 * len))); /* same size */
    ASSERT_EQ(0, fallocate(fd, 0, 0, (off_t)(2 * len)));
    ASSERT_EQ(0, fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)(3 * len)));
    /* a hole smaller than a page removes no whole page */
    ASSERT_EQ(0, fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 10,
                           (off_t)ps));
    oracle_stats s = oracle::check();
    EXPECT_EQ(0u, s.changed) << s.str();
    EXPECT_EQ(0u, oracle::events(UCM_EVENT_VM_UNMAPPED, NULL, 0, tid()).size())
        << "nothing was removed: no VM_UNMAPPED expected";
}

TEST_F(Trunc, UnmappedFileReportsNothing)
{
    const size_t ps = page_size();
    int fd          = memfd(8 * ps);
    char *other;

    ASSERT_GE(fd, 0) << strerror(errno);
    other = map(memfd(8 * ps), 8 * ps, MAP_SHARED); /* another file */
    ASSERT_TRUE(other != NULL);
    touch(other, 8 * ps);
    oracle::reset();
    oracle::arm();
    ASSERT_EQ(0, ftruncate(fd, (off_t)ps));
    ASSERT_EQ(0, fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
                           (off_t)ps));
    oracle::check();
    EXPECT_EQ(0u, oracle::events(UCM_EVENT_VM_UNMAPPED, NULL, 0, tid()).size())
        << "the file is not mapped: no VM_UNMAPPED expected";
}

TEST_F(Trunc, FailedCallReportsOnlyBefore)
{
    const size_t ps = page_size(), len = 4 * ps;
    int fd = memfd(len);
    char *p;

    ASSERT_GE(fd, 0) << strerror(errno);
    p = map(fd, len, MAP_SHARED);
    ASSERT_TRUE(p != NULL);
    ASSERT_EQ(0, fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK)) << strerror(errno);
    touch(p, len);
    oracle::reset();
    ASSERT_EQ(len / ps, oracle::watch(p, len));
    oracle::arm();
    EXPECT_EQ(-1, ftruncate(fd, (off_t)ps));
    EXPECT_EQ(EPERM, errno) << "errno of the original call must be kept";
    oracle_stats s = oracle::check();
    EXPECT_EQ(0u, s.changed);
    EXPECT_EQ(1u, oracle::events(UCM_EVENT_VM_UNMAPPED, p, len, tid()).size())
        << "a failed call: one event before it, none after";
}

TEST_F(Trunc, BadArgumentsKeepErrno)
{
    errno = 0;
    EXPECT_EQ(-1, ftruncate(-1, 0));
    EXPECT_EQ(EBADF, errno);
    EXPECT_EQ(-1, truncate("/nonexistent/ucmt", 0));
    EXPECT_EQ(ENOENT, errno);
    EXPECT_EQ(
        -1, fallocate(-1, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096));
    EXPECT_EQ(EBADF, errno);
}

/* The child's part of ForkChild: its exit code. */
static int fork_child_check(int fd, char *p, size_t len)
{
    const size_t ps = page_size();
    int code        = 0;

    oracle::reset();
    touch(p, len); /* fork does not copy shared file page tables */
    if (oracle::watch(p, len) != len / ps) {
        return 2;
    }
    oracle::arm();
    if (ftruncate(fd, (off_t)(4 * ps)) != 0) {
        return 3;
    }
    oracle_stats s = oracle::check();
    std::vector<event_record> ev =
        oracle::events(UCM_EVENT_VM_UNMAPPED, p, len, tid());
    if ((s.changed != 4) || (s.uncovered != 0)) {
        code = 4;
    } else if (ev.empty() || (ev[0].addr != (uintptr_t)p + 4 * ps) ||
               (ev[0].len != 4 * ps)) {
        code = 5;
    }
    /* pages past the end of the file must not stay mapped: valgrind's
     * leak check reads all mapped memory at exit (SIGBUS) */
    munmap(p, len);
    return code;
}

/* In a forked child the child's mappings are reported (its own maps). */
TEST_F(Trunc, ForkChild)
{
    const size_t ps = page_size(), len = 8 * ps;
    int fd = memfd(len);
    char *p;
    pid_t pid;

    ASSERT_GE(fd, 0) << strerror(errno);
    p = map(fd, len, MAP_SHARED);
    ASSERT_TRUE(p != NULL);
    touch(p, len);
    pid = fork();
    if (pid == 0) {
        _exit(fork_child_check(fd, p, len));
    }
    ASSERT_GT(pid, 0);
    int status = 0;
    bool timed_out;
    ASSERT_TRUE(wait_child(pid, 60, &status, &timed_out)) << "child hung";
    ASSERT_TRUE(WIFEXITED(status))
        << "child killed by signal " << WTERMSIG(status);
    EXPECT_EQ(0, WEXITSTATUS(status))
        << "2: no frames, 3: ftruncate failed, 4: pages not covered, "
           "5: wrong event range";
    /* the parent's mapping of the shared memfd lost the pages too */
    EXPECT_EQ(0u, pfn(p + 5 * ps));
}

/* ---- Open MPI's way: VM_UNMAPPED declared external ---- */

/* A GOT patcher of our own feeds ucm_vm_munmap, as Open MPI's does with
 * opal_common_ucx_opal_mem_hooks=1.  libucm's hooks are then not installed,
 * and ucm_test_external_events() must not expect truncation events that
 * only libucm's hooks raise.  (Regression: the truncation step of the
 * self-test failed there, and Open MPI warned that UCX cannot handle
 * VM_UNMAP.) */
void *(*ext_real_mmap)(void *, size_t, int, int, int, off_t);
int (*ext_real_munmap)(void *, size_t);
int (*ext_real_madvise)(void *, size_t, int);

void *ext_mmap(void *addr, size_t len, int prot, int flags, int fd,
               off_t offset)
{
    if (flags & MAP_FIXED) {
        ucm_vm_munmap(addr, len);
    }
    return ext_real_mmap(addr, len, prot, flags, fd, offset);
}

int ext_munmap(void *addr, size_t len)
{
    ucm_vm_munmap(addr, len);
    return ext_real_munmap(addr, len);
}

int ext_madvise(void *addr, size_t len, int advice)
{
    if (advice == MADV_DONTNEED) {
        ucm_vm_munmap(addr, len);
    }
    return ext_real_madvise(addr, len, advice);
}

UCMT_CHILD_SCENARIO(external_unmap_self_test)
{
    /* the real functions from dlsym: taking their address here would give
     * this binary GOT data slots for them, which changes how every other
     * test's calls are hooked (under ASan, bistro then reports each mmap
     * twice: through the patched slot and the patched libc entry) */
    void *real_mmap           = dlsym(RTLD_DEFAULT, "mmap");
    void *real_munmap         = dlsym(RTLD_DEFAULT, "munmap");
    void *real_madvise        = dlsym(RTLD_DEFAULT, "madvise");
    ucm_got_patch_t patches[] = {
        {"mmap", (void *)ext_mmap, real_mmap, NULL},
        {"munmap", (void *)ext_munmap, real_munmap, NULL},
        {"madvise", (void *)ext_madvise, real_madvise, NULL}};

    *(void **)&ext_real_mmap    = real_mmap;
    *(void **)&ext_real_munmap  = real_munmap;
    *(void **)&ext_real_madvise = real_madvise;
    ucm_set_external_event(UCM_EVENT_VM_UNMAPPED);
    if (ucm_got_patch_apply(patches, 3, NULL) != UCS_OK) {
        printf("ucm_got_patch_apply failed\n");
        return 1;
    }
    if (ucm_test_external_events(UCM_EVENT_VM_UNMAPPED) != UCS_OK) {
        printf("ucm_test_external_events(VM_UNMAPPED) failed\n");
        return 2;
    }
    return 0;
}

TEST(TruncExternal, SelfTestPassesWithExternalUnmapEvents)
{
    child_result r = run_self("external_unmap_self_test", {});

    EXPECT_TRUE(r.exited_ok()) << r.str();
}

} // namespace
