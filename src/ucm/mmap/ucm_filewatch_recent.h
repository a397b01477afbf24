/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Removals that a hook reports itself, for the file watch (internal).
 *
 * A hooked truncation, hole punch or MADV_REMOVE raises VM_UNMAPPED for the
 * removed offsets itself, before and after the call; the kernel also
 * queues an inotify event for it, which the watch thread reads later.  The
 * hook records (file, offsets) here before its call and marks the record
 * done after its second report; the watch thread leaves those offsets out
 * of its report of that file's event, and takes a done record away with
 * the first event of its file that it reads (or with the file's
 * IN_IGNORED); only watched files get records (ucm_filewatch_watched), so
 * every done record has an event coming.  UCM_FILEWATCH_RECENT slots;
 * when all are busy the hook records nothing and the watch reports the
 * offsets once more (an extra invalidation, never a miss).
 *
 * Contract: lock-free, no allocation; the hook side is hook context.  A
 * hook that got a token must report its offsets after the call whatever
 * the call returned (the watch may have left them out of an event of
 * another caller while the record was armed).
 */
#ifndef UCM_FILEWATCH_RECENT_H_
#define UCM_FILEWATCH_RECENT_H_

#include "ucm_filemap.h"

#define UCM_FILEWATCH_RECENT 16

/* Before the call: record what the hook reports; a token, or 0 (full). */
unsigned ucm_filewatch_recent_arm(const ucm_filemap_range_t *range);

/* After the call and the hook's second report: ok = the call succeeded
 * (a failed call queued no event: its record goes at once). */
void ucm_filewatch_recent_done(unsigned token, int ok);

/* Watch thread, for one event of file key: the offsets of the records of
 * key, at most max, into out (sorted by lo); done records are taken away,
 * armed ones marked seen (their own event may be in this batch, so they go
 * when done).  Returns how many. */
unsigned ucm_filewatch_recent_take(const ucm_filemap_key_t *key,
                                   ucm_filemap_range_t *out, unsigned max);

/* Forget the done records (events were lost); with all, the armed ones
 * too (a forked child: their hooks run in the parent). */
void ucm_filewatch_recent_clear(int all);

#endif
