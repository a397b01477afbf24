/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * RC transport over the device, two endpoints of one interface connected to
 * each other: data moved by put/get/am zcopy is read back and compared.
 */
#include "uct_fixture.h"

#include <atomic>
#include <cstring>
#include <memory>
#include <thread>
#include <sys/mman.h>

using namespace uct_test;

class uct_rc : public rc_test
{
  protected:
    struct am_log {
        std::vector<std::vector<uint8_t>> msgs;
    };
    static ucs_status_t am_cb(void *arg, void *data, size_t length, unsigned)
    {
        auto *log = static_cast<am_log *>(arg);
        log->msgs.emplace_back(static_cast<uint8_t *>(data),
                               static_cast<uint8_t *>(data) + length);
        return UCS_OK;
    }

    /* A put to an endpoint whose peer QP is gone must fail with
     * ENDPOINT_TIMEOUT within wait_timeout_s (an interface of its own,
     * opened with the UCX_RC_* settings in force). */
    void put_to_gone_peer_times_out()
    {
        uct_rc_iface_t *iface;
        uct_rc_iface_params_t params = iface_params();
        ASSERT_EQ(UCS_OK, uct_rc_iface_open(m_md, &params, &iface));
        uct_rc_ep_t *ep, *gone;
        uint8_t addr[UCT_RC_EP_ADDR_SIZE];
        ASSERT_EQ(UCS_OK, uct_rc_ep_create(iface, &ep));
        ASSERT_EQ(UCS_OK, uct_rc_ep_create(iface, &gone));
        ASSERT_EQ(UCS_OK, uct_rc_ep_get_address(gone, addr));
        uct_rc_ep_destroy(gone); /* its QP number now answers nothing */
        ASSERT_EQ(UCS_OK, uct_rc_ep_connect_to_ep(ep, addr));

        mapping buf(4096);
        uct_ib_mem_t *memh = reg(buf.ptr, buf.len);
        uct_iov_t iov      = {buf.ptr, buf.len, memh};
        test_comp comp;
        ASSERT_EQ(UCS_INPROGRESS,
                  uct_rc_ep_put_zcopy(ep, &iov, 1, (uintptr_t)buf.ptr,
                                      rkey_of(memh), &comp.super));
        std::swap(iface, m_iface); /* wait() progresses m_iface */
        ucs_status_t st = wait_comp(comp);
        std::swap(iface, m_iface);
        EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT, st) << ucs_status_string(st);
        EXPECT_EQ(st, uct_rc_ep_status(ep));
        uct_rc_ep_destroy(ep);
        uct_rc_iface_close(iface);
        dereg(memh);
    }
};

TEST_F(uct_rc, put_zcopy_writes_remote_memory)
{
    for (size_t len : {(size_t)1, (size_t)4096, (size_t)100000}) {
        mapping src(len), dst(len);
        fill(src.ptr, len, 1);
        memset(dst.ptr, 0, len);
        uct_ib_mem_t *sm = reg(src.ptr, len), *dm = reg(dst.ptr, len);
        ASSERT_EQ(UCS_OK, put(m_ep[0], src.ptr, len, sm, dst.ptr, dm));
        std::string why;
        EXPECT_TRUE(check(dst.ptr, len, 1, &why)) << len << ": " << why;
        dereg(sm);
        dereg(dm);
    }
}

TEST_F(uct_rc, get_zcopy_reads_remote_memory)
{
    size_t len = 70000;
    mapping src(len), dst(len);
    fill(src.ptr, len, 2);
    memset(dst.ptr, 0, len);
    uct_ib_mem_t *sm = reg(src.ptr, len), *dm = reg(dst.ptr, len);
    ASSERT_EQ(UCS_OK, get(m_ep[1], dst.ptr, len, dm, src.ptr, sm));
    std::string why;
    EXPECT_TRUE(check(dst.ptr, len, 2, &why)) << why;
    dereg(sm);
    dereg(dm);
}

