/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Pages of shared files removed by calls no hook sees; see
 * ucm_filewatch.h.
 */
#include "ucm_filewatch.h"

#include "ucm_filemap_int.h"
#include "ucm_filewatch_recent.h"
#include "ucm_mmap.h"

#include <ucm/util/ucm_log.h>
#include <ucm/util/ucm_procmaps.h>
#include <ucm/util/ucm_sys.h>

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* Watched files by watch descriptor: open addressing on wd. */
#define UCM_FILEWATCH_SLOTS 1024
#define UCM_FILEWATCH_FREE  0
#define UCM_FILEWATCH_BUSY  (-1) /* being filled */
#define UCM_FILEWATCH_GONE  (-2) /* removed: lookups go on past it */
/* Loads of a slot being filled before giving up on its filler. */
#define UCM_FILEWATCH_SETTLE_SPINS 4096

/* Pages of pagemap read at once. */
#define UCM_FILEWATCH_PM_BATCH   512
#define UCM_FILEWATCH_PM_PRESENT (1ull << 63)
#define UCM_FILEWATCH_PM_SWAPPED (1ull << 62)

typedef struct {
    int wd;
    ucm_filemap_key_t key;
} ucm_filewatch_slot_t;

typedef struct {
    ucm_event_list_t *list;
    int pagemap; /* /proc/self/pagemap, or < 0: report whole ranges */
} ucm_filewatch_ctx_t;

/* Files watched already (by inode, direct-mapped): a shared file mapped
 * again costs no inotify_add_watch().  An entry goes with IN_IGNORED. */
#define UCM_FILEWATCH_SEEN 256

/* The instance and its thread, made at first use. */
enum {
    UCM_FILEWATCH_IDLE,     /* not made (yet, or again in a forked child) */
    UCM_FILEWATCH_STARTING, /* a hook is making them */
    UCM_FILEWATCH_ACTIVE,
    UCM_FILEWATCH_FAILED /* off: one line said why */
};

/* Loads of the state while another thread starts the watch (each a
 * sched_yield): the start is two system calls and a thread creation. */
#define UCM_FILEWATCH_START_SPINS 100000

int ucm_filewatch_on;
static int ucm_filewatch_state = UCM_FILEWATCH_IDLE;
static int ucm_filewatch_thread_up;
static ucm_filemap_key_t ucm_filewatch_seen[UCM_FILEWATCH_SEEN];
static __thread int ucm_filewatch_starting_here
    __attribute__((tls_model("initial-exec")));
static int ucm_filewatch_fd = -1;
static ucm_filewatch_slot_t ucm_filewatch_slots[UCM_FILEWATCH_SLOTS];

ucm_filewatch_opts_t ucm_filewatch_opts = {0, 0};

#define UCM_FILEWATCH_FIELD(_name, _dfl, _doc, _field, _type)                  \
    {                                                                          \
        _name, _dfl, _doc, offsetof(ucm_filewatch_opts_t, _field), _type, NULL \
    }

const ucs_config_field_t ucm_filewatch_config_table[] = {
    UCM_FILEWATCH_FIELD("MEM_FILE_WATCH", "no",
                        "Watch every mapped shared file with inotify and "
                        "report pages that calls no hook sees removed "
                        "(after the fact, from a thread of libucm's)",
                        enable, UCS_CONFIG_TYPE_BOOL),
    UCM_FILEWATCH_FIELD("MEM_FILE_WATCH_SIGNAL", "0",
                        "Ignored: the file watch takes no signal (kept so "
                        "that setting it is not an error)",
                        signal, UCS_CONFIG_TYPE_UINT),
    {NULL, NULL, NULL, 0, UCS_CONFIG_TYPE_BOOL, NULL}};

static unsigned ucm_filewatch_hash(int wd)
{
    return (unsigned)wd & (UCM_FILEWATCH_SLOTS - 1);
}

/* The value of slot i once a filler is done with it: a filler holds BUSY
 * for a few stores, so wait for it, but not forever (the filler may be this
 * thread, interrupted by a signal whose handler maps a file). */
