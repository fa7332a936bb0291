// collcomm/transport/nvlink_process.hpp — gpu::world::join: a world of processes over CUDA IPC.
//
//   // every process (torchrun, mpirun, a spawn loop ...), one rank each:
//   auto boot = collcomm::bootstrap::from_env();
//   collcomm::communicator<collcomm::transport::nvlink> comm(boot, local_rank % ngpus, opts);
//   collcomm::all_reduce(comm, send, recv, count, collcomm::op::sum{}, stream);
//   cudaStreamSynchronize(stream); comm.check();
//
// Why legacy CUDA IPC (cudaIpcGetMemHandle / cudaIpcOpenMemHandle with
// cudaIpcMemLazyEnablePeerAccess) and not cuMem/VMM handles: a legacy handle is 64 plain bytes
// that any bootstrap carries (tcp, env, mpi: an all-gather of bytes). A VMM POSIX handle is a
// file descriptor, which crosses processes only over a unix socket (SCM_RIGHTS), a second
// channel that MPI and torchrun do not give us. Legacy IPC cannot open a handle in the process
// that made it, so ranks of one process (same pid and host id, e.g. threads over
// bootstrap::local) use each other's raw pointers instead.
//
// What lives where (n ranks, nc channels):
//   each rank's GPU memory, one cudaMalloc, exported:  its receiving connections (nc x n FIFOs),
//       a barrier line per channel (rank 0's are the world's), its staging window (2 x
//       options::window_bytes: direct algorithms' input and output, see communicator::run_staged)
//   each process's own GPU memory: the FIFO table in its address space, its message counts
//       (steps), the direct primitives' buffer table (pre-filled with every rank's window)
//   a control page of POSIX shared memory, registered with cudaHostRegister(mapped) in every
//       process: the abort word (kernels poll it; host abort() writes it), who aborted and why,
//       the stall records (a kernel's timed-out wait writes its rank's; every rank reads all of
//       them with plain loads after its stream synchronized), and a departure flag per rank.
//       Made as host/segment.hpp's segments are: rank 0 creates it, every rank maps it, the name
//       is unlinked at once, so nothing stays in /dev/shm, even after SIGKILL. Each rank holds
//       its liveness lock on it: a stall names the ranks whose process is gone.
// Counters use device scope when every rank is on one GPU, system scope otherwise.
//
// Staged worlds (options::connections = placement::host: transport::pcie across processes, for
// GPUs without peer access). No rank exports or opens GPU memory: rank 0 also creates a second
// segment, "<token>-gc", holding every connection of the world, receiver by receiver, each
// (channel, src) a FIFO of data slots | sizes | tail | head, fully allocated and zero; every rank
// maps it, registers it (cudaHostRegister mapped | portable) and builds its FIFO table from its own
// cudaHostGetDevicePointer. It is unlinked with the control page, at the same points, and
// unregistered and unmapped on destroy; the memory goes with the last mapping. Kernels reach it
// at system scope with plain loads and stores of the counters (no atomic read-modify-write over
// PCIe). No window is made (window_bytes is ignored: direct algorithms are refused), and the
// barrier lines are this rank's own device memory, which the FIFO schedules never touch.
// State: compiled, NOT YET RUN ON A GPU (tests/gpu/mp/test_gpu_mp.cu, the "pcie" cases).
//
// Set-up is three bootstrap exchanges: hello (pid, host, GPU uuid and SM count, options), the
// IPC handles (with each rank's status), and a last status after every rank mapped everything.
// A failure on any rank is an error on every rank naming it; every wait is the bootstrap's.
// Destruction: close the peers' mappings, say "departed", wait (bounded by the timeout; a rank
// whose process is gone counts as departed) until every rank did, then free this rank's memory.
// So a rank never frees memory that a peer still maps.
//
// split(color, key) and dup() (communicator<transport::nvlink>) need no bootstrap: the control
// page also holds a mailbox (two 512-byte posts per rank, written in rounds that every rank of the
// world takes part in, bounded by the timeout, a dead rank named). One round exchanges colors and
// keys; then each group runs world::join over a view of the mailbox that keeps its members' posts
// (mailbox_bootstrap), while ranks of no group post nothing for join's rounds (join_rounds).
// State: implemented; its one GPU run found a launch bug (gpu::launch's shared-memory attribute),
// fixed since, not re-run.
//
// Several processes on ONE GPU: automatic channels are the SMs shared out among them, so their
// kernels can be resident together — which needs MPS: without it the processes' contexts
// time-slice and each wait may take a slice (~2 ms); correct, thousands of times slower.
#pragma once

