/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Lookups in the table of file mappings, and its rebuilds from
 * /proc/self/maps; see ucm_filemap.h for the contract and
 * docs/internals-filemap.md for the design and its measurements.
 */
#include "ucm_filemap_int.h"

#include <ucm/util/ucm_degrade.h>
#include <ucm/util/ucm_dl.h>
#include <ucm/util/ucm_log.h>
#include <ucm/util/ucm_procmaps.h>
#include <ucm/util/ucm_sys.h>

#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <string.h>
#include <sys/sysmacros.h>

/* Scans of the table before a lookup walks /proc/self/maps instead. */
#define UCM_FILEMAP_SCAN_TRIES 4
/* Ranges merged before they are passed on. */
#define UCM_FILEMAP_BATCH 32
/* Lookups that skip the rebuild after one found the table too small (and
 * the compaction after one that could not compact). */
#define UCM_FILEMAP_FULL_BACKOFF 256

typedef struct {
    ucm_filemap_cb_t cb;
    void *arg;
    int rebuilt;               /* this lookup rebuilt the table already */
    ucm_filemap_range_t *file; /* what was looked up, if one file; or NULL */
    unsigned files;            /* distinct files looked up: 0, 1, 2 (more) */
    unsigned count;
    struct {
        uintptr_t start, end;
    } r[UCM_FILEMAP_BATCH];
} ucm_filemap_batch_t;

static unsigned ucm_filemap_full_backoff;
static unsigned ucm_filemap_compact_backoff;
static unsigned long long ucm_filemap_dl_seen[2]; /* adds, subs */

/* ---- merged ranges ---- */

static void ucm_filemap_batch_flush(ucm_filemap_batch_t *b)
{
    unsigned i;

    for (i = 0; i < b->count; ++i) {
        b->cb(b->arg, b->r[i].start, b->r[i].end - b->r[i].start);
    }
    b->count = 0;
}

static void ucm_filemap_batch_add(ucm_filemap_batch_t *b, uintptr_t start,
                                  uintptr_t end)
{
    unsigned i;

    for (i = 0; i < b->count; ++i) {
        if ((start >= b->r[i].start) && (end <= b->r[i].end)) {
            return;
        }
        if (b->r[i].end == start) {
            b->r[i].end = end;
            return;
        }
        if (b->r[i].start == end) {
            b->r[i].start = start;
            return;
        }
    }
    if (b->count == UCM_FILEMAP_BATCH) {
        ucm_filemap_batch_flush(b);
    }
    b->r[b->count].start = start;
    b->r[b->count].end   = end;
    ++b->count;
}

/* The addresses of file offsets [lo, hi) in e, if any. */
static void ucm_filemap_batch_entry(ucm_filemap_batch_t *b,
                                    const ucm_filemap_entry_t *e, uint64_t lo,
                                    uint64_t hi)
{
    uint64_t size = e->end - e->start, first, last;

    if (e->offset > UINT64_MAX - size) {
        return;
    }
    first = ucs_max(e->offset, lo);
    last  = ucs_min(e->offset + size, hi);
    if (first < last) {
        ucm_filemap_batch_add(b, e->start + (first - e->offset),
                              e->start + (last - e->offset));
    }
}

/* ---- /proc/self/maps ---- */

/* The key of a maps line; 0 if it maps no file. */
static int ucm_filemap_line_key(const ucm_procmaps_entry_t *m,
                                ucm_filemap_key_t *key)
{
    if (m->inode == 0) {
        return 0;
    }
    key->ino       = m->inode;
    key->dev       = makedev(m->dev_major, m->dev_minor);
    key->dev_known = 0; /* st_dev may differ (btrfs, overlayfs) */
    if (!strncmp(m->path, "/SYSV", 5)) {
        key->kind = UCM_FILEMAP_SYSV;
    } else if (m->shared && !strncmp(m->path, "/dev/zero (deleted)", 19)) {
        key->kind = UCM_FILEMAP_ANON;
    } else {
        key->kind = UCM_FILEMAP_FILE;
    }
    return 1;
}

