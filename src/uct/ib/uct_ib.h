/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * uct_ib: verbs memory domain (MD) and RC zero-copy transport (libuct_ib).
 *
 * Memory domain: one opened verbs port with a protection domain.  Memory is
 * registered with the first usable method of UCX_IB_REG_METHODS (default
 * "rcache,odp,direct"): "rcache" goes through the registration cache of
 * libucs (regions dropped when libucm reports their pages unmapped), "odp"
 * registers on-demand-paging MRs (only when ibv_query_device_ex reports RC
 * ODP) that the kernel keeps coherent with the address space, kept by a
 * cache without memory events (UCX_IB_ODP_MAX_REGIONS bounds it), "direct"
 * calls ibv_reg_mr on every registration.  A memory handle
 * carries the lkey and the rkey; remote keys travel packed
 * (UCT_IB_RKEY_PACKED_SIZE bytes).
 *
 * RC transport: one interface per MD holds one completion queue and a
 * shared receive queue of bounded AM receive buffers; every endpoint is one
 * RC queue pair, connected to a peer endpoint through an address blob that
 * the caller exchanges (e.g. over TCP).  put_zcopy = RDMA WRITE,
 * get_zcopy = RDMA READ, am_zcopy = SEND (header + iov) with the AM id in
 * the immediate data.
 *
 * Conventions (every function):
 *  - errors are ucs_status_t with one log line; outputs (*_p) are written
 *    only on success; NULL or malformed arguments -> UCS_ERR_INVALID_PARAM;
 *  - communication operations return UCS_INPROGRESS when posted (comp, if
 *    not NULL, is completed later from uct_rc_iface_progress()), UCS_OK when
 *    done at once, UCS_ERR_NO_RESOURCE when the endpoint or interface has no
 *    free send credit (nothing was posted: progress and retry), or an error;
 *  - an operation that fails on the wire (e.g. bad rkey: IBV_WC_REM_ACCESS_ERR)
 *    completes its comp with an error status; its endpoint enters the error
 *    state and every later operation on it fails at once with that status;
 *  - MD functions are thread-safe; an iface and its endpoints are used by one
 *    thread at a time (like a UCX worker); nothing here may be called from a
 *    memory-event hook or a signal handler.
 *
 * Configuration (UCX_* environment, read at uct_ib_md_open / iface open; a
 * malformed value -> UCS_ERR_INVALID_PARAM with one log line naming it):
 *   UCX_NET_DEVICES       "dev:port"[,...] first usable one (default: first
 *                         active port)
 *   UCX_IB_REG_METHODS    ordered list of rcache, odp, direct
 *   UCX_IB_FORK_INIT      try | yes | no  (ibv_fork_init; skipped when the
 *                         kernel copies pinned pages on fork)
 *   UCX_IB_REG_MT_THRESH  size above which the pages of a registration are
 *                         faulted in by several threads before ibv_reg_mr
 *   UCX_IB_REG_MT_THREADS threads for that (0: online CPUs, at most 16)
 *   UCX_IB_ODP_MAX_REGIONS ODP registrations the odp method keeps (4096)
 *   UCX_IB_ODP_PREFETCH   y | n  ibv_advise_mr prefetch of new ODP MRs
 *   UCX_IB_ODP_IMPLICIT   try | yes | no  the odp method's one implicit ODP
 *                         MR for every range (try: where the device reports
 *                         it; yes: attempt it anyway; a failed attempt falls
 *                         back to explicit MRs with one log line; other
 *                         methods ignore it)
 *   UCX_IB_GID_INDEX      auto | N (auto: the RoCE v2 IPv4-mapped GID)
 *   UCX_RC_TX_QUEUE_LEN, UCX_RC_RX_QUEUE_LEN, UCX_RC_SEG_SIZE,
 *   UCX_RC_TIMEOUT (IB exponent, >= 14), UCX_RC_RETRY_COUNT,
 *   UCX_RC_RNR_RETRY_COUNT
 */
#ifndef UCT_IB_H_
#define UCT_IB_H_

#include <ucs/type/status.h>
#include <ucs/sys/compiler_def.h>
#include <stddef.h>
#include <stdint.h>

BEGIN_C_DECLS

/* ------------------------------------------------------------------ common */

typedef struct uct_ib_md uct_ib_md_t;   /* opened port + PD */
typedef struct uct_ib_mem uct_ib_mem_t; /* registration handle (memh) */
typedef struct uct_rc_iface uct_rc_iface_t;
typedef struct uct_rc_ep uct_rc_ep_t;

