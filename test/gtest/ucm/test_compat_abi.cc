/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX 1.13.1's libucm internals that UCX's own components import
 * (ucm/api/ucm_compat.h): each behaviour that a UCX module, a trace-enabled
 * libucs or UCX's test suite relies on, with an oracle that does not trust
 * libucm (the bytes of the patched code, the result of the real function,
 * the text written to stderr, glibc's chunk headers).
 */
#include "common/ucm_test.h"
#include "ucm/testlib.h"

#include <ucm/api/ucm_compat.h>

#include <algorithm>
#include <atomic>
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

UCMT_TESTLIB_DECLARE(ucmt_linked_);

/* Functions whose first instruction is known (the compiler's are not): one
 * that reads data RIP-relative (the patcher must relocate it into the
 * trampoline), one that starts with an instruction the patcher does not
 * decode (imul), followed by padding that a 5-byte jump may cover, and one
 * with a frame-pointer prologue (a 1-byte push first, as in most compiled
 * functions, e.g. libcuda's). */
extern "C" int ucmt_compat_rip_value(void);
extern "C" int ucmt_compat_times3(int x);
extern "C" int ucmt_compat_plus5(int x);
asm(".pushsection .data\n"
    ".p2align 2\n"
    "ucmt_compat_rip_data: .long 42\n"
    ".popsection\n"
    ".text\n"
    ".p2align 4\n"
    ".globl ucmt_compat_rip_value\n"
    ".hidden ucmt_compat_rip_value\n"
    ".type ucmt_compat_rip_value, @function\n"
    "ucmt_compat_rip_value:\n"
    "    movl ucmt_compat_rip_data(%rip), %eax\n"
    "    ret\n"
    ".size ucmt_compat_rip_value, .-ucmt_compat_rip_value\n"
    ".p2align 4\n"
    ".globl ucmt_compat_times3\n"
    ".hidden ucmt_compat_times3\n"
    ".type ucmt_compat_times3, @function\n"
    "ucmt_compat_times3:\n"
    "    imull $3, %edi, %eax\n"
    "    ret\n"
    ".size ucmt_compat_times3, .-ucmt_compat_times3\n"
    "    .fill 16, 1, 0xcc\n"
    ".p2align 4\n"
    ".globl ucmt_compat_plus5\n"
    ".hidden ucmt_compat_plus5\n"
    ".type ucmt_compat_plus5, @function\n"
    "ucmt_compat_plus5:\n"
    "    pushq %rbp\n"
    "    movq %rsp, %rbp\n"
    "    movl %edi, %eax\n"
    "    addl $5, %eax\n"
    "    popq %rbp\n"
    "    ret\n"
    ".size ucmt_compat_plus5, .-ucmt_compat_plus5\n");

namespace
{

using namespace ucmt;

class CompatAbi : public ucmt::test
{
};

/* ---- system and logging ---- */

TEST_F(CompatAbi, PageSizeIsSysconf)
{
    EXPECT_EQ((size_t)sysconf(_SC_PAGESIZE), ucm_get_page_size());
}

TEST_F(CompatAbi, LibraryInitIsHarmlessAndRepeatable)
{
    ucm_library_init();
    ucm_library_init();
    EXPECT_EQ(UCS_OK,
              ucm_test_events(UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED));
}

/* Run fn with stderr going to a temporary file; returns what was written. */
template <typename F> std::string capture_stderr(F fn)
{
    char path[] = "/tmp/ucmt-compat-log.XXXXXX";
    int fd      = mkstemp(path);
    int saved   = dup(2);
    std::string text;
    char buf[4096];
    ssize_t n;

    unlink(path);
    dup2(fd, 2);
    fn();
    dup2(saved, 2);
    close(saved);
    lseek(fd, 0, SEEK_SET);
    while ((n = read(fd, buf, sizeof(buf))) > 0) {
        text.append(buf, n);
    }
    close(fd);
    return text;
}

/* What UCX's ucm_log() macro does in its modules. */
#define UCMT_UCX_LOG(_level, _fmt, ...)                                        \
    do {                                                                       \
        if ((int)(_level) <= (int)ucm_global_opts.log_level) {                 \
            __ucm_log(__FILE__, __LINE__, __func__, (_level), _fmt,            \
                      ##__VA_ARGS__);                                          \
        }                                                                      \
    } while (0)

TEST_F(CompatAbi, LogLineFormatsAndLevelFiltering)
{
    ucs_log_level_t saved = ucm_global_opts.log_level;
    std::string out;

    ucm_global_opts.log_level = UCS_LOG_LEVEL_WARN;
    out                       = capture_stderr([] {
        errno = ENOENT;
        UCMT_UCX_LOG(UCS_LOG_LEVEL_WARN, "w %d|%-5s|%5s|%+d|%zu|%x|%m", -7,
                                           "ab", "cd", 3, (size_t)123456789012ul, 255u);
        UCMT_UCX_LOG(UCS_LOG_LEVEL_DEBUG, "hidden %d", 1);
    });
    EXPECT_NE(std::string::npos, out.find("test_compat_abi.cc:")) << out;
    EXPECT_NE(std::string::npos,
              out.find(std::string(" UCM WARN w -7|ab   |   cd|+3|"
                                   "123456789012|ff|") +
                       strerror(ENOENT) + "\n"))
        << out;
    EXPECT_EQ(std::string::npos, out.find("hidden")) << out;
    EXPECT_EQ(1, std::count(out.begin(), out.end(), '\n')) << out;

    /* a higher level lets the debug line through */
    ucm_global_opts.log_level = UCS_LOG_LEVEL_DEBUG;
    out                       = capture_stderr(
        [] { UCMT_UCX_LOG(UCS_LOG_LEVEL_DEBUG, "shown %s", "now"); });
    ucm_global_opts.log_level = saved;
    EXPECT_NE(std::string::npos, out.find(" UCM DEBUG shown now\n")) << out;
}

UCMT_CHILD_SCENARIO(compat_log_fatal)
{
    __ucm_log(__FILE__, __LINE__, __func__, UCS_LOG_LEVEL_FATAL, "boom %d", 7);
    return 0; /* not reached: __ucm_log aborts on FATAL */
}

TEST_F(CompatAbi, LogFatalWritesThenAborts)
{
    child_result r = run_self("compat_log_fatal", {});

    ASSERT_TRUE(r.started && !r.timed_out) << r.str();
    EXPECT_TRUE(WIFSIGNALED(r.status) && (WTERMSIG(r.status) == SIGABRT))
        << r.str();
    EXPECT_NE(std::string::npos, r.err.find(" UCM FATAL boom 7")) << r.str();
}

/* ---- entry patching ---- */

int rip_value_hook()
{
    return 1000;
}

int times3_hook(int x)
{
    return x + 1000;
}

TEST_F(CompatAbi, BistroPatchRedirectsTrampolineRunsOriginalRestoreUndoes)
{
    int (*volatile fn)(void)       = ucmt_compat_rip_value;
    ucm_bistro_restore_point_t *rp = NULL;
    void *orig                     = NULL;
    uint8_t before[16];

    memcpy(before, (void *)fn, sizeof(before));
    ASSERT_EQ(42, fn());
    ASSERT_EQ(UCS_OK, ucm_bistro_patch((void *)fn, (void *)rip_value_hook,
                                       "rip_value", &orig, &rp));
    ASSERT_TRUE(rp != NULL);
    ASSERT_TRUE(orig != NULL);
    EXPECT_EQ((void *)fn, ucm_bistro_restore_addr(rp));
    EXPECT_NE(0, memcmp(before, (void *)fn, sizeof(before)));
    EXPECT_EQ(1000, fn()) << "a call of the patched entry reaches the hook";
    EXPECT_EQ(42, ((int (*)(void))orig)())
        << "the trampoline runs the original (RIP-relative load relocated)";

    ASSERT_EQ(UCS_OK, ucm_bistro_restore(rp));
    EXPECT_EQ(0, memcmp(before, (void *)fn, sizeof(before)))
        << "restore puts back the original bytes";
    EXPECT_EQ(42, fn());
}

/* Group 3 (0xf6/0xf7): test takes an immediate, not/neg/mul/div none.
 * Each function below starts with one such instruction (objdump's length;
 * the first is glibc 2.41's mmap entry), then "mov $42,%eax; ret".  The
 * patcher must displace exactly that instruction: the trampoline then
 * returns 42, and a wrong length would run garbage. */
TEST_F(CompatAbi, BistroDecodesTestWithImmediate)
{
    static const struct {
        uint8_t code[8];
        size_t len;
    } insns[] = {
        {{0x41, 0xf7, 0xc1, 0xff, 0x0f, 0x00, 0x00}, 7}, /* test $0xfff,%r9d */
        {{0x66, 0xf7, 0xc1, 0x34, 0x12}, 5},             /* test $0x1234,%cx */
        {{0xf7, 0x44, 0x24, 0x08, 1, 0, 0, 0}, 8}, /* testl $1,0x8(%rsp) */
        {{0x48, 0xf7, 0xd8}, 3},                   /* neg %rax */
    };
    static const uint8_t tail[] = {0xb8, 42,   0,    0,    0,    0xc3, 0xcc,
                                   0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc};
    long page                   = sysconf(_SC_PAGESIZE);

    /* a page per function: the patcher leaves a restored page read-only */
    for (const auto &insn : insns) {
        ucm_bistro_restore_point_t *rp = NULL;
        void *orig                     = NULL;
        uint8_t *mem;

        mem = (uint8_t *)mmap(NULL, page, PROT_READ | PROT_WRITE | PROT_EXEC,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ASSERT_NE(MAP_FAILED, (void *)mem);
        memset(mem, 0xcc, page);
        memcpy(mem, insn.code, insn.len);
        memcpy(mem + insn.len, tail, sizeof(tail));
        ASSERT_EQ(UCS_OK, ucm_bistro_patch((void *)mem, (void *)rip_value_hook,
                                           "group3", &orig, &rp))
            << "first byte 0x" << std::hex << (int)insn.code[0];
        EXPECT_EQ(1000, ((int (*)(void))(void *)mem)());
        EXPECT_EQ(42, ((int (*)(void))orig)())
            << "trampoline of an entry of " << insn.len << " bytes";
        ASSERT_EQ(UCS_OK, ucm_bistro_restore(rp));
        EXPECT_EQ(0, memcmp(mem, insn.code, insn.len));
        munmap(mem, page);
    }
}

TEST_F(CompatAbi, BistroPatchDisplacesSeveralInstructionsOfAPrologue)
{
    int (*volatile fn)(int)        = ucmt_compat_plus5;
    ucm_bistro_restore_point_t *rp = NULL;
    void *orig                     = NULL;
    uint8_t before[16];

    memcpy(before, (void *)fn, sizeof(before));
    ASSERT_EQ(0x55, before[0]) << "push %rbp first";
    ASSERT_EQ(12, fn(7));
    ASSERT_EQ(UCS_OK, ucm_bistro_patch((void *)fn, (void *)times3_hook, "plus5",
                                       &orig, &rp));
    EXPECT_EQ(1007, fn(7));
    EXPECT_EQ(12, ((int (*)(int))orig)(7))
        << "the trampoline runs push, mov, mov and returns into add";
    EXPECT_EQ(0, memcmp(before + 6, (void *)((char *)fn + 6), 10))
        << "bytes after the displaced instructions are untouched";
    ASSERT_EQ(UCS_OK, ucm_bistro_restore(rp));
    EXPECT_EQ(0, memcmp(before, (void *)fn, sizeof(before)));
    EXPECT_EQ(12, fn(7));
}

TEST_F(CompatAbi, BistroPatchOfLibraryFunctionSeenThroughPlt)
{
    /* a function of a shared library, called through this program's PLT
     * (the patcher finds its extent in the library's symbol table) */
    auto fn = (const char *(*)(void))dlsym(RTLD_DEFAULT, "ucmt_linked_name");
    ucm_bistro_restore_point_t *rp = NULL;
    void *orig                     = NULL;

    ASSERT_TRUE(fn != NULL);
    ASSERT_EQ(UCS_OK,
              ucm_bistro_patch((void *)fn,
                               (void *)+[]() -> const char * { return "hook"; },
                               "ucmt_linked_name", &orig, &rp));
    EXPECT_STREQ("hook", ucmt_linked_name());
    EXPECT_STREQ("linked", ((const char *(*)(void))orig)());
    ASSERT_EQ(UCS_OK, ucm_bistro_restore(rp));
    EXPECT_STREQ("linked", ucmt_linked_name());
}

TEST_F(CompatAbi, BistroPatchOverwritesEntryWhenNoOriginalIsNeeded)
{
    int (*volatile fn)(int)        = ucmt_compat_times3;
    ucm_bistro_restore_point_t *rp = NULL;
    void *orig                     = NULL;
    uint8_t before[16];

    memcpy(before, (void *)fn, sizeof(before));
    ASSERT_EQ(21, fn(7));
    /* imul is not decoded: no trampoline can be built */
    EXPECT_EQ(UCS_ERR_UNSUPPORTED,
              ucm_bistro_patch((void *)fn, (void *)times3_hook, "times3", &orig,
                               &rp));
    EXPECT_EQ(0, memcmp(before, (void *)fn, sizeof(before)));
    EXPECT_EQ(21, fn(7));
    /* without an original, UCX's way: the entry is overwritten */
    ASSERT_EQ(UCS_OK, ucm_bistro_patch((void *)fn, (void *)times3_hook,
                                       "times3", NULL, &rp));
    EXPECT_EQ(1007, fn(7));
    ASSERT_EQ(UCS_OK, ucm_bistro_restore(rp));
    EXPECT_EQ(0, memcmp(before, (void *)fn, sizeof(before)));
    EXPECT_EQ(21, fn(7));
}

std::atomic<int> munmap_hook_calls(0);

int munmap_hook(void *addr, size_t length)
{
    ++munmap_hook_calls;
    return (int)syscall(SYS_munmap, addr, length);
}

typedef int (*munmap_func_t)(void *, size_t);

/* UCX's gtest malloc_hook.bistro_patch, on top of libucm's own hooks */
TEST_F(CompatAbi, BistroPatchOfLibcMunmapThenRestoreKeepsEvents)
{
    const size_t ps = page_size();
    void *func      = ucm_reloc_get_orig("munmap", (void *)munmap_hook);
    ucm_bistro_restore_point_t *rp = NULL;
    uint8_t before[16];
    void *p;

    ASSERT_TRUE(func != NULL);
    memcpy(before, func, sizeof(before));
    ASSERT_EQ(UCS_OK,
              ucm_bistro_patch(func, (void *)munmap_hook, "munmap", NULL, &rp));
    p = map_anon(ps);
    ASSERT_TRUE(p != NULL);
    munmap_hook_calls = 0;
    EXPECT_EQ(0, ((munmap_func_t)func)(p, ps));
    EXPECT_EQ(1, munmap_hook_calls.load());
    EXPECT_FALSE(readable(p));

    ASSERT_EQ(UCS_OK, ucm_bistro_restore(rp));
    EXPECT_EQ(0, memcmp(before, func, sizeof(before)));
    p = map_anon(ps);
    ASSERT_TRUE(p != NULL);
    munmap_hook_calls = 0;
    EXPECT_EQ(0, ((munmap_func_t)func)(p, ps));
    EXPECT_EQ(0, munmap_hook_calls.load());
    /* libucm's own hooks of munmap are back (bistro: it was ours below) */
    EXPECT_EQ(UCS_OK,
              ucm_test_events(UCM_EVENT_MUNMAP | UCM_EVENT_VM_UNMAPPED));
}

TEST_F(CompatAbi, BistroBadArguments)
{
    ucm_bistro_restore_point_t *rp = NULL;

    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucm_bistro_patch(NULL, (void *)times3_hook, "x", NULL, &rp));
    EXPECT_EQ(
        UCS_ERR_INVALID_PARAM,
        ucm_bistro_patch((void *)ucmt_compat_times3, NULL, "x", NULL, &rp));
    EXPECT_TRUE(rp == NULL);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, ucm_bistro_restore(NULL));
}

/* ---- GOT/PLT patching ---- */

std::atomic<int> getpgrp_hook_calls(0);
pid_t (*getpgrp_real)(void);

pid_t getpgrp_hook(void)
{
    ++getpgrp_hook_calls;
    return getpgrp_real();
}

std::atomic<int> getsid_hook_calls(0);
pid_t (*getsid_real)(pid_t);

pid_t getsid_hook(pid_t pid)
{
    ++getsid_hook_calls;
    return getsid_real(pid);
}

void *libc_symbol(const char *name)
{
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    void *sym  = (libc != NULL) ? dlsym(libc, name) : NULL;

    if (libc != NULL) {
        dlclose(libc);
    }
    return sym;
}

std::string compat_lib_path()
{
    const char *dir = getenv("UCM_GTEST_LIBDIR");

    return std::string((dir != NULL) ? dir : UCMT_LIBDIR) +
           "/libucmt_compat.so";
}

TEST_F(CompatAbi, RelocGetOrigFindsTheRealFunction)
{
    void *real = ucm_reloc_get_orig("getpgrp", (void *)getpgrp_hook);

    EXPECT_EQ(libc_symbol("getpgrp"), real);
    EXPECT_EQ((pid_t)syscall(SYS_getpgrp), ((pid_t(*)(void))real)());
}

TEST_F(CompatAbi, RelocModifyPatchesLoadedAndLaterLoadedObjects)
{
    /* owned by libucm after the call: static */
    static ucm_compat_reloc_patch_t patch = {
        "getpgrp", (void *)getpgrp_hook, NULL, {NULL, NULL}, NULL};
    const std::string path = compat_lib_path();

    getpgrp_real =
        (pid_t(*)(void))ucm_reloc_get_orig("getpgrp", (void *)getpgrp_hook);
    ASSERT_TRUE(getpgrp_real != NULL);
    ASSERT_TRUE(dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD) == NULL)
        << "the module must be loaded only after the patch";

    ASSERT_EQ(UCS_OK, ucm_reloc_modify(&patch));
    EXPECT_EQ((void *)getpgrp_real, patch.prev_value);

    /* a library loaded before the patch */
    getpgrp_hook_calls = 0;
    EXPECT_EQ(getpgrp_real(), ucmt_linked_getpgrp());
    EXPECT_EQ(1, getpgrp_hook_calls.load());

    /* a module loaded after it */
    void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_TRUE(handle != NULL) << dlerror();
    auto fn = (pid_t(*)(void))dlsym(handle, "ucmt_lib_getpgrp");
    ASSERT_TRUE(fn != NULL);
    EXPECT_EQ(getpgrp_real(), fn());
    EXPECT_EQ(2, getpgrp_hook_calls.load())
        << "an object dlopen()ed after ucm_reloc_modify was not patched";
    dlclose(handle);
}

TEST_F(CompatAbi, RelocModifyLeavesBlacklistedObjectsAlone)
{
    static char compat_name[]             = "libucmt_compat";
    static char *blacklist[]              = {compat_name, NULL};
    static ucm_compat_reloc_patch_t patch = {
        "getsid", (void *)getsid_hook, NULL, {NULL, NULL}, blacklist};
    const std::string path = compat_lib_path();

    getsid_real =
        (pid_t(*)(pid_t))ucm_reloc_get_orig("getsid", (void *)getsid_hook);
    ASSERT_TRUE(getsid_real != NULL);
    ASSERT_EQ(UCS_OK, ucm_reloc_modify(&patch));

    getsid_hook_calls = 0;
    EXPECT_EQ(getsid_real(0), ucmt_linked_getsid(0));
    EXPECT_EQ(1, getsid_hook_calls.load());

    void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_TRUE(handle != NULL) << dlerror();
    auto fn = (pid_t(*)(pid_t))dlsym(handle, "ucmt_lib_getsid");
    ASSERT_TRUE(fn != NULL);
    EXPECT_EQ(getsid_real(0), fn(0));
    EXPECT_EQ(1, getsid_hook_calls.load())
        << "a blacklisted object was patched";
    dlclose(handle);
}

TEST_F(CompatAbi, RelocModifyBadArguments)
{
    ucm_compat_reloc_patch_t patch = {
        NULL, (void *)getpgrp_hook, NULL, {NULL, NULL}, NULL};

    EXPECT_EQ(UCS_ERR_INVALID_PARAM, ucm_reloc_modify(NULL));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, ucm_reloc_modify(&patch));
    patch.symbol = "getpgrp";
    patch.value  = NULL;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, ucm_reloc_modify(&patch));
}

