/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ucm_global_opts across UCX releases; see ucm_opts.h and
 * docs/internals-ucm-abi.md, section "ucm_global_opts".
 */
#include "ucm_opts.h"

#include "ucm_dl.h"
#include "ucm_elf.h"
#include "ucm_log.h"
#include "ucm_release.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* the exported object (ucm_opts_object.c) and a hidden name of it that
 * always means this libucm's own, whichever object the process uses */
extern unsigned char ucm_opts_own_object[UCM_OPTS_OBJECT_SIZE];

typedef struct {
    uint8_t offset;
    uint8_t size; /* 0: the layout has no such field */
} ucm_opts_slot_t;

typedef struct {
    const char *name;
    size_t size;
    ucm_opts_slot_t slot[UCM_OPTS_FIELD_LAST];
} ucm_opts_layout_desc_t;

#define UCM_OPTS_COMMON_SLOTS                                                  \
    {0, 4}, {4, 4}, {8, 4}, {12, 4},                                           \
    {                                                                          \
        16, 4                                                                  \
    }

/* Offsets on x86_64 from UCX's ucm/api/ucm.h of each release. */
static const ucm_opts_layout_desc_t ucm_opts_layouts[UCM_OPTS_LAYOUT_LAST] = {
    [UCM_OPTS_LAYOUT_COMMON] = {"common", 20, {UCM_OPTS_COMMON_SLOTS}},
    [UCM_OPTS_LAYOUT_1_13] =
        {"1.13",
         48,
         {UCM_OPTS_COMMON_SLOTS, {20, 4}, {24, 4}, {32, 8}, {40, 4}, {44, 4}}},
    [UCM_OPTS_LAYOUT_1_16] = {"1.16",
                              56,
                              {UCM_OPTS_COMMON_SLOTS,
                               {20, 4},
                               {24, 4},
                               {32, 8},
                               {40, 4},
                               {44, 4},
                               {48, 4}}},
    [UCM_OPTS_LAYOUT_1_18] = {"1.18",
                              64,
                              {UCM_OPTS_COMMON_SLOTS,
                               {24, 8},
                               {32, 4},
                               {40, 8},
                               {48, 4},
                               {52, 4},
                               {56, 4}}},
    [UCM_OPTS_LAYOUT_1_21] = {"1.21",
                              72,
                              {UCM_OPTS_COMMON_SLOTS,
                               {24, 8},
                               {32, 4},
                               {40, 8},
                               {48, 4},
                               {52, 4},
                               {56, 4},
                               {64, 8}}}};

static const char *ucm_opts_field_names[UCM_OPTS_FIELD_LAST] = {
    "log_level",
    "enable_events",
    "mmap_hook_mode",
    "enable_malloc_hooks",
    "enable_malloc_reloc",
    "cuda_hook_modes",
    "enable_dynamic_mmap_thresh",
    "alloc_alignment",
    "dlopen_process_rpath",
    "module_unload_prevent_mode",
    "bistro_force_far_jump",
    "bistro_grace_duration"};

static const ucm_opts_slot_t ucm_opts_canonical[UCM_OPTS_FIELD_LAST] = {
#define UCM_OPTS_CANONICAL(_field)                                             \
    {                                                                          \
        offsetof(ucm_opts_t, _field), sizeof(((ucm_opts_t *)0)->_field)        \
    }
    UCM_OPTS_CANONICAL(log_level),
    UCM_OPTS_CANONICAL(enable_events),
    UCM_OPTS_CANONICAL(mmap_hook_mode),
    UCM_OPTS_CANONICAL(enable_malloc_hooks),
    UCM_OPTS_CANONICAL(enable_malloc_reloc),
    UCM_OPTS_CANONICAL(cuda_hook_modes),
    UCM_OPTS_CANONICAL(enable_dynamic_mmap_thresh),
    UCM_OPTS_CANONICAL(alloc_alignment),
    UCM_OPTS_CANONICAL(dlopen_process_rpath),
    UCM_OPTS_CANONICAL(module_unload_prevent_mode),
    UCM_OPTS_CANONICAL(bistro_force_far_jump),
    UCM_OPTS_CANONICAL(bistro_grace_duration)};