/* Unpacked remote key, as passed to put/get_zcopy (the 32-bit verbs rkey). */
typedef uint64_t uct_rkey_t;

typedef struct uct_completion uct_completion_t;
typedef void (*uct_completion_callback_t)(uct_completion_t *self);

/* Completion counter, as in UCX: every operation given this comp decrements
 * count when it completes; func runs when count reaches 0.  status must be
 * UCS_OK initially; the first failing operation stores its error there.
 * func may be NULL: the caller then polls count. */
struct uct_completion {
    uct_completion_callback_t func;
    int count;
    ucs_status_t status;
};

/* One piece of local memory: [buffer, buffer+length) inside memh's range.
 * memh may be NULL only when length is 0. */
typedef struct uct_iov {
    void *buffer;
    size_t length;
    uct_ib_mem_t *memh;
} uct_iov_t;

/* ------------------------------------------------------------ memory domain */

typedef enum {
    UCT_IB_REG_METHOD_RCACHE,
    UCT_IB_REG_METHOD_ODP,
    UCT_IB_REG_METHOD_DIRECT,
    UCT_IB_REG_METHOD_LAST
} uct_ib_reg_method_t;

/* State of fork support after uct_ib_md_open (UCX_IB_FORK_INIT). */
typedef enum {
    UCT_IB_FORK_UNNEEDED, /* kernel copies pinned pages on fork (>= 5.13) */
    UCT_IB_FORK_ENABLED,  /* ibv_fork_init() done (by us or before us) */
    UCT_IB_FORK_DISABLED  /* not enabled: a child must not touch registered
                             pages of the parent */
} uct_ib_fork_state_t;

/* Access of a registration (uct_ib_md_mem_reg flags). */
enum {
    UCT_IB_MEM_ACCESS_LOCAL_WRITE = UCS_BIT(0),  /* local buffer of a get or
                                                    of a received message */
    UCT_IB_MEM_ACCESS_REMOTE_WRITE = UCS_BIT(1), /* target of a remote put */
    UCT_IB_MEM_ACCESS_REMOTE_READ  = UCS_BIT(2), /* source of a remote get */
    UCT_IB_MEM_ACCESS_ALL          = UCS_BIT(0) | UCS_BIT(1) | UCS_BIT(2)
};

#define UCT_IB_DEV_NAME_MAX     64
#define UCT_IB_RKEY_PACKED_SIZE 8 /* bytes written by uct_ib_md_rkey_pack */

typedef struct uct_ib_md_attr {
    char dev_name[UCT_IB_DEV_NAME_MAX]; /* e.g. "rxe0" */
    unsigned port_num;
    int is_roce;        /* Ethernet link layer */
    unsigned gid_index; /* GID used for addressing */
    uint8_t gid[16];
    uint16_t lid;                   /* IB link layer only */
    unsigned active_mtu;            /* bytes */
    int odp_supported;              /* RC ODP (write, read, send, recv) */
    uct_ib_reg_method_t reg_method; /* method in use after fallbacks */
    uct_ib_fork_state_t fork_state;
    uint64_t max_mr_size;
    size_t reg_mt_thresh;    /* UCX_IB_REG_MT_THRESH */
    unsigned reg_mt_threads; /* threads used above the threshold */
    size_t rkey_packed_size; /* UCT_IB_RKEY_PACKED_SIZE */
    /* ODP as ibv_query_device_ex reports it (odp_supported above: explicit
     * ODP usable by RC for write, read, send and receive) */
    int odp_explicit;     /* IBV_ODP_SUPPORT: explicit ODP MRs */
    int odp_implicit;     /* IBV_ODP_SUPPORT_IMPLICIT: one key for all */
    uint32_t odp_rc_caps; /* IBV_ODP_SUPPORT_{SEND,RECV,WRITE,READ,...} */
    int odp_known_broken; /* ODP known to corrupt data (soft-RoCE): the
                           * default UCX_IB_REG_METHODS skips odp */
    /* the odp method's implicit ODP MR (registered at the first odp
     * registration; both 0 before it, or when not wanted) */
    int odp_implicit_used;   /* registered: its keys serve every range */
    int odp_implicit_failed; /* attempted and failed: explicit MRs */
} uct_ib_md_attr_t;

