/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * userfaultfd monitor: opening the descriptor, subscriptions, the reader
 * and dispatcher threads, and fork.  See ucm_ext.h for the contract and
 * ucm_uffd.h for the span table.
 *
 * Kernel semantics this relies on:
 *  - with UFFD_FEATURE_EVENT_UNMAP/REMOVE/REMAP, a thread that unmaps,
 *    mremaps or madvise(DONTNEED)s a registered range blocks (after
 *    dropping mmap_lock) until the monitor has read() the message.  Any
 *    thread may unmap while holding any lock (even from a signal handler
 *    that interrupted a locked section), so the reader thread takes no lock
 *    but its queue's (held only to copy messages): it reads, resolves
 *    missing-page faults and queues; the dispatcher thread updates the span
 *    table and calls the VM_UNMAPPED handlers, which may wait for locks.
 *  - once read() returned, the unmapper runs again and may look the old
 *    range up before VM_UNMAPPED was dispatched: ucm_uffd_draining is
 *    raised between poll() and read() and dropped by the dispatcher after
 *    that read cycle's reports, and lookups wait for it
 *    (ucm_uffd_drain_wait).
 *  - write-protect mode registration never faults unless pages are
 *    write-protected with UFFDIO_WRITEPROTECT, which we never do; missing
 *    mode (optional) faults on every unpopulated page, and the reader
 *    resolves those faults with zero pages.
 *  - without UFFD_FEATURE_EVENT_FORK a child's mappings are not registered;
 *    the child closes the inherited descriptor (reading it would steal the
 *    parent's events) and starts its own monitor at its next subscription.
 *  - the kernel drops a registration when the pages are unmapped.
 *    UFFDIO_UNREGISTER is made for the hooks (ucm_uffd_unwatch_range),
 *    just before a hooked call unmaps the range and after nobody can be
 *    subscribed there without a new registration, and for the destination
 *    of a reported mremap outside every span (the registration moved there
 *    with the pages); unsubscribing never unregisters (see
 *    ucm_uffd_unsubscribe).  Spans count against a VMA budget
 *    (ucm_uffd_budget.h).
 */
#include "config.h"
#include "ucm_uffd.h"
#include "ucm_uffd_budget.h"

#include <ucm/event/ucm_event.h>
#include <ucm/util/ucm_degrade.h>
#include <ucm/util/ucm_log.h>
#include <ucm/util/ucm_sys.h>

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#ifdef HAVE_VALGRIND_VALGRIND_H
#include <valgrind/valgrind.h>
#else
#define RUNNING_ON_VALGRIND 0
#endif

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

#define UCM_UFFD_FEATURES_NEEDED                                               \
    (UFFD_FEATURE_EVENT_UNMAP | UFFD_FEATURE_EVENT_REMOVE |                    \
     UFFD_FEATURE_EVENT_REMAP)
#define UCM_UFFD_FEATURES_WANTED                                               \
    (UCM_UFFD_FEATURES_NEEDED | UFFD_FEATURE_MISSING_SHMEM |                   \
     UFFD_FEATURE_MISSING_HUGETLBFS | UFFD_FEATURE_WP_HUGETLBFS_SHMEM)

/* Free nodes kept for the monitor (each event may split one span). */
#define UCM_UFFD_SPARE_NODES 64
/* Tries of a hooked call for the lock (about a system call's time) */
#define UCM_UFFD_UNWATCH_SPINS 1024
#define UCM_UFFD_BATCH         32

enum {
    UCM_UFFD_STATE_IDLE, /* not opened (yet, or again in a child) */
    UCM_UFFD_STATE_ACTIVE,
    UCM_UFFD_STATE_FAILED /* off, unavailable: reason says why */
};

/* One log line per kind of refusal, per process. */
enum {
    UCM_UFFD_ONCE_UNSUPPORTED,
    UCM_UFFD_ONCE_BUSY,
    UCM_UFFD_ONCE_OTHER,
    UCM_UFFD_ONCE_FAULT,
    UCM_UFFD_ONCE_LAST
};

pthread_mutex_t ucm_uffd_lock = PTHREAD_MUTEX_INITIALIZER;
volatile unsigned ucm_uffd_draining;

static const char *ucm_uffd_mode_names[]     = {"no", "try", "yes", NULL};
static const char *ucm_uffd_reg_mode_names[] = {"wp", "missing", NULL};

ucm_uffd_opts_t ucm_uffd_opts = {UCM_UFFD_MODE_TRY, 0, 65536, 0.125};

#define UCM_UFFD_FIELD(_name, _dfl, _doc, _field, _type, _names)               \
    {                                                                          \
        _name, _dfl, _doc, offsetof(ucm_uffd_opts_t, _field), _type, _names    \
    }

const ucs_config_field_t ucm_uffd_config_table[] = {
    UCM_UFFD_FIELD("MEM_UFFD", "try",
                   "Report unmaps of registration-cache ranges through "
                   "userfaultfd too (raw syscalls, dlclose, madvise): no, "
                   "try (if the kernel allows), yes (required)",
                   mode, UCS_CONFIG_TYPE_ENUM, ucm_uffd_mode_names),
    UCM_UFFD_FIELD("MEM_UFFD_REGISTER_MODE", "wp",
                   "userfaultfd registration: wp (never faults) or missing "
                   "(faults on unpopulated pages, resolved with zero pages)",
                   register_missing, UCS_CONFIG_TYPE_ENUM,
                   ucm_uffd_reg_mode_names),
    UCM_UFFD_FIELD("MEM_UFFD_GRAIN", "64k",
                   "Register subscribed ranges widened to this alignment when "
                   "all of it is mapped and registrable (fewer kernel VMAs "
                   "and registrations; unmaps of neighbours then cost a "
                   "monitor round trip too)",
                   grain, UCS_CONFIG_TYPE_SIZE, NULL),
    UCM_UFFD_FIELD("MEM_UFFD_VMA_SHARE", "0.125",
                   "Most of vm.max_map_count the monitor's registrations may "
                   "take (each may split a mapping in three); beyond it, "
                   "regions are left to the hooks (raw-syscall unmaps of "
                   "them are then not caught)",
                   vma_share, UCS_CONFIG_TYPE_DOUBLE, NULL),
    {NULL, NULL, NULL, 0, UCS_CONFIG_TYPE_BOOL, NULL}};

static int ucm_uffd_state = UCM_UFFD_STATE_IDLE;
static int ucm_uffd_fd    = -1;
static uint64_t ucm_uffd_features;
static uint64_t ucm_uffd_seq; /* last span lineage handed out */
static int ucm_uffd_atfork_done;
static char ucm_uffd_reason[160] = "not started (no registration cache yet)";
static int ucm_uffd_once[UCM_UFFD_ONCE_LAST];
/* monitor threads that have started running (see ucm_uffd_threads_wait) */
static int ucm_uffd_threads_up;
static __thread int ucm_uffd_on_monitor
    __attribute__((tls_model("initial-exec")));

static struct {
    unsigned long registers, dedups, unsupported, busy;
    unsigned long events, faults; /* atomic (monitor thread) */
    unsigned long unwatched;      /* spans' pages taken out by hooks */
    unsigned long unwatch_busy;   /* hooked calls left to the monitor */
} ucm_uffd_stats;

#define ucm_uffd_stat_add(_field)                                              \
    __atomic_add_fetch(&ucm_uffd_stats._field, 1, __ATOMIC_RELAXED)

static inline void ucm_uffd_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
#endif
}

