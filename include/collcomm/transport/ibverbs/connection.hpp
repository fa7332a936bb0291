// collcomm/transport/ibverbs/connection.hpp — the InfiniBand / RoCE side of net<ibverbs>: a rank's
// device, port and protection domain (`ibverbs_context`), and one reliable-connected queue pair
// per (peer, channel) carrying FIFO messages through slots (`ibverbs_connection`).
//
// Set-up, per rank:
//
//     const transport::verbs_api& api = transport::load_verbs();       // throws without rdma-core
//     transport::ibverbs_context ctx{api, rank};                      // COLLCOMM_IB_HCA or the first ACTIVE port
//     transport::ibverbs_connection conn{ctx, peer, channel, {.slots = 4, .slot_bytes = 1 << 20}};
//     blob = conn.local_info();                  // trivially copyable: all_gather it, or send it on a socket
//     conn.connect(info_the_peer_gave_for_us);   // RESET → INIT → RTR → RTS
//
// Data path (one thread drives a connection; calls never block):
//
//     sender:   if (conn.can_send(m)) { fill conn.send_buffer(m); conn.post(m, bytes); ++m; }
//     receiver: if (conn.arrived(r)) { read conn.recv_buffer(r)[0, conn.recv_bytes(r)); conn.release(r); ++r; }
//     both:     conn.progress();   // as often as the caller waits on either
//
// Messages m = 0, 1, 2, ... are delivered in order. Message m travels from the sender's slot m % slots
// (registered memory: the connection's own, or the caller's — pinned host memory, or GPU memory
// through a dmabuf) to the receiver's slot m % slots as one RDMA WRITE WITH IMMEDIATE, whose
// immediate carries m's low 8 bits and the byte count, so messages are at most 2^24 − 1 bytes. A
// tagged connection's messages carry a 64-bit tag besides (the GPU proxy's size words): an RDMA
// WRITE of it into the peer's tag ring just before the message's, which the same queue pair lands
// first. The
// receiver keeps one receive work request posted per free slot: a message that arrives at a slot
// not yet released finds no receive (RNR), so a sender cannot overrun the receiver unseen. release()
// reposts the receive and then returns the slot to the sender by an RDMA WRITE of the number of
// messages consumed into the sender's credit word (one credit write in flight; later releases
// coalesce into the next). can_send(m) is `m − credits < slots` and a free send-queue entry.
//
// Notices: besides messages, one side can tell the other that it leaves (bye) or gives up (abort,
// with a text of at most notice_text_max bytes): post_notice() writes the text into the peer's
// notice block and then the notice's kind word, two RDMA WRITEs on the same queue pair, so they
// land after every message posted before them and the text before the word. The receiver reads
// the word (peer_notice()) whenever it likes; a bye it reads before polling its completion queue
// tells that every message of the peer's is in that poll's completions. The notice block follows
// the credit word's line in the registered receive block, so the exchanged blob needs no field for it.
//
// Errors: every failure throws collcomm::error. A completion with an error status (the peer exited,
// the link went down, a QP moved to the error state and flushed its work requests), a failed poll,
// post or modify: errc::system, with a message naming this rank, the peer rank, the channel and the
// verbs status string. A remote_info that does not match this connection (other peer, other slot
// geometry, other link layer): errc::invalid_argument. A data-path call out of contract (post
// without can_send, release of a message that has not arrived): errc::invalid_usage.
//
// Completion queues: one per connection, sized so it cannot overflow (send depth + slots + 1); the
// context holds what connections share (device, port, PD). A peer that exits is seen when this side
// next writes to it: a message, a credit, or, after `probe_interval` without any completion, a
// 0-byte probe write that progress() posts. The write fails with "transport retry counter exceeded"
// after about 4.1 µs · 2^timeout · (retry_cnt + 1) — some 30 s with timeout 20 on real hardware;
// callers wanting less wait with their own deadline.
//
// Environment: COLLCOMM_IB_HCA ("mlx5_0" or "mlx5_0:1"), COLLCOMM_IB_GID_INDEX (RoCE, default 0),
// COLLCOMM_IB_TC and COLLCOMM_IB_SL (default 0), COLLCOMM_IB_TIMEOUT (default 20).
//
// This folder's rules: see api.hpp.
#pragma once

#include <collcomm/config.hpp>
#include <collcomm/error.hpp>
#include <collcomm/transport/ibverbs/api.hpp>

#include <cuda.h>
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

COLLCOMM_NAMESPACE_BEGIN
namespace transport {

// What one side of a connection tells the other, out of band (bootstrap all_gather, socket). Fixed
// size, trivially copyable, no pointers that mean anything to the sender only: addresses are the
// remote side's virtual addresses for RDMA, keys are rkeys.
struct ibverbs_qp_info {
  static constexpr std::uint32_t magic_value = 0x43434942u;  // "CCIB"
  static constexpr std::uint32_t version_value = 3;
  static constexpr std::uint32_t tagged_flag = 1;

