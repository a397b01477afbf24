/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The hooked functions, their originals and the installer (internal).
 */
#ifndef UCM_MMAP_H_
#define UCM_MMAP_H_

#include <ucm/api/ucm_ext.h>
#include <ucm/event/ucm_event.h>
#include <ucm/uffd/ucm_uffd.h>
#include <ucm/util/ucm_hot.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>

typedef enum {
    UCM_HOOK_MMAP,
    UCM_HOOK_MMAP64,
    UCM_HOOK_MUNMAP,
    UCM_HOOK_MREMAP,
    UCM_HOOK_MADVISE,
    UCM_HOOK_SHMAT,
    UCM_HOOK_SHMDT,
    UCM_HOOK_BRK,
    UCM_HOOK_SBRK,
    UCM_HOOK_FTRUNCATE, /* page-cache truncation (ucm_trunc.c) */
    UCM_HOOK_FTRUNCATE64,
    UCM_HOOK_TRUNCATE,
    UCM_HOOK_TRUNCATE64,
    UCM_HOOK_FALLOCATE,
    UCM_HOOK_FALLOCATE64,
    UCM_HOOK_MEMFD_CREATE, /* the file watch's memfds (ucm_memfd.c) */
    UCM_HOOK_MALLOC,       /* heap events in reloc mode (ucm_heap.h) */
    UCM_HOOK_CALLOC,
    UCM_HOOK_REALLOC,
    UCM_HOOK_REALLOCARRAY,
    UCM_HOOK_FREE,
    UCM_HOOK_MEMALIGN,
    UCM_HOOK_POSIX_MEMALIGN,
    UCM_HOOK_ALIGNED_ALLOC,
    UCM_HOOK_VALLOC,
    UCM_HOOK_PVALLOC,
    UCM_HOOK_MALLOC_TRIM,
    UCM_HOOK_MALLOPT,
    UCM_HOOK_DLOPEN, /* reloc only: follow objects loaded later */
    UCM_HOOK_DLCLOSE,
    UCM_HOOK_DLMOPEN,
    UCM_HOOK_LAST
} ucm_hook_id_t;

typedef struct ucm_hook_func {
    const char *symbol;
    void *hook;     /* our replacement */
    void *raw;      /* libucm's own equivalent of the original
                       (bistro: used unless chaining to another
                       hooker), NULL if none */
    int events;     /* events that need it */
    int libc;       /* a libc function that bistro can patch */
    int heap;       /* a malloc-family wrapper: patched (reloc) only where
                       libc's own mmap/munmap/madvise/sbrk calls are not
                       hooked and the malloc is glibc's */
    void *next;     /* the definition after libucm at start-up
                       (normally libc's) */
    int also_reloc; /* bistro, but interposed ahead of libc:
                       GOT slots are patched as well */
    ucm_hook_state_t state;
    const char *detail;
} ucm_hook_func_t;

extern ucm_hook_func_t ucm_hook_funcs[UCM_HOOK_LAST];

/* Set while our sbrk hook runs libc's sbrk, which calls brk internally: the
 * brk hook then passes through (the change is reported by the sbrk hook).
 * Only brk looks at it: a signal handler's munmap meanwhile still reports. */
extern __thread int ucm_hook_in_sbrk __attribute__((tls_model("initial-exec")));

/* What the replacement calls (in ucm_hot: read on every call). */
#define UCM_HOOK_ORIG(_id, _type) ((_type)ucm_hot.orig[_id])

/* In a variadic mremap(old, old_size, new_size, flags, ...): the fifth
 * argument into _new_address, read only with MREMAP_FIXED (callers of
 * UCX 1.13's ucm_mremap pass four arguments). */
#define UCM_MREMAP_VA_NEW_ADDRESS(_flags, _new_address)                        \
    do {                                                                       \
        va_list _ap;                                                           \
        if ((_flags)&MREMAP_FIXED) {                                           \
            va_start(_ap, _flags);                                             \
            (_new_address) = va_arg(_ap, void *);                              \
            va_end(_ap);                                                       \
        }                                                                      \
    } while (0)

/* Depth of original calls in progress on this thread (see below). */
extern __thread int ucm_hook_chain_depth
    __attribute__((tls_model("initial-exec")));

/* The original of hook _id.  Inside another original call on this thread it
 * is libucm's own equivalent: when the original is a library that we chain
 * to and that itself calls libc's (patched) entry, as sanitizer interceptors
 * do, the nested call reports its events but cannot loop back. */
static UCS_F_ALWAYS_INLINE void *ucm_hook_orig(int id)
{
    if (ucs_unlikely(ucm_hook_chain_depth > 0) &&
        (ucm_hook_funcs[id].raw != NULL)) {
        return ucm_hook_funcs[id].raw;
    }
    return ucm_hot.orig[id];
}

#define UCM_HOOK_CALL_ORIG(_id, _type, ...)                                    \
    ({                                                                         \
        _type _orig = (_type)ucm_hook_orig(_id);                               \
        __typeof__(_orig(__VA_ARGS__)) _ret;                                   \
        ++ucm_hook_chain_depth;                                                \
        _ret = _orig(__VA_ARGS__);                                             \
        --ucm_hook_chain_depth;                                                \
        _ret;                                                                  \
    })

/* Enter a hook: returns the handler list, or NULL when the hook must pass
 * straight through (nobody listens to any of 'events'). */
