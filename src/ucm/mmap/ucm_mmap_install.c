/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Installing the mmap-family hooks: bistro (libc entries) with a per-function
 * fallback to reloc (GOT/PLT slots), or reloc for everything.  Installation
 * happens once per process, on the first handler that needs it, and is
 * checked by delivering real events before it is declared successful.
 */
#include "ucm_mmap.h"

#include "ucm_filewatch.h"
#include "ucm_syscall.h"

#include <ucm/util/ucm_dl.h>
#include <ucm/bistro/ucm_bistro.h>
#include <ucm/event/ucm_event.h>
#include <ucm/malloc/ucm_heap.h>
#include <ucm/reloc/ucm_reloc.h>
#include <ucm/util/ucm_elf.h>
#include <ucm/util/ucm_log.h>

#include <dlfcn.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

void *ucm_mremap_hook(void *old_address, size_t old_size, size_t new_size,
                      int flags, ...);
static void *ucm_dlopen_hook(const char *filename, int flag);
static int ucm_dlclose_hook(void *handle);
static void *ucm_dlmopen_hook(Lmid_t lmid, const char *filename, int flag);

#define UCM_HOOK_ENTRY(_sym, _hook, _raw, _events, _libc)                      \
    {                                                                          \
        _sym, (void *)(_hook), (void *)(_raw), _events, _libc, 0, NULL, 0,     \
            UCM_HOOK_STATE_NONE, ""                                            \
    }

#define UCM_HEAP_ENTRY(_sym, _hook)                                            \
    {                                                                          \
        _sym, (void *)(_hook), NULL,                                           \
            UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED, 0, 1, NULL, 0,        \
            UCM_HOOK_STATE_NONE, ""                                            \
    }

/* Hooks past ucm_mmap.h's ids: syscall() (its original in
 * ucm_hot.orig[UCM_SYSCALL_HOT_SLOT]).  Every loop below runs over all
 * UCM_MMAP_NHOOKS through ucm_mmap_hook(). */
#define UCM_MMAP_NHOOKS (UCM_HOOK_LAST + 1)

_Static_assert(UCM_MMAP_NHOOKS <= UCM_HOT_ORIG_MAX, "ucm_hot.orig too small");

