/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * userfaultfd monitor (UCX_MEM_UFFD): unmaps no hook sees are reported for
 * subscribed ranges, exactly, before the unmapping thread can look them up
 * again (ucm_uffd_drain_wait); every refusal and failure has a defined
 * outcome.  Oracles: page frames (pagemap), data read back, event ranges.
 *
 * uffd events come after the kernel unmapped the pages (unlike the hooks'
 * VM_UNMAPPED, which come before), so these tests check that the exact
 * range was reported by the time the system call returned and
 * ucm_uffd_drain_wait() returned, not the page oracle's "before the change".
 */
#include "common/ucm_test.h"
#include "rawsys.h"

#include <algorithm>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <linux/userfaultfd.h>
#include <stddef.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>

namespace
{

using namespace ucmt;

const int RW         = PROT_READ | PROT_WRITE;
const int ANON_FLAGS = MAP_PRIVATE | MAP_ANONYMOUS;

/* Did a VM_UNMAPPED recorded by the oracle cover exactly [addr, addr+len)? */
bool reported_exactly(const void *addr, size_t len)
{
    for (const event_record &e :
         oracle::events(UCM_EVENT_VM_UNMAPPED, addr, len)) {
        if ((e.addr == (uintptr_t)addr) && (e.len == len)) {
            return true;
        }
    }
    return false;
}

/* Subscriptions by range (their tokens), for the tests' convenience. */
std::mutex sub_lock;
std::multimap<std::pair<uintptr_t, size_t>, uint64_t> sub_tokens;

ucs_status_t uffd_sub(void *addr, size_t len)
{
    uint64_t token;
    ucs_status_t status = ucm_uffd_subscribe(addr, len, &token);

    if (status == UCS_OK) {
        std::lock_guard<std::mutex> guard(sub_lock);
        sub_tokens.insert({{(uintptr_t)addr, len}, token});
    }
    return status;
}

void uffd_unsub(void *addr, size_t len)
{
    uint64_t token;
    {
        std::lock_guard<std::mutex> guard(sub_lock);
        auto it = sub_tokens.find({(uintptr_t)addr, len});
        if (it == sub_tokens.end()) {
            return;
        }
        token = it->second;
        sub_tokens.erase(it);
    }
    ucm_uffd_unsubscribe(addr, len, token);
}

/* The monitor's counters once the reports already read are dispatched:
 * an unmap that returned in an earlier test (or step) is counted by now,
 * so that a baseline taken here does not move under the test. */
ucm_uffd_info_t uffd_info()
{
    ucm_uffd_info_t info;

    ucm_uffd_drain_wait();
    ucm_uffd_query(&info);
    return info;
}

class Uffd : public ucmt::test
{
  protected:
    void SetUp() override
    {
        ucmt::test::SetUp();
        if (IsSkipped()) {
            return;
        }
        int active = 0;
        m_grain    = uffd_info().grain;
        /* exact spans (page grain): the tests count them */
        ASSERT_EQ(UCS_OK, ucm_uffd_configure(UCM_UFFD_MODE_TRY, 0, 4096));
        ASSERT_EQ(UCS_OK, ucm_uffd_start(&active));
        m_budget   = uffd_info().vma_budget; /* known once started */
        m_max_maps = uffd_info().max_map_count;
        if (!active) {
            GTEST_SKIP() << "userfaultfd monitor not active: "
                         << uffd_info().reason;
        }
        oracle::reset();
    }

    void TearDown() override
    {
        ucm_uffd_configure(UCM_UFFD_MODE_TRY, 0, m_grain);
        if (m_max_maps != 0) {
            ucm_uffd_configure_budget((m_budget + 0.5) / m_max_maps);
        }
        ucmt::test::TearDown();
    }

    size_t m_grain           = 0;
    unsigned long m_budget   = 0;
    unsigned long m_max_maps = 0;

    /* anonymous pages, touched, no THP (frames must stay put) */
    char *map(size_t npages)
    {
        char *p = (char *)map_anon(npages * page_size());
        if (p != NULL) {
            no_thp(p, npages * page_size());
        }
        return p;
    }