static int ucm_uffd_first(int kind)
{
    return !__atomic_exchange_n(&ucm_uffd_once[kind], 1, __ATOMIC_RELAXED);
}

/* Dispatch VM_UNMAPPED to every handler (monitor thread). */
static void ucm_uffd_dispatch(uintptr_t start, uintptr_t end)
{
    ucm_event_list_t *list;
    ucm_event_t event;

    if (end <= start) {
        return;
    }
    ucm_uffd_stat_add(events);
    ucm_rcu_read_lock();
    list = ucm_event_list_get();
    if (list->events & UCM_EVENT_VM_UNMAPPED) {
        event.vm_unmapped.address = (void *)start;
        event.vm_unmapped.size    = end - start;
        ucm_event_call_all(list, UCM_EVENT_VM_UNMAPPED, &event);
    }
    ucm_rcu_read_unlock();
}

/* A missing-mode fault: map a zero page, or wake the thread if the page
 * appeared meanwhile; if neither works, unregister the page so that the
 * fault is retried without us (the range falls back to the hooks). */
static void ucm_uffd_resolve_fault(uintptr_t addr)
{
    size_t page                 = ucm_sys_page_size();
    struct uffdio_zeropage zero = {{addr & ~(page - 1), page}, 0, 0};
    struct uffdio_range range   = zero.range;

    ucm_uffd_stat_add(faults);
    if (ioctl(ucm_uffd_fd, UFFDIO_ZEROPAGE, &zero) == 0) {
        return;
    }
    if ((errno == EEXIST) && (ioctl(ucm_uffd_fd, UFFDIO_WAKE, &range) == 0)) {
        return;
    }
    if (ucm_uffd_first(UCM_UFFD_ONCE_FAULT)) {
        ucm_warn("userfaultfd: cannot resolve a fault at 0x%lx (%s); "
                 "unregistering it, hooks only there",
                 (unsigned long)addr, strerror(errno));
    }
    (void)ioctl(ucm_uffd_fd, UFFDIO_UNREGISTER, &range);
}

/* Messages the reader hands to the dispatcher (event 0: end of one read
 * cycle, after which the dispatcher lowers ucm_uffd_draining).  The reader
 * never waits for the dispatcher: when the queue is full it drops it all
 * and has everything reported unmapped instead (overflow). */
#define UCM_UFFD_QUEUE 4096

static struct {
    pthread_mutex_t lock; /* held only to copy entries in or out */
    pthread_cond_t cond;
    struct uffd_msg msgs[UCM_UFFD_QUEUE];
    unsigned head, count;
    int overflow;
    unsigned overflow_marks; /* read cycles dropped with it */
} ucm_uffd_queue = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};

static void ucm_uffd_queue_push(const struct uffd_msg *msg)
{
    unsigned i;

    pthread_mutex_lock(&ucm_uffd_queue.lock);
    if (ucm_uffd_queue.count == UCM_UFFD_QUEUE) {
        for (i = 0; i < UCM_UFFD_QUEUE; ++i) {
            ucm_uffd_queue.overflow_marks +=
                (ucm_uffd_queue.msgs[i].event == 0);
        }
        ucm_uffd_queue.count    = 0;
        ucm_uffd_queue.overflow = 1;
    }
    ucm_uffd_queue
        .msgs[(ucm_uffd_queue.head + ucm_uffd_queue.count) % UCM_UFFD_QUEUE] =
        *msg;
    ++ucm_uffd_queue.count;
    pthread_cond_signal(&ucm_uffd_queue.cond);
    pthread_mutex_unlock(&ucm_uffd_queue.lock);
}

