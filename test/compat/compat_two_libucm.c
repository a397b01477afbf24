/*
 * Two libucm's in one process: stock UCX 1.13's (loaded first, with its
 * libucs, as a UCX application has it) and ours (dlopen'ed by path later),
 * both with a VM_UNMAPPED handler, in the hook mode given by
 * UCX_MEM_MMAP_HOOK_MODE.  Both must see munmap() of the test's ranges, and
 * nothing may crash.
 *
 *   compat_two_libucm OURS_LIBUCM STOCK_LIBUCM
 * Exit status: 0 pass, 1 fail, 77 skip.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
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

static int compat_load(const char *path, int which, int global)
{
    compat_set_handler_t set;
    void *handle;
    int status;

    handle = dlopen(path, RTLD_NOW | (global ? RTLD_GLOBAL : RTLD_LOCAL));
    if (handle == NULL) {
        printf("SKIP: %s\n", dlerror());
        return 77;
    }
    set    = (compat_set_handler_t)dlsym(handle, "ucm_set_event_handler");
    status = (set != NULL) ? set(COMPAT_VM_UNMAPPED, 1000, compat_cb,
                                 (void *)(intptr_t)which)
                           : -1;
    printf("%s: ucm_set_event_handler -> %d\n", path, status);
    return (status == 0) ? 0 : 1;
}

int main(int argc, char **argv)
{
    int i, rc;

    if (argc < 3) {
        printf("usage: %s OURS STOCK\n", argv[0]);
        return 2;
    }
    /* a UCX application: libucs pulls in the stock libucm */
    if (dlopen("libucs.so.0", RTLD_NOW | RTLD_GLOBAL) == NULL) {
        printf("SKIP: stock libucs not installed: %s\n", dlerror());
        return 77;
    }
    if (((rc = compat_load(argv[2], 0, 1)) != 0) ||
        ((rc = compat_load(argv[1], 1, 0)) != 0)) {
        return rc;
    }
    compat_area = mmap(NULL, COMPAT_ROUNDS * 4096, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    for (i = 0; i < COMPAT_ROUNDS; ++i) {
        munmap(compat_area + (i * 4096), 4096);
    }
    printf("VM_UNMAPPED seen: stock %d, ours %d (of %d)\n", compat_hits[0],
           compat_hits[1], COMPAT_ROUNDS);
    if ((compat_hits[0] < COMPAT_ROUNDS) || (compat_hits[1] < COMPAT_ROUNDS)) {
        printf("FAIL: an event was lost\n");
        return 1;
    }
    printf("PASS\n");
    return 0;
}
