// collcomm/host/process_world.hpp — host worlds whose ranks are processes of one host: made from
// a bootstrap, split from a parent world, and the staging of direct calls through the segment.
//
//   // every process (torchrun, mpirun, a fork loop ...):
//   auto boot = collcomm::bootstrap::from_env();
//   collcomm::communicator<collcomm::transport::host_shm> comm(boot);   // make_process_world below
//   collcomm::all_reduce(comm, send, recv, count);
//   auto half = comm.split(comm.rank() % 2, comm.rank());                 // std::optional<communicator>
//
// make_process_world(boot, options) is collective over the bootstrap's ranks (all of them, in the
// same order as their other bootstrap calls), and so is split over the parent's ranks. Both
// follow detail/shm_segment.hpp's life: one rank creates the segment under a fresh random name and
// tells the others that name, they open it, the last to map it unlinks the name, and a last
// exchange says every rank mapped it (each unlinks it again, in case that one died). Every step is bounded by a timeout (the bootstrap's, or the parent world's) and a
// failure anywhere — a segment that cannot be made, options that differ, a rank that died — is an
// error on every rank, naming the rank it came from.
//
// Direct algorithms across processes. one_shot, two_shot and direct load peers' buffers. A user
// buffer is private memory of its process; reading it from a peer would need process_vm_readv
// (refused between sibling processes under Yama ptrace_scope >= 1, and by many container seccomp
// profiles) or memory the user allocated from us. So a direct call stages through the segment
// (staged_call below): the rank copies its input into its window, the schedule runs on the window
// — peers read it there, at the same offsets, so the in-place layout and every schedule's
// reasoning about it hold unchanged — and the rank copies its output back after the schedule's
// last barrier. Two extra local copies, no change to the primitives or the schedules. FIFO
// algorithms (ring, tree, ...) move data through the connections and need no staging.
#pragma once

#include <collcomm/bootstrap/bootstrap.hpp>
#include <collcomm/config.hpp>
#include <collcomm/error.hpp>
#include <collcomm/host/options.hpp>
#include <collcomm/detail/join.hpp>
#include <collcomm/detail/shm_segment.hpp>
#include <collcomm/host/world.hpp>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <sched.h>
#include <unistd.h>

COLLCOMM_NAMESPACE_BEGIN

// The color of a rank that joins no new communicator in communicator::split (any negative color
// does the same), as NCCL_SPLIT_NOCOLOR and MPI_UNDEFINED.
inline constexpr int no_color = -1;

namespace host {
namespace detail {

struct hello_record {
  std::uint64_t token;  // rank 0's identifies the world (control_block::token)
  std::int64_t pid;
  std::int32_t channels, slots;
  std::uint64_t slot_bytes, window_bytes;
  std::uint64_t cpus[16];  // the CPUs (0 ... 1023) this process may run on, a bit each
};

// This process's CPUs as hello_record::cpus: its affinity mask (all bits where it cannot be read).
inline void own_cpus(std::uint64_t (&bits)[16]) {
  std::memset(bits, 0, sizeof bits);
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < 1024 && c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) bits[c / 64] |= std::uint64_t{1} << (c % 64);
    return;
  }
#endif
  std::memset(bits, 0xff, sizeof bits);
}

// What the creator of a segment tells the other ranks: the name it created, or why it could not.
struct created_record {
  char name[128];
  char status[384];
};

template <std::size_t N>
void set_text(char (&dst)[N], const std::string& text) noexcept {
  const std::size_t k = std::min(text.size(), N - 1);
  std::memcpy(dst, text.data(), k);
  dst[k] = '\0';
}

// A rank other than the creator mapped and checked `seg`: counts it in the control block, and the
// last of the world's ranks to do so unlinks the name at once (the creator counts as mapped).
inline void note_mapped(const collcomm::detail::shm_segment& seg, int nranks, const options& o) {
  auto* c = reinterpret_cast<control_block*>(seg.base() + segment_layout(nranks, o).control);
  if (sys_atomic<std::uint32_t>(c->mapped).fetch_add(1, cuda::std::memory_order_acq_rel) + 1 ==
      static_cast<std::uint32_t>(nranks))
    collcomm::detail::shm_segment::unlink(seg.name());
}

}  // namespace detail

