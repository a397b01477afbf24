/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * uct_perftest's degraded lines (src/tools/common/tools_env.h): what the
 * environment takes from this run, one line each on stderr, before the
 * device is opened.
 */
#include "perf_ctx.h"
#include "tools_env.h"

#include <common/ucs_env.h>
#include <ucm/api/ucm.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Bytes this run registers at once: both halves of the buffer, and with -G
 * one buffer per operation in flight (at most PERF_G_WINDOW without -O). */
static size_t perf_env_pinned(const perf_params_t *params)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t half = (params->msg_size + page - 1) / page * page;
    size_t need = 2 * half;

    if (params->reg_mode != PERF_REG_ONCE) {
        need += half * ((params->outstanding != 0) ? params->outstanding
                                                   : PERF_G_WINDOW);
    }
    return need;
}

/* Why the registration cache will not be used, or NULL. */
static const char *perf_env_events(void)
{
    const char *methods = ucs_env_get("UCX_IB_REG_METHODS");

    if ((methods != NULL) && (strstr(methods, "rcache") == NULL)) {
        return NULL; /* not asked for */
    }
    if (!ucm_global_opts.enable_events) {
        return "memory events are disabled (UCX_MEM_EVENTS=no)";
    }
    if (ucm_global_opts.mmap_hook_mode == UCM_MMAP_HOOK_NONE) {
        return "no memory hooks (UCX_MEM_MMAP_HOOK_MODE=none)";
    }
    return NULL;
}

void perf_env_report(const perf_params_t *params)
{
    const tools_env_item_t items[] = {
        {TOOLS_ENV_RDMA, NULL, NULL, 0,
         "opening the device fails (load rdma_rxe or a NIC driver)"},
        {TOOLS_ENV_MEMLOCK, NULL, NULL, perf_env_pinned(params),
         "registration fails beyond it (ulimit -l)"},
        {TOOLS_ENV_GIVEN, "events", perf_env_events(), 0,
         "no registration cache: every registration is an ibv_reg_mr "
         "(-G rows measure that)"},
    };

    tools_env_report(stderr, TOOLS_ENV_PREFIX, items,
                     sizeof(items) / sizeof(items[0]));
}
