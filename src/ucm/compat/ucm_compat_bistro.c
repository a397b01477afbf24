/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX 1.13.1's ucm_bistro_patch/restore on libucm's entry patcher; see
 * ucm/api/ucm_compat.h.
 *
 * The patcher (ucm/bistro/ucm_bistro.h) replaces the first instruction of a
 * function with one atomic store and builds a trampoline for the original;
 * it needs the function's extent and its neighbours' for a first
 * instruction shorter than a jump, found here in the symbol table of the
 * object that holds the function.  Without padding in reach it displaces
 * as many whole instructions as the jump covers, as UCX does (a prologue's
 * 1-byte push).  When the patcher cannot take the entry at all and no
 * original is asked for, the entry is overwritten with a jump as UCX does
 * (5 bytes, or 13 when the hook is beyond +-2 GiB).  Restore points
 * come from a fixed table (no malloc: the caller may be a malloc hook), and
 * all patching is serialized with the mmap hooks' installation.
 */
#include "ucm_compat_int.h"

#include <ucm/util/ucm_dl.h>
#include <ucm/api/ucm_compat.h>
#include <ucm/bistro/ucm_bistro.h>
#include <ucm/mmap/ucm_mmap.h>
#include <ucm/util/ucm_elf.h>
#include <ucm/util/ucm_log.h>

#include <link.h>
#include <string.h>

#define UCM_COMPAT_BISTRO_REGION_MAX 16

/* Bytes to put back at one address. */
typedef struct {
    uintptr_t addr;
    size_t len;
    uint8_t bytes[UCM_COMPAT_BISTRO_REGION_MAX];
} ucm_compat_bistro_region_t;

struct ucm_bistro_restore_point {
    void *func;
    int in_use;
    unsigned count;                       /* regions, restored in order */
    ucm_compat_bistro_region_t region[2]; /* entry, then padding */
};

static ucm_bistro_restore_point_t
    ucm_compat_bistro_points[UCM_BISTRO_RESTORE_POINTS];

/* ---- the function's extent from its object's symbol table ---- */

typedef struct {
    uintptr_t addr;
    ucm_bistro_target_t *target;
} ucm_compat_bistro_find_t;

static int ucm_compat_bistro_in_object(const struct dl_phdr_info *info,
                                       uintptr_t addr)
{
    uintptr_t start;
    int i;

    for (i = 0; i < info->dlpi_phnum; ++i) {
        if (info->dlpi_phdr[i].p_type != PT_LOAD) {
            continue;
        }
        start = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
        if ((addr >= start) && (addr < start + info->dlpi_phdr[i].p_memsz)) {
            return 1;
        }
    }
    return 0;
}

static int ucm_compat_bistro_find_cb(struct dl_phdr_info *info, size_t size,
                                     void *arg)
{
    ucm_compat_bistro_find_t *ctx = arg;
    ucm_bistro_target_t *t        = ctx->target;
    const ElfW(Sym) * sym;
    uintptr_t start, end;
    ucm_elf_dyn_t dyn;
    size_t i;

    if (!ucm_compat_bistro_in_object(info, ctx->addr)) {
        return 0;
    }
    if (ucm_elf_dyn_parse(info, &dyn) != 0) {
        return 1;
    }
    for (i = 1; i < dyn.nsyms; ++i) {
        sym = &dyn.symtab[i];
        if ((sym->st_value == 0) || (ELF64_ST_TYPE(sym->st_info) != STT_FUNC)) {
            continue;
        }
        start = dyn.base + sym->st_value;
        end   = start + sym->st_size;
        if (start == ctx->addr) {
            t->end = ucs_max(t->end, end); /* aliases: the longest */
        } else if ((start > ctx->addr) &&
                   ((t->next_start == 0) || (start < t->next_start))) {
            t->next_start = start;
        } else if ((start < ctx->addr) && (end > t->prev_end)) {
            t->prev_end = end;
        }
    }
    return 1;
}

static void ucm_compat_bistro_target(void *func, ucm_bistro_target_t *t)
{
    ucm_compat_bistro_find_t ctx = {(uintptr_t)func, t};

    memset(t, 0, sizeof(*t));
    t->entry = (uintptr_t)func;
    ucm_dl_iterate(ucm_compat_bistro_find_cb, &ctx);
}

/* ---- patching ---- */

static void ucm_compat_bistro_region_save(ucm_compat_bistro_region_t *r,
                                          uintptr_t addr, const void *bytes,
                                          size_t len)
{
    r->addr = addr;
    r->len  = len;
    memcpy(r->bytes, bytes, len);
}

/* Overwrite the entry with a jump to hook (UCX's way); *region receives the
 * bytes it replaced. */
static ucs_status_t
ucm_compat_bistro_overwrite(uintptr_t entry, uintptr_t hook,
                            ucm_compat_bistro_region_t *region)
{
    long disp = (long)(hook - (entry + 5));
    uint8_t code[13];
    size_t len;
    int32_t rel;

    if ((disp > INT32_MIN) && (disp < INT32_MAX)) {
        rel     = (int32_t)disp;
        code[0] = 0xe9; /* jmp rel32 */
        memcpy(code + 1, &rel, sizeof(rel));
        len = 5;
    } else {
        code[0] = 0x49; /* movabs $hook, %r11 */
        code[1] = 0xbb;
        memcpy(code + 2, &hook, sizeof(hook));
        code[10] = 0x41; /* jmp *%r11 */
        code[11] = 0xff;
        code[12] = 0xe3;
        len      = 13;
    }
    ucm_compat_bistro_region_save(region, entry, (const void *)entry, len);
    return ucm_bistro_write(entry, code, len);
}