    /* after the system call returned: the monitor dispatched what it read */
    void settle()
    {
        ucm_uffd_drain_wait();
    }
};

TEST_F(Uffd, Query)
{
    ucm_uffd_info_t info = uffd_info();

    EXPECT_EQ(UCM_UFFD_MODE_TRY, info.mode);
    EXPECT_TRUE(info.active);
    EXPECT_NE(0u, info.features & UFFD_FEATURE_EVENT_UNMAP);
    EXPECT_NE(nullptr, strstr(info.reason, "active")) << info.reason;
}

/* A raw munmap (a syscall instruction) of part of a subscribed range: exactly
 * that part is reported, the pages are gone, the rest stays subscribed. */
TEST_F(Uffd, RawMunmap)
{
    const size_t ps = page_size();
    char *p         = map(16);

    ASSERT_TRUE(p != NULL);
    ASSERT_EQ(UCS_OK, uffd_sub(p + 2 * ps, 12 * ps));
    uint64_t old_pfn = pfn(p + 4 * ps);
    oracle::arm();
    ASSERT_EQ(0, ucmt_rawsys(SYS_munmap, p + 4 * ps, 4 * ps));
    settle();
    oracle::disarm();
    EXPECT_TRUE(reported_exactly(p + 4 * ps, 4 * ps));
    EXPECT_EQ(0u, pfn(p + 4 * ps)) << "old frame " << old_pfn;
    EXPECT_FALSE(readable(p + 4 * ps));

    /* an unsubscribed range is not reported by uffd */
    oracle::reset();
    oracle::arm();
    ASSERT_EQ(0, ucmt_rawsys(SYS_munmap, p, ps));
    settle();
    oracle::disarm();
    EXPECT_TRUE(oracle::events(UCM_EVENT_VM_UNMAPPED, p, ps).empty());

    /* the remaining subscribed pages still are */
    oracle::reset();
    oracle::arm();
    ASSERT_EQ(0, ucmt_rawsys(SYS_munmap, p + 10 * ps, 2 * ps));
    settle();
    oracle::disarm();
    EXPECT_TRUE(reported_exactly(p + 10 * ps, 2 * ps));

    uffd_unsub(p + 2 * ps, 12 * ps);
    ucm_orig_munmap(p, 16 * ps);
}

/* A raw mremap moving a subscribed range: the old range is
 * reported; the pages (frames) now live at the target. */
TEST_F(Uffd, RawMremap)
{
    const size_t ps = page_size();
    char *p         = map(4);
    char *target    = (char *)free_range(4 * ps);

    ASSERT_TRUE((p != NULL) && (target != NULL));
    ASSERT_EQ(UCS_OK, uffd_sub(p, 4 * ps));
    uint64_t old_pfn = pfn(p);
    p[0]             = 42;
    oracle::arm();
    void *ret =
        (void *)ucmt_rawsys(SYS_mremap, p, 4 * ps, 4 * ps,
                            (long)(MREMAP_MAYMOVE | MREMAP_FIXED), target);
    ASSERT_EQ((void *)target, ret) << strerror(errno);
    settle();
    oracle::disarm();
    EXPECT_TRUE(reported_exactly(p, 4 * ps));
    EXPECT_EQ(old_pfn, pfn(target));
    EXPECT_EQ(42, target[0]);
    EXPECT_FALSE(readable(p));
    uffd_unsub(p, 4 * ps);
    ucm_orig_munmap(target, 4 * ps);
}

/* A raw madvise(MADV_DONTNEED): reported; the next touch gets a new
 * zero page and does not hang (write-protect registration never faults). */
TEST_F(Uffd, RawMadviseDontneed)
{
    const size_t ps = page_size();
    char *p         = map(4);

    ASSERT_TRUE(p != NULL);
    ASSERT_EQ(UCS_OK, uffd_sub(p, 4 * ps));
    memset(p, 7, 4 * ps);
    uint64_t old_pfn = pfn(p + ps);
    oracle::arm();
    ASSERT_EQ(0, ucmt_rawsys(SYS_madvise, p + ps, 2 * ps, MADV_DONTNEED));
    settle();
    oracle::disarm();
    EXPECT_TRUE(reported_exactly(p + ps, 2 * ps));
    EXPECT_EQ(0u, pfn(p + ps)) << "old frame " << old_pfn;
    EXPECT_EQ(0, p[ps]); /* data oracle: the old contents are gone */
    p[ps] = 1;
    EXPECT_NE(0u, pfn(p + ps));
    EXPECT_EQ(7, p[0]);
    uffd_unsub(p, 4 * ps);
    ucm_orig_munmap(p, 4 * ps);
}

/* Missing-mode registration: touching a page emptied by MADV_DONTNEED
 * faults into the monitor, which maps a zero page (in a child with a
 * deadline: a bug here is a hang). */
UCMT_CHILD_SCENARIO(uffd_missing_fault)
{
    const size_t ps = page_size();
    int active      = 0;

    if ((ucm_uffd_configure(UCM_UFFD_MODE_TRY, 1, 4096) != UCS_OK) ||
        (ucm_uffd_start(&active) != UCS_OK) || !active) {
        printf("monitor not active\n");
        return 2;
    }
    char *p = (char *)map_anon(4 * ps);
    memset(p, 7, 4 * ps);
    if (uffd_sub(p, 4 * ps) != UCS_OK) {
        printf("subscribe failed\n");
        return 3;
    }
    ucmt_rawsys(SYS_madvise, p, 4 * ps, MADV_DONTNEED);
    ucm_uffd_drain_wait();
    unsigned long faults = uffd_info().faults;
    int sum              = p[0] + p[ps]; /* read faults */
    p[2 * ps]            = 5;            /* write fault */
    sum += p[2 * ps];
    if ((sum != 5) || (uffd_info().faults < faults + 3)) {
        printf("sum %d, faults %lu -> %lu\n", sum, faults, uffd_info().faults);
        return 4;
    }
    uffd_unsub(p, 4 * ps);
    return 0;
}

TEST_F(Uffd, MissingModeFaultsResolved)
{
    child_result r = run_self("uffd_missing_fault", {}, 60);
    EXPECT_TRUE(r.exited_ok()) << r.str();
}

/* A range another userfaultfd of this process owns: UCS_ERR_BUSY, counted,
 * and the hooks still report its munmap. */
TEST_F(Uffd, SecondOwnerBusy)
{
    const size_t ps = page_size();
    char *p         = map(4);
    int fd          = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);

