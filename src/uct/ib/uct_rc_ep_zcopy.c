/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * RC operations: put_zcopy (RDMA WRITE), get_zcopy (RDMA READ), am_zcopy
 * (SEND with immediate = AM id; the header is copied into a registered slot
 * and sent as the first SGE) and am_short (SEND of a copied slot).  Puts and
 * sends of up to ep->max_inline bytes go inline (the data is copied into the
 * WQE at post time).  WRs without a completion callback are signaled only
 * every UCX_RC_TX_CQ_MODERATION (see uct_rc_ep_post); credits: ep->tx_avail
 * (QP send queue) and iface->tx_avail (descriptors = CQ entries).
 */
#include "uct_ib_int.h"

#include <arpa/inet.h>
#include <string.h>

static ucs_status_t uct_rc_ep_check(uct_rc_ep_t *ep, const char *op)
{
    if (ucs_unlikely(ep == NULL)) {
        uct_ib_error("%s: NULL ep", op);
        return UCS_ERR_INVALID_PARAM;
    }
    if (ucs_unlikely(ep->status != UCS_OK)) {
        return ep->status; /* error state: fail fast, no log */
    }
    if (ucs_unlikely(!ep->connected)) {
        uct_ib_error("%s: endpoint (QP 0x%x) is not connected", op,
                     ep->qp->qp_num);
        return UCS_ERR_NOT_CONNECTED;
    }
    if ((ep->tx_avail == 0) || (ep->iface->tx_avail == 0)) {
        return UCS_ERR_NO_RESOURCE;
    }
    return UCS_OK;
}

/* iov -> SGEs (zero-length entries skipped), checking each against its memh.
 * need_write: the local memory is written (get). */
static ucs_status_t uct_rc_iov_to_sge(uct_rc_ep_t *ep, const char *op,
                                      const uct_iov_t *iov, size_t iovcnt,
                                      size_t max, int need_write,
                                      struct ibv_sge *sge, int *num_p,
                                      size_t *total_p)
{
    size_t i, total = 0;
    const uct_ib_mem_t *memh;
    uintptr_t start, end;
    int num = 0;

    if ((iovcnt > max) || ((iov == NULL) && (iovcnt != 0))) {
        uct_ib_error("%s: %zu iov entries (at most %zu)", op, iovcnt, max);
        return UCS_ERR_INVALID_PARAM;
    }
    for (i = 0; i < iovcnt; ++i) {
        if (iov[i].length == 0) {
            continue;
        }
        memh  = iov[i].memh;
        start = (uintptr_t)iov[i].buffer;
        end   = start + iov[i].length;
        if ((memh == NULL) || (end < start) ||
            (start < (uintptr_t)memh->address) ||
            (end > (uintptr_t)memh->address + memh->length)) {
            uct_ib_error("%s: iov[%zu] %p length %zu is %s", op, i,
                         iov[i].buffer, iov[i].length,
                         (memh == NULL) ? "without a memory handle"
                                        : "outside its memory handle's range");
            return UCS_ERR_INVALID_PARAM;
        }
        if (need_write && !(memh->access & (UCT_IB_MEM_ACCESS_LOCAL_WRITE |
                                            UCT_IB_MEM_ACCESS_REMOTE_WRITE))) {
            uct_ib_error("%s: iov[%zu] %p was registered without local write "
                         "access",
                         op, i, iov[i].buffer);
            return UCS_ERR_INVALID_PARAM;
        }
        sge[num].addr   = start;
        sge[num].length = iov[i].length;
        sge[num].lkey   = memh->lkey;
        ++num;
        total += iov[i].length;
    }
    if (total > ep->iface->md->port_attr.max_msg_sz) {
        uct_ib_error("%s: %zu bytes exceed the port's message size limit %u",
                     op, total, ep->iface->md->port_attr.max_msg_sz);
        return UCS_ERR_INVALID_PARAM;
    }
    *num_p   = num;
    *total_p = total;
    return UCS_OK;
}

/* IBV_SEND_INLINE if the data fits the QP's inline size. */
static inline unsigned uct_rc_ep_inline(const uct_rc_ep_t *ep, size_t length)
{
    return (length <= ep->max_inline) ? IBV_SEND_INLINE : 0;
}

/* Post wr with descriptor index and send_flags (IBV_SEND_INLINE or 0, or
 * IBV_SEND_SIGNALED to force a completion).  The WR also asks for a
 * completion when it has a callback, every moderation-th time, and when it
 * takes the last credit of the QP or of the interface (so a completion is
 * always on its way when credits run out). */
