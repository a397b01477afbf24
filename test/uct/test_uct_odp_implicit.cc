/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Implicit ODP of the odp method (UCX_IB_ODP_IMPLICIT=try|yes|no):
 *  - the default is no: one MR over the whole address space with remote
 *    read and write, whose rkey every handle carries, only when asked for
 *    (needs no device);
 *  - malformed values: UCS_ERR_INVALID_PARAM and exactly one log line
 *    (needs no device);
 *  - detection: one diag line saying whether the device reports implicit
 *    ODP (soft-RoCE: absent, and attr.odp_implicit == 0);
 *  - yes on a device without it: the md really attempts the implicit MR,
 *    the device refuses it, one warning with the errno, and the odp method
 *    falls back to explicit MRs (distinct keys per range) that move the
 *    right data through the NIC, read back;
 *  - try and no on such a device: no attempt, no line, explicit MRs;
 *  - the success path (one key for every range, and one warning naming
 *    the risk) where a device reports implicit ODP; none here does
 *    (soft-RoCE lacks it), so it skips.
 * The device cases run in a child (run_self): the log level and the method
 * list are read when libucs and the md start.  Transfers move whole pages
 * of page-aligned buffers: rxe's explicit ODP ignores offsets inside a page
 * (test_uct_odp.cc), and 50-odp.sh boots with a 4 KiB path MTU.
 */
#include "uct_fixture.h"

extern "C" { /* the md's configuration reader (an internal header) */
#include <uct/ib/uct_ib_int.h>
}

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>

using namespace uct_test;

namespace
{

const char *fallback_line = "implicit ODP MR (ibv_reg_mr of the whole "
                            "address space) failed: ";
const char *absent_line   = "implicit ODP absent on this device";
const char *reported_line = "implicit ODP reported";
const char *active_line   = "implicit ODP active (UCX_IB_ODP_IMPLICIT=";
const char *success_skip =
    "no device here reports IBV_ODP_SUPPORT_IMPLICIT (soft-RoCE lacks it): "
    "the implicit MR's success path cannot run here";

/* Lines of out containing what. */
std::vector<std::string> lines_with(const std::string &out, const char *what)
{
    std::vector<std::string> found;
    size_t pos = 0;
    while (pos < out.size()) {
        size_t end       = out.find('\n', pos);
        std::string line = out.substr(
            pos, (end == std::string::npos) ? std::string::npos : end - pos);
        if (line.find(what) != std::string::npos) {
            found.push_back(line);
        }
        if (end == std::string::npos) {
            break;
        }
        pos = end + 1;
    }
    return found;
}

/* Everything written to fd 2 while it lives (libucs logs with write(2)). */
class stderr_capture
{
  public:
    stderr_capture() : m_file(tmpfile()), m_saved(dup(2))
    {
        if ((m_file != nullptr) && (m_saved >= 0)) {
            dup2(fileno(m_file), 2);
        }
    }
    ~stderr_capture()
    {
        restore();
        if (m_file != nullptr) {
            fclose(m_file);
        }
    }
    std::string text()
    {
        restore();
        std::string s;
        char buf[1024];
        size_t n;
        if (m_file == nullptr) {
            return s;
        }
        rewind(m_file);
        while ((n = fread(buf, 1, sizeof(buf), m_file)) > 0) {
            s.append(buf, n);
        }
        return s;
    }

  private:
    void restore()
    {
        if (m_saved >= 0) {
            dup2(m_saved, 2);
            close(m_saved);
            m_saved = -1;
        }
    }
    FILE *m_file;
    int m_saved;
};

bool is_child()
{
    return getenv("UCT_TEST_CHILD") != nullptr;
}

} // namespace

/* No device needed: the parsed configuration is the oracle.  Unset means
 * no; each accepted value means what it says. */
