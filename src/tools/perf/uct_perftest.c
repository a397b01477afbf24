/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * uct_perftest: ucx_perftest-compatible benchmark of the RC verbs transport
 * (src/uct/ib).  "uct_perftest" is the server; "uct_perftest HOST -t TEST
 * -d DEV:PORT ..." is the client, which prints the results (see -h).
 */
#include "perf_ctx.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define PERF_CONNECT_TIMEOUT_S 30.0

static ucs_status_t perf_main_handshake(perf_params_t *params, int *fd_p)
{
    perf_wire_params_t wire;
    ucs_status_t status;
    int fd;

    if (params->server == NULL) {
        status = perf_sock_accept(params->port, params->ipv6, &fd);
        if (status != UCS_OK) {
            return status;
        }
        status = perf_sock_recv(fd, &wire, sizeof(wire));
        if (status == UCS_OK) {
            status = perf_sock_sync(fd, perf_params_from_wire(&wire, params));
        }
    } else {
        status = perf_sock_connect(params->server, params->port, params->ipv6,
                                   PERF_CONNECT_TIMEOUT_S, &fd);
        if (status != UCS_OK) {
            return status;
        }
        perf_params_to_wire(params, &wire);
        status = perf_sock_send(fd, &wire, sizeof(wire));
        if (status == UCS_OK) {
            status = perf_sock_sync(fd, UCS_OK);
            if (status != UCS_OK) {
                fprintf(stderr,
                        "uct_perftest: the server rejected the "
                        "parameters: %s\n",
                        ucs_status_string(status));
            }
        }
    }
    if (status != UCS_OK) {
        close(fd);
        return status;
    }
    *fd_p = fd;
    return UCS_OK;
}

int main(int argc, char **argv)
{
    perf_params_t params;
    ucs_status_t status;
    perf_ctx_t ctx;
    int fd;

    status = perf_opts_parse(argc, argv, &params);
    if (status == UCS_ERR_CANCELED) {
        return 0;
    } else if (status != UCS_OK) {
        return PERF_EXIT_USAGE;
    }

    status = perf_main_handshake(&params, &fd);
    if (status != UCS_OK) {
        return PERF_EXIT_FAILURE;
    }
    perf_env_report(&params);
    status = perf_ctx_setup(&ctx, &params, fd, params.server == NULL);
    if (status == UCS_OK) {
        status = perf_run(&ctx);
    }
    perf_ctx_cleanup(&ctx);
    close(fd);
    if (status != UCS_OK) {
        fprintf(stderr, "uct_perftest: %s failed: %s\n",
                perf_test_name(params.test), ucs_status_string(status));
        return PERF_EXIT_FAILURE;
    }
    return 0;
}
