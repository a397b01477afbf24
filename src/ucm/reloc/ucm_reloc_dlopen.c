/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlopen() on behalf of another object.  glibc searches the RPATH/RUNPATH of
 * the object that called dlopen(); once dlopen is hooked, that caller is
 * libucm, so the caller's search path is applied here first
 * (UCX_MEM_DLOPEN_PROCESS_RPATH).  Not hook context: may use libc freely.
 */
#include "ucm_reloc.h"

#include <ucm/api/ucm.h>
#include <ucm/util/ucm_log.h>
#include <ucm/util/ucm_opts.h>

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <string.h>
#include <unistd.h>

/* Directory of the object (for $ORIGIN); 0 on success. */
static int ucm_reloc_origin(const struct link_map *lm, char *buf, size_t max)
{
    const char *name = lm->l_name;
    char *slash;
    ssize_t len;

    if ((name == NULL) || (name[0] == '\0')) {
        len = readlink("/proc/self/exe", buf, max - 1);
        if (len <= 0) {
            return -1;
        }
        buf[len] = '\0';
    } else {
        if (strlen(name) >= max) {
            return -1;
        }
        strcpy(buf, name);
    }
    slash = strrchr(buf, '/');
    if (slash == NULL) {
        return -1;
    }
    *slash = '\0';
    return 0;
}

/* Expand $ORIGIN / ${ORIGIN} in dir[0..len) and append "/filename". */
static int ucm_reloc_build_path(const char *dir, size_t len, const char *origin,
                                const char *filename, char *out, size_t max)
{
    size_t pos    = 0, n;
    const char *p = dir, *end = dir + len, *insert;

    while (p < end) {
        if (!strncmp(p, "$ORIGIN", 7) || !strncmp(p, "${ORIGIN}", 9)) {
            insert = origin;
            n      = strlen(origin);
            p += (p[1] == '{') ? 9 : 7;
        } else {
            insert = p;
            n      = 1;
            ++p;
        }
        if ((origin == NULL) || (pos + n + 1 >= max)) {
            return -1;
        }
        memcpy(out + pos, insert, n);
        pos += n;
    }
    n = strlen(filename);
    if (pos + n + 2 >= max) {
        return -1;
    }
    out[pos++] = '/';
    memcpy(out + pos, filename, n + 1);
    return 0;
}

static const char *ucm_reloc_search_path(const struct link_map *lm)
{
    const ElfW(Dyn) * d;
    const char *strtab = NULL;
    ElfW(Addr) rpath = 0, runpath = 0;
    int has_rpath = 0, has_runpath = 0;

    for (d = lm->l_ld; (d != NULL) && (d->d_tag != DT_NULL); ++d) {
        if (d->d_tag == DT_STRTAB) {
            strtab = (const char *)d->d_un.d_ptr;
        } else if (d->d_tag == DT_RPATH) {
            rpath     = d->d_un.d_val;
            has_rpath = 1;
        } else if (d->d_tag == DT_RUNPATH) {
            runpath     = d->d_un.d_val;
            has_runpath = 1;
        }
    }
    if (strtab == NULL) {
        return NULL;
    }
    if ((uintptr_t)strtab < lm->l_addr) {
        strtab += lm->l_addr;
    }
    return has_runpath ? strtab + runpath : has_rpath ? strtab + rpath : NULL;
}

void *ucm_reloc_dlopen_as(const char *filename, int flag, const void *caller,
                          void *(*orig_dlopen)(const char *, int))
{
    char origin[PATH_MAX], path[PATH_MAX];
    struct link_map *lm = NULL;
    const char *search, *dir, *colon;
    int have_origin;
    Dl_info info;

    if ((filename == NULL) || (strchr(filename, '/') != NULL) ||
        !ucm_opts_get(UCM_OPTS_DLOPEN_PROCESS_RPATH) ||
        !dladdr1(caller, &info, (void **)&lm, RTLD_DL_LINKMAP) ||
        (lm == NULL)) {
        return orig_dlopen(filename, flag);
    }
    search = ucm_reloc_search_path(lm);
    if (search == NULL) {
        return orig_dlopen(filename, flag);
    }
    have_origin = (ucm_reloc_origin(lm, origin, sizeof(origin)) == 0);
    for (dir = search; *dir != '\0';
         dir = (*colon == ':') ? colon + 1 : colon) {
        colon = strchr(dir, ':');
        if (colon == NULL) {
            colon = dir + strlen(dir);
        }
        if ((colon > dir) &&
            (ucm_reloc_build_path(dir, (size_t)(colon - dir),
                                  have_origin ? origin : NULL, filename, path,
                                  sizeof(path)) == 0) &&
            (access(path, F_OK) == 0)) {
            ucm_debug("dlopen(%s): found in the caller's search path: %s",
                      filename, path);
            return orig_dlopen(path, flag);
        }
    }
    return orig_dlopen(filename, flag);
}
