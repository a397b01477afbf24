/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Removals that a hook reports itself; see ucm_filewatch_recent.h.
 *
 * Each slot has a state word: generation << 3 | SEEN | state.  The hook
 * claims a FREE slot (compare-and-swap to FILLING), fills it and publishes
 * it ARMED; after its call it moves it to DONE, or frees it when the call
 * failed or the watch saw it armed.  The watch thread copies a slot and
 * checks that the generation did not change meanwhile; it frees a DONE
 * slot with a compare-and-swap.  Freeing bumps the generation.
 */
#include "ucm_filewatch_recent.h"

#include "ucm_filemap_int.h"

#include <stdint.h>

#define UCM_FW_RECENT_FREE    0ul
#define UCM_FW_RECENT_FILLING 1ul
#define UCM_FW_RECENT_ARMED   2ul
#define UCM_FW_RECENT_DONE    3ul
#define UCM_FW_RECENT_STATE   3ul
#define UCM_FW_RECENT_SEEN    4ul
#define UCM_FW_RECENT_GEN     8ul /* one generation */

typedef struct {
    unsigned long word;
    ucm_filemap_range_t range;
} ucm_filewatch_recent_slot_t;

static ucm_filewatch_recent_slot_t ucm_filewatch_recent[UCM_FILEWATCH_RECENT];

static unsigned long ucm_filewatch_recent_freed(unsigned long word)
{
    return (word & ~(UCM_FW_RECENT_GEN - 1)) + UCM_FW_RECENT_GEN;
}

unsigned ucm_filewatch_recent_arm(const ucm_filemap_range_t *range)
{
    ucm_filewatch_recent_slot_t *s;
    unsigned long word;
    unsigned i;

    for (i = 0; i < UCM_FILEWATCH_RECENT; ++i) {
        s    = &ucm_filewatch_recent[i];
        word = __atomic_load_n(&s->word, __ATOMIC_RELAXED);
        if (((word & UCM_FW_RECENT_STATE) != UCM_FW_RECENT_FREE) ||
            !__atomic_compare_exchange_n(&s->word, &word,
                                         word | UCM_FW_RECENT_FILLING, 0,
                                         __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
            continue;
        }
        s->range = *range;
        /* published before the call that queues the event */
        __atomic_store_n(&s->word, word | UCM_FW_RECENT_ARMED,
                         __ATOMIC_SEQ_CST);
        return i + 1;
    }
    return 0;
}

void ucm_filewatch_recent_done(unsigned token, int ok)
{
    ucm_filewatch_recent_slot_t *s;
    unsigned long word, next;

    if ((token == 0) || (token > UCM_FILEWATCH_RECENT)) {
        return;
    }
    s    = &ucm_filewatch_recent[token - 1];
    word = __atomic_load_n(&s->word, __ATOMIC_ACQUIRE);
    do {
        /* seen while armed: its own event may have been in that batch, and
         * a later event of the file must not be taken for it */
        next = (!ok || (word & UCM_FW_RECENT_SEEN))
                   ? ucm_filewatch_recent_freed(word)
                   : ((word & ~UCM_FW_RECENT_STATE) | UCM_FW_RECENT_DONE);
    } while (!__atomic_compare_exchange_n(&s->word, &word, next, 0,
                                          __ATOMIC_SEQ_CST, __ATOMIC_ACQUIRE));
}

static void ucm_filewatch_recent_insert(ucm_filemap_range_t *out, unsigned n,
                                        const ucm_filemap_range_t *r)
{
    unsigned i = n;

    while ((i > 0) && (out[i - 1].lo > r->lo)) {
        out[i] = out[i - 1];
        --i;
    }
    out[i] = *r;
}

unsigned ucm_filewatch_recent_take(const ucm_filemap_key_t *key,
                                   ucm_filemap_range_t *out, unsigned max)
{
    ucm_filewatch_recent_slot_t *s;
    ucm_filemap_range_t copy;
    unsigned long word, state;
    unsigned i, n = 0;

    for (i = 0; (i < UCM_FILEWATCH_RECENT) && (n < max); ++i) {
        s     = &ucm_filewatch_recent[i];
        word  = __atomic_load_n(&s->word, __ATOMIC_SEQ_CST);
        state = word & UCM_FW_RECENT_STATE;
        if ((state != UCM_FW_RECENT_ARMED) && (state != UCM_FW_RECENT_DONE)) {
            continue;
        }
        copy = s->range;
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (((__atomic_load_n(&s->word, __ATOMIC_RELAXED) ^ word) &
             ~(UCM_FW_RECENT_GEN - 1)) ||
            !ucm_filemap_key_match(&copy.key, key)) {
            continue; /* refilled meanwhile, or another file */
        }
        if (state == UCM_FW_RECENT_DONE) {
            /* its own event: this one, or merged into it */
            if (!__atomic_compare_exchange_n(
                    &s->word, &word, ucm_filewatch_recent_freed(word), 0,
                    __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
                continue;
            }
        } else if (!__atomic_compare_exchange_n(
                       &s->word, &word, word | UCM_FW_RECENT_SEEN, 0,
                       __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
            /* done meanwhile: read again */
            --i;
            continue;
        }
        ucm_filewatch_recent_insert(out, n++, &copy);
    }
    return n;
}

void ucm_filewatch_recent_clear(int all)
{
    unsigned long word;
    unsigned i;

    for (i = 0; i < UCM_FILEWATCH_RECENT; ++i) {
        word = __atomic_load_n(&ucm_filewatch_recent[i].word, __ATOMIC_RELAXED);
        if (all || ((word & UCM_FW_RECENT_STATE) == UCM_FW_RECENT_DONE)) {
            __atomic_compare_exchange_n(&ucm_filewatch_recent[i].word, &word,
                                        ucm_filewatch_recent_freed(word), 0,
                                        __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
        }
    }
}
