// transport::pcie on the GPU (label gpu): connections staged through pinned host memory
// (gpu::placement::host), forced on the one GPU of the test machine so that every message goes
// GPU -> host -> GPU over PCIe. Every FIFO schedule of every kind, N = 1, 2, 3, 4, 8 ranks,
// counts that do not divide evenly, in and out of place, 20 calls queued, the ll protocol, the
// host API through communicator<transport::pcie_staged>, direct algorithms on P2P (transport::pcie)
// and run on the P2P path, and faults (a rank that never joins, ranks that disagree on the count).
// Fresh random inputs each run (the seed is printed with every failure), outputs poisoned, every
// element checked against an exact reference.
#include "gpu_harness.cuh"

#include <collcomm/algo/one_shot.hpp>
#include <collcomm/algo/recursive_doubling.hpp>
#include <collcomm/algo/tree.hpp>
#include <collcomm/gpu.hpp>

#include <barrier>
#include <chrono>
#include <thread>

using namespace collcomm;
using namespace collcomm_gpu_test;
using collcomm_test::for_each_schedule;

namespace {

template <class K>
using kind_op = std::conditional_t<K::reduces, op::sum, op::none>;

gpu::options staged_options(int channels = 2) {
  gpu::options o;
  o.channels = channels;
  o.slot_bytes = 4096;  // small slots: large counts take many messages, slots are reused often
  o.timeout = std::chrono::milliseconds(5000);
  o.connections = gpu::placement::host;
  return o;
}

// Every FIFO schedule (direct ones are refused on the staged path: see below), out of place
// `repeat` times queued, and once in place.
void run_fifo_schedules(gpu::world& w, int repeat, std::initializer_list<index_t> counts) {
  const int n = w.size();
  for_each_schedule([&]<class K, class A>(std::type_identity<K>, std::type_identity<A>) {
    if constexpr (!A::needs_direct) {
      for (index_t count : counts) {
        for (int place = 0; place < (has_in_place<K> && supports_in_place<A> ? 2 : 1); ++place) {
          const int roots[] = {0, n - 1};
          for (int root : roots) {
            if (!K::rooted && root != 0) continue;
            case_config c{n, count, root, place == 1};
            INFO(std::string(K::name), " ", std::string(A::name), " staged n=", n, " count=", count, " root=", root, " in_place=", c.in_place,
                 " repeat=", repeat, " seed=", fresh_seed());
            CHECK_EQ(run_case<K, A, float>(w, c, kind_op<K>{}, false, repeat), "");
          }
        }
      }
    }
  });
}

// One call of kind K through the host API (collectives.hpp) on communicator<Tr> (pcie or pcie_staged).
template <class K, class Algo, class T, class Op, class Tr>
void api_call(communicator<Tr>& comm, const T* in, T* out, const case_config& c, const Op& op, cudaStream_t s) {
  const int r = comm.rank(), n = comm.size();
  if constexpr (std::is_same_v<K, kind::all_reduce>) all_reduce<Algo>(comm, in, out, c.count, op, s);
  else if constexpr (std::is_same_v<K, kind::reduce_scatter>) reduce_scatter<Algo>(comm, in, out, c.count, op, s);
  else if constexpr (std::is_same_v<K, kind::all_gather>) all_gather<Algo>(comm, in, out, c.count, s);
  else if constexpr (std::is_same_v<K, kind::broadcast>) broadcast<Algo>(comm, in, out, c.count, c.root, s);
  else if constexpr (std::is_same_v<K, kind::reduce>) reduce<Algo>(comm, in, out, c.count, op, c.root, s);
  else if constexpr (std::is_same_v<K, kind::all_to_all>) all_to_all<Algo>(comm, in, out, c.count, s);
  else if constexpr (std::is_same_v<K, kind::send_recv>) send_recv<Algo>(comm, in, out, c.count, mod(r + 1, n), mod(r - 1, n), s);
  else static_assert(sizeof(K) == 0, "kind not covered by api_call");
}

// run_case's contract (gpu_harness.cuh) through the host API: each rank a thread with its own
// communicator<Tr> and stream (Tr: pcie_staged for a world made with placement::host, pcie for
// one with placement::device); fresh random inputs, poisoned outputs, every element (and the
// poison past the end) checked; out of place the call is queued `repeat` times.
template <class K, class Algo, class T, class Op, class Tr = transport::pcie_staged>
std::string run_api_case(gpu::world& w, const case_config& c, const Op& op, int repeat = 1) {
  const int n = c.nranks;
  coll_args base{};
  base.nranks = n;
  base.count = c.count;
  base.root = c.root;
  const index_t in_n = input_elems<K>(base), out_n = output_elems<K>(base);
  std::mt19937_64 g(fresh_seed() ^ (c.count * 104729u) ^ static_cast<unsigned>(n));
  std::vector<std::vector<T>> x(n, std::vector<T>(in_n));
  for (int s = 0; s < n; ++s)
    for (index_t i = 0; i < in_n; ++i) x[s][i] = random_value<T, Op>(g, n, s, i);
  const auto expect = reference<K>(x, c, op);
  std::vector<std::string> errors(n);
  std::barrier sync_point(n);  // no rank allocates or frees while a peer's kernel spins
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      cudaSetDevice(w.device_of(r));
      cudaStream_t s;
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
      const bool rs_in_place = c.in_place && std::is_same_v<K, kind::reduce_scatter>;
      const long ip = c.in_place ? in_place_offset<K>(c, r) : -1;
      const index_t out_alloc = rs_in_place ? in_n : out_n;
      T *d_in = nullptr, *d_out = nullptr;
      cudaMalloc(&d_out, (out_alloc + 1) * sizeof(T));
      cudaMemset(d_out, 0xA5, (out_alloc + 1) * sizeof(T));  // poison
      T* out_ptr = d_out;
      if (rs_in_place) {
        d_in = d_out;
        out_ptr = d_out + r * c.count;
      } else if (ip >= 0) {
        d_in = d_out + ip;
      } else {
        cudaMalloc(&d_in, (in_n + 1) * sizeof(T));
      }
      cudaMemcpy(d_in, x[r].data(), in_n * sizeof(T), cudaMemcpyHostToDevice);
      gpu::preload<K, Algo, T, Op, kernels::tuning<>, Tr>();
      cudaDeviceSynchronize();
      communicator<Tr> comm(w, r);
      sync_point.arrive_and_wait();
      std::string err;
      try {
        for (int i = 0; i < (c.in_place ? 1 : repeat); ++i) api_call<K, Algo>(comm, d_in, out_ptr, c, op, s);
      } catch (const std::exception& ex) {
        err = ex.what();
      }
      const cudaError_t e = cudaStreamSynchronize(s);
      sync_point.arrive_and_wait();
      if (err.empty() && e != cudaSuccess) err = std::string("CUDA: ") + cudaGetErrorString(e);
      if (err.empty()) {
        try {
          comm.check();
        } catch (const std::exception& ex) {
          err = ex.what();
        }
      }
      if (err.empty()) {
        std::vector<T> got(out_alloc + 1);
        cudaMemcpy(got.data(), d_out, (out_alloc + 1) * sizeof(T), cudaMemcpyDeviceToHost);
        T poison;
        std::memset(&poison, 0xA5, sizeof(T));
        const index_t off = rs_in_place ? r * c.count : 0;
        std::ostringstream msg;
        if (expect[r]) {
          const auto& ex = *expect[r];
          for (index_t i = 0; i < ex.size(); ++i)
            if (!same_bits(got[off + i], ex[i])) {
              msg << "rank " << r << " element " << i << ": got " << show(got[off + i]) << " expected " << show(ex[i]);
              break;
            }
        } else if (ip < 0) {
          for (index_t i = 0; i < out_n; ++i)
            if (!same_bits(got[i], poison)) {
              msg << "rank " << r << " non-significant output element " << i << " was written";
              break;
            }
        }
        if (!same_bits(got[out_alloc], poison)) msg << "rank " << r << " wrote past the end of its output";
        err = msg.str();
      }
      errors[r] = err;
      if (d_in != d_out && !rs_in_place && ip < 0) cudaFree(d_in);
      cudaFree(d_out);
      cudaStreamDestroy(s);
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (!e.empty()) return e;
  return {};
}

}  // namespace

