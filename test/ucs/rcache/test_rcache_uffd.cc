/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Registration cache with the userfaultfd monitor (UCX_MEM_UFFD): regions
 * unmapped by calls no hook sees (raw system calls) are invalidated before
 * the unmapping thread can get the same address again.  Oracle: the page
 * frames recorded at registration must be those of the pages now (the
 * fixture's get() checks every region it returns), i.e. zero stale hits.
 */
#include "rcache_fixture.h"

#include <ucm/api/ucm.h>
#include <ucm/api/ucm_ext.h>
#include <ucs/memory/rcache_ext.h>

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "../../common/rawsys.h"
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

using namespace rcache_test;

namespace
{

const int RW    = PROT_READ | PROT_WRITE;
const int FIXED = MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED;

/* new pages at addr, populated (new frames), without any event (an inline
 * syscall instruction: libucm hooks libc's syscall()) */
void remap_fresh(void *addr, size_t len)
{
    void *p = (void *)ucmt_rawsys(SYS_mmap, (long)addr, (long)len, (long)RW,
                                  (long)FIXED, -1l, 0l);
    ASSERT_EQ(addr, p);
    memset(addr, 3, len);
}

} // namespace

class rcache_uffd : public rcache_fixture
{
  protected:
    void SetUp() override
    {
        int active = 0;

        ucm_uffd_info_t dflt;
        ucm_uffd_query(&dflt);
        m_grain = dflt.grain;
        /* exact spans (page grain): the tests count them */
        ASSERT_EQ(UCS_OK, ucm_uffd_configure(UCM_UFFD_MODE_TRY, 0, 4096));
        ASSERT_EQ(UCS_OK, ucm_uffd_start(&active));
        if (!active) {
            ucm_uffd_info_t info;
            ucm_uffd_query(&info);
            GTEST_SKIP() << "userfaultfd monitor not active: " << info.reason;
        }
        ASSERT_EQ(UCS_OK, create());
    }

    void TearDown() override
    {
        ucm_uffd_configure(UCM_UFFD_MODE_TRY, 0, m_grain);
        rcache_fixture::TearDown();
    }

    size_t m_grain = 0;

    /* the page at p unmapped behind every hook, fresh pages there: a get
     * must register them (the frame oracle fails on a stale hit) */
    void page_registered_anew_after_raw_unmap(char *p)
    {
        unsigned regs_before = regs.load();
        ASSERT_EQ(0, ucmt_rawsys(SYS_munmap, p, page_size));
        remap_fresh(p, page_size);
        test_region *r = get(p, page_size);
        ASSERT_TRUE(r != nullptr);
        EXPECT_EQ(regs_before + 1, regs.load()) << "stale hit";
        put(r);
    }

    /* register [buf, buf+len), put it, then let 'unmap' take the pages
     * away behind every hook, map fresh pages there (or, if the mapping
     * stays, write new frames into it) and get again: the fixture's oracle
     * fails on a stale hit */
    template <typename F>
    void check_fresh_after(size_t npages, F unmap, bool mapping_stays = false)
    {
        const size_t len = npages * page_size;
        char *buf        = (char *)map(npages);
        memset(buf, 1, len);
        test_region *r = get(buf, len);
        ASSERT_TRUE(r != nullptr);
        put(r);
        unsigned regs_before = regs.load();
        unmap(buf, len);
        if (mapping_stays) {
            memset(buf, 2, len);
        } else {
            remap_fresh(buf, len);
        }
        r = get(buf, len);
        ASSERT_TRUE(r != nullptr);
        EXPECT_EQ(regs_before + 1, regs.load()) << "stale hit";
        put(r);
        munmap(buf, len);
    }
};

TEST_F(rcache_uffd, raw_munmap)
{
    check_fresh_after(4, [](char *buf, size_t len) {
        ASSERT_EQ(0, ucmt_rawsys(SYS_munmap, buf, len));
    });
    EXPECT_GE(stats().unmap_invalidations, 1u);
}

TEST_F(rcache_uffd, raw_munmap_partial)
{
    check_fresh_after(8, [](char *buf, size_t) {
        ASSERT_EQ(0, ucmt_rawsys(SYS_munmap, buf + 3 * page_size, page_size));
    });
}

TEST_F(rcache_uffd, raw_mremap)
{
    check_fresh_after(4, [](char *buf, size_t len) {
        void *dst = mmap(nullptr, len, RW, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ASSERT_NE(MAP_FAILED, dst);
        ASSERT_EQ(dst, (void *)ucmt_rawsys(
                           SYS_mremap, buf, len, len,
                           (long)(MREMAP_MAYMOVE | MREMAP_FIXED), dst));
        munmap(dst, len);
    });
}

TEST_F(rcache_uffd, raw_madvise_dontneed)
{
    check_fresh_after(
        4,
        [](char *buf, size_t len) {
            ASSERT_EQ(0, ucmt_rawsys(SYS_madvise, buf, len, MADV_DONTNEED));
        },
        true);
}

/* Regions subscribe while registered; after release their pages stay
 * registered (idle) until unmapped, and registering them again costs no
 * UFFDIO_REGISTER, not even a call to libucm: the cache knows the span. */
TEST_F(rcache_uffd, idle_span_reused_until_unmapped)
{
    ucm_uffd_info_t before, after;
    char *buf = (char *)map(4);

    ucm_uffd_drain_wait(); /* earlier tests' unmaps counted first */
    ucm_uffd_query(&before);
    test_region *r = get(buf, 4 * page_size);
    ASSERT_TRUE(r != nullptr);
    put(r);
    ucs_rcache_region_invalidate(m_rcache, &r->super, nullptr, nullptr);
    r = get(buf, 4 * page_size); /* registered again: span reused */
    ASSERT_TRUE(r != nullptr);
    put(r);
    ucm_uffd_query(&after);
    /* one more span, or one grown (a live neighbour's, which it touches) */
    EXPECT_LE(after.spans, before.spans + 1);
    EXPECT_EQ(before.registers + 1, after.registers);
    EXPECT_EQ(before.dedups, after.dedups);
    destroy();
    munmap(buf, 4 * page_size);
    ucm_uffd_drain_wait();
    ucm_uffd_query(&after);
    EXPECT_EQ(before.spans, after.spans);
}

/* A region inside the span the cache knows reported is not subscribed
 * again, and its raw unmap is still seen (the span covers it). */
TEST_F(rcache_uffd, region_inside_known_span)
{
    ucm_uffd_info_t before, after;
    char *buf = (char *)map(8);

    memset(buf, 1, 8 * page_size);
    ucm_uffd_drain_wait();
    ucm_uffd_query(&before);
    test_region *r = get(buf, 8 * page_size);
    ASSERT_TRUE(r != nullptr);
    put(r);
    ucs_rcache_region_invalidate(m_rcache, &r->super, nullptr, nullptr);
    r = get(buf + 2 * page_size, page_size); /* inside: no libucm call */
    ASSERT_TRUE(r != nullptr);
    put(r);
    ucm_uffd_query(&after);
    EXPECT_EQ(before.registers + 1, after.registers);
    EXPECT_EQ(before.dedups, after.dedups);

    page_registered_anew_after_raw_unmap(buf + 2 * page_size);
    munmap(buf, 8 * page_size);
}

/* An unmap in the known span makes the cache forget it: new pages mapped
 * there are not registered with the userfaultfd, so a region on them must
 * subscribe, or their own raw unmap would go unseen (a stale hit). */
TEST_F(rcache_uffd, unmap_in_known_span_forgets_it)
{
    ucm_uffd_info_t before, after;
    char *buf = (char *)map(8);

    memset(buf, 1, 8 * page_size);
    test_region *r = get(buf, 8 * page_size);
    ASSERT_TRUE(r != nullptr);
    put(r);
    /* a page of the span goes behind every hook, new pages come there */
    ASSERT_EQ(0, ucmt_rawsys(SYS_munmap, buf + 5 * page_size, page_size));
    remap_fresh(buf + 5 * page_size, page_size);
    ucm_uffd_drain_wait();
    ucm_uffd_query(&before);
    r = get(buf + 5 * page_size, page_size);
    ASSERT_TRUE(r != nullptr);
    put(r);
    ucm_uffd_query(&after);
    EXPECT_EQ(before.registers + 1, after.registers) << "not subscribed";

    page_registered_anew_after_raw_unmap(buf + 5 * page_size);
    munmap(buf, 8 * page_size);
}

/* The window between the monitor's read() (the unmapper resumes) and the
 * cache's invalidation is closed: a VM_UNMAPPED handler that runs before
 * the cache's (lower priority value) holds the monitor for a long while;
 * the unmapper's next get at the same address must still not hit the old
 * region.  (The delay only widens the window; the assertion is the page
 * frame oracle.) */
namespace
{
std::atomic<uintptr_t> slow_addr(0);

void slow_handler(ucm_event_type_t, ucm_event_t *event, void *)
{
    if ((uintptr_t)event->vm_unmapped.address == slow_addr.load()) {
        slow_addr = 0;
        usleep(100 * 1000);
    }
}
} // namespace

TEST_F(rcache_uffd, get_waits_for_dispatch)
{
    ASSERT_EQ(UCS_OK, ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 10,
                                            slow_handler, nullptr));
    check_fresh_after(4, [](char *buf, size_t len) {
        slow_addr = (uintptr_t)buf;
        ASSERT_EQ(0, ucmt_rawsys(SYS_munmap, buf, len));
    });
    ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED, slow_handler, nullptr);
    EXPECT_EQ(0u, slow_addr.load()) << "the slow handler did not run";
}

