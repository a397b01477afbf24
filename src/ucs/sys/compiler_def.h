/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Compiler helpers shared by every layer (header only, no library needed).
 */
#ifndef UCS_COMPILER_DEF_H_
#define UCS_COMPILER_DEF_H_

#ifdef __cplusplus
#define BEGIN_C_DECLS extern "C" {
#define END_C_DECLS   }
#else
#define BEGIN_C_DECLS
#define END_C_DECLS
#endif

#define UCS_BIT(_i)               (1ul << (_i))
#define UCS_MASK(_i)              (((_i) >= 64) ? ~0ul : (UCS_BIT(_i) - 1))
#define ucs_likely(_x)            __builtin_expect(!!(_x), 1)
#define ucs_unlikely(_x)          __builtin_expect(!!(_x), 0)
#define ucs_min(_a, _b)           (((_a) < (_b)) ? (_a) : (_b))
#define ucs_max(_a, _b)           (((_a) > (_b)) ? (_a) : (_b))
#define ucs_static_array_size(_a) (sizeof(_a) / sizeof((_a)[0]))
#define UCS_F_ALWAYS_INLINE       inline __attribute__((always_inline))
#define UCS_F_NOINLINE            __attribute__((noinline))
/* Grouped with the other hot functions (fewer code pages on hot paths). */
#define UCS_F_HOT            __attribute__((hot))
#define UCS_F_CTOR           __attribute__((constructor))
#define UCS_F_PRINTF(_f, _a) __attribute__((format(printf, _f, _a)))
#define UCS_F_MAYBE_UNUSED   __attribute__((unused))

#endif
