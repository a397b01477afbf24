/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Fixtures of gtest_uct (see uct_fixture.h).
 */
#include "uct_fixture.h"

#include <infiniband/verbs.h>

#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

namespace uct_test
{

static double now_s()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

std::string no_device_reason()
{
    static int cached = -1;
    if (cached < 0) {
        int num                  = 0;
        struct ibv_device **list = ibv_get_device_list(&num);
        if (list != nullptr) {
            ibv_free_device_list(list);
        }
        cached = num;
    }
    return (cached > 0)
               ? ""
               : "no verbs device on this machine: these tests run inside the "
                 "soft-RoCE VM (contrib/run-vm-tests.sh BUILD_DIR '1*')";
}

const char *dev_spec()
{
    static std::string spec;
    const char *dev = getenv("RXE_VM_DEV");
    if (dev == nullptr) {
        return nullptr;
    }
    spec = std::string(dev) + ":1";
    return spec.c_str();
}

scoped_env::scoped_env(const char *name, const char *value) : m_name(name)
{
    const char *old = getenv(name);
    m_had           = old != nullptr;
    if (m_had) {
        m_old = old;
    }
    if (value != nullptr) {
        setenv(name, value, 1);
    } else {
        unsetenv(name);
    }
}

scoped_env::~scoped_env()
{
    if (m_had) {
        setenv(m_name.c_str(), m_old.c_str(), 1);
    } else {
        unsetenv(m_name.c_str());
    }
}

test_comp::test_comp(int count) : calls(0)
{
    super.func   = cb;
    super.count  = count;
    super.status = UCS_OK;
}

void test_comp::cb(uct_completion_t *self)
{
    reinterpret_cast<test_comp *>(self)->calls++;
}

static uint8_t pattern_byte(size_t i, uint32_t seed)
{
    uint32_t x = (uint32_t)i * 2654435761u + seed * 40503u + (seed >> 3);
    return (uint8_t)(x ^ (x >> 13) ^ (x >> 24));
}

void fill(void *buf, size_t len, uint32_t seed)
{
    uint8_t *p = static_cast<uint8_t *>(buf);
    for (size_t i = 0; i < len; ++i) {
        p[i] = pattern_byte(i, seed);
    }
}

bool check(const void *buf, size_t len, uint32_t seed, std::string *why)
{
    const uint8_t *p = static_cast<const uint8_t *>(buf);
    for (size_t i = 0; i < len; ++i) {
        if (p[i] != pattern_byte(i, seed)) {
            if (why != nullptr) {
                char msg[128];
                snprintf(msg, sizeof(msg),
                         "byte %zu is 0x%02x, expected "
                         "0x%02x (pattern %u)",
                         i, p[i], pattern_byte(i, seed), seed);
                *why = msg;
            }
            return false;
        }
    }
    return true;
}

int run_self(const std::string &filter, const std::vector<std::string> &env,
             std::string *output, double timeout_s)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        for (const auto &e : env) {
            putenv(strdup(e.c_str()));
        }
        std::string arg = "--gtest_filter=" + filter;
        execl("/proc/self/exe", "gtest_uct", arg.c_str(), (char *)nullptr);
        _exit(127);
    }
    close(fds[1]);
    output->clear();
    double deadline = now_s() + timeout_s;
    char buf[4096];
    for (;;) {
        struct pollfd pfd = {fds[0], POLLIN, 0};
        int left          = (int)((deadline - now_s()) * 1000);
        if ((left <= 0) || (poll(&pfd, 1, left) <= 0)) {
            kill(pid, SIGKILL);
            waitpid(pid, nullptr, 0);
            close(fds[0]);
            return -1;
        }
        ssize_t n = read(fds[0], buf, sizeof(buf));
        if (n <= 0) {
            break;
        }
        output->append(buf, n);
    }
    close(fds[0]);
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void md_test::SetUp()
{
    std::string why = no_device_reason();
    if (!why.empty()) {
        GTEST_SKIP() << why;
    }
    ASSERT_EQ(UCS_OK, uct_ib_md_open(dev_spec(), &m_md));
}

void md_test::TearDown()
{
    uct_ib_md_close(m_md);
    m_md = nullptr;
}

uct_ib_mem_t *md_test::reg(void *addr, size_t len, unsigned access)
{
    uct_ib_mem_t *memh = nullptr;
    EXPECT_EQ(UCS_OK, uct_ib_md_mem_reg(m_md, addr, len, access, &memh));
    return memh;
}

uct_ib_md_attr_t md_test::md_attr()
{
    uct_ib_md_attr_t attr = {};
    EXPECT_EQ(UCS_OK, uct_ib_md_query(m_md, &attr));
    return attr;
}

void md_test::dereg(uct_ib_mem_t *memh)
{
    if (memh != nullptr) {
        EXPECT_EQ(UCS_OK, uct_ib_md_mem_dereg(m_md, memh));
    }
}

uct_rc_iface_params_t rc_test::iface_params()
{
    uct_rc_iface_params_t params = {};
    params.tx_queue_len          = 32;
    params.rx_queue_len          = 32;
    params.seg_size              = 8192 + 64;
    return params;
}