TEST_F(uct_rc, iov_lists_gather_and_scatter)
{
    const size_t piece = 3000, n = 3;
    mapping a(piece), b(piece), c(piece), remote(piece * n), back(piece * n);
    void *parts[n] = {a.ptr, b.ptr, c.ptr};
    uct_ib_mem_t *memh[n];
    uct_iov_t iov[n + 1];
    for (size_t i = 0; i < n; ++i) {
        fill(parts[i], piece, 10 + i);
        memh[i] = reg(parts[i], piece);
        iov[i]  = {parts[i], piece, memh[i]};
    }
    iov[n] = {nullptr, 0, nullptr}; /* empty entries are allowed */
    ASSERT_LE(n + 1, m_attr.max_iov);
    uct_ib_mem_t *rm = reg(remote.ptr, remote.len);
    test_comp comp;
    ASSERT_EQ(UCS_INPROGRESS,
              uct_rc_ep_put_zcopy(m_ep[0], iov, n + 1, (uintptr_t)remote.ptr,
                                  rkey_of(rm), &comp.super));
    ASSERT_EQ(UCS_OK, wait_comp(comp));
    std::string why;
    for (size_t i = 0; i < n; ++i) {
        EXPECT_TRUE(
            check((uint8_t *)remote.ptr + i * piece, piece, 10 + i, &why))
            << i << ": " << why;
    }
    /* scatter it back into the pieces, rotated */
    for (size_t i = 0; i < n; ++i) {
        memset(parts[i], 0, piece);
        iov[i] = {parts[(i + 1) % n], piece, memh[(i + 1) % n]};
    }
    test_comp comp2;
    ASSERT_EQ(UCS_INPROGRESS,
              uct_rc_ep_get_zcopy(m_ep[1], iov, n, (uintptr_t)remote.ptr,
                                  rkey_of(rm), &comp2.super));
    ASSERT_EQ(UCS_OK, wait_comp(comp2));
    for (size_t i = 0; i < n; ++i) {
        EXPECT_TRUE(check(parts[(i + 1) % n], piece, 10 + i, &why))
            << i << ": " << why;
        dereg(memh[i]);
    }
    dereg(rm);

    /* too many entries, entries outside their memh */
    std::vector<uct_iov_t> many(m_attr.max_iov + 1, iov[0]);
    EXPECT_EQ(
        UCS_ERR_INVALID_PARAM,
        uct_rc_ep_put_zcopy(m_ep[0], many.data(), many.size(), 0, 0, nullptr));
}

TEST_F(uct_rc, iov_outside_memh_is_refused)
{
    mapping buf(8192);
    uct_ib_mem_t *memh = nullptr;
    ASSERT_EQ(UCS_OK, uct_ib_md_mem_reg(m_md, buf.ptr, 4096,
                                        UCT_IB_MEM_ACCESS_ALL, &memh));
    void *addr;
    size_t len;
    uct_ib_mem_range(memh, &addr, &len);
    uct_iov_t iov = {(uint8_t *)addr + len - 10, 20, memh};
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_rc_ep_put_zcopy(m_ep[0], &iov, 1, 0, 0, nullptr));
    iov = {buf.ptr, 16, nullptr};
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_rc_ep_put_zcopy(m_ep[0], &iov, 1, 0, 0, nullptr));
    dereg(memh);
}

TEST_F(uct_rc, am_zcopy_delivers_header_and_payload)
{
    am_log log;
    ASSERT_EQ(UCS_OK, uct_rc_iface_set_am_handler(m_iface, 5, am_cb, &log));
    const size_t len = 6000;
    mapping src(len);
    fill(src.ptr, len, 3);
    uct_ib_mem_t *sm = reg(src.ptr, len);
    uint8_t header[40];
    fill(header, sizeof(header), 4);
    uct_iov_t iov[2] = {{src.ptr, 2000, sm},
                        {(uint8_t *)src.ptr + 2000, len - 2000, sm}};
    test_comp comp;
    ASSERT_EQ(UCS_INPROGRESS,
              uct_rc_ep_am_zcopy(m_ep[0], 5, header, sizeof(header), iov, 2,
                                 &comp.super));
    ASSERT_EQ(UCS_OK, wait_comp(comp));
    ASSERT_TRUE(wait([&]() { return log.msgs.size() == 1; }));
    ASSERT_EQ(sizeof(header) + len, log.msgs[0].size());
    std::string why;
    EXPECT_TRUE(check(log.msgs[0].data(), sizeof(header), 4, &why)) << why;
    EXPECT_TRUE(check(log.msgs[0].data() + sizeof(header), len, 3, &why))
        << why;

    /* larger than the segment: refused */
    mapping big(m_attr.seg_size + 1);
    uct_ib_mem_t *bm = reg(big.ptr, big.len);
    uct_iov_t biov   = {big.ptr, big.len, bm};
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_rc_ep_am_zcopy(m_ep[0], 5, nullptr, 0, &biov, 1, nullptr));
    dereg(bm);
    dereg(sm);
}

