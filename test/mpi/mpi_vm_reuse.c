/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mpi_vm_reuse: does an MPI library (Open MPI, pml/ucx) send the CURRENT
 * contents of a buffer whose memory was released and replaced at the same
 * virtual address since the previous send?
 *
 * A registration cache that misses the release keeps the old memory
 * registration (and the old physical pages, still pinned by it) for the
 * address range; the next zero-copy send then reads the old pages and the
 * receiver gets the previous contents.  Memory events (libucm) prevent it.
 *
 * Rank 0 sends SIZE bytes (large enough for UCX's rendezvous zero-copy
 * protocol, i.e. with memory registration) from a buffer, releases it,
 * gets new memory at the same address with different contents, sends again,
 * GENERATIONS times per variant:
 *   munmap  mmap / munmap / mmap(MAP_FIXED_NOREPLACE) at the same address
 *   free    malloc / free / malloc of an mmap()ed glibc block (the unmap is
 *           glibc-internal)
 *   mremap  new pages moved onto the address (mremap MREMAP_FIXED)
 *   shmdt   SysV segment shmat / shmdt / another segment shmat at the address
 *   brk     heap block at the top of the heap; free() trims the heap (brk
 *           shrinks, glibc-internal), malloc() grows it again
 * and, only when named with -v (they bypass libc, so that no hook can see
 * them: only a userfaultfd monitor of the registered pages does):
 *   rawmunmap   mmap / munmap / mmap(MAP_FIXED_NOREPLACE) at the same
 *               address, by inline syscall instructions (test/common/rawsys.h;
 *               libucm hooks libc's syscall())
 *   madvise     private anonymous mmap; MADV_DONTNEED by an inline syscall
 *               drops its pages (the address stays mapped, the next write
 *               faults in new zero pages), then the new contents are written
 * Rank 1 receives into a fixed buffer and reports, per send, whether it got
 * the new contents, the previous generation's (stale) or neither.
 *
 * Oracles on the sender: the address really is the same, and the memory
 * really was gone in between (mincore() reports the page unmapped, or for
 * mremap the kernel moved other pages there).  A variant where either fails
 * is reported as not tested, never as passed.
 *
 * Usage: mpirun -np 2 mpi_vm_reuse [-s SIZE] [-g GENERATIONS] [-v LIST]
 * (LIST: comma-separated names, default the first five; "all": every one)
 * Output: one "variant NAME: RESULT ..." line per variant on rank 0.
 * Exit status (rank 0): 0 every variant OK; 1 some receiver got wrong data;
 * 3 some variant could not be tested (address not reused / not released);
 * 2 usage or setup error.
 */
#include <mpi.h>

#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../common/rawsys.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define REUSE_TAG_DATA   1
#define REUSE_TAG_RESULT 2
#define REUSE_TRIES      16

enum {
    REUSE_OK,
    REUSE_STALE,
    REUSE_CORRUPT,
    REUSE_NOREUSE,
    REUSE_NOTRELEASED,
    REUSE_ERROR
};
static const char *reuse_result_names[] = {"OK",
                                           "STALE",
                                           "CORRUPT",
                                           "NOT-TESTED(address not reused)",
                                           "NOT-TESTED(memory not released)",
                                           "ERROR"};

typedef struct reuse_buf {
    void *addr; /* what is sent */
    int shmid;  /* shmdt variant */
    size_t page;
} reuse_buf_t;

typedef struct reuse_variant {
    const char *name;
    /* first buffer, filled by the caller */
    int (*acquire)(reuse_buf_t *b, size_t size);
    /* release b->addr and get new memory at the same address holding
     * generation 'gen' (filled here: mremap fills before moving); sets
     * *released if the old memory was verifiably gone in between */
    int (*replace)(reuse_buf_t *b, size_t size, int vid, int gen,
                   int *released);
    void (*dispose)(reuse_buf_t *b, size_t size);
    int by_default; /* run without -v */
} reuse_variant_t;

/* The word at index i of generation gen of variant vid. */
static uint64_t reuse_word(int vid, int gen, size_t i)
{
    return ((uint64_t)(vid + 1) << 56) ^ ((uint64_t)(gen + 1) << 44) ^
           ((uint64_t)i * 0x9e3779b97f4a7c15ull);
}

static void reuse_fill(void *p, size_t size, int vid, int gen)
{
    uint64_t *w = p;
    size_t i;

    for (i = 0; i < size / sizeof(*w); ++i) {
        w[i] = reuse_word(vid, gen, i);
    }
}

/* Words differing from generation gen, and of those, how many hold
 * generation gen - 1's value (*stale). */
static size_t reuse_diff(const void *p, size_t size, int vid, int gen,
                         size_t *stale)
{
    const uint64_t *w = p;
    size_t i, bad = 0;

    *stale = 0;
    for (i = 0; i < size / sizeof(*w); ++i) {
        if (w[i] != reuse_word(vid, gen, i)) {
            ++bad;
            *stale += (gen > 0) && (w[i] == reuse_word(vid, gen - 1, i));
        }
    }
    return bad;
}

/* Is the page holding p unmapped? */
static int reuse_page_unmapped(uintptr_t p, size_t page)
{
    unsigned char vec;
    void *base = (void *)(p & ~(uintptr_t)(page - 1));

    return (mincore(base, page, &vec) != 0) && (errno == ENOMEM);
}

/* --- munmap --- */
static int reuse_mmap_acquire(reuse_buf_t *b, size_t size)
{
    b->addr = mmap(NULL, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return (b->addr == MAP_FAILED) ? -1 : 0;
}

static int reuse_mmap_replace(reuse_buf_t *b, size_t size, int vid, int gen,
                              int *released)
{
    void *p;

    if (munmap(b->addr, size) != 0) {
        return -1;
    }
    *released = reuse_page_unmapped((uintptr_t)b->addr, b->page);
    p         = mmap(b->addr, size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED) {
        return -1;
    }
    b->addr = p; /* another address if the kernel ignored the flag */
    reuse_fill(p, size, vid, gen);
    return 0;
}

static void reuse_mmap_dispose(reuse_buf_t *b, size_t size)
{
    munmap(b->addr, size);
}

/* --- rawmunmap: the system calls without libc (no hook sees them) --- */
static int reuse_rawmunmap_replace(reuse_buf_t *b, size_t size, int vid,
                                   int gen, int *released)
{
    void *p;

    if (UCMT_RAWSYS(SYS_munmap, (long)b->addr, (long)size) != 0) {
        return -1;
    }
    *released = reuse_page_unmapped((uintptr_t)b->addr, b->page);
    p         = (void *)UCMT_RAWSYS(
                SYS_mmap, (long)b->addr, (long)size, (long)(PROT_READ | PROT_WRITE),
                (long)(MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE), -1L, 0L);
    if (p == MAP_FAILED) {
        return -1;
    }
    b->addr = p;
    reuse_fill(p, size, vid, gen);
    return 0;
}

/* --- madvise: MADV_DONTNEED by system call, new pages at the address --- */
static int reuse_madvise_replace(reuse_buf_t *b, size_t size, int vid, int gen,
                                 int *released)
{
    unsigned char vec = 1;

    if (UCMT_RAWSYS(SYS_madvise, (long)b->addr, (long)size,
                    (long)MADV_DONTNEED) != 0) {
        return -1;
    }
    /* still mapped, but the page is no longer present: the pages that were
     * registered are gone from the address (and the old contents with
     * them, as far as the process can see) */
    *released = (mincore(b->addr, b->page, &vec) == 0) && !(vec & 1) &&
                (*(volatile uint64_t *)b->addr == 0);
    reuse_fill(b->addr, size, vid, gen);
    return 0;
}

/* --- free (glibc mmap()ed block) --- */
static int reuse_malloc_acquire(reuse_buf_t *b, size_t size)
{
    b->addr = malloc(size);
    return (b->addr == NULL) ? -1 : 0;
}

/* malloc(size) until it returns 'want' (keeping the misses meanwhile). */
static void *reuse_malloc_at(uintptr_t want, size_t size)
{
    void *got[REUSE_TRIES], *p = NULL;
    int n;

    for (n = 0; n < REUSE_TRIES; ++n) {
        got[n] = malloc(size);
        if ((got[n] == NULL) || ((uintptr_t)got[n] == want)) {
            p = got[n];
            break;
        }
    }
    while (n-- > 0) {
        free(got[n]);
    }
    return (p != NULL) ? p : malloc(size);
}

static int reuse_free_replace(reuse_buf_t *b, size_t size, int vid, int gen,
                              int *released)
{
    uintptr_t old = (uintptr_t)b->addr;

    free(b->addr);
    *released = reuse_page_unmapped(old, b->page);
    b->addr   = reuse_malloc_at(old, size);
    if (b->addr == NULL) {
        return -1;
    }
    reuse_fill(b->addr, size, vid, gen);
    return 0;
}

static void reuse_free_dispose(reuse_buf_t *b, size_t size)
{
    (void)size;
    free(b->addr);
}

/* --- mremap: other pages moved onto the address --- */
static int reuse_mremap_replace(reuse_buf_t *b, size_t size, int vid, int gen,
                                int *released)
{
    void *fresh, *p;

    fresh = mmap(NULL, size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (fresh == MAP_FAILED) {
        return -1;
    }
    reuse_fill(fresh, size, vid, gen);
    p = mremap(fresh, size, size, MREMAP_MAYMOVE | MREMAP_FIXED, b->addr);
    if (p == MAP_FAILED) {
        munmap(fresh, size);
        return -1;
    }
    /* the old pages at the address were replaced by the kernel */
    *released =
        (p == b->addr) && reuse_page_unmapped((uintptr_t)fresh, b->page);
    b->addr = p;
    return 0;
}

/* --- shmdt --- */
static int reuse_shm_attach(reuse_buf_t *b, size_t size, void *at)
{
    void *p;

    b->shmid = shmget(IPC_PRIVATE, size, IPC_CREAT | 0600);
    if (b->shmid < 0) {
        return -1;
    }
    p = shmat(b->shmid, at, 0);
    /* destroyed when detached */
    shmctl(b->shmid, IPC_RMID, NULL);
    if (p == (void *)-1) {
        return -1;
    }
    b->addr = p;
    return 0;
}

static int reuse_shm_acquire(reuse_buf_t *b, size_t size)
{
    return reuse_shm_attach(b, size, NULL);
}

static int reuse_shm_replace(reuse_buf_t *b, size_t size, int vid, int gen,
                             int *released)
{
    void *old = b->addr;

    if (shmdt(old) != 0) {
        return -1;
    }
    *released = reuse_page_unmapped((uintptr_t)old, b->page);
    if (reuse_shm_attach(b, size, old) != 0) {
        return -1;
    }
    reuse_fill(b->addr, size, vid, gen);
    return 0;
}

static void reuse_shm_dispose(reuse_buf_t *b, size_t size)
{
    (void)size;
    shmdt(b->addr);
}

/* --- brk: heap trim by free(), heap growth by malloc() --- */
static int reuse_brk_replace(reuse_buf_t *b, size_t size, int vid, int gen,
                             int *released)
{
    uintptr_t old = (uintptr_t)b->addr;
    uintptr_t brk_end;

    free(b->addr);
    /* trimmed if the program break moved into the block (glibc keeps the
     * block's first, partial page) and the pages above it are gone */
    brk_end   = (uintptr_t)sbrk(0);
    *released = (brk_end > old) && (brk_end < old + size) &&
                reuse_page_unmapped(brk_end, b->page);
    b->addr = reuse_malloc_at(old, size);
    if (b->addr == NULL) {
        return -1;
    }
    reuse_fill(b->addr, size, vid, gen);
    return 0;
}

static const reuse_variant_t reuse_variants[] = {
    {"munmap", reuse_mmap_acquire, reuse_mmap_replace, reuse_mmap_dispose, 1},
    {"free", reuse_malloc_acquire, reuse_free_replace, reuse_free_dispose, 1},
    {"mremap", reuse_mmap_acquire, reuse_mremap_replace, reuse_mmap_dispose, 1},
    {"shmdt", reuse_shm_acquire, reuse_shm_replace, reuse_shm_dispose, 1},
    {"brk", reuse_malloc_acquire, reuse_brk_replace, reuse_free_dispose, 1},
    {"rawmunmap", reuse_mmap_acquire, reuse_rawmunmap_replace,
     reuse_mmap_dispose, 0},
    {"madvise", reuse_mmap_acquire, reuse_madvise_replace, reuse_mmap_dispose,
     0},
};
#define REUSE_NUM_VARIANTS                                                     \
    ((int)(sizeof(reuse_variants) / sizeof(reuse_variants[0])))

/* glibc's allocator: 'free' needs blocks of 'size' served by mmap() (a fixed
 * threshold, so that free() does not raise it), 'brk' needs them on the heap
 * with the heap trimmed on free(). */
static void reuse_malloc_setup(const char *name, size_t size)
{
    if (!strcmp(name, "free")) {
        mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    } else if (!strcmp(name, "brk")) {
        mallopt(M_MMAP_THRESHOLD, (int)(4 * size));
        mallopt(M_TRIM_THRESHOLD, 128 * 1024);
        mallopt(M_TOP_PAD, 0);
    }
}

static double reuse_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (ts.tv_sec * 1e6) + (ts.tv_nsec / 1e3);
}

/* Receiver's report for one send. */
typedef struct {
    long bad_words;   /* differing from the expected generation */
    long stale_words; /* of those, holding the previous generation's value */
} reuse_report_t;

static int reuse_sender(int vid, size_t size, int gens)
{
    const reuse_variant_t *v = &reuse_variants[vid];
    reuse_buf_t b            = {NULL, -1, (size_t)sysconf(_SC_PAGESIZE)};
    int result = REUSE_OK, gen, released, status, ok_gens = 0;
    double t0, send_us = 0;
    reuse_report_t rep;
    void *first;

    reuse_malloc_setup(v->name, size);
    status = v->acquire(&b, size);
    if (status == 0) {
        reuse_fill(b.addr, size, vid, 0);
    }
    first = b.addr;
    for (gen = 0; gen < gens; ++gen) {
        released = 1;
        if ((gen > 0) && (status == 0)) {
            status = v->replace(&b, size, vid, gen, &released);
        }
        /* the receiver is told whether to expect data */
        int go = (status == 0);
        MPI_Send(&go, 1, MPI_INT, 1, REUSE_TAG_DATA, MPI_COMM_WORLD);
        if (!go) {
            fprintf(stderr, "variant %s: generation %d: %s failed: %s\n",
                    v->name, gen, (gen == 0) ? "acquire" : "replace",
                    strerror(errno));
            result = REUSE_ERROR;
            break;
        }
        t0 = reuse_now_us();
        MPI_Send(b.addr, (int)size, MPI_BYTE, 1, REUSE_TAG_DATA,
                 MPI_COMM_WORLD);
        send_us += reuse_now_us() - t0;
        MPI_Recv(&rep, 2, MPI_LONG, 1, REUSE_TAG_RESULT, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        if (rep.bad_words == 0) {
            if (b.addr != first) {
                result = (result == REUSE_OK) ? REUSE_NOREUSE : result;
            } else if (!released) {
                result = (result == REUSE_OK) ? REUSE_NOTRELEASED : result;
            } else if (gen > 0) {
                ++ok_gens;
            }
        } else if (rep.stale_words == rep.bad_words) {
            result = REUSE_STALE;
        } else if (result != REUSE_STALE) {
            result = REUSE_CORRUPT;
        }
        if (rep.bad_words != 0) {
            printf("variant %s: generation %d at %p: receiver got %ld/%zu "
                   "words wrong (%s)\n",
                   v->name, gen, b.addr, rep.bad_words, size / sizeof(uint64_t),
                   (rep.stale_words == rep.bad_words)
                       ? "all of them the previous generation's: stale "
                         "registration"
                       : "not all of them the previous contents");
        }
    }
    if (status == 0) {
        v->dispose(&b, size);
    }
    printf("variant %s: %s (%d/%d sends after replacement correct and "
           "verified; same address %s; %.0f us per send)\n",
           v->name, reuse_result_names[result], ok_gens,
           (gens > 1) ? gens - 1 : 0, (b.addr == first) ? "yes" : "no",
           send_us / gens);
    fflush(stdout);
    return result;
}

static void reuse_receiver(int vid, size_t size, int gens, void *rbuf)
{
    reuse_report_t rep;
    size_t stale;
    int gen, go;

    for (gen = 0; gen < gens; ++gen) {
        MPI_Recv(&go, 1, MPI_INT, 0, REUSE_TAG_DATA, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        if (!go) {
            return;
        }
        memset(rbuf, 0, size);
        MPI_Recv(rbuf, (int)size, MPI_BYTE, 0, REUSE_TAG_DATA, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        rep.bad_words   = (long)reuse_diff(rbuf, size, vid, gen, &stale);
        rep.stale_words = (long)stale;
        MPI_Send(&rep, 2, MPI_LONG, 0, REUSE_TAG_RESULT, MPI_COMM_WORLD);
    }
}

static int reuse_selected(const char *list, const reuse_variant_t *v)
{
    const char *name = v->name;
    size_t len       = strlen(name);
    const char *p;

    if (list == NULL) {
        return v->by_default;
    }
    if (!strcmp(list, "all")) {
        return 1;
    }
    for (p = list; (p = strstr(p, name)) != NULL; p += len) {
        if (((p == list) || (p[-1] == ',')) &&
            ((p[len] == '\0') || (p[len] == ','))) {
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    size_t size      = 4ul << 20;
    const char *list = NULL;
    int rank, nprocs, opt, vid, gens = 3, res, worst = 0, code;
    void *rbuf = NULL;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    while ((opt = getopt(argc, argv, "s:g:v:")) != -1) {
        switch (opt) {
        case 's': size = strtoul(optarg, NULL, 0); break;
        case 'g': gens = atoi(optarg); break;
        case 'v': list = optarg; break;
        default: size = 0; break;
        }
    }
    size &= ~(size_t)(sizeof(uint64_t) - 1);
    if ((nprocs != 2) || (size == 0) || (size > (1ul << 30)) || (gens < 2)) {
        if (rank == 0) {
            fprintf(stderr,
                    "usage: mpirun -np 2 %s [-s SIZE (8..1G)] "
                    "[-g GENERATIONS (>=2)] "
                    "[-v all|munmap,free,mremap,shmdt,brk,rawmunmap,madvise]\n",
                    argv[0]);
        }
        MPI_Finalize();
        return 2;
    }
    if (rank == 1) {
        rbuf = malloc(size);
        if (rbuf == NULL) {
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    } else {
        printf("mpi_vm_reuse: %zu bytes, %d generations per variant\n", size,
               gens);
    }
    for (vid = 0; vid < REUSE_NUM_VARIANTS; ++vid) {
        if (!reuse_selected(list, &reuse_variants[vid])) {
            continue;
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            res   = reuse_sender(vid, size, gens);
            worst = (res > worst) ? res : worst;
        } else {
            reuse_receiver(vid, size, gens, rbuf);
        }
    }
    free(rbuf);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    if (rank != 0) {
        return 0;
    }
    code = (worst == REUSE_OK)                                    ? 0
           : ((worst == REUSE_STALE) || (worst == REUSE_CORRUPT)) ? 1
           : (worst == REUSE_ERROR)                               ? 2
                                                                  : 3;
    printf("mpi_vm_reuse: %s\n", (code == 0)   ? "all variants OK"
                                 : (code == 1) ? "WRONG DATA received"
                                 : (code == 3) ? "some variants not tested"
                                               : "error");
    return code;
}
