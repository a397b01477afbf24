/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ucm_bench_hooks: cost of the memory hooks of this libucm, compared with no
 * hooks at all and with the stock UCX 1.13 libucm, measured in one run.
 *
 * Usage:
 *   ucm_bench_hooks [--quick] [--csv] [--verbose] [--opts-only]
 *                   [--ours PATH] [--ucx PATH] [--dl PATH]
 *
 *   --quick      short run (one pass, fewer rounds; a few seconds)
 *   --csv        machine-readable output: measurement,unit,config,value,
 *                vs_none,status
 *   --verbose    let the workers' stderr (library log messages) through
 *   --opts-only  select the hook mode only with ucm_set_global_opts(); by
 *                default the worker also sets UCX_MEM_MMAP_HOOK_MODE before
 *                loading the library (stock UCX 1.13 crashes in reloc mode
 *                when the mode is switched after load)
 *   --ours PATH  our libucm.so.0     (env UCM_BENCH_OURS; default: the build
 *                tree's src/ucm/.libs/libucm.so.0 when run from the build
 *                tree, else $libdir/libucm.so.0)
 *   --ucx PATH   stock UCX libucm.so.0 (env UCM_BENCH_UCX; default: the one
 *                found by configure, --with-stock-ucm)
 *   --dl PATH    shared object for the dlopen+dlclose loop (env UCM_BENCH_DL;
 *                default: the build tree's libucm_bench_dl.so, else a small
 *                system library)
 *
 * Every configuration (none, ours-reloc, ours-bistro, ucx-reloc, ucx-bistro)
 * runs in its own child process, a re-exec of this program with
 * "--worker LIB MODE", so that the hooks of one never affect another.  The
 * worker dlopen()s LIB (nothing for "none"; a stock UCX libucm gets its
 * libucs.so.0 loaded with it), sets the global options, times
 * the first ucm_set_event_handler(VM_MAPPED|VM_UNMAPPED) call (the hook
 * installation) and then times each operation in several rounds; the driver
 * reports medians and ratios against "none".  A worker that crashes, fails
 * or hangs is reported in the table; the run goes on.  Timed rounds during
 * which the worker was preempted (wall time > its CPU time) are retried.
 *
 * Exit status: 0; 1 if a worker of "none" or of our libucm failed (stock UCX
 * failures are only reported); 2 on usage errors.
 */
#include "config.h"
#include "bench_count.h"
#include "tools_env.h"

#include <common/ucs_env.h>
#include <ucm/api/ucm.h>
#include <ucm/api/ucm_ext.h>

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef HAVE_VALGRIND_VALGRIND_H
#include <valgrind/valgrind.h>
#else
#define RUNNING_ON_VALGRIND 0
#endif

#ifndef UCM_BENCH_BUILD_DIR
#define UCM_BENCH_BUILD_DIR ""
#endif
#ifndef UCM_BENCH_OURS_BUILD
#define UCM_BENCH_OURS_BUILD ""
#endif
#ifndef UCM_BENCH_OURS_INSTALLED
#define UCM_BENCH_OURS_INSTALLED "libucm.so.0"
#endif
#ifndef UCM_BENCH_STOCK_UCM
#define UCM_BENCH_STOCK_UCM "/usr/lib/x86_64-linux-gnu/libucm.so.0"
#endif
#ifndef UCM_BENCH_DL_BUILD
#define UCM_BENCH_DL_BUILD ""
#endif

_Static_assert(sizeof(ucm_global_config_t) == 48,
               "ucm_global_config_t must keep the UCX 1.13 layout");

/* Targets printed for reference */
#define BENCH_TARGET_HOOK_NS      10.0
#define BENCH_TARGET_MALLOC_RATIO 1.05
#define BENCH_TARGET_INSTALL_US   100.0

#define BENCH_MAX_SAMPLES    16
#define BENCH_MAX_PAIRS      128
#define BENCH_MAX_RETRIES    3
#define BENCH_HOLE_SIZE      (64 * 1024)
#define BENCH_LARGE_SIZE     (1024 * 1024)
#define BENCH_MMAP_THRESHOLD (128 * 1024)

/* What a worker reports, one "ok KEY VALUE" line each */
typedef enum {
    K_INSTALL_US,
    K_HOOK_NS, /* (libc - raw syscall munmap) with hooks minus before */
    K_MUNMAP_LIBC_NS,
    K_MUNMAP_SYS_NS,
    K_MUNMAP_EV,
    K_MMAP_NS,
    K_MMAP_EV,
    K_MALLOC64_NS,
    K_MALLOC64_EV,
    K_MALLOC4K_NS, /* heap block beyond the fast bins (no mmap) */
    K_MALLOC4K_EV,
    K_MALLOC1M_NS,
    K_MALLOC1M_EV,
    K_DLOPEN_US,
    K_DLOPEN_EV,
    K_TRUNC_NS, /* ftruncate grow + shrink of a mapped memfd */
    K_TRUNC_EV,
    K_PUNCH_NS, /* write a page of a mapped memfd, punch it out (fallocate) */
    K_PUNCH_EV,
    K_REMOVE_NS, /* the same with madvise(MADV_REMOVE) */
    K_REMOVE_EV,
    K_MEMFD_NS, /* memfd_create + close (UCX_MEM_FILE_WATCH=y: + reopen) */
    K_MEMFD_EV,
    K_RETRIED_PCT, /* timed rounds retried because the worker was preempted */
    K_LAST
} bench_key_t;

static const char *bench_key_names[K_LAST] = {
    [K_INSTALL_US]     = "install_us",
    [K_HOOK_NS]        = "hook_ns",
    [K_MUNMAP_LIBC_NS] = "munmap_libc_ns",
    [K_MUNMAP_SYS_NS]  = "munmap_sys_ns",
    [K_MUNMAP_EV]      = "munmap_events",
    [K_MMAP_NS]        = "mmap_pair_ns",
    [K_MMAP_EV]        = "mmap_pair_events",
    [K_MALLOC64_NS]    = "malloc64_ns",
    [K_MALLOC64_EV]    = "malloc64_events",
    [K_MALLOC4K_NS]    = "malloc4k_ns",
    [K_MALLOC4K_EV]    = "malloc4k_events",
    [K_MALLOC1M_NS]    = "malloc1m_ns",
    [K_MALLOC1M_EV]    = "malloc1m_events",
    [K_DLOPEN_US]      = "dlopen_us",
    [K_DLOPEN_EV]      = "dlopen_events",
    [K_TRUNC_NS]       = "ftruncate_pair_ns",
    [K_TRUNC_EV]       = "ftruncate_pair_events",
    [K_RETRIED_PCT]    = "retried_pct",
    [K_PUNCH_NS]       = "punch_hole_ns",
    [K_PUNCH_EV]       = "punch_hole_events",
    [K_REMOVE_NS]      = "madv_remove_ns",
    [K_REMOVE_EV]      = "madv_remove_events",
    [K_MEMFD_NS]       = "memfd_create_ns",
    [K_MEMFD_EV]       = "memfd_create_events",
};

/* Rows of the main table */
typedef enum {
    ROW_DELTA, /* comparison column: difference to none, in the same unit */
    ROW_RATIO, /* comparison column: ratio to none */
    ROW_ABS    /* no comparison (none has no value) */
} bench_row_kind_t;

static const struct {
    bench_key_t key;
    const char *label;
    const char *unit;
    bench_row_kind_t kind;
} bench_rows[] = {
    {K_HOOK_NS, "hooked munmap, +ns/call", "ns", ROW_DELTA},
    {K_MUNMAP_SYS_NS, "munmap raw syscall", "ns", ROW_RATIO},
    {K_MMAP_NS, "mmap+munmap 4 KiB", "ns", ROW_RATIO},
    {K_MALLOC64_NS, "malloc+free 64 B", "ns", ROW_RATIO},
    {K_MALLOC4K_NS, "malloc+free 4 KiB", "ns", ROW_RATIO},
    {K_MALLOC1M_NS, "malloc+free 1 MiB", "ns", ROW_RATIO},
    {K_DLOPEN_US, "dlopen+dlclose", "us", ROW_RATIO},
    {K_TRUNC_NS, "ftruncate grow+shrink, mapped", "ns", ROW_RATIO},
    {K_PUNCH_NS, "write+PUNCH_HOLE a page, mapped", "ns", ROW_RATIO},
    {K_REMOVE_NS, "write+MADV_REMOVE a page, mapped", "ns", ROW_RATIO},
    {K_MEMFD_NS, "memfd_create+close", "ns", ROW_RATIO},
    {K_INSTALL_US, "first install", "us", ROW_ABS},
};

#define BENCH_NROWS (sizeof(bench_rows) / sizeof(bench_rows[0]))