static void ucm_filemap_line_entry(const ucm_procmaps_entry_t *m,
                                   ucm_filemap_entry_t *e)
{
    e->start  = m->start;
    e->end    = m->end;
    e->offset = m->offset;
}

/* Lines that continue each other (a mapping split by mprotect) become one
 * entry: 'pending' collects them. */
typedef struct {
    ucm_filemap_entry_t pending;
    int have_pending;
    int failed; /* an insertion found the table full */
} ucm_filemap_learn_t;

static void ucm_filemap_learn_flush(ucm_filemap_learn_t *l)
{
    if (l->have_pending && !ucm_filemap_insert(&l->pending)) {
        l->failed = 1;
    }
    l->have_pending = 0;
}

static void ucm_filemap_learn(ucm_filemap_learn_t *l,
                              const ucm_filemap_entry_t *e)
{
    if (l->have_pending && (l->pending.end == e->start) &&
        (l->pending.offset + (l->pending.end - l->pending.start) ==
         e->offset) &&
        ucm_filemap_key_match(&l->pending.key, &e->key) &&
        (l->pending.key.dev == e->key.dev)) {
        l->pending.end = e->end;
        return;
    }
    ucm_filemap_learn_flush(l);
    l->pending      = *e;
    l->have_pending = 1;
}

typedef struct {
    ucm_filemap_learn_t learn;
    int cleared; /* the walk produced a line: the old entries are gone */
} ucm_filemap_rebuild_ctx_t;

static int ucm_filemap_rebuild_cb(void *arg, const ucm_procmaps_entry_t *m)
{
    ucm_filemap_rebuild_ctx_t *ctx = arg;
    ucm_filemap_entry_t e;

    /* emptied only once the maps could be read: a walk that cannot start
     * leaves the table the hooks kept */
    if (!ctx->cleared) {
        ucm_filemap_clear();
        ctx->cleared = 1;
    }
    if (ucm_filemap_line_key(m, &e.key)) {
        ucm_filemap_line_entry(m, &e);
        ucm_filemap_learn(&ctx->learn, &e);
    }
    return 0;
}

static int ucm_filemap_dl_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    unsigned long long *counters = arg;

    (void)size;
    counters[0] = info->dlpi_adds;
    counters[1] = info->dlpi_subs;
    return 1;
}

/* The one loader walk reachable from hook context (truncation hooks,
 * file-wide madvise, the file watch's handler; never from glibc's malloc):
 * ld.so maps objects with its own system calls, and these counters are the
 * only way to learn it did.  docs/internals-hook-context.md says why it
 * stays and what it risks. */
static void ucm_filemap_dl_counters(unsigned long long *counters)
{
    counters[0] = 0;
    counters[1] = 0;
    ucm_dl_iterate(ucm_filemap_dl_cb, counters);
}

/* /proc/self/maps could not be read (ret: a negative errno): say once what
 * is no longer caught.  The hooks' own records still answer for what was
 * mapped through them while the table was kept. */
static void ucm_filemap_maps_failed(int ret)
{
    int err = -ret;

    if ((err == EMFILE) || (err == ENFILE)) {
        ucm_degrade_report(UCM_DEGRADE_FDS, err,
                           "truncation of files mapped by raw system calls "
                           "or before libucm kept its file table is not "
                           "caught: /proc/self/maps cannot be opened, "
                           "descriptors exhausted (%s); using the hooks' "
                           "records",
                           ucm_degrade_errname(err));
    } else {
        ucm_degrade_report(UCM_DEGRADE_PROCMAPS, err,
                           "truncation of files mapped by raw system calls "
                           "or before libucm kept its file table is not "
                           "caught: /proc/self/maps unreadable (%s); using "
                           "the hooks' records",
                           ucm_degrade_errname(err));
    }
}

