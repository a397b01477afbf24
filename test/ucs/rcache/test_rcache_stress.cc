/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Multi-threaded churn with the page-frame oracle: threads allocate, free,
 * reallocate, remap and replace memory while getting and putting regions on
 * it; every region returned must match the current page frames.
 */
#include "rcache_fixture.h"

#include <chrono>
#include <fcntl.h>
#include <random>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <thread>
#include <unistd.h>

using namespace rcache_test;

namespace
{

enum buf_kind { BUF_NONE, BUF_MALLOC, BUF_MMAP };

struct slot {
    buf_kind kind     = BUF_NONE;
    char *ptr         = nullptr;
    size_t len        = 0;
    test_region *held = nullptr; /* a region kept across operations */
};

struct worker_result {
    unsigned long ops   = 0;
    unsigned long gets  = 0;
    unsigned long stale = 0;
    std::string first_stale;
};

} // namespace

class rcache_stress : public rcache_fixture
{
  public:
    std::atomic<bool> m_stop{false};

    ucs_rcache_stats_t churn(unsigned long max_regions,
                             unsigned long total_ops);

    /* a cache with the test's own ops (context: their state); max_regions
     * 0: the default */
    ucs_status_t create_with_ops(const ucs_rcache_ops_t *ops, void *context,
                                 unsigned long max_regions = 0)
    {
        ucs_rcache_params_t params = default_params();
        params.ops                 = ops;
        params.context             = context;
        if (max_regions != 0) {
            params.max_regions = max_regions;
        }
        return create(&params);
    }

    void release(slot &s)
    {
        if (s.held != nullptr) {
            put(s.held);
            s.held = nullptr;
        }
        if (s.kind == BUF_MALLOC) {
            free(s.ptr);
        } else if (s.kind == BUF_MMAP) {
            munmap(s.ptr, s.len);
        }
        s.kind = BUF_NONE;
    }

    void check_get(slot &s, size_t off, size_t len, int fd, worker_result &res,
                   std::mt19937 &rng)
    {
        ucs_rcache_region_t *r;
        ucs_status_t status = ucs_rcache_get(
            m_rcache, s.ptr + off, len, PROT_READ | PROT_WRITE, nullptr, &r);
        ++res.gets;
        if (status != UCS_OK) {
            ++res.stale;
            if (res.first_stale.empty()) {
                res.first_stale = ucs_status_string(status);
            }
            return;
        }
        test_region *tr = reinterpret_cast<test_region *>(r);
        std::string err = check_region(tr, (uintptr_t)s.ptr + off, len, fd);
        if (!err.empty()) {
            ++res.stale;
            if (res.first_stale.empty()) {
                res.first_stale = err;
            }
        }
        if ((s.held == nullptr) && ((rng() % 4) == 0)) {
            s.held = tr; /* keep it while the memory churns */
        } else {
            put(tr);
        }
    }

    void worker(unsigned seed, unsigned long max_ops, worker_result &res)
    {
        std::mt19937 rng(seed);
        slot slots[12];
        int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);