TEST_F(CompatAbi, RelocGetOrigLockIsRecursiveAndThreadUnset)
{
    EXPECT_TRUE(pthread_equal((pthread_t)-1, ucm_reloc_get_orig_thread));
    ASSERT_EQ(0, pthread_mutex_lock(&ucm_reloc_get_orig_lock));
    EXPECT_EQ(0, pthread_mutex_trylock(&ucm_reloc_get_orig_lock))
        << "UCX's replacement functions may nest look-ups on one thread";
    pthread_mutex_unlock(&ucm_reloc_get_orig_lock);
    pthread_mutex_unlock(&ucm_reloc_get_orig_lock);
}

/* ---- events ---- */

struct dispatch_rec {
    std::vector<int> order; /* priorities, in call order */
    void *arg_seen = NULL;
};

dispatch_rec *dispatch_log;

template <int P> void prio_cb(ucm_event_type_t type, ucm_event_t *, void *arg)
{
    if ((dispatch_log != NULL) && (type == UCM_EVENT_MEM_TYPE_ALLOC)) {
        dispatch_log->order.push_back(P);
        dispatch_log->arg_seen = arg;
    }
}

TEST_F(CompatAbi, EventDispatchCallsHandlersInPriorityOrder)
{
    const int ev = UCM_EVENT_MEM_TYPE_ALLOC;
    dispatch_rec rec;
    ucm_event_t event;
    int arg;

    ASSERT_EQ(UCS_OK, ucm_set_event_handler(ev, 5, prio_cb<5>, &arg));
    ASSERT_EQ(UCS_OK, ucm_set_event_handler(ev, -3, prio_cb<-3>, &arg));
    ASSERT_EQ(UCS_OK, ucm_set_event_handler(ev, 0, prio_cb<0>, &arg));
    event.mem_type.address  = (void *)0x10000;
    event.mem_type.size     = 4096;
    event.mem_type.mem_type = UCS_MEMORY_TYPE_CUDA;
    dispatch_log            = &rec;
    ucm_event_enter();
    ucm_event_dispatch(UCM_EVENT_MEM_TYPE_ALLOC, &event);
    ucm_event_leave();
    /* an event nobody listens to reaches nobody */
    ucm_event_dispatch(UCM_EVENT_MEM_TYPE_FREE, &event);
    dispatch_log = NULL;
    ucm_unset_event_handler(ev, prio_cb<5>, &arg);
    ucm_unset_event_handler(ev, prio_cb<-3>, &arg);
    ucm_unset_event_handler(ev, prio_cb<0>, &arg);
    EXPECT_EQ((std::vector<int>{-3, 0, 5}), rec.order);
    EXPECT_EQ((void *)&arg, rec.arg_seen);
}

