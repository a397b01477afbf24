/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The UCX release running in this process: ucm_ucx_release() (declared in
 * ucm/api/ucm_ext.h, defined in ucm_release.c).  Not for hook context.
 */
#ifndef UCM_RELEASE_H_
#define UCM_RELEASE_H_

#include <ucm/api/ucm_ext.h>

#include <pthread.h>

/* Guards the detector's cached result; taken before every other libucm
 * lock by the fork handlers (ucm_init.c); held while the loaded objects are
 * walked and ucp_get_version() runs. */
extern pthread_mutex_t ucm_release_lock;

#endif
