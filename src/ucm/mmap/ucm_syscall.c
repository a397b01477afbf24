/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The replacement of libc's syscall(); contract in ucm_syscall.h.
 */
#include "ucm_syscall.h"

#include "ucm_filemap_int.h"

#include <ucm/util/ucm_sys.h>

#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>

typedef long (*ucm_syscall_func_t)(long, ...);

void *ucm_mremap_hook(void *old_address, size_t old_size, size_t new_size,
                      int flags, ...);

#define UCM_SYSCALL_READ_ARGS(_a, _last)                                       \
    do {                                                                       \
        va_list _ap;                                                           \
        int _i;                                                                \
        va_start(_ap, _last);                                                  \
        for (_i = 0; _i < 6; ++_i) {                                           \
            (_a)[_i] = va_arg(_ap, long);                                      \
        }                                                                      \
        va_end(_ap);                                                           \
    } while (0)

/* The numbers routed to the hooks (the switch in ucm_syscall_route()). */
/* clang-format off */
#define UCM_SYSCALL_ROUTED(_X, _w) \
    _X(_w, SYS_mmap) \
    _X(_w, SYS_munmap) \
    _X(_w, SYS_mremap) \
    _X(_w, SYS_madvise) \
    _X(_w, SYS_brk) \
    _X(_w, SYS_shmat) \
    _X(_w, SYS_shmdt) \
    _X(_w, SYS_ftruncate) \
    _X(_w, SYS_truncate) \
    _X(_w, SYS_fallocate) \
    _X(_w, SYS_open) \
    _X(_w, SYS_openat) \
    _X(_w, SYS_creat) \
    _X(_w, SYS_openat2) \
    _X(_w, SYS_remap_file_pages) \
    _X(_w, SYS_process_madvise) \
    _X(_w, SYS_memfd_create)
/* clang-format on */

#define UCM_SYSCALL_CASE(_w, _n) case _n:
#define UCM_SYSCALL_BIT(_w, _n)                                                \
    | ((((_n) >> 6) == (_w)) ? (1ull << ((_n)&63)) : 0)
#define UCM_SYSCALL_WORD(_w) (0 UCM_SYSCALL_ROUTED(UCM_SYSCALL_BIT, _w))

/* One bit per routed number below UCM_SYSCALL_NR_END (read by the entry). */
#define UCM_SYSCALL_NR_END 448
_Static_assert(SYS_process_madvise < UCM_SYSCALL_NR_END, "bitmap too small");

__attribute__((visibility("hidden")))
const uint64_t ucm_syscall_routed[UCM_SYSCALL_NR_END / 64] = {
    UCM_SYSCALL_WORD(0), UCM_SYSCALL_WORD(1), UCM_SYSCALL_WORD(2),
    UCM_SYSCALL_WORD(3), UCM_SYSCALL_WORD(4), UCM_SYSCALL_WORD(5),
    UCM_SYSCALL_WORD(6)};

/* Where the entry sends the other numbers, untouched: the original when it
 * is libc's syscall() or libucm's own; NULL (the C path, which counts the
 * chain depth) when it is another hooker's. */
__attribute__((visibility("hidden"))) void *ucm_syscall_fast;

long ucm_syscall_hook_slow(long number, ...)
    __attribute__((visibility("hidden")));

/* The original syscall(): libc's (reloc), the trampoline of a hooker that
 * had libc's entry first, or ours (bistro, and inside a chained call). */
static UCS_F_ALWAYS_INLINE long ucm_syscall_forward(long number, const long *a)
{
    ucm_syscall_func_t orig =
        (ucm_syscall_func_t)ucm_hot.orig[UCM_SYSCALL_HOT_SLOT];
    long ret;

    if (ucs_unlikely(orig == NULL)) {
        orig = ucm_syscall_raw;
    }
    ++ucm_hook_chain_depth;
    ret = orig(number, a[0], a[1], a[2], a[3], a[4], a[5]);
    --ucm_hook_chain_depth;
    return ret;
}

/* The system call itself, with syscall()'s result and errno. */
static long ucm_syscall_kernel(long number, const long *a)
{
    return ucm_sys_to_libc(
        ucm_sys_syscall6(number, a[0], a[1], a[2], a[3], a[4], a[5]));
}

/* brk: the kernel's convention (the break after the call, never -1); the
 * brk hook reports the change. */
static long ucm_syscall_brk(long addr)
{
    int saved_errno = errno;
    long ret;

    (void)ucm_brk((void *)addr);
    ret   = ucm_sys_brk(NULL);
    errno = saved_errno;
    return ret;
}

