/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * x86_64 entry patching; see ucm_bistro.h.
 */
#include "ucm_bistro.h"

#include <ucm/util/ucm_log.h>
#include <ucm/util/ucm_sys.h>

#include <string.h>
#include <sys/mman.h>

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifdef HAVE_VALGRIND_VALGRIND_H
#include <valgrind/valgrind.h>
#define UCM_BISTRO_DISCARD(_a, _l) VALGRIND_DISCARD_TRANSLATIONS(_a, _l)
#else
#define UCM_BISTRO_DISCARD(_a, _l)
#endif

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define UCM_BISTRO_JMP_REL32_LEN 5
#define UCM_BISTRO_JMP_ABS_LEN   14 /* ff 25 00000000 <addr64> */
#define UCM_BISTRO_NEAR_LIMIT    0x7ff00000l
#define UCM_BISTRO_INT3          0xcc

typedef struct {
    size_t len;
    int modrm_at; /* offset of modrm, -1 if none */
    int rip_disp; /* offset of a RIP-relative disp32, -1 if none */
    int rel_at;   /* jmp rel8/rel32: offset of the displacement, -1 */
    int rel_size;
} ucm_bistro_insn_t;

static size_t ucm_bistro_modrm_len(const uint8_t *p, int *rip_rel)
{
    uint8_t modrm = p[0], mod = modrm >> 6, rm = modrm & 7;
    size_t len = 1;

    *rip_rel = 0;
    if (mod == 3) {
        return len;
    }
    if (rm == 4) {
        ++len; /* SIB */
        if ((mod == 0) && ((p[1] & 7) == 5)) {
            return len + 4;
        }
    } else if ((mod == 0) && (rm == 5)) {
        *rip_rel = 1;
        return len + 4;
    }
    return len + ((mod == 1) ? 1 : (mod == 2) ? 4 : 0);
}

static int ucm_bistro_decode(const uint8_t *code, ucm_bistro_insn_t *insn)
{
    const uint8_t *p = code;
    int rex_w = 0, opsize16 = 0, rip_rel;
    size_t imm = 0;
    uint8_t op;

    memset(insn, 0, sizeof(*insn));
    insn->modrm_at = insn->rip_disp = insn->rel_at = -1;

    /* endbr64 */
    if ((p[0] == 0xf3) && (p[1] == 0x0f) && (p[2] == 0x1e) && (p[3] == 0xfa)) {
        insn->len = 4;
        return 0;
    }
    while ((*p == 0x66) || (*p == 0x2e)) {
        opsize16 |= (*p == 0x66);
        ++p;
    }
    if ((*p & 0xf0) == 0x40) {
        rex_w = (*p & 0x08) != 0;
        ++p;
    }
    op = *p++;
    switch (op) {
    case 0x50 ... 0x5f: /* push/pop reg */
    case 0x90: /* nop */ break;
    case 0xb8 ... 0xbf: /* mov imm, reg */
        imm = rex_w ? 8 : opsize16 ? 2 : 4;
        break;
    case 0x01:
    case 0x03:
    case 0x09:
    case 0x0b:
    case 0x21:
    case 0x23:
    case 0x29:
    case 0x2b:
    case 0x31:
    case 0x33:
    case 0x39:
    case 0x3b:
    case 0x84:
    case 0x85:
    case 0x88:
    case 0x89:
    case 0x8a:
    case 0x8b:
    case 0x8d: insn->modrm_at = (int)(p - code); break;
    case 0x80:
    case 0x83:
    case 0xc6:
        insn->modrm_at = (int)(p - code);
        imm            = 1;
        break;
    case 0x81:
    case 0xc7:
        insn->modrm_at = (int)(p - code);
        imm            = opsize16 ? 2 : 4;
        break;
    case 0xf6: /* group 3: test r/m, imm (/0, /1; glibc 2.41's mmap starts
                * with one); not, neg, mul, div (/2../7) have no immediate */
    case 0xf7:
        insn->modrm_at = (int)(p - code);
        if (((*p >> 3) & 7) < 2) {
            imm = (op == 0xf6) ? 1 : opsize16 ? 2 : 4;
        }
        break;
    case 0x0f:
        if (*p == 0x1f) { /* multi-byte nop */
            ++p;
            insn->modrm_at = (int)(p - code);
            break;
        }
        return -1;
    case 0xe9:
        insn->rel_at   = (int)(p - code);
        insn->rel_size = 4;
        imm            = 4;
        break;
    case 0xeb:
        insn->rel_at   = (int)(p - code);
        insn->rel_size = 1;
        imm            = 1;
        break;
    default: return -1;
    }
    if (insn->modrm_at >= 0) {
        p += ucm_bistro_modrm_len(code + insn->modrm_at, &rip_rel);
        if (rip_rel) {
            insn->rip_disp = insn->modrm_at + 1;
        }
    }
    insn->len = (size_t)(p - code) + imm;
    return 0;
}