/* Two threads each repeatedly register, then replace the pages at their
 * own fixed address behind every hook (raw MAP_FIXED mmap over them), then
 * get again: every get must return the
 * current frames (the fixture's oracle), i.e. zero stale hits, while the
 * other thread subscribes, unmaps and looks up concurrently. */
TEST_F(rcache_uffd, two_thread_stress)
{
    RCACHE_NEED_PFN();
    const unsigned iters = on_valgrind() ? 50 : 1000;
    std::atomic<unsigned> stale(0), failed(0);

    /* both mapped first: a hole one thread leaves must not become the
     * other's buffer */
    const size_t len = 2 * page_size;
    char *bufs[2]    = {(char *)map(2), (char *)map(2)};
    auto worker      = [&](char *buf) {
        memset(buf, 1, len);
        for (unsigned i = 0; i < iters; ++i) {
            ucs_rcache_region_t *region;
            if (ucs_rcache_get(m_rcache, buf, len, RW, nullptr, &region) !=
                UCS_OK) {
                ++failed;
                break;
            }
            test_region *r  = reinterpret_cast<test_region *>(region);
            std::string bad = check_region(r, (uintptr_t)buf, len);
            if (!bad.empty() && (stale++ == 0)) {
                printf("first stale hit (iteration %u, region [0x%lx, "
                                 "0x%lx), buffer %p): %s\n",
                            i, r->super.super.start, r->super.super.end, buf,
                            bad.c_str());
            }
            ucs_rcache_region_put(m_rcache, region);
            /* new frames behind every hook (MAP_FIXED over them: an
             * unmap, no moment where the address is free for another
             * thread's mmap).  Not madvise(MADV_DONTNEED) here: the kernel
             * reports it before it zaps the pages, and a registration by
             * the OTHER thread in between records the old pages (see
             * docs/tuning.md, UCX_MEM_UFFD); single-threaded, it is
             * covered by raw_madvise_dontneed. */
            remap_fresh(buf, len);
        }
        munmap(buf, len);
    };
    std::thread t1(worker, bufs[0]), t2(worker, bufs[1]);
    t1.join();
    t2.join();
    EXPECT_EQ(0u, failed.load());
    EXPECT_EQ(0u, stale.load());
}