static ucs_status_t uct_rc_ep_post(uct_rc_ep_t *ep, struct ibv_send_wr *wr,
                                   uint32_t index, uct_completion_t *comp,
                                   unsigned send_flags)
{
    uct_rc_iface_t *iface  = ep->iface;
    uct_rc_tx_desc_t *desc = &iface->tx_descs[index];
    uint64_t sn            = ep->tx_posted_sn + 1;
    struct ibv_send_wr *bad;
    int signal, ret;

    signal = (send_flags & IBV_SEND_SIGNALED) || (comp != NULL) ||
             (sn - ep->tx_sig_sn >= iface->config.moderation) ||
             (ep->tx_avail == 1) || (iface->tx_avail == 0);
    desc->ep       = ep;
    desc->comp     = comp;
    desc->opcode   = wr->opcode;
    desc->next     = UINT32_MAX;
    wr->wr_id      = index;
    wr->next       = NULL;
    wr->send_flags = send_flags | (signal ? IBV_SEND_SIGNALED : 0);
    ret            = ibv_post_send(ep->qp, wr, &bad);
    if (ucs_unlikely(ret != 0)) {
        uct_rc_iface_desc_put(iface, index);
        uct_ib_error("%s: ibv_post_send() on QP 0x%x failed: %s",
                     iface->md->name, ep->qp->qp_num, strerror(ret));
        return UCS_ERR_IO_ERROR;
    }
    if (ep->tx_tail == UINT32_MAX) {
        ep->tx_head = index;
    } else {
        iface->tx_descs[ep->tx_tail].next = index;
    }
    ep->tx_tail = index;
    if (signal) {
        ep->tx_sig_sn = sn;
    }
    --ep->tx_avail;
    ep->tx_posted_sn = sn;
    return UCS_INPROGRESS;
}

ucs_status_t uct_rc_ep_post_flush(uct_rc_ep_t *ep)
{
    struct ibv_send_wr wr;
    ucs_status_t status;

    status = uct_rc_ep_check(ep, "flush");
    if (status != UCS_OK) {
        return status;
    }
    /* a zero-length RDMA WRITE needs no address or key (IB spec C9-88) */
    memset(&wr, 0, sizeof(wr));
    wr.opcode = IBV_WR_RDMA_WRITE;
    return uct_rc_ep_post(ep, &wr, uct_rc_iface_desc_get(ep->iface), NULL,
                          IBV_SEND_SIGNALED);
}

static ucs_status_t uct_rc_ep_rdma(uct_rc_ep_t *ep, const char *op,
                                   enum ibv_wr_opcode opcode,
                                   const uct_iov_t *iov, size_t iovcnt,
                                   uint64_t remote_addr, uct_rkey_t rkey,
                                   uct_completion_t *comp)
{
    struct ibv_sge sge[UCT_RC_MAX_IOV];
    struct ibv_send_wr wr;
    ucs_status_t status;
    size_t total;
    int num;

    status = uct_rc_ep_check(ep, op);
    if (status != UCS_OK) {
        return status;
    }
    status = uct_rc_iov_to_sge(ep, op, iov, iovcnt, ep->iface->max_iov,
                               opcode == IBV_WR_RDMA_READ, sge, &num, &total);
    if (status != UCS_OK) {
        return status;
    }
    memset(&wr, 0, sizeof(wr));
    wr.opcode              = opcode;
    wr.sg_list             = sge;
    wr.num_sge             = num;
    wr.wr.rdma.remote_addr = remote_addr;
    wr.wr.rdma.rkey        = (uint32_t)rkey;
    return uct_rc_ep_post(
        ep, &wr, uct_rc_iface_desc_get(ep->iface), comp,
        (opcode == IBV_WR_RDMA_WRITE) ? uct_rc_ep_inline(ep, total) : 0);
}

ucs_status_t uct_rc_ep_put_zcopy(uct_rc_ep_t *ep, const uct_iov_t *iov,
                                 size_t iovcnt, uint64_t remote_addr,
                                 uct_rkey_t rkey, uct_completion_t *comp)
{
    return uct_rc_ep_rdma(ep, "put_zcopy", IBV_WR_RDMA_WRITE, iov, iovcnt,
                          remote_addr, rkey, comp);
}

