/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Memory domain: query, keys, bad input, registration method fallback,
 * clear errors (mapping protection, RLIMIT_MEMLOCK, missing device).
 */
#include "uct_fixture.h"

#include <infiniband/verbs.h>

#include <cstring>
#include <linux/capability.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace uct_test;

class uct_md : public md_test
{
};

TEST_F(uct_md, query_reports_port_gid_and_method)
{
    uct_ib_md_attr_t attr = md_attr();
    EXPECT_NE('\0', attr.dev_name[0]);
    EXPECT_GE(attr.port_num, 1u);
    EXPECT_GE(attr.active_mtu, 256u);
    EXPECT_EQ((size_t)UCT_IB_RKEY_PACKED_SIZE, attr.rkey_packed_size);
    EXPECT_GT(attr.max_mr_size, 0u);
    EXPECT_GE(attr.reg_mt_threads, 1u);
    if (const char *dev = getenv("RXE_VM_DEV")) {
        EXPECT_STREQ(dev, attr.dev_name);
        EXPECT_TRUE(attr.is_roce);
        /* the RoCE v2 entry with an IPv4-mapped address, as the VM's own
         * discovery found it */
        static const uint8_t v4prefix[12] = {0, 0, 0, 0, 0,    0,
                                             0, 0, 0, 0, 0xff, 0xff};
        EXPECT_EQ(0, memcmp(attr.gid, v4prefix, sizeof(v4prefix)));
        if (const char *idx = getenv("RXE_VM_GID_INDEX")) {
            EXPECT_EQ((unsigned)atoi(idx), attr.gid_index);
        }
        /* rxe has ODP from Linux 6.15 on (6.1: none); what the md makes
         * of the caps is checked by uct_odp_caps.detected */
        EXPECT_EQ(attr.odp_supported, attr.odp_explicit)
            << "rxe's ODP covers RC send, recv, write and read";
    }
    /* default UCX_IB_REG_METHODS starts with rcache, available here */
    EXPECT_EQ(UCT_IB_REG_METHOD_RCACHE, attr.reg_method);
    /* kernels >= 5.13 copy pinned pages on fork */
    EXPECT_NE(UCT_IB_FORK_DISABLED, attr.fork_state);
}

TEST_F(uct_md, rkey_pack_unpack_round_trip)
{
    mapping buf(65536);
    uct_ib_mem_t *memh = reg(buf.ptr, buf.len);
    ASSERT_NE(nullptr, memh);
    uint8_t packed[UCT_IB_RKEY_PACKED_SIZE];
    uct_rkey_t rkey;
    ASSERT_EQ(UCS_OK, uct_ib_md_rkey_pack(m_md, memh, packed));
    ASSERT_EQ(UCS_OK, uct_ib_rkey_unpack(packed, &rkey));
    EXPECT_EQ(uct_ib_mem_rkey(memh), rkey);

    uint8_t garbage[UCT_IB_RKEY_PACKED_SIZE] = {1, 2, 3, 4, 5, 6, 7, 8};
    rkey                                     = 42;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_ib_rkey_unpack(garbage, &rkey));
    EXPECT_EQ(42u, rkey) << "output written on failure";
    dereg(memh);
}

TEST_F(uct_md, cached_registration_is_reused_and_covers_request)
{
    mapping buf(1 << 20);
    uint8_t *p       = static_cast<uint8_t *>(buf.ptr);
    uct_ib_mem_t *m1 = reg(p + 100, 5000);
    uct_ib_mem_t *m2 = reg(p + 200, 100);
    ASSERT_NE(nullptr, m1);
    ASSERT_NE(nullptr, m2);
    EXPECT_EQ(m1, m2) << "a sub-range of a cached region is a cache hit";
    EXPECT_EQ(UCT_IB_REG_METHOD_RCACHE, uct_ib_mem_method(m1));
    void *addr;
    size_t len;
    uct_ib_mem_range(m1, &addr, &len);
    EXPECT_LE((uintptr_t)addr, (uintptr_t)(p + 100));
    EXPECT_GE((uintptr_t)addr + len, (uintptr_t)(p + 5100));
    dereg(m2);
    dereg(m1);
}