ucm_hook_func_t ucm_hook_funcs[UCM_HOOK_LAST] = {
    [UCM_HOOK_MMAP] = UCM_HOOK_ENTRY(
        "mmap", ucm_mmap, ucm_orig_mmap,
        UCM_EVENT_MMAP | UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED, 1),
    [UCM_HOOK_MMAP64] = UCM_HOOK_ENTRY(
        "mmap64", ucm_mmap, ucm_orig_mmap,
        UCM_EVENT_MMAP | UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED, 1),
    [UCM_HOOK_MUNMAP] =
        UCM_HOOK_ENTRY("munmap", ucm_munmap, ucm_orig_munmap,
                       UCM_EVENT_MUNMAP | UCM_EVENT_VM_UNMAPPED, 1),
    [UCM_HOOK_MREMAP] = UCM_HOOK_ENTRY(
        "mremap", ucm_mremap_hook, ucm_mmap_mremap_raw,
        UCM_EVENT_MREMAP | UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED, 1),
    [UCM_HOOK_MADVISE] =
        UCM_HOOK_ENTRY("madvise", ucm_madvise, ucm_orig_madvise,
                       UCM_EVENT_MADVISE | UCM_EVENT_VM_UNMAPPED, 1),
    [UCM_HOOK_SHMAT] = UCM_HOOK_ENTRY(
        "shmat", ucm_shmat, ucm_orig_shmat,
        UCM_EVENT_SHMAT | UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED, 1),
    [UCM_HOOK_SHMDT] =
        UCM_HOOK_ENTRY("shmdt", ucm_shmdt, ucm_orig_shmdt,
                       UCM_EVENT_SHMDT | UCM_EVENT_VM_UNMAPPED, 1),
    [UCM_HOOK_BRK] = UCM_HOOK_ENTRY(
        "brk", ucm_brk, ucm_mmap_brk_raw,
        UCM_EVENT_BRK | UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED, 1),
    [UCM_HOOK_SBRK] = UCM_HOOK_ENTRY(
        "sbrk", ucm_sbrk, ucm_mmap_sbrk_raw,
        UCM_EVENT_SBRK | UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED, 1),
    [UCM_HOOK_FTRUNCATE] =
        UCM_HOOK_ENTRY("ftruncate", ucm_trunc_ftruncate,
                       ucm_trunc_ftruncate_raw, UCM_EVENT_VM_UNMAPPED, 1),
    [UCM_HOOK_FTRUNCATE64] =
        UCM_HOOK_ENTRY("ftruncate64", ucm_trunc_ftruncate,
                       ucm_trunc_ftruncate_raw, UCM_EVENT_VM_UNMAPPED, 1),
    [UCM_HOOK_TRUNCATE] =
        UCM_HOOK_ENTRY("truncate", ucm_trunc_truncate, ucm_trunc_truncate_raw,
                       UCM_EVENT_VM_UNMAPPED, 1),
    [UCM_HOOK_TRUNCATE64] =
        UCM_HOOK_ENTRY("truncate64", ucm_trunc_truncate, ucm_trunc_truncate_raw,
                       UCM_EVENT_VM_UNMAPPED, 1),
    [UCM_HOOK_FALLOCATE] =
        UCM_HOOK_ENTRY("fallocate", ucm_trunc_fallocate,
                       ucm_trunc_fallocate_raw, UCM_EVENT_VM_UNMAPPED, 1),
    [UCM_HOOK_FALLOCATE64] =
        UCM_HOOK_ENTRY("fallocate64", ucm_trunc_fallocate,
                       ucm_trunc_fallocate_raw, UCM_EVENT_VM_UNMAPPED, 1),
    [UCM_HOOK_MEMFD_CREATE] =
        UCM_HOOK_ENTRY("memfd_create", ucm_memfd_create, ucm_memfd_create_raw,
                       UCM_EVENT_VM_UNMAPPED, 1),
    [UCM_HOOK_MALLOC]  = UCM_HEAP_ENTRY("malloc", ucm_heap_malloc),
    [UCM_HOOK_CALLOC]  = UCM_HEAP_ENTRY("calloc", ucm_heap_calloc),
    [UCM_HOOK_REALLOC] = UCM_HEAP_ENTRY("realloc", ucm_heap_realloc),
    [UCM_HOOK_REALLOCARRAY] =
        UCM_HEAP_ENTRY("reallocarray", ucm_heap_reallocarray),
    [UCM_HOOK_FREE]     = UCM_HEAP_ENTRY("free", ucm_heap_free),
    [UCM_HOOK_MEMALIGN] = UCM_HEAP_ENTRY("memalign", ucm_heap_memalign),
    [UCM_HOOK_POSIX_MEMALIGN] =
        UCM_HEAP_ENTRY("posix_memalign", ucm_heap_posix_memalign),
    [UCM_HOOK_ALIGNED_ALLOC] =
        UCM_HEAP_ENTRY("aligned_alloc", ucm_heap_aligned_alloc),
    [UCM_HOOK_VALLOC]  = UCM_HEAP_ENTRY("valloc", ucm_heap_valloc),
    [UCM_HOOK_PVALLOC] = UCM_HEAP_ENTRY("pvalloc", ucm_heap_pvalloc),
    [UCM_HOOK_MALLOC_TRIM] =
        UCM_HEAP_ENTRY("malloc_trim", ucm_heap_malloc_trim),
    [UCM_HOOK_MALLOPT] = UCM_HEAP_ENTRY("mallopt", ucm_heap_mallopt),
    [UCM_HOOK_DLOPEN]  = UCM_HOOK_ENTRY("dlopen", ucm_dlopen_hook, NULL, 0, 0),
    [UCM_HOOK_DLCLOSE] =
        UCM_HOOK_ENTRY("dlclose", ucm_dlclose_hook, NULL, 0, 0),
    [UCM_HOOK_DLMOPEN] =
        UCM_HOOK_ENTRY("dlmopen", ucm_dlmopen_hook, NULL, 0, 0)};

