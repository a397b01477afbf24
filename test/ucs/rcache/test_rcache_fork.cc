/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Registration cache across fork(): purge in the parent, a usable cache
 * without the parent's regions in the child.
 */
#include "rcache_fixture.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

using namespace rcache_test;

class rcache_fork : public rcache_fixture
{
  protected:
    /* waitpid with a timeout; kills the child if it hangs */
    int wait_child(pid_t pid, int timeout_sec = 20)
    {
        int status = 0;
        for (int i = 0; i < timeout_sec * 100; ++i) {
            pid_t ret = waitpid(pid, &status, WNOHANG);
            if (ret == pid) {
                return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
            }
            usleep(10000);
        }
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        ADD_FAILURE() << "child " << pid << " hung";
        return -1;
    }

    /* in the child: 0 if the cache is empty and works on this memory */
    int child_check(char *buf, size_t len, test_region *held)
    {
        /* the parent's registration: released without mem_dereg */
        unsigned deregs_before = deregs;
        put(held);
        if (deregs != deregs_before) {
            return 6;
        }
        if (stats().regions != 0) {
            return 1;
        }
        unsigned regs_before = regs;
        ucs_rcache_region_t *r;
        if (ucs_rcache_get(m_rcache, buf, len, PROT_READ | PROT_WRITE, nullptr,
                           &r) != UCS_OK) {
            return 2;
        }
        if (regs != regs_before + 1) {
            return 3; /* a hit on a parent's registration */
        }
        if (check_region(reinterpret_cast<test_region *>(r), (uintptr_t)buf,
                         len) != "") {
            return 4;
        }
        ucs_rcache_region_put(m_rcache, r);
        if (ucs_rcache_destroy_checked(m_rcache) != UCS_OK) {
            return 5;
        }
        return 0;
    }

    void run(bool purge)
    {
        ucs_rcache_params_t params = default_params();
        params.flags               = purge ? UCS_RCACHE_FLAG_PURGE_ON_FORK : 0;
        ASSERT_EQ(UCS_OK, create(&params));

        char *buf         = (char *)map(4);
        test_region *held = get(buf, 2 * page_size);
        put(get(buf + 3 * page_size, page_size));
        ASSERT_TRUE(held);

        pid_t pid = fork();
        ASSERT_NE(-1, pid);
        if (pid == 0) {
            buf[0] = 1; /* the child's own copy of the page */
            _exit(child_check(buf, 4 * page_size, held));
        }
        EXPECT_EQ(0, wait_child(pid));

        buf[page_size] = 2; /* copy-on-write: the parent's frame changes */
        if (purge) {
            EXPECT_EQ(0u, stats().regions);
            test_region *again = get(buf, 2 * page_size);
            ASSERT_TRUE(again);
            EXPECT_NE(held, again);
            put(again);
        }
        put(held);
        munmap(buf, 4 * page_size);
    }
};

TEST_F(rcache_fork, purge_on_fork)
{
    RCACHE_NEED_PFN();
    run(true);
}

TEST_F(rcache_fork, child_without_purge)
{
    RCACHE_NEED_PFN();
    run(false);
}