TEST_F(uct_md, bad_input_is_refused)
{
    mapping buf(4096);
    uct_ib_mem_t *memh = reinterpret_cast<uct_ib_mem_t *>(0x1);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_ib_md_mem_reg(nullptr, buf.ptr, 4096, 0, &memh));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_ib_md_mem_reg(m_md, nullptr, 4096, 0, &memh));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_ib_md_mem_reg(m_md, buf.ptr, 0, 0, &memh));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_ib_md_mem_reg(m_md, buf.ptr, SIZE_MAX - 10, 0, &memh));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_ib_md_mem_reg(m_md, buf.ptr, 4096, 0x100, &memh));
    EXPECT_EQ(reinterpret_cast<uct_ib_mem_t *>(0x1), memh);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_ib_md_mem_dereg(m_md, nullptr));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_ib_md_query(m_md, nullptr));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_ib_md_open(nullptr, nullptr));

    /* an unmapped range */
    void *hole =
        mmap(nullptr, 8192, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(MAP_FAILED, hole);
    munmap(hole, 8192);
    EXPECT_EQ(
        UCS_ERR_INVALID_ADDR,
        uct_ib_md_mem_reg(m_md, hole, 8192, UCT_IB_MEM_ACCESS_ALL, &memh));
}

TEST_F(uct_md, missing_device_and_malformed_spec)
{
    uct_ib_md_t *md = nullptr;
    EXPECT_EQ(UCS_ERR_NO_DEVICE, uct_ib_md_open("nosuchdev0:1", &md));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_ib_md_open("rxe0:x", &md));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_ib_md_open(":1", &md));
    uct_ib_md_attr_t attr = md_attr();
    std::string bad_port  = std::string(attr.dev_name) + ":9";
    EXPECT_EQ(UCS_ERR_NO_DEVICE, uct_ib_md_open(bad_port.c_str(), &md));
    {
        scoped_env env("UCX_NET_DEVICES", "nosuchdev0:1");
        EXPECT_EQ(UCS_ERR_NO_DEVICE, uct_ib_md_open(nullptr, &md));
    }
    {
        std::string spec = "nosuchdev0:1," + std::string(attr.dev_name) + ":" +
                           std::to_string(attr.port_num);
        scoped_env env("UCX_NET_DEVICES", spec.c_str());
        ASSERT_EQ(UCS_OK, uct_ib_md_open(nullptr, &md)) << "second entry";
        uct_ib_md_close(md);
    }
}

TEST_F(uct_md, malformed_config_values_fail_open)
{
    uct_ib_md_t *md        = nullptr;
    const char *cases[][2] = {
        {"UCX_IB_REG_METHODS", "rcache,foo"},
        {"UCX_IB_REG_METHODS", "direct,direct"},
        {"UCX_IB_REG_METHODS", ""},
        {"UCX_IB_FORK_INIT", "maybe"},
        {"UCX_IB_REG_MT_THRESH", "12q"},
        {"UCX_IB_GID_INDEX", "-1"},
    };
    for (auto &c : cases) {
        scoped_env env(c[0], c[1]);
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_ib_md_open(dev_spec(), &md))
            << c[0] << "=" << c[1];
    }
    /* UCX_RC_*: checked when an interface opens */
    const char *rc_cases[][2] = {
        {"UCX_RC_TIMEOUT", "40"},
        {"UCX_RC_RETRY_COUNT", "8"},
        {"UCX_RC_TX_QUEUE_LEN", "abc"},
    };
    for (auto &c : rc_cases) {
        scoped_env env(c[0], c[1]);
        uct_rc_iface_t *iface = nullptr;
        EXPECT_EQ(UCS_ERR_INVALID_PARAM,
                  uct_rc_iface_open(m_md, nullptr, &iface))
            << c[0] << "=" << c[1];
    }
}

