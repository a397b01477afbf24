/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ucm_global_opts as a UCX 1.18 or 1.22 component sees it (the struct is
 * declared here from those releases' ucm.h: uint64_t cuda_hook_modes at 24,
 * bistro_force_far_jump, bistro_grace_duration), on this libucm.
 *
 * Built once per layout (UCMT_LAYOUT 113, 118, 122) and view of the object
 * (UCMT_VIEW):
 *   0  this libucm's object, through dlsym (no copy; the layout comes from
 *      the release a fake libucp reports, argv[1] = its path, the release
 *      in UCMT_FAKE_UCP_VERSION)
 *   1  the executable's copy (copy relocation, sizeof(struct) bytes)
 *   2  the executable's own definition inside guard bytes (what libucm
 *      writes past the object would show there)
 * Checks (exit 1 with a line per failure): the layout libucm says it uses;
 * the defaults written in that layout; ucm_set_global_opts() of a struct
 * that ends where a PROT_NONE page begins (reading past it faults), every
 * field honoured (UCX_MEM_* values as libucm formats them, events refused
 * with enable_events=0); a direct write to the object takes effect; the
 * guard bytes untouched.  With UCMT_EXPECT_COMMON=1 (an unknown release)
 * only the five leading ints must be taken and the struct passed ends
 * after them (20 bytes, then the guard page).
 */
#include <ucm/api/ucm.h>
#include <ucm/api/ucm_ext.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct {
    int log_level;
    int enable_events;
    int mmap_hook_mode;
    int enable_malloc_hooks;
    int enable_malloc_reloc;
#if UCMT_LAYOUT == 113
    int cuda_hook_modes;
#else
    uint64_t cuda_hook_modes;
#endif
    int enable_dynamic_mmap_thresh;
    size_t alloc_alignment;
    int dlopen_process_rpath;
    int module_unload_prevent_mode;
#if UCMT_LAYOUT >= 118
    int bistro_force_far_jump;
#endif
#if UCMT_LAYOUT >= 122
    double bistro_grace_duration;
#endif
} ucmt_opts_t;

#if UCMT_LAYOUT == 113
_Static_assert(sizeof(ucmt_opts_t) == 48, "1.13 layout");
#elif UCMT_LAYOUT == 118
_Static_assert(sizeof(ucmt_opts_t) == 64, "1.18 layout");
#else
_Static_assert(sizeof(ucmt_opts_t) == 72, "1.22 layout");
#endif

#define UCMT_GUARD      64
#define UCMT_GUARD_BYTE 0xa5

#if UCMT_VIEW == 1
/* the name of ucm.h would have 1.13's type: declare our own view */
extern ucmt_opts_t ucmt_view __asm__("ucm_global_opts");
#define UCMT_OBJECT (&ucmt_view)
#elif UCMT_VIEW == 2
#define UCMT_STR_(x) #x
#define UCMT_STR(x)  UCMT_STR_(x)
__attribute__((used, aligned(64))) unsigned char
    ucmt_area[UCMT_GUARD + sizeof(ucmt_opts_t) + UCMT_GUARD] = {
        [0 ... UCMT_GUARD - 1] = UCMT_GUARD_BYTE,
        [UCMT_GUARD + sizeof(ucmt_opts_t)... UCMT_GUARD + sizeof(ucmt_opts_t) +
            UCMT_GUARD - 1] = UCMT_GUARD_BYTE};
__asm__(".globl ucm_global_opts\n"
        ".type ucm_global_opts, @object\n"
        ".set ucm_global_opts, ucmt_area + " UCMT_STR(
            UCMT_GUARD) "\n"
                        ".size ucm_global_opts, " UCMT_STR(UCMT_SIZE) "\n");
#define UCMT_OBJECT  ((ucmt_opts_t *)(ucmt_area + UCMT_GUARD))
#else
static ucmt_opts_t *ucmt_object;
#define UCMT_OBJECT ucmt_object
#endif

static int ucmt_failures;

#define UCMT_CHECK(_cond, ...)                                                 \
    do {                                                                       \
        if (!(_cond)) {                                                        \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #_cond);   \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, "\n");                                             \
            ++ucmt_failures;                                                   \
        }                                                                      \
    } while (0)