TEST_F(uct_rc, am_short_and_many_messages_reuse_receive_buffers)
{
    am_log log;
    ASSERT_EQ(UCS_OK, uct_rc_iface_set_am_handler(m_iface, 1, am_cb, &log));
    /* more messages than receive buffers: buffers must be reposted */
    const unsigned count = 3 * 32;
    for (unsigned i = 0; i < count; ++i) {
        uint32_t payload[8];
        fill(payload, sizeof(payload), 100 + i);
        ucs_status_t st = post_retry([&]() {
            return uct_rc_ep_am_short(m_ep[i % 2], 1, 0xabcd0000u + i, payload,
                                      sizeof(payload));
        });
        ASSERT_EQ(UCS_OK, st) << i;
    }
    ASSERT_TRUE(wait([&]() { return log.msgs.size() == count; }))
        << log.msgs.size() << " of " << count << " messages arrived";
    std::vector<bool> seen(count);
    for (auto &m : log.msgs) {
        ASSERT_EQ(8u + 32u, m.size());
        uint64_t hdr;
        memcpy(&hdr, m.data(), 8);
        unsigned i = hdr - 0xabcd0000u;
        ASSERT_LT(i, count);
        EXPECT_FALSE(seen[i]);
        seen[i] = true;
        std::string why;
        EXPECT_TRUE(check(m.data() + 8, 32, 100 + i, &why)) << why;
    }
    EXPECT_EQ(UCS_OK, flush(m_ep[0]));
    EXPECT_EQ(UCS_OK, flush(m_ep[1]));
}

TEST_F(uct_rc, many_in_flight_until_no_resource_then_flush)
{
    const size_t len   = 4096;
    const unsigned max = m_attr.tx_queue_len;
    mapping src(len * max), dst(len * max);
    fill(src.ptr, src.len, 7);
    memset(dst.ptr, 0, dst.len);
    uct_ib_mem_t *sm = reg(src.ptr, src.len), *dm = reg(dst.ptr, dst.len);
    uct_rkey_t rkey = rkey_of(dm);
    test_comp comp(0);
    unsigned posted = 0;
    ucs_status_t st;
    for (;;) {
        size_t off    = (size_t)(posted % max) * len;
        uct_iov_t iov = {(uint8_t *)src.ptr + off, len, sm};
        ++comp.super.count;
        st = uct_rc_ep_put_zcopy(m_ep[0], &iov, 1, (uintptr_t)dst.ptr + off,
                                 rkey, &comp.super);
        if (st != UCS_INPROGRESS) {
            --comp.super.count;
            break;
        }
        ++posted;
        ASSERT_LE(posted, max) << "more in flight than tx_queue_len";
    }
    EXPECT_EQ(UCS_ERR_NO_RESOURCE, st);
    EXPECT_EQ(max, posted);

    test_comp fcomp;
    ASSERT_EQ(UCS_INPROGRESS, uct_rc_ep_flush(m_ep[0], &fcomp.super));
    ASSERT_EQ(UCS_OK, wait_comp(fcomp));
    EXPECT_EQ(0, comp.super.count) << "flush completed before the operations";
    EXPECT_EQ(1, comp.calls);
    EXPECT_EQ(UCS_OK, comp.super.status);
    std::string why;
    EXPECT_TRUE(check(dst.ptr, dst.len, 7, &why)) << why;
    EXPECT_EQ(UCS_OK, uct_rc_ep_flush(m_ep[0], nullptr)) << "nothing left";
    dereg(sm);
    dereg(dm);
}