static int ucm_filewatch_slot_settled(unsigned i)
{
    int cur, spins;

    for (spins = 0; spins < UCM_FILEWATCH_SETTLE_SPINS; ++spins) {
        cur = __atomic_load_n(&ucm_filewatch_slots[i].wd, __ATOMIC_ACQUIRE);
        if (cur != UCM_FILEWATCH_BUSY) {
            return cur;
        }
        if (spins >= UCM_FILEWATCH_SETTLE_SPINS / 2) {
            ucm_sys_sched_yield(); /* the filler was preempted */
        }
    }
    return UCM_FILEWATCH_BUSY;
}

/* One slot per watch descriptor: inotify gives the same wd for every watch
 * of one inode, and two threads mapping a new file at once both add it.
 * The whole probe chain is looked at first (wd may sit past a removed
 * slot), waiting for slots being filled; then the first free or removed
 * slot is claimed, and a lost claim looks again.  1: wd has a slot. */
static int ucm_filewatch_slot_add(int wd, const ucm_filemap_key_t *key)
{
    unsigned i, n, attempt, claim;
    int cur, claim_cur;

    for (attempt = 0; attempt < UCM_FILEWATCH_SLOTS; ++attempt) {
        claim     = UCM_FILEWATCH_SLOTS;
        claim_cur = UCM_FILEWATCH_FREE;
        for (n = 0, i = ucm_filewatch_hash(wd); n < UCM_FILEWATCH_SLOTS;
             ++n, i   = (i + 1) & (UCM_FILEWATCH_SLOTS - 1)) {
            cur = ucm_filewatch_slot_settled(i);
            if (cur == wd) {
                return 1; /* the same inode again */
            }
            if (((cur == UCM_FILEWATCH_FREE) || (cur == UCM_FILEWATCH_GONE)) &&
                (claim == UCM_FILEWATCH_SLOTS)) {
                claim     = i;
                claim_cur = cur;
            }
            if (cur == UCM_FILEWATCH_FREE) {
                break; /* the end of the chain */
            }
        }
        if (claim == UCM_FILEWATCH_SLOTS) {
            /* full: without a key the events of this watch cannot be
             * reported */
            ucm_sys_syscall6(SYS_inotify_rm_watch, ucm_filewatch_fd, wd, 0, 0,
                             0, 0);
            return 0;
        }
        if (__atomic_compare_exchange_n(&ucm_filewatch_slots[claim].wd,
                                        &claim_cur, UCM_FILEWATCH_BUSY, 0,
                                        __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
            ucm_filewatch_slots[claim].key = *key;
            __atomic_store_n(&ucm_filewatch_slots[claim].wd, wd,
                             __ATOMIC_RELEASE);
            return 1;
        }
    }
    /* claims lost to other threads every time: the table kept changing */
    return 0;
}

/* Slot of wd, or -1. */
static int ucm_filewatch_slot_find(int wd)
{
    unsigned i, n;
    int cur;

    for (n = 0, i = ucm_filewatch_hash(wd); n < UCM_FILEWATCH_SLOTS;
         ++n, i   = (i + 1) & (UCM_FILEWATCH_SLOTS - 1)) {
        cur = __atomic_load_n(&ucm_filewatch_slots[i].wd, __ATOMIC_ACQUIRE);
        if (cur == wd) {
            return (int)i;
        }
        if (cur == UCM_FILEWATCH_FREE) {
            break;
        }
    }
    return -1;
}

static ucm_filemap_key_t *ucm_filewatch_seen_slot(const ucm_filemap_key_t *key)
{
    return &ucm_filewatch_seen[(key->ino ^ (key->ino >> 8) ^ key->kind) &
                               (UCM_FILEWATCH_SEEN - 1)];
}

/* Racy by design: a torn entry only costs one more inotify_add_watch(). */
static int ucm_filewatch_seen_has(const ucm_filemap_key_t *key)
{
    ucm_filemap_key_t seen = *ucm_filewatch_seen_slot(key);

    return (seen.kind == key->kind) && (seen.ino == key->ino) &&
           (seen.dev == key->dev);
}

static int ucm_filewatch_fd_get(void);

int ucm_filewatch_watched(const ucm_filemap_key_t *key)
{
    return __atomic_load_n(&ucm_filewatch_on, __ATOMIC_RELAXED) &&
           ucm_filewatch_seen_has(key);
}

/* 0, or -errno of inotify_add_watch (-EBADF: the watch is off). */
static long ucm_filewatch_add_path(const char *path,
                                   const ucm_filemap_key_t *key)
{
    int saved_errno = errno;
    int fd;
    long wd;

    if (ucm_filewatch_seen_has(key)) {
        return 0;
    }
    fd = ucm_filewatch_fd_get();
    if (fd < 0) {
        errno = saved_errno;
        return -EBADF;
    }
    wd = ucm_sys_syscall6(SYS_inotify_add_watch, fd, (long)path, IN_MODIFY, 0,
                          0, 0);
    if ((wd > 0) && ucm_filewatch_slot_add((int)wd, key)) {
        /* only once it has a slot: a file without one is tried again */
        *ucm_filewatch_seen_slot(key) = *key;
    }
    errno = saved_errno;
    return (wd < 0) ? wd : 0;
}

/* Append the decimal (base 10) or hex (16) digits of x at p. */
static char *ucm_filewatch_fmt(char *p, unsigned long x, unsigned base)
{
    char digits[24];
    int n = 0;

    do {
        digits[n++] = "0123456789abcdef"[x % base];
        x /= base;
    } while (x != 0);
    while (n > 0) {
        *p++ = digits[--n];
    }
    return p;
}

/* Where a descriptor of the calling thread is found by path: its own
 * table (/proc/self is the main thread's, which differs after
 * unshare(CLONE_FILES)); /proc/self on kernels without thread-self (before
 * 3.17).  Chosen by ucm_filewatch_init(). */
static const char *ucm_filewatch_fd_dir = "/proc/thread-self/fd/";

/* ucm_filewatch_fd_dir and fd into path[UCM_FILEWATCH_FD_PATH]. */
#define UCM_FILEWATCH_FD_PATH 48
static void ucm_filewatch_fd_path(char *path, int fd)
{
    size_t n = strlen(ucm_filewatch_fd_dir);
    char *p;

    memcpy(path, ucm_filewatch_fd_dir, n);
    p  = ucm_filewatch_fmt(path + n, (unsigned)fd, 10);
    *p = '\0';
}

/* "/proc/self/map_files/<start>-<end>" (hex) into path[UCM_FILEWATCH_MAP_PATH]:
 * the file a mapping maps, opened without a descriptor of it. */
#define UCM_FILEWATCH_MAP_PATH 80
static void ucm_filewatch_map_path(char *path, uintptr_t start, uintptr_t end)
{
    static const char prefix[] = "/proc/self/map_files/";
    char *p;

    memcpy(path, prefix, sizeof(prefix) - 1);
    p    = ucm_filewatch_fmt(path + sizeof(prefix) - 1, start, 16);
    *p++ = '-';
    p    = ucm_filewatch_fmt(p, end, 16);
    *p   = '\0';
}

/* The file of fd opened again by path (O_RDWR, close-on-exec), checked to
 * be the same inode; -errno on failure. */
static long ucm_filewatch_fd_reopen(int fd)
{
    char path[UCM_FILEWATCH_FD_PATH];
    struct stat st_old, st_new;
    long nfd;

    ucm_filewatch_fd_path(path, fd);
    nfd = ucm_sys_open(path, O_RDWR | O_CLOEXEC);
    if (nfd < 0) {
        return nfd;
    }
    if ((ucm_sys_syscall6(SYS_fstat, fd, (long)&st_old, 0, 0, 0, 0) != 0) ||
        (ucm_sys_syscall6(SYS_fstat, nfd, (long)&st_new, 0, 0, 0, 0) != 0) ||
        (st_old.st_dev != st_new.st_dev) || (st_old.st_ino != st_new.st_ino)) {
        ucm_sys_close((int)nfd);
        return -ESTALE;
    }
    return nfd;
}

void ucm_filewatch_add_fd(int fd, const struct stat *st)
{
    char path[UCM_FILEWATCH_FD_PATH];
    ucm_filemap_key_t key;

    if (!ucm_filewatch_on || (fd < 0)) {
        return;
    }
    ucm_filewatch_fd_path(path, fd);
    key.kind      = UCM_FILEMAP_FILE;
    key.ino       = st->st_ino;
    key.dev       = st->st_dev;
    key.dev_known = 1;
    (void)ucm_filewatch_add_path(path, &key);
}

void ucm_filewatch_reopen_memfd(int fd, unsigned flags)
{
    int saved_errno = errno;
    long nfd, ret;

    if (!ucm_filewatch_on || (fd < 0)) {
        return;
    }
    nfd = ucm_filewatch_fd_reopen(fd);
    if (nfd < 0) {
        ucm_debug("memfd %d: reopen through /proc: error %ld: its hole "
                  "punches are not watched",
                  fd, -nfd);
        goto out;
    }
    ret = ucm_sys_syscall6(SYS_dup3, nfd, fd,
                           (flags & MFD_CLOEXEC) ? O_CLOEXEC : 0, 0, 0, 0);
    if (ret < 0) {
        ucm_debug("memfd %d: dup3: error %ld: its hole punches are not "
                  "watched",
                  fd, -ret);
    }
    ucm_sys_close((int)nfd);
out:
    errno = saved_errno;
}

void ucm_filewatch_add_shm(uintptr_t addr, size_t size, int shmid)
{
    char path[UCM_FILEWATCH_MAP_PATH];
    ucm_filemap_key_t key;

    if (!ucm_filewatch_on || (size == 0)) {
        return;
    }
    ucm_filewatch_map_path(path, addr, addr + size);
    key.kind      = UCM_FILEMAP_SYSV;
    key.ino       = (uint64_t)shmid;
    key.dev       = 0;
    key.dev_known = 0;
    (void)ucm_filewatch_add_path(path, &key);
}

static int ucm_filewatch_scan_cb(void *arg, const ucm_procmaps_entry_t *m)
{
    char path[UCM_FILEWATCH_MAP_PATH];
    ucm_filemap_key_t key;

    if (!m->shared || (m->inode == 0) || (m->path[0] != '/') ||
        (!strncmp(m->path, "/dev/", 5) && strncmp(m->path, "/dev/shm/", 9))) {
        return 0; /* anonymous, or a device (/dev/zero, ...) */
    }
    memset(&key, 0, sizeof(key));
    if (!strncmp(m->path, "/SYSV", 5)) {
        key.kind = UCM_FILEMAP_SYSV;
    } else {
        key.kind = UCM_FILEMAP_FILE;
        key.dev  = makedev(m->dev_major, m->dev_minor);
    }
    key.ino = m->inode;
    ucm_filewatch_map_path(path, m->start, m->end);
    if (ucm_filewatch_add_path(path, &key) < 0) {
        ++*(unsigned *)arg;
    }
    return 0;
}

void ucm_filewatch_scan(void)
{
    unsigned failed = 0;

    if (!ucm_filewatch_on) {
        return;
    }
    ucm_procmaps_walk(ucm_filewatch_scan_cb, &failed);
    if ((failed > 0) && ucm_filewatch_on) {
        ucm_warn("UCX_MEM_FILE_WATCH: %u shared file mapping(s) made before "
                 "the hooks or inherited across fork() not watched "
                 "(/proc/self/map_files needs root): their removals by "
                 "calls no hook sees are not reported",
                 failed);
    }
}

static void ucm_filewatch_raise(ucm_filewatch_ctx_t *ctx, uintptr_t start,
                                uintptr_t end)
{
    if (end > start) {
        ucm_hook_vm(ctx->list, UCM_EVENT_VM_UNMAPPED, (void *)start,
                    end - start);
    }
}

/* A mapping of the file: raise the runs of pages that are neither present
 * nor swapped out (the file dropped them, or they were never touched,
 * which nothing registered then). */
static void ucm_filewatch_range(void *arg, uintptr_t start, size_t len)
{
    ucm_filewatch_ctx_t *ctx = arg;
    size_t page              = ucm_sys_page_size();
    uint64_t pm[UCM_FILEWATCH_PM_BATCH];
    uintptr_t addr, end = start + len, run = 0;
    size_t i, n;
    long ret;

    if (ctx->pagemap < 0) {
        ucm_filewatch_raise(ctx, start, end);
        return;
    }
    for (addr = start; addr < end; addr += n * page) {
        n   = ucs_min((end - addr) / page, UCM_FILEWATCH_PM_BATCH);
        ret = ucm_sys_syscall6(SYS_pread64, ctx->pagemap, (long)pm,
                               (long)(n * sizeof(pm[0])),
                               (long)((addr / page) * sizeof(pm[0])), 0, 0);
        if (ret != (long)(n * sizeof(pm[0]))) {
            ucm_filewatch_raise(ctx, (run != 0) ? run : addr, end);
            return;
        }
        for (i = 0; i < n; ++i) {
            if (!(pm[i] &
                  (UCM_FILEWATCH_PM_PRESENT | UCM_FILEWATCH_PM_SWAPPED))) {
                if (run == 0) {
                    run = addr + i * page;
                }
            } else if (run != 0) {
                ucm_filewatch_raise(ctx, run, addr + i * page);
                run = 0;
            }
        }
    }
    if (run != 0) {
        ucm_filewatch_raise(ctx, run, end);
    }
}

/* The mappings of file offsets [lo, hi) of key. */
static void ucm_filewatch_report(const ucm_filemap_key_t *key, uint64_t lo,
                                 uint64_t hi)
{
    int saved_errno = errno;
    ucm_filewatch_ctx_t ctx;

    if (lo >= hi) {
        return;
    }
    ctx.list = ucm_hook_enter(UCM_EVENT_VM_UNMAPPED);
    if (ctx.list == NULL) {
        return;
    }
    ctx.pagemap = (int)ucm_sys_open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    ucm_filemap_report_file(key, lo, hi, ucm_filewatch_range, &ctx);
    if (ctx.pagemap >= 0) {
        ucm_sys_close(ctx.pagemap);
    }
    ucm_hook_leave(saved_errno);
}

static void ucm_filewatch_report_all(void)
{
    ucm_filemap_key_t key;
    unsigned i;
    int wd;

    for (i = 0; i < UCM_FILEWATCH_SLOTS; ++i) {
        wd = __atomic_load_n(&ucm_filewatch_slots[i].wd, __ATOMIC_ACQUIRE);
        if (wd > 0) {
            key = ucm_filewatch_slots[i].key;
            if (__atomic_load_n(&ucm_filewatch_slots[i].wd, __ATOMIC_ACQUIRE) ==
                wd) {
                ucm_filewatch_report(&key, 0, UINT64_MAX);
            }
        }
    }
}

/* The offsets of key outside the hooks' records (the hooks raise those
 * themselves). */
static void ucm_filewatch_report_rest(const ucm_filemap_key_t *key)
{
    ucm_filemap_range_t own[UCM_FILEWATCH_RECENT];
    unsigned i, n;
    uint64_t lo = 0;

    n = ucm_filewatch_recent_take(key, own, UCM_FILEWATCH_RECENT);
    for (i = 0; i < n; ++i) {
        ucm_filewatch_report(key, lo, own[i].lo);
        lo = ucs_max(lo, own[i].hi);
    }
    ucm_filewatch_report(key, lo, UINT64_MAX);
}

static void ucm_filewatch_event(const struct inotify_event *ev, int *last_wd)
{
    ucm_filemap_key_t key;
    int slot;

    if (ev->mask & IN_Q_OVERFLOW) {
        ucm_filewatch_recent_clear(0);
        ucm_filewatch_report_all(); /* events were lost */
        *last_wd = -1;
        return;
    }
    slot = ucm_filewatch_slot_find(ev->wd);
    if (slot < 0) {
        return;
    }
    if (ev->mask & IN_IGNORED) { /* the file is gone, or the watch */
        ucm_filemap_range_t own[UCM_FILEWATCH_RECENT];

        key = ucm_filewatch_slots[slot].key;
        /* no event of it will take its records away */
        (void)ucm_filewatch_recent_take(&key, own, UCM_FILEWATCH_RECENT);
        if (ucm_filewatch_seen_has(&key)) {
            memset(ucm_filewatch_seen_slot(&key), 0, sizeof(key));
        }
        __atomic_store_n(&ucm_filewatch_slots[slot].wd, UCM_FILEWATCH_GONE,
                         __ATOMIC_RELEASE);
        return;
    }
    if ((ev->mask & IN_MODIFY) && (ev->wd != *last_wd)) {
        key = ucm_filewatch_slots[slot].key;
        ucm_filewatch_report_rest(&key);
        *last_wd = ev->wd; /* one report per file and batch */
    }
}

/* Read the queued events and report them (the watch thread). */
static void ucm_filewatch_drain(int fd)
{
    char buf[4096] __attribute__((aligned(8)));
    int saved_errno = errno, last_wd = -1;
    const struct inotify_event *ev;
    long n, off;

    for (;;) {
        n = ucm_sys_read(fd, buf, sizeof(buf));
        if (n <= 0) {
            break;
        }
        for (off = 0; off + (long)sizeof(*ev) <= n;
             off += sizeof(*ev) + ev->len) {
            ev = (const struct inotify_event *)(buf + off);
            ucm_filewatch_event(ev, &last_wd);
        }
    }
    errno = saved_errno;
}

/* The watch thread: waits in poll() for events and runs the VM_UNMAPPED
 * handlers for them; no signal is involved, and it takes none. */
static void *ucm_filewatch_thread(void *arg)
{
    int fd = (int)(intptr_t)arg;
    long ret;

#ifdef _GNU_SOURCE
    pthread_setname_np(pthread_self(), "ucm-filewatch");
#endif
    __atomic_store_n(&ucm_filewatch_thread_up, 1, __ATOMIC_RELEASE);
    while ((ret = ucm_sys_wait_readable(fd)) == 0) {
        ucm_filewatch_drain(fd);
    }
    errno = (int)-ret;
    ucm_warn("UCX_MEM_FILE_WATCH: watch thread stopped (%s): removals by "
             "calls no hook sees are no longer reported",
             strerror(errno));
    return NULL;
}

static void ucm_filewatch_fail(const char *what, int err)
{
    __atomic_store_n(&ucm_filewatch_state, UCM_FILEWATCH_FAILED,
                     __ATOMIC_RELEASE);
    __atomic_store_n(&ucm_filewatch_on, 0, __ATOMIC_RELAXED);
    ucm_warn("UCX_MEM_FILE_WATCH: %s: %s: removals by calls no hook sees "
             "are not reported",
             what, strerror(err));
}

/* Make the instance and start its thread (the caller won the start). */
static void ucm_filewatch_start(void)
{
    pthread_attr_t attr;
    sigset_t all, old;
    pthread_t thread;
    unsigned i;
    long fd;
    int err;

    fd = ucm_sys_syscall6(SYS_inotify_init1, IN_NONBLOCK | IN_CLOEXEC, 0, 0, 0,
                          0, 0);
    if (fd < 0) {
        ucm_filewatch_fail("inotify_init1", (int)-fd);
        return;
    }
    /* the thread takes no signal: the application's stay on its threads */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    __atomic_store_n(&ucm_filewatch_thread_up, 0, __ATOMIC_RELAXED);
    err = pthread_create(&thread, &attr, ucm_filewatch_thread,
                         (void *)(intptr_t)fd);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err != 0) {
        ucm_sys_close((int)fd);
        ucm_filewatch_fail("pthread_create", err);
        return;
    }
    /* bounded: a fork() right after the start must not find the thread in
     * its start-up (see ucm_uffd.c) */
    for (i = 0; (i < UCM_FILEWATCH_START_SPINS) &&
                !__atomic_load_n(&ucm_filewatch_thread_up, __ATOMIC_ACQUIRE);
         ++i) {
        ucm_sys_sched_yield();
    }
    ucm_filewatch_fd = (int)fd;
    __atomic_store_n(&ucm_filewatch_state, UCM_FILEWATCH_ACTIVE,
                     __ATOMIC_RELEASE);
    ucm_debug("file watch started (inotify fd %ld, thread ucm-filewatch)", fd);
}