/* Defaults of UCX on x86_64 (UCX_MEM_* parsing overwrites them). */
ucm_opts_t ucm_opts = {UCM_OPTS_DEFAULTS_1_13, .bistro_force_far_jump = 0,
                       .bistro_grace_duration = 0.05};

static ucm_opts_layout_t ucm_opts_layout = UCM_OPTS_LAYOUT_1_13;
static size_t ucm_opts_copy_size; /* 0: the process uses our object */
pthread_mutex_t ucm_opts_lock = PTHREAD_MUTEX_INITIALIZER;

/* The object the process uses (a copy in the executable, if any). */
static unsigned char *ucm_opts_object(void)
{
    return (unsigned char *)&ucm_global_opts;
}

/* Copy one field between slots of different widths (an int and a
 * uint64_t cuda_hook_modes: zero-extended / truncated; same width: the
 * bytes, doubles included). */
static void ucm_opts_slot_copy(unsigned char *dst, ucm_opts_slot_t dslot,
                               const unsigned char *src, ucm_opts_slot_t sslot)
{
    uint64_t wide = 0;
    uint32_t narrow;

    if (dslot.size == sslot.size) {
        memcpy(dst + dslot.offset, src + sslot.offset, dslot.size);
    } else if (sslot.size == 4) {
        memcpy(&narrow, src + sslot.offset, 4);
        wide = narrow;
        memcpy(dst + dslot.offset, &wide, 8);
    } else {
        memcpy(&wide, src + sslot.offset, 8);
        narrow = (uint32_t)wide;
        memcpy(dst + dslot.offset, &narrow, 4);
    }
}

/* Every field of layout l: canonical -> object (to_object) or back. */
static void ucm_opts_transfer(ucm_opts_layout_t l, unsigned char *object,
                              int to_object)
{
    const ucm_opts_layout_desc_t *desc = &ucm_opts_layouts[l];
    unsigned f;

    for (f = 0; f < UCM_OPTS_FIELD_LAST; ++f) {
        if (desc->slot[f].size == 0) {
            continue;
        }
        if (to_object) {
            ucm_opts_slot_copy(object, desc->slot[f],
                               (const unsigned char *)&ucm_opts,
                               ucm_opts_canonical[f]);
        } else {
            ucm_opts_slot_copy((unsigned char *)&ucm_opts,
                               ucm_opts_canonical[f], object, desc->slot[f]);
        }
    }
}

static ucm_opts_layout_t ucm_opts_layout_of(unsigned major, unsigned minor)
{
    if (major != 1) {
        return UCM_OPTS_LAYOUT_LAST;
    } else if ((minor >= 13) && (minor <= 15)) {
        return UCM_OPTS_LAYOUT_1_13;
    } else if ((minor >= 16) && (minor <= 17)) {
        return UCM_OPTS_LAYOUT_1_16;
    } else if ((minor >= 18) && (minor <= 20)) {
        return UCM_OPTS_LAYOUT_1_18;
    } else if ((minor >= 21) && (minor <= 23)) {
        return UCM_OPTS_LAYOUT_1_21;
    }
    return UCM_OPTS_LAYOUT_LAST;
}

typedef struct {
    uintptr_t addr;
    size_t size;
    int found;
} ucm_opts_size_find_t;

static int ucm_opts_size_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    ucm_opts_size_find_t *ctx = arg;
    const ElfW(Sym) * sym;
    ucm_elf_dyn_t dyn;

    if ((ucm_elf_dyn_parse(info, &dyn) != 0) || (ctx->addr < dyn.map_start) ||
        (ctx->addr >= dyn.map_end)) {
        return 0;
    }
    sym = ucm_elf_sym_find(&dyn, "ucm_global_opts");
    if ((sym != NULL) && (dyn.base + sym->st_value == ctx->addr)) {
        ctx->size  = sym->st_size;
        ctx->found = 1;
    }
    return 1;
}

/* Size of the object the process uses, when it is not ours; 0 if ours. */
static size_t ucm_opts_copy_size_find(void)
{
    ucm_opts_size_find_t ctx = {(uintptr_t)ucm_opts_object(), 0, 0};

    if (ucm_opts_object() == ucm_opts_own_object) {
        return 0;
    }
    ucm_dl_iterate(ucm_opts_size_cb, &ctx);
    if (!ctx.found) {
        /* a definition not in any symbol table: trust only the common part */
        return ucm_opts_layouts[UCM_OPTS_LAYOUT_COMMON].size;
    }
    return ctx.size;
}

