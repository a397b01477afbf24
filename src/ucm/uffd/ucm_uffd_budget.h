/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The userfaultfd monitor's share of vm.max_map_count (internal to libucm).
 *
 * Every registered span may split the mapping it lies in: up to two more
 * kernel VMAs per span, which stay until the pages are unmapped or
 * unregistered.  The monitor keeps the spans' cost under
 * UCX_MEM_UFFD_VMA_SHARE of vm.max_map_count (read once, at the first
 * start of the monitor; 65530 when unreadable) and refuses new spans
 * beyond it, with one WARN line per process.
 *
 * Contract: every function runs with ucm_uffd_lock held, out of hook
 * context (ucm_uffd_budget_init reads /proc).  Nothing allocates.
 */
#ifndef UCM_UFFD_BUDGET_H_
#define UCM_UFFD_BUDGET_H_

/* Kernel VMAs one span may add (a split on each side). */
#define UCM_UFFD_BUDGET_VMAS_PER_SPAN 2

/* Read vm.max_map_count (first call only) and compute the budget for
 * share (a fraction in (0, 1]; anything else: one error line and the
 * default).  Returns the share in effect. */
double ucm_uffd_budget_init(double share);

/* Non-zero if the table may grow to 'spans' spans.  Zero: counted, and
 * the first refusal in the process prints the WARN line. */
int ucm_uffd_budget_admit(unsigned long spans);

/* Budget in VMAs, the spans' cost for 'spans', vm.max_map_count, and the
 * subscriptions refused so far. */
unsigned long ucm_uffd_budget_vmas(void);
unsigned long ucm_uffd_budget_use(unsigned long spans);
unsigned long ucm_uffd_budget_max_map_count(void);
unsigned long ucm_uffd_budget_refused(void);

#endif
