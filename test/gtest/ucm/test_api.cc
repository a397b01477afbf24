/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The API around the events: installation, self-test, external events,
 * original functions, /proc/self/maps parsing, handler priorities and
 * argument changes, handler removal, disabled events, configuration errors.
 */
#include "common/ucm_test.h"

#include <atomic>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>

namespace
{

using namespace ucmt;

const int ALL_MMAP_EVENTS =
    UCM_EVENT_MMAP | UCM_EVENT_MUNMAP | UCM_EVENT_MREMAP | UCM_EVENT_SHMAT |
    UCM_EVENT_SHMDT | UCM_EVENT_SBRK | UCM_EVENT_MADVISE | UCM_EVENT_BRK |
    UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED;
const int NATIVE_EVENTS = UCM_EVENT_MMAP | UCM_EVENT_MUNMAP | UCM_EVENT_MREMAP |
                          UCM_EVENT_SHMAT | UCM_EVENT_SHMDT | UCM_EVENT_SBRK |
                          UCM_EVENT_MADVISE | UCM_EVENT_BRK;

/* ---- installation ---- */

TEST(Install, HooksInstalledInRequestedMode)
{
    ucm_hook_info_t hooks[32];
    unsigned i, count;

    ucs_status_t status = ucm_hooks_install();
    if (status != UCS_OK) {
        Dl_info info;
        void *fn = dlsym(RTLD_DEFAULT, "munmap");
        std::string owner =
            (fn && dladdr(fn, &info) && info.dli_fname) ? info.dli_fname : "?";
        bool interposed = (owner.find("/libc.so") == std::string::npos);
        ADD_FAILURE()
            << "ucm_hooks_install() = " << (int)status << " in mode '"
            << mode_name(requested_mode()) << "'; munmap() resolves "
            << "to " << owner
            << (!interposed
                    ? ""
                    : "\n(regression? munmap/mmap/mremap/sbrk are "
                      "interposed ahead of libc, e.g. by tcmalloc, which "
                      "makes the system calls itself: libucm must hook "
                      "the interposer's GOT slots too, or the install "
                      "self-test fails and all events are disabled)");
        return;
    }
    EXPECT_EQ(requested_mode(), ucm_hooks_installed_mode())
        << "installed " << mode_name(ucm_hooks_installed_mode());
    count = ucm_hooks_query(hooks, 32);
    for (i = 0; (i < count) && (i < 32); ++i) {
        std::cout << "[ hook ] " << hooks[i].symbol << " state "
                  << (int)hooks[i].state << " " << hooks[i].detail << std::endl;
        if (hooks[i].events == 0) {
            continue; /* dlopen/dlclose: reloc bookkeeping only */
        }
        if ((hooks[i].state == UCM_HOOK_STATE_NONE) &&
            !strncmp(hooks[i].detail, "not needed", 10)) {
            continue; /* malloc-family wrappers where nothing is missed */
        }
        EXPECT_NE(UCM_HOOK_STATE_FAILED, hooks[i].state) << hooks[i].symbol;
        if (requested_mode() == UCM_MMAP_HOOK_BISTRO) {
            EXPECT_EQ(UCM_HOOK_STATE_BISTRO, hooks[i].state)
                << hooks[i].symbol << ": " << hooks[i].detail
                << " (glibc-internal calls of it would be missed)";
        } else {
            EXPECT_EQ(UCM_HOOK_STATE_RELOC, hooks[i].state) << hooks[i].symbol;
        }
    }
}

class Api : public ucmt::test
{
};

TEST_F(Api, TestEventsAll)
{
    int failed = -1;

    EXPECT_EQ(UCS_OK, ucm_test_events(ALL_MMAP_EVENTS));
    EXPECT_EQ(UCS_OK, ucm_test_events_detail(ALL_MMAP_EVENTS, &failed));
    EXPECT_EQ(0, failed);
}

TEST_F(Api, TestExternalEvents)
{
    int ext = UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED;

    ucm_set_external_event(ext);
    EXPECT_EQ(UCS_OK, ucm_test_external_events(ext));
    /* as UCX: events that are not external are not tested (native events
     * such as MUNMAP have no external source to check) */
    EXPECT_EQ(UCS_OK, ucm_test_external_events(ext | UCM_EVENT_MUNMAP |
                                               UCM_EVENT_MADVISE));
    ucm_unset_external_event(ext);
    EXPECT_EQ(UCS_OK, ucm_test_external_events(UCM_EVENT_MUNMAP));
}

TEST_F(Api, VmMunmapDeliversExactRange)
{
    const size_t ps = page_size();
    char *p         = (char *)map_anon(4 * ps);

    ASSERT_TRUE(p != NULL);
    ASSERT_EQ(4u, oracle::watch(p, 4 * ps));
    oracle::arm();
    ucm_vm_munmap(p + 100, 2 * ps + 5);
    oracle_stats s               = oracle::check();
    std::vector<event_record> ev = oracle::events(UCM_EVENT_VM_UNMAPPED);
    ASSERT_EQ(1u, ev.size());
    EXPECT_EQ((uintptr_t)p + 100, ev[0].addr);
    EXPECT_EQ(2 * ps + 5, ev[0].len);
    EXPECT_EQ(tid(), ev[0].tid) << "delivered in the caller's thread";
    EXPECT_EQ(3u, s.reported) << "delivered while the pages were mapped";
    EXPECT_EQ(0u, s.changed) << "ucm_vm_munmap must not unmap anything";
    munmap(p, 4 * ps);
}

TEST_F(Api, VmMmapDeliversExactRange)
{
    const size_t ps = page_size();
    char *p         = (char *)map_anon(ps);

    ASSERT_TRUE(p != NULL);
    oracle::arm();
    ucm_vm_mmap(p, ps);
    oracle::disarm();
    std::vector<event_record> ev = oracle::events(UCM_EVENT_VM_MAPPED);
    ASSERT_EQ(1u, ev.size());
    EXPECT_EQ((uintptr_t)p, ev[0].addr);
    EXPECT_EQ(ps, ev[0].len);
    EXPECT_EQ(0u, oracle::events(UCM_EVENT_VM_UNMAPPED).size());
    munmap(p, ps);
}

/* Counts every event of one thread. */
std::atomic<int> native_count(0);
std::atomic<pid_t> native_tid(0);

void count_cb(ucm_event_type_t, ucm_event_t *, void *)
{
    if (tid() == native_tid.load()) {
        ++native_count;
    }
}

TEST_F(Api, OrigFunctionsRaiseNoEvents)
{
    const size_t ps = page_size();

    native_count = 0;
    native_tid   = tid();
    ASSERT_EQ(UCS_OK, ucm_set_event_handler(NATIVE_EVENTS, 0, count_cb, NULL));
    oracle::arm();

    char *p = (char *)ucm_orig_mmap(NULL, 4 * ps, PROT_READ | PROT_WRITE,
                                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(MAP_FAILED, (void *)p);
    touch(p, 4 * ps);
    EXPECT_EQ(0, ucm_orig_madvise(p, ps, MADV_DONTNEED));
    EXPECT_EQ((void *)p, ucm_orig_mremap(p, 4 * ps, 2 * ps, 0));
    EXPECT_EQ(0, ucm_orig_munmap(p, 2 * ps));
    int id = shmget(IPC_PRIVATE, ps, IPC_CREAT | 0600);
    if (id >= 0) {
        void *a = ucm_orig_shmat(id, NULL, 0);
        EXPECT_NE((void *)-1, a);
        EXPECT_EQ(0, ucm_orig_shmdt(a));
        shmctl(id, IPC_RMID, NULL);
    }
    void *cur = ucm_orig_sbrk(0);
    EXPECT_NE((void *)-1, cur);
    EXPECT_EQ(0, ucm_orig_brk(cur));

    oracle::disarm();
    ucm_unset_event_handler(NATIVE_EVENTS, count_cb, NULL);
    EXPECT_EQ(0, native_count.load()) << "native events from ucm_orig_*";
    EXPECT_EQ(0u, oracle::events(UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED,
                                 NULL, 0, tid())
                      .size())
        << "VM events from ucm_orig_*";
}

struct maps_find {
    uintptr_t addr;
    bool found;
    size_t length;
    int prot;
    std::string path;
};

int maps_find_cb(void *arg, void *addr, size_t length, int prot,
                 const char *path)
{
    maps_find *f = (maps_find *)arg;

    if ((uintptr_t)addr == f->addr) {
        f->found  = true;
        f->length = length;
        f->prot   = prot;
        f->path   = path;
        return 1;
    }
    return 0;
}

TEST_F(Api, ParseProcSelfMapsFindsMapping)
{
    const size_t ps = page_size();
    /* PROT_NONE guards around it, so that it cannot merge with neighbours */
    char *r = (char *)mmap(NULL, 7 * ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
                           -1, 0);

    ASSERT_NE(MAP_FAILED, (void *)r);
    ASSERT_EQ((void *)(r + ps),
              mmap(r + ps, 5 * ps, PROT_READ,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0));
    maps_find f = {(uintptr_t)(r + ps), false, 0, 0, ""};
    ucm_parse_proc_self_maps(maps_find_cb, &f);
    ASSERT_TRUE(f.found);
    EXPECT_EQ(5 * ps, f.length);
    EXPECT_EQ(PROT_READ, f.prot);
    munmap(r, 7 * ps);

    int fd = memfd_create("ucmt-maps-probe", MFD_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(0, ftruncate(fd, 3 * ps));
    char *m =
        (char *)mmap(NULL, 3 * ps, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    ASSERT_NE(MAP_FAILED, (void *)m);
    maps_find g = {(uintptr_t)m, false, 0, 0, ""};
    ucm_parse_proc_self_maps(maps_find_cb, &g);
    ASSERT_TRUE(g.found);
    EXPECT_EQ(3 * ps, g.length);
    EXPECT_EQ(PROT_READ | PROT_WRITE, g.prot);
    EXPECT_NE(std::string::npos, g.path.find("ucmt-maps-probe")) << g.path;
    munmap(m, 3 * ps);
}

TEST_F(Api, InvalidArguments)
{
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 0, NULL, NULL));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED | (1 << 30), 0,
                                    count_cb, NULL));
}

