/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * RC interface: one CQ for sends and receives, a shared receive queue of
 * rx_queue_len AM buffers (seg_size each, registered once), tx descriptors
 * with registered header slots (tx_cq_len of them: the iface-wide limit on
 * operations in flight), and progress.
 */
#include "uct_ib_int.h"

#include "config.h"

#include <common/ucs_env.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#ifdef HAVE_VALGRIND_VALGRIND_H
#include <valgrind/memcheck.h>
#define UCT_RC_MEM_DEFINED(_p, _len) VALGRIND_MAKE_MEM_DEFINED(_p, _len)
#else
#define UCT_RC_MEM_DEFINED(_p, _len) ((void)0)
#endif

static unsigned uct_rc_param(unsigned param, unsigned config)
{
    return (param != 0) ? param : config;
}

/* soft-RoCE counts transport retries down only below 7: retry_cnt 7 retries
 * for ever, and a dead peer is never reported.  The default becomes 6
 * there (an error after 6 timeouts); a 7 the user set stays, with a
 * warning. */
static void uct_rc_iface_retry_adjust(uct_rc_iface_t *iface)
{
    if (!uct_ib_md_is_soft_roce(iface->md) ||
        (iface->config.retry_count != 7)) {
        return;
    }
    if (ucs_env_get("UCX_RC_RETRY_COUNT") != NULL) {
        uct_ib_warn("%s: UCX_RC_RETRY_COUNT=7 retries for ever on soft-RoCE: "
                    "a dead peer is never reported (6 or less reports it)",
                    iface->md->name);
        return;
    }
    iface->config.retry_count = 6;
    uct_ib_diag("%s: soft-RoCE retries for ever at retry count 7: using 6",
                iface->md->name);
}

