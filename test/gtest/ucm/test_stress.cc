/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Concurrency: many threads unmapping while handlers come and go (no lost
 * event), and munmap from a signal handler (events arrive, no deadlock).
 * Loops are bounded by iteration counts; deadlines only detect hangs.
 */
#include "common/ucm_test.h"

#include <atomic>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

namespace
{

using namespace ucmt;

class Stress : public ucmt::test
{
};
class Signal : public ucmt::test
{
};

/* ---- threads unmapping while handlers are added and removed ---- */

/* What the current thread is unmapping, and whether it was reported. */
__thread uintptr_t t_target_addr;
__thread size_t t_target_len;
__thread int t_target_hit;

void per_thread_cb(ucm_event_type_t, ucm_event_t *event, void *)
{
    uintptr_t a = (uintptr_t)event->vm_unmapped.address;

    if ((t_target_len != 0) && (a <= t_target_addr) &&
        (t_target_addr + t_target_len <= a + event->vm_unmapped.size)) {
        t_target_hit = 1;
    }
}

void churn_cb(ucm_event_type_t, ucm_event_t *, void *arg)
{
    ++*(std::atomic<long> *)arg;
}

std::atomic<long> lost_events(0);
std::atomic<long> unmaps_done(0);
std::atomic<bool> churn_stop(false);

void *unmap_worker(void *arg)
{
    const size_t ps  = page_size();
    const unsigned n = *(unsigned *)arg;
    unsigned i;

    for (i = 0; i < n; ++i) {
        size_t len = (1 + (i % 8)) * ps;
        char *p    = (char *)mmap(NULL, len, PROT_READ | PROT_WRITE,
                                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            continue;
        }
        p[0]          = 1;
        t_target_hit  = 0;
        t_target_addr = (uintptr_t)p;
        t_target_len  = len;
        munmap(p, len);
        t_target_len = 0;
        if (!t_target_hit) {
            ++lost_events;
        }
        ++unmaps_done;
    }
    return NULL;
}

void *churn_thread(void *arg)
{
    std::atomic<long> *counters = (std::atomic<long> *)arg;
    unsigned i;

    for (i = 0; !churn_stop.load() && (i < 200000); ++i) {
        std::atomic<long> *c = &counters[i % 4];
        if (ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED | UCM_EVENT_VM_MAPPED |
                                      UCM_EVENT_MUNMAP,
                                  (int)(i % 11) - 5, churn_cb, c) == UCS_OK) {
            sched_yield();
            ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED |
                                        UCM_EVENT_VM_MAPPED | UCM_EVENT_MUNMAP,
                                    churn_cb, c);
        }
    }
    return NULL;
}

TEST_F(Stress, ThreadsUnmapWhileHandlersChurn)
{
    const unsigned nthreads = 4;
    unsigned iters          = scaled(3000, 100);
    std::atomic<long> counters[4];
    pthread_t workers[nthreads], churn;
    unsigned i;

    for (i = 0; i < 4; ++i) {
        counters[i] = 0;
    }
    lost_events = 0;
    unmaps_done = 0;
    churn_stop  = false;
    ASSERT_EQ(UCS_OK, ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 0,
                                            per_thread_cb, NULL));
    ASSERT_EQ(0, pthread_create(&churn, NULL, churn_thread, counters));
    for (i = 0; i < nthreads; ++i) {
        ASSERT_EQ(0, pthread_create(&workers[i], NULL, unmap_worker, &iters));
    }
    for (i = 0; i < nthreads; ++i) {
        pthread_join(workers[i], NULL);
    }
    churn_stop = true;
    pthread_join(churn, NULL);
    ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED, per_thread_cb, NULL);

    long churn_calls = counters[0] + counters[1] + counters[2] + counters[3];
    std::cout << "[ stress ] unmaps=" << unmaps_done.load()
              << " churn handler calls=" << churn_calls << std::endl;
    EXPECT_EQ((long)nthreads * iters, unmaps_done.load());
    EXPECT_EQ(0, lost_events.load()) << "munmap calls without VM_UNMAPPED";
}

/* More live threads inside hooks than libucm has RCU reader slots (1024):
 * the rest go through the shared overflow counters.  No event may be lost
 * and handler removal must still wait for every reader. */
pthread_mutex_t many_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t many_cond  = PTHREAD_COND_INITIALIZER;
bool many_go              = false;