struct native_rec {
    void *addr;      /* the mapping the test dispatches for */
    void *skip_addr; /* a pre-handler sets the result for this one */
    bool mapped_pre; /* the mapping existed when the pre-handler ran */
    int result_pre;  /* result seen by the pre-handler */
    int result_post; /* result seen by the post-handler */
};

native_rec *native_log;

void native_pre_cb(ucm_event_type_t type, ucm_event_t *e, void *)
{
    native_rec *r = native_log;

    if ((r == NULL) || (type != UCM_EVENT_MUNMAP)) {
        return;
    }
    if (e->munmap.address == r->addr) {
        r->mapped_pre = readable(r->addr);
        r->result_pre = e->munmap.result;
    } else if (e->munmap.address == r->skip_addr) {
        e->munmap.result = 0; /* done here: the original must not run */
    }
}

void native_post_cb(ucm_event_type_t type, ucm_event_t *e, void *)
{
    native_rec *r = native_log;

    if ((r != NULL) && (type == UCM_EVENT_MUNMAP) &&
        ((e->munmap.address == r->addr) ||
         (e->munmap.address == r->skip_addr))) {
        r->result_post = e->munmap.result;
    }
}

TEST_F(CompatAbi, EventDispatchOfNativeEventCallsTheOriginalBetween)
{
    const size_t ps = page_size();
    native_rec rec  = {map_anon(ps), map_anon(ps), false, 99, 99};
    ucm_event_t event;

    ASSERT_TRUE((rec.addr != NULL) && (rec.skip_addr != NULL));
    ASSERT_EQ(UCS_OK,
              ucm_set_event_handler(UCM_EVENT_MUNMAP, -1, native_pre_cb, NULL));
    ASSERT_EQ(UCS_OK,
              ucm_set_event_handler(UCM_EVENT_MUNMAP, 1, native_post_cb, NULL));
    native_log           = &rec;
    event.munmap.result  = -1;
    event.munmap.address = rec.addr;
    event.munmap.size    = ps;
    ucm_event_dispatch(UCM_EVENT_MUNMAP, &event);
    native_log = NULL;
    EXPECT_TRUE(rec.mapped_pre) << "pre-handler ran after the unmap";
    EXPECT_EQ(-1, rec.result_pre);
    EXPECT_EQ(0, rec.result_post);
    EXPECT_EQ(0, event.munmap.result);
    EXPECT_FALSE(readable(rec.addr)) << "the original munmap did not run";

    /* a result set before the original: the original is not called */
    native_log           = &rec;
    rec.result_post      = 99;
    event.munmap.result  = -1;
    event.munmap.address = rec.skip_addr;
    ucm_event_dispatch(UCM_EVENT_MUNMAP, &event);
    native_log = NULL;
    EXPECT_EQ(0, rec.result_post);
    EXPECT_TRUE(readable(rec.skip_addr)) << "the original ran anyway";
    ucm_unset_event_handler(UCM_EVENT_MUNMAP, native_pre_cb, NULL);
    ucm_unset_event_handler(UCM_EVENT_MUNMAP, native_post_cb, NULL);
    ucm_orig_munmap(rec.skip_addr, ps);
}

