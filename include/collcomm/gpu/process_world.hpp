// collcomm/gpu/process_world.hpp — GPU worlds of processes: join_world (over CUDA IPC, or staged
// through shared host memory) and split.
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
//       a barrier line per channel (rank 0's are the world's), its staging window (4 x
//       options::window_bytes: direct algorithms' input and output, see gpu/communicator.hpp)
//   each process's own GPU memory: the FIFO table in its address space, its message counts
//       (steps), the direct primitives' buffer table (pre-filled with every rank's window)
//   a control page of POSIX shared memory, registered with cudaHostRegister(mapped) in every
//       process: the abort word (kernels poll it; host abort() writes it), who aborted and why,
//       the stall records (a kernel's timed-out wait writes its rank's; every rank reads all of
//       them with plain loads after its stream synchronized), and a departure flag per rank.
//       Made as detail/shm_segment.hpp's segments are: rank 0 creates it under a fresh random name
//       and sends that name with its memory record, every rank maps it, the name is unlinked at
//       once, so nothing stays in /dev/shm, even after SIGKILL. Each rank holds its liveness lock
//       on it: a stall names the ranks whose process is gone.
// Counters use device scope when every rank is on one GPU, system scope otherwise. Each process's
// kernels read an abort word of their own GPU's memory at entry (the shared word is host memory).
//
// Staged worlds (options::connections = placement::host: transport::pcie_staged, for
// GPUs without peer access). No rank exports or opens GPU memory: rank 0 also creates a second
// segment (kind "gc"), holding every connection of the world, receiver by receiver, each
// (channel, src) a FIFO of data slots | sizes | tail | head, fully allocated and zero; every rank
// maps it, registers it (cudaHostRegister mapped | portable) and builds its FIFO table from its own
// cudaHostGetDevicePointer. It is unlinked with the control page, at the same points, and
// unregistered and unmapped on destroy; the memory goes with the last mapping. Kernels reach it
// at system scope with plain loads and stores of the counters (no atomic read-modify-write over
// PCIe). No window is made (window_bytes is ignored: direct algorithms do not compile over
// pcie_staged), and the barrier lines are this rank's own device memory, which FIFO schedules
// never touch.
//
// Set-up is three bootstrap exchanges: hello (pid, host, GPU uuid and SM count, options), the
// IPC handles (with each rank's status), and a last status after every rank mapped everything.
// A failure on any rank is an error on every rank naming it; every wait is the bootstrap's.
// Destruction: close the peers' mappings, say "departed", wait (bounded by the timeout; a rank
// whose process is gone counts as departed) until every rank did, then free this rank's memory.
// So a rank never frees memory that a peer still maps.
//
// split(color, key) and dup() (gpu/communicator.hpp) need no bootstrap: the control
// page also holds a mailbox (two 512-byte posts per rank, written in rounds that every rank of the
// world takes part in, bounded by the timeout, a dead rank named). One round exchanges colors and
// keys; then each group runs world::join over a view of the mailbox that keeps its members' posts
// (mailbox_bootstrap), while ranks of no group post nothing for join's rounds (join_rounds).
//
// Several processes on ONE GPU: automatic channels are the SMs shared out among them, so their
// kernels can be resident together — which needs MPS: without it the processes' contexts
// time-slice and each wait may take a slice (~2 ms); correct, thousands of times slower.
#pragma once

#include <collcomm/bootstrap/bootstrap.hpp>
#include <collcomm/detail/cuda.hpp>
#include <collcomm/detail/join.hpp>
#include <collcomm/detail/shm_segment.hpp>
#include <collcomm/gpu/options.hpp>
#include <collcomm/gpu/process_resources.hpp>
#include <collcomm/gpu/world.hpp>
#include <collcomm/kernels/collective_kernel.cuh>
#include <collcomm/transport/connections.hpp>

#include <cuda_runtime.h>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <vector>

