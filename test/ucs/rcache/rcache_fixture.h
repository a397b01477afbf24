/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Test fixture for the registration cache: a fake registration that pins
 * nothing but faults the pages in (MADV_POPULATE_*) and records their page
 * frame numbers, and the oracle that compares them with the current ones.
 */
#ifndef TEST_RCACHE_FIXTURE_H_
#define TEST_RCACHE_FIXTURE_H_

#include <ucs/memory/rcache.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define TEST_RCACHE_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_RCACHE_SANITIZED 1
#endif
#endif
#ifndef TEST_RCACHE_SANITIZED
#define TEST_RCACHE_SANITIZED 0
#endif

namespace rcache_test
{

static const size_t page_size = 4096;

struct test_region {
    ucs_rcache_region_t super;
    std::vector<uint64_t> *pfns; /* frames of every page at mem_reg */
    uint32_t magic;
};

static const uint32_t region_magic_alive = 0xa11fe;
static const uint32_t region_magic_dead  = 0xdead;

/* Page frames of [addr, addr + npages pages), 0 for absent pages. */
bool read_pfns(uintptr_t addr, size_t npages, std::vector<uint64_t> &out,
               int fd = -1);

/* Running under valgrind (its preload library): tests size their loops
 * down. */
bool on_valgrind();

/* Does /proc/self/pagemap show page frame numbers here (root)?  Without
 * them the page-frame oracle cannot decide: tests that rely on it skip
 * (RCACHE_NEED_PFN) and check_region() refuses to compare zeros. */
bool pfn_available();

#define RCACHE_NEED_PFN()                                                      \
    do {                                                                       \
        if (!rcache_test::pfn_available()) {                                   \
            GTEST_SKIP() << "/proc/self/pagemap shows no page frame numbers "  \
                            "(needs root): the stale-region oracle cannot "    \
                            "work";                                            \
        }                                                                      \
    } while (0)

/* Oracle: do the recorded frames of region still match for the pages of
 * [addr, addr+len)?  Returns a description of the mismatch, or "" (never
 * for frames it could not read). */
std::string check_region(const test_region *region, uintptr_t addr, size_t len,
                         int fd = -1);

class rcache_fixture : public ::testing::Test
{
  public:
    /* mem_reg behaviour knobs */
    std::atomic<size_t> fail_above_size{~(size_t)0}; /* fail larger regs */
    std::atomic<size_t> max_registered{~(size_t)0};  /* fail past total */
    std::atomic<size_t> registered_bytes{0};
    std::atomic<unsigned> regs{0};
    std::atomic<unsigned> deregs{0};
    std::atomic<unsigned> reg_calls{0};
    std::mutex log_lock;
    std::vector<uintptr_t> dereg_log; /* start of each deregistered region */

  protected:
    ucs_rcache_t *m_rcache = nullptr;

    void TearDown() override;

    ucs_rcache_params_t default_params();
    ucs_status_t create(const ucs_rcache_params_t *params = nullptr);
    void destroy();

    test_region *get(void *addr, size_t len, int prot = PROT_READ | PROT_WRITE);
    void put(test_region *region);
    ucs_rcache_stats_t stats();

    /* mmap(2) anonymous pages; the test owns them */
    void *map(size_t npages, int prot = PROT_READ | PROT_WRITE);

    static ucs_status_t mem_reg_cb(void *context, ucs_rcache_t *rcache,
                                   void *arg, ucs_rcache_region_t *region,
                                   uint16_t flags);
    static void mem_dereg_cb(void *context, ucs_rcache_t *rcache,
                             ucs_rcache_region_t *region);
    static void dump_cb(void *context, ucs_rcache_t *rcache,
                        ucs_rcache_region_t *region, char *buf, size_t max);
};

} // namespace rcache_test

#endif
