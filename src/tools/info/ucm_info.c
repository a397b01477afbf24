/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ucm_info: what the memory hooks of this process would do, and whether they
 * work.  Like ucx_info, for the UCX_MEM_* part.
 *
 *   ucm_info -c   effective UCX_MEM_* configuration
 *   ucm_info -e   install the hooks, self-test every event, show per-hook
 *                 mode; then one line per thing the environment degrades
 *                 (locked-memory limit, hidden page frame numbers, no
 *                 userfaultfd monitor)
 *   ucm_info -a   both (default)
 *   ucm_info -r   registration cache: effective UCX_RCACHE_* values, then a
 *                 demo cache (no-op registration) taken through a miss, a
 *                 hit, a merge and an munmap, its counters checked and
 *                 printed with ucs_rcache_print_stats()
 *   ucm_info -v   version, the libraries in use and the build configuration
 * Exit status: 0 if every enabled event works (and, with -r, the cache
 * counted what it did), 1 if not, 2 on usage.
 */
#include "config.h"
#include "tools_env.h"

#include <ucm/api/ucm.h>
#include <ucm/api/ucm_ext.h>
#include <ucs/memory/rcache_ext.h>
#include <ucs/type/status.h>

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static const struct {
    int event;
    const char *name;
} ucm_info_events[] = {
    {UCM_EVENT_MMAP, "MMAP"},           {UCM_EVENT_MUNMAP, "MUNMAP"},
    {UCM_EVENT_MREMAP, "MREMAP"},       {UCM_EVENT_SHMAT, "SHMAT"},
    {UCM_EVENT_SHMDT, "SHMDT"},         {UCM_EVENT_SBRK, "SBRK"},
    {UCM_EVENT_MADVISE, "MADVISE"},     {UCM_EVENT_BRK, "BRK"},
    {UCM_EVENT_VM_MAPPED, "VM_MAPPED"}, {UCM_EVENT_VM_UNMAPPED, "VM_UNMAPPED"},
};

static const char *ucm_info_state_names[] = {"-", "reloc", "bistro", "FAILED"};

static void ucm_info_print_config(void)
{
    const char *name, *doc;
    char value[128];
    unsigned i;

    printf("#\n# Memory hooks configuration (UCX_MEM_*)\n#\n");
    for (i = 0; ucm_config_get(i, &name, value, sizeof(value), &doc) == 0;
         ++i) {
        printf("# %s\nUCX_%s=%s\n", doc, name, value);
    }
}

static int ucm_info_self_test(void)
{
    ucm_hook_info_t hooks[32];
    ucs_status_t status;
    unsigned i, count;
    int failed = 0, all = 0, result = 0;

    printf("#\n# Memory events self-test\n#\n");
    if (!ucm_global_opts.enable_events) {
        printf("# memory events are disabled (UCX_MEM_EVENTS=n)\n");
        return 0;
    }
    status = ucm_hooks_install();
    if (status != UCS_OK) {
        printf("# hooks could not be installed in '%s' mode: %s\n",
               ucm_mmap_hook_modes[ucm_global_opts.mmap_hook_mode],
               ucs_status_string(status));
        return 1;
    }
    printf("# hook mode: %s (installed in %.1f usec)\n",
           ucm_mmap_hook_modes[ucm_hooks_installed_mode()],
           ucm_hooks_install_time_usec());
    count = ucm_hooks_query(hooks, 32);
    for (i = 0; i < count && i < 32; ++i) {
        printf("#   %-11s %-7s %s\n", hooks[i].symbol,
               ucm_info_state_names[hooks[i].state], hooks[i].detail);
    }
    for (i = 0; i < sizeof(ucm_info_events) / sizeof(ucm_info_events[0]); ++i) {
        all |= ucm_info_events[i].event;
    }
    ucm_test_events_detail(all, &failed);
    for (i = 0; i < sizeof(ucm_info_events) / sizeof(ucm_info_events[0]); ++i) {
        int ok = !(failed & ucm_info_events[i].event);
        printf("  %-12s %s\n", ucm_info_events[i].name, ok ? "ok" : "FAILED");
        if (!ok) {
            result = 1;
        }
    }
    return result;
}