// A world of boot.size() processes in which this process is rank boot.rank(). Collective over the
// bootstrap. Every rank must pass the same options (timeout aside: each rank bounds its own
// waits); a rank whose options differ from rank 0's is an errc::invalid_argument on every rank,
// naming it and the option. Throws errc::system when the segment cannot be made or opened (with
// the OS's reason), and whatever the bootstrap throws (a timeout naming the missing ranks).
template <bootstrap::bootstrap_like B>
std::shared_ptr<world> make_process_world(B& boot, options opt = {}) {
  const int n = boot.size(), r = boot.rank();
  const char* where = "host::make_process_world";
  world::check_options(n, opt, where);

  detail::hello_record hello{r == 0 ? collcomm::detail::random_token() : 0,
                             static_cast<std::int64_t>(::getpid()),
                             opt.channels,
                             opt.slots,
                             opt.slot_bytes,
                             opt.window_bytes,
                             {}};
  detail::own_cpus(hello.cpus);
  std::vector<std::byte> all(sizeof hello * static_cast<std::size_t>(n));
  boot.all_gather(std::span<const std::byte>(reinterpret_cast<const std::byte*>(&hello), sizeof hello),
                  std::span<std::byte>(all));
  std::vector<detail::hello_record> hellos(static_cast<std::size_t>(n));
  std::memcpy(hellos.data(), all.data(), all.size());
  for (int q = 1; q < n; ++q) {
    const auto& h = hellos[static_cast<std::size_t>(q)];
    const auto& h0 = hellos[0];
    auto differs = [&](const char* name, auto mine, auto root) {
      if (mine != root)
        collcomm::detail::fail(errc::invalid_argument, where, r,
                               "rank " + std::to_string(q) + " passes option '" + name + "' = " + std::to_string(mine) +
                                   ", rank 0 passes " + std::to_string(root) +
                                   ": every rank must pass the same options");
    };
    differs("channels", h.channels, h0.channels);
    differs("slots", h.slots, h0.slots);
    differs("slot_bytes", h.slot_bytes, h0.slot_bytes);
    differs("window_bytes", h.window_bytes, h0.window_bytes);
  }
  const std::uint64_t token = hellos[0].token;
  const detail::segment_layout layout(n, opt, where, r);
  // Automatic cpus (options::cpus, which decides how ranks wait): the CPUs any rank may run on (a
  // launcher that binds each rank to a core gives each a mask of one).
  if (opt.cpus == 0) {
    for (int w = 0; w < 16; ++w) {
      std::uint64_t any = 0;
      for (const auto& h : hellos) any |= h.cpus[w];
      opt.cpus += std::popcount(any);
    }
  }

  // Rank 0 creates the segment under a fresh name and gives every rank that name (or its error);
  // from then on every rank unlinks it on its way out of an error.
  detail::created_record made{};
  collcomm::detail::shm_segment seg;
  if (r == 0) {
    try {
      seg = collcomm::detail::shm_segment::create("w", layout.total, 0);
      world::init_segment(seg.base(), n, opt, token);
      detail::set_text(made.name, seg.name());
    } catch (const error& e) {
      detail::set_text(made.status, e.what());
    }
  }
  std::vector<detail::created_record> made_all;
  try {
    made_all = collcomm::detail::all_gather_records(boot, made);  // the segment exists (or not)
  } catch (...) {  // a rank is gone before it learned the name: its creator removes it
    if (r == 0 && made.name[0] != '\0')
      collcomm::detail::shm_segment::unlink(std::string(made.name, strnlen(made.name, sizeof made.name)));
    throw;
  }
  const std::string name(made_all[0].name, strnlen(made_all[0].name, sizeof made.name));
  try {
    if (made_all[0].status[0] != '\0')
      collcomm::detail::fail(errc::system, where, r,
                             "rank(s) 0 could not join the shared-memory world: " +
                                 std::string(made_all[0].status, strnlen(made_all[0].status, sizeof made.status)));
    std::string err;
    std::shared_ptr<world> w;
    try {
      if (r != 0) {
        seg = collcomm::detail::shm_segment::open(name, layout.total, r);
        if (std::string bad = world::check_segment(seg.base(), n, opt); !bad.empty())
          collcomm::detail::fail(errc::system, where, r, bad);
        detail::note_mapped(seg, n, opt);
      }
      w = std::make_shared<world>(detail::process_tag{}, std::move(seg), n, r, opt);
    } catch (const error& e) {
      err = e.what();
    }
    std::vector<std::string> errs = collcomm::detail::exchange_status(boot, err);  // every rank mapped it
    collcomm::detail::shm_segment::unlink(name);
    collcomm::detail::check_statuses(errs, where, r, "the shared-memory world");
    return w;
  } catch (...) {
    collcomm::detail::shm_segment::unlink(name);
    throw;
  }
}

