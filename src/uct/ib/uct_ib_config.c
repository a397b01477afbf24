/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX_NET_DEVICES, UCX_IB_* and UCX_RC_* configuration, parsed with the
 * shared table-driven parser of libucs (one error line per bad value).
 */
#include "uct_ib_int.h"

#include <common/ucs_env.h>
#include <ucs/config/ucs_config_parse.h>
#include <stdlib.h>
#include <string.h>

/* UCX_IB_FORK_INIT and UCX_IB_ODP_IMPLICIT (uct_ib_fork_init_t and
 * uct_ib_odp_implicit_cfg_t: TRY, YES, NO in this order) */
static const char *const uct_ib_try_yes_no_names[] = {"try", "yes", "no", NULL};
static const char *const uct_ib_reg_method_names[] = {"rcache", "odp", "direct",
                                                      NULL};

#define UCT_IB_MD_FIELD(_name, _dfl, _doc, _field, _type, _names)              \
    {                                                                          \
        _name, _dfl, _doc, offsetof(uct_ib_md_config_t, _field), _type, _names \
    }

static const ucs_config_field_t uct_ib_md_config_table[] = {
    UCT_IB_MD_FIELD("IB_FORK_INIT", "try",
                    "Call ibv_fork_init() (try: if possible; skipped when the "
                    "kernel copies pinned pages on fork)",
                    fork_init, UCS_CONFIG_TYPE_ENUM, uct_ib_try_yes_no_names),
    UCT_IB_MD_FIELD("IB_REG_MT_THRESH", "64m",
                    "Registrations from this size on fault their pages in "
                    "with several threads before ibv_reg_mr",
                    reg_mt_thresh, UCS_CONFIG_TYPE_SIZE, NULL),
    UCT_IB_MD_FIELD("IB_REG_MT_THREADS", "0",
                    "Threads of a large registration (0: online CPUs, at "
                    "most 16)",
                    reg_mt_threads, UCS_CONFIG_TYPE_UINT, NULL),
    UCT_IB_MD_FIELD("IB_ODP_MAX_REGIONS", "4096",
                    "ODP registrations kept by the odp method's cache (they "
                    "stay coherent by themselves; this only bounds them)",
                    odp_max_regions, UCS_CONFIG_TYPE_ULONG, NULL),
    UCT_IB_MD_FIELD("IB_ODP_PREFETCH", "y",
                    "Prefetch the pages of a new ODP registration "
                    "(ibv_advise_mr, asynchronous) where the device can",
                    odp_prefetch, UCS_CONFIG_TYPE_BOOL, NULL),
    UCT_IB_MD_FIELD("IB_ODP_IMPLICIT", "no",
                    "The odp method registers one implicit ODP MR over the "
                    "whole address space, remote read and write, and hands "
                    "out its keys for every range: any peer given one key "
                    "reaches all memory (no: never; try: where the device "
                    "reports implicit ODP; yes: attempt it anyway)",
                    odp_implicit, UCS_CONFIG_TYPE_ENUM,
                    uct_ib_try_yes_no_names),
    {NULL, NULL, NULL, 0, UCS_CONFIG_TYPE_BOOL, NULL}};

/* One element of the UCX_IB_REG_METHODS list, parsed as an ENUM. */
static const ucs_config_field_t uct_ib_reg_method_field = {
    "IB_REG_METHODS",
    "rcache,odp,direct",
    "Registration methods, in order of preference",
    0,
    UCS_CONFIG_TYPE_ENUM,
    uct_ib_reg_method_names};

static const ucs_config_field_t uct_ib_gid_index_field = {
    "IB_GID_INDEX",
    "auto",
    "GID index (auto: RoCE v2 with an IPv4 address)",
    0,
    UCS_CONFIG_TYPE_UINT,
    NULL};

#define UCT_RC_FIELD(_name, _dfl, _doc, _field, _type)                         \
    {                                                                          \
        _name, _dfl, _doc, offsetof(uct_rc_config_t, _field), _type, NULL      \
    }

