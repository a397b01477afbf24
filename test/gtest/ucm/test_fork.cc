/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Processes: vfork/posix_spawn must not report the parent's memory; fork
 * while other threads are inside hooks, and fork from inside an event
 * handler, must leave a child in which handlers and hooks work.
 */
#include "common/ucm_test.h"

#include <atomic>
#include <pthread.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace
{

using namespace ucmt;

class Spawn : public ucmt::test
{
};
class Fork : public ucmt::test
{
};

const char *TRUE_BIN = "/bin/true";

TEST_F(Spawn, PosixSpawnNoFalseUnmap)
{
    const size_t ps = page_size(), len = 8 * ps;
    char *p      = (char *)map_anon(len);
    char *argv[] = {(char *)TRUE_BIN, NULL};
    pid_t pid;
    int status;
    bool timed_out;

    if (access(TRUE_BIN, X_OK) != 0) {
        GTEST_SKIP() << TRUE_BIN << " not found";
    }
    ASSERT_TRUE(p != NULL);
    ASSERT_EQ(8u, oracle::watch(p, len));
    oracle::arm();
    ASSERT_EQ(0, posix_spawn(&pid, TRUE_BIN, NULL, NULL, argv, environ));
    ASSERT_TRUE(wait_child(pid, 60, &status, &timed_out));
    oracle_stats s = oracle::check();
    record(s);
    EXPECT_TRUE(WIFEXITED(status) && (WEXITSTATUS(status) == 0));
    EXPECT_EQ(0u, s.changed);
    EXPECT_EQ(0u, s.reported) << "the parent's range was reported";
    EXPECT_EQ(0u, oracle::events(UCM_EVENT_VM_UNMAPPED, p, len).size());
    munmap(p, len);
}

pid_t vfork_exec_true()
{
    static char *argv[] = {(char *)TRUE_BIN, NULL};
    pid_t pid           = vfork();

    if (pid == 0) {
        execve(TRUE_BIN, argv, environ);
        _exit(127);
    }
    return pid;
}

TEST_F(Spawn, VforkExecNoFalseUnmap)
{
    const size_t ps = page_size(), len = 8 * ps;
    char *p = (char *)map_anon(len);
    int status;
    bool timed_out;

    if (access(TRUE_BIN, X_OK) != 0) {
        GTEST_SKIP() << TRUE_BIN << " not found";
    }
    ASSERT_TRUE(p != NULL);
    ASSERT_EQ(8u, oracle::watch(p, len));
    oracle::arm();
    pid_t pid = vfork_exec_true();
    ASSERT_GT(pid, 0);
    ASSERT_TRUE(wait_child(pid, 60, &status, &timed_out));
    oracle_stats s = oracle::check();
    record(s);
    EXPECT_TRUE(WIFEXITED(status) && (WEXITSTATUS(status) == 0));
    EXPECT_EQ(0u, s.changed);
    EXPECT_EQ(0u, s.reported) << "the parent's range was reported";
    munmap(p, len);
}

/* ---- in the child: a new handler must see a munmap ---- */

volatile uintptr_t child_target;
volatile int child_hit;

void child_cb(ucm_event_type_t, ucm_event_t *event, void *)
{
    uintptr_t a = (uintptr_t)event->vm_unmapped.address;

    if ((a <= child_target) && (child_target < a + event->vm_unmapped.size)) {
        /* 1: reported while the page was still mapped, 2: too late */
        child_hit = readable((void *)child_target) ? 1 : 2;
    }
}

void noop_cb(ucm_event_type_t, ucm_event_t *, void *)
{
}

/* Exit code of a child: 0 when a handler added in the child saw munmap
 * while the page was still mapped; 4: no event, 5: event too late
 * (6: the child's own munmap failed). */
int child_check_events()
{
    const size_t ps = page_size();

    child_hit = 0;
    if (ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 0, child_cb, NULL) !=
        UCS_OK) {
        return 2;
    }
    void *p = mmap(NULL, 2 * ps, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        return 3;
    }
    touch(p, 2 * ps);
    child_target = (uintptr_t)p + ps;
    munmap(p, 2 * ps);
    if (child_hit != 1) {
        return child_hit ? 5 : 4;
    }
    ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED, child_cb, NULL);
    return 0;
}

std::atomic<bool> workers_stop(false);
std::atomic<long> worker_iters(0);

void *mmap_worker(void *)
{
    const size_t ps = page_size();
    unsigned i;

    for (i = 0; !workers_stop.load() && (i < 50000000); ++i) {
        void *p = mmap(NULL, ps, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED) {
            *(volatile char *)p = 1;
            munmap(p, ps);
        }
        ++worker_iters;
    }
    return NULL;
}

void *churn_worker(void *)
{
    unsigned i;

    for (i = 0; !workers_stop.load() && (i < 1000000); ++i) {
        if (ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, (int)(i % 7) - 3,
                                  noop_cb, NULL) == UCS_OK) {
            ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED, noop_cb, NULL);
        }
    }
    return NULL;
}

/* Walks every loaded object again and again: a GOT patch of a symbol no
 * object imports (a full walk each time, no slot written). */
void *walk_worker(void *)
{
    ucm_got_patch_t patch = {"ucmt_fork_walk_nothing", (void *)noop_cb,
                             (void *)noop_cb, NULL};

    while (!workers_stop.load()) {
        if (ucm_got_patch_apply(&patch, 1, NULL) == UCS_OK) {
            ++worker_iters;
        }
    }
    return NULL;
}

struct worker_set {
    std::vector<pthread_t> threads;

