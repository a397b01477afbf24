/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Degrading loudly (src/ucm/util/ucm_degrade.h): a default-on mechanism
 * that cannot do its job prints exactly one WARN line naming what is no
 * longer caught, and ucm_degraded_query() lists it.  Each case runs in a
 * fresh process (run_self) whose stderr is the one the line must appear
 * on:
 * - no /proc: a user and mount namespace with an empty tmpfs over /proc;
 * - hidepid-like: the same with a /proc/self/maps of mode 000 and every
 *   capability dropped, so that open() really fails with EACCES (the
 *   kernel's answer, no override in libucm);
 * - descriptors exhausted: RLIMIT_NOFILE lowered and filled;
 * - no userfaultfd: a seccomp filter that fails userfaultfd() with ENOSYS.
 * The truncation oracle: ftruncate of a mapped memfd still delivers as many
 * unmap events for the removed page as in a process with /proc, from the
 * file table the hooks kept.
 */
#include "common/ucm_test.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

namespace
{

using namespace ucmt;

/* exit code of a scenario that cannot set up its environment (the reason
 * is on stdout after "SKIP ") */
const int skip_code = 77;

uintptr_t watched_start, watched_end;
int watched_events;

void degrade_cb(ucm_event_type_t type, ucm_event_t *event, void *arg)
{
    uintptr_t start = (uintptr_t)event->vm_unmapped.address;

    (void)arg;
    if ((type == UCM_EVENT_VM_UNMAPPED) && (start < watched_end) &&
        (start + event->vm_unmapped.size > watched_start)) {
        __atomic_add_fetch(&watched_events, 1, __ATOMIC_RELAXED);
    }
}

bool write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY);
    bool ok;

    if (fd < 0) {
        return false;
    }
    ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
    close(fd);
    return ok;
}

/* A user and mount namespace with a tmpfs over /proc; with 'hidden', a
 * /proc/self/maps that this process may not read.  "" or the reason. */
std::string hide_proc(bool hidden)
{
    char map[64];
    uid_t uid = getuid();
    gid_t gid = getgid();
    int fd;

    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
        return std::string("unshare(CLONE_NEWUSER|CLONE_NEWNS): ") +
               strerror(errno);
    }
    snprintf(map, sizeof(map), "0 %u 1", (unsigned)uid);
    if (!write_file("/proc/self/uid_map", map)) {
        return std::string("uid_map: ") + strerror(errno);
    }
    write_file("/proc/self/setgroups", "deny");
    snprintf(map, sizeof(map), "0 %u 1", (unsigned)gid);
    if (!write_file("/proc/self/gid_map", map)) {
        return std::string("gid_map: ") + strerror(errno);
    }
    if (mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
        return std::string("make / private: ") + strerror(errno);
    }
    if (mount("ucmt-noproc", "/proc", "tmpfs", 0, "mode=0755") != 0) {
        return std::string("tmpfs over /proc: ") + strerror(errno);
    }
    if (!hidden) {
        return "";
    }
    if ((mkdir("/proc/self", 0755) != 0) ||
        ((fd = open("/proc/self/maps", O_CREAT | O_WRONLY, 0)) < 0)) {
        return std::string("/proc/self/maps of mode 000: ") + strerror(errno);
    }
    close(fd);
    /* no CAP_DAC_OVERRIDE/CAP_DAC_READ_SEARCH: mode 000 is the answer */
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof(data));
    if (syscall(SYS_capset, &hdr, data) != 0) {
        return std::string("capset: ") + strerror(errno);
    }
    fd = open("/proc/self/maps", O_RDONLY);
    if ((fd >= 0) || (errno != EACCES)) {
        if (fd >= 0) {
            close(fd);
        }
        return "/proc/self/maps stays readable without capabilities";
    }
    return "";
}

/* userfaultfd() fails with ENOSYS from here on.  "" or the reason. */
std::string forbid_userfaultfd()
{
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_userfaultfd, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
    struct sock_fprog prog = {
        (unsigned short)(sizeof(filter) / sizeof(filter[0])), filter};

    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
        return std::string("PR_SET_NO_NEW_PRIVS: ") + strerror(errno);
    }
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
        return std::string("seccomp filter: ") + strerror(errno);
    }
    return "";
}

