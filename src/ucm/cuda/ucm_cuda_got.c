/*
 * GOT/PLT patcher of libucm_cuda (see ucm_cuda_got.h).
 */
#include "ucm_cuda_got.h"
#include <ucm/util/ucm_log.h>

#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__x86_64__)
#  define UCM_CUDA_GOT_JUMP_SLOT R_X86_64_JUMP_SLOT
#  define UCM_CUDA_GOT_GLOB_DAT  R_X86_64_GLOB_DAT
#elif defined(__aarch64__)
#  define UCM_CUDA_GOT_JUMP_SLOT R_AARCH64_JUMP_SLOT
#  define UCM_CUDA_GOT_GLOB_DAT  R_AARCH64_GLOB_DAT
#endif

#ifdef UCM_CUDA_GOT_JUMP_SLOT

/* One loaded object, as found by dl_iterate_phdr. */
typedef struct ucm_cuda_got_object {
    const struct dl_phdr_info *info;
    const ElfW(Sym)           *symtab;
    const char                *strtab;
    uintptr_t                 relro_start;
    uintptr_t                 relro_end;
} ucm_cuda_got_object_t;

typedef struct ucm_cuda_got_ctx {
    const ucm_cuda_got_patch_t *patches;
    unsigned                   count;
    uintptr_t                  skip_addr;
    ucm_cuda_got_result_t      *result;
    ucs_status_t               status;
} ucm_cuda_got_ctx_t;

/* glibc stores relocated addresses in the dynamic section; other loaders
 * may keep file offsets. */
static uintptr_t ucm_cuda_got_dyn_ptr(const struct dl_phdr_info *info,
                                      ElfW(Addr) ptr)
{
    return (ptr < info->dlpi_addr) ? (info->dlpi_addr + ptr) : ptr;
}

/* Whether 'value' lies in a loaded segment of the object (lazy PLT). */
static int ucm_cuda_got_in_object(const struct dl_phdr_info *info,
                                  uintptr_t value)
{
    const ElfW(Phdr) *phdr;
    uintptr_t start;
    ElfW(Half) i;

    for (i = 0; i < info->dlpi_phnum; ++i) {
        phdr  = &info->dlpi_phdr[i];
        start = info->dlpi_addr + phdr->p_vaddr;
        if ((phdr->p_type == PT_LOAD) && (value >= start) &&
            (value < (start + phdr->p_memsz))) {
            return 1;
        }
    }
    return 0;
}

static ucs_status_t ucm_cuda_got_store(const ucm_cuda_got_object_t *object,
                                       void **slot, void *value)
{
    uintptr_t page_size = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t addr      = (uintptr_t)slot;
    void *page          = (void*)(addr & ~(page_size - 1));
    int relro;

    relro = (addr >= object->relro_start) && (addr < object->relro_end);
    if (relro && (mprotect(page, page_size, PROT_READ | PROT_WRITE) != 0)) {
        ucm_error("cannot make the GOT of '%s' writable at %p",
                           object->info->dlpi_name, (void*)slot);
        return UCS_ERR_IO_ERROR;
    }

    __atomic_store_n(slot, value, __ATOMIC_RELEASE);

    if (relro) {
        mprotect(page, page_size, PROT_READ);
    }
    return UCS_OK;
}

static void ucm_cuda_got_slot(ucm_cuda_got_ctx_t *ctx,
                              const ucm_cuda_got_object_t *object,
                              const ElfW(Rela) *rela)
{
    unsigned type                     = ELF64_R_TYPE(rela->r_info);
    const ElfW(Sym) *sym              = &object->symtab[ELF64_R_SYM(rela->r_info)];
    const char *name                  = object->strtab + sym->st_name;
    const ucm_cuda_got_patch_t *patch = NULL;
    void **slot;
    void *value;
    unsigned i;

    if (((type != UCM_CUDA_GOT_JUMP_SLOT) && (type != UCM_CUDA_GOT_GLOB_DAT)) ||
        (ELF64_R_SYM(rela->r_info) == 0) || (name[0] != 'c')) {
        return;
    }

    for (i = 0; i < ctx->count; ++i) {
        if ((ctx->patches[i].real != NULL) &&
            (strcmp(ctx->patches[i].symbol, name) == 0)) {
            patch = &ctx->patches[i];
            break;
        }
    }
    if (patch == NULL) {
        return;
    }

    slot  = (void**)(object->info->dlpi_addr + rela->r_offset);
    value = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (value == patch->hook) {
        ++ctx->result->hooked;
    } else if ((value == patch->real) ||
               ucm_cuda_got_in_object(object->info, (uintptr_t)value)) {
        if (ucm_cuda_got_store(object, slot, patch->hook) == UCS_OK) {
            ++ctx->result->written;
        } else {
            ctx->status = UCS_ERR_IO_ERROR;
        }
    } else {
        ++ctx->result->foreign;
    }
}

