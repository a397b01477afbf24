/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal glue between libucm's event code and the UCX 1.13.1 ABI layer
 * (see ucm/api/ucm_compat.h).  Not for hook context: these run from
 * ucm_set_event_handler(), with no libucm lock held.
 */
#ifndef UCM_COMPAT_INT_H_
#define UCM_COMPAT_INT_H_

#include <ucm/api/ucm.h>

/* Have libucs load UCX's ucm modules (libucm_cuda, libucm_rocm of the UCX
 * build in the process), as UCX's libucm does before it runs the installers:
 * through ucs_load_modules() of the libucs in the process, if it has one
 * (a stock UCX libucs); otherwise nothing.  Modules that load register
 * their installers in ucm_event_installer_list. */
void ucm_compat_modules_load(void);

/* Load the modules, then call every installer's install(events) in list
 * order.  UCS_OK, or the first installer's error (logged). */
ucs_status_t ucm_compat_installers_install(int events);

/* Call every installer's get_existing_alloc() for the handler just added
 * (events without UCM_EVENT_FLAG_*). */
void ucm_compat_installers_existing(int events, int priority,
                                    ucm_event_callback_t cb, void *arg);

/*
 * If 'caller' (a return address) lies in another object that defines
 * 'name' itself, that definition: the call is that object's call to its
 * own internal (another libucm's, bound to ours through its PLT), and must
 * go there.  NULL for any other caller.  No lock, no allocation.  A call
 * that the other object makes as a tail call (jmp) carries its caller's
 * return address and is not recognized.
 */
void *ucm_compat_caller_definition(const void *caller, const char *name);

/* In an exported internal: forward the call to the caller's own definition
 * of the same function, if it has one. */
#define UCM_COMPAT_CALLER_OWN(_func)                                           \
    ((__typeof__(&_func))ucm_compat_caller_definition(                         \
        __builtin_return_address(0), #_func))

#endif
