/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Handler accounting (UCM_STATS=y); see ucm_stats.h.
 */
#include "ucm_stats.h"

#include <common/ucs_env.h>
#include <ucm/api/ucm_ext.h>
#include <ucm/event/ucm_event.h>
#include <ucm/util/ucm_log.h>
#include <ucm/util/ucm_sys.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define UCM_STATS_NUM_TYPES 32
#define UCM_STATS_LINE_MAX  UCM_LOG_MAX

typedef struct ucm_stats_record {
    ucm_event_callback_t cb; /* the handler's own callback and arg */
    void *arg;
    int events; /* as registered */
    int active; /* events not yet removed */
    int priority;
    unsigned long count[UCM_STATS_NUM_TYPES]; /* by event bit */
    unsigned long unmapped_bytes;
    unsigned long unmapped_max; /* largest single VM_UNMAPPED */
} ucm_stats_record_t;

static ucm_stats_record_t ucm_stats_records[UCM_STATS_MAX_HANDLERS];
static unsigned ucm_stats_num_records;
static int ucm_stats_enabled          = -1; /* -1: environment not read yet */
static pthread_mutex_t ucm_stats_lock = PTHREAD_MUTEX_INITIALIZER;
static int ucm_stats_fork_locked;
static unsigned long ucm_stats_external_vm_mapped;
static unsigned long ucm_stats_external_vm_unmapped;
static const char ucm_stats_full_msg[] =
    "UCM STATS handler table full: further handlers are not counted";

static const char *ucm_stats_type_names[UCM_STATS_NUM_TYPES] = {
    [0]  = "MMAP",
    [1]  = "MUNMAP",
    [2]  = "MREMAP",
    [3]  = "SHMAT",
    [4]  = "SHMDT",
    [5]  = "SBRK",
    [6]  = "MADVISE",
    [7]  = "BRK",
    [16] = "VM_MAPPED",
    [17] = "VM_UNMAPPED",
    [20] = "MEM_TYPE_ALLOC",
    [21] = "MEM_TYPE_FREE"};

/* UCM_STATS=v: one line per delivery of a range event.  Hook context. */
static void ucm_stats_trace(const ucm_stats_record_t *rec,
                            ucm_event_type_t type, const ucm_event_t *event)
{
    char line[160];
    unsigned bit = (unsigned)__builtin_ctz((unsigned)type);
    size_t len;

    if ((type != UCM_EVENT_VM_UNMAPPED) && (type != UCM_EVENT_VM_MAPPED) &&
        (type != UCM_EVENT_MEM_TYPE_FREE) &&
        (type != UCM_EVENT_MEM_TYPE_ALLOC)) {
        return;
    }
    len = ucm_log_snprintf(line, sizeof(line),
                           "UCM STATS [%ld] event %s %p size %zu to handler "
                           "#%u\n",
                           ucm_sys_getpid(), ucm_stats_type_names[bit],
                           event->vm_unmapped.address, event->vm_unmapped.size,
                           (unsigned)(rec - ucm_stats_records));
    ucm_sys_write(2, line, len);
}