ucs_status_t uct_rc_ep_get_zcopy(uct_rc_ep_t *ep, const uct_iov_t *iov,
                                 size_t iovcnt, uint64_t remote_addr,
                                 uct_rkey_t rkey, uct_completion_t *comp)
{
    return uct_rc_ep_rdma(ep, "get_zcopy", IBV_WR_RDMA_READ, iov, iovcnt,
                          remote_addr, rkey, comp);
}

ucs_status_t uct_rc_ep_am_zcopy(uct_rc_ep_t *ep, uint8_t id, const void *header,
                                unsigned header_length, const uct_iov_t *iov,
                                size_t iovcnt, uct_completion_t *comp)
{
    struct ibv_sge sge[UCT_RC_MAX_IOV];
    uct_rc_iface_t *iface;
    struct ibv_send_wr wr;
    ucs_status_t status;
    uint32_t index;
    size_t total;
    int num;

    status = uct_rc_ep_check(ep, "am_zcopy");
    if (status != UCS_OK) {
        return status;
    }
    iface = ep->iface;
    if ((id >= UCT_AM_ID_MAX) || (header_length > UCT_RC_AM_HDR_MAX) ||
        ((header == NULL) && (header_length != 0))) {
        uct_ib_error("am_zcopy: %s", (id >= UCT_AM_ID_MAX)
                                         ? "AM id out of range"
                                         : "bad header");
        return UCS_ERR_INVALID_PARAM;
    }
    status = uct_rc_iov_to_sge(ep, "am_zcopy", iov, iovcnt, iface->max_iov - 1,
                               0, sge + 1, &num, &total);
    if (status != UCS_OK) {
        return status;
    }
    if (total + header_length > iface->config.seg_size) {
        uct_ib_error("am_zcopy: %u header + %zu payload bytes exceed the "
                     "segment size %zu",
                     header_length, total, iface->config.seg_size);
        return UCS_ERR_INVALID_PARAM;
    }
    index = uct_rc_iface_desc_get(iface);
    memset(&wr, 0, sizeof(wr));
    if (header_length != 0) {
        memcpy(iface->tx_hdrs + (size_t)index * UCT_RC_AM_HDR_MAX, header,
               header_length);
        sge[0].addr =
            (uintptr_t)iface->tx_hdrs + (size_t)index * UCT_RC_AM_HDR_MAX;
        sge[0].length = header_length;
        sge[0].lkey   = iface->tx_hdr_mr->lkey;
        wr.sg_list    = sge;
        wr.num_sge    = num + 1;
    } else {
        wr.sg_list = sge + 1;
        wr.num_sge = num;
    }
    wr.opcode   = IBV_WR_SEND_WITH_IMM;
    wr.imm_data = htonl(id);
    return uct_rc_ep_post(ep, &wr, index, comp,
                          uct_rc_ep_inline(ep, total + header_length));
}

ucs_status_t uct_rc_ep_am_short(uct_rc_ep_t *ep, uint8_t id, uint64_t header,
                                const void *payload, unsigned length)
{
    uct_rc_iface_t *iface;
    struct ibv_send_wr wr;
    struct ibv_sge sge;
    ucs_status_t status;
    uint32_t index;
    uint8_t *slot;

    status = uct_rc_ep_check(ep, "am_short");
    if (status != UCS_OK) {
        return status;
    }
    iface = ep->iface;
    if ((id >= UCT_AM_ID_MAX) || (length > UCT_RC_AM_HDR_MAX - 8) ||
        ((payload == NULL) && (length != 0))) {
        uct_ib_error("am_short: %s", (id >= UCT_AM_ID_MAX)
                                         ? "AM id out of range"
                                         : "bad payload (at most 120 bytes)");
        return UCS_ERR_INVALID_PARAM;
    }
    index = uct_rc_iface_desc_get(iface);
    slot  = iface->tx_hdrs + (size_t)index * UCT_RC_AM_HDR_MAX;
    memcpy(slot, &header, sizeof(header));
    if (length != 0) {
        memcpy(slot + sizeof(header), payload, length);
    }
    sge.addr   = (uintptr_t)slot;
    sge.length = sizeof(header) + length;
    sge.lkey   = iface->tx_hdr_mr->lkey;
    memset(&wr, 0, sizeof(wr));
    wr.opcode   = IBV_WR_SEND_WITH_IMM;
    wr.imm_data = htonl(id);
    wr.sg_list  = &sge;
    wr.num_sge  = 1;
    status =
        uct_rc_ep_post(ep, &wr, index, NULL, uct_rc_ep_inline(ep, sge.length));
    return (status == UCS_INPROGRESS) ? UCS_OK : status;
}
