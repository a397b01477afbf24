/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ucs_status_t: the error convention of every function in this project.
 * Values are those of UCX 1.13 (ABI: shared with stock UCX through libucm).
 * Negative values are errors, UCS_OK is success, UCS_INPROGRESS is "started".
 * One byte, as in UCX (a packed enum): structs that hold one, such as
 * ucs_rcache_region_t, have UCX's layout, and a status returned by a stock
 * UCX callback is read from its low byte only.
 */
#ifndef UCS_STATUS_H_
#define UCS_STATUS_H_

#include <ucs/sys/compiler_def.h>

BEGIN_C_DECLS

typedef enum {
    UCS_OK                         = 0,
    UCS_INPROGRESS                 = 1,
    UCS_ERR_NO_MESSAGE             = -1,
    UCS_ERR_NO_RESOURCE            = -2,
    UCS_ERR_IO_ERROR               = -3,
    UCS_ERR_NO_MEMORY              = -4,
    UCS_ERR_INVALID_PARAM          = -5,
    UCS_ERR_UNREACHABLE            = -6,
    UCS_ERR_INVALID_ADDR           = -7,
    UCS_ERR_NOT_IMPLEMENTED        = -8,
    UCS_ERR_MESSAGE_TRUNCATED      = -9,
    UCS_ERR_NO_PROGRESS            = -10,
    UCS_ERR_BUFFER_TOO_SMALL       = -11,
    UCS_ERR_NO_ELEM                = -12,
    UCS_ERR_SOME_CONNECTS_FAILED   = -13,
    UCS_ERR_NO_DEVICE              = -14,
    UCS_ERR_BUSY                   = -15,
    UCS_ERR_CANCELED               = -16,
    UCS_ERR_SHMEM_SEGMENT          = -17,
    UCS_ERR_ALREADY_EXISTS         = -18,
    UCS_ERR_OUT_OF_RANGE           = -19,
    UCS_ERR_TIMED_OUT              = -20,
    UCS_ERR_EXCEEDS_LIMIT          = -21,
    UCS_ERR_UNSUPPORTED            = -22,
    UCS_ERR_REJECTED               = -23,
    UCS_ERR_NOT_CONNECTED          = -24,
    UCS_ERR_CONNECTION_RESET       = -25,
    UCS_ERR_FIRST_LINK_FAILURE     = -40,
    UCS_ERR_LAST_LINK_FAILURE      = -59,
    UCS_ERR_FIRST_ENDPOINT_FAILURE = -60,
    UCS_ERR_ENDPOINT_TIMEOUT       = -80,
    UCS_ERR_LAST_ENDPOINT_FAILURE  = -89,
    UCS_ERR_LAST                   = -100
} __attribute__((packed)) ucs_status_t;

#define UCS_STATUS_IS_ERR(_s) ((_s) < 0)

/* Human-readable name of a status (static string, never NULL). */
const char *ucs_status_string(ucs_status_t status);

END_C_DECLS

#endif
