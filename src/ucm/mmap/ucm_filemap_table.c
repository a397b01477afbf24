/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The slots of the table of file mappings and their feeding by the hooks;
 * see ucm_filemap_int.h for how writers and readers share them.
 */
#include "ucm_filemap_int.h"
#include "ucm_filewatch.h"

#include <ucm/util/ucm_sys.h>

#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>

#define UCM_FILEMAP_FREE  0ul
#define UCM_FILEMAP_BUSY  1ul
#define UCM_FILEMAP_LIVE  2ul
#define UCM_FILEMAP_STATE 3ul
#define UCM_FILEMAP_VER   4ul

/* Keys of shared anonymous memory that libucm numbers itself. */
#define UCM_FILEMAP_ANON_OWN (1ull << 63)

#define UCM_FILEMAP_GRAINS_PER_CHUNK                                           \
    (1ul << (UCM_FILEMAP_CHUNK_SHIFT - UCM_FILEMAP_GRAIN_SHIFT))

typedef struct {
    uint64_t word;
    uint64_t start;
    uint64_t end;
    uint64_t offset; /* file offset at start */
    uint64_t ino;
    uint64_t dev;
    uint32_t kind; /* kind | dev_known << 8 */
} __attribute__((aligned(64))) ucm_filemap_slot_t;

uint64_t ucm_filemap_buckets[UCM_FILEMAP_BUCKETS];
int ucm_filemap_active;
unsigned ucm_filemap_hwm;
uint64_t ucm_filemap_ins_seq;
uint64_t ucm_filemap_gen;
int ucm_filemap_incomplete = 1;
unsigned ucm_filemap_live;

static ucm_filemap_slot_t ucm_filemap_slots[UCM_FILEMAP_SLOTS];
static unsigned ucm_filemap_hint; /* where to look for a free slot */
static uint64_t ucm_filemap_anon_ids;

/* ---- address summary ---- */

static uint64_t ucm_filemap_bucket_pack(uint64_t count, uint64_t lo,
                                        uint64_t hi)
{
    return count | (lo << 32) | (hi << 48);
}

static void ucm_filemap_bucket_update(unsigned b, uint64_t lo, uint64_t hi,
                                      int add)
{
    uint64_t old = __atomic_load_n(&ucm_filemap_buckets[b], __ATOMIC_RELAXED);
    uint64_t count, new_word, olo, ohi;

    do {
        count = old & 0xffffffffull;
        olo   = (old >> 32) & 0xffff;
        ohi   = old >> 48;
        if (add) {
            new_word = (count == 0) ? ucm_filemap_bucket_pack(1, lo, hi)
                                    : ucm_filemap_bucket_pack(count + 1,
                                                              ucs_min(olo, lo),
                                                              ucs_max(ohi, hi));
        } else if (count <= 1) {
            new_word = 0;
        } else {
            /* the others' extent is not known: keep the union */
            new_word = ucm_filemap_bucket_pack(count - 1, olo, ohi);
        }
    } while (!__atomic_compare_exchange_n(&ucm_filemap_buckets[b], &old,
                                          new_word, 0, __ATOMIC_ACQ_REL,
                                          __ATOMIC_RELAXED));
}

/* Count [start, end) in (add) or out of the summary. */
static void ucm_filemap_buckets_mark(uintptr_t start, uintptr_t end, int add)
{
    uintptr_t c0 = start >> UCM_FILEMAP_CHUNK_SHIFT;
    uintptr_t c1 = (end - 1) >> UCM_FILEMAP_CHUNK_SHIFT;
    uint64_t lo, hi;
    uintptr_t c;
    unsigned b;

    if (c1 - c0 >= UCM_FILEMAP_BUCKETS - 1) {
        for (b = 0; b < UCM_FILEMAP_BUCKETS; ++b) {
            ucm_filemap_bucket_update(b, 0, UCM_FILEMAP_GRAINS_PER_CHUNK - 1,
                                      add);
        }
        return;
    }
    for (c = c0; c <= c1; ++c) {
        lo = (c == c0) ? (start >> UCM_FILEMAP_GRAIN_SHIFT) &
                             (UCM_FILEMAP_GRAINS_PER_CHUNK - 1)
                       : 0;
        hi = (c == c1) ? ((end - 1) >> UCM_FILEMAP_GRAIN_SHIFT) &
                             (UCM_FILEMAP_GRAINS_PER_CHUNK - 1)
                       : UCM_FILEMAP_GRAINS_PER_CHUNK - 1;
        ucm_filemap_bucket_update(ucm_filemap_bucket_of(c), lo, hi, add);
    }
}

