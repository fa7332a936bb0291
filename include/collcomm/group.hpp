// collcomm/group.hpp — collcomm::group: a rank's point-to-point calls made together (as NCCL's
// ncclGroupStart / ncclGroupEnd).
//
//   collcomm::group([&] {
//     collcomm::send(comm, mine, count, next, stream);
//     collcomm::recv(comm, theirs, count, prev, stream);
//   });  // one send_recv call (one launch on the GPU) when the function returns
//
// Inside the function, send and recv check their arguments and return at once; nothing moves. When
// the function returns, the calls run as send_recv calls in steps, as NCCL schedules its peers:
// at step d = 0, 1, ..., n - 1 a rank sends to rank + d and receives from rank - d (mod n), so
// whatever a rank sends at step d its peer receives at step d. A step's send and receive of the
// same count run as one send_recv call; a step with only one of them, or counts that differ,
// runs them one after the other (send first). Calls of different communicators, algorithms,
// tunings, element types or streams run one set after the other, in the order of their first
// call; several messages to one peer keep their order. So ranks whose groups hold matching calls
// make matching send_recv calls, in any order of calls inside the group: MPI's even/odd exchange
// among ranks of one GPU (whose i-th calls launch together) completes in a group, where separate
// calls are refused (gpu/launch.hpp). Ranks of one GPU must reach each step with the same number of
// calls; a group whose ranks skip different steps is refused there too, never hangs. In a group a
// rank may send to and receive from itself (step 0: a copy, of one count).
//
// Other calls (collectives, send_recv) inside the function run when they are called. Groups nest:
// the outermost one runs the calls. Buffers must stay valid until the group returns. If the
// function throws, its deferred calls are dropped and the exception propagates; if a deferred
// call throws, the calls after it are dropped. Each thread has its own group (a rank's calls are
// one thread's).
#pragma once

#include <collcomm/config.hpp>
#include <collcomm/error.hpp>
#include <collcomm/types.hpp>

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

COLLCOMM_NAMESPACE_BEGIN

namespace detail {

// One deferred send or recv. `run` is the composition's runner (collectives.hpp), chosen when
// the call was made: the group's set-up path holds these pointers, the data path does not.
struct deferred_p2p {
  void* comm = nullptr;       // the communicator (its identity, and what run calls through)
  const void* key = nullptr;  // the composition: the address of composition_tag<Algo, Tuning, Tr, T>
  void* stream = nullptr;     // the GPU stream (converted when the call was made); null on the host
  void* buf = nullptr;        // a send's input or a recv's output
  index_t count = 0;
  int peer = -1;
  int rank = -1;  // the calling rank
  int size = 0;   // the communicator's size
  bool is_send = false;
  bool on_stream = false;  // a GPU call (a communicator that takes host buffers too, transport::net)
  void (*run)(const deferred_p2p* send, const deferred_p2p* recv) = nullptr;
};

// A distinct address per composition (one per program: an inline variable).
template <class... Composition>
inline constexpr char composition_tag = 0;

struct group_state {
  std::vector<deferred_p2p> calls;
  int depth = 0;
};

inline group_state& this_thread_group() {
  thread_local group_state g;
  return g;
}

inline bool in_group() { return this_thread_group().depth > 0; }

// The step of a call: a send to rank + d or a receive from rank - d (mod size).
inline int step_of(const deferred_p2p& c) {
  const int d = c.is_send ? c.peer - c.rank : c.rank - c.peer;
  return ((d % c.size) + c.size) % c.size;
}

inline bool same_set(const deferred_p2p& a, const deferred_p2p& b) {
  return a.comm == b.comm && a.key == b.key && a.stream == b.stream;
}

// Runs the calls of a group (above): per set, per step, the k-th send with the k-th receive.
inline void run_group(const std::vector<deferred_p2p>& calls) {
  std::vector<bool> set_done(calls.size(), false);
  for (std::size_t first = 0; first < calls.size(); ++first) {
    if (set_done[first]) continue;
    std::vector<const deferred_p2p*> set;
    for (std::size_t i = first; i < calls.size(); ++i)
      if (!set_done[i] && same_set(calls[first], calls[i])) {
        set_done[i] = true;
        set.push_back(&calls[i]);
      }
    const int n = calls[first].size;
    for (int d = 0; d < n; ++d) {
      std::vector<const deferred_p2p*> sends, recvs;
      for (const deferred_p2p* c : set)
        if (step_of(*c) == d) (c->is_send ? sends : recvs).push_back(c);
      if (d == 0 && sends.size() != recvs.size())
        fail(errc::invalid_argument, "group", calls[first].rank,
             std::to_string(sends.size()) + " send(s) to this rank and " + std::to_string(recvs.size()) +
                 " recv(s) from this rank in the group: a rank's message to itself is a copy, a send and a recv of one "
                 "count");
      for (std::size_t k = 0; k < std::max(sends.size(), recvs.size()); ++k) {
        const deferred_p2p* s = k < sends.size() ? sends[k] : nullptr;
        const deferred_p2p* r = k < recvs.size() ? recvs[k] : nullptr;
        if (s && r && s->count != r->count) {
          if (d == 0)
            fail(errc::invalid_argument, "group", s->rank,
                 "a send to this rank of count " + std::to_string(s->count) + " and a recv from this rank of count " +
                     std::to_string(r->count) + ": a rank's message to itself is a copy of one count");
          s->run(s, nullptr);
          r->run(nullptr, r);
        } else {
          (s ? s : r)->run(s, r);
        }
      }
    }
  }
}

}  // namespace detail

// Calls f(); the send and recv calls it makes on this thread run, paired, when it returns (above).
template <class F>
void group(F&& f) {
  detail::group_state& g = detail::this_thread_group();
  if (g.depth > 0) {  // nested: the outermost group runs the calls
    struct leave {
      detail::group_state& g;
      ~leave() { --g.depth; }
    } l{g};
    ++g.depth;
    std::forward<F>(f)();
    return;
  }
  g.depth = 1;
  try {
    std::forward<F>(f)();
  } catch (...) {
    g.calls.clear();
    g.depth = 0;
    throw;
  }
  std::vector<detail::deferred_p2p> calls = std::move(g.calls);
  g.calls.clear();
  g.depth = 0;  // the runners' send_recv calls run at once
  detail::run_group(calls);
}

COLLCOMM_NAMESPACE_END
