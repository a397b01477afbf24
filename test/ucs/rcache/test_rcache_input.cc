/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Registration cache: bad input and UCX_RCACHE_* configuration.
 */
#include "rcache_fixture.h"

#include <ucm/api/ucm.h>

#include <stdlib.h>
#include <sys/mman.h>

using namespace rcache_test;

class rcache_input : public rcache_fixture
{
};

TEST_F(rcache_input, bad_get_arguments)
{
    ASSERT_EQ(UCS_OK, create());
    char *buf              = (char *)map(1);
    ucs_rcache_region_t *r = nullptr;

    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucs_rcache_get(nullptr, buf, 1, PROT_READ, nullptr, &r));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucs_rcache_get(m_rcache, nullptr, 1, PROT_READ, nullptr, &r));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucs_rcache_get(m_rcache, buf, 0, PROT_READ, nullptr, &r));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, ucs_rcache_get(m_rcache, buf, ~(size_t)0,
                                                    PROT_READ, nullptr, &r));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucs_rcache_get(m_rcache, buf, 1, 0x100, nullptr, &r));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucs_rcache_get(m_rcache, buf, 1, PROT_READ, nullptr, nullptr));
    EXPECT_EQ(nullptr, r);
    EXPECT_EQ(0u, regs.load());
    munmap(buf, page_size);
}

TEST_F(rcache_input, null_hold_put_invalidate_are_refused)
{
    ASSERT_EQ(UCS_OK, create());
    char *buf      = (char *)map(1);
    test_region *a = get(buf, page_size);
    ASSERT_TRUE(a);

    /* each is one log line and no change to the region */
    ucs_rcache_region_hold(nullptr, &a->super);
    ucs_rcache_region_hold(m_rcache, nullptr);
    ucs_rcache_region_put(nullptr, &a->super);
    ucs_rcache_region_put(m_rcache, nullptr);
    ucs_rcache_region_invalidate(nullptr, &a->super, nullptr, nullptr);
    ucs_rcache_region_invalidate(m_rcache, nullptr, nullptr, nullptr);
    EXPECT_EQ(1u, regs.load());
    EXPECT_EQ(0u, deregs.load());

    /* the region's one reference is still the caller's */
    ucs_rcache_region_invalidate(m_rcache, &a->super, nullptr, nullptr);
    EXPECT_EQ(0u, deregs.load());
    put(a);
    EXPECT_EQ(1u, deregs.load());
    munmap(buf, page_size);
}

TEST_F(rcache_input, prot_the_mapping_lacks)
{
    ASSERT_EQ(UCS_OK, create());
    char *buf              = (char *)map(2, PROT_READ);
    ucs_rcache_region_t *r = nullptr;

    EXPECT_EQ(UCS_ERR_INVALID_ADDR,
              ucs_rcache_get(m_rcache, buf, page_size, PROT_READ | PROT_WRITE,
                             nullptr, &r));
    EXPECT_EQ(nullptr, r);
    munmap(buf, 2 * page_size);

    /* unmapped memory */
    EXPECT_EQ(UCS_ERR_INVALID_ADDR,
              ucs_rcache_get(m_rcache, buf, page_size, PROT_READ, nullptr, &r));
    EXPECT_EQ(0u, regs.load());
}

/* A request the mappings refuse costs the cache nothing: a full cache
 * evicts only for a registration that can happen. */
