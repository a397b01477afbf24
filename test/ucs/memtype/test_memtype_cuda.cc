/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CUDA memory-type hooks (libucm_cuda) feeding the memory-type cache.
 *
 * No GPU is needed: the program is linked to libucmt_fakecuda, a TEST-ONLY
 * library that exports the CUDA allocation entry points and hands out host
 * memory (it is not CUDA).  Oracles: the fake's own record of each live
 * allocation's size, and a libucm handler counting the events.
 */
#include <gtest/gtest.h>

extern "C" {
#include <ucm/api/ucm_ext.h>
#include <ucm/cuda/ucm_cuda.h>
#include <ucs/memory/ucs_memtype_cache.h>
#include "fakecuda.h"
#include "test_memtype_cuda_ptsz.h"
}

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace
{

std::atomic<unsigned long> alloc_events(0), free_events(0);

void count_event(ucm_event_type_t type, ucm_event_t *, void *)
{
    if (type == UCM_EVENT_MEM_TYPE_ALLOC) {
        ++alloc_events;
    } else if (type == UCM_EVENT_MEM_TYPE_FREE) {
        ++free_events;
    }
}

typedef ucs_status_t (*install_func_t)(void);
typedef void (*stats_func_t)(ucm_cuda_hooks_stats_t *);

/* libucm_cuda, loaded once by the first test that needs it. */
struct hooks {
    void *handle           = nullptr;
    install_func_t install = nullptr;
    stats_func_t stats     = nullptr;
};

hooks &load_hooks()
{
    static hooks h;
    if (h.handle == nullptr) {
        h.handle = dlopen(UCMT_CUDA_LIB, RTLD_NOW | RTLD_LOCAL);
        if (h.handle != nullptr) {
            h.install =
                (install_func_t)dlsym(h.handle, "ucm_cuda_hooks_install");
            h.stats = (stats_func_t)dlsym(h.handle, "ucm_cuda_hooks_stats");
        }
    }
    return h;
}

bool hooks_loaded()
{
    return dlopen(UCMT_CUDA_LIB, RTLD_NOW | RTLD_NOLOAD) != nullptr;
}

class memtype_cuda : public ::testing::Test
{
  protected:
    static void SetUpTestSuite()
    {
        ASSERT_EQ(UCS_OK, ucm_set_event_handler(UCM_EVENT_MEM_TYPE_ALLOC |
                                                    UCM_EVENT_MEM_TYPE_FREE,
                                                0, count_event, nullptr));
    }

    static void TearDownTestSuite()
    {
        ucm_unset_event_handler(UCM_EVENT_MEM_TYPE_ALLOC |
                                    UCM_EVENT_MEM_TYPE_FREE,
                                count_event, nullptr);
        ucs_memtype_cache_global_cleanup();
    }

    void SetUp() override
    {
        ASSERT_EQ(UCS_OK, ucs_memtype_cache_global(&m_cache));
        m_allocs = alloc_events.load();
        m_frees  = free_events.load();
    }

    void install()
    {
        hooks &h = load_hooks();
        ASSERT_NE(nullptr, h.handle) << dlerror();
        ASSERT_NE(nullptr, h.install);
        ASSERT_EQ(UCS_OK, h.install());
    }

    ucs_status_t lookup(const void *address, size_t length,
                        ucs_memory_type_t *type)
    {
        *type = UCS_MEMORY_TYPE_LAST;
        return ucs_memtype_cache_lookup(m_cache, address, length, type);
    }

    /* The cache knows exactly [address, address + size) as 'expected' */
    void expect_known(const void *address, ucs_memory_type_t expected)
    {
        size_t size   = ucmt_fakecuda_size(address);
        const char *p = (const char *)address;
        ucs_memory_type_t type;

        ASSERT_NE(0ul, size) << "the fake does not know " << address;
        ASSERT_EQ(UCS_OK, lookup(p, size, &type));
        EXPECT_EQ(expected, type) << "whole range";
        ASSERT_EQ(UCS_OK, lookup(p + size - 1, 1, &type));
        EXPECT_EQ(expected, type) << "last byte";
        /* partial overlaps: unknown, never host */
        ASSERT_EQ(UCS_OK, lookup(p, size + 1, &type));
        EXPECT_EQ(UCS_MEMORY_TYPE_UNKNOWN, type) << "one byte past the end";
        ASSERT_EQ(UCS_OK, lookup(p - 1, 2, &type));
        EXPECT_EQ(UCS_MEMORY_TYPE_UNKNOWN, type) << "one byte before";
    }

    void expect_unknown(const void *address, size_t size)
    {
        ucs_memory_type_t type;
        EXPECT_EQ(UCS_ERR_NO_ELEM, lookup(address, size, &type))
            << address << " + " << size << " type " << type;
    }

    void expect_events(unsigned long allocs, unsigned long frees)
    {
        EXPECT_EQ(allocs, alloc_events.load() - m_allocs);
        EXPECT_EQ(frees, free_events.load() - m_frees);
    }

    ucs_memtype_cache_t *m_cache = nullptr;
    unsigned long m_allocs = 0, m_frees = 0;
};

/* One allocator and its release, as the application would call them. */
struct allocator {
    std::string name;
    ucs_memory_type_t type;
    std::function<bool(void **, size_t)> alloc;
    std::function<bool(void *)> release;
};

std::vector<allocator> allocators()
{
    auto cu_free = [](void *p) {
        return cuMemFree((CUdeviceptr)p) == CUDA_SUCCESS;
    };
    auto cu_free_async = [](void *p) {
        return cuMemFreeAsync((CUdeviceptr)p, nullptr) == CUDA_SUCCESS;
    };
    auto rt_free       = [](void *p) { return cudaFree(p) == cudaSuccess; };
    auto rt_free_async = [](void *p) {
        return cudaFreeAsync(p, nullptr) == cudaSuccess;
    };

    return {
        {"cuMemAlloc", UCS_MEMORY_TYPE_CUDA,
         [](void **p, size_t n) {
             CUdeviceptr d;
             bool ok = (cuMemAlloc(&d, n) == CUDA_SUCCESS);
             *p      = (void *)d;
             return ok;
         },
         cu_free},
        {"cuMemAllocManaged", UCS_MEMORY_TYPE_CUDA_MANAGED,
         [](void **p, size_t n) {
             CUdeviceptr d;
             bool ok = (cuMemAllocManaged(&d, n, CU_MEM_ATTACH_GLOBAL) ==
                        CUDA_SUCCESS);
             *p      = (void *)d;
             return ok;
         },
         cu_free},
        {"cuMemAllocPitch", UCS_MEMORY_TYPE_CUDA,
         [](void **p, size_t n) {
             CUdeviceptr d;
             size_t pitch;
             bool ok = (cuMemAllocPitch(&d, &pitch, n, 3, 4) == CUDA_SUCCESS);
             *p      = (void *)d;
             return ok && (pitch >= n);
         },
         cu_free},
        {"cuMemAllocAsync", UCS_MEMORY_TYPE_CUDA,
         [](void **p, size_t n) {
             CUdeviceptr d;
             bool ok = (cuMemAllocAsync(&d, n, nullptr) == CUDA_SUCCESS);
             *p      = (void *)d;
             return ok;
         },
         cu_free_async},
        {"cudaMalloc", UCS_MEMORY_TYPE_CUDA,
         [](void **p, size_t n) { return cudaMalloc(p, n) == cudaSuccess; },
         rt_free},
        {"cudaMallocManaged", UCS_MEMORY_TYPE_CUDA_MANAGED,
         [](void **p, size_t n) {
             return cudaMallocManaged(p, n, cudaMemAttachGlobal) == cudaSuccess;
         },
         rt_free},
        {"cudaMallocPitch", UCS_MEMORY_TYPE_CUDA,
         [](void **p, size_t n) {
             size_t pitch;
             return (cudaMallocPitch(p, &pitch, n, 5) == cudaSuccess) &&
                    (pitch >= n);
         },
         rt_free},
        {"cudaMallocAsync", UCS_MEMORY_TYPE_CUDA,
         [](void **p, size_t n) {
             return cudaMallocAsync(p, n, nullptr) == cudaSuccess;
         },
         rt_free_async},
        /* per-thread default stream variants */
        {"cuMemAllocAsync_ptsz", UCS_MEMORY_TYPE_CUDA, ucmt_ptsz_cu_alloc,
         ucmt_ptsz_cu_free},
        {"cudaMallocAsync_ptsz", UCS_MEMORY_TYPE_CUDA, ucmt_ptsz_rt_alloc,
         ucmt_ptsz_rt_free},
        /* driver allocation released by the runtime, and back */
        {"cuMemAlloc+cudaFree", UCS_MEMORY_TYPE_CUDA,
         [](void **p, size_t n) {
             CUdeviceptr d;
             bool ok = (cuMemAlloc(&d, n) == CUDA_SUCCESS);
             *p      = (void *)d;
             return ok;
         },
         rt_free},
        {"cudaMalloc+cuMemFree", UCS_MEMORY_TYPE_CUDA,
         [](void **p, size_t n) { return cudaMalloc(p, n) == cudaSuccess; },
         cu_free},
    };
}

/* Must run first (gtest keeps the file order): nothing is reported while
 * libucm_cuda is not loaded. */
TEST_F(memtype_cuda, not_reported_before_hooks)
{
    if (hooks_loaded()) {
        GTEST_SKIP() << "libucm_cuda is already loaded (test order changed)";
    }

    void *p = nullptr;
    ASSERT_EQ(cudaSuccess, cudaMalloc(&p, 10000));
    expect_unknown(p, 10000);
    ASSERT_EQ(cudaSuccess, cudaFree(p));
    expect_events(0, 0);
}

TEST_F(memtype_cuda, install_is_idempotent)
{
    install();
    hooks &h = load_hooks();
    ucm_cuda_hooks_stats_t before, after;

    h.stats(&before);
    EXPECT_EQ(16u, before.entry_points);
    EXPECT_GT(before.slots_written, 0ul) << "the program's GOT names them";
    ASSERT_EQ(UCS_OK, h.install());
    h.stats(&after);
    EXPECT_EQ(before.slots_written, after.slots_written);
}

TEST_F(memtype_cuda, every_allocator_reported)
{
    install();

    for (const allocator &a : allocators()) {
        SCOPED_TRACE(a.name);
        for (size_t size : {1ul, 4096ul, 100000ul}) {
            SetUp();
            void *p = nullptr;
            ASSERT_TRUE(a.alloc(&p, size));
            ASSERT_NE(nullptr, p);
            expect_known(p, a.type);
            size_t real_size = ucmt_fakecuda_size(p);

            ASSERT_TRUE(a.release(p));
            expect_unknown(p, real_size);
            expect_events(1, 1);
        }
    }
    EXPECT_EQ(0ul, ucmt_fakecuda_live());
}

/* MEM_TYPE_ALLOC events one handler got: address -> (size, type) */
struct alloc_log {
    std::vector<std::pair<void *, std::pair<size_t, ucs_memory_type_t>>> seen;

    static void cb(ucm_event_type_t type, ucm_event_t *event, void *arg)
    {
        if (type == UCM_EVENT_MEM_TYPE_ALLOC) {
            static_cast<alloc_log *>(arg)->seen.push_back(
                {event->mem_type.address,
                 {event->mem_type.size, event->mem_type.mem_type}});
        }
    }

    size_t count(void *address, size_t size, ucs_memory_type_t type) const
    {
        size_t n = 0;
        for (const auto &e : seen) {
            n += (e.first == address) && (e.second.first == size) &&
                 (e.second.second == type);
        }
        return n;
    }

    size_t count(void *address) const
    {
        size_t n = 0;
        for (const auto &e : seen) {
            n += (e.first == address);
        }
        return n;
    }
};

/* UCM_EVENT_FLAG_EXISTING_ALLOC (UCX's memory-type cache sets it): a handler
 * set after allocations were made hears of those still live, once, with
 * their size and type; one set without the flag does not */
TEST_F(memtype_cuda, existing_allocations_reported_to_new_handler)
{
    install();
    void *a = nullptr, *gone = nullptr;
    CUdeviceptr m;
    ASSERT_EQ(cudaSuccess, cudaMalloc(&a, 4096));
    ASSERT_EQ(CUDA_SUCCESS, cuMemAllocManaged(&m, 8192, CU_MEM_ATTACH_GLOBAL));
    ASSERT_EQ(cudaSuccess, cudaMalloc(&gone, 100));
    ASSERT_EQ(cudaSuccess, cudaFree(gone));

    alloc_log with, without;
    ASSERT_EQ(UCS_OK, ucm_set_event_handler(UCM_EVENT_MEM_TYPE_ALLOC |
                                                UCM_EVENT_FLAG_EXISTING_ALLOC,
                                            0, alloc_log::cb, &with));
    ASSERT_EQ(UCS_OK, ucm_set_event_handler(UCM_EVENT_MEM_TYPE_ALLOC, 0,
                                            alloc_log::cb, &without));
    EXPECT_EQ(1u, with.count(a, 4096, UCS_MEMORY_TYPE_CUDA));
    EXPECT_EQ(1u, with.count((void *)m, 8192, UCS_MEMORY_TYPE_CUDA_MANAGED));
    EXPECT_EQ(0u, with.count(gone)) << "a freed allocation was reported";
    EXPECT_TRUE(without.seen.empty());

    /* a memory-type cache created now knows them too */
    ucs_memtype_cache_t *fresh;
    ucs_memory_type_t type = UCS_MEMORY_TYPE_LAST;
    ASSERT_EQ(UCS_OK,
              ucs_memtype_cache_create(UCS_MEMTYPE_CACHE_FLAG_EVENTS, &fresh));
    EXPECT_EQ(UCS_OK, ucs_memtype_cache_lookup(fresh, a, 4096, &type));
    EXPECT_EQ(UCS_MEMORY_TYPE_CUDA, type);
    ucs_memtype_cache_destroy(fresh);

    /* from now on both hear new allocations as usual */
    void *c = nullptr;
    ASSERT_EQ(cudaSuccess, cudaMalloc(&c, 64));
    EXPECT_EQ(1u, with.count(c, 64, UCS_MEMORY_TYPE_CUDA));
    EXPECT_EQ(1u, without.count(c, 64, UCS_MEMORY_TYPE_CUDA));
    ucm_unset_event_handler(UCM_EVENT_MEM_TYPE_ALLOC, alloc_log::cb, &with);
    ucm_unset_event_handler(UCM_EVENT_MEM_TYPE_ALLOC, alloc_log::cb, &without);
    EXPECT_EQ(cudaSuccess, cudaFree(c));
    EXPECT_EQ(cudaSuccess, cudaFree(a));
    EXPECT_EQ(CUDA_SUCCESS, cuMemFree(m));
}

TEST_F(memtype_cuda, failures_and_empty_not_reported)
{
    install();
    void *p       = nullptr;
    CUdeviceptr d = 0;

    EXPECT_EQ(cudaErrorMemoryAllocation,
              cudaMalloc(&p, UCMT_FAKECUDA_MAX_SIZE + 1));
    EXPECT_EQ(CUDA_ERROR_OUT_OF_MEMORY,
              cuMemAlloc(&d, UCMT_FAKECUDA_MAX_SIZE + 1));
    EXPECT_EQ(cudaSuccess, cudaMalloc(&p, 0));
    EXPECT_EQ(nullptr, p);
    EXPECT_EQ(cudaSuccess, cudaFree(nullptr));
    EXPECT_EQ(CUDA_SUCCESS, cuMemFree(0));

    int local;
    EXPECT_EQ(cudaErrorInvalidValue, cudaFree(&local)); /* not allocated */
    expect_events(0, 0);
}

TEST_F(memtype_cuda, failed_free_keeps_the_range)
{
    install();
    void *p = nullptr;

    ASSERT_EQ(cudaSuccess, cudaMalloc(&p, 8192));
    ucmt_fakecuda_fail_next_free();
    EXPECT_EQ(cudaErrorInvalidValue, cudaFree(p));
    expect_known(p, UCS_MEMORY_TYPE_CUDA); /* still allocated */

    ASSERT_EQ(cudaSuccess, cudaFree(p));
    expect_unknown(p, 8192);
}

TEST_F(memtype_cuda, managed_freed_by_driver)
{
    install();
    void *p = nullptr;

    ASSERT_EQ(cudaSuccess,
              cudaMallocManaged(&p, 3 * 4096, cudaMemAttachGlobal));
    expect_known(p, UCS_MEMORY_TYPE_CUDA_MANAGED);
    ASSERT_EQ(CUDA_SUCCESS, cuMemFree((CUdeviceptr)p));
    expect_unknown(p, 3 * 4096);
}

TEST_F(memtype_cuda, threads)
{
    install();
    const int nthreads = 4, iterations = 300;
    std::atomic<unsigned long> bad(0);
    std::vector<std::thread> threads;
    std::vector<std::vector<std::pair<void *, size_t>>> seen(nthreads);

    for (int t = 0; t < nthreads; ++t) {
        threads.emplace_back([&, t]() {
            ucs_memory_type_t type;
            for (int i = 0; i < iterations; ++i) {
                size_t size = 4096 * (1 + ((t + i) % 5));
                void *p     = nullptr;
                if (cudaMalloc(&p, size) != cudaSuccess) {
                    ++bad;
                    continue;
                }
                if ((ucs_memtype_cache_lookup(m_cache, p, size, &type) !=
                     UCS_OK) ||
                    (type != UCS_MEMORY_TYPE_CUDA)) {
                    ++bad;
                }
                seen[t].emplace_back(p, size);
                if (cudaFree(p) != cudaSuccess) {
                    ++bad;
                }
            }
        });
    }
    for (auto &thread : threads) {
        thread.join();
    }

    EXPECT_EQ(0ul, bad.load());
    expect_events(nthreads * iterations, nthreads * iterations);
    for (auto &ranges : seen) { /* nothing is live any more */
        for (auto &range : ranges) {
            expect_unknown(range.first, range.second);
        }
    }
}

} // namespace