  std::uint32_t magic = 0;
  std::uint32_t version = 0;
  std::int32_t rank = -1;     // the side that made this info
  std::int32_t peer = -1;     // the rank it is meant for
  std::int32_t channel = -1;
  std::uint32_t qpn = 0;      // queue pair number
  std::uint32_t psn = 0;      // first packet sequence number of its send queue (24 bits)
  std::uint16_t lid = 0;      // port LID (InfiniBand)
  std::uint8_t link_layer = 0;  // IBV_LINK_LAYER_INFINIBAND or IBV_LINK_LAYER_ETHERNET (RoCE)
  std::uint8_t mtu = 0;       // ibv_mtu of the port
  std::uint32_t slots = 0;
  std::uint32_t flags = 0;    // tagged_flag: its messages carry tags
  std::uint64_t slot_bytes = 0;
  std::uint8_t gid[16] = {};  // port GID at the chosen index (RoCE routes by it)
  std::uint64_t recv_addr = 0;    // its receive slots: slots × slot_bytes
  std::uint64_t credit_addr = 0;  // its control block: the credit word (the count of its messages we
                                  // consumed), the notice block, the tags
  std::uint32_t rkey = 0;         // rkey of the control block
  std::uint32_t recv_rkey = 0;    // rkey of the receive slots (the control block's where they are its own)
};
static_assert(std::is_trivially_copyable_v<ibverbs_qp_info>);
static_assert(std::has_unique_object_representations_v<ibverbs_qp_info>, "no padding: the blob is all fields");
static_assert(sizeof(ibverbs_qp_info) == 88, "ibverbs_qp_info is exchanged as a fixed-size blob");

struct ibverbs_context_options {
  // "mlx5_0" or "mlx5_0:1". Empty: COLLCOMM_IB_HCA, else the first device with an ACTIVE port.
  std::string hca;
  // GID table index (RoCE). Negative: COLLCOMM_IB_GID_INDEX, else 0.
  int gid_index = -1;
};

// One registered memory region; deregisters on destruction.
class ibverbs_memory {
 public:
  ibverbs_memory() = default;
  ibverbs_memory(const verbs_api* api, ibv_mr* mr) : api_(api), mr_(mr) {}
  ibverbs_memory(ibverbs_memory&& o) noexcept : api_(o.api_), mr_(std::exchange(o.mr_, nullptr)) {}
  ibverbs_memory& operator=(ibverbs_memory&& o) noexcept {
    if (this != &o) {
      reset();
      api_ = o.api_;
      mr_ = std::exchange(o.mr_, nullptr);
    }
    return *this;
  }
  ibverbs_memory(const ibverbs_memory&) = delete;
  ibverbs_memory& operator=(const ibverbs_memory&) = delete;
  ~ibverbs_memory() { reset(); }

  void reset() noexcept {
    if (mr_ != nullptr) api_->dereg_mr(mr_);
    mr_ = nullptr;
  }
  explicit operator bool() const noexcept { return mr_ != nullptr; }
  std::uint32_t lkey() const noexcept { return mr_->lkey; }
  std::uint32_t rkey() const noexcept { return mr_->rkey; }
  ibv_mr* get() const noexcept { return mr_; }

 private:
  const verbs_api* api_ = nullptr;
  ibv_mr* mr_ = nullptr;
};

namespace ibverbs_detail {

inline int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (end == v || *end != '\0' || x < 0 || x > 255)
    detail::fail(errc::invalid_argument, "net<ibverbs>", no_rank,
                 std::string(name) + "='" + v + "' is not a number in [0, 255]");
  return static_cast<int>(x);
}

inline std::string errno_text(int e) { return std::string(std::strerror(e)) + " (errno " + std::to_string(e) + ")"; }

inline const char* port_state_name(ibv_port_state s) {
  switch (s) {
    case IBV_PORT_NOP: return "NOP";
    case IBV_PORT_DOWN: return "DOWN";
    case IBV_PORT_INIT: return "INIT";
    case IBV_PORT_ARMED: return "ARMED";
    case IBV_PORT_ACTIVE: return "ACTIVE";
    case IBV_PORT_ACTIVE_DEFER: return "ACTIVE_DEFER";
  }
  return "?";
}

// cuMemGetHandleForAddressRange from the CUDA driver, resolved by dlsym so nothing links libcuda;
// null without a driver (or one older than CUDA 11.7).
using get_handle_fn = CUresult (*)(void*, CUdeviceptr, std::size_t, CUmemRangeHandleType, unsigned long long);
inline get_handle_fn cuda_get_handle_for_address_range() {
  static const get_handle_fn fn = [] {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (lib == nullptr) lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return get_handle_fn{nullptr};
    return reinterpret_cast<get_handle_fn>(dlsym(lib, "cuMemGetHandleForAddressRange"));
  }();
  return fn;
}

// Page-aligned zeroed host memory.
struct host_block {
  std::byte* p = nullptr;
  host_block() = default;
  explicit host_block(std::size_t bytes) {
    std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    std::size_t n = (bytes + page - 1) / page * page;
    p = static_cast<std::byte*>(std::aligned_alloc(page, n == 0 ? page : n));
    if (p == nullptr)
      detail::fail(errc::system, "net<ibverbs>", no_rank, "out of host memory (" + std::to_string(bytes) + " bytes)");
    std::memset(p, 0, n == 0 ? page : n);
  }
  host_block(host_block&& o) noexcept : p(std::exchange(o.p, nullptr)) {}
  host_block& operator=(host_block&& o) noexcept {
    std::swap(p, o.p);
    return *this;
  }
  ~host_block() { std::free(p); }
};

}  // namespace ibverbs_detail

// A rank's RDMA device: the opened device, the chosen port and GID, and one protection domain,
// shared by all of the rank's connections (which must not outlive it).
struct ibverbs_context {
  const verbs_api* api = nullptr;
  int rank = no_rank;
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  std::string device_name;
  std::uint8_t port = 0;
  int gid_index = 0;
  ibv_device_attr device_attr{};
  ibv_port_attr port_attr{};
  ibv_gid gid{};

  ibverbs_context(const verbs_api& verbs, int my_rank, ibverbs_context_options options = {})
      : api(&verbs), rank(my_rank) {
    std::string spec = options.hca;
    if (spec.empty())
      if (const char* e = std::getenv("COLLCOMM_IB_HCA")) spec = e;
    open(spec);
    gid_index = options.gid_index >= 0 ? options.gid_index : ibverbs_detail::env_int("COLLCOMM_IB_GID_INDEX", 0);
    try {
      if (int rc = api->query_gid(ctx, port, gid_index, &gid); rc != 0) {
        if (roce())
          fail(errc::system, "ibv_query_gid(" + device_name + " port " + std::to_string(port) + ", index " +
                                 std::to_string(gid_index) + ") failed: " + ibverbs_detail::errno_text(rc > 0 ? rc : errno) +
                                 "; set COLLCOMM_IB_GID_INDEX to a valid RoCE GID index");
        gid = ibv_gid{};  // InfiniBand routes by LID; the GID is informational
      }
      pd = api->alloc_pd(ctx);
      if (pd == nullptr) fail(errc::system, "ibv_alloc_pd on " + device_name + " failed: " + ibverbs_detail::errno_text(errno));
    } catch (...) {
      api->close_device(ctx);
      throw;
    }
  }
  ibverbs_context(const ibverbs_context&) = delete;
  ibverbs_context& operator=(const ibverbs_context&) = delete;
  ~ibverbs_context() {
    if (pd != nullptr) api->dealloc_pd(pd);
    if (ctx != nullptr) api->close_device(ctx);
  }