static UCS_F_ALWAYS_INLINE ucm_event_list_t *ucm_hook_enter(int events)
{
    ucm_event_list_t *list;

    ucm_rcu_read_lock();
    list = ucm_event_list_get();
    if (ucs_likely(list->events & events)) {
        return list;
    }
    ucm_rcu_read_unlock();
    return NULL;
}

static UCS_F_ALWAYS_INLINE void ucm_hook_leave(int saved_errno)
{
    ucm_rcu_read_unlock();
    errno = saved_errno;
}

static UCS_F_ALWAYS_INLINE void ucm_hook_vm(const ucm_event_list_t *list,
                                            ucm_event_type_t type, void *addr,
                                            size_t len)
{
    ucm_event_t event;

    if ((list->events & type) && (len > 0)) {
        event.vm_unmapped.address = addr;
        event.vm_unmapped.size    = len;
        ucm_event_call_all(list, type, &event);
    }
}

/* VM_UNMAPPED of a range that the original call about to be made unmaps or
 * discards with a userfaultfd report (munmap, mremap, mmap MAP_FIXED,
 * madvise DONTNEED/FREE/REMOVE, shmat SHM_REMAP, shmdt, brk): the range
 * first leaves the monitor's registration (ucm_uffd.h), so the call does
 * not wait for the monitor to read a report that this event makes
 * redundant. */
static UCS_F_ALWAYS_INLINE void
ucm_hook_vm_unmapping(const ucm_event_list_t *list, void *addr, size_t len)
{
    if ((list->events & UCM_EVENT_VM_UNMAPPED) && (len > 0)) {
        ucm_uffd_unwatch(addr, len);
        ucm_hook_vm(list, UCM_EVENT_VM_UNMAPPED, addr, len);
    }
}

typedef void *(*ucm_mmap_func_t)(void *, size_t, int, int, int, off_t);
typedef int (*ucm_munmap_func_t)(void *, size_t);
typedef void *(*ucm_mremap_func_t)(void *, size_t, size_t, int, ...);
typedef int (*ucm_madvise_func_t)(void *, size_t, int);
typedef void *(*ucm_shmat_func_t)(int, const void *, int);
typedef int (*ucm_shmdt_func_t)(const void *);
typedef int (*ucm_brk_func_t)(void *);
typedef void *(*ucm_sbrk_func_t)(intptr_t);
typedef void *(*ucm_dlopen_func_t)(const char *, int);
typedef int (*ucm_dlclose_func_t)(void *);
typedef void *(*ucm_dlmopen_func_t)(Lmid_t, const char *, int);
typedef int (*ucm_ftruncate_func_t)(int, off_t);
typedef int (*ucm_truncate_func_t)(const char *, off_t);
typedef int (*ucm_fallocate_func_t)(int, int, off_t, off_t);
typedef int (*ucm_memfd_create_func_t)(const char *, unsigned);

/* libucm's own equivalents of the originals (no events, no libc code). */
void *ucm_mmap_mremap_raw(void *old_address, size_t old_size, size_t new_size,
                          int flags, ...);
int ucm_mmap_brk_raw(void *addr);
void *ucm_mmap_sbrk_raw(intptr_t increment);

/* Truncation hooks and their raw equivalents (ucm_trunc.c; off_t is 64-bit
 * on LP64, so each also serves the *64 name). */
int ucm_trunc_ftruncate(int fd, off_t length);
int ucm_trunc_truncate(const char *path, off_t length);
int ucm_trunc_fallocate(int fd, int mode, off_t offset, off_t len);
int ucm_trunc_ftruncate_raw(int fd, off_t length);
int ucm_trunc_truncate_raw(const char *path, off_t length);
int ucm_trunc_fallocate_raw(int fd, int mode, off_t offset, off_t len);

/* memfd_create() and its raw equivalent (ucm_memfd.c). */
int ucm_memfd_create(const char *name, unsigned flags);
int ucm_memfd_create_raw(const char *name, unsigned flags);

/* Resolve the original functions (constructor). */
void ucm_mmap_init(void);

/* Install the hooks needed by 'events' (all mmap-family hooks at once) and
 * check that events arrive.  Idempotent; thread-safe; not in hook context. */
ucs_status_t ucm_mmap_install(int events);

/* Install the dlopen/dlclose/dlmopen hooks (reloc) if they are not yet, so
 * that the active GOT patch set is applied to objects loaded later.  Not for
 * hook context. */
ucs_status_t ucm_mmap_install_dl_follow(void);

/* Self-test (see ucm_test_events_detail); 'quick' skips the calls that the
 * requested native events do not name (installation check). */
ucs_status_t ucm_mmap_test_events(int events, int quick, int *failed_p);

/* The install's truncation check (VM_UNMAPPED of a truncated mapped memfd,
 * through the ftruncate hook, if it is ours): a miss is reported as a
 * degradation (ucm_degrade.h), not a failure of the install; *usec_p: its
 * cost. */
void ucm_mmap_test_truncation(double *usec_p);

/* Non-zero if the advice discards the pages of the range. */
int ucm_madvise_discards(int advice);

/* SysV shm address table (lock-free, fixed size). */
void ucm_shm_table_add(const void *addr, size_t size);
void ucm_shm_table_remove(const void *addr);
size_t ucm_shm_size_by_id(int shmid);

/* Serializes installation (taken before the reloc and handler-list locks). */
extern pthread_mutex_t ucm_mmap_install_lock;

#endif