/* UFFDIO_UNREGISTER the parts of [start, end) no span covers (lock held):
 * a subscription that registered a part since keeps it.  Failures (a hole,
 * a mapping that cannot be registered) leave pages registered, unowned:
 * a cost outside the budget, never a missed event. */
static void ucm_uffd_unregister_gaps_locked(uintptr_t start, uintptr_t end)
{
    struct uffdio_range range;
    ucm_uffd_span_t *span;
    uintptr_t next = start, gap_end;

    while (next < end) {
        span    = ucm_uffd_table_first_after(next);
        gap_end = ((span == NULL) || (span->start > end)) ? end : span->start;
        if (gap_end > next) {
            range.start = next;
            range.len   = gap_end - next;
            (void)ioctl(ucm_uffd_fd, UFFDIO_UNREGISTER, &range);
        }
        if ((span == NULL) || (span->end >= end)) {
            break;
        }
        next = (span->end > next) ? span->end : next + 1;
    }
}

/* Handle one batch from the queue: span table first (under the lock),
 * then the handlers (no lock) and the ends of read cycles, in order. */
static void ucm_uffd_handle(const struct uffd_msg *msgs, unsigned count)
{
    const struct uffd_msg *msg;
    unsigned i;

    pthread_mutex_lock(&ucm_uffd_lock);
    for (i = 0; i < count; ++i) {
        msg = &msgs[i];
        if (msg->event == UFFD_EVENT_UNMAP) {
            ucm_uffd_table_cut(msg->arg.remove.start, msg->arg.remove.end);
        } else if (msg->event == UFFD_EVENT_REMAP) {
            /* the registration moves with the mapping: the new place is
             * taken out of it (it is not in the table; its VMAs would
             * count against vm.max_map_count, outside the budget) */
            ucm_uffd_table_cut(msg->arg.remap.from,
                               msg->arg.remap.from + msg->arg.remap.len);
            ucm_uffd_unregister_gaps_locked(
                msg->arg.remap.to, msg->arg.remap.to + msg->arg.remap.len);
        }
    }
    (void)ucm_uffd_table_reserve(UCM_UFFD_SPARE_NODES);
    pthread_mutex_unlock(&ucm_uffd_lock);

    for (i = 0; i < count; ++i) {
        msg = &msgs[i];
        switch (msg->event) {
        case 0:
            __atomic_sub_fetch(&ucm_uffd_draining, 1, __ATOMIC_SEQ_CST);
            break;
        case UFFD_EVENT_UNMAP:
        case UFFD_EVENT_REMOVE:
            ucm_uffd_dispatch(msg->arg.remove.start, msg->arg.remove.end);
            break;
        case UFFD_EVENT_REMAP:
            ucm_uffd_dispatch(msg->arg.remap.from,
                              msg->arg.remap.from + msg->arg.remap.len);
            break;
        default: break;
        }
    }
}

/* Dispatcher thread: runs the handlers, which may wait for locks that an
 * unmapping thread holds (e.g. a cache's lock held by a thread whose
 * signal handler unmaps): only the reader must never wait. */
static void *ucm_uffd_dispatcher(void *arg)
{
    struct uffd_msg msgs[UCM_UFFD_BATCH];
    unsigned count, marks, i;
    int overflow;

    ucm_uffd_on_monitor = 1;
    __atomic_add_fetch(&ucm_uffd_threads_up, 1, __ATOMIC_RELEASE);
    for (;;) {
        pthread_mutex_lock(&ucm_uffd_queue.lock);
        while ((ucm_uffd_queue.count == 0) && !ucm_uffd_queue.overflow) {
            pthread_cond_wait(&ucm_uffd_queue.cond, &ucm_uffd_queue.lock);
        }
        count = (ucm_uffd_queue.count < UCM_UFFD_BATCH) ? ucm_uffd_queue.count
                                                        : UCM_UFFD_BATCH;
        for (i = 0; i < count; ++i) {
            msgs[i] =
                ucm_uffd_queue.msgs[(ucm_uffd_queue.head + i) % UCM_UFFD_QUEUE];
        }
        ucm_uffd_queue.head = (ucm_uffd_queue.head + count) % UCM_UFFD_QUEUE;
        ucm_uffd_queue.count -= count;
        overflow                      = ucm_uffd_queue.overflow;
        marks                         = ucm_uffd_queue.overflow_marks;
        ucm_uffd_queue.overflow       = 0;
        ucm_uffd_queue.overflow_marks = 0;
        pthread_mutex_unlock(&ucm_uffd_queue.lock);

        ucm_uffd_handle(msgs, count);
        if (overflow) {
            /* dropped reports: anything may be gone */
            pthread_mutex_lock(&ucm_uffd_lock);
            ucm_uffd_table_reset();
            pthread_mutex_unlock(&ucm_uffd_lock);
            ucm_uffd_dispatch(0, ~(uintptr_t)(ucm_sys_page_size() - 1));
            __atomic_sub_fetch(&ucm_uffd_draining, marks, __ATOMIC_SEQ_CST);
        }
    }
    return NULL;
}

/* Reader thread: reads every report as soon as it comes (the unmapping
 * thread waits for that) and takes no lock but the queue's, which nobody
 * holds while unmapping. */
