/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Read-copy-update for the handler list; see ucm_rcu.h.
 */
#include "ucm_rcu.h"

#include <ucm/util/ucm_log.h>
#include <ucm/util/ucm_sys.h>

#include <errno.h>
#include <signal.h>

/* membarrier commands (linux/membarrier.h) */
#define UCM_MEMBARRIER_CMD_QUERY                      0
#define UCM_MEMBARRIER_CMD_PRIVATE_EXPEDITED          (1 << 3)
#define UCM_MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED (1 << 4)

ucm_rcu_slot_t ucm_rcu_slots_ext[UCM_RCU_MAX_THREADS - UCM_HOT_RCU_SLOTS];
__thread ucm_rcu_slot_t *ucm_rcu_tls_slot
    __attribute__((tls_model("initial-exec")));
__thread unsigned ucm_rcu_tls_overflow
    __attribute__((tls_model("initial-exec")));
static __thread unsigned long ucm_rcu_tls_overflow_phase
    __attribute__((tls_model("initial-exec")));

/* One past the highest slot ever claimed: writers scan only [0, high). */
static volatile int ucm_rcu_slots_high;

/* Readers without a slot: one counter per phase. */
static volatile long ucm_rcu_overflow_count[2];

static void ucm_rcu_slots_high_raise(int high)
{
    int cur = __atomic_load_n(&ucm_rcu_slots_high, __ATOMIC_RELAXED);

    while ((cur < high) &&
           !__atomic_compare_exchange_n(&ucm_rcu_slots_high, &cur, high, 0,
                                        __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
    }
}

static int ucm_rcu_slot_claim(long tid, int check_alive)
{
    long pid = ucm_sys_getpid();
    long owner;
    int i;

    for (i = 0; i < UCM_RCU_MAX_THREADS; ++i) {
        owner = ucm_rcu_slot(i)->tid;
        if ((owner != 0) && (!check_alive || (ucm_rcu_slot(i)->ctr != 0) ||
                             (ucm_sys_tgkill(pid, owner, 0) != -ESRCH))) {
            continue;
        }
        if (__atomic_compare_exchange_n(&ucm_rcu_slot(i)->tid, &owner, tid, 0,
                                        __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
            ucm_rcu_slots_high_raise(i + 1);
            return i + 1;
        }
    }
    return 0;
}

void ucm_rcu_read_lock_slow(void)
{
    long tid = ucm_sys_gettid();
    unsigned long phase;
    int idx;

    if (ucm_rcu_tls_overflow == 0) {
        idx = ucm_rcu_slot_claim(tid, 0);
        if (idx == 0) {
            /* all slots taken: reclaim those of threads that have exited */
            idx = ucm_rcu_slot_claim(tid, 1);
        }
        if (idx > 0) {
            ucm_rcu_tls_slot = ucm_rcu_slot(idx - 1);
            ucm_rcu_read_lock();
            return;
        }
    }
    /* No slot: count this reader in the shared counter of the current phase */
    if (ucm_rcu_tls_overflow++ == 0) {
        phase = __atomic_load_n(&ucm_hot.rcu_gp_ctr, __ATOMIC_SEQ_CST) &
                UCM_RCU_PHASE;
        ucm_rcu_tls_overflow_phase = phase;
        __atomic_fetch_add(&ucm_rcu_overflow_count[phase ? 1 : 0], 1,
                           __ATOMIC_SEQ_CST);
    }
}

void ucm_rcu_read_unlock_slow(void)
{
    if (--ucm_rcu_tls_overflow == 0) {
        __atomic_fetch_sub(
            &ucm_rcu_overflow_count[ucm_rcu_tls_overflow_phase ? 1 : 0], 1,
            __ATOMIC_SEQ_CST);
    }
}

int ucm_rcu_in_read_section(void)
{
    ucm_rcu_slot_t *slot = ucm_rcu_tls_slot;

    return (ucm_rcu_tls_overflow > 0) ||
           ((slot != NULL) && (slot->ctr & UCM_RCU_NEST_MASK));
}

static void ucm_rcu_full_barrier(void)
{
    if (!ucm_hot.rcu_use_fence) {
        ucm_sys_membarrier(UCM_MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0);
    }
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

static void ucm_rcu_wait_phase(unsigned long old_phase)
{
    ucm_rcu_slot_t *self = ucm_rcu_tls_slot;
    unsigned long ctr, spins;
    int high = __atomic_load_n(&ucm_rcu_slots_high, __ATOMIC_SEQ_CST);
    long own_overflow;
    int i;

    for (i = 0; i < high; ++i) {
        if ((ucm_rcu_slot(i) == self) || (ucm_rcu_slot(i)->tid == 0)) {
            continue;
        }
        for (spins = 0;; ++spins) {
            ctr = ucm_rcu_slot(i)->ctr;
            if (!(ctr & UCM_RCU_NEST_MASK) ||
                ((ctr & UCM_RCU_PHASE) != old_phase)) {
                break;
            }
            if (spins > 100) {
                ucm_sys_sched_yield();
            }
        }
    }

    own_overflow = ((ucm_rcu_tls_overflow > 0) &&
                    (ucm_rcu_tls_overflow_phase == old_phase))
                       ? 1
                       : 0;
    while (__atomic_load_n(&ucm_rcu_overflow_count[old_phase ? 1 : 0],
                           __ATOMIC_SEQ_CST) > own_overflow) {
        ucm_sys_sched_yield();
    }
}

void ucm_rcu_synchronize(void)
{
    unsigned long old_phase;
    int round;

    ucm_rcu_full_barrier();
    for (round = 0; round < 2; ++round) {
        old_phase = ucm_hot.rcu_gp_ctr & UCM_RCU_PHASE;
        __atomic_store_n(&ucm_hot.rcu_gp_ctr,
                         ucm_hot.rcu_gp_ctr ^ UCM_RCU_PHASE, __ATOMIC_SEQ_CST);
        ucm_rcu_full_barrier();
        ucm_rcu_wait_phase(old_phase);
    }
    ucm_rcu_full_barrier();
}

void ucm_rcu_init(void)
{
    long cmds = ucm_sys_membarrier(UCM_MEMBARRIER_CMD_QUERY, 0);

    if ((cmds >= 0) && (cmds & UCM_MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
        (ucm_sys_membarrier(UCM_MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0) ==
         0)) {
        ucm_hot.rcu_use_fence = 0;
    } else {
        ucm_debug("membarrier(PRIVATE_EXPEDITED) unavailable (%ld): readers "
                  "use a full fence",
                  cmds);
        ucm_hot.rcu_use_fence = 1;
    }
}

void ucm_rcu_atfork_child(void)
{
    ucm_rcu_slot_t *self = ucm_rcu_tls_slot;
    long tid             = ucm_sys_gettid();
    int i;

    for (i = 0; i < ucm_rcu_slots_high; ++i) {
        if (ucm_rcu_slot(i) == self) {
            ucm_rcu_slot(i)->tid = tid; /* new tid in the child */
        } else {
            ucm_rcu_slot(i)->ctr = 0;
            ucm_rcu_slot(i)->tid = 0;
        }
    }
    ucm_rcu_overflow_count[0] = 0;
    ucm_rcu_overflow_count[1] = 0;
    if (ucm_rcu_tls_overflow > 0) {
        ucm_rcu_overflow_count[ucm_rcu_tls_overflow_phase ? 1 : 0] = 1;
    }
    /* membarrier registration belongs to the mm: the child must redo it */
    ucm_rcu_init();
}
