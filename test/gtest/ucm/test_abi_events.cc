/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What UCX 1.15+ and 1.22 expect of libucm's events and mremap functions:
 * ucm_mremap()/ucm_orig_mremap() take new_address as a fifth argument with
 * MREMAP_FIXED (oracle: the bytes are found at the target, the old range is
 * gone); the MREMAP event carries it; MEM_TYPE events from this libucm say
 * "device and flags unknown" in the bytes 1.22 added; a 1.22 producer's
 * event reaches the handlers as the same object, those bytes unchanged.
 */
#include "common/ucm_test.h"

#include <ucm/api/ucm_compat.h>

#include <string.h>
#include <sys/mman.h>

namespace
{

struct seen_t {
    int calls;
    const ucm_event_t *event;
    void *new_address;
    unsigned char sys_dev, mem_flags;
};

void record_cb(ucm_event_type_t type, ucm_event_t *event, void *arg)
{
    seen_t *seen = (seen_t *)arg;

    ++seen->calls;
    seen->event = event;
    if (type == UCM_EVENT_MREMAP) {
        seen->new_address = event->mremap.new_address;
    } else {
        /* the bytes at 20 and 21, as a 1.22 consumer reads them */
        memcpy(&seen->sys_dev, (const char *)event + 20, 1);
        memcpy(&seen->mem_flags, (const char *)event + 21, 1);
    }
}

/* Two mappings of n pages: a source filled with a pattern and a target. */
void map_pair(size_t n, char **src, char **dst)
{
    *src = (char *)mmap(NULL, n, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    *dst = (char *)mmap(NULL, n, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(MAP_FAILED, (void *)*src);
    ASSERT_NE(MAP_FAILED, (void *)*dst);
    for (size_t i = 0; i < n; ++i) {
        (*src)[i] = (char)(i * 7 + 1);
    }
}

void expect_moved(char *src, char *dst, size_t n, void *result)
{
    ASSERT_EQ((void *)dst, result) << strerror(errno);
    for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ((char)(i * 7 + 1), dst[i]) << "byte " << i;
    }
    /* the source is unmapped: mincore fails with ENOMEM */
    unsigned char vec;
    EXPECT_EQ(-1, mincore(src, ucmt::page_size(), &vec));
    EXPECT_EQ(ENOMEM, errno);
    munmap(dst, n);
}

} // namespace

TEST(AbiEvents, OrigMremapFixedTakesFifthArgument)
{
    const size_t n = 4 * ucmt::page_size();
    char *src, *dst;

    map_pair(n, &src, &dst);
    expect_moved(
        src, dst, n,
        ucm_orig_mremap(src, n, n, MREMAP_MAYMOVE | MREMAP_FIXED, dst));
}

TEST(AbiEvents, MremapFixedEventCarriesNewAddress)
{
    const size_t n = 4 * ucmt::page_size();
    seen_t seen    = {};
    char *src, *dst;

    ASSERT_EQ(UCS_OK,
              ucm_set_event_handler(UCM_EVENT_MREMAP, 0, record_cb, &seen));
    map_pair(n, &src, &dst);
    void *result = ucm_mremap(src, n, n, MREMAP_MAYMOVE | MREMAP_FIXED, dst);
    ucm_unset_event_handler(UCM_EVENT_MREMAP, record_cb, &seen);
    EXPECT_EQ(1, seen.calls);
    EXPECT_EQ((void *)dst, seen.new_address);
    expect_moved(src, dst, n, result);

    /* without MREMAP_FIXED no fifth argument is read: NULL */
    seen = {};
    ASSERT_EQ(UCS_OK,
              ucm_set_event_handler(UCM_EVENT_MREMAP, 0, record_cb, &seen));
    map_pair(n, &src, &dst);
    result = ucm_mremap(src, n, n / 2, 0);
    ucm_unset_event_handler(UCM_EVENT_MREMAP, record_cb, &seen);
    EXPECT_EQ((void *)src, result);
    EXPECT_EQ(1, seen.calls);
    EXPECT_EQ(NULL, seen.new_address);
    munmap(src, n);
    munmap(dst, n);
}

TEST(AbiEvents, OwnMemTypeEventsSayDeviceUnknown)
{
    seen_t seen = {};
    char buf[64];

    ASSERT_EQ(UCS_OK, ucm_set_event_handler(UCM_EVENT_MEM_TYPE_ALLOC, 0,
                                            record_cb, &seen));
    ucm_dispatch_mem_type_alloc(buf, sizeof(buf), UCS_MEMORY_TYPE_CUDA);
    ucm_unset_event_handler(UCM_EVENT_MEM_TYPE_ALLOC, record_cb, &seen);
    EXPECT_EQ(1, seen.calls);
    EXPECT_EQ(0xff, seen.sys_dev); /* UCS_SYS_DEVICE_ID_UNKNOWN */
    EXPECT_EQ(0, seen.mem_flags);
}

TEST(AbiEvents, ProducerEventPassedThroughWhole)
{
    seen_t seen = {};
    char buf[64];
    ucm_event_t event;

    memset(&event, 0x5a, sizeof(event));
    event.mem_type.address   = buf;
    event.mem_type.size      = sizeof(buf);
    event.mem_type.mem_type  = UCS_MEMORY_TYPE_CUDA;
    event.mem_type.sys_dev   = 3;
    event.mem_type.mem_flags = 1;
    ASSERT_EQ(UCS_OK, ucm_set_event_handler(UCM_EVENT_MEM_TYPE_ALLOC, 0,
                                            record_cb, &seen));
    ucm_event_enter();
    ucm_event_dispatch(UCM_EVENT_MEM_TYPE_ALLOC, &event);
    ucm_event_leave();
    ucm_unset_event_handler(UCM_EVENT_MEM_TYPE_ALLOC, record_cb, &seen);
    EXPECT_EQ(1, seen.calls);
    EXPECT_EQ(&event, seen.event) << "a copy was handed to the handler";
    EXPECT_EQ(3, seen.sys_dev);
    EXPECT_EQ(1, seen.mem_flags);
}