/* Shrink a mapped 2-page memfd to 1 page: the VM_UNMAPPED events that
 * cover the removed page; -1 if the memfd could not be set up. */
int truncate_mapped_memfd()
{
    size_t ps = page_size();
    int fd, events;
    char *p;

    fd = memfd_create("ucmt-degrade", MFD_CLOEXEC);
    if ((fd < 0) || (ftruncate(fd, 2 * ps) != 0)) {
        return -1;
    }
    p = (char *)mmap(NULL, 2 * ps, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        close(fd);
        return -1;
    }
    memset(p, 1, 2 * ps);
    watched_start = (uintptr_t)p + ps;
    watched_end   = (uintptr_t)p + 2 * ps;
    __atomic_store_n(&watched_events, 0, __ATOMIC_RELAXED);
    if (ftruncate(fd, ps) != 0) {
        return -1;
    }
    events = __atomic_load_n(&watched_events, __ATOMIC_RELAXED);
    munmap(p, 2 * ps);
    close(fd);
    return events;
}

/* "listed=<mechanisms>" */
void print_degraded()
{
    ucm_degraded_info_t infos[8];
    unsigned i, count = ucm_degraded_query(infos, 8);

    printf("listed=");
    for (i = 0; (i < count) && (i < 8); ++i) {
        printf("%s,", infos[i].mechanism);
    }
    printf("\n");
}

/* Descriptors exhausted in a forked child of a process whose table was
 * seeded and holds the memfd's mapping: the child must rebuild it (fork)
 * and cannot open /proc/self/maps.  The child's exit code: the events. */
int fork_without_descriptors()
{
    int status, ret, events;
    struct rlimit rl;
    pid_t pid;

    /* seed the table: a first lookup reads /proc/self/maps */
    if (truncate_mapped_memfd() < 0) {
        return -1;
    }
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        getrlimit(RLIMIT_NOFILE, &rl);
        rl.rlim_cur = 64;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
            _exit(200);
        }
        size_t ps = page_size();
        int fd    = memfd_create("ucmt-degrade", MFD_CLOEXEC);
        char *p;

        if ((fd < 0) || (ftruncate(fd, 2 * ps) != 0)) {
            _exit(201);
        }
        p = (char *)mmap(NULL, 2 * ps, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                         0);
        if (p == MAP_FAILED) {
            _exit(202);
        }
        memset(p, 1, 2 * ps);
        while (dup(0) >= 0) {
        }
        if (errno != EMFILE) {
            _exit(203);
        }
        watched_start = (uintptr_t)p + ps;
        watched_end   = (uintptr_t)p + 2 * ps;
        __atomic_store_n(&watched_events, 0, __ATOMIC_RELAXED);
        ret    = ftruncate(fd, ps);
        events = __atomic_load_n(&watched_events, __ATOMIC_RELAXED);
        /* again: the line must not repeat */
        ftruncate(fd, 2 * ps);
        ftruncate(fd, ps);
        print_degraded();
        fflush(stdout);
        _exit((ret == 0) ? events : 204);
    }
    if ((pid < 0) || (waitpid(pid, &status, 0) != pid) || !WIFEXITED(status)) {
        return -1;
    }
    return WEXITSTATUS(status);
}

UCMT_CHILD_SCENARIO(degrade)
{
    const char *what = getenv("UCMT_DEGRADE_CASE");
    std::string why;
    int events, active;

    if (what == NULL) {
        return 2;
    }
    if (!strcmp(what, "noproc") || !strcmp(what, "eacces")) {
        why = hide_proc(!strcmp(what, "eacces"));
    } else if (!strcmp(what, "nouffd")) {
        why = forbid_userfaultfd();
    }
    if (!why.empty()) {
        printf("SKIP %s\n", why.c_str());
        return skip_code;
    }
    /* installs the hooks: their self-test truncates a mapped memfd too */
    if (ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 0, degrade_cb, NULL) !=
        UCS_OK) {
        printf("cannot set a VM_UNMAPPED handler\n");
        return 3;
    }
    if (!strcmp(what, "nouffd")) {
        ucm_uffd_configure(UCM_UFFD_MODE_TRY, 0, 0);
        ucm_uffd_start(&active);
        ucm_uffd_start(&active);
        printf("active=%d\n", active);
        print_degraded();
        return active ? 4 : 0;
    }
    if (!strcmp(what, "emfile")) {
        events = fork_without_descriptors();
    } else {
        events = truncate_mapped_memfd();
        /* again: the line must not repeat */
        truncate_mapped_memfd();
        print_degraded();
    }
    printf("events=%d\n", events);
    return (events >= 0) ? 0 : 5;
}