/* The instance, made at first use; -1 if the watch is off.  Hook context:
 * reached only from the mmap of a shared file, shmat and memfd_create (and
 * the installation's scan), never from the allocator. */
static int ucm_filewatch_fd_get(void)
{
    int state = __atomic_load_n(&ucm_filewatch_state, __ATOMIC_ACQUIRE);
    unsigned i;

    if (state == UCM_FILEWATCH_ACTIVE) {
        return ucm_filewatch_fd;
    }
    if ((state == UCM_FILEWATCH_IDLE) &&
        __atomic_compare_exchange_n(&ucm_filewatch_state, &state,
                                    UCM_FILEWATCH_STARTING, 0, __ATOMIC_ACQUIRE,
                                    __ATOMIC_ACQUIRE)) {
        ucm_filewatch_starting_here = 1;
        ucm_filewatch_start();
        ucm_filewatch_starting_here = 0;
    } else if (ucm_filewatch_starting_here) {
        return -1; /* the start itself maps a shared file */
    }
    for (i = 0; i < UCM_FILEWATCH_START_SPINS; ++i) {
        state = __atomic_load_n(&ucm_filewatch_state, __ATOMIC_ACQUIRE);
        if (state == UCM_FILEWATCH_ACTIVE) {
            return ucm_filewatch_fd;
        }
        if (state != UCM_FILEWATCH_STARTING) {
            return -1;
        }
        ucm_sys_sched_yield();
    }
    return -1;
}