/* UCX 1.13's semantics: a handler of no event is accepted (and reached by
 * nothing); flags alone are no event */
TEST_F(Api, HandlerOfNoEventIsAccepted)
{
    EXPECT_EQ(UCS_OK, ucm_set_event_handler(0, 0, count_cb, NULL));
    EXPECT_EQ(UCS_OK, ucm_set_event_handler(UCM_EVENT_FLAG_NO_INSTALL, 0,
                                            count_cb, NULL));
    ucm_unset_event_handler(0, count_cb, NULL);
    ucm_unset_event_handler(UCM_EVENT_FLAG_NO_INSTALL, count_cb, NULL);
}

/* ---- priorities ---- */

struct order_log {
    std::atomic<int> n;
    int munmap_prio[16];
    int vm_prio[16];
    std::atomic<int> vm_n;
    bool munmap_readable[16]; /* page still there? */
    int munmap_result[16];
    uintptr_t target;
    pid_t tid;
};
order_log olog;

struct prio_arg {
    int prio;
};

void order_cb(ucm_event_type_t type, ucm_event_t *event, void *arg)
{
    int prio = ((prio_arg *)arg)->prio;
    int i;

    if (tid() != olog.tid) {
        return;
    }
    if ((type == UCM_EVENT_MUNMAP) &&
        ((uintptr_t)event->munmap.address == olog.target)) {
        i = olog.n++;
        if (i < 16) {
            olog.munmap_prio[i]     = prio;
            olog.munmap_readable[i] = readable((void *)olog.target);
            olog.munmap_result[i]   = event->munmap.result;
        }
    } else if ((type == UCM_EVENT_VM_UNMAPPED) &&
               ((uintptr_t)event->vm_unmapped.address == olog.target)) {
        i = olog.vm_n++;
        if (i < 16) {
            olog.vm_prio[i] = prio;
        }
    }
}

