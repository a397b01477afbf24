/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * secure_getenv semantics (src/common/ucs_env.h): in a secure-execution
 * process (setuid/setgid, file capabilities) libucm reads no variable, so
 * it runs with its defaults and prints nothing.
 *
 * The kernel's AT_SECURE cannot be had unprivileged; the child is made to
 * look secure by preloading libucmt_secure_auxv.so, whose getauxval()
 * answers 1 for AT_SECURE (a test-only override outside the library: the
 * library's code path is the production one).  Oracles: the options the
 * child's libucm actually holds, and what it wrote on stderr; the same
 * child without the preload is the positive control.
 */
#include <common/ucm_test.h>

#include <ucm/api/ucm.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace
{

using namespace ucmt;

void secure_env_noop(ucm_event_type_t, ucm_event_t *, void *)
{
}

/* Print the options libucm parsed, then install the hooks and add and
 * remove a handler (debug lines, and UCM_STATS lines for the handler). */
UCMT_CHILD_SCENARIO(secure_env_probe)
{
    printf("log_level=%s mode=%s\n",
           ucm_log_level_names[ucm_global_opts.log_level],
           ucm_mmap_hook_modes[ucm_global_opts.mmap_hook_mode]);
    fflush(stdout);
    if (ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 0, secure_env_noop,
                              NULL) != UCS_OK) {
        return 3;
    }
    void *p = malloc(1 << 20);
    free(p);
    ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED, secure_env_noop, NULL);
    return 0;
}

child_result run_probe(bool secure)
{
    std::string preload;
    const char *old = getenv("LD_PRELOAD");

    if (secure) {
        preload = UCMT_LIBDIR "/libucmt_secure_auxv.so";
        if ((old != NULL) && (old[0] != '\0')) {
            preload += std::string(":") + old; /* an allocator's mode */
        }
    } else if (old != NULL) {
        preload = old;
    }
    /* under ASan the runtime is linked in, not preloaded: the test
     * library's preload (it defines getauxval only) goes before it */
    return run_self("secure_env_probe",
                    {{"UCX_MEM_LOG_LEVEL", "trace"},
                     {"UCX_MEM_MMAP_HOOK_MODE", "reloc"},
                     {"UCM_STATS", "v"},
                     {"LD_PRELOAD", preload.empty() ? NULL : preload.c_str()},
                     {"ASAN_OPTIONS", "verify_asan_link_order=0"}});
}

TEST(SecureEnv, ControlVariablesAreRead)
{
    std::string reason;
    if (!hooks_available(&reason)) {
        GTEST_SKIP() << reason;
    }
    child_result r = run_probe(false);
    ASSERT_TRUE(r.exited_ok()) << r.str();
    EXPECT_EQ("log_level=TRACE mode=reloc\n", r.out) << r.str();
    /* what a setuid program must not print: log lines and statistics,
     * with addresses */
    EXPECT_NE(std::string::npos, r.err.find("UCM DEBUG")) << r.str();
    EXPECT_NE(std::string::npos, r.err.find("UCM STATS")) << r.str();
}

TEST(SecureEnv, SecureProcessIgnoresVariablesAndPrintsNothing)
{
    std::string reason;
    if (!hooks_available(&reason)) {
        GTEST_SKIP() << reason;
    }
    child_result r = run_probe(true);
    ASSERT_TRUE(r.exited_ok()) << r.str();
    /* the defaults, as if nothing were set */
    EXPECT_EQ("log_level=WARN mode=bistro\n", r.out) << r.str();
    EXPECT_EQ("", r.err) << "no log or statistics line: " << r.str();
}

} // namespace
