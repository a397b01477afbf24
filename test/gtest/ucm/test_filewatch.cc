/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Pages of shared files removed by calls no hook sees (an inline syscall
 * instruction, another process): with UCX_MEM_FILE_WATCH=y libucm watches
 * the shared files it sees mapped with inotify, and its signal handler
 * raises VM_UNMAPPED for the pages the file dropped (src/ucm/mmap/
 * ucm_filewatch.h).  Each case runs in a child process started with that
 * setting.  Oracle: the page frames of the watched mappings; the pages are
 * gone before the report (the kernel tells after the fact), so every page
 * whose frame changed must have been reported late, none missed, and none
 * reported that kept its frame.  Without the setting the same removal goes
 * unreported, which shows that the watch is what reports it.
 */
#include "common/ucm_test.h"
#include "rawsys.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <functional>
#include <string>

namespace
{

using namespace ucmt;

/* child exit codes */
enum {
    FW_OK        = 0,
    FW_SETUP     = 3,
    FW_HANDLER   = 4,
    FW_WATCH     = 5,
    FW_OP        = 6,
    FW_UNCHANGED = 7,  /* the removal changed fewer pages than expected */
    FW_MISSED    = 8,  /* a changed page was never reported */
    FW_OVER      = 9,  /* a page that kept its frame was reported */
    FW_REPORTED  = 10, /* reported although watching is off */
    FW_NO_NOTIFY = 20  /* the kernel queues no event for this call */
};

int fw_handler()
{
    return (ucm_set_event_handler(UCM_EVENT_VM_MAPPED | UCM_EVENT_VM_UNMAPPED,
                                  0, oracle::callback, NULL) == UCS_OK)
               ? FW_OK
               : FW_HANDLER;
}

char *fw_map(int fd, size_t len, off_t offset = 0)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, offset);

    return (p == MAP_FAILED) ? NULL : (char *)p;
}

/* Until the events have come (the report of a call made on another thread
 * or process arrives when the main thread takes the signal): at most 2 s. */
void fw_wait_reported(size_t changed)
{
    struct timespec ts = {0, 1000000};
    int i;

    for (i = 0; i < 2000; ++i) {
        oracle_stats s = oracle::check();
        if (s.changed >= changed && (s.uncovered == s.late)) {
            break;
        }
        oracle::arm();
        nanosleep(&ts, NULL);
    }
}

/* Watch 'watched', run op, and check: at least 'changed' pages changed,
 * every one reported (late: after the change), none over-reported.  With
 * 'expect_reported' false: nothing may be reported. */
int fw_check(const std::vector<range_t> &watched,
             const std::function<long()> &op, size_t changed,
             bool expect_reported = true, bool wait = false)
{
    size_t n = 0;

    oracle::reset();
    for (size_t i = 0; i < watched.size(); ++i) {
        touch((void *)watched[i].first, watched[i].second);
        n += oracle::watch((void *)watched[i].first, watched[i].second);
    }
    if (n == 0) {
        return FW_WATCH;
    }
    oracle::arm();
    if (op() != 0) {
        printf("op: %s\n", strerror(errno));
        return FW_OP;
    }
    if (wait && expect_reported) {
        fw_wait_reported(changed);
    }
    oracle_stats s = oracle::check();
    printf("%s\n", s.str().c_str());
    if (s.changed < changed) {
        return FW_UNCHANGED;
    }
    if (!expect_reported) {
        return (s.reported == 0) ? FW_OK : FW_REPORTED;
    }
    if (s.uncovered != s.late) {
        return FW_MISSED;
    }
    return (s.over_reported == 0) ? FW_OK : FW_OVER;
}

int fw_memfd(size_t len)
{
    int fd = memfd_create("ucmt-filewatch", MFD_CLOEXEC);

    return ((fd >= 0) && (ftruncate(fd, (off_t)len) == 0)) ? fd : -1;
}

/* a file of len bytes in /dev/shm, unlinked at once (its descriptor and
 * mappings keep it); -1 if none */
int fw_shm_file(size_t len, std::string *path)
{
    char tmpl[] = "/dev/shm/ucmt-filewatch-XXXXXX";
    int fd      = mkstemp(tmpl);

    if (fd < 0) {
        return -1;
    }
    *path = tmpl;
    return (ftruncate(fd, (off_t)len) == 0) ? fd : -1;
}

/* The memfd shrunk by an inline ftruncate: both mappings lose the tail. */
int fw_memfd_ftruncate(bool watching)
{
    const size_t ps = page_size(), len = 8 * ps;
    int fd, ret                        = fw_handler();
    char *a, *b;

    if (ret != FW_OK) {
        return ret;
    }
    fd = fw_memfd(len);
    a  = fw_map(fd, len);
    b  = fw_map(fd, len);
    if ((fd < 0) || (a == NULL) || (b == NULL)) {
        return FW_SETUP;
    }
    return fw_check(
        {range_t((uintptr_t)a, len), range_t((uintptr_t)b, len)},
        [&]() { return ucmt_rawsys(SYS_ftruncate, fd, 3 * ps); }, 10, watching);
}

