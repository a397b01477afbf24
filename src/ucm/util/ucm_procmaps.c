/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * /proc/self/maps walker; see ucm_procmaps.h.
 */
#include "ucm_procmaps.h"
#include "ucm_sys.h"

#include <ucm/api/ucm.h>
#include <fcntl.h>
#include <sys/mman.h>

#define UCM_PROCMAPS_LINE_MAX 320
#define UCM_PROCMAPS_READ_MAX 4096

static const char *ucm_procmaps_hex(const char *p, unsigned long *value)
{
    unsigned long v = 0;
    int d;

    for (;; ++p) {
        if ((*p >= '0') && (*p <= '9')) {
            d = *p - '0';
        } else if ((*p >= 'a') && (*p <= 'f')) {
            d = *p - 'a' + 10;
        } else {
            break;
        }
        v = (v << 4) | (unsigned long)d;
    }
    *value = v;
    return p;
}

static const char *ucm_procmaps_dec(const char *p, unsigned long *value)
{
    unsigned long v = 0;

    for (; (*p >= '0') && (*p <= '9'); ++p) {
        v = (v * 10) + (unsigned long)(*p - '0');
    }
    *value = v;
    return p;
}

static const char *ucm_procmaps_skip(const char *p, char c)
{
    while (*p == c) {
        ++p;
    }
    return p;
}

/* "start-end perms offset dev inode path" -> entry; 0 if it parsed. */
static int ucm_procmaps_parse_line(char *line, ucm_procmaps_entry_t *e)
{
    const char *p = line;
    unsigned long v;

    p        = ucm_procmaps_hex(p, &v);
    e->start = v;
    if (*p++ != '-') {
        return -1;
    }
    p      = ucm_procmaps_hex(p, &v);
    e->end = v;
    p      = ucm_procmaps_skip(p, ' ');
    if ((p[0] == '\0') || (p[1] == '\0') || (p[2] == '\0') || (p[3] == '\0')) {
        return -1;
    }
    e->prot = ((p[0] == 'r') ? PROT_READ : 0) |
              ((p[1] == 'w') ? PROT_WRITE : 0) |
              ((p[2] == 'x') ? PROT_EXEC : 0);
    e->shared    = (p[3] == 's');
    p            = ucm_procmaps_skip(p + 4, ' ');
    p            = ucm_procmaps_hex(p, &e->offset);
    p            = ucm_procmaps_skip(p, ' ');
    p            = ucm_procmaps_hex(p, &e->dev_major);
    e->dev_minor = 0;
    if (*p == ':') {
        p = ucm_procmaps_hex(p + 1, &e->dev_minor);
    }
    while ((*p != ' ') && (*p != '\0')) {
        ++p;
    }
    p       = ucm_procmaps_skip(p, ' ');
    p       = ucm_procmaps_dec(p, &e->inode);
    e->path = ucm_procmaps_skip(p, ' ');
    return 0;
}

int ucm_procmaps_walk(ucm_procmaps_cb_t cb, void *arg)
{
    char rbuf[UCM_PROCMAPS_READ_MAX];
    char line[UCM_PROCMAPS_LINE_MAX];
    ucm_procmaps_entry_t entry;
    size_t line_len = 0;
    long nread, i;
    int fd, stop = 0;

    fd = (int)ucm_sys_open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return fd;
    }
    while (!stop) {
        nread = ucm_sys_read(fd, rbuf, sizeof(rbuf));
        if (nread == -4 /* EINTR */) {
            continue;
        }
        if (nread <= 0) {
            break;
        }
        for (i = 0; (i < nread) && !stop; ++i) {
            if (rbuf[i] != '\n') {
                if (line_len + 1 < sizeof(line)) {
                    line[line_len++] = rbuf[i]; /* longer paths truncated */
                }
                continue;
            }
            line[line_len] = '\0';
            if (ucm_procmaps_parse_line(line, &entry) == 0) {
                stop = cb(arg, &entry);
            }
            line_len = 0;
        }
    }
    ucm_sys_close(fd);
    return (nread < 0) ? (int)nread : 0;
}

typedef struct {
    ucm_proc_maps_cb_t cb;
    void *arg;
} ucm_procmaps_api_ctx_t;

static int ucm_procmaps_api_cb(void *arg, const ucm_procmaps_entry_t *e)
{
    ucm_procmaps_api_ctx_t *ctx = arg;

    return ctx->cb(ctx->arg, (void *)e->start, e->end - e->start, e->prot,
                   e->path);
}

void ucm_parse_proc_self_maps(ucm_proc_maps_cb_t cb, void *arg)
{
    ucm_procmaps_api_ctx_t ctx = {cb, arg};

    if (cb != NULL) {
        ucm_procmaps_walk(ucm_procmaps_api_cb, &ctx);
    }
}
