/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The monitor's VMA budget: see ucm_uffd_budget.h.  Measurements and the
 * reasoning behind the default share: docs/internals-uffd.md.
 */
#include "ucm_uffd_budget.h"

#include <ucm/util/ucm_log.h>
#include <ucm/util/ucm_sys.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>

#define UCM_UFFD_BUDGET_DEFAULT_MAX   65530UL /* the kernel's default */
#define UCM_UFFD_BUDGET_DEFAULT_SHARE 0.125

static unsigned long ucm_uffd_budget_max_maps; /* 0: not read yet */
static unsigned long ucm_uffd_budget_limit;    /* VMAs */
static char ucm_uffd_budget_share_str[32];     /* the log has no %g */
static unsigned long ucm_uffd_budget_refusals;
static int ucm_uffd_budget_warned;

/* vm.max_map_count, or the kernel's default if it cannot be read. */
static unsigned long ucm_uffd_budget_read_max(void)
{
    char buf[32];
    unsigned long value;
    char *end;
    long fd, len;

    fd = ucm_sys_open("/proc/sys/vm/max_map_count", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        ucm_diag("userfaultfd: cannot read vm.max_map_count; assuming %lu",
                 UCM_UFFD_BUDGET_DEFAULT_MAX);
        return UCM_UFFD_BUDGET_DEFAULT_MAX;
    }
    len = ucm_sys_read((int)fd, buf, sizeof(buf) - 1);
    ucm_sys_close((int)fd);
    if (len <= 0) {
        return UCM_UFFD_BUDGET_DEFAULT_MAX;
    }
    buf[len] = '\0';
    value    = strtoul(buf, &end, 10);
    if ((end == buf) || (value == 0)) {
        return UCM_UFFD_BUDGET_DEFAULT_MAX;
    }
    return value;
}

double ucm_uffd_budget_init(double share)
{
    if (ucm_uffd_budget_max_maps == 0) {
        ucm_uffd_budget_max_maps = ucm_uffd_budget_read_max();
    }
    if (!((share > 0) && (share <= 1))) {
        snprintf(ucm_uffd_budget_share_str, sizeof(ucm_uffd_budget_share_str),
                 "%g", share);
        ucm_error("UCX_MEM_UFFD_VMA_SHARE: invalid value '%s' (accepted: a "
                  "fraction in (0, 1]); keeping the default",
                  ucm_uffd_budget_share_str);
        share = UCM_UFFD_BUDGET_DEFAULT_SHARE;
    }
    snprintf(ucm_uffd_budget_share_str, sizeof(ucm_uffd_budget_share_str), "%g",
             share);
    ucm_uffd_budget_limit =
        (unsigned long)(share * (double)ucm_uffd_budget_max_maps);
    return share;
}

int ucm_uffd_budget_admit(unsigned long spans)
{
    if (ucm_uffd_budget_use(spans) <= ucm_uffd_budget_limit) {
        return 1;
    }
    ++ucm_uffd_budget_refusals;
    if (!ucm_uffd_budget_warned) {
        ucm_uffd_budget_warned = 1;
        ucm_warn("userfaultfd: VMA budget reached (%lu of vm.max_map_count="
                 "%lu, UCX_MEM_UFFD_VMA_SHARE=%s): further registration-cache "
                 "regions are not subscribed, so their unmaps by raw system "
                 "calls, the loader or static code are not caught (hooks "
                 "only)",
                 ucm_uffd_budget_limit, ucm_uffd_budget_max_maps,
                 ucm_uffd_budget_share_str);
    }
    return 0;
}

unsigned long ucm_uffd_budget_vmas(void)
{
    return ucm_uffd_budget_limit;
}

unsigned long ucm_uffd_budget_use(unsigned long spans)
{
    return spans * UCM_UFFD_BUDGET_VMAS_PER_SPAN;
}

unsigned long ucm_uffd_budget_max_map_count(void)
{
    return ucm_uffd_budget_max_maps;
}

unsigned long ucm_uffd_budget_refused(void)
{
    return ucm_uffd_budget_refusals;
}