static const ucs_config_field_t uct_rc_config_table[] = {
    UCT_RC_FIELD("RC_TX_QUEUE_LEN", "256", "Operations in flight per endpoint",
                 tx_queue_len, UCS_CONFIG_TYPE_UINT),
    UCT_RC_FIELD("RC_TX_CQ_LEN", "4096", "Operations in flight per interface",
                 tx_cq_len, UCS_CONFIG_TYPE_UINT),
    UCT_RC_FIELD("RC_RX_QUEUE_LEN", "256",
                 "Receive buffers posted for active messages", rx_queue_len,
                 UCS_CONFIG_TYPE_UINT),
    UCT_RC_FIELD("RC_SEG_SIZE", "8256",
                 "Largest active message (header + payload)", seg_size,
                 UCS_CONFIG_TYPE_SIZE),
    UCT_RC_FIELD("RC_TIMEOUT", "17",
                 "QP ack timeout exponent (4.096 us * 2^N; >= 14 under "
                 "emulation)",
                 timeout, UCS_CONFIG_TYPE_UINT),
    UCT_RC_FIELD("RC_RETRY_COUNT", "7", "QP transport retries (0-7)",
                 retry_count, UCS_CONFIG_TYPE_UINT),
    UCT_RC_FIELD("RC_RNR_RETRY_COUNT", "7",
                 "QP receiver-not-ready retries (0-7, 7: infinite)", rnr_retry,
                 UCS_CONFIG_TYPE_UINT),
    UCT_RC_FIELD("RC_TX_MAX_INLINE", "128",
                 "Puts and active messages up to this size are copied into "
                 "the work request (IBV_SEND_INLINE; 0: never)",
                 max_inline, UCS_CONFIG_TYPE_UINT),
    UCT_RC_FIELD("RC_TX_CQ_MODERATION", "64",
                 "Operations without a completion callback ask for a "
                 "completion only every N (1: every one)",
                 moderation, UCS_CONFIG_TYPE_UINT),
    {NULL, NULL, NULL, 0, UCS_CONFIG_TYPE_BOOL, NULL}};

static void uct_ib_config_error(const char *var, const char *value,
                                const char *accepted, void *arg)
{
    uct_ib_error("%s: invalid value '%s' (accepted: %s)", var, value, accepted);
}

/* "rcache,odp,direct": each name once, at least one. */
static ucs_status_t uct_ib_reg_methods_parse(const char *value,
                                             uct_ib_md_config_t *config)
{
    char token[32], accepted[128];
    const char *p = value, *end;
    unsigned seen = 0, count = 0;
    int method;
    size_t len;

    for (;;) {
        end = strchr(p, ',');
        len = (end == NULL) ? strlen(p) : (size_t)(end - p);
        if ((len == 0) || (len >= sizeof(token))) {
            goto err;
        }
        memcpy(token, p, len);
        token[len] = '\0';
        if ((ucs_config_parse_value(&uct_ib_reg_method_field, token, &method) !=
             UCS_OK) ||
            (seen & UCS_BIT(method))) {
            goto err;
        }
        seen |= UCS_BIT(method);
        config->reg_methods[count++] = (uct_ib_reg_method_t)method;
        if (end == NULL) {
            break;
        }
        p = end + 1;
    }
    config->num_reg_methods = count;
    return UCS_OK;

err:
    ucs_config_format_accepted(&uct_ib_reg_method_field, accepted,
                               sizeof(accepted));
    uct_ib_error("UCX_IB_REG_METHODS: invalid value '%s' (accepted: a comma "
                 "separated list of %s, each at most once)",
                 value, accepted);
    return UCS_ERR_INVALID_PARAM;
}