/* Open a verbs port.  dev_spec "dev:port" (e.g. "rxe0:1", port optional,
 * default 1); NULL -> UCX_NET_DEVICES, else the first device with an active
 * port.  Errors: UCS_ERR_NO_DEVICE (no such device / port not active / no
 * verbs devices), UCS_ERR_INVALID_PARAM (malformed spec or UCX_IB_* value,
 * UCX_IB_FORK_INIT=yes failing), UCS_ERR_IO_ERROR (a verbs call failed). */
ucs_status_t uct_ib_md_open(const char *dev_spec, uct_ib_md_t **md_p);

/* Close: every memh and iface of the md must be released before. */
void uct_ib_md_close(uct_ib_md_t *md);

ucs_status_t uct_ib_md_query(const uct_ib_md_t *md, uct_ib_md_attr_t *attr);

/* Register [address, address+length) with UCT_IB_MEM_ACCESS_* flags.
 * Errors: UCS_ERR_INVALID_PARAM (NULL, zero or overflowing length, unknown
 * flags), UCS_ERR_INVALID_ADDR (range not mapped, or mapped without the
 * protection the access needs: e.g. read-only memory for REMOTE_WRITE),
 * UCS_ERR_EXCEEDS_LIMIT (RLIMIT_MEMLOCK too small: the log says the limit),
 * UCS_ERR_NO_MEMORY, UCS_ERR_IO_ERROR.  The handle stays valid (and the
 * pages pinned) until uct_ib_md_mem_dereg, even if the range is unmapped
 * meanwhile (through the cache the stale region is simply not reused).
 * With the odp method nothing is pinned: the handle follows whatever is
 * mapped at its addresses (a page mapped anew there is what the NIC
 * reads and writes), and a hole fails the transfer on the wire. */
ucs_status_t uct_ib_md_mem_reg(uct_ib_md_t *md, void *address, size_t length,
                               unsigned access, uct_ib_mem_t **memh_p);

ucs_status_t uct_ib_md_mem_dereg(uct_ib_md_t *md, uct_ib_mem_t *memh);

/* Keys and range of a handle (memh must be valid). */
uint32_t uct_ib_mem_lkey(const uct_ib_mem_t *memh);
uint32_t uct_ib_mem_rkey(const uct_ib_mem_t *memh);
/* Registered range (may be larger than the request: cache alignment). */
void uct_ib_mem_range(const uct_ib_mem_t *memh, void **address_p,
                      size_t *length_p);
/* Method that produced this handle. */
uct_ib_reg_method_t uct_ib_mem_method(const uct_ib_mem_t *memh);

/* Pack the remote key of memh into buf (UCT_IB_RKEY_PACKED_SIZE bytes). */
ucs_status_t uct_ib_md_rkey_pack(uct_ib_md_t *md, const uct_ib_mem_t *memh,
                                 void *buf);
/* Unpack a buffer written by uct_ib_md_rkey_pack (possibly in another
 * process).  UCS_ERR_INVALID_PARAM if it is not a packed key. */
ucs_status_t uct_ib_rkey_unpack(const void *buf, uct_rkey_t *rkey_p);

/* Name of a method ("rcache", "odp", "direct"). */
const char *uct_ib_reg_method_name(uct_ib_reg_method_t method);

/* ------------------------------------------------------------ RC transport */

/* Active message handler: data = header bytes followed by the payload,
 * valid only during the call; return UCS_OK (the buffer is reposted). */
typedef ucs_status_t (*uct_am_callback_t)(void *arg, void *data, size_t length,
                                          unsigned flags);

#define UCT_AM_ID_MAX 32 /* AM ids are 0 .. UCT_AM_ID_MAX-1 */

/* 0 in a field -> UCX_RC_* environment value or its default. */
typedef struct uct_rc_iface_params {
    unsigned tx_queue_len; /* operations in flight per endpoint (256) */
    unsigned tx_cq_len;    /* operations in flight per iface (4096) */
    unsigned rx_queue_len; /* posted AM receive buffers (256) */
    size_t seg_size;       /* largest AM: header + payload (8256) */
} uct_rc_iface_params_t;

typedef struct uct_rc_iface_attr {
    unsigned tx_queue_len;
    unsigned tx_cq_len;
    unsigned rx_queue_len;
    size_t seg_size;
    size_t max_iov;       /* iov entries per put/get (and am_zcopy) */
    size_t max_am_header; /* am_zcopy header bytes, and am_short total */
    size_t max_zcopy;     /* bytes of one put/get (port max_msg_sz) */
    size_t ep_addr_len;   /* UCT_RC_EP_ADDR_SIZE */
} uct_rc_iface_attr_t;

