/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Which UCX release is running in this process (ucm_ucx_release(), declared
 * in ucm/api/ucm_ext.h).
 *
 * libucs has no version function and no version string.  In the order
 * tried:
 * 1. ucp_get_version() of a loaded libucp (built and shipped with libucs;
 *    it only stores three constants, so it may be called before libucp's
 *    constructors have run): the full release.
 * 2. The exported functions of the loaded UCX libucs (the object that
 *    exports ucs_load_modules; this project's libucs does not).  Each
 *    release from 1.13 on added functions that every later release (up to
 *    1.22.0 and UCX's master of 2026-08) still exports, unconditionally
 *    built (no stats/debug/arch/fuse code).  The newest release whose
 *    marker is exported is the release; the patch level cannot be told
 *    (reported as 0), and a release newer than the newest marker reads as
 *    that marker's.  The markers were derived from the sources of every
 *    tag v1.13.1 ... v1.22.0 and checked against Debian 12's libucs
 *    (1.13.1: only the first marker) and Debian 13's (1.18.1: the first
 *    six); docs/internals-ucm-abi.md, section "Which UCX is running".
 *
 * The objects are found by reading the symbol tables of the loaded objects
 * (no dlopen/dlsym: they change the loader's state, which a fork() in
 * another thread does not survive).  A result is kept until another object
 * is loaded (a found release for good).
 */
#include "ucm_release.h"

#include "ucm_dl.h"
#include "ucm_elf.h"

typedef void (*ucm_release_ucp_func_t)(unsigned *major, unsigned *minor,
                                       unsigned *patch);

typedef struct {
    unsigned minor;
    const char *symbol;
} ucm_release_marker_t;

/* Newest first; every one is in the libucs of its release and all later. */
static const ucm_release_marker_t ucm_release_markers[] = {
    {22, "ucs_string_buffer_vappendf"},
    {21, "ucs_interval_tree_init"},
    {20, "ucs_path_common_parent_length"},
    {19, "ucs_string_alloc_formatted_path"},
    {18, "ucs_string_alloc_path_buffer"},
    {17, "ucs_config_sscanf_key_value"},
    {16, "ucs_callbackq_add_oneshot"},
    {15, "ucs_string_buffer_rbrk"},
    {14, "ucs_string_distance"},
    {13, "ucs_init_ucm_opts"}};

#define UCM_RELEASE_UCS_SYMBOL "ucs_load_modules"
#define UCM_RELEASE_UCP_SYMBOL "ucp_get_version"

typedef struct {
    unsigned long adds;         /* objects loaded so far */
    ucm_release_ucp_func_t ucp; /* ucp_get_version, or NULL */
    int ucs_found;              /* a UCX libucs is loaded */
    unsigned ucs_minor;         /* its fingerprint, 0 if none matched */
} ucm_release_scan_t;

typedef struct {
    ucs_status_t status;
    unsigned major, minor, patch;
    const char *how;
} ucm_release_result_t;

pthread_mutex_t ucm_release_lock = PTHREAD_MUTEX_INITIALIZER;
static ucm_release_result_t ucm_release_cached;
static unsigned long ucm_release_cached_adds = ~0ul;

static const void *ucm_release_func(const ucm_elf_dyn_t *dyn, const char *name)
{
    const ElfW(Sym) *sym = ucm_elf_sym_find(dyn, name);

    if ((sym == NULL) || (sym->st_value == 0) ||
        (ELF64_ST_TYPE(sym->st_info) != STT_FUNC)) {
        return NULL;
    }
    return (const void *)(dyn->base + sym->st_value);
}

static unsigned ucm_release_fingerprint(const ucm_elf_dyn_t *dyn)
{
    unsigned i;

    for (i = 0;
         i < sizeof(ucm_release_markers) / sizeof(ucm_release_markers[0]);
         ++i) {
        if (ucm_release_func(dyn, ucm_release_markers[i].symbol) != NULL) {
            return ucm_release_markers[i].minor;
        }
    }
    return 0;
}

static int ucm_release_scan_cb(struct dl_phdr_info *info, size_t size,
                               void *arg)
{
    ucm_release_scan_t *scan = arg;
    ucm_elf_dyn_t dyn;
    const void *func;

    scan->adds = info->dlpi_adds;
    if (ucm_elf_dyn_parse(info, &dyn) != 0) {
        return 0;
    }
    if (scan->ucp == NULL) {
        func      = ucm_release_func(&dyn, UCM_RELEASE_UCP_SYMBOL);
        scan->ucp = (ucm_release_ucp_func_t)func;
    }
    if ((scan->ucs_minor == 0) &&
        (ucm_release_func(&dyn, UCM_RELEASE_UCS_SYMBOL) != NULL)) {
        /* the first one a marker matches (not a stand-in without any) */
        scan->ucs_found = 1;
        scan->ucs_minor = ucm_release_fingerprint(&dyn);
    }
    return 0;
}

static int ucm_release_adds_cb(struct dl_phdr_info *info, size_t size,
                               void *arg)
{
    *(unsigned long *)arg = info->dlpi_adds;
    return 1;
}

static void ucm_release_detect(ucm_release_result_t *result,
                               unsigned long *adds_p)
{
    ucm_release_scan_t scan = {0, NULL, 0, 0};

    ucm_dl_iterate(ucm_release_scan_cb, &scan);
    *adds_p = scan.adds;
    if (scan.ucp != NULL) {
        /* outside the walk: the walk lock is a leaf */
        scan.ucp(&result->major, &result->minor, &result->patch);
        result->how    = "ucp_get_version";
        result->status = UCS_OK;
    } else if (scan.ucs_found && (scan.ucs_minor != 0)) {
        result->major  = 1;
        result->minor  = scan.ucs_minor;
        result->patch  = 0;
        result->how    = "libucs exports";
        result->status = UCS_OK;
    } else if (scan.ucs_found) {
        result->how    = "libucs exports (none known)";
        result->status = UCS_ERR_UNSUPPORTED;
    } else {
        result->how    = "no UCX libucs/libucp loaded";
        result->status = UCS_ERR_NO_ELEM;
    }
}

ucs_status_t ucm_ucx_release(unsigned *major, unsigned *minor, unsigned *patch,
                             const char **how)
{
    ucm_release_result_t result;
    unsigned long adds = 0;

    pthread_mutex_lock(&ucm_release_lock);
    if ((ucm_release_cached_adds != ~0ul) &&
        (ucm_release_cached.status != UCS_OK)) {
        ucm_dl_iterate(ucm_release_adds_cb, &adds);
        if (adds != ucm_release_cached_adds) {
            ucm_release_cached_adds = ~0ul; /* something was loaded since */
        }
    }
    if (ucm_release_cached_adds == ~0ul) {
        ucm_release_detect(&ucm_release_cached, &adds);
        ucm_release_cached_adds = adds;
    }
    result = ucm_release_cached;
    pthread_mutex_unlock(&ucm_release_lock);

    if (result.status != UCS_OK) {
        return result.status;
    }
    if (major != NULL) {
        *major = result.major;
    }
    if (minor != NULL) {
        *minor = result.minor;
    }
    if (patch != NULL) {
        *patch = result.patch;
    }
    if (how != NULL) {
        *how = result.how;
    }
    return UCS_OK;
}
