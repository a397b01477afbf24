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
 * faults them in); two threads replacing memory while the other transfers
 * through the same MR; fork() seen from the parent and from the child (which
 * must register again: the parent's verbs objects refuse it); and the ODP
 * capabilities the md reports.
 *
 * rxe's ODP (Linux 6.16 and 6.18 at least) writes pages it mapped read-only
 * in place (copy-on-write pages after fork, the kernel's zero page: see
 * fork_child_registers_again and uct_odp_rxe.zero_page_write), and ignores
 * the offset inside a page when it copies to or from an ODP MR: a packet at
 * page offset 1024 is read from / written to offset 0.
 * uct_odp_rxe.sub_page_offset shows it;
 * the other tests therefore move whole pages with a 4 KiB path MTU
 * (50-odp.sh boots with RXE_VM_MTU=9000), so every packet starts on a page
 * boundary.
 */
#include "uct_fixture.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <cerrno>
#include <csignal>
#include <fcntl.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <thread>
#include <time.h>
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

namespace
{

/* A loopback of its own (an iface on md, two connected endpoints) for a
 * thread or a forked child: no gtest assertions (they would only return
 * from the helper), every call returns a status. */
class loopback
{
  public:
    explicit loopback(uct_ib_md_t *md) : m_md(md)
    {
        uint8_t addr_a[UCT_RC_EP_ADDR_SIZE], addr_b[UCT_RC_EP_ADDR_SIZE];
        if ((uct_rc_iface_open(md, nullptr, &m_iface) != UCS_OK) ||
            (uct_rc_ep_create(m_iface, &m_a) != UCS_OK) ||
            (uct_rc_ep_create(m_iface, &m_b) != UCS_OK) ||
            (uct_rc_ep_get_address(m_a, addr_a) != UCS_OK) ||
            (uct_rc_ep_get_address(m_b, addr_b) != UCS_OK) ||
            (uct_rc_ep_connect_to_ep(m_a, addr_b) != UCS_OK) ||
            (uct_rc_ep_connect_to_ep(m_b, addr_a) != UCS_OK)) {
            return;
        }
        m_ok = true;
    }

    ~loopback()
    {
        for (uct_rc_ep_t *ep : {m_a, m_b}) {
            if (ep != nullptr) {
                uct_rc_ep_destroy(ep);
            }
        }
        if (m_iface != nullptr) {
            uct_rc_iface_close(m_iface);
        }
    }

    bool ok() const
    {
        return m_ok;
    }

    /* put (is_get false: local -> remote) or get (remote -> local) of len
     * bytes, waited for (30 s at most) */
    ucs_status_t rma(bool is_get, void *local, uct_ib_mem_t *lm, void *remote,
                     uct_ib_mem_t *rm, size_t len)
    {
        uint8_t packed[UCT_IB_RKEY_PACKED_SIZE];
        uct_rkey_t rkey;
        uct_iov_t iov = {local, len, lm};
        test_comp comp;
        ucs_status_t st;

        if ((uct_ib_md_rkey_pack(m_md, rm, packed) != UCS_OK) ||
            (uct_ib_rkey_unpack(packed, &rkey) != UCS_OK)) {
            return UCS_ERR_INVALID_PARAM;
        }
        double deadline = now() + 30;
        do {
            st = is_get ? uct_rc_ep_get_zcopy(m_a, &iov, 1, (uintptr_t)remote,
                                              rkey, &comp.super)
                        : uct_rc_ep_put_zcopy(m_a, &iov, 1, (uintptr_t)remote,
                                              rkey, &comp.super);
            if (st == UCS_ERR_NO_RESOURCE) {
                uct_rc_iface_progress(m_iface);
            }
        } while ((st == UCS_ERR_NO_RESOURCE) && (now() < deadline));
        if (st != UCS_INPROGRESS) {
            return st;
        }
        while (comp.super.count != 0) {
            if ((uct_rc_iface_progress(m_iface) == 0) && (now() > deadline)) {
                return UCS_ERR_TIMED_OUT;
            }
        }
        return comp.super.status;
    }

  private:
    static double now()
    {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec + ts.tv_nsec * 1e-9;
    }

    uct_ib_md_t *m_md;
    uct_rc_iface_t *m_iface = nullptr;
    uct_rc_ep_t *m_a = nullptr, *m_b = nullptr;
    bool m_ok = false;
};

/* Private anonymous memory, never touched, mapped anew at p (MAP_FIXED:
 * the old pages go) or discarded there (MADV_DONTNEED): either way new
 * zero pages behind the same addresses. */
bool replace_anon(void *p, size_t len, bool map_fixed)
{
    if (map_fixed) {
        return mmap(p, len, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == p;
    }
    return madvise(p, len, MADV_DONTNEED) == 0;
}

} // namespace

/* Two threads, each with its own loopback on the shared md, transfer
 * through held handles: its own buffer O (remote target of a put, remote
 * source of a get) and its half of a buffer S registered once for both
 * (local source of a put, local target of a get).  Before every round but
 * the first, each thread replaces the memory of O and of its half of S
 * (alternately MAP_FIXED and MADV_DONTNEED) while the other thread is
 * transferring: for S that is an invalidation of part of an MR whose other
 * part the NIC is using.  Oracle: the data that arrives.
 *   odp: every transfer of every round is right;
 *   direct (pinned, the negative control): from round 1 on, every
 *   transfer moves the old pages, none is right. */
class uct_odp_threads : public md_test
{
};

TEST_F(uct_odp_threads, replace_while_the_other_transfers)
{
    uct_ib_reg_method_t method = md_attr().reg_method;
    if (method == UCT_IB_REG_METHOD_RCACHE) {
        GTEST_SKIP() << skip_reason;
    }
    const bool odp     = (method == UCT_IB_REG_METHOD_ODP);
    const size_t len   = odp_buf_size;
    const int rounds   = 8;
    const int nthreads = 2;
    mapping s(nthreads * len);
    ASSERT_NE(nullptr, s.ptr);
    uct_ib_mem_t *sm = reg(s.ptr, s.len);
    ASSERT_NE(nullptr, sm);

    struct thread_state {
        mapping own{odp_buf_size}, peer{odp_buf_size};
        uct_ib_mem_t *om = nullptr, *pm = nullptr;
        uint8_t *half = nullptr;
        /* per round: bit 0 put into O, 1 get from O, 2 put from S,
         * 3 get into S: set when that transfer was right */
        std::vector<unsigned> good;
        std::string error;
    } st[nthreads];
    for (int t = 0; t < nthreads; ++t) {
        st[t].om   = reg(st[t].own.ptr, len);
        st[t].pm   = reg(st[t].peer.ptr, len);
        st[t].half = static_cast<uint8_t *>(s.ptr) + t * len;
        ASSERT_TRUE((st[t].om != nullptr) && (st[t].pm != nullptr));
    }

    std::atomic<int> ready{0};
    auto body = [&](int t) {
        thread_state &me = st[t];
        loopback lb(m_md);
        ready.fetch_add(1);
        while (ready.load() < nthreads) {
            sched_yield();
        }
        if (!lb.ok()) {
            me.error = "cannot open a loopback";
            return;
        }
        for (int r = 0; r < rounds; ++r) {
            uint32_t seed = 100 * (t + 1) + 4 * r;
            unsigned good = 0;
            if ((r > 0) && (!replace_anon(me.own.ptr, len, r % 2) ||
                            !replace_anon(me.half, len, !(r % 2)))) {
                me.error = "cannot replace the memory: " +
                           std::string(strerror(errno));
                return;
            }
            /* one transfer: bit, direction, local, remote, the side the
             * CPU fills (the source) and the side it checks (the target) */
            auto xfer = [&](unsigned bit, bool is_get, void *local,
                            uct_ib_mem_t *lm, void *remote, uct_ib_mem_t *rm,
                            uint32_t pattern) {
                void *src = is_get ? remote : local;
                void *dst = is_get ? local : remote;
                fill(src, len, pattern);
                memset(dst, 0, len);
                ucs_status_t status =
                    lb.rma(is_get, local, lm, remote, rm, len);
                if ((status != UCS_OK) && me.error.empty()) {
                    me.error =
                        std::string("round ") + std::to_string(r) +
                        ": a transfer failed: " + ucs_status_string(status);
                }
                if ((status == UCS_OK) && check(dst, len, pattern, nullptr)) {
                    good |= 1u << bit;
                }
            };
            xfer(0, false, me.peer.ptr, me.pm, me.own.ptr, me.om, seed);
            xfer(1, true, me.peer.ptr, me.pm, me.own.ptr, me.om, seed + 1);
            xfer(2, false, me.half, sm, me.peer.ptr, me.pm, seed + 2);
            xfer(3, true, me.half, sm, me.peer.ptr, me.pm, seed + 3);
            me.good.push_back(good);
        }
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < nthreads; ++t) {
        threads.emplace_back(body, t);
    }
    for (auto &th : threads) {
        th.join();
    }

    for (int t = 0; t < nthreads; ++t) {
        std::string rows;
        for (unsigned g : st[t].good) {
            char b[8];
            snprintf(b, sizeof(b), " %x", g);
            rows += b;
        }
        printf("thread %d (%s), right transfers per round (bits: put into "
               "O, get from O, put from S, get into S):%s\n",
               t, uct_ib_reg_method_name(method), rows.c_str());
        EXPECT_EQ("", st[t].error) << "thread " << t;
        ASSERT_EQ((size_t)rounds, st[t].good.size()) << "thread " << t;
        EXPECT_EQ(0xfu, st[t].good[0]) << "thread " << t << ": round 0";
        for (int r = 1; r < rounds; ++r) {
            if (odp) {
                EXPECT_EQ(0xfu, st[t].good[r])
                    << "odp: thread " << t << " round " << r
                    << ": a held handle missed the replaced memory";
            } else {
                EXPECT_EQ(0u, st[t].good[r])
                    << "negative control: thread " << t << " round " << r
                    << ": a pinned handle reached the replaced memory";
            }
        }
        dereg(st[t].pm);
        dereg(st[t].om);
    }
    dereg(sm);
}

namespace
{

/* Exit codes of the forked children below (a child has no gtest). */
enum fork_child_rc {
    FORK_CHILD_OK        = 0,
    FORK_CHILD_LOST_DATA = 20, /* its CPU lost the pre-fork contents */
    FORK_CHILD_SETUP,          /* md, loopback or registration failed */
    FORK_CHILD_XFER,           /* a transfer failed */
    FORK_CHILD_READ_WRONG,     /* the NIC read something else than X */
    FORK_CHILD_WRITE_WRONG     /* the NIC's write is not in its X */
};

const char *fork_child_rc_text =
    "20 lost pre-fork data, 21 setup, 22 transfer failed, 23 the NIC read "
    "other pages than the child's X, 24 the NIC's write is not in the "
    "child's X, -1 timed out";

/* In a forked child: its own md (the parent's verbs objects refuse a
 * child: see fork_child_with_parents_handle) and x registered again with
 * it.  x's two halves hold patterns 1 and 5 (pre-fork, pages still shared
 * copy-on-write with the parent).  First half: the NIC writes pattern 2
 * into it (its first access).  Second half: the NIC reads it (must be 5),
 * then writes pattern 6 into it. */
int fork_child_own_md(void *x, size_t len)
{
    const size_t half = len / 2;
    uint8_t *a = static_cast<uint8_t *>(x), *b = a + half;
    if (!check(a, half, 1, nullptr) || !check(b, half, 5, nullptr)) {
        return FORK_CHILD_LOST_DATA;
    }
    uct_ib_md_t *md;
    if (uct_ib_md_open(dev_spec(), &md) != UCS_OK) {
        return FORK_CHILD_SETUP;
    }
    int rc = FORK_CHILD_OK;
    {
        loopback lb(md);
        mapping peer(len);
        uint8_t *pa = static_cast<uint8_t *>(peer.ptr), *pb = pa + half;
        uct_ib_mem_t *xm = nullptr, *pm = nullptr;
        if (!lb.ok() || (peer.ptr == nullptr) ||
            (uct_ib_md_mem_reg(md, x, len, UCT_IB_MEM_ACCESS_ALL, &xm) !=
             UCS_OK) ||
            (uct_ib_md_mem_reg(md, peer.ptr, len, UCT_IB_MEM_ACCESS_ALL, &pm) !=
             UCS_OK)) {
            rc = FORK_CHILD_SETUP;
        } else {
            fill(pa, half, 2);
            fill(pb, half, 6);
            if ((lb.rma(true, a, xm, pa, pm, half) != UCS_OK) ||
                (lb.rma(false, b, xm, pb, pm, half) != UCS_OK)) {
                rc = FORK_CHILD_XFER; /* get into a; put from b */
            } else if (!check(pb, half, 5, nullptr)) {
                rc = FORK_CHILD_READ_WRONG;
            } else {
                fill(pb, half, 6);
                if (lb.rma(true, b, xm, pb, pm, half) != UCS_OK) {
                    rc = FORK_CHILD_XFER; /* get into b */
                } else if (!check(a, half, 2, nullptr) ||
                           !check(b, half, 6, nullptr)) {
                    rc = FORK_CHILD_WRITE_WRONG;
                }
            }
        }
        if (pm != nullptr) {
            uct_ib_md_mem_dereg(md, pm);
        }
        if (xm != nullptr) {
            uct_ib_md_mem_dereg(md, xm);
        }
    }
    uct_ib_md_close(md);
    return rc;
}

/* waitpid with a limit; the exit status, or -1 (killed after timeout_s) */
int wait_child(pid_t pid, double timeout_s)
{
    int st = 0;
    for (double t = 0; t < timeout_s; t += 0.05) {
        if (waitpid(pid, &st, WNOHANG) == pid) {
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        usleep(50000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

} // namespace

/* fork() with a held handle of private memory X that the NIC has used; the
 * CHILD opens its own md and registers X again (fork_child_own_md), the
 * NIC writes its X (first half) and reads then writes it (second half).
 * The parent's X must keep its own contents: the NIC's writes in the child
 * must break copy-on-write like the child's CPU would.  Then the parent's
 * held handle reads and writes the parent's pages.
 *   direct: the child's registration (write access) breaks copy-on-write
 *   for the pages it pins: both halves right.
 *   odp: a NIC write fault with write access would break it.  But rxe's
 *   ODP (Linux 6.16 and 6.18) faults only for pages it does not have at
 *   all: pages present at registration (here: the child's copy-on-write
 *   pages, read-only) or read by the NIC before are then written in
 *   place, and the child's writes land in the parent's pages.
 *   UCT_TEST_ODP_COW_BUG=expected (50-odp.sh) asserts that this is still
 *   so for both halves; otherwise both must be right. */
TEST_F(uct_odp_fault, fork_child_registers_again)
{
    uct_ib_reg_method_t method = md_attr().reg_method;
    if (method == UCT_IB_REG_METHOD_RCACHE) {
        GTEST_SKIP() << "needs UCX_IB_REG_METHODS=odp or direct (50-odp.sh)";
    }
    const char *name        = uct_ib_reg_method_name(method);
    const char *bug         = getenv("UCT_TEST_ODP_COW_BUG");
    const bool bug_expected = (method == UCT_IB_REG_METHOD_ODP) &&
                              (bug != nullptr) &&
                              (strcmp(bug, "expected") == 0);
    const size_t len  = odp_buf_size;
    const size_t half = len / 2;
    mapping x(len), peer(len);
    uint8_t *a = static_cast<uint8_t *>(x.ptr), *b = a + half;
    uint8_t *pa = static_cast<uint8_t *>(peer.ptr), *pb = pa + half;
    uct_ib_mem_t *xm = reg(x.ptr, len);
    uct_ib_mem_t *pm = reg(peer.ptr, len);
    ASSERT_TRUE((xm != nullptr) && (pm != nullptr));
    std::string why;
    fill(pa, half, 1);
    fill(pb, half, 5);
    ASSERT_EQ(UCS_OK, put(m_ep[0], peer.ptr, len, pm, x.ptr, xm));
    ASSERT_TRUE(check(a, half, 1, &why) && check(b, half, 5, &why)) << why;

    fflush(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
        _exit(fork_child_own_md(x.ptr, len));
    }
    ASSERT_GT(pid, 0);
    int rc = wait_child(pid, 120);
    EXPECT_EQ(0, rc) << name << ": child: " << fork_child_rc_text;
    /* each half: the parent's page kept its data, or got the child's */
    const char *what[2] = {"NIC write (first access)",
                           "NIC write after a NIC read"};
    bool kept[2]   = {check(a, half, 1, nullptr), check(b, half, 5, nullptr)};
    bool leaked[2] = {check(a, half, 2, nullptr), check(b, half, 6, nullptr)};
    for (int h = 0; h < 2; ++h) {
        printf("%s: the child's %s of a copy-on-write page: the parent's page "
               "%s\n",
               name, what[h],
               kept[h]     ? "kept its data"
               : leaked[h] ? "got the child's data (copy-on-write not broken)"
                           : "changed otherwise");
        if (bug_expected) {
            EXPECT_TRUE(leaked[h])
                << "the child's " << what[h] << " no longer reaches the "
                << "parent's page: rxe ODP is fixed, drop "
                << "UCT_TEST_ODP_COW_BUG from 50-odp.sh";
        } else {
            EXPECT_TRUE(kept[h]) << name << ": the child's " << what[h]
                                 << " reached the parent's X";
        }
    }

    /* the parent's held handle, on the parent's pages */
    fill(x.ptr, len, 3);
    memset(peer.ptr, 0, len);
    ASSERT_EQ(UCS_OK, get(m_ep[1], peer.ptr, len, pm, x.ptr, xm));
    EXPECT_TRUE(check(peer.ptr, len, 3, &why))
        << name << ": parent's get after fork: " << why;
    fill(peer.ptr, len, 4);
    ASSERT_EQ(UCS_OK, put(m_ep[0], peer.ptr, len, pm, x.ptr, xm));
    EXPECT_TRUE(check(x.ptr, len, 4, &why))
        << name << ": parent's put after fork: " << why;
    dereg(pm);
    dereg(xm);
}

/* A child that posts through the PARENT's endpoint with the parent's
 * handles (no verbs objects of its own): the kernel refuses it.  A verbs
 * command on a uverbs file is accepted only from the credentials that
 * opened it, and fork() gives the child new credentials (ibv_post_send
 * fails with EACCES; the kernel logs "changed security contexts after
 * opening file descriptor").  Nothing moves: neither X changes.  So a
 * child must open its own device context and register again. */
TEST_F(uct_odp_fault, fork_child_with_parents_handle)
{
    uct_ib_reg_method_t method = md_attr().reg_method;
    if (method == UCT_IB_REG_METHOD_RCACHE) {
        GTEST_SKIP() << "needs UCX_IB_REG_METHODS=odp or direct (50-odp.sh)";
    }
    if (md_attr().fork_state == UCT_IB_FORK_ENABLED) {
        GTEST_SKIP() << "ibv_fork_init() is on: the child has no queue "
                        "memory of the parent to post through";
    }
    const size_t len = odp_buf_size;
    mapping x(len), peer(len);
    uct_ib_mem_t *xm = reg(x.ptr, len);
    uct_ib_mem_t *pm = reg(peer.ptr, len);
    ASSERT_TRUE((xm != nullptr) && (pm != nullptr));
    fill(x.ptr, len, 1);
    fill(peer.ptr, len, 4);

    fflush(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
        /* put pattern 4 from peer into X; exit 10 + (the child's X has
         * it) + 2 * (the put completed OK) */
        uct_iov_t iov   = {peer.ptr, len, pm};
        uct_rkey_t rkey = rkey_of(xm);
        test_comp comp;
        ucs_status_t st = uct_rc_ep_put_zcopy(
            m_ep[0], &iov, 1, (uintptr_t)x.ptr, rkey, &comp.super);
        if (st == UCS_INPROGRESS) {
            st = wait_comp(comp);
        }
        bool child_x = check(x.ptr, len, 4, nullptr);
        _exit(10 + (child_x ? 1 : 0) + ((st == UCS_OK) ? 2 : 0));
    }
    ASSERT_GT(pid, 0);
    int rc          = wait_child(pid, 60);
    bool parent_x_4 = check(x.ptr, len, 4, nullptr);
    bool parent_x_1 = check(x.ptr, len, 1, nullptr);
    printf("%s: child's put through the parent's endpoint and handle: "
           "child exit %d (%s, child's X %s); parent's X %s\n",
           uct_ib_reg_method_name(method), rc,
           (rc >= 12) && (rc <= 13) ? "completed"
           : (rc >= 10)             ? "refused"
                                    : "crashed or hung",
           (rc == 11) || (rc == 13) ? "got the data" : "unchanged",
           parent_x_4   ? "got the data"
           : parent_x_1 ? "unchanged"
                        : "changed otherwise");
    EXPECT_EQ(10, rc) << "expected: the post refused, the child's X "
                         "unchanged";
    EXPECT_TRUE(parent_x_1) << "the parent's X changed";
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

/* rxe ODP and the shared zero page: pages of private anonymous memory that
 * were only read map the kernel's zero page (read-only, shared by every
 * process).  Registered with ODP and then written by the NIC: does the
 * write go into the zero page (defect 2 of docs/internals-odp.md)?  If so,
 * the test writes zeros back the same way at once, then reports.  A
 * fresh page read after the write is the oracle. */
TEST_F(uct_odp_rxe, zero_page_write)
{
    if (md_attr().reg_method != UCT_IB_REG_METHOD_ODP) {
        GTEST_SKIP() << "needs UCX_IB_REG_METHODS=odp (50-odp.sh)";
    }
    const size_t len = 4096;
    mapping x(len), peer(len), fresh(len);
    volatile uint8_t *vx = static_cast<volatile uint8_t *>(x.ptr);
    volatile uint8_t *vf = static_cast<volatile uint8_t *>(fresh.ptr);
    ASSERT_EQ(0, vx[0]); /* read only: the zero page */
    uct_ib_mem_t *xm = reg(x.ptr, len);
    uct_ib_mem_t *pm = reg(peer.ptr, len);
    ASSERT_TRUE((xm != nullptr) && (pm != nullptr));
    memset(peer.ptr, 0x5a, len);
    ASSERT_EQ(UCS_OK, put(m_ep[0], peer.ptr, len, pm, x.ptr, xm));
    uint8_t in_x = vx[100], in_fresh = vf[100];
    memset(peer.ptr, 0, len);
    ASSERT_EQ(UCS_OK, put(m_ep[0], peer.ptr, len, pm, x.ptr, xm));
    uint8_t after = vf[200];
    printf("odp put into a read-only zero-page mapping: X reads 0x%02x, an "
           "untouched page elsewhere reads 0x%02x%s (after zeros written "
           "back: 0x%02x)\n",
           in_x, in_fresh,
           (in_fresh == 0x5a) ? ": the NIC wrote the kernel's zero page" : "",
           after);
    const char *bug = getenv("UCT_TEST_ODP_ZERO_PAGE_BUG");
    if ((bug != nullptr) && (strcmp(bug, "expected") == 0)) {
        EXPECT_EQ(0x5a, in_fresh) << "rxe ODP no longer writes the zero page";
    } else {
        EXPECT_EQ(0, in_fresh) << "the NIC wrote the kernel's zero page";
        EXPECT_EQ(0x5a, in_x);
    }
    EXPECT_EQ(0, after);
    dereg(pm);
    dereg(xm);
}
