/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The stock-ABI registration cache library (libucm_rcache.so.0), preloaded
 * into stock UCX programs: it exports ucs_rcache_create, _destroy, _get,
 * _region_hold, _region_put and _region_invalidate, so that libucp's and
 * libuct_ib's imports of them bind here rather than to UCX's libucs.  Under
 * UCX 1.13.1 (the same structs as rcache.h) this cache serves them; under
 * any other release (rcache_stock_abi.c has the one table) every call goes
 * to UCX's libucs, with one line that names the release.
 *
 * Two things only this library needs:
 *  - calls for a cache that is not ours go on to the next definition (the
 *    one of Debian's libucs): libucs calls its own entry points through its
 *    PLT (its ucs_rcache_get holds regions with ucs_rcache_region_hold), so
 *    a cache created by libucs itself reaches these entry points too
 *    (told apart by hot.self, which such an object does not hold; its
 *    puts leave the fast path before they touch the region, see
 *    ucs_rcache_put_pending());
 *  - UCM_RCACHE_STATS=y prints every cache's statistics at exit (also of
 *    the caches destroyed before it) and what the userfaultfd monitor did.
 */
#include "rcache_int.h"
#include "rcache_stock_abi.h"

#include <ucm/api/ucm_ext.h>
#include <ucs/config/ucs_config_parse.h>

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The exported names (rcache.h renames the cache's own functions to
 * ucs_rcache_stock_own_* in this library). */
#undef ucs_rcache_create
#undef ucs_rcache_destroy
#undef ucs_rcache_get
#undef ucs_rcache_region_hold
#undef ucs_rcache_region_put
#undef ucs_rcache_region_invalidate

ucs_status_t ucs_rcache_create(const void *params, const char *name,
                               void *stats, ucs_rcache_t **rcache_p);
void ucs_rcache_destroy(ucs_rcache_t *rcache);
ucs_status_t ucs_rcache_get(ucs_rcache_t *rcache, void *address, size_t length,
                            uintptr_t a4, uintptr_t a5, uintptr_t a6,
                            uintptr_t a7);
void ucs_rcache_region_hold(ucs_rcache_t *rcache, ucs_rcache_region_t *region);
void ucs_rcache_region_put(ucs_rcache_t *rcache, ucs_rcache_region_t *region);
void ucs_rcache_region_invalidate(ucs_rcache_t *rcache,
                                  ucs_rcache_region_t *region,
                                  ucs_rcache_invalidate_comp_func_t cb,
                                  void *arg);

