/*
 * UCX 1.13.1's malloc-state functions over glibc's malloc; see
 * ucm/api/ucm_compat.h.
 *
 * UCX's libucm carries its own allocator (ptmalloc 2.8.6 behind malloc
 * hooks) and its test suite reads and resets that allocator's parameters.
 * This libucm keeps glibc's malloc, so the parameters these functions set
 * and report are glibc's.  glibc has no getter: the values are recorded
 * here when set through ucm_malloc_state_reset() (mallopt() accepted them),
 * and before that are the ones glibc started with.  Not hook context
 * (getenv, mallopt).
 */
#include "ucm_compat_int.h"

#include <ucm/api/ucm_compat.h>
#include <ucm/util/ucm_log.h>
#include <ucm/util/ucm_sys.h>

#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* glibc's defaults, and its upper bound for the mmap threshold on LP64
 * (larger values are refused by mallopt and by the tunable). */
#define UCM_COMPAT_MALLOC_DEFAULT_THRESH  (128 * 1024)
#define UCM_COMPAT_MALLOC_MAX_MMAP_THRESH (32 * 1024 * 1024)
#define UCM_COMPAT_M_GRANULARITY          (-2) /* ptmalloc's; not glibc's */

static pthread_once_t ucm_compat_malloc_once = PTHREAD_ONCE_INIT;
static int ucm_compat_mmap_thresh;
static int ucm_compat_trim_thresh;

/* Value of "name=" in the colon-separated GLIBC_TUNABLES, or NULL. */
static const char *ucm_compat_malloc_tunable(const char *name)
{
    const char *p = getenv("GLIBC_TUNABLES");
    size_t len    = strlen(name);

    while (p != NULL) {
        if (!strncmp(p, name, len) && (p[len] == '=')) {
            return p + len + 1;
        }
        p = strchr(p, ':');
        p = (p != NULL) ? p + 1 : NULL;
    }
    return NULL;
}

/* What glibc started with: MALLOC_<X>_THRESHOLD_, else the tunable, else
 * the default. */
static int ucm_compat_malloc_start_value(const char *env, const char *tunable,
                                         long max)
{
    const char *str = getenv(env);
    long value;

    if (str == NULL) {
        str = ucm_compat_malloc_tunable(tunable);
    }
    if (str == NULL) {
        return UCM_COMPAT_MALLOC_DEFAULT_THRESH;
    }
    value = strtol(str, NULL, 0);
    return ((value < 0) || (value > max)) ? UCM_COMPAT_MALLOC_DEFAULT_THRESH
                                          : (int)value;
}

static void ucm_compat_malloc_init(void)
{
    ucm_compat_mmap_thresh = ucm_compat_malloc_start_value(
        "MALLOC_MMAP_THRESHOLD_", "glibc.malloc.mmap_threshold",
        UCM_COMPAT_MALLOC_MAX_MMAP_THRESH);
    ucm_compat_trim_thresh = ucm_compat_malloc_start_value(
        "MALLOC_TRIM_THRESHOLD_", "glibc.malloc.trim_threshold", INT32_MAX);
}

/* mallopt(), recording the value when glibc accepts it. */
static void ucm_compat_malloc_set(int param, int value)
{
    if (!mallopt(param, value)) {
        ucm_diag("mallopt(%d, %d) refused by the C library", param, value);
        return;
    }
    if (param == M_MMAP_THRESHOLD) {
        __atomic_store_n(&ucm_compat_mmap_thresh, value, __ATOMIC_RELAXED);
    } else if (param == M_TRIM_THRESHOLD) {
        __atomic_store_n(&ucm_compat_trim_thresh, value, __ATOMIC_RELAXED);
    }
}

void ucm_malloc_state_reset(int default_mmap_thresh, int default_trim_thresh)
{
    void (*own)(int, int) = UCM_COMPAT_CALLER_OWN(ucm_malloc_state_reset);
    const char *env;

    if (own != NULL) {
        own(default_mmap_thresh, default_trim_thresh);
        return;
    }
    pthread_once(&ucm_compat_malloc_once, ucm_compat_malloc_init);
    if (default_mmap_thresh >= 0) {
        ucm_compat_malloc_set(M_MMAP_THRESHOLD, default_mmap_thresh);
    }
    if (default_trim_thresh >= 0) {
        ucm_compat_malloc_set(M_TRIM_THRESHOLD, default_trim_thresh);
    }
    /* the user's settings win over the defaults, as in UCX */
    if ((env = getenv("MALLOC_TRIM_THRESHOLD_")) != NULL) {
        ucm_compat_malloc_set(M_TRIM_THRESHOLD, atoi(env));
    }
    if ((env = getenv("MALLOC_MMAP_THRESHOLD_")) != NULL) {
        ucm_compat_malloc_set(M_MMAP_THRESHOLD, atoi(env));
    }
}

int ucm_dlmallopt_get(int param_number)
{
    int (*own)(int) = UCM_COMPAT_CALLER_OWN(ucm_dlmallopt_get);

    if (own != NULL) {
        return own(param_number);
    }
    pthread_once(&ucm_compat_malloc_once, ucm_compat_malloc_init);
    switch (param_number) {
    case M_MMAP_THRESHOLD:
        return __atomic_load_n(&ucm_compat_mmap_thresh, __ATOMIC_RELAXED);
    case M_TRIM_THRESHOLD:
        return __atomic_load_n(&ucm_compat_trim_thresh, __ATOMIC_RELAXED);
    case UCM_COMPAT_M_GRANULARITY: return (int)ucm_sys_page_size();
    default: return 0;
    }
}
