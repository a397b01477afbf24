/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ucm_ucx_release(): the UCX release in the process, by ucp_get_version()
 * of a loaded libucp, else by the functions a UCX libucs exports.  Each
 * case runs in a forked child (the detector keeps what it found, and the
 * objects a case loads stay loaded); the oracle is what the case loaded:
 * a fake libucp reporting a chosen release, Debian's libucs (the release
 * its package names), a fake libucs that no marker matches.
 */
#include "common/ucm_test.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

namespace
{

std::string module_path(const char *name)
{
    const char *dir = getenv("UCMT_LIBDIR");

    return std::string((dir != NULL) ? dir : UCMT_LIBDIR) + "/" + name;
}

/* Run body() in a child; its failures are reported there (stderr) and
 * make the child exit 1. */
void in_child(void (*body)(void))
{
    pid_t pid = fork();
    int status;

    ASSERT_GE(pid, 0);
    if (pid == 0) {
        body();
        _exit(::testing::Test::HasFailure() ? 1 : 0);
    }
    ASSERT_EQ(pid, waitpid(pid, &status, 0));
    ASSERT_TRUE(WIFEXITED(status)) << "child status " << status;
    EXPECT_EQ(0, WEXITSTATUS(status)) << "see the child's failures above";
}

/* The status when no libucp is loaded: a UCX-like libucs (an earlier test's
 * fake, with no marker) makes it UNSUPPORTED, none NO_ELEM. */
ucs_status_t status_without_ucp()
{
    void *fake = dlopen(module_path("libucmt_fake_ucs.so").c_str(),
                        RTLD_NOW | RTLD_NOLOAD);

    if (fake != NULL) {
        dlclose(fake);
        return UCS_ERR_UNSUPPORTED;
    }
    return UCS_ERR_NO_ELEM;
}

void body_fake_ucp()
{
    unsigned major = 77, minor = 77, patch = 77;
    const char *how = NULL;

    EXPECT_EQ(status_without_ucp(),
              ucm_ucx_release(&major, &minor, &patch, &how));
    EXPECT_EQ(77u, major) << "outputs written on failure";
    EXPECT_EQ(NULL, how);

    setenv("UCMT_FAKE_UCP_VERSION", "1.18.1", 1);
    void *h = dlopen(module_path("libucmt_fake_ucp.so").c_str(),
                     RTLD_NOW | RTLD_LOCAL);
    ASSERT_TRUE(h != NULL) << dlerror();
    ASSERT_EQ(UCS_OK, ucm_ucx_release(&major, &minor, &patch, &how));
    EXPECT_EQ(1u, major);
    EXPECT_EQ(18u, minor);
    EXPECT_EQ(1u, patch);
    EXPECT_STREQ("ucp_get_version", how);

    /* kept for good: a later change of what the fake says is not seen */
    setenv("UCMT_FAKE_UCP_VERSION", "1.22.0", 1);
    ASSERT_EQ(UCS_OK, ucm_ucx_release(NULL, &minor, NULL, NULL));
    EXPECT_EQ(18u, minor);
}

void body_fake_ucs()
{
    void *h        = dlopen(module_path("libucmt_fake_ucs.so").c_str(),
                            RTLD_NOW | RTLD_LOCAL);
    unsigned minor = 77;

    ASSERT_TRUE(h != NULL) << dlerror();
    EXPECT_EQ(UCS_ERR_UNSUPPORTED, ucm_ucx_release(NULL, &minor, NULL, NULL));
    EXPECT_EQ(77u, minor);
}

const char *debian_libucs = "/usr/lib/x86_64-linux-gnu/libucs.so.0";

/* The installed libucx0's release as its package says (the oracle, read
 * without UCX): true with major and minor set, false when dpkg cannot tell. */
bool debian_libucx_release(unsigned *major, unsigned *minor)
{
    FILE *p = popen("dpkg-query -W -f='${Version}' libucx0 2>/dev/null", "r");
    char version[64] = "";
    bool found;

    if (p == NULL) {
        return false;
    }
    found = (fgets(version, sizeof(version), p) != NULL) &&
            (sscanf(version, "%u.%u", major, minor) == 2);
    pclose(p);
    return found;
}

unsigned expected_major, expected_minor;

void body_debian_libucs()
{
    unsigned major = 0, minor = 0, patch = 77;
    const char *how = NULL;

    /* its DT_NEEDED libucm.so.0 is this libucm (same soname, loaded) */
    void *h = dlopen(debian_libucs, RTLD_NOW | RTLD_LOCAL);
    ASSERT_TRUE(h != NULL) << dlerror();
    ASSERT_EQ(UCS_OK, ucm_ucx_release(&major, &minor, &patch, &how));
    EXPECT_EQ(expected_major, major);
    EXPECT_EQ(expected_minor, minor);
    EXPECT_EQ(0u, patch) << "the exports tell no patch level";
    EXPECT_STREQ("libucs exports", how);
}

} // namespace

TEST(UcxRelease, FakeUcpGetVersion)
{
    in_child(body_fake_ucp);
}

TEST(UcxRelease, UcxLibucsWithoutMarkers)
{
    in_child(body_fake_ucs);
}

/* Debian's libucs of whichever release is installed (12: 1.13.1, 13:
 * 1.18.1), recognised by its exports alone. */
TEST(UcxRelease, DebianLibucsFingerprint)
{
    if (access(debian_libucs, R_OK) != 0) {
        GTEST_SKIP() << debian_libucs << " not installed (libucx0)";
    }
    if (!debian_libucx_release(&expected_major, &expected_minor)) {
        GTEST_SKIP() << "dpkg-query cannot tell libucx0's version";
    }
    in_child(body_debian_libucs);
}
