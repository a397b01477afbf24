/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX_MEM_* configuration: the one place where libucm's options are named,
 * defaulted and parsed (with the parser shared with libucs).
 */
#include "ucm_config.h"
#include "ucm_log.h"
#include "ucm_opts.h"

#include <ucm/mmap/ucm_filewatch.h>
#include <ucm/uffd/ucm_uffd.h>

#include <ucs/config/ucs_config_parse.h>
#include <stddef.h>
#include <string.h>

const char *ucm_log_level_names[] = {"FATAL", "ERROR", "WARN",  "DIAG",
                                     "INFO",  "DEBUG", "TRACE", NULL};

const char *ucm_mmap_hook_modes[] = {"none", "reloc", "bistro", NULL};

static const char *ucm_unload_prevent_modes[] = {"lazy", "now", "none", NULL};

#define UCM_CONFIG_FIELD(_name, _dfl, _doc, _field, _type, _names)             \
    {                                                                          \
        _name, _dfl, _doc, offsetof(ucm_opts_t, _field), _type, _names         \
    }

static const ucs_config_field_t ucm_config_table[] = {
    UCM_CONFIG_FIELD("MEM_LOG_LEVEL", "warn",
                     "Logging level of the memory hooks", log_level,
                     UCS_CONFIG_TYPE_ENUM, ucm_log_level_names),
    UCM_CONFIG_FIELD(
        "MEM_ALLOC_ALIGN", "16",
        "Minimal alignment of allocations (kept for UCX compatibility)",
        alloc_alignment, UCS_CONFIG_TYPE_SIZE, NULL),
    UCM_CONFIG_FIELD("MEM_EVENTS", "yes",
                     "Enable memory events; 'no' turns every hook off",
                     enable_events, UCS_CONFIG_TYPE_BOOL, NULL),
    UCM_CONFIG_FIELD(
        "MEM_MMAP_HOOK_MODE", "bistro",
        "How to hook mmap/munmap/...: none, reloc (GOT/PLT slots of "
        "every object) or bistro (entry of the libc functions; also "
        "sees glibc-internal calls)",
        mmap_hook_mode, UCS_CONFIG_TYPE_ENUM, ucm_mmap_hook_modes),
    UCM_CONFIG_FIELD(
        "MEM_MALLOC_HOOKS", "yes",
        "Reloc mode: wrap glibc's malloc family to report the heap "
        "changes glibc makes inside libc (malloc is never replaced; "
        "bistro mode sees them at libc's entries)",
        enable_malloc_hooks, UCS_CONFIG_TYPE_BOOL, NULL),
    UCM_CONFIG_FIELD("MEM_MALLOC_RELOC", "yes",
                     "Reloc mode: the malloc-family wrappers are patched into "
                     "GOT/PLT slots; no leaves them out, as MEM_MALLOC_HOOKS",
                     enable_malloc_reloc, UCS_CONFIG_TYPE_BOOL, NULL),
    UCM_CONFIG_FIELD("MEM_CUDA_HOOK_MODE", "bistro",
                     "Hook modes allowed for CUDA memory-type hooks",
                     cuda_hook_modes, UCS_CONFIG_TYPE_BITMAP,
                     ucm_mmap_hook_modes),
    UCM_CONFIG_FIELD("MEM_DYNAMIC_MMAP_THRESH", "yes",
                     "Accepted for UCX compatibility (malloc is not replaced)",
                     enable_dynamic_mmap_thresh, UCS_CONFIG_TYPE_BOOL, NULL),
    UCM_CONFIG_FIELD("MEM_DLOPEN_PROCESS_RPATH", "yes",
                     "Accepted for UCX compatibility (dlopen is not rewritten)",
                     dlopen_process_rpath, UCS_CONFIG_TYPE_BOOL, NULL),
    UCM_CONFIG_FIELD(
        "MEM_MODULE_UNLOAD_PREVENT_MODE", "lazy",
        "Accepted for UCX compatibility (libucm is never unloaded)",
        module_unload_prevent_mode, UCS_CONFIG_TYPE_ENUM,
        ucm_unload_prevent_modes),
    UCM_CONFIG_FIELD("MEM_BISTRO_FORCE_FAR_JUMP", "no",
                     "Accepted for UCX compatibility (UCX 1.16+: its own "
                     "patcher's jump; ours picks the jump it needs)",
                     bistro_force_far_jump, UCS_CONFIG_TYPE_BOOL, NULL),
    UCM_CONFIG_FIELD("MEM_BISTRO_GRACE_DURATION", "0.05",
                     "Accepted for UCX compatibility (UCX 1.21+: seconds its "
                     "patcher waits; ours patches with one atomic store)",
                     bistro_grace_duration, UCS_CONFIG_TYPE_DOUBLE, NULL),
    {NULL, NULL, NULL, 0, UCS_CONFIG_TYPE_BOOL, NULL}};

static void ucm_config_error(const char *var, const char *value,
                             const char *accepted, void *arg)
{
    ucm_error("%s: invalid value '%s' (accepted: %s); keeping the default", var,
              value, accepted);
}

ucs_status_t ucm_config_init(void)
{
    ucs_status_t status, status_uffd, status_watch;

    status = ucs_config_parse_env("UCX_", ucm_config_table, &ucm_opts,
                                  ucm_config_error, NULL);
    ucm_opts_init(); /* into ucm_global_opts, in the layout in use */
    status_uffd = ucs_config_parse_env("UCX_", ucm_uffd_config_table,
                                       &ucm_uffd_opts, ucm_config_error, NULL);
    status_watch =
        ucs_config_parse_env("UCX_", ucm_filewatch_config_table,
                             &ucm_filewatch_opts, ucm_config_error, NULL);
    if (status != UCS_OK) {
        return status;
    }
    return (status_uffd != UCS_OK) ? status_uffd : status_watch;
}

/* Entry 'index' of libucm's tables (UCX's options, then UCX_MEM_UFFD*,
 * then UCX_MEM_FILE_WATCH*). */
static const ucs_config_field_t *ucm_config_field(unsigned index,
                                                  const void **opts_p)
{
    static const struct {
        const ucs_config_field_t *table;
        const void *opts;
    } tables[] = {{ucm_config_table, &ucm_opts},
                  {ucm_uffd_config_table, &ucm_uffd_opts},
                  {ucm_filewatch_config_table, &ucm_filewatch_opts}};
    unsigned t, i;

    for (t = 0; t < ucs_static_array_size(tables); ++t) {
        for (i = 0; tables[t].table[i].name != NULL; ++i, --index) {
            if (index == 0) {
                *opts_p = tables[t].opts;
                return &tables[t].table[i];
            }
        }
    }
    return NULL;
}

int ucm_config_get(unsigned index, const char **name_p, char *value, size_t max,
                   const char **doc_p)
{
    const ucs_config_field_t *field;
    const void *opts;

    if (index == 0) {
        ucm_opts_sync(); /* what was written to ucm_global_opts since */
    }
    field = ucm_config_field(index, &opts);
    if (field == NULL) {
        return -1;
    }
    ucs_config_format_value(field, opts, value, max);
    *name_p = field->name;
    *doc_p  = field->doc;
    return 0;
}
