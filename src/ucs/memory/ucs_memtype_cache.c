/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Memory-type cache (see ucs_memtype_cache.h): a reader/writer-locked set of
 * typed ranges, fed by libucm's memory-type events.
 */
#include "ucs_memtype_cache.h"
#include <ucs/debug/ucs_log.h>
#include "ucs_memtype_ranges.h"

#include <ucm/api/ucm.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

/* After other handlers of the same events (they may look the range up). */
#define UCS_MEMTYPE_CACHE_EVENT_PRIORITY 1000
#define UCS_MEMTYPE_CACHE_EVENTS                                               \
    (UCM_EVENT_MEM_TYPE_ALLOC | UCM_EVENT_MEM_TYPE_FREE)

struct ucs_memtype_cache {
    pthread_rwlock_t lock;
    ucs_memtype_ranges_t ranges;
    unsigned flags;
};

static ucs_memtype_cache_t *ucs_memtype_cache_global_instance;
static pthread_mutex_t ucs_memtype_cache_global_lock =
    PTHREAD_MUTEX_INITIALIZER;

/* Validate a call's range; [*start_p, *end_p) on success. */
static ucs_status_t ucs_memtype_cache_range(const char *func,
                                            ucs_memtype_cache_t *cache,
                                            const void *address, size_t length,
                                            uintptr_t *start_p,
                                            uintptr_t *end_p)
{
    uintptr_t start = (uintptr_t)address;

    if (cache == NULL) {
        ucs_log_error("memtype", "%s: NULL cache", func);
        return UCS_ERR_INVALID_PARAM;
    }
    if (length == 0) {
        ucs_log_error("memtype", "%s: empty range at %p", func, address);
        return UCS_ERR_INVALID_PARAM;
    }
    if (length > (UINTPTR_MAX - start)) {
        ucs_log_error("memtype",
                      "%s: range %p + %zu wraps around the address "
                      "space",
                      func, address, length);
        return UCS_ERR_INVALID_PARAM;
    }

    *start_p = start;
    *end_p   = start + length;
    return UCS_OK;
}

static void ucs_memtype_cache_event(ucm_event_type_t event_type,
                                    ucm_event_t *event, void *arg)
{
    ucs_memtype_cache_t *cache = arg;
    void *address              = event->mem_type.address;
    size_t size                = event->mem_type.size;

    if (size == 0) {
        return; /* zero-byte allocations occupy no range */
    }

    /* failures are logged by update/remove; the range is then unknown */
    if (event_type == UCM_EVENT_MEM_TYPE_ALLOC) {
        (void)ucs_memtype_cache_update(cache, address, size,
                                       event->mem_type.mem_type);
    } else {
        (void)ucs_memtype_cache_remove(cache, address, size);
    }
}

ucs_status_t ucs_memtype_cache_create(unsigned flags,
                                      ucs_memtype_cache_t **cache_p)
{
    ucs_memtype_cache_t *cache;
    ucs_status_t status;

    if ((cache_p == NULL) || (flags & ~UCS_MEMTYPE_CACHE_FLAG_EVENTS)) {
        ucs_log_error("memtype",
                      "create: invalid arguments (flags 0x%x, "
                      "cache_p %p)",
                      flags, (void *)cache_p);
        return UCS_ERR_INVALID_PARAM;
    }

    cache = malloc(sizeof(*cache));
    if (cache == NULL) {
        ucs_log_error("memtype", "create: out of memory");
        return UCS_ERR_NO_MEMORY;
    }

    if (pthread_rwlock_init(&cache->lock, NULL) != 0) {
        ucs_log_error("memtype", "create: cannot initialize the lock");
        status = UCS_ERR_NO_MEMORY;
        goto err_free;
    }
    ucs_memtype_ranges_init(&cache->ranges);
    cache->flags = flags;

    if (flags & UCS_MEMTYPE_CACHE_FLAG_EVENTS) {
        /* with the allocations made before it (libucm_cuda's record) */
        status = ucm_set_event_handler(
            UCS_MEMTYPE_CACHE_EVENTS | UCM_EVENT_FLAG_NO_INSTALL |
                UCM_EVENT_FLAG_EXISTING_ALLOC,
            UCS_MEMTYPE_CACHE_EVENT_PRIORITY, ucs_memtype_cache_event, cache);
        if (status != UCS_OK) {
            ucs_log_error("memtype",
                          "create: memory-type events unavailable: "
                          "%s",
                          ucs_status_string(status));
            goto err_lock;
        }
    }

    *cache_p = cache;
    return UCS_OK;

err_lock:
    pthread_rwlock_destroy(&cache->lock);
err_free:
    free(cache);
    return status;
}