TEST_F(uct_md, odp_unavailable_falls_back_to_direct)
{
    scoped_env env("UCX_IB_REG_METHODS", "odp,direct");
    uct_ib_md_t *md = nullptr;
    ASSERT_EQ(UCS_OK, uct_ib_md_open(dev_spec(), &md));
    uct_ib_md_attr_t attr;
    ASSERT_EQ(UCS_OK, uct_ib_md_query(md, &attr));
    EXPECT_EQ(attr.odp_supported ? UCT_IB_REG_METHOD_ODP
                                 : UCT_IB_REG_METHOD_DIRECT,
              attr.reg_method);
    mapping buf(65536);
    uct_ib_mem_t *memh = nullptr;
    ASSERT_EQ(UCS_OK, uct_ib_md_mem_reg(md, buf.ptr, buf.len,
                                        UCT_IB_MEM_ACCESS_ALL, &memh));
    EXPECT_EQ(attr.reg_method, uct_ib_mem_method(memh));
    EXPECT_EQ(UCS_OK, uct_ib_md_mem_dereg(md, memh));
    uct_ib_md_close(md);

    /* odp alone cannot fall back: a clear error */
    scoped_env env2("UCX_IB_REG_METHODS", "odp");
    if (!attr.odp_supported) {
        EXPECT_EQ(UCS_ERR_UNSUPPORTED, uct_ib_md_open(dev_spec(), &md));
    }
}

/* Run in a child with UCX_MEM_EVENTS=no (libucm reads it at start). */
TEST(uct_md_child, rcache_without_events)
{
    if (getenv("UCT_TEST_CHILD") == nullptr) {
        GTEST_SKIP() << "run by uct_md.rcache_without_events_falls_back";
    }
    uct_ib_md_t *md = nullptr;
    ASSERT_EQ(UCS_OK, uct_ib_md_open(dev_spec(), &md));
    uct_ib_md_attr_t attr;
    ASSERT_EQ(UCS_OK, uct_ib_md_query(md, &attr));
    /* odp needs no events: it is next where the device has it, unless its
     * ODP is known to corrupt data and the list is the default one */
    bool odp =
        attr.odp_supported &&
        ((getenv("UCX_IB_REG_METHODS") != nullptr) || !attr.odp_known_broken);
    uct_ib_reg_method_t want =
        odp ? UCT_IB_REG_METHOD_ODP : UCT_IB_REG_METHOD_DIRECT;
    EXPECT_EQ(want, attr.reg_method);
    mapping buf(65536);
    uct_ib_mem_t *memh = nullptr;
    ASSERT_EQ(UCS_OK, uct_ib_md_mem_reg(md, buf.ptr, buf.len,
                                        UCT_IB_MEM_ACCESS_ALL, &memh));
    EXPECT_EQ(want, uct_ib_mem_method(memh));
    EXPECT_EQ(UCS_OK, uct_ib_md_mem_dereg(md, memh));
    uct_ib_md_close(md);
}

TEST_F(uct_md, rcache_without_events_falls_back)
{
    std::string out;
    int rc = run_self("uct_md_child.rcache_without_events",
                      {"UCT_TEST_CHILD=1", "UCX_MEM_EVENTS=no",
                       "UCX_IB_REG_METHODS=rcache,odp,direct"},
                      &out);
    EXPECT_EQ(0, rc) << out;
    EXPECT_NE(std::string::npos, out.find("[  PASSED  ] 1 test")) << out;
    /* one clear line per method skipped */
    EXPECT_NE(std::string::npos,
              out.find("'rcache' unavailable (memory events are disabled"))
        << out;
    if (!md_attr().odp_supported) {
        EXPECT_NE(std::string::npos, out.find("'odp' unavailable")) << out;
    }
}

/* Soft-RoCE's ODP corrupts data (docs/internals-odp.md): the default
 * method list must not pick it, even with events off. */
