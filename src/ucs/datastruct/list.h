/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Intrusive doubly-linked circular list (header only).
 * Contract: a head is initialized with ucs_list_head_init(); an element is in
 * at most one list per link field.  No allocation, no locking: callers
 * serialize; safe in hook context.
 */
#ifndef UCS_LIST_H_
#define UCS_LIST_H_

#include <ucs/sys/compiler_def.h>
#include <stddef.h>

BEGIN_C_DECLS

typedef struct ucs_list_link {
    struct ucs_list_link *prev;
    struct ucs_list_link *next;
} ucs_list_link_t;

#define ucs_container_of(_ptr, _type, _member)                                 \
    ((_type *)((char *)(_ptr)-offsetof(_type, _member)))

static inline void ucs_list_head_init(ucs_list_link_t *head)
{
    head->prev = head;
    head->next = head;
}

static inline int ucs_list_is_empty(const ucs_list_link_t *head)
{
    return head->next == head;
}

static inline void ucs_list_add_tail(ucs_list_link_t *head,
                                     ucs_list_link_t *elem)
{
    elem->prev       = head->prev;
    elem->next       = head;
    head->prev->next = elem;
    head->prev       = elem;
}

static inline void ucs_list_del(ucs_list_link_t *elem)
{
    elem->prev->next = elem->next;
    elem->next->prev = elem->prev;
}

/* Move all elements of src to the tail of dst; src becomes empty. */
static inline void ucs_list_splice_tail(ucs_list_link_t *dst,
                                        ucs_list_link_t *src)
{
    if (ucs_list_is_empty(src)) {
        return;
    }
    src->next->prev = dst->prev;
    dst->prev->next = src->next;
    src->prev->next = dst;
    dst->prev       = src->prev;
    ucs_list_head_init(src);
}

END_C_DECLS

#endif