TEST_CASE("staged pcie: placement::host puts the connections in mapped host memory") {
  gpu::world w(2, {}, staged_options());
  const transport::handle_fields h = w.fields(0);
  CHECK_FALSE(w.scope_is_device());  // host memory is on the other side of PCIe: system scope
  transport::fifo_view f{};
  REQUIRE_EQ(cudaMemcpy(&f, h.fifos + 1, sizeof f, cudaMemcpyDeviceToHost), cudaSuccess);  // (channel 0, src 0, dst 1)
  cudaPointerAttributes attr{};
  REQUIRE_EQ(cudaPointerGetAttributes(&attr, f.data), cudaSuccess);
  CHECK_EQ(attr.type, cudaMemoryTypeHost);
  REQUIRE_EQ(cudaPointerGetAttributes(&attr, f.tail), cudaSuccess);
  CHECK_EQ(attr.type, cudaMemoryTypeHost);
  // One GPU reaches itself: P2P (transport::pcie) fits; staging is the user's explicit choice here.
  CHECK(transport::all_peers_reachable({0, 0}));
}

TEST_CASE("staged pcie: every FIFO schedule, f32, N = 1, 2, 3, 4, 8 ranks on one GPU") {
  for (int n : {1, 2, 3, 4, 8}) {
    gpu::world w(n, {}, staged_options());
    run_fifo_schedules(w, 1, {index_t{0}, index_t{1}, static_cast<index_t>(n + 1), index_t{1031}, index_t{40009}});
  }
}

