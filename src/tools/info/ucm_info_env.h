/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What this process's environment degrades, one line each, for ucm_info.
 *
 * ucm_info_env_print(): checks the locked-memory limit (registration
 * pins pages), whether /proc/self/pagemap shows page frame numbers
 * (UCX_RCACHE_CHECK_PFN) and whether the userfaultfd monitor runs
 * (uffd_active, uffd_reason from ucm_uffd_query()); prints one "#   ..."
 * line per degraded item, or "#   nothing".  Inputs: the monitor's state.
 * Output: the number of degraded items.  Errors: a check that cannot run
 * is reported as its own line.  Not for hook context (reads files).
 */
#ifndef UCM_INFO_ENV_H_
#define UCM_INFO_ENV_H_

int ucm_info_env_print(int uffd_active, const char *uffd_reason);

#endif