TEST_F(rcache_input, refused_request_evicts_nothing)
{
    ucs_rcache_params_t params = default_params();
    params.max_regions         = 4;
    ASSERT_EQ(UCS_OK, create(&params));
    char *buf              = (char *)map(12);
    ucs_rcache_region_t *r = nullptr;

    for (int i = 0; i < 4; ++i) { /* every other page: no merging */
        test_region *ok = get(buf + 2 * i * page_size, 64);
        ASSERT_TRUE(ok);
        put(ok);
    }
    ASSERT_EQ(0, munmap(buf + 8 * page_size, 2 * page_size));
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(UCS_ERR_INVALID_ADDR,
                  ucs_rcache_get(m_rcache, buf + 8 * page_size, 64, PROT_READ,
                                 nullptr, &r));
    }
    EXPECT_EQ(0u, stats().evictions);
    EXPECT_EQ(4u, stats().regions);
    EXPECT_EQ(0u, deregs.load());

    /* and a good one evicts the oldest */
    test_region *ok = get(buf + 10 * page_size, 64);
    ASSERT_TRUE(ok);
    put(ok);
    EXPECT_EQ(1u, stats().evictions);
    EXPECT_EQ(4u, stats().regions);
    destroy();
    munmap(buf, 8 * page_size);
    munmap(buf + 10 * page_size, 2 * page_size);
}

/* The remembered mappings answer a request from the entry that covered
 * the previous one first: that shortcut never grants rights a mapping
 * lacks, next to it, across its end, or after it was replaced. */
TEST_F(rcache_input, remembered_mapping_grants_no_more_rights)
{
    ASSERT_EQ(UCS_OK, create());
    char *buf              = (char *)map(4);
    ucs_rcache_region_t *r = nullptr;

    ASSERT_EQ(0, mprotect(buf + 2 * page_size, 2 * page_size, PROT_READ));
    for (int i = 0; i < 2; ++i) { /* the second one from the shortcut */
        test_region *ok = get(buf + i * page_size, 64);
        ASSERT_TRUE(ok);
        put(ok);
    }
    unsigned calls = reg_calls.load();
    EXPECT_EQ(UCS_ERR_INVALID_ADDR,
              ucs_rcache_get(m_rcache, buf + 3 * page_size, 64,
                             PROT_READ | PROT_WRITE, nullptr, &r));
    EXPECT_EQ(UCS_ERR_INVALID_ADDR,
              ucs_rcache_get(m_rcache, buf + page_size, 2 * page_size,
                             PROT_READ | PROT_WRITE, nullptr, &r));
    EXPECT_EQ(nullptr, r);
    EXPECT_EQ(calls, reg_calls.load()) << "registered without the rights";

    /* the writable pages replaced by read-only ones (an unmap event) */
    test_region *keep = get(buf + 3 * page_size, 64, PROT_READ);
    ASSERT_TRUE(keep);
    put(keep);
    ASSERT_EQ(buf, mmap(buf, 2 * page_size, PROT_READ,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0));
    calls = reg_calls.load();
    EXPECT_EQ(UCS_ERR_INVALID_ADDR,
              ucs_rcache_get(m_rcache, buf + page_size, 64,
                             PROT_READ | PROT_WRITE, nullptr, &r));
    EXPECT_EQ(nullptr, r);
    EXPECT_EQ(calls, reg_calls.load()) << "registered without the rights";
    EXPECT_EQ(3u, regs.load());
    munmap(buf, 4 * page_size);
}

TEST_F(rcache_input, bad_create_arguments)
{
    ucs_rcache_params_t params = default_params();
    ucs_rcache_t *rc           = nullptr;

    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucs_rcache_create(nullptr, "x", nullptr, &rc));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucs_rcache_create(&params, "x", nullptr, nullptr));
    params.region_struct_size = 8;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucs_rcache_create(&params, "x", nullptr, &rc));
    params           = default_params();
    params.alignment = 3000;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucs_rcache_create(&params, "x", nullptr, &rc));
    params     = default_params();
    params.ops = nullptr;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucs_rcache_create(&params, "x", nullptr, &rc));
    params            = default_params();
    params.ucm_events = UCM_EVENT_MMAP;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucs_rcache_create(&params, "x", nullptr, &rc));
    EXPECT_EQ(nullptr, rc);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, ucs_rcache_destroy_checked(nullptr));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, ucs_rcache_query_stats(nullptr, nullptr));
}

