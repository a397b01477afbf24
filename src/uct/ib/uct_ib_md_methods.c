/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Registration methods of an md, in the order of UCX_IB_REG_METHODS: the
 * first available one is used, with one log line per method skipped.
 *   rcache: ucs_rcache with VM_UNMAPPED events (unavailable when libucm
 *           cannot deliver events, e.g. UCX_MEM_EVENTS=no);
 *   odp:    on-demand paging, if ibv_query_device_ex reports RC ODP for
 *           write, read, send and receive (skipped on soft-RoCE, whose ODP
 *           corrupts data, unless UCX_IB_REG_METHODS names it): explicit
 *           ODP MRs in a ucs_rcache
 *           without memory events (an ODP MR follows the address space by
 *           itself, so a cached one never goes stale; the cache only bounds
 *           how many are kept: UCX_IB_ODP_MAX_REGIONS); where the device
 *           has implicit ODP (UCX_IB_ODP_IMPLICIT), one implicit MR serves
 *           every range instead, the cache only after its failure;
 *   direct: ibv_reg_mr on every registration (always available).
 */
#include "uct_ib_int.h"

#include <ucm/api/ucm.h>
#include <sys/mman.h>
#include <unistd.h>

static ucs_status_t uct_ib_rcache_mem_reg(void *context, ucs_rcache_t *rcache,
                                          void *arg,
                                          ucs_rcache_region_t *rregion,
                                          uint16_t flags)
{
    uct_ib_rcache_region_t *region = (uct_ib_rcache_region_t *)rregion;
    uct_ib_md_t *md                = context;
    void *address                  = (void *)rregion->super.start;
    size_t length                  = rregion->super.end - rregion->super.start;
    unsigned access;
    ucs_status_t status;
    struct ibv_mr *mr;

    access = (rregion->prot & PROT_WRITE) ? UCT_IB_MEM_ACCESS_ALL
                                          : UCT_IB_MEM_ACCESS_REMOTE_READ;
    if (md->attr.reg_method == UCT_IB_REG_METHOD_ODP) {
        status = uct_ib_md_odp_reg_mr(
            md, address, length, uct_ib_mem_access_to_verbs(access),
            flags & UCS_RCACHE_MEM_REG_HIDE_ERRORS, &mr);
    } else {
        status = uct_ib_md_reg_mr(md, address, length,
                                  uct_ib_mem_access_to_verbs(access),
                                  flags & UCS_RCACHE_MEM_REG_HIDE_ERRORS, &mr);
    }
    if (status != UCS_OK) {
        return status;
    }
    uct_ib_memh_init(&region->memh, mr, address, length, md->attr.reg_method,
                     access, 0);
    return UCS_OK;
}

static void uct_ib_rcache_mem_dereg(void *context, ucs_rcache_t *rcache,
                                    ucs_rcache_region_t *rregion)
{
    uct_ib_rcache_region_t *region = (uct_ib_rcache_region_t *)rregion;
    uct_ib_md_t *md                = context;
    int ret;

    ret = ibv_dereg_mr(region->memh.mr);
    if (ret != 0) {
        uct_ib_error("%s: ibv_dereg_mr(%p) failed: %d", md->name,
                     region->memh.address, ret);
    }
}

static void uct_ib_rcache_dump_region(void *context, ucs_rcache_t *rcache,
                                      ucs_rcache_region_t *rregion, char *buf,
                                      size_t max)
{
    uct_ib_rcache_region_t *region = (uct_ib_rcache_region_t *)rregion;

    snprintf(buf, max, "lkey 0x%x rkey 0x%x", region->memh.lkey,
             region->memh.rkey);
}

static const ucs_rcache_ops_t uct_ib_rcache_ops = {
    .mem_reg     = uct_ib_rcache_mem_reg,
    .mem_dereg   = uct_ib_rcache_mem_dereg,
    .dump_region = uct_ib_rcache_dump_region};

/* The cache of method (set in md->attr.reg_method before): rcache hears
 * unmap events; odp's hears none and keeps at most odp_max_regions. */