static void *ucm_uffd_reader(void *arg)
{
    int fd = (int)(intptr_t)arg;
    static const struct uffd_msg mark;
    struct uffd_msg msgs[UCM_UFFD_BATCH];
    ssize_t ret;
    unsigned i;

    ucm_uffd_on_monitor = 1;
    __atomic_add_fetch(&ucm_uffd_threads_up, 1, __ATOMIC_RELEASE);
    while (ucm_sys_wait_readable(fd) == 0) {
        /* before read(): the unmappers resume as soon as it returns */
        __atomic_add_fetch(&ucm_uffd_draining, 1, __ATOMIC_SEQ_CST);
        while ((ret = read(fd, msgs, sizeof(msgs))) > 0) {
            for (i = 0; i < ret / sizeof(msgs[0]); ++i) {
                if (msgs[i].event == UFFD_EVENT_PAGEFAULT) {
                    ucm_uffd_resolve_fault(msgs[i].arg.pagefault.address);
                } else {
                    ucm_uffd_queue_push(&msgs[i]);
                }
            }
        }
        ucm_uffd_queue_push(&mark);
        if ((ret < 0) && (errno != EAGAIN) && (errno != EINTR)) {
            break;
        }
    }
    ucm_error("userfaultfd monitor stopped: %s", strerror(errno));
    return NULL;
}

void ucm_uffd_drain_wait(void)
{
    if (ucm_uffd_on_monitor) {
        return;
    }
    while (__atomic_load_n(&ucm_uffd_draining, __ATOMIC_ACQUIRE) != 0) {
        ucm_sys_sched_yield();
    }
}

static void ucm_uffd_atfork_prepare(void)
{
    pthread_mutex_lock(&ucm_uffd_lock);
}

static void ucm_uffd_atfork_parent(void)
{
    pthread_mutex_unlock(&ucm_uffd_lock);
}

static void ucm_uffd_atfork_child(void)
{
    pthread_mutex_unlock(&ucm_uffd_lock);
    if (ucm_uffd_fd >= 0) {
        ucm_sys_close(ucm_uffd_fd);
        ucm_uffd_fd = -1;
    }
    ucm_uffd_table_reset();
    ucm_uffd_draining = 0;
    pthread_mutex_init(&ucm_uffd_queue.lock, NULL);
    pthread_cond_init(&ucm_uffd_queue.cond, NULL);
    ucm_uffd_queue.count          = 0;
    ucm_uffd_queue.overflow       = 0;
    ucm_uffd_queue.overflow_marks = 0;
    if (ucm_uffd_state == UCM_UFFD_STATE_ACTIVE) {
        __atomic_store_n(&ucm_uffd_state, UCM_UFFD_STATE_IDLE,
                         __ATOMIC_RELAXED);
        snprintf(ucm_uffd_reason, sizeof(ucm_uffd_reason),
                 "forked child: restarts at the next subscription");
    }
}

/* Wait until both monitor threads run (bounded): no unmap may wait for a
 * reader that is not there yet, and a fork() right after the start must not
 * find them inside their start-up (where a sanitizer's allocator holds
 * locks that a forked child would inherit held).  0, or ETIMEDOUT. */
static int ucm_uffd_threads_wait(void)
{
    struct timespec pause = {0, 100000}; /* 100 us */
    unsigned i;

    for (i = 0; i < 100000; ++i) { /* 10 s */
        if (__atomic_load_n(&ucm_uffd_threads_up, __ATOMIC_ACQUIRE) == 2) {
            return 0;
        }
        nanosleep(&pause, NULL);
    }
    return ETIMEDOUT;
}

/* Fail the start with a reason (one line: error under yes, a degradation
 * under try). */
static void ucm_uffd_fail_locked(const char *what, int err)
{
    __atomic_store_n(&ucm_uffd_state, UCM_UFFD_STATE_FAILED, __ATOMIC_RELAXED);
    if (err != 0) {
        snprintf(ucm_uffd_reason, sizeof(ucm_uffd_reason), "%s: %s", what,
                 strerror(err));
    } else {
        snprintf(ucm_uffd_reason, sizeof(ucm_uffd_reason), "%s", what);
    }
    if (ucm_uffd_opts.mode == UCM_UFFD_MODE_YES) {
        ucm_error("UCX_MEM_UFFD=yes but userfaultfd is unavailable (%s)",
                  ucm_uffd_reason);
    } else if (ucm_uffd_opts.mode == UCM_UFFD_MODE_TRY) {
        ucm_degrade_report(UCM_DEGRADE_UFFD, err,
                           "unmaps of subscribed memory that bypass libucm's "
                           "hooks (raw system calls, the loader) are not "
                           "caught: userfaultfd unavailable (%s)",
                           ucm_uffd_reason);
    }
}

static int ucm_uffd_open_fd(void)
{
    int fd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);

    if ((fd < 0) && (errno == EPERM)) {
        /* vm.unprivileged_userfaultfd=0: user-mode faults only suffice */
        fd = syscall(SYS_userfaultfd,
                     O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
    }
    return fd;
}

/* The hooks' summary of the span table (ucm_uffd.h), allocated once and
 * claimed by this process; 0 when it cannot be wiped on fork (the hooks
 * then leave every unmap to the monitor). */