void many_unmap_once()
{
    const size_t ps = page_size();
    char *p         = (char *)mmap(NULL, ps, PROT_READ | PROT_WRITE,
                                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (p == MAP_FAILED) {
        return;
    }
    p[0]          = 1;
    t_target_hit  = 0;
    t_target_addr = (uintptr_t)p;
    t_target_len  = ps;
    munmap(p, ps);
    t_target_len = 0;
    if (!t_target_hit) {
        ++lost_events;
    }
    ++unmaps_done;
}

void *many_worker(void *)
{
    unsigned i;

    many_unmap_once(); /* takes a reader slot, if one is left */
    /* stay alive until every thread exists */
    pthread_mutex_lock(&many_lock);
    while (!many_go) {
        pthread_cond_wait(&many_cond, &many_lock);
    }
    pthread_mutex_unlock(&many_lock);
    for (i = 0; i < 10; ++i) {
        many_unmap_once();
    }
    return NULL;
}

TEST_F(Stress, MoreThreadsThanRcuSlots)
{
    const unsigned n = 1100;
    std::vector<pthread_t> threads;
    std::atomic<long> counter(0);
    pthread_attr_t attr;
    unsigned i, created;

    if (on_valgrind()) {
        GTEST_SKIP() << "valgrind runs at most 500 threads by default";
    }
    lost_events = 0;
    unmaps_done = 0;
    many_go     = false;
    ASSERT_EQ(UCS_OK, ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 0,
                                            per_thread_cb, NULL));
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 128 * 1024);
    for (i = 0; i < n; ++i) {
        pthread_t t;
        if (pthread_create(&t, &attr, many_worker, NULL) != 0) {
            break;
        }
        threads.push_back(t);
    }
    created = (unsigned)threads.size();
    pthread_mutex_lock(&many_lock);
    many_go = true;
    pthread_cond_broadcast(&many_cond);
    pthread_mutex_unlock(&many_lock);
    /* handlers come and go while all of them unmap */
    for (i = 0; i < 20; ++i) {
        EXPECT_EQ(UCS_OK,
                  ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, (int)(i % 5) - 2,
                                        churn_cb, &counter));
        ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED, churn_cb, &counter);
    }
    for (i = 0; i < created; ++i) {
        pthread_join(threads[i], NULL);
    }
    pthread_attr_destroy(&attr);
    ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED, per_thread_cb, NULL);
    std::cout << "[ stress ] threads=" << created
              << " unmaps=" << unmaps_done.load() << std::endl;
    EXPECT_GT(created, 1024u) << "could not create enough threads";
    EXPECT_EQ(11l * created, unmaps_done.load());
    EXPECT_EQ(0, lost_events.load()) << "munmap calls without VM_UNMAPPED";
}

/* ---- installing the hooks while other threads run the hooked code ---- */

std::atomic<bool> load_installed(false), load_stop(false);
std::atomic<long> load_lost(0);
std::atomic<long> load_iters[3];

void *load_worker(void *arg)
{
    std::atomic<long> *iters = (std::atomic<long> *)arg;
    const size_t ps          = page_size();
    long i;

    for (i = 0; !load_stop.load() && (i < 50000000); ++i) {
        char *p = (char *)mmap(NULL, 2 * ps, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            continue;
        }
        p[0] = 1;
        madvise(p, ps, MADV_DONTNEED);
        bool armed    = load_installed.load();
        t_target_hit  = 0;
        t_target_addr = (uintptr_t)p;
        t_target_len  = 2 * ps;
        munmap(p, 2 * ps);
        t_target_len = 0;
        if (armed && !t_target_hit) {
            ++load_lost;
        }
        ++*iters;
    }
    return NULL;
}

/* wait (bounded) until every worker did 'more' iterations past 'base' */
void load_wait(const long *base, long more)
{
    unsigned spins, i;

    for (spins = 0; spins < 2000000; ++spins) {
        for (i = 0; i < 3; ++i) {
            if (load_iters[i].load() < base[i] + more) {
                break;
            }
        }
        if (i == 3) {
            return;
        }
        sched_yield();
    }
}

