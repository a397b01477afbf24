/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * uct_perftest out-of-band exchange: one blocking TCP connection between
 * the server and the client (parameters, addresses, keys, barriers), with
 * TCP keepalive and a user timeout, so that a dead peer host ends a wait
 * with an error.
 */
#include "perf.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PERF_SOCK_RETRY_NS 100000000ull /* 100 ms between connect attempts */

/* A peer whose host died (no FIN, no RST) is declared gone after
 * IDLE + INTVL * CNT seconds of silence, or when data sent to it stays
 * unacknowledged for USER_TIMEOUT (keepalive alone does not apply while
 * sent data waits, and retransmissions last many minutes): a blocking
 * receive then fails with ETIMEDOUT instead of waiting for ever.  A live
 * peer's kernel answers probes and acknowledges data however long its side
 * of the test runs. */
#define PERF_SOCK_KEEPIDLE_S      5
#define PERF_SOCK_KEEPINTVL_S     2
#define PERF_SOCK_KEEPCNT         5
#define PERF_SOCK_USER_TIMEOUT_MS 20000

static void perf_sock_setup(int fd)
{
    int one = 1, idle = PERF_SOCK_KEEPIDLE_S, intvl = PERF_SOCK_KEEPINTVL_S;
    int cnt = PERF_SOCK_KEEPCNT, user_timeout = PERF_SOCK_USER_TIMEOUT_MS;

    /* best effort: only the barriers' latency depends on it */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if ((setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) != 0) ||
        (setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)) != 0) ||
        (setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl)) !=
         0) ||
        (setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt)) != 0) ||
        (setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout,
                    sizeof(user_timeout)) != 0)) {
        fprintf(stderr,
                "uct_perftest: warning: TCP keepalive/user timeout: %s (a dead "
                "peer "
                "host may then block the test)\n",
                strerror(errno));
    }
}

ucs_status_t perf_sock_accept(unsigned port, int ipv6, int *fd_p)
{
    struct sockaddr_storage peer;
    struct sockaddr_in6 a6;
    struct sockaddr_in a4;
    socklen_t peer_len = sizeof(peer);
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    int lfd, fd, one = 1;

    lfd = socket(ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
    if (lfd < 0) {
        fprintf(stderr, "uct_perftest: socket(): %s\n", strerror(errno));
        return UCS_ERR_IO_ERROR;
    }
    (void)setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (ipv6) {
        memset(&a6, 0, sizeof(a6));
        a6.sin6_family = AF_INET6;
        a6.sin6_port   = htons(port);
        a6.sin6_addr   = in6addr_any;
        fd             = bind(lfd, (struct sockaddr *)&a6, sizeof(a6));
    } else {
        memset(&a4, 0, sizeof(a4));
        a4.sin_family      = AF_INET;
        a4.sin_port        = htons(port);
        a4.sin_addr.s_addr = htonl(INADDR_ANY);
        fd                 = bind(lfd, (struct sockaddr *)&a4, sizeof(a4));
    }
    if ((fd < 0) || (listen(lfd, 1) < 0)) {
        fprintf(stderr, "uct_perftest: cannot listen on TCP port %u: %s\n",
                port, strerror(errno));
        close(lfd);
        return UCS_ERR_IO_ERROR;
    }

    printf("Waiting for connection...\n");
    fflush(stdout);
    do {
        fd = accept(lfd, (struct sockaddr *)&peer, &peer_len);
    } while ((fd < 0) && (errno == EINTR));
    close(lfd);
    if (fd < 0) {
        fprintf(stderr, "uct_perftest: accept(): %s\n", strerror(errno));
        return UCS_ERR_IO_ERROR;
    }
    if (getnameinfo((struct sockaddr *)&peer, peer_len, host, sizeof(host),
                    serv, sizeof(serv), NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
        printf("Accepted connection from %s:%s\n", host, serv);
        fflush(stdout);
    }
    perf_sock_setup(fd);
    *fd_p = fd;
    return UCS_OK;
}

ucs_status_t perf_sock_connect(const char *host, unsigned port, int ipv6,
                               double timeout_s, int *fd_p)
{
    struct addrinfo hints, *res, *ai;
    struct timespec pause = {0, PERF_SOCK_RETRY_NS};
    uint64_t deadline;
    char serv[16];
    int fd, ret, err = 0;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family   = ipv6 ? AF_INET6 : AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    snprintf(serv, sizeof(serv), "%u", port);
    ret = getaddrinfo(host, serv, &hints, &res);
    if (ret != 0) {
        fprintf(stderr, "uct_perftest: cannot resolve '%s': %s\n", host,
                gai_strerror(ret));
        return UCS_ERR_INVALID_ADDR;
    }

    deadline = perf_now_ns() + (uint64_t)(timeout_s * 1e9);
    for (;;) {
        for (ai = res; ai != NULL; ai = ai->ai_next) {
            fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
            if (fd < 0) {
                err = errno;
                continue;
            }
            if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
                freeaddrinfo(res);
                perf_sock_setup(fd);
                *fd_p = fd;
                return UCS_OK;
            }
            err = errno;
            close(fd);
        }
        if ((err != ECONNREFUSED) && (err != EINTR) && (err != ETIMEDOUT) &&
            (err != ENETUNREACH) && (err != EHOSTUNREACH)) {
            break;
        }
        if (perf_now_ns() >= deadline) {
            break;
        }
        nanosleep(&pause, NULL);
    }
    freeaddrinfo(res);
    fprintf(stderr, "uct_perftest: cannot connect to %s:%u: %s\n", host, port,
            strerror(err));
    return UCS_ERR_UNREACHABLE;
}

ucs_status_t perf_sock_send(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    ssize_t n;

    while (len > 0) {
        n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            fprintf(stderr, "uct_perftest: send to the peer failed: %s\n",
                    strerror(errno));
            return UCS_ERR_IO_ERROR;
        }
        p += n;
        len -= n;
    }
    return UCS_OK;
}