static int ucm_uffd_watch_init_locked(void)
{
    size_t size = (sizeof(ucm_uffd_watch_t) + ucm_sys_page_size() - 1) &
                  ~(ucm_sys_page_size() - 1);
    long ret;

    if (ucm_uffd_watch == NULL) {
        ret = ucm_sys_mmap(NULL, size, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (ucm_sys_is_err(ret)) {
            return 0;
        }
        if (ucm_sys_is_err(
                ucm_sys_madvise((void *)ret, size, MADV_WIPEONFORK))) {
            ucm_diag("userfaultfd: MADV_WIPEONFORK unsupported: hooked "
                     "unmaps of subscribed ranges wait for the monitor");
            ucm_sys_munmap((void *)ret, size);
            return 0;
        }
        ucm_uffd_watch = (ucm_uffd_watch_t *)ret;
    }
    /* zero here, or wiped in a forked child: no span is counted */
    ucm_uffd_watch->owner = 1;
    return 1;
}

/* Take [start, end) out of the registration and the table (lock held).
 * Spans one by one: a gap between them may hold a mapping that cannot be
 * registered, which would fail a single UFFDIO_UNREGISTER for all. */
static void ucm_uffd_unwatch_locked(uintptr_t start, uintptr_t end)
{
    struct uffdio_range range;
    ucm_uffd_span_t *span;
    uintptr_t next;
    int found = 0;

    for (next = start; ((span = ucm_uffd_table_first_after(next)) != NULL) &&
                       (span->start < end);
         next = span->end) {
        range.start = (span->start > start) ? span->start : start;
        range.len   = ((span->end < end) ? span->end : end) - range.start;
        /* a failure (a mapping made in a hole the monitor has not cut
         * yet) leaves pages registered but out of the table: their unmap
         * is still reported, by the monitor */
        (void)ucm_sys_syscall6(SYS_ioctl, ucm_uffd_fd, UFFDIO_UNREGISTER,
                               (long)&range, 0, 0, 0);
        found = 1;
        if (span->end >= end) {
            break;
        }
    }
    if (found) {
        ucm_uffd_table_cut(start, end);
        ++ucm_uffd_stats.unwatched;
    }
}

void ucm_uffd_unwatch_range(void *addr, size_t len)
{
    uintptr_t mask  = ucm_sys_page_size() - 1;
    uintptr_t start = (uintptr_t)addr;
    uintptr_t end   = start + len;
    ucm_uffd_watch_t *w;
    int i;

    w = __atomic_load_n((ucm_uffd_watch_t **)&ucm_hot.uffd_watch,
                        __ATOMIC_ACQUIRE);
    /* an unaligned address fails the call: nothing goes away */
    if ((w == NULL) || (w->owner == 0) || (len == 0) || (start & mask) ||
        (end < start) || (((end + mask) & ~mask) < end)) {
        return;
    }
    end = (end + mask) & ~mask;
    if (!ucm_uffd_watch_may_intersect(w, start, end)) {
        return;
    }
    /* never wait: the holder may be this thread (a signal handler), or wait
     * for a lock that this thread holds (pthread_create's stack cache) */
    for (i = 0; pthread_mutex_trylock(&ucm_uffd_lock) != 0; ++i) {
        if (i == UCM_UFFD_UNWATCH_SPINS) {
            ucm_uffd_stat_add(unwatch_busy);
            return;
        }
        ucm_uffd_cpu_relax();
    }
    if (__atomic_load_n(&ucm_uffd_state, __ATOMIC_RELAXED) ==
        UCM_UFFD_STATE_ACTIVE) {
        ucm_uffd_unwatch_locked(start, end);
    }
    /* the table generation is visible before the caller's handlers read
     * what subscribers wrote before their lock-free check of it */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&ucm_uffd_lock);
}

/* Open, negotiate features, start the thread (ucm_uffd_lock held). */
static void ucm_uffd_open_locked(void)
{
    struct uffdio_api api = {UFFD_API, 0, 0};
    uint64_t features;
    pthread_attr_t attr;
    sigset_t all, old;
    pthread_t thread;
    int fd, err;

    if (ucm_uffd_opts.mode == UCM_UFFD_MODE_NO) {
        ucm_uffd_fail_locked("disabled by UCX_MEM_UFFD=no", 0);
        return;
    }
    if (RUNNING_ON_VALGRIND) {
        ucm_uffd_fail_locked("not supported under valgrind", 0);
        return;
    }
    /* the first handshake only asks what the kernel supports */
    fd = ucm_uffd_open_fd();
    if (fd < 0) {
        ucm_uffd_fail_locked("userfaultfd()", errno);
        return;
    }
    err = (ioctl(fd, UFFDIO_API, &api) < 0) ? errno : 0;
    close(fd);
    if (err != 0) {
        ucm_uffd_fail_locked("UFFDIO_API", err);
        return;
    }
    if ((api.features & UCM_UFFD_FEATURES_NEEDED) != UCM_UFFD_FEATURES_NEEDED) {
        ucm_uffd_fail_locked("kernel lacks UFFD_FEATURE_EVENT_UNMAP/REMOVE/"
                             "REMAP",
                             0);
        return;
    }

    fd = ucm_uffd_open_fd();
    if (fd < 0) {
        ucm_uffd_fail_locked("userfaultfd()", errno);
        return;
    }
    api.api      = UFFD_API;
    api.features = api.features & UCM_UFFD_FEATURES_WANTED;
    features     = api.features; /* the kernel answers with all it has */
    api.ioctls   = 0;
    if (ioctl(fd, UFFDIO_API, &api) < 0) {
        err = errno;
        goto err_close;
    }
    if (ucm_uffd_table_reserve(UCM_UFFD_SPARE_NODES) != UCS_OK) {
        err = ENOMEM;
        goto err_close;
    }
    ucm_uffd_opts.vma_share = ucm_uffd_budget_init(ucm_uffd_opts.vma_share);
    (void)ucm_uffd_watch_init_locked();
    if (!ucm_uffd_atfork_done) {
        pthread_atfork(ucm_uffd_atfork_prepare, ucm_uffd_atfork_parent,
                       ucm_uffd_atfork_child);
        ucm_uffd_atfork_done = 1;
    }

    /* the monitor takes no signal: a handler there could unmap */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    ucm_uffd_threads_up = 0;
    err = pthread_create(&thread, &attr, ucm_uffd_dispatcher, NULL);
    if (err == 0) {
        err = pthread_create(&thread, &attr, ucm_uffd_reader,
                             (void *)(intptr_t)fd);
    }
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err != 0) {
        goto err_close;
    }
    if (ucm_uffd_threads_wait() != 0) {
        /* fd stays open: a late reader must not poll a reused number */
        ucm_uffd_fail_locked("monitor threads did not start in 10 s", 0);
        return;
    }

    ucm_uffd_fd       = fd;
    ucm_uffd_features = features;
    __atomic_store_n(&ucm_uffd_state, UCM_UFFD_STATE_ACTIVE, __ATOMIC_RELEASE);
    snprintf(ucm_uffd_reason, sizeof(ucm_uffd_reason),
             "active, %s mode registration, features 0x%llx",
             ucm_uffd_opts.register_missing ? "missing" : "write-protect",
             (unsigned long long)features);
    ucm_diag("userfaultfd monitor started (%s)", ucm_uffd_reason);
    return;

