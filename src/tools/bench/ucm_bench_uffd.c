/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Cost of the userfaultfd monitor (UCX_MEM_UFFD), measured in one process
 * and one run so that the ratios compare like with like:
 *  - munmap / madvise(DONTNEED) of a range through libc (hooked): before
 *    any monitor exists (baseline, what UCX_MEM_UFFD=no costs), then with
 *    the monitor running for an unsubscribed range and for a subscribed
 *    one (the hook takes the range out of the registration, so the kernel
 *    does not wait for the monitor);
 *  - the same by a syscall instruction (no hook sees it): for a subscribed
 *    range that is the monitor's round trip, the cost of an unmap only the
 *    monitor reports;
 *  - subscription: a new span (msync check + UFFDIO_REGISTER), a
 *    subscription inside a registered (or idle) span, an unsubscription
 *    (neither makes a system call).
 * A VM_UNMAPPED handler is installed, as a registration cache would.
 * Output per case: ns per operation (best of the rounds), the spread of
 * the rounds (worst / best - 1), the ratio against the baseline, and the
 * monitor's reports per operation.  The cases with the monitor on are
 * measured round by round, interleaved, so that a slow spell of a shared
 * machine hits all of them.
 *
 * usage: ucm_bench_uffd [--quick] [--pages N] [--grain BYTES]
 */
#include "tools_env.h"

#include <ucm/api/ucm.h>
#include <ucm/api/ucm_ext.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define BENCH_ROUNDS 5

typedef enum { BENCH_UNSUBSCRIBED, BENCH_SUBSCRIBED } bench_kind_t;
typedef enum { BENCH_MUNMAP, BENCH_DONTNEED } bench_op_t;

static unsigned bench_iters = 20000;
static size_t bench_pages   = 1;
static size_t bench_ps;
static volatile unsigned long bench_events;

/* best and worst round of one case, and the monitor's reports per op */
typedef struct {
    double best, worst;
    double reports;
} bench_result_t;

static double bench_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void bench_cb(ucm_event_type_t type, ucm_event_t *event, void *arg)
{
    ++bench_events;
}

/* A system call no hook sees (syscall() is hooked by libucm). */
static long bench_raw3(long nr, long a1, long a2, long a3)
{
#if defined(__x86_64__)
    long ret;

    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(nr), "D"(a1), "S"(a2), "d"(a3)
                     : "rcx", "r11", "memory");
    return ret;
#else
    return syscall(nr, a1, a2, a3);
#endif
}

