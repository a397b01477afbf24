/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX 1.13.1's GPU memory-type module (libucm_cuda.so, built from UCX's
 * source against the test-only fake CUDA toolkit, test/compat/fakecuda-
 * toolkit: no GPU, no CUDA) on the libucm.so.0 that the loader finds: ours,
 * or UCX's own for the baseline.  Run by contrib/ucx-cuda-module.sh.
 *
 * Compiled against UCX's own <ucm/api/ucm.h>, linked to UCX's libucs and
 * libucm (libucs applies UCX_MEM_MMAP_HOOK_MODE and UCX_MEM_CUDA_HOOK_MODE
 * through ucm_set_global_opts, and UCX's libucm loads its modules through
 * libucs), and to a library that makes the CUDA calls through its GOT
 * (compat_ucx_cuda_user.c).
 *
 *   compat_ucx_cuda_module --dlopen MODULE LATE_USER_LIB
 *       dlopen()s MODULE (libucm_cuda.so.0) before the handler is set
 *   compat_ucx_cuda_module --framework LATE_USER_LIB
 *       leaves the loading to libucm, as in a UCX application: UCX's libucm
 *       (or ours) has libucs's module loader dlopen libucm_cuda.so.0 from
 *       UCX_MODULE_DIR when the handler is set
 *
 * Then: a MEM_TYPE_ALLOC|FREE handler with UCM_EVENT_FLAG_EXISTING_ALLOC,
 * and each CUDA allocation and release call checked for exactly the events
 * UCX 1.13.1's module raises (cudamem.c): allocations as MEM_TYPE_ALLOC
 * with the pointer, the requested size (width * height for the pitched
 * ones) and UCS_MEMORY_TYPE_LAST ("unknown, let the memory domain detect
 * it"); releases as MEM_TYPE_FREE with the size cuMemGetAddressRange gives
 * and UCS_MEMORY_TYPE_CUDA (HOST for cuMemFreeHost/cudaFreeHost).  The
 * driver API is hooked in either cuda hook mode; the runtime API only when
 * UCX_MEM_CUDA_HOOK_MODE has reloc; with "none" (a bitmap with only the
 * "none" bit) nothing is hooked, and with an empty bitmap setting the
 * handler fails with UCS_ERR_UNSUPPORTED.  The existing allocations a new
 * handler hears of are the inaccessible mappings in /proc/self/maps (a real
 * driver's address reservations): a cuMemAddressReserve() made before.
 *
 * Prints PASS/FAIL per check and "N passed, N failed"; exit status 0 when
 * none failed, 1 otherwise.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr, dl_iterate_phdr */
#endif
#include "compat_ucx_cuda_user.h"

#include <ucm/api/ucm.h>

#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define COMPAT_MAX_EVENTS 1024
#define COMPAT_SIZE       (3 * 65536 + 100) /* not page-aligned */
#define COMPAT_RESV_SIZE  (64 * 65536)

/* UCX 1.13.1's ucm_mmap_hook_mode_t values (ucm/util/sys.h), the bits of
 * ucm_global_opts.cuda_hook_modes */
#define COMPAT_HOOK_RELOC  1
#define COMPAT_HOOK_BISTRO 2

typedef struct {
    ucm_event_type_t type;
    void *address;
    size_t size;
    ucs_memory_type_t mem_type;
} compat_event_t;

static compat_event_t compat_events[COMPAT_MAX_EVENTS];
static unsigned compat_num_events; /* may exceed COMPAT_MAX_EVENTS */
static int compat_passed, compat_failed;

/* Hook context: no allocation, no lock. */
static void compat_event_cb(ucm_event_type_t event_type, ucm_event_t *event,
                            void *arg)
{
    unsigned i = __atomic_fetch_add(&compat_num_events, 1, __ATOMIC_RELAXED);

    if (i < COMPAT_MAX_EVENTS) {
        compat_events[i].type     = event_type;
        compat_events[i].address  = event->mem_type.address;
        compat_events[i].size     = event->mem_type.size;
        compat_events[i].mem_type = event->mem_type.mem_type;
    }
}

static void compat_events_reset(void)
{
    __atomic_store_n(&compat_num_events, 0, __ATOMIC_RELAXED);
}

static unsigned compat_events_count(void)
{
    return __atomic_load_n(&compat_num_events, __ATOMIC_RELAXED);
}

static void compat_check(int ok, const char *what, const char *detail)
{
    if (ok) {
        ++compat_passed;
        printf("PASS: %s\n", what);
    } else {
        ++compat_failed;
        printf("FAIL: %s%s%s\n", what, detail[0] ? ": " : "", detail);
    }
    fflush(stdout);
}

static const char *compat_event_name(ucm_event_type_t type)
{
    return (type == UCM_EVENT_MEM_TYPE_ALLOC)  ? "ALLOC"
           : (type == UCM_EVENT_MEM_TYPE_FREE) ? "FREE"
                                               : "other";
}

/* Exactly the one event (type, address, size, mem_type) since the last
 * reset, or none when expect is 0. */
static void compat_expect(const char *what, int expect, ucm_event_type_t type,
                          void *address, size_t size, ucs_memory_type_t mtype)
{
    unsigned n = compat_events_count();
    compat_event_t *e;
    char detail[256];

    detail[0] = '\0';
    if (!expect) {
        if (n != 0) {
            e = &compat_events[0];
            snprintf(detail, sizeof(detail),
                     "%u unexpected event(s), first %s %p size %zu type %d", n,
                     compat_event_name(e->type), e->address, e->size,
                     (int)e->mem_type);
        }
        compat_check(n == 0, what, detail);
        return;
    }
    if (n != 1) {
        snprintf(detail, sizeof(detail),
                 "%u events, expected one %s %p size %zu type %d", n,
                 compat_event_name(type), address, size, (int)mtype);
        compat_check(0, what, detail);
        return;
    }
    e = &compat_events[0];
    if ((e->type != type) || (e->address != address) || (e->size != size) ||
        (e->mem_type != mtype)) {
        snprintf(detail, sizeof(detail),
                 "got %s %p size %zu type %d, expected %s %p size %zu type %d",
                 compat_event_name(e->type), e->address, e->size,
                 (int)e->mem_type, compat_event_name(type), address, size,
                 (int)mtype);
    }
    compat_check(detail[0] == '\0', what, detail);
}

static int compat_module_loaded_cb(struct dl_phdr_info *info, size_t size,
                                   void *arg)
{
    if (strstr(info->dlpi_name, "/libucm_cuda.so") != NULL) {
        *(const char **)arg = info->dlpi_name;
        return 1;
    }
    return 0;
}

static const char *compat_module_path(void)
{
    const char *path = NULL;

    dl_iterate_phdr(compat_module_loaded_cb, &path);
    return path;
}

/* One allocation and its release through ops; prefix names the caller. */
static void compat_test_api(const compat_ucx_cuda_user_ops_t *ops,
                            const char *prefix, int driver, int runtime)
{
    char what[160];
    size_t pitch;
    void *ptr;

#define COMPAT_WHAT(_fmt)                                                      \
    (snprintf(what, sizeof(what), "%s " _fmt, prefix), what)
#define COMPAT_CALL(_call)                                                     \
    do {                                                                       \
        compat_events_reset();                                                 \
        if ((_call) != 0) {                                                    \
            compat_check(0, what, #_call " failed");                           \
            return;                                                            \
        }                                                                      \
    } while (0)

    /* driver API */
    COMPAT_WHAT("cuMemAlloc: ALLOC ptr size=requested type=LAST");
    COMPAT_CALL(ops->cu_alloc(&ptr, COMPAT_SIZE));
    compat_expect(what, driver, UCM_EVENT_MEM_TYPE_ALLOC, ptr, COMPAT_SIZE,
                  UCS_MEMORY_TYPE_LAST);
    COMPAT_WHAT("cuMemFree: FREE ptr size=allocated type=CUDA");
    COMPAT_CALL(ops->cu_free(ptr));
    compat_expect(what, driver, UCM_EVENT_MEM_TYPE_FREE, ptr, COMPAT_SIZE,
                  UCS_MEMORY_TYPE_CUDA);

    COMPAT_WHAT("cuMemAllocManaged: ALLOC ptr size type=LAST");
    COMPAT_CALL(ops->cu_alloc_managed(&ptr, COMPAT_SIZE));
    compat_expect(what, driver, UCM_EVENT_MEM_TYPE_ALLOC, ptr, COMPAT_SIZE,
                  UCS_MEMORY_TYPE_LAST);
    COMPAT_CALL(ops->cu_free(ptr));

    COMPAT_WHAT("cuMemAllocPitch: ALLOC ptr size=width*height type=LAST");
    COMPAT_CALL(ops->cu_alloc_pitch(&ptr, &pitch, 1000, 30));
    compat_expect(what, driver, UCM_EVENT_MEM_TYPE_ALLOC, ptr, 1000 * 30,
                  UCS_MEMORY_TYPE_LAST);
    COMPAT_WHAT("cuMemFree(pitched): FREE size=pitch*height type=CUDA");
    COMPAT_CALL(ops->cu_free(ptr));
    compat_expect(what, driver, UCM_EVENT_MEM_TYPE_FREE, ptr, pitch * 30,
                  UCS_MEMORY_TYPE_CUDA);

    COMPAT_WHAT("cuMemAllocHost: no event (not hooked)");
    COMPAT_CALL(ops->cu_alloc_host(&ptr, COMPAT_SIZE));
    compat_expect(what, 0, 0, NULL, 0, 0);
    COMPAT_WHAT("cuMemFreeHost: FREE ptr size type=HOST");
    COMPAT_CALL(ops->cu_free_host(ptr));
    compat_expect(what, driver, UCM_EVENT_MEM_TYPE_FREE, ptr, COMPAT_SIZE,
                  UCS_MEMORY_TYPE_HOST);

    /* runtime API */
    COMPAT_WHAT("cudaMalloc: ALLOC ptr size type=LAST");
    COMPAT_CALL(ops->rt_alloc(&ptr, COMPAT_SIZE));
    compat_expect(what, runtime, UCM_EVENT_MEM_TYPE_ALLOC, ptr, COMPAT_SIZE,
                  UCS_MEMORY_TYPE_LAST);
    COMPAT_WHAT("cudaFree: FREE ptr size type=CUDA");
    COMPAT_CALL(ops->rt_free(ptr));
    compat_expect(what, runtime, UCM_EVENT_MEM_TYPE_FREE, ptr, COMPAT_SIZE,
                  UCS_MEMORY_TYPE_CUDA);

    COMPAT_WHAT("cudaMallocManaged: ALLOC ptr size type=LAST");
    COMPAT_CALL(ops->rt_alloc_managed(&ptr, COMPAT_SIZE));
    compat_expect(what, runtime, UCM_EVENT_MEM_TYPE_ALLOC, ptr, COMPAT_SIZE,
                  UCS_MEMORY_TYPE_LAST);
    COMPAT_CALL(ops->rt_free(ptr));

    COMPAT_WHAT("cudaMallocPitch: ALLOC ptr size=width*height type=LAST");
    COMPAT_CALL(ops->rt_alloc_pitch(&ptr, &pitch, 1000, 30));
    compat_expect(what, runtime, UCM_EVENT_MEM_TYPE_ALLOC, ptr, 1000 * 30,
                  UCS_MEMORY_TYPE_LAST);
    COMPAT_CALL(ops->rt_free(ptr));

    COMPAT_WHAT("cudaMallocHost: no event (not hooked)");
    COMPAT_CALL(ops->rt_alloc_host(&ptr, COMPAT_SIZE));
    compat_expect(what, 0, 0, NULL, 0, 0);
    COMPAT_WHAT("cudaFreeHost: FREE ptr size type=HOST");
    COMPAT_CALL(ops->rt_free_host(ptr));
    compat_expect(what, runtime, UCM_EVENT_MEM_TYPE_FREE, ptr, COMPAT_SIZE,
                  UCS_MEMORY_TYPE_HOST);

#undef COMPAT_CALL
#undef COMPAT_WHAT
}

/* The events of the new handler's existing-allocation scan: one ALLOC with
 * type LAST covering the reservation. */
static void compat_check_existing(void *resv, size_t size)
{
    unsigned n = compat_events_count();
    unsigned i;
    uintptr_t start = (uintptr_t)resv, end = start + size, s, e;
    compat_event_t *ev;
    char detail[128];
    int found = 0;

    for (i = 0; (i < n) && (i < COMPAT_MAX_EVENTS); ++i) {
        ev = &compat_events[i];
        s  = (uintptr_t)ev->address;
        e  = s + ev->size;
        if ((ev->type == UCM_EVENT_MEM_TYPE_ALLOC) &&
            (ev->mem_type == UCS_MEMORY_TYPE_LAST) && (s <= start) &&
            (e >= end)) {
            found = 1;
        }
    }
    snprintf(detail, sizeof(detail),
             "%u existing-allocation events, none covers %p..%p", n, resv,
             (void *)end);
    compat_check(found,
                 "EXISTING_ALLOC: a cuMemAddressReserve() made before the "
                 "handler is reported (ALLOC type=LAST)",
                 detail);
}

int main(int argc, char **argv)
{
    const compat_ucx_cuda_user_ops_t *late_ops;
    const char *module = NULL, *late_path, *path;
    int cuda_modes, driver, runtime;
    void *resv = NULL, *pre, *late, *handle;
    ucs_status_t status;
    char detail[256];
    Dl_info info;

    if ((argc == 4) && !strcmp(argv[1], "--dlopen")) {
        module    = argv[2];
        late_path = argv[3];
    } else if ((argc == 3) && !strcmp(argv[1], "--framework")) {
        late_path = argv[2];
    } else {
        fprintf(stderr,
                "usage: %s --dlopen MODULE LATE_USER_LIB | --framework "
                "LATE_USER_LIB\n",
                argv[0]);
        return 2;
    }

    /* what libucs made of the environment */
    cuda_modes = ucm_global_opts.cuda_hook_modes;
    driver     = (cuda_modes &
              ((1 << COMPAT_HOOK_RELOC) | (1 << COMPAT_HOOK_BISTRO))) != 0;
    runtime    = (cuda_modes & (1 << COMPAT_HOOK_RELOC)) != 0;
    dladdr((void *)ucm_set_event_handler, &info);
    printf("libucm: %s\n", info.dli_fname);
    printf("mmap hook mode %d, cuda hook modes 0x%x: driver API %s, runtime "
           "API %s; module %s\n",
           (int)ucm_global_opts.mmap_hook_mode, cuda_modes,
           driver ? "hooked" : "not hooked", runtime ? "hooked" : "not hooked",
           module ? "dlopen()ed" : "loaded by libucm's module framework");

    /* made before any handler: a reservation, and a block freed later */
    if ((compat_ucx_cuda_user_ops.cu_reserve(&resv, COMPAT_RESV_SIZE) != 0) ||
        (compat_ucx_cuda_user_ops.cu_alloc(&pre, COMPAT_SIZE) != 0)) {
        compat_check(0, "allocations before the handler", "fake CUDA failed");
        goto out;
    }

    if (module != NULL) {
        handle = dlopen(module, RTLD_NOW | RTLD_LOCAL);
        compat_check(handle != NULL, "dlopen(libucm_cuda) on this libucm",
                     (handle == NULL) ? dlerror() : "");
    }

    compat_events_reset();
    status = ucm_set_event_handler(UCM_EVENT_MEM_TYPE_ALLOC |
                                       UCM_EVENT_MEM_TYPE_FREE |
                                       UCM_EVENT_FLAG_EXISTING_ALLOC,
                                   0, compat_event_cb, NULL);
    path   = compat_module_path();
    compat_check(path != NULL, "libucm_cuda.so loaded",
                 "not in the process (the other checks are not run)");
    if (path == NULL) {
        goto out;
    }
    snprintf(detail, sizeof(detail), "%s", ucs_status_string(status));
    if (cuda_modes == 0) {
        compat_check(status == UCS_ERR_UNSUPPORTED,
                     "no cuda hook mode at all: ucm_set_event_handler fails "
                     "with UCS_ERR_UNSUPPORTED",
                     detail);
        goto out;
    }
    compat_check(status == UCS_OK, "ucm_set_event_handler(MEM_TYPE_ALLOC|FREE)",
                 detail);
    if (status != UCS_OK) {
        goto out;
    }
    compat_check_existing(resv, COMPAT_RESV_SIZE);

    compat_events_reset();
    compat_ucx_cuda_user_ops.cu_free(pre);
    compat_expect("cuMemFree of a block from before the handler: FREE ptr "
                  "size type=CUDA",
                  driver, UCM_EVENT_MEM_TYPE_FREE, pre, COMPAT_SIZE,
                  UCS_MEMORY_TYPE_CUDA);

    compat_test_api(&compat_ucx_cuda_user_ops, "[linked lib]", driver, runtime);

    /* a library loaded after the hooks (-fno-plt, full RELRO) */
    late = dlopen(late_path, RTLD_NOW | RTLD_LOCAL);
    compat_check(late != NULL, "dlopen(user library) after the hooks",
                 (late == NULL) ? dlerror() : "");
    if (late != NULL) {
        late_ops = dlsym(late, "compat_ucx_cuda_user_ops");
        if (late_ops != NULL) {
            compat_test_api(late_ops, "[dlopen()ed lib]", driver, runtime);
        }
    }

    ucm_unset_event_handler(UCM_EVENT_MEM_TYPE_ALLOC | UCM_EVENT_MEM_TYPE_FREE,
                            compat_event_cb, NULL);
    compat_events_reset();
    compat_ucx_cuda_user_ops.cu_alloc(&pre, COMPAT_SIZE);
    compat_ucx_cuda_user_ops.cu_free(pre);
    compat_expect("after ucm_unset_event_handler: no event", 0, 0, NULL, 0, 0);

out:
    if (resv != NULL) {
        compat_ucx_cuda_user_ops.cu_unreserve(resv, COMPAT_RESV_SIZE);
    }
    printf("%d passed, %d failed\n", compat_passed, compat_failed);
    return (compat_failed == 0) ? 0 : 1;
}
