/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * On-demand paging, end to end through the NIC (oracle: the bytes that
 * arrive).  A HELD memory handle of X is used across a change of the
 * memory at X's addresses: munmap + mmap, mmap(MAP_FIXED), mremap onto it,
 * shmdt + shmat, madvise(MADV_DONTNEED), memfd truncated and regrown.
 *   - with UCX_IB_REG_METHODS=odp the NIC must use the NEW pages (the ODP
 *     MR follows the address space; no memory event is involved);
 *   - with UCX_IB_REG_METHODS=direct (pinned) the NIC uses the OLD pages:
 *     the negative control, proving the oracle sees a stale handle.
 * Then the handle is released and X registered again: with odp the cache
 * (which hears no events) returns the same MR, and it still moves the new
 * data.  Done for put (X the remote target), get (X the local target) and
 * am (X the local source).  With the rcache method (the default) these
 * tests skip: contrib/vm-tests/50-odp.sh runs them with UCX_MEM_EVENTS=no.
 * Also: transfers into and out of pages the CPU never touched (the NIC
 * faults them in), and the ODP capabilities the md reports.
 *
 * rxe's ODP (Linux 6.16 and 6.18 at least) ignores the offset inside a page
 * when it copies to or from an ODP MR: a packet at page offset 1024 is
 * read from / written to offset 0.  uct_odp_rxe.sub_page_offset shows it;
 * the other tests therefore move whole pages with a 4 KiB path MTU
 * (50-odp.sh boots with RXE_VM_MTU=9000), so every packet starts on a page
 * boundary.
 */
#include "uct_fixture.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace uct_test;

namespace
{

const size_t odp_buf_size = 64 * 1024;

enum class odp_change {
    munmap_mmap,
    map_fixed,
    mremap,
    shm,
    madvise_dontneed,
    truncate
};
enum class odp_op { put, get, am };

const char *odp_change_name(odp_change c)
{
    static const char *names[] = {"munmap_mmap", "map_fixed", "mremap",
                                  "shm",         "madvise",   "truncate"};
    return names[(int)c];
}

const char *skip_reason =
    "needs UCX_IB_REG_METHODS=odp (coherent) or =direct (the stale negative "
    "control): run by contrib/vm-tests/50-odp.sh";

} // namespace