        ASSERT_GE(fd, 0);
        while ((res.ops < max_ops) && !m_stop) {
            slot &s     = slots[rng() % 12];
            unsigned op = rng() % 100;
            ++res.ops;

            if (s.kind == BUF_NONE) {
                /* AddressSanitizer's allocator maps and unmaps with raw
                 * system calls that no hook sees: use mmap there only */
                if ((op < 60) && !TEST_RCACHE_SANITIZED) {
                    s.len  = 1 + rng() % ((op < 50) ? 16384 : 300000);
                    s.ptr  = (char *)malloc(s.len);
                    s.kind = BUF_MALLOC;
                } else {
                    s.len = (1 + rng() % 16) * page_size;
                    s.ptr = (char *)mmap(nullptr, s.len, PROT_READ | PROT_WRITE,
                                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                    s.kind = BUF_MMAP;
                }
                s.ptr[0] = s.ptr[s.len - 1] = 0x5a;
                continue;
            }

            if (op < 4) {
                release(s);
            } else if (op < 7) {
                if (s.kind == BUF_MALLOC) {
                    if (s.held != nullptr) {
                        put(s.held);
                        s.held = nullptr;
                    }
                    size_t len = 1 + rng() % 300000;
                    char *p    = (char *)realloc(s.ptr, len);
                    if (p != nullptr) {
                        s.ptr            = p;
                        s.len            = len;
                        s.ptr[s.len - 1] = 0x3c;
                    }
                } else {
                    size_t len = (1 + rng() % 16) * page_size;
                    char *p = (char *)mremap(s.ptr, s.len, len, MREMAP_MAYMOVE);
                    if (p != MAP_FAILED) {
                        s.ptr            = p;
                        s.len            = len;
                        s.ptr[s.len - 1] = 0x3c;
                    }
                }
            } else if (op < 10) {
                if (s.kind == BUF_MMAP) {
                    /* new pages at the same address */
                    size_t pg = rng() % (s.len / page_size);
                    mmap(s.ptr + pg * page_size, page_size,
                         PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
                    s.ptr[pg * page_size] = 1;
                } else {
                    s.ptr[rng() % s.len] = 0x11;
                }
            } else {
                size_t off = rng() % s.len;
                size_t len = 1 + rng() % (s.len - off);
                check_get(s, off, len, fd, res, rng);
            }
        }
        for (auto &s : slots) {
            release(s);
        }
        close(fd);
    }
};

/* threads churning with the page-frame oracle on a cache of at most
 * max_regions regions, total_ops operations (RCACHE_STRESS_OPS overrides)
 * within ~20 s; returns the cache's stats at the end */
ucs_rcache_stats_t rcache_stress::churn(unsigned long max_regions,
                                        unsigned long total_ops)
{
    ucs_rcache_params_t params = default_params();
    params.max_regions         = max_regions;
    ucs_status_t status        = create(&params);
    if (status != UCS_OK) {
        ADD_FAILURE() << "create: " << ucs_status_string(status);
        return {};
    }

    const unsigned nthreads = 3;
    if (getenv("RCACHE_STRESS_OPS") != nullptr) {
        total_ops = strtoul(getenv("RCACHE_STRESS_OPS"), nullptr, 0);
    }
    std::vector<worker_result> results(nthreads);
    std::vector<std::thread> threads;
    auto t0 = std::chrono::steady_clock::now();

    for (unsigned i = 0; i < nthreads; ++i) {
        threads.emplace_back(&rcache_stress::worker, this, 1234 + i,
                             total_ops / nthreads, std::ref(results[i]));
    }
    /* keep the test under ~20 s on a loaded machine */
    while (true) {
        bool done = true;
        for (auto &r : results) {
            done = done && (r.ops >= total_ops / nthreads);
        }
        auto sec =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                .count();
        if (done || (sec > 18)) {
            break;
        }
        usleep(20000);
    }
    m_stop = true;
    for (auto &t : threads) {
        t.join();
    }

    unsigned long ops = 0, gets = 0, stale = 0;
    for (auto &r : results) {
        ops += r.ops;
        gets += r.gets;
        stale += r.stale;
        EXPECT_EQ(0u, r.stale) << r.first_stale;
    }
    ucs_rcache_stats_t s = stats();
    double sec =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    printf("[ stress   ] %lu ops (%lu gets) in %.1f s by %u threads: "
           "%lu stale; misses %lu, hits %lu, merges %lu, unmap "
           "invalidations %lu, evictions %lu\n",
           ops, gets, sec, nthreads, stale, (unsigned long)s.misses,
           (unsigned long)(s.hits_fast + s.hits_slow), (unsigned long)s.merges,
           (unsigned long)s.unmap_invalidations, (unsigned long)s.evictions);
    EXPECT_EQ(0u, stale);
    /* stopped by the clock: enough work must have been done to mean
     * something (a tenth of the plan; a full run does all of it) */
    EXPECT_GE(ops, total_ops / 10)
        << "the churn did too little in " << sec << " s to prove anything";
    EXPECT_GT(gets, 0u);
    return s;
}

TEST_F(rcache_stress, churn_never_returns_stale_region)
{
    RCACHE_NEED_PFN();
    churn(1000, on_valgrind()           ? 30000
                : TEST_RCACHE_SANITIZED ? 400000
                                        : 1200000);
}

/* the same with a small cache: most misses evict (the LRU's oldest, out
 * of the range index while other threads look it up lock-free) */
TEST_F(rcache_stress, churn_with_evictions_never_returns_stale_region)
{
    RCACHE_NEED_PFN();
    ucs_rcache_stats_t s = churn(6, on_valgrind()           ? 10000
                                    : TEST_RCACHE_SANITIZED ? 60000
                                                            : 200000);
    EXPECT_GT(s.evictions, 0u);
}

namespace
{

/* ops of the serialization test: mem_reg counts the times another thread
 * was inside mem_reg meanwhile (mem_dereg may run outside the registration
 * path: a put of the last reference to an evicted region) */
struct serial_ops_state {
    std::atomic<int> inside{0};
    std::atomic<unsigned> overlaps{0};
    std::atomic<unsigned> regs{0};
    std::atomic<unsigned> deregs{0};
};

ucs_status_t serial_mem_reg(void *context, ucs_rcache_t *, void *,
                            ucs_rcache_region_t *, uint16_t)
{
    serial_ops_state *st = static_cast<serial_ops_state *>(context);
    if (st->inside.fetch_add(1) != 0) {
        st->overlaps++;
    }
    for (int i = 0; i < 3; ++i) {
        sched_yield(); /* let the other threads pile up on the registration path
                        */
    }
    st->inside--;
    st->regs++;
    return UCS_OK;
}

void serial_mem_dereg(void *context, ucs_rcache_t *, ucs_rcache_region_t *)
{
    static_cast<serial_ops_state *>(context)->deregs++;
}

} // namespace

/* Misses of several threads at once, with evictions: the registration path
 * lets one thread at a time into mem_reg (the others sleep on its lock and
 * are all woken in turn), and every miss completes. */
TEST_F(rcache_stress, registration_path_serialized)
{
    static const ucs_rcache_ops_t ops = {serial_mem_reg, serial_mem_dereg,
                                         nullptr};
    serial_ops_state st;
    /* 64: misses evict, deregistering under it too */
    ASSERT_EQ(UCS_OK, create_with_ops(&ops, &st, 64));

    const unsigned nthreads = 4, npages = 512; /* every second page used */
    const unsigned rounds = on_valgrind() ? 1 : 4;
    char *buf             = (char *)map(npages);
    std::atomic<unsigned> failures{0};
    std::vector<std::thread> threads;

    for (unsigned t = 0; t < nthreads; ++t) {
        threads.emplace_back([&, t]() {
            for (unsigned r = 0; r < rounds; ++r) {
                for (unsigned p = 2 * t; p < npages; p += 2 * nthreads) {
                    ucs_rcache_region_t *region;
                    if (ucs_rcache_get(m_rcache, buf + p * page_size, 64,
                                       PROT_READ | PROT_WRITE, nullptr,
                                       &region) != UCS_OK) {
                        failures++;
                        continue;
                    }
                    ucs_rcache_region_put(m_rcache, region);
                }
            }
        });
    }
    for (auto &th : threads) {
        th.join();
    }
    EXPECT_EQ(0u, failures.load());
    EXPECT_EQ(0u, st.overlaps.load()) << "mem_reg ran concurrently";
    /* regions two pages apart never merge: every page used registers at
     * least once (more when the threads interleave: 64 of 256 cached) */
    EXPECT_GE(st.regs.load(), npages / 2);
    destroy();
    EXPECT_EQ(st.regs.load(), st.deregs.load());
    munmap(buf, npages * page_size);
}

namespace
{

/* ops of the waiter test: the first mem_reg waits until released */
struct gate_ops_state {
    std::atomic<int> open{0};
    std::atomic<int> entered{0};
    std::atomic<unsigned> calls{0}; /* mem_reg entered */
    std::atomic<unsigned> regs{0};
};

ucs_status_t gate_mem_reg(void *context, ucs_rcache_t *, void *,
                          ucs_rcache_region_t *, uint16_t)
{
    gate_ops_state *st = static_cast<gate_ops_state *>(context);
    st->calls++;
    st->entered = 1;
    while (!st->open.load()) {
        sched_yield();
    }
    st->regs++;
    return UCS_OK;
}

void gate_mem_dereg(void *, ucs_rcache_t *, ucs_rcache_region_t *)
{
}

} // namespace

/* A miss of a range another thread is registering waits for that
 * registration (asleep, the registration path owned by the other thread)
 * and then finds its region: one registration for both, and a miss of
 * another range made meanwhile completes once the path is given back. */
TEST_F(rcache_stress, miss_waits_for_registration_of_same_range)
{
    static const ucs_rcache_ops_t ops = {gate_mem_reg, gate_mem_dereg, nullptr};
    gate_ops_state st;
    ASSERT_EQ(UCS_OK, create_with_ops(&ops, &st));

    char *buf                  = (char *)map(4);
    ucs_rcache_region_t *first = nullptr, *second = nullptr, *other = nullptr;
    ucs_status_t s1 = UCS_ERR_NO_MESSAGE, s2 = UCS_ERR_NO_MESSAGE,
                 s3 = UCS_ERR_NO_MESSAGE;

    std::thread t1([&]() {
        s1 = ucs_rcache_get(m_rcache, buf, 64, PROT_READ | PROT_WRITE, nullptr,
                            &first);
    });
    while (!st.entered.load()) {
        sched_yield();
    }
    std::thread t2([&]() {
        s2 = ucs_rcache_get(m_rcache, buf + 8, 64, PROT_READ | PROT_WRITE,
                            nullptr, &second);
    });
    std::thread t3([&]() {
        s3 = ucs_rcache_get(m_rcache, buf + 2 * page_size, 64,
                            PROT_READ | PROT_WRITE, nullptr, &other);
    });
    /* both must fall asleep on the path (the stats count each wait), and
     * no second mem_reg may start while the first one holds it */
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while ((stats().reg_waits < 2) &&
           (std::chrono::steady_clock::now() < deadline)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_EQ(2u, stats().reg_waits) << "the misses did not wait for the path";
    EXPECT_EQ(1u, st.calls.load()) << "mem_reg ran twice at once";
    st.open = 1;
    t1.join();
    t2.join();
    t3.join();

    ASSERT_EQ(UCS_OK, s1);
    ASSERT_EQ(UCS_OK, s2);
    ASSERT_EQ(UCS_OK, s3);
    EXPECT_EQ(first, second) << "the waiter registered the range again";
    EXPECT_NE(first, other);
    EXPECT_EQ(2u, st.regs.load());
    ucs_rcache_region_put(m_rcache, first);
    ucs_rcache_region_put(m_rcache, second);
    ucs_rcache_region_put(m_rcache, other);
    destroy();
    munmap(buf, 4 * page_size);
}
