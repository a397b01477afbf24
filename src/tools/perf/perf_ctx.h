/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * uct_perftest run context: the transport resources of one side (MD, RC
 * iface and endpoint, registered buffer, the peer's buffer and key) and the
 * state the test loops share with the completion and AM callbacks.
 *
 * Local buffer layout (registered once, all accesses):
 *   [0, half)       send area: source of puts and AMs, target of peer gets
 *   [half, 2*half)  receive area: target of peer puts and of our gets
 * Both areas start filled with the owner's byte pattern (perf_ctx_pattern),
 * which is the oracle the sides check after a test.
 */
#ifndef UCT_PERF_CTX_H_
#define UCT_PERF_CTX_H_

#include "perf.h"

#include <uct/ib/uct_ib.h>

#define PERF_AM_ID_DATA   1
#define PERF_AM_ID_CREDIT 2
#define PERF_AM_HDR_SIZE  8
#define PERF_SEED_CLIENT  0x11
#define PERF_SEED_SERVER  0x22
#define PERF_STALL_S      60.0 /* a wait with no progress this long fails */
#define PERF_G_WINDOW     32   /* default window with -G: a buffer per slot */

typedef struct perf_ctx perf_ctx_t;

/* One operation in flight (bw tests) and, with -G, its own buffer. */
typedef struct {
    uct_completion_t comp;
    perf_ctx_t *ctx;
    int busy;
    void *buf;          /* -G only */
    size_t buf_len;     /* -G only: mapping length */
    uct_ib_mem_t *memh; /* -G only */
} perf_slot_t;

struct perf_ctx {
    perf_params_t *params;
    int is_server;
    int fd;
    uct_ib_md_t *md;
    uct_rc_iface_t *iface;
    uct_rc_ep_t *ep;
    uct_rc_iface_attr_t attr;
    uint8_t *buf;
    size_t half;
    size_t buf_len;
    uct_ib_mem_t *memh;
    uint64_t peer_buf;
    uct_rkey_t peer_rkey;
    unsigned window;
    perf_slot_t *slots;
    ucs_status_t error; /* first failure seen by a callback */
    /* active messages */
    volatile uint64_t am_count;    /* data messages received */
    volatile uint64_t am_last_seq; /* header of the last one */
    volatile uint64_t am_credits;  /* sends we may still post */
    int am_bad;                    /* order/length/content mismatch */
};

/* perf_ctx.c */
ucs_status_t perf_ctx_setup(perf_ctx_t *ctx, perf_params_t *params, int fd,
                            int is_server);
void perf_ctx_cleanup(perf_ctx_t *ctx);
uint8_t perf_ctx_pattern(size_t offset, int seed);
void perf_ctx_fill(uint8_t *buf, size_t len, int seed);
/* 0 if buf[0..len) holds the pattern of seed at offsets start..start+len */
int perf_ctx_check(const uint8_t *buf, size_t start, size_t len, int seed);
/* iov list of the message sizes over [base, ...) */
size_t perf_ctx_iov(perf_ctx_t *ctx, void *base, uct_ib_mem_t *memh,
                    uct_iov_t *iov);

/* perf_env.c: one line on stderr per thing the environment degrades
 * (no RDMA device, a locked-memory limit below what params pin, memory
 * events off); nothing when all is well.  Call once, params complete. */
void perf_env_report(const perf_params_t *params);

/* perf_run.c */
ucs_status_t perf_run(perf_ctx_t *ctx);

#endif
