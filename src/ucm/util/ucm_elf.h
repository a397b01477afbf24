/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reading the dynamic section of a loaded object (from dl_iterate_phdr):
 * symbol and string tables, relocations, RELRO range, RPATH/RUNPATH.
 * No allocation; pure reads of mapped memory.
 */
#ifndef UCM_ELF_H_
#define UCM_ELF_H_

#include <link.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ucm_elf_dyn {
    uintptr_t base; /* load bias */
    const char *name;
    const ElfW(Sym) * symtab;
    const char *strtab;
    size_t strsz;
    size_t nsyms;              /* from DT_HASH / DT_GNU_HASH, 0 if unknown */
    const uint32_t *gnu_hash;  /* DT_GNU_HASH table, NULL if absent */
    const ElfW(Rela) * jmprel; /* PLT relocations */
    size_t jmprel_count;
    const ElfW(Rela) * rela; /* other relocations (GLOB_DAT) */
    size_t rela_count;
    uintptr_t map_start; /* extent of the PT_LOAD segments */
    uintptr_t map_end;
    uintptr_t relro_start; /* PT_GNU_RELRO, page aligned; 0 if none */
    uintptr_t relro_end;
    const char *rpath; /* NULL if absent */
    const char *runpath;
} ucm_elf_dyn_t;

/* 0 on success, -1 if the object has no usable dynamic section. */
int ucm_elf_dyn_parse(const struct dl_phdr_info *info, ucm_elf_dyn_t *dyn);

/* Find a defined symbol by name (GNU hash, else linear); NULL if absent. */
const ElfW(Sym) * ucm_elf_sym_find(const ucm_elf_dyn_t *dyn, const char *name);

#endif
