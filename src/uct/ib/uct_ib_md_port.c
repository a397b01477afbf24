/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Port of an md: state check, link layer, MTU, and the GID used for
 * addressing (RoCE: the RoCE v2 entry holding an IPv4-mapped address, found
 * by reading the GID table; UCX_IB_GID_INDEX overrides).
 */
#include "uct_ib_int.h"

#include <errno.h>
#include <string.h>

static int uct_ib_gid_is_ipv4(const union ibv_gid *gid)
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0,    0,
                                       0, 0, 0, 0, 0xff, 0xff};

    return memcmp(gid->raw, prefix, sizeof(prefix)) == 0;
}

static int uct_ib_gid_is_zero(const union ibv_gid *gid)
{
    static const uint8_t zero[16];

    return memcmp(gid->raw, zero, sizeof(zero)) == 0;
}

/* Score of a GID table entry for RoCE: v2+IPv4 > v2 > v1 > nothing. */
static int uct_ib_gid_score(const struct ibv_gid_entry *entry)
{
    if (uct_ib_gid_is_zero(&entry->gid)) {
        return 0;
    }
    if (entry->gid_type == IBV_GID_TYPE_ROCE_V2) {
        return uct_ib_gid_is_ipv4(&entry->gid) ? 3 : 2;
    }
    return 1;
}

static ucs_status_t uct_ib_md_gid_select(uct_ib_md_t *md, int gid_index)
{
    struct ibv_gid_entry entry, best = {0};
    int score, best_score            = 0;
    int i, ret;

    if (gid_index != UCT_IB_GID_INDEX_AUTO) {
        ret =
            ibv_query_gid_ex(md->ctx, md->attr.port_num, gid_index, &entry, 0);
        if ((ret != 0) || uct_ib_gid_is_zero(&entry.gid)) {
            uct_ib_error("%s: UCX_IB_GID_INDEX=%d: no such GID table entry "
                         "(%s)",
                         md->name, gid_index,
                         (ret != 0) ? strerror(ret) : "empty");
            return UCS_ERR_INVALID_PARAM;
        }
        best = entry;
    } else {
        for (i = 0; i < md->port_attr.gid_tbl_len; ++i) {
            if (ibv_query_gid_ex(md->ctx, md->attr.port_num, i, &entry, 0) !=
                0) {
                continue; /* empty entry (ENODATA) */
            }
            score = uct_ib_gid_score(&entry);
            if (score > best_score) {
                best_score = score;
                best       = entry;
            }
            if (score == 3) {
                break;
            }
        }
        if (best_score == 0) {
            uct_ib_error("%s: no usable GID (is an IP address configured on "
                         "the network interface of this RoCE port?)",
                         md->name);
            return UCS_ERR_NO_DEVICE;
        }
    }
    md->attr.gid_index = best.gid_index;
    memcpy(md->attr.gid, best.gid.raw, sizeof(md->attr.gid));
    uct_ib_debug("%s: using GID index %u (type %u)", md->name,
                 md->attr.gid_index, best.gid_type);
    return UCS_OK;
}

ucs_status_t uct_ib_md_port_setup(uct_ib_md_t *md, unsigned port, int gid_index)
{
    int ret;

    if ((port < 1) || (port > md->dev_attr.orig_attr.phys_port_cnt)) {
        uct_ib_error("%s: no port %u (the device has %u)", md->name, port,
                     md->dev_attr.orig_attr.phys_port_cnt);
        return UCS_ERR_NO_DEVICE;
    }
    ret = ibv_query_port(md->ctx, port, &md->port_attr);
    if (ret != 0) {
        uct_ib_error("%s: ibv_query_port() failed: %s", md->name,
                     strerror(ret));
        return UCS_ERR_IO_ERROR;
    }
    if (md->port_attr.state != IBV_PORT_ACTIVE) {
        uct_ib_error("%s: port is not active (state %s)", md->name,
                     ibv_port_state_str(md->port_attr.state));
        return UCS_ERR_NO_DEVICE;
    }
    md->attr.port_num   = port;
    md->attr.is_roce    = md->port_attr.link_layer == IBV_LINK_LAYER_ETHERNET;
    md->attr.lid        = md->port_attr.lid;
    md->attr.active_mtu = 128u << md->port_attr.active_mtu;
    if (!md->attr.is_roce && (gid_index == UCT_IB_GID_INDEX_AUTO)) {
        gid_index = 0; /* InfiniBand: LID routing, GID 0 for the GRH */
    }
    return uct_ib_md_gid_select(md, gid_index);
}