/* UCX_MEM_<name> as libucm formats it now */
static const char *ucmt_value(const char *name)
{
    static char value[64];
    const char *n, *doc;
    unsigned i;

    for (i = 0; ucm_config_get(i, &n, value, sizeof(value), &doc) == 0; ++i) {
        if (strcmp(n, name) == 0) {
            return value;
        }
    }
    return "(absent)";
}

#define UCMT_EXPECT_VALUE(_name, _expected)                                    \
    UCMT_CHECK(strcmp(ucmt_value(_name), _expected) == 0, "%s=%s, not %s",     \
               _name, ucmt_value(_name), _expected)

/* A struct of ours whose last byte (of 'size') is the last before a
 * PROT_NONE page. */
static ucmt_opts_t *ucmt_guarded_struct(size_t size)
{
    long page   = sysconf(_SC_PAGESIZE);
    char *pages = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if ((pages == MAP_FAILED) ||
        (mprotect(pages + page, page, PROT_NONE) != 0)) {
        perror("mmap/mprotect");
        exit(2);
    }
    return (ucmt_opts_t *)(pages + page - size);
}

static void ucmt_dummy_cb(ucm_event_type_t type, ucm_event_t *event, void *arg)
{
    (void)type;
    (void)event;
    (void)arg;
}

