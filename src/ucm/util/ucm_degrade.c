/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The record of degraded mechanisms; see ucm_degrade.h.
 */
#include "ucm_degrade.h"
#include "ucm_log.h"

#include <ucm/api/ucm_ext.h>

#include <errno.h>
#include <stdarg.h>

#define UCM_DEGRADE_FREE  0
#define UCM_DEGRADE_BUSY  1
#define UCM_DEGRADE_READY 2

typedef struct {
    int state; /* UCM_DEGRADE_FREE, _BUSY (being written), _READY */
    int err;
    char what[UCM_DEGRADE_WHAT_MAX];
} ucm_degrade_slot_t;

static ucm_degrade_slot_t ucm_degrade_slots[UCM_DEGRADE_LAST];

static const char *ucm_degrade_names[UCM_DEGRADE_LAST] = {
    [UCM_DEGRADE_PROCMAPS] = "procmaps",
    [UCM_DEGRADE_FDS]      = "descriptors",
    [UCM_DEGRADE_TRUNC]    = "truncation",
    [UCM_DEGRADE_UFFD]     = "userfaultfd",
    [UCM_DEGRADE_HEAP]     = "heap"};

const char *ucm_degrade_errname(int err)
{
    switch (err) {
    case 0: return "no error";
    case EACCES: return "EACCES";
    case EPERM: return "EPERM";
    case ENOENT: return "ENOENT";
    case EMFILE: return "EMFILE";
    case ENFILE: return "ENFILE";
    case ENOSYS: return "ENOSYS";
    case ENOMEM: return "ENOMEM";
    case EINVAL: return "EINVAL";
    case EIO: return "EIO";
    case ENOTSUP: return "ENOTSUP";
    default: return "errno";
    }
}

void ucm_degrade_report_at(ucm_degrade_id_t id, int err, const char *file,
                           int line, const char *fmt, ...)
{
    int saved_errno = errno;
    int state       = UCM_DEGRADE_FREE;
    ucm_degrade_slot_t *s;
    va_list ap;

    if ((unsigned)id >= UCM_DEGRADE_LAST) {
        return;
    }
    s = &ucm_degrade_slots[id];
    if ((__atomic_load_n(&s->state, __ATOMIC_RELAXED) != UCM_DEGRADE_FREE) ||
        !__atomic_compare_exchange_n(&s->state, &state, UCM_DEGRADE_BUSY, 0,
                                     __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        return;
    }
    s->err = err;
    va_start(ap, fmt);
    ucm_log_vsnprintf(s->what, sizeof(s->what), fmt, ap);
    va_end(ap);
    __atomic_store_n(&s->state, UCM_DEGRADE_READY, __ATOMIC_RELEASE);
    if ((int)UCS_LOG_LEVEL_WARN <= (int)ucm_global_opts.log_level) {
        ucm_log_write(UCS_LOG_LEVEL_WARN, file, line, "%s", s->what);
    }
    errno = saved_errno;
}

int ucm_degrade_is(ucm_degrade_id_t id)
{
    return ((unsigned)id < UCM_DEGRADE_LAST) &&
           (__atomic_load_n(&ucm_degrade_slots[id].state, __ATOMIC_ACQUIRE) ==
            UCM_DEGRADE_READY);
}

unsigned ucm_degraded_query(ucm_degraded_info_t *infos, unsigned max)
{
    unsigned id, count = 0;

    for (id = 0; id < UCM_DEGRADE_LAST; ++id) {
        if (!ucm_degrade_is((ucm_degrade_id_t)id)) {
            continue;
        }
        if ((infos != NULL) && (count < max)) {
            infos[count].mechanism = ucm_degrade_names[id];
            infos[count].err       = ucm_degrade_slots[id].err;
            infos[count].what      = ucm_degrade_slots[id].what;
        }
        ++count;
    }
    return count;
}
