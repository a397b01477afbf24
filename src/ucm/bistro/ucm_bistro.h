/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bistro mode: patch the entry of a libc function so that every call to it,
 * including glibc's own internal calls, reaches our hook.
 *
 * Safety while other threads run the function: only the *first instruction*
 * of the function is replaced, with one atomic 8-byte store.  A thread that
 * was about to execute it sees either the old or the new instruction, and a
 * thread stopped after it is not affected.  When that instruction is shorter
 * than a 5-byte jmp, it becomes a 2-byte jmp to never-executed alignment
 * padding next to the function (found from the symbol table), which holds the
 * 5-byte jmp.  The displaced instruction runs from a trampoline placed within
 * +-2 GiB of the function; calling *orig_p runs the original function.
 *
 * Not hook context: uses mprotect and mmap (raw syscalls).  x86_64 only.
 */
#ifndef UCM_BISTRO_H_
#define UCM_BISTRO_H_

#include <ucs/type/status.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ucm_bistro_target {
    uintptr_t entry;      /* function address */
    uintptr_t end;        /* entry + st_size; 0 if unknown */
    uintptr_t next_start; /* next symbol's address above entry; 0 if unknown */
    uintptr_t prev_end;   /* end of the symbol below entry; 0 if unknown */
} ucm_bistro_target_t;

typedef struct ucm_bistro_patch {
    ucm_bistro_target_t target; /* in */
    void *hook;                 /* in: where calls must go */
    void *orig;                 /* out: calls the original function */
    ucs_status_t status;        /* out */
    const char *detail;         /* out: why it failed */
    int chained;                /* out: the entry already jumped
                                   elsewhere (another hooker): orig
                                   runs that hooker */
    /* in: when the first instruction is shorter than a jmp and no padding
     * is in reach, displace as many whole instructions as the jmp covers,
     * as UCX does (the entry is then rewritten with a plain copy: a thread
     * running those instructions at that moment may crash) */
    int multi_ok;
    /* out (valid when status is UCS_OK): what ucm_bistro_write() must put
     * back to undo the patch, entry first */
    uintptr_t site; /* padding holding the 5-byte jmp, or 0 */
    size_t entry_len;
    uint8_t saved_entry[16]; /* the first entry_len bytes before */
    uint8_t saved_site[5];   /* the padding's bytes before (site != 0) */
    /* internal */
    uint8_t entry_bytes[16];
    uint8_t site_bytes[5];
} ucm_bistro_patch_t;

/* Patch all functions with one write-enable of the text.  The trampoline
 * in ->orig runs the displaced instruction, then the rest of the function in
 * place: callers that must not depend on bytes after the first instruction
 * (which a later hooker may overwrite) should use their own equivalent of
 * the original unless ->chained is set.  Each patch gets
 * its own status; returns UCS_OK if all succeeded. */
ucs_status_t ucm_bistro_patch_all(ucm_bistro_patch_t *patches, unsigned count);

/* Write len bytes of code at addr (text made writable for the write and
 * read-only again after it; the instruction cache of valgrind is told).
 * The store is one atomic 8-byte compare-and-swap when the bytes lie in one
 * aligned quadword, else a plain copy.  UCS_OK, or UCS_ERR_INVALID_PARAM if
 * the text cannot be made writable.  Callers serialize with the patching. */
ucs_status_t ucm_bistro_write(uintptr_t addr, const uint8_t *bytes, size_t len);

/* Length of the x86_64 instruction at code (0 if not understood); exposed
 * for the unit tests. */
size_t ucm_bistro_insn_len(const uint8_t *code);

#endif
