/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Optional accounting of the event handlers other libraries install, for
 * proving what a stock UCX does with our hooks (UCM_STATS=y in the
 * environment; read once, when libucm is loaded).
 *
 * When enabled, every handler added through ucm_set_event_handler is
 * registered through a counting trampoline: deliveries are counted per event
 * type (VM_UNMAPPED also in bytes), one line is written when a handler is
 * added or removed, a summary line per handler at process exit, and one
 * for the process (hook mode, events declared external and how many were
 * fed through ucm_vm_munmap / ucm_vm_mmap).  Lines
 * start with "UCM STATS" and go to stderr whatever UCX_MEM_LOG_LEVEL is.
 * UCM_STATS=v also writes one line per range event (VM_MAPPED, VM_UNMAPPED,
 * MEM_TYPE_*) delivered to a counted handler ("handler #N" as numbered in the
 * other lines).  When disabled (the default) nothing is wrapped and dispatch
 * is unchanged.
 *
 * The trampoline is hook context: atomic counters only.  The other functions
 * are called by ucm_set_event_handler / ucm_unset_event_handler (not hook
 * context); when stats are on they take a leaf mutex of their own (held
 * across fork), when off no lock at all.  At most UCM_STATS_MAX_HANDLERS
 * registrations are tracked; later ones are registered unwrapped (one line
 * says so).
 */
#ifndef UCM_STATS_H_
#define UCM_STATS_H_

#include <ucm/api/ucm.h>

#define UCM_STATS_MAX_HANDLERS 64

/* If stats are enabled, replace (*cb_p, *arg_p) by the trampoline and its
 * record for a handler about to be added with (events, priority).  Returns 1
 * if it did, 0 if the caller registers the originals. */
int ucm_stats_handler_wrap(int events, int priority, ucm_event_callback_t *cb_p,
                           void **arg_p);

/* The add of a wrapped handler failed: forget its record. */
void ucm_stats_handler_wrap_cancel(void *wrapped_arg);

/* Count a call of ucm_vm_mmap / ucm_vm_munmap (events fed from outside,
 * e.g. by Open MPI's patcher).  Hook context. */
void ucm_stats_external_call(ucm_event_type_t type);

/* Remove 'events' from every wrapped registration of (cb, arg), through
 * ucm_event_handler_remove.  No-op when stats are disabled. */
void ucm_stats_handler_remove(int events, ucm_event_callback_t cb, void *arg);

#endif
