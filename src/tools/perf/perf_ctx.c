/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * uct_perftest resources: open the device, the RC interface and endpoint,
 * register the buffer, exchange addresses and keys with the peer over the
 * TCP connection, connect.
 */
#include "perf_ctx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* What each side sends the other once its resources are ready. */
typedef struct {
    uint64_t buf;
    uint64_t half;
    uint8_t rkey[UCT_IB_RKEY_PACKED_SIZE];
    uint8_t ep_addr[UCT_RC_EP_ADDR_SIZE];
} perf_ctx_wire_t;

uint8_t perf_ctx_pattern(size_t offset, int seed)
{
    return (uint8_t)(offset * 13 + (offset >> 8) * 7 + seed);
}

void perf_ctx_fill(uint8_t *buf, size_t len, int seed)
{
    size_t i;

    for (i = 0; i < len; ++i) {
        buf[i] = perf_ctx_pattern(i, seed);
    }
}

int perf_ctx_check(const uint8_t *buf, size_t start, size_t len, int seed)
{
    size_t i;

    for (i = 0; i < len; ++i) {
        if (buf[i] != perf_ctx_pattern(start + i, seed)) {
            fprintf(stderr,
                    "uct_perftest: data check failed at byte %zu: 0x%02x, "
                    "expected 0x%02x\n",
                    start + i, buf[i], perf_ctx_pattern(start + i, seed));
            return -1;
        }
    }
    return 0;
}

size_t perf_ctx_iov(perf_ctx_t *ctx, void *base, uct_ib_mem_t *memh,
                    uct_iov_t *iov)
{
    const perf_params_t *p = ctx->params;
    uint8_t *ptr           = base;
    unsigned i;

    for (i = 0; i < p->iovcnt; ++i) {
        iov[i].buffer = ptr;
        iov[i].length = p->sizes[i];
        iov[i].memh   = memh;
        ptr += p->sizes[i];
    }
    return p->iovcnt;
}

static ucs_status_t perf_ctx_am_data_cb(void *arg, void *data, size_t length,
                                        unsigned flags)
{
    perf_ctx_t *ctx = arg;
    uint64_t seq, total;
    int peer_seed;

    if (length != ctx->params->msg_size) {
        ctx->am_bad = 1;
        return UCS_OK;
    }
    memcpy(&seq, data, sizeof(seq));
    /* RC delivers in order; ping-pong and streaming both count from 0 */
    if (seq != ctx->am_count) {
        ctx->am_bad = 1;
    }
    total     = ctx->params->warmup + ctx->params->iters;
    peer_seed = ctx->is_server ? PERF_SEED_CLIENT : PERF_SEED_SERVER;
    if ((seq + 1 == total) &&
        (perf_ctx_check((uint8_t *)data + PERF_AM_HDR_SIZE, PERF_AM_HDR_SIZE,
                        length - PERF_AM_HDR_SIZE, peer_seed) != 0)) {
        ctx->am_bad = 1;
    }
    ctx->am_last_seq = seq;
    ctx->am_count    = ctx->am_count + 1;
    return UCS_OK;
}

static ucs_status_t perf_ctx_am_credit_cb(void *arg, void *data, size_t length,
                                          unsigned flags)
{
    perf_ctx_t *ctx = arg;
    uint64_t n;

    if (length < sizeof(n)) {
        ctx->am_bad = 1;
        return UCS_OK;
    }
    memcpy(&n, data, sizeof(n));
    ctx->am_credits = ctx->am_credits + n;
    return UCS_OK;
}

