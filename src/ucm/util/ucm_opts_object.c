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

__attribute__((aligned(16)))
ucm_opts_object_t ucm_global_opts = {.v1_13 = {UCM_OPTS_DEFAULTS_1_13}};

/* this libucm's own object, whichever one the process uses */
extern unsigned char ucm_opts_own_object[UCM_OPTS_OBJECT_SIZE]
    __attribute__((alias("ucm_global_opts"), visibility("hidden")));
