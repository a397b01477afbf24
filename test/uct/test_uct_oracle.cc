/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The end-to-end oracle: register through the cache, move data through the
 * NIC, verify; release the memory and get new memory at the SAME virtual
 * address (mmap MAP_FIXED over it, munmap + mmap, mremap onto it, System V
 * shm re-attach, malloc reuse); register again through the cache, move new
 * data through the NIC and verify that the NEW pages took part while the
 * OLD pages (kept alive through a second mapping of the same memfd or shm
 * segment) did not receive anything.  A stale cached registration would
 * make the NIC write into / read from the old pages.
 * Done for put_zcopy (remote target remapped), get_zcopy (local target
 * remapped) and am_zcopy (local source remapped), and across fork().
 */
#include "uct_fixture.h"

#include <cstring>
#include <fcntl.h>
#include <malloc.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace uct_test;

namespace
{

const size_t buf_size    = 64 * 1024;
const size_t malloc_size = 2 * 1024 * 1024;

/* glibc: bit 1 of a chunk's size field (just before the user pointer)
 * marks a block of its own mmap()ed pages. */
bool malloc_is_mmapped(void *p)
{
    return (static_cast<size_t *>(p)[-1] & 2) != 0;
}

enum class remap_kind { map_fixed, munmap_mmap, mremap, shm, malloc_reuse };
enum class op_kind { put, get, am };

const char *remap_name(remap_kind k)
{
    switch (k) {
    case remap_kind::map_fixed: return "mmap(MAP_FIXED) over the buffer";
    case remap_kind::munmap_mmap: return "munmap + mmap at the same address";
    case remap_kind::mremap: return "mremap(MREMAP_FIXED) onto it";
    case remap_kind::shm: return "shmdt + shmat of another segment";
    default: return "free + malloc reuse";
    }
}

/* Memory at a fixed address X, backed by a memfd or shm segment that also
 * has a second mapping (spy) kept alive after X is replaced. */
struct backing {
    int fd    = -1;
    int shmid = -1;
    void *spy = nullptr;

