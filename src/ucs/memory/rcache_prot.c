/*
 * Protection check of a range against /proc/self/maps (read without
 * allocating, by libucm), with a one-entry cache of the last mapping seen.
 * The cache is dropped by unmap events touching it (rcache_event.c);
 * mprotect() is not observed, like in UCX.
 */
#include "rcache_int.h"

#include <ucm/api/ucm.h>

typedef struct {
    ucs_pgt_addr_t cur;   /* checked up to here */
    ucs_pgt_addr_t end;
    int            prot;
    int            ok;
    ucs_pgt_addr_t first_start, first_end; /* mapping containing the start */
    int            first_prot;
} ucs_rcache_prot_walk_t;

static int ucs_rcache_prot_walk_cb(void *arg, void *addr, size_t length,
                                   int prot, const char *path)
{
    ucs_rcache_prot_walk_t *walk = arg;
    ucs_pgt_addr_t start = (ucs_pgt_addr_t)addr;
    ucs_pgt_addr_t end   = start + length;

    if (end <= walk->cur) {
        return 0;           /* before the range */
    }
    if (start > walk->cur) {
        return 1;           /* hole */
    }
    if (walk->first_end == 0) {
        walk->first_start = start;
        walk->first_end   = end;
        walk->first_prot  = prot;
    }
    if ((prot & walk->prot) != walk->prot) {
        return 1;           /* lacks rights */
    }
    walk->cur = end;
    if (walk->cur >= walk->end) {
        walk->ok = 1;
        return 1;
    }
    return 0;
}

int ucs_rcache_prot_cached_locked(ucs_rcache_t *rcache, ucs_pgt_addr_t start,
                                  ucs_pgt_addr_t end, int prot)
{
    prot &= PROT_READ | PROT_WRITE | PROT_EXEC;
    return rcache->maps.valid && (rcache->maps.start <= (start & ~4095ul)) &&
           (end <= rcache->maps.end) && ((rcache->maps.prot & prot) == prot);
}

int ucs_rcache_prot_check(ucs_rcache_t *rcache, ucs_pgt_addr_t start,
                          ucs_pgt_addr_t end, int prot)
{
    ucs_rcache_prot_walk_t walk = {0};
    ucs_pgt_addr_t page_start   = start & ~4095ul;
    int hit;

    prot &= PROT_READ | PROT_WRITE | PROT_EXEC;

    pthread_spin_lock(&rcache->lock);
    hit = ucs_rcache_prot_cached_locked(rcache, start, end, prot);
    pthread_spin_unlock(&rcache->lock);
    if (hit) {
        return 1;
    }

    walk.cur  = page_start;
    walk.end  = end;
    walk.prot = prot;
    ucm_parse_proc_self_maps(ucs_rcache_prot_walk_cb, &walk);

    if (walk.first_end != 0) {
        pthread_spin_lock(&rcache->lock);
        rcache->maps.start = walk.first_start;
        rcache->maps.end   = walk.first_end;
        rcache->maps.prot  = walk.first_prot;
        rcache->maps.valid = 1;
        pthread_spin_unlock(&rcache->lock);
    }
    return walk.ok;
}