class Degrade : public ::testing::Test
{
  protected:
    /* the scenario in a fresh process of this hook mode */
    child_result run(const char *what)
    {
        /* LeakSanitizer reads /proc/PID/task at exit, which the no-/proc
         * and hidden-maps children cannot: leak checks off in the child */
        return run_self(
            "degrade", {{"UCMT_DEGRADE_CASE", what},
                        {"UCX_MEM_LOG_LEVEL", "warn"},
                        {"UCX_MEM_MMAP_HOOK_MODE", mode_name(requested_mode())},
                        {"ASAN_OPTIONS", "detect_leaks=0"}});
    }

    static size_t count(const std::string &text, const std::string &what)
    {
        size_t n = 0, pos = 0;

        while ((pos = text.find(what, pos)) != std::string::npos) {
            ++n;
            pos += what.size();
        }
        return n;
    }

    static int value(const std::string &out, const char *key)
    {
        size_t pos = out.find(key);

        return (pos == std::string::npos)
                   ? -100
                   : atoi(out.c_str() + pos + strlen(key));
    }

    /* the events of a process that can read /proc/self/maps */
    int control_events()
    {
        child_result r = run("none");

        /* (another mechanism may be degraded here: the heap layout) */
        EXPECT_TRUE(r.exited_ok()) << r.str();
        EXPECT_EQ(0u, count(r.err, "truncation")) << r.str();
        EXPECT_EQ(0u, count(r.out, "procmaps,") + count(r.out, "descriptors,") +
                          count(r.out, "truncation,"))
            << r.str();
        return value(r.out, "events=");
    }

    /* one line naming truncation and 'reason'; 'mechanism' listed; as
     * many truncation events as the control */
    void check_maps_case(const char *what, const std::string &reason,
                         const char *mechanism)
    {
        int expected = control_events();
        child_result r;

        ASSERT_GT(expected, 0);
        r = run(what);
        if (r.started && WIFEXITED(r.status) &&
            (WEXITSTATUS(r.status) == skip_code)) {
            GTEST_SKIP() << r.out;
        }
        ASSERT_TRUE(r.exited_ok()) << r.str();
        EXPECT_EQ(1u, count(r.err, reason)) << r.str();
        EXPECT_EQ(1u, count(r.err, "truncation of files mapped")) << r.str();
        EXPECT_NE(std::string::npos, r.out.find(mechanism)) << r.str();
        EXPECT_EQ(std::string::npos, r.out.find("truncation,")) << r.str();
        EXPECT_EQ(expected, value(r.out, "events=")) << r.str();
    }
};

TEST_F(Degrade, NoProc)
{
    check_maps_case("noproc", "/proc/self/maps unreadable (ENOENT)",
                    "procmaps,");
}

TEST_F(Degrade, HiddenMaps)
{
    check_maps_case("eacces", "/proc/self/maps unreadable (EACCES)",
                    "procmaps,");
}

TEST_F(Degrade, NoDescriptors)
{
    check_maps_case("emfile", "descriptors exhausted (EMFILE)", "descriptors,");
}

TEST_F(Degrade, NoUserfaultfd)
{
    child_result r = run("nouffd");

    if (r.started && WIFEXITED(r.status) &&
        (WEXITSTATUS(r.status) == skip_code)) {
        GTEST_SKIP() << r.out;
    }
    ASSERT_TRUE(r.exited_ok()) << r.str();
    EXPECT_EQ(1u, count(r.err, "userfaultfd unavailable")) << r.str();
    EXPECT_EQ(1u, count(r.err, "WARN")) << r.str();
    EXPECT_NE(std::string::npos, r.out.find("listed=userfaultfd,")) << r.str();
}

} // namespace