TEST_F(Api, HandlersCalledInPriorityOrder)
{
    /* two handlers at -3: the one added first is called first */
    static prio_arg args[]      = {{5}, {-3}, {0}, {-10}, {10}, {-3}, {-1}};
    static const int expected[] = {-10, -3, -3, -1, 0, 5, 10};
    const int n                 = (int)(sizeof(args) / sizeof(args[0]));
    const size_t ps             = page_size();
    int i;

    olog.n    = 0;
    olog.vm_n = 0;
    olog.tid  = tid();
    char *p   = (char *)map_anon(ps);
    ASSERT_TRUE(p != NULL);
    olog.target = (uintptr_t)p;
    for (i = 0; i < n; ++i) {
        ASSERT_EQ(UCS_OK, ucm_set_event_handler(
                              UCM_EVENT_MUNMAP | UCM_EVENT_VM_UNMAPPED,
                              args[i].prio, order_cb, &args[i]));
    }
    ASSERT_EQ(0, munmap(p, ps));
    for (i = 0; i < n; ++i) {
        ucm_unset_event_handler(UCM_EVENT_MUNMAP | UCM_EVENT_VM_UNMAPPED,
                                order_cb, &args[i]);
    }
    ASSERT_EQ(n, olog.n.load());
    ASSERT_EQ(n, olog.vm_n.load());
    for (i = 0; i < n; ++i) {
        SCOPED_TRACE(testing::Message() << "call #" << i);
        EXPECT_EQ(expected[i], olog.munmap_prio[i]);
        EXPECT_EQ(expected[i], olog.vm_prio[i]);
        if (expected[i] < 0) {
            EXPECT_TRUE(olog.munmap_readable[i]) << "before the call";
        } else {
            EXPECT_FALSE(olog.munmap_readable[i]) << "after the call";
            EXPECT_EQ(0, olog.munmap_result[i]) << "sees the result";
        }
    }
}