void noop_cb(ucm_event_type_t, ucm_event_t *, void *)
{
}

TEST_F(CompatAbi, EventSectionHoldsOffHandlerRemoval)
{
    std::atomic<int> entered(0);
    std::atomic<bool> leaving(false);

    ASSERT_EQ(UCS_OK, ucm_set_event_handler(UCM_EVENT_MEM_TYPE_FREE, 0, noop_cb,
                                            &entered));
    std::thread reader([&] {
        ucm_event_enter();
        ucm_event_enter(); /* sections nest */
        ucm_event_leave();
        entered = 1;
        usleep(200 * 1000);
        leaving = true;
        ucm_event_leave();
    });
    while (!entered) {
        sched_yield();
    }
    ucm_unset_event_handler(UCM_EVENT_MEM_TYPE_FREE, noop_cb, &entered);
    EXPECT_TRUE(leaving.load())
        << "ucm_unset_event_handler returned while another thread was in "
           "an event section";
    reader.join();
}

/* ---- installers of UCX's modules ---- */

struct installer_rec {
    int install_calls;
    int install_events;
    ucs_status_t install_status;
    int existing_calls;
    ucm_compat_event_handler_t handler_seen;
};

installer_rec inst_rec;

ucs_status_t test_install(int events)
{
    ++inst_rec.install_calls;
    inst_rec.install_events = events;
    return inst_rec.install_status;
}

