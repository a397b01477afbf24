/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Table-driven parser for UCX_* environment variables.
 *
 * One table of ucs_config_field_t describes a configuration struct: name
 * (without the "UCX_" prefix), default, help text, offset and type.  The same
 * code parses UCX_MEM_* inside libucm and UCX_RCACHE_* etc. inside libucs, so
 * every variable accepts the same syntax and reports errors the same way.
 *
 * Contract:
 *  - no malloc, no stdio: safe in library constructors and early start-up;
 *  - a field is written only when its value parsed successfully;
 *  - errors are returned as ucs_status_t and described by the error callback
 *    with the variable name, the bad value and the accepted values.
 * Thread safety: reentrant; the environment (ucs_env_get(): nothing in a
 * setuid/setgid process) is the only libc state read.
 */
#ifndef UCS_CONFIG_PARSE_H_
#define UCS_CONFIG_PARSE_H_

#include <ucs/type/status.h>
#include <stddef.h>

BEGIN_C_DECLS

typedef enum {
    UCS_CONFIG_TYPE_BOOL,   /* int: y/n/yes/no/on/off/true/false/1/0 */
    UCS_CONFIG_TYPE_ENUM,   /* int: index into names[] (case-insensitive) */
    UCS_CONFIG_TYPE_BITMAP, /* int: comma list of names[] -> bit per index */
    UCS_CONFIG_TYPE_SIZE,   /* size_t: number with optional b/k/m/g/t suffix,
                               "inf" */
    UCS_CONFIG_TYPE_UINT,   /* unsigned: decimal, or "inf" for UINT_MAX */
    UCS_CONFIG_TYPE_ULONG,  /* unsigned long: decimal, or "inf" */
    UCS_CONFIG_TYPE_DOUBLE  /* double: decimal fraction, e.g. 0.5 */
} ucs_config_type_t;

typedef struct ucs_config_field {
    const char *name; /* e.g. "MEM_EVENTS" (prefix added by caller) */
    const char *dfl;  /* default value, in the same syntax */
    const char *doc;  /* one-line help */
    size_t offset;    /* offset of the field in the options struct */
    ucs_config_type_t type;
    const char *const *names; /* ENUM/BITMAP: NULL-terminated value names */
} ucs_config_field_t;

/* Called once per malformed variable: full variable name, the bad value and
 * the accepted values as one human-readable string. */
typedef void (*ucs_config_error_cb_t)(const char *var, const char *value,
                                      const char *accepted, void *arg);

/* Parse one value into opts (written only on success).
 * UCS_ERR_INVALID_PARAM if malformed or out of range. */
ucs_status_t ucs_config_parse_value(const ucs_config_field_t *field,
                                    const char *value, void *opts);

/* Format the field's current value into buf (always NUL-terminated).
 * UCS_ERR_BUFFER_TOO_SMALL if it was truncated. */
ucs_status_t ucs_config_format_value(const ucs_config_field_t *field,
                                     const void *opts, char *buf, size_t max);

/* Describe the accepted values of a field into buf (NUL-terminated). */
void ucs_config_format_accepted(const ucs_config_field_t *field, char *buf,
                                size_t max);

/* Apply every default of the NULL-name-terminated table to opts.
 * UCS_ERR_INVALID_PARAM if a default itself does not parse (a bug). */
ucs_status_t ucs_config_set_defaults(const ucs_config_field_t *fields,
                                     void *opts);

/* Read <prefix><name> for every field from the environment and parse it.
 * Malformed values keep the previous value, are reported through err_cb and
 * make the call return UCS_ERR_INVALID_PARAM (after all fields were read). */
ucs_status_t ucs_config_parse_env(const char *prefix,
                                  const ucs_config_field_t *fields, void *opts,
                                  ucs_config_error_cb_t err_cb, void *arg);

END_C_DECLS

#endif
