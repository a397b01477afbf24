/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ucm_got_patch_apply(): GOT patching for other modules (libucm_cuda), on
 * the same engine and patch set as the mmap-family hooks; see ucm_ext.h.
 */
#include "ucm_reloc.h"

#include <ucm/api/ucm_ext.h>
#include <ucm/mmap/ucm_mmap.h>
#include <ucm/util/ucm_log.h>

#include <stddef.h>

#define UCM_GOT_PATCH_MAX 32

ucs_status_t ucm_got_patch_apply(ucm_got_patch_t *patches, unsigned count,
                                 unsigned long *written_p)
{
    ucm_reloc_patch_t relocs[UCM_GOT_PATCH_MAX];
    ucs_status_t status;
    unsigned i;

    if ((patches == NULL) || (count > UCM_GOT_PATCH_MAX)) {
        ucm_error("ucm_got_patch_apply: %s",
                  (patches == NULL) ? "NULL patches" : "too many patches");
        return (patches == NULL) ? UCS_ERR_INVALID_PARAM
                                 : UCS_ERR_EXCEEDS_LIMIT;
    }
    for (i = 0; i < count; ++i) {
        if ((patches[i].symbol == NULL) || (patches[i].hook == NULL) ||
            (patches[i].real == NULL)) {
            ucm_error("ucm_got_patch_apply: patch %u has a NULL field", i);
            return UCS_ERR_INVALID_PARAM;
        }
        relocs[i].symbol   = patches[i].symbol;
        relocs[i].value    = patches[i].hook;
        relocs[i].expected = patches[i].real;
        relocs[i].resolved = patches[i].real;
        relocs[i].strict   = 0;
        relocs[i].exclude  = NULL;
    }

    /* objects loaded later get the patch set from the dlopen hooks */
    status = ucm_mmap_install_dl_follow();
    if (status != UCS_OK) {
        ucm_warn("dlopen hooks not installed (status %d): objects loaded later "
                 "will not be patched",
                 (int)status);
    }

    status = ucm_reloc_apply(relocs, count, written_p);
    if (status != UCS_OK) {
        return status;
    }
    for (i = 0; i < count; ++i) {
        patches[i].foreign = relocs[i].foreign;
    }
    return UCS_OK;
}