  bool roce() const noexcept { return port_attr.link_layer == IBV_LINK_LAYER_ETHERNET; }

  // Registers [ptr, ptr + bytes) for local and remote access. Host memory: ibv_reg_mr (throws
  // errc::system where it fails). GPU memory: a dmabuf of the range from the CUDA driver and
  // ibv_reg_dmabuf_mr; std::nullopt ("not supported": no driver, no dmabuf support in the driver,
  // the library or the NIC) tells the caller to stage through host memory.
  std::optional<ibverbs_memory> register_memory(void* ptr, std::size_t bytes, bool gpu,
                                                unsigned access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                                                  IBV_ACCESS_REMOTE_READ) const {
    if (!gpu) {
      ibv_mr* mr = api->reg_mr(pd, ptr, bytes, access);
      if (mr == nullptr)
        fail(errc::system, "ibv_reg_mr of " + std::to_string(bytes) + " bytes failed: " + ibverbs_detail::errno_text(errno) +
                               " (is the locked-memory limit, ulimit -l, too small?)");
      return ibverbs_memory(api, mr);
    }
    if (api->reg_dmabuf_mr == nullptr) return std::nullopt;
    auto get_handle = ibverbs_detail::cuda_get_handle_for_address_range();
    if (get_handle == nullptr) return std::nullopt;
    // The driver exports page-aligned ranges only; the MR covers exactly [ptr, ptr + bytes).
    auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
    auto addr = reinterpret_cast<std::uintptr_t>(ptr);
    std::uintptr_t base = addr / page * page;
    std::uintptr_t end = (addr + bytes + page - 1) / page * page;
    int fd = -1;
    if (get_handle(&fd, static_cast<CUdeviceptr>(base), end - base, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0) != CUDA_SUCCESS ||
        fd < 0)
      return std::nullopt;
    ibv_mr* mr = api->reg_dmabuf_mr(pd, addr - base, bytes, addr, fd, static_cast<int>(access));
    ::close(fd);  // the MR holds its own reference to the dmabuf
    if (mr == nullptr) return std::nullopt;
    return ibverbs_memory(api, mr);
  }

  [[noreturn]] void fail(errc code, const std::string& msg) const { detail::fail(code, "net<ibverbs>", rank, msg); }

 private:
  void open(const std::string& spec) {
    std::string want_name = spec;
    int want_port = 0;
    if (auto colon = spec.rfind(':'); colon != std::string::npos) {
      want_name = spec.substr(0, colon);
      want_port = std::atoi(spec.c_str() + colon + 1);
      if (want_port <= 0 || want_port > 255)
        fail(errc::invalid_argument, "COLLCOMM_IB_HCA='" + spec + "': the port after ':' must be 1..255");
    }
    int n = 0;
    ibv_device** list = api->get_device_list(&n);
    if (list == nullptr || n == 0) {
      int e = errno;
      if (list != nullptr) api->free_device_list(list);
      fail(errc::system, std::string("no RDMA device found (ibv_get_device_list: ") +
                             (list == nullptr ? ibverbs_detail::errno_text(e) : "empty list") +
                             "); net<ibverbs> needs an InfiniBand or RoCE NIC with its kernel driver loaded");
    }
    std::string seen;
    bool named_found = false;
    std::string named_port_problem;
    for (int i = 0; i < n && ctx == nullptr; ++i) {
      std::string name = api->get_device_name(list[i]);
      seen += (seen.empty() ? "" : ", ") + name;
      if (!want_name.empty() && name != want_name) continue;
      named_found = true;
      ibv_context* c = api->open_device(list[i]);
      if (c == nullptr) {
        if (!want_name.empty()) {
          api->free_device_list(list);
          fail(errc::system, "ibv_open_device(" + name + ") failed: " + ibverbs_detail::errno_text(errno));
        }
        continue;
      }
      ibv_device_attr dattr{};
      if (api->query_device(c, &dattr) != 0) {
        api->close_device(c);
        continue;
      }
      int first = want_port > 0 ? want_port : 1;
      int last = want_port > 0 ? want_port : dattr.phys_port_cnt;
      for (int p = first; p <= last; ++p) {
        ibv_port_attr pattr{};
        if (api->query_port(c, static_cast<std::uint8_t>(p), &pattr) != 0) {
          named_port_problem = "port " + std::to_string(p) + " of " + name + " cannot be queried";
          continue;
        }
        if (pattr.state != IBV_PORT_ACTIVE) {
          named_port_problem = "port " + std::to_string(p) + " of " + name + " is " + ibverbs_detail::port_state_name(pattr.state) +
                               ", not ACTIVE";
          continue;
        }
        ctx = c;
        device_name = name;
        port = static_cast<std::uint8_t>(p);
        device_attr = dattr;
        port_attr = pattr;
        break;
      }
      if (ctx == nullptr) api->close_device(c);
    }
    api->free_device_list(list);
    if (ctx != nullptr) return;
    if (!want_name.empty() && !named_found)
      fail(errc::invalid_argument, "COLLCOMM_IB_HCA='" + spec + "': no such RDMA device; devices here: " + seen);
    if (!want_name.empty()) fail(errc::system, "COLLCOMM_IB_HCA='" + spec + "': " + named_port_problem);
    fail(errc::system, "no RDMA device here has an ACTIVE port (devices: " + seen + ")");
  }
};

// What a peer's notice says (see the file comment). An abort overrides a bye.
enum class ibverbs_notice : std::uint64_t { none = 0, bye = 1, abort = 2 };

