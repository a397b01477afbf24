/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Dynamic section reader; see ucm_elf.h.
 */
#include "ucm_elf.h"
#include "ucm_sys.h"

#include <string.h>

/* glibc relocates most d_ptr entries in place; the vdso's are not: make any
 * address below the load bias absolute. */
static uintptr_t ucm_elf_ptr(const ucm_elf_dyn_t *dyn, ElfW(Addr) value)
{
    return (value < dyn->base) ? dyn->base + value : value;
}

static size_t ucm_elf_gnu_hash_nsyms(const uint32_t *hash)
{
    uint32_t nbuckets  = hash[0];
    uint32_t symoffset = hash[1];
    uint32_t bloom     = hash[2];
    const uint32_t *buckets;
    const uint32_t *chain;
    uint32_t i, last = 0;

    buckets = (const uint32_t *)((const ElfW(Addr) *)(hash + 4) + bloom);
    chain   = buckets + nbuckets;
    for (i = 0; i < nbuckets; ++i) {
        if (buckets[i] > last) {
            last = buckets[i];
        }
    }
    if (last < symoffset) {
        return symoffset;
    }
    while (!(chain[last - symoffset] & 1)) {
        ++last;
    }
    return last + 1;
}

int ucm_elf_dyn_parse(const struct dl_phdr_info *info, ucm_elf_dyn_t *dyn)
{
    const ElfW(Dyn) *d = NULL;
    size_t page        = ucm_sys_page_size();
    size_t pltrelsz = 0, relasz = 0, relaent = sizeof(ElfW(Rela));
    uintptr_t strtab = 0, symtab = 0, jmprel = 0, rela = 0;
    uintptr_t hash = 0, gnu_hash = 0;
    ElfW(Addr) rpath = 0, runpath = 0;
    int have_rpath = 0, have_runpath = 0;
    int i;

    memset(dyn, 0, sizeof(*dyn));
    dyn->base = info->dlpi_addr;
    dyn->name = (info->dlpi_name != NULL) ? info->dlpi_name : "";
    for (i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD) {
            if ((dyn->map_start == 0) ||
                (info->dlpi_addr + ph->p_vaddr < dyn->map_start)) {
                dyn->map_start = info->dlpi_addr + ph->p_vaddr;
            }
            if (info->dlpi_addr + ph->p_vaddr + ph->p_memsz > dyn->map_end) {
                dyn->map_end = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
            }
        } else if (ph->p_type == PT_DYNAMIC) {
            d = (const ElfW(Dyn) *)(info->dlpi_addr + ph->p_vaddr);
        } else if (ph->p_type == PT_GNU_RELRO) {
            dyn->relro_start = (info->dlpi_addr + ph->p_vaddr) & ~(page - 1);
            dyn->relro_end =
                (info->dlpi_addr + ph->p_vaddr + ph->p_memsz) & ~(page - 1);
        }
    }
    if (d == NULL) {
        return -1;
    }
    for (; d->d_tag != DT_NULL; ++d) {
        switch (d->d_tag) {
        case DT_STRTAB: strtab = d->d_un.d_ptr; break;
        case DT_STRSZ: dyn->strsz = d->d_un.d_val; break;
        case DT_SYMTAB: symtab = d->d_un.d_ptr; break;
        case DT_JMPREL: jmprel = d->d_un.d_ptr; break;
        case DT_PLTRELSZ: pltrelsz = d->d_un.d_val; break;
        case DT_RELA: rela = d->d_un.d_ptr; break;
        case DT_RELASZ: relasz = d->d_un.d_val; break;
        case DT_RELAENT: relaent = d->d_un.d_val; break;
        case DT_HASH: hash = d->d_un.d_ptr; break;
        case DT_GNU_HASH: gnu_hash = d->d_un.d_ptr; break;
        case DT_RPATH:
            rpath      = d->d_un.d_val;
            have_rpath = 1;
            break;
        case DT_RUNPATH:
            runpath      = d->d_un.d_val;
            have_runpath = 1;
            break;
        default: break;
        }
    }
    if ((strtab == 0) || (symtab == 0) || (relaent != sizeof(ElfW(Rela)))) {
        return -1;
    }
    dyn->strtab = (const char *)ucm_elf_ptr(dyn, strtab);
    dyn->symtab = (const ElfW(Sym) *)ucm_elf_ptr(dyn, symtab);
    if (jmprel != 0) {
        dyn->jmprel       = (const ElfW(Rela) *)ucm_elf_ptr(dyn, jmprel);
        dyn->jmprel_count = pltrelsz / sizeof(ElfW(Rela));
    }
    if (rela != 0) {
        dyn->rela       = (const ElfW(Rela) *)ucm_elf_ptr(dyn, rela);
        dyn->rela_count = relasz / sizeof(ElfW(Rela));
    }
    if (gnu_hash != 0) {
        dyn->gnu_hash = (const uint32_t *)ucm_elf_ptr(dyn, gnu_hash);
        dyn->nsyms    = ucm_elf_gnu_hash_nsyms(dyn->gnu_hash);
    } else if (hash != 0) {
        dyn->nsyms = ((const uint32_t *)ucm_elf_ptr(dyn, hash))[1];
    }
    if (have_rpath) {
        dyn->rpath = dyn->strtab + rpath;
    }
    if (have_runpath) {
        dyn->runpath = dyn->strtab + runpath;
    }
    return 0;
}

static uint32_t ucm_elf_gnu_hash(const char *name)
{
    uint32_t h = 5381;

    for (; *name != '\0'; ++name) {
        h = (h << 5) + h + (unsigned char)*name;
    }
    return h;
}

static int ucm_elf_sym_match(const ucm_elf_dyn_t *dyn, const ElfW(Sym) * sym,
                             const char *name)
{
    return (sym->st_shndx != SHN_UNDEF) && (sym->st_value != 0) &&
           !strcmp(dyn->strtab + sym->st_name, name);
}

const ElfW(Sym) * ucm_elf_sym_find(const ucm_elf_dyn_t *dyn, const char *name)
{
    const uint32_t *hash = dyn->gnu_hash;
    uint32_t nbuckets, symoffset, nbloom, h, idx;
    const uint32_t *buckets, *chain;
    size_t i;

    if (hash == NULL) {
        for (i = 1; i < dyn->nsyms; ++i) {
            if (ucm_elf_sym_match(dyn, &dyn->symtab[i], name)) {
                return &dyn->symtab[i];
            }
        }
        return NULL;
    }
    /* GNU hash: the bucket of the name, then its chain (no bloom check) */
    nbuckets  = hash[0];
    symoffset = hash[1];
    nbloom    = hash[2];
    buckets   = (const uint32_t *)((const ElfW(Addr) *)(hash + 4) + nbloom);
    chain     = buckets + nbuckets;
    h         = ucm_elf_gnu_hash(name);
    idx       = buckets[h % nbuckets];
    if (idx < symoffset) {
        return NULL;
    }
    for (;; ++idx) {
        if (((chain[idx - symoffset] | 1) == (h | 1)) &&
            ucm_elf_sym_match(dyn, &dyn->symtab[idx], name)) {
            return &dyn->symtab[idx];
        }
        if (chain[idx - symoffset] & 1) {
            return NULL;
        }
    }
}