/* Hook context: count, then call the real handler. */
static void ucm_stats_trampoline(ucm_event_type_t type, ucm_event_t *event,
                                 void *arg)
{
    ucm_stats_record_t *rec = arg;
    unsigned bit            = (unsigned)__builtin_ctz((unsigned)type);
    unsigned long max;

    if (bit < UCM_STATS_NUM_TYPES) {
        __atomic_add_fetch(&rec->count[bit], 1, __ATOMIC_RELAXED);
    }
    if (type == UCM_EVENT_VM_UNMAPPED) {
        __atomic_add_fetch(&rec->unmapped_bytes, event->vm_unmapped.size,
                           __ATOMIC_RELAXED);
        max = __atomic_load_n(&rec->unmapped_max, __ATOMIC_RELAXED);
        while ((event->vm_unmapped.size > max) &&
               !__atomic_compare_exchange_n(
                   &rec->unmapped_max, &max, event->vm_unmapped.size, 0,
                   __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
        }
    }
    if (ucm_stats_enabled > 1) {
        ucm_stats_trace(rec, type, event);
    }
    rec->cb(type, event, rec->arg);
}

static void ucm_stats_write_line(const char *line, size_t len)
{
    char buf[UCM_STATS_LINE_MAX + 1];

    if (len > UCM_STATS_LINE_MAX) {
        len = UCM_STATS_LINE_MAX;
    }
    memcpy(buf, line, len);
    buf[len++] = '\n';
    ucm_sys_write(2, buf, len);
}

/* "libucs.so.0+0x1234" for a code address, or the address itself. */
static void ucm_stats_describe_code(const void *addr, char *buf, size_t max)
{
    const char *base;
    Dl_info info;

    if ((dladdr(addr, &info) == 0) || (info.dli_fname == NULL)) {
        ucm_log_snprintf(buf, max, "%p", addr);
        return;
    }
    base = strrchr(info.dli_fname, '/');
    base = (base != NULL) ? base + 1 : info.dli_fname;
    if (base[0] == '\0') {
        base = "main";
    }
    ucm_log_snprintf(
        buf, max, "%s+0x%lx", base,
        (unsigned long)((const char *)addr - (const char *)info.dli_fbase));
}

static size_t ucm_stats_format_events(int events, char *buf, size_t max)
{
    size_t len = 0;
    unsigned bit;

    buf[0] = '\0';
    for (bit = 0; bit < UCM_STATS_NUM_TYPES; ++bit) {
        if (!(events & (1u << bit)) || (ucm_stats_type_names[bit] == NULL)) {
            continue;
        }
        len +=
            ucm_log_snprintf(buf + len, max - len, "%s%s", (len > 0) ? "|" : "",
                             ucm_stats_type_names[bit]);
    }
    return len;
}

/* Any context but hook context (dladdr). */
static void ucm_stats_record_print(const ucm_stats_record_t *rec,
                                   const char *what)
{
    char line[UCM_STATS_LINE_MAX], where[128], names[160];
    size_t len;
    unsigned bit;

    ucm_stats_describe_code((const void *)rec->cb, where, sizeof(where));
    ucm_stats_format_events(rec->events, names, sizeof(names));
    len = ucm_log_snprintf(
        line, sizeof(line),
        "UCM STATS [%ld] %s: handler #%u %s arg %p events "
        "%s priority %d%s:",
        ucm_sys_getpid(), what, (unsigned)(rec - ucm_stats_records), where,
        rec->arg, names, rec->priority, (rec->active == 0) ? " (removed)" : "");
    for (bit = 0; bit < UCM_STATS_NUM_TYPES; ++bit) {
        if (!(rec->events & (1u << bit)) ||
            (ucm_stats_type_names[bit] == NULL)) {
            continue;
        }
        len += ucm_log_snprintf(
            line + len, sizeof(line) - len, " %s=%lu",
            ucm_stats_type_names[bit],
            __atomic_load_n(&rec->count[bit], __ATOMIC_RELAXED));
    }
    if (rec->events & UCM_EVENT_VM_UNMAPPED) {
        len += ucm_log_snprintf(
            line + len, sizeof(line) - len,
            " unmapped_bytes=%lu unmapped_max=%lu",
            __atomic_load_n(&rec->unmapped_bytes, __ATOMIC_RELAXED),
            __atomic_load_n(&rec->unmapped_max, __ATOMIC_RELAXED));
    }
    ucm_stats_write_line(line, len);
}

void ucm_stats_external_call(ucm_event_type_t type)
{
    if (__atomic_load_n(&ucm_stats_enabled, __ATOMIC_RELAXED) <= 0) {
        return;
    }
    __atomic_add_fetch((type == UCM_EVENT_VM_MAPPED)
                           ? &ucm_stats_external_vm_mapped
                           : &ucm_stats_external_vm_unmapped,
                       1, __ATOMIC_RELAXED);
}

static void __attribute__((destructor)) ucm_stats_at_exit(void)
{
    unsigned i, n = __atomic_load_n(&ucm_stats_num_records, __ATOMIC_ACQUIRE);
    char line[UCM_STATS_LINE_MAX], names[160];
    size_t len;

    if (ucm_stats_enabled <= 0) {
        return;
    }
    for (i = 0; i < n; ++i) {
        ucm_stats_record_print(&ucm_stats_records[i], "at exit");
    }
    ucm_stats_format_events(
        __atomic_load_n(&ucm_event_external, __ATOMIC_RELAXED), names,
        sizeof(names));
    len = ucm_log_snprintf(
        line, sizeof(line),
        "UCM STATS [%ld] at exit: hooks %s, external "
        "events %s, ucm_vm_munmap calls %lu, ucm_vm_mmap "
        "calls %lu",
        ucm_sys_getpid(), ucm_mmap_hook_modes[ucm_hooks_installed_mode()],
        (names[0] != '\0') ? names : "none", ucm_stats_external_vm_unmapped,
        ucm_stats_external_vm_mapped);
    ucm_stats_write_line(line, len);
}

/* fork(): the lock is a leaf (held only around the record table, never
 * while calling out), so it is simply held across fork; from inside an
 * event handler only try-locked, as in ucm_init.c. */
static void ucm_stats_atfork_prepare(void)
{
    if (ucm_rcu_in_read_section()) {
        ucm_stats_fork_locked = (pthread_mutex_trylock(&ucm_stats_lock) == 0);
    } else {
        pthread_mutex_lock(&ucm_stats_lock);
        ucm_stats_fork_locked = 1;
    }
}

static void ucm_stats_atfork_parent(void)
{
    if (ucm_stats_fork_locked) {
        pthread_mutex_unlock(&ucm_stats_lock);
    }
}

static void ucm_stats_atfork_child(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;

    if (ucm_stats_fork_locked) {
        pthread_mutex_unlock(&ucm_stats_lock);
    } else {
        ucm_stats_lock = fresh;
    }
}

/* The environment is read once, at load time: when stats are off, the
 * handler paths take no lock at all. */
static void UCS_F_CTOR ucm_stats_init(void)
{
    const char *env = ucs_env_get("UCM_STATS");
    int enabled;

    enabled = (env == NULL) ? 0
              : ((env[0] == 'v') || (env[0] == 'V'))
                  ? 2
                  : ((env[0] == 'y') || (env[0] == 'Y') || (env[0] == '1') ||
                     !strcasecmp(env, "on"));
    if (enabled) {
        pthread_atfork(ucm_stats_atfork_prepare, ucm_stats_atfork_parent,
                       ucm_stats_atfork_child);
    }
    __atomic_store_n(&ucm_stats_enabled, enabled, __ATOMIC_RELEASE);
}

int ucm_stats_handler_wrap(int events, int priority, ucm_event_callback_t *cb_p,
                           void **arg_p)
{
    ucm_stats_record_t *rec = NULL;

    if (__atomic_load_n(&ucm_stats_enabled, __ATOMIC_ACQUIRE) <= 0) {
        return 0;
    }
    pthread_mutex_lock(&ucm_stats_lock);
    if (ucm_stats_num_records < UCM_STATS_MAX_HANDLERS) {
        rec           = &ucm_stats_records[ucm_stats_num_records];
        rec->cb       = *cb_p;
        rec->arg      = *arg_p;
        rec->events   = events;
        rec->active   = events;
        rec->priority = priority;
        __atomic_store_n(&ucm_stats_num_records, ucm_stats_num_records + 1,
                         __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&ucm_stats_lock);
    if (rec == NULL) {
        ucm_stats_write_line(ucm_stats_full_msg, strlen(ucm_stats_full_msg));
        return 0;
    }
    /* records are never freed: print without the lock (dladdr takes the
     * loader's lock) */
    ucm_stats_record_print(rec, "installed");
    *cb_p  = ucm_stats_trampoline;
    *arg_p = rec;
    return 1;
}

void ucm_stats_handler_wrap_cancel(void *wrapped_arg)
{
    ucm_stats_record_t *rec = wrapped_arg;

    pthread_mutex_lock(&ucm_stats_lock);
    rec->active = 0;
    rec->events = 0; /* prints as an empty record */
    pthread_mutex_unlock(&ucm_stats_lock);
}

void ucm_stats_handler_remove(int events, ucm_event_callback_t cb, void *arg)
{
    ucm_stats_record_t *rec;
    unsigned i, n;
    int found;

    if (__atomic_load_n(&ucm_stats_enabled, __ATOMIC_ACQUIRE) <= 0) {
        return;
    }
    n = __atomic_load_n(&ucm_stats_num_records, __ATOMIC_ACQUIRE);
    for (i = 0; i < n; ++i) {
        rec = &ucm_stats_records[i];
        pthread_mutex_lock(&ucm_stats_lock);
        found = (rec->cb == cb) && (rec->arg == arg) && (rec->active & events);
        if (found) {
            rec->active &= ~events;
        }
        pthread_mutex_unlock(&ucm_stats_lock);
        if (found) {
            /* waits until no thread runs the trampoline for it */
            ucm_event_handler_remove(events, ucm_stats_trampoline, rec);
            ucm_stats_record_print(rec, "removed");
        }
    }
}
