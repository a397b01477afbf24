/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX_IB_FORK_INIT: ibv_fork_init() before the first verbs call of the md,
 * skipped when the kernel copies pinned pages on fork (IBV_FORK_UNNEEDED).
 * Never forces anything on another verbs user of the process: if fork
 * support can no longer be enabled (devices already opened by someone else),
 * "try" just says so and "yes" fails this md only.
 */
#include "uct_ib_int.h"

#include <string.h>

static uct_ib_fork_state_t uct_ib_fork_state_get(void)
{
    switch (ibv_is_fork_initialized()) {
    case IBV_FORK_UNNEEDED: return UCT_IB_FORK_UNNEEDED;
    case IBV_FORK_ENABLED: return UCT_IB_FORK_ENABLED;
    default: return UCT_IB_FORK_DISABLED;
    }
}

ucs_status_t uct_ib_md_fork_init(const uct_ib_md_config_t *config,
                                 uct_ib_fork_state_t *state_p)
{
    uct_ib_fork_state_t state = uct_ib_fork_state_get();
    int ret;

    if ((state != UCT_IB_FORK_DISABLED) ||
        (config->fork_init == UCT_IB_FORK_INIT_NO)) {
        uct_ib_debug("fork support: %s",
                     (state == UCT_IB_FORK_UNNEEDED)
                         ? "unneeded (kernel "
                           "copies pinned pages on fork)"
                     : (state == UCT_IB_FORK_ENABLED)
                         ? "enabled"
                         : "disabled (UCX_IB_FORK_INIT=no)");
        *state_p = state;
        return UCS_OK;
    }

    ret = ibv_fork_init();
    if (ret == 0) {
        *state_p = uct_ib_fork_state_get();
        return UCS_OK;
    }
    if (config->fork_init == UCT_IB_FORK_INIT_YES) {
        uct_ib_error("UCX_IB_FORK_INIT=yes: ibv_fork_init() failed: %s (verbs "
                     "was already in use in this process; set "
                     "RDMAV_FORK_SAFE=1 in the environment or use "
                     "UCX_IB_FORK_INIT=try)",
                     strerror(ret));
        return UCS_ERR_INVALID_PARAM;
    }
    uct_ib_diag("ibv_fork_init() failed: %s; continuing without fork support "
                "(a child process must not touch registered pages)",
                strerror(ret));
    *state_p = UCT_IB_FORK_DISABLED;
    return UCS_OK;
}
