/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * uct_perftest command line: the ucx_perftest options this tool implements,
 * a clear error (exit 2) for the ones it does not.
 */
#include "perf.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PERF_WIRE_MAGIC 0x75637470u /* "uctp" */
#define PERF_MAX_MSG    (1ul << 30)

/* Options of ucx_perftest 1.13 that uct_perftest does not implement. */
#define PERF_OPTS_STOCK_ONLY "b:Nc:P:m:i:loBH:A:T:M:r:SCIqUeyz"
#define PERF_OPTS_OURS       "t:n:s:w:p:fvd:x:D:O:W:R:G:h6"

static const char *perf_test_names[PERF_TEST_LAST] = {
    [PERF_TEST_PUT_BW] = "put_bw", [PERF_TEST_PUT_LAT] = "put_lat",
    [PERF_TEST_GET_BW] = "get_bw", [PERF_TEST_GET_LAT] = "get_lat",
    [PERF_TEST_AM_BW] = "am_bw",   [PERF_TEST_AM_LAT] = "am_lat",
};

const char *perf_test_name(perf_test_t test)
{
    return (test < PERF_TEST_LAST) ? perf_test_names[test] : "?";
}

int perf_test_is_lat(perf_test_t test)
{
    return (test == PERF_TEST_PUT_LAT) || (test == PERF_TEST_GET_LAT) ||
           (test == PERF_TEST_AM_LAT);
}

void perf_opts_usage(FILE *stream)
{
    fprintf(
        stream,
        "  Usage: uct_perftest [ server-hostname ] [ options ]\n"
        "\n"
        "  Without a host name the process is the server: it waits for one "
        "client\n"
        "  on the TCP port and takes the test parameters from it.\n"
        "\n"
        "  Options (a subset of ucx_perftest's, same meaning):\n"
        "     -t <test>      test to run:\n"
        "           put_bw - put (RDMA write) bandwidth / message rate\n"
        "          put_lat - put latency (ping-pong, each side polls the last "
        "byte)\n"
        "           get_bw - get (RDMA read) bandwidth / message rate\n"
        "          get_lat - get latency (one get at a time)\n"
        "            am_bw - active message bandwidth / message rate\n"
        "           am_lat - active message latency (ping-pong)\n"
        "     -s <size>      message size, or a comma-separated list of "
        "io-vector\n"
        "                    entry sizes (at most %d) (8)\n"
        "     -n <iters>     number of iterations to run (%lu)\n"
        "     -w <iters>     number of warm-up iterations (%lu)\n"
        "     -O <count>     maximal number of outstanding operations (0 = "
        "the\n"
        "                    transport's send queue depth)\n"
        "     -W <count>     flow control window for active messages (%u)\n"
        "     -R <rank>      percentile rank of the percentile column (50.0)\n"
        "     -p <port>      TCP port for the exchange (%d)\n"
        "     -6             use IPv6 for the exchange\n"
        "     -f             print only the final numbers (no progress lines)\n"
        "     -v             print CSV-formatted output\n"
        "     -h             show this help message\n"
        "\n"
        "  Transport (UCT) options:\n"
        "     -x <tl>        transport: rc_verbs (the only one; default)\n"
        "     -d <device>    device and port, e.g. rxe0:1 (required on the "
        "client;\n"
        "                    the server uses the client's unless given)\n"
        "     -D <layout>    data layout: zcopy (the only one; default)\n"
        "\n"
        "  Registration test (not in ucx_perftest; put_bw and get_bw only):\n"
        "     -G <mode>      register the local buffer through the memory "
        "domain\n"
        "                    on every iteration:\n"
        "            reuse - the same buffers each time (mem_reg + "
        "mem_dereg);\n"
        "                    with UCX_IB_REG_METHODS=rcache this hits the "
        "cache,\n"
        "                    with =direct it pays ibv_reg_mr every time\n"
        "              new - a fresh mmap() per iteration, munmap() after it\n"
        "\n"
        "  Exit status: 0 success, 1 failure, 2 bad or unsupported option.\n",
        PERF_MAX_IOV, PERF_DEFAULT_ITERS, PERF_DEFAULT_WARMUP,
        PERF_DEFAULT_AM_WIN, PERF_DEFAULT_PORT);
}

