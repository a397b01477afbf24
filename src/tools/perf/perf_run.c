/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * uct_perftest test loops.  The client times every iteration; the server is
 * the passive side of one-sided tests (it waits on the TCP connection: the
 * NIC serves RDMA WRITE and READ without it) and the echoing side of the
 * ping-pong and active message tests.  Every test ends with a flush and a
 * data check on the side that received data, then a status exchange.
 */
#include "perf_ctx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

typedef struct {
    uint64_t spins;
    uint64_t deadline;
} perf_wait_t;

/* One progress call while waiting; fails when the endpoint is in error or
 * nothing has happened for PERF_STALL_S seconds. */
static ucs_status_t perf_progress(perf_ctx_t *ctx, perf_wait_t *w)
{
    ucs_status_t status;
    uint64_t now;

    if (uct_rc_iface_progress(ctx->iface) != 0) {
        w->deadline = 0;
    }
    if (ucs_unlikely(ctx->error != UCS_OK)) {
        return ctx->error;
    }
    if (ucs_likely((++w->spins & 0xfff) != 0)) {
        return UCS_OK;
    }
    status = uct_rc_ep_status(ctx->ep);
    if (status != UCS_OK) {
        fprintf(stderr, "uct_perftest: endpoint failed: %s\n",
                ucs_status_string(status));
        return status;
    }
    now = perf_now_ns();
    if (w->deadline == 0) {
        w->deadline = now + (uint64_t)(PERF_STALL_S * 1e9);
    } else if (now > w->deadline) {
        fprintf(stderr,
                "uct_perftest: no progress for %.0f s (is the peer "
                "alive?)\n",
                PERF_STALL_S);
        return UCS_ERR_TIMED_OUT;
    }
    return UCS_OK;
}

/* Judge the status of a post: UCS_ERR_NO_RESOURCE -> one progress call and
 * UCS_ERR_NO_RESOURCE again (post again) unless progress failed; an error ->
 * one line naming op. */
static ucs_status_t perf_posted(perf_ctx_t *ctx, perf_wait_t *w, const char *op,
                                ucs_status_t status)
{
    ucs_status_t progress;

    if (status == UCS_ERR_NO_RESOURCE) {
        progress = perf_progress(ctx, w);
        return (progress == UCS_OK) ? UCS_ERR_NO_RESOURCE : progress;
    }
    if (UCS_STATUS_IS_ERR(status)) {
        fprintf(stderr, "uct_perftest: %s failed: %s\n", op,
                ucs_status_string(status));
    }
    return status;
}

static void perf_slot_done(uct_completion_t *self)
{
    perf_slot_t *slot = (perf_slot_t *)self; /* comp is the first member */

    slot->busy = 0;
    if ((self->status != UCS_OK) && (slot->ctx->error == UCS_OK)) {
        fprintf(stderr, "uct_perftest: operation failed: %s\n",
                ucs_status_string(self->status));
        slot->ctx->error = self->status;
    }
}

static ucs_status_t perf_wait_slot(perf_ctx_t *ctx, perf_slot_t *slot)
{
    perf_wait_t w = {0, 0};
    ucs_status_t status;

    while (slot->busy) {
        status = perf_progress(ctx, &w);
        if (status != UCS_OK) {
            return status;
        }
    }
    return ctx->error;
}

static void perf_flush_done(uct_completion_t *self)
{
}

static ucs_status_t perf_flush(perf_ctx_t *ctx)
{
    uct_completion_t comp = {perf_flush_done, 1, UCS_OK};
    perf_wait_t w         = {0, 0};
    ucs_status_t status;
    unsigned i;

    do {
        status = perf_posted(ctx, &w, "flush", uct_rc_ep_flush(ctx->ep, &comp));
    } while (status == UCS_ERR_NO_RESOURCE);
    if (status == UCS_INPROGRESS) {
        while (comp.count > 0) {
            status = perf_progress(ctx, &w);
            if (status != UCS_OK) {
                return status;
            }
        }
        status = perf_posted(ctx, &w, "flush", comp.status);
    }
    if (status != UCS_OK) {
        return status;
    }
    for (i = 0; i < ctx->window; ++i) {
        status = perf_wait_slot(ctx, &ctx->slots[i]);
        if (status != UCS_OK) {
            return status;
        }
    }
    return UCS_OK;
}