COLLCOMM_NAMESPACE_BEGIN
namespace gpu {
namespace ipc_detail {

struct hello_record {
  std::uint64_t token;  // rank 0's; unused
  std::int64_t pid;
  std::uint64_t host;
  unsigned char uuid[16];  // the GPU (device numbers differ across processes)
  std::int32_t sms, channels, slots;
  std::int32_t connections;  // options::connections: placement::host stages every connection through host memory
  std::uint64_t slot_bytes, window_bytes;
};

struct memory_record {
  cudaIpcMemHandle_t handle;
  std::uint64_t base;  // the raw pointer, for ranks of the same process
  std::uint64_t bytes;
  char page_name[72];   // rank 0: the control page's segment (detail/shm_segment.hpp: Names)
  char conns_name[72];  // rank 0, staged: the connections' segment
  char status[288];     // "" or why this rank failed
};
// A split's join carries it in one mailbox post.
static_assert(sizeof(memory_record) <= page_layout::post_bytes);

template <std::size_t N>
void set_text(char (&dst)[N], const std::string& text) noexcept {
  const std::size_t k = std::min(text.size(), N - 1);
  std::memcpy(dst, text.data(), k);
  dst[k] = '\0';
}
template <std::size_t N>
std::string text_of(const char (&src)[N]) {
  return std::string(src, strnlen(src, N));
}

// The bootstrap a split's group joins with: a view of the parent's mailbox. Every round is one
// of the parent's (every parent rank takes part: non-members post nothing); all_gather keeps the
// members' posts, in new-rank order. join_world's exchanges only; send and recv are refused.
class mailbox_bootstrap {
 public:
  mailbox_bootstrap(process_resources& parent, std::vector<int> members, int rank)
      : parent_(&parent), members_(std::move(members)), rank_(rank) {}
  int rank() const noexcept { return rank_; }
  int size() const noexcept { return static_cast<int>(members_.size()); }
  int rounds() const noexcept { return rounds_; }
  void all_gather(std::span<const std::byte> in, std::span<std::byte> out) {
    ++rounds_;
    const auto all = parent_->post_round(in, "split");
    for (std::size_t i = 0; i < members_.size(); ++i) {
      const auto& v = all[static_cast<std::size_t>(members_[i])];
      if (v.size() != in.size())
        collcomm::detail::fail(errc::invalid_usage, "split", rank_,
                               "new rank " + std::to_string(i) + " gave " + std::to_string(v.size()) +
                                   " bytes, this rank " + std::to_string(in.size()));
      std::memcpy(out.data() + i * in.size(), v.data(), v.size());
    }
  }
  void barrier() { all_gather({}, {}); }
  void send(int, std::span<const std::byte>) { refuse(); }
  void recv(int, std::span<std::byte>) { refuse(); }

