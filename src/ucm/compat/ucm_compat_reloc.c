/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX 1.13.1's ucm_reloc_modify() on libucm's GOT/PLT engine (the patch set
 * of the mmap hooks, followed into objects loaded later); see
 * ucm/api/ucm_compat.h.
 */
#include "ucm_compat_int.h"

#include <ucm/api/ucm_compat.h>
#include <ucm/mmap/ucm_mmap.h>
#include <ucm/reloc/ucm_reloc.h>
#include <ucm/util/ucm_log.h>

#include <dlfcn.h>

/* Recursive: a look-up (dlsym) may call a replaced function that looks up
 * its own original on the same thread. */
pthread_mutex_t ucm_reloc_get_orig_lock =
    PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
pthread_t volatile ucm_reloc_get_orig_thread = (pthread_t)-1;

ucs_status_t ucm_reloc_modify(ucm_compat_reloc_patch_t *patch)
{
    ucs_status_t (*own)(ucm_compat_reloc_patch_t *) =
        UCM_COMPAT_CALLER_OWN(ucm_reloc_modify);
    ucm_reloc_patch_t reloc;
    unsigned long written = 0;
    ucs_status_t status;
    void *global;

    if (own != NULL) {
        return own(patch);
    }
    if ((patch == NULL) || (patch->symbol == NULL) || (patch->value == NULL)) {
        ucm_error("ucm_reloc_modify: NULL %s",
                  (patch == NULL) ? "patch" : "symbol or value");
        return UCS_ERR_INVALID_PARAM;
    }

    /* what an untouched slot holds (NULL if nothing defines it yet) */
    global         = dlsym(RTLD_DEFAULT, patch->symbol);
    reloc.symbol   = patch->symbol;
    reloc.value    = patch->value;
    reloc.expected = global;
    reloc.resolved = global;
    reloc.foreign  = NULL;
    reloc.strict   = 0;
    reloc.exclude  = patch->blacklist;

    /* objects loaded later get the patch set from the dlopen hooks */
    status = ucm_mmap_install_dl_follow();
    if (status != UCS_OK) {
        ucm_warn("ucm_reloc_modify(%s): dlopen hooks not installed (status "
                 "%d): objects loaded later will not be patched",
                 patch->symbol, (int)status);
    }

    status = ucm_reloc_apply_excluding(&reloc, 1, &written);
    if (status != UCS_OK) {
        return status;
    }
    if (reloc.foreign != NULL) {
        patch->prev_value = reloc.foreign;
    } else if ((global != NULL) && (global != patch->value)) {
        patch->prev_value = global;
    }
    ucm_debug("ucm_reloc_modify(%s): %lu slots now call %p (previous %p)",
              patch->symbol, written, patch->value, patch->prev_value);
    return UCS_OK;
}
