/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The userfaultfd monitor's VMA budget (UCX_MEM_UFFD_VMA_SHARE, issue 30):
 * spans beyond it are refused with UCS_ERR_EXCEEDS_LIMIT and one WARN line,
 * the application's own mmap() keeps working, and what is unmapped gives
 * its VMAs and its budget back.  Oracles: /proc/self/maps lines, mmap()
 * results, the kernel's VmFlags in /proc/self/smaps.
 */
#include "common/ucm_test.h"
#include "rawsys.h"

#include <algorithm>
#include <fstream>
#include <string>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <vector>

namespace
{

using namespace ucmt;

ucm_uffd_info_t budget_info()
{
    ucm_uffd_info_t info;

    ucm_uffd_drain_wait();
    ucm_uffd_query(&info);
    return info;
}

unsigned long maps_lines()
{
    std::ifstream maps("/proc/self/maps");
    std::string line;
    unsigned long n = 0;

    while (std::getline(maps, line)) {
        ++n;
    }
    return n;
}

/* VmFlags of the mapping that contains addr ("" if not found). */
std::string vm_flags(const void *addr)
{
    std::ifstream smaps("/proc/self/smaps");
    std::string line;
    bool inside = false;
    unsigned long s, e;

    while (std::getline(smaps, line)) {
        if (sscanf(line.c_str(), "%lx-%lx ", &s, &e) == 2) {
            inside = ((uintptr_t)addr >= s) && ((uintptr_t)addr < e);
        } else if (inside && (line.compare(0, 8, "VmFlags:") == 0)) {
            return line;
        }
    }
    return "";
}

/* n one-page mmap() calls that cannot merge: how many failed. */
unsigned app_mmaps(unsigned n)
{
    std::vector<void *> maps;
    unsigned failed = 0;

    for (unsigned i = 0; i < n; ++i) {
        void *p = mmap(NULL, page_size(), (i & 1) ? PROT_READ : PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            ++failed;
        } else {
            maps.push_back(p);
        }
    }
    for (void *p : maps) {
        munmap(p, page_size());
    }
    return failed;
}

class UffdBudget : public ucmt::test
{
  protected:
    void SetUp() override
    {
        ucmt::test::SetUp();
        if (IsSkipped()) {
            return;
        }
        int active = 0;
        m_grain    = budget_info().grain;
        /* page grain: one span per subscription, counted exactly */
        ASSERT_EQ(UCS_OK, ucm_uffd_configure(UCM_UFFD_MODE_TRY, 0, 4096));
        ASSERT_EQ(UCS_OK, ucm_uffd_start(&active));
        if (!active) {
            GTEST_SKIP() << "userfaultfd monitor not active: "
                         << budget_info().reason;
        }
        ucm_uffd_info_t info = budget_info();
        m_max                = info.max_map_count;
        m_budget             = info.vma_budget;
        ASSERT_GT(m_max, 0ul);
    }

    void TearDown() override
    {
        if (m_max != 0) {
            ucm_uffd_configure_budget((m_budget + 0.5) / m_max);
        }
        ucm_uffd_configure(UCM_UFFD_MODE_TRY, 0, m_grain);
        ucmt::test::TearDown();
    }

    /* a budget of exactly vmas */
    void set_budget(unsigned long vmas)
    {
        ASSERT_EQ(UCS_OK, ucm_uffd_configure_budget((vmas + 0.5) / m_max));
        ASSERT_EQ(vmas, budget_info().vma_budget);
    }