err_close:
    close(fd);
    ucm_uffd_fail_locked("userfaultfd set-up", err);
}

ucs_status_t ucm_uffd_start(int *active_p)
{
    int active;

    pthread_mutex_lock(&ucm_uffd_lock);
    if (ucm_uffd_state == UCM_UFFD_STATE_IDLE) {
        ucm_uffd_open_locked();
    }
    active = (ucm_uffd_state == UCM_UFFD_STATE_ACTIVE);
    pthread_mutex_unlock(&ucm_uffd_lock);

    if (!active && (ucm_uffd_opts.mode == UCM_UFFD_MODE_YES)) {
        return UCS_ERR_UNSUPPORTED;
    }
    if (active_p != NULL) {
        *active_p = active;
    }
    return UCS_OK;
}

/* UFFDIO_REGISTER of [start, end), all mapped (ucm_uffd_lock held).
 * quiet: a widened attempt, whose failure is neither counted nor logged. */
static ucs_status_t ucm_uffd_register_locked(uintptr_t start, uintptr_t end,
                                             int quiet)
{
    struct uffdio_register reg;

    /* UFFDIO_REGISTER accepts holes, but a span must never claim one (a
     * mapping made there later would not be registered).  A hole made
     * after this check by an unmap of a registered range is cut from the
     * span by the monitor, which waits for ucm_uffd_lock. */
    if (ucm_sys_is_err(ucm_sys_syscall6(SYS_msync, start, end - start, MS_ASYNC,
                                        0, 0, 0))) {
        return UCS_ERR_INVALID_ADDR;
    }
    memset(&reg, 0, sizeof(reg));
    reg.range.start = start;
    reg.range.len   = end - start;
    reg.mode = ucm_uffd_opts.register_missing ? UFFDIO_REGISTER_MODE_MISSING
                                              : UFFDIO_REGISTER_MODE_WP;
    if (ioctl(ucm_uffd_fd, UFFDIO_REGISTER, &reg) == 0) {
        ++ucm_uffd_stats.registers;
        return UCS_OK;
    }
    if (quiet) {
        return UCS_ERR_UNSUPPORTED;
    }
    if (errno == EBUSY) {
        ++ucm_uffd_stats.busy;
        if (ucm_uffd_first(UCM_UFFD_ONCE_BUSY)) {
            ucm_diag("userfaultfd: [0x%lx, 0x%lx) belongs to another "
                     "userfaultfd; hooks only for such ranges",
                     (unsigned long)start, (unsigned long)end);
        }
        return UCS_ERR_BUSY;
    }
    ++ucm_uffd_stats.unsupported;
    if (ucm_uffd_first((errno == EINVAL) ? UCM_UFFD_ONCE_UNSUPPORTED
                                         : UCM_UFFD_ONCE_OTHER)) {
        ucm_diag("userfaultfd: cannot register [0x%lx, 0x%lx): %s (e.g. a "
                 "file-backed mapping); hooks only for such ranges",
                 (unsigned long)start, (unsigned long)end, strerror(errno));
    }
    return UCS_ERR_UNSUPPORTED;
}

/* Register [*start_p, *end_p), first widened to UCX_MEM_UFFD_GRAIN when
 * that is larger (fewer VMAs, more subscriptions without a system call);
 * on success the range actually registered is returned.  Write-protect
 * mode only: in missing mode, neighbours' page faults (the monitor's own
 * data among them) would wait for the monitor. */
static ucs_status_t ucm_uffd_register_span_locked(uintptr_t *start_p,
                                                  uintptr_t *end_p)
{
    size_t page  = ucm_sys_page_size();
    size_t grain = (ucm_uffd_opts.grain + page - 1) & ~(page - 1);
    uintptr_t gs, ge;

    if ((grain > page) && !ucm_uffd_opts.register_missing) {
        gs = *start_p - (*start_p % grain);
        ge = *end_p + ((*end_p % grain) ? grain - (*end_p % grain) : 0);
        if ((ge > gs) && ((gs != *start_p) || (ge != *end_p)) &&
            (ucm_uffd_register_locked(gs, ge, 1) == UCS_OK)) {
            *start_p = gs;
            *end_p   = ge;
            return UCS_OK;
        }
    }
    return ucm_uffd_register_locked(*start_p, *end_p, 0);
}

