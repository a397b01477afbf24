/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCM: memory-event hooks.  Public API and ABI of UCX 1.13's ucm/api/ucm.h,
 * so that a stock UCX or Open MPI built against UCX 1.13 runs on this
 * libucm.so.0 unchanged.
 *
 * Events are delivered to handlers, in priority order, from inside the hooked
 * call ("hook context").  A handler must not block on a lock that another
 * hooked call may hold, and must be async-signal-safe if the application
 * unmaps memory from signal handlers.  VM_UNMAPPED is delivered before the
 * pages go away; VM_MAPPED after the mapping exists.
 */
#ifndef UCM_H_
#define UCM_H_

#include <ucs/sys/compiler_def.h>

BEGIN_C_DECLS

#include <ucs/config/types.h>
#include <ucs/memory/memory_type.h>
#include <ucs/type/status.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* Event types (bit values are ABI). */
/* mem_type.sys_dev of an event whose device is not known (UCX's
 * UCS_SYS_DEVICE_ID_UNKNOWN). */
#define UCM_EVENT_SYS_DEV_UNKNOWN UINT8_MAX

typedef enum ucm_event_type {
    UCM_EVENT_NONE = 0,
    /* Native events: one per hooked call, with its arguments and result */
    UCM_EVENT_MMAP    = UCS_BIT(0),
    UCM_EVENT_MUNMAP  = UCS_BIT(1),
    UCM_EVENT_MREMAP  = UCS_BIT(2),
    UCM_EVENT_SHMAT   = UCS_BIT(3),
    UCM_EVENT_SHMDT   = UCS_BIT(4),
    UCM_EVENT_SBRK    = UCS_BIT(5),
    UCM_EVENT_MADVISE = UCS_BIT(6),
    UCM_EVENT_BRK     = UCS_BIT(7),
    /* Aggregate events: what happened to the address space */
    UCM_EVENT_VM_MAPPED   = UCS_BIT(16),
    UCM_EVENT_VM_UNMAPPED = UCS_BIT(17),
    /* Memory of a non-host type was allocated or released */
    UCM_EVENT_MEM_TYPE_ALLOC = UCS_BIT(20),
    UCM_EVENT_MEM_TYPE_FREE  = UCS_BIT(21),
    /* Flags for ucm_set_event_handler() */
    UCM_EVENT_FLAG_NO_INSTALL = UCS_BIT(24), /* add handler, install nothing */
    UCM_EVENT_FLAG_EXISTING_ALLOC =
        UCS_BIT(25) /* report existing allocations */
} ucm_event_type_t;

/* Values of UCX_MEM_MMAP_HOOK_MODE (index into ucm_mmap_hook_modes[]). */
typedef enum ucm_mmap_hook_mode {
    UCM_MMAP_HOOK_NONE,
    UCM_MMAP_HOOK_RELOC,  /* patch GOT/PLT slots of every loaded object */
    UCM_MMAP_HOOK_BISTRO, /* patch the entry of the libc functions */
    UCM_MMAP_HOOK_LAST
} ucm_mmap_hook_mode_t;

typedef enum ucm_module_unload_prevent_mode {
    UCM_UNLOAD_PREVENT_MODE_LAZY,
    UCM_UNLOAD_PREVENT_MODE_NOW,
    UCM_UNLOAD_PREVENT_MODE_NONE,
    UCM_UNLOAD_PREVENT_MODE_LAST
} ucm_module_unload_prevent_mode_t;

/* Event payload; the member matching the event type is valid.  Handlers
 * called before the original function (priority < 0) may change arguments or
 * set the result; handlers called after it see the result. */
typedef union ucm_event {
    struct {
        void *result;
        void *address;
        size_t size;
        int prot;
        int flags;
        int fd;
        off_t offset;
    } mmap;

    struct {
        int result;
        void *address;
        size_t size;
    } munmap;

    struct {
        void *result;
        void *address;
        size_t old_size;
        size_t new_size;
        int flags;
        void *new_address; /* UCX 1.15+: the target of MREMAP_FIXED, else
                              NULL (in the union's size of 1.13) */
    } mremap;

    struct {
        void *result;
        int shmid;
        const void *shmaddr;
        int shmflg;
    } shmat;

    struct {
        int result;
        const void *shmaddr;
    } shmdt;

    struct {
        void *result;
        intptr_t increment;
    } sbrk;

    struct {
        int result;
        void *addr;
        size_t length;
        int advice;
    } madvise;

    struct {
        int result;
        void *addr;
    } brk;

    struct {
        void *address;
        size_t size;
    } vm_mapped, vm_unmapped;

    struct {
        void *address;
        size_t size;
        ucs_memory_type_t mem_type;
        /* UCX 1.22+ (in the union's size of 1.13): the device (UCX's
         * ucs_sys_device_t; UCM_EVENT_SYS_DEV_UNKNOWN when not known) and
         * attribute flags (0: none known); our producers set both so */
        uint8_t sys_dev;
        uint8_t mem_flags;
    } mem_type;
} ucm_event_t;

