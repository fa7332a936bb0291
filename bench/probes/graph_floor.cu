// bench/probes/graph_floor.cu — what a kernel replayed from a CUDA graph costs on this GPU, and what
// the least one-shot all_reduce of ranks in one launch costs: the floor under collcomm's small
// calls from a graph (bench/RESULTS.md, "Where a graph-replayed small call's time goes").
//
//   graph_floor [calls=200] [reps=9]
//
// Every row: `calls` launches captured into one graph on one stream, replayed once untimed, then
// `reps` times between two CUDA events; printed: µs per launch, the median and the range of reps.
//   empty      P-byte parameter block, a grid of (1, ranks) blocks of 512 threads, cooperative or not;
//              thread 0 of each block adds one parameter byte to a counter (every launch checked)
//   one_shot   the least one-shot all_reduce of `ranks` ranks in one launch: block y (rank y) reads
//              the ranks' input pointers and the count from its parameters, sums element i of every
//              input in rank order and stores it to its output (float4 where it can); no barrier
//              (the launch carries every rank: every input is ready when it starts), no abort
//              check, nothing staged. With `pad`, the parameter block is padded to 2424 bytes (the
//              size of collcomm's kernel_params). Among 8 ranks, then, the pieces of collcomm's kernel
//              around the same reduction, one at a time and together (one_shot_kernel's modes).
//              Outputs checked against the sums after the run.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

namespace {

constexpr int max_ranks = 8;

template <int P>
struct blob {
  unsigned char b[P];
};

template <int P>
__global__ void __launch_bounds__(512) empty_kernel(const __grid_constant__ blob<P> p, unsigned* counter) {
  if (threadIdx.x == 0) atomicAdd(&counter[blockIdx.y], 1u + p.b[(blockIdx.y * 37) % P]);
}

template <int Pad>
struct one_shot_params {
  const float* in[max_ranks];
  float* out[max_ranks];
  long long count;
  int ranks;
  unsigned char pad[Pad];
};

// Mode bits, each a piece of what collcomm's kernel does around the same reduction:
//   check (1)   thread 0 loads a word of global memory (the world's abort word) first; the block
//               goes on after a __syncthreads, and returns if it is set
//   generic (2) the input pointers are read through a generic pointer to the parameters (as
//               collcomm's channel_state::launch: cvta.param, then ld, not ld.param), not as
//               parameters at constant offsets (the pointer is hidden from the compiler)
//   shared (4)  threads 0..ranks-1 copy the input pointers to shared memory between two
//               __syncthreads (as load_peer_ptrs: one parameter address per thread), and every
//               thread reads them there
//   warps (8)   as shared, but warp w loads pointer w (one parameter address per warp)
enum mode : int { lean = 0, check = 1, generic = 2, shared = 4, warps = 8 };

template <int Pad, int Mode>
__global__ void __launch_bounds__(512)
    one_shot_kernel(const __grid_constant__ one_shot_params<Pad> p, const unsigned* abort_word) {
  __shared__ const float* ptrs[max_ranks];
  __shared__ int aborted;
  if constexpr ((Mode & check) != 0) {
    if (threadIdx.x == 0) aborted = *reinterpret_cast<const volatile unsigned*>(abort_word) != 0;
    __syncthreads();
    if (aborted) return;
  }
  const one_shot_params<Pad>* g = &p;
  if constexpr ((Mode & generic) != 0) asm volatile("" : "+l"(g));  // a generic address from here on
  auto in = [&](int q) -> const float* {
    if constexpr ((Mode & (shared | warps)) != 0)
      return ptrs[q];
    else if constexpr ((Mode & generic) != 0)
      return g->in[q];
    else
      return p.in[q];
  };
  if constexpr ((Mode & shared) != 0) {
    __syncthreads();
    if (threadIdx.x < max_ranks && static_cast<int>(threadIdx.x) < p.ranks)
      ptrs[threadIdx.x] = (Mode & generic) != 0 ? g->in[threadIdx.x] : p.in[threadIdx.x];
    __syncthreads();
  } else if constexpr ((Mode & warps) != 0) {
    __syncthreads();
    const int w = static_cast<int>(threadIdx.x / 32);
    if ((threadIdx.x & 31) == 0 && w < max_ranks && w < p.ranks) ptrs[w] = (Mode & generic) != 0 ? g->in[w] : p.in[w];
    __syncthreads();
  }
  const int y = blockIdx.y;
  const long long n = p.count;
  const long long n4 = n / 4;
  for (long long i = threadIdx.x; i < n4; i += blockDim.x) {
    float4 s = reinterpret_cast<const float4*>(in(0))[i];
#pragma unroll
    for (int q = 1; q < max_ranks; ++q)
      if (q < p.ranks) {
        const float4 v = reinterpret_cast<const float4*>(in(q))[i];
        s.x += v.x;
        s.y += v.y;
        s.z += v.z;
        s.w += v.w;
      }
    reinterpret_cast<float4*>(p.out[y])[i] = s;
  }
  for (long long i = 4 * n4 + threadIdx.x; i < n; i += blockDim.x) {
    float s = in(0)[i];
    for (int q = 1; q < p.ranks; ++q) s += in(q)[i];
    p.out[y][i] = s;
  }
}

struct timing {
  double median, lo, hi;
};

// Captures `calls` launches made by `launch(stream)` into one graph, replays it once, then `reps`
// times between events: µs per launch.
template <class F>
timing time_graph(int calls, int reps, F&& launch) {
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int c = 0; c < calls; ++c) launch(s);
  cudaGraph_t g;
  CK(cudaStreamEndCapture(s, &g));
  cudaGraphExec_t exec;
  CK(cudaGraphInstantiate(&exec, g, 0));
  CK(cudaGraphLaunch(exec, s));
  CK(cudaStreamSynchronize(s));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<double> us;
  for (int r = 0; r < reps; ++r) {
    CK(cudaEventRecord(a, s));
    CK(cudaGraphLaunch(exec, s));
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    us.push_back(1e3 * ms / calls);
  }
  std::sort(us.begin(), us.end());
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  CK(cudaGraphExecDestroy(exec));
  CK(cudaGraphDestroy(g));
  CK(cudaStreamDestroy(s));
  return {us[us.size() / 2], us.front(), us.back()};
}