ucs_status_t perf_sock_recv(int fd, void *buf, size_t len)
{
    char *p = buf;
    ssize_t n;

    while (len > 0) {
        n = recv(fd, p, len, 0);
        if (n == 0) {
            fprintf(stderr, "uct_perftest: the peer closed the connection\n");
            return UCS_ERR_CONNECTION_RESET;
        } else if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            fprintf(stderr,
                    "uct_perftest: receive from the peer failed: "
                    "%s\n",
                    strerror(errno));
            return UCS_ERR_IO_ERROR;
        }
        p += n;
        len -= n;
    }
    return UCS_OK;
}

ucs_status_t perf_sock_send_blob(int fd, const void *buf, size_t len)
{
    uint32_t len32 = (uint32_t)len;
    ucs_status_t status;

    if (len > UINT32_MAX) {
        fprintf(stderr, "uct_perftest: blob of %zu bytes is too large\n", len);
        return UCS_ERR_INVALID_PARAM;
    }
    status = perf_sock_send(fd, &len32, sizeof(len32));
    if (status != UCS_OK) {
        return status;
    }
    return perf_sock_send(fd, buf, len);
}

ucs_status_t perf_sock_recv_blob(int fd, size_t max_len, void **buf_p,
                                 size_t *len_p)
{
    ucs_status_t status;
    uint32_t len32;
    void *buf;

    status = perf_sock_recv(fd, &len32, sizeof(len32));
    if (status != UCS_OK) {
        return status;
    }
    if (len32 > max_len) {
        fprintf(stderr,
                "uct_perftest: the peer sent %u bytes, at most %zu "
                "expected\n",
                len32, max_len);
        return UCS_ERR_MESSAGE_TRUNCATED;
    }
    buf = malloc(len32 ? len32 : 1);
    if (buf == NULL) {
        fprintf(stderr, "uct_perftest: out of memory\n");
        return UCS_ERR_NO_MEMORY;
    }
    status = perf_sock_recv(fd, buf, len32);
    if (status != UCS_OK) {
        free(buf);
        return status;
    }
    *buf_p = buf;
    *len_p = len32;
    return UCS_OK;
}

ucs_status_t perf_sock_sync(int fd, ucs_status_t mine)
{
    int32_t out = mine, in;
    ucs_status_t status;

    status = perf_sock_send(fd, &out, sizeof(out));
    if (status != UCS_OK) {
        return status;
    }
    status = perf_sock_recv(fd, &in, sizeof(in));
    if (status != UCS_OK) {
        return status;
    }
    if (mine != UCS_OK) {
        return mine;
    }
    return (ucs_status_t)in;
}