TEST_F(rcache_input, destroy_with_held_region)
{
    ASSERT_EQ(UCS_OK, create());
    char *buf      = (char *)map(1);
    test_region *a = get(buf, page_size);
    ASSERT_TRUE(a);
    EXPECT_EQ(UCS_ERR_BUSY, ucs_rcache_destroy_checked(m_rcache));
    /* the holder can still release it, then the cache can go */
    EXPECT_EQ(region_magic_alive, a->magic);
    put(a);
    EXPECT_EQ(1u, deregs.load());
    EXPECT_EQ(UCS_OK, ucs_rcache_destroy_checked(m_rcache));
    m_rcache = nullptr;
    munmap(buf, page_size);
}

class rcache_config : public rcache_fixture
{
  protected:
    void TearDown() override
    {
        unsetenv("UCX_RCACHE_MAX_REGIONS");
        unsetenv("UCX_RCACHE_MAX_SIZE");
        unsetenv("UCX_RCACHE_PURGE_ON_FORK");
        unsetenv("UCX_RCACHE_CHECK_PFN");
        unsetenv("UCX_RCACHE_MEM_PRIO");
        rcache_fixture::TearDown();
    }
};

TEST_F(rcache_config, malformed_values_fail_create)
{
    const char *bad[][2] = {
        {"UCX_RCACHE_MAX_REGIONS", "many"},
        {"UCX_RCACHE_MAX_SIZE", "12q"},
        {"UCX_RCACHE_PURGE_ON_FORK", "perhaps"},
        {"UCX_RCACHE_CHECK_PFN", "-1x"},
        {"UCX_RCACHE_MEM_PRIO", "high"},
    };
    for (auto &kv : bad) {
        setenv(kv[0], kv[1], 1);
        ucs_rcache_t *rc = nullptr;
        testing::internal::CaptureStderr();
        ucs_status_t status = create();
        std::string err     = testing::internal::GetCapturedStderr();
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, status) << kv[0];
        EXPECT_NE(std::string::npos, err.find(kv[0])) << err;
        EXPECT_NE(std::string::npos, err.find(kv[1])) << err;
        EXPECT_EQ(nullptr, rc);
        unsetenv(kv[0]);
    }
    EXPECT_EQ(nullptr, m_rcache);
}

TEST_F(rcache_config, max_regions_from_environment)
{
    setenv("UCX_RCACHE_MAX_REGIONS", "2", 1);
    ASSERT_EQ(UCS_OK, create());
    char *buf = (char *)map(8);
    for (int i = 0; i < 4; ++i) {
        put(get(buf + 2 * i * page_size, page_size));
    }
    EXPECT_EQ(2u, stats().regions);
    EXPECT_EQ(2u, stats().evictions);
    munmap(buf, 8 * page_size);
}

TEST_F(rcache_config, check_pfn_reports_stale_region)
{
    RCACHE_NEED_PFN(); /* UCX_RCACHE_CHECK_PFN reads the same frames */
    setenv("UCX_RCACHE_CHECK_PFN", "4", 1);
    ucs_rcache_params_t params = default_params();
    params.ucm_events          = 0; /* blind to unmaps: hits can go stale */
    ASSERT_EQ(UCS_OK, create(&params));
    char *buf = (char *)map(2);
    put(get(buf, 2 * page_size));
    ASSERT_EQ(buf, mmap(buf, 2 * page_size, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0));
    buf[0] = 1;
    ucs_rcache_region_t *r;
    testing::internal::CaptureStderr();
    ASSERT_EQ(UCS_OK,
              ucs_rcache_get(m_rcache, buf, page_size, PROT_READ, nullptr, &r));
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(std::string::npos, err.find("STALE")) << err;
    /* the user part, as ops->dump_region describes it */
    EXPECT_NE(std::string::npos, err.find("test region")) << err;
    EXPECT_EQ(1u, stats().stale_pfn);
    ucs_rcache_region_put(m_rcache, r);
    munmap(buf, 2 * page_size);
}
