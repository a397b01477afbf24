/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * uct_ib_bench_reg: cost of registering fresh (never touched) memory, one
 * thread vs UCX_IB_REG_MT_THRESH (pages faulted in by several threads before
 * the single ibv_reg_mr), and cached re-registration vs direct, measured in
 * the same run; prints times and ratios, asserts nothing about speed.
 *
 *   uct_ib_bench_reg [DEV:PORT|-] [MIB] [ROUNDS]   (default first port, 64, 3)
 *   uct_ib_bench_reg --prefault-only [MIB] [ROUNDS]  (no device needed)
 *   uct_ib_bench_reg --odp DEV:PORT [ROUNDS]   registration of 4 KiB..64 MiB:
 *       pinned (direct; fresh pages, and pages present) vs odp (fresh: a
 *       new md each round, so its cache cannot hit; and a cache hit)
 *   uct_ib_bench_reg --first DEV:PORT [ROUNDS]   the first put on pages
 *       never touched (NIC-side faults with odp) vs the put after it, the
 *       fresh buffer as target and as source, pinned vs odp; ratios
 */
#include <uct/ib/uct_ib.h>
#include <uct/ib/uct_ib_int.h> /* uct_ib_md_prefault_mt: measured alone */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uct_ib_md_t *open_md(const char *dev, const char *methods,
                            const char *thresh)
{
    uct_ib_md_t *md;

    setenv("UCX_IB_REG_METHODS", methods, 1);
    setenv("UCX_IB_REG_MT_THRESH", thresh, 1);
    if (uct_ib_md_open(dev, &md) != UCS_OK) {
        fprintf(stderr, "cannot open the md\n");
        exit(1);
    }
    return md;
}

/* Seconds to register a fresh mapping of len bytes (best of rounds);
 * touched: its pages are written before (timing the pinning alone). */
static double reg_fresh(uct_ib_md_t *md, size_t len, int rounds, int touched)
{
    double best = 1e9, t;
    uct_ib_mem_t *memh;
    void *p;
    int i;

    for (i = 0; i < rounds; ++i) {
        p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);
        if (p == MAP_FAILED) {
            perror("mmap");
            exit(1);
        }
        if (touched) {
            memset(p, 1, len);
        }
        t = now_s();
        if (uct_ib_md_mem_reg(md, p, len, UCT_IB_MEM_ACCESS_ALL, &memh) !=
            UCS_OK) {
            exit(1);
        }
        t    = now_s() - t;
        best = (t < best) ? t : best;
        uct_ib_md_mem_dereg(md, memh);
        munmap(p, len);
    }
    return best;
}

/* Seconds per registration of the same buffer (reg + dereg), n times. */
static double reg_again(uct_ib_md_t *md, void *p, size_t len, int n)
{
    uct_ib_mem_t *memh;
    double t = now_s();
    int i;

    for (i = 0; i < n; ++i) {
        if (uct_ib_md_mem_reg(md, p, len, UCT_IB_MEM_ACCESS_ALL, &memh) !=
            UCS_OK) {
            exit(1);
        }
        uct_ib_md_mem_dereg(md, memh);
    }
    return (now_s() - t) / n;
}

/* Seconds to fault in a fresh mapping with nthreads (best of rounds). */
static double prefault_fresh(size_t len, unsigned nthreads, int rounds)
{
    double best = 1e9, t;
    void *p;
    int i;

    for (i = 0; i < rounds; ++i) {
        p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);
        if (p == MAP_FAILED) {
            perror("mmap");
            exit(1);
        }
        t = now_s();
        if (uct_ib_md_prefault_mt(p, len, 1, nthreads) != UCS_OK) {
            fprintf(stderr, "MADV_POPULATE_WRITE is not supported here\n");
            exit(1);
        }
        t    = now_s() - t;
        best = (t < best) ? t : best;
        munmap(p, len);
    }
    return best;
}

/* Best seconds of an odp registration of a fresh len-byte mapping: a new
 * md per round (the odp cache hears no unmaps, so a new mapping at a
 * recycled address would hit a region of the previous round). */