template <class Kernel, class... Args>
void launch_kernel(Kernel k, dim3 grid, int threads, bool coop, cudaStream_t s, Args... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(static_cast<unsigned>(threads), 1, 1);
  cfg.stream = s;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeCooperative;
  attr.val.cooperative = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = coop ? 1 : 0;
  CK(cudaLaunchKernelEx(&cfg, k, args...));
}

int failures = 0;

template <int P>
void empty_row(int ranks, bool coop, int calls, int reps) {
  unsigned* counter = nullptr;
  CK(cudaMalloc(&counter, sizeof(unsigned) * max_ranks));
  CK(cudaMemset(counter, 0, sizeof(unsigned) * max_ranks));
  blob<P> p{};
  for (int i = 0; i < P; ++i) p.b[i] = static_cast<unsigned char>(i % 3);
  const timing t = time_graph(calls, reps, [&](cudaStream_t s) {
    launch_kernel(empty_kernel<P>, dim3(1, static_cast<unsigned>(ranks), 1), 512, coop, s, p, counter);
  });
  std::vector<unsigned> got(max_ranks);
  CK(cudaMemcpy(got.data(), counter, sizeof(unsigned) * max_ranks, cudaMemcpyDeviceToHost));
  for (int y = 0; y < ranks; ++y) {
    const unsigned want = static_cast<unsigned>(calls * (reps + 1)) * (1u + p.b[(y * 37) % P]);
    if (got[static_cast<std::size_t>(y)] != want) {
      std::printf("# empty P=%d rank %d: counter %u, want %u\n", P, y, got[static_cast<std::size_t>(y)], want);
      ++failures;
    }
  }
  std::printf("empty     params %5d B  ranks %d  %-14s %7.2f µs (%.2f-%.2f)\n", P, ranks,
              coop ? "cooperative" : "not cooperative", t.median, t.lo, t.hi);
  CK(cudaFree(counter));
}

