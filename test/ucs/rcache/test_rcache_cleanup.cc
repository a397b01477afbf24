/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Background cleanup thread: past max_unreleased invalidated bytes the
 * deregistrations happen with no further cache call from the application.
 * Observed through the mem_dereg count with a wait-with-timeout loop.
 */
#include "rcache_fixture.h"

#include <ucs/memory/rcache_ext.h>

#include <sys/mman.h>
#include <unistd.h>

using namespace rcache_test;

class rcache_cleanup : public rcache_fixture
{
  protected:
    /* waits up to 20 s for deregs to reach count */
    bool wait_deregs(unsigned count)
    {
        for (int i = 0; (i < 2000) && (deregs.load() < count); ++i) {
            usleep(10000);
        }
        return deregs.load() >= count;
    }

    void register_all(char *buf, unsigned n)
    {
        for (unsigned i = 0; i < n; ++i) {
            put(get(buf + 2 * i * page_size, page_size));
        }
    }
};

TEST_F(rcache_cleanup, thread_deregisters_past_limit)
{
    const unsigned n           = 16;
    ucs_rcache_params_t params = default_params();
    params.max_unreleased      = 4 * page_size;
    ASSERT_EQ(UCS_OK, create(&params));

    char *buf = (char *)map(2 * n);
    register_all(buf, n);
    ASSERT_EQ(n, regs.load());
    ASSERT_EQ(0u, deregs.load());

    munmap(buf, 2 * n * page_size); /* tombstones, wakes the thread */
    EXPECT_TRUE(wait_deregs(n)) << deregs.load() << " of " << n;
    ucs_rcache_stats_t s = stats();
    EXPECT_GE(s.cleanups, 1u);
    EXPECT_EQ(0u, s.unreleased);
    EXPECT_EQ(0u, s.regions);
}

TEST_F(rcache_cleanup, below_limit_waits_for_next_call)
{
    const unsigned n           = 4;
    ucs_rcache_params_t params = default_params();
    params.max_unreleased      = 64 * page_size;
    ASSERT_EQ(UCS_OK, create(&params));

    char *buf = (char *)map(2 * n);
    register_all(buf, n);
    munmap(buf, 2 * n * page_size);
    usleep(200000);
    EXPECT_EQ(0u, deregs.load()); /* nothing woke the thread */
    EXPECT_EQ(n * page_size, stats().unreleased);

    char *other = (char *)map(1);
    put(get(other, page_size)); /* the next operation purges */
    EXPECT_EQ(n, deregs.load());
    EXPECT_EQ(0u, stats().cleanups);
    munmap(other, page_size);
}

/* the limit comes from the environment too; a bad value is one error */
TEST_F(rcache_cleanup, limit_from_environment)
{
    setenv("UCX_RCACHE_MAX_UNRELEASED", "8k", 1);
    ucs_status_t status = create();
    unsetenv("UCX_RCACHE_MAX_UNRELEASED");
    ASSERT_EQ(UCS_OK, status);

    char *buf = (char *)map(8);
    register_all(buf, 4);
    munmap(buf, 8 * page_size);
    EXPECT_TRUE(wait_deregs(4)) << deregs.load();

    destroy();
    setenv("UCX_RCACHE_MAX_UNRELEASED", "lots", 1);
    status = create();
    unsetenv("UCX_RCACHE_MAX_UNRELEASED");
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, status);
}