static double reg_fresh_odp(const char *dev, size_t len, int rounds)
{
    double best = 1e9, t;
    uct_ib_md_t *md;
    int i;

    for (i = 0; i < rounds; ++i) {
        md = open_md(dev, "odp", "inf");
        t  = reg_fresh(md, len, 1, 0);
        uct_ib_md_close(md);
        best = (t < best) ? t : best;
    }
    return best;
}

static int bench_odp(const char *dev, int rounds)
{
    static const size_t sizes[] = {4096, 65536, 1 << 20, 16 << 20, 64 << 20};
    double pin_fresh, pin_present, odp_fresh, odp_hit;
    uct_ib_md_attr_t attr;
    uct_ib_md_t *md;
    unsigned i;
    void *p;

    md = open_md(dev, "odp", "inf");
    uct_ib_md_query(md, &attr);
    uct_ib_md_close(md);
    if (attr.reg_method != UCT_IB_REG_METHOD_ODP) {
        fprintf(stderr, "the device has no ODP\n");
        return 1;
    }
    printf("%-8s %14s %14s %14s %14s %9s\n", "size", "pinned fresh",
           "pinned present", "odp fresh", "odp cache hit", "pin/odp");
    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
        md          = open_md(dev, "direct", "inf");
        pin_fresh   = reg_fresh(md, sizes[i], rounds, 0);
        pin_present = reg_fresh(md, sizes[i], rounds, 1);
        uct_ib_md_close(md);
        odp_fresh = reg_fresh_odp(dev, sizes[i], rounds);
        p         = mmap(NULL, sizes[i], PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        md        = open_md(dev, "odp", "inf");
        reg_again(md, p, sizes[i], 1); /* the miss that fills the cache */
        odp_hit = reg_again(md, p, sizes[i], 20);
        uct_ib_md_close(md);
        munmap(p, sizes[i]);
        printf("%5zu KiB %11.1f us %11.1f us %11.1f us %11.2f us %8.1fx\n",
               sizes[i] >> 10, pin_fresh * 1e6, pin_present * 1e6,
               odp_fresh * 1e6, odp_hit * 1e6, pin_fresh / odp_fresh);
    }
    return 0;
}

/* A loopback for bench_first: an iface on md and two connected
 * endpoints; a[0] posts. */
typedef struct {
    uct_rc_iface_t *iface;
    uct_rc_ep_t *a, *b;
} bench_lb_t;

static void lb_open(uct_ib_md_t *md, bench_lb_t *lb)
{
    uint8_t addr_a[UCT_RC_EP_ADDR_SIZE], addr_b[UCT_RC_EP_ADDR_SIZE];

    if ((uct_rc_iface_open(md, NULL, &lb->iface) != UCS_OK) ||
        (uct_rc_ep_create(lb->iface, &lb->a) != UCS_OK) ||
        (uct_rc_ep_create(lb->iface, &lb->b) != UCS_OK) ||
        (uct_rc_ep_get_address(lb->a, addr_a) != UCS_OK) ||
        (uct_rc_ep_get_address(lb->b, addr_b) != UCS_OK) ||
        (uct_rc_ep_connect_to_ep(lb->a, addr_b) != UCS_OK) ||
        (uct_rc_ep_connect_to_ep(lb->b, addr_a) != UCS_OK)) {
        fprintf(stderr, "cannot open a loopback\n");
        exit(1);
    }
}

static void lb_close(bench_lb_t *lb)
{
    uct_rc_ep_destroy(lb->a);
    uct_rc_ep_destroy(lb->b);
    uct_rc_iface_close(lb->iface);
}