size_t ucm_bistro_insn_len(const uint8_t *code)
{
    ucm_bistro_insn_t insn;

    return (ucm_bistro_decode(code, &insn) == 0) ? insn.len : 0;
}

/* Non-zero if [start, end) holds only nop instructions or int3. */
static int ucm_bistro_is_padding(uintptr_t start, uintptr_t end)
{
    const uint8_t *p = (const uint8_t *)start;
    ucm_bistro_insn_t insn;
    int is_nop;

    while ((uintptr_t)p < end) {
        if (*p == UCM_BISTRO_INT3) {
            ++p;
            continue;
        }
        if (ucm_bistro_decode(p, &insn) != 0) {
            return 0;
        }
        is_nop = (insn.modrm_at >= 0) ? (p[insn.modrm_at - 1] == 0x1f)
                                      : (p[insn.len - 1] == 0x90);
        if (!is_nop || ((uintptr_t)p + insn.len > end)) {
            return 0;
        }
        p += insn.len;
    }
    return 1;
}

static int ucm_bistro_is_near(uintptr_t a, uintptr_t b)
{
    long diff = (long)(a - b);

    return (diff < UCM_BISTRO_NEAR_LIMIT) && (diff > -UCM_BISTRO_NEAR_LIMIT);
}

/* Code pages near the patched functions (one is enough for libc). */
static uint8_t *ucm_bistro_code_page;
static size_t ucm_bistro_code_used;

