/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libucs log lines; see ucs_log.h.
 */
#include <ucs/debug/ucs_log.h>
#include <ucs/config/ucs_config_parse.h>

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *ucs_log_level_names[] = {"fatal", "error", "warn",  "diag",
                                            "info",  "debug", "trace", NULL};

typedef struct {
    int level;
} ucs_log_config_t;

static const ucs_config_field_t ucs_log_config_table[] = {
    {"LOG_LEVEL", "warn", "Logging level of libucs",
     offsetof(ucs_log_config_t, level), UCS_CONFIG_TYPE_ENUM,
     ucs_log_level_names},
    {NULL, NULL, NULL, 0, UCS_CONFIG_TYPE_BOOL, NULL}};

/* -1 until read from the environment */
static volatile int ucs_log_level = -1;

static void ucs_log_config_error(const char *var, const char *value,
                                 const char *accepted, void *arg)
{
    ucs_log_write(UCS_LOG_LEVEL_ERROR, "config",
                  "%s: invalid value '%s' (accepted: %s); keeping the default",
                  var, value, accepted);
}

int ucs_log_is_enabled(ucs_log_level_t level)
{
    ucs_log_config_t config;

    if (ucs_unlikely(ucs_log_level < 0)) {
        ucs_config_set_defaults(ucs_log_config_table, &config);
        ucs_log_level = config.level; /* errors below are printed */
        ucs_config_parse_env("UCX_", ucs_log_config_table, &config,
                             ucs_log_config_error, NULL);
        ucs_log_level = config.level;
    }
    return (int)level <= ucs_log_level;
}

void ucs_log_write(ucs_log_level_t level, const char *component,
                   const char *fmt, ...)
{
    const char *name = ((unsigned)level <= UCS_LOG_LEVEL_TRACE)
                           ? ucs_log_level_names[level]
                           : "trace";
    char line[512];
    size_t len;
    va_list ap;
    int ret;

    ret = snprintf(line, sizeof(line), "[ucs %s] %s: ", component, name);
    len = ((ret > 0) && ((size_t)ret < sizeof(line))) ? (size_t)ret : 0;
    va_start(ap, fmt);
    vsnprintf(line + len, sizeof(line) - len - 1, fmt, ap);
    va_end(ap);
    len         = strlen(line);
    line[len++] = '\n';
    if (write(STDERR_FILENO, line, len) < 0) {
        /* nowhere left to report it */
    }
}
