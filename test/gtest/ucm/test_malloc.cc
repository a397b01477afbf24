/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Memory released by the allocator and by glibc itself (free of an mmapped
 * block, realloc that moves, heap trim, thread stacks).  In bistro mode the
 * calls glibc makes internally are seen at libc's entries; in reloc mode
 * glibc's malloc family is wrapped (its heap changes are reported by the
 * wrappers), and another allocator's calls go through its GOT.
 *
 * Oracle: every watched page of the block whose frame changed was reported
 * while still old.  Where glibc is known to release the pages, the test also
 * requires that something changed, so that the scenario really ran.
 */
#include "common/ucm_test.h"

#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

namespace
{

using namespace ucmt;

class Allocator : public ucmt::test
{
  protected:
    void SetUp() override
    {
        ucmt::test::SetUp();
        if (IsSkipped() || HasFatalFailure()) {
            return;
        }
        m_glibc = malloc_is_glibc(&m_owner);
        if (m_glibc) {
            /* fixed thresholds: large blocks are mmapped, freed heap top is
             * trimmed (glibc's dynamic threshold would move after a free) */
            mallopt(M_MMAP_THRESHOLD, 128 * 1024);
            mallopt(M_TRIM_THRESHOLD, 128 * 1024);
        }
    }

    /* pages entirely inside [p, p+len) */
    static size_t watch_inside(const void *p, size_t len)
    {
        uintptr_t first = align_up((uintptr_t)p, page_size());
        uintptr_t last  = align_down((uintptr_t)p + len, page_size());
        return oracle::watch((void *)first, last - first);
    }