struct ibverbs_connection_options {
  std::uint32_t slots = 4;                    // messages in flight, each way (1 ... 2^16)
  std::size_t slot_bytes = std::size_t{1} << 20;  // largest message (< 2^24)
  // Send-queue depth; 0: 2 · slots + 2. At least 2 (one entry is kept for credits).
  std::uint32_t send_depth = 0;
  // Completion-queue depth; 0: send_depth + slots + 1, which cannot overflow.
  int cq_depth = 0;
  // After this long without any completion, progress() writes 0 bytes to the peer (signaled): a peer
  // that has gone answers no more, and that write fails (retry exceeded) even where this side
  // has nothing to send. 0: never.
  std::chrono::milliseconds probe_interval{1000};
  // Slots in the caller's memory (both or neither): `slots` × `slot_bytes` from each, outliving the
  // connection. Host memory, or GPU memory where `gpu_slots` (registered through a dmabuf; where the
  // system cannot, the constructor throws errc::system: stage through host memory instead).
  // Null: the connection's own host memory.
  std::byte* send_slots = nullptr;
  std::byte* recv_slots = nullptr;
  bool gpu_slots = false;
  // Each message carries a 64-bit tag besides its bytes (post's `tag`, recv_tag()): one more RDMA
  // WRITE per message, of the tag into the peer's tag ring, ahead of the message's own.
  bool tagged = false;
};

// One reliable-connected queue pair between this rank and `peer` on `channel`, with `slots`
// slots of `slot_bytes` each way. Not copyable or movable (the NIC holds its addresses).
class ibverbs_connection {
 public:
  using remote_info = ibverbs_qp_info;
  static constexpr std::size_t max_message_bytes = (std::size_t{1} << 24) - 1;
  // The longest notice text; longer ones are cut.
  static constexpr std::size_t notice_text_max = 1024;

