/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * uct_ib_md_mem_reg / mem_dereg through the md's method (rcache, odp with
 * its implicit MR or explicit ones, direct), and the accessors of a memory
 * handle.
 */
#include "uct_ib_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

int uct_ib_mem_access_to_verbs(unsigned access)
{
    int flags = 0;

    if (access & UCT_IB_MEM_ACCESS_LOCAL_WRITE) {
        flags |= IBV_ACCESS_LOCAL_WRITE;
    }
    if (access & UCT_IB_MEM_ACCESS_REMOTE_WRITE) {
        /* verbs requires local write along with remote write */
        flags |= IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
    }
    if (access & UCT_IB_MEM_ACCESS_REMOTE_READ) {
        flags |= IBV_ACCESS_REMOTE_READ;
    }
    return flags;
}

int uct_ib_mem_access_to_prot(unsigned access)
{
    return (access &
            (UCT_IB_MEM_ACCESS_LOCAL_WRITE | UCT_IB_MEM_ACCESS_REMOTE_WRITE))
               ? (PROT_READ | PROT_WRITE)
               : PROT_READ;
}

static ucs_status_t uct_ib_md_mem_reg_rcache(uct_ib_md_t *md, void *address,
                                             size_t length, unsigned access,
                                             uct_ib_mem_t **memh_p)
{
    ucs_rcache_region_t *rregion;
    ucs_status_t status;

    status = ucs_rcache_get(md->rcache, address, length,
                            uct_ib_mem_access_to_prot(access), NULL, &rregion);
    if (status == UCS_ERR_INVALID_ADDR) {
        /* say which access the mapping lacks, in the md's terms */
        return uct_ib_md_reg_diagnose(
            md, address, length, uct_ib_mem_access_to_verbs(access), EFAULT);
    } else if (status != UCS_OK) {
        return status;
    }
    *memh_p = &((uct_ib_rcache_region_t *)rregion)->memh;
    return UCS_OK;
}

static ucs_status_t uct_ib_md_mem_reg_mr(uct_ib_md_t *md, void *address,
                                         size_t length, unsigned access,
                                         uct_ib_reg_method_t method,
                                         uct_ib_mem_t **memh_p)
{
    int verbs_access = uct_ib_mem_access_to_verbs(access);
    ucs_status_t status;
    uct_ib_mem_t *memh;
    struct ibv_mr *mr;

    memh = malloc(sizeof(*memh));
    if (memh == NULL) {
        uct_ib_error("%s: no memory for a memory handle", md->name);
        return UCS_ERR_NO_MEMORY;
    }
    status = uct_ib_md_reg_mr(md, address, length, verbs_access, 0, &mr);
    if (status != UCS_OK) {
        goto err_free;
    }
    uct_ib_memh_init(memh, mr, address, length, method, access, 0);
    *memh_p = memh;
    return UCS_OK;

err_free:
    free(memh);
    return status;
}

ucs_status_t uct_ib_md_mem_reg(uct_ib_md_t *md, void *address, size_t length,
                               unsigned access, uct_ib_mem_t **memh_p)
{
    ucs_status_t status;

    if ((md == NULL) || (address == NULL) || (memh_p == NULL)) {
        uct_ib_error("uct_ib_md_mem_reg: NULL %s", (md == NULL) ? "md"
                                                   : (address == NULL)
                                                       ? "address"
                                                       : "memh_p");
        return UCS_ERR_INVALID_PARAM;
    }
    if ((length == 0) || ((uintptr_t)address + length < (uintptr_t)address)) {
        uct_ib_error(
            "%s: cannot register %p length %zu: %s", md->name, address, length,
            (length == 0) ? "zero length"
                          : "the range wraps around the address space");
        return UCS_ERR_INVALID_PARAM;
    }
    if (access & ~(unsigned)UCT_IB_MEM_ACCESS_ALL) {
        uct_ib_error("%s: unknown access flags 0x%x", md->name, access);
        return UCS_ERR_INVALID_PARAM;
    }
    if (length > md->attr.max_mr_size) {
        uct_ib_error("%s: cannot register %zu bytes: the device allows at "
                     "most %" PRIu64,
                     md->name, length, md->attr.max_mr_size);
        return UCS_ERR_EXCEEDS_LIMIT;
    }

    if (md->attr.reg_method == UCT_IB_REG_METHOD_ODP) {
        status =
            uct_ib_md_odp_implicit_reg(md, address, length, access, memh_p);
        if (status != UCS_ERR_UNSUPPORTED) {
            return status;
        }
        /* no implicit MR: explicit ones, through the odp cache */
    }
    if (md->rcache != NULL) { /* the rcache and odp methods */
        return uct_ib_md_mem_reg_rcache(md, address, length, access, memh_p);
    }
    return uct_ib_md_mem_reg_mr(md, address, length, access,
                                md->attr.reg_method, memh_p);
}

ucs_status_t uct_ib_md_mem_dereg(uct_ib_md_t *md, uct_ib_mem_t *memh)
{
    uct_ib_rcache_region_t *region;
    int ret;

    if ((md == NULL) || (memh == NULL)) {
        uct_ib_error("uct_ib_md_mem_dereg: NULL %s",
                     (md == NULL) ? "md" : "memh");
        return UCS_ERR_INVALID_PARAM;
    }
    if (memh->implicit) { /* the md keeps its implicit MR until close */
        free(memh);
        return UCS_OK;
    }
    if (memh->method != UCT_IB_REG_METHOD_DIRECT) { /* a cache region */
        region = ucs_container_of(memh, uct_ib_rcache_region_t, memh);
        ucs_rcache_region_put(md->rcache, &region->super);
        return UCS_OK;
    }
    ret = ibv_dereg_mr(memh->mr);
    if (ret != 0) {
        uct_ib_error("%s: ibv_dereg_mr(%p, %zu) failed: %s", md->name,
                     memh->address, memh->length, strerror(ret));
        return UCS_ERR_IO_ERROR;
    }
    free(memh);
    return UCS_OK;
}

uint32_t uct_ib_mem_lkey(const uct_ib_mem_t *memh)
{
    return memh->lkey;
}

uint32_t uct_ib_mem_rkey(const uct_ib_mem_t *memh)
{
    return memh->rkey;
}

void uct_ib_mem_range(const uct_ib_mem_t *memh, void **address_p,
                      size_t *length_p)
{
    *address_p = memh->address;
    *length_p  = memh->length;
}

uct_ib_reg_method_t uct_ib_mem_method(const uct_ib_mem_t *memh)
{
    return memh->method;
}