static ucm_hook_func_t ucm_hook_syscall_func = UCM_HOOK_ENTRY(
    "syscall", ucm_syscall_hook, ucm_syscall_raw,
    UCM_EVENT_MMAP | UCM_EVENT_MUNMAP | UCM_EVENT_MREMAP | UCM_EVENT_MADVISE |
        UCM_EVENT_SHMAT | UCM_EVENT_SHMDT | UCM_EVENT_BRK |
        UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED,
    1);

static ucm_hook_func_t *ucm_mmap_hook(unsigned id)
{
    return (id < UCM_HOOK_LAST) ? &ucm_hook_funcs[id] : &ucm_hook_syscall_func;
}

pthread_mutex_t ucm_mmap_install_lock = PTHREAD_MUTEX_INITIALIZER;
static int ucm_mmap_installed; /* 1: done, -1: failed */
static ucm_mmap_hook_mode_t ucm_mmap_mode = UCM_MMAP_HOOK_NONE;
static double ucm_mmap_install_usec;

void ucm_mmap_init(void)
{
    ucm_hook_func_t *f;
    void *addr;

    unsigned id;

    for (id = 0; id < UCM_MMAP_NHOOKS; ++id) {
        f    = ucm_mmap_hook(id);
        addr = dlsym(RTLD_NEXT, f->symbol);
        if (addr == NULL) {
            addr = dlsym(RTLD_DEFAULT, f->symbol);
        }
        ucm_hot.orig[id] = addr;
        f->next          = addr;
    }
}

/* dlopen/dlclose replacements (reloc): patch what was loaded. */
static void *ucm_dlopen_hook(const char *filename, int flag)
{
    void *handle =
        ucm_reloc_dlopen_as(filename, flag, __builtin_return_address(0),
                            UCM_HOOK_ORIG(UCM_HOOK_DLOPEN, ucm_dlopen_func_t));

    ucm_reloc_update();
    return handle;
}

static int ucm_dlclose_hook(void *handle)
{
    int ret = UCM_HOOK_ORIG(UCM_HOOK_DLCLOSE, ucm_dlclose_func_t)(handle);

    ucm_reloc_update();
    return ret;
}

static void *ucm_dlmopen_hook(Lmid_t lmid, const char *filename, int flag)
{
    void *handle = UCM_HOOK_ORIG(UCM_HOOK_DLMOPEN,
                                 ucm_dlmopen_func_t)(lmid, filename, flag);

    ucm_reloc_update();
    return handle;
}

void *ucm_dlopen(const char *filename, int flag)
{
    void *handle =
        ucm_reloc_dlopen_as(filename, flag, __builtin_return_address(0),
                            UCM_HOOK_ORIG(UCM_HOOK_DLOPEN, ucm_dlopen_func_t));

    ucm_reloc_update();
    return handle;
}

/* ---- bistro ---- */

typedef struct {
    ucm_elf_dyn_t dyn;
    int found;
} ucm_mmap_libc_ctx_t;

static int ucm_mmap_find_libc_cb(struct dl_phdr_info *info, size_t size,
                                 void *arg)
{
    ucm_mmap_libc_ctx_t *ctx = arg;
    const char *base;

    if (info->dlpi_name == NULL) {
        return 0;
    }
    base = strrchr(info->dlpi_name, '/');
    base = (base != NULL) ? base + 1 : info->dlpi_name;
    if (strncmp(base, "libc.so", 7) ||
        (ucm_elf_dyn_parse(info, &ctx->dyn) != 0)) {
        return 0;
    }
    ctx->found = 1;
    return 1;
}

