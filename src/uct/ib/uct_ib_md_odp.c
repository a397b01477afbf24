/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * On-demand paging of the verbs md: what the device reports (explicit and
 * implicit ODP, the RC operations that may fault), and the registration of
 * an explicit ODP MR with its optional prefetch (the implicit MR:
 * uct_ib_md_odp_implicit.c).
 *
 * An ODP MR pins nothing: the kernel's MMU notifier invalidates the NIC's
 * translations when the address space changes, and the NIC faults pages in
 * on access.  So a handle stays right across munmap/mmap, mremap, madvise
 * and truncation without any memory event.
 */
#include "uct_ib_int.h"

#include <errno.h>
#include <string.h>

/* The RC operations the odp method needs (the iface's receive buffers are
 * registered without ODP, so SRQ receive is not needed). */
#define UCT_IB_ODP_RC_NEED                                                     \
    (IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE |     \
     IBV_ODP_SUPPORT_READ)

/* ibv_advise_mr takes 32-bit lengths: prefetch in slices of this size. */
#define UCT_IB_ODP_PREFETCH_SLICE (1ul << 30)
#define UCT_IB_ODP_PREFETCH_SGES  16

void uct_ib_md_odp_detect(uct_ib_md_t *md)
{
    const struct ibv_odp_caps *odp = &md->dev_attr.odp_caps;

    md->attr.odp_explicit = !!(odp->general_caps & IBV_ODP_SUPPORT);
    md->attr.odp_implicit = md->attr.odp_explicit &&
                            !!(odp->general_caps & IBV_ODP_SUPPORT_IMPLICIT);
    md->attr.odp_rc_caps =
        md->attr.odp_explicit ? odp->per_transport_caps.rc_odp_caps : 0;
    md->attr.odp_supported =
        md->attr.odp_explicit &&
        ((md->attr.odp_rc_caps & UCT_IB_ODP_RC_NEED) == UCT_IB_ODP_RC_NEED);
    md->attr.odp_known_broken = uct_ib_md_odp_known_broken(md);
    md->odp_prefetch          = md->config.odp_prefetch;
    uct_ib_diag("%s: ODP: explicit %s, RC caps 0x%x%s; implicit ODP %s",
                md->name, md->attr.odp_explicit ? "yes" : "no",
                md->attr.odp_rc_caps,
                md->attr.odp_supported ? "" : " (not enough for RC)",
                md->attr.odp_implicit
                    ? "reported (UCX_IB_ODP_IMPLICIT=try|yes: the odp method "
                      "serves every range with one implicit MR)"
                : md->attr.odp_supported
                    ? "absent on this device (the odp method registers an "
                      "explicit MR per range)"
                    : "absent on this device");
}

void uct_ib_md_odp_prefetch(uct_ib_md_t *md, struct ibv_mr *mr, void *address,
                            size_t length, int write)
{
    struct ibv_sge sge[UCT_IB_ODP_PREFETCH_SGES];
    uintptr_t p = (uintptr_t)address;
    size_t left = length;
    uint32_t n  = 0;
    int ret;

    if (!__atomic_load_n(&md->odp_prefetch, __ATOMIC_RELAXED)) {
        return;
    }
    while ((left > 0) && (n < UCT_IB_ODP_PREFETCH_SGES)) {
        sge[n].addr   = p;
        sge[n].length = (uint32_t)ucs_min(left, UCT_IB_ODP_PREFETCH_SLICE);
        sge[n].lkey   = mr->lkey;
        p += sge[n].length;
        left -= sge[n].length;
        ++n;
    }
    /* flags 0: asynchronous, the registration does not wait for faults */
    ret = ibv_advise_mr(md->pd,
                        write ? IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE
                              : IBV_ADVISE_MR_ADVICE_PREFETCH,
                        0, sge, n);
    if ((ret != 0) &&
        __atomic_exchange_n(&md->odp_prefetch, 0, __ATOMIC_RELAXED)) {
        uct_ib_diag("%s: ibv_advise_mr(prefetch) failed: %s%s; ODP pages "
                    "now fault in on first access only",
                    md->name, strerror(ret),
                    ((ret == EOPNOTSUPP) || (ret == ENOSYS))
                        ? " (the verbs provider library has no advise_mr)"
                        : "");
    }
}

int uct_ib_md_odp_known_broken(const uct_ib_md_t *md)
{
    return uct_ib_md_is_soft_roce(md);
}

/* Once per process, at the first ODP registration on a soft-RoCE device:
 * its ODP is known to corrupt data (Linux 6.16 and 6.18; the kernel
 * version alone cannot tell a fixed one). */
static void uct_ib_md_odp_rxe_warn(uct_ib_md_t *md)
{
    static int warned = 0;

    if (!uct_ib_md_odp_known_broken(md) ||
        __atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED)) {
        return;
    }
    uct_ib_warn("%s: odp method on soft-RoCE: its ODP (Linux 6.16, 6.18) "
                "ignores the offset inside a page and writes read-only pages "
                "in place (copy-on-write, the zero page); prefer "
                "UCX_IB_REG_METHODS=rcache,direct",
                md->name);
}

ucs_status_t uct_ib_md_odp_reg_mr(uct_ib_md_t *md, void *address, size_t length,
                                  int verbs_access, int silent,
                                  struct ibv_mr **mr_p)
{
    int access = verbs_access | IBV_ACCESS_ON_DEMAND;
    struct ibv_mr *mr;
    int err;

    uct_ib_md_odp_rxe_warn(md);
    mr = ibv_reg_mr(md->pd, address, length, access);
    if (mr == NULL) {
        err = errno;
        if (silent) {
            return UCS_ERR_INVALID_ADDR;
        }
        return uct_ib_md_reg_diagnose(md, address, length, access, err);
    }
    uct_ib_md_odp_prefetch(
        md, mr, address, length,
        !!(verbs_access & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)));
    *mr_p = mr;
    return UCS_OK;
}