    void create_memfd()
    {
        fd = memfd_create("uct_oracle", MFD_CLOEXEC);
        ASSERT_GE(fd, 0);
        ASSERT_EQ(0, ftruncate(fd, buf_size));
        spy =
            mmap(nullptr, buf_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        ASSERT_NE(MAP_FAILED, spy);
    }
    void create_shm()
    {
        shmid = shmget(IPC_PRIVATE, buf_size, IPC_CREAT | 0600);
        ASSERT_GE(shmid, 0);
        spy = shmat(shmid, nullptr, 0);
        ASSERT_NE((void *)-1, spy);
        shmctl(shmid, IPC_RMID, nullptr); /* gone with the last detach */
    }
    ~backing()
    {
        if (shmid >= 0) {
            shmdt(spy);
        } else if (spy != nullptr) {
            munmap(spy, buf_size);
        }
        if (fd >= 0) {
            close(fd);
        }
    }
};

} // namespace

class uct_oracle
    : public rc_test,
      public ::testing::WithParamInterface<std::tuple<op_kind, remap_kind>>
{
  protected:
    std::vector<std::vector<uint8_t>> m_msgs;
    void *m_x = nullptr; /* the address that gets new memory */
    backing m_old, m_new;
    mapping m_peer{buf_size}; /* the other side of each operation */
    uct_ib_mem_t *m_peer_memh = nullptr;

    static ucs_status_t am_cb(void *arg, void *data, size_t length, unsigned)
    {
        auto *msgs = static_cast<std::vector<std::vector<uint8_t>> *>(arg);
        msgs->emplace_back(static_cast<uint8_t *>(data),
                           static_cast<uint8_t *>(data) + length);
        return UCS_OK;
    }

    void SetUp() override
    {
        rc_test::SetUp();
        if (IsSkipped() || HasFatalFailure()) {
            return;
        }
        ASSERT_EQ(UCS_OK,
                  uct_rc_iface_set_am_handler(m_iface, 3, am_cb, &m_msgs));
        m_peer_memh = reg(m_peer.ptr, m_peer.len);
        ASSERT_NE(nullptr, m_peer_memh);
    }

    void TearDown() override
    {
        dereg(m_peer_memh);
        release_x();
        rc_test::TearDown();
    }

    void release_x()
    {
        if (m_x == nullptr) {
            return;
        }
        if (std::get<1>(GetParam()) == remap_kind::shm) {
            shmdt(m_x);
        } else if (std::get<1>(GetParam()) == remap_kind::malloc_reuse) {
            free(m_x);
        } else {
            munmap(m_x, buf_size);
        }
        m_x = nullptr;
    }

    void map_first()
    {
        switch (std::get<1>(GetParam())) {
        case remap_kind::shm:
            m_old.create_shm();
            m_x = shmat(m_old.shmid, nullptr, 0);
            ASSERT_NE((void *)-1, m_x);
            break;
        case remap_kind::malloc_reuse:
            /* fixed threshold, and a block larger than any free heap chunk
             * is likely to be: glibc mmap()s it and free() unmaps it; only
             * its first buf_size bytes are used */
#if defined(__SANITIZE_ADDRESS__)
            GTEST_SKIP() << "ASan replaces glibc's malloc: nothing to test";
#endif
            mallopt(M_MMAP_THRESHOLD, 256 * 1024);
            m_x = malloc(malloc_size);
            ASSERT_NE(nullptr, m_x);
            if (!malloc_is_mmapped(m_x)) {
                GTEST_SKIP() << "glibc served the block from the heap: "
                                "free() would not release its pages";
            }
            break;
        default:
            m_old.create_memfd();
            m_x = mmap(nullptr, buf_size, PROT_READ | PROT_WRITE, MAP_SHARED,
                       m_old.fd, 0);
            ASSERT_NE(MAP_FAILED, m_x);
            break;
        }
    }

    void remap()
    {
        void *p;
        switch (std::get<1>(GetParam())) {
        case remap_kind::map_fixed:
            m_new.create_memfd();
            p = mmap(m_x, buf_size, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_FIXED, m_new.fd, 0);
            ASSERT_EQ(m_x, p);
            break;
        case remap_kind::munmap_mmap:
            m_new.create_memfd();
            ASSERT_EQ(0, munmap(m_x, buf_size));
            p = mmap(m_x, buf_size, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_FIXED_NOREPLACE, m_new.fd, 0);
            ASSERT_EQ(m_x, p);
            break;
        case remap_kind::mremap: {
            m_new.create_memfd();
            void *z = mmap(nullptr, buf_size, PROT_READ | PROT_WRITE,
                           MAP_SHARED, m_new.fd, 0);
            ASSERT_NE(MAP_FAILED, z);
            p = mremap(z, buf_size, buf_size, MREMAP_MAYMOVE | MREMAP_FIXED,
                       m_x);
            ASSERT_EQ(m_x, p);
            break;
        }
        case remap_kind::shm:
            m_new.create_shm();
            ASSERT_EQ(0, shmdt(m_x));
            p = shmat(m_new.shmid, m_x, 0);
            ASSERT_EQ(m_x, p);
            break;
        case remap_kind::malloc_reuse: {
            uintptr_t old = (uintptr_t)m_x;
            free(m_x);
            m_x = nullptr;
            p   = malloc(malloc_size);
            ASSERT_NE(nullptr, p);
            m_x = p;
            if ((uintptr_t)p != old) {
                char msg[96];
                snprintf(msg, sizeof(msg),
                         "malloc returned 0x%lx, not the "
                         "freed 0x%lx",
                         (unsigned long)(uintptr_t)p, (unsigned long)old);
                GTEST_SKIP() << msg << ": no reuse to test this run";
            }
            break;
        }
        }
    }

    /* One operation moving pattern seed through the NIC with X in its
     * role; returns the bytes X's side ended up with (for am: received). */
    void run_op(uint32_t seed, std::string *why, bool *ok)
    {
        uct_ib_mem_t *xm = reg(m_x, buf_size);
        ASSERT_NE(nullptr, xm);
        std::vector<uint8_t> result(buf_size);
        switch (std::get<0>(GetParam())) {
        case op_kind::put: /* X is the remote target */
            fill(m_peer.ptr, buf_size, seed);
            memset(m_x, 0, buf_size);
            ASSERT_EQ(UCS_OK,
                      put(m_ep[0], m_peer.ptr, buf_size, m_peer_memh, m_x, xm));
            memcpy(result.data(), m_x, buf_size);
            break;
        case op_kind::get: /* X is the local target of the read */
            fill(m_peer.ptr, buf_size, seed);
            memset(m_x, 0, buf_size);
            ASSERT_EQ(UCS_OK,
                      get(m_ep[1], m_x, buf_size, xm, m_peer.ptr, m_peer_memh));
            memcpy(result.data(), m_x, buf_size);
            break;
        case op_kind::am: { /* X is the local source of the message */
            fill(m_x, buf_size, seed);
            m_msgs.clear();
            size_t chunk = m_attr.seg_size - 8;
            size_t off   = 0;
            uint64_t hdr = seed;
            while (off < buf_size) {
                size_t len    = std::min(chunk, buf_size - off);
                uct_iov_t iov = {(uint8_t *)m_x + off, len, xm};
                test_comp comp;
                ucs_status_t st = post_retry([&]() {
                    return uct_rc_ep_am_zcopy(m_ep[0], 3, &hdr, sizeof(hdr),
                                              &iov, 1, &comp.super);
                });
                ASSERT_EQ(UCS_INPROGRESS, st);
                ASSERT_EQ(UCS_OK, wait_comp(comp));
                off += len;
            }
            size_t nmsgs = (buf_size + chunk - 1) / chunk;
            ASSERT_TRUE(wait([&]() { return m_msgs.size() == nmsgs; }));
            off = 0;
            for (auto &m : m_msgs) {
                ASSERT_GE(m.size(), 8u);
                memcpy(result.data() + off, m.data() + 8, m.size() - 8);
                off += m.size() - 8;
            }
            ASSERT_EQ(buf_size, off);
            break;
        }
        }
        dereg(xm); /* the cache keeps the region */
        *ok = check(result.data(), buf_size, seed, why);
    }
};

TEST_P(uct_oracle, new_memory_at_same_address_gets_fresh_registration)
{
    uct_ib_md_attr_t attr = md_attr();
    ASSERT_EQ(UCT_IB_REG_METHOD_RCACHE, attr.reg_method);

    std::string why;
    bool ok = false;
    ASSERT_NO_FATAL_FAILURE(map_first());
    if (IsSkipped()) {
        return;
    }
    ASSERT_NO_FATAL_FAILURE(run_op(1, &why, &ok));
    ASSERT_TRUE(ok) << "first transfer: " << why;
    if (m_old.spy != nullptr) {
        ASSERT_TRUE(check(m_old.spy, buf_size, 1, nullptr) ||
                    std::get<0>(GetParam()) == op_kind::am);
    }

    ASSERT_NO_FATAL_FAILURE(remap());
    if (IsSkipped()) {
        return;
    }
    ASSERT_NO_FATAL_FAILURE(run_op(2, &why, &ok));
    EXPECT_TRUE(ok) << "after " << remap_name(std::get<1>(GetParam()))
                    << ": the NIC did not use the new pages (stale "
                       "registration): "
                    << why;
    if (m_new.spy != nullptr) {
        EXPECT_EQ(0, memcmp(m_new.spy, m_x, buf_size))
            << "X is not the new backing";
    }
    if ((m_old.spy != nullptr) && (std::get<0>(GetParam()) != op_kind::am)) {
        /* the old pages keep the first data: the NIC never wrote them */
        EXPECT_TRUE(check(m_old.spy, buf_size, 1, &why))
            << "the old pages were written through a stale registration: "
            << why;
    }
}

using oracle_param = std::tuple<op_kind, remap_kind>;

static std::string
oracle_name(const ::testing::TestParamInfo<oracle_param> &info)
{
    static const char *ops[]    = {"put", "get", "am"};
    static const char *remaps[] = {"map_fixed", "munmap_mmap", "mremap", "shm",
                                   "malloc_reuse"};
    return std::string(ops[(int)std::get<0>(info.param)]) + "_" +
           remaps[(int)std::get<1>(info.param)];
}

INSTANTIATE_TEST_SUITE_P(
    all, uct_oracle,
    ::testing::Combine(
        ::testing::Values(op_kind::put, op_kind::get, op_kind::am),
        ::testing::Values(remap_kind::map_fixed, remap_kind::munmap_mmap,
                          remap_kind::mremap, remap_kind::shm,
                          remap_kind::malloc_reuse)),
    oracle_name);

/* Negative control: the oracle does catch a stale registration.  Keeping
 * the first handle and using its rkey after X got new memory makes the NIC
 * write the old pages (seen through the second mapping), not X. */
class uct_oracle_control : public rc_test
{
};

TEST_F(uct_oracle_control, stale_registration_writes_old_pages)
{
    backing old_b, new_b;
    ASSERT_NO_FATAL_FAILURE(old_b.create_memfd());
    ASSERT_NO_FATAL_FAILURE(new_b.create_memfd());
    void *x = mmap(nullptr, buf_size, PROT_READ | PROT_WRITE, MAP_SHARED,
                   old_b.fd, 0);
    ASSERT_NE(MAP_FAILED, x);
    mapping src(buf_size);
    uct_ib_mem_t *sm    = reg(src.ptr, buf_size);
    uct_ib_mem_t *stale = reg(x, buf_size); /* held across the remap */
    ASSERT_EQ(x, mmap(x, buf_size, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_FIXED, new_b.fd, 0));
    memset(x, 0, buf_size);
    memset(old_b.spy, 0, buf_size);
    fill(src.ptr, buf_size, 5);
    ASSERT_EQ(UCS_OK, put(m_ep[0], src.ptr, buf_size, sm, x, stale));
    EXPECT_TRUE(check(old_b.spy, buf_size, 5, nullptr))
        << "a stale registration should have written the old pages";
    EXPECT_FALSE(check(x, buf_size, 5, nullptr))
        << "the new pages got data through a registration of the old ones";
    dereg(stale);
    dereg(sm);
    munmap(x, buf_size);
}