    ASSERT_TRUE(p != NULL);
    ASSERT_GE(fd, 0) << strerror(errno);
    struct uffdio_api api = {UFFD_API, 0, 0};
    ASSERT_EQ(0, ioctl(fd, UFFDIO_API, &api));
    struct uffdio_register reg;
    memset(&reg, 0, sizeof(reg));
    reg.range.start = (uintptr_t)p;
    reg.range.len   = 4 * ps;
    reg.mode        = UFFDIO_REGISTER_MODE_WP;
    ASSERT_EQ(0, ioctl(fd, UFFDIO_REGISTER, &reg)) << strerror(errno);

    unsigned long busy = uffd_info().busy;
    EXPECT_EQ(UCS_ERR_BUSY, uffd_sub(p + ps, ps));
    EXPECT_EQ(busy + 1, uffd_info().busy);

    ASSERT_EQ(4u, oracle::watch(p, 4 * ps));
    oracle::arm();
    ASSERT_EQ(0, munmap(p, 4 * ps)); /* hooked */
    oracle_stats s = oracle::check();
    UCMT_EXPECT_COVERED(s);
    EXPECT_EQ(4u, s.covered);
    close(fd);
}

/* A file-backed mapping on a disk file system: UCS_ERR_UNSUPPORTED, one
 * count per refusal, hooks still in charge. */
TEST_F(Uffd, FileBackedUnsupported)
{
    const size_t ps = page_size();
    char path[]     = "uffd-file-XXXXXX";
    struct statfs sfs;
    int fd = mkstemp(path);

    ASSERT_GE(fd, 0) << strerror(errno);
    unlink(path);
    ASSERT_EQ(0, fstatfs(fd, &sfs));
    if (sfs.f_type == 0x01021994 /* TMPFS_MAGIC: shmem is supported */) {
        close(fd);
        GTEST_SKIP() << "current directory is on tmpfs";
    }
    ASSERT_EQ(0, ftruncate(fd, 4 * ps));
    char *p = (char *)mmap(NULL, 4 * ps, RW, MAP_SHARED, fd, 0);
    ASSERT_NE(MAP_FAILED, (void *)p);
    touch(p, 4 * ps);

    unsigned long unsupported = uffd_info().unsupported;
    EXPECT_EQ(UCS_ERR_UNSUPPORTED, uffd_sub(p, 4 * ps));
    EXPECT_EQ(UCS_ERR_UNSUPPORTED, uffd_sub(p, ps));
    EXPECT_EQ(unsupported + 2, uffd_info().unsupported);

    ASSERT_EQ(4u, oracle::watch(p, 4 * ps));
    oracle::arm();
    ASSERT_EQ(0, munmap(p, 4 * ps));
    oracle_stats s = oracle::check();
    UCMT_EXPECT_COVERED(s);
    close(fd);
}

/* dlclose() of a module whose .bss was subscribed: the loader's unmap
 * (glibc-internal, invisible to reloc mode) is reported. */
TEST_F(Uffd, DlcloseBss)
{
    const size_t ps = page_size();
    std::string lib = std::string(UCMT_LIBDIR) + "/libucmt_uffd_bss.so";
    void *handle    = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);

    ASSERT_TRUE(handle != NULL) << dlerror();
    typedef char *(*get_fn)(size_t *);
    get_fn get = (get_fn)dlsym(handle, "ucmt_uffd_bss_get");
    ASSERT_TRUE(get != NULL);
    size_t size;
    char *bss = get(&size);
    /* whole pages past the file-backed start of the segment */
    char *start = (char *)align_up((uintptr_t)bss + ps, ps);
    char *end   = (char *)align_down((uintptr_t)bss + size, ps);
    size_t len  = end - start;
    memset(bss, 1, size);
    ASSERT_EQ(UCS_OK, uffd_sub(start, len));
    uint64_t old = pfn(start);
    EXPECT_NE(0u, old);

    oracle::arm();
    ASSERT_EQ(0, dlclose(handle));
    settle();
    oracle::disarm();
    bool found = false;
    for (const event_record &e :
         oracle::events(UCM_EVENT_VM_UNMAPPED, start, len)) {
        found |=
            (e.addr <= (uintptr_t)start) && (e.addr + e.len >= (uintptr_t)end);
    }
    EXPECT_TRUE(found) << "no VM_UNMAPPED covering the .bss";
    EXPECT_NE(old, pfn(start));
    uffd_unsub(start, len);
}

/* fork() with subscribed ranges: the child's mappings are not registered
 * (no hang on its raw unmaps, which the parent's monitor never sees), its
 * hooks work, and it starts its own monitor at its first subscription. */