/* Seconds of one put of len bytes from src to dst, waited for. */
static double lb_put(uct_ib_md_t *md, bench_lb_t *lb, void *src,
                     uct_ib_mem_t *sm, void *dst, uct_ib_mem_t *dm, size_t len)
{
    uint8_t packed[UCT_IB_RKEY_PACKED_SIZE];
    uct_completion_t comp = {NULL, 1, UCS_OK};
    uct_iov_t iov         = {src, len, sm};
    ucs_status_t status;
    uct_rkey_t rkey;
    double t;

    uct_ib_md_rkey_pack(md, dm, packed);
    uct_ib_rkey_unpack(packed, &rkey);
    t = now_s();
    do {
        status =
            uct_rc_ep_put_zcopy(lb->a, &iov, 1, (uintptr_t)dst, rkey, &comp);
        if (status == UCS_ERR_NO_RESOURCE) {
            uct_rc_iface_progress(lb->iface);
        }
    } while (status == UCS_ERR_NO_RESOURCE);
    if (status == UCS_INPROGRESS) {
        while (comp.count != 0) {
            uct_rc_iface_progress(lb->iface);
        }
        status = comp.status;
    }
    if (status != UCS_OK) {
        fprintf(stderr, "put of %zu bytes failed: %s\n", len,
                ucs_status_string(status));
        exit(1);
    }
    return now_s() - t;
}

/* Best-of-rounds seconds of: registering a never-touched mapping, the
 * first put with it (its pages cold: for odp the NIC faults them in), and
 * the put right after (pages warm).  cold_dst: the fresh mapping is the
 * put's target (NIC writes), else its source (NIC reads).  A new md per
 * round, so that the odp cache (which hears no unmaps) cannot hit. */
typedef struct {
    double reg, first, warm;
} first_times_t;

