/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Memory domain open/close/query: device selection ("dev:port",
 * UCX_NET_DEVICES, or the first active port), fork support, PD, port and GID,
 * registration method.
 */
#include "uct_ib_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* "dev[:port]" -> name, port (default 1). */
static ucs_status_t uct_ib_dev_spec_parse(const char *spec, size_t len,
                                          char *name, unsigned *port_p)
{
    const char *colon  = memchr(spec, ':', len);
    size_t name_len    = (colon == NULL) ? len : (size_t)(colon - spec);
    unsigned long port = 1;
    char digits[16], *end;
    size_t dlen;

    if ((name_len == 0) || (name_len >= UCT_IB_DEV_NAME_MAX)) {
        goto err;
    }
    if (colon != NULL) {
        dlen = len - name_len - 1;
        if ((dlen == 0) || (dlen >= sizeof(digits))) {
            goto err;
        }
        memcpy(digits, colon + 1, dlen);
        digits[dlen] = '\0';
        errno        = 0;
        port         = strtoul(digits, &end, 10);
        if ((*end != '\0') || (errno != 0) || (port == 0) || (port > 255)) {
            goto err;
        }
    }
    memcpy(name, spec, name_len);
    name[name_len] = '\0';
    *port_p        = port;
    return UCS_OK;

err:
    uct_ib_error("invalid device '%.*s' (expected DEVICE[:PORT], e.g. "
                 "rxe0:1)",
                 (int)len, spec);
    return UCS_ERR_INVALID_PARAM;
}

static ucs_status_t uct_ib_md_open_port(uct_ib_md_t *md, struct ibv_device *dev,
                                        unsigned port, int quiet_port)
{
    ucs_status_t status;
    int ret;

    snprintf(md->name, sizeof(md->name), "%s:%u", ibv_get_device_name(dev),
             port);
    md->ctx = ibv_open_device(dev);
    if (md->ctx == NULL) {
        uct_ib_error("%s: ibv_open_device() failed: %s", md->name,
                     strerror(errno));
        return UCS_ERR_NO_DEVICE;
    }
    ret = ibv_query_device_ex(md->ctx, NULL, &md->dev_attr);
    if (ret != 0) {
        uct_ib_error("%s: ibv_query_device_ex() failed: %s", md->name,
                     strerror(ret));
        status = UCS_ERR_IO_ERROR;
        goto err_close;
    }
    if (quiet_port) {
        struct ibv_port_attr pattr;
        if ((port > md->dev_attr.orig_attr.phys_port_cnt) ||
            (ibv_query_port(md->ctx, port, &pattr) != 0) ||
            (pattr.state != IBV_PORT_ACTIVE)) {
            status = UCS_ERR_NO_DEVICE;
            goto err_close;
        }
    }
    status = uct_ib_md_port_setup(md, port, md->config.gid_index);
    if (status != UCS_OK) {
        goto err_close;
    }
    md->pd = ibv_alloc_pd(md->ctx);
    if (md->pd == NULL) {
        uct_ib_error("%s: ibv_alloc_pd() failed: %s", md->name,
                     strerror(errno));
        status = UCS_ERR_IO_ERROR;
        goto err_close;
    }
    snprintf(md->attr.dev_name, sizeof(md->attr.dev_name), "%s",
             ibv_get_device_name(dev));
    md->attr.max_mr_size = md->dev_attr.orig_attr.max_mr_size;
    return UCS_OK;

err_close:
    ibv_close_device(md->ctx);
    md->ctx = NULL;
    return status;
}

static struct ibv_device *uct_ib_dev_find(struct ibv_device **list, int num,
                                          const char *name)
{
    int i;

    for (i = 0; i < num; ++i) {
        if (strcmp(ibv_get_device_name(list[i]), name) == 0) {
            return list[i];
        }
    }
    return NULL;
}

/* Open the first usable entry of a comma separated list of "dev[:port]". */
static ucs_status_t uct_ib_md_open_list(uct_ib_md_t *md, const char *specs,
                                        const char *origin,
                                        struct ibv_device **list, int num)
{
    char name[UCT_IB_DEV_NAME_MAX];
    ucs_status_t status = UCS_ERR_NO_DEVICE;
    const char *p       = specs, *end;
    struct ibv_device *dev;
    unsigned port;
    size_t len;

    for (;;) {
        end    = strchr(p, ',');
        len    = (end == NULL) ? strlen(p) : (size_t)(end - p);
        status = uct_ib_dev_spec_parse(p, len, name, &port);
        if (status != UCS_OK) {
            return status;
        }
        dev = uct_ib_dev_find(list, num, name);
        if (dev == NULL) {
            uct_ib_error("%s: device '%s' not found (%d verbs device(s) "
                         "present%s)",
                         origin, name, num,
                         (num == 0) ? "; is rdma_rxe or a driver loaded?" : "");
            status = UCS_ERR_NO_DEVICE;
        } else {
            status = uct_ib_md_open_port(md, dev, port, 0);
            if (status == UCS_OK) {
                return UCS_OK;
            }
        }
        if (end == NULL) {
            return status;
        }
        p = end + 1;
    }
}