TEST_F(Uffd, Fork)
{
    const size_t ps = page_size();
    char *p         = map(8);

    ASSERT_TRUE(p != NULL);
    ASSERT_EQ(UCS_OK, uffd_sub(p, 8 * ps));
    unsigned long events = uffd_info().events;

    pid_t pid = fork();
    if (pid == 0) {
        ucm_uffd_info_t info = uffd_info();
        if (info.active) {
            _exit(10);
        }
        if (ucmt_rawsys(SYS_munmap, p, ps) != 0) { /* not registered: no wait */
            _exit(11);
        }
        oracle::reset();
        oracle::arm();
        munmap(p + ps, ps); /* hooked */
        oracle::disarm();
        if (!reported_exactly(p + ps, ps)) {
            _exit(12);
        }
        if (uffd_sub(p + 2 * ps, 2 * ps) != UCS_OK) {
            _exit(13); /* restarted in the child */
        }
        oracle::reset();
        oracle::arm();
        ucmt_rawsys(SYS_munmap, p + 2 * ps, 2 * ps);
        ucm_uffd_drain_wait();
        oracle::disarm();
        _exit(reported_exactly(p + 2 * ps, 2 * ps) ? 0 : 14);
    }
    ASSERT_GT(pid, 0);
    int status;
    bool timed_out;
    ASSERT_TRUE(wait_child(pid, 60, &status, &timed_out));
    EXPECT_TRUE(WIFEXITED(status) && (WEXITSTATUS(status) == 0))
        << "child status 0x" << std::hex << status;
    /* the child's unmaps were not the parent's events */
    EXPECT_EQ(events, uffd_info().events);

    oracle::arm();
    ASSERT_EQ(0, ucmt_rawsys(SYS_munmap, p, 8 * ps));
    settle();
    oracle::disarm();
    EXPECT_TRUE(reported_exactly(p, 8 * ps));
    uffd_unsub(p, 8 * ps);
}

/* Subscriptions inside a registered span cost no system call; a span
 * whose subscriptions are all gone stays registered (idle: still reported,
 * reused without a system call) until it is unmapped. */
TEST_F(Uffd, DedupAndIdleSpans)
{
    const size_t ps      = page_size();
    char *p              = map(8);
    ucm_uffd_info_t info = uffd_info();

    ASSERT_TRUE(p != NULL);
    ASSERT_EQ(UCS_OK, uffd_sub(p, 8 * ps));
    ASSERT_EQ(UCS_OK, uffd_sub(p + ps, 2 * ps));
    ASSERT_EQ(UCS_OK, uffd_sub(p + 3, 5)); /* widened to a page */
    ucm_uffd_info_t after = uffd_info();
    EXPECT_EQ(info.registers + 1, after.registers);
    EXPECT_EQ(info.dedups + 2, after.dedups);
    EXPECT_EQ(info.spans + 1, after.spans);
    uffd_unsub(p + ps, 2 * ps);
    uffd_unsub(p + 3, 5);
    uffd_unsub(p, 8 * ps);
    EXPECT_EQ(info.spans + 1, uffd_info().spans); /* idle */

    /* reused without a system call */
    ASSERT_EQ(UCS_OK, uffd_sub(p + 4 * ps, ps));
    EXPECT_EQ(info.registers + 1, uffd_info().registers);
    uffd_unsub(p + 4 * ps, ps);

    /* still reported; the unmap ends the registration and the span */
    oracle::arm();
    ASSERT_EQ(0, ucmt_rawsys(SYS_munmap, p, 8 * ps));
    settle();
    oracle::disarm();
    EXPECT_TRUE(reported_exactly(p, 8 * ps));
    EXPECT_EQ(info.spans, uffd_info().spans);
}

/* UCX_MEM_UFFD_GRAIN: a subscription registers its whole aligned block
 * when all of it is mapped (one registration, one VMA, for neighbours
 * too); unmapping a neighbour in the block is then reported as well. */
TEST_F(Uffd, GrainWidensRegistration)
{
    const size_t ps    = page_size();
    const size_t grain = 16 * ps;
    char *area         = (char *)mmap(NULL, 3 * grain, RW, ANON_FLAGS, -1, 0);

    ASSERT_NE(MAP_FAILED, (void *)area);
    char *block = (char *)align_up((uintptr_t)area, grain);
    char *next  = block + grain; /* next + grain <= area + 3 * grain */
    memset(block, 1, 2 * grain);
    ASSERT_EQ(UCS_OK, ucm_uffd_configure(UCM_UFFD_MODE_TRY, 0, grain));
    ucm_uffd_info_t info = uffd_info();
    ASSERT_EQ(UCS_OK, uffd_sub(block + ps, ps));
    ASSERT_EQ(UCS_OK, uffd_sub(block + 9 * ps, 2 * ps));
    EXPECT_EQ(info.registers + 1, uffd_info().registers);
    EXPECT_EQ(info.dedups + 1, uffd_info().dedups);

    /* a block with a hole: the exact range only (one span with the
     * block's, which it touches) */
    ASSERT_EQ(0, ucm_orig_munmap(next + ps, grain - ps));
    settle();
    info = uffd_info();
    ASSERT_EQ(UCS_OK, uffd_sub(next, ps));
    EXPECT_EQ(info.registers + 1, uffd_info().registers);
    EXPECT_EQ(info.spans, uffd_info().spans);

    oracle::arm();
    ASSERT_EQ(0, ucmt_rawsys(SYS_munmap, block + 5 * ps, ps)); /* a neighbour */
    settle();
    oracle::disarm();
    EXPECT_TRUE(reported_exactly(block + 5 * ps, ps));
    uffd_unsub(block + ps, ps);
    uffd_unsub(block + 9 * ps, 2 * ps);
    uffd_unsub(next, ps);
    ucm_orig_munmap(area, 3 * grain);
    settle();
}

/* Subscribing right after an unmap returned (no drain_wait by the caller)
 * registers the new mapping: the subscription itself waits until the span
 * of the unmap already read is cut.  A slow handler keeps the dispatcher
 * busy with an earlier report meanwhile (it only widens the window; the
 * assertion is whether the next unmap is reported). */
