/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Table-driven UCX_* parser; see ucs_config_parse.h for the contract.
 */
#include <common/ucs_env.h>
#include <ucs/config/ucs_config_parse.h>

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define UCS_CONFIG_VAR_MAX 128

static const char *ucs_config_bool_true[]  = {"y",    "yes", "on",
                                              "true", "1",   NULL};
static const char *ucs_config_bool_false[] = {"n",     "no", "off",
                                              "false", "0",  NULL};

static int ucs_config_name_index(const char *const *names, const char *value,
                                 size_t len)
{
    int i;

    for (i = 0; names[i] != NULL; ++i) {
        if ((strlen(names[i]) == len) && !strncasecmp(names[i], value, len)) {
            return i;
        }
    }
    return -1;
}

/* Append src to buf[*pos..max), keeping buf NUL-terminated; returns 0 if
 * everything fit. */
static int ucs_config_append(char *buf, size_t max, size_t *pos,
                             const char *src)
{
    size_t len = strlen(src);
    size_t room;

    if (*pos + 1 >= max) {
        return -1;
    }
    room = max - *pos - 1;
    if (len > room) {
        memcpy(buf + *pos, src, room);
        *pos += room;
        buf[*pos] = '\0';
        return -1;
    }
    memcpy(buf + *pos, src, len + 1);
    *pos += len;
    return 0;
}

/* Parse an unsigned decimal number with an optional unit suffix. */
static int ucs_config_parse_number(const char *value, int allow_units,
                                   unsigned long long *result)
{
    unsigned long long num = 0, mult = 1;
    const char *p = value;
    int digits    = 0;

    if (!strcasecmp(value, "inf")) {
        *result = ULLONG_MAX;
        return 0;
    }
    while ((*p >= '0') && (*p <= '9')) {
        if (num > (ULLONG_MAX - 9) / 10) {
            return -1;
        }
        num = (num * 10) + (unsigned)(*p - '0');
        ++digits;
        ++p;
    }
    if (digits == 0) {
        return -1;
    }
    if (allow_units && (*p != '\0')) {
        switch (*p) {
        case 'b':
        case 'B': mult = 1; break;
        case 'k':
        case 'K': mult = 1ull << 10; break;
        case 'm':
        case 'M': mult = 1ull << 20; break;
        case 'g':
        case 'G': mult = 1ull << 30; break;
        case 't':
        case 'T': mult = 1ull << 40; break;
        default: return -1;
        }
        ++p;
        if ((mult != 1) && ((*p == 'b') || (*p == 'B'))) {
            ++p; /* "kb", "MB" */
        }
    }
    if (*p != '\0') {
        return -1;
    }
    if ((mult != 1) && (num > ULLONG_MAX / mult)) {
        return -1;
    }
    *result = num * mult;
    return 0;
}

static int ucs_config_parse_bitmap(const ucs_config_field_t *field,
                                   const char *value, int *result)
{
    const char *p = value, *end;
    int bits      = 0;
    int idx;

    if (*value == '\0') {
        *result = 0; /* empty list: no bits */
        return 0;
    }
    for (;;) {
        end = strchr(p, ',');
        if (end == NULL) {
            end = p + strlen(p);
        }
        idx = ucs_config_name_index(field->names, p, (size_t)(end - p));
        if ((idx < 0) || (idx >= (int)(sizeof(int) * 8 - 1))) {
            return -1;
        }
        bits |= 1 << idx;
        if (*end == '\0') {
            break;
        }
        p = end + 1;
    }
    *result = bits;
    return 0;
}

static int ucs_config_parse_double(const char *value, double *result)
{
    char *end;
    double d;

    if (*value == '\0') {
        return -1;
    }
    d = strtod(value, &end);
    if (*end != '\0') {
        return -1;
    }
    *result = d;
    return 0;
}

