/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ucs_bench_rcache: registration cache speed, ours against Debian's stock
 * UCX 1.13 rcache and against no cache (register on every use), with the
 * same fake registration cost model, in one run.
 *
 * Usage: ucs_bench_rcache [--quick] [--ours PATH] [--abi PATH] [--ucx PATH]
 *   --ours PATH  our libucs.so.0 (env UCS_BENCH_OURS; default: the build
 *                tree's src/ucs/.libs/libucs.so.0)
 *   --abi PATH   our libucm_rcache.so.0, the same cache behind UCX 1.13.1's
 *                ABI, its caches created by code compiled against Debian's
 *                headers (ucs_bench_rcache_stock.c) as a stock UCX caller
 *                would (env UCS_BENCH_ABI; default: the build tree's);
 *                the column is left out when Debian's headers were missing
 *   --ucx PATH   stock libucs.so.0 (env UCS_BENCH_UCX; default
 *                /usr/lib/x86_64-linux-gnu/libucs.so.0)
 *   --quick      fewer regions and iterations
 *
 * Both libraries have the soname libucs.so.0, so each implementation runs
 * in its own forked worker that dlopen()s it; workers report "name value"
 * lines through a pipe and the driver prints one table.  Every timing is
 * the best of a few rounds (the machine may be shared); single-thread
 * rows time the thread's CPU time, the Mops/s rows wall-clock time.
 *
 * Cost model: mem_reg spins UCS_BENCH_REG_NS, mem_dereg UCS_BENCH_DEREG_NS.
 * "none" calls them directly for every get+put.
 */
#include "tools_env.h"
#include "ucs_bench_rcache.h"

#include <ucm/api/ucm_ext.h>
#include <ucs/memory/rcache.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef UCS_BENCH_OURS_BUILD
#define UCS_BENCH_OURS_BUILD "src/ucs/.libs/libucs.so.0"
#endif
#define UCS_BENCH_UCX_DEFAULT "/usr/lib/x86_64-linux-gnu/libucs.so.0"
#define UCS_BENCH_REG_NS      300
#define UCS_BENCH_DEREG_NS    100
#define UCS_BENCH_PAGE        4096ul
#define UCS_BENCH_VM_UNMAPPED (1 << 17)
#define UCS_BENCH_ROUNDS      9
#define UCS_BENCH_MAX_RESULTS 64

typedef struct {
    ucs_status_t (*create)(const ucs_rcache_params_t *, const char *, void *,
                           ucs_rcache_t **);
    void (*destroy)(ucs_rcache_t *);
    ucs_status_t (*get)(ucs_rcache_t *, void *, size_t, int, void *,
                        ucs_rcache_region_t **);
    void (*put)(ucs_rcache_t *, ucs_rcache_region_t *);
} bench_api_t;

typedef struct {
    char name[128];
    double value[4]; /* ours, ucx, none, abi */
    int valid[4];
} bench_result_t;

#define UCS_BENCH_IMPLS 4
static const char *bench_impl_names[] = {"ours", "ucx", "none", "abi"};
static bench_api_t bench_api;
static void *bench_abi_create; /* abi: the library's create */
static int bench_impl;         /* 0 ours, 1 ucx, 2 none, 3 abi */
static int bench_quick;
static FILE *bench_out;

static double bench_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* The calling thread's CPU time: single-thread timings use it, so that
 * time the machine gives to other work does not count (the fake
 * registration cost below stays wall-clock time). */
static double bench_cpu_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void bench_spin_ns(double ns)
{
    double end = bench_now_ns() + ns;

    while (bench_now_ns() < end) {
    }
}

void bench_cost_reg(void)
{
    bench_spin_ns(UCS_BENCH_REG_NS);
}

void bench_cost_dereg(void)
{
    bench_spin_ns(UCS_BENCH_DEREG_NS);
}

static ucs_status_t bench_mem_reg(void *context, ucs_rcache_t *rcache,
                                  void *arg, ucs_rcache_region_t *region,
                                  uint16_t flags)
{
    bench_cost_reg();
    return UCS_OK;
}

static void bench_mem_dereg(void *context, ucs_rcache_t *rcache,
                            ucs_rcache_region_t *region)
{
    bench_cost_dereg();
}

static const ucs_rcache_ops_t bench_ops = {bench_mem_reg, bench_mem_dereg,
                                           NULL};

/* "none": a registration per use */
static ucs_rcache_region_t bench_none_region;

static ucs_status_t bench_none_create(const ucs_rcache_params_t *params,
                                      const char *name, void *stats,
                                      ucs_rcache_t **rcache_p)
{
    *rcache_p = (ucs_rcache_t *)&bench_none_region;
    return UCS_OK;
}

static void bench_none_destroy(ucs_rcache_t *rcache)
{
}

static ucs_status_t bench_none_get(ucs_rcache_t *rcache, void *addr, size_t len,
                                   int prot, void *arg,
                                   ucs_rcache_region_t **region_p)
{
    bench_mem_reg(NULL, rcache, arg, &bench_none_region, 0);
    *region_p = &bench_none_region;
    return UCS_OK;
}

static void bench_none_put(ucs_rcache_t *rcache, ucs_rcache_region_t *region)
{
    bench_mem_dereg(NULL, rcache, region);
}

static void bench_report(const char *name, double value)
{
    fprintf(bench_out, "%s %.3f\n", name, value);
    fflush(bench_out);
}

static ucs_rcache_t *bench_create(unsigned long max_regions)
{
    ucs_rcache_params_t params;
    ucs_rcache_t *rcache;

#ifdef UCS_BENCH_HAVE_STOCK_ABI
    if (bench_impl == 3) {
        if (bench_stock_create(bench_abi_create, max_regions,
                               (void **)&rcache) != 0) {
            fprintf(stderr, "abi: rcache create failed\n");
            exit(3);
        }
        return rcache;
    }
#endif
    memset(&params, 0, sizeof(params));
    params.region_struct_size = sizeof(ucs_rcache_region_t);
    params.alignment          = UCS_BENCH_PAGE;
    params.max_alignment      = UCS_BENCH_PAGE;
    params.ucm_events         = UCS_BENCH_VM_UNMAPPED;
    params.ucm_event_priority = 1000;
    params.ops                = &bench_ops;
    params.max_regions        = max_regions;
    params.max_size           = SIZE_MAX;
    params.max_unreleased     = SIZE_MAX;
    if (bench_api.create(&params, "bench", NULL, &rcache) != UCS_OK) {
        fprintf(stderr, "%s: rcache create failed\n",
                bench_impl_names[bench_impl]);
        exit(3);
    }
    return rcache;
}

static void *bench_map(size_t npages)
{
    void *p = mmap(NULL, npages * UCS_BENCH_PAGE, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

    if (p == MAP_FAILED) {
        perror("mmap");
        exit(3);
    }
    return p;
}

static inline void bench_get_put(ucs_rcache_t *rcache, void *addr, size_t len)
{
    ucs_rcache_region_t *region;

    if (bench_api.get(rcache, addr, len, PROT_READ | PROT_WRITE, NULL,
                      &region) != UCS_OK) {
        fprintf(stderr, "get failed\n");
        exit(3);
    }
    bench_api.put(rcache, region);
}

static long bench_rss_kb(void)
{
    long size, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");

    if (f != NULL) {
        if (fscanf(f, "%ld %ld", &size, &rss) != 2) {
            rss = 0;
        }
        fclose(f);
    }
    return rss * (UCS_BENCH_PAGE / 1024);
}

/* xorshift64 step, then a number uniform in [0, n) (n < 2^32) by
 * multiply-shift instead of a division */
static inline unsigned long bench_random_below(uint64_t *x, unsigned long n)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return ((*x >> 32) * n) >> 32;
}

/* random get+put over n regions at every other page */
static void bench_random_hits(unsigned long n, const char *name)
{
    unsigned long iters = bench_quick ? 70000 : 700000;
    char *area          = bench_map(2 * n);
    ucs_rcache_t *rcache;
    uint64_t x  = 88172645463325252ull;
    double best = 1e30, t;
    unsigned long i, r;
    long rss0, rss1;
    char key[64];

    /* memory the earlier rows freed but malloc kept would be reused here
     * without counting: given back first, so that each implementation's
     * row is what its cache takes from the system */
    malloc_trim(0);
    rss0   = bench_rss_kb();
    rcache = bench_create(~0ul);
    for (i = 0; i < n; ++i) {
        bench_get_put(rcache, area + 2 * i * UCS_BENCH_PAGE, 64);
    }
    for (r = 0; r < UCS_BENCH_ROUNDS; ++r) {
        t = bench_cpu_ns();
        for (i = 0; i < iters; ++i) {
            bench_get_put(
                rcache,
                area + 2 * bench_random_below(&x, n) * UCS_BENCH_PAGE + 8, 64);
        }
        t    = (bench_cpu_ns() - t) / iters;
        best = (t < best) ? t : best;
    }
    /* after the hits: what lookups touch (hint tables) counts too */
    rss1 = bench_rss_kb();
    if ((n >= 100000) && (bench_impl != 2)) {
        snprintf(key, sizeof(key), "memory/region %lu (bytes)", n);
        bench_report(key, (rss1 - rss0) * 1024.0 / n);
    }
    bench_report(name, best);
    bench_api.destroy(rcache);
    munmap(area, 2 * n * UCS_BENCH_PAGE);
}

/* The machine's floor for a hit on one region: the two atomic read-modify-
 * writes a get+put must make on the region's reference count (a
 * compare-and-swap that takes a reference only from a live count, then a
 * fetch-and-sub), nothing else.  Reported in the "none" column. */
static void bench_atomic_floor(void)
{
    unsigned long iters               = bench_quick ? 3000000 : 30000000;
    static volatile uint32_t refcount = 1;
    double best                       = 1e30, t;
    unsigned long i, r;
    uint32_t old;

    for (r = 0; r < UCS_BENCH_ROUNDS; ++r) {
        t = bench_cpu_ns();
        for (i = 0; i < iters; ++i) {
            old = refcount;
            while (!__atomic_compare_exchange_n(&refcount, &old, old + 1, 0,
                                                __ATOMIC_ACQUIRE,
                                                __ATOMIC_RELAXED)) {
            }
            __atomic_fetch_sub(&refcount, 1, __ATOMIC_RELEASE);
        }
        t    = (bench_cpu_ns() - t) / iters;
        best = (t < best) ? t : best;
    }
    bench_report("floor: hold+release atomics, 1 region (ns)", best);
}

/* The machine's floor for a random hit over n regions: one dependent load
 * of a random cache line in n x 128 bytes (about the memory the cache
 * itself holds per region), a pointer chase along a random cycle (Sattolo)
 * so that no load can start before the previous one ends.  A hit over
 * many regions needs at least two such loads (the index leaf, then the
 * region's reference count).  Reported in the "none" column, ns per load. */
static void bench_memory_floor(unsigned long n, const char *name)
{
    unsigned long iters = bench_quick ? 70000 : 700000;
    const size_t slot   = 128;
    uint64_t x          = 0x9e3779b97f4a7c15ull;
    double best         = 1e30, t;
    unsigned long i, j, r;
    uint32_t *perm, tmp;
    char *buf;
    void **p;

    buf  = malloc(n * slot);
    perm = malloc(n * sizeof(*perm));
    if ((buf == NULL) || (perm == NULL)) {
        fprintf(stderr, "memory floor: out of memory\n");
        exit(3);
    }
    for (i = 0; i < n; ++i) {
        perm[i] = i;
    }
    for (i = n - 1; i > 0; --i) { /* Sattolo: one cycle through all */
        j       = bench_random_below(&x, i);
        tmp     = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
    for (i = 0; i < n; ++i) {
        *(void **)(buf + perm[i] * slot) = buf + perm[(i + 1) % n] * slot;
    }
    p = (void **)buf;
    for (r = 0; r < UCS_BENCH_ROUNDS; ++r) {
        t = bench_cpu_ns();
        for (i = 0; i < iters; ++i) {
            p = (void **)*p;
        }
        t    = (bench_cpu_ns() - t) / iters;
        best = (t < best) ? t : best;
    }
    if (p == NULL) { /* keeps the chase */
        fprintf(stderr, "memory floor: broken chain\n");
    }
    bench_report(name, best);
    free(perm);
    free(buf);
}

typedef struct {
    ucs_rcache_t *rcache;
    char *addr;
    unsigned long iters;
    double cpu_ns; /* out: the thread's CPU time */
} bench_thread_arg_t;

static void *bench_thread(void *p)
{
    bench_thread_arg_t *arg = p;
    double cpu              = bench_cpu_ns();
    unsigned long i;

    for (i = 0; i < arg->iters; ++i) {
        bench_get_put(arg->rcache, arg->addr, 64);
    }
    arg->cpu_ns = bench_cpu_ns() - cpu;
    return NULL;
}

/* aggregate Mops/s of nthreads on one shared or on private regions, and
 * the threads' CPU time per operation (on a machine shared with other
 * work the two threads may not get two cores; CPU time per operation
 * still shows what they cost each other: 2 threads scale by
 * 2 x cpu_1 / cpu_2 when each has a core) */
static double bench_threads(ucs_rcache_t *rcache, char *area, int nthreads,
                            int shared, double *cpu_per_op)
{
    unsigned long iters = bench_quick ? 100000 : 1000000;
    bench_thread_arg_t args[2];
    pthread_t threads[2];
    double best = 0, best_cpu = 1e30, t, rate, cpu;
    int r, i;

    for (r = 0; r < UCS_BENCH_ROUNDS; ++r) {
        for (i = 0; i < nthreads; ++i) {
            args[i].rcache = rcache;
            args[i].addr   = area + (shared ? 0 : 2 * i * UCS_BENCH_PAGE);
            args[i].iters  = iters;
        }
        t = bench_now_ns();
        for (i = 0; i < nthreads; ++i) {
            pthread_create(&threads[i], NULL, bench_thread, &args[i]);
        }
        for (i = 0; i < nthreads; ++i) {
            pthread_join(threads[i], NULL);
        }
        t    = bench_now_ns() - t;
        rate = nthreads * iters / t * 1e3;
        best = (rate > best) ? rate : best;
        for (cpu = 0, i = 0; i < nthreads; ++i) {
            cpu += args[i].cpu_ns;
        }
        cpu /= nthreads * iters;
        best_cpu = (cpu < best_cpu) ? cpu : best_cpu;
    }
    *cpu_per_op = best_cpu;
    return best;
}

static void bench_scaling(void)
{
    char *area           = bench_map(4);
    ucs_rcache_t *rcache = bench_create(~0ul);
    double one, shared, priv, cpu_one, cpu_shared, cpu_priv;

    bench_get_put(rcache, area, 64);
    bench_get_put(rcache, area + 2 * UCS_BENCH_PAGE, 64);
    one    = bench_threads(rcache, area, 1, 1, &cpu_one);
    shared = bench_threads(rcache, area, 2, 1, &cpu_shared);
    priv   = bench_threads(rcache, area, 2, 0, &cpu_priv);
    bench_report("1 thread (Mops/s)", one);
    bench_report("2 threads, one region (Mops/s)", shared);
    bench_report("2 threads, private regions (Mops/s)", priv);
    bench_report("1 thread, CPU per op (ns)", cpu_one);
    bench_report("2 threads, one region, CPU per op (ns)", cpu_shared);
    bench_report("2 threads, private, CPU per op (ns)", cpu_priv);
    bench_api.destroy(rcache);
    munmap(area, 4 * UCS_BENCH_PAGE);
}

/* every get misses and evicts the least recently used region; each round
 * also times the bare cost model (mem_reg + mem_dereg per iteration) in
 * this worker, so that the overhead is a difference within one run */
static void bench_miss_evict(void)
{
    unsigned long n = 4096, iters = bench_quick ? 7000 : 70000;
    char *area           = bench_map(2 * n);
    ucs_rcache_t *rcache = bench_create(1000);
    double best = 1e30, bare = 1e30, t;
    unsigned long i, r;

    for (i = 0; i < n; ++i) {
        bench_get_put(rcache, area + 2 * i * UCS_BENCH_PAGE, 64);
    }
    for (r = 0; r < UCS_BENCH_ROUNDS; ++r) {
        t = bench_cpu_ns();
        for (i = 0; i < iters; ++i) {
            bench_get_put(rcache, area + 2 * (i % n) * UCS_BENCH_PAGE, 64);
        }
        t    = (bench_cpu_ns() - t) / iters;
        best = (t < best) ? t : best;

        t = bench_cpu_ns();
        for (i = 0; i < iters; ++i) {
            bench_mem_reg(NULL, rcache, NULL, &bench_none_region, 0);
            bench_mem_dereg(NULL, rcache, &bench_none_region);
        }
        t    = (bench_cpu_ns() - t) / iters;
        bare = (t < bare) ? t : bare;
    }
    bench_report("miss + LRU eviction (ns)", best);
    if (bench_impl != 2) {
        bench_report("miss overhead over the cost model (ns)", best - bare);
    }
    bench_api.destroy(rcache);
    munmap(area, 2 * n * UCS_BENCH_PAGE);
}

/* munmap of an area holding n cached regions, per region, over empty */
static void bench_munmap(unsigned long n, const char *name)
{
    ucs_rcache_t *rcache = bench_create(~0ul);
    double best = 1e30, base = 1e30, t;
    unsigned long i, r;
    char *area;

    for (r = 0; r < UCS_BENCH_ROUNDS; ++r) {
        area = bench_map(2 * n);
        t    = bench_cpu_ns();
        munmap(area, 2 * n * UCS_BENCH_PAGE);
        t    = bench_cpu_ns() - t;
        base = (t < base) ? t : base;

        area = bench_map(2 * n);
        for (i = 0; i < n; ++i) {
            bench_get_put(rcache, area + 2 * i * UCS_BENCH_PAGE, 64);
        }
        t = bench_cpu_ns();
        munmap(area, 2 * n * UCS_BENCH_PAGE);
        t    = bench_cpu_ns() - t;
        best = (t < best) ? t : best;
        /* let the cache release them before the next round */
        area = bench_map(1);
        bench_get_put(rcache, area, 64);
        munmap(area, UCS_BENCH_PAGE);
    }
    bench_report(name, (best - base) / n);
    bench_api.destroy(rcache);
}

static void bench_worker(const char *lib)
{
    void *handle;
    char *area;
    ucs_rcache_t *rcache;
    double best = 1e30, t;
    unsigned long i, r, iters = bench_quick ? 300000 : 3000000;

    if (bench_impl == 2) {
        bench_api.create  = bench_none_create;
        bench_api.destroy = bench_none_destroy;
        bench_api.get     = bench_none_get;
        bench_api.put     = bench_none_put;
        iters /= 100;
    } else {
        handle = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
        if (handle == NULL) {
            fprintf(stderr, "%s: %s\n", bench_impl_names[bench_impl],
                    dlerror());
            exit(3);
        }
        bench_api.create  = dlsym(handle, "ucs_rcache_create");
        bench_api.destroy = dlsym(handle, "ucs_rcache_destroy");
        bench_api.get     = dlsym(handle, "ucs_rcache_get");
        bench_api.put     = dlsym(handle, "ucs_rcache_region_put");
        bench_abi_create  = (void *)bench_api.create;
        if (!bench_api.create || !bench_api.destroy || !bench_api.get ||
            !bench_api.put) {
            fprintf(stderr, "%s: ucs_rcache_* not found in %s\n",
                    bench_impl_names[bench_impl], lib);
            exit(3);
        }
    }

    area   = bench_map(2);
    rcache = bench_create(~0ul);
    bench_get_put(rcache, area, 64);
    for (r = 0; r < UCS_BENCH_ROUNDS; ++r) {
        t = bench_cpu_ns();
        for (i = 0; i < iters; ++i) {
            bench_get_put(rcache, area + 8, 64);
        }
        t    = (bench_cpu_ns() - t) / iters;
        best = (t < best) ? t : best;
    }
    bench_report("hit get+put, 1 region (ns)", best);
    bench_api.destroy(rcache);
    munmap(area, 2 * UCS_BENCH_PAGE);

    bench_random_hits(10000, "random hits, 10k regions (ns)");
    bench_random_hits(100000, "random hits, 100k regions (ns)");
    if (bench_impl != 2) {
        bench_random_hits(bench_quick ? 200000 : 1000000,
                          bench_quick ? "random hits, 200k regions (ns)"
                                      : "random hits, 1M regions (ns)");
    }
    if (bench_impl == 2) {
        bench_atomic_floor();
        bench_memory_floor(10000, "floor: 1 random load, 10k x 128 B (ns)");
        bench_memory_floor(100000, "floor: 1 random load, 100k x 128 B (ns)");
        bench_memory_floor(bench_quick ? 200000 : 1000000,
                           bench_quick
                               ? "floor: 1 random load, 200k x 128 B (ns)"
                               : "floor: 1 random load, 1M x 128 B (ns)");
    }
    bench_scaling();
    bench_miss_evict();
    if (bench_impl != 2) {
        bench_munmap(1000, "munmap per cached region, 1k (ns)");
        bench_munmap(10000, "munmap per cached region, 10k (ns)");
    }
}

static int bench_run_worker(int impl, const char *lib, bench_result_t *results,
                            unsigned *nresults)
{
    char line[256], name[128];
    size_t len;
    double value;
    int fds[2], status;
    unsigned i;

    if (lib == NULL) {
        return 0; /* a column this build leaves out */
    }
    pid_t pid;
    FILE *in;
    char *sp;

    if (pipe(fds) != 0) {
        return -1;
    }
    pid = fork();
    if (pid == 0) {
        close(fds[0]);
        bench_out  = fdopen(fds[1], "w");
        bench_impl = impl;
        bench_worker(lib);
        fclose(bench_out);
        _exit(0);
    }
    close(fds[1]);
    in = fdopen(fds[0], "r");
    while (fgets(line, sizeof(line), in) != NULL) {
        sp = strrchr(line, ' ');
        if (sp == NULL) {
            continue;
        }
        *sp   = '\0';
        value = atof(sp + 1);
        len   = ucs_min(strlen(line), sizeof(name) - 1); /* truncates */
        memcpy(name, line, len);
        name[len] = '\0';
        for (i = 0; i < *nresults; ++i) {
            if (!strcmp(results[i].name, name)) {
                break;
            }
        }
        if ((i == *nresults) && (i < UCS_BENCH_MAX_RESULTS)) {
            memcpy(results[i].name, name, sizeof(name));
            ++*nresults;
        }
        if (i < UCS_BENCH_MAX_RESULTS) {
            results[i].value[impl] = value;
            results[i].valid[impl] = 1;
        }
    }
    fclose(in);
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "worker '%s' failed (status 0x%x)\n",
                bench_impl_names[impl], status);
        return -1;
    }
    return 0;
}

/* The userfaultfd monitor as the caches of lib will find it, asked in a
 * forked child that loads lib (the driver loads no libucs): NULL when it
 * runs or the child cannot tell, else the reason, in buf. */
static const char *bench_uffd_probe(const char *lib, char *buf, size_t max)
{
    ucs_status_t (*start)(int *);
    void (*query)(ucm_uffd_info_t *);
    ucm_uffd_info_t info;
    int fds[2], status, active = 1, devnull;
    size_t used = 0;
    void *handle;
    ssize_t n;
    pid_t pid;

    if (pipe(fds) != 0) {
        return NULL;
    }
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid == 0) {
        close(fds[0]);
        devnull = open("/dev/null", O_WRONLY); /* the workers log for it */
        if (devnull >= 0) {
            dup2(devnull, 2);
        }
        handle = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
        if (handle != NULL) {
            *(void **)&start = dlsym(handle, "ucm_uffd_start");
            *(void **)&query = dlsym(handle, "ucm_uffd_query");
            if ((start != NULL) && (query != NULL)) {
                start(&active);
                query(&info);
                if (!active &&
                    (write(fds[1], info.reason,
                           strnlen(info.reason, sizeof(info.reason))) < 0)) {
                    _exit(1);
                }
            }
        }
        _exit(0);
    }
    close(fds[1]);
    while ((pid > 0) && ((n = read(fds[0], buf + used, max - 1 - used)) > 0)) {
        used += n;
    }
    close(fds[0]);
    if (pid > 0) {
        waitpid(pid, &status, 0);
    }
    buf[used] = '\0';
    return (used > 0) ? buf : NULL;
}