std::atomic<uintptr_t> slow_addr(0);

void slow_handler(ucm_event_type_t, ucm_event_t *event, void *)
{
    if ((uintptr_t)event->vm_unmapped.address == slow_addr.load()) {
        slow_addr = 0;
        usleep(20 * 1000);
    }
}

TEST_F(Uffd, ResubscribeRightAfterReplace)
{
    const size_t ps     = page_size();
    const unsigned iter = 10;
    char *a             = map(4);
    unsigned missed     = 0;

    ASSERT_TRUE(a != NULL);
    ASSERT_EQ(UCS_OK, ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 5,
                                            slow_handler, NULL));
    for (unsigned i = 0; i < iter; ++i) {
        char *b = map(1);
        ASSERT_TRUE(b != NULL);
        ASSERT_EQ(UCS_OK, uffd_sub(b, ps));
        ASSERT_EQ(UCS_OK, uffd_sub(a, 4 * ps));
        slow_addr = (uintptr_t)b;
        ASSERT_EQ(0, ucmt_rawsys(SYS_munmap, b, ps)); /* dispatcher sleeps */
        /* new pages over a's (an unmap, no moment of a hole) */
        ASSERT_EQ((long)a,
                  ucmt_rawsys(SYS_mmap, (long)a, (long)(4 * ps), (long)RW,
                              (long)(ANON_FLAGS | MAP_FIXED), -1l, 0l));
        ASSERT_EQ(UCS_OK, uffd_sub(a, 4 * ps));
        memset(a, 1, 4 * ps);
        settle(); /* the replacement's own report is not the one we want */
        oracle::reset();
        oracle::arm();
        ASSERT_EQ(0, ucmt_rawsys(SYS_madvise, a, 4 * ps, MADV_DONTNEED));
        settle();
        oracle::disarm();
        missed += !reported_exactly(a, 4 * ps);
        uffd_unsub(a, 4 * ps);
        uffd_unsub(a, 4 * ps);
        uffd_unsub(b, ps);
    }
    ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED, slow_handler, NULL);
    EXPECT_EQ(0u, missed);
    ucm_orig_munmap(a, 4 * ps);
}

/* Many disjoint spans (the table is a tree: this must stay fast enough
 * for a unit test even under valgrind), then removed in another order. */
TEST_F(Uffd, ManySpans)
{
    const size_t ps = page_size();
    const size_t n  = scaled(4096, 256);
    char *p         = (char *)mmap(NULL, 2 * n * ps, RW, ANON_FLAGS, -1, 0);
    size_t spans    = uffd_info().spans;

    ASSERT_NE(MAP_FAILED, (void *)p);
    /* more spans than the default VMA budget allows (the fixture restores
     * it; test_uffd_budget.cc tests the budget) */
    ASSERT_EQ(UCS_OK, ucm_uffd_configure_budget(0.5));
    for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(UCS_OK, uffd_sub(p + 2 * i * ps, ps));
    }
    EXPECT_EQ(spans + n, uffd_info().spans);
    for (size_t i = 0; i < n; ++i) {
        size_t j = (i * 7919) % n;
        uffd_unsub(p + 2 * j * ps, ps);
    }
    EXPECT_EQ(spans + n, uffd_info().spans); /* idle until unmapped */
    /* every second one by itself (the event splits nothing), then all */
    for (size_t i = 0; i < n; i += 2) {
        ASSERT_EQ(0, ucm_orig_munmap(p + 2 * i * ps, ps));
    }
    settle();
    EXPECT_EQ(spans + n / 2, uffd_info().spans);
    ucm_orig_munmap(p, 2 * n * ps);
    settle();
    EXPECT_EQ(spans, uffd_info().spans);
}

/* Two threads: one subscribes, raw-unmaps and remaps ranges at the same
 * addresses, the other subscribes and unsubscribes its own; after each raw
 * unmap returns and drain_wait, the event must be there (zero misses). */
TEST_F(Uffd, TwoThreadStress)
{
    const size_t ps     = page_size();
    const unsigned iter = scaled(2000, 100);
    char *a             = map(4);
    char *b             = map(4);
    std::atomic<bool> stop(false);
    unsigned missed = 0;

    ASSERT_TRUE((a != NULL) && (b != NULL));
    std::thread other([&]() {
        while (!stop.load()) {
            uffd_sub(b, 4 * ps);
            uffd_unsub(b, 4 * ps);
        }
    });
    for (unsigned i = 0; i < iter; ++i) {
        ASSERT_EQ(UCS_OK, uffd_sub(a, 4 * ps));
        oracle::reset();
        oracle::arm();
        ASSERT_EQ(0, ucmt_rawsys(SYS_munmap, a, 4 * ps));
        ucm_uffd_drain_wait();
        oracle::disarm();
        missed += !reported_exactly(a, 4 * ps);
        uffd_unsub(a, 4 * ps);
        ASSERT_EQ((void *)a,
                  ucm_orig_mmap(a, 4 * ps, RW, ANON_FLAGS | MAP_FIXED, -1, 0));
    }
    stop = true;
    other.join();
    EXPECT_EQ(0u, missed);
    ucm_orig_munmap(a, 4 * ps);
    ucm_orig_munmap(b, 4 * ps);
}

/* A hooked munmap of a subscribed range: reported by the hook before the
 * pages go, and the kernel has no monitor to wait for (the range left the
 * registration first); the rest of the span is still reported when an
 * unhooked call unmaps it. */