 private:
  [[noreturn]] void refuse() const {
    collcomm::detail::fail(errc::internal, "split", rank_, "a split's bootstrap carries all-gathers only");
  }
  process_resources* parent_;
  std::vector<int> members_;
  int rank_;
  int rounds_ = 0;
};

// The mailbox rounds join_world makes (hello, memory records, statuses): the ranks of a split
// that join nothing, or whose join failed early, make up the rest so every rank makes as many.
inline constexpr int join_rounds = 3;

}  // namespace ipc_detail

// A world of boot.size() processes, of which this process drives rank boot.rank() on its
// `device`. Collective over the bootstrap's ranks; every rank passes the same options (timeout
// aside), else errc::invalid_argument on every rank. The environment is applied to the options
// (gpu/options.hpp).
template <bootstrap::bootstrap_like B>
std::shared_ptr<world> join_world(B& boot, int device, options opts) {
  namespace cd = collcomm::detail;
  opts = with_environment(opts);
  const int n = boot.size(), me = boot.rank();
  const char* where = "gpu::join_world";
  check_options(n, opts, where, me);
  int ndev = 0;
  detail::cuda_check(cudaGetDeviceCount(&ndev), "cudaGetDeviceCount", me);
  if (device < 0 || device >= ndev)
    detail::fail(
        errc::invalid_argument, where, me,
        "argument 'device' = " + std::to_string(device) + " does not exist (" + std::to_string(ndev) + " visible)");
  detail::device_guard guard(device);
  cudaDeviceProp prop{};
  detail::cuda_check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties", me);

  // 1. hello: who is where, and the options.
  ipc_detail::hello_record hello{};
  hello.token = me == 0 ? cd::random_token() : 0;
  hello.pid = static_cast<std::int64_t>(::getpid());
  hello.host = cd::host_id();
  std::memcpy(hello.uuid, &prop.uuid, sizeof hello.uuid);
  hello.sms = prop.multiProcessorCount;
  hello.channels = opts.channels;
  hello.slots = opts.slots;
  hello.slot_bytes = opts.slot_bytes;
  hello.window_bytes = opts.window_bytes;
  hello.connections = static_cast<std::int32_t>(opts.connections);
  const auto hellos = cd::all_gather_records(boot, hello);
  for (int q = 1; q < n; ++q) {
    const auto &h = hellos[static_cast<std::size_t>(q)], &h0 = hellos[0];
    auto differs = [&](const char* name, auto mine, auto root) {
      if (mine != root)
        detail::fail(errc::invalid_argument, where, me,
                     "rank " + std::to_string(q) + " passes option '" + name + "' = " + std::to_string(mine) +
                         ", rank 0 passes " + std::to_string(root) + ": every rank must pass the same options");
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
    detail::fail(errc::invalid_argument, where, me,
                 std::to_string(on_gpu) + " ranks on this rank's GPU; one GPU takes at most " +
                     std::to_string(kernels::max_launch_ranks));
  if (opts.channels == 0) {  // every rank computes the same: the SMs of the most shared GPU
    int most = 32;
    for (int q = 0; q < n; ++q)
      most = std::min(most, std::max(1, hellos[static_cast<std::size_t>(q)].sms / sharing(q)));
    opts.channels = most;
  }
  const int nc = opts.channels;

  std::shared_ptr<world> w(new world(world::process_tag{}, n, opts));
  w->devices_.assign(static_cast<std::size_t>(n), -1);
  for (int q = 0; q < n; ++q)
    if (same_gpu(q, me)) w->devices_[static_cast<std::size_t>(q)] = device;
  auto res = std::make_shared<ipc_detail::process_resources>(me, n, device, opts.timeout);
  const ipc_detail::page_layout& page = res->layout();

  // This rank's allocation: connections | barrier lines | window (input, output). Staged: none;
  // the connections of every receiver, in receiver order, make one shared segment instead.
  const transport::connection_layout layout{n, nc, opts.slots, opts.slot_bytes};
  // Every size from here on, computed without wrapping (an overflow names the options).
  const cd::option_sizes z(where, me,
                           "argument 'nranks' and options 'channels', 'slots', 'slot_bytes', 'window_bytes'");
  const std::size_t nn = static_cast<std::size_t>(n), ncs = static_cast<std::size_t>(nc);
  const std::size_t slots = static_cast<std::size_t>(opts.slots);
  // layout.per_receiver(): nranks x channels x layout.per_connection(), each connection
  // (slots x slot_bytes + 8 x (slots + 2)) rounded up to 128 bytes
  const std::size_t conn_bytes = z.mul(
      z.mul(nn, ncs),
      z.align_up(z.add(z.mul(slots, opts.slot_bytes), z.mul(sizeof(std::uint64_t), z.add(slots, 2))), 128));
  if (conn_bytes != layout.per_receiver())
    cd::fail(errc::internal, where, me, "the connections' size disagrees with transport::connection_layout");
  const std::size_t barrier_at = z.align_up(conn_bytes, 256);
  const std::size_t window_at = z.align_up(z.add(barrier_at, z.mul(128, ncs)), 256);
  // The window: input, output (direct schedules staged by copies), then two halves where kernels
  // stage their input themselves, alternating call by call (communicator::run_staged), then the
  // push area of small one_shot calls (transport/device_handle.hpp, push_area_bytes).
  const std::size_t total = staged ? 0
                                   : z.add(z.add(window_at, z.mul(4, opts.window_bytes)),
                                           z.mul(z.mul(2, nn), z.add(z.mul(16, ncs), 2 * transport::push_max_bytes)));
  if (!staged && total - z.add(window_at, z.mul(4, opts.window_bytes)) != transport::push_area_bytes(n, nc))
    cd::fail(errc::internal, where, me, "the push area's size disagrees with transport::push_area_bytes");
  const std::size_t staged_bytes = staged ? z.align_up(z.mul(conn_bytes, nn), 4096) : 0;
  const std::size_t steps_bytes =
      z.mul(z.mul(z.mul(nn, ncs), nn), 2 * sizeof(std::uint64_t));  // (rank, channel, peer, 2)

  // Rank 0 creates both segments under fresh names and sends them with its memory record; every
  // rank unlinks both on every way out of join once it knows them (detail/shm_segment.hpp).
  std::string name, conns_name;
  auto unlink_names = [&] {
    cd::shm_segment::unlink(name);
    cd::shm_segment::unlink(conns_name);
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
      if (me == 0) {
        res->page_ = cd::shm_segment::create("g", page.bytes, me);
        name = res->page_.name();
      }
      // Staged: every page allocated now, zero: every counter starts at 0.
      if (me == 0 && staged) {
        res->conns_ = cd::shm_segment::create("gc", staged_bytes, me);
        conns_name = res->conns_.name();
      }
    } catch (const error& e) {
      err = e.what();
    }
    ipc_detail::set_text(rec.page_name, name);
    ipc_detail::set_text(rec.conns_name, conns_name);
    ipc_detail::set_text(rec.status, err);
    const auto recs = cd::all_gather_records(boot, rec);
    name = ipc_detail::text_of(recs[0].page_name);
    conns_name = ipc_detail::text_of(recs[0].conns_name);
    std::vector<std::string> errs(static_cast<std::size_t>(n));
    for (int q = 0; q < n; ++q)
      errs[static_cast<std::size_t>(q)] = ipc_detail::text_of(recs[static_cast<std::size_t>(q)].status);
    cd::check_statuses(errs, where, me, "the GPU world");

    // 3. Every rank maps the page and its peers' memory, and builds its tables.
    try {
      if (me != 0) res->page_ = cd::shm_segment::open(name, page.bytes, me);
      res->page_.lock_rank(me);
      detail::cuda_check(cudaHostRegister(res->page(), page.bytes, cudaHostRegisterMapped | cudaHostRegisterPortable),
                         "cudaHostRegister (control page)", me);
      res->registered_ = true;
      void* dpage = nullptr;
      detail::cuda_check(cudaHostGetDevicePointer(&dpage, res->page(), 0), "cudaHostGetDevicePointer (control page)",
                         me);
      char* dconns = nullptr;  // staged: the connections segment as this process's GPU addresses it
      if (staged) {
        if (me != 0) res->conns_ = cd::shm_segment::open(conns_name, staged_bytes, me);
        detail::cuda_check(
            cudaHostRegister(res->conns_.base(), staged_bytes, cudaHostRegisterMapped | cudaHostRegisterPortable),
            "cudaHostRegister (connections in host memory)", me);
        res->conns_registered_ = true;
        void* p = nullptr;
        detail::cuda_check(cudaHostGetDevicePointer(&p, res->conns_.base(), 0),
                           "cudaHostGetDevicePointer (connections in host memory)", me);
        dconns = static_cast<char*>(p);
      }

      res->opened_.assign(static_cast<std::size_t>(n), nullptr);
      std::vector<char*> base(
          static_cast<std::size_t>(n));  // (rank) its allocation, in this address space; staged: none
      for (int q = 0; q < n && !staged; ++q) {
        const auto& r = recs[static_cast<std::size_t>(q)];
        if (r.bytes != total)
          detail::fail(errc::internal, where, me,
                       "rank " + std::to_string(q) + " allocated " + std::to_string(r.bytes) + " bytes, this rank " +
                           std::to_string(total));
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

      std::vector<char*> receiver(static_cast<std::size_t>(n));
      for (int dst = 0; dst < n; ++dst)
        receiver[static_cast<std::size_t>(dst)] =
            staged ? dconns + conn_bytes * static_cast<std::size_t>(dst) : base[static_cast<std::size_t>(dst)];
      w->install_fifo_table(layout.table(receiver), {device});
      // Direct primitives read peers' buffers from this table: every rank's window, on every channel
      // (staged: left null; FIFO schedules only write their own entry, which no one reads).
      std::vector<transport::buffer_pair> buffers(static_cast<std::size_t>(nc) * n);
      for (int c = 0; c < nc && !staged; ++c)
        for (int q = 0; q < n; ++q) {
          char* win = base[static_cast<std::size_t>(q)] + window_at;
          buffers[static_cast<std::size_t>(c) * n + q] = {win, win + opts.window_bytes};
        }
      w->base_.buffers =
          static_cast<transport::buffer_pair*>(w->alloc(device, sizeof(transport::buffer_pair) * buffers.size()));
      detail::cuda_check(cudaMemcpy(w->base_.buffers, buffers.data(), sizeof(transport::buffer_pair) * buffers.size(),
                                    cudaMemcpyHostToDevice),
                         "gpu::world::join: cudaMemcpy", me);

      transport::handle_fields& h = w->base_;
      h.nranks = n;
      h.nchannels = nc;
      h.slots = static_cast<std::uint32_t>(opts.slots);
      h.slot_bytes = static_cast<std::uint32_t>(opts.slot_bytes);
      h.timeout_ns =
          static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(opts.timeout).count());
      // Counters of ranks all on one GPU meet in its L2 whichever process wrote them (with MPS its
      // clients share the GPU; without it, contexts switch): device scope, as a world of threads
      // on one GPU. Ranks on several GPUs need system scope. (The abort word and the stall records
      // are host memory and always use system scope.)
      // Staged connections are host memory, written and read over PCIe: system scope always.
      w->scope_is_device_ = !staged && on_gpu == n;
      h.steps = static_cast<std::uint64_t*>(w->alloc(device, steps_bytes));
      // The channels' staged-call counts, then per channel the last epoch of pushed calls whose
      // push area this rank cleaned (kernels/collective_kernel.cuh).
      h.staged_calls = staged ? nullptr : static_cast<std::uint64_t*>(w->alloc(device, sizeof(std::uint64_t) * 2 * nc));
      h.window_bytes = staged ? 0 : opts.window_bytes;
      // The barrier is the direct schedules' alone (an atomic add, which host memory reached over
      // PCIe does not promise). Staged, no direct schedule runs (refused on the host), so this
      // rank's lines are its own: a barrier reached anyway would wait for arrivals that never come
      // and end by the timeout, an error, never a wrong result.
      h.barrier = staged ? static_cast<std::uint64_t*>(w->alloc(device, 128 * static_cast<std::size_t>(nc)))
                         : reinterpret_cast<std::uint64_t*>(base[0] + barrier_at);
      h.barrier_stride = 128 / sizeof(std::uint64_t);
      h.abort = reinterpret_cast<std::uint32_t*>(static_cast<char*>(dpage) + ipc_detail::page_layout::abort_word);
      h.entry_abort = static_cast<std::uint32_t*>(w->alloc(device, sizeof(std::uint32_t)));
      h.stall = reinterpret_cast<transport::stall_record*>(static_cast<char*>(dpage) + page.stall);
    } catch (const error& e) {
      err = e.what();
    }
    errs = cd::exchange_status(boot, err);  // every rank mapped everything (or said why not)
    unlink_names();
    cd::check_statuses(errs, where, me, "the GPU world");
  } catch (...) {
    unlink_names();
    throw;
  }
  res->joined_ = true;

  auto g = std::make_unique<world::launch_group>();
  g->device = device;
  g->ranks = {me};
  g->present.assign(1, 0);
  w->groups_.push_back(std::move(g));
  w->stall_view_ = res->page() + page.stall;

  world::process_view& v = w->proc_;
  v.rank = me;
  v.ranks_on_gpu = on_gpu;
  v.window = staged ? nullptr : reinterpret_cast<std::byte*>(static_cast<char*>(res->mine_) + window_at);
  v.window_bytes = staged ? 0 : opts.window_bytes;
  v.resources = std::move(res);
  return w;
}

// The world of the ranks of `parent` that pass this color (>= 0), ordered by (key, rank); null
// for a negative color. Collective over every rank of a world of processes, in the same order as
// their other split calls: one round of the control page's mailbox exchanges colors and keys, and
// each group joins over a view of the mailbox (mailbox_bootstrap).
inline std::shared_ptr<world> split_world(world& parent, int rank, int color, int key) {
  const char* what = "split";
  if (!parent.is_process() || rank != parent.process().rank)
    detail::fail(errc::invalid_usage, what, rank,
                 "split and dup need a GPU world of processes (communicator(bootstrap, device)); a world of threads "
                 "has no control page to share");
  parent.check_usable(what, rank);
  if (color < 0) color = no_color;
  const std::int32_t mine[2] = {color, key};
  ipc_detail::process_resources& r = *parent.process().resources;
  const auto posts = r.post_round(std::as_bytes(std::span<const std::int32_t>(mine)), what);
  std::vector<int> members;
  std::vector<std::int32_t> keys(posts.size());
  for (std::size_t q = 0; q < posts.size(); ++q) {
    std::int32_t ck[2] = {no_color, 0};
    if (posts[q].size() == sizeof ck) std::memcpy(ck, posts[q].data(), sizeof ck);
    keys[q] = ck[1];
    if (color >= 0 && ck[0] == color) members.push_back(static_cast<int>(q));
  }
  std::stable_sort(members.begin(), members.end(),
                   [&](int a, int b) { return keys[static_cast<std::size_t>(a)] < keys[static_cast<std::size_t>(b)]; });
  const int new_rank =
      color >= 0 ? static_cast<int>(std::find(members.begin(), members.end(), rank) - members.begin()) : -1;
  ipc_detail::mailbox_bootstrap sub(r, std::move(members), new_rank);
  std::shared_ptr<world> child;
  std::exception_ptr failed;
  try {
    if (new_rank >= 0) child = join_world(sub, parent.device_of(rank), parent.opts());
  } catch (...) {
    failed = std::current_exception();
  }
  while (sub.rounds() < ipc_detail::join_rounds) sub.barrier();  // keep every rank's round count equal
  if (failed) std::rethrow_exception(failed);
  return child;
}

}  // namespace gpu
COLLCOMM_NAMESPACE_END
