/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The part of UCX 1.13.1's libucm ABI that is not in ucm/api/ucm.h.
 *
 * UCX installs only ucm/api/ucm.h, but its own components are compiled in
 * its source tree and also call libucm internals (ucm/util/reloc.h,
 * ucm/bistro/bistro.h, ucm/event/event.h, ucm/util/log.h, ...):
 *   - a libucs built with trace logging: ucm_get_page_size;
 *   - the memory-type modules libucm_cuda and libucm_rocm of a GPU build:
 *     __ucm_log, ucm_event_enter/leave/dispatch, ucm_event_installer_list,
 *     ucm_reloc_modify, ucm_reloc_get_orig_lock/thread, ucm_bistro_patch;
 *   - UCX's test suite: ucm_bistro_patch/restore/restore_addr,
 *     ucm_malloc_state_reset, ucm_dlmallopt_get, __ucm_log; its MPI test
 *     resolves ucm_library_init with dlsym.
 * This libucm exports those names with UCX 1.13.1's signatures and struct
 * layouts (checked below), implemented on its own mechanisms; where it
 * differs from UCX, the function's comment says so (and
 * docs/internals-ucm-abi.md says why).  Type names carry "compat" where UCX's
 * name is used by an internal type of this libucm; their layout is UCX's.
 *
 * None of these functions may be called from hook context unless its
 * comment says so.  When one is called by another libucm that defines the
 * same function (UCX's own calls through its PLT, bound to ours because ours
 * came first in the global scope), the call goes to that definition.
 */
#ifndef UCM_COMPAT_H_
#define UCM_COMPAT_H_

#include <ucm/api/ucm.h>
#include <ucs/config/types.h>
#include <ucs/datastruct/list.h>
#include <ucs/type/status.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

BEGIN_C_DECLS

/* ---- logging (ucm/util/log.h) ---- */

/*
 * Write one log line "[pid:tid] file:line UCM LEVEL message" to stderr with
 * one write(2): no malloc, no lock, usable in hook context.  As in UCX, the
 * caller filters by level (UCX's ucm_log() macros compare with
 * ucm_global_opts.log_level before calling); this function writes whatever
 * it is given.  UCS_LOG_LEVEL_FATAL writes, then calls abort().  Formats:
 * those of UCX's libucm (%s %d %u %x %p %c %m %%, flags '-' '+' '0', a
 * width, the l/ll/z modifiers); a line is truncated at 512 bytes.
 * Differs from UCX: UCX writes to stdout with a host name and timestamp.
 */
void __ucm_log(const char *file, unsigned line, const char *function,
               ucs_log_level_t level, const char *message, ...)
    UCS_F_PRINTF(5, 6);

/* ---- system (ucm/util/sys.h) ---- */

/* sysconf(_SC_PAGESIZE), cached (4096 if sysconf fails).  Hook context:
 * yes. */
size_t ucm_get_page_size(void);

/* UCX: one-time set-up of libucm.  Here the set-up runs when the library is
 * loaded, so this does nothing and may be called any number of times. */
void ucm_library_init(void);

/* ---- events (ucm/event/event.h) ---- */

/* UCX's ucm_event_handler_t, as given to an installer's get_existing_alloc:
 * 'events' are the handler's events (no UCM_EVENT_FLAG_*). */
typedef struct ucm_compat_event_handler {
    ucs_list_link_t list; /* not linked to any list here */
    int events;
    int priority;
    ucm_event_callback_t cb;
    void *arg;
} ucm_compat_event_handler_t;

/* UCX's ucm_event_installer_t: a module (libucm_cuda, libucm_rocm) adds one
 * to ucm_event_installer_list when it is loaded (ucs_list_add_tail from its
 * constructor) and removes it when unloaded. */
typedef struct ucm_compat_event_installer {
    /* Called by ucm_set_event_handler() (unless UCM_EVENT_FLAG_NO_INSTALL),
     * after the mmap hooks are installed, with the handler's events minus
     * those declared external; a status other than UCS_OK fails the
     * ucm_set_event_handler() call with it. */
    ucs_status_t (*install)(int events);
    /* Called once per installer after a handler set with
     * UCM_EVENT_FLAG_EXISTING_ALLOC is in place: report the allocations that
     * exist by calling handler->cb (no libucm lock is held). */
    void (*get_existing_alloc)(ucm_compat_event_handler_t *handler);
    ucs_list_link_t list;
} ucm_compat_event_installer_t;

/* Head of the installers (statically initialized empty).  Modules link
 * themselves in without a lock, as in UCX: add or remove installers only
 * from library constructors and destructors. */
extern ucs_list_link_t ucm_event_installer_list;

