/*
 * ucm_info: what the memory hooks of this process would do, and whether they
 * work.  Like ucx_info, for the UCX_MEM_* part.
 *
 *   ucm_info -c   effective UCX_MEM_* configuration
 *   ucm_info -e   install the hooks, self-test every event, show per-hook mode
 *   ucm_info -a   both (default)
 * Exit status: 0 if every enabled event works, 1 if one does not, 2 on usage.
 */
#include <ucm/api/ucm.h>
#include <ucm/api/ucm_ext.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const struct {
    int        event;
    const char *name;
} ucm_info_events[] = {
    {UCM_EVENT_MMAP, "MMAP"},         {UCM_EVENT_MUNMAP, "MUNMAP"},
    {UCM_EVENT_MREMAP, "MREMAP"},     {UCM_EVENT_SHMAT, "SHMAT"},
    {UCM_EVENT_SHMDT, "SHMDT"},       {UCM_EVENT_SBRK, "SBRK"},
    {UCM_EVENT_MADVISE, "MADVISE"},   {UCM_EVENT_BRK, "BRK"},
    {UCM_EVENT_VM_MAPPED, "VM_MAPPED"}, {UCM_EVENT_VM_UNMAPPED, "VM_UNMAPPED"},
};

static const char *ucm_info_state_names[] = {"-", "reloc", "bistro", "FAILED"};

static void ucm_info_print_config(void)
{
    const char *name, *doc;
    char value[128];
    unsigned i;

    printf("#\n# Memory hooks configuration (UCX_MEM_*)\n#\n");
    for (i = 0; ucm_config_get(i, &name, value, sizeof(value), &doc) == 0; ++i) {
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
        printf("#   %-8s %-7s %s\n", hooks[i].symbol,
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

static void ucm_info_usage(const char *argv0)
{
    fprintf(stderr,
            "Usage: %s [-c] [-e] [-a] [-h]\n"
            "  -c  print the effective UCX_MEM_* configuration\n"
            "  -e  install the hooks and self-test every memory event\n"
            "  -a  both (default)\n",
            argv0);
}

int main(int argc, char **argv)
{
    int print_config = 0, self_test = 0, c, ret = 0;

    while ((c = getopt(argc, argv, "ceah")) != -1) {
        switch (c) {
        case 'c': print_config = 1; break;
        case 'e': self_test = 1; break;
        case 'a': print_config = self_test = 1; break;
        case 'h': ucm_info_usage(argv[0]); return 0;
        default:  ucm_info_usage(argv[0]); return 2;
        }
    }
    if (!print_config && !self_test) {
        print_config = self_test = 1;
    }
    if (print_config) {
        ucm_info_print_config();
    }
    if (self_test) {
        ret = ucm_info_self_test();
    }
    return ret;
}