class uct_odp_held
    : public rc_test,
      public ::testing::WithParamInterface<std::tuple<odp_op, odp_change>>
{
  protected:
    std::vector<std::vector<uint8_t>> m_msgs;
    void *m_x       = nullptr;
    int m_fd        = -1; /* memfd of X (not for shm / madvise) */
    int m_new_fd    = -1;
    int m_shmid[2]  = {-1, -1};
    void *m_old_spy = nullptr; /* second mapping of X's first pages */
    mapping m_peer{odp_buf_size};
    uct_ib_mem_t *m_peer_memh = nullptr;
    uct_ib_reg_method_t m_method;

    static ucs_status_t am_cb(void *arg, void *data, size_t length, unsigned)
    {
        auto *msgs = static_cast<std::vector<std::vector<uint8_t>> *>(arg);
        msgs->emplace_back(static_cast<uint8_t *>(data),
                           static_cast<uint8_t *>(data) + length);
        return UCS_OK;
    }

    odp_change change() const
    {
        return std::get<1>(GetParam());
    }
    odp_op op() const
    {
        return std::get<0>(GetParam());
    }

    void SetUp() override
    {
        rc_test::SetUp();
        if (IsSkipped() || HasFatalFailure()) {
            return;
        }
        m_method = md_attr().reg_method;
        if (m_method == UCT_IB_REG_METHOD_RCACHE) {
            GTEST_SKIP() << skip_reason;
        }
        ASSERT_EQ(UCS_OK,
                  uct_rc_iface_set_am_handler(m_iface, 3, am_cb, &m_msgs));
        m_peer_memh = reg(m_peer.ptr, m_peer.len);
        ASSERT_NE(nullptr, m_peer_memh);
    }

    void TearDown() override
    {
        dereg(m_peer_memh);
        if (m_x != nullptr) {
            if (change() == odp_change::shm) {
                shmdt(m_x);
            } else {
                munmap(m_x, odp_buf_size);
            }
        }
        if (m_old_spy != nullptr) {
            if (change() == odp_change::shm) {
                shmdt(m_old_spy);
            } else {
                munmap(m_old_spy, odp_buf_size);
            }
        }
        for (int fd : {m_fd, m_new_fd}) {
            if (fd >= 0) {
                close(fd);
            }
        }
        rc_test::TearDown();
    }

    int new_memfd()
    {
        int fd = memfd_create("uct_odp", MFD_CLOEXEC);
        EXPECT_GE(fd, 0);
        EXPECT_EQ(0, ftruncate(fd, odp_buf_size));
        return fd;
    }

    int new_shm()
    {
        int id = shmget(IPC_PRIVATE, odp_buf_size, IPC_CREAT | 0600);
        EXPECT_GE(id, 0);
        return id;
    }

    void map_first()
    {
        switch (change()) {
        case odp_change::shm:
            m_shmid[0] = new_shm();
            m_x        = shmat(m_shmid[0], nullptr, 0);
            ASSERT_NE((void *)-1, m_x);
            m_old_spy = shmat(m_shmid[0], nullptr, 0);
            ASSERT_NE((void *)-1, m_old_spy);
            shmctl(m_shmid[0], IPC_RMID, nullptr);
            break;
        case odp_change::madvise_dontneed:
            /* private anonymous: MADV_DONTNEED gives fresh zero pages */
            m_x = mmap(nullptr, odp_buf_size, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            ASSERT_NE(MAP_FAILED, m_x);
            break;
        default:
            m_fd = new_memfd();
            m_x  = mmap(nullptr, odp_buf_size, PROT_READ | PROT_WRITE,
                        MAP_SHARED, m_fd, 0);
            ASSERT_NE(MAP_FAILED, m_x);
            if (change() != odp_change::truncate) {
                m_old_spy = mmap(nullptr, odp_buf_size, PROT_READ | PROT_WRITE,
                                 MAP_SHARED, m_fd, 0);
                ASSERT_NE(MAP_FAILED, m_old_spy);
            }
            break;
        }
    }

    /* New memory at X's addresses, by change(). */
    void remap()
    {
        void *p;
        switch (change()) {
        case odp_change::munmap_mmap:
            m_new_fd = new_memfd();
            ASSERT_EQ(0, munmap(m_x, odp_buf_size));
            p = mmap(m_x, odp_buf_size, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_FIXED_NOREPLACE, m_new_fd, 0);
            ASSERT_EQ(m_x, p);
            break;
        case odp_change::map_fixed:
            m_new_fd = new_memfd();
            p        = mmap(m_x, odp_buf_size, PROT_READ | PROT_WRITE,
                            MAP_SHARED | MAP_FIXED, m_new_fd, 0);
            ASSERT_EQ(m_x, p);
            break;
        case odp_change::mremap: {
            m_new_fd = new_memfd();
            void *z  = mmap(nullptr, odp_buf_size, PROT_READ | PROT_WRITE,
                            MAP_SHARED, m_new_fd, 0);
            ASSERT_NE(MAP_FAILED, z);
            p = mremap(z, odp_buf_size, odp_buf_size,
                       MREMAP_MAYMOVE | MREMAP_FIXED, m_x);
            ASSERT_EQ(m_x, p);
            break;
        }
        case odp_change::shm:
            m_shmid[1] = new_shm();
            ASSERT_EQ(0, shmdt(m_x));
            p = shmat(m_shmid[1], m_x, 0);
            ASSERT_EQ(m_x, p);
            shmctl(m_shmid[1], IPC_RMID, nullptr);
            break;
        case odp_change::madvise_dontneed:
            ASSERT_EQ(0, madvise(m_x, odp_buf_size, MADV_DONTNEED));
            break;
        case odp_change::truncate:
            ASSERT_EQ(0, ftruncate(m_fd, 0));
            ASSERT_EQ(0, ftruncate(m_fd, odp_buf_size));
            break;
        }
    }

    /* Move pattern seed through the NIC with X (handle xm) in op()'s role;
     * *ok: X's side ended up with the pattern. */
    void run_op(uct_ib_mem_t *xm, uint32_t seed, std::string *why, bool *ok)
    {
        std::vector<uint8_t> result(odp_buf_size);
        switch (op()) {
        case odp_op::put: /* X is the remote target */
            fill(m_peer.ptr, odp_buf_size, seed);
            memset(m_x, 0, odp_buf_size);
            ASSERT_EQ(UCS_OK, put(m_ep[0], m_peer.ptr, odp_buf_size,
                                  m_peer_memh, m_x, xm));
            memcpy(result.data(), m_x, odp_buf_size);
            break;
        case odp_op::get: /* X is the local target of the read */
            fill(m_peer.ptr, odp_buf_size, seed);
            memset(m_x, 0, odp_buf_size);
            ASSERT_EQ(UCS_OK, get(m_ep[1], m_x, odp_buf_size, xm, m_peer.ptr,
                                  m_peer_memh));
            memcpy(result.data(), m_x, odp_buf_size);
            break;
        case odp_op::am: { /* X is the local source of the message */
            /* one header-less message per page: with a 4 KiB path MTU each
             * packet then starts at a page boundary (see uct_odp_rxe) */
            fill(m_x, odp_buf_size, seed);
            m_msgs.clear();
            const size_t chunk = 4096;
            for (size_t off = 0; off < odp_buf_size; off += chunk) {
                uct_iov_t iov = {(uint8_t *)m_x + off, chunk, xm};
                test_comp comp;
                ucs_status_t st = post_retry([&]() {
                    return uct_rc_ep_am_zcopy(m_ep[0], 3, nullptr, 0, &iov, 1,
                                              &comp.super);
                });
                ASSERT_EQ(UCS_INPROGRESS, st);
                ASSERT_EQ(UCS_OK, wait_comp(comp));
            }
            size_t nmsgs = odp_buf_size / chunk;
            ASSERT_TRUE(wait([&]() { return m_msgs.size() == nmsgs; }));
            size_t off = 0;
            for (auto &m : m_msgs) {
                ASSERT_EQ(chunk, m.size());
                memcpy(result.data() + off, m.data(), m.size());
                off += m.size();
            }
            break;
        }
        }
        *ok = check(result.data(), odp_buf_size, seed, why);
    }
};

TEST_P(uct_odp_held, handle_follows_new_memory)
{
    const bool odp = (m_method == UCT_IB_REG_METHOD_ODP);
    std::string why;
    bool ok = false;

    ASSERT_NO_FATAL_FAILURE(map_first());
    uct_ib_mem_t *xm = reg(m_x, odp_buf_size);
    ASSERT_NE(nullptr, xm);
    ASSERT_NO_FATAL_FAILURE(run_op(xm, 1, &why, &ok));
    ASSERT_TRUE(ok) << "first transfer: " << why;

    ASSERT_NO_FATAL_FAILURE(remap());
    if (m_old_spy != nullptr) {
        memset(m_old_spy, 0, odp_buf_size); /* the old pages, zeroed */
    }
    ASSERT_NO_FATAL_FAILURE(run_op(xm, 2, &why, &ok));
    if (odp) {
        EXPECT_TRUE(ok) << "odp: after " << odp_change_name(change())
                        << " the held handle did not reach the new pages: "
                        << why;
        if ((m_old_spy != nullptr) && (op() != odp_op::am)) {
            std::vector<uint8_t> zero(odp_buf_size, 0);
            EXPECT_EQ(0, memcmp(m_old_spy, zero.data(), odp_buf_size))
                << "odp: the NIC wrote the old pages";
        }
    } else {
        /* pinned: the NIC still uses the old pages, whatever X maps now */
        EXPECT_FALSE(ok) << "negative control: after "
                         << odp_change_name(change())
                         << " a pinned handle reached the new pages";
        if ((m_old_spy != nullptr) && (op() != odp_op::am)) {
            EXPECT_TRUE(check(m_old_spy, odp_buf_size, 2, nullptr))
                << "negative control: the old pages did not get the data";
        }
    }

    /* registered again: with odp the event-less cache returns the same MR */
    uint32_t lkey = uct_ib_mem_lkey(xm);
    dereg(xm);
    xm = reg(m_x, odp_buf_size);
    ASSERT_NE(nullptr, xm);
    if (odp) {
        EXPECT_EQ(lkey, uct_ib_mem_lkey(xm)) << "expected a cache hit";
    }
    ASSERT_NO_FATAL_FAILURE(run_op(xm, 3, &why, &ok));
    EXPECT_TRUE(ok) << "after registering again: " << why;
    dereg(xm);
}

static std::string
odp_held_name(const ::testing::TestParamInfo<std::tuple<odp_op, odp_change>> &i)
{
    static const char *ops[] = {"put", "get", "am"};
    return std::string(ops[(int)std::get<0>(i.param)]) + "_" +
           odp_change_name(std::get<1>(i.param));
}

INSTANTIATE_TEST_SUITE_P(
    all, uct_odp_held,
    ::testing::Combine(::testing::Values(odp_op::put, odp_op::get, odp_op::am),
                       ::testing::Values(odp_change::munmap_mmap,
                                         odp_change::map_fixed,
                                         odp_change::mremap, odp_change::shm,
                                         odp_change::madvise_dontneed,
                                         odp_change::truncate)),
    odp_held_name);

/* Pages the CPU never touched: the NIC faults them in (put into them, get
 * out of them: zeros), odp method only. */
class uct_odp_fault : public rc_test
{
};

TEST_F(uct_odp_fault, untouched_pages)
{
    if (md_attr().reg_method != UCT_IB_REG_METHOD_ODP) {
        GTEST_SKIP() << "needs UCX_IB_REG_METHODS=odp (50-odp.sh)";
    }
    const size_t len = 1 << 20;
    mapping dst(len), src(len), peer(len);
    uct_ib_mem_t *dm = reg(dst.ptr, len);
    uct_ib_mem_t *sm = reg(src.ptr, len);
    uct_ib_mem_t *pm = reg(peer.ptr, len);
    ASSERT_TRUE((dm != nullptr) && (sm != nullptr) && (pm != nullptr));
    fill(peer.ptr, len, 7);
    std::string why;
    ASSERT_EQ(UCS_OK, put(m_ep[0], peer.ptr, len, pm, dst.ptr, dm));
    EXPECT_TRUE(check(dst.ptr, len, 7, &why)) << why;
    ASSERT_EQ(UCS_OK, get(m_ep[1], peer.ptr, len, pm, src.ptr, sm));
    std::vector<uint8_t> zero(len, 0);
    EXPECT_EQ(0, memcmp(peer.ptr, zero.data(), len))
        << "a read of never-touched pages must give zeros";
    dereg(pm);
    dereg(sm);
    dereg(dm);
}

/* fork() with a held handle of private memory: the child writes its copy
 * (copy-on-write) and exits, the parent writes its own, then the NIC
 * writes and reads X through the handle: it must see the parent's pages.
 * odp: the COW break reaches the MR through the MMU notifier; direct
 * (pinned, kernels >= 5.13): fork copied the pinned pages for the child. */
TEST_F(uct_odp_fault, fork_parent_keeps_its_pages)
{
    uct_ib_reg_method_t method = md_attr().reg_method;
    if (method == UCT_IB_REG_METHOD_RCACHE) {
        GTEST_SKIP() << "needs UCX_IB_REG_METHODS=odp or direct (50-odp.sh)";
    }
    const size_t len = odp_buf_size;
    mapping x(len), peer(len);
    uct_ib_mem_t *xm = reg(x.ptr, len);
    uct_ib_mem_t *pm = reg(peer.ptr, len);
    ASSERT_TRUE((xm != nullptr) && (pm != nullptr));
    fill(x.ptr, len, 1);
    pid_t pid = fork();
    if (pid == 0) {
        memset(x.ptr, 0xee, len);
        _exit(0);
    }
    ASSERT_GT(pid, 0);
    int st = 0;
    ASSERT_EQ(pid, waitpid(pid, &st, 0));
    ASSERT_TRUE(WIFEXITED(st) && (WEXITSTATUS(st) == 0));
    memset(x.ptr, 0, len);
    std::string why;
    fill(peer.ptr, len, 2);
    ASSERT_EQ(UCS_OK, put(m_ep[0], peer.ptr, len, pm, x.ptr, xm));
    EXPECT_TRUE(check(x.ptr, len, 2, &why))
        << uct_ib_reg_method_name(method) << ": put after fork: " << why;
    fill(x.ptr, len, 3);
    memset(peer.ptr, 0, len);
    ASSERT_EQ(UCS_OK, get(m_ep[1], peer.ptr, len, pm, x.ptr, xm));
    EXPECT_TRUE(check(peer.ptr, len, 3, &why))
        << uct_ib_reg_method_name(method) << ": get after fork: " << why;
    dereg(pm);
    dereg(xm);
}

/* What the md reports; UCT_TEST_EXPECT_ODP=explicit (set by 50-odp.sh on
 * a kernel whose rxe has ODP) makes explicit-without-implicit required. */
class uct_odp_caps : public md_test
{
};

TEST_F(uct_odp_caps, detected)
{
    uct_ib_md_attr_t attr = md_attr();
    printf("odp: explicit %d implicit %d rc caps 0x%x supported %d method "
           "%s\n",
           attr.odp_explicit, attr.odp_implicit, attr.odp_rc_caps,
           attr.odp_supported, uct_ib_reg_method_name(attr.reg_method));
    if (attr.odp_implicit) {
        EXPECT_TRUE(attr.odp_explicit);
    }
    if (attr.odp_supported) {
        EXPECT_TRUE(attr.odp_explicit);
        EXPECT_EQ(0xfu, attr.odp_rc_caps & 0xfu); /* send recv write read */
    }
    if (!attr.odp_explicit) {
        EXPECT_EQ(0u, attr.odp_rc_caps);
    }
    if (attr.reg_method == UCT_IB_REG_METHOD_ODP) {
        EXPECT_TRUE(attr.odp_supported);
    }
    const char *expect = getenv("UCT_TEST_EXPECT_ODP");
    if ((expect != nullptr) && (strcmp(expect, "explicit") == 0)) {
        EXPECT_TRUE(attr.odp_supported) << "this kernel's rxe has ODP";
        EXPECT_FALSE(attr.odp_implicit) << "rxe has no implicit ODP";
    }
}

/* The rxe ODP copy bug (see the top of the file): one 256-byte put at page
 * offset 1024 of an ODP MR.  UCT_TEST_ODP_OFFSET_BUG=expected (50-odp.sh,
 * on the kernels known to have it) asserts the bug is still there, so that
 * a fixed kernel is noticed; otherwise the data must land in place. */
class uct_odp_rxe : public rc_test
{
};

TEST_F(uct_odp_rxe, sub_page_offset)
{
    if (md_attr().reg_method != UCT_IB_REG_METHOD_ODP) {
        GTEST_SKIP() << "needs UCX_IB_REG_METHODS=odp (50-odp.sh)";
    }
    mapping x(8192), peer(8192);
    uct_ib_mem_t *xm = reg(x.ptr, x.len);
    uct_ib_mem_t *pm = reg(peer.ptr, peer.len);
    ASSERT_TRUE((xm != nullptr) && (pm != nullptr));
    uint8_t *d = static_cast<uint8_t *>(x.ptr);
    memset(peer.ptr, 0x5a, peer.len);
    memset(d, 0, x.len);
    ASSERT_EQ(UCS_OK, put(m_ep[0], static_cast<uint8_t *>(peer.ptr) + 1024, 256,
                          pm, d + 1024, xm));
    bool in_place = (d[1024] == 0x5a) && (d[1279] == 0x5a) && (d[0] == 0);
    bool at_zero  = (d[0] == 0x5a) && (d[1024] == 0);
    printf("odp put of 256 bytes at page offset 1024: %s\n",
           in_place  ? "in place"
           : at_zero ? "landed at page offset 0 (the rxe ODP bug)"
                     : "elsewhere");
    const char *bug = getenv("UCT_TEST_ODP_OFFSET_BUG");
    if ((bug != nullptr) && (strcmp(bug, "expected") == 0)) {
        EXPECT_TRUE(at_zero) << "the kernel's rxe ODP no longer has the "
                                "page-offset bug: drop the 4 KiB MTU "
                                "workaround of 50-odp.sh";
    } else {
        EXPECT_TRUE(in_place);
    }
    dereg(pm);
    dereg(xm);
}
