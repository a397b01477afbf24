/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libucm's table of this process's mappings of files (internal).
 *
 * Removing pages from a file (ftruncate, truncate, fallocate hole punch,
 * madvise(MADV_REMOVE) through one of its mappings) takes them out of every
 * mapping of the file, through whatever descriptor or mapping the call was
 * made.  To raise VM_UNMAPPED for all those addresses without reading
 * /proc/self/maps on each call, libucm keeps a table of file-backed mappings:
 * regular files (memfd, tmpfs, disk files), SysV shared memory and shared
 * anonymous memory, each with its key (kind, device, inode or shmid), file
 * offset and address range.
 *
 * Feeding: the mmap, munmap, mremap, shmat and shmdt hooks report what they
 * did after a successful call (ucm_filemap_mapped() ... below).  The table is
 * seeded lazily, by one /proc/self/maps walk at the first lookup (so programs
 * that never remove pages of a mapped file pay only the hooks' checks), and
 * rebuilt by another walk whenever it may be incomplete: an insertion found
 * it full, the mmap hook could not fstat() a mapped descriptor, the loader
 * mapped or unmapped objects (dl_iterate_phdr's adds/subs counters moved),
 * or the process forked; and by a lookup for a file the table holds no
 * mapping of (it may be mapped by a raw system call, or by code whose calls
 * are not hooked).
 *
 * Failure mode: over-report, never miss what the table or a walk can know.
 * Entries whose mapping went away behind libucm's back stay until the range
 * is reused or the next rebuild, and only cause extra events.  What no
 * check finds: a file the table knows a mapping of, mapped again by a raw
 * system call (seen from the next rebuild on); see
 * docs/internals-filemap.md.  Without a readable /proc/self/maps a rebuild
 * keeps what the hooks recorded and trusts it (one degradation line,
 * ucm_degrade.h): what no hook saw is then missed.
 *
 * Thread and hook context: every function is lock-free, allocates nothing,
 * keeps errno, and may run in a signal handler (readers never wait for a
 * writer; an interrupted rebuild makes lookups walk /proc/self/maps
 * themselves).  The lookups may read /proc/self/maps and call
 * dl_iterate_phdr() (the loader's lock is recursive).
 */
#ifndef UCM_FILEMAP_H_
#define UCM_FILEMAP_H_

#include <ucs/sys/compiler_def.h>

#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/types.h>

/* What an entry maps. */
typedef enum {
    UCM_FILEMAP_FILE = 1, /* a file: key = device and inode */
    UCM_FILEMAP_SYSV = 2, /* SysV shared memory: key = shmid */
    UCM_FILEMAP_ANON = 3  /* shared anonymous memory: an id of libucm's, or
                             the inode /proc/self/maps shows */
} ucm_filemap_kind_t;

typedef struct {
    uint64_t ino;
    uint64_t dev;
    uint8_t kind;      /* ucm_filemap_kind_t */
    uint8_t dev_known; /* 0: match on kind and inode only (the device of a
                          /proc/self/maps line may differ from st_dev, e.g.
                          btrfs subvolumes) */
} ucm_filemap_key_t;

/* File offsets [lo, hi) of one file. */
typedef struct {
    ucm_filemap_key_t key;
    uint64_t lo, hi;
} ucm_filemap_range_t;

/* Receives merged address ranges; called in hook context. */
typedef void (*ucm_filemap_cb_t)(void *arg, uintptr_t start, size_t len);

/* ---- lookups (the truncation and madvise hooks) ---- */

/* Raise cb for the address of every page of file offsets [lo, hi) (page
 * aligned) in every mapping of 'key': from the table, or from a walk of
 * /proc/self/maps when the table cannot answer.  Ranges may repeat when
 * mappings change meanwhile. */
void ucm_filemap_report_file(const ucm_filemap_key_t *key, uint64_t lo,
                             uint64_t hi, ucm_filemap_cb_t cb, void *arg);

/* The same for the file pages that [addr, addr + len) maps: every mapping of
 * those file offsets, this range included.  'gaps_matter': a part of the
 * range that the table has no entry for may be a file mapping made behind
 * libucm's back (rebuild the table to know), rather than anonymous memory
 * the call does not concern (MADV_REMOVE applies to file mappings only).
 * Returns 1 and sets *file_p (if not NULL) to the file and the offsets
 * looked up when the range maps one file only; 0 otherwise. */
int ucm_filemap_report_range(uintptr_t addr, size_t len, int gaps_matter,
                             ucm_filemap_cb_t cb, void *arg,
                             ucm_filemap_range_t *file_p);

/* ---- the install self-test (not hook context) ---- */

/* Keep the table from now on (so that the test's own mapping is recorded
 * by the hooks); returns whether it was kept before. */
int ucm_filemap_selftest_begin(void);

/* After the test: back to lazy seeding unless the table was kept before,
 * or /proc/self/maps is unreadable (then the hooks' records are all the
 * table has, and it stays kept from here on). */
void ucm_filemap_selftest_end(int was_active);

/* ---- feeding (the hooks, after a successful call) ---- */

void ucm_filemap_mapped_slow(uintptr_t addr, size_t len, int flags, int fd,
                             off_t offset);
void ucm_filemap_unmapped_slow(uintptr_t addr, size_t len);
void ucm_filemap_remapped_slow(uintptr_t old_addr, size_t old_size,
                               uintptr_t new_addr, size_t new_size, int flags);
void ucm_filemap_shm_attached_slow(uintptr_t addr, size_t size, int shmid);
void ucm_filemap_shm_detached_slow(uintptr_t addr);

/* Whether any entry may overlap [addr, addr + len): one summary word per
 * 2 MiB chunk of addresses (hashed into UCM_FILEMAP_BUCKETS): how many
 * entries touch it, and the lowest and highest 4 KiB granule they touch, so
 * that unmapping memory next to a mapped file skips the table.  An entry
 * that spans more chunks than there are buckets is counted in all. */
#define UCM_FILEMAP_CHUNK_SHIFT 21
#define UCM_FILEMAP_GRAIN_SHIFT 12
#define UCM_FILEMAP_BUCKETS     4096

extern uint64_t ucm_filemap_buckets[UCM_FILEMAP_BUCKETS];
extern int ucm_filemap_active; /* the table is being kept */
extern int ucm_filewatch_on;   /* shared files are watched (ucm_filewatch.h) */

static UCS_F_ALWAYS_INLINE unsigned ucm_filemap_bucket_of(uintptr_t chunk)
{
    return (unsigned)(chunk ^ (chunk >> 12)) & (UCM_FILEMAP_BUCKETS - 1);
}

int ucm_filemap_may_overlap_slow(uintptr_t addr, size_t len);

static UCS_F_ALWAYS_INLINE int ucm_filemap_may_overlap(uintptr_t addr,
                                                       size_t len)
{
    /* one chunk that no entry touches: the common case, one load */
    if (ucs_likely(((addr ^ (addr + len - 1)) >> UCM_FILEMAP_CHUNK_SHIFT) ==
                   0) &&
        ucs_likely(__atomic_load_n(&ucm_filemap_buckets[ucm_filemap_bucket_of(
                                       addr >> UCM_FILEMAP_CHUNK_SHIFT)],
                                   __ATOMIC_RELAXED) == 0)) {
        return 0;
    }
    return ucm_filemap_may_overlap_slow(addr, len);
}

/* mmap() returned addr: anonymous private memory costs a flag test unless
 * it replaced something (MAP_FIXED). */
static UCS_F_ALWAYS_INLINE void
ucm_filemap_mapped(void *addr, size_t len, int flags, int fd, off_t offset)
{
    if (((flags & (MAP_ANONYMOUS | MAP_TYPE | MAP_FIXED)) ==
         (MAP_ANONYMOUS | MAP_PRIVATE)) ||
        ucs_likely(!__atomic_load_n(&ucm_filemap_active, __ATOMIC_SEQ_CST) &&
                   !ucm_filewatch_on)) {
        return;
    }
    ucm_filemap_mapped_slow((uintptr_t)addr, len, flags, fd, offset);
}

/* munmap() removed [addr, addr + len). */
static UCS_F_ALWAYS_INLINE void ucm_filemap_unmapped(void *addr, size_t len)
{
    if (ucs_unlikely(ucm_filemap_may_overlap((uintptr_t)addr, len))) {
        ucm_filemap_unmapped_slow((uintptr_t)addr, len);
    }
}

/* mremap() moved or resized [old_addr, + old_size) to [new_addr, +
 * new_size) (flags as given to it). */
static UCS_F_ALWAYS_INLINE void ucm_filemap_remapped(void *old_addr,
                                                     size_t old_size,
                                                     void *new_addr,
                                                     size_t new_size, int flags)
{
    if (ucs_unlikely(__atomic_load_n(&ucm_filemap_active, __ATOMIC_SEQ_CST))) {
        ucm_filemap_remapped_slow((uintptr_t)old_addr, old_size,
                                  (uintptr_t)new_addr, new_size, flags);
    }
}

/* shmat() attached segment shmid of 'size' bytes (page aligned; 0 if its
 * size could not be learned) at addr. */
static UCS_F_ALWAYS_INLINE void ucm_filemap_shm_attached(void *addr,
                                                         size_t size, int shmid)
{
    if (__atomic_load_n(&ucm_filemap_active, __ATOMIC_SEQ_CST) ||
        ucm_filewatch_on) {
        ucm_filemap_shm_attached_slow((uintptr_t)addr, size, shmid);
    }
}

/* shmdt(addr) succeeded: the segment attached at addr is gone. */
static UCS_F_ALWAYS_INLINE void ucm_filemap_shm_detached(const void *addr)
{
    if (__atomic_load_n(&ucm_filemap_active, __ATOMIC_SEQ_CST)) {
        ucm_filemap_shm_detached_slow((uintptr_t)addr);
    }
}

#endif
