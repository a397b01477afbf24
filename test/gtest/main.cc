/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Entry point of the libucm test suite.  "gtest_ucm --ucm-child=NAME" runs
 * one child scenario (used by tests that need a fresh process with other
 * UCX_MEM_* settings) instead of the tests.
 */
#include "common/ucm_test.h"

#include <string.h>

int main(int argc, char **argv)
{
    static const char child_opt[] = "--ucm-child=";

    ucmt::set_self_path(argv[0]);
    if ((argc >= 2) && !strncmp(argv[1], child_opt, sizeof(child_opt) - 1)) {
        return ucmt::run_child_scenario(argv[1] + sizeof(child_opt) - 1);
    }
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