TEST_F(Uffd, HookedMunmapSkipsMonitor)
{
    const size_t ps = page_size();
    char *p         = map(8);

    ASSERT_TRUE(p != NULL);
    ASSERT_EQ(UCS_OK, uffd_sub(p, 8 * ps));
    unsigned long events = uffd_info().events;
    ASSERT_EQ(2u, oracle::watch(p + 2 * ps, 2 * ps));
    oracle::arm();
    ASSERT_EQ(0, munmap(p + 2 * ps, 2 * ps)); /* hooked */
    settle();
    oracle_stats s = oracle::check();
    EXPECT_EQ(2u, s.changed) << s.str();
    EXPECT_EQ(0u, s.uncovered) << s.str();
    EXPECT_EQ(events, uffd_info().events) << "the monitor reported it too";

    oracle::reset();
    oracle::arm();
    ASSERT_EQ(0, ucmt_rawsys(SYS_munmap, p + 5 * ps, ps));
    settle();
    oracle::disarm();
    EXPECT_TRUE(reported_exactly(p + 5 * ps, ps));
    EXPECT_EQ(0u, pfn(p + 5 * ps));

    uffd_unsub(p, 8 * ps);
    ucm_orig_munmap(p, 8 * ps);
}

/* The same for madvise(MADV_DONTNEED): the discarded pages are out of the
 * registration afterwards, and a new subscription there registers them
 * again, so that an unhooked discard is reported. */
TEST_F(Uffd, HookedDontneedSkipsMonitor)
{
    const size_t ps = page_size();
    char *p         = map(8);

    ASSERT_TRUE(p != NULL);
    ASSERT_EQ(UCS_OK, uffd_sub(p, 8 * ps));
    unsigned long events = uffd_info().events;
    ASSERT_EQ(4u, oracle::watch(p + 2 * ps, 4 * ps));
    oracle::arm();
    ASSERT_EQ(0, madvise(p + 2 * ps, 4 * ps, MADV_DONTNEED)); /* hooked */
    settle();
    oracle_stats s = oracle::check();
    EXPECT_EQ(4u, s.changed) << s.str();
    EXPECT_EQ(0u, s.uncovered) << s.str();
    EXPECT_EQ(events, uffd_info().events) << "the monitor reported it too";

    memset(p, 2, 8 * ps);
    unsigned long registers = uffd_info().registers;
    ASSERT_EQ(UCS_OK, uffd_sub(p + 3 * ps, ps));
    EXPECT_EQ(registers + 1, uffd_info().registers);
    uint64_t old_pfn = pfn(p + 3 * ps);
    oracle::reset();
    oracle::arm();
    ASSERT_EQ(0, ucmt_rawsys(SYS_madvise, p + 3 * ps, ps, MADV_DONTNEED));
    settle();
    oracle::disarm();
    EXPECT_TRUE(reported_exactly(p + 3 * ps, ps));
    EXPECT_NE(old_pfn, pfn(p + 3 * ps));

    uffd_unsub(p + 3 * ps, ps);
    uffd_unsub(p, 8 * ps);
    ucm_orig_munmap(p, 8 * ps);
}

/* A subscription made while the hooked munmap is under way (from its own
 * VM_UNMAPPED handler: after the range left the registration, before the
 * system call) registers the range again: the unmap is then reported by
 * the monitor as well, after it, for the late subscriber. */
static uintptr_t resub_addr;
static size_t resub_len;
static ucs_status_t resub_status = UCS_ERR_NO_PROGRESS;

static void resub_handler(ucm_event_type_t type, ucm_event_t *event,
                          void * /* arg */)
{
    if ((type == UCM_EVENT_VM_UNMAPPED) &&
        ((uintptr_t)event->vm_unmapped.address == resub_addr) &&
        (event->vm_unmapped.size == resub_len)) {
        resub_addr   = 0;
        resub_status = uffd_sub((void *)event->vm_unmapped.address,
                                event->vm_unmapped.size);
    }
}

TEST_F(Uffd, SubscribeDuringHookedUnmapReported)
{
    const size_t ps = page_size();
    char *p         = map(4);

    ASSERT_TRUE(p != NULL);
    ASSERT_EQ(UCS_OK, uffd_sub(p, 4 * ps));
    ASSERT_EQ(UCS_OK, ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 5,
                                            resub_handler, NULL));
    unsigned long events = uffd_info().events;
    resub_len            = 2 * ps;
    resub_addr           = (uintptr_t)p + ps;
    oracle::arm();
    ASSERT_EQ(0, munmap(p + ps, 2 * ps)); /* hooked */
    settle();
    oracle::disarm();
    ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED, resub_handler, NULL);
    ASSERT_EQ(UCS_OK, resub_status);
    EXPECT_EQ(events + 1, uffd_info().events);
    EXPECT_EQ(2u, oracle::events(UCM_EVENT_VM_UNMAPPED, p + ps, 2 * ps).size())
        << "the hook's report and the monitor's";
    EXPECT_FALSE(readable(p + ps));

    uffd_unsub(p + ps, 2 * ps);
    uffd_unsub(p, 4 * ps);
    ucm_orig_munmap(p, 4 * ps);
}

