// tests/verbs/verbs_double.hpp — an in-process test double of InfiniBand verbs with reliable-connected
// (RC) semantics, served through a collcomm::transport::verbs_api table, so net<ibverbs> runs its
// real code on machines without an RDMA device.
//
// One `fabric` per process holds simulated devices (ports with LID, GID, link layer, state, MTU),
// contexts, protection domains, memory regions, completion queues and queue pairs; any number of
// threads (ranks) use it at once, serialized by one lock. What it checks, as real providers do:
//
// - QP state machine: RESET → INIT → RTR → RTS, any → RESET / ERR; a modify from the wrong state,
//   or whose mask lacks an attribute its transition requires (or carries one it does not allow),
//   fails with EINVAL. RoCE ports (link layer Ethernet) need a GRH (is_global) in RTR; InfiniBand
//   ones a non-zero DLID.
// - Work requests: post_send needs RTS, post_recv INIT or later; more than max_send_wr / max_recv_wr
//   outstanding fails with ENOMEM. A send-queue entry stays outstanding until its completion, or a
//   later signaled one's, has been polled.
// - Every access checks keys: the lkey of each SGE (same PD, in range) and the rkey of the target
//   (same PD as the target QP, REMOTE_WRITE on the region and on the QP, in range). A failure
//   completes the work request with IBV_WC_LOC_PROT_ERR / IBV_WC_REM_ACCESS_ERR and moves the QP to
//   ERR, which flushes its other work requests with IBV_WC_WR_FLUSH_ERR.
// - Routing: the target QP is found by dest_qp_num and must be connected back, be reached by the
//   address vector (DLID = its port's LID on InfiniBand, DGID = its GID on RoCE), and expect the
//   sender's PSN. A target that is missing (destroyed, its device gone) completes the work request
//   with IBV_WC_RETRY_EXC_ERR; one not yet in RTR is retried until `retry_window` runs out.
// - RDMA WRITE WITH IMM consumes a posted receive at the target: its completion
//   (IBV_WC_RECV_RDMA_WITH_IMM) carries imm_data as posted (network byte order) and byte_len. None
//   posted: receiver not ready (RNR). With `rnr_fatal` (the default, for tests: a sender that
//   overruns its receiver is an error) the sender's work request completes with
//   IBV_WC_RNR_RETRY_EXC_ERR at once; otherwise it is retried, rnr_retry times (7: forever).
// - A completion queue that would hold more than its depth overflows: poll_cq returns -1 from then
//   on and the QPs using it move to ERR.
//
// Work requests execute in order per QP, data copied by the thread that posts or that next polls
// any completion queue (a step of the whole fabric). Fault knobs: fail_next_reg_mr, force_error,
// force_error_device, inject_completion_error, kill_device; counters: rnr_events, cq_overflows.
#pragma once

#include <collcomm/transport/ibverbs/api.hpp>

#include <infiniband/verbs.h>

#include <arpa/inet.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace verbs_double {

struct device_config {
  std::string name;
  std::uint8_t link_layer = IBV_LINK_LAYER_INFINIBAND;
  std::uint16_t lid = 0;
  ibv_gid gid{};
  ibv_port_state state = IBV_PORT_ACTIVE;
  ibv_mtu mtu = IBV_MTU_4096;
  int ports = 1;  // every port shares lid/gid/state here; port p's LID is lid + p − 1
};

// n devices "mockdev<i>" with one ACTIVE port each, LID i + 1, GID fe80::<i+1>.
inline std::vector<device_config> uniform_devices(int n, std::uint8_t link_layer = IBV_LINK_LAYER_INFINIBAND) {
  std::vector<device_config> v;
  for (int i = 0; i < n; ++i) {
    device_config d;
    d.name = "mockdev" + std::to_string(i);
    d.link_layer = link_layer;
    d.lid = static_cast<std::uint16_t>(i + 1);
    d.gid.raw[0] = 0xfe;
    d.gid.raw[1] = 0x80;
    d.gid.raw[14] = static_cast<std::uint8_t>((i + 1) >> 8);
    d.gid.raw[15] = static_cast<std::uint8_t>(i + 1);
    v.push_back(d);
  }
  return v;
}

class fabric {
 public:
  static fabric& instance() {
    static fabric f;
    return f;
  }

  // Forgets every object (callers must have destroyed theirs) and installs the given devices.
  void reset(std::vector<device_config> devices) {
    std::lock_guard lk(mu_);
    devices_.clear();
    contexts_.clear();
    pds_.clear();
    mrs_.clear();
    cqs_.clear();
    qps_.clear();
    by_qpn_.clear();
    by_lkey_.clear();
    by_rkey_.clear();
    for (auto& c : devices) {
      auto d = std::make_unique<device_state>();
      d->config = c;
      std::snprintf(d->dev.name, sizeof(d->dev.name), "%s", c.name.c_str());
      d->dev.node_type = IBV_NODE_CA;
      d->dev.transport_type = IBV_TRANSPORT_IB;
      devices_.push_back(std::move(d));
    }
    fail_reg_mr_ = 0;
    rnr_fatal = true;
    retry_window = std::chrono::milliseconds(2000);
    rnr_events = 0;
    cq_overflows = 0;
  }