/* Symbols farther than this from every target cannot be a neighbour that
 * matters (bounds the scan, not the result: neighbours are within bytes). */
#define UCM_MMAP_NEIGHBOR_RANGE 0x1000

/* One pass over libc's dynamic symbols: every target's size and neighbours. */
static void ucm_mmap_bistro_targets(const ucm_elf_dyn_t *dyn,
                                    ucm_bistro_target_t *targets)
{
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    const ElfW(Sym) * sym;
    uintptr_t addr, end;
    ucm_hook_id_t id;
    size_t i;

    memset(targets, 0, sizeof(*targets) * UCM_MMAP_NHOOKS);
    for (id = 0; id < UCM_MMAP_NHOOKS; ++id) {
        if (!ucm_mmap_hook(id)->libc) {
            continue;
        }
        sym = ucm_elf_sym_find(dyn, ucm_mmap_hook(id)->symbol);
        if ((sym != NULL) && (ELF64_ST_TYPE(sym->st_info) == STT_FUNC)) {
            targets[id].entry = dyn->base + sym->st_value;
            targets[id].end   = targets[id].entry + sym->st_size;
        }
    }
    for (id = 0; id < UCM_MMAP_NHOOKS; ++id) {
        if (targets[id].entry != 0) {
            lo = ucs_min(lo, targets[id].entry);
            hi = ucs_max(hi, targets[id].entry);
        }
    }
    for (i = 1; i < dyn->nsyms; ++i) {
        sym  = &dyn->symtab[i];
        addr = dyn->base + sym->st_value;
        /* only functions next to a target matter (a short jump reaches 127
         * bytes): one compare rejects the others */
        if ((addr + UCM_MMAP_NEIGHBOR_RANGE < lo) ||
            (addr > hi + UCM_MMAP_NEIGHBOR_RANGE) || (sym->st_value == 0) ||
            (ELF64_ST_TYPE(sym->st_info) != STT_FUNC)) {
            continue;
        }
        end = addr + sym->st_size;
        for (id = 0; id < UCM_MMAP_NHOOKS; ++id) {
            if (targets[id].entry == 0) {
                continue;
            }
            if ((addr > targets[id].entry) &&
                ((targets[id].next_start == 0) ||
                 (addr < targets[id].next_start))) {
                targets[id].next_start = addr;
            }
            if ((addr < targets[id].entry) && (end > targets[id].prev_end)) {
                targets[id].prev_end = end;
            }
        }
    }
}

