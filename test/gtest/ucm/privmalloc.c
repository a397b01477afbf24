/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A module with an allocator of its own (test_heap_reloc.cc): it defines
 * malloc and free (a bump allocator over a static array that counts its
 * calls) and calls them through its own PLT.  dlopen()ed with RTLD_LOCAL |
 * RTLD_DEEPBIND, its PLT slots bind to these definitions while the rest of
 * the process keeps glibc's: libucm's malloc wrappers must leave those slots
 * alone (a wrapper would hand the calls to glibc).
 *
 * Not thread-safe: one test calls it at a time.
 */
#include <stddef.h>
#include <stdint.h>

#define UCMT_PRIV_ARENA_SIZE (4ul << 20)
#define UCMT_PRIV_ALIGN      64ul

static char ucmt_priv_arena[UCMT_PRIV_ARENA_SIZE]
    __attribute__((aligned(UCMT_PRIV_ALIGN)));
static size_t ucmt_priv_used;
static unsigned long ucmt_priv_nmalloc, ucmt_priv_nfree, ucmt_priv_live;

/* Called through this module's PLT (default visibility: interposable). */
void *malloc(size_t size)
{
    size_t need = (size + UCMT_PRIV_ALIGN - 1) & ~(UCMT_PRIV_ALIGN - 1);
    void *mem;

    ++ucmt_priv_nmalloc;
    if ((need == 0) || (need > UCMT_PRIV_ARENA_SIZE - ucmt_priv_used)) {
        return NULL;
    }
    mem = ucmt_priv_arena + ucmt_priv_used;
    ucmt_priv_used += need;
    ++ucmt_priv_live;
    return mem;
}

void free(void *mem)
{
    ++ucmt_priv_nfree;
    if ((mem == NULL) || (ucmt_priv_live == 0)) {
        return;
    }
    if (--ucmt_priv_live == 0) {
        ucmt_priv_used = 0; /* everything freed: start over */
    }
}

/* Allocate 'count' blocks of 'size' bytes with this module's malloc (through
 * its PLT) into 'blocks', writing each one; returns how many succeeded. */
unsigned ucmt_priv_alloc(void **blocks, unsigned count, size_t size)
{
    unsigned i, n = 0;

    for (i = 0; i < count; ++i) {
        blocks[i] = malloc(size);
        if (blocks[i] != NULL) {
            ((volatile char *)blocks[i])[0]        = (char)i;
            ((volatile char *)blocks[i])[size - 1] = (char)i;
            ++n;
        }
    }
    return n;
}

/* free() every block (through the PLT), last first. */
void ucmt_priv_free(void **blocks, unsigned count)
{
    while (count > 0) {
        free(blocks[--count]);
    }
}

unsigned long ucmt_priv_malloc_calls(void)
{
    return ucmt_priv_nmalloc;
}

unsigned long ucmt_priv_free_calls(void)
{
    return ucmt_priv_nfree;
}

/* Non-zero if 'mem' lies in this module's array. */
int ucmt_priv_owns(const void *mem)
{
    return ((uintptr_t)mem >= (uintptr_t)ucmt_priv_arena) &&
           ((uintptr_t)mem < (uintptr_t)ucmt_priv_arena + UCMT_PRIV_ARENA_SIZE);
}

void ucmt_priv_range(void **start_p, size_t *len_p)
{
    *start_p = ucmt_priv_arena;
    *len_p   = UCMT_PRIV_ARENA_SIZE;
}
