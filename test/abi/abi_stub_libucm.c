/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Link-time stand-in for another release's libucm.so.0 (never run): its
 * ucm_global_opts has UCMT_SIZE bytes, as UCX 1.18's (64) or 1.22's (72),
 * so that abi_opts linked against it copy-relocates an object of that
 * size, as UCX's own gtest does.  At run time the real libucm is loaded.
 */
#include <stddef.h>

unsigned char ucm_global_opts[UCMT_SIZE];

void ucm_set_global_opts(const void *opts);
void ucm_set_global_opts(const void *opts)
{
    (void)opts;
}

int ucm_set_event_handler(void);
int ucm_set_event_handler(void)
{
    return 0;
}

void ucm_unset_event_handler(void);
void ucm_unset_event_handler(void)
{
}

int ucm_config_get(void);
int ucm_config_get(void)
{
    return -1;
}

size_t ucm_global_opts_layout(void);
size_t ucm_global_opts_layout(void)
{
    return 0;
}