TEST_F(uct_rc, bad_rkey_fails_operation_and_endpoint_fast)
{
    const size_t len = 4096;
    mapping src(len), dst(len);
    uct_ib_mem_t *sm = reg(src.ptr, len), *dm = reg(dst.ptr, len);
    uct_iov_t iov = {src.ptr, len, sm};
    test_comp comp;
    ASSERT_EQ(UCS_INPROGRESS,
              uct_rc_ep_put_zcopy(m_ep[0], &iov, 1, (uintptr_t)dst.ptr,
                                  rkey_of(dm) ^ 0x5a5a00, &comp.super));
    ucs_status_t st = wait_comp(comp);
    EXPECT_EQ(UCS_ERR_INVALID_ADDR, st) << ucs_status_string(st);
    EXPECT_EQ(st, uct_rc_ep_status(m_ep[0]));
    /* later operations fail at once, flush reports the error */
    EXPECT_EQ(st, uct_rc_ep_put_zcopy(m_ep[0], &iov, 1, (uintptr_t)dst.ptr,
                                      rkey_of(dm), nullptr));
    EXPECT_EQ(st, uct_rc_ep_get_zcopy(m_ep[0], &iov, 1, (uintptr_t)dst.ptr,
                                      rkey_of(dm), nullptr));
    EXPECT_EQ(st, uct_rc_ep_am_short(m_ep[0], 0, 0, nullptr, 0));
    EXPECT_EQ(st, uct_rc_ep_flush(m_ep[0], nullptr));

    /* the interface still works with a new pair of endpoints */
    uct_rc_ep_t *a, *b;
    connect_pair(&a, &b);
    fill(src.ptr, len, 9);
    EXPECT_EQ(UCS_OK, put(a, src.ptr, len, sm, dst.ptr, dm));
    std::string why;
    EXPECT_TRUE(check(dst.ptr, len, 9, &why)) << why;
    uct_rc_ep_destroy(a);
    uct_rc_ep_destroy(b);
    dereg(sm);
    dereg(dm);
}

TEST_F(uct_rc, bad_rkey_with_operations_queued_behind_it)
{
    const size_t len = 1024;
    mapping src(len), dst(len);
    uct_ib_mem_t *sm = reg(src.ptr, len), *dm = reg(dst.ptr, len);
    uct_iov_t iov = {src.ptr, len, sm};
    test_comp bad, good(4);
    ASSERT_EQ(UCS_INPROGRESS,
              uct_rc_ep_put_zcopy(m_ep[0], &iov, 1, (uintptr_t)dst.ptr,
                                  rkey_of(dm) + 0x100, &bad.super));
    for (int i = 0; i < 4; ++i) {
        ASSERT_EQ(UCS_INPROGRESS,
                  uct_rc_ep_put_zcopy(m_ep[0], &iov, 1, (uintptr_t)dst.ptr,
                                      rkey_of(dm), &good.super));
    }
    EXPECT_NE(UCS_OK, wait_comp(bad));
    /* the ones behind it are flushed with the endpoint's error */
    EXPECT_EQ(uct_rc_ep_status(m_ep[0]), wait_comp(good));
    dereg(sm);
    dereg(dm);
}

TEST_F(uct_rc, unconnected_endpoint_and_bad_address)
{
    uct_rc_ep_t *ep;
    ASSERT_EQ(UCS_OK, uct_rc_ep_create(m_iface, &ep));
    EXPECT_EQ(UCS_ERR_NOT_CONNECTED, uct_rc_ep_am_short(ep, 0, 0, nullptr, 0));
    EXPECT_EQ(UCS_OK, uct_rc_ep_flush(ep, nullptr));
    uint8_t garbage[UCT_RC_EP_ADDR_SIZE] = {0x12, 0x34};
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_rc_ep_connect_to_ep(ep, garbage));
    uint8_t addr[UCT_RC_EP_ADDR_SIZE];
    ASSERT_EQ(UCS_OK, uct_rc_ep_get_address(m_ep[0], addr));
    EXPECT_EQ(UCS_ERR_ALREADY_EXISTS, uct_rc_ep_connect_to_ep(m_ep[1], addr));
    uct_rc_ep_destroy(ep);
}