static ucs_status_t perf_opts_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "uct_perftest: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (try -h)\n");
    return UCS_ERR_INVALID_PARAM;
}

static ucs_status_t perf_opts_u64(const char *arg, uint64_t min, uint64_t max,
                                  const char *what, uint64_t *value_p)
{
    unsigned long long v;
    char *end;

    errno = 0;
    if ((arg[0] < '0') || (arg[0] > '9')) {
        goto err;
    }
    v = strtoull(arg, &end, 10);
    if ((errno != 0) || (*end != '\0') || (v < min) || (v > max)) {
        goto err;
    }
    *value_p = v;
    return UCS_OK;

err:
    fprintf(stderr,
            "uct_perftest: invalid %s '%s' (expected %llu..%llu) (try -h)\n",
            what, arg, (unsigned long long)min, (unsigned long long)max);
    return UCS_ERR_INVALID_PARAM;
}

static ucs_status_t perf_opts_sizes(const char *arg, perf_params_t *params)
{
    char buf[256], *tok, *save;
    uint64_t v;
    size_t total = 0;
    unsigned n   = 0;

    if (strlen(arg) >= sizeof(buf)) {
        return perf_opts_error("size list '%s' is too long", arg);
    }
    strcpy(buf, arg);
    for (tok = strtok_r(buf, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        if (n == PERF_MAX_IOV) {
            fprintf(stderr,
                    "uct_perftest: at most %d io-vector sizes in -s '%s'\n",
                    PERF_MAX_IOV, arg);
            return UCS_ERR_INVALID_PARAM;
        }
        if (perf_opts_u64(tok, 1, PERF_MAX_MSG, "message size", &v) != UCS_OK) {
            return UCS_ERR_INVALID_PARAM;
        }
        params->sizes[n++] = v;
        total += v;
    }
    if ((n == 0) || (total > PERF_MAX_MSG)) {
        return perf_opts_error("invalid message size '%s' (1 byte..1 GiB)",
                               arg);
    }
    params->iovcnt   = n;
    params->msg_size = total;
    return UCS_OK;
}

static ucs_status_t perf_opts_name(const char *arg, char *dst, const char *what)
{
    if ((arg[0] == '\0') || (strlen(arg) >= PERF_NAME_MAX)) {
        fprintf(stderr, "uct_perftest: invalid %s '%s' (try -h)\n", what, arg);
        return UCS_ERR_INVALID_PARAM;
    }
    strcpy(dst, arg);
    return UCS_OK;
}

static void perf_params_defaults(perf_params_t *params)
{
    memset(params, 0, sizeof(*params));
    params->test       = PERF_TEST_LAST;
    params->reg_mode   = PERF_REG_ONCE;
    params->iovcnt     = 1;
    params->sizes[0]   = 8;
    params->msg_size   = 8;
    params->iters      = PERF_DEFAULT_ITERS;
    params->warmup     = PERF_DEFAULT_WARMUP;
    params->am_window  = PERF_DEFAULT_AM_WIN;
    params->port       = PERF_DEFAULT_PORT;
    params->percentile = 50.0;
    strcpy(params->tl, "rc_verbs");
}

static ucs_status_t perf_opts_one(int c, const char *arg, perf_params_t *params)
{
    uint64_t v;
    char *end;
    int i;

    switch (c) {
    case 't':
        for (i = 0; i < PERF_TEST_LAST; ++i) {
            if (!strcmp(arg, perf_test_names[i])) {
                params->test = (perf_test_t)i;
                return UCS_OK;
            }
        }
        return perf_opts_error("unsupported test '%s' (put_bw, put_lat, "
                               "get_bw, get_lat, am_bw, am_lat)",
                               arg);
    case 's': return perf_opts_sizes(arg, params);
    case 'n':
        if (perf_opts_u64(arg, 1, UINT64_MAX / 2, "iteration count", &v) !=
            UCS_OK) {
            return UCS_ERR_INVALID_PARAM;
        }
        params->iters = v;
        return UCS_OK;
    case 'w':
        if (perf_opts_u64(arg, 0, UINT64_MAX / 2, "warm-up count", &v) !=
            UCS_OK) {
            return UCS_ERR_INVALID_PARAM;
        }
        params->warmup = v;
        return UCS_OK;
    case 'O':
        if (perf_opts_u64(arg, 0, 4096, "outstanding count", &v) != UCS_OK) {
            return UCS_ERR_INVALID_PARAM;
        }
        params->outstanding = (unsigned)v;
        return UCS_OK;
    case 'W':
        if (perf_opts_u64(arg, 2, 4096, "flow control window", &v) != UCS_OK) {
            return UCS_ERR_INVALID_PARAM;
        }
        params->am_window = (unsigned)v;
        return UCS_OK;
    case 'p':
        if (perf_opts_u64(arg, 1, 65535, "port", &v) != UCS_OK) {
            return UCS_ERR_INVALID_PARAM;
        }
        params->port = (unsigned)v;
        return UCS_OK;
    case 'R':
        params->percentile = strtod(arg, &end);
        if ((*end != '\0') || (end == arg) || !(params->percentile > 0.0) ||
            !(params->percentile <= 100.0)) {
            return perf_opts_error("invalid percentile rank '%s' (0..100]",
                                   arg);
        }
        return UCS_OK;
    case 'G':
        if (!strcmp(arg, "reuse")) {
            params->reg_mode = PERF_REG_REUSE;
        } else if (!strcmp(arg, "new")) {
            params->reg_mode = PERF_REG_NEW;
        } else {
            return perf_opts_error("invalid registration mode '%s' (reuse, "
                                   "new)",
                                   arg);
        }
        return UCS_OK;
    case 'x':
        if (strcmp(arg, "rc_verbs") != 0) {
            fprintf(stderr,
                    "uct_perftest: transport '%s' is not supported (only "
                    "rc_verbs)\n",
                    arg);
            return UCS_ERR_UNSUPPORTED;
        }
        return perf_opts_name(arg, params->tl, "transport");
    case 'd':
        params->dev_set = 1;
        return perf_opts_name(arg, params->dev, "device");
    case 'D':
        if (strcmp(arg, "zcopy") != 0) {
            fprintf(stderr,
                    "uct_perftest: data layout '%s' is not supported (only "
                    "zcopy)\n",
                    arg);
            return UCS_ERR_UNSUPPORTED;
        }
        return UCS_OK;
    case 'f': params->final_only = 1; return UCS_OK;
    case 'v': params->csv = 1; return UCS_OK;
    case '6': params->ipv6 = 1; return UCS_OK;
    default: return UCS_ERR_INVALID_PARAM;
    }
}

ucs_status_t perf_opts_parse(int argc, char **argv, perf_params_t *params)
{
    char optstring[128];
    ucs_status_t status;
    int c;

    perf_params_defaults(params);
    snprintf(optstring, sizeof(optstring), ":%s%s", PERF_OPTS_OURS,
             PERF_OPTS_STOCK_ONLY);
    opterr = 0;
    while ((c = getopt(argc, argv, optstring)) != -1) {
        if (c == 'h') {
            perf_opts_usage(stdout);
            return UCS_ERR_CANCELED;
        } else if (c == '?') {
            fprintf(stderr, "uct_perftest: unknown option -%c (try -h)\n",
                    optopt);
            return UCS_ERR_INVALID_PARAM;
        } else if (c == ':') {
            fprintf(stderr, "uct_perftest: option -%c needs a value (try -h)\n",
                    optopt);
            return UCS_ERR_INVALID_PARAM;
        } else if (strchr(PERF_OPTS_STOCK_ONLY, c) != NULL) {
            fprintf(stderr,
                    "uct_perftest: option -%c of ucx_perftest is not "
                    "supported by uct_perftest (try -h)\n",
                    c);
            return UCS_ERR_UNSUPPORTED;
        }
        status = perf_opts_one(c, optarg, params);
        if (status != UCS_OK) {
            return status;
        }
    }

    if (optind < argc) {
        params->server = argv[optind++];
    }
    if (optind < argc) {
        return perf_opts_error("unexpected argument '%s'", argv[optind]);
    }

    if (params->server != NULL) {
        if (params->test == PERF_TEST_LAST) {
            fprintf(stderr, "uct_perftest: the client needs -t <test> (try "
                            "-h)\n");
            return UCS_ERR_INVALID_PARAM;
        }
        if (!params->dev_set) {
            fprintf(stderr, "uct_perftest: the client needs -d <device>, "
                            "e.g. -d rxe0:1 (try -h)\n");
            return UCS_ERR_INVALID_PARAM;
        }
        return perf_params_check(params);
    }
    return UCS_OK;
}

ucs_status_t perf_params_check(const perf_params_t *params)
{
    if (params->test >= PERF_TEST_LAST) {
        fprintf(stderr, "uct_perftest: invalid test\n");
        return UCS_ERR_INVALID_PARAM;
    }
    if ((params->reg_mode != PERF_REG_ONCE) &&
        (params->test != PERF_TEST_PUT_BW) &&
        (params->test != PERF_TEST_GET_BW)) {
        fprintf(stderr,
                "uct_perftest: -G works with put_bw and get_bw only, "
                "not %s\n",
                perf_test_name(params->test));
        return UCS_ERR_UNSUPPORTED;
    }
    if ((params->test == PERF_TEST_PUT_LAT) && (params->iovcnt != 1)) {
        fprintf(stderr, "uct_perftest: put_lat takes one message size (the "
                        "peer polls its last byte)\n");
        return UCS_ERR_UNSUPPORTED;
    }
    return UCS_OK;
}

void perf_params_to_wire(const perf_params_t *params, perf_wire_params_t *w)
{
    unsigned i;

    memset(w, 0, sizeof(*w));
    w->magic    = PERF_WIRE_MAGIC;
    w->test     = params->test;
    w->reg_mode = params->reg_mode;
    w->iovcnt   = params->iovcnt;
    for (i = 0; i < params->iovcnt; ++i) {
        w->sizes[i] = params->sizes[i];
    }
    w->iters       = params->iters;
    w->warmup      = params->warmup;
    w->outstanding = params->outstanding;
    w->am_window   = params->am_window;
    strcpy(w->tl, params->tl);
    strcpy(w->dev, params->dev);
}

ucs_status_t perf_params_from_wire(const perf_wire_params_t *w,
                                   perf_params_t *params)
{
    size_t total = 0;
    unsigned i;

    if ((w->magic != PERF_WIRE_MAGIC) || (w->test >= PERF_TEST_LAST) ||
        (w->reg_mode > PERF_REG_NEW) || (w->iovcnt == 0) ||
        (w->iovcnt > PERF_MAX_IOV) || (w->iters == 0) ||
        (w->outstanding > 4096) || (w->am_window < 2) ||
        (w->am_window > 4096) || (memchr(w->tl, '\0', sizeof(w->tl)) == NULL) ||
        (memchr(w->dev, '\0', sizeof(w->dev)) == NULL)) {
        fprintf(stderr, "uct_perftest: malformed parameters from the client "
                        "(another program on the port?)\n");
        return UCS_ERR_INVALID_PARAM;
    }
    for (i = 0; i < w->iovcnt; ++i) {
        if ((w->sizes[i] == 0) || (w->sizes[i] > PERF_MAX_MSG)) {
            fprintf(stderr, "uct_perftest: bad message size from the "
                            "client\n");
            return UCS_ERR_INVALID_PARAM;
        }
        params->sizes[i] = w->sizes[i];
        total += w->sizes[i];
    }
    if (total > PERF_MAX_MSG) {
        fprintf(stderr, "uct_perftest: bad message size from the client\n");
        return UCS_ERR_INVALID_PARAM;
    }
    params->test        = (perf_test_t)w->test;
    params->reg_mode    = (perf_reg_mode_t)w->reg_mode;
    params->iovcnt      = w->iovcnt;
    params->msg_size    = total;
    params->iters       = w->iters;
    params->warmup      = w->warmup;
    params->outstanding = w->outstanding;
    params->am_window   = w->am_window;
    strcpy(params->tl, w->tl);
    if (!params->dev_set) {
        strcpy(params->dev, w->dev);
    }
    return perf_params_check(params);
}
