/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * TEST-ONLY stand-in for the CUDA driver and runtime allocation entry points
 * (libucmt_fakecuda).  It is NOT CUDA and touches no GPU: it exports the
 * same symbols with the same types as the CUDA headers declare, and hands
 * out ordinary host memory from mmap, so that the GOT of a test program
 * linked to it names the CUDA symbols that libucm_cuda hooks.
 *
 * Besides the CUDA names it exports ucmt_fakecuda_* controls for the tests.
 * Thread-safe (one mutex).  Sizes above UCMT_FAKECUDA_MAX_SIZE fail with
 * the out-of-memory error code; a size of 0 succeeds with a NULL pointer;
 * releasing an unknown pointer fails with the invalid-value code.
 */
#ifndef UCMT_FAKECUDA_H_
#define UCMT_FAKECUDA_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define UCMT_FAKECUDA_MAX_SIZE (1ul << 30)
#define UCMT_FAKECUDA_PITCH    512ul /* row pitch alignment */

/* Size the fake handed out at 'address' (0 if it is not live). */
size_t ucmt_fakecuda_size(const void *address);

/* Number of live allocations. */
size_t ucmt_fakecuda_live(void);

/* Make the next release fail (without releasing) with the invalid-value
 * code. */
void ucmt_fakecuda_fail_next_free(void);

#ifdef __cplusplus
}
#endif

#endif