TEST_F(uct_rc, destroy_with_operations_in_flight_cancels_them)
{
    const size_t len = 65536;
    mapping src(len), dst(len);
    uct_ib_mem_t *sm = reg(src.ptr, len), *dm = reg(dst.ptr, len);
    uct_iov_t iov = {src.ptr, len, sm};
    test_comp comp(8);
    for (int i = 0; i < 8; ++i) {
        ASSERT_EQ(UCS_INPROGRESS,
                  uct_rc_ep_put_zcopy(m_ep[0], &iov, 1, (uintptr_t)dst.ptr,
                                      rkey_of(dm), &comp.super));
    }
    uct_rc_ep_destroy(m_ep[0]);
    m_ep[0] = nullptr;
    EXPECT_EQ(0, comp.super.count);
    EXPECT_EQ(1, comp.calls);
    dereg(sm);
    dereg(dm);
}

TEST_F(uct_rc, peer_gone_times_out_instead_of_hanging)
{
    /* short transport timeout: 4.096 us * 2^14 = 67 ms per try, 2 tries */
    scoped_env t("UCX_RC_TIMEOUT", "14"), r("UCX_RC_RETRY_COUNT", "1");
    put_to_gone_peer_times_out();
}

/* The default retry count reports a dead peer too: soft-RoCE retries for
 * ever at 7 (UCX's default), so the iface uses 6 there. */
TEST_F(uct_rc, peer_gone_times_out_with_default_retry_count)
{
    scoped_env t("UCX_RC_TIMEOUT", "14"), r("UCX_RC_RETRY_COUNT", nullptr);
    put_to_gone_peer_times_out();
}

/* Registrations above UCX_IB_REG_MT_THRESH (pages faulted in by several
 * threads first) carry working keys over their whole range. */
class uct_rc_mt_reg : public rc_test
{
    scoped_env m_thresh{"UCX_IB_REG_MT_THRESH", "1m"};
    scoped_env m_threads{"UCX_IB_REG_MT_THREADS", "4"};
    scoped_env m_methods{"UCX_IB_REG_METHODS", "direct"};
};

TEST_F(uct_rc_mt_reg, large_fresh_buffer_moves_data_end_to_end)
{
    uct_ib_md_attr_t attr = md_attr();
    ASSERT_EQ(1u << 20, attr.reg_mt_thresh);
    ASSERT_EQ(4u, attr.reg_mt_threads);
    const size_t len = 4u << 20;
    mapping src(len), dst(len); /* never touched before registration */
    uct_ib_mem_t *sm = reg(src.ptr, len), *dm = reg(dst.ptr, len);
    ASSERT_NE(nullptr, sm);
    ASSERT_NE(nullptr, dm);
    fill(src.ptr, len, 77);
    /* first and last page of the range, then the whole of it */
    const size_t edge = 4096;
    ASSERT_EQ(UCS_OK, put(m_ep[0], src.ptr, edge, sm, dst.ptr, dm));
    ASSERT_EQ(UCS_OK, put(m_ep[0], (uint8_t *)src.ptr + len - edge, edge, sm,
                          (uint8_t *)dst.ptr + len - edge, dm));
    std::string why;
    EXPECT_TRUE(check(dst.ptr, edge, 77, &why)) << why;
    ASSERT_EQ(UCS_OK, put(m_ep[0], src.ptr, len, sm, dst.ptr, dm));
    EXPECT_TRUE(check(dst.ptr, len, 77, &why)) << why;
    dereg(sm);
    dereg(dm);

    /* the prefault does not hide a protection error */
    mapping ro(len, PROT_READ);
    uct_ib_mem_t *memh = nullptr;
    EXPECT_EQ(UCS_ERR_INVALID_ADDR,
              uct_ib_md_mem_reg(m_md, ro.ptr, len,
                                UCT_IB_MEM_ACCESS_REMOTE_WRITE, &memh));
}

/* The md is thread-safe: threads registering and releasing overlapping and
 * private ranges through the cache, then every key is used. */
