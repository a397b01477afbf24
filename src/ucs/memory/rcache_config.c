/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX_RCACHE_* configuration: names, defaults and parsing with the shared
 * table-driven parser.
 */
#include "rcache_int.h"

#include <common/ucs_env.h>
#include <ucs/config/ucs_config_parse.h>
#include <ucs/memory/rcache_ext.h>
#include <stdlib.h>

#define UCS_RCACHE_CONFIG_FIELD(_name, _dfl, _doc, _field, _type)              \
    {                                                                          \
        _name, _dfl, _doc, offsetof(ucs_rcache_config_t, _field), _type, NULL  \
    }

static const char *const ucs_rcache_dontfork_names[] = {"no", "yes", "auto",
                                                        NULL};

/* The variables stock UCX 1.13 reads too (their values reach a cache it
 * creates through the params), then this library's own. */
static const ucs_config_field_t ucs_rcache_config_table[] = {
    UCS_RCACHE_CONFIG_FIELD("RCACHE_MAX_REGIONS", "inf",
                            "Most regions kept in a registration cache",
                            max_regions, UCS_CONFIG_TYPE_ULONG),
    UCS_RCACHE_CONFIG_FIELD("RCACHE_MAX_SIZE", "inf",
                            "Most bytes kept registered by a cache", max_size,
                            UCS_CONFIG_TYPE_SIZE),
    UCS_RCACHE_CONFIG_FIELD("RCACHE_MAX_UNRELEASED", "inf",
                            "Invalidated bytes above which a background "
                            "thread deregisters them (inf: the next cache "
                            "operation does)",
                            max_unreleased, UCS_CONFIG_TYPE_SIZE),
    UCS_RCACHE_CONFIG_FIELD("RCACHE_MEM_PRIO", "1000",
                            "Priority of the cache's memory event handler",
                            mem_prio, UCS_CONFIG_TYPE_UINT),
    UCS_RCACHE_CONFIG_FIELD("RCACHE_PURGE_ON_FORK", "no",
                            "Invalidate every region before fork()",
                            purge_on_fork, UCS_CONFIG_TYPE_BOOL),
    UCS_RCACHE_CONFIG_FIELD("RCACHE_CHECK_PFN", "0",
                            "Pages of a region whose page frames are checked "
                            "on every hit (0: off; debug)",
                            check_pfn, UCS_CONFIG_TYPE_UINT),
    {NULL, NULL, NULL, 0, UCS_CONFIG_TYPE_BOOL, NULL}};

static const ucs_config_field_t ucs_rcache_config_own_table[] = {
    {"RCACHE_DONTFORK", "auto",
     "Mark registered pages MADV_DONTFORK (restored at deregistration): "
     "yes, no, or auto (when the kernel, before 5.9, does not copy pinned "
     "pages at fork)",
     offsetof(ucs_rcache_config_t, dontfork), UCS_CONFIG_TYPE_ENUM,
     ucs_rcache_dontfork_names},
    {NULL, NULL, NULL, 0, UCS_CONFIG_TYPE_BOOL, NULL}};

static void ucs_rcache_config_error(const char *var, const char *value,
                                    const char *accepted, void *arg)
{
    ucs_rcache_error("%s: invalid value '%s' (accepted: %s)", var, value,
                     accepted);
}

static void ucs_rcache_config_quiet(const char *var, const char *value,
                                    const char *accepted, void *arg)
{
}

/* Under stock UCX (the stock-ABI library) UCX reads the first table itself,
 * reports its malformed values and passes the limits, the priority and
 * PURGE_ON_FORK in the params: of those only CHECK_PFN (a global option of
 * UCX's, not in the params) is taken from the environment, quietly. */
ucs_status_t ucs_rcache_config_read(ucs_rcache_config_t *config,
                                    int *explicit_prio, int *explicit_purge)
{
    ucs_rcache_config_t tmp, dfl;
    ucs_status_t status;

    status = ucs_config_set_defaults(ucs_rcache_config_table, &tmp);
    if (status == UCS_OK) {
        status = ucs_config_set_defaults(ucs_rcache_config_own_table, &tmp);
    }
    if (status != UCS_OK) {
        return status;
    }
    dfl    = tmp;
    status = ucs_config_parse_env("UCX_", ucs_rcache_config_table, &tmp,
                                  UCS_RCACHE_STOCK ? ucs_rcache_config_quiet
                                                   : ucs_rcache_config_error,
                                  NULL);
    if (UCS_RCACHE_STOCK) {
        dfl.check_pfn = tmp.check_pfn;
        tmp           = dfl;
    } else if (status != UCS_OK) {
        return status;
    }
    status = ucs_config_parse_env("UCX_", ucs_rcache_config_own_table, &tmp,
                                  ucs_rcache_config_error, NULL);
    if (status != UCS_OK) {
        return status;
    }
    *config = tmp;
    *explicit_prio =
        !UCS_RCACHE_STOCK && (ucs_env_get("UCX_RCACHE_MEM_PRIO") != NULL);
    *explicit_purge =
        !UCS_RCACHE_STOCK && (ucs_env_get("UCX_RCACHE_PURGE_ON_FORK") != NULL);
    return UCS_OK;
}

static void ucs_rcache_config_print_table(FILE *stream,
                                          const ucs_config_field_t *field,
                                          const ucs_rcache_config_t *config)
{
    char value[64];

    for (; field->name != NULL; ++field) {
        ucs_config_format_value(field, config, value, sizeof(value));
        fprintf(stream, "# %s\nUCX_%s=%s\n", field->doc, field->name, value);
    }
}

ucs_status_t ucs_rcache_print_config(FILE *stream)
{
    ucs_rcache_config_t config;
    ucs_status_t status;
    int explicit_prio, explicit_purge;

    status = ucs_rcache_config_read(&config, &explicit_prio, &explicit_purge);
    if (status != UCS_OK) {
        return status;
    }
    ucs_rcache_config_print_table(stream, ucs_rcache_config_table, &config);
    ucs_rcache_config_print_table(stream, ucs_rcache_config_own_table, &config);
    return UCS_OK;
}