TEST_CASE("staged pcie: 20 calls queued per rank, every FIFO schedule, 8 ranks") {
  gpu::world w(8, {}, staged_options());
  run_fifo_schedules(w, 20, {index_t{1031}, index_t{40009}});
}

TEST_CASE("staged pcie: large slots, many channels, 4 ranks (the bench's shape)") {
  gpu::options o = staged_options(16);
  o.slot_bytes = std::size_t{256} << 10;
  gpu::world w(4, {}, o);
  for (index_t count : {index_t{1} << 20, (index_t{3} << 20) + 7}) {
    INFO("count=", count, " seed=", fresh_seed());
    CHECK_EQ((run_case<kind::all_reduce, algo::ring, float>(w, case_config{4, count, 0, false}, op::sum{}, false, 3)), "");
    CHECK_EQ((run_case<kind::all_gather, algo::ring, float>(w, case_config{4, count, 0, false}, op::none{}, false, 3)), "");
  }
}

TEST_CASE("staged pcie: the ll protocol through host memory") {
  using ring_ll = with_protocol<algo::ring, protocol::ll>;
  using tree_ll = with_protocol<algo::tree, protocol::ll>;
  for (int n : {2, 4}) {
    gpu::world w(n, {}, staged_options());
    for (index_t count : {index_t{1}, index_t{1031}, index_t{40009}}) {
      INFO("n=", n, " count=", count, " seed=", fresh_seed());
      CHECK_EQ((run_case<kind::all_reduce, ring_ll, float>(w, case_config{n, count, 0, false}, op::sum{}, false, 20)), "");
      CHECK_EQ((run_case<kind::all_reduce, tree_ll, float>(w, case_config{n, count, 0, false}, op::sum{}, false, 20)), "");
      CHECK_EQ((run_case<kind::all_gather, ring_ll, float>(w, case_config{n, count, 0, false}, op::none{}, false, 20)), "");
    }
  }
}

TEST_CASE("communicator<transport::pcie_staged>: the host API over staged connections, every kind") {
  for (int n : {1, 3, 4}) {
    gpu::world w(n, {}, staged_options());
    for (index_t count : {index_t{1}, index_t{1031}, index_t{40009}}) {
      for (int place = 0; place < 2; ++place) {
        const bool ip = place == 1;
        INFO("n=", n, " count=", count, " in_place=", ip, " seed=", fresh_seed());
        CHECK_EQ((run_api_case<kind::all_reduce, algo::ring, float>(w, case_config{n, count, 0, ip}, op::sum{}, 20)), "");
        CHECK_EQ((run_api_case<kind::all_reduce, algo::tree, float>(w, case_config{n, count, 0, ip}, op::sum{}, 20)), "");
        CHECK_EQ((run_api_case<kind::all_reduce, algo::recursive_doubling, float>(w, case_config{n, count, 0, ip}, op::max{}, 20)), "");
        CHECK_EQ((run_api_case<kind::reduce_scatter, algo::ring, float>(w, case_config{n, count, 0, ip}, op::sum{}, 20)), "");
        CHECK_EQ((run_api_case<kind::all_gather, algo::ring, float>(w, case_config{n, count, 0, ip}, op::none{}, 20)), "");
        CHECK_EQ((run_api_case<kind::broadcast, algo::ring, float>(w, case_config{n, count, n - 1, ip}, op::none{}, 20)), "");
        CHECK_EQ((run_api_case<kind::reduce, algo::ring, float>(w, case_config{n, count, n - 1, ip}, op::sum{}, 20)), "");
        if (!ip) {
          CHECK_EQ((run_api_case<kind::all_to_all, algo::pairwise, float>(w, case_config{n, count, 0, false}, op::none{}, 20)), "");
          CHECK_EQ((run_api_case<kind::send_recv, algo::p2p, float>(w, case_config{n, count, 0, false}, op::none{}, 20)), "");
        }
      }
    }
  }
}