/* Hooked calls that fail: one that cannot unmap anything (unaligned)
 * leaves the range registered; one that fails after discarding part of
 * the range leaves it out, and a new subscription registers it again. */
TEST_F(Uffd, HookedCallFailures)
{
    const size_t ps = page_size();
    char *p         = map(4);

    ASSERT_TRUE(p != NULL);
    ASSERT_EQ(UCS_OK, uffd_sub(p, 4 * ps));
    EXPECT_EQ(-1, munmap(p + 1, ps));
    EXPECT_EQ(EINVAL, errno);
    oracle::arm();
    ASSERT_EQ(0, ucmt_rawsys(SYS_munmap, p, ps));
    settle();
    oracle::disarm();
    EXPECT_TRUE(reported_exactly(p, ps)) << "still registered";

    /* p + 3 pages is a hole now: ENOMEM, after discarding p+1, p+2 */
    ASSERT_EQ(0, ucmt_rawsys(SYS_munmap, p + 3 * ps, ps));
    settle();
    EXPECT_EQ(-1, madvise(p + ps, 3 * ps, MADV_DONTNEED));
    EXPECT_EQ(ENOMEM, errno);
    memset(p + ps, 3, 2 * ps);
    ASSERT_EQ(UCS_OK, uffd_sub(p + ps, 2 * ps));
    oracle::reset();
    oracle::arm();
    ASSERT_EQ(0, ucmt_rawsys(SYS_munmap, p + ps, 2 * ps));
    settle();
    oracle::disarm();
    EXPECT_TRUE(reported_exactly(p + ps, 2 * ps));

    uffd_unsub(p + ps, 2 * ps);
    uffd_unsub(p, 4 * ps);
}

/* A signal handler's hooked munmap of subscribed pages, while the
 * interrupted thread subscribes and unsubscribes (holding the monitor's
 * lock at times): the hook must not wait for that lock (it would never be
 * released), and the pages are reported before they go either way. */
static const unsigned sig_max = 64;
static char *sig_regions[sig_max];
static std::atomic<unsigned> sig_next(0), sig_count(0), sig_handled(0);

static void sig_unmap_handler(int)
{
    unsigned i = sig_next.load();

    if ((i < sig_count.load()) && sig_next.compare_exchange_strong(i, i + 1)) {
        int saved = errno;
        munmap(sig_regions[i], 2 * page_size()); /* hooked */
        errno = saved;
        ++sig_handled;
    }
}

TEST_F(Uffd, SignalHandlerUnmapWhileSubscribing)
{
    const size_t ps      = page_size();
    const unsigned count = scaled(sig_max, 8);
    struct sigaction sa, old;
    std::atomic<bool> stop(false);
    char *b = map(4);

    ASSERT_TRUE(b != NULL);
    sig_next  = 0;
    sig_count = 0;
    for (unsigned i = 0; i < count; ++i) {
        sig_regions[i] = map(2);
        ASSERT_TRUE(sig_regions[i] != NULL);
        ASSERT_EQ(UCS_OK, uffd_sub(sig_regions[i], 2 * ps));
        ASSERT_EQ(2u, oracle::watch(sig_regions[i], 2 * ps));
    }
    sig_handled = 0;
    sig_count   = count;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = sig_unmap_handler;
    sa.sa_flags   = SA_RESTART;
    ASSERT_EQ(0, sigaction(SIGUSR1, &sa, &old));
    oracle::arm();
    pthread_t self = pthread_self();
    std::thread signaller([&]() {
        while (!stop.load()) {
            pthread_kill(self, SIGUSR1);
            usleep(200);
        }
    });
    time_t deadline = time(NULL) + 60;
    while ((sig_handled.load() < count) && (time(NULL) < deadline)) {
        uint64_t token;
        if (ucm_uffd_subscribe(b, 4 * ps, &token) == UCS_OK) {
            ucm_uffd_unsubscribe(b, 4 * ps, token);
        }
    }
    stop = true;
    signaller.join();
    sigaction(SIGUSR1, &old, NULL);
    settle();
    oracle_stats s = oracle::check();
    EXPECT_EQ(count, sig_handled.load()) << "signals handled in 60 s";
    EXPECT_EQ(2 * count, s.changed) << s.str();
    EXPECT_EQ(0u, s.uncovered) << s.str();
    for (unsigned i = 0; i < count; ++i) {
        uffd_unsub(sig_regions[i], 2 * ps);
    }
    ucm_orig_munmap(b, 4 * ps);
}

/* A child forked by a raw system call (no atfork handler ran) shares the
 * parent's userfaultfd, whose ioctls act on the parent's address space:
 * its hooked unmaps must leave the parent's registration alone. */
TEST_F(Uffd, RawForkChildLeavesParentRegistered)
{
    const size_t ps = page_size();
    char *p         = map(4);

    ASSERT_TRUE(p != NULL);
    ASSERT_EQ(UCS_OK, uffd_sub(p, 4 * ps));
    long pid = ucmt_rawsys(SYS_fork);
    if (pid == 0) {
        long ret = munmap(p, 4 * ps); /* hooked; not registered here */
        ucmt_rawsys(SYS_exit_group, (ret == 0) ? 0 : 11);
    }
    ASSERT_GT(pid, 0);
    int status;
    bool timed_out;
    ASSERT_TRUE(wait_child((pid_t)pid, 60, &status, &timed_out));
    EXPECT_TRUE(WIFEXITED(status) && (WEXITSTATUS(status) == 0))
        << "child status 0x" << std::hex << status;

    oracle::arm();
    ASSERT_EQ(0, ucmt_rawsys(SYS_munmap, p, 4 * ps));
    settle();
    oracle::disarm();
    EXPECT_TRUE(reported_exactly(p, 4 * ps));
    uffd_unsub(p, 4 * ps);
}

