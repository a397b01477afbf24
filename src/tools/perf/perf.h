/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * uct_perftest internals: parameters, TCP exchange, result reporting and the
 * test runner over the RC verbs transport (src/uct/ib).
 *
 * Roles: the server (no host argument) waits on a TCP port, receives the
 * client's parameters and mirrors them; the client runs the timed loop and
 * prints the results.  Every function returns ucs_status_t and logs one line
 * on error; nothing here is thread-safe (one thread per process).
 */
#ifndef UCT_PERF_H_
#define UCT_PERF_H_

#include <ucs/type/status.h>

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#define PERF_MAX_IOV        8
#define PERF_DEFAULT_PORT   13337
#define PERF_DEFAULT_ITERS  1000000ul
#define PERF_DEFAULT_WARMUP 10000ul
#define PERF_DEFAULT_AM_WIN 127u
#define PERF_NAME_MAX       64
#define PERF_EXIT_USAGE     2
#define PERF_EXIT_FAILURE   1

typedef enum {
    PERF_TEST_PUT_BW,
    PERF_TEST_PUT_LAT,
    PERF_TEST_GET_BW,
    PERF_TEST_GET_LAT,
    PERF_TEST_AM_BW,
    PERF_TEST_AM_LAT,
    PERF_TEST_LAST
} perf_test_t;

/* -G: register the local buffer through the memory domain every iteration. */
typedef enum {
    PERF_REG_ONCE,  /* default: one registration for the whole run */
    PERF_REG_REUSE, /* same buffers, mem_reg + mem_dereg per iteration */
    PERF_REG_NEW    /* fresh mmap()ed buffers per iteration, then munmap */
} perf_reg_mode_t;

/* What the client sends to the server (same binary on both sides). */
typedef struct {
    uint32_t magic;
    uint32_t test;     /* perf_test_t */
    uint32_t reg_mode; /* perf_reg_mode_t */
    uint32_t iovcnt;
    uint64_t sizes[PERF_MAX_IOV];
    uint64_t iters;
    uint64_t warmup;
    uint32_t outstanding;
    uint32_t am_window;
    char tl[PERF_NAME_MAX];
    char dev[PERF_NAME_MAX];
} perf_wire_params_t;

typedef struct {
    perf_test_t test;
    perf_reg_mode_t reg_mode;
    unsigned iovcnt;
    size_t sizes[PERF_MAX_IOV];
    size_t msg_size; /* sum of sizes */
    uint64_t iters;
    uint64_t warmup;
    unsigned outstanding; /* -O, 0 = transport default */
    unsigned am_window;   /* -W */
    char tl[PERF_NAME_MAX];
    char dev[PERF_NAME_MAX];
    int dev_set; /* -d given on this side */
    unsigned port;
    int ipv6;
    double percentile;  /* -R */
    int final_only;     /* -f */
    int csv;            /* -v */
    const char *server; /* NULL: this process is the server */
} perf_params_t;

/* ---- perf_opts.c ---- */

/* Parse argv into params.  On a usage error prints one line to stderr and
 * returns UCS_ERR_INVALID_PARAM (or UCS_ERR_UNSUPPORTED for an option of
 * ucx_perftest that this tool does not implement); -h prints the help and
 * returns UCS_ERR_CANCELED. */
ucs_status_t perf_opts_parse(int argc, char **argv, perf_params_t *params);
void perf_opts_usage(FILE *stream);
const char *perf_test_name(perf_test_t test);
int perf_test_is_lat(perf_test_t test);
/* Checks shared by both sides (also applied to what the server receives). */
ucs_status_t perf_params_check(const perf_params_t *params);
void perf_params_to_wire(const perf_params_t *params, perf_wire_params_t *w);
/* Fills the test fields of params from w; keeps params->dev if dev_set. */
ucs_status_t perf_params_from_wire(const perf_wire_params_t *w,
                                   perf_params_t *params);

/* ---- perf_sock.c: blocking TCP exchange ---- */

/* Server: listen on port, accept one client; prints the two status lines
 * of ucx_perftest ("Waiting for connection...", "Accepted connection from"). */
ucs_status_t perf_sock_accept(unsigned port, int ipv6, int *fd_p);
/* Client: connect, retrying for timeout_s seconds (servers in the emulated
 * VM are slow to start listening). */
ucs_status_t perf_sock_connect(const char *host, unsigned port, int ipv6,
                               double timeout_s, int *fd_p);
ucs_status_t perf_sock_send(int fd, const void *buf, size_t len);
ucs_status_t perf_sock_recv(int fd, void *buf, size_t len);
/* Length-prefixed blob; *buf_p is malloc()ed, at most max_len bytes. */
ucs_status_t perf_sock_send_blob(int fd, const void *buf, size_t len);
ucs_status_t perf_sock_recv_blob(int fd, size_t max_len, void **buf_p,
                                 size_t *len_p);
/* Both sides exchange one status word; returns the peer's if it is an
 * error, else our own. */
ucs_status_t perf_sock_sync(int fd, ucs_status_t mine);

/* ---- perf_report.c: timing, percentile, table/CSV output ---- */

typedef struct {
    const perf_params_t *params;
    double op_factor; /* time per op = iteration time/this */
    uint64_t start_ns;
    uint64_t last_ns;   /* time of the last record() */
    uint64_t report_ns; /* start of the current interval */
    uint64_t iters;     /* recorded so far */
    uint64_t report_iters;
    double *all; /* sampled iteration times, ns */
    size_t all_cap, all_len, all_stride;
    double *interval; /* this interval's times, ns */
    size_t interval_cap, interval_len;
} perf_report_t;

uint64_t perf_now_ns(void);
ucs_status_t perf_report_init(perf_report_t *rep, const perf_params_t *params);
void perf_report_cleanup(perf_report_t *rep);
/* Prints the description box and table head (client, not with -v/-f). */
void perf_report_header(const perf_params_t *params);
/* Call once just before the first timed iteration. */
void perf_report_start(perf_report_t *rep);
/* One timed iteration ended now; prints a progress line once a second. */
void perf_report_record(perf_report_t *rep);
void perf_report_final(perf_report_t *rep);

#endif