/* The same-priority order, identified by argument. */
struct same_prio_log {
    std::atomic<int> n;
    int who[4];
    uintptr_t target;
};
same_prio_log splog;

void same_prio_cb(ucm_event_type_t, ucm_event_t *event, void *arg)
{
    if ((uintptr_t)event->vm_unmapped.address == splog.target) {
        int i = splog.n++;
        if (i < 4) {
            splog.who[i] = (int)(intptr_t)arg;
        }
    }
}

TEST_F(Api, EqualPrioritiesInInsertionOrder)
{
    const size_t ps = page_size();
    char *p         = (char *)map_anon(ps);
    int i;

    ASSERT_TRUE(p != NULL);
    splog.n      = 0;
    splog.target = (uintptr_t)p;
    for (i = 1; i <= 3; ++i) {
        ASSERT_EQ(UCS_OK,
                  ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 7, same_prio_cb,
                                        (void *)(intptr_t)i));
    }
    munmap(p, ps);
    for (i = 1; i <= 3; ++i) {
        ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED, same_prio_cb,
                                (void *)(intptr_t)i);
    }
    ASSERT_EQ(3, splog.n.load());
    EXPECT_EQ(1, splog.who[0]);
    EXPECT_EQ(2, splog.who[1]);
    EXPECT_EQ(3, splog.who[2]);
}

/* A handler before the call (priority < 0) shortens munmap to one page. */
uintptr_t shorten_target;

void shorten_cb(ucm_event_type_t type, ucm_event_t *event, void *)
{
    if ((type == UCM_EVENT_MUNMAP) &&
        ((uintptr_t)event->munmap.address == shorten_target)) {
        event->munmap.size = page_size();
    }
}

TEST_F(Api, NegativePriorityHandlerChangesMunmapLength)
{
    const size_t ps = page_size(), len = 4 * ps;
    char *p = (char *)map_anon(len);

    ASSERT_TRUE(p != NULL);
    shorten_target = (uintptr_t)p;
    ASSERT_EQ(4u, oracle::watch(p, len));
    ASSERT_EQ(UCS_OK,
              ucm_set_event_handler(UCM_EVENT_MUNMAP, -1, shorten_cb, NULL));
    oracle::arm();
    int ret        = munmap(p, len);
    oracle_stats s = oracle::check();
    ucm_unset_event_handler(UCM_EVENT_MUNMAP, shorten_cb, NULL);
    record(s);
    EXPECT_EQ(0, ret);
    EXPECT_FALSE(readable(p)) << "first page unmapped";
    EXPECT_TRUE(readable(p + ps)) << "the handler shortened the call";
    EXPECT_TRUE(readable(p + 3 * ps));
    EXPECT_EQ(1u, s.changed);
    UCMT_EXPECT_COVERED(s);
    munmap(p + ps, 3 * ps);
}

/* A handler before the call enlarges munmap from one page to four: the
 * pages that then go away must be announced.  (Regression: VM_UNMAPPED was
 * once dispatched with the caller's arguments before the priority < 0
 * handlers ran, in src/ucm/mmap/ucm_mmap_hooks.c, ucm_munmap().) */
uintptr_t enlarge_target;

void enlarge_cb(ucm_event_type_t type, ucm_event_t *event, void *)
{
    if ((type == UCM_EVENT_MUNMAP) &&
        ((uintptr_t)event->munmap.address == enlarge_target)) {
        event->munmap.size = 4 * page_size();
    }
}

