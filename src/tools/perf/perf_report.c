/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * uct_perftest results: per-iteration timing, percentile, and the table or
 * CSV lines in the layout of ucx_perftest (MB = 2^20 bytes, usec per
 * operation, one progress line a second unless -f, then "Final:").
 */
#include "perf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PERF_REPORT_INTERVAL_NS 1000000000ull
#define PERF_REPORT_ALL_CAP     (1ul << 20)
#define PERF_REPORT_IVL_CAP     (1ul << 16)
#define PERF_REPORT_WIDTH       106 /* inside the box */
#define PERF_MB                 (1024.0 * 1024.0)

static const char *perf_report_test_desc[PERF_TEST_LAST] = {
    [PERF_TEST_PUT_BW]  = "put bandwidth / message rate",
    [PERF_TEST_PUT_LAT] = "put latency",
    [PERF_TEST_GET_BW]  = "get bandwidth / message rate",
    [PERF_TEST_GET_LAT] = "get latency",
    [PERF_TEST_AM_BW]   = "active message bandwidth / message rate",
    [PERF_TEST_AM_LAT]  = "active message latency",
};

static uint64_t perf_clock_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

#if defined(__x86_64__)
/* Time iterations with rdtsc (as perftest's get_cycles and UCX do):
 * clock_gettime may be a system call, e.g. on the HPET clocksource of the
 * emulated VM, where it costs ~4 usec, a tenth of a soft-RoCE round trip.
 * The TSC is used when the CPU says it is invariant, or when two
 * calibrations against CLOCK_MONOTONIC agree within 1% (the VM's TCG TSC
 * follows the host's but is not flagged invariant); otherwise
 * clock_gettime. */
static int perf_tsc_invariant(void)
{
    char line[4096];
    FILE *f   = fopen("/proc/cpuinfo", "r");
    int found = 0;

    if (f == NULL) {
        return 0;
    }
    while (!found && (fgets(line, sizeof(line), f) != NULL)) {
        if (!strncmp(line, "flags", 5)) {
            found = (strstr(line, " constant_tsc") != NULL) &&
                    (strstr(line, " nonstop_tsc") != NULL);
            break;
        }
    }
    fclose(f);
    return found;
}

/* Nanoseconds per TSC tick over a 25 ms sleep; 0 if the TSC went back. */
static double perf_tsc_calibrate(uint64_t *tsc0_p, uint64_t *ns0_p)
{
    struct timespec pause = {0, 25000000};
    uint64_t tsc0, ns0, tsc1, ns1;

    ns0  = perf_clock_ns();
    tsc0 = __builtin_ia32_rdtsc();
    nanosleep(&pause, NULL);
    ns1     = perf_clock_ns();
    tsc1    = __builtin_ia32_rdtsc();
    *tsc0_p = tsc0;
    *ns0_p  = ns0;
    if ((tsc1 <= tsc0) || (ns1 <= ns0)) {
        return 0.0;
    }
    return (double)(ns1 - ns0) / (double)(tsc1 - tsc0);
}

uint64_t perf_now_ns(void)
{
    static int mode; /* 0 unknown, 1 tsc, 2 clock_gettime */
    static uint64_t tsc0, ns0;
    static double ns_per_tick;
    uint64_t tsc_a, ns_a;
    double a, b;

    if (ucs_likely(mode == 1)) {
        return ns0 + (uint64_t)((double)(__builtin_ia32_rdtsc() - tsc0) *
                                ns_per_tick);
    } else if (mode == 2) {
        return perf_clock_ns();
    }
    mode = 2;
    a    = perf_tsc_calibrate(&tsc_a, &ns_a);
    b    = perf_tsc_calibrate(&tsc0, &ns0);
    if ((a > 0.0) && (b > 0.0) &&
        (perf_tsc_invariant() || ((a / b > 0.99) && (a / b < 1.01)))) {
        ns_per_tick = (a + b) / 2.0;
        tsc0        = tsc_a;
        ns0         = ns_a;
        mode        = 1;
    }
    return perf_now_ns();
}
#else
uint64_t perf_now_ns(void)
{
    return perf_clock_ns();
}
#endif

