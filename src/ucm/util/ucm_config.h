/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libucm configuration (UCX_MEM_*), parsed once at load time.
 */
#ifndef UCM_CONFIG_H_
#define UCM_CONFIG_H_

#include <ucm/api/ucm.h>
#include <ucm/api/ucm_ext.h>

/* Parse UCX_MEM_* into ucm_global_opts; logs one error per malformed
 * variable and returns UCS_ERR_INVALID_PARAM if there was any. */
ucs_status_t ucm_config_init(void);

#endif