/* What UCX's libucm_cuda does: report the existing allocations to the
 * handler, in an event section. */
void test_existing(ucm_compat_event_handler_t *handler)
{
    ucm_event_t event;

    ++inst_rec.existing_calls;
    inst_rec.handler_seen = *handler;
    if (handler->events & UCM_EVENT_MEM_TYPE_ALLOC) {
        event.mem_type.address  = (void *)0x7000;
        event.mem_type.size     = 0x1000;
        event.mem_type.mem_type = UCS_MEMORY_TYPE_LAST;
        ucm_event_enter();
        handler->cb(UCM_EVENT_MEM_TYPE_ALLOC, &event, handler->arg);
        ucm_event_leave();
    }
}

ucm_compat_event_installer_t test_installer = {
    test_install, test_existing, {NULL, NULL}};

std::vector<void *> *alloc_seen;

void alloc_cb(ucm_event_type_t type, ucm_event_t *e, void *)
{
    if ((alloc_seen != NULL) && (type == UCM_EVENT_MEM_TYPE_ALLOC)) {
        alloc_seen->push_back(e->mem_type.address);
    }
}

class CompatInstaller : public CompatAbi
{
  protected:
    void SetUp() override
    {
        CompatAbi::SetUp();
        /* the program's copy of the list head starts empty and linked to
         * itself (the initializer survived the copy relocation) */
        ASSERT_EQ(&ucm_event_installer_list, ucm_event_installer_list.next);
        ASSERT_EQ(&ucm_event_installer_list, ucm_event_installer_list.prev);
        memset(&inst_rec, 0, sizeof(inst_rec));
        inst_rec.install_status = UCS_OK;
        /* as a module's constructor does */
        ucs_list_add_tail(&ucm_event_installer_list, &test_installer.list);
    }

