/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Shared helpers of the libucm test suite; see ucm_test.h.
 */
#include "ucm_test.h"

#ifdef HAVE_VALGRIND_VALGRIND_H
#include <valgrind/valgrind.h>
#endif

#include <atomic>
#include <map>
#include <set>
#include <sstream>

#include <dlfcn.h>
#include <malloc.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

namespace ucmt
{

/* ---- environment ---- */

size_t page_size()
{
    static size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    return ps;
}

uintptr_t align_down(uintptr_t x, size_t a)
{
    return x & ~(uintptr_t)(a - 1);
}

uintptr_t align_up(uintptr_t x, size_t a)
{
    return (x + a - 1) & ~(uintptr_t)(a - 1);
}

pid_t tid()
{
    return (pid_t)syscall(SYS_gettid);
}

bool on_valgrind()
{
#ifdef HAVE_VALGRIND_VALGRIND_H
    if (RUNNING_ON_VALGRIND) {
        return true;
    }
#endif
    const char *v = getenv("UCM_GTEST_VALGRIND");
    return (v != NULL) && (v[0] == '1' || v[0] == 'y');
}

bool quick()
{
    const char *q = getenv("UCM_GTEST_QUICK");
    return on_valgrind() || ((q != NULL) && (q[0] == '1' || q[0] == 'y'));
}

unsigned scaled(unsigned normal, unsigned quick_value)
{
    return quick() ? quick_value : normal;
}

ucm_mmap_hook_mode_t requested_mode()
{
    const char *m = getenv("UCX_MEM_MMAP_HOOK_MODE");
    int i;

    if (m == NULL) {
        return UCM_MMAP_HOOK_BISTRO;
    }
    for (i = 0; i < UCM_MMAP_HOOK_LAST; ++i) {
        if (!strcasecmp(m, ucm_mmap_hook_modes[i])) {
            return (ucm_mmap_hook_mode_t)i;
        }
    }
    return UCM_MMAP_HOOK_BISTRO; /* invalid value: libucm keeps the default */
}

const char *mode_name(int mode)
{
    return ((mode >= 0) && (mode < UCM_MMAP_HOOK_LAST))
               ? ucm_mmap_hook_modes[mode]
               : "?";
}

bool hooks_available(std::string *reason)
{
    static int state = 0; /* 1 ok, -1 failed */
    static std::string why;

    if (state == 0) {
        ucs_status_t status = ucm_hooks_install();
        if (status != UCS_OK) {
            std::ostringstream os;
            os << "ucm_hooks_install() failed (status " << (int)status
               << ") in mode '" << mode_name(requested_mode())
               << "': see the Install.* test";
            why   = os.str();
            state = -1;
        } else {
            state = 1;
        }
    }
    if (reason != NULL) {
        *reason = why;
    }
    return state > 0;
}

void release_free_memory(bool glibc)
{
    typedef void (*release_fn_t)(void);
    typedef int (*mallctl_fn_t)(const char *, void *, size_t *, void *, size_t);
    release_fn_t release = reinterpret_cast<release_fn_t>(
        dlsym(RTLD_DEFAULT, "MallocExtension_ReleaseFreeMemory"));
    mallctl_fn_t mallctl =
        reinterpret_cast<mallctl_fn_t>(dlsym(RTLD_DEFAULT, "mallctl"));

    if (release != NULL) {
        release(); /* tcmalloc */
    } else if (mallctl != NULL) {
        /* jemalloc: purge every arena (MALLCTL_ARENAS_ALL) */
        mallctl("arena.4096.purge", NULL, NULL, NULL, 0);
    } else if (glibc) {
        malloc_trim(0);
    }
}

bool malloc_is_glibc(std::string *owner)
{
    void *fn = dlsym(RTLD_DEFAULT, "malloc");
    Dl_info info;
    const char *name, *base;

    if (on_valgrind()) {
        if (owner != NULL) {
            *owner = "valgrind's replacement (vgpreload)";
        }
        return false;
    }
    if ((fn == NULL) || !dladdr(fn, &info) || (info.dli_fname == NULL)) {
        if (owner != NULL) {
            *owner = "?";
        }
        return false;
    }
    name = info.dli_fname;
    base = strrchr(name, '/');
    base = (base != NULL) ? base + 1 : name;
    if (owner != NULL) {
        *owner = name;
    }
    return !strncmp(base, "libc.so", 7);
}

/* ---- memory probes ---- */

static int pagemap_fd    = -1;
static pid_t pagemap_pid = 0;

static int pagemap_get_fd()
{
    pid_t pid = getpid();
    int fd;

    if ((pagemap_fd >= 0) && (pagemap_pid == pid)) {
        return pagemap_fd;
    }
    /* first use, or a child: /proc/self of the parent is not ours */
    fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    if (pagemap_fd >= 0) {
        close(pagemap_fd);
    }
    pagemap_fd  = fd;
    pagemap_pid = pid;
    return fd;
}

uint64_t pfn(const void *addr)
{
    uint64_t entry = 0;
    int fd         = pagemap_get_fd();
    off_t off      = (off_t)(((uintptr_t)addr / page_size()) * sizeof(entry));

    if ((fd < 0) || (pread(fd, &entry, sizeof(entry), off) != sizeof(entry))) {
        return 0;
    }
    if (!(entry & (1ull << 63))) {
        return 0; /* not present (or swapped) */
    }
    return entry & ((1ull << 55) - 1);
}

bool pfn_available()
{
    static int state = 0;

    if (state == 0) {
        void *p = mmap(NULL, page_size(), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        state   = -1;
        if (p != MAP_FAILED) {
            touch(p, page_size());
            state = (pfn(p) != 0) ? 1 : -1;
            munmap(p, page_size());
        }
    }
    return state > 0;
}

bool readable(const void *addr)
{
    char byte;
    struct iovec local  = {&byte, 1};
    struct iovec remote = {const_cast<void *>(addr), 1};

    return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == 1;
}

void touch(void *addr, size_t len)
{
    volatile char *p = (volatile char *)addr;
    size_t off;

    for (off = 0; off < len; off += page_size()) {
        p[off] = (char)(p[off] + 1);
    }
}

void no_thp(void *addr, size_t len)
{
    uintptr_t first = align_up((uintptr_t)addr, page_size());
    uintptr_t last  = align_down((uintptr_t)addr + len, page_size());

    if (last > first) {
        ucm_orig_madvise((void *)first, last - first, MADV_NOHUGEPAGE);
    }
}

void *map_anon(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        return NULL;
    }
    no_thp(p, len);
    touch(p, len);
    return p;
}

void *free_range(size_t len)
{
    /* Far below where mappings without an address go (top-down from the
     * stack): between this release and the caller's MAP_FIXED, a mapping
     * made behind our back (AddressSanitizer's own, a thread's) must not
     * land in the range and be clobbered.  Each call a slot of its own. */
    static std::atomic<unsigned> slot{0};
    const uintptr_t base = 0x500000000000ul, stride = 1ul << 32;
    /* valgrind's address space manager refuses some of those places
     * (and has no allocator of its own mapping among the client's) */
    void *hint =
        RUNNING_ON_VALGRIND ? NULL : (void *)(base + (slot++ % 4096) * stride);
    void *p = ucm_orig_mmap(hint, len, PROT_NONE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        return NULL;
    }
    ucm_orig_munmap(p, len);
    return p;
}

/* ---- the page oracle ---- */

namespace
{

enum {
    WATCH_VALID = 1, /* entry filled */
    WATCH_OK    = 2, /* reported while the page still had its old frame */
    WATCH_LATE  = 4  /* first reported when the frame had already changed */
};

struct watch_entry {
    uintptr_t addr;
    uint64_t old_pfn;
    std::atomic<int> state;
};

const size_t WATCH_MAX = 16384;
const size_t EVENT_MAX = 8192;

watch_entry watch_tab[WATCH_MAX];
std::atomic<size_t> watch_count(0);
event_record event_tab[EVENT_MAX];
std::atomic<size_t> event_count(0);
std::atomic<size_t> event_drop(0);
std::atomic<bool> armed(false);

} // namespace

namespace oracle
{

void reset()
{
    size_t i;

    armed.store(false, std::memory_order_seq_cst);
    for (i = 0; i < WATCH_MAX; ++i) {
        watch_tab[i].state.store(0, std::memory_order_relaxed);
    }
    watch_count.store(0);
    event_count.store(0);
    event_drop.store(0);
}

bool watch_page(const void *addr)
{
    uintptr_t page = align_down((uintptr_t)addr, page_size());
    uint64_t frame = pfn((void *)page);
    size_t idx;

    if (frame == 0) {
        return false;
    }
    idx = watch_count.fetch_add(1);
    if (idx >= WATCH_MAX) {
        return false;
    }
    watch_tab[idx].addr    = page;
    watch_tab[idx].old_pfn = frame;
    watch_tab[idx].state.store(WATCH_VALID, std::memory_order_release);
    return true;
}

size_t watch(const void *addr, size_t len)
{
    uintptr_t p   = align_down((uintptr_t)addr, page_size());
    uintptr_t end = align_up((uintptr_t)addr + len, page_size());
    size_t n      = 0;

    for (; p < end; p += page_size()) {
        if (!watch_page((void *)p)) {
            return 0;
        }
        ++n;
    }
    return n;
}

void arm()
{
    size_t i, n = std::min(watch_count.load(), WATCH_MAX);

    for (i = 0; i < n; ++i) {
        watch_tab[i].state.fetch_and(WATCH_VALID);
    }
    event_count.store(0);
    event_drop.store(0);
    armed.store(true, std::memory_order_seq_cst);
}

void disarm()
{
    armed.store(false, std::memory_order_seq_cst);
}

oracle_stats check()
{
    disarm();
    return peek();
}

oracle_stats peek()
{
    oracle_stats s = oracle_stats();
    size_t i, n;
    bool changed;
    int st;

    n = std::min(watch_count.load(), WATCH_MAX);
    for (i = 0; i < n; ++i) {
        st = watch_tab[i].state.load();
        if (!(st & WATCH_VALID)) {
            continue;
        }
        ++s.watched;
        changed = (pfn((void *)watch_tab[i].addr) != watch_tab[i].old_pfn);
        if (st & (WATCH_OK | WATCH_LATE)) {
            ++s.reported;
        }
        if (changed) {
            ++s.changed;
            if (st & WATCH_OK) {
                ++s.covered;
            } else {
                ++s.uncovered;
                if (st & WATCH_LATE) {
                    ++s.late;
                }
                s.uncovered_pages.push_back(watch_tab[i].addr);
            }
        } else if (st & (WATCH_OK | WATCH_LATE)) {
            ++s.over_reported;
        }
    }
    return s;
}

std::vector<event_record> events(int type, const void *addr, size_t len,
                                 pid_t only_tid)
{
    std::vector<event_record> v;
    size_t i, n = std::min(event_count.load(), EVENT_MAX);
    uintptr_t a = (uintptr_t)addr;

    for (i = 0; i < n; ++i) {
        const event_record &e = event_tab[i];
        if (!(e.type & type) || ((only_tid != 0) && (e.tid != only_tid))) {
            continue;
        }
        if ((len != 0) && !((e.addr < a + len) && (a < e.addr + e.len))) {
            continue;
        }
        v.push_back(e);
    }
    return v;
}

size_t events_dropped()
{
    return event_drop.load();
}

void callback(ucm_event_type_t type, ucm_event_t *event, void *)
{
    uintptr_t start, end;
    size_t i, n, idx;
    int st;

    if (!armed.load(std::memory_order_acquire) ||
        !(type & (UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED))) {
        return;
    }
    start = (uintptr_t)event->vm_unmapped.address;
    end   = start + event->vm_unmapped.size;

    idx = event_count.fetch_add(1);
    if (idx < EVENT_MAX) {
        event_tab[idx].type = type;
        event_tab[idx].tid  = tid();
        event_tab[idx].addr = start;
        event_tab[idx].len  = event->vm_unmapped.size;
    } else {
        event_drop.fetch_add(1);
    }
    if (type != UCM_EVENT_VM_UNMAPPED) {
        return;
    }

    n = std::min(watch_count.load(std::memory_order_acquire), WATCH_MAX);
    for (i = 0; i < n; ++i) {
        watch_entry &w = watch_tab[i];
        st             = w.state.load(std::memory_order_acquire);
        if (!(st & WATCH_VALID) || (st & (WATCH_OK | WATCH_LATE)) ||
            !((w.addr < end) && (start < w.addr + page_size()))) {
            continue;
        }
        /* the pages must still be there, with their old frame */
        w.state.fetch_or((pfn((void *)w.addr) == w.old_pfn) ? WATCH_OK
                                                            : WATCH_LATE);
    }
}

} // namespace oracle

std::string oracle_stats::str() const
{
    std::ostringstream os;
    size_t i;

    os << "watched=" << watched << " changed=" << changed
       << " covered=" << covered << " uncovered=" << uncovered
       << " (late=" << late << ") over_reported=" << over_reported;
    for (i = 0; (i < uncovered_pages.size()) && (i < 8); ++i) {
        os << (i == 0 ? " first uncovered: " : " ") << std::hex << "0x"
           << uncovered_pages[i] << std::dec;
    }
    return os.str();
}

/* ---- child processes ---- */

static std::string self_path;

void set_self_path(const char *argv0)
{
    char buf[PATH_MAX];

    if (realpath(argv0, buf) != NULL) {
        self_path = buf;
    } else {
        self_path = argv0;
    }
}

bool child_result::exited_ok() const
{
    return started && !timed_out && WIFEXITED(status) &&
           (WEXITSTATUS(status) == 0);
}

std::string child_result::str() const
{
    std::ostringstream os;

    if (!started) {
        os << "child not started";
    } else if (timed_out) {
        os << "child timed out (killed)";
    } else if (WIFEXITED(status)) {
        os << "child exit " << WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
        os << "child killed by signal " << WTERMSIG(status);
    }
    os << "\n--- stdout ---\n" << out << "--- stderr ---\n" << err;
    return os.str();
}

bool wait_child(pid_t pid, int timeout_s, int *status, bool *timed_out)
{
    struct timespec now, deadline, nap = {0, 2 * 1000 * 1000};
    pid_t ret;

    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += timeout_s;
    *timed_out = false;
    for (;;) {
        ret = waitpid(pid, status, WNOHANG);
        if (ret == pid) {
            return true;
        }
        if ((ret < 0) && (errno != EINTR)) {
            return false;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((now.tv_sec > deadline.tv_sec) ||
            ((now.tv_sec == deadline.tv_sec) &&
             (now.tv_nsec >= deadline.tv_nsec))) {
            kill(pid, SIGKILL);
            waitpid(pid, status, 0);
            *timed_out = true;
            return false;
        }
        nanosleep(&nap, NULL);
    }
}

static std::string read_all(int fd)
{
    std::string s;
    char buf[4096];
    ssize_t n;

    lseek(fd, 0, SEEK_SET);
    while ((n = read(fd, buf, sizeof(buf))) > 0) {
        s.append(buf, (size_t)n);
    }
    return s;
}

child_result
run_self(const std::string &scenario,
         const std::vector<std::pair<const char *, const char *>> &env,
         int timeout_s)
{
    child_result r;
    char out_tmpl[] = "/tmp/ucmt-out-XXXXXX";
    char err_tmpl[] = "/tmp/ucmt-err-XXXXXX";
    std::string arg = "--ucm-child=" + scenario;
    int out_fd, err_fd;
    pid_t pid;

    r.started   = false;
    r.timed_out = false;
    r.status    = 0;
    out_fd      = mkstemp(out_tmpl);
    err_fd      = mkstemp(err_tmpl);
    if ((out_fd < 0) || (err_fd < 0)) {
        return r;
    }
    unlink(out_tmpl);
    unlink(err_tmpl);

    pid = fork();
    if (pid == 0) {
        size_t i;
        dup2(out_fd, 1);
        dup2(err_fd, 2);
        for (i = 0; i < env.size(); ++i) {
            if (env[i].second == NULL) {
                unsetenv(env[i].first);
            } else {
                setenv(env[i].first, env[i].second, 1);
            }
        }
        execl(self_path.c_str(), self_path.c_str(), arg.c_str(), (char *)NULL);
        _exit(126);
    }
    if (pid > 0) {
        r.started = true;
        wait_child(pid, timeout_s, &r.status, &r.timed_out);
        r.out = read_all(out_fd);
        r.err = read_all(err_fd);
    }
    close(out_fd);
    close(err_fd);
    return r;
}

static std::map<std::string, child_scenario_fn> &child_scenarios()
{
    static std::map<std::string, child_scenario_fn> m;
    return m;
}

child_scenario::child_scenario(const char *name, child_scenario_fn fn)
{
    child_scenarios()[name] = fn;
}

int run_child_scenario(const char *name)
{
    std::map<std::string, child_scenario_fn>::iterator it =
        child_scenarios().find(name);

    if (it == child_scenarios().end()) {
        fprintf(stderr, "unknown child scenario '%s'\n", name);
        return 127;
    }
    return it->second();
}

/* ---- fixture ---- */

void test::SetUp()
{
    std::string reason;

    if (!hooks_available(&reason)) {
        GTEST_SKIP() << reason;
    }
    if (!pfn_available()) {
        GTEST_SKIP() << "/proc/self/pagemap shows no page frame numbers "
                        "(needs root): the oracle cannot work";
    }
    oracle::reset();
    ASSERT_EQ(UCS_OK,
              ucm_set_event_handler(UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED,
                                    0, oracle::callback, NULL));
    m_handler_set = true;
}

void test::TearDown()
{
    if (m_handler_set) {
        ucm_unset_event_handler(UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED,
                                oracle::callback, NULL);
        m_handler_set = false;
    }
    oracle::reset();
}

bool test::reloc_mode()
{
    return ucm_hooks_installed_mode() == UCM_MMAP_HOOK_RELOC;
}

bool test::bistro_mode()
{
    return ucm_hooks_installed_mode() == UCM_MMAP_HOOK_BISTRO;
}

void refault_kept(uintptr_t addr, size_t len,
                  const std::vector<range_t> &removed)
{
    for (uintptr_t a = addr; a < addr + len; a += page_size()) {
        bool kept = true;
        for (size_t i = 0; i < removed.size(); ++i) {
            kept = kept && !((a >= removed[i].first) &&
                             (a < removed[i].first + removed[i].second));
        }
        if (kept) {
            readable((void *)a);
        }
    }
}

void test::check_removal(const std::vector<range_t> &watched,
                         const std::function<int()> &op, size_t changed,
                         const std::vector<range_t> &expected, bool exact,
                         bool twice, bool refault)
{
    std::set<range_t> want(expected.begin(), expected.end()), got;
    std::map<range_t, int> count;
    size_t i, pages = 0;

    oracle::reset();
    for (i = 0; i < watched.size(); ++i) {
        touch((void *)watched[i].first, watched[i].second);
        no_thp((void *)watched[i].first, watched[i].second);
        pages += oracle::watch((void *)watched[i].first, watched[i].second);
    }
    ASSERT_GT(pages, 0u);
    oracle::arm();
    ASSERT_EQ(0, op()) << strerror(errno);
    for (i = 0; refault && (i < watched.size()); ++i) {
        refault_kept(watched[i].first, watched[i].second, expected);
    }
    oracle_stats s = oracle::check();
    record(s);
    if (exact) {
        EXPECT_EQ(changed, s.changed) << s.str();
    } else {
        EXPECT_LE(s.changed, changed) << s.str();
    }
    UCMT_EXPECT_COVERED(s);
    for (i = 0; i < watched.size(); ++i) {
        std::vector<event_record> ev =
            oracle::events(UCM_EVENT_VM_UNMAPPED, (void *)watched[i].first,
                           watched[i].second, tid());
        for (size_t j = 0; j < ev.size(); ++j) {
            range_t r(ev[j].addr, ev[j].len);
            got.insert(r);
            ++count[r];
        }
    }
    EXPECT_EQ(want, got) << "VM_UNMAPPED ranges differ from the removed "
                            "pages' addresses";
    for (std::set<range_t>::const_iterator it = want.begin();
         twice && (it != want.end()); ++it) {
        EXPECT_EQ(2, count[*it])
            << "range 0x" << std::hex << it->first << "+0x" << it->second
            << ": expected once before and once after the call";
    }
}

void test::record(const oracle_stats &s, const char *what)
{
    std::string prefix(what);

    RecordProperty(prefix + "_changed", (int)s.changed);
    RecordProperty(prefix + "_over_reported", (int)s.over_reported);
    std::cout << "[ " << what << " ] " << s.str() << std::endl;
}

} // namespace ucmt