TEST_F(uct_md, default_methods_skip_broken_odp)
{
    uct_ib_md_attr_t attr = md_attr();
    if (!attr.odp_supported || !attr.odp_known_broken) {
        GTEST_SKIP() << "the device has no ODP, or an ODP not known to be "
                        "broken (soft-RoCE on Linux >= 6.16 has a broken one)";
    }
    std::string out;
    /* "NAME" alone: putenv removes it, so the default list applies */
    int rc = run_self(
        "uct_md_child.rcache_without_events",
        {"UCT_TEST_CHILD=1", "UCX_MEM_EVENTS=no", "UCX_IB_REG_METHODS"}, &out);
    EXPECT_EQ(0, rc) << out;
    EXPECT_NE(std::string::npos, out.find("[  PASSED  ] 1 test")) << out;
    EXPECT_NE(std::string::npos,
              out.find("'odp' unavailable (soft-RoCE's on-demand paging "
                       "corrupts data"))
        << out;
}

class uct_md_direct : public md_test
{
    scoped_env m_env{"UCX_IB_REG_METHODS", "direct"};
};

static void readonly_remote_write(uct_ib_md_t *md)
{
    mapping ro(65536, PROT_READ);
    ASSERT_NE(nullptr, ro.ptr);
    uct_ib_mem_t *memh = nullptr;
    EXPECT_EQ(UCS_ERR_INVALID_ADDR,
              uct_ib_md_mem_reg(md, ro.ptr, ro.len,
                                UCT_IB_MEM_ACCESS_REMOTE_WRITE, &memh));
    EXPECT_EQ(nullptr, memh);
    /* reading it remotely is what the mapping allows */
    ASSERT_EQ(UCS_OK, uct_ib_md_mem_reg(md, ro.ptr, ro.len,
                                        UCT_IB_MEM_ACCESS_REMOTE_READ, &memh));
    EXPECT_EQ(UCS_OK, uct_ib_md_mem_dereg(md, memh));
}

TEST_F(uct_md, readonly_mapping_for_remote_write_is_refused)
{
    readonly_remote_write(m_md);
}

TEST_F(uct_md_direct, local_only_registration_has_no_rkey)
{
    /* (through the cache a region always carries every right its mapping
     * allows, so this is about direct registrations) */
    mapping buf(65536);
    uct_ib_mem_t *memh = reg(buf.ptr, buf.len, UCT_IB_MEM_ACCESS_LOCAL_WRITE);
    ASSERT_NE(nullptr, memh);
    EXPECT_EQ(UCT_IB_REG_METHOD_DIRECT, uct_ib_mem_method(memh));
    uint8_t packed[UCT_IB_RKEY_PACKED_SIZE];
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_ib_md_rkey_pack(m_md, memh, packed));
    dereg(memh);
}

TEST_F(uct_md_direct, readonly_mapping_for_remote_write_is_refused)
{
    uct_ib_md_attr_t attr = md_attr();
    ASSERT_EQ(UCT_IB_REG_METHOD_DIRECT, attr.reg_method);
    readonly_remote_write(m_md);
}