    void TearDown() override
    {
        ucs_list_del(&test_installer.list);
        CompatAbi::TearDown();
    }
};

TEST_F(CompatInstaller, InstallCalledWithTheRequestedEvents)
{
    const int ev = UCM_EVENT_MEM_TYPE_ALLOC | UCM_EVENT_MEM_TYPE_FREE;

    ASSERT_EQ(UCS_OK, ucm_set_event_handler(ev, 0, noop_cb, NULL));
    EXPECT_EQ(1, inst_rec.install_calls);
    EXPECT_EQ(ev, inst_rec.install_events);
    EXPECT_EQ(0, inst_rec.existing_calls);
    ucm_unset_event_handler(ev, noop_cb, NULL);

    /* events declared external are not the installers' business */
    ucm_set_external_event(UCM_EVENT_VM_UNMAPPED);
    ASSERT_EQ(UCS_OK, ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED |
                                                UCM_EVENT_MEM_TYPE_FREE,
                                            0, noop_cb, NULL));
    ucm_unset_external_event(UCM_EVENT_VM_UNMAPPED);
    EXPECT_EQ(2, inst_rec.install_calls);
    EXPECT_EQ(UCM_EVENT_MEM_TYPE_FREE, inst_rec.install_events);
    ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED | UCM_EVENT_MEM_TYPE_FREE,
                            noop_cb, NULL);

    /* UCM_EVENT_FLAG_NO_INSTALL: no installer runs */
    ASSERT_EQ(UCS_OK, ucm_set_event_handler(UCM_EVENT_MEM_TYPE_ALLOC |
                                                UCM_EVENT_FLAG_NO_INSTALL,
                                            0, noop_cb, NULL));
    EXPECT_EQ(2, inst_rec.install_calls);
    ucm_unset_event_handler(UCM_EVENT_MEM_TYPE_ALLOC, noop_cb, NULL);
}