TEST_F(Api, NegativePriorityHandlerEnlargesMunmap)
{
    const size_t ps = page_size(), len = 4 * ps;
    char *p = (char *)map_anon(len);

    ASSERT_TRUE(p != NULL);
    enlarge_target = (uintptr_t)p;
    ASSERT_EQ(4u, oracle::watch(p, len));
    ASSERT_EQ(UCS_OK,
              ucm_set_event_handler(UCM_EVENT_MUNMAP, -1, enlarge_cb, NULL));
    oracle::arm();
    int ret        = munmap(p, ps);
    oracle_stats s = oracle::check();
    ucm_unset_event_handler(UCM_EVENT_MUNMAP, enlarge_cb, NULL);
    record(s);
    EXPECT_EQ(0, ret);
    EXPECT_FALSE(readable(p + 3 * ps)) << "the handler enlarged the call";
    EXPECT_EQ(4u, s.changed);
    EXPECT_EQ(0u, s.uncovered)
        << "pages unmapped because a priority<0 handler changed the "
           "munmap arguments got no VM_UNMAPPED (dispatched with the "
           "original arguments?): "
        << s.str();
}

/* A VM_UNMAPPED handler that itself unmaps another region: the nested call
 * must be reported too, and nothing may deadlock. */
uintptr_t nested_outer, nested_inner;

void nested_cb(ucm_event_type_t, ucm_event_t *event, void *)
{
    if ((uintptr_t)event->vm_unmapped.address == nested_outer) {
        nested_outer = 0;
        munmap((void *)nested_inner, 2 * page_size());
    }
}

TEST_F(Api, HandlerMayUnmapFromHandler)
{
    const size_t ps = page_size();
    char *outer     = (char *)map_anon(2 * ps);
    char *inner     = (char *)map_anon(2 * ps);

    ASSERT_TRUE((outer != NULL) && (inner != NULL));
    ASSERT_EQ(2u, oracle::watch(outer, 2 * ps));
    ASSERT_EQ(2u, oracle::watch(inner, 2 * ps));
    nested_outer = (uintptr_t)outer;
    nested_inner = (uintptr_t)inner;
    /* before the oracle's handler (priority 0), so that the oracle sees
     * the inner event while the outer pages are still there */
    ASSERT_EQ(UCS_OK, ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, -1,
                                            nested_cb, NULL));
    oracle::arm();
    ASSERT_EQ(0, munmap(outer, 2 * ps));
    oracle_stats s = oracle::check();
    ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED, nested_cb, NULL);
    record(s);
    EXPECT_EQ(4u, s.changed);
    UCMT_EXPECT_COVERED(s);
    EXPECT_FALSE(readable(inner));
}

/* Removing some of a handler's events keeps the others. */
std::atomic<int> subset_mapped(0), subset_unmapped(0);

void subset_cb(ucm_event_type_t type, ucm_event_t *, void *)
{
    if (type == UCM_EVENT_VM_MAPPED) {
        ++subset_mapped;
    } else if (type == UCM_EVENT_VM_UNMAPPED) {
        ++subset_unmapped;
    }
}

TEST_F(Api, UnsetSubsetOfEvents)
{
    const size_t ps = page_size();

    subset_mapped   = 0;
    subset_unmapped = 0;
    ASSERT_EQ(UCS_OK,
              ucm_set_event_handler(UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED,
                                    0, subset_cb, NULL));
    ucm_unset_event_handler(UCM_EVENT_VM_MAPPED, subset_cb, NULL);
    void *p = map_anon(ps);
    ASSERT_TRUE(p != NULL);
    munmap(p, ps);
    ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED, subset_cb, NULL);
    EXPECT_EQ(0, subset_mapped.load());
    EXPECT_GE(subset_unmapped.load(), 1);
}

/* Memory-type events go to their handlers with the payload unchanged. */
struct memtype_seen {
    int type;
    void *addr;
    size_t size;
    ucs_memory_type_t mem_type;
    int calls;
};

void memtype_cb(ucm_event_type_t type, ucm_event_t *event, void *arg)
{
    memtype_seen *seen = (memtype_seen *)arg;

    seen->type     = type;
    seen->addr     = event->mem_type.address;
    seen->size     = event->mem_type.size;
    seen->mem_type = event->mem_type.mem_type;
    ++seen->calls;
}