static ucs_status_t ucm_info_rcache_reg(void *context, ucs_rcache_t *rcache,
                                        void *arg, ucs_rcache_region_t *region,
                                        uint16_t flags)
{
    return UCS_OK;
}

static void ucm_info_rcache_dereg(void *context, ucs_rcache_t *rcache,
                                  ucs_rcache_region_t *region)
{
}

/* one line per failed expectation; returns 1 if any failed */
static int ucm_info_rcache_expect(const char *what, uint64_t value,
                                  uint64_t expected)
{
    if (value == expected) {
        return 0;
    }
    printf("# rcache demo: %s is %lu, expected %lu\n", what,
           (unsigned long)value, (unsigned long)expected);
    return 1;
}

static int ucm_info_rcache(void)
{
    static const ucs_rcache_ops_t ops = {ucm_info_rcache_reg,
                                         ucm_info_rcache_dereg, NULL};
    size_t page                       = (size_t)sysconf(_SC_PAGESIZE);
    ucs_rcache_params_t params;
    ucs_rcache_region_t *region;
    ucs_rcache_stats_t stats;
    ucs_rcache_t *rcache;
    int bad = 0;
    char *buf;

    printf("#\n# Registration cache configuration (UCX_RCACHE_*)\n#\n");
    if (ucs_rcache_print_config(stdout) != UCS_OK) {
        return 1;
    }
    memset(&params, 0, sizeof(params));
    params.region_struct_size = sizeof(ucs_rcache_region_t);
    params.alignment          = page;
    params.max_alignment      = page;
    params.ucm_events         = UCM_EVENT_VM_UNMAPPED;
    params.ucm_event_priority = 1000;
    params.ops                = &ops;
    if (ucs_rcache_create(&params, "ucm_info-demo", NULL, &rcache) != UCS_OK) {
        return 1;
    }
    buf = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) {
        perror("mmap");
        ucs_rcache_destroy(rcache);
        return 1;
    }
    /* miss, hit, then a request touching it: one merged registration */
    if ((ucs_rcache_get(rcache, buf, page, PROT_READ, NULL, &region) !=
         UCS_OK) ||
        (ucs_rcache_region_put(rcache, region), 0) ||
        (ucs_rcache_get(rcache, buf + 8, 64, PROT_READ, NULL, &region) !=
         UCS_OK) ||
        (ucs_rcache_region_put(rcache, region), 0) ||
        (ucs_rcache_get(rcache, buf + page, page, PROT_READ, NULL, &region) !=
         UCS_OK)) {
        printf("# rcache demo: ucs_rcache_get failed\n");
        bad = 1;
    } else {
        ucs_rcache_region_put(rcache, region);
    }
    munmap(buf, 4 * page); /* the unmap event invalidates the region */
    if (ucs_rcache_query_stats(rcache, &stats) != UCS_OK) {
        bad = 1;
    } else {
        bad |= ucm_info_rcache_expect("gets", stats.gets, 3);
        bad |= ucm_info_rcache_expect("fast hits", stats.hits_fast, 1);
        bad |= ucm_info_rcache_expect("merges", stats.merges, 1);
        bad |= ucm_info_rcache_expect("regs", stats.regs, 2);
        bad |= ucm_info_rcache_expect("unmap invalidations",
                                      stats.unmap_invalidations, 1);
        bad |= ucm_info_rcache_expect("regions", stats.regions, 0);
    }
    printf("#\n# Registration cache demo (%s)\n#\n", bad ? "FAILED" : "ok");
    ucs_rcache_print_stats(rcache, stdout);
    ucs_rcache_destroy(rcache);
    return bad;
}

/* One line per thing the environment degrades (information only: the
 * exit status does not change); uffd_reason is NULL when the monitor runs. */
static void ucm_info_degraded(const char *uffd_reason)
{
    const tools_env_item_t items[] = {
        {TOOLS_ENV_MEMLOCK, NULL, NULL, 0,
         "no more is registered at once, the cache evicts unused regions "
         "beyond it (ulimit -l)"},
        {TOOLS_ENV_PAGEMAP, NULL, NULL, 0,
         "UCX_RCACHE_CHECK_PFN checks nothing"},
        {TOOLS_ENV_GIVEN, "userfaultfd", uffd_reason, 0,
         "unmaps by raw system calls, the loader and static code reach no "
         "registration cache"},
    };

    printf("#\n# Degraded by this environment\n");
    if (tools_env_report(stdout, "#   ", items,
                         sizeof(items) / sizeof(items[0])) == 0) {
        printf("#   nothing\n");
    }
}