/* What degrades the columns of ours (and stock-abi, on the same libucm),
 * one line each on stderr; the table on stdout stays as it is. */
static void bench_degraded(const char *ours)
{
    const char *pfn = getenv("UCX_RCACHE_CHECK_PFN");
    char uffd_reason[200];
    tools_env_item_t items[] = {
        {TOOLS_ENV_GIVEN, "userfaultfd", NULL, 0,
         "the ours and stock-abi caches run on the memory hooks only (no "
         "subscription in their miss rows)"},
        {TOOLS_ENV_PAGEMAP, NULL, NULL, 0,
         "UCX_RCACHE_CHECK_PFN compares zeros: its rows pay the pagemap "
         "reads and check nothing"},
    };
    /* hidden page frames only matter to a cache that checks them */
    unsigned count = ((pfn != NULL) && (strtoul(pfn, NULL, 0) != 0)) ? 2 : 1;

    items[0].reason = bench_uffd_probe(ours, uffd_reason, sizeof(uffd_reason));
    tools_env_report(stderr, TOOLS_ENV_PREFIX, items, count);
}

/* Column impl against ours, as text ("-" without both values). */
static void bench_ratio(const bench_result_t *result, int impl, char *buf,
                        size_t max)
{
    if (result->valid[0] && result->valid[impl] && (result->value[0] > 0)) {
        snprintf(buf, max, "%.2fx", result->value[impl] / result->value[0]);
    } else {
        snprintf(buf, max, "-");
    }
}

