/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * System V shared memory: shmdt must report exactly the attached segment
 * (size rounded up to pages), however libucm learns it: from its own table,
 * after IPC_RMID, for a segment attached behind its back (raw syscall), for
 * the same segment attached twice; shmat(SHM_REMAP) must report what it
 * replaces.
 */
#include "common/ucm_test.h"
#include "rawsys.h"

#include <errno.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SHM_REMAP
#define SHM_REMAP 040000
#endif

namespace
{

using namespace ucmt;

class Shm : public ucmt::test
{
  protected:
    void TearDown() override
    {
        for (size_t i = 0; i < m_ids.size(); ++i) {
            shmctl(m_ids[i], IPC_RMID, NULL);
        }
        ucmt::test::TearDown();
    }

    /* a new segment, removed at the end of the test */
    int create(size_t size)
    {
        int id = shmget(IPC_PRIVATE, size, IPC_CREAT | 0600);
        if (id >= 0) {
            m_ids.push_back(id);
        }
        return id;
    }

    /* shmdt(addr) must deliver one VM_UNMAPPED for exactly [addr, addr+len)
     * and cover every page */
    void detach_and_check(void *addr, size_t len)
    {
        size_t pages = len / page_size();

        touch(addr, len);
        ASSERT_EQ(pages, oracle::watch(addr, len));
        oracle::arm();
        ASSERT_EQ(0, shmdt(addr));
        oracle_stats s = oracle::check();
        record(s);
        EXPECT_EQ(pages, s.changed);
        UCMT_EXPECT_COVERED(s);
        EXPECT_FALSE(readable(addr));
        std::vector<event_record> ev =
            oracle::events(UCM_EVENT_VM_UNMAPPED, addr, len, tid());
        ASSERT_EQ(1u, ev.size()) << "expected exactly one VM_UNMAPPED";
        EXPECT_EQ((uintptr_t)addr, ev[0].addr);
        EXPECT_EQ(len, ev[0].len) << "shmdt must report the exact segment size";
    }

    std::vector<int> m_ids;
};

TEST_F(Shm, DetachReportsExactSize)
{
    const size_t ps      = page_size();
    const size_t sizes[] = {ps, 10000, 5 * ps + 1, 64 * ps};
    size_t i;

    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
        SCOPED_TRACE(testing::Message() << "segment size " << sizes[i]);
        oracle::reset();
        int id = create(sizes[i]);
        ASSERT_GE(id, 0) << strerror(errno);
        void *p = shmat(id, NULL, 0);
        ASSERT_NE((void *)-1, p);
        detach_and_check(p, align_up(sizes[i], ps));
    }
}

TEST_F(Shm, DetachAfterRmidReportsExactSize)
{
    const size_t ps = page_size(), size = 3 * ps + 100;
    int id = create(size);

    ASSERT_GE(id, 0) << strerror(errno);
    void *p = shmat(id, NULL, 0);
    ASSERT_NE((void *)-1, p);
    ASSERT_EQ(0, shmctl(id, IPC_RMID, NULL));
    detach_and_check(p, align_up(size, ps));
}

/* Attached with the raw system call (an inline syscall instruction:
 * syscall() is hooked): libucm's table does not know it, as
 * for a segment attached before libucm was loaded. */
TEST_F(Shm, AttachedBehindLibucmReportsExactSize)
{
    const size_t ps = page_size(), size = 7 * ps + 5;
    int id = create(size);

    ASSERT_GE(id, 0) << strerror(errno);
    void *p = (void *)ucmt_rawsys(SYS_shmat, id, NULL, 0);
    ASSERT_NE((void *)-1, p);
    detach_and_check(p, align_up(size, ps));
}

TEST_F(Shm, AttachedBehindLibucmAfterRmidReportsExactSize)
{
    const size_t ps = page_size(), size = 2 * ps + 1;
    int id = create(size);

    ASSERT_GE(id, 0) << strerror(errno);
    void *p = (void *)ucmt_rawsys(SYS_shmat, id, NULL, 0);
    ASSERT_NE((void *)-1, p);
    ASSERT_EQ(0, shmctl(id, IPC_RMID, NULL));
    detach_and_check(p, align_up(size, ps));
}

/* Attached behind libucm's back next to another attachment of the same
 * segment: the /proc/self/maps extent would span both. */
TEST_F(Shm, AttachedBehindLibucmNextToItselfReportsExactSize)
{
    const size_t ps = page_size(), size = 2 * ps;
    int id  = create(size);
    char *r = (char *)free_range(2 * size);

    ASSERT_GE(id, 0) << strerror(errno);
    ASSERT_TRUE(r != NULL);
    void *a = (void *)ucmt_rawsys(SYS_shmat, id, r, 0);
    void *b = (void *)ucmt_rawsys(SYS_shmat, id, r + size, 0);
    ASSERT_EQ((void *)r, a);
    ASSERT_EQ((void *)(r + size), b);
    ASSERT_EQ(0, shmctl(id, IPC_RMID, NULL));
    detach_and_check(a, size);
    shmdt(b);
}