static void ucm_uffd_page_align(void *addr, size_t len, uintptr_t *start_p,
                                uintptr_t *end_p)
{
    uintptr_t mask = ucm_sys_page_size() - 1;
    uintptr_t end  = (uintptr_t)addr + len;

    *start_p = (uintptr_t)addr & ~mask;
    *end_p   = (end < (uintptr_t)addr) ? ~mask : ((end + mask) & ~mask);
}

/* The span the last locked subscription found or made, for subscriptions
 * without the lock: a sequence lock (seq odd while written) over a copy that
 * is valid while the table generation is the one it was taken at. */
static struct {
    unsigned long seq;
    uintptr_t start, end;
    uint64_t token;
    unsigned long gen;
} ucm_uffd_memo;

static void ucm_uffd_memo_set_locked(uintptr_t start, uintptr_t end,
                                     uint64_t token)
{
    __atomic_store_n(&ucm_uffd_memo.seq, ucm_uffd_memo.seq + 1,
                     __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&ucm_uffd_memo.start, start, __ATOMIC_RELAXED);
    __atomic_store_n(&ucm_uffd_memo.end, end, __ATOMIC_RELAXED);
    __atomic_store_n(&ucm_uffd_memo.token, token, __ATOMIC_RELAXED);
    __atomic_store_n(&ucm_uffd_memo.gen, ucm_uffd_table_gen, __ATOMIC_RELAXED);
    __atomic_store_n(&ucm_uffd_memo.seq, ucm_uffd_memo.seq + 1,
                     __ATOMIC_RELEASE);
}

/* [start, end) inside the remembered span, still registered and active:
 * its token without the lock (a later cut reports the unmap after this,
 * as for a subscription made under the lock just before it). */