ucs_status_t perf_report_init(perf_report_t *rep, const perf_params_t *params)
{
    memset(rep, 0, sizeof(*rep));
    rep->params = params;
    /* a ping-pong iteration is two one-way operations */
    rep->op_factor    = ((params->test == PERF_TEST_PUT_LAT) ||
                      (params->test == PERF_TEST_AM_LAT))
                            ? 2.0
                            : 1.0;
    rep->all_cap      = ucs_min(params->iters, PERF_REPORT_ALL_CAP);
    rep->all_stride   = (params->iters + rep->all_cap - 1) / rep->all_cap;
    rep->interval_cap = PERF_REPORT_IVL_CAP;
    rep->all          = malloc(rep->all_cap * sizeof(double));
    rep->interval     = malloc(rep->interval_cap * sizeof(double));
    if ((rep->all == NULL) || (rep->interval == NULL)) {
        fprintf(stderr, "uct_perftest: out of memory for timing samples\n");
        perf_report_cleanup(rep);
        return UCS_ERR_NO_MEMORY;
    }
    return UCS_OK;
}

void perf_report_cleanup(perf_report_t *rep)
{
    free(rep->all);
    free(rep->interval);
    rep->all      = NULL;
    rep->interval = NULL;
}

static void perf_report_box_line(const char *key, const char *value)
{
    char line[PERF_REPORT_WIDTH + 1];

    snprintf(line, sizeof(line), "%-14s%s", key, value);
    printf("| %-*s |\n", PERF_REPORT_WIDTH - 2, line);
}

static void perf_report_center(char *dst, size_t width, const char *text)
{
    size_t len = strlen(text), left;

    if (len > width) {
        len = width;
    }
    left = (width - len + 1) / 2;
    memset(dst, ' ', width);
    memcpy(dst + left, text, len);
    dst[width] = '\0';
}

static void perf_report_table_head(const perf_params_t *params)
{
    char pct[16], pct_col[16];

    snprintf(pct, sizeof(pct), "%.1f%%ile", params->percentile);
    perf_report_center(pct_col, 10, pct);
    printf("+--------------+--------------+------------------------------+"
           "---------------------+-----------------------+\n");
    printf("|              |              | %s |   bandwidth (MB/s)  |"
           "  message rate (msg/s) |\n",
           perf_test_is_lat(params->test) ? "       latency (usec)       "
                                          : "      overhead (usec)       ");
    printf("+--------------+--------------+----------+---------+---------+"
           "----------+----------+-----------+-----------+\n");
    printf("|    %s     | # iterations |%s| average | overall |  average |"
           "  overall |  average  |  overall  |\n",
           params->final_only ? "Test " : "Stage", pct_col);
    printf("+--------------+--------------+----------+---------+---------+"
           "----------+----------+-----------+-----------+\n");
}

void perf_report_header(const perf_params_t *params)
{
    char size[64];
    int i;

    if (params->csv) {
        printf("iterations,%.1f_percentile_lat,avg_lat,overall_lat,avg_bw,"
               "overall_bw,avg_mr,overall_mr\n",
               params->percentile);
        fflush(stdout);
        return;
    }
    printf("+");
    for (i = 0; i < PERF_REPORT_WIDTH; ++i) {
        putchar('-');
    }
    printf("+\n");
    perf_report_box_line("API:", "transport layer");
    perf_report_box_line("Test:", perf_report_test_desc[params->test]);
    perf_report_box_line("Data layout:", "zcopy");
    perf_report_box_line("Send memory:", "host");
    perf_report_box_line("Recv memory:", "host");
    snprintf(size, sizeof(size), "%zu", params->msg_size);
    perf_report_box_line("Message size:", size);
    if (params->reg_mode != PERF_REG_ONCE) {
        perf_report_box_line("Registration:",
                             (params->reg_mode == PERF_REG_REUSE)
                                 ? "every iteration, same buffers"
                                 : "every iteration, new mmap()ed buffers");
    }
    perf_report_table_head(params);
    fflush(stdout);
}

