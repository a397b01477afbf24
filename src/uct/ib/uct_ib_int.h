/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal structures of libuct_ib (memory domain, registration handles, RC
 * interface and endpoints).  Not installed.
 */
#ifndef UCT_IB_INT_H_
#define UCT_IB_INT_H_

#include <uct/ib/uct_ib.h>
#include <ucs/datastruct/list.h>
#include <ucs/debug/ucs_log.h>
#include <ucs/memory/rcache.h>
#include <infiniband/verbs.h>
#include <pthread.h>

#define uct_ib_error(_fmt, ...) ucs_log_error("ib", _fmt, ##__VA_ARGS__)
#define uct_ib_warn(_fmt, ...)  ucs_log_warn("ib", _fmt, ##__VA_ARGS__)
#define uct_ib_diag(_fmt, ...)                                                 \
    ucs_log(UCS_LOG_LEVEL_DIAG, "ib", _fmt, ##__VA_ARGS__)
#define uct_ib_debug(_fmt, ...) ucs_log_debug("ib", _fmt, ##__VA_ARGS__)

/* UCX_IB_FORK_INIT values (index into the names of the config table). */
typedef enum {
    UCT_IB_FORK_INIT_TRY,
    UCT_IB_FORK_INIT_YES,
    UCT_IB_FORK_INIT_NO
} uct_ib_fork_init_t;

/* UCX_IB_ODP_IMPLICIT values (index into the names of the config table). */
typedef enum {
    UCT_IB_ODP_IMPLICIT_CFG_TRY, /* where the device reports it */
    UCT_IB_ODP_IMPLICIT_CFG_YES, /* attempt it even if not reported */
    UCT_IB_ODP_IMPLICIT_CFG_NO   /* never (the default: it opens all memory) */
} uct_ib_odp_implicit_cfg_t;

/* Where the md stands with its implicit ODP MR (md->odp_implicit_state). */
typedef enum {
    UCT_IB_ODP_IMPLICIT_OFF,     /* not wanted: explicit MRs only */
    UCT_IB_ODP_IMPLICIT_UNTRIED, /* wanted: registered at first use */
    UCT_IB_ODP_IMPLICIT_ACTIVE,  /* md->odp_implicit_mr serves every range */
    UCT_IB_ODP_IMPLICIT_FAILED   /* the attempt failed: explicit MRs */
} uct_ib_odp_implicit_state_t;

#define UCT_IB_NET_DEVICES_MAX 256
#define UCT_IB_GID_INDEX_AUTO  (-1)

typedef struct uct_ib_md_config {
    uct_ib_reg_method_t reg_methods[UCT_IB_REG_METHOD_LAST];
    unsigned num_reg_methods;
    int reg_methods_set; /* UCX_IB_REG_METHODS was given (not the default) */
    int fork_init;       /* uct_ib_fork_init_t */
    size_t reg_mt_thresh;
    unsigned reg_mt_threads;                  /* 0: online CPUs (<= 16) */
    int gid_index;                            /* UCT_IB_GID_INDEX_AUTO or N */
    char net_devices[UCT_IB_NET_DEVICES_MAX]; /* "" if unset */
    unsigned long odp_max_regions;            /* ODP MRs the cache keeps */
    int odp_prefetch;                         /* ibv_advise_mr at reg */
    int odp_implicit;                         /* uct_ib_odp_implicit_cfg_t */
} uct_ib_md_config_t;

typedef struct uct_rc_config {
    unsigned tx_queue_len;
    unsigned tx_cq_len;
    unsigned rx_queue_len;
    size_t seg_size;
    unsigned timeout; /* IB exponent: 4.096 us * 2^timeout */
    unsigned retry_count;
    unsigned rnr_retry;
    unsigned max_inline; /* bytes a WR may carry in its WQE (0: none) */
    unsigned moderation; /* a WR without callback is signaled every N */
} uct_rc_config_t;

/* Read UCX_NET_DEVICES and UCX_IB_*; one error line per malformed value. */
ucs_status_t uct_ib_md_config_read(uct_ib_md_config_t *config);
/* Read UCX_RC_*; one error line per malformed or out-of-range value. */
ucs_status_t uct_rc_config_read(uct_rc_config_t *config);

struct uct_ib_mem {
    struct ibv_mr *mr;
    void *address;
    size_t length;
    uint32_t lkey;
    uint32_t rkey;
    uct_ib_reg_method_t method;
    unsigned access; /* UCT_IB_MEM_ACCESS_* granted */
    int implicit;    /* mr is the md's implicit ODP MR: free only the memh */
};

/* Fill memh for mr over [address, address + length): the keys are mr's;
 * 'implicit': mr is the md's implicit ODP MR, which the memh does not own. */
static inline void uct_ib_memh_init(uct_ib_mem_t *memh, struct ibv_mr *mr,
                                    void *address, size_t length,
                                    uct_ib_reg_method_t method, unsigned access,
                                    int implicit)
{
    memh->mr       = mr;
    memh->address  = address;
    memh->length   = length;
    memh->lkey     = mr->lkey;
    memh->rkey     = mr->rkey;
    memh->method   = method;
    memh->access   = access;
    memh->implicit = implicit;
}

/* A cached registration: the memh lives in the region. */
typedef struct uct_ib_rcache_region {
    ucs_rcache_region_t super;
    uct_ib_mem_t memh;
} uct_ib_rcache_region_t;

struct uct_ib_md {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_device_attr_ex dev_attr;
    struct ibv_port_attr port_attr;
    uct_ib_md_attr_t attr;
    uct_ib_md_config_t config;
    ucs_rcache_t *rcache; /* with the rcache or odp method */
    int odp_prefetch;     /* 1 on, 0 off (atomic) */
    /* implicit ODP MR of the odp method: state (uct_ib_odp_implicit_state_t,
     * atomic; leaves UNTRIED once, under the lock) and the MR if ACTIVE */
    int odp_implicit_state;
    pthread_mutex_t odp_implicit_lock;
    struct ibv_mr *odp_implicit_mr;
    char name[UCT_IB_DEV_NAME_MAX + 8]; /* "dev:port" */
};

/* md_open pieces (uct_ib_md_open.c, uct_ib_md_port.c, uct_ib_md_fork.c) */
ucs_status_t uct_ib_md_fork_init(const uct_ib_md_config_t *config,
                                 uct_ib_fork_state_t *state_p);
ucs_status_t uct_ib_md_port_setup(uct_ib_md_t *md, unsigned port,
                                  int gid_index);
ucs_status_t uct_ib_md_methods_setup(uct_ib_md_t *md);
void uct_ib_md_methods_cleanup(uct_ib_md_t *md);

/* Verbs access flags of UCT_IB_MEM_ACCESS_* (and the matching PROT_*). */
int uct_ib_mem_access_to_verbs(unsigned access);
int uct_ib_mem_access_to_prot(unsigned access);

/* ibv_reg_mr with the multi-threaded prefault above the threshold, and the
 * diagnosis of a failure (RLIMIT_MEMLOCK, mapping protection). */
ucs_status_t uct_ib_md_reg_mr(uct_ib_md_t *md, void *address, size_t length,
                              int verbs_access, int silent,
                              struct ibv_mr **mr_p);
/* Fault in [address, address+length) with nthreads threads
 * (MADV_POPULATE_WRITE if write, else _READ).  UCS_ERR_UNSUPPORTED if the
 * kernel lacks MADV_POPULATE_*; other failures are left to ibv_reg_mr. */
ucs_status_t uct_ib_md_prefault_mt(void *address, size_t length, int write,
                                   unsigned nthreads);

/* ODP (uct_ib_md_odp.c).  detect: fill md->attr's odp fields from
 * md->dev_attr.odp_caps, one diag line.  reg_mr: an IBV_ACCESS_ON_DEMAND
 * MR of the range (errors diagnosed like uct_ib_md_reg_mr, quietly when
 * silent), then an asynchronous prefetch (ibv_advise_mr) when enabled; the
 * first prefetch the device refuses turns prefetching off for the md, with
 * one diag line saying why.  Thread-safe; not for hook context. */
void uct_ib_md_odp_detect(uct_ib_md_t *md);
/* Nonzero if the device's ODP is known to corrupt data (soft-RoCE): the
 * default method list then skips odp; a list the user gave keeps it. */
int uct_ib_md_odp_known_broken(const uct_ib_md_t *md);

/* Vendor id of soft-RoCE (rdma_rxe) devices, whatever their name. */
#define UCT_IB_SOFT_ROCE_VENDOR_ID 0xffffff

static inline int uct_ib_md_is_soft_roce(const uct_ib_md_t *md)
{
    return md->dev_attr.orig_attr.vendor_id == UCT_IB_SOFT_ROCE_VENDOR_ID;
}
ucs_status_t uct_ib_md_odp_reg_mr(uct_ib_md_t *md, void *address, size_t length,
                                  int verbs_access, int silent,
                                  struct ibv_mr **mr_p);
/* Asynchronous prefetch of [address, address+length) through mr (explicit
 * or implicit ODP MR) if prefetching is on (see uct_ib_md_odp_reg_mr). */
void uct_ib_md_odp_prefetch(uct_ib_md_t *md, struct ibv_mr *mr, void *address,
                            size_t length, int write);

/* Implicit ODP (uct_ib_md_odp_implicit.c).
 * init: set md->odp_implicit_state from UCX_IB_ODP_IMPLICIT and the caps
 * (after uct_ib_md_odp_detect; OFF unless the method is odp).
 * reg: a memh of [address, address+length) carrying the keys of the md's
 * implicit ODP MR, which the first call registers (ibv_reg_mr of the whole
 * address space, under md->odp_implicit_lock); then the range is
 * prefetched as uct_ib_md_odp_reg_mr does.  UCS_ERR_UNSUPPORTED when the md
 * has no implicit MR (not wanted, or its registration failed: that failure
 * is logged once per md, one line with the errno): the caller registers an
 * explicit MR instead.  UCS_ERR_NO_MEMORY without a memh.  No protection
 * check of the range: the NIC's page fault refuses access the mapping does
 * not allow, failing the transfer.
 * cleanup: deregister the implicit MR (once; every memh of it must have
 * been released).  Thread-safe (reg); not for hook context. */
void uct_ib_md_odp_implicit_init(uct_ib_md_t *md);
ucs_status_t uct_ib_md_odp_implicit_reg(uct_ib_md_t *md, void *address,
                                        size_t length, unsigned access,
                                        uct_ib_mem_t **memh_p);
void uct_ib_md_odp_implicit_cleanup(uct_ib_md_t *md);

/* Diagnose why [address, address+length) cannot be registered with
 * verbs_access after errno err: logs one error line, returns the status. */
ucs_status_t uct_ib_md_reg_diagnose(const uct_ib_md_t *md, void *address,
                                    size_t length, int verbs_access, int err);

/* -------------------------------------------------------------- RC */

#define UCT_RC_AM_HDR_MAX  128 /* am_zcopy header and am_short total */
#define UCT_RC_MAX_IOV     16
#define UCT_RC_WR_ID_RX    (1ull << 63)
#define UCT_RC_DESC_ORPHAN ((uct_rc_ep_t *)(uintptr_t)1)

/* One per posted WR, signaled or not (its index is the wr_id); held until
 * the WR is known complete: by its own completion, or by the completion of
 * a later signaled WR of the same QP (an RC send queue completes in order).
 * So descriptors are also the CQ credits: a QP in error flushes every WR
 * with a completion, unsignaled ones included. */
typedef struct uct_rc_tx_desc {
    uct_completion_t *comp; /* NULL for an unsignaled WR */
    uct_rc_ep_t *ep;        /* NULL when free, ORPHAN after ep_destroy */
    uint32_t next;          /* free list, or the ep's list of WRs in flight */
    uint8_t opcode;         /* enum ibv_wr_opcode, for messages */
} uct_rc_tx_desc_t;

typedef struct uct_rc_am_entry {
    uct_am_callback_t cb;
    void *arg;
} uct_rc_am_entry_t;

struct uct_rc_iface {
    uct_ib_md_t *md;
    uct_rc_config_t config;
    struct ibv_cq *cq;
    struct ibv_srq *srq;
    /* tx: descriptors + registered header slots (UCT_RC_AM_HDR_MAX each) */
    uct_rc_tx_desc_t *tx_descs;
    uint8_t *tx_hdrs;
    struct ibv_mr *tx_hdr_mr;
    uint32_t tx_free; /* head of the free list, UINT32_MAX: none */
    unsigned tx_avail;
    /* rx: rx_queue_len buffers of seg_size */
    uint8_t *rx_bufs;
    struct ibv_mr *rx_mr;
    uintptr_t *rx_free; /* buffers not posted */
    unsigned rx_nfree;
    unsigned num_eps;
    size_t max_iov;
    uint32_t max_rd_atomic;
    uct_rc_am_entry_t am[UCT_AM_ID_MAX];
};

typedef struct uct_rc_flush_req {
    ucs_list_link_t list;
    uct_completion_t *comp;
    uint64_t sn; /* complete when tx_done_sn reaches it */
} uct_rc_flush_req_t;

struct uct_rc_ep {
    uct_rc_iface_t *iface;
    struct ibv_qp *qp;
    int connected;
    ucs_status_t status;   /* UCS_OK or the error state */
    unsigned tx_avail;     /* send WRs left on the QP */
    unsigned max_inline;   /* inline bytes the QP accepts */
    uint64_t tx_sig_sn;    /* the last signaled operation */
    uint32_t tx_head;      /* descriptors in flight, oldest first */
    uint32_t tx_tail;      /* (UINT32_MAX: none) */
    uint64_t tx_posted_sn; /* operations posted */
    uint64_t tx_done_sn;   /* operations completed */
    ucs_list_link_t flush_reqs;
};

/* Complete comp with status (UCS_OK or an error). */
static inline void uct_invoke_completion(uct_completion_t *comp,
                                         ucs_status_t status)
{
    if (comp == NULL) {
        return;
    }
    if ((status != UCS_OK) && (comp->status == UCS_OK)) {
        comp->status = status;
    }
    if ((--comp->count == 0) && (comp->func != NULL)) {
        comp->func(comp);
    }
}

/* Post every free receive buffer. */
void uct_rc_iface_post_recvs(uct_rc_iface_t *iface);
/* Post a signaled zero-length RDMA WRITE (flush of unsignaled WRs). */
ucs_status_t uct_rc_ep_post_flush(uct_rc_ep_t *ep);
/* Handle the completion of one send WR (from progress). */
void uct_rc_ep_tx_completed(uct_rc_ep_t *ep, uct_rc_tx_desc_t *desc,
                            const struct ibv_wc *wc);
/* Take a tx descriptor (ep and iface credits are checked by the caller). */
uint32_t uct_rc_iface_desc_get(uct_rc_iface_t *iface);
void uct_rc_iface_desc_put(uct_rc_iface_t *iface, uint32_t index);
/* Verbs completion status -> ucs_status_t, and a name for logs. */
ucs_status_t uct_rc_wc_status(enum ibv_wc_status status);

#endif