static const struct {
    bench_key_t key;
    const char *label;
} bench_event_rows[] = {
    {K_MUNMAP_EV, "munmap (unmapped range)"},
    {K_MMAP_EV, "mmap+munmap 4 KiB"},
    {K_MALLOC64_EV, "malloc+free 64 B"},
    {K_MALLOC4K_EV, "malloc+free 4 KiB"},
    {K_MALLOC1M_EV, "malloc+free 1 MiB"},
    {K_DLOPEN_EV, "dlopen+dlclose"},
    {K_TRUNC_EV, "ftruncate grow+shrink"},
    {K_PUNCH_EV, "write+PUNCH_HOLE"},
    {K_REMOVE_EV, "write+MADV_REMOVE"},
    {K_MEMFD_EV, "memfd_create+close"},
};

#define BENCH_NEVROWS (sizeof(bench_event_rows) / sizeof(bench_event_rows[0]))

/* Rows of the counting mode (--count): user-space code only; the rows
 * whose cost is the kernel's (ftruncate, hole punching, memfd_create) and
 * dlopen (the loader's work) are left out. */
typedef enum {
    C_MUNMAP,
    C_MUNMAP_SYS,
    C_MMAP,
    C_MALLOC64,
    C_MALLOC4K,
    C_MALLOC1M,
    C_FLOOR, /* "none" only: munmap through a minimal hook */
    C_LAST
} bench_count_row_t;

static const struct {
    const char *key;
    const char *label;
    bench_key_t ev; /* events per operation, for the limit */
    long iters;
} bench_count_rows[C_LAST] = {
    [C_MUNMAP]     = {"munmap", "munmap, unmapped 64 KiB", K_MUNMAP_EV, 20000},
    [C_MUNMAP_SYS] = {"munmap_sys", "munmap by syscall insn", K_LAST, 20000},
    [C_MMAP]       = {"mmap_pair", "mmap+munmap 4 KiB", K_MMAP_EV, 5000},
    [C_MALLOC64]   = {"malloc64", "malloc+free 64 B", K_MALLOC64_EV, 20000},
    [C_MALLOC4K]   = {"malloc4k", "malloc+free 4 KiB", K_MALLOC4K_EV, 20000},
    [C_MALLOC1M]   = {"malloc1m", "malloc+free 1 MiB", K_MALLOC1M_EV, 2000},
    [C_FLOOR]      = {"floor", "munmap, minimal hook", K_LAST, 20000},
};

/* Target of the counting mode: instructions a hook may add */
#define BENCH_TARGET_HOOK_IR 40.0

typedef struct {
    const char *name; /* column title */
    const char *lib;  /* "none" or a path */
    const char *mode; /* "none", "reloc", "bistro" */
    int ours;         /* check against the targets */
    char skip[160];
    /* results */
    double samples[K_LAST][BENCH_MAX_SAMPLES];
    int nsamples[K_LAST];
    char key_skip[K_LAST][160];
    char failure[200]; /* last failure of a worker, "" if none */
    int nfailures;
    int nruns;
    int hung; /* a worker timed out: run no more of them */
    char notes[512];
    bench_count_t counts[C_LAST]; /* --count */
    int counted[C_LAST];
} bench_config_t;

typedef struct {
    int quick;
    int count; /* instructions per operation under callgrind */
    int csv;
    int verbose;
    int opts_only; /* select the mode with ucm_set_global_opts()
                      only, not UCX_MEM_MMAP_HOOK_MODE too */
    int passes;
    int rounds;
    double round_ms;
    int install_runs; /* extra install-only workers per config */
    int timeout_s;
    const char *ours;
    const char *ucx;
    const char *dl;
    const char *dl_origin;
} bench_opts_t;

/* ------------------------------------------------------------------------ */
/* Common helpers                                                           */
/* ------------------------------------------------------------------------ */

static double bench_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ((double)ts.tv_sec * 1e9) + (double)ts.tv_nsec;
}

static int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x < y) ? -1 : (x > y) ? 1 : 0;
}

static double bench_median(const double *values, int count)
{
    double sorted[BENCH_MAX_PAIRS];
    int i;

    if (count > BENCH_MAX_PAIRS) {
        count = BENCH_MAX_PAIRS;
    }
    for (i = 0; i < count; ++i) {
        sorted[i] = values[i];
    }
    qsort(sorted, count, sizeof(double), bench_cmp_double);
    return (count % 2) ? sorted[count / 2]
                       : (sorted[(count / 2) - 1] + sorted[count / 2]) / 2;
}

static int bench_file_exists(const char *path)
{
    struct stat st;

    return (path != NULL) && (path[0] != '\0') && (stat(path, &st) == 0);
}

/* ------------------------------------------------------------------------ */
/* Worker                                                                   */
/* ------------------------------------------------------------------------ */

typedef void (*bench_loop_t)(long iters);

static int bench_result_fd = 1;
static unsigned long bench_rounds_total, bench_rounds_disturbed;
static volatile unsigned long bench_event_count;
static void *bench_hole;
static const char *bench_dl_path;

static void bench_out(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    int len;

    va_start(ap, fmt);
    len = vsnprintf(line, sizeof(line) - 1, fmt, ap);
    va_end(ap);
    if (len < 0) {
        return;
    }
    if (len > (int)sizeof(line) - 2) {
        len = (int)sizeof(line) - 2;
    }
    line[len++] = '\n';
    /* unbuffered: what was written survives a crash later on */
    if (write(bench_result_fd, line, len) != len) {
        _exit(4);
    }
}

static void bench_event_cb(ucm_event_type_t event_type, ucm_event_t *event,
                           void *arg)
{
    (void)event_type;
    (void)event;
    (void)arg;
    bench_event_count = bench_event_count + 1;
}

static void __attribute__((noinline)) bench_loop_munmap_libc(long iters)
{
    long i;

    for (i = 0; i < iters; ++i) {
        munmap(bench_hole, BENCH_HOLE_SIZE);
    }
}

/* munmap by a syscall instruction: no hook of any libucm sees it (our
 * libucm hooks syscall() too) */
static inline long bench_raw_munmap(void *addr, size_t len)
{
#if defined(__x86_64__)
    long ret;

    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"((long)SYS_munmap), "D"(addr), "S"(len)
                     : "rcx", "r11", "memory");
    return ret;
#else
    return syscall(SYS_munmap, addr, len);
#endif
}

static void __attribute__((noinline)) bench_loop_munmap_sys(long iters)
{
    long i;

    for (i = 0; i < iters; ++i) {
        bench_raw_munmap(bench_hole, BENCH_HOLE_SIZE);
    }
}

/*
 * The least a hook can do for munmap: the call reaches it through a
 * pointer (a patched GOT slot or a jump in libc's entry), it hands one
 * event to the one handler through the handler list, and calls the real
 * function through a pointer.  Counted in "none": the limit of the hooked
 * rows is none's count plus this minus none's munmap, per event.
 */
typedef struct {
    ucm_event_callback_t cb;
    void *arg;
} bench_floor_handler_t;

static bench_floor_handler_t bench_floor_handler = {bench_event_cb, NULL};
static bench_floor_handler_t *volatile bench_floor_list = &bench_floor_handler;
static int (*volatile bench_floor_next)(void *, size_t) = munmap;

static int __attribute__((noinline)) bench_floor_munmap(void *addr, size_t len)
{
    bench_floor_handler_t *handler = bench_floor_list;
    ucm_event_t event;

    event.vm_unmapped.address = addr;
    event.vm_unmapped.size    = len;
    handler->cb(UCM_EVENT_VM_UNMAPPED, &event, handler->arg);
    return bench_floor_next(addr, len);
}

static int (*volatile bench_floor_entry)(void *, size_t) = bench_floor_munmap;

static void __attribute__((noinline)) bench_loop_floor(long iters)
{
    long i;

    for (i = 0; i < iters; ++i) {
        bench_floor_entry(bench_hole, BENCH_HOLE_SIZE);
    }
}

static void __attribute__((noinline)) bench_loop_mmap(long iters)
{
    void *ptr;
    long i;

    for (i = 0; i < iters; ++i) {
        ptr = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (ptr == MAP_FAILED) {
            bench_out("fail mmap: %s", strerror(errno));
            _exit(3);
        }
        munmap(ptr, 4096);
    }
}

static void bench_malloc_free(size_t size, long iters)
{
    void *ptr;
    long i;

    for (i = 0; i < iters; ++i) {
        ptr = malloc(size);
        if (ptr == NULL) {
            bench_out("fail malloc(%zu) returned NULL", size);
            _exit(3);
        }
        /* the pointer escapes: the compiler must keep the pair */
        __asm__ __volatile__("" : : "r"(ptr) : "memory");
        free(ptr);
    }
}

static void __attribute__((noinline)) bench_loop_malloc64(long iters)
{
    bench_malloc_free(64, iters);
}

static void __attribute__((noinline)) bench_loop_malloc4k(long iters)
{
    bench_malloc_free(4096, iters);
}

static void __attribute__((noinline)) bench_loop_malloc1m(long iters)
{
    bench_malloc_free(BENCH_LARGE_SIZE, iters);
}

static void __attribute__((noinline)) bench_loop_dlopen(long iters)
{
    void *handle;
    long i;

    for (i = 0; i < iters; ++i) {
        handle = dlopen(bench_dl_path, RTLD_NOW | RTLD_LOCAL);
        if (handle == NULL) {
            bench_out("fail dlopen(%s): %s", bench_dl_path, dlerror());
            _exit(3);
        }
        dlclose(handle);
    }
}