static ucs_status_t perf_ctx_check_limits(perf_ctx_t *ctx)
{
    const perf_params_t *p       = ctx->params;
    const uct_rc_iface_attr_t *a = &ctx->attr;

    if ((p->test == PERF_TEST_AM_BW) || (p->test == PERF_TEST_AM_LAT)) {
        if ((p->msg_size < PERF_AM_HDR_SIZE) || (p->msg_size > a->seg_size)) {
            fprintf(stderr,
                    "uct_perftest: %s message size must be %d..%zu bytes "
                    "(the %d-byte header is part of it; UCX_RC_SEG_SIZE "
                    "sets the maximum)\n",
                    perf_test_name(p->test), PERF_AM_HDR_SIZE, a->seg_size,
                    PERF_AM_HDR_SIZE);
            return UCS_ERR_INVALID_PARAM;
        }
        if (p->iovcnt + 1 > a->max_iov) {
            fprintf(stderr,
                    "uct_perftest: at most %zu io-vector entries for "
                    "active messages\n",
                    a->max_iov - 1);
            return UCS_ERR_INVALID_PARAM;
        }
        if ((p->test == PERF_TEST_AM_BW) && (p->am_window > a->rx_queue_len)) {
            fprintf(stderr,
                    "uct_perftest: -W %u exceeds the %u posted receive "
                    "buffers (UCX_RC_RX_QUEUE_LEN)\n",
                    p->am_window, a->rx_queue_len);
            return UCS_ERR_INVALID_PARAM;
        }
    } else {
        if (p->msg_size > a->max_zcopy) {
            fprintf(stderr,
                    "uct_perftest: message size %zu exceeds the "
                    "device's %zu\n",
                    p->msg_size, a->max_zcopy);
            return UCS_ERR_INVALID_PARAM;
        }
        if (p->iovcnt > a->max_iov) {
            fprintf(stderr, "uct_perftest: at most %zu io-vector entries\n",
                    a->max_iov);
            return UCS_ERR_INVALID_PARAM;
        }
    }
    if (p->outstanding > a->tx_queue_len) {
        fprintf(stderr,
                "uct_perftest: -O %u exceeds the send queue length %u "
                "(UCX_RC_TX_QUEUE_LEN)\n",
                p->outstanding, a->tx_queue_len);
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}

static ucs_status_t perf_ctx_local(perf_ctx_t *ctx, perf_ctx_wire_t *wire)
{
    const perf_params_t *p = ctx->params;
    long page              = sysconf(_SC_PAGESIZE);
    ucs_status_t status;
    void *ptr;
    unsigned i;

    status = uct_ib_md_open(p->dev, &ctx->md);
    if (status != UCS_OK) {
        fprintf(stderr, "uct_perftest: cannot open device '%s': %s\n", p->dev,
                ucs_status_string(status));
        return status;
    }
    status = uct_rc_iface_open(ctx->md, NULL, &ctx->iface);
    if (status != UCS_OK) {
        fprintf(stderr,
                "uct_perftest: cannot open the rc_verbs interface on "
                "%s: %s\n",
                p->dev, ucs_status_string(status));
        return status;
    }
    status = uct_rc_iface_query(ctx->iface, &ctx->attr);
    if (status != UCS_OK) {
        return status;
    }
    status = perf_ctx_check_limits(ctx);
    if (status != UCS_OK) {
        return status;
    }
    ctx->window = p->outstanding;
    if (ctx->window == 0) {
        ctx->window = ctx->attr.tx_queue_len;
        if (p->reg_mode != PERF_REG_ONCE) {
            ctx->window = ucs_min(ctx->window, PERF_G_WINDOW);
        }
    }

    status = uct_rc_ep_create(ctx->iface, &ctx->ep);
    if (status != UCS_OK) {
        fprintf(stderr, "uct_perftest: cannot create an endpoint: %s\n",
                ucs_status_string(status));
        return status;
    }

    ctx->half    = (p->msg_size + page - 1) / page * page;
    ctx->buf_len = 2 * ctx->half;
    ptr          = mmap(NULL, ctx->buf_len, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (ptr == MAP_FAILED) {
        fprintf(stderr, "uct_perftest: cannot map %zu bytes\n", ctx->buf_len);
        return UCS_ERR_NO_MEMORY;
    }
    ctx->buf = ptr;
    perf_ctx_fill(ctx->buf, ctx->half,
                  ctx->is_server ? PERF_SEED_SERVER : PERF_SEED_CLIENT);
    memset(ctx->buf + ctx->half, 0, ctx->half);
    status = uct_ib_md_mem_reg(ctx->md, ctx->buf, ctx->buf_len,
                               UCT_IB_MEM_ACCESS_ALL, &ctx->memh);
    if (status != UCS_OK) {
        fprintf(stderr, "uct_perftest: cannot register %zu bytes: %s\n",
                ctx->buf_len, ucs_status_string(status));
        return status;
    }

    ctx->slots = calloc(ctx->window, sizeof(*ctx->slots));
    if (ctx->slots == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    for (i = 0; i < ctx->window; ++i) {
        ctx->slots[i].ctx = ctx;
    }

    status = uct_rc_iface_set_am_handler(ctx->iface, PERF_AM_ID_DATA,
                                         perf_ctx_am_data_cb, ctx);
    if (status == UCS_OK) {
        status = uct_rc_iface_set_am_handler(ctx->iface, PERF_AM_ID_CREDIT,
                                             perf_ctx_am_credit_cb, ctx);
    }
    if (status != UCS_OK) {
        return status;
    }

    memset(wire, 0, sizeof(*wire));
    wire->buf  = (uintptr_t)ctx->buf;
    wire->half = ctx->half;
    status     = uct_ib_md_rkey_pack(ctx->md, ctx->memh, wire->rkey);
    if (status != UCS_OK) {
        return status;
    }
    return uct_rc_ep_get_address(ctx->ep, wire->ep_addr);
}

ucs_status_t perf_ctx_setup(perf_ctx_t *ctx, perf_params_t *params, int fd,
                            int is_server)
{
    perf_ctx_wire_t mine, peer;
    ucs_status_t status;

    memset(ctx, 0, sizeof(*ctx));
    ctx->params    = params;
    ctx->fd        = fd;
    ctx->is_server = is_server;

    /* both sides learn whether the other one could set up */
    status = perf_sock_sync(fd, perf_ctx_local(ctx, &mine));
    if (status != UCS_OK) {
        return status;
    }
    status = perf_sock_send(fd, &mine, sizeof(mine));
    if (status == UCS_OK) {
        status = perf_sock_recv(fd, &peer, sizeof(peer));
    }
    if (status != UCS_OK) {
        return status;
    }

    if (peer.half != ctx->half) {
        fprintf(stderr,
                "uct_perftest: the peer's buffer is %llu bytes, "
                "ours %zu\n",
                (unsigned long long)peer.half, ctx->half);
        status = UCS_ERR_INVALID_PARAM;
    } else {
        ctx->peer_buf = peer.buf;
        status        = uct_ib_rkey_unpack(peer.rkey, &ctx->peer_rkey);
    }
    if (status == UCS_OK) {
        status = uct_rc_ep_connect_to_ep(ctx->ep, peer.ep_addr);
        if (status != UCS_OK) {
            fprintf(stderr, "uct_perftest: cannot connect the endpoint: %s\n",
                    ucs_status_string(status));
        }
    }
    return perf_sock_sync(fd, status);
}

void perf_ctx_cleanup(perf_ctx_t *ctx)
{
    perf_slot_t *slot;
    unsigned i;

    if (ctx->ep != NULL) {
        uct_rc_ep_destroy(ctx->ep);
    }
    for (i = 0; (ctx->slots != NULL) && (i < ctx->window); ++i) {
        slot = &ctx->slots[i];
        if (slot->memh != NULL) {
            uct_ib_md_mem_dereg(ctx->md, slot->memh);
        }
        if (slot->buf != NULL) {
            munmap(slot->buf, slot->buf_len);
        }
    }
    free(ctx->slots);
    if (ctx->memh != NULL) {
        uct_ib_md_mem_dereg(ctx->md, ctx->memh);
    }
    if (ctx->iface != NULL) {
        uct_rc_iface_close(ctx->iface);
    }
    if (ctx->md != NULL) {
        uct_ib_md_close(ctx->md);
    }
    if (ctx->buf != NULL) {
        munmap(ctx->buf, ctx->buf_len);
    }
    memset(ctx, 0, sizeof(*ctx));
}
