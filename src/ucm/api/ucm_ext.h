/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Extensions of this libucm beyond UCX 1.13's API (additions only; nothing
 * of ucm.h changes).  Used by the info tool, the benchmark and the tests.
 */
#ifndef UCM_EXT_H_
#define UCM_EXT_H_

#include <ucm/api/ucm.h>

BEGIN_C_DECLS

/* How one hooked function is intercepted. */
typedef enum ucm_hook_state {
    UCM_HOOK_STATE_NONE,   /* not installed (yet) */
    UCM_HOOK_STATE_RELOC,  /* GOT/PLT slots */
    UCM_HOOK_STATE_BISTRO, /* entry of the libc function */
    UCM_HOOK_STATE_FAILED  /* could not be installed */
} ucm_hook_state_t;

typedef struct ucm_hook_info {
    const char *symbol; /* "munmap", ... */
    ucm_hook_state_t state;
    int events;         /* UCM_EVENT_* that need this hook */
    const char *detail; /* why it failed / fell back, or "" */
} ucm_hook_info_t;

/* Fill up to max entries; returns the total number of hooked functions. */
unsigned ucm_hooks_query(ucm_hook_info_t *infos, unsigned max);

/* Hook mode actually in effect (UCM_MMAP_HOOK_NONE before installation). */
ucm_mmap_hook_mode_t ucm_hooks_installed_mode(void);

/* Install the mmap-family hooks now (normally done by the first
 * ucm_set_event_handler()).  UCS_ERR_UNSUPPORTED if events are disabled. */
ucs_status_t ucm_hooks_install(void);

/* Microseconds the installation took (0 before). */
double ucm_hooks_install_time_usec(void);

/* Like ucm_test_events(), but reports which of the requested events did not
 * arrive in *failed_p (0 if all did).  Does not log. */
ucs_status_t ucm_test_events_detail(int events, int *failed_p);

/* Configuration entry 'index' (0..): name without "UCX_" prefix, current
 * value formatted into value[max], and help text.  -1 past the end. */
int ucm_config_get(unsigned index, const char **name_p, char *value, size_t max,
                   const char **doc_p);

/* Deliver MEM_TYPE_ALLOC / MEM_TYPE_FREE (memory-type hooks). */
void ucm_dispatch_mem_type_alloc(void *addr, size_t length,
                                 ucs_memory_type_t mem_type);
void ucm_dispatch_mem_type_free(void *addr, size_t length,
                                ucs_memory_type_t mem_type);

/* A module that knows allocations made before a handler was set (libucm_cuda:
 * the live CUDA allocations it recorded) adds a report function here.  When
 * ucm_set_event_handler() adds a handler of UCM_EVENT_MEM_TYPE_ALLOC with
 * UCM_EVENT_FLAG_EXISTING_ALLOC, every source's report(cb, arg) is called
 * once, after the handler is in place, and calls cb(UCM_EVENT_MEM_TYPE_ALLOC,
 * event, arg) for each allocation it knows (that handler only).  An
 * allocation freed while its report runs may reach cb after its FREE event.
 * Adding the same function again is a no-op.  UCS_ERR_EXCEEDS_LIMIT past
 * UCM_EXISTING_ALLOC_SOURCES sources, UCS_ERR_INVALID_PARAM for NULL.  Not
 * for hook context; report runs with no libucm lock held. */
#define UCM_EXISTING_ALLOC_SOURCES 8
typedef void (*ucm_existing_alloc_report_t)(ucm_event_callback_t cb, void *arg);
ucs_status_t ucm_existing_alloc_source_add(ucm_existing_alloc_report_t report);

/* Size of the SysV segment attached at addr (own table, IPC_STAT, then
 * /proc/self/maps), 0 if none.  Safe in hook context. */
size_t ucm_shm_seg_size(const void *addr);

/* One function to intercept through the GOT/PLT slots that name it. */
typedef struct ucm_got_patch {
    const char *symbol; /* e.g. "cudaMalloc" */
    void *hook;         /* written into the slots */
    void *real;         /* the real function (what an untouched slot holds) */
    void *foreign;      /* out: another hooker's function found in a slot
                           (the hook should call it instead of ->real), or
                           NULL */
} ucm_got_patch_t;