ucs_status_t ucs_config_parse_value(const ucs_config_field_t *field,
                                    const char *value, void *opts)
{
    char *dst = (char *)opts + field->offset;
    unsigned long long num;
    double d;
    int ival;

    if (value == NULL) {
        return UCS_ERR_INVALID_PARAM;
    }

    switch (field->type) {
    case UCS_CONFIG_TYPE_BOOL:
        if (ucs_config_name_index(ucs_config_bool_true, value, strlen(value)) >=
            0) {
            ival = 1;
        } else if (ucs_config_name_index(ucs_config_bool_false, value,
                                         strlen(value)) >= 0) {
            ival = 0;
        } else {
            return UCS_ERR_INVALID_PARAM;
        }
        memcpy(dst, &ival, sizeof(ival));
        return UCS_OK;
    case UCS_CONFIG_TYPE_ENUM:
        ival = ucs_config_name_index(field->names, value, strlen(value));
        if (ival < 0) {
            return UCS_ERR_INVALID_PARAM;
        }
        memcpy(dst, &ival, sizeof(ival));
        return UCS_OK;
    case UCS_CONFIG_TYPE_BITMAP:
        if (ucs_config_parse_bitmap(field, value, &ival) != 0) {
            return UCS_ERR_INVALID_PARAM;
        }
        memcpy(dst, &ival, sizeof(ival));
        return UCS_OK;
    case UCS_CONFIG_TYPE_SIZE:
        if ((ucs_config_parse_number(value, 1, &num) != 0) ||
            ((num != ULLONG_MAX) && (num > SIZE_MAX))) {
            return UCS_ERR_INVALID_PARAM;
        }
        {
            size_t sval = (num == ULLONG_MAX) ? SIZE_MAX : (size_t)num;
            memcpy(dst, &sval, sizeof(sval));
        }
        return UCS_OK;
    case UCS_CONFIG_TYPE_UINT:
        if ((ucs_config_parse_number(value, 0, &num) != 0) ||
            ((num != ULLONG_MAX) && (num > UINT_MAX))) {
            return UCS_ERR_INVALID_PARAM;
        }
        {
            unsigned uval = (num == ULLONG_MAX) ? UINT_MAX : (unsigned)num;
            memcpy(dst, &uval, sizeof(uval));
        }
        return UCS_OK;
    case UCS_CONFIG_TYPE_ULONG:
        if (ucs_config_parse_number(value, 0, &num) != 0) {
            return UCS_ERR_INVALID_PARAM;
        }
        {
            unsigned long lval =
                (num == ULLONG_MAX) ? ULONG_MAX : (unsigned long)num;
            memcpy(dst, &lval, sizeof(lval));
        }
        return UCS_OK;
    case UCS_CONFIG_TYPE_DOUBLE:
        if (ucs_config_parse_double(value, &d) != 0) {
            return UCS_ERR_INVALID_PARAM;
        }
        memcpy(dst, &d, sizeof(d));
        return UCS_OK;
    }
    return UCS_ERR_INVALID_PARAM;
}

/* Decimal formatting without stdio. */
static void ucs_config_format_ull(unsigned long long v, char *tmp, size_t max)
{
    char rev[24];
    size_t n = 0, i;

    do {
        rev[n++] = (char)('0' + (v % 10));
        v /= 10;
    } while ((v != 0) && (n < sizeof(rev)));
    for (i = 0; (i < n) && (i + 1 < max); ++i) {
        tmp[i] = rev[n - 1 - i];
    }
    tmp[i] = '\0';
}

ucs_status_t ucs_config_format_value(const ucs_config_field_t *field,
                                     const void *opts, char *buf, size_t max)
{
    const char *src = (const char *)opts + field->offset;
    char tmp[32];
    size_t pos = 0;
    int ival, i, first = 1, rc = 0;
    size_t sval;
    unsigned uval;
    unsigned long lval;

    if (max == 0) {
        return UCS_ERR_BUFFER_TOO_SMALL;
    }
    buf[0] = '\0';
    switch (field->type) {
    case UCS_CONFIG_TYPE_BOOL:
        memcpy(&ival, src, sizeof(ival));
        rc = ucs_config_append(buf, max, &pos, ival ? "y" : "n");
        break;
    case UCS_CONFIG_TYPE_ENUM:
        memcpy(&ival, src, sizeof(ival));
        for (i = 0; (field->names[i] != NULL) && (i < ival); ++i) {
        }
        rc = ucs_config_append(buf, max, &pos,
                               (field->names[i] != NULL) ? field->names[i]
                                                         : "<invalid>");
        break;
    case UCS_CONFIG_TYPE_BITMAP:
        memcpy(&ival, src, sizeof(ival));
        for (i = 0; field->names[i] != NULL; ++i) {
            if (ival & (1 << i)) {
                rc |= first ? 0 : ucs_config_append(buf, max, &pos, ",");
                rc |= ucs_config_append(buf, max, &pos, field->names[i]);
                first = 0;
            }
        }
        break;
    case UCS_CONFIG_TYPE_SIZE:
        memcpy(&sval, src, sizeof(sval));
        if (sval == SIZE_MAX) {
            rc = ucs_config_append(buf, max, &pos, "inf");
        } else {
            ucs_config_format_ull(sval, tmp, sizeof(tmp));
            rc = ucs_config_append(buf, max, &pos, tmp);
        }
        break;
    case UCS_CONFIG_TYPE_UINT:
        memcpy(&uval, src, sizeof(uval));
        if (uval == UINT_MAX) {
            rc = ucs_config_append(buf, max, &pos, "inf");
        } else {
            ucs_config_format_ull(uval, tmp, sizeof(tmp));
            rc = ucs_config_append(buf, max, &pos, tmp);
        }
        break;
    case UCS_CONFIG_TYPE_ULONG:
        memcpy(&lval, src, sizeof(lval));
        if (lval == ULONG_MAX) {
            rc = ucs_config_append(buf, max, &pos, "inf");
        } else {
            ucs_config_format_ull(lval, tmp, sizeof(tmp));
            rc = ucs_config_append(buf, max, &pos, tmp);
        }
        break;
    case UCS_CONFIG_TYPE_DOUBLE: {
        double d;
        unsigned long long whole, frac;
        memcpy(&d, src, sizeof(d));
        if (d < 0) {
            rc |= ucs_config_append(buf, max, &pos, "-");
            d = -d;
        }
        whole = (unsigned long long)d;
        frac  = (unsigned long long)((d - (double)whole) * 1000.0 + 0.5);
        if (frac >= 1000) {
            ++whole;
            frac -= 1000;
        }
        ucs_config_format_ull(whole, tmp, sizeof(tmp));
        rc |= ucs_config_append(buf, max, &pos, tmp);
        rc |= ucs_config_append(buf, max, &pos, ".");
        tmp[0] = (char)('0' + frac / 100);
        tmp[1] = (char)('0' + (frac / 10) % 10);
        tmp[2] = (char)('0' + frac % 10);
        tmp[3] = '\0';
        rc |= ucs_config_append(buf, max, &pos, tmp);
        break;
    }
    }
    return rc ? UCS_ERR_BUFFER_TOO_SMALL : UCS_OK;
}