static ucs_status_t uct_ib_gid_index_parse(const char *value, int *index_p)
{
    unsigned index;

    if (strcasecmp(value, "auto") == 0) {
        *index_p = UCT_IB_GID_INDEX_AUTO;
        return UCS_OK;
    }
    if ((ucs_config_parse_value(&uct_ib_gid_index_field, value, &index) !=
         UCS_OK) ||
        (index > 255)) {
        uct_ib_error("UCX_IB_GID_INDEX: invalid value '%s' (accepted: auto, "
                     "or a GID table index 0-255)",
                     value);
        return UCS_ERR_INVALID_PARAM;
    }
    *index_p = (int)index;
    return UCS_OK;
}

ucs_status_t uct_ib_md_config_read(uct_ib_md_config_t *config)
{
    uct_ib_md_config_t tmp;
    ucs_status_t status, ret = UCS_OK;
    const char *value;

    memset(&tmp, 0, sizeof(tmp));
    status = ucs_config_set_defaults(uct_ib_md_config_table, &tmp);
    if (status != UCS_OK) {
        return status;
    }
    ret = ucs_config_parse_env("UCX_", uct_ib_md_config_table, &tmp,
                               uct_ib_config_error, NULL);

    value  = ucs_env_get("UCX_IB_REG_METHODS");
    status = uct_ib_reg_methods_parse(
        (value != NULL) ? value : uct_ib_reg_method_field.dfl, &tmp);
    if (status != UCS_OK) {
        ret = status;
    }
    tmp.reg_methods_set = (value != NULL);

    value         = ucs_env_get("UCX_IB_GID_INDEX");
    tmp.gid_index = UCT_IB_GID_INDEX_AUTO;
    if ((value != NULL) &&
        (uct_ib_gid_index_parse(value, &tmp.gid_index) != UCS_OK)) {
        ret = UCS_ERR_INVALID_PARAM;
    }

    value = ucs_env_get("UCX_NET_DEVICES");
    if ((value != NULL) && (strcmp(value, "all") != 0)) {
        if (strlen(value) >= sizeof(tmp.net_devices)) {
            uct_ib_error("UCX_NET_DEVICES: value of %zu characters is too "
                         "long (at most %zu)",
                         strlen(value), sizeof(tmp.net_devices) - 1);
            ret = UCS_ERR_INVALID_PARAM;
        } else {
            strcpy(tmp.net_devices, value);
        }
    }

    if (ret == UCS_OK) {
        *config = tmp;
    }
    return ret;
}

ucs_status_t uct_rc_config_read(uct_rc_config_t *config)
{
    uct_rc_config_t tmp;
    ucs_status_t status, ret;

    status = ucs_config_set_defaults(uct_rc_config_table, &tmp);
    if (status != UCS_OK) {
        return status;
    }
    ret = ucs_config_parse_env("UCX_", uct_rc_config_table, &tmp,
                               uct_ib_config_error, NULL);
    if (ret != UCS_OK) {
        return ret;
    }
    if ((tmp.timeout < 1) || (tmp.timeout > 31)) {
        uct_ib_error("UCX_RC_TIMEOUT: invalid value '%u' (accepted: 1-31; "
                     ">= 14 on emulated devices)",
                     tmp.timeout);
        ret = UCS_ERR_INVALID_PARAM;
    }
    if (tmp.moderation < 1) {
        uct_ib_error("UCX_RC_TX_CQ_MODERATION: invalid value '%u' (accepted: "
                     ">= 1)",
                     tmp.moderation);
        ret = UCS_ERR_INVALID_PARAM;
    }
    if (tmp.retry_count > 7) {
        uct_ib_error("UCX_RC_RETRY_COUNT: invalid value '%u' (accepted: 0-7)",
                     tmp.retry_count);
        ret = UCS_ERR_INVALID_PARAM;
    }
    if (tmp.rnr_retry > 7) {
        uct_ib_error("UCX_RC_RNR_RETRY_COUNT: invalid value '%u' (accepted: "
                     "0-7)",
                     tmp.rnr_retry);
        ret = UCS_ERR_INVALID_PARAM;
    }
    if (ret == UCS_OK) {
        *config = tmp;
    }
    return ret;
}
