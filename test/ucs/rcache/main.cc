/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gtest_rcache entry point: transparent huge pages are turned off for the
 * process, since khugepaged would move pages to new frames without an
 * unmap and fool the page-frame oracle.
 */
#include <gtest/gtest.h>
#include <sys/prctl.h>

int main(int argc, char **argv)
{
    prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
