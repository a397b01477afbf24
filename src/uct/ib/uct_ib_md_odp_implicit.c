/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Implicit ODP for the odp method: one MR over the whole address space
 * (rdma-core's form: ibv_reg_mr(pd, NULL, SIZE_MAX, ... ON_DEMAND)),
 * registered at the md's first odp registration (only when
 * UCX_IB_ODP_IMPLICIT asks for it: it opens all memory to a peer holding
 * any of its keys, so its activation is a warning).  Every later
 * registration is a small memh carrying that MR's keys: no verbs call per
 * range, except the optional prefetch.  Where the attempt fails, the md
 * says so once and its odp method keeps registering explicit MRs.
 */
#include "uct_ib_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Every right an odp memh may be handed (the memh keeps what was asked). */
#define UCT_IB_ODP_IMPLICIT_ACCESS                                             \
    (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |                        \
     IBV_ACCESS_REMOTE_READ | IBV_ACCESS_ON_DEMAND)

void uct_ib_md_odp_implicit_init(uct_ib_md_t *md)
{
    int want;

    pthread_mutex_init(&md->odp_implicit_lock, NULL);
    md->odp_implicit_mr = NULL;
    switch (md->config.odp_implicit) {
    case UCT_IB_ODP_IMPLICIT_CFG_YES: want = 1; break;
    case UCT_IB_ODP_IMPLICIT_CFG_TRY: want = md->attr.odp_implicit; break;
    default: want = 0; break;
    }
    if (md->attr.reg_method != UCT_IB_REG_METHOD_ODP) {
        want = 0;
    }
    md->odp_implicit_state =
        want ? UCT_IB_ODP_IMPLICIT_UNTRIED : UCT_IB_ODP_IMPLICIT_OFF;
}

/* Under the lock: register the implicit MR, or record (and say) why not. */
static void uct_ib_md_odp_implicit_try(uct_ib_md_t *md)
{
    struct ibv_mr *mr;
    int err;

    mr = ibv_reg_mr(md->pd, NULL, SIZE_MAX, UCT_IB_ODP_IMPLICIT_ACCESS);
    if (mr != NULL) {
        md->odp_implicit_mr = mr;
        /* opt-in, and it weakens isolation: say so where it is seen */
        uct_ib_warn("%s: implicit ODP active (UCX_IB_ODP_IMPLICIT=%s): one MR "
                    "(rkey 0x%x) covers the whole address space with remote "
                    "read and write, and every memory handle carries its "
                    "rkey: a peer given any key can read and write all "
                    "memory of this process",
                    md->name,
                    (md->config.odp_implicit == UCT_IB_ODP_IMPLICIT_CFG_YES)
                        ? "yes"
                        : "try",
                    mr->rkey);
        __atomic_store_n(&md->odp_implicit_state, UCT_IB_ODP_IMPLICIT_ACTIVE,
                         __ATOMIC_RELEASE);
        return;
    }
    err = errno;
    uct_ib_warn("%s: implicit ODP MR (ibv_reg_mr of the whole address space) "
                "failed: %s (errno %d)%s; the odp method registers an "
                "explicit ODP MR per range instead",
                md->name, strerror(err), err,
                md->attr.odp_implicit
                    ? ""
                    : " [the device does not report implicit ODP; "
                      "UCX_IB_ODP_IMPLICIT=yes forced the attempt]");
    __atomic_store_n(&md->odp_implicit_state, UCT_IB_ODP_IMPLICIT_FAILED,
                     __ATOMIC_RELEASE);
}

ucs_status_t uct_ib_md_odp_implicit_reg(uct_ib_md_t *md, void *address,
                                        size_t length, unsigned access,
                                        uct_ib_mem_t **memh_p)
{
    int state = __atomic_load_n(&md->odp_implicit_state, __ATOMIC_ACQUIRE);
    uct_ib_mem_t *memh;

    if (state == UCT_IB_ODP_IMPLICIT_UNTRIED) {
        pthread_mutex_lock(&md->odp_implicit_lock);
        if (md->odp_implicit_state == UCT_IB_ODP_IMPLICIT_UNTRIED) {
            uct_ib_md_odp_implicit_try(md);
        }
        state = md->odp_implicit_state;
        pthread_mutex_unlock(&md->odp_implicit_lock);
    }
    if (state != UCT_IB_ODP_IMPLICIT_ACTIVE) {
        return UCS_ERR_UNSUPPORTED;
    }

    memh = malloc(sizeof(*memh));
    if (memh == NULL) {
        uct_ib_error("%s: no memory for a memory handle", md->name);
        return UCS_ERR_NO_MEMORY;
    }
    uct_ib_memh_init(memh, md->odp_implicit_mr, address, length,
                     UCT_IB_REG_METHOD_ODP, access, 1);
    uct_ib_md_odp_prefetch(md, memh->mr, address, length,
                           !!(access & (UCT_IB_MEM_ACCESS_LOCAL_WRITE |
                                        UCT_IB_MEM_ACCESS_REMOTE_WRITE)));
    *memh_p = memh;
    return UCS_OK;
}

void uct_ib_md_odp_implicit_cleanup(uct_ib_md_t *md)
{
    int ret;

    if (md->odp_implicit_mr != NULL) {
        ret = ibv_dereg_mr(md->odp_implicit_mr);
        if (ret != 0) {
            uct_ib_error("%s: ibv_dereg_mr(implicit ODP MR) failed: %s",
                         md->name, strerror(ret));
        }
        md->odp_implicit_mr = NULL;
    }
    md->odp_implicit_state = UCT_IB_ODP_IMPLICIT_OFF;
    pthread_mutex_destroy(&md->odp_implicit_lock);
}