  // Knobs (set between runs, or under the fabric's own serialization: they are read under the lock).
  std::atomic<bool> rnr_fatal{true};
  std::chrono::milliseconds retry_window{2000};
  std::atomic<std::uint64_t> rnr_events{0};
  std::atomic<std::uint64_t> cq_overflows{0};

  // The next `count` registrations fail with errno `err`.
  void fail_next_reg_mr(int count, int err = ENOMEM) {
    std::lock_guard lk(mu_);
    fail_reg_mr_ = count;
    fail_reg_mr_errno_ = err;
  }
  // The QP moves to ERR now (its work requests flush).
  void force_error(std::uint32_t qpn) {
    std::lock_guard lk(mu_);
    if (auto* q = find_qpn(qpn)) to_error(*q);
  }
  // Every QP of device `index` moves to ERR now (as force_error on each).
  void force_error_device(int index) {
    std::lock_guard lk(mu_);
    device_state* d = devices_.at(static_cast<std::size_t>(index)).get();
    for (auto& [qpn, q] : by_qpn_)
      if (device_of_qp(*q) == d) to_error(*q);
  }
  // The next send work request this QP executes completes with `status`, and the QP moves to ERR.
  void inject_completion_error(std::uint32_t qpn, ibv_wc_status status) {
    std::lock_guard lk(mu_);
    if (auto* q = find_qpn(qpn)) q->inject = status;
  }
  // The device's owner vanished: nothing reaches its QPs any more (work requests towards them
  // complete with IBV_WC_RETRY_EXC_ERR). Its objects stay valid for their owner to destroy.
  void kill_device(int index) {
    std::lock_guard lk(mu_);
    devices_.at(static_cast<std::size_t>(index))->vanished = true;
  }
  std::size_t live_objects() {
    std::lock_guard lk(mu_);
    return contexts_.size() + pds_.size() + mrs_.size() + cqs_.size() + qps_.size();
  }

  collcomm::transport::verbs_api api() const {
    collcomm::transport::verbs_api a;
    a.get_device_list = &get_device_list;
    a.free_device_list = &free_device_list;
    a.get_device_name = &get_device_name;
    a.open_device = &open_device;
    a.close_device = &close_device;
    a.query_device = &query_device;
    a.query_port = &query_port;
    a.query_gid = &query_gid;
    a.alloc_pd = &alloc_pd;
    a.dealloc_pd = &dealloc_pd;
    a.create_cq = &create_cq;
    a.destroy_cq = &destroy_cq;
    a.create_qp = &create_qp;
    a.destroy_qp = &destroy_qp;
    a.modify_qp = &modify_qp;
    a.reg_mr_iova2 = &reg_mr_iova2;
    a.reg_dmabuf_mr = &reg_dmabuf_mr;
    a.dereg_mr = &dereg_mr;
    a.post_send = &post_send;
    a.post_recv = &post_recv;
    a.poll_cq = &poll_cq;
    a.wc_status_str = &wc_status_str;
    return a;
  }

  static const char* wc_status_str(ibv_wc_status s) {
    switch (s) {
      case IBV_WC_SUCCESS: return "success";
      case IBV_WC_LOC_LEN_ERR: return "local length error";
      case IBV_WC_LOC_QP_OP_ERR: return "local QP operation error";
      case IBV_WC_LOC_PROT_ERR: return "local protection error";
      case IBV_WC_WR_FLUSH_ERR: return "Work Request Flushed Error";
      case IBV_WC_REM_INV_REQ_ERR: return "invalid request error";
      case IBV_WC_REM_ACCESS_ERR: return "remote access error";
      case IBV_WC_REM_OP_ERR: return "remote operation error";
      case IBV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded";
      case IBV_WC_RNR_RETRY_EXC_ERR: return "RNR retry counter exceeded";
      case IBV_WC_FATAL_ERR: return "fatal error";
      case IBV_WC_GENERAL_ERR: return "general error";
      default: return "other error";
    }
  }