UCMT_CHILD_SCENARIO(fw_memfd_ftruncate)
{
    return fw_memfd_ftruncate(true);
}

UCMT_CHILD_SCENARIO(fw_memfd_ftruncate_off)
{
    return fw_memfd_ftruncate(false);
}

/* A hole punched in a /dev/shm file by an inline fallocate. */
UCMT_CHILD_SCENARIO(fw_tmpfs_punch)
{
    const size_t ps = page_size(), len = 8 * ps;
    std::string path;
    int fd, ret = fw_handler();
    char *a;

    if (ret != FW_OK) {
        return ret;
    }
    fd = fw_shm_file(len, &path);
    a  = (fd >= 0) ? fw_map(fd, len) : NULL;
    if (fd >= 0) {
        unlink(path.c_str());
    }
    if (a == NULL) {
        return FW_SETUP;
    }
    return fw_check(
        {range_t((uintptr_t)a, len)},
        [&]() {
            return ucmt_rawsys(SYS_fallocate, fd,
                               FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                               2 * ps, 3 * ps);
        },
        3);
}

/* An inline madvise(MADV_REMOVE) through one mapping of a /dev/shm file:
 * the other mapping loses the pages. */
UCMT_CHILD_SCENARIO(fw_tmpfs_madvise_remove)
{
    const size_t ps = page_size(), len = 8 * ps;
    std::string path;
    int fd, ret = fw_handler();
    char *a, *b;

    if (ret != FW_OK) {
        return ret;
    }
    fd = fw_shm_file(len, &path);
    a  = (fd >= 0) ? fw_map(fd, len) : NULL;
    b  = (fd >= 0) ? fw_map(fd, len) : NULL;
    if (fd >= 0) {
        unlink(path.c_str());
    }
    if ((a == NULL) || (b == NULL)) {
        return FW_SETUP;
    }
    touch(a, len);
    return fw_check(
        {range_t((uintptr_t)b, len)},
        [&]() { return ucmt_rawsys(SYS_madvise, a + ps, 4 * ps, MADV_REMOVE); },
        4);
}

/* Another process truncates the memfd (inherited descriptor). */
UCMT_CHILD_SCENARIO(fw_other_process)
{
    const size_t ps = page_size(), len = 8 * ps;
    int fd, ret                        = fw_handler();
    char *a;

    if (ret != FW_OK) {
        return ret;
    }
    fd = fw_memfd(len);
    a  = fw_map(fd, len);
    if ((fd < 0) || (a == NULL)) {
        return FW_SETUP;
    }
    return fw_check(
        {range_t((uintptr_t)a, len)},
        [&]() {
            int status;
            pid_t pid = fork();

            if (pid == 0) {
                _exit(ucmt_rawsys(SYS_ftruncate, fd, 2 * ps) == 0 ? 0 : 1);
            }
            if ((pid < 0) || (waitpid(pid, &status, 0) != pid) ||
                !WIFEXITED(status) || (WEXITSTATUS(status) != 0)) {
                return -1;
            }
            return 0;
        },
        6, true, true);
}

/* An inline ftruncate on another thread: the main thread takes the
 * signal. */
UCMT_CHILD_SCENARIO(fw_other_thread)
{
    const size_t ps = page_size(), len = 8 * ps;
    int fd, ret                        = fw_handler();
    char *a;

    if (ret != FW_OK) {
        return ret;
    }
    fd = fw_memfd(len);
    a  = fw_map(fd, len);
    if ((fd < 0) || (a == NULL)) {
        return FW_SETUP;
    }
    return fw_check(
        {range_t((uintptr_t)a, len)},
        [&]() {
            pthread_t t;
            long r = -1;

            if (pthread_create(
                    &t, NULL,
                    [](void *arg) -> void * {
                        int *pfd = (int *)arg;
                        return (void *)ucmt_rawsys(SYS_ftruncate, *pfd,
                                                   page_size());
                    },
                    &fd) != 0) {
                return -1L;
            }
            pthread_join(t, (void **)&r);
            return r;
        },
        7, true, true);
}

/* A memfd mapped before the hooks were installed: watched from
 * /proc/self/maps at installation. */
UCMT_CHILD_SCENARIO(fw_mapped_before_hooks)
{
    const size_t ps = page_size(), len = 8 * ps;
    int fd  = fw_memfd(len);
    char *a = (fd >= 0) ? fw_map(fd, len) : NULL;
    int ret;

    if (a == NULL) {
        return FW_SETUP;
    }
    if (ucm_hooks_installed_mode() != UCM_MMAP_HOOK_NONE) {
        printf("hooks already installed: the scenario is not fresh\n");
        return FW_SETUP;
    }
    ret = fw_handler();
    if (ret != FW_OK) {
        return ret;
    }
    return fw_check(
        {range_t((uintptr_t)a, len)},
        [&]() { return ucmt_rawsys(SYS_ftruncate, fd, 5 * ps); }, 3);
}