TEST_F(CompatInstaller, InstallerErrorFailsTheHandler)
{
    std::vector<void *> seen;
    ucm_event_t event;

    inst_rec.install_status = UCS_ERR_NO_DEVICE;
    EXPECT_EQ(UCS_ERR_NO_DEVICE, ucm_set_event_handler(UCM_EVENT_MEM_TYPE_ALLOC,
                                                       0, alloc_cb, NULL));
    event.mem_type.address  = (void *)0x9000;
    event.mem_type.size     = 1;
    event.mem_type.mem_type = UCS_MEMORY_TYPE_CUDA;
    alloc_seen              = &seen;
    ucm_event_dispatch(UCM_EVENT_MEM_TYPE_ALLOC, &event);
    alloc_seen = NULL;
    EXPECT_TRUE(seen.empty()) << "the handler was added although its "
                                 "installation failed";
    ucm_unset_event_handler(UCM_EVENT_MEM_TYPE_ALLOC, alloc_cb, NULL);
}

TEST_F(CompatInstaller, ExistingAllocReportedToTheNewHandler)
{
    std::vector<void *> seen;
    int arg;

    alloc_seen = &seen;
    ASSERT_EQ(UCS_OK, ucm_set_event_handler(UCM_EVENT_MEM_TYPE_ALLOC |
                                                UCM_EVENT_FLAG_EXISTING_ALLOC,
                                            7, alloc_cb, &arg));
    alloc_seen = NULL;
    EXPECT_EQ(1, inst_rec.existing_calls);
    EXPECT_EQ(UCM_EVENT_MEM_TYPE_ALLOC, inst_rec.handler_seen.events)
        << "the handler's events, without the flags";
    EXPECT_EQ(7, inst_rec.handler_seen.priority);
    ASSERT_EQ(1u, seen.size());
    EXPECT_EQ((void *)0x7000, seen[0]);
    ucm_unset_event_handler(UCM_EVENT_MEM_TYPE_ALLOC, alloc_cb, &arg);
}

TEST_F(CompatAbi, ModulesLoadedThroughLibucsLoaderBeforeInstallers)
{
    const char *dir = getenv("UCM_GTEST_LIBDIR");
    const std::string path =
        std::string((dir != NULL) ? dir : UCMT_LIBDIR) + "/libucmt_fake_ucs.so";
    void *h = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);

    ASSERT_TRUE(h != NULL) << dlerror();
    auto calls     = (int (*)(void))dlsym(h, "ucmt_fake_ucs_load_calls");
    auto framework = (const char *(*)(void))dlsym(h, "ucmt_fake_ucs_framework");
    auto modules   = (const char *(*)(void))dlsym(h, "ucmt_fake_ucs_modules");
    auto flags     = (unsigned (*)(void))dlsym(h, "ucmt_fake_ucs_flags");
    auto installs  = (int (*)(void))dlsym(h, "ucmt_fake_ucs_install_calls");
    auto events    = (int (*)(void))dlsym(h, "ucmt_fake_ucs_install_events");
    auto unload    = (void (*)(void))dlsym(h, "ucmt_fake_ucs_unload");
    ASSERT_TRUE(calls && framework && modules && flags && installs && events &&
                unload);
    if (calls() > 0) {
        GTEST_SKIP() << "UCX's modules load once per process (done by an "
                        "earlier repetition)";
    }

    ASSERT_EQ(UCS_OK,
              ucm_set_event_handler(UCM_EVENT_MEM_TYPE_FREE, 0, noop_cb, NULL));
    EXPECT_EQ(1, calls());
    EXPECT_STREQ("ucm", framework());
    EXPECT_STREQ(":cuda:rocm", modules());
    EXPECT_EQ(1u, flags()) << "UCS_MODULE_LOAD_FLAG_NODELETE";
    EXPECT_EQ(1, installs()) << "the module's installer ran in the same call";
    EXPECT_EQ(UCM_EVENT_MEM_TYPE_FREE, events());

    /* loaded once: the loader is not asked again */
    ASSERT_EQ(UCS_OK,
              ucm_set_event_handler(UCM_EVENT_MEM_TYPE_FREE, 0, noop_cb, NULL));
    EXPECT_EQ(1, calls());
    EXPECT_EQ(2, installs());
    ucm_unset_event_handler(UCM_EVENT_MEM_TYPE_FREE, noop_cb, NULL);
    unload();
    /* stays loaded (a module is never unloaded), harmless for other tests */
}

/* ---- UCX's malloc state, on glibc's malloc (fresh processes: mallopt()
 * changes the process's malloc for good) ---- */

/* glibc's chunk header: bit 1 of the size field marks an mmap'ed chunk */
__attribute__((noinline)) bool chunk_is_mmapped(void *p)
{
    size_t header;

    memcpy(&header, (char *)p - sizeof(header), sizeof(header));
    return (header & 2) != 0;
}

