/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Every libucm symbol a UCX 1.13.1 component imports, resolved against our
 * libucm.  Compiled against Debian's <ucm/api/ucm.h> (no -I of our src/) and
 * linked like a UCX program; run-compat.sh runs it with our libucm first in
 * the library path and LD_BIND_NOW=1, so that a missing function or data
 * object stops the loader before main().  The internals that UCX's own
 * components take from UCX's source tree are declared here as UCX 1.13.1
 * declares them.  Then a few of them are called.
 * Exit status: 0 pass, 1 fail.
 */
#include <ucm/api/ucm.h>
#include <ucs/datastruct/list.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

/* libucs's ucm_opts.c, from UCX's internal headers */
extern const char *ucm_log_level_names[];
extern const char *ucm_mmap_hook_modes[];
typedef int (*compat_maps_cb_t)(void *arg, void *addr, size_t length, int prot,
                                const char *path);
void ucm_parse_proc_self_maps(compat_maps_cb_t cb, void *arg);

/* ucm/util/log.h, sys.h; ucm/event/event.h; ucm/util/reloc.h, replace.h;
 * ucm/bistro/bistro.h; ucm/malloc/malloc_hook.h; ptmalloc286 (as UCX 1.13.1
 * declares them; struct arguments as opaque pointers) */
void __ucm_log(const char *file, unsigned line, const char *function,
               ucs_log_level_t level, const char *message, ...);
size_t ucm_get_page_size(void);
void ucm_library_init(void);
extern ucs_list_link_t ucm_event_installer_list;
void ucm_event_enter(void);
void ucm_event_leave(void);
void ucm_event_dispatch(ucm_event_type_t event_type, ucm_event_t *event);
ucs_status_t ucm_reloc_modify(void *patch);
extern pthread_mutex_t ucm_reloc_get_orig_lock;
extern pthread_t volatile ucm_reloc_get_orig_thread;
ucs_status_t ucm_bistro_patch(void *func_ptr, void *hook, const char *symbol,
                              void **orig_func_p, void **rp);
ucs_status_t ucm_bistro_restore(void *rp);
void *ucm_bistro_restore_addr(void *rp);
void ucm_malloc_state_reset(int default_mmap_thresh, int default_trim_thresh);
int ucm_dlmallopt_get(int param_number);

/* Taking each address makes the linker record a reference to it. */
static void *const compat_refs[] = {
    /* ucm/api/ucm.h: functions */
    (void *)ucm_set_global_opts, (void *)ucm_set_event_handler,
    (void *)ucm_unset_event_handler, (void *)ucm_set_external_event,
    (void *)ucm_unset_external_event, (void *)ucm_test_events,
    (void *)ucm_test_external_events, (void *)ucm_orig_mmap,
    (void *)ucm_orig_munmap, (void *)ucm_orig_mremap, (void *)ucm_orig_shmat,
    (void *)ucm_orig_shmdt, (void *)ucm_orig_sbrk, (void *)ucm_orig_brk,
    (void *)ucm_orig_madvise, (void *)ucm_mmap, (void *)ucm_munmap,
    (void *)ucm_vm_mmap, (void *)ucm_vm_munmap, (void *)ucm_mremap,
    (void *)ucm_shmat, (void *)ucm_shmdt, (void *)ucm_sbrk, (void *)ucm_brk,
    (void *)ucm_madvise, (void *)ucm_dlopen,
    /* ucm/api/ucm.h: data (libucs reads the name arrays) */
    (void *)&ucm_global_opts, (void *)ucm_log_level_names,
    (void *)ucm_mmap_hook_modes,
    /* libucs built with trace logging */
    (void *)ucm_get_page_size, (void *)ucm_parse_proc_self_maps,
    /* UCX's modules libucm_cuda and libucm_rocm */
    (void *)__ucm_log, (void *)ucm_event_enter, (void *)ucm_event_leave,
    (void *)ucm_event_dispatch, (void *)&ucm_event_installer_list,
    (void *)ucm_reloc_modify, (void *)&ucm_reloc_get_orig_lock,
    (void *)&ucm_reloc_get_orig_thread, (void *)ucm_bistro_patch,
    /* UCX's gtest and test/mpi */
    (void *)ucm_bistro_restore, (void *)ucm_bistro_restore_addr,
    (void *)ucm_malloc_state_reset, (void *)ucm_dlmallopt_get,
    (void *)ucm_library_init};

int main(void)
{
    unsigned i, missing = 0;

    for (i = 0; i < sizeof(compat_refs) / sizeof(compat_refs[0]); ++i) {
        if (compat_refs[i] == NULL) {
            ++missing;
        }
    }
    if (dlsym(RTLD_DEFAULT, "ucm_hooks_query") == NULL) {
        printf("FAIL: the libucm loaded is not ours\n");
        return 1;
    }
    ucm_library_init();
    if ((missing != 0) || (ucm_get_page_size() != (size_t)getpagesize()) ||
        (ucm_event_installer_list.next == NULL) ||
        !pthread_equal(ucm_reloc_get_orig_thread, (pthread_t)-1)) {
        printf("FAIL: %u references unresolved, or wrong initial values\n",
               missing);
        return 1;
    }
    ucm_event_enter();
    ucm_event_leave();
    printf("PASS: %u symbols resolved against our libucm\n", i);
    return 0;
}