/* A fresh process: no hooks yet when the threads start. */
UCMT_CHILD_SCENARIO(install_under_load)
{
    pthread_t threads[3];
    long base[3] = {0, 0, 0}, after[3];
    unsigned i;

    if (ucm_hooks_installed_mode() != UCM_MMAP_HOOK_NONE) {
        printf("hooks already installed\n");
        return 3;
    }
    for (i = 0; i < 3; ++i) {
        load_iters[i] = 0;
        if (pthread_create(&threads[i], NULL, load_worker, &load_iters[i]) !=
            0) {
            return 4;
        }
    }
    load_wait(base, 50);
    ucs_status_t status =
        ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 0, per_thread_cb, NULL);
    load_installed = true;
    for (i = 0; i < 3; ++i) {
        after[i] = load_iters[i].load();
    }
    load_wait(after, 200);
    load_stop = true;
    for (i = 0; i < 3; ++i) {
        pthread_join(threads[i], NULL);
    }
    printf("status %d, lost %ld, iterations %ld/%ld/%ld\n", (int)status,
           load_lost.load(), load_iters[0].load(), load_iters[1].load(),
           load_iters[2].load());
    return ((status == UCS_OK) && (load_lost.load() == 0)) ? 0 : 1;
}

TEST(Install, WhileOtherThreadsCallHookedFunctions)
{
    const unsigned runs = scaled(5, 1);
    std::string reason;
    unsigned r;

    if (!hooks_available(&reason)) {
        GTEST_SKIP() << reason;
    }
    for (r = 0; r < runs; ++r) {
        child_result res = run_self("install_under_load", {});
        EXPECT_TRUE(res.exited_ok()) << "run " << r << ": " << res.str();
    }
}

/* ---- munmap from a signal handler ---- */

const unsigned SIG_REGIONS_MAX = 256;
const size_t SIG_REGION_PAGES  = 2;

struct sig_state {
    char *regions[SIG_REGIONS_MAX];
    unsigned count;
    std::atomic<int> hit[SIG_REGIONS_MAX];
    std::atomic<unsigned> next;
    std::atomic<unsigned> handled;
    std::atomic<unsigned> missed; /* event not seen right after munmap */
    std::atomic<bool> hang;
};
sig_state sigs;

/* handler (ucm): which region an event covers */
void sig_region_cb(ucm_event_type_t, ucm_event_t *event, void *)
{
    uintptr_t a = (uintptr_t)event->vm_unmapped.address;
    size_t len  = SIG_REGION_PAGES * page_size();
    unsigned i;

    for (i = 0; i < sigs.count; ++i) {
        if ((a <= (uintptr_t)sigs.regions[i]) &&
            ((uintptr_t)sigs.regions[i] + len <= a + event->vm_unmapped.size)) {
            sigs.hit[i] = 1;
        }
    }
}

/* signal handler: unmap the next region */
void sigusr1_handler(int)
{
    int saved_errno = errno;
    unsigned i      = sigs.next++;

    if (i < sigs.count) {
        munmap(sigs.regions[i], SIG_REGION_PAGES * page_size());
        if (!sigs.hit[i].load()) {
            ++sigs.missed;
        }
    }
    ++sigs.handled;
    errno = saved_errno;
}

struct signaller_arg {
    pthread_t target;
    unsigned count;
};

bool past(const struct timespec &deadline)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec > deadline.tv_sec) ||
           ((now.tv_sec == deadline.tv_sec) &&
            (now.tv_nsec >= deadline.tv_nsec));
}

/* Sends one signal at a time and waits until it was handled. */
void *signaller(void *arg)
{
    signaller_arg *sa = (signaller_arg *)arg;
    struct timespec deadline;
    unsigned k;

    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += 60;
    for (k = 0; k < sa->count; ++k) {
        pthread_kill(sa->target, SIGUSR1);
        while (sigs.handled.load() <= k) {
            if (past(deadline)) {
                sigs.hang = true;
                return NULL;
            }
            sched_yield();
        }
    }
    return NULL;
}

class signal_fixture_helper
{
  public:
    signal_fixture_helper(unsigned count) : m_ok(false)
    {
        struct sigaction sa;
        unsigned i;

        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = sigusr1_handler;
        sigemptyset(&sa.sa_mask);
        sigs.count   = 0;
        sigs.next    = 0;
        sigs.handled = 0;
        sigs.missed  = 0;
        sigs.hang    = false;
        for (i = 0; i < count; ++i) {
            sigs.regions[i] = (char *)map_anon(SIG_REGION_PAGES * page_size());
            sigs.hit[i]     = 0;
            if (sigs.regions[i] == NULL) {
                return;
            }
        }
        sigs.count = count;
        m_ok       = (sigaction(SIGUSR1, &sa, &m_old) == 0);
    }