/* open/openat/openat2/creat: with O_TRUNC a regular file shrinks to 0. */
static long ucm_syscall_open(long number, const long *a)
{
    int dirfd = AT_FDCWD;
    const char *path;
    long flags;

    switch (number) {
    case SYS_open:
        path  = (const char *)a[0];
        flags = a[1];
        break;
    case SYS_creat:
        path  = (const char *)a[0];
        flags = O_TRUNC;
        break;
    case SYS_openat:
        dirfd = (int)a[0];
        path  = (const char *)a[1];
        flags = a[2];
        break;
    default: /* openat2: struct open_how starts with the 64-bit flags */
        if ((a[2] == 0) || (a[3] < (long)sizeof(uint64_t))) {
            return ucm_syscall_kernel(number, a);
        }
        dirfd = (int)a[0];
        path  = (const char *)a[1];
        flags = (long)*(const uint64_t *)a[2];
        break;
    }
    if (!(flags & O_TRUNC)) {
        return ucm_syscall_kernel(number, a);
    }
    return ucm_trunc_open_syscall(number, a, dirfd, path);
}

static void ucm_syscall_report(void *arg, uintptr_t start, size_t len)
{
    ucm_hook_vm(arg, UCM_EVENT_VM_UNMAPPED, (void *)start, len);
}

/* remap_file_pages(start, size, prot, pgoff, flags): the kernel replaces
 * the pages of [start, start + size) with other pages of the file. */
static long ucm_syscall_remap_file_pages(const long *a)
{
    size_t page     = ucm_sys_page_size();
    uintptr_t start = (uintptr_t)a[0] & ~(page - 1);
    size_t size     = ((size_t)a[1] + page - 1) & ~(page - 1);
    ucm_event_list_t *list;
    long ret;

    list = ucm_hook_enter(UCM_EVENT_VM_UNMAPPED);
    if (list != NULL) {
        ucm_hook_vm(list, UCM_EVENT_VM_UNMAPPED, (void *)start, size);
        ucm_hook_leave(errno);
    }
    ret = ucm_syscall_kernel(SYS_remap_file_pages, a);
    if (ret == 0) {
        /* the table's offsets of that range are wrong now */
        __atomic_store_n(&ucm_filemap_incomplete, 1, __ATOMIC_SEQ_CST);
    }
    return ret;
}

/* process_madvise(pidfd, iov, vlen, advice, flags): each range as by
 * madvise(); over-reports when pidfd is another process. */
static long ucm_syscall_process_madvise(const long *a)
{
    const struct iovec *iov = (const struct iovec *)a[1];
    unsigned long i, vlen = (unsigned long)a[2];
    int advice = (int)a[3];
    ucm_event_list_t *list;

    if (!ucm_madvise_discards(advice) || (iov == NULL) || (vlen > IOV_MAX)) {
        return ucm_syscall_kernel(SYS_process_madvise, a);
    }
    list = ucm_hook_enter(UCM_EVENT_VM_UNMAPPED);
    if (list != NULL) {
        for (i = 0; i < vlen; ++i) {
            ucm_hook_vm(list, UCM_EVENT_VM_UNMAPPED, iov[i].iov_base,
                        iov[i].iov_len);
            if (advice == 25) { /* MADV_COLLAPSE: the file's pages */
                ucm_filemap_report_range((uintptr_t)iov[i].iov_base,
                                         iov[i].iov_len, 0, ucm_syscall_report,
                                         list, NULL);
            }
        }
        ucm_hook_leave(errno);
    }
    return ucm_syscall_kernel(SYS_process_madvise, a);
}

/* A routed number: the hook of the named function, whose originals are
 * then libucm's own system calls (ucm_hook_orig() inside a chained call):
 * syscall() never reaches libc's function of that name or its
 * interposers. */
static long ucm_syscall_route(long number, const long *a)
{
    switch (number) {
    case SYS_mmap:
        return (long)ucm_mmap((void *)a[0], (size_t)a[1], (int)a[2], (int)a[3],
                              (int)a[4], (off_t)a[5]);
    case SYS_munmap: return ucm_munmap((void *)a[0], (size_t)a[1]);
    case SYS_mremap:
        return (long)ucm_mremap_hook((void *)a[0], (size_t)a[1], (size_t)a[2],
                                     (int)a[3], (void *)a[4]);
    case SYS_madvise: return ucm_madvise((void *)a[0], (size_t)a[1], (int)a[2]);
    case SYS_brk: return ucm_syscall_brk(a[0]);
    case SYS_shmat:
        return (long)ucm_shmat((int)a[0], (const void *)a[1], (int)a[2]);
    case SYS_shmdt: return ucm_shmdt((const void *)a[0]);
    case SYS_ftruncate: return ucm_trunc_ftruncate((int)a[0], (off_t)a[1]);
    case SYS_truncate:
        return ucm_trunc_truncate((const char *)a[0], (off_t)a[1]);
    case SYS_fallocate:
        return ucm_trunc_fallocate((int)a[0], (int)a[1], (off_t)a[2],
                                   (off_t)a[3]);
    case SYS_remap_file_pages: return ucm_syscall_remap_file_pages(a);
    case SYS_process_madvise: return ucm_syscall_process_madvise(a);
    case SYS_memfd_create:
        return ucm_memfd_create((const char *)a[0], (unsigned)a[1]);
    default: return ucm_syscall_open(number, a);
    }
}

