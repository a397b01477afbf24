/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Memory-type cache: explicit updates against a page-granular oracle, bad
 * input, libucm events, the process-wide instance and concurrent readers.
 */
#include <gtest/gtest.h>

extern "C" {
#include <ucm/api/ucm_ext.h>
#include <ucs/memory/ucs_memtype_cache.h>
}

#include <atomic>
#include <chrono>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

namespace
{

/* Fake addresses: the cache never dereferences them. */
const uintptr_t BASE = 0x7f0000000000ul;
const size_t PAGE    = 4096;

void *addr(size_t page, size_t offset = 0)
{
    return (void *)(BASE + (page * PAGE) + offset);
}

class memtype_cache : public ::testing::Test
{
  protected:
    void SetUp() override
    {
        ASSERT_EQ(UCS_OK, ucs_memtype_cache_create(0, &m_cache));
    }

    void TearDown() override
    {
        ucs_memtype_cache_destroy(m_cache);
    }

    /* lookup status, and the type (LAST when the output was not written) */
    ucs_status_t lookup(const void *address, size_t length,
                        ucs_memory_type_t *type)
    {
        *type = UCS_MEMORY_TYPE_LAST;
        return ucs_memtype_cache_lookup(m_cache, address, length, type);
    }

    void expect_type(const void *address, size_t length,
                     ucs_memory_type_t expected)
    {
        ucs_memory_type_t type;
        EXPECT_EQ(UCS_OK, lookup(address, length, &type))
            << address << " + " << length;
        EXPECT_EQ(expected, type) << address << " + " << length;
    }

    void expect_none(const void *address, size_t length)
    {
        ucs_memory_type_t type;
        EXPECT_EQ(UCS_ERR_NO_ELEM, lookup(address, length, &type))
            << address << " + " << length;
        EXPECT_EQ(UCS_MEMORY_TYPE_LAST, type) << "output written on error";
    }