  ibverbs_connection(ibverbs_context& context, int peer, int channel, ibverbs_connection_options options = {})
      : c_(&context), api_(context.api), peer_(peer), channel_(channel), opt_(options) {
    if (opt_.slots == 0 || opt_.slots > (1u << 16))
      fail(errc::invalid_argument, "slots = " + std::to_string(opt_.slots) + " is not in [1, 65536]");
    if (opt_.slot_bytes == 0 || opt_.slot_bytes > max_message_bytes)
      fail(errc::invalid_argument, "slot_bytes = " + std::to_string(opt_.slot_bytes) + " is not in [1, 2^24 - 1]");
    if (opt_.send_depth == 0) opt_.send_depth = 2 * opt_.slots + 2;
    if (opt_.send_depth < 2) fail(errc::invalid_argument, "send_depth must be at least 2");
    if (opt_.cq_depth <= 0) opt_.cq_depth = static_cast<int>(opt_.send_depth + opt_.slots + 1);
    signal_interval_ = std::max<std::uint32_t>(1, (opt_.send_depth - 1) / 2);
    sizes_.assign(opt_.slots, 0);

    if ((opt_.send_slots == nullptr) != (opt_.recv_slots == nullptr))
      fail(errc::invalid_argument, "send_slots and recv_slots must both be given or both be null");
    const bool external = opt_.send_slots != nullptr;
    if (opt_.gpu_slots && !external) fail(errc::invalid_argument, "gpu_slots without send_slots and recv_slots");
    // The slots (unless the caller's), then the control block: the credit word on a cache line of
    // its own (8-byte aligned: the NIC writes it whole and the sender loads it atomically); the
    // notice block: [0, 8) the kind word, [8, 16) the text's length, [64, 64 + notice_text_max)
    // the text; the tag ring, 8 bytes a slot (tagged). The local block has the same layout: the
    // sources of the credit, notice and tag writes.
    const std::size_t word = 64;
    const std::size_t ring = external ? 0 : (std::size_t{opt_.slots} * opt_.slot_bytes + word - 1) / word * word;
    const std::size_t block = ring + word + notice_block_bytes + (opt_.tagged ? std::size_t{opt_.slots} * 8 : 0);
    local_block_ = ibverbs_detail::host_block(block);
    remote_block_ = ibverbs_detail::host_block(block);
    send_slots_ = external ? opt_.send_slots : local_block_.p;
    credit_source_ = reinterpret_cast<std::uint64_t*>(local_block_.p + ring);
    notice_source_ = local_block_.p + ring + word;
    tag_source_ = reinterpret_cast<std::uint64_t*>(local_block_.p + ring + word + notice_block_bytes);
    recv_slots_ = external ? opt_.recv_slots : remote_block_.p;
    credit_word_ = reinterpret_cast<std::uint64_t*>(remote_block_.p + ring);
    notice_block_ = remote_block_.p + ring + word;
    tags_ = reinterpret_cast<std::uint64_t*>(remote_block_.p + ring + word + notice_block_bytes);
    // Local MR: what the NIC reads (send slots, credit, notice and tag sources). Remote MR: what the peer writes.
    local_mr_ = register_host(local_block_.p, block, IBV_ACCESS_LOCAL_WRITE);
    remote_mr_ = register_host(remote_block_.p, block, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    send_lkey_ = local_mr_.lkey();
    recv_rkey_ = remote_mr_.rkey();
    if (external) {
      const std::size_t bytes = std::size_t{opt_.slots} * opt_.slot_bytes;
      send_mr_ = register_slots(opt_.send_slots, bytes, IBV_ACCESS_LOCAL_WRITE, "send");
      recv_mr_ = register_slots(opt_.recv_slots, bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, "receive");
      send_lkey_ = send_mr_.lkey();
      recv_rkey_ = recv_mr_.rkey();
    }

    cq_ = api_->create_cq(c_->ctx, opt_.cq_depth, nullptr, nullptr, 0);
    if (cq_ == nullptr) fail(errc::system, "ibv_create_cq(" + std::to_string(opt_.cq_depth) + ") failed: " + errno_text());
    ibv_qp_init_attr init{};
    init.send_cq = cq_;
    init.recv_cq = cq_;
    init.qp_type = IBV_QPT_RC;
    init.sq_sig_all = 0;
    init.cap.max_send_wr = opt_.send_depth;
    init.cap.max_recv_wr = opt_.slots;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    qp_ = api_->create_qp(c_->pd, &init);
    if (qp_ == nullptr) {
      int e = errno;
      api_->destroy_cq(cq_);
      cq_ = nullptr;
      errno = e;
      fail(errc::system, "ibv_create_qp (RC, " + std::to_string(opt_.send_depth) + " send / " + std::to_string(opt_.slots) +
                             " receive entries) failed: " + errno_text());
    }
    // A 24-bit starting PSN that differs between connections and runs.
    auto seed = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                (static_cast<std::uint64_t>(qp_->qp_num) << 20) ^ reinterpret_cast<std::uintptr_t>(this);
    seed = (seed ^ (seed >> 31)) * 0x9e3779b97f4a7c15ull;
    psn_ = static_cast<std::uint32_t>(seed >> 40) & 0xffffffu;

    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = c_->port;
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    try {
      modify(a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "RESET -> INIT");
    } catch (...) {
      api_->destroy_qp(qp_);
      api_->destroy_cq(cq_);
      throw;
    }
  }
  ibverbs_connection(const ibverbs_connection&) = delete;
  ibverbs_connection& operator=(const ibverbs_connection&) = delete;
  ~ibverbs_connection() {
    if (qp_ != nullptr) api_->destroy_qp(qp_);
    if (cq_ != nullptr) api_->destroy_cq(cq_);
    local_mr_.reset();
    remote_mr_.reset();
    send_mr_.reset();
    recv_mr_.reset();
  }

  int peer() const noexcept { return peer_; }
  int channel() const noexcept { return channel_; }
  std::uint32_t slots() const noexcept { return opt_.slots; }
  std::size_t slot_bytes() const noexcept { return opt_.slot_bytes; }
  bool connected() const noexcept { return connected_; }
  std::uint32_t qp_num() const noexcept { return qp_->qp_num; }

  // What the peer's connect() needs. Valid from construction on.
  remote_info local_info() const {
    remote_info i;
    i.magic = remote_info::magic_value;
    i.version = remote_info::version_value;
    i.rank = c_->rank;
    i.peer = peer_;
    i.channel = channel_;
    i.qpn = qp_->qp_num;
    i.psn = psn_;
    i.lid = c_->port_attr.lid;
    i.link_layer = c_->port_attr.link_layer;
    i.mtu = static_cast<std::uint8_t>(c_->port_attr.active_mtu);
    i.slots = opt_.slots;
    i.slot_bytes = opt_.slot_bytes;
    i.flags = opt_.tagged ? remote_info::tagged_flag : 0;
    std::memcpy(i.gid, c_->gid.raw, sizeof(i.gid));
    i.recv_addr = reinterpret_cast<std::uintptr_t>(recv_slots_);
    i.credit_addr = reinterpret_cast<std::uintptr_t>(credit_word_);
    i.rkey = remote_mr_.rkey();
    i.recv_rkey = recv_rkey_;
    return i;
  }

  // Takes the queue pair INIT → RTR → RTS towards the peer's queue pair and posts the receives.
  void connect(const remote_info& r) {
    if (connected_) fail(errc::invalid_usage, "connect() called twice");
    if (r.magic != remote_info::magic_value || r.version != remote_info::version_value)
      fail(errc::invalid_argument, "the peer's queue-pair info is not an ibverbs_qp_info of version " +
                                       std::to_string(remote_info::version_value) + " (magic/version mismatch)");
    if (r.rank != peer_ || r.peer != c_->rank || r.channel != channel_)
      fail(errc::invalid_argument, "the queue-pair info given is rank " + std::to_string(r.rank) + "'s for rank " +
                                       std::to_string(r.peer) + " channel " + std::to_string(r.channel) +
                                       ", not peer's for this rank and channel");
    if (r.slots != opt_.slots || r.slot_bytes != opt_.slot_bytes)
      fail(errc::invalid_argument, "the peer has " + std::to_string(r.slots) + " slots of " + std::to_string(r.slot_bytes) +
                                       " bytes, this side " + std::to_string(opt_.slots) + " of " + std::to_string(opt_.slot_bytes));
    if (((r.flags & remote_info::tagged_flag) != 0) != opt_.tagged)
      fail(errc::invalid_argument, std::string("the peer's messages ") + (opt_.tagged ? "carry no tags" : "carry tags") +
                                       ", this side's " + (opt_.tagged ? "do" : "do not"));
    if (r.link_layer != c_->port_attr.link_layer)
      fail(errc::invalid_argument, std::string("link layers differ: this port is ") + (c_->roce() ? "Ethernet (RoCE)" : "InfiniBand") +
                                       ", the peer's is not");
    remote_ = r;

    for (std::uint32_t i = 0; i < opt_.slots; ++i) post_receive();

    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = static_cast<ibv_mtu>(std::min<int>(c_->port_attr.active_mtu, r.mtu));
    a.dest_qp_num = r.qpn;
    a.rq_psn = r.psn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;  // 0.64 ms
    a.ah_attr.port_num = c_->port;
    a.ah_attr.sl = static_cast<std::uint8_t>(ibverbs_detail::env_int("COLLCOMM_IB_SL", 0));
    a.ah_attr.src_path_bits = 0;
    if (c_->roce()) {
      // RoCE routes by GID: the GRH is mandatory, the LID unused.
      a.ah_attr.is_global = 1;
      std::memcpy(a.ah_attr.grh.dgid.raw, r.gid, sizeof(r.gid));
      a.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(c_->gid_index);
      a.ah_attr.grh.hop_limit = 255;
      a.ah_attr.grh.traffic_class = static_cast<std::uint8_t>(ibverbs_detail::env_int("COLLCOMM_IB_TC", 0));
      a.ah_attr.grh.flow_label = 0;
    } else {
      a.ah_attr.is_global = 0;
      a.ah_attr.dlid = r.lid;
    }
    modify(a,
           IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
               IBV_QP_MIN_RNR_TIMER,
           "INIT -> RTR");

    ibv_qp_attr s{};
    s.qp_state = IBV_QPS_RTS;
    s.timeout = static_cast<std::uint8_t>(ibverbs_detail::env_int("COLLCOMM_IB_TIMEOUT", 20));
    s.retry_cnt = 7;
    s.rnr_retry = 7;  // 7: retry without limit; credits keep a correct sender from ever meeting RNR
    s.sq_psn = psn_;
    s.max_rd_atomic = 1;
    modify(s, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
           "RTR -> RTS");
    connected_ = true;
  }

  // Where the caller writes message m (at most slot_bytes) before post(m). Writable once can_send(m).
  std::byte* send_buffer(std::uint64_t m) noexcept { return send_slots_ + (m % opt_.slots) * opt_.slot_bytes; }

  // The peer's slot for m is free (it released message m − slots) and the send queue has room.
  bool can_send(std::uint64_t m) const noexcept {
    return connected_ && m - peer_consumed() < opt_.slots &&
           sq_posted_ - sq_completed_ + (opt_.tagged ? 2 : 1) < opt_.send_depth;
  }

  // Sends the first `bytes` of send_buffer(m) into the peer's slot m % slots (one RDMA WRITE WITH
  // IMM; tagged: `tag` first, into the peer's tag ring). Messages are posted in order, each only
  // once can_send(m).
  void post(std::uint64_t m, std::size_t bytes, std::uint64_t tag = 0) {
    if (!connected_) fail(errc::invalid_usage, "post() before connect()");
    if (m != sent_) fail(errc::invalid_usage, "post(" + std::to_string(m) + ") out of order: next is " + std::to_string(sent_));
    if (bytes > opt_.slot_bytes)
      fail(errc::invalid_usage, "post(" + std::to_string(m) + ", " + std::to_string(bytes) + " bytes) exceeds slot_bytes = " +
                                    std::to_string(opt_.slot_bytes));
    if (!can_send(m)) fail(errc::invalid_usage, "post(" + std::to_string(m) + ") while can_send(" + std::to_string(m) + ") is false");
    if (opt_.tagged) {
      // The source stays unchanged until the NIC has read it: slot m % slots is written again
      // only for message m + slots, after the peer released m, which it received whole.
      tag_source_[m % opt_.slots] = tag;
      ibv_sge t{};
      t.addr = reinterpret_cast<std::uintptr_t>(&tag_source_[m % opt_.slots]);
      t.length = sizeof tag;
      t.lkey = local_mr_.lkey();
      ibv_send_wr tw{};
      tw.opcode = IBV_WR_RDMA_WRITE;
      tw.sg_list = &t;
      tw.num_sge = 1;
      tw.wr.rdma.remote_addr = remote_.credit_addr + 64 + notice_block_bytes + (m % opt_.slots) * 8;
      tw.wr.rdma.rkey = remote_.rkey;
      post_send(tw, data_write, "tag write of message " + std::to_string(m));
    }
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(send_buffer(m));
    sge.length = static_cast<std::uint32_t>(bytes);
    sge.lkey = send_lkey_;
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.sg_list = bytes > 0 ? &sge : nullptr;
    wr.num_sge = bytes > 0 ? 1 : 0;
    wr.imm_data = htonl(static_cast<std::uint32_t>(((m & 0xffu) << 24) | bytes));
    wr.wr.rdma.remote_addr = remote_.recv_addr + (m % opt_.slots) * opt_.slot_bytes;
    wr.wr.rdma.rkey = remote_.recv_rkey;
    post_send(wr, data_write, "RDMA write of message " + std::to_string(m));
    ++sent_;
  }

  // Polls the completion queue: arrived messages, finished sends, returned credits; sends a
  // pending credit. Never blocks. Returns whether anything changed.
  bool progress() {
    if (!connected_) fail(errc::invalid_usage, "progress() before connect()");
    bool any = false;
    ibv_wc wc[16];
    for (;;) {
      int n = api_->poll_cq(cq_, 16, wc);
      if (n < 0)
        fail(errc::system, "ibv_poll_cq failed (" + std::to_string(n) + "): the completion queue overran or the device failed");
      for (int i = 0; i < n; ++i) complete(wc[i]);
      any = any || n > 0;
      if (n < 16) break;
    }
    any = send_credit() || any;
    std::uint64_t pc = peer_consumed();
    if (pc != peer_consumed_seen_) {
      peer_consumed_seen_ = pc;
      any = true;
    }
    if (any || opt_.probe_interval.count() == 0) {
      idle_polls_ = 0;
      return any;
    }
    // Idle: look at the clock now and then, and probe the peer once per interval.
    if (++idle_polls_ % 256 == 1) {
      auto now = std::chrono::steady_clock::now();
      if (idle_polls_ == 1) last_activity_ = now;
      if (now - last_activity_ >= opt_.probe_interval && !probe_inflight_ && sq_posted_ - sq_completed_ < opt_.send_depth) {
        probe();
        last_activity_ = now;
      }
    }
    return false;
  }

  bool arrived(std::uint64_t m) const noexcept { return m < arrived_; }
  // Message m, valid from arrived(m) until release(m).
  const std::byte* recv_buffer(std::uint64_t m) const noexcept { return recv_slots_ + (m % opt_.slots) * opt_.slot_bytes; }
  std::size_t recv_bytes(std::uint64_t m) const noexcept { return sizes_[m % opt_.slots]; }
  // Tagged: the tag of message m, valid from arrived(m) (its tag write landed before it).
  std::uint64_t recv_tag(std::uint64_t m) const noexcept {
    return std::atomic_ref<std::uint64_t>(tags_[m % opt_.slots]).load(std::memory_order_acquire);
  }

  // The caller is done with message m and every earlier one: their slots go back to the sender.
  void release(std::uint64_t m) {
    if (m >= arrived_) fail(errc::invalid_usage, "release(" + std::to_string(m) + ") of a message that has not arrived");
    if (m < released_) return;
    // Receives first: the credit that lets the sender reuse a slot must find its receive posted.
    for (; released_ <= m; ++released_) post_receive();
    send_credit();
  }

  // Writes a notice to the peer (see the file comment): `text` (cut to notice_text_max bytes) into
  // its notice block, then the kind word. Best effort: false (nothing posted) before connect(),
  // while an earlier notice's writes are in flight, or where the send queue lacks two free
  // entries (progress() retires completed ones). Their failure surfaces as any write's does.
  bool post_notice(ibverbs_notice kind, std::string_view text = {}) {
    if (!connected_ || notice_pending() || sq_posted_ - sq_completed_ + 2 > opt_.send_depth) return false;
    const std::size_t n = std::min(text.size(), notice_text_max);
    const std::uint64_t len = n;
    std::memcpy(notice_source_ + 8, &len, sizeof len);
    if (n > 0) std::memcpy(notice_source_ + 64, text.data(), n);
    const std::uint64_t word = static_cast<std::uint64_t>(kind);
    std::memcpy(notice_source_, &word, sizeof word);
    const std::uint64_t remote = remote_.credit_addr + 64;
    ibv_sge body{};
    body.addr = reinterpret_cast<std::uintptr_t>(notice_source_ + 8);
    body.length = static_cast<std::uint32_t>(56 + n);
    body.lkey = local_mr_.lkey();
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.sg_list = &body;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = remote + 8;
    wr.wr.rdma.rkey = remote_.rkey;
    post_send(wr, notice_write, "notice text write");
    ibv_sge head{};
    head.addr = reinterpret_cast<std::uintptr_t>(notice_source_);
    head.length = sizeof word;
    head.lkey = local_mr_.lkey();
    ibv_send_wr wr2{};
    wr2.opcode = IBV_WR_RDMA_WRITE;
    wr2.sg_list = &head;
    wr2.num_sge = 1;
    wr2.wr.rdma.remote_addr = remote;
    wr2.wr.rdma.rkey = remote_.rkey;
    post_send(wr2, notice_write, "notice write");
    notice_done_at_ = sq_posted_;
    return true;
  }
  // A notice's writes have not all completed yet.
  bool notice_pending() const noexcept { return sq_completed_ < notice_done_at_; }
  // The latest notice the peer wrote (none: none yet), and the text of its abort.
  ibverbs_notice peer_notice() const noexcept {
    return static_cast<ibverbs_notice>(
        std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(notice_block_)).load(std::memory_order_acquire));
  }
  std::string peer_notice_text() const {
    std::uint64_t len = 0;
    std::memcpy(&len, notice_block_ + 8, sizeof len);
    return std::string(reinterpret_cast<const char*>(notice_block_ + 64), std::min<std::uint64_t>(len, notice_text_max));
  }

