/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Test module for test_compat_abi.cc: stands in for a stock UCX libucs.
 * It defines ucs_load_modules() with UCX 1.13.1's signature, records how
 * libucm calls it, and "loads a module" the way UCX's libucm_cuda does when
 * it is loaded: by linking an installer into ucm_event_installer_list, once
 * per init-once object.
 */
#include <ucm/api/ucm_compat.h>

#include <pthread.h>
#include <string.h>

/* UCX's ucs_init_once_t */
typedef struct {
    pthread_mutex_t lock;
    int initialized;
} ucmt_init_once_t;

static int ucmt_fake_load_calls;
static char ucmt_fake_framework[32];
static char ucmt_fake_modules[64];
static unsigned ucmt_fake_flags;
static int ucmt_fake_install_calls;
static int ucmt_fake_install_events;

static ucs_status_t ucmt_fake_install(int events)
{
    ++ucmt_fake_install_calls;
    ucmt_fake_install_events = events;
    return UCS_OK;
}

static ucm_compat_event_installer_t ucmt_fake_installer = {
    ucmt_fake_install, NULL, {NULL, NULL}};

void ucs_load_modules(const char *framework, const char *modules,
                      ucmt_init_once_t *once, unsigned flags)
{
    ++ucmt_fake_load_calls;
    strncpy(ucmt_fake_framework, framework, sizeof(ucmt_fake_framework) - 1);
    strncpy(ucmt_fake_modules, modules, sizeof(ucmt_fake_modules) - 1);
    ucmt_fake_flags = flags;
    pthread_mutex_lock(&once->lock);
    if (!once->initialized) {
        ucs_list_add_tail(&ucm_event_installer_list, &ucmt_fake_installer.list);
        once->initialized = 1;
    }
    pthread_mutex_unlock(&once->lock);
}

/* What the test reads back. */
int ucmt_fake_ucs_load_calls(void)
{
    return ucmt_fake_load_calls;
}

const char *ucmt_fake_ucs_framework(void)
{
    return ucmt_fake_framework;
}

const char *ucmt_fake_ucs_modules(void)
{
    return ucmt_fake_modules;
}

unsigned ucmt_fake_ucs_flags(void)
{
    return ucmt_fake_flags;
}

int ucmt_fake_ucs_install_calls(void)
{
    return ucmt_fake_install_calls;
}

int ucmt_fake_ucs_install_events(void)
{
    return ucmt_fake_install_events;
}

/* The module's "unload": unlink its installer. */
void ucmt_fake_ucs_unload(void)
{
    if (ucmt_fake_installer.list.next != NULL) {
        ucs_list_del(&ucmt_fake_installer.list);
        ucmt_fake_installer.list.next = ucmt_fake_installer.list.prev = NULL;
    }
}