    ucs_memtype_cache_t *m_cache = nullptr;
};

TEST_F(memtype_cache, empty_is_unknown)
{
    expect_none(addr(0), 1);
    expect_none(addr(0), PAGE * 100);
    expect_none((void *)0, 1);
}

TEST_F(memtype_cache, covered_ranges)
{
    ASSERT_EQ(UCS_OK, ucs_memtype_cache_update(m_cache, addr(10), 4 * PAGE,
                                               UCS_MEMORY_TYPE_CUDA));
    expect_type(addr(10), 4 * PAGE, UCS_MEMORY_TYPE_CUDA);
    expect_type(addr(10), 1, UCS_MEMORY_TYPE_CUDA);
    expect_type(addr(13, PAGE - 1), 1, UCS_MEMORY_TYPE_CUDA);
    expect_type(addr(11, 7), 2 * PAGE, UCS_MEMORY_TYPE_CUDA);
    expect_none(addr(9), PAGE);
    expect_none(addr(14), 1);
}

TEST_F(memtype_cache, partial_overlap_is_unknown_not_host)
{
    ASSERT_EQ(UCS_OK, ucs_memtype_cache_update(m_cache, addr(10), 4 * PAGE,
                                               UCS_MEMORY_TYPE_CUDA));
    expect_type(addr(9, PAGE - 1), 2, UCS_MEMORY_TYPE_UNKNOWN);  /* head */
    expect_type(addr(13, PAGE - 1), 2, UCS_MEMORY_TYPE_UNKNOWN); /* tail */
    expect_type(addr(9), 6 * PAGE, UCS_MEMORY_TYPE_UNKNOWN); /* both sides */

    /* two allocations with a gap between them */
    ASSERT_EQ(UCS_OK, ucs_memtype_cache_update(m_cache, addr(15), PAGE,
                                               UCS_MEMORY_TYPE_CUDA));
    expect_type(addr(12), 4 * PAGE, UCS_MEMORY_TYPE_UNKNOWN);

    /* adjacent allocations of different types */
    ASSERT_EQ(UCS_OK, ucs_memtype_cache_update(m_cache, addr(14), PAGE,
                                               UCS_MEMORY_TYPE_CUDA_MANAGED));
    expect_type(addr(13), 2 * PAGE, UCS_MEMORY_TYPE_UNKNOWN);
    expect_type(addr(14), PAGE, UCS_MEMORY_TYPE_CUDA_MANAGED);

    /* adjacent allocations of one type cover the range */
    ASSERT_EQ(UCS_OK, ucs_memtype_cache_update(m_cache, addr(14), PAGE,
                                               UCS_MEMORY_TYPE_CUDA));
    expect_type(addr(10), 6 * PAGE, UCS_MEMORY_TYPE_CUDA);
}

TEST_F(memtype_cache, host_partial_overlap_is_unknown)
{
    ASSERT_EQ(UCS_OK, ucs_memtype_cache_update(m_cache, addr(1), PAGE,
                                               UCS_MEMORY_TYPE_HOST));
    expect_type(addr(1), PAGE, UCS_MEMORY_TYPE_HOST);
    expect_type(addr(1), PAGE + 1, UCS_MEMORY_TYPE_UNKNOWN);
}

TEST_F(memtype_cache, remove_keeps_the_rest)
{
    ASSERT_EQ(UCS_OK, ucs_memtype_cache_update(m_cache, addr(0), 8 * PAGE,
                                               UCS_MEMORY_TYPE_CUDA));
    ASSERT_EQ(UCS_OK, ucs_memtype_cache_remove(m_cache, addr(3), 2 * PAGE));
    expect_type(addr(0), 3 * PAGE, UCS_MEMORY_TYPE_CUDA);
    expect_type(addr(5), 3 * PAGE, UCS_MEMORY_TYPE_CUDA);
    expect_none(addr(3), 2 * PAGE);
    expect_type(addr(2), 2 * PAGE, UCS_MEMORY_TYPE_UNKNOWN);
    expect_type(addr(0), 8 * PAGE, UCS_MEMORY_TYPE_UNKNOWN);

    /* removing what is not there changes nothing */
    ASSERT_EQ(UCS_OK, ucs_memtype_cache_remove(m_cache, addr(100), PAGE));
    expect_type(addr(0), 3 * PAGE, UCS_MEMORY_TYPE_CUDA);

    ASSERT_EQ(UCS_OK, ucs_memtype_cache_remove(m_cache, addr(0), 8 * PAGE));
    expect_none(addr(0), 8 * PAGE);
}

TEST_F(memtype_cache, newest_update_wins)
{
    ASSERT_EQ(UCS_OK, ucs_memtype_cache_update(m_cache, addr(0), 8 * PAGE,
                                               UCS_MEMORY_TYPE_CUDA));
    ASSERT_EQ(UCS_OK, ucs_memtype_cache_update(m_cache, addr(2), 2 * PAGE,
                                               UCS_MEMORY_TYPE_CUDA_MANAGED));
    expect_type(addr(0), 2 * PAGE, UCS_MEMORY_TYPE_CUDA);
    expect_type(addr(2), 2 * PAGE, UCS_MEMORY_TYPE_CUDA_MANAGED);
    expect_type(addr(4), 4 * PAGE, UCS_MEMORY_TYPE_CUDA);
    expect_type(addr(1), 2 * PAGE, UCS_MEMORY_TYPE_UNKNOWN);
}

TEST_F(memtype_cache, bad_input)
{
    ucs_memory_type_t type = UCS_MEMORY_TYPE_LAST;

    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucs_memtype_cache_lookup(nullptr, addr(0), 1, &type));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucs_memtype_cache_lookup(m_cache, addr(0), 0, &type));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucs_memtype_cache_lookup(m_cache, addr(0), 1, nullptr));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucs_memtype_cache_lookup(m_cache, (void *)UINTPTR_MAX, 2, &type));
    EXPECT_EQ(UCS_MEMORY_TYPE_LAST, type);

    EXPECT_EQ(
        UCS_ERR_INVALID_PARAM,
        ucs_memtype_cache_update(m_cache, addr(0), 0, UCS_MEMORY_TYPE_CUDA));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucs_memtype_cache_update(m_cache, addr(0), SIZE_MAX,
                                       UCS_MEMORY_TYPE_CUDA));
    EXPECT_EQ(
        UCS_ERR_INVALID_PARAM,
        ucs_memtype_cache_update(m_cache, addr(0), 1, UCS_MEMORY_TYPE_UNKNOWN));
    EXPECT_EQ(
        UCS_ERR_INVALID_PARAM,
        ucs_memtype_cache_update(m_cache, addr(0), 1, (ucs_memory_type_t)-1));
    EXPECT_EQ(
        UCS_ERR_INVALID_PARAM,
        ucs_memtype_cache_update(nullptr, addr(0), 1, UCS_MEMORY_TYPE_CUDA));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucs_memtype_cache_remove(m_cache, addr(0), 0));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucs_memtype_cache_remove(nullptr, addr(0), 1));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, ucs_memtype_cache_create(0, nullptr));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, ucs_memtype_cache_global(nullptr));

    ucs_memtype_cache_t *other = nullptr;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, ucs_memtype_cache_create(0x80, &other));
    EXPECT_EQ(nullptr, other);
    ucs_memtype_cache_destroy(nullptr);

    /* nothing was recorded by the rejected calls */
    expect_none(addr(0), PAGE);
}

