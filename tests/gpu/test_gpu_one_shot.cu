// One-shot all_reduce among ranks that share one GPU (label gpu). Their launch carries every rank,
// so a call whose channel range fits one 16-byte vector per thread is reduced in registers with no
// barrier (kernels/grouped_call.cuh); a larger or misaligned call takes the schedule. Every op on
// element types of 1 to 8 bytes, on both sides of that bound, on 1 and 3 channels, N = 1, 2, 3, 8
// and 11 ranks (more than eight: two passes over the ranks), from a CUDA graph, buffers one element
// off their 16-byte alignment, and every rank's output bitwise the same; every output element checked.
#include "gpu_harness.cuh"

#include <barrier>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace collcomm;
using namespace collcomm_gpu_test;

namespace {

// The most elements a call of `channels` channels reduces in registers: a 16-byte vector for each of
// a block's threads on each channel.
template <class T>
constexpr index_t register_bound(int channels) {
  return static_cast<index_t>(channels) * tuning<>::threads * static_cast<index_t>(16 / sizeof(T));
}

template <class T, class Op>
void one_op(gpu::world& w, const Op& op) {
  if constexpr (valid_composition<kind::all_reduce, algo::one_shot, transport::nvlink, Op, T>) {
    const int n = w.size();
    const index_t bound = register_bound<T>(1);
    for (index_t count : {index_t{1}, index_t{5}, index_t{777}, bound, bound + 1}) {
      INFO(std::string(element_name<T>), " ", std::string(op_name<Op>()), " n=", n, " count=", count,
           " seed=", fresh_seed());
      CHECK_EQ((run_case<kind::all_reduce, algo::one_shot, T, tuning<protocol::simple, 1>>(
                   w, case_config{n, count, 0, false}, op)),
               "");
    }
    // Three channels: ranges cut on 16-byte vectors, the last short or empty.
    for (index_t count : {index_t{3}, index_t{1001}, register_bound<T>(3), register_bound<T>(3) + 17}) {
      INFO(std::string(element_name<T>), " ", std::string(op_name<Op>()), " n=", n, " count=", count,
           " channels=3 seed=", fresh_seed());
      CHECK_EQ((run_case<kind::all_reduce, algo::one_shot, T, tuning<protocol::simple, 3>>(
                   w, case_config{n, count, 0, false}, op)),
               "");
    }
  }
}

template <class... Ts>
void every_op(gpu::world& w, type_list<Ts...> types) {
  for_each_type(types, [&]<class T>(std::type_identity<T>) {
    one_op<T>(w, op::sum{});
    one_op<T>(w, op::prod{});
    one_op<T>(w, op::min{});
    one_op<T>(w, op::max{});
    one_op<T>(w, op::avg{});
    one_op<T>(w, op::premul_sum<double>{2.0});
    one_op<T>(w, op::bit_xor{});
  });
}

}  // namespace

TEST_CASE("one_shot all_reduce of ranks sharing a GPU, small and just larger: every op, types of 1 to 8 bytes") {
  gpu::options o;
  o.channels = 4;
  for (int n : {1, 2, 3, 8, 11}) {
    gpu::world w(n, {}, o);
    if (n == 3)
      every_op(
          w, type_list<float, double, __half, __nv_bfloat16, std::int8_t, std::uint8_t, std::int32_t, std::int64_t>{});
    else
      every_op(w, type_list<float, std::int64_t, __half>{});
  }
}

TEST_CASE("one_shot all_reduce of ranks sharing a GPU, small calls captured into a CUDA graph and replayed") {
  gpu::options o;
  o.channels = 4;
  gpu::world w(8, {}, o);
  for (index_t count : {index_t{2}, index_t{2048}}) {
    INFO("count=", count, " seed=", fresh_seed());
    CHECK_EQ((run_case<kind::all_reduce, algo::one_shot, float, tuning<protocol::simple, 1>>(
                 w, case_config{8, count, 0, false}, op::sum{}, true)),
             "");
  }
}

