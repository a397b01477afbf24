/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gtest_uct entry point.  Transparent huge pages are off for the process
 * (khugepaged would move pages without an unmap and fool the page-frame
 * checks).
 */
#include <gtest/gtest.h>
#include <sys/prctl.h>

int main(int argc, char **argv)
{
    prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