/* UCX 1.13.1's layouts (x86-64), which stock callers compile in. */
#define UCS_RCACHE_STOCK_AT(_type, _field, _offset)                            \
    _Static_assert(offsetof(_type, _field) == (_offset),                       \
                   #_type "." #_field " is at " #_offset " in UCX 1.13.1")
UCS_RCACHE_STOCK_AT(ucs_rcache_region_t, lru_list, 16);
UCS_RCACHE_STOCK_AT(ucs_rcache_region_t, comp_list, 48);
UCS_RCACHE_STOCK_AT(ucs_rcache_region_t, refcount, 64);
UCS_RCACHE_STOCK_AT(ucs_rcache_region_t, status, 68);
UCS_RCACHE_STOCK_AT(ucs_rcache_region_t, prot, 69);
UCS_RCACHE_STOCK_AT(ucs_rcache_region_t, lru_flags, 71);
UCS_RCACHE_STOCK_AT(ucs_rcache_region_t, priv, 72);
UCS_RCACHE_STOCK_AT(ucs_rcache_params_t, ucm_events, 24);
UCS_RCACHE_STOCK_AT(ucs_rcache_params_t, ops, 32);
UCS_RCACHE_STOCK_AT(ucs_rcache_params_t, flags, 48);
UCS_RCACHE_STOCK_AT(ucs_rcache_params_t, max_unreleased, 72);
UCS_RCACHE_STOCK_AT(ucs_rcache_ops_t, dump_region, 16);
_Static_assert(sizeof(ucs_rcache_region_t) == 80, "UCX 1.13.1: 80 bytes");
/* UCX 1.13.1's cache object begins with its params: its alignment (never 0)
 * where ours has pending_count sends its puts off the fast path, its ops
 * pointer is where ours has its own address (rcache.c) */
_Static_assert(offsetof(ucs_rcache_t, hot.pending_count) ==
                   offsetof(ucs_rcache_params_t, alignment),
               "pending_count where UCX has params.alignment");
_Static_assert(offsetof(ucs_rcache_t, hot.self) ==
                   offsetof(ucs_rcache_params_t, ops),
               "self where UCX has params.ops");
_Static_assert(sizeof(ucs_rcache_params_t) == 80, "UCX 1.13.1: 80 bytes");

/* --- calls for another library's cache ---------------------------------- */

typedef ucs_status_t (*ucs_rcache_stock_get_f)(ucs_rcache_t *, void *, size_t,
                                               int, void *,
                                               ucs_rcache_region_t **);
/* get of any release, as seven words (rcache_stock.c's ucs_rcache_get) */
typedef ucs_status_t (*ucs_rcache_stock_get7_f)(ucs_rcache_t *, void *, size_t,
                                                uintptr_t, uintptr_t, uintptr_t,
                                                uintptr_t);
typedef ucs_status_t (*ucs_rcache_stock_create_f)(const void *, const char *,
                                                  void *, ucs_rcache_t **);
typedef void (*ucs_rcache_stock_region_f)(ucs_rcache_t *,
                                          ucs_rcache_region_t *);
typedef void (*ucs_rcache_stock_inv_f)(ucs_rcache_t *, ucs_rcache_region_t *,
                                       ucs_rcache_invalidate_comp_func_t,
                                       void *);
typedef void (*ucs_rcache_stock_destroy_f)(ucs_rcache_t *);

/* The definition of name that follows ours (Debian's libucs), resolved at
 * the first call and kept in *fn_p; NULL, with one log line, if there is
 * none (then rcache is no cache at all: a bad pointer). */
static void *ucs_rcache_stock_next(void **fn_p, const char *name, void *self,
                                   ucs_rcache_t *rcache)
{
    void *fn = __atomic_load_n(fn_p, __ATOMIC_ACQUIRE);
    void *handle;

    if (ucs_likely(fn != NULL)) {
        return fn;
    }
    fn = dlsym(RTLD_NEXT, name);
    if ((fn == NULL) || (fn == self)) {
        handle = dlopen("libucs.so.0", RTLD_NOW | RTLD_NOLOAD);
        fn     = (handle != NULL) ? dlsym(handle, name) : NULL;
        if (handle != NULL) {
            dlclose(handle);
        }
    }
    if ((fn == NULL) || (fn == self)) {
        ucs_rcache_error("%s: no other library (UCX's libucs) defines it: "
                         "the call for cache %p is ignored",
                         name, (void *)rcache);
        return NULL;
    }
    __atomic_store_n(fn_p, fn, __ATOMIC_RELEASE);
    return fn;
}

#define UCS_RCACHE_STOCK_NEXT(_type, _name, _rcache)                           \
    ({                                                                         \
        static void *_fn;                                                      \
        (_type) ucs_rcache_stock_next(&_fn, #_name, (void *)_name, _rcache);   \
    })

ucs_status_t ucs_rcache_stock_next_get(ucs_rcache_t *rcache, void *address,
                                       size_t length, int prot, void *arg,
                                       ucs_rcache_region_t **region_p)
{
    ucs_rcache_stock_get_f fn =
        UCS_RCACHE_STOCK_NEXT(ucs_rcache_stock_get_f, ucs_rcache_get, rcache);

    if (fn == NULL) {
        return UCS_ERR_INVALID_PARAM;
    }
    return fn(rcache, address, length, prot, arg, region_p);
}

void ucs_rcache_stock_next_put(ucs_rcache_t *rcache,
                               ucs_rcache_region_t *region)
{
    ucs_rcache_stock_region_f fn = UCS_RCACHE_STOCK_NEXT(
        ucs_rcache_stock_region_f, ucs_rcache_region_put, rcache);

    if (fn != NULL) {
        fn(rcache, region);
    }
}

void ucs_rcache_stock_next_hold(ucs_rcache_t *rcache,
                                ucs_rcache_region_t *region)
{
    ucs_rcache_stock_region_f fn = UCS_RCACHE_STOCK_NEXT(
        ucs_rcache_stock_region_f, ucs_rcache_region_hold, rcache);

    if (fn != NULL) {
        fn(rcache, region);
    }
}

void ucs_rcache_stock_next_invalidate(ucs_rcache_t *rcache,
                                      ucs_rcache_region_t *region,
                                      ucs_rcache_invalidate_comp_func_t cb,
                                      void *arg)
{
    ucs_rcache_stock_inv_f fn = UCS_RCACHE_STOCK_NEXT(
        ucs_rcache_stock_inv_f, ucs_rcache_region_invalidate, rcache);

    if (fn != NULL) {
        fn(rcache, region, cb, arg);
    }
}

void ucs_rcache_stock_next_destroy(ucs_rcache_t *rcache)
{
    ucs_rcache_stock_destroy_f fn = UCS_RCACHE_STOCK_NEXT(
        ucs_rcache_stock_destroy_f, ucs_rcache_destroy, rcache);

    if (fn != NULL) {
        fn(rcache);
    }
}

/* --- the exported entry points ------------------------------------------ */

/*
 * Each asks which ABI the running release speaks (rcache_stock_abi.c;
 * decided at the first call).  UCX 1.13: the cache's own function, which
 * also hands another library's cache on (UCS_RCACHE_FOREIGN).  Otherwise
 * (a release whose cache UCX's libucs must serve, or one not known): the
 * next definition, with the arguments as they came.
 *
 * get's arguments differ: 1.13 passes six (rcache, address, length, prot,
 * arg, region_p: all in registers on x86-64 SysV), 1.17 and newer seven
 * (an alignment after length; region_p, the seventh, on the stack).  The
 * function takes seven words: in the 1.13 path the seventh is never used;
 * when handed on it is passed as read.  A seventh word that a 1.13 caller
 * did not pass is the word above the return address in the caller's frame:
 * mapped memory, read but never used as a pointer here.
 */

ucs_status_t ucs_rcache_create(const void *params, const char *name,
                               void *stats, ucs_rcache_t **rcache_p)
{
    ucs_rcache_stock_create_f fn;

    if (ucs_rcache_stock_abi() == UCS_RCACHE_STOCK_ABI_113) {
        return ucs_rcache_stock_own_create(params, name, stats, rcache_p);
    }
    fn = UCS_RCACHE_STOCK_NEXT(ucs_rcache_stock_create_f, ucs_rcache_create,
                               NULL);
    return (fn != NULL) ? fn(params, name, stats, rcache_p)
                        : UCS_ERR_UNSUPPORTED;
}

void ucs_rcache_destroy(ucs_rcache_t *rcache)
{
    if (ucs_rcache_stock_abi() == UCS_RCACHE_STOCK_ABI_113) {
        ucs_rcache_stock_own_destroy(rcache);
        return;
    }
    ucs_rcache_stock_next_destroy(rcache);
}

static UCS_F_NOINLINE ucs_status_t ucs_rcache_stock_get_aside(
    ucs_rcache_t *rcache, void *address, size_t length, uintptr_t a4,
    uintptr_t a5, uintptr_t a6, uintptr_t a7)
{
    ucs_rcache_stock_get7_f fn;

    if (ucs_rcache_stock_abi() == UCS_RCACHE_STOCK_ABI_113) {
        return ucs_rcache_stock_own_get(rcache, address, length, (int)a4,
                                        (void *)a5, (ucs_rcache_region_t **)a6);
    }
    fn = UCS_RCACHE_STOCK_NEXT(ucs_rcache_stock_get7_f, ucs_rcache_get, rcache);
    return (fn != NULL) ? fn(rcache, address, length, a4, a5, a6, a7)
                        : UCS_ERR_UNSUPPORTED;
}

UCS_F_HOT ucs_status_t ucs_rcache_get(ucs_rcache_t *rcache, void *address,
                                      size_t length, uintptr_t a4, uintptr_t a5,
                                      uintptr_t a6, uintptr_t a7)
{
    if (ucs_likely(ucs_rcache_stock_abi_mode == UCS_RCACHE_STOCK_ABI_113)) {
        return ucs_rcache_stock_own_get(rcache, address, length, (int)a4,
                                        (void *)a5, (ucs_rcache_region_t **)a6);
    }
    return ucs_rcache_stock_get_aside(rcache, address, length, a4, a5, a6, a7);
}

void ucs_rcache_region_hold(ucs_rcache_t *rcache, ucs_rcache_region_t *region)
{
    if (ucs_rcache_stock_abi() == UCS_RCACHE_STOCK_ABI_113) {
        ucs_rcache_stock_own_hold(rcache, region);
        return;
    }
    ucs_rcache_stock_next_hold(rcache, region);
}

static UCS_F_NOINLINE void
ucs_rcache_stock_put_aside(ucs_rcache_t *rcache, ucs_rcache_region_t *region)
{
    if (ucs_rcache_stock_abi() == UCS_RCACHE_STOCK_ABI_113) {
        ucs_rcache_stock_own_put(rcache, region);
        return;
    }
    ucs_rcache_stock_next_put(rcache, region);
}

UCS_F_HOT void ucs_rcache_region_put(ucs_rcache_t *rcache,
                                     ucs_rcache_region_t *region)
{
    if (ucs_likely(ucs_rcache_stock_abi_mode == UCS_RCACHE_STOCK_ABI_113)) {
        ucs_rcache_stock_own_put(rcache, region);
        return;
    }
    ucs_rcache_stock_put_aside(rcache, region);
}

void ucs_rcache_region_invalidate(ucs_rcache_t *rcache,
                                  ucs_rcache_region_t *region,
                                  ucs_rcache_invalidate_comp_func_t cb,
                                  void *arg)
{
    if (ucs_rcache_stock_abi() == UCS_RCACHE_STOCK_ABI_113) {
        ucs_rcache_stock_own_invalidate(rcache, region, cb, arg);
        return;
    }
    ucs_rcache_stock_next_invalidate(rcache, region, cb, arg);
}

/* --- UCM_RCACHE_STATS ----------------------------------------------------- */

/* Caches reported at exit; later ones are counted, not reported. */
#define UCS_RCACHE_STOCK_REPORTED 64

typedef struct ucs_rcache_stock_entry {
    ucs_rcache_t *rcache; /* NULL once destroyed: stats then final */
    char name[64];
    ucs_rcache_stats_t stats;
} ucs_rcache_stock_entry_t;

static pthread_mutex_t ucs_rcache_stock_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t ucs_rcache_stock_once  = PTHREAD_ONCE_INIT;
static int ucs_rcache_stock_wanted;
static unsigned ucs_rcache_stock_count; /* entries used */
static unsigned long ucs_rcache_stock_untracked;
static ucs_rcache_stock_entry_t
    ucs_rcache_stock_entries[UCS_RCACHE_STOCK_REPORTED];

static const ucs_config_field_t ucs_rcache_stock_stats_field[] = {
    {"UCM_RCACHE_STATS", "no",
     "Print every registration cache's statistics at exit", 0,
     UCS_CONFIG_TYPE_BOOL, NULL},
    {NULL, NULL, NULL, 0, UCS_CONFIG_TYPE_BOOL, NULL}};

static void ucs_rcache_stock_stats_error(const char *var, const char *value,
                                         const char *accepted, void *arg)
{
    ucs_rcache_error("%s: invalid value '%s' (accepted: %s); no statistics",
                     var, value, accepted);
}

static void ucs_rcache_stock_print_one(const char *name, const char *state,
                                       const ucs_rcache_stats_t *s)
{
    fprintf(stderr,
            "[ucm_rcache] pid %d: rcache '%s' (%s): gets %lu hits %lu "
            "(fast %lu) misses %lu regs %lu deregs %lu regions %lu "
            "(%lu bytes) invalidations %lu unmap_invalidations %lu "
            "evictions %lu merges %lu reg_failures %lu\n",
            (int)getpid(), name, state, s->gets, s->hits_fast + s->hits_slow,
            s->hits_fast, s->misses, s->regs, s->deregs, s->regions,
            s->total_size, s->invalidations, s->unmap_invalidations,
            s->evictions, s->merges, s->reg_failures);
}

static void ucs_rcache_stock_print_all(void)
{
    ucs_rcache_stock_entry_t *entry;
    ucs_rcache_stats_t stats;
    ucm_uffd_info_t info;
    unsigned i;

    pthread_mutex_lock(&ucs_rcache_stock_lock);
    for (i = 0; i < ucs_rcache_stock_count; ++i) {
        entry = &ucs_rcache_stock_entries[i];
        if (entry->rcache == NULL) {
            ucs_rcache_stock_print_one(entry->name, "destroyed", &entry->stats);
        } else if (ucs_rcache_query_stats(entry->rcache, &stats) == UCS_OK) {
            ucs_rcache_stock_print_one(entry->name, "live", &stats);
        }
    }
    if (ucs_rcache_stock_untracked != 0) {
        fprintf(stderr,
                "[ucm_rcache] pid %d: %lu more cache(s) not "
                "reported\n",
                (int)getpid(), ucs_rcache_stock_untracked);
    }
    pthread_mutex_unlock(&ucs_rcache_stock_lock);

    memset(&info, 0, sizeof(info));
    ucm_uffd_query(&info);
    fprintf(stderr,
            "[ucm_rcache] pid %d: userfaultfd %s (%s): %lu unmap reports, "
            "%lu spans, %lu registers, %lu refused\n",
            (int)getpid(), info.active ? "active" : "off", info.reason,
            info.events, info.spans, info.registers,
            info.unsupported + info.busy);
}

static void ucs_rcache_stock_init(void)
{
    int wanted = 0;

    if (ucs_config_parse_env("", ucs_rcache_stock_stats_field, &wanted,
                             ucs_rcache_stock_stats_error, NULL) != UCS_OK) {
        wanted = 0;
    }
    ucs_rcache_stock_wanted = wanted;
    if (wanted) {
        atexit(ucs_rcache_stock_print_all);
    }
}

void ucs_rcache_stock_created(ucs_rcache_t *rcache)
{
    ucs_rcache_stock_entry_t *entry;

    pthread_once(&ucs_rcache_stock_once, ucs_rcache_stock_init);
    if (!ucs_rcache_stock_wanted) {
        return;
    }
    pthread_mutex_lock(&ucs_rcache_stock_lock);
    if (ucs_rcache_stock_count < UCS_RCACHE_STOCK_REPORTED) {
        entry         = &ucs_rcache_stock_entries[ucs_rcache_stock_count++];
        entry->rcache = rcache;
        snprintf(entry->name, sizeof(entry->name), "%s", rcache->name);
    } else {
        ++ucs_rcache_stock_untracked;
    }
    pthread_mutex_unlock(&ucs_rcache_stock_lock);
}

void ucs_rcache_stock_destroying(ucs_rcache_t *rcache)
{
    unsigned i;

    if (!ucs_rcache_stock_wanted) {
        return;
    }
    pthread_mutex_lock(&ucs_rcache_stock_lock);
    for (i = 0; i < ucs_rcache_stock_count; ++i) {
        if (ucs_rcache_stock_entries[i].rcache == rcache) {
            ucs_rcache_query_stats(rcache, &ucs_rcache_stock_entries[i].stats);
            ucs_rcache_stock_entries[i].rcache = NULL;
        }
    }
    pthread_mutex_unlock(&ucs_rcache_stock_lock);
}