namespace {

// Each rank (a thread of its own) runs one_shot all_reduce on one channel of its row of x, its
// input in_off[r] and its output out_off[r] elements into buffers that start on 16-byte boundaries
// (the output poisoned first, with an element to spare on each side); got[r] is rank r's whole
// output buffer (count + 2 elements, the output at out_off[r]). Returns each rank's error ("" none).
template <class Op>
std::vector<std::string> one_shot_on_threads(gpu::world& w, const std::vector<std::vector<float>>& x,
                                             const std::vector<index_t>& in_off, const std::vector<index_t>& out_off,
                                             const Op& op, std::vector<std::vector<float>>& got) {
  const int n = w.size();
  const index_t count = static_cast<index_t>(x[0].size());
  std::vector<std::string> errors(n);
  got.assign(n, std::vector<float>(count + 2));
  std::barrier sync_point(n);  // every rank's buffers set up before any launches, freed after all end
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      cudaSetDevice(w.device_of(r));
      communicator<transport::nvlink> comm(w, r);
      cudaStream_t s;
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
      float *in = nullptr, *out = nullptr;
      cudaMalloc(&in, (count + 1) * sizeof(float));
      cudaMalloc(&out, (count + 2) * sizeof(float));
      cudaMemcpy(in + in_off[r], x[r].data(), count * sizeof(float), cudaMemcpyHostToDevice);
      cudaMemset(out, 0xFF, (count + 2) * sizeof(float));
      cudaDeviceSynchronize();
      sync_point.arrive_and_wait();
      try {
        all_reduce<algo::one_shot, tuning<protocol::simple, 1>>(comm, in + in_off[r], out + out_off[r], count, op, s);
        if (cudaStreamSynchronize(s) != cudaSuccess) errors[r] = "the stream failed";
        comm.check();
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
      cudaMemcpy(got[r].data(), out, (count + 2) * sizeof(float), cudaMemcpyDeviceToHost);
      sync_point.arrive_and_wait();
      cudaFree(in);
      cudaFree(out);
      cudaStreamDestroy(s);
    });
  for (auto& t : threads) t.join();
  return errors;
}

// n ranks' inputs of `count` random small integers (fresh each run), whose float sums are exact in
// any order; `want`: their sums.
std::vector<std::vector<float>> small_integers(int n, index_t count, std::vector<double>& want) {
  std::mt19937_64 g(fresh_seed() ^ static_cast<std::uint64_t>(count));
  std::vector<std::vector<float>> x(n, std::vector<float>(count));
  want.assign(count, 0.0);
  for (int r = 0; r < n; ++r)
    for (index_t i = 0; i < count; ++i) {
      x[r][i] = static_cast<float>(static_cast<int>(g() % 201) - 100);
      want[i] += x[r][i];
    }
  return x;
}

std::uint32_t bits_of(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

}  // namespace

// Buffers one element past a 16-byte boundary: every rank's input and output (every block takes
// the schedule, whose loads need no alignment), or only the outputs of odd ranks (their blocks take
// the schedule, the others reduce in registers). Inputs are small integers, so the float sums are
// exact in any order; the elements beside each output keep their poison.
TEST_CASE("one_shot all_reduce of ranks sharing a GPU, buffers not 16-byte aligned") {
  const int n = 4;
  gpu::world w(n);
  for (const bool inputs_off : {true, false})
    for (index_t count : {index_t{7}, index_t{1000}}) {
      std::vector<double> want;
      const std::vector<std::vector<float>> x = small_integers(n, count, want);
      std::vector<index_t> in_off(n), out_off(n);
      for (int r = 0; r < n; ++r) in_off[r] = inputs_off ? 1 : 0, out_off[r] = inputs_off || r % 2 ? 1 : 0;
      std::vector<std::vector<float>> got;
      std::vector<std::string> errors = one_shot_on_threads(w, x, in_off, out_off, op::sum{}, got);
      for (int r = 0; r < n; ++r) {
        const index_t o = out_off[r];
        for (index_t i : {index_t{0}, count, count + 1})
          if ((i < o || i >= o + count) && errors[r].empty() && bits_of(got[r][i]) != 0xFFFFFFFFu)
            errors[r] = "an element beside the output was written";
        for (index_t i = 0; i < count && errors[r].empty(); ++i)
          if (static_cast<double>(got[r][i + o]) != want[i])
            errors[r] = "element " + std::to_string(i) + ": got " + std::to_string(got[r][i + o]) + " expected " +
                        std::to_string(want[i]);
        INFO("rank ", r, " count=", count, " inputs off=", inputs_off, " seed=", fresh_seed());
        CHECK_EQ(errors[r], "");
      }
    }
}