  // Every send-queue entry posted has completed (with a signaled last one: a notice, a credit).
  bool send_queue_idle() const noexcept { return sq_completed_ == sq_posted_; }
  // Released messages whose credit has not reached the peer yet (or a credit write in flight).
  bool credit_pending() const noexcept { return credit_inflight_ || released_ != credit_sent_; }

  // Counters, for tests and stall reports.
  std::uint64_t sent() const noexcept { return sent_; }
  std::uint64_t peer_released() const noexcept { return peer_consumed(); }
  std::uint64_t arrived_count() const noexcept { return arrived_; }
  std::uint64_t released_count() const noexcept { return released_; }

 private:
  static constexpr std::uint64_t receive_wr_id = ~std::uint64_t{0};
  static constexpr std::size_t notice_block_bytes = 64 + notice_text_max;

  static std::string errno_text() { return ibverbs_detail::errno_text(errno); }

  [[noreturn]] void fail(errc code, const std::string& msg) const {
    detail::fail(code, "net<ibverbs>", c_->rank,
                 "connection to peer " + std::to_string(peer_) + ", channel " + std::to_string(channel_) + ": " + msg);
  }

  // The caller's slots: host memory by ibv_reg_mr, GPU memory through a dmabuf.
  ibverbs_memory register_slots(std::byte* p, std::size_t bytes, unsigned access, const char* which) {
    if (!opt_.gpu_slots) return register_host(p, bytes, access);
    std::optional<ibverbs_memory> m = c_->register_memory(p, bytes, true, access);
    if (!m)
      fail(errc::system, std::string("the ") + which + " slots are GPU memory and this system cannot register it "
                             "(no dmabuf support in the CUDA driver, libibverbs or the device): stage through host memory");
    return std::move(*m);
  }