/* The child shares the parent's instance (and its queue), and has no watch
 * thread: it closes the instance, forgets the watches, and makes its own,
 * watching the shared file mappings it inherited. */
void ucm_filewatch_atfork_child(void)
{
    int fd = ucm_filewatch_fd;

    if (__atomic_load_n(&ucm_filewatch_state, __ATOMIC_RELAXED) ==
        UCM_FILEWATCH_IDLE) {
        return; /* nothing watched yet: the first use starts it */
    }
    ucm_filewatch_fd = -1;
    if (fd >= 0) {
        ucm_sys_close(fd);
    }
    memset(ucm_filewatch_slots, 0, sizeof(ucm_filewatch_slots));
    memset(ucm_filewatch_seen, 0, sizeof(ucm_filewatch_seen));
    ucm_filewatch_recent_clear(1);
    __atomic_store_n(&ucm_filewatch_state, UCM_FILEWATCH_IDLE,
                     __ATOMIC_RELEASE);
    ucm_filewatch_scan();
}

void ucm_filewatch_init(void)
{
    if (!ucm_filewatch_opts.enable) {
        return;
    }
    if (access("/proc/thread-self/fd", F_OK) != 0) {
        ucm_filewatch_fd_dir = "/proc/self/fd/"; /* before Linux 3.17 */
    }
    __atomic_store_n(&ucm_filewatch_on, 1, __ATOMIC_SEQ_CST);
    ucm_debug("watching mapped shared files (from the first one on)");
}
