/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Cost of the userfaultfd monitor (UCX_MEM_UFFD), measured in one process
 * and one run so that the ratios compare like with like:
 *  - munmap / madvise(DONTNEED) of a range: before any monitor exists
 *    (baseline, what UCX_MEM_UFFD=no costs), then with the monitor running
 *    for an unsubscribed range and for a subscribed one;
 *  - subscription: a new span (msync check + UFFDIO_REGISTER), a
 *    subscription inside a registered (or idle) span, an unsubscription
 *    (neither makes a system call).
 * A VM_UNMAPPED handler is installed, as a registration cache would.
 * Output: ns per operation (best of several rounds) and the ratio against
 * the baseline.
 *
 * usage: ucm_bench_uffd [--quick] [--pages N]
 */
#include <ucm/api/ucm.h>
#include <ucm/api/ucm_ext.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define BENCH_ROUNDS 5

typedef enum { BENCH_UNSUBSCRIBED, BENCH_SUBSCRIBED } bench_kind_t;

static unsigned bench_iters = 20000;
static size_t bench_pages   = 1;
static size_t bench_ps;
static volatile unsigned long bench_events;

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

/* ns per munmap (madvise 0) or madvise(DONTNEED) (madvise 1) */
static double bench_unmap(bench_kind_t kind, int madvise_dontneed)
{
    size_t len  = bench_pages * bench_ps;
    double best = 1e30, t0, total;
    unsigned r, i;
    char *p;

    for (r = 0; r < BENCH_ROUNDS; ++r) {
        total = 0;
        for (i = 0; i < bench_iters; ++i) {
            p = bench_map();
            if (kind == BENCH_SUBSCRIBED) {
                bench_subscribe(p);
            }
            t0 = bench_now_ns();
            if (madvise_dontneed) {
                madvise(p, len, MADV_DONTNEED);
                total += bench_now_ns() - t0;
                if (kind == BENCH_SUBSCRIBED) {
                    bench_unsubscribe(p);
                }
                munmap(p, len);
            } else {
                munmap(p, len);
                total += bench_now_ns() - t0;
                if (kind == BENCH_SUBSCRIBED) {
                    bench_unsubscribe(p); /* span already gone */
                }
            }
        }
        if (total / bench_iters < best) {
            best = total / bench_iters;
        }
    }
    return best;
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

static void bench_row(const char *name, double ns, double base)
{
    printf("%-44s %10.1f %8.2fx\n", name, ns, ns / base);
}

int main(int argc, char **argv)
{
    double base_munmap, base_madv, fresh, dedup, unsub;
    ucm_uffd_info_t info;
    int i, active = 0;

    bench_ps = sysconf(_SC_PAGESIZE);
    for (i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--quick")) {
            bench_iters = 500;
        } else if (!strcmp(argv[i], "--pages") && (i + 1 < argc)) {
            bench_pages = strtoul(argv[++i], NULL, 0);
        } else {
            fprintf(stderr, "usage: %s [--quick] [--pages N]\n", argv[0]);
            return 2;
        }
    }
    if (bench_pages == 0) {
        fprintf(stderr, "--pages must be > 0\n");
        return 2;
    }
    if (ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 0, bench_cb, NULL) !=
        UCS_OK) {
        fprintf(stderr, "cannot install the VM_UNMAPPED handler\n");
        return 1;
    }

    /* baseline first: no monitor exists yet */
    base_munmap = bench_unmap(BENCH_UNSUBSCRIBED, 0);
    base_madv   = bench_unmap(BENCH_UNSUBSCRIBED, 1);

    ucm_uffd_configure(UCM_UFFD_MODE_TRY, 0, 4096);
    if ((ucm_uffd_start(&active) != UCS_OK) || !active) {
        ucm_uffd_query(&info);
        printf("userfaultfd monitor not available: %s\n", info.reason);
        printf("%-44s %10.1f\n", "munmap, no monitor (ns)", base_munmap);
        return 0;
    }

    printf("range: %zu page(s), %u iterations, best of %d rounds\n",
           bench_pages, bench_iters, BENCH_ROUNDS);
    printf("%-44s %10s %9s\n", "case", "ns/op", "ratio");
    bench_row("munmap, no monitor (UCX_MEM_UFFD=no)", base_munmap, base_munmap);
    bench_row("munmap, monitor on, range unsubscribed",
              bench_unmap(BENCH_UNSUBSCRIBED, 0), base_munmap);
    bench_row("munmap, monitor on, range subscribed",
              bench_unmap(BENCH_SUBSCRIBED, 0), base_munmap);
    bench_row("madvise(DONTNEED), no monitor", base_madv, base_madv);
    bench_row("madvise(DONTNEED), monitor on, unsubscribed",
              bench_unmap(BENCH_UNSUBSCRIBED, 1), base_madv);
    bench_row("madvise(DONTNEED), monitor on, subscribed",
              bench_unmap(BENCH_SUBSCRIBED, 1), base_madv);
    bench_subscription(&fresh, &dedup, &unsub);
    bench_row("subscribe, new span (UFFDIO_REGISTER)", fresh, base_munmap);
    bench_row("subscribe, inside a registered span", dedup, base_munmap);
    bench_row("unsubscribe (no system call)", unsub, base_munmap);
    printf("(ratios: against the no-monitor munmap/madvise of the same "
           "range; events seen %lu)\n",
           bench_events);
    return 0;
}