/*
 * Enter / leave an event section (nestable, async-signal-safe, never
 * blocks).  ucm_unset_event_handler() does not return while another thread
 * is inside a section that may still call the removed handler.  Differs
 * from UCX: UCX takes a read lock that also blocks handler *addition* and
 * ucm_set_external_event(); here only removal waits.
 */
void ucm_event_enter(void);
void ucm_event_leave(void);

/*
 * Call every handler of event_type in priority order.  For a native event
 * (MMAP, MUNMAP, MREMAP, SHMAT, SHMDT, SBRK, BRK, MADVISE) the original
 * function is called between the handlers of negative and of non-negative
 * priority when the event's result still holds the failure value (MAP_FAILED
 * or -1), as UCX's own handler at priority 0 does.  Hook context: yes (takes
 * its own event section).
 */
void ucm_event_dispatch(ucm_event_type_t event_type, ucm_event_t *event);

/* ---- GOT/PLT patching (ucm/util/reloc.h, ucm/util/replace.h) ---- */

/* UCX's ucm_reloc_patch_t. */
typedef struct ucm_compat_reloc_patch {
    const char *symbol; /* in */
    void *value;        /* in: written into the slots */
    void *prev_value;   /* out: what the slots held before (see below) */
    ucs_list_link_t list;
    char **blacklist; /* in: NULL-terminated substrings of object names
                         whose slots are left alone, or NULL */
} ucm_compat_reloc_patch_t;

/*
 * Write patch->value into every GOT/PLT slot (and unchanged function pointer
 * in initialized data) that names patch->symbol, in every loaded object and
 * in every object loaded later (dlopen/dlmopen are followed), except in
 * objects whose name contains a blacklist entry.  The patch and its
 * blacklist belong to libucm afterwards: they must stay valid (static data
 * of a module that is never unloaded).  prev_value: the function found in a
 * slot that another hooker had taken, else the global definition of the
 * symbol (dlsym(RTLD_DEFAULT)), if any.  UCS_OK; UCS_ERR_INVALID_PARAM
 * (NULL patch, symbol or value); UCS_ERR_EXCEEDS_LIMIT (libucm's patch table
 * is full).  Differs from UCX: a second patch of the same symbol with
 * another value does not take slots already patched by the first.
 */
ucs_status_t ucm_reloc_modify(ucm_compat_reloc_patch_t *patch);

/* Serialize the modules' look-ups of original functions (recursive mutex)
 * and name the thread doing one ((pthread_t)-1: none): UCX's replacement
 * functions return their failure value on that thread. */
extern pthread_mutex_t ucm_reloc_get_orig_lock;
extern pthread_t volatile ucm_reloc_get_orig_thread;

/* UCX's ucm_reloc_get_orig(): the definition of 'symbol' after the calling
 * object (RTLD_NEXT), else the global one; a fatal error if that is the
 * replacement itself.  Inline, as in UCX: RTLD_NEXT is relative to the
 * object that calls it. */
static inline UCS_F_MAYBE_UNUSED void *ucm_reloc_get_orig(const char *symbol,
                                                          void *replacement)
{
    const char *error;
    void *func;

    func = dlsym(RTLD_NEXT, symbol);
    if (func == NULL) {
        (void)dlerror();
        func = dlsym(RTLD_DEFAULT, symbol);
        if (func == replacement) {
            error = dlerror();
            __ucm_log(__FILE__, __LINE__, __func__, UCS_LOG_LEVEL_FATAL,
                      "no original %s() besides the replacement: %s", symbol,
                      (error != NULL) ? error : "not found");
        }
    }
    return func;
}

/* ---- entry patching (ucm/bistro/bistro.h) ---- */

/* Opaque, as in UCX. */
typedef struct ucm_bistro_restore_point ucm_bistro_restore_point_t;

/*
 * Make every call of the function at func_ptr go to hook, by rewriting the
 * function's entry.  orig_func_p (if not NULL): set to code that runs the
 * original function (UCS_ERR_UNSUPPORTED if that cannot be built).  rp (if
 * not NULL): set to a restore point for ucm_bistro_restore().  'symbol' is
 * for log lines only.  The entry is rewritten with one atomic store of its
 * first instruction when that is long enough or padding is in reach (see
 * ucm/bistro/ucm_bistro.h); else, as UCX does, the whole instructions under
 * a 5-byte jump are displaced (a plain copy: not safe against a thread
 * running them at that moment); when none of that is possible and no
 * original is asked for, the first 5 or 13 bytes are overwritten.  UCS_OK;
 * UCS_ERR_INVALID_PARAM (NULL func_ptr or hook); UCS_ERR_UNSUPPORTED;
 * UCS_ERR_NO_MEMORY (no free restore point: at most UCM_BISTRO_RESTORE_POINTS
 * exist at a time).  x86_64 only.
 */