/* Write each ->hook into every GOT/PLT slot (JUMP_SLOT, GLOB_DAT, unchanged
 * data pointers) that names ->symbol in every loaded object, and keep doing
 * so for objects loaded later (dlopen/dlmopen are followed; applying the
 * same patch again is harmless).  *written_p (if not NULL): slots written by
 * this call.  UCS_ERR_EXCEEDS_LIMIT if libucm's patch table is full,
 * UCS_ERR_INVALID_PARAM on NULL fields.  Thread-safe; not for hook context.
 * The module holding ->hook must never be unloaded (link it -z nodelete). */
ucs_status_t ucm_got_patch_apply(ucm_got_patch_t *patches, unsigned count,
                                 unsigned long *written_p);

/* userfaultfd monitor of subscribed ranges (UCX_MEM_UFFD, src/ucm/uffd).
 * Subscribed ranges are registered with a userfaultfd; every unmap of them
 * the kernel reports (raw syscalls, the loader, mremap, madvise DONTNEED)
 * is dispatched as UCM_EVENT_VM_UNMAPPED for exactly that range, after the
 * unmap, from libucm's dispatcher thread, in addition to what the hooks
 * report; handlers may take locks there (the thread that reads the kernel's
 * reports never waits for them).  Not for hook context (these functions
 * take a mutex and make system calls). */
typedef enum ucm_uffd_mode {
    UCM_UFFD_MODE_NO,  /* never */
    UCM_UFFD_MODE_TRY, /* when the kernel allows it, else hooks only */
    UCM_UFFD_MODE_YES  /* required: ucm_uffd_start() fails without it */
} ucm_uffd_mode_t;

typedef struct ucm_uffd_info {
    int mode;                  /* ucm_uffd_mode_t in effect */
    int active;                /* monitor running in this process */
    char reason[160];          /* why not active (or what is active) */
    uint64_t features;         /* UFFD_FEATURE_* negotiated */
    size_t grain;              /* UCX_MEM_UFFD_GRAIN in effect */
    unsigned long spans;       /* registered spans (also idle ones) */
    unsigned long registers;   /* UFFDIO_REGISTER calls that succeeded */
    unsigned long dedups;      /* subscriptions inside a registered span */
    unsigned long unsupported; /* subscriptions refused: kind of mapping */
    unsigned long busy;        /* subscriptions refused: another uffd */
    unsigned long events;      /* unmap/remove/remap events dispatched */
    unsigned long faults;      /* missing-page faults resolved */
    /* VMA budget (UCX_MEM_UFFD_VMA_SHARE; 0 until the monitor started): */
    unsigned long max_map_count; /* vm.max_map_count read at start */
    unsigned long vma_budget;    /* most VMAs the spans may cost */
    unsigned long vma_use;       /* what the spans may cost now */
    unsigned long over_budget;   /* subscriptions refused at the budget */
} ucm_uffd_info_t;

/* Start the monitor (idempotent; again in a forked child).  *active_p: 1 if
 * it runs.  UCS_OK also when it does not run under UCX_MEM_UFFD=no/try (one
 * log line says why); under yes, UCS_ERR_UNSUPPORTED then. */
ucs_status_t ucm_uffd_start(int *active_p);

/* Have [addr, addr+len) (widened to pages, all mapped) reported; *token_p
 * identifies the subscription for ucm_uffd_unsubscribe().  Errors (the
 * caller then relies on the hooks): UCS_ERR_EXCEEDS_LIMIT: a new span
 * would pass the VMA budget (UCX_MEM_UFFD_VMA_SHARE; one WARN line per
 * process), UCS_ERR_UNSUPPORTED: monitor not
 * running or mapping kind not supported (file-backed...), UCS_ERR_BUSY:
 * another userfaultfd owns a page of it, UCS_ERR_INVALID_ADDR: part of it
 * is not mapped.  A subscription inside a registered span costs no system
 * call, and none inside the span the last one found, while no span changed
 * since, takes the lock (nor is counted in the span's count). */
ucs_status_t ucm_uffd_subscribe(void *addr, size_t len, uint64_t *token_p);

/* The same, and on success [*span_start_p, *span_end_p): the registered
 * span the range lies in.  Its pages stay reported until they are unmapped
 * and every unmap of a part of it is dispatched as VM_UNMAPPED, so a
 * caller that has handled no VM_UNMAPPED intersecting the span since the
 * call may take ranges inside it as reported without calling again (such
 * ranges have no token and are not counted in the span). */