/* fork(): the child's cache registers anew (its monitor restarts at the
 * first subscription) and sees raw unmaps of its own registrations. */
TEST_F(rcache_uffd, fork_child_cache)
{
    RCACHE_NEED_PFN();
    const size_t len = 4 * page_size;
    char *buf        = (char *)map(4);
    memset(buf, 1, len);
    test_region *r = get(buf, len);
    ASSERT_TRUE(r != nullptr);
    put(r);

    pid_t pid = fork();
    if (pid == 0) {
        ucs_rcache_region_t *region;
        std::string bad;
        int ret = 0;
        /* the parent's pages, now copied: a new registration here */
        if (ucs_rcache_get(m_rcache, buf, len, RW, nullptr, &region) !=
            UCS_OK) {
            _exit(2);
        }
        ucs_rcache_region_put(m_rcache, region);
        ucmt_rawsys(SYS_munmap, buf, len);
        remap_fresh(buf, len);
        if (ucs_rcache_get(m_rcache, buf, len, RW, nullptr, &region) !=
            UCS_OK) {
            _exit(3);
        }
        bad = check_region(reinterpret_cast<test_region *>(region),
                           (uintptr_t)buf, len);
        ret = bad.empty() ? 0 : 4;
        ucs_rcache_region_put(m_rcache, region);
        _exit(ret);
    }
    ASSERT_GT(pid, 0);
    int status = 0;
    ASSERT_EQ(pid, waitpid(pid, &status, 0));
    EXPECT_TRUE(WIFEXITED(status) && (WEXITSTATUS(status) == 0))
        << "child status 0x" << std::hex << status;
    /* the parent still sees its own raw unmaps */
    check_fresh_after(2, [](char *b, size_t l) {
        ASSERT_EQ(0, ucmt_rawsys(SYS_munmap, b, l));
    });
    munmap(buf, len);
}

