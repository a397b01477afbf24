/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Heap events in reloc mode: the malloc-family wrappers; see ucm_heap.h.
 */
#include "config.h"

#include "ucm_heap.h"
#include "ucm_heap_glibc.h"

#include <common/ucs_env.h>
#include <ucm/mmap/ucm_mmap.h>
#include <ucm/util/ucm_degrade.h>
#include <ucm/util/ucm_log.h>
#include <ucm/util/ucm_opts.h>
#include <ucm/util/ucm_procmaps.h>
#include <ucm/util/ucm_sys.h>

#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <gnu/libc-version.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_VALGRIND_VALGRIND_H
#include <valgrind/valgrind.h>
#else
#define RUNNING_ON_VALGRIND 0
#endif

#define UCM_HEAP_SLOTS            64
#define UCM_HEAP_SLOT_MASK        (UCM_HEAP_MAX_SIZE - 1)
#define UCM_HEAP_VM_EVENTS        (UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED)
#define UCM_HEAP_ORIG(_id, _type) UCM_HOOK_ORIG(_id, _type)

typedef void *(*ucm_heap_malloc_func_t)(size_t);
typedef void *(*ucm_heap_calloc_func_t)(size_t, size_t);
typedef void *(*ucm_heap_realloc_func_t)(void *, size_t);
typedef void *(*ucm_heap_reallocarray_func_t)(void *, size_t, size_t);
typedef void (*ucm_heap_free_func_t)(void *);
typedef void *(*ucm_heap_memalign_func_t)(size_t, size_t);
typedef int (*ucm_heap_posix_memalign_func_t)(void **, size_t, size_t);
typedef int (*ucm_heap_malloc_trim_func_t)(size_t);
typedef int (*ucm_heap_mallopt_func_t)(int, int);

/* mallopt() parameters (malloc.h) that the trim prediction follows. */
#define UCM_HEAP_M_TRIM_THRESHOLD -1
#define UCM_HEAP_M_TOP_PAD        -2
#define UCM_HEAP_M_MMAP_THRESHOLD -3
#define UCM_HEAP_M_MMAP_MAX       -4

/* libc's program break (exported by glibc for this purpose since 2.2.5). */
extern void *__curbrk;

/* The break as last reported (0: nothing reported yet). */
static uintptr_t ucm_heap_brk_known;
/* The start of the main heap (reported unmapped whole by malloc_trim). */
static uintptr_t ucm_heap_brk_start;
/* Last reported size of each arena heap seen: heap address | size in pages
 * (heaps are 64 MiB aligned and at most 64 MiB long). */
static uintptr_t ucm_heap_slots[UCM_HEAP_SLOTS];
/* The arena heaps can be read (glibc's layout is the known one). */
static int ucm_heap_arenas_ok;
/* glibc's trim parameters, mirrored: mallopt() and the tunables set them and
 * stop the dynamic thresholds, which free() of an mmap'ed chunk raises. */
static size_t ucm_heap_trim_thresh = UCM_HEAP_DEFAULT_THRESH;
static size_t ucm_heap_mmap_thresh = UCM_HEAP_DEFAULT_THRESH;
static size_t ucm_heap_top_pad     = UCM_HEAP_DEFAULT_TOP_PAD;
static int ucm_heap_no_dyn_thresh;
/* ucm_malloc_state_reset() set the thresholds with mallopt(), which ends
 * glibc's dynamic thresholds: the free wrapper raises them as glibc would
 * (while UCX_MEM_DYNAMIC_MMAP_THRESH is yes), until the program calls
 * mallopt() itself. */
static int ucm_heap_dyn_taken_over;

static inline int ucm_heap_listened(void)
{
    return ucm_hot.event_list->events & UCM_HEAP_VM_EVENTS;
}

static void ucm_heap_report(ucm_event_type_t type, uintptr_t start,
                            uintptr_t end)
{
    ucm_event_list_t *list;
    int saved_errno;

    if (end <= start) {
        return;
    }
    list = ucm_hook_enter(type);
    if (list != NULL) {
        saved_errno = errno; /* a handler may change it */
        ucm_hook_vm(list, type, (void *)start, end - start);
        ucm_rcu_read_unlock();
        errno = saved_errno;
    }
}