#include <collcomm/host/process_world.hpp>
#include <collcomm/host/segment.hpp>
#include <collcomm/transport/nvlink.hpp>

#include <cuda_runtime.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

COLLCOMM_NAMESPACE_BEGIN
namespace gpu {
namespace ipc_detail {

inline std::size_t align_up(std::size_t x, std::size_t a) { return (x + a - 1) / a * a; }

// The control page: (byte offset) what.
struct page_layout {
  static constexpr std::size_t abort_word = 0;     // uint32: 0, 1 (a wait timed out), 2 (abort())
  static constexpr std::size_t abort_claim = 4;    // uint32: the first abort() takes it
  static constexpr std::size_t abort_text = 8;     // up to 500 bytes, NUL-terminated
  static constexpr std::size_t text_bytes = 500;
  static constexpr std::size_t departed = 512;     // (rank) uint32
  static constexpr std::size_t post_bytes = 512;  // a mailbox post's payload (split's exchanges)
  static constexpr std::size_t post_stride = 16 + post_bytes;  // (round: u64, size: u64, payload)
  std::size_t stall, mailbox, bytes;
  explicit page_layout(int n) {
    stall = align_up(departed + 4 * static_cast<std::size_t>(n), 64);
    mailbox = align_up(stall + sizeof(transport::stall_record) * static_cast<std::size_t>(n), 64);  // (rank, round parity) posts
    bytes = align_up(mailbox + 2 * post_stride * static_cast<std::size_t>(n), 4096);
  }
};

// This machine: its host name and boot id, hashed (pids are only comparable on one host).
inline std::uint64_t host_id() {
  std::string s(256, '\0');
  if (::gethostname(s.data(), s.size()) != 0) s = "?";
  s.resize(std::strlen(s.c_str()));
  std::ifstream boot_id("/proc/sys/kernel/random/boot_id");
  std::string b;
  std::getline(boot_id, b);
  s += "/" + b;
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

struct hello_record {
  std::uint64_t token;  // rank 0's names the control page
  std::int64_t pid;
  std::uint64_t host;
  unsigned char uuid[16];  // the GPU (device numbers differ across processes)
  std::int32_t sms, channels, slots;
  std::int32_t connections;  // options::connections: placement::host stages every connection through host memory
  std::uint64_t slot_bytes, window_bytes;
};

struct memory_record {
  cudaIpcMemHandle_t handle;
  std::uint64_t base;   // the raw pointer, for ranks of the same process
  std::uint64_t bytes;
  char status[384];     // "" or why this rank failed
};

template <class Rec, class B>
std::vector<Rec> all_gather_records(B& boot, const Rec& mine) {
  std::vector<Rec> all(static_cast<std::size_t>(boot.size()));
  boot.all_gather(std::span<const std::byte>(reinterpret_cast<const std::byte*>(&mine), sizeof mine),
                  std::span<std::byte>(reinterpret_cast<std::byte*>(all.data()), sizeof(Rec) * all.size()));
  return all;
}

// Throws errc::system on this rank when any rank's status is an error, naming those ranks.
inline void check_joined(const std::vector<std::string>& errs, const char* where, int rank) {
  std::string ranks, first;
  for (std::size_t r = 0; r < errs.size(); ++r)
    if (!errs[r].empty()) {
      ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
      if (first.empty()) first = errs[r];
    }
  if (!ranks.empty()) collcomm::detail::fail(errc::system, where, rank, "rank(s) " + ranks + " could not join the GPU world: " + first);
}

// What a world of processes owns beyond gpu::world's own tables (see the file comment).
class process_resources {
 public:
  process_resources(int rank, int nranks, int device, std::chrono::milliseconds timeout)
      : rank_(rank), n_(nranks), device_(device), timeout_(timeout), layout_(nranks) {}
  ~process_resources() { release(); }
  process_resources(const process_resources&) = delete;
  process_resources& operator=(const process_resources&) = delete;

  const page_layout& layout() const noexcept { return layout_; }
  std::byte* page() const noexcept { return page_.base(); }
  std::uint32_t* word(std::size_t offset) const noexcept { return reinterpret_cast<std::uint32_t*>(page_.base() + offset); }

  host::detail::shm_segment page_;
  bool registered_ = false;
  // Staged worlds (options::connections = placement::host): every connection of the world in one
  // segment of POSIX shared memory, mapped and registered here (cudaHostRegister mapped |
  // portable); no device memory of a peer is opened.
  host::detail::shm_segment conns_;
  bool conns_registered_ = false;
  bool joined_ = false;       // every rank mapped everything: destruction waits for the others
  void* mine_ = nullptr;      // this rank's exported allocation
  std::vector<void*> opened_;  // (rank) a peer's allocation opened here, or null

  std::vector<int> dead_ranks() const {
    std::vector<int> dead;
    if (!page_) return dead;
    for (int q = 0; q < n_; ++q)
      if (q != rank_ && !page_.rank_lock_held(q)) dead.push_back(q);
    return dead;
  }

  // One round of the mailbox, collective over EVERY rank of the world: this rank posts `mine`
  // (at most post_bytes) and gets each rank's post (its size may differ; empty for none).
  // Rounds alternate between two posts per rank: a rank writes round k + 2 only after every rank
  // wrote round k + 1, which each did after reading round k. Bounded by the timeout; a rank whose
  // process is gone is an error naming it.
  std::vector<std::vector<std::byte>> post_round(std::span<const std::byte> mine, const char* what) {
    if (mine.size() > page_layout::post_bytes)
      collcomm::detail::fail(errc::internal, what, rank_, "a mailbox post of " + std::to_string(mine.size()) + " bytes is too large");
    const std::uint64_t round = ++rounds_;
    auto post = [&](int q) { return page_.base() + layout_.mailbox + page_layout::post_stride * (2 * static_cast<std::size_t>(q) + round % 2); };
    std::byte* p = post(rank_);
    const std::uint64_t size = mine.size();
    std::memcpy(p + 8, &size, 8);
    if (!mine.empty()) std::memcpy(p + 16, mine.data(), mine.size());
    std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(p)).store(round, std::memory_order_release);
    std::vector<std::vector<std::byte>> all(static_cast<std::size_t>(n_));
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    for (int q = 0; q < n_; ++q) {
      std::byte* o = post(q);
      while (std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(o)).load(std::memory_order_acquire) != round) {
        if (!page_.rank_lock_held(q))
          collcomm::detail::fail(errc::timeout, what, rank_, "the process of rank " + std::to_string(q) + " is gone (killed or exited)");
        if (std::chrono::steady_clock::now() > deadline)
          collcomm::detail::fail(errc::timeout, what, rank_, "timed out after " + std::to_string(timeout_.count()) + " ms waiting for rank " + std::to_string(q) +
                                                                 " (every rank of the communicator must call split and dup, in the same order)");
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      std::uint64_t size = 0;
      std::memcpy(&size, o + 8, 8);
      all[static_cast<std::size_t>(q)].assign(o + 16, o + 16 + std::min<std::uint64_t>(size, page_layout::post_bytes));
    }
    return all;
  }

  void abort(int rank, const std::string& why) noexcept {
    if (!page_) return;
    std::uint32_t expected = 0;
    if (!std::atomic_ref<std::uint32_t>(*word(page_layout::abort_claim)).compare_exchange_strong(expected, 1)) return;
    const std::string text = "rank " + std::to_string(rank) + " called abort()" + (why.empty() ? "" : ": " + why);
    const std::size_t k = std::min(text.size(), page_layout::text_bytes - 1);
    char* t = reinterpret_cast<char*>(page_.base() + page_layout::abort_text);
    std::memcpy(t, text.data(), k);
    t[k] = '\0';
    std::atomic_ref<std::uint32_t>(*word(page_layout::abort_word)).store(2, std::memory_order_release);
  }

 private:
  void release() noexcept {
    int saved = -1;
    cudaGetDevice(&saved);
    cudaSetDevice(device_);
    for (void* p : opened_)
      if (p) cudaIpcCloseMemHandle(p);
    opened_.clear();
    if (page_ && joined_) {
      std::atomic_ref<std::uint32_t>(*word(page_layout::departed + 4 * static_cast<std::size_t>(rank_))).store(1, std::memory_order_release);
      const auto deadline = std::chrono::steady_clock::now() + timeout_;
      for (int q = 0; q < n_; ++q) {
        auto& flag = *word(page_layout::departed + 4 * static_cast<std::size_t>(q));
        while (std::atomic_ref<std::uint32_t>(flag).load(std::memory_order_acquire) == 0 && page_.rank_lock_held(q) &&
               std::chrono::steady_clock::now() < deadline)
          std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
    if (conns_registered_) cudaHostUnregister(conns_.base());
    conns_registered_ = false;
    conns_ = host::detail::shm_segment{};  // unmaps and closes; the memory goes with the last rank's mapping
    if (registered_) cudaHostUnregister(page_.base());
    registered_ = false;
    page_ = host::detail::shm_segment{};  // unmaps, closes, drops the liveness lock
    if (mine_) cudaFree(mine_);
    mine_ = nullptr;
    if (saved >= 0) cudaSetDevice(saved);
  }

  int rank_, n_, device_;
  std::chrono::milliseconds timeout_;
  page_layout layout_;
  std::uint64_t rounds_ = 0;  // mailbox rounds so far: equal on every rank
};

// The bootstrap a split's group joins with: a view of the parent's mailbox. Every round is one
// of the parent's (every parent rank takes part: non-members post nothing); all_gather keeps the
// members' posts, in new-rank order. world::join's exchanges only; send and recv are refused.
class mailbox_bootstrap {
 public:
  mailbox_bootstrap(process_resources& parent, std::vector<int> members, int rank) : parent_(&parent), members_(std::move(members)), rank_(rank) {}
  int rank() const noexcept { return rank_; }
  int size() const noexcept { return static_cast<int>(members_.size()); }
  int rounds() const noexcept { return rounds_; }
  void all_gather(std::span<const std::byte> in, std::span<std::byte> out) {
    ++rounds_;
    const auto all = parent_->post_round(in, "split");
    for (std::size_t i = 0; i < members_.size(); ++i) {
      const auto& v = all[static_cast<std::size_t>(members_[i])];
      if (v.size() != in.size())
        collcomm::detail::fail(errc::invalid_usage, "split", rank_, "new rank " + std::to_string(i) + " gave " + std::to_string(v.size()) + " bytes, this rank " + std::to_string(in.size()));
      std::memcpy(out.data() + i * in.size(), v.data(), v.size());
    }
  }
  void barrier() { all_gather({}, {}); }
  void send(int, std::span<const std::byte>) { refuse(); }
  void recv(int, std::span<std::byte>) { refuse(); }

 private:
  [[noreturn]] void refuse() const { collcomm::detail::fail(errc::internal, "split", rank_, "a split's bootstrap carries all-gathers only"); }
  process_resources* parent_;
  std::vector<int> members_;
  int rank_;
  int rounds_ = 0;
};

// The mailbox rounds world::join makes (hello, memory records, statuses): the ranks of a split
// that join nothing, or whose join failed early, make up the rest so every rank makes as many.
inline constexpr int join_rounds = 3;

}  // namespace ipc_detail

template <bootstrap::bootstrap_like B>
std::shared_ptr<world> world::join(B& boot, int device, options opts) {
  namespace hd = host::detail;
  const int n = boot.size(), me = boot.rank();
  const char* where = "gpu::world::join";
  check_options(n, opts, where, me);
  int ndev = 0;
  detail::cuda_check(cudaGetDeviceCount(&ndev), "cudaGetDeviceCount", me);
  if (device < 0 || device >= ndev)
    detail::fail(errc::invalid_argument, where, me, "argument 'device' = " + std::to_string(device) + " does not exist (" + std::to_string(ndev) + " visible)");
  detail::device_guard guard(device);
  cudaDeviceProp prop{};
  detail::cuda_check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties", me);

  // 1. hello: who is where, and the options.
  ipc_detail::hello_record hello{};
  hello.token = me == 0 ? hd::random_token() : 0;
  hello.pid = static_cast<std::int64_t>(::getpid());
  hello.host = ipc_detail::host_id();
  std::memcpy(hello.uuid, &prop.uuid, sizeof hello.uuid);
  hello.sms = prop.multiProcessorCount;
  hello.channels = opts.channels;
  hello.slots = opts.slots;
  hello.slot_bytes = opts.slot_bytes;
  hello.window_bytes = opts.window_bytes;
  hello.connections = static_cast<std::int32_t>(opts.connections);
  const auto hellos = ipc_detail::all_gather_records(boot, hello);
  for (int q = 1; q < n; ++q) {
    const auto &h = hellos[static_cast<std::size_t>(q)], &h0 = hellos[0];
    auto differs = [&](const char* name, auto mine, auto root) {
      if (mine != root)
        detail::fail(errc::invalid_argument, where, me,
                     "rank " + std::to_string(q) + " passes option '" + name + "' = " + std::to_string(mine) + ", rank 0 passes " +
                         std::to_string(root) + ": every rank must pass the same options");
    };
    differs("channels", h.channels, h0.channels);
    differs("slots", h.slots, h0.slots);
    differs("slot_bytes", h.slot_bytes, h0.slot_bytes);
    differs("window_bytes", h.window_bytes, h0.window_bytes);
    differs("connections (0 device, 1 host)", h.connections, h0.connections);
  }
  // Staged: the connections sit in host memory that every process maps; no peer's GPU memory is
  // opened (the GPUs need no peer access), and only FIFO schedules run (the direct ones are
  // refused by the communicators), so no window is made either.
  const bool staged = opts.connections == placement::host;
  auto same_gpu = [&](int a, int b) {
    const auto &x = hellos[static_cast<std::size_t>(a)], &y = hellos[static_cast<std::size_t>(b)];
    return x.host == y.host && std::memcmp(x.uuid, y.uuid, sizeof x.uuid) == 0;
  };
  auto sharing = [&](int q) {
    int k = 0;
    for (int p = 0; p < n; ++p) k += same_gpu(p, q);
    return k;
  };
  const int on_gpu = sharing(me);
  if (on_gpu > kernels::max_launch_ranks)
    detail::fail(errc::invalid_argument, where, me, std::to_string(on_gpu) + " ranks on this rank's GPU; one GPU takes at most " + std::to_string(kernels::max_launch_ranks));
  if (opts.channels == 0) {  // every rank computes the same: the SMs of the most shared GPU
    int most = 32;
    for (int q = 0; q < n; ++q) most = std::min(most, std::max(1, hellos[static_cast<std::size_t>(q)].sms / sharing(q)));
    opts.channels = most;
  }
  const int nc = opts.channels;

  std::shared_ptr<world> w(new world(process_tag{}, n, opts));
  w->devices_.assign(static_cast<std::size_t>(n), -1);
  for (int q = 0; q < n; ++q)
    if (same_gpu(q, me)) w->devices_[static_cast<std::size_t>(q)] = device;
  auto res = std::make_shared<ipc_detail::process_resources>(me, n, device, opts.timeout);
  const ipc_detail::page_layout& page = res->layout();

  // This rank's allocation: connections | barrier lines | window (input, output). Staged: none;
  // the connections of every receiver, in receiver order, make one shared segment instead.
  const std::size_t per_conn = opts.slot_bytes * opts.slots + sizeof(std::uint64_t) * (opts.slots + 2);
  const std::size_t conn_bytes = per_conn * static_cast<std::size_t>(nc) * n;  // one receiver's
  const std::size_t barrier_at = ipc_detail::align_up(conn_bytes, 256);
  const std::size_t window_at = ipc_detail::align_up(barrier_at + 128 * static_cast<std::size_t>(nc), 256);
  // The window: input, output (direct schedules staged by copies), then two halves where kernels
  // stage their input themselves, alternating call by call (communicator::run_staged).
  const std::size_t total = staged ? 0 : window_at + 4 * opts.window_bytes;
  const std::size_t staged_bytes = staged ? ipc_detail::align_up(conn_bytes * n, 4096) : 0;

  // Both names are known to every rank before either exists, and every rank unlinks both on
  // every way out of join (host/segment.hpp): nothing stays in /dev/shm, even after a SIGKILL.
  const std::string name = hd::segment_name(hellos[0].token, "g");
  const std::string conns_name = hd::segment_name(hellos[0].token, "gc");
  auto unlink_names = [&] {
    hd::shm_segment::unlink(name);
    if (staged) hd::shm_segment::unlink(conns_name);
  };
  try {
    // 2. Every rank exports its memory; rank 0 also makes the control page.
    std::string err;
    ipc_detail::memory_record rec{};
    try {
      if (!staged) {
        detail::cuda_check(cudaMalloc(&res->mine_, total), "gpu::world::join: cudaMalloc", me);
        detail::cuda_check(cudaMemset(res->mine_, 0, total), "gpu::world::join: cudaMemset", me);
        detail::cuda_check(cudaStreamSynchronize(nullptr), "gpu::world::join: cudaStreamSynchronize", me);
        detail::cuda_check(cudaIpcGetMemHandle(&rec.handle, res->mine_), "cudaIpcGetMemHandle", me);
        rec.base = reinterpret_cast<std::uintptr_t>(res->mine_);
      }
      rec.bytes = total;
      if (me == 0) res->page_ = hd::shm_segment::create(name, page.bytes, page.bytes, me);
      // Staged: every page allocated now (a page that tmpfs cannot supply later would be a SIGBUS;
      // registration pins them all anyway), zero: every counter starts at 0.
      if (me == 0 && staged) res->conns_ = hd::shm_segment::create(conns_name, staged_bytes, staged_bytes, me);
    } catch (const error& e) {
      err = e.what();
    }
    std::memcpy(rec.status, err.data(), std::min(err.size(), sizeof rec.status - 1));
    const auto recs = ipc_detail::all_gather_records(boot, rec);
    std::vector<std::string> errs(static_cast<std::size_t>(n));
    for (int q = 0; q < n; ++q) errs[static_cast<std::size_t>(q)] = std::string(recs[static_cast<std::size_t>(q)].status, strnlen(recs[static_cast<std::size_t>(q)].status, sizeof rec.status));
    ipc_detail::check_joined(errs, where, me);

    // 3. Every rank maps the page and its peers' memory, and builds its tables.
    try {
      if (me != 0) res->page_ = hd::shm_segment::open(name, page.bytes, me);
      res->page_.lock_rank(me);
      detail::cuda_check(cudaHostRegister(res->page(), page.bytes, cudaHostRegisterMapped | cudaHostRegisterPortable), "cudaHostRegister (control page)", me);
      res->registered_ = true;
      void* dpage = nullptr;
      detail::cuda_check(cudaHostGetDevicePointer(&dpage, res->page(), 0), "cudaHostGetDevicePointer (control page)", me);
      char* dconns = nullptr;  // staged: the connections segment as this process's GPU addresses it
      if (staged) {
        if (me != 0) res->conns_ = hd::shm_segment::open(conns_name, staged_bytes, me);
        detail::cuda_check(cudaHostRegister(res->conns_.base(), staged_bytes, cudaHostRegisterMapped | cudaHostRegisterPortable),
                           "cudaHostRegister (connections in host memory)", me);
        res->conns_registered_ = true;
        void* p = nullptr;
        detail::cuda_check(cudaHostGetDevicePointer(&p, res->conns_.base(), 0), "cudaHostGetDevicePointer (connections in host memory)", me);
        dconns = static_cast<char*>(p);
      }

      res->opened_.assign(static_cast<std::size_t>(n), nullptr);
      std::vector<char*> base(static_cast<std::size_t>(n));  // (rank) its allocation, in this address space; staged: none
      for (int q = 0; q < n && !staged; ++q) {
        const auto& r = recs[static_cast<std::size_t>(q)];
        if (r.bytes != total)
          detail::fail(errc::internal, where, me, "rank " + std::to_string(q) + " allocated " + std::to_string(r.bytes) + " bytes, this rank " + std::to_string(total));
        const auto &hq = hellos[static_cast<std::size_t>(q)], &hm = hellos[static_cast<std::size_t>(me)];
        if (q == me) {
          base[static_cast<std::size_t>(q)] = static_cast<char*>(res->mine_);
        } else if (hq.pid == hm.pid && hq.host == hm.host) {  // legacy IPC cannot open our own handles
          base[static_cast<std::size_t>(q)] = reinterpret_cast<char*>(static_cast<std::uintptr_t>(r.base));
        } else {
          void* p = nullptr;
          detail::cuda_check(cudaIpcOpenMemHandle(&p, r.handle, cudaIpcMemLazyEnablePeerAccess),
                             ("cudaIpcOpenMemHandle (rank " + std::to_string(q) + "'s memory)").c_str(), me);
          res->opened_[static_cast<std::size_t>(q)] = p;
          base[static_cast<std::size_t>(q)] = static_cast<char*>(p);
        }
      }

      std::vector<transport::fifo_view> table(static_cast<std::size_t>(nc) * n * n);
      for (int dst = 0; dst < n; ++dst)
        for (int c = 0; c < nc; ++c)
          for (int src = 0; src < n; ++src) {
            char* recv_base = staged ? dconns + conn_bytes * static_cast<std::size_t>(dst) : base[static_cast<std::size_t>(dst)];
            char* b = recv_base + per_conn * (static_cast<std::size_t>(c) * n + src);
            auto* sizes = reinterpret_cast<std::uint64_t*>(b + opts.slot_bytes * opts.slots);
            table[(static_cast<std::size_t>(c) * n + src) * n + dst] = {b, sizes, sizes + opts.slots, sizes + opts.slots + 1};
          }
      auto* t = static_cast<transport::fifo_view*>(w->alloc(device, sizeof(transport::fifo_view) * table.size()));
      detail::cuda_check(cudaMemcpy(t, table.data(), sizeof(transport::fifo_view) * table.size(), cudaMemcpyHostToDevice), "gpu::world::join: cudaMemcpy", me);
      w->fifo_tables_.push_back({device, t});

      // Direct primitives read peers' buffers from this table: every rank's window, on every channel
      // (staged: left null; FIFO schedules only write their own entry, which no one reads).
      std::vector<transport::buffer_pair> buffers(static_cast<std::size_t>(nc) * n);
      for (int c = 0; c < nc && !staged; ++c)
        for (int q = 0; q < n; ++q) {
          char* win = base[static_cast<std::size_t>(q)] + window_at;
          buffers[static_cast<std::size_t>(c) * n + q] = {win, win + opts.window_bytes};
        }
      w->base_.buffers = static_cast<transport::buffer_pair*>(w->alloc(device, sizeof(transport::buffer_pair) * buffers.size()));
      detail::cuda_check(cudaMemcpy(w->base_.buffers, buffers.data(), sizeof(transport::buffer_pair) * buffers.size(), cudaMemcpyHostToDevice),
                         "gpu::world::join: cudaMemcpy", me);

      transport::nvlink_device_handle& h = w->base_;
      h.nranks = n;
      h.nchannels = nc;
      h.slots = static_cast<std::uint32_t>(opts.slots);
      h.slot_bytes = static_cast<std::uint32_t>(opts.slot_bytes);
      h.timeout_ns = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(opts.timeout).count());
      // Counters of ranks all on one GPU meet in its L2 whichever process wrote them (with MPS its
      // clients share the GPU; without it, contexts switch): device scope, as a world of threads
      // on one GPU. Ranks on several GPUs need system scope. (The abort word and the stall records
      // are host memory and always use system scope.)
      // Staged connections are host memory, written and read over PCIe: system scope always.
      h.system_scope = staged || on_gpu != n;
      h.steps = static_cast<std::uint64_t*>(w->alloc(device, sizeof(std::uint64_t) * n * nc * n * 2));
      h.staged_calls = staged ? nullptr : static_cast<std::uint64_t*>(w->alloc(device, sizeof(std::uint64_t) * nc));
      h.window_bytes = staged ? 0 : opts.window_bytes;
      // The barrier is the direct schedules' alone (an atomic add, which host memory reached over
      // PCIe does not promise). Staged, no direct schedule runs (refused on the host), so this
      // rank's lines are its own: a barrier reached anyway would wait for arrivals that never come
      // and end by the timeout, an error, never a wrong result.
      h.barrier = staged ? static_cast<std::uint64_t*>(w->alloc(device, 128 * static_cast<std::size_t>(nc)))
                         : reinterpret_cast<std::uint64_t*>(base[0] + barrier_at);
      h.barrier_stride = 128 / sizeof(std::uint64_t);
      h.abort = reinterpret_cast<std::uint32_t*>(static_cast<char*>(dpage) + ipc_detail::page_layout::abort_word);
      h.abort_on_host = true;
      h.stall = reinterpret_cast<transport::stall_record*>(static_cast<char*>(dpage) + page.stall);
    } catch (const error& e) {
      err = e.what();
    }
    errs = hd::exchange_status(boot, err);  // every rank mapped everything (or said why not)
    unlink_names();
    ipc_detail::check_joined(errs, where, me);
  } catch (...) {
    unlink_names();
    throw;
  }
  res->joined_ = true;

  auto g = std::make_unique<launch_group>();
  g->device = device;
  g->ranks = {me};
  g->present.assign(1, 0);
  w->groups_.push_back(std::move(g));
  w->stall_view_ = res->page() + page.stall;

  ipc_detail::process_resources* r = res.get();  // owned by proc_.resources, which outlives these
  process_view& v = w->proc_;
  v.rank = me;
  v.ranks_on_gpu = on_gpu;
  v.abort_word = r->word(ipc_detail::page_layout::abort_word);
  v.abort_text = reinterpret_cast<const char*>(r->page() + ipc_detail::page_layout::abort_text);
  v.window = staged ? nullptr : reinterpret_cast<std::byte*>(static_cast<char*>(r->mine_) + window_at);
  v.window_bytes = staged ? 0 : opts.window_bytes;
  v.dead_ranks = [r] { return r->dead_ranks(); };
  v.abort = [r](int rank, const std::string& why) { r->abort(rank, why); };
  v.mailbox = [r](std::span<const std::byte> mine) { return r->post_round(mine, "split"); };
  v.split_group = [r](std::vector<int> members, int new_rank, int device, options o) -> std::shared_ptr<world> {
    ipc_detail::mailbox_bootstrap sub(*r, std::move(members), new_rank);
    std::shared_ptr<world> child;
    std::exception_ptr failed;
    try {
      if (new_rank >= 0) child = join(sub, device, o);
    } catch (...) {
      failed = std::current_exception();
    }
    while (sub.rounds() < ipc_detail::join_rounds) sub.barrier();  // keep every rank's round count equal
    if (failed) std::rethrow_exception(failed);
    return child;
  };
  v.resources = std::move(res);
  return w;
}

inline std::shared_ptr<world> world::split(int rank, int color, int key) {
  const char* what = "split";
  if (!is_process() || rank != proc_.rank)
    detail::fail(errc::invalid_usage, what, rank, "split and dup need a GPU world of processes (communicator(bootstrap, device)); a world of threads has no control page to share");
  check_usable(what, rank);
  if (color < 0) color = no_color;
  const std::int32_t mine[2] = {color, key};
  const auto posts = proc_.mailbox(std::as_bytes(std::span<const std::int32_t>(mine)));
  std::vector<int> members;
  std::vector<std::int32_t> keys(posts.size());
  for (std::size_t q = 0; q < posts.size(); ++q) {
    std::int32_t ck[2] = {no_color, 0};
    if (posts[q].size() == sizeof ck) std::memcpy(ck, posts[q].data(), sizeof ck);
    keys[q] = ck[1];
    if (color >= 0 && ck[0] == color) members.push_back(static_cast<int>(q));
  }
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return keys[static_cast<std::size_t>(a)] < keys[static_cast<std::size_t>(b)]; });
  const int new_rank = color >= 0 ? static_cast<int>(std::find(members.begin(), members.end(), rank) - members.begin()) : -1;
  return proc_.split_group(std::move(members), new_rank, device_of(rank), opts_);
}

}  // namespace gpu
COLLCOMM_NAMESPACE_END