static ucs_status_t uct_ib_md_rcache_create(uct_ib_md_t *md)
{
    int odp                    = md->attr.reg_method == UCT_IB_REG_METHOD_ODP;
    size_t page_size           = sysconf(_SC_PAGESIZE);
    ucs_rcache_params_t params = {
        .region_struct_size = sizeof(uct_ib_rcache_region_t),
        .alignment          = page_size,
        .max_alignment      = page_size,
        .ucm_events         = odp ? 0 : UCM_EVENT_VM_UNMAPPED,
        .ucm_event_priority = 1000,
        .ops                = &uct_ib_rcache_ops,
        .context            = md,
        .flags              = odp ? UCS_RCACHE_FLAG_NO_PFN_CHECK : 0,
        .max_regions        = odp ? md->config.odp_max_regions : 0,
        .max_size           = 0,
        .max_unreleased     = 0};

    return ucs_rcache_create(&params, md->name, NULL, &md->rcache);
}

ucs_status_t uct_ib_md_methods_setup(uct_ib_md_t *md)
{
    const char *why            = NULL;
    uct_ib_reg_method_t method = UCT_IB_REG_METHOD_DIRECT;
    ucs_status_t status;
    unsigned i;

    uct_ib_md_odp_detect(md);
    md->attr.reg_mt_threads = md->config.reg_mt_threads;
    if (md->attr.reg_mt_threads == 0) {
        long cpus               = sysconf(_SC_NPROCESSORS_ONLN);
        md->attr.reg_mt_threads = (cpus < 1) ? 1 : ucs_min(cpus, 16);
    }

    for (i = 0; i < md->config.num_reg_methods; ++i) {
        method = md->config.reg_methods[i];
        if (why != NULL) {
            uct_ib_warn("%s: registration method '%s' unavailable (%s); "
                        "trying '%s'",
                        md->name,
                        uct_ib_reg_method_name(md->config.reg_methods[i - 1]),
                        why, uct_ib_reg_method_name(method));
        }
        switch (method) {
        case UCT_IB_REG_METHOD_RCACHE:
            if (!ucm_global_opts.enable_events) {
                why = "memory events are disabled (UCX_MEM_EVENTS=no)";
                break;
            }
            md->attr.reg_method = method;
            status              = uct_ib_md_rcache_create(md);
            if (status == UCS_OK) {
                goto found;
            }
            why = (status == UCS_ERR_UNSUPPORTED)
                      ? "memory events are disabled (UCX_MEM_EVENTS=no)"
                      : "memory events cannot be installed";
            break;
        case UCT_IB_REG_METHOD_ODP:
            if (!md->attr.odp_supported) {
                why = md->attr.odp_explicit
                          ? "the device's ODP lacks RC send, recv, write or "
                            "read"
                          : "the device reports no on-demand paging";
                break;
            }
            if (uct_ib_md_odp_known_broken(md) && !md->config.reg_methods_set) {
                why = "soft-RoCE's on-demand paging corrupts data (page "
                      "offsets, read-only pages); name odp in "
                      "UCX_IB_REG_METHODS to use it anyway";
                break;
            }
            md->attr.reg_method = method;
            if (uct_ib_md_rcache_create(md) == UCS_OK) {
                goto found;
            }
            why = "its registration cache cannot be created";
            break;
        case UCT_IB_REG_METHOD_DIRECT: goto found;
        default: why = "unknown"; break;
        }
    }
    uct_ib_error("%s: registration method '%s' unavailable (%s), and it is "
                 "the last one in UCX_IB_REG_METHODS",
                 md->name, uct_ib_reg_method_name(method), why);
    return UCS_ERR_UNSUPPORTED;

found:
    md->attr.reg_method = method;
    uct_ib_md_odp_implicit_init(md);
    return UCS_OK;
}

void uct_ib_md_methods_cleanup(uct_ib_md_t *md)
{
    uct_ib_md_odp_implicit_cleanup(md);
    if (md->rcache != NULL) {
        ucs_rcache_destroy(md->rcache);
        md->rcache = NULL;
    }
}