/* A memfd whose second page is mapped: each shrink removes it (our hook
 * then reads /proc/self/maps and reports that page, before and after). */
static void __attribute__((noinline)) bench_loop_trunc(long iters)
{
    static int fd = -1;
    long i;

    if (fd < 0) {
        fd = memfd_create("ucm_bench_trunc", MFD_CLOEXEC);
        if ((fd < 0) || (ftruncate(fd, 8192) != 0) ||
            (mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) ==
             MAP_FAILED)) {
            bench_out("fail memfd mapping: %s", strerror(errno));
            _exit(3);
        }
    }
    for (i = 0; i < iters; ++i) {
        if ((ftruncate(fd, 8192) != 0) || (ftruncate(fd, 4096) != 0)) {
            bench_out("fail ftruncate: %s", strerror(errno));
            _exit(3);
        }
    }
}

/* A memfd of two pages mapped twice (the hole punched through one mapping
 * or descriptor takes the page out of both): the second page of the first
 * mapping, written (a new page) and then removed. */
static char *bench_remove_page;
static int bench_remove_fd = -1;

static void bench_remove_setup(void)
{
    char *p;

    if (bench_remove_fd >= 0) {
        return;
    }
    bench_remove_fd = memfd_create("ucm_bench_remove", MFD_CLOEXEC);
    if ((bench_remove_fd < 0) || (ftruncate(bench_remove_fd, 8192) != 0)) {
        bench_out("fail memfd: %s", strerror(errno));
        _exit(3);
    }
    p = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, bench_remove_fd,
             0);
    if ((p == MAP_FAILED) ||
        (mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, bench_remove_fd,
              0) == MAP_FAILED)) {
        bench_out("fail memfd mapping: %s", strerror(errno));
        _exit(3);
    }
    bench_remove_page = p + 4096;
}

static void __attribute__((noinline)) bench_loop_punch(long iters)
{
    long i;

    bench_remove_setup();
    for (i = 0; i < iters; ++i) {
        *(volatile char *)bench_remove_page = 1;
        if (fallocate(bench_remove_fd,
                      FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4096,
                      4096) != 0) {
            bench_out("fail fallocate: %s", strerror(errno));
            _exit(3);
        }
    }
}

static void __attribute__((noinline)) bench_loop_madv_remove(long iters)
{
    long i;

    bench_remove_setup();
    for (i = 0; i < iters; ++i) {
        *(volatile char *)bench_remove_page = 1;
        if (madvise(bench_remove_page, 4096, MADV_REMOVE) != 0) {
            bench_out("fail madvise: %s", strerror(errno));
            _exit(3);
        }
    }
}

/* With UCX_MEM_FILE_WATCH=y our hook also reopens each memfd. */
static void __attribute__((noinline)) bench_loop_memfd(long iters)
{
    long i;
    int fd;

    for (i = 0; i < iters; ++i) {
        fd = memfd_create("ucm_bench_memfd", MFD_CLOEXEC);
        if (fd < 0) {
            bench_out("fail memfd_create: %s", strerror(errno));
            _exit(3);
        }
        close(fd);
    }
}

static double bench_time_loop(bench_loop_t loop, long iters)
{
    double start = bench_now_ns();

    loop(iters);
    return bench_now_ns() - start;
}

static double bench_thread_cpu_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ((double)ts.tv_sec * 1e9) + (double)ts.tv_nsec;
}

/*
 * One timed round (wall clock, CLOCK_MONOTONIC).  A round during which the
 * thread was noticeably off the CPU (preempted on a busy machine: wall time
 * exceeds the thread's CPU time) is retried a few times; *calls_p counts
 * every iteration run, for the events-per-operation figures.
 */
static double bench_round(bench_loop_t loop, long iters, unsigned long *calls_p)
{
    double wall, cpu, start, cpu_start;
    int attempt;

    for (attempt = 0;; ++attempt) {
        cpu_start = bench_thread_cpu_ns();
        start     = bench_now_ns();
        loop(iters);
        wall = bench_now_ns() - start;
        cpu  = bench_thread_cpu_ns() - cpu_start;
        *calls_p += iters;
        ++bench_rounds_total;
        if ((wall - cpu <= (wall * 0.02) + 20000) ||
            (attempt >= BENCH_MAX_RETRIES)) {
            return wall;
        }
        ++bench_rounds_disturbed;
    }
}

/* Iterations for one round of about target_ns (warms up on the way) */
static long bench_calibrate(bench_loop_t loop, double target_ns)
{
    const long max_iters = 1L << 26;
    long iters           = 1;
    double elapsed;

    for (;;) {
        elapsed = bench_time_loop(loop, iters);
        if ((elapsed >= target_ns / 8) || (iters >= max_iters)) {
            break;
        }
        iters *= 4;
    }
    if (elapsed <= 0) {
        return max_iters;
    }
    iters = (long)((double)iters * target_ns / elapsed);
    return (iters < 1) ? 1 : (iters > max_iters) ? max_iters : iters;
}

/* Median ns per operation over 'rounds'; events per operation in *events_p */
static double bench_measure(bench_loop_t loop, int rounds, double target_ns,
                            double *events_p)
{
    double per_op[BENCH_MAX_SAMPLES];
    long iters          = bench_calibrate(loop, target_ns);
    unsigned long calls = 0, events;
    int r;

    events = bench_event_count;
    for (r = 0; r < rounds; ++r) {
        per_op[r] = bench_round(loop, iters, &calls) / (double)iters;
    }
    if (events_p != NULL) {
        *events_p = (double)(bench_event_count - events) / (double)calls;
    }
    return bench_median(per_op, rounds);
}

/*
 * munmap() of an unmapped range through libc (hooked) and by a syscall
 * instruction (never hooked), in many short interleaved round pairs: the
 * difference of each pair cancels the slow drift of a noisy machine; the median
 * of the differences is what the libc path costs more than the raw syscall.
 */
typedef struct {
    double diff;   /* median of libc - syscall, ns */
    double libc;   /* median ns per libc call */
    double sys;    /* median ns per raw syscall */
    double events; /* handler calls per libc call */
} bench_munmap_result_t;

static void bench_munmap_pairs(int rounds, double target_ns,
                               bench_munmap_result_t *result)
{
    double libc[BENCH_MAX_PAIRS], sys[BENCH_MAX_PAIRS], diff[BENCH_MAX_PAIRS];
    int pairs           = (rounds * 8 > 64) ? rounds * 8 : 64;
    unsigned long calls = 0, sys_calls = 0, events;
    long iters;
    int r;

    if (pairs > BENCH_MAX_PAIRS) {
        pairs = BENCH_MAX_PAIRS;
    }
    /* same number of calls on both sides, each about target_ns / 8 but not
     * under 1.25 ms: shorter sides make the difference much noisier */
    if (target_ns < 10e6) {
        target_ns = 10e6;
    }
    bench_calibrate(bench_loop_munmap_libc, target_ns / 8);
    iters  = bench_calibrate(bench_loop_munmap_sys, target_ns / 8);
    events = bench_event_count;
    for (r = 0; r < pairs; ++r) {
        libc[r] =
            bench_round(bench_loop_munmap_libc, iters, &calls) / (double)iters;
        sys[r] = bench_round(bench_loop_munmap_sys, iters, &sys_calls) /
                 (double)iters;
        diff[r] = libc[r] - sys[r];
    }
    result->diff   = bench_median(diff, pairs);
    result->libc   = bench_median(libc, pairs);
    result->sys    = bench_median(sys, pairs);
    result->events = (double)(bench_event_count - events) / (double)calls;
}