/* Global options; layout is ABI (48 bytes on x86_64, UCX 1.13). */
typedef struct ucm_global_config {
    ucs_log_level_t log_level;
    int enable_events;
    ucm_mmap_hook_mode_t mmap_hook_mode;
    int enable_malloc_hooks;
    int enable_malloc_reloc;
    int cuda_hook_modes; /* bitmap of hook modes */
    int enable_dynamic_mmap_thresh;
    size_t alloc_alignment;
    int dlopen_process_rpath;
    int module_unload_prevent_mode;
} ucm_global_config_t;

/* Current options: defaults, then UCX_MEM_* at load, then
 * ucm_set_global_opts(). */
extern ucm_global_config_t ucm_global_opts;

/* NULL-terminated names of log levels and of hook modes (parsed by libucs). */
extern const char *ucm_log_level_names[];
extern const char *ucm_mmap_hook_modes[];

/* Handler: called in hook context with the event type and payload. */
typedef void (*ucm_event_callback_t)(ucm_event_type_t event_type,
                                     ucm_event_t *event, void *arg);

/* Callback of ucm_parse_proc_self_maps(); return non-zero to stop. */
typedef int (*ucm_proc_maps_cb_t)(void *arg, void *addr, size_t length,
                                  int prot, const char *path);

/* Replace the global options (copied).  Call before the first handler. */
void ucm_set_global_opts(const ucm_global_config_t *ucm_opts);

/*
 * Add a handler for a bit mask of events (plus UCM_EVENT_FLAG_*), installing
 * the hooks the events need.  priority < 0: called before the original call,
 * >= 0 after it; lower values first.
 * Returns UCS_OK; UCS_ERR_UNSUPPORTED if events are disabled
 * (UCX_MEM_EVENTS=n, hook mode none) or the hooks could not be installed and
 * tested; UCS_ERR_INVALID_PARAM for a NULL callback or no event bit;
 * UCS_ERR_NO_MEMORY.  Not callable from hook context.
 */
ucs_status_t ucm_set_event_handler(int events, int priority,
                                   ucm_event_callback_t cb, void *arg);

/*
 * Remove the events from every handler matching (cb, arg).  When it returns,
 * no other thread is still running the removed handler and it will not be
 * called again.  Not callable from hook context of the same handler.
 */
void ucm_unset_event_handler(int events, ucm_event_callback_t cb, void *arg);

/* Declare that someone else delivers these events (through ucm_vm_mmap /
 * ucm_vm_munmap): ucm_set_event_handler() then installs no hooks for them. */
void ucm_set_external_event(int events);
void ucm_unset_external_event(int events);

/* Perform the calls behind each requested event and check that the installed
 * handlers see them.  UCS_OK, or UCS_ERR_UNSUPPORTED naming the failing event
 * in the log. */
ucs_status_t ucm_test_events(int events);

/* Same check for events declared external. */
ucs_status_t ucm_test_external_events(int events);

/* The original functions: never raise events. */
void *ucm_orig_mmap(void *addr, size_t length, int prot, int flags, int fd,
                    off_t offset);
int ucm_orig_munmap(void *addr, size_t length);
/* mremap's: new_address is read only with MREMAP_FIXED (UCX 1.15+ passes it
 * as a fifth argument, 1.13 had four). */
void *ucm_orig_mremap(void *old_address, size_t old_size, size_t new_size,
                      int flags, ...);
void *ucm_orig_shmat(int shmid, const void *shmaddr, int shmflg);
int ucm_orig_shmdt(const void *shmaddr);
void *ucm_orig_sbrk(intptr_t increment);
int ucm_orig_brk(void *addr);
int ucm_orig_madvise(void *addr, size_t length, int advice);

/* The hooked functions: raise events, then call the original. */
void *ucm_mmap(void *addr, size_t length, int prot, int flags, int fd,
               off_t offset);
int ucm_munmap(void *addr, size_t length);
void *ucm_mremap(void *old_address, size_t old_size, size_t new_size, int flags,
                 ...);
void *ucm_shmat(int shmid, const void *shmaddr, int shmflg);
int ucm_shmdt(const void *shmaddr);
void *ucm_sbrk(intptr_t increment);
int ucm_brk(void *addr);
int ucm_madvise(void *addr, size_t length, int advice);
void *ucm_dlopen(const char *filename, int flag);

/* Deliver VM_MAPPED / VM_UNMAPPED from an external source (e.g. Open MPI's
 * patcher).  Safe in hook context. */
void ucm_vm_mmap(void *addr, size_t length);
void ucm_vm_munmap(void *addr, size_t length);

/* Walk /proc/self/maps without allocating memory. */
void ucm_parse_proc_self_maps(ucm_proc_maps_cb_t cb, void *arg);

END_C_DECLS

#endif