    size_t m_grain         = 0;
    unsigned long m_max    = 0;
    unsigned long m_budget = 0;
};

/* The default: 1/8 of vm.max_map_count. */
TEST_F(UffdBudget, DefaultShare)
{
    EXPECT_EQ((unsigned long)(0.125 * m_max), m_budget);
}

/* Fill a small budget: the spans beyond it are refused, the mappings stay
 * under budget + slack, the application's mmap() works, a subscription
 * that joins a span is still taken, and unmapping gives it all back. */
TEST_F(UffdBudget, FillThenMmapSucceeds)
{
    const size_t ps           = page_size();
    const unsigned long spare = 100; /* new spans the budget allows */
    const unsigned long slack = 16;  /* the test's own mappings */
    ucm_uffd_info_t info0     = budget_info();
    const unsigned long n     = spare + 50;
    unsigned long ok = 0, refused = 0, maps0;
    uint64_t token;

    set_budget(2 * (info0.spans + spare));
    maps0 = maps_lines();
    /* odd pages: the even ones keep spans apart (and from any span next
     * to the mapping) */
    char *p = (char *)mmap(NULL, (2 * n + 1) * ps, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(MAP_FAILED, (void *)p);
    for (unsigned long i = 0; i < n; ++i) {
        ucs_status_t status =
            ucm_uffd_subscribe(p + (2 * i + 1) * ps, ps, &token);
        if (status == UCS_OK) {
            ++ok;
        } else {
            ASSERT_EQ(UCS_ERR_EXCEEDS_LIMIT, status) << i;
            ++refused;
        }
    }
    ucm_uffd_info_t full = budget_info();
    EXPECT_EQ(spare, ok);
    EXPECT_EQ(n - spare, refused);
    EXPECT_EQ(info0.over_budget + refused, full.over_budget);
    EXPECT_LE(full.vma_use, full.vma_budget);
    /* the kernel's count: the mapping, split around each span */
    EXPECT_LE(maps_lines(), maps0 + 1 + 2 * ok + slack);
    EXPECT_LE(maps_lines() - maps0, full.vma_budget + slack);

    /* the application's own mappings still succeed */
    EXPECT_EQ(0u, app_mmaps(1000));

    /* at the budget, a subscription between two spans merges them */
    ASSERT_EQ(UCS_OK, ucm_uffd_subscribe(p + 2 * ps, ps, &token));
    EXPECT_EQ(full.spans - 1, budget_info().spans);

    /* unmapped: the spans, the VMAs and the budget come back */
    ASSERT_EQ(0, munmap(p, (2 * n + 1) * ps));
    ucm_uffd_info_t after = budget_info();
    EXPECT_EQ(info0.spans, after.spans);
    EXPECT_LE(maps_lines(), maps0 + slack);
    char *q = (char *)mmap(NULL, 4 * ps, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(MAP_FAILED, (void *)q);
    EXPECT_EQ(UCS_OK, ucm_uffd_subscribe(q + ps, ps, &token));
    munmap(q, 4 * ps);
}

/* A raw mremap moves a registration with the pages: the monitor takes the
 * new place out of it (it would cost VMAs outside the budget). */
TEST_F(UffdBudget, MremapDestinationUnregistered)
{
    const size_t ps = page_size();
    uint64_t token;
    char *src = (char *)mmap(NULL, 3 * ps, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *dst = (char *)mmap(NULL, 3 * ps, PROT_READ,
                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    ASSERT_NE(MAP_FAILED, (void *)src);
    ASSERT_NE(MAP_FAILED, (void *)dst);
    ASSERT_EQ(UCS_OK, ucm_uffd_subscribe(src + ps, ps, &token));
    ASSERT_NE(std::string::npos, vm_flags(src + ps).find(" uw"))
        << vm_flags(src + ps);
    ASSERT_EQ((long)(dst + ps),
              ucmt_rawsys(SYS_mremap, src + ps, ps, ps,
                          MREMAP_MAYMOVE | MREMAP_FIXED, dst + ps));
    ucm_uffd_drain_wait();
    EXPECT_EQ(std::string::npos, vm_flags(dst + ps).find(" uw"))
        << vm_flags(dst + ps);
    munmap(src, 3 * ps);
    munmap(dst, 3 * ps);
}

UCMT_CHILD_SCENARIO(uffd_budget_fill)
{
    const size_t ps  = page_size();
    unsigned refused = 0, ok = 0;
    uint64_t token;
    int active = 0;

    ucm_uffd_configure(UCM_UFFD_MODE_TRY, 0, 4096);
    if ((ucm_uffd_start(&active) != UCS_OK) || !active) {
        printf("inactive\n");
        return 0;
    }
    char *p = (char *)mmap(NULL, 64 * ps, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    for (unsigned i = 0; i < 32; ++i) {
        if (ucm_uffd_subscribe(p + 2 * i * ps, ps, &token) == UCS_OK) {
            ++ok;
        } else {
            ++refused;
        }
    }
    ucm_uffd_info_t info = budget_info();
    printf("budget=%lu max=%lu ok=%u refused=%u\n", info.vma_budget,
           info.max_map_count, ok, refused);
    return 0;
}

unsigned long count_of(const std::string &s, const char *what)
{
    unsigned long n = 0;
    for (size_t at = s.find(what); at != std::string::npos;
         at        = s.find(what, at + 1)) {
        ++n;
    }
    return n;
}

/* UCX_MEM_UFFD_VMA_SHARE through the parser: a tiny share refuses with one
 * WARN line in all; malformed and out-of-range values get one error line
 * and the default. */
TEST(UffdBudgetConfig, Knob)
{
    child_result r =
        run_self("uffd_budget_fill", {{"UCX_MEM_UFFD_VMA_SHARE", "0.0001"}});
    ASSERT_TRUE(r.exited_ok()) << r.str();
    if (r.out.find("inactive") != std::string::npos) {
        GTEST_SKIP() << "userfaultfd monitor not active in the child";
    }
    unsigned long budget, max;
    unsigned ok, refused;
    ASSERT_EQ(4, sscanf(r.out.c_str(), "budget=%lu max=%lu ok=%u refused=%u",
                        &budget, &max, &ok, &refused))
        << r.str();
    EXPECT_EQ((unsigned long)(0.0001 * max), budget);
    EXPECT_LE(2 * ok, budget) << r.str();
    EXPECT_EQ(32u, ok + refused) << r.str();
    EXPECT_GT(refused, 0u) << r.str();
    EXPECT_EQ(1u, count_of(r.err, "VMA budget reached")) << r.str();

    for (const char *bad : {"half", "2", "-1"}) {
        r = run_self("uffd_budget_fill", {{"UCX_MEM_UFFD_VMA_SHARE", bad}});
        ASSERT_TRUE(r.exited_ok()) << r.str();
        ASSERT_EQ(4,
                  sscanf(r.out.c_str(), "budget=%lu max=%lu ok=%u refused=%u",
                         &budget, &max, &ok, &refused))
            << r.str();
        EXPECT_EQ((unsigned long)(0.125 * max), budget) << bad;
        EXPECT_EQ(32u, ok) << bad;
        EXPECT_EQ(1u, count_of(r.err, "UCX_MEM_UFFD_VMA_SHARE")) << r.str();
        EXPECT_EQ(0u, count_of(r.err, "VMA budget reached")) << r.str();
    }
}

} // namespace
