/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The page of hot state; see ucm_hot.h.
 */
#include "ucm_hot.h"

#include <ucm/event/ucm_event.h>

ucm_hot_t ucm_hot __attribute__((aligned(4096))) = {
    /* starts with the empty list in buffer 0 (zero handlers) */
    .event_list    = (ucm_event_list_t *)&ucm_hot.list_buf[0],
    .rcu_gp_ctr    = 1, /* phase 0, nesting 1 */
    .rcu_use_fence = 1  /* until membarrier is known to work */
};

_Static_assert(sizeof(ucm_hot_t) <= 4096, "ucm_hot must fit in one page");