// Every rank reduces in rank order, so every rank's output is bitwise the same, whichever way its
// blocks go: random floats (not exact in any order), 11 ranks (two passes over the ranks), odd
// ranks' outputs off their alignment (their blocks take the schedule, the others reduce in
// registers); each element also within float rounding of a float64 reference.
TEST_CASE("one_shot all_reduce of ranks sharing a GPU: every rank's output bitwise the same") {
  const int n = 11;
  gpu::options o;
  o.channels = 4;
  gpu::world w(n, {}, o);
  const index_t count = 1500;
  std::mt19937_64 g(fresh_seed());
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<std::vector<float>> x(n, std::vector<float>(count));
  for (auto& row : x)
    for (auto& e : row) e = u(g);
  std::vector<index_t> in_off(n, 0), out_off(n);
  for (int r = 0; r < n; ++r) out_off[r] = r % 2;
  auto check = [&](const auto& op, double scale) {
    std::vector<std::vector<float>> got;
    std::vector<std::string> errors = one_shot_on_threads(w, x, in_off, out_off, op, got);
    for (int r = 0; r < n; ++r)
      for (index_t i = 0; i < count && errors[r].empty() && errors[0].empty(); ++i) {
        const float v = got[r][i + out_off[r]];
        double want = 0, size = 0;
        for (int q = 0; q < n; ++q) want += scale * x[q][i], size += std::abs(scale * x[q][i]);
        if (bits_of(v) != bits_of(got[0][i + out_off[0]]))
          errors[r] = "element " + std::to_string(i) + " differs from rank 0's: " + std::to_string(v) + " against " +
                      std::to_string(got[0][i + out_off[0]]);
        else if (std::abs(v - want) > 4e-7 * n * size + 1e-30)
          errors[r] = "element " + std::to_string(i) + ": got " + std::to_string(v) + " expected " + std::to_string(want);
      }
    for (int r = 0; r < n; ++r) {
      INFO(std::string(op_name<std::decay_t<decltype(op)>>()), " rank ", r, " seed=", fresh_seed());
      CHECK_EQ(errors[r], "");
    }
  };
  check(op::sum{}, 1.0);
  check(op::premul_sum<double>{0.37}, 0.37);
}

// A world whose abort word is raised (as the first wait that times out raises it; written here from
// the host, which does not know) stays failed on the GPU: a call reduced in registers and one
// through the schedule both return at once and leave every output as it was. The word lowered
// again, the same world reduces both correctly.
TEST_CASE("one_shot all_reduce of ranks sharing a GPU: a raised abort word leaves every output untouched") {
  const int n = 4;
  gpu::world w(n);
  std::uint32_t* const word = w.handle<transport::nvlink_handle<transport::scope_device>>(0).entry_abort;
  for (index_t count : {register_bound<float>(1), register_bound<float>(1) + 1}) {  // registers, schedule
    std::vector<double> want;
    const std::vector<std::vector<float>> x = small_integers(n, count, want);
    const std::vector<index_t> offsets(n, 0);
    for (const std::uint32_t raised : {1u, 0u}) {
      REQUIRE_EQ(cudaMemcpy(word, &raised, sizeof raised, cudaMemcpyHostToDevice), cudaSuccess);
      std::vector<std::vector<float>> got;
      std::vector<std::string> errors = one_shot_on_threads(w, x, offsets, offsets, op::sum{}, got);
      for (int r = 0; r < n; ++r) {
        if (raised) {
          errors[r].clear();  // the host does not know the world failed: what it says is not checked
          for (index_t i = 0; i < count + 2 && errors[r].empty(); ++i)
            if (bits_of(got[r][i]) != 0xFFFFFFFFu) errors[r] = "element " + std::to_string(i) + " was written";
        } else {
          for (index_t i = 0; i < count && errors[r].empty(); ++i)
            if (static_cast<double>(got[r][i]) != want[i])
              errors[r] = "element " + std::to_string(i) + ": got " + std::to_string(got[r][i]) + " expected " +
                          std::to_string(want[i]);
        }
        INFO("rank ", r, " count=", count, " abort word ", raised, " seed=", fresh_seed());
        CHECK_EQ(errors[r], "");
      }
    }
  }
}
