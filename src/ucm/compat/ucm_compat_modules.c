/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Loading UCX's ucm modules through the libucs in the process; see
 * ucm_compat_int.h.
 *
 * UCX 1.13.1's libucm calls libucs's ucs_load_modules("ucm", ucm_MODULES,
 * &init_once, UCS_MODULE_LOAD_FLAG_NODELETE) before it runs the installers
 * (ucm_MODULES: ":cuda", ":rocm" or both, as configured).  libucs then
 * dlopen()s lib<framework>_<module>.so.0 from its module directory, once
 * per process; a module that is not there is skipped with a debug line.
 * This libucm depends on libc only, so the function is looked up at run
 * time, in the symbol tables of the loaded objects (a libucs that loaded
 * this libucm as its dependency may be in a local scope, which dlsym's
 * global look-up misses).  No dlopen/dlsym: a fork() in another thread
 * while those change the loader's state leaves the child a broken loader.
 * A look-up that found nothing is repeated only after another object has
 * been loaded.  A libucs without the function (this project's) loads
 * nothing.
 */
#include "ucm_compat_int.h"

#include <ucm/util/ucm_dl.h>
#include <ucm/util/ucm_elf.h>
#include <ucm/util/ucm_log.h>

#include <link.h>
#include <pthread.h>

/* Layout of UCX's ucs_init_once_t (ucs/type/init_once.h). */
typedef struct {
    pthread_mutex_t lock;
    int initialized;
} ucm_compat_init_once_t;

typedef void (*ucm_compat_load_modules_func_t)(const char *framework,
                                               const char *modules,
                                               ucm_compat_init_once_t *once,
                                               unsigned flags);

/* Every module a UCX 1.13.1 build may have (absent ones are skipped). */
#define UCM_COMPAT_MODULES              ":cuda:rocm"
#define UCM_COMPAT_MODULE_LOAD_NODELETE 1u /* UCS_MODULE_LOAD_FLAG_NODELETE */

static ucm_compat_init_once_t ucm_compat_modules_once = {
    PTHREAD_MUTEX_INITIALIZER, 0};

/* Objects loaded (dlpi_adds) when the last look-up found nothing. */
static unsigned long ucm_compat_modules_failed_adds = ~0ul;

typedef struct {
    unsigned long adds;
    void *func;
} ucm_compat_modules_find_t;

static int ucm_compat_modules_adds_cb(struct dl_phdr_info *info, size_t size,
                                      void *arg)
{
    *(unsigned long *)arg = info->dlpi_adds;
    return 1;
}

static int ucm_compat_modules_find_cb(struct dl_phdr_info *info, size_t size,
                                      void *arg)
{
    ucm_compat_modules_find_t *ctx = arg;
    const ElfW(Sym) * sym;
    ucm_elf_dyn_t dyn;

    ctx->adds = info->dlpi_adds;
    if (ucm_elf_dyn_parse(info, &dyn) != 0) {
        return 0;
    }
    sym = ucm_elf_sym_find(&dyn, "ucs_load_modules");
    if ((sym == NULL) || (sym->st_value == 0) ||
        (ELF64_ST_TYPE(sym->st_info) != STT_FUNC)) {
        return 0;
    }
    ctx->func = (void *)(dyn.base + sym->st_value);
    return 1;
}

static ucm_compat_load_modules_func_t ucm_compat_modules_loader(void)
{
    ucm_compat_modules_find_t ctx = {0, NULL};
    unsigned long adds            = 0;

    ucm_dl_iterate(ucm_compat_modules_adds_cb, &adds);
    if (adds ==
        __atomic_load_n(&ucm_compat_modules_failed_adds, __ATOMIC_RELAXED)) {
        return NULL; /* nothing loaded since the last look-up */
    }
    ucm_dl_iterate(ucm_compat_modules_find_cb, &ctx);
    if (ctx.func == NULL) {
        __atomic_store_n(&ucm_compat_modules_failed_adds, adds,
                         __ATOMIC_RELAXED);
    }
    return (ucm_compat_load_modules_func_t)ctx.func;
}

void ucm_compat_modules_load(void)
{
    ucm_compat_load_modules_func_t load;

    if (__atomic_load_n(&ucm_compat_modules_once.initialized,
                        __ATOMIC_ACQUIRE)) {
        return; /* libucs has done it (it sets the flag under its lock) */
    }
    load = ucm_compat_modules_loader();
    if (load == NULL) {
        return;
    }
    ucm_debug("loading UCX's ucm modules (%s) through libucs's "
              "ucs_load_modules %p",
              UCM_COMPAT_MODULES, (void *)load);
    load("ucm", UCM_COMPAT_MODULES, &ucm_compat_modules_once,
         UCM_COMPAT_MODULE_LOAD_NODELETE);
}