    bool m_glibc = false;
    std::string m_owner;
};

TEST_F(Allocator, FreeLargeBlockReported)
{
    const size_t size = 8 * 1024 * 1024;
    char *b           = (char *)malloc(size);

    ASSERT_TRUE(b != NULL);
    no_thp(b, size);
    touch(b, size);
    ASSERT_GT(watch_inside(b, size), 0u);
    oracle::arm();
    free(b);
    release_free_memory(m_glibc);
    oracle_stats s = oracle::check();
    record(s);
    UCMT_EXPECT_COVERED(s);
    if (m_glibc) {
        EXPECT_GT(s.changed, 0u) << "glibc should have unmapped the block";
    } else {
        std::cout << "[ info ] allocator " << m_owner << " released "
                  << s.changed << " pages" << std::endl;
    }
}

struct find_mapping_ctx {
    uintptr_t addr;
    uintptr_t end;
};

int find_mapping_cb(void *arg, void *addr, size_t length, int, const char *)
{
    find_mapping_ctx *ctx = (find_mapping_ctx *)arg;

    if (((uintptr_t)addr <= ctx->addr) &&
        (ctx->addr < (uintptr_t)addr + length)) {
        ctx->end = (uintptr_t)addr + length;
        return 1;
    }
    return 0;
}

TEST_F(Allocator, ReallocMoveReported)
{
    const size_t size = 4 * 1024 * 1024;
    char *a           = (char *)malloc(size);
    void *blocker     = MAP_FAILED;

    ASSERT_TRUE(a != NULL);
    no_thp(a, size);
    memset(a, 0x42, size);
    if (m_glibc) {
        /* occupy the page after the mmapped chunk: growing must move */
        find_mapping_ctx ctx = {(uintptr_t)a, 0};
        ucm_parse_proc_self_maps(find_mapping_cb, &ctx);
        ASSERT_NE(0u, ctx.end);
        blocker =
            mmap((void *)ctx.end, page_size(), PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    }
    ASSERT_GT(watch_inside(a, size), 0u);
    oracle::arm();
    char *b = (char *)realloc(a, 4 * size);
    release_free_memory(m_glibc); /* the old block, if it was copied */
    oracle_stats s = oracle::check();
    record(s);
    ASSERT_TRUE(b != NULL);
    UCMT_EXPECT_COVERED(s);
    EXPECT_EQ(0x42, b[size - 1]);
    if (m_glibc) {
        EXPECT_NE(a, b) << "glibc's mremap should have moved the block";
        EXPECT_GT(s.changed, 0u);
    }
    free(b);
    if (blocker != MAP_FAILED) {
        munmap(blocker, page_size());
    }
}

TEST_F(Allocator, GlibcHeapTrimReported)
{
    const size_t size = 4 * 1024 * 1024;

    if (!m_glibc) {
        GTEST_SKIP() << "heap trimming is a glibc malloc path; malloc here is "
                     << m_owner;
    }
    /* from the main arena's heap (sbrk), then trimmed when freed */
    mallopt(M_MMAP_THRESHOLD, 64 * 1024 * 1024);
    mallopt(M_TOP_PAD, 0);
    char *b = (char *)malloc(size);
    ASSERT_TRUE(b != NULL);
    no_thp(b, size);
    touch(b, size);
    ASSERT_GT(watch_inside(b, size), 0u);
    oracle::arm();
    free(b);
    malloc_trim(0);
    oracle_stats s = oracle::check();
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    record(s);
    UCMT_EXPECT_COVERED(s);
    EXPECT_GT(s.changed, 0u) << "glibc did not trim the heap";
}

/* A block from a thread's own arena (an mmapped heap, not the brk heap):
 * freeing it shrinks that heap with madvise/mmap/munmap inside glibc. */
void *arena_thread(void *arg)
{
    const size_t size = 4 * 1024 * 1024;
    char *b           = (char *)malloc(size);
    uintptr_t first, last;

    if (b == NULL) {
        return NULL;
    }
    no_thp(b, size);
    touch(b, size);
    first          = align_up((uintptr_t)b, page_size());
    last           = align_down((uintptr_t)b + size, page_size());
    *(size_t *)arg = oracle::watch((void *)first, last - first);
    free(b);
    malloc_trim(0);
    return NULL;
}

TEST_F(Allocator, GlibcThreadArenaTrimReported)
{
    pthread_t thread;
    size_t watched = 0;

    if (!m_glibc) {
        GTEST_SKIP() << "thread arenas are a glibc malloc path; malloc here "
                        "is "
                     << m_owner;
    }
    mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024); /* from the arena's heap */
    oracle::arm();
    ASSERT_EQ(0, pthread_create(&thread, NULL, arena_thread, &watched));
    pthread_join(thread, NULL);
    oracle_stats s = oracle::check();
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    record(s);
    ASSERT_GT(watched, 0u);
    UCMT_EXPECT_COVERED(s);
    EXPECT_GT(s.changed, 0u) << "glibc did not shrink the thread's heap";
}

/* Blocks handed out from new heap memory (the break, a thread's arena heap)
 * lie in ranges reported mapped. */
struct grow_ctx {
    size_t count, inside;
};

size_t blocks_inside_mapped(char **blocks, size_t count)
{
    std::vector<event_record> mapped = oracle::events(UCM_EVENT_VM_MAPPED);
    size_t inside                    = 0, i;

    for (i = 0; i < count; ++i) {
        for (const event_record &e : mapped) {
            if (((uintptr_t)blocks[i] >= e.addr) &&
                ((uintptr_t)blocks[i] < e.addr + e.len)) {
                ++inside;
                break;
            }
        }
    }
    return inside;
}

void *grow_thread(void *arg)
{
    grow_ctx *ctx = (grow_ctx *)arg;
    std::vector<char *> blocks(ctx->count);
    size_t i;

    for (i = 0; i < ctx->count; ++i) {
        blocks[i] = (char *)malloc(10000);
    }
    ctx->inside = blocks_inside_mapped(blocks.data(), ctx->count);
    for (i = 0; i < ctx->count; ++i) {
        free(blocks[i]);
    }
    return NULL;
}

TEST_F(Allocator, GlibcHeapGrowthReported)
{
    const size_t count = 2000; /* 20 MB: beyond anything freed before */
    std::vector<char *> blocks(count);
    grow_ctx ctx = {count, 0};
    pthread_t thread;
    size_t i, inside;

    if (!m_glibc) {
        GTEST_SKIP() << "heap growth is a glibc malloc path; malloc here is "
                     << m_owner;
    }
    mallopt(M_MMAP_THRESHOLD, 64 * 1024 * 1024);
    oracle::arm();
    for (i = 0; i < count; ++i) {
        blocks[i] = (char *)malloc(10000);
    }
    inside = blocks_inside_mapped(blocks.data(), count);
    ASSERT_EQ(0, pthread_create(&thread, NULL, grow_thread, &ctx));
    pthread_join(thread, NULL);
    oracle::disarm();
    for (i = 0; i < count; ++i) {
        free(blocks[i]);
    }
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    std::cout << "[ info ] main arena: " << inside << "/" << count
              << " blocks in mapped ranges; thread arena: " << ctx.inside << "/"
              << count << std::endl;
    /* the first blocks may come from free memory of earlier tests */
    EXPECT_GE(inside, count / 2);
    if (reloc_mode()) {
        /* bistro, as UCX: an arena heap grows by mprotect() inside the
         * reservation it mapped (reported then), which is no event */
        EXPECT_GE(ctx.inside, count / 2);
    }
}

/* malloc_trim() also discards the free pages in the middle of a heap (not
 * only its top): a block freed there and handed out again has new pages. */
TEST_F(Allocator, GlibcTrimInsideHeapReported)
{
    const size_t size = 4 * 1024 * 1024;

    if (!m_glibc) {
        GTEST_SKIP() << "malloc_trim is a glibc malloc path; malloc here is "
                     << m_owner;
    }
    mallopt(M_MMAP_THRESHOLD, 64 * 1024 * 1024);
    char *a    = (char *)malloc(size);
    char *keep = (char *)malloc(64 * 1024); /* keeps 'a' off the top */
    ASSERT_TRUE((a != NULL) && (keep != NULL));
    no_thp(a, size);
    touch(a, size);
    touch(keep, 64 * 1024);
    ASSERT_GT(watch_inside(a + 64 * 1024, size - 128 * 1024), 0u);
    oracle::arm();
    free(a);
    malloc_trim(0);
    oracle_stats s = oracle::check();
    free(keep);
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    record(s);
    UCMT_EXPECT_COVERED(s);
    EXPECT_GT(s.changed, 0u) << "malloc_trim discarded none of the pages";
}

/*
 * Thread stacks: glibc drops the unused part of a thread's stack with
 * madvise when the thread exits, and unmaps stacks beyond its cache
 * (40 MiB) at pthread_join.  Each thread watches a page deep in its stack
 * (left behind when a deep frame returns) and a page of its top frame.
 * Oracle: every watched stack page either still has its frame (cached
 * stack) or was reported before it changed.
 */
const size_t STACK_SIZE = 8 * 1024 * 1024;

void __attribute__((noinline)) deep_frame()
{
    char buf[64 * 1024];

    touch(buf, sizeof(buf));
    oracle::watch_page(buf + sizeof(buf) / 2);
    __asm__ __volatile__("" : : "r"(buf) : "memory");
}

void *stack_thread(void *)
{
    volatile char top[64];

    top[0] = 1;
    deep_frame();
    oracle::watch_page((const void *)top);
    return NULL;
}

TEST_F(Allocator, ThreadStacksReportedAtJoin)
{
    const unsigned n = scaled(12, 4);
    std::vector<pthread_t> threads(n);
    pthread_attr_t attr;
    unsigned i;

    UCMT_SKIP_IF_RELOC_GLIBC_INTERNAL();
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, STACK_SIZE);
    oracle::arm();
    for (i = 0; i < n; ++i) {
        ASSERT_EQ(0, pthread_create(&threads[i], &attr, stack_thread, NULL));
    }
    for (i = 0; i < n; ++i) {
        pthread_join(threads[i], NULL);
    }
    pthread_attr_destroy(&attr);
    oracle_stats s = oracle::check();
    record(s);
    EXPECT_EQ(2 * n, s.watched);
    UCMT_EXPECT_COVERED(s);
    if (!on_valgrind()) {
        EXPECT_GT(s.changed, 0u) << "glibc released no stack page at all?";
    }
}

} // namespace