TEST_F(Api, MemTypeEventsDispatched)
{
    memtype_seen seen = {0, NULL, 0, UCS_MEMORY_TYPE_HOST, 0};
    void *addr        = (void *)0x12345000ul;

    ASSERT_EQ(UCS_OK, ucm_set_event_handler(UCM_EVENT_MEM_TYPE_ALLOC |
                                                UCM_EVENT_MEM_TYPE_FREE,
                                            0, memtype_cb, &seen));
    ucm_dispatch_mem_type_alloc(addr, 8192, UCS_MEMORY_TYPE_CUDA);
    EXPECT_EQ(1, seen.calls);
    EXPECT_EQ(UCM_EVENT_MEM_TYPE_ALLOC, seen.type);
    EXPECT_EQ(addr, seen.addr);
    EXPECT_EQ(8192u, seen.size);
    EXPECT_EQ(UCS_MEMORY_TYPE_CUDA, seen.mem_type);
    ucm_dispatch_mem_type_free(addr, 4096, UCS_MEMORY_TYPE_CUDA);
    EXPECT_EQ(2, seen.calls);
    EXPECT_EQ(UCM_EVENT_MEM_TYPE_FREE, seen.type);
    EXPECT_EQ(4096u, seen.size);
    ucm_unset_event_handler(UCM_EVENT_MEM_TYPE_ALLOC | UCM_EVENT_MEM_TYPE_FREE,
                            memtype_cb, &seen);
    ucm_dispatch_mem_type_alloc(addr, 8192, UCS_MEMORY_TYPE_CUDA);
    EXPECT_EQ(2, seen.calls) << "delivered after unset";
}

/* ---- handler removal ---- */

std::atomic<int> unset_calls(0);

void unset_cb(ucm_event_type_t, ucm_event_t *, void *)
{
    ++unset_calls;
}

TEST_F(Api, UnsetHandlerStopsDelivery)
{
    const size_t ps = page_size();

    unset_calls = 0;
    ASSERT_EQ(UCS_OK,
              ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 0, unset_cb, NULL));
    void *p = map_anon(ps);
    ASSERT_TRUE(p != NULL);
    munmap(p, ps);
    EXPECT_GE(unset_calls.load(), 1);
    ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED, unset_cb, NULL);
    int after = unset_calls.load();
    p         = map_anon(ps);
    ASSERT_TRUE(p != NULL);
    munmap(p, ps);
    EXPECT_EQ(after, unset_calls.load());
}

/* Other threads keep unmapping; after ucm_unset_event_handler() returns the
 * handler must not be running and must never run again. */
struct unset_slot {
    std::atomic<int> active;
    std::atomic<bool> removed;
    std::atomic<long> calls;
    std::atomic<long> violations;
};

void unset_mt_cb(ucm_event_type_t, ucm_event_t *, void *arg)
{
    unset_slot *slot = (unset_slot *)arg;

    ++slot->active;
    ++slot->calls;
    if (slot->removed.load()) {
        ++slot->violations;
    }
    if (!on_valgrind()) {
        sched_yield(); /* widen the window */
    }
    if (slot->removed.load()) {
        ++slot->violations;
    }
    --slot->active;
}

std::atomic<bool> unset_stop(false);

/* Let other threads run: sched_yield(), or a short sleep under valgrind
 * (which runs one thread at a time and makes a yield loop very slow). */
void relax()
{
    static const struct timespec ts = {0, 200 * 1000};

    if (on_valgrind()) {
        nanosleep(&ts, NULL);
    } else {
        sched_yield();
    }
}

void *unset_worker(void *)
{
    const size_t ps = page_size();
    unsigned i;

    for (i = 0; !unset_stop.load() && (i < 10000000); ++i) {
        void *p = mmap(NULL, ps, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED) {
            munmap(p, ps);
        }
    }
    return NULL;
}