/* The end of a test: flush, then (report) the final line. */
static ucs_status_t perf_run_finish(perf_ctx_t *ctx, perf_report_t *rep,
                                    int report)
{
    ucs_status_t status = perf_flush(ctx);

    if ((status == UCS_OK) && report) {
        perf_report_final(rep);
    }
    return status;
}

/* Pattern of the source buffer of put_bw iteration i: with -G new every
 * buffer gets another one, so a put through a stale registration (the old,
 * unmapped pages) leaves the wrong bytes at the server. */
static int perf_put_seed(const perf_params_t *p, uint64_t i)
{
    if (p->reg_mode != PERF_REG_NEW) {
        return PERF_SEED_CLIENT;
    }
    return PERF_SEED_CLIENT + 1 + (int)(i % 251);
}

/* -G: give the slot a freshly registered buffer for iteration i. */
static ucs_status_t perf_slot_register(perf_ctx_t *ctx, perf_slot_t *slot,
                                       uint64_t i)
{
    const perf_params_t *p = ctx->params;
    ucs_status_t status;
    void *ptr;

    if (slot->memh != NULL) {
        status     = uct_ib_md_mem_dereg(ctx->md, slot->memh);
        slot->memh = NULL;
        if (status != UCS_OK) {
            fprintf(stderr, "uct_perftest: mem_dereg failed: %s\n",
                    ucs_status_string(status));
            return status;
        }
    }
    if ((p->reg_mode == PERF_REG_NEW) && (slot->buf != NULL)) {
        munmap(slot->buf, slot->buf_len);
        slot->buf = NULL;
    }
    if (slot->buf == NULL) {
        ptr = mmap(NULL, ctx->half, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (ptr == MAP_FAILED) {
            fprintf(stderr, "uct_perftest: cannot map %zu bytes\n", ctx->half);
            return UCS_ERR_NO_MEMORY;
        }
        slot->buf     = ptr;
        slot->buf_len = ctx->half;
        if (p->test == PERF_TEST_PUT_BW) {
            perf_ctx_fill(slot->buf, p->msg_size, perf_put_seed(p, i));
        } else {
            memset(slot->buf, 0, p->msg_size);
        }
    }
    status = uct_ib_md_mem_reg(ctx->md, slot->buf, p->msg_size,
                               UCT_IB_MEM_ACCESS_ALL, &slot->memh);
    if (status != UCS_OK) {
        fprintf(stderr, "uct_perftest: mem_reg of %zu bytes failed: %s\n",
                p->msg_size, ucs_status_string(status));
    }
    return status;
}

/* Post one put or get, retrying while the send queue is full. */
static ucs_status_t perf_post_rma(perf_ctx_t *ctx, const uct_iov_t *iov,
                                  size_t iovcnt, uct_completion_t *comp)
{
    perf_wait_t w = {0, 0};
    ucs_status_t status;
    uint64_t raddr;

    do {
        if ((ctx->params->test == PERF_TEST_PUT_BW) ||
            (ctx->params->test == PERF_TEST_PUT_LAT)) {
            raddr  = ctx->peer_buf + ctx->half;
            status = uct_rc_ep_put_zcopy(ctx->ep, iov, iovcnt, raddr,
                                         ctx->peer_rkey, comp);
        } else {
            raddr  = ctx->peer_buf;
            status = uct_rc_ep_get_zcopy(ctx->ep, iov, iovcnt, raddr,
                                         ctx->peer_rkey, comp);
        }
        status =
            perf_posted(ctx, &w, perf_test_name(ctx->params->test), status);
    } while (status == UCS_ERR_NO_RESOURCE);
    return status;
}

/* put_bw, get_bw, get_lat (window 1): client side. */
static ucs_status_t perf_run_rma_client(perf_ctx_t *ctx, perf_report_t *rep,
                                        unsigned window)
{
    const perf_params_t *p = ctx->params;
    uint64_t total         = p->warmup + p->iters;
    uct_iov_t iov[PERF_MAX_IOV];
    perf_slot_t *slot;
    ucs_status_t status;
    uint8_t *local;
    size_t iovcnt;
    uint64_t i;

    local  = (p->test == PERF_TEST_PUT_BW) ? ctx->buf : ctx->buf + ctx->half;
    iovcnt = perf_ctx_iov(ctx, local, ctx->memh, iov);
    for (i = 0; i < total; ++i) {
        if (i == p->warmup) {
            status = perf_flush(ctx);
            if (status != UCS_OK) {
                return status;
            }
            perf_report_start(rep);
        }
        slot   = &ctx->slots[i % window];
        status = perf_wait_slot(ctx, slot);
        if (status != UCS_OK) {
            return status;
        }
        if (p->reg_mode != PERF_REG_ONCE) {
            status = perf_slot_register(ctx, slot, i);
            if (status != UCS_OK) {
                return status;
            }
            iovcnt = perf_ctx_iov(ctx, slot->buf, slot->memh, iov);
        }
        slot->comp.func   = perf_slot_done;
        slot->comp.count  = 1;
        slot->comp.status = UCS_OK;
        status            = perf_post_rma(ctx, iov, iovcnt, &slot->comp);
        if (status == UCS_INPROGRESS) {
            slot->busy = 1;
        } else if (status != UCS_OK) {
            return status;
        }
        if (window == 1) {
            status = perf_wait_slot(ctx, slot);
            if (status != UCS_OK) {
                return status;
            }
        }
        if (i >= p->warmup) {
            perf_report_record(rep);
        }
    }
    return perf_run_finish(ctx, rep, 1);
}

static inline uint8_t perf_lat_seq(uint64_t i)
{
    return (uint8_t)(i % 255 + 1);
}

/* Wait for the peer's write of seq into *in.  The byte is polled on every
 * spin, the completion queue (send credits, errors) only every 16th, so the
 * poll of memory is not delayed by it. */
static ucs_status_t perf_wait_byte(perf_ctx_t *ctx, volatile uint8_t *in,
                                   uint8_t seq)
{
    perf_wait_t w = {0, 0};
    unsigned spin = 0;
    ucs_status_t status;

    while (*in != seq) {
        if ((++spin & 15) != 0) {
            continue;
        }
        status = perf_progress(ctx, &w);
        if (status != UCS_OK) {
            return status;
        }
    }
    return UCS_OK;
}

static size_t perf_am_iov(perf_ctx_t *ctx, uct_iov_t *iov)
{
    size_t n    = perf_ctx_iov(ctx, ctx->buf, ctx->memh, iov);
    size_t skip = PERF_AM_HDR_SIZE, k = 0, i;

    /* the header replaces the first bytes of the message */
    for (i = 0; i < n; ++i) {
        if (skip >= iov[i].length) {
            skip -= iov[i].length;
            continue;
        }
        iov[k].buffer = (uint8_t *)iov[i].buffer + skip;
        iov[k].length = iov[i].length - skip;
        iov[k].memh   = iov[i].memh;
        skip          = 0;
        ++k;
    }
    return k;
}

static ucs_status_t perf_post_am(perf_ctx_t *ctx, uint64_t seq,
                                 const uct_iov_t *iov, size_t iovcnt)
{
    perf_wait_t w = {0, 0};
    ucs_status_t status;

    do {
        status = uct_rc_ep_am_zcopy(ctx->ep, PERF_AM_ID_DATA, &seq, sizeof(seq),
                                    iov, iovcnt, NULL);
        status = perf_posted(ctx, &w, "am_zcopy", status);
    } while (status == UCS_ERR_NO_RESOURCE);
    return status;
}

static ucs_status_t perf_wait_am(perf_ctx_t *ctx, uint64_t count)
{
    perf_wait_t w = {0, 0};
    ucs_status_t status;

    while (ctx->am_count < count) {
        status = perf_progress(ctx, &w);
        if (status != UCS_OK) {
            return status;
        }
    }
    return UCS_OK;
}

/* put_lat and am_lat: a ping-pong, message i in each direction; the client
 * sends first and times every round trip.  put: the peer's sequence number
 * arrives in the last byte of the receive area; am: in the AM count. */
typedef struct {
    int am;
    uct_iov_t iov[PERF_MAX_IOV];
    size_t iovcnt;
    volatile uint8_t *in; /* put: where the peer's write lands */
    uint8_t *out;         /* put: the byte our write carries */
} perf_pingpong_t;

static inline ucs_status_t
perf_pingpong_wait(perf_ctx_t *ctx, const perf_pingpong_t *pp, uint64_t i)
{
    return pp->am ? perf_wait_am(ctx, i + 1)
                  : perf_wait_byte(ctx, pp->in, perf_lat_seq(i));
}

static inline ucs_status_t
perf_pingpong_post(perf_ctx_t *ctx, const perf_pingpong_t *pp, uint64_t i)
{
    if (pp->am) {
        return perf_post_am(ctx, i, pp->iov, pp->iovcnt);
    }
    *pp->out = perf_lat_seq(i);
    return perf_post_rma(ctx, pp->iov, pp->iovcnt, NULL);
}

static ucs_status_t perf_run_pingpong(perf_ctx_t *ctx, perf_report_t *rep)
{
    const perf_params_t *p = ctx->params;
    uint64_t total         = p->warmup + p->iters;
    perf_pingpong_t pp;
    ucs_status_t status;
    uint64_t i;

    pp.am = (p->test == PERF_TEST_AM_LAT);
    if (pp.am) {
        pp.iovcnt = perf_am_iov(ctx, pp.iov);
    } else {
        pp.iovcnt = perf_ctx_iov(ctx, ctx->buf, ctx->memh, pp.iov);
        pp.in     = ctx->buf + ctx->half + p->msg_size - 1;
        pp.out    = ctx->buf + p->msg_size - 1;
    }
    for (i = 0; i < total; ++i) {
        if ((i == p->warmup) && !ctx->is_server) {
            perf_report_start(rep);
        }
        if (ctx->is_server) {
            status = perf_pingpong_wait(ctx, &pp, i);
            if (status != UCS_OK) {
                return status;
            }
        }
        status = perf_pingpong_post(ctx, &pp, i);
        if (UCS_STATUS_IS_ERR(status)) {
            return status;
        }
        if (!ctx->is_server) {
            status = perf_pingpong_wait(ctx, &pp, i);
            if (status != UCS_OK) {
                return status;
            }
            if (i >= p->warmup) {
                perf_report_record(rep);
            }
        }
    }
    return perf_run_finish(ctx, rep, !ctx->is_server);
}

/* am_bw: the client streams, holding at most -W messages the server has not
 * credited back; the server returns credits every W/2 messages. */
static ucs_status_t perf_run_am_bw(perf_ctx_t *ctx, perf_report_t *rep)
{
    const perf_params_t *p = ctx->params;
    uint64_t total         = p->warmup + p->iters;
    uint64_t batch = p->am_window / 2, credited = 0, n;
    uct_iov_t iov[PERF_MAX_IOV];
    ucs_status_t status;
    perf_wait_t w;
    size_t iovcnt;
    uint64_t i;

    if (ctx->is_server) {
        while (credited < total) {
            status = perf_wait_am(ctx, ucs_min(credited + batch, total));
            if (status != UCS_OK) {
                return status;
            }
            n = ctx->am_count - credited;
            w = (perf_wait_t){0, 0};
            do {
                status =
                    uct_rc_ep_am_short(ctx->ep, PERF_AM_ID_CREDIT, n, NULL, 0);
                status = perf_posted(ctx, &w, "am_short", status);
            } while (status == UCS_ERR_NO_RESOURCE);
            if (status != UCS_OK) {
                return status;
            }
            credited += n;
        }
        return perf_flush(ctx);
    }

    ctx->am_credits = p->am_window;
    iovcnt          = perf_am_iov(ctx, iov);
    for (i = 0; i < total; ++i) {
        if (i == p->warmup) {
            perf_report_start(rep);
        }
        w = (perf_wait_t){0, 0};
        while (ctx->am_credits == 0) {
            status = perf_progress(ctx, &w);
            if (status != UCS_OK) {
                return status;
            }
        }
        ctx->am_credits = ctx->am_credits - 1;
        status          = perf_post_am(ctx, i, iov, iovcnt);
        if (UCS_STATUS_IS_ERR(status)) {
            return status;
        }
        if (i >= p->warmup) {
            perf_report_record(rep);
        }
    }
    return perf_run_finish(ctx, rep, 1);
}

/* After the test: the side that received data checks it. */
static ucs_status_t perf_run_verify(perf_ctx_t *ctx)
{
    const perf_params_t *p = ctx->params;
    const uint8_t *data;
    size_t len    = p->msg_size;
    int peer_seed = ctx->is_server ? PERF_SEED_CLIENT : PERF_SEED_SERVER;
    perf_slot_t *slot;

    switch (p->test) {
    case PERF_TEST_PUT_BW:
    case PERF_TEST_PUT_LAT:
        if (!ctx->is_server && (p->test == PERF_TEST_PUT_BW)) {
            return UCS_OK;
        }
        /* the last byte of put_lat carries the sequence number */
        if (p->test == PERF_TEST_PUT_LAT) {
            len -= 1;
        } else {
            peer_seed = perf_put_seed(p, p->warmup + p->iters - 1);
        }
        data = ctx->buf + ctx->half;
        break;
    case PERF_TEST_GET_BW:
    case PERF_TEST_GET_LAT:
        if (ctx->is_server) {
            return UCS_OK;
        }
        data = ctx->buf + ctx->half;
        if (p->reg_mode != PERF_REG_ONCE) {
            slot = &ctx->slots[(p->warmup + p->iters - 1) % ctx->window];
            data = slot->buf;
        }
        break;
    default: /* AM: checked by the handler as messages arrive */
        if (ctx->am_bad) {
            fprintf(stderr, "uct_perftest: active messages arrived out of "
                            "order, with a wrong length or wrong data\n");
            return UCS_ERR_IO_ERROR;
        }
        if ((p->test == PERF_TEST_AM_LAT || ctx->is_server) &&
            (ctx->am_count != p->warmup + p->iters)) {
            fprintf(stderr,
                    "uct_perftest: received %llu active messages, "
                    "expected %llu\n",
                    (unsigned long long)ctx->am_count,
                    (unsigned long long)(p->warmup + p->iters));
            return UCS_ERR_IO_ERROR;
        }
        return UCS_OK;
    }
    if (perf_ctx_check(data, 0, len, peer_seed) != 0) {
        return UCS_ERR_IO_ERROR;
    }
    return UCS_OK;
}

static unsigned perf_run_window(perf_ctx_t *ctx)
{
    return (ctx->params->test == PERF_TEST_GET_LAT) ? 1 : ctx->window;
}

ucs_status_t perf_run(perf_ctx_t *ctx)
{
    const perf_params_t *p = ctx->params;
    perf_report_t rep;
    ucs_status_t status;

    status = perf_report_init(&rep, p);
    if (status != UCS_OK) {
        return perf_sock_sync(ctx->fd, status);
    }
    if (!ctx->is_server) {
        perf_report_header(p);
    }
    perf_report_start(&rep);

    switch (p->test) {
    case PERF_TEST_PUT_BW:
    case PERF_TEST_GET_BW:
    case PERF_TEST_GET_LAT:
        if (ctx->is_server) {
            status = UCS_OK; /* passive: the NIC serves the client */
        } else {
            status = perf_run_rma_client(ctx, &rep, perf_run_window(ctx));
        }
        break;
    case PERF_TEST_PUT_LAT:
    case PERF_TEST_AM_LAT: status = perf_run_pingpong(ctx, &rep); break;
    case PERF_TEST_AM_BW: status = perf_run_am_bw(ctx, &rep); break;
    default: status = UCS_ERR_INVALID_PARAM; break;
    }
    perf_report_cleanup(&rep);

    /* the client's operations are done before the server looks at data */
    status = perf_sock_sync(ctx->fd, status);
    if (status != UCS_OK) {
        return status;
    }
    return perf_sock_sync(ctx->fd, perf_run_verify(ctx));
}
