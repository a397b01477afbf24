/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Registration cache leases (a thread's second hit in a row on a region
 * takes it off the shared reference count): never used once stale, given
 * back at thread exit, destroy and fork, references handed between threads,
 * and threads beyond the slots.
 */
#include "rcache_fixture.h"

#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

using namespace rcache_test;

namespace
{

/* A worker thread that runs one step at a time when told to. */
class stepper
{
  public:
    template <typename F>
    explicit stepper(F body)
        : m_thread([this, body]() {
              int step;
              while ((step = wait_order()) >= 0) {
                  body(step);
                  m_done.store(step);
              }
          })
    {
    }

    ~stepper()
    {
        m_order.store(-1);
        m_thread.join();
    }

    /* run step (>= 0) in the thread and wait for it; false on timeout */
    bool run(int step)
    {
        m_order.store(step);
        auto deadline =
            std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (m_done.load() != step) {
            if (std::chrono::steady_clock::now() > deadline) {
                return false;
            }
            sched_yield();
        }
        return true;
    }

    /* end the thread now (its exit gives its slot back) */
    void finish()
    {
        m_order.store(-1);
        m_thread.join();
        m_thread = std::thread([]() {});
    }

  private:
    int wait_order()
    {
        int order;
        while ((order = m_order.load()) == m_done.load()) {
            sched_yield();
        }
        return order;
    }

    std::atomic<int> m_order{-2};
    std::atomic<int> m_done{-2};
    std::thread m_thread;
};

} // namespace

class rcache_lease : public rcache_fixture
{
  protected:
    void SetUp() override
    {
        ASSERT_EQ(UCS_OK, create());
    }

    /* get and put twice: the second hit leases the region */
    test_region *lease(void *addr, size_t len)
    {
        test_region *r = get(addr, len);
        if (r != nullptr) {
            put(r);
            put(get(addr, len));
        }
        return r;
    }

    bool deregistered(uintptr_t start)
    {
        std::lock_guard<std::mutex> guard(log_lock);
        for (uintptr_t s : dereg_log) {
            if (s == start) {
                return true;
            }
        }
        return false;
    }
};

/* The owner is idle while another thread replaces the pages: its next get
 * must register the new pages (the frame oracle in get() checks them), and
 * the stale registration is gone after that call. */
TEST_F(rcache_lease, stale_lease_never_used)
{
    char *buf        = (char *)map(4);
    test_region *old = nullptr, *now = nullptr;
    stepper owner([&](int step) {
        if (step == 0) {
            old = lease(buf, 4 * page_size);
            put(get(buf, page_size)); /* a fast hit on the lease */
        } else {
            now = get(buf, 4 * page_size);
            put(now);
        }
    });
    ASSERT_TRUE(owner.run(0));
    ASSERT_TRUE(old);
    EXPECT_EQ(1u, regs.load());
    EXPECT_LE(1u, stats().hits_fast);

    ASSERT_EQ(0, munmap(buf, 4 * page_size));
    ASSERT_EQ(buf, mmap(buf, 4 * page_size, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0));
    memset(buf, 1, 4 * page_size); /* new frames */

    ASSERT_TRUE(owner.run(1));
    ASSERT_TRUE(now);
    EXPECT_EQ(2u, regs.load());
    EXPECT_TRUE(deregistered((uintptr_t)buf));
    EXPECT_EQ(1u, deregs.load());
    munmap(buf, 4 * page_size);
}

/* The owner keeps working on other regions (alternating, so that its lease
 * does not move): the invalidated lease is dropped by its periodic check
 * and the region deregistered within UCS_RCACHE_LEASE_CHECK (16) calls. */
TEST_F(rcache_lease, invalid_lease_dropped_while_owner_works_elsewhere)
{
    /* one mapping: no neighbour mapped next to buf, regions never adjacent
     * (adjacent requests would merge) */
    char *buf   = (char *)map(8);
    char *other = buf + 4 * page_size;
    ASSERT_TRUE(lease(buf, 2 * page_size));
    put(get(other, page_size));
    put(get(other + 2 * page_size, page_size));
    ASSERT_EQ(0, munmap(buf, 2 * page_size));   /* this thread: one hook call */
    EXPECT_FALSE(deregistered((uintptr_t)buf)); /* still leased */
    for (int i = 0; i < 40; ++i) {
        put(get(other + (i % 2) * 2 * page_size, page_size));
    }
    EXPECT_TRUE(deregistered((uintptr_t)buf));
    EXPECT_EQ(3u, regs.load());
    munmap(buf + 2 * page_size, 6 * page_size);
}

/* Same when the owner only misses: the first miss drops the invalidated
 * lease. */
TEST_F(rcache_lease, invalid_lease_dropped_by_next_miss)
{
    char *buf = (char *)map(8);
    ASSERT_TRUE(lease(buf, 2 * page_size));
    ASSERT_EQ(0, munmap(buf, 2 * page_size));
    EXPECT_FALSE(deregistered((uintptr_t)buf)); /* still leased */
    put(get(buf + 4 * page_size, page_size));   /* a miss */
    EXPECT_TRUE(deregistered((uintptr_t)buf));
    EXPECT_EQ(2u, regs.load());
    munmap(buf + 2 * page_size, 6 * page_size);
}

/* A thread that leased a region and exited leaves nothing behind: the
 * unmap deregisters the region at the next call of another thread. */