  ibverbs_memory register_host(void* p, std::size_t bytes, unsigned access) {
    ibv_mr* mr = api_->reg_mr(c_->pd, p, bytes, access);
    if (mr == nullptr)
      fail(errc::system, "ibv_reg_mr of " + std::to_string(bytes) + " bytes of slots failed: " + errno_text() +
                             " (is the locked-memory limit, ulimit -l, too small?)");
    return ibverbs_memory(api_, mr);
  }

  void modify(ibv_qp_attr& a, int mask, const char* what) {
    if (int rc = api_->modify_qp(qp_, &a, mask); rc != 0)
      fail(errc::system, std::string("ibv_modify_qp ") + what + " failed: " + ibverbs_detail::errno_text(rc > 0 ? rc : errno));
  }

  std::uint64_t peer_consumed() const noexcept {
    return std::atomic_ref<std::uint64_t>(*credit_word_).load(std::memory_order_acquire);
  }

  void post_receive() {
    ibv_recv_wr wr{};
    wr.wr_id = receive_wr_id;
    wr.sg_list = nullptr;
    wr.num_sge = 0;
    ibv_recv_wr* bad = nullptr;
    if (int rc = api_->post_recv(qp_, &wr, &bad); rc != 0)
      fail(errc::system, "ibv_post_recv failed: " + ibverbs_detail::errno_text(rc > 0 ? rc : errno));
  }

  // wr_id: (send-queue sequence << 2) | kind. A signaled completion of sequence s retires every
  // earlier entry too (a send queue completes in order).
  enum wr_kind : std::uint64_t { data_write = 0, credit_write = 1, probe_write = 2, notice_write = 3 };
  void post_send(ibv_send_wr& wr, wr_kind kind, const std::string& what) {
    const std::uint64_t seq = sq_posted_;
    const bool signaled =
        kind != data_write || (seq + 1) % signal_interval_ == 0 || sq_posted_ - sq_completed_ + 2 >= opt_.send_depth;
    wr.wr_id = (seq << 2) | kind;
    wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
    wr.next = nullptr;
    ibv_send_wr* bad = nullptr;
    if (int rc = api_->post_send(qp_, &wr, &bad); rc != 0)
      fail(errc::system, "ibv_post_send of the " + what + " failed: " + ibverbs_detail::errno_text(rc > 0 ? rc : errno));
    ++sq_posted_;
  }