// Over pcie_staged a direct algorithm does not compile (tests/compile_fail/transport_one_shot_over_pcie_staged.cu).
TEST_CASE("communicator<transport::pcie>: direct algorithms run on P2P") {
  // One GPU: P2P (device placement), where one_shot loads peers' buffers.
  auto w = std::make_unique<gpu::world>(4);
  REQUIRE_EQ(w->opts().connections, gpu::placement::device);
  for (index_t count : {index_t{1}, index_t{1031}, index_t{40009}}) {
    INFO("count=", count, " seed=", fresh_seed());
    CHECK_EQ((run_api_case<kind::all_reduce, algo::one_shot, float, op::sum, transport::pcie>(*w, case_config{4, count, 0, false}, op::sum{}, 20)), "");
    CHECK_EQ((run_api_case<kind::all_reduce, algo::ring, float, op::sum, transport::pcie>(*w, case_config{4, count, 0, true}, op::sum{}, 20)), "");
  }
}

TEST_CASE("staged pcie: a rank that never joins is named within the timeout [fault]") {
  gpu::options o = staged_options();
  o.timeout = std::chrono::milliseconds(300);
  {
    gpu::world w(2, {}, o);
    float *d_in = nullptr, *d_out = nullptr;
    REQUIRE_EQ(cudaMalloc(&d_in, 1024 * sizeof(float)), cudaSuccess);
    REQUIRE_EQ(cudaMalloc(&d_out, 1024 * sizeof(float)), cudaSuccess);
    communicator<transport::pcie_staged> comm(w, 0);
    const auto t0 = std::chrono::steady_clock::now();
    try {
      all_reduce(comm, d_in, d_out, 1024, op::sum{}, cudaStream_t{});  // rank 1 never calls
      FAIL("no error");
    } catch (const error& e) {
      CHECK_EQ(e.code(), errc::timeout);
      CHECK_EQ(e.rank(), 0);
      const std::string m = e.what();
      INFO(m);
      CHECK(m.find("rank(s) 1") != std::string::npos);
    }
    CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 3.0);
    try {
      all_reduce(comm, d_in, d_out, 1024, op::sum{}, cudaStream_t{});
      FAIL("no error");
    } catch (const error& e) {
      CHECK_EQ(e.code(), errc::aborted);
    }
    REQUIRE_EQ(cudaDeviceSynchronize(), cudaSuccess);
    cudaFree(d_in);
    cudaFree(d_out);
  }
  gpu::world w2(2, {}, staged_options());
  CHECK_EQ((run_case<kind::all_reduce, algo::ring, float>(w2, case_config{2, 1000, 0, false}, op::sum{})), "");
}

// Inside the kernel: the ring's waits on counters in host memory are bounded too. Ranks that
// disagree on the count stall; every rank's call ends within the timeout and check() names it.
TEST_CASE("staged pcie: ranks that disagree on the count: an error on every rank, no hang [fault]") {
  gpu::options o = staged_options(1);
  o.timeout = std::chrono::milliseconds(300);
  for (int n : {2, 4}) {
    gpu::world w(n, {}, o);
    std::vector<std::string> errors(n);
    std::vector<double> secs(n);
    std::vector<std::thread> threads;
    std::barrier sync_point(n);
    for (int r = 0; r < n; ++r)
      threads.emplace_back([&, r] {
        const index_t count = r == 1 ? 3000 : 5000;
        float *d_in = nullptr, *d_out = nullptr;
        cudaMalloc(&d_in, 5000 * sizeof(float));
        cudaMalloc(&d_out, 5000 * sizeof(float));
        cudaStream_t s;
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        communicator<transport::pcie_staged> comm(w, r);
        gpu::preload<kind::all_reduce, algo::ring, float, op::sum, kernels::tuning<>, transport::pcie_staged>();
        cudaDeviceSynchronize();
        sync_point.arrive_and_wait();
        const auto t0 = std::chrono::steady_clock::now();
        try {
          all_reduce(comm, d_in, d_out, count, op::sum{}, s);
          cudaStreamSynchronize(s);
          secs[r] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          comm.check();
        } catch (const error& e) {
          errors[r] = e.what();
        }
        sync_point.arrive_and_wait();
        cudaFree(d_in);
        cudaFree(d_out);
        cudaStreamDestroy(s);
      });
    for (auto& t : threads) t.join();
    for (int r = 0; r < n; ++r) {
      INFO("n=", n, " rank ", r, ": ", errors[r]);
      CHECK(errors[r].find("timed out waiting for") != std::string::npos);
      CHECK(secs[r] < 3.0);
    }
  }
  gpu::world w2(3, {}, staged_options());
  CHECK_EQ((run_case<kind::all_reduce, algo::ring, float>(w2, case_config{3, 1000, 0, false}, op::sum{})), "");
}