static ucs_status_t uct_ib_md_open_any(uct_ib_md_t *md,
                                       struct ibv_device **list, int num)
{
    struct ibv_device_attr attr;
    struct ibv_context *ctx;
    unsigned port, nports;
    int i;

    for (i = 0; i < num; ++i) {
        ctx = ibv_open_device(list[i]);
        if (ctx == NULL) {
            continue;
        }
        nports = (ibv_query_device(ctx, &attr) == 0) ? attr.phys_port_cnt : 0;
        ibv_close_device(ctx);
        for (port = 1; port <= nports; ++port) {
            if (uct_ib_md_open_port(md, list[i], port, 1) == UCS_OK) {
                return UCS_OK;
            }
        }
    }
    uct_ib_error("no verbs device with an active port (%d device(s) "
                 "present%s)",
                 num,
                 (num == 0) ? "; is rdma_rxe or an RDMA driver loaded?" : "");
    return UCS_ERR_NO_DEVICE;
}

ucs_status_t uct_ib_md_open(const char *dev_spec, uct_ib_md_t **md_p)
{
    struct ibv_device **list;
    ucs_status_t status;
    uct_ib_md_t *md;
    int num;

    if (md_p == NULL) {
        uct_ib_error("uct_ib_md_open: NULL md_p");
        return UCS_ERR_INVALID_PARAM;
    }
    md = calloc(1, sizeof(*md));
    if (md == NULL) {
        uct_ib_error("uct_ib_md_open: out of memory");
        return UCS_ERR_NO_MEMORY;
    }
    status = uct_ib_md_config_read(&md->config);
    if (status != UCS_OK) {
        goto err_free;
    }
    /* before any other verbs call, or ibv_fork_init() cannot work */
    status = uct_ib_md_fork_init(&md->config, &md->attr.fork_state);
    if (status != UCS_OK) {
        goto err_free;
    }

    list = ibv_get_device_list(&num);
    if (list == NULL) {
        uct_ib_error("ibv_get_device_list() failed: %s (is the ib_uverbs "
                     "module loaded?)",
                     strerror(errno));
        status = UCS_ERR_NO_DEVICE;
        goto err_free;
    }
    if (dev_spec != NULL) {
        status = uct_ib_md_open_list(md, dev_spec, "device", list, num);
    } else if (md->config.net_devices[0] != '\0') {
        status = uct_ib_md_open_list(md, md->config.net_devices,
                                     "UCX_NET_DEVICES", list, num);
    } else {
        status = uct_ib_md_open_any(md, list, num);
    }
    ibv_free_device_list(list);
    if (status != UCS_OK) {
        goto err_free;
    }

    md->attr.reg_mt_thresh    = md->config.reg_mt_thresh;
    md->attr.rkey_packed_size = UCT_IB_RKEY_PACKED_SIZE;
    status                    = uct_ib_md_methods_setup(md);
    if (status != UCS_OK) {
        goto err_close;
    }
    uct_ib_debug("%s: opened, registration method %s", md->name,
                 uct_ib_reg_method_name(md->attr.reg_method));
    *md_p = md;
    return UCS_OK;

err_close:
    ibv_dealloc_pd(md->pd);
    ibv_close_device(md->ctx);
err_free:
    free(md);
    return status;
}

void uct_ib_md_close(uct_ib_md_t *md)
{
    int ret;

    if (md == NULL) {
        return;
    }
    uct_ib_md_methods_cleanup(md);
    ret = ibv_dealloc_pd(md->pd);
    if (ret != 0) {
        uct_ib_error("%s: ibv_dealloc_pd() failed: %s (memory still "
                     "registered, or an interface still open?)",
                     md->name, strerror(ret));
    }
    ibv_close_device(md->ctx);
    free(md);
}

ucs_status_t uct_ib_md_query(const uct_ib_md_t *md, uct_ib_md_attr_t *attr)
{
    int state;

    if ((md == NULL) || (attr == NULL)) {
        uct_ib_error("uct_ib_md_query: NULL %s", (md == NULL) ? "md" : "attr");
        return UCS_ERR_INVALID_PARAM;
    }
    *attr = md->attr;
    state = __atomic_load_n(&md->odp_implicit_state, __ATOMIC_ACQUIRE);
    attr->odp_implicit_used   = (state == UCT_IB_ODP_IMPLICIT_ACTIVE);
    attr->odp_implicit_failed = (state == UCT_IB_ODP_IMPLICIT_FAILED);
    return UCS_OK;
}

const char *uct_ib_reg_method_name(uct_ib_reg_method_t method)
{
    switch (method) {
    case UCT_IB_REG_METHOD_RCACHE: return "rcache";
    case UCT_IB_REG_METHOD_ODP: return "odp";
    case UCT_IB_REG_METHOD_DIRECT: return "direct";
    default: return "unknown";
    }
}