int main(int argc, char **argv)
{
    int common         = (getenv("UCMT_EXPECT_COMMON") != NULL);
    const char *layout = NULL;
    size_t size, object_size;
    ucmt_opts_t *opts;
    int mode, i;

    if (argc > 1) {
        if (dlopen(argv[1], RTLD_NOW | RTLD_LOCAL) == NULL) {
            fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
            return 2;
        }
    }
#if UCMT_VIEW == 0
    ucmt_object = dlsym(RTLD_DEFAULT, "ucm_global_opts");
    UCMT_CHECK(ucmt_object != NULL, "no ucm_global_opts");
    if (ucmt_object == NULL) {
        return 1;
    }
#endif
    mode = UCMT_OBJECT->mmap_hook_mode; /* as UCX_MEM_MMAP_HOOK_MODE says */

    /* at load: no libucs, so the layout comes from the object's size */
    size = ucm_global_opts_layout(&layout, &object_size);
#if UCMT_VIEW != 0
    UCMT_CHECK(size == sizeof(ucmt_opts_t), "layout %s %zu", layout, size);
    UCMT_CHECK(object_size == sizeof(ucmt_opts_t), "object %zu", object_size);
    UCMT_CHECK(UCMT_OBJECT->cuda_hook_modes == (1u << UCM_MMAP_HOOK_BISTRO),
               "default cuda_hook_modes %llx",
               (unsigned long long)UCMT_OBJECT->cuda_hook_modes);
    UCMT_CHECK(UCMT_OBJECT->alloc_alignment == 16, "default alignment %zu",
               UCMT_OBJECT->alloc_alignment);
    UCMT_CHECK(UCMT_OBJECT->dlopen_process_rpath == 1, "default rpath");
    UCMT_CHECK(UCMT_OBJECT->enable_dynamic_mmap_thresh == 1, "default thresh");
#if UCMT_LAYOUT >= 122
    UCMT_CHECK(UCMT_OBJECT->bistro_grace_duration == 0.05, "default grace %f",
               UCMT_OBJECT->bistro_grace_duration);
#endif
#else
    UCMT_CHECK(object_size == 128, "object %zu", object_size);
#endif

    /* what a libucs of this release passes */
    opts = ucmt_guarded_struct(common ? 20 : sizeof(ucmt_opts_t));
    /* WARN for an unknown release: its one line must be seen */
    opts->log_level      = common ? UCS_LOG_LEVEL_WARN : UCS_LOG_LEVEL_ERROR;
    opts->enable_events  = 0;
    opts->mmap_hook_mode = mode;
    opts->enable_malloc_hooks = 0;
    opts->enable_malloc_reloc = 0;
    if (!common) {
        opts->cuda_hook_modes            = 1u << UCM_MMAP_HOOK_RELOC;
        opts->enable_dynamic_mmap_thresh = 0;
        opts->alloc_alignment            = 64;
        opts->dlopen_process_rpath       = 0;
        opts->module_unload_prevent_mode = 2;
#if UCMT_LAYOUT >= 118
        opts->bistro_force_far_jump = 1;
#endif
#if UCMT_LAYOUT >= 122
        opts->bistro_grace_duration = 0.25;
#endif
    }
    ucm_set_global_opts((const ucm_global_config_t *)opts);

    UCMT_EXPECT_VALUE("MEM_LOG_LEVEL", common ? "WARN" : "ERROR");
    UCMT_EXPECT_VALUE("MEM_EVENTS", "n");
    UCMT_EXPECT_VALUE("MEM_MALLOC_HOOKS", "n");
    UCMT_EXPECT_VALUE("MEM_MALLOC_RELOC", "n");
    UCMT_CHECK(ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 0, ucmt_dummy_cb,
                                     NULL) == UCS_ERR_UNSUPPORTED,
               "handler accepted with enable_events=0");
    if (common) {
        /* the rest is not the caller's: defaults stay */
        UCMT_EXPECT_VALUE("MEM_CUDA_HOOK_MODE", "bistro");
        UCMT_EXPECT_VALUE("MEM_DYNAMIC_MMAP_THRESH", "y");
        UCMT_EXPECT_VALUE("MEM_ALLOC_ALIGN", "16");
        UCMT_EXPECT_VALUE("MEM_DLOPEN_PROCESS_RPATH", "y");
        UCMT_EXPECT_VALUE("MEM_MODULE_UNLOAD_PREVENT_MODE", "lazy");
    } else {
        UCMT_EXPECT_VALUE("MEM_CUDA_HOOK_MODE", "reloc");
        UCMT_EXPECT_VALUE("MEM_DYNAMIC_MMAP_THRESH", "n");
        UCMT_EXPECT_VALUE("MEM_ALLOC_ALIGN", "64");
        UCMT_EXPECT_VALUE("MEM_DLOPEN_PROCESS_RPATH", "n");
        UCMT_EXPECT_VALUE("MEM_MODULE_UNLOAD_PREVENT_MODE", "none");
#if UCMT_LAYOUT >= 118
        UCMT_EXPECT_VALUE("MEM_BISTRO_FORCE_FAR_JUMP", "y");
#endif
#if UCMT_LAYOUT >= 122
        UCMT_EXPECT_VALUE("MEM_BISTRO_GRACE_DURATION", "0.250");
#endif
        /* the object now has this layout, with those values */
        size = ucm_global_opts_layout(&layout, &object_size);
        UCMT_CHECK(size == sizeof(ucmt_opts_t), "layout %s %zu after set",
                   layout, size);
        UCMT_CHECK(UCMT_OBJECT->cuda_hook_modes == (1u << UCM_MMAP_HOOK_RELOC),
                   "object cuda_hook_modes %llx",
                   (unsigned long long)UCMT_OBJECT->cuda_hook_modes);
        UCMT_CHECK(UCMT_OBJECT->alloc_alignment == 64, "object alignment");
        UCMT_CHECK(UCMT_OBJECT->module_unload_prevent_mode == 2,
                   "object unload mode");
#if UCMT_LAYOUT >= 122
        UCMT_CHECK(UCMT_OBJECT->bistro_grace_duration == 0.25, "object grace");
#endif
        /* a direct write (as UCX's gtest does) takes effect */
        UCMT_OBJECT->dlopen_process_rpath = 1;
        UCMT_OBJECT->cuda_hook_modes      = 1u << UCM_MMAP_HOOK_BISTRO;
        UCMT_EXPECT_VALUE("MEM_DLOPEN_PROCESS_RPATH", "y");
        UCMT_EXPECT_VALUE("MEM_CUDA_HOOK_MODE", "bistro");
    }

    /* events back on: a handler is accepted, hooks installed */
    UCMT_OBJECT->enable_events = 1;
    UCMT_CHECK(ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 0, ucmt_dummy_cb,
                                     NULL) == UCS_OK,
               "handler refused with enable_events=1");
    ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED, ucmt_dummy_cb, NULL);

#if UCMT_VIEW == 2
    for (i = 0; i < UCMT_GUARD; ++i) {
        UCMT_CHECK(ucmt_area[i] == UCMT_GUARD_BYTE, "written before, byte %d",
                   i - UCMT_GUARD);
        UCMT_CHECK(
            ucmt_area[UCMT_GUARD + sizeof(ucmt_opts_t) + i] == UCMT_GUARD_BYTE,
            "written past the object, byte +%zu", sizeof(ucmt_opts_t) + i);
    }
#else
    (void)i;
#endif
    printf("%s layout %s: %d failures\n", argv[0], layout, ucmt_failures);
    return ucmt_failures ? 1 : 0;
}
