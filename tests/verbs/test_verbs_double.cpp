// The verbs double itself: what it refuses (QP transitions without their attributes, posts beyond
// the queues' depths, wrong keys, writes with no receive posted, CQ overflow), so that the backend
// passing over it shows the backend does each of these right.
#include "verbs/verbs_double.hpp"

#include <collcomm/transport/ibverbs/connection.hpp>

#include <doctest/doctest.h>

#include <arpa/inet.h>

#include <cstring>
#include <vector>

namespace {

namespace tr = collcomm::transport;

// Two raw RC queue pairs on mockdev0 and mockdev1, driven through the table directly.
struct raw_pair {
  tr::verbs_api api = verbs_double::fabric::instance().api();
  ibv_context* ctx[2]{};
  ibv_pd* pd[2]{};
  ibv_cq* cq[2]{};
  ibv_qp* qp[2]{};
  ibv_mr* mr[2]{};
  std::vector<std::byte> mem[2];
  std::uint8_t link_layer;

  explicit raw_pair(std::uint8_t ll = IBV_LINK_LAYER_INFINIBAND, int cq_depth = 64, std::uint32_t send_depth = 8,
                    std::uint32_t recv_depth = 8)
      : link_layer(ll) {
    verbs_double::fabric::instance().reset(verbs_double::uniform_devices(2, ll));
    int n = 0;
    ibv_device** list = api.get_device_list(&n);
    REQUIRE(n == 2);
    for (int i = 0; i < 2; ++i) {
      ctx[i] = api.open_device(list[i]);
      pd[i] = api.alloc_pd(ctx[i]);
      cq[i] = api.create_cq(ctx[i], cq_depth, nullptr, nullptr, 0);
      ibv_qp_init_attr init{};
      init.send_cq = init.recv_cq = cq[i];
      init.qp_type = IBV_QPT_RC;
      init.cap.max_send_wr = send_depth;
      init.cap.max_recv_wr = recv_depth;
      init.cap.max_send_sge = init.cap.max_recv_sge = 1;
      qp[i] = api.create_qp(pd[i], &init);
      mem[i].assign(4096, std::byte{0});
      mr[i] = api.reg_mr(pd[i], mem[i].data(), mem[i].size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
      REQUIRE(qp[i] != nullptr);
      REQUIRE(mr[i] != nullptr);
    }
    api.free_device_list(list);
  }
  ~raw_pair() {
    for (int i = 0; i < 2; ++i) {
      api.destroy_qp(qp[i]);
      api.dereg_mr(mr[i]);
      api.destroy_cq(cq[i]);
      api.dealloc_pd(pd[i]);
      api.close_device(ctx[i]);
    }
  }

  static constexpr int init_mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  static constexpr int rtr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  static constexpr int rts_mask =
      IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;

  ibv_qp_attr init_attr() const {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    return a;
  }
  ibv_qp_attr rtr_attr(int i) const {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = qp[1 - i]->qp_num;
    a.rq_psn = 100;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.port_num = 1;
    if (link_layer == IBV_LINK_LAYER_ETHERNET) {
      a.ah_attr.is_global = 1;
      a.ah_attr.grh.hop_limit = 255;
      api.query_gid(ctx[1 - i], 1, 0, &a.ah_attr.grh.dgid);
    } else {
      ibv_port_attr p{};
      api.query_port(ctx[1 - i], 1, &p);
      a.ah_attr.dlid = p.lid;
    }
    return a;
  }
  ibv_qp_attr rts_attr() const {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 100;
    a.timeout = 20;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    return a;
  }
  void connect() {
    for (int i = 0; i < 2; ++i) {
      auto a = init_attr();
      REQUIRE(api.modify_qp(qp[i], &a, init_mask) == 0);
    }
    for (int i = 0; i < 2; ++i) {
      auto a = rtr_attr(i);
      REQUIRE(api.modify_qp(qp[i], &a, rtr_mask) == 0);
      auto b = rts_attr();
      REQUIRE(api.modify_qp(qp[i], &b, rts_mask) == 0);
    }
  }
  int post_recv(int i, std::uint64_t id) {
    ibv_recv_wr wr{};
    wr.wr_id = id;
    ibv_recv_wr* bad = nullptr;
    return api.post_recv(qp[i], &wr, &bad);
  }
  int write(int i, std::size_t off, std::size_t len, std::uint64_t remote_off, bool imm, std::uint32_t imm_host = 0,
            bool signaled = true, std::uint32_t lkey = 0, std::uint32_t rkey = 0) {
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(mem[i].data() + off);
    sge.length = static_cast<std::uint32_t>(len);
    sge.lkey = lkey != 0 ? lkey : mr[i]->lkey;
    ibv_send_wr wr{};
    wr.wr_id = 7;
    wr.opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.imm_data = htonl(imm_host);
    wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
    wr.wr.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(mem[1 - i].data()) + remote_off;
    wr.wr.rdma.rkey = rkey != 0 ? rkey : mr[1 - i]->rkey;
    ibv_send_wr* bad = nullptr;
    return api.post_send(qp[i], &wr, &bad);
  }
  std::vector<ibv_wc> poll(int i) {
    std::vector<ibv_wc> out;
    ibv_wc wc[8];
    int n;
    while ((n = api.poll_cq(cq[i], 8, wc)) > 0) out.insert(out.end(), wc, wc + n);
    if (n < 0) {
      ibv_wc failed{};
      failed.status = IBV_WC_GENERAL_ERR;  // stands for "poll_cq returned < 0"
      out.push_back(failed);
    }
    return out;
  }
};

}  // namespace

TEST_CASE("every attribute each QP transition requires: without it, EINVAL") {
  for (std::uint8_t ll : {std::uint8_t(IBV_LINK_LAYER_INFINIBAND), std::uint8_t(IBV_LINK_LAYER_ETHERNET)}) {
    raw_pair p(ll);
    struct step {
      int mask;
      ibv_qp_attr attr;
    };
    const step steps[] = {{raw_pair::init_mask, p.init_attr()}, {raw_pair::rtr_mask, p.rtr_attr(0)}, {raw_pair::rts_mask, p.rts_attr()}};
    for (const step& s : steps) {
      for (int bit = 1; bit <= (1 << 20); bit <<= 1) {
        if (!(s.mask & bit) || bit == IBV_QP_STATE) continue;
        ibv_qp_attr a = s.attr;
        CAPTURE(bit);
        CHECK(p.api.modify_qp(p.qp[0], &a, s.mask & ~bit) == EINVAL);
      }
      ibv_qp_attr a = s.attr;
      REQUIRE(p.api.modify_qp(p.qp[0], &a, s.mask) == 0);
    }
    CHECK(p.qp[0]->state == IBV_QPS_RTS);
  }
}

TEST_CASE("transitions from the wrong state, and bad values, are refused") {
  raw_pair p(IBV_LINK_LAYER_ETHERNET);
  auto rtr = p.rtr_attr(0);
  CHECK(p.api.modify_qp(p.qp[0], &rtr, raw_pair::rtr_mask) == EINVAL);  // RESET -> RTR
  auto rts = p.rts_attr();
  CHECK(p.api.modify_qp(p.qp[0], &rts, raw_pair::rts_mask) == EINVAL);  // RESET -> RTS
  auto init = p.init_attr();
  init.port_num = 2;
  CHECK(p.api.modify_qp(p.qp[0], &init, raw_pair::init_mask) == EINVAL);  // no port 2
  init = p.init_attr();
  REQUIRE(p.api.modify_qp(p.qp[0], &init, raw_pair::init_mask) == 0);
  rtr = p.rtr_attr(0);
  rtr.ah_attr.is_global = 0;  // RoCE without a GRH
  CHECK(p.api.modify_qp(p.qp[0], &rtr, raw_pair::rtr_mask) == EINVAL);
  rtr = p.rtr_attr(0);
  rtr.path_mtu = IBV_MTU_4096;
  rtr.path_mtu = static_cast<ibv_mtu>(6);  // above the port's MTU
  CHECK(p.api.modify_qp(p.qp[0], &rtr, raw_pair::rtr_mask) == EINVAL);
  rtr = p.rtr_attr(0);
  CHECK(p.api.modify_qp(p.qp[0], &rtr, raw_pair::rtr_mask | IBV_QP_SQ_PSN) == EINVAL);  // not an RTR attribute
  CHECK(p.api.modify_qp(p.qp[0], &rtr, raw_pair::rtr_mask) == 0);
}

TEST_CASE("write with immediate: data, imm_data in network byte order, byte_len; in order") {
  raw_pair p;
  p.connect();
  for (std::size_t i = 0; i < 64; ++i) p.mem[0][i] = std::byte(i * 3 + 1);
  REQUIRE(p.post_recv(1, 41) == 0);
  REQUIRE(p.post_recv(1, 42) == 0);
  REQUIRE(p.write(0, 0, 64, 128, true, 0xA1B2C3D4u) == 0);
  REQUIRE(p.write(0, 8, 16, 256, true, 5) == 0);
  auto rx = p.poll(1);
  REQUIRE(rx.size() == 2);
  CHECK(rx[0].wr_id == 41);
  CHECK(rx[0].opcode == IBV_WC_RECV_RDMA_WITH_IMM);
  CHECK((rx[0].wc_flags & IBV_WC_WITH_IMM) != 0);
  CHECK(ntohl(rx[0].imm_data) == 0xA1B2C3D4u);
  CHECK(rx[0].byte_len == 64);
  CHECK(rx[1].wr_id == 42);
  CHECK(ntohl(rx[1].imm_data) == 5);
  CHECK(std::memcmp(p.mem[1].data() + 128, p.mem[0].data(), 64) == 0);
  CHECK(std::memcmp(p.mem[1].data() + 256, p.mem[0].data() + 8, 16) == 0);
  auto tx = p.poll(0);
  REQUIRE(tx.size() == 2);
  CHECK(tx[0].status == IBV_WC_SUCCESS);
  CHECK(tx[0].opcode == IBV_WC_RDMA_WRITE);
}

TEST_CASE("a write with immediate and no receive posted: RNR, the sender's QP to ERR") {
  raw_pair p;
  p.connect();
  REQUIRE(p.post_recv(1, 1) == 0);
  REQUIRE(p.write(0, 0, 8, 0, true) == 0);
  REQUIRE(p.write(0, 0, 8, 0, true) == 0);  // overruns the receiver
  auto tx = p.poll(0);
  REQUIRE(tx.size() == 2);
  CHECK(tx[0].status == IBV_WC_SUCCESS);
  CHECK(tx[1].status == IBV_WC_RNR_RETRY_EXC_ERR);
  CHECK(p.qp[0]->state == IBV_QPS_ERR);
  CHECK(verbs_double::fabric::instance().rnr_events.load() == 1);
}

TEST_CASE("wrong keys and out-of-range accesses: protection and access errors") {
  SUBCASE("an rkey of another region") {
    raw_pair p;
    p.connect();
    REQUIRE(p.write(0, 0, 8, 0, false, 0, true, 0, p.mr[0]->rkey) == 0);  // own rkey, not the peer's
    auto tx = p.poll(0);
    REQUIRE(tx.size() == 1);
    CHECK(tx[0].status == IBV_WC_REM_ACCESS_ERR);
    CHECK(p.qp[0]->state == IBV_QPS_ERR);
  }
  SUBCASE("beyond the end of the remote region") {
    raw_pair p;
    p.connect();
    REQUIRE(p.write(0, 0, 64, 4096 - 32, false) == 0);
    auto tx = p.poll(0);
    REQUIRE(tx.size() == 1);
    CHECK(tx[0].status == IBV_WC_REM_ACCESS_ERR);
  }
  SUBCASE("an lkey used as an rkey's region, wrong local key") {
    raw_pair p;
    p.connect();
    REQUIRE(p.write(0, 0, 8, 0, false, 0, true, p.mr[0]->rkey) == 0);
    auto tx = p.poll(0);
    REQUIRE(tx.size() == 1);
    CHECK(tx[0].status == IBV_WC_LOC_PROT_ERR);
  }
  SUBCASE("a region registered without remote write") {
    raw_pair p;
    p.connect();
    ibv_mr* ro = p.api.reg_mr(p.pd[1], p.mem[1].data(), 64, IBV_ACCESS_LOCAL_WRITE);
    REQUIRE(p.write(0, 0, 8, 0, false, 0, true, 0, ro->rkey) == 0);
    auto tx = p.poll(0);
    REQUIRE(tx.size() == 1);
    CHECK(tx[0].status == IBV_WC_REM_ACCESS_ERR);
    p.api.dereg_mr(ro);
  }
}

TEST_CASE("send-queue depth: a post beyond max_send_wr outstanding fails with ENOMEM") {
  raw_pair p(IBV_LINK_LAYER_INFINIBAND, 64, 4);
  p.connect();
  for (int i = 0; i < 4; ++i) REQUIRE(p.write(0, 0, 8, 0, false, 0, /*signaled=*/i == 3) == 0);
  CHECK(p.write(0, 0, 8, 0, false) == ENOMEM);
  auto tx = p.poll(0);  // the signaled fourth retires all four
  REQUIRE(tx.size() == 1);
  CHECK(p.write(0, 0, 8, 0, false) == 0);
}

TEST_CASE("a completion queue of depth 2 overflows: poll fails, the QPs move to ERR") {
  raw_pair p(IBV_LINK_LAYER_INFINIBAND, 2);
  p.connect();
  for (int i = 0; i < 3; ++i) REQUIRE(p.write(0, 0, 8, 0, false) == 0);
  auto tx = p.poll(0);
  REQUIRE(!tx.empty());
  CHECK(tx.back().status == IBV_WC_GENERAL_ERR);  // poll_cq returned < 0
  CHECK(p.qp[0]->state == IBV_QPS_ERR);
  CHECK(verbs_double::fabric::instance().cq_overflows.load() == 1);
}

TEST_CASE("a destroyed peer: the next write completes with RETRY_EXC_ERR") {
  raw_pair p;
  p.connect();
  REQUIRE(p.api.destroy_qp(p.qp[1]) == 0);
  p.qp[1] = nullptr;
  REQUIRE(p.write(0, 0, 8, 0, false, 0, false) == 0);
  auto tx = p.poll(0);
  REQUIRE(tx.size() == 1);  // an error completes even unsignaled
  CHECK(tx[0].status == IBV_WC_RETRY_EXC_ERR);
  // The destructor's destroy_qp(nullptr) is refused with EINVAL; nothing else to undo.
}

TEST_CASE("a QP in ERR flushes its posted receives") {
  raw_pair p;
  p.connect();
  REQUIRE(p.post_recv(1, 9) == 0);
  verbs_double::fabric::instance().force_error(p.qp[1]->qp_num);
  auto rx = p.poll(1);
  REQUIRE(rx.size() == 1);
  CHECK(rx[0].wr_id == 9);
  CHECK(rx[0].status == IBV_WC_WR_FLUSH_ERR);
}