/* Patch every libc function; those that fail are left for reloc. */
static void ucm_mmap_install_bistro(void)
{
    ucm_bistro_target_t targets[UCM_MMAP_NHOOKS];
    ucm_bistro_patch_t patches[UCM_MMAP_NHOOKS];
    ucm_hook_id_t ids[UCM_MMAP_NHOOKS];
    ucm_mmap_libc_ctx_t ctx = {.found = 0};
    ucm_hook_id_t id, other;
    unsigned i, count = 0;
    void *resolved;

    ucm_dl_iterate(ucm_mmap_find_libc_cb, &ctx);
    if (!ctx.found) {
        ucm_warn("libc not found among loaded objects: bistro unavailable");
        return;
    }
    ucm_mmap_bistro_targets(&ctx.dyn, targets);
    memset(patches, 0, sizeof(patches));
    for (id = 0; id < UCM_MMAP_NHOOKS; ++id) {
        if (!ucm_mmap_hook(id)->libc ||
            (ucm_mmap_hook(id)->state != UCM_HOOK_STATE_NONE)) {
            continue;
        }
        if (targets[id].entry == 0) {
            ucm_mmap_hook(id)->detail = "symbol not found in libc";
            continue;
        }
        for (other = 0; other < id; ++other) { /* mmap/mmap64: one entry */
            if (targets[other].entry == targets[id].entry) {
                break;
            }
        }
        if (other < id) {
            continue;
        }
        patches[count].target = targets[id];
        patches[count].hook   = ucm_mmap_hook(id)->hook;
        ids[count++]          = id;
    }
    ucm_bistro_patch_all(patches, count);
    for (i = 0; i < count; ++i) {
        id = ids[i];
        if (patches[i].status != UCS_OK) {
            ucm_mmap_hook(id)->detail = patches[i].detail;
            ucm_diag("bistro: %s: %s; using reloc for it",
                     ucm_mmap_hook(id)->symbol, patches[i].detail);
            continue;
        }
        /* The patched entry serves every alias of this function.  The
         * original is our own equivalent, which no later hooker can break
         * by overwriting the entry; only when the entry already belonged to
         * another hooker do we chain to it through the trampoline. */
        for (other = 0; other < UCM_MMAP_NHOOKS; ++other) {
            if ((targets[other].entry == targets[id].entry) &&
                ucm_mmap_hook(other)->libc) {
                ucm_hot.orig[other] =
                    (patches[i].chained || (ucm_mmap_hook(other)->raw == NULL))
                        ? patches[i].orig
                        : ucm_mmap_hook(other)->raw;
                ucm_mmap_hook(other)->state = UCM_HOOK_STATE_BISTRO;
                ucm_mmap_hook(other)->detail =
                    patches[i].chained ? "chained to an earlier hooker" : "";
            }
        }
    }

    /* A library that defines these functions itself ahead of libc (e.g.
     * tcmalloc's mmap/munmap/sbrk, which issue system calls directly) is
     * never reached through the libc entries: patch the GOT slots that
     * resolve to it as well, chaining to it. */
    for (id = 0; id < UCM_MMAP_NHOOKS; ++id) {
        resolved = dlsym(RTLD_DEFAULT, ucm_mmap_hook(id)->symbol);
        if ((ucm_mmap_hook(id)->state == UCM_HOOK_STATE_BISTRO) &&
            (resolved != NULL) && ((uintptr_t)resolved != targets[id].entry)) {
            ucm_mmap_hook(id)->also_reloc = 1;
            ucm_mmap_hook(id)->detail     = "+reloc: interposed ahead of libc";
            ucm_diag("bistro: %s is interposed ahead of libc (%p): patching "
                     "its GOT slots too",
                     ucm_mmap_hook(id)->symbol, resolved);
        }
    }
}

/* GOT/PLT patching of the hooks 'ids': chains to another GOT hooker found
 * in a slot, and records the state of each. */
static ucs_status_t ucm_mmap_reloc_ids(const ucm_hook_id_t *ids, unsigned count)
{
    ucm_reloc_patch_t patches[UCM_MMAP_NHOOKS];
    ucs_status_t status;
    ucm_hook_id_t id;
    unsigned i;

    for (i = 0; i < count; ++i) {
        id                  = ids[i];
        patches[i].symbol   = ucm_mmap_hook(id)->symbol;
        patches[i].value    = ucm_mmap_hook(id)->hook;
        patches[i].expected = ucm_mmap_hook(id)->next;
        patches[i].resolved = dlsym(RTLD_DEFAULT, ucm_mmap_hook(id)->symbol);
        /* a malloc wrapper must see glibc's blocks only */
        patches[i].strict = ucm_mmap_hook(id)->heap;
    }
    status = ucm_reloc_apply(patches, count, NULL);
    /* another GOT hooker was there first: call it instead of libc, so that
     * it keeps seeing the calls we now intercept */
    for (i = 0; (status == UCS_OK) && (i < count); ++i) {
        if (patches[i].foreign != NULL) {
            ucm_hot.orig[ids[i]]          = patches[i].foreign;
            ucm_mmap_hook(ids[i])->detail = "chained to an earlier hooker";
        }
    }
    for (i = 0; i < count; ++i) {
        id = ids[i];
        if (ucm_mmap_hook(id)->state == UCM_HOOK_STATE_NONE) {
            ucm_mmap_hook(id)->state = (status == UCS_OK)
                                           ? UCM_HOOK_STATE_RELOC
                                           : UCM_HOOK_STATE_FAILED;
        }
    }
    return status;
}