static void bench_reserve_hole(void)
{
    /* an address range that is certainly not mapped */
    bench_hole = mmap(NULL, BENCH_HOLE_SIZE, PROT_NONE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (bench_hole == MAP_FAILED) {
        bench_out("fail mmap: %s", strerror(errno));
        _exit(3);
    }
    bench_raw_munmap(bench_hole, BENCH_HOLE_SIZE);
}

/* The same before the hooks (pre) and with them: the difference of the two
 * is the cost of the hook, free of what is particular to this process
 * (addresses, alignment) */
static void bench_report_hook_overhead(const bench_munmap_result_t *pre,
                                       int rounds, double target_ns)
{
    bench_munmap_result_t post;

    /* the installation may have mapped memory where the hole was */
    bench_reserve_hole();
    bench_munmap_pairs(rounds, target_ns, &post);
    bench_out("ok %s %.3f", bench_key_names[K_HOOK_NS], post.diff - pre->diff);
    bench_out("ok %s %.3f", bench_key_names[K_MUNMAP_LIBC_NS], post.libc);
    bench_out("ok %s %.3f", bench_key_names[K_MUNMAP_SYS_NS], post.sys);
    bench_out("ok %s %.3f", bench_key_names[K_MUNMAP_EV], post.events);
}

static void bench_report(bench_key_t key, bench_key_t ev_key, double value,
                         double events)
{
    bench_out("ok %s %.3f", bench_key_names[key], value);
    bench_out("ok %s %.3f", bench_key_names[ev_key], events);
}

/*
 * dlopen() a libucm.  A stock UCX libucm refers to two libucs functions
 * (ucs_load_modules, ucs_sys_is_dynamic_lib) and is normally loaded by
 * libucs: if the plain load fails on an undefined symbol and a libucs.so.0
 * lies next to it, load the libucm lazily, then that libucs, as a UCX
 * application would have them.  UCX_HANDLE_ERRORS=none (unless set) so that
 * a crash kills the worker with its signal instead of a UCX backtrace.
 */
static void *bench_load_ucm(const char *lib)
{
    char error[512], ucs_path[PATH_MAX];
    const char *slash = strrchr(lib, '/');
    void *handle, *ucs_handle;

    handle = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
    if (handle != NULL) {
        return handle;
    }
    snprintf(error, sizeof(error), "%s", dlerror());
    if (slash == NULL) {
        snprintf(ucs_path, sizeof(ucs_path), "libucs.so.0");
    } else {
        snprintf(ucs_path, sizeof(ucs_path), "%.*s/libucs.so.0",
                 (int)(slash - lib), lib);
    }
    if ((strstr(error, "undefined symbol") == NULL) ||
        ((slash != NULL) && !bench_file_exists(ucs_path))) {
        bench_out("fail dlopen: %s", error);
        return NULL;
    }
    setenv("UCX_HANDLE_ERRORS", "none", 0);
    handle = dlopen(lib, RTLD_LAZY | RTLD_GLOBAL);
    if (handle == NULL) {
        bench_out("fail dlopen: %s", dlerror());
        return NULL;
    }
    ucs_handle = dlopen(ucs_path, RTLD_NOW | RTLD_GLOBAL);
    if (ucs_handle == NULL) {
        bench_out("fail dlopen: %s (needed by %s: %s)", dlerror(), lib, error);
        return NULL;
    }
    bench_out("note %s loaded with it (libucm needs libucs symbols)", ucs_path);
    return handle;
}

/* Our libucm only (ucm_hooks_query is not in UCX 1.13): the hooks that
 * did not land in the mode asked for, as one "degraded hooks" line. */
static void bench_report_fallbacks(void *lib_handle, int mode)
{
    unsigned (*query)(ucm_hook_info_t *, unsigned);
    ucm_hook_info_t hooks[48];
    unsigned i, count, n = 0;
    char list[400] = "";
    size_t len     = 0;
    int fell;

    *(void **)&query = dlsym(lib_handle, "ucm_hooks_query");
    if (query == NULL) {
        return;
    }
    count = query(hooks, 48);
    for (i = 0; (i < count) && (i < 48); ++i) {
        /* in bistro mode a libc function whose entry could not be patched
         * is hooked in its GOT slots instead, and says why */
        fell = (hooks[i].state == UCM_HOOK_STATE_FAILED) ||
               ((mode == UCM_MMAP_HOOK_BISTRO) &&
                (hooks[i].state == UCM_HOOK_STATE_RELOC) &&
                (hooks[i].detail[0] != '\0'));
        if (!fell) {
            continue;
        }
        if (len < sizeof(list)) {
            len += snprintf(list + len, sizeof(list) - len, "%s%s %s (%s)",
                            (n > 0) ? ", " : "", hooks[i].symbol,
                            (hooks[i].state == UCM_HOOK_STATE_FAILED) ? "failed"
                                                                      : "reloc",
                            hooks[i].detail);
        }
        ++n;
    }
    if (n > 0) {
        bench_out("degraded hooks %u of %u hooks not in the mode asked: %s", n,
                  count, list);
    }
}

/* --count: each row under callgrind, its events per operation through
 * the pipe ("ok KEY_events VALUE"); the counts come from the dumps. */
static int bench_count_worker(int with_lib)
{
    static const bench_loop_t loops[C_LAST] = {
        [C_MUNMAP]     = bench_loop_munmap_libc,
        [C_MUNMAP_SYS] = bench_loop_munmap_sys,
        [C_MMAP]       = bench_loop_mmap,
        [C_MALLOC64]   = bench_loop_malloc64,
        [C_MALLOC4K]   = bench_loop_malloc4k,
        [C_MALLOC1M]   = bench_loop_malloc1m,
        [C_FLOOR]      = bench_loop_floor,
    };
    unsigned long events;
    int row;

    if (!bench_count_active()) {
        bench_out("fail --count needs the worker to run under callgrind");
        return 3;
    }
    /* the installation may have mapped memory where the hole was */
    bench_reserve_hole();
    for (row = 0; row < C_LAST; ++row) {
        if ((row == C_FLOOR) && with_lib) {
            continue;
        }
        if ((row == C_MALLOC1M) &&
            (mallopt(M_MMAP_THRESHOLD, BENCH_MMAP_THRESHOLD) != 1)) {
            bench_out("note mallopt(M_MMAP_THRESHOLD) failed");
        }
        events = bench_event_count;
        bench_count_row(bench_count_rows[row].key, loops[row],
                        bench_count_rows[row].iters);
        if (bench_count_rows[row].ev != K_LAST) {
            bench_out("ok %s %.3f", bench_key_names[bench_count_rows[row].ev],
                      (double)(bench_event_count - events) /
                          (2.0 * bench_count_rows[row].iters));
        }
    }
    return 0;
}

static int bench_worker(const char *lib, const char *mode_name, int rounds,
                        double round_ms, int install_only, int opts_only,
                        int count)
{
    ucs_status_t (*set_handler)(int, int, ucm_event_callback_t, void *);
    void (*set_opts)(const ucm_global_config_t *);
    double target_ns = round_ms * 1e6;
    bench_munmap_result_t pre;
    ucm_global_config_t config;
    ucs_status_t status;
    double start, value, events;
    void *lib_handle, *handle;
    int mode;

    if (!strcmp(mode_name, "reloc")) {
        mode = UCM_MMAP_HOOK_RELOC;
    } else if (!strcmp(mode_name, "bistro")) {
        mode = UCM_MMAP_HOOK_BISTRO;
    } else if (!strcmp(mode_name, "none")) {
        mode = UCM_MMAP_HOOK_NONE;
    } else {
        bench_out("fail unknown hook mode '%s'", mode_name);
        return 2;
    }
    if (rounds > BENCH_MAX_SAMPLES) {
        rounds = BENCH_MAX_SAMPLES;
    }

    if (RUNNING_ON_VALGRIND && !count) {
        bench_out("degraded valgrind the workers run under valgrind "
                  "(--trace-children=yes)");
    }
    bench_reserve_hole();
    if (!install_only && !count) {
        bench_munmap_pairs(rounds, target_ns, &pre);
    }

    if (strcmp(lib, "none")) {
        /* the mode is also selected the way a UCX user does, before the
         * library loads: stock UCX 1.13 crashes (endless mmap recursion)
         * when only ucm_set_global_opts() switches bistro -> reloc */
        if (!opts_only) {
            setenv("UCX_MEM_MMAP_HOOK_MODE", mode_name, 1);
        }
        lib_handle = bench_load_ucm(lib);
        if (lib_handle == NULL) {
            return 3;
        }
        *(void **)&set_opts    = dlsym(lib_handle, "ucm_set_global_opts");
        *(void **)&set_handler = dlsym(lib_handle, "ucm_set_event_handler");
        if ((set_opts == NULL) || (set_handler == NULL)) {
            bench_out("fail %s lacks ucm_set_global_opts/ucm_set_event_handler",
                      lib);
            return 3;
        }
        memset(&config, 0, sizeof(config));
        config.log_level                  = UCS_LOG_LEVEL_WARN;
        config.enable_events              = 1;
        config.mmap_hook_mode             = (ucm_mmap_hook_mode_t)mode;
        config.enable_malloc_hooks        = 1;
        config.enable_malloc_reloc        = 1;
        config.cuda_hook_modes            = 1 << UCM_MMAP_HOOK_BISTRO;
        config.enable_dynamic_mmap_thresh = 1;
        config.alloc_alignment            = 16;
        config.dlopen_process_rpath       = 1;
        config.module_unload_prevent_mode = UCM_UNLOAD_PREVENT_MODE_LAZY;
        set_opts(&config);

        start  = bench_now_ns();
        status = set_handler(UCM_EVENT_VM_UNMAPPED | UCM_EVENT_VM_MAPPED, 1000,
                             bench_event_cb, NULL);
        value  = (bench_now_ns() - start) / 1e3;
        if (status != UCS_OK) {
            bench_out("fail ucm_set_event_handler() returned %d", (int)status);
            return 3;
        }
        bench_out("ok %s %.3f", bench_key_names[K_INSTALL_US], value);
        bench_report_fallbacks(lib_handle, mode);
    } else if (mode != UCM_MMAP_HOOK_NONE) {
        bench_out("fail mode '%s' needs a library", mode_name);
        return 2;
    }
    if (install_only) {
        return 0;
    }
    if (count) {
        return bench_count_worker(strcmp(lib, "none") != 0);
    }

    bench_report_hook_overhead(&pre, rounds, target_ns);

    value = bench_measure(bench_loop_mmap, rounds, target_ns, &events);
    bench_report(K_MMAP_NS, K_MMAP_EV, value, events);

    value = bench_measure(bench_loop_malloc64, rounds, target_ns, &events);
    bench_report(K_MALLOC64_NS, K_MALLOC64_EV, value, events);
    value = bench_measure(bench_loop_malloc4k, rounds, target_ns, &events);
    bench_report(K_MALLOC4K_NS, K_MALLOC4K_EV, value, events);

    if (mallopt(M_MMAP_THRESHOLD, BENCH_MMAP_THRESHOLD) != 1) {
        bench_out("note mallopt(M_MMAP_THRESHOLD) failed");
    }
    value = bench_measure(bench_loop_malloc1m, rounds, target_ns, &events);
    bench_report(K_MALLOC1M_NS, K_MALLOC1M_EV, value, events);

    value = bench_measure(bench_loop_trunc, rounds, target_ns, &events);
    bench_report(K_TRUNC_NS, K_TRUNC_EV, value, events);
    value = bench_measure(bench_loop_punch, rounds, target_ns, &events);
    bench_report(K_PUNCH_NS, K_PUNCH_EV, value, events);
    value = bench_measure(bench_loop_madv_remove, rounds, target_ns, &events);
    bench_report(K_REMOVE_NS, K_REMOVE_EV, value, events);
    value = bench_measure(bench_loop_memfd, rounds, target_ns, &events);
    bench_report(K_MEMFD_NS, K_MEMFD_EV, value, events);

    if ((bench_dl_path == NULL) || (bench_dl_path[0] == '\0')) {
        bench_out("skip %s no module to dlopen (use --dl PATH)",
                  bench_key_names[K_DLOPEN_US]);
    } else {
        value = bench_measure(bench_loop_dlopen, rounds, target_ns, &events);
        bench_report(K_DLOPEN_US, K_DLOPEN_EV, value / 1e3, events);
        handle = dlopen(bench_dl_path, RTLD_NOW | RTLD_NOLOAD);
        if (handle != NULL) {
            bench_out("note the dlopen module stays loaded after dlclose: "
                      "the loop measures reference counting only");
            dlclose(handle);
        }
    }
    bench_out("ok %s %.1f", bench_key_names[K_RETRIED_PCT],
              (bench_rounds_total > 0)
                  ? (100.0 * bench_rounds_disturbed) / bench_rounds_total
                  : 0.0);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Driver                                                                   */
/* ------------------------------------------------------------------------ */

static void bench_config_fail(bench_config_t *cfg, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(cfg->failure, sizeof(cfg->failure), fmt, ap);
    va_end(ap);
    ++cfg->nfailures;
}

static void bench_config_note(bench_config_t *cfg, const char *note)
{
    size_t len = strlen(cfg->notes);

    if (strstr(cfg->notes, note) != NULL) {
        return;
    }
    snprintf(cfg->notes + len, sizeof(cfg->notes) - len, "%s%s",
             (len > 0) ? "; " : "", note);
}

/* A worker's "degraded LABEL REASON" line, printed on stderr the first time
 * it arrives (every pass and every install-only run repeats it); a hooks
 * line names the configuration, one about the process (valgrind) not. */
static void bench_degraded(const bench_config_t *cfg, char *what)
{
    static const struct {
        const char *label, *consequence;
    } kinds[] = {
        {"hooks", "its rows time those calls through their fallback"},
        {"valgrind", "the workers' timings are valgrind's, not the machine's"},
    };
    static char seen[16][256];
    static unsigned nseen;
    tools_env_item_t item = {TOOLS_ENV_GIVEN, NULL, NULL, 0, NULL};
    char line[256];
    char *reason = strchr(what, ' ');
    unsigned i, k;

    if (reason == NULL) {
        return;
    }
    *reason++ = '\0';
    for (k = 0; (k < 2) && strcmp(kinds[k].label, what); ++k) {
    }
    if (k == 2) {
        return;
    }
    if (k == 0) {
        snprintf(line, sizeof(line), "%s: %s", cfg->name, reason);
    } else {
        snprintf(line, sizeof(line), "%s", reason);
    }
    for (i = 0; i < nseen; ++i) {
        if (!strcmp(seen[i], line)) {
            return;
        }
    }
    if (nseen < 16) {
        snprintf(seen[nseen++], sizeof(seen[0]), "%s", line);
    }
    item.label       = kinds[k].label;
    item.reason      = line;
    item.consequence = kinds[k].consequence;
    tools_env_report(stderr, TOOLS_ENV_PREFIX, &item, 1);
}

static void bench_parse_line(bench_config_t *cfg, char *line, char *reason,
                             size_t max)
{
    char *word = line, *rest;
    double value;
    int k;

    rest = strchr(line, ' ');
    if (rest == NULL) {
        return;
    }
    *rest++ = '\0';
    if (!strcmp(word, "fail")) {
        snprintf(reason, max, "%s", rest);
        return;
    }
    if (!strcmp(word, "note")) {
        bench_config_note(cfg, rest);
        return;
    }
    if (!strcmp(word, "degraded")) {
        bench_degraded(cfg, rest);
        return;
    }
    for (k = 0; k < K_LAST; ++k) {
        size_t len = strlen(bench_key_names[k]);

        if (strncmp(rest, bench_key_names[k], len) || (rest[len] != ' ')) {
            continue;
        }
        if (!strcmp(word, "ok")) {
            value = strtod(rest + len + 1, NULL);
            if (cfg->nsamples[k] < BENCH_MAX_SAMPLES) {
                cfg->samples[k][cfg->nsamples[k]++] = value;
            }
        } else if (!strcmp(word, "skip")) {
            snprintf(cfg->key_skip[k], sizeof(cfg->key_skip[k]), "%s",
                     rest + len + 1);
        }
        return;
    }
}

/* A dump of a --count worker: its row's figures into the configuration */
static void bench_count_store(void *arg, const char *key,
                              const bench_count_t *count)
{
    bench_config_t *cfg = arg;
    int row;

    for (row = 0; row < C_LAST; ++row) {
        if (!strcmp(key, bench_count_rows[row].key)) {
            cfg->counts[row]  = *count;
            cfg->counted[row] = 1;
        }
    }
}

static void bench_run_worker(const bench_opts_t *opts, bench_config_t *cfg,
                             int install_only)
{
    char rounds_str[16], round_ms_str[32], fd_str[16];
    char buf[8192], reason[200] = "", self[PATH_MAX] = "/proc/self/exe";
    char count_dir[PATH_MAX] = "", valgrind[PATH_MAX];
    const char *argv[40];
    int fds[2], argc = 0, status, devnull;
    size_t used = 0;
    double deadline;
    char *line, *nl;
    ssize_t nread;
    pid_t pid;

    if (pipe(fds) != 0) {
        bench_config_fail(cfg, "failed (pipe: %s)", strerror(errno));
        return;
    }
    fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    /* the file itself, not /proc/self/exe: under valgrind that is
     * valgrind's tool, while readlink() answers for the program */
    nread = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (nread > 0) {
        self[nread] = '\0';
    }
    if (opts->count) {
        if (bench_count_mkdir(count_dir, sizeof(count_dir)) != 0) {
            bench_config_fail(cfg, "failed (mkdtemp: %s)", strerror(errno));
            close(fds[0]);
            close(fds[1]);
            return;
        }
        argc = bench_count_argv(argv, count_dir, valgrind, sizeof(valgrind));
        argv[argc++] = self;
    }
    snprintf(rounds_str, sizeof(rounds_str), "%d", opts->rounds);
    snprintf(round_ms_str, sizeof(round_ms_str), "%g", opts->round_ms);
    snprintf(fd_str, sizeof(fd_str), "%d", fds[1]);
    if (!opts->count) {
        argv[argc++] = "ucm_bench_hooks";
    }
    argv[argc++] = "--worker";
    argv[argc++] = cfg->lib;
    argv[argc++] = cfg->mode;
    argv[argc++] = "--result-fd";
    argv[argc++] = fd_str;
    argv[argc++] = "--rounds";
    argv[argc++] = rounds_str;
    argv[argc++] = "--round-ms";
    argv[argc++] = round_ms_str;
    argv[argc++] = "--dl";
    argv[argc++] = (opts->dl != NULL) ? opts->dl : "";
    if (install_only) {
        argv[argc++] = "--install-only";
    }
    if (opts->opts_only) {
        argv[argc++] = "--opts-only";
    }
    if (opts->count) {
        argv[argc++] = "--count";
    }
    argv[argc] = NULL;

    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid < 0) {
        bench_config_fail(cfg, "failed (fork: %s)", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return;
    }
    if (pid == 0) {
        if (!opts->verbose) {
            devnull = open("/dev/null", O_WRONLY);
            if (devnull >= 0) {
                dup2(devnull, 2);
                dup2(devnull, 1);
            }
        }
        execv(opts->count ? argv[0] : self, (char *const *)argv);
        dprintf(fds[1], "fail exec: %s\n", strerror(errno));
        _exit(127);
    }
    close(fds[1]);
    ++cfg->nruns;

    deadline = bench_now_ns() + (opts->timeout_s * 1e9);
    for (;;) {
        struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
        double left_ms    = (deadline - bench_now_ns()) / 1e6;
        int ret;

        if (left_ms <= 0) {
            kill(pid, SIGKILL);
            snprintf(reason, sizeof(reason), "timeout after %d s",
                     opts->timeout_s);
            break;
        }
        ret = poll(&pfd, 1, (int)left_ms + 1);
        if ((ret < 0) && (errno == EINTR)) {
            continue;
        }
        if (ret <= 0) {
            continue;
        }
        nread = read(fds[0], buf + used, sizeof(buf) - 1 - used);
        if (nread < 0 && errno == EINTR) {
            continue;
        }
        if (nread <= 0) {
            break;
        }
        used += nread;
        buf[used] = '\0';
        line      = buf;
        while ((nl = strchr(line, '\n')) != NULL) {
            *nl = '\0';
            bench_parse_line(cfg, line, reason, sizeof(reason));
            line = nl + 1;
        }
        used -= line - buf;
        memmove(buf, line, used);
        if (used >= sizeof(buf) - 1) {
            used = 0; /* runaway line: drop it */
        }
    }
    close(fds[0]);

    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            bench_config_fail(cfg, "failed (waitpid: %s)", strerror(errno));
            return;
        }
    }
    if ((count_dir[0] != '\0') &&
        (bench_count_collect(count_dir, bench_count_store, cfg) < 0)) {
        bench_config_fail(cfg, "failed (no dumps in %s)", count_dir);
    }
    if (!strncmp(reason, "timeout", 7)) {
        bench_config_fail(cfg, "failed (%s)", reason);
        cfg->hung = 1;
    } else if (WIFSIGNALED(status)) {
        bench_config_fail(cfg, "failed (signal %d)", WTERMSIG(status));
    } else if (WIFEXITED(status) && (WEXITSTATUS(status) != 0)) {
        if (reason[0] != '\0') {
            bench_config_fail(cfg, "failed (%s)", reason);
        } else {
            bench_config_fail(cfg, "failed (exit %d)", WEXITSTATUS(status));
        }
    }
}

