/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * MADV_DONTFORK marking (UCX_RCACHE_DONTFORK=yes, forced: this kernel
 * copies pinned pages at fork, so "auto" would leave it off).  Oracle: a
 * forked child reads each page; a marked page is absent in the child (the
 * read faults), an unmarked one holds the parent's data.
 */
#include "rcache_fixture.h"

#include <ucs/memory/rcache_ext.h>

#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace rcache_test;

namespace
{

enum { PROBE_PRESENT = 0, PROBE_ABSENT = 1, PROBE_WRONG = 2 };

void probe_segv(int)
{
    _exit(PROBE_ABSENT);
}

class rcache_dontfork : public rcache_fixture
{
  protected:
    void SetUp() override
    {
        setenv("UCX_RCACHE_DONTFORK", "yes", 1);
    }

    void TearDown() override
    {
        rcache_fixture::TearDown();
        unsetenv("UCX_RCACHE_DONTFORK");
    }

    /* what a forked child sees at addr: PROBE_* (-1: child hung) */
    int probe(const char *addr, char expect)
    {
        pid_t pid = fork();
        if (pid == 0) {
            struct sigaction sa = {};
            sa.sa_handler       = probe_segv;
            sigaction(SIGSEGV, &sa, nullptr);
            sigaction(SIGBUS, &sa, nullptr);
            char c = *(const volatile char *)addr;
            _exit((c == expect) ? PROBE_PRESENT : PROBE_WRONG);
        }
        int status = 0;
        for (int i = 0; i < 2000; ++i) {
            if (waitpid(pid, &status, WNOHANG) == pid) {
                return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
            }
            usleep(10000);
        }
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        return -1;
    }

    char *filled_pages(size_t npages)
    {
        char *buf = (char *)map(npages);
        for (size_t i = 0; i < npages; ++i) {
            buf[i * page_size] = (char)('a' + i);
        }
        return buf;
    }

    void drop(test_region *region)
    {
        ucs_rcache_region_invalidate(m_rcache, &region->super, nullptr,
                                     nullptr);
        put(region);
    }
};

} // namespace

TEST_F(rcache_dontfork, child_lacks_registered_pages)
{
    ASSERT_EQ(UCS_OK, create());
    char *buf = filled_pages(3);

    test_region *region = get(buf + page_size, page_size);
    ASSERT_TRUE(region);
    EXPECT_EQ(PROBE_PRESENT, probe(buf, 'a'));
    EXPECT_EQ(PROBE_ABSENT, probe(buf + page_size, 'b'));
    EXPECT_EQ(PROBE_PRESENT, probe(buf + 2 * page_size, 'c'));

    put(region); /* still cached: still registered, still marked */
    EXPECT_EQ(PROBE_ABSENT, probe(buf + page_size, 'b'));

    region                 = get(buf + page_size, page_size);
    unsigned deregs_before = deregs;
    drop(region);
    EXPECT_EQ(deregs_before + 1, deregs.load());
    EXPECT_EQ(PROBE_PRESENT, probe(buf + page_size, 'b'));
    munmap(buf, 3 * page_size);
}

/* two caches over one page: the page comes back only with the last */
TEST_F(rcache_dontfork, counted_per_page)
{
    ASSERT_EQ(UCS_OK, create());
    ucs_rcache_params_t params = default_params();
    ucs_rcache_t *second;
    ASSERT_EQ(UCS_OK, ucs_rcache_create(&params, "second", nullptr, &second));
    char *buf = filled_pages(4);

    test_region *one = get(buf + page_size, page_size); /* page 1 */
    ucs_rcache_region_t *two;
    ASSERT_EQ(UCS_OK, ucs_rcache_get(second, buf + page_size, 2 * page_size,
                                     PROT_READ | PROT_WRITE, nullptr, &two));
    EXPECT_EQ(PROBE_ABSENT, probe(buf + page_size, 'b'));
    EXPECT_EQ(PROBE_ABSENT, probe(buf + 2 * page_size, 'c'));

    drop(one);
    EXPECT_EQ(PROBE_ABSENT, probe(buf + page_size, 'b'));
    EXPECT_EQ(PROBE_ABSENT, probe(buf + 2 * page_size, 'c'));

    ucs_rcache_region_invalidate(second, two, nullptr, nullptr);
    ucs_rcache_region_put(second, two);
    EXPECT_EQ(PROBE_PRESENT, probe(buf + page_size, 'b'));
    EXPECT_EQ(PROBE_PRESENT, probe(buf + 2 * page_size, 'c'));
    EXPECT_EQ(PROBE_PRESENT, probe(buf + 3 * page_size, 'd'));
    EXPECT_EQ(UCS_OK, ucs_rcache_destroy_checked(second));
    munmap(buf, 4 * page_size);
}

/* the child may register what it has: its cache marks its own pages */
TEST_F(rcache_dontfork, child_registers_its_pages)
{
    ASSERT_EQ(UCS_OK, create());
    char *buf         = filled_pages(2);
    test_region *held = get(buf, page_size);

    pid_t pid = fork();
    if (pid == 0) {
        ucs_rcache_region_t *r;
        put(held); /* the parent's: released without mem_dereg */
        if (ucs_rcache_get(m_rcache, buf + page_size, page_size,
                           PROT_READ | PROT_WRITE, nullptr, &r) != UCS_OK) {
            _exit(1);
        }
        ucs_rcache_region_invalidate(m_rcache, r, nullptr, nullptr);
        ucs_rcache_region_put(m_rcache, r);
        _exit((buf[page_size] == 'b') ? 0 : 2);
    }
    int status = 0;
    ASSERT_EQ(pid, waitpid(pid, &status, 0));
    EXPECT_TRUE(WIFEXITED(status) && (WEXITSTATUS(status) == 0)) << status;
    drop(held);
    EXPECT_EQ(PROBE_PRESENT, probe(buf, 'a'));
    munmap(buf, 2 * page_size);
}

TEST_F(rcache_dontfork, bad_value_rejected)
{
    setenv("UCX_RCACHE_DONTFORK", "sometimes", 1);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, create());
}
