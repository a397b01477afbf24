/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Fixtures of gtest_uct: an md on the verbs device of the test machine
 * (RXE_VM_DEV, else the first active port; the tests skip when there is no
 * verbs device), an RC interface with two endpoints connected to each other
 * (loopback through the device), registered test buffers, bounded waits.
 */
#ifndef TEST_UCT_FIXTURE_H_
#define TEST_UCT_FIXTURE_H_

#include <uct/ib/uct_ib.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace uct_test
{

static const double wait_timeout_s = 30.0;

/* "" if a verbs device is present, else why not. */
std::string no_device_reason();
/* Device spec for uct_ib_md_open (RXE_VM_DEV:1 or NULL). */
const char *dev_spec();

/* Set an environment variable for the scope, restoring it afterwards. */
class scoped_env
{
  public:
    scoped_env(const char *name, const char *value);
    ~scoped_env();

  private:
    std::string m_name, m_old;
    bool m_had;
};

/* Completion that records its callback. */
struct test_comp {
    uct_completion_t super;
    int calls;
    explicit test_comp(int count = 1);
    static void cb(uct_completion_t *self);
};

/* Fill buf with a pattern derived from seed; check it. */
void fill(void *buf, size_t len, uint32_t seed);
bool check(const void *buf, size_t len, uint32_t seed, std::string *why);

/* Run cmd's output through a child process: this test binary run with
 * --gtest_filter=filter and extra environment; returns the exit status
 * (-1 on timeout) and stores stdout+stderr. */
int run_self(const std::string &filter, const std::vector<std::string> &env,
             std::string *output, double timeout_s = 120);

class md_test : public ::testing::Test
{
  protected:
    uct_ib_md_t *m_md = nullptr;
    void SetUp() override;
    void TearDown() override;
    uct_ib_mem_t *reg(void *addr, size_t len,
                      unsigned access = UCT_IB_MEM_ACCESS_ALL);
    void dereg(uct_ib_mem_t *memh);
    /* uct_ib_md_query of m_md (zeroes, and a failure, if it fails) */
    uct_ib_md_attr_t md_attr();
};

class rc_test : public md_test
{
  protected:
    uct_rc_iface_t *m_iface = nullptr;
    uct_rc_ep_t *m_ep[2]    = {nullptr, nullptr};
    uct_rc_iface_attr_t m_attr;

    void SetUp() override;
    void TearDown() override;
    virtual uct_rc_iface_params_t iface_params();

    void connect_pair(uct_rc_ep_t **a, uct_rc_ep_t **b);
    /* progress until pred() or the timeout; false on timeout */
    bool wait(const std::function<bool()> &pred,
              double timeout_s = wait_timeout_s);
    /* wait for comp (count reaching 0); its status */
    ucs_status_t wait_comp(test_comp &comp);
    /* run op until it is not NO_RESOURCE (progressing meanwhile) */
    ucs_status_t post_retry(const std::function<ucs_status_t()> &op);
    /* op(a completion) retried while NO_RESOURCE, then waited for; the
     * completion's status (or op's, if it did not return INPROGRESS) */
    ucs_status_t
    post_wait(const std::function<ucs_status_t(uct_completion_t *)> &op);
    /* put/get/flush and wait for completion, retrying on NO_RESOURCE */
    ucs_status_t put(uct_rc_ep_t *ep, void *src, size_t len,
                     uct_ib_mem_t *src_memh, void *dst, uct_ib_mem_t *dst_memh);
    ucs_status_t get(uct_rc_ep_t *ep, void *dst, size_t len,
                     uct_ib_mem_t *dst_memh, void *src, uct_ib_mem_t *src_memh);
    uct_rkey_t rkey_of(uct_ib_mem_t *memh);
    /* put (is_get false) or get of len bytes between local and remote */
    ucs_status_t rma(bool is_get, uct_rc_ep_t *ep, void *local, size_t len,
                     uct_ib_mem_t *local_memh, void *remote,
                     uct_ib_mem_t *remote_memh);
    ucs_status_t flush(uct_rc_ep_t *ep);
};

/* mmap'ed anonymous buffer. */
struct mapping {
    void *ptr  = nullptr;
    size_t len = 0;
    mapping(size_t len, int prot = 3 /* PROT_READ|PROT_WRITE */);
    ~mapping();
    mapping(const mapping &)            = delete;
    mapping &operator=(const mapping &) = delete;
};

} // namespace uct_test

#endif