TEST_F(rcache_lease, thread_exit_gives_lease_back)
{
    char *buf   = (char *)map(2);
    char *other = (char *)map(1);
    stepper owner([&](int) { ASSERT_TRUE(lease(buf, 2 * page_size)); });
    ASSERT_TRUE(owner.run(0));
    owner.finish();

    ASSERT_EQ(0, munmap(buf, 2 * page_size));
    put(get(other, page_size)); /* the next call purges */
    EXPECT_TRUE(deregistered((uintptr_t)buf));
    EXPECT_EQ(1u, deregs.load());
    munmap(other, page_size);
}

/* References taken under a lease and put by another thread: the counts
 * stay exact (one deregistration, after the last reference, and a destroy
 * that finds nothing held). */
TEST_F(rcache_lease, references_handed_to_another_thread)
{
    char *buf            = (char *)map(1);
    test_region *held[3] = {nullptr, nullptr, nullptr};
    stepper owner([&](int step) {
        if (step == 0) {
            for (auto &r : held) {
                r = get(buf, page_size); /* the second and third: leased */
            }
        } else {
            put(get(buf, page_size));
        }
    });
    ASSERT_TRUE(owner.run(0));
    ASSERT_TRUE(held[0] && (held[0] == held[1]) && (held[1] == held[2]));
    for (auto r : held) {
        put(r); /* not the owner: the shared count */
    }
    ASSERT_TRUE(owner.run(1));
    EXPECT_EQ(0u, deregs.load());
    owner.finish();
    EXPECT_EQ(0u, deregs.load()); /* still cached */

    ASSERT_EQ(0, munmap(buf, page_size));
    destroy();
    EXPECT_EQ(1u, deregs.load());
    EXPECT_EQ(1u, regs.load());
}

/* A region in use by its lease owner survives the unmap until the owner's
 * last put, which deregisters it. */
TEST_F(rcache_lease, held_lease_deregistered_at_last_put)
{
    char *buf      = (char *)map(2);
    test_region *r = lease(buf, 2 * page_size);
    test_region *h = get(buf, page_size);
    ASSERT_TRUE(r && (r == h));
    ASSERT_EQ(0, munmap(buf, 2 * page_size));
    EXPECT_EQ(region_magic_alive, h->magic);
    EXPECT_EQ(0u, deregs.load());
    put(h);
    EXPECT_EQ(1u, deregs.load());
}

/* Destroy while the owner thread still lives with its lease. */
TEST_F(rcache_lease, destroy_with_live_owner)
{
    char *buf = (char *)map(1);
    stepper owner([&](int) { ASSERT_TRUE(lease(buf, page_size)); });
    ASSERT_TRUE(owner.run(0));
    EXPECT_EQ(UCS_OK, ucs_rcache_destroy_checked(m_rcache));
    m_rcache = nullptr;
    EXPECT_EQ(1u, deregs.load());
    owner.finish();
    munmap(buf, page_size);
}

/* More threads at once than there are slots: the ones without a slot work
 * on the shared count; every hit is checked by the frame oracle. */
TEST_F(rcache_lease, more_threads_than_slots)
{
    const int nthreads = 80, iters = 50;
    char *area = (char *)map(2 * nthreads);
    std::atomic<int> ready{0}, go{0};
    std::vector<std::thread> threads;

    for (int t = 0; t < nthreads; ++t) {
        threads.emplace_back([&, t]() {
            char *buf = area + 2 * t * page_size;
            ++ready;
            while (!go.load()) {
                sched_yield();
            }
            for (int i = 0; i < iters; ++i) {
                test_region *r = get(buf, page_size);
                if (r != nullptr) {
                    put(r);
                }
            }
        });
    }
    while (ready.load() != nthreads) {
        sched_yield();
    }
    go.store(1);
    for (auto &t : threads) {
        t.join();
    }
    ucs_rcache_stats_t s = stats();
    EXPECT_EQ((uint64_t)nthreads * iters, s.gets);
    EXPECT_EQ((unsigned)nthreads, regs.load());
    ASSERT_EQ(0, munmap(area, 2 * nthreads * page_size));
    char *other = (char *)map(1);
    put(get(other, page_size)); /* purges */
    EXPECT_EQ((unsigned)nthreads, deregs.load());
    munmap(other, page_size);
}

/* A forked child of a thread holding a lease: the child's cache does not
 * answer with the parent's registration. */
TEST_F(rcache_lease, fork_child_ignores_parent_lease)
{
    RCACHE_NEED_PFN();
    char *buf = (char *)map(1);
    ASSERT_TRUE(lease(buf, page_size));
    pid_t pid = fork();
    ASSERT_NE(-1, pid);
    if (pid == 0) {
        buf[0]     = 1; /* the child's own copy of the page */
        unsigned r = regs;
        ucs_rcache_region_t *region;
        int rc = 0;
        if (ucs_rcache_get(m_rcache, buf, page_size, PROT_READ | PROT_WRITE,
                           nullptr, &region) != UCS_OK) {
            rc = 1;
        } else if (regs != r + 1) {
            rc = 2; /* the parent's lease answered */
        } else if (check_region(reinterpret_cast<test_region *>(region),
                                (uintptr_t)buf, page_size) != "") {
            rc = 3;
        } else {
            ucs_rcache_region_put(m_rcache, region);
            rc = (ucs_rcache_destroy_checked(m_rcache) == UCS_OK) ? 0 : 4;
        }
        _exit(rc);
    }
    int status = 0;
    ASSERT_EQ(pid, waitpid(pid, &status, 0));
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(0, WEXITSTATUS(status));
    put(get(buf, page_size)); /* the parent's lease is still good */
    EXPECT_EQ(1u, regs.load());
}
