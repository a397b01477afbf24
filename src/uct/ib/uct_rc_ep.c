/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * RC endpoint: QP creation, address blob, connection (INIT -> RTR -> RTS),
 * completion of sends, flush, error state and destruction.
 */
#include "uct_ib_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define UCT_RC_ADDR_MAGIC   0x5243u /* "RC" */
#define UCT_RC_ADDR_VERSION 1

/* Address blob layout (UCT_RC_EP_ADDR_SIZE bytes, little endian):
 * 0 magic u16 | 2 version u8 | 3 path MTU (enum ibv_mtu) u8 | 4 QP number
 * u32 | 8 LID u16 | 10 is_roce u8 | 11 zero | 12 GID [16] | 28 zero u32 */
typedef struct {
    unsigned mtu;
    uint32_t qpn;
    uint16_t lid;
    int is_roce;
    union ibv_gid gid;
} uct_rc_ep_addr_t;

static void uct_rc_put_le(uint8_t *p, uint64_t v, unsigned bytes)
{
    unsigned i;

    for (i = 0; i < bytes; ++i) {
        p[i] = v >> (8 * i);
    }
}

static uint64_t uct_rc_get_le(const uint8_t *p, unsigned bytes)
{
    uint64_t v = 0;
    unsigned i;

    for (i = 0; i < bytes; ++i) {
        v |= (uint64_t)p[i] << (8 * i);
    }
    return v;
}

ucs_status_t uct_rc_ep_create(uct_rc_iface_t *iface, uct_rc_ep_t **ep_p)
{
    struct ibv_qp_init_attr init;
    struct ibv_qp_attr attr;
    uct_rc_ep_t *ep;
    int ret;

    if ((iface == NULL) || (ep_p == NULL)) {
        uct_ib_error("uct_rc_ep_create: NULL %s",
                     (iface == NULL) ? "iface" : "ep_p");
        return UCS_ERR_INVALID_PARAM;
    }
    ep = calloc(1, sizeof(*ep));
    if (ep == NULL) {
        uct_ib_error("%s: no memory for an RC endpoint", iface->md->name);
        return UCS_ERR_NO_MEMORY;
    }
    memset(&init, 0, sizeof(init));
    init.send_cq             = iface->cq;
    init.recv_cq             = iface->cq;
    init.srq                 = iface->srq;
    init.qp_type             = IBV_QPT_RC;
    init.cap.max_send_wr     = iface->config.tx_queue_len;
    init.cap.max_send_sge    = iface->max_iov;
    init.sq_sig_all          = 0;
    init.cap.max_inline_data = iface->config.max_inline;
    ep->qp                   = ibv_create_qp(iface->md->pd, &init);
    if ((ep->qp == NULL) && (init.cap.max_inline_data != 0)) {
        uct_ib_diag("%s: no RC QP with %u inline bytes (%s): trying none",
                    iface->md->name, iface->config.max_inline, strerror(errno));
        init.cap.max_inline_data = 0;
        ep->qp                   = ibv_create_qp(iface->md->pd, &init);
    }
    if (ep->qp == NULL) {
        uct_ib_error("%s: ibv_create_qp(RC, %u send WRs, %zu SGEs) failed: "
                     "%s",
                     iface->md->name, iface->config.tx_queue_len,
                     iface->max_iov, strerror(errno));
        free(ep);
        return UCS_ERR_IO_ERROR;
    }

    memset(&attr, 0, sizeof(attr));
    attr.qp_state        = IBV_QPS_INIT;
    attr.pkey_index      = 0;
    attr.port_num        = iface->md->attr.port_num;
    attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                           IBV_ACCESS_REMOTE_READ;
    ret = ibv_modify_qp(ep->qp, &attr,
                        IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                            IBV_QP_ACCESS_FLAGS);
    if (ret != 0) {
        uct_ib_error("%s: QP 0x%x to INIT failed: %s", iface->md->name,
                     ep->qp->qp_num, strerror(ret));
        ibv_destroy_qp(ep->qp);
        free(ep);
        return UCS_ERR_IO_ERROR;
    }
    ep->iface      = iface;
    ep->status     = UCS_OK;
    ep->tx_avail   = iface->config.tx_queue_len;
    ep->tx_head    = UINT32_MAX;
    ep->tx_tail    = UINT32_MAX;
    ep->max_inline = init.cap.max_inline_data; /* what the QP granted */
    ucs_list_head_init(&ep->flush_reqs);
    ++iface->num_eps;
    *ep_p = ep;
    return UCS_OK;
}