namespace
{

/* An object loaded after the installation is patched when it is loaded
 * (libucm's GOT engine follows dlopen), including -fno-plt GLOB_DAT slots in
 * RELRO; installing again writes nothing more. */
TEST_F(memtype_cuda, object_loaded_later)
{
    install();
    hooks &h = load_hooks();
    ucm_cuda_hooks_stats_t before, after;

    void *module = dlopen(UCMT_CUDA_USER_LIB, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(nullptr, module) << dlerror();
    auto user_alloc =
        (int (*)(void **, size_t))dlsym(module, "ucmt_fakecuda_user_alloc");
    auto user_free = (int (*)(void *))dlsym(module, "ucmt_fakecuda_user_free");
    ASSERT_NE(nullptr, user_alloc);
    ASSERT_NE(nullptr, user_free);

    /* patched at dlopen: the allocation is reported without a new install */
    void *p = nullptr;
    ASSERT_TRUE(user_alloc(&p, 12345));
    expect_known(p, UCS_MEMORY_TYPE_CUDA);
    ASSERT_TRUE(user_free(p));
    expect_unknown(p, 12345);
    expect_events(1, 1);

    h.stats(&before);
    ASSERT_EQ(UCS_OK, h.install());
    h.stats(&after);
    EXPECT_EQ(before.slots_written, after.slots_written);

    ASSERT_TRUE(user_alloc(&p, 12345));
    expect_known(p, UCS_MEMORY_TYPE_CUDA);
    ASSERT_TRUE(user_free(p));
    expect_unknown(p, 12345);
    expect_events(2, 2);

    dlclose(module);
}

} // namespace

namespace
{

const char *const child_env = "UCMT_MEMTYPE_CUDA_CHILD";

/* UCX_MEM_CUDA_HOOKS=n: loading libucm_cuda installs nothing (checked in a
 * fresh process, where the library was never loaded). */
TEST(memtype_cuda_env, disabled_by_environment)
{
    if (getenv(child_env) != nullptr) {
        GTEST_SKIP() << "this is the child process";
    }

    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        setenv("UCX_MEM_CUDA_HOOKS", "n", 1);
        setenv(child_env, "1", 1);
        execl("/proc/self/exe", "gtest_memtype_cuda",
              "--gtest_filter=memtype_cuda_child.*", (char *)nullptr);
        _exit(127);
    }