/* Whether the kernel queues IN_MODIFY for an fallocate hole punch through
 * memfd_create()'s own descriptor (pseudo files stopped notifying). */
bool fw_kernel_notifies_memfd_punch()
{
    int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    int fd = fw_memfd(4 * page_size());
    char path[64], buf[256];
    bool ret;

    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    inotify_add_watch(in, path, IN_MODIFY);
    ucmt_rawsys(SYS_fallocate, fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                0, page_size());
    ret = (read(in, buf, sizeof(buf)) > 0);
    close(fd);
    close(in);
    return ret;
}

/* A hole punched by an inline fallocate through the memfd's own
 * descriptor. */
UCMT_CHILD_SCENARIO(fw_memfd_punch)
{
    const size_t ps = page_size(), len = 8 * ps;
    int fd, ret                        = fw_handler();
    char *a;

    if (ret != FW_OK) {
        return ret;
    }
    if (!fw_kernel_notifies_memfd_punch()) {
        return FW_NO_NOTIFY;
    }
    fd = fw_memfd(len);
    a  = fw_map(fd, len);
    if ((fd < 0) || (a == NULL)) {
        return FW_SETUP;
    }
    return fw_check(
        {range_t((uintptr_t)a, len)},
        [&]() {
            return ucmt_rawsys(SYS_fallocate, fd,
                               FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                               2 * ps, 3 * ps);
        },
        3);
}

/* SysV shared memory attached twice: an inline MADV_REMOVE through one
 * attachment removes the pages of the other (the watch is added through
 * /proc/self/map_files). */
UCMT_CHILD_SCENARIO(fw_sysv_madvise_remove)
{
    const size_t ps = page_size(), len = 4 * ps;
    int id, ret                        = fw_handler();
    char *a, *b;

    if (ret != FW_OK) {
        return ret;
    }
    id = shmget(IPC_PRIVATE, len, IPC_CREAT | 0600);
    if (id < 0) {
        return FW_SETUP;
    }
    a = (char *)shmat(id, NULL, 0);
    b = (char *)shmat(id, NULL, 0);
    shmctl(id, IPC_RMID, NULL);
    if ((a == (void *)-1) || (b == (void *)-1)) {
        return FW_SETUP;
    }
    touch(a, len);
    return fw_check(
        {range_t((uintptr_t)b, len)},
        [&]() { return ucmt_rawsys(SYS_madvise, a, 3 * ps, MADV_REMOVE); }, 3);
}

class Filewatch : public ::testing::Test
{
  protected:
    void SetUp() override
    {
        std::string reason;

        if (!hooks_available(&reason)) {
            GTEST_SKIP() << reason;
        }
        if (!pfn_available()) {
            GTEST_SKIP() << "no page frame numbers (needs root)";
        }
    }

    /* run the scenario with watching on (or off) */
    void run(const char *scenario, bool on = true)
    {
        child_result r =
            run_self(scenario, {{"UCX_MEM_FILE_WATCH", on ? "y" : "n"}});

        if (r.started && !r.timed_out && WIFEXITED(r.status) &&
            (WEXITSTATUS(r.status) == FW_NO_NOTIFY)) {
            GTEST_SKIP() << "this kernel queues no inotify event for the "
                            "call (pseudo files, such as the descriptor of "
                            "memfd_create(), do not notify on recent "
                            "kernels)";
        }
        EXPECT_TRUE(r.exited_ok())
            << "3: setup, 4: handler, 5: watch, 6: op, 7: fewer pages "
               "changed, 8: a changed page never reported, 9: an unchanged "
               "page reported, 10: reported with watching off\n"
            << r.str();
    }
};

TEST_F(Filewatch, MemfdInlineFtruncate)
{
    run("fw_memfd_ftruncate");
}

TEST_F(Filewatch, MemfdInlineFtruncateUnseenWhenOff)
{
    run("fw_memfd_ftruncate_off", false);
}

TEST_F(Filewatch, TmpfsInlinePunchHole)
{
    run("fw_tmpfs_punch");
}

TEST_F(Filewatch, TmpfsInlineMadviseRemove)
{
    run("fw_tmpfs_madvise_remove");
}

TEST_F(Filewatch, TruncatedByAnotherProcess)
{
    run("fw_other_process");
}

TEST_F(Filewatch, TruncatedOnAnotherThread)
{
    run("fw_other_thread");
}

TEST_F(Filewatch, MappedBeforeHooks)
{
    run("fw_mapped_before_hooks");
}

TEST_F(Filewatch, MemfdInlinePunchHole)
{
    run("fw_memfd_punch");
}

TEST_F(Filewatch, SysvInlineMadviseRemove)
{
    run("fw_sysv_madvise_remove");
}

} // namespace