void ucs_config_format_accepted(const ucs_config_field_t *field, char *buf,
                                size_t max)
{
    size_t pos = 0;
    int i;

    if (max == 0) {
        return;
    }
    buf[0] = '\0';
    switch (field->type) {
    case UCS_CONFIG_TYPE_BOOL:
        ucs_config_append(buf, max, &pos, "y|n|yes|no|on|off|true|false|1|0");
        break;
    case UCS_CONFIG_TYPE_ENUM:
    case UCS_CONFIG_TYPE_BITMAP:
        if (field->type == UCS_CONFIG_TYPE_BITMAP) {
            ucs_config_append(buf, max, &pos, "comma-separated list of ");
        }
        for (i = 0; field->names[i] != NULL; ++i) {
            if (i > 0) {
                ucs_config_append(buf, max, &pos, "|");
            }
            ucs_config_append(buf, max, &pos, field->names[i]);
        }
        break;
    case UCS_CONFIG_TYPE_SIZE:
        ucs_config_append(
            buf, max, &pos,
            "a size: number with optional b|k|m|g|t suffix, or inf");
        break;
    case UCS_CONFIG_TYPE_UINT:
    case UCS_CONFIG_TYPE_ULONG:
        ucs_config_append(buf, max, &pos,
                          "a non-negative decimal number, or inf");
        break;
    case UCS_CONFIG_TYPE_DOUBLE:
        ucs_config_append(buf, max, &pos, "a decimal number, e.g. 0.5");
        break;
    }
}

ucs_status_t ucs_config_set_defaults(const ucs_config_field_t *fields,
                                     void *opts)
{
    ucs_status_t status = UCS_OK;

    for (; fields->name != NULL; ++fields) {
        if (ucs_config_parse_value(fields, fields->dfl, opts) != UCS_OK) {
            status = UCS_ERR_INVALID_PARAM;
        }
    }
    return status;
}

ucs_status_t ucs_config_parse_env(const char *prefix,
                                  const ucs_config_field_t *fields, void *opts,
                                  ucs_config_error_cb_t err_cb, void *arg)
{
    ucs_status_t status = UCS_OK;
    char var[UCS_CONFIG_VAR_MAX];
    char accepted[256];
    const char *value;
    size_t pos;

    for (; fields->name != NULL; ++fields) {
        pos    = 0;
        var[0] = '\0';
        if ((ucs_config_append(var, sizeof(var), &pos, prefix) != 0) ||
            (ucs_config_append(var, sizeof(var), &pos, fields->name) != 0)) {
            status = UCS_ERR_INVALID_PARAM;
            continue;
        }
        value = ucs_env_get(var);
        if (value == NULL) {
            continue;
        }
        if (ucs_config_parse_value(fields, value, opts) != UCS_OK) {
            status = UCS_ERR_INVALID_PARAM;
            if (err_cb != NULL) {
                ucs_config_format_accepted(fields, accepted, sizeof(accepted));
                err_cb(var, value, accepted, arg);
            }
        }
    }
    return status;
}