void ucs_memtype_cache_destroy(ucs_memtype_cache_t *cache)
{
    if (cache == NULL) {
        return;
    }

    if (cache->flags & UCS_MEMTYPE_CACHE_FLAG_EVENTS) {
        ucm_unset_event_handler(UCS_MEMTYPE_CACHE_EVENTS,
                                ucs_memtype_cache_event, cache);
    }
    ucs_memtype_ranges_cleanup(&cache->ranges);
    pthread_rwlock_destroy(&cache->lock);
    free(cache);
}

ucs_status_t ucs_memtype_cache_lookup(ucs_memtype_cache_t *cache,
                                      const void *address, size_t length,
                                      ucs_memory_type_t *mem_type_p)
{
    ucs_memory_type_t mem_type;
    uintptr_t start, end;
    ucs_status_t status;

    status =
        ucs_memtype_cache_range("lookup", cache, address, length, &start, &end);
    if (status != UCS_OK) {
        return status;
    }
    if (mem_type_p == NULL) {
        ucs_log_error("memtype", "lookup: NULL mem_type_p");
        return UCS_ERR_INVALID_PARAM;
    }

    pthread_rwlock_rdlock(&cache->lock);
    status = ucs_memtype_ranges_find(&cache->ranges, start, end, &mem_type);
    pthread_rwlock_unlock(&cache->lock);

    if (status == UCS_OK) {
        *mem_type_p = mem_type;
    }
    return status;
}

ucs_status_t ucs_memtype_cache_update(ucs_memtype_cache_t *cache,
                                      const void *address, size_t length,
                                      ucs_memory_type_t mem_type)
{
    uintptr_t start, end;
    ucs_status_t status;

    status =
        ucs_memtype_cache_range("update", cache, address, length, &start, &end);
    if (status != UCS_OK) {
        return status;
    }
    if ((unsigned)mem_type >= UCS_MEMORY_TYPE_LAST) {
        ucs_log_error("memtype", "update: invalid memory type %d for %p + %zu",
                      (int)mem_type, address, length);
        return UCS_ERR_INVALID_PARAM;
    }

    pthread_rwlock_wrlock(&cache->lock);
    status = ucs_memtype_ranges_insert(&cache->ranges, start, end, mem_type);
    pthread_rwlock_unlock(&cache->lock);

    if (status != UCS_OK) {
        ucs_log_error("memtype", "update: %p + %zu left unknown: %s", address,
                      length, ucs_status_string(status));
    }
    return status;
}

ucs_status_t ucs_memtype_cache_remove(ucs_memtype_cache_t *cache,
                                      const void *address, size_t length)
{
    uintptr_t start, end;
    ucs_status_t status;

    status =
        ucs_memtype_cache_range("remove", cache, address, length, &start, &end);
    if (status != UCS_OK) {
        return status;
    }

    pthread_rwlock_wrlock(&cache->lock);
    ucs_memtype_ranges_remove(&cache->ranges, start, end);
    pthread_rwlock_unlock(&cache->lock);
    return UCS_OK;
}

ucs_status_t ucs_memtype_cache_global(ucs_memtype_cache_t **cache_p)
{
    ucs_memtype_cache_t *cache;
    ucs_status_t status;

    if (cache_p == NULL) {
        ucs_log_error("memtype", "global: NULL cache_p");
        return UCS_ERR_INVALID_PARAM;
    }

    cache =
        __atomic_load_n(&ucs_memtype_cache_global_instance, __ATOMIC_ACQUIRE);
    if (cache != NULL) {
        *cache_p = cache;
        return UCS_OK;
    }

    pthread_mutex_lock(&ucs_memtype_cache_global_lock);
    cache  = ucs_memtype_cache_global_instance;
    status = UCS_OK;
    if (cache == NULL) {
        status =
            ucs_memtype_cache_create(UCS_MEMTYPE_CACHE_FLAG_EVENTS, &cache);
        if (status == UCS_OK) {
            __atomic_store_n(&ucs_memtype_cache_global_instance, cache,
                             __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&ucs_memtype_cache_global_lock);

    if (status == UCS_OK) {
        *cache_p = cache;
    }
    return status;
}

void ucs_memtype_cache_global_cleanup(void)
{
    ucs_memtype_cache_t *cache;

    pthread_mutex_lock(&ucs_memtype_cache_global_lock);
    cache = ucs_memtype_cache_global_instance;
    __atomic_store_n(&ucs_memtype_cache_global_instance, NULL,
                     __ATOMIC_RELEASE);
    pthread_mutex_unlock(&ucs_memtype_cache_global_lock);

    ucs_memtype_cache_destroy(cache);
}