/* ---- the main heap: the program break ---- */

static void ucm_heap_brk_sync(void)
{
    uintptr_t cur = (uintptr_t)__curbrk;
    uintptr_t old = __atomic_load_n(&ucm_heap_brk_known, __ATOMIC_RELAXED);

    if (ucs_likely(cur == old) || (cur == 0)) {
        return;
    }
    old = __atomic_exchange_n(&ucm_heap_brk_known, cur, __ATOMIC_ACQ_REL);
    if (old == 0) {
        /* the first break of the process: the main heap starts here */
        old = 0;
        __atomic_compare_exchange_n(&ucm_heap_brk_start, &old, cur, 0,
                                    __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
        return;
    }
    if (old == cur) {
        return;
    }
    if (cur > old) {
        ucm_heap_report(UCM_EVENT_VM_MAPPED, old, cur);
    } else {
        ucm_heap_report(UCM_EVENT_VM_UNMAPPED, cur, old);
    }
}

void ucm_heap_brk_reported(void)
{
    uintptr_t cur = (uintptr_t)__curbrk;

    if ((cur != 0) &&
        (__atomic_load_n(&ucm_heap_brk_known, __ATOMIC_RELAXED) != 0)) {
        __atomic_store_n(&ucm_heap_brk_known, cur, __ATOMIC_RELEASE);
    }
}

/* ---- the heaps of the other arenas ---- */

static uintptr_t *ucm_heap_slot(uintptr_t heap)
{
    return &ucm_heap_slots[(heap / UCM_HEAP_MAX_SIZE) % UCM_HEAP_SLOTS];
}

/* Report the change of 'heap' since its last report; 'heap' must be mapped. */
static void ucm_heap_arena_sync(volatile ucm_heap_info_t *heap)
{
    uintptr_t base = (uintptr_t)heap, *slot = ucm_heap_slot(base);
    size_t page = ucm_sys_page_size();
    size_t size = heap->size, old_size;
    uintptr_t value, old;

    if ((size > UCM_HEAP_MAX_SIZE) || (size & (page - 1))) {
        return; /* not a heap header after all: nothing to say */
    }
    value = base | (size / page);
    old   = __atomic_load_n(slot, __ATOMIC_RELAXED);
    if (ucs_likely(old == value)) {
        return;
    }
    old = __atomic_exchange_n(slot, value, __ATOMIC_ACQ_REL);
    if ((old & ~UCM_HEAP_SLOT_MASK) != base) {
        /* first sight of this heap (or it shares the slot with another) */
        ucm_heap_report(UCM_EVENT_VM_MAPPED, base, base + size);
        return;
    }
    old_size = (old & UCM_HEAP_SLOT_MASK) * page;
    if (size > old_size) {
        ucm_heap_report(UCM_EVENT_VM_MAPPED, base + old_size, base + size);
    } else {
        ucm_heap_report(UCM_EVENT_VM_UNMAPPED, base + size, base + old_size);
    }
}

static void ucm_heap_arena_removed(uintptr_t base, size_t size)
{
    uintptr_t *slot = ucm_heap_slot(base);
    uintptr_t old   = __atomic_load_n(slot, __ATOMIC_RELAXED);

    if ((old & ~UCM_HEAP_SLOT_MASK) == base) {
        __atomic_compare_exchange_n(slot, &old, 0, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_RELAXED);
    }
    ucm_heap_report(UCM_EVENT_VM_UNMAPPED, base, base + size);
}

/* ---- one call: what to look at before and after it ---- */

typedef struct {
    volatile ucm_heap_info_t *heap; /* arena heap that the release may shrink */
    size_t heap_size;               /* its size before the call */
    int heap_first;                 /* the arena's first heap (never removed) */
} ucm_heap_release_t;

void ucm_heap_param_note(int param, size_t value)
{
    switch (param) {
    case UCM_HEAP_M_TRIM_THRESHOLD: ucm_heap_trim_thresh = value; break;
    case UCM_HEAP_M_TOP_PAD: ucm_heap_top_pad = value; break;
    case UCM_HEAP_M_MMAP_THRESHOLD: ucm_heap_mmap_thresh = value; break;
    case UCM_HEAP_M_MMAP_MAX: break;
    default: return;
    }
    ucm_heap_no_dyn_thresh = 1;
}

size_t ucm_heap_param_get(int param)
{
    switch (param) {
    case UCM_HEAP_M_TRIM_THRESHOLD: return ucm_heap_trim_thresh;
    case UCM_HEAP_M_TOP_PAD: return ucm_heap_top_pad;
    case UCM_HEAP_M_MMAP_THRESHOLD: return ucm_heap_mmap_thresh;
    default: return 0;
    }
}

/* glibc raises its thresholds when an mmap'ed chunk is freed (unless told
 * not to): mirror it, so that the trim prediction stays exact. */
static void ucm_heap_mmapped_freed(size_t chunk_size)
{
    if ((chunk_size <= ucm_heap_mmap_thresh) ||
        (chunk_size > UCM_HEAP_MMAP_THRESH_MAX)) {
        return;
    }
    if (!ucm_heap_no_dyn_thresh) {
        ucm_heap_mmap_thresh = chunk_size; /* glibc does it too */
        ucm_heap_trim_thresh = 2 * chunk_size;
    } else if (ucm_heap_dyn_taken_over &&
               ucm_opts_get(UCM_OPTS_DYNAMIC_MMAP_THRESH)) {
        /* libucm's mallopt() ended glibc's dynamic thresholds: do what
         * glibc would have done */
        ucm_heap_mmap_thresh = chunk_size;
        ucm_heap_trim_thresh = 2 * chunk_size;
        UCM_HEAP_ORIG(UCM_HOOK_MALLOPT, ucm_heap_mallopt_func_t)
        (UCM_HEAP_M_MMAP_THRESHOLD, (int)chunk_size);
        UCM_HEAP_ORIG(UCM_HOOK_MALLOPT, ucm_heap_mallopt_func_t)
        (UCM_HEAP_M_TRIM_THRESHOLD, (int)(2 * chunk_size));
    }
}

void ucm_heap_dyn_thresh_take_over(void)
{
    ucm_heap_dyn_taken_over = 1;
}

/* A release of the chunk of 'mem' trims its heap when the chunk borders the
 * top chunk (the free end of the heap, which ends at heap_end) and the top
 * chunk it then forms is big enough.  The pages go inside glibc, so they are
 * reported before the call: the whole free end, from the chunk (or the free
 * chunk before it) to heap_end.  A heap other than its arena's first
 * (heap_first_chunk != 0) is removed whole once all of it is free.  Other
 * trims (a top chunk grown by fast chunks that the release consolidates) are
 * reported right after the call. */
static void ucm_heap_trim_predict(const void *mem, size_t field,
                                  uintptr_t heap_end,
                                  uintptr_t heap_first_chunk)
{
    uintptr_t start = ucm_heap_chunk(mem);
    uintptr_t next  = start + ucm_heap_chunk_size(field);
    size_t top;

    if ((next + UCM_HEAP_MIN_CHUNK > heap_end) ||
        (next + ucm_heap_chunk_size(ucm_heap_field_at(next)) != heap_end)) {
        return; /* the next chunk is not the top chunk */
    }
    if (!(field & UCM_HEAP_PREV_INUSE)) {
        start -= ucm_heap_prev_size(mem); /* merges with the free chunk */
    }
    top = heap_end - start;
    if ((top >= UCM_HEAP_CONSOLIDATE_MIN) &&
        ((start <= heap_first_chunk) ||
         ((top >= ucm_heap_trim_thresh) &&
          (top - UCM_HEAP_MIN_CHUNK - 1 >=
           ucm_heap_top_pad + ucm_sys_page_size())))) {
        ucm_heap_report(UCM_EVENT_VM_UNMAPPED, start, heap_end);
    }
}

/* Before a release of 'mem' (free, or realloc that may move or shrink it). */
static void ucm_heap_release_begin(void *mem, ucm_heap_release_t *rel)
{
    size_t field = ucm_heap_chunk_field(mem);
    volatile ucm_heap_info_t *heap;
    uintptr_t start;
    size_t len;

    rel->heap = NULL;
    if (field & UCM_HEAP_IS_MMAPPED) {
        ucm_heap_mmapped_range(mem, field, &start, &len);
        ucm_heap_report(UCM_EVENT_VM_UNMAPPED, start, start + len);
        ucm_heap_mmapped_freed(ucm_heap_chunk_size(field));
    } else if (field & UCM_HEAP_NON_MAIN_ARENA) {
        heap = ucm_heap_of(ucm_heap_chunk(mem));
        if (ucm_heap_arenas_ok && (ucm_heap_top_of(heap) == heap)) {
            rel->heap       = heap;
            rel->heap_size  = heap->size;
            rel->heap_first = (heap->prev == NULL);
            start = rel->heap_first ? 0 : (uintptr_t)heap + UCM_HEAP_INFO_SIZE;
            ucm_heap_trim_predict(mem, field, (uintptr_t)heap + rel->heap_size,
                                  start);
        }
    } else if (ucm_heap_chunk_size(field) > UCM_HEAP_FAST_MAX) {
        ucm_heap_trim_predict(mem, field, (uintptr_t)__curbrk, 0);
    }
}

static void ucm_heap_release_end(ucm_heap_release_t *rel)
{
    volatile ucm_heap_info_t *heap = rel->heap;

    ucm_heap_brk_sync();
    if (heap == NULL) {
        return;
    }
    /* a heap that is not its arena's first is unmapped whole once it is all
     * free; then the arena's top chunk has moved to another heap */
    if (!rel->heap_first && (ucm_heap_top_of(heap) != heap)) {
        ucm_heap_arena_removed((uintptr_t)heap, rel->heap_size);
    } else {
        ucm_heap_arena_sync(heap);
    }
}

/* After a call that returned the block 'mem' (not NULL). */
static void ucm_heap_alloc_end(void *mem)
{
    size_t field = ucm_heap_chunk_field(mem);
    uintptr_t start;
    size_t len;

    ucm_heap_brk_sync();
    if (field & UCM_HEAP_IS_MMAPPED) {
        ucm_heap_mmapped_range(mem, field, &start, &len);
        ucm_heap_report(UCM_EVENT_VM_MAPPED, start, start + len);
    } else if ((field & UCM_HEAP_NON_MAIN_ARENA) && ucm_heap_arenas_ok) {
        ucm_heap_arena_sync(ucm_heap_of(ucm_heap_chunk(mem)));
    }
}

/* ---- the wrappers ---- */

static void *ucm_heap_alloc_done(void *mem)
{
    if (mem != NULL) {
        ucm_heap_alloc_end(mem);
    } else {
        ucm_heap_brk_sync();
    }
    return mem;
}

void *ucm_heap_malloc(size_t size)
{
    void *mem = UCM_HEAP_ORIG(UCM_HOOK_MALLOC, ucm_heap_malloc_func_t)(size);

    if (!ucm_heap_listened()) {
        return mem;
    }
    return ucm_heap_alloc_done(mem);
}

void *ucm_heap_calloc(size_t nmemb, size_t size)
{
    void *mem =
        UCM_HEAP_ORIG(UCM_HOOK_CALLOC, ucm_heap_calloc_func_t)(nmemb, size);

    if (!ucm_heap_listened()) {
        return mem;
    }
    return ucm_heap_alloc_done(mem);
}

void *ucm_heap_memalign(size_t alignment, size_t size)
{
    void *mem = UCM_HEAP_ORIG(UCM_HOOK_MEMALIGN,
                              ucm_heap_memalign_func_t)(alignment, size);

    if (!ucm_heap_listened()) {
        return mem;
    }
    return ucm_heap_alloc_done(mem);
}

void *ucm_heap_aligned_alloc(size_t alignment, size_t size)
{
    void *mem = UCM_HEAP_ORIG(UCM_HOOK_ALIGNED_ALLOC,
                              ucm_heap_memalign_func_t)(alignment, size);

    if (!ucm_heap_listened()) {
        return mem;
    }
    return ucm_heap_alloc_done(mem);
}

void *ucm_heap_valloc(size_t size)
{
    void *mem = UCM_HEAP_ORIG(UCM_HOOK_VALLOC, ucm_heap_malloc_func_t)(size);

    if (!ucm_heap_listened()) {
        return mem;
    }
    return ucm_heap_alloc_done(mem);
}

void *ucm_heap_pvalloc(size_t size)
{
    void *mem = UCM_HEAP_ORIG(UCM_HOOK_PVALLOC, ucm_heap_malloc_func_t)(size);

    if (!ucm_heap_listened()) {
        return mem;
    }
    return ucm_heap_alloc_done(mem);
}

int ucm_heap_posix_memalign(void **memptr, size_t alignment, size_t size)
{
    int ret =
        UCM_HEAP_ORIG(UCM_HOOK_POSIX_MEMALIGN,
                      ucm_heap_posix_memalign_func_t)(memptr, alignment, size);

    if (ucm_heap_listened()) {
        ucm_heap_alloc_done((ret == 0) ? *memptr : NULL);
    }
    return ret;
}

void ucm_heap_free(void *mem)
{
    ucm_heap_release_t rel;
    size_t field;

    if ((mem == NULL) || !ucm_heap_listened()) {
        UCM_HEAP_ORIG(UCM_HOOK_FREE, ucm_heap_free_func_t)(mem);
        return;
    }
    /* a fast-bin chunk goes to a bin (tcache or fast): nothing moves */
    field = ucm_heap_chunk_field(mem);
    if (!(field & UCM_HEAP_IS_MMAPPED) &&
        (ucm_heap_chunk_size(field) <= UCM_HEAP_FAST_MAX)) {
        UCM_HEAP_ORIG(UCM_HOOK_FREE, ucm_heap_free_func_t)(mem);
        return;
    }
    ucm_heap_release_begin(mem, &rel);
    UCM_HEAP_ORIG(UCM_HOOK_FREE, ucm_heap_free_func_t)(mem);
    ucm_heap_release_end(&rel);
}

/* realloc and reallocarray ('id' says which). */
static void *ucm_heap_realloc_common(void *mem, int id, size_t nmemb,
                                     size_t size)
{
    ucm_heap_release_t rel;
    void *result;

    if (!ucm_heap_listened()) {
        goto out_call;
    }
    if (mem == NULL) {
        result = (id == UCM_HOOK_REALLOC)
                     ? UCM_HEAP_ORIG(id, ucm_heap_realloc_func_t)(mem, size)
                     : UCM_HEAP_ORIG(id, ucm_heap_reallocarray_func_t)(
                           mem, nmemb, size);
        return ucm_heap_alloc_done(result);
    }
    ucm_heap_release_begin(mem, &rel);
    result =
        (id == UCM_HOOK_REALLOC)
            ? UCM_HEAP_ORIG(id, ucm_heap_realloc_func_t)(mem, size)
            : UCM_HEAP_ORIG(id, ucm_heap_reallocarray_func_t)(mem, nmemb, size);
    ucm_heap_release_end(&rel);
    if (result != NULL) {
        ucm_heap_alloc_end(result);
    }
    return result;

out_call:
    return (id == UCM_HOOK_REALLOC)
               ? UCM_HEAP_ORIG(id, ucm_heap_realloc_func_t)(mem, size)
               : UCM_HEAP_ORIG(id, ucm_heap_reallocarray_func_t)(mem, nmemb,
                                                                 size);
}

void *ucm_heap_realloc(void *mem, size_t size)
{
    return ucm_heap_realloc_common(mem, UCM_HOOK_REALLOC, 1, size);
}

void *ucm_heap_reallocarray(void *mem, size_t nmemb, size_t size)
{
    return ucm_heap_realloc_common(mem, UCM_HOOK_REALLOCARRAY, nmemb, size);
}

int ucm_heap_malloc_trim(size_t pad)
{
    uintptr_t value, brk;
    unsigned i;
    int ret;

    if (!ucm_heap_listened()) {
        return UCM_HEAP_ORIG(UCM_HOOK_MALLOC_TRIM,
                             ucm_heap_malloc_trim_func_t)(pad);
    }
    /* it discards the free pages anywhere in every heap, which only glibc
     * knows: every heap range is reported (blocks in use there lose their
     * registrations too: a cost, not an error).  An arena heap is reported
     * up to its maximum size: it may grow before the trim runs. */
    ucm_heap_brk_sync();
    brk = (uintptr_t)__curbrk;
    if (ucm_heap_brk_start != 0) {
        ucm_heap_report(UCM_EVENT_VM_UNMAPPED, ucm_heap_brk_start, brk);
    }
    for (i = 0; ucm_heap_arenas_ok && (i < UCM_HEAP_SLOTS); ++i) {
        value = __atomic_load_n(&ucm_heap_slots[i], __ATOMIC_ACQUIRE);
        if (value != 0) {
            value &= ~UCM_HEAP_SLOT_MASK;
            ucm_heap_report(UCM_EVENT_VM_UNMAPPED, value,
                            value + UCM_HEAP_MAX_SIZE);
        }
    }
    ret = UCM_HEAP_ORIG(UCM_HOOK_MALLOC_TRIM, ucm_heap_malloc_trim_func_t)(pad);
    /* the main heap grown by another thread meanwhile: reported now (late,
     * but its stale registrations do not survive) */
    ucm_heap_brk_sync();
    if ((ucm_heap_brk_start != 0) && ((uintptr_t)__curbrk > brk)) {
        ucm_heap_report(UCM_EVENT_VM_UNMAPPED, brk, (uintptr_t)__curbrk);
    }
    return ret;
}

int ucm_heap_mallopt(int param, int value)
{
    int ret =
        UCM_HEAP_ORIG(UCM_HOOK_MALLOPT, ucm_heap_mallopt_func_t)(param, value);

    if (ret == 1) {
        ucm_heap_param_note(param, (value < 0) ? 0 : (size_t)value);
        ucm_heap_dyn_taken_over = 0; /* the program's choice from now on */
    }
    return ret;
}

/* ---- set-up ---- */

/* glibc's malloc keeps the usable size of a heap block in the chunk header
 * in front of it: a block from another allocator, or from one that replaces
 * glibc's functions without their symbols (valgrind), does not match. */
static int ucm_heap_layout_matches(void)
{
    void *mem = malloc(100);
    size_t field;
    int ok;

    if (mem == NULL) {
        return 0;
    }
    __asm__("" : "+r"(mem)); /* the header is outside what malloc() gave */
    field = ucm_heap_chunk_field(mem);
    ok    = !(field & UCM_HEAP_IS_MMAPPED) &&
         (ucm_heap_chunk_size(field) ==
          malloc_usable_size(mem) + sizeof(size_t));
    free(mem);
    return ok;
}

/* dl_iterate_phdr callback: a valgrind tool's own preload (memcheck,
 * helgrind, drd, massif, dhat: the tools that replace malloc) is loaded;
 * callgrind, cachegrind and none load only vgpreload_core. */
static int ucm_heap_find_vg_preload(struct dl_phdr_info *info, size_t size,
                                    void *arg)
{
    const char *name = (info->dlpi_name != NULL) ? info->dlpi_name : "";
    const char *base = strrchr(name, '/');

    (void)size;
    (void)arg;
    base = (base != NULL) ? base + 1 : name;
    return !strncmp(base, "vgpreload_", 10) &&
           strncmp(base, "vgpreload_core", 14);
}

int ucm_heap_is_glibc_malloc(void)
{
    void *resolved = dlsym(RTLD_DEFAULT, "malloc");
    const char *base;
    Dl_info info;

    /* a malloc-replacing tool redirects glibc's names to its own malloc */
    if (RUNNING_ON_VALGRIND &&
        dl_iterate_phdr(ucm_heap_find_vg_preload, NULL)) {
        return 0;
    }
    if ((resolved == NULL) || !dladdr(resolved, &info) ||
        (info.dli_fname == NULL)) {
        return 0;
    }
    base = strrchr(info.dli_fname, '/');
    base = (base != NULL) ? base + 1 : info.dli_fname;
    if (strncmp(base, "libc.so", 7)) {
        return 0;
    }
    if (!ucm_heap_layout_matches()) {
        ucm_degrade_report(UCM_DEGRADE_HEAP, 0,
                           "heap memory that glibc's malloc returns is not "
                           "caught in reloc mode: glibc %s, malloc's chunk "
                           "header is not the known layout",
                           gnu_get_libc_version());
        return 0;
    }
    return 1;
}

typedef struct {
    uintptr_t start;
} ucm_heap_maps_ctx_t;

static int ucm_heap_maps_cb(void *arg, const ucm_procmaps_entry_t *entry)
{
    ucm_heap_maps_ctx_t *ctx = arg;

    if (!strcmp(entry->path, "[heap]")) {
        ctx->start = entry->start;
        return 1;
    }
    return 0;
}

/* The arena heaps are 64 MiB apart unless glibc.malloc.hugetlb asks for
 * explicit huge pages (then heaps are four huge pages long). */
static int ucm_heap_arena_layout_known(void)
{
    const char *tunables = ucs_env_get("GLIBC_TUNABLES");
    const char *hugetlb;
    unsigned major, minor;

    if ((sscanf(gnu_get_libc_version(), "%u.%u", &major, &minor) != 2) ||
        (major != 2) || (minor < 27)) {
        ucm_degrade_report(UCM_DEGRADE_HEAP, 0,
                           "glibc's arena heaps are not caught in reloc "
                           "mode: glibc %s, layout unknown",
                           gnu_get_libc_version());
        return 0;
    }
    hugetlb =
        (tunables != NULL) ? strstr(tunables, "glibc.malloc.hugetlb=") : NULL;
    if ((hugetlb != NULL) && (hugetlb[21] != '0') && (hugetlb[21] != '1')) {
        ucm_diag("glibc.malloc.hugetlb=%c: arena heaps not tracked",
                 hugetlb[21]);
        return 0;
    }
    return 1;
}

/* The tunables and environment variables that set what mallopt() sets. */
void ucm_heap_params_init(void)
{
    static const struct {
        const char *tunable, *env;
        int param;
    } params[] = {
        {"glibc.malloc.trim_threshold=", "MALLOC_TRIM_THRESHOLD_",
         UCM_HEAP_M_TRIM_THRESHOLD},
        {"glibc.malloc.top_pad=", "MALLOC_TOP_PAD_", UCM_HEAP_M_TOP_PAD},
        {"glibc.malloc.mmap_threshold=", "MALLOC_MMAP_THRESHOLD_",
         UCM_HEAP_M_MMAP_THRESHOLD},
        {"glibc.malloc.mmap_max=", "MALLOC_MMAP_MAX_", UCM_HEAP_M_MMAP_MAX}};
    static int done;
    const char *tunables, *value;
    unsigned i;

    if (__atomic_exchange_n(&done, 1, __ATOMIC_ACQ_REL)) {
        return;
    }
    tunables = ucs_env_get("GLIBC_TUNABLES");

    for (i = 0; i < sizeof(params) / sizeof(params[0]); ++i) {
        value = (tunables != NULL) ? strstr(tunables, params[i].tunable) : NULL;
        if (value != NULL) {
            value += strlen(params[i].tunable);
        } else {
            value = ucs_env_get(params[i].env);
        }
        if (value != NULL) {
            ucm_heap_param_note(params[i].param, strtoul(value, NULL, 0));
        }
    }
}

void ucm_heap_init(void)
{
    ucm_heap_maps_ctx_t ctx = {0};
    uintptr_t cur           = (uintptr_t)__curbrk;

    ucm_procmaps_walk(ucm_heap_maps_cb, &ctx);
    ucm_heap_brk_start = (ctx.start != 0) ? ctx.start : cur;
    __atomic_store_n(&ucm_heap_brk_known, cur, __ATOMIC_RELEASE);
    ucm_heap_arenas_ok = ucm_heap_arena_layout_known();
    ucm_heap_params_init();
}