// Removes what jobs killed while they made a world, a split or a dup left in /dev/shm (names of
// segments whose creator's process is gone; detail/shm_segment.hpp says when that happens). Every
// segment creation does it too; call it to clean up without making a world (a job's epilogue, a
// cron job). Removes the GPU executor's segments too. Returns how many names it removed.
inline int remove_stale_segments() noexcept { return collcomm::detail::remove_stale_segments(); }

namespace detail {

inline void set_status(rank_info& me, std::uint64_t seq, const std::string& err) noexcept {
  const std::size_t k = std::min(err.size(), rank_info::text_bytes - 1);
  std::memcpy(me.status_text, err.data(), k);
  me.status_text[k] = '\0';
  me.status = err.empty() ? 0 : 1;
  me.status_seq = seq;
}

// The split of `parent` (a world of processes) by this process's rank `rank`: see
// communicator::split. Returns null for a negative color. Collective over the parent's ranks,
// through its control channel (barrier channel opts().channels) and its rank_info records:
//   A  each rank writes (seq, color, key); barrier
//   B  each group's leader (its new rank 0) creates, initializes and maps the group's segment
//      under a fresh name and writes that name and its status; barrier
//   C  the other members read the name, open and map it (unless the leader failed; the last one to
//      map it unlinks it) and write their status; barrier
//   D  every member unlinks the name (a no-op but for a member that died inside C); every member
//      checks every member's status.
// A rank's record is written only between two barriers in which no rank reads it (the statuses of
// split k are read before C(k) or right after it, and rewritten only after A(k + 1)).
inline std::shared_ptr<world> split_world(world& parent, int rank, int color, int key) {
  const char* what = "split";
  if (!parent.is_process() || rank != parent.local_rank())
    collcomm::detail::fail(errc::invalid_usage, what, rank,
                           "split and dup need a world of processes (host::make_process_world or "
                           "communicator(bootstrap)); a world of threads has no segment to share");
  parent.check_usable(what, rank);
  const int n = parent.size(), ctl = parent.opts().channels;
  const std::uint64_t seq = parent.next_split_seq();
  if (color < 0) color = no_color;
  rank_info& me = parent.info(rank);
  me.split_seq = seq;
  me.color = color;
  me.key = key;
  parent.barrier(ctl, rank, what);  // A

  // The group: every rank of this color, ordered by (key, old rank).
  std::vector<int> members;
  for (int q = 0; q < n; ++q) {
    const rank_info& o = parent.info(q);
    if (o.split_seq != seq)
      parent.fail(errc::invalid_usage, what, rank,
                  "rank " + std::to_string(q) + " is in split #" + std::to_string(o.split_seq) +
                      ", this rank in split #" + std::to_string(seq) +
                      ": every rank must call split and dup in the same order");
    if (color >= 0 && o.color == color) members.push_back(q);
  }
  std::stable_sort(members.begin(), members.end(),
                   [&](int a, int b) { return parent.info(a).key < parent.info(b).key; });
  const bool in_group = color >= 0;
  const int new_n = static_cast<int>(members.size());
  const int new_rank =
      in_group ? static_cast<int>(std::find(members.begin(), members.end(), rank) - members.begin()) : -1;
  const int leader = in_group ? members[0] : -1;
  const std::uint64_t child_token = collcomm::detail::mix64(
      parent.token() ^ collcomm::detail::mix64(seq * 0x100000001b3ull + static_cast<std::uint64_t>(leader)));
  const options opt = parent.opts();
  const segment_layout layout(in_group ? new_n : 1, opt, what, rank);

  std::shared_ptr<world> w;
  std::string name;  // once this rank knows it: unlinked on every way out
  try {
    std::string err;
    collcomm::detail::shm_segment seg;
    if (in_group && rank == leader) {
      try {
        seg = collcomm::detail::shm_segment::create("s", layout.total, rank);
        name = seg.name();
        world::init_segment(seg.base(), new_n, opt, child_token);
        w = std::make_shared<world>(process_tag{}, std::move(seg), new_n, new_rank, opt);
      } catch (const error& e) {
        err = e.what();
      }
      set_text(me.segment_name, name);
      set_status(me, seq, err);
    }
    parent.barrier(ctl, rank, what);  // B
    if (in_group && rank != leader) {
      const rank_info& l = parent.info(leader);
      name.assign(l.segment_name, strnlen(l.segment_name, sizeof l.segment_name));
      if (l.status != 0) err = "rank " + std::to_string(leader) + " (the new rank 0) failed: " + l.status_text;
      try {
        if (err.empty()) {
          seg = collcomm::detail::shm_segment::open(name, layout.total, rank);
          if (std::string bad = world::check_segment(seg.base(), new_n, opt); !bad.empty())
            collcomm::detail::fail(errc::system, what, rank, bad);
          note_mapped(seg, new_n, opt);
          w = std::make_shared<world>(process_tag{}, std::move(seg), new_n, new_rank, opt);
        }
      } catch (const error& e) {
        err = e.what();
      }
      set_status(me, seq, err);
    }
    parent.barrier(ctl, rank, what);  // C
    if (!in_group) return nullptr;
    // Every member, not only the last to map it: one that dies right after C must not leave the name.
    collcomm::detail::shm_segment::unlink(name);
    std::string ranks, first;
    for (int q : members) {
      const rank_info& o = parent.info(q);
      if (o.status_seq == seq && o.status == 0) continue;
      ranks += (ranks.empty() ? "" : ", ") + std::to_string(q);
      if (first.empty()) first = o.status_seq == seq ? std::string(o.status_text) : "no status recorded";
    }
    if (!ranks.empty())
      collcomm::detail::fail(errc::system, what, rank,
                             "rank(s) " + ranks + " of the parent could not join the new communicator: " + first);
    return w;
  } catch (...) {
    collcomm::detail::shm_segment::unlink(name);
    throw;
  }
}

// A direct call's buffers staged through this rank's window (see the file comment). Throws
// errc::invalid_argument (nothing moved, on every rank alike: the sizes follow from the call's
// arguments) when they do not fit the window.
template <class T>
class staged_call {
 public:
  staged_call(world& w, int rank, const char* what, const char* algo, const T* in, index_t in_elems, T* out,
              index_t out_elems)
      : user_out_(out), out_bytes_(out_elems * sizeof(T)) {
    const std::size_t in_bytes = in_elems * sizeof(T);
    std::byte* win = w.window(rank);
    const auto ia = reinterpret_cast<std::uintptr_t>(in), oa = reinterpret_cast<std::uintptr_t>(out);
    std::size_t need = 0, in_at = 0, out_at = 0;
    if (in_bytes != 0 && out_bytes_ != 0 && ia < oa + out_bytes_ && oa < ia + in_bytes) {
      // In place: the same relative placement as the user's buffers.
      const std::uintptr_t lo = std::min(ia, oa), hi = std::max(ia + in_bytes, oa + out_bytes_);
      need = hi - lo;
      in_at = ia - lo;
      out_at = oa - lo;
    } else {
      out_at = (in_bytes + 63) / 64 * 64;
      need = out_at + out_bytes_;
    }
    if (need > w.window_bytes())
      collcomm::detail::fail(errc::invalid_argument, what, rank,
                             std::string("algorithm ") + algo +
                                 " reads peers' buffers, which across processes go through " +
                                 "each rank's window of the shared segment: this call needs " + std::to_string(need) +
                                 " bytes, more than option 'window_bytes' = " + std::to_string(w.window_bytes()) +
                                 "; raise it, or use a FIFO algorithm (ring, tree, pairwise)");
    in_ = in_bytes ? reinterpret_cast<const T*>(win + in_at) : nullptr;
    out_ = out_bytes_ ? reinterpret_cast<T*>(win + out_at) : nullptr;
    if (in_bytes) std::memcpy(const_cast<T*>(in_), in, in_bytes);
  }
  const T* in() const noexcept { return in_; }
  T* out() const noexcept { return out_; }
  // After the schedule: the result to the user's output.
  void copy_out() const noexcept {
    if (out_bytes_) std::memcpy(static_cast<void*>(user_out_), out_, out_bytes_);
  }

 private:
  T* user_out_;
  std::size_t out_bytes_;
  const T* in_ = nullptr;
  T* out_ = nullptr;
};

}  // namespace detail
}  // namespace host
COLLCOMM_NAMESPACE_END