template <int Pad, int Mode>
void one_shot_row(int ranks, long long count, bool coop, int calls, int reps, const unsigned* abort_word) {
  one_shot_params<Pad> p{};
  p.count = count;
  p.ranks = ranks;
  std::vector<std::vector<float>> x(static_cast<std::size_t>(ranks),
                                    std::vector<float>(static_cast<std::size_t>(count)));
  std::vector<float> want(static_cast<std::size_t>(count), 0.0f);
  for (int q = 0; q < ranks; ++q) {
    for (long long i = 0; i < count; ++i) {
      x[static_cast<std::size_t>(q)][static_cast<std::size_t>(i)] = static_cast<float>((q * 7 + i * 3) % 11);
      want[static_cast<std::size_t>(i)] += x[static_cast<std::size_t>(q)][static_cast<std::size_t>(i)];
    }
    float *in = nullptr, *out = nullptr;
    CK(cudaMalloc(&in, sizeof(float) * static_cast<std::size_t>(count)));
    CK(cudaMalloc(&out, sizeof(float) * static_cast<std::size_t>(count)));
    CK(cudaMemcpy(in, x[static_cast<std::size_t>(q)].data(), sizeof(float) * static_cast<std::size_t>(count),
                  cudaMemcpyHostToDevice));
    CK(cudaMemset(out, 0xff, sizeof(float) * static_cast<std::size_t>(count)));
    p.in[q] = in;
    p.out[q] = out;
  }
  const timing t = time_graph(calls, reps, [&](cudaStream_t s) {
    launch_kernel(one_shot_kernel<Pad, Mode>, dim3(1, static_cast<unsigned>(ranks), 1), 512, coop, s, p, abort_word);
  });
  std::vector<float> got(static_cast<std::size_t>(count));
  for (int q = 0; q < ranks; ++q) {
    CK(cudaMemcpy(got.data(), p.out[q], sizeof(float) * static_cast<std::size_t>(count), cudaMemcpyDeviceToHost));
    if (got != want) {
      std::printf("# one_shot rank %d: wrong output\n", q);
      ++failures;
    }
    CK(cudaFree(const_cast<float*>(p.in[q])));
    CK(cudaFree(p.out[q]));
  }
  const std::string what = std::string(Mode == lean ? "lean" : "") + ((Mode & check) ? "+check" : "") +
                           ((Mode & generic) ? "+generic" : "") + ((Mode & shared) ? "+shared" : "") +
                           ((Mode & warps) ? "+warps" : "");
  std::printf("one_shot  params %5zu B  ranks %d  %-14s %6lld B  %-22s %7.2f µs (%.2f-%.2f)\n", sizeof p, ranks,
              coop ? "cooperative" : "not cooperative", count * 4, what.c_str(), t.median, t.lo, t.hi);
}

}  // namespace

int main(int argc, char** argv) {
  const int calls = argc > 1 ? std::atoi(argv[1]) : 200;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 9;
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# %s, %d SMs; %d launches per graph, median of %d replays\n", prop.name, prop.multiProcessorCount, calls,
              reps);
  for (bool coop : {true, false}) {
    empty_row<16>(1, coop, calls, reps);
    empty_row<16>(8, coop, calls, reps);
    empty_row<256>(8, coop, calls, reps);
    empty_row<1024>(8, coop, calls, reps);
    empty_row<2424>(8, coop, calls, reps);
    empty_row<4096>(8, coop, calls, reps);
  }
  unsigned* abort_word = nullptr;
  CK(cudaMalloc(&abort_word, sizeof(unsigned)));
  CK(cudaMemset(abort_word, 0, sizeof(unsigned)));
  for (int ranks : {2, 4, 8})
    for (long long count : {2LL, 2048LL}) {
      one_shot_row<1, lean>(ranks, count, true, calls, reps, abort_word);
      one_shot_row<1, lean>(ranks, count, false, calls, reps, abort_word);
      one_shot_row<2424 - 144, lean>(ranks, count, true, calls, reps, abort_word);
      if (ranks != 8) continue;
      one_shot_row<2424 - 144, check>(ranks, count, true, calls, reps, abort_word);
      one_shot_row<2424 - 144, generic>(ranks, count, true, calls, reps, abort_word);
      one_shot_row<2424 - 144, shared>(ranks, count, true, calls, reps, abort_word);
      one_shot_row<2424 - 144, warps>(ranks, count, true, calls, reps, abort_word);
      one_shot_row<2424 - 144, generic | shared>(ranks, count, true, calls, reps, abort_word);
      one_shot_row<2424 - 144, check | warps>(ranks, count, true, calls, reps, abort_word);
      one_shot_row<2424 - 144, check | generic | shared>(ranks, count, true, calls, reps, abort_word);
    }
  CK(cudaFree(abort_word));
  std::printf("# %s\n", failures == 0 ? "every output checked: right" : "WRONG outputs (above)");
  return failures == 0 ? 0 : 1;
}
