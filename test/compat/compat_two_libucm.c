/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Two libucm's in one process: stock UCX 1.13's (loaded first, with its
 * libucs, as a UCX application has it) and ours (dlopen'ed by path later),
 * both with a VM_UNMAPPED handler, in the hook mode given by
 * UCX_MEM_MMAP_HOOK_MODE.  Both must see munmap() of the test's ranges, and
 * nothing may crash.
 *
 * With "ours-first": ours in the global scope first (as LD_PRELOAD puts
 * it), then libucs (bound to ours by soname), then the stock libucm by
 * path into a local scope.  The stock library's calls to its own exported
 * internals (ucm_event_enter/leave, ucm_library_init...) then bind to ours
 * first and must be handed back to it.  Ours must see every munmap();
 * stock may refuse its handler (its self-test's calls go to our hooks),
 * and must then not crash.
 *
 *   compat_two_libucm OURS STOCK [ours-first]
 * Exit status: 0 pass, 1 fail, 77 skip.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

typedef int (*compat_set_handler_t)(int, int, void (*)(int, void *, void *),
                                    void *);

#define COMPAT_VM_UNMAPPED (1 << 17)
#define COMPAT_ROUNDS      8

static char *compat_area;
static int compat_hits[2];

static void compat_cb(int type, void *event, void *arg)
{
    void *addr = *(void **)event; /* vm_unmapped.address */
    int which  = (int)(intptr_t)arg;

    if (((char *)addr >= compat_area) &&
        ((char *)addr < compat_area + (COMPAT_ROUNDS * 4096))) {
        ++compat_hits[which];
    }
}

/* status_p: what ucm_set_event_handler returned (-1000: not called). */
static int compat_load(const char *path, int which, int global, int *status_p)
{
    compat_set_handler_t set;
    void *handle;

    handle = dlopen(path, RTLD_NOW | (global ? RTLD_GLOBAL : RTLD_LOCAL));
    if (handle == NULL) {
        printf("SKIP: %s\n", dlerror());
        return 77;
    }
    set       = (compat_set_handler_t)dlsym(handle, "ucm_set_event_handler");
    *status_p = (set != NULL) ? set(COMPAT_VM_UNMAPPED, 1000, compat_cb,
                                    (void *)(intptr_t)which)
                              : -1000;
    printf("%s: ucm_set_event_handler -> %d\n", path, *status_p);
    return 0;
}

int main(int argc, char **argv)
{
    int ours_first = (argc > 3) && !strcmp(argv[3], "ours-first");
    int i, rc, ours_status, stock_status;

    if (argc < 3) {
        printf("usage: %s OURS STOCK [ours-first]\n", argv[0]);
        return 2;
    }
    if (ours_first && (dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL) == NULL)) {
        printf("FAIL: %s\n", dlerror());
        return 1;
    }
    /* a UCX application: libucs pulls in the stock libucm (or, ours
     * first, binds to ours by soname) */
    if (dlopen("libucs.so.0", RTLD_NOW | RTLD_GLOBAL) == NULL) {
        printf("SKIP: stock libucs not installed: %s\n", dlerror());
        return 77;
    }
    if (ours_first) {
        rc = compat_load(argv[1], 1, 1, &ours_status);
        rc = rc ? rc : compat_load(argv[2], 0, 0, &stock_status);
    } else {
        rc = compat_load(argv[2], 0, 1, &stock_status);
        rc = rc ? rc : compat_load(argv[1], 1, 0, &ours_status);
    }
    if (rc != 0) {
        return rc;
    }
    if ((ours_status != 0) ||
        ((stock_status != 0) && (!ours_first || (stock_status != -22)))) {
        printf("FAIL: ucm_set_event_handler failed\n");
        return 1;
    }
    compat_area = mmap(NULL, COMPAT_ROUNDS * 4096, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    for (i = 0; i < COMPAT_ROUNDS; ++i) {
        munmap(compat_area + (i * 4096), 4096);
    }
    printf("VM_UNMAPPED seen: stock %d, ours %d (of %d)\n", compat_hits[0],
           compat_hits[1], COMPAT_ROUNDS);
    if ((compat_hits[1] < COMPAT_ROUNDS) ||
        ((stock_status == 0) && (compat_hits[0] < COMPAT_ROUNDS))) {
        printf("FAIL: an event was lost\n");
        return 1;
    }
    printf("PASS\n");
    return 0;
}
