/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Page-cache truncation under a registration: a region on a shared memfd
 * mapping must not survive ftruncate (shrink, then regrow) or a hole punch,
 * because the virtual range then maps new pages.  Oracle: the fixture's
 * get() compares the frames recorded at registration with the current ones
 * (/proc/self/pagemap), so a stale hit fails it.  Also: a registration made
 * between the VM_UNMAPPED event and the truncation itself (by a later
 * handler) is invalidated again after the call.
 */
#include "rcache_fixture.h"

#include <ucm/api/ucm.h>
#include <ucs/memory/rcache_ext.h>

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <functional>

using namespace rcache_test;

class rcache_trunc : public rcache_fixture
{
  protected:
    static rcache_trunc *self;
    int m_fd           = -1;
    char *m_mem        = nullptr;
    size_t m_len       = 8 * page_size;
    uintptr_t m_arm    = 0; /* re-register [m_mem, +m_len) on this event */
    unsigned m_rearmed = 0;

    /* runs after the cache's own VM_UNMAPPED handler (priority 1000) */
    static void late_unmapped(ucm_event_type_t, ucm_event_t *event, void *)
    {
        rcache_trunc *t = self;
        ucs_rcache_region_t *r;

        if ((t->m_arm == 0) ||
            ((uintptr_t)event->vm_unmapped.address != t->m_arm)) {
            return;
        }
        t->m_arm = 0;
        if (ucs_rcache_get(t->m_rcache, t->m_mem, t->m_len, PROT_READ, nullptr,
                           &r) == UCS_OK) {
            ucs_rcache_region_put(t->m_rcache, r);
            ++t->m_rearmed;
        }
    }

    void SetUp() override
    {
        self = this;
        m_fd = memfd_create("rcache-trunc", MFD_CLOEXEC);
        if (m_fd < 0) {
            GTEST_SKIP() << "memfd_create failed: " << strerror(errno);
        }
        ASSERT_EQ(0, ftruncate(m_fd, (off_t)m_len));
        m_mem = (char *)mmap(nullptr, m_len, PROT_READ | PROT_WRITE, MAP_SHARED,
                             m_fd, 0);
        ASSERT_NE(MAP_FAILED, (void *)m_mem);
        memset(m_mem, 1, m_len);
        ASSERT_EQ(UCS_OK, create());
        ASSERT_EQ(UCS_OK, ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 2000,
                                                late_unmapped, nullptr));
    }

    void TearDown() override
    {
        ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED, late_unmapped, nullptr);
        rcache_fixture::TearDown();
        if ((m_mem != nullptr) && (m_mem != MAP_FAILED)) {
            munmap(m_mem, m_len);
        }
        if (m_fd >= 0) {
            close(m_fd);
        }
    }

    /* register, run op (which gives part of the range new pages), fill the
     * range again: the next get must see the new frames */
    void check_invalidated(const std::function<int()> &op)
    {
        put(get(m_mem, m_len));
        uint64_t inval = stats().unmap_invalidations;
        ASSERT_EQ(0, op()) << strerror(errno);
        memset(m_mem, 2, m_len);
        EXPECT_GT(stats().unmap_invalidations, inval);
        test_region *r = get(m_mem, m_len); /* fails on stale frames */
        ASSERT_NE(nullptr, r);
        put(r);
    }
};

rcache_trunc *rcache_trunc::self;

TEST_F(rcache_trunc, shrink_regrow)
{
    check_invalidated([this]() {
        return ftruncate(m_fd, (off_t)(2 * page_size + 1)) ||
               ftruncate(m_fd, (off_t)m_len);
    });
}

TEST_F(rcache_trunc, punch_hole)
{
    check_invalidated([this]() {
        return fallocate(m_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                         (off_t)page_size, (off_t)(3 * page_size));
    });
}

/* Registered again inside the ftruncate (after the event, before the pages
 * go): the second invalidation after the call must drop it. */
TEST_F(rcache_trunc, register_during_truncate)
{
    put(get(m_mem, m_len));
    m_arm = (uintptr_t)m_mem + 4 * page_size;
    ASSERT_EQ(0, ftruncate(m_fd, (off_t)(4 * page_size)));
    EXPECT_EQ(1u, m_rearmed) << "not registered again during ftruncate";
    EXPECT_EQ(0u, stats().regions) << "a registration outlived ftruncate";
    ASSERT_EQ(0, ftruncate(m_fd, (off_t)m_len));
    memset(m_mem, 3, m_len);
    put(get(m_mem, m_len));
}
