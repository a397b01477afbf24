/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The table of file-backed mappings, shared by its two halves (internal to
 * src/ucm/mmap): ucm_filemap_table.c keeps the slots and feeds them from the
 * hooks, ucm_filemap.c answers lookups and rebuilds the table from
 * /proc/self/maps.  Contract: ucm_filemap.h.
 *
 * Slots: a fixed array scanned up to a high-water mark.  Each slot has a
 * state word (version << 2 | FREE, BUSY or LIVE): a writer claims a FREE
 * slot with a compare-and-swap (BUSY), fills it and publishes it (LIVE); a
 * removal swaps LIVE to FREE.  A LIVE slot is never changed in place: a
 * mapping that shrinks or splits gets new slots for what remains, inserted
 * before the old one is removed, so a mapping that exists is always covered
 * by some LIVE slot.  Readers copy a slot and check that its word did not
 * change meanwhile; they never wait.
 *
 * A reader scanning the slots can pass over a slot that is filled later
 * (the remainder of a split mapping) and then find its predecessor already
 * removed: every insertion therefore bumps ucm_filemap_ins_seq, and a scan
 * that saw it move scans again (a few times, then walks /proc/self/maps).
 * A rebuild makes ucm_filemap_gen odd while it empties and refills the
 * table; lookups meanwhile walk /proc/self/maps themselves.
 */
#ifndef UCM_FILEMAP_INT_H_
#define UCM_FILEMAP_INT_H_

#include "ucm_filemap.h"

#define UCM_FILEMAP_SLOTS 4096

typedef struct {
    uintptr_t start;
    uintptr_t end;
    uint64_t offset; /* file offset at start */
    ucm_filemap_key_t key;
} ucm_filemap_entry_t;

extern unsigned ucm_filemap_hwm;     /* slots ever used */
extern uint64_t ucm_filemap_ins_seq; /* insertions so far */
extern uint64_t ucm_filemap_gen;     /* odd while a rebuild runs */
extern int ucm_filemap_incomplete;   /* rebuild before trusting the table */
extern unsigned ucm_filemap_live;    /* LIVE slots */

int ucm_filemap_key_match(const ucm_filemap_key_t *a,
                          const ucm_filemap_key_t *b);

/* Copy slot i if it is LIVE; *word_p: the state word it was copied under. */
int ucm_filemap_slot_read(unsigned i, ucm_filemap_entry_t *e, uint64_t *word_p);

/* 0 if the table is full (it is then marked incomplete). */
int ucm_filemap_insert(const ucm_filemap_entry_t *e);

/* Remove slot i if it still holds what was read under 'word'. */
void ucm_filemap_remove(unsigned i, uint64_t word,
                        const ucm_filemap_entry_t *e);

/* Remove every entry (a rebuild). */
void ucm_filemap_clear(void);

/* Lower the high-water mark to the slots in use; only while the caller
 * holds ucm_filemap_gen odd (readers do not scan then). */
void ucm_filemap_hwm_lower(void);

size_t ucm_filemap_page_up(size_t len);

/* Free the slots that threads which do not exist in a fork child were
 * filling. */
void ucm_filemap_table_atfork_child(void);

#endif
