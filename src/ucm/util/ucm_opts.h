/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ucm_global_opts in the layout of the UCX release this libucm serves.
 *
 * The exported object is UCM_OPTS_OBJECT_SIZE bytes (the largest layout
 * known, 72, with headroom); the object the process uses may be smaller: a
 * copy in an executable that was linked against another libucm (copy
 * relocation, or its own definition).  UCX writes and reads it directly
 * in its release's layout (libucs passes its own copy to
 * ucm_set_global_opts; UCX's modules and gtest read and write fields of
 * the object), so libucm keeps a canonical copy of every option (ucm_opts)
 * and an active layout:
 * - the object in use is a copy of another size: the layout of that size
 *   (48: 1.13, 56: 1.16, 64: 1.18, 72: 1.21/1.22), else the five leading
 *   ints only;
 * - else the layout of the UCX release in the process (ucm_ucx_release),
 *   else 1.13's (this project's ucm.h).
 * The five leading ints (log_level, enable_events, mmap_hook_mode,
 * enable_malloc_hooks, enable_malloc_reloc) are at the same offsets in
 * every layout and are read from the object directly; every other field
 * through ucm_opts_get(), which decodes the active layout (so a direct
 * write by UCX's gtest takes effect) and falls back to the canonical copy
 * for a field the layout lacks.  Nothing is read or written past the
 * active layout's size.  ucm_opts_get() is safe in hook context.
 */
#ifndef UCM_OPTS_H_
#define UCM_OPTS_H_

#include <ucm/api/ucm.h>

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define UCM_OPTS_OBJECT_SIZE 128

/* Every option of every layout; the parser's types (BITMAP is an int). */
typedef struct ucm_opts {
    int log_level;
    int enable_events;
    int mmap_hook_mode;
    int enable_malloc_hooks;
    int enable_malloc_reloc;
    int cuda_hook_modes;
    int enable_dynamic_mmap_thresh;
    size_t alloc_alignment;
    int dlopen_process_rpath;
    int module_unload_prevent_mode;
    int bistro_force_far_jump;
    double bistro_grace_duration;
} ucm_opts_t;

typedef enum ucm_opts_field {
    UCM_OPTS_LOG_LEVEL,
    UCM_OPTS_ENABLE_EVENTS,
    UCM_OPTS_MMAP_HOOK_MODE,
    UCM_OPTS_MALLOC_HOOKS,
    UCM_OPTS_MALLOC_RELOC,
    UCM_OPTS_CUDA_HOOK_MODES,
    UCM_OPTS_DYNAMIC_MMAP_THRESH,
    UCM_OPTS_ALLOC_ALIGNMENT,
    UCM_OPTS_DLOPEN_PROCESS_RPATH,
    UCM_OPTS_UNLOAD_PREVENT_MODE,
    UCM_OPTS_BISTRO_FORCE_FAR_JUMP,
    UCM_OPTS_BISTRO_GRACE_DURATION,
    UCM_OPTS_FIELD_LAST
} ucm_opts_field_t;

typedef enum ucm_opts_layout {
    UCM_OPTS_LAYOUT_COMMON, /* the five leading ints (20 bytes) */
    UCM_OPTS_LAYOUT_1_13,   /* 1.13-1.15: 48 bytes */
    UCM_OPTS_LAYOUT_1_16,   /* 1.16-1.17: + bistro_force_far_jump, 56 */
    UCM_OPTS_LAYOUT_1_18,   /* 1.18-1.20: uint64_t cuda_hook_modes, 64 */
    UCM_OPTS_LAYOUT_1_21,   /* 1.21-1.23: + bistro_grace_duration, 72 */
    UCM_OPTS_LAYOUT_LAST
} ucm_opts_layout_t;

/* Guards ucm_opts and the active layout; not held in hook context.  Taken
 * first by the fork handlers (ucm_init.c). */
extern pthread_mutex_t ucm_opts_lock;

/* The canonical copy (defaults, then UCX_MEM_* by ucm_config_init). */
extern ucm_opts_t ucm_opts;

/* UCX's defaults on x86_64 of the fields that 1.13's layout has, as
 * designated initialisers (ucm_opts_t and ucm_global_config_t name them
 * alike). */
#define UCM_OPTS_DEFAULTS_1_13                                                 \
    .log_level = UCS_LOG_LEVEL_WARN, .enable_events = 1,                       \
    .mmap_hook_mode = UCM_MMAP_HOOK_BISTRO, .enable_malloc_hooks = 1,          \
    .enable_malloc_reloc = 1, .cuda_hook_modes = 1 << UCM_MMAP_HOOK_BISTRO,    \
    .enable_dynamic_mmap_thresh = 1, .alloc_alignment = 16,                    \
    .dlopen_process_rpath = 1, .module_unload_prevent_mode = 0

/* After the environment was parsed into ucm_opts: choose the active layout
 * and write every option into the object in use. */
void ucm_opts_init(void);

/* Field f of the object in use (active layout), or of ucm_opts if the
 * layout lacks it; an int field as its value, a double's bits never (use
 * ucm_opts_get_double). */
uint64_t ucm_opts_get(ucm_opts_field_t f);
double ucm_opts_get_double(ucm_opts_field_t f);

/* Read the object in use back into ucm_opts (fields of the active layout),
 * e.g. before formatting the options.  Not for hook context. */
void ucm_opts_sync(void);

/* The active layout: its name ("1.18", ...) and size; *copy_size_p: size of
 * the object in use when it is not this libucm's (0 when it is). */
ucm_opts_layout_t ucm_opts_active(const char **name_p, size_t *size_p,
                                  size_t *copy_size_p);

#endif