static uint8_t *ucm_bistro_code_alloc(uintptr_t near, size_t size)
{
    size_t page = ucm_sys_page_size();
    uintptr_t hint;
    long dist, ret;
    uint8_t *code;
    int dir;

    if ((ucm_bistro_code_page != NULL) &&
        (ucm_bistro_code_used + size <= page) &&
        ucm_bistro_is_near((uintptr_t)ucm_bistro_code_page, near)) {
        code = ucm_bistro_code_page + ucm_bistro_code_used;
        ucm_bistro_code_used += (size + 15) & ~15ul;
        return code;
    }
    for (dist = 1l << 20; dist < UCM_BISTRO_NEAR_LIMIT / 2; dist <<= 1) {
        for (dir = -1; dir <= 1; dir += 2) {
            hint = ((near & ~(page - 1)) + (uintptr_t)(dir * dist));
            ret  = ucm_sys_mmap(
                 (void *)hint, page, PROT_READ | PROT_WRITE | PROT_EXEC,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
            if (ucm_sys_is_err(ret)) {
                continue;
            }
            if (!ucm_bistro_is_near((uintptr_t)ret, near)) {
                ucm_sys_munmap((void *)ret, page); /* hint ignored */
                continue;
            }
            ucm_bistro_code_page = (uint8_t *)ret;
            ucm_bistro_code_used = (size + 15) & ~15ul;
            return ucm_bistro_code_page;
        }
    }
    return NULL;
}

static void ucm_bistro_emit_jmp_abs(uint8_t *p, uintptr_t target)
{
    p[0] = 0xff;
    p[1] = 0x25;
    memset(p + 2, 0, 4);
    memcpy(p + 6, &target, sizeof(target));
}

static void ucm_bistro_emit_jmp_rel32(uint8_t *p, uintptr_t from,
                                      uintptr_t target)
{
    int32_t rel = (int32_t)(long)(target - (from + UCM_BISTRO_JMP_REL32_LEN));

    p[0] = 0xe9;
    memcpy(p + 1, &rel, sizeof(rel));
}

/* Copy one displaced instruction from src into the trampoline at dst,
 * relocated; a jmp (someone else's hook) becomes an absolute jmp to its
 * target.  Returns the bytes written, or 0 if it cannot be relocated. */
static size_t ucm_bistro_emit_insn(uint8_t *dst, uintptr_t src,
                                   const ucm_bistro_insn_t *insn)
{
    int32_t disp32;
    int8_t disp8;
    uintptr_t target;
    long new_disp;

    if (insn->rel_at >= 0) {
        if (insn->rel_size == 4) {
            memcpy(&disp32, (const void *)(src + insn->rel_at), 4);
            target = src + insn->len + (long)disp32;
        } else {
            memcpy(&disp8, (const void *)(src + insn->rel_at), 1);
            target = src + insn->len + (long)disp8;
        }
        ucm_bistro_emit_jmp_abs(dst, target);
        return UCM_BISTRO_JMP_ABS_LEN;
    }
    memcpy(dst, (const void *)src, insn->len);
    if (insn->rip_disp >= 0) {
        memcpy(&disp32, (const void *)(src + insn->rip_disp), 4);
        new_disp = (long)disp32 + (long)(src - (uintptr_t)dst);
        if ((new_disp > INT32_MAX) || (new_disp < INT32_MIN)) {
            return 0;
        }
        disp32 = (int32_t)new_disp;
        memcpy(dst + insn->rip_disp, &disp32, 4);
    }
    return insn->len;
}

/* Trampoline: the displaced instructions (count of them, starting at
 * entry), relocated, then a jump back after them (none after a jmp). */
static int ucm_bistro_emit_orig(uint8_t *tramp, uintptr_t entry,
                                const ucm_bistro_insn_t *insns, unsigned count)
{
    uintptr_t src = entry;
    unsigned i;
    size_t n;

    for (i = 0; i < count; ++i) {
        n = ucm_bistro_emit_insn(tramp, src, &insns[i]);
        if (n == 0) {
            return -1;
        }
        if (insns[i].rel_at >= 0) {
            return 0; /* the flow does not come back */
        }
        tramp += n;
        src += insns[i].len;
    }
    ucm_bistro_emit_jmp_abs(tramp, src);
    return 0;
}

/* The first instructions at entry that cover at least a 5-byte jmp, when
 * the first one alone does not (multi_ok).  Returns their count (their
 * length in *len_p), 0 if they cannot all be decoded, would pass the end of
 * the function or of entry_bytes, or include a jmp before the last. */
static unsigned ucm_bistro_decode_prefix(const ucm_bistro_patch_t *p,
                                         ucm_bistro_insn_t *insns, unsigned max,
                                         size_t *len_p)
{
    uintptr_t entry = p->target.entry;
    size_t len      = 0;
    unsigned count  = 0;

    while (len < UCM_BISTRO_JMP_REL32_LEN) {
        if ((count == max) || ((count > 0) && (insns[count - 1].rel_at >= 0)) ||
            (ucm_bistro_decode((const uint8_t *)(entry + len), &insns[count]) !=
             0)) {
            return 0;
        }
        len += insns[count++].len;
    }
    if ((len > sizeof(p->entry_bytes)) ||
        ((p->target.end != 0) && (entry + len > p->target.end))) {
        return 0;
    }
    *len_p = len;
    return count;
}

static long ucm_bistro_protect(uintptr_t start, uintptr_t end, int prot)
{
    size_t page     = ucm_sys_page_size();
    uintptr_t first = start & ~(page - 1);
    uintptr_t last  = (end + page - 1) & ~(page - 1);

    return ucm_sys_mprotect((void *)first, last - first, prot);
}

/* Replace the first len bytes at entry with 'bytes' using one atomic 8-byte
 * compare-and-swap when they fit in one aligned quadword. */
static void ucm_bistro_write_entry(uintptr_t entry, const uint8_t *bytes,
                                   size_t len)
{
    uintptr_t word_addr = entry & ~7ul;
    size_t offset       = entry - word_addr;
    uint64_t old_word, new_word;

    if (offset + len <= 8) {
        old_word = __atomic_load_n((uint64_t *)word_addr, __ATOMIC_RELAXED);
        do {
            new_word = old_word;
            memcpy((uint8_t *)&new_word + offset, bytes, len);
        } while (!__atomic_compare_exchange_n((uint64_t *)word_addr, &old_word,
                                              new_word, 0, __ATOMIC_SEQ_CST,
                                              __ATOMIC_RELAXED));
    } else {
        ucm_debug("entry %p: patch spans two quadwords, written non-atomically",
                  (void *)entry);
        memcpy((void *)entry, bytes, len);
    }
}

/* movabs $addr, %r11; jmp *%r11: how UCX and Open MPI patch an entry */
static int ucm_bistro_is_foreign_patch(uintptr_t entry)
{
    const uint8_t *p = (const uint8_t *)entry;

    return (p[0] == 0x49) && (p[1] == 0xbb) && (p[10] == 0x41) &&
           (p[11] == 0xff) && (p[12] == 0xe3);
}

/* Decide how to patch one function and write its stub and trampoline into
 * the (writable) code page.  0 on success. */
static int ucm_bistro_prepare(ucm_bistro_patch_t *p)
{
    const ucm_bistro_target_t *t = &p->target;
    uintptr_t entry              = t->entry;
    ucm_bistro_insn_t insns[UCM_BISTRO_JMP_REL32_LEN];
    uintptr_t jmp_site, jmp_target;
    size_t prefix_len, tramp_len;
    unsigned i, count = 1;
    uint8_t *stub, *tramp;

    p->site = 0;
    if (ucm_bistro_decode((const uint8_t *)entry, &insns[0]) != 0) {
        p->detail = "first instruction not understood";
        return -1;
    }
    prefix_len = insns[0].len;
    if (prefix_len > sizeof(p->entry_bytes)) {
        p->detail = "first instruction too long";
        return -1;
    }
    if (prefix_len < UCM_BISTRO_JMP_REL32_LEN) {
        /* never-executed padding for the 5-byte jmp, within rel8 reach */
        if ((prefix_len >= 2) && (t->end != 0) &&
            (t->next_start >= t->end + 5) &&
            (t->end + 5 - (entry + 2) <= 127) &&
            ucm_bistro_is_padding(t->end, t->next_start)) {
            p->site = t->end;
        } else if ((prefix_len >= 2) && (t->prev_end != 0) &&
                   (t->prev_end + 5 <= entry) &&
                   ucm_bistro_is_padding(t->prev_end, entry)) {
            p->site = entry - 5;
        } else if (p->multi_ok) {
            count = ucm_bistro_decode_prefix(p, insns, UCM_BISTRO_JMP_REL32_LEN,
                                             &prefix_len);
            if (count == 0) {
                p->detail = "first instructions not understood";
                return -1;
            }
        } else if (prefix_len < 2) {
            p->detail = "first instruction shorter than a short jump";
            return -1;
        } else {
            p->detail = "first instruction too short and no padding in reach";
            return -1;
        }
    }

    /* a jmp becomes an absolute one; the jump back is one more */
    for (i = 0, tramp_len = UCM_BISTRO_JMP_ABS_LEN; i < count; ++i) {
        tramp_len +=
            (insns[i].rel_at >= 0) ? UCM_BISTRO_JMP_ABS_LEN : insns[i].len;
    }
    stub = ucm_bistro_code_alloc(entry, UCM_BISTRO_JMP_ABS_LEN + tramp_len);
    if (stub == NULL) {
        p->detail = "no memory within 2 GiB of the function";
        return -1;
    }
    tramp = stub + UCM_BISTRO_JMP_ABS_LEN;
    if (ucm_bistro_emit_orig(tramp, entry, insns, count) != 0) {
        p->detail = "cannot relocate the first instruction";
        return -1;
    }
    ucm_bistro_emit_jmp_abs(stub, (uintptr_t)p->hook);

    /* jump straight to the hook when it is in reach: one page less to
     * touch on every call; else through the stub */
    jmp_site   = (p->site != 0) ? p->site : entry;
    jmp_target = ucm_bistro_is_near((uintptr_t)p->hook, jmp_site)
                     ? (uintptr_t)p->hook
                     : (uintptr_t)stub;
    memset(p->entry_bytes, UCM_BISTRO_INT3, sizeof(p->entry_bytes));
    p->entry_len = prefix_len;
    if (p->site == 0) {
        ucm_bistro_emit_jmp_rel32(p->entry_bytes, entry, jmp_target);
        if (count > 1) { /* later instructions keep their bytes, as in UCX */
            memcpy(p->entry_bytes + UCM_BISTRO_JMP_REL32_LEN,
                   (const void *)(entry + UCM_BISTRO_JMP_REL32_LEN),
                   prefix_len - UCM_BISTRO_JMP_REL32_LEN);
        }
    } else {
        ucm_bistro_emit_jmp_rel32(p->site_bytes, p->site, jmp_target);
        p->entry_bytes[0] = 0xeb;
        p->entry_bytes[1] =
            (uint8_t)(int8_t)((long)p->site - (long)(entry + 2));
    }
    p->orig    = tramp;
    p->chained = (insns[0].rel_at >= 0) || ucm_bistro_is_foreign_patch(entry);
    memcpy(p->saved_entry, (const void *)entry, prefix_len);
    if (p->site != 0) {
        memcpy(p->saved_site, (const void *)p->site, sizeof(p->saved_site));
    }
    return 0;
}

ucs_status_t ucm_bistro_patch_all(ucm_bistro_patch_t *patches, unsigned count)
{
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    ucs_status_t status = UCS_OK;
    ucm_bistro_patch_t *p;
    unsigned i;

    /* stubs and trampolines: written while the code page is writable */
    if ((ucm_bistro_code_page != NULL) &&
        (ucm_bistro_protect((uintptr_t)ucm_bistro_code_page,
                            (uintptr_t)ucm_bistro_code_page + 1,
                            PROT_READ | PROT_WRITE | PROT_EXEC) != 0)) {
        ucm_bistro_code_page = NULL; /* start a new one */
    }
    for (i = 0; i < count; ++i) {
        p         = &patches[i];
        p->status = (ucm_bistro_prepare(p) == 0) ? UCS_OK : UCS_ERR_UNSUPPORTED;
        if (p->status != UCS_OK) {
            status = UCS_ERR_UNSUPPORTED;
            continue;
        }
        lo = (p->site && (p->site < lo)) ? p->site : lo;
        hi = (p->site && (p->site + 5 > hi)) ? p->site + 5 : hi;
        lo = (p->target.entry < lo) ? p->target.entry : lo;
        hi = (p->target.entry + p->entry_len > hi)
                 ? p->target.entry + p->entry_len
                 : hi;
    }
    if (ucm_bistro_code_page != NULL) {
        ucm_bistro_protect((uintptr_t)ucm_bistro_code_page,
                           (uintptr_t)ucm_bistro_code_page + 1,
                           PROT_READ | PROT_EXEC);
    }
    if (hi == 0) {
        return status;
    }

    /* the text stays executable while written: other threads run it */
    if (ucm_bistro_protect(lo, hi, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) {
        for (i = 0; i < count; ++i) {
            if (patches[i].status == UCS_OK) {
                patches[i].status = UCS_ERR_UNSUPPORTED;
                patches[i].detail = "cannot make the function writable";
            }
        }
        return UCS_ERR_UNSUPPORTED;
    }
    for (i = 0; i < count; ++i) { /* padding first: never executed */
        p = &patches[i];
        if ((p->status == UCS_OK) && (p->site != 0)) {
            memcpy((void *)p->site, p->site_bytes, sizeof(p->site_bytes));
        }
    }
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    for (i = 0; i < count; ++i) {
        p = &patches[i];
        if (p->status == UCS_OK) {
            ucm_bistro_write_entry(p->target.entry, p->entry_bytes,
                                   p->entry_len);
        }
    }
    ucm_bistro_protect(lo, hi, PROT_READ | PROT_EXEC);
    UCM_BISTRO_DISCARD((void *)lo, hi - lo);
    return status;
}

ucs_status_t ucm_bistro_write(uintptr_t addr, const uint8_t *bytes, size_t len)
{
    if (ucm_bistro_protect(addr, addr + len,
                           PROT_READ | PROT_WRITE | PROT_EXEC) != 0) {
        ucm_error("cannot make the code at %p writable", (void *)addr);
        return UCS_ERR_INVALID_PARAM;
    }
    ucm_bistro_write_entry(addr, bytes, len);
    ucm_bistro_protect(addr, addr + len, PROT_READ | PROT_EXEC);
    UCM_BISTRO_DISCARD((void *)addr, len);
    return UCS_OK;
}