int ucm_filemap_may_overlap_slow(uintptr_t addr, size_t len)
{
    uintptr_t end = addr + len, c0, c1, c;
    uint64_t word, lo, hi;

    if (len == 0) {
        return 0;
    }
    if (end < addr) {
        return 1;
    }
    c0 = addr >> UCM_FILEMAP_CHUNK_SHIFT;
    c1 = (end - 1) >> UCM_FILEMAP_CHUNK_SHIFT;
    if (c1 - c0 >= UCM_FILEMAP_BUCKETS - 1) {
        return 1;
    }
    for (c = c0; c <= c1; ++c) {
        word = __atomic_load_n(&ucm_filemap_buckets[ucm_filemap_bucket_of(c)],
                               __ATOMIC_ACQUIRE);
        if ((word & 0xffffffffull) == 0) {
            continue;
        }
        lo = (c == c0) ? (addr >> UCM_FILEMAP_GRAIN_SHIFT) &
                             (UCM_FILEMAP_GRAINS_PER_CHUNK - 1)
                       : 0;
        hi = (c == c1) ? ((end - 1) >> UCM_FILEMAP_GRAIN_SHIFT) &
                             (UCM_FILEMAP_GRAINS_PER_CHUNK - 1)
                       : UCM_FILEMAP_GRAINS_PER_CHUNK - 1;
        if ((lo <= (word >> 48)) && (hi >= ((word >> 32) & 0xffff))) {
            return 1;
        }
    }
    return 0;
}

/* ---- slots ---- */

int ucm_filemap_key_match(const ucm_filemap_key_t *a,
                          const ucm_filemap_key_t *b)
{
    return (a->kind == b->kind) && (a->ino == b->ino) &&
           (!a->dev_known || !b->dev_known || (a->dev == b->dev));
}

int ucm_filemap_slot_read(unsigned i, ucm_filemap_entry_t *e, uint64_t *word_p)
{
    ucm_filemap_slot_t *s = &ucm_filemap_slots[i];
    uint64_t word         = __atomic_load_n(&s->word, __ATOMIC_ACQUIRE);
    uint32_t kind;

    if ((word & UCM_FILEMAP_STATE) != UCM_FILEMAP_LIVE) {
        return 0;
    }
    e->start         = __atomic_load_n(&s->start, __ATOMIC_RELAXED);
    e->end           = __atomic_load_n(&s->end, __ATOMIC_RELAXED);
    e->offset        = __atomic_load_n(&s->offset, __ATOMIC_RELAXED);
    e->key.ino       = __atomic_load_n(&s->ino, __ATOMIC_RELAXED);
    e->key.dev       = __atomic_load_n(&s->dev, __ATOMIC_RELAXED);
    kind             = __atomic_load_n(&s->kind, __ATOMIC_RELAXED);
    e->key.kind      = kind & 0xff;
    e->key.dev_known = kind >> 8;
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&s->word, __ATOMIC_RELAXED) != word) {
        return 0;
    }
    *word_p = word;
    return 1;
}

