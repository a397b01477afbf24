/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Fake registration with a page-frame record, and the stale-hit oracle.
 */
#include "rcache_fixture.h"

#include <ucm/api/ucm.h>

#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace rcache_test
{

bool read_pfns(uintptr_t addr, size_t npages, std::vector<uint64_t> &out,
               int fd)
{
    int own = -1;

    if (fd < 0) {
        own = fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            return false;
        }
    }
    out.resize(npages);
    ssize_t bytes = npages * sizeof(uint64_t);
    ssize_t ret =
        pread(fd, out.data(), bytes, (addr / page_size) * sizeof(uint64_t));
    if (own >= 0) {
        close(own);
    }
    if (ret != bytes) {
        return false;
    }
    for (auto &e : out) {
        e = (e & (1ull << 63)) ? (e & ((1ull << 55) - 1)) : 0;
    }
    return true;
}

bool pfn_available()
{
    static int available = -1;
    std::vector<uint64_t> pfn;
    volatile char *page;

    if (available < 0) {
        page = (volatile char *)mmap(NULL, page_size, PROT_READ | PROT_WRITE,
                                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (page == MAP_FAILED) {
            return false;
        }
        page[0]   = 1;
        available = read_pfns((uintptr_t)page, 1, pfn) && (pfn[0] != 0);
        munmap((void *)page, page_size);
    }
    return available;
}

bool on_valgrind()
{
    const char *preload = getenv("LD_PRELOAD");

    return (preload != nullptr) && (strstr(preload, "vgpreload") != nullptr);
}

std::string check_region(const test_region *region, uintptr_t addr, size_t len,
                         int fd)
{
    if (region->magic != region_magic_alive) {
        return "region is not registered";
    }
    uintptr_t rstart = region->super.super.start;
    uintptr_t rend   = region->super.super.end;
    if ((addr < rstart) || (addr + len > rend)) {
        return "region does not cover the request";
    }
    uintptr_t first = addr / page_size;
    uintptr_t last  = (addr + len - 1) / page_size;
    std::vector<uint64_t> now;
    if (!read_pfns(first * page_size, last - first + 1, now, fd)) {
        return "cannot read pagemap";
    }
    uintptr_t rfirst = rstart / page_size;
    for (uintptr_t p = first; p <= last; ++p) {
        uint64_t then = (*region->pfns)[p - rfirst];
        if (then == 0) {
            return "no page frame recorded at registration (pagemap needs "
                   "root): the oracle cannot decide";
        }
        if (then != now[p - first]) {
            char buf[160];
            snprintf(buf, sizeof(buf),
                     "stale: page 0x%lx frame 0x%lx at "
                     "registration, 0x%lx now",
                     (unsigned long)(p * page_size), (unsigned long)then,
                     (unsigned long)now[p - first]);
            return buf;
        }
    }
    return "";
}

ucs_status_t rcache_fixture::mem_reg_cb(void *context, ucs_rcache_t *, void *,
                                        ucs_rcache_region_t *r, uint16_t)
{
    rcache_fixture *self = static_cast<rcache_fixture *>(context);
    test_region *region  = reinterpret_cast<test_region *>(r);
    uintptr_t first      = r->super.start / page_size;
    uintptr_t last       = (r->super.end - 1) / page_size;
    size_t size          = r->super.end - r->super.start;

    self->reg_calls++;
    if (size > self->fail_above_size) {
        return UCS_ERR_NO_MEMORY;
    }
    if (self->registered_bytes + size > self->max_registered) {
        return UCS_ERR_NO_MEMORY;
    }
    /* like pinning: fault the pages in now (EFAULT if unmapped) */
    int advice =
        (r->prot & PROT_WRITE) ? MADV_POPULATE_WRITE : MADV_POPULATE_READ;
    if (ucm_orig_madvise((void *)(first * page_size),
                         (last - first + 1) * page_size, advice) != 0) {
        return UCS_ERR_INVALID_ADDR;
    }
    region->pfns = new std::vector<uint64_t>();
    if (!read_pfns(first * page_size, last - first + 1, *region->pfns)) {
        delete region->pfns;
        return UCS_ERR_IO_ERROR;
    }
    region->magic = region_magic_alive;
    self->registered_bytes += size;
    self->regs++;
    return UCS_OK;
}

void rcache_fixture::mem_dereg_cb(void *context, ucs_rcache_t *,
                                  ucs_rcache_region_t *r)
{
    rcache_fixture *self = static_cast<rcache_fixture *>(context);
    test_region *region  = reinterpret_cast<test_region *>(r);

    EXPECT_EQ(region_magic_alive, region->magic);
    region->magic = region_magic_dead;
    delete region->pfns;
    region->pfns = nullptr;
    self->registered_bytes -= r->super.end - r->super.start;
    self->deregs++;
    std::lock_guard<std::mutex> guard(self->log_lock);
    self->dereg_log.push_back(r->super.start);
}

void rcache_fixture::dump_cb(void *, ucs_rcache_t *, ucs_rcache_region_t *,
                             char *buf, size_t max)
{
    snprintf(buf, max, "test region");
}

ucs_rcache_params_t rcache_fixture::default_params()
{
    static const ucs_rcache_ops_t ops = {mem_reg_cb, mem_dereg_cb, dump_cb};
    ucs_rcache_params_t params        = {};

    params.region_struct_size = sizeof(test_region);
    params.alignment          = page_size;
    params.max_alignment      = page_size;
    params.ucm_events         = UCM_EVENT_VM_UNMAPPED;
    params.ucm_event_priority = 1000;
    params.ops                = &ops;
    params.context            = this;
    params.flags              = 0;
    params.max_regions        = ~0ul;
    params.max_size           = ~(size_t)0;
    params.max_unreleased     = ~(size_t)0;
    return params;
}

ucs_status_t rcache_fixture::create(const ucs_rcache_params_t *params)
{
    ucs_rcache_params_t dflt = default_params();

    return ucs_rcache_create(params ? params : &dflt, "test", nullptr,
                             &m_rcache);
}

void rcache_fixture::destroy()
{
    if (m_rcache != nullptr) {
        EXPECT_EQ(UCS_OK, ucs_rcache_destroy_checked(m_rcache));
        m_rcache = nullptr;
    }
}

void rcache_fixture::TearDown()
{
    destroy();
    EXPECT_EQ(regs.load(), deregs.load());
}

test_region *rcache_fixture::get(void *addr, size_t len, int prot)
{
    ucs_rcache_region_t *region = nullptr;
    ucs_status_t status =
        ucs_rcache_get(m_rcache, addr, len, prot, nullptr, &region);
    EXPECT_EQ(UCS_OK, status) << ucs_status_string(status);
    if (status != UCS_OK) {
        return nullptr;
    }
    test_region *r = reinterpret_cast<test_region *>(region);
    if (pfn_available()) { /* else the tests that need it skip */
        EXPECT_EQ("", check_region(r, (uintptr_t)addr, len));
    }
    EXPECT_EQ(prot, r->super.prot & prot);
    return r;
}

void rcache_fixture::put(test_region *region)
{
    ucs_rcache_region_put(m_rcache, &region->super);
}

ucs_rcache_stats_t rcache_fixture::stats()
{
    ucs_rcache_stats_t s = {};
    EXPECT_EQ(UCS_OK, ucs_rcache_query_stats(m_rcache, &s));
    return s;
}

void *rcache_fixture::map(size_t npages, int prot)
{
    void *p = mmap(nullptr, npages * page_size, prot,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(MAP_FAILED, p);
    return p;
}

} // namespace rcache_test