TEST(uct_odp_implicit_config, default_is_no)
{
    uct_ib_md_config_t config;
    {
        scoped_env env("UCX_IB_ODP_IMPLICIT", nullptr);
        ASSERT_EQ(UCS_OK, uct_ib_md_config_read(&config));
        EXPECT_EQ(UCT_IB_ODP_IMPLICIT_CFG_NO, config.odp_implicit)
            << "implicit ODP opens all memory to a peer: never by default";
    }
    const std::pair<const char *, int> values[] = {
        {"yes", UCT_IB_ODP_IMPLICIT_CFG_YES},
        {"try", UCT_IB_ODP_IMPLICIT_CFG_TRY},
        {"no", UCT_IB_ODP_IMPLICIT_CFG_NO}};
    for (const auto &v : values) {
        scoped_env env("UCX_IB_ODP_IMPLICIT", v.first);
        ASSERT_EQ(UCS_OK, uct_ib_md_config_read(&config)) << v.first;
        EXPECT_EQ(v.second, config.odp_implicit) << v.first;
    }
}

/* No device needed: the value is parsed before any device is looked at. */
TEST(uct_odp_implicit_config, malformed_value_one_error_line)
{
    for (const char *bad : {"maybe", "on", "yes,no", "tryy"}) {
        scoped_env env("UCX_IB_ODP_IMPLICIT", bad);
        uct_ib_md_t *md = nullptr;
        ucs_status_t status;
        std::string out;
        {
            stderr_capture cap;
            status = uct_ib_md_open(dev_spec(), &md);
            out    = cap.text();
        }
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, status) << "value '" << bad << "'";
        std::string want =
            std::string("UCX_IB_ODP_IMPLICIT: invalid value '") + bad + "'";
        EXPECT_EQ(1u, lines_with(out, want.c_str()).size()) << out;
        EXPECT_EQ(1, std::count(out.begin(), out.end(), '\n'))
            << "exactly one line: " << out;
        EXPECT_NE(std::string::npos, out.find("try")) << out;
        if (status == UCS_OK) {
            uct_ib_md_close(md);
        }
    }
    /* the accepted ones, in any case, are not config errors */
    for (const char *good : {"try", "YES", "no"}) {
        scoped_env env("UCX_IB_ODP_IMPLICIT", good);
        uct_ib_md_t *md = nullptr;
        std::string out;
        ucs_status_t status;
        {
            stderr_capture cap;
            status = uct_ib_md_open(dev_spec(), &md);
            out    = cap.text();
        }
        EXPECT_NE(UCS_ERR_INVALID_PARAM, status) << good << ": " << out;
        EXPECT_EQ(std::string::npos, out.find("UCX_IB_ODP_IMPLICIT")) << out;
        if (status == UCS_OK) {
            uct_ib_md_close(md);
        }
    }
}

/* Child: open the md and print what it reports. */
TEST(uct_odp_implicit_child, open)
{
    if (!is_child()) {
        GTEST_SKIP() << "run by uct_odp_implicit.detection_is_one_line";
    }
    uct_ib_md_t *md = nullptr;
    ASSERT_EQ(UCS_OK, uct_ib_md_open(dev_spec(), &md));
    uct_ib_md_attr_t attr;
    ASSERT_EQ(UCS_OK, uct_ib_md_query(md, &attr));
    printf("child: odp_implicit %d used %d failed %d method %s\n",
           attr.odp_implicit, attr.odp_implicit_used, attr.odp_implicit_failed,
           uct_ib_reg_method_name(attr.reg_method));
    EXPECT_EQ(0, attr.odp_implicit_used) << "nothing registered yet";
    EXPECT_EQ(0, attr.odp_implicit_failed) << "nothing registered yet";
    uct_ib_md_close(md);
}

/* Child: with UCX_IB_REG_METHODS=odp, register three page-aligned ranges
 * (two apart in one mapping, and a peer buffer), check which MR kind the
 * md used against UCT_TEST_IMPLICIT_EXPECT (fallback | off | used), then
 * put and get whole pages through the NIC and read the data back. */