static ucm_bistro_restore_point_t *ucm_compat_bistro_point_get(void)
{
    unsigned i;

    for (i = 0; i < UCM_BISTRO_RESTORE_POINTS; ++i) {
        if (!ucm_compat_bistro_points[i].in_use) {
            memset(&ucm_compat_bistro_points[i], 0,
                   sizeof(ucm_compat_bistro_points[i]));
            ucm_compat_bistro_points[i].in_use = 1;
            return &ucm_compat_bistro_points[i];
        }
    }
    return NULL;
}

ucs_status_t ucm_bistro_patch(void *func_ptr, void *hook, const char *symbol,
                              void **orig_func_p,
                              ucm_bistro_restore_point_t **rp)
{
    ucs_status_t (*own)(void *, void *, const char *, void **,
                        ucm_bistro_restore_point_t **) =
        UCM_COMPAT_CALLER_OWN(ucm_bistro_patch);
    ucm_bistro_restore_point_t point = {.func = func_ptr};
    ucm_bistro_restore_point_t *saved;
    ucm_bistro_patch_t patch;
    ucs_status_t status;

    if (own != NULL) {
        return own(func_ptr, hook, symbol, orig_func_p, rp);
    }
    symbol = (symbol != NULL) ? symbol : "(unnamed)";
    if ((func_ptr == NULL) || (hook == NULL)) {
        ucm_error("ucm_bistro_patch(%s): NULL %s", symbol,
                  (func_ptr == NULL) ? "function" : "hook");
        return UCS_ERR_INVALID_PARAM;
    }

    memset(&patch, 0, sizeof(patch));
    ucm_compat_bistro_target(func_ptr, &patch.target);
    patch.hook     = hook;
    patch.multi_ok = 1; /* as UCX: compilers' prologues start with push */

    pthread_mutex_lock(&ucm_mmap_install_lock);
    saved = NULL;
    if ((rp != NULL) && ((saved = ucm_compat_bistro_point_get()) == NULL)) {
        status = UCS_ERR_NO_MEMORY;
        ucm_error("ucm_bistro_patch(%s): all %d restore points in use", symbol,
                  UCM_BISTRO_RESTORE_POINTS);
        goto out_unlock;
    }

    status = ucm_bistro_patch_all(&patch, 1);
    if (status == UCS_OK) {
        ucm_compat_bistro_region_save(&point.region[point.count++],
                                      patch.target.entry, patch.saved_entry,
                                      patch.entry_len);
        if (patch.site != 0) {
            ucm_compat_bistro_region_save(&point.region[point.count++],
                                          patch.site, patch.saved_site,
                                          sizeof(patch.saved_site));
        }
        if (orig_func_p != NULL) {
            *orig_func_p = patch.orig;
        }
    } else if (orig_func_p == NULL) {
        ucm_debug("ucm_bistro_patch(%s): %s; overwriting the entry", symbol,
                  patch.detail);
        status = ucm_compat_bistro_overwrite(
            (uintptr_t)func_ptr, (uintptr_t)hook, &point.region[point.count++]);
    } else {
        ucm_diag("ucm_bistro_patch(%s) at %p: %s", symbol, func_ptr,
                 patch.detail);
    }
    if (status != UCS_OK) {
        goto out_release;
    }

    ucm_debug("ucm_bistro_patch(%s): %p now jumps to %p", symbol, func_ptr,
              hook);
    if (saved != NULL) {
        point.in_use = 1;
        *saved       = point;
        *rp          = saved;
    }
    pthread_mutex_unlock(&ucm_mmap_install_lock);
    return UCS_OK;

out_release:
    if (saved != NULL) {
        saved->in_use = 0;
    }
out_unlock:
    pthread_mutex_unlock(&ucm_mmap_install_lock);
    return status;
}

ucs_status_t ucm_bistro_restore(ucm_bistro_restore_point_t *rp)
{
    ucs_status_t (*own)(ucm_bistro_restore_point_t *) =
        UCM_COMPAT_CALLER_OWN(ucm_bistro_restore);
    ucs_status_t status = UCS_OK;
    unsigned i;

    if (own != NULL) {
        return own(rp);
    }
    pthread_mutex_lock(&ucm_mmap_install_lock);
    if ((rp == NULL) || !rp->in_use) {
        pthread_mutex_unlock(&ucm_mmap_install_lock);
        ucm_error("ucm_bistro_restore: %s restore point %p",
                  (rp == NULL) ? "NULL" : "released", rp);
        return UCS_ERR_INVALID_PARAM;
    }
    for (i = 0; (i < rp->count) && (status == UCS_OK); ++i) {
        status = ucm_bistro_write(rp->region[i].addr, rp->region[i].bytes,
                                  rp->region[i].len);
    }
    if (status == UCS_OK) {
        ucm_debug("ucm_bistro_restore: %p restored", rp->func);
        rp->in_use = 0;
    }
    pthread_mutex_unlock(&ucm_mmap_install_lock);
    return status;
}

void *ucm_bistro_restore_addr(ucm_bistro_restore_point_t *rp)
{
    void *(*own)(ucm_bistro_restore_point_t *) =
        UCM_COMPAT_CALLER_OWN(ucm_bistro_restore_addr);

    if (own != NULL) {
        return own(rp);
    }
    return (rp != NULL) ? rp->func : NULL;
}
