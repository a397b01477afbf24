/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Stock UCX 1.13's registration cache (libucs from Debian) on our libucm
 * (LD_PRELOAD) with UCX_MEM_FILE_WATCH=y: the cache gets and puts a region
 * of a shared /dev/shm file while a child process punches holes in that
 * file (a truncation of a range, which the parent may keep touching).  The
 * watch reports the removed pages; its reports must not run the cache's
 * VM_UNMAPPED handler on a thread that holds the cache's lock (the
 * signal-driven watch did, and this hung).  Oracles: the run finishes
 * (SIGALRM after 60 s is a failure), and after a shrink and regrow by
 * another child, once the watch has reported it (an event handler of the test
 * counts reports of the region's range), the next get makes a new
 * registration.
 *
 * Exit status: 0 pass, 1 fail, 77 skip (with the reason printed).
 */
#include <ucm/api/ucm.h>
#include <ucs/memory/rcache.h>

#include "compat_stock_api.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define COMPAT_FW_PAGES  16
#define COMPAT_FW_ROUNDS 2000

static volatile int compat_fw_regs, compat_fw_deregs;
static char *compat_fw_buf;
static size_t compat_fw_len;
static volatile int compat_fw_reports;

static ucs_status_t compat_fw_reg(void *ctx, ucs_rcache_t *rc, void *arg,
                                  ucs_rcache_region_t *region, uint16_t flags)
{
    __atomic_add_fetch(&compat_fw_regs, 1, __ATOMIC_RELAXED);
    return UCS_OK;
}

static void compat_fw_dereg(void *ctx, ucs_rcache_t *rc,
                            ucs_rcache_region_t *region)
{
    __atomic_add_fetch(&compat_fw_deregs, 1, __ATOMIC_RELAXED);
}

static const ucs_rcache_ops_t compat_fw_ops = {
    .mem_reg   = compat_fw_reg,
    .mem_dereg = compat_fw_dereg,
};

/* Reports of the region's pages (after the cache's handler). */
static void compat_fw_unmapped(ucm_event_type_t type, ucm_event_t *event,
                               void *arg)
{
    char *a = event->vm_unmapped.address;

    if ((a < compat_fw_buf + compat_fw_len) &&
        (compat_fw_buf < a + event->vm_unmapped.size)) {
        __atomic_add_fetch(&compat_fw_reports, 1, __ATOMIC_RELAXED);
    }
}

static void compat_fw_alarm(int signo)
{
    static const char msg[] = "FAIL: no progress in 60 s (hang)\n";

    (void)!write(1, msg, sizeof(msg) - 1);
    _exit(1);
}

/* A child that removes the pages of fd past the first, rounds times, with
 * raw system calls (no hook in it sees them; the parent's watch does):
 * shrink and regrow (shrink), or a hole punch, which the parent may go on
 * touching meanwhile (no SIGBUS). */
static pid_t compat_fw_truncator(int fd, int rounds, int shrink)
{
    pid_t pid = fork();
    int i;

    if (pid == 0) {
        for (i = 0; i < rounds; ++i) {
            if (shrink
                    ? ((syscall(SYS_ftruncate, fd, 4096) != 0) ||
                       (syscall(SYS_ftruncate, fd, (long)compat_fw_len) != 0))
                    : (syscall(SYS_fallocate, fd,
                               FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4096,
                               (long)compat_fw_len - 4096) != 0)) {
                _exit(1);
            }
            usleep(100);
        }
        _exit(0);
    }
    return pid;
}

static int compat_fw_get_put(ucs_rcache_t *rcache)
{
    ucs_rcache_region_t *region;

    memset(compat_fw_buf, 1, compat_fw_len);
    if (COMPAT_RCACHE_GET(ucs_rcache_get, rcache, compat_fw_buf, compat_fw_len,
                          4096, PROT_READ | PROT_WRITE, NULL,
                          &region) != UCS_OK) {
        return -1;
    }
    ucs_rcache_region_put(rcache, region);
    return 0;
}

int main(int argc, char **argv)
{
    char path[]        = "/dev/shm/compat-filewatch-XXXXXX";
    struct timespec ms = {0, 1000000};
    ucs_rcache_params_t params;
    ucs_rcache_t *rcache;
    int fd, status, regs, reports, i, busy = 0;
    pid_t pid;

    if ((argc > 1) && !strcmp(argv[1], "--ucx-api")) {
        printf("%s\n", COMPAT_STOCK_RELEASE);
        return 0;
    }
    if ((getenv("UCX_MEM_FILE_WATCH") == NULL) ||
        (getenv("UCX_MEM_FILE_WATCH")[0] != 'y')) {
        printf("SKIP: run with UCX_MEM_FILE_WATCH=y (run-compat.sh)\n");
        return 77;
    }
    signal(SIGALRM, compat_fw_alarm);
    alarm(60);

    memset(&params, 0, sizeof(params));
    params.region_struct_size = sizeof(ucs_rcache_region_t);
    COMPAT_PARAMS_ALIGN(&params, 4096);
    params.ucm_events         = UCM_EVENT_VM_UNMAPPED;
    params.ucm_event_priority = 1000;
    params.ops                = &compat_fw_ops;
    params.max_regions        = (unsigned long)-1;
    params.max_size           = (size_t)-1;
    if (ucs_rcache_create(&params, "compat-fw", NULL, &rcache) != UCS_OK) {
        printf("FAIL: stock rcache could not be created on this libucm\n");
        return 1;
    }
    if (ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 2000, compat_fw_unmapped,
                              NULL) != UCS_OK) {
        printf("FAIL: ucm_set_event_handler\n");
        return 1;
    }
    compat_fw_len = COMPAT_FW_PAGES * 4096;
    fd            = mkstemp(path);
    if ((fd < 0) || (ftruncate(fd, (off_t)compat_fw_len) != 0)) {
        printf("SKIP: no file in /dev/shm\n");
        return 77;
    }
    unlink(path);
    compat_fw_buf =
        mmap(NULL, compat_fw_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (compat_fw_buf == MAP_FAILED) {
        printf("FAIL: mmap of the /dev/shm file\n");
        return 1;
    }

    /* get/put while another process truncates */
    pid = compat_fw_truncator(fd, COMPAT_FW_ROUNDS, 0);
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (compat_fw_get_put(rcache) != 0) {
            printf("FAIL: get during the truncations\n");
            return 1;
        }
        ++busy;
    }
    if (!WIFEXITED(status) || (WEXITSTATUS(status) != 0)) {
        printf("FAIL: the truncating child failed\n");
        return 1;
    }
    printf("%d get/put while the child punched %d holes: regs %d deregs "
           "%d, %d reports\n",
           busy, COMPAT_FW_ROUNDS, compat_fw_regs, compat_fw_deregs,
           compat_fw_reports);

    /* one more truncation, reported: the next get registers anew */
    if (compat_fw_get_put(rcache) != 0) {
        printf("FAIL: get\n");
        return 1;
    }
    nanosleep(&ms, NULL);
    reports = __atomic_load_n(&compat_fw_reports, __ATOMIC_RELAXED);
    regs    = compat_fw_regs;
    pid     = compat_fw_truncator(fd, 1, 1);
    if ((waitpid(pid, &status, 0) != pid) || !WIFEXITED(status) ||
        (WEXITSTATUS(status) != 0)) {
        printf("FAIL: the truncating child failed\n");
        return 1;
    }
    for (i = 0; (i < 5000) && (__atomic_load_n(&compat_fw_reports,
                                               __ATOMIC_RELAXED) == reports);
         ++i) {
        nanosleep(&ms, NULL);
    }
    if (compat_fw_reports == reports) {
        printf("FAIL: the truncation by another process was not reported "
               "in 5 s\n");
        return 1;
    }
    if (compat_fw_get_put(rcache) != 0) {
        printf("FAIL: get after the truncation\n");
        return 1;
    }
    printf("after one more truncation: regs %d -> %d\n", regs, compat_fw_regs);
    if (compat_fw_regs != regs + 1) {
        printf("FAIL: the get after the truncation reused the old "
               "registration\n");
        return 1;
    }
    ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED, compat_fw_unmapped, NULL);
    ucs_rcache_destroy(rcache);
    munmap(compat_fw_buf, compat_fw_len);
    close(fd);
    printf("PASS\n");
    return 0;
}