static ucs_status_t uct_rc_iface_check(uct_rc_iface_t *iface)
{
    const struct ibv_device_attr *dev = &iface->md->dev_attr.orig_attr;
    const uct_rc_config_t *cfg        = &iface->config;

    if ((cfg->tx_queue_len == 0) ||
        (cfg->tx_queue_len > (unsigned)dev->max_qp_wr)) {
        uct_ib_error("%s: tx queue length %u out of range (1-%d)",
                     iface->md->name, cfg->tx_queue_len, dev->max_qp_wr);
        return UCS_ERR_INVALID_PARAM;
    }
    if ((cfg->rx_queue_len == 0) ||
        (cfg->rx_queue_len > (unsigned)dev->max_srq_wr)) {
        uct_ib_error("%s: rx queue length %u out of range (1-%d)",
                     iface->md->name, cfg->rx_queue_len, dev->max_srq_wr);
        return UCS_ERR_INVALID_PARAM;
    }
    if ((cfg->tx_cq_len == 0) ||
        (cfg->tx_cq_len + cfg->rx_queue_len > (unsigned)dev->max_cqe)) {
        uct_ib_error("%s: tx cq length %u + rx queue length %u out of range "
                     "(the device allows %d completions)",
                     iface->md->name, cfg->tx_cq_len, cfg->rx_queue_len,
                     dev->max_cqe);
        return UCS_ERR_INVALID_PARAM;
    }
    if ((cfg->seg_size < UCT_RC_AM_HDR_MAX) || (cfg->seg_size > (1ul << 30))) {
        uct_ib_error("%s: segment size %zu out of range (%u bytes - 1 GiB)",
                     iface->md->name, cfg->seg_size, UCT_RC_AM_HDR_MAX);
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}

static ucs_status_t uct_rc_iface_tx_init(uct_rc_iface_t *iface)
{
    unsigned n = iface->config.tx_cq_len, i;

    iface->tx_descs = calloc(n, sizeof(*iface->tx_descs));
    iface->tx_hdrs =
        aligned_alloc(4096, ((size_t)n * UCT_RC_AM_HDR_MAX + 4095) & ~4095ul);
    if ((iface->tx_descs == NULL) || (iface->tx_hdrs == NULL)) {
        uct_ib_error("%s: no memory for %u tx descriptors", iface->md->name, n);
        return UCS_ERR_NO_MEMORY;
    }
    iface->tx_hdr_mr = ibv_reg_mr(iface->md->pd, iface->tx_hdrs,
                                  (size_t)n * UCT_RC_AM_HDR_MAX, 0);
    if (iface->tx_hdr_mr == NULL) {
        return uct_ib_md_reg_diagnose(iface->md, iface->tx_hdrs,
                                      (size_t)n * UCT_RC_AM_HDR_MAX, 0, errno);
    }
    for (i = 0; i < n; ++i) {
        iface->tx_descs[i].next = (i + 1 < n) ? i + 1 : UINT32_MAX;
    }
    iface->tx_free  = 0;
    iface->tx_avail = n;
    return UCS_OK;
}

static ucs_status_t uct_rc_iface_rx_init(uct_rc_iface_t *iface)
{
    size_t size = (size_t)iface->config.rx_queue_len * iface->config.seg_size;
    struct ibv_srq_init_attr srq_attr;
    unsigned i;

    iface->rx_bufs = aligned_alloc(4096, (size + 4095) & ~4095ul);
    iface->rx_free = calloc(iface->config.rx_queue_len, sizeof(uintptr_t));
    if ((iface->rx_bufs == NULL) || (iface->rx_free == NULL)) {
        uct_ib_error("%s: no memory for %zu bytes of receive buffers",
                     iface->md->name, size);
        return UCS_ERR_NO_MEMORY;
    }
    iface->rx_mr =
        ibv_reg_mr(iface->md->pd, iface->rx_bufs, size, IBV_ACCESS_LOCAL_WRITE);
    if (iface->rx_mr == NULL) {
        return uct_ib_md_reg_diagnose(iface->md, iface->rx_bufs, size,
                                      IBV_ACCESS_LOCAL_WRITE, errno);
    }
    memset(&srq_attr, 0, sizeof(srq_attr));
    srq_attr.attr.max_wr  = iface->config.rx_queue_len;
    srq_attr.attr.max_sge = 1;
    iface->srq            = ibv_create_srq(iface->md->pd, &srq_attr);
    if (iface->srq == NULL) {
        uct_ib_error("%s: ibv_create_srq(%u) failed: %s", iface->md->name,
                     iface->config.rx_queue_len, strerror(errno));
        return UCS_ERR_IO_ERROR;
    }
    for (i = 0; i < iface->config.rx_queue_len; ++i) {
        iface->rx_free[i] =
            (uintptr_t)iface->rx_bufs + (size_t)i * iface->config.seg_size;
    }
    iface->rx_nfree = iface->config.rx_queue_len;
    uct_rc_iface_post_recvs(iface);
    return (iface->rx_nfree == 0) ? UCS_OK : UCS_ERR_IO_ERROR;
}

static void uct_rc_iface_cleanup(uct_rc_iface_t *iface)
{
    if (iface->srq != NULL) {
        ibv_destroy_srq(iface->srq);
    }
    if (iface->rx_mr != NULL) {
        ibv_dereg_mr(iface->rx_mr);
    }
    if (iface->tx_hdr_mr != NULL) {
        ibv_dereg_mr(iface->tx_hdr_mr);
    }
    if (iface->cq != NULL) {
        ibv_destroy_cq(iface->cq);
    }
    free(iface->rx_free);
    free(iface->rx_bufs);
    free(iface->tx_hdrs);
    free(iface->tx_descs);
    free(iface);
}

ucs_status_t uct_rc_iface_open(uct_ib_md_t *md,
                               const uct_rc_iface_params_t *params,
                               uct_rc_iface_t **iface_p)
{
    const struct ibv_device_attr *dev;
    uct_rc_iface_t *iface;
    ucs_status_t status;

    if ((md == NULL) || (iface_p == NULL)) {
        uct_ib_error("uct_rc_iface_open: NULL %s",
                     (md == NULL) ? "md" : "iface_p");
        return UCS_ERR_INVALID_PARAM;
    }
    iface = calloc(1, sizeof(*iface));
    if (iface == NULL) {
        uct_ib_error("%s: no memory for an RC interface", md->name);
        return UCS_ERR_NO_MEMORY;
    }
    iface->md = md;
    status    = uct_rc_config_read(&iface->config);
    if (status != UCS_OK) {
        goto err;
    }
    if (params != NULL) {
        iface->config.tx_queue_len =
            uct_rc_param(params->tx_queue_len, iface->config.tx_queue_len);
        iface->config.tx_cq_len =
            uct_rc_param(params->tx_cq_len, iface->config.tx_cq_len);
        iface->config.rx_queue_len =
            uct_rc_param(params->rx_queue_len, iface->config.rx_queue_len);
        if (params->seg_size != 0) {
            iface->config.seg_size = params->seg_size;
        }
    }
    status = uct_rc_iface_check(iface);
    if (status != UCS_OK) {
        goto err;
    }
    uct_rc_iface_retry_adjust(iface);
    dev            = &md->dev_attr.orig_attr;
    iface->max_iov = ucs_min((size_t)ucs_min(dev->max_sge, dev->max_sge_rd),
                             (size_t)UCT_RC_MAX_IOV);
    iface->max_rd_atomic = ucs_min(dev->max_qp_rd_atom, 16);

    iface->cq = ibv_create_cq(
        md->ctx, iface->config.tx_cq_len + iface->config.rx_queue_len, NULL,
        NULL, 0);
    if (iface->cq == NULL) {
        uct_ib_error("%s: ibv_create_cq() failed: %s", md->name,
                     strerror(errno));
        status = UCS_ERR_IO_ERROR;
        goto err;
    }
    status = uct_rc_iface_tx_init(iface);
    if (status != UCS_OK) {
        goto err;
    }
    status = uct_rc_iface_rx_init(iface);
    if (status != UCS_OK) {
        goto err;
    }
    *iface_p = iface;
    return UCS_OK;

err:
    uct_rc_iface_cleanup(iface);
    return status;
}

void uct_rc_iface_close(uct_rc_iface_t *iface)
{
    if (iface == NULL) {
        return;
    }
    if (iface->num_eps != 0) {
        uct_ib_error("%s: RC interface closed with %u endpoint(s) left: "
                     "leaking it",
                     iface->md->name, iface->num_eps);
        return;
    }
    uct_rc_iface_cleanup(iface);
}

ucs_status_t uct_rc_iface_query(const uct_rc_iface_t *iface,
                                uct_rc_iface_attr_t *attr)
{
    if ((iface == NULL) || (attr == NULL)) {
        uct_ib_error("uct_rc_iface_query: NULL %s",
                     (iface == NULL) ? "iface" : "attr");
        return UCS_ERR_INVALID_PARAM;
    }
    memset(attr, 0, sizeof(*attr));
    attr->tx_queue_len  = iface->config.tx_queue_len;
    attr->tx_cq_len     = iface->config.tx_cq_len;
    attr->rx_queue_len  = iface->config.rx_queue_len;
    attr->seg_size      = iface->config.seg_size;
    attr->max_iov       = iface->max_iov;
    attr->max_am_header = UCT_RC_AM_HDR_MAX;
    attr->max_zcopy     = iface->md->port_attr.max_msg_sz;
    attr->ep_addr_len   = UCT_RC_EP_ADDR_SIZE;
    return UCS_OK;
}

ucs_status_t uct_rc_iface_set_am_handler(uct_rc_iface_t *iface, uint8_t id,
                                         uct_am_callback_t cb, void *arg)
{
    if ((iface == NULL) || (id >= UCT_AM_ID_MAX)) {
        uct_ib_error("uct_rc_iface_set_am_handler: %s",
                     (iface == NULL) ? "NULL iface" : "AM id out of range");
        return UCS_ERR_INVALID_PARAM;
    }
    iface->am[id].cb  = cb;
    iface->am[id].arg = arg;
    return UCS_OK;
}

void uct_rc_iface_post_recvs(uct_rc_iface_t *iface)
{
    struct ibv_recv_wr wr[16], *bad;
    struct ibv_sge sge[16];
    unsigned n, i;
    int ret;

    while (iface->rx_nfree > 0) {
        n = ucs_min(16u, iface->rx_nfree);
        for (i = 0; i < n; ++i) {
            sge[i].addr   = iface->rx_free[iface->rx_nfree - 1 - i];
            sge[i].length = iface->config.seg_size;
            sge[i].lkey   = iface->rx_mr->lkey;
            wr[i].wr_id   = UCT_RC_WR_ID_RX | sge[i].addr;
            wr[i].sg_list = &sge[i];
            wr[i].num_sge = 1;
            wr[i].next    = (i + 1 < n) ? &wr[i + 1] : NULL;
        }
        ret = ibv_post_srq_recv(iface->srq, wr, &bad);
        if (ret != 0) {
            uct_ib_error("%s: ibv_post_srq_recv() failed: %s", iface->md->name,
                         strerror(ret));
            iface->rx_nfree -= bad - wr;
            return;
        }
        iface->rx_nfree -= n;
    }
}

uint32_t uct_rc_iface_desc_get(uct_rc_iface_t *iface)
{
    uint32_t index = iface->tx_free;

    iface->tx_free = iface->tx_descs[index].next;
    --iface->tx_avail;
    return index;
}

void uct_rc_iface_desc_put(uct_rc_iface_t *iface, uint32_t index)
{
    iface->tx_descs[index].ep   = NULL;
    iface->tx_descs[index].comp = NULL;
    iface->tx_descs[index].next = iface->tx_free;
    iface->tx_free              = index;
    ++iface->tx_avail;
}

ucs_status_t uct_rc_wc_status(enum ibv_wc_status status)
{
    switch (status) {
    case IBV_WC_SUCCESS: return UCS_OK;
    case IBV_WC_REM_ACCESS_ERR:
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_LOC_ACCESS_ERR: return UCS_ERR_INVALID_ADDR;
    case IBV_WC_RETRY_EXC_ERR:
    case IBV_WC_RNR_RETRY_EXC_ERR: return UCS_ERR_ENDPOINT_TIMEOUT;
    case IBV_WC_WR_FLUSH_ERR: return UCS_ERR_CANCELED;
    case IBV_WC_LOC_LEN_ERR:
    case IBV_WC_REM_INV_REQ_ERR: return UCS_ERR_MESSAGE_TRUNCATED;
    default: return UCS_ERR_IO_ERROR;
    }
}

static void uct_rc_iface_rx_completed(uct_rc_iface_t *iface,
                                      const struct ibv_wc *wc)
{
    void *data = (void *)(uintptr_t)(wc->wr_id & ~UCT_RC_WR_ID_RX);
    uct_rc_am_entry_t *am;
    uint32_t id;

    if (wc->status != IBV_WC_SUCCESS) {
        if (wc->status != IBV_WC_WR_FLUSH_ERR) {
            uct_ib_error("%s: receive failed: %s", iface->md->name,
                         ibv_wc_status_str(wc->status));
        }
        return;
    }
    id = ntohl(wc->imm_data);
    if (!(wc->wc_flags & IBV_WC_WITH_IMM) || (id >= UCT_AM_ID_MAX) ||
        (iface->am[id].cb == NULL)) {
        uct_ib_warn("%s: dropped a message of %u bytes for AM id %u: no "
                    "handler",
                    iface->md->name, wc->byte_len, id);
        return;
    }
    am = &iface->am[id];
    /* written by the device: memcheck cannot see it */
    UCT_RC_MEM_DEFINED(data, wc->byte_len);
    am->cb(am->arg, data, wc->byte_len, 0);
}

static void uct_rc_iface_rx_handle(uct_rc_iface_t *iface,
                                   const struct ibv_wc *wc)
{
    uct_rc_iface_rx_completed(iface, wc);
    /* the buffer is free once its handler returned */
    iface->rx_free[iface->rx_nfree++] = wc->wr_id & ~UCT_RC_WR_ID_RX;
}

unsigned uct_rc_iface_progress(uct_rc_iface_t *iface)
{
    struct ibv_wc wc[16];
    uct_rc_tx_desc_t *desc;
    int n, i, rx = 0;

    n = ibv_poll_cq(iface->cq, 16, wc);
    if (n <= 0) {
        if (n < 0) {
            uct_ib_error("%s: ibv_poll_cq() failed: %d", iface->md->name, n);
        }
        return 0;
    }
    for (i = 0; i < n; ++i) {
        if (wc[i].wr_id & UCT_RC_WR_ID_RX) {
            uct_rc_iface_rx_handle(iface, &wc[i]);
            rx = 1;
            continue;
        }
        desc = &iface->tx_descs[wc[i].wr_id];
        if (desc->ep == UCT_RC_DESC_ORPHAN) {
            uct_rc_iface_desc_put(iface, wc[i].wr_id);
        } else {
            uct_rc_ep_tx_completed(desc->ep, desc, &wc[i]);
        }
    }
    /* repost in batches: one ibv_post_srq_recv per message is a lock and a
     * WQE write on the latency path; a quarter of the queue (at most 16)
     * may wait */
    if (rx && (iface->rx_nfree >=
               ucs_max(1u, ucs_min(16u, iface->config.rx_queue_len / 4)))) {
        uct_rc_iface_post_recvs(iface);
    }
    return n;
}
