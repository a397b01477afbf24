/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A registration made after the VM_UNMAPPED event but before the pages go
 * away (here: by a later VM_UNMAPPED handler) must not survive shmdt() or
 * brk(): the cache invalidates the range again after the call.  Oracle: no
 * region is left in the cache for the detached/released range.
 */
#include "rcache_fixture.h"

#include <ucm/api/ucm.h>
#include <ucs/memory/rcache_ext.h>

#include <malloc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace rcache_test;

class rcache_aftercall : public rcache_fixture
{
  protected:
    static rcache_aftercall *self;
    uintptr_t arm_addr = 0; /* re-register when this range goes */
    size_t arm_len     = 0;
    unsigned rearmed   = 0;

    /* runs after the cache's own VM_UNMAPPED handler (priority 1000) */
    static void late_unmapped(ucm_event_type_t, ucm_event_t *event, void *)
    {
        rcache_aftercall *t = self;
        if ((t->arm_addr == 0) ||
            ((uintptr_t)event->vm_unmapped.address != t->arm_addr)) {
            return;
        }
        ucs_rcache_region_t *r;
        if (ucs_rcache_get(t->m_rcache, (void *)t->arm_addr, t->arm_len,
                           PROT_READ, nullptr, &r) == UCS_OK) {
            ucs_rcache_region_put(t->m_rcache, r);
            ++t->rearmed;
        }
        t->arm_addr = 0;
    }

    void SetUp() override
    {
        self = this;
        ASSERT_EQ(UCS_OK, ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 2000,
                                                late_unmapped, nullptr));
    }

    void TearDown() override
    {
        ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED, late_unmapped, nullptr);
        rcache_fixture::TearDown();
    }
};

rcache_aftercall *rcache_aftercall::self;

TEST_F(rcache_aftercall, shmdt)
{
    ASSERT_EQ(UCS_OK, create());
    const size_t size = 4 * page_size;
    int shmid         = shmget(IPC_PRIVATE, size, IPC_CREAT | 0600);
    ASSERT_GE(shmid, 0);
    char *a = (char *)shmat(shmid, nullptr, 0);
    shmctl(shmid, IPC_RMID, nullptr);
    ASSERT_NE((void *)-1, a);

    put(get(a, size));
    arm_addr = (uintptr_t)a;
    arm_len  = size;
    ASSERT_EQ(0, shmdt(a));
    EXPECT_EQ(1u, rearmed); /* registered again inside the shmdt */
    EXPECT_EQ(0u, stats().regions) << "a registration outlived shmdt";
}

TEST_F(rcache_aftercall, brk)
{
    ASSERT_EQ(UCS_OK, create());
    /* in a child: the heap top is ours while malloc uses mmap only */
    pid_t pid = fork();
    if (pid == 0) {
        mallopt(M_MMAP_THRESHOLD, 0);
        mallopt(M_TOP_PAD, 0);
        char *cur = (char *)sbrk(0);
        char *top =
            (char *)(((uintptr_t)cur + page_size - 1) & ~(page_size - 1));
        if (brk(top + 4 * page_size) != 0) {
            _exit(1);
        }
        memset(top, 1, 4 * page_size);
        ucs_rcache_region_t *r;
        if (ucs_rcache_get(m_rcache, top, 4 * page_size, PROT_READ, nullptr,
                           &r) != UCS_OK) {
            _exit(2);
        }
        ucs_rcache_region_put(m_rcache, r);
        arm_addr = (uintptr_t)top;
        arm_len  = 4 * page_size;
        if (brk(top) != 0) {
            _exit(3);
        }
        if (rearmed != 1) {
            _exit(4);
        }
        _exit((stats().regions == 0) ? 0 : 5);
    }
    int status = 0;
    ASSERT_EQ(pid, waitpid(pid, &status, 0));
    ASSERT_TRUE(WIFEXITED(status)) << status;
    EXPECT_EQ(0, WEXITSTATUS(status))
        << "4: not re-registered during brk, 5: a registration outlived "
           "brk";
}
