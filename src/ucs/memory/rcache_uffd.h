/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The registration cache's userfaultfd state (UCX_MEM_UFFD; rcache_uffd.c
 * says why): whether regions are subscribed, and the span libucm last
 * reported whole, inside which a registration needs no subscription.
 *
 * Contract:
 *  - ucs_rcache_uffd_init(): at create; UCS_OK, or (UCX_MEM_UFFD=yes and
 *    no userfaultfd) the error of ucm_uffd_start() with one log line;
 *  - *_locked: the cache's lock held by the caller (hook context allowed:
 *    they neither allocate nor log nor block);
 *  - ucs_rcache_uffd_subscribe(): the registration path owned, no
 *    spinlock held (libucm takes its own lock); between
 *    ucs_rcache_uffd_span_check_locked() and
 *    ucs_rcache_uffd_span_update_locked() of the same registration;
 *  - unmaps: the cache's count of unmap events handled (maps.unmaps,
 *    rcache_prot.h; its lock), so that a span learnt while an unmap was
 *    handled is not kept.
 */
#ifndef UCS_RCACHE_UFFD_H_
#define UCS_RCACHE_UFFD_H_

#include <ucs/datastruct/pgtable.h>
#include <ucs/type/status.h>

typedef struct ucs_rcache_uffd {
    int active;                /* subscribe regions (set at init) */
    ucs_pgt_addr_t start, end; /* (lock) a span reported as a whole: no
                                  unmap in it since; 0, 0: none */
    /* the registration in progress (registration path): */
    int known;                /* inside the span above */
    int fresh;                /* its subscription gave new_* */
    unsigned long new_unmaps; /* unmaps when it started */
    ucs_pgt_addr_t new_start, new_end;
} ucs_rcache_uffd_t;

#pragma GCC visibility push(hidden)

ucs_status_t ucs_rcache_uffd_init(ucs_rcache_uffd_t *uffd, int events,
                                  const char *name);

/* Subscribe [start, end) with libucm (out of line; a refusal leaves the
 * hooks in charge). */
void ucs_rcache_uffd_subscribe_range(ucs_rcache_uffd_t *uffd,
                                     ucs_pgt_addr_t start, ucs_pgt_addr_t end);

/* An unmap of [start, end) was handled: forget the span if it touches it. */
void ucs_rcache_uffd_span_forget_locked(ucs_rcache_uffd_t *uffd,
                                        ucs_pgt_addr_t start,
                                        ucs_pgt_addr_t end);

#pragma GCC visibility pop

/* A forked child: its pages are not registered with a userfaultfd. */
static inline void ucs_rcache_uffd_span_reset_locked(ucs_rcache_uffd_t *uffd)
{
    uffd->start = 0;
    uffd->end   = 0;
}

/* A registration of [start, end) starts: is it inside the span? */
static inline void ucs_rcache_uffd_span_check_locked(ucs_rcache_uffd_t *uffd,
                                                     ucs_pgt_addr_t start,
                                                     ucs_pgt_addr_t end,
                                                     unsigned long unmaps)
{
    uffd->known      = (start >= uffd->start) && (end <= uffd->end);
    uffd->fresh      = 0; /* from a registration that failed */
    uffd->new_unmaps = unmaps;
}

/* It ends: the span its subscription gave, if any, unless an unmap was
 * handled meanwhile (the span may have been cut). */
static inline void ucs_rcache_uffd_span_update_locked(ucs_rcache_uffd_t *uffd,
                                                      unsigned long unmaps)
{
    if (uffd->fresh && (uffd->new_unmaps == unmaps)) {
        uffd->start = uffd->new_start;
        uffd->end   = uffd->new_end;
    }
    uffd->fresh = 0;
}

/* A region of [start, end) is about to be registered: subscribed, unless
 * it lies in the span (ucs_rcache_uffd_span_check_locked()). */
static inline void ucs_rcache_uffd_subscribe(ucs_rcache_uffd_t *uffd,
                                             ucs_pgt_addr_t start,
                                             ucs_pgt_addr_t end)
{
    if (uffd->active && !uffd->known) {
        ucs_rcache_uffd_subscribe_range(uffd, start, end);
    }
}

#endif