/* Median of a key, or 0 with *ok_p = 0 if there is no sample */
static double bench_value(const bench_config_t *cfg, bench_key_t key, int *ok_p)
{
    *ok_p = (cfg->nsamples[key] > 0);
    return *ok_p ? bench_median(cfg->samples[key], cfg->nsamples[key]) : 0;
}

/* Text of a cell with no value */
static const char *bench_missing(const bench_config_t *cfg, bench_key_t key)
{
    if (cfg->skip[0] != '\0') {
        return "skipped";
    }
    if (cfg->key_skip[key][0] != '\0') {
        return "skipped";
    }
    if (cfg->failure[0] != '\0') {
        return cfg->failure;
    }
    if (!strcmp(cfg->lib, "none") && (key == K_INSTALL_US)) {
        return "-";
    }
    return "n/a";
}

static void bench_format(char *buf, size_t max, double value)
{
    if (value >= 1000) {
        snprintf(buf, max, "%.0f", value);
    } else if ((value >= 100) || (value <= -100)) {
        snprintf(buf, max, "%.1f", value);
    } else {
        snprintf(buf, max, "%.2f", value);
    }
}

/* Value cell and comparison cell of one row for one configuration */
static void bench_cells(const bench_config_t *cfgs, int icfg, unsigned irow,
                        char *value_buf, char *cmp_buf, size_t max,
                        const char **status_p)
{
    const bench_config_t *cfg = &cfgs[icfg];
    bench_key_t key           = bench_rows[irow].key;
    double value, base;
    int ok, base_ok;
    char tmp[64];

    cmp_buf[0] = '\0';
    value      = bench_value(cfg, key, &ok);
    if (!ok) {
        snprintf(value_buf, max, "%s", bench_missing(cfg, key));
        *status_p = value_buf;
        return;
    }
    *status_p = "ok";
    bench_format(value_buf, max, value);
    base = bench_value(&cfgs[0], key, &base_ok);
    if ((icfg == 0) || !base_ok || (bench_rows[irow].kind == ROW_ABS)) {
        return;
    }
    if (bench_rows[irow].kind == ROW_DELTA) {
        bench_format(tmp, sizeof(tmp), value - base);
        snprintf(cmp_buf, max, "%s%s", (value - base >= 0) ? "+" : "", tmp);
    } else if (base > 0) {
        snprintf(cmp_buf, max, "%.2fx", value / base);
    }
}

