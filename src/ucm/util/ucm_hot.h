/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The state every hooked call reads, packed into one page.
 *
 * After a system call on a kernel with page-table isolation the TLB is cold,
 * and every distinct page a hook touches costs a page walk: measured as most
 * of the per-call overhead.  So the handler list (two static buffers used
 * alternately under RCU), the RCU grace-period counter and the original
 * functions all live here, with the RCU reader slots of the first threads.
 * Written only by libucm's writers (handler add/remove, hook installation).
 */
#ifndef UCM_HOT_H_
#define UCM_HOT_H_

#include <ucm/api/ucm.h>

#define UCM_HOT_ORIG_MAX      32
#define UCM_HOT_LIST_BUF_SIZE 1280 /* header + 39 handlers */
#define UCM_HOT_RCU_SLOTS     16   /* reader slots of the first threads */

typedef struct ucm_event_list ucm_event_list_t;

/* A reader's RCU state (see ucm_rcu.h). */
typedef struct ucm_rcu_slot {
    volatile unsigned long ctr; /* phase | nesting; 0 = not reading */
    volatile long tid;          /* owner, 0 = free */
} __attribute__((aligned(64))) ucm_rcu_slot_t;

typedef union ucm_hot_list_buf {
    uint8_t bytes[UCM_HOT_LIST_BUF_SIZE];
    uint64_t align;
} ucm_hot_list_buf_t;

typedef struct ucm_hot {
    ucm_event_list_t *event_list;      /* current handler list (RCU) */
    volatile unsigned long rcu_gp_ctr; /* grace-period phase | 1 */
    int rcu_use_fence;
    void *uffd_watch;             /* ucm_uffd_watch while spans may exist */
    void *orig[UCM_HOT_ORIG_MAX]; /* by ucm_hook_id_t */
    ucm_hot_list_buf_t list_buf[2];
    ucm_rcu_slot_t rcu_slots[UCM_HOT_RCU_SLOTS];
} ucm_hot_t;

extern ucm_hot_t ucm_hot;

#endif
