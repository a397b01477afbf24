/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * GOT/PLT patching; see ucm_reloc.h.
 */
#include "ucm_reloc.h"

#include <ucm/util/ucm_dl.h>
#include <ucm/util/ucm_elf.h>
#include <ucm/util/ucm_log.h>
#include <ucm/util/ucm_sys.h>

#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#define UCM_RELOC_MAX_PATCHES 64
#define UCM_RELOC_MAX_OBJECTS 1024

typedef struct {
    uintptr_t base;
    const void *dynamic; /* identifies the object together with base */
    int seen;            /* present in the current walk */
} ucm_reloc_object_t;

pthread_mutex_t ucm_reloc_lock = PTHREAD_MUTEX_INITIALIZER;
static ucm_reloc_patch_t ucm_reloc_patches[UCM_RELOC_MAX_PATCHES];
static unsigned ucm_reloc_num_patches;
static ucm_reloc_object_t ucm_reloc_objects[UCM_RELOC_MAX_OBJECTS];
static unsigned ucm_reloc_num_objects;
static unsigned long ucm_reloc_last_adds, ucm_reloc_last_subs;
static unsigned long ucm_reloc_num_slots;
static unsigned char ucm_reloc_first_chars[256];

/* Remember a slot value that is neither ours, nor the real function, nor a
 * not-yet-resolved lazy PLT stub of the object itself: another hooker. */
static void ucm_reloc_note_foreign(const ucm_elf_dyn_t *dyn,
                                   ucm_reloc_patch_t *patch, void *prev)
{
    if ((prev == patch->value) || (prev == patch->expected) || (prev == NULL) ||
        (patch->foreign != NULL) ||
        (((uintptr_t)prev >= dyn->map_start) &&
         ((uintptr_t)prev < dyn->map_end))) {
        return;
    }
    patch->foreign = prev;
    ucm_debug("%s: GOT of '%s' held %p (another hooker): chaining to it",
              patch->symbol, dyn->name, prev);
}

/* The slot still holds what the dynamic linker bound it to: the expected or
 * the resolved definition, our own value, or (a PLT slot) the object's own
 * lazy-binding stub. */
static int ucm_reloc_slot_untouched(const ucm_elf_dyn_t *dyn,
                                    const ucm_reloc_patch_t *patch, void *prev,
                                    int lazy_ok)
{
    const ElfW(Sym) * own;

    if ((prev == patch->expected) || (prev == patch->resolved) ||
        (prev == patch->value)) {
        return 1;
    }
    if (!lazy_ok || ((uintptr_t)prev < dyn->map_start) ||
        ((uintptr_t)prev >= dyn->map_end)) {
        return 0;
    }
    /* inside the object: its stub, unless the object defines the symbol
     * itself (then the slot may be bound to that definition) */
    own = ucm_elf_sym_find(dyn, patch->symbol);
    return (own == NULL) || (own->st_value == 0);
}

static void ucm_reloc_write(const ucm_elf_dyn_t *dyn, void **slot, void *value)
{
    size_t page     = ucm_sys_page_size();
    uintptr_t start = (uintptr_t)slot & ~(page - 1);
    int in_relro    = ((uintptr_t)slot >= dyn->relro_start) &&
                   ((uintptr_t)slot < dyn->relro_end);
    long ret;

    if (__atomic_load_n(slot, __ATOMIC_RELAXED) == value) {
        return;
    }
    if (in_relro) {
        ret = ucm_sys_mprotect((void *)start, page, PROT_READ | PROT_WRITE);
        if (ret != 0) {
            ucm_warn("cannot make the GOT of '%s' writable (%ld): %p not "
                     "patched",
                     dyn->name, ret, slot);
            return;
        }
    }
    __atomic_store_n(slot, value, __ATOMIC_RELEASE);
    ++ucm_reloc_num_slots;
    if (in_relro) {
        ucm_sys_mprotect((void *)start, page, PROT_READ);
    }
}