TEST_F(uct_rc, concurrent_registrations_from_threads)
{
    const unsigned nthreads = 4, iters = 200;
    const size_t len = 64 * 1024;
    mapping shared(len * 2);
    std::vector<std::unique_ptr<mapping>> own;
    for (unsigned i = 0; i < nthreads; ++i) {
        own.emplace_back(new mapping(len));
    }
    std::atomic<unsigned> failures{0};
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < nthreads; ++t) {
        threads.emplace_back([&, t]() {
            for (unsigned i = 0; i < iters; ++i) {
                uct_ib_mem_t *a, *b;
                uint8_t *s = (uint8_t *)shared.ptr + ((i + t) % 16) * 4096;
                if (uct_ib_md_mem_reg(m_md, s, len, UCT_IB_MEM_ACCESS_ALL,
                                      &a) != UCS_OK) {
                    ++failures;
                    continue;
                }
                if (uct_ib_md_mem_reg(m_md, own[t]->ptr, len,
                                      UCT_IB_MEM_ACCESS_ALL, &b) != UCS_OK) {
                    ++failures;
                } else {
                    uct_ib_md_mem_dereg(m_md, b);
                }
                uct_ib_md_mem_dereg(m_md, a);
            }
        });
    }
    for (auto &th : threads) {
        th.join();
    }
    EXPECT_EQ(0u, failures.load());
    /* keys handed out now work */
    for (unsigned t = 0; t < nthreads; ++t) {
        uct_ib_mem_t *sm = reg(own[t]->ptr, len), *dm = reg(shared.ptr, len);
        fill(own[t]->ptr, len, 50 + t);
        ASSERT_EQ(UCS_OK, put(m_ep[0], own[t]->ptr, len, sm, shared.ptr, dm));
        std::string why;
        EXPECT_TRUE(check(shared.ptr, len, 50 + t, &why)) << why;
        dereg(sm);
        dereg(dm);
    }
}

TEST_F(uct_rc, completion_without_callback_is_polled)
{
    mapping src(4096), dst(4096);
    uct_ib_mem_t *sm = reg(src.ptr, 4096), *dm = reg(dst.ptr, 4096);
    fill(src.ptr, 4096, 12);
    uct_iov_t iov         = {src.ptr, 4096, sm};
    uct_completion_t comp = {nullptr, 2, UCS_OK}; /* put + flush */
    ASSERT_EQ(UCS_INPROGRESS,
              uct_rc_ep_put_zcopy(m_ep[0], &iov, 1, (uintptr_t)dst.ptr,
                                  rkey_of(dm), &comp));
    ASSERT_EQ(UCS_INPROGRESS, uct_rc_ep_flush(m_ep[0], &comp));
    ASSERT_TRUE(wait([&]() { return comp.count == 0; }));
    EXPECT_EQ(UCS_OK, comp.status);
    std::string why;
    EXPECT_TRUE(check(dst.ptr, 4096, 12, &why)) << why;
    dereg(sm);
    dereg(dm);
}

/* Operations without a callback ask for a completion only every
 * UCX_RC_TX_CQ_MODERATION: their credits come back with a later signaled
 * one, and flush of an unsignaled tail posts its own signaled WR.  Sizes on
 * both sides of the inline limit (128). */
TEST_F(uct_rc, unsignaled_puts_return_credits_and_flush)
{
    const unsigned count = 3 * m_attr.tx_queue_len + 5;
    for (size_t len : {(size_t)16, (size_t)128, (size_t)129, (size_t)1000}) {
        mapping src(len * count), dst(len * count);
        fill(src.ptr, src.len, 20);
        memset(dst.ptr, 0, dst.len);
        uct_ib_mem_t *sm = reg(src.ptr, src.len), *dm = reg(dst.ptr, dst.len);
        uct_rkey_t rkey = rkey_of(dm);
        for (unsigned i = 0; i < count; ++i) {
            uct_iov_t iov   = {(uint8_t *)src.ptr + i * len, len, sm};
            ucs_status_t st = post_retry([&]() {
                return uct_rc_ep_put_zcopy(m_ep[0], &iov, 1,
                                           (uintptr_t)dst.ptr + i * len, rkey,
                                           nullptr);
            });
            ASSERT_EQ(UCS_INPROGRESS, st) << len << " #" << i;
        }
        ASSERT_EQ(UCS_OK, flush(m_ep[0])) << len;
        std::string why;
        EXPECT_TRUE(check(dst.ptr, dst.len, 20, &why)) << len << ": " << why;

        /* one unsignaled put, then a flush without a completion: it must
         * still finish (its zero-length WRITE reports the put) */
        fill(src.ptr, len, 21);
        uct_iov_t iov = {src.ptr, len, sm};
        ASSERT_EQ(UCS_INPROGRESS,
                  uct_rc_ep_put_zcopy(m_ep[0], &iov, 1, (uintptr_t)dst.ptr,
                                      rkey, nullptr));
        ASSERT_EQ(UCS_INPROGRESS, uct_rc_ep_flush(m_ep[0], nullptr));
        EXPECT_TRUE(wait([&]() {
            return uct_rc_ep_flush(m_ep[0], nullptr) == UCS_OK;
        })) << len;
        EXPECT_TRUE(check(dst.ptr, len, 21, &why)) << len << ": " << why;
        dereg(sm);
        dereg(dm);
    }
}