static void bench_print_csv(const bench_config_t *cfgs, int ncfg)
{
    char value[256], cmp[256], text[256];
    const char *status;
    unsigned row, i;
    int c;

    printf("measurement,unit,config,value,vs_none,status\n");
    for (row = 0; row < BENCH_NROWS; ++row) {
        for (c = 0; c < ncfg; ++c) {
            bench_cells(cfgs, c, row, value, cmp, sizeof(value), &status);
            printf("%s,%s,%s,", bench_key_names[bench_rows[row].key],
                   bench_rows[row].unit, cfgs[c].name);
            if (!strcmp(status, "ok")) {
                printf("%s,%s,ok\n", value, cmp);
            } else {
                /* no commas inside a field */
                snprintf(text, sizeof(text), "%s", status);
                for (i = 0; text[i] != '\0'; ++i) {
                    if (text[i] == ',') {
                        text[i] = ';';
                    }
                }
                printf(",,%s\n", text);
            }
        }
    }
}

static void bench_print_table(const bench_opts_t *opts, bench_config_t *cfgs,
                              int ncfg)
{
    char cells[BENCH_NROWS + 1][16][128];
    int widths[16], ncol = 0, col, c;
    char value[128], cmp[128], title[64];
    const char *status;
    double v, base;
    unsigned row;
    int ok, base_ok;

    (void)opts;
    /* header row */
    snprintf(cells[0][ncol++], 128, "%s", "measurement");
    for (c = 0; c < ncfg; ++c) {
        snprintf(cells[0][ncol++], 128, "%s", cfgs[c].name);
        if (c > 0) {
            snprintf(cells[0][ncol++], 128, "%s", "vs none");
        }
    }
    for (row = 0; row < BENCH_NROWS; ++row) {
        col = 0;
        snprintf(title, sizeof(title), "%s (%s)", bench_rows[row].label,
                 bench_rows[row].unit);
        snprintf(cells[row + 1][col++], 128, "%s", title);
        for (c = 0; c < ncfg; ++c) {
            bench_cells(cfgs, c, row, value, cmp, sizeof(value), &status);
            snprintf(cells[row + 1][col++], 128, "%s", value);
            if (c > 0) {
                snprintf(cells[row + 1][col++], 128, "%s",
                         (cmp[0] != '\0') ? cmp : "-");
            }
        }
    }
    for (col = 0; col < ncol; ++col) {
        widths[col] = 0;
        for (row = 0; row <= BENCH_NROWS; ++row) {
            int len = (int)strlen(cells[row][col]);

            widths[col] = (len > widths[col]) ? len : widths[col];
        }
    }
    for (row = 0; row <= BENCH_NROWS; ++row) {
        for (col = 0; col < ncol; ++col) {
            if (col == 0) {
                printf("%-*s", widths[col], cells[row][col]);
            } else {
                printf("  %*s", widths[col], cells[row][col]);
            }
        }
        printf("\n");
    }

    /* hook sanity: events the handler saw per operation */
    printf("\nEvents delivered to the handler per operation:\n");
    printf("%-26s", "");
    for (c = 1; c < ncfg; ++c) {
        printf("  %12s", cfgs[c].name);
    }
    printf("\n");
    for (row = 0; row < BENCH_NEVROWS; ++row) {
        printf("%-26s", bench_event_rows[row].label);
        for (c = 1; c < ncfg; ++c) {
            v = bench_value(&cfgs[c], bench_event_rows[row].key, &ok);
            if (ok) {
                printf("  %12.2f", v);
            } else {
                printf("  %12s", "-");
            }
        }
        printf("\n");
    }

    printf("\nTargets: hooked call <= +%.0f ns, malloc+free 64 B <= %.2fx none,"
           " first install <= %.0f us\n",
           BENCH_TARGET_HOOK_NS, BENCH_TARGET_MALLOC_RATIO,
           BENCH_TARGET_INSTALL_US);
    for (c = 0; c < ncfg; ++c) {
        if (!cfgs[c].ours || (cfgs[c].skip[0] != '\0')) {
            continue;
        }
        printf("  %-12s", cfgs[c].name);
        v    = bench_value(&cfgs[c], K_HOOK_NS, &ok);
        base = bench_value(&cfgs[0], K_HOOK_NS, &base_ok);
        if (ok && base_ok) {
            printf(" hooked call %+.1f ns %-4s", v - base,
                   (v - base <= BENCH_TARGET_HOOK_NS) ? "ok" : "MISS");
        } else {
            printf(" hooked call %-12s", "?");
        }
        v    = bench_value(&cfgs[c], K_MALLOC64_NS, &ok);
        base = bench_value(&cfgs[0], K_MALLOC64_NS, &base_ok);
        if (ok && base_ok && (base > 0)) {
            printf(" | malloc64 %.2fx %-4s", v / base,
                   (v / base <= BENCH_TARGET_MALLOC_RATIO) ? "ok" : "MISS");
        } else {
            printf(" | malloc64 ?");
        }
        v = bench_value(&cfgs[c], K_INSTALL_US, &ok);
        if (ok) {
            printf(" | install %.1f us %s", v,
                   (v <= BENCH_TARGET_INSTALL_US) ? "ok" : "MISS");
        } else {
            printf(" | install ?");
        }
        printf("\n");
    }

    printf("\n");
    for (c = 0; c < ncfg; ++c) {
        if (cfgs[c].skip[0] != '\0') {
            printf("%s: skipped: %s\n", cfgs[c].name, cfgs[c].skip);
            continue;
        }
        if (cfgs[c].nfailures > 0) {
            printf("%s: %d of %d worker runs %s\n", cfgs[c].name,
                   cfgs[c].nfailures, cfgs[c].nruns, cfgs[c].failure);
        }
        v = bench_value(&cfgs[c], K_RETRIED_PCT, &ok);
        if (ok && (v >= 10)) {
            printf("%s: busy machine: %.0f%% of the timed rounds were retried"
                   " (worker preempted)\n",
                   cfgs[c].name, v);
        }
        if (cfgs[c].key_skip[K_DLOPEN_US][0] != '\0') {
            printf("%s: dlopen+dlclose skipped: %s\n", cfgs[c].name,
                   cfgs[c].key_skip[K_DLOPEN_US]);
        }
        if (cfgs[c].notes[0] != '\0') {
            printf("%s: %s\n", cfgs[c].name, cfgs[c].notes);
        }
    }
}