/* The whole hook: every number, any chain depth. */
long ucm_syscall_hook_slow(long number, ...)
{
    long a[6];
    long ret;

    UCM_SYSCALL_READ_ARGS(a, number);
    if (ucs_unlikely(ucm_hook_chain_depth > 0)) {
        /* inside an original that we chain to (an interposer's munmap made
         * with syscall()), or a routed call: reported by the outer hook */
        return ucm_syscall_kernel(number, a);
    }
    switch (number) {
        UCM_SYSCALL_ROUTED(UCM_SYSCALL_CASE, 0)
        break;
    default: return ucm_syscall_forward(number, a);
    }
    ++ucm_hook_chain_depth;
    ret = ucm_syscall_route(number, a);
    --ucm_hook_chain_depth;
    return ret;
}

#if defined(__x86_64__)
#define UCM_SYSCALL_STR2(_x) #_x
#define UCM_SYSCALL_STR(_x)  UCM_SYSCALL_STR2(_x)

/* The entry: a routed number, or an original that is another hooker's, goes
 * to the C path with every register and the stack as the caller left them;
 * any other number jumps to the original the same way (rax, which carries
 * the vector-register count of a variadic call, and the argument registers
 * are untouched; r10 and r11 are scratch at a call). */
__asm__(".text\n"
        ".globl ucm_syscall_hook\n"
        ".hidden ucm_syscall_hook\n"
        ".type ucm_syscall_hook, @function\n"
        ".p2align 4\n"
        "ucm_syscall_hook:\n"
        "    endbr64\n"
        "    cmpq $" UCM_SYSCALL_STR(
            UCM_SYSCALL_NR_END) ", %rdi\n"
                                "    jae 1f\n"
                                "    movq %rdi, %r11\n"
                                "    shrq $6, %r11\n"
                                "    leaq ucm_syscall_routed(%rip), %r10\n"
                                "    movq (%r10,%r11,8), %r11\n"
                                "    btq %rdi, %r11\n"
                                "    jc ucm_syscall_hook_slow\n"
                                "1:  movq ucm_syscall_fast(%rip), %r11\n"
                                "    testq %r11, %r11\n"
                                "    jz ucm_syscall_hook_slow\n"
                                "    jmp *%r11\n"
                                ".size ucm_syscall_hook, .-ucm_syscall_hook\n");

/* libc's syscall(), instruction for instruction: the number and six
 * arguments (the last from the stack) shifted into the kernel's registers;
 * errno set on failure. */
__asm__(".text\n"
        ".globl ucm_syscall_raw\n"
        ".hidden ucm_syscall_raw\n"
        ".type ucm_syscall_raw, @function\n"
        ".p2align 4\n"
        "ucm_syscall_raw:\n"
        "    endbr64\n"
        "    movq %rdi, %rax\n"
        "    movq %rsi, %rdi\n"
        "    movq %rdx, %rsi\n"
        "    movq %rcx, %rdx\n"
        "    movq %r8, %r10\n"
        "    movq %r9, %r8\n"
        "    movq 8(%rsp), %r9\n"
        "    syscall\n"
        "    cmpq $-4095, %rax\n"
        "    jae 1f\n"
        "    ret\n"
        "1:  negq %rax\n"
        "    pushq %rax\n"
        "    call __errno_location@PLT\n"
        "    popq %rcx\n"
        "    movl %ecx, (%rax)\n"
        "    movq $-1, %rax\n"
        "    ret\n"
        ".size ucm_syscall_raw, .-ucm_syscall_raw\n");
#else
long ucm_syscall_hook(long number, ...)
{
    long a[6];

    UCM_SYSCALL_READ_ARGS(a, number);
    return ucm_syscall_hook_slow(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}

long ucm_syscall_raw(long number, ...)
{
    long a[6];

    UCM_SYSCALL_READ_ARGS(a, number);
    return ucm_syscall_kernel(number, a);
}
#endif

void ucm_syscall_fast_update(void *libc)
{
    void *orig = ucm_hot.orig[UCM_SYSCALL_HOT_SLOT];

    __atomic_store_n(&ucm_syscall_fast,
                     ((orig == (void *)ucm_syscall_raw) ||
                      ((orig != NULL) && (orig == libc)))
                         ? orig
                         : NULL,
                     __ATOMIC_RELEASE);
}