  void probe() {
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.sg_list = nullptr;
    wr.num_sge = 0;
    wr.wr.rdma.remote_addr = remote_.credit_addr;
    wr.wr.rdma.rkey = remote_.rkey;
    post_send(wr, probe_write, "probe");
    probe_inflight_ = true;
  }

  bool send_credit() {
    if (credit_inflight_ || released_ == credit_sent_ || sq_posted_ - sq_completed_ >= opt_.send_depth) return false;
    *credit_source_ = released_;  // unchanged until this write completes (one credit write in flight)
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(credit_source_);
    sge.length = sizeof(std::uint64_t);
    sge.lkey = local_mr_.lkey();
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = remote_.credit_addr;
    wr.wr.rdma.rkey = remote_.rkey;
    post_send(wr, credit_write, "credit write");
    credit_inflight_ = true;
    credit_sent_ = released_;
    return true;
  }

  static const char* status_hint(ibv_wc_status s) {
    switch (s) {
      case IBV_WC_RETRY_EXC_ERR:
        return "the peer does not answer: it exited, its queue pair was destroyed or the link is down";
      case IBV_WC_RNR_RETRY_EXC_ERR:
        return "the peer had no receive posted: a message overran its slots";
      case IBV_WC_WR_FLUSH_ERR:
        return "the queue pair is in the error state (after an earlier error on it)";
      case IBV_WC_REM_ACCESS_ERR:
        return "the peer refused the write: its slots or rkey differ from what it sent in the exchange, or it deregistered them";
      case IBV_WC_LOC_PROT_ERR:
        return "the local memory region does not cover the slot";
      default:
        return "the transport failed";
    }
  }

  void complete(const ibv_wc& wc) {
    if (wc.status != IBV_WC_SUCCESS) {
      std::string what;
      // An error completion carries wr_id, status and vendor_err only: the wr_id tells what it was.
      if (wc.wr_id == receive_wr_id)
        what = "a receive";
      else if ((wc.wr_id & 3u) == credit_write)
        what = "a credit write";
      else if ((wc.wr_id & 3u) == probe_write)
        what = "a probe (0-byte write) of the peer";
      else if ((wc.wr_id & 3u) == notice_write)
        what = "a notice (bye or abort) write";
      else
        what = "an RDMA write of a message";
      fail(errc::system, what + " completed with status " + std::to_string(static_cast<int>(wc.status)) + " '" +
                             api_->wc_status_str(wc.status) + "' (vendor error " + std::to_string(wc.vendor_err) +
                             "): " + status_hint(wc.status));
    }
    if (wc.wr_id == receive_wr_id) {
      if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM) fail(errc::internal, "a receive completion that is not an RDMA write with immediate");
      if (!(wc.wc_flags & IBV_WC_WITH_IMM)) fail(errc::internal, "a receive completion without immediate data");
      const std::uint32_t imm = ntohl(wc.imm_data);
      const std::size_t bytes = imm & 0xffffffu;
      if ((imm >> 24) != (arrived_ & 0xffu) || bytes > opt_.slot_bytes)
        fail(errc::internal, "message " + std::to_string(arrived_) + " arrived with sequence byte " + std::to_string(imm >> 24) +
                                 " and " + std::to_string(bytes) + " bytes: out of order or corrupt");
      if (arrived_ - released_ >= opt_.slots)
        fail(errc::internal, "message " + std::to_string(arrived_) + " arrived while all " + std::to_string(opt_.slots) +
                                 " slots are held: the sender overran the receiver");
      sizes_[arrived_ % opt_.slots] = bytes;
      ++arrived_;
      return;
    }
    // A send-queue completion: this entry and all before it are done.
    sq_completed_ = std::max(sq_completed_, (wc.wr_id >> 2) + 1);
    if ((wc.wr_id & 3u) == credit_write) credit_inflight_ = false;
    if ((wc.wr_id & 3u) == probe_write) probe_inflight_ = false;
  }

  ibverbs_context* c_;
  const verbs_api* api_;
  int peer_;
  int channel_;
  ibverbs_connection_options opt_;
  std::uint32_t signal_interval_ = 1;
  std::uint32_t psn_ = 0;

  ibverbs_detail::host_block local_block_;   // send slots (unless the caller's), then the sources of credit, notice and tag writes
  ibverbs_detail::host_block remote_block_;  // receive slots (unless the caller's), then the control block the peer writes
  std::byte* send_slots_ = nullptr;
  std::byte* recv_slots_ = nullptr;
  std::uint64_t* credit_source_ = nullptr;
  std::uint64_t* credit_word_ = nullptr;
  std::byte* notice_source_ = nullptr;
  std::byte* notice_block_ = nullptr;
  std::uint64_t* tag_source_ = nullptr;  // tagged: (slot) the tag of the message sent from it
  std::uint64_t* tags_ = nullptr;        // tagged: (slot) the tag of the message held there
  ibverbs_memory local_mr_;
  ibverbs_memory remote_mr_;
  ibverbs_memory send_mr_;  // the caller's slots
  ibverbs_memory recv_mr_;
  std::uint32_t send_lkey_ = 0;  // of the send slots
  std::uint32_t recv_rkey_ = 0;  // of the receive slots
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  remote_info remote_{};
  bool connected_ = false;

  std::uint64_t sent_ = 0;            // messages posted
  std::uint64_t sq_posted_ = 0;       // send-queue entries posted
  std::uint64_t sq_completed_ = 0;    // send-queue entries known complete
  std::uint64_t peer_consumed_seen_ = 0;
  std::uint64_t idle_polls_ = 0;      // progress() calls in a row that found nothing
  std::uint64_t arrived_ = 0;         // messages arrived
  std::uint64_t released_ = 0;        // messages released by the caller
  std::uint64_t credit_sent_ = 0;     // released_ as last written to the peer
  bool credit_inflight_ = false;
  bool probe_inflight_ = false;
  std::uint64_t notice_done_at_ = 0;  // sq_posted_ after the last notice's writes
  std::chrono::steady_clock::time_point last_activity_{};
  std::vector<std::size_t> sizes_;    // (slot) bytes of the message held there
};

}  // namespace transport
COLLCOMM_NAMESPACE_END
