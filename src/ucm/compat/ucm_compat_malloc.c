/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX 1.13.1's malloc-state functions over glibc's malloc; see
 * ucm/api/ucm_compat.h.
 *
 * UCX's libucm carries its own allocator (ptmalloc 2.8.6 behind malloc
 * hooks) and its test suite reads and resets that allocator's parameters.
 * This libucm keeps glibc's malloc, so the parameters these functions set
 * and report are glibc's.  glibc has no getter: the values come from the
 * heap tracker's record (ucm_heap.h: the tunables and MALLOC_*_ variables,
 * mallopt() calls, and in reloc mode glibc's dynamic thresholds).  Not hook
 * context (getenv, mallopt).
 */
#include "ucm_compat_int.h"

#include <common/ucs_env.h>
#include <ucm/api/ucm_compat.h>
#include <ucm/malloc/ucm_heap.h>
#include <ucm/util/ucm_log.h>
#include <ucm/util/ucm_opts.h>
#include <ucm/util/ucm_sys.h>

#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define UCM_COMPAT_M_GRANULARITY (-2) /* ptmalloc's; not glibc's */

/* The values set through ucm_malloc_state_reset() where glibc's malloc is
 * left alone (bistro mode): what ucm_dlmallopt_get() reports. */
typedef struct {
    int set;
    int value;
} ucm_compat_malloc_report_t;

static ucm_compat_malloc_report_t ucm_compat_malloc_reported[2];

static ucm_compat_malloc_report_t *ucm_compat_malloc_report_slot(int param)
{
    return &ucm_compat_malloc_reported[(param == M_MMAP_THRESHOLD) ? 0 : 1];
}

/* mallopt(), recording the value when glibc accepts it; only recorded for
 * ucm_dlmallopt_get() when 'apply' is 0. */
static void ucm_compat_malloc_set(int param, int value, int apply)
{
    if (!apply) {
        ucm_compat_malloc_report_slot(param)->value = value;
        ucm_compat_malloc_report_slot(param)->set   = 1;
        return;
    }
    if (!mallopt(param, value)) {
        ucm_diag("mallopt(%d, %d) refused by the C library", param, value);
        return;
    }
    ucm_heap_param_note(param, (size_t)value);
}

void ucm_malloc_state_reset(int default_mmap_thresh, int default_trim_thresh)
{
    void (*own)(int, int) = UCM_COMPAT_CALLER_OWN(ucm_malloc_state_reset);
    const char *env;
    int apply, user;

    if (own != NULL) {
        own(default_mmap_thresh, default_trim_thresh);
        return;
    }
    ucm_heap_params_init();
    /* UCX's reset acts on its own allocator, which it puts in place of
     * glibc's only in reloc mode; in bistro mode glibc's malloc runs as it
     * is, dynamic thresholds included.  A mallopt() here would end those
     * for the rest of the process (every large block an mmap/munmap
     * pair), so in bistro mode the values are only recorded. */
    apply = (ucm_opts_get(UCM_OPTS_MMAP_HOOK_MODE) != UCM_MMAP_HOOK_BISTRO);
    if (default_mmap_thresh >= 0) {
        ucm_compat_malloc_set(M_MMAP_THRESHOLD, default_mmap_thresh, apply);
    }
    if (default_trim_thresh >= 0) {
        ucm_compat_malloc_set(M_TRIM_THRESHOLD, default_trim_thresh, apply);
    }
    /* the user's settings win over the defaults, as in UCX, and keep the
     * thresholds fixed; otherwise they move as glibc's dynamic ones would */
    user = 0;
    if ((env = ucs_env_get("MALLOC_TRIM_THRESHOLD_")) != NULL) {
        ucm_compat_malloc_set(M_TRIM_THRESHOLD, atoi(env), apply);
        user = 1;
    }
    if ((env = ucs_env_get("MALLOC_MMAP_THRESHOLD_")) != NULL) {
        ucm_compat_malloc_set(M_MMAP_THRESHOLD, atoi(env), apply);
        user = 1;
    }
    if (apply && !user) {
        ucm_heap_dyn_thresh_take_over();
    }
}

int ucm_dlmallopt_get(int param_number)
{
    int (*own)(int) = UCM_COMPAT_CALLER_OWN(ucm_dlmallopt_get);

    if (own != NULL) {
        return own(param_number);
    }
    ucm_heap_params_init();
    switch (param_number) {
    case M_MMAP_THRESHOLD:
    case M_TRIM_THRESHOLD:
        if (ucm_compat_malloc_report_slot(param_number)->set) {
            return ucm_compat_malloc_report_slot(param_number)->value;
        }
        return (int)ucm_heap_param_get(param_number);
    case UCM_COMPAT_M_GRANULARITY: return (int)ucm_sys_page_size();
    default: return 0;
    }
}