static ucm_opts_layout_t ucm_opts_layout_of_size(size_t size)
{
    ucm_opts_layout_t l;

    for (l = UCM_OPTS_LAYOUT_1_13; l < UCM_OPTS_LAYOUT_LAST; ++l) {
        if (ucm_opts_layouts[l].size == size) {
            return l;
        }
    }
    return UCM_OPTS_LAYOUT_COMMON;
}

void ucm_opts_init(void)
{
    unsigned major = 0, minor = 0;
    ucm_opts_layout_t l;
    ucs_status_t status;
    size_t copy_size;

    status    = ucm_ucx_release(&major, &minor, NULL, NULL);
    copy_size = ucm_opts_copy_size_find();
    if ((copy_size != 0) && (copy_size != UCM_OPTS_OBJECT_SIZE)) {
        /* linked against another libucm: its size tells its layout */
        l = ucm_opts_layout_of_size(copy_size);
    } else if (status == UCS_OK) {
        l = ucm_opts_layout_of(major, minor);
    } else {
        l = UCM_OPTS_LAYOUT_1_13;
    }
    if (l == UCM_OPTS_LAYOUT_LAST) {
        l = UCM_OPTS_LAYOUT_1_13; /* until a caller's layout is known */
    }

    pthread_mutex_lock(&ucm_opts_lock);
    ucm_opts_copy_size = copy_size;
    __atomic_store_n(&ucm_opts_layout, l, __ATOMIC_RELEASE);
    if ((copy_size == 0) || (copy_size >= ucm_opts_layouts[l].size)) {
        ucm_opts_transfer(l, ucm_opts_object(), 1);
    }
    pthread_mutex_unlock(&ucm_opts_lock);
    ucm_debug("ucm_global_opts: layout %s (%zu bytes), object in use %zu "
              "bytes%s",
              ucm_opts_layouts[l].name, ucm_opts_layouts[l].size,
              copy_size ? copy_size : (size_t)UCM_OPTS_OBJECT_SIZE,
              copy_size ? " (another object's copy)" : "");
}

uint64_t ucm_opts_get(ucm_opts_field_t f)
{
    ucm_opts_layout_t l  = __atomic_load_n(&ucm_opts_layout, __ATOMIC_ACQUIRE);
    ucm_opts_slot_t slot = ucm_opts_layouts[l].slot[f];
    const unsigned char *src;
    uint64_t wide = 0;
    uint32_t narrow;

    if (slot.size == 0) {
        slot = ucm_opts_canonical[f];
        src  = (const unsigned char *)&ucm_opts;
    } else {
        src = ucm_opts_object();
    }
    if (slot.size == 4) {
        memcpy(&narrow, src + slot.offset, 4);
        return narrow;
    }
    memcpy(&wide, src + slot.offset, 8);
    return wide;
}

double ucm_opts_get_double(ucm_opts_field_t f)
{
    uint64_t bits = ucm_opts_get(f);
    double value;

    memcpy(&value, &bits, sizeof(value));
    return value;
}

void ucm_opts_sync(void)
{
    pthread_mutex_lock(&ucm_opts_lock);
    ucm_opts_transfer(ucm_opts_layout, ucm_opts_object(), 0);
    pthread_mutex_unlock(&ucm_opts_lock);
}

ucm_opts_layout_t ucm_opts_active(const char **name_p, size_t *size_p,
                                  size_t *copy_size_p)
{
    ucm_opts_layout_t l = __atomic_load_n(&ucm_opts_layout, __ATOMIC_ACQUIRE);

    if (name_p != NULL) {
        *name_p = ucm_opts_layouts[l].name;
    }
    if (size_p != NULL) {
        *size_p = ucm_opts_layouts[l].size;
    }
    if (copy_size_p != NULL) {
        *copy_size_p = ucm_opts_copy_size;
    }
    return l;
}

