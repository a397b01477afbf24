/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Calls that another libucm makes to its own internals; see
 * ucm_compat_int.h.
 *
 * A libucm built without -Bsymbolic (UCX's) calls its exported internals
 * through its PLT.  When this libucm is in the global scope and that one
 * was loaded after it into a local scope (dlopen by path, or a bundled UCX
 * whose soname was renamed), those calls bind to ours: UCX's ucm_mmap would
 * take its rwlock in its ucm_event_enter_exclusive and release ours in
 * ucm_event_leave.  So the internals that differ from UCX's first find the
 * object that called them (_dl_find_object: no lock) and, if that object
 * defines the same name itself, hand the call to its definition.
 */
#include "ucm_compat_int.h"

#include <ucm/util/ucm_elf.h>

#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <string.h>

/* Called from stock components' hooks (ucm_event_enter): glibc 2.35's
 * _dl_find_object is lock-free and async-signal-safe; the dladdr1 of older
 * glibc takes the loader's lock (docs/internals-hook-context.md). */
static struct link_map *ucm_compat_caller_map(const void *addr)
{
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 35)
    struct dl_find_object dlfo;

    return (_dl_find_object((void *)addr, &dlfo) == 0) ? dlfo.dlfo_link_map
                                                       : NULL;
#else
    struct link_map *map = NULL;
    Dl_info info;

    return dladdr1(addr, &info, (void **)&map, RTLD_DL_LINKMAP) ? map : NULL;
#endif
}

/* Every name that UCM_COMPAT_CALLER_OWN() is used with. */
static const char *const ucm_compat_caller_names[] = {
    "ucm_library_init",   "ucm_event_enter",         "ucm_event_leave",
    "ucm_event_dispatch", "ucm_reloc_modify",        "ucm_bistro_patch",
    "ucm_bistro_restore", "ucm_bistro_restore_addr", "ucm_malloc_state_reset",
    "ucm_dlmallopt_get"};

/* The last object on this thread found to define none of them (a UCX
 * module calling in a loop costs one look-up of its map, no parse).  An
 * object that replaces it at the same link map, base and dynamic section
 * would be the same file again. */
typedef struct {
    const struct link_map *map;
    ElfW(Addr) base;
    const void *ld;
} ucm_compat_caller_client_t;

static __thread ucm_compat_caller_client_t ucm_compat_caller_client
    __attribute__((tls_model("initial-exec")));

static int ucm_compat_caller_parse(const struct link_map *map,
                                   ucm_elf_dyn_t *dyn)
{
    struct dl_phdr_info info;
    ElfW(Phdr) phdr;

    memset(&phdr, 0, sizeof(phdr));
    phdr.p_type     = PT_DYNAMIC;
    phdr.p_vaddr    = (uintptr_t)map->l_ld - map->l_addr;
    info.dlpi_addr  = map->l_addr;
    info.dlpi_name  = map->l_name;
    info.dlpi_phdr  = &phdr;
    info.dlpi_phnum = 1;
    return ucm_elf_dyn_parse(&info, dyn);
}

static void *ucm_compat_caller_sym(const ucm_elf_dyn_t *dyn, const char *name)
{
    const ElfW(Sym) *sym = ucm_elf_sym_find(dyn, name);

    return ((sym != NULL) && (ELF64_ST_TYPE(sym->st_info) == STT_FUNC))
               ? (void *)(dyn->base + sym->st_value)
               : NULL;
}

void *ucm_compat_caller_definition(const void *caller, const char *name)
{
    static struct link_map *self;
    ucm_compat_caller_client_t *client = &ucm_compat_caller_client;
    struct link_map *map;
    ucm_elf_dyn_t dyn;
    unsigned i;
    void *def;

    if (self == NULL) {
        self =
            ucm_compat_caller_map((const void *)ucm_compat_caller_definition);
    }
    map = ucm_compat_caller_map(caller);
    if ((map == NULL) || (map == self) || (map->l_ld == NULL) ||
        ((map == client->map) && (map->l_addr == client->base) &&
         ((const void *)map->l_ld == client->ld))) {
        return NULL;
    }
    if (ucm_compat_caller_parse(map, &dyn) != 0) {
        return NULL;
    }
    def = ucm_compat_caller_sym(&dyn, name);
    if (def != NULL) {
        return def;
    }
    for (i = 0; i < sizeof(ucm_compat_caller_names) /
                        sizeof(ucm_compat_caller_names[0]);
         ++i) {
        if (ucm_compat_caller_sym(&dyn, ucm_compat_caller_names[i]) != NULL) {
            return NULL; /* defines some of them: not cached */
        }
    }
    client->map  = map;
    client->base = map->l_addr;
    client->ld   = map->l_ld;
    return NULL;
}