 private:
  struct device_state {
    ibv_device dev{};
    device_config config;
    bool vanished = false;
  };
  struct context_state {
    ibv_context ctx{};
    device_state* device = nullptr;
  };
  struct pd_state {
    ibv_pd pd{};
  };
  struct mr_state {
    ibv_mr mr{};
    std::uint64_t iova = 0;
    unsigned access = 0;
  };
  struct cq_entry {
    ibv_wc wc{};
    std::uint32_t qpn = 0;
    bool send = false;
    std::uint64_t seq = 0;
  };
  struct cq_state {
    ibv_cq cq{};
    int depth = 0;
    std::deque<cq_entry> entries;
    bool overflowed = false;
  };
  struct send_item {
    std::uint64_t wr_id = 0;
    std::uint64_t seq = 0;
    ibv_wr_opcode opcode{};
    unsigned flags = 0;
    std::uint32_t imm = 0;  // as posted: network byte order
    std::uint64_t remote_addr = 0;
    std::uint32_t rkey = 0;
    std::vector<ibv_sge> sges;
    std::optional<std::chrono::steady_clock::time_point> first_try;
    int rnr_tries = 0;
  };
  struct qp_state {
    ibv_qp qp{};
    ibv_qp_cap cap{};
    bool sig_all = false;
    std::uint8_t port = 0;
    unsigned access = 0;
    ibv_mtu mtu = IBV_MTU_256;
    std::uint32_t dest_qpn = 0;
    std::uint32_t rq_psn = 0;
    std::uint32_t sq_psn = 0;
    ibv_ah_attr ah{};
    std::uint8_t rnr_retry = 0;
    std::deque<send_item> sq;      // posted, not executed
    std::uint64_t sq_posted = 0;   // send work requests posted
    std::uint64_t sq_retired = 0;  // ... whose completion (or a later one's) was polled
    std::deque<std::uint64_t> rq;  // posted receives (wr_id)
    std::optional<ibv_wc_status> inject;
  };

  static int fail_with(int e) {
    errno = e;
    return e;
  }

  device_state* device_of(ibv_device* d) {
    for (auto& x : devices_)
      if (&x->dev == d) return x.get();
    return nullptr;
  }
  template <class Map, class Key>
  static auto lookup(Map& m, Key k) {
    auto it = m.find(k);
    if constexpr (std::is_pointer_v<typename Map::mapped_type>)
      return it == m.end() ? nullptr : it->second;
    else
      return it == m.end() ? nullptr : it->second.get();
  }
  qp_state* find_qpn(std::uint32_t qpn) {
    auto it = by_qpn_.find(qpn);
    return it == by_qpn_.end() ? nullptr : it->second;
  }
  device_state* device_of_qp(const qp_state& q) { return lookup(contexts_, q.qp.context)->device; }
  const device_config& config_of_qp(const qp_state& q) { return device_of_qp(q)->config; }

  // ---- completion queues -------------------------------------------------------------------------
  void push(ibv_cq* cqp, cq_entry e) {
    cq_state* cq = lookup(cqs_, cqp);
    if (cq == nullptr || cq->overflowed) return;
    if (static_cast<int>(cq->entries.size()) >= cq->depth) {
      cq->overflowed = true;
      ++cq_overflows;
      for (auto& [p, q] : qps_)
        if (q->qp.send_cq == cqp || q->qp.recv_cq == cqp) to_error(*q);
      return;
    }
    cq->entries.push_back(e);
  }
  void complete_send(qp_state& q, const send_item& it, ibv_wc_status st, std::uint32_t bytes) {
    if (st == IBV_WC_SUCCESS && !(it.flags & IBV_SEND_SIGNALED) && !q.sig_all) return;
    cq_entry e;
    e.wc.wr_id = it.wr_id;
    e.wc.status = st;
    e.wc.opcode = it.opcode == IBV_WR_SEND ? IBV_WC_SEND : IBV_WC_RDMA_WRITE;
    e.wc.byte_len = bytes;
    e.wc.qp_num = q.qp.qp_num;
    e.qpn = q.qp.qp_num;
    e.send = true;
    e.seq = it.seq;
    push(q.qp.send_cq, e);
  }
  void to_error(qp_state& q) {
    if (q.qp.state == IBV_QPS_ERR) return;
    q.qp.state = IBV_QPS_ERR;
    while (!q.sq.empty()) {
      complete_send(q, q.sq.front(), IBV_WC_WR_FLUSH_ERR, 0);
      q.sq.pop_front();
    }
    while (!q.rq.empty()) {
      cq_entry e;
      e.wc.wr_id = q.rq.front();
      e.wc.status = IBV_WC_WR_FLUSH_ERR;
      e.wc.opcode = IBV_WC_RECV;
      e.wc.qp_num = q.qp.qp_num;
      e.qpn = q.qp.qp_num;
      push(q.qp.recv_cq, e);
      q.rq.pop_front();
    }
  }
  void fail_head(qp_state& q, ibv_wc_status st) {
    send_item it = std::move(q.sq.front());
    q.sq.pop_front();
    complete_send(q, it, st, 0);
    to_error(q);
  }

