/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * reloc mode: write our hooks into the GOT/PLT slots (R_X86_64_JUMP_SLOT and
 * R_X86_64_GLOB_DAT) and the function pointers in initialized data
 * (R_X86_64_64, when still unchanged) of every loaded object, and of objects
 * loaded later (the dlopen hook calls ucm_reloc_update()).  RELRO pages are
 * made writable for the single aligned pointer store and read-only again right
 * after. Thread-safe (one mutex, never taken in hook context of mmap-family
 * calls).
 */
#ifndef UCM_RELOC_H_
#define UCM_RELOC_H_

#include <ucs/type/status.h>
#include <pthread.h>

typedef struct ucm_reloc_patch {
    const char *symbol;
    void *value;
    void *expected; /* what an untouched slot resolves to (libc's) */
    void *resolved; /* the global definition (dlsym RTLD_DEFAULT),
                       which may be an interposer's */
    void *foreign;  /* out: another hooker's function found in a slot
                       (the first one seen), NULL if none */
    int strict;     /* write only slots that hold 'expected', 'resolved',
                       or the object's own lazy-binding stub: a slot bound
                       to another definition (a private allocator's
                       malloc) is left alone and never chained to */
    /* NULL-terminated substrings of object names whose slots are left
     * alone; read only by ucm_reloc_apply_excluding() (must stay valid) */
    char *const *exclude;
} ucm_reloc_patch_t;

/* Add patches to the active set (a patch with the same symbol and value
 * replaces the earlier one) and apply the whole set to every loaded object;
 * ->foreign of each patch tells whether another hooker had the slot (the
 * caller then chains to it).  *written_p (if not NULL): GOT slots written by
 * this call.  UCS_ERR_EXCEEDS_LIMIT if the set is full. */
ucs_status_t ucm_reloc_apply(ucm_reloc_patch_t *patches, unsigned count,
                             unsigned long *written_p);

/* The same, honouring ->exclude of each patch (ucm_reloc_apply() ignores
 * it, so that callers need not set it). */
ucs_status_t ucm_reloc_apply_excluding(ucm_reloc_patch_t *patches,
                                       unsigned count,
                                       unsigned long *written_p);

/* Apply the active set to objects loaded since the last call; forget those
 * that were unloaded. */
void ucm_reloc_update(void);

/* Number of GOT slots written so far (for tests and the info tool). */
unsigned long ucm_reloc_slots_patched(void);

/* dlopen() with the RPATH/RUNPATH of 'caller' searched first, as glibc would
 * have done had the caller called dlopen itself.  Runs in the application's
 * dlopen call (the dlopen hooks), never inside an allocator or a signal
 * handler, so its dladdr1 is no hook-context lookup. */
void *ucm_reloc_dlopen_as(const char *filename, int flag, const void *caller,
                          void *(*orig_dlopen)(const char *, int));

/* Protects the patch set and the table of patched objects. */
extern pthread_mutex_t ucm_reloc_lock;

#endif