/* Random updates and removals against a per-page oracle; lookups of random
 * page ranges must agree with it exactly. */
TEST_F(memtype_cache, random_against_oracle)
{
    const size_t pages              = 256;
    const ucs_memory_type_t types[] = {UCS_MEMORY_TYPE_HOST,
                                       UCS_MEMORY_TYPE_CUDA,
                                       UCS_MEMORY_TYPE_CUDA_MANAGED};
    std::vector<ucs_memory_type_t> oracle(pages, UCS_MEMORY_TYPE_LAST);
    std::mt19937 rng(12345);

    for (int op = 0; op < 20000; ++op) {
        size_t first  = rng() % pages;
        size_t count  = 1 + (rng() % ucs_min(16ul, pages - first));
        unsigned kind = rng() % 4;

        if (kind < 2) {
            ucs_memory_type_t type = types[rng() % 3];
            ASSERT_EQ(UCS_OK, ucs_memtype_cache_update(m_cache, addr(first),
                                                       count * PAGE, type));
            std::fill(&oracle[first], &oracle[first + count], type);
        } else if (kind == 2) {
            ASSERT_EQ(UCS_OK, ucs_memtype_cache_remove(m_cache, addr(first),
                                                       count * PAGE));
            std::fill(&oracle[first], &oracle[first + count],
                      UCS_MEMORY_TYPE_LAST);
        }

        first    = rng() % pages;
        count    = 1 + (rng() % ucs_min(32ul, pages - first));
        bool any = false, all = true;
        for (size_t i = first; i < first + count; ++i) {
            any = any || (oracle[i] != UCS_MEMORY_TYPE_LAST);
            all = all && (oracle[i] == oracle[first]) &&
                  (oracle[i] != UCS_MEMORY_TYPE_LAST);
        }

        ucs_memory_type_t type;
        ucs_status_t status = lookup(addr(first), count * PAGE, &type);
        if (!any) {
            ASSERT_EQ(UCS_ERR_NO_ELEM, status) << "op " << op;
        } else {
            ASSERT_EQ(UCS_OK, status) << "op " << op;
            ASSERT_EQ(all ? oracle[first] : UCS_MEMORY_TYPE_UNKNOWN, type)
                << "op " << op << " pages " << first << "+" << count;
        }
    }
}

TEST(memtype_cache_events, fed_by_libucm_events)
{
    ucs_memtype_cache_t *cache;
    ucs_memory_type_t type;

    ASSERT_EQ(UCS_OK,
              ucs_memtype_cache_create(UCS_MEMTYPE_CACHE_FLAG_EVENTS, &cache));
    ucm_dispatch_mem_type_alloc(addr(50), 3 * PAGE, UCS_MEMORY_TYPE_CUDA);
    ucm_dispatch_mem_type_alloc(addr(60), PAGE, UCS_MEMORY_TYPE_CUDA_MANAGED);
    ucm_dispatch_mem_type_alloc(addr(70), 0, UCS_MEMORY_TYPE_CUDA);

    ASSERT_EQ(UCS_OK,
              ucs_memtype_cache_lookup(cache, addr(50), 3 * PAGE, &type));
    EXPECT_EQ(UCS_MEMORY_TYPE_CUDA, type);
    ASSERT_EQ(UCS_OK, ucs_memtype_cache_lookup(cache, addr(60), 8, &type));
    EXPECT_EQ(UCS_MEMORY_TYPE_CUDA_MANAGED, type);
    ASSERT_EQ(UCS_OK,
              ucs_memtype_cache_lookup(cache, addr(49), 2 * PAGE, &type));
    EXPECT_EQ(UCS_MEMORY_TYPE_UNKNOWN, type);
    EXPECT_EQ(UCS_ERR_NO_ELEM,
              ucs_memtype_cache_lookup(cache, addr(70), PAGE, &type));

    ucm_dispatch_mem_type_free(addr(50), 3 * PAGE, UCS_MEMORY_TYPE_CUDA);
    EXPECT_EQ(UCS_ERR_NO_ELEM,
              ucs_memtype_cache_lookup(cache, addr(50), 3 * PAGE, &type));

    /* after destroy, events no longer reach it (ASan would see a use) */
    ucs_memtype_cache_destroy(cache);
    ucm_dispatch_mem_type_alloc(addr(80), PAGE, UCS_MEMORY_TYPE_CUDA);
    ucm_dispatch_mem_type_free(addr(80), PAGE, UCS_MEMORY_TYPE_CUDA);
}

