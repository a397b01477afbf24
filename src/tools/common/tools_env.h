/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What this process's environment degrades, one line each, for the tools
 * (ucm_info -e, the benchmarks, uct_perftest).
 *
 * A tool lists the items that matter to it, each with what it loses, and
 * calls tools_env_report() once.  For every item that is degraded it
 * prints "<prefix><label>: <reason>: <consequence>" as one line on stream,
 * and nothing for an item that is fine.  Checks made here:
 *   TOOLS_ENV_MEMLOCK   RLIMIT_MEMLOCK below need bytes (0: any finite
 *                       limit) without CAP_IPC_LOCK
 *   TOOLS_ENV_PAGEMAP   /proc/self/pagemap hides page frame numbers (not
 *                       root, no CAP_SYS_ADMIN) or cannot be read
 *   TOOLS_ENV_VALGRIND  the process runs under valgrind
 *   TOOLS_ENV_RDMA      no device under /sys/class/infiniband
 *   TOOLS_ENV_GIVEN     a reason the tool found itself (libucm's
 *                       userfaultfd monitor, a hook's fallback); a NULL
 *                       reason is not degraded
 * Inputs: the items (label NULL: the check's own label).  Output: the
 * number of lines printed.  Errors: a check that cannot run is printed as
 * degraded, saying why.  Links no UCX library (the benchmarks that
 * dlopen() theirs use it too).  Not thread-safe; not for hook context
 * (opens files, maps a page).
 */
#ifndef TOOLS_ENV_H_
#define TOOLS_ENV_H_

#include <stddef.h>
#include <stdio.h>

/* The prefix of the benchmarks' and uct_perftest's lines (stderr). */
#define TOOLS_ENV_PREFIX "# degraded: "

typedef enum {
    TOOLS_ENV_MEMLOCK,
    TOOLS_ENV_PAGEMAP,
    TOOLS_ENV_VALGRIND,
    TOOLS_ENV_RDMA,
    TOOLS_ENV_GIVEN
} tools_env_check_t;

typedef struct {
    tools_env_check_t check;
    const char *label;       /* NULL: "memlock", "pagemap", ... */
    const char *reason;      /* TOOLS_ENV_GIVEN only */
    size_t need;             /* TOOLS_ENV_MEMLOCK: bytes pinned at once */
    const char *consequence; /* what this tool loses */
} tools_env_item_t;

unsigned tools_env_report(FILE *stream, const char *prefix,
                          const tools_env_item_t *items, unsigned count);

#endif
