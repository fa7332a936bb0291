// tests/gpu/gpu_harness.cuh — runs one collective on the GPU executor among N ranks (threads of
// this process, one stream each, all on GPU 0) and checks every output element.
//
// Inputs are small integers chosen per type and op so that every partial result of every
// reduction order is exact in the element type (the nccl-tests idea): then the reference, the
// same op applied on the host in rank order, must match bit for bit, and any lost, doubled or
// misplaced contribution shows. Inputs are drawn fresh each run (fresh_seed, printed by the tests
// with every failure). Outputs are poisoned first; outputs that are not significant on a rank must
// keep their poison (check_outputs.hpp lays out, poisons and checks every rank's buffers).
//
// A call reaches the executor one of two ways, a "call path" type:
//   via_launch<K, Algo, Tuning, Tr>  gpu::launch with a tuning (the protocol, channels, slot bytes), over transport Tr;
//   via_api<K, Algo, Tr, Tuning>     the host API: communicator<Tr> and the kind's function (collectives.hpp).
// run_case_via<Via, T> runs one case through either; run_case and run_api_case are its two spellings.
// run_schedules sweeps every schedule of a group of kinds (schedule_groups below), so that the
// test translation units can each instantiate one group.
#pragma once

#include "check_outputs.hpp"

#include <collcomm/collectives.hpp>
#include <collcomm/gpu.hpp>
#include <common/exact_reference.hpp>
#include <common/matrix.hpp>
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <barrier>
#include <initializer_list>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace collcomm_gpu_test {
using namespace collcomm;
using namespace collcomm_test;

#define GPU_CHECK(x) REQUIRE_EQ((x), cudaSuccess)

// The op a schedule sweep uses for kind K: sum where K reduces, none elsewhere.
template <class K>
using kind_op = std::conditional_t<K::reduces, op::sum, op::none>;

// Call path: gpu::launch<K, Algo, Tuning, Tr> (the executor, with a call-site tuning such as the ll protocol).
template <class K, class Algo, class Tuning = tuning<>, class Tr = transport::nvlink>
struct via_launch {
  using coll_kind = K;
  template <class T, class Op>
  static void preload() {
    gpu::preload_composition<K, Algo, T, Op, Tuning, Tr>();
  }
  template <class T, class Op>
  static void call(gpu::world& w, int rank, const coll_args& a, const T* in, T* out, const Op& op, cudaStream_t s) {
    gpu::launch<K, Algo, Tuning, Tr>(w, rank, a, in, out, op, s);
  }
};

// Call path: the host API (collectives.hpp) on a communicator<Tr> of the world (Tr's placement
// must be the world's: pcie_staged for placement::host, nvlink or pcie for placement::device).
template <class K, class Algo, class Tr, class Tuning = tuning<>>
struct via_api {
  using coll_kind = K;
  template <class T, class Op>
  static void preload() {
    if constexpr (is_automatic<Algo>)  // every arm of its table, and the classic algorithm
      detail::for_each_arm<K, typename Algo::table, Tr, Op, T>(
          []<class A, class Tu>(std::type_identity<A>, std::type_identity<Tu>) {
            gpu::preload_composition<K, A, T, Op, Tu, Tr>();
          });
    else
      gpu::preload_composition<K, Algo, T, Op, Tuning, Tr>();
  }
  template <class T, class Op>
  static void call(gpu::world& w, int rank, const coll_args& a, const T* in, T* out, const Op& op, cudaStream_t s) {
    communicator<Tr> comm(w, rank);
    if constexpr (std::is_same_v<K, kind::all_reduce>)
      all_reduce<Algo, Tuning>(comm, in, out, a.count, op, s);
    else if constexpr (std::is_same_v<K, kind::reduce_scatter>)
      reduce_scatter<Algo, Tuning>(comm, in, out, a.count, op, s);
    else if constexpr (std::is_same_v<K, kind::all_gather>)
      all_gather<Algo, Tuning>(comm, in, out, a.count, s);
    else if constexpr (std::is_same_v<K, kind::broadcast>)
      broadcast<Algo, Tuning>(comm, in, out, a.count, a.root, s);
    else if constexpr (std::is_same_v<K, kind::reduce>)
      reduce<Algo, Tuning>(comm, in, out, a.count, op, a.root, s);
    else if constexpr (std::is_same_v<K, kind::all_to_all>)
      all_to_all<Algo, Tuning>(comm, in, out, a.count, s);
    else if constexpr (std::is_same_v<K, kind::send_recv>)
      send_recv<Algo, Tuning>(comm, in, out, a.count, a.send_peer, a.recv_peer, s);
    else
      static_assert(sizeof(K) == 0, "kind not covered by via_api");
  }
};