/* UCX_MEM_UFFD=yes without userfaultfd (seccomp): creating a cache fails;
 * under try it succeeds with the hooks only. */
TEST_F(rcache_uffd, yes_without_userfaultfd_fails)
{
    destroy();
    pid_t pid = fork();
    if (pid == 0) {
        struct sock_filter filter[] = {
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                     offsetof(struct seccomp_data, nr)),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_userfaultfd, 0, 1),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        };
        struct sock_fprog prog = {4, filter};
        if ((prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ||
            (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)) {
            _exit(2);
        }
        ucm_uffd_configure(UCM_UFFD_MODE_YES, 0, 4096);
        if (create() != UCS_ERR_UNSUPPORTED) {
            _exit(3);
        }
        ucm_uffd_configure(UCM_UFFD_MODE_TRY, 0, 4096);
        if (create() != UCS_OK) {
            _exit(4);
        }
        _exit(0);
    }
    ASSERT_GT(pid, 0);
    int status = 0;
    ASSERT_EQ(pid, waitpid(pid, &status, 0));
    EXPECT_TRUE(WIFEXITED(status) && (WEXITSTATUS(status) == 0))
        << "child status 0x" << std::hex << status;
}

/* At the monitor's VMA budget (UCX_MEM_UFFD_VMA_SHARE) a new region is
 * refused a span (UCS_ERR_EXCEEDS_LIMIT inside the cache), registered all
 * the same and left to the hooks: a hooked munmap still invalidates it. */
TEST_F(rcache_uffd, over_budget_region_left_to_hooks)
{
    ucm_uffd_info_t before, after;
    char *buf = (char *)map(6); /* regions in pages 1-4: no span touches */

    ucm_uffd_drain_wait();
    ucm_uffd_query(&before);
    ASSERT_GT(before.max_map_count, 0ul);
    /* a budget the spans fill: any new span is over it */
    ASSERT_EQ(UCS_OK, ucm_uffd_configure_budget((before.vma_use + 0.5) /
                                                before.max_map_count));
    test_region *r = get(buf + page_size, 4 * page_size);
    ASSERT_TRUE(r != nullptr);
    put(r);
    ucm_uffd_query(&after);
    EXPECT_EQ(before.spans, after.spans);
    EXPECT_EQ(before.over_budget + 1, after.over_budget);

    /* hooked unmap, fresh pages: registered anew, not a stale hit */
    unsigned regs_before = regs.load();
    ASSERT_EQ(0, munmap(buf + page_size, 4 * page_size));
    ASSERT_EQ((void *)(buf + page_size),
              mmap(buf + page_size, 4 * page_size, RW, FIXED, -1, 0));
    memset(buf + page_size, 5, 4 * page_size);
    r = get(buf + page_size, 4 * page_size);
    ASSERT_TRUE(r != nullptr);
    EXPECT_EQ(regs_before + 1, regs.load()) << "stale hit";
    put(r);
    ASSERT_EQ(UCS_OK, ucm_uffd_configure_budget((before.vma_budget + 0.5) /
                                                before.max_map_count));
    munmap(buf, 6 * page_size);
}
