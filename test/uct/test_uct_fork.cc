/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Registrations across fork(): the parent keeps using its cached
 * registration after fork and after writing to the buffer (the kernel
 * copies pinned pages for the child, so the parent's pages, and the NIC's
 * view of them, stay the same: checked through the data the NIC writes and
 * through the page frames); the child opens its own md and runs the
 * remap-at-same-address oracle on memory it inherited.
 */
#include "uct_fixture.h"

#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace uct_test;

namespace
{

const size_t buf_size = 64 * 1024;

/* Page frame of the page holding addr (0: not present / not readable). */
uint64_t pfn_of(void *addr)
{
    int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    uint64_t entry = 0;
    ssize_t n      = pread(fd, &entry, sizeof(entry),
                           ((uintptr_t)addr / 4096) * sizeof(entry));
    close(fd);
    if ((n != sizeof(entry)) || !(entry & (1ull << 63))) {
        return 0;
    }
    return entry & ((1ull << 55) - 1);
}

/* A self-contained loopback (md, iface, two eps) for the child process,
 * without gtest: returns 0 or a failure code. */
int child_oracle(void *x)
{
    uct_ib_md_t *md;
    uct_rc_iface_t *iface;
    uct_rc_ep_t *a, *b;
    uint8_t addr_a[UCT_RC_EP_ADDR_SIZE], addr_b[UCT_RC_EP_ADDR_SIZE];
    uint8_t packed[UCT_IB_RKEY_PACKED_SIZE];

    if (!check(x, buf_size, 1, nullptr)) {
        return 20; /* the inherited copy lost the pre-fork data */
    }
    if ((uct_ib_md_open(dev_spec(), &md) != UCS_OK) ||
        (uct_rc_iface_open(md, nullptr, &iface) != UCS_OK) ||
        (uct_rc_ep_create(iface, &a) != UCS_OK) ||
        (uct_rc_ep_create(iface, &b) != UCS_OK) ||
        (uct_rc_ep_get_address(a, addr_a) != UCS_OK) ||
        (uct_rc_ep_get_address(b, addr_b) != UCS_OK) ||
        (uct_rc_ep_connect_to_ep(a, addr_b) != UCS_OK) ||
        (uct_rc_ep_connect_to_ep(b, addr_a) != UCS_OK)) {
        return 21;
    }
    void *src = mmap(nullptr, buf_size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uct_ib_mem_t *sm;
    if (uct_ib_md_mem_reg(md, src, buf_size, UCT_IB_MEM_ACCESS_ALL, &sm) !=
        UCS_OK) {
        return 22;
    }
    for (uint32_t round = 0; round < 2; ++round) {
        uint32_t seed = 30 + round;
        uct_ib_mem_t *xm;
        uct_rkey_t rkey;
        if (round == 1) {
            /* new anonymous memory at the same address */
            if (mmap(x, buf_size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != x) {
                return 23;
            }
        }
        if ((uct_ib_md_mem_reg(md, x, buf_size, UCT_IB_MEM_ACCESS_ALL, &xm) !=
             UCS_OK) ||
            (uct_ib_md_rkey_pack(md, xm, packed) != UCS_OK) ||
            (uct_ib_rkey_unpack(packed, &rkey) != UCS_OK)) {
            return 24;
        }
        fill(src, buf_size, seed);
        memset(x, 0, buf_size);
        uct_iov_t iov = {src, buf_size, sm};
        test_comp comp;
        if (uct_rc_ep_put_zcopy(a, &iov, 1, (uintptr_t)x, rkey, &comp.super) !=
            UCS_INPROGRESS) {
            return 25;
        }
        for (int spins = 0; comp.super.count != 0; ++spins) {
            if (uct_rc_iface_progress(iface) == 0) {
                if (spins > 30 * 1000 * 100) {
                    return 26; /* ~30 s */
                }
                usleep(10);
            }
        }
        if ((comp.super.status != UCS_OK) ||
            !check(x, buf_size, seed, nullptr)) {
            return 27 + round; /* 28: stale registration after remap */
        }
        uct_ib_md_mem_dereg(md, xm);
    }
    uct_ib_md_mem_dereg(md, sm);
    uct_rc_ep_destroy(a);
    uct_rc_ep_destroy(b);
    uct_rc_iface_close(iface);
    uct_ib_md_close(md);
    return 0;
}

} // namespace

class uct_fork : public rc_test
{
};

TEST_F(uct_fork, parent_and_child_keep_correct_registrations)
{
    uct_ib_md_attr_t attr = md_attr();
    if (attr.fork_state == UCT_IB_FORK_DISABLED) {
        GTEST_SKIP() << "no fork support (old kernel and "
                        "UCX_IB_FORK_INIT=no)";
    }
    mapping x(buf_size), src(buf_size);
    uct_ib_mem_t *xm = reg(x.ptr, buf_size), *sm = reg(src.ptr, buf_size);
    ASSERT_NE(nullptr, xm);
    fill(src.ptr, buf_size, 1);
    ASSERT_EQ(UCS_OK, put(m_ep[0], src.ptr, buf_size, sm, x.ptr, xm));
    ASSERT_TRUE(check(x.ptr, buf_size, 1, nullptr));
    dereg(xm);
    uint64_t pfn_before = pfn_of(x.ptr);

    fflush(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        _exit(child_oracle(x.ptr));
    }
    ASSERT_GT(pid, 0);

    /* parent: write the buffer (copy-on-write would give it new pages if
     * the kernel had not copied the pinned ones for the child), then move
     * new data into it through the cached registration */
    memset(x.ptr, 0xee, buf_size);
    uint64_t pfn_after = pfn_of(x.ptr);
    if ((pfn_before != 0) && (pfn_after != 0)) {
        EXPECT_EQ(pfn_before, pfn_after)
            << "the parent's registered page moved on fork";
    }
    xm = reg(x.ptr, buf_size);
    fill(src.ptr, buf_size, 2);
    ASSERT_EQ(UCS_OK, put(m_ep[0], src.ptr, buf_size, sm, x.ptr, xm));
    std::string why;
    EXPECT_TRUE(check(x.ptr, buf_size, 2, &why))
        << "the NIC wrote elsewhere than the parent's pages: " << why;
    /* and reading it back through the NIC sees the parent's pages too */
    mapping back(buf_size);
    uct_ib_mem_t *bm = reg(back.ptr, buf_size);
    memset(x.ptr, 0, buf_size);
    fill(x.ptr, 4096, 3);
    ASSERT_EQ(UCS_OK, get(m_ep[1], back.ptr, 4096, bm, x.ptr, xm));
    EXPECT_TRUE(check(back.ptr, 4096, 3, &why)) << why;
    dereg(bm);
    dereg(xm);
    dereg(sm);

    int st = 0;
    for (int i = 0; i < 1200; ++i) { /* 120 s */
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) {
            break;
        }
        if (i == 1199) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            FAIL() << "child did not finish in 120 s";
        }
        usleep(100000);
    }
    ASSERT_TRUE(WIFEXITED(st)) << "child killed by signal " << WTERMSIG(st);
    EXPECT_EQ(0, WEXITSTATUS(st))
        << "child: 20 lost pre-fork data, 21-26 setup/transfer failed, "
           "27 first transfer wrong, 28 stale registration after remap";
}
