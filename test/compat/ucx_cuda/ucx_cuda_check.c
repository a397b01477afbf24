/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Device check (build.sh): UCX 1.13.1's own libucm_cuda module
 * (src/ucm/cuda/cudamem.c compiled unmodified) loaded on OUR libucm, with a
 * real GPU.  Oracles: the addresses cuMemAlloc_v2 returns must arrive as
 * MEM_TYPE_ALLOC events, the ones freed as MEM_TYPE_FREE (size from the
 * driver); the driver calls must still succeed through the trampolines.
 * Also: ucm_bistro_patch with an original on each of the 9 driver entries
 * UCX patches, then restore (bytes compared).
 *
 *   ucx_cuda_check MODULE.so   (GPUCHECK_BISTRO_EACH=1: the patch check)
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef int CUdevice;
typedef void *CUcontext;

/* linked (through this program's PLT: the reloc hook mode sees these) */
CUresult cuInit(unsigned flags);
CUresult cuDeviceGet(CUdevice *dev, int ordinal);
CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t size);
CUresult cuMemFree_v2(CUdeviceptr p);

/* our libucm (UCX 1.13 API + the compat names) */
typedef union {
    struct {
        void *address;
        size_t size;
        int mem_type;
    } mem_type;
    char pad[64];
} ev_t;
typedef void (*cb_t)(int type, ev_t *ev, void *arg);
int ucm_set_event_handler(int events, int prio, cb_t cb, void *arg);
void ucm_unset_event_handler(int events, cb_t cb, void *arg);
int ucm_bistro_patch(void *f, void *hook, const char *sym, void **orig,
                     void **rp);
int ucm_bistro_restore(void *rp);

#define EV_ALLOC    (1 << 20)
#define EV_FREE     (1 << 21)
#define EV_EXISTING (1 << 25)

static struct {
    int allocs, frees;
    void *last_alloc, *last_free;
    size_t alloc_size, free_size;
} seen;
static int existing;

static void cb(int type, ev_t *ev, void *arg)
{
    (void)arg;
    if (type == EV_ALLOC) {
        ++seen.allocs;
        seen.last_alloc = ev->mem_type.address;
        seen.alloc_size = ev->mem_type.size;
    } else if (type == EV_FREE) {
        ++seen.frees;
        seen.last_free = ev->mem_type.address;
        seen.free_size = ev->mem_type.size;
    }
}

static void existing_cb(int type, ev_t *ev, void *arg)
{
    (void)ev;
    (void)arg;
    existing += (type == EV_ALLOC);
}

static int dummy_hook(void)
{
    return 999;
}

static const char *driver_syms[] = {
    "cuMemAlloc",      "cuMemAlloc_v2",      "cuMemAllocManaged",
    "cuMemAllocPitch", "cuMemAllocPitch_v2", "cuMemFree",
    "cuMemFree_v2",    "cuMemFreeHost",      "cuMemFreeHost_v2"};

static int check_bistro_each(void *libcuda)
{
    unsigned char before[16];
    void *orig, *rp, *f;
    int i, st, bad = 0, j;

    for (i = 0; i < 9; ++i) {
        f = dlsym(libcuda, driver_syms[i]);
        if (f == NULL) {
            printf("bistro %-20s: not in libcuda\n", driver_syms[i]);
            continue;
        }
        memcpy(before, f, sizeof(before));
        orig = rp = NULL;
        st =
            ucm_bistro_patch(f, (void *)dummy_hook, driver_syms[i], &orig, &rp);
        printf("bistro %-20s: patch status %d, first bytes", driver_syms[i],
               st);
        for (j = 0; j < 12; ++j) {
            printf(" %02x", before[j]);
        }
        printf("\n");
        if (st != 0) {
            bad = 1;
            continue;
        }
        if (((int (*)(void))f)() != 999) {
            printf("  FAIL: patched entry did not reach the hook\n");
            bad = 1;
        }
        if (ucm_bistro_restore(rp) != 0 || memcmp(before, f, 16)) {
            printf("  FAIL: restore\n");
            bad = 1;
        }
    }
    return bad;
}

int main(int argc, char **argv)
{
    void *libcuda, *module;
    CUdeviceptr p = 0;
    CUcontext ctx;
    CUdevice dev;
    int st, fail = 0;

    if (argc < 2) {
        return 2;
    }
    setvbuf(stdout, NULL, _IONBF, 0);
    libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (libcuda == NULL) {
        printf("SKIP: %s\n", dlerror());
        return 77;
    }
    if ((cuInit(0) != 0) || (cuDeviceGet(&dev, 0) != 0) ||
        (cuDevicePrimaryCtxRetain(&ctx, dev) != 0) ||
        (cuCtxSetCurrent(ctx) != 0)) {
        printf("SKIP: no usable CUDA device\n");
        return 77;
    }
    if (getenv("GPUCHECK_BISTRO_EACH") != NULL) {
        fail |= check_bistro_each(libcuda);
    }

    module = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
    if (module == NULL) {
        printf("FAIL: %s\n", dlerror());
        return 1;
    }
    st = ucm_set_event_handler(EV_ALLOC | EV_FREE, 0, cb, NULL);
    printf("ucm_set_event_handler(MEM_TYPE_ALLOC|FREE) = %d\n", st);
    if (st != 0) {
        return 1;
    }
    if ((cuMemAlloc_v2(&p, 1 << 20) != 0) || (p == 0)) {
        printf("FAIL: cuMemAlloc_v2 through the hook\n");
        return 1;
    }
    printf("alloc %p: events alloc %d at %p size %zu\n", (void *)p, seen.allocs,
           seen.last_alloc, seen.alloc_size);
    fail |= (seen.allocs < 1) || (seen.last_alloc != (void *)p) ||
            (seen.alloc_size != (1 << 20));

    /* a new handler asking for existing allocations: UCX's module reports
     * the device mappings from /proc/self/maps */
    st = ucm_set_event_handler(EV_ALLOC | EV_EXISTING, 0, existing_cb, NULL);
    printf("EXISTING_ALLOC handler = %d, existing allocations reported: %d\n",
           st, existing);
    fail |= (st != 0) || (existing < 1);
    ucm_unset_event_handler(EV_ALLOC, existing_cb, NULL);

    if (cuMemFree_v2(p) != 0) {
        printf("FAIL: cuMemFree_v2 through the hook\n");
        return 1;
    }
    printf("free: events free %d at %p size %zu\n", seen.frees, seen.last_free,
           seen.free_size);
    fail |= (seen.frees < 1) || (seen.last_free != (void *)p) ||
            (seen.free_size < (1 << 20));
    ucm_unset_event_handler(EV_ALLOC | EV_FREE, cb, NULL);
    printf("%s\n", fail ? "FAIL" : "PASS");
    return fail;
}