/* In a child without CAP_IPC_LOCK and with a 64 KiB RLIMIT_MEMLOCK. */
TEST_F(uct_md, memlock_limit_is_reported)
{
    int fds[2];
    ASSERT_EQ(0, pipe(fds));
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 2);
        struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
        struct __user_cap_data_struct data[2];
        int code = 0;
        if (syscall(SYS_capget, &hdr, data) != 0) {
            _exit(10);
        }
        data[0].effective &= ~(1u << CAP_IPC_LOCK);
        data[0].permitted &= ~(1u << CAP_IPC_LOCK);
        data[0].inheritable &= ~(1u << CAP_IPC_LOCK);
        if (syscall(SYS_capset, &hdr, data) != 0) {
            _exit(11);
        }
        struct rlimit rl = {65536, 65536};
        if (setrlimit(RLIMIT_MEMLOCK, &rl) != 0) {
            _exit(12);
        }
        const char *methods[] = {"direct", "rcache"};
        for (int i = 0; i < 2; ++i) {
            setenv("UCX_IB_REG_METHODS", methods[i], 1);
            uct_ib_md_t *md = nullptr;
            if (uct_ib_md_open(dev_spec(), &md) != UCS_OK) {
                _exit(13);
            }
            void *p            = mmap(nullptr, 4 << 20, PROT_READ | PROT_WRITE,
                                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            uct_ib_mem_t *memh = nullptr;
            ucs_status_t st =
                uct_ib_md_mem_reg(md, p, 4 << 20, UCT_IB_MEM_ACCESS_ALL, &memh);
            if (st != UCS_ERR_EXCEEDS_LIMIT) {
                code |= 1 << (i + 1);
            }
            uct_ib_md_close(md);
        }
        _exit(code);
    }
    close(fds[1]);
    std::string out;
    char buf[1024];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof(buf))) > 0) {
        out.append(buf, n);
    }
    close(fds[0]);
    int st;
    ASSERT_EQ(pid, waitpid(pid, &st, 0));
    ASSERT_TRUE(WIFEXITED(st));
    EXPECT_EQ(0, WEXITSTATUS(st)) << "bit 1: direct, bit 2: rcache did not "
                                     "return UCS_ERR_EXCEEDS_LIMIT\n"
                                  << out;
    EXPECT_NE(std::string::npos, out.find("RLIMIT_MEMLOCK is 64 KiB")) << out;
}

/* Another verbs user of the process (its own context, PD and MR, opened
 * first) keeps working while our md opens with UCX_IB_FORK_INIT=yes,
 * registers, and closes. */
TEST_F(uct_md, another_verbs_user_is_not_disturbed)
{
    uct_ib_md_attr_t attr    = md_attr();
    int num                  = 0;
    struct ibv_device **list = ibv_get_device_list(&num);
    ASSERT_NE(nullptr, list);
    struct ibv_context *ctx = nullptr;
    for (int i = 0; i < num; ++i) {
        if (!strcmp(ibv_get_device_name(list[i]), attr.dev_name)) {
            ctx = ibv_open_device(list[i]);
        }
    }
    ibv_free_device_list(list);
    ASSERT_NE(nullptr, ctx);
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    ASSERT_NE(nullptr, pd);
    mapping theirs(65536), ours(65536);
    struct ibv_mr *mr =
        ibv_reg_mr(pd, theirs.ptr, theirs.len, IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(nullptr, mr);

    {
        scoped_env fork_env("UCX_IB_FORK_INIT", "yes");
        uct_ib_md_t *md = nullptr;
        ucs_status_t st = uct_ib_md_open(dev_spec(), &md);
        if (attr.fork_state == UCT_IB_FORK_DISABLED) {
            /* too late for ibv_fork_init(): only our md refuses */
            EXPECT_EQ(UCS_ERR_INVALID_PARAM, st);
        } else {
            ASSERT_EQ(UCS_OK, st);
            uct_ib_mem_t *memh = nullptr;
            ASSERT_EQ(UCS_OK, uct_ib_md_mem_reg(md, ours.ptr, ours.len,
                                                UCT_IB_MEM_ACCESS_ALL, &memh));
            EXPECT_NE(mr->lkey, uct_ib_mem_lkey(memh));
            EXPECT_EQ(UCS_OK, uct_ib_md_mem_dereg(md, memh));
            uct_ib_md_close(md);
        }
    }
    /* their objects are intact: a second registration in their PD works
     * and everything tears down cleanly */
    struct ibv_mr *mr2 =
        ibv_reg_mr(pd, ours.ptr, ours.len, IBV_ACCESS_LOCAL_WRITE);
    EXPECT_NE(nullptr, mr2);
    if (mr2 != nullptr) {
        EXPECT_EQ(0, ibv_dereg_mr(mr2));
    }
    EXPECT_EQ(0, ibv_dereg_mr(mr));
    EXPECT_EQ(0, ibv_dealloc_pd(pd));
    EXPECT_EQ(0, ibv_close_device(ctx));
}