ucs_status_t ucm_uffd_subscribe_span(void *addr, size_t len, uint64_t *token_p,
                                     uintptr_t *span_start_p,
                                     uintptr_t *span_end_p);

/* Drop one subscription (same range, its token).  The pages stay
 * registered (idle) until they are unmapped: their unmaps are still
 * reported (an unmap no hook sees costs a monitor round trip; a hooked one
 * takes its range out of the registration first), and a new subscription
 * there costs no system call. */
void ucm_uffd_unsubscribe(void *addr, size_t len, uint64_t token);

/* Nonzero while the monitor dispatches events it has read: a thread whose
 * unmap was just reported may resume before the handlers ran.  Lookups
 * that must not see stale entries call ucm_uffd_drain_wait() then (yields
 * until the dispatch is over; returns at once on libucm's own threads). */
extern volatile unsigned ucm_uffd_draining;
void ucm_uffd_drain_wait(void);

/* State and counters. */
void ucm_uffd_query(ucm_uffd_info_t *info);

/* Tools and tests: mode used by the next start (a running monitor keeps
 * running); register_missing 1 registers in MISSING mode (faults on
 * missing pages resolved with zero pages) instead of write-protect mode
 * (which never faults); grain: UCX_MEM_UFFD_GRAIN for the next
 * registrations (0 keeps it).  UCS_ERR_INVALID_PARAM on a bad mode. */
ucs_status_t ucm_uffd_configure(int mode, int register_missing, size_t grain);

/* Tools and tests: UCX_MEM_UFFD_VMA_SHARE from now on (a fraction of
 * vm.max_map_count in (0, 1]; spans already registered stay).
 * UCS_ERR_INVALID_PARAM otherwise.  Not for hook context (reads /proc). */
ucs_status_t ucm_uffd_configure_budget(double share);

/* The UCX release whose libucs/libucp is loaded in this process.  UCS_OK:
 * *major.*minor.*patch and *how (a static string naming the method:
 * "ucp_get_version" gives the full release; "libucs exports" gives
 * major.minor from the functions the release's libucs exports, patch 0).
 * UCS_ERR_NO_ELEM: no UCX libucs or libucp is loaded (this project's libucs
 * is not UCX's).  UCS_ERR_UNSUPPORTED: a UCX libucs is loaded but its
 * release cannot be told (older than 1.13, no libucp).  Outputs are written
 * only on UCS_OK; any of them may be NULL.  The result is kept until
 * another object is loaded (a found release for good).  Thread-safe and
 * callable from a constructor; not for hook context (takes a mutex).
 * docs/internals-ucm-abi.md, "Which UCX is running". */
ucs_status_t ucm_ucx_release(unsigned *major, unsigned *minor, unsigned *patch,
                             const char **how);

/* How this libucm lays out ucm_global_opts now (the UCX release it serves,
 * or the size of the object the process uses; docs/internals-ucm-abi.md,
 * "ucm_global_opts"): returns the layout's size (48: UCX 1.13-1.15, 56:
 * 1.16-1.17, 64: 1.18-1.20, 72: 1.21-1.23, 20: the five leading ints only),
 * *layout_p its first release ("1.18", or "common"), *object_size_p the
 * size of the object in use (this libucm's, or an executable's copy).  Any
 * output may be NULL. */
size_t ucm_global_opts_layout(const char **layout_p, size_t *object_size_p);

/* Mechanisms that are on by default but cannot do their job in this
 * process (docs/tuning.md, "Degraded"); each was logged once as a WARN line.
 * Fills up to max entries (infos may be NULL); returns how many there are.
 * The strings are libucm's and stay valid.  Safe in hook context. */
#define UCM_DEGRADE_WHAT_MAX 200
typedef struct ucm_degraded_info {
    const char *mechanism; /* "procmaps", "descriptors", "truncation",
                              "userfaultfd", "heap" */
    int err;               /* the errno behind it, or 0 */
    const char *what;      /* the WARN line: what is not caught, and why */
} ucm_degraded_info_t;

unsigned ucm_degraded_query(ucm_degraded_info_t *infos, unsigned max);

END_C_DECLS

#endif