/* The malloc-family wrappers are needed where a call that glibc's malloc
 * makes inside libc (sbrk, mmap, munmap, mremap, madvise) is not hooked at
 * libc's entry; returns the reason to leave them out, or NULL. */
static const char *ucm_mmap_heap_not_needed(void)
{
    static const ucm_hook_id_t internal[] = {UCM_HOOK_MMAP,   UCM_HOOK_MUNMAP,
                                             UCM_HOOK_MREMAP, UCM_HOOK_MADVISE,
                                             UCM_HOOK_BRK,    UCM_HOOK_SBRK};
    unsigned i;

    for (i = 0; i < sizeof(internal) / sizeof(internal[0]); ++i) {
        if (ucm_mmap_hook(internal[i])->state != UCM_HOOK_STATE_BISTRO) {
            break;
        }
    }
    if (i == sizeof(internal) / sizeof(internal[0])) {
        return "not needed: libc's own calls are hooked (bistro)";
    }
    if (!ucm_heap_is_glibc_malloc()) {
        return "not needed: malloc is not glibc's (its calls are hooked)";
    }
    if (!ucm_global_opts.enable_malloc_hooks ||
        !ucm_global_opts.enable_malloc_reloc) {
        return "off: UCX_MEM_MALLOC_HOOKS or UCX_MEM_MALLOC_RELOC is no";
    }
    return NULL;
}

/* GOT/PLT patching of every function not yet hooked (+ dlopen/dlclose). */
static ucs_status_t ucm_mmap_install_reloc(void)
{
    const char *heap_skip = ucm_mmap_heap_not_needed();
    ucm_hook_id_t ids[UCM_MMAP_NHOOKS];
    unsigned count = 0;
    ucm_hook_id_t id;
    unsigned k;

    if (heap_skip == NULL) {
        ucm_heap_init();
    }
    for (k = 0; k < UCM_MMAP_NHOOKS; ++k) {
        /* the hooks past ucm_mmap.h's ids are libc functions: before the
         * dlopen family, which is decided last */
        id = (k < UCM_HOOK_DLOPEN) ? k
             : (k < UCM_MMAP_NHOOKS - (UCM_HOOK_LAST - UCM_HOOK_DLOPEN))
                 ? k + (UCM_HOOK_LAST - UCM_HOOK_DLOPEN)
                 : k - (UCM_MMAP_NHOOKS - UCM_HOOK_LAST);
        if (ucm_mmap_hook(id)->heap) {
            if (heap_skip != NULL) {
                ucm_mmap_hook(id)->detail = heap_skip;
            } else if (ucm_mmap_hook(id)->state == UCM_HOOK_STATE_NONE) {
                ids[count++] = id;
            }
            continue;
        }
        /* dlopen/dlclose (listed after the libc functions) only when some
         * function is hooked by reloc: objects loaded later need it too */
        if (((ucm_mmap_hook(id)->state == UCM_HOOK_STATE_NONE) &&
             (ucm_mmap_hook(id)->libc || (count > 0))) ||
            ucm_mmap_hook(id)->also_reloc) {
            ids[count++] = id;
        }
    }
    if (count == 0) {
        return UCS_OK; /* everything is in bistro: no need to follow dlopen */
    }
    return ucm_mmap_reloc_ids(ids, count);
}

ucs_status_t ucm_mmap_install_dl_follow(void)
{
    ucm_hook_id_t ids[UCM_MMAP_NHOOKS];
    ucs_status_t status = UCS_OK;
    unsigned count      = 0;
    ucm_hook_id_t id;

    pthread_mutex_lock(&ucm_mmap_install_lock);
    for (id = 0; id < UCM_MMAP_NHOOKS; ++id) {
        if (!ucm_mmap_hook(id)->libc && !ucm_mmap_hook(id)->heap &&
            (ucm_mmap_hook(id)->state == UCM_HOOK_STATE_NONE)) {
            ids[count++] = id;
        }
    }
    if (count > 0) {
        status = ucm_mmap_reloc_ids(ids, count);
    }
    pthread_mutex_unlock(&ucm_mmap_install_lock);
    return status;
}