/* What libucm turned on by default but cannot do here: each was one WARN
 * line (ucm_degraded_query). */
static void ucm_info_degraded_libucm(void)
{
    ucm_degraded_info_t infos[8];
    unsigned i, count = ucm_degraded_query(infos, 8);

    printf("#\n# Degraded%s\n", (count == 0) ? ": none" : "");
    for (i = 0; (i < count) && (i < 8); ++i) {
        printf("#   %-11s %s\n", infos[i].mechanism, infos[i].what);
    }
}

/* Start the userfaultfd monitor as a registration cache would, and say
 * whether it runs and why not. */
static int ucm_info_uffd(void)
{
    static const char *modes[] = {"no", "try", "yes"};
    ucm_uffd_info_t info;
    ucs_status_t status;
    int active = 0;

    status = ucm_uffd_start(&active);
    ucm_uffd_query(&info);
    printf("#\n# userfaultfd monitor (UCX_MEM_UFFD=%s): %s\n#   %s\n",
           modes[info.mode], active ? "active" : "not active", info.reason);
    if (active) {
        printf("#   VMA budget: %lu of vm.max_map_count=%lu "
               "(UCX_MEM_UFFD_VMA_SHARE), in use: %lu, refused: %lu\n",
               info.vma_budget, info.max_map_count, info.vma_use,
               info.over_budget);
    }
    ucm_info_degraded(active ? NULL : info.reason);
    ucm_info_degraded_libucm();
    return (status == UCS_OK) ? 0 : 1;
}

/* The file a symbol was loaded from: which libucm and libucs run. */
static const char *ucm_info_lib_path(void *symbol)
{
    Dl_info info;

    if ((dladdr(symbol, &info) == 0) || (info.dli_fname == NULL)) {
        return "?";
    }
    return info.dli_fname;
}

static void ucm_info_print_version(void)
{
    printf("# %s version %s (libucm: UCX 1.13 API and ABI)\n", PACKAGE_NAME,
           PACKAGE_VERSION);
    printf("# libucm: %s\n", ucm_info_lib_path((void *)ucm_set_event_handler));
    printf("# libucs: %s\n", ucm_info_lib_path((void *)ucs_status_string));
    printf("# built with: %s\n", UCM_BUILD_FEATURES);
    printf("# configured with: %s\n", (UCM_BUILD_CONFIGURE_ARGS[0] != '\0')
                                          ? UCM_BUILD_CONFIGURE_ARGS
                                          : "(no arguments)");
}

static void ucm_info_usage(const char *argv0)
{
    fprintf(stderr,
            "Usage: %s [-c] [-e] [-a] [-r] [-v] [-h]\n"
            "  -c  print the effective UCX_MEM_* configuration\n"
            "  -e  install the hooks and self-test every memory event\n"
            "  -a  both (default)\n"
            "  -r  print the UCX_RCACHE_* configuration, run a demo "
            "registration\n"
            "      cache and print its statistics\n"
            "  -v  print the version, the libraries in use and the build "
            "configuration\n"
            "Exit status: 0 all checks passed, 1 a check failed, 2 usage "
            "error\n",
            argv0);
}

int main(int argc, char **argv)
{
    int print_config = 0, self_test = 0, rcache = 0, c, ret = 0;

    while ((c = getopt(argc, argv, "ceahrv")) != -1) {
        switch (c) {
        case 'r': rcache = 1; break;
        case 'c': print_config = 1; break;
        case 'e': self_test = 1; break;
        case 'a': print_config = self_test = 1; break;
        case 'v': ucm_info_print_version(); return 0;
        case 'h': ucm_info_usage(argv[0]); return 0;
        default: ucm_info_usage(argv[0]); return 2;
        }
    }
    if (!print_config && !self_test && !rcache) {
        print_config = self_test = 1;
    }
    if (print_config) {
        ucm_info_print_config();
    }
    if (self_test) {
        ret = ucm_info_self_test();
        ret |= ucm_info_uffd();
    }
    if (rcache) {
        ret |= ucm_info_rcache();
    }
    return ret;
}
