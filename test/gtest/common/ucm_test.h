/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Shared helpers of the libucm test suite.
 *
 * The central piece is the page oracle: a test "watches" pages it owns
 * (recording their page frame numbers from /proc/self/pagemap), arms the
 * oracle, performs the operation under test, and asks the oracle whether
 * every page whose frame actually changed (or vanished) was covered by a
 * UCM_EVENT_VM_UNMAPPED delivered while the page still had its old frame.
 * The check "still the old frame" is done inside the event handler, so an
 * event that arrives after the change is counted as late, i.e. missing.
 * Reported pages that did not change are counted as over-reported.
 */
#ifndef UCMT_UCM_TEST_H_
#define UCMT_UCM_TEST_H_

#include <config.h>

#include <ucm/api/ucm.h>
#include <ucm/api/ucm_ext.h>

#include <gtest/gtest.h>

#include <stdint.h>
#include <sys/types.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace ucmt
{

/* ---- environment ---- */

size_t page_size();
uintptr_t align_down(uintptr_t x, size_t a);
uintptr_t align_up(uintptr_t x, size_t a);
pid_t tid();

/* True under valgrind, or with UCM_GTEST_QUICK=1: stress loops scale down. */
bool quick();
unsigned scaled(unsigned normal, unsigned quick_value);
bool on_valgrind();

/* Hook mode this process asked for (UCX_MEM_MMAP_HOOK_MODE, default
 * bistro) and the one libucm reports as installed. */
ucm_mmap_hook_mode_t requested_mode();
const char *mode_name(int mode);

/* Installs the hooks once; false (with a reason) if that failed. */
bool hooks_available(std::string *reason);

/* Whether malloc()/free() are glibc's own (not jemalloc, tcmalloc or
 * valgrind's replacement); 'owner' names the object that provides malloc. */
bool malloc_is_glibc(std::string *owner = NULL);

/* Ask the allocator to give free memory back to the system now: tcmalloc's
 * ReleaseFreeMemory, jemalloc's purge of every arena, or (glibc true)
 * malloc_trim(0). */
void release_free_memory(bool glibc);

/* ---- memory probes ---- */

/* Frame of the page at addr, 0 if not present or not mapped.  Reads
 * /proc/self/pagemap with pread(): safe in hook context and in children. */
uint64_t pfn(const void *addr);

/* True if page frame numbers are visible (root). */
bool pfn_available();

/* True if the byte at addr can be read (process_vm_readv on ourselves). */
bool readable(const void *addr);

/* Write one byte in each page, so that every page has a frame. */
void touch(void *addr, size_t len);

/* Keep transparent huge pages (and khugepaged's collapsing, which changes
 * frames behind everybody's back) away from the page-aligned part of a
 * range.  Uses the original madvise: no event. */
void no_thp(void *addr, size_t len);

/* mmap of anonymous private read/write memory, touched; NULL on failure. */
void *map_anon(size_t len);

/* An address range that is free: reserved and released with the original
 * functions (no events).  Nothing else should map there immediately. */
void *free_range(size_t len);

/* An address range: start and length in bytes. */
typedef std::pair<uintptr_t, size_t> range_t;

/* Fault back in every page of [addr, addr+len) outside 'removed'.  Taking
 * the pages out of a large folio that straddles the removed range unmaps
 * the whole folio for a moment (split) or zeroes in place: the kept pages
 * keep their frames, but pagemap shows them absent until the next fault.
 * A kept page with another frame after this is a real change. */
void refault_kept(uintptr_t addr, size_t len,
                  const std::vector<range_t> &removed);

/* ---- the page oracle (one at a time; tests run sequentially) ---- */

struct oracle_stats {
    size_t watched;       /* pages watched */
    size_t changed;       /* pages whose frame changed or vanished */
    size_t covered;       /* changed and reported while still old */
    size_t uncovered;     /* changed, never reported before the change */
    size_t late;          /* ... of which reported only after the change */
    size_t over_reported; /* reported, but frame unchanged */
    size_t reported;      /* reported (changed or not) */
    std::vector<uintptr_t> uncovered_pages;

    std::string str() const;
};

struct event_record {
    int type; /* UCM_EVENT_VM_MAPPED / UCM_EVENT_VM_UNMAPPED */
    pid_t tid;
    uintptr_t addr;
    size_t len;
};

namespace oracle
{
/* Forget watched pages and events, disarm. */
void reset();
/* Watch every page of [addr, addr+len) (must be present): returns the
 * number of pages added (0 if a page has no frame). */
size_t watch(const void *addr, size_t len);
/* Thread-safe: watch one page (also while armed). false if no frame. */
bool watch_page(const void *addr);
/* Start/stop recording events and checking watched pages. */
void arm();
void disarm();
/* Disarm and compare the frames now with those recorded. */
oracle_stats check();
/* The same comparison, still armed (waiting for late reports). */
oracle_stats peek();
/* VM_UNMAPPED/VM_MAPPED events recorded while armed that overlap
 * [addr, addr+len) (len 0: all), optionally only of one thread. */
std::vector<event_record> events(int type, const void *addr = NULL,
                                 size_t len = 0, pid_t only_tid = 0);
size_t events_dropped();
/* The handler (registered by the fixture). */
void callback(ucm_event_type_t type, ucm_event_t *event, void *arg);
} // namespace oracle

/* ---- child processes ---- */

struct child_result {
    bool started;
    bool timed_out;
    int status; /* waitpid status */
    std::string out, err;

    bool exited_ok() const;
    std::string str() const;
};

/* Set by main(): absolute path of the test binary. */
void set_self_path(const char *argv0);

/* Run this binary as "--ucm-child=<scenario>" with extra environment
 * (name, value; value NULL unsets), capture stdout/stderr, kill it after
 * timeout_s seconds. */
child_result
run_self(const std::string &scenario,
         const std::vector<std::pair<const char *, const char *>> &env,
         int timeout_s = 60);

/* waitpid() with a deadline: kills the child (SIGKILL) and returns false
 * with *timed_out set if it did not finish in time. */
bool wait_child(pid_t pid, int timeout_s, int *status, bool *timed_out);

typedef int (*child_scenario_fn)();
struct child_scenario {
    child_scenario(const char *name, child_scenario_fn fn);
};
/* Run a registered scenario; returns its exit code (127: unknown). */
int run_child_scenario(const char *name);

#define UCMT_CHILD_SCENARIO(_name)                                             \
    static int ucmt_child_##_name();                                           \
    static ::ucmt::child_scenario ucmt_child_reg_##_name(#_name,               \
                                                         ucmt_child_##_name);  \
    static int ucmt_child_##_name()

/* ---- fixture ---- */

class test : public ::testing::Test
{
  protected:
    /* Skips the test if the hooks are not available; registers the oracle
     * handler for VM_MAPPED|VM_UNMAPPED at priority 0. */
    void SetUp() override;
    void TearDown() override;

    static bool reloc_mode();
    static bool bistro_mode();

    /* Logs the oracle statistics (as test properties and on stdout). */
    void record(const oracle_stats &s, const char *what = "oracle");

    /* Pages removed from mappings (truncation, hole punching, madvise):
     * touch and watch every range of 'watched', run 'op' (which must return
     * 0), then check that 'changed' pages lost their frame (exactly, or at
     * most unless 'exact'), every one of them reported first, and that the
     * distinct VM_UNMAPPED ranges of this thread over the watched ranges
     * are 'expected', each delivered once before and once after the call
     * when 'twice'.  With 'refault_kept', the watched pages outside
     * 'expected' are faulted back in after the call (a large folio split
     * around the removed pages leaves them absent from pagemap until then,
     * with their frames unchanged). */
    void check_removal(const std::vector<range_t> &watched,
                       const std::function<int()> &op, size_t changed,
                       const std::vector<range_t> &expected, bool exact,
                       bool twice, bool refault_kept);

  private:
    bool m_handler_set = false;
};

/* EXPECT that no changed page was left unreported (with details). */
#define UCMT_EXPECT_COVERED(_stats)                                            \
    do {                                                                       \
        const ::ucmt::oracle_stats &_s = (_stats);                             \
        EXPECT_EQ(0u, _s.uncovered) << "pages changed without a VM_UNMAPPED "  \
                                       "event before the change: "             \
                                    << _s.str();                               \
    } while (0)

/* A GTEST_SKIP for tests of glibc-internal calls in reloc mode. */
#define UCMT_SKIP_IF_RELOC_GLIBC_INTERNAL()                                    \
    do {                                                                       \
        if (reloc_mode()) {                                                    \
            GTEST_SKIP() << "reloc mode patches GOT/PLT slots only: calls "    \
                            "made inside glibc are not seen by design";        \
        }                                                                      \
    } while (0)

} // namespace ucmt

#endif