/* am_zcopy headers live in the descriptor's slot until the WR is known
 * complete; with unsignaled sends a slot reused too early would change the
 * header of a message still in the send queue.  (rxe gathers the data while
 * ibv_post_send runs: there all headers shared one slot in a trial and this
 * still passed; it catches early reuse only on a device that reads the WQE
 * later, like hardware.) */
TEST_F(uct_rc, unsignaled_am_zcopy_keeps_headers_until_complete)
{
    am_log log;
    ASSERT_EQ(UCS_OK, uct_rc_iface_set_am_handler(m_iface, 6, am_cb, &log));
    const unsigned count = 3 * m_attr.tx_queue_len;
    const size_t len     = 3000; /* not inline */
    mapping src(len);
    fill(src.ptr, len, 30);
    uct_ib_mem_t *sm = reg(src.ptr, len);
    uct_iov_t iov    = {src.ptr, len, sm};
    for (unsigned i = 0; i < count; ++i) {
        uint8_t header[64];
        fill(header, sizeof(header), 1000 + i);
        ucs_status_t st = post_retry([&]() {
            return uct_rc_ep_am_zcopy(m_ep[0], 6, header, sizeof(header), &iov,
                                      1, nullptr);
        });
        ASSERT_EQ(UCS_INPROGRESS, st) << i;
    }
    ASSERT_EQ(UCS_OK, flush(m_ep[0]));
    ASSERT_TRUE(wait([&]() { return log.msgs.size() == count; }))
        << log.msgs.size() << " of " << count << " messages arrived";
    for (unsigned i = 0; i < count; ++i) {
        std::string why;
        ASSERT_EQ(64 + len, log.msgs[i].size()) << i;
        EXPECT_TRUE(check(log.msgs[i].data(), 64, 1000 + i, &why))
            << "header of message " << i << ": " << why;
        EXPECT_TRUE(check(log.msgs[i].data() + 64, len, 30, &why)) << why;
    }
    dereg(sm);
}

/* An unsignaled WR that fails still reports: the endpoint goes to error and
 * flush returns the error instead of waiting forever. */
TEST_F(uct_rc, unsignaled_put_with_bad_rkey_fails_flush)
{
    mapping src(64), dst(64);
    uct_ib_mem_t *sm = reg(src.ptr, 64), *dm = reg(dst.ptr, 64);
    uct_iov_t iov = {src.ptr, 64, sm};
    for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(UCS_INPROGRESS,
                  uct_rc_ep_put_zcopy(m_ep[0], &iov, 1, (uintptr_t)dst.ptr,
                                      rkey_of(dm) ^ 0x5a5a00, nullptr));
    }
    ucs_status_t st = flush(m_ep[0]);
    EXPECT_EQ(UCS_ERR_INVALID_ADDR, st) << ucs_status_string(st);
    EXPECT_EQ(st, uct_rc_ep_status(m_ep[0]));
    EXPECT_EQ(st, uct_rc_ep_flush(m_ep[0], nullptr)) << "nothing left";
    dereg(sm);
    dereg(dm);
}

TEST_F(uct_rc, bad_moderation_and_inline_values_are_refused)
{
    uct_rc_iface_t *iface        = nullptr;
    uct_rc_iface_params_t params = iface_params();
    {
        scoped_env m("UCX_RC_TX_CQ_MODERATION", "0");
        EXPECT_EQ(UCS_ERR_INVALID_PARAM,
                  uct_rc_iface_open(m_md, &params, &iface));
    }
    {
        scoped_env m("UCX_RC_TX_MAX_INLINE", "lots");
        EXPECT_EQ(UCS_ERR_INVALID_PARAM,
                  uct_rc_iface_open(m_md, &params, &iface));
    }
    EXPECT_EQ(nullptr, iface);
}