    void start(unsigned n_mmap, unsigned n_churn, unsigned n_walk = 0)
    {
        pthread_t t;
        unsigned i;

        workers_stop = false;
        worker_iters = 0;
        for (i = 0; i < n_mmap + n_churn + n_walk; ++i) {
            if (pthread_create(&t, NULL,
                               (i < n_mmap)             ? mmap_worker
                               : (i < n_mmap + n_churn) ? churn_worker
                                                        : walk_worker,
                               NULL) == 0) {
                threads.push_back(t);
            }
        }
    }

    void stop()
    {
        workers_stop = true;
        for (size_t i = 0; i < threads.size(); ++i) {
            pthread_join(threads[i], NULL);
        }
        threads.clear();
    }

    ~worker_set()
    {
        stop();
    }
};

/* Outcomes of forked children: those that hung (killed after the
 * timeout), those that exited with an error, and the first of those. */
struct child_tally {
    unsigned hung   = 0;
    unsigned failed = 0;
    std::string first_failure;

    void wait(pid_t pid, int timeout_s)
    {
        int status = 0;
        bool timed_out;

        if (!wait_child(pid, timeout_s, &status, &timed_out)) {
            ++hung;
        } else if ((!WIFEXITED(status) || (WEXITSTATUS(status) != 0)) &&
                   (failed++ == 0)) {
            first_failure = WIFEXITED(status)
                                ? "exit " + std::to_string(WEXITSTATUS(status))
                                : "signal " + std::to_string(WTERMSIG(status));
        }
    }
};

TEST_F(Fork, ForkWhileThreadsInHooks)
{
    const unsigned forks = scaled(40, 2);
    worker_set workers;
    child_tally children;
    unsigned i;

    workers.start(scaled(3, 1), 1);
    for (i = 0; i < forks; ++i) {
        pid_t pid = fork();
        if (pid == 0) {
            _exit(child_check_events());
        }
        ASSERT_GT(pid, 0);
        children.wait(pid, 60);
    }
    workers.stop();
    EXPECT_EQ(0u, children.hung) << "children hung (killed after 60 s)";
    EXPECT_EQ(0u, children.failed)
        << "children without events; first: " << children.first_failure;
    EXPECT_GT(worker_iters.load(), 0);
}

/* ---- fork() from inside an event handler ---- */

std::atomic<int> handler_fork_state(0); /* 0 idle, 1 forking, 2 done */
pid_t handler_fork_pid;
pid_t fork_parent_pid;
uintptr_t fork_trigger;

void forking_cb(ucm_event_type_t, ucm_event_t *event, void *)
{
    int expected = 0;

    if (((uintptr_t)event->vm_unmapped.address != fork_trigger) ||
        (getpid() != fork_parent_pid) ||
        !handler_fork_state.compare_exchange_strong(expected, 1)) {
        return;
    }
    pid_t pid = fork();
    if (pid != 0) {
        handler_fork_pid   = pid;
        handler_fork_state = 2;
    }
}

/* Rounds of: a munmap whose handler forks; the child checks that a new
 * handler sees a munmap there (child_check_events) and exits with its
 * code, which *children tallies (a child waited for timeout_s at most). */
void fork_in_handler_rounds(unsigned rounds, int timeout_s,
                            child_tally *children)
{
    const size_t ps = page_size();
    unsigned r;

    fork_parent_pid = getpid();
    ASSERT_EQ(UCS_OK, ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, -5,
                                            forking_cb, NULL));
    for (r = 0; r < rounds; ++r) {
        SCOPED_TRACE(testing::Message() << "round " << r);
        char *p = (char *)map_anon(2 * ps);
        ASSERT_TRUE(p != NULL);
        handler_fork_state = 0;
        fork_trigger       = (uintptr_t)p;
        int ret            = munmap(p, 2 * ps);
        if (getpid() != fork_parent_pid) {
            /* the child, back from the handler and from munmap (alone:
             * no other thread can have mapped p again) */
            int rc = ((ret != 0) || readable(p)) ? 6 : child_check_events();
            _exit(rc);
        }
        ASSERT_EQ(2, handler_fork_state.load()) << "fork in handler failed";
        /* (no readable(p) check here: a worker may have mapped it again) */
        EXPECT_EQ(0, ret);
        children->wait(handler_fork_pid, timeout_s);
    }
    ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED, forking_cb, NULL);
}

TEST_F(Fork, ForkFromEventHandler)
{
    worker_set workers;
    child_tally children;

    workers.start(scaled(2, 1), 1);
    fork_in_handler_rounds(scaled(10, 1), 60, &children);
    workers.stop();
    EXPECT_EQ(0u, children.hung) << "children forked in a handler hung (60 s)";
    EXPECT_EQ(0u, children.failed) << "first: " << children.first_failure;
}

/* glibc does not re-initialize, in a forked child, the loader lock that a
 * walk of the loaded objects (dl_iterate_phdr) holds: a child forked while
 * another thread walks hangs at its own first walk (here: the handler it
 * sets).  libucm's fork handler waits for its walks, also when fork() is
 * called from an event handler, where it cannot wait for libucm's other
 * locks.  Without that, about 1 child in 15 hangs here. */
TEST_F(Fork, ForkFromEventHandlerWhileObjectsWalked)
{
    worker_set workers;
    child_tally children;

    workers.start(0, 0, 1);
    fork_in_handler_rounds(scaled(100, 10), 10, &children);
    workers.stop();
    EXPECT_EQ(0u, children.hung) << "children hung at their first walk (10 s)";
    EXPECT_EQ(0u, children.failed) << "first: " << children.first_failure;
    EXPECT_GT(worker_iters.load(), 0) << "no walk ran beside the forks";
}

} // namespace