  // ---- execution ---------------------------------------------------------------------------------
  // Host address of [addr, addr + len) in region m (addresses in the region's IOVA space), or null.
  static std::byte* translate(const mr_state& m, std::uint64_t addr, std::uint64_t len) {
    if (addr < m.iova || len > m.mr.length || addr - m.iova > m.mr.length - len) return nullptr;
    return static_cast<std::byte*>(m.mr.addr) + (addr - m.iova);
  }
  bool routes_to(const qp_state& a, const qp_state& b) {
    const device_config& bc = config_of_qp(b);
    if (bc.link_layer == IBV_LINK_LAYER_ETHERNET)
      return a.ah.is_global && std::memcmp(a.ah.grh.dgid.raw, bc.gid.raw, 16) == 0;
    if (a.ah.is_global && std::memcmp(a.ah.grh.dgid.raw, bc.gid.raw, 16) != 0) return false;
    return a.ah.dlid == bc.lid + b.port - 1;
  }

  // Executes the head of q's send queue; false where it has to wait (target not ready yet).
  bool execute_head(qp_state& q) {
    send_item& it = q.sq.front();
    if (q.inject) {
      ibv_wc_status st = *q.inject;
      q.inject.reset();
      fail_head(q, st);
      return true;
    }
    // Local keys first: the NIC reads the source before anything goes on the wire.
    std::uint64_t total = 0;
    std::vector<std::pair<const std::byte*, std::uint32_t>> src;
    for (const ibv_sge& s : it.sges) {
      mr_state* m = lookup(by_lkey_, s.lkey);
      const std::byte* p = m != nullptr && m->mr.pd == q.qp.pd ? translate(*m, s.addr, s.length) : nullptr;
      if (p == nullptr && s.length > 0) {
        fail_head(q, IBV_WC_LOC_PROT_ERR);
        return true;
      }
      src.emplace_back(p, s.length);
      total += s.length;
    }
    qp_state* b = find_qpn(q.dest_qpn);
    bool gone = b == nullptr || device_of_qp(*b)->vanished || b->qp.state == IBV_QPS_ERR ||
                (b->qp.state >= IBV_QPS_RTR && (b->dest_qpn != q.qp.qp_num || b->rq_psn != q.sq_psn)) || !routes_to(q, *b);
    if (gone) {
      fail_head(q, IBV_WC_RETRY_EXC_ERR);
      return true;
    }
    if (b->qp.state != IBV_QPS_RTR && b->qp.state != IBV_QPS_RTS) {
      // Packets to a QP not yet connected are dropped; the sender retries until its timeout.
      auto now = std::chrono::steady_clock::now();
      if (!it.first_try) it.first_try = now;
      if (now - *it.first_try > retry_window) fail_head(q, IBV_WC_RETRY_EXC_ERR);
      return now - *it.first_try > retry_window;
    }
    std::byte* dst = nullptr;
    if (it.opcode == IBV_WR_RDMA_WRITE || it.opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
      mr_state* m = lookup(by_rkey_, it.rkey);
      bool ok = m != nullptr && m->mr.pd == b->qp.pd && (m->access & IBV_ACCESS_REMOTE_WRITE) &&
                (b->access & IBV_ACCESS_REMOTE_WRITE);
      dst = ok ? translate(*m, it.remote_addr, total) : nullptr;
      if (dst == nullptr && (total > 0 || !ok)) {
        fail_head(q, IBV_WC_REM_ACCESS_ERR);
        return true;
      }
    }
    if (it.opcode == IBV_WR_RDMA_WRITE_WITH_IMM && b->rq.empty()) {
      ++rnr_events;
      ++it.rnr_tries;
      if (rnr_fatal || (q.rnr_retry != 7 && it.rnr_tries > q.rnr_retry)) {
        fail_head(q, IBV_WC_RNR_RETRY_EXC_ERR);
        return true;
      }
      return false;
    }
    // Deliver: data, then the receive completion, then the sender's.
    std::uint64_t off = 0;
    for (auto& [p, n] : src) {
      if (n == 8 && reinterpret_cast<std::uintptr_t>(dst + off) % 8 == 0) {
        std::uint64_t v;
        std::memcpy(&v, p, 8);
        std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(dst + off)).store(v, std::memory_order_release);
      } else if (n > 0) {
        std::memcpy(dst + off, p, n);
      }
      off += n;
    }
    if (it.opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
      cq_entry e;
      e.wc.wr_id = b->rq.front();
      b->rq.pop_front();
      e.wc.status = IBV_WC_SUCCESS;
      e.wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
      e.wc.wc_flags = IBV_WC_WITH_IMM;
      e.wc.imm_data = it.imm;
      e.wc.byte_len = static_cast<std::uint32_t>(total);
      e.wc.qp_num = b->qp.qp_num;
      e.wc.src_qp = q.qp.qp_num;
      e.qpn = b->qp.qp_num;
      push(b->qp.recv_cq, e);
    }
    send_item done = std::move(it);
    q.sq.pop_front();
    complete_send(q, done, IBV_WC_SUCCESS, static_cast<std::uint32_t>(total));
    return true;
  }
  void run(qp_state& q) {
    while (!q.sq.empty() && q.qp.state == IBV_QPS_RTS)
      if (!execute_head(q)) break;
  }
  void step() {
    for (auto& [p, q] : qps_) run(*q);
  }

  // ---- the verbs -------------------------------------------------------------------------------
  static ibv_device** get_device_list(int* n) {
    auto& f = instance();
    std::lock_guard lk(f.mu_);
    auto** list = new ibv_device*[f.devices_.size() + 1];
    for (std::size_t i = 0; i < f.devices_.size(); ++i) list[i] = &f.devices_[i]->dev;
    list[f.devices_.size()] = nullptr;
    if (n != nullptr) *n = static_cast<int>(f.devices_.size());
    return list;
  }
  static void free_device_list(ibv_device** list) { delete[] list; }
  static const char* get_device_name(ibv_device* d) { return d->name; }
  static ibv_context* open_device(ibv_device* d) {
    auto& f = instance();
    std::lock_guard lk(f.mu_);
    device_state* ds = f.device_of(d);
    if (ds == nullptr) {
      errno = ENODEV;
      return nullptr;
    }
    auto c = std::make_unique<context_state>();
    c->ctx.device = d;
    c->device = ds;
    ibv_context* p = &c->ctx;
    f.contexts_[p] = std::move(c);
    return p;
  }
  static int close_device(ibv_context* c) {
    auto& f = instance();
    std::lock_guard lk(f.mu_);
    if (f.contexts_.erase(c) == 0) return fail_with(EINVAL);
    return 0;
  }
  static int query_device(ibv_context* c, ibv_device_attr* a) {
    auto& f = instance();
    std::lock_guard lk(f.mu_);
    context_state* cs = lookup(f.contexts_, c);
    if (cs == nullptr) return fail_with(EINVAL);
    *a = ibv_device_attr{};
    std::snprintf(a->fw_ver, sizeof(a->fw_ver), "double");
    a->max_qp = 1 << 16;
    a->max_qp_wr = 1 << 14;
    a->max_sge = 16;
    a->max_cq = 1 << 16;
    a->max_cqe = 1 << 20;
    a->max_mr = 1 << 20;
    a->max_mr_size = ~std::uint64_t{0};
    a->max_pd = 1 << 16;
    a->max_qp_rd_atom = 16;
    a->max_qp_init_rd_atom = 16;
    a->phys_port_cnt = static_cast<std::uint8_t>(cs->device->config.ports);
    return 0;
  }
  static int query_port(ibv_context* c, std::uint8_t port, ibv_port_attr* a) {
    auto& f = instance();
    std::lock_guard lk(f.mu_);
    context_state* cs = lookup(f.contexts_, c);
    if (cs == nullptr || port < 1 || port > cs->device->config.ports) return fail_with(EINVAL);
    const device_config& d = cs->device->config;
    *a = ibv_port_attr{};
    a->state = d.state;
    a->max_mtu = d.mtu;
    a->active_mtu = d.mtu;
    a->gid_tbl_len = 1;
    a->pkey_tbl_len = 1;
    a->max_msg_sz = 1u << 31;
    a->lid = d.link_layer == IBV_LINK_LAYER_ETHERNET ? 0 : static_cast<std::uint16_t>(d.lid + port - 1);
    a->link_layer = d.link_layer;
    return 0;
  }
  static int query_gid(ibv_context* c, std::uint8_t port, int index, ibv_gid* g) {
    auto& f = instance();
    std::lock_guard lk(f.mu_);
    context_state* cs = lookup(f.contexts_, c);
    if (cs == nullptr || port < 1 || port > cs->device->config.ports || index != 0) return fail_with(EINVAL);
    *g = cs->device->config.gid;
    return 0;
  }
  static ibv_pd* alloc_pd(ibv_context* c) {
    auto& f = instance();
    std::lock_guard lk(f.mu_);
    if (lookup(f.contexts_, c) == nullptr) {
      errno = EINVAL;
      return nullptr;
    }
    auto p = std::make_unique<pd_state>();
    p->pd.context = c;
    p->pd.handle = f.next_handle_++;
    ibv_pd* r = &p->pd;
    f.pds_[r] = std::move(p);
    return r;
  }
  static int dealloc_pd(ibv_pd* pd) {
    auto& f = instance();
    std::lock_guard lk(f.mu_);
    if (lookup(f.pds_, pd) == nullptr) return fail_with(EINVAL);
    for (auto& [k, m] : f.mrs_)
      if (m->mr.pd == pd) return fail_with(EBUSY);
    for (auto& [k, q] : f.qps_)
      if (q->qp.pd == pd) return fail_with(EBUSY);
    f.pds_.erase(pd);
    return 0;
  }
  static ibv_cq* create_cq(ibv_context* c, int cqe, void* user, ibv_comp_channel*, int) {
    auto& f = instance();
    std::lock_guard lk(f.mu_);
    if (lookup(f.contexts_, c) == nullptr || cqe < 1 || cqe > (1 << 20)) {
      errno = EINVAL;
      return nullptr;
    }
    auto q = std::make_unique<cq_state>();
    q->cq.context = c;
    q->cq.cq_context = user;
    q->cq.cqe = cqe;
    q->depth = cqe;
    ibv_cq* r = &q->cq;
    f.cqs_[r] = std::move(q);
    return r;
  }
  static int destroy_cq(ibv_cq* cq) {
    auto& f = instance();
    std::lock_guard lk(f.mu_);
    if (lookup(f.cqs_, cq) == nullptr) return fail_with(EINVAL);
    for (auto& [k, q] : f.qps_)
      if (q->qp.send_cq == cq || q->qp.recv_cq == cq) return fail_with(EBUSY);
    f.cqs_.erase(cq);
    return 0;
  }
  static ibv_qp* create_qp(ibv_pd* pd, ibv_qp_init_attr* init) {
    auto& f = instance();
    std::lock_guard lk(f.mu_);
    pd_state* ps = lookup(f.pds_, pd);
    if (ps == nullptr || init->qp_type != IBV_QPT_RC || lookup(f.cqs_, init->send_cq) == nullptr ||
        lookup(f.cqs_, init->recv_cq) == nullptr || init->cap.max_send_wr < 1 || init->cap.max_send_wr > (1u << 14) ||
        init->cap.max_recv_wr > (1u << 14) || init->cap.max_send_sge > 16 || init->cap.max_recv_sge > 16 || init->srq != nullptr) {
      errno = EINVAL;
      return nullptr;
    }
    auto q = std::make_unique<qp_state>();
    q->qp.context = pd->context;
    q->qp.qp_context = init->qp_context;
    q->qp.pd = pd;
    q->qp.send_cq = init->send_cq;
    q->qp.recv_cq = init->recv_cq;
    q->qp.qp_num = f.next_qpn_++ & 0xffffffu;
    q->qp.state = IBV_QPS_RESET;
    q->qp.qp_type = IBV_QPT_RC;
    q->cap = init->cap;
    q->sig_all = init->sq_sig_all != 0;
    ibv_qp* r = &q->qp;
    f.by_qpn_[r->qp_num] = q.get();
    f.qps_[r] = std::move(q);
    return r;
  }
  static int destroy_qp(ibv_qp* qp) {
    auto& f = instance();
    std::lock_guard lk(f.mu_);
    if (lookup(f.qps_, qp) == nullptr) return fail_with(EINVAL);
    f.by_qpn_.erase(qp->qp_num);
    f.qps_.erase(qp);
    return 0;
  }

  static int modify_qp(ibv_qp* qp, ibv_qp_attr* a, int mask) {
    auto& f = instance();
    std::lock_guard lk(f.mu_);
    qp_state* q = lookup(f.qps_, qp);
    if (q == nullptr || !(mask & IBV_QP_STATE)) return fail_with(EINVAL);
    const ibv_qp_state from = q->qp.state, to = a->qp_state;
    if (to == IBV_QPS_ERR) {
      if (mask != IBV_QP_STATE) return fail_with(EINVAL);
      f.to_error(*q);
      return 0;
    }
    if (to == IBV_QPS_RESET) {
      if (mask != IBV_QP_STATE) return fail_with(EINVAL);
      q->sq.clear();
      q->rq.clear();
      q->sq_posted = q->sq_retired = 0;
      q->qp.state = IBV_QPS_RESET;
      return 0;
    }
    int required = 0, optional = 0;
    if (from == IBV_QPS_RESET && to == IBV_QPS_INIT) {
      required = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
    } else if (from == IBV_QPS_INIT && to == IBV_QPS_INIT) {
      required = IBV_QP_STATE;
      optional = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
    } else if (from == IBV_QPS_INIT && to == IBV_QPS_RTR) {
      required = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                 IBV_QP_MIN_RNR_TIMER;
      optional = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX;
    } else if (from == IBV_QPS_RTR && to == IBV_QPS_RTS) {
      required = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
      optional = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE;
    } else if (from == IBV_QPS_RTS && to == IBV_QPS_RTS) {
      required = IBV_QP_STATE;
      optional = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH | IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE;
    } else {
      return fail_with(EINVAL);  // no such transition from this state
    }
    if ((mask & required) != required || (mask & ~(required | optional)) != 0) return fail_with(EINVAL);

    const device_config& dev = f.config_of_qp(*q);
    if ((mask & IBV_QP_PORT) && (a->port_num < 1 || a->port_num > dev.ports)) return fail_with(EINVAL);
    if ((mask & IBV_QP_PKEY_INDEX) && a->pkey_index != 0) return fail_with(EINVAL);
    if ((mask & IBV_QP_PATH_MTU) && (a->path_mtu < IBV_MTU_256 || a->path_mtu > dev.mtu)) return fail_with(EINVAL);
    if ((mask & IBV_QP_AV)) {
      const ibv_ah_attr& ah = a->ah_attr;
      if (ah.port_num != q->port) return fail_with(EINVAL);
      if (dev.link_layer == IBV_LINK_LAYER_ETHERNET && (!ah.is_global || ah.grh.sgid_index != 0 || ah.grh.hop_limit == 0))
        return fail_with(EINVAL);  // RoCE: the GRH is mandatory
      if (dev.link_layer == IBV_LINK_LAYER_INFINIBAND && !ah.is_global && ah.dlid == 0) return fail_with(EINVAL);
    }
    if ((mask & IBV_QP_DEST_QPN) && a->dest_qp_num > 0xffffffu) return fail_with(EINVAL);
    if ((mask & IBV_QP_RQ_PSN) && a->rq_psn > 0xffffffu) return fail_with(EINVAL);
    if ((mask & IBV_QP_SQ_PSN) && a->sq_psn > 0xffffffu) return fail_with(EINVAL);
    if ((mask & IBV_QP_TIMEOUT) && a->timeout > 31) return fail_with(EINVAL);
    if ((mask & IBV_QP_RETRY_CNT) && a->retry_cnt > 7) return fail_with(EINVAL);
    if ((mask & IBV_QP_RNR_RETRY) && a->rnr_retry > 7) return fail_with(EINVAL);
    if ((mask & IBV_QP_MIN_RNR_TIMER) && a->min_rnr_timer > 31) return fail_with(EINVAL);
    if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a->max_rd_atomic > 16) return fail_with(EINVAL);
    if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a->max_dest_rd_atomic > 16) return fail_with(EINVAL);
    if ((mask & IBV_QP_ACCESS_FLAGS) &&
        (a->qp_access_flags & ~unsigned(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                         IBV_ACCESS_REMOTE_ATOMIC)) != 0)
      return fail_with(EINVAL);

    if (mask & IBV_QP_PORT) q->port = a->port_num;
    if (mask & IBV_QP_ACCESS_FLAGS) q->access = a->qp_access_flags;
    if (mask & IBV_QP_PATH_MTU) q->mtu = a->path_mtu;
    if (mask & IBV_QP_DEST_QPN) q->dest_qpn = a->dest_qp_num;
    if (mask & IBV_QP_RQ_PSN) q->rq_psn = a->rq_psn;
    if (mask & IBV_QP_SQ_PSN) q->sq_psn = a->sq_psn;
    if (mask & IBV_QP_AV) q->ah = a->ah_attr;
    if (mask & IBV_QP_RNR_RETRY) q->rnr_retry = a->rnr_retry;
    q->qp.state = to;
    return 0;
  }

  static ibv_mr* reg_mr_iova2(ibv_pd* pd, void* addr, std::size_t length, std::uint64_t iova, unsigned access) {
    auto& f = instance();
    std::lock_guard lk(f.mu_);
    if (f.fail_reg_mr_ > 0) {
      --f.fail_reg_mr_;
      errno = f.fail_reg_mr_errno_;
      return nullptr;
    }
    // Remote write needs local write, as on real devices.
    if (lookup(f.pds_, pd) == nullptr || addr == nullptr || length == 0 ||
        ((access & IBV_ACCESS_REMOTE_WRITE) && !(access & IBV_ACCESS_LOCAL_WRITE))) {
      errno = EINVAL;
      return nullptr;
    }
    auto m = std::make_unique<mr_state>();
    m->mr.context = pd->context;
    m->mr.pd = pd;
    m->mr.addr = addr;
    m->mr.length = length;
    m->mr.handle = f.next_handle_++;
    // Distinct lkey and rkey, so a key used on the wrong side fails.
    m->mr.lkey = (f.next_key_ << 8) | 0x11u;
    m->mr.rkey = (f.next_key_ << 8) | 0x22u;
    ++f.next_key_;
    m->iova = iova;
    m->access = access;
    ibv_mr* r = &m->mr;
    f.by_lkey_[r->lkey] = m.get();
    f.by_rkey_[r->rkey] = m.get();
    f.mrs_[r] = std::move(m);
    return r;
  }
  static ibv_mr* reg_dmabuf_mr(ibv_pd*, std::uint64_t, std::size_t, std::uint64_t, int, int) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  static int dereg_mr(ibv_mr* mr) {
    auto& f = instance();
    std::lock_guard lk(f.mu_);
    if (lookup(f.mrs_, mr) == nullptr) return fail_with(EINVAL);
    f.by_lkey_.erase(mr->lkey);
    f.by_rkey_.erase(mr->rkey);
    f.mrs_.erase(mr);
    return 0;
  }

  static int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
    auto& f = instance();
    std::lock_guard lk(f.mu_);
    qp_state* q = lookup(f.qps_, qp);
    for (; wr != nullptr; wr = wr->next) {
      int e = 0;
      if (q == nullptr || (q->qp.state != IBV_QPS_RTS && q->qp.state != IBV_QPS_ERR))
        e = EINVAL;
      else if (q->sq_posted - q->sq_retired >= q->cap.max_send_wr)
        e = ENOMEM;
      else if (wr->num_sge < 0 || static_cast<unsigned>(wr->num_sge) > q->cap.max_send_sge)
        e = EINVAL;
      else if (wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM)
        e = EINVAL;  // what net<ibverbs> uses
      if (e != 0) {
        if (bad != nullptr) *bad = wr;
        return fail_with(e);
      }
      send_item it;
      it.wr_id = wr->wr_id;
      it.seq = q->sq_posted++;
      it.opcode = wr->opcode;
      it.flags = wr->send_flags;
      it.imm = wr->imm_data;
      it.remote_addr = wr->wr.rdma.remote_addr;
      it.rkey = wr->wr.rdma.rkey;
      it.sges.assign(wr->sg_list, wr->sg_list + wr->num_sge);
      if (q->qp.state == IBV_QPS_ERR) {
        f.complete_send(*q, it, IBV_WC_WR_FLUSH_ERR, 0);
        continue;
      }
      q->sq.push_back(std::move(it));
    }
    if (q != nullptr) f.run(*q);
    return 0;
  }
  static int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
    auto& f = instance();
    std::lock_guard lk(f.mu_);
    qp_state* q = lookup(f.qps_, qp);
    for (; wr != nullptr; wr = wr->next) {
      int e = 0;
      if (q == nullptr || q->qp.state == IBV_QPS_RESET)
        e = EINVAL;
      else if (q->rq.size() >= q->cap.max_recv_wr)
        e = ENOMEM;
      else if (wr->num_sge < 0 || static_cast<unsigned>(wr->num_sge) > q->cap.max_recv_sge)
        e = EINVAL;
      if (e != 0) {
        if (bad != nullptr) *bad = wr;
        return fail_with(e);
      }
      if (q->qp.state == IBV_QPS_ERR) {
        cq_entry ce;
        ce.wc.wr_id = wr->wr_id;
        ce.wc.status = IBV_WC_WR_FLUSH_ERR;
        ce.wc.opcode = IBV_WC_RECV;
        ce.wc.qp_num = q->qp.qp_num;
        ce.qpn = q->qp.qp_num;
        f.push(q->qp.recv_cq, ce);
        continue;
      }
      q->rq.push_back(wr->wr_id);
    }
    return 0;
  }
  static int poll_cq(ibv_cq* cqp, int n, ibv_wc* wc) {
    auto& f = instance();
    std::lock_guard lk(f.mu_);
    f.step();
    cq_state* cq = lookup(f.cqs_, cqp);
    if (cq == nullptr || n < 0) return -EINVAL;
    if (cq->overflowed) return -EOVERFLOW;
    int k = 0;
    for (; k < n && !cq->entries.empty(); ++k) {
      cq_entry e = cq->entries.front();
      cq->entries.pop_front();
      wc[k] = e.wc;
      if (e.send)
        if (qp_state* q = f.find_qpn(e.qpn)) q->sq_retired = std::max(q->sq_retired, e.seq + 1);
    }
    return k;
  }

  std::mutex mu_;
  std::vector<std::unique_ptr<device_state>> devices_;
  std::map<ibv_context*, std::unique_ptr<context_state>> contexts_;
  std::map<ibv_pd*, std::unique_ptr<pd_state>> pds_;
  std::map<ibv_mr*, std::unique_ptr<mr_state>> mrs_;
  std::map<ibv_cq*, std::unique_ptr<cq_state>> cqs_;
  std::map<ibv_qp*, std::unique_ptr<qp_state>> qps_;
  std::map<std::uint32_t, qp_state*> by_qpn_;
  std::map<std::uint32_t, mr_state*> by_lkey_;
  std::map<std::uint32_t, mr_state*> by_rkey_;
  std::uint32_t next_qpn_ = 0x100;
  std::uint32_t next_key_ = 1;
  std::uint32_t next_handle_ = 1;
  int fail_reg_mr_ = 0;
  int fail_reg_mr_errno_ = ENOMEM;
};

}  // namespace verbs_double