int main(int argc, char **argv)
{
    const char *ours = getenv("UCS_BENCH_OURS");
    const char *ucx  = getenv("UCS_BENCH_UCX");
    const char *abi  = getenv("UCS_BENCH_ABI");
    bench_result_t results[UCS_BENCH_MAX_RESULTS];
    unsigned nresults = 0, i, j;
    char cell[UCS_BENCH_IMPLS][24], ratio[2][24];
    int ret = 0;

    for (i = 1; i < (unsigned)argc; ++i) {
        if (!strcmp(argv[i], "--quick")) {
            bench_quick = 1;
        } else if (!strcmp(argv[i], "--ours") && (i + 1 < (unsigned)argc)) {
            ours = argv[++i];
        } else if (!strcmp(argv[i], "--ucx") && (i + 1 < (unsigned)argc)) {
            ucx = argv[++i];
        } else if (!strcmp(argv[i], "--abi") && (i + 1 < (unsigned)argc)) {
            abi = argv[++i];
        } else {
            fprintf(stderr,
                    "usage: %s [--quick] [--ours PATH] [--abi PATH] "
                    "[--ucx PATH]\n",
                    argv[0]);
            return 2;
        }
    }
    if (ours == NULL) {
        ours = UCS_BENCH_OURS_BUILD;
    }
    if (ucx == NULL) {
        ucx = UCS_BENCH_UCX_DEFAULT;
    }
#ifdef UCS_BENCH_HAVE_STOCK_ABI
    if (abi == NULL) {
        abi = UCS_BENCH_STOCK_ABI_BUILD;
    }
    /* no UCX is loaded in its worker to tell the release: the column is
     * the 1.13 entry (rcache_stock_abi.c) */
    setenv("UCM_RCACHE_UCX", "1.13", 0);
#else
    abi = NULL;
#endif
    memset(results, 0, sizeof(results));
    bench_degraded(ours);
    printf("fake registration: mem_reg %d ns, mem_dereg %d ns; best of %d "
           "rounds\nours: %s\nabi:  %s\nucx:  %s\n\n",
           UCS_BENCH_REG_NS, UCS_BENCH_DEREG_NS, UCS_BENCH_ROUNDS, ours,
           (abi != NULL) ? abi
                         : "(left out: built without UCX 1.13's "
                           "headers)",
           ucx);
    fflush(stdout);
    ret |= bench_run_worker(0, ours, results, &nresults) ? 1 : 0;
    ret |= bench_run_worker(3, abi, results, &nresults) ? 1 : 0;
    bench_run_worker(1, ucx, results, &nresults);
    bench_run_worker(2, "", results, &nresults);

    printf("%-40s %10s %10s %10s %10s %9s %9s\n", "case", "ours", "stock-abi",
           "ucx-1.13", "none", "ucx/ours", "abi/ours");
    for (i = 0; i < nresults; ++i) {
        for (j = 0; j < UCS_BENCH_IMPLS; ++j) {
            if (results[i].valid[j]) {
                snprintf(cell[j], sizeof(cell[j]), "%.1f", results[i].value[j]);
            } else {
                snprintf(cell[j], sizeof(cell[j]), "-");
            }
        }
        for (j = 0; j < 2; ++j) {
            bench_ratio(&results[i], (j == 0) ? 1 : 3, ratio[j],
                        sizeof(ratio[j]));
        }
        printf("%-40s %10s %10s %10s %10s %9s %9s\n", results[i].name, cell[0],
               cell[3], cell[1], cell[2], ratio[0], ratio[1]);
    }
    printf("\n(Mops/s rows: higher is better, a ratio < 1 means ours is "
           "faster;\n memory rows: bytes of resident memory per cached "
           "region, a ratio >= 1 means\n ours takes no more;"
           "\n other rows: ns, a ratio > 1 means ours is faster; "
           "stock-abi: libucm_rcache.so.0\n through UCX 1.13.1's ABI, "
           "abi/ours near 1 means the ABI costs nothing.)\n");
    return ret;
}