class uct_odp_implicit_child_rc : public rc_test
{
  protected:
    void SetUp() override
    {
        if (!is_child()) {
            GTEST_SKIP() << "run by the uct_odp_implicit tests";
        }
        rc_test::SetUp();
    }
};

TEST_F(uct_odp_implicit_child_rc, transfer)
{
    const char *expect = getenv("UCT_TEST_IMPLICIT_EXPECT");
    ASSERT_NE(nullptr, expect);
    ASSERT_EQ(UCT_IB_REG_METHOD_ODP, md_attr().reg_method);
    const size_t len = 64 * 1024;
    mapping two(3 * len), peer(len);
    uint8_t *x = static_cast<uint8_t *>(two.ptr);
    uint8_t *y = x + 2 * len; /* not adjacent to x: its own cache region */
    /* written by the CPU first: rxe's ODP writes zero-page mappings */
    fill(x, len, 1);
    fill(y, len, 2);
    fill(peer.ptr, len, 3);
    uct_ib_mem_t *xm = reg(x, len);
    uct_ib_mem_t *ym = reg(y, len);
    uct_ib_mem_t *pm = reg(peer.ptr, len);
    ASSERT_TRUE((xm != nullptr) && (ym != nullptr) && (pm != nullptr));
    /* more registrations must not attempt (or log) again */
    for (int i = 0; i < 4; ++i) {
        dereg(reg(x + 4096, 8192));
    }

    uct_ib_md_attr_t attr = md_attr();
    bool same_key         = (uct_ib_mem_lkey(xm) == uct_ib_mem_lkey(ym)) &&
                    (uct_ib_mem_rkey(xm) == uct_ib_mem_rkey(ym));
    printf("child: expect %s: implicit reported %d used %d failed %d; x lkey "
           "0x%x, y lkey 0x%x\n",
           expect, attr.odp_implicit, attr.odp_implicit_used,
           attr.odp_implicit_failed, uct_ib_mem_lkey(xm), uct_ib_mem_lkey(ym));
    EXPECT_EQ(UCT_IB_REG_METHOD_ODP, uct_ib_mem_method(xm));
    if (strcmp(expect, "used") == 0) {
        EXPECT_EQ(1, attr.odp_implicit_used);
        EXPECT_EQ(0, attr.odp_implicit_failed);
        EXPECT_TRUE(same_key) << "one implicit MR serves every range";
    } else {
        EXPECT_EQ(0, attr.odp_implicit_used);
        EXPECT_EQ((strcmp(expect, "fallback") == 0) ? 1 : 0,
                  attr.odp_implicit_failed);
        EXPECT_FALSE(same_key) << "explicit MRs: one per range";
    }

    /* put peer -> x, get y -> peer: the NIC moves the data, read back */
    std::string why;
    ASSERT_EQ(UCS_OK, put(m_ep[0], peer.ptr, len, pm, x, xm));
    EXPECT_TRUE(check(x, len, 3, &why)) << "put: " << why;
    ASSERT_EQ(UCS_OK, get(m_ep[0], peer.ptr, len, pm, y, ym));
    EXPECT_TRUE(check(peer.ptr, len, 2, &why)) << "get: " << why;
    dereg(pm);
    dereg(ym);
    dereg(xm);
}

class uct_odp_implicit : public md_test
{
  protected:
    /* run the transfer child with UCX_IB_REG_METHODS=odp, the given
     * UCX_IB_ODP_IMPLICIT value and expectation; its output */
    std::string run_transfer(const char *value, const char *expect)
    {
        std::string out;
        int rc = run_self("uct_odp_implicit_child_rc.transfer",
                          {"UCT_TEST_CHILD=1", "UCX_IB_REG_METHODS=odp",
                           std::string("UCX_IB_ODP_IMPLICIT=") + value,
                           std::string("UCT_TEST_IMPLICIT_EXPECT=") + expect},
                          &out);
        EXPECT_EQ(0, rc) << out;
        EXPECT_NE(std::string::npos, out.find("[  PASSED  ] 1 test")) << out;
        return out;
    }
};