TEST(memtype_cache_events, global_instance)
{
    ucs_memtype_cache_t *first, *second;
    ucs_memory_type_t type;

    ASSERT_EQ(UCS_OK, ucs_memtype_cache_global(&first));
    ASSERT_EQ(UCS_OK, ucs_memtype_cache_global(&second));
    EXPECT_EQ(first, second);

    ucm_dispatch_mem_type_alloc(addr(90), PAGE, UCS_MEMORY_TYPE_CUDA);
    ASSERT_EQ(UCS_OK, ucs_memtype_cache_lookup(first, addr(90), PAGE, &type));
    EXPECT_EQ(UCS_MEMORY_TYPE_CUDA, type);
    ucm_dispatch_mem_type_free(addr(90), PAGE, UCS_MEMORY_TYPE_CUDA);
    EXPECT_EQ(UCS_ERR_NO_ELEM,
              ucs_memtype_cache_lookup(first, addr(90), PAGE, &type));

    ucs_memtype_cache_global_cleanup();
    ucs_memtype_cache_global_cleanup(); /* twice is harmless */
    ASSERT_EQ(UCS_OK, ucs_memtype_cache_global(&first));
    EXPECT_EQ(UCS_ERR_NO_ELEM,
              ucs_memtype_cache_lookup(first, addr(90), PAGE, &type));
    ucs_memtype_cache_global_cleanup();
}

/* Concurrent first use: every thread gets the same instance. */
TEST(memtype_cache_events, global_first_use_from_threads)
{
    const int nthreads = 4;
    ucs_memtype_cache_t *caches[nthreads];
    std::vector<std::thread> threads;

    for (int i = 0; i < nthreads; ++i) {
        threads.emplace_back([&caches, i]() {
            caches[i] = nullptr;
            EXPECT_EQ(UCS_OK, ucs_memtype_cache_global(&caches[i]));
        });
    }
    for (auto &thread : threads) {
        thread.join();
    }
    for (int i = 1; i < nthreads; ++i) {
        EXPECT_EQ(caches[0], caches[i]);
    }
    ucs_memtype_cache_global_cleanup();
}

/* Readers of a stable range always see its type while a writer churns
 * other ranges (growing the storage); a toggled range is seen either known
 * with its type or not at all, never as anything else. */
TEST_F(memtype_cache, concurrent_readers_and_writer)
{
    std::atomic<bool> stop(false);
    std::atomic<unsigned long> bad(0), lookups(0);
    std::vector<std::thread> readers;

    ASSERT_EQ(UCS_OK, ucs_memtype_cache_update(m_cache, addr(1000), PAGE,
                                               UCS_MEMORY_TYPE_CUDA_MANAGED));
    for (int i = 0; i < 2; ++i) {
        readers.emplace_back([&]() {
            ucs_memory_type_t type;
            while (!stop.load()) {
                if ((ucs_memtype_cache_lookup(m_cache, addr(1000), PAGE,
                                              &type) != UCS_OK) ||
                    (type != UCS_MEMORY_TYPE_CUDA_MANAGED)) {
                    ++bad;
                }
                ucs_status_t status =
                    ucs_memtype_cache_lookup(m_cache, addr(5), PAGE, &type);
                if ((status != UCS_ERR_NO_ELEM) &&
                    ((status != UCS_OK) || (type != UCS_MEMORY_TYPE_CUDA))) {
                    ++bad;
                }
                ++lookups;
            }
        });
    }

    /* at least 20 rounds, and until the readers did some lookups (they
     * may start late on a loaded machine), within 5 seconds */
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (int round = 0;
         (round < 20) || ((lookups.load() < 1000) &&
                          (std::chrono::steady_clock::now() < deadline));
         ++round) {
        for (size_t page = 0; page < 500; page += 2) {
            ASSERT_EQ(UCS_OK,
                      ucs_memtype_cache_update(m_cache, addr(page), PAGE,
                                               UCS_MEMORY_TYPE_CUDA));
        }
        for (size_t page = 0; page < 500; page += 2) {
            ASSERT_EQ(UCS_OK,
                      ucs_memtype_cache_remove(m_cache, addr(page), PAGE));
        }
    }
    stop = true;
    for (auto &reader : readers) {
        reader.join();
    }
    EXPECT_EQ(0ul, bad.load());
    EXPECT_GT(lookups.load(), 0ul);
}

} // namespace