static double ucm_mmap_now_usec(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (ts.tv_sec * 1e6) + (ts.tv_nsec / 1e3);
}

ucs_status_t ucm_mmap_install(int events)
{
    double start, trunc_usec;
    ucs_status_t status;
    int failed = 0;

    if (!ucm_global_opts.enable_events) {
        return UCS_ERR_UNSUPPORTED;
    }
    pthread_mutex_lock(&ucm_mmap_install_lock);
    if (ucm_mmap_installed != 0) {
        status = (ucm_mmap_installed > 0) ? UCS_OK : UCS_ERR_UNSUPPORTED;
        goto out_unlock;
    }
    if (ucm_global_opts.mmap_hook_mode == UCM_MMAP_HOOK_NONE) {
        ucm_debug("mmap hook mode is 'none': memory events unavailable");
        status = UCS_ERR_UNSUPPORTED;
        goto out_unlock; /* not final: the mode may still be changed */
    }

    start = ucm_mmap_now_usec();
    if (ucm_global_opts.mmap_hook_mode == UCM_MMAP_HOOK_BISTRO) {
        ucm_mmap_install_bistro();
    }
    status                = ucm_mmap_install_reloc();
    ucm_mmap_install_usec = ucm_mmap_now_usec() - start;
    ucm_mmap_mode         = ucm_global_opts.mmap_hook_mode;
    if (status != UCS_OK) {
        ucm_mmap_installed = -1;
        goto out_unlock;
    }

    /* prove it: the events must really arrive */
    status = ucm_mmap_test_events(UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED,
                                  1, &failed);
    if (status != UCS_OK) {
        ucm_error("memory hooks installed in %s mode but events 0x%x do not "
                  "arrive: memory events disabled",
                  ucm_mmap_hook_modes[ucm_mmap_mode], failed);
        ucm_mmap_installed = -1;
        goto out_unlock;
    }
    ucm_mmap_installed = 1;
    ucm_syscall_fast_update(ucm_hook_syscall_func.next);
    ucm_mmap_test_truncation(&trunc_usec);
    ucm_debug("truncation self-test: %d usec", (int)trunc_usec);
    if (ucm_filewatch_on) {
        ucm_filewatch_scan(); /* files mapped before the hooks */
    }
    ucm_debug("memory hooks installed (%s mode) in %d usec",
              ucm_mmap_hook_modes[ucm_mmap_mode], (int)ucm_mmap_install_usec);
    status = UCS_OK;

out_unlock:
    pthread_mutex_unlock(&ucm_mmap_install_lock);
    return status;
}

ucs_status_t ucm_hooks_install(void)
{
    return ucm_mmap_install(UCM_EVENT_MMAP_FAMILY);
}

unsigned ucm_hooks_query(ucm_hook_info_t *infos, unsigned max)
{
    unsigned i;

    for (i = 0; (i < UCM_MMAP_NHOOKS) && (i < max); ++i) {
        infos[i].symbol = ucm_mmap_hook(i)->symbol;
        infos[i].state  = ucm_mmap_hook(i)->state;
        infos[i].events = ucm_mmap_hook(i)->events;
        infos[i].detail = ucm_mmap_hook(i)->detail;
    }
    return UCM_MMAP_NHOOKS;
}

ucm_mmap_hook_mode_t ucm_hooks_installed_mode(void)
{
    return (ucm_mmap_installed > 0) ? ucm_mmap_mode : UCM_MMAP_HOOK_NONE;
}

double ucm_hooks_install_time_usec(void)
{
    return ucm_mmap_install_usec;
}