/* --count: one figure of a counted row */
static int bench_count_get(const bench_config_t *cfg, int row, int metric,
                           double *value_p)
{
    const bench_count_t *count = &cfg->counts[row];

    if (!cfg->counted[row]) {
        return 0;
    }
    *value_p = (metric == 0)   ? count->ir
               : (metric == 1) ? count->d1
                               : count->ll;
    return 1;
}

/* The least instructions a hooked row can take: none's, plus for each
 * event per operation (as our library delivers them) the minimal hook's
 * instructions over none's munmap. */
static int bench_count_limit(const bench_config_t *cfgs, int ncfg, int row,
                             double *limit_p)
{
    double base, floor, plain, events;
    int c, ok;

    if (!bench_count_get(&cfgs[0], row, 0, &base)) {
        return 0;
    }
    if (bench_count_rows[row].ev == K_LAST) {
        *limit_p = base;
        return 1;
    }
    if (!bench_count_get(&cfgs[0], C_FLOOR, 0, &floor) ||
        !bench_count_get(&cfgs[0], C_MUNMAP, 0, &plain)) {
        return 0;
    }
    for (c = 1; c < ncfg; ++c) {
        if (cfgs[c].ours) {
            events = bench_value(&cfgs[c], bench_count_rows[row].ev, &ok);
            if (ok) {
                *limit_p = base + events * (floor - plain);
                return 1;
            }
        }
    }
    return 0;
}

static void bench_print_counts_csv(const bench_config_t *cfgs, int ncfg)
{
    double ir, d1, ll;
    int row, c;

    printf("row,config,ir_per_op,d1_miss_per_op,ll_miss_per_op\n");
    for (row = 0; row < C_LAST; ++row) {
        for (c = 0; c < ncfg; ++c) {
            if (bench_count_get(&cfgs[c], row, 0, &ir) &&
                bench_count_get(&cfgs[c], row, 1, &d1) &&
                bench_count_get(&cfgs[c], row, 2, &ll)) {
                printf("%s,%s,%.2f,%.4f,%.4f\n", bench_count_rows[row].key,
                       cfgs[c].name, ir, d1, ll);
            }
        }
        if ((row != C_FLOOR) && bench_count_limit(cfgs, ncfg, row, &ir)) {
            printf("%s,limit,%.2f,,\n", bench_count_rows[row].key, ir);
        }
    }
}

static void bench_print_counts(const bench_config_t *cfgs, int ncfg)
{
    static const char *titles[] = {
        "Instructions per operation (limit: none + a minimal hook per event)",
        "D1 data misses per operation", "LL data misses per operation"};
    double value, base = 0, limit, floor, plain;
    char cell[32];
    int metric, row, c;

    for (metric = 0; metric < 3; ++metric) {
        printf("%s\n%-26s %9s", titles[metric], "row", "none");
        if (metric == 0) {
            printf(" %9s", "limit");
        }
        for (c = 1; c < ncfg; ++c) {
            printf(" %11s", cfgs[c].name);
            if (metric == 0) {
                printf(" %8s", "+none");
            }
        }
        printf("\n");
        for (row = 0; row < C_LAST; ++row) {
            if (row == C_FLOOR) {
                continue;
            }
            printf("%-26s", bench_count_rows[row].label);
            if (bench_count_get(&cfgs[0], row, metric, &base)) {
                printf(" %9.*f", metric ? 3 : 1, base);
            } else {
                printf(" %9s", "-");
            }
            if (metric == 0) {
                if (bench_count_limit(cfgs, ncfg, row, &limit)) {
                    printf(" %9.1f", limit);
                } else {
                    printf(" %9s", "-");
                }
            }
            for (c = 1; c < ncfg; ++c) {
                if (!bench_count_get(&cfgs[c], row, metric, &value)) {
                    printf(" %11s", "-");
                    if (metric == 0) {
                        printf(" %8s", "");
                    }
                    continue;
                }
                printf(" %11.*f", metric ? 3 : 1, value);
                if (metric == 0) {
                    snprintf(cell, sizeof(cell), "%+.1f", value - base);
                    printf(" %8s", bench_count_get(&cfgs[0], row, 0, &base)
                                       ? cell
                                       : "");
                }
            }
            printf("\n");
        }
        printf("\n");
    }
    if (bench_count_get(&cfgs[0], C_FLOOR, 0, &floor) &&
        bench_count_get(&cfgs[0], C_MUNMAP, 0, &plain)) {
        printf("minimal hook (indirect call, one handler, call through a "
               "pointer): %+.1f instructions per event\n",
               floor - plain);
    }
    printf("Target: hooked munmap <= +%.0f instructions over none\n",
           BENCH_TARGET_HOOK_IR);
    for (c = 1; c < ncfg; ++c) {
        if (!cfgs[c].ours) {
            continue;
        }
        if (bench_count_get(&cfgs[c], C_MUNMAP, 0, &value) &&
            bench_count_get(&cfgs[0], C_MUNMAP, 0, &base)) {
            printf("  %-12s %+.1f %s\n", cfgs[c].name, value - base,
                   (value - base <= BENCH_TARGET_HOOK_IR) ? "ok" : "MISS");
        } else {
            printf("  %-12s ?\n", cfgs[c].name);
        }
    }
    for (c = 0; c < ncfg; ++c) {
        if (cfgs[c].skip[0] != '\0') {
            printf("%s: skipped: %s\n", cfgs[c].name, cfgs[c].skip);
        } else if (cfgs[c].nfailures > 0) {
            printf("%s: %s\n", cfgs[c].name, cfgs[c].failure);
        }
        if (cfgs[c].notes[0] != '\0') {
            printf("%s: %s\n", cfgs[c].name, cfgs[c].notes);
        }
    }
}

/* Directory of this executable, "" if unknown */
static void bench_self_dir(char *dir, size_t max)
{
    ssize_t len = readlink("/proc/self/exe", dir, max - 1);
    char *slash;

    if (len <= 0) {
        dir[0] = '\0';
        return;
    }
    dir[len] = '\0';
    slash    = strrchr(dir, '/');
    if (slash != NULL) {
        *slash = '\0';
    }
}

static int bench_in_build_tree(void)
{
    char dir[PATH_MAX], real_build[PATH_MAX];

    bench_self_dir(dir, sizeof(dir));
    if ((UCM_BENCH_BUILD_DIR[0] == '\0') ||
        (realpath(UCM_BENCH_BUILD_DIR, real_build) == NULL)) {
        return 0;
    }
    return !strcmp(dir, real_build);
}

