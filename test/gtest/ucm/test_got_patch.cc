/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ucm_got_patch_apply(): the GOT engine offered to other modules (the CUDA
 * hooks use it).  Oracle: the call made through this program's PLT reaches
 * the hook, which forwards to the real function (same result).
 */
#include "common/ucm_test.h"

#include <ucm/api/ucm_ext.h>

#include <atomic>
#include <dlfcn.h>
#include <unistd.h>

namespace
{

std::atomic<unsigned long> getppid_calls{0};
pid_t (*getppid_next)(void) = nullptr;

pid_t getppid_hook(void)
{
    ++getppid_calls;
    return getppid_next();
}

/* Calls through the PLT of this program (not inlined, not a raw syscall). */
__attribute__((noinline)) pid_t call_getppid()
{
    return getppid();
}

TEST(GotPatch, HookReachedAndForwardsToReal)
{
    auto real = (pid_t(*)(void))dlsym(RTLD_NEXT, "getppid");
    ASSERT_NE(nullptr, (void *)real);
    getppid_next = real;

    ucm_got_patch_t patch = {"getppid", (void *)getppid_hook, (void *)real,
                             nullptr};
    unsigned long written = 0;
    ASSERT_EQ(UCS_OK, ucm_got_patch_apply(&patch, 1, &written));
    EXPECT_GE(written, 1ul) << "this program's GOT names getppid";
    if (patch.foreign != nullptr) {
        getppid_next = (pid_t(*)(void))patch.foreign; /* chain */
    }

    unsigned long before = getppid_calls.load();
    EXPECT_EQ(real(), call_getppid());
    EXPECT_EQ(before + 1, getppid_calls.load());

    /* the same patch again writes nothing and keeps working */
    written = 99;
    ASSERT_EQ(UCS_OK, ucm_got_patch_apply(&patch, 1, &written));
    EXPECT_EQ(0ul, written);
    EXPECT_EQ(real(), call_getppid());
    EXPECT_EQ(before + 2, getppid_calls.load());
}

TEST(GotPatch, BadInput)
{
    ucm_got_patch_t patch = {"getppid", nullptr, (void *)getppid, nullptr};
    unsigned long written = 7;

    EXPECT_EQ(UCS_ERR_INVALID_PARAM, ucm_got_patch_apply(nullptr, 1, &written));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, ucm_got_patch_apply(&patch, 1, &written));
    patch.hook   = (void *)getppid_hook;
    patch.symbol = nullptr;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, ucm_got_patch_apply(&patch, 1, &written));
    EXPECT_EQ(7ul, written) << "output set only on success";
    EXPECT_EQ(UCS_OK, ucm_got_patch_apply(&patch, 0, nullptr));
}

} // namespace