void rc_test::SetUp()
{
    md_test::SetUp();
    if (IsSkipped() || HasFatalFailure()) {
        return;
    }
    uct_rc_iface_params_t params = iface_params();
    ASSERT_EQ(UCS_OK, uct_rc_iface_open(m_md, &params, &m_iface));
    ASSERT_EQ(UCS_OK, uct_rc_iface_query(m_iface, &m_attr));
    connect_pair(&m_ep[0], &m_ep[1]);
}

void rc_test::connect_pair(uct_rc_ep_t **a, uct_rc_ep_t **b)
{
    uint8_t addr_a[UCT_RC_EP_ADDR_SIZE], addr_b[UCT_RC_EP_ADDR_SIZE];
    ASSERT_EQ(UCS_OK, uct_rc_ep_create(m_iface, a));
    ASSERT_EQ(UCS_OK, uct_rc_ep_create(m_iface, b));
    ASSERT_EQ(UCS_OK, uct_rc_ep_get_address(*a, addr_a));
    ASSERT_EQ(UCS_OK, uct_rc_ep_get_address(*b, addr_b));
    ASSERT_EQ(UCS_OK, uct_rc_ep_connect_to_ep(*a, addr_b));
    ASSERT_EQ(UCS_OK, uct_rc_ep_connect_to_ep(*b, addr_a));
}

void rc_test::TearDown()
{
    for (auto &ep : m_ep) {
        uct_rc_ep_destroy(ep);
        ep = nullptr;
    }
    uct_rc_iface_close(m_iface);
    m_iface = nullptr;
    md_test::TearDown();
}

bool rc_test::wait(const std::function<bool()> &pred, double timeout_s)
{
    double deadline = now_s() + timeout_s;
    while (!pred()) {
        if (uct_rc_iface_progress(m_iface) == 0) {
            if (now_s() > deadline) {
                return false;
            }
            sched_yield();
        }
    }
    return true;
}

ucs_status_t rc_test::wait_comp(test_comp &comp)
{
    bool done = wait([&]() { return comp.super.count == 0; });
    EXPECT_TRUE(done) << "operation did not complete in " << wait_timeout_s
                      << " s";
    if (!done) {
        return UCS_ERR_TIMED_OUT;
    }
    EXPECT_EQ(1, comp.calls);
    return comp.super.status;
}

uct_rkey_t rc_test::rkey_of(uct_ib_mem_t *memh)
{
    uint8_t packed[UCT_IB_RKEY_PACKED_SIZE];
    uct_rkey_t rkey = 0;
    EXPECT_EQ(UCS_OK, uct_ib_md_rkey_pack(m_md, memh, packed));
    EXPECT_EQ(UCS_OK, uct_ib_rkey_unpack(packed, &rkey));
    return rkey;
}

ucs_status_t rc_test::post_retry(const std::function<ucs_status_t()> &op)
{
    ucs_status_t status = UCS_ERR_NO_RESOURCE;
    wait([&]() {
        status = op();
        return status != UCS_ERR_NO_RESOURCE;
    });
    return status;
}

ucs_status_t
rc_test::post_wait(const std::function<ucs_status_t(uct_completion_t *)> &op)
{
    test_comp comp;
    ucs_status_t status = post_retry([&]() { return op(&comp.super); });
    if (status != UCS_INPROGRESS) {
        return status;
    }
    return wait_comp(comp);
}

/* put_zcopy and get_zcopy take the same arguments */
typedef ucs_status_t (*rma_func_t)(uct_rc_ep_t *, const uct_iov_t *, size_t,
                                   uint64_t, uct_rkey_t, uct_completion_t *);

ucs_status_t rc_test::rma(bool is_get, uct_rc_ep_t *ep, void *local, size_t len,
                          uct_ib_mem_t *local_memh, void *remote,
                          uct_ib_mem_t *remote_memh)
{
    rma_func_t func = is_get ? uct_rc_ep_get_zcopy : uct_rc_ep_put_zcopy;
    uct_iov_t iov   = {local, len, local_memh};
    uct_rkey_t rkey = rkey_of(remote_memh);
    return post_wait([&](uct_completion_t *comp) {
        return func(ep, &iov, 1, (uintptr_t)remote, rkey, comp);
    });
}

ucs_status_t rc_test::put(uct_rc_ep_t *ep, void *src, size_t len,
                          uct_ib_mem_t *src_memh, void *dst,
                          uct_ib_mem_t *dst_memh)
{
    return rma(false, ep, src, len, src_memh, dst, dst_memh);
}

ucs_status_t rc_test::get(uct_rc_ep_t *ep, void *dst, size_t len,
                          uct_ib_mem_t *dst_memh, void *src,
                          uct_ib_mem_t *src_memh)
{
    return rma(true, ep, dst, len, dst_memh, src, src_memh);
}

ucs_status_t rc_test::flush(uct_rc_ep_t *ep)
{
    return post_wait(
        [&](uct_completion_t *comp) { return uct_rc_ep_flush(ep, comp); });
}

mapping::mapping(size_t l, int prot) : len(l)
{
    void *p = mmap(nullptr, len, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ptr     = (p == MAP_FAILED) ? nullptr : p;
}

mapping::~mapping()
{
    if (ptr != nullptr) {
        munmap(ptr, len);
    }
}

} // namespace uct_test