/* The object is one whose slots the patch must leave alone. */
static int ucm_reloc_excluded(const ucm_elf_dyn_t *dyn,
                              const ucm_reloc_patch_t *patch)
{
    char *const *sub;

    if (patch->exclude == NULL) {
        return 0;
    }
    for (sub = patch->exclude; *sub != NULL; ++sub) {
        if (strstr(dyn->name, *sub) != NULL) {
            return 1;
        }
    }
    return 0;
}

static void ucm_reloc_patch_relas(const ucm_elf_dyn_t *dyn,
                                  const ElfW(Rela) * relas, size_t count)
{
    const ElfW(Rela) * r;
    const char *name;
    unsigned long type;
    void **slot;
    unsigned i;
    size_t n;

    for (n = 0; n < count; ++n) {
        r    = &relas[n];
        type = ELF64_R_TYPE(r->r_info);
        if ((type != R_X86_64_JUMP_SLOT) && (type != R_X86_64_GLOB_DAT) &&
            ((type != R_X86_64_64) || (r->r_addend != 0))) {
            continue;
        }
        name = dyn->strtab + dyn->symtab[ELF64_R_SYM(r->r_info)].st_name;
        if (!ucm_reloc_first_chars[(unsigned char)name[0]]) {
            continue;
        }
        for (i = 0; i < ucm_reloc_num_patches; ++i) {
            if (strcmp(name, ucm_reloc_patches[i].symbol)) {
                continue;
            }
            if (ucm_reloc_excluded(dyn, &ucm_reloc_patches[i])) {
                break;
            }
            slot = (void **)(dyn->base + r->r_offset);
            /* R_X86_64_64: a function pointer in initialized data; the
             * program may have changed it since, so only a pointer that
             * still holds what the dynamic linker put there is replaced */
            if (((type == R_X86_64_64) || ucm_reloc_patches[i].strict) &&
                !ucm_reloc_slot_untouched(dyn, &ucm_reloc_patches[i], *slot,
                                          type != R_X86_64_64)) {
                break;
            }
            ucm_reloc_note_foreign(dyn, &ucm_reloc_patches[i], *slot);
            ucm_reloc_write(dyn, slot, ucm_reloc_patches[i].value);
            break;
        }
    }
}

static ucm_reloc_object_t *ucm_reloc_object_find(uintptr_t base,
                                                 const void *dynamic)
{
    unsigned i;

    for (i = 0; i < ucm_reloc_num_objects; ++i) {
        if ((ucm_reloc_objects[i].base == base) &&
            (ucm_reloc_objects[i].dynamic == dynamic)) {
            return &ucm_reloc_objects[i];
        }
    }
    return NULL;
}

typedef struct {
    int full; /* re-patch known objects as well */
} ucm_reloc_walk_ctx_t;

static int ucm_reloc_phdr_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    ucm_reloc_walk_ctx_t *ctx = arg;
    ucm_reloc_object_t *obj;
    ucm_elf_dyn_t dyn;

    ucm_reloc_last_adds = info->dlpi_adds;
    ucm_reloc_last_subs = info->dlpi_subs;
    if (ucm_elf_dyn_parse(info, &dyn) != 0) {
        return 0;
    }
    obj = ucm_reloc_object_find(dyn.base, dyn.symtab);
    if ((obj != NULL) && !ctx->full) {
        obj->seen = 1;
        return 0;
    }
    ucm_reloc_patch_relas(&dyn, dyn.jmprel, dyn.jmprel_count);
    ucm_reloc_patch_relas(&dyn, dyn.rela, dyn.rela_count);
    if (obj != NULL) {
        obj->seen = 1;
    } else if (ucm_reloc_num_objects < UCM_RELOC_MAX_OBJECTS) {
        obj          = &ucm_reloc_objects[ucm_reloc_num_objects++];
        obj->base    = dyn.base;
        obj->dynamic = dyn.symtab;
        obj->seen    = 1;
    }
    return 0;
}

static void ucm_reloc_walk(int full)
{
    ucm_reloc_walk_ctx_t ctx = {full};
    unsigned i, n = 0;

    for (i = 0; i < ucm_reloc_num_objects; ++i) {
        ucm_reloc_objects[i].seen = 0;
    }
    ucm_dl_iterate(ucm_reloc_phdr_cb, &ctx);
    /* forget unloaded objects: their address may host a new one later */
    for (i = 0; i < ucm_reloc_num_objects; ++i) {
        if (ucm_reloc_objects[i].seen) {
            ucm_reloc_objects[n++] = ucm_reloc_objects[i];
        }
    }
    ucm_reloc_num_objects = n;
}