static first_times_t first_put(const char *dev, const char *method, size_t len,
                               int cold_dst, int rounds)
{
    first_times_t best = {1e9, 1e9, 1e9}, t;
    uct_ib_mem_t *fm, *wm;
    uct_ib_md_t *md;
    bench_lb_t lb;
    void *fresh, *warm;
    int i;

    for (i = 0; i < rounds; ++i) {
        md = open_md(dev, method, "inf");
        lb_open(md, &lb);
        warm  = mmap(NULL, len, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        fresh = mmap(NULL, len, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if ((warm == MAP_FAILED) || (fresh == MAP_FAILED)) {
            perror("mmap");
            exit(1);
        }
        memset(warm, 1, len);
        if (uct_ib_md_mem_reg(md, warm, len, UCT_IB_MEM_ACCESS_ALL, &wm) !=
            UCS_OK) {
            exit(1);
        }
        /* the warm side's pages in the NIC's view too (odp faults) */
        lb_put(md, &lb, warm, wm, warm, wm, len);
        t.reg = now_s();
        if (uct_ib_md_mem_reg(md, fresh, len, UCT_IB_MEM_ACCESS_ALL, &fm) !=
            UCS_OK) {
            exit(1);
        }
        t.reg = now_s() - t.reg;
        if (cold_dst) {
            t.first = lb_put(md, &lb, warm, wm, fresh, fm, len);
            t.warm  = lb_put(md, &lb, warm, wm, fresh, fm, len);
        } else {
            t.first = lb_put(md, &lb, fresh, fm, warm, wm, len);
            t.warm  = lb_put(md, &lb, fresh, fm, warm, wm, len);
        }
        best.reg   = (t.reg < best.reg) ? t.reg : best.reg;
        best.first = (t.first < best.first) ? t.first : best.first;
        best.warm  = (t.warm < best.warm) ? t.warm : best.warm;
        uct_ib_md_mem_dereg(md, fm);
        uct_ib_md_mem_dereg(md, wm);
        lb_close(&lb);
        uct_ib_md_close(md);
        munmap(fresh, len);
        munmap(warm, len);
    }
    return best;
}

static int bench_first(const char *dev, int rounds)
{
    static const size_t sizes[] = {65536, 1 << 20, 8 << 20};
    first_times_t pin, odp;
    uct_ib_md_attr_t attr;
    uct_ib_md_t *md;
    unsigned i;
    int cold_dst;

    md = open_md(dev, "odp", "inf");
    uct_ib_md_query(md, &attr);
    uct_ib_md_close(md);
    if (attr.reg_method != UCT_IB_REG_METHOD_ODP) {
        fprintf(stderr, "the device has no ODP\n");
        return 1;
    }
    printf("first put on never-touched pages vs the put after it (warm), "
           "best of %d; times in us\n",
           rounds);
    printf("%-6s %-8s | %9s %9s %9s %6s | %9s %9s %9s %6s | %8s %8s\n", "cold",
           "size", "pin reg", "pin 1st", "pin warm", "1st/w", "odp reg",
           "odp 1st", "odp warm", "1st/w", "odp/pin", "reg+1st");
    for (cold_dst = 1; cold_dst >= 0; --cold_dst) {
        for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
            pin = first_put(dev, "direct", sizes[i], cold_dst, rounds);
            odp = first_put(dev, "odp", sizes[i], cold_dst, rounds);
            printf("%-6s %5zu KiB | %9.0f %9.0f %9.0f %5.1fx | %9.0f %9.0f "
                   "%9.0f %5.1fx | %7.2fx %7.2fx\n",
                   cold_dst ? "target" : "source", sizes[i] >> 10,
                   pin.reg * 1e6, pin.first * 1e6, pin.warm * 1e6,
                   pin.first / pin.warm, odp.reg * 1e6, odp.first * 1e6,
                   odp.warm * 1e6, odp.first / odp.warm, odp.first / pin.first,
                   (odp.reg + odp.first) / (pin.reg + pin.first));
        }
    }
    printf("(1st/w: first put / warm put of the same method; odp/pin: odp's "
           "first put / pinned's first put; reg+1st: the same for "
           "registration plus first put)\n");
    return 0;
}

int main(int argc, char **argv)
{
    const char *dev =
        (argc > 1) && strcmp(argv[1], "-") && strcmp(argv[1], "--prefault-only")
            ? argv[1]
            : NULL;
    size_t len = (size_t)((argc > 2) ? atoi(argv[2]) : 64) << 20;
    int rounds = (argc > 3) ? atoi(argv[3]) : 3;
    uct_ib_md_attr_t attr;
    double one, mt, pinned, direct, cached;
    uct_ib_md_t *md;
    void *p;

    if ((argc > 2) && !strcmp(argv[1], "--odp")) {
        return bench_odp(argv[2], (argc > 3) ? atoi(argv[3]) : 3);
    }
    if ((argc > 2) && !strcmp(argv[1], "--first")) {
        return bench_first(argv[2], (argc > 3) ? atoi(argv[3]) : 3);
    }
    {
        long cpus  = sysconf(_SC_NPROCESSORS_ONLN);
        unsigned n = (cpus < 2) ? 2 : (cpus > 16) ? 16 : (unsigned)cpus;
        double p1  = prefault_fresh(len, 1, rounds);
        double pn  = prefault_fresh(len, n, rounds);
        printf("fault in %zu MiB: 1 thread %.1f ms, %u threads %.1f ms, "
               "ratio %.2fx\n",
               len >> 20, p1 * 1e3, n, pn * 1e3, p1 / pn);
        if ((argc > 1) && !strcmp(argv[1], "--prefault-only")) {
            return 0;
        }
    }

    md     = open_md(dev, "direct", "inf");
    one    = reg_fresh(md, len, rounds, 0);
    pinned = reg_fresh(md, len, rounds, 1);
    uct_ib_md_close(md);

    md = open_md(dev, "direct", "1m");
    uct_ib_md_query(md, &attr);
    mt = reg_fresh(md, len, rounds, 0);
    uct_ib_md_close(md);

    printf("fresh %zu MiB, direct: 1 thread %.1f ms, %u threads "
           "(REG_MT_THRESH=1m) %.1f ms, ratio %.2fx\n",
           len >> 20, one * 1e3, attr.reg_mt_threads, mt * 1e3, one / mt);
    printf("  (the same size with its pages already present: %.1f ms, so "
           "page faults are %.0f%% of a fresh registration)\n",
           pinned * 1e3, 100.0 * (one - pinned) / one);

    p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
             -1, 0);
    memset(p, 1, 1 << 20);
    md     = open_md(dev, "direct", "inf");
    direct = reg_again(md, p, 1 << 20, 50);
    uct_ib_md_close(md);
    md     = open_md(dev, "rcache", "inf");
    cached = reg_again(md, p, 1 << 20, 50);
    uct_ib_md_close(md);
    printf("1 MiB again, 50 times: direct %.1f us, rcache %.2f us, ratio "
           "%.0fx\n",
           direct * 1e6, cached * 1e6, direct / cached);
    munmap(p, 1 << 20);
    return 0;
}