/* Empty the table and fill it from one /proc/self/maps walk; 0 if another
 * rebuild runs (perhaps the one this signal handler interrupted).  When
 * the maps cannot be read at all, the table keeps what the hooks recorded
 * and is trusted as it is (it misses what no hook saw). */
static int ucm_filemap_rebuild(void)
{
    ucm_filemap_rebuild_ctx_t ctx;
    unsigned long long dl[2];
    uint64_t gen;
    int ret;

    gen = __atomic_load_n(&ucm_filemap_gen, __ATOMIC_ACQUIRE);
    if ((gen & 1) ||
        !__atomic_compare_exchange_n(&ucm_filemap_gen, &gen, gen + 1, 0,
                                     __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
        return 0;
    }
    __atomic_store_n(&ucm_filemap_incomplete, 0, __ATOMIC_SEQ_CST);
    ucm_filemap_dl_counters(dl);
    memset(&ctx, 0, sizeof(ctx));
    ret = ucm_procmaps_walk(ucm_filemap_rebuild_cb, &ctx);
    if ((ret == 0) && !ctx.cleared) {
        ucm_filemap_clear(); /* no file mapping at all */
    }
    ucm_filemap_learn_flush(&ctx.learn);
    if ((ret != 0) && !ctx.cleared) {
        ucm_filemap_maps_failed(ret);
    } else if ((ret != 0) || ctx.learn.failed) {
        __atomic_store_n(&ucm_filemap_incomplete, 1, __ATOMIC_SEQ_CST);
        if (ctx.learn.failed) {
            __atomic_store_n(&ucm_filemap_full_backoff,
                             UCM_FILEMAP_FULL_BACKOFF, __ATOMIC_RELAXED);
            ucm_debug("more file mappings than %d table slots: removed file "
                      "pages are found by reading /proc/self/maps",
                      UCM_FILEMAP_SLOTS);
        } else {
            ucm_filemap_maps_failed(ret);
        }
    }
    __atomic_store_n(&ucm_filemap_dl_seen[0], dl[0], __ATOMIC_RELAXED);
    __atomic_store_n(&ucm_filemap_dl_seen[1], dl[1], __ATOMIC_RELAXED);
    ucm_filemap_hwm_lower();
    __atomic_store_n(&ucm_filemap_gen, gen + 2, __ATOMIC_RELEASE);
    ucm_trace("file mapping table rebuilt from /proc/self/maps (%s)",
              ctx.learn.failed ? "full" : "complete");
    return 1;
}

static int ucm_filemap_sparse(void)
{
    return __atomic_load_n(&ucm_filemap_hwm, __ATOMIC_RELAXED) >
           (2 * __atomic_load_n(&ucm_filemap_live, __ATOMIC_RELAXED)) + 64;
}

/* Scans stop at the highest slot in use: after many mappings came and went,
 * lower that mark (readers walk the maps meanwhile).  Where slots high up
 * stay in use, try again only after a number of lookups (a rebuild packs
 * the table anyway). */
static void ucm_filemap_compact(void)
{
    uint64_t gen = __atomic_load_n(&ucm_filemap_gen, __ATOMIC_ACQUIRE);
    unsigned wait;

    wait = __atomic_load_n(&ucm_filemap_compact_backoff, __ATOMIC_RELAXED);
    if (wait > 0) {
        __atomic_store_n(&ucm_filemap_compact_backoff, wait - 1,
                         __ATOMIC_RELAXED);
        return;
    }
    if (!(gen & 1) &&
        __atomic_compare_exchange_n(&ucm_filemap_gen, &gen, gen + 1, 0,
                                    __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
        ucm_filemap_hwm_lower();
        __atomic_store_n(&ucm_filemap_gen, gen + 2, __ATOMIC_RELEASE);
        ucm_trace("file mapping table: slots below %u in use",
                  __atomic_load_n(&ucm_filemap_hwm, __ATOMIC_RELAXED));
        if (ucm_filemap_sparse()) {
            __atomic_store_n(&ucm_filemap_compact_backoff,
                             UCM_FILEMAP_FULL_BACKOFF, __ATOMIC_RELAXED);
        }
    }
}

/* Before a lookup: start keeping the table (the first time), and rebuild it
 * when it may be incomplete; 1 if this call rebuilt it. */
static int ucm_filemap_prepare(void)
{
    unsigned long long dl[2];
    unsigned backoff;

    if (!__atomic_load_n(&ucm_filemap_active, __ATOMIC_RELAXED)) {
        __atomic_store_n(&ucm_filemap_active, 1, __ATOMIC_SEQ_CST);
    }
    if (__atomic_load_n(&ucm_filemap_incomplete, __ATOMIC_SEQ_CST)) {
        /* the last rebuild found the table too small: retry when half of
         * it is free again, or after a number of lookups */
        backoff = __atomic_load_n(&ucm_filemap_full_backoff, __ATOMIC_RELAXED);
        if ((backoff > 0) &&
            (__atomic_load_n(&ucm_filemap_live, __ATOMIC_RELAXED) >
             UCM_FILEMAP_SLOTS / 2) &&
            __atomic_compare_exchange_n(&ucm_filemap_full_backoff, &backoff,
                                        backoff - 1, 0, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
            return 0;
        }
        return ucm_filemap_rebuild();
    }
    /* the loader mapped or unmapped objects */
    ucm_filemap_dl_counters(dl);
    if ((dl[0] != __atomic_load_n(&ucm_filemap_dl_seen[0], __ATOMIC_RELAXED)) ||
        (dl[1] != __atomic_load_n(&ucm_filemap_dl_seen[1], __ATOMIC_RELAXED))) {
        return ucm_filemap_rebuild();
    }
    if (ucm_filemap_sparse()) {
        ucm_filemap_compact();
    }
    return 0;
}

/* ---- lookups ---- */

typedef enum {
    UCM_FILEMAP_FOUND,   /* the table knows mappings of the key */
    UCM_FILEMAP_UNKNOWN, /* ... and it knows none */
    UCM_FILEMAP_FALLBACK /* the table cannot answer now */
} ucm_filemap_answer_t;

static ucm_filemap_answer_t ucm_filemap_find(const ucm_filemap_key_t *key,
                                             uint64_t lo, uint64_t hi,
                                             ucm_filemap_batch_t *b)
{
    ucm_filemap_entry_t e;
    uint64_t gen, seq, word;
    unsigned i, hwm, tries;
    int known;

    for (tries = 0; tries < UCM_FILEMAP_SCAN_TRIES; ++tries) {
        gen = __atomic_load_n(&ucm_filemap_gen, __ATOMIC_ACQUIRE);
        if ((gen & 1) ||
            __atomic_load_n(&ucm_filemap_incomplete, __ATOMIC_ACQUIRE)) {
            return UCM_FILEMAP_FALLBACK;
        }
        seq   = __atomic_load_n(&ucm_filemap_ins_seq, __ATOMIC_ACQUIRE);
        hwm   = __atomic_load_n(&ucm_filemap_hwm, __ATOMIC_ACQUIRE);
        known = 0;
        for (i = 0; i < hwm; ++i) {
            if (ucm_filemap_slot_read(i, &e, &word) &&
                ucm_filemap_key_match(&e.key, key)) {
                known = 1;
                ucm_filemap_batch_entry(b, &e, lo, hi);
            }
        }
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&ucm_filemap_gen, __ATOMIC_RELAXED) != gen) {
            return UCM_FILEMAP_FALLBACK;
        }
        if (__atomic_load_n(&ucm_filemap_ins_seq, __ATOMIC_RELAXED) == seq) {
            return known ? UCM_FILEMAP_FOUND : UCM_FILEMAP_UNKNOWN;
        }
    }
    return UCM_FILEMAP_FALLBACK;
}

typedef struct {
    const ucm_filemap_key_t *key;
    uint64_t lo, hi;
    ucm_filemap_batch_t *batch;
} ucm_filemap_walk_key_ctx_t;

static int ucm_filemap_walk_key_cb(void *arg, const ucm_procmaps_entry_t *m)
{
    ucm_filemap_walk_key_ctx_t *ctx = arg;
    ucm_filemap_entry_t e;

    if (!ucm_filemap_line_key(m, &e.key) ||
        !ucm_filemap_key_match(&e.key, ctx->key)) {
        return 0;
    }
    ucm_filemap_line_entry(m, &e);
    ucm_filemap_batch_entry(ctx->batch, &e, ctx->lo, ctx->hi);
    return 0;
}

/* The mappings of key from /proc/self/maps, when the table cannot answer. */
static void ucm_filemap_walk_key(const ucm_filemap_key_t *key, uint64_t lo,
                                 uint64_t hi, ucm_filemap_batch_t *b)
{
    ucm_filemap_walk_key_ctx_t ctx = {key, lo, hi, b};
    int ret;

    ret = ucm_procmaps_walk(ucm_filemap_walk_key_cb, &ctx);
    if (ret != 0) {
        ucm_filemap_maps_failed(ret);
        ucm_debug("cannot read /proc/self/maps (%d): pages of inode %lu at "
                  "offsets 0x%lx..0x%lx not reported",
                  -ret, (unsigned long)key->ino, (unsigned long)lo,
                  (unsigned long)hi);
    }
}

static void ucm_filemap_report_key(const ucm_filemap_key_t *key, uint64_t lo,
                                   uint64_t hi, ucm_filemap_batch_t *b)
{
    ucm_filemap_answer_t answer;

    if (b->file != NULL) {
        if (b->files == 0) {
            b->file->key = *key;
            b->file->lo  = lo;
            b->file->hi  = hi;
            b->files     = 1;
        } else if (!ucm_filemap_key_match(&b->file->key, key)) {
            b->files = 2;
        } else {
            b->file->lo = ucs_min(b->file->lo, lo);
            b->file->hi = ucs_max(b->file->hi, hi);
        }
    }
    answer = ucm_filemap_find(key, lo, hi, b);

    if ((answer == UCM_FILEMAP_UNKNOWN) && !b->rebuilt) {
        /* perhaps mapped only behind libucm's back (a raw system call): the
         * walk that finds out refreshes the whole table, which also brings
         * in any other mapping made that way */
        ucm_trace("inode %llu: no mapping in the table, rebuilding it",
                  (unsigned long long)key->ino);
        b->rebuilt = 1;
        answer     = ucm_filemap_rebuild() ? ucm_filemap_find(key, lo, hi, b)
                                           : UCM_FILEMAP_FALLBACK;
    }
    if (answer == UCM_FILEMAP_FALLBACK) {
        ucm_trace("inode %llu: table not usable now, reading /proc/self/maps",
                  (unsigned long long)key->ino);
        ucm_filemap_walk_key(key, lo, hi, b);
    }
}

void ucm_filemap_report_file(const ucm_filemap_key_t *key, uint64_t lo,
                             uint64_t hi, ucm_filemap_cb_t cb, void *arg)
{
    ucm_filemap_batch_t b = {.cb = cb, .arg = arg, .count = 0};

    if (lo >= hi) {
        return;
    }
    b.rebuilt = ucm_filemap_prepare();
    ucm_filemap_report_key(key, lo, hi, &b);
    ucm_filemap_batch_flush(&b);
}

/* The table's entries over [addr, end), visited in the order of their
 * (clipped start, slot), each reported as a file range: the madvise'd pages
 * in every mapping of the file.  0 if the table cannot answer, changed
 * meanwhile, or (unless gaps_ok: the table is fresh) covers only part of
 * the range, which may be memory it does not know. */
static int ucm_filemap_range_from_table(uintptr_t addr, uintptr_t end,
                                        ucm_filemap_batch_t *b, int gaps_ok)
{
    uintptr_t reach = addr, last_start = 0, next_start = 0, start;
    unsigned i, hwm, steps, last_slot = 0, next_slot = 0;
    ucm_filemap_entry_t e, next;
    int have_last = 0, found;
    uint64_t word, gen, seq;

    gen = __atomic_load_n(&ucm_filemap_gen, __ATOMIC_ACQUIRE);
    if ((gen & 1) ||
        __atomic_load_n(&ucm_filemap_incomplete, __ATOMIC_ACQUIRE)) {
        return 0;
    }
    seq = __atomic_load_n(&ucm_filemap_ins_seq, __ATOMIC_ACQUIRE);
    for (steps = 0; steps < UCM_FILEMAP_SLOTS; ++steps) {
        hwm   = __atomic_load_n(&ucm_filemap_hwm, __ATOMIC_ACQUIRE);
        found = 0;
        for (i = 0; i < hwm; ++i) {
            if (!ucm_filemap_slot_read(i, &e, &word) || (e.start >= end) ||
                (e.end <= addr)) {
                continue;
            }
            start = ucs_max(e.start, addr);
            if (have_last && ((start < last_start) ||
                              ((start == last_start) && (i <= last_slot)))) {
                continue; /* visited */
            }
            if (!found || (start < next_start) ||
                ((start == next_start) && (i < next_slot))) {
                next_start = start;
                next_slot  = i;
                next       = e;
                found      = 1;
            }
        }
        if (!found) {
            break;
        }
        if (steps + 1 == UCM_FILEMAP_SLOTS) {
            return 0; /* the table kept changing */
        }
        if ((next_start > reach) && !gaps_ok) {
            return 0; /* a gap */
        }
        reach = ucs_max(reach, ucs_min(next.end, end));
        ucm_filemap_report_key(
            &next.key, next.offset + (next_start - next.start),
            next.offset + (ucs_min(next.end, end) - next.start), b);
        last_start = next_start;
        last_slot  = next_slot;
        have_last  = 1;
    }
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return ((reach >= end) || gaps_ok) &&
           (__atomic_load_n(&ucm_filemap_gen, __ATOMIC_RELAXED) == gen) &&
           (__atomic_load_n(&ucm_filemap_ins_seq, __ATOMIC_RELAXED) == seq);
}

typedef struct {
    uintptr_t from, end;
    int found;
    ucm_filemap_entry_t e;
} ucm_filemap_first_ctx_t;

static int ucm_filemap_first_cb(void *arg, const ucm_procmaps_entry_t *m)
{
    ucm_filemap_first_ctx_t *ctx = arg;

    if (m->end <= ctx->from) {
        return 0;
    }
    if (m->start >= ctx->end) {
        return 1;
    }
    if (!ucm_filemap_line_key(m, &ctx->e.key)) {
        return 0;
    }
    ucm_filemap_line_entry(m, &ctx->e);
    ctx->found = 1;
    return 1;
}

/* The same from /proc/self/maps: one walk per mapping in the range. */
static void ucm_filemap_range_from_maps(uintptr_t addr, uintptr_t end,
                                        ucm_filemap_batch_t *b)
{
    ucm_filemap_first_ctx_t ctx = {addr, end, 0};
    uintptr_t start, stop;
    int ret = 0;

    while ((ctx.from < end) &&
           ((ret = ucm_procmaps_walk(ucm_filemap_first_cb, &ctx)) == 0) &&
           ctx.found) {
        start = ucs_max(ctx.e.start, ctx.from);
        stop  = ucs_min(ctx.e.end, end);
        ucm_filemap_report_key(&ctx.e.key, ctx.e.offset + (start - ctx.e.start),
                               ctx.e.offset + (stop - ctx.e.start), b);
        ctx.from  = stop;
        ctx.found = 0;
    }
    if ((ctx.from < end) && (ret != 0)) {
        ucm_filemap_maps_failed(ret);
    }
}

int ucm_filemap_report_range(uintptr_t addr, size_t len, int gaps_matter,
                             ucm_filemap_cb_t cb, void *arg,
                             ucm_filemap_range_t *file_p)
{
    size_t page           = ucm_sys_page_size();
    ucm_filemap_batch_t b = {.cb = cb, .arg = arg, .count = 0};
    ucm_filemap_range_t file;
    uintptr_t end;

    b.file  = (file_p != NULL) ? &file : NULL;
    b.files = 0;
    addr &= ~(page - 1);
    end = (addr + len + page - 1) & ~(page - 1);
    if (end <= addr) {
        return 0;
    }
    b.rebuilt = ucm_filemap_prepare();
    if (ucm_filemap_range_from_table(addr, end, &b,
                                     b.rebuilt || !gaps_matter)) {
        goto out;
    }
    if (!b.rebuilt && gaps_matter) {
        b.rebuilt = 1;
        if (ucm_filemap_rebuild() &&
            ucm_filemap_range_from_table(addr, end, &b, 1)) {
            goto out;
        }
    }
    ucm_trace("range %p..%p: the table cannot answer, reading /proc/self/maps",
              (void *)addr, (void *)end);
    ucm_filemap_range_from_maps(addr, end, &b);
out:
    ucm_filemap_batch_flush(&b);
    if ((file_p == NULL) || (b.files != 1)) {
        return 0;
    }
    *file_p = file;
    return 1;
}

/* ---- the install self-test ---- */

int ucm_filemap_selftest_begin(void)
{
    int was_active = __atomic_load_n(&ucm_filemap_active, __ATOMIC_SEQ_CST);

    __atomic_store_n(&ucm_filemap_active, 1, __ATOMIC_SEQ_CST);
    return was_active;
}

void ucm_filemap_selftest_end(int was_active)
{
    uint64_t gen;

    if (was_active || ucm_degrade_is(UCM_DEGRADE_PROCMAPS) ||
        ucm_degrade_is(UCM_DEGRADE_FDS)) {
        return; /* kept: from now on the hooks' records are all there is */
    }
    /* lazy again: the next lookup seeds the table afresh.  Emptied too
     * (unless a rebuild runs): the test's lookup seeded it with every file
     * mapping, and while entries fill the buckets every munmap near them
     * takes the slow path. */
    __atomic_store_n(&ucm_filemap_incomplete, 1, __ATOMIC_SEQ_CST);
    __atomic_store_n(&ucm_filemap_active, 0, __ATOMIC_SEQ_CST);
    gen = __atomic_load_n(&ucm_filemap_gen, __ATOMIC_ACQUIRE);
    if (!(gen & 1) &&
        __atomic_compare_exchange_n(&ucm_filemap_gen, &gen, gen + 1, 0,
                                    __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
        ucm_filemap_clear();
        ucm_filemap_hwm_lower();
        __atomic_store_n(&ucm_filemap_gen, gen + 2, __ATOMIC_RELEASE);
    }
}

/* ---- fork ---- */

/* The child has one thread: what other threads were writing is abandoned,
 * and a rebuild was perhaps half done.  Rebuild at the first lookup. */
static void ucm_filemap_atfork_child(void)
{
    ucm_filemap_table_atfork_child();
    ucm_filemap_gen &= ~1ull;
    ucm_filemap_incomplete   = 1;
    ucm_filemap_full_backoff = 0;
}

static void UCS_F_CTOR ucm_filemap_init(void)
{
    pthread_atfork(NULL, NULL, ucm_filemap_atfork_child);
}