/* userfaultfd unavailable (seccomp makes the system call fail): try falls
 * back (inactive, reason given), yes returns an error. */
UCMT_CHILD_SCENARIO(uffd_unavailable)
{
    const char *err             = getenv("UCMT_UFFD_ERRNO");
    unsigned errnum             = (err != NULL) ? atoi(err) : ENOSYS;
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_userfaultfd, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (errnum & 0xffff)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof(filter) / sizeof(filter[0]), filter};
    int active             = 1;

    if ((prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ||
        (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)) {
        printf("seccomp: %s\n", strerror(errno));
        return 2;
    }
    if ((ucm_uffd_start(&active) != UCS_OK) || active) {
        printf("try: active=%d\n", active);
        return 3;
    }
    ucm_uffd_info_t info = uffd_info();
    printf("reason: %s\n", info.reason);
    if (strstr(info.reason, strerror(errnum)) == NULL) {
        return 4;
    }
    char buf[64];
    if (uffd_sub(buf, sizeof(buf)) != UCS_ERR_UNSUPPORTED) {
        return 5;
    }
    ucm_uffd_configure(UCM_UFFD_MODE_YES, 0, 4096);
    if (ucm_uffd_start(&active) != UCS_ERR_UNSUPPORTED) {
        return 6;
    }
    return 0;
}

TEST(UffdUnavailable, EnosysAndEperm)
{
    for (const char *err : {"38" /* ENOSYS */, "1" /* EPERM */}) {
        child_result r =
            run_self("uffd_unavailable",
                     {{"UCMT_UFFD_ERRNO", err}, {"UCX_MEM_UFFD", "try"}});
        EXPECT_TRUE(r.exited_ok()) << r.str();
        /* under yes: exactly one error line */
        size_t lines = 0;
        for (size_t pos = r.err.find("UCX_MEM_UFFD=yes");
             pos != std::string::npos;
             pos = r.err.find("UCX_MEM_UFFD=yes", pos + 1)) {
            ++lines;
        }
        EXPECT_EQ(1u, lines) << r.str();
    }
}

/* vm.unprivileged_userfaultfd=0 without CAP_SYS_PTRACE: userfaultfd()
 * fails with EPERM unless UFFD_USER_MODE_ONLY is given (seccomp refuses
 * exactly that): the monitor starts with the flag. */
UCMT_CHILD_SCENARIO(uffd_user_mode_only)
{
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_userfaultfd, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                 offsetof(struct seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, UFFD_USER_MODE_ONLY, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof(filter) / sizeof(filter[0]), filter};
    const size_t ps        = page_size();
    int active             = 0;

    if ((prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ||
        (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)) {
        printf("seccomp: %s\n", strerror(errno));
        return 2;
    }
    if (syscall(SYS_userfaultfd, O_CLOEXEC) >= 0) {
        printf("filter did not refuse the privileged form\n");
        return 3;
    }
    if ((ucm_uffd_start(&active) != UCS_OK) || !active) {
        printf("not active: %s\n", uffd_info().reason);
        return 4;
    }
    /* and it works: a raw unmap of a subscribed range is reported */
    char *p = (char *)map_anon(2 * ps);
    if (uffd_sub(p, 2 * ps) != UCS_OK) {
        return 5;
    }
    unsigned long events = uffd_info().events;
    ucmt_rawsys(SYS_munmap, p, 2 * ps);
    ucm_uffd_drain_wait();
    return (uffd_info().events == events + 1) ? 0 : 6;
}

TEST(UffdUnprivileged, UserModeOnly)
{
    child_result r = run_self("uffd_user_mode_only", {}, 60);
    EXPECT_TRUE(r.exited_ok()) << r.str();
}

UCMT_CHILD_SCENARIO(uffd_print_mode)
{
    printf("mode=%d\n", uffd_info().mode);
    return 0;
}

/* UCX_MEM_UFFD goes through the configuration parser: accepted values,
 * and one clear error line per malformed value. */
TEST(UffdConfig, Values)
{
    child_result r = run_self("uffd_print_mode", {{"UCX_MEM_UFFD", "no"}});
    EXPECT_TRUE(r.exited_ok()) << r.str();
    EXPECT_NE(std::string::npos, r.out.find("mode=0")) << r.str();
    r = run_self("uffd_print_mode", {{"UCX_MEM_UFFD", "YES"}});
    EXPECT_NE(std::string::npos, r.out.find("mode=2")) << r.str();
    r = run_self("uffd_print_mode", {{"UCX_MEM_UFFD", "maybe"}});
    EXPECT_TRUE(r.exited_ok()) << r.str();
    EXPECT_NE(std::string::npos, r.out.find("mode=1")) << r.str();
    EXPECT_NE(std::string::npos, r.err.find("UCX_MEM_UFFD: invalid value "
                                            "'maybe'"))
        << r.str();
    EXPECT_EQ(1, (int)std::count(r.err.begin(), r.err.end(), '\n')) << r.str();
}

} // namespace