size_t ucm_global_opts_layout(const char **layout_p, size_t *object_size_p)
{
    size_t size, copy_size;

    ucm_opts_active(layout_p, &size, &copy_size);
    if (object_size_p != NULL) {
        *object_size_p = copy_size ? copy_size : UCM_OPTS_OBJECT_SIZE;
    }
    return size;
}

/* The layout of the UCX release in the process, for decoding what its
 * libucs passes; *unknown_p: a release whose layout is not known. */
static ucm_opts_layout_t ucm_opts_caller_layout(char *release, size_t max,
                                                int *unknown_p)
{
    unsigned major, minor, patch;
    ucm_opts_layout_t l;
    ucs_status_t status;
    const char *how;

    *unknown_p = 0;
    status     = ucm_ucx_release(&major, &minor, &patch, &how);
    if (status == UCS_ERR_NO_ELEM) {
        /* not UCX: a program built against the libucm whose object it
         * copied (its size told the layout), else this project's ucm.h */
        return ((ucm_opts_copy_size != 0) &&
                (ucm_opts_copy_size != UCM_OPTS_OBJECT_SIZE))
                   ? ucm_opts_layout
                   : UCM_OPTS_LAYOUT_1_13;
    } else if (status != UCS_OK) {
        snprintf(release, max, "UCX of unknown release");
        *unknown_p = 1;
        return UCM_OPTS_LAYOUT_COMMON;
    }
    snprintf(release, max, "UCX %u.%u.%u (%s)", major, minor, patch, how);
    l = ucm_opts_layout_of(major, minor);
    if (l == UCM_OPTS_LAYOUT_LAST) {
        *unknown_p = 1;
        return UCM_OPTS_LAYOUT_COMMON;
    }
    return l;
}

/* One line naming what a caller of unknown layout passed in vain. */
static void ucm_opts_warn_unknown(const char *release)
{
    char left[256];
    size_t len = 0;
    unsigned f;

    left[0] = '\0';
    for (f = 0; f < UCM_OPTS_FIELD_LAST; ++f) {
        if (ucm_opts_layouts[UCM_OPTS_LAYOUT_COMMON].slot[f].size == 0) {
            len += snprintf(left + len, sizeof(left) - len, "%s%s",
                            (len == 0) ? "" : ",", ucm_opts_field_names[f]);
            if (len >= sizeof(left)) {
                break;
            }
        }
    }
    ucm_warn("ucm_set_global_opts: %s: layout of its options not known to "
             "this libucm: took log_level, enable_events, mmap_hook_mode, "
             "enable_malloc_hooks, enable_malloc_reloc; left out %s",
             release, left);
}

void ucm_set_global_opts(const ucm_global_config_t *ucm_opts_arg)
{
    const unsigned char *src = (const unsigned char *)ucm_opts_arg;
    ucm_opts_layout_t caller;
    char release[96];
    int unknown, mode;

    if (ucm_opts_arg == NULL) {
        ucm_error("ucm_set_global_opts: NULL options ignored");
        return;
    }
    mode = (int)ucm_opts_arg->mmap_hook_mode;
    if ((unsigned)mode >= UCM_MMAP_HOOK_LAST) {
        ucm_error("ucm_set_global_opts: invalid mmap_hook_mode %d ignored",
                  mode);
        return;
    }
    release[0] = '\0';
    caller     = ucm_opts_caller_layout(release, sizeof(release), &unknown);

    pthread_mutex_lock(&ucm_opts_lock);
    /* what a direct write to the object changed, then the caller's */
    ucm_opts_transfer(ucm_opts_layout, ucm_opts_object(), 0);
    ucm_opts_transfer(caller, (unsigned char *)src, 0);
    if (((ucm_opts_copy_size == 0) ||
         (ucm_opts_copy_size == UCM_OPTS_OBJECT_SIZE)) &&
        (caller != UCM_OPTS_LAYOUT_COMMON)) {
        __atomic_store_n(&ucm_opts_layout, caller, __ATOMIC_RELEASE);
    }
    ucm_opts_transfer(ucm_opts_layout, ucm_opts_object(), 1);
    pthread_mutex_unlock(&ucm_opts_lock);

    if (unknown) {
        ucm_opts_warn_unknown(release);
    }
}