static void ucm_cuda_got_relocs(ucm_cuda_got_ctx_t *ctx,
                                const ucm_cuda_got_object_t *object,
                                uintptr_t relocs, size_t size)
{
    const ElfW(Rela) *rela = (const ElfW(Rela)*)relocs;
    size_t i;

    for (i = 0; i < (size / sizeof(*rela)); ++i) {
        ucm_cuda_got_slot(ctx, object, &rela[i]);
    }
}

static int ucm_cuda_got_object(struct dl_phdr_info *info, size_t size,
                               void *arg)
{
    ucm_cuda_got_ctx_t *ctx   = arg;
    const ElfW(Dyn) *dynamic  = NULL;
    uintptr_t page_size       = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t jmprel = 0, rela = 0;
    size_t jmprel_size = 0, rela_size = 0;
    ucm_cuda_got_object_t object;
    const ElfW(Phdr) *phdr;
    const ElfW(Dyn) *dyn;
    ElfW(Half) i;

    if (ucm_cuda_got_in_object(info, ctx->skip_addr)) {
        return 0;
    }

    object.info        = info;
    object.symtab      = NULL;
    object.strtab      = NULL;
    object.relro_start = 0;
    object.relro_end   = 0;
    for (i = 0; i < info->dlpi_phnum; ++i) {
        phdr = &info->dlpi_phdr[i];
        if (phdr->p_type == PT_DYNAMIC) {
            dynamic = (const ElfW(Dyn)*)(info->dlpi_addr + phdr->p_vaddr);
        } else if (phdr->p_type == PT_GNU_RELRO) {
            /* the pages the loader made read-only (whole pages only) */
            object.relro_start = (info->dlpi_addr + phdr->p_vaddr) &
                                 ~(page_size - 1);
            object.relro_end   = (info->dlpi_addr + phdr->p_vaddr +
                                  phdr->p_memsz) & ~(page_size - 1);
        }
    }
    if (dynamic == NULL) {
        return 0;
    }

    for (dyn = dynamic; dyn->d_tag != DT_NULL; ++dyn) {
        switch (dyn->d_tag) {
        case DT_SYMTAB:
            object.symtab = (const ElfW(Sym)*)ucm_cuda_got_dyn_ptr(
                    info, dyn->d_un.d_ptr);
            break;
        case DT_STRTAB:
            object.strtab = (const char*)ucm_cuda_got_dyn_ptr(
                    info, dyn->d_un.d_ptr);
            break;
        case DT_JMPREL:
            jmprel = ucm_cuda_got_dyn_ptr(info, dyn->d_un.d_ptr);
            break;
        case DT_PLTRELSZ:
            jmprel_size = dyn->d_un.d_val;
            break;
        case DT_RELA:
            rela = ucm_cuda_got_dyn_ptr(info, dyn->d_un.d_ptr);
            break;
        case DT_RELASZ:
            rela_size = dyn->d_un.d_val;
            break;
        default:
            break;
        }
    }
    if ((object.symtab == NULL) || (object.strtab == NULL)) {
        return 0;
    }

    if (jmprel != 0) {
        ucm_cuda_got_relocs(ctx, &object, jmprel, jmprel_size);
    }
    if (rela != 0) {
        ucm_cuda_got_relocs(ctx, &object, rela, rela_size);
    }
    return 0;
}

ucs_status_t ucm_cuda_got_apply(const ucm_cuda_got_patch_t *patches,
                                unsigned count, const void *skip_addr,
                                ucm_cuda_got_result_t *result)
{
    ucm_cuda_got_ctx_t ctx;

    ctx.patches   = patches;
    ctx.count     = count;
    ctx.skip_addr = (uintptr_t)skip_addr;
    ctx.result    = result;
    ctx.status    = UCS_OK;
    dl_iterate_phdr(ucm_cuda_got_object, &ctx);
    return ctx.status;
}

#else

ucs_status_t ucm_cuda_got_apply(const ucm_cuda_got_patch_t *patches,
                                unsigned count, const void *skip_addr,
                                ucm_cuda_got_result_t *result)
{
    ucm_error("GOT patching is not implemented on this "
                       "architecture");
    return UCS_ERR_UNSUPPORTED;
}

#endif
