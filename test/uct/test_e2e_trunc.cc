/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * End-to-end data oracle for page-cache truncation: a shared mapping X of a
 * memfd is registered through the cache and written by the NIC; then the
 * file is shrunk and grown again (or a hole is punched in it), which gives
 * the same virtual range new pages without any unmap.  Registered again
 * through the cache, the NIC must write the NEW pages: X has to read back
 * the new data.  A stale cached registration would make the NIC write the
 * old pages, which the file no longer has (X would keep zeros).
 * Done with X as the remote target of put_zcopy and as the local target of
 * get_zcopy; a negative control shows that the oracle sees a stale
 * registration.
 */
#include "uct_fixture.h"

#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

using namespace uct_test;

namespace
{

const size_t trunc_buf_size = 64 * 1024;

enum class trunc_kind { shrink_regrow, punch_hole };
enum class trunc_op { put, get };

} // namespace

class uct_e2e_trunc
    : public rc_test,
      public ::testing::WithParamInterface<std::tuple<trunc_op, trunc_kind>>
{
  protected:
    int m_fd  = -1;
    char *m_x = nullptr;
    mapping m_peer{trunc_buf_size};
    uct_ib_mem_t *m_peer_memh = nullptr;

    void SetUp() override
    {
        rc_test::SetUp();
        if (IsSkipped() || HasFatalFailure()) {
            return;
        }
        m_peer_memh = reg(m_peer.ptr, m_peer.len);
        ASSERT_NE(nullptr, m_peer_memh);
        m_fd = memfd_create("uct_e2e_trunc", MFD_CLOEXEC);
        ASSERT_GE(m_fd, 0);
        ASSERT_EQ(0, ftruncate(m_fd, trunc_buf_size));
        m_x = (char *)mmap(nullptr, trunc_buf_size, PROT_READ | PROT_WRITE,
                           MAP_SHARED, m_fd, 0);
        ASSERT_NE(MAP_FAILED, (void *)m_x);
    }

    void TearDown() override
    {
        dereg(m_peer_memh);
        if ((m_x != nullptr) && (m_x != MAP_FAILED)) {
            munmap(m_x, trunc_buf_size);
        }
        if (m_fd >= 0) {
            close(m_fd);
        }
        rc_test::TearDown();
    }

    /* X gets new pages (all after the middle, or a hole in the middle) */
    void truncate_x(trunc_kind kind)
    {
        const size_t half = trunc_buf_size / 2;

        if (kind == trunc_kind::shrink_regrow) {
            ASSERT_EQ(0, ftruncate(m_fd, half + 100));
            ASSERT_EQ(0, ftruncate(m_fd, trunc_buf_size));
        } else {
            ASSERT_EQ(0, fallocate(m_fd,
                                   FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                                   4096, trunc_buf_size - 2 * 4096));
        }
    }

    /* move pattern seed into X through the NIC with registration xm */
    void transfer(trunc_op op, uct_ib_mem_t *xm, uint32_t seed)
    {
        fill(m_peer.ptr, trunc_buf_size, seed);
        memset(m_x, 0, trunc_buf_size); /* also faults the new pages in */
        if (op == trunc_op::put) {
            ASSERT_EQ(UCS_OK, put(m_ep[0], m_peer.ptr, trunc_buf_size,
                                  m_peer_memh, m_x, xm));
        } else {
            ASSERT_EQ(UCS_OK, get(m_ep[1], m_x, trunc_buf_size, xm, m_peer.ptr,
                                  m_peer_memh));
        }
    }

    /* register X through the cache, transfer, check, release */
    void transfer_checked(trunc_op op, uint32_t seed, bool *ok,
                          std::string *why)
    {
        uct_ib_mem_t *xm = reg(m_x, trunc_buf_size);
        ASSERT_NE(nullptr, xm);
        ASSERT_NO_FATAL_FAILURE(transfer(op, xm, seed));
        dereg(xm); /* the cache keeps the region */
        *ok = check(m_x, trunc_buf_size, seed, why);
    }
};

TEST_P(uct_e2e_trunc, new_pages_get_fresh_registration)
{
    const trunc_op op     = std::get<0>(GetParam());
    const trunc_kind kind = std::get<1>(GetParam());
    uct_ib_md_attr_t attr;
    std::string why;
    bool ok = false;

    ASSERT_EQ(UCS_OK, uct_ib_md_query(m_md, &attr));
    ASSERT_EQ(UCT_IB_REG_METHOD_RCACHE, attr.reg_method);
    ASSERT_NO_FATAL_FAILURE(transfer_checked(op, 1, &ok, &why));
    ASSERT_TRUE(ok) << "first transfer: " << why;
    ASSERT_NO_FATAL_FAILURE(truncate_x(kind));
    ASSERT_NO_FATAL_FAILURE(transfer_checked(op, 2, &ok, &why));
    EXPECT_TRUE(ok) << "after "
                    << (kind == trunc_kind::shrink_regrow
                            ? "ftruncate shrink + regrow"
                            : "a hole punch")
                    << ": the NIC did not use the new pages (stale "
                       "registration): "
                    << why;
}

static std::string trunc_name(
    const ::testing::TestParamInfo<std::tuple<trunc_op, trunc_kind>> &info)
{
    return std::string(std::get<0>(info.param) == trunc_op::put ? "put"
                                                                : "get") +
           "_" +
           (std::get<1>(info.param) == trunc_kind::shrink_regrow
                ? "shrink_regrow"
                : "punch_hole");
}

INSTANTIATE_TEST_SUITE_P(
    all, uct_e2e_trunc,
    ::testing::Combine(::testing::Values(trunc_op::put, trunc_op::get),
                       ::testing::Values(trunc_kind::shrink_regrow,
                                         trunc_kind::punch_hole)),
    trunc_name);

/* Negative control: a registration held across the truncation (outside the
 * cache's reach) makes the NIC write pages X no longer maps. */
class uct_e2e_trunc_control : public uct_e2e_trunc
{
};

TEST_P(uct_e2e_trunc_control, held_registration_misses_new_pages)
{
    uct_ib_mem_t *stale = reg(m_x, trunc_buf_size);

    ASSERT_NE(nullptr, stale);
    memset(m_x, 0, trunc_buf_size);
    ASSERT_NO_FATAL_FAILURE(truncate_x(std::get<1>(GetParam())));
    ASSERT_NO_FATAL_FAILURE(transfer(std::get<0>(GetParam()), stale, 7));
    EXPECT_FALSE(check(m_x, trunc_buf_size, 7, nullptr))
        << "the new pages got data through a registration of the old "
           "ones: the oracle cannot see staleness";
    dereg(stale);
}

INSTANTIATE_TEST_SUITE_P(
    all, uct_e2e_trunc_control,
    ::testing::Combine(::testing::Values(trunc_op::put),
                       ::testing::Values(trunc_kind::shrink_regrow,
                                         trunc_kind::punch_hole)),
    trunc_name);