/* Attached behind libucm's back, then its first page unmapped: shmdt(addr)
 * still detaches the rest of the segment (the kernel finds the fragments by
 * their offset from addr).  Oracle: the detached pages must be reported.
 * (Regression: src/ucm/mmap/ucm_shm.c, ucm_shm_seg_size() once looked only
 * for a mapping starting exactly at addr and reported nothing.) */
TEST_F(Shm, AttachedBehindLibucmFirstPageUnmapped)
{
    const size_t ps = page_size(), size = 4 * ps;
    int id = create(size);

    ASSERT_GE(id, 0) << strerror(errno);
    char *p = (char *)ucmt_rawsys(SYS_shmat, id, NULL, 0);
    ASSERT_NE((void *)-1, (void *)p);
    touch(p, size);
    ASSERT_EQ(0, ucmt_rawsys(SYS_munmap, p, ps)); /* behind libucm's back too */
    ASSERT_EQ(3u, oracle::watch(p + ps, size - ps));
    oracle::arm();
    ASSERT_EQ(0, shmdt(p));
    oracle_stats s = oracle::check();
    record(s);
    EXPECT_FALSE(readable(p + ps)) << "the kernel detached the rest";
    EXPECT_EQ(3u, s.changed);
    EXPECT_EQ(0u, s.uncovered)
        << "shmdt() detached fragments of a segment whose first page "
           "was gone without reporting them: "
        << s.str();
}

TEST_F(Shm, RemapOverMappingReportsReplacedRange)
{
    const size_t ps      = page_size();
    const size_t sizes[] = {6 * ps, 2 * ps};
    size_t i;

    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
        SCOPED_TRACE(testing::Message() << "segment size " << sizes[i]);
        int id  = create(sizes[i]);
        char *m = (char *)map_anon(6 * ps);
        ASSERT_GE(id, 0) << strerror(errno);
        ASSERT_TRUE(m != NULL);
        ASSERT_EQ(6u, oracle::watch(m, 6 * ps));
        oracle::arm();
        void *q        = shmat(id, m, SHM_REMAP);
        oracle_stats s = oracle::check();
        record(s);
        ASSERT_EQ((void *)m, q);
        EXPECT_EQ(sizes[i] / ps, s.changed);
        UCMT_EXPECT_COVERED(s);
        EXPECT_EQ(0, shmdt(q));
        munmap(m, 6 * ps);
        oracle::reset();
    }
}

TEST_F(Shm, SameSegmentTwiceTwoExactEvents)
{
    const size_t ps = page_size(), size = 3 * ps + 100;
    const size_t len = align_up(size, ps);
    int id           = create(size);

    ASSERT_GE(id, 0) << strerror(errno);
    char *a = (char *)shmat(id, NULL, 0);
    char *b = (char *)shmat(id, NULL, 0);
    ASSERT_NE((void *)-1, (void *)a);
    ASSERT_NE((void *)-1, (void *)b);
    ASSERT_NE(a, b);
    touch(a, len);
    touch(b, len);
    ASSERT_EQ(len / ps, oracle::watch(b, len));
    /* first detach: exactly a, and nothing of b */
    detach_and_check(a, len);
    EXPECT_EQ(0u, oracle::events(UCM_EVENT_VM_UNMAPPED, b, len).size())
        << "detaching one attachment reported the other one";
    EXPECT_TRUE(readable(b));
    oracle::reset();
    detach_and_check(b, len);
}

/* In a fresh process: attach through libc before any handler exists (no
 * hooks installed yet, so libucm's table misses it), then add a handler
 * and detach: the event must still be exact. */
size_t fresh_seen_len;
uintptr_t fresh_seen_addr;

void fresh_cb(ucm_event_type_t, ucm_event_t *event, void *)
{
    fresh_seen_addr = (uintptr_t)event->vm_unmapped.address;
    fresh_seen_len  = event->vm_unmapped.size;
}

UCMT_CHILD_SCENARIO(shm_attached_before_hooks)
{
    const size_t ps = page_size(), size = 5 * ps + 7;
    int id = shmget(IPC_PRIVATE, size, IPC_CREAT | 0600);

    if (id < 0) {
        printf("shmget: %s\n", strerror(errno));
        return 3;
    }
    void *p = shmat(id, NULL, 0);
    shmctl(id, IPC_RMID, NULL);
    if (p == (void *)-1) {
        return 3;
    }
    if (ucm_hooks_installed_mode() != UCM_MMAP_HOOK_NONE) {
        printf("hooks already installed: the scenario is not fresh\n");
        return 4;
    }
    if (ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 0, fresh_cb, NULL) !=
        UCS_OK) {
        return 5;
    }
    fresh_seen_len = 0;
    shmdt(p);
    printf("addr %p/%p len %zu/%zu\n", (void *)fresh_seen_addr, p,
           fresh_seen_len, align_up(size, ps));
    return ((fresh_seen_addr == (uintptr_t)p) &&
            (fresh_seen_len == align_up(size, ps)))
               ? 0
               : 1;
}

TEST(ShmFresh, AttachedBeforeHooksReportsExactSize)
{
    std::string reason;

    if (!hooks_available(&reason)) {
        GTEST_SKIP() << reason;
    }
    child_result r = run_self("shm_attached_before_hooks", {});
    EXPECT_TRUE(r.exited_ok()) << r.str();
}

} // namespace