static void bench_resolve_paths(bench_opts_t *opts)
{
    static const char *system_dl[] = {"libutil.so.1", "libz.so.1", NULL};
    int build_tree                 = bench_in_build_tree();
    const char *env;
    void *handle;
    int i;

    if ((opts->ours == NULL) &&
        ((env = ucs_env_get("UCM_BENCH_OURS")) != NULL)) {
        opts->ours = env;
    }
    if (opts->ours == NULL) {
        opts->ours = (build_tree && bench_file_exists(UCM_BENCH_OURS_BUILD))
                         ? UCM_BENCH_OURS_BUILD
                         : UCM_BENCH_OURS_INSTALLED;
    }
    if ((opts->ucx == NULL) && ((env = ucs_env_get("UCM_BENCH_UCX")) != NULL)) {
        opts->ucx = env;
    }
    if (opts->ucx == NULL) {
        opts->ucx = UCM_BENCH_STOCK_UCM;
    }
    if ((opts->dl == NULL) && ((env = ucs_env_get("UCM_BENCH_DL")) != NULL)) {
        opts->dl = env;
    }
    if (opts->dl != NULL) {
        opts->dl_origin = "given";
        return;
    }
    if (bench_file_exists(UCM_BENCH_DL_BUILD)) {
        opts->dl        = UCM_BENCH_DL_BUILD;
        opts->dl_origin = "build tree";
        return;
    }
    /* installed: any small system library that this program does not load */
    for (i = 0; system_dl[i] != NULL; ++i) {
        handle = dlopen(system_dl[i], RTLD_NOW | RTLD_NOLOAD);
        if (handle != NULL) {
            dlclose(handle);
            continue;
        }
        handle = dlopen(system_dl[i], RTLD_NOW | RTLD_LOCAL);
        if (handle != NULL) {
            dlclose(handle);
            opts->dl        = system_dl[i];
            opts->dl_origin = "system library";
            return;
        }
    }
    opts->dl_origin = "none found";
}

static void bench_usage(FILE *stream)
{
    fprintf(stream,
            "Usage: ucm_bench_hooks [--quick] [--count] [--csv] [--verbose] "
            "[--opts-only] "
            "[--ours PATH] [--ucx PATH] [--dl PATH]\n"
            "  --quick      short run\n"
            "  --count      instructions and cache misses per operation under\n"
            "               valgrind's callgrind (exit 77 without valgrind)\n"
            "  --csv        machine-readable output\n"
            "  --verbose    show the workers' log messages\n"
            "  --opts-only  select the hook mode with ucm_set_global_opts()"
            " only\n"
            "  --ours PATH  our libucm.so.0 (env UCM_BENCH_OURS)\n"
            "  --ucx PATH   stock UCX libucm.so.0 (env UCM_BENCH_UCX)\n"
            "  --dl PATH    module for the dlopen loop (env UCM_BENCH_DL)\n");
}

static int bench_driver(bench_opts_t *opts)
{
    static bench_config_t cfgs[5];
    const int ncfg = 5;
    double start   = bench_now_ns();
    int pass, i, c, extra;

    bench_resolve_paths(opts);
    memset(cfgs, 0, sizeof(cfgs));
    cfgs[0].name = "none";
    cfgs[0].lib  = "none";
    cfgs[0].mode = "none";
    cfgs[1].name = "ours-reloc";
    cfgs[1].lib  = opts->ours;
    cfgs[1].mode = "reloc";
    cfgs[1].ours = 1;
    cfgs[2].name = "ours-bistro";
    cfgs[2].lib  = opts->ours;
    cfgs[2].mode = "bistro";
    cfgs[2].ours = 1;
    cfgs[3].name = "ucx-reloc";
    cfgs[3].lib  = opts->ucx;
    cfgs[3].mode = "reloc";
    cfgs[4].name = "ucx-bistro";
    cfgs[4].lib  = opts->ucx;
    cfgs[4].mode = "bistro";
    for (c = 1; c < ncfg; ++c) {
        if (access(cfgs[c].lib, R_OK) != 0) {
            snprintf(cfgs[c].skip, sizeof(cfgs[c].skip), "%s: %s", cfgs[c].lib,
                     strerror(errno));
        }
    }

    if (opts->count) {
        char valgrind[PATH_MAX];
        const char *argv[40];

        if (bench_count_argv(argv, "/", valgrind, sizeof(valgrind)) == 0) {
            printf("ucm_bench_hooks: --count needs valgrind in PATH\n");
            return 77;
        }
        opts->passes       = 1;
        opts->install_runs = 0;
        opts->timeout_s    = 600;
    }
    if (!opts->csv && opts->count) {
        printf("ucm_bench_hooks --count: callgrind, %s; each row's loop "
               "counted once after a warm pass\n",
               BENCH_COUNT_GEOMETRY);
        printf("  ours: %s\n  ucx:  %s\n", opts->ours, opts->ucx);
        fflush(stdout);
    } else if (!opts->csv) {
        printf("ucm_bench_hooks: %s run, %d pass(es) x %d rounds of ~%g ms, "
               "medians\n",
               opts->quick ? "quick" : "full", opts->passes, opts->rounds,
               opts->round_ms);
        printf("  ours: %s\n  ucx:  %s\n  dl:   %s (%s)\n", opts->ours,
               opts->ucx, (opts->dl != NULL) ? opts->dl : "-", opts->dl_origin);
        fflush(stdout);
    }

    /* wake the CPU up before the first worker */
    while (!opts->count &&
           (bench_now_ns() - start < (opts->quick ? 100e6 : 300e6))) {
    }

    /* passes over all configurations, rotated, so that slow phases of a
     * noisy machine hit every configuration alike */
    for (pass = 0; pass < opts->passes; ++pass) {
        for (i = 0; i < ncfg; ++i) {
            c = (i + pass) % ncfg;
            if ((cfgs[c].skip[0] == '\0') && !cfgs[c].hung) {
                bench_run_worker(opts, &cfgs[c], 0);
            }
        }
    }
    for (extra = 0; extra < opts->install_runs; ++extra) {
        for (c = 1; c < ncfg; ++c) {
            if ((cfgs[c].skip[0] == '\0') && !cfgs[c].hung) {
                bench_run_worker(opts, &cfgs[c], 1);
            }
        }
    }

    if (opts->count && opts->csv) {
        bench_print_counts_csv(cfgs, ncfg);
    } else if (opts->count) {
        printf("\n");
        bench_print_counts(cfgs, ncfg);
        printf("total time: %.1f s\n", (bench_now_ns() - start) / 1e9);
    } else if (opts->csv) {
        bench_print_csv(cfgs, ncfg);
    } else {
        printf("\n");
        bench_print_table(opts, cfgs, ncfg);
        printf("total time: %.1f s\n", (bench_now_ns() - start) / 1e9);
    }
    /* a worker of ours (or of the baseline) that failed is a bug to see */
    for (c = 0; c < ncfg; ++c) {
        if ((cfgs[c].ours || (c == 0)) && (cfgs[c].nfailures > 0)) {
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    bench_opts_t opts      = {0};
    const char *worker_lib = NULL, *worker_mode = NULL;
    int install_only = 0, i;

    opts.passes       = 3;
    opts.rounds       = 7;
    opts.round_ms     = 10;
    opts.install_runs = 4;
    opts.timeout_s    = 60;

    for (i = 1; i < argc; ++i) {
        const char *arg  = argv[i];
        const char *next = (i + 1 < argc) ? argv[i + 1] : NULL;

        if (!strcmp(arg, "--quick")) {
            opts.quick = 1;
        } else if (!strcmp(arg, "--count")) {
            opts.count = 1;
        } else if (!strcmp(arg, "--csv")) {
            opts.csv = 1;
        } else if (!strcmp(arg, "--verbose")) {
            opts.verbose = 1;
        } else if (!strcmp(arg, "--opts-only")) {
            opts.opts_only = 1;
        } else if (!strcmp(arg, "--install-only")) {
            install_only = 1;
        } else if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            bench_usage(stdout);
            return 0;
        } else if (next == NULL) {
            bench_usage(stderr);
            return 2;
        } else if (!strcmp(arg, "--ours")) {
            opts.ours = argv[++i];
        } else if (!strcmp(arg, "--ucx")) {
            opts.ucx = argv[++i];
        } else if (!strcmp(arg, "--dl")) {
            opts.dl = argv[++i];
        } else if (!strcmp(arg, "--result-fd")) {
            bench_result_fd = atoi(argv[++i]);
        } else if (!strcmp(arg, "--rounds")) {
            opts.rounds = atoi(argv[++i]);
        } else if (!strcmp(arg, "--round-ms")) {
            opts.round_ms = atof(argv[++i]);
        } else if (!strcmp(arg, "--worker") && (i + 2 < argc)) {
            worker_lib  = argv[++i];
            worker_mode = argv[++i];
        } else {
            bench_usage(stderr);
            return 2;
        }
    }

    if (opts.rounds < 1) {
        opts.rounds = 1;
    } else if (opts.rounds > BENCH_MAX_SAMPLES) {
        opts.rounds = BENCH_MAX_SAMPLES;
    }
    if (opts.round_ms <= 0) {
        opts.round_ms = 1;
    }

    if (worker_lib != NULL) {
        bench_dl_path = opts.dl;
        return bench_worker(worker_lib, worker_mode, opts.rounds, opts.round_ms,
                            install_only, opts.opts_only, opts.count);
    }

    if (opts.quick) {
        opts.passes       = 1;
        opts.rounds       = 3;
        opts.round_ms     = 5;
        opts.install_runs = 2;
        opts.timeout_s    = 30;
    }
    return bench_driver(&opts);
}
