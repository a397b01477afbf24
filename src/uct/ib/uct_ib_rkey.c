/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Packed remote keys: 4 bytes rkey + 4 bytes tag, little endian, so that a
 * buffer that is not a packed key is refused instead of used.
 */
#include "uct_ib_int.h"

#include <string.h>

#define UCT_IB_RKEY_TAG 0x52b1u /* upper 16 bits: tag; lower: version 1 */

static void uct_ib_put_le32(uint8_t *p, uint32_t v)
{
    p[0] = v;
    p[1] = v >> 8;
    p[2] = v >> 16;
    p[3] = v >> 24;
}

static uint32_t uct_ib_get_le32(const uint8_t *p)
{
    return p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

ucs_status_t uct_ib_md_rkey_pack(uct_ib_md_t *md, const uct_ib_mem_t *memh,
                                 void *buf)
{
    if ((md == NULL) || (memh == NULL) || (buf == NULL)) {
        uct_ib_error("uct_ib_md_rkey_pack: NULL %s", (md == NULL)     ? "md"
                                                     : (memh == NULL) ? "memh"
                                                                      : "buf");
        return UCS_ERR_INVALID_PARAM;
    }
    if (!(memh->access &
          (UCT_IB_MEM_ACCESS_REMOTE_WRITE | UCT_IB_MEM_ACCESS_REMOTE_READ))) {
        uct_ib_error("%s: memory %p was registered without remote access: "
                     "its rkey would be refused by the peer",
                     md->name, memh->address);
        return UCS_ERR_INVALID_PARAM;
    }
    uct_ib_put_le32(buf, memh->rkey);
    uct_ib_put_le32((uint8_t *)buf + 4, (UCT_IB_RKEY_TAG << 16) | 1);
    return UCS_OK;
}

ucs_status_t uct_ib_rkey_unpack(const void *buf, uct_rkey_t *rkey_p)
{
    uint32_t tag;

    if ((buf == NULL) || (rkey_p == NULL)) {
        uct_ib_error("uct_ib_rkey_unpack: NULL %s",
                     (buf == NULL) ? "buf" : "rkey_p");
        return UCS_ERR_INVALID_PARAM;
    }
    tag = uct_ib_get_le32((const uint8_t *)buf + 4);
    if (tag != ((UCT_IB_RKEY_TAG << 16) | 1)) {
        uct_ib_error("uct_ib_rkey_unpack: not a packed uct_ib rkey (tag "
                     "0x%08x)",
                     tag);
        return UCS_ERR_INVALID_PARAM;
    }
    *rkey_p = uct_ib_get_le32(buf);
    return UCS_OK;
}