ucs_status_t uct_rc_ep_get_address(const uct_rc_ep_t *ep, void *addr)
{
    const uct_ib_md_t *md;
    uint8_t *p = addr;

    if ((ep == NULL) || (addr == NULL)) {
        uct_ib_error("uct_rc_ep_get_address: NULL %s",
                     (ep == NULL) ? "ep" : "addr");
        return UCS_ERR_INVALID_PARAM;
    }
    md = ep->iface->md;
    memset(p, 0, UCT_RC_EP_ADDR_SIZE);
    uct_rc_put_le(p, UCT_RC_ADDR_MAGIC, 2);
    p[2] = UCT_RC_ADDR_VERSION;
    p[3] = md->port_attr.active_mtu;
    uct_rc_put_le(p + 4, ep->qp->qp_num, 4);
    uct_rc_put_le(p + 8, md->attr.lid, 2);
    p[10] = md->attr.is_roce;
    memcpy(p + 12, md->attr.gid, 16);
    return UCS_OK;
}

static ucs_status_t uct_rc_ep_addr_unpack(const void *buf,
                                          uct_rc_ep_addr_t *addr)
{
    const uint8_t *p = buf;

    if ((uct_rc_get_le(p, 2) != UCT_RC_ADDR_MAGIC) ||
        (p[2] != UCT_RC_ADDR_VERSION) || (p[3] < IBV_MTU_256) ||
        (p[3] > IBV_MTU_4096) || (p[10] > 1)) {
        uct_ib_error("uct_rc_ep_connect_to_ep: not an RC endpoint address "
                     "(magic 0x%04x version %u)",
                     (unsigned)uct_rc_get_le(p, 2), p[2]);
        return UCS_ERR_INVALID_PARAM;
    }
    addr->mtu     = p[3];
    addr->qpn     = uct_rc_get_le(p + 4, 4);
    addr->lid     = uct_rc_get_le(p + 8, 2);
    addr->is_roce = p[10];
    memcpy(addr->gid.raw, p + 12, 16);
    return UCS_OK;
}