TEST_F(Api, UnsetHandlerMultiThreadNoLateCall)
{
    const unsigned rounds = scaled(100, 4), nthreads = scaled(3, 1);
    const unsigned wait_spins = scaled(100000, 200);
    pthread_t threads[3];
    unset_slot slot;
    long total_calls = 0, violations = 0, active_after = 0;
    unsigned r, i, spins;

    unset_stop = false;
    for (i = 0; i < nthreads; ++i) {
        ASSERT_EQ(0, pthread_create(&threads[i], NULL, unset_worker, NULL));
    }
    for (r = 0; r < rounds; ++r) {
        slot.active     = 0;
        slot.removed    = false;
        slot.calls      = 0;
        slot.violations = 0;
        ASSERT_EQ(UCS_OK, ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED |
                                                    UCM_EVENT_VM_MAPPED,
                                                0, unset_mt_cb, &slot));
        for (spins = 0; (slot.calls.load() < 3) && (spins < wait_spins);
             ++spins) {
            relax();
        }
        ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED | UCM_EVENT_VM_MAPPED,
                                unset_mt_cb, &slot);
        active_after += slot.active.load();
        slot.removed = true;
        /* give the workers a chance to (wrongly) call it again */
        for (spins = 0; spins < 20; ++spins) {
            relax();
        }
        total_calls += slot.calls.load();
        violations += slot.violations.load();
    }
    unset_stop = true;
    for (i = 0; i < nthreads; ++i) {
        pthread_join(threads[i], NULL);
    }
    EXPECT_EQ(0, active_after) << "handler still running after unset returned";
    EXPECT_EQ(0, violations) << "handler called after unset returned";
    EXPECT_GT(total_calls, 0) << "the handler never ran (test proves nothing)";
}

/* ---- disabled events, modes, configuration (fresh processes) ---- */

void dummy_cb(ucm_event_type_t, ucm_event_t *, void *)
{
}

TEST(Disabled, EnableEventsOffInForkedChild)
{
    pid_t pid = fork();

    if (pid == 0) {
        ucm_global_config_t opts = ucm_global_opts;
        opts.enable_events       = 0;
        ucm_set_global_opts(&opts);
        /* a handler of no event is still accepted (UCX 1.13: its test
         * malloc_hook_test_no_events.empty_event) */
        int ok = (ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 0, dummy_cb,
                                        NULL) == UCS_ERR_UNSUPPORTED) &&
                 (ucm_set_event_handler(0, 0, dummy_cb, NULL) == UCS_OK) &&
                 (ucm_hooks_install() == UCS_ERR_UNSUPPORTED);
        ucm_unset_event_handler(0, dummy_cb, NULL);
        _exit(ok ? 0 : 1);
    }
    ASSERT_GT(pid, 0);
    int status;
    bool timed_out;
    ASSERT_TRUE(wait_child(pid, 60, &status, &timed_out)) << "child hung";
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(0, WEXITSTATUS(status))
        << "ucm_set_event_handler() with enable_events=0 did not return "
           "UCS_ERR_UNSUPPORTED (or refused a handler of no event)";
}

UCMT_CHILD_SCENARIO(expect_unsupported)
{
    ucs_status_t status =
        ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 0, dummy_cb, NULL);
    printf("status=%d mode=%s installed=%s\n", (int)status,
           mode_name(ucm_global_opts.mmap_hook_mode),
           mode_name(ucm_hooks_installed_mode()));
    return (status == UCS_ERR_UNSUPPORTED) ? 0 : 1;
}

TEST(Disabled, MemEventsNoByEnvironment)
{
    child_result r = run_self("expect_unsupported", {{"UCX_MEM_EVENTS", "n"}});
    EXPECT_TRUE(r.exited_ok()) << r.str();
}

TEST(Disabled, HookModeNone)
{
    child_result r =
        run_self("expect_unsupported", {{"UCX_MEM_MMAP_HOOK_MODE", "none"}});
    EXPECT_TRUE(r.exited_ok()) << r.str();
}

/* Mode none refuses; switching to a real mode afterwards must work
 * (a refusal in mode none is not final). */
UCMT_CHILD_SCENARIO(mode_none_then_real)
{
    ucm_global_config_t opts = ucm_global_opts;

    opts.mmap_hook_mode = UCM_MMAP_HOOK_NONE;
    ucm_set_global_opts(&opts);
    if (ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 0, dummy_cb, NULL) !=
        UCS_ERR_UNSUPPORTED) {
        printf("mode none: handler accepted\n");
        return 1;
    }
    /* the mode the parent runs in (known to work there) */
    const char *target  = getenv("UCMT_TARGET_MODE");
    opts.mmap_hook_mode = (target && !strcmp(target, "reloc"))
                              ? UCM_MMAP_HOOK_RELOC
                              : UCM_MMAP_HOOK_BISTRO;
    ucm_set_global_opts(&opts);
    ucs_status_t status =
        ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 0, dummy_cb, NULL);
    printf("then %s: status %d, installed %s\n", mode_name(opts.mmap_hook_mode),
           (int)status, mode_name(ucm_hooks_installed_mode()));
    return ((status == UCS_OK) &&
            (ucm_hooks_installed_mode() == opts.mmap_hook_mode))
               ? 0
               : 2;
}