    int status;
    ASSERT_EQ(pid, waitpid(pid, &status, 0));
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(0, WEXITSTATUS(status)) << "the child's tests failed";
}

class memtype_cuda_child : public memtype_cuda
{
};

/* Run by memtype_cuda_env.disabled_by_environment in its child. */
TEST_F(memtype_cuda_child, hooks_disabled_by_environment)
{
    if (getenv(child_env) == nullptr) {
        GTEST_SKIP() << "runs only in the child process of "
                        "memtype_cuda_env.disabled_by_environment";
    }
    ASSERT_FALSE(hooks_loaded());

    hooks &h = load_hooks();
    ASSERT_NE(nullptr, h.handle) << dlerror();
    ucm_cuda_hooks_stats_t stats;
    h.stats(&stats);
    EXPECT_EQ(0ul, stats.slots_written) << "the constructor installed hooks";

    void *p = nullptr;
    ASSERT_EQ(cudaSuccess, cudaMalloc(&p, 5000));
    expect_unknown(p, 5000);
    ASSERT_EQ(cudaSuccess, cudaFree(p));
    expect_events(0, 0);

    /* an explicit installation still works */
    install();
    ASSERT_EQ(cudaSuccess, cudaMalloc(&p, 5000));
    expect_known(p, UCS_MEMORY_TYPE_CUDA);
    ASSERT_EQ(cudaSuccess, cudaFree(p));
    expect_events(1, 1);
}

} // namespace