ucs_status_t uct_rc_ep_connect_to_ep(uct_rc_ep_t *ep, const void *remote_addr)
{
    struct ibv_qp_attr attr;
    uct_rc_ep_addr_t addr;
    const uct_ib_md_t *md;
    uct_rc_iface_t *iface;
    ucs_status_t status;
    int ret;

    if ((ep == NULL) || (remote_addr == NULL)) {
        uct_ib_error("uct_rc_ep_connect_to_ep: NULL %s",
                     (ep == NULL) ? "ep" : "remote_addr");
        return UCS_ERR_INVALID_PARAM;
    }
    iface = ep->iface;
    md    = iface->md;
    if (ep->connected) {
        uct_ib_error("%s: endpoint (QP 0x%x) is already connected", md->name,
                     ep->qp->qp_num);
        return UCS_ERR_ALREADY_EXISTS;
    }
    status = uct_rc_ep_addr_unpack(remote_addr, &addr);
    if (status != UCS_OK) {
        return status;
    }
    if (addr.is_roce != md->attr.is_roce) {
        uct_ib_error("%s: cannot connect a %s port to a %s peer", md->name,
                     md->attr.is_roce ? "RoCE" : "InfiniBand",
                     addr.is_roce ? "RoCE" : "InfiniBand");
        return UCS_ERR_UNREACHABLE;
    }

    memset(&attr, 0, sizeof(attr));
    attr.qp_state           = IBV_QPS_RTR;
    attr.path_mtu           = ucs_min(addr.mtu, md->port_attr.active_mtu);
    attr.dest_qp_num        = addr.qpn;
    attr.rq_psn             = 0;
    attr.max_dest_rd_atomic = iface->max_rd_atomic;
    attr.min_rnr_timer      = 12; /* 0.64 ms */
    attr.ah_attr.port_num   = md->attr.port_num;
    attr.ah_attr.sl         = 0;
    if (md->attr.is_roce) {
        attr.ah_attr.is_global      = 1;
        attr.ah_attr.grh.dgid       = addr.gid;
        attr.ah_attr.grh.sgid_index = md->attr.gid_index;
        attr.ah_attr.grh.hop_limit  = 64;
    } else {
        attr.ah_attr.dlid = addr.lid;
    }
    ret = ibv_modify_qp(ep->qp, &attr,
                        IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                            IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                            IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (ret != 0) {
        uct_ib_error("%s: QP 0x%x to RTR (peer QP 0x%x) failed: %s", md->name,
                     ep->qp->qp_num, addr.qpn, strerror(ret));
        return UCS_ERR_UNREACHABLE;
    }

    memset(&attr, 0, sizeof(attr));
    attr.qp_state      = IBV_QPS_RTS;
    attr.timeout       = iface->config.timeout;
    attr.retry_cnt     = iface->config.retry_count;
    attr.rnr_retry     = iface->config.rnr_retry;
    attr.sq_psn        = 0;
    attr.max_rd_atomic = iface->max_rd_atomic;
    ret                = ibv_modify_qp(ep->qp, &attr,
                                       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                           IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                           IBV_QP_MAX_QP_RD_ATOMIC);
    if (ret != 0) {
        uct_ib_error("%s: QP 0x%x to RTS failed: %s", md->name, ep->qp->qp_num,
                     strerror(ret));
        return UCS_ERR_IO_ERROR;
    }
    ep->connected = 1;
    return UCS_OK;
}

static const char *uct_rc_opcode_name(uint8_t opcode)
{
    switch (opcode) {
    case IBV_WR_RDMA_WRITE: return "RDMA WRITE";
    case IBV_WR_RDMA_READ: return "RDMA READ";
    default: return "SEND";
    }
}

void uct_rc_ep_tx_completed(uct_rc_ep_t *ep, uct_rc_tx_desc_t *desc,
                            const struct ibv_wc *wc)
{
    uct_rc_iface_t *iface  = ep->iface;
    uct_completion_t *comp = desc->comp;
    ucs_status_t status    = uct_rc_wc_status(wc->status);
    ucs_list_link_t done;
    uct_rc_flush_req_t *req;
    ucs_status_t ep_status;
    uint32_t index;

    if (status != UCS_OK) {
        if (ep->status == UCS_OK) {
            ep->status = status;
            uct_ib_error("%s: %s on QP 0x%x failed: %s (vendor error 0x%x); "
                         "the endpoint is now in error state (%s)",
                         iface->md->name, uct_rc_opcode_name(desc->opcode),
                         wc->qp_num, ibv_wc_status_str(wc->status),
                         wc->vendor_err, ucs_status_string(status));
        } else if (wc->status == IBV_WC_WR_FLUSH_ERR) {
            status = ep->status; /* the cause, not "flushed" */
        }
    }
    /* this WR and the unsignaled ones posted before it (oldest first; they
     * have no callback) are done */
    do {
        index       = ep->tx_head;
        ep->tx_head = iface->tx_descs[index].next;
        uct_rc_iface_desc_put(iface, index);
        ++ep->tx_avail;
        ++ep->tx_done_sn;
    } while ((index != wc->wr_id) && (ep->tx_head != UINT32_MAX));
    if (ep->tx_head == UINT32_MAX) {
        ep->tx_tail = UINT32_MAX;
    }

    /* collect satisfied flushes before any callback may destroy ep */
    ucs_list_head_init(&done);
    while (!ucs_list_is_empty(&ep->flush_reqs)) {
        req = ucs_container_of(ep->flush_reqs.next, uct_rc_flush_req_t, list);
        if (req->sn > ep->tx_done_sn) {
            break;
        }
        ucs_list_del(&req->list);
        ucs_list_add_tail(&done, &req->list);
    }
    ep_status = ep->status;

    uct_invoke_completion(comp, status);
    while (!ucs_list_is_empty(&done)) {
        req = ucs_container_of(done.next, uct_rc_flush_req_t, list);
        ucs_list_del(&req->list);
        uct_invoke_completion(req->comp, ep_status);
        free(req);
    }
}

ucs_status_t uct_rc_ep_flush(uct_rc_ep_t *ep, uct_completion_t *comp)
{
    uct_rc_flush_req_t *req;
    ucs_status_t status;

    if (ep == NULL) {
        uct_ib_error("uct_rc_ep_flush: NULL ep");
        return UCS_ERR_INVALID_PARAM;
    }
    if (ep->tx_done_sn == ep->tx_posted_sn) {
        return ep->status;
    }
    if ((ep->tx_sig_sn != ep->tx_posted_sn) && (ep->status == UCS_OK)) {
        /* the last WR is unsignaled: nothing would report its completion */
        status = uct_rc_ep_post_flush(ep);
        if (status != UCS_INPROGRESS) {
            return status;
        }
    }
    if (comp == NULL) {
        return UCS_INPROGRESS;
    }
    req = malloc(sizeof(*req));
    if (req == NULL) {
        uct_ib_error("%s: no memory for a flush request", ep->iface->md->name);
        return UCS_ERR_NO_MEMORY;
    }
    req->comp = comp;
    req->sn   = ep->tx_posted_sn;
    ucs_list_add_tail(&ep->flush_reqs, &req->list);
    return UCS_INPROGRESS;
}

ucs_status_t uct_rc_ep_status(const uct_rc_ep_t *ep)
{
    if (ep == NULL) {
        uct_ib_error("uct_rc_ep_status: NULL ep");
        return UCS_ERR_INVALID_PARAM;
    }
    return ep->status;
}

static double uct_rc_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void uct_rc_ep_destroy(uct_rc_ep_t *ep)
{
    uct_rc_iface_t *iface;
    struct ibv_qp_attr attr;
    uct_rc_flush_req_t *req;
    double deadline;
    unsigned i, orphans = 0;

    if (ep == NULL) {
        return;
    }
    iface = ep->iface;
    if (ep->tx_done_sn != ep->tx_posted_sn) {
        /* flush the QP: its operations complete with UCS_ERR_CANCELED */
        if (ep->status == UCS_OK) {
            ep->status = UCS_ERR_CANCELED;
        }
        memset(&attr, 0, sizeof(attr));
        attr.qp_state = IBV_QPS_ERR;
        ibv_modify_qp(ep->qp, &attr, IBV_QP_STATE);
        deadline = uct_rc_now() + 5.0;
        while ((ep->tx_done_sn != ep->tx_posted_sn) &&
               (uct_rc_now() < deadline)) {
            uct_rc_iface_progress(iface);
        }
        for (i = 0; i < iface->config.tx_cq_len; ++i) {
            if (iface->tx_descs[i].ep == ep) {
                iface->tx_descs[i].ep = UCT_RC_DESC_ORPHAN;
                uct_invoke_completion(iface->tx_descs[i].comp,
                                      UCS_ERR_CANCELED);
                iface->tx_descs[i].comp = NULL;
                ++orphans;
            }
        }
        if (orphans != 0) {
            uct_ib_error("%s: QP 0x%x destroyed with %u operation(s) not "
                         "flushed by the device",
                         iface->md->name, ep->qp->qp_num, orphans);
        }
    }
    while (!ucs_list_is_empty(&ep->flush_reqs)) {
        req = ucs_container_of(ep->flush_reqs.next, uct_rc_flush_req_t, list);
        ucs_list_del(&req->list);
        uct_invoke_completion(req->comp, UCS_ERR_CANCELED);
        free(req);
    }
    if (ibv_destroy_qp(ep->qp) != 0) {
        uct_ib_error("%s: ibv_destroy_qp() failed: %s", iface->md->name,
                     strerror(errno));
    }
    --iface->num_eps;
    free(ep);
}