#define UCM_BISTRO_RESTORE_POINTS 64
ucs_status_t ucm_bistro_patch(void *func_ptr, void *hook, const char *symbol,
                              void **orig_func_p,
                              ucm_bistro_restore_point_t **rp);

/* Write back the entry bytes saved in rp (undoing any later patch of the
 * same bytes) and release rp.  UCS_OK, or UCS_ERR_INVALID_PARAM (NULL rp,
 * or the text cannot be made writable: rp is kept). */
ucs_status_t ucm_bistro_restore(ucm_bistro_restore_point_t *rp);

/* The patched function's address (func_ptr of ucm_bistro_patch). */
void *ucm_bistro_restore_addr(ucm_bistro_restore_point_t *rp);

/* ---- UCX's malloc (ucm/malloc/malloc_hook.h, ptmalloc286) ---- */

/*
 * UCX replaces malloc with its own allocator (in reloc mode); this libucm
 * does not, so the parameters are glibc's.  In reloc mode
 * ucm_malloc_state_reset() sets glibc's mmap and trim thresholds with
 * mallopt() (values < 0 leave one unchanged), then applies
 * MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_ from the environment as
 * UCX does; mallopt() ends glibc's dynamic thresholds, which libucm then
 * emulates while UCX_MEM_DYNAMIC_MMAP_THRESH is yes.  In bistro mode glibc's
 * malloc is left as it is (UCX's reset touches only its own allocator, which
 * bistro mode does not use): the values are only recorded.
 * ucm_dlmallopt_get(M_MMAP_THRESHOLD / M_TRIM_THRESHOLD / M_GRANULARITY =
 * -3 / -1 / -2): the last value set through ucm_malloc_state_reset, else the
 * one glibc started with (GLIBC_TUNABLES, MALLOC_*_THRESHOLD_, or its
 * default 128 KiB), which glibc's dynamic threshold may since have raised;
 * M_GRANULARITY: the page size; any other parameter: 0.
 */
void ucm_malloc_state_reset(int default_mmap_thresh, int default_trim_thresh);
int ucm_dlmallopt_get(int param_number);

/* ---- layout checks (UCX 1.13.1, x86_64) ---- */

#ifdef __cplusplus
#define UCM_COMPAT_ASSERT(_cond) static_assert(_cond, #_cond)
#else
#define UCM_COMPAT_ASSERT(_cond) _Static_assert(_cond, #_cond)
#endif
UCM_COMPAT_ASSERT(sizeof(ucs_list_link_t) == 16);
UCM_COMPAT_ASSERT(offsetof(ucm_compat_event_handler_t, events) == 16);
UCM_COMPAT_ASSERT(offsetof(ucm_compat_event_handler_t, priority) == 20);
UCM_COMPAT_ASSERT(offsetof(ucm_compat_event_handler_t, cb) == 24);
UCM_COMPAT_ASSERT(offsetof(ucm_compat_event_handler_t, arg) == 32);
UCM_COMPAT_ASSERT(sizeof(ucm_compat_event_handler_t) == 40);
UCM_COMPAT_ASSERT(offsetof(ucm_compat_event_installer_t, install) == 0);
UCM_COMPAT_ASSERT(offsetof(ucm_compat_event_installer_t, get_existing_alloc) ==
                  8);
UCM_COMPAT_ASSERT(offsetof(ucm_compat_event_installer_t, list) == 16);
UCM_COMPAT_ASSERT(sizeof(ucm_compat_event_installer_t) == 32);
UCM_COMPAT_ASSERT(offsetof(ucm_compat_reloc_patch_t, value) == 8);
UCM_COMPAT_ASSERT(offsetof(ucm_compat_reloc_patch_t, prev_value) == 16);
UCM_COMPAT_ASSERT(offsetof(ucm_compat_reloc_patch_t, list) == 24);
UCM_COMPAT_ASSERT(offsetof(ucm_compat_reloc_patch_t, blacklist) == 40);
UCM_COMPAT_ASSERT(sizeof(ucm_compat_reloc_patch_t) == 48);
/* ucm_event_t of UCX 1.13, 1.18 and 1.22: one size; the fields 1.15 and
 * 1.22 added sit where 1.13 had padding or nothing */
UCM_COMPAT_ASSERT(sizeof(ucm_event_t) == 48);
UCM_COMPAT_ASSERT(offsetof(ucm_event_t, mremap.flags) == 32);
UCM_COMPAT_ASSERT(offsetof(ucm_event_t, mremap.new_address) == 40);
UCM_COMPAT_ASSERT(offsetof(ucm_event_t, mem_type.mem_type) == 16);
UCM_COMPAT_ASSERT(offsetof(ucm_event_t, mem_type.sys_dev) == 20);
UCM_COMPAT_ASSERT(offsetof(ucm_event_t, mem_type.mem_flags) == 21);
#undef UCM_COMPAT_ASSERT

END_C_DECLS

#endif