static int ucm_uffd_memo_find(uintptr_t start, uintptr_t end, uint64_t *token_p,
                              uintptr_t *span_start_p, uintptr_t *span_end_p)
{
    unsigned long seq = __atomic_load_n(&ucm_uffd_memo.seq, __ATOMIC_ACQUIRE);
    uintptr_t s, e;
    unsigned long gen;
    uint64_t token;

    /* what the caller wrote before (e.g. a cache's range in flight) is
     * visible to a hooked call that cuts the span after this check */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if ((seq & 1) ||
        (__atomic_load_n(&ucm_uffd_draining, __ATOMIC_ACQUIRE) != 0) ||
        (__atomic_load_n(&ucm_uffd_state, __ATOMIC_RELAXED) !=
         UCM_UFFD_STATE_ACTIVE)) {
        return 0;
    }
    s     = __atomic_load_n(&ucm_uffd_memo.start, __ATOMIC_RELAXED);
    e     = __atomic_load_n(&ucm_uffd_memo.end, __ATOMIC_RELAXED);
    token = __atomic_load_n(&ucm_uffd_memo.token, __ATOMIC_RELAXED);
    gen   = __atomic_load_n(&ucm_uffd_memo.gen, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if ((__atomic_load_n(&ucm_uffd_memo.seq, __ATOMIC_RELAXED) != seq) ||
        (__atomic_load_n(&ucm_uffd_table_gen, __ATOMIC_RELAXED) != gen) ||
        (start < s) || (end > e)) {
        return 0;
    }
    ucm_uffd_stat_add(dedups);
    *token_p      = token;
    *span_start_p = s;
    *span_end_p   = e;
    return 1;
}

ucs_status_t ucm_uffd_subscribe_span(void *addr, size_t len, uint64_t *token_p,
                                     uintptr_t *span_start_p,
                                     uintptr_t *span_end_p)
{
    unsigned long count = 1;
    ucm_uffd_span_t *span;
    uintptr_t start, end, s, e;
    ucs_status_t status;

    if ((len == 0) || (token_p == NULL) || (span_start_p == NULL) ||
        (span_end_p == NULL)) {
        return UCS_ERR_INVALID_PARAM;
    }
    ucm_uffd_page_align(addr, len, &start, &end);
    if (ucm_uffd_memo_find(start, end, token_p, span_start_p, span_end_p)) {
        return UCS_OK;
    }

    /* spans of unmaps already read are cut first (not under the lock: the
     * dispatcher takes it); a span cut later was registered before the
     * unmap, and its VM_UNMAPPED comes after this subscription */
    ucm_uffd_drain_wait();
    pthread_mutex_lock(&ucm_uffd_lock);
    if (ucm_uffd_state == UCM_UFFD_STATE_IDLE) {
        ucm_uffd_open_locked();
    }
    if (ucm_uffd_state != UCM_UFFD_STATE_ACTIVE) {
        status = UCS_ERR_UNSUPPORTED;
        goto out;
    }
    span = ucm_uffd_table_find(start);
    if ((span != NULL) && (span->end >= end)) {
        ++span->count; /* already registered: no system call */
        ucm_uffd_stat_add(dedups);
        *token_p      = span->seq;
        *span_start_p = span->start;
        *span_end_p   = span->end;
        ucm_uffd_memo_set_locked(span->start, span->end, span->seq);
        status = UCS_OK;
        goto out;
    }
    status = ucm_uffd_table_reserve(UCM_UFFD_SPARE_NODES);
    if (status != UCS_OK) {
        goto out;
    }
    /* a span joining (or touching) one in the table adds no VMA; a new
     * one must fit the budget */
    span = ucm_uffd_table_first_after(start ? start - 1 : 0);
    if (((span == NULL) || (span->start > end)) &&
        !ucm_uffd_budget_admit(ucm_uffd_table_size() + 1)) {
        status = UCS_ERR_EXCEEDS_LIMIT;
        goto out;
    }
    status = ucm_uffd_register_span_locked(&start, &end);
    if (status != UCS_OK) {
        goto out;
    }
    /* one new span for the union with the spans it overlaps or touches
     * (neighbouring subscriptions make one span: later ones inside it cost
     * no lock, see ucm_uffd_memo_find); their subscribers' tokens no longer
     * match, so their counts stay here (registered until unmapped: a cost,
     * never a missed event) */
    s = start;
    e = end;
    while (
        ((span = ucm_uffd_table_first_after(start ? start - 1 : 0)) != NULL) &&
        (span->start <= end)) {
        s = (span->start < s) ? span->start : s;
        e = (span->end > e) ? span->end : e;
        count += span->count;
        ucm_uffd_table_remove(span);
    }
    *token_p = ++ucm_uffd_seq;
    status   = ucm_uffd_table_add(s, e, count, *token_p); /* reserved */
    if (status == UCS_OK) {
        *span_start_p = s;
        *span_end_p   = e;
        ucm_uffd_memo_set_locked(s, e, *token_p);
    }
out:
    pthread_mutex_unlock(&ucm_uffd_lock);
    return status;
}

ucs_status_t ucm_uffd_subscribe(void *addr, size_t len, uint64_t *token_p)
{
    uintptr_t span_start, span_end;

    return ucm_uffd_subscribe_span(addr, len, token_p, &span_start, &span_end);
}

void ucm_uffd_unsubscribe(void *addr, size_t len, uint64_t token)
{
    ucm_uffd_span_t *span;
    uintptr_t start, end, next;

    if (len == 0) {
        return;
    }
    ucm_uffd_page_align(addr, len, &start, &end);
    pthread_mutex_lock(&ucm_uffd_lock);
    /* Only the span (or the remnants of it) this subscription was counted
     * in; a span at count 0 stays registered (idle) until it is unmapped.
     * No UFFDIO_UNREGISTER: the table cannot tell every live subscription
     * that relies on a page (an unmap event read after a new registration
     * cuts the new one's pages, a merge hides old tokens), and taking the
     * registration from a live region would lose its events.  The kernel
     * drops the registration itself when the pages are unmapped, and a new
     * subscription inside an idle span costs no system call. */
    for (next = start; ((span = ucm_uffd_table_first_after(next)) != NULL) &&
                       (span->start < end);
         next = span->end) {
        if ((span->seq == token) && (span->count > 0)) {
            --span->count;
        }
    }
    pthread_mutex_unlock(&ucm_uffd_lock);
}

void ucm_uffd_query(ucm_uffd_info_t *info)
{
    memset(info, 0, sizeof(*info));
    pthread_mutex_lock(&ucm_uffd_lock);
    info->mode      = ucm_uffd_opts.mode;
    info->active    = (ucm_uffd_state == UCM_UFFD_STATE_ACTIVE);
    info->features  = info->active ? ucm_uffd_features : 0;
    info->grain     = ucm_uffd_opts.grain;
    info->spans     = ucm_uffd_table_size();
    info->registers = ucm_uffd_stats.registers;
    info->dedups    = __atomic_load_n(&ucm_uffd_stats.dedups, __ATOMIC_RELAXED);
    info->unsupported   = ucm_uffd_stats.unsupported;
    info->busy          = ucm_uffd_stats.busy;
    info->max_map_count = ucm_uffd_budget_max_map_count();
    info->vma_budget    = ucm_uffd_budget_vmas();
    info->vma_use       = ucm_uffd_budget_use(info->spans);
    info->over_budget   = ucm_uffd_budget_refused();
    snprintf(info->reason, sizeof(info->reason), "%s", ucm_uffd_reason);
    pthread_mutex_unlock(&ucm_uffd_lock);
    info->events = __atomic_load_n(&ucm_uffd_stats.events, __ATOMIC_RELAXED);
    info->faults = __atomic_load_n(&ucm_uffd_stats.faults, __ATOMIC_RELAXED);
}

ucs_status_t ucm_uffd_configure(int mode, int register_missing, size_t grain)
{
    if ((mode < UCM_UFFD_MODE_NO) || (mode > UCM_UFFD_MODE_YES)) {
        ucm_error("ucm_uffd_configure: invalid mode %d", mode);
        return UCS_ERR_INVALID_PARAM;
    }
    pthread_mutex_lock(&ucm_uffd_lock);
    ucm_uffd_opts.mode             = mode;
    ucm_uffd_opts.register_missing = !!register_missing;
    if (grain != 0) {
        ucm_uffd_opts.grain = grain;
    }
    if (ucm_uffd_state == UCM_UFFD_STATE_FAILED) {
        /* the next start tries again */
        __atomic_store_n(&ucm_uffd_state, UCM_UFFD_STATE_IDLE,
                         __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&ucm_uffd_lock);
    return UCS_OK;
}

ucs_status_t ucm_uffd_configure_budget(double share)
{
    if (!((share > 0) && (share <= 1))) {
        ucm_error("ucm_uffd_configure_budget: invalid share %g", share);
        return UCS_ERR_INVALID_PARAM;
    }
    pthread_mutex_lock(&ucm_uffd_lock);
    ucm_uffd_opts.vma_share = ucm_uffd_budget_init(share);
    pthread_mutex_unlock(&ucm_uffd_lock);
    return UCS_OK;
}