/* Index of the active patch that writes 'value' for 'symbol', or
 * UCM_RELOC_MAX_PATCHES if there is none. */
static unsigned ucm_reloc_patch_find(const char *symbol, const void *value)
{
    unsigned i;

    for (i = 0; i < ucm_reloc_num_patches; ++i) {
        if ((ucm_reloc_patches[i].value == value) &&
            !strcmp(ucm_reloc_patches[i].symbol, symbol)) {
            return i;
        }
    }
    return UCM_RELOC_MAX_PATCHES;
}

static ucs_status_t ucm_reloc_apply_common(ucm_reloc_patch_t *patches,
                                           unsigned count,
                                           unsigned long *written_p,
                                           int with_exclude)
{
    unsigned index[UCM_RELOC_MAX_PATCHES];
    unsigned long slots;
    unsigned i, n;

    if (count > UCM_RELOC_MAX_PATCHES) {
        ucm_error("too many relocation patches (%u)", count);
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    pthread_mutex_lock(&ucm_reloc_lock);
    for (i = 0, n = ucm_reloc_num_patches; i < count; ++i) {
        index[i] = ucm_reloc_patch_find(patches[i].symbol, patches[i].value);
        n += (index[i] == UCM_RELOC_MAX_PATCHES);
    }
    if (n > UCM_RELOC_MAX_PATCHES) {
        pthread_mutex_unlock(&ucm_reloc_lock);
        ucm_error("too many relocation patches (%u)", n);
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    /* a patch applied again (same symbol and hook) replaces the old entry,
     * e.g. with a newly resolved 'expected' function */
    for (i = 0; i < count; ++i) {
        if (index[i] == UCM_RELOC_MAX_PATCHES) {
            index[i] = ucm_reloc_num_patches++;
        }
        ucm_reloc_patches[index[i]]         = patches[i];
        ucm_reloc_patches[index[i]].foreign = NULL;
        if (!with_exclude) {
            ucm_reloc_patches[index[i]].exclude = NULL;
        }
        ucm_reloc_first_chars[(unsigned char)patches[i].symbol[0]] = 1;
    }
    slots = ucm_reloc_num_slots;
    ucm_reloc_walk(1);
    for (i = 0; i < count; ++i) {
        patches[i].foreign = ucm_reloc_patches[index[i]].foreign;
    }
    if (written_p != NULL) {
        *written_p = ucm_reloc_num_slots - slots;
    }
    pthread_mutex_unlock(&ucm_reloc_lock);
    return UCS_OK;
}

ucs_status_t ucm_reloc_apply(ucm_reloc_patch_t *patches, unsigned count,
                             unsigned long *written_p)
{
    return ucm_reloc_apply_common(patches, count, written_p, 0);
}

ucs_status_t ucm_reloc_apply_excluding(ucm_reloc_patch_t *patches,
                                       unsigned count, unsigned long *written_p)
{
    return ucm_reloc_apply_common(patches, count, written_p, 1);
}

static int ucm_reloc_counters_cb(struct dl_phdr_info *info, size_t size,
                                 void *arg)
{
    unsigned long *counters = arg;

    counters[0] = info->dlpi_adds;
    counters[1] = info->dlpi_subs;
    return 1;
}

void ucm_reloc_update(void)
{
    unsigned long counters[2] = {0, 0};

    pthread_mutex_lock(&ucm_reloc_lock);
    if (ucm_reloc_num_patches > 0) {
        ucm_dl_iterate(ucm_reloc_counters_cb, counters);
        if ((counters[0] != ucm_reloc_last_adds) ||
            (counters[1] != ucm_reloc_last_subs)) {
            ucm_reloc_walk(0);
        }
    }
    pthread_mutex_unlock(&ucm_reloc_lock);
}

unsigned long ucm_reloc_slots_patched(void)
{
    return ucm_reloc_num_slots;
}