// Runs the case through call path Via; returns the first mismatch as text ("" when every element
// of every rank is right). send_recv: rank r sends to r + 1 and receives from r - 1.
// use_graph: every rank's call is captured into ONE graph (the ranks' streams forked from one
// capturing stream, as ranks that share a GPU need), replayed 3 times (once in place).
// repeat: out of place, each rank queues the call `repeat` times back to back, no host barrier.
template <class Via, class T, class Op>
std::string run_case_via(gpu::world& w, const case_config& c, const Op& op, bool use_graph = false, int repeat = 1) {
  using K = typename Via::coll_kind;
  const int n = c.nranks;
  std::vector<buffer_layout> layouts;
  for (int r = 0; r < n; ++r) layouts.push_back(layout_of<K>(c, r));
  std::mt19937_64 g(fresh_seed() ^ (c.count * 7919u) ^ static_cast<unsigned>(n));
  std::vector<std::vector<T>> x(n, std::vector<T>(layouts[0].in_elems));
  for (int s = 0; s < n; ++s)
    for (index_t i = 0; i < layouts[0].in_elems; ++i) x[s][i] = random_value<T, Op>(g, n, s, i);
  const auto expect = reference<K>(x, c, op);

  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  // Ranks spin-wait for each other inside their kernels, and cudaMalloc, cudaMemset, cudaFree and
  // graph instantiation may wait for every kernel on the device: so no rank may call them while a
  // peer's kernel runs. Every rank prepares, all launch, all synchronize, then all clean up.
  std::barrier sync_point(n);
  cudaStream_t origin = nullptr;  // the capture's stream (rank 0's thread)
  cudaEvent_t fork = nullptr;
  std::vector<cudaEvent_t> joins(n, nullptr);
  cudaGraphExec_t exec = nullptr;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        cudaSetDevice(w.device_of(r));
        cudaStream_t s;
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        call_buffers<T> buf(layouts[r]);
        buf.prepare(x[r]);
        coll_args a{};
        a.rank = r;
        a.nranks = n;
        a.count = c.count;
        a.root = c.root;
        if constexpr (std::is_same_v<K, kind::send_recv>) {
          a.send_peer = mod(r + 1, n);
          a.recv_peer = mod(r - 1, n);
        }
        std::string launch_error;
        auto launch = [&] {
          try {
            Via::call(w, r, a, buf.input(), buf.output(), op, s);
          } catch (const std::exception& ex) {
            launch_error = ex.what();
          }
        };
        Via::template preload<T, Op>();
        cudaEventCreateWithFlags(&joins[r], cudaEventDisableTiming);
        if (r == 0 && use_graph) {
          cudaStreamCreateWithFlags(&origin, cudaStreamNonBlocking);
          cudaEventCreateWithFlags(&fork, cudaEventDisableTiming);
        }
        cudaDeviceSynchronize();
        sync_point.arrive_and_wait();  // every rank's setup is done before anyone captures
        cudaGraph_t graph = nullptr;
        if (use_graph) {
          if (r == 0) {
            cudaStreamBeginCapture(origin, cudaStreamCaptureModeRelaxed);
            cudaEventRecord(fork, origin);
          }
          sync_point.arrive_and_wait();
          cudaStreamWaitEvent(s, fork, 0);  // this rank's stream joins the capture
          launch();
          cudaEventRecord(joins[r], s);
          sync_point.arrive_and_wait();
          if (r == 0) {
            for (int q = 0; q < n; ++q) cudaStreamWaitEvent(origin, joins[q], 0);
            const cudaError_t ce = cudaStreamEndCapture(origin, &graph);
            if (ce != cudaSuccess && launch_error.empty())
              launch_error = std::string("capture: ") + cudaGetErrorString(ce);
            if (graph && cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess && launch_error.empty())
              launch_error = "cudaGraphInstantiate failed";
            if (exec) cudaGraphUpload(exec, origin);
            cudaStreamSynchronize(origin);
          }
        }
        // A device-wide synchronize would invalidate a capture still in progress.
        sync_point.arrive_and_wait();
        cudaDeviceSynchronize();
        sync_point.arrive_and_wait();
        if (use_graph) {
          // Replays: the inputs are unchanged unless in place, so replay several times out of place.
          if (r == 0 && exec)
            for (int i = 0; i < (c.in_place ? 1 : 3); ++i) cudaGraphLaunch(exec, origin);
          if (r == 0) cudaStreamSynchronize(origin);
        } else {
          for (int i = 0; i < (c.in_place ? 1 : repeat); ++i) launch();
        }
        const cudaError_t e = cudaStreamSynchronize(s);
        sync_point.arrive_and_wait();
        if (graph) cudaGraphDestroy(graph);
        if (r == 0 && exec) cudaGraphExecDestroy(exec);
        cudaEventDestroy(joins[r]);
        if (!launch_error.empty())
          errors[r] = launch_error;
        else if (e != cudaSuccess)
          errors[r] = std::string("CUDA: ") + cudaGetErrorString(e);
        else {
          try {
            gpu::check_stall(w, r);
            errors[r] = buf.check(expect[r], "rank " + std::to_string(r));
          } catch (const std::exception& ex) {
            errors[r] = ex.what();
          }
        }
        sync_point.arrive_and_wait();  // nobody frees (buf's destructor) while a peer's kernel may run
        cudaStreamDestroy(s);
        if (r == 0 && origin) {
          cudaStreamDestroy(origin);
          cudaEventDestroy(fork);
        }
      } catch (const std::exception& ex) {
        errors[r] = ex.what();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (!e.empty()) return e;
  return {};
}