UCMT_CHILD_SCENARIO(compat_malloc_defaults)
{
    bool ok = (ucm_dlmallopt_get(M_MMAP_THRESHOLD) == 128 * 1024) &&
              (ucm_dlmallopt_get(M_TRIM_THRESHOLD) == 128 * 1024) &&
              (ucm_dlmallopt_get(-2 /* M_GRANULARITY */) ==
               (int)sysconf(_SC_PAGESIZE)) &&
              (ucm_dlmallopt_get(12345) == 0);

    printf("defaults: mmap %d trim %d\n", ucm_dlmallopt_get(M_MMAP_THRESHOLD),
           ucm_dlmallopt_get(M_TRIM_THRESHOLD));
    ucm_malloc_state_reset(256 * 1024, 512 * 1024);
    if (!malloc_is_glibc()) {
        /* the parameters are glibc's: another malloc (a sanitizer's) may
         * refuse mallopt(), and its chunks have another header */
        printf("malloc is not glibc's: reset not checked\n");
        return ok ? 0 : 1;
    }
    ok = ok && (ucm_dlmallopt_get(M_MMAP_THRESHOLD) == 256 * 1024) &&
         (ucm_dlmallopt_get(M_TRIM_THRESHOLD) == 512 * 1024);
    if (ucm_global_opts.mmap_hook_mode == UCM_MMAP_HOOK_BISTRO) {
        /* glibc's malloc is left as it is: its dynamic threshold still
         * rises past a freed mmap'ed block, so the same size comes from
         * the heap next time (a fixed 256 KiB threshold would mmap it) */
        void *first        = malloc(300 * 1024);
        bool first_mmapped = chunk_is_mmapped(first); /* keeps the block */
        free(first);
        void *again = malloc(300 * 1024);
        printf("bistro: 300 KiB mmapped %d, again %d\n", first_mmapped,
               chunk_is_mmapped(again));
        ok = ok && !chunk_is_mmapped(again);
        free(again);
        return ok ? 0 : 1;
    }
    /* glibc's malloc now really uses 256 KiB as its threshold */
    void *below = malloc(200 * 1024);
    void *above = malloc(300 * 1024);
    printf("below mmapped %d above mmapped %d\n", chunk_is_mmapped(below),
           chunk_is_mmapped(above));
    ok = ok && !chunk_is_mmapped(below) && chunk_is_mmapped(above);
    free(below);
    free(above);
    return ok ? 0 : 1;
}

UCMT_CHILD_SCENARIO(compat_malloc_env)
{
    /* MALLOC_MMAP_THRESHOLD_=1048576, GLIBC_TUNABLES trim 777216 */
    bool ok = (ucm_dlmallopt_get(M_MMAP_THRESHOLD) == 1048576) &&
              (ucm_dlmallopt_get(M_TRIM_THRESHOLD) == 777216);

    printf("start: mmap %d trim %d\n", ucm_dlmallopt_get(M_MMAP_THRESHOLD),
           ucm_dlmallopt_get(M_TRIM_THRESHOLD));
    /* the user's setting wins over the reset's defaults, as in UCX */
    ucm_malloc_state_reset(128 * 1024, 128 * 1024);
    printf("after reset: mmap %d trim %d\n",
           ucm_dlmallopt_get(M_MMAP_THRESHOLD),
           ucm_dlmallopt_get(M_TRIM_THRESHOLD));
    if (malloc_is_glibc()) {
        ok = ok && (ucm_dlmallopt_get(M_MMAP_THRESHOLD) == 1048576) &&
             (ucm_dlmallopt_get(M_TRIM_THRESHOLD) == 128 * 1024);
    }
    return ok ? 0 : 1;
}

TEST(CompatMalloc, DlmalloptGetReportsWhatStateResetSet)
{
    child_result r =
        run_self("compat_malloc_defaults", {{"MALLOC_MMAP_THRESHOLD_", NULL},
                                            {"MALLOC_TRIM_THRESHOLD_", NULL},
                                            {"GLIBC_TUNABLES", NULL}});
    EXPECT_TRUE(r.exited_ok()) << r.str();
}

TEST(CompatMalloc, EnvironmentSettingsWinAsInUcx)
{
    child_result r =
        run_self("compat_malloc_env",
                 {{"MALLOC_MMAP_THRESHOLD_", "1048576"},
                  {"MALLOC_TRIM_THRESHOLD_", NULL},
                  {"GLIBC_TUNABLES", "glibc.malloc.trim_threshold=777216"}});
    EXPECT_TRUE(r.exited_ok()) << r.str();
}

/* ---- /proc/self/maps as UCX's modules read it ---- */

struct maps_path {
    void *addr;
    bool found;
    bool null_path;
    std::string path;
};

int maps_path_cb(void *arg, void *addr, size_t, int, const char *path)
{
    maps_path *m = (maps_path *)arg;

    if (addr != m->addr) {
        return 0;
    }
    m->found     = true;
    m->null_path = (path == NULL);
    m->path      = (path != NULL) ? path : "";
    return 1;
}

TEST_F(CompatAbi, ProcMapsAnonymousPathIsEmptyNotNull)
{
    const size_t ps = page_size();
    void *guard =
        mmap(NULL, 3 * ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(MAP_FAILED, guard);
    void *p = (char *)guard + ps;
    ASSERT_EQ(p, mmap(p, ps, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0));
    maps_path m = {p, false, false, "?"};
    ucm_parse_proc_self_maps(maps_path_cb, &m);
    munmap(guard, 3 * ps);
    ASSERT_TRUE(m.found);
    /* UCX's modules strncmp() the path: it must be a string */
    EXPECT_FALSE(m.null_path);
    EXPECT_EQ("", m.path);
}

} // namespace
