/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * End-to-end oracle with the userfaultfd monitor (UCX_MEM_UFFD): the memory
 * at X is replaced by system calls no hook sees, made by inline syscall
 * instructions (test/common/rawsys.h; libucm hooks libc's syscall()):
 * munmap + mmap, mmap with MAP_FIXED, mremap onto X, madvise(MADV_DONTNEED);
 * registering X again through
 * the cache must give a fresh registration: data moved by the NIC lands in
 * / comes from the NEW pages, and the OLD pages (kept alive through a second
 * mapping of the same memfd) are not written.  Without userfaultfd these
 * cases would hit the stale registration (the hooks see nothing).
 */
#include "uct_fixture.h"

#include <ucm/api/ucm_ext.h>

#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/rawsys.h"

using namespace uct_test;

namespace
{

const size_t e2e_size = 64 * 1024;
const int e2e_rw      = PROT_READ | PROT_WRITE;

enum class e2e_remap {
    anon_munmap_mmap, /* raw munmap, raw mmap at X (anonymous) */
    anon_madvise,     /* raw MADV_DONTNEED: new zero pages at X */
    memfd_map_fixed,  /* raw mmap(MAP_FIXED) of another memfd over X */
    memfd_mremap      /* raw mremap of another memfd mapping onto X */
};
enum class e2e_op { put, get };

long raw_mmap(void *addr, size_t len, int flags, int fd)
{
    return ucmt_rawsys(SYS_mmap, addr, len, e2e_rw, flags, fd, 0);
}

int new_memfd()
{
    int fd = memfd_create("uct_e2e_uffd", MFD_CLOEXEC);
    if ((fd >= 0) && (ftruncate(fd, e2e_size) != 0)) {
        close(fd);
        return -1;
    }
    return fd;
}

} // namespace

class uct_e2e_uffd
    : public rc_test,
      public ::testing::WithParamInterface<std::tuple<e2e_op, e2e_remap>>
{
  protected:
    void *m_x    = nullptr;
    int m_old_fd = -1, m_new_fd = -1;
    void *m_spy = nullptr; /* second mapping of the old memfd */
    mapping m_peer{e2e_size};
    uct_ib_mem_t *m_peer_memh = nullptr;

    bool memfd_kind() const
    {
        return std::get<1>(GetParam()) >= e2e_remap::memfd_map_fixed;
    }

    void SetUp() override
    {
        rc_test::SetUp();
        if (IsSkipped() || HasFatalFailure()) {
            return;
        }
        ucm_uffd_info_t info;
        ucm_uffd_query(&info);
        if (!info.active) {
            GTEST_SKIP() << "userfaultfd monitor not active: " << info.reason;
        }
        m_peer_memh = reg(m_peer.ptr, m_peer.len);
        ASSERT_NE(nullptr, m_peer_memh);
    }

    void TearDown() override
    {
        if (m_peer_memh != nullptr) {
            dereg(m_peer_memh);
        }
        if (m_x != nullptr) {
            munmap(m_x, e2e_size);
        }
        if (m_spy != nullptr) {
            munmap(m_spy, e2e_size);
        }
        for (int fd : {m_old_fd, m_new_fd}) {
            if (fd >= 0) {
                close(fd);
            }
        }
        rc_test::TearDown();
    }

    void map_first()
    {
        if (memfd_kind()) {
            m_old_fd = new_memfd();
            ASSERT_GE(m_old_fd, 0);
            m_spy = mmap(nullptr, e2e_size, e2e_rw, MAP_SHARED, m_old_fd, 0);
            ASSERT_NE(MAP_FAILED, m_spy);
            m_x = mmap(nullptr, e2e_size, e2e_rw, MAP_SHARED, m_old_fd, 0);
        } else {
            m_x = mmap(nullptr, e2e_size, e2e_rw, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
        }
        ASSERT_NE(MAP_FAILED, m_x);
        memset(m_x, 0, e2e_size);
    }

    void remap()
    {
        switch (std::get<1>(GetParam())) {
        case e2e_remap::anon_munmap_mmap:
            ASSERT_EQ(0, ucmt_rawsys(SYS_munmap, m_x, e2e_size));
            ASSERT_EQ((long)m_x,
                      raw_mmap(m_x, e2e_size,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1));
            break;
        case e2e_remap::anon_madvise:
            ASSERT_EQ(0,
                      ucmt_rawsys(SYS_madvise, m_x, e2e_size, MADV_DONTNEED));
            break;
        case e2e_remap::memfd_map_fixed:
            m_new_fd = new_memfd();
            ASSERT_GE(m_new_fd, 0);
            ASSERT_EQ((long)m_x, raw_mmap(m_x, e2e_size, MAP_SHARED | MAP_FIXED,
                                          m_new_fd));
            break;
        case e2e_remap::memfd_mremap: {
            m_new_fd = new_memfd();
            ASSERT_GE(m_new_fd, 0);
            void *z = mmap(nullptr, e2e_size, e2e_rw, MAP_SHARED, m_new_fd, 0);
            ASSERT_NE(MAP_FAILED, z);
            ASSERT_EQ((long)m_x,
                      ucmt_rawsys(SYS_mremap, z, e2e_size, e2e_size,
                                  MREMAP_MAYMOVE | MREMAP_FIXED, m_x));
            break;
        }
        }
        memset(m_x, 0, e2e_size); /* new pages get their frames */
    }

    /* register X through the cache, move seed's pattern with X as the
     * target (put: remote, get: local), verify X */
    void transfer(uint32_t seed, bool *ok, std::string *why)
    {
        uct_ib_mem_t *xm = reg(m_x, e2e_size);
        ASSERT_NE(nullptr, xm);
        fill(m_peer.ptr, e2e_size, seed);
        memset(m_x, 0, e2e_size);
        if (std::get<0>(GetParam()) == e2e_op::put) {
            ASSERT_EQ(UCS_OK,
                      put(m_ep[0], m_peer.ptr, e2e_size, m_peer_memh, m_x, xm));
        } else {
            ASSERT_EQ(UCS_OK,
                      get(m_ep[1], m_x, e2e_size, xm, m_peer.ptr, m_peer_memh));
        }
        dereg(xm); /* the cache keeps the region */
        *ok = check(m_x, e2e_size, seed, why);
    }
};

TEST_P(uct_e2e_uffd, raw_syscall_replacement_gets_fresh_registration)
{
    std::string why;
    bool ok = false;
    ucm_uffd_info_t before, after;

    ASSERT_NO_FATAL_FAILURE(map_first());
    ucm_uffd_query(&before);
    ASSERT_NO_FATAL_FAILURE(transfer(1, &ok, &why));
    ASSERT_TRUE(ok) << "first transfer: " << why;
    ucm_uffd_query(&after);
    if (after.unsupported + after.busy > before.unsupported + before.busy) {
        GTEST_SKIP() << "userfaultfd refused this mapping kind here (hooks "
                        "only): nothing to test";
    }

    ASSERT_NO_FATAL_FAILURE(remap());
    ASSERT_NO_FATAL_FAILURE(transfer(2, &ok, &why));
    EXPECT_TRUE(ok) << "the NIC did not use the new pages (stale "
                       "registration): "
                    << why;
    if (m_spy != nullptr) {
        /* the old pages keep the first data: the NIC never wrote them */
        EXPECT_TRUE(check(m_spy, e2e_size, 1, &why))
            << "the old pages were written through a stale registration: "
            << why;
    }
    ucm_uffd_query(&after);
    EXPECT_GT(after.events, before.events);
}

static std::string
e2e_name(const ::testing::TestParamInfo<std::tuple<e2e_op, e2e_remap>> &info)
{
    static const char *ops[]    = {"put", "get"};
    static const char *remaps[] = {"anon_munmap_mmap", "anon_madvise",
                                   "memfd_map_fixed", "memfd_mremap"};
    return std::string(ops[(int)std::get<0>(info.param)]) + "_" +
           remaps[(int)std::get<1>(info.param)];
}

INSTANTIATE_TEST_SUITE_P(
    raw, uct_e2e_uffd,
    ::testing::Combine(::testing::Values(e2e_op::put, e2e_op::get),
                       ::testing::Values(e2e_remap::anon_munmap_mmap,
                                         e2e_remap::anon_madvise,
                                         e2e_remap::memfd_map_fixed,
                                         e2e_remap::memfd_mremap)),
    e2e_name);