int ucm_filemap_insert(const ucm_filemap_entry_t *e)
{
    unsigned n, i, hwm, hint;
    ucm_filemap_slot_t *s;
    uint64_t word;

    if (e->end <= e->start) {
        return 1;
    }
    hint = __atomic_load_n(&ucm_filemap_hint, __ATOMIC_RELAXED);
    for (n = 0; n < UCM_FILEMAP_SLOTS; ++n) {
        i    = (hint + n) % UCM_FILEMAP_SLOTS;
        s    = &ucm_filemap_slots[i];
        word = __atomic_load_n(&s->word, __ATOMIC_RELAXED);
        if (((word & UCM_FILEMAP_STATE) != UCM_FILEMAP_FREE) ||
            !__atomic_compare_exchange_n(&s->word, &word,
                                         (word & ~UCM_FILEMAP_STATE) +
                                             UCM_FILEMAP_VER + UCM_FILEMAP_BUSY,
                                         0, __ATOMIC_ACQUIRE,
                                         __ATOMIC_RELAXED)) {
            continue;
        }
        __atomic_store_n(&ucm_filemap_hint, i + 1, __ATOMIC_RELAXED);
        ucm_filemap_buckets_mark(e->start, e->end, 1);
        __atomic_store_n(&s->start, e->start, __ATOMIC_RELAXED);
        __atomic_store_n(&s->end, e->end, __ATOMIC_RELAXED);
        __atomic_store_n(&s->offset, e->offset, __ATOMIC_RELAXED);
        __atomic_store_n(&s->ino, e->key.ino, __ATOMIC_RELAXED);
        __atomic_store_n(&s->dev, e->key.dev, __ATOMIC_RELAXED);
        __atomic_store_n(&s->kind,
                         e->key.kind | ((uint32_t)e->key.dev_known << 8),
                         __ATOMIC_RELAXED);
        hwm = __atomic_load_n(&ucm_filemap_hwm, __ATOMIC_RELAXED);
        while ((hwm <= i) && !__atomic_compare_exchange_n(
                                 &ucm_filemap_hwm, &hwm, i + 1, 0,
                                 __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
        }
        __atomic_store_n(&s->word,
                         (word & ~UCM_FILEMAP_STATE) + (2 * UCM_FILEMAP_VER) +
                             UCM_FILEMAP_LIVE,
                         __ATOMIC_RELEASE);
        __atomic_add_fetch(&ucm_filemap_ins_seq, 1, __ATOMIC_RELEASE);
        __atomic_add_fetch(&ucm_filemap_live, 1, __ATOMIC_RELAXED);
        return 1;
    }
    __atomic_store_n(&ucm_filemap_incomplete, 1, __ATOMIC_SEQ_CST);
    return 0;
}

void ucm_filemap_remove(unsigned i, uint64_t word, const ucm_filemap_entry_t *e)
{
    if (__atomic_compare_exchange_n(&ucm_filemap_slots[i].word, &word,
                                    (word & ~UCM_FILEMAP_STATE) +
                                        UCM_FILEMAP_VER + UCM_FILEMAP_FREE,
                                    0, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
        ucm_filemap_buckets_mark(e->start, e->end, 0);
        __atomic_sub_fetch(&ucm_filemap_live, 1, __ATOMIC_RELAXED);
        /* a hint only: a racing insertion may move it past a free slot,
         * which the next wrap-around finds */
        if (i < __atomic_load_n(&ucm_filemap_hint, __ATOMIC_RELAXED)) {
            __atomic_store_n(&ucm_filemap_hint, i, __ATOMIC_RELAXED);
        }
    }
}

/* What remains of e outside [start, end), inserted before e goes. */
static void ucm_filemap_cut(unsigned i, uint64_t word,
                            const ucm_filemap_entry_t *e, uintptr_t start,
                            uintptr_t end)
{
    ucm_filemap_entry_t part;

    if (e->start < start) {
        part     = *e;
        part.end = start;
        if (!ucm_filemap_insert(&part)) {
            return; /* keep e: it over-reports, but misses nothing */
        }
    }
    if (e->end > end) {
        part        = *e;
        part.start  = end;
        part.offset = e->offset + (end - e->start);
        if (!ucm_filemap_insert(&part)) {
            return;
        }
    }
    ucm_filemap_remove(i, word, e);
}

/* Take [start, end) out of every entry. */
static void ucm_filemap_trim(uintptr_t start, uintptr_t end)
{
    unsigned i, hwm = __atomic_load_n(&ucm_filemap_hwm, __ATOMIC_ACQUIRE);
    ucm_filemap_entry_t e;
    uint64_t word;

    for (i = 0; i < hwm; ++i) {
        if (ucm_filemap_slot_read(i, &e, &word) && (e.start < end) &&
            (e.end > start)) {
            ucm_filemap_cut(i, word, &e, start, end);
        }
    }
}

void ucm_filemap_clear(void)
{
    unsigned i, hwm = __atomic_load_n(&ucm_filemap_hwm, __ATOMIC_ACQUIRE);
    ucm_filemap_entry_t e;
    uint64_t word;

    for (i = 0; i < hwm; ++i) {
        if (ucm_filemap_slot_read(i, &e, &word)) {
            ucm_filemap_remove(i, word, &e);
        }
    }
}

/* Highest slot in use + 1, over slots [0, limit). */
static unsigned ucm_filemap_used_below(unsigned limit)
{
    unsigned i, used = 0;

    for (i = 0; i < limit; ++i) {
        if ((__atomic_load_n(&ucm_filemap_slots[i].word, __ATOMIC_ACQUIRE) &
             UCM_FILEMAP_STATE) != UCM_FILEMAP_FREE) {
            used = i + 1;
        }
    }
    return used;
}

void ucm_filemap_hwm_lower(void)
{
    unsigned hwm  = __atomic_load_n(&ucm_filemap_hwm, __ATOMIC_ACQUIRE);
    unsigned used = ucm_filemap_used_below(hwm), again;

    if ((used >= hwm) ||
        !__atomic_compare_exchange_n(&ucm_filemap_hwm, &hwm, used, 0,
                                     __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
        return;
    }
    /* a slot claimed above 'used' after the first pass, before the lower
     * mark was stored, raised nothing (the old mark covered it) */
    again = ucm_filemap_used_below(hwm);
    while ((used < again) &&
           !__atomic_compare_exchange_n(&ucm_filemap_hwm, &used, again, 0,
                                        __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
    }
}

/* ---- feeding ---- */

size_t ucm_filemap_page_up(size_t len)
{
    size_t page = ucm_sys_page_size();

    return (len + page - 1) & ~(page - 1);
}

static int ucm_filemap_shared(int flags)
{
    return ((flags & MAP_TYPE) == MAP_SHARED) ||
           ((flags & MAP_TYPE) == MAP_SHARED_VALIDATE);
}

static void ucm_filemap_add_anon(uintptr_t addr, size_t len)
{
    ucm_filemap_entry_t e;

    e.start         = addr;
    e.end           = addr + len;
    e.offset        = 0;
    e.key.kind      = UCM_FILEMAP_ANON;
    e.key.dev       = 0;
    e.key.dev_known = 0;
    e.key.ino =
        UCM_FILEMAP_ANON_OWN |
        (__atomic_add_fetch(&ucm_filemap_anon_ids, 1, __ATOMIC_RELAXED));
    ucm_filemap_insert(&e);
}

void ucm_filemap_mapped_slow(uintptr_t addr, size_t len, int flags, int fd,
                             off_t offset)
{
    /* the table is kept, or only shared files are watched */
    int table = __atomic_load_n(&ucm_filemap_active, __ATOMIC_SEQ_CST);
    ucm_filemap_entry_t e;
    struct stat st;

    len = ucm_filemap_page_up(len);
    if ((len == 0) || (addr + len < addr)) {
        return;
    }
    /* whatever the table had there is gone (MAP_FIXED), or was already
     * gone behind libucm's back */
    if (table && ucm_filemap_may_overlap(addr, len)) {
        ucm_filemap_trim(addr, addr + len);
    }
    if (flags & MAP_ANONYMOUS) {
        if (table && ucm_filemap_shared(flags)) {
            ucm_filemap_add_anon(addr, len);
        }
        return;
    }
    if (fd < 0) {
        return;
    }
    if (ucm_sys_syscall6(SYS_fstat, fd, (long)&st, 0, 0, 0, 0) != 0) {
        /* closed meanwhile by another thread: learn it from the maps */
        __atomic_store_n(&ucm_filemap_incomplete, 1, __ATOMIC_SEQ_CST);
        return;
    }
    if (S_ISCHR(st.st_mode) && (st.st_rdev == makedev(1, 5)) &&
        ucm_filemap_shared(flags)) {
        if (table) {
            ucm_filemap_add_anon(addr, len); /* MAP_SHARED of /dev/zero */
        }
        return;
    }
    if (!S_ISREG(st.st_mode)) {
        return; /* a device: nothing truncates it */
    }
    if (ucm_filewatch_on && ucm_filemap_shared(flags)) {
        ucm_filewatch_add_fd(fd, &st);
    }
    if (!table) {
        return;
    }
    e.start         = addr;
    e.end           = addr + len;
    e.offset        = (uint64_t)offset;
    e.key.kind      = UCM_FILEMAP_FILE;
    e.key.ino       = st.st_ino;
    e.key.dev       = st.st_dev;
    e.key.dev_known = 1;
    ucm_filemap_insert(&e);
}

void ucm_filemap_unmapped_slow(uintptr_t addr, size_t len)
{
    len = ucm_filemap_page_up(len);
    if ((len > 0) && (addr + len > addr)) {
        ucm_filemap_trim(addr, addr + len);
    }
}

/* At most this many different keys are carried along by one mremap (the
 * source range is one mapping; more keys are stale entries). */
#define UCM_FILEMAP_REMAP_KEYS 4

void ucm_filemap_remapped_slow(uintptr_t old_addr, size_t old_size,
                               uintptr_t new_addr, size_t new_size, int flags)
{
    uint64_t gen = __atomic_load_n(&ucm_filemap_gen, __ATOMIC_ACQUIRE);
    ucm_filemap_entry_t src[UCM_FILEMAP_REMAP_KEYS], e;
    unsigned i, j, hwm, count = 0;
    uintptr_t probe_end;
    uint64_t word, off;

    old_size = ucm_filemap_page_up(old_size);
    new_size = ucm_filemap_page_up(new_size);
    /* old_size 0 duplicates a shared mapping: its offsets from old_addr */
    probe_end = old_addr + (old_size ? old_size : ucm_sys_page_size());
    if (ucm_filemap_may_overlap(old_addr, probe_end - old_addr)) {
        hwm = __atomic_load_n(&ucm_filemap_hwm, __ATOMIC_ACQUIRE);
        for (i = 0; i < hwm; ++i) {
            if (!ucm_filemap_slot_read(i, &e, &word) ||
                (e.start >= probe_end) || (e.end <= old_addr)) {
                continue;
            }
            for (j = 0;
                 (j < count) && !ucm_filemap_key_match(&src[j].key, &e.key);
                 ++j) {
            }
            if (j < count) {
                continue;
            }
            if (count == UCM_FILEMAP_REMAP_KEYS) {
                __atomic_store_n(&ucm_filemap_incomplete, 1, __ATOMIC_SEQ_CST);
                break;
            }
            /* one mapping maps the file linearly: the offset at old_addr */
            off               = e.offset + old_addr - e.start;
            src[count]        = e;
            src[count].offset = off;
            ++count;
        }
    }
    /* a rebuild meanwhile may have taken the source's entry away before its
     * walk saw the new place: rebuild again at the next lookup */
    if ((gen & 1) ||
        (__atomic_load_n(&ucm_filemap_gen, __ATOMIC_ACQUIRE) != gen)) {
        __atomic_store_n(&ucm_filemap_incomplete, 1, __ATOMIC_SEQ_CST);
    }

    if (new_addr == old_addr) {
        if (new_size < old_size) {
            ucm_filemap_unmapped((void *)(old_addr + new_size),
                                 old_size - new_size);
        }
        for (j = 0; (j < count) && (new_size > old_size); ++j) {
            e        = src[j];
            e.start  = old_addr + old_size;
            e.end    = old_addr + new_size;
            e.offset = src[j].offset + old_size;
            ucm_filemap_insert(&e);
        }
        return;
    }

    /* moved: the target was replaced (MREMAP_FIXED), or held stale entries */
    ucm_filemap_unmapped((void *)new_addr, new_size);
    for (j = 0; j < count; ++j) {
        e       = src[j];
        e.start = new_addr;
        e.end   = new_addr + new_size;
        ucm_filemap_insert(&e);
    }
    if ((old_size > 0) && !(flags & 4 /* MREMAP_DONTUNMAP */)) {
        ucm_filemap_unmapped((void *)old_addr, old_size);
    }
}

void ucm_filemap_shm_attached_slow(uintptr_t addr, size_t size, int shmid)
{
    ucm_filemap_entry_t e;

    size = ucm_filemap_page_up(size);
    if (ucm_filewatch_on) {
        ucm_filewatch_add_shm(addr, size, shmid);
    }
    if (!__atomic_load_n(&ucm_filemap_active, __ATOMIC_SEQ_CST)) {
        return;
    }
    if (size == 0) {
        /* IPC_STAT failed: the walk of the next rebuild will tell */
        __atomic_store_n(&ucm_filemap_incomplete, 1, __ATOMIC_SEQ_CST);
        return;
    }
    ucm_filemap_unmapped((void *)addr, size); /* SHM_REMAP, or stale */
    e.start         = addr;
    e.end           = addr + size;
    e.offset        = 0;
    e.key.kind      = UCM_FILEMAP_SYSV;
    e.key.ino       = (uint64_t)shmid;
    e.key.dev       = 0;
    e.key.dev_known = 0;
    ucm_filemap_insert(&e);
}

void ucm_filemap_shm_detached_slow(uintptr_t addr)
{
    unsigned i, hwm = __atomic_load_n(&ucm_filemap_hwm, __ATOMIC_ACQUIRE);
    ucm_filemap_entry_t e;
    uint64_t word;

    /* like the kernel: every piece of a segment whose offset is its distance
     * from addr belongs to the attachment at addr */
    for (i = 0; i < hwm; ++i) {
        if (ucm_filemap_slot_read(i, &e, &word) &&
            (e.key.kind == UCM_FILEMAP_SYSV) && (e.start >= addr) &&
            (e.start - addr == e.offset)) {
            ucm_filemap_remove(i, word, &e);
        }
    }
}

/* ---- fork ---- */

void ucm_filemap_table_atfork_child(void)
{
    unsigned i, hwm = __atomic_load_n(&ucm_filemap_hwm, __ATOMIC_ACQUIRE);
    uint64_t word;

    for (i = 0; i < hwm; ++i) {
        word = ucm_filemap_slots[i].word;
        if ((word & UCM_FILEMAP_STATE) == UCM_FILEMAP_BUSY) {
            ucm_filemap_slots[i].word =
                (word & ~UCM_FILEMAP_STATE) + UCM_FILEMAP_VER;
        }
    }
}
