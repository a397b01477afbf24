/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * TEST-ONLY fake CUDA toolkit (NOT CUDA): the exported entry points of the
 * driver functions that UCX 1.13.1's libucm_cuda patches in bistro mode.
 *
 * UCX's patcher overwrites a function's first 5 bytes (a near jump; 12 when
 * the hook is farther than +-2 GiB) and copies the instructions it
 * overwrote to a trampoline that calls the original.  It relocates only a
 * few kinds of prologue instructions (push, sub $imm32 from %rsp, mov to a
 * stack slot, ...) and gives up on anything else.  A compiler's prologue
 * for the small C bodies of the fake (a tail jump, "mov %rdi,%rbx", a
 * "sub $imm8,%rsp") is none of those, so each entry point here starts as a
 * real driver function may: a 136-byte frame (sub with a 32-bit immediate)
 * and a saved register, 12 bytes UCX can relocate whatever jump it uses,
 * then calls the C body.  The arguments stay in their registers and
 * %rsp is 16-byte aligned at the call.
 *
 * The C bodies: fakecuda.c's entry points, renamed to
 * ucmt_fakecuda_c_<name> with objcopy by make-toolkit.sh, and
 * fakecuda_toolkit.c's ucmt_fakecuda_c_cuMemFreeHost.
 */
    .text

.macro UCMT_FAKECUDA_ENTRY name
    .hidden ucmt_fakecuda_c_\name
    .globl  \name
    .type   \name, @function
    .p2align 4
\name:
    subq    $0x88, %rsp          /* 48 81 ec 88 00 00 00 */
    movq    %rbx, 0x8(%rsp)      /* 48 89 5c 24 08 */
    call    ucmt_fakecuda_c_\name
    movq    0x8(%rsp), %rbx
    addq    $0x88, %rsp
    ret
    .size   \name, . - \name
.endm

    UCMT_FAKECUDA_ENTRY cuMemAlloc_v2
    UCMT_FAKECUDA_ENTRY cuMemAllocManaged
    UCMT_FAKECUDA_ENTRY cuMemAllocPitch_v2
    UCMT_FAKECUDA_ENTRY cuMemFree_v2
    UCMT_FAKECUDA_ENTRY cuMemFreeHost

    .section .note.GNU-stack, "", @progbits