TEST_F(uct_odp_implicit, detection_is_one_line)
{
    uct_ib_md_attr_t attr = md_attr();
    if (attr.odp_known_broken) { /* soft-RoCE: no kernel has implicit ODP */
        EXPECT_EQ(0, attr.odp_implicit);
    }
    std::string out;
    int rc = run_self("uct_odp_implicit_child.open",
                      {"UCT_TEST_CHILD=1", "UCX_LOG_LEVEL=diag"}, &out);
    EXPECT_EQ(0, rc) << out;
    auto absent   = lines_with(out, absent_line);
    auto reported = lines_with(out, reported_line);
    EXPECT_EQ(attr.odp_implicit ? 0u : 1u, absent.size()) << out;
    EXPECT_EQ(attr.odp_implicit ? 1u : 0u, reported.size()) << out;
    /* nothing else about implicit ODP at open */
    EXPECT_EQ(1u, lines_with(out, "implicit ODP").size()) << out;
    for (auto &l : lines_with(out, "implicit ODP")) {
        printf("%s\n", l.c_str());
    }
}

TEST_F(uct_odp_implicit, forced_attempt_fails_and_falls_back)
{
    uct_ib_md_attr_t attr = md_attr();
    if (!attr.odp_supported) {
        GTEST_SKIP() << "the odp method needs explicit RC ODP (soft-RoCE "
                        "from Linux 6.15: contrib/vm-tests/50-odp.sh)";
    }
    if (attr.odp_implicit) {
        GTEST_SKIP() << "the device reports implicit ODP: a forced attempt "
                        "is expected to succeed (used_where_reported)";
    }
    std::string out = run_transfer("yes", "fallback");
    EXPECT_EQ(0u, lines_with(out, active_line).size()) << out;
    auto lines = lines_with(out, fallback_line);
    ASSERT_EQ(1u, lines.size()) << "one line per md: " << out;
    EXPECT_NE(std::string::npos, lines[0].find("(errno ")) << lines[0];
    EXPECT_NE(std::string::npos,
              lines[0].find("explicit ODP MR per range instead"))
        << lines[0];
    EXPECT_NE(std::string::npos, lines[0].find("UCX_IB_ODP_IMPLICIT=yes"))
        << lines[0];
    printf("%s\n", lines[0].c_str());
}

TEST_F(uct_odp_implicit, try_and_no_use_explicit_without_attempt)
{
    uct_ib_md_attr_t attr = md_attr();
    if (!attr.odp_supported) {
        GTEST_SKIP() << "the odp method needs explicit RC ODP (soft-RoCE "
                        "from Linux 6.15: contrib/vm-tests/50-odp.sh)";
    }
    for (const char *value : {"try", "no"}) {
        bool off        = (strcmp(value, "no") == 0) || !attr.odp_implicit;
        std::string out = run_transfer(value, off ? "off" : "used");
        EXPECT_EQ(0u, lines_with(out, fallback_line).size())
            << value << ": " << out;
        EXPECT_EQ(off ? 0u : 1u, lines_with(out, active_line).size())
            << value << ": " << out;
    }
}

TEST_F(uct_odp_implicit, used_where_reported)
{
    uct_ib_md_attr_t attr = md_attr();
    if (!attr.odp_implicit || !attr.odp_supported) {
        GTEST_SKIP() << success_skip;
    }
    std::string out = run_transfer("try", "used");
    EXPECT_EQ(0u, lines_with(out, fallback_line).size()) << out;
    /* one warning naming the risk, per md */
    auto active = lines_with(out, active_line);
    ASSERT_EQ(1u, active.size()) << out;
    EXPECT_NE(std::string::npos, active[0].find("whole address space"))
        << active[0];
    EXPECT_NE(std::string::npos, active[0].find("every memory handle"))
        << active[0];
}
