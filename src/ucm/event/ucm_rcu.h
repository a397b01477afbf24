/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Read-copy-update for the handler list.
 *
 * Readers (event dispatch, in hook context) never block and never write a
 * shared cache line: each thread owns a slot in a static array and records
 * there that it is inside a read section, with the grace-period phase it
 * started in.  Writers (handler add/remove, never in hook context) publish a
 * new list, then ucm_rcu_synchronize() waits until no other thread can still
 * be reading the old one.  Ordering between the readers' plain stores and
 * the writer's scan is provided by membarrier(PRIVATE_EXPEDITED) where the
 * kernel has it, else by a full fence in every reader.
 *
 * - Read sections nest (also from signal handlers) and are async-signal-safe.
 * - A thread that calls ucm_rcu_synchronize() from inside its own read
 *   section does not wait for itself.
 * - fork(): the child keeps only the forking thread's slot.
 * - More threads than slots fall back to two shared atomic counters.
 */
#ifndef UCM_RCU_H_
#define UCM_RCU_H_

#include <ucm/util/ucm_hot.h>
#include <ucs/sys/compiler_def.h>

#define UCM_RCU_MAX_THREADS 1024
#define UCM_RCU_NEST_MASK   0x7ffffffful
#define UCM_RCU_PHASE       0x80000000ul

/* Slot i: the first ones in the hot page, the rest in a separate array. */
extern ucm_rcu_slot_t
    ucm_rcu_slots_ext[UCM_RCU_MAX_THREADS - UCM_HOT_RCU_SLOTS];

static UCS_F_ALWAYS_INLINE ucm_rcu_slot_t *ucm_rcu_slot(int i)
{
    return (i < UCM_HOT_RCU_SLOTS) ? &ucm_hot.rcu_slots[i]
                                   : &ucm_rcu_slots_ext[i - UCM_HOT_RCU_SLOTS];
}

/* This thread's slot, NULL until it has one. */
extern __thread ucm_rcu_slot_t *ucm_rcu_tls_slot
    __attribute__((tls_model("initial-exec")));
extern __thread unsigned ucm_rcu_tls_overflow
    __attribute__((tls_model("initial-exec")));

/* Slow path: claim a slot (or use the overflow counters). */
void ucm_rcu_read_lock_slow(void);
void ucm_rcu_read_unlock_slow(void);

static UCS_F_ALWAYS_INLINE void ucm_rcu_read_lock(void)
{
    ucm_rcu_slot_t *slot = ucm_rcu_tls_slot;
    unsigned long ctr;

    if (ucs_unlikely(slot == NULL)) {
        ucm_rcu_read_lock_slow();
        return;
    }
    ctr = slot->ctr;
    if (ucs_likely((ctr & UCM_RCU_NEST_MASK) == 0)) {
        slot->ctr = __atomic_load_n(&ucm_hot.rcu_gp_ctr, __ATOMIC_RELAXED);
    } else {
        slot->ctr = ctr + 1;
    }
    if (ucs_unlikely(ucm_hot.rcu_use_fence)) {
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
    } else {
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
    }
}

static UCS_F_ALWAYS_INLINE void ucm_rcu_read_unlock(void)
{
    ucm_rcu_slot_t *slot = ucm_rcu_tls_slot;

    /* a thread counted in the overflow counters has no slot */
    if (ucs_unlikely(slot == NULL)) {
        ucm_rcu_read_unlock_slow();
        return;
    }
    if (ucs_unlikely(ucm_hot.rcu_use_fence)) {
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
    } else {
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
    }
    slot->ctr = slot->ctr - 1;
}

/* Wait until every read section that may have seen data unpublished before
 * this call has ended.  Caller holds the writer lock; not in hook context. */
void ucm_rcu_synchronize(void);

/* One-time set-up (membarrier registration). */
void ucm_rcu_init(void);

/* fork() support: called in the child by the atfork handler. */
void ucm_rcu_atfork_child(void);

/* Non-zero if the calling thread is inside a read section. */
int ucm_rcu_in_read_section(void);

#endif