    ~signal_fixture_helper()
    {
        unsigned i;

        sigaction(SIGUSR1, &m_old, NULL);
        for (i = sigs.next.load(); i < sigs.count; ++i) {
            munmap(sigs.regions[i], SIG_REGION_PAGES * page_size());
        }
        sigs.count = 0;
    }

    bool ok() const
    {
        return m_ok;
    }

  private:
    bool m_ok;
    struct sigaction m_old;
};

TEST_F(Signal, MunmapInSignalHandlerWhileLooping)
{
    const unsigned count = scaled(64, 8);
    const size_t ps      = page_size();
    signal_fixture_helper helper(count);
    signaller_arg sa = {pthread_self(), count};
    pthread_t thread;
    unsigned long iters = 0;
    unsigned i;

    ASSERT_TRUE(helper.ok());
    for (i = 0; i < count; ++i) {
        ASSERT_EQ(SIG_REGION_PAGES,
                  oracle::watch(sigs.regions[i], SIG_REGION_PAGES * ps));
    }
    ASSERT_EQ(UCS_OK, ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 0,
                                            sig_region_cb, NULL));
    oracle::arm();
    ASSERT_EQ(0, pthread_create(&thread, NULL, signaller, &sa));
    while ((sigs.handled.load() < count) && !sigs.hang.load() &&
           (iters < 100000000ul)) {
        void *p = mmap(NULL, ps, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED) {
            *(volatile char *)p = 1;
            munmap(p, ps);
        }
        ++iters;
    }
    pthread_join(thread, NULL);
    oracle_stats s = oracle::check();
    ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED, sig_region_cb, NULL);
    record(s);
    ASSERT_FALSE(sigs.hang.load()) << "a signal was not handled in 60 s";
    EXPECT_EQ(count, sigs.handled.load());
    EXPECT_EQ(0u, sigs.missed.load()) << "munmap in a signal handler without "
                                         "VM_UNMAPPED";
    EXPECT_EQ(count * SIG_REGION_PAGES, s.changed);
    UCMT_EXPECT_COVERED(s);
}

/*
 * The main thread loops sbrk(+page)/sbrk(-page) while signals arrive; the
 * handler's munmap must still be reported.  Signals are delivered when the
 * brk system call returns, i.e. inside the sbrk hook.  (Regression: libucm
 * once set a thread-local "bypass all hooks" flag around the original sbrk,
 * in src/ucm/mmap/ucm_mmap_hooks.c, and 3 of 4 such events were lost.)
 */
TEST_F(Signal, MunmapInSignalHandlerDuringSbrk)
{
    const unsigned count = scaled(200, 16);
    const size_t ps      = page_size();
    signal_fixture_helper helper(count);
    signaller_arg sa = {pthread_self(), count};
    pthread_t thread;
    unsigned long iters = 0;

    ASSERT_TRUE(helper.ok());
    ASSERT_EQ(UCS_OK, ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 0,
                                            sig_region_cb, NULL));
    ASSERT_EQ(0, pthread_create(&thread, NULL, signaller, &sa));
    while ((sigs.handled.load() < count) && !sigs.hang.load() &&
           (iters < 100000000ul)) {
        /* no malloc between the two calls: the heap top is ours */
        if (sbrk((intptr_t)ps) != (void *)-1) {
            sbrk(-(intptr_t)ps);
        }
        ++iters;
    }
    pthread_join(thread, NULL);
    ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED, sig_region_cb, NULL);
    ASSERT_FALSE(sigs.hang.load()) << "a signal was not handled in 60 s";
    EXPECT_EQ(count, sigs.handled.load());
    unsigned unreported = 0;
    for (unsigned i = 0; i < count; ++i) {
        unreported += !sigs.hit[i].load();
    }
    EXPECT_EQ(0u, unreported)
        << unreported << " of " << count
        << " munmap() calls made by a signal handler that interrupted "
           "sbrk() raised no VM_UNMAPPED";
}

} // namespace
