/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The record of libucm's degraded mechanisms (internal).
 *
 * A default-on mechanism that can no longer do its job (no /proc, no
 * descriptors, no userfaultfd, an unknown glibc heap layout, a self-test
 * that saw no truncation event) calls ucm_degrade_report() once it knows.
 * The first report of a mechanism keeps its text in a fixed slot and logs
 * it as one WARN line naming what is no longer caught; every later report
 * of the same mechanism does nothing.  ucm_degraded_query() (ucm_ext.h)
 * lists the slots.
 *
 * Hook and signal context: no malloc, no lock (a compare-and-swap claims a
 * slot), errno is kept.  A record survives fork(): the child inherits the
 * parent's condition and is not told again.
 */
#ifndef UCM_DEGRADE_H_
#define UCM_DEGRADE_H_

#include <ucs/sys/compiler_def.h>

typedef enum {
    UCM_DEGRADE_PROCMAPS, /* /proc/self/maps unreadable: the file table */
    UCM_DEGRADE_FDS,      /* descriptors exhausted: the file table */
    UCM_DEGRADE_TRUNC,    /* the install self-test saw no truncation event */
    UCM_DEGRADE_UFFD,     /* userfaultfd unavailable: the monitor */
    UCM_DEGRADE_HEAP,     /* glibc heap layout unknown: reloc heap events */
    UCM_DEGRADE_LAST
} ucm_degrade_id_t;

/* Record that mechanism 'id' is degraded because of errno 'err' (0: none);
 * fmt says what is no longer caught.  Logged (WARN, at the caller's file
 * and line) on the first call per mechanism only. */
#define ucm_degrade_report(_id, _err, _fmt, ...)                               \
    ucm_degrade_report_at(_id, _err, __FILE__, __LINE__, _fmt, ##__VA_ARGS__)

void ucm_degrade_report_at(ucm_degrade_id_t id, int err, const char *file,
                           int line, const char *fmt, ...) UCS_F_PRINTF(5, 6);

/* Whether 'id' was reported. */
int ucm_degrade_is(ucm_degrade_id_t id);

/* "EACCES", "EMFILE", ... for the errors the callers meet; else "errno". */
const char *ucm_degrade_errname(int err);

#endif