static char *bench_map(void)
{
    char *p = mmap(NULL, bench_pages * bench_ps, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    memset(p, 1, bench_pages * bench_ps);
    return p;
}

static uint64_t bench_token;

static void bench_subscribe(char *p)
{
    if (ucm_uffd_subscribe(p, bench_pages * bench_ps, &bench_token) != UCS_OK) {
        fprintf(stderr, "subscribe failed\n");
        exit(1);
    }
}

static void bench_unsubscribe(char *p)
{
    ucm_uffd_unsubscribe(p, bench_pages * bench_ps, bench_token);
}

static unsigned long bench_reports(void)
{
    ucm_uffd_info_t info;

    ucm_uffd_drain_wait();
    ucm_uffd_query(&info);
    return info.events;
}

/* One round: ns per munmap or madvise(DONTNEED), through libc (hooked) or
 * by a syscall instruction (raw); the result is folded into *res. */
static void bench_unmap_round(bench_kind_t kind, bench_op_t op, int raw,
                              bench_result_t *res)
{
    size_t len             = bench_pages * bench_ps;
    unsigned long reports0 = bench_reports();
    double t0, total = 0, ns;
    unsigned i;
    char *p;

    for (i = 0; i < bench_iters; ++i) {
        p = bench_map();
        if (kind == BENCH_SUBSCRIBED) {
            bench_subscribe(p);
        }
        t0 = bench_now_ns();
        if (op == BENCH_DONTNEED) {
            if (raw) {
                bench_raw3(SYS_madvise, (long)p, len, MADV_DONTNEED);
            } else {
                madvise(p, len, MADV_DONTNEED);
            }
        } else if (raw) {
            bench_raw3(SYS_munmap, (long)p, len, 0);
        } else {
            munmap(p, len);
        }
        total += bench_now_ns() - t0;
        if (kind == BENCH_SUBSCRIBED) {
            bench_unsubscribe(p); /* after munmap: the span is gone */
        }
        if (op == BENCH_DONTNEED) {
            munmap(p, len);
        }
    }
    ns = total / bench_iters;
    if ((res->best == 0) || (ns < res->best)) {
        res->best = ns;
    }
    if (ns > res->worst) {
        res->worst = ns;
    }
    /* (with a DONTNEED, also the hooked munmap after it when that is
     * reported: a libucm whose hooks wait for the monitor) */
    res->reports = (double)(bench_reports() - reports0) / bench_iters;
}

/* ns per subscribe of a new span (UFFDIO_REGISTER), of a range inside a
 * registered span, and per unsubscribe */
static void bench_subscription(double *fresh_p, double *dedup_p,
                               double *unsub_p)
{
    double fresh = 1e30, dedup = 1e30, unsub = 1e30;
    double t_fresh, t_dedup, t_unsub, t0;
    size_t len = bench_pages * bench_ps;
    unsigned r, i;
    char *p;

    for (r = 0; r < BENCH_ROUNDS; ++r) {
        t_fresh = t_dedup = t_unsub = 0;
        for (i = 0; i < bench_iters; ++i) {
            p  = bench_map();
            t0 = bench_now_ns();
            bench_subscribe(p);
            t_fresh += bench_now_ns() - t0;
            t0 = bench_now_ns();
            bench_unsubscribe(p);
            t_unsub += bench_now_ns() - t0;
            t0 = bench_now_ns();
            bench_subscribe(p); /* the span is idle now */
            t_dedup += bench_now_ns() - t0;
            bench_unsubscribe(p);
            munmap(p, len);
        }
        fresh = (t_fresh / bench_iters < fresh) ? t_fresh / bench_iters : fresh;
        dedup = (t_dedup / bench_iters < dedup) ? t_dedup / bench_iters : dedup;
        unsub = (t_unsub / bench_iters < unsub) ? t_unsub / bench_iters : unsub;
    }
    *fresh_p = fresh;
    *dedup_p = dedup;
    *unsub_p = unsub;
}

static void bench_row(const char *name, const bench_result_t *res, double base)
{
    printf("%-46s %9.1f %6.0f%% %8.2fx %8.2f\n", name, res->best,
           100.0 * (res->worst / res->best - 1), res->best / base,
           res->reports);
}

static void bench_row_ns(const char *name, double ns, double base)
{
    printf("%-46s %9.1f %7s %8.2fx\n", name, ns, "", ns / base);
}

/* The one degraded thing that matters here, on stderr (the rows go to
 * stdout unchanged). */
static void bench_degraded(const char *uffd_reason)
{
    const tools_env_item_t item = {TOOLS_ENV_GIVEN, "userfaultfd", uffd_reason,
                                   0,
                                   "every monitor row skipped, the no-monitor "
                                   "munmap row only"};

    tools_env_report(stderr, TOOLS_ENV_PREFIX, &item, 1);
}

enum {
    C_MUNMAP_UNSUB,
    C_MUNMAP_SUB,
    C_MUNMAP_RAW_UNSUB,
    C_MUNMAP_RAW_SUB,
    C_DONTNEED_UNSUB,
    C_DONTNEED_SUB,
    C_DONTNEED_RAW_UNSUB,
    C_DONTNEED_RAW_SUB,
    C_LAST
};

static const struct {
    const char *name;
    bench_kind_t kind;
    bench_op_t op;
    int raw;
} bench_cases[C_LAST] = {
    {"munmap, monitor on, range unsubscribed", BENCH_UNSUBSCRIBED, BENCH_MUNMAP,
     0},
    {"munmap, monitor on, range subscribed", BENCH_SUBSCRIBED, BENCH_MUNMAP, 0},
    {"raw munmap, unsubscribed", BENCH_UNSUBSCRIBED, BENCH_MUNMAP, 1},
    {"raw munmap, subscribed (monitor round trip)", BENCH_SUBSCRIBED,
     BENCH_MUNMAP, 1},
    {"madvise(DONTNEED), monitor on, unsubscribed", BENCH_UNSUBSCRIBED,
     BENCH_DONTNEED, 0},
    {"madvise(DONTNEED), monitor on, subscribed", BENCH_SUBSCRIBED,
     BENCH_DONTNEED, 0},
    {"raw madvise(DONTNEED), unsubscribed", BENCH_UNSUBSCRIBED, BENCH_DONTNEED,
     1},
    {"raw madvise(DONTNEED), subscribed (round trip)", BENCH_SUBSCRIBED,
     BENCH_DONTNEED, 1},
};

int main(int argc, char **argv)
{
    bench_result_t base_munmap = {0}, base_madv = {0}, res[C_LAST];
    double fresh, dedup, unsub;
    size_t grain = 4096;
    ucm_uffd_info_t info;
    int i, r, c, active = 0;

    bench_ps = sysconf(_SC_PAGESIZE);
    for (i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--quick")) {
            bench_iters = 500;
        } else if (!strcmp(argv[i], "--pages") && (i + 1 < argc)) {
            bench_pages = strtoul(argv[++i], NULL, 0);
        } else if (!strcmp(argv[i], "--grain") && (i + 1 < argc)) {
            grain = strtoul(argv[++i], NULL, 0);
        } else {
            fprintf(stderr, "usage: %s [--quick] [--pages N] [--grain BYTES]\n",
                    argv[0]);
            return 2;
        }
    }
    if ((bench_pages == 0) || (grain == 0)) {
        fprintf(stderr, "--pages and --grain must be > 0\n");
        return 2;
    }
    if (ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 0, bench_cb, NULL) !=
        UCS_OK) {
        fprintf(stderr, "cannot install the VM_UNMAPPED handler\n");
        return 1;
    }

    /* baseline first: no monitor exists yet */
    for (r = 0; r < BENCH_ROUNDS; ++r) {
        bench_unmap_round(BENCH_UNSUBSCRIBED, BENCH_MUNMAP, 0, &base_munmap);
        bench_unmap_round(BENCH_UNSUBSCRIBED, BENCH_DONTNEED, 0, &base_madv);
    }
    base_munmap.reports = base_madv.reports = 0;

    ucm_uffd_configure(UCM_UFFD_MODE_TRY, 0, grain);
    if ((ucm_uffd_start(&active) != UCS_OK) || !active) {
        ucm_uffd_query(&info);
        bench_degraded(info.reason);
        printf("userfaultfd monitor not available: %s\n", info.reason);
        printf("%-46s %9.1f\n", "munmap, no monitor (ns)", base_munmap.best);
        return 0;
    }

    memset(res, 0, sizeof(res));
    for (r = 0; r < BENCH_ROUNDS; ++r) {
        for (c = 0; c < C_LAST; ++c) {
            bench_unmap_round(bench_cases[c].kind, bench_cases[c].op,
                              bench_cases[c].raw, &res[c]);
        }
    }

    printf("range: %zu page(s), grain %zu, %u iterations, best of %d "
           "rounds\n",
           bench_pages, grain, bench_iters, BENCH_ROUNDS);
    printf("%-46s %9s %7s %9s %8s\n", "case", "ns/op", "spread", "ratio",
           "reports");
    bench_row("munmap, no monitor (UCX_MEM_UFFD=no)", &base_munmap,
              base_munmap.best);
    for (c = C_MUNMAP_UNSUB; c <= C_MUNMAP_SUB; ++c) {
        bench_row(bench_cases[c].name, &res[c], base_munmap.best);
    }
    bench_row(bench_cases[C_MUNMAP_RAW_UNSUB].name, &res[C_MUNMAP_RAW_UNSUB],
              res[C_MUNMAP_RAW_UNSUB].best);
    bench_row(bench_cases[C_MUNMAP_RAW_SUB].name, &res[C_MUNMAP_RAW_SUB],
              res[C_MUNMAP_RAW_UNSUB].best);
    bench_row("madvise(DONTNEED), no monitor", &base_madv, base_madv.best);
    for (c = C_DONTNEED_UNSUB; c <= C_DONTNEED_SUB; ++c) {
        bench_row(bench_cases[c].name, &res[c], base_madv.best);
    }
    bench_row(bench_cases[C_DONTNEED_RAW_UNSUB].name,
              &res[C_DONTNEED_RAW_UNSUB], res[C_DONTNEED_RAW_UNSUB].best);
    bench_row(bench_cases[C_DONTNEED_RAW_SUB].name, &res[C_DONTNEED_RAW_SUB],
              res[C_DONTNEED_RAW_UNSUB].best);
    bench_subscription(&fresh, &dedup, &unsub);
    bench_row_ns("subscribe, new span (UFFDIO_REGISTER)", fresh,
                 base_munmap.best);
    bench_row_ns("subscribe, inside a registered span", dedup,
                 base_munmap.best);
    bench_row_ns("unsubscribe (no system call)", unsub, base_munmap.best);
    printf("(ratios: hooked rows against the no-monitor call of the same "
           "range, raw rows against the raw call of an unsubscribed range, "
           "subscription rows against the no-monitor munmap; reports: the "
           "monitor's per operation; handler calls %lu)\n",
           bench_events);
    return 0;
}
