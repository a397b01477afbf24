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
    UCM_HOOK_STATE_NONE,    /* not installed (yet) */
    UCM_HOOK_STATE_RELOC,   /* GOT/PLT slots */
    UCM_HOOK_STATE_BISTRO,  /* entry of the libc function */
    UCM_HOOK_STATE_FAILED   /* could not be installed */
} ucm_hook_state_t;

typedef struct ucm_hook_info {
    const char       *symbol;   /* "munmap", ... */
    ucm_hook_state_t state;
    int              events;    /* UCM_EVENT_* that need this hook */
    const char       *detail;   /* why it failed / fell back, or "" */
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
int ucm_config_get(unsigned index, const char **name_p, char *value,
                   size_t max, const char **doc_p);

/* Deliver MEM_TYPE_ALLOC / MEM_TYPE_FREE (memory-type hooks). */
void ucm_dispatch_mem_type_alloc(void *addr, size_t length,
                                 ucs_memory_type_t mem_type);
void ucm_dispatch_mem_type_free(void *addr, size_t length,
                                ucs_memory_type_t mem_type);

/* Size of the SysV segment attached at addr (own table, IPC_STAT, then
 * /proc/self/maps), 0 if none.  Safe in hook context. */
size_t ucm_shm_seg_size(const void *addr);

/* One function to intercept through the GOT/PLT slots that name it. */
typedef struct ucm_got_patch {
    const char *symbol;  /* e.g. "cudaMalloc" */
    void       *hook;    /* written into the slots */
    void       *real;    /* the real function (what an untouched slot holds) */
    void       *foreign; /* out: another hooker's function found in a slot
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

END_C_DECLS

#endif