TEST(Disabled, HookModeNoneThenRealMode)
{
    std::string reason;

    if (!hooks_available(&reason)) {
        GTEST_SKIP() << reason;
    }
    child_result r =
        run_self("mode_none_then_real",
                 {{"UCX_MEM_MMAP_HOOK_MODE", NULL},
                  {"UCMT_TARGET_MODE", mode_name(requested_mode())}});
    EXPECT_TRUE(r.exited_ok()) << r.str();
}

std::atomic<int> ext_calls(0);
uintptr_t ext_addr;
size_t ext_len;

void ext_cb(ucm_event_type_t, ucm_event_t *event, void *)
{
    ++ext_calls;
    ext_addr = (uintptr_t)event->vm_unmapped.address;
    ext_len  = event->vm_unmapped.size;
}

/* Events declared external: no hooks installed, ucm_vm_munmap delivers. */
UCMT_CHILD_SCENARIO(external_events)
{
    const size_t ps = page_size();

    ucm_set_external_event(UCM_EVENT_VM_UNMAPPED);
    if (ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 0, ext_cb, NULL) !=
        UCS_OK) {
        printf("ucm_set_event_handler failed\n");
        return 1;
    }
    if (ucm_hooks_installed_mode() != UCM_MMAP_HOOK_NONE) {
        printf("hooks were installed for an external event\n");
        return 2;
    }
    void *p = mmap(NULL, ps, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(p, ps);
    if (ext_calls.load() != 0) {
        printf("munmap delivered an event without hooks\n");
        return 3;
    }
    ucm_vm_munmap(p, ps);
    if ((ext_calls.load() != 1) || (ext_addr != (uintptr_t)p) ||
        (ext_len != ps)) {
        printf("ucm_vm_munmap: %d calls\n", ext_calls.load());
        return 4;
    }
    return 0;
}

TEST(Disabled, ExternalEventsInstallNoHooks)
{
    child_result r = run_self("external_events", {});
    EXPECT_TRUE(r.exited_ok()) << r.str();
}

UCMT_CHILD_SCENARIO(print_mode)
{
    printf("mode=%s\n", mode_name(ucm_global_opts.mmap_hook_mode));
    return 0;
}

std::vector<std::string> nonempty_lines(const std::string &s)
{
    std::vector<std::string> lines;
    size_t pos = 0, nl;

    while (pos < s.size()) {
        nl = s.find('\n', pos);
        if (nl == std::string::npos) {
            nl = s.size();
        }
        if (nl > pos) {
            lines.push_back(s.substr(pos, nl - pos));
        }
        pos = nl + 1;
    }
    return lines;
}

TEST(Config, InvalidHookModeOneErrorLineKeepsDefault)
{
    child_result r =
        run_self("print_mode", {{"UCX_MEM_MMAP_HOOK_MODE", "garbage"},
                                {"UCX_MEM_LOG_LEVEL", NULL}});
    ASSERT_TRUE(r.exited_ok()) << r.str();
    EXPECT_EQ("mode=bistro\n", r.out) << "the default must be kept";
    std::vector<std::string> lines = nonempty_lines(r.err);
    ASSERT_EQ(1u, lines.size()) << "exactly one error line expected:\n"
                                << r.err;
    const std::string &l = lines[0];
    EXPECT_NE(std::string::npos, l.find("UCX_MEM_MMAP_HOOK_MODE")) << l;
    EXPECT_NE(std::string::npos, l.find("garbage")) << l;
    EXPECT_NE(std::string::npos, l.find("none")) << l;
    EXPECT_NE(std::string::npos, l.find("reloc")) << l;
    EXPECT_NE(std::string::npos, l.find("bistro")) << l;
}

TEST(Config, ValidHookModeNoOutput)
{
    child_result r =
        run_self("print_mode", {{"UCX_MEM_MMAP_HOOK_MODE", "reloc"},
                                {"UCX_MEM_LOG_LEVEL", NULL}});
    ASSERT_TRUE(r.exited_ok()) << r.str();
    EXPECT_EQ("mode=reloc\n", r.out);
    EXPECT_EQ("", r.err);
}

} // namespace