#define UCT_RC_EP_ADDR_SIZE 32 /* bytes of an endpoint address blob */

/* Open an interface on md (params may be NULL).  Errors: as above, plus
 * UCS_ERR_NO_MEMORY and UCS_ERR_IO_ERROR (CQ/SRQ creation). */
ucs_status_t uct_rc_iface_open(uct_ib_md_t *md,
                               const uct_rc_iface_params_t *params,
                               uct_rc_iface_t **iface_p);

/* Destroy: endpoints must be destroyed before. */
void uct_rc_iface_close(uct_rc_iface_t *iface);

ucs_status_t uct_rc_iface_query(const uct_rc_iface_t *iface,
                                uct_rc_iface_attr_t *attr);

/* Set (or, with cb NULL, remove) the handler of AM id. */
ucs_status_t uct_rc_iface_set_am_handler(uct_rc_iface_t *iface, uint8_t id,
                                         uct_am_callback_t cb, void *arg);

/* Poll completions: run completion callbacks and AM handlers, repost
 * receive buffers.  Returns the number of completions handled. */
unsigned uct_rc_iface_progress(uct_rc_iface_t *iface);

/* Create an endpoint (an RC QP, not connected yet). */
ucs_status_t uct_rc_ep_create(uct_rc_iface_t *iface, uct_rc_ep_t **ep_p);

/* Write the endpoint's address (UCT_RC_EP_ADDR_SIZE bytes) into addr. */
ucs_status_t uct_rc_ep_get_address(const uct_rc_ep_t *ep, void *addr);

/* Connect to the peer endpoint whose address blob is remote_addr (the peer
 * connects to ours the same way).  UCS_ERR_INVALID_PARAM for a malformed
 * blob, UCS_ERR_UNREACHABLE / UCS_ERR_IO_ERROR if the QP cannot be moved to
 * RTS (e.g. unknown GID). */
ucs_status_t uct_rc_ep_connect_to_ep(uct_rc_ep_t *ep, const void *remote_addr);

/* RDMA WRITE of the iov list to remote_addr (rkey from uct_ib_rkey_unpack). */
ucs_status_t uct_rc_ep_put_zcopy(uct_rc_ep_t *ep, const uct_iov_t *iov,
                                 size_t iovcnt, uint64_t remote_addr,
                                 uct_rkey_t rkey, uct_completion_t *comp);

/* RDMA READ from remote_addr into the iov list (memh needs LOCAL_WRITE). */
ucs_status_t uct_rc_ep_get_zcopy(uct_rc_ep_t *ep, const uct_iov_t *iov,
                                 size_t iovcnt, uint64_t remote_addr,
                                 uct_rkey_t rkey, uct_completion_t *comp);

/* SEND of header (copied, <= max_am_header bytes) followed by the iov list
 * (at most max_iov - 1 entries); header + payload <= seg_size. */
ucs_status_t uct_rc_ep_am_zcopy(uct_rc_ep_t *ep, uint8_t id, const void *header,
                                unsigned header_length, const uct_iov_t *iov,
                                size_t iovcnt, uct_completion_t *comp);

/* Small AM copied at once: 8-byte header + payload, total <= max_am_header.
 * Returns UCS_OK (buffer reusable at once), UCS_ERR_NO_RESOURCE or error. */
ucs_status_t uct_rc_ep_am_short(uct_rc_ep_t *ep, uint8_t id, uint64_t header,
                                const void *payload, unsigned length);

/* UCS_OK if every operation posted so far on ep has completed; otherwise
 * UCS_INPROGRESS and comp (if not NULL) completes when they have (with the
 * endpoint's error status if it failed).  An endpoint in error with nothing
 * outstanding returns its error.  When the last operation asked for no
 * completion (no callback, see UCX_RC_TX_CQ_MODERATION) flush posts a
 * zero-length RDMA WRITE that does; UCS_ERR_NO_RESOURCE if the interface has
 * no credit for it now (progress, then call again). */
ucs_status_t uct_rc_ep_flush(uct_rc_ep_t *ep, uct_completion_t *comp);

/* UCS_OK, or the error that put the endpoint in the error state. */
ucs_status_t uct_rc_ep_status(const uct_rc_ep_t *ep);

/* Destroy: outstanding operations complete with UCS_ERR_CANCELED. */
void uct_rc_ep_destroy(uct_rc_ep_t *ep);

END_C_DECLS

#endif
