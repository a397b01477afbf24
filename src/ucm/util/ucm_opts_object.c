/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The exported ucm_global_opts: UCM_OPTS_OBJECT_SIZE bytes, larger than
 * any UCX release's ucm_global_config_t (ucm_opts.h), so that no UCX that
 * copies or writes its own layout into it reaches past it.  ucm.h declares
 * it with 1.13's type; this file alone sees it as the larger object (the
 * declaration of ucm.h is renamed away here).  Its initial bytes are 1.13's
 * defaults; ucm_opts_init() rewrites it in the active layout at load.
 */
#define ucm_global_opts ucm_global_opts_declared_in_ucm_h
#include "ucm_opts.h"
#undef ucm_global_opts

typedef union {
    ucm_global_config_t v1_13;
    unsigned char bytes[UCM_OPTS_OBJECT_SIZE];
} ucm_opts_object_t;

_Static_assert(sizeof(ucm_opts_object_t) == UCM_OPTS_OBJECT_SIZE,
               "object size");

__attribute__((aligned(16))) ucm_opts_object_t ucm_global_opts = {
    .v1_13 = {.log_level                  = UCS_LOG_LEVEL_WARN,
              .enable_events              = 1,
              .mmap_hook_mode             = UCM_MMAP_HOOK_BISTRO,
              .enable_malloc_hooks        = 1,
              .enable_malloc_reloc        = 1,
              .cuda_hook_modes            = 1 << UCM_MMAP_HOOK_BISTRO,
              .enable_dynamic_mmap_thresh = 1,
              .alloc_alignment            = 16,
              .dlopen_process_rpath       = 1,
              .module_unload_prevent_mode = 0}};

/* this libucm's own object, whichever one the process uses */
extern unsigned char ucm_opts_own_object[UCM_OPTS_OBJECT_SIZE]
    __attribute__((alias("ucm_global_opts"), visibility("hidden")));