// The executor's spelling: gpu::launch<K, Algo, Tuning> over nvlink (the matrix and most tests).
template <class K, class Algo, class T, class Tuning = tuning<>, class Op>
std::string run_case(gpu::world& w, const case_config& c, const Op& op, bool use_graph = false, int repeat = 1) {
  return run_case_via<via_launch<K, Algo, Tuning>, T>(w, c, op, use_graph, repeat);
}

// The host API's spelling: communicator<Tr> (pcie_staged for a world made with placement::host,
// nvlink or pcie for one with placement::device), out of place queued `repeat` times.
template <class K, class Algo, class T, class Op, class Tr = transport::pcie_staged, class Tuning = tuning<>>
std::string run_api_case(gpu::world& w, const case_config& c, const Op& op, int repeat = 1) {
  return run_case_via<via_api<K, Algo, Tr, Tuning>, T>(w, c, op, false, repeat);
}

// Groups of schedules: a predicate `has<K, A>` on a kind and an algorithm. The schedule sweeps are
// the expensive part of a test to compile (a kernel per schedule, per protocol, per device handle),
// so each translation unit instantiates one group; the groups of kinds cover every kind once.
namespace schedule_groups {
// all_reduce, reduce_scatter: the reductions without a root.
struct reducing {
  template <class K, class A>
  static constexpr bool has = K::reduces && !K::rooted;
};
// all_gather, all_to_all, send_recv: data moved, nothing reduced, no root.
struct moving {
  template <class K, class A>
  static constexpr bool has = !K::reduces && !K::rooted;
};
// broadcast, reduce, gather, scatter: the kinds with a root.
struct rooted {
  template <class K, class A>
  static constexpr bool has = K::rooted;
};
struct every {
  template <class K, class A>
  static constexpr bool has = true;
};
// The schedules of G that need no direct (load/store) access to peers: those a FIFO-only
// transport (pcie_staged) runs.
template <class G>
struct fifo {
  template <class K, class A>
  static constexpr bool has = G::template has<K, A> && !A::needs_direct;
};
}  // namespace schedule_groups

// Calls f(type_identity<K>, type_identity<A>) for every schedule (for_each_schedule) in group G.
template <class G, class F>
void for_each_schedule_in(F&& f) {
  for_each_schedule([&]<class K, class A>(std::type_identity<K> k, std::type_identity<A> a) {
    if constexpr (G::template has<K, A>) f(k, a);
  });
}

// How run_schedules sweeps each schedule.
struct sweep {
  std::vector<index_t> counts;
  int repeat = 1;                // calls queued per rank out of place
  bool places_and_roots = true;  // in and out of place where the schedule allows, roots 0 and N-1 where
                                 // the kind has one; false: out of place, root 0
  const char* label = "";        // said with every failure (e.g. the protocol)
};

// Every schedule of group G on world w: f32, kind_op<K>, through gpu::launch with Tuning.
template <class G, class Tuning = tuning<>>
void run_schedules(gpu::world& w, const sweep& sw) {
  const int n = w.size();
  for_each_schedule_in<G>([&]<class K, class A>(std::type_identity<K>, std::type_identity<A>) {
    const int places = sw.places_and_roots && has_in_place<K> && supports_in_place<A> ? 2 : 1;
    const int nroots = sw.places_and_roots && K::rooted ? 2 : 1;
    for (index_t count : sw.counts)
      for (int place = 0; place < places; ++place)
        for (int ri = 0; ri < nroots; ++ri) {
          const case_config c{n, count, ri == 0 ? 0 : n - 1, place == 1};
          INFO(std::string(K::name), " ", std::string(A::name), " ", sw.label, " n=", n, " count=", count,
               " root=", c.root, " in_place=", c.in_place, " repeat=", sw.repeat, " channels=", w.opts().channels,
               " seed=", fresh_seed());
          CHECK_EQ((run_case<K, A, float, Tuning>(w, c, kind_op<K>{}, false, sw.repeat)), "");
        }
  });
}

// The counts of the schedule sweeps on n ranks: empty, one element, one more than the ranks, and
// two that do not divide evenly (the larger taking many slices of a 4 KiB slot).
inline std::vector<index_t> sweep_counts(int n) {
  return {index_t{0}, index_t{1}, static_cast<index_t>(n + 1), index_t{1031}, index_t{40009}};
}

}  // namespace collcomm_gpu_test