void perf_report_start(perf_report_t *rep)
{
    rep->start_ns     = perf_now_ns();
    rep->last_ns      = rep->start_ns;
    rep->report_ns    = rep->start_ns;
    rep->iters        = 0;
    rep->report_iters = 0;
    rep->all_len      = 0;
    rep->interval_len = 0;
}

static int perf_report_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static double perf_report_percentile(double *samples, size_t n, double rank)
{
    size_t idx;

    if (n == 0) {
        return 0.0;
    }
    qsort(samples, n, sizeof(double), perf_report_cmp);
    idx = (size_t)(rank / 100.0 * (double)n);
    if (idx >= n) {
        idx = n - 1;
    }
    return samples[idx];
}

/* label: "" for progress lines, "Final:" at the end (none with -f) */
static void perf_report_line(perf_report_t *rep, const char *label,
                             uint64_t now, double pct_ns)
{
    const perf_params_t *p = rep->params;
    double f               = rep->op_factor;
    double ivl_ns, all_ns, ivl_ops, all_ops;
    double avg_us, all_us, avg_mr, all_mr;

    ivl_ns  = (double)(now - rep->report_ns);
    all_ns  = (double)(now - rep->start_ns);
    ivl_ops = (double)(rep->iters - rep->report_iters) * f;
    all_ops = (double)rep->iters * f;
    if (ivl_ops == 0) { /* nothing since the last progress line */
        ivl_ns  = all_ns;
        ivl_ops = all_ops;
    }
    if ((all_ops == 0) || (all_ns <= 0) || (ivl_ns <= 0)) {
        return;
    }
    avg_us = ivl_ns / ivl_ops / 1000.0;
    all_us = all_ns / all_ops / 1000.0;
    avg_mr = ivl_ops / (ivl_ns / 1e9);
    all_mr = all_ops / (all_ns / 1e9);
    if (p->csv) {
        printf("%lu,%.3f,%.3f,%.3f,%.2f,%.2f,%.0f,%.0f\n",
               (unsigned long)rep->iters, pct_ns / 1000.0, avg_us, all_us,
               avg_mr * p->msg_size / PERF_MB, all_mr * p->msg_size / PERF_MB,
               avg_mr, all_mr);
    } else {
        printf("%-6s%22lu%11.3f%10.3f%10.3f%12.2f%11.2f%12.0f%12.0f\n", label,
               (unsigned long)rep->iters, pct_ns / 1000.0, avg_us, all_us,
               avg_mr * p->msg_size / PERF_MB, all_mr * p->msg_size / PERF_MB,
               avg_mr, all_mr);
    }
    fflush(stdout);
}

void perf_report_record(perf_report_t *rep)
{
    uint64_t now = perf_now_ns();
    double dt    = (double)(now - rep->last_ns) / rep->op_factor;
    double pct;

    rep->last_ns = now;
    if ((rep->iters % rep->all_stride == 0) && (rep->all_len < rep->all_cap)) {
        rep->all[rep->all_len++] = dt;
    }
    if (rep->interval_len < rep->interval_cap) {
        rep->interval[rep->interval_len++] = dt;
    }
    ++rep->iters;

    if (rep->params->final_only ||
        (now - rep->report_ns < PERF_REPORT_INTERVAL_NS)) {
        return;
    }
    pct = perf_report_percentile(rep->interval, rep->interval_len,
                                 rep->params->percentile);
    perf_report_line(rep, "", now, pct);
    rep->report_ns    = now;
    rep->report_iters = rep->iters;
    rep->interval_len = 0;
}

void perf_report_final(perf_report_t *rep)
{
    uint64_t now = perf_now_ns();
    double pct;

    pct =
        perf_report_percentile(rep->all, rep->all_len, rep->params->percentile);
    perf_report_line(rep, rep->params->final_only ? "" : "Final:", now, pct);
}
