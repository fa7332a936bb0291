// One-shot all_reduce among ranks that share one GPU (label gpu). Their launch carries every rank,
// so a call whose channel range fits one 16-byte vector per thread is reduced in registers with no
// barrier (kernels/grouped_call.cuh); a larger or misaligned call takes the schedule. Every op on
// element types of 1 to 8 bytes, on both sides of that bound, on 1 and 3 channels, N = 1, 2, 3, 8
// and 11 ranks (more than eight: two passes over the ranks), from a CUDA graph, and buffers one
// element off their 16-byte alignment; every output element checked.
#include "gpu_harness.cuh"

#include <barrier>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace collcomm;
using namespace collcomm_gpu_test;

namespace {

// The most elements a call of `channels` channels reduces in registers: a 16-byte vector for each of
// a block's 512 threads on each channel.
template <class T>
constexpr index_t register_bound(int channels) {
  return static_cast<index_t>(channels) * 512 * static_cast<index_t>(16 / sizeof(T));
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

// Buffers one element past a 16-byte boundary: every rank's input and output (every block takes
// the schedule, whose loads need no alignment), or only the outputs of odd ranks (their blocks take
// the schedule, the others reduce in registers). Inputs are small integers, so the float sums are
// exact in any order.
TEST_CASE("one_shot all_reduce of ranks sharing a GPU, buffers not 16-byte aligned") {
  const int n = 4;
  gpu::world w(n);
  for (const bool inputs_off : {true, false})
  for (index_t count : {index_t{7}, index_t{1000}}) {
    std::mt19937_64 g(fresh_seed() ^ static_cast<std::uint64_t>(count));
    std::vector<std::vector<float>> x(n, std::vector<float>(count));
    std::vector<double> want(count, 0.0);
    for (int r = 0; r < n; ++r)
      for (index_t i = 0; i < count; ++i) {
        x[r][i] = static_cast<float>(static_cast<int>(g() % 201) - 100);
        want[i] += x[r][i];
      }
    std::vector<std::string> errors(n);
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
        const index_t in_off = inputs_off ? 1 : 0, out_off = inputs_off || r % 2 ? 1 : 0;
        cudaMemcpy(in + in_off, x[r].data(), count * sizeof(float), cudaMemcpyHostToDevice);
        cudaMemset(out, 0xFF, (count + 2) * sizeof(float));  // poison, and the element on each side
        cudaDeviceSynchronize();
        sync_point.arrive_and_wait();
        try {
          all_reduce<algo::one_shot, tuning<protocol::simple, 1>>(comm, in + in_off, out + out_off, count, op::sum{},
                                                                  s);
          if (cudaStreamSynchronize(s) != cudaSuccess) errors[r] = "the stream failed";
          comm.check();
        } catch (const std::exception& e) {
          errors[r] = e.what();
        }
        std::vector<float> got(count + 2);
        cudaMemcpy(got.data(), out, (count + 2) * sizeof(float), cudaMemcpyDeviceToHost);
        for (index_t i : {index_t{0}, count, count + 1})  // the elements beside the output keep their poison
          if (i < out_off || i >= out_off + count) {
            std::uint32_t bits;
            std::memcpy(&bits, &got[i], 4);
            if (errors[r].empty() && bits != 0xFFFFFFFFu) errors[r] = "an element beside the output was written";
          }
        for (index_t i = 0; i < count && errors[r].empty(); ++i)
          if (static_cast<double>(got[i + out_off]) != want[i])
            errors[r] = "element " + std::to_string(i) + ": got " + std::to_string(got[i + out_off]) + " expected " +
                        std::to_string(want[i]);
        sync_point.arrive_and_wait();
        cudaFree(in);
        cudaFree(out);
        cudaStreamDestroy(s);
      });
    for (auto& t : threads) t.join();
    for (int r = 0; r < n; ++r) {
      INFO("rank ", r, " count=", count, " inputs off=", inputs_off);
      CHECK_EQ(errors[r], "");
    }
  }
}
